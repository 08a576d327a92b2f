/* tunepack run FILE [--dir DIR] */
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "cli/cli.h"
#include "run/run.h"

static int run_main(int argc, char **argv) {
    if (tp__cli_help_requested(&tp__cmd_run, argc, argv)) return TP_EXIT_OK;
    tp_run_opts_t o = {.live = isatty(STDOUT_FILENO)};
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--dir") == 0 && i + 1 < argc) {
            o.dir = argv[++i];
        } else if (strncmp(argv[i], "--dir=", 6) == 0) {
            o.dir = argv[i] + 6;
        } else if (strcmp(argv[i], "--quiet") == 0 || strcmp(argv[i], "-q") == 0) {
            o.quiet = 1;
        } else if (strcmp(argv[i], "--plain") == 0) {
            o.live = 0;
        } else if (argv[i][0] == '-' && argv[i][1]) {
            return tp__cli_usage_error(&tp__cmd_run, "unknown option \"%s\"", argv[i]);
        } else if (!o.file) {
            o.file = argv[i];
        } else {
            return tp__cli_usage_error(&tp__cmd_run, "one experiment file at a time, got \"%s\" too",
                                       argv[i]);
        }
    }
    if (!o.file) return tp__cli_usage_error(&tp__cmd_run, "name the experiment file");
    return tp__run_experiment(&o);
}

const tp_cmd_t tp__cmd_run = {
    .name = "run",
    .summary = "run an experiment, or resume it where it stopped",
    .usage =
        "usage: tunepack run FILE [--dir DIR] [--plain] [--quiet]\n\n"
        "Runs the experiment described by FILE (YAML) to its end. Every event is journaled in\n"
        "DIR/tunepack.db; if the run is stopped or killed, the same command resumes it: finished\n"
        "trials are kept, interrupted ones run again, and the search continues where it was.\n\n"
        "  --dir DIR   experiment directory (default: runs/<name>)\n"
        "  --plain     log lines instead of the live view, even on a terminal\n"
        "  --quiet     no progress output\n\n"
        "example:\n"
        "  tunepack run examples/mlp/experiment.yaml --dir runs/mlp-demo\n",
    .main = run_main,
};
