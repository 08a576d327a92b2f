/* fake_agent: a simulated agent for one node, for bench/cluster_load.py.
 *
 *   fake_agent NODE [--report-hz H] [--trial-s S] [--trial-jitter J] [--batch K]
 *                   [--gpus N] [--cpus N] [--gpu-mib M] [--usage-hz U] [--tick-ms T]
 *                   [--seed N]
 *
 * It speaks the real protocol (docs/protocol.md) on stdin/stdout but runs no
 * process: `hello` is answered with NODE, N GPUs of M MiB (healthy, NVML
 * "ok", no MPS control); `launch` is answered by `started` at once, then the
 * attempt sends `report` messages on channel "fd" at H lines per second (K
 * lines per message) for S seconds (uniform in S*(1-J) .. S*(1+J), drawn from
 * the seed, the node and the trial), its last line carrying the objective,
 * then `exited` (code 0). `stop` and `pause` end an attempt at once (status
 * stopped / paused); `shutdown` ends every attempt, then `bye`; EOF on stdin
 * ends it. With U > 0 it sends a `usage` sample U times per second.
 *
 * Backpressure as in the real agent: while more than 1 MiB is unsent, the
 * attempts make no progress (a real trial would block on its report pipe),
 * so an orchestrator that cannot keep up slows the trials down instead of
 * letting this process buffer without bound.
 *
 * Cheap on purpose: one poll loop, deadlines handled up to T ms early so
 * that several fall into one wakeup and one write; the frequent frames
 * (report, started, exited) are formatted by hand; incoming frames are
 * decoded by the project's codec (tp__proto_*). */
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <poll.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "proto/proto.h"

#define OUT_HIGH (1u << 20) /* unsent bytes past which attempts stall */

typedef struct attempt {
    int64_t trial, attempt;
    int rank;
    int gpu;          /* GPU index from CUDA_VISIBLE_DEVICES, -1 if none */
    double x;         /* the first numeric parameter: the objective depends on it */
    double t0;        /* started at */
    double next;      /* next report due */
    long sent, total; /* report lines sent / to send */
    int pid;          /* the fake pid */
} attempt_t;

static struct {
    const char *node;
    double hz, trial_s, jitter, usage_hz, tick_s;
    int batch, gpus, cpus;
    long gpu_mib;
    unsigned long seed;
} opt = {.hz = 4,
         .trial_s = 3,
         .jitter = 0.33,
         .usage_hz = 1,
         .tick_s = 0.010,
         .batch = 1,
         .gpus = 8,
         .cpus = 64,
         .gpu_mib = 81920,
         .seed = 1};

static attempt_t *live;
static size_t nlive, caplive;
static tp_buf_t out;   /* frames not yet written */
static size_t out_off; /* bytes of `out` already written */
static int next_pid = 100000;
static int said_hello;

static double now_s(void) {
    return tp__mono_s();
}

/* ---- output ------------------------------------------------------------------- */
static void put_u32(unsigned char *p, uint32_t v) {
    p[0] = (unsigned char)(v >> 24);
    p[1] = (unsigned char)(v >> 16);
    p[2] = (unsigned char)(v >> 8);
    p[3] = (unsigned char)v;
}

/* One frame: head (JSON text) and payload, appended to `out`. */
static void frame(const char *head, size_t hlen, const char *payload, size_t plen) {
    unsigned char hdr[8];
    put_u32(hdr, (uint32_t)(4 + hlen + plen));
    put_u32(hdr + 4, (uint32_t)hlen);
    tp__buf_append(&out, hdr, 8);
    tp__buf_append(&out, head, hlen);
    if (plen) tp__buf_append(&out, payload, plen);
}

static void frame_json(json_t *head) {
    tp__proto_encode(&out, head, NULL, 0);
    json_decref(head);
}

static size_t pending(void) {
    return out.len - out_off;
}

/* Write what can be written without blocking. Returns -1 if stdout is gone. */
static int flush_out(void) {
    while (pending()) {
        ssize_t n = write(1, out.data + out_off, pending());
        if (n < 0) {
            if (errno == EINTR) continue;
            if (errno == EAGAIN) break;
            return -1;
        }
        out_off += (size_t)n;
    }
    if (out_off == out.len) {
        tp__buf_reset(&out);
        out_off = 0;
    } else if (out_off > (4u << 20)) {
        tp__buf_consume(&out, out_off);
        out_off = 0;
    }
    return 0;
}

/* ---- attempts ------------------------------------------------------------------ */
static uint64_t mix(uint64_t z) {
    z += 0x9e3779b97f4a7c15ull;
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

static uint64_t node_hash;

static double unit(int64_t trial, int64_t attempt, unsigned salt) {
    uint64_t z =
        mix(opt.seed ^ node_hash ^ mix((uint64_t)trial * 1000003u + (uint64_t)attempt) ^ salt);
    return (double)(z >> 11) / 9007199254740992.0;
}

static double loss_at(const attempt_t *a, long step) {
    double final = (a->x - 0.3) * (a->x - 0.3) + 0.01 * unit(a->trial, a->attempt, 7);
    return final + 1.0 / (double)(step + 1);
}

static int head_ids(char *h, size_t n, const char *type, const attempt_t *a) {
    int k = snprintf(h, n, "{\"type\":\"%s\",\"trial\":%lld,\"attempt\":%lld", type,
                     (long long)a->trial, (long long)a->attempt);
    if (a->rank) k += snprintf(h + k, n - (size_t)k, ",\"rank\":%d", a->rank);
    return k;
}

static void send_exited(const attempt_t *a, const char *status, int code, int sig, double now) {
    char h[400];
    int k = head_ids(h, sizeof h, "exited", a);
    k += snprintf(h + k, sizeof h - (size_t)k,
                  ",\"status\":\"%s\",\"code\":%d,\"signal\":%d,\"error\":\"\","
                  "\"duration_s\":%.3f,\"oom\":false}",
                  status, code, sig, now - a->t0);
    frame(h, (size_t)k, NULL, 0);
}

/* Send the attempt's next message of up to `batch` lines; the last line of
 * all is the final value. */
static void send_report(attempt_t *a) {
    char payload[128 * 64];
    size_t p = 0;
    for (int i = 0; i < opt.batch && a->sent < a->total && p + 128 < sizeof payload; i++) {
        long step = a->sent++;
        p += (size_t)snprintf(payload + p, sizeof payload - p, "{\"step\": %ld, \"loss\": %.6f}\n",
                              step, loss_at(a, step));
    }
    char h[200];
    int k = head_ids(h, sizeof h, "report", a);
    k += snprintf(h + k, sizeof h - (size_t)k, ",\"channel\":\"fd\"}");
    frame(h, (size_t)k, payload, p);
}

static void drop(size_t i) {
    live[i] = live[--nlive];
}

static int json_num(json_t *v, double *x) {
    if (json_is_number(v)) {
        *x = json_number_value(v);
        return 1;
    }
    if (json_is_string(v)) {
        char *end;
        *x = strtod(json_string_value(v), &end);
        return end != json_string_value(v);
    }
    return 0;
}

static void on_launch(json_t *m, double now) {
    json_int_t trial = -1, attempt = -1, rank = 0;
    if (json_unpack(m, "{s:I, s:I, s?I}", "trial", &trial, "attempt", &attempt, "rank", &rank)) {
        frame_json(json_pack("{s:s, s:s}", "type", "error", "message",
                             "launch without integer trial and attempt"));
        return;
    }
    if (nlive == caplive) {
        caplive = caplive ? caplive * 2 : 64;
        live = tp__xrealloc(live, caplive * sizeof *live);
    }
    attempt_t *a = &live[nlive++];
    memset(a, 0, sizeof *a);
    a->trial = trial;
    a->attempt = attempt;
    a->rank = (int)rank;
    a->gpu = -1;
    a->x = 0.5;
    const char *key;
    json_t *val;
    json_object_foreach(json_object_get(m, "params"), key, val) {
        if (json_num(val, &a->x)) break;
    }
    const char *vis =
        json_string_value(json_object_get(json_object_get(m, "env"), "CUDA_VISIBLE_DEVICES"));
    if (vis) { /* our uuids end in -<index> */
        const char *dash = strrchr(vis, '-');
        a->gpu = atoi(dash ? dash + 1 : vis);
    }
    double dur = opt.trial_s * (1.0 + opt.jitter * (2.0 * unit(trial, attempt, 1) - 1.0));
    a->total = lround(dur * opt.hz);
    if (a->total < 1) a->total = 1;
    a->t0 = now;
    a->next = now + (double)opt.batch / opt.hz;
    a->pid = next_pid++;
    char h[300];
    int k = head_ids(h, sizeof h, "started", a);
    k += snprintf(h + k, sizeof h - (size_t)k, ",\"pid\":%d", a->pid);
    if (json_is_true(json_object_get(m, "pick_master_port")))
        k += snprintf(h + k, sizeof h - (size_t)k, ",\"master_port\":%d",
                      20000 + (int)(mix((uint64_t)trial) % 20000));
    k += snprintf(h + k, sizeof h - (size_t)k, "}");
    frame(h, (size_t)k, NULL, 0);
}

static void end_matching(json_t *m, const char *status, int code, int sig, double now) {
    json_int_t trial = -1, attempt = -1;
    if (json_unpack(m, "{s:I, s:I}", "trial", &trial, "attempt", &attempt)) return;
    for (size_t i = 0; i < nlive;) {
        if (live[i].trial == trial && live[i].attempt == attempt) {
            send_exited(&live[i], status, code, sig, now);
            drop(i);
        } else {
            i++;
        }
    }
}

static void on_hello(json_t *m) {
    json_int_t proto = -1;
    json_unpack(m, "{s?I}", "protocol", &proto);
    if (proto != TP_PROTO_VERSION) {
        char text[160];
        snprintf(text, sizeof text, "protocol version %lld is not supported; this agent speaks %d",
                 (long long)proto, TP_PROTO_VERSION);
        frame_json(json_pack("{s:s, s:s}", "type", "error", "message", text));
        flush_out();
        exit(1);
    }
    json_t *gpus = json_array();
    for (int i = 0; i < opt.gpus; i++) {
        char name[64], uuid[300];
        snprintf(name, sizeof name, "Fake GPU %dG", (int)(opt.gpu_mib / 1024));
        snprintf(uuid, sizeof uuid, "GPU-fake-%s-%d", opt.node, i);
        json_array_append_new(gpus,
                              json_pack("{s:i, s:s, s:s, s:I, s:i, s:b, s:s}", "index", i, "name",
                                        name, "uuid", uuid, "memory_mib", (json_int_t)opt.gpu_mib,
                                        "memory_used_mib", 0, "healthy", 1, "error", ""));
    }
    frame_json(json_pack("{s:s, s:i, s:s, s:i, s:i, s:s, s:i, s:o, s:s, s:b}", "type", "hello",
                         "protocol", TP_PROTO_VERSION, "node", opt.node, "cpus", opt.cpus, "pid",
                         (int)getpid(), "version", "fake", "reaped", 0, "gpus", gpus, "nvml", "ok",
                         "mps_control", 0));
    said_hello = 1;
}

static void send_usage(void) {
    tp_buf_t b;
    tp__buf_init(&b);
    tp__buf_puts(&b, "{\"type\":\"usage\",\"gpus\":[");
    for (int i = 0; i < opt.gpus; i++) {
        long used = 0;
        for (size_t k = 0; k < nlive; k++)
            if (live[k].gpu == i) used += 2048;
        tp__buf_printf(&b,
                       "%s{\"index\":%d,\"memory_mib\":%ld,\"memory_used_mib\":%ld,\"util\":%d,"
                       "\"healthy\":true,\"error\":\"\",\"foreign_mib\":0,\"foreign\":[]}",
                       i ? "," : "", i, opt.gpu_mib, used, used ? 90 : 0);
    }
    tp__buf_puts(&b, "],\"trials\":[");
    int first = 1;
    for (size_t k = 0; k < nlive; k++) {
        if (live[k].gpu < 0) continue;
        tp__buf_printf(&b,
                       "%s{\"trial\":%lld,\"attempt\":%lld,\"gpu\":%d,\"pid\":%d,"
                       "\"used_mib\":2048,\"sm_util\":20}",
                       first ? "" : ",", (long long)live[k].trial, (long long)live[k].attempt,
                       live[k].gpu, live[k].pid);
        first = 0;
    }
    tp__buf_puts(&b, "]}");
    frame(b.data, b.len, NULL, 0);
    tp__buf_free(&b);
}

/* Send what is due by `horizon`; returns the next deadline (INFINITY: none). */
static double advance(double now, double horizon) {
    double next = INFINITY;
    if (pending() > OUT_HIGH) return now + opt.tick_s; /* blocked, as a trial would be */
    double period = (double)opt.batch / opt.hz;
    for (size_t i = 0; i < nlive;) {
        attempt_t *a = &live[i];
        while (a->next <= horizon && a->sent < a->total) {
            send_report(a);
            a->next += period;
            if (a->next < now - period) a->next = now; /* fell behind: no burst */
        }
        if (a->sent >= a->total) {
            send_exited(a, "exited", 0, 0, now);
            drop(i);
            continue;
        }
        if (a->next < next) next = a->next;
        i++;
    }
    return next;
}

static void usage_exit(void) {
    fprintf(stderr, "usage: fake_agent NODE [--report-hz H] [--trial-s S] [--trial-jitter J] "
                    "[--batch K] [--gpus N] [--cpus N] [--gpu-mib M] [--usage-hz U] [--tick-ms T] "
                    "[--seed N]\n");
    exit(2);
}

int main(int argc, char **argv) {
    if (argc < 2 || argv[1][0] == '-') usage_exit();
    opt.node = argv[1];
    for (int i = 2; i < argc; i++) {
        if (i + 1 >= argc) usage_exit();
        const char *k = argv[i], *v = argv[++i];
        if (!strcmp(k, "--report-hz"))
            opt.hz = atof(v);
        else if (!strcmp(k, "--trial-s"))
            opt.trial_s = atof(v);
        else if (!strcmp(k, "--trial-jitter"))
            opt.jitter = atof(v);
        else if (!strcmp(k, "--batch"))
            opt.batch = atoi(v);
        else if (!strcmp(k, "--gpus"))
            opt.gpus = atoi(v);
        else if (!strcmp(k, "--cpus"))
            opt.cpus = atoi(v);
        else if (!strcmp(k, "--gpu-mib"))
            opt.gpu_mib = atol(v);
        else if (!strcmp(k, "--usage-hz"))
            opt.usage_hz = atof(v);
        else if (!strcmp(k, "--tick-ms"))
            opt.tick_s = atof(v) / 1000.0;
        else if (!strcmp(k, "--seed"))
            opt.seed = strtoul(v, NULL, 10);
        else
            usage_exit();
    }
    if (opt.hz <= 0 || opt.batch < 1 || opt.batch > 64 || opt.gpus < 0) usage_exit();
    for (const char *p = opt.node; *p; p++)
        node_hash = mix(node_hash ^ (unsigned char)*p);
    fcntl(0, F_SETFL, fcntl(0, F_GETFL) | O_NONBLOCK);
    fcntl(1, F_SETFL, fcntl(1, F_GETFL) | O_NONBLOCK);
    tp__buf_init(&out);
    tp_proto_decoder_t dec;
    tp__proto_decoder_init(&dec);
    double next_usage = INFINITY;
    int shutdown = 0;
    char in[65536];
    double next = INFINITY;
    while (!shutdown) {
        double now = now_s();
        double due = next < next_usage ? next : next_usage;
        int timeout = -1;
        if (due < INFINITY) timeout = due <= now ? 0 : (int)ceil((due - now) * 1000.0);
        struct pollfd fds[2] = {{.fd = 0, .events = POLLIN},
                                {.fd = 1, .events = pending() ? POLLOUT : 0}};
        if (poll(fds, 2, timeout) < 0 && errno != EINTR) break;
        now = now_s();
        if (fds[1].revents & (POLLERR | POLLHUP)) break;
        if (fds[0].revents & (POLLIN | POLLHUP | POLLERR)) {
            ssize_t n = read(0, in, sizeof in);
            if (n == 0 || (n < 0 && errno != EAGAIN && errno != EINTR)) break; /* EOF */
            if (n > 0) tp__proto_feed(&dec, in, (size_t)n);
            for (;;) {
                tp_msg_t msg;
                tp_error_t err = {0};
                int rc = tp__proto_next(&dec, &msg, &err);
                if (rc == 0) break;
                if (rc < 0) {
                    frame_json(json_pack("{s:s, s:s}", "type", "error", "message", err.msg));
                    shutdown = 1;
                    break;
                }
                const char *t = msg.type;
                if (!strcmp(t, "ping")) {
                    json_t *pong = json_pack("{s:s}", "type", "pong");
                    json_t *tv = json_object_get(msg.head, "t");
                    if (tv) json_object_set(pong, "t", tv);
                    frame_json(pong);
                } else if (!strcmp(t, "launch")) {
                    on_launch(msg.head, now);
                } else if (!strcmp(t, "stop")) {
                    end_matching(msg.head, "stopped", -1, 15, now);
                } else if (!strcmp(t, "pause")) {
                    end_matching(msg.head, "paused", 0, 0, now);
                } else if (!strcmp(t, "hello")) {
                    on_hello(msg.head);
                    if (opt.usage_hz > 0) next_usage = now + 1.0 / opt.usage_hz;
                } else if (!strcmp(t, "mps_start")) {
                    frame_json(json_pack("{s:s, s:[], s:[]}", "type", "mps", "started", "failed"));
                } else if (!strcmp(t, "shutdown")) {
                    for (size_t i = 0; i < nlive; i++)
                        send_exited(&live[i], "stopped", -1, 15, now);
                    nlive = 0;
                    frame_json(json_pack("{s:s}", "type", "bye"));
                    shutdown = 1;
                }
                json_decref(msg.head);
                if (shutdown) break;
            }
        }
        if (!shutdown) {
            if (said_hello && now + opt.tick_s >= next_usage) {
                send_usage();
                next_usage += 1.0 / opt.usage_hz;
                if (next_usage < now) next_usage = now + 1.0 / opt.usage_hz;
            }
            next = advance(now, now + opt.tick_s);
        }
        if (flush_out() < 0) break;
    }
    /* Say what is left to say (bye), blocking: the orchestrator reads it. */
    fcntl(1, F_SETFL, fcntl(1, F_GETFL) & ~O_NONBLOCK);
    flush_out();
    tp__proto_decoder_free(&dec);
    tp__buf_free(&out);
    free(live);
    return 0;
}
