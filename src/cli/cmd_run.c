/* tunepack run FILE [--dir DIR] */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "cli/cli.h"
#include "run/run.h"
#include "web/web.h"

/* `tunepack dashboard` beside the run, on the run's directory (or every one
 * under ./runs when the run picks its own); it ends when the run does, or
 * when the run's process dies. Returns its pid, or -1, once it has printed
 * the URL with its token (at most 10 s): before the live view starts, which
 * would otherwise draw over that line, the only one that carries the token. */
static pid_t start_dashboard(const char *listen, const char *dir) {
    char exe[4096];
    ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
    if (n <= 0) return -1;
    exe[n] = 0;
    char tmp[] = "/tmp/tunepack-dashboard-XXXXXX", ready[64], ready_arg[80];
    if (!mkdtemp(tmp)) return -1;
    snprintf(ready, sizeof ready, "%s/url", tmp);
    snprintf(ready_arg, sizeof ready_arg, "--ready-file=%s", ready);
    pid_t parent = getpid(), pid = fork();
    if (pid == 0) {
        prctl(PR_SET_PDEATHSIG, SIGTERM);
        if (getppid() != parent) _exit(0);
        char *argv[] = {
            exe,         "dashboard", "--beside-run", "--listen", (char *)listen, ready_arg,
            (char *)dir, NULL};
        execv(exe, argv);
        _exit(127);
    }
    for (int i = 0; pid > 0 && i < 500 && access(ready, F_OK) != 0; i++) {
        if (waitpid(pid, NULL, WNOHANG) == pid) { /* it said why on stderr */
            pid = -1;
            break;
        }
        struct timespec ts = {0, 20 * 1000 * 1000};
        nanosleep(&ts, NULL);
    }
    unlink(ready);
    rmdir(tmp);
    return pid;
}

static int run_main(int argc, char **argv) {
    tp_run_opts_t o = {.live = isatty(STDOUT_FILENO)};
    int plain = 0, dry = 0, dashboard = 0;
    const char *show = NULL, *dashboard_at = NULL;
    static const char *const clusters[] = {"local", "slurm", "ssh:", NULL}; /* ssh:HOST,... */
    const tp_cli_opt_t opts[] = {
        {"--dir", NULL, &o.dir},
        {"--dry-run", &dry, NULL},
        {"--show", NULL, &show},
        {"--fork", NULL, &o.fork},
        {"--retry-failed", &o.retry_failed, NULL},
        {"--plain", &plain, NULL},
        {"--quiet", &o.quiet, NULL},
        {"--cluster", NULL, &o.cluster, clusters, TP_CLI_OPEN},
        {"--dashboard", &dashboard, NULL},
        {"--dashboard", NULL, &dashboard_at},
    };
    int rc = tp__cli_parse(&tp__cmd_run, argc, argv, opts, TP_ARRAY_LEN(opts), &o.file);
    if (rc != TP_CLI_PARSED) return rc;
    if (plain) o.live = 0;
    if (!o.file) return tp__cli_usage_error(&tp__cmd_run, "name the experiment file");
    long n = 5;
    if (show && (rc = tp__cli_count(&tp__cmd_run, "--show", show, &n)) != TP_CLI_PARSED) return rc;
    if (dry || show) return tp__run_dry(&o, (int)n);
    pid_t web = dashboard || dashboard_at
                    ? start_dashboard(dashboard_at ? dashboard_at : TP_WEB_DEFAULT_LISTEN, o.dir)
                    : -1;
    rc = tp__run_experiment(&o);
    if (web > 0) {
        kill(web, SIGTERM);
        waitpid(web, NULL, 0);
    }
    return rc;
}

const tp_cmd_t tp__cmd_run = {
    .name = "run",
    .summary = "run an experiment, or resume it where it stopped",
    .usage =
        "usage: tunepack run FILE [--dir DIR] [--fork OLD] [--retry-failed] [--cluster WHERE]\n"
        "                        [--dashboard[=HOST:PORT]] [--plain] [--quiet]\n"
        "       tunepack run FILE --dry-run [--show N]\n\n"
        "Runs the experiment described by FILE (YAML) to its end. Every event is journaled in\n"
        "DIR/tunepack.db; if the run is stopped or killed, the same command resumes it: finished\n"
        "trials are kept, interrupted ones run again, and the search continues where it was.\n"
        "Keys such as trials, concurrency, timeout and retries may change between runs; the\n"
        "command too while no trial has a result (the old and new one are shown), so a\n"
        "mistake in it is fixed without starting over; space, metric and search may not.\n\n"
        "  --dir DIR   experiment directory (default: runs/<name>)\n"
        "  --fork OLD  start a new experiment (in --dir) seeded with the results of the one\n"
        "              in OLD that FILE's space holds (completed and stopped-early trials,\n"
        "              recorded with negative ids, never run again); for a FILE whose command,\n"
        "              space or search changed, which OLD cannot take\n"
        "  --retry-failed\n"
        "              run the failed trials again: a new attempt each, same parameters and\n"
        "              id, at the rung it failed at (earlier attempts' logs kept as\n"
        "              stderr.N.log); journaled, so a resume neither loses nor repeats it.\n"
        "              Also a trial that failed twice with the same error, which\n"
        "              automatic retries give up on\n"
        "  --cluster WHERE\n"
        "              where trials run, instead of the file's cluster: local, slurm (the\n"
        "              nodes of the Slurm allocation it runs in) or ssh:HOST[,HOST...];\n"
        "              on several nodes, concurrency counts on each (see docs/cluster.md)\n"
        "  --dashboard[=HOST:PORT]\n"
        "              serve the web dashboard of this run while it runs (default\n"
        "              127.0.0.1:8080; see `tunepack dashboard --help`)\n"
        "  --plain     log lines instead of the live view, even on a terminal\n"
        "  --quiet     no progress output\n"
        "  --dry-run   run nothing: report every mistake in FILE in one pass (file:line:col),\n"
        "              show the absolute path of each program (for Python: its version and\n"
        "              whether the script's top-level imports import); on an existing\n"
        "              experiment, the changes the run would take or refuse and the trials it\n"
        "              would run next; else the first configurations with their exact argv\n"
        "  --show N    with --dry-run: how many configurations (default 5)\n\n"
        "example:\n"
        "  tunepack run examples/mlp/experiment.yaml --dir runs/mlp-demo\n",
    .main = run_main,
};
