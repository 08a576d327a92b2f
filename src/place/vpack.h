/* vpack's internals (placer_vector.c: weights, constructions, the policy;
 * vpack_search.c: the local search and the GPU-by-GPU fill): its state and
 * the primitives both files call in their inner loops. */
#ifndef TP_PLACE_VPACK_H
#define TP_PLACE_VPACK_H

#include <stddef.h>

#include "place/place_internal.h"

#define NONE SIZE_MAX

enum { R_COMP, R_MEM, R_SLOT, R_CPU, NRES };
typedef enum choice { CHOOSE_BEST_FIT, CHOOSE_ALIGN } choice_t;

typedef struct vp {
    const tp_cluster_t *c;
    tp_usage_t *u; /* the working usage (a copy per portfolio run) */
    const tp_demand_t *t;
    size_t n, G;
    size_t *node_of;         /* per GPU: its node */
    size_t *local_of;        /* per GPU: its index within the node */
    double w[NRES];          /* scarcity weights */
    double *size;            /* per trial: weighted size */
    size_t *where;           /* per single-GPU trial: global GPU, NONE if unplaced */
    size_t *head, *next;     /* per GPU: its single-GPU trials, a singly linked list */
    long long budget;        /* fit tests the local search may still make */
    double bonus;            /* > 0 in the makespan runs: a placed trial is worth its share
                                plus bonus x crit x compute / top speed x (duration / dmax)^4 */
    double dmax, smax, crit; /* the round's longest duration, top speed, criticality (5.) */
} vp_t;

typedef enum order { BY_SIZE, BY_DENSITY, BY_DURATION, AS_GIVEN } order_t;

/* Capacity of GPU gi in each resource, for normalising. */
static inline void gpu_caps(const vp_t *v, size_t gi, double cap[NRES]) {
    const tp_cluster_t *c = v->c;
    size_t nd = v->node_of[gi];
    const tp_gpu_t *g = &c->nodes[nd].gpus[v->local_of[gi]];
    double mem = (double)g->memory_mib - (double)c->limits.reserve_mib;
    cap[R_COMP] = 1.0 + c->limits.oversubscribe;
    cap[R_MEM] = mem > 1 ? mem : 1;
    cap[R_SLOT] = c->limits.max_per_gpu > 0 ? c->limits.max_per_gpu : 0;
    double cpg = (double)c->nodes[nd].cpus / (double)(c->nodes[nd].ngpus ? c->nodes[nd].ngpus : 1);
    cap[R_CPU] = cpg > 0 ? cpg : 1;
}

/* Trial d's demand on GPU gi and gi's free capacity, each over gi's caps. */
static inline void vectors(const vp_t *v, size_t gi, const tp_demand_t *d, double dem[NRES],
                           double fr[NRES]) {
    double cap[NRES];
    gpu_caps(v, gi, cap);
    size_t nd = v->node_of[gi], g = v->local_of[gi];
    dem[R_COMP] = tp__place_share(v->c, nd, g, d->compute) / cap[R_COMP];
    fr[R_COMP] = tp__place_comp_free(v->c, v->u, nd, g) / cap[R_COMP];
    dem[R_MEM] = (double)d->memory_mib / cap[R_MEM];
    fr[R_MEM] = (double)tp__place_mem_free(v->c, v->u, nd, g) / cap[R_MEM];
    if (cap[R_SLOT] > 0) {
        dem[R_SLOT] = 1.0 / cap[R_SLOT];
        fr[R_SLOT] = (cap[R_SLOT] - v->u->count[gi]) / cap[R_SLOT];
    } else {
        dem[R_SLOT] = fr[R_SLOT] = 0;
    }
    dem[R_CPU] = d->cpus / cap[R_CPU];
    fr[R_CPU] = (v->c->nodes[nd].cpus - v->u->cpus_used[nd]) / cap[R_CPU];
}

/* How well d suits GPU gi now (higher is better); d must fit there. */
static inline double score(const vp_t *v, size_t gi, const tp_demand_t *d, choice_t how) {
    double dem[NRES], fr[NRES], s = 0;
    vectors(v, gi, d, dem, fr);
    for (int r = 0; r < NRES; r++) {
        if (how == CHOOSE_ALIGN) {
            s += v->w[r] * dem[r] * fr[r];
        } else {
            double left = fr[r] - dem[r];
            s -= v->w[r] * left * left;
        }
    }
    return s;
}

static inline double share_on(const vp_t *v, size_t i, size_t gi) {
    return tp__place_share(v->c, v->node_of[gi], v->local_of[gi], v->t[i].compute);
}

static inline int fits(vp_t *v, size_t i, size_t gi) {
    v->budget--;
    return tp__fits(v->c, v->u, v->node_of[gi], v->local_of[gi], &v->t[i]);
}

/* The makespan runs' bonus for placing trial i (the same on every GPU). */
static inline double bonus_of(const vp_t *v, size_t i) {
    if (v->bonus <= 0 || v->dmax <= 0) return 0;
    double x = v->t[i].duration_s / v->dmax;
    return v->bonus * v->crit * v->t[i].compute / v->smax * (x * x) * (x * x);
}

/* What placing trial i on GPU gi is worth to the search: its share, plus
 * the bonus in the makespan runs. */
static inline double value_on(const vp_t *v, size_t i, size_t gi) {
    return share_on(v, i, gi) + bonus_of(v, i);
}

/* Record single-GPU trial i on GPU gi in the lists (its usage already counted). */
static inline void link(vp_t *v, size_t i, size_t gi) {
    v->where[i] = gi;
    v->next[i] = v->head[gi];
    v->head[gi] = i;
}

static inline void put(vp_t *v, size_t i, size_t gi) {
    tp_assign_t a = {.placed = 1, .node = v->node_of[gi], .ngpus = 1, .gpu = {v->local_of[gi]}};
    tp__place_commit(v->c, v->u, &v->t[i], &a);
    link(v, i, gi);
}

static inline void take(vp_t *v, size_t i) {
    size_t gi = v->where[i], nd = v->node_of[gi];
    const tp_demand_t *d = &v->t[i];
    v->u->cpus_used[nd] -= d->cpus;
    v->u->mem_used[gi] -= d->memory_mib;
    v->u->compute_used[gi] -= share_on(v, i, gi);
    v->u->count[gi]--;
    size_t *p = &v->head[gi];
    while (*p != i)
        p = &v->next[*p];
    *p = v->next[i];
    v->where[i] = NONE;
}

/* The fitting GPU that suits trial i best, except `skip`; NONE if none. O(G). */
static inline size_t choose(vp_t *v, size_t i, choice_t how, size_t skip) {
    size_t best = NONE;
    double bs = 0;
    for (size_t gi = 0; gi < v->G; gi++) {
        if (gi == skip || !fits(v, i, gi)) continue;
        double s = score(v, gi, &v->t[i], how);
        if (best == NONE || s > bs) best = gi, bs = s;
    }
    return best;
}

/* Indexes of the trials in idx[0..m) sorted: by weighted size, largest
 * first; by value density (compute per weighted size), densest first; by
 * expected duration, longest first (ties: size); or as given. Other ties:
 * longest first, then trial order. O(m log m). */
void tp__vp_sort(const vp_t *v, size_t *idx, size_t m, order_t by);
/* Passes over the unplaced trials of single[0..m), densest first, moves
 * that strictly raise the value (insert; eject one or two and refill) until
 * a pass changes nothing or the budget is spent (vpack_search.c). */
void tp__vp_local_search(vp_t *v, size_t *single, size_t m, choice_t how);
/* Each open GPU in turn takes the subset of the unplaced single-GPU trials
 * that adds the most (vpack_search.c; fair_cpus: its share of the node's
 * free cores at most; tight_first: nodes of fewest cores per speed first). */
void tp__vp_fill(vp_t *v, size_t *single, size_t m, int fair_cpus, int tight_first);

#endif
