/* asha: the state of asynchronous successive halving (rungs of ok results,
 * the trials with their rung), shared by the schedulers built on it: asha
 * itself and hypersched (deadline-aware ASHA). Internal to search. */
#ifndef TP_ASHA_H
#define TP_ASHA_H

#include <jansson.h>
#include <stddef.h>
#include <stdint.h>

#include "search/scheduler.h"

#define TP_ASHA_MAX_RUNGS 64

typedef struct tp_asha_trial {
    json_t *config; /* owned, told to the sampler with each result */
    int rung;       /* rung of its latest job */
    int running;    /* that job has not ended */
    int failed;     /* a job failed: out of the search */
} tp_asha_trial_t;

typedef struct tp_asha_result {
    int64_t trial; /* whose */
    double value;  /* objective at the rung's budget */
} tp_asha_result_t;

typedef struct tp_asha_rung {
    tp_asha_result_t *res; /* ok results, in arrival order */
    size_t n, cap;
} tp_asha_rung_t;

typedef struct tp_asha {
    double budgets[TP_ASHA_MAX_RUNGS]; /* r_k */
    size_t nrungs;                     /* L */
    tp_asha_rung_t rungs[TP_ASHA_MAX_RUNGS];
    tp_asha_trial_t *trials; /* by trial number */
    size_t ntrials, cap;
    size_t running; /* jobs out */
    int exhausted;  /* the sampler returned 0 */
    int over;       /* next() returned 0 */
    int maximize;   /* copy of cfg.maximize, for the sort */
} tp_asha_t;

/* ASHA's expected work for n trials: each trial runs rung 0, and a 1/eta^k
 * share of them rung k, from the budget of rung k - 1: n x sum_k (r_k -
 * r_(k-1)) / eta^k budget units. O(rungs). */
double tp__asha_work(const tp_asha_t *st, double eta, uint64_t n);
/* Rungs from s->cfg.budget; 0 or -EINVAL with err filled (no rungs). */
int tp__asha_init(tp_asha_t *st, const tp_scheduler_t *s, tp_error_t *err);
void tp__asha_free(tp_asha_t *st);
/* The best trial in the top floor(n_k / eta) of rung k that can go on (ended
 * ok at rung k, not running, not failed), or -1; *rank and *value say where it stood.
 * O(n_k): the best such trial, and the results that rank above it. */
int64_t tp__asha_promotable(const tp_asha_t *st, size_t k, double eta, size_t *rank, double *value);
/* The ok results of rung k, best first (ties: the older trial), malloc'd
 * (caller frees); *n gets their count. O(n_k log n_k). */
tp_asha_result_t *tp__asha_sorted(const tp_asha_t *st, size_t k, size_t *n);
/* Mark trial t running a job at rung k (budget r_k) and fill *out. */
void tp__asha_start(tp_asha_t *st, int64_t t, int k, tp_job_t *out);
/* Ask the sampler for a new trial at rung 0: 1 with *out filled, else the
 * sampler's 0 (exhausted, remembered) or -EAGAIN. */
int tp__asha_new_trial(tp_scheduler_t *s, tp_asha_t *st, double now, tp_job_t *out);
/* The sampler may have more now (trials raised): forget its "no more" and
 * the search's end. O(1). */
void tp__asha_more(tp_asha_t *st);
/* Trial t's failed job at rung k runs again (ops->retry): it is no longer
 * out, and its job is out again. Nothing for a trial that did not fail
 * there. O(1). */
void tp__asha_retry(tp_asha_t *st, int64_t t, int k);
/* A job ended (asha's rule: a failure takes the trial out; an ok value
 * enters rung `rung`, replacing the trial's earlier one there; the sampler
 * is told). */
void tp__asha_result(tp_scheduler_t *s, tp_asha_t *st, int64_t trial, int rung, int ok,
                     double value, double now);

#endif
