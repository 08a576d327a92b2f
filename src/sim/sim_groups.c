/* sim_groups: successive-halving rungs, placed plainly or as Fluid trial
 * groups (sim_groups.h has the model). One rung at a time: its jobs are
 * offered to the real placer (plain: vpack, or one-per-gpu for that
 * baseline; Fluid: TP_PLACE_GROUPS_POLICY, as the run), the clock jumps to
 * the next event (a job's end, a restart's end), and after each end
 * waiting jobs are offered again; under Fluid the shares come from
 * tp__fluid_shares over the rung's unfinished jobs (once per rung: static;
 * after every end: dynamic, resizing the running trials whose share grew
 * to more whole GPUs, as the run does). Every placer call is a run's round
 * (tp_place_effort_t.in_run), as in the run. A rung of n jobs costs O(n)
 * events of O(n + placer) each. */
#include "sim/sim_groups.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "place/place.h"
#include "search/scaling.h"

typedef struct gtrial {
    double step_s;        /* one step on one whole GPU */
    double host_s, gpu_s; /* its split (gpu_s / step_s = its compute demand) */
    uint64_t mem_mib;     /* per GPU */
    double quality;       /* hidden; the top of a rung go on */
    double done;          /* steps done (a checkpoint carries them over rungs) */
    int measured;         /* has run: its step time is known */
    /* the current job */
    double target;      /* steps to reach at this rung */
    int running;        /* placed */
    double share;       /* Fluid share given (0: none yet), or 0 for plain */
    tp_demand_t d;      /* what it holds in the usage */
    tp_assign_t where;  /* where */
    double ready_at;    /* its (re)start ends then: no progress before */
    double rate;        /* steps per second now */
    tp_scaling_t curve; /* step time per whole-GPU count, as measured while it ran */
    double grow_to;     /* a running trial's larger share, if a resize to it pays */
} gtrial_t;

typedef struct gsim {
    const tp_groups_opts_t *o;
    tp_cluster_t c;
    tp_usage_t u;
    const tp_placer_ops_t *placer;
    gtrial_t *t;
    size_t *rung; /* the current rung's trials */
    size_t n;     /* their number */
    double now;
    double busy;         /* integral of progress-making GPU share */
    double measured_sum; /* the measured trials' step_s summed (expected_step) */
    size_t nmeasured;
    tp_groups_result_t *r;
} gsim_t;

#define EPS 1e-9
#define TP_GROUPS_MIN_GAIN 1.1 /* a resize must gain this much over its restart */

static void hold(gsim_t *S, gtrial_t *t, int sign) {
    size_t base = S->u.gpu_base[t->where.node];
    for (size_t k = 0; k < t->where.ngpus; k++) {
        size_t g = base + t->where.gpu[k];
        S->u.mem_used[g] =
            sign > 0 ? S->u.mem_used[g] + t->d.memory_mib : S->u.mem_used[g] - t->d.memory_mib;
        S->u.compute_used[g] += sign * t->d.compute;
        S->u.count[g] += sign;
    }
}

static void release(gsim_t *S, gtrial_t *t) {
    if (!t->running) return;
    hold(S, t, -1);
    t->running = 0;
}

/* Seconds per step the run would expect of t (tp__trial_expected_s): its
 * own once it has run, else the mean of those that have; 0 if none has. */
static double expected_step(const gsim_t *S, const gtrial_t *t) {
    if (t->measured) return t->step_s;
    return S->nmeasured ? S->measured_sum / (double)S->nmeasured : 0;
}

/* The demand a job asks of the placer: plain, its measured compute (or a
 * whole GPU, one per GPU); Fluid, its share (whole GPUs exclusive). Its
 * expected duration is the run's: expected step time x steps left. */
static tp_demand_t demand(const gsim_t *S, const gtrial_t *t, size_t id) {
    tp_demand_t d = {.id = (int64_t)id,
                     .gpus = 1,
                     .memory_mib = t->mem_mib,
                     .duration_s = (t->target - t->done) * expected_step(S, t)};
    if (S->o->mode == TP_FLUID_OFF)
        d.compute = S->o->plain == TP_GROUPS_ONE_PER_GPU ? 1.0 : t->gpu_s / t->step_s;
    else if (t->share >= 1 - EPS)
        d.gpus = (int)lround(t->share), d.compute = 1.0;
    else
        d.compute = t->share;
    return d;
}

/* Whether t makes progress now: placed, its (re)start over. */
static int progressing(const gsim_t *S, const gtrial_t *t) {
    return t->running && t->ready_at <= S->now + EPS;
}

/* The busy intensity on its GPU of a single-GPU job t sharing it with k
 * trials (sim_groups.h), and (T, unless NULL) its step at the GPU's pace. */
static double intensity(const tp_groups_opts_t *o, const gtrial_t *t, int k, double *T) {
    double m = 1.0 + o->overhead * (k - 1), step = t->host_s + m * t->gpu_s;
    if (T) *T = step;
    return m * t->gpu_s / step;
}

/* The GPU (node's base + index) of t, a job on one GPU. */
static size_t gpu_of(const gsim_t *S, const gtrial_t *t) {
    return S->u.gpu_base[t->where.node] + t->where.gpu[0];
}

/* Whether t is a progressing fraction of one GPU (no thread limit under
 * Fluid: its GPU's summed demand decides its pace). */
static int fraction(const gsim_t *S, const gtrial_t *t) {
    return progressing(S, t) && t->where.ngpus == 1 && t->d.compute < 1 - EPS;
}

/* C_k: the busy share a GPU serves k uncapped trials, o's curve or the
 * measured one (place/fluid.h; check(): o's is all 0 or all >= 1). */
static double served(const tp_groups_opts_t *o, int k) {
    return tp__fluid_served(o->served[0] != 0 ? o->served : NULL, k);
}

/* Rates of every running job for the current placement (the model in
 * sim_groups.h). O(n) over the rung. */
static void rates(gsim_t *S) {
    const tp_groups_opts_t *o = S->o;
    double D[TP_PLACE_MAX_GPUS] = {0}; /* Fluid: each GPU's summed demand */
    int k[TP_PLACE_MAX_GPUS] = {0};    /* and its progressing fractions */
    if (o->mode != TP_FLUID_OFF)
        for (size_t j = 0; j < S->n; j++) {
            const gtrial_t *q = &S->t[S->rung[j]];
            if (!fraction(S, q)) continue;
            size_t g = gpu_of(S, q);
            D[g] += intensity(o, q, S->u.count[g], NULL);
            k[g]++;
        }
    for (size_t i = 0; i < S->n; i++) {
        gtrial_t *t = &S->t[S->rung[i]];
        t->rate = 0;
        if (!progressing(S, t)) continue;
        if (t->where.ngpus > 1 || t->d.compute >= 1 - EPS) {
            double g = (double)t->where.ngpus;
            t->rate = 1.0 / (t->step_s * (o->serial + (1 - o->serial) / g));
            continue;
        }
        size_t gpu = gpu_of(S, t);
        double T, dd = intensity(o, t, S->u.count[gpu], &T);
        if (o->mode == TP_FLUID_OFF) { /* capped at its demand */
            double speed = t->d.compute / dd;
            t->rate = (speed < 1 ? speed : 1) / T;
            continue;
        }
        double load = D[gpu] / served(o, k[gpu]);
        t->rate = 1.0 / (T * (load > 1 ? load : 1));
    }
}

/* Seconds per step t would take at share s, as the run estimates it
 * (run/groups.c step_at): below two GPUs its step on one whole GPU, more
 * whole GPUs from its measured curve (search/scaling.h: the Amdahl fit, or
 * linear from one count, which a first resize then probes). */
static double est_step(const gtrial_t *t, double s) {
    double one = tp__scaling_step_s(&t->curve, 1, NULL);
    if (!isfinite(one)) one = t->step_s;
    if (s < 2 - EPS) return one;
    double k = tp__scaling_step_s(&t->curve, (int)lround(s), NULL);
    return isfinite(k) ? k : one / s;
}

/* Fluid shares for the rung's unfinished jobs. With restart (dynamic), a
 * running job whose share grew to more whole GPUs (two or more) is marked
 * to grow (grow_to; resize_growing restarts it if the new share fits) when
 * that pays: the gain, time left at its share over restart_s + time left at
 * the new one, must be above TP_GROUPS_MIN_GAIN. As in the run
 * (run/groups.c), a running job is never restarted to shrink, nor for a
 * larger fraction or one whole GPU: a fraction has no MPS thread limit, so
 * it already runs at what its GPU's other trials leave it. */
static void fluid_shares(gsim_t *S, int restart) {
    const tp_groups_opts_t *o = S->o;
    tp_fluid_trial_t *ft = tp__xcalloc(S->n, sizeof *ft);
    tp_fluid_share_t *fs = tp__xcalloc(S->n, sizeof *fs);
    for (size_t i = 0; i < S->n; i++) {
        gtrial_t *t = &S->t[S->rung[i]];
        ft[i] = (tp_fluid_trial_t){.id = (int64_t)i,
                                   .step_s = t->measured ? t->step_s : NAN,
                                   .remaining_steps = t->target - t->done,
                                   .memory_mib = t->mem_mib,
                                   .gpus_max = o->gpus_cap};
    }
    tp_fluid_opts_t fo = {.capacity = (double)o->gpus,
                          .min = o->min,
                          .max = o->max,
                          .pack_max = o->pack_max,
                          .gpu_memory_mib = o->gpu_memory_mib - o->reserve_mib};
    tp__fluid_shares(ft, S->n, &fo, fs);
    for (size_t i = 0; i < S->n; i++) {
        gtrial_t *t = &S->t[S->rung[i]];
        if (ft[i].remaining_steps <= EPS) continue;
        if (fabs(fs[i].share - t->share) < EPS) continue;
        if (t->running) {
            double left = t->target - t->done;
            if (!restart || fs[i].share < 2 - EPS || fs[i].share <= t->share + EPS ||
                left * est_step(t, t->share) <=
                    TP_GROUPS_MIN_GAIN * (o->restart_s + left * est_step(t, fs[i].share)))
                continue;
            t->grow_to = fs[i].share;
            continue;
        }
        t->share = fs[i].share;
    }
    free(ft);
    free(fs);
}

/* Offer the rung's waiting jobs to the placer; placed ones start (and pay
 * the restart). Returns how many were placed. */
static size_t place_waiting(gsim_t *S, tp_error_t *err, int *rc) {
    tp_demand_t *d = tp__xcalloc(S->n, sizeof *d);
    tp_assign_t *a = tp__xcalloc(S->n, sizeof *a);
    size_t m = 0, placed = 0;
    for (size_t i = 0; i < S->n; i++) {
        gtrial_t *t = &S->t[S->rung[i]];
        if (!t->running && t->done < t->target - EPS) d[m++] = demand(S, t, i);
    }
    const tp_place_effort_t effort = {.time_limit_s = 10.0, .in_run = 1};
    if (m && S->placer->place(&S->c, &S->u, d, m, a, &effort, err) != 0) *rc = -EINVAL;
    for (size_t j = 0; j < m && !*rc; j++) {
        if (!a[j].placed) continue;
        gtrial_t *t = &S->t[S->rung[d[j].id]];
        t->running = 1, t->d = d[j], t->where = a[j];
        t->ready_at = S->now + S->o->restart_s;
        S->r->jobs++;
        placed++;
    }
    free(d);
    free(a);
    return placed;
}

/* Resize the running trials whose larger share pays (fluid_shares marked
 * them), each only when its new share fits now, with what it frees itself:
 * a resize that would leave it waiting for room costs its progress. */
static void resize_growing(gsim_t *S, tp_error_t *err, int *rc) {
    for (size_t i = 0; i < S->n && !*rc; i++) {
        gtrial_t *t = &S->t[S->rung[i]];
        if (!(t->grow_to > 0)) continue;
        double to = t->grow_to;
        t->grow_to = 0;
        if (!t->running) continue;
        double old = t->share;
        tp_demand_t keep_d = t->d;
        tp_assign_t keep_a = t->where;
        release(S, t);
        t->share = to;
        tp_demand_t d = demand(S, t, i);
        tp_assign_t a = {0};
        if (S->placer->place(&S->c, &S->u, &d, 1, &a, NULL, err) != 0) *rc = -EINVAL;
        if (!*rc && a.placed) {
            t->running = 1, t->d = d, t->where = a;
            t->ready_at = S->now + S->o->restart_s;
            S->r->jobs++;
            S->r->resizes++;
            continue;
        }
        t->share = old, t->d = keep_d, t->where = keep_a, t->running = 1;
        hold(S, t, +1);
    }
}

/* Run the current rung to its end. */
static int run_rung(gsim_t *S, tp_error_t *err) {
    const tp_groups_opts_t *o = S->o;
    int rc = 0;
    if (o->mode != TP_FLUID_OFF) fluid_shares(S, 0);
    place_waiting(S, err, &rc);
    for (;;) {
        if (rc) return rc;
        rates(S);
        double next = INFINITY;
        size_t left = 0, running = 0;
        for (size_t i = 0; i < S->n; i++) {
            gtrial_t *t = &S->t[S->rung[i]];
            if (t->done >= t->target - EPS) continue;
            left++;
            if (!t->running) continue;
            running++;
            double at =
                t->ready_at > S->now + EPS ? t->ready_at : S->now + (t->target - t->done) / t->rate;
            if (at < next) next = at;
        }
        if (!left) return 0;
        if (!running)
            return tp__errorf(err, -EINVAL, "a job of %llu MiB fits on no GPU of %llu MiB",
                              (unsigned long long)S->t[S->rung[0]].mem_mib,
                              (unsigned long long)o->gpu_memory_mib);
        double dt = next - S->now;
        int ended = 0;
        for (size_t i = 0; i < S->n; i++) {
            gtrial_t *t = &S->t[S->rung[i]];
            if (!t->running) continue;
            if (t->rate > 0) {
                t->done += t->rate * dt;
                if (!t->measured) S->measured_sum += t->step_s, S->nmeasured++;
                t->measured = 1;
                if (t->d.compute >= 1 - EPS && dt > 0)
                    tp__scaling_add(&t->curve, (int)t->where.ngpus, 1.0 / t->rate);
                S->busy += dt * (t->where.ngpus > 1 ? (double)t->where.ngpus : t->d.compute);
            }
            if (t->done >= t->target - 1e-7) {
                t->done = t->target;
                release(S, t);
                ended = 1;
            }
        }
        S->now = next;
        if (ended && o->mode == TP_FLUID_DYNAMIC) fluid_shares(S, 1);
        if (ended || o->mode == TP_FLUID_DYNAMIC) place_waiting(S, err, &rc);
        if (ended && o->mode == TP_FLUID_DYNAMIC) resize_growing(S, err, &rc);
    }
}

static int by_quality(const void *a, const void *b, void *ctx) {
    const gtrial_t *t = ctx;
    double x = t[*(const size_t *)a].quality, y = t[*(const size_t *)b].quality;
    return (x < y) - (x > y);
}

/* The trials: step 0.2-1 s log-uniform, compute demand 0.6-1.0, memory
 * 2-10 GiB, quality uniform; all from the seed. */
static void make_trials(gsim_t *S) {
    tp_rng_t rng;
    tp__rng_seed(&rng, S->o->seed, 12);
    for (size_t i = 0; i < S->o->n0; i++) {
        gtrial_t *t = &S->t[i];
        t->step_s = 0.2 * exp(log(5.0) * tp__rng_uniform(&rng));
        double d = 0.6 + 0.4 * tp__rng_uniform(&rng);
        t->gpu_s = d * t->step_s, t->host_s = t->step_s - t->gpu_s;
        t->mem_mib = 2048 + tp__rng_below(&rng, 8193);
        t->quality = tp__rng_uniform(&rng);
        tp__scaling_init(&t->curve);
    }
}

static int check(const tp_groups_opts_t *o, tp_error_t *err) {
    if (o->n0 == 0 || !(o->eta > 1) || !(o->min_steps > 0) || o->gpus == 0 ||
        o->gpus > TP_PLACE_MAX_GPUS || o->pack_max < 1 || o->serial < 0 || o->serial > 1)
        return tp__errorf(err, -EINVAL,
                          "groups sim: need n0 > 0, eta > 1, min_steps > 0, 1 to "
                          "%d GPUs, pack_max >= 1 and a serial fraction in [0, 1]",
                          TP_PLACE_MAX_GPUS);
    int custom = o->served[0] != 0 || o->served[1] != 0 || o->served[2] != 0 || o->served[3] != 0;
    for (int k = 0; k < 4 && custom; k++)
        if (!(o->served[k] >= 1) || !isfinite(o->served[k]))
            return tp__errorf(err, -EINVAL,
                              "groups sim: served[%d] is %g: give all four C_k, "
                              "each 1 or more, or all 0 for TP_FLUID_SERVED",
                              k, o->served[k]);
    return 0;
}

int tp__groups_sim(const tp_groups_opts_t *o, tp_groups_result_t *r, tp_error_t *err) {
    memset(r, 0, sizeof *r);
    if (check(o, err)) return -EINVAL;
    gsim_t S = {.o = o, .r = r};
    tp_node_t node = {.name = "sim", .cpus = 1 << 20, .ngpus = o->gpus};
    node.gpus = tp__xcalloc(o->gpus, sizeof *node.gpus);
    for (size_t g = 0; g < o->gpus; g++) {
        snprintf(node.gpus[g].name, sizeof node.gpus[g].name, "gpu%zu", g);
        node.gpus[g].index = (int)g, node.gpus[g].memory_mib = o->gpu_memory_mib;
        node.gpus[g].speed = 1.0, node.gpus[g].healthy = 1;
    }
    S.c = (tp_cluster_t){
        .nodes = &node,
        .nnodes = 1,
        .limits = {.reserve_mib = o->reserve_mib, .max_per_gpu = o->pack_max, .sharing = 1}};
    tp__usage_init(&S.u, &S.c);
    S.placer =
        tp__placer_find(o->mode == TP_FLUID_OFF && o->plain == TP_GROUPS_ONE_PER_GPU ? "one-per-gpu"
                        : o->mode == TP_FLUID_OFF ? TP_PLACE_DEFAULT_POLICY
                                                  : TP_PLACE_GROUPS_POLICY);
    S.t = tp__xcalloc(o->n0, sizeof *S.t);
    S.rung = tp__xcalloc(o->n0, sizeof *S.rung);
    make_trials(&S);
    S.n = o->n0;
    for (size_t i = 0; i < S.n; i++)
        S.rung[i] = i;
    int rc = 0;
    double budget = o->min_steps;
    while (S.n > 0 && r->nrungs < 32) {
        for (size_t i = 0; i < S.n; i++) {
            gtrial_t *t = &S.t[S.rung[i]];
            t->target = budget, t->share = 0;
        }
        double start = S.now;
        if ((rc = run_rung(&S, err)) != 0) break;
        r->rung_s[r->nrungs++] = S.now - start;
        size_t keep = (size_t)floor((double)S.n / o->eta + 1e-9);
        if (keep == 0 || (o->rungs && r->nrungs >= o->rungs)) break;
        qsort_r(S.rung, S.n, sizeof *S.rung, by_quality, S.t);
        S.n = keep;
        budget *= o->eta;
    }
    r->makespan_s = S.now;
    r->busy_share = S.now > 0 ? S.busy / ((double)o->gpus * S.now) : 0;
    tp__usage_free(&S.u);
    free(node.gpus);
    free(S.t);
    free(S.rung);
    return rc;
}

/* The speed hull of one trial (tp__groups_bound), in steps per step_s: g / d
 * up to d, then the chord from (d, 1) to the Amdahl curve at its tangent
 * point tg, then Amdahl up to gmax. The bound passes d / C, C the most any
 * GPU serves (a share g of a GPU never yields more than g C of busy time). */
typedef struct hull {
    double d, f, tg, slope, gmax;
} hull_t;

static double amdahl(double f, double g) {
    return 1 / (f + (1 - f) / g);
}

static hull_t hull_of(double d, double f, double gmax) {
    hull_t h = {.d = d, .f = f, .tg = 1, .slope = 0, .gmax = gmax};
    for (int k = 1; k <= 3000 && gmax > 1; k++) { /* the tangent, on a grid of [1, gmax] */
        double g = 1 + (gmax - 1) * k / 3000.0, sl = (amdahl(f, g) - 1) / (g - d);
        if (sl > h.slope) h.slope = sl, h.tg = g;
    }
    return h;
}

static double hull_speed(const hull_t *h, double g) {
    if (g <= h->d) return g / h->d;
    if (g <= h->tg) return 1 + (g - h->d) * h->slope;
    return amdahl(h->f, g);
}

/* The least allocation in [0, gmax] at which h runs `steps` steps of step_s
 * within M; INFINITY if none does. */
static double hull_need(const hull_t *h, double step_s, double steps, double M) {
    double want = steps * step_s / M; /* speed needed */
    if (hull_speed(h, h->gmax) < want - 1e-12) return INFINITY;
    double a = 0, z = h->gmax;
    for (int it = 0; it < 60; it++) {
        double mid = (a + z) / 2;
        if (hull_speed(h, mid) >= want)
            z = mid;
        else
            a = mid;
    }
    return z;
}

int tp__groups_bound(const tp_groups_opts_t *o, double *bound_s, tp_error_t *err) {
    *bound_s = 0;
    if (check(o, err)) return -EINVAL;
    gsim_t S = {.o = o};
    S.t = tp__xcalloc(o->n0, sizeof *S.t);
    S.rung = tp__xcalloc(o->n0, sizeof *S.rung);
    hull_t *h = tp__xcalloc(o->n0, sizeof *h);
    make_trials(&S);
    double G = (double)o->gpus, gmax = o->gpus_cap > 1 ? (double)o->gpus_cap : 1, C = 1;
    if (gmax > G) gmax = G;
    for (int k = 2; k <= o->pack_max && k <= 4; k++)
        if (served(o, k) > C) C = served(o, k);
    for (size_t i = 0; i < o->n0; i++) {
        S.rung[i] = i;
        h[i] = hull_of(S.t[i].gpu_s / S.t[i].step_s / C, o->serial, gmax);
    }
    S.n = o->n0;
    double budget = o->min_steps, before = 0;
    for (size_t rungs = 0; S.n > 0 && rungs < 32; rungs++) {
        double lo = 0, hi = 1;
        for (;;) { /* hi: a span in which the rung fits */
            double sum = 0;
            for (size_t i = 0; i < S.n; i++)
                sum += hull_need(&h[S.rung[i]], S.t[S.rung[i]].step_s, budget - before, hi);
            if (sum <= G) break;
            hi *= 2;
        }
        for (int it = 0; it < 60; it++) {
            double M = (lo + hi) / 2, sum = 0;
            for (size_t i = 0; i < S.n; i++)
                sum += hull_need(&h[S.rung[i]], S.t[S.rung[i]].step_s, budget - before, M);
            if (sum <= G)
                hi = M;
            else
                lo = M;
        }
        *bound_s += o->restart_s + hi;
        size_t keep = (size_t)floor((double)S.n / o->eta + 1e-9);
        if (keep == 0 || (o->rungs && rungs + 1 >= o->rungs)) break;
        qsort_r(S.rung, S.n, sizeof *S.rung, by_quality, S.t);
        S.n = keep;
        before = budget;
        budget *= o->eta;
    }
    free(h);
    free(S.t);
    free(S.rung);
    return 0;
}
