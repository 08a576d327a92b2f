/* run/profile: a profile measures training, not start-up. Scripted sample
 * streams (one a second, as the agent sends them) of a trial's start-up (a
 * CUDA context, memory growing, SM 0-5%) and its training (1200 MiB, SM
 * ~40%) go through tp__prof_add as placement feeds them; what it decides and
 * what tp__prof_result measures are checked. Pure: no clock, no run. */
#include <math.h>
#include <string.h>

#include "run/profile.h"
#include "tp_test.h"

#define STARTUP 6 /* seconds of start-up before training, one sample each */

/* Sample k of the script: start-up for STARTUP samples (300 MiB growing by
 * 150 a second, SM 0 or 5), then training at 1200 MiB and SM 38 or 42.
 * mps: the process is an MPS client: its own SM reads 0 and its GPU (busy
 * base% before it came) shows its work instead. */
static tp_prof_sample_t script(int k, int mps, double base) {
    int training = k >= STARTUP;
    double sm = training ? (k % 2 ? 38 : 42) : (k % 2 ? 5 : 0);
    tp_prof_sample_t s = {.at = 100.0 + k,
                          .mib = training ? 1200 : 300 + 150 * (uint64_t)k,
                          .sm = mps ? 0 : sm,
                          .busy = base + sm,
                          .base = base};
    return s;
}

typedef struct outcome {
    int done_at;     /* sample that finished the profile, -1: none */
    int extended_at; /* sample that said profile_time passed before training, -1: none */
    tp_prof_result_t m;
    tp_prof_how_t how;
} outcome_t;

/* Feed the script (with a report arriving as training starts, if reports)
 * until the profile is done or `last` samples passed; measure it. */
static outcome_t play(double profile_s, int reports, int mps, double base, int last) {
    tp_prof_t p;
    memset(&p, 0, sizeof p);
    outcome_t o = {.done_at = -1, .extended_at = -1};
    for (int k = 0; k < last && o.done_at < 0; k++) {
        tp_prof_sample_t s = script(k, mps, base);
        double reported = reports && k >= STARTUP ? 100.0 + STARTUP - 0.5 : 0;
        tp_prof_step_t step = tp__prof_add(&p, &s, reported, profile_s);
        if (step == TP_PROF_EXTEND) o.extended_at = k;
        if (step == TP_PROF_DONE) o.done_at = k;
    }
    tp__prof_result(&p, &o.m);
    o.how = p.how;
    tp__prof_reset(&p);
    return o;
}

TP_TEST(test_a_short_profile_waits_for_training_and_measures_it) {
    outcome_t o = play(3, 1, 0, 0, 200);
    TP_CHECK_INT(o.how, TP_PROF_REPORT);
    TP_CHECK_INT(o.extended_at, 3); /* 3 s after the first sample: still starting up */
    TP_CHECK_INT(o.done_at, STARTUP + 3);
    TP_CHECK_NEAR(o.m.waited_s, STARTUP, 1e-9);
    TP_CHECK(o.m.per_process);
    /* The training's share, not start-up's (which a 0.05 floor would have hidden). */
    TP_CHECK_NEAR(o.m.compute, 0.40, 0.02);
    TP_CHECK(o.m.samples >= TP_PROF_MIN_SAMPLES);
}

TP_TEST(test_profiles_of_3_and_30_seconds_agree_within_10_percent) {
    outcome_t a = play(3, 1, 0, 0, 200), b = play(30, 1, 0, 0, 200);
    TP_REQUIRE(a.done_at >= 0 && b.done_at >= 0);
    TP_CHECK_INT(b.extended_at, -1); /* training began within 30 s: nothing extended */
    TP_CHECK_INT(b.done_at, STARTUP + 30);
    TP_CHECK(fabs(a.m.compute - b.m.compute) <= 0.10 * b.m.compute);
}

TP_TEST(test_without_reports_settled_memory_and_sm_show_training) {
    outcome_t o = play(3, 0, 0, 0, 200);
    TP_CHECK_INT(o.how, TP_PROF_SETTLED);
    /* Training is seen once TP_PROF_SETTLE samples of it settled, from the last of them. */
    TP_CHECK_NEAR(o.m.waited_s, STARTUP + TP_PROF_SETTLE - 1, 1e-9);
    TP_CHECK_INT(o.done_at, STARTUP + TP_PROF_SETTLE - 1 + 3);
    TP_CHECK_NEAR(o.m.compute, 0.40, 0.02);
}

TP_TEST(test_a_trial_that_ends_in_start_up_is_measured_on_what_was_seen) {
    outcome_t o = play(3, 0, 0, 0, STARTUP);
    TP_CHECK_INT(o.done_at, -1);
    TP_CHECK_INT(o.how, TP_PROF_NOT_YET);
    TP_CHECK(o.m.samples > 0 && o.m.samples < STARTUP); /* those at >= half the peak */
    TP_CHECK(o.m.compute < 0.05);
}

TP_TEST(test_a_trial_never_seen_training_is_measured_after_the_longest_wait) {
    tp_prof_t p;
    memset(&p, 0, sizeof p);
    int done = -1;
    for (int k = 0; k < 1000 && done < 0; k++) {
        tp_prof_sample_t s = {.at = k, .mib = 500, .sm = 0}; /* a context, idle */
        if (tp__prof_add(&p, &s, 0, 3) == TP_PROF_DONE) done = k;
    }
    TP_CHECK_INT(done, (int)TP_PROF_WAIT_MIN_S);
    TP_CHECK_INT(p.how, TP_PROF_GAVE_UP);
    tp__prof_reset(&p);
}

TP_TEST(test_sm_still_rising_at_flat_memory_is_not_yet_training) {
    static const double sm[] = {2, 6, 12, 24, 40, 40, 41, 39};
    tp_prof_t p;
    memset(&p, 0, sizeof p);
    for (int k = 0; k < 8; k++) {
        tp_prof_sample_t s = {.at = k, .mib = 1200, .sm = sm[k]};
        tp__prof_add(&p, &s, 0, 30);
        if (k == 4) TP_CHECK_INT(p.how, TP_PROF_NOT_YET); /* 6, 12, 24, 40: ramping up */
    }
    TP_CHECK_INT(p.how, TP_PROF_SETTLED);
    TP_CHECK(p.s[p.from].sm >= 24);
    tp__prof_reset(&p);
}

TP_TEST(test_gpu_share_is_the_busy_share_over_the_base_split_among_profilers) {
    TP_CHECK_NEAR(tp__prof_gpu_share(70, 30, 1), 0.40, 1e-12);
    TP_CHECK_NEAR(tp__prof_gpu_share(80, 10, 2), 0.35, 1e-12);
    TP_CHECK_NEAR(tp__prof_gpu_share(40, NAN, 1), 0.40, 1e-12); /* no base known: none */
    TP_CHECK_NEAR(tp__prof_gpu_share(20, 30, 1), 0.0, 1e-12);   /* less busy than before */
    TP_CHECK_NEAR(tp__prof_gpu_share(40, 0, 0), 0.40, 1e-12);   /* no sharer: itself */
}

TP_TEST(test_an_mps_client_beside_others_is_measured_from_the_gpu) {
    /* Its own SM reads 0; the GPU was 30% busy with the trials already there. */
    outcome_t o = play(3, 1, 1, 30, 200);
    TP_CHECK_INT(o.how, TP_PROF_REPORT);
    TP_CHECK(!o.m.per_process);
    TP_CHECK_NEAR(o.m.compute, 0.40, 0.02);
    TP_CHECK_NEAR(o.m.base, 30, 1e-9);
}

TP_TEST(test_two_profilers_training_on_one_gpu_split_its_busy_share) {
    tp_prof_t a, b;
    memset(&a, 0, sizeof a);
    memset(&b, 0, sizeof b);
    for (int k = 0; k < 8; k++) {
        /* base 10%, each MPS client 35% of the GPU once training */
        int on = k >= 2;
        tp_prof_sample_t s = {.at = k, .mib = on ? 1000 : 400, .busy = on ? 80 : 12, .base = 10};
        tp__prof_add(&a, &s, 0, 3);
        tp__prof_add(&b, &s, 0, 3);
        int training = (a.how == TP_PROF_SETTLED) + (b.how == TP_PROF_SETTLED);
        a.s[a.n - 1].sharers = training + (a.how != TP_PROF_SETTLED);
        b.s[b.n - 1].sharers = training + (b.how != TP_PROF_SETTLED);
    }
    tp_prof_result_t ma, mb;
    tp__prof_result(&a, &ma);
    tp__prof_result(&b, &mb);
    TP_CHECK_INT(a.how, TP_PROF_SETTLED);
    TP_CHECK_INT(ma.sharers, 2);
    TP_CHECK_NEAR(ma.compute, 0.35, 1e-9);
    TP_CHECK_NEAR(mb.compute, 0.35, 1e-9);
    tp__prof_reset(&a);
    tp__prof_reset(&b);
}

int main(void) {
    return tp_test_main();
}
