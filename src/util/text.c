/* text: strings, edit distance, did-you-mean, number formatting, file io. */
#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <unistd.h>

#include "util/util.h"

static void out_of_memory(size_t n) {
    fprintf(stderr, "tunepack: error: out of memory (%zu bytes)\n", n);
    abort();
}

void *tp__xmalloc(size_t n) {
    void *p = malloc(n ? n : 1);
    if (!p) out_of_memory(n);
    return p;
}

void *tp__xcalloc(size_t n, size_t size) {
    void *p = calloc(n ? n : 1, size ? size : 1);
    if (!p) out_of_memory(n * size);
    return p;
}

void *tp__xrealloc(void *p, size_t n) {
    void *q = realloc(p, n ? n : 1);
    if (!q) out_of_memory(n);
    return q;
}

static void too_large(size_t n, size_t size) {
    fprintf(stderr, "tunepack: error: out of memory (%zu elements of %zu bytes)\n", n, size);
    abort();
}

void *tp__xresize(void *p, size_t old_n, size_t n, size_t size) {
    if (size && n > SIZE_MAX / size) too_large(n, size);
    p = tp__xrealloc(p, n * size);
    if (n > old_n) memset((char *)p + old_n * size, 0, (n - old_n) * size);
    return p;
}

void *tp__xgrow(void *p, size_t *cap, size_t need, size_t size, size_t min) {
    if (need <= *cap) return p;
    size_t n = *cap ? *cap : min ? min : 1;
    while (n < need) {
        if (n > SIZE_MAX / 2) too_large(need, size);
        n *= 2;
    }
    p = tp__xresize(p, *cap, n, size);
    *cap = n;
    return p;
}

char *tp__strdup(const char *s) {
    if (!s) return NULL;
    size_t n = strlen(s) + 1;
    char *p = tp__xmalloc(n);
    memcpy(p, s, n);
    return p;
}

/* Optimal string alignment distance: Levenshtein's insertions, deletions
 * and substitutions plus swaps of two adjacent characters, each costing 1
 * ("nmae" is 1 from "name"). Three rows of memory: O(len(a)*len(b)) time,
 * O(len(b)) space. */
size_t tp__edit_distance(const char *a, const char *b) {
    size_t la = strlen(a), lb = strlen(b);
    size_t *rows = tp__xmalloc(3 * (lb + 1) * sizeof *rows);
    size_t *prev2 = rows, *prev = rows + lb + 1, *cur = rows + 2 * (lb + 1);
    for (size_t j = 0; j <= lb; j++)
        prev[j] = j;
    for (size_t i = 1; i <= la; i++) {
        cur[0] = i;
        for (size_t j = 1; j <= lb; j++) {
            size_t best = prev[j - 1] + (a[i - 1] != b[j - 1]);
            if (prev[j] + 1 < best) best = prev[j] + 1;
            if (cur[j - 1] + 1 < best) best = cur[j - 1] + 1;
            if (i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1] &&
                prev2[j - 2] + 1 < best)
                best = prev2[j - 2] + 1;
            cur[j] = best;
        }
        size_t *t = prev2;
        prev2 = prev, prev = cur, cur = t;
    }
    size_t d = prev[lb];
    free(rows);
    return d;
}

/* Is the shorter of a and b (at least 2 chars) a subsequence of the longer,
 * both starting with the same letter? Catches abbreviations ("rnd" for
 * "random") and truncations ("lrate" for "lr") that edit distance misses. */
static int abbreviates(const char *a, const char *b) {
    size_t la = strlen(a), lb = strlen(b);
    if (la > lb) {
        const char *t = a;
        a = b, b = t;
        la = lb;
    }
    if (la < 2 || tolower((unsigned char)a[0]) != tolower((unsigned char)b[0])) return 0;
    for (; *a && *b; b++)
        if (tolower((unsigned char)*a) == tolower((unsigned char)*b)) a++;
    return *a == '\0';
}

/* The candidate nearest to word when it is a plausible typo: a
 * case-insensitive match, edit distance <= max(1, len(word)/3), or failing
 * those an abbreviation either way (see abbreviates). NULL candidates are
 * skipped. O(n * len^2). */
const char *tp__did_you_mean(const char *word, const char *const *candidates, size_t n) {
    const char *best = NULL, *abbrev = NULL;
    size_t best_d = (size_t)-1, abbrev_d = (size_t)-1;
    for (size_t i = 0; i < n; i++) {
        if (!candidates[i]) continue;
        if (strcasecmp(word, candidates[i]) == 0) return candidates[i];
        size_t d = tp__edit_distance(word, candidates[i]);
        if (d < best_d) {
            best_d = d;
            best = candidates[i];
        }
        if (d < abbrev_d && abbreviates(word, candidates[i])) {
            abbrev_d = d;
            abbrev = candidates[i];
        }
    }
    size_t limit = strlen(word) / 3;
    if (limit < 1) limit = 1;
    return best && best_d <= limit ? best : abbrev;
}

/* Shortest "%.*g" text that strtod reads back as exactly v (integral values
 * below 1e16 in plain digits); "nan", "inf", "-inf" for non-finite values. */
void tp__fmt_double(double v, char out[32]) {
    if (isnan(v)) {
        strcpy(out, "nan");
        return;
    }
    if (isinf(v)) {
        strcpy(out, v < 0 ? "-inf" : "inf");
        return;
    }
    if (v == floor(v) && fabs(v) < 1e16) { /* integral: "20", never "2e+01" */
        snprintf(out, 32, "%.0f", v);
        return;
    }
    for (int prec = 1; prec <= 17; prec++) {
        snprintf(out, 32, "%.*g", prec, v);
        if (strtod(out, NULL) == v) return;
    }
    snprintf(out, 32, "%.17g", v);
}

/* "%.6g" of v; NaN of either sign is "nan". O(1). */
void tp__fmt_sig(double v, char out[32]) {
    if (isnan(v)) {
        strcpy(out, "nan");
        return;
    }
    snprintf(out, 32, "%.6g", v);
}

/* Read path into a malloc'd NUL-terminated buffer (*out, caller frees) and
 * its length (*len, may be NULL). Returns 0 or -errno with "cannot read
 * path: reason". O(size), sized once from fstat for a regular file. */
int tp__read_file(const char *path, char **out, size_t *len, tp_error_t *err) {
    *out = NULL;
    FILE *f = fopen(path, "rb");
    if (!f) {
        int e = errno;
        return tp__errorf(err, -e, "cannot read %s: %s", path, strerror(e));
    }
    tp_buf_t b;
    tp__buf_init(&b);
    struct stat st; /* a regular file's size: one allocation instead of one per doubling */
    if (fstat(fileno(f), &st) == 0 && S_ISREG(st.st_mode) && st.st_size > 0)
        tp__buf_reserve(&b, (size_t)st.st_size);
    for (;;) { /* straight into the buffer, 64 KiB at a time beyond the size known */
        if (b.cap - b.len < 2 && tp__buf_reserve(&b, 65536) < 0) {
            fclose(f);
            tp__buf_free(&b);
            return tp__errorf(err, -ENOMEM, "cannot read %s: out of memory", path);
        }
        size_t n = fread(b.data + b.len, 1, b.cap - b.len - 1, f);
        b.len += n;
        b.data[b.len] = '\0';
        if (n == 0) break;
    }
    if (ferror(f)) {
        int e = errno ? errno : EIO;
        fclose(f);
        tp__buf_free(&b);
        return tp__errorf(err, -e, "cannot read %s: %s", path, strerror(e));
    }
    fclose(f);
    if (len) *len = b.len;
    *out = tp__buf_steal(&b);
    return 0;
}

/* Write data to "<path>.tmp.<pid>" then rename it over path, so readers see
 * either the old or the new contents. Returns 0 or -errno. */
int tp__write_file(const char *path, const void *data, size_t len, tp_error_t *err) {
    char tmp[4096];
    int w = snprintf(tmp, sizeof tmp, "%s.tmp.%ld", path, (long)getpid());
    if (w < 0 || (size_t)w >= sizeof tmp)
        return tp__errorf(err, -ENAMETOOLONG, "cannot write %s: path too long", path);
    int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd < 0) {
        int e = errno;
        return tp__errorf(err, -e, "cannot write %s: %s", tmp, strerror(e));
    }
    const char *p = data;
    size_t left = len;
    while (left > 0) {
        ssize_t k = write(fd, p, left);
        if (k < 0) {
            if (errno == EINTR) continue;
            int e = errno;
            close(fd);
            unlink(tmp);
            return tp__errorf(err, -e, "cannot write %s: %s", tmp, strerror(e));
        }
        p += k;
        left -= (size_t)k;
    }
    if (close(fd) < 0) {
        int e = errno;
        unlink(tmp);
        return tp__errorf(err, -e, "cannot write %s: %s", tmp, strerror(e));
    }
    if (rename(tmp, path) < 0) {
        int e = errno;
        unlink(tmp);
        return tp__errorf(err, -e, "cannot rename %s to %s: %s", tmp, path, strerror(e));
    }
    return 0;
}

/* Create path and its missing parents with mode (less the umask); an
 * existing directory is fine. Returns 0 or -errno. */
int tp__mkdir_p_mode(const char *path, int mode, tp_error_t *err) {
    size_t n = strlen(path);
    if (n == 0) return tp__errorf(err, -EINVAL, "cannot create a directory with an empty name");
    /* Fast path: the parent usually exists (one syscall instead of one per
     * component: this runs once per trial attempt). */
    if (mkdir(path, (mode_t)mode) == 0) return 0;
    char *p = tp__strdup(path);
    for (size_t i = 1; i <= n; i++) {
        if (p[i] != '/' && p[i] != '\0') continue;
        char saved = p[i];
        p[i] = '\0';
        if (mkdir(p, (mode_t)mode) < 0 && errno != EEXIST) {
            int e = errno;
            int rc = tp__errorf(err, -e, "cannot create directory %s: %s", p, strerror(e));
            free(p);
            return rc;
        }
        p[i] = saved;
    }
    struct stat st;
    if (stat(path, &st) < 0 || !S_ISDIR(st.st_mode)) {
        free(p);
        return tp__errorf(err, -ENOTDIR, "cannot create directory %s: %s", path, strerror(ENOTDIR));
    }
    free(p);
    return 0;
}

void tp__trial_path(char *out, size_t n, const char *dir, long long id, const char *tail) {
    snprintf(out, n, "%s/trials/%06lld%s", dir, id, tail ? tail : "");
}

int tp__mkdir_p(const char *path, tp_error_t *err) {
    return tp__mkdir_p_mode(path, 0755, err);
}
