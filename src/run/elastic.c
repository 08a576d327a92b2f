/* elastic: trials that run on a varying number of GPUs (`resources: {gpus:
 * {min, max}}`, docs/elastic.md).
 *
 * - An elastic trial starts at its min (or what the placer can give, never
 *   below min) and runs one process per GPU it holds, with the multi-GPU
 *   environment contract (WORLD_SIZE, RANK, LOCAL_RANK, ..., MASTER_ADDR,
 *   MASTER_PORT; CUDA_VISIBLE_DEVICES naming its k GPUs).
 * - A resize (tp__elastic_resize) is journaled as a decision of kind
 *   `resize` with its why-text, then the attempt is asked to pause (the
 *   control line / checkpoint signal of docs/checkpoints.md). When it exits,
 *   it goes running -> pending (requeue `resize`, gpus_want = the new count)
 *   and is placed again at once: nothing else starts while a resize is under
 *   way, so the GPUs it gives up or waits for stay free for it.
 * - Measured, never assumed: seconds per step at each GPU count from its
 *   report steps and their arrival times (the time before the first step
 *   report of an attempt is start-up, not a step), and the restart cost from
 *   the pause request to the first report after the relaunch, less the steps
 *   that report is past the step the attempt resumed from, at the step time
 *   measured at the next report (until a resize has measured one: the
 *   start-up of an attempt, launch to first report, less its steps). Both are
 *   journaled (events `scaling`, a snapshot of the whole curve, and
 *   `resize-done`), and a resumed run reads the last snapshot back as it was. */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "run/orchestrator_internal.h"
#include "run/run.h"

void tp__elastic_trial_init(trial_t *t) {
    t->elastic.restart_s = NAN;
    tp__scaling_init(&t->elastic.scaling);
    t->elastic.mark_step = TP_STORE_NO_STEP;
}

int tp__elastic_want(const trial_t *t) {
    return t->elastic.gpus_want;
}
void tp__elastic_set_want(trial_t *t, int gpus) {
    t->elastic.gpus_want = gpus;
}
int tp__elastic_resize_to(const trial_t *t) {
    return t->elastic.resize_to;
}
double tp__elastic_restart_s(const trial_t *t) {
    return t->elastic.restart_s;
}
double tp__elastic_last_resize(const trial_t *t) {
    return t->elastic.last_resize;
}
const tp_scaling_t *tp__elastic_scaling(const trial_t *t) {
    return &t->elastic.scaling;
}

int tp__elastic_on(const tp_run_t *r) {
    return r->x.res.gpus_max > 0;
}

int tp__elastic_resizing(const tp_run_t *r) {
    return r->el.resizing;
}

size_t tp__elastic_pauses_queued(const tp_run_t *r) {
    return r->el.npauses;
}

int tp__elastic_gpus(const tp_run_t *r, const trial_t *t) {
    if (!tp__elastic_on(r) || t->elastic.gpus_want <= 0) return r->x.res.gpus;
    return t->elastic.gpus_want;
}

/* ---- the measured curve --------------------------------------------------------- */

#define MAX_STEPS_ADDED 100000 /* samples one pair of reports adds at most */

/* t's curve and restart cost as JSON: {"gpus", "want", "step_s": {"k": s},
 * "samples": {"k": n}, "restart_s", "last_resize"[, "restart_rough": true]}. */
static json_t *snapshot_json(const trial_t *t) {
    json_t *step = json_object(), *samples = json_object();
    for (int k = 1; k <= TP_SCALING_MAX_GPUS; k++) {
        if (!t->elastic.scaling.samples[k]) continue;
        char key[8];
        snprintf(key, sizeof key, "%d", k);
        json_object_set_new(step, key, json_real(t->elastic.scaling.step_s[k]));
        json_object_set_new(samples, key, json_integer(t->elastic.scaling.samples[k]));
    }
    json_t *o = json_pack("{s:i, s:i, s:o, s:o}", "gpus", t->gpus, "want", t->elastic.gpus_want,
                          "step_s", step, "samples", samples);
    json_object_set_new(o, "restart_s",
                        isnan(t->elastic.restart_s) ? json_null()
                                                    : json_real(t->elastic.restart_s));
    json_object_set_new(o, "last_resize", json_real(t->elastic.last_resize));
    if (t->elastic.restart_rough) json_object_set_new(o, "restart_rough", json_true());
    return o;
}

/* Journal t's curve as it is now (event `scaling` of the current attempt). */
static void journal_curve(tp_run_t *r, const trial_t *t) {
    json_t *o = snapshot_json(t);
    char *text = json_dumps(o, JSON_COMPACT);
    tp__journal_ok(&r->journal,
                   tp__store_event(tp__journal_tx(&r->journal), t->id, t->attempts, "scaling", text,
                                   tp__wall_s()),
                   "recording a measured scaling curve");
    free(text);
    json_decref(o);
}

/* Whether a power of two lies in (before, after]. */
static int crossed_power_of_two(uint32_t before, uint32_t after) {
    for (uint64_t p = 1; p <= after; p <<= 1)
        if (p > before) return 1;
    return 0;
}

void tp__elastic_attempt(tp_run_t *r, trial_t *t) {
    t->gpus = (int)t->where.ngpus;
    t->procs = tp__elastic_on(r) ? (t->gpus > 0 ? t->gpus : 1) : r->x.res.procs_per_node;
    t->elastic.mark_step = TP_STORE_NO_STEP;
    t->elastic.mark_at = 0;
}

/* The restart cost being measured is known: restart_raw less `less` seconds
 * (the steps its first report had made, at step_s each; 0: none known). A
 * resize's is journaled (`resize-done`, and the curve). */
static void restart_measured(tp_run_t *r, trial_t *t, double step_s) {
    double less = step_s > 0 ? (double)t->elastic.restart_ahead * step_s : 0;
    t->elastic.restart_s = t->elastic.restart_raw - less > 0 ? t->elastic.restart_raw - less : 0;
    t->elastic.restart_rough = !(step_s > 0) && t->elastic.restart_ahead > 0;
    t->elastic.restart_pending = 0;
    if (!t->elastic.restart_resized) return;
    t->elastic.restart_resized = 0;
    char detail[300];
    if (step_s > 0)
        snprintf(detail, sizeof detail,
                 "now on %d GPU(s); restart cost %.3f s (pause asked -> first report %.3f s, "
                 "%lld step(s) past the checkpoint at %.3f s each taken off)",
                 t->gpus, t->elastic.restart_s, t->elastic.restart_raw,
                 (long long)t->elastic.restart_ahead, step_s);
    else
        snprintf(detail, sizeof detail,
                 "now on %d GPU(s); restart cost %.3f s (pause asked -> first report)", t->gpus,
                 t->elastic.restart_s);
    tp__journal_ok(&r->journal,
                   tp__store_event(tp__journal_tx(&r->journal), t->id, t->attempts, "resize-done",
                                   detail, tp__wall_s()),
                   "recording a restart cost");
    journal_curve(r, t);
}

void tp__elastic_on_report(tp_run_t *r, trial_t *t, int64_t step) {
    double now = tp__mono_s();
    int resized =
        t->elastic.resize_asked > 0 && !t->elastic.resize_to; /* the relaunch's first report */
    if (resized ||
        (t->current.seq == 1 && (isnan(t->elastic.restart_s) || t->elastic.restart_rough) &&
         t->current.launch_sent > 0)) {
        /* Its first report came after the restart and the steps it made since the
         * step it resumed from (its checkpoint's): those steps are work, not cost,
         * taken off once the next report measures their time. Until a resize has
         * measured one, the restart cost is an attempt's start-up (measured again
         * by the next attempt while it is rough: an attempt of one report). */
        t->elastic.restart_raw =
            resized ? tp__wall_s() - t->elastic.resize_asked : now - t->current.launch_sent;
        t->elastic.restart_resized = resized;
        t->elastic.resize_asked = 0;
        int64_t from = t->step != TP_STORE_NO_STEP ? t->step : (int64_t)t->job.from_budget;
        t->elastic.restart_ahead = step != TP_STORE_NO_STEP ? step - from : 0;
        t->elastic.restart_pending = 1;
        if (step == TP_STORE_NO_STEP) restart_measured(r, t, 0);
    } else if (t->elastic.restart_pending && step != TP_STORE_NO_STEP &&
               t->elastic.mark_step != TP_STORE_NO_STEP && step > t->elastic.mark_step) {
        restart_measured(r, t, (now - t->elastic.mark_at) / (double)(step - t->elastic.mark_step));
    }
    if (step == TP_STORE_NO_STEP) return;
    /* A Fluid fraction shares its GPU with its group's others: its step is
     * what they leave it, no point of its GPU curve (groups.c scales it). */
    int shared = tp__groups_member(r, t) && tp__placement_compute(t) < 1 - 1e-9;
    if (t->elastic.mark_step != TP_STORE_NO_STEP && step > t->elastic.mark_step && t->gpus > 0 &&
        !shared) {
        uint32_t steps = (uint32_t)(step - t->elastic.mark_step);
        uint32_t before = t->gpus <= TP_SCALING_MAX_GPUS ? t->elastic.scaling.samples[t->gpus] : 0;
        /* One sample per step: reports every k steps weigh k steps. */
        for (uint32_t i = 0; i < steps && i < MAX_STEPS_ADDED; i++)
            tp__scaling_add(&t->elastic.scaling, t->gpus, (now - t->elastic.mark_at) / steps);
        /* Journaled as it firms up (after 1, 2, 4, 8, ... steps at this count)
         * and at the attempt's end: a crash loses little, the rows stay few. */
        if (tp__elastic_on(r) && crossed_power_of_two(before, before + steps)) journal_curve(r, t);
    }
    if (t->elastic.mark_step == TP_STORE_NO_STEP || step > t->elastic.mark_step) {
        t->elastic.mark_step = step;
        t->elastic.mark_at = now;
    }
}

/* ---- resizing ---------------------------------------------------------------------- */

/* Journal the `resize` decision (detail) and ask t to checkpoint once
 * committed: its next attempt runs on gpus GPUs. */
static void ask_restart(tp_run_t *r, trial_t *t, int gpus, const char *detail) {
    tp__run_decision(r, "resize", t, 1, NAN, detail, NULL);
    t->elastic.resize_to = gpus;
    t->elastic.resize_asked = tp__wall_s();
    r->el.resizing++;
    r->el.pauses =
        tp__xgrow(r->el.pauses, &r->el.cappauses, r->el.npauses + 1, sizeof *r->el.pauses, 8);
    r->el.pauses[r->el.npauses++] = t->id;
    tp__log(TP_LOG_INFO, "trial %lld: %s", (long long)t->id, detail);
}

int tp__elastic_resize(tp_run_t *r, trial_t *t, int gpus, const char *why, char *msg, size_t n) {
    if (!tp__elastic_on(r))
        return snprintf(msg, n, "trial %lld is not elastic (resources: {gpus: {min, max}})",
                        (long long)t->id),
               -EINVAL;
    if (t->state != TP_TRIAL_RUNNING)
        return snprintf(msg, n, "trial %lld is %s, not running", (long long)t->id,
                        tp__trial_state_name(t->state)),
               -EINVAL;
    if (gpus < r->x.res.gpus || gpus > r->x.res.gpus_max)
        return snprintf(msg, n, "trial %lld may have %d to %d GPUs, not %d", (long long)t->id,
                        r->x.res.gpus, r->x.res.gpus_max, gpus),
               -ERANGE;
    if (t->elastic.resize_to || t->current.stop_sent)
        return snprintf(msg, n, "trial %lld is already being paused or resized", (long long)t->id),
               -EBUSY;
    if (gpus == t->gpus)
        return snprintf(msg, n, "trial %lld already runs on %d GPU(s)", (long long)t->id, gpus),
               -EALREADY;
    char detail[400];
    snprintf(detail, sizeof detail, "resize %d -> %d GPUs: %s", t->gpus, gpus, why);
    ask_restart(r, t, gpus, detail);
    snprintf(msg, n, "trial %lld: %s; it is asked to checkpoint and runs again on %d GPU(s)",
             (long long)t->id, detail, gpus);
    return 0;
}

void tp__elastic_act(tp_run_t *r) {
    for (size_t i = 0; i < r->el.npauses; i++) {
        trial_t *t = tp__trials_get(&r->trials, r->el.pauses[i]);
        if (t && t->state == TP_TRIAL_RUNNING && t->elastic.resize_to)
            tp__run_send_control(r, t, "pause", "resize");
    }
    r->el.npauses = 0;
}

tp_requeue_t tp__elastic_ended(tp_run_t *r, trial_t *t, int interrupted, char *detail, size_t n) {
    tp_requeue_t how = TP_REQUEUE_INTERRUPTED;
    if (t->elastic.restart_pending) restart_measured(r, t, 0); /* no second report: as measured */
    if (t->elastic.resize_to) {
        r->el.resizing--;
        if (interrupted) {
            snprintf(detail, n, "resize: checkpointed on %d GPU(s), runs again on %d", t->gpus,
                     t->elastic.resize_to);
            t->elastic.gpus_want = t->elastic.resize_to;
            t->elastic.last_resize = tp__wall_s();
            how = TP_REQUEUE_RESIZE;
        } else {
            t->elastic.resize_asked = 0; /* it ended before it could pause: no resize */
        }
        t->elastic.resize_to = 0;
    }
    /* With its new count: a crash before the relaunch still resumes the resize. */
    if (tp__elastic_on(r)) journal_curve(r, t);
    return how;
}

size_t tp__elastic_place_fewer(tp_run_t *r, trial_t **batch, size_t n) {
    size_t placed = 0;
    if (!tp__elastic_on(r)) return 0;
    for (size_t i = 0; i < n; i++) {
        trial_t *t = batch[i];
        if (t->where.placed || t->state == TP_TRIAL_PAUSED) continue;
        int want = tp__elastic_gpus(r, t);
        while (!t->where.placed && want > r->x.res.gpus) {
            t->elastic.gpus_want = --want;
            placed += tp__placement_place(r, &t, 1);
        }
    }
    return placed;
}

/* ---- resume ------------------------------------------------------------------------ */

void tp__elastic_resume(tp_run_t *r) {
    if (!tp__elastic_on(r)) return;
    for (size_t i = 0; i < tp__trials_n(&r->trials); i++) {
        trial_t *t = tp__trials_get(&r->trials, (int64_t)i);
        char *curve;
        if (!t) continue;
        tp__journal_ok(
            &r->journal,
            tp__store_last_event(tp__journal_store(&r->journal), t->id, "scaling", &curve),
            "reading a measured scaling curve");
        json_t *o = curve ? json_loads(curve, 0, NULL) : NULL;
        free(curve);
        if (!o) continue;
        const char *key;
        json_t *v;
        json_object_foreach(json_object_get(o, "step_s"), key, v) {
            int k = atoi(key);
            json_t *s = json_object_get(json_object_get(o, "samples"), key);
            if (k < 1 || k > TP_SCALING_MAX_GPUS || !json_is_integer(s)) continue;
            t->elastic.scaling.step_s[k] = json_number_value(v);
            t->elastic.scaling.samples[k] = (uint32_t)json_integer_value(s);
        }
        t->gpus = (int)json_integer_value(json_object_get(o, "gpus"));
        t->elastic.gpus_want = (int)json_integer_value(json_object_get(o, "want"));
        json_t *rs = json_object_get(o, "restart_s");
        t->elastic.restart_s = json_is_number(rs) ? json_number_value(rs) : NAN;
        t->elastic.restart_rough = json_is_true(json_object_get(o, "restart_rough"));
        t->elastic.last_resize = json_number_value(json_object_get(o, "last_resize"));
        json_decref(o);
    }
}

/* ---- `tunepack resize TRIAL GPUS` ----------------------------------------------------- */

int tp__elastic_request(tp_run_t *r, const json_t *req, char *msg, size_t n) {
    json_t *id = json_object_get(req, "trial"), *gpus = json_object_get(req, "gpus");
    if (!json_is_integer(id) || !json_is_integer(gpus))
        return snprintf(msg, n, "a resize request needs \"trial\" and \"gpus\" (integers)"),
               -EINVAL;
    trial_t *t = tp__trials_get(&r->trials, json_integer_value(id));
    if (!t)
        return snprintf(msg, n, "no trial %lld in this experiment",
                        (long long)json_integer_value(id)),
               -ENOENT;
    return tp__elastic_resize(r, t, (int)json_integer_value(gpus), "asked by tunepack resize", msg,
                              n);
}

void tp__elastic_free(tp_run_t *r) {
    free(r->el.pauses);
    memset(&r->el, 0, sizeof r->el);
}
