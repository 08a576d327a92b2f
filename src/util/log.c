/* log: leveled messages to stderr, level from env TUNEPACK_LOG. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "util/util.h"

static const char *const level_names[] = {"error", "warn", "info", "debug"};

/* The level currently asked for by TUNEPACK_LOG (read on each call, so no
 * state is cached); unknown or unset means info. */
static int log_threshold(void) {
    const char *v = getenv("TUNEPACK_LOG");
    if (!v || !*v) return TP_LOG_INFO;
    for (size_t i = 0; i < TP_ARRAY_LEN(level_names); i++)
        if (strcasecmp(v, level_names[i]) == 0) return (int)i;
    if (strcasecmp(v, "warning") == 0) return TP_LOG_WARN;
    return TP_LOG_INFO;
}

/* Print "tunepack: <level>: msg\n" to stderr in one write when level is at
 * or below the threshold. */
void tp__log(int level, const char *fmt, ...) {
    if (level < TP_LOG_ERROR) level = TP_LOG_ERROR;
    if (level > TP_LOG_DEBUG) level = TP_LOG_DEBUG;
    if (level > log_threshold()) return;
    char line[2048];
    int off = snprintf(line, sizeof line, "tunepack: %s: ", level_names[level]);
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(line + off, sizeof line - (size_t)off - 1, fmt, ap);
    va_end(ap);
    size_t n = strlen(line);
    line[n] = '\n';
    fwrite(line, 1, n + 1, stderr);
}
