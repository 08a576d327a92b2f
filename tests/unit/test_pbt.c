/* Unit tests for scheduler pbt: generations at each perturbation interval,
 * Ray Tune's quantiles, truncation selection from the top into the bottom,
 * explore by factors (clipped, integers rounded) or resampling, catch-up of
 * late trials, determinism. */
#include <errno.h>
#include <math.h>
#include <stdlib.h>

#include "search/scheduler.h"
#include "tp_test.h"

/* x uniform [0, 1]; n int [1, 10]; act a choice. */
static void build_space(tp_space_t *sp) {
    tp__space_init(sp);
    tp_param_t x = {.name = tp__strdup("x"), .kind = TP_DOM_UNIFORM, .lo = 0, .hi = 1};
    tp__space_add(sp, &x);
    tp_param_t n = {.name = tp__strdup("n"), .kind = TP_DOM_INT, .lo = 1, .hi = 10};
    tp__space_add(sp, &n);
    tp_param_t a = {.name = tp__strdup("act"), .kind = TP_DOM_CHOICE, .nvalues = 2};
    a.values = tp__xcalloc(2, sizeof *a.values);
    a.values[0] = json_string("relu");
    a.values[1] = json_string("tanh");
    tp__space_add(sp, &a);
}

typedef struct run {
    tp_space_t sp;
    tp_scheduler_t *s;
    tp_pbt_explore_t ex[3];
} run_t;

/* pbt over sp with population n, interval 2, max `max`; explore x by
 * factors 0.8, 1.2 and n by factor 1.5 (no resampling) unless ex is given. */
static int make(run_t *r, uint64_t n, double max, double quantile, int maximize, uint64_t seed,
                const tp_pbt_explore_t *ex, size_t nex) {
    build_space(&r->sp);
    if (!ex) {
        r->ex[0] = (tp_pbt_explore_t){.param = "x", .factors = {0.8, 1.2}, .nfactors = 2};
        r->ex[1] = (tp_pbt_explore_t){.param = "n", .factors = {1.5}, .nfactors = 1};
        ex = r->ex;
        nex = 2;
    }
    tp_scheduler_cfg_t cfg = {
        .scheduler = "pbt",
        .sampler = {.algorithm = "random", .trials = n, .seed = seed},
        .budget = {.name = "epochs", .min = 1, .max = max},
        .maximize = maximize,
        .pbt = {.interval = 2, .quantile = quantile, .explore = ex, .nexplore = nex}};
    tp_error_t err = {0};
    r->s = tp__scheduler_new(&r->sp, &cfg, &err);
    if (!r->s) fprintf(stderr, "  scheduler_new: %s\n", err.msg);
    return r->s ? 0 : -1;
}

static void drop(run_t *r) {
    tp__scheduler_free(r->s);
    tp__space_free(&r->sp);
}

/* Every job next() hands out until it waits or ends, into jobs[] (configs kept). */
static size_t take_jobs(tp_scheduler_t *s, tp_job_t *jobs, size_t cap, int *rc) {
    size_t n = 0;
    for (;;) {
        tp_job_t j;
        memset(&j, 0, sizeof j);
        *rc = s->ops->next(s, 0, &j);
        if (*rc != 1) return n;
        if (n < cap) jobs[n++] = j;
    }
}

static void free_jobs(tp_job_t *jobs, size_t n) {
    for (size_t i = 0; i < n; i++)
        json_decref(jobs[i].config);
}

TP_TEST(test_a_population_starts_at_the_first_interval_then_waits_for_all) {
    run_t r;
    TP_REQUIRE(make(&r, 4, 6, 0, 1, 1, NULL, 0) == 0);
    tp_job_t jobs[16];
    int rc;
    size_t n = take_jobs(r.s, jobs, 16, &rc);
    TP_CHECK_INT(n, 4);
    TP_CHECK_INT(rc, -EAGAIN);
    for (size_t i = 0; i < n; i++) {
        TP_CHECK(jobs[i].is_new && !jobs[i].exploit);
        TP_CHECK_INT(jobs[i].trial, (int64_t)i);
        TP_CHECK_INT(jobs[i].rung, 0);
        TP_CHECK(jobs[i].budget == 2);
    }
    free_jobs(jobs, n);
    TP_CHECK_INT(r.s->ops->total(r.s), 4);
    /* three of four ended: the generation waits for the fourth */
    for (int t = 0; t < 3; t++)
        r.s->ops->result(r.s, t, 0, 1, t, 1);
    n = take_jobs(r.s, jobs, 16, &rc);
    TP_CHECK_INT(n, 0);
    TP_CHECK_INT(rc, -EAGAIN);
    TP_CHECK(!r.s->ops->final(r.s, 0, 0));
    drop(&r);
}

TP_TEST(test_the_bottom_quantile_exploits_the_top_and_the_rest_go_on_in_order) {
    run_t r;
    TP_REQUIRE(make(&r, 8, 6, 0, 1, 3, NULL, 0) == 0); /* quantile 0: the default 0.25 */
    tp_job_t jobs[16], gen[16];
    int rc;
    size_t n = take_jobs(r.s, jobs, 16, &rc);
    TP_REQUIRE(n == 8);
    json_t *cfg[8];
    for (int t = 0; t < 8; t++) {
        cfg[t] = json_incref(jobs[t].config);
        r.s->ops->result(r.s, t, 0, 1, 10.0 * t, 1); /* trial 7 best, 0 worst */
    }
    free_jobs(jobs, n);
    n = take_jobs(r.s, gen, 16, &rc);
    TP_REQUIRE(n == 8);
    TP_CHECK_INT(rc, -EAGAIN);
    /* ceil(8 x 0.25) = 2: trials 0 then 1 (worst first) exploit trial 6 or 7 */
    for (int i = 0; i < 2; i++) {
        const tp_job_t *j = &gen[i];
        TP_CHECK_INT(j->trial, i);
        TP_CHECK(j->exploit && !j->is_new);
        TP_CHECK(j->donor == 6 || j->donor == 7);
        TP_CHECK(j->from == 2);
        TP_CHECK_INT(j->segment, 1);
        TP_CHECK_INT(j->rung, 1);
        TP_CHECK(j->budget == 4);
        TP_CHECK_CONTAINS(j->why, "exploit at 2");
        /* explore: x times 0.8 or 1.2 (clipped to 1), n times 1.5 rounded and clipped to 10,
         * act the donor's */
        const json_t *d = cfg[j->donor];
        double dx = json_real_value(json_object_get(d, "x"));
        double nx = json_real_value(json_object_get(j->config, "x"));
        TP_CHECK(fabs(nx - fmin(1, dx * 0.8)) < 1e-12 || fabs(nx - fmin(1, dx * 1.2)) < 1e-12);
        json_int_t dn = json_integer_value(json_object_get(d, "n"));
        const json_t *nn = json_object_get(j->config, "n");
        TP_CHECK(json_is_integer(nn));
        TP_CHECK_INT(json_integer_value(nn), llround(fmin(10, (double)dn * 1.5)));
        TP_CHECK(json_equal(json_object_get(j->config, "act"), json_object_get(d, "act")));
    }
    for (int i = 2; i < 8; i++) { /* the others, in id order, unchanged */
        TP_CHECK_INT(gen[i].trial, i);
        TP_CHECK(!gen[i].exploit && !gen[i].is_new && gen[i].config == NULL);
        TP_CHECK_INT(gen[i].rung, 1);
        TP_CHECK(gen[i].budget == 4);
        TP_CHECK_CONTAINS(gen[i].why, "goes on at 2");
    }
    /* the last generation (4 -> max 6), then the end */
    for (int t = 0; t < 8; t++)
        r.s->ops->result(r.s, t, 1, 1, t == 0 ? 100 : t, 2); /* trial 0 now best */
    free_jobs(gen, n);
    n = take_jobs(r.s, gen, 16, &rc);
    TP_REQUIRE(n == 8);
    for (int i = 0; i < 2; i++) { /* worst: 1 then 2; donors 0 or 7 */
        TP_CHECK_INT(gen[i].trial, i + 1);
        TP_CHECK(gen[i].donor == 0 || gen[i].donor == 7);
        TP_CHECK(gen[i].budget == 6 && gen[i].rung == 2 && gen[i].from == 4);
    }
    TP_CHECK_INT(gen[1].segment, 1); /* trial 2: its first exploit */
    TP_CHECK_INT(gen[0].segment, 2); /* trial 1: its second */
    free_jobs(gen, n);
    for (int t = 0; t < 8; t++) {
        TP_CHECK(!r.s->ops->final(r.s, t, 1));
        r.s->ops->result(r.s, t, 2, 1, t, 3);
        TP_CHECK(r.s->ops->final(r.s, t, 2));
    }
    n = take_jobs(r.s, gen, 16, &rc);
    TP_CHECK_INT(n, 0);
    TP_CHECK_INT(rc, 0);
    for (int t = 0; t < 8; t++)
        json_decref(cfg[t]);
    drop(&r);
}

/* How many exploit in the first generation of n trials at this quantile. */
static int exploits(uint64_t n, double quantile, int maximize, int64_t *first) {
    run_t r;
    if (make(&r, n, 6, quantile, maximize, 1, NULL, 0) != 0) return -1;
    tp_job_t jobs[64];
    int rc, e = 0;
    size_t k = take_jobs(r.s, jobs, 64, &rc);
    free_jobs(jobs, k);
    for (uint64_t t = 0; t < n; t++)
        r.s->ops->result(r.s, (int64_t)t, 0, 1, (double)t, 1);
    k = take_jobs(r.s, jobs, 64, &rc);
    for (size_t i = 0; i < k; i++)
        e += jobs[i].exploit;
    *first = k ? jobs[0].trial : -1;
    free_jobs(jobs, k);
    drop(&r);
    return e;
}

TP_TEST(test_quantiles_are_ray_tunes_ceil_of_n_q_at_most_half) {
    int64_t first;
    TP_CHECK_INT(exploits(1, 0.25, 1, &first), 0); /* one trial: nobody to copy */
    TP_CHECK_INT(exploits(2, 0.25, 1, &first), 1); /* ceil(0.5) = 1 <= 1 */
    TP_CHECK_INT(exploits(3, 0.25, 1, &first), 1); /* ceil(0.75) = 1 */
    TP_CHECK_INT(exploits(5, 0.25, 1, &first), 2); /* ceil(1.25) = 2 <= 2.5 */
    TP_CHECK_INT(exploits(8, 0.5, 1, &first), 4);  /* half exploits the other half */
    TP_CHECK_INT(exploits(5, 0.5, 1, &first), 2);  /* ceil(2.5) = 3 > 2.5: floor(5 / 2) */
    TP_CHECK_INT(exploits(10, 0.1, 1, &first), 1);
    /* the worst goes first: trial 0 when maximizing, the last when minimizing */
    TP_CHECK_INT(exploits(6, 0.25, 1, &first), 2);
    TP_CHECK_INT(first, 0);
    TP_CHECK_INT(exploits(6, 0.25, 0, &first), 2);
    TP_CHECK_INT(first, 5);
}

/* The first generation's jobs of a population of 6 under seed, as text. */
static char *generation_text(uint64_t seed) {
    run_t r;
    if (make(&r, 6, 6, 0.5, 1, seed, NULL, 0) != 0) return NULL;
    tp_job_t jobs[16];
    int rc;
    size_t k = take_jobs(r.s, jobs, 16, &rc);
    free_jobs(jobs, k);
    for (int t = 0; t < 6; t++)
        r.s->ops->result(r.s, t, 0, 1, t % 3, 1);
    k = take_jobs(r.s, jobs, 16, &rc);
    json_t *a = json_array();
    for (size_t i = 0; i < k; i++)
        json_array_append_new(a, json_pack("{s:I, s:I, s:O?, s:s}", "t", (json_int_t)jobs[i].trial,
                                           "d", (json_int_t)jobs[i].donor, "c", jobs[i].config, "w",
                                           jobs[i].why));
    free_jobs(jobs, k);
    char *text = json_dumps(a, JSON_COMPACT);
    json_decref(a);
    drop(&r);
    return text;
}

TP_TEST(test_the_same_calls_give_the_same_decisions_and_another_seed_others) {
    char *a = generation_text(11), *b = generation_text(11), *c = generation_text(12);
    TP_REQUIRE(a && b && c);
    TP_CHECK_STR(a, b);
    TP_CHECK(strcmp(a, c) != 0);
    free(a), free(b), free(c);
}

TP_TEST(test_resampling_draws_from_the_space_and_a_choice_resamples_only) {
    run_t r;
    tp_pbt_explore_t ex[] = {{.param = "act", .resample = 1},
                             {.param = "n", .resample = 1, .factors = {2}, .nfactors = 1}};
    TP_REQUIRE(make(&r, 20, 4, 0.5, 1, 5, ex, 2) == 0);
    tp_job_t jobs[32];
    int rc;
    size_t k = take_jobs(r.s, jobs, 32, &rc);
    free_jobs(jobs, k);
    for (int t = 0; t < 20; t++)
        r.s->ops->result(r.s, t, 0, 1, t, 1);
    k = take_jobs(r.s, jobs, 32, &rc);
    TP_REQUIRE(k == 20);
    int acts[2] = {0, 0}, odd = 0;
    for (size_t i = 0; i < 10; i++) {
        TP_REQUIRE(jobs[i].exploit);
        const char *act = json_string_value(json_object_get(jobs[i].config, "act"));
        json_int_t n = json_integer_value(json_object_get(jobs[i].config, "n"));
        TP_CHECK(act && (!strcmp(act, "relu") || !strcmp(act, "tanh")));
        acts[act && !strcmp(act, "tanh")]++;
        TP_CHECK(n >= 1 && n <= 10);
        odd += n % 2; /* resampled (probability 1), never the factor's doubling */
    }
    TP_CHECK(acts[0] > 0 && acts[1] > 0);
    TP_CHECK(odd > 0);
    free_jobs(jobs, k);
    drop(&r);
}

TP_TEST(test_a_failed_trial_leaves_the_population_and_late_trials_catch_up) {
    run_t r;
    TP_REQUIRE(make(&r, 3, 6, 0, 0, 1, NULL, 0) == 0);
    tp_job_t jobs[16];
    int rc;
    size_t k = take_jobs(r.s, jobs, 16, &rc);
    free_jobs(jobs, k);
    r.s->ops->result(r.s, 0, 0, 1, 1.0, 1);
    r.s->ops->result(r.s, 1, 0, 0, NAN, 1); /* failed: out */
    TP_CHECK(r.s->ops->final(r.s, 1, 0));
    r.s->ops->result(r.s, 2, 0, 1, 2.0, 1);
    k = take_jobs(r.s, jobs, 16, &rc);
    TP_REQUIRE(k == 2); /* N = 2: trial 2 (the worse, minimizing) exploits trial 0 */
    TP_CHECK(jobs[0].trial == 2 && jobs[0].exploit && jobs[0].donor == 0);
    TP_CHECK(jobs[1].trial == 0 && !jobs[1].exploit);
    free_jobs(jobs, k);
    /* the search is extended to 4: the new trial starts at once and catches up, the
     * others wait for it at 4 */
    tp__scheduler_set_trials(r.s, 4);
    r.s->ops->result(r.s, 2, 1, 1, 0.5, 2);
    r.s->ops->result(r.s, 0, 1, 1, 0.7, 2);
    k = take_jobs(r.s, jobs, 16, &rc);
    TP_REQUIRE(k == 1);
    TP_CHECK(jobs[0].trial == 3 && jobs[0].is_new && jobs[0].budget == 2);
    free_jobs(jobs, k);
    r.s->ops->result(r.s, 3, 0, 1, 9, 3);
    k = take_jobs(r.s, jobs, 16, &rc);
    TP_REQUIRE(k == 1);
    TP_CHECK(jobs[0].trial == 3 && !jobs[0].exploit && jobs[0].budget == 4);
    TP_CHECK_CONTAINS(jobs[0].why, "catches up");
    free_jobs(jobs, k);
    r.s->ops->result(r.s, 3, 1, 1, 9, 4);
    k = take_jobs(r.s, jobs, 16, &rc); /* 3 at 4: trial 3 (9, worst) exploits 2 (0.5) */
    TP_REQUIRE(k == 3);
    TP_CHECK(jobs[0].trial == 3 && jobs[0].exploit && jobs[0].donor == 2);
    TP_CHECK(jobs[0].budget == 6);
    free_jobs(jobs, k);
    drop(&r);
}

TP_TEST(test_settings_a_person_can_act_on) {
    run_t r;
    tp_pbt_explore_t bad[] = {{.param = "nope", .factors = {2}, .nfactors = 1}};
    TP_CHECK(make(&r, 4, 6, 0, 1, 1, bad, 1) < 0);
    tp__space_free(&r.sp);
    tp_pbt_explore_t choice[] = {{.param = "act", .factors = {2}, .nfactors = 1}};
    TP_CHECK(make(&r, 4, 6, 0, 1, 1, choice, 1) < 0);
    tp__space_free(&r.sp);
    TP_CHECK(make(&r, 0, 6, 0, 1, 1, NULL, 0) < 0); /* no bound on trials: no population */
    tp__space_free(&r.sp);
    TP_CHECK(make(&r, 4, 6, 0.75, 1, 1, NULL, 0) < 0);
    tp__space_free(&r.sp);
    tp_space_t sp;
    build_space(&sp);
    tp_scheduler_cfg_t cfg = {.scheduler = "pbt",
                              .sampler = {.algorithm = "random", .trials = 4},
                              .budget = {.name = "epochs", .min = 1, .max = 6}};
    tp_error_t err = {0};
    TP_CHECK(tp__scheduler_new(&sp, &cfg, &err) == NULL);
    TP_CHECK_CONTAINS(err.msg, "perturbation_interval");
    cfg.budget.name = NULL;
    cfg.pbt.interval = 2;
    TP_CHECK(tp__scheduler_new(&sp, &cfg, &err) == NULL);
    TP_CHECK_CONTAINS(err.msg, "scheduler pbt needs a budget");
    tp__space_free(&sp);
}

int main(void) {
    return tp_test_main();
}
