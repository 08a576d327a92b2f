/* groups: a trial's Fluid part (trial_t.fluid). Owned by groups.c: no other
 * file reads or writes these fields (tests/lint/owned_fields.sh); the others
 * ask through the functions below. */
#ifndef TP_RUN_GROUPS_H
#define TP_RUN_GROUPS_H

#include <stdint.h>

struct trial;

typedef struct tp_trial_fluid {
    int64_t group;     /* its job's trial group (tp_job_t.group), -1 before a job */
    double share;      /* the Fluid share its job was given (groups:), 0: none yet */
    double noted;      /* the share its job's last `fluid-share` event gave, 0: none */
    double load_d;     /* a Fluid fraction's GPU load since load_at: max(1, D / C_k), D the
                          summed compute demands of the k trials on its GPU; NaN: a demand
                          not known */
    double load_at;    /* monotonic time load_d was sampled (a report, or a trial starting
                          or ending on its GPU) */
    double load_alone; /* since the attempt's first report with a step: the integral of
                          1 / load_d over the time it was known (the seconds it would have
                          taken alone: at load L it steps L times slower), */
    double load_span;  /* and that time */
    double step_load;  /* load_span / load_alone when step_s was set: the mean load it was
                          measured under, harmonic as the pace it sets is (step_s / step_load:
                          its step on a GPU of its own); 1 on a whole GPU; 0: none known (not
                          in a group, or every demand unknown) */
} tp_trial_fluid_t;

/* A new trial's part: no group yet. */
void tp__groups_trial_init(struct trial *t);
/* The trial group of the job handed out to t (tp_job_t.group): a new job,
 * with no share yet (new_job), or a replayed job's group only (set_group).
 * O(1). */
void tp__groups_new_job(struct trial *t, int64_t group);
void tp__groups_set_group(struct trial *t, int64_t group);
/* The load on t's GPU (load_d) starts over at `now` (its attempt's first
 * report with a step), or changes at `now` after the old one held since
 * load_at (counted only when known). O(1). */
void tp__groups_load_reset(struct trial *t, double now, double load);
void tp__groups_load_note(struct trial *t, double now, double load);
/* Its step time was measured (tp__trial_set_step_s): the mean load since
 * the reset becomes step_load. O(1). */
void tp__groups_load_measured(struct trial *t);
double tp__groups_step_load(const struct trial *t);

#endif
