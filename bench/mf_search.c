/* mf_search: multi-fidelity samplers compared on a synthetic family of
 * learning curves, through the real schedulers and samplers (pure code, a
 * virtual clock). Prints figures; not a test (tests/unit/test_dehb.c and
 * test_bohb.c pin the samplers).
 *
 * The family (4 parameters, error to minimize, epochs 1..81):
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
 * Each method runs `trials` configurations at concurrency 4; a job's length
 * is the epochs it trains (a promoted trial continues from its checkpoint:
 * budget minus the budget it reached), and the earliest-ending job ends
 * first. For each seed: the best error reported by the end, the epochs
 * spent, and the epochs each method needed to first report an error at or
 * below asha + random's final best (the target), also as a share of the
 * epochs asha + random spent in all. Medians over the seeds (a seed that
 * never reaches the target counts as the largest); the best error's mean
 * and sample standard deviation over the seeds too.
 *
 *   mf_search [seeds [trials [mild]]]   (default 10 seeds, 243 trials) */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "search/scheduler.h"
#include "virtual_jobs.h"
#define MAX_TRIALS 4096

typedef struct method {
    const char *label, *scheduler, *sampler;
} method_t;

static const method_t methods[] = {
    {"asha + random", "asha", "random"},       {"asha + bohb", "asha", "bohb"},
    {"asha + dehb", "asha", "dehb"},           {"hyperband + random", "hyperband", "random"},
    {"hyperband + bohb", "hyperband", "bohb"}, {"hyperband + dehb", "hyperband", "dehb"},
};
#define NMETHODS (sizeof methods / sizeof methods[0])

static void add(tp_space_t *sp, const char *name, tp_domain_kind kind, double lo, double hi,
                int lg) {
    tp_param_t p = {.name = tp__strdup(name), .kind = kind, .lo = lo, .hi = hi, .log = lg};
    tp__space_add(sp, &p);
}

static double num(const json_t *c, const char *k) {
    return json_number_value(json_object_get(c, k));
}

/* The curve's error for configuration c at epoch t, with noise from (seed, trial, t);
 * mild: the milder speed. */
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

typedef struct outcome {
    double best;   /* best error reported */
    double epochs; /* epochs spent */
    double *trace; /* (epochs so far, best so far) after each job, 2 per job */
    size_t n;
} outcome_t;

static outcome_t run(const method_t *m, uint64_t seed, uint64_t trials, int mild) {
    tp_space_t sp;
    tp__space_init(&sp);
    add(&sp, "lr", TP_DOM_LOGUNIFORM, 1e-4, 1, 0);
    add(&sp, "width", TP_DOM_INT, 16, 256, 1);
    add(&sp, "dropout", TP_DOM_UNIFORM, 0, 0.8, 0);
    tp_param_t o = {.name = tp__strdup("opt"), .kind = TP_DOM_CHOICE, .nvalues = 3};
    o.values = tp__xcalloc(3, sizeof *o.values);
    o.values[0] = json_string("sgd"), o.values[1] = json_string("adam");
    o.values[2] = json_string("rmsprop");
    tp__space_add(&sp, &o);
    tp_scheduler_cfg_t cfg = {.scheduler = m->scheduler,
                              .sampler = {.algorithm = m->sampler, .trials = trials, .seed = seed},
                              .budget = {.name = "epochs", .min = 1, .max = 81, .eta = 3}};
    tp_error_t err = {0};
    tp_scheduler_t *s = tp__scheduler_new(&sp, &cfg, &err);
    outcome_t out = {.best = INFINITY};
    if (!s) {
        fprintf(stderr, "mf_search: %s\n", err.msg);
        exit(1);
    }
    json_t **conf = tp__xcalloc(MAX_TRIALS, sizeof *conf);
    double *reached = tp__xcalloc(MAX_TRIALS, sizeof *reached), now = 0;
    vjobs_t running = {0};
    size_t cap = 0;
    for (;;) {
        tp_job_t j;
        int rc = running.n < VJ_CONC ? s->ops->next(s, now, &j) : -EAGAIN;
        if (rc == 1 && !j.refused && j.trial < MAX_TRIALS) {
            if (j.is_new) conf[j.trial] = j.config;
            double ep = j.budget - reached[j.trial];
            out.epochs += ep;
            vjobs_start(&running, &j, now + ep);
            continue;
        }
        if (rc == 1) continue;
        if (running.n == 0) break;
        tp_job_t done = vjobs_first(&running, &now);
        reached[done.trial] = done.budget;
        double v = curve(conf[done.trial], done.budget, seed, done.trial, mild);
        s->ops->result(s, done.trial, done.rung, 1, v, now);
        if (v < out.best) out.best = v;
        if (out.n + 2 > cap) {
            cap = cap ? 2 * cap : 256;
            out.trace = tp__xrealloc(out.trace, cap * sizeof *out.trace);
        }
        out.trace[out.n++] = out.epochs, out.trace[out.n++] = out.best;
    }
    for (size_t i = 0; i < MAX_TRIALS; i++)
        json_decref(conf[i]);
    free(conf), free(reached);
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

int main(int argc, char **argv) {
    int seeds = argc > 1 ? atoi(argv[1]) : 10;
    uint64_t trials = argc > 2 ? strtoull(argv[2], NULL, 10) : 243;
    int mild = argc > 3 && !strcmp(argv[3], "mild");
    if (seeds < 1 || seeds > 100 || trials < 1 || trials >= MAX_TRIALS) {
        fprintf(stderr, "usage: mf_search [seeds (1..100) [trials (1..%d) [mild]]]\n",
                MAX_TRIALS - 1);
        return 2;
    }
    double best[NMETHODS][100], ep[NMETHODS][100], to[NMETHODS][100], ratio[NMETHODS][100];
    size_t hit[NMETHODS] = {0};
    for (int k = 0; k < seeds; k++) {
        outcome_t o[NMETHODS];
        for (size_t m = 0; m < NMETHODS; m++)
            o[m] = run(&methods[m], (uint64_t)k + 1, trials, mild);
        double target = o[0].best; /* asha + random's final best */
        for (size_t m = 0; m < NMETHODS; m++) {
            best[m][k] = o[m].best, ep[m][k] = o[m].epochs;
            to[m][k] = epochs_to(&o[m], target);
            ratio[m][k] = to[m][k] / o[0].epochs;
            hit[m] += !isnan(to[m][k]);
            free(o[m].trace);
        }
    }
    printf("%s curves, %d seeds, %llu trials, budget 1..81 eta 3, concurrency 4; medians over "
           "seeds\n",
           mild ? "mild" : "misleading", seeds, (unsigned long long)trials);
    printf("%-20s %8s %17s %8s %17s %13s %8s\n", "method", "best", "mean +- sd", "epochs",
           "epochs to target", "of asha+rnd's", "reached");
    for (size_t m = 0; m < NMETHODS; m++) {
        double mean, sd;
        vj_mean_sd(best[m], (size_t)seeds, &mean, &sd);
        double b = vj_median(best[m], (size_t)seeds), e = vj_median(ep[m], (size_t)seeds);
        double t = vj_median(to[m], (size_t)seeds), r = vj_median(ratio[m], (size_t)seeds);
        printf("%-20s %8.4f %8.4f +- %6.4f %8.0f %17.0f %13.2f %5zu/%d\n", methods[m].label, b,
               mean, sd, e, t, r, hit[m], seeds);
    }
    return 0;
}
