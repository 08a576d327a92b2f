/* config_search: what the search optimizes and how it spends its budget:
 * `metric` (one objective, or a list of them), `budget` (the resource that
 * grows), `search.scheduler` (fifo, asha, hyperband, median) and
 * `checkpoint` (how a trial is asked to pause). */
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "config/config_internal.h"
#include "search/scheduler.h"

/* ---- metric: {name, mode} or a list of them ------------------------------------ */

static int metric_name(cfgctx_t *c, const char *key, yaml_node_t *v) {
    const char *s;
    int rc = tp__cfg_get_string(c, key, v, &s);
    if (rc < 0) return rc;
    tp_objective_t *o = &c->x->objectives[c->x->nobjectives];
    for (size_t i = 0; i < c->x->nobjectives; i++)
        if (!strcmp(c->x->objectives[i].name, s))
            return fail(c, v, "objective \"%s\" is listed twice; keep one", s);
    free(o->name);
    o->name = tp__strdup(s);
    return 0;
}

static const char *const modes[] = {"min", "max"}; /* by maximize */
static const key_table_t mode_values = KEY_NAMES(modes, NULL);

static int metric_mode(cfgctx_t *c, const char *key, yaml_node_t *v) {
    (void)key;
    tp_objective_t *o = &c->x->objectives[c->x->nobjectives];
    if (v->type == YAML_SCALAR_NODE && !strcmp(stext(v), modes[1]))
        o->maximize = 1;
    else if (v->type == YAML_SCALAR_NODE && !strcmp(stext(v), modes[0]))
        o->maximize = 0;
    else {
        char got[256];
        return fail(c, v, "\"mode\" must be max or min, got %s",
                    tp__cfg_describe(v, got, sizeof got));
    }
    return 0;
}

static const key_spec_t metric_keys[] = {
    {"name", metric_name, 1, "name: val_acc"},
    {"mode", metric_mode, 1, "mode: max", .values = &mode_values},
};
const key_table_t tp__cfg_metric_table = KEY_TABLE(metric_keys);

/* One objective mapping into objectives[nobjectives], then counted. */
static int one_objective(cfgctx_t *c, yaml_node_t *v) {
    int rc = tp__cfg_walk_mapping(c, "metric", v, metric_keys, TP_ARRAY_LEN(metric_keys),
                                  "metric: {name: val_acc, mode: max}");
    if (rc == 0) c->x->nobjectives++;
    return rc;
}

/* See config_internal.h. The first objective is also x->metric and
 * x->maximize (reports must carry it; the others are read from the same
 * report lines). */
int tp__cfg_key_metric(cfgctx_t *c, const char *key, yaml_node_t *v) {
    (void)key;
    int rc = 0;
    if (v->type == YAML_SEQUENCE_NODE) {
        size_t n = seq_len(v);
        if (n == 0)
            return fail(c, v,
                        "metric lists no objective; write e.g. metric: [{name: err, mode: "
                        "min}, {name: cost, mode: min}]");
        if (n > TP_MAX_OBJECTIVES)
            return fail(c, v, "metric lists %zu objectives; at most %d", n, TP_MAX_OBJECTIVES);
        for (size_t i = 0; i < n && rc == 0; i++)
            rc = one_objective(c, tp__cfg_node_at(c, v->data.sequence.items.start[i]));
    } else {
        rc = one_objective(c, v);
    }
    if (rc < 0) return rc;
    tp_experiment_t *x = c->x;
    free(x->metric);
    x->metric = tp__strdup(x->objectives[0].name);
    x->maximize = x->objectives[0].maximize;
    x->search.nobj = x->nobjectives;
    x->search.maximize_mask = 0;
    for (size_t i = 0; i < x->nobjectives; i++)
        if (x->objectives[i].maximize) x->search.maximize_mask |= 1u << i;
    c->metric = v;
    return 0;
}

/* ---- budget ------------------------------------------------------------------------ */

static int get_positive(cfgctx_t *c, const char *key, yaml_node_t *v, double *out) {
    return tp__cfg_get_number(c, key, v, 0, INFINITY, TP_CFG_ABOVE_LO, NULL, out);
}

static int budget_name(cfgctx_t *c, const char *key, yaml_node_t *v) {
    const char *s;
    int rc = tp__cfg_get_string(c, key, v, &s);
    if (rc < 0) return rc;
    if (!tp__is_placeholder_name(s))
        return fail(c, v,
                    "budget name \"%s\" must be a placeholder name ([A-Za-z_][A-Za-z0-9_]*), "
                    "e.g. epochs",
                    s);
    free(c->x->budget_name);
    c->x->budget_name = tp__strdup(s);
    return 0;
}

static int budget_min(cfgctx_t *c, const char *key, yaml_node_t *v) {
    return get_positive(c, key, v, &c->x->budget_min);
}

static int budget_max(cfgctx_t *c, const char *key, yaml_node_t *v) {
    return get_positive(c, key, v, &c->x->budget_max);
}

static int budget_eta(cfgctx_t *c, const char *key, yaml_node_t *v) {
    return tp__cfg_get_number(c, key, v, 1, 100, TP_CFG_ABOVE_LO, "the reduction factor, e.g. 3",
                              &c->x->budget_eta);
}

static const key_spec_t budget_keys[] = {
    {"name", budget_name, 1, "name: epochs"},
    {"min", budget_min, 1, "min: 1"},
    {"max", budget_max, 1, "max: 81"},
    {"eta", budget_eta, 0, NULL},
};
const key_table_t tp__cfg_budget_table = KEY_TABLE(budget_keys);

int tp__cfg_key_budget(cfgctx_t *c, const char *key, yaml_node_t *v) {
    int rc = tp__cfg_walk_mapping(c, key, v, budget_keys, TP_ARRAY_LEN(budget_keys),
                                  "budget: {name: epochs, min: 1, max: 81, eta: 3}");
    if (rc == 0 && c->x->budget_min > c->x->budget_max)
        return fail(c, v, "budget min %g is above max %g; write min <= max", c->x->budget_min,
                    c->x->budget_max);
    c->budget = v;
    return rc;
}

static int checkpoint_signal(cfgctx_t *c, const char *key, yaml_node_t *v) {
    const char *s;
    int rc = tp__cfg_get_string(c, key, v, &s);
    if (rc < 0) return rc;
    if (!strcmp(s, "SIGUSR1") || !strcmp(s, "USR1")) {
        c->x->pause_signal = SIGUSR1;
        return 0;
    }
    if (!strcmp(s, "none")) {
        c->x->pause_signal = 0;
        return 0;
    }
    return fail(c, v, "checkpoint signal \"%s\" is not supported; use SIGUSR1 or none", s);
}

static const key_spec_t checkpoint_keys[] = {
    {"signal", checkpoint_signal, 0, NULL},
};
const key_table_t tp__cfg_checkpoint_table = KEY_TABLE(checkpoint_keys);

int tp__cfg_key_checkpoint(cfgctx_t *c, const char *key, yaml_node_t *v) {
    return tp__cfg_walk_mapping(c, key, v, checkpoint_keys, TP_ARRAY_LEN(checkpoint_keys),
                                "checkpoint: {signal: SIGUSR1}");
}

int tp__cfg_search_scheduler(cfgctx_t *c, const char *key, yaml_node_t *v) {
    const char *s;
    int rc = tp__cfg_get_string(c, key, v, &s);
    if (rc < 0) return rc;
    size_t n = 0;
    for (; tp__scheduler_names[n]; n++)
        if (!strcmp(s, tp__scheduler_names[n])) {
            c->x->scheduler = tp__scheduler_names[n];
            c->scheduler = v;
            return 0;
        }
    const char *guess = tp__did_you_mean(s, tp__scheduler_names, n);
    if (guess) return fail(c, v, "unknown scheduler \"%s\"; did you mean \"%s\"?", s, guess);
    return fail(
        c, v, "unknown scheduler \"%s\"; use fifo, asha, hyperband, median, hypersched or pbt", s);
}

/* `search.warm_start: [DIR, ...]`: earlier experiments whose completed
 * trials the sampler starts from (read by the run, not here). */
int tp__cfg_search_warm_start(cfgctx_t *c, const char *key, yaml_node_t *v) {
    if (v->type != YAML_SEQUENCE_NODE)
        return fail(c, v,
                    "\"%s\" must be a list of experiment directories, e.g. warm_start: "
                    "[runs/first]",
                    key);
    size_t n = seq_len(v);
    tp_experiment_t *x = c->x;
    x->warm_start = tp__xcalloc(n + 1, sizeof *x->warm_start);
    for (size_t i = 0; i < n; i++) {
        yaml_node_t *e = tp__cfg_node_at(c, v->data.sequence.items.start[i]);
        const char *dir;
        int rc = tp__cfg_get_string(c, "warm_start", e, &dir);
        if (rc < 0) return rc;
        x->warm_start[x->nwarm_start++] = tp__strdup(dir);
    }
    c->warm_start = v;
    return 0;
}

/* `search: {algorithm: bohb}` and `dehb` learn from the results of each
 * budget apart: they run inside rungs, asha's (asynchronous at any
 * concurrency, as issue 32 asks of them) unless search.scheduler names
 * another with rungs (hyperband: the papers' synchronous brackets, at about
 * twice asha's epochs for as many trials, docs/search.md). what says what
 * the algorithm does per budget. */
static int per_budget_scheduler(cfgctx_t *c, yaml_node_t *root, const char *what) {
    tp_experiment_t *x = c->x;
    const char *algo = x->search.algorithm;
    if (!c->scheduler) {
        if (!x->budget_name && !c->budget)
            return fail(c, c->algorithm ? c->algorithm : root,
                        "search algorithm %s %s and needs a budget to grow; add e.g. budget: "
                        "{name: epochs, min: 1, max: 81, eta: 3} and pass {epochs} to the "
                        "command (it runs in asha's rungs, or name scheduler: hyperband)",
                        algo, what);
        for (size_t i = 0; tp__scheduler_names[i]; i++)
            if (!strcmp(tp__scheduler_names[i], "asha")) x->scheduler = tp__scheduler_names[i];
        return 0;
    }
    if (strcmp(x->scheduler, "asha") && strcmp(x->scheduler, "hyperband") &&
        strcmp(x->scheduler, "hypersched"))
        return fail(c, c->scheduler,
                    "search algorithm %s %s and needs a scheduler with rungs: asha (its "
                    "default), hyperband or hypersched; %s runs every trial at one budget",
                    algo, what, x->scheduler);
    return 0;
}

int tp__cfg_check_budget(cfgctx_t *c, yaml_node_t *root) {
    tp_experiment_t *x = c->x;
    if (!tp__cfg_failed_within(c, c->algorithm)) {
        int rc = 0;
        if (!strcmp(x->search.algorithm, "bohb"))
            rc = per_budget_scheduler(c, root, "fits a model per budget");
        else if (!strcmp(x->search.algorithm, "dehb"))
            rc = per_budget_scheduler(c, root, "evolves a population per budget");
        if (rc < 0) return rc;
    }
    int rungs = !strcmp(x->scheduler, "asha") || !strcmp(x->scheduler, "hyperband") ||
                !strcmp(x->scheduler, "hypersched") || !strcmp(x->scheduler, "pbt");
    if (rungs && !x->budget_name && !c->budget) /* a budget with a mistake is said already */
        return fail(c, c->scheduler ? c->scheduler : root,
                    "scheduler %s needs a budget to grow; add e.g. budget: {name: epochs, min: 1, "
                    "max: 81, eta: 3} and pass {epochs} to the command",
                    x->scheduler);
    if (x->nwarm_start && !tp__cfg_failed_within(c, c->algorithm) &&
        strcmp(x->search.algorithm, "tpe") && strcmp(x->search.algorithm, "nsga2"))
        return fail(c, c->warm_start,
                    "warm_start feeds earlier results to a sampler that learns from them; use "
                    "search: {algorithm: tpe} or nsga2 (%s ignores them)",
                    x->search.algorithm);
    if (x->nobjectives > 1 && strcmp(x->scheduler, "fifo") != 0)
        return fail(c, c->scheduler ? c->scheduler : c->metric, "%s",
                    tp__sched_single_objective_msg(x->scheduler));
    if (x->budget_name && tp__space_find(&x->space, x->budget_name))
        return fail(c, c->budget,
                    "the budget \"%s\" is also a parameter in space; the scheduler "
                    "sets it: remove it from space",
                    x->budget_name);
    return 0;
}
