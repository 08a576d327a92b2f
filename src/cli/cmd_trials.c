/* tunepack trials [DIR] */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cli.h"
#include "run/run.h"

static int print_row(const tp_trial_row_t *row, void *ud) {
    (void)ud;
    char value[32] = "-", dur[32] = "-", step[32] = "-", params[400] = "";
    if (row->has_value) tp__fmt_sig(row->value, value);
    if (row->ended_at > 0 && row->started_at > 0)
        tp__format_duration(row->ended_at - row->started_at, dur, sizeof dur);
    if (row->step != TP_STORE_NO_STEP) snprintf(step, sizeof step, "%lld", (long long)row->step);
    json_t *p = json_loads(row->params, 0, NULL);
    tp__params_text(p, params, sizeof params);
    json_decref(p);
    char rung[48] = "-";
    if (row->rung >= 0 && row->budget > 0) {
        char b[32];
        tp__fmt_sig(row->budget, b);
        snprintf(rung, sizeof rung, "%d/%s", row->rung, b);
    }
    printf("%5lld  %-9s  %8d  %12s  %6s  %9s  %8s  %s", (long long)row->id, row->state,
           row->attempts, value, step, rung, dur, params);
    if (row->decision && *row->decision)
        printf("  [%s]", row->decision);
    else if (row->error && strcmp(row->state, "completed") != 0)
        printf("  [%s]", row->error);
    printf("\n");
    return 0;
}

static int trials_main(int argc, char **argv) {
    const char *dir_arg = NULL;
    int rc = tp__cli_parse(&tp__cmd_trials, argc, argv, NULL, 0, &dir_arg);
    if (rc != TP_CLI_PARSED) return rc;
    char *dir = NULL;
    tp_store_t *s = tp__cli_open(dir_arg, &dir);
    if (!s) return TP_EXIT_STORE;
    char *metric = tp__store_meta_get(s, "metric");
    printf("%5s  %-9s  %8s  %12s  %6s  %9s  %8s  %s\n", "trial", "state", "attempts",
           metric ? metric : "value", "step", "rung/bdg", "time", "params  [decision or error]");
    tp__store_trials(s, print_row, NULL);
    free(metric);
    free(dir);
    tp__store_close(s);
    return TP_EXIT_OK;
}

const tp_cmd_t tp__cmd_trials = {
    .name = "trials",
    .summary = "list every trial: state, attempts, objective, parameters",
    .usage = "usage: tunepack trials [DIR]\n\n"
             "Lists the trials of the experiment in DIR (default: the latest under ./runs):\n"
             "state, attempts, last reported objective and step, rung and budget reached,\n"
             "duration, parameters, and the scheduler's last decision about it (why it was\n"
             "promoted or stopped) or why it failed.\n\n"
             "example:\n  tunepack trials runs/mlp-demo\n",
    .main = trials_main,
};
