/* placement: the orchestrator's side of resource-aware packing. On the
 * cluster inventory.c builds from the agents' hellos, it keeps one demand
 * per group of trials that share their profile_by values (declared,
 * profiled by profiling.c, or grown after an out-of-memory death), places batches of trials
 * with the chosen policy (a pure function of pending demand and cluster
 * state), gives each trial its GPU environment (CUDA_VISIBLE_DEVICES and MPS
 * settings), journals every placement and keeps the GPU state measured. */
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gpu/gpu.h"
#include "run/orchestrator_internal.h"
#include "run/run.h"

#define MPS_MEM_HEADROOM 0.10 /* CUDA_MPS_PINNED_DEVICE_MEM_LIMIT above the demand */
#define PROFILE_HEADROOM 1.10 /* measured peak memory -> demand */
#define SNAPSHOT_PERIOD_S 2.0 /* GPU state written to the store at most this often */
/* What a profiler is placed with while its group's demand is unknown and
 * nothing declared or measured says better (provisional_demand): the small
 * PyTorch models of issue 31 measured 0.8-1.2 GiB and compute 0.13-0.28 on
 * an H200, so 2 GiB and 0.25 hold them, and four such profilers still fit
 * one GPU beside each other. */
#define PROFILE_GUESS_MIB 2048
#define PROFILE_GUESS_COMPUTE 0.25
/* A group's other trials start beside its profiler holding its provisional
 * memory times this (a guess wrong by half still does not overfill the
 * GPU) and its provisional compute over this: too little compute costs
 * speed until the profile lands, too much keeps them waiting for it (six
 * trials of 0.25 pass C_6 = 1.44; issue 31's truth run). */
#define GUESS_MARGIN 2

/* ---- demand groups ----------------------------------------------------------- */

void tp__placement_trial_init(trial_t *t) {
    t->demand.group = -1;
}

void tp__placement_trial_free(trial_t *t) {
    free(t->demand.more);
    tp__prof_reset(&t->demand.prof);
}

int tp__placement_group_of(const trial_t *t) {
    return t->demand.group;
}
uint64_t tp__placement_mem_mib(const trial_t *t) {
    return t->demand.mem_mib;
}
double tp__placement_compute(const trial_t *t) {
    return t->demand.compute;
}
uint64_t tp__placement_peak_mib(const trial_t *t) {
    return t->demand.peak_mib;
}

const demand_group_t *tp__placement_group(const tp_run_t *r, const trial_t *t) {
    return t->demand.group >= 0 ? &r->pl.groups[t->demand.group] : NULL;
}

void tp__placement_run_beside(trial_t *to, const trial_t *from) {
    to->where = from->where;
    free(to->demand.more);
    to->demand.more = NULL;
}

void tp__placement_hand_over(trial_t *u, trial_t *t) {
    u->where = t->where;
    u->demand.more = t->demand.more;
    t->demand.more = NULL;
    u->demand.mem_mib = t->demand.mem_mib;
    u->demand.compute = t->demand.compute;
    u->demand.profiling = t->demand.profiling;
    u->demand.peak_mib =
        t->demand.peak_mib > u->demand.peak_mib ? t->demand.peak_mib : u->demand.peak_mib;
    t->demand.profiling = 0;
    /* the process's samples so far measure it whichever trial holds it */
    tp__prof_reset(&u->demand.prof);
    u->demand.prof = t->demand.prof;
    memset(&t->demand.prof, 0, sizeof t->demand.prof);
    u->demand.sm_sum = t->demand.sm_sum, u->demand.samples = t->demand.samples;
}

int tp__placement_needs_profile(const tp_run_t *r) {
    return r->x.res.gpu_memory_auto || r->x.res.gpu_compute_auto;
}

/* The group key of a configuration: its profile_by values as JSON. */
static char *group_key(const tp_run_t *r, const json_t *params) {
    json_t *o = json_object();
    for (size_t i = 0; i < r->x.nprofile_by; i++) {
        json_t *v = json_object_get(params, r->x.profile_by[i]);
        json_object_set(o, r->x.profile_by[i], v ? v : json_null());
    }
    char *key = json_dumps(o, JSON_COMPACT | JSON_SORT_KEYS);
    json_decref(o);
    return key;
}

void tp__placement_apply_profile(tp_run_t *r, demand_group_t *g, const tp_profile_t *p) {
    if (r->x.res.gpu_memory_auto)
        g->mem_mib = (uint64_t)ceil((double)p->memory_mib * PROFILE_HEADROOM);
    if (r->x.res.gpu_compute_auto) g->compute = p->compute;
    g->measured = 1;
}

/* The group of t, created on first use with the declared demand, or the
 * stored measurement of an earlier run (reused on resume). */
static demand_group_t *group_of(tp_run_t *r, trial_t *t) {
    if (t->demand.group >= 0) return &r->pl.groups[t->demand.group];
    if (!r->pl.group_index) r->pl.group_index = json_object();
    char *key = group_key(r, t->params);
    json_t *idx = json_object_get(r->pl.group_index, key);
    if (idx) {
        free(key);
        t->demand.group = (int)json_integer_value(idx);
        return &r->pl.groups[t->demand.group];
    }
    r->pl.groups = tp__xrealloc(r->pl.groups, (r->pl.ngroups + 1) * sizeof *r->pl.groups);
    demand_group_t *g = &r->pl.groups[r->pl.ngroups];
    memset(g, 0, sizeof *g);
    g->key = key;
    g->mem_mib = r->x.res.gpu_memory_mib;
    g->compute = r->x.res.gpu_compute;
    g->profiler = -1;
    g->measured = !tp__placement_needs_profile(r);
    tp_profile_t p;
    if (!g->measured && tp__store_profile_get(tp__journal_store(&r->journal), key, &p) == 0)
        tp__placement_apply_profile(r, g, &p);
    json_object_set_new(r->pl.group_index, key, json_integer((json_int_t)r->pl.ngroups));
    t->demand.group = (int)r->pl.ngroups++;
    return g;
}

int tp__placement_may_fit(const tp_run_t *r) {
    return !r->pl.blocked;
}

/* ---- placing ------------------------------------------------------------------- */

/* Nothing more goes to node n in u: its compute and cores all taken. */
static void close_node(const tp_run_t *r, tp_usage_t *u, size_t n) {
    for (size_t g = 0; g < r->pl.cluster.nodes[n].ngpus; g++)
        u->compute_used[u->gpu_base[n] + g] = 1e9;
    u->cpus_used[n] = 1 << 30;
}

/* What is in use: our running attempts' demands plus foreign processes;
 * nodes that take no trials now are closed. */
static void current_usage(tp_run_t *r, tp_usage_t *u) {
    tp__usage_init(u, &r->pl.cluster);
    for (size_t i = 0; i < tp__trials_n(&r->trials); i++) {
        trial_t *t = tp__trials_get(&r->trials, (int64_t)i);
        if (!t || t->state != TP_TRIAL_RUNNING || !t->where.placed) continue;
        for (size_t s = 0; s < tp__trial_nshards(r, t); s++) {
            const tp_assign_t *a = tp__trial_shard(t, s);
            size_t base = u->gpu_base[a->node];
            u->cpus_used[a->node] += r->x.res.cpus;
            /* a profiler, or a trial placed on a guess beside it, holds what
             * it was placed with, or what it uses if more */
            uint64_t mib =
                (t->demand.profiling || t->demand.guessed) && t->demand.peak_mib > t->demand.mem_mib
                    ? t->demand.peak_mib
                    : t->demand.mem_mib;
            for (size_t k = 0; k < a->ngpus; k++) {
                size_t g = base + a->gpu[k];
                u->mem_used[g] += mib;
                u->compute_used[g] +=
                    tp__place_share(&r->pl.cluster, a->node, a->gpu[k], t->demand.compute);
                u->count[g]++;
            }
        }
    }
    for (size_t n = 0; n < r->pl.cluster.nnodes; n++) {
        const tp_agent_link_t *l = n < tp__agents_n(r) ? tp__agents_link(r, n) : NULL;
        for (size_t g = 0; g < r->pl.cluster.nodes[n].ngpus; g++)
            u->mem_used[u->gpu_base[n] + g] += r->pl.node[n].foreign_mib[g];
        if (!l || !l->ready || l->draining) close_node(r, u, n);
    }
}

/* ---- concurrency on each node --------------------------------------------------- */
/* The placers know nothing of `concurrency`, which holds on each node of a
 * cluster: a node's attempts are counted around their rounds, and a node
 * that has its share is closed to them. On one node the run's own count
 * (tp__nodes_concurrency) is the node's. */

/* Attempts (processes) running on each node now, for a cluster of several
 * nodes; NULL on one node (no per-node count to keep). */
static int *node_load(tp_run_t *r) {
    if (r->pl.cluster.nnodes < 2) return NULL;
    int *load = tp__xcalloc(tp__agents_n(r) + 1, sizeof *load);
    tp__agents_running(r, load, 1);
    return load;
}

/* Close each node whose load (running, plus what the round placed: the
 * first m of out, for demands d) reaches the concurrency, after giving back
 * the round's last placements on a node beyond it. Returns how many were
 * given back (they go to another round). O(m + nodes). */
static size_t hold_to_concurrency(tp_run_t *r, tp_usage_t *u, const int *load, const tp_demand_t *d,
                                  tp_assign_t *out, size_t m) {
    size_t nn = r->pl.cluster.nnodes, back = 0;
    int *count = tp__xcalloc(nn, sizeof *count);
    for (size_t n = 0; n < nn; n++)
        count[n] = n < tp__agents_n(r) ? load[n] : 0;
    for (size_t i = 0; i < m; i++)
        if (out[i].placed) count[out[i].node]++;
    for (size_t i = m; i-- > 0;)
        if (out[i].placed && count[out[i].node] > r->x.concurrency) {
            count[out[i].node]--;
            tp__place_release(&r->pl.cluster, u, &d[i], &out[i]);
            out[i].placed = 0;
            back++;
        }
    for (size_t n = 0; n < nn; n++)
        if (count[n] >= r->x.concurrency) close_node(r, u, n);
    free(count);
    return back;
}

/* Trials that count no resources: each of a trial's nodes is the ready node
 * running the fewest of ours (the only one, on this machine), distinct for
 * a multi-node trial. */
static size_t place_by_load(tp_run_t *r, trial_t **batch, size_t n) {
    size_t nn = r->pl.cluster.nnodes, k = (size_t)r->x.res.nodes;
    int *load = tp__xcalloc(nn + 1, sizeof *load);
    unsigned char *taken = tp__xcalloc(nn + 1, 1);
    /* The load decides only between nodes, and keeps each to its
     * concurrency: one node needs no scan of the trials (this runs on every
     * scheduling turn). */
    if (nn > 1) tp__agents_running(r, load, 1);
    int cap = nn > 1 ? r->x.concurrency : INT_MAX;
    size_t placed = 0;
    tp_assign_t shards[64];
    for (size_t i = 0; i < n; i++) {
        trial_t *t = batch[i];
        memset(taken, 0, nn);
        size_t got = 0;
        for (; got < k && got < TP_ARRAY_LEN(shards); got++) {
            size_t best = nn;
            for (size_t j = 0; j < nn; j++)
                if (tp__agents_link(r, j)->ready && !tp__agents_link(r, j)->draining && !taken[j] &&
                    load[j] < cap && (best == nn || load[j] < load[best]))
                    best = j;
            if (best == nn) break;
            taken[best] = 1;
            shards[got] = (tp_assign_t){.placed = 1, .node = best};
        }
        if (got < k) continue;
        for (size_t s = 0; s < k; s++)
            load[shards[s].node]++;
        tp__placement_set_shards(r, t, shards, k);
        placed++;
    }
    free(taken);
    free(load);
    return placed;
}

void tp__placement_set_shards(tp_run_t *r, trial_t *t, const tp_assign_t *shards, size_t k) {
    (void)r;
    t->where = shards[0];
    free(t->demand.more);
    t->demand.more = NULL;
    if (k > 1) {
        t->demand.more = tp__xcalloc(k - 1, sizeof *t->demand.more);
        memcpy(t->demand.more, shards + 1, (k - 1) * sizeof *t->demand.more);
    }
}

/* The decision proper (see tp__placement_place). */
static size_t place(tp_run_t *r, trial_t **batch, size_t n);

/* What a profiler of an unmeasured group is placed with: the declared
 * figure where one is declared, else the most any measured group holds
 * (memory) or a modest guess (PROFILE_GUESS_*). It runs under MPS beside
 * others with no limit on its memory or threads; this only decides where
 * there is room for it. O(groups). */
static void provisional_demand(const tp_run_t *r, tp_demand_t *d) {
    d->memory_mib = r->x.res.gpu_memory_auto ? 0 : r->x.res.gpu_memory_mib;
    d->compute = r->x.res.gpu_compute_auto ? PROFILE_GUESS_COMPUTE : r->x.res.gpu_compute;
    if (!r->x.res.gpu_memory_auto) return;
    for (size_t i = 0; i < r->pl.ngroups; i++)
        if (r->pl.groups[i].measured && r->pl.groups[i].mem_mib > d->memory_mib)
            d->memory_mib = r->pl.groups[i].mem_mib;
    if (!d->memory_mib) d->memory_mib = PROFILE_GUESS_MIB;
}

/* The profilers of one round (profiling[i], single-GPU), each to the GPU
 * with the most free compute (worst fit) before the policy places the rest:
 * several groups' profilers go to as many GPUs as there are, and beside
 * trials running where one GPU is all there is. Where GPUs are not shared
 * (tp__placement_exclusive: `one-per-gpu`, `sharing: none`) the policy places
 * them like any trial, a GPU each: on an H200 three profilers put beside each
 * other under one-per-gpu time-sliced and took 1.14-1.25x their time alone.
 * O(profilers x GPUs). */
int tp__placement_exclusive(const tp_run_t *r) {
    return r->x.sharing == TP_SHARING_NONE || r->pl.placer == tp__placer_find("one-per-gpu");
}

static void place_profilers(tp_run_t *r, tp_usage_t *u, const tp_demand_t *d, const int *profiling,
                            size_t m, tp_assign_t *out) {
    if (tp__placement_exclusive(r)) return;
    for (size_t i = 0; i < m; i++) {
        if (!profiling[i] || d[i].gpus != 1) continue;
        size_t gi = tp__place_wf_gpu(&r->pl.cluster, u, &d[i]);
        if (gi == SIZE_MAX) continue;
        size_t n = 0;
        while (n + 1 < r->pl.cluster.nnodes && u->gpu_base[n + 1] <= gi)
            n++;
        out[i] = (tp_assign_t){.placed = 1, .node = n, .ngpus = 1, .gpu = {gi - u->gpu_base[n]}};
        tp__place_commit(&r->pl.cluster, u, &d[i], &out[i]);
    }
}

size_t tp__placement_place(tp_run_t *r, trial_t **batch, size_t n) {
    size_t placed = place(r, batch, n);
    /* What did not fit now will not fit until something changes: do not try
     * again on every loop turn (reports keep the loop busy). */
    if (placed < n) r->pl.blocked = 1;
    return placed;
}

/* `optimal` on one round; when it stopped short of a proof (a limit, or a
 * round with multi-GPU trials, which no model proves), what it reached, its
 * gap to the bound when one is known and the limit it had are logged and
 * journaled (event `placement-gap`). */
static void place_optimal(tp_run_t *r, tp_usage_t *u, const tp_demand_t *d, size_t m,
                          tp_assign_t *out, const tp_place_effort_t *effort) {
    tp_place_mip_info_t info;
    tp_error_t err = {0};
    double before = tp__occupancy(&r->pl.cluster, u);
    if (tp__place_optimal(&r->pl.cluster, u, d, m, out, effort, &info, &err) != 0) {
        tp__log(TP_LOG_WARN, "placement failed: %s", err.msg);
        return;
    }
    if (info.proved_optimal) return;
    char line[256], detail[400];
    tp__place_mip_summary(&info, u, before, tp__occupancy(&r->pl.cluster, u), line, sizeof line);
    snprintf(detail, sizeof detail, "optimal on a round of %zu trials (time limit %g s): %s", m,
             effort->time_limit_s, line);
    tp__log(TP_LOG_INFO, "%s", detail);
    tp__journal_ok(
        &r->journal,
        tp__store_event(tp__journal_tx(&r->journal), -1, 0, "placement-gap", detail, tp__wall_s()),
        "recording optimal's gap");
}

/* The single-GPU trials running now, for vpack's plan: where, what they
 * hold, and the expected seconds left as their duration (left = 1); the
 * count, or SIZE_MAX when one runs on several GPUs (then no plan). */
static size_t running_now(tp_run_t *r, const tp_usage_t *u, tp_place_running_t **out) {
    size_t k = 0, cap = (size_t)tp__trials_in(&r->trials, TP_TRIAL_RUNNING) + 1;
    tp_place_running_t *run = tp__xcalloc(cap, sizeof *run);
    for (size_t i = 0; i < tp__trials_n(&r->trials) && k < cap; i++) {
        const trial_t *t = tp__trials_get(&r->trials, (int64_t)i);
        if (!t || t->state != TP_TRIAL_RUNNING || !t->where.placed) continue;
        if (t->where.ngpus != 1 || t->demand.more) {
            free(run);
            return SIZE_MAX;
        }
        run[k++] = (tp_place_running_t){.gpu = u->gpu_base[t->where.node] + t->where.gpu[0],
                                        .d = {.id = t->id,
                                              .gpus = 1,
                                              .memory_mib = t->demand.mem_mib,
                                              .compute = t->demand.compute,
                                              .cpus = r->x.res.cpus,
                                              .duration_s = tp__trial_expected_s(&r->trials, t)},
                                        .left = 1};
    }
    *out = run;
    return k;
}

/* Single-node demands d[0..m) through the run's policy into out. On a
 * cluster (load: its nodes' attempts) a node that the round filled beyond
 * its concurrency gives the excess back, is closed, and those go round
 * again on the nodes still open: a round per node at most. */
static void place_rounds(tp_run_t *r, tp_usage_t *u, const int *load, const tp_demand_t *d,
                         size_t m, tp_assign_t *out) {
    tp_place_effort_t effort = {
        .time_limit_s = r->x.place_time_limit_s > 0 ? r->x.place_time_limit_s : 10.0, .in_run = 1};
    tp_place_running_t *running = NULL;
    size_t nrunning = running_now(r, u, &running);
    if (nrunning != SIZE_MAX && r->x.groups == TP_FLUID_OFF) { /* Fluid: its shares */
        effort.plan = &r->pl.plan, effort.running = running;
        effort.nrunning = nrunning, effort.mps_overhead = TP_PLACE_MPS_OVERHEAD;
    }
    size_t *left = tp__xcalloc(m, sizeof *left);
    tp_demand_t *ld = tp__xcalloc(m, sizeof *ld);
    tp_assign_t *lo = tp__xcalloc(m, sizeof *lo);
    for (size_t round = 0; round <= r->pl.cluster.nnodes; round++) {
        size_t k = 0;
        for (size_t i = 0; i < m; i++)
            if (!out[i].placed) left[k] = i, ld[k] = d[i], lo[k++] = (tp_assign_t){0};
        if (k == 0) break;
        tp_error_t err = {0};
        if (r->pl.placer == tp__placer_find("optimal"))
            place_optimal(r, u, ld, k, lo, &effort);
        else if (r->pl.placer->place(&r->pl.cluster, u, ld, k, lo, &effort, &err) != 0)
            tp__log(TP_LOG_WARN, "placement failed: %s", err.msg);
        for (size_t j = 0; j < k; j++)
            out[left[j]] = lo[j];
        if (!load || hold_to_concurrency(r, u, load, d, out, m) == 0) break;
    }
    free(lo);
    free(ld);
    free(left);
    free(running);
}

static size_t place(tp_run_t *r, trial_t **batch, size_t n) {
    for (size_t i = 0; i < n; i++) {
        memset(&batch[i]->where, 0, sizeof batch[i]->where);
        free(batch[i]->demand.more);
        batch[i]->demand.more = NULL;
        batch[i]->demand.guessed = 0;
    }
    if (!r->pl.placing) return place_by_load(r, batch, n);
    tp_demand_t *d = tp__xcalloc(n, sizeof *d);
    tp_assign_t *out = tp__xcalloc(n, sizeof *out);
    trial_t **who = tp__xcalloc(n, sizeof *who);
    int *profiling = tp__xcalloc(n, sizeof *profiling);
    int *guessed = tp__xcalloc(n, sizeof *guessed);
    size_t m = 0;
    for (size_t i = 0; i < n; i++) {
        trial_t *t = batch[i];
        demand_group_t *g = group_of(r, t);
        if (!g->measured && g->profiler >= 0 && g->profiler != t->id) {
            if (r->x.res.profile_wait) continue; /* wait for its group's measurement */
            guessed[m] = 1;
        }
        d[m] = (tp_demand_t){.id = t->id,
                             .gpus = tp__elastic_gpus(r, t),
                             .memory_mib = g->mem_mib,
                             .compute = g->compute,
                             .cpus = r->x.res.cpus,
                             .duration_s = tp__trial_expected_s(&r->trials, t)};
        if (tp__fuse_mem_mib(t) > d[m].memory_mib) /* a fused process: what its K uses */
            d[m].memory_mib = tp__fuse_mem_mib(t);
        if (!g->measured) {
            /* The profiler runs beside what runs (uncapped, under MPS where
             * the node has it), placed where its provisional demand fits.
             * The group's other trials start beside it, also with no limit
             * (a limit needs a measurement), where the provisional memory
             * times GUESS_MARGIN (compute over it) fits; with profile_wait
             * they wait. */
            provisional_demand(r, &d[m]);
            if (guessed[m]) {
                d[m].memory_mib *= GUESS_MARGIN;
                d[m].compute /= GUESS_MARGIN;
            } else {
                profiling[m] = 1;
                g->profiler = t->id;
            }
        }
        who[m++] = t;
    }
    size_t placed = 0;
    if (m) {
        tp_usage_t u;
        current_usage(r, &u);
        if (r->x.groups != TP_FLUID_OFF) tp__groups_demand(r, who, d, profiling, m, &u);
        int *load = node_load(r);
        if (load) hold_to_concurrency(r, &u, load, d, out, 0); /* close the full nodes */
        if (r->x.res.nodes > 1) {
            /* Multi-node trials: each a gang over distinct nodes, all or nothing. */
            size_t k = (size_t)r->x.res.nodes;
            tp_assign_t *shards = tp__xcalloc(k, sizeof *shards);
            for (size_t i = 0; i < m; i++)
                if (tp__place_gang(&r->pl.cluster, &u, &d[i], k, shards)) {
                    tp__placement_set_shards(r, who[i], shards, k);
                    out[i] = shards[0];
                    for (size_t j = 0; load && j < k; j++)
                        if (++load[shards[j].node] >= r->x.concurrency)
                            close_node(r, &u, shards[j].node);
                }
            free(shards);
        } else {
            place_profilers(r, &u, d, profiling, m, out);
            place_rounds(r, &u, load, d, m, out);
        }
        free(load);
        tp__usage_free(&u);
    }
    for (size_t i = 0; i < m; i++) {
        trial_t *t = who[i];
        demand_group_t *g = &r->pl.groups[t->demand.group];
        if (!out[i].placed || (guessed[i] && g->profiler < 0)) {
            /* no profiler: nor its guessed siblings (one of them profiles next) */
            if (profiling[i]) g->profiler = -1;
            out[i].placed = 0;
            continue;
        }
        t->where = out[i];
        t->demand.mem_mib = d[i].memory_mib;
        t->demand.compute = d[i].compute;
        t->demand.profiling = profiling[i];
        t->demand.guessed = guessed[i];
        placed++;
    }
    for (size_t i = 0; i < m; i++) /* once all are placed: the loads they make */
        if (out[i].placed) tp__groups_gpu_changed(r, &out[i]);
    free(d);
    free(out);
    free(who);
    free(profiling);
    free(guessed);
    return placed;
}

/* Shard k of t's attempt: its first node, or one of a multi-node trial's
 * others. */
const tp_assign_t *tp__trial_shard(const trial_t *t, size_t k) {
    return k == 0 ? &t->where : &t->demand.more[k - 1];
}

size_t tp__trial_nshards(const tp_run_t *r, const trial_t *t) {
    return t->demand.more ? (size_t)r->x.res.nodes : 1;
}

/* Journal where shard a of t's new attempt runs and fill env with its GPU
 * settings. */
static void journal_placement(tp_run_t *r, trial_t *t, const tp_assign_t *a, json_t *env) {
    tp_node_t *node = &r->pl.cluster.nodes[a->node];
    json_t *gpus = json_array(), *genv = json_object();
    char visible[1024] = "";
    size_t k = 0;
    for (size_t i = 0; i < a->ngpus; i++) {
        const tp_gpu_t *g = &node->gpus[a->gpu[i]];
        char dev[128];
        tp__placement_device_id(g, dev, sizeof dev);
        json_array_append_new(gpus, json_integer(g->index));
        int w = snprintf(visible + k, sizeof visible - k, "%s%s", i ? "," : "", dev);
        if (w > 0 && (size_t)w < sizeof visible - k) k += (size_t)w;
    }
    const tp_node_state_t *ns = &r->pl.node[a->node];
    const char *sharing = ns->sharing;
    if (a->ngpus) {
        json_object_set_new(genv, "CUDA_VISIBLE_DEVICES", json_string(visible));
        if (strcmp(ns->sharing, "exclusive") == 0) {
            sharing = "exclusive"; /* CUDA_VISIBLE_DEVICES alone, as outside tunepack */
        } else if (ns->mps && a->ngpus == 1 && t->ranks.n == 1) {
            /* One daemon per GPU; the client sees its one GPU as device 0.
             * No thread limit (CUDA_MPS_ACTIVE_THREAD_PERCENTAGE), for any
             * trial: measured on H100s, caps never paid (four ViT-Ti at 25%
             * each trained 16% less than uncapped, two at 50% 8% less, a
             * launch-bound resnet18 gained nothing) and a cap binds a trial
             * alone too (2.5-2.8x slower at 5%, issue 31). Who shares a GPU
             * is decided by the served curve instead (tp__place_capacity).
             * The memory limit stays: it protects the trials beside it; a
             * profiler, or a trial placed on a guess beside it, whose memory
             * is unknown, has none. */
            char pipe[4200], log[4200], vars[3][512];
            tp__placement_mps_dirs(r, a->node, node->gpus[a->gpu[0]].index, pipe, log, sizeof pipe);
            int nv = tp__mps_env(pipe, "0", 0,
                                 t->demand.profiling || t->demand.guessed ? 0 : t->demand.mem_mib,
                                 MPS_MEM_HEADROOM, vars);
            for (int i = 0; i < nv; i++) {
                char *eq = strchr(vars[i], '=');
                if (!eq) continue;
                *eq = 0;
                json_object_set_new(genv, vars[i], json_string(eq + 1));
            }
        } else if (ns->mps) {
            sharing = "time-slicing"; /* several GPUs or processes cannot join per-GPU daemons */
        }
    } else {
        sharing = "cpu";
    }
    json_object_update(env, genv);
    char *gtext = json_dumps(gpus, JSON_COMPACT);
    char *etext = json_dumps(genv, JSON_COMPACT | JSON_SORT_KEYS);
    tp_placement_row_t row = {.trial = t->id,
                              .attempt = t->attempts,
                              .at = tp__wall_s(),
                              .node = node->name,
                              .gpus = gtext,
                              .memory_mib = t->demand.mem_mib,
                              .compute = t->demand.compute,
                              .cpus = r->x.res.cpus,
                              .sharing = sharing,
                              .env = etext};
    tp__journal_ok(&r->journal, tp__store_placement(tp__journal_tx(&r->journal), &row),
                   "recording a placement");
    free(gtext);
    free(etext);
    json_decref(gpus);
    json_decref(genv);
}

/* Where t's attempt runs, in words: "node:gpu,gpu" per node, "node" without
 * GPUs (the text `trials` shows, from the placements journaled). */
static void where_text(const tp_run_t *r, trial_t *t) {
    char *out = t->where_text;
    size_t n = sizeof t->where_text, k = 0;
    out[0] = 0;
    for (size_t s = 0; s < tp__trial_nshards(r, t) && k < n; s++) {
        const tp_assign_t *a = tp__trial_shard(t, s);
        const tp_node_t *node = &r->pl.cluster.nodes[a->node];
        k += (size_t)snprintf(out + k, n - k, "%s%s", s ? " " : "", node->name);
        for (size_t i = 0; i < a->ngpus && k < n; i++)
            k += (size_t)snprintf(out + k, n - k, "%c%d", i ? ',' : ':',
                                  node->gpus[a->gpu[i]].index);
    }
}

void tp__placement_attempt(tp_run_t *r, trial_t *t) {
    where_text(r, t);
    t->demand.peak_mib = 0;
    t->demand.sm_sum = 0;
    t->demand.samples = 0;
    tp__prof_reset(&t->demand.prof);
    json_decref(t->gpu_env);
    t->gpu_env = NULL; /* CPU-only runs keep none per trial */
    size_t nshards = tp__trial_nshards(r, t);
    if (r->pl.placing) {
        /* One environment object per shard; an object alone for one node. */
        t->gpu_env = nshards > 1 ? json_array() : json_object();
        for (size_t k = 0; k < nshards; k++) {
            json_t *env = nshards > 1 ? json_object() : t->gpu_env;
            journal_placement(r, t, tp__trial_shard(t, k), env);
            if (nshards > 1) json_array_append_new(t->gpu_env, env);
        }
    } else {
        /* Every attempt's nodes are journaled, GPUs or not (`trials` shows where). */
        for (size_t k = 0; k < nshards; k++) {
            tp_placement_row_t row = {.trial = t->id,
                                      .attempt = t->attempts,
                                      .at = tp__wall_s(),
                                      .node = r->pl.cluster.nodes[tp__trial_shard(t, k)->node].name,
                                      .gpus = "[]",
                                      .sharing = "cpu"};
            tp__journal_ok(&r->journal, tp__store_placement(tp__journal_tx(&r->journal), &row),
                           "recording a placement");
        }
    }
}

const char *tp__placement_host(const tp_run_t *r, size_t node) {
    const char *h = node < r->pl.cluster.nnodes ? r->pl.node[node].host : NULL;
    return h && *h ? h : "127.0.0.1";
}

/* ---- measuring ------------------------------------------------------------------ */

/* The GPU state as JSON, with our trials on each GPU, for `tunepack gpus`:
 * every node's last sample, each GPU naming its node on a cluster. The
 * trials are sorted onto their GPUs in one pass over them: a pass per GPU
 * stalled the loop for ~50 ms every 2 s with 800 GPUs and 20,000 trials
 * (bench/cluster_load.py). */
/* final: the run is over and none of our trials holds a GPU any more: each
 * GPU's memory in use is what the processes that are not ours hold (our
 * trials' share of the last sample is gone with them), and its use is 0
 * when nothing foreign runs there. */
static void save_snapshot(tp_run_t *r, int final) {
    json_t *snap = json_array();
    int many = r->x.cluster.kind != TP_CLUSTER_LOCAL;
    size_t nn = r->pl.cluster.nnodes, *base = tp__xcalloc(nn + 1, sizeof *base);
    for (size_t n = 0; n < nn; n++)
        base[n + 1] = base[n] + r->pl.cluster.nodes[n].ngpus;
    json_t **on = tp__xcalloc(base[nn] + 1, sizeof *on); /* per GPU: our trials there */
    for (size_t k = 0; k < base[nn]; k++)
        on[k] = json_array();
    for (size_t k = 0; k < tp__trials_n(&r->trials); k++) {
        trial_t *t = tp__trials_get(&r->trials, (int64_t)k);
        if (!t || t->state != TP_TRIAL_RUNNING || !t->where.placed) continue;
        for (size_t sh = 0; sh < tp__trial_nshards(r, t); sh++) {
            const tp_assign_t *a = tp__trial_shard(t, sh);
            for (size_t j = 0; a->node < nn && j < a->ngpus; j++)
                if (a->gpu[j] < r->pl.cluster.nodes[a->node].ngpus)
                    json_array_append_new(on[base[a->node] + a->gpu[j]], json_integer(t->id));
        }
    }
    for (size_t n = 0; n < nn; n++) {
        size_t i;
        json_t *e;
        json_array_foreach(r->pl.node[n].last_gpus, i, e) {
            json_t *copy = json_deep_copy(e);
            size_t pos;
            tp_gpu_t *g =
                tp__placement_gpu(r, n, (int)json_integer_value(json_object_get(e, "index")), &pos);
            json_object_set_new(copy, "trials", g ? json_incref(on[base[n] + pos]) : json_array());
            if (g) json_object_set_new(copy, "type", json_string(g->type));
            if (many) json_object_set_new(copy, "node", json_string(r->pl.cluster.nodes[n].name));
            if (final) {
                json_object_set(copy, "memory_used_mib", json_object_get(e, "foreign_mib"));
                if (json_array_size(json_object_get(e, "foreign")) == 0)
                    json_object_set_new(copy, "util", json_integer(0));
            }
            json_array_append_new(snap, copy);
        }
    }
    for (size_t k = 0; k < base[nn]; k++)
        json_decref(on[k]);
    free(on);
    free(base);
    char *text = json_dumps(snap, JSON_COMPACT);
    tp__journal_ok(&r->journal, tp__store_meta_set(tp__journal_tx(&r->journal), "gpus", text),
                   "recording the GPUs' state");
    free(text);
    json_decref(snap);
}

trial_t *tp__placement_sampled(tp_run_t *r, size_t n, const tp_msg_usage_trial_t *e) {
    trial_t *t = tp__trials_get(&r->trials, e->trial);
    if (!t || t->state != TP_TRIAL_RUNNING || t->where.node != n || t->attempts != e->attempt)
        return NULL;
    return t;
}

void tp__placement_on_usage(tp_run_t *r, size_t n, const tp_msg_usage_t *m) {
    r->pl.blocked = 0; /* foreign use, health or a measurement may have changed */
    tp_node_state_t *ns = &r->pl.node[n];
    double *busy = tp__xcalloc(r->pl.cluster.nodes[n].ngpus + 1, sizeof *busy);
    for (size_t i = 0; i < m->ngpus; i++) {
        const tp_msg_usage_gpu_t *e = &m->gpus[i];
        size_t pos;
        tp_gpu_t *g = tp__placement_gpu(r, n, e->index, &pos);
        if (!g) continue;
        ns->foreign_mib[pos] = e->foreign_mib;
        busy[pos] = (double)e->util;
        if (g->healthy && !e->healthy) tp__placement_note_unhealthy(r, n, g, e->error);
        g->healthy = e->healthy;
    }
    double now = tp__mono_s();
    for (size_t i = 0; i < m->ntrials; i++) {
        const tp_msg_usage_trial_t *e = &m->trials[i];
        trial_t *t = tp__placement_sampled(r, n, e);
        if (!t) continue;
        if (e->used_mib > t->demand.peak_mib) t->demand.peak_mib = e->used_mib;
        t->demand.sm_sum += (double)e->sm_util;
        t->demand.samples++;
        demand_group_t *g = t->demand.group >= 0 ? &r->pl.groups[t->demand.group] : NULL;
        if (!t->demand.profiling && g && g->measured && r->x.res.gpu_memory_auto &&
            (double)t->demand.peak_mib * PROFILE_HEADROOM > (double)g->mem_mib) {
            /* Live refinement: the group's trials need more than measured. */
            g->mem_mib = (uint64_t)ceil((double)t->demand.peak_mib * PROFILE_HEADROOM);
        }
    }
    tp__profiling_usage(r, n, m, busy, now); /* the profilers' samples (profiling.c) */
    free(busy);
    json_decref(ns->last_gpus); /* the sample as sent, for `tunepack gpus` */
    ns->last_gpus = json_incref((json_t *)m->gpus_json);
    if (now - r->pl.saved_at >= SNAPSHOT_PERIOD_S) {
        r->pl.saved_at = now;
        save_snapshot(r, 0);
    }
}

int tp__placement_oom(tp_run_t *r, trial_t *t, char *why, size_t n) {
    if (t->demand.group < 0 || !r->pl.cluster.nnodes) {
        snprintf(why, n, "out of GPU memory");
        return 0;
    }
    demand_group_t *g = &r->pl.groups[t->demand.group];
    uint64_t most = 0;
    for (size_t k = 0; k < r->pl.cluster.nnodes; k++) {
        const tp_node_t *node = &r->pl.cluster.nodes[k];
        for (size_t i = 0; i < node->ngpus; i++) {
            uint64_t usable = node->gpus[i].memory_mib > r->x.reserve_mib
                                  ? node->gpus[i].memory_mib - r->x.reserve_mib
                                  : 0;
            if (usable > most) most = usable;
        }
    }
    uint64_t old = t->demand.mem_mib > g->mem_mib ? t->demand.mem_mib : g->mem_mib;
    uint64_t grown = old + old / 2;
    if (t->demand.peak_mib + t->demand.peak_mib / 4 > grown)
        grown = t->demand.peak_mib + t->demand.peak_mib / 4;
    if (grown < old + 256) grown = old + 256;
    if (old >= most) {
        snprintf(why, n, "out of GPU memory with %llu MiB, as much as any GPU here offers",
                 (unsigned long long)old);
        return 0;
    }
    if (grown > most) grown = most;
    g->mem_mib = grown;
    g->measured = 1;
    snprintf(why, n, "out of GPU memory with %llu MiB; placing it again with %llu MiB",
             (unsigned long long)old, (unsigned long long)grown);
    return 1;
}

int tp__placement_ended(tp_run_t *r, trial_t *t) {
    if (tp__fuse_left(r, t)) { /* its process goes on: the others hold what it used */
        t->where.placed = 0;
        return 0;
    }
    r->pl.blocked = 0; /* what it held is free again */
    if (t->demand.profiling) tp__profiling_finish(r, t);
    t->where.placed = 0;
    tp__groups_gpu_changed(r, &t->where);
    free(t->demand.more);
    t->demand.more = NULL;
    return 1;
}

void tp__placement_left_group(tp_run_t *r, trial_t *t) {
    if (r->x.groups != TP_FLUID_DYNAMIC || !r->pl.placing) return;
    tp_usage_t u;
    current_usage(r, &u); /* without t (tp__placement_ended came first) */
    tp__groups_ended(r, t, &u);
    tp__usage_free(&u);
}

void tp__placement_node_down(tp_run_t *r, size_t n) {
    if (n >= r->pl.cluster.nnodes) return;
    tp_node_t *node = &r->pl.cluster.nodes[n];
    node->cpus = 0; /* nothing goes there until its agent says hello again */
    for (size_t i = 0; i < node->ngpus; i++)
        node->gpus[i].healthy = 0;
    r->pl.node[n].mps = 0;
    node->served = 0;
    json_decref(r->pl.node[n].last_gpus);
    r->pl.node[n].last_gpus = NULL;
}

void tp__placement_finish(tp_run_t *r) {
    /* The last sample, with what runs now (nothing of ours, at the end). */
    for (size_t n = 0; n < r->pl.cluster.nnodes; n++)
        if (r->pl.node[n].last_gpus) {
            save_snapshot(r, 1);
            break;
        }
}

int tp__placement_free_gpus(const tp_run_t *r, size_t node) {
    if (node >= r->pl.cluster.nnodes || node >= tp__agents_n(r) ||
        !tp__agents_link(r, node)->ready || tp__agents_link(r, node)->draining)
        return 0;
    const tp_node_t *nd = &r->pl.cluster.nodes[node];
    unsigned char used[TP_PLACE_MAX_GPUS * 16] = {0};
    for (size_t i = 0; i < tp__trials_n(&r->trials); i++) {
        const trial_t *t = tp__trials_get(&r->trials, (int64_t)i);
        if (!t || t->state != TP_TRIAL_RUNNING || !t->where.placed) continue;
        for (size_t s = 0; s < tp__trial_nshards(r, t); s++) {
            const tp_assign_t *a = tp__trial_shard(t, s);
            for (size_t k = 0; a->node == node && k < a->ngpus; k++)
                if (a->gpu[k] < sizeof used) used[a->gpu[k]] = 1;
        }
    }
    int n = 0;
    for (size_t g = 0; g < nd->ngpus && g < sizeof used; g++)
        n += nd->gpus[g].healthy && !used[g];
    return n;
}

void tp__placement_free(tp_run_t *r) {
    for (size_t n = 0; r->pl.node && n < r->pl.cluster.nnodes; n++) {
        json_decref(r->pl.node[n].last_gpus);
        free(r->pl.node[n].foreign_mib);
        free(r->pl.node[n].busy_base);
    }
    free(r->pl.node);
    for (size_t i = 0; i < r->pl.ngroups; i++)
        free(r->pl.groups[i].key);
    free(r->pl.groups);
    tp__place_plan_free(&r->pl.plan);
    json_decref(r->pl.group_index);
    tp__cluster_free(&r->pl.cluster);
}
