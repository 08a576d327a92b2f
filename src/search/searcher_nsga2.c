/* searcher_nsga2: NSGA-II (Deb et al. 2002) with Optuna 3.1's defaults
 * (NSGAIISampler): population 50, crossover probability 0.9, uniform
 * crossover (each parameter from either parent with probability 0.5),
 * mutation probability 1/params (a mutated parameter keeps the random
 * draw), parents chosen by binary tournament on dominance.
 *
 * Trial i belongs to generation g = i / 50. Generation 0 is the random
 * searcher's draws. Generation g > 0 needs every trial of generation g - 1
 * told (ask returns -EAGAIN until then); its parents are the elites of the
 * parents of g - 1 together with the told trials of g - 1 (failed ones
 * left out): whole non-dominated fronts, the last one cut by crowding
 * distance. Works with one objective too (then it is a plain GA). Prior
 * observations (warm start) join the candidates for generation 1's parents.
 *
 * Constraints (cfg.constraints): constrained domination (Deb et al. 2002,
 * section VI, as Optuna's NSGAIISampler with constraints_func): a feasible
 * trial beats an infeasible one, of two infeasible ones the smaller total
 * violation wins, of two feasible ones Pareto dominance decides. So the
 * elites are the feasible trials' fronts first, then the infeasible ones,
 * a front per violation level (least first); the tournament likewise.
 * Priors count as feasible.
 *
 * Determinism: ask(i) depends on (seed, i) and the tells of earlier
 * generations only; a generation's parents are computed once, at the
 * first ask that needs them, when all their inputs are told.
 * Cost: O(P^2 m) per generation for P = 50; memory one configuration and m
 * values per trial. */
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "search/pareto.h"
#include "search/search.h"

#define NSGA_POP 50
#define NSGA_CROSSOVER 0.9
#define NSGA_SWAP 0.5

typedef struct nsga_obs {
    json_t *config;                 /* told configuration, owned; NULL: not told */
    double loss[TP_MAX_OBJECTIVES]; /* its values as losses; NaN: failed */
    double violation;               /* constraints: total violation when told (0: feasible) */
} nsga_obs_t;

typedef struct nsga_state {
    nsga_obs_t *obs; /* by trial index */
    size_t nobs;
    size_t **parents; /* parents[g]: trial indices of generation g's parents, owned; [0] unused */
    size_t *nparents;
    size_t ngen;       /* generations with parents computed + 1 */
    nsga_obs_t *prior; /* warm start: earlier results, owned; candidates for the first parents */
    size_t nprior;
} nsga_state_t;

static int nsga_init(tp_searcher_t *s, tp_error_t *err) {
    (void)err;
    s->impl = tp__xcalloc(1, sizeof(nsga_state_t));
    return 0;
}

#define PRIOR_ID ((size_t)1 << 40) /* ids from here on name prior observations */

static const nsga_obs_t *obs_of(const nsga_state_t *st, size_t id) {
    return id >= PRIOR_ID ? &st->prior[id - PRIOR_ID] : &st->obs[id];
}

static size_t nobj(const tp_searcher_t *s) {
    return tp__search_nobj(&s->cfg);
}

static int usable(const tp_searcher_t *s, const nsga_obs_t *o) {
    if (!o->config) return 0;
    for (size_t j = 0; j < nobj(s); j++)
        if (isnan(o->loss[j])) return 0;
    return 1;
}

typedef struct crowd {
    double dist;
    size_t id;
} crowd_t;

static int cmp_crowd(const void *pa, const void *pb) {
    const crowd_t *a = pa, *b = pb;
    if (a->dist != b->dist) return a->dist > b->dist ? -1 : 1; /* larger first */
    return (a->id > b->id) - (a->id < b->id);
}

static int cmp_violation(const void *pa, const void *pb) {
    const double *a = pa, *b = pb;
    return a[0] < b[0] ? -1 : a[0] > b[0] ? 1 : (a[1] > b[1]) - (a[1] < b[1]);
}

/* Fronts under constrained domination: the feasible trials of cand[] by non-dominated
 * sorting of y (their losses), then the infeasible ones, a front per violation level,
 * least first. Returns the number of fronts. O(m n^2). */
static size_t constrained_rank(const tp_searcher_t *s, const size_t *cand, const double *y,
                               size_t n, size_t m, size_t *rank) {
    const nsga_state_t *st = s->impl;
    double *yf = tp__xmalloc(n * m * sizeof *yf), *inf = tp__xmalloc(2 * n * sizeof *inf);
    size_t *pos = tp__xmalloc(n * sizeof *pos), *rf = tp__xmalloc(n * sizeof *rf), nf = 0, ni = 0;
    for (size_t k = 0; k < n; k++) {
        double v = obs_of(st, cand[k])->violation;
        if (v == 0) {
            memcpy(yf + nf * m, y + k * m, m * sizeof *yf);
            pos[nf++] = k;
        } else {
            inf[2 * ni] = v, inf[2 * ni + 1] = (double)k;
            ni++;
        }
    }
    size_t fronts = nf ? tp__pareto_rank(yf, nf, m, rf) : 0;
    for (size_t k = 0; k < nf; k++)
        rank[pos[k]] = rf[k];
    qsort(inf, ni, 2 * sizeof *inf, cmp_violation);
    for (size_t k = 0; k < ni; k++) {
        if (k == 0 || inf[2 * k] != inf[2 * k - 2]) fronts++;
        rank[(size_t)inf[2 * k + 1]] = fronts - 1;
    }
    free(yf), free(inf), free(pos), free(rf);
    return fronts;
}

/* a beats b under constrained domination (see the file comment). */
static int constrained_dominates(const tp_searcher_t *s, const nsga_obs_t *a, const nsga_obs_t *b) {
    if (a->violation != b->violation && (a->violation == 0 || b->violation > 0))
        return a->violation < b->violation;
    return a->violation == 0 && tp__pareto_dominates(a->loss, b->loss, nobj(s));
}

/* The P elites of the n trials cand[] into out; returns how many (<= P). */
static size_t elites(const tp_searcher_t *s, const size_t *cand, size_t n, size_t *out) {
    const nsga_state_t *st = s->impl;
    size_t m = nobj(s);
    if (n <= NSGA_POP) {
        memcpy(out, cand, n * sizeof *out);
        return n;
    }
    double *y = tp__xmalloc(n * m * sizeof *y);
    for (size_t k = 0; k < n; k++)
        memcpy(y + k * m, obs_of(st, cand[k])->loss, m * sizeof *y);
    size_t *rank = tp__xmalloc(n * sizeof *rank), *front = tp__xmalloc(n * sizeof *front);
    size_t fronts = constrained_rank(s, cand, y, n, m, rank), got = 0;
    for (size_t f = 0; f < fronts && got < NSGA_POP; f++) {
        size_t nf = 0;
        for (size_t k = 0; k < n; k++)
            if (rank[k] == f) front[nf++] = k;
        if (got + nf <= NSGA_POP) {
            for (size_t k = 0; k < nf; k++)
                out[got++] = cand[front[k]];
            continue;
        }
        double *dist = tp__xmalloc(nf * sizeof *dist);
        tp__pareto_crowding(y, m, front, nf, dist);
        crowd_t *c = tp__xmalloc(nf * sizeof *c);
        for (size_t k = 0; k < nf; k++)
            c[k] = (crowd_t){dist[k], cand[front[k]]};
        qsort(c, nf, sizeof *c, cmp_crowd);
        for (size_t k = 0; got < NSGA_POP; k++)
            out[got++] = c[k].id;
        free(dist), free(c);
    }
    free(y), free(rank), free(front);
    return got;
}

/* Compute the parents of generations up to g (all of g - 1 told). */
static void ensure_parents(tp_searcher_t *s, size_t g) {
    nsga_state_t *st = s->impl;
    while (st->ngen <= g) {
        size_t h = st->ngen; /* compute parents[h] */
        st->parents = tp__xrealloc(st->parents, (h + 1) * sizeof *st->parents);
        st->nparents = tp__xrealloc(st->nparents, (h + 1) * sizeof *st->nparents);
        st->parents[h] = NULL;
        st->nparents[h] = 0;
        if (h > 0) {
            size_t prev = h > 1 ? st->nparents[h - 1] : st->nprior; /* priors: before gen 0 */
            size_t *cand = tp__xmalloc((prev + NSGA_POP) * sizeof *cand), n = 0;
            for (size_t k = 0; k < prev; k++)
                if (h > 1)
                    cand[n++] = st->parents[h - 1][k];
                else if (usable(s, &st->prior[k]))
                    cand[n++] = PRIOR_ID + k;
            for (size_t i = (h - 1) * NSGA_POP; i < h * NSGA_POP && i < st->nobs; i++)
                if (usable(s, &st->obs[i])) cand[n++] = i;
            st->parents[h] = tp__xmalloc((n ? n : 1) * sizeof **st->parents);
            st->nparents[h] = elites(s, cand, n, st->parents[h]);
            free(cand);
        }
        st->ngen++;
    }
}

/* Binary tournament: two parents at random, the first if it dominates. */
static size_t tournament(const tp_searcher_t *s, const size_t *par, size_t n, tp_rng_t *rng) {
    const nsga_state_t *st = s->impl;
    size_t a = par[tp__rng_below(rng, n)], b = par[tp__rng_below(rng, n)];
    return constrained_dominates(s, obs_of(st, a), obs_of(st, b)) ? a : b;
}

static int nsga_ask(tp_searcher_t *s, uint64_t index, double now, json_t **out) {
    (void)now;
    nsga_state_t *st = s->impl;
    if (s->cfg.trials && index >= s->cfg.trials) return 0;
    tp_rng_t rng;
    tp__rng_seed(&rng, s->cfg.seed, index);
    json_t *cfg = tp__space_sample_full(s->space, &rng);
    size_t g = (size_t)(index / NSGA_POP);
    if (g > 0) {
        if (g >= st->ngen) { /* the parents need every trial of generation g - 1 */
            for (uint64_t i = (g - 1) * NSGA_POP; i < (uint64_t)g * NSGA_POP; i++)
                if (i >= st->nobs || !st->obs[i].config) {
                    json_decref(cfg);
                    return -EAGAIN;
                }
            ensure_parents(s, g);
        }
        size_t np = st->nparents[g];
        if (np > 0) {
            size_t p0 = tournament(s, st->parents[g], np, &rng), p1 = p0;
            if (tp__rng_uniform(&rng) < NSGA_CROSSOVER)
                p1 = tournament(s, st->parents[g], np, &rng);
            double mutate = 1.0 / (double)(s->space->n ? s->space->n : 1);
            for (size_t i = 0; i < s->space->n; i++) {
                const char *name = s->space->params[i].name;
                double u = tp__rng_uniform(&rng), w = tp__rng_uniform(&rng);
                if (u < mutate) continue; /* keeps the random draw */
                const json_t *from =
                    json_object_get(obs_of(st, w < NSGA_SWAP ? p0 : p1)->config, name);
                if (!from)
                    from = json_object_get(obs_of(st, w < NSGA_SWAP ? p1 : p0)->config, name);
                if (from) json_object_set_new(cfg, name, json_deep_copy(from));
            }
        }
    }
    tp__space_prune(s->space, cfg);
    *out = cfg;
    return 1;
}

static void nsga_tell_values(tp_searcher_t *s, uint64_t index, const json_t *config,
                             const double *values, double now) {
    (void)now;
    nsga_state_t *st = s->impl;
    if (!config || index >= (1u << 26)) return;
    if (index >= st->nobs) {
        st->obs = tp__xrealloc(st->obs, (index + 1) * sizeof *st->obs);
        memset(st->obs + st->nobs, 0, (index + 1 - st->nobs) * sizeof *st->obs);
        st->nobs = (size_t)index + 1;
    }
    nsga_obs_t *o = &st->obs[index];
    json_decref(o->config);
    o->config = json_deep_copy(config);
    tp__search_losses(&s->cfg, values, o->loss);
    o->violation = tp__searcher_violation(s, index);
}

/* One objective: as tell_values with the one value. */
static void nsga_tell(tp_searcher_t *s, uint64_t index, const json_t *config, double value,
                      double now) {
    nsga_tell_values(s, index, config, &value, now);
}

/* Warm start: an earlier result joins the candidates for generation 1's
 * parents. */
static void nsga_tell_prior(tp_searcher_t *s, const json_t *config, const double *values) {
    nsga_state_t *st = s->impl;
    if (st->ngen > 1) return; /* generation 1's parents are chosen already */
    st->prior = tp__xrealloc(st->prior, (st->nprior + 1) * sizeof *st->prior);
    nsga_obs_t *o = &st->prior[st->nprior++];
    o->config = json_deep_copy(config);
    o->violation = 0; /* its constraint values were not kept */
    tp__search_losses(&s->cfg, values, o->loss);
}

static uint64_t nsga_total(const tp_searcher_t *s) {
    return s->cfg.trials;
}

static void nsga_destroy(tp_searcher_t *s) {
    nsga_state_t *st = s->impl;
    if (!st) return;
    for (size_t i = 0; i < st->nobs; i++)
        json_decref(st->obs[i].config);
    for (size_t g = 0; g < st->ngen; g++)
        free(st->parents[g]);
    for (size_t i = 0; i < st->nprior; i++)
        json_decref(st->prior[i].config);
    free(st->prior);
    free(st->obs), free(st->parents), free(st->nparents), free(st);
    s->impl = NULL;
}

const struct tp_searcher_ops tp__searcher_nsga2_ops = {
    .name = "nsga2",
    .init = nsga_init,
    .ask = nsga_ask,
    .tell = nsga_tell,
    .tell_values = nsga_tell_values,
    .tell_prior = nsga_tell_prior,
    .total = nsga_total,
    .destroy = nsga_destroy,
};
