/* tree: a directory copied whole over another, and removed whole, with
 * plain system calls (no shell, no external program). Used where one
 * trial's checkpoint becomes another's (scheduler pbt's exploit), in the
 * orchestrator's loop: a file's data is shared or copied inside the kernel
 * where the file system can (copy_data; bench/tree_copy prints the rate). */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/fs.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <unistd.h>

#include "util/util.h"

/* a "/" b (or a b when sep is ""), malloc'd. */
static char *join(const char *a, const char *sep, const char *b) {
    size_t n = strlen(a) + strlen(sep) + strlen(b) + 1;
    char *p = tp__xmalloc(n);
    snprintf(p, n, "%s%s%s", a, sep, b);
    return p;
}

/* Remove path and everything below it; 0 when it is gone (or never was). */
int tp__remove_tree(const char *path) {
    struct stat st;
    if (lstat(path, &st) < 0) return errno == ENOENT ? 0 : -errno;
    if (!S_ISDIR(st.st_mode)) return unlink(path) < 0 ? -errno : 0;
    DIR *d = opendir(path);
    if (!d) return -errno;
    int rc = 0;
    struct dirent *e;
    while (rc == 0 && (e = readdir(d))) {
        if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, "..")) continue;
        char *sub = join(path, "/", e->d_name);
        rc = tp__remove_tree(sub);
        free(sub);
    }
    closedir(d);
    if (rc == 0 && rmdir(path) < 0) rc = -errno;
    return rc;
}

/* in's data, from its offset on, into out: a reflink where the file system
 * shares extents (btrfs, XFS: no data moves at all), else copy_file_range
 * (inside the kernel; on NFS 4.2, on the server), else read and write from
 * where those stopped. Returns 0 or -errno. */
static int copy_data(int in, int out) {
    struct stat st;
    if (ioctl(out, FICLONE, in) == 0) return 0;
    if (fstat(in, &st) < 0) return -errno;
    for (off_t done = 0; done < st.st_size;) {
        ssize_t n = copy_file_range(in, NULL, out, NULL, (size_t)(st.st_size - done), 0);
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0)
            break; /* not offered here (EXDEV, ENOSYS, EINVAL, ...), or a short file:
                      read and write the rest, which says the real error if any */
        done += n;
    }
    char buf[1 << 16];
    for (;;) {
        ssize_t n = read(in, buf, sizeof buf);
        if (n < 0 && errno == EINTR) continue;
        if (n < 0) return -errno;
        if (n == 0) return 0;
        for (ssize_t off = 0; off < n;) {
            ssize_t w = write(out, buf + off, (size_t)(n - off));
            if (w < 0 && errno == EINTR) continue;
            if (w < 0) return -errno;
            off += w;
        }
    }
}

static int copy_file(const char *from, const char *to, mode_t mode) {
    int in = open(from, O_RDONLY | O_CLOEXEC);
    if (in < 0) return -errno;
    int out = open(to, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, mode & 07777);
    if (out < 0) {
        int e = errno;
        close(in);
        return -e;
    }
    int rc = copy_data(in, out);
    close(in);
    if (close(out) < 0 && rc == 0) rc = -errno;
    return rc;
}

/* from's tree into the new directory to (regular files, directories and
 * symbolic links as links). */
static int copy_into(const char *from, const char *to, tp_error_t *err) {
    struct stat st;
    if (stat(from, &st) < 0)
        return tp__errorf(err, -errno, "cannot read %s: %s", from, strerror(errno));
    if (mkdir(to, st.st_mode & 07777) < 0)
        return tp__errorf(err, -errno, "cannot create %s: %s", to, strerror(errno));
    DIR *d = opendir(from);
    if (!d) return tp__errorf(err, -errno, "cannot read %s: %s", from, strerror(errno));
    int rc = 0;
    struct dirent *e;
    while (rc == 0 && (e = readdir(d))) {
        if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, "..")) continue;
        char *a = join(from, "/", e->d_name), *b = join(to, "/", e->d_name);
        struct stat es;
        if (lstat(a, &es) < 0) {
            rc = tp__errorf(err, -errno, "cannot read %s: %s", a, strerror(errno));
        } else if (S_ISDIR(es.st_mode)) {
            rc = copy_into(a, b, err);
        } else if (S_ISLNK(es.st_mode)) {
            char target[4096];
            ssize_t n = readlink(a, target, sizeof target - 1);
            if (n >= 0) target[n] = 0;
            if (n < 0 || symlink(target, b) < 0)
                rc = tp__errorf(err, -errno, "cannot copy the link %s: %s", a, strerror(errno));
        } else if (S_ISREG(es.st_mode)) {
            int c = copy_file(a, b, es.st_mode);
            if (c < 0) rc = tp__errorf(err, c, "cannot copy %s to %s: %s", a, b, strerror(-c));
        } /* sockets, fifos, devices: not part of a checkpoint */
        free(a);
        free(b);
    }
    closedir(d);
    return rc;
}

/* See util.h. */
int tp__replace_tree(const char *from, const char *to, tp_error_t *err) {
    char *fresh = join(to, "", ".copying"), *old = join(to, "", ".replaced");
    int rc = tp__remove_tree(fresh);
    if (rc == 0) rc = tp__remove_tree(old);
    if (rc < 0) {
        rc = tp__errorf(err, rc, "cannot clear %s: %s", fresh, strerror(-rc));
    } else {
        rc = copy_into(from, fresh, err);
        if (rc == 0 && rename(to, old) < 0 && errno != ENOENT)
            rc = tp__errorf(err, -errno, "cannot move %s aside: %s", to, strerror(errno));
        if (rc == 0 && rename(fresh, to) < 0)
            rc = tp__errorf(err, -errno, "cannot rename %s to %s: %s", fresh, to, strerror(errno));
        if (rc == 0)
            tp__remove_tree(old);
        else
            tp__remove_tree(fresh);
    }
    free(fresh);
    free(old);
    return rc;
}
