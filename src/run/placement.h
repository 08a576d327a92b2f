/* placement: a trial's demand and what its attempts measured
 * (trial_t.demand). Owned by placement.c and profiling.c (placement's part
 * of the run): no other file reads or writes these fields
 * (tests/lint/owned_fields.sh); the others ask through the functions below. */
#ifndef TP_RUN_PLACEMENT_H
#define TP_RUN_PLACEMENT_H

#include <stdint.h>

#include "place/place.h"
#include "run/profile.h"

struct trial;

typedef struct tp_trial_demand {
    int group;         /* index of its demand group, -1 before */
    tp_assign_t *more; /* a multi-node trial's other nodes, owned; NULL if one node */
    uint64_t mem_mib;  /* demand it was placed with, per GPU */
    double compute;    /* compute share it was placed with, per GPU */
    int profiling;     /* this attempt measures its group's demand */
    int guessed;       /* placed beside its group's profiler on a guess */
    uint64_t peak_mib; /* largest GPU memory seen in this attempt */
    double sm_sum;     /* sum of SM use samples (percent) in this attempt */
    int samples;       /* NVML samples of this attempt */
    tp_prof_t prof;    /* a profiling attempt's samples and what they showed (profiling.c) */
} tp_trial_demand_t;

/* A new trial's part: no group yet; freed with the trial. */
void tp__placement_trial_init(struct trial *t);
void tp__placement_trial_free(struct trial *t);
/* Its demand group's index, -1 before one; the memory and compute share
 * per GPU it was placed with; the most GPU memory its attempt was seen to
 * use. O(1). */
int tp__placement_group_of(const struct trial *t);
uint64_t tp__placement_mem_mib(const struct trial *t);
double tp__placement_compute(const struct trial *t);
uint64_t tp__placement_peak_mib(const struct trial *t);
/* A configuration of a fused process (to) runs where the process's first
 * (from) does, on its first node only: placed there by the first. */
void tp__placement_run_beside(struct trial *to, const struct trial *from);
/* A fused process's placement moves from `from` (its attempt ends) to `to`
 * (runs on in the process): where it runs, its demand, what was measured
 * of it, the profile in progress. O(1). */
void tp__placement_hand_over(struct trial *to, struct trial *from);

#endif
