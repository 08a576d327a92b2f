/* sim: a discrete-event simulator of a tuning run. The real searcher
 * (search/) proposes trials, the real placer (place/) decides where they
 * go, on the real tp_cluster_t / tp_usage_t; only time is virtual and the
 * trials' progress comes from a GPU contention model (docs/simulator.md):
 *
 *   trial i on a GPU of speed s with k trials on it, overhead o:
 *     m   = 1 + o (k - 1)                       MPS cost of sharing
 *     T_i = host_s + m gpu_s / s                its time at the GPU's pace
 *     d_i = (m gpu_s / s) / T_i                 its busy intensity
 *     D   = sum_i d_i                           the GPU's demand
 *     rate_i = 1 / (T_i max(1, D / C_k))        fraction of the trial per second
 *
 * C_k is the busy share a GPU serves k uncapped trials under MPS (the served
 * curve, tp__fluid_served: 1, 1.14, 1.36, 1.44), and the placer is offered a
 * GPU's compute up to C_k (1 + oversubscribe) for its k-th trial; that is the
 * run with no MPS thread caps (TP_SIM_SERVED, the default). TP_SIM_CAPPED is
 * the model of the run with caps: C_k = 1 (saturation at D = 1), compute up
 * to 1 + oversubscribe, and a profiler alone on an empty GPU.
 *
 * Events live in a min-heap keyed by GPU (each GPU's next finish), so an
 * event costs O(log G + trials on that GPU), whatever has finished before.
 * Only single-GPU trials are simulated (the study has no other kind). */
#ifndef TP_SIM_H
#define TP_SIM_H

#include <stddef.h>
#include <stdint.h>

#include "place/place.h"
#include "sim/workload.h"
#include "space/space.h"
#include "util/util.h"

typedef enum tp_sim_rounds {
    TP_SIM_ROUNDS_AUTO = 0,    /* full below 1024 GPUs, incremental above */
    TP_SIM_ROUNDS_FULL,        /* every round offers the whole cluster (as the orchestrator) */
    TP_SIM_ROUNDS_INCREMENTAL, /* a round offers the nodes freed since the last one */
} tp_sim_rounds_t;

typedef enum tp_sim_model {
    TP_SIM_SERVED = 0, /* uncapped MPS: the served curve C_k; profilers beside placed trials */
    TP_SIM_CAPPED,     /* MPS thread caps: C_k = 1; each profiler alone on an empty GPU */
} tp_sim_model_t;

typedef struct tp_sim_opts {
    const char *policy;   /* placer name; NULL: TP_PLACE_DEFAULT_POLICY */
    const char *searcher; /* "grid" (NULL) or "random" */
    uint64_t
        trials; /* random: how many; grid: stop after this many (repeating the grid), 0: one pass */
    uint64_t seed;          /* searcher seed */
    double overhead;        /* MPS cost per co-located trial; < 0: default 0.03 */
    size_t window;          /* pending trials offered per round; 0: 4096 full, 64 incremental */
    tp_sim_rounds_t rounds; /* how much of the cluster a round offers */
    int record;             /* keep every trial's interval (for CSV, SVG, tests) */
    double profile_s;       /* > 0: a run's profiling (gpu_memory/gpu_compute auto): the
                               first trial of each (model, batch) group is measured for this
                               long after its start (its start-up plus profile_time of
                               training), or to its end, before the group's other trials are
                               placed; served: the profilers of all groups are placed at once,
                               worst fit with the run's provisional demand, beside trials
                               already placed, and their groups' other trials are offered
                               beside them on a guess (the provisional demand, memory x2) until
                               measured; capped: each alone on an empty GPU. 0: every
                               demand known at once */
    int profile_wait;       /* served: a group's other trials wait for its profile instead
                               (the run's resources.profile_wait) */
    tp_sim_model_t model;   /* the contention and admission model (TP_SIM_SERVED: 0) */
    const double *served;   /* C_1..C_4 for TP_SIM_SERVED; NULL: TP_FLUID_SERVED */
    /* Cluster scale (sim_nodes.h, docs/simulator.md); all 0: every node there from the
       start and for good, trials started at no cost (the decisions as before). */
    double node_failures;   /* failures per node-day: a failed node's trials are lost, put
                               back in the pending queue when the node is taken for lost
                               (TP_SIM_LOST_AFTER_S) and placed again by the placer, from
                               their start; the node is replaced after a queue wait */
    double queue_wait_s;    /* > 0: a node joins after a queue wait, exponential of this
                               mean (a self-allocated Slurm cluster): every node at the
                               start, and each replacement */
    double trial_startup_s; /* each attempt's start-up on its node (host time, no GPU
                               work), paid again by a requeued trial */
} tp_sim_opts_t;

/* One trial's stay on a GPU. */
typedef struct tp_sim_interval {
    int64_t trial;         /* searcher index */
    uint32_t gpu;          /* global GPU index (usage order) */
    uint16_t lane;         /* sub-lane within the GPU (lowest free when it started) */
    uint16_t model;        /* index into the workload's models */
    int batch;             /* batch size */
    double lr;             /* learning rate */
    double start_s, end_s; /* virtual time */
    double busy_s;         /* GPU-busy seconds it caused (overhead included) */
} tp_sim_interval_t;

typedef struct tp_sim_result {
    double makespan_s;            /* last finish */
    double lower_bound_s;         /* max(sum gpu_s / (sum speed C_max), longest trial alone on the
                                     fastest GPU); C_max the most a GPU serves (1 when capped) */
    double ratio;                 /* makespan / lower bound */
    double busy_share;            /* mean over GPUs of the time-average of min(1, D / C_k) */
    double total_gpu_s;           /* sum of gpu_s at speed 1 */
    double sum_speed;             /* the cluster's summed speed */
    uint64_t trials;              /* trials run to the end */
    uint64_t events;              /* arrivals + finishes */
    uint64_t rounds;              /* placer calls */
    uint64_t gpu_updates;         /* trial-rate recomputations (work per event, for tests) */
    int max_colocated;            /* most trials seen on one GPU */
    double wall_s;                /* wall time of the simulation */
    double gpu_hours;             /* GPUs held times how long: from a node's join to the end,
                                     or to when it was taken for lost */
    uint64_t node_failures;       /* nodes that failed */
    uint64_t requeued;            /* attempts lost with their node and placed again */
    double lost_s;                /* trial-seconds of those attempts, lost */
    tp_sim_rounds_t rounds_mode;  /* the mode used (auto resolved) */
    char policy[32];              /* placer used */
    tp_sim_interval_t *intervals; /* owned; record only, in finish order */
    size_t nintervals;
} tp_sim_result_t;

/* Simulate the space `space` of workload w on cluster c (single-GPU trials
 * only; the cluster may mix GPU types). The searcher proposes trials in the
 * space {model: grid, batch_size: grid, lr: grid of the space's lr points};
 * each configuration maps to its job profile (tp__workload_profile). Returns
 * 0, or -EINVAL / -ENOENT with err filled (unknown policy or space, a trial
 * that fits on no GPU). *r is filled; free it with tp__sim_result_free.
 * Cost: O(events (log G + k)) plus the placer's rounds. Deterministic. */
int tp__sim_run(const tp_workload_t *w, const char *space, const tp_cluster_t *c,
                const tp_sim_opts_t *o, tp_sim_result_t *r, tp_error_t *err);
void tp__sim_result_free(tp_sim_result_t *r);

/* ---- spaces and made-up clusters (sim_space.c) ---------------------------- */

/* The search space of a workload space: model, batch_size and lr as grid
 * domains (lr: lr_count log-spaced points, both ends included). */
int tp__sim_space(const tp_workload_t *w, const char *space, tp_space_t *out, tp_error_t *err);

/* A homogeneous cluster of ngpus GPUs of the named type in nodes of
 * gpus_per_node (the last node may be smaller), cpus_per_node cores each
 * (<= 0: 32 per GPU). Limits as tp__workload_cluster. 0 or -ENOENT. */
int tp__sim_cluster(const tp_workload_t *w, const char *gpu_type, size_t ngpus, int gpus_per_node,
                    int cpus_per_node, tp_cluster_t *out, tp_error_t *err);

/* ---- outputs (sim_output.c) ---------------------------------------------- */

/* The summary as one JSON object (malloc'd, caller frees): makespan_s,
 * lower_bound_s, ratio, busy_share, trials, events, rounds, policy,
 * cluster, space, gpus, max_colocated, wall_s. */
char *tp__sim_json(const tp_sim_result_t *r, const char *cluster, const char *space,
                   const tp_cluster_t *c);
/* Per-GPU timelines: one row per interval, sorted by GPU then start:
 * gpu,node,gpu_type,lane,start_s,end_s,trial,model,batch,lr,busy_share. 0 or -errno. */
int tp__sim_write_csv(const char *path, const tp_sim_result_t *r, const tp_workload_t *w,
                      const tp_cluster_t *c, tp_error_t *err);
/* An SVG 1.1 Gantt chart: a band per GPU, co-located trials in sub-lanes,
 * colour by model with a legend, a time axis, a title. 0 or -errno. */
int tp__sim_write_svg(const char *path, const tp_sim_result_t *r, const tp_workload_t *w,
                      const tp_cluster_t *c, const char *title, tp_error_t *err);

#endif
