/* Tests for the agent: each test runs tp__agent_main in a forked child wired
 * to the test by two pipes and speaks the protocol to it, with real trials
 * (/bin/sh, sleep, seq). */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "agent/agent.h"
#include "proto/proto.h"
#include "tp_test.h"

/* ---- message exchange helpers ---------------------------------------------- */

typedef struct peer {
    pid_t pid;              /* the agent process */
    int to_fd, from_fd;     /* our ends of its input and output */
    tp_proto_decoder_t dec; /* decodes what it says */
} peer_t;

typedef struct tmsg {
    json_t *head;  /* owned; NULL on timeout/EOF */
    char *payload; /* owned copy, NUL-terminated */
    size_t len;    /* payload bytes */
} tmsg_t;

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static void peer_start(peer_t *p) {
    int in[2], out[2];
    if (pipe(in) < 0 || pipe(out) < 0) abort();
    fflush(NULL);
    p->pid = fork();
    if (p->pid == 0) {
        close(in[1]);
        close(out[0]);
        exit(tp__agent_main(in[0], out[1]));
    }
    close(in[0]);
    close(out[1]);
    p->to_fd = in[1];
    p->from_fd = out[0];
    tp__proto_decoder_init(&p->dec);
}

static void peer_send(peer_t *p, json_t *head) {
    tp_buf_t b;
    tp__buf_init(&b);
    tp__proto_encode(&b, head, NULL, 0);
    json_decref(head);
    size_t off = 0;
    while (off < b.len) {
        ssize_t k = write(p->to_fd, b.data + off, b.len - off);
        if (k <= 0) break;
        off += (size_t)k;
    }
    tp__buf_free(&b);
}

static void tmsg_free(tmsg_t *m) {
    json_decref(m->head);
    free(m->payload);
    memset(m, 0, sizeof *m);
}

/* Next message within timeout_s; m->head is NULL on timeout or EOF. */
static void peer_recv(peer_t *p, double timeout_s, tmsg_t *m) {
    memset(m, 0, sizeof *m);
    double end = now_s() + timeout_s;
    for (;;) {
        tp_msg_t msg;
        tp_error_t err;
        int rc = tp__proto_next(&p->dec, &msg, &err);
        if (rc < 0) {
            fprintf(stderr, "  bad frame from agent: %s\n", err.msg);
            return;
        }
        if (rc == 1) {
            m->head = msg.head;
            m->payload = malloc(msg.payload_len + 1);
            memcpy(m->payload, msg.payload, msg.payload_len);
            m->payload[msg.payload_len] = '\0';
            m->len = msg.payload_len;
            return;
        }
        double left = end - now_s();
        if (left <= 0) return;
        struct pollfd pfd = {.fd = p->from_fd, .events = POLLIN};
        if (poll(&pfd, 1, (int)(left * 1000) + 1) <= 0) continue;
        char buf[65536];
        ssize_t k = read(p->from_fd, buf, sizeof buf);
        if (k <= 0) return;
        tp__proto_feed(&p->dec, buf, (size_t)k);
    }
}

static const char *mtype(const tmsg_t *m) {
    return json_string_value(json_object_get(m->head, "type"));
}
static const char *mstr(const tmsg_t *m, const char *k) {
    return json_string_value(json_object_get(m->head, k));
}
static long long mint(const tmsg_t *m, const char *k) {
    return json_integer_value(json_object_get(m->head, k));
}

/* Wait for a message of one type, skipping others; 1 if found. */
static int peer_expect(peer_t *p, const char *type, double timeout_s, tmsg_t *m) {
    double end = now_s() + timeout_s;
    for (;;) {
        peer_recv(p, end - now_s(), m);
        if (!m->head) return 0;
        if (strcmp(mtype(m), type) == 0) return 1;
        tmsg_free(m);
    }
}

/* What an attempt said until its `exited` (kept in ex). */
typedef struct outcome {
    tp_buf_t fd, out; /* report payloads, by channel */
    int garbage;      /* garbage messages */
    tp_buf_t what;    /* their `what`s */
    int after_exit;   /* reports seen after exited (must stay 0) */
    tmsg_t ex;        /* the exited message */
} outcome_t;

static void outcome_free(outcome_t *o) {
    tp__buf_free(&o->fd);
    tp__buf_free(&o->out);
    tp__buf_free(&o->what);
    tmsg_free(&o->ex);
}

static int collect(peer_t *p, long long trial, double timeout_s, outcome_t *o) {
    memset(o, 0, sizeof *o);
    double end = now_s() + timeout_s;
    for (;;) {
        tmsg_t m;
        peer_recv(p, end - now_s(), &m);
        if (!m.head) return 0;
        const char *ty = mtype(&m);
        if (mint(&m, "trial") == trial) {
            if (strcmp(ty, "report") == 0) {
                tp__buf_append(strcmp(mstr(&m, "channel"), "fd") == 0 ? &o->fd : &o->out, m.payload,
                               m.len);
            } else if (strcmp(ty, "garbage") == 0) {
                o->garbage++;
                tp__buf_puts(&o->what, mstr(&m, "what"));
            } else if (strcmp(ty, "exited") == 0) {
                o->ex = m;
                return 1;
            }
        }
        tmsg_free(&m);
    }
}

/* Close the agent's input and wait for it; returns its exit status or -1. */
static int peer_finish(peer_t *p, double timeout_s) {
    if (p->to_fd >= 0) close(p->to_fd);
    p->to_fd = -1;
    double end = now_s() + timeout_s;
    int st = 0;
    while (waitpid(p->pid, &st, WNOHANG) == 0) {
        if (now_s() > end) {
            kill(p->pid, SIGKILL);
            waitpid(p->pid, &st, 0);
            st = -1;
            break;
        }
        char buf[4096];
        struct pollfd pfd = {.fd = p->from_fd, .events = POLLIN};
        if (poll(&pfd, 1, 10) > 0 && read(p->from_fd, buf, sizeof buf) <= 0) usleep(1000);
    }
    close(p->from_fd);
    tp__proto_decoder_free(&p->dec);
    return st == -1 ? -1 : (WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st));
}

/* Say hello with a token made unique to this test process, so that test
 * runs side by side do not reap each other's trials. */
static void hello(peer_t *p, const char *token, tmsg_t *reply) {
    char tok[128];
    snprintf(tok, sizeof tok, "%s.%ld", token, (long)getpid());
    peer_send(p, json_pack("{s:s, s:i, s:s}", "type", "hello", "protocol", 1, "token", tok));
    peer_expect(p, "hello", 5, reply);
}

static char test_root[256];

static const char *trial_dir(const char *name) {
    static char path[512];
    snprintf(path, sizeof path, "%s/%s", test_root, name);
    return path;
}

/* A launch message for argv (NULL-terminated) with common defaults. */
static json_t *launch_msg(long long trial, const char *dir, double timeout_s, double grace_s,
                          long long log_limit, const char *const *argv) {
    json_t *av = json_array();
    for (size_t i = 0; argv[i]; i++)
        json_array_append_new(av, json_string(argv[i]));
    return json_pack("{s:s, s:I, s:i, s:o, s:{s:s}, s:s, s:s, s:{s:f, s:s}, s:f, s:f, s:I}", "type",
                     "launch", "trial", (json_int_t)trial, "attempt", 1, "argv", av, "env",
                     "TP_TEST_VAR", "yes", "cwd", dir, "dir", dir, "params", "lr", 0.01, "opt",
                     "adam", "timeout_s", timeout_s, "grace_s", grace_s, "log_limit",
                     (json_int_t)log_limit);
}

static char *slurp(const char *dir, const char *name, size_t *len) {
    char path[600];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    char *s = NULL;
    size_t n = 0;
    if (tp__read_file(path, &s, &n, NULL) < 0) return NULL;
    if (len) *len = n;
    return s;
}

static int group_gone(pid_t pgid) {
    return kill(-pgid, 0) < 0 && errno == ESRCH;
}

/* Wait for an event, not a time: pid has exec'd with `entry` in its
 * environment (as /proc shows it). 1 once it has, 0 if it never does (about
 * a minute of checks on a loaded machine). */
static int wait_exec_env(pid_t pid, const char *entry) {
    char path[64];
    snprintf(path, sizeof path, "/proc/%ld/environ", (long)pid);
    for (int i = 0; i < 60000; i++) {
        char buf[4096];
        FILE *f = fopen(path, "rb");
        size_t n = f ? fread(buf, 1, sizeof buf, f) : 0;
        if (f) fclose(f);
        if (memmem(buf, n, entry, strlen(entry))) return 1;
        usleep(1000);
    }
    return 0;
}

/* Processes in process group pgid now, as /proc shows them. O(processes). */
static int group_size(pid_t pgid) {
    DIR *d = opendir("/proc");
    struct dirent *e;
    int n = 0;
    while (d && (e = readdir(d)) != NULL) {
        char path[300], buf[1024];
        snprintf(path, sizeof path, "/proc/%s/stat", e->d_name);
        FILE *f = e->d_name[0] >= '1' && e->d_name[0] <= '9' ? fopen(path, "r") : NULL;
        size_t len = f ? fread(buf, 1, sizeof buf - 1, f) : 0;
        if (f) fclose(f);
        buf[len] = 0;
        const char *after = strrchr(buf, ')'); /* the name may hold spaces and parentheses */
        char state;
        long ppid, pgrp;
        if (after && sscanf(after + 1, " %c %ld %ld", &state, &ppid, &pgrp) == 3 &&
            pgrp == (long)pgid && state != 'Z')
            n++;
    }
    if (d) closedir(d);
    return n;
}

/* Wait for an event, not a time: process group pgid holds at least n
 * processes. 1 once it does, 0 if it never does (about a minute). */
static int wait_group_size(pid_t pgid, int n) {
    for (int i = 0; i < 6000; i++) {
        if (group_size(pgid) >= n) return 1;
        usleep(10000);
    }
    return 0;
}

/* ---- tests ---------------------------------------------------------------------- */

TP_TEST(test_hello_answers_protocol_1_and_shutdown_says_bye) {
    peer_t p;
    peer_start(&p);
    tmsg_t r;
    hello(&p, "tok-hello", &r);
    TP_CHECK(r.head != NULL);
    TP_CHECK_INT(mint(&r, "protocol"), 1);
    TP_CHECK_INT(mint(&r, "pid"), p.pid);
    TP_CHECK(mint(&r, "cpus") >= 1);
    TP_CHECK(mstr(&r, "node") && mstr(&r, "version"));
    TP_CHECK_INT(mint(&r, "reaped"), 0);
    tmsg_free(&r);
    peer_send(&p, json_pack("{s:s}", "type", "no-such-type")); /* ignored */
    peer_send(&p, json_pack("{s:s}", "type", "shutdown"));
    TP_CHECK(peer_expect(&p, "bye", 5, &r));
    tmsg_free(&r);
    TP_CHECK_INT(peer_finish(&p, 5), 0);
}

TP_TEST(test_wrong_protocol_gets_error_and_exit_1) {
    peer_t p;
    peer_start(&p);
    peer_send(&p, json_pack("{s:s, s:i, s:s}", "type", "hello", "protocol", 2, "token", "x"));
    tmsg_t r;
    TP_CHECK(peer_expect(&p, "error", 5, &r));
    TP_CHECK_CONTAINS(mstr(&r, "message"), "protocol");
    tmsg_free(&r);
    TP_CHECK_INT(peer_finish(&p, 5), 1);
}

TP_TEST(test_launch_reports_fd_and_stdout_lines_and_writes_logs) {
    peer_t p;
    peer_start(&p);
    tmsg_t r;
    hello(&p, "tok-basic", &r);
    tmsg_free(&r);
    const char *dir = trial_dir("basic");
    const char *argv[] = {
        "/bin/sh", "-c",
        "echo \"{\\\"step\\\":1,\\\"acc\\\":0.5}\" >&3; echo loss=0.25; echo plain text; "
        "echo hi >&2; echo \"$TP_TEST_VAR $TUNEPACK_TRIAL_ID $TUNEPACK_ATTEMPT "
        "$TUNEPACK_REPORT_FD $TUNEPACK_RUN_TOKEN\" >&2",
        NULL};
    peer_send(&p, launch_msg(1, dir, 0, 1, 0, argv));
    TP_CHECK(peer_expect(&p, "started", 5, &r));
    TP_CHECK(mint(&r, "pid") > 0);
    tmsg_free(&r);
    outcome_t o;
    TP_CHECK(collect(&p, 1, 5, &o));
    TP_CHECK_STR(o.fd.data, "{\"step\":1,\"acc\":0.5}\n");
    TP_CHECK_STR(o.out.data, "loss=0.25\n");
    TP_CHECK_STR(mstr(&o.ex, "status"), "exited");
    TP_CHECK_INT(mint(&o.ex, "code"), 0);
    TP_CHECK_INT(mint(&o.ex, "signal"), 0);
    TP_CHECK_STR(mstr(&o.ex, "error"), "");
    outcome_free(&o);
    char *s = slurp(dir, "stdout.log", NULL);
    TP_CHECK_STR(s, "loss=0.25\nplain text\n");
    free(s);
    s = slurp(dir, "stderr.log", NULL);
    char want[128];
    snprintf(want, sizeof want, "hi\nyes 1 1 3 tok-basic.%ld\n", (long)getpid());
    TP_CHECK_STR(s, want);
    free(s);
    s = slurp(dir, "params.json", NULL);
    json_t *params = s ? json_loads(s, 0, NULL) : NULL;
    TP_CHECK(params && json_real_value(json_object_get(params, "lr")) == 0.01);
    TP_CHECK_STR(json_string_value(json_object_get(params, "opt")), "adam");
    json_decref(params);
    free(s);
    /* A second attempt rotates the first one's logs. */
    json_t *m = launch_msg(1, dir, 0, 1, 0, (const char *const[]){"/bin/true", NULL});
    json_object_set_new(m, "attempt", json_integer(2));
    peer_send(&p, m);
    TP_CHECK(collect(&p, 1, 5, &o));
    TP_CHECK_INT(mint(&o.ex, "attempt"), 2);
    outcome_free(&o);
    s = slurp(dir, "stdout.1.log", NULL);
    TP_CHECK_STR(s, "loss=0.25\nplain text\n");
    free(s);
    s = slurp(dir, "stdout.log", NULL);
    TP_CHECK_STR(s, "");
    free(s);
    TP_CHECK_INT(peer_finish(&p, 5), 0);
}

TP_TEST(test_argument_with_shell_syntax_stays_one_literal_argument) {
    peer_t p;
    peer_start(&p);
    tmsg_t r;
    hello(&p, "tok-argv", &r);
    tmsg_free(&r);
    const char *dir = trial_dir("argv");
    char owned[128], arg[200], out[600];
    snprintf(owned, sizeof owned, "/tmp/tp_owned_%ld", (long)getpid());
    snprintf(arg, sizeof arg, "x; touch %s", owned);
    snprintf(out, sizeof out, "%s/arg.txt", dir);
    unlink(owned);
    const char *argv[] = {"/bin/sh", "-c", "printf %s \"$1\" > \"$2\"", "sh", arg, out, NULL};
    peer_send(&p, launch_msg(2, dir, 0, 1, 0, argv));
    outcome_t o;
    TP_CHECK(collect(&p, 2, 5, &o));
    TP_CHECK_INT(mint(&o.ex, "code"), 0);
    outcome_free(&o);
    char *s = slurp(dir, "arg.txt", NULL);
    TP_CHECK_STR(s, arg);
    free(s);
    TP_CHECK(access(owned, F_OK) != 0);
    TP_CHECK_INT(peer_finish(&p, 5), 0);
}

TP_TEST(test_missing_program_is_spawn_failed_naming_it) {
    peer_t p;
    peer_start(&p);
    tmsg_t r;
    hello(&p, "tok-nope", &r);
    tmsg_free(&r);
    const char *argv[] = {"./nope-tp-missing", NULL};
    peer_send(&p, launch_msg(3, trial_dir("nope"), 0, 1, 0, argv));
    TP_CHECK(peer_expect(&p, "exited", 5, &r));
    TP_CHECK_STR(mstr(&r, "status"), "spawn_failed");
    TP_CHECK_INT(mint(&r, "code"), -1);
    TP_CHECK_CONTAINS(mstr(&r, "error"),
                      "cannot run \"./nope-tp-missing\": No such file or directory");
    tmsg_free(&r);
    /* A launch with an ill-typed member is refused the same way. */
    json_t *m = launch_msg(4, trial_dir("bad"), 0, 1, 0, argv);
    json_object_set_new(m, "argv", json_string("not an array"));
    peer_send(&p, m);
    TP_CHECK(peer_expect(&p, "exited", 5, &r));
    TP_CHECK_INT(mint(&r, "trial"), 4);
    TP_CHECK_STR(mstr(&r, "status"), "spawn_failed");
    TP_CHECK_CONTAINS(mstr(&r, "error"), "launch message: \"argv\"");
    tmsg_free(&r);
    TP_CHECK_INT(peer_finish(&p, 5), 0);
}

TP_TEST(test_timeout_terms_then_reports_timeout) {
    peer_t p;
    peer_start(&p);
    tmsg_t r;
    hello(&p, "tok-timeout", &r);
    tmsg_free(&r);
    const char *argv[] = {"sleep", "30", NULL};
    peer_send(&p, launch_msg(5, trial_dir("timeout"), 0.3, 0.2, 0, argv));
    TP_CHECK(peer_expect(&p, "started", 5, &r));
    pid_t pgid = (pid_t)mint(&r, "pid");
    tmsg_free(&r);
    outcome_t o;
    TP_CHECK(collect(&p, 5, 5, &o));
    /* Ended by the timeout's SIGTERM, not by running its 30 s out. */
    TP_CHECK_STR(mstr(&o.ex, "status"), "timeout");
    TP_CHECK_INT(mint(&o.ex, "signal"), SIGTERM);
    TP_CHECK_INT(mint(&o.ex, "code"), -1);
    TP_CHECK_STR(mstr(&o.ex, "error"), "timed out after 0.3s");
    TP_CHECK(pgid > 0 && group_gone(pgid));
    outcome_free(&o);
    TP_CHECK_INT(peer_finish(&p, 5), 0);
}

TP_TEST(test_stop_leaves_no_process_of_the_group) {
    peer_t p;
    peer_start(&p);
    tmsg_t r;
    hello(&p, "tok-stop", &r);
    tmsg_free(&r);
    const char *argv[] = {"/bin/sh", "-c", "sleep 100 & sleep 100", NULL};
    peer_send(&p, launch_msg(6, trial_dir("stop"), 0, 2, 0, argv));
    TP_CHECK(peer_expect(&p, "started", 5, &r));
    pid_t pgid = (pid_t)mint(&r, "pid");
    tmsg_free(&r);
    /* both sleeps run (the shell may have become the second), so the stop has a
     * background process of the group to end too */
    TP_CHECK(wait_group_size(pgid, 2));
    TP_CHECK(!group_gone(pgid));
    peer_send(&p, json_pack("{s:s, s:i, s:i, s:s}", "type", "stop", "trial", 6, "attempt", 1,
                            "reason", "test"));
    outcome_t o;
    TP_CHECK(collect(&p, 6, 5, &o));
    TP_CHECK_STR(mstr(&o.ex, "status"), "stopped");
    TP_CHECK(group_gone(pgid));
    outcome_free(&o);
    TP_CHECK_INT(peer_finish(&p, 5), 0);
}

TP_TEST(test_trial_ignoring_term_is_killed_after_grace) {
    peer_t p;
    peer_start(&p);
    tmsg_t r;
    hello(&p, "tok-trap", &r);
    tmsg_free(&r);
    const char *argv[] = {"/bin/sh", "-c", "trap '' TERM; echo ready >&3; sleep 100", NULL};
    peer_send(&p, launch_msg(7, trial_dir("trap"), 0, 0.2, 0, argv));
    TP_CHECK(peer_expect(&p, "started", 5, &r));
    pid_t pgid = (pid_t)mint(&r, "pid");
    tmsg_free(&r);
    TP_CHECK(peer_expect(&p, "report", 5, &r)); /* the trap is set */
    tmsg_free(&r);
    peer_send(&p, json_pack("{s:s, s:i, s:i, s:s}", "type", "stop", "trial", 7, "attempt", 1,
                            "reason", "test"));
    outcome_t o;
    TP_CHECK(collect(&p, 7, 5, &o));
    /* SIGTERM was ignored, so it ended by the SIGKILL after the grace (not
     * by its sleep 100 running out), and took the whole group with it. */
    TP_CHECK_STR(mstr(&o.ex, "status"), "stopped");
    TP_CHECK_INT(mint(&o.ex, "signal"), SIGKILL);
    TP_CHECK_STR(mstr(&o.ex, "error"), "stopped");
    TP_CHECK(pgid > 0 && group_gone(pgid));
    outcome_free(&o);
    TP_CHECK_INT(peer_finish(&p, 5), 0);
}

TP_TEST(test_daemon_holding_the_pipes_is_ended_with_its_attempt) {
    peer_t p;
    peer_start(&p);
    tmsg_t r;
    hello(&p, "tok-daemon", &r);
    tmsg_free(&r);
    /* The daemon leaves the group (setsid) but keeps stdout, stderr and fd 3,
     * and would outlive the test's bounded wait for `exited` by far. Its pid
     * goes to a file: setsid execs in place (a background job of a
     * non-interactive shell is no group leader), so $! is the daemon. */
    const char *dir = trial_dir("daemon");
    const char *argv[] = {"/bin/sh", "-c",
                          "echo a=1; setsid sleep 60 & echo $! > daemon.pid; "
                          "echo '{\"x\":1}' >&3; sleep 0.2; exit 0",
                          NULL};
    peer_send(&p, launch_msg(12, dir, 0, 1, 0, argv));
    outcome_t o;
    TP_CHECK(collect(&p, 12, 5, &o));
    char *s = slurp(dir, "daemon.pid", NULL);
    pid_t daemon = s ? (pid_t)atol(s) : 0;
    free(s);
    /* Found by the attempt's ids in its environment and killed: `exited`
     * comes after everything the attempt wrote, and no process of it is
     * left. */
    TP_CHECK(daemon > 0);
    for (int i = 0; i < 500 && !process_gone(daemon); i++) /* bounded: 5 s (reaped by init) */
        usleep(10000);
    TP_CHECK(process_gone(daemon));
    TP_CHECK_STR(mstr(&o.ex, "status"), "exited");
    TP_CHECK_INT(mint(&o.ex, "code"), 0);
    TP_CHECK_STR(mstr(&o.ex, "error"), ""); /* the daemon left the group */
    TP_CHECK_STR(o.fd.data, "{\"x\":1}\n");
    TP_CHECK_STR(o.out.data, "a=1\n");
    outcome_free(&o);
    TP_CHECK_INT(peer_finish(&p, 5), 0);
    /* Nothing is left for the next agent of the run. */
    peer_start(&p);
    hello(&p, "tok-daemon", &r);
    TP_CHECK_INT(mint(&r, "reaped"), 0);
    tmsg_free(&r);
    TP_CHECK_INT(peer_finish(&p, 5), 0);
}

TP_TEST(test_launch_without_trial_is_an_error) {
    peer_t p;
    peer_start(&p);
    tmsg_t r;
    hello(&p, "tok-noid", &r);
    tmsg_free(&r);
    peer_send(&p, json_pack("{s:s, s:[s]}", "type", "launch", "argv", "true"));
    TP_CHECK(peer_expect(&p, "error", 5, &r));
    TP_CHECK_CONTAINS(mstr(&r, "message"), "\"trial\"");
    tmsg_free(&r);
    TP_CHECK_INT(peer_finish(&p, 5), 1);
}

TP_TEST(test_long_and_nul_lines_are_garbage_and_later_lines_arrive) {
    peer_t p;
    peer_start(&p);
    tmsg_t r;
    hello(&p, "tok-long", &r);
    tmsg_free(&r);
    const char *argv[] = {"/bin/sh", "-c",
                          "echo first >&3; head -c 1100000 /dev/zero | tr '\\000' a >&3; echo >&3; "
                          "printf 'a\\000b\\n' >&3; echo '{\"ok\":1}' >&3; printf 'tail' >&3",
                          NULL};
    peer_send(&p, launch_msg(8, trial_dir("long"), 0, 1, 0, argv));
    outcome_t o;
    TP_CHECK(collect(&p, 8, 5, &o));
    TP_CHECK_STR(o.fd.data, "first\n{\"ok\":1}\ntail\n");
    TP_CHECK_INT(o.garbage, 2);
    TP_CHECK_CONTAINS(o.what.data, "line longer than 1 MiB dropped");
    TP_CHECK_CONTAINS(o.what.data, "line with NUL byte dropped");
    outcome_free(&o);
    TP_CHECK_INT(peer_finish(&p, 5), 0);
}

TP_TEST(test_log_limit_keeps_the_tail_within_twice_the_limit) {
    peer_t p;
    peer_start(&p);
    tmsg_t r;
    hello(&p, "tok-log", &r);
    tmsg_free(&r);
    const char *dir = trial_dir("log");
    const char *argv[] = {"seq", "1", "200000", NULL}; /* 1,288,895 bytes */
    peer_send(&p, launch_msg(9, dir, 0, 1, 65536, argv));
    outcome_t o;
    TP_CHECK(collect(&p, 9, 10, &o));
    TP_CHECK_INT(mint(&o.ex, "code"), 0);
    outcome_free(&o);
    size_t n = 0;
    char *s = slurp(dir, "stdout.log", &n);
    tp_buf_t all;
    tp__buf_init(&all);
    for (int i = 1; i <= 200000; i++)
        tp__buf_printf(&all, "%d\n", i);
    if (!(n >= 65536 && n <= 131072)) fprintf(stderr, "  stdout.log is %zu bytes\n", n);
    TP_CHECK(s && n >= 65536 && n <= 131072);
    TP_CHECK(s && n <= all.len && memcmp(s, all.data + all.len - n, n) == 0);
    tp__buf_free(&all);
    free(s);
    TP_CHECK_INT(peer_finish(&p, 5), 0);
}

TP_TEST(test_hello_reaps_processes_of_the_same_token) {
    char tok[64], entry[100];
    snprintf(tok, sizeof tok, "tok-reap");
    snprintf(entry, sizeof entry, "TUNEPACK_RUN_TOKEN=%s.%ld", tok, (long)getpid());
    pid_t left = fork();
    if (left == 0) {
        char *env[] = {entry, NULL};
        execle("/bin/sleep", "sleep", "100", (char *)NULL, env);
        _exit(127);
    }
    TP_REQUIRE(wait_exec_env(left, entry));
    peer_t p;
    peer_start(&p);
    tmsg_t r;
    hello(&p, tok, &r);
    TP_CHECK(mint(&r, "reaped") >= 1);
    tmsg_free(&r);
    int st = 0;
    TP_CHECK_INT(waitpid(left, &st, 0), left);
    TP_CHECK(WIFSIGNALED(st) && WTERMSIG(st) == SIGKILL);
    TP_CHECK_INT(peer_finish(&p, 5), 0);
}

TP_TEST(test_input_eof_stops_running_trials) {
    peer_t p;
    peer_start(&p);
    tmsg_t r;
    hello(&p, "tok-eof", &r);
    tmsg_free(&r);
    const char *argv[] = {"sleep", "100", NULL};
    peer_send(&p, launch_msg(10, trial_dir("eof"), 0, 1, 0, argv));
    TP_CHECK(peer_expect(&p, "started", 5, &r));
    pid_t pgid = (pid_t)mint(&r, "pid");
    tmsg_free(&r);
    /* EOF on its input: the agent stops the trial (SIGTERM, which sleep
     * does not survive) rather than waiting for its sleep 100, says so, and
     * exits 0 with the group gone. */
    close(p.to_fd);
    p.to_fd = -1;
    TP_CHECK(peer_expect(&p, "exited", 5, &r));
    TP_CHECK_INT(mint(&r, "trial"), 10);
    TP_CHECK_STR(mstr(&r, "status"), "stopped");
    TP_CHECK_INT(mint(&r, "signal"), SIGTERM);
    tmsg_free(&r);
    TP_CHECK_INT(peer_finish(&p, 5), 0);
    TP_CHECK(group_gone(pgid));
}

TP_TEST(test_shutdown_sends_exited_before_bye) {
    peer_t p;
    peer_start(&p);
    tmsg_t r;
    hello(&p, "tok-shutdown", &r);
    tmsg_free(&r);
    const char *argv[] = {"sleep", "100", NULL};
    peer_send(&p, launch_msg(11, trial_dir("shutdown"), 0, 1, 0, argv));
    TP_CHECK(peer_expect(&p, "started", 5, &r));
    tmsg_free(&r);
    peer_send(&p, json_pack("{s:s}", "type", "shutdown"));
    TP_CHECK(peer_expect(&p, "exited", 5, &r));
    TP_CHECK_STR(mstr(&r, "status"), "stopped");
    tmsg_free(&r);
    TP_CHECK(peer_expect(&p, "bye", 5, &r));
    tmsg_free(&r);
    TP_CHECK_INT(peer_finish(&p, 5), 0);
}

/* An agent with no cgroup per trial (TUNEPACK_NO_CGROUP=1), as on a node
 * without a writable cgroup2: only its process groups, its adopted orphans
 * and the run token end what a trial leaves. */
static void peer_start_without_cgroup(peer_t *p) {
    setenv("TUNEPACK_NO_CGROUP", "1", 1);
    peer_start(p);
    unsetenv("TUNEPACK_NO_CGROUP");
}

static pid_t pid_in(const char *dir, const char *name) {
    char *s = slurp(dir, name, NULL);
    pid_t pid = s ? (pid_t)atol(s) : 0;
    free(s);
    return pid;
}

/* A shell line that leaves `sleep 60` behind as an orphan that hid in every
 * way a process can: a double fork, setsid, an empty environment, no fd of
 * the trial's left open; its pid goes to file NAME. */
#define HIDDEN_ESCAPEE(name)                                                                       \
    "(setsid env -i /bin/sleep 60 </dev/null >/dev/null 2>&1 3>&- 4>&- & echo $! > " name ")"

TP_TEST(test_hidden_escapee_is_ended_before_its_attempt_exits_without_cgroup) {
    peer_t p;
    peer_start_without_cgroup(&p);
    tmsg_t r;
    hello(&p, "tok-hidden", &r);
    tmsg_free(&r);
    const char *dir = trial_dir("hidden");
    const char *argv[] = {"/bin/sh", "-c", HIDDEN_ESCAPEE("esc.pid") "; echo a=1", NULL};
    peer_send(&p, launch_msg(14, dir, 0, 1, 0, argv));
    outcome_t o;
    TP_CHECK(collect(&p, 14, 10, &o));
    pid_t esc = pid_in(dir, "esc.pid");
    /* No token, no pipe, no group, no cgroup: it came back to the agent as
     * an orphan of no live attempt, and was ended before `exited` was sent. */
    TP_CHECK(esc > 0 && process_gone(esc));
    TP_CHECK_STR(mstr(&o.ex, "status"), "exited");
    TP_CHECK_STR(o.out.data, "a=1\n");
    outcome_free(&o);
    TP_CHECK_INT(peer_finish(&p, 5), 0);
}

TP_TEST(test_orphans_of_a_live_attempt_live_with_it_and_end_with_it) {
    peer_t p;
    peer_start_without_cgroup(&p);
    tmsg_t r;
    hello(&p, "tok-owned", &r);
    tmsg_free(&r);
    const char *dir = trial_dir("owned");
    /* session: an orphan with an empty environment, still in the trial's
     * session. seen: a hidden one whose parent M lives until the agent has
     * looked (it ended a probe, a hidden orphan of nobody, meanwhile), so the
     * agent saw it below the leader. Once M is gone and a second probe has
     * been ended, both must still live: they belong to this live attempt. */
    const char *argv[] = {
        "/bin/sh", "-c",
        "gone() { while kill -0 $(cat $1) 2>/dev/null; do sleep 0.01; done; }; "
        "(env -i /bin/sleep 60 </dev/null >/dev/null 2>&1 & echo $! > session.pid); "
        "(setsid env -i /bin/sleep 60 </dev/null >/dev/null 2>&1 & echo $! > seen.pid; "
        " exec /bin/sleep 60) & m=$!; "
        "while [ ! -s seen.pid ]; do sleep 0.01; done; " HIDDEN_ESCAPEE(
            "probe1.pid") "; gone probe1.pid; "
                          "kill $m; wait $m; " HIDDEN_ESCAPEE(
                              "probe2.pid") "; gone probe2.pid; "
                                            "kill -0 $(cat session.pid) && echo session=1; kill -0 "
                                            "$(cat seen.pid) && echo seen=1",
        NULL};
    peer_send(&p, launch_msg(15, dir, 0, 1, 0, argv));
    outcome_t o;
    TP_CHECK(collect(&p, 15, 30, &o));
    TP_CHECK_STR(o.out.data, "session=1\nseen=1\n");
    /* And they ended with it, before its `exited`. */
    pid_t session = pid_in(dir, "session.pid"), seen = pid_in(dir, "seen.pid");
    TP_CHECK(session > 0 && process_gone(session));
    TP_CHECK(seen > 0 && process_gone(seen));
    TP_CHECK_STR(mstr(&o.ex, "status"), "exited");
    TP_CHECK_INT(mint(&o.ex, "code"), 0);
    outcome_free(&o);
    TP_CHECK_INT(peer_finish(&p, 5), 0);
}

TP_TEST(test_a_child_the_agent_had_before_its_first_trial_is_left_alone) {
    /* The agent's process starts with a child of its own (as after an exec
     * from a shell with a background job): not a trial's, never ended. */
    int in[2], out[2], ready[2];
    TP_REQUIRE(pipe(in) == 0 && pipe(out) == 0 && pipe(ready) == 0);
    fflush(NULL);
    peer_t p;
    p.pid = fork();
    if (p.pid == 0) {
        setenv("TUNEPACK_NO_CGROUP", "1", 1);
        close(in[1]);
        close(out[0]);
        close(ready[0]);
        pid_t own = fork();
        if (own == 0) { /* holding none of the agent's pipes */
            close(in[0]);
            close(out[1]);
            close(ready[1]);
            execl("/bin/sleep", "sleep", "60", (char *)NULL);
            _exit(127);
        }
        if (write(ready[1], &own, sizeof own) != (ssize_t)sizeof own) _exit(1);
        close(ready[1]);
        exit(tp__agent_main(in[0], out[1]));
    }
    pid_t own = 0;
    close(ready[1]);
    TP_REQUIRE(read(ready[0], &own, sizeof own) == (ssize_t)sizeof own && own > 0);
    close(ready[0]);
    close(in[0]);
    close(out[1]);
    p.to_fd = in[1];
    p.from_fd = out[0];
    tp__proto_decoder_init(&p.dec);
    tmsg_t r;
    hello(&p, "tok-own", &r);
    tmsg_free(&r);
    /* A trial's hidden escapee is ended (the agent looked at its children),
     * and the agent's own child is not, nor when the agent ends. */
    const char *dir = trial_dir("own");
    const char *argv[] = {"/bin/sh", "-c", HIDDEN_ESCAPEE("esc.pid"), NULL};
    peer_send(&p, launch_msg(17, dir, 0, 1, 0, argv));
    outcome_t o;
    TP_CHECK(collect(&p, 17, 10, &o));
    outcome_free(&o);
    pid_t esc = pid_in(dir, "esc.pid");
    TP_CHECK(esc > 0 && process_gone(esc));
    TP_CHECK(!process_gone(own));
    TP_CHECK_INT(peer_finish(&p, 5), 0);
    TP_CHECK(!process_gone(own));
    kill(own, SIGKILL);
}

TP_TEST(test_duplicate_launch_of_a_running_attempt_sends_one_exited) {
    peer_t p;
    peer_start(&p);
    tmsg_t r;
    hello(&p, "tok-dup", &r);
    tmsg_free(&r);
    const char *argv[] = {"sleep", "100", NULL};
    peer_send(&p, launch_msg(16, trial_dir("dup"), 0, 1, 0, argv));
    TP_CHECK(peer_expect(&p, "started", 5, &r));
    tmsg_free(&r);
    /* The same attempt again, once as sent and once malformed: both are
     * ignored; then it is stopped and the agent shut down. */
    peer_send(&p, launch_msg(16, trial_dir("dup"), 0, 1, 0, argv));
    peer_send(&p, json_pack("{s:s, s:i, s:i, s:[]}", "type", "launch", "trial", 16, "attempt", 1,
                            "argv"));
    peer_send(&p, json_pack("{s:s, s:i, s:i}", "type", "stop", "trial", 16, "attempt", 1));
    peer_send(&p, json_pack("{s:s}", "type", "shutdown"));
    int exited = 0, started = 0, bye = 0;
    while (!bye) {
        peer_recv(&p, 10, &r);
        if (!r.head) break;
        const char *ty = mtype(&r);
        started += strcmp(ty, "started") == 0;
        bye = strcmp(ty, "bye") == 0;
        if (strcmp(ty, "exited") == 0) {
            exited++;
            TP_CHECK_STR(mstr(&r, "status"), "stopped");
        }
        tmsg_free(&r);
    }
    TP_CHECK(bye);
    TP_CHECK_INT(exited, 1);
    TP_CHECK_INT(started, 0);
    TP_CHECK_INT(peer_finish(&p, 5), 0);
}

int main(void) {
    snprintf(test_root, sizeof test_root, "/tmp/tp_agent_test_%ld", (long)getpid());
    int rc = tp_test_main();
    char cmd[300];
    snprintf(cmd, sizeof cmd, "rm -rf %s", test_root);
    if (system(cmd) != 0) fprintf(stderr, "cannot remove %s\n", test_root);
    return rc;
}
