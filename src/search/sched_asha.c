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
 * Semantics match Ray Tune's ASHA with a promotion (not stopping) rule.
 * Optuna's SuccessiveHalvingPruner (min_early_stopping_rate 0) differs in two
 * ways: it decides once, when a trial reaches a rung (top max(1, n_k // eta)
 * there, itself counted), where asha promotes a trial whenever it enters the
 * top floor(n_k / eta), which grows as the rung fills; and its first trials at
 * a rung go on when they rank first. On identical sequences asha spends fewer
 * epochs (bench/search/asha_rules.py). Budgets are accounted as the paper
 * does: a job at rung k + 1 resumes the trial's checkpoint, so it trains
 * r_(k+1) - r_k (tp__asha_work; tests/unit/test_asha_paper.c).
 *
 * Cost: next() O(R log n) expected for n results over R rungs (each rung
 * kept in rank order as results arrive, asha_rung.c); result() O(log n). */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "search/asha.h"

int tp__asha_init(tp_asha_t *st, const tp_scheduler_t *s, tp_error_t *err) {
    memset(st, 0, sizeof *st);
    st->nrungs = tp__budget_rungs(&s->cfg.budget, st->budgets, TP_ASHA_MAX_RUNGS);
    if (st->nrungs == 0)
        return tp__errorf(err, -EINVAL, "%s: the budget has no rungs (need 0 < min <= max)",
                          s->ops->name);
    st->maximize = s->cfg.maximize;
    return 0;
}

void tp__asha_free(tp_asha_t *st) {
    for (size_t i = 0; i < st->ntrials; i++)
        json_decref(st->trials[i].config);
    for (size_t k = 0; k < st->nrungs; k++)
        tp__asha_rung_free(&st->rungs[k]);
    free(st->trials);
    memset(st, 0, sizeof *st);
}

/* The first trial that can go on among the top floor(n_k / eta) of rung k
 * in rank order: the best one that can go on (asha_rung.c), if fewer than
 * that many results rank above it. O(log n_k) expected. */
int64_t tp__asha_promotable(const tp_asha_t *st, size_t k, double eta, size_t *rank,
                            double *value) {
    size_t top = (size_t)floor((double)st->rungs[k].n / eta + 1e-9);
    if (top == 0) return -1;
    size_t above = 0;
    const tp_asha_result_t *best = tp__asha_best_waiting(st, k, &above);
    if (!best || above >= top) return -1;
    *rank = above + 1;
    *value = best->value;
    return best->trial;
}

void tp__asha_start(tp_asha_t *st, int64_t t, int k, tp_job_t *out) {
    tp_asha_trial_t *tr = &st->trials[t];
    tr->rung = k;
    tr->running = 1;
    st->running++;
    tp__asha_sync(st, t);
    memset(out, 0, sizeof *out);
    out->trial = t;
    out->rung = k;
    out->group = k; /* a rung's jobs run at one budget: a Fluid trial group */
    out->budget = st->budgets[k];
}

int tp__asha_new_trial(tp_scheduler_t *s, tp_asha_t *st, double now, tp_job_t *out) {
    if (st->exhausted) return 0;
    json_t *cfg = NULL;
    int rc = tp__searcher_ask(s->sampler, (uint64_t)st->ntrials, st->budgets[0], now, &cfg);
    if (rc == 0) st->exhausted = 1;
    if (rc <= 0) return rc;
    st->trials = tp__xgrow(st->trials, &st->cap, st->ntrials + 1, sizeof *st->trials, 64);
    memset(&st->trials[st->ntrials], 0, sizeof *st->trials);
    st->trials[st->ntrials].config = cfg;
    tp__asha_start(st, (int64_t)st->ntrials++, 0, out);
    out->is_new = 1;
    out->config = json_incref(cfg); /* shared, never modified */
    snprintf(out->why, sizeof out->why, "new trial at rung 0 (budget %g)", out->budget);
    return 1;
}

void tp__asha_more(tp_asha_t *st) {
    st->exhausted = st->over = 0;
}

void tp__asha_result(tp_scheduler_t *s, tp_asha_t *st, int64_t trial, int rung, int ok,
                     double value, double now) {
    if (trial < 0 || (size_t)trial >= st->ntrials || rung < 0 || (size_t)rung >= st->nrungs) return;
    tp_asha_trial_t *tr = &st->trials[trial];
    if (tr->running && tr->rung == rung) {
        tr->running = 0;
        st->running--;
    }
    if (!ok || isnan(value)) {
        tp__asha_out(st, trial);
        tp__searcher_tell(s->sampler, (uint64_t)trial, tr->config, NAN, st->budgets[rung], now);
        return;
    }
    tp__asha_record(st, trial, (size_t)rung, value);
    tp__searcher_tell(s->sampler, (uint64_t)trial, tr->config, value, st->budgets[rung], now);
}

void tp__asha_retry(tp_asha_t *st, int64_t t, int k) {
    if (t < 0 || (size_t)t >= st->ntrials) return;
    tp_asha_trial_t *tr = &st->trials[t];
    if (!tr->failed || tr->running || tr->rung != k) return;
    tr->failed = 0;
    tr->running = 1;
    st->running++;
    tp__asha_sync(st, t);
    st->over = 0; /* a job is out again: the search waits for it */
}

/* ---- the asha scheduler ------------------------------------------------------------ */

static int asha_init(tp_scheduler_t *s, tp_error_t *err) {
    tp_asha_t *st = tp__xcalloc(1, sizeof *st);
    int rc = tp__asha_init(st, s, err);
    if (rc < 0) {
        free(st);
        return rc;
    }
    s->impl = st;
    return 0;
}

static int asha_next(tp_scheduler_t *s, double now, tp_job_t *out) {
    tp_asha_t *st = s->impl;
    double eta = s->cfg.budget.eta;
    for (size_t k = st->nrungs - 1; k-- > 0;) {
        size_t rank = 0;
        double value = 0;
        int64_t t = tp__asha_promotable(st, k, eta, &rank, &value);
        if (t < 0) continue;
        tp__asha_start(st, t, (int)k + 1, out);
        snprintf(out->why, sizeof out->why,
                 "promoted to rung %d (budget %g): %.4g ranks %zu of %zu at rung %zu, top 1/%g "
                 "goes on",
                 out->rung, out->budget, value, rank, st->rungs[k].n, k, eta);
        return 1;
    }
    int rc = tp__asha_new_trial(s, st, now, out);
    if (rc != 0) return rc;
    if (st->running) return -EAGAIN;
    st->over = 1;
    return 0;
}

static void asha_result(tp_scheduler_t *s, int64_t trial, int rung, int ok, double value,
                        double now) {
    tp__asha_result(s, s->impl, trial, rung, ok, value, now);
}

static int asha_final(const tp_scheduler_t *s, int64_t trial, int rung) {
    const tp_asha_t *st = s->impl;
    if (trial < 0 || (size_t)trial >= st->ntrials) return 1;
    return st->trials[trial].failed || rung + 1 >= (int)st->nrungs || st->over;
}

static uint64_t asha_total(const tp_scheduler_t *s) {
    return s->sampler->ops->total(s->sampler);
}

double tp__asha_work(const tp_asha_t *st, double eta, uint64_t n) {
    double per = 0, share = 1, from = 0;
    for (size_t k = 0; k < st->nrungs; k++, share /= eta) {
        per += share * (st->budgets[k] - from);
        from = st->budgets[k];
    }
    return per * (double)n;
}

static double asha_work(const tp_scheduler_t *s) {
    return tp__asha_work(s->impl, s->cfg.budget.eta, asha_total(s));
}

static void asha_destroy(tp_scheduler_t *s) {
    if (!s->impl) return;
    tp__asha_free(s->impl);
    free(s->impl);
    s->impl = NULL;
}

static void asha_trials(tp_scheduler_t *s) {
    tp__asha_more(s->impl);
}

static void asha_retry(tp_scheduler_t *s, int64_t trial, int rung) {
    tp__asha_retry(s->impl, trial, rung);
}

const struct tp_scheduler_ops tp__sched_asha_ops = {
    .name = "asha",
    .trials = asha_trials,
    .retry = asha_retry,
    .init = asha_init,
    .next = asha_next,
    .result = asha_result,
    .report = tp__sched_report_runs_on,
    .final = asha_final,
    .total = asha_total,
    .work = asha_work,
    .destroy = asha_destroy,
};
