/* place: the cluster model's helpers (usage arrays, fit test, occupancy) and
 * the table of placement policies. The policies live in placer_fit.c
 * (greedy: ff, bf, wf, their decreasing variants, one-per-gpu) and
 * placer_optimal.c (an exact MIP through GLPK). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "place/fluid.h"
#include "place/place_internal.h"

const tp_placer_ops_t *const tp__placers[] = {
    &tp__placer_vpack,   &tp__placer_one_per_gpu,
    &tp__placer_ff,      &tp__placer_ffd,
    &tp__placer_bf,      &tp__placer_bfd,
    &tp__placer_wf,      &tp__placer_wfd,
    &tp__placer_optimal, NULL,
};

const tp_placer_ops_t *tp__placer_find(const char *name) {
    if (!name) return NULL;
    for (size_t i = 0; tp__placers[i]; i++)
        if (strcmp(tp__placers[i]->name, name) == 0) return tp__placers[i];
    return NULL;
}

void tp__cluster_free(tp_cluster_t *c) {
    if (!c) return;
    for (size_t n = 0; n < c->nnodes; n++)
        free(c->nodes[n].gpus);
    free(c->nodes);
    c->nodes = NULL;
    c->nnodes = 0;
}

int tp__usage_init(tp_usage_t *u, const tp_cluster_t *c) {
    memset(u, 0, sizeof *u);
    u->gpu_base = tp__xcalloc(c->nnodes ? c->nnodes : 1, sizeof *u->gpu_base);
    size_t total = 0;
    for (size_t n = 0; n < c->nnodes; n++) {
        u->gpu_base[n] = total;
        total += c->nodes[n].ngpus;
    }
    u->ngpus = total;
    size_t k = total ? total : 1;
    u->mem_used = tp__xcalloc(k, sizeof *u->mem_used);
    u->compute_used = tp__xcalloc(k, sizeof *u->compute_used);
    u->count = tp__xcalloc(k, sizeof *u->count);
    u->cpus_used = tp__xcalloc(c->nnodes ? c->nnodes : 1, sizeof *u->cpus_used);
    return 0;
}

void tp__usage_free(tp_usage_t *u) {
    if (!u) return;
    free(u->gpu_base);
    free(u->mem_used);
    free(u->compute_used);
    free(u->count);
    free(u->cpus_used);
    memset(u, 0, sizeof *u);
}

void tp__usage_copy(tp_usage_t *dst, const tp_usage_t *src, const tp_cluster_t *c) {
    size_t g = src->ngpus ? src->ngpus : 1, nn = c->nnodes ? c->nnodes : 1;
    memcpy(dst->mem_used, src->mem_used, g * sizeof *dst->mem_used);
    memcpy(dst->compute_used, src->compute_used, g * sizeof *dst->compute_used);
    memcpy(dst->count, src->count, g * sizeof *dst->count);
    memcpy(dst->cpus_used, src->cpus_used, nn * sizeof *dst->cpus_used);
}

uint64_t tp__place_mem_free(const tp_cluster_t *c, const tp_usage_t *u, size_t n, size_t g) {
    uint64_t total = c->nodes[n].gpus[g].memory_mib, used = u->mem_used[u->gpu_base[n] + g];
    uint64_t reserve = c->limits.reserve_mib;
    if (total < reserve || total - reserve < used) return 0;
    return total - reserve - used;
}

double tp__place_capacity(const tp_cluster_t *c, size_t node, int k) {
    double one = 1.0 + c->limits.oversubscribe;
    return node < c->nnodes && c->nodes[node].served ? one * tp__fluid_served(NULL, k) : one;
}

double tp__place_comp_free(const tp_cluster_t *c, const tp_usage_t *u, size_t n, size_t g) {
    size_t gi = u->gpu_base[n] + g;
    return tp__place_capacity(c, n, u->count[gi] + 1) - u->compute_used[gi];
}

int tp__place_gpu_open(const tp_cluster_t *c, const tp_usage_t *u, size_t n, size_t g) {
    if (!c->nodes[n].gpus[g].healthy) return 0;
    int count = u->count[u->gpu_base[n] + g];
    if (!c->limits.sharing) return count == 0;
    return c->limits.max_per_gpu <= 0 || count < c->limits.max_per_gpu;
}

double tp__place_share(const tp_cluster_t *c, size_t node, size_t gpu, double compute) {
    double speed = c->nodes[node].gpus[gpu].speed;
    return speed > 0 ? compute / speed : compute;
}

int tp__fits(const tp_cluster_t *c, const tp_usage_t *u, size_t node, size_t gpu,
             const tp_demand_t *d) {
    if (node >= c->nnodes) return 0;
    if (u->cpus_used[node] + d->cpus > c->nodes[node].cpus) return 0;
    if (d->gpus <= 0) return 1; /* CPU only: the node's CPUs are all it needs */
    if (gpu >= c->nodes[node].ngpus || !tp__place_gpu_open(c, u, node, gpu)) return 0;
    if (d->memory_mib > tp__place_mem_free(c, u, node, gpu)) return 0;
    return tp__place_share(c, node, gpu, d->compute) <=
           tp__place_comp_free(c, u, node, gpu) + TP_PLACE_EPS;
}

double tp__occupancy(const tp_cluster_t *c, const tp_usage_t *u) {
    (void)c;
    if (!u->ngpus) return 0.0;
    double sum = 0;
    for (size_t g = 0; g < u->ngpus; g++)
        sum += u->compute_used[g] < 1.0 ? u->compute_used[g] : 1.0;
    return sum / (double)u->ngpus;
}

void tp__place_commit(const tp_cluster_t *c, tp_usage_t *u, const tp_demand_t *d,
                      const tp_assign_t *a) {
    if (!a->placed) return;
    u->cpus_used[a->node] += d->cpus;
    for (size_t k = 0; k < a->ngpus; k++) {
        size_t gi = u->gpu_base[a->node] + a->gpu[k];
        u->mem_used[gi] += d->memory_mib;
        u->compute_used[gi] += tp__place_share(c, a->node, a->gpu[k], d->compute);
        u->count[gi]++;
    }
}

void tp__place_release(const tp_cluster_t *c, tp_usage_t *u, const tp_demand_t *d,
                       const tp_assign_t *a) {
    if (!a->placed) return;
    u->cpus_used[a->node] -= d->cpus;
    for (size_t k = 0; k < a->ngpus; k++) {
        size_t gi = u->gpu_base[a->node] + a->gpu[k];
        u->mem_used[gi] -= u->mem_used[gi] > d->memory_mib ? d->memory_mib : u->mem_used[gi];
        u->compute_used[gi] -= tp__place_share(c, a->node, a->gpu[k], d->compute);
        if (u->compute_used[gi] < 1e-12) u->compute_used[gi] = 0; /* no rounding residue */
        u->count[gi]--;
    }
}

typedef struct order_key {
    double duration; /* sort key */
    size_t index;    /* trial index; breaks ties so the sort is stable */
} order_key_t;

/* Whether x goes before y: longer first, then lower index. */
static inline int key_before(const order_key_t *x, const order_key_t *y) {
    return x->duration > y->duration || (x->duration == y->duration && x->index < y->index);
}

/* keys[0..n) sorted by key_before: insertion sort of runs of 16, then
 * bottom-up merges through tmp. The comparison inlined, not qsort's call
 * per comparison: wfd on SP4 over 16 GPUs spent a quarter of its decision
 * in qsort. O(n log n). */
static void sort_keys(order_key_t *keys, order_key_t *tmp, size_t n) {
    enum { RUN = 16 };
    for (size_t lo = 0; lo < n; lo += RUN) {
        size_t hi = lo + RUN < n ? lo + RUN : n;
        for (size_t i = lo + 1; i < hi; i++) {
            order_key_t k = keys[i];
            size_t j = i;
            for (; j > lo && key_before(&k, &keys[j - 1]); j--)
                keys[j] = keys[j - 1];
            keys[j] = k;
        }
    }
    order_key_t *src = keys, *dst = tmp;
    for (size_t w = RUN; w < n; w *= 2) {
        for (size_t lo = 0; lo < n; lo += 2 * w) {
            size_t mid = lo + w < n ? lo + w : n, hi = lo + 2 * w < n ? lo + 2 * w : n;
            size_t a = lo, b = mid, o = lo;
            while (a < mid && b < hi)
                dst[o++] = key_before(&src[b], &src[a]) ? src[b++] : src[a++];
            while (a < mid)
                dst[o++] = src[a++];
            while (b < hi)
                dst[o++] = src[b++];
        }
        order_key_t *x = src;
        src = dst;
        dst = x;
    }
    if (src != keys) memcpy(keys, src, n * sizeof *keys);
}

size_t *tp__place_order(const tp_demand_t *trials, size_t n, int decreasing) {
    size_t *order = tp__xmalloc((n ? n : 1) * sizeof *order);
    if (!decreasing) {
        for (size_t i = 0; i < n; i++)
            order[i] = i;
        return order;
    }
    order_key_t *keys = tp__xmalloc(2 * (n ? n : 1) * sizeof *keys);
    for (size_t i = 0; i < n; i++)
        keys[i] = (order_key_t){trials[i].duration_s, i};
    sort_keys(keys, keys + n, n);
    for (size_t i = 0; i < n; i++)
        order[i] = keys[i].index;
    free(keys);
    return order;
}

/* ---- gangs: one trial over several nodes ------------------------------------- */

/* The d->gpus GPUs of node n where a one-GPU share of d fits, most free
 * compute first, into gpus[]; their summed free compute, or -1 when fewer
 * fit (or, with no GPUs wanted, when the node's CPUs do not). */
static double best_gpus_on(const tp_cluster_t *c, const tp_usage_t *u, size_t n,
                           const tp_demand_t *d, size_t *gpus) {
    tp_demand_t one = *d;
    one.gpus = d->gpus > 0 ? 1 : 0;
    if (d->gpus <= 0) return tp__fits(c, u, n, 0, &one) ? (double)(c->nodes[n].cpus) : -1;
    size_t want = (size_t)d->gpus, got = 0;
    double sum = 0;
    for (size_t g = 0; g < c->nodes[n].ngpus; g++) {
        if (!tp__fits(c, u, n, g, &one)) continue;
        double free_c = tp__place_comp_free(c, u, n, g);
        /* insertion into the best `want`, most free first */
        size_t pos = got < want ? got : want;
        while (pos > 0) {
            size_t prev = gpus[pos - 1];
            double pf = tp__place_comp_free(c, u, n, prev);
            if (pf >= free_c) break;
            if (pos < want) gpus[pos] = prev;
            pos--;
        }
        if (pos < want) {
            gpus[pos] = g;
            if (got < want) got++;
        }
    }
    if (got < want) return -1;
    for (size_t i = 0; i < want; i++)
        sum += tp__place_comp_free(c, u, n, gpus[i]);
    return sum;
}

int tp__place_gang(const tp_cluster_t *c, tp_usage_t *u, const tp_demand_t *d, size_t k,
                   tp_assign_t *out) {
    if (k == 0 || k > c->nnodes || d->gpus > TP_PLACE_MAX_GPUS) return 0;
    /* Kept to undo a gang that does not fit whole. */
    size_t ng = u->ngpus ? u->ngpus : 1;
    uint64_t *mem = tp__xmalloc(ng * sizeof *mem);
    double *comp = tp__xmalloc(ng * sizeof *comp);
    int *count = tp__xmalloc(ng * sizeof *count);
    int *cpus = tp__xmalloc((c->nnodes + 1) * sizeof *cpus);
    unsigned char *used = tp__xcalloc(c->nnodes + 1, 1);
    memcpy(mem, u->mem_used, u->ngpus * sizeof *mem);
    memcpy(comp, u->compute_used, u->ngpus * sizeof *comp);
    memcpy(count, u->count, u->ngpus * sizeof *count);
    memcpy(cpus, u->cpus_used, c->nnodes * sizeof *cpus);
    size_t placed = 0, gpus[TP_PLACE_MAX_GPUS], best_gpus[TP_PLACE_MAX_GPUS];
    tp_demand_t shard = *d;
    shard.gpus = 1; /* committed GPU by GPU below */
    for (; placed < k; placed++) {
        size_t best = c->nnodes;
        double best_free = -1;
        for (size_t n = 0; n < c->nnodes; n++) {
            if (used[n]) continue;
            double f = best_gpus_on(c, u, n, d, gpus);
            if (f > best_free) {
                best_free = f;
                best = n;
                memcpy(best_gpus, gpus, sizeof gpus);
            }
        }
        if (best == c->nnodes) break;
        used[best] = 1;
        tp_assign_t *a = &out[placed];
        memset(a, 0, sizeof *a);
        a->placed = 1;
        a->node = best;
        a->ngpus = d->gpus > 0 ? (size_t)d->gpus : 0;
        memcpy(a->gpu, best_gpus, a->ngpus * sizeof *a->gpu);
        u->cpus_used[best] += d->cpus;
        for (size_t i = 0; i < a->ngpus; i++) {
            tp_assign_t one = {.placed = 1, .node = best, .ngpus = 1, .gpu = {a->gpu[i]}};
            shard.cpus = 0; /* the node's CPUs are counted once, above */
            tp__place_commit(c, u, &shard, &one);
        }
    }
    int ok = placed == k;
    if (!ok) {
        memcpy(u->mem_used, mem, u->ngpus * sizeof *mem);
        memcpy(u->compute_used, comp, u->ngpus * sizeof *comp);
        memcpy(u->count, count, u->ngpus * sizeof *count);
        memcpy(u->cpus_used, cpus, c->nnodes * sizeof *cpus);
        memset(out, 0, k * sizeof *out);
    }
    free(mem);
    free(comp);
    free(count);
    free(cpus);
    free(used);
    return ok;
}

double tp__place_mip_bound_occupancy(const tp_usage_t *u, double before,
                                     const tp_place_mip_info_t *info) {
    if (!u->ngpus || !info || info->bound < 0) return -1;
    double b = (before * (double)u->ngpus + info->bound) / (double)u->ngpus;
    return b;
}

void tp__place_mip_summary(const tp_place_mip_info_t *info, const tp_usage_t *u, double before,
                           double occ, char *buf, size_t size) {
    const char *model = info->model_patterns ? "pattern model" : "assignment model";
    if (info->proved_optimal) {
        snprintf(buf, size, "proved optimal (%s, %zu variables, %llu subproblems)", model,
                 info->columns, (unsigned long long)info->nodes);
        return;
    }
    const char *why = info->time_limit_hit   ? "stopped at its time limit"
                      : info->node_limit_hit ? "stopped at its node limit"
                                             : "not proved optimal";
    double bound = tp__place_mip_bound_occupancy(u, before, info);
    if (bound >= 0) {
        if (bound < occ) bound = occ;
        snprintf(buf, size, "%s: occupancy %.2f%%, bound %.2f%%, gap %.2f points (%s)", why,
                 100 * occ, 100 * bound, 100 * (bound - occ), model);
    } else {
        snprintf(buf, size, "%s: occupancy %.2f%%, no bound known (%s%s)", why, 100 * occ, model,
                 info->used_vpack ? "; vpack's answer kept" : "");
    }
}
