/* searcher_dehb: the sampler of DEHB (Awad, Mallik and Hutter 2021, "DEHB:
 * Evolutionary Hyperband for Scalable, Robust and Efficient Hyperparameter
 * Optimization"), run inside ASHA's rungs or Hyperband's brackets, which
 * decide budgets and promotions, as BOHB is (searcher_bohb.c).
 *
 * Each configuration is a vector in [0,1]^d (one coordinate per parameter,
 * tp__dehb_config maps it back). The sampler keeps a subpopulation P_b per
 * budget b the scheduler tells results at (tp__searcher_tell), of size
 * N_b = max(1, floor(budget.max / b)): the number of configurations the
 * largest Hyperband bracket runs at b (27, 9, 3, 1 for budgets 1..27, eta 3).
 *
 * ask(index, start): start is the budget of the new trial's first job, which
 * the scheduler passes (tp__searcher_ask): asha's lowest rung, the first rung
 * of a hyperband bracket (0: not known).
 *   the first N_min = N_{budget.min} configurations, any while no
 *   subpopulation holds three members to draw parents from, and any for a
 *   start budget no result has reached yet, are the random searcher's draw
 *   from (seed, index): the lowest budget's population seeded at random;
 *   else DE evolves the subpopulation of budget b = start, as DEHB evolves the
 *   subpopulation of the rung it fills (without a start budget: b drawn among
 *   those with members, with probability proportional to how many
 *   configurations one Hyperband iteration (all its brackets) evaluates at b:
 *   81, 61, 35, 19, 10 for budgets 1..81, eta 3; N_b without a budget);
 *   its next member in turn is the target (DEHB's round robin), and the
 *   parents r1, r2, r3 come from the parent pool: for the lowest budget, P_b
 *   itself; for a higher one, the best N_b members of the next lower budget's
 *   subpopulation (those it promotes to b), topped up from P_b and then from
 *   every subpopulation when fewer than three (as DEHB does). The trial is
 *   rand/1 with F = 0.5, binomial crossover with CR = 0.5 (tp__dehb_trial).
 *   The next configuration is made at once from the populations as they
 *   are: DEHB's asynchronous variant, at any concurrency. So the trial's
 *   first result, at b, always meets its target there.
 *
 * tell at budget b: the result joins P_b while it has fewer than N_b
 * members. Once P_b is full, a trial generated for b replaces its target if
 * as good or better (DE's selection); any other result (a trial the
 * scheduler promoted into b, or one generated for another budget) replaces
 * the worst member of a higher budget's P_b if better (DEHB fills the higher
 * subpopulations with promoted configurations), and leaves the lowest
 * budget's as it is: that one changes by DE's selection only (bench/
 * mf_search found the lowest population chasing the first epochs' leaders
 * otherwise). A trial's later result at a budget where it is a member
 * updates its fitness. Failed results (NaN) never join.
 *
 * Where this departs from DEHB: the scheduler, not the sampler, runs the
 * higher budgets: a higher budget's jobs continue a promoted configuration
 * from its checkpoint instead of evaluating a fresh mutant of the promoted
 * ones, so DE only makes the configurations of a bracket's first rung (under
 * asha: the lowest budget's only, whose parents are its own members; the
 * higher subpopulations then serve as nothing but records). Without a start
 * budget a trial generated for b meets its target only if promoted to b. A
 * result told without a budget counts at +inf.
 *
 * Determinism: ask(index, start) is a pure function of (seed, index, start,
 * the results told, the earlier asks; start is the scheduler's, itself
 * replayed from the journal): its draws come from a stream seeded by (seed,
 * index), the round-robin targets from the order of asks. Replaying the
 * journaled asks and results in order gives the same configurations.
 *
 * Cost: per ask O(sum N_b * d + N log N) (the parent pool sorted); per tell
 * O(N_b). Memory: O(sum N_b * d) plus a vector per asked trial. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "search/dehb.h"
#include "search/search.h"

#define DEHB_MAX_BUDGETS 64       /* distinct budgets kept (rungs: a few) */
#define DEHB_MAX_INDEX (1u << 26) /* larger trial numbers are not kept (as bohb) */
#define DEHB_DEFAULT_POP 20       /* N_b without a scheduler's budget (tests) */
#define DEHB_NORMAL_SPAN 3.0      /* a normal parameter's range: mean +- 3 sigma */
#define DEHB_STREAM 0x64656862ULL /* "dehb": the DE draws' seed, apart from random's */

typedef struct dehb_member {
    uint64_t trial; /* whose result */
    double fit;     /* its loss at this budget (smaller is better) */
    double *u;      /* its vector, d coordinates, owned */
} dehb_member_t;

typedef struct dehb_level {
    double budget;    /* the rung budget, +inf: told without one */
    size_t cap;       /* N_b */
    dehb_member_t *m; /* n members, cap allocated */
    size_t n;         /* members */
    size_t next;      /* the next target, round robin */
} dehb_level_t;

typedef struct dehb_asked {
    json_t *config; /* as asked, owned; NULL: not asked */
    double *u;      /* its vector, owned */
    int homed;      /* generated by DE for budget `home` */
    double home;    /* that budget */
    size_t slot;    /* its target's slot there */
} dehb_asked_t;

typedef struct dehb_state {
    size_t d;        /* coordinates: one per parameter */
    dehb_level_t *l; /* nl budgets, ascending */
    size_t nl;
    dehb_asked_t *a; /* per trial index */
    size_t na;
} dehb_state_t;

static double clamp01(double x) {
    return x < 0 ? 0 : x > 1 ? 1 : x;
}

void tp__dehb_trial(const double *target, const double *r1, const double *r2, const double *r3,
                    size_t d, double f, double cr, tp_rng_t *rng, double *out) {
    if (d == 0) return;
    size_t jrand = (size_t)tp__rng_below(rng, d);
    for (size_t j = 0; j < d; j++) {
        int from_mutant = tp__rng_uniform(rng) < cr || j == jrand;
        out[j] = from_mutant ? r1[j] + f * (r2[j] - r3[j]) : target[j];
    }
    for (size_t j = 0; j < d; j++)
        if (!(out[j] >= 0 && out[j] <= 1)) out[j] = tp__rng_uniform(rng);
}

/* The range a numeric parameter's coordinate spans, in log for log scales;
 * 0 when it has none (a constant or a choice). */
static int span(const tp_param_t *p, double *lo, double *hi, int *lg) {
    *lg = p->kind == TP_DOM_LOGUNIFORM || (p->kind == TP_DOM_INT && p->log);
    *lo = p->lo, *hi = p->hi;
    if (p->kind == TP_DOM_NORMAL)
        *lo = p->lo - DEHB_NORMAL_SPAN * p->hi, *hi = p->lo + DEHB_NORMAL_SPAN * p->hi;
    else if (p->kind != TP_DOM_UNIFORM && p->kind != TP_DOM_LOGUNIFORM && p->kind != TP_DOM_INT)
        return 0;
    if (*lg) *lo = log(*lo), *hi = log(*hi);
    return 1;
}

json_t *tp__dehb_config(const tp_space_t *sp, const double *u) {
    json_t *cfg = json_object();
    for (size_t i = 0; i < sp->n; i++) {
        const tp_param_t *p = &sp->params[i];
        double lo, hi, x = clamp01(u[i]);
        int lg;
        json_t *v;
        if (p->kind == TP_DOM_CONST) {
            v = json_incref(p->values[0]);
        } else if (p->kind == TP_DOM_CHOICE || p->kind == TP_DOM_GRID) {
            size_t k = (size_t)(x * (double)p->nvalues);
            v = json_incref(p->values[k < p->nvalues ? k : p->nvalues - 1]);
        } else {
            span(p, &lo, &hi, &lg);
            x = lo + x * (hi - lo);
            if (lg) x = exp(x);
            if (p->q > 0) x = round(x / p->q) * p->q;
            if (p->kind != TP_DOM_NORMAL) x = x < p->lo ? p->lo : x > p->hi ? p->hi : x;
            v = p->kind == TP_DOM_INT ? json_integer((json_int_t)llround(x)) : json_real(x);
        }
        json_object_set_new(cfg, p->name, v);
    }
    tp__space_prune(sp, cfg);
    return cfg;
}

/* u[i] for each parameter cfg holds (a choice: the middle of its bin);
 * the others keep what u holds. */
static void decode(const tp_space_t *sp, const json_t *cfg, double *u) {
    for (size_t i = 0; i < sp->n; i++) {
        const tp_param_t *p = &sp->params[i];
        const json_t *v = json_object_get(cfg, p->name);
        double lo, hi;
        int lg;
        if (!v) continue;
        if (p->kind == TP_DOM_CHOICE || p->kind == TP_DOM_GRID) {
            for (size_t k = 0; k < p->nvalues; k++)
                if (json_equal(p->values[k], (json_t *)v))
                    u[i] = ((double)k + 0.5) / (double)p->nvalues;
        } else if (span(p, &lo, &hi, &lg) && json_is_number(v) && hi > lo) {
            double x = json_number_value(v);
            if (lg) x = x > 0 ? log(x) : lo;
            u[i] = clamp01((x - lo) / (hi - lo));
        }
    }
}

static size_t pop_size(const tp_searcher_t *s, double b) {
    if (!(s->cfg.budget_max > 0)) return DEHB_DEFAULT_POP;
    double n = floor(s->cfg.budget_max / b + 1e-9);
    return n >= 1 ? (size_t)n : 1;
}

static int dehb_init(tp_searcher_t *s, tp_error_t *err) {
    (void)err;
    dehb_state_t *st = tp__xcalloc(1, sizeof *st);
    st->d = s->space->n;
    s->impl = st;
    return 0;
}

static int same_budget(double a, double b) {
    return a == b || fabs(a - b) <= 1e-9 * fmax(fabs(a), fabs(b));
}

/* The subpopulation of budget b, created in order on its first result
 * (NULL past DEHB_MAX_BUDGETS, or when create is 0 and there is none). */
static dehb_level_t *level_at(tp_searcher_t *s, double b, int create) {
    dehb_state_t *st = s->impl;
    size_t k = 0;
    for (; k < st->nl && st->l[k].budget <= b; k++)
        if (same_budget(st->l[k].budget, b)) return &st->l[k];
    if (k < st->nl && same_budget(st->l[k].budget, b)) return &st->l[k];
    if (!create || st->nl == DEHB_MAX_BUDGETS) return NULL;
    st->l = tp__xrealloc(st->l, (st->nl + 1) * sizeof *st->l);
    memmove(st->l + k + 1, st->l + k, (st->nl - k) * sizeof *st->l);
    st->nl++;
    dehb_level_t *e = &st->l[k];
    memset(e, 0, sizeof *e);
    e->budget = b, e->cap = pop_size(s, b);
    e->m = tp__xcalloc(e->cap, sizeof *e->m);
    return e;
}

/* ---- ask ----------------------------------------------------------------------------- */

typedef struct ranked {
    double fit;
    const double *u;
} ranked_t;

static int cmp_ranked(const void *pa, const void *pb) {
    const ranked_t *a = pa, *b = pb;
    return (a->fit > b->fit) - (a->fit < b->fit);
}

/* Add the members of e to pool (n entries so far), up to limit in all;
 * returns the new count. */
static size_t add_members(ranked_t *pool, size_t n, const dehb_level_t *e, size_t limit) {
    for (size_t i = 0; i < e->n && n < limit; i++)
        pool[n++] = (ranked_t){e->m[i].fit, e->m[i].u};
    return n;
}

/* The parent pool of level k (see the file comment) into pool (room for
 * every member of every level); returns its size. */
static size_t parent_pool(const dehb_state_t *st, size_t k, ranked_t *pool) {
    const dehb_level_t *e = &st->l[k];
    size_t n;
    if (k == 0) {
        n = add_members(pool, 0, e, e->n);
    } else {
        n = add_members(pool, 0, &st->l[k - 1], st->l[k - 1].n);
        qsort(pool, n, sizeof *pool, cmp_ranked);
        if (n > e->cap) n = e->cap; /* the ones promoted to b */
        if (n < 3) n = add_members(pool, n, e, 3);
    }
    for (size_t j = 0; j < st->nl && n < 3; j++)
        if (j != k && j + 1 != k) n = add_members(pool, n, &st->l[j], 3);
    return n;
}

/* How many configurations one Hyperband iteration (brackets s = s_max..0,
 * bracket s starting ceil((s_max + 1) / (s + 1) eta^s) of them eta^s budget
 * steps below max) evaluates at budget b: DEHB evolves b's subpopulation that
 * often. N_b without a scheduler's budget. */
static double weight(const tp_searcher_t *s, const dehb_level_t *e) {
    double eta = s->cfg.budget_eta, max = s->cfg.budget_max, min = s->cfg.budget_min;
    if (!(eta > 1 && max > 0 && min > 0)) return (double)e->cap;
    int smax = (int)floor(log(max / min) / log(eta) + 1e-9);
    int j = isinf(e->budget) ? 0 : (int)lround(log(max / e->budget) / log(eta)); /* steps down */
    int i = smax - (j < 0 ? 0 : j > smax ? smax : j);
    double w = 0;
    for (int b = smax; b >= smax - i; b--) { /* bracket b: base level smax - b, its n_b */
        double n = ceil((double)(smax + 1) / (double)(b + 1) * pow(eta, b) - 1e-9);
        w += floor(n / pow(eta, i - (smax - b)) + 1e-9);
    }
    return w > 0 ? w : 1;
}

/* A level with members drawn with probability proportional to its weight;
 * SIZE_MAX when none has any. */
static size_t draw_level(const tp_searcher_t *s, tp_rng_t *rng) {
    const dehb_state_t *st = s->impl;
    double total = 0;
    for (size_t k = 0; k < st->nl; k++)
        total += st->l[k].n ? weight(s, &st->l[k]) : 0;
    if (total <= 0) return SIZE_MAX;
    double r = tp__rng_uniform(rng) * total;
    size_t last = SIZE_MAX;
    for (size_t k = 0; k < st->nl; k++) {
        if (!st->l[k].n) continue;
        double w = weight(s, &st->l[k]);
        last = k;
        if (r < w) return k;
        r -= w;
    }
    return last;
}

/* The level of budget b (SIZE_MAX: no result has reached b, or none of them joined). */
static size_t level_index(const dehb_state_t *st, double b) {
    for (size_t k = 0; k < st->nl; k++)
        if (same_budget(st->l[k].budget, b)) return st->l[k].n ? k : SIZE_MAX;
    return SIZE_MAX;
}

/* DE's proposal for index into u (d coordinates), for a trial starting at budget start
 * (0: unknown), its home level and slot; 0 when there are not three parents to draw. */
static int evolve(tp_searcher_t *s, uint64_t index, double start, double *u, dehb_asked_t *rec) {
    dehb_state_t *st = s->impl;
    tp_rng_t rng;
    tp__rng_seed(&rng, s->cfg.seed ^ DEHB_STREAM, index);
    size_t k = start > 0 ? level_index(st, start) : draw_level(s, &rng);
    if (k == SIZE_MAX) return 0;
    size_t all = 0;
    for (size_t j = 0; j < st->nl; j++)
        all += st->l[j].n;
    ranked_t *pool = tp__xmalloc(all * sizeof *pool);
    size_t n = parent_pool(st, k, pool);
    if (n < 3) {
        free(pool);
        return 0;
    }
    for (size_t i = 0; i < 3; i++) { /* r1, r2, r3: distinct members, by partial shuffle */
        size_t j = i + (size_t)tp__rng_below(&rng, n - i);
        ranked_t t = pool[i];
        pool[i] = pool[j], pool[j] = t;
    }
    dehb_level_t *e = &st->l[k];
    size_t slot = e->next++ % e->n;
    tp__dehb_trial(e->m[slot].u, pool[0].u, pool[1].u, pool[2].u, st->d, TP_DEHB_F, TP_DEHB_CR,
                   &rng, u);
    free(pool);
    rec->homed = 1, rec->home = e->budget, rec->slot = slot;
    return 1;
}

/* See the file comment. Returns 0 past `trials` (when bounded), else 1. */
static int dehb_ask_budget(tp_searcher_t *s, uint64_t index, double start, double now,
                           json_t **out) {
    (void)now;
    dehb_state_t *st = s->impl;
    if (s->cfg.trials && index >= s->cfg.trials) return 0;
    double *u = tp__xcalloc(st->d ? st->d : 1, sizeof *u);
    dehb_asked_t rec = {0};
    size_t ninit = pop_size(s, s->cfg.budget_min > 0 ? s->cfg.budget_min : 1);
    if (st->d > 0 && index >= ninit && evolve(s, index, start, u, &rec)) {
        *out = tp__dehb_config(s->space, u);
    } else {
        tp_rng_t rng;
        tp__rng_seed(&rng, s->cfg.seed, index);
        *out = tp__space_sample(s->space, &rng);
        for (size_t i = 0; i < st->d; i++)
            u[i] = 0.5;
        decode(s->space, *out, u);
    }
    if (index >= DEHB_MAX_INDEX) {
        free(u);
        return 1;
    }
    if (index >= st->na) {
        size_t n = (size_t)index + 1;
        st->a = tp__xrealloc(st->a, n * sizeof *st->a);
        memset(st->a + st->na, 0, (n - st->na) * sizeof *st->a);
        st->na = n;
    }
    dehb_asked_t *a = &st->a[index];
    json_decref(a->config), free(a->u);
    *a = rec;
    a->config = json_incref(*out);
    a->u = u;
    return 1;
}

static int dehb_ask(tp_searcher_t *s, uint64_t index, double now, json_t **out) {
    return dehb_ask_budget(s, index, 0, now, out);
}

/* ---- tell ---------------------------------------------------------------------------- */

/* Put trial index's result (fit, vector u, copied) into slot i of e. */
static void set_member(dehb_level_t *e, size_t i, uint64_t index, double fit, const double *u,
                       size_t d) {
    dehb_member_t *m = &e->m[i];
    if (!m->u) m->u = tp__xmalloc((d ? d : 1) * sizeof *m->u);
    memcpy(m->u, u, d * sizeof *u);
    m->trial = index, m->fit = fit;
}

/* Trial index's result at budget (NaN: failed there). With config NULL the
 * configuration asked for index is used (ignored if none). */
static void dehb_tell_budget(tp_searcher_t *s, uint64_t index, const json_t *config, double value,
                             double budget, double now) {
    (void)now;
    dehb_state_t *st = s->impl;
    const dehb_asked_t *a = index < st->na && st->a[index].config ? &st->a[index] : NULL;
    if (!config) config = a ? a->config : NULL;
    if (!config || index >= DEHB_MAX_INDEX) return;
    dehb_level_t *e = level_at(s, budget > 0 ? budget : INFINITY, 1);
    if (!e) return;
    double fit = isnan(value) ? INFINITY : s->maximize ? -value : value;
    double *u = tp__xmalloc((st->d ? st->d : 1) * sizeof *u);
    if (a && json_equal(a->config, (json_t *)config)) {
        memcpy(u, a->u, st->d * sizeof *u);
    } else {
        for (size_t i = 0; i < st->d; i++)
            u[i] = a ? a->u[i] : 0.5;
        decode(s->space, config, u);
    }
    size_t i = 0;
    while (i < e->n && e->m[i].trial != index)
        i++;
    if (i < e->n) { /* a member already: its latest result */
        set_member(e, i, index, fit, u, st->d);
    } else if (isinf(fit)) { /* failed: never joins */
    } else if (e->n < e->cap) {
        set_member(e, e->n++, index, fit, u, st->d);
    } else if (a && a->homed && same_budget(a->home, e->budget) && a->slot < e->n) {
        if (fit <= e->m[a->slot].fit) set_member(e, a->slot, index, fit, u, st->d);
    } else if (e != st->l) { /* promoted into a higher budget: in place of the worst */
        size_t w = 0;
        for (size_t j = 1; j < e->n; j++)
            if (e->m[j].fit > e->m[w].fit) w = j;
        if (fit < e->m[w].fit) set_member(e, w, index, fit, u, st->d);
    }
    free(u);
}

static void dehb_tell(tp_searcher_t *s, uint64_t index, const json_t *config, double value,
                      double now) {
    dehb_tell_budget(s, index, config, value, INFINITY, now);
}

static uint64_t dehb_total(const tp_searcher_t *s) {
    return s->cfg.trials;
}

static void dehb_destroy(tp_searcher_t *s) {
    dehb_state_t *st = s->impl;
    if (!st) return;
    for (size_t k = 0; k < st->nl; k++) {
        for (size_t i = 0; i < st->l[k].cap; i++)
            free(st->l[k].m[i].u);
        free(st->l[k].m);
    }
    for (size_t i = 0; i < st->na; i++)
        json_decref(st->a[i].config), free(st->a[i].u);
    free(st->l), free(st->a), free(st);
    s->impl = NULL;
}

size_t tp__dehb_subpop(const tp_searcher_t *s, double budget, uint64_t *trials, size_t cap,
                       size_t *size) {
    const dehb_state_t *st = s && s->ops == &tp__searcher_dehb_ops ? s->impl : NULL;
    *size = 0;
    for (size_t k = 0; st && k < st->nl; k++) {
        const dehb_level_t *e = &st->l[k];
        if (!same_budget(e->budget, budget)) continue;
        for (size_t i = 0; i < e->n && i < cap; i++)
            trials[i] = e->m[i].trial;
        *size = e->cap;
        return e->n;
    }
    return 0;
}

int tp__dehb_home(const tp_searcher_t *s, uint64_t index, double *budget, size_t *slot) {
    const dehb_state_t *st = s && s->ops == &tp__searcher_dehb_ops ? s->impl : NULL;
    if (!st || index >= st->na || !st->a[index].homed) return 0;
    *budget = st->a[index].home, *slot = st->a[index].slot;
    return 1;
}

const struct tp_searcher_ops tp__searcher_dehb_ops = {
    .name = "dehb",
    .init = dehb_init,
    .ask = dehb_ask,
    .ask_budget = dehb_ask_budget,
    .tell = dehb_tell,
    .tell_budget = dehb_tell_budget,
    .total = dehb_total,
    .destroy = dehb_destroy,
};
