/* sim: the event loop. The real searcher asks, the real placer places, on
 * a virtual clock; trials progress by the contention model of sim.h.
 *
 * State: the cluster's usage (tp_usage_t, as the orchestrator keeps it),
 * per GPU its running trials and the time its state was last brought up to
 * date, and an indexed min-heap of GPUs keyed by their next finish. An
 * event touches one GPU: its trials are advanced to now, its rates
 * recomputed, its heap entry moved: O(log G + k). Finished trials leave
 * nothing behind unless intervals are recorded.
 *
 * With opts.profile_s, demand groups (model, batch) are measured first, as a
 * run with auto demand does (docs/gpus.md): a group's first trial is offered,
 * its group's other trials start beside it on a guess or wait (below), and
 * profile_s later (or at its end) the
 * group is measured: a second kind of event on its GPU, where the profiler's
 * reservation becomes its demand. Served (the run with no thread caps) places
 * each profiler at once, before the policy's round, as the run does: worst
 * fit with a provisional demand, beside trials already placed, so the
 * profilers of all groups start together; the group's other trials are
 * offered to the policy beside it on a guess (the provisional demand, its
 * memory x GUESS_MARGIN, compute / GUESS_MARGIN) and hold their own demand
 * once the profile ends (settle_guesses). Capped offers the profiler all of a GPU's compute and no
 * memory (only an empty GPU takes it), and there the others wait.
 *
 * Served admission: the placers keep a GPU's compute within 1 + oversubscribe;
 * the run admits a k-th trial while the GPU's compute stays within
 * C_k (1 + oversubscribe). Each round shows the placer a GPU's compute less
 * the headroom (C_{k+1} - 1)(1 + oversubscribe) of its next trial, and rounds
 * repeat while they place, so a GPU that took a trial is offered again with
 * the next step of the curve. */
#include "sim/sim.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "place/fluid.h"
#include "place/place_internal.h"
#include "search/search.h"
#include "sim/sim_nodes.h"
#include "space/space.h"

typedef struct rtrial {   /* a running trial */
    int64_t id;           /* searcher index */
    uint32_t gpu;         /* global GPU index */
    uint16_t lane, model; /* sub-lane; model index */
    int batch;
    double lr;
    double gpu_s, host_s; /* profile at speed 1 */
    tp_demand_t d;        /* what it holds in the usage */
    double p;             /* progress in [0, 1] */
    double rate;          /* progress per second now */
    double gw;            /* GPU-busy seconds per unit of progress now */
    double busy_s;        /* GPU-busy seconds so far */
    double start;         /* when it was placed */
    double shrink_at;     /* profiling: when d becomes real (INFINITY: not profiling) */
    tp_demand_t real;     /* its demand, once measured */
    uint32_t group;       /* its (model, batch) group */
    uint8_t guessed;      /* started beside its group's profiler on a guess: d is the guess */
} rtrial_t;

typedef struct gstate { /* one GPU */
    uint32_t *slots;    /* running trials (indexes into sim.run) */
    size_t n, cap;
    double last;     /* progress is up to date at this time */
    double busy;     /* min(1, D) now */
    double busy_int; /* integral of busy over time */
    uint64_t lanes;  /* sub-lanes in use */
    uint32_t next;   /* slot of the next event */
    int next_shrink; /* that event is a profile's end, not a finish */
} gstate_t;

typedef struct pend { /* a trial asked and not placed yet */
    tp_demand_t d;
    uint16_t model;
    int batch;
    double lr, gpu_s, host_s;
    uint32_t group; /* its (model, batch) group */
    double lost_at; /* a lost attempt's: when its node failed (limbo only) */
    uint32_t node;  /* a lost attempt's: its node (limbo only) */
} pend_t;

enum { GROUP_UNMEASURED, GROUP_PROFILING, GROUP_MEASURED }; /* with opts.profile_s */

typedef struct sgroup { /* a demand group: one model at one batch size */
    uint16_t model;
    int batch;
    uint8_t state;
    uint64_t mem_mib; /* its memory, once measured */
} sgroup_t;

typedef struct sim {
    const tp_workload_t *w;
    const tp_cluster_t *c;
    const tp_cluster_t *given; /* the caller's cluster (c is own's copy at cluster scale) */
    double now;                /* the time of the event handled last */
    tp_usage_t u;
    const tp_placer_ops_t *placer;
    tp_space_t space;
    tp_searcher_t *searcher;
    uint64_t next_index, limit;
    int exhausted;
    double overhead;
    int served;        /* TP_SIM_SERVED: uncapped, the served curve */
    int exclusive;     /* one-per-gpu: a profiler too is offered to the placer, alone */
    double ck[5];      /* C_k for k = 0..4 (C_0 = C_1 = 1); C_4 beyond; all 1 when capped */
    double *admit_off; /* per GPU, during a round: the headroom taken off its compute */
    size_t ngpus;
    uint32_t *node_of; /* per GPU */
    double *speed;     /* per GPU */
    gstate_t *g;
    rtrial_t *run; /* slot pool */
    size_t nrun, caprun;
    uint32_t *freeslot;
    size_t nfree;
    uint32_t *heap; /* GPU indexes */
    size_t *hpos;   /* per GPU: position in heap */
    double *key;    /* per GPU: next finish (INFINITY: idle) */
    pend_t *pend;
    size_t npend, window, cappend; /* cappend: room (the window, more with requeues) */
    /* cluster scale (opts.node_failures, queue_wait_s) */
    tp_cluster_t own;     /* the cluster's copy whose nodes go down and up (c points to it) */
    int scale;            /* nodes fail or queue: the model of sim_nodes.h is on */
    tp_sim_nodes_t nodes; /* their states and times */
    pend_t *limbo;        /* attempts on failed nodes not yet taken for lost */
    size_t nlimbo, caplimbo;
    int *node_cpus; /* per node: its CPUs while up */
    tp_demand_t *dbuf;
    tp_assign_t *abuf;
    size_t *offer;     /* per offered demand: its index in pend */
    uint8_t *taken;    /* per pending trial of a round: placed */
    uint8_t *profiler; /* per offered demand: it measures its group */
    uint8_t *guessed;  /* per offered demand: beside its group's profiler, on a guess */
    sgroup_t *grp;
    size_t ngrp, capgrp;
    int incremental;
    uint8_t *dirty; /* per node: freed since the last round */
    size_t *dirty_list, ndirty;
    tp_node_t *sub_nodes; /* the offered part of the cluster, reused */
    tp_usage_t sub_u;
    size_t running;
    size_t capint;              /* room in r->intervals */
    double smax;                /* the fastest GPU's speed */
    uint64_t most_mib;          /* the most memory a GPU offers (less the reserve) */
    double longest;             /* longest trial alone on the fastest GPU so far */
    tp_place_plan_t plan;       /* vpack's plan across rounds (place/plan.c) */
    tp_place_running_t *runbuf; /* what runs, for it */
    size_t caprunbuf;
    tp_sim_result_t *r;
    const tp_sim_opts_t *o;
    tp_error_t *err;
} sim_t;

/* ---- the heap of GPUs by next finish --------------------------------------- */

static int hless(const sim_t *S, uint32_t a, uint32_t b) {
    return S->key[a] < S->key[b] || (S->key[a] == S->key[b] && a < b);
}

static void hswap(sim_t *S, size_t i, size_t j) {
    uint32_t t = S->heap[i];
    S->heap[i] = S->heap[j];
    S->heap[j] = t;
    S->hpos[S->heap[i]] = i;
    S->hpos[S->heap[j]] = j;
}

/* Restore the heap around GPU gi after its key changed. O(log G). */
static void hfix(sim_t *S, uint32_t gi) {
    size_t i = S->hpos[gi];
    while (i > 0 && hless(S, S->heap[i], S->heap[(i - 1) / 2])) {
        hswap(S, i, (i - 1) / 2);
        i = (i - 1) / 2;
    }
    for (;;) {
        size_t l = 2 * i + 1, r = l + 1, m = i;
        if (l < S->ngpus && hless(S, S->heap[l], S->heap[m])) m = l;
        if (r < S->ngpus && hless(S, S->heap[r], S->heap[m])) m = r;
        if (m == i) break;
        hswap(S, i, m);
        i = m;
    }
}

/* ---- the contention model ------------------------------------------------- */

/* Bring GPU gi's trials up to time now at their current rates. O(k). */
static void advance(sim_t *S, uint32_t gi, double now) {
    gstate_t *g = &S->g[gi];
    double dt = now - g->last;
    if (dt > 0) {
        for (size_t i = 0; i < g->n; i++) {
            rtrial_t *t = &S->run[g->slots[i]];
            t->p += t->rate * dt;
            t->busy_s += t->rate * t->gw * dt;
        }
        g->busy_int += g->busy * dt;
    }
    g->last = now;
}

/* Rates of GPU gi's trials for its current set (the model in sim.h), its
 * next finish into the heap. O(k + log G). */
static void recompute(sim_t *S, uint32_t gi) {
    gstate_t *g = &S->g[gi];
    double s = S->speed[gi], next = INFINITY;
    double m = 1.0 + S->overhead * (g->n ? (double)(g->n - 1) : 0.0), D = 0;
    double ck = S->ck[g->n < 4 ? g->n : 4];
    for (size_t i = 0; i < g->n; i++) {
        rtrial_t *t = &S->run[g->slots[i]];
        t->gw = m * t->gpu_s / s;
        double T = t->host_s + t->gw;
        t->rate = 1.0 / T;
        D += t->gw / T;
    }
    double f = D > ck ? ck / D : 1.0;
    for (size_t i = 0; i < g->n; i++) {
        rtrial_t *t = &S->run[g->slots[i]];
        t->rate *= f;
        double left = (1.0 - t->p) / t->rate;
        if (left < 0) left = 0;
        if (g->last + left < next) {
            next = g->last + left;
            g->next = g->slots[i];
            g->next_shrink = 0;
        }
        if (t->shrink_at < next) {
            next = t->shrink_at;
            g->next = g->slots[i];
            g->next_shrink = 1;
        }
    }
    g->busy = D < ck ? D / ck : 1.0;
    S->r->gpu_updates += g->n + 1;
    S->key[gi] = next;
    hfix(S, gi);
}

/* ---- trials ------------------------------------------------------------- */

static const char *cfg_str(const json_t *cfg, const char *k) {
    return json_string_value(json_object_get(cfg, k));
}

/* The demand group of (model, batch), added (unmeasured when profiling is
 * modelled) if new. Linear: a space has few. */
static uint32_t group_of(sim_t *S, uint16_t model, int batch) {
    for (size_t k = 0; k < S->ngrp; k++)
        if (S->grp[k].model == model && S->grp[k].batch == batch) return (uint32_t)k;
    S->grp = tp__xgrow(S->grp, &S->capgrp, S->ngrp + 1, sizeof *S->grp, 16);
    S->grp[S->ngrp] = (sgroup_t){.model = model,
                                 .batch = batch,
                                 .state = S->o->profile_s > 0 ? GROUP_UNMEASURED : GROUP_MEASURED};
    return (uint32_t)S->ngrp++;
}

/* Ask the searcher until the window is full or it has no more. */
static int refill(sim_t *S) {
    while (!S->exhausted && S->npend < S->window) {
        if (S->limit && S->next_index >= S->limit) {
            S->exhausted = 1;
            break;
        }
        json_t *cfg = NULL;
        int rc = tp__searcher_ask(S->searcher, S->next_index, 0, S->r->makespan_s, &cfg);
        if (rc <= 0) {
            if (rc == 0) S->exhausted = 1;
            break; /* -EAGAIN: grid and random never wait */
        }
        const char *model = cfg_str(cfg, "model");
        size_t mi = 0;
        while (model && mi < S->w->nmodels && strcmp(S->w->models[mi].name, model) != 0)
            mi++;
        json_t *b = json_object_get(cfg, "batch_size"), *lr = json_object_get(cfg, "lr");
        if (!model || mi == S->w->nmodels || !json_is_integer(b) || !json_is_number(lr)) {
            json_decref(cfg);
            return tp__errorf(S->err, -EINVAL,
                              "trial %llu: the searcher proposed a configuration "
                              "with no known model, batch_size or lr",
                              (unsigned long long)S->next_index);
        }
        tp_wl_job_t j = tp__workload_profile(&S->w->models[mi], (int)json_integer_value(b),
                                             json_number_value(lr));
        json_decref(cfg);
        pend_t *p = &S->pend[S->npend++];
        p->d = (tp_demand_t){.id = (int64_t)S->next_index,
                             .gpus = 1,
                             .memory_mib = j.memory_mib,
                             .compute = j.util,
                             .cpus = j.cpus,
                             .duration_s = j.time_s};
        p->model = (uint16_t)mi;
        p->batch = j.batch;
        p->group = group_of(S, (uint16_t)mi, j.batch);
        p->lr = j.lr;
        p->gpu_s = j.gpu_s;
        p->host_s = j.host_s + S->o->trial_startup_s; /* its start-up is host time */
        p->d.duration_s += S->o->trial_startup_s;
        S->r->total_gpu_s += j.gpu_s;
        S->longest = fmax(S->longest, p->host_s + j.gpu_s / S->smax);
        S->next_index++;
    }
    return 0;
}

/* Start pending trial p on GPU gpu of node, holding d (its demand, or a
 * profiler's provisional one or whole GPU: then profiling; or a guess
 * beside its group's profiler: guessed). */
static void start_trial(sim_t *S, const pend_t *p, const tp_demand_t *d, size_t node, size_t gpu,
                        int guessed, double now) {
    uint32_t gi = (uint32_t)(S->u.gpu_base[node] + gpu);
    uint32_t slot;
    if (S->nfree) {
        slot = S->freeslot[--S->nfree];
    } else {
        if (S->nrun == S->caprun) {
            size_t old = S->caprun;
            S->run = tp__xgrow(S->run, &S->caprun, S->nrun + 1, sizeof *S->run, 256);
            S->freeslot = tp__xresize(S->freeslot, old, S->caprun, sizeof *S->freeslot);
        }
        slot = (uint32_t)S->nrun++;
    }
    gstate_t *g = &S->g[gi];
    advance(S, gi, now);
    uint16_t lane = 0;
    while (lane < 63 && (g->lanes >> lane & 1))
        lane++;
    g->lanes |= (uint64_t)1 << lane;
    int profiling = !guessed && S->grp[p->group].state == GROUP_PROFILING;
    S->run[slot] = (rtrial_t){.id = p->d.id,
                              .gpu = gi,
                              .lane = lane,
                              .model = p->model,
                              .batch = p->batch,
                              .lr = p->lr,
                              .gpu_s = p->gpu_s,
                              .host_s = p->host_s,
                              .d = *d,
                              .start = now,
                              .real = p->d,
                              .group = p->group,
                              .guessed = (uint8_t)guessed,
                              .shrink_at = profiling ? now + S->o->profile_s : INFINITY};
    g->slots = tp__xgrow(g->slots, &g->cap, g->n + 1, sizeof *g->slots, 4);
    g->slots[g->n++] = slot;
    if ((int)g->n > S->r->max_colocated) S->r->max_colocated = (int)g->n;
    S->running++;
    S->r->events++;
    recompute(S, gi);
}

/* Node freed something since the last round (incremental rounds offer it). */
static void mark_dirty(sim_t *S, size_t node) {
    if (!S->dirty[node]) {
        S->dirty[node] = 1;
        S->dirty_list[S->ndirty++] = node;
    }
}

/* What a trial on GPU gi holds, as the placer's decision for it. */
static tp_assign_t held_on(const sim_t *S, uint32_t gi) {
    size_t node = S->node_of[gi];
    return (tp_assign_t){.placed = 1, .node = node, .ngpus = 1, .gpu = {gi - S->u.gpu_base[node]}};
}

/* Group k is measured at time now: each trial of it running on a guess
 * holds its own demand from now on, as the run's do (src/run/profiling.c).
 * GPU gi (whose event this is) is advanced and recomputed by its caller.
 * O(running). */
static void settle_guesses(sim_t *S, uint32_t k, uint32_t gi, double now) {
    for (uint32_t gj = 0; gj < S->ngpus; gj++) {
        gstate_t *g = &S->g[gj];
        int changed = 0;
        for (size_t i = 0; i < g->n; i++) {
            rtrial_t *t = &S->run[g->slots[i]];
            if (!t->guessed || t->group != k) continue;
            if (!changed && gj != gi) advance(S, gj, now);
            tp_assign_t held = held_on(S, gj);
            tp__place_release(S->c, &S->u, &t->d, &held);
            tp__place_commit(S->c, &S->u, &t->real, &held);
            t->d = t->real;
            t->guessed = 0;
            changed = 1;
        }
        if (!changed) continue;
        mark_dirty(S, S->node_of[gj]);
        if (gj != gi) recompute(S, gj);
    }
}

/* Trial at position i of GPU gi's list ends at time now: give back what it
 * held, record it, free its slot. */
static void finish_trial(sim_t *S, uint32_t gi, size_t i, double now) {
    gstate_t *g = &S->g[gi];
    uint32_t slot = g->slots[i];
    rtrial_t *t = &S->run[slot];
    size_t node = S->node_of[gi];
    tp_assign_t held = held_on(S, gi);
    tp__place_release(S->c, &S->u, &t->d, &held);
    if (t->shrink_at < INFINITY) { /* ended while profiling: measured */
        S->grp[t->group].state = GROUP_MEASURED;
        S->grp[t->group].mem_mib = t->real.memory_mib;
        settle_guesses(S, t->group, gi, now);
    }
    g->lanes &= ~((uint64_t)1 << t->lane);
    if (S->o->record) {
        tp_sim_result_t *r = S->r;
        r->intervals =
            tp__xgrow(r->intervals, &S->capint, r->nintervals + 1, sizeof *r->intervals, 256);
        /* zeroed first: the padding too, so that equal runs compare equal byte for byte */
        tp_sim_interval_t *iv = &r->intervals[r->nintervals++];
        memset(iv, 0, sizeof *iv);
        iv->trial = t->id;
        iv->gpu = gi;
        iv->lane = t->lane;
        iv->model = t->model;
        iv->batch = t->batch;
        iv->lr = t->lr;
        iv->start_s = t->start;
        iv->end_s = now;
        iv->busy_s = t->busy_s;
    }
    g->slots[i] = g->slots[--g->n];
    S->freeslot[S->nfree++] = slot;
    S->running--;
    S->r->trials++;
    S->r->events++;
    if (now > S->r->makespan_s) S->r->makespan_s = now;
    mark_dirty(S, node);
}

/* A profiling trial's measurement is done at time now: its reservation
 * becomes its demand, and so do those of its group's trials started on a
 * guess; its group's trials are placed by their demand from now on. */
static void end_profile(sim_t *S, uint32_t gi, rtrial_t *t, double now) {
    tp_assign_t held = held_on(S, gi);
    tp__place_release(S->c, &S->u, &t->d, &held);
    tp__place_commit(S->c, &S->u, &t->real, &held);
    t->d = t->real;
    t->shrink_at = INFINITY;
    S->grp[t->group].state = GROUP_MEASURED;
    S->grp[t->group].mem_mib = t->real.memory_mib;
    settle_guesses(S, t->group, gi, now);
    S->r->events++;
    mark_dirty(S, held.node);
}

/* GPU gi's next finish is due at time t: end every trial done by then. */
static void gpu_finishes(sim_t *S, uint32_t gi, double t) {
    gstate_t *g = &S->g[gi];
    advance(S, gi, t);
    uint32_t first = g->next;
    if (g->next_shrink) { /* a profile's end, and any other due now */
        double tol = 1e-9 * (t > 1 ? t : 1);
        for (size_t i = 0; i < g->n; i++) {
            rtrial_t *tr = &S->run[g->slots[i]];
            if (g->slots[i] == first || tr->shrink_at <= t + tol) end_profile(S, gi, tr, t);
        }
        first = UINT32_MAX; /* no trial is forced to finish */
    }
    for (size_t i = 0; i < g->n;) {
        rtrial_t *tr = &S->run[g->slots[i]];
        if (g->slots[i] == first || tr->p >= 1.0 - 1e-9) {
            tr->p = 1.0;
            finish_trial(S, gi, i, t);
        } else {
            i++;
        }
    }
    recompute(S, gi);
}

/* ---- placement rounds ---------------------------------------------------- */

/* Served admission around a round (on = 1 before it, 0 after): each GPU's
 * compute in use is shown less the headroom its next trial gets from the
 * served curve, (C_{k+1} - 1)(1 + oversubscribe) with k trials on it, and
 * restored after, the placer's own commits kept. With sharing off nothing
 * changes. O(G). */
static void headroom_of(sim_t *S, size_t gi, int on, double cap) {
    if (on) {
        int k = S->u.count[gi] + 1;
        S->admit_off[gi] = (S->ck[k < 4 ? k : 4] - 1.0) * cap;
    }
    S->u.compute_used[gi] += on ? -S->admit_off[gi] : S->admit_off[gi];
}

/* ... over the whole cluster, or (few) only the GPUs of the nodes a partial
 * round offers when nothing else reads the usage in the round (no profiler
 * is placed beside it): O(G), or O(the offered GPUs). */
static void admit_headroom(sim_t *S, int on, int few) {
    if (!S->c->limits.sharing) return;
    double cap = 1.0 + S->c->limits.oversubscribe;
    if (!few) {
        for (size_t gi = 0; gi < S->ngpus; gi++)
            headroom_of(S, gi, on, cap);
        return;
    }
    for (size_t k = 0; k < S->ndirty; k++) {
        size_t nd = S->dirty_list[k], base = S->u.gpu_base[nd];
        for (size_t g = 0; g < S->c->nodes[nd].ngpus; g++)
            headroom_of(S, base + g, on, cap);
    }
}

/* What the run places a profiler with while its group is unmeasured
 * (src/run/placement.c, issue 31): compute 0.25 and 2 GiB unless a measured
 * group holds more memory; here never less memory than the trial's own, since
 * the run counts what a profiler uses once that is more. */
#define PROFILE_GUESS_COMPUTE 0.25
#define PROFILE_GUESS_MIB 2048
#define GUESS_MARGIN 2 /* a sibling on a guess: provisional memory x this, compute / this */

/* The provisional demand of pending trial p's group, as the run's
 * provisional_demand. O(groups). */
static tp_demand_t provisional(const sim_t *S, const pend_t *p) {
    tp_demand_t d = p->d;
    d.compute = PROFILE_GUESS_COMPUTE;
    d.memory_mib = p->d.memory_mib > PROFILE_GUESS_MIB ? p->d.memory_mib : PROFILE_GUESS_MIB;
    for (size_t k = 0; k < S->ngrp; k++)
        if (S->grp[k].state == GROUP_MEASURED && S->grp[k].mem_mib > d.memory_mib)
            d.memory_mib = S->grp[k].mem_mib;
    if (d.memory_mib > S->most_mib) d.memory_mib = p->d.memory_mib; /* the guess must fit */
    return d;
}

/* Served: start pending trial i, its group's profiler, now, as the run does
 * before the policy's round: on the GPU with the most free compute where its
 * provisional demand fits (tp__place_wf_gpu), beside what runs there. Its
 * group is measured profile_s later (end_profile: the demand becomes its
 * own). Returns 1 if started, 0 if no GPU has room now (offered again in a
 * later round). O(G). */
static int start_profiler(sim_t *S, size_t i, double now) {
    const pend_t *p = &S->pend[i];
    tp_demand_t d = provisional(S, p);
    size_t gi = tp__place_wf_gpu(S->c, &S->u, &d);
    if (gi == SIZE_MAX) return 0;
    tp_assign_t a = held_on(S, (uint32_t)gi);
    tp__place_commit(S->c, &S->u, &d, &a);
    S->grp[p->group].state = GROUP_PROFILING;
    start_trial(S, p, &d, a.node, a.gpu[0], 0, now);
    S->taken[i] = 1;
    return 1;
}

/* Offer the first `window` pending trials to the placer over the whole
 * cluster (full) or the nodes freed since the last round (incremental);
 * start those placed. Returns how many were placed, or -errno. */
static long place_round(sim_t *S, double now, int whole) {
    size_t n = S->npend < S->window ? S->npend : S->window, m = 0;
    if (!n) return 0;
    long placed = 0;
    memset(S->taken, 0, n);
    /* a partial round with no profiler to place reads only the offered nodes' usage */
    int few = !whole && S->ndirty < S->c->nnodes && S->o->profile_s <= 0;
    if (S->served) admit_headroom(S, 1, few);
    for (size_t i = 0; i < n; i++) { /* what is offered: all, less groups being measured */
        sgroup_t *gr = &S->grp[S->pend[i].group];
        S->guessed[m] = 0;
        if (gr->state == GROUP_PROFILING) { /* its profiler runs, or is offered */
            if (!S->served || S->exclusive || S->o->profile_wait) continue;
            /* served: its profiler runs; this one is offered beside it on a guess */
            S->dbuf[m] = provisional(S, &S->pend[i]);
            S->dbuf[m].memory_mib *= GUESS_MARGIN;
            S->dbuf[m].compute /= GUESS_MARGIN;
            if (S->dbuf[m].memory_mib > S->most_mib) continue; /* no GPU takes the guess */
            S->profiler[m] = 0, S->guessed[m] = 1;
            S->offer[m++] = i;
            continue;
        }
        S->dbuf[m] = S->pend[i].d;
        /* one that fits no GPU is offered as it is, and named by the loop's error */
        S->profiler[m] = gr->state == GROUP_UNMEASURED && S->pend[i].d.memory_mib <= S->most_mib;
        if (S->profiler[m] && S->served && !S->exclusive) { /* placed now, by the run's rule */
            placed += start_profiler(S, i, now);
            continue;
        }
        if (S->profiler[m]) { /* this one measures it */
            gr->state = GROUP_PROFILING;
            if (!S->served) { /* alone on a GPU, as the run with caps */
                S->dbuf[m].memory_mib = 0;
                S->dbuf[m].compute = 1.0 + S->c->limits.oversubscribe;
            }
        }
        S->offer[m++] = i;
    }
    memset(S->abuf, 0, m * sizeof *S->abuf);
    const tp_cluster_t *c = S->c;
    tp_usage_t *u = &S->u;
    tp_cluster_t sub;
    int partial = !whole && S->ndirty < S->c->nnodes;
    if (partial) {
        if (!S->ndirty) {
            if (S->served) admit_headroom(S, 0, few);
            return 0;
        }
        sub = (tp_cluster_t){.nodes = S->sub_nodes, .nnodes = S->ndirty, .limits = S->c->limits};
        size_t gb = 0;
        for (size_t k = 0; k < S->ndirty; k++) {
            size_t nd = S->dirty_list[k], base = S->u.gpu_base[nd], ng = S->c->nodes[nd].ngpus;
            S->sub_nodes[k] = S->c->nodes[nd];
            S->sub_u.gpu_base[k] = gb;
            S->sub_u.cpus_used[k] = S->u.cpus_used[nd];
            memcpy(S->sub_u.mem_used + gb, S->u.mem_used + base, ng * sizeof *S->u.mem_used);
            memcpy(S->sub_u.compute_used + gb, S->u.compute_used + base,
                   ng * sizeof *S->u.compute_used);
            memcpy(S->sub_u.count + gb, S->u.count + base, ng * sizeof *S->u.count);
            gb += ng;
        }
        S->sub_u.ngpus = gb;
        c = &sub;
        u = &S->sub_u;
    }
    S->r->rounds++;
    tp_place_effort_t effort = {.time_limit_s = 10.0, .in_run = 1};
    if (!partial) { /* what runs now and the plan: as a run gives them */
        if (S->caprunbuf < S->running) {
            S->caprunbuf = 2 * S->running + 16;
            S->runbuf = tp__xrealloc(S->runbuf, S->caprunbuf * sizeof *S->runbuf);
        }
        size_t k = 0;
        for (uint32_t gi = 0; gi < S->ngpus; gi++) {
            gstate_t *g = &S->g[gi];
            advance(S, gi, now);
            for (size_t i = 0; i < g->n && k < S->caprunbuf; i++) {
                const rtrial_t *t = &S->run[g->slots[i]];
                S->runbuf[k++] = (tp_place_running_t){.gpu = gi, .d = t->d, .left = 1.0 - t->p};
            }
        }
        effort.plan = &S->plan, effort.running = S->runbuf, effort.nrunning = k;
        effort.mps_overhead = S->overhead;
    }
    int prc = m ? S->placer->place(c, u, S->dbuf, m, S->abuf, &effort, S->err) : 0;
    if (partial) { /* the decisions' usage back into the whole cluster's */
        for (size_t k = 0; k < S->ndirty; k++) {
            size_t nd = S->dirty_list[k], base = S->u.gpu_base[nd], ng = S->c->nodes[nd].ngpus;
            size_t gb = S->sub_u.gpu_base[k];
            S->u.cpus_used[nd] = S->sub_u.cpus_used[k];
            memcpy(S->u.mem_used + base, S->sub_u.mem_used + gb, ng * sizeof *S->u.mem_used);
            memcpy(S->u.compute_used + base, S->sub_u.compute_used + gb,
                   ng * sizeof *S->u.compute_used);
            memcpy(S->u.count + base, S->sub_u.count + gb, ng * sizeof *S->u.count);
        }
    }
    if (S->served) admit_headroom(S, 0, few);
    if (prc != 0) return -EINVAL;
    for (size_t k = 0; k < m; k++) {
        const pend_t *p = &S->pend[S->offer[k]];
        if (!S->abuf[k].placed) {
            if (S->profiler[k]) S->grp[p->group].state = GROUP_UNMEASURED; /* offered again */
            continue;
        }
        if (S->abuf[k].ngpus != 1)
            return tp__errorf(S->err, -EINVAL,
                              "trial %lld: the placer gave it %zu GPUs; the "
                              "simulator models single-GPU trials only",
                              (long long)p->d.id, S->abuf[k].ngpus);
        size_t node = partial ? S->dirty_list[S->abuf[k].node] : S->abuf[k].node;
        start_trial(S, p, &S->dbuf[k], node, S->abuf[k].gpu[0], S->guessed[k], now);
        S->taken[S->offer[k]] = 1;
        placed++;
    }
    size_t keep = 0;
    for (size_t i = 0; i < n; i++)
        if (!S->taken[i]) S->pend[keep++] = S->pend[i];
    memmove(S->pend + keep, S->pend + n, (S->npend - n) * sizeof *S->pend);
    S->npend -= n - keep;
    return placed;
}

/* Rounds at time now: repeated while they place trials and fresh ones come
 * into the window, then the freed nodes are forgotten. */
static int schedule(sim_t *S, double now, int whole) {
    int rc = refill(S);
    if (rc < 0) return rc;
    for (;;) {
        long placed = place_round(S, now, whole || !S->incremental);
        if (placed < 0) return (int)placed;
        if (placed == 0) break;
        uint64_t before = S->next_index;
        rc = refill(S);
        if (rc < 0) return rc;
        /* nothing new to offer; served: the GPUs that took a trial have more room */
        if (S->next_index == before && !S->served) break;
    }
    for (size_t k = 0; k < S->ndirty; k++)
        S->dirty[S->dirty_list[k]] = 0;
    S->ndirty = 0;
    return 0;
}

/* ---- cluster scale: nodes that fail, are lost, queue and join ------------ */

/* p back in the pending queue, in trial-id order: the run's pending queue is
 * a min-heap of ids (src/run/trial_state.c), so a requeued trial is offered
 * before the later ones. O(pending). */
static void requeue(sim_t *S, const pend_t *p) {
    S->pend = tp__xgrow(S->pend, &S->cappend, S->npend + 1, sizeof *S->pend, S->window);
    size_t i = S->npend++;
    while (i > 0 && S->pend[i - 1].d.id > p->d.id) {
        S->pend[i] = S->pend[i - 1];
        i--;
    }
    S->pend[i] = *p;
}

/* Node k failed at time now: its trials stop (their progress is lost; no
 * checkpoint is modelled, as a run without checkpoint_root, docs/cluster.md)
 * and wait in limbo until the node is taken for lost; its GPUs take nothing
 * more (as the run's tp__placement_node_down). A profiler lost gives its
 * group back: another trial measures it. O(trials on k). */
static void node_fails(sim_t *S, size_t k, double now) {
    tp_node_t *node = &S->own.nodes[k];
    for (size_t j = 0; j < node->ngpus; j++) {
        uint32_t gi = (uint32_t)(S->u.gpu_base[k] + j);
        gstate_t *g = &S->g[gi];
        advance(S, gi, now);
        while (g->n) {
            uint32_t slot = g->slots[--g->n];
            rtrial_t *t = &S->run[slot];
            tp_assign_t held = held_on(S, gi);
            tp__place_release(S->c, &S->u, &t->d, &held);
            if (t->shrink_at < INFINITY) S->grp[t->group].state = GROUP_UNMEASURED;
            g->lanes &= ~((uint64_t)1 << t->lane);
            S->limbo = tp__xgrow(S->limbo, &S->caplimbo, S->nlimbo + 1, sizeof *S->limbo, 64);
            S->limbo[S->nlimbo++] = (pend_t){.d = t->real,
                                             .model = t->model,
                                             .batch = t->batch,
                                             .lr = t->lr,
                                             .gpu_s = t->gpu_s,
                                             .host_s = t->host_s,
                                             .group = t->group,
                                             .lost_at = now,
                                             .node = (uint32_t)k};
            S->r->lost_s += now - t->start;
            S->freeslot[S->nfree++] = slot;
            S->running--;
        }
        recompute(S, gi);
        node->gpus[j].healthy = 0;
    }
    node->cpus = 0;
}

/* A node event at time now (sim_nodes.h): a failure stops its trials; taken
 * for lost, its trials go back to the pending queue and a whole round
 * places them, as the run places a lost agent's interrupted attempts; a
 * node that joins is offered like a freed one. 0 or -errno. */
static int node_event(sim_t *S, double now) {
    size_t k = S->nodes.next;
    tp_sim_node_state_t st = tp__sim_nodes_step(&S->nodes, k, now);
    if (st == TP_SIM_NODE_DEAD) {
        node_fails(S, k, now);
        return 0;
    }
    if (st == TP_SIM_NODE_QUEUED) {
        size_t keep = 0;
        for (size_t i = 0; i < S->nlimbo; i++) {
            if (S->limbo[i].node != k) {
                S->limbo[keep++] = S->limbo[i];
                continue;
            }
            requeue(S, &S->limbo[i]);
            S->r->requeued++;
        }
        S->nlimbo = keep;
        return schedule(S, now, 1);
    }
    tp_node_t *node = &S->own.nodes[k]; /* joined */
    node->cpus = S->given->nodes[k].cpus;
    for (size_t j = 0; j < node->ngpus; j++)
        node->gpus[j].healthy = S->given->nodes[k].gpus[j].healthy;
    mark_dirty(S, k);
    return schedule(S, now, 0);
}

/* The cluster's copy whose nodes go down and up; with a queue wait every
 * node starts queued (down). O(GPUs). */
static void own_cluster(sim_t *S) {
    const tp_cluster_t *c = S->given;
    S->own = (tp_cluster_t){.nnodes = c->nnodes, .limits = c->limits};
    S->own.nodes = tp__xcalloc(c->nnodes ? c->nnodes : 1, sizeof *S->own.nodes);
    for (size_t n = 0; n < c->nnodes; n++) {
        S->own.nodes[n] = c->nodes[n];
        S->own.nodes[n].gpus = tp__xcalloc(c->nodes[n].ngpus + 1, sizeof(tp_gpu_t));
        memcpy(S->own.nodes[n].gpus, c->nodes[n].gpus, c->nodes[n].ngpus * sizeof(tp_gpu_t));
    }
    S->c = &S->own;
    tp__sim_nodes_init(&S->nodes, c->nnodes, S->o->node_failures, S->o->queue_wait_s, S->o->seed);
    for (size_t n = 0; n < c->nnodes; n++) {
        if (S->nodes.state[n] != TP_SIM_NODE_QUEUED) continue;
        S->own.nodes[n].cpus = 0;
        for (size_t j = 0; j < S->own.nodes[n].ngpus; j++)
            S->own.nodes[n].gpus[j].healthy = 0;
    }
}

/* ---- setup and the loop --------------------------------------------------- */

static void sim_free(sim_t *S) {
    if (S->scale) {
        tp__cluster_free(&S->own);
        tp__sim_nodes_free(&S->nodes);
    }
    free(S->limbo);
    tp__place_plan_free(&S->plan);
    free(S->runbuf);
    if (S->searcher) tp__searcher_free(S->searcher);
    tp__space_free(&S->space);
    tp__usage_free(&S->u);
    tp__usage_free(&S->sub_u);
    if (S->g)
        for (size_t i = 0; i < S->ngpus; i++)
            free(S->g[i].slots);
    free(S->g);
    free(S->node_of);
    free(S->speed);
    free(S->run);
    free(S->freeslot);
    free(S->heap);
    free(S->hpos);
    free(S->key);
    free(S->pend);
    free(S->dbuf);
    free(S->abuf);
    free(S->offer);
    free(S->taken);
    free(S->profiler);
    free(S->guessed);
    free(S->admit_off);
    free(S->grp);
    free(S->dirty);
    free(S->dirty_list);
    free(S->sub_nodes);
}

static int sim_setup(sim_t *S, const tp_workload_t *w, const char *space, const tp_cluster_t *c,
                     const tp_sim_opts_t *o) {
    S->w = w;
    S->c = S->given = c;
    S->o = o;
    S->scale = o->node_failures > 0 || o->queue_wait_s > 0;
    if (S->scale) own_cluster(S);
    c = S->c;
    const char *pname = o->policy ? o->policy : TP_PLACE_DEFAULT_POLICY;
    S->placer = tp__placer_find(pname);
    if (!S->placer) {
        const char *names[16] = {0};
        size_t n = 0;
        for (; tp__placers[n] && n < 16; n++)
            names[n] = tp__placers[n]->name;
        const char *guess = tp__did_you_mean(pname, names, n);
        return tp__errorf(S->err, -EINVAL, "unknown policy \"%s\"%s%s%s", pname,
                          guess ? "; did you mean \"" : "", guess ? guess : "", guess ? "\"?" : "");
    }
    snprintf(S->r->policy, sizeof S->r->policy, "%s", S->placer->name);
    int rc = tp__sim_space(w, space, &S->space, S->err);
    if (rc < 0) return rc;
    tp_search_cfg_t cfg = {.algorithm = o->searcher ? o->searcher : "grid", .seed = o->seed};
    uint64_t gsize = tp__space_grid_size(&S->space);
    if (strcmp(cfg.algorithm, "grid") == 0)
        cfg.trials = o->trials ? (o->trials + gsize - 1) / gsize : 1;
    else
        cfg.trials = o->trials ? o->trials : gsize;
    S->limit = o->trials;
    S->searcher = tp__searcher_new(&S->space, &cfg, 1, S->err);
    if (!S->searcher) return -EINVAL;
    S->overhead = o->overhead < 0 ? 0.03 : o->overhead;
    S->served = o->model == TP_SIM_SERVED;
    S->exclusive = strcmp(S->placer->name, "one-per-gpu") == 0;
    for (int k = 0; k <= 4; k++)
        S->ck[k] = S->served ? tp__fluid_served(o->served, k) : 1.0;
    if (tp__usage_init(&S->u, c) < 0) return tp__errorf(S->err, -ENOMEM, "out of memory");
    S->ngpus = S->u.ngpus;
    if (!S->ngpus) return tp__errorf(S->err, -EINVAL, "the cluster has no GPUs");
    if (tp__usage_init(&S->sub_u, c) < 0) return tp__errorf(S->err, -ENOMEM, "out of memory");
    S->g = tp__xcalloc(S->ngpus, sizeof *S->g);
    S->node_of = tp__xcalloc(S->ngpus, sizeof *S->node_of);
    S->speed = tp__xcalloc(S->ngpus, sizeof *S->speed);
    S->heap = tp__xcalloc(S->ngpus, sizeof *S->heap);
    S->hpos = tp__xcalloc(S->ngpus, sizeof *S->hpos);
    S->key = tp__xcalloc(S->ngpus, sizeof *S->key);
    S->admit_off = tp__xcalloc(S->ngpus, sizeof *S->admit_off);
    for (size_t n = 0; n < c->nnodes; n++)
        for (size_t k = 0; k < c->nodes[n].ngpus; k++) {
            size_t gi = S->u.gpu_base[n] + k;
            S->node_of[gi] = (uint32_t)n;
            double s = c->nodes[n].gpus[k].speed > 0 ? c->nodes[n].gpus[k].speed : 1.0;
            S->speed[gi] = s;
            S->r->sum_speed += s;
            if (s > S->smax) S->smax = s;
            uint64_t mib = c->nodes[n].gpus[k].memory_mib, res = c->limits.reserve_mib;
            if (mib > res && mib - res > S->most_mib) S->most_mib = mib - res;
        }
    for (size_t i = 0; i < S->ngpus; i++) {
        S->heap[i] = (uint32_t)i;
        S->hpos[i] = i;
        S->key[i] = INFINITY;
    }
    S->incremental = o->rounds == TP_SIM_ROUNDS_INCREMENTAL ||
                     (o->rounds == TP_SIM_ROUNDS_AUTO && S->ngpus > 1024);
    S->r->rounds_mode = S->incremental ? TP_SIM_ROUNDS_INCREMENTAL : TP_SIM_ROUNDS_FULL;
    S->window = o->window ? o->window : S->incremental ? 64 : 4096;
    S->cappend = S->window;
    S->pend = tp__xcalloc(S->window, sizeof *S->pend);
    S->dbuf = tp__xcalloc(S->window, sizeof *S->dbuf);
    S->abuf = tp__xcalloc(S->window, sizeof *S->abuf);
    S->offer = tp__xcalloc(S->window, sizeof *S->offer);
    S->taken = tp__xcalloc(S->window, 1);
    S->profiler = tp__xcalloc(S->window, 1);
    S->guessed = tp__xcalloc(S->window, 1);
    S->dirty = tp__xcalloc(c->nnodes, 1);
    S->dirty_list = tp__xcalloc(c->nnodes, sizeof *S->dirty_list);
    S->sub_nodes = tp__xcalloc(c->nnodes, sizeof *S->sub_nodes);
    return 0;
}

int tp__sim_run(const tp_workload_t *w, const char *space, const tp_cluster_t *c,
                const tp_sim_opts_t *o, tp_sim_result_t *r, tp_error_t *err) {
    memset(r, 0, sizeof *r);
    double t0 = tp__mono_s();
    sim_t S = {.r = r, .err = err};
    int rc = sim_setup(&S, w, space, c, o);
    if (rc == 0) rc = schedule(&S, 0.0, 1);
    while (rc == 0) {
        if (S.running == 0 && S.npend == 0 && S.nlimbo == 0) break;
        if (S.running == 0 && (!S.scale || S.nodes.coming == 0)) {
            /* Nothing runs and something waits: one offer of the whole cluster. */
            rc = schedule(&S, S.scale ? S.now : r->makespan_s, 1);
            if (rc < 0) break;
            if (S.running == 0) {
                const pend_t *p = &S.pend[0];
                rc = tp__errorf(err, -EINVAL,
                                "trial %lld (%s, batch %d) fits on no GPU of the "
                                "cluster: it needs %llu MiB, compute %.2f and %d CPU cores",
                                (long long)p->d.id, w->models[p->model].name, p->batch,
                                (unsigned long long)p->d.memory_mib, p->d.compute, p->d.cpus);
                break;
            }
        }
        double t = S.key[S.heap[0]];
        if (S.scale && tp__sim_nodes_next_at(&S.nodes) < t) { /* a node's event first */
            S.now = tp__sim_nodes_next_at(&S.nodes);
            rc = node_event(&S, S.now);
            continue;
        }
        S.now = t;
        double tol = 1e-9 * (t > 1 ? t : 1);
        while (S.key[S.heap[0]] <= t + tol)
            gpu_finishes(&S, S.heap[0], S.key[S.heap[0]]);
        rc = schedule(&S, t, 0);
    }
    if (rc == 0) {
        /* lower bound: the work over the summed speed (times the most a GPU
         * serves), or the longest trial alone on the fastest GPU */
        double cmax = 1.0;
        for (int k = 1; k <= 4; k++)
            cmax = fmax(cmax, S.ck[k]);
        double work = r->total_gpu_s / (r->sum_speed * cmax);
        r->lower_bound_s = r->trials ? fmax(work, S.longest) : 0;
        r->ratio = r->lower_bound_s > 0 ? r->makespan_s / r->lower_bound_s : 0;
        double busy = 0;
        for (size_t i = 0; i < S.ngpus; i++)
            busy += S.g[i].busy_int;
        r->busy_share = r->makespan_s > 0 ? busy / ((double)S.ngpus * r->makespan_s) : 0;
        r->gpu_hours = (double)S.ngpus * r->makespan_s / 3600;
        if (S.scale) {
            r->gpu_hours = 0;
            for (size_t n = 0; n < c->nnodes; n++)
                r->gpu_hours += tp__sim_nodes_held(&S.nodes, n, r->makespan_s) *
                                (double)c->nodes[n].ngpus / 3600;
            r->node_failures = S.nodes.failures;
        }
    }
    r->wall_s = tp__mono_s() - t0;
    sim_free(&S);
    if (rc < 0) tp__sim_result_free(r);
    return rc;
}

void tp__sim_result_free(tp_sim_result_t *r) {
    free(r->intervals);
    r->intervals = NULL;
    r->nintervals = 0;
}
