/* spawn_ceiling: the machine's own limit for running short processes, with
 * no engine at all: a command run N times at concurrency C, each in a new
 * session with three pipes. With --fork, as the agent starts trials (fork,
 * PR_SET_PDEATHSIG, setsid, dup2, exec: src/agent/trial.c); without, by
 * posix_spawnp (vfork-like), the cheapest way libc has. Prints processes per
 * second; bench/engine.py sets tunepack's figure beside both.
 * Usage: spawn_ceiling N C [--fork] command [args...] */
#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

extern char **environ;

static double now_s(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

int main(int argc, char **argv) {
    if (argc < 4) {
        fprintf(stderr, "usage: spawn_ceiling N C command [args...]\n");
        return 2;
    }
    int n = atoi(argv[1]), c = atoi(argv[2]), running = 0, started = 0, done = 0;
    int use_fork = strcmp(argv[3], "--fork") == 0;
    char **cmd = argv + 3 + use_fork;
    if (!cmd[0]) {
        fprintf(stderr, "usage: spawn_ceiling N C [--fork] command [args...]\n");
        return 2;
    }
    double t0 = now_s();
    while (done < n) {
        while (running < c && started < n) {
            int fds[3][2];
            posix_spawn_file_actions_t fa;
            posix_spawnattr_t at;
            posix_spawn_file_actions_init(&fa);
            posix_spawnattr_init(&at);
            posix_spawnattr_setflags(&at, POSIX_SPAWN_SETSID);
            posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
            for (int i = 0; i < 3; i++) {
                if (pipe2(fds[i], O_CLOEXEC) != 0) return 1;
                posix_spawn_file_actions_adddup2(&fa, fds[i][1], i + 1);
            }
            pid_t pid;
            int rc = 0;
            if (use_fork) {
                pid = fork();
                if (pid == 0) {
                    prctl(PR_SET_PDEATHSIG, SIGKILL);
                    setsid();
                    int null = open("/dev/null", O_RDONLY);
                    dup2(null, 0);
                    for (int i = 0; i < 3; i++)
                        dup2(fds[i][1], i + 1);
                    execvp(cmd[0], cmd);
                    _exit(127);
                }
                rc = pid < 0;
            } else {
                rc = posix_spawnp(&pid, cmd[0], &fa, &at, cmd, environ);
            }
            posix_spawn_file_actions_destroy(&fa);
            posix_spawnattr_destroy(&at);
            for (int i = 0; i < 3; i++) {
                close(fds[i][0]);
                close(fds[i][1]);
            }
            if (rc != 0) {
                fprintf(stderr, "spawn_ceiling: cannot run %s\n", cmd[0]);
                return 1;
            }
            running++;
            started++;
        }
        if (waitpid(-1, NULL, 0) > 0) {
            running--;
            done++;
        }
    }
    printf("%.0f\n", n / (now_s() - t0));
    return 0;
}
