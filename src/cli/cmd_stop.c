/* tunepack stop [DIR] */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cli/cli.h"
#include "run/run.h"

static int stop_main(int argc, char **argv) {
    const char *dir_arg = NULL;
    int nowait = 0;
    const tp_cli_opt_t opts[] = {{"--no-wait", &nowait, NULL}};
    int rc = tp__cli_parse(&tp__cmd_stop, argc, argv, opts, TP_ARRAY_LEN(opts), &dir_arg);
    if (rc != TP_CLI_PARSED) return rc;
    tp_error_t err = {0};
    char *dir = tp__rundir_resolve(dir_arg, &err);
    if (!dir) {
        fprintf(stderr, "tunepack: %s\n", err.msg);
        return TP_EXIT_STORE;
    }
    int pid = tp__rundir_owner(dir);
    if (pid == 0) {
        printf("%s is not running\n", dir);
        free(dir);
        return TP_EXIT_OK;
    }
    if (pid < 0 || kill(pid, SIGTERM) != 0) {
        fprintf(stderr, "tunepack: cannot signal the orchestrator of %s (pid %d): %s\n", dir, pid,
                pid < 0 ? "no pid in the lock file" : strerror(errno));
        free(dir);
        return TP_EXIT_ERROR;
    }
    printf("stopping %s (pid %d)", dir, pid);
    fflush(stdout);
    if (!nowait) {
        /* Wait for the orchestrator to let go of the lock: trials get their
         * grace period, so this can take as long as the longest grace. */
        struct timespec ts = {0, 100 * 1000 * 1000};
        for (int i = 0; i < 6000 && tp__rundir_owner(dir) != 0; i++)
            nanosleep(&ts, NULL);
    }
    printf("%s\n", tp__rundir_owner(dir) == 0 ? ": stopped; `tunepack run` resumes it" : "");
    free(dir);
    return TP_EXIT_OK;
}

const tp_cmd_t tp__cmd_stop = {
    .name = "stop",
    .summary = "stop a running experiment (it can be resumed)",
    .usage = "usage: tunepack stop [DIR] [--no-wait]\n\n"
             "Asks the orchestrator running the experiment in DIR (default: the latest under\n"
             "./runs) to stop: running trials get SIGTERM, then SIGKILL after their grace period,\n"
             "and are recorded as interrupted. `tunepack run` on the same file resumes.\n\n"
             "  --no-wait   return at once instead of waiting for the orchestrator to exit\n\n"
             "example:\n  tunepack stop runs/mlp-demo\n",
    .main = stop_main,
};
