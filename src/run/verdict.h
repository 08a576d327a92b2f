/* verdict: the end of an attempt judged, as a pure function of the trial and
 * its typed `exited` message (DESIGN.md, "Inside the orchestrator": decide,
 * then journal, then act). It reads no clock, does no I/O and changes
 * nothing; outcome.c applies what it returns. */
#ifndef TP_RUN_VERDICT_H
#define TP_RUN_VERDICT_H

#include "config/config.h"
#include "proto/proto.h"
#include "run/trial_state.h"

#define TP_GARBAGE_EVENTS 20 /* garbage events journaled per attempt; more are only counted */

typedef enum tp_verdict_kind {
    TP_VERDICT_DONE,        /* its job is done (or the scheduler stopped it): told its value */
    TP_VERDICT_INTERRUPTED, /* its job is not done: it runs again from its checkpoint */
    TP_VERDICT_OOM,         /* it ran out of GPU memory: placed again with more, if it can */
    TP_VERDICT_FAILED,      /* it failed: retried, or failed for good */
} tp_verdict_kind_t;

/* What the run knows that the trial and its message do not. */
typedef struct tp_judge_facts {
    const tp_experiment_t *x; /* metric, objectives, timeout */
    int stopping;             /* the run is stopping: a stopped attempt was interrupted */
    int deadline_hit;         /* the deadline passed: likewise */
} tp_judge_facts_t;

typedef struct tp_verdict {
    tp_verdict_kind_t kind;
    char why[1200];                     /* FAILED: why, in words (the stderr tail is the
                                           caller's: it is I/O); "" otherwise */
    double values[TP_MAX_OBJECTIVES];   /* several objectives: each one's value in the last
                                           report, NaN where missing */
    char *objectives;                   /* several objectives: values as a JSON array (owned:
                                           tp__verdict_free); NULL with one */
    double cvalues[TP_MAX_CONSTRAINTS]; /* DONE under constraints: each constrained metric's
                                           value in the last report, NaN where missing */
    char *constraints; /* DONE under constraints: cvalues as a JSON array (null: missing),
                          owned (tp__verdict_free); NULL otherwise */
} tp_verdict_t;

/* Judge t's attempt, which ended as e says. O(the last report's size). */
void tp__verdict_judge(const trial_t *t, const tp_exited_t *e, const tp_judge_facts_t *f,
                       tp_verdict_t *v);
void tp__verdict_free(tp_verdict_t *v);
/* Past TP_GARBAGE_EVENTS garbage lines, append how many there were to why. */
void tp__verdict_add_garbage(const trial_t *t, char *why, size_t size);

#endif
