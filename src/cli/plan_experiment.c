/* tunepack plan / simulate of an experiment file (the YAML `tunepack run`
 * takes): the experiment's own sampler and scheduler, built as the run
 * builds them (tp__run_scheduler_new), run on sim_tune's virtual clock over
 * several seeds, with the trials' times and learning curves resampled from a
 * run directory's store where one has measured them (docs/simulator.md,
 * "An experiment of your own"). */
#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "cli/cli.h"
#include "config/config.h"
#include "place/place.h"
#include "run/run.h"
#include "search/scheduler.h"
#include "sim/gpu_speed.h"
#include "sim/sim_tune.h"
#include "store/store.h"

#define XP_ASSUMED_UNIT_S 60.0 /* nothing measured, declared or given */

typedef struct xp {
    const tp_experiment_t *x;
    tp_simtune_measured_t *rec; /* measured trials (arrays owned) */
    size_t nrec;
    int curves;           /* records with a learning curve */
    double unit_s;        /* when nothing is measured */
    int trial_gpus;       /* GPUs per trial */
    int max_running;      /* jobs at once (0: the GPUs') */
    int seeds;            /* simulated searches per GPU count */
    json_t *assumed;      /* what the answer rests on, in words */
    double median_unit;   /* of the records */
    double startup_s;     /* each job's start-up, fitted from the jobs' durations (0: none) */
    size_t jobs;          /* jobs the fit saw */
    char gpu[128];        /* the type of GPU the measured run had ("": none recorded) */
    tp_cli_scale_t scale; /* node failures, queue waits, a trial's start-up on its node */
    int gpn;              /* the nodes' size */
    int per_gpu;          /* trials its placement packs on one GPU (0 or 1: alone) */
} xp_t;

typedef struct xp_stats {
    double ms[3], fin[3], best[3]; /* 5th percentile, median, 95th (nearest rank) */
    int has_best;
    int sims;
} xp_stats_t;

static void assume(xp_t *p, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void assume(xp_t *p, const char *fmt, ...) {
    char text[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(text, sizeof text, fmt, ap);
    va_end(ap);
    json_array_append_new(p->assumed, json_string(text));
}

static int cmp_d(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* 5th percentile, median, 95th of v[0..n) (sorted in place; NaN left out). */
static int spread(double *v, size_t n, double out[3]) {
    size_t k = 0;
    for (size_t i = 0; i < n; i++)
        if (!isnan(v[i])) v[k++] = v[i];
    if (!k) return 0;
    qsort(v, k, sizeof *v, cmp_d);
    out[0] = v[(size_t)floor(0.05 * (double)(k - 1))];
    out[1] = k % 2 ? v[k / 2] : (v[k / 2 - 1] + v[k / 2]) / 2;
    out[2] = v[(size_t)ceil(0.95 * (double)(k - 1))];
    return 1;
}

/* ---- what a run measured ---------------------------------------------------- */

typedef struct pt {
    double step, value;
} pt_t;

typedef struct ptbuf {
    pt_t *p;
    size_t n, cap;
} ptbuf_t;

static int on_point(int64_t step, double value, void *ud) {
    ptbuf_t *b = ud;
    if (isnan(value)) return 0;
    b->p = tp__xgrow(b->p, &b->cap, b->n + 1, sizeof *b->p, 64);
    b->p[b->n] = (pt_t){step == TP_STORE_NO_STEP ? (double)b->n + 1 : (double)step, value};
    b->n++;
    return 0;
}

typedef struct row {
    int64_t id;
    int attempts;
    double run_s, units, started, ended;
    int failed, ran;
    int has_best;
    double best;
} row_t;

typedef struct rows {
    row_t *r;
    size_t n, cap;
} rows_t;

static int on_trial(const tp_trial_row_t *t, void *ud) {
    rows_t *rs = ud;
    rs->r = tp__xgrow(rs->r, &rs->cap, rs->n + 1, sizeof *rs->r, 64);
    int done = strcmp(t->state, "pending") != 0 && strcmp(t->state, "running") != 0;
    rs->r[rs->n++] = (row_t){.id = t->id,
                             .attempts = t->attempts,
                             .run_s = t->run_s,
                             .units = t->budget > 0 ? t->budget : 1,
                             .started = t->started_at,
                             .ended = t->ended_at,
                             .failed = strcmp(t->state, "failed") == 0,
                             .ran = done && t->ended_at > 0,
                             .has_best = t->has_value,
                             .best = t->best};
    return 0;
}

static int by_start(const void *a, const void *b) {
    const row_t *x = a, *y = b;
    return (x->started > y->started) - (x->started < y->started);
}

/* Each job's duration against its budget units, from the decisions journal
 * (a job's `job` row to its `result`): d = a + b u by least squares, when
 * the units differ (a budget's rungs); a is a job's start-up. */
typedef struct fit {
    double *at, *units; /* by trial: its running job's start and units */
    double sx, sy, sxx, sxy;
    size_t k;
    double *tprev; /* by trial: the budget its last job reached */
    size_t ntprev;
    const unsigned char *keep; /* by trial: its jobs count (the trials measured) */
    size_t nkeep;
} fit_t;

static int on_decision(const tp_decision_row_t *d, void *ud) {
    fit_t *f = ud;
    if (d->trial < 0 || (size_t)d->trial >= f->nkeep || !f->keep[d->trial]) return 0;
    size_t id = (size_t)d->trial;
    if (id >= f->ntprev) {
        size_t old = f->ntprev;
        f->tprev = tp__xgrow(f->tprev, &f->ntprev, id + 1, sizeof *f->tprev, 64);
        f->at = tp__xresize(f->at, old, f->ntprev, sizeof *f->at);
        f->units = tp__xresize(f->units, old, f->ntprev, sizeof *f->units);
        for (size_t i = old; i < f->ntprev; i++)
            f->at[i] = NAN;
    }
    if (strcmp(d->kind, "job") == 0) {
        f->at[id] = d->at;
        f->units[id] = d->budget > 0 ? d->budget - f->tprev[id] : 1;
    } else if (strcmp(d->kind, "result") == 0 && d->ok && !isnan(f->at[id])) {
        double u = f->units[id], t = d->at - f->at[id];
        if (u > 0 && t > 0) {
            f->sx += u, f->sy += t, f->sxx += u * u, f->sxy += u * t;
            f->k++;
        }
        if (d->budget > 0) f->tprev[id] = d->budget;
        f->at[id] = NAN;
    }
    return 0;
}

/* The trials of s that ran and ended (the first `first` to start, 0: all;
 * the first to end would be the shortest, a plan too quick)
 * into p->rec; their rows into *rows (caller frees). */
static void read_measured(xp_t *p, tp_store_t *s, size_t first, rows_t *rows) {
    memset(rows, 0, sizeof *rows);
    tp__store_trials(s, on_trial, rows);
    row_t *use = tp__xcalloc(rows->n + 1, sizeof *use);
    size_t n = 0;
    for (size_t i = 0; i < rows->n; i++)
        if (rows->r[i].ran && !rows->r[i].failed && rows->r[i].run_s > 0) use[n++] = rows->r[i];
    qsort(use, n, sizeof *use, by_start);
    if (first && n > first) n = first;
    fit_t f = {0};
    size_t maxid = 0;
    for (size_t i = 0; i < n; i++)
        if ((size_t)use[i].id + 1 > maxid) maxid = (size_t)use[i].id + 1;
    unsigned char *keep = tp__xcalloc(maxid + 1, 1);
    for (size_t i = 0; i < n; i++)
        keep[use[i].id] = 1;
    f.keep = keep;
    f.nkeep = maxid;
    tp__store_decisions(s, on_decision, &f);
    free(keep);
    double den = (double)f.k * f.sxx - f.sx * f.sx;
    if (f.k >= 3 && den > 1e-9 * f.sxx * (double)f.k) {
        double b = ((double)f.k * f.sxy - f.sx * f.sy) / den, a = (f.sy - b * f.sx) / (double)f.k;
        if (a > 0 && b > 0) p->startup_s = a;
    }
    p->jobs = f.k;
    free(f.tprev);
    free(f.at);
    free(f.units);
    p->rec = tp__xcalloc(n + 1, sizeof *p->rec);
    double *units = tp__xcalloc(n + 1, sizeof *units);
    for (size_t i = 0; i < n; i++) {
        ptbuf_t b = {0};
        for (int a = 0; a <= use[i].attempts; a++)
            tp__store_metric_values(s, use[i].id, a, on_point, &b);
        tp_simtune_measured_t *r = &p->rec[p->nrec++];
        /* its jobs' start-ups taken out: one per rung it reached */
        double njobs = 1;
        if (p->x->budget_name && p->x->budget_eta > 1)
            for (double bu = p->x->budget_min; bu < use[i].units - 1e-9; bu *= p->x->budget_eta)
                njobs++;
        double run = use[i].run_s - njobs * p->startup_s;
        r->unit_s = (run > 0.1 * use[i].run_s ? run : 0.1 * use[i].run_s) / use[i].units;
        r->units = use[i].units;
        units[i] = r->unit_s;
        if (b.n) {
            double last = b.p[b.n - 1].step > 0 ? b.p[b.n - 1].step : (double)b.n;
            double *frac = tp__xcalloc(b.n, sizeof *frac), *val = tp__xcalloc(b.n, sizeof *val);
            for (size_t k = 0; k < b.n; k++) {
                frac[k] = b.p[k].step / last;
                val[k] = b.p[k].value;
            }
            r->frac = frac;
            r->values = val;
            r->npoints = b.n;
            p->curves++;
        }
        free(b.p);
    }
    double q[3];
    if (spread(units, n, q)) p->median_unit = q[1];
    free(units);
    free(use);
}

static void free_measured(xp_t *p) {
    for (size_t i = 0; i < p->nrec; i++) {
        free((void *)p->rec[i].frac);
        free((void *)p->rec[i].values);
    }
    free(p->rec);
    p->rec = NULL;
    p->nrec = 0;
}

/* ---- the simulated search ------------------------------------------------ */

/* `seeds` searches on `gpus` GPUs; the best is what was reported by
 * horizon_s (0: by the end). */
static int simulate(xp_t *p, int gpus, double deadline_s, double horizon_s, xp_stats_t *st,
                    tp_error_t *err) {
    memset(st, 0, sizeof *st);
    double ms[64], fin[64], best[64];
    int n = p->seeds < 64 ? p->seeds : 64;
    for (int k = 0; k < n; k++) {
        tp_experiment_t x = *p->x; /* the same search, another seed */
        x.search.seed = p->x->search.seed + (uint64_t)k;
        tp_scheduler_t *s = tp__run_scheduler_new(&x, err);
        if (!s) return -EINVAL;
        tp_simtune_cfg_t c;
        tp__simtune_defaults(&c);
        c.scheduler = p->x->scheduler ? p->x->scheduler : "fifo";
        c.scheduler_obj = s;
        int per = p->per_gpu > 1 ? p->per_gpu : 1; /* a GPU holds that many trials */
        c.gpus = gpus * per;
        c.seed = (uint64_t)k;
        c.measured = p->rec;
        c.nmeasured = p->nrec;
        c.minimize = !p->x->maximize;
        c.trial_gpus = p->trial_gpus;
        c.max_running = p->max_running;
        c.unit_s = p->unit_s;
        c.startup_s = p->startup_s; /* every job pays it (0: in the unit times) */
        c.horizon_s = horizon_s;
        c.node_failures = p->scale.node_failures;
        c.queue_wait_s = p->scale.queue_wait_s;
        c.trial_startup_s = p->scale.trial_startup_s;
        c.gpus_per_node = p->gpn * per;
        /* a scheduler that plans against the deadline is told it, as the run tells it */
        c.deadline_s = s->ops->deadline ? deadline_s : 0;
        tp_simtune_result_t r;
        int rc = tp__simtune_run(&c, &r, err);
        tp__scheduler_free(s);
        if (rc < 0) return rc;
        ms[k] = r.end_s;
        fin[k] = (double)r.finished;
        best[k] = horizon_s > 0 ? r.best_by : r.best;
        st->sims++;
    }
    spread(ms, (size_t)n, st->ms);
    spread(fin, (size_t)n, st->fin);
    st->has_best = p->curves > 0 && spread(best, (size_t)n, st->best);
    return 0;
}

/* ---- the experiment and its measurements -------------------------------- */

int tp__cli_is_experiment(const char *path) {
    FILE *f = fopen(path, "r");
    if (!f) return 0;
    tp_buf_t b;
    tp__buf_init(&b);
    char chunk[4096];
    size_t k;
    while ((k = fread(chunk, 1, sizeof chunk, f)) > 0)
        tp__buf_append(&b, chunk, k);
    fclose(f);
    tp__buf_append(&b, "", 1);
    json_t *tree = tp__config_tree(b.data);
    int is = json_is_object(tree) && json_object_get(tree, "command") &&
             !json_object_get(tree, "gpu_types");
    json_decref(tree);
    tp__buf_free(&b);
    return is;
}

static int has_store(const char *d) {
    char path[4200];
    struct stat st;
    snprintf(path, sizeof path, "%s/%s", d, TP_STORE_FILE);
    return stat(path, &st) == 0;
}

/* p from x and, where dir holds a run, its measurements (the first `first`
 * trials to start; 0: all). 0, or an exit code after a message. */
static int prepare(xp_t *p, const tp_experiment_t *x, const tp_xplan_opts_t *o, const char *dir,
                   int dir_given, size_t first, rows_t *rows) {
    memset(p, 0, sizeof *p);
    memset(rows, 0, sizeof *rows);
    p->x = x;
    p->seeds = o->seeds > 0 ? o->seeds : 10;
    p->assumed = json_array();
    p->scale = o->scale;
    p->gpn = o->gpus_per_node > 0 ? o->gpus_per_node : 8;
    p->trial_gpus = x->res.gpus > 0 ? x->res.gpus * (x->res.nodes > 0 ? x->res.nodes : 1) : 1;
    if (x->res.gpus > 0)
        assume(p, "%d GPU%s per trial, as resources: declares", p->trial_gpus,
               p->trial_gpus == 1 ? "" : "s");
    else
        assume(p, "1 GPU per trial, alone (resources: declares no gpus)");
    if (x->concurrency_total > 0) {
        p->max_running = x->concurrency_total;
        assume(p, "at most %d trials at once (concurrency.total)", p->max_running);
    } else {
        assume(p, "as many trials at once as the GPUs take (concurrency per node is raised "
                  "to fill the nodes)");
    }
    if (dir && (dir_given || has_store(dir))) {
        char *resolved = NULL;
        tp_store_t *s = tp__cli_open(dir, &resolved);
        if (!s) return TP_EXIT_USAGE;
        read_measured(p, s, first, rows);
        char *gpus = tp__store_meta_get(s, "gpus"); /* the run's GPUs: [{"type", ...}] */
        json_t *g = gpus ? json_loads(gpus, 0, NULL) : NULL;
        const char *type = json_string_value(json_object_get(json_array_get(g, 0), "type"));
        snprintf(p->gpu, sizeof p->gpu, "%s", type ? type : "");
        json_decref(g);
        free(gpus);
        tp__store_close(s);
        if (p->startup_s > 0)
            assume(p,
                   "every job starts in %.3g s before its first %s (fitted over %zu jobs' "
                   "durations), and resumes from its checkpoint",
                   p->startup_s, x->budget_name ? "budget unit" : "step", p->jobs);
        if (p->nrec)
            assume(p,
                   "trial times measured in %s: %zu trials, median %.3g s per %s; each "
                   "simulated trial draws one of them (a bootstrap), its time and its learning "
                   "curve, whatever configuration the sampler proposes",
                   resolved, p->nrec, p->median_unit, x->budget_name ? "budget unit" : "trial");
        else
            assume(p, "%s holds no finished trial: nothing measured there", resolved);
        free(resolved);
    }
    if (!p->nrec) {
        const char *unit = x->budget_name ? "budget unit" : "trial";
        if (o->unit_s > 0) {
            p->unit_s = o->unit_s;
            assume(p, "%.3g s per %s, as --unit-time says (nothing measured)", p->unit_s, unit);
        } else if (x->timeout_s > 0) {
            p->unit_s = x->timeout_s / (x->budget_name ? x->budget_max : 1);
            assume(p,
                   "%.3g s per %s: the declared timeout (%.0f s) spread over the budget, an "
                   "upper bound (nothing measured; measure with a run and --dir, or give "
                   "--unit-time)",
                   p->unit_s, unit, x->timeout_s);
        } else {
            p->unit_s = XP_ASSUMED_UNIT_S;
            assume(p,
                   "%.0f s per %s, a guess: nothing measured, no timeout declared (measure "
                   "with a run and --dir, or give --unit-time)",
                   p->unit_s, unit);
        }
    }
    if (!p->curves)
        assume(p,
               "no learning curve measured: the best %s cannot be predicted (the scheduler "
               "ranks synthetic curves to decide its promotions)",
               x->metric);
    const tp_cli_scale_t *sc = &p->scale;
    if (sc->node_failures > 0 || sc->queue_wait_s > 0)
        assume(p,
               "nodes of %d GPUs, failing %g times per node-day (a failed node's jobs start "
               "again from their start once it is taken for lost, 10 s on), joining after a "
               "queue wait of %g s on average (exponential; at the start and after a failure)",
               p->gpn, sc->node_failures, sc->queue_wait_s);
    if (sc->trial_startup_s > 0)
        assume(p, "each attempt starts %.3g s later on its node (--trial-startup)",
               sc->trial_startup_s);
    assume(p, "%d simulated searches (seeds %llu..%llu): medians and 90%% ranges", p->seeds,
           (unsigned long long)x->search.seed,
           (unsigned long long)(x->search.seed + (uint64_t)p->seeds - 1));
    return 0;
}

static json_t *stat_json(const double v[3]) {
    return json_pack("{s:f, s:f, s:f}", "median", v[1], "lo", v[0], "hi", v[2]);
}

/* j with the assumed list, printed on one line and freed. */
static void put_json(json_t *j, const xp_t *p) {
    json_object_set_new(j, "assumed", json_incref(p->assumed));
    char *t = json_dumps(j, JSON_COMPACT | JSON_PRESERVE_ORDER);
    printf("%s\n", t);
    free(t);
    json_decref(j);
}

static void print_assumed(const xp_t *p) {
    printf("  assumed:\n");
    size_t i;
    json_t *a;
    json_array_foreach(p->assumed, i, a) printf("    - %s\n", json_string_value(a));
}

static void print_best(const xp_t *p, int gpus, const xp_stats_t *st) {
    if (st->has_best)
        printf("    %6d GPU%s: %s %.4g (90%% range %.4g to %.4g)\n", gpus, gpus == 1 ? "" : "s",
               p->x->metric, st->best[1], st->best[0], st->best[2]);
    else
        printf("    %6d GPU%s: cannot be predicted (no learning curve measured)\n", gpus,
               gpus == 1 ? "" : "s");
}

static json_t *best_json(int gpus, const xp_stats_t *st, double deadline) {
    return json_pack("{s:i, s:o, s:o, s:o, s:b}", "gpus", gpus, "makespan_s", stat_json(st->ms),
                     "trials_finished", stat_json(st->fin), "best",
                     st->has_best ? stat_json(st->best) : json_null(), "meets_deadline",
                     deadline > 0 && st->ms[1] <= deadline);
}

static const char *sched_name(const tp_experiment_t *x) {
    return x->scheduler ? x->scheduler : "fifo";
}

static void print_head(const xp_t *p, const char *verb) {
    const tp_experiment_t *x = p->x;
    printf("%s %s: %s sampler, %s scheduler, %llu trials", verb, x->name, x->search.algorithm,
           sched_name(x), (unsigned long long)x->search.trials);
    if (x->budget_name)
        printf(", budget %s %g..%g (eta %g)", x->budget_name, x->budget_min, x->budget_max,
               x->budget_eta);
    printf("\n");
}

/* The measured times of p scaled from the run's GPUs to `type`'s, by the
 * speed table (sim/gpu_speed.c); said as assumed either way. */
static void scale_to(xp_t *p, const char *type) {
    double from = tp__gpu_speed(p->gpu), to = tp__gpu_speed(type);
    if (!*p->gpu) {
        assume(p, "%s GPUs as fast as what the times come from (the run recorded no GPU)", type);
    } else if (!from || !to) {
        assume(p, "%s GPUs as fast as the measured run's %s (%s not in the speed table: %s)", type,
               p->gpu, !to ? type : p->gpu, tp__gpu_speed_keys());
    } else {
        double k = from / to;
        for (size_t i = 0; i < p->nrec; i++)
            p->rec[i].unit_s *= k;
        assume(p,
               "each trial's time x %.3g: measured on %s (relative speed %g), planned for %s "
               "(%g), by the speed table (docs/simulator.md); the start-up is not scaled",
               k, p->gpu, from, type, to);
    }
}

/* ---- packing: the experiment's placement on one GPU ----------------------- */

/* How many of the experiment's trials its placement packs on one GPU of
 * type gpu_type (one the speed table knows; else the measured run's, else the first
 * `gpus:` entry that declares its memory):
 * its policy, the real placer, given copies of one trial's declared demand
 * on an empty GPU under the run's limits (reserve, oversubscribe,
 * max_per_gpu, sharing; the served curve under MPS). Each trial's times then
 * grow by the contention model's factor for that many on a GPU
 * (tp__simtune_packed_factor), the GPUs holding that many trials each: a
 * plan for a full GPU, its measured times taken as measured alone. Said as
 * assumed either way. O(64 placements). */
static void pack(xp_t *p, const char *gpu_type) {
    const tp_experiment_t *x = p->x;
    p->per_gpu = 1;
    if (x->res.gpus <= 0) return; /* CPU slots: said so by prepare */
    const char *why = NULL;
    uint64_t mem = tp__gpu_memory_mib(gpu_type); /* a type not in the table: as the run's */
    if (!mem) mem = tp__gpu_memory_mib(p->gpu);
    for (size_t i = 0; !mem && i < x->ngpus; i++)
        mem = x->gpus[i].memory_mib;
    if (x->res.gpus != 1 || x->res.nodes > 1 || x->res.gpus_max > 1)
        why = "a trial of several GPUs or nodes";
    else if (x->sharing == TP_SHARING_NONE)
        why = "sharing: none";
    else if (x->res.gpu_memory_auto || x->res.gpu_compute_auto)
        why = "its demand is measured by the run (auto), not declared";
    else if (x->res.gpu_memory_mib && !mem)
        why = "the GPU's memory is not known: name a type with --gpu-type";
    const char *policy = x->policy ? x->policy : TP_PLACE_DEFAULT_POLICY;
    const tp_placer_ops_t *pl = tp__placer_find(policy);
    int served = x->sharing == TP_SHARING_AUTO || x->sharing == TP_SHARING_MPS;
    double compute = x->res.gpu_compute > 0 ? x->res.gpu_compute : 1;
    int k = 0;
    if (!why && pl) {
        tp_gpu_t gpu = {.name = "gpu0",
                        .index = 0,
                        .memory_mib = mem ? mem : UINT64_C(1) << 40,
                        .speed = 1,
                        .healthy = 1};
        tp_node_t node = {
            .name = "plan", .cpus = 1 << 20, .gpus = &gpu, .ngpus = 1, .served = served};
        tp_cluster_t c = {.nodes = &node,
                          .nnodes = 1,
                          .limits = {.reserve_mib = x->reserve_mib,
                                     .oversubscribe = x->oversubscribe,
                                     .max_per_gpu = x->max_per_gpu,
                                     .sharing = 1}};
        enum { MOST = 64 };
        tp_demand_t d[MOST];
        tp_assign_t a[MOST];
        for (int i = 0; i < MOST; i++)
            d[i] = (tp_demand_t){.id = i,
                                 .gpus = 1,
                                 .memory_mib = x->res.gpu_memory_mib,
                                 .compute = compute,
                                 .cpus = x->res.cpus,
                                 .duration_s = 1};
        tp_usage_t u;
        tp_error_t err = {0};
        if (tp__usage_init(&u, &c) == 0) {
            if (pl->place(&c, &u, d, MOST, a, NULL, &err) == 0)
                for (int i = 0; i < MOST; i++)
                    k += a[i].placed;
            tp__usage_free(&u);
        }
    }
    if (k <= 1) {
        assume(p, "each trial alone on its GPU%s (%s)", x->res.gpus > 1 ? "s" : "",
               why ? why : "its placement packs no two of its declared demand on one GPU");
        return;
    }
    double f = tp__simtune_packed_factor(k, compute, TP_PLACE_MPS_OVERHEAD, served);
    for (size_t i = 0; i < p->nrec; i++)
        p->rec[i].unit_s *= f;
    p->unit_s *= f;
    p->per_gpu = k;
    char gib[32] = "unbounded memory";
    if (mem) snprintf(gib, sizeof gib, "%llu MiB", (unsigned long long)mem);
    assume(p,
           "%d trials share each GPU: placement policy %s packs that many of the declared "
           "demand (%llu MiB, compute %g) on one GPU of %s; each takes %.3g times as long as "
           "alone (the simulator's contention model: MPS overhead %g per neighbour, %s), "
           "measured times taken as measured alone",
           k, policy, (unsigned long long)x->res.gpu_memory_mib, compute, gib, f,
           TP_PLACE_MPS_OVERHEAD, served ? "the served curve under MPS" : "time-sliced");
}

/* ---- the plan kept for the run ------------------------------------------- */

/* The plan j (as --json prints it), with its inputs and assumptions, kept in
 * dir for its run (run/plans.c): in its store, or waiting in DIR/plan.json
 * for the run to start. What became of it, in words, into kept ("" when
 * it could not be kept: a warning says why). */
static void keep_plan(const xp_t *p, const json_t *j, const char *file, const tp_xplan_opts_t *o,
                      const char *dir, uint64_t ntrials, char *kept, size_t n) {
    json_t *doc = json_deep_copy(j);
    json_object_set_new(doc, "at", json_real(tp__wall_s()));
    json_object_set_new(
        doc, "inputs",
        json_pack("{s:s, s:s, s:I, s:i, s:i, s:o, s:I, s:f, s:f, s:o, s:s}", "experiment_file",
                  file, "dir", dir, "trials", (json_int_t)ntrials, "gpus_per_trial", p->trial_gpus,
                  "seeds", p->seeds, "unit_time_s", p->nrec ? json_null() : json_real(p->unit_s),
                  "measured_trials", (json_int_t)p->nrec, "startup_s", p->startup_s, "deadline_s",
                  o->deadline_s, "gpu_type", o->gpu_type ? json_string(o->gpu_type) : json_null(),
                  "metric", p->x->metric));
    json_t *in = json_object_get(doc, "inputs");
    json_object_set_new(in, "node_failures", json_real(p->scale.node_failures));
    json_object_set_new(in, "queue_wait_s", json_real(p->scale.queue_wait_s));
    json_object_set_new(in, "trial_startup_s", json_real(p->scale.trial_startup_s));
    json_object_set_new(in, "gpus_per_node", json_integer(p->gpn));
    json_object_set_new(in, "trials_per_gpu", json_integer(p->per_gpu > 1 ? p->per_gpu : 1));
    json_object_set_new(doc, "assumed", json_incref(p->assumed));
    char *text = json_dumps(doc, JSON_COMPACT | JSON_PRESERVE_ORDER);
    json_decref(doc);
    tp__cli_plan_keep(dir, text, kept, n);
    free(text);
}

/* ---- plan, simulate, check ---------------------------------------------- */

static int load_x(const char *file, tp_experiment_t *x) {
    tp_error_t err = {0};
    if (tp__experiment_load(file, x, &err) < 0) {
        fprintf(stderr, "tunepack: %s\n", err.msg);
        return err.code == -EINVAL ? TP_EXIT_CONFIG : TP_EXIT_ERROR;
    }
    return 0;
}

static int finish(xp_t *p, tp_experiment_t *x, rows_t *rows, int code) {
    free_measured(p);
    json_decref(p->assumed);
    free(rows->r);
    if (x) tp__experiment_free(x);
    return code;
}

int tp__cli_plan_experiment(const char *file, const tp_xplan_opts_t *o) {
    tp_experiment_t x;
    int code = load_x(file, &x);
    if (code) return code;
    char defdir[4096];
    snprintf(defdir, sizeof defdir, "runs/%s", x.name);
    xp_t p;
    rows_t rows;
    code = prepare(&p, &x, o, o->dir ? o->dir : defdir, o->dir != NULL, 0, &rows);
    if (code) return finish(&p, &x, &rows, code);
    /* the type named, else the measured run's (whose times these are) */
    const char *gtype = o->gpu_type ? o->gpu_type : p.nrec ? "measured" : "declared";
    if (o->gpu_type && p.nrec)
        scale_to(&p, o->gpu_type);
    else if (p.nrec)
        assume(&p, "GPUs (or CPU slots) like the measured run's");
    pack(&p, o->gpu_type);
    size_t most = TP_SIMTUNE_MAX_GPUS / (size_t)p.per_gpu; /* GPUs the simulator can hold */
    tp_error_t err = {0};
    xp_stats_t st;
    if (o->gpus > 0) { /* simulate: a given count */
        int rc = simulate(&p, o->gpus, o->deadline_s, o->deadline_s, &st, &err);
        if (rc < 0) {
            fprintf(stderr, "tunepack simulate: %s\n", err.msg);
            return finish(&p, &x, &rows, TP_EXIT_USAGE);
        }
        if (o->json) {
            json_t *j = best_json(o->gpus, &st, o->deadline_s);
            json_object_set_new(j, "experiment", json_string(x.name));
            json_object_set_new(j, "deadline_s",
                                o->deadline_s > 0 ? json_real(o->deadline_s) : json_null());
            put_json(j, &p);
        } else {
            char m[32], lo[32], hi[32];
            tp__cli_plan_time(m, sizeof m, st.ms[1]);
            tp__cli_plan_time(lo, sizeof lo, st.ms[0]);
            tp__cli_plan_time(hi, sizeof hi, st.ms[2]);
            print_head(&p, "simulated");
            printf("  on %d %s GPU%s: makespan %s (90%% range %s to %s), %.0f trials finished\n",
                   o->gpus, gtype, o->gpus == 1 ? "" : "s", m, lo, hi, st.fin[1]);
            printf("  best %s %s:\n", x.metric,
                   o->deadline_s > 0 ? "by the deadline" : "at the end");
            print_best(&p, o->gpus, &st);
            print_assumed(&p);
        }
        return finish(&p, &x, &rows, TP_EXIT_OK);
    }
    /* plan: the fewest GPUs whose median makespan meets the deadline */
    uint64_t ntrials = x.search.trials;
    if (strcmp(x.search.algorithm, "grid") == 0) ntrials *= tp__space_grid_size(&x.space);
    size_t per = (size_t)p.per_gpu, n = ntrials ? (size_t)ntrials : 1;
    size_t cap = o->max_gpus ? o->max_gpus : (n + per - 1) / per * (size_t)p.trial_gpus;
    if (cap > most) cap = most;
    if (cap < (size_t)p.trial_gpus) cap = (size_t)p.trial_gpus;
    int sims = 0;
    xp_stats_t at_cap;
    int rc = simulate(&p, (int)cap, o->deadline_s, 0, &at_cap, &err);
    sims += at_cap.sims;
    size_t best = 0;
    xp_stats_t bst = at_cap;
    if (rc == 0 && at_cap.ms[1] <= o->deadline_s) {
        size_t lo = (size_t)p.trial_gpus, hi = cap; /* hi meets the deadline */
        while (lo < hi && rc == 0) {
            size_t mid = lo + (hi - lo) / 2;
            xp_stats_t s;
            rc = simulate(&p, (int)mid, o->deadline_s, 0, &s, &err);
            sims += s.sims;
            if (rc < 0) break;
            if (s.ms[1] <= o->deadline_s) {
                hi = mid;
                bst = s;
            } else {
                lo = mid + 1;
            }
        }
        best = hi;
    }
    if (rc < 0) {
        fprintf(stderr, "tunepack plan: %s\n", err.msg);
        return finish(&p, &x, &rows, TP_EXIT_USAGE);
    }
    /* the best metric by the deadline at 1/2, 1 and 2 times that many */
    int counts[3] = {0, 0, 0};
    xp_stats_t by[3];
    if (best) {
        int b = (int)best;
        counts[0] = b / 2 >= p.trial_gpus ? b / 2 : 0;
        counts[1] = b;
        counts[2] = 2 * (size_t)b <= most ? 2 * b : 0;
        for (int i = 0; i < 3 && rc == 0; i++)
            if (counts[i]) {
                rc = simulate(&p, counts[i], o->deadline_s, o->deadline_s, &by[i], &err);
                sims += by[i].sims;
            }
        if (rc < 0) {
            fprintf(stderr, "tunepack plan: %s\n", err.msg);
            return finish(&p, &x, &rows, TP_EXIT_USAGE);
        }
    }
    json_t *j =
        json_pack("{s:s, s:s, s:s, s:s, s:f, s:I, s:i}", "experiment", x.name, "sampler",
                  x.search.algorithm, "scheduler", sched_name(&x), "gpu_type", gtype, "deadline_s",
                  o->deadline_s, "max_gpus", (json_int_t)cap, "simulations", sims);
    json_object_set_new(j, "gpus", best ? json_integer((json_int_t)best) : json_null());
    json_object_set_new(j, "makespan_s", stat_json(best ? bst.ms : at_cap.ms));
    json_object_set_new(j, "trials_finished", stat_json(best ? bst.fin : at_cap.fin));
    json_t *arr = json_array();
    for (int i = 0; best && i < 3; i++)
        if (counts[i]) json_array_append_new(arr, best_json(counts[i], &by[i], o->deadline_s));
    json_object_set_new(j, "by_gpus", arr);
    /* a plan that meets the deadline is kept for the run in its directory */
    char kept[9000] = ""; /* two paths of up to 4 KiB */
    if (best) keep_plan(&p, j, file, o, o->dir ? o->dir : defdir, ntrials, kept, sizeof kept);
    if (o->json) {
        if (*kept) json_object_set_new(j, "kept", json_string(kept));
        put_json(j, &p);
        return finish(&p, &x, &rows, best ? TP_EXIT_OK : TP_EXIT_ERROR);
    }
    json_decref(j);
    char dl[32];
    tp__cli_plan_time(dl, sizeof dl, o->deadline_s);
    print_head(&p, "plan for");
    if (!best) {
        char m[32];
        tp__cli_plan_time(m, sizeof m, at_cap.ms[1]);
        printf("  no number of %s GPUs up to %zu finishes by the deadline (%s): on %zu the median "
               "makespan is %s\n",
               gtype, cap, dl, cap, m);
        print_assumed(&p);
        return finish(&p, &x, &rows, TP_EXIT_ERROR);
    }
    char m[32], lo[32], hi[32];
    tp__cli_plan_time(m, sizeof m, bst.ms[1]);
    tp__cli_plan_time(lo, sizeof lo, bst.ms[0]);
    tp__cli_plan_time(hi, sizeof hi, bst.ms[2]);
    printf("  %zu %s GPU%s by the deadline (%s): makespan %s (90%% range %s to %s), %.0f "
           "trials\n",
           best, gtype, best == 1 ? " finishes" : "s finish", dl, m, lo, hi, bst.fin[1]);
    printf("  best %s expected by the deadline:\n", x.metric);
    for (int i = 0; i < 3; i++)
        if (counts[i]) print_best(&p, counts[i], &by[i]);
    print_assumed(&p);
    printf("  (%d simulated searches)\n", sims);
    if (*kept) printf("  %s\n", kept);
    return finish(&p, &x, &rows, TP_EXIT_OK);
}

int tp__cli_plan_check(const char *dir, const tp_xplan_opts_t *o) {
    char *resolved = NULL;
    tp_store_t *s = tp__cli_open(dir, &resolved);
    if (!s) return TP_EXIT_USAGE;
    char *text = tp__store_meta_get(s, "experiment_text");
    char *path = tp__store_meta_get(s, "experiment_path");
    char *created = tp__store_meta_get(s, "created_at");
    double planned_at = 0;
    char *plan_text = o->from ? NULL : tp__store_plan_last(s, &planned_at);
    json_t *plan = plan_text ? json_loads(plan_text, 0, NULL) : NULL;
    free(plan_text);
    tp__store_close(s);
    tp_experiment_t x;
    tp_error_t err = {0};
    int code = TP_EXIT_OK;
    if (!text || tp__experiment_parse(path ? path : resolved, text, strlen(text), &x, &err) < 0) {
        fprintf(stderr, "tunepack plan: %s: %s\n", resolved,
                text ? err.msg : "the store holds no experiment");
        free(text), free(path), free(created), free(resolved);
        json_decref(plan);
        return TP_EXIT_CONFIG;
    }
    /* what happened: all of its trials */
    xp_t all;
    rows_t rows;
    tp_xplan_opts_t oo = *o;
    code = prepare(&all, &x, &oo, resolved, 1, 0, &rows);
    if (code) {
        free(text), free(path), free(created), free(resolved);
        return finish(&all, &x, &rows, code);
    }
    double t0 = created ? strtod(created, NULL) : 0, t1 = 0;
    size_t finished = 0, ended = 0;
    double real_best = NAN;
    for (size_t i = 0; i < rows.n; i++) {
        const row_t *r = &rows.r[i];
        if (r->started > 0 && (t0 <= 0 || r->started < t0)) t0 = r->started;
        if (r->ended > t1) t1 = r->ended;
        if (r->ran) finished++;
        if (r->ran && !r->failed) ended++;
        if (r->has_best &&
            (isnan(real_best) || (x.maximize ? r->best > real_best : r->best < real_best)))
            real_best = r->best;
    }
    int slots = (x.concurrency_total > 0 ? x.concurrency_total : x.concurrency) * all.trial_gpus;
    double real_ms = t1 > t0 ? t1 - t0 : 0;
    if (json_is_object(plan)) { /* the plan kept in the store, as it was made */
        tp_plan_actual_t a = {real_ms, finished, real_best, slots};
        tp__cli_plan_check_kept(resolved, x.name, x.metric, plan, planned_at, &a, o->json);
        json_decref(plan);
        free(text), free(path), free(created), free(resolved);
        return finish(&all, &x, &rows, TP_EXIT_OK);
    }
    json_decref(plan);
    size_t first = o->from ? o->from : (ended + 3) / 4;
    if (first < 1) first = 1;
    free_measured(&all);
    json_decref(all.assumed);
    free(rows.r);
    /* the plan from the first trials started, on the run's own parallelism */
    xp_t p;
    code = prepare(&p, &x, &oo, resolved, 1, first, &rows);
    free(rows.r);
    memset(&rows, 0, sizeof rows);
    assume(&p, "%d GPUs (or CPU slots): the run's concurrency on one node times its GPUs per trial",
           slots);
    xp_stats_t st;
    int rc = code ? -1 : simulate(&p, slots, 0, 0, &st, &err);
    if (rc < 0) {
        if (!code) fprintf(stderr, "tunepack plan: %s\n", err.msg);
        free(text), free(path), free(created), free(resolved);
        return finish(&p, &x, &rows, code ? code : TP_EXIT_CONFIG);
    }
    if (o->json) {
        json_t *j = json_pack("{s:s, s:s, s:s, s:I, s:i, s:{s:o, s:o, s:o}, s:{s:f, s:I, s:o}}",
                              "dir", resolved, "plan", "recomputed", "experiment", x.name,
                              "planned_from_trials", (json_int_t)p.nrec, "gpus", slots, "predicted",
                              "makespan_s", stat_json(st.ms), "trials_finished", stat_json(st.fin),
                              "best", st.has_best ? stat_json(st.best) : json_null(), "actual",
                              "makespan_s", real_ms, "trials_finished", (json_int_t)finished,
                              "best", isnan(real_best) ? json_null() : json_real(real_best));
        json_object_set_new(j, "makespan_error",
                            real_ms > 0 ? json_real(st.ms[1] / real_ms - 1) : json_null());
        put_json(j, &p);
    } else {
        char m[32], lo[32], hi[32], r[32];
        tp__cli_plan_time(m, sizeof m, st.ms[1]);
        tp__cli_plan_time(lo, sizeof lo, st.ms[0]);
        tp__cli_plan_time(hi, sizeof hi, st.ms[2]);
        tp__cli_plan_time(r, sizeof r, real_ms);
        printf("check of %s (%s), planned from its first %zu trials, on %d GPUs (no plan was "
               "kept):\n",
               resolved, x.name, p.nrec, slots);
        printf("  makespan         predicted %s (90%% range %s to %s), actual %s: error %+.0f%%\n",
               m, lo, hi, r, real_ms > 0 ? 100 * (st.ms[1] / real_ms - 1) : 0.0);
        printf("  trials finished  predicted %.0f (90%% range %.0f to %.0f), actual %zu\n",
               st.fin[1], st.fin[0], st.fin[2], finished);
        if (st.has_best && !isnan(real_best))
            printf("  best %-11s predicted %.4g (90%% range %.4g to %.4g), actual %.4g: error "
                   "%+.4g\n",
                   x.metric, st.best[1], st.best[0], st.best[2], real_best, st.best[1] - real_best);
        else
            printf("  best %-11s cannot be compared (no learning curve measured)\n", x.metric);
        print_assumed(&p);
    }
    free(text), free(path), free(created), free(resolved);
    return finish(&p, &x, &rows, TP_EXIT_OK);
}
