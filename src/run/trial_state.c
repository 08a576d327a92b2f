/* trial_state: the trial table, the transition table and the one function
 * every state change goes through (see trial_state.h). */
#include "run/trial_state.h"

#include <assert.h>
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "store/store.h"

static const char *const state_names[TP_TRIAL_NSTATES] = {
    [TP_TRIAL_PENDING] = "pending", [TP_TRIAL_RUNNING] = "running",
    [TP_TRIAL_PAUSED] = "paused",   [TP_TRIAL_COMPLETED] = "completed",
    [TP_TRIAL_STOPPED] = "stopped", [TP_TRIAL_FAILED] = "failed",
};

/* allowed[from][to]: the trial life of DESIGN.md, nothing else. */
static const unsigned char allowed[TP_TRIAL_NSTATES][TP_TRIAL_NSTATES] = {
    [TP_TRIAL_PENDING] = {[TP_TRIAL_RUNNING] = 1},
    [TP_TRIAL_RUNNING] = {[TP_TRIAL_PENDING] = 1,
                          [TP_TRIAL_PAUSED] = 1,
                          [TP_TRIAL_COMPLETED] = 1,
                          [TP_TRIAL_STOPPED] = 1,
                          [TP_TRIAL_FAILED] = 1},
    [TP_TRIAL_PAUSED] = {[TP_TRIAL_PENDING] = 1, [TP_TRIAL_RUNNING] = 1, [TP_TRIAL_STOPPED] = 1},
    /* completed and stopped are final; failed too, unless the user asks
       (`run --retry-failed`) */
    [TP_TRIAL_FAILED] = {[TP_TRIAL_PENDING] = 1},
};

const char *tp__trial_state_name(tp_trial_state_t state) {
    return (unsigned)state < TP_TRIAL_NSTATES ? state_names[state] : "?";
}

int tp__trial_state_from_name(const char *name) {
    for (int i = 0; i < TP_TRIAL_NSTATES; i++)
        if (name && strcmp(name, state_names[i]) == 0) return i;
    return -1;
}

int tp__trial_transition_ok(tp_trial_state_t from, tp_trial_state_t to) {
    return (unsigned)from < TP_TRIAL_NSTATES && (unsigned)to < TP_TRIAL_NSTATES &&
           allowed[from][to];
}

/* ---- the table of trials ------------------------------------------------------ */
static trial_t *insert(tp_trials_t *ts, int64_t id, json_t *params, tp_trial_state_t state) {
    ts->by_id = tp__xgrow(ts->by_id, &ts->cap, (size_t)id + 1, sizeof *ts->by_id, 64);
    trial_t *t = tp__xcalloc(1, sizeof *t);
    t->id = id;
    t->params = params;
    t->state = state;
    t->step = TP_STORE_NO_STEP;
    t->value = t->best = NAN;
    tp__placement_trial_init(t);
    tp__groups_trial_init(t);
    t->job.step_done = -1;
    t->pace.first_step = TP_STORE_NO_STEP;
    tp__elastic_trial_init(t);
    ts->by_id[id] = t;
    if ((size_t)id >= ts->n) ts->n = (size_t)id + 1;
    ts->count[state]++;
    return t;
}

trial_t *tp__trials_add(tp_trials_t *ts, int64_t id, json_t *params, double at) {
    char *text = json_dumps(params, JSON_COMPACT | JSON_PRESERVE_ORDER);
    tp_store_t *s = tp__journal_tx(ts->journal);
    tp__journal_ok(ts->journal, tp__store_trial_add(s, id, text, at), "adding a trial");
    free(text);
    return insert(ts, id, params, TP_TRIAL_PENDING);
}

trial_t *tp__trials_load(tp_trials_t *ts, int64_t id, json_t *params, tp_trial_state_t state) {
    return insert(ts, id, params, state);
}

trial_t *tp__trials_get(const tp_trials_t *ts, int64_t id) {
    return id >= 0 && (size_t)id < ts->n ? ts->by_id[id] : NULL;
}

size_t tp__trials_n(const tp_trials_t *ts) {
    return ts->n;
}

int tp__trials_in(const tp_trials_t *ts, tp_trial_state_t state) {
    return ts->count[state];
}

const int *tp__trials_counts(const tp_trials_t *ts) {
    return ts->count;
}

size_t tp__trials_queued(const tp_trials_t *ts) {
    return ts->nheap;
}

void tp__trial_job_restore(trial_t *t, int rung, double budget) {
    t->job.rung = rung > 0 ? rung : 0;
    t->job.budget = budget;
}

void tp__trial_job_set_why(trial_t *t, const char *why) {
    snprintf(t->job.why, sizeof t->job.why, "%s", why);
}

void tp__trial_job_set_checkpoint(trial_t *t, int64_t step) {
    t->job.step_done = step;
}

void tp__trial_job_stop_early(trial_t *t, const char *why) {
    t->job.early_stopped = 1;
    tp__trial_job_set_why(t, why);
}

void tp__trial_pace_restart(trial_t *t) {
    t->pace.first_step = TP_STORE_NO_STEP;
    t->pace.first_report = t->pace.last_report = 0;
}

void tp__trial_set_step_s(tp_trials_t *ts, trial_t *t, double step_s) {
    if (!(step_s > 0)) return;
    double before = t->pace.step_s > 0 ? t->pace.step_s : 0;
    ts->step_sum += step_s - before;
    ts->step_n += before == 0;
    int group = tp__placement_group_of(t);
    if (group >= 0) {
        size_t g = (size_t)group;
        if (g >= ts->ngroups) {
            size_t n = 2 * g + 8;
            ts->group_step_sum = tp__xrealloc(ts->group_step_sum, n * sizeof *ts->group_step_sum);
            ts->group_step_n = tp__xrealloc(ts->group_step_n, n * sizeof *ts->group_step_n);
            memset(ts->group_step_sum + ts->ngroups, 0, (n - ts->ngroups) * sizeof(double));
            memset(ts->group_step_n + ts->ngroups, 0, (n - ts->ngroups) * sizeof(size_t));
            ts->ngroups = n;
        }
        ts->group_step_sum[g] += step_s - before;
        ts->group_step_n[g] += before == 0;
    }
    t->pace.step_s = step_s;
    t->pace.step_gpus = t->gpus;
    tp__groups_load_measured(t);
}

double tp__trial_steps_left(const trial_t *t) {
    return t->job.budget > 0 ? t->job.budget - (t->job.step_done > 0 ? (double)t->job.step_done : 0)
                             : 0;
}

double tp__trial_expected_s(const tp_trials_t *ts, const trial_t *t) {
    double step = t->pace.step_s;
    int group = tp__placement_group_of(t);
    size_t g = group >= 0 ? (size_t)group : SIZE_MAX;
    if (!(step > 0) && g < ts->ngroups && ts->group_step_n[g])
        step = ts->group_step_sum[g] / (double)ts->group_step_n[g];
    if (!(step > 0) && ts->step_n) step = ts->step_sum / (double)ts->step_n;
    double left = tp__trial_steps_left(t);
    return step > 0 && left > 0 ? step * left : 0;
}

void tp__trials_free(tp_trials_t *ts) {
    free(ts->group_step_sum);
    free(ts->group_step_n);
    ts->group_step_sum = NULL;
    ts->group_step_n = NULL;
    ts->ngroups = 0;
    for (size_t i = 0; i < ts->n; i++) {
        trial_t *t = ts->by_id[i];
        if (!t) continue;
        json_decref(t->params);
        json_decref(t->gpu_env);
        json_decref(t->ranks.verdict);
        tp__placement_trial_free(t);
        free(t->ranks.logs);
        tp__buf_free(&t->last);
        free(t);
    }
    free(ts->by_id);
    free(ts->heap);
    memset(ts, 0, sizeof *ts);
}

/* ---- the pending queue: a binary min-heap of trial ids --------------------- */
void tp__trials_push(tp_trials_t *ts, trial_t *t) {
    ts->heap = tp__xgrow(ts->heap, &ts->capheap, ts->nheap + 1, sizeof *ts->heap, 64);
    size_t i = ts->nheap++;
    while (i > 0 && ts->heap[(i - 1) / 2] > t->id) {
        ts->heap[i] = ts->heap[(i - 1) / 2];
        i = (i - 1) / 2;
    }
    ts->heap[i] = t->id;
}

trial_t *tp__trials_pop(tp_trials_t *ts) {
    while (ts->nheap) {
        int64_t top = ts->heap[0], last = ts->heap[--ts->nheap];
        size_t i = 0;
        for (;;) {
            size_t c = 2 * i + 1;
            if (c >= ts->nheap) break;
            if (c + 1 < ts->nheap && ts->heap[c + 1] < ts->heap[c]) c++;
            if (ts->heap[c] >= last) break;
            ts->heap[i] = ts->heap[c];
            i = c;
        }
        if (ts->nheap) ts->heap[i] = last;
        trial_t *t = tp__trials_get(ts, top);
        if (t && t->state == TP_TRIAL_PENDING) return t;
    }
    return NULL;
}

/* ---- the state machine ------------------------------------------------------- */
/* Journal t's change to `to`: the end of an attempt when it leaves running
 * (with what it reported), a plain state change otherwise. */
static int journal_change(tp_trials_t *ts, const trial_t *t, tp_trial_state_t to,
                          const tp_transition_t *how, double at) {
    tp_store_t *s = tp__journal_tx(ts->journal);
    int rc;
    if (t->state == TP_TRIAL_RUNNING) {
        tp_trial_end_t e = {.state = state_names[to],
                            .attempt = t->attempts,
                            .failures = t->failures,
                            .has_exit = how->has_exit,
                            .exit_code = how->exit_code,
                            .signal = how->signal,
                            .error = how->error,
                            .detail = how->detail,
                            .has_value = t->has_value,
                            .value = t->value,
                            .best = t->best,
                            .step = t->step,
                            .metrics = t->last.len ? t->last.data : NULL,
                            .at = at,
                            /* Running time only: a trial read back from the store (a crash)
                               has no start of ours, and its lost attempt counts nothing. */
                            .ran_s = t->current.started > 0 ? tp__mono_s() - t->current.started : 0,
                            .interrupted = how->requeue == TP_REQUEUE_INTERRUPTED,
                            .stderr_tail = how->stderr_tail};
        rc = tp__store_trial_end(s, t->id, &e);
    } else {
        const char *detail = how->detail ? how->detail : how->error;
        rc = tp__store_trial_state(s, t->id, state_names[to], t->attempts, detail, at);
    }
    return tp__journal_ok(ts->journal, rc, "recording a trial's state");
}

int tp__trial_set_state(tp_trials_t *ts, trial_t *t, tp_trial_state_t to,
                        const tp_transition_t *how) {
    static const tp_transition_t none = {0};
    if (!how) how = &none;
    if (!tp__trial_transition_ok(t->state, to)) {
        ts->bugs++;
        tp__log(TP_LOG_ERROR, "bug: trial %lld cannot go from %s to %s; the change is refused",
                (long long)t->id, tp__trial_state_name(t->state), tp__trial_state_name(to));
        return -EINVAL;
    }
    double at = how->at > 0 ? how->at : tp__wall_s();
    int rc = journal_change(ts, t, to, how, at);
    if (t->state == TP_TRIAL_RUNNING && to == TP_TRIAL_PENDING) {
        if (how->requeue == TP_REQUEUE_RETRY) ts->retried++;
        if (how->requeue == TP_REQUEUE_INTERRUPTED) ts->interrupted++;
        if (how->requeue == TP_REQUEUE_REGROW) ts->regrown++;
        if (how->requeue == TP_REQUEUE_RESIZE) ts->resized++;
        t->requeued = how->requeue;
    }
    ts->count[t->state]--;
    ts->count[to]++;
    t->state = to;
    if (to == TP_TRIAL_PENDING) tp__trials_push(ts, t);
    return rc;
}

void tp__trial_set_closed(tp_trials_t *ts, trial_t *t, int closed) {
    tp_trial_state_t from = closed ? TP_TRIAL_PAUSED : TP_TRIAL_STOPPED;
    tp_trial_state_t to = closed ? TP_TRIAL_STOPPED : TP_TRIAL_PAUSED;
    assert(t->state == from);
    ts->count[from]--;
    ts->count[to]++;
    t->state = to;
}
