/* plan: vpack's plan in a run's rounds (docs/gpus.md, step 6).
 *
 * A round of a run decides only which trials start now, but the makespan
 * is set by every later round. When the caller says what runs now
 * (tp_place_effort_t.running) and keeps a plan across rounds
 * (tp_place_effort_t.plan), vpack decides by planning: a plan is an order
 * of the pending trials; its forward model starts, at now and at every
 * later end, the pending trials in that order on the fitting GPU left with
 * the most free compute (wf's rule, exactly), and runs them by the
 * contention model of docs/simulator.md (a trial's pace host + m gpu /
 * speed, m = 1 + overhead (k - 1) for k trials on the GPU, all slowed by
 * 1 / D when their busy shares D pass 1), host and gpu seconds from its
 * demand (duration x (1 - compute), duration x compute). The plan's value
 * is its makespan.
 *
 * The first plan is the longest first order: wfd's own, so it is worth
 * exactly what wfd does from here. Each round starts from the last round's
 * best order (the caller keeps it: the ranks by trial id), new trials after
 * it longest first, and keeps a random move when the makespan does not grow
 * and, at an equal makespan, the GPUs' last ends sum no later, for
 * PLAN_EVALS plans at most (fewer when the queue is long: PLAN_WORK), each
 * stopped once it passes the best makespan. A move swaps two CLASSES of
 * trials (trials of identical demand): the j-th of one class in the order
 * trades places with the j-th of the other, for every j up to the smaller
 * class (with distinct demands, a swap of two trials). A queue of many
 * trials of each demand on identical GPUs (SP4: 16 learning rates of each
 * model and batch on 16 GPUs) runs the same schedule on every GPU; a swap
 * of two trials betters one GPU, which shortens nothing until every GPU has
 * it, where a swap of two classes changes every GPU's schedule at once (SP4
 * on 16 GPUs: 1.091 of the bound against 1.116 by swaps of two trials). A
 * round on idle GPUs whose trials all are new (none has a rank: the plan's
 * first round, or a new batch after the run drained) searches harder, as it
 * sets the order the later rounds start from: PLAN_FIRST_CHAINS searches
 * from the longest first order, each of PLAN_FIRST_EVALS times a round's
 * plans, the best kept (SP4: 58 ms on 4 GPUs, 102 ms on 16). The round's
 * decision is the best plan's starts at now.
 * With a model equal to the world's (the simulator's), a round's best plan
 * is never worse than the last one's continuation, so the run's makespan is
 * never worse than the first plan's, wfd's. Pure: the moves come from a
 * generator seeded by the round's trials.
 *
 * Planned: single-GPU trials with a duration and an id below PLAN_MAX_ID,
 * every running one single-GPU too, and rounds of at most PLAN_MAX_WORK
 * trials x GPUs; otherwise the caller's round goes on without a plan. A
 * plan costs O(events x (trials + GPUs)), each start O(GPUs). */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "place/place_internal.h"

#define PLAN_EVALS 30       /* plans tried per round at most */
#define PLAN_FIRST_CHAINS 8 /* the plan's first round: searches from the first plan */
#define PLAN_FIRST_EVALS 5  /* each of a round's plans this many times */
#define PLAN_WORK                                                                                  \
    2e6                       /* trials x (trials + running) x plans per round at most (a round    \
                                 of new trials on idle GPUs: PLAN_FIRST_CHAINS x                   \
                                 PLAN_FIRST_EVALS times it) */
#define PLAN_MAX_WORK 20000.0 /* pending x GPUs above which a round is not planned */
#define PLAN_MAX_ID (INT64_C(1) << 24) /* trial ids the plan's ranks cover (8 bytes each) */

typedef struct item {
    size_t gi;        /* its GPU, once started */
    double host, gpu; /* seconds at speed 1, alone */
    double p;         /* progress in [0, 1] */
    int state;        /* 0 waiting, 1 running, 2 ended */
    const tp_demand_t *d;
} item_t;

typedef struct planner {
    const tp_cluster_t *c;
    const tp_place_effort_t *e;
    const tp_usage_t *u0;     /* now */
    tp_usage_t u;             /* the plan's */
    size_t R, n, G;           /* running, pending, GPUs */
    item_t *base, *w;         /* R running, then n pending */
    double *speed, *rate, *D; /* per GPU, per trial, per GPU */
    size_t *node_of;          /* per GPU */
    int *k;                   /* per GPU: the model's trials there */
    size_t *started;          /* per pending: its GPU at now in the plan valued, or SIZE_MAX */
    size_t *act, nact;        /* the items running in the plan valued */
    double ends;              /* the sum of the GPUs' last ends in the plan valued */
    double *last;             /* per GPU: its last end in the plan valued */
} planner_t;

/* Start, in `order`, the waiting trials that fit, each where wf puts it.
 * Those larger in compute, memory or cores than any GPU or node has free
 * are passed over at once: they fit nowhere. */
static void start_fitting(planner_t *P, const size_t *order, int at_now) {
    double most = 0;  /* the most free compute of an open GPU, in reference units */
    uint64_t mem = 0; /* the most free memory of one */
    int cpus = 0;     /* the most free cores of a node */
    for (size_t o = 0, stale = 1; o < P->n; o++) {
        if (stale) {
            most = 0, mem = 0, cpus = 0, stale = 0;
            for (size_t gi = 0; gi < P->G; gi++) {
                size_t nd = P->node_of[gi], g = gi - P->u.gpu_base[nd];
                if (!tp__place_gpu_open(P->c, &P->u, nd, g)) continue;
                double fr = tp__place_comp_free(P->c, &P->u, nd, g) * P->speed[gi];
                uint64_t mf = tp__place_mem_free(P->c, &P->u, nd, g);
                int cf = P->c->nodes[nd].cpus - P->u.cpus_used[nd];
                if (fr > most) most = fr;
                if (mf > mem) mem = mf;
                if (cf > cpus) cpus = cf;
            }
            most = most * (1 + 1e-9) + 1e-9;
        }
        item_t *t = &P->w[P->R + order[o]];
        if (t->state || t->d->compute > most || t->d->memory_mib > mem || t->d->cpus > cpus)
            continue;
        size_t gi = tp__place_wf_gpu(P->c, &P->u, t->d);
        if (gi == SIZE_MAX) continue;
        size_t nd = P->node_of[gi];
        tp_assign_t a = {.placed = 1, .node = nd, .ngpus = 1, .gpu = {gi - P->u.gpu_base[nd]}};
        tp__place_commit(P->c, &P->u, t->d, &a);
        t->state = 1;
        t->gi = gi;
        P->act[P->nact++] = P->R + order[o];
        if (at_now) P->started[order[o]] = gi;
        stale = 1;
    }
}

/* Give back what the plan's trial t held. */
static void release(planner_t *P, const item_t *t) {
    size_t nd = P->node_of[t->gi];
    tp_assign_t a = {.placed = 1, .node = nd, .ngpus = 1, .gpu = {t->gi - P->u.gpu_base[nd]}};
    tp__place_release(P->c, &P->u, t->d, &a);
}

/* The makespan (from now) of the plan `order`; once past `cutoff` it stops
 * and returns a value above it (such a plan cannot be kept). */
static double value(planner_t *P, const size_t *order, double cutoff) {
    size_t N = P->R + P->n;
    memcpy(P->w, P->base, N * sizeof *P->w);
    tp__usage_copy(&P->u, P->u0, P->c);
    P->nact = 0;
    P->ends = 0;
    memset(P->last, 0, P->G * sizeof *P->last);
    for (size_t i = 0; i < P->R; i++)
        P->act[P->nact++] = i;
    for (size_t i = 0; i < P->n; i++)
        P->started[i] = SIZE_MAX;
    start_fitting(P, order, 1);
    double now = 0, overhead = P->e->mps_overhead > 0 ? P->e->mps_overhead : 0;
    for (;;) { /* the model's paces: k trials and busy share D per GPU */
        double dt = INFINITY;
        for (size_t a = 0; a < P->nact; a++)
            P->k[P->w[P->act[a]].gi] = 0, P->D[P->w[P->act[a]].gi] = 0;
        for (size_t a = 0; a < P->nact; a++)
            P->k[P->w[P->act[a]].gi]++;
        for (size_t a = 0; a < P->nact; a++) {
            size_t i = P->act[a];
            item_t *t = &P->w[i];
            double m = 1.0 + overhead * (P->k[t->gi] - 1);
            double gw = m * t->gpu / P->speed[t->gi], T = t->host + gw;
            P->rate[i] = T > 0 ? 1.0 / T : INFINITY;
            P->D[t->gi] += T > 0 ? gw / T : 0;
        }
        for (size_t a = 0; a < P->nact; a++) {
            size_t i = P->act[a];
            item_t *t = &P->w[i];
            if (P->D[t->gi] > 1) P->rate[i] /= P->D[t->gi];
            double left = isfinite(P->rate[i]) ? (1 - t->p) / P->rate[i] : 0;
            if (left < dt) dt = left;
        }
        if (!isfinite(dt)) { /* nothing runs: the plan is over */
            for (size_t g = 0; g < P->G; g++)
                P->ends += P->last[g];
            return now;
        }
        now += dt;
        if (now > cutoff) return now;
        int ended = 0;
        for (size_t a = 0; a < P->nact;) {
            size_t i = P->act[a];
            item_t *t = &P->w[i];
            t->p = isfinite(P->rate[i]) ? t->p + P->rate[i] * dt : 1;
            if (t->p >= 1 - 1e-9) {
                t->state = 2;
                release(P, t);
                if (now > P->last[t->gi]) P->last[t->gi] = now;
                ended = 1;
                P->act[a] = P->act[--P->nact];
            } else {
                a++;
            }
        }
        if (ended) start_fitting(P, order, 0);
    }
}

/* A trial of `seconds` at compute share c: its host and GPU parts. */
static item_t item_of(const tp_demand_t *d, double seconds) {
    double c = d->compute < 0 ? 0 : d->compute > 1 ? 1 : d->compute;
    return (item_t){.host = seconds * (1 - c), .gpu = seconds * c, .d = d};
}

static uint64_t next_random(uint64_t *s) {
    uint64_t z = (*s += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
}

/* Demands the same in every respect the model and the fit see. */
static int cmp_demand(const tp_demand_t *a, const tp_demand_t *b) {
    if (a->compute != b->compute) return a->compute < b->compute ? -1 : 1;
    if (a->memory_mib != b->memory_mib) return a->memory_mib < b->memory_mib ? -1 : 1;
    if (a->duration_s != b->duration_s) return a->duration_s < b->duration_s ? -1 : 1;
    return (a->cpus > b->cpus) - (a->cpus < b->cpus);
}

static int cmp_by_demand(const void *x, const void *y, void *ctx) {
    const tp_demand_t *t = ctx;
    return cmp_demand(&t[*(const size_t *)x], &t[*(const size_t *)y]);
}

/* Per trial: its class, the same for trials of identical demand. O(n log n). */
static size_t *demand_classes(const tp_demand_t *trials, size_t n) {
    size_t *idx = tp__xcalloc(n, sizeof *idx), *cls = tp__xcalloc(n, sizeof *cls);
    for (size_t i = 0; i < n; i++)
        idx[i] = i;
    qsort_r(idx, n, sizeof *idx, cmp_by_demand, (void *)trials);
    for (size_t i = 0, c = 0; i < n; i++) {
        if (i && cmp_demand(&trials[idx[i - 1]], &trials[idx[i]]) != 0) c++;
        cls[idx[i]] = c;
    }
    free(idx);
    return cls;
}

/* The move: in order[0..n), the j-th trial of class ca trades places with
 * the j-th of class cb, j below the smaller class. pa, pb: n each, scratch.
 * O(n). */
static void swap_classes(size_t *order, size_t n, const size_t *cls, size_t ca, size_t cb,
                         size_t *pa, size_t *pb) {
    size_t na = 0, nb = 0;
    for (size_t o = 0; o < n; o++) {
        if (cls[order[o]] == ca)
            pa[na++] = o;
        else if (cls[order[o]] == cb)
            pb[nb++] = o;
    }
    for (size_t j = 0; j < na && j < nb; j++) {
        size_t t = order[pa[j]];
        order[pa[j]] = order[pb[j]];
        order[pb[j]] = t;
    }
}

/* Search from order (worth *bm, *bends): nevals random class swaps, each
 * kept when the makespan does not grow and, at an equal one, the ends' sum
 * does not either; the best into best, *bm, *bends. O(nevals x a plan). */
static void search_class_swaps(planner_t *P, size_t *order, size_t *best, double *bm, double *bends,
                               int nevals, const size_t *cls, uint64_t *seed, size_t *pa,
                               size_t *pb) {
    size_t n = P->n;
    memcpy(best, order, n * sizeof *best);
    for (int it = 0; it < nevals && n > 1; it++) {
        size_t a = (size_t)(next_random(seed) % n), b = (size_t)(next_random(seed) % n);
        if (cls[order[a]] == cls[order[b]]) continue;
        swap_classes(order, n, cls, cls[order[a]], cls[order[b]], pa, pb);
        double m = value(P, order, *bm * (1 + 1e-12));
        if (m < *bm * (1 - 1e-12) || (m <= *bm * (1 + 1e-12) && P->ends <= *bends)) {
            *bm = m, *bends = P->ends;
            memcpy(best, order, n * sizeof *best);
        } else {
            memcpy(order, best, n * sizeof *order);
        }
    }
}

static double rank_of(const tp_place_plan_t *pl, int64_t id) {
    return id >= 0 && (size_t)id < pl->cap ? pl->rank[id] : 0;
}

int tp__place_plan_round(const tp_cluster_t *c, tp_usage_t *u, const tp_demand_t *trials, size_t n,
                         tp_assign_t *out, const tp_place_effort_t *e) {
    if (!e || !e->in_run || !e->plan || !n) return 0;
    if ((double)n * (double)u->ngpus > PLAN_MAX_WORK) return 0;
    for (size_t i = 0; i < n; i++)
        if (trials[i].gpus != 1 || !(trials[i].duration_s > 0) || trials[i].id < 0 ||
            trials[i].id >= PLAN_MAX_ID)
            return 0;
    for (size_t i = 0; i < e->nrunning; i++)
        if (e->running[i].d.gpus != 1 || e->running[i].gpu >= u->ngpus) return 0;
    planner_t P = {.c = c, .e = e, .u0 = u, .R = e->nrunning, .n = n, .G = u->ngpus};
    size_t N = P.R + n;
    P.base = tp__xcalloc(N, sizeof *P.base);
    P.w = tp__xcalloc(N, sizeof *P.w);
    P.rate = tp__xcalloc(N, sizeof *P.rate);
    P.speed = tp__xcalloc(P.G ? P.G : 1, sizeof *P.speed);
    P.D = tp__xcalloc(P.G ? P.G : 1, sizeof *P.D);
    P.k = tp__xcalloc(P.G ? P.G : 1, sizeof *P.k);
    P.started = tp__xcalloc(n, sizeof *P.started);
    P.act = tp__xcalloc(N, sizeof *P.act);
    P.node_of = tp__xcalloc(P.G ? P.G : 1, sizeof *P.node_of);
    P.last = tp__xcalloc(P.G ? P.G : 1, sizeof *P.last);
    for (size_t nd = 0; nd < c->nnodes; nd++)
        for (size_t g = 0; g < c->nodes[nd].ngpus; g++) {
            double s = c->nodes[nd].gpus[g].speed;
            P.speed[u->gpu_base[nd] + g] = s > 0 ? s : 1.0;
            P.node_of[u->gpu_base[nd] + g] = nd;
        }
    for (size_t i = 0; i < P.R; i++) {
        const tp_place_running_t *r = &e->running[i];
        double left = r->left < 0 ? 0 : r->left > 1 ? 1 : r->left;
        P.base[i] = item_of(&r->d, r->d.duration_s > 0 ? r->d.duration_s * left : 0);
        P.base[i].gi = r->gpu, P.base[i].state = 1;
    }
    for (size_t i = 0; i < n; i++)
        P.base[P.R + i] = item_of(&trials[i], trials[i].duration_s);
    tp__usage_init(&P.u, c);

    /* the last plan's order, then the new trials longest first (stable) */
    size_t *order = tp__xcalloc(n, sizeof *order), *best = tp__xcalloc(n, sizeof *best);
    uint64_t seed = n;
    for (size_t i = 0; i < n; i++)
        order[i] = i, seed = seed * 31 + (uint64_t)trials[i].id;
    for (size_t i = 1; i < n; i++)
        for (size_t j = i; j > 0; j--) {
            const tp_demand_t *a = &trials[order[j]], *b = &trials[order[j - 1]];
            double ra = rank_of(e->plan, a->id), rb = rank_of(e->plan, b->id);
            int before = ra > 0 ? (rb <= 0 || ra < rb) : (rb <= 0 && a->duration_s > b->duration_s);
            if (!before) break;
            size_t t = order[j];
            order[j] = order[j - 1];
            order[j - 1] = t;
        }
    double bm = value(&P, order, INFINITY), bends = P.ends;
    /* PLAN_EVALS plans, fewer in long rounds: PLAN_WORK trial-events each */
    double work = (double)n * (double)N, evals = work > 0 ? PLAN_WORK / work : PLAN_EVALS;
    int nevals = evals < PLAN_EVALS ? (int)evals : PLAN_EVALS, chains = 1;
    /* nothing runs and no trial has a rank yet: the plan's first round, or a
     * new batch on idle GPUs (not a few new trials beside many running ones,
     * where a plan costs what the running ones do and the search would not) */
    int fresh = P.R == 0;
    for (size_t i = 0; i < n && fresh; i++)
        fresh = !(rank_of(e->plan, trials[i].id) > 0);
    if (fresh && nevals > 0) chains = PLAN_FIRST_CHAINS, nevals *= PLAN_FIRST_EVALS;
    size_t *cls = demand_classes(trials, n), *start = tp__xcalloc(n, sizeof *start);
    size_t *pa = tp__xcalloc(n, sizeof *pa), *pb = tp__xcalloc(n, sizeof *pb);
    size_t *found = tp__xcalloc(n, sizeof *found);
    memcpy(start, order, n * sizeof *start);
    const double start_m = bm, start_ends = bends;
    for (int k = 0; k < chains; k++) {
        double m = start_m, ends = start_ends;
        uint64_t s = seed + (uint64_t)k * 0x632be59bd9b4e019ULL;
        memcpy(order, start, n * sizeof *order);
        search_class_swaps(&P, order, found, &m, &ends, nevals, cls, &s, pa, pb);
        if (k == 0 || m < bm * (1 - 1e-12) || (m <= bm * (1 + 1e-12) && ends < bends)) {
            bm = m, bends = ends;
            memcpy(best, found, n * sizeof *best);
        }
    }
    free(cls), free(start), free(pa), free(pb), free(found);
    value(&P, best, INFINITY);

    /* keep the order; the decision: the best plan's starts at now */
    tp_place_plan_t *pl = e->plan;
    for (size_t i = 0; i < n; i++) {
        size_t id = (size_t)trials[i].id;
        if (id >= pl->cap) {
            size_t cap = 2 * id + 64;
            pl->rank = tp__xrealloc(pl->rank, cap * sizeof *pl->rank);
            memset(pl->rank + pl->cap, 0, (cap - pl->cap) * sizeof *pl->rank);
            pl->cap = cap;
        }
    }
    for (size_t o = 0; o < n; o++)
        pl->rank[trials[best[o]].id] = (double)(o + 1);
    for (size_t i = 0; i < n; i++) {
        memset(&out[i], 0, sizeof out[i]);
        size_t gi = P.started[i];
        if (gi == SIZE_MAX) continue;
        size_t nd = P.node_of[gi];
        out[i] = (tp_assign_t){.placed = 1, .node = nd, .ngpus = 1, .gpu = {gi - u->gpu_base[nd]}};
        tp__place_commit(c, u, &trials[i], &out[i]);
    }
    tp__usage_free(&P.u);
    free(P.base), free(P.w), free(P.rate), free(P.speed), free(P.D), free(P.k);
    free(P.started), free(P.act), free(P.node_of), free(P.last), free(order), free(best);
    return 1;
}

void tp__place_plan_free(tp_place_plan_t *p) {
    free(p->rank);
    p->rank = NULL;
    p->cap = 0;
}
