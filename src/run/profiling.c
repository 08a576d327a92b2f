/* profiling: placement's measuring of a demand group's demand. A group's
 * first trial runs as its profiler; each `usage` sample of its process goes
 * into its profile (profile.h decides when it is training and when it has
 * seen enough), with what its GPU shows: the GPU's busy share, and the base
 * it had before a profiler came, kept here per GPU. Once enough of its
 * training is seen, or when it ends first, the group's demand is recorded
 * (table `profiles`, event `profiled`) and the reservations of the trial
 * and of its group's others that started beside it on a guess become it. A profile that waits for
 * training past profile_time says so (event `profile-extended`). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "run/orchestrator_internal.h"
#include "run/run.h"

/* What a finished profile saw of training, in words, into out. */
static void profile_words(const tp_prof_result_t *m, tp_prof_how_t how, int ended, char *out,
                          size_t n) {
    char before[64];
    if (how == TP_PROF_REPORT || how == TP_PROF_SETTLED) {
        snprintf(out, n,
                 "training seen %.1f s after its first sample on the GPU (%s), measured over "
                 "%.1f s of training%s",
                 m->waited_s, how == TP_PROF_REPORT ? "a report" : "its memory and SM use settled",
                 m->trained_s, ended ? " (the trial ended first)" : "");
        return;
    }
    if (how == TP_PROF_GAVE_UP)
        snprintf(before, sizeof before, "waited %.0f s", m->waited_s);
    else
        snprintf(before, sizeof before, "the trial ended");
    snprintf(out, n,
             "%s before it was seen training: measured from the %zu samples that held at least "
             "half its peak memory, start-up included",
             before, m->samples);
}

void tp__profiling_finish(tp_run_t *r, trial_t *t) {
    demand_group_t *g = &r->pl.groups[t->demand.group];
    t->demand.profiling = 0;
    g->profiler = -1;
    tp_prof_result_t m;
    tp__prof_result(&t->demand.prof, &m);
    tp_prof_how_t how = t->demand.prof.how;
    int ended = !t->demand.prof.done;
    tp__prof_reset(&t->demand.prof);
    if (m.samples == 0) return; /* nothing measured: the next trial of the group profiles */
    tp_profile_t p = {.memory_mib = t->demand.peak_mib,
                      .compute = m.compute,
                      .samples = (int)m.samples,
                      .at = tp__wall_s()};
    char source[160], seen[300];
    if (m.compute <= 0) /* no reading showed work: no share to go by, none made up */
        snprintf(source, sizeof source, "no SM use seen (own or the GPU's): compute stays %.2f",
                 p.compute = g->compute);
    else if (m.per_process)
        snprintf(source, sizeof source, "its own SM use");
    else
        snprintf(source, sizeof source, "the GPU's busy share over the %.0f%% it showed before%s",
                 m.base, m.sharers > 1 ? ", split among the profilers training there" : "");
    profile_words(&m, how, ended, seen, sizeof seen);
    if (t->current.seq > 1 && t->pace.last_report > t->pace.first_report)
        p.step_s = (t->pace.last_report - t->pace.first_report) / (double)(t->current.seq - 1);
    tp__placement_apply_profile(r, g, &p);
    t->demand.mem_mib = g->mem_mib;
    t->demand.compute = g->compute;
    for (size_t i = 0; i < tp__trials_n(&r->trials);
         i++) { /* the siblings placed on a guess, likewise */
        trial_t *o = tp__trials_get(&r->trials, (int64_t)i);
        if (!o || !o->demand.guessed || o->demand.group != t->demand.group ||
            o->state != TP_TRIAL_RUNNING)
            continue;
        o->demand.guessed = 0;
        o->demand.mem_mib = g->mem_mib;
        o->demand.compute = g->compute;
    }
    r->pl.blocked = 0; /* what the guesses held is free again */
    char detail[900];
    snprintf(detail, sizeof detail,
             "measured %llu MiB peak, compute %.2f (%s), step %.3g s from %d samples; %s; demand "
             "now %llu MiB, compute %.2f",
             (unsigned long long)p.memory_mib, p.compute, source, p.step_s, p.samples, seen,
             (unsigned long long)g->mem_mib, g->compute);
    tp__log(TP_LOG_INFO, "trial %lld profiled: %s", (long long)t->id, detail);
    tp_store_t *s = tp__journal_tx(&r->journal);
    tp__journal_ok(&r->journal,
                   tp__store_profile_set(s, g->key, &p) ||
                       tp__store_event(s, t->id, t->attempts, "profiled", detail, p.at),
                   "recording a measured demand");
}

/* The position on node n of the GPU a `usage` entry names; SIZE_MAX if none. */
static size_t entry_gpu(tp_run_t *r, size_t n, const tp_msg_usage_trial_t *e) {
    size_t pos;
    return tp__placement_gpu(r, n, e->gpu, &pos) ? pos : SIZE_MAX;
}

static int trains(const trial_t *t) {
    return t->demand.prof.how == TP_PROF_REPORT || t->demand.prof.how == TP_PROF_SETTLED;
}

/* Each GPU of node n that no profiler of ours is on in this sample: its
 * busy share (busy[pos]) goes into its base, the mean of this sample and
 * the base before. A profiler's GPU keeps the base it had when the profiler
 * came, what the others there use. O(entries + GPUs). */
static void keep_baselines(tp_run_t *r, size_t n, const tp_msg_usage_t *u, const double *busy) {
    size_t ngpus = r->pl.cluster.nodes[n].ngpus, pos;
    unsigned char *profiled = tp__xcalloc(ngpus + 1, 1);
    for (size_t i = 0; i < u->ntrials; i++) {
        const tp_msg_usage_trial_t *e = &u->trials[i];
        trial_t *t = tp__placement_sampled(r, n, e);
        if (t && t->demand.profiling && (pos = entry_gpu(r, n, e)) != SIZE_MAX) profiled[pos] = 1;
    }
    double *base = r->pl.node[n].busy_base; /* NULL before the node's hello */
    for (pos = 0; base && pos < ngpus; pos++)
        if (!profiled[pos]) base[pos] = isnan(base[pos]) ? busy[pos] : (base[pos] + busy[pos]) / 2;
    free(profiled);
}

/* A profiling attempt's sample, node n's `usage` entry e, into its profile;
 * says when profile_time passed before its training began (event
 * `profile-extended`). */
static void profile_sample(tp_run_t *r, trial_t *t, size_t n, const tp_msg_usage_trial_t *e,
                           const double *busy, double now) {
    uint64_t used = e->used_mib;
    double sm = (double)e->sm_util;
    size_t pos = entry_gpu(r, n, e);
    tp_prof_sample_t s = {.at = now, .mib = used, .sm = sm, .base = NAN};
    if (pos != SIZE_MAX && r->pl.node[n].busy_base)
        s.busy = busy[pos], s.base = r->pl.node[n].busy_base[pos];
    if (tp__prof_add(&t->demand.prof, &s, t->pace.last_report, r->x.res.profile_s) !=
        TP_PROF_EXTEND)
        return;
    char detail[400];
    double wait = TP_PROF_WAIT_FACTOR * r->x.res.profile_s;
    snprintf(detail, sizeof detail,
             "profile_time %g s has passed since its process appeared on GPU %d, but it is not "
             "training yet (%llu MiB, SM %.0f%%, GPU %.0f%% busy, %s): the profile waits for "
             "its training (at most %.0f s)",
             r->x.res.profile_s, e->gpu, (unsigned long long)used, sm, s.busy,
             t->current.seq ? "its reports came before it was on the GPU" : "no report yet",
             wait > TP_PROF_WAIT_MIN_S ? wait : TP_PROF_WAIT_MIN_S);
    tp__log(TP_LOG_INFO, "trial %lld: %s", (long long)t->id, detail);
    tp__journal_ok(&r->journal,
                   tp__store_event(tp__journal_tx(&r->journal), t->id, t->attempts,
                                   "profile-extended", detail, tp__wall_s()),
                   "recording a profile extended");
}

void tp__profiling_usage(tp_run_t *r, size_t n, const tp_msg_usage_t *u, const double *busy,
                         double now) {
    size_t ngpus = r->pl.cluster.nodes[n].ngpus, pos;
    const tp_msg_usage_trial_t *e, *end = u->trials ? u->trials + u->ntrials : NULL;
    int any = 0;
    keep_baselines(r, n, u, busy);
    for (e = u->trials; e < end; e++) {
        trial_t *t = tp__placement_sampled(r, n, e);
        if (t && t->demand.profiling) profile_sample(r, t, n, e, busy, now), any = 1;
    }
    if (!any) return;
    /* Each profiler's sample learns how many profilers train on its GPU now
     * (a GPU-level reading is split among them); then the profiles that
     * have seen enough are recorded. */
    int *training = tp__xcalloc(ngpus + 1, sizeof *training);
    for (e = u->trials; e < end; e++) {
        trial_t *t = tp__placement_sampled(r, n, e);
        if (t && t->demand.profiling && trains(t) && (pos = entry_gpu(r, n, e)) != SIZE_MAX)
            training[pos]++;
    }
    for (e = u->trials; e < end; e++) {
        trial_t *t = tp__placement_sampled(r, n, e);
        if (!t || !t->demand.profiling || t->demand.prof.n == 0) continue;
        if ((pos = entry_gpu(r, n, e)) != SIZE_MAX)
            t->demand.prof.s[t->demand.prof.n - 1].sharers = training[pos] + !trains(t);
    }
    for (e = u->trials; e < end; e++) {
        trial_t *t = tp__placement_sampled(r, n, e);
        if (t && t->demand.profiling && t->demand.prof.done) tp__profiling_finish(r, t);
    }
    free(training);
}
