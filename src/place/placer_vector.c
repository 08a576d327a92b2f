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
 * 2. Constructions, a small portfolio (`runs`): greedy in one order
 *    (longest expected duration first, as HyperSack; weighted size, largest
 *    first; value density = compute per weighted size, densest first; or as
 *    given), each trial to the fitting GPU whose remaining capacity matches
 *    it best: the smallest weighted squared residual (vector best fit,
 *    Panigrahy et al.'s norm rule) or the largest weighted dot product of
 *    demand and free capacity (Tetris's alignment); or GPU by GPU
 *    (fill_gpus), each taking the subset of the unplaced trials that adds
 *    the most, over classes of identical demand (a bounded depth-first
 *    search). Multi-GPU trials go first, last, or in the order. With
 *    multi-GPU trials in the round, wf's answer (placer_fit) is one more
 *    start: the local search never moves them, and on some rounds only wf's
 *    way of placing them leaves room for the best packing of the rest. It is
 *    one also when memory is scarcer than compute (w_mem > w_comp): filling
 *    GPU by GPU gives the first GPUs the trials that use their memory best
 *    and leaves the last ones a worse mix, where wf's spread lets the local
 *    search reach the mix the optimum has (bench/placement's memory-2).
 *    Where the nodes' free cores per unit of GPU speed differ, one more
 *    fill takes the nodes short of cores first (FILL_TIGHT).
 * 3. Local search on each answer, moves that strictly raise the occupancy:
 *    insert an unplaced trial where it fits; eject one or two trials of a
 *    GPU so that it fits there, the ejected ones moved elsewhere where they
 *    fit and the room left refilled from the unplaced; on mixed speeds, move
 *    a placed trial to a slower GPU with room. A budget of fit tests fixed
 *    by the instance (5000 + 20 n + n G, twice that where the nodes' cores
 *    per speed differ) bounds it: no clock.
 * 4. The best answer is committed: the most occupancy; within VP_TIE per GPU
 *    of it, the longest summed expected duration placed (long trials first
 *    shortens the makespan), then the least crowded GPUs (sum of trials^2:
 *    less MPS sharing). The portfolio stops early at an answer within 1e-4
 *    per GPU of an upper bound (every open GPU full, or every trial placed);
 *    every construction is tried alone before any local search, since on
 *    compute-bound rounds (SP4 on 16 GPUs) one of them reaches the bound and
 *    the search of the others would be spent for nothing.
 * 5. Makespan runs, in a run's rounds only (effort->in_run): the first
 *    VP_MS_RUNS runs again, a placed trial worth its share plus a bonus for
 *    long trials, compute / top speed x (duration / the round's longest)^4 x
 *    crit, and the answer of most such value kept when its occupancy is
 *    within VP_MS_GAP per GPU of the upper bound. crit = min(1, longest /
 *    horizon)^4, the horizon being the round's work (compute x duration)
 *    over the summed GPU speed: while the queue holds many times the longest
 *    trial's work, which trial starts first hardly matters and occupancy
 *    rules; as the queue drains the long trials would set the makespan and
 *    go first. Occupancy alone starts the short, busy trials and leaves the
 *    longest waiting (docs/simulator.md). One round alone (bench/placement,
 *    `tunepack place`) has no later round: the most occupancy is kept.
 *
 * 6. A plan, checked before step 1: a run's round that can be planned
 *    (effort->plan and what runs now; single-GPU trials with durations; a
 *    bounded round) is decided by place/plan.c instead: the rest of the
 *    queue simulated in a searched order, never worse than wfd's order.
 *
 * Trials wanting several GPUs (or none) go on the node whose best GPUs align
 * most, and are not moved by the local search. Rounds above VP_LARGE trials x
 * GPUs take one greedy pass of the size order through placer_fit's segment
 * tree (best fit), O(n log G), and no search. */
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "place/vpack.h"

#define VP_LARGE 2e6  /* trials x GPUs above which the tree path is taken */
#define VP_TIE 0.002  /* answers this close in occupancy per GPU tie: longest placed wins */
#define VP_BONUS 1.0  /* the makespan runs: a trial's bonus per unit of compute, longest */
#define VP_MS_GAP 0.1 /* their answer is kept within this much occupancy per GPU of the bound */
#define VP_MS_RUNS 3  /* the first runs of the portfolio, run again with the bonus */
#define VP_MIN_WEIGHT 0.05 /* a resource nobody is short of still breaks ties */
#define VP_CORES_BUDGET 2  /* the search's budget times this where nodes' cores differ */

/* ---- the weights and the orders ------------------------------------------ */

static void weights(vp_t *v) {
    double dem[NRES] = {0}, cap[NRES] = {0};
    const tp_cluster_t *c = v->c;
    for (size_t gi = 0; gi < v->G; gi++) {
        size_t nd = v->node_of[gi], g = v->local_of[gi];
        if (!tp__place_gpu_open(c, v->u, nd, g)) continue;
        double speed = c->nodes[nd].gpus[g].speed > 0 ? c->nodes[nd].gpus[g].speed : 1.0;
        double fc = tp__place_comp_free(c, v->u, nd, g);
        cap[R_COMP] += (fc > 0 ? fc : 0) * speed;
        cap[R_MEM] += (double)tp__place_mem_free(c, v->u, nd, g);
        if (c->limits.max_per_gpu > 0) cap[R_SLOT] += c->limits.max_per_gpu - v->u->count[gi];
    }
    for (size_t nd = 0; nd < c->nnodes; nd++)
        cap[R_CPU] += c->nodes[nd].cpus - v->u->cpus_used[nd];
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
        for (int r = 0; r < NRES; r++)
            mean[r] += k[r] / (double)v->G;
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

void tp__vp_sort(const vp_t *v, size_t *idx, size_t m, order_t by) {
    sort_key_t *k = tp__xmalloc((m ? m : 1) * sizeof *k);
    for (size_t j = 0; j < m; j++) {
        size_t i = idx[j];
        double s = v->size[i] > 0 ? v->size[i] : 1e-12, dur = v->t[i].duration_s;
        k[j] = by == BY_SIZE       ? (sort_key_t){s, dur, i}
               : by == BY_DENSITY  ? (sort_key_t){v->t[i].compute / s, dur, i}
               : by == BY_DURATION ? (sort_key_t){dur, s, i}
                                   : (sort_key_t){0, 0, i};
    }
    qsort(k, m, sizeof *k, by_key);
    for (size_t j = 0; j < m; j++)
        idx[j] = k[j].i;
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
            for (size_t j = 0; j < k; j++)
                s += pairs[2 * j];
        }
        if (s <= best) continue;
        best = s;
        *a = (tp_assign_t){.placed = 1, .node = nd, .ngpus = k};
        for (size_t j = 0; j < k; j++)
            a->gpu[j] = (size_t)pairs[2 * j + 1];
    }
    free(pairs);
    if (a->placed) tp__place_commit(c, v->u, d, a);
}

/* Whether the nodes' free cores per unit of GPU speed differ (by more than
 * 10%) while the trials want cores: then filling the nodes short of cores
 * first is one more construction (FILL_TIGHT). O(G + nodes). */
static int cores_per_speed_differ(const vp_t *v) {
    const tp_cluster_t *c = v->c;
    int wanted = 0;
    for (size_t i = 0; i < v->n && !wanted; i++)
        wanted = v->t[i].cpus > 0;
    if (!wanted || c->nnodes < 2) return 0;
    double lo = INFINITY, hi = 0;
    for (size_t nd = 0; nd < c->nnodes; nd++) {
        double speed = 0;
        for (size_t g = 0; g < c->nodes[nd].ngpus; g++)
            if (tp__place_gpu_open(c, v->u, nd, g))
                speed += c->nodes[nd].gpus[g].speed > 0 ? c->nodes[nd].gpus[g].speed : 1.0;
        if (speed <= 0) continue;
        double per = (c->nodes[nd].cpus - v->u->cpus_used[nd]) / speed;
        if (per < lo) lo = per;
        if (per > hi) hi = per;
    }
    return hi > 1.1 * lo;
}

/* ---- one portfolio run and the whole policy -------------------------------- */

static double placed_value(const vp_t *v, const size_t *single, size_t m, double *dur) {
    double occ = 0;
    for (size_t g = 0; g < v->G; g++)
        occ += v->u->compute_used[g] < 1 ? v->u->compute_used[g] : 1;
    *dur = 0;
    for (size_t j = 0; j < m; j++)
        if (v->where[single[j]] != NONE) *dur += v->t[single[j]].duration_s;
    return occ;
}

/* One portfolio run: how the first answer is built, then local search. */
typedef enum build { GREEDY, FILL_FAIR, FILL_NODE, FILL_TIGHT, SEED_WF } build_t;
typedef enum wide_mode { WIDE_FIRST, WIDE_LAST, WIDE_IN_ORDER } wide_mode_t;
typedef struct run_spec {
    order_t order;    /* the single-GPU trials' order (all trials' for WIDE_IN_ORDER) */
    build_t build;    /* greedy in that order, GPU by GPU (fill_gpus), or wf's answer */
    wide_mode_t wide; /* multi-GPU and CPU-only trials: before, after, or in the order */
    choice_t how;     /* the GPU rule of the greedy and of the local search */
} run_spec_t;

/* The portfolio, in the order tried (the first runs win most often). */
static const run_spec_t runs[] = {
    {BY_DURATION, GREEDY, WIDE_FIRST, CHOOSE_ALIGN},
    {BY_DURATION, GREEDY, WIDE_FIRST, CHOOSE_BEST_FIT},
    {BY_SIZE, FILL_FAIR, WIDE_FIRST, CHOOSE_BEST_FIT},
    {BY_SIZE, FILL_NODE, WIDE_FIRST, CHOOSE_BEST_FIT},
    {BY_DENSITY, GREEDY, WIDE_FIRST, CHOOSE_BEST_FIT},
    {BY_SIZE, GREEDY, WIDE_FIRST, CHOOSE_BEST_FIT},
    {BY_DENSITY, GREEDY, WIDE_FIRST, CHOOSE_ALIGN},
    {BY_SIZE, GREEDY, WIDE_FIRST, CHOOSE_ALIGN},
    {BY_DENSITY, GREEDY, WIDE_LAST, CHOOSE_BEST_FIT},
    {BY_DURATION, GREEDY, WIDE_IN_ORDER, CHOOSE_BEST_FIT},
    {AS_GIVEN, GREEDY, WIDE_IN_ORDER, CHOOSE_ALIGN},
    {AS_GIVEN, SEED_WF, WIDE_IN_ORDER, CHOOSE_BEST_FIT},
    {BY_SIZE, FILL_TIGHT, WIDE_FIRST, CHOOSE_BEST_FIT},
};

/* Run r: all[0..na) is every trial the run places, single[0..m) the
 * single-GPU ones, wide[0..nw) the others (largest first); decisions in
 * v->where and wide_out. Local search unless the answer reaches `bound`. */
static void run_once(vp_t *v, const run_spec_t *r, size_t *all, size_t na, size_t *single, size_t m,
                     const size_t *wide, size_t nw, double bound, tp_assign_t *wide_out) {
    for (size_t g = 0; g < v->G; g++)
        v->head[g] = NONE;
    for (size_t j = 0; j < m; j++)
        v->where[single[j]] = NONE;
    if (r->wide == WIDE_FIRST)
        for (size_t j = 0; j < nw; j++)
            place_wide(v, wide[j], &wide_out[wide[j]]);
    if (r->build == SEED_WF) {
        /* worst fit in the given order (placer_fit), wide trials its way too:
         * the one construction that sometimes places wide trials best */
        tp_assign_t *o = tp__xcalloc(v->n ? v->n : 1, sizeof *o);
        tp__placer_wf.place(v->c, v->u, v->t, v->n, o, NULL, NULL);
        for (size_t i = 0; i < v->n; i++) {
            if (!o[i].placed) continue;
            if (v->t[i].gpus == 1)
                link(v, i, v->u->gpu_base[o[i].node] + o[i].gpu[0]);
            else
                wide_out[i] = o[i];
        }
        free(o);
    } else if (r->build != GREEDY) {
        tp__vp_fill(v, single, m, r->build != FILL_NODE, r->build == FILL_TIGHT);
    } else {
        size_t *order = r->wide == WIDE_IN_ORDER ? all : single;
        size_t k = r->wide == WIDE_IN_ORDER ? na : m;
        tp__vp_sort(v, order, k, r->order);
        for (size_t j = 0; j < k; j++) {
            size_t i = order[j];
            if (v->t[i].gpus != 1) {
                place_wide(v, i, &wide_out[i]);
                continue;
            }
            size_t gi = choose(v, i, r->how, NONE);
            if (gi != NONE) put(v, i, gi);
        }
    }
    if (r->wide == WIDE_LAST)
        for (size_t j = 0; j < nw; j++)
            place_wide(v, wide[j], &wide_out[wide[j]]);
    double dur;
    if (placed_value(v, single, m, &dur) < bound) tp__vp_local_search(v, single, m, r->how);
}

/* The makespan runs' scales (5.): the round's longest duration, the top
 * speed, and crit from the horizon. O(G + n). */
static void makespan_scales(vp_t *v) {
    double speeds = 0, work = 0;
    v->smax = 0;
    v->dmax = 0;
    for (size_t g = 0; g < v->G; g++) {
        double sp = v->c->nodes[v->node_of[g]].gpus[v->local_of[g]].speed;
        sp = sp > 0 ? sp : 1.0;
        speeds += sp;
        if (sp > v->smax) v->smax = sp;
    }
    for (size_t i = 0; i < v->n; i++) {
        const tp_demand_t *d = &v->t[i];
        if (d->duration_s > v->dmax) v->dmax = d->duration_s;
        if (d->gpus > 0) work += d->compute * d->duration_s * d->gpus;
    }
    double r = work > 0 ? v->dmax / (work / speeds) : 1;
    r = r < 1 ? r : 1;
    v->crit = (r * r) * (r * r);
}

/* The placed single-GPU trials' value as the makespan runs count it. */
static double bonus_value(const vp_t *v, const size_t *single, size_t m) {
    double val = 0;
    for (size_t j = 0; j < m; j++)
        if (v->where[single[j]] != NONE) val += value_on(v, single[j], v->where[single[j]]);
    return val;
}

/* An upper bound on the occupancy numerator (as placed_value counts it):
 * what is in use, plus every open GPU filled to 1.0 or every trial on the
 * slowest GPU, whichever is less. O(G + n). */
static double upper_bound(const vp_t *v) {
    double now = 0, room = 0, want = 0, slowest = INFINITY;
    for (size_t g = 0; g < v->G; g++) {
        size_t nd = v->node_of[g], lg = v->local_of[g];
        double used = v->u->compute_used[g] < 1 ? v->u->compute_used[g] : 1;
        now += used;
        if (tp__place_gpu_open(v->c, v->u, nd, lg)) room += 1 - used;
        double sp = v->c->nodes[nd].gpus[lg].speed > 0 ? v->c->nodes[nd].gpus[lg].speed : 1;
        if (sp < slowest) slowest = sp;
    }
    for (size_t i = 0; i < v->n; i++)
        if (v->t[i].gpus > 0 && v->t[i].gpus <= TP_PLACE_MAX_GPUS)
            want += v->t[i].gpus * v->t[i].compute / slowest;
    return now + (room < want ? room : want);
}

/* Large rounds: the size order through placer_fit's tree, best fit. */
#define LARGE_BUCKETS 1024
/* The band of size s: 0 for the largest (hi), LARGE_BUCKETS - 1 for the
 * smallest. Computed twice rather than stored: a million-entry array costs
 * more in fresh pages than the arithmetic. */
static size_t large_band(double s, double hi, double span) {
    return (size_t)((hi - s) / span * (LARGE_BUCKETS - 1));
}

static void place_large(vp_t *v, size_t *single, size_t m, tp_assign_t *out) {
    /* largest first by a counting sort over LARGE_BUCKETS bands of size (stable,
     * O(m)): a comparison sort of a million trials costs more than the placing */
    double lo = INFINITY, hi = -INFINITY;
    for (size_t j = 0; j < m; j++) {
        double s = v->size[single[j]];
        if (s < lo) lo = s;
        if (s > hi) hi = s;
    }
    size_t count[LARGE_BUCKETS + 1] = {0};
    size_t *sorted = tp__xmalloc((m ? m : 1) * sizeof *sorted);
    double span = hi > lo ? hi - lo : 1;
    for (size_t j = 0; j < m; j++)
        count[large_band(v->size[single[j]], hi, span) + 1]++;
    for (size_t b = 0; b < LARGE_BUCKETS; b++)
        count[b + 1] += count[b];
    for (size_t j = 0; j < m; j++)
        sorted[count[large_band(v->size[single[j]], hi, span)]++] = single[j];
    tp__place_greedy_order(v->c, v->u, v->t, sorted, m, 1, out);
    free(sorted);
}

static int place_vpack(const tp_cluster_t *c, tp_usage_t *u, const tp_demand_t *trials, size_t n,
                       tp_assign_t *out, const tp_place_effort_t *effort, tp_error_t *err) {
    (void)err;
    if (tp__place_plan_round(c, u, trials, n, out, effort)) return 0; /* 6. */
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
    weights(&v);

    /* wide trials (several GPUs or none) largest first; then the single-GPU
     * ones (their out[] is written by whichever path places them) */
    size_t *wide = tp__xmalloc(n1 * sizeof *wide), nw = 0;
    size_t *idx = tp__xmalloc(n1 * sizeof *idx), m = 0;
    for (size_t i = 0; i < n; i++) {
        if (trials[i].gpus == 1) {
            idx[m++] = i;
            continue;
        }
        memset(&out[i], 0, sizeof out[i]);
        if (trials[i].gpus >= 0 && trials[i].gpus <= TP_PLACE_MAX_GPUS) wide[nw++] = i;
    }
    tp__vp_sort(&v, wide, nw, BY_SIZE);

    if ((double)m * (double)v.G > VP_LARGE) {
        for (size_t j = 0; j < nw; j++)
            place_wide(&v, wide[j], &out[wide[j]]);
        place_large(&v, idx, m, out);
    } else if (m + nw) {
        v.where = tp__xmalloc(n1 * sizeof *v.where);
        v.head = tp__xmalloc(G1 * sizeof *v.head);
        v.next = tp__xmalloc(n1 * sizeof *v.next);
        for (size_t i = 0; i < n; i++)
            v.where[i] = NONE;
        for (size_t j = 0; j < m; j++)
            memset(&out[idx[j]], 0, sizeof out[idx[j]]);
        tp_usage_t start, work;
        tp__usage_init(&start, c);
        tp__usage_init(&work, c);
        tp__usage_copy(&start, u, c);
        size_t *all = tp__xmalloc(n1 * sizeof *all), na = 0;
        size_t *best_where = tp__xmalloc(n1 * sizeof *best_where);
        tp_assign_t *wide_out = tp__xcalloc(n1, sizeof *wide_out);
        tp_assign_t *best_wide = tp__xcalloc(n1, sizeof *best_wide);
        double best_occ = -1, best_dur = -1, best_crowd = INFINITY;
        /* wf's answer is a start also when memory is scarcer than compute:
         * spreading in the given order leaves each GPU memory for the rest */
        int memory_binds = v.w[R_MEM] > v.w[R_COMP];
        int cores_differ = cores_per_speed_differ(&v);
        /* an answer this close to the bound is not worth more search */
        double bound = upper_bound(&v) - 1e-4 * (double)v.G;
        /* every construction alone first (cheap: on compute-bound rounds such as
         * SP4/16 one of them reaches the bound), then each again with local search */
        for (int search = 0; search < 2 && best_occ < bound; search++)
            for (size_t r = 0; r < TP_ARRAY_LEN(runs) && best_occ < bound; r++) {
                const run_spec_t *spec = &runs[r];
                if (spec->wide != WIDE_FIRST && !nw && !(spec->build == SEED_WF && memory_binds))
                    continue; /* the same as a wide-first run */
                if (spec->build == FILL_TIGHT && !cores_differ) continue;
                tp__usage_copy(&work, &start, c);
                v.u = &work;
                for (size_t j = 0; j < m; j++)
                    v.where[idx[j]] = NONE;
                na = 0;
                for (size_t j = 0; j < m; j++)
                    all[na++] = idx[j];
                for (size_t j = 0; j < nw; j++)
                    all[na++] = wide[j];
                memset(wide_out, 0, n1 * sizeof *wide_out);
                v.budget = 5000 + 20 * (long long)m + (long long)m * (long long)v.G;
                if (cores_differ) v.budget *= VP_CORES_BUDGET;
                run_once(&v, spec, all, na, idx, m, wide, nw, search ? bound : -INFINITY, wide_out);
                double dur, occ = placed_value(&v, idx, m, &dur);
                for (size_t j = 0; j < nw; j++)
                    if (wide_out[wide[j]].placed) dur += trials[wide[j]].duration_s;
                double crowd = 0; /* sum over GPUs of trials^2: less is more spread */
                for (size_t g = 0; g < v.G; g++)
                    crowd += (double)work.count[g] * work.count[g];
                double tie = VP_TIE * (double)v.G;
                int longer = dur > best_dur * (1 + 1e-9), as_long = dur >= best_dur * (1 - 1e-9);
                if (occ > best_occ + tie ||
                    (occ > best_occ - tie && (longer || (as_long && crowd < best_crowd)))) {
                    best_crowd = crowd;
                    best_occ = occ;
                    best_dur = dur;
                    memcpy(best_where, v.where, n1 * sizeof *best_where);
                    memcpy(best_wide, wide_out, n1 * sizeof *best_wide);
                }
            }
        if (m && c->limits.oversubscribe <= 0 && effort && effort->in_run) {
            /* the makespan runs (5.): kept when their occupancy is within
             * VP_MS_GAP per GPU of the bound and they place more of the long
             * trials' compute (the value with the bonus) */
            makespan_scales(&v);
            tp__usage_copy(&work, &start, c);
            v.u = &work;
            double ub = upper_bound(&v);
            v.bonus = VP_BONUS;
            for (size_t j = 0; j < m; j++)
                v.where[idx[j]] = best_where[idx[j]];
            double best_val = bonus_value(&v, idx, m);
            for (size_t r = 0; r < VP_MS_RUNS && v.dmax > 0; r++) {
                tp__usage_copy(&work, &start, c);
                na = 0;
                for (size_t j = 0; j < m; j++)
                    all[na++] = idx[j];
                for (size_t j = 0; j < nw; j++)
                    all[na++] = wide[j];
                memset(wide_out, 0, n1 * sizeof *wide_out);
                v.budget = 5000 + 20 * (long long)m + (long long)m * (long long)v.G;
                run_once(&v, &runs[r], all, na, idx, m, wide, nw, INFINITY, wide_out);
                double dur, occ = placed_value(&v, idx, m, &dur), val = bonus_value(&v, idx, m);
                if (occ < ub - VP_MS_GAP * (double)v.G || val <= best_val + TP_PLACE_EPS) continue;
                best_val = val;
                memcpy(best_where, v.where, n1 * sizeof *best_where);
                memcpy(best_wide, wide_out, n1 * sizeof *best_wide);
            }
            v.bonus = 0;
        }
        v.u = u;
        for (size_t j = 0; j < nw; j++) {
            out[wide[j]] = best_wide[wide[j]];
            tp__place_commit(c, u, &trials[wide[j]], &out[wide[j]]);
        }
        for (size_t j = 0; j < m; j++) {
            size_t i = idx[j], gi = best_where[i];
            if (gi == NONE) continue;
            out[i] = (tp_assign_t){
                .placed = 1, .node = v.node_of[gi], .ngpus = 1, .gpu = {v.local_of[gi]}};
            tp__place_commit(c, u, &trials[i], &out[i]);
        }
        free(all);
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
