/* tunepack: the command-line entry point; dispatches to one verb. */
#include <stdio.h>
#include <string.h>

#include "agent/agent.h"
#include "cli/cli.h"
#include "config/config.h"
#include "run/run.h"
#include "util/util.h"

static const tp_cmd_t *const commands[] = {
    &tp__cmd_run,  &tp__cmd_status, &tp__cmd_trials, &tp__cmd_best,      &tp__cmd_export,
    &tp__cmd_stop, &tp__cmd_gpus,   &tp__cmd_place,  &tp__cmd_agent,     &tp__cmd_simulate,
    &tp__cmd_plan, &tp__cmd_nodes,  &tp__cmd_resize, &tp__cmd_dashboard,
};

/* `tunepack __keys`: every key of the experiment file, one a line ("path",
 * "path required", "path = name name ..." for the names its value may be),
 * from the loader's tables (checked against tunepack-experiment(5) by
 * tests/e2e/test_manpages.py). */
static int print_key(const char *path, const char *const *values, int required, void *ud) {
    (void)ud;
    printf("%s%s%s", path, required ? " required" : "", values[0] ? " =" : "");
    for (size_t i = 0; values[i]; i++)
        printf(" %s", values[i]);
    printf("\n");
    return 0;
}

static void usage(FILE *f) {
    fprintf(f,
            "tunepack %s: hyperparameter tuning that packs trials onto your machines\n\n"
            "usage: tunepack <command> [options]\n\ncommands:\n",
            TP_VERSION);
    for (size_t i = 0; i < TP_ARRAY_LEN(commands); i++)
        if (!commands[i]->hidden)
            fprintf(f, "  %-8s %s\n", commands[i]->name, commands[i]->summary);
    fprintf(f, "\n`tunepack <command> --help` shows a command's options and an example.\n"
               "Exit codes are listed in docs/exit-codes.md.\n");
}

int main(int argc, char **argv) {
    if (argc < 2) {
        usage(stderr);
        return TP_EXIT_USAGE;
    }
    if (strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0 ||
        strcmp(argv[1], "help") == 0) {
        usage(stdout);
        return TP_EXIT_OK;
    }
    if (strcmp(argv[1], "__options") == 0) { /* every verb's options, a JSON line each */
        for (size_t i = 0; i < TP_ARRAY_LEN(commands); i++) {
            char *list[] = {(char *)commands[i]->name, "--list-options", NULL};
            fflush(stdout);
            if (commands[i]->main(2, list) != TP_EXIT_OK) return TP_EXIT_ERROR;
        }
        return TP_EXIT_OK;
    }
    if (strcmp(argv[1], "__keys") == 0)
        return tp__config_keys(print_key, NULL) == 0 ? TP_EXIT_OK : TP_EXIT_ERROR;
    if (strcmp(argv[1], "--version") == 0) {
        printf("tunepack %s\n", TP_VERSION);
        return TP_EXIT_OK;
    }
    const char *names[TP_ARRAY_LEN(commands)];
    for (size_t i = 0; i < TP_ARRAY_LEN(commands); i++) {
        names[i] = commands[i]->name;
        if (strcmp(argv[1], commands[i]->name) == 0) return commands[i]->main(argc - 1, argv + 1);
    }
    const char *guess = tp__did_you_mean(argv[1], names, TP_ARRAY_LEN(commands));
    fprintf(stderr, "tunepack: unknown command \"%s\"", argv[1]);
    if (guess) fprintf(stderr, "; did you mean \"%s\"?", guess);
    fprintf(stderr, "\n\n");
    usage(stderr);
    return TP_EXIT_USAGE;
}
