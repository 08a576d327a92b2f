/* cgroup: a cgroup v2 per trial attempt, where the machine lets the agent
 * make one (a writable cgroup2 hierarchy: root, or a delegated subtree).
 * Every process of the attempt stays in it whatever it does (setsid, double
 * fork, a cleared environment), so ending the attempt ends all of them with
 * one write to cgroup.kill (or a kill of each listed pid on kernels before
 * 5.14). Where no cgroup can be made, nothing changes: the process group,
 * the agent as child subreaper and the /proc scan of reaper.c remain
 * (docs/security.md). */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "agent/agent_internal.h"

/* The agent's own cgroup directory (cgroup2 mount + its path in
 * /proc/self/cgroup), or NULL when there is no cgroup2 hierarchy. Caller
 * frees. O(mounts). */
static char *own_cgroup_dir(void) {
    FILE *f = fopen("/proc/self/mountinfo", "re");
    if (!f) return NULL;
    char line[4096], mnt[2048] = "";
    while (!*mnt && fgets(line, sizeof line, f)) {
        const char *dash = strstr(line, " - cgroup2 ");
        char point[2048];
        if (dash && sscanf(line, "%*s %*s %*s %*s %2047s", point) == 1)
            snprintf(mnt, sizeof mnt, "%s", point);
    }
    fclose(f);
    if (!*mnt || !(f = fopen("/proc/self/cgroup", "re"))) return NULL;
    char *dir = NULL;
    while (!dir && fgets(line, sizeof line, f)) {
        if (strncmp(line, "0::", 3) != 0) continue;
        line[strcspn(line, "\n")] = 0;
        tp_buf_t b;
        tp__buf_init(&b);
        tp__buf_printf(&b, "%s%s", mnt, strcmp(line + 3, "/") ? line + 3 : "");
        dir = tp__buf_steal(&b);
    }
    fclose(f);
    return dir;
}

static int write_text(const char *dir, const char *file, const char *text) {
    char path[4200];
    snprintf(path, sizeof path, "%s/%s", dir, file);
    int fd = open(path, O_WRONLY | O_CLOEXEC);
    if (fd < 0) return -errno;
    ssize_t n = write(fd, text, strlen(text));
    int rc = n == (ssize_t)strlen(text) ? 0 : -errno;
    close(fd);
    return rc;
}

/* SIGKILL every process of the cgroup at dir. O(processes in it). */
static void kill_all(const char *dir) {
    if (write_text(dir, "cgroup.kill", "1") == 0) return;
    char path[4200];
    snprintf(path, sizeof path, "%s/cgroup.procs", dir);
    FILE *f = fopen(path, "re");
    if (!f) return;
    long pid;
    while (fscanf(f, "%ld", &pid) == 1)
        if (pid > 1) kill((pid_t)pid, SIGKILL);
    fclose(f);
}

/* The cgroups of agents that died without cleaning up (SIGKILL): their
 * trials' processes are killed and the cgroups removed. O(entries). */
static void remove_dead_agents(const char *own) {
    DIR *d = opendir(own);
    for (struct dirent *e; d && (e = readdir(d)) != NULL;) {
        long pid = 0;
        if (sscanf(e->d_name, "tunepack-agent-%ld", &pid) != 1 || pid <= 0 ||
            kill((pid_t)pid, 0) == 0 || errno != ESRCH)
            continue;
        char dead[4200];
        snprintf(dead, sizeof dead, "%s/%s", own, e->d_name);
        DIR *t = opendir(dead);
        for (struct dirent *c; t && (c = readdir(t)) != NULL;) {
            if (strncmp(c->d_name, "trial-", 6) != 0) continue;
            char sub[4500];
            snprintf(sub, sizeof sub, "%s/%s", dead, c->d_name);
            kill_all(sub);
            rmdir(sub);
        }
        if (t) closedir(t);
        rmdir(dead);
    }
    if (d) closedir(d);
}

/* TUNEPACK_NO_CGROUP=1 in the agent's environment: no cgroup per trial even
 * where one could be made, as on a node without a writable cgroup2 (for the
 * tests that prove the other nets alone end every escapee). */
void tp__cgroup_init(tp_agent_t *a) {
    const char *off = getenv("TUNEPACK_NO_CGROUP");
    if (off && strcmp(off, "1") == 0) {
        tp__log(TP_LOG_DEBUG, "agent: no cgroup per trial (TUNEPACK_NO_CGROUP=1)");
        return;
    }
    char *own = own_cgroup_dir();
    if (!own) return;
    remove_dead_agents(own);
    tp_buf_t b;
    tp__buf_init(&b);
    tp__buf_printf(&b, "%s/tunepack-agent-%ld", own, (long)getpid());
    if (mkdir(b.data, 0755) == 0) {
        a->cg_root = tp__buf_steal(&b);
        a->cg_home = own;
        tp__log(TP_LOG_DEBUG, "agent: a cgroup per trial under %s", a->cg_root);
    } else {
        free(own);
        tp__log(TP_LOG_DEBUG,
                "agent: no cgroup per trial (%s: %s); processes that leave a "
                "trial's group are found by its token instead",
                b.data, strerror(errno));
        tp__buf_free(&b);
    }
}

/* A trial is born in its cgroup: the agent moves itself there, spawns, and
 * moves back (a process forks into its parent's cgroup). Moving the leader
 * in after the spawn let a trial that forked at once, on a loaded machine
 * before the agent ran again, leave a child outside its cgroup, which no
 * kill of the cgroup then ended (a fresh Debian root's README test run). */
void tp__cgroup_trial_enter(tp_agent_t *a, tp_trial_t *t) {
    if (!a->cg_root) return;
    tp_buf_t b;
    tp__buf_init(&b);
    tp__buf_printf(&b, "%s/trial-%lld-%lld-%d", a->cg_root, (long long)t->trial,
                   (long long)t->attempt, t->rank);
    if (mkdir(b.data, 0755) != 0 && errno != EEXIST) {
        tp__buf_free(&b);
        return;
    }
    if (write_text(b.data, "cgroup.procs", "0") != 0) { /* e.g. not delegated that far */
        rmdir(b.data);
        tp__buf_free(&b);
        return;
    }
    t->cgroup = tp__buf_steal(&b);
}

void tp__cgroup_trial_leave(tp_agent_t *a, tp_trial_t *t) {
    if (!t->cgroup) return;
    int rc = write_text(a->cg_home, "cgroup.procs", "0");
    if (rc == 0) return;
    /* Never kill that cgroup: the agent is in it. No cgroup per trial from
     * here on (the token and the process group remain). */
    tp__log(TP_LOG_ERROR,
            "agent: cannot leave trial cgroup %s for %s (%s); no cgroup per "
            "trial from now on",
            t->cgroup, a->cg_home, strerror(-rc));
    free(t->cgroup);
    t->cgroup = NULL;
    free(a->cg_root);
    a->cg_root = NULL;
}

void tp__cgroup_trial_kill(tp_trial_t *t) {
    if (t->cgroup) kill_all(t->cgroup);
}

void tp__cgroup_trial_free(tp_trial_t *t) {
    if (!t->cgroup) return;
    kill_all(t->cgroup);
    rmdir(t->cgroup); /* EBUSY while a killed process is not yet reaped: the agent's end retries */
    free(t->cgroup);
    t->cgroup = NULL;
}

void tp__cgroup_fini(tp_agent_t *a) {
    free(a->cg_home);
    a->cg_home = NULL;
    if (!a->cg_root) return;
    /* Children first: trial cgroups left behind (busy at their trial's end). */
    char path[4200];
    snprintf(path, sizeof path, "%s", a->cg_root);
    DIR *d = opendir(path);
    for (struct dirent *e; d && (e = readdir(d)) != NULL;) {
        if (strncmp(e->d_name, "trial-", 6) != 0) continue;
        char sub[4400];
        snprintf(sub, sizeof sub, "%s/%s", a->cg_root, e->d_name);
        kill_all(sub);
        rmdir(sub);
    }
    if (d) closedir(d);
    rmdir(a->cg_root);
    free(a->cg_root);
    a->cg_root = NULL;
}
