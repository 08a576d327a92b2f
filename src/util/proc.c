/* proc: what a process id stands for now. */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/types.h>

#include "util/util.h"

int tp__pid_alive(long pid) {
    if (pid <= 0) return 0;
    if (kill((pid_t)pid, 0) != 0 && errno != EPERM) return 0;
    char path[64], stat_line[512];
    snprintf(path, sizeof path, "/proc/%ld/stat", pid);
    FILE *f = fopen(path, "re");
    if (!f) return 1; /* no /proc: trust kill */
    char *ok = fgets(stat_line, sizeof stat_line, f);
    fclose(f);
    const char *paren = ok ? strrchr(stat_line, ')') : NULL; /* "pid (comm) S ...": the
                                                               command may hold ')' */
    return !(paren && paren[1] == ' ' && (paren[2] == 'Z' || paren[2] == 'X'));
}
