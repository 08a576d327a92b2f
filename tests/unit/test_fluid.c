/* fluid: a trial group's GPU shares follow remaining work, the bounds apply
 * after normalisation, memory decides which fractions a trial may take, and
 * the leftover goes to the trial that would finish last. Exact shares. */
#include <stdlib.h>

#include "place/fluid.h"
#include "tp_test.h"

#define N(a) (sizeof(a) / sizeof *(a))

static tp_fluid_trial_t T(int64_t id, double step_s, double steps, uint64_t mib, int gmax) {
    return (tp_fluid_trial_t){
        .id = id, .step_s = step_s, .remaining_steps = steps, .memory_mib = mib, .gpus_max = gmax};
}

TP_TEST(test_fluid_shares_follow_step_time_times_remaining_steps) {
    /* work 4, 2, 1, 1 (step time x steps) over 8 GPUs: 4, 2, 1, 1 GPUs */
    tp_fluid_trial_t t[] = {T(0, 2.0, 2, 0, 8), T(1, 1.0, 2, 0, 8), T(2, 0.5, 2, 0, 8),
                            T(3, 1.0, 1, 0, 8)};
    tp_fluid_opts_t o = {.capacity = 8, .min = 0.25, .max = 8, .pack_max = 4};
    tp_fluid_share_t s[N(t)];
    TP_CHECK_NEAR(tp__fluid_shares(t, N(t), &o, s), 8, 1e-12);
    double want[] = {4, 2, 1, 1};
    for (size_t i = 0; i < N(t); i++)
        TP_CHECK_NEAR(s[i].share, want[i], 1e-12);
    TP_CHECK_INT(s[0].gpus, 4);
    TP_CHECK_INT(s[2].per_gpu, 1);
}

TP_TEST(test_fluid_max_applies_after_normalisation_unlike_fluid) {
    /* work 6, 1, 1 on 4 GPUs, shares in [0.5, 2]. Fluid's order (clamp the
     * proportions 3, 0.5, 0.5 to [0.5, 2], then normalise to 4 GPUs) gives
     * 2.67, 0.67, 0.67: above its own max. Normalising first and bounding
     * after gives 2, 1, 1: the max holds and the capacity is all used. */
    tp_fluid_trial_t t[] = {T(0, 1, 6, 0, 4), T(1, 1, 1, 0, 4), T(2, 1, 1, 0, 4)};
    tp_fluid_opts_t o = {.capacity = 4, .min = 0.5, .max = 2, .pack_max = 2};
    tp_fluid_share_t s[N(t)];
    double fluid_order[3], sum = 0;
    for (size_t i = 0; i < 3; i++) {
        double p = 4 * t[i].remaining_steps / 8;
        fluid_order[i] = p < 0.5 ? 0.5 : p > 2 ? 2 : p;
        sum += fluid_order[i];
    }
    TP_CHECK(fluid_order[0] / sum * 4 > o.max + 0.5); /* the wrong order breaks the bound */
    TP_CHECK_NEAR(tp__fluid_shares(t, N(t), &o, s), 4, 1e-12);
    TP_CHECK_NEAR(s[0].ideal, 3, 1e-12);
    TP_CHECK_NEAR(s[0].bounded, 2, 1e-12);
    TP_CHECK_NEAR(s[0].share, 2, 1e-12);
    TP_CHECK_NEAR(s[1].share, 1, 1e-12);
    TP_CHECK_NEAR(s[2].share, 1, 1e-12);
}

TP_TEST(test_fluid_min_applies_after_normalisation) {
    /* work 10, 1, 1, 1, 1 on 2 GPUs: ideal 1.43 and 0.14 each; the min 1/4
     * lifts the small ones and the big one gives back what they take */
    tp_fluid_trial_t t[] = {T(0, 1, 10, 0, 1), T(1, 1, 1, 0, 1), T(2, 1, 1, 0, 1), T(3, 1, 1, 0, 1),
                            T(4, 1, 1, 0, 1)};
    tp_fluid_opts_t o = {.capacity = 2, .min = 0.25, .max = 4, .pack_max = 4};
    tp_fluid_share_t s[N(t)];
    TP_CHECK_NEAR(tp__fluid_shares(t, N(t), &o, s), 2, 1e-12);
    TP_CHECK_NEAR(s[0].ideal, 20.0 / 14, 1e-12);
    TP_CHECK_NEAR(s[0].share, 1, 1e-12); /* gpus_max 1: no elastic resize */
    for (size_t i = 1; i < N(t); i++) {
        TP_CHECK_NEAR(s[i].share, 0.25, 1e-12);
        TP_CHECK_INT(s[i].per_gpu, 4);
    }
}

TP_TEST(test_fluid_memory_decides_the_fractions) {
    /* 16000 MiB usable; trial 0 needs 10000 (two cannot share a GPU), the
     * others 4000 (four can). Equal work on 2 GPUs: without the memory check
     * each would get 1/2; with it trial 0 takes a whole GPU and the others
     * share the second one at 1/3 each. */
    tp_fluid_trial_t t[] = {T(0, 1, 5, 10000, 1), T(1, 1, 5, 4000, 1), T(2, 1, 5, 4000, 1),
                            T(3, 1, 5, 4000, 1)};
    tp_fluid_opts_t o = {
        .capacity = 2, .min = 0.25, .max = 1, .pack_max = 4, .gpu_memory_mib = 16000};
    tp_fluid_share_t s[N(t)];
    TP_CHECK_NEAR(tp__fluid_shares(t, N(t), &o, s), 2, 1e-12);
    TP_CHECK_NEAR(s[0].share, 1, 1e-12);
    for (size_t i = 1; i < N(t); i++)
        TP_CHECK_NEAR(s[i].share, 1.0 / 3, 1e-12);
    TP_CHECK(strstr(s[0].why, "10000 MiB allow a whole GPU") != NULL);
    o.gpu_memory_mib = 0; /* unchecked: equal halves */
    tp__fluid_shares(t, N(t), &o, s);
    for (size_t i = 0; i < N(t); i++)
        TP_CHECK_NEAR(s[i].share, 0.5, 1e-12);
}

TP_TEST(test_fluid_memory_wins_over_max) {
    /* max 1/2, but 9000 MiB of a 16000 MiB GPU fit only alone: a whole GPU */
    tp_fluid_trial_t t[] = {T(0, 1, 1, 9000, 1), T(1, 1, 1, 1000, 1)};
    tp_fluid_opts_t o = {
        .capacity = 2, .min = 0.25, .max = 0.5, .pack_max = 4, .gpu_memory_mib = 16000};
    tp_fluid_share_t s[N(t)];
    tp__fluid_shares(t, N(t), &o, s);
    TP_CHECK_NEAR(s[0].share, 1, 1e-12);
    TP_CHECK_NEAR(s[1].share, 0.5, 1e-12);
}

TP_TEST(test_fluid_leftover_goes_to_whoever_finishes_last) {
    /* work 3, 2, 2, 1 on 2 GPUs: ideal 0.75, 0.5, 0.5, 0.25; the ladder
     * (1/4, 1/3, 1/2, 1) rounds 0.75 down to 1/2 and leaves 1/4 over. No
     * trial of work 3 or 2 can step up (to 1) within 1/4; trial 3 can, and
     * takes it in two steps (1/3, 1/2): no capacity is left idle. */
    tp_fluid_trial_t t[] = {T(0, 1, 3, 0, 1), T(1, 1, 2, 0, 1), T(2, 1, 2, 0, 1), T(3, 1, 1, 0, 1)};
    tp_fluid_opts_t o = {.capacity = 2, .min = 0.25, .max = 1, .pack_max = 4};
    tp_fluid_share_t s[N(t)];
    TP_CHECK_NEAR(tp__fluid_shares(t, N(t), &o, s), 2, 1e-12);
    double want[] = {0.5, 0.5, 0.5, 0.5};
    for (size_t i = 0; i < N(t); i++)
        TP_CHECK_NEAR(s[i].share, want[i], 1e-12);
    /* 3 GPUs: bounded 1, 0.8, 0.8, 0.4 round to 1, 1/2, 1/2, 1/3; of the two work-2
     * trials (they would finish last) the first steps up to a whole GPU, then
     * the last 1/6 lifts trial 3 to 1/2 */
    o.capacity = 3;
    TP_CHECK_NEAR(tp__fluid_shares(t, N(t), &o, s), 3, 1e-12);
    double want3[] = {1, 1, 0.5, 0.5};
    for (size_t i = 0; i < N(t); i++)
        TP_CHECK_NEAR(s[i].share, want3[i], 1e-12);
}

TP_TEST(test_fluid_unmeasured_step_time_takes_the_groups_mean) {
    /* trial 1 has no step time yet: the mean of the measured ones (2) */
    tp_fluid_trial_t t[] = {T(0, 3, 4, 0, 8), T(1, NAN, 4, 0, 8), T(2, 1, 4, 0, 8)};
    tp_fluid_opts_t o = {.capacity = 6, .min = 0.5, .max = 8, .pack_max = 2};
    tp_fluid_share_t s[N(t)];
    tp__fluid_shares(t, N(t), &o, s);
    TP_CHECK_NEAR(s[1].work, 8, 1e-12);
    TP_CHECK_NEAR(s[0].share, 3, 1e-12);
    TP_CHECK_NEAR(s[1].share, 2, 1e-12);
    TP_CHECK_NEAR(s[2].share, 1, 1e-12);
}

TP_TEST(test_fluid_more_trials_than_room_take_the_min_and_wait) {
    /* 10 trials, 1 GPU, min 1/4: 2.5 GPUs asked at the least; the sum says so */
    tp_fluid_trial_t t[10];
    for (int i = 0; i < 10; i++)
        t[i] = T(i, 1, 1 + i, 0, 1);
    tp_fluid_opts_t o = {.capacity = 1, .min = 0.25, .max = 1, .pack_max = 4};
    tp_fluid_share_t s[10];
    TP_CHECK_NEAR(tp__fluid_shares(t, 10, &o, s), 2.5, 1e-12);
    for (int i = 0; i < 10; i++)
        TP_CHECK_NEAR(s[i].share, 0.25, 1e-12);
}

TP_TEST(test_fluid_done_trials_get_nothing_and_the_rest_grow) {
    /* dynamic: trial 0 ended; the other two share all 4 GPUs by their work */
    tp_fluid_trial_t t[] = {T(0, 1, 0, 0, 4), T(1, 1, 3, 0, 4), T(2, 1, 1, 0, 4)};
    tp_fluid_opts_t o = {.capacity = 4, .min = 0.25, .max = 4, .pack_max = 4};
    tp_fluid_share_t s[N(t)];
    TP_CHECK_NEAR(tp__fluid_shares(t, N(t), &o, s), 4, 1e-12);
    TP_CHECK_NEAR(s[0].share, 0, 1e-12);
    TP_CHECK_STR(s[0].why, "no work left");
    TP_CHECK_NEAR(s[1].share, 3, 1e-12);
    TP_CHECK_NEAR(s[2].share, 1, 1e-12);
}

TP_TEST(test_fluid_ladder_lists_fractions_then_whole_gpus) {
    tp_fluid_trial_t t = T(0, 1, 1, 5000, 3);
    tp_fluid_opts_t o = {.capacity = 8, .pack_max = 4, .gpu_memory_mib = 16000};
    double v[TP_FLUID_MAX_LADDER];
    size_t n = tp__fluid_ladder(&t, &o, v, TP_FLUID_MAX_LADDER);
    /* 4 x 5000 > 16000: no 1/4 */
    TP_REQUIRE(n == 5);
    double want[] = {1.0 / 3, 0.5, 1, 2, 3};
    for (size_t i = 0; i < n; i++)
        TP_CHECK_NEAR(v[i], want[i], 1e-12);
    o.capacity = 2; /* never more whole GPUs than the group has */
    TP_CHECK_INT(tp__fluid_ladder(&t, &o, v, TP_FLUID_MAX_LADDER), 4);
    TP_CHECK_STR(tp__fluid_mode_name(TP_FLUID_DYNAMIC), "dynamic");
}

TP_TEST(test_fluid_served_curve_holds_its_last_value_past_four) {
    /* the measured curve: C_1 = 1, rising to C_4, which serves every k > 4 */
    TP_CHECK_NEAR(tp__fluid_served(NULL, 0), 1, 1e-12);
    TP_CHECK_NEAR(tp__fluid_served(NULL, 1), 1, 1e-12);
    TP_CHECK(tp__fluid_served(NULL, 2) > 1);
    TP_CHECK(tp__fluid_served(NULL, 3) > tp__fluid_served(NULL, 2));
    TP_CHECK(tp__fluid_served(NULL, 4) > tp__fluid_served(NULL, 3));
    TP_CHECK_NEAR(tp__fluid_served(NULL, 9), tp__fluid_served(NULL, 4), 1e-12);
    static const double mine[4] = {1, 1.5, 2, 2.5};
    TP_CHECK_NEAR(tp__fluid_served(mine, 2), 1.5, 1e-12);
    TP_CHECK_NEAR(tp__fluid_served(mine, 7), 2.5, 1e-12);
}

int main(void) {
    return tp_test_main();
}
