/* ping_floor: this machine's floor for the orchestrator's heartbeat round
 * trips, with no orchestrator: N fake agents started on pipes, then ROUNDS
 * times a ping to every one at once (one timestamp per round, as
 * `tunepack run` does) and the time until each pong is read.
 *
 *   ping_floor FAKE_AGENT N ROUNDS
 *
 * Prints "p50 p99 max" in ms. On a machine with fewer cores than agents the
 * figure is mostly the time to schedule every agent once. */
#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "proto/proto.h"

typedef struct peer {
    pid_t pid;
    int to, from;
    tp_proto_decoder_t dec;
} peer_t;

static void send_msg(peer_t *p, json_t *m) {
    tp_buf_t b;
    tp__buf_init(&b);
    tp__proto_encode(&b, m, NULL, 0);
    for (size_t off = 0; off < b.len;) {
        ssize_t n = write(p->to, b.data + off, b.len - off);
        if (n < 0 && errno == EINTR) continue;
        if (n < 0) break;
        off += (size_t)n;
    }
    tp__buf_free(&b);
}

static int cmp(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

int main(int argc, char **argv) {
    if (argc != 4) {
        fprintf(stderr, "usage: ping_floor FAKE_AGENT N ROUNDS\n");
        return 2;
    }
    int n = atoi(argv[2]), rounds = atoi(argv[3]);
    if (n < 1 || rounds < 1) return 2;
    signal(SIGPIPE, SIG_IGN);
    peer_t *p = calloc((size_t)n, sizeof *p);
    struct pollfd *fds = calloc((size_t)n, sizeof *fds);
    double *rtt = calloc((size_t)n * (size_t)rounds, sizeof *rtt);
    for (int i = 0; i < n; i++) {
        int in[2], out[2];
        if (pipe(in) || pipe(out)) return 1;
        char node[32];
        snprintf(node, sizeof node, "n%03d", i + 1);
        p[i].pid = fork();
        if (p[i].pid == 0) {
            dup2(in[0], 0);
            dup2(out[1], 1);
            for (int fd = 3; fd < 1024; fd++)
                close(fd);
            execl(argv[1], argv[1], node, "--usage-hz", "0", (char *)NULL);
            _exit(127);
        }
        close(in[0]);
        close(out[1]);
        p[i].to = in[1];
        p[i].from = out[0];
        tp__proto_decoder_init(&p[i].dec);
        fds[i] = (struct pollfd){.fd = out[0], .events = POLLIN};
    }
    /* hello, then rounds of pings; every message is read, only pongs timed */
    int nrtt = 0;
    for (int r = -1; r < rounds; r++) {
        double t = tp__mono_s();
        for (int i = 0; i < n; i++)
            send_msg(&p[i], r < 0 ? json_pack("{s:s, s:i, s:s}", "type", "hello", "protocol",
                                              TP_PROTO_VERSION, "token", "floor")
                                  : json_pack("{s:s, s:f}", "type", "ping", "t", t));
        int left = n;
        while (left > 0) {
            if (poll(fds, (nfds_t)n, 10000) <= 0) return 1;
            for (int i = 0; i < n; i++) {
                if (!(fds[i].revents & (POLLIN | POLLHUP))) continue;
                char buf[65536];
                ssize_t k = read(fds[i].fd, buf, sizeof buf);
                if (k <= 0) return 1;
                double now = tp__mono_s();
                tp__proto_feed(&p[i].dec, buf, (size_t)k);
                tp_msg_t m;
                tp_error_t err = {0};
                while (tp__proto_next(&p[i].dec, &m, &err) == 1) {
                    if (strcmp(m.type, r < 0 ? "hello" : "pong") == 0) {
                        left--;
                        if (r >= 0) rtt[nrtt++] = (now - t) * 1000.0;
                    }
                    json_decref(m.head);
                }
            }
        }
        if (r >= 0) usleep(200000);
    }
    for (int i = 0; i < n; i++)
        close(p[i].to); /* EOF: they exit */
    for (int i = 0; i < n; i++) {
        waitpid(p[i].pid, NULL, 0);
        close(p[i].from);
        tp__proto_decoder_free(&p[i].dec);
    }
    qsort(rtt, (size_t)nrtt, sizeof *rtt, cmp);
    printf("%.3f %.3f %.3f\n", rtt[nrtt / 2], rtt[(size_t)(nrtt * 0.99)], rtt[nrtt - 1]);
    free(rtt);
    free(fds);
    free(p);
    return 0;
}
