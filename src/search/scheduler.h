/* scheduler: decides which job runs next. A job is a trial run up to a
 * budget (e.g. epochs); a sampler (grid, random, tpe, nsga2: a tp_searcher_t)
 * proposes new configurations, the scheduler (fifo, asha, hyperband,
 * median) decides budgets, promotions and early stops. Pure: no I/O, no
 * clock reads (time is an argument), no globals; the same sequence of calls
 * always gives the same decisions, which is how the orchestrator rebuilds a
 * scheduler on resume (it replays the journaled calls in order). */
#ifndef TP_SCHEDULER_H
#define TP_SCHEDULER_H

#include <jansson.h>
#include <stddef.h>
#include <stdint.h>

#include "search/search.h"

/* The resource that grows (`budget: {name: epochs, min: 1, max: 81, eta: 3}`). */
typedef struct tp_budget {
    const char *name; /* placeholder name, borrowed; NULL: no budget (jobs run to the end) */
    double min, max;  /* smallest and largest budget, 0 < min <= max */
    double eta;       /* reduction factor, > 1 (default 3) */
} tp_budget_t;

/* How pbt explores one parameter (`pbt: {explore: {lr: {factors: [0.8, 1.2]}}}`). */
typedef struct tp_pbt_explore {
    const char *param; /* the space parameter, borrowed */
    double resample;   /* probability of a fresh draw from the space, in [0, 1] */
    double factors[8]; /* else the donor's value times one of these, drawn uniformly */
    size_t nfactors;   /* 0: no factors (the donor's value is kept unless resampled) */
} tp_pbt_explore_t;

/* `pbt: {perturbation_interval: 2, quantile: 0.25, explore: {...}, explore_with: pb2}`. */
typedef struct tp_pbt_cfg {
    double interval;                 /* budget units between exploit/explore steps, > 0 */
    double quantile;                 /* bottom and top share of the population; 0: 0.25 */
    int pb2;                         /* explore_with pb2: the numeric explored parameters are
                                        chosen by PB2's GP bandit (pb2.h) once it has data;
                                        0: perturb (explore's factors and resampling) */
    const tp_pbt_explore_t *explore; /* borrowed; NULL (nexplore 0): every numeric parameter
                                        {resample: 0.25, factors: [0.8, 1.2]}, every choice
                                        {resample: 0.25} (Ray Tune's defaults) */
    size_t nexplore;
} tp_pbt_cfg_t;

typedef struct tp_scheduler_cfg {
    const char *scheduler; /* fifo | asha | hyperband | median | hypersched | pbt (NULL: fifo) */
    tp_search_cfg_t
        sampler;        /* sampler name (grid | random | tpe | nsga2), trials, seed, objectives */
    tp_budget_t budget; /* budget, or name NULL */
    int maximize;       /* the metric is maximized */
    tp_pbt_cfg_t pbt;   /* scheduler pbt's settings */
} tp_scheduler_cfg_t;

typedef struct tp_job {
    int64_t trial;  /* trial number; new trials are numbered 0, 1, 2, ... in creation order */
    int is_new;     /* a new trial: config is set */
    json_t *config; /* is_new or exploit: its configuration (caller owns) */
    int exploit;    /* pbt: an existing trial goes on from trial `donor`'s checkpoint (the
                       caller copies it over the trial's own before the job runs) with the
                       new configuration `config`, as segment `segment` of its lineage */
    int64_t donor;  /* exploit: whose checkpoint */
    double from;    /* exploit: the budget that checkpoint reached (the job starts there) */
    int segment;    /* exploit: the trial's segment from now on (1, 2, ...) */
    int rung;       /* rung of this job, 0-based (0 without rungs) */
    double budget;  /* resource to reach, 0 when there is no budget */
    int64_t group;  /* its trial group (Fluid: a searcher's batch, whose jobs share the
                       GPUs by remaining work): asha, the rung (its jobs run at one
                       budget); hyperband, one synchronous rung of one bracket, numbered
                       in order; fifo and median, 0 (one batch at the full budget) */
    char why[200];  /* the decision in words: "new trial at rung 0 (budget 1)",
                       "promoted to rung 2 (budget 9): 0.91 is in the top 1/3 of rung 1" */
    int refused;    /* not a job but a refusal (hypersched's admission): trial >= 0 is a
                       paused trial that will never run again (stop it, why says why);
                       trial -1 says no new trial will start (why says why). Journal it
                       ("refused") and call next() again. */
} tp_job_t;

/* What the run measured about one job of a trial, for schedulers that plan
 * against a deadline (ops->timing). Durations in seconds of the same clock
 * as `now`; the run reads them from the attempt's start and its reports'
 * arrival, the simulator from its virtual clock. */
typedef struct tp_timing {
    int64_t trial; /* whose job */
    int rung;      /* the job's rung */
    double units;  /* budget units the attempt ran (its budget - where it started), > 0 */
    double run_s;  /* seconds from the attempt's start to its last report */
    double unit_s; /* seconds per budget unit between its first and last report; NaN
                      when it reported fewer than two distinct steps */
} tp_timing_t;

typedef struct tp_scheduler tp_scheduler_t;

struct tp_scheduler_ops {
    const char *name;
    int (*init)(tp_scheduler_t *s, tp_error_t *err);
    /* The next job. 1 with *out filled, 0 when the search is over (no job
     * will ever come: every trial is finished or waits for nothing), -EAGAIN
     * when it must wait for running jobs to end first. */
    int (*next)(tp_scheduler_t *s, double now, tp_job_t *out);
    /* A job ended: ok with the objective's value at its end, or failed
     * (ok 0, value NaN: the trial is out of the search). */
    void (*result)(tp_scheduler_t *s, int64_t trial, int rung, int ok, double value, double now);
    /* Several objectives: a job ended with values[0..nobj) (ok 0: failed, values ignored).
     * NULL for a scheduler that ranks by one number (asha, hyperband, median):
     * tp__scheduler_new refuses it when the sampler has several objectives. */
    void (*result_values)(tp_scheduler_t *s, int64_t trial, int rung, int ok, const double *values,
                          double now);
    /* A report of a running job: returns 1 to let it run on, 0 to stop the
     * trial now (early stopping; why says why). Schedulers without early
     * stopping return 1. */
    int (*report)(tp_scheduler_t *s, int64_t trial, int64_t step, double value, double now,
                  char *why, size_t whylen);
    /* Whether a trial whose job ended at `rung` is finished for good (its
     * budget was the largest, or it was stopped), as opposed to waiting for
     * a possible promotion. */
    int (*final)(const tp_scheduler_t *s, int64_t trial, int rung);
    /* Schedulers that plan against time (hypersched); NULL for the others,
     * and the caller then neither calls nor journals them. Both are
     * journaled calls, replayed in order on resume like the others.
     * deadline: the deadline is `at` from now on (the clock of `now`; 0: none).
     * timing: a job's measured timing, given before its result(). */
    void (*deadline)(tp_scheduler_t *s, double at);
    void (*timing)(tp_scheduler_t *s, const tp_timing_t *t, double now);
    /* Trials the search expects to create, 0 if unknown (progress view). */
    uint64_t (*total)(const tp_scheduler_t *s);
    /* Budget units the whole search is expected to run, summed over its
     * jobs (each from where its trial's checkpoint left off), for the
     * progress view; 0 if unknown. NULL: total() trials at the largest
     * budget (tp__scheduler_work). */
    double (*work)(const tp_scheduler_t *s);
    /* The sampler's `trials` changed (tp__scheduler_set_trials): a scheduler
     * that remembered the sampler's "no more" or sized its plan by the old
     * number takes the new one. NULL: nothing to do. */
    void (*trials)(tp_scheduler_t *s);
    /* A failed job runs again because the user asked (`run --retry-failed`):
     * the trial is back in the search, its job at `rung` out again; its end
     * comes as any job's, through result(). A journaled call, replayed in
     * order like the others. NULL: the scheduler keeps the trial out (fifo
     * and median need nothing more: the retried job's result is told to the
     * sampler as any; hyperband and surrogate hold the trial at that rung). */
    void (*retry)(tp_scheduler_t *s, int64_t trial, int rung);
    void (*destroy)(tp_scheduler_t *s);
};

struct tp_scheduler {
    const struct tp_scheduler_ops *ops; /* chosen by name */
    tp_searcher_t *sampler;             /* proposes configurations, owned */
    tp_scheduler_cfg_t cfg;             /* copy */
    const tp_space_t *space;            /* borrowed */
    void *impl;                         /* the scheduler's own state */
};

/* Names, NULL-terminated (for did-you-mean). */
extern const char *const tp__scheduler_names[];
/* Create the scheduler and its sampler; NULL with err filled (unknown
 * name, a budget missing for asha/hyperband, ...). */
tp_scheduler_t *tp__scheduler_new(const tp_space_t *space, const tp_scheduler_cfg_t *cfg,
                                  tp_error_t *err);
void tp__scheduler_free(tp_scheduler_t *s);
/* The search may create n trials in all from now on (0: no bound): the
 * experiment was extended, or a replay reaches the point where a run
 * changed the number (a journaled call, as deadline and timing are). The
 * decisions made under the old number stand; the next ones see n. O(1). */
void tp__scheduler_set_trials(tp_scheduler_t *s, uint64_t n);
/* Constraints: trial's next result (result / result_values) reported these values of the
 * constrained metrics (values[0..cfg.sampler.nconstraints), NaN: missing); call it before
 * that result, live and on replay alike. The sampler keeps them with the trial
 * (tp__searcher_constrain: the trial numbers are the sampler's, so not under surrogate,
 * which the config refuses). O(nconstraints). */
void tp__scheduler_constrain(tp_scheduler_t *s, int64_t trial, const double *values);
/* Budget units the search is expected to run in all (ops->work, else
 * total() x budget.max); 0 without a budget or a known total. O(rungs),
 * hyperband O(brackets x rungs). */
double tp__scheduler_work(const tp_scheduler_t *s);
/* Why scheduler `name` cannot run several objectives, in words (static). */
const char *tp__sched_single_objective_msg(const char *name);
/* report() of the schedulers without early stopping: the job runs on (1). */
int tp__sched_report_runs_on(tp_scheduler_t *s, int64_t trial, int64_t step, double value,
                             double now, char *why, size_t whylen);
/* For schedulers that run each trial once at the full budget (fifo,
 * median): ask the sampler for trial number index; on 1, *out is that new
 * trial at rung 0 with budget max (0 without a budget) and *cfg the
 * scheduler's own reference to its configuration. Returns the sampler's
 * answer: 1, 0 (exhausted) or -EAGAIN. */
int tp__sched_new_trial(tp_scheduler_t *s, int64_t index, double now, tp_job_t *out, json_t **cfg);
/* The rung budgets min * eta^k (k = 0, 1, ...) up to max (the last one is
 * max itself). Returns the number of rungs and fills out[0..n) (n <= cap). */
size_t tp__budget_rungs(const tp_budget_t *b, double *out, size_t cap);

/* The schedulers' ops, one per sched_<name>.c, listed in scheduler.c. */
extern const struct tp_scheduler_ops tp__sched_fifo_ops;
extern const struct tp_scheduler_ops tp__sched_asha_ops;
extern const struct tp_scheduler_ops tp__sched_hyperband_ops;
extern const struct tp_scheduler_ops tp__sched_median_ops;
extern const struct tp_scheduler_ops tp__sched_hypersched_ops;
extern const struct tp_scheduler_ops tp__sched_pbt_ops;

#endif
