/* mps: starting and stopping NVIDIA MPS control daemons (one per shared
 * GPU, each with its own pipe and log directories), and the environment a
 * trial needs to run under one.
 *
 * No shell: the control program is spawned from argv arrays. Every wait is
 * bounded (MPS_WAIT_S, or TUNEPACK_MPS_WAIT_S); a control program that misbehaves is killed. */
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "gpu/gpu.h"

extern char **environ;

#define MPS_WAIT_S                                                                                 \
    5.0                                            /* the most start or stop waits, unless         \
                                                      TUNEPACK_MPS_WAIT_S says otherwise */
#define MPS_PID_FILE "nvidia-cuda-mps-control.pid" /* in the pipe dir, if the daemon keeps one */

static void sleep_ms(long ms) {
    struct timespec ts = {.tv_sec = ms / 1000, .tv_nsec = (ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
}

/* The most a start or a stop waits, in seconds: TUNEPACK_MPS_WAIT_S when it
 * is a positive number (a node so loaded that its daemons start slowly),
 * else MPS_WAIT_S. */
static double mps_wait_s(void) {
    const char *v = getenv("TUNEPACK_MPS_WAIT_S");
    char *end = NULL;
    double s = v ? strtod(v, &end) : 0;
    return v && end != v && !*end && isfinite(s) && s > 0 ? s : MPS_WAIT_S;
}

/* ---- finding the control program ------------------------------------------- */
static int is_executable_file(const char *path) {
    struct stat st;
    return stat(path, &st) == 0 && S_ISREG(st.st_mode) && access(path, X_OK) == 0;
}

/* O(entries of PATH). */
char *tp__mps_control_path(void) {
    const char *set = getenv("TUNEPACK_MPS_CONTROL");
    if (set && *set) return tp__strdup(set);
    const char *path = getenv("PATH");
    if (!path) return NULL;
    const char *name = "nvidia-cuda-mps-control";
    for (const char *p = path;;) {
        const char *colon = strchr(p, ':');
        size_t len = colon ? (size_t)(colon - p) : strlen(p);
        char cand[4096];
        /* An empty PATH entry means the current directory. */
        int n = snprintf(cand, sizeof cand, "%.*s%s%s", (int)len, p, len ? "/" : "./", name);
        if (n > 0 && (size_t)n < sizeof cand && is_executable_file(cand)) return tp__strdup(cand);
        if (!colon) break;
        p = colon + 1;
    }
    return NULL;
}

/* ---- spawning without a shell ---------------------------------------------- */
/* environ with each "NAME=value" of set replacing any variable of that name.
 * The array is malloc'd, its strings borrowed; free the array only. */
static char **env_with(const char *const *set, size_t nset) {
    size_t n = 0;
    while (environ && environ[n])
        n++;
    char **env = tp__xcalloc(n + nset + 1, sizeof *env);
    size_t k = 0;
    for (size_t i = 0; i < n; i++) {
        int replaced = 0;
        for (size_t j = 0; j < nset && !replaced; j++) {
            size_t name_len = strcspn(set[j], "=") + 1; /* "NAME=" */
            replaced = strncmp(environ[i], set[j], name_len) == 0;
        }
        if (!replaced) env[k++] = environ[i];
    }
    for (size_t j = 0; j < nset; j++)
        env[k++] = (char *)set[j];
    env[k] = NULL;
    return env;
}

/* Spawn argv[0] with stdin/stdout/stderr on the given fds, every other fd
 * closed where glibc can, signals at their defaults and unblocked, in a
 * process group of its own. Returns 0 or -errno. */
static int spawn(char *const argv[], char *const envp[], int in_fd, int out_fd, int err_fd,
                 pid_t *pid) {
    posix_spawn_file_actions_t fa;
    posix_spawnattr_t attr;
    posix_spawn_file_actions_init(&fa);
    posix_spawnattr_init(&attr);
    posix_spawn_file_actions_adddup2(&fa, in_fd, 0);
    posix_spawn_file_actions_adddup2(&fa, out_fd, 1);
    posix_spawn_file_actions_adddup2(&fa, err_fd, 2);
#if defined(__GLIBC__) && (__GLIBC__ > 2 || (__GLIBC__ == 2 && __GLIBC_MINOR__ >= 34))
    /* A daemon lives long: it must not keep our sockets and files open. */
    posix_spawn_file_actions_addclosefrom_np(&fa, 3);
#endif
    sigset_t none, all;
    sigemptyset(&none);
    sigfillset(&all);
    posix_spawnattr_setsigmask(&attr, &none);
    posix_spawnattr_setsigdefault(&attr, &all);
    posix_spawnattr_setpgroup(&attr, 0);
    posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF |
                                        POSIX_SPAWN_SETPGROUP);
    int rc = posix_spawn(pid, argv[0], &fa, &attr, argv, envp);
    posix_spawnattr_destroy(&attr);
    posix_spawn_file_actions_destroy(&fa);
    return -rc;
}

/* Wait for pid until the monotonic deadline; past it, kill and reap it.
 * Returns 0 with *status filled, -ETIMEDOUT (killed), or -ECHILD when
 * someone else reaped it (status unknown). */
static int wait_until(pid_t pid, double deadline, int *status) {
    for (;;) {
        pid_t r = waitpid(pid, status, WNOHANG);
        if (r == pid) return 0;
        if (r < 0 && errno == EINTR) continue;
        if (r < 0) return -ECHILD;
        if (tp__mono_s() >= deadline) {
            kill(pid, SIGKILL);
            while (waitpid(pid, status, 0) < 0 && errno == EINTR) {
            }
            return -ETIMEDOUT;
        }
        sleep_ms(5);
    }
}

/* ---- is a daemon serving this pipe dir? ----------------------------------- */
static void join(char *out, size_t n, const char *dir, const char *name) {
    snprintf(out, n, "%s/%s", dir, name);
}

/* 1 if a daemon serves pipe_dir, 0 if not (no control pipe, or its pid file
 * names a dead process, or the control FIFO has no reader). When it cannot
 * tell, it says 1. O(1) system calls; never blocks. */
static int daemon_alive(const char *pipe_dir) {
    char control[4096], pidfile[4096];
    join(control, sizeof control, pipe_dir, "control");
    join(pidfile, sizeof pidfile, pipe_dir, MPS_PID_FILE);
    struct stat st;
    if (lstat(control, &st) != 0) return 0;
    FILE *f = fopen(pidfile, "re");
    if (f) {
        long pid = 0;
        int got = fscanf(f, "%ld", &pid);
        fclose(f);
        if (got == 1 && pid > 0) return tp__pid_alive(pid);
    }
    if (S_ISFIFO(st.st_mode)) {
        /* Opening a FIFO for writing without blocking fails with ENXIO
         * exactly when nobody has it open for reading. */
        int fd = open(control, O_WRONLY | O_NONBLOCK | O_CLOEXEC);
        if (fd >= 0) {
            close(fd);
            return 1;
        }
        return errno == ENXIO ? 0 : 1;
    }
    if (S_ISSOCK(st.st_mode)) {
        struct sockaddr_un sa = {.sun_family = AF_UNIX};
        if (strlen(control) >= sizeof sa.sun_path) return 1;
        memcpy(sa.sun_path, control, strlen(control) + 1);
        int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
        if (fd < 0) return 1;
        int rc = connect(fd, (struct sockaddr *)&sa, sizeof sa);
        int e = errno;
        close(fd);
        return rc == 0 || e == EINPROGRESS || e == EAGAIN ? 1 : e != ECONNREFUSED;
    }
    return 1;
}

/* Remove what a dead daemon left behind in pipe_dir, so that the next start
 * is not fooled by an old control pipe. */
static void remove_stale(const char *pipe_dir) {
    char path[4096];
    join(path, sizeof path, pipe_dir, "control");
    unlink(path);
    join(path, sizeof path, pipe_dir, MPS_PID_FILE);
    unlink(path);
}

/* The first line of a small file, for error messages ("" if none). */
static void first_line(const char *path, char *out, size_t n) {
    out[0] = '\0';
    FILE *f = fopen(path, "re");
    if (!f) return;
    if (fgets(out, (int)n, f)) out[strcspn(out, "\n")] = '\0';
    fclose(f);
}

/* ---- start ------------------------------------------------------------------ */
/* Costs one spawn and at most mps_wait_s() of polling (5 ms steps). */
int tp__mps_start(const char *control, const char *device, const char *pipe_dir,
                  const char *log_dir, tp_error_t *err) {
    if (!control || !*control || !device || !*device || !pipe_dir || !*pipe_dir || !log_dir ||
        !*log_dir)
        return tp__errorf(err, -EINVAL,
                          "MPS start needs the control program, a device, a pipe "
                          "directory and a log directory");
    if (strlen(pipe_dir) > 3000 || strlen(log_dir) > 3000 || strlen(device) > 200)
        return tp__errorf(err, -ENAMETOOLONG, "MPS directory or device name too long");
    int rc = tp__mkdir_p(pipe_dir, err);
    if (rc == 0) rc = tp__mkdir_p(log_dir, err);
    if (rc) return rc;
    if (daemon_alive(pipe_dir))
        return tp__errorf(err, -EBUSY,
                          "an MPS control daemon already serves %s; stop it first "
                          "(tp__mps_stop, or `echo quit | nvidia-cuda-mps-control` with "
                          "CUDA_MPS_PIPE_DIRECTORY=%s)",
                          pipe_dir, pipe_dir);
    remove_stale(pipe_dir);

    /* The parent's own complaints (bad option, cannot write a dir) land here;
     * the daemon logs to log_dir/control.log itself. */
    char errpath[4096], logpath[4096];
    join(errpath, sizeof errpath, log_dir, "control-start.err");
    join(logpath, sizeof logpath, log_dir, "control.log");
    int null_fd = open("/dev/null", O_RDWR | O_CLOEXEC);
    int err_fd = open(errpath, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (null_fd < 0 || err_fd < 0) {
        int e = errno;
        if (null_fd >= 0) close(null_fd);
        if (err_fd >= 0) close(err_fd);
        return tp__errorf(err, -e, "cannot open %s: %s", errpath, strerror(e));
    }
    char vis[256], pipe_env[4200], log_env[4200];
    snprintf(vis, sizeof vis, "CUDA_VISIBLE_DEVICES=%s", device);
    snprintf(pipe_env, sizeof pipe_env, "CUDA_MPS_PIPE_DIRECTORY=%s", pipe_dir);
    snprintf(log_env, sizeof log_env, "CUDA_MPS_LOG_DIRECTORY=%s", log_dir);
    const char *set[] = {vis, pipe_env, log_env};
    char **env = env_with(set, TP_ARRAY_LEN(set));
    char *argv[] = {(char *)control, "-d", NULL};
    pid_t pid = 0;
    double wait_s = mps_wait_s(), deadline = tp__mono_s() + wait_s;
    rc = spawn(argv, env, null_fd, null_fd, err_fd, &pid);
    free(env);
    close(null_fd);
    close(err_fd);
    if (rc)
        return tp__errorf(err, rc, "cannot run the MPS control program %s: %s", control,
                          strerror(-rc));

    /* The real daemon forks into the background and its parent exits. */
    int status = 0;
    rc = wait_until(pid, deadline, &status);
    char why[256];
    if (rc == -ETIMEDOUT)
        return tp__errorf(err, -ETIMEDOUT,
                          "%s -d did not return within %g s (it should fork a daemon and exit); "
                          "killed it",
                          control, wait_s);
    if (rc == 0 && !(WIFEXITED(status) && WEXITSTATUS(status) == 0)) {
        first_line(errpath, why, sizeof why);
        return tp__errorf(err, -EIO, "%s -d failed (%s %d)%s%s", control,
                          WIFEXITED(status) ? "exit status" : "signal",
                          WIFEXITED(status) ? WEXITSTATUS(status) : WTERMSIG(status),
                          why[0] ? ": " : "", why);
    }
    char pipe_path[4096];
    join(pipe_path, sizeof pipe_path, pipe_dir, "control");
    struct stat st;
    while (lstat(pipe_path, &st) != 0) {
        if (tp__mono_s() >= deadline) {
            first_line(errpath, why, sizeof why);
            if (!why[0]) first_line(logpath, why, sizeof why);
            return tp__errorf(err, -ETIMEDOUT,
                              "the MPS control daemon for device %s did not create %s within "
                              "%g s%s%s (see %s)",
                              device, pipe_path, wait_s, why[0] ? ": " : "", why, logpath);
        }
        sleep_ms(5);
    }
    unlink(errpath); /* nothing to report */
    return 0;
}

/* ---- stop ------------------------------------------------------------------- */
/* Costs one spawn and at most mps_wait_s() of polling; a pipe dir with no live
 * daemon costs a few system calls. */
int tp__mps_stop(const char *control, const char *pipe_dir, tp_error_t *err) {
    if (!pipe_dir || !*pipe_dir)
        return tp__errorf(err, -EINVAL, "MPS stop needs the pipe directory");
    if (!daemon_alive(pipe_dir)) {
        remove_stale(pipe_dir);
        return 0;
    }
    if (!control || !*control)
        return tp__errorf(err, -EINVAL,
                          "an MPS daemon serves %s but no control program was given to stop it",
                          pipe_dir);

    /* stdin is a pipe already holding "quit\n" and closed for writing: no
     * SIGPIPE, no blocking write, whatever the control program does. */
    int in[2];
    if (pipe2(in, O_CLOEXEC) != 0) return tp__errorf(err, -errno, "pipe: %s", strerror(errno));
    ssize_t w = write(in[1], "quit\n", 5);
    close(in[1]);
    int null_fd = open("/dev/null", O_RDWR | O_CLOEXEC);
    if (w != 5 || null_fd < 0) {
        close(in[0]);
        if (null_fd >= 0) close(null_fd);
        return tp__errorf(err, -EIO, "cannot prepare the quit command");
    }
    char pipe_env[4200];
    snprintf(pipe_env, sizeof pipe_env, "CUDA_MPS_PIPE_DIRECTORY=%s", pipe_dir);
    const char *set[] = {pipe_env};
    char **env = env_with(set, TP_ARRAY_LEN(set));
    char *argv[] = {(char *)control, NULL};
    pid_t pid = 0;
    double wait_s = mps_wait_s(), deadline = tp__mono_s() + wait_s;
    int rc = spawn(argv, env, in[0], null_fd, null_fd, &pid);
    free(env);
    close(in[0]);
    close(null_fd);
    if (rc)
        return tp__errorf(err, rc, "cannot run the MPS control program %s: %s", control,
                          strerror(-rc));
    int status = 0;
    wait_until(pid, deadline, &status); /* its exit status matters less than the daemon going */
    while (daemon_alive(pipe_dir)) {
        if (tp__mono_s() >= deadline)
            return tp__errorf(err, -ETIMEDOUT,
                              "the MPS control daemon of %s did not quit within %g s "
                              "(clients still running?)",
                              pipe_dir, wait_s);
        sleep_ms(5);
    }
    remove_stale(pipe_dir);
    return 0;
}

/* ---- a trial's environment ------------------------------------------------- */
/* ceil that forgives float noise: 0.07 * 100 is 7.000000000000001, not 8. */
static double ceil_tolerant(double x) {
    return ceil(x - fabs(x) * 1e-12 - 1e-9);
}

/* O(1). Returns how many strings it filled (1 to 3): the thread percentage is
 * left out when compute is not > 0 (no share declared), the memory limit when
 * memory_mib is 0; -ENAMETOOLONG if a value does not fit 512 bytes. */
int tp__mps_env(const char *pipe_dir, const char *device, double compute, uint64_t memory_mib,
                double headroom, char out[3][512]) {
    int k = 0, n;
    n = snprintf(out[k++], 512, "CUDA_MPS_PIPE_DIRECTORY=%s", pipe_dir ? pipe_dir : "");
    if (n < 0 || n >= 512) return -ENAMETOOLONG;
    if (compute > 0) { /* false for NaN too */
        double pct = ceil_tolerant(100.0 * compute);
        if (pct < 1) pct = 1;
        if (pct > 100) pct = 100;
        snprintf(out[k++], 512, "CUDA_MPS_ACTIVE_THREAD_PERCENTAGE=%d", (int)pct);
    }
    if (memory_mib > 0) {
        if (!(headroom > 0)) headroom = 0;
        double limit = ceil_tolerant((double)memory_mib * (1.0 + headroom));
        n = snprintf(out[k++], 512, "CUDA_MPS_PINNED_DEVICE_MEM_LIMIT=%s=%lluM",
                     device ? device : "0", (unsigned long long)limit);
        if (n < 0 || n >= 512) return -ENAMETOOLONG;
    }
    return k;
}
