/* Unit tests for the tuning simulator (sim/sim_tune.h): deadline runs
 * through the real schedulers and the reallocation policy. */
#include <math.h>
#include <stdlib.h>

#include "search/scheduler.h"
#include "sim/sim_tune.h"
#include "tp_test.h"

static tp_simtune_result_t run(tp_simtune_cfg_t *c) {
    tp_simtune_result_t r;
    tp_error_t err = {0};
    int rc = tp__simtune_run(c, &r, &err);
    if (rc) fprintf(stderr, "  simtune: %s\n", err.msg);
    return r;
}

TP_TEST(test_asha_without_a_deadline_runs_every_configuration_reproducibly) {
    tp_simtune_cfg_t c;
    tp__simtune_defaults(&c);
    c.trials = 27;
    c.seed = 4;
    tp_simtune_result_t a = run(&c), b = run(&c);
    TP_CHECK_INT(a.trials, 27);
    TP_CHECK_INT(a.refused, 0);
    TP_CHECK_INT(a.resizes, 0);
    /* 27 at rung 0, 9 at rung 1, 3 at rung 2, 1 at rung 3 */
    TP_CHECK_INT(a.jobs, 40);
    TP_CHECK(a.end_s > 0 && a.best > 0.5 && a.best < 1);
    TP_CHECK(a.gpu_busy > 0 && a.gpu_busy <= 1);
    TP_CHECK(a.best == b.best && a.end_s == b.end_s && a.best_trial == b.best_trial);
}

TP_TEST(test_hypersched_at_a_tight_deadline_refuses_reallocates_and_stops_on_time) {
    tp_simtune_cfg_t c;
    tp__simtune_defaults(&c);
    c.seed = 2;
    tp_simtune_result_t full = run(&c);
    tp_buf_t tl, svg;
    tp__buf_init(&tl);
    tp__buf_init(&svg);
    c.scheduler = "hypersched";
    c.realloc = 1;
    c.deadline_s = 0.25 * full.end_s;
    c.timeline = &tl;
    c.svg = &svg;
    tp_simtune_result_t r = run(&c);
    TP_CHECK(r.end_s == c.deadline_s);
    TP_CHECK(r.refused > 0);
    TP_CHECK(r.resizes > 0);
    TP_CHECK(r.trials < 81);
    TP_CHECK(r.gpu_busy > 0 && r.gpu_busy <= 1 + 1e-9);
    TP_REQUIRE(tl.data && svg.data);
    TP_CHECK_CONTAINS(tl.data, "t_s,event,trial,gpus,rung,value,why\n");
    TP_CHECK_CONTAINS(tl.data, ",refused,");
    TP_CHECK_CONTAINS(tl.data, ",resize,");
    TP_CHECK_CONTAINS(tl.data, "grow 1 -> ");
    TP_CHECK_CONTAINS(tl.data, ",deadline,");
    TP_CHECK_CONTAINS(svg.data, "<svg");
    tp__buf_free(&tl);
    tp__buf_free(&svg);
}

TP_TEST(test_a_bad_gpu_count_or_scheduler_is_an_error) {
    tp_simtune_cfg_t c;
    tp__simtune_defaults(&c);
    tp_simtune_result_t r;
    tp_error_t err = {0};
    c.gpus = 0;
    TP_CHECK(tp__simtune_run(&c, &r, &err) < 0);
    TP_CHECK_CONTAINS(err.msg, "gpus must be 1..1048576");
    c.gpus = 65;
    c.realloc = 1; /* a measured scaling curve goes up to 64 GPUs */
    TP_CHECK(tp__simtune_run(&c, &r, &err) < 0);
    TP_CHECK_CONTAINS(err.msg, "gpus must be 1..64");
    c.realloc = 0;
    c.gpus = 4;
    c.scheduler = "hypershed";
    TP_CHECK(tp__simtune_run(&c, &r, &err) < 0);
    TP_CHECK_CONTAINS(err.msg, "did you mean \"hypersched\"");
}

static int cmp_double(const void *pa, const void *pb) {
    double a = *(const double *)pa, b = *(const double *)pb;
    return (a > b) - (a < b);
}

/* BOHB in the simulator, at 8 GPUs (asks while jobs run): under asha and
 * hyperband it starts every configuration, reproducibly. The figures are
 * printed, not checked: this workload's early leaders are meant to mislead
 * (tau grows with y (1 - x)), and at 81 trials random's mean best true
 * quality over 20 seeds (0.911) is above tpe's (0.897 asha, 0.903
 * hyperband) and bohb's (0.909, 0.908; 0.907, 0.906 before its pending
 * proposals, docs/search.md). */
TP_TEST(test_bohb_runs_in_the_simulator_under_asha_and_hyperband) {
    const char *scheds[] = {"asha", "hyperband"};
    for (int k = 0; k < 2; k++) {
        double bohb[5], rnd[5];
        for (int seed = 0; seed < 5; seed++) {
            tp_simtune_cfg_t c;
            tp__simtune_defaults(&c);
            c.scheduler = scheds[k];
            c.seed = (uint64_t)seed + 1;
            c.sampler = "bohb";
            tp_simtune_result_t a = run(&c), b = run(&c);
            TP_CHECK_INT(a.trials, 81);
            TP_CHECK(a.best == b.best && a.end_s == b.end_s && a.jobs == b.jobs);
            bohb[seed] = a.best_true;
            c.sampler = NULL;
            rnd[seed] = run(&c).best_true;
        }
        qsort(bohb, 5, sizeof *bohb, cmp_double);
        qsort(rnd, 5, sizeof *rnd, cmp_double);
        printf("  %s: median best true quality over 5 seeds: bohb %.4f, random %.4f\n", scheds[k],
               bohb[2], rnd[2]);
    }
}

TP_TEST(test_pbt_runs_in_the_simulator_and_exploits_each_generation) {
    tp_simtune_cfg_t c;
    tp__simtune_defaults(&c);
    c.scheduler = "pbt";
    c.trials = 8;
    c.gpus = 4; /* the population takes turns */
    c.budget_min = 3;
    c.budget_max = 12;
    c.seed = 6;
    tp_simtune_result_t a = run(&c), b = run(&c);
    TP_CHECK_INT(a.trials, 8);
    TP_CHECK_INT(a.jobs, 32);    /* 8 trials x 4 jobs of 3 units */
    TP_CHECK_INT(a.exploits, 6); /* generations at 3, 6, 9: ceil(8 x 0.25) each */
    TP_CHECK(a.best > 0.5 && a.best < 1);
    TP_CHECK(a.best == b.best && a.end_s == b.end_s && a.exploits == b.exploits);
}

/* An experiment's own scheduler handed in, measured trials resampled. */
static tp_scheduler_t *own_scheduler(const tp_space_t *sp, const char *sched, uint64_t seed) {
    tp_scheduler_cfg_t sc = {.scheduler = sched,
                             .sampler = {.algorithm = "random", .trials = 12, .seed = seed},
                             .budget = {.name = "epochs", .min = 1, .max = 9, .eta = 3},
                             .maximize = 0};
    tp_error_t err = {0};
    return tp__scheduler_new(sp, &sc, &err);
}

/* A run of that scheduler on g GPUs over the n measured trials, minimized. */
static tp_simtune_cfg_t own_cfg(const tp_space_t *sp, const char *sched, int g,
                                const tp_simtune_measured_t *rec, size_t n) {
    tp_simtune_cfg_t c;
    tp__simtune_defaults(&c);
    c.scheduler_obj = own_scheduler(sp, sched, 3);
    c.gpus = g;
    c.measured = rec;
    c.nmeasured = n;
    c.minimize = 1;
    c.startup_s = 0;
    return c;
}

TP_TEST(test_an_experiments_own_search_resamples_measured_trials_and_more_gpus_never_take_longer) {
    tp_space_t sp;
    tp__space_init(&sp);
    tp_param_t p = {.name = tp__strdup("lr"), .kind = TP_DOM_UNIFORM, .lo = 0, .hi = 1};
    tp__space_add(&sp, &p);
    /* two measured trials: 10 s and 30 s per epoch; their losses fall to 0.2 and 0.5 */
    static const double frac[] = {1.0 / 3, 2.0 / 3, 1};
    static const double fast[] = {0.6, 0.4, 0.2}, slow[] = {0.9, 0.7, 0.5};
    tp_simtune_measured_t rec[] = {
        {.unit_s = 10, .units = 9, .npoints = 3, .frac = frac, .values = fast},
        {.unit_s = 30, .units = 9, .npoints = 3, .frac = frac, .values = slow}};
    double prev = INFINITY;
    for (int g = 1; g <= 8; g *= 2) {
        tp_simtune_cfg_t c = own_cfg(&sp, "fifo", g, rec, 2);
        tp_simtune_result_t r = run(&c);
        tp__scheduler_free(c.scheduler_obj);
        TP_CHECK_INT(r.trials, 12);
        TP_CHECK_INT(r.finished, 12);
        /* the best is a measured value, the lowest loss (minimized) */
        TP_CHECK(r.best == 0.2 || r.best == 0.5);
        /* fifo runs each trial to 9 epochs: 90 or 270 s, in ceil(12 / g) waves at most */
        TP_CHECK(r.end_s >= 0.95 * 90 && r.end_s <= 1.05 * 270 * ((12 + g - 1) / g) + 1e-9);
        TP_CHECK(r.end_s <= prev + 1e-9);
        prev = r.end_s;
    }
    /* two GPUs a trial, at most one trial at once: one after another on 8 GPUs */
    tp_simtune_cfg_t c = own_cfg(&sp, "asha", 8, rec, 2);
    c.trial_gpus = 2;
    c.max_running = 1;
    c.horizon_s = 1;
    tp_simtune_result_t r = run(&c);
    tp__scheduler_free(c.scheduler_obj);
    TP_CHECK_INT(r.trials, 12);
    TP_CHECK(r.gpu_busy > 0.24 && r.gpu_busy <= 0.25 + 1e-9); /* 2 of 8 GPUs, always */
    TP_CHECK(isnan(r.best_by));                               /* nothing reported by 1 s */
    tp__space_free(&sp);
}

/* The cluster at scale (sim_nodes.h): nodes that fail lose their jobs, which
 * are placed again, and every trial still ends once, reproducibly; a queue
 * wait before the one node joins shifts the whole run by it; a trial's
 * start-up on its node is paid by every attempt; none of it with
 * reallocation. */
TP_TEST(test_failed_nodes_jobs_are_placed_again_and_queue_waits_and_start_ups_cost_time) {
    tp_simtune_cfg_t c;
    tp__simtune_defaults(&c);
    c.gpus = 16;
    c.seed = 3;
    c.gpus_per_node = 4;
    tp_simtune_result_t base = run(&c);
    TP_CHECK_INT(base.node_failures, 0);
    TP_CHECK_INT(base.requeued, 0);
    tp_buf_t tl;
    tp__buf_init(&tl);
    c.node_failures = 100; /* per node-day: a few over a run of about an hour on 4 nodes */
    c.timeline = &tl;
    tp_simtune_result_t a = run(&c);
    c.timeline = NULL;
    tp_simtune_result_t b = run(&c);
    TP_CHECK(a.node_failures > 0);
    TP_CHECK(a.requeued > 0);
    TP_CHECK_INT(a.trials, 81);
    TP_CHECK_INT(a.finished, 81);
    TP_CHECK(a.end_s == b.end_s && a.best == b.best && a.requeued == b.requeued &&
             a.node_failures == b.node_failures);
    TP_REQUIRE(tl.data != NULL);
    TP_CHECK_CONTAINS(tl.data, ",lost,");
    TP_CHECK_CONTAINS(tl.data, ",placed again,");
    tp__buf_free(&tl);

    /* one node of all 16 GPUs joins after its queue wait: the same run, later */
    c.node_failures = 0;
    c.queue_wait_s = 600;
    c.gpus_per_node = 16;
    tp_simtune_result_t q = run(&c);
    TP_CHECK_INT(q.jobs, base.jobs);
    TP_CHECK(q.best == base.best);
    TP_CHECK(q.end_s > base.end_s + 0.47);

    /* one GPU, one job at a time: each of them starts 5 s later */
    tp__simtune_defaults(&c);
    c.gpus = 1;
    c.trials = 9;
    tp_simtune_result_t one = run(&c);
    c.trial_startup_s = 5;
    tp_simtune_result_t late = run(&c);
    TP_CHECK_INT(late.jobs, one.jobs);
    TP_CHECK_NEAR(late.end_s, one.end_s + 5.0 * (double)one.jobs, 1e-6 * one.end_s);

    tp_error_t err = {0};
    c.realloc = 1;
    c.queue_wait_s = 60;
    TP_CHECK(tp__simtune_run(&c, &a, &err) < 0);
    TP_CHECK_CONTAINS(err.msg, "without reallocation");
}

int main(void) {
    return tp_test_main();
}
