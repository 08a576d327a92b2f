/* The greedy placers: ff, bf, wf, their decreasing variants ffd, bfd, wfd,
 * and one-per-gpu (the baseline). All share one loop (place_greedy) and one
 * structure, a segment tree over the cluster's GPUs (gtree_t), so that
 * choosing a GPU for a single-GPU trial costs O(log G) in the common case:
 *
 * - each leaf holds its GPU's free memory, free compute and its node's free
 *   CPUs (or "closed": unhealthy, count limit reached, shared under
 *   one-per-gpu); each inner node holds the maxima (and, for bf, the minima)
 *   of its subtree;
 * - ff descends left first into subtrees whose maxima could fit the trial;
 * - wf and bf are branch and bound over the same tree: a subtree is skipped
 *   when its bound (max free compute for wf, min for bf, then memory, then
 *   its lowest index) cannot beat the best GPU found so far.
 * - the per-resource maxima come from different leaves, so once GPUs fill up
 *   they let through a trial that fits nowhere; each inner node also keeps
 *   the max free compute among its leaves with at least thr[k] MiB free (16
 *   thresholds a factor 1.5 apart), which prunes those and tightens wf's
 *   bound, and for bf the min free compute among leaves with at least
 *   cstep * j free (32 levels), so that GPUs too full for the trial do not
 *   make every subtree look promising (bf on 1M trials x 10k GPUs went from
 *   3,200 tree nodes visited per placed trial to about 1,100).
 * The maxima are necessary conditions only, so a leaf is always confirmed
 * with tp__fits; the decision is exactly the linear scan's (the tests check
 * it against a slow reference). Multi-GPU and CPU-only trials take a linear
 * pass over the nodes, O(G) each: they are rare.
 *
 * The order of GPUs for wf/bf: by free compute BEFORE placement, which
 * orders GPUs the same as "remaining after" (same trial) without rounding
 * ties, then free memory, then cluster order. */
#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "place/place_internal.h"

typedef enum rule { RULE_FIRST, RULE_BEST, RULE_WORST, RULE_WHOLE } rule_t;

#define SLACK 1e-6 /* pruning slack: never prunes a GPU that tp__fits accepts */
#define NTHR 16    /* memory thresholds of the joint bound, a factor 1.5 apart */
#define NCOMP 32   /* compute levels of bf's bound */
/* GPUs from which the joint bound is kept: below, the plain maxima prune
 * enough, and keeping NTHR bounds per tree node costs more than it saves
 * (wfd on SP4 over 16 GPUs decided 7% slower with it). */
#define JOINT_MIN_GPUS 128

typedef struct gtree {
    const tp_cluster_t *c;
    const tp_usage_t *u;
    rule_t rule;
    size_t size;     /* leaves, a power of two >= G */
    int64_t *mem;    /* max free memory over open leaves; -1 when none */
    int64_t *minmem; /* min free memory over open leaves; INT64_MAX when none */
    double *comp;    /* max free compute; -INFINITY when none */
    int *cpus;       /* max free CPUs of the leaves' nodes; -1 when none */
    /* Max free compute over the open leaves with at least thr[k] MiB free,
     * NTHR per tree node (cmem[i * NTHR + k]); -INFINITY when none. The
     * plain maxima above come from different leaves, so once GPUs fill up a
     * trial that fits nowhere passes them in most subtrees; this joint bound
     * prunes those. NULL below JOINT_MIN_GPUS GPUs (k is then NTHR). */
    double *cmem;
    int64_t thr[NTHR]; /* decreasing */
    size_t k;          /* the current trial's threshold: thr[k] <= its memory; NTHR if none */
    /* bf only: min free compute over the open leaves with at least
     * cstep * j free, NCOMP per tree node (cmin[i * NCOMP + j]); INFINITY
     * when none. Most leaves below a trial's demand cannot take it, and with
     * them in the minimum bf's bound pruned nothing. */
    double *cmin;
    double cstep;
    size_t j;         /* the current trial's level: cstep * j <= its compute - SLACK */
    size_t *node_of;  /* per GPU: its node */
    size_t *local_of; /* per GPU: its index within the node */
} gtree_t;

static void leaf_close(gtree_t *t, size_t i) {
    t->mem[i] = -1;
    t->minmem[i] = INT64_MAX;
    t->comp[i] = -INFINITY;
    t->cpus[i] = -1;
    if (t->cmem)
        for (size_t k = 0; k < NTHR; k++)
            t->cmem[i * NTHR + k] = -INFINITY;
    if (t->cmin)
        for (size_t j = 0; j < NCOMP; j++)
            t->cmin[i * NCOMP + j] = INFINITY;
}

static void leaf_set(gtree_t *t, size_t gi) {
    size_t i = t->size + gi, n = t->node_of[gi], g = t->local_of[gi];
    int open =
        tp__place_gpu_open(t->c, t->u, n, g) && (t->rule != RULE_WHOLE || t->u->count[gi] == 0);
    if (open) {
        t->mem[i] = t->minmem[i] = (int64_t)tp__place_mem_free(t->c, t->u, n, g);
        /* Free compute in reference-GPU units (free share x speed), the
         * units of a demand, so subtree bounds compare with demands as is. */
        double speed = t->c->nodes[n].gpus[g].speed > 0 ? t->c->nodes[n].gpus[g].speed : 1.0;
        t->comp[i] = tp__place_comp_free(t->c, t->u, n, g) * speed;
        t->cpus[i] = t->c->nodes[n].cpus - t->u->cpus_used[n];
        if (t->cmem)
            for (size_t k = 0; k < NTHR; k++)
                t->cmem[i * NTHR + k] = t->mem[i] >= t->thr[k] ? t->comp[i] : -INFINITY;
        if (t->cmin)
            for (size_t j = 0; j < NCOMP; j++)
                t->cmin[i * NCOMP + j] = t->comp[i] >= t->cstep * (double)j ? t->comp[i] : INFINITY;
    } else {
        leaf_close(t, i);
    }
}

static void pull(gtree_t *t, size_t i) {
    size_t l = 2 * i, r = l + 1;
    t->mem[i] = t->mem[l] > t->mem[r] ? t->mem[l] : t->mem[r];
    t->minmem[i] = t->minmem[l] < t->minmem[r] ? t->minmem[l] : t->minmem[r];
    t->comp[i] = t->comp[l] > t->comp[r] ? t->comp[l] : t->comp[r];
    t->cpus[i] = t->cpus[l] > t->cpus[r] ? t->cpus[l] : t->cpus[r];
    if (t->cmem) {
        double *ci = &t->cmem[i * NTHR], *cl = &t->cmem[l * NTHR], *cr = &t->cmem[r * NTHR];
        for (size_t k = 0; k < NTHR; k++)
            ci[k] = cl[k] > cr[k] ? cl[k] : cr[k];
    }
    if (t->cmin) {
        double *mi = &t->cmin[i * NCOMP], *ml = &t->cmin[l * NCOMP], *mr = &t->cmin[r * NCOMP];
        for (size_t j = 0; j < NCOMP; j++)
            mi[j] = ml[j] < mr[j] ? ml[j] : mr[j];
    }
}

/* Only the node's free CPUs changed at GPU gi: its leaf and the CPU maxima
 * above it. */
static void update_cpus(gtree_t *t, size_t gi) {
    size_t i = t->size + gi;
    if (t->mem[i] < 0) return; /* closed */
    t->cpus[i] = t->c->nodes[t->node_of[gi]].cpus - t->u->cpus_used[t->node_of[gi]];
    for (i /= 2; i >= 1; i /= 2) {
        int c = t->cpus[2 * i] > t->cpus[2 * i + 1] ? t->cpus[2 * i] : t->cpus[2 * i + 1];
        if (c == t->cpus[i]) break;
        t->cpus[i] = c;
    }
}

static void update(gtree_t *t, size_t gi) {
    leaf_set(t, gi);
    for (size_t i = (t->size + gi) / 2; i >= 1; i /= 2)
        pull(t, i);
}

/* O(G). */
static void gtree_init(gtree_t *t, const tp_cluster_t *c, const tp_usage_t *u, rule_t rule) {
    memset(t, 0, sizeof *t);
    t->c = c;
    t->u = u;
    t->rule = rule;
    t->size = 1;
    while (t->size < u->ngpus)
        t->size *= 2;
    size_t m = 2 * t->size;
    t->mem = tp__xmalloc(m * sizeof *t->mem);
    t->minmem = tp__xmalloc(m * sizeof *t->minmem);
    t->comp = tp__xmalloc(m * sizeof *t->comp);
    t->cpus = tp__xmalloc(m * sizeof *t->cpus);
    if (u->ngpus >= JOINT_MIN_GPUS) t->cmem = tp__xmalloc(m * NTHR * sizeof *t->cmem);
    if (rule == RULE_BEST) t->cmin = tp__xmalloc(m * NCOMP * sizeof *t->cmin);
    t->node_of = tp__xmalloc((u->ngpus ? u->ngpus : 1) * sizeof *t->node_of);
    t->local_of = tp__xmalloc((u->ngpus ? u->ngpus : 1) * sizeof *t->local_of);
    for (size_t n = 0; n < c->nnodes; n++)
        for (size_t g = 0; g < c->nodes[n].ngpus; g++) {
            t->node_of[u->gpu_base[n] + g] = n;
            t->local_of[u->gpu_base[n] + g] = g;
        }
    int64_t top = 1;
    for (size_t n = 0; n < c->nnodes; n++)
        for (size_t g = 0; g < c->nodes[n].ngpus; g++)
            if ((int64_t)c->nodes[n].gpus[g].memory_mib > top)
                top = (int64_t)c->nodes[n].gpus[g].memory_mib;
    for (size_t k = 0; k < NTHR && t->cmem; k++)
        t->thr[k] = (int64_t)((double)top / pow(1.5, (double)k));
    double fastest = 1; /* free compute in reference units is at most (1 + over) x speed */
    for (size_t n = 0; n < c->nnodes; n++)
        for (size_t g = 0; g < c->nodes[n].ngpus; g++)
            if (c->nodes[n].gpus[g].speed > fastest) fastest = c->nodes[n].gpus[g].speed;
    double most = 1.0 + c->limits.oversubscribe; /* the largest capacity, served or not */
    for (size_t n = 0; n < c->nnodes; n++)
        if (tp__place_capacity(c, n, INT_MAX) > most) most = tp__place_capacity(c, n, INT_MAX);
    t->cstep = most * fastest / NCOMP;
    for (size_t i = t->size; i < m; i++) {
        size_t gi = i - t->size;
        if (gi < u->ngpus)
            leaf_set(t, gi);
        else
            leaf_close(t, i);
    }
    for (size_t i = t->size - 1; i >= 1; i--)
        pull(t, i);
}

static void gtree_free(gtree_t *t) {
    free(t->mem);
    free(t->minmem);
    free(t->comp);
    free(t->cpus);
    free(t->cmem);
    free(t->cmin);
    free(t->node_of);
    free(t->local_of);
}

/* Whether some leaf of subtree i could take d (a necessary condition). */
static int may_fit(const gtree_t *t, size_t i, const tp_demand_t *d) {
    return t->mem[i] >= (int64_t)d->memory_mib && t->comp[i] + SLACK >= d->compute &&
           t->cpus[i] >= d->cpus &&
           (t->k == NTHR || t->cmem[i * NTHR + t->k] + SLACK >= d->compute);
}

/* The largest threshold at or below d's memory into t->k (NTHR if none). */
static void set_query(gtree_t *t, const tp_demand_t *d) {
    t->k = t->cmem ? 0 : NTHR;
    while (t->k < NTHR && t->thr[t->k] > (int64_t)d->memory_mib)
        t->k++;
    double lv = (d->compute - SLACK) / t->cstep;
    t->j = lv <= 0 ? 0 : lv >= NCOMP - 1 ? NCOMP - 1 : (size_t)lv;
    while (t->j > 0 && t->cstep * (double)t->j > d->compute - SLACK)
        t->j--; /* rounding */
}

static int leaf_fits(const gtree_t *t, size_t gi, const tp_demand_t *d) {
    return t->mem[t->size + gi] >= 0 && tp__fits(t->c, t->u, t->node_of[gi], t->local_of[gi], d);
}

/* ff: the leftmost fitting leaf of subtree i spanning GPUs [lo, lo+span). */
static size_t first_fit(const gtree_t *t, size_t i, size_t lo, size_t span, const tp_demand_t *d) {
    if (!may_fit(t, i, d)) return SIZE_MAX;
    if (i >= t->size) return lo < t->u->ngpus && leaf_fits(t, lo, d) ? lo : SIZE_MAX;
    size_t half = span / 2, r = first_fit(t, 2 * i, lo, half, d);
    return r != SIZE_MAX ? r : first_fit(t, 2 * i + 1, lo + half, half, d);
}

typedef struct best {
    size_t gi;   /* SIZE_MAX: none yet */
    double comp; /* its free compute */
    int64_t mem; /* its free memory */
} best_t;

/* Whether key (comp, mem, idx) is better than b's for the rule. */
static int better(rule_t rule, double comp, int64_t mem, size_t idx, const best_t *b) {
    if (b->gi == SIZE_MAX) return 1;
    if (comp != b->comp) return rule == RULE_WORST ? comp > b->comp : comp < b->comp;
    if (mem != b->mem) return rule == RULE_WORST ? mem > b->mem : mem < b->mem;
    return idx < b->gi;
}

size_t tp__place_wf_gpu(const tp_cluster_t *c, const tp_usage_t *u, const tp_demand_t *d) {
    best_t b = {SIZE_MAX, 0, 0};
    for (size_t n = 0; n < c->nnodes; n++)
        for (size_t g = 0; g < c->nodes[n].ngpus; g++) {
            if (!tp__fits(c, u, n, g, d)) continue;
            size_t gi = u->gpu_base[n] + g;
            double speed = c->nodes[n].gpus[g].speed > 0 ? c->nodes[n].gpus[g].speed : 1.0;
            double comp = tp__place_comp_free(c, u, n, g) * speed; /* as leaf_set keys it */
            int64_t mem = (int64_t)tp__place_mem_free(c, u, n, g);
            if (better(RULE_WORST, comp, mem, gi, &b)) b = (best_t){gi, comp, mem};
        }
    return b.gi;
}

/* The subtree's bound for the rule: no leaf in it has a better key. */
static void bound(const gtree_t *t, size_t i, const tp_demand_t *d, double *comp, int64_t *mem) {
    if (t->rule == RULE_WORST) {
        /* a leaf that fits has thr[k] MiB free at least */
        double cm = t->k == NTHR ? t->comp[i] : t->cmem[i * NTHR + t->k];
        *comp = cm < t->comp[i] ? cm : t->comp[i];
        *mem = t->mem[i];
    } else {
        /* a leaf that fits has cstep * j free compute at least */
        double lo = t->cmin[i * NCOMP + t->j];
        *comp = lo > d->compute - SLACK ? lo : d->compute - SLACK;
        *mem = t->minmem[i] > (int64_t)d->memory_mib ? t->minmem[i] : (int64_t)d->memory_mib;
    }
}

static void branch_bound(const gtree_t *t, size_t i, size_t lo, size_t span, const tp_demand_t *d,
                         best_t *b) {
    if (!may_fit(t, i, d)) return;
    double bc;
    int64_t bm;
    bound(t, i, d, &bc, &bm);
    if (!better(t->rule, bc, bm, lo, b)) return;
    if (i >= t->size) {
        if (lo < t->u->ngpus && leaf_fits(t, lo, d)) {
            *b = (best_t){lo, t->comp[i], t->mem[i]};
        }
        return;
    }
    size_t half = span / 2, l = 2 * i, r = l + 1;
    double lc, rc;
    int64_t lm, rm;
    bound(t, l, d, &lc, &lm);
    bound(t, r, d, &rc, &rm);
    best_t left = {lo, lc, lm}; /* the more promising child first */
    if (better(t->rule, rc, rm, lo + half, &left)) {
        branch_bound(t, r, lo + half, half, d, b);
        branch_bound(t, l, lo, half, d, b);
    } else {
        branch_bound(t, l, lo, half, d, b);
        branch_bound(t, r, lo + half, half, d, b);
    }
}

/* A trial wanting k > 1 GPUs, or none: a linear pass over the nodes. For k
 * GPUs, each node's fitting GPUs are ranked by the rule and its k best taken;
 * ff (and one-per-gpu) take the first node with k, bf the node whose k have
 * the least free compute in sum, wf the most (ties: node order). CPU-only
 * trials: ff the first node with the CPUs, bf the fewest CPUs left, wf the
 * most. O(G log G) worst case. */
typedef struct cand {
    size_t g;    /* GPU within the node */
    double comp; /* free compute */
    int64_t mem; /* free memory */
} cand_t;

static int cand_cmp(const void *a, const void *b, void *rule) {
    const cand_t *x = a, *y = b;
    best_t yb = {y->g, y->comp, y->mem};
    if (x->g == y->g) return 0;
    return better(*(rule_t *)rule, x->comp, x->mem, x->g, &yb) ? -1 : 1;
}

static int place_wide(const tp_cluster_t *c, tp_usage_t *u, const tp_demand_t *d, rule_t rule,
                      tp_assign_t *a) {
    size_t k = (size_t)d->gpus;
    int found = 0;
    double best_score = 0;
    cand_t *cand = NULL;
    size_t cap = 0;
    for (size_t n = 0; n < c->nnodes && !(found && (rule == RULE_FIRST || rule == RULE_WHOLE));
         n++) {
        if (u->cpus_used[n] + d->cpus > c->nodes[n].cpus) continue;
        if (k == 0) {
            double score = c->nodes[n].cpus - u->cpus_used[n];
            if (found && !(rule == RULE_BEST ? score < best_score : score > best_score)) continue;
            found = 1;
            best_score = score;
            *a = (tp_assign_t){.placed = 1, .node = n, .ngpus = 0};
            continue;
        }
        const tp_node_t *node = &c->nodes[n];
        if (node->ngpus < k) continue;
        if (cap < node->ngpus) {
            cap = node->ngpus;
            cand = tp__xrealloc(cand, cap * sizeof *cand);
        }
        size_t m = 0;
        for (size_t g = 0; g < node->ngpus; g++) {
            size_t gi = u->gpu_base[n] + g;
            if (rule == RULE_WHOLE && u->count[gi] != 0) continue;
            if (!tp__fits(c, u, n, g, d)) continue;
            cand[m++] = (cand_t){g, tp__place_comp_free(c, u, n, g),
                                 (int64_t)tp__place_mem_free(c, u, n, g)};
        }
        if (m < k) continue;
        if (rule == RULE_BEST || rule == RULE_WORST) {
            qsort_r(cand, m, sizeof *cand, cand_cmp, &rule);
        }
        double score = 0;
        for (size_t j = 0; j < k; j++)
            score += cand[j].comp;
        if (found && (rule == RULE_FIRST || rule == RULE_WHOLE ||
                      !(rule == RULE_BEST ? score < best_score : score > best_score)))
            continue;
        found = 1;
        best_score = score;
        *a = (tp_assign_t){.placed = 1, .node = n, .ngpus = k};
        for (size_t j = 0; j < k; j++)
            a->gpu[j] = cand[j].g;
    }
    free(cand);
    return found;
}

/* The shared loop: trials in `order`, each to the GPU the rule picks, usage
 * and tree updated after each. O(m log G) for single-GPU trials. */
static void place_in_order(const tp_cluster_t *c, tp_usage_t *u, const tp_demand_t *trials,
                           const size_t *order, size_t m, tp_assign_t *out, rule_t rule) {
    gtree_t t;
    gtree_init(&t, c, u, rule);
    for (size_t j = 0; j < m; j++) {
        size_t i = order[j];
        const tp_demand_t *d = &trials[i];
        tp_assign_t *a = &out[i];
        memset(a, 0, sizeof *a);
        if (d->gpus < 0 || d->gpus > TP_PLACE_MAX_GPUS) continue;
        if (d->gpus == 1) {
            size_t gi;
            set_query(&t, d);
            if (rule == RULE_FIRST || rule == RULE_WHOLE) {
                gi = first_fit(&t, 1, 0, t.size, d);
            } else {
                best_t b = {SIZE_MAX, 0, 0};
                branch_bound(&t, 1, 0, t.size, d, &b);
                gi = b.gi;
            }
            if (gi == SIZE_MAX) continue;
            *a = (tp_assign_t){.placed = 1, .node = t.node_of[gi], .ngpus = 1};
            a->gpu[0] = t.local_of[gi];
        } else if (!place_wide(c, u, d, rule, a)) {
            continue;
        }
        tp__place_commit(c, u, d, a);
        /* the node's CPUs changed: every GPU leaf of the node; else the GPUs taken */
        size_t base = u->gpu_base[a->node];
        for (size_t k = 0; k < a->ngpus; k++)
            update(&t, base + a->gpu[k]);
        if (d->cpus != 0)
            for (size_t g = 0; g < c->nodes[a->node].ngpus; g++)
                update_cpus(&t, base + g);
    }
    gtree_free(&t);
}

void tp__place_greedy_order(const tp_cluster_t *c, tp_usage_t *u, const tp_demand_t *trials,
                            const size_t *order, size_t m, int best_fit, tp_assign_t *out) {
    place_in_order(c, u, trials, order, m, out, best_fit ? RULE_BEST : RULE_WORST);
}

/* Trials in their order (or longest first) through place_in_order. */
static int place_greedy(const tp_cluster_t *c, tp_usage_t *u, const tp_demand_t *trials, size_t n,
                        tp_assign_t *out, rule_t rule, int decreasing, tp_error_t *err) {
    (void)err;
    size_t *order = tp__place_order(trials, n, decreasing);
    place_in_order(c, u, trials, order, n, out, rule);
    free(order);
    return 0;
}

#define GREEDY(fn, rule, decreasing)                                                               \
    static int fn(const tp_cluster_t *c, tp_usage_t *u, const tp_demand_t *trials, size_t n,       \
                  tp_assign_t *out, const tp_place_effort_t *effort, tp_error_t *err) {            \
        (void)effort;                                                                              \
        return place_greedy(c, u, trials, n, out, rule, decreasing, err);                          \
    }
GREEDY(place_ff, RULE_FIRST, 0)
GREEDY(place_ffd, RULE_FIRST, 1)
GREEDY(place_bf, RULE_BEST, 0)
GREEDY(place_bfd, RULE_BEST, 1)
GREEDY(place_wf, RULE_WORST, 0)
GREEDY(place_wfd, RULE_WORST, 1)
GREEDY(place_whole, RULE_WHOLE, 0)

const tp_placer_ops_t tp__placer_one_per_gpu = {
    .name = "one-per-gpu",
    .summary = "baseline: each trial takes whole GPUs, the first free ones",
    .place = place_whole,
};
const tp_placer_ops_t tp__placer_ff = {
    .name = "ff", .summary = "first fit: the first GPU where the trial fits", .place = place_ff};
const tp_placer_ops_t tp__placer_bf = {
    .name = "bf",
    .summary = "best fit: the fitting GPU left with the least free compute",
    .place = place_bf};
const tp_placer_ops_t tp__placer_wf = {
    .name = "wf",
    .summary = "worst fit: the fitting GPU left with the most free compute",
    .place = place_wf};
/* The decreasing variants sort trials by expected duration, longest first
 * (stable), as HyperSack does: long trials start together and short ones
 * fill in beside them, so long and short overlap instead of queueing. */
const tp_placer_ops_t tp__placer_ffd = {
    .name = "ffd", .summary = "first fit, longest trials first", .place = place_ffd};
const tp_placer_ops_t tp__placer_bfd = {
    .name = "bfd", .summary = "best fit, longest trials first", .place = place_bfd};
const tp_placer_ops_t tp__placer_wfd = {.name = "wfd",
                                        .summary =
                                            "worst fit, longest trials first (HyperSack's choice)",
                                        .place = place_wfd};
