/* elastic: a trial's elastic part (trial_t.elastic). Owned by elastic.c: no
 * other file reads or writes these fields (tests/lint/owned_fields.sh); the
 * others ask through the functions below. */
#ifndef TP_RUN_ELASTIC_H
#define TP_RUN_ELASTIC_H

#include <stdint.h>

#include "search/scaling.h"

struct trial;

typedef struct tp_trial_elastic {
    int gpus_want;       /* GPUs its next attempt asks for; 0: the experiment's */
    int resize_to;       /* a resize asked of the running attempt: its new GPU count, 0: none */
    double resize_asked; /* wall time the resize's pause was asked (restart cost from here) */
    double restart_s;    /* last measured restart cost; NaN */
    double restart_raw;  /* being measured: pause asked (or launch) -> the attempt's first report */
    int64_t restart_ahead; /* steps that first report is past the step it resumed from */
    int restart_pending;   /* restart_raw waits for the next step report's step time */
    int restart_resized;   /* the cost being measured is a resize's (journaled `resize-done`) */
    int restart_rough;     /* restart_s still holds its first report's steps (no later report
                              timed them): the next attempt measures it again */
    double last_resize;    /* wall time of its last resize, 0: never (for the cooldown) */
    int64_t mark_step;     /* last step report of this attempt, TP_STORE_NO_STEP before one */
    double mark_at;        /* its arrival, monotonic */
    tp_scaling_t scaling;  /* measured seconds per step by GPU count (one sample a step) */
} tp_trial_elastic_t;

/* A new trial's part: no resize, no restart cost, an empty curve. */
void tp__elastic_trial_init(struct trial *t);
/* What the others may know of it. O(1). */
int tp__elastic_want(const struct trial *t); /* gpus_want */
void tp__elastic_set_want(struct trial *t, int gpus);
int tp__elastic_resize_to(const struct trial *t); /* a resize asked, 0: none */
double tp__elastic_restart_s(const struct trial *t);
double tp__elastic_last_resize(const struct trial *t);
const tp_scaling_t *tp__elastic_scaling(const struct trial *t);

#endif
