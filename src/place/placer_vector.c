/* vpack, the default placer: multi-dimensional vector packing in which every
 * constraint a placement has counts (GPU memory, compute share scaled by the
 * GPU's speed, trials per GPU, the node's CPU cores, multi-GPU trials on one
 * node), then a bounded local search.
 *
 * 1. Scarcity weights. For each resource r (compute, memory, slots, CPUs),
 *    w_r = demand of all trials in r / free capacity in r (floored at 0.05):
 *    a resource the trials would overfill weighs most, one they barely touch
 *    hardly counts. A trial's demand in r on GPU g is normalised by g's own
 *    capacity in r (CPUs by the node's cores per GPU).
 * 2. Greedy, as a small portfolio: trials in two orders (scarcity-weighted
 *    size, largest first; value density = compute per weighted size, densest
 *    first; ties: longest expected duration first), each trial to the
 *    fitting GPU whose remaining capacity best matches it: the smallest
 *    weighted squared residual (vector best fit, Panigrahy et al.'s norm
 *    rule) or the largest weighted dot product of demand and free capacity
 *    (Tetris's alignment).
 * 3. Local search on each greedy answer, moves that strictly raise the
 *    occupancy: insert an unplaced trial where it fits; make room for it by
 *    moving one placed trial of the GPU to another GPU (or node); swap it in
 *    for a placed trial of smaller value. A budget of fit tests, fixed in
 *    proportion to the instance, bounds it: O(budget), no clock.
 * 4. The best answer of the portfolio (occupancy, then the summed duration of
 *    what was placed, then the portfolio's order) is committed.
 *
 * Trials wanting several GPUs (or none) are placed first, largest first, on
 * the node whose best GPUs align most, and are not moved. Very large rounds
 * (trials x GPUs above VP_LARGE) take one greedy pass of the size order
 * through placer_fit's segment tree (best fit), O(n log G), and no search. */
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "place/place_internal.h"

#define VP_LARGE 4e7       /* trials x GPUs above which the tree path is taken */
#define VP_MIN_WEIGHT 0.05 /* a resource nobody is short of still breaks ties */
#define NONE SIZE_MAX

enum { R_COMP, R_MEM, R_SLOT, R_CPU, NRES };
typedef enum choice { CHOOSE_BEST_FIT, CHOOSE_ALIGN } choice_t;

typedef struct vp {
    const tp_cluster_t *c;
    tp_usage_t *u;            /* the working usage (a copy per portfolio run) */
    const tp_demand_t *t;
    size_t n, G;
    size_t *node_of;          /* per GPU: its node */
    size_t *local_of;         /* per GPU: its index within the node */
    double w[NRES];           /* scarcity weights */
    double *size;             /* per trial: weighted size */
    size_t *where;            /* per single-GPU trial: global GPU, NONE if unplaced */
    size_t *head, *next;      /* per GPU: its single-GPU trials, a singly linked list */
    long long budget;         /* fit tests the local search may still make */
} vp_t;

/* Capacity of GPU gi in each resource, for normalising. */
static void gpu_caps(const vp_t *v, size_t gi, double cap[NRES]) {
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
static void vectors(const vp_t *v, size_t gi, const tp_demand_t *d, double dem[NRES],
                    double fr[NRES]) {
    double cap[NRES];
    gpu_caps(v, gi, cap);
    size_t nd = v->node_of[gi], g = v->local_of[gi];
    dem[R_COMP] = tp__place_share(v->c, nd, g, d->compute) / cap[R_COMP];
    fr[R_COMP] = tp__place_comp_free(v->c, v->u, gi) / cap[R_COMP];
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
static double score(const vp_t *v, size_t gi, const tp_demand_t *d, choice_t how) {
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

static double share_on(const vp_t *v, size_t i, size_t gi) {
    return tp__place_share(v->c, v->node_of[gi], v->local_of[gi], v->t[i].compute);
}

static int fits(vp_t *v, size_t i, size_t gi) {
    v->budget--;
    return tp__fits(v->c, v->u, v->node_of[gi], v->local_of[gi], &v->t[i]);
}

static void put(vp_t *v, size_t i, size_t gi) {
    tp_assign_t a = {.placed = 1, .node = v->node_of[gi], .ngpus = 1, .gpu = {v->local_of[gi]}};
    tp__place_commit(v->c, v->u, &v->t[i], &a);
    v->where[i] = gi;
    v->next[i] = v->head[gi];
    v->head[gi] = i;
}

static void take(vp_t *v, size_t i) {
    size_t gi = v->where[i], nd = v->node_of[gi];
    const tp_demand_t *d = &v->t[i];
    v->u->cpus_used[nd] -= d->cpus;
    v->u->mem_used[gi] -= d->memory_mib;
    v->u->compute_used[gi] -= share_on(v, i, gi);
    v->u->count[gi]--;
    size_t *p = &v->head[gi];
    while (*p != i) p = &v->next[*p];
    *p = v->next[i];
    v->where[i] = NONE;
}

/* The fitting GPU that suits trial i best, except `skip`; NONE if none. O(G). */
static size_t choose(vp_t *v, size_t i, choice_t how, size_t skip) {
    size_t best = NONE;
    double bs = 0;
    for (size_t gi = 0; gi < v->G; gi++) {
        if (gi == skip || !fits(v, i, gi)) continue;
        double s = score(v, gi, &v->t[i], how);
        if (best == NONE || s > bs) best = gi, bs = s;
    }
    return best;
}

/* ---- the weights and the orders ------------------------------------------ */

static void weights(vp_t *v) {
    double dem[NRES] = {0}, cap[NRES] = {0};
    const tp_cluster_t *c = v->c;
    for (size_t gi = 0; gi < v->G; gi++) {
        size_t nd = v->node_of[gi], g = v->local_of[gi];
        if (!tp__place_gpu_open(c, v->u, nd, g)) continue;
        double speed = c->nodes[nd].gpus[g].speed > 0 ? c->nodes[nd].gpus[g].speed : 1.0;
        double fc = tp__place_comp_free(c, v->u, gi);
        cap[R_COMP] += (fc > 0 ? fc : 0) * speed;
        cap[R_MEM] += (double)tp__place_mem_free(c, v->u, nd, g);
        if (c->limits.max_per_gpu > 0) cap[R_SLOT] += c->limits.max_per_gpu - v->u->count[gi];
    }
    for (size_t nd = 0; nd < c->nnodes; nd++) cap[R_CPU] += c->nodes[nd].cpus - v->u->cpus_used[nd];
    for (size_t i = 0; i < v->n; i++) {
        const tp_demand_t *d = &v->t[i];
        if (d->gpus < 0 || d->gpus > TP_PLACE_MAX_GPUS) continue;
        dem[R_COMP] += d->compute * d->gpus;
        dem[R_MEM] += (double)d->memory_mib * d->gpus;
        dem[R_SLOT] += d->gpus;
        dem[R_CPU] += d->cpus;
    }
    for (int r = 0; r < NRES; r++) {
        double w = cap[r] > 0 ? dem[r] / cap[r] : (dem[r] > 0 ? 10.0 : 0.0);
        v->w[r] = w > VP_MIN_WEIGHT ? w : VP_MIN_WEIGHT;
    }
    if (c->limits.max_per_gpu <= 0) v->w[R_SLOT] = 0;
    /* sizes against the cluster's mean capacities */
    double mean[NRES] = {0};
    for (size_t gi = 0; gi < v->G; gi++) {
        double k[NRES];
        gpu_caps(v, gi, k);
        for (int r = 0; r < NRES; r++) mean[r] += k[r] / (double)v->G;
    }
    for (size_t i = 0; i < v->n; i++) {
        const tp_demand_t *d = &v->t[i];
        double k = d->gpus > 0 ? d->gpus : 1;
        double s = v->w[R_COMP] * d->compute * k / (mean[R_COMP] > 0 ? mean[R_COMP] : 1) +
                   v->w[R_MEM] * (double)d->memory_mib * k / (mean[R_MEM] > 0 ? mean[R_MEM] : 1) +
                   v->w[R_CPU] * d->cpus / (mean[R_CPU] > 0 ? mean[R_CPU] : 1);
        if (mean[R_SLOT] > 0) s += v->w[R_SLOT] * k / mean[R_SLOT];
        v->size[i] = s;
    }
}

typedef struct key {
    double k1, k2; /* larger first */
    size_t i;      /* then trial order */
} sort_key_t;

static int by_key(const void *a, const void *b) {
    const sort_key_t *x = a, *y = b;
    if (x->k1 != y->k1) return x->k1 > y->k1 ? -1 : 1;
    if (x->k2 != y->k2) return x->k2 > y->k2 ? -1 : 1;
    return x->i < y->i ? -1 : x->i > y->i;
}

/* Indexes of the trials in idx[0..m) sorted by size (density = 0) or value
 * density (density = 1), ties by duration, longest first. O(m log m). */
static void sort_trials(const vp_t *v, size_t *idx, size_t m, int density) {
    sort_key_t *k = tp__xmalloc((m ? m : 1) * sizeof *k);
    for (size_t j = 0; j < m; j++) {
        size_t i = idx[j];
        double s = v->size[i] > 0 ? v->size[i] : 1e-12;
        k[j] = (sort_key_t){density ? v->t[i].compute / s : s, v->t[i].duration_s, i};
    }
    qsort(k, m, sizeof *k, by_key);
    for (size_t j = 0; j < m; j++) idx[j] = k[j].i;
    free(k);
}

/* ---- wide trials (several GPUs or none): first, on the best aligned node -- */

static int cmp_score_desc(const void *a, const void *b) {
    const double *x = a, *y = b; /* pairs (score, gpu) */
    if (x[0] != y[0]) return x[0] > y[0] ? -1 : 1;
    return x[1] < y[1] ? -1 : x[1] > y[1];
}

static void place_wide(vp_t *v, size_t i, tp_assign_t *a) {
    const tp_cluster_t *c = v->c;
    const tp_demand_t *d = &v->t[i];
    size_t k = (size_t)d->gpus;
    double best = -INFINITY;
    double *pairs = NULL;
    size_t cap = 0;
    memset(a, 0, sizeof *a);
    for (size_t nd = 0; nd < c->nnodes; nd++) {
        if (v->u->cpus_used[nd] + d->cpus > c->nodes[nd].cpus || c->nodes[nd].ngpus < k) continue;
        size_t base = v->u->gpu_base[nd], m = 0;
        double s = 0;
        if (k == 0) {
            s = c->nodes[nd].cpus - v->u->cpus_used[nd]; /* the most cores left */
        } else {
            if (cap < c->nodes[nd].ngpus) {
                cap = c->nodes[nd].ngpus;
                pairs = tp__xrealloc(pairs, 2 * cap * sizeof *pairs);
            }
            for (size_t g = 0; g < c->nodes[nd].ngpus; g++) {
                if (!tp__fits(c, v->u, nd, g, d)) continue;
                pairs[2 * m] = score(v, base + g, d, CHOOSE_ALIGN);
                pairs[2 * m + 1] = (double)g;
                m++;
            }
            if (m < k) continue;
            qsort(pairs, m, 2 * sizeof *pairs, cmp_score_desc);
            for (size_t j = 0; j < k; j++) s += pairs[2 * j];
        }
        if (s <= best) continue;
        best = s;
        *a = (tp_assign_t){.placed = 1, .node = nd, .ngpus = k};
        for (size_t j = 0; j < k; j++) a->gpu[j] = (size_t)pairs[2 * j + 1];
    }
    free(pairs);
    if (a->placed) tp__place_commit(c, v->u, d, a);
}

/* ---- local search ------------------------------------------------------------ */

/* Place trial i (unplaced) if some move allows it; 1 if placed. Tries, each
 * for a strict gain: a GPU where it fits now; a GPU where it fits once one
 * of its trials moves to another GPU; a GPU where it fits in place of one of
 * its trials of smaller value (which becomes unplaced). */
static int insert(vp_t *v, size_t i, choice_t how) {
    size_t gi = choose(v, i, how, NONE);
    if (gi != NONE) {
        put(v, i, gi);
        return 1;
    }
    const tp_demand_t *d = &v->t[i];
    for (size_t g = 0; g < v->G && v->budget > 0; g++) {
        size_t nd = v->node_of[g];
        if (!tp__place_gpu_open(v->c, v->u, nd, v->local_of[g]) && !v->head[g]) continue;
        if (d->memory_mib > v->c->nodes[nd].gpus[v->local_of[g]].memory_mib) continue;
        for (size_t j = v->head[g]; j != NONE; j = v->next[j]) {
            take(v, j);
            if (fits(v, i, g)) {
                put(v, i, g); /* i first: j's new GPU must leave room for it */
                double si = share_on(v, i, g), sj = share_on(v, j, g);
                size_t to = choose(v, j, how, g);
                /* moved: a gain unless j's new GPU is faster (a smaller share) */
                if (to != NONE && si + share_on(v, j, to) > sj + TP_PLACE_EPS) {
                    put(v, j, to);
                    return 1;
                }
                if (si > sj + TP_PLACE_EPS) return 1; /* swapped: j waits */
                take(v, i);
            }
            put(v, j, g);
            break; /* the list changed under us: one try per GPU for each of its trials */
        }
    }
    return 0;
}

/* Re-order g's list is not needed: insert() tries only the head of each GPU,
 * so rotate the lists between passes to try the other residents too. */
static void rotate(vp_t *v) {
    for (size_t g = 0; g < v->G; g++) {
        size_t h = v->head[g];
        if (h == NONE || v->next[h] == NONE) continue;
        size_t last = v->next[h];
        while (v->next[last] != NONE) last = v->next[last];
        v->head[g] = v->next[h];
        v->next[last] = h;
        v->next[h] = NONE;
    }
}

static int same_demand(const tp_demand_t *a, const tp_demand_t *b) {
    return a->memory_mib == b->memory_mib && a->compute == b->compute && a->cpus == b->cpus;
}

/* Passes over the unplaced trials, densest first, until a pass changes
 * nothing, the residents have all had a turn, or the budget is spent. A trial
 * identical to one that just failed is skipped while nothing changed. */
static void local_search(vp_t *v, size_t *single, size_t m, choice_t how) {
    size_t *todo = tp__xmalloc((m ? m : 1) * sizeof *todo);
    int max_per = 1;
    for (size_t g = 0; g < v->G; g++) {
        int k = v->u->count[g];
        if (k > max_per) max_per = k;
    }
    for (int pass = 0; pass < max_per + 1 && v->budget > 0; pass++) {
        size_t k = 0;
        for (size_t j = 0; j < m; j++)
            if (v->where[single[j]] == NONE) todo[k++] = single[j];
        sort_trials(v, todo, k, 1);
        int changed = 0;
        size_t failed = NONE;
        for (size_t j = 0; j < k && v->budget > 0; j++) {
            size_t i = todo[j];
            if (v->where[i] != NONE) continue;
            if (failed != NONE && same_demand(&v->t[i], &v->t[failed])) continue;
            if (insert(v, i, how)) {
                changed = 1;
                failed = NONE;
            } else {
                failed = i;
            }
        }
        if (!changed && pass > 0) break;
        rotate(v);
    }
    free(todo);
}

/* ---- one portfolio run and the whole policy -------------------------------- */

static void usage_copy(tp_usage_t *dst, const tp_usage_t *src, const tp_cluster_t *c) {
    size_t g = src->ngpus ? src->ngpus : 1, nn = c->nnodes ? c->nnodes : 1;
    memcpy(dst->mem_used, src->mem_used, g * sizeof *dst->mem_used);
    memcpy(dst->compute_used, src->compute_used, g * sizeof *dst->compute_used);
    memcpy(dst->count, src->count, g * sizeof *dst->count);
    memcpy(dst->cpus_used, src->cpus_used, nn * sizeof *dst->cpus_used);
}

/* One portfolio run: the wide trials wide[0..nw) before the single-GPU ones
 * (wide_first) or after them, the single-GPU ones greedily in `order` with
 * rule `how`, then local search; decisions in v->where and wide_out. */
static void run_once(vp_t *v, const size_t *order, size_t *single, size_t m, const size_t *wide,
                     size_t nw, int wide_first, choice_t how, tp_assign_t *wide_out) {
    for (size_t g = 0; g < v->G; g++) v->head[g] = NONE;
    for (size_t j = 0; j < m; j++) v->where[order[j]] = NONE;
    if (wide_first)
        for (size_t j = 0; j < nw; j++) place_wide(v, wide[j], &wide_out[wide[j]]);
    for (size_t j = 0; j < m; j++) {
        size_t i = order[j], gi = choose(v, i, how, NONE);
        if (gi != NONE) put(v, i, gi);
    }
    if (!wide_first)
        for (size_t j = 0; j < nw; j++) place_wide(v, wide[j], &wide_out[wide[j]]);
    local_search(v, single, m, how);
}

static double placed_value(const vp_t *v, const size_t *single, size_t m, double *dur) {
    double occ = 0;
    for (size_t g = 0; g < v->G; g++) occ += v->u->compute_used[g] < 1 ? v->u->compute_used[g] : 1;
    *dur = 0;
    for (size_t j = 0; j < m; j++)
        if (v->where[single[j]] != NONE) *dur += v->t[single[j]].duration_s;
    return occ;
}

/* Large rounds: the size order through placer_fit's tree, best fit. */
static void place_large(vp_t *v, size_t *single, size_t m, tp_assign_t *out) {
    sort_trials(v, single, m, 0);
    tp__place_greedy_order(v->c, v->u, v->t, single, m, 1, out);
}

static int place_vpack(const tp_cluster_t *c, tp_usage_t *u, const tp_demand_t *trials, size_t n,
                       tp_assign_t *out, const tp_place_effort_t *effort, tp_error_t *err) {
    (void)effort;
    (void)err;
    vp_t v = {.c = c, .u = u, .t = trials, .n = n, .G = u->ngpus};
    size_t G1 = v.G ? v.G : 1, n1 = n ? n : 1;
    v.node_of = tp__xmalloc(G1 * sizeof *v.node_of);
    v.local_of = tp__xmalloc(G1 * sizeof *v.local_of);
    for (size_t nd = 0; nd < c->nnodes; nd++)
        for (size_t g = 0; g < c->nodes[nd].ngpus; g++) {
            v.node_of[u->gpu_base[nd] + g] = nd;
            v.local_of[u->gpu_base[nd] + g] = g;
        }
    v.size = tp__xcalloc(n1, sizeof *v.size);
    v.where = tp__xmalloc(n1 * sizeof *v.where);
    v.head = tp__xmalloc(G1 * sizeof *v.head);
    v.next = tp__xmalloc(n1 * sizeof *v.next);
    for (size_t i = 0; i < n; i++) {
        memset(&out[i], 0, sizeof out[i]);
        v.where[i] = NONE;
    }
    weights(&v);

    /* wide trials (several GPUs or none) largest first; then the single-GPU ones */
    size_t *wide = tp__xmalloc(n1 * sizeof *wide), nw = 0;
    size_t *idx = tp__xmalloc(n1 * sizeof *idx), m = 0;
    for (size_t i = 0; i < n; i++) {
        if (trials[i].gpus == 1) idx[m++] = i;
        else if (trials[i].gpus >= 0 && trials[i].gpus <= TP_PLACE_MAX_GPUS) wide[nw++] = i;
    }
    sort_trials(&v, wide, nw, 0);

    if ((double)m * (double)v.G > VP_LARGE) {
        for (size_t j = 0; j < nw; j++) place_wide(&v, wide[j], &out[wide[j]]);
        place_large(&v, idx, m, out);
    } else if (m + nw) {
        static const struct { int density, wide_first; choice_t how; } runs[] = {
            {0, 1, CHOOSE_BEST_FIT}, {1, 1, CHOOSE_BEST_FIT}, {0, 1, CHOOSE_ALIGN},
            {1, 1, CHOOSE_ALIGN},    {0, 0, CHOOSE_BEST_FIT}, {1, 0, CHOOSE_BEST_FIT}};
        tp_usage_t start, work;
        tp__usage_init(&start, c);
        tp__usage_init(&work, c);
        usage_copy(&start, u, c);
        size_t *order = tp__xmalloc(n1 * sizeof *order);
        size_t *best_where = tp__xmalloc(n1 * sizeof *best_where);
        tp_assign_t *wide_out = tp__xcalloc(n1, sizeof *wide_out);
        tp_assign_t *best_wide = tp__xcalloc(n1, sizeof *best_wide);
        double best_occ = -1, best_dur = -1;
        for (size_t r = 0; r < TP_ARRAY_LEN(runs); r++) {
            if (!runs[r].wide_first && !nw) continue; /* the same as its wide-first twin */
            usage_copy(&work, &start, c);
            v.u = &work;
            memcpy(order, idx, m * sizeof *order);
            sort_trials(&v, order, m, runs[r].density);
            v.budget = 20000 + 200 * (long long)m + 20 * (long long)m * (long long)v.G;
            run_once(&v, order, idx, m, wide, nw, runs[r].wide_first, runs[r].how, wide_out);
            double dur, occ = placed_value(&v, idx, m, &dur);
            for (size_t j = 0; j < nw; j++)
                if (wide_out[wide[j]].placed) dur += trials[wide[j]].duration_s;
            if (occ > best_occ + 1e-9 || (occ > best_occ - 1e-9 && dur > best_dur)) {
                best_occ = occ;
                best_dur = dur;
                memcpy(best_where, v.where, n1 * sizeof *best_where);
                memcpy(best_wide, wide_out, n1 * sizeof *best_wide);
            }
        }
        v.u = u;
        for (size_t j = 0; j < nw; j++) {
            out[wide[j]] = best_wide[wide[j]];
            tp__place_commit(c, u, &trials[wide[j]], &out[wide[j]]);
        }
        for (size_t j = 0; j < m; j++) {
            size_t i = idx[j], gi = best_where[i];
            if (gi == NONE) continue;
            out[i] = (tp_assign_t){.placed = 1, .node = v.node_of[gi], .ngpus = 1,
                                   .gpu = {v.local_of[gi]}};
            tp__place_commit(c, u, &trials[i], &out[i]);
        }
        free(order);
        free(best_where);
        free(wide_out);
        free(best_wide);
        tp__usage_free(&start);
        tp__usage_free(&work);
    }
    free(wide);
    free(idx);
    free(v.node_of);
    free(v.local_of);
    free(v.size);
    free(v.where);
    free(v.head);
    free(v.next);
    return 0;
}

const tp_placer_ops_t tp__placer_vpack = {
    .name = "vpack",
    .summary = "vector packing weighing memory, compute, CPUs and slots by scarcity, then "
               "local search (default)",
    .place = place_vpack,
};
