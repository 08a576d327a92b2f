/* sched_asha: asynchronous successive halving, promotion-based (Li et al.
 * 2018, "A System for Massively Parallel Hyperparameter Tuning", alg. 2).
 *
 * Rungs r_k = min * eta^k, the last one equal to max (tp__budget_rungs;
 * eta defaults to 3). next() looks for a promotable trial from the top rung
 * down: one whose job at rung k ended ok, that ranks in the top
 * floor(n_k / eta) of rung k's ok results (n_k of them, best first by the
 * metric's mode, ties to the older trial) and has not been promoted yet;
 * the best such trial gets a job at rung k + 1 with budget r_{k+1}. Else, if
 * the sampler has another configuration (its `trials` bounds how many ASHA
 * starts), a new trial at rung 0. Else -EAGAIN while jobs run (they may make
 * someone promotable), else 0. Never waits for a rung to fill: that is the
 * "asynchronous" part, at the price of some promotions that a synchronous
 * bracket would not make (the paper's "mispromotions").
 *
 * Failed jobs (ok 0 or a NaN value) take their trial out: it is never
 * promoted, its result is not counted in n_k, and the sampler is told NaN.
 * Every ok result is told to the sampler; the latest rung's value wins.
 * final(trial, rung): the last rung, a failed trial, or the search over.
 * Semantics match Ray Tune's ASHA with a promotion (not stopping) rule and
 * Optuna's SuccessiveHalvingPruner with min_early_stopping_rate 0, except
 * that rungs are budgets given to jobs rather than milestones of one run.
 *
 * Cost: next() O(R n log n) for n results over R rungs (a sort per rung),
 * fine below 10k trials; result() O(rung results). */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "search/scheduler.h"

#define ASHA_MAX_RUNGS 64

typedef struct asha_trial {
    json_t *config;     /* owned, told to the sampler with each result */
    int rung;           /* rung of its latest job */
    int running;        /* that job has not ended */
    int failed;         /* a job failed: out of the search */
} asha_trial_t;

typedef struct asha_result {
    int64_t trial;      /* whose */
    double value;       /* objective at the rung's budget */
} asha_result_t;

typedef struct asha_rung {
    asha_result_t *res; /* ok results, in arrival order */
    size_t n, cap;
} asha_rung_t;

typedef struct asha_state {
    double budgets[ASHA_MAX_RUNGS];   /* r_k */
    size_t nrungs;                    /* L */
    asha_rung_t rungs[ASHA_MAX_RUNGS];
    asha_trial_t *trials;             /* by trial number */
    size_t ntrials, cap;
    size_t running;                   /* jobs out */
    int exhausted;                    /* the sampler returned 0 */
    int over;                         /* next() returned 0 */
    int maximize;                     /* copy of cfg.maximize, for the sort */
} asha_state_t;

static int asha_init(tp_scheduler_t *s, tp_error_t *err) {
    asha_state_t *st = tp__xcalloc(1, sizeof *st);
    st->nrungs = tp__budget_rungs(&s->cfg.budget, st->budgets, ASHA_MAX_RUNGS);
    if (st->nrungs == 0) {
        free(st);
        return tp__errorf(err, -EINVAL, "asha: the budget has no rungs (need 0 < min <= max)");
    }
    st->maximize = s->cfg.maximize;
    s->impl = st;
    return 0;
}

/* Best first; equal values: the older trial first. */
static int better_first(const asha_result_t *a, const asha_result_t *b, int maximize) {
    if (a->value != b->value) return maximize ? (a->value > b->value ? -1 : 1)
                                              : (a->value < b->value ? -1 : 1);
    return (a->trial > b->trial) - (a->trial < b->trial);
}
static int cmp_max(const void *a, const void *b) { return better_first(a, b, 1); }
static int cmp_min(const void *a, const void *b) { return better_first(a, b, 0); }

/* The best trial in the top floor(n_k / eta) of rung k that can go on, or
 * -1; *rank and *value say where it stood. O(n_k log n_k). */
static int64_t promotable(const asha_state_t *st, size_t k, double eta, size_t *rank,
                          double *value) {
    const asha_rung_t *r = &st->rungs[k];
    size_t top = (size_t)floor((double)r->n / eta + 1e-9);
    if (top == 0) return -1;
    asha_result_t *sorted = tp__xmalloc(r->n * sizeof *sorted);
    memcpy(sorted, r->res, r->n * sizeof *sorted);
    qsort(sorted, r->n, sizeof *sorted, st->maximize ? cmp_max : cmp_min);
    int64_t found = -1;
    for (size_t i = 0; i < top && found < 0; i++) {
        const asha_trial_t *t = &st->trials[sorted[i].trial];
        if (t->rung == (int)k && !t->running && !t->failed) {
            found = sorted[i].trial;
            *rank = i + 1;
            *value = sorted[i].value;
        }
    }
    free(sorted);
    return found;
}

static int asha_next(tp_scheduler_t *s, double now, tp_job_t *out) {
    asha_state_t *st = s->impl;
    double eta = s->cfg.budget.eta;
    for (size_t k = st->nrungs - 1; k-- > 0;) {
        size_t rank = 0;
        double value = 0;
        int64_t t = promotable(st, k, eta, &rank, &value);
        if (t < 0) continue;
        asha_trial_t *tr = &st->trials[t];
        tr->rung = (int)k + 1;
        tr->running = 1;
        st->running++;
        memset(out, 0, sizeof *out);
        out->trial = t;
        out->rung = tr->rung;
        out->group = tr->rung;
        out->budget = st->budgets[k + 1];
        snprintf(out->why, sizeof out->why,
                 "promoted to rung %d (budget %g): %.4g ranks %zu of %zu at rung %zu, top 1/%g "
                 "goes on",
                 out->rung, out->budget, value, rank, st->rungs[k].n, k, eta);
        return 1;
    }
    if (!st->exhausted) {
        json_t *cfg = NULL;
        int rc = tp__searcher_ask(s->sampler, (uint64_t)st->ntrials, now, &cfg);
        if (rc < 0) return rc;
        if (rc == 0) {
            st->exhausted = 1;
        } else {
            if (st->ntrials == st->cap) {
                st->cap = st->cap ? 2 * st->cap : 64;
                st->trials = tp__xrealloc(st->trials, st->cap * sizeof *st->trials);
            }
            asha_trial_t *tr = &st->trials[st->ntrials];
            memset(tr, 0, sizeof *tr);
            tr->config = cfg;
            tr->running = 1;
            st->running++;
            memset(out, 0, sizeof *out);
            out->trial = (int64_t)st->ntrials++;
            out->is_new = 1;
            out->config = json_incref(cfg); /* shared, never modified */
            out->budget = st->budgets[0];
            snprintf(out->why, sizeof out->why, "new trial at rung 0 (budget %g)", out->budget);
            return 1;
        }
    }
    if (st->running) return -EAGAIN;
    st->over = 1;
    return 0;
}

static void asha_result(tp_scheduler_t *s, int64_t trial, int rung, int ok, double value,
                        double now) {
    asha_state_t *st = s->impl;
    if (trial < 0 || (size_t)trial >= st->ntrials || rung < 0 || (size_t)rung >= st->nrungs)
        return;
    asha_trial_t *tr = &st->trials[trial];
    if (tr->running && tr->rung == rung) {
        tr->running = 0;
        st->running--;
    }
    if (!ok || isnan(value)) {
        tr->failed = 1;
        s->sampler->ops->tell(s->sampler, (uint64_t)trial, tr->config, NAN, now);
        return;
    }
    asha_rung_t *r = &st->rungs[rung];
    size_t i = 0;
    while (i < r->n && r->res[i].trial != trial) i++;
    if (i == r->n) {
        if (r->n == r->cap) {
            r->cap = r->cap ? 2 * r->cap : 64;
            r->res = tp__xrealloc(r->res, r->cap * sizeof *r->res);
        }
        r->n++;
    }
    r->res[i] = (asha_result_t){.trial = trial, .value = value};
    s->sampler->ops->tell(s->sampler, (uint64_t)trial, tr->config, value, now);
}

static int asha_report(tp_scheduler_t *s, int64_t trial, int64_t step, double value, double now,
                       char *why, size_t whylen) {
    (void)s, (void)trial, (void)step, (void)value, (void)now;
    if (whylen) why[0] = '\0';
    return 1;
}

static int asha_final(const tp_scheduler_t *s, int64_t trial, int rung) {
    const asha_state_t *st = s->impl;
    if (trial < 0 || (size_t)trial >= st->ntrials) return 1;
    return st->trials[trial].failed || rung + 1 >= (int)st->nrungs || st->over;
}

static uint64_t asha_total(const tp_scheduler_t *s) {
    return s->sampler->ops->total(s->sampler);
}

static void asha_destroy(tp_scheduler_t *s) {
    asha_state_t *st = s->impl;
    if (!st) return;
    for (size_t i = 0; i < st->ntrials; i++) json_decref(st->trials[i].config);
    for (size_t k = 0; k < st->nrungs; k++) free(st->rungs[k].res);
    free(st->trials);
    free(st);
    s->impl = NULL;
}

const struct tp_scheduler_ops tp__sched_asha_ops = {
    .name = "asha",
    .init = asha_init,
    .next = asha_next,
    .result = asha_result,
    .report = asha_report,
    .final = asha_final,
    .total = asha_total,
    .destroy = asha_destroy,
};
