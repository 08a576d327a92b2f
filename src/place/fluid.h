/* fluid: GPU shares for a trial group (Fluid, Yu et al., MLSys 2021), pure.
 *
 * A group is one batch of a searcher (a successive-halving rung). Each of
 * its trials gets a share of the group's capacity proportional to its
 * remaining work (measured step time x remaining steps), then clamped to a
 * value the machine can give: 1/k of a GPU (k trials packed on it, k up to
 * the packing limit, and only when k of the trial's memory fit in the GPU's
 * memory) or a whole number of GPUs (up to what the trial may use). The
 * minimum and maximum apply AFTER normalisation (Fluid clamps first and
 * normalises after, so its shares leave the bounds), and what rounding down
 * leaves over goes, one step of the ladder at a time, to the trial expected
 * to finish last. No clock, no I/O: the run and the simulator call it.
 * Also the measured curve of how much a GPU serves k such trials under MPS
 * (TP_FLUID_SERVED), by which both weigh a step measured on a shared GPU. */
#ifndef TP_PLACE_FLUID_H
#define TP_PLACE_FLUID_H

#include <stddef.h>
#include <stdint.h>

/* When shares are computed. */
typedef enum tp_fluid_mode {
    TP_FLUID_OFF = 0, /* no groups: every trial takes its own demand */
    TP_FLUID_STATIC,  /* once, when the group's trials are first placed */
    TP_FLUID_DYNAMIC, /* again whenever a trial of the group ends */
} tp_fluid_mode_t;

#define TP_FLUID_MAX_LADDER 64 /* valid values one trial may take */

typedef struct tp_fluid_trial {
    int64_t id;             /* the caller's trial id */
    double step_s;          /* measured seconds per step on one whole GPU; <= 0 or NaN: not
                               measured (the mean of the group's measured ones stands in) */
    double remaining_steps; /* steps left in its job; <= 0: done, share 0 */
    uint64_t memory_mib;    /* its GPU memory, measured or declared; 0: unknown (unchecked) */
    int gpus_max;           /* whole GPUs it may use (elastic max); < 1 counts as 1 */
} tp_fluid_trial_t;

typedef struct tp_fluid_opts {
    double capacity; /* GPUs the group may use, > 0 */
    double min, max; /* bounds on a share after normalisation; max 0: no bound */
    int pack_max;    /* fractions 1/k for k = 2..pack_max; <= 1: whole GPUs only */
    uint64_t
        gpu_memory_mib; /* usable memory of a GPU (its memory minus the reserve); 0: unchecked */
} tp_fluid_opts_t;

typedef struct tp_fluid_share {
    int64_t id;     /* = trials[i].id */
    double work;    /* step_s x remaining_steps (the stand-in step time if unmeasured) */
    double ideal;   /* capacity x work / total work: normalised, before any bound */
    double bounded; /* ideal with min, max and the ladder's ends applied, renormalised */
    double share;   /* the value given: 1/k or a whole number of GPUs; 0 when done */
    int gpus;       /* share >= 1: whole GPUs; else 1 (a fraction of one GPU) */
    int per_gpu;    /* share < 1: k (trials like it packed on one GPU); else 1 */
    char why[256];  /* "0.667 of 4 GPUs for 42% of the work; rounded to 1/2 (memory
                       allows 1/2 at most)" */
} tp_fluid_share_t;

/* Shares for trials[0..n) into out[0..n) (same order). Returns the sum of
 * the shares given: <= capacity, unless every trial at its smallest valid
 * value is already more (then some of them wait to be placed). Memory wins
 * over the bounds: a trial whose memory needs a whole GPU gets at least a
 * whole GPU even when max < 1, and min above what a trial may use gives it
 * its largest value. O(n^2 + n * ladder), fine for groups below ~10k. */
double tp__fluid_shares(const tp_fluid_trial_t *trials, size_t n, const tp_fluid_opts_t *o,
                        tp_fluid_share_t *out);

/* The valid shares of one trial under o, ascending, into v[0..cap) (before
 * min and max): 1/pack_max .. 1/2 where k times its memory fits, then 1, 2,
 * ..., its gpus_max (at most the capacity, at least 1). Returns the count. */
size_t tp__fluid_ladder(const tp_fluid_trial_t *t, const tp_fluid_opts_t *o, double *v, size_t cap);

/* C_k, k = 1..4: the busy share a GPU serves k co-located trials under MPS
 * with no thread limit (Fluid fractions) before it saturates, the medians
 * of compute-bound models measured on H100s (bench/gpu/served.py;
 * docs/simulator.md). k such trials of summed compute demand D (each its
 * busy share alone) each step max(1, D / C_k) times slower than alone.
 * Time-sliced (no MPS), they run one at a time: C_k = 1 at best. */
#define TP_FLUID_SERVED                                                                            \
    { 1.0, 1.14, 1.36, 1.44 }

/* C_k of `curve` (C_1..C_4; NULL: TP_FLUID_SERVED); k above 4 gets C_4
 * (not measured beyond 4 on an H100), k below 1 gets 1. */
double tp__fluid_served(const double *curve, int k);

/* "static", "dynamic" or "off". */
const char *tp__fluid_mode_name(tp_fluid_mode_t m);

#endif
