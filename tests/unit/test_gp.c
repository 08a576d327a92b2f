/* Unit tests for the gp searcher and its model (search/gp.h): the posterior
 * and log EI match values computed independently, the searcher beats random
 * on Branin and Hartmann-6, it is deterministic, and the constant liar
 * spreads concurrent asks. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "search/gp.h"
#include "search/search.h"
#include "tp_test.h"

static void add_real(tp_space_t *sp, const char *name, tp_domain_kind kind, double lo, double hi) {
    tp_param_t p = {.name = tp__strdup(name), .kind = kind, .lo = lo, .hi = hi};
    tp__space_add(sp, &p);
}

static double num(const json_t *cfg, const char *name) {
    return json_number_value(json_object_get(cfg, name));
}

static const char *const X6[] = {"x1", "x2", "x3", "x4", "x5", "x6"};

/* Branin on [-5, 10] x [0, 15]; minimum 0.397887. */
static double branin(const json_t *cfg) {
    double x = num(cfg, "x1"), z = num(cfg, "x2");
    double b = 5.1 / (4 * M_PI * M_PI), c = 5 / M_PI, t = 1 / (8 * M_PI);
    double u = z - b * x * x + c * x - 6;
    return u * u + 10 * (1 - t) * cos(x) + 10;
}

/* Hartmann-6 on [0, 1]^6; minimum -3.32237. */
static double hartmann6(const json_t *cfg) {
    static const double a[4] = {1.0, 1.2, 3.0, 3.2};
    static const double A[4][6] = {{10, 3, 17, 3.5, 1.7, 8},
                                   {0.05, 10, 17, 0.1, 8, 14},
                                   {3, 3.5, 1.7, 10, 17, 8},
                                   {17, 8, 0.05, 10, 0.1, 14}};
    static const double P[4][6] = {{.1312, .1696, .5569, .0124, .8283, .5886},
                                   {.2329, .4135, .8307, .3736, .1004, .9991},
                                   {.2348, .1451, .3522, .2883, .3047, .6650},
                                   {.4047, .8828, .8732, .5743, .1091, .0381}};
    double f = 0;
    for (int i = 0; i < 4; i++) {
        double e = 0;
        for (int j = 0; j < 6; j++) {
            double d = num(cfg, X6[j]) - P[i][j];
            e += A[i][j] * d * d;
        }
        f -= a[i] * exp(-e);
    }
    return f;
}

static int cmp_dbl(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* Median over seeds 1..seeds of the best value in n sequential trials. */
static double median_best(const tp_space_t *sp, const char *algo, double (*f)(const json_t *),
                          int seeds, int n) {
    double best[16];
    for (int seed = 1; seed <= seeds; seed++) {
        tp_search_cfg_t cfg = {.algorithm = algo, .trials = (uint64_t)n, .seed = (uint64_t)seed};
        tp_searcher_t *s = tp__searcher_new(sp, &cfg, 0, NULL);
        best[seed - 1] = INFINITY;
        for (int i = 0; i < n; i++) {
            json_t *c = NULL;
            if (s->ops->ask(s, (uint64_t)i, 0, &c) != 1) break;
            double v = f(c);
            if (v < best[seed - 1]) best[seed - 1] = v;
            s->ops->tell(s, (uint64_t)i, c, v, 0);
            json_decref(c);
        }
        tp__searcher_free(s);
    }
    qsort(best, (size_t)seeds, sizeof *best, cmp_dbl);
    return best[seeds / 2];
}

TP_TEST(test_gp_posterior_of_two_points_matches_the_closed_form) {
    /* x = (0.2, 0.7), y = (1, -1), ls 0.3, amp 1.5, noise 0.01 (+ 1e-6 jitter);
     * the 2x2 inverse by hand (python, no numpy) at 0.4 */
    double x[] = {0.2, 0.7}, y[] = {1, -1}, ls = 0.3, q = 0.4, m, v;
    tp_gp_t g = {0};
    TP_CHECK_INT(tp__gp_condition(&g, x, y, 2, 1, &ls, 1.5, 0.01), 0);
    tp__gp_predict(&g, &q, &m, &v);
    TP_CHECK_NEAR(m, 0.26075492259817945, 1e-9);
    TP_CHECK_NEAR(v, 0.5061824989833426, 1e-9);
    /* at a data point the mean is near its value and the variance near the noise */
    tp__gp_predict(&g, &x[0], &m, &v);
    TP_CHECK_NEAR(m, 1.0, 0.02);
    TP_CHECK(v < 0.011);
    tp__gp_free(&g);
    TP_CHECK_NEAR(tp__gp_matern52(0), 1.0, 1e-15);
    TP_CHECK_NEAR(tp__gp_matern52(1), (1 + sqrt(5) + 5.0 / 3) * exp(-sqrt(5)), 1e-15);
}

TP_TEST(test_gp_log_ei_matches_direct_values_and_the_far_tail) {
    TP_CHECK_NEAR(tp__gp_log_ei(0.3, 0.7, 0.1), -1.6576777903966755, 1e-12);
    /* z = -10: log(φ(10) (1 - 10 R(10))), R by its continued fraction */
    TP_CHECK_NEAR(tp__gp_log_ei(10, 1, 0), -55.55312203612236, 1e-4);
    /* continuous across the switch at z = -6, and decreasing */
    double a = tp__gp_log_ei(5.999999, 1, 0), b = tp__gp_log_ei(6.000001, 1, 0);
    TP_CHECK_NEAR(a, b, 1e-3);
    TP_CHECK(tp__gp_log_ei(30, 1, 0) < tp__gp_log_ei(20, 1, 0));
    TP_CHECK(isfinite(tp__gp_log_ei(40, 1, 0)));
}

TP_TEST(test_gp_fit_finds_a_short_scale_for_a_fast_function) {
    double x[40], y[40], ls = 0, amp = 0, noise = 0, slow_ls = 0;
    for (int i = 0; i < 40; i++)
        x[i] = i / 39.0, y[i] = sin(20 * x[i]);
    TP_CHECK_INT(tp__gp_fit_hyper(x, y, 40, 1, &ls, &amp, &noise), 0);
    for (int i = 0; i < 40; i++)
        y[i] = sin(2 * x[i]) * 1.6;
    TP_CHECK_INT(tp__gp_fit_hyper(x, y, 40, 1, &slow_ls, &amp, &noise), 0);
    TP_CHECK(ls < 0.3);
    TP_CHECK(slow_ls > 2 * ls);
    TP_CHECK(noise < 0.01);
}

TP_TEST(test_gp_beats_random_on_branin_and_hartmann6) {
    tp_space_t sp;
    tp__space_init(&sp);
    add_real(&sp, "x1", TP_DOM_UNIFORM, -5, 10);
    add_real(&sp, "x2", TP_DOM_UNIFORM, 0, 15);
    double gp = median_best(&sp, "gp", branin, 5, 40),
           rnd = median_best(&sp, "random", branin, 5, 40);
    printf("branin, 40 trials, median best of 5 seeds: gp %.4f random %.4f\n", gp, rnd);
    TP_CHECK(gp < 0.6); /* minimum 0.3979 */
    TP_CHECK(gp < rnd - 0.3);
    tp__space_free(&sp);
    tp__space_init(&sp);
    for (int j = 0; j < 6; j++)
        add_real(&sp, X6[j], TP_DOM_UNIFORM, 0, 1);
    gp = median_best(&sp, "gp", hartmann6, 5, 50),
    rnd = median_best(&sp, "random", hartmann6, 5, 50);
    printf("hartmann6, 50 trials, median best of 5 seeds: gp %.4f random %.4f\n", gp, rnd);
    TP_CHECK(gp < -2.8); /* minimum -3.3224 */
    TP_CHECK(gp < rnd - 0.8);
    tp__space_free(&sp);
}

/* 30 asks of a searcher over a mixed space, told a function of the config. */
static json_t *run_mixed(uint64_t seed) {
    tp_space_t sp;
    tp__space_init(&sp);
    add_real(&sp, "a", TP_DOM_UNIFORM, 0, 1);
    add_real(&sp, "b", TP_DOM_LOGUNIFORM, 1e-4, 1);
    add_real(&sp, "n", TP_DOM_INT, 1, 64);
    tp_param_t c = {.name = tp__strdup("c"), .kind = TP_DOM_CHOICE, .nvalues = 3};
    c.values = tp__xcalloc(3, sizeof *c.values);
    for (int k = 0; k < 3; k++)
        c.values[k] = json_integer(k);
    tp__space_add(&sp, &c);
    tp_search_cfg_t cfg = {.algorithm = "gp", .trials = 30, .seed = seed};
    tp_searcher_t *s = tp__searcher_new(&sp, &cfg, 1, NULL);
    json_t *all = json_array();
    for (uint64_t i = 0; i < 30; i++) {
        json_t *x = NULL;
        if (s->ops->ask(s, i, 0, &x) != 1) break;
        double v = -fabs(num(x, "a") - 0.3) - fabs(log10(num(x, "b")) + 2) -
                   fabs(num(x, "n") - 20) / 64 + (json_integer_value(json_object_get(x, "c")) == 1);
        s->ops->tell(s, i, x, v, 0);
        json_array_append_new(all, x);
    }
    json_t *past = NULL;
    if (s->ops->ask(s, 30, 0, &past) != 0) json_array_append_new(all, past); /* none past trials */
    tp__searcher_free(s);
    tp__space_free(&sp);
    return all;
}

TP_TEST(test_gp_same_seed_and_same_calls_give_the_same_proposals) {
    json_t *a = run_mixed(7), *b = run_mixed(7), *c = run_mixed(8);
    TP_CHECK_INT(json_array_size(a), 30);
    TP_CHECK(json_equal(a, b));
    TP_CHECK(!json_equal(json_array_get(a, 25), json_array_get(c, 25)));
    /* values stay in their domains, ints are integers */
    for (size_t i = 0; i < 30; i++) {
        const json_t *x = json_array_get(a, i);
        TP_CHECK(json_is_integer(json_object_get(x, "n")));
        TP_CHECK(num(x, "b") >= 1e-4 && num(x, "b") <= 1);
        TP_CHECK(num(x, "a") >= 0 && num(x, "a") <= 1);
    }
    json_decref(a), json_decref(b), json_decref(c);
}

TP_TEST(test_gp_startup_trials_are_the_random_searchers_draws) {
    tp_space_t sp;
    tp__space_init(&sp);
    add_real(&sp, "x1", TP_DOM_UNIFORM, -5, 10);
    add_real(&sp, "x2", TP_DOM_UNIFORM, 0, 15);
    tp_search_cfg_t gc = {.algorithm = "gp", .seed = 3}, rc = {.algorithm = "random", .seed = 3};
    tp_searcher_t *g = tp__searcher_new(&sp, &gc, 0, NULL),
                  *r = tp__searcher_new(&sp, &rc, 0, NULL);
    for (uint64_t i = 0; i < 12; i++) {
        json_t *a = NULL, *b = NULL;
        TP_CHECK_INT(g->ops->ask(g, i, 0, &a), 1);
        TP_CHECK_INT(r->ops->ask(r, i, 0, &b), 1);
        TP_CHECK(json_equal(a, b) == (i < 10));
        g->ops->tell(g, i, a, branin(a), 0);
        json_decref(a), json_decref(b);
    }
    tp__searcher_free(g), tp__searcher_free(r);
    tp__space_free(&sp);
}

TP_TEST(test_gp_constant_liar_gives_distinct_points_to_concurrent_asks) {
    tp_space_t sp;
    tp__space_init(&sp);
    add_real(&sp, "x1", TP_DOM_UNIFORM, -5, 10);
    add_real(&sp, "x2", TP_DOM_UNIFORM, 0, 15);
    tp_search_cfg_t cfg = {.algorithm = "gp", .seed = 5};
    tp_searcher_t *s = tp__searcher_new(&sp, &cfg, 0, NULL);
    for (uint64_t i = 0; i < 15; i++) {
        json_t *a = NULL;
        TP_CHECK_INT(s->ops->ask(s, i, 0, &a), 1);
        s->ops->tell(s, i, a, branin(a), 0);
        json_decref(a);
    }
    json_t *p[5];
    for (uint64_t k = 0; k < 5; k++)
        TP_CHECK_INT(s->ops->ask(s, 15 + k, 0, &p[k]), 1);
    for (int a = 0; a < 5; a++)
        for (int b = a + 1; b < 5; b++) {
            double d = hypot(num(p[a], "x1") - num(p[b], "x1"), num(p[a], "x2") - num(p[b], "x2"));
            TP_CHECK(d > 0.15); /* 1% of the range */
        }
    for (int k = 0; k < 5; k++)
        json_decref(p[k]);
    tp__searcher_free(s);
    tp__space_free(&sp);
}

TP_TEST(test_gp_refuses_a_space_past_its_columns) {
    tp_space_t sp;
    tp__space_init(&sp);
    for (int j = 0; j < 70; j++) {
        char name[8];
        snprintf(name, sizeof name, "p%d", j);
        add_real(&sp, name, TP_DOM_UNIFORM, 0, 1);
    }
    tp_search_cfg_t cfg = {.algorithm = "gp", .seed = 1};
    tp_error_t err = {0};
    TP_CHECK(tp__searcher_new(&sp, &cfg, 0, &err) == NULL);
    TP_CHECK_CONTAINS(err.msg, "at most 64 columns");
    tp__space_free(&sp);
}

int main(void) {
    return tp_test_main();
}
