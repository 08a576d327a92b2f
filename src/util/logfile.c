/* logfile: a trial's stdout.log / stderr.log, bounded so that at most
 * 2 * limit bytes are ever on disk and at least the last limit are kept.
 * The agent writes them where the trial runs; the orchestrator writes the
 * ones streamed back from nodes that do not share the experiment directory. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "util/util.h"

int tp__logfile_open(tp_logfile_t *f, const char *path, uint64_t limit, tp_error_t *err) {
    f->size = 0;
    f->limit = limit;
    f->fd = open(path, O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (f->fd < 0) {
        int e = errno;
        return tp__errorf(err, -e, "cannot create %s: %s", path, strerror(e));
    }
    return 0;
}

static int write_all(int fd, const char *p, size_t n, off_t off) {
    while (n > 0) {
        ssize_t k = pwrite(fd, p, n, off);
        if (k < 0) {
            if (errno == EINTR) continue;
            return -errno;
        }
        p += k;
        off += k;
        n -= (size_t)k;
    }
    return 0;
}

/* Keep only the last `limit` bytes: read the tail, rewrite it at offset 0,
 * truncate. O(limit) per call, and it runs once per `limit` bytes written,
 * so O(1) amortized per byte. */
static void keep_tail(tp_logfile_t *f) {
    size_t keep = (size_t)f->limit;
    char *tail = malloc(keep ? keep : 1);
    if (!tail) return;
    off_t from = (off_t)(f->size - f->limit);
    size_t got = 0;
    while (got < keep) {
        ssize_t k = pread(f->fd, tail + got, keep - got, from + (off_t)got);
        if (k < 0 && errno == EINTR) continue;
        if (k <= 0) break;
        got += (size_t)k;
    }
    if (got == keep && write_all(f->fd, tail, keep, 0) == 0 && ftruncate(f->fd, (off_t)keep) == 0)
        f->size = keep;
    free(tail);
}

/* Append n bytes (a failed write is dropped: the trial must not suffer from
 * a full disk), then trim when the file passed 2 * limit. */
void tp__logfile_write(tp_logfile_t *f, const char *data, size_t n) {
    if (f->fd < 0 || n == 0) return;
    if (write_all(f->fd, data, n, (off_t)f->size) == 0) f->size += n;
    if (f->limit > 0 && f->size > 2 * f->limit) keep_tail(f);
}

void tp__logfile_close(tp_logfile_t *f) {
    if (f->fd >= 0) close(f->fd);
    f->fd = -1;
}

/* Move the log at cur aside to the first free name of NAME.<k>.log,
 * NAME.<k>.2.log, NAME.<k>.3.log, ...: link() never replaces a file, so no
 * earlier log is written over. 0, or -errno when it cannot be moved. */
static int keep_aside(const char *cur, const char *dir, const char *name, long long k) {
    for (int j = 1; j < 1000; j++) {
        char old[4300];
        if (j == 1)
            snprintf(old, sizeof old, "%s/%s.%lld.log", dir, name, k);
        else
            snprintf(old, sizeof old, "%s/%s.%lld.%d.log", dir, name, k, j);
        if (link(cur, old) == 0) return unlink(cur) == 0 ? 0 : -errno;
        if (errno != EEXIST) return -errno;
    }
    return -EEXIST;
}

/* DIR/.NAME.attempt: which attempt opened DIR/NAME.log. An attempt can be
 * journaled and then never open its logs (killed in between), so "the one
 * before this attempt" may name the wrong one; this record does not. */
static void attempt_file(char *path, size_t n, const char *dir, const char *name) {
    snprintf(path, n, "%s/.%s.attempt", dir, name);
}

int tp__logfile_open_attempt(tp_logfile_t *f, const char *dir, const char *name, int64_t attempt,
                             uint64_t limit, tp_error_t *err) {
    char cur[4200], rec[4200], text[32];
    snprintf(cur, sizeof cur, "%s/%s.log", dir, name);
    attempt_file(rec, sizeof rec, dir, name);
    if (access(cur, F_OK) == 0) {
        long long k = attempt > 1 ? attempt - 1 : 0, wrote = 0;
        char *got = NULL;
        size_t len = 0;
        tp_error_t ignored = {0};
        if (tp__read_file(rec, &got, &len, &ignored) == 0 && sscanf(got, "%lld", &wrote) == 1 &&
            wrote > 0 && wrote < attempt)
            k = wrote;
        free(got);
        int rc = keep_aside(cur, dir, name, k);
        if (rc < 0) tp__log(TP_LOG_WARN, "cannot keep %s aside: %s", cur, strerror(-rc));
    }
    /* the record first: killed before the log exists, nothing is misnamed */
    snprintf(text, sizeof text, "%lld\n", (long long)attempt);
    tp_error_t ignored = {0};
    if (tp__write_file(rec, text, strlen(text), &ignored) != 0)
        tp__log(TP_LOG_WARN, "cannot note the attempt of %s: %s", cur, ignored.msg);
    f->size = 0;
    f->limit = limit;
    f->fd = open(cur, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0644); /* never over a log */
    if (f->fd < 0) {
        int e = errno;
        return tp__errorf(err, -e, "cannot create %s: %s", cur, strerror(e));
    }
    return 0;
}
