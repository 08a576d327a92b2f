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
    int waits_at;   /* 1 + the rung where its result is marked as able to go on, 0: none
                       (kept by asha_rung.c from the three fields above) */
} tp_asha_trial_t;

typedef struct tp_asha_result {
    int64_t trial; /* whose */
    double value;  /* objective at the rung's budget */
} tp_asha_result_t;

/* A rung's ok results, kept in rank order as they arrive (asha_rung.c): a
 * treap by rank (best first, ties to the older trial), each node counting
 * the results below it and those of them whose trial can go on, so the best
 * that can go on and its rank are one descent. */
typedef struct tp_asha_node {
    tp_asha_result_t r;
    uint32_t kid[2];  /* better, worse subtrees (node indexes; 0: none) */
    uint32_t size;    /* results in this subtree */
    uint32_t waiting; /* of them, results whose trial can go on from this rung */
    uint32_t prio;    /* heap order: a hash of the trial, no generator state */
    uint32_t waits;   /* this one's trial can go on (0 or 1) */
} tp_asha_node_t;

typedef struct tp_asha_rung {
    tp_asha_node_t *node; /* node[0] is the empty tree; n results in node[1..n] */
    uint32_t root;        /* 0: no result */
    size_t n, cap;        /* results; nodes allocated */
    uint32_t *of;         /* by trial: its result's node here, 0: none */
    size_t nof;
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
    int maximize;   /* copy of cfg.maximize, for the rank order */
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
 * O(log n_k) expected: one descent of the rung's tree. */
int64_t tp__asha_promotable(const tp_asha_t *st, size_t k, double eta, size_t *rank, double *value);

/* ---- asha_rung.c: the rungs kept in rank order ---------------------------- */

/* The best result of rung k whose trial can go on (ended ok at rung k, not
 * running, not failed), or NULL; *above gets how many results rank above it.
 * O(log n_k) expected. */
const tp_asha_result_t *tp__asha_best_waiting(const tp_asha_t *st, size_t k, size_t *above);
/* Trial t's ok value enters rung k, replacing its earlier one there. The
 * trial's fields must be current (they decide whether it can go on). O(log
 * n_k) expected, and O(t) once when the rung's trial index grows. */
void tp__asha_record(tp_asha_t *st, int64_t t, size_t k, double value);
/* Trial t's rung, running or failed changed: mark where it can go on. Every
 * writer of those fields calls it. O(log n) expected. */
void tp__asha_sync(tp_asha_t *st, int64_t t);
/* Trial t is out of the search (failed, or refused by hypersched's
 * admission): never promoted again. O(log n) expected. */
void tp__asha_out(tp_asha_t *st, int64_t t);
/* The ok results of rung k, best first (ties: the older trial), malloc'd
 * (caller frees); *n gets their count. O(n_k): the tree in order. */
tp_asha_result_t *tp__asha_sorted(const tp_asha_t *st, size_t k, size_t *n);
/* The tree of rung k breaks none of its rules (order, heap, counts, the
 * trial index): 1, else 0 (for the oracle test). O(n_k). */
int tp__asha_rung_valid(const tp_asha_t *st, size_t k);
/* Rung k's memory. */
void tp__asha_rung_free(tp_asha_rung_t *r);
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
