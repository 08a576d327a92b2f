/* orchestrator: the event loop of `tunepack run`.
 *
 * One turn of the loop: message callbacks update in-memory trial state and
 * journal it into an open transaction; the prepare callback (pump) then
 * fills free slots, commits, and only after the commit sends what was
 * decided (journal, then act). */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <unistd.h>
#include <uv.h>

#include "config/config.h"
#include "launch/launch.h"
#include "run/orchestrator_internal.h"
#include "run/run.h"
#include "search/search.h"
#include "store/store.h"

#define MAX_AGENT_RESTARTS 3
#define COMMIT_PERIOD_S 0.05  /* report rows wait at most this long for their commit */

const char *tp__trial_state_name(int state) {
    static const char *const names[] = {
        [T_PENDING] = "pending",     [T_RUNNING] = "running", [T_COMPLETED] = "completed",
        [T_FAILED] = "failed",       [T_STOPPED] = "stopped", [T_PAUSED] = "paused",
    };
    return state >= 0 && state < (int)TP_ARRAY_LEN(names) ? names[state] : "?";
}

int tp__trial_state_from_name(const char *s) {
    for (int i = 0; i <= T_PAUSED; i++)
        if (strcmp(s, tp__trial_state_name(i)) == 0) return i;
    return T_PENDING;
}

/* ---- the pending queue: a binary min-heap of trial ids ------------------ */
void tp__pending_push(tp_run_t *r, int64_t id) {
    if (r->nheap == r->capheap) {
        r->capheap = r->capheap ? r->capheap * 2 : 64;
        r->heap = tp__xrealloc(r->heap, r->capheap * sizeof *r->heap);
    }
    size_t i = r->nheap++;
    while (i > 0 && r->heap[(i - 1) / 2] > id) {
        r->heap[i] = r->heap[(i - 1) / 2];
        i = (i - 1) / 2;
    }
    r->heap[i] = id;
}

static int64_t heap_pop(tp_run_t *r) {
    int64_t top = r->heap[0], last = r->heap[--r->nheap];
    size_t i = 0;
    for (;;) {
        size_t c = 2 * i + 1;
        if (c >= r->nheap) break;
        if (c + 1 < r->nheap && r->heap[c + 1] < r->heap[c]) c++;
        if (r->heap[c] >= last) break;
        r->heap[i] = r->heap[c];
        i = c;
    }
    if (r->nheap) r->heap[i] = last;
    return top;
}

/* ---- journal helpers ------------------------------------------------------ */
void tp__run_tx(tp_run_t *r) {
    if (!r->in_tx) {
        tp__store_begin(r->store);
        r->in_tx = 1;
        r->tx_opened = tp__mono_s();
    }
}

static void commit(tp_run_t *r) {
    if (!r->in_tx) return;
    if (tp__store_commit(r->store) != 0) tp__run_journal_failed(r, "commit");
    r->in_tx = 0;
}

static void on_commit_timer(uv_timer_t *h) {
    commit(h->data);
}

void tp__run_journal_failed(tp_run_t *r, const char *what) {
    if (!r->store_broken) fprintf(stderr, "tunepack: error: the store failed: %s\n", what);
    r->store_broken = 1;
}

trial_t *tp__trial_new(tp_run_t *r, int64_t id, json_t *params) {
    if ((size_t)id >= r->cap) {
        size_t cap = r->cap ? r->cap : 64;
        while (cap <= (size_t)id) cap *= 2;
        r->trials = tp__xrealloc(r->trials, cap * sizeof *r->trials);
        memset(r->trials + r->cap, 0, (cap - r->cap) * sizeof *r->trials);
        r->cap = cap;
    }
    trial_t *t = tp__xcalloc(1, sizeof *t);
    t->id = id;
    t->params = params;
    t->step = TP_STORE_NO_STEP;
    t->value = t->best = NAN;
    t->group = -1;
    r->trials[id] = t;
    if ((size_t)id >= r->ntrials) r->ntrials = (size_t)id + 1;
    return t;
}

trial_t *tp__trial_get(tp_run_t *r, int64_t id) {
    return id >= 0 && (size_t)id < r->ntrials ? r->trials[id] : NULL;
}

/* Better by the metric's mode; NaN is never better. */
int tp__run_better(const tp_run_t *r, double a, double b) {
    if (isnan(a)) return 0;
    if (isnan(b)) return 1;
    return r->x.maximize ? a > b : a < b;
}

void tp__note_best(tp_run_t *r, trial_t *t) {
    if ((t->state != T_COMPLETED && t->state != T_STOPPED) || !t->has_value) return;
    trial_t *b = tp__trial_get(r, r->best_id);
    if (!b || tp__run_better(r, t->value, b->value)) r->best_id = t->id;
}

/* ---- launching ------------------------------------------------------------ */
static void env_name(const char *param, char *out, size_t n) {
    int k = snprintf(out, n, "TUNEPACK_PARAM_");
    for (const char *p = param; *p && (size_t)k + 1 < n; p++)
        out[k++] = (char)((*p >= 'a' && *p <= 'z')   ? *p - 32
                          : ((*p >= 'A' && *p <= 'Z') || (*p >= '0' && *p <= '9')) ? *p
                                                                                    : '_');
    out[k] = 0;
}

/* Build and queue the launch message of t's current attempt. */
static int send_launch(tp_run_t *r, trial_t *t) {
    char id[32], dir[4096];
    snprintf(id, sizeof id, "%lld", (long long)t->id);
    snprintf(dir, sizeof dir, "%s/trials/%06lld", r->dir, (long long)t->id);
    char budget[32] = "", ckpt[4200];
    if (r->x.budget_name) tp__fmt_double(t->budget, budget);
    snprintf(ckpt, sizeof ckpt, "%s/checkpoint", dir);
    tp_subst_extra_t extra = {.trial_id = id, .trial_dir = dir,
                              .budget_name = r->x.budget_name, .budget_value = budget};
    json_t *argv = json_array();
    for (size_t i = 0; i < r->x.argc; i++) {
        tp_error_t err = {0};
        char *arg = tp__substitute(r->x.argv[i], t->params, &extra, &err);
        if (!arg) {
            json_decref(argv);
            return tp__errorf(&r->err, -EINVAL, "trial %s: %s", id, err.msg);
        }
        json_array_append_new(argv, json_string(arg));
        free(arg);
    }
    json_t *env = json_object();
    if (t->gpu_env) json_object_update(env, t->gpu_env);
    if (r->x.budget_name) json_object_set_new(env, "TUNEPACK_BUDGET", json_string(budget));
    for (size_t i = 0; i < r->x.nenv; i++)
        json_object_set_new(env, r->x.env[i].name, json_string(r->x.env[i].value));
    const char *key;
    json_t *val;
    json_object_foreach(t->params, key, val) {
        char name[256], text[4096];
        env_name(key, name, sizeof name);
        if (tp__value_text(val, text, sizeof text) >= 0)
            json_object_set_new(env, name, json_string(text));
    }
    json_t *m = json_pack("{s:s, s:I, s:i, s:o, s:o, s:s, s:s, s:O, s:f, s:f, s:I}", "type",
                          "launch", "trial", (json_int_t)t->id, "attempt", t->attempts, "argv",
                          argv, "env", env, "cwd", r->workdir, "dir", dir, "params", t->params,
                          "timeout_s", r->x.timeout_s, "grace_s", r->x.grace_s, "log_limit",
                          (json_int_t)r->x.log_limit);
    json_object_set_new(m, "checkpoint_dir", json_string(ckpt));
    if (r->x.pause_signal) json_object_set_new(m, "pause_signal", json_integer(r->x.pause_signal));
    int rc = tp__conn_send(&r->conn, m, NULL, 0);
    json_decref(m);
    return rc;
}

/* Ask t to checkpoint and exit; the agent stops it after its grace. */
static void send_pause(tp_run_t *r, trial_t *t) {
    if (t->stop_sent) return;
    t->stop_sent = 1;
    json_t *m = json_pack("{s:s, s:I, s:i}", "type", "pause", "trial", (json_int_t)t->id,
                          "attempt", t->attempts);
    tp__conn_send(&r->conn, m, NULL, 0);
    json_decref(m);
}

/* The search is over: trials still waiting for a promotion will not get
 * one; they end as stopped at the rung they reached. */
static void close_paused(tp_run_t *r) {
    double now = tp__wall_s();
    for (size_t i = 0; i < r->ntrials; i++) {
        trial_t *t = r->trials[i];
        if (!t || t->state != T_PAUSED) continue;
        char why[200];
        snprintf(why, sizeof why, "not promoted past rung %d (budget %g)", t->rung, t->budget);
        t->state = T_STOPPED;
        r->stopped++;
        tp_trial_end_t e = {.state = "stopped", .attempt = t->attempts, .failures = t->failures,
                            .has_value = t->has_value, .value = t->value, .best = t->best,
                            .step = t->step, .error = why, .at = now};
        tp__run_tx(r);
        if (tp__store_trial_end(r->store, t->id, &e) != 0 ||
            tp__store_trial_progress(r->store, t->id, t->rung, t->budget, why) != 0)
            tp__run_journal_failed(r, "closing a paused trial");
        tp__note_best(r, t);
    }
}

static void send_stop(tp_run_t *r, trial_t *t, const char *reason) {
    if (t->stop_sent) return;
    t->stop_sent = 1;
    json_t *m = json_pack("{s:s, s:I, s:i, s:s}", "type", "stop", "trial", (json_int_t)t->id,
                          "attempt", t->attempts, "reason", reason);
    tp__conn_send(&r->conn, m, NULL, 0);
    json_decref(m);
}

/* Fill free slots: pending trials first (lowest id first), then new ones
 * from the searcher. Journals each start; the launches are sent after the
 * commit by pump(). */
void tp__run_decision(tp_run_t *r, const char *kind, const trial_t *t, int ok, double value,
                      const char *detail) {
    tp_decision_row_t d = {.at = tp__wall_s(), .kind = kind, .trial = t->id, .rung = t->rung,
                           .budget = t->budget, .attempt = t->attempts, .ok = ok,
                           .has_value = !isnan(value), .value = value, .detail = detail};
    tp__run_tx(r);
    if (tp__store_decision(r->store, &d) != 0 ||
        tp__store_trial_progress(r->store, t->id, t->rung, t->budget, detail) != 0)
        tp__run_journal_failed(r, "recording a decision");
}

/* The next trial to run: a pending one (lowest id first: retries and
 * interrupted jobs), else the scheduler's next job — a new trial (journaled
 * as added) or a paused one promoted. NULL when there is none now. */
static trial_t *next_candidate(tp_run_t *r) {
    while (r->nheap) {
        trial_t *t = tp__trial_get(r, heap_pop(r));
        if (t) return t;
    }
    if (r->exhausted || r->sched_waiting) return NULL;
    tp_job_t job;
    memset(&job, 0, sizeof job);
    double now = tp__wall_s();
    int rc = r->sched->ops->next(r->sched, now, &job);
    if (rc == 0) r->exhausted = 1;
    if (rc <= 0) {
        r->sched_waiting = rc < 0;
        return NULL;
    }
    trial_t *t = tp__trial_get(r, job.trial);
    if (job.is_new) {
        if (t) { /* a scheduler bug: never reuse a number */
            json_decref(job.config);
            fprintf(stderr, "tunepack: error: the scheduler reused trial number %lld\n",
                    (long long)job.trial);
            r->exhausted = 1;
            return NULL;
        }
        char *text = json_dumps(job.config, JSON_COMPACT | JSON_PRESERVE_ORDER);
        tp__run_tx(r);
        if (tp__store_trial_add(r->store, job.trial, text, now) != 0)
            tp__run_journal_failed(r, "adding a trial");
        free(text);
        t = tp__trial_new(r, job.trial, job.config);
        if ((uint64_t)job.trial >= r->next_index) r->next_index = (uint64_t)job.trial + 1;
    } else if (!t || t->state != T_PAUSED) {
        fprintf(stderr, "tunepack: error: the scheduler promoted trial %lld, which is not "
                        "waiting\n",
                (long long)job.trial);
        return NULL;
    }
    t->rung = job.rung;
    t->budget = job.budget;
    t->job_fresh = 1;
    if (job.why[0])
        snprintf(t->why, sizeof t->why, "%s", job.why);
    else if (job.is_new)
        snprintf(t->why, sizeof t->why, "new trial");
    else
        snprintf(t->why, sizeof t->why, "promoted to rung %d", job.rung);
    if (!job.why[0] && job.budget > 0) {
        size_t k = strlen(t->why);
        snprintf(t->why + k, sizeof t->why - k, " (budget %g)", job.budget);
    }
    tp__run_decision(r, "job", t, 1, NAN, t->why);
    return t;
}

/* Journal the start of t's next attempt where the placer put it; the
 * launch is sent after the commit by pump(). */
static void start_attempt(tp_run_t *r, trial_t *t) {
    double now = tp__wall_s();
    t->state = T_RUNNING;
    t->attempts++;
    t->stop_sent = 0;
    if (t->job_fresh) {
        /* A new job: its reports start afresh. Another attempt at the same
         * job (a retry, or a rerun after an interruption that resumes from
         * the checkpoint) keeps what the job reported so far. */
        t->has_value = 0;
        t->value = t->best = NAN;
        t->step = TP_STORE_NO_STEP;
        t->job_fresh = 0;
    }
    t->seq = 0;
    t->garbage = 0;
    t->early_stopped = 0;
    t->started = tp__mono_s();
    tp__buf_reset(&t->last);
    tp__run_tx(r);
    if (tp__store_trial_state(r->store, t->id, "running", t->attempts, NULL, now) != 0)
        tp__run_journal_failed(r, "recording a start");
    json_decref(t->gpu_env);
    t->gpu_env = r->placing ? json_object() : NULL; /* CPU-only runs keep none per trial */
    if (t->gpu_env) tp__placement_journal(r, t, t->gpu_env);
    r->running++;
    if (r->nlaunch == r->caplaunch) {
        r->caplaunch = r->caplaunch ? r->caplaunch * 2 : 32;
        r->launch = tp__xrealloc(r->launch, r->caplaunch * sizeof *r->launch);
    }
    r->launch[r->nlaunch++] = t->id;
}

/* Fill free slots: take up to the free concurrency of candidates, let the
 * placement policy decide where they go, start those placed and keep the
 * others pending until something ends. */
static void schedule(tp_run_t *r) {
    if (!r->agent_ready || r->stopping || r->shutting_down || r->placement_blocked) return;
    size_t free_slots = r->running < r->x.concurrency ? (size_t)(r->x.concurrency - r->running) : 0;
    if (free_slots == 0) return;
    if (r->capbatch < free_slots) {
        r->capbatch = free_slots;
        r->batch = tp__xrealloc(r->batch, free_slots * sizeof *r->batch);
    }
    size_t n = 0;
    trial_t *t;
    while (n < free_slots && (t = next_candidate(r)) != NULL) r->batch[n++] = t;
    if (n == 0) return;
    size_t placed = tp__placement_place(r, r->batch, n);
    for (size_t i = 0; i < n; i++) {
        if (r->batch[i]->where.placed)
            start_attempt(r, r->batch[i]);
        else
            tp__pending_push(r, r->batch[i]->id);
    }
    /* What did not fit now will not fit until something changes: do not try
     * again on every loop turn (reports keep the loop busy). */
    if (placed < n) r->placement_blocked = 1;
}

static void send_shutdown(tp_run_t *r) {
    if (r->shutting_down) return;
    r->shutting_down = 1;
    json_t *m = json_pack("{s:s}", "type", "shutdown");
    if (tp__conn_send(&r->conn, m, NULL, 0) != 0) tp__orchestrator_finish(r);
    json_decref(m);
}

/* The loop's turn: schedule, commit, then act on what was committed. */
static void pump(uv_prepare_t *h) {
    tp_run_t *r = h->data;
    if (r->finished) return;
    schedule(r);
    /* Commit before any action that depends on what was journaled; report
     * rows alone are committed in groups, at most COMMIT_PERIOD_S late, so
     * a chatty trial does not cost a commit per line. */
    if (r->in_tx) {
        if (r->nlaunch || r->nstops || r->stopping || r->shutting_down ||
            tp__mono_s() - r->tx_opened >= COMMIT_PERIOD_S) {
            commit(r);
        } else if (!uv_is_active((uv_handle_t *)&r->commit_timer)) {
            uv_timer_start(&r->commit_timer, on_commit_timer, (uint64_t)(COMMIT_PERIOD_S * 1000),
                           0);
        }
    }
    for (size_t i = 0; i < r->nstops; i++) {
        trial_t *t = tp__trial_get(r, r->stops[i]);
        if (t && t->state == T_RUNNING) send_stop(r, t, "early stop");
    }
    r->nstops = 0;
    for (size_t i = 0; i < r->nlaunch; i++) {
        trial_t *t = tp__trial_get(r, r->launch[i]);
        if (t && t->state == T_RUNNING && send_launch(r, t) != 0) {
            fprintf(stderr, "tunepack: error: %s\n", r->err.msg);
            r->exit_code = TP_EXIT_ERROR;
            r->stopping = 1;
        }
    }
    r->nlaunch = 0;
    if (r->stopping && r->running == 0 && r->agent_ready) send_shutdown(r);
    if (!r->stopping && r->exhausted && r->nheap == 0 && r->running == 0 && r->agent_ready) {
        close_paused(r);
        send_shutdown(r);
    }
}

/* ---- messages from the agent ---------------------------------------------- */
static trial_t *msg_trial(tp_run_t *r, const tp_msg_t *m) {
    json_int_t id = -1, attempt = -1;
    json_unpack(m->head, "{s:I, s:I}", "trial", &id, "attempt", &attempt);
    trial_t *t = tp__trial_get(r, id);
    if (!t || t->state != T_RUNNING || t->attempts != attempt) return NULL; /* stale */
    return t;
}

static void on_agent_msg(tp_agent_conn_t *c, const tp_msg_t *m) {
    tp_run_t *r = c->data;
    if (strcmp(m->type, "hello") == 0) {
        int proto = 0;
        json_unpack(m->head, "{s?i}", "protocol", &proto);
        if (proto != TP_PROTO_VERSION) {
            fprintf(stderr, "tunepack: error: the agent speaks protocol %d, this is %d\n", proto,
                    TP_PROTO_VERSION);
            r->exit_code = TP_EXIT_AGENT;
            r->stopping = 1;
            return;
        }
        json_int_t reaped = 0;
        json_unpack(m->head, "{s?I}", "reaped", &reaped);
        if (reaped > 0) {
            tp__run_tx(r);
            char d[80];
            snprintf(d, sizeof d, "the agent killed %lld process(es) left by an earlier run",
                     (long long)reaped);
            tp__store_event(r->store, -1, 0, "reaped", d, tp__wall_s());
        }
        int rc = tp__placement_hello(r, m->head);
        if (rc != 0) {
            r->exit_code = rc;
            r->stopping = 1;
            send_shutdown(r);
            return;
        }
        r->agent_ready = !r->mps_pending;
        return;
    }
    if (strcmp(m->type, "mps") == 0) {
        tp__placement_on_mps(r, m->head);
        r->agent_ready = 1;
        return;
    }
    if (strcmp(m->type, "usage") == 0) {
        tp__placement_on_usage(r, m->head);
        return;
    }
    if (strcmp(m->type, "error") == 0) {
        const char *msg = json_string_value(json_object_get(m->head, "message"));
        fprintf(stderr, "tunepack: agent error: %s\n", msg ? msg : "(no message)");
        return;
    }
    if (strcmp(m->type, "bye") == 0) return;
    trial_t *t = msg_trial(r, m);
    if (!t) return;
    if (strcmp(m->type, "report") == 0) {
        tp__run_on_report(r, t, m);
    } else if (strcmp(m->type, "garbage") == 0) {
        const char *what = json_string_value(json_object_get(m->head, "what"));
        tp__run_garbage(r, t, what ? what : "garbage");
    } else if (strcmp(m->type, "started") == 0) {
        json_int_t pid = 0;
        json_unpack(m->head, "{s?I}", "pid", &pid);
        t->pid = (int)pid;
    } else if (strcmp(m->type, "exited") == 0) {
        tp__run_on_exited(r, t, m);
    }
}

/* ---- agent lifecycle --------------------------------------------------------- */
static int start_agent(tp_run_t *r);

static void on_conn_closed(tp_agent_conn_t *c) {
    tp_run_t *r = c->data;
    if (r->finished) return;
    if (r->shutting_down || r->agent_restarts > MAX_AGENT_RESTARTS) {
        tp__orchestrator_finish(r);
        return;
    }
    if (start_agent(r) != 0) {
        r->exit_code = TP_EXIT_AGENT;
        tp__orchestrator_finish(r);
    }
}

static void on_agent_lost(tp_agent_conn_t *c, const char *why) {
    tp_run_t *r = c->data;
    r->agent_ready = 0;
    if (!r->shutting_down) {
        /* Every attempt it ran is interrupted: back to pending, run again. */
        double now = tp__wall_s();
        tp__run_tx(r);
        for (size_t i = 0; i < r->ntrials; i++) {
            trial_t *t = r->trials[i];
            if (!t || t->state != T_RUNNING) continue;
            tp__placement_ended(r, t); /* a profiling attempt gives its group back */
            t->state = T_PENDING;
            r->running--;
            tp_trial_end_t e = {.state = "pending", .attempt = t->attempts,
                                .failures = t->failures, .error = "interrupted: agent lost",
                                .step = TP_STORE_NO_STEP, .at = now};
            if (tp__store_trial_end(r->store, t->id, &e) != 0) tp__run_journal_failed(r, "interrupt");
            tp__pending_push(r, t->id);
        }
        r->agent_restarts++;
        fprintf(stderr, "tunepack: warn: lost the agent (%s)%s\n", why,
                r->agent_restarts > MAX_AGENT_RESTARTS ? "; giving up"
                                                       : "; starting a new one");
        if (r->agent_restarts > MAX_AGENT_RESTARTS) {
            r->exit_code = TP_EXIT_AGENT;
            r->shutting_down = 1;
        }
        tp__store_event(r->store, -1, 0, "agent-lost", why, now);
        tp__store_commit(r->store);
        r->in_tx = 0;
    }
    tp__conn_close(c, on_conn_closed);
}

static int start_agent(tp_run_t *r) {
    tp_error_t err = {0};
    int rc = tp__launch_local(&r->loop, r->exe, &r->conn, on_agent_msg, on_agent_lost, r, &err);
    if (rc != 0) {
        fprintf(stderr, "tunepack: error: %s\n", err.msg);
        return rc;
    }
    json_t *m = json_pack("{s:s, s:i, s:s}", "type", "hello", "protocol", TP_PROTO_VERSION,
                          "token", r->token);
    rc = tp__conn_send(&r->conn, m, NULL, 0);
    json_decref(m);
    return rc;
}

/* ---- signals ------------------------------------------------------------------ */
static void on_signal(uv_signal_t *h, int sig) {
    tp_run_t *r = h->data;
    if (r->stopping) {
        if (sig == SIGINT) fprintf(stderr, "\ntunepack: stopping now\n");
        send_shutdown(r);
        return;
    }
    r->stopping = 1;
    if (r->exit_code == TP_EXIT_OK) r->exit_code = TP_EXIT_STOPPED;
    fprintf(stderr, "\ntunepack: stopping: running trials are asked to checkpoint and exit, "
                    "and stopped after %gs; run the same command again to resume\n",
            r->x.grace_s);
    for (size_t i = 0; i < r->ntrials; i++)
        if (r->trials[i] && r->trials[i]->state == T_RUNNING) send_pause(r, r->trials[i]);
    if (!r->agent_ready) send_shutdown(r);
}

/* ---- the end ------------------------------------------------------------------- */
static void close_walk(uv_handle_t *h, void *arg) {
    (void)arg;
    if (!uv_is_closing(h)) uv_close(h, NULL);
}

void tp__orchestrator_finish(tp_run_t *r) {
    if (r->finished) return;
    r->finished = 1;
    const char *state = r->stopping ? "stopped" : r->exit_code == TP_EXIT_AGENT ? "failed"
                                                                                : "finished";
    tp__run_tx(r);
    tp__store_meta_set(r->store, "state", state);
    char at[32];
    snprintf(at, sizeof at, "%.3f", tp__wall_s());
    tp__store_meta_set(r->store, "ended_at", at);
    tp__store_event(r->store, -1, 0, "experiment", state, tp__wall_s());
    tp__placement_finish(r);
    if (tp__store_commit(r->store) != 0) tp__run_journal_failed(r, "final commit");
    r->in_tx = 0;
    /* A search whose trials all ended early (stopped, with values) found
     * something; only a run with no value at all is a failure. */
    if (r->exit_code == TP_EXIT_OK && !r->stopping && r->best_id < 0)
        r->exit_code = TP_EXIT_NO_TRIAL;
    if (r->store_broken && r->exit_code == TP_EXIT_OK) r->exit_code = TP_EXIT_ERROR;
    tp__view_final(r);
    tp__conn_close(&r->conn, NULL);
    uv_walk(&r->loop, close_walk, NULL);
}

/* ---- the loop ------------------------------------------------------------------ */
int tp__orchestrator_loop(tp_run_t *r) {
    size_t exelen = sizeof r->exe;
    if (uv_exepath(r->exe, &exelen) != 0) snprintf(r->exe, sizeof r->exe, "/proc/self/exe");
    uv_loop_init(&r->loop);
    r->t0 = tp__mono_s();
    uv_prepare_init(&r->loop, &r->prepare);
    r->prepare.data = r;
    uv_timer_init(&r->loop, &r->commit_timer);
    r->commit_timer.data = r;
    uv_prepare_start(&r->prepare, pump);
    uv_signal_init(&r->loop, &r->sigint);
    uv_signal_init(&r->loop, &r->sigterm);
    r->sigint.data = r->sigterm.data = r;
    uv_signal_start(&r->sigint, on_signal, SIGINT);
    uv_signal_start(&r->sigterm, on_signal, SIGTERM);
    tp__view_start(r);
    if (start_agent(r) != 0) {
        r->exit_code = TP_EXIT_AGENT;
        uv_walk(&r->loop, close_walk, NULL);
    }
    uv_run(&r->loop, UV_RUN_DEFAULT);
    uv_loop_close(&r->loop);
    return r->exit_code;
}
