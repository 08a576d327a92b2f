/* sched_fifo: every trial runs once, to the full budget, in the sampler's
 * order: trial k is the sampler's ask(k), one job with budget = budget.max
 * (0 without a budget), final after that job; its result is told to the
 * sampler. next() returns 0 once the sampler is exhausted (no job will ever
 * come, even while the last jobs still run) and passes on the sampler's
 * -EAGAIN (tpe never waits: with pending trials it uses the constant liar).
 * No early stopping. O(1) per call apart from the sampler's ask; memory one
 * config per trial (kept to tell the sampler). */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "search/scheduler.h"

typedef struct fifo_state {
    int64_t next;     /* number of the next new trial */
    json_t **configs; /* per trial, owned */
    size_t cap;       /* slots in configs */
} fifo_state_t;

static int fifo_init(tp_scheduler_t *s, tp_error_t *err) {
    (void)err;
    s->impl = tp__xcalloc(1, sizeof(fifo_state_t));
    return 0;
}

static int fifo_next(tp_scheduler_t *s, double now, tp_job_t *out) {
    fifo_state_t *st = s->impl;
    json_t *cfg;
    int rc = tp__sched_new_trial(s, st->next, now, out, &cfg);
    if (rc <= 0) return rc;
    st->configs = tp__xgrow(st->configs, &st->cap, (size_t)st->next + 1, sizeof *st->configs, 64);
    st->configs[st->next++] = cfg;
    return 1;
}

static void fifo_result(tp_scheduler_t *s, int64_t trial, int rung, int ok, double value,
                        double now) {
    (void)rung;
    fifo_state_t *st = s->impl;
    if (trial < 0 || trial >= st->next) return;
    s->sampler->ops->tell(s->sampler, (uint64_t)trial, st->configs[trial], ok ? value : NAN, now);
}

static void fifo_result_values(tp_scheduler_t *s, int64_t trial, int rung, int ok,
                               const double *values, double now) {
    (void)rung;
    fifo_state_t *st = s->impl;
    if (trial < 0 || trial >= st->next) return;
    double failed[TP_MAX_OBJECTIVES];
    for (size_t j = 0; j < TP_MAX_OBJECTIVES; j++)
        failed[j] = NAN;
    s->sampler->ops->tell_values(s->sampler, (uint64_t)trial, st->configs[trial],
                                 ok ? values : failed, now);
}

static int fifo_final(const tp_scheduler_t *s, int64_t trial, int rung) {
    (void)s, (void)trial, (void)rung;
    return 1;
}

static uint64_t fifo_total(const tp_scheduler_t *s) {
    return s->sampler->ops->total(s->sampler);
}

static void fifo_destroy(tp_scheduler_t *s) {
    fifo_state_t *st = s->impl;
    if (!st) return;
    for (size_t i = 0; i < st->cap; i++)
        json_decref(st->configs[i]);
    free(st->configs);
    free(st);
    s->impl = NULL;
}

const struct tp_scheduler_ops tp__sched_fifo_ops = {
    .name = "fifo",
    .init = fifo_init,
    .next = fifo_next,
    .result = fifo_result,
    .result_values = fifo_result_values,
    .report = tp__sched_report_runs_on,
    .final = fifo_final,
    .total = fifo_total,
    .destroy = fifo_destroy,
};
