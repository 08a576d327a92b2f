/* realloc: the reallocation policy of a deadline run (HyperSched's idea,
 * fed with measured curves). When GPUs are free, which running trials should
 * grow, and to how many GPUs? A trial grows by checkpoint and restart, so a
 * resize must pay for its restart: the modelled gain
 *
 *     gain = remaining_steps * t(g) / (restart_s + remaining_steps * t(k))
 *
 * (t: the trial's scaling curve, g its GPU count now, k the new one) must
 * exceed min_gain (default 1.1). Pure: the time is an argument, no clock, no
 * I/O; the same input gives the same plan (the run and the simulator share
 * it, and a resumed run replays it).
 *
 * Policies decide how the free GPUs are split among the eligible trials
 * (ranked by score, higher is better, ties to the lower trial id):
 *   uniform  equal shares (largest remainder, the better trials first),
 *   top-job  the best trial takes what it can use, then the next one, ...
 *   softmax  shares proportional to exp((score - best) / temperature).
 * A trial whose best gain within its share is not above min_gain drops out
 * and the shares are recomputed among the rest (so GPUs go where they pay).
 *
 * A trial is eligible when: its cooldown is over (now - last_resize_s >=
 * cooldown_s; NaN last_resize_s: never resized), gpus < gpus_max, its step
 * time at its current count is measured (TP_SCALING_MEASURED) and its
 * restart cost is known (finite; the run measures it, e.g. the start-up of
 * its first attempt). A curve measured at one count only (unproven) may be
 * probed when opts.probe is set: the trial may grow to at most twice its
 * count, judged on ideal linear scaling, and its why says "probe"; once it
 * runs there, two counts are measured and the Amdahl fit decides.
 * The plan never hands out more than free_gpus in all, never takes a trial
 * above gpus_max or leaves it below gpus_min, and only grows trials. */
#ifndef TP_REALLOC_H
#define TP_REALLOC_H

#include <stddef.h>
#include <stdint.h>

#include "search/scaling.h"

typedef enum tp_realloc_policy {
    TP_REALLOC_UNIFORM,
    TP_REALLOC_TOP_JOB,
    TP_REALLOC_SOFTMAX,
} tp_realloc_policy_t;

/* A running trial as the policy sees it. */
typedef struct tp_realloc_trial {
    int64_t trial;               /* trial id */
    int gpus;                    /* GPUs it holds now (>= 1) */
    int gpus_min, gpus_max;      /* its bounds (`resources: {gpus: {min, max}}`); max 0: no limit
                                    beyond TP_SCALING_MAX_GPUS */
    double remaining_steps;      /* steps (budget units) left in its current job */
    double score;                /* its latest metric, higher is better (negate a loss) */
    const tp_scaling_t *scaling; /* its measured curve, borrowed */
    double restart_s;            /* measured cost of a checkpoint + restart, s; NaN: unknown */
    double last_resize_s;        /* when it was last resized (the caller's clock); NaN: never */
} tp_realloc_trial_t;

typedef struct tp_realloc_opts {
    tp_realloc_policy_t policy; /* `reallocation.policy`, default uniform */
    double min_gain;            /* `reallocation.min_gain`, default 1.1; only gains above it */
    double cooldown_s;  /* `reallocation.cooldown`, default 60 s between a trial's resizes */
    double temperature; /* `reallocation.temperature`, softmax only, default 1 (> 0) */
    int probe;          /* `reallocation.probe`, default 1: unproven curves may be probed */
} tp_realloc_opts_t;

/* One resize decision. */
typedef struct tp_resize {
    int64_t trial; /* which trial */
    int gpus;      /* its new GPU count (> its count now) */
    double gain;   /* the modelled gain, > min_gain */
    char why[160]; /* in words: "grow 1 -> 4 GPUs: gain 1.83 (remaining 120 s ->
                      restart 8 s + 57 s), top-job" */
} tp_resize_t;

/* The defaults above. */
void tp__realloc_opts_default(tp_realloc_opts_t *o);
/* Names as written in the file ("uniform", "top-job", "softmax"), NULL-terminated. */
extern const char *const tp__realloc_policy_names[];
const char *tp__realloc_policy_name(tp_realloc_policy_t p);
/* The policy named s; -1 when unknown. */
int tp__realloc_policy_parse(const char *s);
/* The gain of moving t from t->gpus to k GPUs (formula above), NaN when a
 * step time is unknown. *quality gets the worse tp__scaling_step_s quality
 * of the two counts (may be NULL). O(TP_SCALING_MAX_GPUS). */
double tp__realloc_gain(const tp_realloc_trial_t *t, int k, int *quality);
/* The plan: resize decisions for trials[0..n) sharing free_gpus, at time
 * now, by o (NULL: defaults). Fills out[0..min(count, cap)) in the order of
 * the ranking, returns the count. O(n^2 * TP_SCALING_MAX_GPUS^2) in the
 * worst case, fine for the hundreds of trials one run holds at once. */
size_t tp__realloc_plan(tp_realloc_policy_t policy, const tp_realloc_trial_t *trials, size_t n,
                        int free_gpus, double now, const tp_realloc_opts_t *o, tp_resize_t *out,
                        size_t cap);

#endif
