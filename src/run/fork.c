/* fork: `tunepack run FILE --fork OLD --dir NEW`: a new experiment seeded
 * with an old one's results, where the new file's space holds them. Every
 * old trial that ended a job with the objective (completed or stopped
 * early) and whose configuration is one of the new space is recorded in the
 * new store as it ended there (value, metrics, rung, budget), under a
 * negative id (-1, -2, ...) so that the new search numbers its own trials
 * from 0 as always; `trials`, `status`, `best`, `export` and the live view
 * rank them with the new trials. Nothing of the old experiment changes. */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "run/orchestrator_internal.h"
#include "run/run.h"
#include "space/space.h"
#include "store/store.h"

typedef struct seeding {
    tp_run_t *r;
    tp_store_t *to;      /* the new store, in a transaction */
    const char *from;    /* the old directory */
    int seeded, outside; /* trials copied, trials the new space does not hold */
    int failed;          /* a write failed */
} seeding_t;

void tp__run_load_seeded(tp_run_t *r, const tp_trial_row_t *row, json_t *params) {
    trial_t *t = tp__xcalloc(1, sizeof *t);
    t->id = row->id;
    t->params = params;
    t->state = strcmp(row->state, "completed") == 0 ? TP_TRIAL_COMPLETED : TP_TRIAL_STOPPED;
    t->has_value = row->has_value;
    t->value = row->value;
    tp__trial_job_restore(t, row->rung, row->budget);
    r->seeded = tp__xrealloc(r->seeded, (r->nseeded + 1) * sizeof *r->seeded);
    r->seeded[r->nseeded++] = t;
}

static int seed_row(const tp_trial_row_t *row, void *ud) {
    seeding_t *a = ud;
    if (row->id < 0 || !row->has_value ||
        (strcmp(row->state, "completed") != 0 && strcmp(row->state, "stopped") != 0))
        return 0;
    json_t *params = json_loads(row->params, 0, NULL);
    tp_error_t err = {0};
    if (!params || tp__space_check_config(&a->r->x.space, params, &err) != 0) {
        json_decref(params);
        a->outside++;
        return 0;
    }
    int64_t id = -(int64_t)(++a->seeded);
    char decision[4400];
    snprintf(decision, sizeof decision, "forked from %s, trial %lld", a->from, (long long)row->id);
    tp_trial_end_t e = {.state = row->state,
                        .failures = row->failures,
                        .has_exit = row->has_exit,
                        .exit_code = row->exit_code,
                        .signal = row->signal,
                        .detail = decision,
                        .has_value = 1,
                        .value = row->value,
                        .best = isnan(row->best) ? row->value : row->best,
                        .step = row->step,
                        .metrics = row->metrics,
                        .at = row->ended_at > 0 ? row->ended_at : tp__wall_s(),
                        .ran_s = row->run_s};
    a->failed |= tp__store_trial_add(a->to, id, row->params, row->created_at) != 0 ||
                 tp__store_trial_end(a->to, id, &e) != 0 ||
                 tp__store_trial_progress(a->to, id, row->rung, row->budget, decision) != 0;
    tp_trial_row_t seeded = *row;
    seeded.id = id;
    tp__run_load_seeded(a->r, &seeded, params); /* owns params now */
    return a->failed;
}

int tp__run_fork_check(const tp_run_t *r, const char *from, tp_error_t *err) {
    tp_store_t *old = NULL;
    int rc = tp__store_open(from, TP_STORE_READONLY, &old, err);
    if (rc) return rc;
    char *metric = tp__store_meta_get(old, "metric"), *mode = tp__store_meta_get(old, "mode");
    if (!metric || !mode || strcmp(metric, r->x.metric) != 0 ||
        strcmp(mode, r->x.maximize ? "max" : "min") != 0)
        rc = tp__errorf(err, -EINVAL,
                        "cannot fork %s: its trials measured %s (%s) and %s measures %s (%s); "
                        "their values would mean nothing here. Start afresh with a new --dir",
                        from, metric ? metric : "?", mode ? mode : "?", r->x.path, r->x.metric,
                        r->x.maximize ? "max" : "min");
    free(metric);
    free(mode);
    tp__store_close(old);
    return rc;
}

int tp__run_fork(tp_run_t *r, const char *from, tp_error_t *err) {
    tp_store_t *old = NULL;
    int rc = tp__store_open(from, TP_STORE_READONLY, &old, err);
    if (rc) return rc;
    tp_store_t *s = tp__journal_store(&r->journal);
    seeding_t a = {.r = r, .to = s, .from = from};
    char note[4400];
    rc = tp__store_begin(s) ? -EIO : 0;
    if (rc == 0) rc = tp__store_trials(old, seed_row, &a);
    snprintf(note, sizeof note, "seeded %d trial(s) from %s; %d outside the new space", a.seeded,
             from, a.outside);
    if (rc || a.failed || tp__store_meta_set(s, "forked_from", from) ||
        tp__store_event(s, -1, 0, "forked", note, tp__wall_s()) || tp__store_commit(s))
        rc = tp__errorf(err, -EIO, "cannot seed %s from %s", r->dir, from);
    else
        tp__log(TP_LOG_INFO, "%s: %s", r->dir, note);
    tp__store_close(old);
    return rc;
}
