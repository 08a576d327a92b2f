/* reallocation: the run's side of reallocation and of the deadline's end
 * (`deadline:`, `reallocation:`; docs/deadline.md for the policy,
 * docs/elastic.md for resizes; deadline.c tells the scheduler the deadline).
 *
 * - Reallocation: while GPUs are free (a trial ended and nothing new took its
 *   GPUs), the pure policy tp__realloc_plan decides which running elastic
 *   trials grow, fed with each one's measured scaling curve, measured restart
 *   cost, remaining steps, latest metric and last resize (for the cooldown);
 *   each decision is carried out as a resize (elastic.c), journaled with the
 *   policy's why. One plan per node: an elastic trial never spans nodes.
 * - At the deadline (measured from the experiment's creation, so a resumed
 *   run keeps it): running trials are asked to checkpoint and report (a pause
 *   request, not a kill; `stop_grace` still applies to one that ignores it),
 *   no new attempt starts, each of them ends as stopped with its last report
 *   and its checkpoint directory journaled (event `checkpoint`), and the run
 *   ends naming the best trial with the path of its checkpoint. */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "run/orchestrator_internal.h"
#include "run/run.h"
#include "search/realloc.h"

#define PLAN_PERIOD_S 2.0 /* free GPUs are offered to running trials at most this often */
#define MAX_RESIZES 64    /* decisions taken from one plan */

int tp__deadline_on(const tp_run_t *r) {
    return r->x.deadline_s > 0;
}

int tp__deadline_hit(const tp_run_t *r) {
    return r->dl.hit;
}

void tp__deadline_gpus_freed(tp_run_t *r) {
    r->dl.freed = 1;
}

const char *tp__deadline_final(const tp_run_t *r) {
    return r->dl.final;
}

/* Journal t's checkpoint directory (event `checkpoint`): where the model it
 * ended with is, for `best` and `trials`. */
static void journal_checkpoint(tp_run_t *r, const trial_t *t, const char *why) {
    char path[4400], detail[4600];
    tp__run_checkpoint_dir(r, t, path, sizeof path);
    snprintf(detail, sizeof detail, "%s", path);
    tp__journal_ok(&r->journal,
                   tp__store_event(tp__journal_tx(&r->journal), t->id, t->attempts, "checkpoint",
                                   detail, tp__wall_s()),
                   "recording a checkpoint");
    tp__log(TP_LOG_INFO, "trial %lld: %s; its checkpoint: %s", (long long)t->id, why, path);
}

/* ---- the deadline ---------------------------------------------------------------- */

static void reach(uv_timer_t *h) {
    tp_run_t *r = h->data;
    if (r->dl.hit || r->finished) return;
    r->dl.hit = 1;
    int running = tp__trials_in(&r->trials, TP_TRIAL_RUNNING);
    char d[32], detail[300];
    tp__format_duration(r->x.deadline_s, d, sizeof d);
    snprintf(detail, sizeof detail,
             "deadline %s reached: %d running trial(s) asked to checkpoint and report; no new "
             "attempt starts",
             d, running);
    tp__log(TP_LOG_INFO, "%s", detail);
    tp__journal_ok(
        &r->journal,
        tp__store_event(tp__journal_tx(&r->journal), -1, 0, "deadline", detail, tp__wall_s()),
        "recording the deadline");
    tp__journal_commit(&r->journal); /* journal, then act */
    for (size_t i = 0; i < tp__trials_n(&r->trials); i++) {
        trial_t *t = tp__trials_get(&r->trials, (int64_t)i);
        if (t && t->state == TP_TRIAL_RUNNING) tp__run_send_control(r, t, "pause", "deadline");
    }
}

void tp__deadline_arm(tp_run_t *r) {
    if (!tp__deadline_on(r) || r->deadline_at <= 0) return;
    double left = r->deadline_at - tp__clock_wall(&r->clock);
    uv_timer_init(&r->loop, &r->dl.timer);
    r->dl.timer.data = r;
    r->dl.armed = 1;
    if (tp__clock_virtual(&r->clock) && left > 0)
        return; /* reached when the reports move the clock there */
    uv_timer_start(&r->dl.timer, reach, left > 0 ? (uint64_t)(left * 1000.0) : 0, 0);
}

void tp__deadline_clock_moved(tp_run_t *r) {
    if (!r->dl.armed || r->dl.hit || !tp__clock_virtual(&r->clock) ||
        uv_is_active((uv_handle_t *)&r->dl.timer) || tp__clock_wall(&r->clock) < r->deadline_at)
        return;
    uv_timer_start(&r->dl.timer, reach, 0, 0); /* in the loop's next turn, as a timer would */
}

int tp__deadline_ended(tp_run_t *r, trial_t *t, const char *status, char *detail, size_t n) {
    if (!r->dl.hit) return 0;
    if (strcmp(status, "paused") == 0) {
        snprintf(detail, n, "deadline: checkpointed and reported at step %lld",
                 (long long)(t->step == TP_STORE_NO_STEP ? 0 : t->step));
    } else {
        snprintf(detail, n,
                 "deadline: did not checkpoint within stop_grace; stopped at step "
                 "%lld (its last checkpoint is kept)",
                 (long long)(t->step == TP_STORE_NO_STEP ? 0 : t->step));
    }
    journal_checkpoint(r, t, detail);
    return 1;
}

void tp__deadline_finish(tp_run_t *r) {
    char *line = r->dl.final;
    size_t n = sizeof r->dl.final;
    line[0] = 0;
    if (!tp__deadline_on(r)) return;
    const trial_t *b = tp__run_best_trial(r);
    if (!b || b->id < 0) {
        snprintf(line, n, "best model at the deadline: none (no trial reported a value)");
        return;
    }
    char path[4400];
    tp__run_checkpoint_dir(r, b, path, sizeof path);
    struct stat st;
    int local =
        r->x.cluster.kind == TP_CLUSTER_LOCAL || r->x.cluster.shared || r->x.checkpoint_root;
    const char *note = local && stat(path, &st) != 0 ? " (the trial saved none there)" : "";
    snprintf(line, n, "best model at the deadline: trial %lld, checkpoint %s%s", (long long)b->id,
             path, note);
    if (b->state != TP_TRIAL_STOPPED || !strstr(b->job.why, "deadline"))
        journal_checkpoint(r, b, "the best model at the deadline"); /* `best` names it too */
    json_t *o = json_pack("{s:I, s:s}", "trial", (json_int_t)b->id, "checkpoint", path);
    char *text = json_dumps(o, JSON_COMPACT);
    tp__journal_ok(&r->journal,
                   tp__store_meta_set(tp__journal_tx(&r->journal), "best_checkpoint", text),
                   "recording the best model's checkpoint");
    free(text);
    json_decref(o);
}

/* ---- reallocation ------------------------------------------------------------------ */

/* The policy's view of running elastic trial t on node `node` at `now`:
 * 0, or -1 when it cannot be judged (no remaining work known). */
static int realloc_view(const tp_run_t *r, const trial_t *t, double now, tp_realloc_trial_t *v) {
    double left;
    int64_t step = t->step == TP_STORE_NO_STEP ? 0 : t->step;
    int q;
    double per = tp__scaling_step_s(tp__elastic_scaling(t), t->gpus, &q);
    if (t->job.budget > 0)
        left = t->job.budget - (double)step;
    else if (tp__deadline_on(r) && per > 0)
        left = (r->deadline_at - now) / per; /* it would run to the deadline */
    else
        return -1;
    if (tp__deadline_on(r) && per > 0 && (r->deadline_at - now) / per < left)
        left = (r->deadline_at - now) / per; /* nothing counts past the deadline */
    double score = t->has_value ? (r->x.maximize ? t->value : -t->value) : -INFINITY;
    *v = (tp_realloc_trial_t){
        .trial = t->id,
        .gpus = t->gpus,
        .gpus_min = r->x.res.gpus,
        .gpus_max = r->x.res.gpus_max,
        .remaining_steps = left > 0 ? left : 0,
        .score = score,
        .scaling = tp__elastic_scaling(t),
        .restart_s = tp__elastic_restart_s(t),
        .last_resize_s = tp__elastic_last_resize(t) > 0 ? tp__elastic_last_resize(t) : NAN};
    return 0;
}

/* One node: offer its free GPUs to the elastic trials running there. */
static void plan_node(tp_run_t *r, size_t node, int free_gpus, double now,
                      tp_realloc_trial_t *view) {
    size_t m = 0;
    for (size_t i = 0; i < tp__trials_n(&r->trials); i++) {
        trial_t *t = tp__trials_get(&r->trials, (int64_t)i);
        if (!t || t->state != TP_TRIAL_RUNNING || !t->where.placed || t->where.node != node ||
            t->current.stop_sent || tp__elastic_resize_to(t))
            continue;
        if (realloc_view(r, t, now, &view[m]) == 0) m++;
    }
    if (m == 0) return;
    tp_resize_t out[MAX_RESIZES];
    size_t k = tp__realloc_plan(r->x.realloc.policy, view, m, free_gpus, now, &r->x.realloc, out,
                                MAX_RESIZES);
    for (size_t i = 0; i < k && i < MAX_RESIZES; i++) {
        trial_t *t = tp__trials_get(&r->trials, out[i].trial);
        char msg[400];
        if (t && tp__elastic_resize(r, t, out[i].gpus, out[i].why, msg, sizeof msg) != 0)
            tp__log(TP_LOG_WARN, "reallocation: %s", msg);
    }
}

void tp__deadline_realloc(tp_run_t *r) {
    if (!tp__elastic_on(r) || !(r->x.realloc_given || tp__deadline_on(r)) || r->dl.hit ||
        tp__elastic_resizing(r) || r->stopping || tp__agents_shutting_down(r) ||
        tp__journal_broken(&r->journal))
        return;
    double mono = tp__mono_s();
    if (!r->dl.freed && mono - r->dl.planned < PLAN_PERIOD_S) return;
    r->dl.freed = 0;
    r->dl.planned = mono;
    int running = tp__trials_in(&r->trials, TP_TRIAL_RUNNING);
    if (running == 0) return;
    tp_realloc_trial_t *view = tp__xcalloc((size_t)running, sizeof *view);
    double now = tp__clock_wall(&r->clock); /* the deadline's time */
    for (size_t node = 0; node < tp__placement_cluster(r)->nnodes; node++) {
        int free_gpus = tp__placement_free_gpus(r, node);
        if (free_gpus > 0) plan_node(r, node, free_gpus, now, view);
    }
    free(view);
}
