/* Unit tests for the scaling-curve model (search/scaling.h) and the
 * reallocation policy (search/realloc.h). */
#include <math.h>
#include <stdlib.h>

#include "search/realloc.h"
#include "search/scaling.h"
#include "tp_test.h"

/* A curve measured at the given counts from Amdahl: serial + parallel / g. */
static void amdahl(tp_scaling_t *s, double serial, double parallel, const int *counts, size_t n) {
    tp__scaling_init(s);
    for (size_t i = 0; i < n; i++)
        tp__scaling_add(s, counts[i], serial + parallel / counts[i]);
}

TP_TEST(test_scaling_running_mean_is_order_free_and_ignores_bad_samples) {
    tp_scaling_t a, b;
    tp__scaling_init(&a);
    tp__scaling_init(&b);
    const double xs[] = {1.0, 2.0, 4.5, 0.5};
    for (int i = 0; i < 4; i++)
        tp__scaling_add(&a, 2, xs[i]);
    for (int i = 3; i >= 0; i--)
        tp__scaling_add(&b, 2, xs[i]);
    int q = -1;
    TP_CHECK_NEAR(tp__scaling_step_s(&a, 2, &q), 2.0, 1e-12);
    TP_CHECK_INT(q, TP_SCALING_MEASURED);
    TP_CHECK_NEAR(tp__scaling_step_s(&b, 2, NULL), 2.0, 1e-12);
    TP_CHECK_INT(a.samples[2], 4);
    tp__scaling_add(&a, 2, NAN);
    tp__scaling_add(&a, 2, -1);
    tp__scaling_add(&a, 0, 1);
    tp__scaling_add(&a, TP_SCALING_MAX_GPUS + 1, 1);
    TP_CHECK_INT(a.samples[2], 4);
    TP_CHECK_INT(tp__scaling_counts(&a), 1);
}

TP_TEST(test_scaling_with_nothing_measured_is_nan_and_one_point_is_unproven) {
    tp_scaling_t s;
    tp__scaling_init(&s);
    int q = 7;
    TP_CHECK(isnan(tp__scaling_step_s(&s, 1, &q)));
    TP_CHECK_INT(q, TP_SCALING_UNPROVEN);
    tp__scaling_add(&s, 2, 3.0);
    TP_CHECK_NEAR(tp__scaling_step_s(&s, 4, &q), 1.5, 1e-12); /* linear from one point */
    TP_CHECK_INT(q, TP_SCALING_UNPROVEN);
    double a, b;
    TP_CHECK_INT(tp__scaling_fit(&s, &a, &b), -1);
    TP_CHECK(isnan(tp__scaling_step_s(&s, 0, &q)));
}

TP_TEST(test_scaling_fit_recovers_amdahl_from_two_counts_and_predicts_the_rest) {
    tp_scaling_t s;
    const int counts[] = {1, 2};
    amdahl(&s, 0.25, 1.0, counts, 2); /* t(1) = 1.25, t(2) = 0.75 */
    double a, b;
    TP_REQUIRE(tp__scaling_fit(&s, &a, &b) == 0);
    TP_CHECK_NEAR(a, 0.25, 1e-12);
    TP_CHECK_NEAR(b, 1.0, 1e-12);
    int q;
    TP_CHECK_NEAR(tp__scaling_step_s(&s, 8, &q), 0.25 + 1.0 / 8, 1e-12);
    TP_CHECK_INT(q, TP_SCALING_FITTED);
    TP_CHECK_NEAR(tp__scaling_step_s(&s, 2, &q), 0.75, 1e-12);
    TP_CHECK_INT(q, TP_SCALING_MEASURED);
}

TP_TEST(test_scaling_fit_clamps_slower_with_more_gpus_to_flat) {
    tp_scaling_t s;
    tp__scaling_init(&s);
    tp__scaling_add(&s, 1, 1.0);
    tp__scaling_add(&s, 2, 1.2); /* communication bound: 2 GPUs are slower */
    double a, b;
    TP_REQUIRE(tp__scaling_fit(&s, &a, &b) == 0);
    TP_CHECK_NEAR(b, 0, 1e-12);
    TP_CHECK_NEAR(a, 1.1, 1e-12);
    TP_CHECK_NEAR(tp__scaling_step_s(&s, 4, NULL), 1.1, 1e-12);
}

/* A running trial at g GPUs with a curve measured at counts. */
static tp_realloc_trial_t trial(int64_t id, int g, double score, const tp_scaling_t *s) {
    return (tp_realloc_trial_t){.trial = id,
                                .gpus = g,
                                .gpus_min = 1,
                                .gpus_max = 8,
                                .remaining_steps = 100,
                                .score = score,
                                .scaling = s,
                                .restart_s = 10,
                                .last_resize_s = NAN};
}

TP_TEST(test_gain_counts_restart_cost_and_the_curve) {
    tp_scaling_t s;
    const int counts[] = {1, 2};
    amdahl(&s, 0, 1.0, counts, 2); /* perfect scaling, 1 s/step at 1 GPU */
    tp_realloc_trial_t t = trial(0, 1, 0, &s);
    int q;
    /* 100 s left at 1 GPU; at 4: 10 s restart + 25 s */
    TP_CHECK_NEAR(tp__realloc_gain(&t, 4, &q), 100.0 / 35.0, 1e-12);
    TP_CHECK_INT(q, TP_SCALING_FITTED);
    t.remaining_steps = 10; /* nearly done: the restart is not worth it */
    TP_CHECK(tp__realloc_gain(&t, 2, NULL) < 1.1);
    t.restart_s = NAN;
    TP_CHECK(isnan(tp__realloc_gain(&t, 2, NULL)));
}

TP_TEST(test_top_job_gives_the_leader_what_pays_and_the_rest_to_the_next) {
    tp_scaling_t s;
    const int counts[] = {1, 2};
    amdahl(&s, 0, 1.0, counts, 2);
    tp_realloc_trial_t ts[3] = {trial(5, 1, 0.7, &s), trial(6, 1, 0.9, &s), trial(7, 1, 0.8, &s)};
    ts[1].gpus_max = 4;
    tp_resize_t out[4];
    size_t n = tp__realloc_plan(TP_REALLOC_TOP_JOB, ts, 3, 5, 1000, NULL, out, 4);
    TP_REQUIRE(n == 2);
    TP_CHECK_INT(out[0].trial, 6); /* the leader, up to its max */
    TP_CHECK_INT(out[0].gpus, 4);
    TP_CHECK_INT(out[1].trial, 7); /* the two left go to the runner-up */
    TP_CHECK_INT(out[1].gpus, 3);
    TP_CHECK(out[0].gain > 1.1 && out[1].gain > 1.1);
    TP_CHECK_CONTAINS(out[0].why, "grow 1 -> 4 GPUs: gain");
    TP_CHECK_CONTAINS(out[0].why, "top-job");
}

TP_TEST(test_uniform_splits_evenly_and_never_hands_out_more_than_free) {
    tp_scaling_t s;
    const int counts[] = {1, 2};
    amdahl(&s, 0, 1.0, counts, 2);
    tp_realloc_trial_t ts[3] = {trial(1, 1, 0.5, &s), trial(2, 1, 0.6, &s), trial(3, 1, 0.4, &s)};
    tp_resize_t out[4];
    size_t n = tp__realloc_plan(TP_REALLOC_UNIFORM, ts, 3, 7, 0, NULL, out, 4);
    TP_REQUIRE(n == 3);
    int extra = 0;
    for (size_t i = 0; i < n; i++)
        extra += out[i].gpus - 1;
    TP_CHECK_INT(extra, 7);
    TP_CHECK_INT(out[0].trial, 2); /* the leftover GPU goes to the leader */
    TP_CHECK_INT(out[0].gpus, 4);
    TP_CHECK_INT(out[1].gpus, 3);
    TP_CHECK_INT(out[2].gpus, 3);
    /* one free GPU: only the leader */
    n = tp__realloc_plan(TP_REALLOC_UNIFORM, ts, 3, 1, 0, NULL, out, 4);
    TP_REQUIRE(n == 1);
    TP_CHECK_INT(out[0].trial, 2);
    TP_CHECK_INT(out[0].gpus, 2);
}

TP_TEST(test_softmax_favours_the_leader_by_temperature) {
    tp_scaling_t s;
    const int counts[] = {1, 2};
    amdahl(&s, 0, 1.0, counts, 2);
    tp_realloc_trial_t ts[2] = {trial(1, 1, 0.0, &s), trial(2, 1, 1.0, &s)};
    tp_realloc_opts_t o;
    tp__realloc_opts_default(&o);
    o.temperature = 0.25; /* weights 1 : e^-4 */
    tp_resize_t out[2];
    size_t n = tp__realloc_plan(TP_REALLOC_SOFTMAX, ts, 2, 6, 0, &o, out, 2);
    TP_REQUIRE(n == 1);
    TP_CHECK_INT(out[0].trial, 2);
    TP_CHECK_INT(out[0].gpus, 7);
    o.temperature = 100; /* nearly uniform */
    n = tp__realloc_plan(TP_REALLOC_SOFTMAX, ts, 2, 6, 0, &o, out, 2);
    TP_REQUIRE(n == 2);
    TP_CHECK_INT(out[0].gpus, 4);
    TP_CHECK_INT(out[1].gpus, 4);
}

TP_TEST(test_no_resize_below_min_gain_in_cooldown_or_without_measurements) {
    tp_scaling_t s, flat, none;
    const int counts[] = {1, 2};
    amdahl(&s, 0, 1.0, counts, 2);
    amdahl(&flat, 1.0, 0.0, counts, 2); /* does not scale */
    tp__scaling_init(&none);
    tp_realloc_trial_t ts[5] = {trial(1, 1, 0.9, &flat), trial(2, 1, 0.8, &s),
                                trial(3, 1, 0.7, &none), trial(4, 1, 0.6, &s),
                                trial(5, 1, 0.5, &s)};
    ts[1].last_resize_s = 950; /* cooldown 60 s: not before 1010 */
    ts[3].restart_s = NAN;     /* restart cost unknown */
    ts[4].remaining_steps = 5; /* 5 s left, a 10 s restart never pays */
    tp_resize_t out[5];
    TP_CHECK_INT(tp__realloc_plan(TP_REALLOC_TOP_JOB, ts, 5, 4, 1000, NULL, out, 5), 0);
    TP_CHECK_INT(tp__realloc_plan(TP_REALLOC_UNIFORM, ts, 5, 4, 1000, NULL, out, 5), 0);
    /* after the cooldown trial 2 takes all four */
    size_t n = tp__realloc_plan(TP_REALLOC_UNIFORM, ts, 5, 4, 1010, NULL, out, 5);
    TP_REQUIRE(n == 1);
    TP_CHECK_INT(out[0].trial, 2);
    TP_CHECK_INT(out[0].gpus, 5);
}

TP_TEST(test_an_unproven_curve_is_probed_at_most_to_twice_its_count) {
    tp_scaling_t s;
    tp__scaling_init(&s);
    tp__scaling_add(&s, 2, 1.0);
    tp_realloc_trial_t t = trial(9, 2, 1, &s);
    tp_resize_t out[1];
    size_t n = tp__realloc_plan(TP_REALLOC_TOP_JOB, &t, 1, 6, 0, NULL, out, 1);
    TP_REQUIRE(n == 1);
    TP_CHECK_INT(out[0].gpus, 4);
    TP_CHECK_CONTAINS(out[0].why, "probe");
    tp_realloc_opts_t o;
    tp__realloc_opts_default(&o);
    o.probe = 0;
    TP_CHECK_INT(tp__realloc_plan(TP_REALLOC_TOP_JOB, &t, 1, 6, 0, &o, out, 1), 0);
}

TP_TEST(test_gpus_min_is_respected_and_policy_names_round_trip) {
    tp_scaling_t s;
    const int counts[] = {1, 2};
    amdahl(&s, 0, 1.0, counts, 2);
    tp_realloc_trial_t t = trial(1, 1, 0, &s);
    t.gpus_min = 4; /* a trial below its min can only jump to it */
    tp_resize_t out[1];
    TP_CHECK_INT(tp__realloc_plan(TP_REALLOC_UNIFORM, &t, 1, 2, 0, NULL, out, 1), 0);
    TP_REQUIRE(tp__realloc_plan(TP_REALLOC_UNIFORM, &t, 1, 3, 0, NULL, out, 1) == 1);
    TP_CHECK_INT(out[0].gpus, 4);
    for (int p = 0; p < 3; p++)
        TP_CHECK_INT(tp__realloc_policy_parse(tp__realloc_policy_name((tp_realloc_policy_t)p)), p);
    TP_CHECK_INT(tp__realloc_policy_parse("biggest"), -1);
}

/* Oracle: for random inputs the plan never exceeds the free GPUs or a
 * trial's max, only grows, and every gain is above min_gain and equals
 * tp__realloc_gain. */
TP_TEST(test_plans_on_random_inputs_keep_every_bound) {
    srand(7);
    for (int round = 0; round < 300; round++) {
        tp_scaling_t curves[6];
        tp_realloc_trial_t ts[6];
        size_t n = 1 + (size_t)(rand() % 6);
        for (size_t i = 0; i < n; i++) {
            int c2[] = {1 + rand() % 2, 3 + rand() % 3};
            amdahl(&curves[i], (rand() % 100) / 100.0, 0.5 + (rand() % 100) / 50.0, c2,
                   1 + (size_t)(rand() % 2));
            ts[i] = trial((int64_t)i, c2[0], (rand() % 100) / 10.0, &curves[i]);
            ts[i].gpus_max = 1 + rand() % 8;
            ts[i].remaining_steps = rand() % 200;
            ts[i].restart_s = rand() % 30;
        }
        int free_gpus = rand() % 10;
        tp_resize_t out[6];
        size_t k =
            tp__realloc_plan((tp_realloc_policy_t)(round % 3), ts, n, free_gpus, 0, NULL, out, 6);
        int used = 0;
        for (size_t j = 0; j < k; j++) {
            const tp_realloc_trial_t *t = &ts[out[j].trial];
            TP_CHECK(out[j].gpus > t->gpus);
            TP_CHECK(out[j].gpus <= t->gpus_max);
            TP_CHECK(out[j].gain > 1.1);
            TP_CHECK_NEAR(out[j].gain, tp__realloc_gain(t, out[j].gpus, NULL), 1e-12);
            used += out[j].gpus - t->gpus;
        }
        TP_CHECK(used <= free_gpus);
    }
}

int main(void) {
    return tp_test_main();
}
