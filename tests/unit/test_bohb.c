/* Unit tests for the bohb sampler, pinned to Falkner et al. 2018, alg. 2:
 * below N_min + 2 results at every budget it is the random searcher; with
 * enough results it models the largest budget that has them; a fraction
 * rho = 1/3 of its proposals stays random. */
#include <errno.h>
#include <stdlib.h>

#include "search/scheduler.h"
#include "tp_test.h"

static void add_real(tp_space_t *sp, const char *name, double lo, double hi) {
    tp_param_t p = {.name = tp__strdup(name), .kind = TP_DOM_UNIFORM, .lo = lo, .hi = hi};
    tp__space_add(sp, &p);
}

/* The space x, y uniform over [0, 1] into sp (initialized here). */
static void xy_space(tp_space_t *sp) {
    tp__space_init(sp);
    add_real(sp, "x", 0, 1);
    add_real(sp, "y", 0, 1);
}

static double num(const json_t *cfg, const char *name) {
    return json_number_value(json_object_get(cfg, name));
}

static json_t *point(double x, double y) {
    return json_pack("{s:f, s:f}", "x", x, "y", y);
}

/* Told results at budget b: n configurations at (x, 0.5), x spread over
 * [0, 1], whose value is the distance of x to `good`; trial numbers from
 * first. */
static void plant(tp_searcher_t *s, uint64_t first, size_t n, double b, double good) {
    for (size_t k = 0; k < n; k++) {
        double x = (double)(k + 1) / (double)(n + 1);
        json_t *c = point(x, 0.5);
        tp__searcher_tell(s, first + k, c, fabs(x - good), b, 0);
        json_decref(c);
    }
}

static tp_searcher_t *make(const tp_space_t *sp, const char *algo, uint64_t seed) {
    tp_search_cfg_t cfg = {.algorithm = algo, .seed = seed};
    return tp__searcher_new(sp, &cfg, 0, NULL);
}

/* How many of asks [from, from + n) are the random searcher's draw for the
 * same (seed, index). */
static size_t same_as_random(tp_searcher_t *s, const tp_space_t *sp, uint64_t seed, uint64_t from,
                             size_t n) {
    tp_searcher_t *r = make(sp, "random", seed);
    size_t same = 0;
    for (uint64_t i = from; i < from + n; i++) {
        json_t *a = NULL, *b = NULL;
        if (s->ops->ask(s, i, 0, &a) == 1 && r->ops->ask(r, i, 0, &b) == 1)
            same += json_equal(a, b) != 0; /* a failed ask counts as not the same */
        json_decref(a), json_decref(b);
    }
    tp__searcher_free(r);
    return same;
}

TP_TEST(test_bohb_below_n_min_at_every_budget_is_the_random_searcher) {
    tp_space_t sp;
    tp__space_init(&sp);
    add_real(&sp, "x", 0, 1);
    add_real(&sp, "y", 0, 1); /* d = 2: N_min = 3, a model needs 5 results at one budget */
    tp_searcher_t *s = make(&sp, "bohb", 7);
    /* 4 results at each of three budgets: 12 in all, never 5 at one */
    plant(s, 0, 4, 1, 0.2);
    plant(s, 4, 4, 3, 0.2);
    plant(s, 8, 4, 9, 0.2);
    TP_CHECK_INT(same_as_random(s, &sp, 7, 12, 200), 200);
    tp__searcher_free(s);
    tp__space_free(&sp);
}

/* Asks 100 .. 100 + n: how many propose x > 0.7 (*high) and x < 0.3 (*low).
 * Each asked trial is then told failed at budgets 1 and 9, so it is pending
 * in neither model and every ask sees the same models. Returns the asks
 * that gave no configuration (0). */
static size_t count_x(tp_searcher_t *s, size_t n, size_t *high, size_t *low) {
    size_t none = 0;
    *high = *low = 0;
    for (uint64_t i = 100; i < 100 + n; i++) {
        json_t *c = NULL;
        if (s->ops->ask(s, i, 0, &c) != 1) {
            none++;
            continue;
        }
        *high += num(c, "x") > 0.7;
        *low += num(c, "x") < 0.3;
        json_decref(c);
        tp__searcher_tell(s, i, NULL, NAN, 1, 0);
        tp__searcher_tell(s, i, NULL, NAN, 9, 0);
    }
    return none;
}

TP_TEST(test_bohb_models_the_largest_budget_with_n_min_plus_2_results) {
    tp_space_t sp;
    xy_space(&sp);
    tp_searcher_t *s = make(&sp, "bohb", 3);
    plant(s, 0, 60, 1, 0.1); /* many at budget 1, good near x = 0.1 */
    plant(s, 60, 5, 9, 0.9); /* N_min + 2 = 5 at budget 9, good near x = 0.9 */
    size_t high = 0, low = 0, n = 600;
    TP_CHECK_INT(count_x(s, n, &high, &low), 0);
    printf("  x > 0.7: %zu, x < 0.3: %zu of %zu proposals\n", high, low, n);
    /* random alone puts 30% in each; the budget-9 model pulls 2/3 of them high */
    TP_CHECK(high > n / 2);
    TP_CHECK(low < n / 4);
    /* one result short of 5 at budget 9: back to budget 1's model (low x) */
    tp_searcher_t *t = make(&sp, "bohb", 3);
    plant(t, 0, 60, 1, 0.1);
    plant(t, 60, 4, 9, 0.9);
    TP_CHECK_INT(count_x(t, n, &high, &low), 0);
    printf("  4 at budget 9: x > 0.7: %zu, x < 0.3: %zu of %zu proposals\n", high, low, n);
    TP_CHECK(low > n / 2);
    TP_CHECK(high < n / 4);
    tp__searcher_free(t);
    tp__searcher_free(s);
    tp__space_free(&sp);
}

TP_TEST(test_bohb_keeps_a_third_of_its_proposals_random) {
    tp_space_t sp;
    xy_space(&sp);
    tp_searcher_t *s = make(&sp, "bohb", 11);
    plant(s, 0, 30, 3, 0.5);
    size_t n = 3000, same = same_as_random(s, &sp, 11, 1000, n);
    printf("  %zu of %zu proposals are the random draw (rho = 1/3)\n", same, n);
    TP_CHECK(same > (size_t)(0.30 * (double)n) && same < (size_t)(0.37 * (double)n));
    tp__searcher_free(s);
    tp__space_free(&sp);
}

/* The largest number of configs[0..n) within 0.02 of one of them in every
 * coordinate (x, y). */
static size_t largest_clump(json_t *const *configs, size_t n) {
    size_t most = 0;
    for (size_t a = 0; a < n; a++) {
        size_t near = 0;
        for (size_t b = 0; b < n; b++)
            near += fabs(num(configs[a], "x") - num(configs[b], "x")) < 0.02 &&
                    fabs(num(configs[a], "y") - num(configs[b], "y")) < 0.02;
        if (near > most) most = near;
    }
    return most;
}

/* 12 results at budget 27 (trials 0..11) spread over the square, the best
 * near (0.3, 0.6). */
static void plant_grid(tp_searcher_t *s) {
    for (uint64_t k = 0; k < 12; k++) {
        double x = (double)((k * 5) % 12 + 0.5) / 12, y = (double)((k * 7) % 12 + 0.5) / 12;
        json_t *c = point(x, y);
        tp__searcher_tell(s, k, c, fabs(x - 0.3) + fabs(y - 0.6), 27, 0);
        json_decref(c);
    }
}

/* Hyperband hands out a bracket's first rung with no result at the modelled
 * budget in between (Li et al. 2017: n configurations, then successive
 * halving among them), so one frozen model makes them all. They must be n
 * different configurations, as the paper's sampled KDE makes them, not
 * copies of its one favourite: each model-made one stays pending in the
 * model's "above" group, so the next lands elsewhere. */
TP_TEST(test_bohb_a_bracket_drawn_from_one_frozen_model_is_not_copies_of_one) {
    tp_space_t sp;
    xy_space(&sp);
    tp_searcher_t *s = make(&sp, "bohb", 4);
    plant_grid(s);
    tp_searcher_t *r = make(&sp, "random", 4);
    json_t *made[27];
    size_t n = 0;
    for (uint64_t i = 12; i < 12 + 27; i++) { /* one bracket of 27, no result between */
        json_t *c = NULL, *rc = NULL;
        TP_CHECK_INT(s->ops->ask(s, i, 0, &c), 1);
        TP_CHECK_INT(r->ops->ask(r, i, 0, &rc), 1);
        if (json_equal(c, rc)) /* the random third: not the model's */
            json_decref(c);
        else
            made[n++] = c;
        json_decref(rc);
    }
    size_t clump = largest_clump(made, n);
    printf("  %zu of 27 made by the model, at most %zu of them within 0.02 of one\n", n, clump);
    TP_CHECK(n >= 12);
    TP_CHECK(clump <= 3);
    for (size_t k = 0; k < n; k++)
        json_decref(made[k]);
    tp__searcher_free(r);
    tp__searcher_free(s);
    tp__space_free(&sp);
}

/* The pending proposals last until the budget's next result, and no
 * longer: after it, the model is the one a searcher that never asked them
 * fits (a trial stopped before the budget does not lie there for ever). */
TP_TEST(test_bohb_forgets_its_pending_proposals_at_the_budgets_next_result) {
    tp_space_t sp;
    xy_space(&sp);
    tp_searcher_t *s = make(&sp, "bohb", 4), *fresh = make(&sp, "bohb", 4);
    plant_grid(s);
    plant_grid(fresh);
    for (uint64_t i = 12; i < 12 + 27; i++) { /* pending in s only */
        json_t *c = NULL;
        TP_CHECK_INT(s->ops->ask(s, i, 0, &c), 1);
        json_decref(c);
    }
    json_t *c = point(0.31, 0.62); /* budget 27's next result, told to both */
    tp__searcher_tell(s, 39, c, 0.03, 27, 0);
    tp__searcher_tell(fresh, 39, c, 0.03, 27, 0);
    json_decref(c);
    size_t same = 0;
    for (uint64_t i = 40; i < 70; i++) {
        json_t *a = NULL, *b = NULL;
        TP_CHECK_INT(s->ops->ask(s, i, 0, &a), 1);
        TP_CHECK_INT(fresh->ops->ask(fresh, i, 0, &b), 1);
        same += json_equal(a, b) != 0;
        json_decref(a), json_decref(b);
    }
    TP_CHECK_INT(same, 30);
    tp__searcher_free(fresh);
    tp__searcher_free(s);
    tp__space_free(&sp);
}

/* Asks and results replayed in the same order give the same proposals
 * (how a resumed run rebuilds it). */
static json_t *scripted(const tp_space_t *sp) {
    tp_searcher_t *s = make(sp, "bohb", 5);
    json_t *all = json_array();
    for (uint64_t i = 0; i < 60; i++) {
        json_t *c = NULL;
        if (s->ops->ask(s, i, 0, &c) != 1) break; /* a shorter list: the replay check fails */
        json_array_append(all, c);
        double v = fabs(num(c, "x") - 0.3) + fabs(num(c, "y") - 0.6);
        tp__searcher_tell(s, i, c, v, 1, 0);
        if (i % 3 == 0) tp__searcher_tell(s, i, NULL, v / 2, 3, 0);
        json_decref(c);
    }
    tp__searcher_free(s);
    return all;
}

TP_TEST(test_bohb_replays_the_same_proposals) {
    tp_space_t sp;
    xy_space(&sp);
    json_t *a = scripted(&sp), *b = scripted(&sp);
    TP_CHECK(json_equal(a, b));
    json_decref(a), json_decref(b);
    tp__space_free(&sp);
}

/* Inside ASHA at concurrency 4 (asks while jobs run): every trial gets a
 * configuration and the search ends. */
TP_TEST(test_bohb_runs_inside_asha_with_jobs_in_flight) {
    tp_space_t sp;
    xy_space(&sp);
    tp_scheduler_cfg_t cfg = {.scheduler = "asha",
                              .sampler = {.algorithm = "bohb", .trials = 60, .seed = 2},
                              .budget = {.name = "epochs", .min = 1, .max = 27, .eta = 3}};
    tp_scheduler_t *s = tp__scheduler_new(&sp, &cfg, NULL);
    TP_CHECK(s != NULL);
    json_t *configs = json_object();
    tp_job_t run[4];
    size_t nrun = 0, jobs = 0;
    for (;;) {
        tp_job_t j;
        int rc = nrun < 4 ? s->ops->next(s, 0, &j) : -EAGAIN;
        if (rc == 1) {
            if (j.is_new) {
                char k[32];
                snprintf(k, sizeof k, "%lld", (long long)j.trial);
                json_object_set_new(configs, k, j.config);
            }
            run[nrun++] = j;
            continue;
        }
        if (rc == 0 && nrun == 0) break;
        TP_CHECK(nrun > 0);
        if (nrun == 0) break;
        tp_job_t done = run[0]; /* the oldest ends */
        memmove(run, run + 1, --nrun * sizeof *run);
        char k[32];
        snprintf(k, sizeof k, "%lld", (long long)done.trial);
        const json_t *c = json_object_get(configs, k);
        double v = fabs(num(c, "x") - 0.3) / done.budget;
        s->ops->result(s, done.trial, done.rung, 1, v, 0);
        jobs++;
    }
    TP_CHECK_INT((long long)json_object_size(configs), 60);
    TP_CHECK(jobs > 60);
    json_decref(configs);
    tp__scheduler_free(s);
    tp__space_free(&sp);
}

TP_TEST(test_bohb_is_listed_among_the_searchers) {
    int found = 0;
    for (size_t i = 0; tp__searcher_names[i]; i++)
        found += strcmp(tp__searcher_names[i], "bohb") == 0;
    TP_CHECK_INT(found, 1);
}

int main(void) {
    return tp_test_main();
}
