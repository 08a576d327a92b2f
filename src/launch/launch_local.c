/* launch_local: an agent as a child process (the local agent itself, or
 * ssh / srun starting one elsewhere), and the framed connection over the
 * child's stdin/stdout. */
#include "launch/launch.h"

#include <errno.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>

typedef struct write_req {
    uv_write_t req; /* libuv request; first member */
    char *data;     /* owned bytes being written */
    size_t len;     /* their length */
} write_req_t;

static void conn_lost(tp_agent_conn_t *c, const char *why) {
    if (c->lost) return;
    c->lost = 1;
    snprintf(c->why, sizeof c->why, "%.*s", (int)sizeof c->why - 1, why);
    if (!c->closing) uv_read_stop((uv_stream_t *)&c->from_agent);
    if (c->on_lost) c->on_lost(c, c->why);
}

static void flush_out(tp_agent_conn_t *c);

static void on_written(uv_write_t *req, int status) {
    write_req_t *w = (write_req_t *)req;
    tp_agent_conn_t *c = req->handle->data;
    c->in_flight -= w->len;
    free(w->data);
    free(w);
    if (status < 0 && status != UV_ECANCELED) {
        char why[128];
        snprintf(why, sizeof why, "writing to the agent failed: %s", uv_strerror(status));
        conn_lost(c, why);
        return;
    }
    if (c->out.len && !c->lost) flush_out(c);
}

/* Hand the queued bytes to libuv in one write. */
static void flush_out(tp_agent_conn_t *c) {
    if (c->out.len == 0 || c->lost || c->closing) return;
    write_req_t *w = tp__xmalloc(sizeof *w);
    w->len = c->out.len;
    w->data = tp__buf_steal(&c->out);
    uv_buf_t b = uv_buf_init(w->data, (unsigned)w->len);
    int rc = uv_write(&w->req, (uv_stream_t *)&c->to_agent, &b, 1, on_written);
    if (rc < 0) {
        free(w->data);
        free(w);
        conn_lost(c, "the agent's input is closed");
        return;
    }
    c->in_flight += w->len;
}

int tp__conn_send(tp_agent_conn_t *c, const json_t *head, const void *payload, size_t len) {
    if (c->lost || c->closing) return -EPIPE;
    int rc = tp__proto_encode(&c->out, head, payload, len);
    if (rc < 0) return rc;
    /* Coalesce: while a write is in flight, further frames wait and go out
     * together when it completes. */
    if (c->in_flight == 0) flush_out(c);
    return 0;
}

static void on_alloc(uv_handle_t *h, size_t suggested, uv_buf_t *buf) {
    (void)h;
    (void)suggested;
    size_t n = 256 * 1024;
    buf->base = tp__xmalloc(n);
    buf->len = n;
}

static void on_read(uv_stream_t *s, ssize_t nread, const uv_buf_t *buf) {
    tp_agent_conn_t *c = s->data;
    if (nread < 0) {
        free(buf->base);
        conn_lost(c, nread == UV_EOF ? "the agent closed its output" : uv_strerror((int)nread));
        return;
    }
    if (nread > 0) tp__proto_feed(&c->dec, buf->base, (size_t)nread);
    free(buf->base);
    for (;;) {
        tp_msg_t msg;
        tp_error_t err = {0};
        int rc = tp__proto_next(&c->dec, &msg, &err);
        if (rc == 0) break;
        if (rc < 0) {
            char why[sizeof err.msg + 32];
            snprintf(why, sizeof why, "protocol error from the agent: %s", err.msg);
            conn_lost(c, why);
            return;
        }
        if (!c->lost && c->on_msg) c->on_msg(c, &msg);
        json_decref(msg.head);
        if (c->lost || c->closing) return;
    }
}

/* The agent's stderr: each whole line to the log (so that the live view
 * keeps it above itself); a last line without its end is ended at EOF. */
static void on_err_read(uv_stream_t *s, ssize_t nread, const uv_buf_t *buf) {
    tp_agent_conn_t *c = s->data;
    if (nread > 0) tp__buf_append(&c->err_line, buf->base, (size_t)nread);
    free(buf->base);
    if (nread < 0 && c->err_line.len) tp__buf_append(&c->err_line, "\n", 1);
    size_t done = 0;
    const char *nl;
    while (done < c->err_line.len &&
           (nl = memchr(c->err_line.data + done, '\n', c->err_line.len - done)) != NULL) {
        size_t n = (size_t)(nl - (c->err_line.data + done)) + 1;
        tp__log_line(c->err_line.data + done, n);
        done += n;
    }
    if (done) {
        memmove(c->err_line.data, c->err_line.data + done, c->err_line.len - done);
        c->err_line.len -= done;
    }
    if (nread < 0) uv_read_stop(s);
}

static void on_exit_cb(uv_process_t *p, int64_t status, int sig) {
    tp_agent_conn_t *c = p->data;
    c->exited = 1;
    c->exit_status = status;
    c->term_signal = sig;
    char why[128];
    if (sig)
        snprintf(why, sizeof why, "the agent was killed by signal %d", sig);
    else
        snprintf(why, sizeof why, "the agent exited with status %lld", (long long)status);
    conn_lost(c, why);
}

int tp__launch_argv(uv_loop_t *loop, char *const *argv, int relay_err, tp_agent_conn_t *c,
                    tp_conn_msg_cb on_msg, tp_conn_lost_cb on_lost, void *data, tp_error_t *err) {
    memset(c, 0, sizeof *c);
    c->loop = loop;
    c->on_msg = on_msg;
    c->on_lost = on_lost;
    c->data = data;
    tp__proto_decoder_init(&c->dec);
    tp__buf_init(&c->out);
    uv_pipe_init(loop, &c->to_agent, 0);
    uv_pipe_init(loop, &c->from_agent, 0);
    c->to_agent.data = c->from_agent.data = c->proc.data = c->agent_err.data = c;
    c->open_handles = 2;
    tp__buf_init(&c->err_line);
    if (relay_err) {
        uv_pipe_init(loop, &c->agent_err, 0);
        c->relay_err = 1;
        c->open_handles++;
    }

    uv_stdio_container_t stdio[3] = {
        {.flags = UV_CREATE_PIPE | UV_READABLE_PIPE, .data.stream = (uv_stream_t *)&c->to_agent},
        {.flags = UV_CREATE_PIPE | UV_WRITABLE_PIPE, .data.stream = (uv_stream_t *)&c->from_agent},
        relay_err ? (uv_stdio_container_t){.flags = UV_CREATE_PIPE | UV_WRITABLE_PIPE,
                                           .data.stream = (uv_stream_t *)&c->agent_err}
                  : (uv_stdio_container_t){.flags = UV_INHERIT_FD, .data.fd = 2},
    };
    uv_process_options_t opt = {
        .exit_cb = on_exit_cb,
        .file = argv[0],
        .args = (char **)argv,
        .flags = UV_PROCESS_DETACHED,
        .stdio_count = 3,
        .stdio = stdio,
    };
    int rc = uv_spawn(loop, &c->proc, &opt);
    if (rc < 0) {
        tp__conn_close(c, NULL);
        return tp__errorf(err, rc, "cannot start the agent with %s: %s", argv[0], uv_strerror(rc));
    }
    c->open_handles++;
    c->spawned = 1;
    uv_read_start((uv_stream_t *)&c->from_agent, on_alloc, on_read);
    if (relay_err) uv_read_start((uv_stream_t *)&c->agent_err, on_alloc, on_err_read);
    return 0;
}

void tp__conn_kill(tp_agent_conn_t *c, const char *why) {
    if (!c->exited && !c->closing && c->spawned) uv_process_kill(&c->proc, SIGKILL);
    conn_lost(c, why);
}

static void on_closed(uv_handle_t *h) {
    tp_agent_conn_t *c = h->data;
    if (--c->open_handles > 0) return;
    tp__proto_decoder_free(&c->dec);
    tp__buf_free(&c->out);
    tp__buf_free(&c->err_line);
    if (c->on_closed) c->on_closed(c);
}

void tp__conn_close(tp_agent_conn_t *c, void (*done_cb)(tp_agent_conn_t *c)) {
    if (c->closing) return;
    c->closing = 1;
    c->on_closed = done_cb;
    uv_close((uv_handle_t *)&c->to_agent, on_closed);
    uv_close((uv_handle_t *)&c->from_agent, on_closed);
    if (c->relay_err) uv_close((uv_handle_t *)&c->agent_err, on_closed);
    if (c->spawned) uv_close((uv_handle_t *)&c->proc, on_closed);
}
