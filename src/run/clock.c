/* clock: the run's clock, real or (for tests) counted in reports; see clock.h. */
#include "run/clock.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "util/util.h"

/* See clock.h. */
int tp__clock_init(tp_run_clock_t *c, char *why, size_t n) {
    *c = (tp_run_clock_t){0};
    const char *v = getenv("TUNEPACK_TEST_CLOCK");
    if (!v || !*v) return 0; /* the real clocks */
    char *end = NULL;
    double step = strtod(v, &end);
    if (end == v || *end || !isfinite(step) || !(step > 0)) {
        snprintf(why, n, "TUNEPACK_TEST_CLOCK=%s: seconds per report, a number > 0", v);
        return -EINVAL;
    }
    c->step_s = step;
    tp__log(TP_LOG_WARN,
            "TUNEPACK_TEST_CLOCK=%s: the deadline's clock is virtual, %g s a stored report (for "
            "tests only)",
            v, step);
    return 0;
}

/* See clock.h. */
void tp__clock_start(tp_run_clock_t *c, double base, int64_t reports) {
    if (c->step_s > 0) c->base = base, c->reports = reports;
}

/* See clock.h. */
int tp__clock_virtual(const tp_run_clock_t *c) {
    return c->step_s > 0;
}

/* See clock.h. */
double tp__clock_wall(const tp_run_clock_t *c) {
    return c->step_s > 0 ? c->base + c->step_s * (double)c->reports : tp__wall_s();
}

/* See clock.h. */
double tp__clock_mono(const tp_run_clock_t *c) {
    return c->step_s > 0 ? c->step_s * (double)c->reports : tp__mono_s();
}

/* See clock.h. */
void tp__clock_report(tp_run_clock_t *c) {
    if (c->step_s > 0) c->reports++;
}
