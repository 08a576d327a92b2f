/* Unit tests for several objectives: non-dominated sorting and hypervolume
 * against slow obvious oracles (with a planted error each oracle catches),
 * crowding distance, subset selection, NSGA-II's generations and operators,
 * and multi-objective TPE beating random on ZDT1. */
#include <stdlib.h>
#include <string.h>

#include "search/pareto.h"
#include "search/scheduler.h"
#include "tp_test.h"

/* Oracle: peel fronts; a point is in the current front when no remaining
 * point dominates it. O(n^3). */
static void rank_oracle(const double *y, size_t n, size_t m, size_t *rank) {
    unsigned char *left = malloc(n);
    memset(left, 1, n);
    for (size_t f = 0, done = 0; done < n; f++) {
        unsigned char *in = calloc(n, 1);
        for (size_t i = 0; i < n; i++) {
            if (!left[i]) continue;
            int dominated = 0;
            for (size_t j = 0; j < n && !dominated; j++)
                dominated = left[j] && j != i && tp__pareto_dominates(y + j * m, y + i * m, m);
            in[i] = !dominated;
        }
        for (size_t i = 0; i < n; i++)
            if (in[i]) rank[i] = f, left[i] = 0, done++;
        free(in);
    }
    free(left);
}

TP_TEST(test_nondominated_sort_matches_the_oracle) {
    tp_rng_t r;
    tp__rng_seed(&r, 7, 0);
    for (int round = 0; round < 40; round++) {
        size_t n = 1 + tp__rng_below(&r, 60), m = 2 + tp__rng_below(&r, 2);
        double *y = malloc(n * m * sizeof *y);
        for (size_t k = 0; k < n * m; k++)
            y[k] = (double)tp__rng_below(&r, 6); /* ties too */
        size_t *a = malloc(n * sizeof *a), *b = malloc(n * sizeof *b);
        tp__pareto_rank(y, n, m, a);
        rank_oracle(y, n, m, b);
        for (size_t i = 0; i < n; i++)
            TP_CHECK_INT(a[i], b[i]);
        /* the oracle catches a planted error: a rank moved by one */
        a[0]++;
        int differs = 0;
        for (size_t i = 0; i < n; i++)
            differs |= a[i] != b[i];
        TP_CHECK(differs);
        free(y), free(a), free(b);
    }
}

/* The first front alone (what `best` and the dashboard draw) is the
 * oracle's rank 0, ties and duplicates included, and says how many. */
TP_TEST(test_first_front_is_the_oracles_rank_zero) {
    tp_rng_t r;
    tp__rng_seed(&r, 11, 0);
    for (int round = 0; round < 60; round++) {
        size_t n = tp__rng_below(&r, 80), m = 2 + tp__rng_below(&r, 3);
        double *y = malloc((n * m + 1) * sizeof *y);
        for (size_t k = 0; k < n * m; k++)
            y[k] = (double)tp__rng_below(&r, 7) - 3; /* ties and duplicates too */
        size_t *b = malloc((n + 1) * sizeof *b), want = 0;
        unsigned char *on = malloc(n + 1);
        rank_oracle(y, n, m, b);
        for (size_t i = 0; i < n; i++)
            want += b[i] == 0;
        TP_CHECK_INT(tp__pareto_front(y, n, m, on), want);
        for (size_t i = 0; i < n; i++)
            TP_CHECK_INT(on[i], b[i] == 0);
        free(y), free(b), free(on);
    }
}

/* Oracle for integer points in [0, 8)^m with ref 8: count the unit cells
 * some point dominates (cell c is covered when p <= c in every axis). */
static double hv_oracle(const double *y, size_t n, size_t m) {
    size_t cells = 1;
    for (size_t j = 0; j < m; j++)
        cells *= 8;
    double count = 0;
    for (size_t c = 0; c < cells; c++) {
        size_t rest = c;
        int cell[3];
        for (size_t j = 0; j < m; j++)
            cell[j] = (int)(rest % 8), rest /= 8;
        for (size_t i = 0; i < n; i++) {
            int in = 1;
            for (size_t j = 0; j < m && in; j++)
                in = y[i * m + j] <= cell[j];
            if (in) {
                count++;
                break;
            }
        }
    }
    return count;
}

TP_TEST(test_hypervolume_matches_cell_counting_in_2_and_3_objectives) {
    tp_rng_t r;
    tp__rng_seed(&r, 11, 0);
    double ref[3] = {8, 8, 8};
    for (int round = 0; round < 60; round++) {
        size_t n = 1 + tp__rng_below(&r, 12), m = 2 + (size_t)(round % 2);
        double *y = malloc(n * m * sizeof *y);
        for (size_t k = 0; k < n * m; k++)
            y[k] = (double)tp__rng_below(&r, 9); /* 8: outside */
        double want = hv_oracle(y, n, m);
        TP_CHECK_NEAR(tp__hypervolume(y, m, NULL, n, ref), want, 1e-9);
        /* the oracle catches a planted error: a point moved to the origin covers the box */
        double box = m == 2 ? 64 : 512;
        for (size_t j = 0; j < m; j++)
            y[j] = 0;
        TP_CHECK(want == box || hv_oracle(y, n, m) != want);
        TP_CHECK_NEAR(hv_oracle(y, n, m), box, 0);
        free(y);
    }
}

TP_TEST(test_crowding_contributions_and_greedy_selection) {
    /* a front of four on a line f2 = 4 - f1 */
    double y[] = {0, 4, 1, 3, 3, 1, 4, 0};
    size_t idx[] = {0, 1, 2, 3};
    double d[4];
    tp__pareto_crowding(y, 2, idx, 4, d);
    TP_CHECK(isinf(d[0]) && isinf(d[3]));
    TP_CHECK_NEAR(d[1], 3.0 / 4 + 3.0 / 4, 1e-12); /* neighbours 0 and 3 in each axis */
    TP_CHECK_NEAR(d[2], 3.0 / 4 + 3.0 / 4, 1e-12);
    double ref[2] = {5, 5}, c[4];
    tp__hv_contributions(y, 2, idx, 4, ref, c);
    TP_CHECK_NEAR(c[0], 1, 1e-12); /* the box [0,1] x [4,5] only it covers */
    TP_CHECK_NEAR(c[1], 2, 1e-12); /* [1,3] x [3,4] */
    size_t pick[2];
    tp__hv_select(y, 2, idx, 4, 2, ref, pick);
    /* first the single largest box: (1,3) and (3,1) both 8; then the best partner */
    TP_CHECK((pick[0] == 1 || pick[0] == 2) && pick[1] != pick[0]);
    double ref2[2];
    tp__hv_reference(y, 2, idx, 4, ref2);
    TP_CHECK_NEAR(ref2[0], 4.4, 1e-12);
}

/* ZDT1 over the first five params of cfg (x0..x4). */
static void zdt1(const json_t *c, double *f) {
    double x[5], g = 0;
    for (int i = 0; i < 5; i++) {
        char k[4] = {'x', (char)('0' + i), 0};
        x[i] = json_real_value(json_object_get(c, k));
    }
    for (int i = 1; i < 5; i++)
        g += x[i];
    g = 1 + 9 * g / 4;
    f[0] = x[0];
    f[1] = g * (1 - sqrt(x[0] / g));
}

static tp_space_t zdt_space(void) {
    tp_space_t s;
    tp__space_init(&s);
    for (int i = 0; i < 5; i++) {
        char k[4] = {'x', (char)('0' + i), 0};
        tp_param_t p = {.name = tp__strdup(k), .kind = TP_DOM_UNIFORM, .lo = 0, .hi = 1};
        tp__space_add(&s, &p);
    }
    return s;
}

/* Run algo for n sequential trials on ZDT1; returns the hypervolume at (1.1, 11). */
static double zdt_run(const char *algo, size_t n, uint64_t seed, int *failed_) {
    int *tp_failed_ = failed_;
    tp_space_t sp = zdt_space();
    tp_search_cfg_t cfg = {.algorithm = algo, .trials = n, .seed = seed, .nobj = 2};
    tp_error_t err;
    tp_searcher_t *s = tp__searcher_new(&sp, &cfg, 0, &err);
    TP_CHECK(s != NULL);
    double *y = malloc(n * 2 * sizeof *y), ref[2] = {1.1, 11};
    for (size_t i = 0; s && i < n; i++) {
        json_t *c;
        TP_CHECK_INT(s->ops->ask(s, i, 0, &c), 1);
        zdt1(c, y + 2 * i);
        s->ops->tell_values(s, i, c, y + 2 * i, 0);
        json_decref(c);
    }
    double hv = tp__hypervolume(y, 2, NULL, n, ref);
    free(y);
    tp__searcher_free(s);
    tp__space_free(&sp);
    return hv;
}

TP_TEST(test_multi_objective_tpe_beats_random_on_zdt1) {
    double tpe = 0, rnd = 0;
    for (uint64_t seed = 1; seed <= 3; seed++) {
        tpe += zdt_run("tpe", 80, seed, tp_failed_);
        rnd += zdt_run("random", 80, seed, tp_failed_);
    }
    TP_CHECK(tpe > rnd);
}

TP_TEST(test_nsga2_waits_for_a_generation_and_breeds_from_its_parents) {
    tp_space_t sp = zdt_space();
    tp_search_cfg_t cfg = {.algorithm = "nsga2", .trials = 120, .seed = 3, .nobj = 2};
    tp_error_t err;
    tp_searcher_t *s = tp__searcher_new(&sp, &cfg, 0, &err);
    TP_REQUIRE(s);
    json_t *cfgs[120] = {0};
    for (size_t i = 0; i < 50; i++)
        TP_CHECK_INT(s->ops->ask(s, i, 0, &cfgs[i]), 1);
    json_t *c;
    TP_CHECK_INT(s->ops->ask(s, 50, 0, &c), -EAGAIN); /* generation 0 not told yet */
    for (size_t i = 0; i < 50; i++) {
        double f[2];
        zdt1(cfgs[i], f);
        s->ops->tell_values(s, i, cfgs[i], f, 0);
    }
    int from_parents = 0, values = 0;
    for (size_t i = 50; i < 100; i++) {
        TP_REQUIRE(s->ops->ask(s, i, 0, &cfgs[i]) == 1);
        const char *k;
        json_t *v;
        json_object_foreach(cfgs[i], k, v) { /* each value is a parent's or a mutation */
            values++;
            for (size_t j = 0; j < 50; j++)
                if (json_equal(v, json_object_get(cfgs[j], k))) {
                    from_parents++;
                    break;
                }
        }
    }
    TP_CHECK(from_parents > values * 7 / 10); /* mutation rate 1/5 per value */
    TP_CHECK(from_parents < values);
    /* the same calls give the same children */
    tp_searcher_t *s2 = tp__searcher_new(&sp, &cfg, 0, &err);
    for (size_t i = 0; i < 50; i++) {
        json_t *x;
        s2->ops->ask(s2, i, 0, &x);
        double f[2];
        zdt1(x, f);
        s2->ops->tell_values(s2, i, x, f, 0);
        json_decref(x);
    }
    for (size_t i = 50; i < 100; i++) {
        json_t *x;
        s2->ops->ask(s2, i, 0, &x);
        TP_CHECK(json_equal(x, cfgs[i]));
        json_decref(x);
    }
    for (size_t i = 0; i < 100; i++)
        json_decref(cfgs[i]);
    tp__searcher_free(s), tp__searcher_free(s2);
    tp__space_free(&sp);
}

TP_TEST(test_several_objectives_refused_where_one_number_is_needed) {
    tp_space_t sp = zdt_space();
    tp_search_cfg_t cfg = {.algorithm = "random", .trials = 5, .seed = 1, .nobj = 2};
    tp_error_t err;
    tp_searcher_t *s = tp__searcher_new(&sp, &cfg, 0, &err);
    TP_CHECK(s != NULL);
    tp__searcher_free(s);
    TP_CHECK(strstr(tp__sched_single_objective_msg("asha"), "use scheduler: fifo") != NULL);
    tp__space_free(&sp);
}

int main(void) {
    return tp_test_main();
}
