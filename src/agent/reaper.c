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
        for (size_t i = 0; i < n; i++)
            left += tp__pid_alive(killed[i]);
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
    for (size_t i = 0; i < 2; i++)
        tp__buf_init(&e[i]);
    tp__buf_printf(&e[0], "TUNEPACK_RUN_TOKEN=%s", token);
    if (stamp) tp__buf_printf(&e[1], "TUNEPACK_AGENT=%s", stamp);
    char what[200];
    snprintf(what, sizeof what, "run %.100s, %sleft behind", token, stamp ? "this agent's, " : "");
    int killed = reap_matching(a, e, stamp ? 2 : 1, 1, what);
    for (size_t i = 0; i < 2; i++)
        tp__buf_free(&e[i]);
    return killed;
}

int tp__reap_attempt(tp_agent_t *a, int64_t trial, int64_t attempt) {
    if (!a->token || !*a->token) return 0;
    tp_buf_t e[3];
    for (size_t i = 0; i < 3; i++)
        tp__buf_init(&e[i]);
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
    for (size_t i = 0; i < 3; i++)
        tp__buf_free(&e[i]);
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

/* ---- adopted orphans ------------------------------------------------------------ */

#define SWEEP_ROUNDS 64      /* kill, then the victims' children, at most this deep */
#define SWEEP_MAX_PIDS 65536 /* descendants recorded per sweep, at most */

typedef struct pidv {
    pid_t *v;
    size_t n, cap;
} pidv_t;

static void pidv_push(pidv_t *s, pid_t pid) {
    s->v = tp__xgrow(s->v, &s->cap, s->n + 1, sizeof *s->v, 32);
    s->v[s->n++] = pid;
}

/* What /proc/PID/stat says of a process. */
typedef struct proc_info {
    pid_t pid, ppid, pgrp, sid;
    unsigned long long start; /* clock ticks after boot */
    char state;               /* 'Z', 'X': dead, waiting to be reaped */
    char comm[20];            /* its command's name, for the log */
} proc_info_t;

/* Read pid's stat line. Returns 0, or -errno (gone). */
static int read_stat(pid_t pid, proc_info_t *p) {
    char path[64], line[1024];
    snprintf(path, sizeof path, "/proc/%ld/stat", (long)pid);
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) return -errno;
    ssize_t n = read(fd, line, sizeof line - 1);
    close(fd);
    if (n <= 0) return -EIO;
    line[n] = '\0';
    const char *l = strchr(line, '('), *r = strrchr(line, ')'); /* the name may hold ')' */
    long ppid, pgrp, sid;
    /* state ppid pgrp session, 15 fields, starttime (proc(5)) */
    if (!r || sscanf(r + 1,
                     " %c %ld %ld %ld %*s %*s %*s %*s %*s %*s %*s %*s %*s %*s %*s %*s %*s "
                     "%*s %*s %llu",
                     &p->state, &ppid, &pgrp, &sid, &p->start) != 5)
        return -EIO;
    snprintf(p->comm, sizeof p->comm, "%.*s", l && l < r ? (int)(r - l - 1) : 0, l ? l + 1 : "");
    p->pid = pid;
    p->ppid = (pid_t)ppid;
    p->pgrp = (pid_t)pgrp;
    p->sid = (pid_t)sid;
    return 0;
}

/* Append the children of thread tid of process pid to out. Returns 0, or
 * -errno (-ENOENT: gone, or a kernel without CONFIG_PROC_CHILDREN). */
static int thread_children(pid_t pid, pid_t tid, pidv_t *out) {
    char path[96];
    snprintf(path, sizeof path, "/proc/%ld/task/%ld/children", (long)pid, (long)tid);
    FILE *f = fopen(path, "re");
    if (!f) return -errno;
    long c;
    while (out->n < SWEEP_MAX_PIDS && fscanf(f, "%ld", &c) == 1)
        pidv_push(out, (pid_t)c);
    fclose(f);
    return 0;
}

/* The agent's own children, from each of its threads' children files, or
 * (a kernel without them) a scan of every process's parent. Returns 1 when
 * the files were there (descendants can be walked the same way), 0 if not.
 * O(threads), or O(processes) without the files. */
static int own_children(pidv_t *out) {
    pid_t self = getpid();
    if (thread_children(self, self, out) == -ENOENT) {
        DIR *d = opendir("/proc");
        for (struct dirent *de; d && (de = readdir(d)) != NULL;) {
            proc_info_t p;
            if (isdigit((unsigned char)de->d_name[0]) &&
                read_stat((pid_t)strtol(de->d_name, NULL, 10), &p) == 0 && p.ppid == self)
                pidv_push(out, p.pid);
        }
        if (d) closedir(d);
        return 0;
    }
    char path[64];
    snprintf(path, sizeof path, "/proc/%ld/task", (long)self);
    DIR *d = opendir(path);
    for (struct dirent *de; d && (de = readdir(d)) != NULL;) {
        pid_t tid = (pid_t)strtol(de->d_name, NULL, 10);
        if (tid > 0 && tid != self) thread_children(self, tid, out);
    }
    if (d) closedir(d);
    return 1;
}

static tp_seen_t *seen_find(tp_seen_t *v, size_t n, const proc_info_t *p) {
    for (size_t i = 0; i < n; i++)
        if (v[i].pid == p->pid && v[i].start == p->start) return &v[i];
    return NULL;
}

static void seen_push(tp_seen_t **v, size_t *n, const proc_info_t *p, int64_t trial,
                      int64_t attempt, int rank) {
    if ((*n & (*n - 1)) == 0) /* 0, 1, 2, 4, ...: room for twice as many, at least 16 */
        *v = tp__xrealloc(*v, (*n < 8 ? 16 : 2 * *n) * sizeof **v);
    (*v)[(*n)++] = (tp_seen_t){p->pid, p->start, trial, attempt, rank};
}

/* The attempt (trial, attempt, rank) while its leader runs; rank -1: any of
 * its ranks. NULL once it has ended. */
static tp_trial_t *live_trial(tp_agent_t *a, int64_t trial, int64_t attempt, int rank) {
    for (tp_trial_t *t = a->trials; t; t = t->next)
        if (t->trial == trial && t->attempt == attempt && (rank < 0 || t->rank == rank) &&
            t->pid > 0 && !t->leader_exited)
            return t;
    return NULL;
}

/* Whether environment block env[0..len) holds "NAME=value". */
static int env_is(const tp_buf_t *env, size_t len, const char *name, const char *value) {
    char entry[4200];
    int n = snprintf(entry, sizeof entry, "%s=%s", name, value);
    return n > 0 && (size_t)n < sizeof entry && env_has_entry(env->data, len, entry, (size_t)n);
}

/* The live attempt child p of the agent belongs to (its leader; seen below
 * it; in its session or process group; its ids and the run token in its
 * environment), else NULL, with *keep set for one that is no trial's (a
 * child from before the first trial, an MPS daemon this agent started).
 * A cleared environment and setsid() leave only the first two: a process
 * that did both before the agent saw it has no live attempt. */
static tp_trial_t *owner_of(tp_agent_t *a, const proc_info_t *p, tp_buf_t *env, int *keep) {
    *keep = 0;
    for (tp_trial_t *t = a->trials; t; t = t->next)
        if (t->pid == p->pid && !t->leader_exited) return t; /* (an exited one is reaped) */
    const tp_seen_t *s = seen_find(a->seen, a->nseen, p);
    if (s && s->trial < 0) {
        *keep = 1;
        return NULL;
    }
    if (s) return live_trial(a, s->trial, s->attempt, s->rank);
    for (tp_trial_t *t = a->trials; t; t = t->next)
        if (t->pid > 0 && !t->leader_exited && (p->sid == t->pid || p->pgrp == t->pid)) return t;
    char pid[24];
    snprintf(pid, sizeof pid, "%ld", (long)p->pid);
    ssize_t len = read_environ(pid, env);
    if (len <= 0) return NULL;
    for (size_t i = 0; i < a->nmps && !*keep; i++)
        *keep = env_is(env, (size_t)len, "CUDA_MPS_PIPE_DIRECTORY", a->mps_dirs[i]);
    if (*keep || !a->token || !env_is(env, (size_t)len, "TUNEPACK_RUN_TOKEN", a->token))
        return NULL;
    for (tp_trial_t *t = a->trials; t; t = t->next) {
        char id[24], at[24];
        snprintf(id, sizeof id, "%lld", (long long)t->trial);
        snprintf(at, sizeof at, "%lld", (long long)t->attempt);
        if (env_is(env, (size_t)len, "TUNEPACK_TRIAL_ID", id) &&
            env_is(env, (size_t)len, "TUNEPACK_ATTEMPT", at))
            return live_trial(a, t->trial, t->attempt, -1);
    }
    return NULL;
}

/* Record root and every process below it (each process's main thread's
 * children) as the attempt t's in (*v, *n). O(its descendants). */
static void record_tree(tp_seen_t **v, size_t *n, const proc_info_t *root, const tp_trial_t *t) {
    pidv_t q = {0};
    pidv_push(&q, root->pid);
    for (size_t i = 0; i < q.n && *n < SWEEP_MAX_PIDS; i++) {
        proc_info_t p;
        if (read_stat(q.v[i], &p) < 0) continue;
        seen_push(v, n, &p, t->trial, t->attempt, t->rank);
        thread_children(p.pid, p.pid, &q);
    }
    free(q.v);
}

void tp__orphans_init(tp_agent_t *a) {
    pidv_t kids = {0};
    own_children(&kids);
    for (size_t i = 0; i < kids.n; i++) {
        proc_info_t p;
        if (read_stat(kids.v[i], &p) == 0) seen_push(&a->seen, &a->nseen, &p, -1, 0, 0);
    }
    free(kids.v);
}

int tp__reap_orphans(tp_agent_t *a) {
    tp_buf_t env;
    tp__buf_init(&env);
    pidv_t kids = {0}, victims = {0};
    tp_seen_t *fresh = NULL;
    size_t nfresh = 0;
    int killed = 0;
    for (int round = 0; round < SWEEP_ROUNDS; round++) {
        kids.n = victims.n = nfresh = 0;
        int walk = own_children(&kids);
        for (size_t i = 0; i < kids.n; i++) {
            proc_info_t p;
            if (read_stat(kids.v[i], &p) < 0 || p.state == 'Z' || p.state == 'X') continue;
            int keep;
            tp_trial_t *t = owner_of(a, &p, &env, &keep);
            if (keep) {
                seen_push(&fresh, &nfresh, &p, -1, 0, 0);
            } else if (t && walk) {
                record_tree(&fresh, &nfresh, &p, t);
            } else if (t) {
                seen_push(&fresh, &nfresh, &p, t->trial, t->attempt, t->rank);
            } else if (kill(p.pid, SIGKILL) == 0) {
                pidv_push(&victims, p.pid);
                tp__log(TP_LOG_INFO, "agent: killed process %ld (%s), an orphan of no live attempt",
                        (long)p.pid, p.comm);
            }
        }
        killed += (int)victims.n;
        if (victims.n == 0) break;
        /* Their children come to the agent once they have died: the next round. */
        wait_killed(victims.v, victims.n);
    }
    free(a->seen);
    a->seen = fresh;
    a->nseen = nfresh;
    free(kids.v);
    free(victims.v);
    tp__buf_free(&env);
    return killed;
}
