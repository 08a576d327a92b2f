/* trial: one attempt of one trial, from `launch` to `exited`. The attempt
 * runs in its own session and process group (pgid == pid); its stdout and
 * stderr go to bounded log files, its report fd 3 and name=value stdout
 * lines go to the orchestrator as batched `report` messages. `exited` is sent
 * only after the leader exited, the group is gone (or a linger of
 * TP_AGENT_LINGER_S passed) and every pipe was drained, so all reports of an
 * attempt precede its `exited`. */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <fnmatch.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "agent/agent_internal.h"
#include "gpu/gpu.h"

extern char **environ;

tp_trial_t *tp__trial_find(tp_agent_t *a, int64_t trial, int64_t attempt, int rank) {
    for (tp_trial_t *t = a->trials; t; t = t->next)
        if (t->trial == trial && t->attempt == attempt && (rank < 0 || t->rank == rank)) return t;
    return NULL;
}

int tp__free_port(void) {
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0) return -errno;
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_ANY)};
    socklen_t len = sizeof sa;
    int port = -EADDRNOTAVAIL;
    if (bind(fd, (struct sockaddr *)&sa, sizeof sa) == 0 &&
        getsockname(fd, (struct sockaddr *)&sa, &len) == 0)
        port = ntohs(sa.sin_port);
    close(fd);
    return port;
}

static double since_s(uint64_t t0) {
    return (double)(uv_hrtime() - t0) / 1e9;
}

static void send_exited(tp_agent_t *a, int64_t trial, int64_t attempt, int rank, const char *status,
                        int64_t code, int sig, const char *error, double duration_s, int oom,
                        double maxrss_mib, double cpu_s) {
    json_t *m = json_pack("{s:s, s:I, s:I, s:s, s:I, s:i, s:s, s:f, s:b}", "type", "exited",
                          "trial", (json_int_t)trial, "attempt", (json_int_t)attempt, "status",
                          status, "code", (json_int_t)code, "signal", sig, "error", error,
                          "duration_s", duration_s, "oom", oom);
    if (maxrss_mib > 0) { /* what the leader used, from wait4 */
        json_object_set_new(m, "maxrss_mib", json_real(maxrss_mib));
        json_object_set_new(m, "cpu_s", json_real(cpu_s));
    }
    if (rank) json_object_set_new(m, "rank", json_integer(rank));
    tp__agent_send(a, m, NULL, 0);
}

static void send_spawn_failed(tp_agent_t *a, int64_t trial, int64_t attempt, int rank,
                              const char *error, uint64_t t0) {
    send_exited(a, trial, attempt, rank, "spawn_failed", -1, 0, error, since_s(t0), 0, 0, 0);
}

/* Send the batch of a line splitter as one `report` message. */
static void flush_lines(tp_trial_t *t, tp_lines_t *l) {
    if (l->batch.len == 0) return;
    json_t *m = json_pack("{s:s, s:I, s:I, s:s}", "type", "report", "trial", (json_int_t)t->trial,
                          "attempt", (json_int_t)t->attempt, "channel",
                          l->kind == TP_LINES_FD ? "fd" : "stdout");
    if (t->rank) json_object_set_new(m, "rank", json_integer(t->rank));
    tp__agent_send(t->a, m, l->batch.data, l->batch.len);
    if (l->batch.cap > 4 * TP_AGENT_BATCH_MAX)
        tp__buf_free(&l->batch);
    else
        tp__buf_reset(&l->batch);
}

/* A chunk of stdout or stderr, for an orchestrator that does not share the
 * trial's directory: it keeps the logs in the experiment directory. */
static void send_log(tp_trial_t *t, int id, const char *data, size_t n) {
    json_t *m =
        json_pack("{s:s, s:I, s:I, s:s}", "type", "log", "trial", (json_int_t)t->trial, "attempt",
                  (json_int_t)t->attempt, "stream", id == TP_PIPE_STDOUT ? "stdout" : "stderr");
    if (t->rank) json_object_set_new(m, "rank", json_integer(t->rank));
    tp__agent_send(t->a, m, data, n);
}

static void send_garbage(tp_trial_t *t, tp_lines_t *l, const char *what) {
    flush_lines(t, l); /* keep the order of what the trial wrote */
    json_t *m = json_pack("{s:s, s:I, s:I, s:s, s:s}", "type", "garbage", "trial",
                          (json_int_t)t->trial, "attempt", (json_int_t)t->attempt, "channel",
                          l->kind == TP_LINES_FD ? "fd" : "stdout", "what", what);
    if (t->rank) json_object_set_new(m, "rank", json_integer(t->rank));
    tp__agent_send(t->a, m, NULL, 0);
}

static void garbage_fd(void *ctx, const char *what) {
    tp_trial_t *t = ctx;
    send_garbage(t, &t->fd_lines, what);
}

static void garbage_stdout(void *ctx, const char *what) {
    tp_trial_t *t = ctx;
    send_garbage(t, &t->out_lines, what);
}

/* ---- closing and finishing ------------------------------------------------ */

static void free_trial(tp_trial_t *t) {
    tp_agent_t *a = t->a;
    if (t->prev)
        t->prev->next = t->next;
    else if (a->trials == t)
        a->trials = t->next;
    if (t->next) t->next->prev = t->prev;
    a->ntrials--;
    tp__cgroup_trial_free(t);
    tp__lines_free(&t->fd_lines);
    tp__lines_free(&t->out_lines);
    tp__logfile_close(&t->logs[0]);
    tp__logfile_close(&t->logs[1]);
    if (t->ctl_fd >= 0) close(t->ctl_fd);
    free(t);
    tp__agent_trial_gone(a);
}

static void on_handle_closed(uv_handle_t *h) {
    tp_trial_t *t = h->data;
    if (--t->handles_open == 0) free_trial(t);
}

static void close_pipe(tp_trial_pipe_t *p) {
    if (!p->open) return;
    p->open = 0;
    p->reading = 0;
    uv_close((uv_handle_t *)&p->h, on_handle_closed);
}

/* Check whether any process of the group is left, reaping the group's
 * orphans that were handed to the agent as subreaper. */
static void check_group(tp_trial_t *t) {
    if (t->group_gone) return;
    while (waitpid(-t->pid, NULL, WNOHANG) > 0) {
    }
    if (kill(-t->pid, 0) < 0 && errno == ESRCH) t->group_gone = 1;
}

static const char *status_name(const tp_trial_t *t) {
    if (t->reason == TP_END_TIMEOUT) return "timeout";
    if (t->reason == TP_END_STOPPED) return "stopped";
    if (t->pause_requested && !t->term_signal && t->exit_code == 0) return "paused";
    return t->term_signal ? "signaled" : "exited";
}

/* When the leader exited, the pipes are drained and the group is gone (or
 * the linger ran out): flush reports, send `exited`, close the handles. */
static void maybe_finish(tp_trial_t *t) {
    if (t->exited_sent || !t->leader_exited) return;
    check_group(t);
    int pipes_open = 0;
    for (int i = 0; i < TP_NPIPES; i++)
        pipes_open |= t->pipes[i].open;
    /* The group is gone, yet its pipes are held open, or it was stopped or
     * gave up: look for processes of the attempt that escaped the group
     * (setsid, double fork) and end them too. Once per attempt. */
    if (t->group_gone && !t->escapes_reaped &&
        (pipes_open || t->reason != TP_END_NONE || t->linger_expired)) {
        t->escapes_reaped = 1;
        if (tp__reap_attempt(t->a, t->trial, t->attempt) > 0 && !t->linger_expired) return;
    }
    if (!t->linger_expired && (pipes_open || !t->group_gone)) return;
    for (int i = 0; i < TP_NPIPES; i++)
        close_pipe(&t->pipes[i]);
    tp__lines_eof(&t->fd_lines, garbage_fd, t);
    tp__lines_eof(&t->out_lines, garbage_stdout, t);
    flush_lines(t, &t->fd_lines);
    flush_lines(t, &t->out_lines);
    char error[160] = "";
    if (t->reason == TP_END_TIMEOUT)
        snprintf(error, sizeof error, "timed out after %gs", t->timeout_s);
    else if (t->reason == TP_END_STOPPED)
        snprintf(error, sizeof error, "stopped");
    if (!t->group_gone)
        snprintf(error + strlen(error), sizeof error - strlen(error),
                 "%sprocesses of group %ld still present", error[0] ? "; " : "", (long)t->pid);
    send_exited(t->a, t->trial, t->attempt, t->rank, status_name(t), t->exit_code, t->term_signal,
                error, since_s(t->t0), t->oom, t->maxrss_mib, t->cpu_s);
    t->exited_sent = 1;
    uv_timer_stop(&t->timer);
    uv_close((uv_handle_t *)&t->timer, on_handle_closed);
}

void tp__trial_on_sigchld(tp_trial_t *t) {
    if (t->leader_exited && !t->exited_sent && !t->group_gone) maybe_finish(t);
}

/* ---- pipes ------------------------------------------------------------------ */

static void on_alloc(uv_handle_t *h, size_t suggested, uv_buf_t *buf) {
    (void)suggested;
    tp_agent_t *a = ((tp_trial_pipe_t *)h)->t->a;
    *buf = uv_buf_init(a->pipebuf, sizeof a->pipebuf);
}

/* Watch stderr for the GPU running out of memory: check the read, and the
 * seam between the previous read's tail and this one's head, so a message
 * split across two reads is seen too. */
static void scan_oom(tp_trial_t *t, const char *data, size_t n) {
    const size_t cap = sizeof t->err_tail;
    char seam[2 * sizeof t->err_tail];
    size_t head = n < cap ? n : cap;
    memcpy(seam, t->err_tail, t->err_tail_len);
    memcpy(seam + t->err_tail_len, data, head);
    if (tp__gpu_oom_line(seam, t->err_tail_len + head) || tp__gpu_oom_line(data, n)) t->oom = 1;
    /* The new tail: the last `cap` bytes of the old tail followed by data. */
    if (n >= cap) {
        memcpy(t->err_tail, data + n - cap, cap);
        t->err_tail_len = cap;
        return;
    }
    size_t drop = t->err_tail_len + n > cap ? t->err_tail_len + n - cap : 0;
    memmove(t->err_tail, t->err_tail + drop, t->err_tail_len - drop);
    t->err_tail_len -= drop;
    memcpy(t->err_tail + t->err_tail_len, data, n);
    t->err_tail_len += n;
}

/* One read: stdout/stderr to their log, stdout also through the name=value
 * splitter, report fd through the line splitter; one `report` per read. */
static void on_read(uv_stream_t *s, ssize_t n, const uv_buf_t *buf) {
    tp_trial_pipe_t *p = (tp_trial_pipe_t *)s;
    tp_trial_t *t = p->t;
    int id = (int)(p - t->pipes);
    if (n > 0) {
        if (id == TP_PIPE_REPORT) {
            tp__lines_feed(&t->fd_lines, buf->base, (size_t)n, garbage_fd, t);
            flush_lines(t, &t->fd_lines);
        } else {
            tp__logfile_write(&t->logs[id], buf->base, (size_t)n);
            if (t->stream_logs) send_log(t, id, buf->base, (size_t)n);
            if (id == TP_PIPE_STDERR && !t->oom) scan_oom(t, buf->base, (size_t)n);
            if (id == TP_PIPE_STDOUT) {
                tp__lines_feed(&t->out_lines, buf->base, (size_t)n, garbage_stdout, t);
                if (t->out_lines.batch.len > 0) flush_lines(t, &t->out_lines);
            }
        }
        return;
    }
    if (n == 0) return;
    /* EOF or error: the stream is over. */
    if (id == TP_PIPE_REPORT) {
        tp__lines_eof(&t->fd_lines, garbage_fd, t);
        flush_lines(t, &t->fd_lines);
    } else if (id == TP_PIPE_STDOUT) {
        tp__lines_eof(&t->out_lines, garbage_stdout, t);
        flush_lines(t, &t->out_lines);
    }
    close_pipe(p);
    maybe_finish(t);
}

void tp__trial_set_reading(tp_trial_t *t, int on) {
    for (int i = 0; i < TP_NPIPES; i++) {
        tp_trial_pipe_t *p = &t->pipes[i];
        if (!p->open || p->reading == on) continue;
        if (on)
            p->reading = uv_read_start((uv_stream_t *)&p->h, on_alloc, on_read) == 0;
        else {
            uv_read_stop((uv_stream_t *)&p->h);
            p->reading = 0;
        }
    }
}

/* ---- signals and timers ------------------------------------------------------ */

static void arm(tp_trial_t *t, tp_timer_phase_t phase, double s);

static void kill_group(tp_trial_t *t, int sig) {
    if (t->pid > 0) kill(-t->pid, sig);
}

static void on_timer(uv_timer_t *h) {
    tp_trial_t *t = h->data;
    tp_timer_phase_t phase = t->phase;
    t->phase = TP_TIMER_NONE;
    switch (phase) {
    case TP_TIMER_TIMEOUT:
        tp__trial_stop(t, TP_END_TIMEOUT);
        break;
    case TP_TIMER_GRACE:
        kill_group(t, SIGKILL);
        break;
    case TP_TIMER_PAUSE:
        /* It did not checkpoint and exit in time: stop it (TERM, KILL). */
        tp__trial_stop(t, TP_END_STOPPED);
        break;
    case TP_TIMER_LINGER:
        if (t->a->paused) {
            /* Our own output is backed up, so the pipes may just be unread:
             * wait, rather than lose the attempt's last reports. */
            arm(t, TP_TIMER_LINGER, TP_AGENT_LINGER_S);
            break;
        }
        t->linger_expired = 1;
        maybe_finish(t);
        break;
    case TP_TIMER_NONE:
        break;
    }
}

static void arm(tp_trial_t *t, tp_timer_phase_t phase, double s) {
    t->phase = phase;
    uint64_t ms = s <= 0 ? 0 : (uint64_t)(s * 1000.0 + 0.5);
    uv_timer_start(&t->timer, on_timer, ms, 0);
}

/* SIGTERM the group now and SIGKILL it after grace_s (at once when grace is
 * 0). A second stop of an ending attempt changes nothing. */
void tp__trial_stop(tp_trial_t *t, tp_end_reason_t reason) {
    if (t->leader_exited || t->reason != TP_END_NONE) return;
    t->reason = reason;
    if (t->grace_s <= 0) {
        kill_group(t, SIGKILL);
        uv_timer_stop(&t->timer);
        t->phase = TP_TIMER_NONE;
        return;
    }
    kill_group(t, SIGTERM);
    arm(t, TP_TIMER_GRACE, t->grace_s);
}

/* Ask the attempt to checkpoint and exit: "pause" on its control channel
 * and, if the experiment says so, a signal to its leader (not the group:
 * helpers that do not handle it would die). After grace_s it is stopped. */
void tp__trial_pause(tp_trial_t *t) {
    if (t->leader_exited || t->reason != TP_END_NONE || t->pause_requested) return;
    t->pause_requested = 1;
    if (t->ctl_fd >= 0 && write(t->ctl_fd, "pause\n", 6) < 0 && errno != EAGAIN)
        tp__log(TP_LOG_DEBUG, "agent: control channel of trial %lld: %s", (long long)t->trial,
                strerror(errno));
    if (t->pause_signal > 0 && t->pid > 0) kill(t->pid, t->pause_signal);
    arm(t, TP_TIMER_PAUSE, t->grace_s > 0 ? t->grace_s : 0);
}

void tp__trial_drop(tp_trial_t *t, int config) {
    if (t->leader_exited || t->reason != TP_END_NONE || t->ctl_fd < 0) return;
    char line[32];
    int n = snprintf(line, sizeof line, "drop %d\n", config);
    if (write(t->ctl_fd, line, (size_t)n) < 0 && errno != EAGAIN)
        tp__log(TP_LOG_DEBUG, "agent: control channel of trial %lld: %s", (long long)t->trial,
                strerror(errno));
}

/* The leader exited (reaped by the agent's SIGCHLD handler with wait
 * status `status`): kill what is left of its group, then wait (at most the
 * linger) for the pipes to drain and the group to go. */
void tp__trial_leader_exited(tp_trial_t *t, int status, const struct rusage *ru) {
    t->leader_exited = 1;
    if (ru) { /* ru_maxrss is in KiB on Linux */
        t->maxrss_mib = (double)ru->ru_maxrss / 1024.0;
        t->cpu_s = (double)ru->ru_utime.tv_sec + (double)ru->ru_utime.tv_usec / 1e6 +
                   (double)ru->ru_stime.tv_sec + (double)ru->ru_stime.tv_usec / 1e6;
    }
    t->term_signal = WIFSIGNALED(status) ? WTERMSIG(status) : 0;
    t->exit_code = t->term_signal ? -1 : WEXITSTATUS(status);
    kill_group(t, SIGKILL);
    tp__cgroup_trial_kill(t); /* and whatever of it left the group */
    tp__reap_orphans(t->a);   /* and whatever of it came back to the agent, cgroup or not */
    arm(t, TP_TIMER_LINGER, TP_AGENT_LINGER_S);
    maybe_finish(t);
}

/* ---- launch -------------------------------------------------------------------- */

typedef struct launch_args {
    int64_t trial, attempt;
    json_t *argv, *env, *params; /* borrowed from the message */
    json_t *passthrough;         /* names/patterns of the agent's env passed on; NULL: all */
    int dir_mode;                /* of the directories created for it (`permissions`) */
    const char *cwd, *dir;
    double timeout_s, grace_s;
    uint64_t log_limit;
    const char *checkpoint_dir; /* created if given: persists across attempts */
    int pause_signal;           /* sent to the leader on `pause`, 0: none */
    int rank;                   /* process of a multi-process attempt, 0 if one */
    int master_port;            /* picked here for rank 0 when asked, else 0 */
} launch_args_t;

/* A JSON string that a C string can carry: no NUL byte inside. */
static int is_cstring(const json_t *v) {
    return json_is_string(v) && strlen(json_string_value(v)) == json_string_length(v);
}

/* Validate a launch message's members (beyond trial/attempt). Returns 0 or
 * -EINVAL with what is wrong in err. */
static int parse_launch(json_t *m, launch_args_t *la, tp_error_t *err) {
    json_t *v;
    la->argv = json_object_get(m, "argv");
    if (!json_is_array(la->argv) || json_array_size(la->argv) == 0)
        return tp__errorf(err, -EINVAL,
                          "launch message: \"argv\" must be a non-empty array of strings");
    size_t i;
    json_array_foreach(la->argv, i, v) {
        if (!is_cstring(v))
            return tp__errorf(err, -EINVAL,
                              "launch message: argv[%zu] is not a string without NUL bytes", i);
    }
    la->env = json_object_get(m, "env");
    if (la->env && !json_is_null(la->env)) {
        if (!json_is_object(la->env))
            return tp__errorf(err, -EINVAL, "launch message: \"env\" must be an object of strings");
        const char *k;
        json_object_foreach(la->env, k, v) {
            if (!is_cstring(v))
                return tp__errorf(err, -EINVAL,
                                  "launch message: env \"%s\" is not a string without NUL bytes",
                                  k);
            if (!*k || strchr(k, '=') ||
                strlen(k) != json_object_iter_key_len(json_object_key_to_iter(k)))
                return tp__errorf(err, -EINVAL,
                                  "launch message: env name \"%s\" is empty or has '='", k);
        }
    } else {
        la->env = NULL;
    }
    la->passthrough = json_object_get(m, "env_passthrough");
    if (la->passthrough && !json_is_array(la->passthrough))
        return tp__errorf(err, -EINVAL,
                          "launch message: \"env_passthrough\" must be an array of patterns");
    json_array_foreach(la->passthrough, i, v) {
        if (!is_cstring(v))
            return tp__errorf(err, -EINVAL, "launch message: env_passthrough[%zu] is not a string",
                              i);
    }
    v = json_object_get(m, "dir");
    if (!is_cstring(v) || !*json_string_value(v))
        return tp__errorf(err, -EINVAL, "launch message: \"dir\" must be a non-empty string");
    la->dir = json_string_value(v);
    v = json_object_get(m, "cwd");
    la->cwd = NULL;
    if (v && !json_is_null(v)) {
        if (!is_cstring(v))
            return tp__errorf(err, -EINVAL,
                              "launch message: \"cwd\" must be a string without NUL bytes");
        if (*json_string_value(v)) la->cwd = json_string_value(v);
    }
    la->params = json_object_get(m, "params");
    if (la->params && !json_is_object(la->params))
        return tp__errorf(err, -EINVAL, "launch message: \"params\" must be an object");
    struct {
        const char *name;
        double *out;
        double dflt;
    } nums[] = {
        {"timeout_s", &la->timeout_s, 0.0},
        {"grace_s", &la->grace_s, 10.0},
    };
    for (size_t k = 0; k < TP_ARRAY_LEN(nums); k++) {
        v = json_object_get(m, nums[k].name);
        *nums[k].out = nums[k].dflt;
        if (!v || json_is_null(v)) continue;
        if (!json_is_number(v) || json_number_value(v) < 0 || json_number_value(v) > 1e9)
            return tp__errorf(err, -EINVAL,
                              "launch message: \"%s\" must be a number of seconds >= 0",
                              nums[k].name);
        *nums[k].out = json_number_value(v);
    }
    v = json_object_get(m, "checkpoint_dir");
    la->checkpoint_dir = is_cstring(v) && *json_string_value(v) ? json_string_value(v) : NULL;
    v = json_object_get(m, "dir_mode");
    la->dir_mode = json_is_integer(v) ? (int)(json_integer_value(v) & 0777) : 0755;
    v = json_object_get(m, "pause_signal");
    la->pause_signal = json_is_integer(v) ? (int)json_integer_value(v) : 0;
    if (la->pause_signal < 0 || la->pause_signal >= 65)
        return tp__errorf(err, -EINVAL, "launch message: \"pause_signal\" is not a signal number");
    v = json_object_get(m, "log_limit");
    la->log_limit = 0;
    if (v && !json_is_null(v)) {
        if (!json_is_integer(v) || json_integer_value(v) < 0)
            return tp__errorf(err, -EINVAL,
                              "launch message: \"log_limit\" must be an integer >= 0 (bytes)");
        la->log_limit = (uint64_t)json_integer_value(v);
    }
    return 0;
}

static char *strf(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static char *strf(const char *fmt, ...) {
    tp_buf_t b;
    tp__buf_init(&b);
    va_list ap;
    va_start(ap, fmt);
    char tmp[512];
    int n = vsnprintf(tmp, sizeof tmp, fmt, ap);
    va_end(ap);
    if (n >= 0 && (size_t)n < sizeof tmp) {
        tp__buf_append(&b, tmp, (size_t)n);
    } else {
        va_start(ap, fmt);
        char *big = NULL;
        if (vasprintf(&big, fmt, ap) >= 0) tp__buf_puts(&b, big);
        va_end(ap);
        free(big);
    }
    if (!b.data) tp__buf_puts(&b, "");
    return tp__buf_steal(&b);
}

static int env_key_is(const char *entry, const char *key, size_t klen) {
    return strncmp(entry, key, klen) == 0 && entry[klen] == '=';
}

static const char *const own_vars[] = {
    "TUNEPACK_REPORT_FD", "TUNEPACK_CONTROL_FD", "TUNEPACK_CHECKPOINT_DIR", "TUNEPACK_TRIAL_ID",
    "TUNEPACK_ATTEMPT",   "TUNEPACK_TRIAL_DIR",  "TUNEPACK_RUN_TOKEN",      "TUNEPACK_AGENT"};

/* Whether name matches one of the patterns (fnmatch globs). O(patterns). */
static int passed_through(const json_t *patterns, const char *name) {
    size_t i;
    json_t *p;
    json_array_foreach(patterns, i, p) {
        if (fnmatch(json_string_value(p), name, 0) == 0) return 1;
    }
    return 0;
}

/* The trial's environment: the agent's (only the names the launch passes
 * through, when it says), minus names the launch or the agent sets, plus
 * those. NULL-terminated; free with free_strv. */
static char **build_env(tp_agent_t *a, const launch_args_t *la) {
    size_t n = 0;
    while (environ[n])
        n++;
    size_t extra = (la->env ? json_object_size(la->env) : 0) + TP_ARRAY_LEN(own_vars) + 1;
    char **out = tp__xcalloc(n + extra + 1, sizeof *out);
    size_t k = 0;
    for (size_t i = 0; i < n; i++) {
        const char *e = environ[i];
        const char *eq = strchr(e, '=');
        if (!eq) continue;
        size_t klen = (size_t)(eq - e);
        int skip = 0;
        for (size_t j = 0; j < TP_ARRAY_LEN(own_vars) && !skip; j++)
            skip = strlen(own_vars[j]) == klen && env_key_is(e, own_vars[j], klen);
        char *key = tp__xmalloc(klen + 1);
        memcpy(key, e, klen);
        key[klen] = '\0';
        if (!skip && la->env) skip = json_object_get(la->env, key) != NULL;
        if (!skip && la->passthrough) skip = !passed_through(la->passthrough, key);
        free(key);
        if (!skip) out[k++] = tp__strdup(e);
    }
    if (la->env) {
        const char *key;
        json_t *v;
        json_object_foreach(la->env, key, v) {
            out[k++] = strf("%s=%s", key, json_string_value(v));
        }
    }
    out[k++] = strf("TUNEPACK_REPORT_FD=3");
    out[k++] = strf("TUNEPACK_TRIAL_ID=%lld", (long long)la->trial);
    out[k++] = strf("TUNEPACK_ATTEMPT=%lld", (long long)la->attempt);
    out[k++] = strf("TUNEPACK_TRIAL_DIR=%s", la->dir);
    out[k++] = strf("TUNEPACK_RUN_TOKEN=%s", a->token ? a->token : "");
    out[k++] = strf("TUNEPACK_AGENT=%s", a->stamp);
    out[k++] = strf("TUNEPACK_CONTROL_FD=%d", TP_NPIPES + 1);
    if (la->checkpoint_dir) out[k++] = strf("TUNEPACK_CHECKPOINT_DIR=%s", la->checkpoint_dir);
    if (la->master_port) out[k++] = strf("MASTER_PORT=%d", la->master_port);
    out[k] = NULL;
    return out;
}

static void free_strv(char **v) {
    if (!v) return;
    for (size_t i = 0; v[i]; i++)
        free(v[i]);
    free(v);
}

/* Create dir, write params.json, rotate the previous attempt's logs, open
 * the new ones. Returns 0 or a negative code with err filled. */
static int prepare_dir(tp_trial_t *t, const launch_args_t *la, tp_error_t *err) {
    int rc = tp__mkdir_p_mode(la->dir, la->dir_mode, err);
    if (rc == 0 && la->checkpoint_dir) rc = tp__mkdir_p_mode(la->checkpoint_dir, la->dir_mode, err);
    if (rc < 0) return rc;
    char *path = strf("%s/params.json", la->dir);
    char *text = la->params ? json_dumps(la->params, JSON_INDENT(2)) : tp__strdup("{}");
    rc = text ? tp__write_file(path, text, strlen(text), err)
              : tp__errorf(err, -ENOMEM, "cannot encode params for %s", path);
    free(text);
    free(path);
    if (rc < 0) return rc;
    static const char *const names[2] = {"stdout", "stderr"};
    for (int i = 0; i < 2 && rc == 0; i++)
        rc = tp__logfile_open_attempt(&t->logs[i], la->dir, names[i], la->attempt, la->log_limit,
                                      err);
    return rc;
}

static void send_launch_error(tp_agent_t *a, json_t *m, const char *what) {
    json_t *tr = json_object_get(m, "trial"), *at = json_object_get(m, "attempt");
    if (json_is_integer(tr) && json_is_integer(at)) {
        send_spawn_failed(a, json_integer_value(tr), json_integer_value(at),
                          (int)json_integer_value(json_object_get(m, "rank")), what, uv_hrtime());
        return;
    }
    /* Without trial and attempt there is nobody to answer: the orchestrator
     * is broken, and `error` means the agent cannot go on. */
    tp__agent_send(a, json_pack("{s:s, s:s}", "type", "error", "message", what), NULL, 0);
    tp__agent_fail(a);
}

/* Handle `launch`: validate, prepare the directory, spawn with its own
 * session (pgid == pid), then `started`, or `exited` spawn_failed. Cost: a
 * few file operations and one fork/exec; nothing blocks on the trial. */
void tp__trial_launch(tp_agent_t *a, json_t *m) {
    tp_error_t err = {0};
    launch_args_t la;
    memset(&la, 0, sizeof la);
    json_t *tr = json_object_get(m, "trial"), *at = json_object_get(m, "attempt");
    if (!json_is_integer(tr) || !json_is_integer(at)) {
        send_launch_error(a, m, "launch message: \"trial\" and \"attempt\" must be integers");
        return;
    }
    la.trial = json_integer_value(tr);
    la.attempt = json_integer_value(at);
    la.rank = (int)json_integer_value(json_object_get(m, "rank"));
    if (tp__trial_find(a, la.trial, la.attempt, la.rank)) {
        /* A second launch of the attempt (a message repeated): the one that
         * runs answers it; a `spawn_failed` here would be a second `exited`
         * of the same attempt. */
        tp__log(TP_LOG_WARN,
                "agent: launch of trial %lld attempt %lld (rank %d) ignored: it "
                "already runs here",
                (long long)la.trial, (long long)la.attempt, la.rank);
        return;
    }
    if (parse_launch(m, &la, &err) < 0) {
        send_launch_error(a, m, err.msg);
        return;
    }
    uint64_t t0 = uv_hrtime();
    if (a->stopping) {
        send_spawn_failed(a, la.trial, la.attempt, la.rank, "the agent is shutting down", t0);
        return;
    }
    if (json_is_true(json_object_get(m, "pick_master_port")) &&
        (la.master_port = tp__free_port()) <= 0) {
        send_spawn_failed(a, la.trial, la.attempt, la.rank,
                          "no free TCP port for MASTER_PORT on this node", t0);
        return;
    }
    tp_trial_t *t = tp__xcalloc(1, sizeof *t);
    t->a = a;
    t->trial = la.trial;
    t->attempt = la.attempt;
    t->rank = la.rank;
    t->stream_logs = json_is_true(json_object_get(m, "stream_logs"));
    t->timeout_s = la.timeout_s;
    t->grace_s = la.grace_s;
    t->t0 = t0;
    t->logs[0].fd = t->logs[1].fd = -1;
    t->ctl_fd = -1;
    tp__lines_init(&t->fd_lines, TP_LINES_FD);
    tp__lines_init(&t->out_lines, TP_LINES_STDOUT);
    if (prepare_dir(t, &la, &err) < 0) {
        send_spawn_failed(a, la.trial, la.attempt, la.rank, err.msg, t0);
        tp__lines_free(&t->fd_lines);
        tp__lines_free(&t->out_lines);
        tp__logfile_close(&t->logs[0]);
        tp__logfile_close(&t->logs[1]);
        free(t);
        return;
    }
    /* From here the trial is in the list and freed by its close callbacks. */
    t->next = a->trials;
    if (a->trials) a->trials->prev = t;
    a->trials = t;
    a->ntrials++;
    uv_timer_init(&a->loop, &t->timer);
    t->timer.data = t;
    t->handles_open = 1; /* the timer; each pipe adds one */
    size_t argc = json_array_size(la.argv);
    char **args = tp__xcalloc(argc + 1, sizeof *args);
    for (size_t i = 0; i < argc; i++)
        args[i] = (char *)json_string_value(json_array_get(la.argv, i));
    char **env = build_env(a, &la);
    int fds[TP_NPIPES][2];
    t->pause_signal = la.pause_signal;
    tp__cgroup_trial_enter(a, t); /* born in its cgroup */
    int rc = tp__spawn_trial(args, env, la.cwd, fds, &t->ctl_fd, &t->pid);
    tp__cgroup_trial_leave(a, t);
    free_strv(env);
    if (rc == 0) {
        for (int i = 0; i < TP_NPIPES; i++) {
            t->pipes[i].t = t;
            uv_pipe_init(&a->loop, &t->pipes[i].h, 0);
            t->pipes[i].h.data = t;
            t->pipes[i].open = 1;
            t->handles_open++;
            if (uv_pipe_open(&t->pipes[i].h, fds[i][0]) != 0) close(fds[i][0]);
        }
    } else {
        tp__cgroup_trial_free(t);
        char msg[1400];
        struct stat st;
        if (la.cwd && stat(la.cwd, &st) != 0)
            snprintf(msg, sizeof msg, "cannot run \"%s\": working directory %s: %s", args[0],
                     la.cwd, strerror(errno));
        else
            snprintf(msg, sizeof msg, "cannot run \"%s\": %s", args[0], strerror(-rc));
        free(args);
        send_spawn_failed(a, t->trial, t->attempt, t->rank, msg, t0);
        t->exited_sent = 1;
        t->leader_exited = 1;
        uv_close((uv_handle_t *)&t->timer, on_handle_closed);
        return;
    }
    free(args);
    json_t *started =
        json_pack("{s:s, s:I, s:I, s:i}", "type", "started", "trial", (json_int_t)t->trial,
                  "attempt", (json_int_t)t->attempt, "pid", (int)t->pid);
    if (t->rank) json_object_set_new(started, "rank", json_integer(t->rank));
    if (la.master_port) json_object_set_new(started, "master_port", json_integer(la.master_port));
    tp__agent_send(a, started, NULL, 0);
    tp__trial_set_reading(t, !a->paused);
    if (t->timeout_s > 0) arm(t, TP_TIMER_TIMEOUT, t->timeout_s);
}
