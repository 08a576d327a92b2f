/* sim_groups: the makespan of successive-halving rungs on one node of GPUs,
 * placed plainly (each job its own demand, as a plain run places it) or as
 * Fluid trial groups (each rung a group; shares from tp__fluid_shares, the
 * same code the run calls), on a virtual clock. docs/simulator.md has the
 * model:
 *
 *   a trial's step on one whole GPU: host_s + gpu_s (d = gpu_s / step: its
 *   compute demand); on g whole GPUs: step (f + (1 - f) / g) (Amdahl, serial
 *   fraction f: the scaling curve); on a GPU with k trials, at the pace
 *   T = host_s + m gpu_s, m = 1 + overhead (k - 1), its busy share there is
 *   d' = m gpu_s / T. Plain packing caps a trial at its demand d under MPS
 *   (so it runs at min(1, d / d') of its pace: the placer keeps the sum of
 *   the demands at most 1); a Fluid fraction has no thread limit and takes
 *   what its GPU's others leave: 1 / (T max(1, D / C_k)), D the sum of the
 *   d' of the k fractions progressing on that GPU, C_k the busy share a GPU
 *   serves k such trials (served; measured, more than 1 for k > 1).
 *
 * Every job start, and every resize of a running trial, costs restart_s
 * (checkpoint and restart), holding its GPUs without progress and leaving
 * its GPU's others its share. Resizes are the run's (run/groups.c): dynamic
 * shares only, a running trial grown to more whole GPUs (two or more),
 * only when that pays and the new GPUs are free now. Rungs are
 * synchronous: rung k + 1 starts when rung k has ended (the top 1/eta by a
 * trial's hidden quality go on). Pure and deterministic for a seed. */
#ifndef TP_SIM_GROUPS_H
#define TP_SIM_GROUPS_H

#include <stddef.h>
#include <stdint.h>

#include "place/fluid.h"
#include "util/util.h"

typedef enum tp_groups_plain {
    TP_GROUPS_PACKED = 0,  /* plain: the default packing (vpack), demand = measured compute */
    TP_GROUPS_ONE_PER_GPU, /* plain: one trial per GPU */
} tp_groups_plain_t;

typedef struct tp_groups_opts {
    size_t n0;               /* configurations at rung 0 */
    double eta;              /* the top 1/eta of a rung go on (> 1) */
    double min_steps;        /* budget of rung 0 in steps; rung k: min_steps eta^k */
    size_t rungs;            /* rungs at most (0: until one trial is left) */
    size_t gpus;             /* GPUs (one node, at most 16) */
    uint64_t gpu_memory_mib; /* memory of each GPU */
    uint64_t reserve_mib;    /* kept free on each GPU */
    int pack_max;            /* trials per GPU at most (plain packing; Fluid's 1/k) */
    double serial;           /* scaling curve: Amdahl serial fraction f in [0, 1] */
    double restart_s;        /* checkpoint + restart, per job start and per resize */
    double overhead;         /* MPS cost per co-located trial (0.03 as sim.h) */
    double served[4];        /* C_k, k = 1..4 (more: C_4): busy share a GPU serves k Fluid
                              * fractions; all 0: TP_FLUID_SERVED; each >= 1 */
    tp_fluid_mode_t mode;    /* off: plain placement */
    tp_groups_plain_t plain; /* how a plain run places (mode off) */
    double min, max;         /* Fluid's bounds on a share */
    int gpus_cap;            /* whole GPUs a Fluid trial may take (1: no elastic resize) */
    uint64_t seed;           /* the trials' profiles and qualities */
} tp_groups_opts_t;

typedef struct tp_groups_result {
    double makespan_s; /* end of the last rung */
    double rung_s[32]; /* each rung's span */
    size_t nrungs;
    uint64_t jobs;     /* job starts */
    uint64_t resizes;  /* running trials restarted with another share */
    double busy_share; /* GPU-seconds of progress-making share / (GPUs x makespan):
                          the shares held, not what uncapped Fluid fractions use */
} tp_groups_result_t;

/* Simulate o; 0, or -EINVAL with err filled (bad options, a trial that fits
 * on no GPU). O(events x (rung size^2 for the shares + a placer round)). */
int tp__groups_sim(const tp_groups_opts_t *o, tp_groups_result_t *r, tp_error_t *err);

/* A lower bound on the makespan of any placement of o's rungs (same
 * trials, same survivors): each rung lasts at least restart_s plus the
 * least M for which the trials' allocations fit in the GPUs, sum g_i(M) <=
 * gpus, where g_i(M) is the least GPU allocation (a real number, at most
 * gpus_cap) whose speed finishes trial i's steps within M. Speed is the
 * concave hull of the model's (time-sharing reaches any point of it): below
 * its compute demand d a share c runs at c / d, from d to one GPU at full
 * speed, on g GPUs 1 / (f + (1 - f) / g); no MPS overhead, no memory limit,
 * no minimum share, one restart per rung: every relaxation only lowers it.
 * 0, or -EINVAL as tp__groups_sim. O(rungs x n x 3600). */
int tp__groups_bound(const tp_groups_opts_t *o, double *bound_s, tp_error_t *err);

#endif
