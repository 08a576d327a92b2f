/* pbt_search: population-based training (pbt, and pbt with PB2's explore
 * step) against ASHA at equal epochs, on a synthetic training whose best
 * learning rate changes as it goes, through the real schedulers and
 * samplers (pure code, a virtual clock). Prints figures; not a test
 * (tests/unit/test_pbt.c and test_pb2.c pin the schedulers).
 *
 * The training (2 parameters, loss to minimize, 40 epochs): lr in [1e-4, 1]
 * (log), dropout in [0, 0.6]. A trial's state (its checkpoint) is its loss
 * L, 2.5 at the start; each epoch at learning rate lr moves it toward the
 * floor that rate can reach:
 *   B = 0.03 + 1.5 lr + 0.3 (dropout - 0.2)^2,   L <- B + (L - B) e^{-2 lr}
 * so a large rate learns fast and stalls high, a small one learns slowly and
 * goes low: the best rate falls as training goes on (best constant rate:
 * 0.063, loss 0.140 at epoch 40; a rate decaying from 0.2 to 0.02 reaches
 * 0.107). A job reports L + N(0, 0.005^2), the noise from (seed, trial,
 * budget).
 *
 * The methods, each with the same epochs: a population of P (default 16)
 * trials times 40 epochs.
 *   asha + random   rungs 1, 3, 9, 27, 40 (eta 3), new trials until the
 *                   next job would pass the epochs (promotions resume their
 *                   checkpoint: a job trains budget - reached epochs);
 *   asha min 4      the same with rungs 4, 12, 36, 40 (a grace period of 4);
 *   fifo + random   P random configurations, each for 40 epochs;
 *   pbt             P trials, perturbation_interval 4, quantile 0.25,
 *                   explore's defaults (resample 0.25, factors 0.8, 1.2);
 *                   an exploit copies the donor's L;
 *   pb2             the same with explore_with: pb2.
 * Concurrency 4, the earliest-ending job first. For each seed the best loss
 * reported; medians over the seeds, mean and sample sd, and the seeds on
 * which the method's best is below asha + random's.
 *
 *   pbt_search [seeds [population]]   (default 10 seeds, population 16) */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "search/scheduler.h"
#include "virtual_jobs.h"
#define MAX_TRIALS 4096
#define EPOCHS 40
#define INTERVAL 4

typedef struct method {
    const char *label, *scheduler;
    double min; /* budget.min: asha's first rung */
    int pb2;
} method_t;

static const method_t methods[] = {
    {"asha + random", "asha", 1, 0}, {"asha min 4", "asha", 4, 0},  {"fifo + random", "fifo", 1, 0},
    {"pbt + random", "pbt", 1, 0},   {"pb2 + random", "pbt", 1, 1},
};
#define NMETHODS (sizeof methods / sizeof methods[0])

static double num(const json_t *c, const char *k) {
    return json_number_value(json_object_get(c, k));
}

/* One epoch of training at configuration c from loss L. */
static double epoch(double L, double lr, double dropout) {
    double b = 0.03 + 1.5 * lr + 0.3 * (dropout - 0.2) * (dropout - 0.2);
    return b + (L - b) * exp(-2 * lr);
}

typedef struct outcome {
    double best;   /* best loss reported */
    double epochs; /* epochs spent */
} outcome_t;

static outcome_t run(const method_t *m, uint64_t seed, uint64_t pop) {
    tp_space_t sp;
    tp__space_init(&sp);
    tp_param_t lr = {.name = tp__strdup("lr"), .kind = TP_DOM_LOGUNIFORM, .lo = 1e-4, .hi = 1};
    tp__space_add(&sp, &lr);
    tp_param_t dr = {.name = tp__strdup("dropout"), .kind = TP_DOM_UNIFORM, .lo = 0, .hi = 0.6};
    tp__space_add(&sp, &dr);
    int asha = !strcmp(m->scheduler, "asha");
    double cap = (double)pop * EPOCHS;
    tp_scheduler_cfg_t cfg = {
        .scheduler = m->scheduler,
        .sampler = {.algorithm = "random", .trials = asha ? MAX_TRIALS - 1 : pop, .seed = seed},
        .budget = {.name = "epochs", .min = m->min, .max = EPOCHS, .eta = 3},
        .pbt = {.interval = INTERVAL, .pb2 = m->pb2}};
    tp_error_t err = {0};
    tp_scheduler_t *s = tp__scheduler_new(&sp, &cfg, &err);
    if (!s) {
        fprintf(stderr, "pbt_search: %s\n", err.msg);
        exit(1);
    }
    outcome_t out = {.best = INFINITY};
    json_t **conf = tp__xcalloc(MAX_TRIALS, sizeof *conf);
    double *reached = tp__xcalloc(MAX_TRIALS, sizeof *reached);
    double *loss = tp__xcalloc(MAX_TRIALS, sizeof *loss), now = 0;
    vjobs_t running = {0};
    int closed = 0; /* the epochs are spent: no job starts */
    for (;;) {
        tp_job_t j;
        int rc = running.n < VJ_CONC && !closed ? s->ops->next(s, now, &j) : -EAGAIN;
        if (rc == 1 && !j.refused && j.trial < MAX_TRIALS) {
            if (j.is_new) conf[j.trial] = j.config, loss[j.trial] = 2.5;
            if (j.exploit) { /* the donor is paused: its checkpoint is its loss now */
                json_decref(conf[j.trial]);
                conf[j.trial] = j.config;
                loss[j.trial] = loss[j.donor], reached[j.trial] = j.from;
            }
            double ep = j.budget - reached[j.trial];
            if (out.epochs + ep > cap + 1e-9) {
                closed = 1;
                continue;
            }
            out.epochs += ep;
            vjobs_start(&running, &j, now + ep);
            continue;
        }
        if (rc == 1) continue;
        if (running.n == 0) break;
        tp_job_t done = vjobs_first(&running, &now);
        const json_t *c = conf[done.trial];
        for (double e = reached[done.trial]; e < done.budget - 1e-9; e++)
            loss[done.trial] = epoch(loss[done.trial], num(c, "lr"), num(c, "dropout"));
        reached[done.trial] = done.budget;
        tp_rng_t r;
        tp__rng_seed(&r, seed * 7919 + (uint64_t)done.trial, (uint64_t)llround(done.budget));
        double v = loss[done.trial] + 0.005 * tp__rng_normal(&r);
        s->ops->result(s, done.trial, done.rung, 1, v, now);
        if (v < out.best) out.best = v;
    }
    for (size_t i = 0; i < MAX_TRIALS; i++)
        json_decref(conf[i]);
    free(conf), free(reached), free(loss);
    tp__scheduler_free(s);
    tp__space_free(&sp);
    return out;
}

/* The loss after EPOCHS epochs at the best constant rate (dropout 0.2), for reference. */
static double best_constant(double *at) {
    double best = INFINITY;
    for (int k = -400; k <= 0; k++) {
        double lr = pow(10, k / 100.0), L = 2.5;
        for (int e = 0; e < EPOCHS; e++)
            L = epoch(L, lr, 0.2);
        if (L < best) best = L, *at = lr;
    }
    return best;
}

int main(int argc, char **argv) {
    int seeds = argc > 1 ? atoi(argv[1]) : 10;
    long pop = argc > 2 ? atol(argv[2]) : 16;
    if (seeds < 1 || seeds > 100 || pop < 2 || pop > 256) {
        fprintf(stderr, "usage: pbt_search [seeds (1..100) [population (2..256)]]\n");
        return 2;
    }
    double best[NMETHODS][100], ep[NMETHODS][100];
    int wins[NMETHODS] = {0};
    for (int k = 0; k < seeds; k++)
        for (size_t m = 0; m < NMETHODS; m++) {
            outcome_t o = run(&methods[m], (uint64_t)k + 1, (uint64_t)pop);
            best[m][k] = o.best, ep[m][k] = o.epochs;
            wins[m] += m && o.best < best[0][k];
        }
    double lr = 0, ref = best_constant(&lr);
    printf("best lr falls during training; %d seeds, %ld x %d epochs each, concurrency 4; "
           "medians over seeds\n(the best constant lr, %.3g, reaches %.4f)\n",
           seeds, pop, EPOCHS, lr, ref);
    printf("%-16s %8s %17s %8s %14s\n", "method", "best", "mean +- sd", "epochs", "beats asha");
    for (size_t m = 0; m < NMETHODS; m++) {
        double mean, sd;
        vj_mean_sd(best[m], (size_t)seeds, &mean, &sd);
        double b = vj_median(best[m], (size_t)seeds), e = vj_median(ep[m], (size_t)seeds);
        char w[32] = "";
        if (m) snprintf(w, sizeof w, "%d/%d", wins[m], seeds);
        printf("%-16s %8.4f %8.4f +- %6.4f %8.0f %14s\n", methods[m].label, b, mean, sd, e, w);
    }
    return 0;
}
