/* Unit tests for the tpe searcher: it learns, it is deterministic, the
 * constant liar spreads parallel asks, and it stays inside the domains. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "search/search.h"
#include "tp_test.h"

static void add_real(tp_space_t *sp, const char *name, tp_domain_kind kind, double lo, double hi,
                     double q) {
    tp_param_t p = {.name = tp__strdup(name), .kind = kind, .lo = lo, .hi = hi, .q = q};
    tp__space_add(sp, &p);
}

static void add_choice(tp_space_t *sp, const char *name, const char *const *vals, size_t n) {
    tp_param_t p = {.name = tp__strdup(name), .kind = TP_DOM_CHOICE, .nvalues = n};
    p.values = tp__xcalloc(n, sizeof *p.values);
    for (size_t i = 0; i < n; i++)
        p.values[i] = json_string(vals[i]);
    tp__space_add(sp, &p);
}

static double num(const json_t *cfg, const char *name) {
    return json_number_value(json_object_get(cfg, name));
}

/* (x - 3)^2 + (y + 2)^2 on [-10, 10]^2, minimized. */
static double quadratic(const json_t *cfg) {
    double x = num(cfg, "x") - 3, y = num(cfg, "y") + 2;
    return x * x + y * y;
}

static int cmp_dbl(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* Median distance to the optimum of the proposals after the startup
 * trials, over `seeds` sequential runs of `n` trials each. */
static double median_distance(const char *algo, int seeds, int n) {
    tp_space_t sp;
    tp__space_init(&sp);
    add_real(&sp, "x", TP_DOM_UNIFORM, -10, 10, 0);
    add_real(&sp, "y", TP_DOM_UNIFORM, -10, 10, 0);
    double *d = tp__xmalloc((size_t)(seeds * n) * sizeof *d);
    size_t nd = 0;
    for (int seed = 1; seed <= seeds; seed++) {
        tp_search_cfg_t cfg = {.algorithm = algo, .trials = (uint64_t)n, .seed = (uint64_t)seed};
        tp_searcher_t *s = tp__searcher_new(&sp, &cfg, 0, NULL);
        for (int i = 0; i < n; i++) {
            json_t *c = NULL;
            if (s->ops->ask(s, (uint64_t)i, 0, &c) != 1) break;
            double v = quadratic(c);
            if (i >= 10) d[nd++] = sqrt(v);
            s->ops->tell(s, (uint64_t)i, c, v, 0);
            json_decref(c);
        }
        tp__searcher_free(s);
    }
    qsort(d, nd, sizeof *d, cmp_dbl);
    double m = nd ? d[nd / 2] : NAN;
    free(d);
    tp__space_free(&sp);
    return m;
}

TP_TEST(test_tpe_concentrates_near_the_optimum_of_a_quadratic_far_more_than_random) {
    double tpe = median_distance("tpe", 10, 100), rnd = median_distance("random", 10, 100);
    printf("  median distance to the optimum, trials 10..99 over 10 seeds: tpe %.3f, random %.3f\n",
           tpe, rnd);
    TP_CHECK(tpe < 0.4 * rnd);
}

/* One scripted run: asks with some left pending, tells out of order. */
static json_t *scripted_run(const tp_space_t *sp, uint64_t seed) {
    tp_search_cfg_t cfg = {.algorithm = "tpe", .trials = 40, .seed = seed};
    tp_searcher_t *s = tp__searcher_new(sp, &cfg, 0, NULL);
    json_t *all = json_array();
    for (uint64_t i = 0; i < 40; i++) {
        json_t *c = NULL;
        s->ops->ask(s, i, 0, &c);
        json_array_append_new(all, c);
        if (i >= 2 && i % 3 != 0) { /* tell an older one; every third stays pending a while */
            json_t *o = json_array_get(all, i - 2);
            s->ops->tell(s, i - 2, o, quadratic(o), 0);
        }
    }
    tp__searcher_free(s);
    return all;
}

TP_TEST(test_tpe_same_seed_and_same_calls_give_the_same_proposals) {
    tp_space_t sp;
    tp__space_init(&sp);
    add_real(&sp, "x", TP_DOM_UNIFORM, -10, 10, 0);
    add_real(&sp, "y", TP_DOM_UNIFORM, -10, 10, 0);
    json_t *a = scripted_run(&sp, 5), *b = scripted_run(&sp, 5), *c = scripted_run(&sp, 6);
    TP_CHECK_INT(json_array_size(a), 40);
    TP_CHECK(json_equal(a, b));
    TP_CHECK(!json_equal(json_array_get(a, 30), json_array_get(c, 30)));
    json_decref(a), json_decref(b), json_decref(c);
    tp__space_free(&sp);
}

TP_TEST(test_tpe_startup_trials_are_the_random_searchers_draws) {
    tp_space_t sp;
    tp__space_init(&sp);
    add_real(&sp, "x", TP_DOM_UNIFORM, -10, 10, 0);
    add_real(&sp, "lr", TP_DOM_LOGUNIFORM, 1e-5, 1, 0);
    tp_search_cfg_t ct = {.algorithm = "tpe", .trials = 0, .seed = 3};
    tp_search_cfg_t cr = {.algorithm = "random", .trials = 0, .seed = 3};
    tp_searcher_t *t = tp__searcher_new(&sp, &ct, 1, NULL),
                  *r = tp__searcher_new(&sp, &cr, 1, NULL);
    TP_CHECK_INT(t->ops->total(t), 0);
    int same = 0;
    for (uint64_t i = 0; i < 14; i++) {
        json_t *a = NULL, *b = NULL;
        TP_CHECK_INT(t->ops->ask(t, i, 0, &a), 1);
        r->ops->ask(r, i, 0, &b);
        same += json_equal(a, b);
        /* failed trials do not count toward the 10 startup trials */
        t->ops->tell(t, i, a, i % 2 ? NAN : num(a, "x"), 0);
        json_decref(a), json_decref(b);
    }
    TP_CHECK_INT(same, 14); /* 7 told finite values: still random draws */
    tp__searcher_free(t);
    tp__searcher_free(r);
    tp__space_free(&sp);
}

/* Searcher with trials 0..19 told (x on [-10, 10], minimize (x-3)^2). */
static tp_searcher_t *told_twenty(const tp_space_t *sp, uint64_t seed) {
    tp_search_cfg_t cfg = {.algorithm = "tpe", .seed = seed};
    tp_searcher_t *s = tp__searcher_new(sp, &cfg, 0, NULL);
    for (uint64_t i = 0; i < 20; i++) {
        json_t *c = NULL;
        s->ops->ask(s, i, 0, &c);
        double x = num(c, "x") - 3;
        s->ops->tell(s, i, c, x * x, 0);
        json_decref(c);
    }
    return s;
}

TP_TEST(test_tpe_constant_liar_pending_asks_change_the_next_proposal) {
    tp_space_t sp;
    tp__space_init(&sp);
    add_real(&sp, "x", TP_DOM_UNIFORM, -10, 10, 0);
    int differ = 0, consecutive_differ = 0;
    for (uint64_t seed = 1; seed <= 20; seed++) {
        /* a: asks 20..27 with no tells; b: same tells, asks 27 alone */
        tp_searcher_t *a = told_twenty(&sp, seed), *b = told_twenty(&sp, seed);
        json_t *prev = NULL, *c = NULL, *alone = NULL;
        for (uint64_t i = 20; i < 28; i++) {
            a->ops->ask(a, i, 0, &c);
            if (prev) consecutive_differ += !json_equal(prev, c);
            json_decref(prev);
            prev = c;
        }
        b->ops->ask(b, 27, 0, &alone);
        differ += !json_equal(prev, alone);
        json_decref(prev), json_decref(alone);
        tp__searcher_free(a), tp__searcher_free(b);
    }
    printf("  with 7 pending asks the 8th differs from the lone ask in %d of 20 seeds\n", differ);
    TP_CHECK_INT(consecutive_differ, 20 * 7);
    TP_CHECK(differ >= 10);
    tp__space_free(&sp);
}

TP_TEST(test_tpe_later_tell_for_the_same_index_replaces_the_value) {
    tp_space_t sp;
    tp__space_init(&sp);
    add_real(&sp, "x", TP_DOM_UNIFORM, -10, 10, 0);
    tp_search_cfg_t cfg = {.algorithm = "tpe", .seed = 9};
    tp_searcher_t *a = tp__searcher_new(&sp, &cfg, 0, NULL),
                  *b = tp__searcher_new(&sp, &cfg, 0, NULL);
    for (uint64_t i = 0; i < 15; i++) {
        json_t *c = NULL, *d = NULL;
        a->ops->ask(a, i, 0, &c);
        b->ops->ask(b, i, 0, &d);
        double v = fabs(num(c, "x") - 3);
        a->ops->tell(a, i, c, -v, 0); /* first rung: a misleading value */
        a->ops->tell(a, i, c, v, 0);  /* promoted: the newer value counts */
        b->ops->tell(b, i, d, v, 0);
        json_decref(c), json_decref(d);
    }
    for (uint64_t i = 15; i < 20; i++) {
        json_t *c = NULL, *d = NULL;
        a->ops->ask(a, i, 0, &c);
        b->ops->ask(b, i, 0, &d);
        TP_CHECK(json_equal(c, d));
        json_decref(c), json_decref(d);
    }
    tp__searcher_free(a), tp__searcher_free(b);
    tp__space_free(&sp);
}

TP_TEST(test_tpe_picks_the_one_good_category_much_more_often_than_chance) {
    tp_space_t sp;
    tp__space_init(&sp);
    static const char *const opt[] = {"sgd", "adam", "rmsprop", "adagrad", "lbfgs"};
    add_choice(&sp, "opt", opt, 5);
    add_real(&sp, "noise", TP_DOM_UNIFORM, 0, 1, 0);
    int good = 0, total = 0;
    for (uint64_t seed = 1; seed <= 5; seed++) {
        tp_search_cfg_t cfg = {.algorithm = "tpe", .trials = 60, .seed = seed};
        tp_searcher_t *s = tp__searcher_new(&sp, &cfg, 1, NULL); /* maximize */
        json_t *c = NULL;
        for (uint64_t i = 0; s->ops->ask(s, i, 0, &c) == 1; i++) {
            int is_good = strcmp(json_string_value(json_object_get(c, "opt")), "rmsprop") == 0;
            if (i >= 10) good += is_good, total++;
            s->ops->tell(s, i, c, (is_good ? 1.0 : 0.0) + 0.1 * num(c, "noise"), 0);
            json_decref(c);
        }
        tp__searcher_free(s);
    }
    printf("  the good category in %d of %d post-startup trials (chance: 20%%)\n", good, total);
    TP_CHECK(good > total * 6 / 10);
    tp__space_free(&sp);
}

TP_TEST(test_tpe_values_stay_in_their_domains) {
    tp_space_t sp;
    tp__space_init(&sp);
    add_real(&sp, "u", TP_DOM_UNIFORM, 0, 1, 0.1);
    add_real(&sp, "lr", TP_DOM_LOGUNIFORM, 1e-4, 1, 0);
    add_real(&sp, "lq", TP_DOM_LOGUNIFORM, 0.01, 10, 0.01);
    add_real(&sp, "n", TP_DOM_NORMAL, 5, 2, 0);
    tp_param_t i1 = {.name = tp__strdup("layers"), .kind = TP_DOM_INT, .lo = 1, .hi = 6};
    tp__space_add(&sp, &i1);
    tp_param_t i2 = {.name = tp__strdup("batch"), .kind = TP_DOM_INT, .lo = 8, .hi = 512, .log = 1};
    tp__space_add(&sp, &i2);
    tp_param_t i3 = {.name = tp__strdup("units"), .kind = TP_DOM_INT, .lo = 16, .hi = 256, .q = 16};
    tp__space_add(&sp, &i3);
    tp_param_t k = {.name = tp__strdup("k"), .kind = TP_DOM_CONST, .nvalues = 1};
    k.values = tp__xcalloc(1, sizeof *k.values);
    k.values[0] = json_string("fixed");
    tp__space_add(&sp, &k);
    tp_search_cfg_t cfg = {.algorithm = "tpe", .trials = 80, .seed = 11};
    tp_searcher_t *s = tp__searcher_new(&sp, &cfg, 0, NULL);
    json_t *c = NULL;
    int bad = 0;
    for (uint64_t i = 0; s->ops->ask(s, i, 0, &c) == 1; i++) {
        double u = num(c, "u"), lr = num(c, "lr"), lq = num(c, "lq");
        json_t *layers = json_object_get(c, "layers"), *batch = json_object_get(c, "batch");
        json_t *units = json_object_get(c, "units");
        bad += !(u >= 0 && u <= 1 && fabs(u * 10 - round(u * 10)) < 1e-9);
        bad += !(lr >= 1e-4 && lr <= 1);
        bad += !(lq >= 0.01 && lq <= 10 && fabs(lq * 100 - round(lq * 100)) < 1e-6);
        bad += !json_is_real(json_object_get(c, "n"));
        bad += !(json_is_integer(layers) && json_integer_value(layers) >= 1 &&
                 json_integer_value(layers) <= 6);
        bad += !(json_is_integer(batch) && json_integer_value(batch) >= 8 &&
                 json_integer_value(batch) <= 512);
        bad += !(json_is_integer(units) && json_integer_value(units) % 16 == 0 &&
                 json_integer_value(units) >= 16 && json_integer_value(units) <= 256);
        TP_CHECK_STR(json_string_value(json_object_get(c, "k")), "fixed");
        double v = (u - 0.3) * (u - 0.3) + fabs(log10(lr) + 2) +
                   fabs((double)json_integer_value(batch) - 64) / 64;
        s->ops->tell(s, i, c, v, 0);
        json_decref(c);
    }
    TP_CHECK_INT(bad, 0);
    tp__searcher_free(s);
    tp__space_free(&sp);
}

/* How long such an ask takes is a figure for bench/tpe_ask, not a check. */
TP_TEST(test_tpe_asks_with_1000_observations_and_5_params) {
    tp_space_t sp;
    tp__space_init(&sp);
    add_real(&sp, "a", TP_DOM_UNIFORM, 0, 1, 0);
    add_real(&sp, "b", TP_DOM_LOGUNIFORM, 1e-5, 1, 0);
    tp_param_t i1 = {.name = tp__strdup("c"), .kind = TP_DOM_INT, .lo = 1, .hi = 100};
    tp__space_add(&sp, &i1);
    add_real(&sp, "d", TP_DOM_UNIFORM, -1, 1, 0);
    static const char *const opt[] = {"x", "y", "z"};
    add_choice(&sp, "e", opt, 3);
    tp_search_cfg_t cfg = {.algorithm = "tpe", .seed = 1};
    tp_searcher_t *s = tp__searcher_new(&sp, &cfg, 0, NULL);
    tp_rng_t rng;
    tp__rng_seed(&rng, 1, 1);
    for (uint64_t i = 0; i < 1000; i++) { /* random observations, told directly */
        json_t *c = tp__space_sample(&sp, &rng);
        s->ops->tell(s, i, c, tp__rng_uniform(&rng), 0);
        json_decref(c);
    }
    for (uint64_t i = 1000; i < 1020; i++) {
        json_t *c = NULL;
        TP_CHECK_INT(s->ops->ask(s, i, 0, &c), 1);
        TP_CHECK(c != NULL && json_object_size(c) == 5);
        json_decref(c);
    }
    tp__searcher_free(s);
    tp__space_free(&sp);
}

/* Median x of 20 asks after told results (x, error, budget; budget 0: told without one) over
 * x in [0, 1], budget 1..27: where TPE's "below" group is. Every ask but the last left
 * pending. */
static double median_proposal(const double (*obs)[3], size_t n) {
    tp_space_t sp;
    tp__space_init(&sp);
    add_real(&sp, "x", TP_DOM_UNIFORM, 0, 1, 0);
    tp_search_cfg_t cfg = {
        .algorithm = "tpe", .seed = 3, .budget_min = 1, .budget_max = 27, .budget_eta = 3};
    tp_searcher_t *s = tp__searcher_new(&sp, &cfg, 0, NULL);
    for (size_t i = 0; i < n; i++) {
        json_t *c = json_pack("{s:f}", "x", obs[i][0]);
        tp__searcher_tell(s, i, c, obs[i][1], obs[i][2], 0);
        json_decref(c);
    }
    double x[20];
    for (size_t i = 0; i < 20; i++) {
        json_t *c = NULL;
        x[i] = s->ops->ask(s, n + i, 0, &c) == 1 ? num(c, "x") : NAN;
        json_decref(c);
    }
    qsort(x, 20, sizeof *x, cmp_dbl);
    tp__searcher_free(s);
    tp__space_free(&sp);
    return 0.5 * (x[9] + x[10]);
}

/* Optuna 3.1's TPESampler ranks a pruned trial by the last step it reported, largest
 * first, after every complete trial, and by value within a step (_get_observation_pairs:
 * score (-step, value)). So do results told with a budget: three trials near x = 0.1 that
 * reached budget 9 form "below" (gamma(30) = 3) although 27 trials stopped at budget 1
 * reported lower errors; told without budgets, the lowest errors would. */
TP_TEST(test_tpe_ranks_results_at_a_larger_budget_first_as_optuna_ranks_pruned_trials) {
    double obs[30][3], flat[30][3];
    for (size_t i = 0; i < 30; i++) {
        int far = i >= 3; /* 27 early-stopped trials over [0.5, 1] */
        obs[i][0] = far ? 0.5 + 0.5 * (double)(i - 3) / 26 : 0.08 + 0.02 * (double)i;
        obs[i][1] = far ? 0.10 + 0.001 * (double)i : 0.30;
        obs[i][2] = far ? 1 : 9;
        memcpy(flat[i], obs[i], sizeof obs[i]);
        flat[i][2] = 0;
    }
    double by_budget = median_proposal(obs, 30), by_value = median_proposal(flat, 30);
    printf("  median proposal: %.3f ranked by budget then error, %.3f by error alone\n", by_budget,
           by_value);
    TP_CHECK(by_budget < 0.3); /* nearer the budget-9 group than the lowest errors */
    TP_CHECK(by_value > 0.3);
}

/* A result at the scheduler's largest budget is complete, like one told without a budget:
 * among complete results the lower error ranks first (three near x = 0.1 told without a
 * budget beat three near 0.9 at budget 27, and both beat 24 lower errors at budget 9 over
 * [0.5, 0.8]). */
TP_TEST(test_tpe_ranks_results_at_the_largest_budget_with_complete_ones_by_value) {
    double obs[30][3];
    for (size_t i = 0; i < 30; i++) {
        if (i < 3) {
            obs[i][0] = 0.08 + 0.02 * (double)i, obs[i][1] = 0.30, obs[i][2] = 0;
        } else if (i < 6) {
            obs[i][0] = 0.88 + 0.02 * (double)(i - 3), obs[i][1] = 0.40, obs[i][2] = 27;
        } else {
            obs[i][0] = 0.5 + 0.3 * (double)(i - 6) / 23, obs[i][1] = 0.05, obs[i][2] = 9;
        }
    }
    double m = median_proposal(obs, 30);
    printf("  median proposal: %.3f\n", m);
    TP_CHECK(m < 0.3);
}

TP_TEST(test_tpe_is_listed_among_the_searchers) {
    int found = 0;
    for (size_t i = 0; tp__searcher_names[i]; i++)
        found += strcmp(tp__searcher_names[i], "tpe") == 0;
    TP_CHECK_INT(found, 1);
}

int main(void) {
    return tp_test_main();
}
