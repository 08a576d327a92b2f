/* sim_groups: hand-computed makespans of successive-halving rungs, plain and
 * as Fluid trial groups, and the rung structure. */
#include <math.h>

#include "sim/sim_groups.h"
#include "tp_test.h"

static tp_groups_opts_t base(void) {
    return (tp_groups_opts_t){.n0 = 1,
                              .eta = 3,
                              .min_steps = 100,
                              .gpus = 4,
                              .gpu_memory_mib = 24576,
                              .reserve_mib = 512,
                              .pack_max = 4,
                              .serial = 0,
                              .restart_s = 10,
                              .overhead = 0.03,
                              .min = 0.25,
                              .max = 4,
                              .gpus_cap = 4,
                              .seed = 7};
}

static double makespan(tp_groups_opts_t o, tp_groups_result_t *r) {
    tp_error_t err = {0};
    if (tp__groups_sim(&o, r, &err) != 0) return NAN;
    return r->makespan_s;
}

TP_TEST(test_groups_lone_trial_takes_every_gpu_of_its_group) {
    /* one trial, 4 GPUs, linear scaling: plain runs it on one GPU (restart
     * + S), Fluid on four (restart + S / 4) */
    tp_groups_opts_t o = base();
    tp_groups_result_t r;
    o.plain = TP_GROUPS_ONE_PER_GPU;
    double plain = makespan(o, &r);
    o.mode = TP_FLUID_STATIC;
    double fluid = makespan(o, &r);
    TP_CHECK_NEAR(plain - 10, 4 * (fluid - 10), 1e-6);
    TP_CHECK_INT(r.jobs, 1);
    /* a trial that does not scale (serial fraction 1) gains nothing */
    o.serial = 1;
    TP_CHECK_NEAR(makespan(o, &r), plain, 1e-6);
    /* nor does one held to a single GPU (no elastic resize) */
    o.serial = 0, o.gpus_cap = 1;
    TP_CHECK_NEAR(makespan(o, &r), plain, 1e-6);
}

TP_TEST(test_groups_rungs_keep_the_top_third) {
    tp_groups_opts_t o = base();
    o.n0 = 9;
    tp_groups_result_t r;
    o.plain = TP_GROUPS_ONE_PER_GPU;
    TP_REQUIRE(!isnan(makespan(o, &r)));
    TP_CHECK_INT(r.nrungs, 3); /* 9, 3, 1 */
    TP_CHECK_INT(r.jobs, 13);
    TP_CHECK_NEAR(r.rung_s[0] + r.rung_s[1] + r.rung_s[2], r.makespan_s, 1e-6);
    TP_CHECK_INT(r.resizes, 0);
}

TP_TEST(test_groups_fluid_beats_plain_on_a_rung_tail) {
    /* 27 configurations on 8 GPUs, good scaling: the rungs of 3 and 1 leave
     * GPUs idle in a plain run; Fluid gives them to the trials left */
    tp_groups_opts_t o = base();
    o.n0 = 27, o.gpus = 8, o.max = 8, o.gpus_cap = 8, o.serial = 0.05;
    tp_groups_result_t r;
    double plain = makespan(o, &r);
    o.mode = TP_FLUID_DYNAMIC;
    double fluid = makespan(o, &r);
    TP_CHECK(fluid < 0.7 * plain);
    TP_CHECK(r.resizes > 0); /* dynamic: shares follow the ends */
    o.mode = TP_FLUID_STATIC;
    makespan(o, &r);
    TP_CHECK_INT(r.resizes, 0);
}

TP_TEST(test_groups_dynamic_restarts_only_for_more_whole_gpus_as_the_run_does) {
    /* 27 configurations on 4 GPUs. Static: never a restart, the jobs are the
     * rungs' 27 + 9 + 3 + 1. Dynamic, held to one GPU: no restart either (a
     * fraction has no MPS thread limit: it already takes what the others on
     * its GPU leave); elastic, the trials left in a rung grow to more GPUs
     * by a restart when it pays */
    tp_groups_opts_t o = base();
    o.n0 = 27, o.serial = 0.2, o.mode = TP_FLUID_STATIC, o.gpus_cap = 1;
    tp_groups_result_t r;
    TP_REQUIRE(!isnan(makespan(o, &r)));
    TP_CHECK_INT(r.resizes, 0);
    TP_CHECK_INT(r.jobs, 40);
    o.mode = TP_FLUID_DYNAMIC;
    double held = makespan(o, &r);
    TP_CHECK_INT(r.resizes, 0);
    TP_CHECK_INT(r.jobs, 40);
    o.gpus_cap = 4;
    TP_CHECK(makespan(o, &r) < held);
    TP_CHECK(r.resizes > 0);
    TP_CHECK_INT(r.jobs, 40 + r.resizes); /* a resize is a job start */
    o.restart_s = 1e6;                    /* a restart that never pays: none */
    TP_REQUIRE(!isnan(makespan(o, &r)));
    TP_CHECK_INT(r.resizes, 0);
}

TP_TEST(test_groups_bound_is_exact_for_a_lone_trial) {
    /* one trial on all 4 GPUs is the best any placement does: restart +
     * steps x step (f + (1 - f) / 4), whatever its scaling */
    tp_groups_opts_t o = base();
    o.mode = TP_FLUID_STATIC;
    tp_groups_result_t r;
    tp_error_t err = {0};
    double bound;
    for (double f = 0; f <= 1.0; f += 0.5) {
        o.serial = f;
        TP_REQUIRE(tp__groups_bound(&o, &bound, &err) == 0);
        TP_CHECK_NEAR(bound, makespan(o, &r), 1e-6);
    }
}

TP_TEST(test_groups_bound_is_below_every_placement) {
    /* 27 configurations on 4 GPUs, serial fraction 0.5 (the bench's hard
     * row): plain, static and dynamic Fluid all take at least the bound */
    tp_groups_opts_t o = base();
    o.n0 = 27, o.serial = 0.5;
    tp_groups_result_t r;
    tp_error_t err = {0};
    double bound;
    TP_REQUIRE(tp__groups_bound(&o, &bound, &err) == 0);
    TP_CHECK(bound > 0);
    static const tp_fluid_mode_t modes[] = {TP_FLUID_OFF, TP_FLUID_STATIC, TP_FLUID_DYNAMIC};
    for (size_t i = 0; i < TP_ARRAY_LEN(modes); i++) {
        o.mode = modes[i];
        TP_CHECK(makespan(o, &r) >= bound);
    }
    /* the bound needs no placement: bad options are refused as the sim's */
    o.eta = 1;
    TP_CHECK_INT(tp__groups_bound(&o, &bound, &err), -EINVAL);
}

TP_TEST(test_groups_fractions_share_what_their_gpu_serves) {
    /* one rung of 4 (compute 0.6-1.0 each) as fractions of one GPU, against
     * one GPU each. With no MPS overhead and a GPU that serves 4 busy
     * shares (never saturated), sharing costs nothing: the same makespan.
     * Saturating at D = 1 (the model before the H100's curve) is slower, the
     * measured curve (TP_FLUID_SERVED) in between. */
    tp_groups_opts_t o = base();
    o.n0 = 4, o.rungs = 1, o.overhead = 0, o.gpu_memory_mib = 65536;
    o.plain = TP_GROUPS_ONE_PER_GPU;
    tp_groups_result_t r;
    double apart = makespan(o, &r);
    o.mode = TP_FLUID_STATIC, o.gpus = 1, o.max = 1, o.gpus_cap = 1;
    double measured = makespan(o, &r);
    TP_CHECK_INT(r.jobs, 4);
    for (int k = 0; k < 4; k++)
        o.served[k] = 4;
    TP_CHECK_NEAR(makespan(o, &r), apart, 1e-6);
    for (int k = 0; k < 4; k++)
        o.served[k] = 1;
    double saturated = makespan(o, &r);
    TP_CHECK(apart < measured && measured < saturated);
    /* the bound holds under each: it counts the most a GPU serves */
    double bound, bound1;
    tp_error_t err = {0};
    TP_REQUIRE(tp__groups_bound(&o, &bound1, &err) == 0);
    TP_CHECK(bound1 <= saturated);
    memset(o.served, 0, sizeof o.served);
    TP_REQUIRE(tp__groups_bound(&o, &bound, &err) == 0);
    TP_CHECK(bound <= measured && bound < bound1);
    o.served[0] = 1, o.served[1] = 0.5;
    TP_CHECK_INT(tp__groups_sim(&o, &r, &err), -EINVAL);
    TP_CHECK(strstr(err.msg, "served[1]") != NULL);
    o.served[0] = 0, o.served[1] = 1.2; /* a curve given in part is refused, not ignored */
    TP_CHECK_INT(tp__groups_sim(&o, &r, &err), -EINVAL);
    TP_CHECK(strstr(err.msg, "served[0]") != NULL);
}

TP_TEST(test_groups_bad_options_are_refused) {
    tp_groups_opts_t o = base();
    o.eta = 1;
    tp_groups_result_t r;
    tp_error_t err = {0};
    TP_CHECK_INT(tp__groups_sim(&o, &r, &err), -EINVAL);
    TP_CHECK(strstr(err.msg, "eta > 1") != NULL);
}

int main(void) {
    return tp_test_main();
}
