/* tunepack trials [DIR] [--json] [--sort KEY] */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cli.h"
#include "run/run.h"

typedef struct trials_acc {
    json_t *trials; /* trial objects (tp__cli_trial_json), owned */
    const char *dir;
    int owned; /* an orchestrator runs the experiment now */
} trials_acc_t;

static int collect(const tp_trial_row_t *row, void *ud) {
    trials_acc_t *a = ud;
    json_t *t = tp__cli_trial_json(row, a->dir);
    json_object_set_new(t, "state", json_string(tp__cli_state(row, a->owned)));
    json_array_append_new(a->trials, t);
    return 0;
}

/* ---- sorting ------------------------------------------------------------------ */
typedef struct sort_key {
    const char *name;  /* --sort NAME */
    const char *field; /* the trial JSON member it orders by; NULL: a parameter */
    int descending;    /* larger first (value: by the metric's mode instead) */
} sort_key_t;

static const sort_key_t sort_keys[] = {
    {"id", "id", 0},
    {"value", "value", 0},
    {"time", "duration_s", 1},
    {"attempts", "attempts", 1},
    {"failures", "failures", 1},
    {"retries", "retries", 1},
    {"promotions", "promotions", 1},
    {"rung", "rung", 1},
    {"state", "state", 0},
    {"where", "where", 0},
};

typedef struct sort_ctx {
    const char *field; /* member of the trial, or of its params when param is set */
    int param;
    int sign; /* 1: ascending, -1: descending */
} sort_ctx_t;

static const json_t *sort_value(const json_t *t, const sort_ctx_t *c) {
    return json_object_get(c->param ? json_object_get(t, "params") : t, c->field);
}

/* Order by the key (absent values last), then by id. */
static int compare(const void *pa, const void *pb, void *ud) {
    const sort_ctx_t *c = ud;
    const json_t *a = *(json_t *const *)pa, *b = *(json_t *const *)pb;
    const json_t *va = sort_value(a, c), *vb = sort_value(b, c);
    int ha = va && !json_is_null(va), hb = vb && !json_is_null(vb), d = 0;
    if (ha != hb) return hb - ha;
    if (ha && json_is_number(va) && json_is_number(vb)) {
        double x = json_number_value(va), y = json_number_value(vb);
        d = x < y ? -1 : x > y;
    } else if (ha && json_is_string(va) && json_is_string(vb)) {
        d = strcmp(json_string_value(va), json_string_value(vb));
    }
    if (d) return d * c->sign;
    json_int_t ia = json_integer_value(json_object_get(a, "id"));
    json_int_t ib = json_integer_value(json_object_get(b, "id"));
    return ia < ib ? -1 : ia > ib;
}

/* Sort a->trials by `key` (a sort_keys name or a parameter). 0, or -1 if
 * the key names nothing. */
static int sort_trials(json_t *trials, const char *key, int maximize) {
    sort_ctx_t c = {.field = key, .param = 1, .sign = 1};
    for (size_t i = 0; i < TP_ARRAY_LEN(sort_keys); i++)
        if (strcmp(key, sort_keys[i].name) == 0) {
            c.field = sort_keys[i].field;
            c.param = 0;
            c.sign = sort_keys[i].descending ? -1 : 1;
            if (strcmp(key, "value") == 0 && maximize) c.sign = -1; /* best first */
        }
    size_t n = json_array_size(trials);
    json_t **v = tp__xcalloc(n ? n : 1, sizeof *v);
    int known = !c.param;
    for (size_t i = 0; i < n; i++) {
        v[i] = json_incref(json_array_get(trials, i));
        known |= json_object_get(json_object_get(v[i], "params"), key) != NULL;
    }
    if (known) qsort_r(v, n, sizeof *v, compare, &c);
    json_array_clear(trials);
    for (size_t i = 0; i < n; i++)
        json_array_append_new(trials, v[i]);
    free(v);
    return known || n == 0 ? 0 : -1;
}

/* ---- printing ------------------------------------------------------------------- */
/* The feasible column under constraints ("" without): yes, no, or - while not judged. */
static void feasible_column(const json_t *t, int constrained, char *out, size_t n) {
    const json_t *f = json_object_get(t, "feasible");
    if (!constrained)
        out[0] = 0;
    else
        snprintf(out, n, "%-8s  ", json_is_true(f) ? "yes" : json_is_false(f) ? "no" : "-");
}

static void print_row(const json_t *t, const char *dir, int constrained) {
    char value[32] = "-", dur[32] = "-", step[32] = "-", params[400] = "", rung[48] = "-";
    const json_t *v = json_object_get(t, "value"), *b = json_object_get(t, "budget");
    if (json_is_number(v)) tp__fmt_sig(json_number_value(v), value);
    if (json_is_number(json_object_get(t, "duration_s")))
        tp__format_duration(json_number_value(json_object_get(t, "duration_s")), dur, sizeof dur);
    if (json_is_integer(json_object_get(t, "step")))
        snprintf(step, sizeof step, "%lld",
                 (long long)json_integer_value(json_object_get(t, "step")));
    /* under surrogate: the kind before the parameters ("target<-3": runs trial 3's) */
    const char *kind = json_string_value(json_object_get(t, "kind"));
    const json_t *src = json_object_get(t, "source");
    int k = kind && json_is_integer(src) ? snprintf(params, sizeof params, "%s<-%lld  ", kind,
                                                    (long long)json_integer_value(src))
            : kind                       ? snprintf(params, sizeof params, "%s  ", kind)
                                         : 0;
    /* under pbt: the segment and where it was copied from ("seg 2<-5@4": trial 5 at 4) */
    const json_t *seg = json_object_get(t, "segment"), *par = json_object_get(t, "parent");
    if (json_is_integer(seg) && json_is_integer(par)) {
        char at[32];
        tp__fmt_sig(json_number_value(json_object_get(t, "parent_step")), at);
        k += snprintf(params + k, sizeof params - (size_t)k, "seg %lld<-%lld@%s  ",
                      (long long)json_integer_value(seg), (long long)json_integer_value(par), at);
    }
    tp__params_text(json_object_get(t, "params"), params + k, sizeof params - (size_t)k);
    if (json_is_number(b)) {
        char bt[32];
        tp__fmt_sig(json_number_value(b), bt);
        snprintf(rung, sizeof rung, "%lld/%s",
                 (long long)json_integer_value(json_object_get(t, "rung")), bt);
    }
    const char *state = json_string_value(json_object_get(t, "state"));
    const char *where = json_string_value(json_object_get(t, "where"));
    const char *decision = json_string_value(json_object_get(t, "decision"));
    const char *error = json_string_value(json_object_get(t, "error"));
    long long id = (long long)json_integer_value(json_object_get(t, "id"));
    char feasible[16];
    feasible_column(t, constrained, feasible, sizeof feasible);
    tp__fprintf_escaped(stdout, 0, "%5lld  %-11s  %s%5lld  %7lld  %12s  %6s  %9s  %8s  %-12s  %s",
                        id, state, feasible,
                        (long long)json_integer_value(json_object_get(t, "failures")),
                        (long long)json_integer_value(json_object_get(t, "retries")), value, step,
                        rung, dur, where ? where : "-", params);
    const char *note = decision && *decision                      ? decision
                       : error && strcmp(state, "completed") != 0 ? error
                                                                  : NULL;
    if (note) tp__fprintf_escaped(stdout, 0, "  [%s]", note);
    printf("\n");
    const char *tail = json_string_value(json_object_get(t, "stderr_tail"));
    if (strcmp(state, "failed") == 0 || (strcmp(state, "pending") == 0 && tail)) {
        /* A failure in plain sight: what it said last, and where the rest is. */
        char logs[4300];
        tp__trial_path(logs, sizeof logs, dir, id, "/stderr.log");
        tp__fprintf_escaped(stdout, TP_ESC_LINE, "         logs: %s", logs);
        for (const char *p = tail; p && *p;) {
            const char *nl = strchr(p, '\n');
            size_t len = nl ? (size_t)(nl - p) : strlen(p);
            char line[300];
            snprintf(line, sizeof line, "%.*s",
                     (int)(len < sizeof line - 1 ? len : sizeof line - 1), p);
            tp__fprintf_escaped(stdout, TP_ESC_LINE, "         | %s", line);
            p = nl ? nl + 1 : p + len;
        }
    }
}

static int trials_main(int argc, char **argv) {
    const char *dir_arg = NULL, *sort = NULL;
    int as_json = 0;
    const char *keys[TP_ARRAY_LEN(sort_keys) + 1] = {0}; /* --sort's usual values */
    char known[256] = "";
    for (size_t i = 0; i < TP_ARRAY_LEN(sort_keys); i++) {
        keys[i] = sort_keys[i].name;
        snprintf(known + strlen(known), sizeof known - strlen(known), "%s, ", keys[i]);
    }
    const tp_cli_opt_t opts[] = {{"--json", &as_json, NULL},
                                 {"--sort", NULL, &sort, keys, TP_CLI_OPEN}};
    int rc = tp__cli_parse(&tp__cmd_trials, argc, argv, opts, TP_ARRAY_LEN(opts), &dir_arg);
    if (rc != TP_CLI_PARSED) return rc;
    char *dir = NULL;
    tp_store_t *s = tp__cli_open(dir_arg, &dir);
    if (!s) return TP_EXIT_STORE;
    char *metric = tp__store_meta_get(s, "metric"), *mode = tp__store_meta_get(s, "mode");
    trials_acc_t a = {.trials = json_array(), .dir = dir, .owned = tp__rundir_owner(dir) != 0};
    tp__store_trials(s, collect, &a);
    tp__cli_add_promotions(s, a.trials);
    int constrained = tp__cli_add_feasibility(s, a.trials);
    tp__cli_add_lineage(s, a.trials);
    int code = TP_EXIT_OK;
    if (sort && sort_trials(a.trials, sort, mode && strcmp(mode, "max") == 0) != 0) {
        code = tp__cli_usage_error(&tp__cmd_trials,
                                   "--sort %s names no column or parameter; use %sor a "
                                   "parameter's name",
                                   sort, known);
    } else if (as_json) {
        char *text = json_dumps(a.trials, JSON_COMPACT | JSON_PRESERVE_ORDER);
        printf("%s\n", text);
        free(text);
    } else {
        tp__fprintf_escaped(
            stdout, TP_ESC_LINE, "%5s  %-11s  %s%5s  %7s  %12s  %6s  %9s  %8s  %-12s  %s", "trial",
            "state", constrained ? "feasible  " : "", "fails", "retries", metric ? metric : "value",
            "step", "rung/bdg", "time", "where", "params  [decision or error]");
        size_t i;
        json_t *t;
        json_array_foreach(a.trials, i, t) print_row(t, dir, constrained);
    }
    json_decref(a.trials);
    free(metric);
    free(mode);
    free(dir);
    tp__store_close(s);
    return code;
}

const tp_cmd_t tp__cmd_trials = {
    .name = "trials",
    .summary = "list every trial: state, failures and retries, objective, where it ran, "
               "parameters",
    .usage = "usage: tunepack trials [DIR] [--json] [--sort KEY]\n\n"
             "Lists the trials of the experiment in DIR (default: the latest under ./runs):\n"
             "state, failed attempts (fails) and attempts run again after a failure (retries,\n"
             "automatic or asked for: see `tunepack run --help`), apart from promotions, which\n"
             "the rung shows; last reported objective and step, rung and budget reached, time\n"
             "spent running (every attempt, not paused or waiting), where its last attempt ran\n"
             "(node:GPUs), parameters, and the scheduler's last decision about it (why it was\n"
             "promoted or stopped) or why it failed. Under `constraints:` a feasible column\n"
             "after the state: yes, no (a constraint broken, or a constrained metric never\n"
             "reported in its last report), or - while no job of it has ended with a result. Under "
             "`surrogate:` the parameters\n"
             "start with the trial's kind: surrogate, or target<-N for the full-size run of\n"
             "surrogate trial N's configuration. Under `scheduler: pbt` a trial that\n"
             "exploited another starts with its segment: seg S<-P@B, its current parameters\n"
             "continue trial P's checkpoint from budget B (--json adds segment, parent,\n"
             "parent_step and the whole lineage). Under a failed trial, the path of its\n"
             "logs and the last lines of its stderr. A trial left running by a run that ended\n"
             "shows as interrupted (`tunepack status` counts it the same way).\n\n"
             "  --json       an array of trial objects (as export writes them in JSON):\n"
             "               attempts counts every start (its latest attempt's number),\n"
             "               failures, retries, promotions and interrupted its kinds; under\n"
             "               constraints:, feasible and each constraint's value and violation\n"
             "  --sort KEY   order by id (default), value (best first), time (longest first),\n"
             "               attempts, failures, retries, promotions, rung (most first), state,\n"
             "               where, or a parameter's name\n\n"
             "example:\n  tunepack trials runs/mlp-demo --sort value\n",
    .main = trials_main,
};
