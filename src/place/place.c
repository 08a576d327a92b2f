/* place: the cluster model's helpers (usage arrays, fit test, occupancy) and
 * the table of placement policies. The policies live in placer_fit.c
 * (greedy: ff, bf, wf, their decreasing variants, one-per-gpu) and
 * placer_optimal.c (an exact MIP through GLPK). */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "place/place_internal.h"

const tp_placer_ops_t *const tp__placers[] = {
    &tp__placer_one_per_gpu, &tp__placer_ff, &tp__placer_ffd, &tp__placer_bf, &tp__placer_bfd,
    &tp__placer_wf,          &tp__placer_wfd, &tp__placer_optimal, NULL,
};

const tp_placer_ops_t *tp__placer_find(const char *name) {
    if (!name) return NULL;
    for (size_t i = 0; tp__placers[i]; i++)
        if (strcmp(tp__placers[i]->name, name) == 0) return tp__placers[i];
    return NULL;
}

void tp__cluster_free(tp_cluster_t *c) {
    if (!c) return;
    for (size_t n = 0; n < c->nnodes; n++) free(c->nodes[n].gpus);
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

uint64_t tp__place_mem_free(const tp_cluster_t *c, const tp_usage_t *u, size_t n, size_t g) {
    uint64_t total = c->nodes[n].gpus[g].memory_mib, used = u->mem_used[u->gpu_base[n] + g];
    uint64_t reserve = c->limits.reserve_mib;
    if (total < reserve || total - reserve < used) return 0;
    return total - reserve - used;
}

double tp__place_comp_free(const tp_cluster_t *c, const tp_usage_t *u, size_t gi) {
    return 1.0 + c->limits.oversubscribe - u->compute_used[gi];
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
    size_t gi = u->gpu_base[node] + gpu;
    return u->compute_used[gi] + tp__place_share(c, node, gpu, d->compute) <=
           1.0 + c->limits.oversubscribe + TP_PLACE_EPS;
}

double tp__occupancy(const tp_cluster_t *c, const tp_usage_t *u) {
    (void)c;
    if (!u->ngpus) return 0.0;
    double sum = 0;
    for (size_t g = 0; g < u->ngpus; g++) sum += u->compute_used[g] < 1.0 ? u->compute_used[g] : 1.0;
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

typedef struct order_key {
    double duration; /* sort key */
    size_t index;    /* trial index; breaks ties so the sort is stable */
} order_key_t;

static int by_duration_desc(const void *a, const void *b) {
    const order_key_t *x = a, *y = b;
    if (x->duration != y->duration) return x->duration > y->duration ? -1 : 1;
    return x->index < y->index ? -1 : x->index > y->index;
}

size_t *tp__place_order(const tp_demand_t *trials, size_t n, int decreasing) {
    size_t *order = tp__xmalloc((n ? n : 1) * sizeof *order);
    if (!decreasing) {
        for (size_t i = 0; i < n; i++) order[i] = i;
        return order;
    }
    order_key_t *keys = tp__xmalloc((n ? n : 1) * sizeof *keys);
    for (size_t i = 0; i < n; i++) keys[i] = (order_key_t){trials[i].duration_s, i};
    qsort(keys, n, sizeof *keys, by_duration_desc);
    for (size_t i = 0; i < n; i++) order[i] = keys[i].index;
    free(keys);
    return order;
}
