/* sched_hypersched: deadline-aware ASHA (after Liaw et al. 2019,
 * "HyperSched: Dynamic Resource Reallocation for Model Development on a
 * Deadline"), fed with measured timings instead of constants.
 *
 * It is ASHA (asha.h: the same rungs, the same promotion rule, top rung
 * first) with one admission rule in front of every job: a trial, new or
 * paused, starts only if it can still reach the incumbent's budget before
 * the deadline. The incumbent is the best ok result at the highest rung any
 * trial reached (budget B). A job that starts from budget b (0 for a new
 * trial, r_k for a paused trial at rung k) needs
 *
 *     need = j * startup_s + (B - b) * unit_s        (b < B: j rungs to cross)
 *     need = startup_s + min(r_{k+1} - r_k, min) * unit_s   (b >= B: it leads;
 *            it must be able to make progress past the incumbent)
 *
 * and starts only when need <= deadline - now, where behind the incumbent
 * the last unit may still be in flight at the deadline (need - unit_s): the
 * run checkpoints a running trial at the deadline and its report there
 * counts. (Without that one unit of slack, the estimate's noise refused the
 * very promotion ASHA's winner got in 1 seed of 21 at a deadline equal to
 * ASHA's finish, by 1.6%.) unit_s and startup_s are the
 * trial's own when measured (ops->timing), else the run's: the mean of the
 * trials' measured values, or when no job reported two steps, the
 * least-squares line run_s = startup + units * unit through every job's
 * (units, run_s). With nothing measured yet, the job starts (and its why
 * says so): nothing is assumed.
 *
 * A refused paused trial is out for good (time only runs out): next()
 * returns it as a refused job whose why gives the figures; the first refused
 * new trial closes admission of new trials for good, also returned once as
 * a refused job (trial -1). Once new trials are closed (or the sampler is
 * exhausted), the time left goes to exploitation: the best waiting trial of
 * the highest rung goes on when admissible, even outside ASHA's top 1/eta.
 * Without a deadline it is ASHA.
 *
 * Cost: next() O(R log n) expected for n results over R rungs (asha_rung.c);
 * timing() O(1). */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "search/asha.h"

typedef struct hs_trial {
    double unit_s;       /* its latest measured seconds per budget unit, NaN */
    double startup_s;    /* its latest measured start-up, NaN */
    double units, run_s; /* its latest job's size and duration (0: none) */
    int refused;         /* admission refused: out for good */
} hs_trial_t;

typedef struct hs_state {
    tp_asha_t asha;
    hs_trial_t *trials; /* by trial number, parallel to asha.trials */
    size_t cap;
    double deadline; /* 0: none */
    int closed;      /* new trials refused for good */
    /* the run's measurements */
    double unit_sum, startup_sum;
    size_t unit_n, startup_n;
    double n, sx, sy, sxx, sxy; /* least squares of run_s on units over every job */
} hs_state_t;

static int hs_init(tp_scheduler_t *s, tp_error_t *err) {
    hs_state_t *st = tp__xcalloc(1, sizeof *st);
    int rc = tp__asha_init(&st->asha, s, err);
    if (rc < 0) {
        free(st);
        return rc;
    }
    s->impl = st;
    return 0;
}

static hs_trial_t *hs_trial(hs_state_t *st, int64_t t) {
    if (t < 0 || (size_t)t >= st->asha.ntrials) return NULL;
    if ((size_t)t >= st->cap) {
        size_t old = st->cap;
        st->trials = tp__xgrow(st->trials, &st->cap, (size_t)t + 1, sizeof *st->trials, 64);
        for (size_t i = old; i < st->cap; i++)
            st->trials[i] = (hs_trial_t){.unit_s = NAN, .startup_s = NAN};
    }
    return &st->trials[t];
}

/* The run's seconds per unit and start-up: means of the measured ones, else
 * the line through every job's (units, run_s). NaN when unknown. */
static void run_timing(const hs_state_t *st, double *unit_s, double *startup_s) {
    *unit_s = st->unit_n ? st->unit_sum / (double)st->unit_n : NAN;
    *startup_s = st->startup_n ? st->startup_sum / (double)st->startup_n : NAN;
    double den = st->n * st->sxx - st->sx * st->sx;
    if (st->n >= 2 && den > 1e-12) {
        double b = (st->n * st->sxy - st->sx * st->sy) / den;
        double a = (st->sy - b * st->sx) / st->n;
        if (isnan(*unit_s) && b > 0) *unit_s = b;
        if (isnan(*startup_s)) *startup_s = a > 0 ? a : 0;
    }
}

/* A trial's seconds per unit and start-up: its own, else derived from its
 * last job with the run's start-up, else the run's. */
static void trial_timing(hs_state_t *st, int64_t t, double *unit_s, double *startup_s) {
    double ru, rs;
    run_timing(st, &ru, &rs);
    hs_trial_t *ht = t >= 0 ? hs_trial(st, t) : NULL;
    *unit_s = ru;
    *startup_s = rs;
    if (!ht) return;
    if (!isnan(ht->startup_s)) *startup_s = ht->startup_s;
    if (!isnan(ht->unit_s))
        *unit_s = ht->unit_s;
    else if (ht->units > 0 && !isnan(rs) && ht->run_s > rs)
        *unit_s = (ht->run_s - rs) / ht->units;
}

/* The incumbent's rung (the highest with an ok result), -1 when none. */
static int incumbent_rung(const tp_asha_t *a) {
    for (size_t k = a->nrungs; k-- > 0;)
        if (a->rungs[k].n) return (int)k;
    return -1;
}

/* Whether trial t (-1: a new one) may start a job from rung `from` (-1: a
 * new trial, budget 0) now; why says so in words either way. */
static int admit(tp_scheduler_t *s, hs_state_t *st, int64_t t, int from, double now, char *why,
                 size_t len) {
    why[0] = '\0';
    if (!(st->deadline > 0)) return 1;
    const tp_asha_t *a = &st->asha;
    double left = st->deadline - now;
    double unit, startup;
    trial_timing(st, t, &unit, &startup);
    if (isnan(unit) || isnan(startup)) {
        if (left > 0)
            snprintf(why, len, "; %.0f s to the deadline, no timing measured yet", left);
        else
            snprintf(why, len, "the deadline has passed (%.0f s ago)", -left);
        return left > 0;
    }
    int inc = incumbent_rung(a);
    double b = from < 0 ? 0 : a->budgets[from];
    double need, target;
    int behind = inc >= 0 && b < a->budgets[inc];
    if (behind) {
        target = a->budgets[inc];
        need = (inc - from) * startup + (target - b) * unit; /* jobs from+1 .. inc */
    } else {
        double step = from + 1 < (int)a->nrungs ? a->budgets[from + 1] - b : 0;
        double m = s->cfg.budget.min;
        target = b + (step < m ? step : m);
        need = startup + (target - b) * unit;
    }
    /* Behind the incumbent, the last step may still be in flight at the deadline (the run
     * checkpoints it and the trial reports where it is); past it, the step must fit. */
    int ok = behind ? need - unit <= left : need <= left;
    if (behind)
        snprintf(why, len,
                 "%sneeds %.0f s to reach the incumbent's budget %g (%.0f s to its last "
                 "step; start-up %.1f s, %.2f s per unit from %g), %.0f s to the deadline",
                 ok ? "; " : "", need, target, need - unit, startup, unit, b, left);
    else
        snprintf(why, len,
                 "%sneeds %.0f s to go past the incumbent's budget to %g (start-up %.1f "
                 "s, %.2f s per unit from %g), %.0f s to the deadline",
                 ok ? "; " : "", need, target, startup, unit, b, left);
    return ok;
}

/* Append text to a job's why. */
static void why_append(tp_job_t *out, const char *text) {
    size_t k = strlen(out->why);
    snprintf(out->why + k, sizeof out->why - k, "%s", text);
}

static void refuse(tp_job_t *out, int64_t t, const char *what, const char *why) {
    memset(out, 0, sizeof *out);
    out->trial = t;
    out->refused = 1;
    snprintf(out->why, sizeof out->why, "%.48s: %.147s", what, why);
}

static int hs_next(tp_scheduler_t *s, double now, tp_job_t *out) {
    hs_state_t *st = s->impl;
    tp_asha_t *a = &st->asha;
    double eta = s->cfg.budget.eta;
    char why[200];
    for (size_t k = a->nrungs - 1; k-- > 0;) {
        size_t rank = 0;
        double value = 0;
        int64_t t = tp__asha_promotable(a, k, eta, &rank, &value);
        if (t < 0) continue;
        if (!admit(s, st, t, (int)k, now, why, sizeof why)) {
            hs_trial(st, t)->refused = 1;
            tp__asha_out(a, t); /* out of the search: never promoted again */
            refuse(out, t, "not promoted, the deadline is too near", why);
            return 1;
        }
        tp__asha_start(a, t, (int)k + 1, out);
        snprintf(out->why, sizeof out->why,
                 "promoted to rung %d (budget %g): %.4g ranks %zu of %zu at rung %zu", out->rung,
                 out->budget, value, rank, a->rungs[k].n, k);
        why_append(out, why);
        return 1;
    }
    if (!st->closed && !a->exhausted) {
        if (!admit(s, st, -1, -1, now, why, sizeof why)) {
            st->closed = 1;
            refuse(out, -1, "no new trials, the deadline is too near", why);
            return 1;
        }
        int rc = tp__asha_new_trial(s, a, now, out);
        if (rc < 0) return rc;
        if (rc == 1) {
            hs_trial(st, out->trial);
            why_append(out, why);
            return 1;
        }
    }
    if (st->deadline > 0) { /* exploitation: the best waiting trial of the highest rung */
        for (size_t k = a->nrungs - 1; k-- > 0;) {
            size_t above;
            const tp_asha_result_t *best = tp__asha_best_waiting(a, k, &above);
            if (!best) continue;
            int64_t t = best->trial;
            if (!admit(s, st, t, (int)k, now, why, sizeof why)) {
                hs_trial(st, t)->refused = 1;
                tp__asha_out(a, t);
                refuse(out, t, "not continued, the deadline is too near", why);
                return 1;
            }
            tp__asha_start(a, t, (int)k + 1, out);
            snprintf(out->why, sizeof out->why,
                     "continued to rung %d (budget %g): the best waiting at rung %zu, no new "
                     "trials",
                     out->rung, out->budget, k);
            why_append(out, why);
            return 1;
        }
    }
    if (a->running) return -EAGAIN;
    a->over = 1;
    return 0;
}

static void hs_result(tp_scheduler_t *s, int64_t trial, int rung, int ok, double value,
                      double now) {
    tp__asha_result(s, &((hs_state_t *)s->impl)->asha, trial, rung, ok, value, now);
}

static void hs_deadline(tp_scheduler_t *s, double at) {
    ((hs_state_t *)s->impl)->deadline = at > 0 ? at : 0;
}

static void hs_timing(tp_scheduler_t *s, const tp_timing_t *tm, double now) {
    (void)now;
    hs_state_t *st = s->impl;
    hs_trial_t *t = hs_trial(st, tm->trial);
    if (!t || !(tm->units > 0) || !(tm->run_s >= 0) || !isfinite(tm->run_s)) return;
    t->units = tm->units;
    t->run_s = tm->run_s;
    st->n++, st->sx += tm->units, st->sy += tm->run_s;
    st->sxx += tm->units * tm->units, st->sxy += tm->units * tm->run_s;
    if (isfinite(tm->unit_s) && tm->unit_s > 0) {
        t->unit_s = tm->unit_s;
        double up = tm->run_s - tm->units * tm->unit_s;
        t->startup_s = up > 0 ? up : 0;
        st->unit_sum += t->unit_s, st->unit_n++;
        st->startup_sum += t->startup_s, st->startup_n++;
    }
}

static int hs_final(const tp_scheduler_t *s, int64_t trial, int rung) {
    const hs_state_t *st = s->impl;
    if (trial < 0 || (size_t)trial >= st->asha.ntrials) return 1;
    return st->asha.trials[trial].failed || rung + 1 >= (int)st->asha.nrungs || st->asha.over;
}

static uint64_t hs_total(const tp_scheduler_t *s) {
    return s->sampler->ops->total(s->sampler);
}

/* ASHA's (its admission only ever cuts it short). */
static double hs_work(const tp_scheduler_t *s) {
    return tp__asha_work(&((const hs_state_t *)s->impl)->asha, s->cfg.budget.eta, hs_total(s));
}

static void hs_destroy(tp_scheduler_t *s) {
    hs_state_t *st = s->impl;
    if (!st) return;
    tp__asha_free(&st->asha);
    free(st->trials);
    free(st);
    s->impl = NULL;
}

static void hs_trials(tp_scheduler_t *s) {
    tp__asha_more(&((hs_state_t *)s->impl)->asha);
}

static void hs_retry(tp_scheduler_t *s, int64_t trial, int rung) {
    tp__asha_retry(&((hs_state_t *)s->impl)->asha, trial, rung);
}

const struct tp_scheduler_ops tp__sched_hypersched_ops = {
    .name = "hypersched",
    .trials = hs_trials,
    .retry = hs_retry,
    .init = hs_init,
    .next = hs_next,
    .result = hs_result,
    .report = tp__sched_report_runs_on,
    .final = hs_final,
    .total = hs_total,
    .work = hs_work,
    .deadline = hs_deadline,
    .timing = hs_timing,
    .destroy = hs_destroy,
};
