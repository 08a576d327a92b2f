/* tunepack/report.h - report a trial's metrics to tunepack from C or C++.
 *
 * Usage (header only, no library to link, no -lm needed):
 *
 *     #include <tunepack/report.h>
 *     for (long epoch = 1; epoch <= epochs; epoch++) {
 *         train_one_epoch(&net);
 *         tp_report(epoch, "val_acc", val_acc, "loss", train_loss, NULL);
 *     }
 *
 * Under tunepack (TUNEPACK_REPORT_FD set) each call writes one JSON line
 *     {"step": 3, "val_acc": 0.91000000000000003, "loss": 0.20000000000000001}
 * to that file descriptor with a single write(2), so lines from one process never interleave
 * (a line is at most TP_REPORT_LINE_MAX = 4096 bytes = PIPE_BUF on Linux, which the kernel
 * writes to a pipe atomically). Without TUNEPACK_REPORT_FD the same call prints
 *     step=3 val_acc=0.91000000000000003 loss=0.20000000000000001
 * on stdout (flushed): the name=value form tunepack also reads, all on one line because
 * tunepack ties a step and the other metrics to the objective only when they share its line.
 * So the program runs unchanged outside tunepack (or with a runner that reads stdout only).
 *
 * Contract: C99 or later, or C++; POSIX (write(2)); nothing beyond libc; no state kept between
 * calls. In C++ end the list with NULL or nullptr; a bare 0 is not a pointer in varargs.
 */
#ifndef TUNEPACK_REPORT_H
#define TUNEPACK_REPORT_H

#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define TP_REPORT_LINE_MAX 4096 /* bytes in one JSON line, '\n' included */

/* Appends the formatted text to buf[*len..cap); returns 0, or -1 when it does not fit (then
 * *len is left unchanged). */
static inline int tp__report_append(char *buf, size_t cap, size_t *len, const char *fmt, ...)
{
    va_list ap;
    int n;

    va_start(ap, fmt);
    n = vsnprintf(buf + *len, cap - *len, fmt, ap);
    va_end(ap);
    if (n < 0 || (size_t)n >= cap - *len)
        return -1;
    *len += (size_t)n;
    return 0;
}

/* Formats value with "%.17g" (round-trips a double) into out[cap]; non-finite values become
 * "null" when json is set. A locale whose decimal point is ',' is undone, so the text is valid
 * JSON even after setlocale(LC_ALL, ""). Returns 0 or -1 (did not fit). */
static inline int tp__report_number(char *out, size_t cap, double value, int json)
{
    int n;
    char *p;

    if (json && !isfinite(value))
        n = snprintf(out, cap, "null");
    else
        n = snprintf(out, cap, "%.17g", value);
    if (n < 0 || (size_t)n >= cap)
        return -1;
    for (p = out; *p; p++)
        if (*p == ',')
            *p = '.';
    return 0;
}

/* Appends name as a JSON string (quotes, backslash and control bytes escaped; other bytes
 * copied as they are). Returns 0 or -1 (did not fit). */
static inline int tp__report_json_string(char *buf, size_t cap, size_t *len, const char *name)
{
    size_t at = *len;
    const unsigned char *p;

    if (at + 1 >= cap)
        return -1;
    buf[at++] = '"';
    for (p = (const unsigned char *)name; *p; p++) {
        if (*p == '"' || *p == '\\') {
            if (at + 2 >= cap)
                return -1;
            buf[at++] = '\\';
            buf[at++] = (char)*p;
        } else if (*p < 0x20) {
            if (at + 6 >= cap)
                return -1;
            snprintf(buf + at, 7, "\\u%04x", (unsigned)*p);
            at += 6;
        } else {
            if (at + 1 >= cap)
                return -1;
            buf[at++] = (char)*p;
        }
    }
    if (at + 1 >= cap)
        return -1;
    buf[at++] = '"';
    *len = at;
    return 0;
}

/* Reads TUNEPACK_REPORT_FD: returns 1 and sets *fd when it names a descriptor, 0 when it is
 * unset or empty, -1 (errno EINVAL) when it is not a non-negative decimal int. */
static inline int tp__report_fd(int *fd)
{
    const char *s = getenv("TUNEPACK_REPORT_FD");
    char *end;
    long v;

    if (s == NULL || *s == '\0')
        return 0;
    errno = 0;
    v = strtol(s, &end, 10);
    if (errno != 0 || *end != '\0' || v < 0 || v > INT_MAX) {
        errno = EINVAL;
        return -1;
    }
    *fd = (int)v;
    return 1;
}

/* Writes all len bytes of buf to fd: one write(2) in practice (a line of at most PIPE_BUF
 * bytes goes to a pipe whole); retried on EINTR and after a short write to a file. */
static inline int tp__report_write_all(int fd, const char *buf, size_t len)
{
    while (len > 0) {
        ssize_t n = write(fd, buf, len);
        if (n < 0) {
            if (errno == EINTR)
                continue;
            return -1;
        }
        buf += n;
        len -= (size_t)n;
    }
    return 0;
}

/* Reports metrics for one step: tp_report(step, name, value, name, value, ..., NULL).
 * Outside tunepack the line is "step=3 val_acc=0.91 loss=0.2" on stdout, non-finite values
 * printed as nan/inf; for that form keep names to letters, digits and _ . - / (first a letter
 * or _), which is what tunepack's name=value parser takes.
 * Names are const char *, values double: the values after the first go through varargs
 * unconverted, so pass 1.0 or (double)n, never a bare int. step < 0 leaves "step" out; name
 * may be NULL to report only the step. Non-finite values are written as JSON null.
 * Returns 0, or -1 with errno set: EINVAL (TUNEPACK_REPORT_FD is not a number), EMSGSIZE (the
 * line would exceed TP_REPORT_LINE_MAX bytes), or write(2)'s error (EBADF, EPIPE, ...).
 * Costs one getenv, one snprintf per metric and one write(2). */
static inline int tp_report(long step, const char *name, double value, ...)
{
    char line[TP_REPORT_LINE_MAX];
    char num[64];
    size_t len = 0;
    int fd = -1;
    int have_fd;
    int first = 1;
    int rc = 0;
    va_list ap;

    have_fd = tp__report_fd(&fd);
    if (have_fd < 0)
        return -1;

    if (have_fd) {
        line[len++] = '{';
        if (step >= 0) {
            if (tp__report_append(line, sizeof line, &len, "\"step\": %ld", step) != 0)
                goto too_long;
            first = 0;
        }
    } else if (step >= 0) {
        if (printf("step=%ld", step) < 0)
            rc = -1;
        first = 0;
    }

    va_start(ap, value);
    while (name != NULL) {
        if (tp__report_number(num, sizeof num, value, have_fd) != 0) {
            va_end(ap);
            goto too_long;
        }
        if (have_fd) {
            if ((!first && tp__report_append(line, sizeof line, &len, ", ") != 0) ||
                tp__report_json_string(line, sizeof line, &len, name) != 0 ||
                tp__report_append(line, sizeof line, &len, ": %s", num) != 0) {
                va_end(ap);
                goto too_long;
            }
            first = 0;
        } else {
            if (printf("%s%s=%s", first ? "" : " ", name, num) < 0)
                rc = -1;
            first = 0;
        }
        name = va_arg(ap, const char *);
        if (name != NULL)
            value = va_arg(ap, double);
    }
    va_end(ap);

    if (!have_fd) {
        if (!first && putchar('\n') == EOF)
            rc = -1;
        return fflush(stdout) == 0 ? rc : -1;
    }
    if (tp__report_append(line, sizeof line, &len, "}\n") != 0)
        goto too_long;
    return tp__report_write_all(fd, line, len);

too_long:
    errno = EMSGSIZE;
    return -1;
}

#endif /* TUNEPACK_REPORT_H */
