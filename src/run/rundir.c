/* rundir: finding an experiment directory and who owns it. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include "run/run.h"
#include "store/store.h"

char *tp__rundir_resolve(const char *dir, tp_error_t *err) {
    if (dir) return tp__strdup(dir);
    DIR *d = opendir("runs");
    if (!d && errno == EACCES) {
        tp__errorf(err, -EACCES,
                   "permission denied: cannot list ./runs to find the latest "
                   "experiment; name its directory, or ask the owner of ./runs");
        return NULL;
    }
    if (!d) {
        tp__errorf(err, -ENOENT, "no experiment directory given and ./runs does not exist; "
                                 "name one, e.g. `tunepack status runs/mlp-demo`");
        return NULL;
    }
    char *best = NULL;
    double best_t = -1;
    struct dirent *e;
    while ((e = readdir(d)) != NULL) {
        if (e->d_name[0] == '.') continue;
        char path[4096];
        struct stat st;
        snprintf(path, sizeof path, "runs/%s/%s", e->d_name, TP_STORE_FILE);
        if (stat(path, &st) != 0) continue;
        double t = (double)st.st_mtim.tv_sec + st.st_mtim.tv_nsec * 1e-9;
        if (t > best_t) {
            best_t = t;
            free(best);
            snprintf(path, sizeof path, "runs/%s", e->d_name);
            best = tp__strdup(path);
        }
    }
    closedir(d);
    if (!best)
        tp__errorf(err, -ENOENT, "no experiment found under ./runs; name its directory, e.g. "
                                 "`tunepack status runs/mlp-demo`");
    return best;
}

int tp__rundir_owner(const char *dir) {
    char path[4096];
    snprintf(path, sizeof path, "%s/lock", dir);
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) return 0;
    int pid = 0;
    if (flock(fd, LOCK_SH | LOCK_NB) != 0) {
        char buf[32] = {0};
        if (pread(fd, buf, sizeof buf - 1, 0) > 0) pid = atoi(buf);
        if (pid <= 0) pid = -1;
    }
    close(fd);
    return pid;
}
