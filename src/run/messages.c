/* messages: what the orchestrator does with each message an agent sends
 * (docs/protocol.md), through one table: a node's own (hello, mps, usage,
 * error, bye), or one about a running attempt (report, garbage, log,
 * started, exited), a trial's and a fused process's alike. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "run/orchestrator_internal.h"
#include "run/run.h"

/* Whose attempt a message is about: a trial's (one of its ranks), or a fused
 * process's (t: the trial whose logs it keeps, may be NULL; rank 0). */
typedef struct about {
    trial_t *t;    /* the trial */
    tp_fused_t *f; /* the fused process, NULL for a trial's own */
    int rank;      /* which process of a multi-process attempt */
} about_t;

/* Fill *a for the attempt m is about (its trial, attempt and rank). 0 when
 * that is no live attempt (stale: a later attempt runs, or none). */
static int about(tp_run_t *r, const tp_msg_about_t *m, about_t *a) {
    int64_t id = m->trial, attempt = m->attempt, rk = m->rank;
    *a = (about_t){0};
    if (r->x.fuse.max && (a->f = tp__fuse_find(r, id, attempt)) != NULL) {
        a->t = tp__trials_get(&r->trials, tp__fuse_process_id(a->f));
        return 1;
    }
    trial_t *t = tp__trials_get(&r->trials, id);
    if (!t || t->state != TP_TRIAL_RUNNING || t->attempts != attempt) return 0;
    if (rk < 0 || rk >= (t->ranks.n > 0 ? t->ranks.n : 1)) return 0;
    a->t = t;
    a->rank = (int)rk;
    return 1;
}

/* Rank 0 of a multi-process attempt started with its MASTER_PORT: the
 * others start now. */
static void launch_other_ranks(tp_run_t *r, trial_t *t, const tp_msg_started_t *m) {
    t->ranks.master_port = m->master_port;
    for (int k = 1; k < t->ranks.n; k++)
        if (tp__run_send_launch(r, t, k) != 0) {
            tp__log(TP_LOG_WARN, "trial %lld: rank %d could not be launched; stopping the attempt",
                    (long long)t->id, k);
            tp__run_send_control(r, t, "stop", "a rank could not start");
            break;
        }
}

/* One process of a multi-process attempt ended. The attempt is judged when
 * the last one has: by the first that failed (the others are stopped at
 * once: the processes of a trial stop as one), else by rank 0. */
static void rank_exited(tp_run_t *r, trial_t *t, int rank, const tp_agent_msg_t *m) {
    const tp_exited_t *e = &m->exited;
    int failed = !tp__exited_ok(e) && e->ended != TP_ENDED_PAUSED;
    if (!t->ranks.verdict && (failed || rank == 0)) {
        t->ranks.verdict = json_deep_copy(m->raw->head); /* kept: its strings outlive the message */
        if (failed && t->ranks.live > 1) tp__run_send_control(r, t, "stop", "another rank failed");
    }
    if (--t->ranks.live > 0) return;
    tp_exited_t judged = *e; /* the verdict was decoded once already: it cannot fail now */
    if (t->ranks.verdict) tp__proto_exited(t->ranks.verdict, &judged, NULL);
    tp__run_on_exited(r, t, &judged);
}

/* ---- a running attempt's messages (a trial's, or a fused process's) ---------- */
static void on_report(tp_run_t *r, const about_t *a, const tp_agent_msg_t *m) {
    if (a->rank == 0) /* rank 0 speaks for the trial */
        tp__run_on_report(r, a->t, a->f, m->report.kv, m->raw->payload, m->raw->payload_len);
}

static void on_garbage(tp_run_t *r, const about_t *a, const tp_agent_msg_t *m) {
    trial_t *g = a->rank == 0 ? tp__run_garbage_owner(r, a->t, a->f) : NULL;
    if (g) tp__run_garbage(r, g, m->garbage.what);
}

static void on_log(tp_run_t *r, const about_t *a, const tp_agent_msg_t *m) {
    if (a->t)
        tp__run_on_log(r, a->t, a->rank, m->log.is_stderr, m->raw->payload, m->raw->payload_len);
}

static void on_started(tp_run_t *r, const about_t *a, const tp_agent_msg_t *m) {
    int64_t pid = m->started.pid;
    if (a->rank != 0) return;
    for (int i = 0; a->f && i < tp__fuse_k(a->f);
         i++) { /* every configuration runs in that process */
        trial_t *u = tp__fuse_member(r, a->f, i);
        if (u) u->current.pid = (int)pid;
    }
    if (!a->f) a->t->current.pid = (int)pid;
    double now = tp__mono_s();
    if (a->t) tp__samples_add(&r->start_ms, (now - a->t->current.launch_sent) * 1000.0);
    if (r->first_start_s == 0) r->first_start_s = now - tp__view_t0(r);
    if (!a->f && a->t->ranks.n > 1) launch_other_ranks(r, a->t, &m->started);
}

static void on_exited(tp_run_t *r, const about_t *a, const tp_agent_msg_t *m) {
    if (a->f) /* its end mapped to every configuration still in it */
        tp__fuse_on_exited(r, a->f, &m->exited);
    else if (a->t->ranks.n > 1)
        rank_exited(r, a->t, a->rank, m);
    else
        tp__run_on_exited(r, a->t, &m->exited);
}

/* ---- a node's own messages ------------------------------------------------------ */
static void on_hello(tp_run_t *r, int node, const tp_agent_msg_t *m) {
    int proto = m->hello.protocol;
    if (proto != TP_PROTO_VERSION) {
        tp__log(TP_LOG_ERROR, "the agent speaks protocol %d, this is %d", proto, TP_PROTO_VERSION);
        r->exit_code = TP_EXIT_AGENT;
        r->stopping = 1;
        return;
    }
    int64_t reaped = m->hello.reaped;
    if (reaped > 0) {
        char d[80];
        snprintf(d, sizeof d, "the agent killed %lld process(es) left by an earlier run",
                 (long long)reaped);
        tp__journal_ok(
            &r->journal,
            tp__store_event(tp__journal_tx(&r->journal), -1, 0, "reaped", d, tp__wall_s()),
            "recording reaped processes");
    }
    int wait = 0;
    int rc = tp__placement_hello(r, (size_t)node, &m->hello, &wait);
    if (rc != 0) {
        r->exit_code = rc;
        r->stopping = 1;
        tp__agents_shutdown(r);
        return;
    }
    if (!wait) tp__agents_mark_ready(r, node);
}

static void on_mps(tp_run_t *r, int node, const tp_agent_msg_t *m) {
    tp__placement_on_mps(r, (size_t)node, &m->mps);
    tp__agents_mark_ready(r, node);
}

static void on_usage(tp_run_t *r, int node, const tp_agent_msg_t *m) {
    tp__placement_on_usage(r, (size_t)node, &m->usage);
}

static void on_error(tp_run_t *r, int node, const tp_agent_msg_t *m) {
    (void)r, (void)node;
    tp__log(TP_LOG_ERROR, "agent: %s", m->error.message);
}

/* What the orchestrator does with each message kind an agent sends
 * (docs/protocol.md), decoded once by proto (tp__proto_decode): a node's
 * own, or one about a running attempt, a trial's or a fused process's alike
 * (about() finds which). A kind with neither handler is only counted. */
static const struct msg_kind {
    void (*node)(tp_run_t *r, int node, const tp_agent_msg_t *m);            /* about the node */
    void (*attempt)(tp_run_t *r, const about_t *a, const tp_agent_msg_t *m); /* an attempt's */
} msg_kinds[] = {
    [TP_MSG_HELLO] = {.node = on_hello},
    [TP_MSG_MPS] = {.node = on_mps},
    [TP_MSG_USAGE] = {.node = on_usage},
    [TP_MSG_ERROR] = {.node = on_error},
    [TP_MSG_BYE] = {0},  /* the link notes it (agents.c) */
    [TP_MSG_PONG] = {0}, /* the link times it (agents.c) */
    [TP_MSG_REPORT] = {.attempt = on_report},
    [TP_MSG_GARBAGE] = {.attempt = on_garbage},
    [TP_MSG_LOG] = {.attempt = on_log},
    [TP_MSG_STARTED] = {.attempt = on_started},
    [TP_MSG_EXITED] = {.attempt = on_exited},
};

void tp__orchestrator_on_msg(tp_run_t *r, int node, const tp_agent_msg_t *m) {
    r->messages++;
    if ((size_t)m->kind >= TP_ARRAY_LEN(msg_kinds)) return;
    const struct msg_kind *k = &msg_kinds[m->kind];
    about_t a;
    if (k->node)
        k->node(r, node, m);
    else if (k->attempt && about(r, &m->about, &a))
        k->attempt(r, &a, m);
}
