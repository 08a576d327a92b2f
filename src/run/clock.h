/* clock: the run's clock. The deadline's arithmetic reads time only through
 * it: the scheduler's `now`, each job's measured timing (deadline.c) and the
 * deadline's arrival (reallocation.c). Owned by clock.c (r->clock).
 *
 * It is the real clocks (wall and monotonic), unless the environment sets
 * TUNEPACK_TEST_CLOCK, for tests only: seconds per report (> 0). Then it
 * is a virtual clock that moves only when a trial's report is stored, by that
 * many seconds a report, from the experiment's creation (wall: created_at +
 * step x reports, the reports the store holds, so a resumed run goes on
 * where the killed one stood; monotonic: step x reports). A test then sees
 * the same deadline decisions however fast or loaded the machine is: time
 * is counted in the trials' reports, not in seconds. Every other part of the
 * run (timeouts, heartbeats, the view, profiles) keeps the real clocks. */
#ifndef TP_RUN_CLOCK_H
#define TP_RUN_CLOCK_H

#include <stddef.h>
#include <stdint.h>

typedef struct tp_run_clock {
    double step_s;   /* virtual: seconds per stored report; 0: the real clocks */
    double base;     /* virtual: wall seconds of report 0 (the experiment's creation) */
    int64_t reports; /* virtual: reports the experiment's store holds */
} tp_run_clock_t;

/* The clock the environment asks for: the real one, or (TUNEPACK_TEST_CLOCK
 * set) a virtual one, stopped until tp__clock_start. 0, or -EINVAL with why
 * filled for a value that is no number > 0. */
int tp__clock_init(tp_run_clock_t *c, char *why, size_t n);
/* A virtual clock starts at wall time `base` (the experiment's creation)
 * after `reports` stored reports (those of the store, on resume). Nothing for
 * the real one. */
void tp__clock_start(tp_run_clock_t *c, double base, int64_t reports);
/* Whether it is the virtual (test) clock. */
int tp__clock_virtual(const tp_run_clock_t *c);
/* Now, in wall seconds (the scheduler's `now`, the deadline's). */
double tp__clock_wall(const tp_run_clock_t *c);
/* Now, in seconds of a monotonic clock (for durations). */
double tp__clock_mono(const tp_run_clock_t *c);
/* A report was stored: a virtual clock moves on by its step. */
void tp__clock_report(tp_run_clock_t *c);

#endif
