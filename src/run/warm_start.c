/* warm_start: `search: {warm_start: [DIR ...]}`. The completed trials of
 * earlier experiments (their stores opened read-only) become prior
 * observations of the sampler: journaled in the `priors` table, fed with
 * tell_prior before the first ask, never run. A resumed run feeds the
 * journaled priors again, whatever the directories hold now. */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "run/orchestrator_internal.h"
#include "run/run.h"

typedef struct warm {
    tp_run_t *r;
    const char *source;  /* the directory being read */
    size_t fed, skipped; /* counts for the log line */
} warm_t;

/* Feed one prior to the sampler: values[0..nobj). */
static void feed(tp_run_t *r, const json_t *cfg, const double *values) {
    tp_searcher_t *sampler = r->sched->sampler;
    if (sampler->ops->tell_prior) sampler->ops->tell_prior(sampler, cfg, values);
}

/* A prior row's values: its objectives array, or its one value. */
static void row_values(const tp_prior_row_t *p, double *v) {
    json_t *objs = p->objectives ? json_loads(p->objectives, 0, NULL) : NULL;
    for (size_t j = 0; j < TP_MAX_OBJECTIVES; j++) {
        json_t *x = json_array_get(objs, j);
        v[j] = objs ? (json_is_number(x) ? json_number_value(x) : NAN) : j ? NAN : p->value;
    }
    json_decref(objs);
}

/* A journaled prior (resume): feed it. */
static int feed_journaled(const tp_prior_row_t *p, void *ud) {
    warm_t *w = ud;
    double v[TP_MAX_OBJECTIVES];
    row_values(p, v);
    json_t *cfg = json_loads(p->params, 0, NULL);
    if (cfg) feed(w->r, cfg, v), w->fed++;
    json_decref(cfg);
    return 0;
}

/* The source's configuration as this space reads it: parameters it does
 * not have dropped, values outside their domain here dropped, then the
 * ones inactive here removed. NULL when nothing is left. */
static json_t *as_this_space(const tp_space_t *sp, const char *params) {
    json_t *src = json_loads(params, 0, NULL), *cfg = json_object();
    for (size_t i = 0; i < sp->n; i++) {
        json_t *v = json_object_get(src, sp->params[i].name);
        if (v && tp__param_contains(&sp->params[i], v)) json_object_set(cfg, sp->params[i].name, v);
    }
    json_decref(src);
    tp__space_prune(sp, cfg);
    if (json_object_size(cfg) == 0) {
        json_decref(cfg);
        return NULL;
    }
    return cfg;
}

/* One trial of a source: kept in r->warm when it completed with every
 * objective and shares a parameter value with this space. */
static int take_trial(const tp_trial_row_t *row, void *ud) {
    warm_t *w = ud;
    tp_run_t *r = w->r;
    if (strcmp(row->state, "completed") != 0 || !row->has_value) return 0;
    json_t *metrics = row->metrics ? json_loads(row->metrics, 0, NULL) : NULL;
    json_t *values = json_array();
    for (size_t j = 0; j < r->x.nobjectives; j++) {
        json_t *x = json_object_get(metrics, r->x.objectives[j].name);
        double v = r->x.nobjectives == 1 ? row->value
                   : json_is_number(x)   ? json_number_value(x)
                                         : NAN;
        if (isfinite(v)) json_array_append_new(values, json_real(v));
    }
    json_decref(metrics);
    json_t *cfg = json_array_size(values) == r->x.nobjectives
                      ? as_this_space(&r->x.space, row->params)
                      : NULL;
    if (!cfg) {
        json_decref(values);
        w->skipped++;
        return 0;
    }
    json_array_append_new(r->warm, json_pack("{s:s, s:I, s:o, s:o}", "source", w->source, "trial",
                                             (json_int_t)row->id, "params", cfg, "values", values));
    w->fed++;
    return 0;
}

static const char *str_of(const json_t *o, const char *key) {
    const char *s = json_string_value(json_object_get(o, key));
    return s ? s : "";
}

/* The source's objectives must be this experiment's, by name and mode. */
static int check_objectives(tp_run_t *r, tp_store_t *src, const char *dir, tp_error_t *err) {
    char *objs = tp__store_meta_get(src, "objectives");
    char *metric = tp__store_meta_get(src, "metric"), *mode = tp__store_meta_get(src, "mode");
    json_t *list = objs ? json_loads(objs, 0, NULL)
                        : json_pack("[{s:s?, s:s?}]", "name", metric, "mode", mode);
    free(objs), free(metric), free(mode);
    int rc = 0;
    for (size_t j = 0; j < r->x.nobjectives && rc == 0; j++) {
        const tp_objective_t *o = &r->x.objectives[j];
        size_t k = 0;
        json_t *e = NULL;
        while ((e = json_array_get(list, k)) && strcmp(str_of(e, "name"), o->name))
            k++;
        if (!e)
            rc = tp__errorf(err, -EINVAL,
                            "warm_start: %s did not optimize \"%s\"; its trials cannot inform "
                            "this search (use experiments with the same metric)",
                            dir, o->name);
        else if (strcmp(str_of(e, "mode"), o->maximize ? "max" : "min"))
            rc = tp__errorf(err, -EINVAL,
                            "warm_start: %s optimized \"%s\" the other way (mode %s); use "
                            "experiments with the same metric and mode",
                            dir, o->name, str_of(e, "mode"));
    }
    json_decref(list);
    return rc;
}

/* See orchestrator_internal.h. */
int tp__run_warm_start_read(tp_run_t *r, tp_error_t *err) {
    if (r->x.nwarm_start == 0) return 0;
    r->warm = json_array();
    warm_t w = {.r = r};
    for (size_t i = 0; i < r->x.nwarm_start; i++) {
        const char *dir = r->x.warm_start[i];
        tp_store_t *src;
        tp_error_t e = {0};
        if (tp__store_open(dir, TP_STORE_READONLY, &src, &e) != 0)
            return tp__errorf(err, -ENOENT, "warm_start: %s", e.msg);
        int rc = check_objectives(r, src, dir, err);
        w.source = dir, w.fed = 0, w.skipped = 0;
        if (rc == 0) tp__store_trials(src, take_trial, &w);
        tp__store_close(src);
        if (rc < 0) return rc;
        tp__log(TP_LOG_INFO,
                "warm start: %zu completed trials of %s as prior observations (%zu completed "
                "ones left out: an objective missing, or no parameter value this space takes)",
                w.fed, dir, w.skipped);
    }
    return 0;
}

static int count_decision(const tp_decision_row_t *d, void *ud) {
    (void)d;
    (*(size_t *)ud)++;
    return 1; /* one is enough */
}

/* See orchestrator_internal.h. */
void tp__run_warm_start(tp_run_t *r) {
    warm_t w = {.r = r};
    tp_store_t *s = tp__journal_store(&r->journal);
    tp__journal_ok(&r->journal, tp__store_priors(s, feed_journaled, &w), "reading the priors");
    if (w.fed > 0) {
        tp__log(TP_LOG_INFO, "warm start: %zu prior observations from the journal", w.fed);
        return;
    }
    size_t decided = 0; /* a search that started without priors goes on without them */
    tp__store_decisions(s, count_decision, &decided);
    if (decided || !r->warm) return;
    size_t i;
    json_t *e;
    json_array_foreach(r->warm, i, e) {
        double v[TP_MAX_OBJECTIVES];
        json_t *values = json_object_get(e, "values"), *cfg = json_object_get(e, "params");
        for (size_t j = 0; j < TP_MAX_OBJECTIVES; j++)
            v[j] = j < json_array_size(values) ? json_number_value(json_array_get(values, j)) : NAN;
        char *params = json_dumps(cfg, JSON_COMPACT | JSON_PRESERVE_ORDER);
        char *objs = r->x.nobjectives > 1 ? json_dumps(values, JSON_COMPACT) : NULL;
        tp_prior_row_t p = {.source = str_of(e, "source"),
                            .source_trial = json_integer_value(json_object_get(e, "trial")),
                            .params = params,
                            .value = v[0],
                            .objectives = objs,
                            .at = tp__wall_s()};
        tp__journal_ok(&r->journal, tp__store_prior_add(tp__journal_tx(&r->journal), &p),
                       "recording a warm-start observation");
        feed(r, cfg, v);
        free(params), free(objs);
    }
}
