/* timeutil: clocks, durations and sizes in human form. */
#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "util/util.h"

double tp__mono_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

double tp__wall_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static const struct {
    const char *unit; /* suffix; longer ones before their prefixes */
    double seconds;   /* seconds per unit */
} duration_units[] = {
    {"ms", 0.001}, {"s", 1}, {"m", 60}, {"h", 3600}, {"d", 86400},
};

static int duration_error(const char *text, tp_error_t *err) {
    return tp__errorf(err, -EINVAL,
                      "\"%s\" is not a duration; write e.g. 30s, 5m, 1h30m or a number of seconds",
                      text);
}

/* Is text a plain decimal number (digits, '.', exponent) that strtod reads
 * entirely? Excludes "inf", "nan", hex and signs. */
static int plain_seconds(const char *text, double *out) {
    if (!isdigit((unsigned char)text[0]) && text[0] != '.') return 0;
    for (const char *p = text; *p; p++)
        if (!isdigit((unsigned char)*p) && !strchr(".eE+-", *p)) return 0;
    char *end;
    errno = 0;
    double v = strtod(text, &end);
    if (*end || errno || !isfinite(v)) return 0;
    *out = v;
    return 1;
}

/* Parse "90", "1.5", "250ms", "5m", "1h30m", "2d" (several units add up,
 * each written once, the largest first: "1m1m" and "30s1m" are mistakes)
 * into seconds > 0. Leading/trailing spaces are ignored.
 * Returns 0 or -EINVAL with a message saying the expected form. */
int tp__parse_duration(const char *text, double *out_s, tp_error_t *err) {
    if (!text) return duration_error("", err);
    while (isspace((unsigned char)*text))
        text++;
    size_t len = strlen(text);
    while (len > 0 && isspace((unsigned char)text[len - 1]))
        len--;
    char s[128];
    if (len == 0 || len >= sizeof s) return duration_error(text, err);
    memcpy(s, text, len);
    s[len] = '\0';

    double total = 0;
    if (!plain_seconds(s, &total)) {
        const char *p = s;
        double last = INFINITY; /* the unit before, in seconds: each next one is smaller */
        while (*p) {
            if (!isdigit((unsigned char)*p) && *p != '.') return duration_error(s, err);
            const char *start = p;
            while (isdigit((unsigned char)*p) || *p == '.')
                p++;
            char num[64];
            size_t nl = (size_t)(p - start);
            if (nl >= sizeof num) return duration_error(s, err);
            memcpy(num, start, nl);
            num[nl] = '\0';
            char *end;
            double v = strtod(num, &end);
            if (*end || end == num) return duration_error(s, err);
            size_t u;
            for (u = 0; u < TP_ARRAY_LEN(duration_units); u++) {
                size_t ul = strlen(duration_units[u].unit);
                if (strncmp(p, duration_units[u].unit, ul) == 0 && !isalpha((unsigned char)p[ul])) {
                    p += ul;
                    break;
                }
            }
            if (u == TP_ARRAY_LEN(duration_units)) return duration_error(s, err);
            if (!(duration_units[u].seconds < last))
                return tp__errorf(err, -EINVAL,
                                  "duration \"%s\" repeats a unit or puts a smaller one first; "
                                  "write each unit once, the largest first, e.g. 1h30m",
                                  s);
            last = duration_units[u].seconds;
            total += v * duration_units[u].seconds;
        }
    }
    if (!(total > 0) || !isfinite(total))
        return tp__errorf(err, -EINVAL, "duration \"%s\" must be greater than zero; write e.g. 30s",
                          s);
    *out_s = total;
    return 0;
}

/* "12.3s" below a minute, "3m05s" below an hour, else "1h02m". */
void tp__format_duration(double s, char *out, size_t n) {
    if (!(s > 0)) s = 0;
    if (s > 3.6e15) s = 3.6e15; /* a billion hours: the casts below stay defined */
    if (s < 59.95) {
        snprintf(out, n, "%.1fs", s);
    } else if (s < 3600) {
        long t = (long)floor(s + 0.5);
        if (t >= 3600) t = 3599;
        snprintf(out, n, "%ldm%02lds", t / 60, t % 60);
    } else {
        double m = floor(s / 60.0);
        long long hours = (long long)(m / 60.0);
        long mins = (long)(m - (double)hours * 60.0);
        snprintf(out, n, "%lldh%02ldm", hours, mins);
    }
}

/* Parse "1024", "64k", "8M", "1G", "8MB", "8MiB" into bytes (base 1024).
 * Returns 0 or -EINVAL (-ERANGE on overflow) with a message. */
int tp__parse_size(const char *text, uint64_t *out, tp_error_t *err) {
    const char *what = "is not a size; write e.g. 4096, 64k, 8M or 1G";
    if (!text) return tp__errorf(err, -EINVAL, "\"\" %s", what);
    const char *p = text;
    while (isspace((unsigned char)*p))
        p++;
    if (!isdigit((unsigned char)*p)) return tp__errorf(err, -EINVAL, "\"%s\" %s", text, what);
    uint64_t v = 0;
    while (isdigit((unsigned char)*p)) {
        unsigned d = (unsigned)(*p - '0');
        if (v > (UINT64_MAX - d) / 10)
            return tp__errorf(err, -ERANGE, "size \"%s\" is too large", text);
        v = v * 10 + d;
        p++;
    }
    unsigned shift = 0;
    switch (*p) {
    case 'k':
    case 'K':
        shift = 10;
        p++;
        break;
    case 'm':
    case 'M':
        shift = 20;
        p++;
        break;
    case 'g':
    case 'G':
        shift = 30;
        p++;
        break;
    case 't':
    case 'T':
        shift = 40;
        p++;
        break;
    default:
        break;
    }
    if (shift && *p == 'i' && p[1] == 'B')
        p += 2;
    else if (*p == 'B' || *p == 'b')
        p++;
    while (isspace((unsigned char)*p))
        p++;
    if (*p) return tp__errorf(err, -EINVAL, "\"%s\" %s", text, what);
    if (shift && v > (UINT64_MAX >> shift))
        return tp__errorf(err, -ERANGE, "size \"%s\" is too large", text);
    *out = v << shift;
    return 0;
}
