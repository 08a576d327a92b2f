/* reaper: killing processes left behind by an earlier agent of the same run
 * (found by TUNEPACK_RUN_TOKEN in their environment), and reaping zombie
 * orphans that reach the agent as child subreaper. */
#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
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

static int in_live_trial_group(tp_agent_t *a, pid_t pid) {
    pid_t g = getpgid(pid);
    if (g < 0) return 0;
    for (tp_trial_t *t = a->trials; t; t = t->next)
        if (t->pid > 0 && t->pid == g) return 1;
    return 0;
}

/* Scan every /proc/<pid>/environ (processes of other users are skipped by
 * the kernel's permission check) for the exact entry. O(processes). */
int tp__reap_token(tp_agent_t *a, const char *token) {
    if (!token || !*token) return 0;
    tp_buf_t entry, env;
    tp__buf_init(&entry);
    tp__buf_init(&env);
    tp__buf_printf(&entry, "TUNEPACK_RUN_TOKEN=%s", token);
    DIR *d = opendir("/proc");
    int killed = 0;
    pid_t self = getpid();
    struct dirent *de;
    while (d && (de = readdir(d)) != NULL) {
        if (!isdigit((unsigned char)de->d_name[0])) continue;
        pid_t pid = (pid_t)strtol(de->d_name, NULL, 10);
        if (pid <= 1 || pid == self) continue;
        ssize_t n = read_environ(de->d_name, &env);
        if (n <= 0 || !env_has_entry(env.data, (size_t)n, entry.data, entry.len)) continue;
        if (in_live_trial_group(a, pid)) continue;
        if (kill(pid, SIGKILL) == 0) {
            killed++;
            tp__log(TP_LOG_INFO, "agent: killed leftover process %ld of run %s", (long)pid, token);
        }
    }
    if (d) closedir(d);
    tp__buf_free(&entry);
    tp__buf_free(&env);
    return killed;
}

void tp__reap_children(tp_agent_t *a) {
    int status;
    pid_t pid;
    while ((pid = waitpid(-1, &status, WNOHANG)) > 0) {
        for (tp_trial_t *t = a->trials; t; t = t->next)
            if (t->pid == pid && !t->leader_exited) {
                tp__trial_leader_exited(t, status);
                break;
            }
    }
}
