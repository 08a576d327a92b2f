/* orchestrator: the event loop of `tunepack run`.
 *
 * One turn of the loop: message callbacks (messages.c) update trials
 * (through the state machine of trial_state.c, which journals each change
 * into the open transaction); the prepare callback (pump) then fills free
 * slots, commits, and only after the commit sends what was decided
 * (journal, then act). */
#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <uv.h>

#include "config/config.h"
#include "run/orchestrator_internal.h"
#include "run/run.h"
#include "search/search.h"
#include "search/surrogate.h"
#include "store/store.h"

/* Better by the metric's mode; NaN is never better. */
int tp__run_better(const tp_run_t *r, double a, double b) {
    if (isnan(a)) return 0;
    if (isnan(b)) return 1;
    return r->x.maximize ? a > b : a < b;
}

const trial_t *tp__run_best_trial(const tp_run_t *r) {
    if (!r->has_best) return NULL;
    if (r->best_id >= 0) return tp__trials_get(&r->trials, r->best_id);
    for (size_t i = 0; i < r->nseeded; i++)
        if (r->seeded[i]->id == r->best_id) return r->seeded[i];
    return NULL;
}

void tp__note_best(tp_run_t *r, const trial_t *t) {
    if (!tp__rank_competes(tp__trial_state_name(t->state), t->has_value)) return;
    if (!tp__rank_feasible_of(r->x.constraints, r->x.nconstraints,
                              t->last.len ? t->last.data : NULL))
        return;
    tp_rank_key_t k = {.budget = t->job.budget, .value = t->value};
    int64_t source; /* under surrogate: a target ranks above every surrogate */
    int target = tp__surrogate_kind(r->sched, t->id, &source) == TP_KIND_TARGET;
    if (tp__run_best_trial(r) &&
        (target < r->best_target ||
         (target == r->best_target && !tp__rank_beats(&k, &r->best, r->x.maximize))))
        return;
    r->best_target = target;
    r->best_id = t->id;
    r->has_best = 1;
    r->best = k;
    r->best_rung = t->job.rung;
    r->best_changed = 1;
}

/* ---- launching ------------------------------------------------------------ */
static void env_name(const char *param, char *out, size_t n) {
    int k = snprintf(out, n, "TUNEPACK_PARAM_");
    for (const char *p = param; *p && (size_t)k + 1 < n; p++)
        out[k++] = (char)((*p >= 'a' && *p <= 'z')                                 ? *p - 32
                          : ((*p >= 'A' && *p <= 'Z') || (*p >= '0' && *p <= '9')) ? *p
                                                                                   : '_');
    out[k] = 0;
}
/* The torchrun-style contract of one process of a multi-process attempt:
 * its rank among all, its place on its node, and where rank 0 listens. */
static void rank_env(const tp_run_t *r, const trial_t *t, int rank, json_t *env) {
    int procs = t->procs;
    char v[32];
#define SET_INT(name, value)                                                                       \
    do {                                                                                           \
        snprintf(v, sizeof v, "%d", (value));                                                      \
        json_object_set_new(env, name, json_string(v));                                            \
    } while (0)
    SET_INT("WORLD_SIZE", t->ranks.n);
    SET_INT("RANK", rank);
    SET_INT("LOCAL_RANK", rank % procs);
    SET_INT("LOCAL_WORLD_SIZE", procs);
    SET_INT("GROUP_RANK", rank / procs);
    SET_INT("NODE_RANK", rank / procs);
    if (rank > 0) SET_INT("MASTER_PORT", t->ranks.master_port);
#undef SET_INT
    json_object_set_new(env, "MASTER_ADDR", json_string(tp__placement_host(r, t->where.node)));
}

/* Which names of the agent's environment trials inherit (launch message's
 * "env_passthrough"): `env_passthrough` if given, else everything on this
 * machine and TP_PASSTHROUGH_REMOTE on other nodes. NULL: everything. */
static json_t *passthrough(const tp_run_t *r) {
    static const char *const remote[] = {TP_PASSTHROUGH_REMOTE};
    const char *const *names = (const char *const *)r->x.env_passthrough;
    size_t n = r->x.nenv_passthrough;
    if (!names && r->x.cluster.kind == TP_CLUSTER_LOCAL) return NULL;
    if (!names) {
        names = remote;
        n = TP_ARRAY_LEN(remote);
    }
    json_t *a = json_array();
    for (size_t i = 0; i < n; i++)
        json_array_append_new(a, json_string(names[i]));
    return a;
}

/* Without shared storage the node keeps the trial's files in a spool of
 * its own, and streams the logs back to DIR. */
static int streams_logs(const tp_run_t *r) {
    return r->x.cluster.kind != TP_CLUSTER_LOCAL && !r->x.cluster.shared;
}

void tp__run_trial_home(const tp_run_t *r, const trial_t *t, char *out, size_t n) {
    tp__trial_path(out, n, streams_logs(r) ? r->spool : r->dir, (long long)t->id, NULL);
}

void tp__run_checkpoint_dir(const tp_run_t *r, const trial_t *t, char *out, size_t n) {
    char home[4200];
    tp__run_trial_home(r, t, home, sizeof home);
    if (r->x.checkpoint_root) /* shared storage: a trial moved to another node resumes */
        snprintf(out, n, "%s/%s/%06lld", r->x.checkpoint_root, r->x.name, (long long)t->id);
    else
        snprintf(out, n, "%s/checkpoint", home);
}

/* See orchestrator_internal.h. */
int tp__run_send_launch(tp_run_t *r, trial_t *t, int rank) {
    char id[32], rdir[4400];
    snprintf(id, sizeof id, "%lld", (long long)t->id);
    int stream = streams_logs(r);
    char home[4200];
    tp__run_trial_home(r, t, home, sizeof home);
    /* Rank 0 is the trial; the others keep their logs beside it. */
    if (rank)
        snprintf(rdir, sizeof rdir, "%s/rank%d", home, rank);
    else
        snprintf(rdir, sizeof rdir, "%s", home);
    size_t shard = (size_t)(rank / t->procs);
    char budget[32] = "", ckpt[4400];
    if (r->x.budget_name) tp__fmt_double(t->job.budget, budget);
    tp__run_checkpoint_dir(r, t, ckpt, sizeof ckpt);
    tp_subst_extra_t extra = {
        .trial_id = id, .trial_dir = home, .budget_name = r->x.budget_name, .budget_value = budget};
    /* A fused process gets its configurations as JSON, and only the shape parameters,
     * which they share, as parameters of its own. */
    char *configs = tp__fuse_of(t) ? tp__fuse_configs_json(r, t) : NULL;
    json_t *params = t->params;
    if (configs) {
        extra.configs_json = configs;
        params = json_object();
        for (size_t i = 0; i < r->x.fuse.nshape; i++) {
            json_t *v = json_object_get(t->params, r->x.fuse.shape[i]);
            if (v) json_object_set(params, r->x.fuse.shape[i], v);
        }
    } else {
        json_incref(params);
    }
    tp_error_t serr = {0};
    json_t *argv = tp__substitute_argv(r->x.argv, r->x.argc, &r->x.space, params, &extra, &serr);
    if (!argv) {
        free(configs);
        json_decref(params);
        return tp__errorf(&r->err, -EINVAL, "trial %s: %s", id, serr.msg);
    }
    json_t *env = json_object();
    if (json_is_array(t->gpu_env))
        json_object_update(env, json_array_get(t->gpu_env, shard));
    else if (t->gpu_env)
        json_object_update(env, t->gpu_env);
    int ranked = t->ranks.n > 1 || tp__elastic_on(r); /* elastic: the contract at 1 GPU too */
    if (ranked) rank_env(r, t, rank, env);
    if (r->x.budget_name) json_object_set_new(env, "TUNEPACK_BUDGET", json_string(budget));
    if (configs) json_object_set_new(env, "TUNEPACK_CONFIGS_JSON", json_string(configs));
    free(configs);
    for (size_t i = 0; i < r->x.nenv; i++)
        json_object_set_new(env, r->x.env[i].name, json_string(r->x.env[i].value));
    const char *key;
    json_t *val;
    char *text = tp__xmalloc(TP_VALUE_MAX + 1);
    json_object_foreach(params, key, val) {
        char name[256];
        env_name(key, name, sizeof name);
        if (tp__value_text(val, text, TP_VALUE_MAX + 1) < 0) { /* never dropped silently */
            free(text);
            json_decref(argv);
            json_decref(env);
            json_decref(params);
            return tp__errorf(&r->err, -E2BIG,
                              "trial %s: the value of \"%s\" is longer than %d bytes, the most "
                              "its environment variable %s may carry",
                              id, key, TP_VALUE_MAX, name);
        }
        json_object_set_new(env, name, json_string(text));
    }
    free(text);
    json_t *m =
        json_pack("{s:s, s:I, s:i, s:o, s:o, s:s, s:s, s:O, s:f, s:f, s:I}", "type", "launch",
                  "trial", (json_int_t)t->id, "attempt", t->attempts, "argv", argv, "env", env,
                  "cwd", r->workdir, "dir", rdir, "params", params, "timeout_s", r->x.timeout_s,
                  "grace_s", r->x.grace_s, "log_limit", (json_int_t)r->x.log_limit);
    json_decref(params);
    json_object_set_new(m, "checkpoint_dir", json_string(ckpt));
    json_object_set_new(m, "dir_mode", json_integer(r->x.dir_mode));
    json_t *pass = passthrough(r);
    if (pass) json_object_set_new(m, "env_passthrough", pass);
    if (r->x.pause_signal) json_object_set_new(m, "pause_signal", json_integer(r->x.pause_signal));
    if (stream) json_object_set_new(m, "stream_logs", json_true());
    if (ranked) {
        json_object_set_new(m, "rank", json_integer(rank));
        if (rank == 0) json_object_set_new(m, "pick_master_port", json_true());
    }
    tp_error_t merr = {0};
    if (rank == 0 && /* what the store knows of it, in its folder (committed: it acts on it) */
        tp__rundir_mark(r->dir, t->id, t->attempts, r->experiment_id, r->x.dir_mode, &merr) != 0)
        tp__log(TP_LOG_WARN, "trial %s: %s", id, merr.msg);
    int rc = tp__agents_send(r, (int)tp__trial_shard(t, shard)->node, m);
    json_decref(m);
    if (rc == 0) t->ranks.live++;
    if (rank == 0) t->current.launch_sent = tp__mono_s();
    return rc;
}

/* See orchestrator_internal.h. The agent ends it after its grace either way. */
void tp__run_send_control(tp_run_t *r, trial_t *t, const char *type, const char *reason) {
    tp_fused_t *f = tp__fuse_of(t);
    if (t->current.stop_sent || (f && tp__fuse_stop_sent(f))) return;
    t->current.stop_sent = 1;
    int64_t id = t->id;
    int attempt = t->attempts;
    if (f) {
        tp__fuse_mark_stopped(f);
        id = tp__fuse_process_id(f);
        attempt = tp__fuse_attempt(f);
    }
    json_t *m =
        json_pack("{s:s, s:I, s:i}", "type", type, "trial", (json_int_t)id, "attempt", attempt);
    if (reason) json_object_set_new(m, "reason", json_string(reason));
    for (size_t k = 0; k < tp__trial_nshards(r, t); k++) /* every node of the attempt */
        tp__agents_send(r, (int)tp__trial_shard(t, k)->node, m);
    json_decref(m);
}

/* The search is over: trials still waiting for a promotion will not get
 * one; they end as stopped at the rung they reached. */
static void close_paused(tp_run_t *r) {
    for (size_t i = 0; i < tp__trials_n(&r->trials); i++) {
        trial_t *t = tp__trials_get(&r->trials, (int64_t)i);
        if (!t || t->state != TP_TRIAL_PAUSED) continue;
        char why[200];
        snprintf(why, sizeof why, "not promoted past rung %d (budget %g)", t->job.rung,
                 t->job.budget);
        if (strcmp(t->job.why, why) == 0) /* closed before, reopened by this run, not promoted */
            tp__trial_set_closed(&r->trials, t, 1);
        else
            tp__run_stop_paused(r, t, why);
    }
}

void tp__run_stop_paused(tp_run_t *r, trial_t *t, const char *why) {
    snprintf(t->job.why, sizeof t->job.why, "%s", why);
    tp_transition_t how = {.detail = t->job.why};
    tp__trial_set_state(&r->trials, t, TP_TRIAL_STOPPED, &how);
    tp__journal_ok(&r->journal,
                   tp__store_trial_progress(tp__journal_tx(&r->journal), t->id, t->job.rung,
                                            t->job.budget, t->job.why),
                   "closing a paused trial");
    tp__note_best(r, t);
    tp__view_attempt_ended(r, t, TP_REQUEUE_NONE, t->job.why, 0);
}

void tp__run_decision(tp_run_t *r, const char *kind, const trial_t *t, int ok, double value,
                      const char *detail, const char *objectives) {
    tp__run_decision_at(r, tp__wall_s(), kind, t, ok, value, detail, objectives);
}

void tp__run_decision_at(tp_run_t *r, double at, const char *kind, const trial_t *t, int ok,
                         double value, const char *detail, const char *objectives) {
    tp__run_result_decision(r, at, kind, t, ok, value, detail, objectives, NULL);
}

void tp__run_result_decision(tp_run_t *r, double at, const char *kind, const trial_t *t, int ok,
                             double value, const char *detail, const char *objectives,
                             const char *constraints) {
    tp_decision_row_t d = {.at = at,
                           .kind = kind,
                           .trial = t->id,
                           .rung = t->job.rung,
                           .budget = t->job.budget,
                           .attempt = t->attempts,
                           .ok = ok,
                           .has_value = !isnan(value),
                           .value = value,
                           .detail = detail,
                           .objectives = objectives,
                           .constraints = constraints};
    tp_store_t *s = tp__journal_tx(&r->journal);
    if (tp__journal_ok(&r->journal, tp__store_decision(s, &d), "recording a decision") == 0)
        tp__journal_ok(&r->journal,
                       tp__store_trial_progress(s, t->id, t->job.rung, t->job.budget, detail),
                       "recording a decision");
}

/* The next trial to run: a pending one (lowest id first: retries and
 * interrupted jobs), else the scheduler's next job: a new trial (journaled
 * as added) or a paused one promoted. NULL when there is none now. */
trial_t *tp__run_next_candidate(tp_run_t *r) {
    trial_t *t = tp__trials_pop(&r->trials);
    if (t) return t;
    if (r->exhausted || r->sched_waiting) return NULL;
    tp_job_t job;
    double now;
    int rc;
    for (;;) { /* refusals (hypersched's admission) are journaled, then asked again */
        memset(&job, 0, sizeof job);
        now = tp__clock_wall(&r->clock);
        rc = r->sched->ops->next(r->sched, now, &job);
        if (rc != 1 || !job.refused) break;
        tp__deadline_refused(r, &job, now);
    }
    if (rc == 0) r->exhausted = 1;
    if (rc <= 0) {
        r->sched_waiting = rc < 0;
        return NULL;
    }
    t = tp__trials_get(&r->trials, job.trial);
    if (job.is_new) {
        if (t) { /* a scheduler bug: never reuse a number */
            json_decref(job.config);
            tp__log(TP_LOG_ERROR, "bug: the scheduler reused trial number %lld",
                    (long long)job.trial);
            r->exhausted = 1;
            return NULL;
        }
        t = tp__trials_add(&r->trials, job.trial, job.config, now);
        int64_t source;
        tp_trial_kind_t kind = tp__surrogate_kind(r->sched, job.trial, &source);
        if (kind != TP_KIND_PLAIN)
            tp__journal_ok(&r->journal,
                           tp__store_trial_kind(tp__journal_tx(&r->journal), job.trial,
                                                tp__trial_kind_name(kind), source),
                           "recording a trial's kind");
    } else if (!t || t->state != TP_TRIAL_PAUSED) {
        json_decref(job.config);
        tp__log(TP_LOG_ERROR, "bug: the scheduler promoted trial %lld, which is not waiting",
                (long long)job.trial);
        return NULL;
    } else if (job.exploit) { /* pbt: a new segment from the donor's checkpoint */
        tp__lineage_exploit(r, t, &job, now);
        json_decref(job.config);
    }
    t->job.from_budget = job.is_new ? 0 : job.exploit ? job.from : t->job.budget;
    t->job.rung = job.rung;
    t->job.budget = job.budget;
    tp__groups_new_job(t, job.group);
    t->job.fresh = 1;
    t->job.attempts = 0;
    if (job.why[0])
        snprintf(t->job.why, sizeof t->job.why, "%s", job.why);
    else if (job.is_new)
        snprintf(t->job.why, sizeof t->job.why, "new trial");
    else
        snprintf(t->job.why, sizeof t->job.why, "promoted to rung %d", job.rung);
    if (!job.why[0] && job.budget > 0) {
        size_t k = strlen(t->job.why);
        snprintf(t->job.why + k, sizeof t->job.why - k, " (budget %g)", job.budget);
    }
    tp__run_decision_at(r, now, "job", t, 1, NAN, t->job.why, NULL);
    return t;
}

static void queue_id(int64_t **v, size_t *n, size_t *cap, int64_t id) {
    *v = tp__xgrow(*v, cap, *n + 1, sizeof **v, 32);
    (*v)[(*n)++] = id;
}

void tp__run_queue_stop(tp_run_t *r, const trial_t *t) {
    queue_id(&r->stops, &r->nstops, &r->capstops, t->id);
}

void tp__run_start_attempt(tp_run_t *r, trial_t *t, int launch) {
    t->attempts++;
    t->job.attempts++;
    t->current.stop_sent = 0;
    if (t->job.fresh) {
        /* A new job: its reports start afresh. Another attempt at the same
         * job (a retry, or a rerun after an interruption that resumes from
         * the checkpoint) keeps what the job reported so far. */
        t->has_value = 0;
        t->value = t->best = NAN;
        t->step = TP_STORE_NO_STEP;
        t->job.fresh = 0;
    }
    t->current.seq = 0;
    t->current.garbage = 0;
    t->current.first_garbage[0] = 0;
    t->job.early_stopped = 0;
    tp__elastic_attempt(r, t);
    t->ranks.n = r->x.res.nodes * t->procs;
    t->ranks.live = 0;
    t->ranks.master_port = 0;
    json_decref(t->ranks.verdict);
    t->ranks.verdict = NULL;
    t->current.started = tp__mono_s();
    tp__deadline_attempt(r, t);
    tp__fuse_alone(t);
    tp__buf_reset(&t->last);
    if (tp__trial_set_state(&r->trials, t, TP_TRIAL_RUNNING, NULL) != 0) return;
    tp__trial_pace_restart(t);
    tp__placement_attempt(r, t);
    if (launch) queue_id(&r->launch, &r->nlaunch, &r->caplaunch, t->id);
}

void tp__run_put_back(tp_run_t *r, trial_t *t) {
    if (t->state == TP_TRIAL_PAUSED) /* promoted; waits for room */
        tp__trial_set_state(&r->trials, t, TP_TRIAL_PENDING,
                            &(tp_transition_t){.detail = "promoted; waits for room"});
    else
        tp__trials_push(&r->trials, t);
}

/* Fill free slots: take up to the free concurrency of candidates (per
 * node times the nodes, tp__nodes_concurrency), let the placement policy
 * decide where they go (no node beyond its own), start those placed and
 * keep the others pending until something ends. */
static void schedule(tp_run_t *r) {
    if (!tp__agents_ready(r) || r->stopping || tp__agents_shutting_down(r) ||
        !tp__placement_may_fit(r) || tp__journal_broken(&r->journal) || tp__elastic_resizing(r) ||
        tp__deadline_hit(r))
        return;
    int running = tp__fuse_slots_used(r), cap = tp__nodes_concurrency(r);
    size_t free_slots = running < cap ? (size_t)(cap - running) : 0;
    if (free_slots == 0) return;
    if (r->x.fuse.max) {
        double t0 = tp__mono_s();
        if (tp__fuse_schedule(r, free_slots))
            tp__samples_add(&r->round_ms, (tp__mono_s() - t0) * 1000.0);
        return;
    }
    if (r->capbatch < free_slots) {
        r->capbatch = free_slots;
        r->batch = tp__xrealloc(r->batch, free_slots * sizeof *r->batch);
    }
    size_t n = 0;
    trial_t *t;
    double t0 = tp__mono_s();
    while (n < free_slots && (t = tp__run_next_candidate(r)) != NULL)
        r->batch[n++] = t;
    if (n == 0) return;
    if (tp__placement_place(r, r->batch, n) < n) tp__elastic_place_fewer(r, r->batch, n);
    for (size_t i = 0; i < n; i++) {
        t = r->batch[i];
        if (t->where.placed)
            tp__run_start_attempt(r, t, 1);
        else
            tp__run_put_back(r, t);
    }
    tp__samples_add(&r->round_ms, (tp__mono_s() - t0) * 1000.0);
}

/* Nothing runs and nothing waits to run, yet the search waits for a job to
 * end before it says what comes next: no event can ever wake it, so say
 * why and stop (the trials keep their state; the next run resumes them).
 * Only a bug gets here: the scheduler counts a job as running that the run
 * has not. 1 when stalled. */
static int stalled(tp_run_t *r) {
    if (!r->sched_waiting || r->exhausted || tp__deadline_hit(r) ||
        tp__trials_in(&r->trials, TP_TRIAL_PENDING))
        return 0;
    tp__log(TP_LOG_ERROR,
            "no trial can make progress: the search waits for a job to end, but none is "
            "running and none is pending (%d paused). This is a bug in tunepack; the run "
            "stops here, keeping every trial as it is. Please report it with %s/tunepack.db",
            tp__trials_in(&r->trials, TP_TRIAL_PAUSED), r->dir);
    return 1;
}

/* The loop's turn: schedule, commit, then act on what was committed. */
static void pump(uv_prepare_t *h) {
    tp_run_t *r = h->data;
    if (r->finished) return;
    if (tp__journal_broken(&r->journal) && !r->stopping) {
        /* Journal, then act: with a journal that does not keep what is
         * decided, nothing more is started; running trials checkpoint. */
        r->stopping = 1;
        r->exit_code = TP_EXIT_STORE;
        for (size_t i = 0; i < tp__trials_n(&r->trials); i++) {
            trial_t *t = tp__trials_get(&r->trials, (int64_t)i);
            if (t && t->state == TP_TRIAL_RUNNING) tp__run_send_control(r, t, "pause", NULL);
        }
    }
    schedule(r);
    tp__deadline_realloc(r); /* GPUs still free go to running elastic trials */
    /* Commit before any action that depends on what was journaled; report
     * rows alone are committed in groups. */
    tp__journal_settle(&r->journal, r->nlaunch || r->nstops || tp__elastic_pauses_queued(r) ||
                                        r->stopping || tp__agents_shutting_down(r));
    tp__elastic_act(r);
    for (size_t i = 0; i < r->nstops; i++) {
        trial_t *t = tp__trials_get(&r->trials, r->stops[i]);
        if (t && t->state == TP_TRIAL_RUNNING && tp__fuse_of(t))
            tp__fuse_drop(r, t); /* the others of its process go on */
        else if (t && t->state == TP_TRIAL_RUNNING)
            tp__run_send_control(r, t, "stop", "early stop");
    }
    r->nstops = 0;
    for (size_t i = 0; i < r->nlaunch; i++) {
        trial_t *t = tp__trials_get(&r->trials, r->launch[i]);
        if (t && t->state == TP_TRIAL_RUNNING && tp__journal_broken(&r->journal)) {
            /* Never launched (the store did not keep its start): back to
             * pending, its place freed, so that the run can end. */
            if (tp__placement_ended(r, t)) tp__placement_left_group(r, t);
            tp__trial_set_state(&r->trials, t, TP_TRIAL_PENDING,
                                &(tp_transition_t){.detail = "not started: the store failed",
                                                   .requeue = TP_REQUEUE_INTERRUPTED});
        } else if (t && t->state == TP_TRIAL_RUNNING && tp__run_send_launch(r, t, 0) != 0) {
            tp__log(TP_LOG_ERROR, "%s", r->err.msg);
            r->exit_code = TP_EXIT_ERROR;
            r->stopping = 1;
        }
    }
    r->nlaunch = 0;
    int running = tp__trials_in(&r->trials, TP_TRIAL_RUNNING);
    if (!tp__agents_ready(r) || running) return;
    if (!r->stopping && stalled(r)) {
        r->stopping = 1;
        r->exit_code = TP_EXIT_ERROR;
    }
    if (r->stopping) {
        tp__agents_shutdown(r);
    } else if ((r->exhausted && tp__trials_queued(&r->trials) == 0) || tp__deadline_hit(r)) {
        close_paused(r);
        tp__agents_shutdown(r);
    }
}

void tp__orchestrator_on_agent_lost(tp_run_t *r, int node, const char *why) {
    /* Every attempt it ran is interrupted: back to pending, run again. */
    char detail[300];
    snprintf(detail, sizeof detail, "interrupted: agent lost (%s)", why);
    for (size_t i = 0; i < tp__trials_n(&r->trials); i++) {
        trial_t *t = tp__trials_get(&r->trials, (int64_t)i);
        if (!t || t->state != TP_TRIAL_RUNNING) continue;
        int there = 0;
        for (size_t k = 0; k < tp__trial_nshards(r, t); k++)
            there |= (int)tp__trial_shard(t, k)->node == node;
        if (!there) continue;
        if (t->ranks.n > 1) tp__run_send_control(r, t, "stop", "a node of the trial was lost");
        if (tp__placement_ended(r, t)) /* a profiling attempt gives its group back */
            tp__placement_left_group(r, t);
        tp__run_logs_close(t);
        tp_transition_t how = {.detail = detail, .requeue = TP_REQUEUE_INTERRUPTED};
        double ran = tp__mono_s() - t->current.started;
        tp__trial_set_state(&r->trials, t, TP_TRIAL_PENDING, &how);
        tp__view_attempt_ended(r, t, TP_REQUEUE_INTERRUPTED, detail, ran);
    }
    tp__placement_node_down(r, (size_t)node);
    char what[400];
    snprintf(what, sizeof what, "%s: %s", tp__agents_link(r, node)->name, why);
    tp__journal_ok(
        &r->journal,
        tp__store_event(tp__journal_tx(&r->journal), -1, 0, "agent-lost", what, tp__wall_s()),
        "recording a lost agent");
    tp__journal_commit(&r->journal);
}

/* ---- signals ------------------------------------------------------------------ */
/* Stop the run: running trials checkpoint and exit (pause); run the same
 * command again to resume. */
static void stop_run(tp_run_t *r) {
    r->stopping = 1;
    for (size_t i = 0; i < tp__trials_n(&r->trials); i++) {
        trial_t *t = tp__trials_get(&r->trials, (int64_t)i);
        if (t && t->state == TP_TRIAL_RUNNING) tp__run_send_control(r, t, "pause", NULL);
    }
}

/* why with every run of digits as one '#': failures that differ only in the
 * numbers they print (a parameter's value, a line count) are alike. */
static void failure_shape(const char *why, char *out, size_t n) {
    size_t k = 0;
    for (const char *p = why; *p && k + 1 < n; p++) {
        if (isdigit((unsigned char)*p)) {
            while (isdigit((unsigned char)p[1]) || (p[1] == '.' && isdigit((unsigned char)p[2])))
                p++;
            out[k++] = '#';
        } else {
            out[k++] = *p;
        }
    }
    out[k] = 0;
}

void tp__run_fail_fast(tp_run_t *r, const trial_t *t, const char *why) {
    if (r->ff_off || !r->x.fail_fast || r->stopping) return;
    char shape[sizeof r->ff_why];
    if (why) failure_shape(why, shape, sizeof shape);
    if (!why || (r->ff_failed && strcmp(shape, r->ff_why) != 0)) {
        r->ff_off = 1;
        return;
    }
    if (r->ff_failed++ == 0) snprintf(r->ff_why, sizeof r->ff_why, "%s", shape);
    if (r->ff_failed < r->x.fail_fast) return;
    tp__fprintf_escaped(/* why ends with what the trial said last: shown, never obeyed */
                        stderr, TP_ESC_LINE,
                        "tunepack: fail-fast: the first %d trials all failed the same way (trial "
                        "%lld: %s); "
                        "stopping before the others run. See `tunepack trials %s` for their logs; "
                        "fix it and "
                        "run again, or set fail_fast: false to run every trial anyway",
                        r->ff_failed, (long long)t->id, why, r->dir);
    r->exit_code = TP_EXIT_NO_TRIAL;
    tp__journal_ok(
        &r->journal,
        tp__store_event(tp__journal_tx(&r->journal), -1, 0, "fail-fast", why, tp__wall_s()),
        "recording a fail-fast stop");
    stop_run(r);
}

static void on_signal(uv_signal_t *h, int sig) {
    tp_run_t *r = h->data;
    if (r->stopping) {
        if (sig == SIGINT) fprintf(stderr, "\ntunepack: stopping now\n");
        tp__agents_shutdown(r);
        return;
    }
    if (r->exit_code == TP_EXIT_OK) r->exit_code = TP_EXIT_STOPPED;
    fprintf(stderr,
            "\ntunepack: stopping: running trials are asked to checkpoint and exit, "
            "and stopped after %gs; run the same command again to resume\n",
            r->x.grace_s);
    stop_run(r);
    if (!tp__agents_ready(r)) tp__agents_shutdown(r);
}

/* With TUNEPACK_STATS=FILE, what the run measured of itself, as JSON: the
 * scheduling rounds' and the agents' ping round trips' quantiles, and the
 * messages and report rows it took in (bench/cluster_load.py reads it). */
static void write_stats(tp_run_t *r) {
    const char *path = getenv("TUNEPACK_STATS");
    if (!path || !*path) return;
    json_t *o = json_pack(
        "{s:I, s:f, s:f, s:f, s:I, s:f, s:f, s:f, s:I, s:I, s:f, s:i, s:f, s:f, s:f}", "rounds",
        (json_int_t)r->round_ms.n, "round_p50_ms", tp__samples_quantile(&r->round_ms, 0.5),
        "round_p99_ms", tp__samples_quantile(&r->round_ms, 0.99), "round_max_ms",
        tp__samples_quantile(&r->round_ms, 1.0), "pings", (json_int_t)r->rtt_ms.n, "ping_p50_ms",
        tp__samples_quantile(&r->rtt_ms, 0.5), "ping_p99_ms",
        tp__samples_quantile(&r->rtt_ms, 0.99), "ping_max_ms",
        tp__samples_quantile(&r->rtt_ms, 1.0), "messages", (json_int_t)r->messages, "report_rows",
        (json_int_t)r->journal.metric_rows, "wall_s", tp__mono_s() - tp__view_t0(r), "agents",
        (int)tp__agents_n(r), "start_p50_ms", tp__samples_quantile(&r->start_ms, 0.5),
        "start_p99_ms", tp__samples_quantile(&r->start_ms, 0.99), "first_start_s",
        r->first_start_s);
    if (json_dump_file(o, path, JSON_COMPACT) != 0)
        tp__log(TP_LOG_WARN, "cannot write the run's figures to %s", path);
    json_decref(o);
}

/* ---- the end ------------------------------------------------------------------- */
static void close_walk(uv_handle_t *h, void *arg) {
    (void)arg;
    if (!uv_is_closing(h)) uv_close(h, NULL);
}

void tp__orchestrator_finish(tp_run_t *r) {
    if (r->finished) return;
    r->finished = 1;
    const char *state = r->stopping                     ? "stopped"
                        : r->exit_code == TP_EXIT_AGENT ? "failed"
                                                        : "finished";
    tp_store_t *s = tp__journal_tx(&r->journal);
    /* Attempts interrupted and not yet run again: the next run says so. */
    int waiting = 0;
    for (size_t i = 0; i < tp__trials_n(&r->trials); i++) {
        const trial_t *t = tp__trials_get(&r->trials, (int64_t)i);
        waiting += t && t->state == TP_TRIAL_PENDING && t->requeued == TP_REQUEUE_INTERRUPTED;
    }
    char nint[16];
    snprintf(nint, sizeof nint, "%d", waiting);
    tp__journal_ok(&r->journal, tp__store_meta_set(s, "interrupted", nint),
                   "recording the interrupted attempts");
    char at[32];
    snprintf(at, sizeof at, "%.3f", tp__wall_s());
    tp__journal_ok(&r->journal,
                   tp__store_meta_set(s, "state", state) || tp__store_meta_set(s, "ended_at", at) ||
                       tp__store_event(s, -1, 0, "experiment", state, tp__wall_s()),
                   "recording the end of the run");
    tp__deadline_finish(r);
    tp__placement_finish(r);
    tp__nodes_journal(r); /* every node's last word, one machine too: none still running */
    tp__journal_commit(&r->journal);
    /* A search whose trials all ended early (stopped, with values) found
     * something; only a run with no value at all is a failure. */
    if (r->exit_code == TP_EXIT_OK && !r->stopping && !tp__run_best_trial(r))
        r->exit_code = TP_EXIT_NO_TRIAL;
    if (tp__journal_broken(&r->journal) &&
        (r->exit_code == TP_EXIT_OK || r->exit_code == TP_EXIT_STOPPED))
        r->exit_code = TP_EXIT_STORE;
    if (r->trials.bugs) {
        tp__log(TP_LOG_ERROR,
                "bug: %d illegal trial state change(s) were refused; please "
                "report it with DIR/tunepack.db",
                r->trials.bugs);
        if (r->exit_code == TP_EXIT_OK) r->exit_code = TP_EXIT_ERROR;
    }
    tp__view_final(r);
    write_stats(r);
    tp__agents_close(r);
    uv_walk(&r->loop, close_walk, NULL);
}

/* ---- the loop ------------------------------------------------------------------ */
int tp__orchestrator_loop(tp_run_t *r) {
    uv_loop_init(&r->loop);
    uv_prepare_init(&r->loop, &r->prepare);
    r->prepare.data = r;
    tp__journal_start(&r->journal, &r->loop);
    uv_prepare_start(&r->prepare, pump);
    uv_signal_init(&r->loop, &r->sigint);
    uv_signal_init(&r->loop, &r->sigterm);
    r->sigint.data = r->sigterm.data = r;
    uv_signal_start(&r->sigint, on_signal, SIGINT);
    uv_signal_start(&r->sigterm, on_signal, SIGTERM);
    tp__view_start(r);
    tp__placement_init(r);
    tp__deadline_arm(r);
    if (tp__agents_start(r) != 0) {
        r->exit_code = TP_EXIT_AGENT;
        uv_walk(&r->loop, close_walk, NULL);
    }
    uv_run(&r->loop, UV_RUN_DEFAULT);
    uv_loop_close(&r->loop);
    return r->exit_code;
}
