/* agent: the per-node process's event loop. It reads protocol messages on
 * in_fd, dispatches them from a table, queues outgoing frames on out_fd with
 * backpressure (trial pipes pause while too much output is unsent), and
 * winds down on shutdown, input EOF, a protocol error or SIGTERM/SIGINT. */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <time.h>
#include <unistd.h>

#include "agent/agent.h"
#include "agent/agent_internal.h"

typedef struct out_req {
    uv_write_t req; /* libuv write request */
    tp_agent_t *a;  /* the agent */
    char *data;     /* the frame, owned */
    size_t len;     /* its length */
} out_req_t;

static void finish(tp_agent_t *a);
static void begin_stop(tp_agent_t *a, int bye, int code);

static void set_paused(tp_agent_t *a, int paused) {
    if (a->paused == paused) return;
    a->paused = paused;
    for (tp_trial_t *t = a->trials; t; t = t->next)
        tp__trial_set_reading(t, !paused);
}

static void on_handle_closed(uv_handle_t *h) {
    (void)h;
}

static void close_out(tp_agent_t *a) {
    if (!a->out_open) return;
    a->out_open = 0;
    uv_close((uv_handle_t *)&a->out, on_handle_closed);
}

static void on_written(uv_write_t *req, int status) {
    out_req_t *w = (out_req_t *)req;
    tp_agent_t *a = w->a;
    a->out_pending -= w->len;
    free(w->data);
    free(w);
    if (status < 0 && status != UV_ECANCELED && !a->out_dead) {
        /* The orchestrator is gone: nobody to report to. */
        a->out_dead = 1;
        set_paused(a, 0);
        begin_stop(a, 0, 0);
    }
    if (a->paused && a->out_pending < TP_AGENT_OUT_LOW) set_paused(a, 0);
    if (a->finished && a->out_pending == 0) close_out(a);
}

/* See agent_internal.h. Encodes into one malloc'd frame and queues it; when
 * more than TP_AGENT_OUT_HIGH bytes are unsent, trial pipes pause. */
void tp__agent_send(tp_agent_t *a, json_t *head, const void *payload, size_t n) {
    if (!head) return;
    if (a->out_dead || !a->out_open) {
        json_decref(head);
        return;
    }
    tp_buf_t b;
    tp__buf_init(&b);
    int rc = tp__proto_encode(&b, head, payload, n);
    json_decref(head);
    if (rc < 0) {
        tp__log(TP_LOG_ERROR, "agent: cannot encode a message: %s", strerror(-rc));
        tp__buf_free(&b);
        return;
    }
    out_req_t *w = tp__xmalloc(sizeof *w);
    w->a = a;
    w->len = b.len;
    w->data = tp__buf_steal(&b);
    uv_buf_t ub = uv_buf_init(w->data, (unsigned)w->len);
    a->out_pending += w->len;
    rc = uv_write(&w->req, (uv_stream_t *)&a->out, &ub, 1, on_written);
    if (rc < 0) {
        a->out_pending -= w->len;
        free(w->data);
        free(w);
        a->out_dead = 1;
        begin_stop(a, 0, 0);
        return;
    }
    if (!a->paused && a->out_pending > TP_AGENT_OUT_HIGH) set_paused(a, 1);
}

/* ---- lifetime ------------------------------------------------------------ */

static void close_in(tp_agent_t *a) {
    if (!a->in_open) return;
    a->in_open = 0;
    uv_read_stop((uv_stream_t *)&a->in);
    uv_close((uv_handle_t *)&a->in, on_handle_closed);
}

/* Every trial is gone and the agent was told to stop: say bye if asked,
 * close everything; `out` closes once its queue has drained. */
static void finish(tp_agent_t *a) {
    if (a->finished) return;
    a->finished = 1;
    /* No trial outlives its agent: whatever of ours still carries the run's
     * token (a process that left its trial's group and its pipes) ends here;
     * not the run's token alone, which a resumed run's trials carry too. */
    tp__reap_token(a, a->token, a->stamp);
    /* Nor any orphan that came back to it: no attempt is live now, so each
     * one ends, with or without a token or a cgroup (MPS daemons excepted:
     * they are stopped next). */
    tp__reap_orphans(a);
    tp__cgroup_fini(a);
    tp__agent_gpu_close(a);
    if (a->hb_open) {
        a->hb_open = 0;
        uv_close((uv_handle_t *)&a->hb_timer, on_handle_closed);
    }
    if (a->sweep_open) {
        a->sweep_open = 0;
        uv_close((uv_handle_t *)&a->sweep_timer, on_handle_closed);
    }
    if (a->send_bye) tp__agent_send(a, json_pack("{s:s}", "type", "bye"), NULL, 0);
    close_in(a);
    uv_close((uv_handle_t *)&a->sig_term, on_handle_closed);
    uv_close((uv_handle_t *)&a->sig_int, on_handle_closed);
    uv_close((uv_handle_t *)&a->sig_chld, on_handle_closed);
    if (a->out_pending == 0 || a->out_dead) close_out(a);
}

/* Stop accepting work and stop every trial (SIGTERM, SIGKILL after each
 * one's grace); finish once the last `exited` is queued. */
static void begin_stop(tp_agent_t *a, int bye, int code) {
    if (a->finished) return;
    if (!a->stopping) {
        a->stopping = 1;
        a->send_bye = bye;
        a->exit_code = code;
    }
    close_in(a);
    for (tp_trial_t *t = a->trials; t; t = t->next)
        tp__trial_stop(t, TP_END_STOPPED);
    if (a->ntrials == 0) finish(a);
}

void tp__agent_fail(tp_agent_t *a) {
    begin_stop(a, 0, 1);
}

void tp__agent_trial_gone(tp_agent_t *a) {
    if (a->stopping && a->ntrials == 0) finish(a);
}

/* ---- messages -------------------------------------------------------------- */

static void send_error(tp_agent_t *a, const char *text) {
    tp__agent_send(a, json_pack("{s:s, s:s}", "type", "error", "message", text), NULL, 0);
}

/* Heartbeats: the orchestrator pings every heartbeat_s; an agent that hears
 * nothing from it for HEARTBEAT_MISSES of those (a cut link that no EOF
 * announces) stops every trial and exits, leaving no orphans. */
#define HEARTBEAT_MISSES 5

static void on_hb_timer(uv_timer_t *h) {
    tp_agent_t *a = h->data;
    double quiet = tp__mono_s() - a->heard_at;
    if (a->stopping || quiet < a->hb_timeout_s) return;
    tp__log(TP_LOG_WARN, "agent: no word from the orchestrator for %.0fs: stopping every trial",
            quiet);
    begin_stop(a, 0, 1);
}

static void on_ping(tp_agent_t *a, json_t *m) {
    json_t *pong = json_pack("{s:s}", "type", "pong");
    json_t *t = json_object_get(m, "t"); /* echoed: the orchestrator times the round trip */
    if (t) json_object_set(pong, "t", t);
    tp__agent_send(a, pong, NULL, 0);
}

static void on_hello(tp_agent_t *a, json_t *m) {
    json_t *pv = json_object_get(m, "protocol");
    if (!json_is_integer(pv) || json_integer_value(pv) != TP_PROTO_VERSION) {
        char text[200];
        snprintf(text, sizeof text, "protocol version %lld is not supported; this agent speaks %d",
                 json_is_integer(pv) ? (long long)json_integer_value(pv) : -1LL, TP_PROTO_VERSION);
        send_error(a, text);
        begin_stop(a, 0, 1);
        return;
    }
    json_t *tok = json_object_get(m, "token");
    if (json_is_string(tok)) {
        free(a->token);
        a->token = tp__strdup(json_string_value(tok));
    }
    int reaped = tp__reap_token(a, a->token, NULL);
    double hb = json_number_value(json_object_get(m, "heartbeat_s"));
    if (hb > 0 && hb < 1e6 && !a->hb_open) { /* a day and more: no heartbeat check */
        a->hb_timeout_s = hb * HEARTBEAT_MISSES;
        uv_timer_init(&a->loop, &a->hb_timer);
        a->hb_timer.data = a;
        a->hb_open = 1;
        uint64_t ms = (uint64_t)(hb * 1000);
        uv_timer_start(&a->hb_timer, on_hb_timer, ms, ms);
    }
    char host[256] = "";
    if (gethostname(host, sizeof host - 1) < 0) strcpy(host, "unknown");
    /* Inside a Slurm step, the CPUs Slurm gave the job on this node. */
    const char *slurm_cpus = getenv("SLURM_CPUS_ON_NODE");
    long cpus =
        slurm_cpus && atol(slurm_cpus) > 0 ? atol(slurm_cpus) : sysconf(_SC_NPROCESSORS_ONLN);
    json_t *r = json_pack("{s:s, s:i, s:s, s:i, s:i, s:s, s:i}", "type", "hello", "protocol",
                          TP_PROTO_VERSION, "node", host, "cpus", (int)(cpus > 0 ? cpus : 1), "pid",
                          (int)getpid(), "version", TP_VERSION, "reaped", reaped);
    /* Memory: what Slurm gave the job on this node, else the machine's. */
    const char *slurm_mem = getenv("SLURM_MEM_PER_NODE");
    long long mem_mib =
        slurm_mem && atoll(slurm_mem) > 0
            ? atoll(slurm_mem)
            : (long long)sysconf(_SC_PHYS_PAGES) / 1024 * (long long)sysconf(_SC_PAGESIZE) / 1024;
    json_object_set_new(r, "memory_mib", json_integer(mem_mib));
    tp__agent_gpu_hello(a, r);
    tp__agent_send(a, r, NULL, 0);
}

static void on_launch(tp_agent_t *a, json_t *m) {
    tp__trial_launch(a, m);
}

/* stop and pause apply to every process (rank) of the attempt here. */
static void on_stop(tp_agent_t *a, json_t *m) {
    json_t *tr = json_object_get(m, "trial"), *at = json_object_get(m, "attempt");
    if (!json_is_integer(tr) || !json_is_integer(at)) return;
    for (tp_trial_t *t = a->trials; t; t = t->next)
        if (t->trial == json_integer_value(tr) && t->attempt == json_integer_value(at))
            tp__trial_stop(t, TP_END_STOPPED);
}

static void on_pause(tp_agent_t *a, json_t *m) {
    json_t *tr = json_object_get(m, "trial"), *at = json_object_get(m, "attempt");
    if (!json_is_integer(tr) || !json_is_integer(at)) return;
    for (tp_trial_t *t = a->trials; t; t = t->next)
        if (t->trial == json_integer_value(tr) && t->attempt == json_integer_value(at))
            tp__trial_pause(t);
}

/* A fused attempt drops one of its configurations (an early stop of that one): "drop <i>"
 * on its control channel; the process goes on with the others. */
static void on_drop(tp_agent_t *a, json_t *m) {
    json_t *tr = json_object_get(m, "trial"), *at = json_object_get(m, "attempt"),
           *cfg = json_object_get(m, "config");
    if (!json_is_integer(tr) || !json_is_integer(at) || !json_is_integer(cfg) ||
        json_integer_value(cfg) < 0 || json_integer_value(cfg) > INT32_MAX)
        return;
    for (tp_trial_t *t = a->trials; t; t = t->next)
        if (t->trial == json_integer_value(tr) && t->attempt == json_integer_value(at))
            tp__trial_drop(t, (int)json_integer_value(cfg));
}

static void on_shutdown(tp_agent_t *a, json_t *m) {
    (void)m;
    begin_stop(a, 1, 0);
}

static const struct {
    const char *type;
    void (*handle)(tp_agent_t *a, json_t *m);
} handlers[] = {
    {"hello", on_hello},
    {"launch", on_launch},
    {"stop", on_stop},
    {"pause", on_pause},
    {"drop", on_drop},
    {"shutdown", on_shutdown},
    {"mps_start", tp__agent_mps_start},
    {"ping", on_ping},
};

static void dispatch(tp_agent_t *a, tp_msg_t *msg) {
    for (size_t i = 0; i < TP_ARRAY_LEN(handlers); i++) {
        if (strcmp(msg->type, handlers[i].type) == 0) {
            handlers[i].handle(a, msg->head);
            return;
        }
    }
    /* Unknown types are ignored: that is how the protocol grows. */
}

static void on_in_alloc(uv_handle_t *h, size_t suggested, uv_buf_t *buf) {
    (void)suggested;
    tp_agent_t *a = h->data;
    *buf = uv_buf_init(a->inbuf, sizeof a->inbuf);
}

static void on_in_read(uv_stream_t *s, ssize_t n, const uv_buf_t *buf) {
    tp_agent_t *a = s->data;
    if (n == 0) return;
    if (n < 0) {
        if (n != UV_EOF) tp__log(TP_LOG_WARN, "agent: reading input: %s", uv_strerror((int)n));
        begin_stop(a, 0, n == UV_EOF ? 0 : 1);
        return;
    }
    tp__proto_feed(&a->dec, buf->base, (size_t)n);
    for (;;) {
        tp_msg_t msg;
        tp_error_t err = {0};
        int rc = tp__proto_next(&a->dec, &msg, &err);
        if (rc == 0) break;
        if (rc < 0) {
            tp__log(TP_LOG_ERROR, "agent: %s", err.msg);
            send_error(a, err.msg);
            begin_stop(a, 0, 1);
            return;
        }
        a->heard_at = tp__mono_s();
        dispatch(a, &msg);
        json_decref(msg.head);
        if (!a->in_open) return; /* stopping: read nothing more */
    }
}

/* ---- signals ------------------------------------------------------------------ */

static void on_sig_stop(uv_signal_t *h, int signum) {
    tp_agent_t *a = h->data;
    if (a->stopping) {
        /* Asked twice: no more grace. */
        for (tp_trial_t *t = a->trials; t; t = t->next)
            if (t->pid > 0 && !t->leader_exited) kill(-t->pid, SIGKILL);
        return;
    }
    tp__log(TP_LOG_INFO, "agent: signal %d: stopping every trial", signum);
    begin_stop(a, 0, 0);
}

static void on_sigchld(uv_signal_t *h, int signum) {
    (void)signum;
    tp_agent_t *a = h->data;
    tp__reap_children(a);
    tp__reap_orphans(a); /* a child died: its own children came to the agent */
    for (tp_trial_t *t = a->trials, *next; t; t = next) {
        next = t->next;
        tp__trial_on_sigchld(t);
    }
}

/* Orphans adopted since the last look: those of no live attempt end, and
 * what runs below each live one is recorded (tp__reap_orphans). */
static void on_sweep_timer(uv_timer_t *h) {
    tp__reap_orphans(h->data);
}

/* See agent.h. The agent becomes a child subreaper so that every process
 * orphaned below it, however it hid (setsid, a double fork, a cleared
 * environment), comes back to it: it reaps them, and ends each one with the
 * attempt it belongs to, or at once when it belongs to none (reaper.c). */
int tp__agent_main(int in_fd, int out_fd) {
    signal(SIGPIPE, SIG_IGN);
    if (prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) != 0)
        tp__log(TP_LOG_WARN,
                "agent: cannot become a child subreaper (%s): orphans of trials "
                "go to init, and only their cgroup or run token ends them",
                strerror(errno));
    tp_agent_t *a = tp__xcalloc(1, sizeof *a);
    tp__orphans_init(a);
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    snprintf(a->stamp, sizeof a->stamp, "%ld-%lld", (long)getpid(),
             (long long)ts.tv_sec * 1000000000LL + ts.tv_nsec);
    int rc = uv_loop_init(&a->loop);
    if (rc < 0) {
        tp__log(TP_LOG_ERROR, "agent: cannot start an event loop: %s", uv_strerror(rc));
        free(a);
        return 1;
    }
    tp__proto_decoder_init(&a->dec);
    tp__cgroup_init(a);
    uv_pipe_init(&a->loop, &a->in, 0);
    uv_pipe_init(&a->loop, &a->out, 0);
    a->in.data = a->out.data = a;
    a->in_open = a->out_open = 1;
    int rin = uv_pipe_open(&a->in, in_fd);
    int rout = uv_pipe_open(&a->out, out_fd);
    uv_signal_init(&a->loop, &a->sig_term);
    uv_signal_init(&a->loop, &a->sig_int);
    uv_signal_init(&a->loop, &a->sig_chld);
    a->sig_term.data = a->sig_int.data = a->sig_chld.data = a;
    if (rin < 0 || rout < 0) {
        tp__log(TP_LOG_ERROR, "agent: cannot use fds %d/%d as protocol streams: %s", in_fd, out_fd,
                uv_strerror(rin < 0 ? rin : rout));
        a->out_dead = 1;
        begin_stop(a, 0, 1);
    } else {
        uv_signal_start(&a->sig_term, on_sig_stop, SIGTERM);
        uv_signal_start(&a->sig_int, on_sig_stop, SIGINT);
        uv_signal_start(&a->sig_chld, on_sigchld, SIGCHLD);
        uv_read_start((uv_stream_t *)&a->in, on_in_alloc, on_in_read);
        uv_timer_init(&a->loop, &a->sweep_timer);
        a->sweep_timer.data = a;
        a->sweep_open = 1;
        uint64_t ms = (uint64_t)(TP_AGENT_SWEEP_S * 1000);
        uv_timer_start(&a->sweep_timer, on_sweep_timer, ms, ms);
    }
    uv_run(&a->loop, UV_RUN_DEFAULT);
    int code = a->exit_code;
    if (uv_loop_close(&a->loop) != 0) tp__log(TP_LOG_WARN, "agent: handles left open at exit");
    tp__proto_decoder_free(&a->dec);
    tp__cgroup_fini(a); /* when finish() did not run */
    free(a->token);
    free(a->seen);
    free(a);
    return code;
}
