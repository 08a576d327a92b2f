/* deadline: a trial's deadline part (trial_t.deadline), its current attempt
 * timed on the run's clock (clock.h) for the job's measured timing. Owned by
 * deadline.c: no other file reads or writes these fields
 * (tests/lint/owned_fields.sh); the others call the functions in
 * orchestrator_internal.h. */
#ifndef TP_RUN_DEADLINE_H
#define TP_RUN_DEADLINE_H

typedef struct tp_trial_deadline {
    double started;       /* the attempt's start, monotonic on the run's clock */
    double first_step_at; /* its first report with a step (trial_t.pace.first_step), likewise */
    double last_report;   /* its last report, likewise; 0: none yet */
} tp_trial_deadline_t;

#endif
