/* spawn: an attempt's process started, one fork and exec, and tied to the
 * agent's life. */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include "agent/agent_internal.h"

/* In the child of tp__spawn_trial's fork, before exec: only async-signal-safe
 * calls. Dies with the agent (SIGKILL when the agent's thread ends: a trainer
 * left running by a killed agent could otherwise train to its job's end and
 * save a checkpoint there, which its retry would resume from with nothing
 * left to report), in a new session, with default signal dispositions and an
 * empty mask, stdin from /dev/null and the pipes on fds 1..TP_NPIPES + 1.
 * Writes errno to err_fd and exits 127 when a step or the exec fails. */
static void spawn_child(char **args, char **env, const char *cwd, int fds[TP_NPIPES][2], int ctl_rd,
                        int err_fd, pid_t agent) {
    int e = 0;
    if (prctl(PR_SET_PDEATHSIG, SIGKILL) != 0) e = errno;
    if (!e && getppid() != agent) _exit(127); /* the agent died between fork and prctl */
    if (!e && setsid() < 0) e = errno;
    struct sigaction dfl;
    memset(&dfl, 0, sizeof dfl);
    dfl.sa_handler = SIG_DFL;
    for (int sig = 1; !e && sig < NSIG; sig++)
        sigaction(sig, &dfl, NULL); /* SIGKILL, SIGSTOP, libc's own: EINVAL, ignored */
    /* the sources first onto fds above every target, so that no dup2 below
     * overwrites a source not yet moved */
    int src[TP_NPIPES + 2];
    src[0] = e ? -1 : open("/dev/null", O_RDONLY | O_CLOEXEC);
    if (!e && src[0] < 0) e = errno;
    for (int i = 0; i < TP_NPIPES; i++)
        src[i + 1] = fds[i][1];
    src[TP_NPIPES + 1] = ctl_rd;
    for (int i = 0; !e && i < TP_NPIPES + 2; i++)
        if ((src[i] = fcntl(src[i], F_DUPFD, TP_NPIPES + 2)) < 0) e = errno;
    for (int i = 0; !e && i < TP_NPIPES + 2; i++)
        if (dup2(src[i], i) < 0) e = errno; /* the targets are not close-on-exec */
    for (int i = 0; !e && i < TP_NPIPES + 2; i++)
        close(src[i]);
    if (!e && cwd && chdir(cwd) != 0) e = errno;
    sigset_t none;
    sigemptyset(&none);
    if (!e) sigprocmask(SIG_SETMASK, &none, NULL);
    if (!e) execvpe(args[0], args, env);
    if (!e) e = errno;
    ssize_t w = write(err_fd, &e, sizeof e);
    (void)w;
    _exit(127);
}

/* See agent_internal.h. */
int tp__spawn_trial(char **args, char **env, const char *cwd, int fds[TP_NPIPES][2], int *ctl_fd,
                    pid_t *pid) {
    int made = 0, rc = 0, ctl[2] = {-1, -1}, errp[2] = {-1, -1};
    for (; made < TP_NPIPES; made++)
        if (pipe2(fds[made], O_CLOEXEC) != 0) {
            rc = -errno;
            break;
        }
    if (rc == 0 && pipe2(ctl, O_CLOEXEC | O_NONBLOCK) != 0) rc = -errno;
    if (rc == 0 && pipe2(errp, O_CLOEXEC) != 0) rc = -errno;
    if (rc == 0) {
        /* every signal blocked across the fork: the child must not run the
         * agent's handlers (libuv's write to the agent's own signal pipe) */
        sigset_t all, old;
        sigfillset(&all);
        pthread_sigmask(SIG_SETMASK, &all, &old);
        pid_t agent = getpid(), child = fork();
        if (child == 0) spawn_child(args, env, cwd, fds, ctl[0], errp[1], agent);
        if (child < 0) rc = -errno;
        pthread_sigmask(SIG_SETMASK, &old, NULL);
        close(errp[1]);
        if (child > 0) {
            int e = 0;
            ssize_t n;
            while ((n = read(errp[0], &e, sizeof e)) < 0 && errno == EINTR) {
            }
            if (n > 0) { /* it failed before or at the exec, and exited */
                rc = -(e ? e : EIO);
                while (waitpid(child, NULL, 0) < 0 && errno == EINTR) {
                }
            } else {
                *pid = child;
            }
        }
        close(errp[0]);
    }
    for (int i = 0; i < made; i++) {
        close(fds[i][1]);
        if (rc != 0) close(fds[i][0]);
    }
    if (ctl[0] >= 0) close(ctl[0]);
    if (rc != 0 && ctl[1] >= 0) close(ctl[1]);
    *ctl_fd = rc == 0 ? ctl[1] : -1;
    return rc;
}
