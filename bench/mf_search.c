/* mf_search: multi-fidelity samplers compared through the real schedulers
 * and samplers (pure code, a virtual clock), on a synthetic family of
 * learning curves or on a tabulated benchmark (--table). Prints figures; not
 * a test (tests/unit/test_dehb.c and test_bohb.c pin the samplers).
 *
 * The synthetic family (4 parameters, error to minimize, epochs 1..81):
 *   lr in [1e-4, 1] (log), width in [16, 256] (int, log), dropout in [0, 0.8],
 *   opt in {sgd, adam, rmsprop}; with x, w the log-scaled lr and width in [0, 1],
 *   final error  e(theta) = 0.05 + 0.3 (x - 0.55)^2 + 0.1 (w - 0.7)^2
 *                           + 0.08 (dropout - 0.3)^2 + {0.03, 0, 0.015}[opt]
 *   speed        k(theta) = (0.05 + 0.6 x) / (1 + w)   (large lr learns fast, wide slowly)
 *   error at epoch t: e + (0.9 - e) exp(-k t) + N(0, 0.01)   (noise fixed per trial, epoch)
 * so rankings at small budgets favour fast learners that end worse. With
 * `mild` as the third argument the speed is k = (0.1 + 0.2 x) / (1 + 0.3 w):
 * early rankings then mostly hold.
 *
 * The tabulated benchmark (--table FILE, as bench/search/lcbench_gen.py
 * writes it; bench/mf_table.h): the space is the table's parameters and
 * ranges, the budget epochs 1..E (the table's E). A trial's configuration is
 * snapped to the nearest tabulated one of the dataset (Euclidean, every
 * parameter scaled to [0, 1] over its range, log ones in log), and trains
 * with one of the table's training seeds, drawn per trial from (seed, trial);
 * its error after t epochs is the table's. Each dataset of the table (or the
 * one --dataset names) is a benchmark of its own.
 *
 * "asha + random, again" is the reference with other sampler draws (the same
 * objective): the reference sets the target, so it reaches it in every seed
 * by construction, and this row shows what the same method needs when it did
 * not (a yardstick for the share).
 *
 * Each method runs `trials` configurations at concurrency 4, except random
 * and tpe with the full budget (scheduler fifo), which run as many as fit in
 * the epochs asha + random spent with that seed (rounded up). A job's length
 * is the epochs it trains (a promoted trial continues from its checkpoint:
 * budget minus the budget it reached), and the earliest-ending job ends
 * first. For each seed: the best error reported by the end, the epochs
 * spent, the epochs spent when that best was first reported, and the epochs
 * each method needed to first report an error at or below asha + random's
 * final best (the target), also as a share of the epochs asha + random spent
 * in all; with a table, the distinct tabulated configurations its trials
 * snapped to. Medians over the seeds (a seed that never reaches the target counts
 * as the largest); the best error's mean and sample standard deviation over
 * the seeds too. The target for bohb and dehb: a median share of at
 * most 0.5 (PASS or MISS).
 *
 * With --per-seed OUT it also writes, per dataset, method and seed, one
 * tab-separated line: dataset, method, seed, trials, epochs spent, best error
 * at the ends of jobs (as above) and best error after any epoch trained (what
 * a trial reporting each epoch would show; bench/search/lcbench_optuna.py
 * --budgets OUT gives Optuna these epochs and compares on that one).
 *
 *   mf_search [--table FILE [--dataset NAME]] [--per-seed OUT] [seeds [trials [mild]]]
 *     (default 10 seeds, 243 trials) */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "mf_table.h"
#include "search/scheduler.h"
#include "virtual_jobs.h"
#define MAX_TRIALS 4096
#define MAX_SEEDS 100

typedef struct method {
    const char *label, *scheduler, *sampler;
    int other_draws; /* the sampler's seed is not the reference's (the objective's is) */
} method_t;

/* The first is the reference (its final best is the target); fifo ones run at the full
 * budget with as many trials as fit in the reference's epochs. The second is the
 * reference with other draws, the yardstick (see the file comment). */
static const method_t methods[] = {
    {"asha + random", "asha", "random"},
    {"asha + random, again", "asha", "random", 1},
    {"random", "fifo", "random"},
    {"tpe", "fifo", "tpe"},
    {"asha + tpe", "asha", "tpe"},
    {"asha + bohb", "asha", "bohb"},
    {"asha + dehb", "asha", "dehb"},
    {"hyperband + random", "hyperband", "random"},
    {"hyperband + bohb", "hyperband", "bohb"},
    {"hyperband + dehb", "hyperband", "dehb"},
};
#define NMETHODS (sizeof methods / sizeof methods[0])

/* What the methods minimize: the synthetic family, or one dataset of a table. */
typedef struct objective {
    const mf_table_t *table; /* NULL: the synthetic family */
    size_t dataset;          /* table: which dataset */
    int mild;                /* synthetic: the milder speed */
} objective_t;

static void add(tp_space_t *sp, const char *name, tp_domain_kind kind, double lo, double hi,
                int lg) {
    tp_param_t p = {.name = tp__strdup(name), .kind = kind, .lo = lo, .hi = hi, .log = lg};
    tp__space_add(sp, &p);
}

/* The objective's space into sp (initialized here). */
static void space_for(const objective_t *ob, tp_space_t *sp) {
    tp__space_init(sp);
    if (ob->table) {
        for (size_t k = 0; k < ob->table->nparams; k++) {
            const mf_param_t *p = &ob->table->params[k];
            tp_domain_kind kind = p->kind == MF_LOG   ? TP_DOM_LOGUNIFORM
                                  : p->kind == MF_LIN ? TP_DOM_UNIFORM
                                                      : TP_DOM_INT;
            add(sp, p->name, kind, p->lo, p->hi, p->kind == MF_INTLOG);
        }
        return;
    }
    add(sp, "lr", TP_DOM_LOGUNIFORM, 1e-4, 1, 0);
    add(sp, "width", TP_DOM_INT, 16, 256, 1);
    add(sp, "dropout", TP_DOM_UNIFORM, 0, 0.8, 0);
    tp_param_t o = {.name = tp__strdup("opt"), .kind = TP_DOM_CHOICE, .nvalues = 3};
    o.values = tp__xcalloc(3, sizeof *o.values);
    o.values[0] = json_string("sgd"), o.values[1] = json_string("adam");
    o.values[2] = json_string("rmsprop");
    tp__space_add(sp, &o);
}

static double num(const json_t *c, const char *k) {
    return json_number_value(json_object_get(c, k));
}

/* The synthetic curve's error for configuration c at epoch t, with noise from (seed, trial, t). */
static double curve(const json_t *c, double t, uint64_t seed, int64_t trial, int mild) {
    double x = (log10(num(c, "lr")) + 4) / 4, w = log(num(c, "width") / 16) / log(16);
    double d = num(c, "dropout");
    const char *opt = json_string_value(json_object_get(c, "opt"));
    double off = !strcmp(opt, "sgd") ? 0.03 : !strcmp(opt, "adam") ? 0 : 0.015;
    double e = 0.05 + 0.3 * (x - 0.55) * (x - 0.55) + 0.1 * (w - 0.7) * (w - 0.7) +
               0.08 * (d - 0.3) * (d - 0.3) + off;
    double k = mild ? (0.1 + 0.2 * x) / (1 + 0.3 * w) : (0.05 + 0.6 * x) / (1 + w);
    tp_rng_t r;
    tp__rng_seed(&r, seed * 7919 + (uint64_t)trial, (uint64_t)llround(t));
    return e + (0.9 - e) * exp(-k * t) + 0.01 * tp__rng_normal(&r);
}

/* Table: the tabulated configuration of ob's dataset nearest to c. */
static size_t snap(const objective_t *ob, const json_t *c) {
    double v[MF_MAX_PARAMS];
    for (size_t k = 0; k < ob->table->nparams; k++)
        v[k] = num(c, ob->table->params[k].name);
    return mf_table_nearest(ob->table, ob->dataset, v);
}

/* The objective's error for trial `trial` (configuration c) after t epochs. Table: c snapped
 * to the nearest tabulated configuration, trained with the seed drawn from (seed, trial). */
static double value(const objective_t *ob, const json_t *c, double t, uint64_t seed,
                    int64_t trial) {
    if (!ob->table) return curve(c, t, seed, trial, ob->mild);
    tp_rng_t r;
    tp__rng_seed(&r, seed * 7919 + (uint64_t)trial, 1);
    int s = (int)tp__rng_below(&r, (uint64_t)ob->table->nseeds);
    return mf_table_error(ob->table, ob->dataset, snap(ob, c), s, (int)llround(t));
}

static double max_budget(const objective_t *ob) {
    return ob->table ? ob->table->epochs : 81;
}

typedef struct outcome {
    double best;   /* best error reported */
    double any;    /* best error after any epoch trained, not only at the ends of jobs */
    double epochs; /* epochs spent */
    double *trace; /* (epochs so far, best so far) after each job, 2 per job */
    size_t n;
    double distinct; /* table: distinct tabulated configurations its trials snapped to */
} outcome_t;

static outcome_t run(const method_t *m, const objective_t *ob, uint64_t seed, uint64_t trials) {
    tp_space_t sp;
    space_for(ob, &sp);
    tp_scheduler_cfg_t cfg = {
        .scheduler = m->scheduler,
        .sampler = {.algorithm = m->sampler,
                    .trials = trials,
                    .seed = m->other_draws ? seed ^ 0x6f74686572ULL : seed}, /* "other" */
        .budget = {.name = "epochs", .min = 1, .max = max_budget(ob), .eta = 3}};
    tp_error_t err = {0};
    tp_scheduler_t *s = tp__scheduler_new(&sp, &cfg, &err);
    outcome_t out = {.best = INFINITY, .any = INFINITY};
    if (!s) {
        fprintf(stderr, "mf_search: %s\n", err.msg);
        exit(1);
    }
    json_t **conf = tp__xcalloc(MAX_TRIALS, sizeof *conf);
    double *reached = tp__xcalloc(MAX_TRIALS, sizeof *reached), now = 0;
    unsigned char *tried =
        ob->table ? tp__xcalloc(ob->table->datasets[ob->dataset].nconfigs, 1) : NULL;
    vjobs_t running = {0};
    size_t cap = 0;
    for (;;) {
        tp_job_t j;
        int rc = running.n < VJ_CONC ? s->ops->next(s, now, &j) : -EAGAIN;
        if (rc == 1 && !j.refused && j.trial < MAX_TRIALS) {
            if (j.is_new) conf[j.trial] = j.config;
            if (j.is_new && tried) {
                size_t c = snap(ob, j.config);
                out.distinct += !tried[c], tried[c] = 1;
            }
            double ep = j.budget - reached[j.trial];
            out.epochs += ep;
            vjobs_start(&running, &j, now + ep);
            continue;
        }
        if (rc == 1) continue;
        if (running.n == 0) break;
        tp_job_t done = vjobs_first(&running, &now);
        for (double t = floor(reached[done.trial]) + 1; t < done.budget; t++)
            out.any = fmin(out.any, value(ob, conf[done.trial], t, seed, done.trial));
        reached[done.trial] = done.budget;
        double v = value(ob, conf[done.trial], done.budget, seed, done.trial);
        s->ops->result(s, done.trial, done.rung, 1, v, now);
        if (v < out.best) out.best = v;
        out.any = fmin(out.any, v);
        if (out.n + 2 > cap) {
            cap = cap ? 2 * cap : 256;
            out.trace = tp__xrealloc(out.trace, cap * sizeof *out.trace);
        }
        out.trace[out.n++] = out.epochs, out.trace[out.n++] = out.best;
    }
    for (size_t i = 0; i < MAX_TRIALS; i++)
        json_decref(conf[i]);
    free(conf), free(reached), free(tried);
    tp__scheduler_free(s);
    tp__space_free(&sp);
    return out;
}

/* Epochs spent when the best first reached target; NaN if never. */
static double epochs_to(const outcome_t *o, double target) {
    for (size_t i = 0; i < o->n; i += 2)
        if (o->trace[i + 1] <= target) return o->trace[i];
    return NAN;
}

/* For a table's dataset: its size and the best it holds, as a yardstick. */
static void print_yardstick(const mf_table_t *tb, size_t d) {
    const mf_dataset_t *ds = &tb->datasets[d];
    double best_final = INFINITY, lowest = INFINITY;
    size_t arg = 0;
    for (size_t c = 0; c < ds->nconfigs; c++) {
        double mean = 0;
        for (int s = 0; s < tb->nseeds; s++) {
            mean += mf_table_error(tb, d, c, s, tb->epochs) / tb->nseeds;
            for (int t = 1; t <= tb->epochs; t++)
                lowest = fmin(lowest, mf_table_error(tb, d, c, s, t));
        }
        if (mean < best_final) best_final = mean, arg = c;
    }
    printf("dataset %s: %zu configurations x %d training seeds, epochs 1..%d; best error at "
           "epoch %d (mean over seeds) %.4f (config %zu), lowest anywhere %.4f\n",
           ds->name, ds->nconfigs, tb->nseeds, tb->epochs, tb->epochs, best_final, arg, lowest);
}

static FILE *per_seed; /* --per-seed: one line per dataset, method and seed */

/* Run every method with seeds 1..seeds on ob and print the figures. */
static void compare(const objective_t *ob, int seeds, uint64_t trials) {
    static double best[NMETHODS][MAX_SEEDS], ep[NMETHODS][MAX_SEEDS], own[NMETHODS][MAX_SEEDS];
    static double to[NMETHODS][MAX_SEEDS], ratio[NMETHODS][MAX_SEEDS], dist[NMETHODS][MAX_SEEDS];
    size_t hit[NMETHODS] = {0};
    double mb = max_budget(ob);
    for (int k = 0; k < seeds; k++) {
        outcome_t o[NMETHODS];
        uint64_t n[NMETHODS]; /* the trials each method ran */
        for (size_t m = 0; m < NMETHODS; m++) {
            n[m] = trials;
            if (!strcmp(methods[m].scheduler, "fifo")) /* as many epochs as the reference */
                n[m] = (uint64_t)fmax(1, ceil(o[0].epochs / mb));
            o[m] = run(&methods[m], ob, (uint64_t)k + 1, n[m]);
        }
        double target = o[0].best; /* asha + random's final best */
        for (size_t m = 0; m < NMETHODS; m++) {
            best[m][k] = o[m].best, ep[m][k] = o[m].epochs, dist[m][k] = o[m].distinct;
            if (per_seed)
                fprintf(per_seed, "%s\t%s\t%d\t%llu\t%.0f\t%.6g\t%.6g\n",
                        ob->table ? ob->table->datasets[ob->dataset].name : "synthetic",
                        methods[m].label, k + 1, (unsigned long long)n[m], o[m].epochs, o[m].best,
                        o[m].any);
            own[m][k] = epochs_to(&o[m], o[m].best);
            to[m][k] = epochs_to(&o[m], target);
            ratio[m][k] = to[m][k] / o[0].epochs;
            hit[m] += !isnan(to[m][k]);
            free(o[m].trace);
        }
    }
    if (ob->table)
        print_yardstick(ob->table, ob->dataset);
    else
        printf("%s curves, epochs 1..81\n", ob->mild ? "mild" : "misleading");
    printf("%d seeds, %llu trials (random and tpe: asha + random's epochs at the full budget), "
           "budget 1..%.0f eta 3, concurrency 4; medians over seeds\n",
           seeds, (unsigned long long)trials, mb);
    printf("%-20s %8s %18s %7s %7s %11s %10s %9s %7s %s\n", "method", "best", "mean +- sd",
           "epochs", "configs", "to its best", "to target", "of asha+r", "reached",
           "target <= 0.5");
    for (size_t m = 0; m < NMETHODS; m++) {
        double mean, sd;
        vj_mean_sd(best[m], (size_t)seeds, &mean, &sd);
        double b = vj_median(best[m], (size_t)seeds), e = vj_median(ep[m], (size_t)seeds);
        double o_best = vj_median(own[m], (size_t)seeds), t = vj_median(to[m], (size_t)seeds);
        double r = vj_median(ratio[m], (size_t)seeds);
        int judged = !strcmp(methods[m].sampler, "bohb") || !strcmp(methods[m].sampler, "dehb");
        char configs[32] = "-"; /* table: distinct tabulated configurations tried */
        if (ob->table) snprintf(configs, sizeof configs, "%.0f", vj_median(dist[m], (size_t)seeds));
        printf("%-20s %8.4f %8.4f +- %6.4f %7.0f %7s %11.0f %10.0f %9.2f %4zu/%-2d %s\n",
               methods[m].label, b, mean, sd, e, configs, o_best, t, r, hit[m], seeds,
               judged ? (r <= 0.5 ? "PASS" : "MISS") : "");
    }
}

static int usage(void) {
    fprintf(stderr,
            "usage: mf_search [--table FILE [--dataset NAME]] [--per-seed OUT] [seeds (1..%d) "
            "[trials (1..%d) [mild]]]\n",
            MAX_SEEDS, MAX_TRIALS - 1);
    return 2;
}

int main(int argc, char **argv) {
    const char *table = NULL, *dataset = NULL, *out = NULL;
    int i = 1;
    for (; i + 1 < argc && !strncmp(argv[i], "--", 2); i += 2) {
        if (!strcmp(argv[i], "--table"))
            table = argv[i + 1];
        else if (!strcmp(argv[i], "--dataset"))
            dataset = argv[i + 1];
        else if (!strcmp(argv[i], "--per-seed"))
            out = argv[i + 1];
        else
            return usage();
    }
    if (i < argc && !strncmp(argv[i], "--", 2)) return usage();
    int seeds = i < argc ? atoi(argv[i]) : 10;
    uint64_t trials = i + 1 < argc ? strtoull(argv[i + 1], NULL, 10) : 243;
    int mild = i + 2 < argc && !strcmp(argv[i + 2], "mild");
    if (seeds < 1 || seeds > MAX_SEEDS || trials < 1 || trials >= MAX_TRIALS ||
        (dataset && !table) || (mild && table))
        return usage();
    if (out && !(per_seed = fopen(out, "w"))) {
        fprintf(stderr, "mf_search: %s: %s\n", out, strerror(errno));
        return 1;
    }
    if (per_seed) fprintf(per_seed, "dataset\tmethod\tseed\ttrials\tepochs\tbest\tbest_any\n");
    if (!table) {
        objective_t ob = {.mild = mild};
        compare(&ob, seeds, trials);
        return per_seed && fclose(per_seed) != 0;
    }
    mf_table_t tb;
    tp_error_t err = {0};
    if (mf_table_read(table, &tb, &err) < 0) {
        fprintf(stderr, "mf_search: %s\n", err.msg);
        return 1;
    }
    int found = 0;
    for (size_t d = 0; d < tb.ndatasets; d++) {
        if (dataset && strcmp(dataset, tb.datasets[d].name)) continue;
        objective_t ob = {.table = &tb, .dataset = d};
        if (found++) printf("\n");
        compare(&ob, seeds, trials);
    }
    if (!found) fprintf(stderr, "mf_search: %s: no dataset '%s'\n", table, dataset);
    mf_table_free(&tb);
    if (per_seed && fclose(per_seed) != 0) return 1;
    return found ? 0 : 1;
}
