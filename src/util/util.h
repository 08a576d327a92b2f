/* util: strings, buffers, RNG, time, durations, error text, logging.
 * Leaf module: depends on libc only. */
#ifndef TP_UTIL_H
#define TP_UTIL_H

#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#define TP_ARRAY_LEN(a) (sizeof(a) / sizeof((a)[0]))

/* ---- error text --------------------------------------------------------
 * A human-readable error in a fixed buffer. Functions that can fail take a
 * tp_error_t * (may be NULL) and return 0 or a negative errno-style code. */
typedef struct tp_error {
    int code;       /* negative errno-style code, 0 when no error */
    char msg[1024]; /* what went wrong, where, and what would be right */
} tp_error_t;

/* Fill err (if not NULL) with a printf-formatted message; returns code so a
 * caller can `return tp__errorf(err, -EINVAL, "...")`. */
int tp__errorf(tp_error_t *err, int code, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* ---- growable byte buffer (always NUL-terminated) ----------------------- */
typedef struct tp_buf {
    char *data; /* owned; NUL-terminated when len > 0 or after any append */
    size_t len; /* bytes used, excluding the terminating NUL */
    size_t cap; /* bytes allocated */
} tp_buf_t;

void tp__buf_init(tp_buf_t *b);
void tp__buf_free(tp_buf_t *b);
void tp__buf_reset(tp_buf_t *b);                /* len = 0, keeps memory */
int tp__buf_reserve(tp_buf_t *b, size_t extra); /* 0 or -ENOMEM */
int tp__buf_append(tp_buf_t *b, const void *p, size_t n);
int tp__buf_puts(tp_buf_t *b, const char *s);
int tp__buf_printf(tp_buf_t *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void tp__buf_consume(tp_buf_t *b, size_t n); /* drop the first n bytes */
char *tp__buf_steal(tp_buf_t *b);            /* caller frees; b is reset */

/* ---- strings ------------------------------------------------------------ */
char *tp__strdup(const char *s); /* NULL-safe; aborts on OOM */
void *tp__xmalloc(size_t n);     /* aborts on OOM */
void *tp__xcalloc(size_t n, size_t size);
void *tp__xrealloc(void *p, size_t n);
/* Grow the array p, *cap elements of size bytes each, to hold at least
 * need elements: p itself when need <= *cap; else *cap doubles (from min,
 * or 1, when 0) until it is >= need, p is reallocated to that many elements,
 * elements [old *cap, new *cap) are zeroed, and the new pointer is returned
 * (p is then invalid). Aborts on OOM, as tp__xrealloc, and when the size in
 * bytes would not fit a size_t. The caller owns the result, as it owned p.
 * O(1) when p fits, O(new *cap) when it grows; appending one at a time is
 * amortised O(1):
 *     v = tp__xgrow(v, &cap, n + 1, sizeof *v, 64);
 *     v[n++] = x; */
void *tp__xgrow(void *p, size_t *cap, size_t need, size_t size, size_t min);
/* Reallocate p from old_n to n elements of size bytes, zeroing elements
 * [old_n, n) when n > old_n: for arrays that share one capacity with an
 * array grown by tp__xgrow. Aborts as tp__xgrow does. O(n). */
void *tp__xresize(void *p, size_t old_n, size_t n, size_t size);
/* Edit distance counting insertions, deletions, substitutions and swaps of
 * adjacent characters (optimal string alignment), O(len(a)*len(b)). */
size_t tp__edit_distance(const char *a, const char *b);
/* The candidate closest to word if it is close enough to be a plausible
 * typo (distance <= max(1, len/3), or a case-insensitive match, or else one
 * abbreviating the other, e.g. "rnd" -> "random"), else NULL. */
const char *tp__did_you_mean(const char *word, const char *const *candidates, size_t n);
/* ---- escape.c: text from trials, safe to print (docs/output.md) ----------
 * A control character is shown, never sent: \n \r \t by name, other C0
 * controls and DEL as \xHH (ESC: \x1b), C1 controls and bidirectional
 * overrides as \uHHHH, bytes that are not UTF-8 as \xHH; any other UTF-8
 * passes unchanged. O(length). */
enum {
    TP_ESC_KEEP_NL = 1, /* '\n' passes: text printed as several lines */
    TP_ESC_LINE = 2,    /* tp__fprintf_escaped: one line, ended by a '\n' of its own */
};
/* Append the escape of s (n bytes; NULL: nothing) to b; 0 or -ENOMEM. */
int tp__buf_escape(tp_buf_t *b, const char *s, size_t n, int flags);
/* The escape of s (NULL: "") in a malloc'd string; caller frees. */
char *tp__escape(const char *s, int flags);
/* The escape of s into out (cap bytes, NUL-terminated), cut before the
 * first escape or UTF-8 character that does not fit whole. */
void tp__escape_into(char *out, size_t cap, const char *s, int flags);
/* fprintf to f, the whole text escaped: for a line whose values may hold
 * anything (a trial's words, node names). The format's own '\n' would show
 * as \n too: TP_ESC_LINE ends the line. Bytes written, or < 0. */
int tp__fprintf_escaped(FILE *f, int flags, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
/* 1 when a spreadsheet would read the cell s as a formula: it begins with
 * '=', '+', '-', '@', a tab or a CR and is not a plain number ("-0.5",
 * "+1e-3" are numbers and stay so). The caller prefixes such a cell with '. */
int tp__cell_is_formula(const char *s);
/* Shortest "%.*g" form of v that reads back to the same double. */
void tp__fmt_double(double v, char out[32]);
/* v for people: 6 significant digits ("%.6g": 0.34405, 1234.57, 1.23457e+06,
 * 20), "nan", "inf", "-inf". For tables and status lines; exports and
 * --json keep full precision through tp__fmt_double. */
void tp__fmt_sig(double v, char out[32]);
/* Read a whole file into a NUL-terminated malloc'd buffer. */
int tp__read_file(const char *path, char **out, size_t *len, tp_error_t *err);
/* Write data to path atomically (temp file + rename). */
int tp__write_file(const char *path, const void *data, size_t len, tp_error_t *err);
/* The directory of trial id in experiment directory dir, "<dir>/trials/000042",
 * followed by tail when not NULL ("/stderr.log", "/rank1"): the one place
 * that spells the layout. Truncated to n. */
void tp__trial_path(char *out, size_t n, const char *dir, long long id, const char *tail);
/* mkdir -p with mode 0755, or the given mode (less the umask). */
int tp__mkdir_p(const char *path, tp_error_t *err);
int tp__mkdir_p_mode(const char *path, int mode, tp_error_t *err);
/* Copy directory `from` whole over directory `to` (tree.c): into
 * "<to>.copying", then renamed over `to` once complete, so `to` holds the
 * old tree or the new one, never part of one; links are copied as links.
 * 0, or a negative errno with err filled. O(bytes copied). */
int tp__replace_tree(const char *from, const char *to, tp_error_t *err);
/* Remove path and all below it (rm -r, no shell); 0 when gone. */
int tp__remove_tree(const char *path);

/* ---- random numbers: xoshiro256** seeded through splitmix64 ------------- */
typedef struct tp_rng {
    uint64_t s[4]; /* generator state */
} tp_rng_t;

/* Seed deterministically from (seed, stream): the same pair always yields
 * the same sequence, different streams are independent. */
void tp__rng_seed(tp_rng_t *r, uint64_t seed, uint64_t stream);
uint64_t tp__rng_next(tp_rng_t *r);
double tp__rng_uniform(tp_rng_t *r);             /* [0, 1) */
uint64_t tp__rng_below(tp_rng_t *r, uint64_t n); /* [0, n), unbiased; n > 0 */
double tp__rng_normal(tp_rng_t *r);              /* standard normal */

/* ---- time ---------------------------------------------------------------- */
double tp__mono_s(void); /* monotonic clock, seconds */
double tp__wall_s(void); /* wall clock, seconds since the epoch */
/* Parse "90", "90s", "250ms", "5m", "1h30m", "2d" into seconds (> 0).
 * Returns 0, or -EINVAL with a message saying what form is expected. */
int tp__parse_duration(const char *text, double *out_s, tp_error_t *err);
/* "1h02m", "3m05s", "12.3s" */
void tp__format_duration(double s, char *out, size_t n);
/* Parse "64k", "8M", "1G", "1024" (bytes, base 1024). */
int tp__parse_size(const char *text, uint64_t *out, tp_error_t *err);

/* ---- proc.c: processes ---------------------------------------------------- */
/* 1 if pid is a live process. A zombie is not: killed, or exited, and not
 * yet reaped by its parent (an orphan may wait a while for a busy init, or
 * none in a container). O(1) system calls. */
int tp__pid_alive(long pid);

/* ---- logfile.c: a log file bounded to 2 * limit bytes ---------------------- */
typedef struct tp_logfile {
    int fd;         /* open for writing, -1 when none */
    uint64_t size;  /* bytes in the file */
    uint64_t limit; /* keep at least the last `limit` bytes; 0 = unbounded */
} tp_logfile_t;

int tp__logfile_open(tp_logfile_t *f, const char *path, uint64_t limit, tp_error_t *err);
/* DIR/NAME.log for an attempt, new: a log already there is first kept as
 * DIR/NAME.<k>.log, k the attempt that wrote it (DIR/.NAME.attempt says
 * which; attempt-1 when it says none before this one), or when that name is
 * taken (a store that lost attempts ran them again) as
 * DIR/NAME.<k>.<2, 3, ...>.log. No log is ever written over. */
int tp__logfile_open_attempt(tp_logfile_t *f, const char *dir, const char *name, int64_t attempt,
                             uint64_t limit, tp_error_t *err);
/* Append (a failed write is dropped: the trial must not suffer from a full
 * disk); amortised O(1) per byte. */
void tp__logfile_write(tp_logfile_t *f, const char *data, size_t n);
void tp__logfile_close(tp_logfile_t *f);

/* ---- samples (samples.c): measurements and their quantiles ------------------- */
typedef struct tp_samples {
    double *v; /* owned */
    size_t n, cap;
} tp_samples_t;
void tp__samples_add(tp_samples_t *s, double x); /* amortised O(1) */
/* The q-quantile (0..1, nearest rank); sorts the samples. O(n log n). 0 if none. */
double tp__samples_quantile(tp_samples_t *s, double q);
void tp__samples_free(tp_samples_t *s);

/* ---- logging to stderr ---------------------------------------------------- */
enum { TP_LOG_ERROR = 0, TP_LOG_WARN = 1, TP_LOG_INFO = 2, TP_LOG_DEBUG = 3 };
/* Messages above the level set in env TUNEPACK_LOG (error|warn|info|debug,
 * default info) are dropped. Each line: "tunepack: warn: ...". */
void tp__log(int level, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* Send log lines (each ending in '\n') to sink instead of stderr, or back to
 * stderr with NULL: the live terminal view takes them, so that it can write
 * each line above itself and draw itself again below it. One per process,
 * as stderr is; set and cleared by the view's start and end. */
typedef void (*tp_log_sink_t)(void *ud, const char *line, size_t n);
void tp__log_set_sink(tp_log_sink_t sink, void *ud);
/* A line already formatted (another process's log, ending in '\n'), written
 * where tp__log writes: the sink, or stderr. */
void tp__log_line(const char *line, size_t n);

#endif
