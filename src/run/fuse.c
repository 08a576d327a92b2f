/* fuse: several configurations of the same shape in one process (`fuse: {max: K}`,
 * docs/fusion.md).
 *
 * Every trial keeps its own attempt in the store, its reports, decisions and checkpoint
 * directory; only the process is shared. The agent knows the process as the attempt of its
 * first configuration's trial (`proc`), whose directory holds its logs. The process reads
 * its configurations from {configs_json} (or TUNEPACK_CONFIGS_JSON), reports each line
 * with the index of the configuration it is about, and drops an index on "drop <i>" from
 * its control channel. One configuration of the process holds its placement; when it ends
 * first, another takes the placement over, so that what the process uses stays counted.
 *
 * How many configurations a process runs (K) is chosen per shape by tp__fuse_choose from
 * what earlier processes measured: steps per second per configuration (from the reports'
 * times since the process started) and peak memory (the agent's wait4, or NVML on GPUs). */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "run/orchestrator_internal.h"

_Static_assert(TP_FUSE_MAX <= TP_FUSE_K_MAX, "a fused process's K must fit the K table");

/* One fused process: the attempts of up to fuse.max trials of one shape and budget. The
 * agent knows it as the attempt (proc, attempt) of its first configuration's trial. */
struct tp_fused {
    int64_t proc;                   /* the trial id the agent knows it by */
    int attempt;                    /* that trial's attempt number */
    int n;                          /* configurations it started with (its K) */
    int64_t ids[TP_FUSE_MAX];       /* the trial of each configuration index */
    int64_t base[TP_FUSE_MAX];      /* each one's step when it started (0: a fresh job) */
    int64_t last_step[TP_FUSE_MAX]; /* each one's last reported step */
    double last_at[TP_FUSE_MAX];    /* monotonic time of each one's last report, 0: none */
    int running;                    /* configurations still running in it */
    int stop_sent;                  /* a stop or pause went to the process */
    int busy;                       /* its end is being mapped to its configurations: kept */
    size_t shape;                   /* its shape's index in tp_fusion_t.shapes */
    double started;                 /* monotonic time it was started */
};

/* The largest {configs_json} a process is given: one argv element or environment string
 * (Linux caps each at 128 KiB), with room to spare. */
#define CONFIGS_JSON_MAX 120000

tp_fused_t *tp__fuse_of(const trial_t *t) {
    return t->fusion.fused;
}
int tp__fuse_index(const trial_t *t) {
    return t->fusion.index;
}
uint64_t tp__fuse_mem_mib(const trial_t *t) {
    return t->fusion.mem_mib;
}
int64_t tp__fuse_proc(const trial_t *t) {
    return t->fusion.proc;
}

void tp__fuse_alone(trial_t *t) {
    if (!t->fusion.fused) t->fusion.proc = t->id;
}

int tp__fuse_slots_used(const tp_run_t *r) {
    return tp__trials_in(&r->trials, TP_TRIAL_RUNNING) - r->fuse.extra;
}

int64_t tp__fuse_process_id(const tp_fused_t *f) {
    return f->proc;
}
int tp__fuse_attempt(const tp_fused_t *f) {
    return f->attempt;
}
int tp__fuse_k(const tp_fused_t *f) {
    return f->n;
}
int tp__fuse_stop_sent(const tp_fused_t *f) {
    return f->stop_sent;
}
void tp__fuse_mark_stopped(tp_fused_t *f) {
    f->stop_sent = 1;
}

tp_fused_t *tp__fuse_find(const tp_run_t *r, int64_t trial, int64_t attempt) {
    for (size_t i = 0; i < r->fuse.nlive; i++)
        if (r->fuse.live[i]->proc == trial && r->fuse.live[i]->attempt == attempt)
            return r->fuse.live[i];
    return NULL;
}

trial_t *tp__fuse_member(const tp_run_t *r, const tp_fused_t *f, int config) {
    if (config < 0 && f->n == 1) config = 0;
    if (config < 0) { /* any configuration still in it */
        for (int i = 0; i < f->n; i++) {
            trial_t *u = tp__fuse_member(r, f, i);
            if (u) return u;
        }
        return NULL;
    }
    if (config >= f->n) return NULL;
    trial_t *u = tp__trials_get(&r->trials, f->ids[config]);
    return u && u->state == TP_TRIAL_RUNNING && u->fusion.fused == f ? u : NULL;
}

void tp__fuse_seen(tp_fused_t *f, const trial_t *t, int64_t step) {
    int i = t->fusion.index;
    /* The first report counts one step done since the start (a resumed or promoted job
     * starts past step 0). */
    if (f->last_at[i] <= 0) f->base[i] = step - 1;
    f->last_step[i] = step;
    f->last_at[i] = t->pace.last_report;
}

/* ---- shapes and their measurements ------------------------------------------------- */

/* The shape of a configuration: its shape parameters' values as JSON (sorted keys). */
static char *shape_key(const tp_run_t *r, const json_t *params) {
    json_t *o = json_object();
    for (size_t i = 0; i < r->x.fuse.nshape; i++) {
        json_t *v = json_object_get(params, r->x.fuse.shape[i]);
        json_object_set(o, r->x.fuse.shape[i], v ? v : json_null());
    }
    char *s = json_dumps(o, JSON_COMPACT | JSON_SORT_KEYS);
    json_decref(o);
    return s;
}

static size_t shape_of(tp_run_t *r, const char *key) {
    for (size_t i = 0; i < r->fuse.nshapes; i++)
        if (!strcmp(r->fuse.shapes[i].key, key)) return i;
    r->fuse.shapes = tp__xrealloc(r->fuse.shapes, (r->fuse.nshapes + 1) * sizeof *r->fuse.shapes);
    tp_fuse_shape_t *s = &r->fuse.shapes[r->fuse.nshapes];
    memset(s, 0, sizeof *s);
    s->key = tp__strdup(key);
    return r->fuse.nshapes++;
}

/* What one process may use, MiB: `fuse.memory`; else a GPU's memory less the reserve
 * (the smallest GPU); else on CPU the first node's memory shared by `concurrency`
 * processes. 0: unknown (no limit). */
static double memory_limit(const tp_run_t *r) {
    if (r->x.fuse.memory_mib) return (double)r->x.fuse.memory_mib;
    const tp_cluster_t *c = tp__placement_cluster(r);
    double least = 0;
    if (r->x.res.gpus > 0) {
        for (size_t n = 0; n < c->nnodes; n++)
            for (size_t g = 0; g < c->nodes[n].ngpus; g++) {
                double m = (double)c->nodes[n].gpus[g].memory_mib - (double)r->x.reserve_mib;
                if (m > 0 && (least == 0 || m < least)) least = m;
            }
        return least;
    }
    if (c->nnodes && tp__placement_node(r, 0)->memory_mib > 0)
        return (double)tp__placement_node(r, 0)->memory_mib / r->x.concurrency;
    return 0;
}

/* The measurements of every shape as JSON, meta "fusion" (what `status` shows and a
 * resumed run starts from): {shape: {K: {runs, rate, mem_mib, cpu_s}}}. */
static void journal_table(tp_run_t *r) {
    json_t *all = json_object();
    for (size_t i = 0; i < r->fuse.nshapes; i++) {
        json_t *o = json_object();
        for (int k = 1; k <= TP_FUSE_K_MAX; k++) {
            const tp_fuse_measure_t *m = &r->fuse.shapes[i].table.at[k];
            if (!m->runs) continue;
            char kk[8];
            snprintf(kk, sizeof kk, "%d", k);
            json_object_set_new(o, kk,
                                json_pack("{s:i, s:f, s:f, s:f}", "runs", m->runs, "rate", m->rate,
                                          "mem_mib", m->mem_mib, "cpu_s", m->cpu_s));
        }
        json_object_set_new(all, r->fuse.shapes[i].key, o);
    }
    char *text = json_dumps(all, JSON_COMPACT | JSON_SORT_KEYS);
    json_decref(all);
    tp__journal_ok(&r->journal, tp__store_meta_set(tp__journal_tx(&r->journal), "fusion", text),
                   "recording fused throughput");
    free(text);
}

void tp__fuse_load(tp_run_t *r) {
    if (!r->x.fuse.max) return;
    char *text = tp__store_meta_get(tp__journal_store(&r->journal), "fusion");
    json_t *all = text ? json_loads(text, 0, NULL) : NULL;
    free(text);
    const char *key;
    json_t *o;
    json_object_foreach(all, key, o) {
        size_t s = shape_of(r, key);
        const char *kk;
        json_t *m;
        json_object_foreach(o, kk, m) {
            int k = atoi(kk);
            if (k < 1 || k > TP_FUSE_K_MAX) continue;
            tp_fuse_measure_t *x = &r->fuse.shapes[s].table.at[k];
            x->runs = (int)json_integer_value(json_object_get(m, "runs"));
            x->rate = json_number_value(json_object_get(m, "rate"));
            x->mem_mib = json_number_value(json_object_get(m, "mem_mib"));
            x->cpu_s = json_number_value(json_object_get(m, "cpu_s"));
        }
    }
    json_decref(all);
}

void tp__fuse_free(tp_run_t *r) {
    for (size_t i = 0; i < r->fuse.nlive; i++)
        free(r->fuse.live[i]);
    free(r->fuse.live);
    for (size_t i = 0; i < r->fuse.nshapes; i++)
        free(r->fuse.shapes[i].key);
    free(r->fuse.shapes);
    memset(&r->fuse, 0, sizeof r->fuse);
}

/* The K for a new process of shape s: measured throughput under the memory limit, with
 * processes of this shape still being measured (live ones, and those of this round)
 * looked past. Journals the choice (event fuse-choice) when it changes. */
static int choose_k(tp_run_t *r, size_t s, const int *round_k, size_t nround,
                    const size_t *round_shape) {
    int trying[TP_FUSE_K_MAX + 1] = {0};
    const tp_fuse_table_t *tab = &r->fuse.shapes[s].table;
    for (size_t i = 0; i < r->fuse.nlive; i++)
        if (r->fuse.live[i]->shape == s && !tab->at[r->fuse.live[i]->n].runs)
            trying[r->fuse.live[i]->n]++;
    for (size_t i = 0; i < nround; i++)
        if (round_shape[i] == s) trying[round_k[i]]++;
    tp_fuse_pick_t p = tp__fuse_choose(tab, r->x.fuse.min, r->x.fuse.max, trying, memory_limit(r));
    if (p.k != r->fuse.shapes[s].last_k) {
        char detail[400];
        snprintf(detail, sizeof detail, "shape %s: %s", r->fuse.shapes[s].key, p.why);
        tp__log(TP_LOG_INFO, "fuse: %s", detail);
        tp__journal_ok(&r->journal,
                       tp__store_event(tp__journal_tx(&r->journal), -1, 0, "fuse-choice", detail,
                                       tp__wall_s()),
                       "recording a fused count");
    }
    r->fuse.shapes[s].last_k = p.k;
    return p.k;
}

/* ---- starting processes -------------------------------------------------------------- */

typedef struct group {
    char *key; /* shape key and budget: who may join */
    size_t shape;
    int k;        /* configurations it takes */
    int n;        /* configurations it has */
    size_t bytes; /* their parameters' JSON, to keep {configs_json} in bounds */
    trial_t *members[TP_FUSE_MAX];
} group_t;

static void start_process(tp_run_t *r, group_t *g) {
    tp_fused_t *f = tp__xcalloc(1, sizeof *f);
    trial_t *lead = g->members[0];
    f->n = g->n;
    f->shape = g->shape;
    f->running = g->n;
    f->started = tp__mono_s();
    f->proc = lead->id;
    for (int i = 0; i < g->n; i++) {
        trial_t *u = g->members[i];
        f->ids[i] = u->id;
        u->fusion.fused = f;
        u->fusion.index = i;
        u->fusion.proc = lead->id;
        if (i > 0) { /* where the process runs, for the log line and agent losses; the
                        placement itself is held by the first */
            tp__placement_run_beside(u, lead);
        }
        tp__run_start_attempt(r, u, i == 0);
        if (i > 0) u->where.placed = 0;
    }
    f->attempt = lead->attempts;
    r->fuse.live =
        tp__xgrow(r->fuse.live, &r->fuse.cap, r->fuse.nlive + 1, sizeof *r->fuse.live, 8);
    r->fuse.live[r->fuse.nlive++] = f;
    r->fuse.extra += g->n - 1;
}

/* See orchestrator_internal.h. Candidates come lowest id first (retries, interrupted ones,
 * then the scheduler's jobs); each joins an open group of its shape and budget, or opens
 * one while slots remain; the first that fits nowhere goes back and ends the round. Then
 * the groups' first trials are placed; a group whose first trial does not fit goes back
 * whole. O(candidates x groups). */
size_t tp__fuse_schedule(tp_run_t *r, size_t free_slots) {
    group_t *groups = tp__xcalloc(free_slots, sizeof *groups);
    int *round_k = tp__xcalloc(free_slots, sizeof *round_k);
    size_t *round_shape = tp__xcalloc(free_slots, sizeof *round_shape);
    size_t ng = 0, started = 0;
    trial_t *t;
    while ((t = tp__run_next_candidate(r)) != NULL) {
        char *shape = shape_key(r, t->params), budget[32];
        tp__fmt_double(t->job.budget, budget);
        size_t plen = strlen(shape) + strlen(budget) + 2;
        char *key = tp__xmalloc(plen);
        snprintf(key, plen, "%s|%s", shape, budget);
        char *ptext = json_dumps(t->params, JSON_COMPACT);
        size_t bytes = (ptext ? strlen(ptext) : 0) + 2 * 4200 + 64; /* params, paths */
        free(ptext);
        group_t *g = NULL;
        for (size_t i = 0; i < ng && !g; i++)
            if (!strcmp(groups[i].key, key) && groups[i].n < groups[i].k &&
                groups[i].bytes + bytes <= CONFIGS_JSON_MAX)
                g = &groups[i];
        if (!g && ng < free_slots) {
            g = &groups[ng];
            g->key = key;
            key = NULL;
            g->shape = shape_of(r, shape);
            g->k = choose_k(r, g->shape, round_k, ng, round_shape);
            round_k[ng] = g->k;
            round_shape[ng] = g->shape;
            ng++;
        }
        free(key);
        free(shape);
        if (!g) {
            tp__run_put_back(r, t);
            break;
        }
        g->members[g->n++] = t;
        g->bytes += bytes;
        int full = 1;
        for (size_t i = 0; i < ng; i++)
            full &= groups[i].n == groups[i].k;
        if (full && ng == free_slots) break;
    }
    if (ng) {
        trial_t **lead = tp__xcalloc(ng, sizeof *lead);
        for (size_t i = 0; i < ng; i++) {
            lead[i] = groups[i].members[0];
            /* On GPUs a process of K configurations is placed with what K measured (or
             * extrapolates to), where that is more than its group's demand. */
            lead[i]->fusion.mem_mib = r->x.res.gpus > 0
                                          ? (uint64_t)tp__fuse_memory_at(
                                                &r->fuse.shapes[groups[i].shape].table, groups[i].k)
                                          : 0;
        }
        tp__placement_place(r, lead, ng);
        for (size_t i = 0; i < ng; i++) {
            if (lead[i]->where.placed) {
                start_process(r, &groups[i]);
                started++;
            } else {
                for (int j = 0; j < groups[i].n; j++)
                    tp__run_put_back(r, groups[i].members[j]);
            }
            free(groups[i].key);
        }
        free(lead);
    }
    free(groups);
    free(round_k);
    free(round_shape);
    return started;
}

char *tp__fuse_configs_json(const tp_run_t *r, const trial_t *t) {
    const tp_fused_t *f = t->fusion.fused;
    json_t *a = json_array();
    for (int i = 0; i < f->n; i++) {
        const trial_t *u = tp__trials_get(&r->trials, f->ids[i]);
        char home[4200], ckpt[4400];
        tp__run_trial_home(r, u, home, sizeof home);
        tp__run_checkpoint_dir(r, u, ckpt, sizeof ckpt);
        json_array_append_new(a, json_pack("{s:i, s:I, s:O, s:s, s:s}", "config", i, "trial",
                                           (json_int_t)u->id, "params", u->params, "checkpoint_dir",
                                           ckpt, "trial_dir", home));
    }
    char *s = json_dumps(a, JSON_COMPACT);
    json_decref(a);
    return s;
}

/* ---- ends -------------------------------------------------------------------------- */

static void unlink_live(tp_run_t *r, tp_fused_t *f) {
    for (size_t i = 0; i < r->fuse.nlive; i++)
        if (r->fuse.live[i] == f) {
            r->fuse.live[i] = r->fuse.live[--r->fuse.nlive];
            break;
        }
    free(f);
}

int tp__fuse_left(tp_run_t *r, trial_t *t) {
    tp_fused_t *f = t->fusion.fused;
    if (!f) return 0;
    t->fusion.fused = NULL;
    if (f->running > 1) r->fuse.extra--;
    f->running--;
    int handed = 0;
    if (t->where.placed && f->running > 0) {
        for (int i = 0; i < f->n && !handed; i++) {
            trial_t *u = tp__fuse_member(r, f, i);
            if (!u || u == t) continue;
            tp__placement_hand_over(u, t);
            handed = 1;
        }
    }
    if (f->running == 0 && !f->busy) unlink_live(r, f);
    return handed;
}

/* Steps per second per configuration since the process started, over the configurations
 * that reported; 0 if none did. */
static double rate_of(const tp_fused_t *f, int *steps) {
    double sum = 0;
    int n = 0;
    *steps = 0;
    for (int i = 0; i < f->n; i++) {
        double dt = f->last_at[i] - f->started;
        int64_t d = f->last_step[i] - f->base[i];
        if (f->last_at[i] <= 0 || dt <= 0 || d <= 0) continue;
        sum += (double)d / dt;
        *steps += (int)d;
        n++;
    }
    return n ? sum / n : 0;
}

/* A process that ended by itself (exited 0 or paused): what it measured goes into its
 * shape's table, the journal (event fuse-measure, meta fusion) and the log. */
static void measure(tp_run_t *r, tp_fused_t *f, const tp_exited_t *e) {
    if (!(e->ended == TP_ENDED_PAUSED || tp__exited_ok(e))) return;
    double maxrss = e->maxrss_mib, cpu = e->cpu_s;
    int steps;
    double rate = rate_of(f, &steps);
    if (!(rate > 0)) return;
    double mem = maxrss;
    if (r->x.res.gpus > 0) { /* GPU memory is what must fit: NVML's peak for the process */
        mem = 0;
        for (int i = 0; i < f->n; i++) {
            const trial_t *u = tp__trials_get(&r->trials, f->ids[i]);
            if (u && (double)tp__placement_peak_mib(u) > mem)
                mem = (double)tp__placement_peak_mib(u);
        }
    }
    double cpu_step = cpu > 0 && steps > 0 ? cpu / steps : 0;
    tp_fuse_shape_t *s = &r->fuse.shapes[f->shape];
    tp__fuse_table_add(&s->table, f->n, rate, mem, cpu_step);
    char detail[500];
    snprintf(detail, sizeof detail,
             "shape %s: K=%d: %.3g steps/s per configuration, %.3g in all; peak memory %.0f "
             "MiB; %.3g CPU s per configuration-step",
             s->key, f->n, rate, rate * f->n, mem, cpu_step);
    tp__log(TP_LOG_INFO, "fuse: %s", detail);
    tp__journal_ok(&r->journal,
                   tp__store_event(tp__journal_tx(&r->journal), f->proc, f->attempt, "fuse-measure",
                                   detail, tp__wall_s()),
                   "recording fused throughput");
    journal_table(r);
}

void tp__fuse_on_exited(tp_run_t *r, tp_fused_t *f, const tp_exited_t *e) {
    measure(r, f, e);
    f->busy = 1;
    for (int i = 0; i < f->n; i++) {
        trial_t *u = tp__fuse_member(r, f, i);
        if (u) tp__run_on_exited(r, u, e);
    }
    f->busy = 0;
    if (f->running == 0) unlink_live(r, f);
}

void tp__fuse_drop(tp_run_t *r, trial_t *t) {
    tp_fused_t *f = t->fusion.fused;
    if (f->running > 1) {
        json_t *m = json_pack("{s:s, s:I, s:i, s:i}", "type", "drop", "trial", (json_int_t)f->proc,
                              "attempt", f->attempt, "config", t->fusion.index);
        tp__agents_send(r, (int)t->where.node, m);
        json_decref(m);
    } else {
        tp__run_send_control(r, t, "stop", "early stop of its last configuration");
    }
    /* It ends now, stopped with what it reported (outcome.c's early-stop verdict). */
    tp_exited_t ended = {.ended = TP_ENDED_STOPPED, .status = "stopped", .code = -1, .error = ""};
    tp__run_on_exited(r, t, &ended);
}
