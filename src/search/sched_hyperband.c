/* sched_hyperband: Hyperband (Li et al. 2017, JMLR 18, alg. 1) with
 * synchronous brackets; trials wait (paused, checkpointed) between rungs.
 *
 * With R = budget.max, s_max = floor(log_eta(max / min)), brackets
 * s = s_max, s_max - 1, ..., 0 run one after the other. Bracket s starts
 * n = ceil((s_max + 1) / (s + 1) * eta^s) new configurations at budget
 * r = R * eta^-s; rung i (0..s) has budget R * eta^(i - s). next() hands out
 * every job of the current rung, then -EAGAIN until all of them ended; the
 * top floor(n_i / eta) of the rung (best first by the metric's mode, ties
 * to the older trial; failed jobs rank worst and are never promoted) go on
 * to rung i + 1: successive halving. After rung s (budget R) the next
 * bracket starts. For (1, 81, 3) this is the paper's table: s=4: 81@1 27@3
 * 9@9 3@27 1@81; s=3: 34@3 11@9 3@27 1@81; s=2: 15@9 5@27 1@81; s=1: 8@27
 * 2@81; s=0: 5@81 (143 configurations).
 *
 * The sampler's total (its `trials`; grid: its points) bounds the
 * configurations created overall: a bracket is cut short at the bound and
 * brackets repeat (s_max .. 0 again) until it is reached; a total of 0 runs
 * every bracket once. A cut bracket (or one with failures) promotes at least
 * one ok trial per rung, so it still ends with a full-budget trial.
 * Job rungs are 0-based within the trial's bracket. final(trial, rung): its
 * bracket's last rung, a failed trial, or a rung decided without it.
 *
 * Cost: next() O(1) per job; a rung's promotion O(n log n). Memory one
 * config per trial. */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "search/scheduler.h"

typedef struct hb_trial {
    json_t *config;  /* owned, told to the sampler with each result */
    int s;           /* its bracket's s: rungs 0..s */
    int rung;        /* rung of its latest job */
    int running;     /* that job has not ended */
    int failed;      /* a job failed */
    int final;       /* finished for good */
    double value;    /* latest ok value (NaN if failed) */
    size_t rank, of; /* where it stood when promoted */
} hb_trial_t;

typedef struct hb_state {
    double eta, max;    /* from the budget */
    int s_max;          /* floor(log_eta(max / min)) */
    uint64_t limit;     /* the sampler's total, 0: one pass over the brackets */
    uint64_t started;   /* brackets started */
    int exhausted;      /* the sampler returned 0 */
    hb_trial_t *trials; /* by trial number */
    size_t ntrials, cap;
    /* the current bracket */
    int active;            /* a bracket is running */
    int s;                 /* its s */
    int i;                 /* its current rung */
    size_t n;              /* configurations it starts (rung 0's size) */
    int64_t *members;      /* trials at the current rung, best first after rung 0 */
    int64_t rungs_started; /* synchronous rungs begun so far: the current one's group is this - 1 */
    size_t count;          /* members at the current rung */
    size_t dispatched;     /* members handed out */
    size_t done;           /* members whose job ended */
} hb_state_t;

static double ipow(double b, int e) {
    double r = 1;
    while (e-- > 0)
        r *= b;
    return r;
}

static double rung_budget(const hb_state_t *st, int s, int i) {
    return st->max / ipow(st->eta, s - i);
}

/* Configurations of bracket s: ceil((s_max + 1) / (s + 1) * eta^s). */
static size_t bracket_size(const hb_state_t *st, int s) {
    return (size_t)ceil((double)(st->s_max + 1) / (double)(s + 1) * ipow(st->eta, s) - 1e-9);
}

static int hb_init(tp_scheduler_t *s, tp_error_t *err) {
    (void)err;
    const tp_budget_t *b = &s->cfg.budget;
    hb_state_t *st = tp__xcalloc(1, sizeof *st);
    st->eta = b->eta, st->max = b->max;
    st->s_max = (int)floor(log(b->max / b->min) / log(b->eta) + 1e-9);
    if (st->s_max > 30) st->s_max = 30;
    st->limit = s->sampler->ops->total(s->sampler);
    s->impl = st;
    return 0;
}

static int start_bracket(hb_state_t *st) {
    uint64_t per_pass = (uint64_t)st->s_max + 1;
    if (st->exhausted) return 0;
    if (st->limit == 0 && st->started >= per_pass) return 0;
    if (st->limit && st->ntrials >= st->limit) return 0;
    st->s = st->s_max - (int)(st->started % per_pass);
    st->started++;
    st->n = bracket_size(st, st->s);
    if (st->limit && st->n > st->limit - st->ntrials) st->n = (size_t)(st->limit - st->ntrials);
    free(st->members);
    st->members = tp__xcalloc(st->n, sizeof *st->members);
    st->active = 1, st->i = 0, st->count = st->n, st->dispatched = st->done = 0;
    st->rungs_started++;
    return 1;
}

static int hb_better(const hb_trial_t *a, int64_t ia, const hb_trial_t *b, int64_t ib,
                     int maximize) {
    if (a->failed != b->failed) return b->failed;
    if (!a->failed && a->value != b->value)
        return maximize ? a->value > b->value : a->value < b->value;
    return ia < ib;
}

/* The current rung is complete: promote its top floor(count / eta) (at
 * least one ok trial) or end the bracket. */
static void rung_complete(hb_state_t *st, int maximize) {
    /* insertion sort, best first: rungs are small next to the jobs they ran */
    for (size_t a = 1; a < st->count; a++) {
        int64_t t = st->members[a];
        size_t b = a;
        while (b > 0 && hb_better(&st->trials[t], t, &st->trials[st->members[b - 1]],
                                  st->members[b - 1], maximize)) {
            st->members[b] = st->members[b - 1];
            b--;
        }
        st->members[b] = t;
    }
    size_t ok = 0;
    for (size_t a = 0; a < st->count; a++)
        ok += !st->trials[st->members[a]].failed;
    size_t keep = (size_t)floor((double)st->count / st->eta + 1e-9);
    if (keep == 0) keep = 1;
    if (keep > ok) keep = ok;
    if (st->i >= st->s || keep == 0) keep = 0;
    for (size_t a = 0; a < st->count; a++) {
        hb_trial_t *t = &st->trials[st->members[a]];
        if (a < keep)
            t->rank = a + 1, t->of = st->count;
        else
            t->final = 1;
    }
    if (keep == 0) {
        st->active = 0;
        return;
    }
    st->i++;
    st->count = keep, st->dispatched = st->done = 0;
    st->rungs_started++;
}

static int hb_next(tp_scheduler_t *s, double now, tp_job_t *out) {
    hb_state_t *st = s->impl;
    for (;;) {
        if (!st->active && !start_bracket(st)) return 0;
        if (st->dispatched < st->count) break;
        if (st->done < st->count) return -EAGAIN;
        rung_complete(st, s->cfg.maximize); /* an empty bracket (sampler exhausted) */
    }
    memset(out, 0, sizeof *out);
    out->rung = st->i;
    out->group = st->rungs_started - 1;
    out->budget = rung_budget(st, st->s, st->i);
    if (st->i == 0) {
        json_t *cfg = NULL;
        int rc = tp__searcher_ask(s->sampler, (uint64_t)st->ntrials, out->budget, now, &cfg);
        if (rc < 0) return rc;
        if (rc == 0) { /* cut the bracket where it is */
            st->exhausted = 1;
            st->count = st->n = st->dispatched;
            if (st->done == st->count) rung_complete(st, s->cfg.maximize);
            return st->active || st->count ? hb_next(s, now, out) : 0;
        }
        st->trials = tp__xgrow(st->trials, &st->cap, st->ntrials + 1, sizeof *st->trials, 64);
        hb_trial_t *t = &st->trials[st->ntrials];
        memset(t, 0, sizeof *t);
        t->config = cfg, t->s = st->s, t->running = 1, t->value = NAN;
        st->members[st->dispatched++] = (int64_t)st->ntrials;
        out->trial = (int64_t)st->ntrials++;
        out->is_new = 1;
        out->config = json_incref(cfg); /* shared, never modified */
        snprintf(out->why, sizeof out->why,
                 "new trial in bracket s=%d (%zu configs) at rung 0 (budget %g)", st->s, st->n,
                 out->budget);
        return 1;
    }
    int64_t id = st->members[st->dispatched++];
    hb_trial_t *t = &st->trials[id];
    t->rung = st->i, t->running = 1;
    out->trial = id;
    snprintf(out->why, sizeof out->why,
             "promoted to rung %d (budget %g): %.4g ranks %zu of %zu at rung %d of bracket s=%d, "
             "top %zu go on",
             st->i, out->budget, t->value, t->rank, t->of, st->i - 1, st->s, st->count);
    return 1;
}

static void hb_result(tp_scheduler_t *s, int64_t trial, int rung, int ok, double value,
                      double now) {
    hb_state_t *st = s->impl;
    if (trial < 0 || (size_t)trial >= st->ntrials) return;
    hb_trial_t *t = &st->trials[trial];
    if (!t->running || t->rung != rung) return; /* not a job out: a stale or repeated result */
    t->running = 0;
    if (!ok || isnan(value)) {
        t->failed = t->final = 1;
        t->value = NAN;
    } else {
        t->value = value;
    }
    tp__searcher_tell(s->sampler, (uint64_t)trial, t->config, t->value, rung_budget(st, t->s, rung),
                      now);
    if (rung == t->s) t->final = 1;
    if (st->active && rung == st->i) {
        st->done++;
        if (st->done == st->count && st->dispatched == st->count)
            rung_complete(st, s->cfg.maximize);
    }
}

static int hb_final(const tp_scheduler_t *s, int64_t trial, int rung) {
    const hb_state_t *st = s->impl;
    if (trial < 0 || (size_t)trial >= st->ntrials) return 1;
    const hb_trial_t *t = &st->trials[trial];
    return t->final || t->failed || rung >= t->s;
}

static uint64_t hb_total(const tp_scheduler_t *s) {
    const hb_state_t *st = s->impl;
    if (st->limit) return st->limit;
    uint64_t n = 0;
    for (int b = st->s_max; b >= 0; b--)
        n += bracket_size(st, b);
    return n;
}

/* The brackets as next() runs them (s_max .. 0, repeated until the
 * sampler's total, the last one cut), each rung keeping the top 1/eta of
 * the one before and at least one trial. */
static double hb_work(const tp_scheduler_t *s) {
    const hb_state_t *st = s->impl;
    uint64_t left = hb_total(s), pass = (uint64_t)st->s_max + 1;
    double work = 0;
    for (uint64_t b = 0; left > 0; b++) {
        int bs = st->s_max - (int)(b % pass);
        double n = (double)bracket_size(st, bs), from = 0;
        if (n > (double)left) n = (double)left;
        left -= (uint64_t)n;
        for (int i = 0; i <= bs; i++) {
            work += n * (rung_budget(st, bs, i) - from);
            from = rung_budget(st, bs, i);
            n = floor(n / st->eta + 1e-9);
            if (n < 1) n = 1;
        }
    }
    return work;
}

static void hb_destroy(tp_scheduler_t *s) {
    hb_state_t *st = s->impl;
    if (!st) return;
    for (size_t i = 0; i < st->ntrials; i++)
        json_decref(st->trials[i].config);
    free(st->trials);
    free(st->members);
    free(st);
    s->impl = NULL;
}

/* The sampler's new total (a grid's is its size times `trials`); brackets
 * already started keep the size they were given. */
static void hb_trials(tp_scheduler_t *s) {
    hb_state_t *st = s->impl;
    st->limit = s->sampler->ops->total(s->sampler);
    st->exhausted = 0;
}

const struct tp_scheduler_ops tp__sched_hyperband_ops = {
    .name = "hyperband",
    .trials = hb_trials,
    .init = hb_init,
    .next = hb_next,
    .result = hb_result,
    .report = tp__sched_report_runs_on,
    .final = hb_final,
    .total = hb_total,
    .work = hb_work,
    .destroy = hb_destroy,
};
