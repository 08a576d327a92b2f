/* tunepack/report.h - report a trial's metrics to tunepack from C or C++, and follow its
 * budget, checkpoint and pause contract (docs/checkpoints.md).
 *
 * Usage (header only, no library to link, no -lm needed):
 *
 *     #include <tunepack/report.h>
 *     long budget = (long)tp_budget(20);          // TUNEPACK_BUDGET, else 20 epochs
 *     const char *ckpt = tp_checkpoint_dir();     // NULL outside tunepack
 *     long epoch = ckpt ? load_checkpoint(ckpt, &net) : 0;   // epochs already done
 *     tp_handle_pause_signal();                   // optional: SIGUSR1 also asks to pause
 *     while (epoch < budget) {
 *         train_one_epoch(&net);
 *         epoch++;
 *         tp_report(epoch, "val_acc", val_acc, "loss", train_loss, NULL);
 *         if (ckpt) save_checkpoint(ckpt, &net, epoch);
 *         if (tp_should_pause())                  // "pause" on TUNEPACK_CONTROL_FD, or SIGUSR1
 *             return 0;                           // checkpoint saved: exit 0 = paused
 *     }
 *
 * Under tunepack (TUNEPACK_REPORT_FD set) each tp_report() writes one JSON line
 *     {"step": 3, "val_acc": 0.91000000000000003, "loss": 0.20000000000000001}
 * to that file descriptor with a single write(2), so lines from one process never interleave
 * (a line is at most TP_REPORT_LINE_MAX = 4096 bytes = PIPE_BUF on Linux, which the kernel
 * writes to a pipe atomically). Without TUNEPACK_REPORT_FD the same call prints
 *     step=3 val_acc=0.91000000000000003 loss=0.20000000000000001
 * on stdout (flushed): the name=value form tunepack also reads, all on one line because
 * tunepack ties a step and the other metrics to the objective only when they share its line.
 * So the program runs unchanged outside tunepack (or with a runner that reads stdout only).
 *
 * Contract: C99 or later, or C++; POSIX (write(2), poll(2), sigaction(2)); nothing beyond libc.
 * tp_report() keeps no state between calls. The pause functions keep one small state object
 * (the pause flag, the control line being read) per translation unit: call
 * tp_handle_pause_signal() and tp_should_pause() from the same .c file. Define
 * _POSIX_C_SOURCE 200809L (or _GNU_SOURCE) before the first #include when compiling with a
 * strict -std=c17; without it the SIGUSR1 handler falls back to ISO C signal().
 * In C++ end the list with NULL or nullptr; a bare 0 is not a pointer in varargs.
 */
#ifndef TUNEPACK_REPORT_H
#define TUNEPACK_REPORT_H

#include <errno.h>
#include <limits.h>
#include <math.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define TP_REPORT_LINE_MAX 4096 /* bytes in one JSON line, '\n' included */

/* Appends the formatted text to buf[*len..cap); returns 0, or -1 when it does not fit (then
 * *len is left unchanged). */
static inline int tp__report_append(char *buf, size_t cap, size_t *len, const char *fmt, ...) {
    va_list ap;
    int n;

    va_start(ap, fmt);
    n = vsnprintf(buf + *len, cap - *len, fmt, ap);
    va_end(ap);
    if (n < 0 || (size_t)n >= cap - *len) return -1;
    *len += (size_t)n;
    return 0;
}

/* Formats value with "%.17g" (round-trips a double) into out[cap]; non-finite values become
 * "null" when json is set. A locale whose decimal point is ',' is undone, so the text is valid
 * JSON even after setlocale(LC_ALL, ""). Returns 0 or -1 (did not fit). */
static inline int tp__report_number(char *out, size_t cap, double value, int json) {
    int n;
    char *p;

    if (json && !isfinite(value))
        n = snprintf(out, cap, "null");
    else
        n = snprintf(out, cap, "%.17g", value);
    if (n < 0 || (size_t)n >= cap) return -1;
    for (p = out; *p; p++)
        if (*p == ',') *p = '.';
    return 0;
}

/* Appends name as a JSON string (quotes, backslash and control bytes escaped; other bytes
 * copied as they are). Returns 0 or -1 (did not fit). */
static inline int tp__report_json_string(char *buf, size_t cap, size_t *len, const char *name) {
    size_t at = *len;
    const unsigned char *p;

    if (at + 1 >= cap) return -1;
    buf[at++] = '"';
    for (p = (const unsigned char *)name; *p; p++) {
        if (*p == '"' || *p == '\\') {
            if (at + 2 >= cap) return -1;
            buf[at++] = '\\';
            buf[at++] = (char)*p;
        } else if (*p < 0x20) {
            if (at + 6 >= cap) return -1;
            snprintf(buf + at, 7, "\\u%04x", (unsigned)*p);
            at += 6;
        } else {
            if (at + 1 >= cap) return -1;
            buf[at++] = (char)*p;
        }
    }
    if (at + 1 >= cap) return -1;
    buf[at++] = '"';
    *len = at;
    return 0;
}

/* Reads TUNEPACK_REPORT_FD: returns 1 and sets *fd when it names a descriptor, 0 when it is
 * unset or empty, -1 (errno EINVAL) when it is not a non-negative decimal int. */
static inline int tp__report_fd(int *fd) {
    const char *s = getenv("TUNEPACK_REPORT_FD");
    char *end;
    long v;

    if (s == NULL || *s == '\0') return 0;
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
static inline int tp__report_write_all(int fd, const char *buf, size_t len) {
    while (len > 0) {
        ssize_t n = write(fd, buf, len);
        if (n < 0) {
            if (errno == EINTR) continue;
            return -1;
        }
        buf += n;
        len -= (size_t)n;
    }
    return 0;
}

/* Reports metrics for one step: tp_report(step, name, value, name, value, ..., NULL)
 * (tp__report_v is its body, taking the rest of the list as a va_list).
 * Outside tunepack the line is "step=3 val_acc=0.91 loss=0.2" on stdout, non-finite values
 * printed as nan/inf; for that form keep names to letters, digits and _ . - / (first a letter
 * or _), which is what tunepack's name=value parser takes.
 * Names are const char *, values double: the values after the first go through varargs
 * unconverted, so pass 1.0 or (double)n, never a bare int. step < 0 leaves "step" out; name
 * may be NULL to report only the step. Non-finite values are written as JSON null.
 * Returns 0, or -1 with errno set: EINVAL (TUNEPACK_REPORT_FD is not a number), EMSGSIZE (the
 * line would exceed TP_REPORT_LINE_MAX bytes), or write(2)'s error (EBADF, EPIPE, ...).
 * Costs one getenv, one snprintf per metric and one write(2). */
static inline int tp__report_v(int config, long step, const char *name, double value, va_list ap) {
    char line[TP_REPORT_LINE_MAX];
    char num[64];
    size_t len = 0;
    int fd = -1;
    int have_fd;
    int first = 1;
    int rc = 0;

    have_fd = tp__report_fd(&fd);
    if (have_fd < 0) return -1;

    if (have_fd) {
        line[len++] = '{';
        if (config >= 0) {
            if (tp__report_append(line, sizeof line, &len, "\"config\": %d", config) != 0)
                goto too_long;
            first = 0;
        }
        if (step >= 0) {
            if (tp__report_append(line, sizeof line, &len, "%s\"step\": %ld", first ? "" : ", ",
                                  step) != 0)
                goto too_long;
            first = 0;
        }
    } else {
        if (config >= 0) {
            if (printf("config=%d", config) < 0) rc = -1;
            first = 0;
        }
        if (step >= 0) {
            if (printf("%sstep=%ld", first ? "" : " ", step) < 0) rc = -1;
            first = 0;
        }
    }

    while (name != NULL) {
        if (tp__report_number(num, sizeof num, value, have_fd) != 0) goto too_long;
        if (have_fd) {
            if ((!first && tp__report_append(line, sizeof line, &len, ", ") != 0) ||
                tp__report_json_string(line, sizeof line, &len, name) != 0 ||
                tp__report_append(line, sizeof line, &len, ": %s", num) != 0)
                goto too_long;
            first = 0;
        } else {
            if (printf("%s%s=%s", first ? "" : " ", name, num) < 0) rc = -1;
            first = 0;
        }
        name = va_arg(ap, const char *);
        if (name != NULL) value = va_arg(ap, double);
    }

    if (!have_fd) {
        if (!first && putchar('\n') == EOF) rc = -1;
        return fflush(stdout) == 0 ? rc : -1;
    }
    if (tp__report_append(line, sizeof line, &len, "}\n") != 0) goto too_long;
    return tp__report_write_all(fd, line, len);

too_long:
    errno = EMSGSIZE;
    return -1;
}

static inline int tp_report(long step, const char *name, double value, ...) {
    va_list ap;
    int rc;

    va_start(ap, value);
    rc = tp__report_v(-1, step, name, value, ap);
    va_end(ap);
    return rc;
}

/* As tp_report, for configuration `config` of a fused process (`fuse:` in the experiment,
 * docs/fusion.md): the line carries "config": config, e.g.
 *     tp_report_config(2, 3, "loss", 0.4, NULL)   // {"config": 2, "step": 3, "loss": 0.4...}
 * Outside tunepack: "config=2 step=3 loss=0.4". config < 0 leaves it out (as tp_report). */
static inline int tp_report_config(int config, long step, const char *name, double value, ...) {
    va_list ap;
    int rc;

    va_start(ap, value);
    rc = tp__report_v(config, step, name, value, ap);
    va_end(ap);
    return rc;
}

/* ---- budget, checkpoint directory, pause requests (docs/checkpoints.md) ---- */

#define TP_CONTROL_LINE_MAX 64 /* longest control line kept; longer lines are skipped */
#define TP_CONFIG_MAX 4096     /* fused configuration indexes tp_dropped() can answer for */

/* Returns the trial's persistent checkpoint directory (TUNEPACK_CHECKPOINT_DIR, kept across
 * the trial's attempts and jobs), or NULL when it is unset or empty (outside tunepack). The
 * string belongs to the environment: do not free it. Costs one getenv. */
static inline const char *tp_checkpoint_dir(void) {
    const char *s = getenv("TUNEPACK_CHECKPOINT_DIR");
    return s != NULL && *s != '\0' ? s : NULL;
}

/* Returns the budget this job must reach (TUNEPACK_BUDGET: train until step == budget), or
 * fallback when the variable is unset, empty, not a number, or not finite and > 0. The same
 * value also arrives through the command's {name} placeholder of the experiment's budget. */
static inline double tp_budget(double fallback) {
    const char *s = getenv("TUNEPACK_BUDGET");
    char *end;
    double v;

    if (s == NULL || *s == '\0') return fallback;
    v = strtod(s, &end);
    if (end == s || *end != '\0' || !isfinite(v) || !(v > 0.0)) return fallback;
    return v;
}

/* The pause state of this translation unit (one per .c file that includes this header). */
struct tp__pause_state {
    volatile sig_atomic_t requested; /* 1 once a pause was asked for (sticky) */
    int control_done;                /* the control fd hit EOF or an error: poll it no more */
    size_t len;                      /* bytes of the current control line in line[] */
    int skipping;                    /* the current line overflowed line[]: drop it */
    char line[TP_CONTROL_LINE_MAX];  /* a control line being read, not yet ended by '\n' */
    unsigned char dropped[TP_CONFIG_MAX / 8]; /* "drop <i>" seen: bit i */
};

static inline struct tp__pause_state *tp__pause(void) {
    static struct tp__pause_state state;
    return &state;
}

static inline void tp__pause_signal_handler(int signo) {
    tp__pause()->requested = 1;
#ifndef SA_RESTART
    signal(signo, tp__pause_signal_handler); /* ISO signal() may reset the handler */
#else
    (void)signo;
#endif
}

/* Installs a SIGUSR1 handler that records a pause request for tp_should_pause() (used when
 * the experiment says `checkpoint: {signal: SIGUSR1}`). The handler only sets a flag
 * (async-signal-safe); system calls it interrupts are restarted (SA_RESTART). Returns 0, or
 * -1 with errno set by sigaction(2). Optional: the control fd works without it. */
static inline int tp_handle_pause_signal(void) {
#ifdef SA_RESTART
    struct sigaction sa;

    memset(&sa, 0, sizeof sa);
    sa.sa_handler = tp__pause_signal_handler;
    sigemptyset(&sa.sa_mask);
    sa.sa_flags = SA_RESTART;
    return sigaction(SIGUSR1, &sa, NULL);
#else
    return signal(SIGUSR1, tp__pause_signal_handler) == SIG_ERR ? -1 : 0;
#endif
}

/* Feeds n bytes read from the control fd into the line state; sets requested on a line that
 * is exactly "pause" (a trailing '\r' allowed), and bit i of dropped on "drop <i>". Other
 * lines are ignored (room for later requests). */
static inline void tp__pause_feed(struct tp__pause_state *ps, const char *buf, size_t n) {
    for (size_t i = 0; i < n; i++) {
        char c = buf[i];
        if (c == '\n') {
            if (!ps->skipping) {
                size_t len = ps->len;
                if (len > 0 && ps->line[len - 1] == '\r') len--;
                if (len == 5 && memcmp(ps->line, "pause", 5) == 0) {
                    ps->requested = 1;
                } else if (len > 5 && len < 12 && memcmp(ps->line, "drop ", 5) == 0) {
                    long ix = 0;
                    size_t k;
                    for (k = 5; k < len && ps->line[k] >= '0' && ps->line[k] <= '9'; k++)
                        ix = ix * 10 + (ps->line[k] - '0');
                    if (k == len && ix < TP_CONFIG_MAX)
                        ps->dropped[ix / 8] |= (unsigned char)(1u << (ix % 8));
                }
            }
            ps->len = 0;
            ps->skipping = 0;
        } else if (!ps->skipping) {
            if (ps->len < sizeof ps->line)
                ps->line[ps->len++] = c;
            else
                ps->skipping = 1;
        }
    }
}

/* Returns 1 when tunepack has asked this trial to checkpoint and exit (a "pause" line on the
 * descriptor in TUNEPACK_CONTROL_FD, or SIGUSR1 once tp_handle_pause_signal() is installed),
 * 0 otherwise. Never blocks: it polls the descriptor with a zero timeout and reads only what
 * is there. The answer is sticky: once 1, always 1. Without TUNEPACK_CONTROL_FD (or once the
 * descriptor reached EOF) only the signal flag counts. The trial should then save a
 * checkpoint and exit 0 soon (exit 0 after a pause request means "paused", not "completed").
 * Costs one getenv and one poll(2) per call (plus a read(2) when a request is waiting):
 * call it at epoch or batch ends, not per sample. */
static inline void tp__control_poll(struct tp__pause_state *ps, int stop_at_pause);

static inline int tp_should_pause(void) {
    struct tp__pause_state *ps = tp__pause();

    if (ps->requested) return 1;
    tp__control_poll(ps, 1);
    return ps->requested ? 1 : 0;
}

/* Returns 1 when tunepack told this fused process to drop configuration `config` ("drop
 * <config>" on the control channel: the scheduler stopped that one early; stop training it
 * and go on with the others), else 0. Never blocks; sticky; costs what tp_should_pause
 * costs. Outside tunepack always 0. */
static inline int tp_dropped(int config) {
    struct tp__pause_state *ps = tp__pause();

    if (config < 0 || config >= TP_CONFIG_MAX) return 0;
    tp__control_poll(ps, 0);
    return (ps->dropped[config / 8] >> (config % 8)) & 1;
}

/* Reads what waits on TUNEPACK_CONTROL_FD (never blocking) into ps; with stop_at_pause it
 * stops once a pause was asked. */
static inline void tp__control_poll(struct tp__pause_state *ps, int stop_at_pause) {
    const char *s;
    char *end;
    long fd;

    if (ps->control_done) return;
    s = getenv("TUNEPACK_CONTROL_FD");
    if (s == NULL || *s == '\0') return;
    errno = 0;
    fd = strtol(s, &end, 10);
    if (errno != 0 || *end != '\0' || fd < 0 || fd > INT_MAX) {
        ps->control_done = 1;
        return;
    }
    for (;;) {
        struct pollfd p;
        char buf[256];
        ssize_t n;
        int r;

        p.fd = (int)fd;
        p.events = POLLIN;
        p.revents = 0;
        r = poll(&p, 1, 0);

        if (r < 0 && errno == EINTR) continue;
        if (r <= 0) break;
        if (p.revents & POLLNVAL) {
            ps->control_done = 1;
            break;
        }
        n = read((int)fd, buf, sizeof buf);
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) { /* EOF: tunepack closed its end; an error: not a usable descriptor */
            ps->control_done = 1;
            break;
        }
        tp__pause_feed(ps, buf, (size_t)n);
        if (stop_at_pause && ps->requested) break;
    }
}

#endif /* TUNEPACK_REPORT_H */
