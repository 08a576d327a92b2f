/* best_front: `tunepack best` for several objectives: the Pareto front of
 * the completed and stopped trials (no trial better in every objective). */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cli.h"
#include "run/run.h"
#include "search/pareto.h"
#include "search/search.h"

typedef struct front_acc {
    const json_t *objectives; /* [{"name", "mode"}] from the store's meta */
    size_t m;                 /* objectives */
    json_t *trials;           /* candidate trials' JSON, owned */
    double *loss;             /* m losses per candidate */
    size_t n, cap;
    const char *dir;                          /* the experiment directory */
    tp_constraint_t cons[TP_MAX_CONSTRAINTS]; /* the store's constraints */
    size_t ncons;
    size_t infeasible; /* finished with every objective, but infeasible */
} front_acc_t;

/* Keep finished trials whose last report has every objective. */
static int collect(const tp_trial_row_t *row, void *ud) {
    front_acc_t *a = ud;
    if (strcmp(row->state, "completed") != 0 && strcmp(row->state, "stopped") != 0) return 0;
    json_t *t = tp__cli_trial_json(row, a->dir);
    json_t *metrics = json_object_get(t, "metrics");
    double loss[TP_MAX_OBJECTIVES];
    for (size_t j = 0; j < a->m; j++) {
        json_t *o = json_array_get(a->objectives, j);
        json_t *v = json_object_get(metrics, json_string_value(json_object_get(o, "name")));
        if (!json_is_number(v) || !isfinite(json_number_value(v))) {
            json_decref(t);
            return 0;
        }
        int max = !strcmp(json_string_value(json_object_get(o, "mode")), "max");
        loss[j] = max ? -json_number_value(v) : json_number_value(v);
    }
    if (!tp__rank_feasible_of(a->cons, a->ncons, row->metrics)) {
        a->infeasible++;
        json_decref(t);
        return 0;
    }
    a->loss = tp__xgrow(a->loss, &a->cap, a->n + 1, a->m * sizeof *a->loss, 64); /* rows of m */
    memcpy(a->loss + a->n * a->m, loss, a->m * sizeof *loss);
    json_array_append_new(a->trials, t);
    a->n++;
    return 0;
}

/* See cli.h. */
json_t *tp__cli_pareto_front(tp_store_t *s, const json_t *objectives, const char *dir,
                             size_t *nfinished) {
    return tp__cli_pareto_front_feasible(s, objectives, dir, nfinished, NULL);
}

json_t *tp__cli_pareto_front_feasible(tp_store_t *s, const json_t *objectives, const char *dir,
                                      size_t *nfinished, size_t *infeasible) {
    front_acc_t a = {.objectives = objectives,
                     .m = json_array_size(objectives),
                     .trials = json_array(),
                     .dir = dir};
    json_t *keep;
    char *cons = tp__store_meta_get(s, "constraints");
    a.ncons = tp__constraints_from_json(cons, a.cons, TP_MAX_CONSTRAINTS, &keep);
    free(cons);
    tp__store_trials(s, collect, &a);
    json_decref(keep);
    if (infeasible) *infeasible = a.infeasible;
    unsigned char *on_front = tp__xmalloc(a.n ? a.n : 1);
    tp__pareto_front(a.loss, a.n, a.m, on_front); /* the dashboard's front too */
    json_t *front = json_array();
    for (size_t i = 0; i < a.n; i++) {
        if (!on_front[i]) continue;
        json_t *t = json_array_get(a.trials, i), *values = json_object();
        for (size_t j = 0; j < a.m; j++) {
            const char *name =
                json_string_value(json_object_get(json_array_get(objectives, j), "name"));
            json_object_set(values, name, json_object_get(json_object_get(t, "metrics"), name));
        }
        json_array_append_new(front,
                              json_pack("{s:O, s:o, s:O, s:O}", "trial", json_object_get(t, "id"),
                                        "values", values, "params", json_object_get(t, "params"),
                                        "metrics", json_object_get(t, "metrics")));
    }
    if (nfinished) *nfinished = a.n;
    free(on_front);
    json_decref(a.trials);
    free(a.loss);
    return front;
}

/* See cli.h. */
void tp__cli_front_print(const json_t *front, size_t limit, const char *indent, int with_params) {
    size_t i;
    json_t *f;
    json_array_foreach(front, i, f) {
        if (i == limit) {
            printf("%s... %zu more\n", indent, json_array_size(front) - i);
            break;
        }
        char params[512] = "";
        if (with_params) tp__params_text(json_object_get(f, "params"), params, sizeof params);
        printf("%strial %lld:", indent, (long long)json_integer_value(json_object_get(f, "trial")));
        const char *key;
        json_t *val;
        json_object_foreach(json_object_get(f, "values"), key, val) {
            char v[32];
            tp__fmt_sig(json_number_value(val), v);
            tp__fprintf_escaped(stdout, 0, " %s=%s", key, v); /* a metric's name: anything */
        }
        printf("%s%s\n", *params ? "  " : "", params);
    }
}

/* See cli.h. */
int tp__cli_best_front(tp_store_t *s, const json_t *objectives, int as_json, const char *dir) {
    size_t nfinished = 0, infeasible = 0;
    json_t *front = tp__cli_pareto_front_feasible(s, objectives, dir, &nfinished, &infeasible);
    int code = TP_EXIT_OK;
    if (nfinished == 0) {
        fprintf(stderr, "tunepack: no %scompleted trial with every objective in %s yet%s\n",
                infeasible ? "feasible " : "", dir,
                infeasible ? " (every finished one broke a constraint)" : "");
        code = TP_EXIT_NO_TRIAL;
    } else if (as_json) {
        char *text = json_dumps(front, JSON_COMPACT | JSON_PRESERVE_ORDER);
        printf("%s\n", text);
        free(text);
    } else {
        printf("Pareto front: %zu of %zu finished trials (no other is better in every "
               "objective)\n",
               json_array_size(front), nfinished);
        if (infeasible) tp__cli_infeasible_line(infeasible);
        tp__cli_front_print(front, SIZE_MAX, "", 1);
    }
    json_decref(front);
    return code;
}
