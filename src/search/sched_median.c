/* sched_median: the median stopping rule with Optuna's MedianPruner
 * defaults (n_startup_trials 5, n_warmup_steps 0, interval_steps 1,
 * n_min_trials 1). Each trial runs one job with budget = budget.max (0
 * without a budget), in the sampler's order (as fifo).
 *
 * report(trial, step, value) records the value (a step reported again
 * replaces the earlier one). Once at least 5 trials have COMPLETED (ended ok
 * and not stopped; stopped and failed trials never count, as Optuna counts
 * COMPLETE trials only), the trial is stopped (returns 0) when its best
 * value so far is worse than the median of the completed trials' values at
 * this same step (only those that reported it; NaNs skipped; the median of
 * an even count is the mean of the middle two, as numpy's nanpercentile). A
 * trial whose every report is NaN is stopped too (Optuna prunes it). When no
 * completed trial reported the step, it runs on.
 *
 * After a stop the orchestrator calls result(trial, 0, ok=1, last value):
 * the trial is final, and that last value is told to the sampler (tpe then
 * ranks it among the others by that value).
 *
 * Cost: report() O(H + C log H) for C completed trials with H steps each,
 * plus O(C log C) for the median; fine below 10k trials. Memory: every
 * trial's step -> value history. */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "search/scheduler.h"

#define MEDIAN_STARTUP 5 /* n_startup_trials */
#define MEDIAN_WARMUP 0  /* n_warmup_steps */

typedef struct med_point {
    int64_t step;
    double value;
} med_point_t;

typedef struct med_trial {
    json_t *config;    /* owned, told to the sampler with the result */
    med_point_t *hist; /* reports sorted by step */
    size_t n, cap;
    int stopped; /* report() returned 0 */
    int ended;   /* its result came */
} med_trial_t;

typedef struct med_state {
    med_trial_t *trials; /* by trial number */
    size_t ntrials, cap;
    int64_t *completed; /* trials that completed, in order */
    size_t ncompleted;
    double *scratch; /* ncompleted values */
} med_state_t;

static int med_init(tp_scheduler_t *s, tp_error_t *err) {
    (void)err;
    s->impl = tp__xcalloc(1, sizeof(med_state_t));
    return 0;
}

static int med_next(tp_scheduler_t *s, double now, tp_job_t *out) {
    med_state_t *st = s->impl;
    json_t *cfg;
    int rc = tp__sched_new_trial(s, (int64_t)st->ntrials, now, out, &cfg);
    if (rc <= 0) return rc;
    if (st->ntrials == st->cap) {
        size_t old = st->cap;
        st->trials = tp__xgrow(st->trials, &st->cap, st->ntrials + 1, sizeof *st->trials, 64);
        st->completed = tp__xresize(st->completed, old, st->cap, sizeof *st->completed);
        st->scratch = tp__xresize(st->scratch, old, st->cap, sizeof *st->scratch);
    }
    med_trial_t *t = &st->trials[st->ntrials++];
    memset(t, 0, sizeof *t);
    t->config = cfg;
    return 1;
}

/* Index of the first point with step >= step. O(log n). */
static size_t find_step(const med_trial_t *t, int64_t step) {
    size_t lo = 0, hi = t->n;
    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        if (t->hist[mid].step < step)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo;
}

static void record(med_trial_t *t, int64_t step, double value) {
    size_t at = find_step(t, step);
    if (at < t->n && t->hist[at].step == step) {
        t->hist[at].value = value;
        return;
    }
    t->hist = tp__xgrow(t->hist, &t->cap, t->n + 1, sizeof *t->hist, 16);
    memmove(&t->hist[at + 1], &t->hist[at], (t->n - at) * sizeof *t->hist);
    t->hist[at] = (med_point_t){.step = step, .value = value};
    t->n++;
}

static int cmp_double(const void *pa, const void *pb) {
    double a = *(const double *)pa, b = *(const double *)pb;
    return (a > b) - (a < b);
}

static int med_report(tp_scheduler_t *s, int64_t trial, int64_t step, double value, double now,
                      char *why, size_t whylen) {
    (void)now;
    med_state_t *st = s->impl;
    if (whylen) why[0] = '\0';
    if (trial < 0 || (size_t)trial >= st->ntrials) return 1;
    med_trial_t *t = &st->trials[trial];
    record(t, step, value);
    if (st->ncompleted < MEDIAN_STARTUP || step < MEDIAN_WARMUP) return 1;
    int max = s->cfg.maximize;
    double best = NAN;
    for (size_t i = 0; i < t->n; i++) {
        double v = t->hist[i].value;
        if (!isnan(v) && (isnan(best) || (max ? v > best : v < best))) best = v;
    }
    if (isnan(best)) {
        t->stopped = 1;
        snprintf(why, whylen, "stopped at step %lld: it reported no number so far",
                 (long long)step);
        return 0;
    }
    size_t k = 0;
    for (size_t c = 0; c < st->ncompleted; c++) {
        const med_trial_t *o = &st->trials[st->completed[c]];
        size_t at = find_step(o, step);
        if (at < o->n && o->hist[at].step == step && !isnan(o->hist[at].value))
            st->scratch[k++] = o->hist[at].value;
    }
    if (k == 0) return 1;
    qsort(st->scratch, k, sizeof *st->scratch, cmp_double);
    double median =
        k % 2 ? st->scratch[k / 2] : 0.5 * (st->scratch[k / 2 - 1] + st->scratch[k / 2]);
    if (max ? !(best < median) : !(best > median)) return 1;
    t->stopped = 1;
    snprintf(why, whylen,
             "stopped at step %lld: best %.4g is %s the median %.4g of %zu completed "
             "trials at step %lld",
             (long long)step, best, max ? "below" : "above", median, k, (long long)step);
    return 0;
}

static void med_result(tp_scheduler_t *s, int64_t trial, int rung, int ok, double value,
                       double now) {
    (void)rung;
    med_state_t *st = s->impl;
    if (trial < 0 || (size_t)trial >= st->ntrials) return;
    med_trial_t *t = &st->trials[trial];
    if (t->ended) return;
    t->ended = 1;
    if (ok && !isnan(value) && !t->stopped) st->completed[st->ncompleted++] = trial;
    s->sampler->ops->tell(s->sampler, (uint64_t)trial, t->config, ok ? value : NAN, now);
}

static int med_final(const tp_scheduler_t *s, int64_t trial, int rung) {
    (void)s, (void)trial, (void)rung;
    return 1;
}

static uint64_t med_total(const tp_scheduler_t *s) {
    return s->sampler->ops->total(s->sampler);
}

static void med_destroy(tp_scheduler_t *s) {
    med_state_t *st = s->impl;
    if (!st) return;
    for (size_t i = 0; i < st->ntrials; i++) {
        json_decref(st->trials[i].config);
        free(st->trials[i].hist);
    }
    free(st->trials);
    free(st->completed);
    free(st->scratch);
    free(st);
    s->impl = NULL;
}

const struct tp_scheduler_ops tp__sched_median_ops = {
    .name = "median",
    .init = med_init,
    .next = med_next,
    .result = med_result,
    .report = med_report,
    .final = med_final,
    .total = med_total,
    .destroy = med_destroy,
};
