/* retry: `tunepack run FILE --retry-failed`: every failed trial runs again,
 * a new attempt each with the same parameters and the same trial id, at the
 * job (rung and budget) it failed at; its earlier attempts' logs stay beside
 * it (stderr.N.log). Each retry is journaled as a decision ("retry") in the
 * run's first transaction, with the trial's change from failed to pending,
 * so a resume finds the trial pending (it runs, once) and replays the
 * decision to the scheduler (ops->retry) in its place among the others.
 * An explicit retry is the user's word: the rule that stops automatic
 * retries after the same error twice does not apply to it. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "run/orchestrator_internal.h"
#include "run/run.h"

/* A "retry" decision replayed (setup.c): the scheduler takes the trial back
 * as it did when the retry was made. 1 when d was one, else 0. */
int tp__retry_replay(tp_run_t *r, const tp_decision_row_t *d) {
    if (strcmp(d->kind, "retry") != 0) return 0;
    if (r->sched->ops->retry) r->sched->ops->retry(r->sched, d->trial, d->rung);
    return 1;
}

int tp__run_retry_failed(tp_run_t *r) {
    tp_buf_t ids;
    tp__buf_init(&ids);
    int n = 0;
    for (size_t i = 0; i < tp__trials_n(&r->trials); i++) {
        trial_t *t = tp__trials_get(&r->trials, (int64_t)i);
        if (!t || t->state != TP_TRIAL_FAILED) continue;
        char why[sizeof t->job.why];
        snprintf(why, sizeof why,
                 "retried on request (--retry-failed): attempt %d, after %d failed attempt(s)",
                 t->attempts + 1, t->failures);
        tp__trial_job_set_why(t, why);
        tp__run_decision(r, "retry", t, 1, NAN, why, NULL);
        if (r->sched->ops->retry) r->sched->ops->retry(r->sched, t->id, t->job.rung);
        tp__trial_set_state(&r->trials, t, TP_TRIAL_PENDING, &(tp_transition_t){.detail = why});
        r->trials.retried++; /* the run's summary counts it with the automatic ones */
        tp__buf_printf(&ids, "%s%lld", n++ ? ", " : "", (long long)t->id);
    }
    if (n)
        tp__log(TP_LOG_INFO,
                "retrying %d failed trial(s): %s (a new attempt each, same parameters)", n,
                ids.data);
    else
        tp__log(TP_LOG_INFO, "--retry-failed: %s holds no failed trial to retry", r->dir);
    tp__buf_free(&ids);
    return n;
}
