/* tunepack best [DIR] [--json] */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cli.h"
#include "run/run.h"

typedef struct best_acc {
    int maximize;   /* metric mode */
    json_t *best;   /* best trial's JSON, owned */
    double value;   /* its value */
} best_acc_t;

static int pick(const tp_trial_row_t *row, void *ud) {
    best_acc_t *a = ud;
    if (!tp__cli_beats(row, a->maximize, a->best != NULL, a->value)) return 0;
    json_decref(a->best);
    a->best = tp__cli_trial_json(row);
    a->value = row->value;
    return 0;
}

static int best_main(int argc, char **argv) {
    const char *dir_arg = NULL;
    int as_json = 0;
    const tp_cli_opt_t opts[] = {{"--json", &as_json, NULL}};
    int rc = tp__cli_parse(&tp__cmd_best, argc, argv, opts, TP_ARRAY_LEN(opts), &dir_arg);
    if (rc != TP_CLI_PARSED) return rc;
    char *dir = NULL;
    tp_store_t *s = tp__cli_open(dir_arg, &dir);
    if (!s) return TP_EXIT_STORE;
    char *mode = tp__store_meta_get(s, "mode"), *metric = tp__store_meta_get(s, "metric");
    best_acc_t a = {.maximize = mode && strcmp(mode, "max") == 0};
    tp__store_trials(s, pick, &a);
    int code = TP_EXIT_OK;
    if (!a.best) {
        fprintf(stderr, "tunepack: no completed trial in %s yet\n", dir);
        code = TP_EXIT_NO_TRIAL;
    } else if (as_json) {
        json_t *out = json_pack("{s:O, s:O, s:O, s:O}", "trial", json_object_get(a.best, "id"),
                                "value", json_object_get(a.best, "value"), "params",
                                json_object_get(a.best, "params"), "metrics",
                                json_object_get(a.best, "metrics"));
        char *text = json_dumps(out, JSON_COMPACT | JSON_PRESERVE_ORDER);
        printf("%s\n", text);
        free(text);
        json_decref(out);
    } else {
        char v[32];
        tp__fmt_sig(a.value, v);
        printf("best trial %lld: %s = %s\n",
               (long long)json_integer_value(json_object_get(a.best, "id")),
               metric ? metric : "value", v);
        const char *key;
        json_t *val;
        json_object_foreach(json_object_get(a.best, "params"), key, val) {
            char t[256];
            if (tp__value_text_human(val, t, sizeof t) < 0) snprintf(t, sizeof t, "...");
            printf("  %s: %s\n", key, t);
        }
    }
    json_decref(a.best);
    free(mode);
    free(metric);
    free(dir);
    tp__store_close(s);
    return code;
}

const tp_cmd_t tp__cmd_best = {
    .name = "best",
    .summary = "print the best completed trial and its parameters",
    .usage = "usage: tunepack best [DIR] [--json]\n\n"
             "Prints the completed trial with the best objective (by the metric's mode) in DIR\n"
             "(default: the latest under ./runs). With --json, one object:\n"
             "  {\"trial\": 7, \"value\": 0.96, \"params\": {...}, \"metrics\": {...}}\n"
             "Exit code 5 when no trial has completed.\n\n"
             "example:\n  tunepack best runs/mlp-demo --json\n",
    .main = best_main,
};
