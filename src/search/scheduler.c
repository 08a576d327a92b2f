/* scheduler: the table of schedulers, chosen by name, and the budget rungs
 * they share. A scheduler owns its sampler (a tp_searcher_t made from
 * cfg->sampler); every scheduler numbers new trials 0, 1, 2, ... and asks the
 * sampler for trial k's configuration with ask(k), and tells it every job's
 * result (the latest value per trial wins in the sampler). */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "search/scheduler.h"

#define DEFAULT_ETA 3.0 /* Li et al., Optuna and Ray all default to 3 */

static const struct tp_scheduler_ops *const scheduler_table[] = {
    &tp__sched_fifo_ops,   &tp__sched_asha_ops,       &tp__sched_hyperband_ops,
    &tp__sched_median_ops, &tp__sched_hypersched_ops, &tp__sched_pbt_ops,
};

const char *const tp__scheduler_names[] = {"fifo",       "asha", "hyperband", "median",
                                           "hypersched", "pbt",  NULL};

/* Rungs min * eta^k while below max (within 1e-9 relative), then max itself:
 * (1, 81, 3) -> 1 3 9 27 81; (1, 100, 3) -> 1 3 9 27 81 100 (the last rung
 * always equals max, as Ray caps its last milestone at max_t). eta 0 means
 * the default 3. Returns the rung count (at most cap; a short cap keeps
 * the first ones), 0 for a budget that is not 0 < min <= max, eta > 1.
 * O(log(max/min) / log(eta)). */
size_t tp__budget_rungs(const tp_budget_t *b, double *out, size_t cap) {
    double eta = b->eta == 0 ? DEFAULT_ETA : b->eta;
    if (!(b->min > 0) || !(b->max >= b->min) || !isfinite(b->max) || !(eta > 1) || !isfinite(eta))
        return 0;
    size_t n = 0;
    double r = b->min;
    while (r < b->max * (1 - 1e-9)) {
        if (n < cap) out[n] = r;
        n++;
        r *= eta;
    }
    if (n < cap) out[n] = b->max;
    n++;
    return n < cap ? n : cap;
}

static int check_budget(const tp_scheduler_cfg_t *cfg, const char *name, tp_error_t *err) {
    const tp_budget_t *b = &cfg->budget;
    int needs = strcmp(name, "asha") == 0 || strcmp(name, "hyperband") == 0 ||
                strcmp(name, "hypersched") == 0 || strcmp(name, "pbt") == 0;
    if (!b->name) {
        if (needs)
            return tp__errorf(err, -EINVAL,
                              "scheduler %s needs a budget to grow; add e.g. `budget: {name: "
                              "epochs, min: 1, max: 81, eta: 3}` and use {epochs} in the command",
                              name);
        return 0;
    }
    char lo[32], hi[32], eta[32];
    tp__fmt_double(b->min, lo);
    tp__fmt_double(b->max, hi);
    tp__fmt_double(b->eta, eta);
    if (!(b->min > 0) || !(b->max >= b->min) || !isfinite(b->max))
        return tp__errorf(err, -EINVAL,
                          "budget \"%s\" needs 0 < min <= max, got min %s, max %s; e.g. min: 1, "
                          "max: 81",
                          b->name, lo, hi);
    if (b->eta != 0 && (!(b->eta > 1) || !isfinite(b->eta)))
        return tp__errorf(err, -EINVAL, "budget \"%s\" needs eta > 1, got %s; e.g. eta: 3", b->name,
                          eta);
    return 0;
}

/* Create the scheduler named by cfg->scheduler (NULL: fifo) with its
 * sampler. The copy of cfg points at static names; budget.name stays
 * borrowed; budget.eta 0 becomes 3. NULL with errno and err set for an
 * unknown name, a budget that asha/hyperband lack or that is invalid, or a
 * sampler that fails. Free with tp__scheduler_free. */
tp_scheduler_t *tp__scheduler_new(const tp_space_t *space, const tp_scheduler_cfg_t *cfg,
                                  tp_error_t *err) {
    const char *name = cfg->scheduler ? cfg->scheduler : "fifo";
    const struct tp_scheduler_ops *ops = NULL;
    for (size_t i = 0; i < TP_ARRAY_LEN(scheduler_table); i++)
        if (strcmp(scheduler_table[i]->name, name) == 0) ops = scheduler_table[i];
    if (!ops) {
        const char *guess =
            tp__did_you_mean(name, tp__scheduler_names, TP_ARRAY_LEN(tp__scheduler_names) - 1);
        if (guess)
            tp__errorf(err, -EINVAL,
                       "unknown scheduler \"%s\"; did you mean \"%s\"? (known: fifo, asha, "
                       "hyperband, median, hypersched, pbt)",
                       name, guess);
        else
            tp__errorf(err, -EINVAL,
                       "unknown scheduler \"%s\"; known: fifo, asha, hyperband, median, "
                       "hypersched, pbt",
                       name);
        errno = EINVAL;
        return NULL;
    }
    int rc = check_budget(cfg, ops->name, err);
    if (rc < 0) {
        errno = -rc;
        return NULL;
    }
    if (tp__search_nobj(&cfg->sampler) > 1 && !ops->result_values) {
        tp__errorf(err, -EINVAL, "%s", tp__sched_single_objective_msg(ops->name));
        errno = EINVAL;
        return NULL;
    }
    tp_search_cfg_t sc = cfg->sampler;
    if (cfg->budget.name) {
        sc.budget_min = cfg->budget.min, sc.budget_max = cfg->budget.max;
        sc.budget_eta = cfg->budget.eta == 0 ? DEFAULT_ETA : cfg->budget.eta;
    }
    tp_searcher_t *sampler = tp__searcher_new(space, &sc, cfg->maximize, err);
    if (!sampler) return NULL; /* errno set */
    tp_scheduler_t *s = tp__xcalloc(1, sizeof *s);
    s->ops = ops;
    s->sampler = sampler;
    s->cfg = *cfg;
    s->cfg.scheduler = ops->name;
    s->cfg.sampler.algorithm = sampler->cfg.algorithm;
    if (s->cfg.budget.eta == 0) s->cfg.budget.eta = DEFAULT_ETA;
    s->space = space;
    rc = ops->init(s, err);
    if (rc < 0) {
        tp__searcher_free(s->sampler);
        free(s);
        errno = -rc;
        return NULL;
    }
    return s;
}

const char *tp__sched_single_objective_msg(const char *name) {
    static const char *const msgs[][2] = {
        {"asha", "scheduler asha promotes by one number per rung; with several objectives use "
                 "scheduler: fifo (or rank by one objective: metric: {name: ..., mode: ...})"},
        {"hyperband", "scheduler hyperband keeps the best by one number per rung; with several "
                      "objectives use scheduler: fifo"},
        {"hypersched", "scheduler hypersched promotes by one number per rung; with several "
                       "objectives use scheduler: fifo"},
        {"pbt", "scheduler pbt ranks its population by one number; with several objectives "
                "use scheduler: fifo"},
        {"median", "scheduler median compares one number with the median; with several "
                   "objectives use scheduler: fifo"},
    };
    for (size_t i = 0; i < TP_ARRAY_LEN(msgs); i++)
        if (!strcmp(msgs[i][0], name)) return msgs[i][1];
    return "this scheduler ranks trials by one number; with several objectives use "
           "scheduler: fifo";
}

void tp__scheduler_set_trials(tp_scheduler_t *s, uint64_t n) {
    s->cfg.sampler.trials = n;
    if (s->sampler) s->sampler->cfg.trials = n;
    if (s->ops->trials) s->ops->trials(s);
}

void tp__scheduler_constrain(tp_scheduler_t *s, int64_t trial, const double *values) {
    if (s->sampler && trial >= 0) tp__searcher_constrain(s->sampler, (uint64_t)trial, values);
}

double tp__scheduler_work(const tp_scheduler_t *s) {
    if (!s->cfg.budget.name) return 0;
    if (s->ops->work) return s->ops->work(s);
    return (double)s->ops->total(s) * s->cfg.budget.max;
}

void tp__scheduler_free(tp_scheduler_t *s) {
    if (!s) return;
    if (s->ops && s->ops->destroy) s->ops->destroy(s);
    tp__searcher_free(s->sampler);
    free(s);
}

int tp__sched_report_runs_on(tp_scheduler_t *s, int64_t trial, int64_t step, double value,
                             double now, char *why, size_t whylen) {
    (void)s, (void)trial, (void)step, (void)value, (void)now;
    if (whylen) why[0] = '\0';
    return 1;
}

/* See scheduler.h. */
int tp__sched_new_trial(tp_scheduler_t *s, int64_t index, double now, tp_job_t *out, json_t **cfg) {
    *cfg = NULL;
    int rc = tp__searcher_ask(s->sampler, (uint64_t)index,
                              s->cfg.budget.name ? s->cfg.budget.max : 0, now, cfg);
    if (rc <= 0) return rc;
    memset(out, 0, sizeof *out);
    out->trial = index;
    out->is_new = 1;
    out->config = json_incref(*cfg); /* shared, never modified: one copy per trial */
    out->budget = s->cfg.budget.name ? s->cfg.budget.max : 0;
    if (s->cfg.budget.name)
        snprintf(out->why, sizeof out->why, "new trial (budget %g)", out->budget);
    else
        snprintf(out->why, sizeof out->why, "new trial");
    return 1;
}
