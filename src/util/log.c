/* log: leveled messages to stderr, level from env TUNEPACK_LOG. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "util/util.h"

static const char *const level_names[] = {"error", "warn", "info", "debug"};

/* The one mutable state here, for the one stream it stands for (see
 * tp__log_set_sink): NULL writes to stderr. */
static tp_log_sink_t log_sink;
static void *log_sink_ud;

void tp__log_set_sink(tp_log_sink_t sink, void *ud) {
    log_sink = sink;
    log_sink_ud = ud;
}

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

/* The line as it is written: its control characters escaped (a trial's
 * words in it must not reach a terminal or a CI log raw, docs/output.md),
 * its line breaks kept. */
void tp__log_line(const char *line, size_t n) {
    tp_buf_t shown;
    tp__buf_init(&shown);
    tp__buf_escape(&shown, line, n, TP_ESC_KEEP_NL);
    if (log_sink)
        log_sink(log_sink_ud, shown.data, shown.len);
    else
        fwrite(shown.data, 1, shown.len, stderr);
    tp__buf_free(&shown);
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
    tp__log_line(line, n + 1);
}
