/* space: parameter domains, sampling, grid enumeration, JSON encoding.
 * A configuration is a jansson object {name: value} in parameter order. */
#ifndef TP_SPACE_H
#define TP_SPACE_H

#include <jansson.h>
#include <stddef.h>
#include <stdint.h>

#include "util/util.h"

typedef enum tp_domain_kind {
    TP_DOM_CONST,      /* values[0] */
    TP_DOM_CHOICE,     /* one of values[] */
    TP_DOM_GRID,       /* each of values[] (enumerated by the grid searcher) */
    TP_DOM_UNIFORM,    /* real in [lo, hi] */
    TP_DOM_LOGUNIFORM, /* real in [lo, hi], log-scaled; lo > 0 */
    TP_DOM_INT,        /* integer in [lo, hi] inclusive; log-scaled if log */
    TP_DOM_NORMAL,     /* real ~ N(lo = mean, hi = sigma) */
} tp_domain_kind;

/* A condition on a parameter (`when: {parent: value}` or `{parent: [v1, v2]}`): the
 * parameter is active only while its parent is active and holds one of values[]. */
typedef struct tp_cond {
    char *parent;    /* owned name of the parameter it depends on */
    size_t pidx;     /* index of the parent in the space, set by tp__space_link */
    json_t **values; /* owned refs: the parent's values that activate */
    size_t nvalues;  /* count of values (>= 1) */
    int line, col;   /* where the condition was written, 1-based; 0 if unknown */
} tp_cond_t;

typedef struct tp_param {
    char *name;          /* owned */
    tp_domain_kind kind; /* which domain */
    json_t **values;     /* owned refs; CONST, CHOICE, GRID */
    size_t nvalues;      /* count of values */
    double lo, hi;       /* UNIFORM, LOGUNIFORM, INT bounds; NORMAL mean, sigma */
    double q;            /* quantization step, 0 for none (UNIFORM, LOGUNIFORM, NORMAL, INT) */
    int log;             /* INT sampled log-uniformly */
    int line, col;       /* where it was declared, 1-based; 0 if unknown */
    tp_cond_t *when;     /* owned conditions, all must hold (AND); NULL: always active */
    size_t nwhen;        /* count of conditions */
} tp_param_t;

typedef struct tp_space {
    tp_param_t *params; /* owned array, in declaration order */
    size_t n;           /* number of params */
    size_t *order;      /* owned: param indices with every parent before its children
                           (tp__space_link); NULL until linked or without conditions */
    int conditional;    /* some param has a condition (set by tp__space_link) */
} tp_space_t;

void tp__space_init(tp_space_t *s);
void tp__space_free(tp_space_t *s);
/* Append a parameter; the space takes ownership of p's fields. */
void tp__space_add(tp_space_t *s, const tp_param_t *p);
const tp_param_t *tp__space_find(const tp_space_t *s, const char *name);
/* The parameter name closest to a misspelt name, or NULL (for messages). */
const char *tp__space_did_you_mean(const tp_space_t *s, const char *name);

/* Resolve and check the conditions of every param: the parent exists, is a
 * choice, grid, constant or int parameter, each value is one the parent can
 * take, and no chain of conditions is a cycle. Sets pidx, order and
 * conditional. Returns 0, or -EINVAL with a message (no file position) and
 * *at set to the offending condition (NULL if the error has none). Call
 * once after the last tp__space_add; a space without conditions needs no
 * call. O(params * conditions). */
int tp__space_link(tp_space_t *s, const tp_cond_t **at, tp_error_t *err);

/* Which params are active in cfg (a configuration holding at least every
 * parent's value): active[i] is 1 or 0, decided parents first. A param whose
 * parent is absent from cfg is inactive. O(params * conditions). */
void tp__space_active(const tp_space_t *s, const json_t *cfg, unsigned char *active);
/* Remove every inactive param from cfg. O(params * conditions). */
void tp__space_prune(const tp_space_t *s, json_t *cfg);
/* Is v a value of p's domain: one of the values (choice, grid, constant),
 * an integer inside the bounds (int), a number inside them (uniform,
 * loguniform), any finite number (normal)? Quantization is not checked. */
int tp__param_contains(const tp_param_t *p, const json_t *v);
/* Check that cfg is a configuration of s: an object whose keys are params,
 * every active param present with a value in its domain (numbers inside
 * their bounds, choices among their values), no inactive one present.
 * Returns 0 or -EINVAL with a message naming the param. O(params). */
int tp__space_check_config(const tp_space_t *s, const json_t *cfg, tp_error_t *err);

/* Check a param's domain: non-empty lists, lo < hi (lo <= hi for INT),
 * lo > 0 for LOGUNIFORM and log INT, sigma > 0, q >= 0; and that every
 * value its samplers can draw is finite: the range (a normal's mean +- 9
 * sigma) spans at most DBL_MAX / 16, and q is coarse enough to round by
 * over it (>= the range's magnitude * DBL_EPSILON, >= DBL_MIN). Returns 0,
 * -EINVAL (the domain) or -EDOM (its q) with a message that says what is
 * wrong and what would be right (without file position: the caller adds
 * it). */
int tp__param_check(const tp_param_t *p, tp_error_t *err);

/* Draw one configuration: every param sampled (GRID treated as CHOICE),
 * then the inactive ones removed. The rng draws are the same whatever the
 * conditions say. Returns a new object, caller owns. O(n params). */
json_t *tp__space_sample(const tp_space_t *s, tp_rng_t *rng);
/* As tp__space_sample, keeping inactive params (for searchers that replace
 * values and prune afterwards). */
json_t *tp__space_sample_full(const tp_space_t *s, tp_rng_t *rng);

/* Number of points in the grid: the product of the sizes of the discrete
 * domains (GRID, CHOICE, and INT without log whose range has <= 10000 values).
 * Returns 1 when there are none, 0 on overflow past 2^40. With conditions
 * it counts the valid combinations only (see tp__space_grid_valid), and
 * returns 0 when the full product is past 2^24. */
uint64_t tp__space_grid_size(const tp_space_t *s);
/* The valid combinations of a conditional grid: *out gets a malloc'd array
 * of the indices into the full product (as tp__space_grid_point takes them)
 * where every inactive discrete param sits at its first value, so each
 * distinct configuration appears once. Returns the count; 0 with *out NULL
 * for a space without conditions (every index is valid) or past 2^24.
 * O(product * params). */
uint64_t tp__space_grid_valid(const tp_space_t *s, uint64_t **out);
/* The index-th point of the full product (mixed-radix, the first param
 * varying slowest); continuous params are sampled from rng; inactive params
 * removed. Caller owns. */
json_t *tp__space_grid_point(const tp_space_t *s, uint64_t index, tp_rng_t *rng);

/* Text of a JSON scalar as it is substituted into argv and env:
 * integers "%lld", reals shortest round-trip, strings as is, true/false,
 * null "null". Returns bytes written (excl NUL) or -ENOSPC if it does not fit. */
int tp__value_text(const json_t *v, char *out, size_t n);
/* The same for people: reals with 6 significant digits (tp__fmt_sig), the
 * rest as tp__value_text. Exports keep full precision; this is for tables
 * and progress lines. Returns bytes written or -ENOSPC. */
int tp__value_text_human(const json_t *v, char *out, size_t n);
/* "lr=0.001 hidden=64": a configuration as one line for people (values as
 * tp__value_text_human, names and values escaped as tp__escape does), cut at
 * the last pair that fits in out (n bytes).
 * O(size of params). */
void tp__params_text(const json_t *params, char *out, size_t n);

#endif
