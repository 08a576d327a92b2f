/* space: parameter domains, checking, sampling and grid enumeration. */
#include <errno.h>
#include <float.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "space/space.h"

#define GRID_MAX_DIM 10000ULL        /* largest discrete INT / quantized UNIFORM range */
#define GRID_MAX_POINTS (1ULL << 40) /* grid sizes past this are reported as 0 */
#define GRID_MAX_SCAN (1ULL << 24)   /* conditional grids: largest product scanned */
/* The widest span a domain may sample over: the samplers compute with it (TPE spreads
 * its prior over the range and a step more), so it keeps room below DBL_MAX. */
#define SPAN_MAX (DBL_MAX / 16)
/* How far from its mean a normal draw can land, in sigmas: Box-Muller from 53-bit
 * uniforms reaches 8.57 (tp__rng_normal); TPE's kernels stay within 5. */
#define NORMAL_Z_MAX 9.0
#define DECIMALS_MAX 17 /* most decimal places "%.*f" is asked for */

void tp__space_init(tp_space_t *s) {
    memset(s, 0, sizeof *s);
}

static void param_free(tp_param_t *p) {
    free(p->name);
    for (size_t i = 0; i < p->nvalues; i++)
        json_decref(p->values[i]);
    free(p->values);
    for (size_t c = 0; c < p->nwhen; c++) {
        free(p->when[c].parent);
        for (size_t k = 0; k < p->when[c].nvalues; k++)
            json_decref(p->when[c].values[k]);
        free(p->when[c].values);
    }
    free(p->when);
}

void tp__space_free(tp_space_t *s) {
    for (size_t i = 0; i < s->n; i++)
        param_free(&s->params[i]);
    free(s->params);
    free(s->order);
    tp__space_init(s);
}

/* Append p (its name and values are now owned by the space). O(n) copy on
 * growth, fine for the few dozen params a space holds. */
void tp__space_add(tp_space_t *s, const tp_param_t *p) {
    s->params = tp__xrealloc(s->params, (s->n + 1) * sizeof *s->params);
    s->params[s->n++] = *p;
}

const tp_param_t *tp__space_find(const tp_space_t *s, const char *name) {
    for (size_t i = 0; i < s->n; i++)
        if (strcmp(s->params[i].name, name) == 0) return &s->params[i];
    return NULL;
}

static const char *kind_name(tp_domain_kind k) {
    switch (k) {
    case TP_DOM_CONST:
        return "constant";
    case TP_DOM_CHOICE:
        return "choice";
    case TP_DOM_GRID:
        return "grid";
    case TP_DOM_UNIFORM:
        return "uniform";
    case TP_DOM_LOGUNIFORM:
        return "loguniform";
    case TP_DOM_INT:
        return "int";
    case TP_DOM_NORMAL:
        return "normal";
    }
    return "?";
}

/* Every value p's samplers draw is finite: the range (a normal's mean +-
 * NORMAL_Z_MAX sigma) spans at most SPAN_MAX, and a step q is coarse enough
 * that x / q and k * q stay exact over it. p's bounds are already checked.
 * 0, -EINVAL about the bounds or -EDOM about q, with what would be right. */
static int check_span(const tp_param_t *p, tp_error_t *err) {
    char lo[32], hi[32], q[32], most[32];
    tp__fmt_double(p->lo, lo);
    tp__fmt_double(p->hi, hi);
    tp__fmt_double(p->q, q);
    tp__fmt_sig(SPAN_MAX, most);
    double a = p->lo, b = p->hi;
    if (p->kind == TP_DOM_NORMAL)
        a = p->lo - NORMAL_Z_MAX * p->hi, b = p->lo + NORMAL_Z_MAX * p->hi;
    else if (p->kind != TP_DOM_UNIFORM && p->kind != TP_DOM_LOGUNIFORM)
        return 0;
    if (!(b - a <= SPAN_MAX) || !(fmax(fabs(a), fabs(b)) <= SPAN_MAX)) {
        if (p->kind == TP_DOM_NORMAL)
            return tp__errorf(err, -EINVAL,
                              "normal [%s, %s] of \"%s\" draws values as far as %g sigmas from the "
                              "mean, past the largest a sample may span (about %s; it would "
                              "overflow to infinity); make the mean and sigma smaller",
                              lo, hi, p->name, NORMAL_Z_MAX, most);
        return tp__errorf(err, -EINVAL,
                          "range of \"%s\" [%s, %s] is wider than a sample can span (at most "
                          "about %s from zero; its width would overflow to infinity); narrow it",
                          p->name, lo, hi, most);
    }
    double extent = fmax(fabs(a), fabs(b)), fine = fmax(extent * DBL_EPSILON, DBL_MIN);
    if (p->q > 0 && p->q < fine) {
        char want[32];
        tp__fmt_sig(fine, want);
        return tp__errorf(err, -EDOM,
                          "q of \"%s\" is %s, finer than a number near %g can be told apart "
                          "by, so every sample would round wrong; use q >= %s or no q",
                          p->name, q, extent, want);
    }
    return 0;
}

/* Check p's domain; see space.h. The message names the parameter and says
 * what would be right, without a file position. */
int tp__param_check(const tp_param_t *p, tp_error_t *err) {
    char lo[32], hi[32], q[32];
    tp__fmt_double(p->lo, lo);
    tp__fmt_double(p->hi, hi);
    tp__fmt_double(p->q, q);
    switch (p->kind) {
    case TP_DOM_CONST:
    case TP_DOM_CHOICE:
    case TP_DOM_GRID:
        if (p->nvalues == 0)
            return tp__errorf(err, -EINVAL, "%s for \"%s\" is empty; list at least one value",
                              kind_name(p->kind), p->name);
        return 0;
    case TP_DOM_NORMAL:
        if (!isfinite(p->lo))
            return tp__errorf(err, -EINVAL, "normal mean of \"%s\" must be a finite number, got %s",
                              p->name, lo);
        if (!(p->hi > 0) || !isfinite(p->hi))
            return tp__errorf(err, -EINVAL,
                              "normal sigma of \"%s\" must be > 0, got %s; write [mean, sigma], "
                              "e.g. [0.0, 1.0]",
                              p->name, hi);
        break;
    case TP_DOM_LOGUNIFORM:
        if (!(p->lo > 0) || !(p->hi > 0))
            return tp__errorf(err, -EINVAL,
                              "loguniform bound of \"%s\" must be > 0, got %s; use e.g. "
                              "[1.0e-5, 1.0]",
                              p->name, !(p->lo > 0) ? lo : hi);
        /* fall through */
    case TP_DOM_UNIFORM:
        if (!isfinite(p->lo) || !isfinite(p->hi) || !(p->lo < p->hi))
            return tp__errorf(err, -EINVAL,
                              "range of \"%s\" is empty or inverted: [%s, %s]; write [low, high] "
                              "with low < high",
                              p->name, lo, hi);
        break;
    case TP_DOM_INT:
        if (!isfinite(p->lo) || !isfinite(p->hi) || p->lo != floor(p->lo) ||
            p->hi != floor(p->hi) || fabs(p->lo) > 9e15 || fabs(p->hi) > 9e15)
            return tp__errorf(err, -EINVAL,
                              "int bounds of \"%s\" must be whole numbers, got [%s, %s]; write "
                              "e.g. [1, 8]",
                              p->name, lo, hi);
        if (p->log && !(p->lo > 0))
            return tp__errorf(err, -EINVAL,
                              "int bound of \"%s\" must be > 0 with log: true, got %s; use e.g. "
                              "[1, 1024]",
                              p->name, lo);
        if (!(p->lo <= p->hi))
            return tp__errorf(err, -EINVAL,
                              "range of \"%s\" is empty or inverted: [%s, %s]; write [low, high] "
                              "with low <= high",
                              p->name, lo, hi);
        if (p->q != 0 && p->q != floor(p->q))
            return tp__errorf(err, -EDOM,
                              "q of \"%s\" must be a whole number for an int domain, got %s",
                              p->name, q);
        break;
    }
    if (p->q < 0 || !isfinite(p->q))
        return tp__errorf(err, -EDOM, "q of \"%s\" must be > 0, got %s; e.g. q: 0.1", p->name, q);
    return check_span(p, err);
}
/* Decimal places that q is written with (0.25 -> 2, 1e-05 -> 5, 10 -> 0),
 * or -1 past DECIMALS_MAX (then no decimal rounding can clean a multiple). */
static int decimals_of(double q) {
    char t[32];
    tp__fmt_double(q, t);
    int exp10 = 0, frac = 0;
    char *e = strpbrk(t, "eE");
    if (e) exp10 = atoi(e + 1);
    char *dot = strchr(t, '.');
    if (dot) frac = (int)((e ? e : t + strlen(t)) - dot - 1);
    int d = frac - exp10;
    return d < 0 ? 0 : d > DECIMALS_MAX ? -1 : d;
}

/* k*q without binary noise: 3 * 0.1 gives 0.3, not 0.30000000000000004. */
static double clean_multiple(double k, double q) {
    double x = k * q;
    int d = decimals_of(q);
    if (!isfinite(x) || fabs(x) > 1e15 || d < 0) return x;
    char t[64];
    snprintf(t, sizeof t, "%.*f", d, x);
    return strtod(t, NULL);
}

/* Round x to a multiple of q; when bounded, keep it inside [lo, hi] by
 * moving to the nearest multiple inside (or to the bound if none is). */
static double quantize(double x, double q, int bounded, double lo, double hi) {
    double k = round(x / q);
    if (bounded) {
        if (k * q < lo) k = ceil(lo / q);
        if (k * q > hi) k = floor(hi / q);
        if (k * q < lo || k * q > hi) return x < lo ? lo : x > hi ? hi : lo;
    }
    return clean_multiple(k, q);
}

static double clampd(double x, double lo, double hi) {
    return x < lo ? lo : x > hi ? hi : x;
}

/* Draw one value of p. CONST draws nothing from rng; every other kind draws
 * a fixed number of values. Caller owns the result. */
static json_t *sample_param(const tp_param_t *p, tp_rng_t *rng) {
    double x;
    switch (p->kind) {
    case TP_DOM_CONST:
        return json_deep_copy(p->values[0]);
    case TP_DOM_CHOICE:
    case TP_DOM_GRID:
        return json_deep_copy(p->values[tp__rng_below(rng, p->nvalues)]);
    case TP_DOM_UNIFORM:
        x = p->lo + tp__rng_uniform(rng) * (p->hi - p->lo);
        if (p->q > 0) x = quantize(x, p->q, 1, p->lo, p->hi);
        return json_real(x);
    case TP_DOM_LOGUNIFORM: {
        double a = log(p->lo), b = log(p->hi);
        x = clampd(exp(a + tp__rng_uniform(rng) * (b - a)), p->lo, p->hi);
        if (p->q > 0) x = quantize(x, p->q, 1, p->lo, p->hi);
        return json_real(x);
    }
    case TP_DOM_NORMAL:
        x = p->lo + p->hi * tp__rng_normal(rng);
        if (p->q > 0) x = quantize(x, p->q, 0, 0, 0);
        return json_real(x);
    case TP_DOM_INT: {
        long long lo = llround(p->lo), hi = llround(p->hi), v;
        if (p->log) {
            double a = log(p->lo), b = log(p->hi + 1.0);
            double f = floor(exp(a + tp__rng_uniform(rng) * (b - a)));
            v = (long long)clampd(f, p->lo, p->hi);
        } else {
            uint64_t span = (uint64_t)(hi - lo) + 1;
            v = lo + (long long)tp__rng_below(rng, span);
        }
        if (p->q > 0) v = llround(quantize((double)v, p->q, 1, p->lo, p->hi));
        return json_integer(v);
    }
    }
    return json_null();
}

json_t *tp__space_sample_full(const tp_space_t *s, tp_rng_t *rng) {
    json_t *cfg = json_object();
    for (size_t i = 0; i < s->n; i++)
        json_object_set_new(cfg, s->params[i].name, sample_param(&s->params[i], rng));
    return cfg;
}

json_t *tp__space_sample(const tp_space_t *s, tp_rng_t *rng) {
    json_t *cfg = tp__space_sample_full(s, rng);
    tp__space_prune(s, cfg);
    return cfg;
}

/* Number of grid points of p along its own axis, or 0 if p is not a
 * discrete grid dimension (it is then sampled). */
static uint64_t grid_dim(const tp_param_t *p) {
    switch (p->kind) {
    case TP_DOM_CHOICE:
    case TP_DOM_GRID:
        return p->nvalues;
    case TP_DOM_INT: {
        if (p->log) return 0;
        double n;
        if (p->q > 0) {
            n = floor(p->hi / p->q) - ceil(p->lo / p->q) + 1;
            if (n < 1) n = 1; /* no multiple inside: the one value sampling gives */
        } else {
            n = p->hi - p->lo + 1;
        }
        return n >= 1 && n <= (double)GRID_MAX_DIM ? (uint64_t)n : 0;
    }
    case TP_DOM_UNIFORM: {
        if (!(p->q > 0)) return 0;
        double n = floor((p->hi - p->lo) / p->q + 1e-9) + 1;
        return n >= 1 && n <= (double)GRID_MAX_DIM ? (uint64_t)n : 0;
    }
    default:
        return 0;
    }
}

/* The k-th point (k < grid_dim(p)) along p's axis. Caller owns. */
static json_t *grid_value(const tp_param_t *p, uint64_t k) {
    switch (p->kind) {
    case TP_DOM_CHOICE:
    case TP_DOM_GRID:
        return json_deep_copy(p->values[k]);
    case TP_DOM_INT:
        if (p->q > 0) {
            double first = ceil(p->lo / p->q);
            double v = (first + (double)k) * p->q;
            if (v > p->hi || v < p->lo) v = p->lo;
            return json_integer(llround(v));
        }
        return json_integer(llround(p->lo) + (long long)k);
    case TP_DOM_UNIFORM: {
        double off = clean_multiple((double)k, p->q);
        int dq = decimals_of(p->q), dl = decimals_of(p->lo), d = dq > dl ? dq : dl;
        char t[64];
        snprintf(t, sizeof t, "%.*f", d < 0 ? 0 : d, p->lo + off);
        double v = fabs(p->lo + off) > 1e15 || dq < 0 || dl < 0 ? p->lo + off : strtod(t, NULL);
        return json_real(clampd(v, p->lo, p->hi));
    }
    default:
        return json_null();
    }
}

/* Product of the discrete dims' sizes; 1 when none, 0 past 2^40. O(n). */
static uint64_t grid_product(const tp_space_t *s) {
    uint64_t total = 1;
    for (size_t i = 0; i < s->n; i++) {
        uint64_t d = grid_dim(&s->params[i]);
        if (d == 0) continue;
        if (total > GRID_MAX_POINTS / d) return 0;
        total *= d;
    }
    return total;
}

/* Split index into mixed-radix digits, the first discrete param slowest. */
static void grid_digits(const tp_space_t *s, uint64_t index, uint64_t *digit) {
    for (size_t i = s->n; i-- > 0;) {
        uint64_t d = grid_dim(&s->params[i]);
        digit[i] = 0;
        if (d == 0) continue;
        digit[i] = index % d;
        index /= d;
    }
}

/* Walk the full product; with out, collect the valid indices (see
 * space.h). Parents that are no grid dimension (constants, wide ints)
 * are taken at their first value or lo. Returns the count, 0 past the
 * scan limit. */
static uint64_t grid_scan(const tp_space_t *s, uint64_t **out) {
    uint64_t total = grid_product(s), count = 0;
    size_t cap = 0;
    if (out) *out = NULL;
    if (total == 0 || total > GRID_MAX_SCAN) return 0;
    uint64_t *digit = tp__xcalloc(s->n, sizeof *digit);
    unsigned char *parent = tp__xcalloc(s->n, 1), *active = tp__xcalloc(s->n, 1);
    for (size_t i = 0; i < s->n; i++)
        for (size_t c = 0; c < s->params[i].nwhen; c++)
            parent[s->params[i].when[c].pidx] = 1;
    for (uint64_t index = 0; index < total; index++) {
        grid_digits(s, index, digit);
        json_t *cfg = json_object();
        for (size_t i = 0; i < s->n; i++) {
            const tp_param_t *p = &s->params[i];
            if (!parent[i]) continue;
            json_t *v = grid_dim(p)  ? grid_value(p, digit[i])
                        : p->nvalues ? json_deep_copy(p->values[0])
                                     : json_integer(llround(p->lo));
            json_object_set_new(cfg, p->name, v);
        }
        tp__space_active(s, cfg, active);
        json_decref(cfg);
        int valid = 1;
        for (size_t i = 0; i < s->n && valid; i++)
            valid = active[i] || digit[i] == 0;
        if (!valid) continue;
        if (out) *out = tp__xgrow(*out, &cap, count + 1, sizeof **out, 64);
        if (out) (*out)[count] = index;
        count++;
    }
    free(digit), free(parent), free(active);
    return count;
}

/* See space.h. O(n) without conditions, O(product * n) with. */
uint64_t tp__space_grid_size(const tp_space_t *s) {
    return s->conditional ? grid_scan(s, NULL) : grid_product(s);
}

uint64_t tp__space_grid_valid(const tp_space_t *s, uint64_t **out) {
    *out = NULL;
    return s->conditional ? grid_scan(s, out) : 0;
}

/* Decode index in mixed radix (first discrete param slowest); the other
 * params are drawn from rng in declaration order; inactive ones are then
 * removed. index is taken modulo the product. Caller owns. O(n). */
json_t *tp__space_grid_point(const tp_space_t *s, uint64_t index, tp_rng_t *rng) {
    uint64_t *digit = tp__xcalloc(s->n ? s->n : 1, sizeof *digit);
    grid_digits(s, index, digit);
    json_t *cfg = json_object();
    for (size_t i = 0; i < s->n; i++) {
        const tp_param_t *p = &s->params[i];
        json_t *v = grid_dim(p) ? grid_value(p, digit[i]) : sample_param(p, rng);
        json_object_set_new(cfg, p->name, v);
    }
    free(digit);
    tp__space_prune(s, cfg);
    return cfg;
}

static int put_text(const char *t, size_t len, char *out, size_t n) {
    if (n == 0 || len >= n || len > (size_t)INT32_MAX) return -ENOSPC;
    memcpy(out, t, len);
    out[len] = '\0';
    return (int)len;
}

/* See space.h. Objects and arrays are written as compact JSON. */
int tp__value_text(const json_t *v, char *out, size_t n) {
    char t[64];
    switch (json_typeof(v)) {
    case JSON_INTEGER:
        snprintf(t, sizeof t, "%" JSON_INTEGER_FORMAT, json_integer_value(v));
        return put_text(t, strlen(t), out, n);
    case JSON_REAL:
        tp__fmt_double(json_real_value(v), t);
        return put_text(t, strlen(t), out, n);
    case JSON_STRING:
        return put_text(json_string_value(v), json_string_length(v), out, n);
    case JSON_TRUE:
        return put_text("true", 4, out, n);
    case JSON_FALSE:
        return put_text("false", 5, out, n);
    case JSON_NULL:
        return put_text("null", 4, out, n);
    case JSON_OBJECT:
    case JSON_ARRAY: {
        char *d = json_dumps(v, JSON_COMPACT | JSON_ENCODE_ANY);
        if (!d) return -ENOMEM;
        int rc = put_text(d, strlen(d), out, n);
        free(d);
        return rc;
    }
    }
    return -EINVAL;
}

int tp__value_text_human(const json_t *v, char *out, size_t n) {
    if (!json_is_real(v)) return tp__value_text(v, out, n);
    char t[32];
    tp__fmt_sig(json_real_value(v), t);
    size_t len = strlen(t);
    if (len >= n) return -ENOSPC;
    memcpy(out, t, len + 1);
    return (int)len;
}

void tp__params_text(const json_t *params, char *out, size_t n) {
    size_t k = 0;
    const char *key;
    json_t *val;
    out[0] = 0;
    json_object_foreach((json_t *)params, key, val) {
        char text[128];
        if (tp__value_text_human(val, text, sizeof text) < 0) snprintf(text, sizeof text, "...");
        /* for terminals: no escape sequence from a name or a value (docs/output.md) */
        char *name = tp__escape(key, 0), *shown = tp__escape(text, 0);
        int w = snprintf(out + k, n - k, "%s%s=%s", k ? " " : "", name, shown);
        free(name);
        free(shown);
        if (w < 0 || (size_t)w >= n - k) {
            out[k] = 0;
            break;
        }
        k += (size_t)w;
    }
}
