/* groups: Fluid trial groups in the real run (`groups:`, docs/gpus.md). A
 * job's group is the scheduler's (tp_job_t.group: a rung). When a group's
 * trials are placed, each one's compute share (its packing demand: how
 * many of the group's trials share a GPU and which) is its Fluid share
 * (tp__fluid_shares, the pure computation the simulator calls too) over
 * the group's trials that are being placed or run, with the capacity Fluid
 * gives a group: the GPUs' idle compute plus what the group's running
 * trials hold. static: a trial keeps the share its job first got;
 * dynamic: the shares are computed again whenever the group is placed and
 * whenever one of its trials ends (the `fluid-shares` event), and a
 * trial's next attempt takes its new share.
 *
 * Whole GPUs above one need elastic trials (`resources: {gpus: {min: 1,
 * max: K}}`, elastic.c): then a share of k >= 1 is placed as k GPUs.
 * Without elastic trials shares stop at one GPU. Under dynamic shares a
 * running trial whose share grew to more whole GPUs is resized from its
 * checkpoint (tp__elastic_resize) when that pays: time left at its count
 * over its measured restart cost + time left at the new count must exceed
 * GROUPS_MIN_GAIN. A fraction is never restarted for a larger fraction or
 * the whole GPU: it runs with no MPS thread limit (placement.c), so it
 * already takes what the trials beside it leave, and more when they end
 * (measured on an H100, docs/gpu-checks.md: capped at its share, a
 * compute-bound trial alone ran at 0.39 of its pace at 25%). A running
 * trial is never restarted to shrink. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "place/fluid.h"
#include "run/orchestrator_internal.h"

#define GROUPS_PACK_DEFAULT 4 /* fractions down to 1/4 when placement.max_per_gpu is not set */
#define GROUPS_MIN_GAIN 1.1   /* a resize must pay for its restart by this much */

void tp__groups_trial_init(trial_t *t) {
    t->fluid.group = -1;
}

void tp__groups_new_job(trial_t *t, int64_t group) {
    t->fluid.group = group;
    t->fluid.share = t->fluid.noted = 0;
}

void tp__groups_set_group(trial_t *t, int64_t group) {
    t->fluid.group = group;
}

void tp__groups_load_reset(trial_t *t, double now, double load) {
    t->fluid.load_alone = t->fluid.load_span = 0;
    t->fluid.load_d = load, t->fluid.load_at = now;
}

void tp__groups_load_note(trial_t *t, double now, double load) {
    if (isfinite(t->fluid.load_d) && t->fluid.load_d > 0 && now > t->fluid.load_at) {
        t->fluid.load_alone += (now - t->fluid.load_at) / t->fluid.load_d;
        t->fluid.load_span += now - t->fluid.load_at;
    }
    t->fluid.load_d = load, t->fluid.load_at = now;
}

void tp__groups_load_measured(trial_t *t) {
    t->fluid.step_load = t->fluid.load_alone > 0 ? t->fluid.load_span / t->fluid.load_alone : 0;
}

double tp__groups_step_load(const trial_t *t) {
    return t->fluid.step_load;
}

int tp__groups_member(const tp_run_t *r, const trial_t *t) {
    return r->x.groups != TP_FLUID_OFF && t->fluid.group >= 0;
}

/* Whole GPUs a trial of this run may take. */
static int gpus_max(const tp_run_t *r) {
    return tp__elastic_on(r) ? r->x.res.gpus_max : 1;
}

/* Group members: the batch's trials of group g, then its running ones
 * (excluding `skip`), into out (cap). O(trials). */
static size_t members(tp_run_t *r, int64_t g, trial_t **batch, size_t n, const trial_t *skip,
                      trial_t **out, size_t cap) {
    size_t m = 0;
    for (size_t i = 0; i < n && m < cap; i++)
        if (batch[i]->fluid.group == g && batch[i] != skip) out[m++] = batch[i];
    for (size_t i = 0; i < tp__trials_n(&r->trials) && m < cap; i++) {
        trial_t *t = tp__trials_get(&r->trials, (int64_t)i);
        if (t && t != skip && t->fluid.group == g && t->state == TP_TRIAL_RUNNING) out[m++] = t;
    }
    return m;
}

static uint64_t member_mib(const tp_run_t *r, const trial_t *t) {
    if (t->state == TP_TRIAL_RUNNING && tp__placement_mem_mib(t)) return tp__placement_mem_mib(t);
    const demand_group_t *g = tp__placement_group(r, t);
    return g ? g->mem_mib : r->x.res.gpu_memory_mib;
}

/* The options every share computation of this run uses; capacity: the
 * healthy GPUs' idle compute in u plus what the running members hold. */
static tp_fluid_opts_t opts(tp_run_t *r, const tp_usage_t *u, trial_t **m, size_t k) {
    double most = gpus_max(r);
    tp_fluid_opts_t o = {.min = r->x.groups_min,
                         .max = r->x.groups_max > most ? most : r->x.groups_max,
                         .pack_max = r->x.max_per_gpu > 0 ? r->x.max_per_gpu : GROUPS_PACK_DEFAULT};
    const tp_cluster_t *c = tp__placement_cluster(r);
    size_t gi = 0;
    for (size_t n = 0; n < c->nnodes; n++)
        for (size_t g = 0; g < c->nodes[n].ngpus; g++, gi++) {
            const tp_gpu_t *gpu = &c->nodes[n].gpus[g];
            if (!gpu->healthy) continue;
            double idle = 1.0 + c->limits.oversubscribe - u->compute_used[gi];
            if (idle > 0) o.capacity += idle > 1 ? 1 : idle;
            uint64_t usable =
                gpu->memory_mib > r->x.reserve_mib ? gpu->memory_mib - r->x.reserve_mib : 0;
            if (usable > o.gpu_memory_mib) o.gpu_memory_mib = usable;
        }
    for (size_t i = 0; i < k; i++)
        if (m[i]->state == TP_TRIAL_RUNNING)
            o.capacity += tp__placement_compute(m[i]) * (m[i]->gpus > 1 ? m[i]->gpus : 1);
    if (o.capacity < o.min) o.capacity = o.min;
    return o;
}

/* The compute demand of t on a whole GPU: its group's (profiled or
 * declared), else the experiment's declared one; NaN while `gpu_compute:
 * auto` has measured nothing (then a fraction's step counts as measured). */
static double demand_of(const tp_run_t *r, const trial_t *t) {
    const demand_group_t *g = tp__placement_group(r, t);
    if (g && g->measured) return g->compute;
    if (r->x.res.gpu_compute_auto) return NAN;
    double d = r->x.res.gpu_compute;
    return d > 0 && d <= 1 ? d : 1;
}

/* Whether placement a is (or, ended, was) on GPU `gpu` of node `node`.
 * O(its GPUs). */
static int holds_gpu(const tp_assign_t *a, size_t node, size_t gpu) {
    if (a->node != node) return 0;
    for (size_t k = 0; k < a->ngpus; k++)
        if (a->gpu[k] == gpu) return 1;
    return 0;
}

/* max(1, D / C_k) on GPU `gpu` of node `node` now, D the summed compute
 * demands (demand_of) of the trials placed on it, k of them MPS clients
 * (one GPU, one process) and C_k the busy share a GPU serves k (measured,
 * tp__fluid_served; 1 where no MPS daemon runs: time-slicing): how much
 * slower than alone each of them steps there (a fraction has no MPS thread
 * limit; the simulator's contention model, docs/simulator.md, which counts
 * only trials past their start-up); NaN when a demand is not known yet.
 * O(trials). */
static double load_on(const tp_run_t *r, size_t node, size_t gpu) {
    double D = 0;
    int k = 0;
    for (size_t i = 0; i < tp__trials_n(&r->trials); i++) {
        const trial_t *q = tp__trials_get(&r->trials, (int64_t)i);
        if (!q || !q->where.placed || !holds_gpu(&q->where, node, gpu)) continue;
        D += demand_of(r, q);
        k += q->where.ngpus == 1 && q->ranks.n == 1;
    }
    double load = tp__placement_node(r, node)->mps ? D / tp__fluid_served(NULL, k) : D;
    return load > 1 ? load : isnan(load) ? NAN : 1;
}

/* The load t steps under: its GPU's (load_on) for a fraction, 1 on whole
 * GPUs. O(trials). */
static double gpu_load(const tp_run_t *r, const trial_t *t) {
    if (!t->where.placed || t->where.ngpus != 1 || !(tp__placement_compute(t) < 1)) return 1;
    return load_on(r, t->where.node, t->where.gpu[0]);
}

/* The load changes only when a trial starts or ends on t's GPU, and
 * tp__groups_gpu_changed notes it then: a report recounts it only at the
 * attempt's first step, or while a demand there is not known. */
void tp__groups_on_step(tp_run_t *r, trial_t *t, int first) {
    if (!tp__groups_member(r, t)) return;
    if (first)
        tp__groups_load_reset(t, t->pace.last_report, gpu_load(r, t));
    else
        tp__groups_load_note(t, t->pace.last_report,
                             isnan(t->fluid.load_d) ? gpu_load(r, t) : t->fluid.load_d);
}

void tp__groups_gpu_changed(tp_run_t *r, const tp_assign_t *where) {
    if (r->x.groups == TP_FLUID_OFF) return;
    double now = tp__mono_s();
    for (size_t k = 0; k < where->ngpus; k++) { /* each GPU's load counted once: O(trials) */
        int counted = 0;
        double D = 1;
        for (size_t i = 0; i < tp__trials_n(&r->trials); i++) {
            trial_t *q = tp__trials_get(&r->trials, (int64_t)i);
            if (!q || !q->where.placed || q->where.ngpus != 1 ||
                !holds_gpu(&q->where, where->node, where->gpu[k]) ||
                q->pace.first_step == TP_STORE_NO_STEP || !tp__groups_member(r, q))
                continue;
            if (tp__placement_compute(q) < 1 && !counted) {
                D = load_on(r, where->node, where->gpu[k]);
                counted = 1;
            }
            tp__groups_load_note(q, now, tp__placement_compute(q) < 1 ? D : 1);
        }
    }
}

/* Seconds per step of t on one whole GPU, the work Fluid divides (and the
 * simulator counts): step_s as measured at step_gpus GPUs (scaled as if
 * linearly, as step_at does), or, measured on a GPU it shared as a
 * fraction, divided by the (harmonic) mean load there meanwhile
 * (step_load): a trial that shared a busy GPU measured a step longer than
 * its own, one left alone on it its own. As measured while a demand of its GPU is not known
 * (then step_load is 0); 0 when nothing is. */
static double step_whole(const trial_t *t) {
    if (!(t->pace.step_s > 0)) return 0;
    if (t->pace.step_gpus > 1) return t->pace.step_s * t->pace.step_gpus;
    return t->fluid.step_load > 1 ? t->pace.step_s / t->fluid.step_load : t->pace.step_s;
}

/* Shares of members m[0..k) into s. */
static void compute(tp_run_t *r, trial_t **m, size_t k, const tp_fluid_opts_t *o,
                    tp_fluid_share_t *s) {
    tp_fluid_trial_t *ft = tp__xcalloc(k ? k : 1, sizeof *ft);
    for (size_t i = 0; i < k; i++) {
        const trial_t *t = m[i];
        double left = t->job.budget > 0 ? tp__trial_steps_left(t) : 1;
        ft[i] = (tp_fluid_trial_t){.id = t->id,
                                   .step_s = step_whole(t),
                                   .remaining_steps = left,
                                   .memory_mib = member_mib(r, t),
                                   .gpus_max = gpus_max(r)};
    }
    tp__fluid_shares(ft, k, o, s);
    free(ft);
}

static void note(tp_run_t *r, const trial_t *t, const char *kind, const char *detail) {
    tp__journal_ok(&r->journal,
                   tp__store_event(tp__journal_tx(&r->journal), t->id, t->attempts, kind, detail,
                                   tp__wall_s()),
                   "recording a Fluid share");
}

/* The share t is placed with: static, the one its job got first; dynamic,
 * computed afresh for its whole group once per placement round (the round
 * clears the batch's shares first). */
static double share_of(tp_run_t *r, trial_t *t, trial_t **batch, size_t n, const tp_usage_t *u) {
    if (t->fluid.share > 0) return t->fluid.share;
    size_t cap = n + tp__trials_n(&r->trials) + 1;
    trial_t **m = tp__xcalloc(cap, sizeof *m);
    size_t k = members(r, t->fluid.group, batch, n, NULL, m, cap);
    tp_fluid_share_t *s = tp__xcalloc(k ? k : 1, sizeof *s);
    tp_fluid_opts_t o = opts(r, u, m, k);
    compute(r, m, k, &o, s);
    double share = 1;
    for (size_t i = 0; i < k; i++) {
        if (m[i]->state == TP_TRIAL_RUNNING) continue; /* never resized while it runs */
        if (m[i]->fluid.share > 0 || s[i].share <= 0) continue;
        m[i]->fluid.share = s[i].share;
        /* dynamic shares are computed each round: journaled when they change */
        if (fabs(s[i].share - m[i]->fluid.noted) < 1e-9) continue;
        m[i]->fluid.noted = s[i].share;
        char detail[400];
        snprintf(detail, sizeof detail, "group %lld (%s): %s", (long long)m[i]->fluid.group,
                 tp__fluid_mode_name(r->x.groups), s[i].why);
        note(r, m[i], "fluid-share", detail);
    }
    if (t->fluid.share > 0) share = t->fluid.share;
    free(s);
    free(m);
    return share;
}

void tp__groups_demand(tp_run_t *r, trial_t **batch, tp_demand_t *d, const int *profiling, size_t n,
                       const tp_usage_t *u) {
    if (r->x.groups == TP_FLUID_DYNAMIC)
        for (size_t i = 0; i < n; i++)
            batch[i]->fluid.share = 0;
    for (size_t i = 0; i < n; i++) {
        if (profiling[i]) continue; /* a profiler keeps its provisional demand */
        double share = share_of(r, batch[i], batch, n, u);
        if (share >= 1 && tp__elastic_on(r)) { /* k whole GPUs: an elastic trial of k */
            tp__elastic_set_want(batch[i], (int)lround(share));
            d[i].gpus = tp__elastic_want(batch[i]), d[i].compute = 1.0;
        } else {
            if (tp__elastic_on(r)) tp__elastic_set_want(batch[i], 1), d[i].gpus = 1;
            d[i].compute = share;
        }
    }
}

/* Seconds per step of t at g whole GPUs: measured, else linear from the
 * count it runs on, else from its last measured step (optimistic: the
 * resize then measures it). NaN if none. */
static double step_at(const trial_t *t, int g) {
    if (g <= TP_SCALING_MAX_GPUS && tp__elastic_scaling(t)->samples[g])
        return tp__elastic_scaling(t)->step_s[g];
    int now = t->gpus > 0 ? t->gpus : 1;
    if (now <= TP_SCALING_MAX_GPUS && tp__elastic_scaling(t)->samples[now])
        return tp__elastic_scaling(t)->step_s[now] * now / g;
    return t->pace.step_s > 0 ? step_whole(t) / g : NAN;
}

/* The GPUs t holds alone in u (not one it shares as a fraction). O(its
 * GPUs). */
static int held_alone(const tp_run_t *r, const trial_t *t, const tp_usage_t *u) {
    size_t n = t->where.node;
    if (!t->where.placed || n >= tp__placement_cluster(r)->nnodes) return 0;
    int alone = 0;
    for (size_t k = 0; k < t->where.ngpus; k++)
        alone += t->where.gpu[k] < tp__placement_cluster(r)->nodes[n].ngpus &&
                 u->count[u->gpu_base[n] + t->where.gpu[k]] == 1;
    return alone;
}

/* Whole GPUs t could hold now on its node: the ones it holds alone, plus
 * the healthy idle ones of u (the usage without the trial that ended) that
 * no resize of this round has claimed yet (claimed[node]). O(GPUs of the
 * node). */
static int room(const tp_run_t *r, const trial_t *t, const tp_usage_t *u, const int *claimed) {
    size_t n = t->where.node;
    if (!t->where.placed || n >= tp__placement_cluster(r)->nnodes) return 0;
    const tp_node_t *node = &tp__placement_cluster(r)->nodes[n];
    int idle = 0;
    for (size_t g = 0; g < node->ngpus; g++)
        idle += node->gpus[g].healthy && u->count[u->gpu_base[n] + g] == 0;
    return idle + held_alone(r, t, u) - claimed[n];
}

/* A running trial whose share s grew to more whole GPUs than it holds:
 * resize it when the gain pays for its measured restart and the GPUs are
 * free on its node now (a resize that waits for room loses its progress
 * meanwhile; claimed[its node] counts the idle GPUs it takes: all of its
 * new count when it shares its GPU as a fraction). Elastic trials only.
 * 1 if asked. O(GPUs of its node). */
static int grow(tp_run_t *r, trial_t *t, const tp_fluid_share_t *s, const tp_usage_t *u,
                int *claimed) {
    if (!r->x.groups_restart || !(tp__elastic_restart_s(t) >= 0) || !tp__elastic_on(r)) return 0;
    if (!(s->share >= 2 - 1e-9) || s->gpus <= t->gpus || room(r, t, u, claimed) < s->gpus) return 0;
    double now = step_at(t, t->gpus > 0 ? t->gpus : 1), then = step_at(t, s->gpus);
    double left = tp__trial_steps_left(t);
    if (!(left > 0) || !isfinite(now) || !isfinite(then) || !(now > 0)) return 0;
    double gain = left * now / (tp__elastic_restart_s(t) + left * then);
    if (!(gain > GROUPS_MIN_GAIN)) return 0;
    char why[200], msg[300];
    snprintf(why, sizeof why,
             "Fluid share of group %lld grew to %d GPUs: gain %.2f > %.2f "
             "(%.1f s left -> restart %.1f s + %.1f s)",
             (long long)t->fluid.group, s->gpus, gain, GROUPS_MIN_GAIN, left * now,
             tp__elastic_restart_s(t), left * then);
    if (tp__elastic_resize(r, t, s->gpus, why, msg, sizeof msg) != 0) return 0;
    claimed[t->where.node] += s->gpus - held_alone(r, t, u);
    t->fluid.share = s->share;
    return 1;
}

void tp__groups_ended(tp_run_t *r, trial_t *t, const tp_usage_t *u) {
    if (r->x.groups != TP_FLUID_DYNAMIC || t->fluid.group < 0) return;
    size_t cap = tp__trials_n(&r->trials) + 1, k = 0;
    trial_t **m = tp__xcalloc(cap, sizeof *m);
    for (size_t i = 0; i < tp__trials_n(&r->trials);
         i++) { /* the rest of the group, running or pending */
        trial_t *o = tp__trials_get(&r->trials, (int64_t)i);
        if (o && o != t && o->fluid.group == t->fluid.group &&
            (o->state == TP_TRIAL_RUNNING || o->state == TP_TRIAL_PENDING))
            m[k++] = o;
    }
    if (k) {
        tp_fluid_share_t *s = tp__xcalloc(k, sizeof *s);
        tp_fluid_opts_t o = opts(r, u, m, k);
        compute(r, m, k, &o, s);
        int *claimed = tp__xcalloc(tp__placement_cluster(r)->nnodes + 1, sizeof *claimed);
        tp_buf_t b = {0};
        tp__buf_printf(&b, "trial %lld of group %lld ended; shares of the %zu left over %g GPUs:",
                       (long long)t->id, (long long)t->fluid.group, k, o.capacity);
        for (size_t i = 0; i < k; i++) {
            int running = m[i]->state == TP_TRIAL_RUNNING;
            if (running && grow(r, m[i], &s[i], u, claimed)) {
                tp__buf_printf(&b, "%s trial %lld: %.3g (resized)", i ? ";" : "",
                               (long long)m[i]->id, s[i].share);
                continue;
            }
            tp__buf_printf(&b, "%s trial %lld: %.3g%s", i ? ";" : "", (long long)m[i]->id,
                           s[i].share, running ? " (running: from its next attempt)" : "");
            if (!running && s[i].share > 0) m[i]->fluid.share = s[i].share;
        }
        note(r, t, "fluid-shares", b.data ? b.data : "");
        tp__buf_free(&b);
        free(claimed);
        free(s);
    }
    free(m);
}
