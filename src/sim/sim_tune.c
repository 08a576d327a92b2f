/* sim_tune: a deadline run on a virtual clock through the real scheduler
 * and reallocation policy (see sim_tune.h for the workload and what it
 * measures). Events: a trial's start-up ends, or one of its steps ends; the
 * next is the earliest over the running trials (O(G) to find, G <= 64).
 * After every event the free GPUs are offered to the scheduler (a job takes
 * one GPU), then, with `realloc`, to the reallocation policy. With node
 * failures or queue waits (sim_nodes.h) a node's event comes first when it
 * is earlier: its GPUs leave or join the free ones, and a lost node's jobs
 * are placed again before new ones. */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "chart/chart.h"
#include "place/fluid.h"
#include "search/scheduler.h"
#include "sim/sim_nodes.h"
#include "sim/sim_tune.h"

enum { NOISE_METRIC, NOISE_STEP, NOISE_STARTUP };

typedef struct st_trial {
    int64_t id;
    double q, tau, t1, f,
        up;              /* its truths: final quality, learning time, s/unit, serial, start-up */
    int running;         /* holds GPUs */
    int gpus;            /* GPUs held */
    int rung;            /* current (or last) job */
    double budget, from; /* the job's budget and where it started */
    double progress;     /* whole units done (checkpointed) */
    double frac;         /* of the next unit, done before the last restart */
    int starting;        /* paying its start-up until ready_at */
    double ready_at;
    double unit_start, unit_end; /* the unit in progress */
    int unit_clean;              /* that unit ran whole at this count: its time is a measurement */
    double attempt_start;
    int job_attempts; /* attempts at this job (a resize is one more) */
    int nrep;         /* reports in this attempt */
    double first_rep_t, last_rep_t;
    double first_rep_step, last_step;
    tp_scaling_t sc;                  /* measured step time per GPU count */
    double restart_s;                 /* measured start-up, NaN before */
    double last_resize;               /* NaN: never */
    double value;                     /* last reported metric, NaN before */
    const tp_simtune_measured_t *rec; /* the measured trial it was drawn from, or NULL */
    unsigned ver;                     /* its event in the heap is current at this version */
    int *held;                        /* the GPUs it holds, t->gpus of them */
    size_t held_cap;                  /* room in held */
    int stalled;                      /* on a failed node not yet taken for lost: no progress */
    int lost;                         /* its job waits to be placed again (its node was lost) */
} st_trial_t;

typedef struct st_event {
    double at;
    int64_t trial;
    unsigned ver;
} st_event_t;

typedef struct st_bar {
    int gpu;
    double start, end;
    int64_t trial;
    int rung;
} st_bar_t;

typedef struct sim {
    const tp_simtune_cfg_t *c;
    tp_scheduler_t *s;
    tp_space_t space;
    st_trial_t *t; /* by trial id */
    size_t n, cap;
    int64_t *owner; /* trial holding each GPU, -1: free */
    double *since;  /* since when */
    int free_gpus;
    int *freeh; /* the free GPUs' indexes, a min-heap */
    size_t nfree;
    int running;      /* jobs running */
    st_event_t *heap; /* the running trials' next events, earliest first (stale ones skipped) */
    size_t nheap, capheap;
    st_bar_t *bars;
    size_t nbars, capbars;
    double now;
    tp_simtune_result_t *out;
    int scale;            /* nodes fail or queue (sim_nodes.h) */
    tp_sim_nodes_t nodes; /* their states and times */
    int gpn;              /* GPUs per node: node k has GPUs [k gpn, (k + 1) gpn) */
    int64_t *lostq;       /* trials whose job waits to be placed again, in id order */
    size_t nlost, caplost;
    int over; /* the scheduler's last next() said 0: nothing more */
} sim_t;

/* Jobs lost with their nodes past this many for each job started: the nodes
 * fail faster than jobs end, and the run would never end. */
#define ST_MAX_LOST_PER_JOB 100

/* Whether GPU g's node is up (always, without the nodes' model). */
static int gpu_up(const sim_t *m, int g) {
    return !m->scale || m->nodes.state[g / m->gpn] == TP_SIM_NODE_UP;
}

/* A pure function of (seed, trial, step, kind): uniform [0, 1) or normal. */
static double noise(const sim_t *m, int64_t trial, double step, int kind, int normal) {
    tp_rng_t r;
    tp__rng_seed(&r, m->c->seed ^ 0x5eedf00dULL,
                 ((uint64_t)trial << 24) ^ ((uint64_t)llround(step * 8) << 2) ^ (uint64_t)kind);
    return normal ? tp__rng_normal(&r) : tp__rng_uniform(&r);
}

static double acc_true(const st_trial_t *t, double b) {
    return t->q - (t->q - 0.1) * exp(-b / t->tau);
}

/* What t reports at b units: its measured curve at the same share of its
 * run (the last value before it; past the measured run, its last value), or
 * the synthetic family's (1 - it when minimized). */
static double metric_true(const sim_t *m, const st_trial_t *t, double b) {
    const tp_simtune_measured_t *r = t->rec;
    if (r && r->npoints) {
        double f = b / r->units;
        size_t i = 0;
        while (i + 1 < r->npoints && r->frac[i + 1] <= f + 1e-9)
            i++;
        return r->values[i];
    }
    double a = acc_true(t, b);
    return m->c->minimize ? 1 - a : a;
}

static int better(const sim_t *m, double a, double b) {
    return isnan(b) || (m->c->minimize ? a < b : a > b);
}

static int ev_before(const st_event_t *a, const st_event_t *b) {
    return a->at < b->at || (a->at == b->at && a->trial < b->trial);
}

/* t's next event at `at` (its earlier one, if any, goes stale). O(log n). */
static void ev_push(sim_t *m, st_trial_t *t, double at) {
    m->heap = tp__xgrow(m->heap, &m->capheap, m->nheap + 1, sizeof *m->heap, 256);
    st_event_t e = {at, t->id, ++t->ver};
    size_t i = m->nheap++;
    while (i > 0 && ev_before(&e, &m->heap[(i - 1) / 2])) {
        m->heap[i] = m->heap[(i - 1) / 2];
        i = (i - 1) / 2;
    }
    m->heap[i] = e;
}

static void ev_pop(sim_t *m) {
    st_event_t e = m->heap[--m->nheap];
    size_t i = 0;
    for (;;) {
        size_t c = 2 * i + 1;
        if (c >= m->nheap) break;
        if (c + 1 < m->nheap && ev_before(&m->heap[c + 1], &m->heap[c])) c++;
        if (!ev_before(&m->heap[c], &e)) break;
        m->heap[i] = m->heap[c];
        i = c;
    }
    if (m->nheap) m->heap[i] = e;
}

/* The earliest current event's trial, or NULL when none runs. */
static st_trial_t *ev_next(sim_t *m) {
    while (m->nheap) {
        st_event_t *e = &m->heap[0];
        st_trial_t *t = &m->t[e->trial];
        if (t->running && t->ver == e->ver) return t;
        ev_pop(m);
    }
    return NULL;
}

/* The time of unit `step` at g GPUs (+-5%). */
static double step_time(const sim_t *m, const st_trial_t *t, int g, double step) {
    double base = t->t1 * (t->f + (1 - t->f) / g);
    return base * (0.95 + 0.1 * noise(m, t->id, step + 1000.0 * g, NOISE_STEP, 0));
}

static void timeline(sim_t *m, const char *event, int64_t trial, int gpus, int rung, double value,
                     const char *why) {
    if (!m->c->timeline) return;
    tp_buf_t *b = m->c->timeline;
    tp__buf_printf(b, "%.1f,%s,%lld,%d,%d,", m->now, event, (long long)trial, gpus, rung);
    if (!isnan(value)) tp__buf_printf(b, "%.4f", value);
    tp__buf_printf(b, ",\"");
    for (const char *p = why ? why : ""; *p; p++) /* CSV: a quote is written twice */
        tp__buf_append(b, *p == '"' ? "\"\"" : p, *p == '"' ? 2 : 1);
    tp__buf_printf(b, "\"\n");
}

static void set_curve(sim_t *m, st_trial_t *t, const json_t *cfg);

static st_trial_t *new_trial(sim_t *m, int64_t id, const json_t *cfg) {
    m->t = tp__xgrow(m->t, &m->cap, (size_t)id + 1, sizeof *m->t, 64);
    while (m->n <= (size_t)id)
        memset(&m->t[m->n++], 0, sizeof *m->t);
    st_trial_t *t = &m->t[id];
    t->id = id;
    set_curve(m, t, cfg);
    tp__scaling_init(&t->sc);
    t->restart_s = t->last_resize = t->value = NAN;
    m->out->trials++;
    return t;
}

/* t's learning curve and speed from its configuration (x, y); an
 * experiment's own space has no x, y: its trials' are drawn by (seed, id),
 * and their times are its unit time or a measured trial's. */
static void set_curve(sim_t *m, st_trial_t *t, const json_t *cfg) {
    int own = m->c->scheduler_obj != NULL;
    int64_t id = t->id;
    double x =
        own ? noise(m, id, -1, NOISE_METRIC, 0) : json_number_value(json_object_get(cfg, "x"));
    double y =
        own ? noise(m, id, -2, NOISE_METRIC, 0) : json_number_value(json_object_get(cfg, "y"));
    t->q = 0.92 - 0.35 * (x - 0.65) * (x - 0.65) - 0.08 * y;
    t->tau = 1.5 + 10 * y * (1 - x) + 3 * x;
    t->t1 = m->c->unit_s * (0.6 + 0.8 * x);
    t->f = 0.05 + 0.45 * y;
    t->up = m->c->startup_s * (0.8 + 0.4 * y);
    if (own) {
        t->rec = NULL;
        if (m->c->nmeasured) {
            size_t k = (size_t)(noise(m, id, -3, NOISE_METRIC, 0) * (double)m->c->nmeasured);
            t->rec = &m->c->measured[k < m->c->nmeasured ? k : m->c->nmeasured - 1];
        }
        t->t1 = t->rec ? t->rec->unit_s : m->c->unit_s;
        t->f = 1; /* at the GPU count it declares */
        t->up = m->c->startup_s;
    }
}

/* The free GPUs: a min-heap of their indexes (the lowest is taken first). */
static void free_push(sim_t *m, int g) {
    size_t i = m->nfree++;
    while (i > 0 && g < m->freeh[(i - 1) / 2]) {
        m->freeh[i] = m->freeh[(i - 1) / 2];
        i = (i - 1) / 2;
    }
    m->freeh[i] = g;
}

static int free_pop(sim_t *m) {
    int top = m->freeh[0], last = m->freeh[--m->nfree];
    size_t i = 0;
    for (;;) {
        size_t c = 2 * i + 1;
        if (c >= m->nfree) break;
        if (c + 1 < m->nfree && m->freeh[c + 1] < m->freeh[c]) c++;
        if (m->freeh[c] >= last) break;
        m->freeh[i] = m->freeh[c];
        i = c;
    }
    if (m->nfree) m->freeh[i] = last;
    return top;
}

/* O(k log G). */
static void take_gpus(sim_t *m, st_trial_t *t, int k) {
    if (t->gpus == 0 && k > 0) m->running++;
    for (; k > 0 && m->nfree > 0; k--) {
        int g = free_pop(m);
        m->owner[g] = t->id;
        m->since[g] = m->now;
        m->free_gpus--;
        t->held = tp__xgrow(t->held, &t->held_cap, (size_t)t->gpus + 1, sizeof *t->held, 4);
        t->held[t->gpus++] = g;
    }
}

static void release_gpus(sim_t *m, st_trial_t *t) {
    for (int i = 0; i < t->gpus; i++) {
        int g = t->held[i];
        if (m->c->svg)
            m->bars = tp__xgrow(m->bars, &m->capbars, m->nbars + 1, sizeof *m->bars, 256);
        if (m->c->svg) m->bars[m->nbars++] = (st_bar_t){g, m->since[g], m->now, t->id, t->rung};
        m->out->gpu_busy += m->now - m->since[g];
        m->owner[g] = -1;
        if (!gpu_up(m, g)) continue; /* its node is lost: it comes back when a node joins */
        m->free_gpus++;
        free_push(m, g);
    }
    if (t->gpus > 0) m->running--;
    t->gpus = 0;
    t->running = 0;
    t->ver++; /* its pending event is stale */
}

/* A new attempt of t's job: pays its start-up, resumes from progress + frac. */
static void start_attempt(sim_t *m, st_trial_t *t) {
    t->attempt_start = m->now;
    t->job_attempts++;
    t->starting = 1;
    t->ready_at = m->now +
                  t->up * (0.9 + 0.2 * noise(m, t->id, t->progress + 100.0 * t->job_attempts,
                                             NOISE_STARTUP, 0)) +
                  m->c->trial_startup_s;
    t->nrep = 0;
    ev_push(m, t, t->ready_at);
}

static void start_job(sim_t *m, st_trial_t *t, const tp_job_t *job) {
    t->running = 1;
    t->rung = job->rung;
    t->budget = job->budget > 0 ? job->budget : 1; /* no budget: the trial is one unit */
    t->from = t->progress;
    t->frac = 0;
    t->job_attempts = 0;
    take_gpus(m, t, m->c->trial_gpus > 0 ? m->c->trial_gpus : 1);
    start_attempt(m, t);
    m->out->jobs++;
    timeline(m,
             job->is_new    ? "new"
             : job->exploit ? "exploit"
                            : "promoted",
             t->id, t->gpus, t->rung, NAN, job->why);
}

static void begin_unit(sim_t *m, st_trial_t *t) {
    t->unit_start = m->now;
    t->unit_clean = t->frac == 0;
    t->unit_end = m->now + (1 - t->frac) * step_time(m, t, t->gpus, t->progress + 1);
    ev_push(m, t, t->unit_end);
}

/* t's job reached its budget: timing, result, GPUs back. */
static void end_job(sim_t *m, st_trial_t *t) {
    tp_scheduler_t *s = m->s;
    if (s->ops->timing && t->job_attempts == 1 && t->nrep > 0) {
        tp_timing_t tm = {.trial = t->id,
                          .rung = t->rung,
                          .units = t->budget - t->from,
                          .run_s = t->last_rep_t - t->attempt_start,
                          .unit_s = NAN};
        if (t->last_step > t->first_rep_step)
            tm.unit_s = (t->last_rep_t - t->first_rep_t) / (t->last_step - t->first_rep_step);
        s->ops->timing(s, &tm, m->now);
    }
    s->ops->result(s, t->id, t->rung, 1, t->value, m->now);
    release_gpus(m, t);
    timeline(m, s->ops->final(s, t->id, t->rung) ? "final" : "paused", t->id, 0, t->rung, t->value,
             NULL);
}

static void unit_done(sim_t *m, st_trial_t *t) {
    t->progress += 1;
    t->frac = 0;
    if (t->unit_clean) tp__scaling_add(&t->sc, t->gpus, m->now - t->unit_start);
    if (t->nrep == 0 && t->unit_clean) t->restart_s = t->unit_start - t->attempt_start;
    t->value = metric_true(m, t, t->progress);
    if (!(t->rec && t->rec->npoints)) /* a measured curve carries its own noise */
        t->value += m->c->noise * noise(m, t->id, t->progress, NOISE_METRIC, 1);
    if (t->nrep++ == 0) {
        t->first_rep_t = m->now;
        t->first_rep_step = t->progress;
    }
    t->last_rep_t = m->now;
    t->last_step = t->progress;
    tp_simtune_result_t *o = m->out;
    if (o->best_trial < 0 || better(m, t->value, o->best)) {
        o->best = t->value;
        o->best_trial = t->id;
        o->best_true = metric_true(m, t, t->progress);
    }
    if (m->c->horizon_s > 0 && m->now <= m->c->horizon_s && better(m, t->value, o->best_by))
        o->best_by = t->value;
    if (t->progress >= t->budget - 1e-9)
        end_job(m, t);
    else
        begin_unit(m, t);
}

/* Free GPUs to the jobs a lost node left, lowest trial first (the run's
 * pending queue), then to the scheduler, one job each. */
static void fill(sim_t *m) {
    int k = m->c->trial_gpus > 0 ? m->c->trial_gpus : 1;
    while (m->nlost && m->free_gpus >= k) {
        st_trial_t *t = &m->t[m->lostq[0]];
        memmove(m->lostq, m->lostq + 1, --m->nlost * sizeof *m->lostq);
        t->lost = 0;
        t->running = 1;
        take_gpus(m, t, k);
        start_attempt(m, t);
        timeline(m, "placed again", t->id, t->gpus, t->rung, NAN, "its node was lost");
    }
    if (m->nlost) return; /* they come first */
    while (m->free_gpus >= k && (m->c->max_running <= 0 || m->running < m->c->max_running)) {
        tp_job_t job;
        memset(&job, 0, sizeof job);
        int rc = m->s->ops->next(m->s, m->now, &job);
        m->over = rc == 0;
        if (rc != 1) break;
        if (job.refused) {
            m->out->refused++;
            timeline(m, "refused", job.trial, 0, job.rung, NAN, job.why);
            continue;
        }
        st_trial_t *t = job.is_new ? new_trial(m, job.trial, job.config) : &m->t[job.trial];
        if (job.exploit) { /* pbt: the donor's checkpoint, the new configuration's curve */
            set_curve(m, t, job.config);
            t->progress = m->t[job.donor].progress;
            m->out->exploits++;
        }
        json_decref(job.config);
        start_job(m, t, &job);
    }
}

/* Free GPUs the scheduler left to running trials, by the policy. */
static void reallocate(sim_t *m) {
    if (!m->c->realloc || m->free_gpus <= 0) return;
    tp_realloc_trial_t rt[TP_SCALING_MAX_GPUS];
    size_t n = 0;
    for (size_t i = 0; i < m->n && n < TP_SCALING_MAX_GPUS; i++) {
        st_trial_t *t = &m->t[i];
        if (!t->running || t->starting) continue;
        double done = t->progress +
                      (m->now - t->unit_start) / (t->unit_end - t->unit_start) * (1 - t->frac) +
                      t->frac;
        rt[n++] = (tp_realloc_trial_t){.trial = t->id,
                                       .gpus = t->gpus,
                                       .gpus_min = 1,
                                       .gpus_max = m->c->gpus_max > 0 ? m->c->gpus_max : m->c->gpus,
                                       .remaining_steps = t->budget - done,
                                       .score = isnan(t->value) ? -1e300 : t->value,
                                       .scaling = &t->sc,
                                       .restart_s = t->restart_s,
                                       .last_resize_s = t->last_resize};
    }
    tp_resize_t rs[TP_SCALING_MAX_GPUS];
    size_t k = tp__realloc_plan(m->c->ropts.policy, rt, n, m->free_gpus, m->now, &m->c->ropts, rs,
                                TP_SCALING_MAX_GPUS);
    for (size_t i = 0; i < k && i < TP_SCALING_MAX_GPUS; i++) {
        st_trial_t *t = &m->t[rs[i].trial];
        /* checkpoint: the part of the unit in progress is kept */
        double part = (m->now - t->unit_start) / (t->unit_end - t->unit_start);
        t->frac = t->frac + (1 - t->frac) * part;
        take_gpus(m, t, rs[i].gpus - t->gpus);
        t->last_resize = m->now;
        start_attempt(m, t);
        m->out->resizes++;
        timeline(m, "resize", t->id, t->gpus, t->rung, t->value, rs[i].why);
    }
}

/* The free GPUs' heap again, without those of nodes that are not up. O(G log G). */
static void free_rebuild(sim_t *m) {
    size_t n = m->nfree;
    int *keep = tp__xmalloc((n ? n : 1) * sizeof *keep);
    memcpy(keep, m->freeh, n * sizeof *keep);
    m->nfree = 0;
    for (size_t i = 0; i < n; i++)
        if (gpu_up(m, keep[i])) free_push(m, keep[i]);
    free(keep);
}

/* A lost node's trial: its GPUs back, its job to be placed again from the
 * job's start, in trial order. */
static void lose(sim_t *m, st_trial_t *t) {
    release_gpus(m, t);
    t->stalled = 0;
    t->lost = 1;
    t->progress = t->from;
    t->frac = 0;
    m->lostq = tp__xgrow(m->lostq, &m->caplost, m->nlost + 1, sizeof *m->lostq, 16);
    size_t i = m->nlost++;
    for (; i > 0 && m->lostq[i - 1] > t->id; i--)
        m->lostq[i] = m->lostq[i - 1];
    m->lostq[i] = t->id;
    m->out->requeued++;
    timeline(m, "lost", t->id, 0, t->rung, NAN, "its node failed and was taken for lost");
}

/* The next node event, at m->now (sim_nodes.h). O(G log G) at most. */
static void node_event(sim_t *m) {
    size_t k = m->nodes.next;
    tp_sim_node_state_t st = tp__sim_nodes_step(&m->nodes, k, m->now);
    int g0 = (int)k * m->gpn, g1 = g0 + m->gpn < m->c->gpus ? g0 + m->gpn : m->c->gpus;
    for (int g = g0; g < g1; g++) {
        st_trial_t *t = m->owner[g] >= 0 ? &m->t[m->owner[g]] : NULL;
        if (st == TP_SIM_NODE_DEAD && t && !t->stalled) { /* its trials make no progress */
            t->stalled = 1;
            t->ver++;
        } else if (st == TP_SIM_NODE_DEAD && !t) {
            m->free_gpus--;
        } else if (st == TP_SIM_NODE_QUEUED && t) { /* taken for lost */
            lose(m, t);
        } else if (st == TP_SIM_NODE_UP) {
            m->free_gpus++;
            free_push(m, g);
        }
    }
    if (st == TP_SIM_NODE_DEAD) free_rebuild(m);
}

static void draw(sim_t *m) {
    if (!m->c->svg) return;
    tp_gantt_bar_t *bars = tp__xcalloc(m->nbars + 1, sizeof *bars);
    char **titles = tp__xcalloc(m->nbars + 1, sizeof *titles);
    size_t ncol = 1;
    for (size_t i = 0; i < m->nbars; i++) {
        const st_bar_t *b = &m->bars[i];
        titles[i] = tp__xmalloc(64);
        snprintf(titles[i], 64, "trial %lld, rung %d", (long long)b->trial, b->rung);
        bars[i] = (tp_gantt_bar_t){.band = (size_t)b->gpu,
                                   .start = b->start,
                                   .end = b->end,
                                   .colour = (size_t)b->rung,
                                   .title = titles[i]};
        if ((size_t)b->rung + 1 > ncol) ncol = (size_t)b->rung + 1;
    }
    char(*labels)[16] = tp__xcalloc((size_t)m->c->gpus, sizeof *labels);
    const char **lp = tp__xcalloc((size_t)m->c->gpus, sizeof *lp);
    for (int g = 0; g < m->c->gpus; g++) {
        snprintf(labels[g], sizeof labels[g], "gpu%d", g);
        lp[g] = labels[g];
    }
    char(*legend)[32] = tp__xcalloc(ncol, sizeof *legend);
    const char **lg = tp__xcalloc(ncol, sizeof *lg);
    for (size_t i = 0; i < ncol; i++) {
        snprintf(legend[i], sizeof legend[i], "rung %zu", i);
        lg[i] = legend[i];
    }
    char title[160], sub[200];
    snprintf(title, sizeof title, "%s on %d GPUs, deadline %.0f s", m->c->scheduler, m->c->gpus,
             m->c->deadline_s);
    snprintf(sub, sizeof sub, "best %.4f (trial %lld); %zu trials, %zu refused, %zu resizes",
             m->out->best, (long long)m->out->best_trial, m->out->trials, m->out->refused,
             m->out->resizes);
    tp_gantt_t g = {.title = title,
                    .subtitle = sub,
                    .nbands = (size_t)m->c->gpus,
                    .band_label = lp,
                    .bars = bars,
                    .nbars = m->nbars,
                    .span = m->now,
                    .legend = lg,
                    .nlegend = ncol};
    tp__chart_gantt(m->c->svg, &g);
    for (size_t i = 0; i < m->nbars; i++)
        free(titles[i]);
    free(titles);
    free(bars);
    free(labels);
    free(lp);
    free(legend);
    free(lg);
}

double tp__simtune_packed_factor(int k, double busy, double overhead, int served) {
    if (k <= 1) return 1;
    double m = 1 + overhead * (k - 1); /* each one's GPU work grows by the overhead */
    double T = (1 - busy) + m * busy;  /* its time at its own pace, alone = 1 */
    double D = k * m * busy / T;       /* the GPU's demand */
    double ck = served ? tp__fluid_served(NULL, k) : 1;
    return T * (D > ck ? D / ck : 1);
}

void tp__simtune_defaults(tp_simtune_cfg_t *c) {
    memset(c, 0, sizeof *c);
    c->scheduler = "asha";
    c->gpus = 8;
    c->trials = 81;
    c->budget_min = 1;
    c->budget_max = 27;
    c->eta = 3;
    tp__realloc_opts_default(&c->ropts);
    c->unit_s = 60;
    c->startup_s = 20;
    c->noise = 0.005;
}

static int make_scheduler(sim_t *m, tp_error_t *err) {
    tp__space_init(&m->space);
    if (m->c->scheduler_obj) {
        m->s = m->c->scheduler_obj;
        if (m->c->deadline_s > 0 && m->s->ops->deadline)
            m->s->ops->deadline(m->s, m->c->deadline_s);
        return 0;
    }
    const char *names[] = {"x", "y"};
    for (int i = 0; i < 2; i++) {
        tp_param_t p = {.name = tp__strdup(names[i]), .kind = TP_DOM_UNIFORM, .lo = 0, .hi = 1};
        tp__space_add(&m->space, &p);
    }
    tp_scheduler_cfg_t sc = {
        .scheduler = m->c->scheduler,
        .sampler = {.algorithm = m->c->sampler ? m->c->sampler : "random",
                    .trials = m->c->trials,
                    .seed = m->c->seed},
        .budget = {.name = "epochs",
                   .min = m->c->budget_min,
                   .max = m->c->budget_max,
                   .eta = m->c->eta},
        .maximize = 1,
        .pbt = {.interval = m->c->pbt_interval > 0 ? m->c->pbt_interval : m->c->budget_min}};
    m->s = tp__scheduler_new(&m->space, &sc, err);
    if (!m->s) return -EINVAL;
    if (m->c->deadline_s > 0 && m->s->ops->deadline) m->s->ops->deadline(m->s, m->c->deadline_s);
    return 0;
}

int tp__simtune_run(const tp_simtune_cfg_t *c, tp_simtune_result_t *out, tp_error_t *err) {
    memset(out, 0, sizeof *out);
    out->best = out->best_by = NAN;
    out->best_trial = -1;
    int most = c->realloc ? TP_SCALING_MAX_GPUS : TP_SIMTUNE_MAX_GPUS;
    if (c->gpus < 1 || c->gpus > most)
        return tp__errorf(err, -EINVAL, "gpus must be 1..%d, got %d", most, c->gpus);
    if (c->trial_gpus > c->gpus)
        return tp__errorf(err, -EINVAL, "a trial takes %d GPUs, more than the %d there are",
                          c->trial_gpus, c->gpus);
    if (c->scheduler_obj && c->realloc)
        return tp__errorf(err, -EINVAL,
                          "an experiment's own search is simulated without "
                          "reallocation");
    int scale = c->node_failures > 0 || c->queue_wait_s > 0;
    if (scale && c->realloc)
        return tp__errorf(err, -EINVAL,
                          "node failures and queue waits are simulated without "
                          "reallocation");
    sim_t m = {.c = c, .out = out, .scale = scale};
    m.gpn = c->gpus_per_node > 0 ? c->gpus_per_node : 8;
    if (scale)
        tp__sim_nodes_init(&m.nodes, (size_t)((c->gpus + m.gpn - 1) / m.gpn), c->node_failures,
                           c->queue_wait_s, c->seed);
    m.owner = tp__xmalloc((size_t)c->gpus * sizeof *m.owner);
    m.since = tp__xcalloc((size_t)c->gpus, sizeof *m.since);
    m.freeh = tp__xmalloc((size_t)c->gpus * sizeof *m.freeh);
    for (int g = 0; g < c->gpus; g++) {
        m.owner[g] = -1;
        if (gpu_up(&m, g)) m.freeh[m.nfree++] = g; /* ascending: a heap already */
    }
    m.free_gpus = (int)m.nfree;
    int rc = make_scheduler(&m, err);
    if (rc < 0) {
        tp__space_free(&m.space);
        free(m.owner);
        free(m.since);
        free(m.freeh);
        if (scale) tp__sim_nodes_free(&m.nodes);
        return rc;
    }
    if (c->timeline) tp__buf_printf(c->timeline, "t_s,event,trial,gpus,rung,value,why\n");
    fill(&m);
    for (;;) {
        st_trial_t *next = ev_next(&m);
        double tn = scale ? tp__sim_nodes_next_at(&m.nodes) : INFINITY;
        /* nothing runs: the end, unless jobs wait for the GPUs of nodes to come */
        if (!next &&
            (!scale || isinf(tn) || (!m.nlost && !m.running && (m.over || !m.nodes.coming))))
            break;
        double te = next ? (next->starting ? next->ready_at : next->unit_end) : INFINITY;
        double at = tn < te ? tn : te;
        if (c->deadline_s > 0 && at > c->deadline_s) {
            m.now = c->deadline_s;
            timeline(&m, "deadline", -1, 0, 0, out->best, "running trials checkpoint and report");
            break;
        }
        m.now = at;
        if (out->requeued > 1000 + ST_MAX_LOST_PER_JOB * out->jobs) break;
        if (tn < te) {
            node_event(&m);
        } else if (next->starting) {
            next->starting = 0;
            begin_unit(&m, next);
        } else {
            unit_done(&m, next);
        }
        fill(&m);
        reallocate(&m);
    }
    int hopeless = out->requeued > 1000 + ST_MAX_LOST_PER_JOB * out->jobs;
    if (hopeless)
        rc = tp__errorf(err, -ERANGE,
                        "the nodes fail faster than jobs end: %zu jobs lost with their nodes "
                        "for %zu started, by %.0f s (fewer failures, or shorter jobs)",
                        out->requeued, out->jobs, m.now);
    out->finished = out->trials;
    for (size_t i = 0; i < m.n; i++)
        if (m.t[i].running) {
            release_gpus(&m, &m.t[i]);
            out->finished--;
        } else if (m.t[i].lost) {
            out->finished--;
        }
    if (scale) {
        out->node_failures = m.nodes.failures;
        tp__sim_nodes_free(&m.nodes);
    }
    free(m.lostq);
    out->end_s = m.now;
    out->gpu_busy = m.now > 0 ? out->gpu_busy / (c->gpus * m.now) : 0;
    draw(&m);
    if (!c->scheduler_obj) tp__scheduler_free(m.s);
    tp__space_free(&m.space);
    for (size_t i = 0; i < m.n; i++)
        free(m.t[i].held);
    free(m.t);
    free(m.bars);
    free(m.owner);
    free(m.since);
    free(m.freeh);
    free(m.heap);
    return rc;
}
