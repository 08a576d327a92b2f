/* deadline: what the orchestrator tells a scheduler that plans against time
 * (ops->deadline, ops->timing: hypersched) and what it does with the
 * scheduler's refusals. Every call is journaled in the decisions table
 * before it acts ("deadline", "timing", "refused" rows), and replayed in
 * order on resume (setup.c), so a resumed run's scheduler decides as the
 * first one did.
 *
 * The deadline is the experiment's creation (the store's created_at) plus
 * `deadline`, in wall seconds (the clock of the scheduler's `now`): a
 * resumed run keeps it; a changed `deadline` key is journaled as a new
 * deadline from then on. A job's timing is measured from the attempt's
 * start and its reports' arrival (monotonic, as durations). Every time here
 * is read from the run's clock (clock.h), so a test's virtual clock drives
 * the whole deadline: `now`, the timings and the deadline's arrival. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "run/orchestrator_internal.h"
#include "store/store.h"

/* A decisions row that is no job of a trial (trial may be -1). */
static void journal_row(tp_run_t *r, double at, const char *kind, int64_t trial, int attempt,
                        int rung, double value, const char *detail) {
    tp_decision_row_t d = {.at = at,
                           .kind = kind,
                           .trial = trial,
                           .attempt = attempt,
                           .rung = rung,
                           .ok = 1,
                           .has_value = !isnan(value),
                           .value = value,
                           .detail = detail};
    tp__journal_ok(&r->journal, tp__store_decision(tp__journal_tx(&r->journal), &d),
                   "recording a decision");
}

/* See orchestrator_internal.h. */
void tp__deadline_start(tp_run_t *r) {
    double at = 0;
    if (r->x.deadline_s > 0) {
        char *created = tp__store_meta_get(tp__journal_store(&r->journal), "created_at");
        double c = created ? strtod(created, NULL) : 0;
        free(created);
        at = (c > 0 ? c : tp__clock_wall(&r->clock)) + r->x.deadline_s;
    }
    r->deadline_at = at; /* for every scheduler: the run's own deadline */
    if (!r->sched->ops->deadline || at == r->deadline_journaled)
        return; /* nothing to tell, or replayed: the scheduler has it */
    char d[32], detail[120];
    tp__format_duration(r->x.deadline_s, d, sizeof d);
    if (at > 0)
        snprintf(detail, sizeof detail, "deadline %s after the experiment's creation", d);
    else
        snprintf(detail, sizeof detail, "no deadline");
    journal_row(r, tp__clock_wall(&r->clock), "deadline", -1, 0, 0, at, detail);
    r->sched->ops->deadline(r->sched, at);
    r->deadline_journaled = at;
}

/* See orchestrator_internal.h. */
void tp__deadline_attempt(tp_run_t *r, trial_t *t) {
    t->deadline = (tp_trial_deadline_t){.started = tp__clock_mono(&r->clock)};
}

/* See orchestrator_internal.h. */
void tp__deadline_report(tp_run_t *r, trial_t *t, int first_step) {
    t->deadline.last_report = tp__clock_mono(&r->clock);
    if (first_step) t->deadline.first_step_at = t->deadline.last_report;
    tp__deadline_clock_moved(r);
}

/* See orchestrator_internal.h. */
void tp__deadline_timing(tp_run_t *r, const trial_t *t) {
    if (!r->sched->ops->timing || t->job.attempts != 1 || t->current.seq == 0 ||
        !(t->job.budget > 0))
        return;
    const tp_trial_deadline_t *d = &t->deadline;
    double now = tp__clock_wall(&r->clock);
    tp_timing_t tm = {.trial = t->id,
                      .rung = t->job.rung,
                      .units = t->job.budget - t->job.from_budget,
                      .run_s = d->last_report - d->started,
                      .unit_s = NAN};
    /* seconds per step between this attempt's first report with a step and its last */
    if (t->pace.first_step != TP_STORE_NO_STEP && t->step != TP_STORE_NO_STEP &&
        t->step > t->pace.first_step && d->last_report > d->first_step_at)
        tm.unit_s = (d->last_report - d->first_step_at) / (double)(t->step - t->pace.first_step);
    if (!(tm.units > 0) || !(tm.run_s >= 0)) return;
    json_t *j = json_pack("{s:f, s:f, s:o}", "units", tm.units, "run_s", tm.run_s, "unit_s",
                          isnan(tm.unit_s) ? json_null() : json_real(tm.unit_s));
    char *detail = json_dumps(j, JSON_COMPACT | JSON_PRESERVE_ORDER | JSON_REAL_PRECISION(17));
    json_decref(j);
    journal_row(r, now, "timing", t->id, t->attempts, t->job.rung, NAN, detail);
    free(detail);
    r->sched->ops->timing(r->sched, &tm, now);
}

/* See orchestrator_internal.h. */
void tp__deadline_refused(tp_run_t *r, const tp_job_t *job, double now) {
    trial_t *t = job->trial >= 0 ? tp__trials_get(&r->trials, job->trial) : NULL;
    journal_row(r, now, "refused", job->trial, t ? t->attempts : 0, t ? t->job.rung : 0, NAN,
                job->why);
    if (t && t->state == TP_TRIAL_PAUSED) {
        tp__run_stop_paused(r, t, job->why);
    } else {
        if (t)
            tp__log(TP_LOG_ERROR, "bug: the scheduler refused trial %lld, which is not waiting",
                    (long long)job->trial);
        tp__log(TP_LOG_INFO, "%s", job->why);
    }
}

/* See orchestrator_internal.h. */
int tp__deadline_replay(tp_run_t *r, const tp_decision_row_t *d) {
    tp_scheduler_t *s = r->sched;
    if (!strcmp(d->kind, "deadline")) {
        double at = d->has_value ? d->value : 0;
        if (s->ops->deadline) s->ops->deadline(s, at);
        r->deadline_journaled = at;
        return 1;
    }
    if (!strcmp(d->kind, "timing")) {
        json_t *j = d->detail ? json_loads(d->detail, 0, NULL) : NULL;
        json_t *u = json_object_get(j, "unit_s");
        tp_timing_t tm = {.trial = d->trial,
                          .rung = d->rung,
                          .units = json_number_value(json_object_get(j, "units")),
                          .run_s = json_number_value(json_object_get(j, "run_s")),
                          .unit_s = json_is_number(u) ? json_number_value(u) : NAN};
        json_decref(j);
        if (s->ops->timing) s->ops->timing(s, &tm, d->at);
        return 1;
    }
    return 0;
}
