/* sim_tune: a tuning run against a deadline on a virtual clock, through the
 * very scheduler (search/scheduler.h: asha, hypersched, ...) and
 * reallocation policy (search/realloc.h) the real run uses.
 *
 * The workload is a synthetic family of learning curves over a space of two
 * parameters x, y in [0, 1] (sampled by the real `random` sampler, or the
 * one `sampler` names):
 *
 *   final quality   q(x, y)  = 0.92 - 0.35 (x - 0.65)^2 - 0.08 y
 *   learning time   tau      = 1.5 + 10 y (1 - x) + 3 x      (budget units)
 *   metric at b     acc(b)   = q - (q - 0.1) exp(-b / tau) + noise (sd `noise`)
 *   step time       t(g)     = unit_s (0.6 + 0.8 x) (f + (1 - f) / g), f = 0.05 + 0.45 y
 *   start-up        startup_s (0.8 + 0.4 y), paid by every attempt (a restart too)
 *
 * so configurations differ in final quality, in how fast they learn (early
 * leaders are not always the final ones) and in speed and scaling. Step times
 * carry +-5% noise; every noise is a pure function of (seed, trial, step),
 * so a run is reproducible. A trial reports its metric after every budget
 * unit (its step); a job of budget B trains from its checkpoint to step B.
 *
 * The run MEASURES what the real run measures: each trial's scaling curve
 * (the time of every whole step at its GPU count, into a tp_scaling_t), its
 * start-up (first report - attempt start - one step) used as its restart
 * cost, and each job's timing for the scheduler (ops->timing). GPUs: G whole
 * GPUs; a new job takes 1; with `realloc` set, GPUs the scheduler leaves free
 * go to running trials by tp__realloc_plan (a resize: checkpoint, restart
 * with the new count, paying the start-up again). At the deadline the run
 * stops: the best value reported so far counts (running trials' last
 * reports included: they are checkpointed, not killed). */
#ifndef TP_SIM_TUNE_H
#define TP_SIM_TUNE_H

#include <stddef.h>
#include <stdint.h>

#include "search/realloc.h"
#include "util/util.h"

/* One trial a run measured (tunepack plan --dir): what a simulated trial
 * drawn from it (a bootstrap over measured trials) takes and reports. */
#define TP_SIMTUNE_MAX_GPUS (1 << 20)

typedef struct tp_simtune_measured {
    double unit_s;        /* seconds per budget unit (per trial without a budget), > 0 */
    double units;         /* budget units it ran (1 without a budget) */
    size_t npoints;       /* its learning curve: 0 = no metric measured */
    const double *frac;   /* by the share of its run (0, 1], increasing */
    const double *values; /* the objective reported there */
} tp_simtune_measured_t;

typedef struct tp_simtune_cfg {
    const char *scheduler;              /* asha | hypersched | hyperband | fifo | median | pbt */
    const char *sampler;                /* search algorithm (NULL: random), e.g. tpe, bohb */
    int gpus;                           /* G, 1..TP_SIMTUNE_MAX_GPUS (with realloc
                                           1..TP_SCALING_MAX_GPUS) */
    uint64_t trials;                    /* configurations the sampler proposes */
    uint64_t seed;                      /* sampler and noise */
    double budget_min, budget_max, eta; /* the budget's rungs */
    double deadline_s;                  /* 0: none (run to the end) */
    double pbt_interval;     /* pbt's perturbation_interval (0: budget_min); it explores x and y by
                                its defaults; an exploit takes the donor's progress and the new
                                configuration's learning curve from there on */
    int realloc;             /* free GPUs go to running trials (tp__realloc_plan) */
    tp_realloc_opts_t ropts; /* its options */
    int gpus_max;            /* per trial (0: G) */
    double unit_s;           /* seconds per budget unit at x = 0.5 on 1 GPU (default 60) */
    double startup_s;        /* mean start-up of an attempt (default 20) */
    double noise;            /* sd of the reported metric (default 0.005) */
    /* An experiment's own search (tunepack plan FILE): when scheduler_obj is
     * set it is the scheduler (the run's, built from the experiment; the
     * caller owns it) and scheduler, sampler, trials, budget and eta are not
     * used; the trials' times and curves come from `measured` (a bootstrap:
     * trial i draws a record by (seed, i)), else from the synthetic family
     * with each trial's unit time unit_s. */
    struct tp_scheduler *scheduler_obj;
    const tp_simtune_measured_t *measured; /* NULL: the synthetic family */
    size_t nmeasured;
    int minimize;     /* the objective is minimized (best is the lowest) */
    int trial_gpus;   /* GPUs a job takes (default 1) */
    int max_running;  /* jobs at once (0: as many as the GPUs take) */
    double horizon_s; /* best_by: the best reported by then (0: none) */
    /* The cluster at scale (sim_nodes.h; tunepack plan/simulate --node-failures,
     * --queue-wait, --trial-startup): the GPUs in nodes of gpus_per_node that fail
     * at node_failures per node-day and, with queue_wait_s, join after a queue
     * wait (all at the start, and each replacement). A failed node's trials hold
     * their GPUs, making no progress, until it is taken for lost (10 s); then
     * their jobs are placed again before any new job, in trial order, and start
     * over from the job's start (its checkpoint is the job's). Without reallocation. */
    double node_failures;   /* failures per node-day (0: none) */
    double queue_wait_s;    /* mean queue wait of a node (0: none) */
    double trial_startup_s; /* each attempt's start-up on its node, on top of the rest */
    int gpus_per_node;      /* the nodes' size (0: 8) */
    tp_buf_t *timeline;     /* CSV of events (t_s,event,trial,gpus,rung,value,why), or NULL */
    tp_buf_t *svg;          /* a Gantt of GPUs over time, or NULL */
} tp_simtune_cfg_t;

typedef struct tp_simtune_result {
    double best;            /* best metric reported by the end (or the deadline) */
    int64_t best_trial;     /* whose */
    double best_true;       /* that trial's noiseless metric at its last step */
    double end_s;           /* when it ended: the last job's end, or the deadline */
    size_t trials;          /* trials started */
    size_t jobs;            /* jobs started */
    size_t exploits;        /* of them, pbt's exploits */
    size_t refused;         /* admissions refused */
    size_t resizes;         /* resizes done */
    double gpu_busy;        /* GPU-seconds held by trials / (G x end_s) */
    double best_by;         /* the best reported by horizon_s (NaN: none) */
    size_t finished;        /* trials started and not running at the end */
    uint64_t node_failures; /* nodes that failed */
    size_t requeued;        /* jobs lost with a node and placed again */
} tp_simtune_result_t;

/* How many times longer each of k identical trials takes on one GPU than
 * alone, under the simulator's contention model (docs/simulator.md, sim.c):
 * a trial busy `busy` of its time alone, MPS overhead `overhead` per
 * co-located trial, the GPU serving C_k (the served curve; 1 when not
 * served). 1 for k <= 1. O(1). */
double tp__simtune_packed_factor(int k, double busy, double overhead, int served);
/* Defaults above (scheduler asha, 8 GPUs, 81 trials, budget 1..27 eta 3,
 * no deadline, no reallocation). */
void tp__simtune_defaults(tp_simtune_cfg_t *c);
/* Run it. 0, or -errno with err filled (an unknown scheduler, a bad budget).
 * O(events x (trials + G)), and O(nodes) per node event. */
int tp__simtune_run(const tp_simtune_cfg_t *c, tp_simtune_result_t *out, tp_error_t *err);

#endif
