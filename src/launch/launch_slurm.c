/* launch_slurm: what tunepack asks of Slurm outside the agent protocol: the
 * nodes of an allocation, an allocation of its own (a placeholder batch job
 * that holds the nodes while agents run beside it as overlapping steps), its
 * queue state while it waits, and giving it back. Each is one short command
 * (scontrol, sbatch, squeue, scancel) run without a shell. */
#include <errno.h>
#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "launch/launch.h"

extern char **environ;

int tp__run_capture(char *const *argv, char *out, size_t n, tp_error_t *err) {
    int fds[2];
    if (pipe(fds) != 0) return tp__errorf(err, -errno, "pipe: %s", strerror(errno));
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_adddup2(&fa, fds[1], STDOUT_FILENO);
    posix_spawn_file_actions_adddup2(&fa, fds[1], STDERR_FILENO);
    posix_spawn_file_actions_addclose(&fa, fds[0]);
    posix_spawn_file_actions_addopen(&fa, STDIN_FILENO, "/dev/null", 0, 0);
    pid_t pid;
    int rc = posix_spawnp(&pid, argv[0], &fa, NULL, argv, environ);
    posix_spawn_file_actions_destroy(&fa);
    close(fds[1]);
    if (rc != 0) {
        close(fds[0]);
        return tp__errorf(err, -rc, "cannot run %s: %s", argv[0], strerror(rc));
    }
    size_t k = 0;
    char drop[512];
    for (;;) {
        ssize_t got =
            k + 1 < n ? read(fds[0], out + k, n - 1 - k) : read(fds[0], drop, sizeof drop);
        if (got < 0 && errno == EINTR) continue;
        if (got <= 0) break;
        if (k + 1 < n) k += (size_t)got;
    }
    if (n) out[k] = 0;
    close(fds[0]);
    int status = 0;
    while (waitpid(pid, &status, 0) < 0 && errno == EINTR)
        continue;
    if (WIFEXITED(status) && WEXITSTATUS(status) == 0) return 0;
    while (k && (out[k - 1] == '\n' || out[k - 1] == '\r'))
        out[--k] = 0;
    return tp__errorf(err, -EIO, "%s failed (%s %d): %s", argv[0],
                      WIFEXITED(status) ? "exit" : "signal",
                      WIFEXITED(status) ? WEXITSTATUS(status) : WTERMSIG(status), n ? out : "");
}

int tp__slurm_nodes(const char *nodelist, char ***nodes, size_t *count, tp_error_t *err) {
    char *out = tp__xmalloc(1 << 20);
    char *argv[] = {"scontrol", "show", "hostnames", (char *)nodelist, NULL};
    int rc = tp__run_capture(argv, out, 1 << 20, err);
    *nodes = NULL;
    *count = 0;
    if (rc == 0) {
        char *save = NULL;
        for (char *h = strtok_r(out, " \t\r\n", &save); h; h = strtok_r(NULL, " \t\r\n", &save)) {
            *nodes = tp__xrealloc(*nodes, (*count + 2) * sizeof **nodes);
            (*nodes)[(*count)++] = tp__strdup(h);
            (*nodes)[*count] = NULL;
        }
        if (*count == 0) rc = tp__errorf(err, -ENOENT, "the allocation %s names no node", nodelist);
    }
    free(out);
    return rc;
}

int tp__slurm_request(const tp_slurm_request_t *q, char *jobid, size_t n, tp_error_t *err) {
    char nodes[32], gpus[32], cpus[32];
    char *argv[64];
    size_t k = 0;
    argv[k++] = "sbatch";
    argv[k++] = "--parsable";
    argv[k++] = "--job-name=tunepack";
    argv[k++] = "--output=/dev/null";
    snprintf(nodes, sizeof nodes, "--nodes=%d", q->nodes > 0 ? q->nodes : 1);
    argv[k++] = nodes;
    argv[k++] = "--ntasks-per-node=1";
    if (q->gpus_per_node > 0) {
        snprintf(gpus, sizeof gpus, "--gres=gpu:%d", q->gpus_per_node);
        argv[k++] = gpus;
    }
    if (q->cpus_per_node > 0) {
        snprintf(cpus, sizeof cpus, "--cpus-per-task=%d", q->cpus_per_node);
        argv[k++] = cpus;
    }
    char part[300], acct[300], tlim[300];
    if (q->partition) {
        snprintf(part, sizeof part, "--partition=%s", q->partition);
        argv[k++] = part;
    }
    if (q->account) {
        snprintf(acct, sizeof acct, "--account=%s", q->account);
        argv[k++] = acct;
    }
    if (q->time_limit) {
        snprintf(tlim, sizeof tlim, "--time=%s", q->time_limit);
        argv[k++] = tlim;
    }
    char excl[2100];
    if (q->exclude && *q->exclude) {
        snprintf(excl, sizeof excl, "--exclude=%s", q->exclude);
        argv[k++] = excl;
    }
    for (size_t i = 0; i < q->nextra && k < 56; i++)
        argv[k++] = q->extra[i];
    /* The placeholder holds the nodes; the agents run beside it. */
    argv[k++] = "--wrap";
    argv[k++] = "exec sleep 2147483647";
    argv[k] = NULL;
    char out[512];
    int rc = tp__run_capture(argv, out, sizeof out, err);
    if (rc) return rc;
    size_t len = strspn(out, "0123456789");
    if (len == 0 || len >= n)
        return tp__errorf(err, -EPROTO, "sbatch said \"%s\", not a job id", out);
    memcpy(jobid, out, len);
    jobid[len] = 0;
    return 0;
}

int tp__slurm_job_state(const char *jobid, char *state, size_t sn, char *reason, size_t rn,
                        char *nodelist, size_t nn, tp_error_t *err) {
    char out[4096];
    char *argv[] = {"squeue", "--noheader", "--jobs", (char *)jobid, "--format=%T|%r|%N", NULL};
    int rc = tp__run_capture(argv, out, sizeof out, err);
    if (rc) return rc;
    char *save = NULL, *line = strtok_r(out, "\r\n", &save);
    if (!line) return tp__errorf(err, -ENOENT, "Slurm job %s is no longer in the queue", jobid);
    char *f1 = strchr(line, '|'), *f2 = f1 ? strchr(f1 + 1, '|') : NULL;
    if (!f1 || !f2) return tp__errorf(err, -EPROTO, "squeue said \"%s\"", line);
    *f1 = *f2 = 0;
    snprintf(state, sn, "%s", line);
    snprintf(reason, rn, "%s", f1 + 1);
    snprintf(nodelist, nn, "%s", f2 + 1);
    return 0;
}

int tp__slurm_release(const char *jobid, tp_error_t *err) {
    char out[512];
    char *argv[] = {"scancel", (char *)jobid, NULL};
    return tp__run_capture(argv, out, sizeof out, err);
}
