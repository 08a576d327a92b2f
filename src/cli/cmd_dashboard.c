/* tunepack dashboard [DIR ...] [--listen HOST:PORT | --unix PATH] [--no-token] */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cli.h"
#include "run/run.h"
#include "web/web.h"

static volatile sig_atomic_t stop_requested;
static void on_signal(int sig) {
    (void)sig;
    stop_requested = 1;
}

static int run_is_live(const char *dir) {
    return tp__rundir_owner(dir) != 0;
}

static int dashboard_main(int argc, char **argv) {
    /* the best as `best` ranks it; a dead run's trials as `trials` shows them */
    tp_web_opts_t o = {.listen = NULL, .rank = tp__cli_ranking, .live = run_is_live};
    const char **dirs = tp__xcalloc((size_t)argc + 1, sizeof *dirs);
    size_t ndirs = 0;
    int beside_run = 0; /* started by `run --dashboard`: the store may not exist yet */
    int every_user = 0; /* --every-local-user-may-read: --no-token acknowledged */
    const tp_cli_opt_t opts[] = {
        {"--listen", NULL, &o.listen},
        {"--unix", NULL, &o.unix_path},
        {"--no-token", &o.no_token, NULL},
        {"--every-local-user-may-read", &every_user, NULL},
        {"--beside-run", &beside_run, NULL, NULL, TP_CLI_HIDDEN},
        {"--ready-file", NULL, &o.ready_file, NULL, TP_CLI_HIDDEN}, /* written once listening */
    };
    int rc = tp__cli_parse_many(&tp__cmd_dashboard, argc, argv, opts, TP_ARRAY_LEN(opts), dirs,
                                (size_t)argc, &ndirs);
    if (rc != TP_CLI_PARSED) {
        free(dirs);
        return rc;
    }
    const char *why = o.unix_path && o.listen ? "--listen and --unix: name one place to listen"
                      : o.no_token && !o.unix_path && !every_user
                          ? "--no-token lets every user of this machine read every experiment "
                            "served (trial logs, parameters, results); say so with "
                            "--every-local-user-may-read, or listen on a socket of your own "
                            "with --unix PATH"
                      : every_user && !o.no_token
                          ? "--every-local-user-may-read goes with --no-token"
                          : NULL;
    if (why) {
        free(dirs);
        return tp__cli_usage_error(&tp__cmd_dashboard, "%s", why);
    }
    /* Each directory named must hold an experiment now: a typo is said at once. */
    for (size_t i = 0; i < ndirs && !beside_run; i++) {
        tp_store_t *s = NULL;
        tp_error_t err = {0};
        if (tp__store_open(dirs[i], TP_STORE_READONLY, &s, &err) != 0) {
            fprintf(stderr, "tunepack dashboard: %s\n", err.msg);
            free(dirs);
            return TP_EXIT_STORE;
        }
        tp__store_close(s);
    }
    o.dirs = dirs;
    o.ndirs = ndirs;
    struct sigaction sa = {.sa_handler = on_signal};
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);
    signal(SIGPIPE, SIG_IGN);
    tp_error_t err = {0};
    rc = tp__web_serve(&o, &stop_requested, &err);
    free(dirs);
    if (rc) {
        fprintf(stderr, "tunepack dashboard: %s\n", err.msg);
        return TP_EXIT_USAGE;
    }
    return TP_EXIT_OK;
}

const tp_cmd_t tp__cmd_dashboard = {
    .name = "dashboard",
    .summary = "a live web dashboard over one or more experiments (read-only)",
    .usage = "usage: tunepack dashboard [DIR ...] [--listen HOST:PORT | --unix PATH]\n"
             "                          [--no-token [--every-local-user-may-read]]\n\n"
             "Serves a web dashboard of the experiments in the DIRs (default: every experiment\n"
             "under ./runs, looked up again on each request) until interrupted: trials (a column\n"
             "per parameter and metric, sorted and filtered by any column, the view kept in the\n"
             "URL; live log tails), optimization history, learning curves with rung\n"
             "budgets, parallel coordinates, parameter importance, GPU packing over time, nodes\n"
             "and GPUs. Pages update every second. It opens each store read-only and never\n"
             "slows the run writing it.\n\n"
             "Private by default: every request needs a random token, on loopback too. The URL\n"
             "printed once when it starts carries it (http://127.0.0.1:8080/?token=...); the\n"
             "first page opened with it sets a cookie (HttpOnly, SameSite=Strict) and drops the\n"
             "token from the address. Without it a request gets 403.\n\n"
             "  --listen HOST:PORT  where to listen (default 127.0.0.1:8080; port 0: any free\n"
             "                      port)\n"
             "  --unix PATH         listen on a Unix socket instead, readable by you alone\n"
             "                      (0600); reach it with ssh -L 8080:PATH HOST\n"
             "  --no-token          ask for no token: on --unix PATH, or on loopback together\n"
             "                      with --every-local-user-may-read, since then every user of\n"
             "                      this machine can read every trial's logs, parameters and\n"
             "                      results it serves. Never on another address.\n"
             "  --every-local-user-may-read\n"
             "                      with --no-token on loopback: say that every local user may\n"
             "                      read what it serves\n\n"
             "`tunepack run` starts one beside a run with its dashboard option.\n\n"
             "example:\n  tunepack dashboard runs/mlp-demo --listen 127.0.0.1:8080\n",
    .main = dashboard_main,
};
