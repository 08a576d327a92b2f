/* reaper: killing processes left behind by an earlier agent of the same run
 * or by this one's trials (found by TUNEPACK_RUN_TOKEN and the trial's ids
 * in their environment: processes that left their trial's process group
 * with setsid() or a double fork), and reaping zombie orphans that reach
 * the agent as child subreaper. */
#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "agent/agent_internal.h"

/* Whether the NUL-separated environment block holds exactly `entry`. */
static int env_has_entry(const char *env, size_t len, const char *entry, size_t elen) {
    const char *p = env, *end = env + len;
    while (p < end) {
        const char *z = memchr(p, '\0', (size_t)(end - p));
        size_t n = z ? (size_t)(z - p) : (size_t)(end - p);
        if (n == elen && memcmp(p, entry, elen) == 0) return 1;
        p += n + 1;
    }
    return 0;
}

/* Read /proc/<pid>/environ into buf; returns its length or -1. */
static ssize_t read_environ(const char *pid, tp_buf_t *buf) {
    char path[300];
    snprintf(path, sizeof path, "/proc/%s/environ", pid);
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) return -1;
    tp__buf_reset(buf);
    for (;;) {
        if (tp__buf_reserve(buf, 16384) < 0) break;
        ssize_t k = read(fd, buf->data + buf->len, 16384);
        if (k < 0 && errno == EINTR) continue;
        if (k <= 0) break;
        buf->len += (size_t)k;
    }
    close(fd);
    return (ssize_t)buf->len;
}

/* Wait until the processes killed[0..n) have died (zombies count as dead:
 * the SIGCHLD handler reaps those that are ours), at most REAP_WAIT_MS: a
 * SIGKILL is delivered when its target next runs, and "ended with its
 * attempt" should hold when the attempt's end is reported. */
#define REAP_WAIT_MS 1000
static void wait_killed(const pid_t *killed, size_t n) {
    for (int ms = 0; ms < REAP_WAIT_MS; ms += 5) {
        size_t left = 0;
        for (size_t i = 0; i < n; i++) left += tp__pid_alive(killed[i]);
        if (!left) return;
        struct timespec ts = {.tv_sec = 0, .tv_nsec = 5 * 1000000L};
        nanosleep(&ts, NULL);
    }
}

static int in_live_trial_group(tp_agent_t *a, pid_t pid) {
    pid_t g = getpgid(pid);
    if (g < 0) return 0;
    for (tp_trial_t *t = a->trials; t; t = t->next)
        if (t->pid > 0 && t->pid == g) return 1;
    return 0;
}

/* Kill every process (not this one, not pid 1) whose environment holds
 * all n entries, skipping the groups of live trials when asked; processes
 * of other users are skipped by the kernel's permission check; then wait
 * (at most REAP_WAIT_MS) until they have died. Returns how many were
 * killed. O(processes). */
static int reap_matching(tp_agent_t *a, tp_buf_t *entries, size_t n, int skip_live,
                         const char *what) {
    tp_buf_t env;
    tp__buf_init(&env);
    DIR *d = opendir("/proc");
    int killed = 0;
    pid_t self = getpid(), *pids = NULL;
    struct dirent *de;
    while (d && (de = readdir(d)) != NULL) {
        if (!isdigit((unsigned char)de->d_name[0])) continue;
        pid_t pid = (pid_t)strtol(de->d_name, NULL, 10);
        if (pid <= 1 || pid == self) continue;
        ssize_t len = read_environ(de->d_name, &env);
        size_t k = 0;
        while (len > 0 && k < n &&
               env_has_entry(env.data, (size_t)len, entries[k].data, entries[k].len))
            k++;
        if (len <= 0 || k < n || (skip_live && in_live_trial_group(a, pid))) continue;
        if (kill(pid, SIGKILL) == 0) {
            pids = tp__xrealloc(pids, ((size_t)killed + 1) * sizeof *pids);
            pids[killed++] = pid;
            tp__log(TP_LOG_INFO, "agent: killed process %ld of %s", (long)pid, what);
        }
    }
    if (d) closedir(d);
    tp__buf_free(&env);
    wait_killed(pids, (size_t)killed);
    free(pids);
    return killed;
}

int tp__reap_token(tp_agent_t *a, const char *token, const char *stamp) {
    if (!token || !*token) return 0;
    tp_buf_t e[2];
    for (size_t i = 0; i < 2; i++) tp__buf_init(&e[i]);
    tp__buf_printf(&e[0], "TUNEPACK_RUN_TOKEN=%s", token);
    if (stamp) tp__buf_printf(&e[1], "TUNEPACK_AGENT=%s", stamp);
    char what[200];
    snprintf(what, sizeof what, "run %.100s, %sleft behind", token,
             stamp ? "this agent's, " : "");
    int killed = reap_matching(a, e, stamp ? 2 : 1, 1, what);
    for (size_t i = 0; i < 2; i++) tp__buf_free(&e[i]);
    return killed;
}

int tp__reap_attempt(tp_agent_t *a, int64_t trial, int64_t attempt) {
    if (!a->token || !*a->token) return 0;
    tp_buf_t e[3];
    for (size_t i = 0; i < 3; i++) tp__buf_init(&e[i]);
    tp__buf_printf(&e[0], "TUNEPACK_TRIAL_ID=%lld", (long long)trial);
    tp__buf_printf(&e[1], "TUNEPACK_ATTEMPT=%lld", (long long)attempt);
    tp__buf_printf(&e[2], "TUNEPACK_RUN_TOKEN=%s", a->token);
    char what[120];
    snprintf(what, sizeof what, "trial %lld (attempt %lld) outside its process group",
             (long long)trial, (long long)attempt);
    /* The attempt's other ranks on this node carry the same three entries
     * but run in live groups of their own: they are not escapees, and one
     * rank ending first must not cut another's grace period short. */
    int killed = reap_matching(a, e, 3, 1, what);
    for (size_t i = 0; i < 3; i++) tp__buf_free(&e[i]);
    return killed;
}

void tp__reap_children(tp_agent_t *a) {
    int status;
    pid_t pid;
    struct rusage ru;
    while ((pid = wait4(-1, &status, WNOHANG, &ru)) > 0) {
        for (tp_trial_t *t = a->trials; t; t = t->next)
            if (t->pid == pid && !t->leader_exited) {
                tp__trial_leader_exited(t, status, &ru);
                break;
            }
    }
}
