/* Unit tests for the grid and random searchers. */
#include <errno.h>
#include <stdlib.h>

#include "search/search.h"
#include "tp_test.h"

static void build_space(tp_space_t *s) {
    tp__space_init(s);
    tp_param_t lr = {.name = tp__strdup("lr"), .kind = TP_DOM_LOGUNIFORM, .lo = 1e-4, .hi = 1};
    tp__space_add(s, &lr);
    tp_param_t h = {.name = tp__strdup("hidden"), .kind = TP_DOM_CHOICE, .nvalues = 3};
    h.values = tp__xcalloc(3, sizeof *h.values);
    h.values[0] = json_integer(16), h.values[1] = json_integer(32), h.values[2] = json_integer(64);
    tp__space_add(s, &h);
    tp_param_t l = {.name = tp__strdup("layers"), .kind = TP_DOM_INT, .lo = 1, .hi = 3};
    tp__space_add(s, &l);
}

static json_t *ask_all(tp_searcher_t *s, uint64_t n) {
    json_t *all = json_array();
    for (uint64_t i = 0; i < n; i++) {
        json_t *c = NULL;
        if (s->ops->ask(s, i, 0.0, &c) != 1) break;
        json_array_append_new(all, c);
    }
    return all;
}

TP_TEST(test_random_same_seed_gives_identical_configs) {
    tp_space_t sp;
    build_space(&sp);
    char name[] = "random"; /* a caller's buffer: the searcher must not keep it */
    tp_search_cfg_t cfg = {.algorithm = name, .trials = 20, .seed = 7};
    tp_searcher_t *a = tp__searcher_new(&sp, &cfg, 1, NULL);
    tp_searcher_t *b = tp__searcher_new(&sp, &cfg, 1, NULL);
    TP_CHECK(a && b);
    TP_CHECK_STR(a->cfg.algorithm, "random");
    TP_CHECK(a->cfg.algorithm != name); /* points at the static name */
    TP_CHECK_INT(a->ops->total(a), 20);
    json_t *ca = ask_all(a, 20), *cb = ask_all(b, 20);
    TP_CHECK_INT(json_array_size(ca), 20);
    TP_CHECK(json_equal(ca, cb));
    /* a resumed run asking from index 10 gets the same remaining configs */
    json_t *c10 = NULL;
    TP_CHECK_INT(b->ops->ask(b, 10, 5.0, &c10), 1);
    TP_CHECK(json_equal(c10, json_array_get(ca, 10)));
    json_decref(c10);
    json_decref(ca);
    json_decref(cb);
    tp__searcher_free(a);
    tp__searcher_free(b);
    tp__space_free(&sp);
}

TP_TEST(test_random_different_seeds_give_different_configs) {
    tp_space_t sp;
    build_space(&sp);
    tp_search_cfg_t c1 = {.algorithm = "random", .trials = 10, .seed = 1};
    tp_search_cfg_t c2 = {.algorithm = "random", .trials = 10, .seed = 2};
    tp_searcher_t *a = tp__searcher_new(&sp, &c1, 0, NULL),
                  *b = tp__searcher_new(&sp, &c2, 0, NULL);
    json_t *ca = ask_all(a, 10), *cb = ask_all(b, 10);
    int same = 0;
    for (size_t i = 0; i < 10; i++)
        same += json_equal(json_array_get(ca, i), json_array_get(cb, i));
    TP_CHECK_INT(same, 0);
    /* consecutive trials of one seed differ too */
    TP_CHECK(!json_equal(json_array_get(ca, 0), json_array_get(ca, 1)));
    json_decref(ca);
    json_decref(cb);
    tp__searcher_free(a);
    tp__searcher_free(b);
    tp__space_free(&sp);
}

TP_TEST(test_random_ask_beyond_trials_returns_zero) {
    tp_space_t sp;
    build_space(&sp);
    tp_search_cfg_t cfg = {.algorithm = "random", .trials = 3, .seed = 0};
    tp_searcher_t *s = tp__searcher_new(&sp, &cfg, 1, NULL);
    json_t *c = NULL;
    TP_CHECK_INT(s->ops->ask(s, 2, 0, &c), 1);
    json_decref(c);
    c = NULL;
    TP_CHECK_INT(s->ops->ask(s, 3, 0, &c), 0);
    TP_CHECK(c == NULL);
    TP_CHECK_INT(s->ops->ask(s, 1000, 0, &c), 0);
    s->ops->tell(s, 0, NULL, 0.5, 1.0); /* a no-op that must not crash */
    tp__searcher_free(s);
    tp__space_free(&sp);
}

TP_TEST(test_grid_covers_the_full_product_repeated_trials_times) {
    tp_space_t sp;
    build_space(&sp); /* hidden: 3 choices, layers: 3 ints, lr continuous -> 9 points */
    tp_search_cfg_t cfg = {.algorithm = "grid", .trials = 2, .seed = 4};
    tp_searcher_t *s = tp__searcher_new(&sp, &cfg, 1, NULL);
    TP_CHECK(s != NULL);
    TP_CHECK_INT(s->ops->total(s), 18);
    json_t *all = ask_all(s, 100);
    TP_CHECK_INT(json_array_size(all), 18);
    int seen[3][3] = {{0}};
    for (size_t i = 0; i < json_array_size(all); i++) {
        json_t *c = json_array_get(all, i);
        long long h = json_integer_value(json_object_get(c, "hidden"));
        long long l = json_integer_value(json_object_get(c, "layers"));
        int hi = h == 16 ? 0 : h == 32 ? 1 : h == 64 ? 2 : -1;
        TP_CHECK(hi >= 0 && l >= 1 && l <= 3);
        if (hi >= 0 && l >= 1 && l <= 3) seen[hi][l - 1]++;
        double lr = json_real_value(json_object_get(c, "lr"));
        TP_CHECK(lr >= 1e-4 && lr <= 1);
    }
    for (int h = 0; h < 3; h++)
        for (int l = 0; l < 3; l++)
            TP_CHECK_INT(seen[h][l], 2);
    /* the repeat has the same discrete point but a fresh continuous draw */
    json_t *a = json_array_get(all, 0), *b = json_array_get(all, 9);
    TP_CHECK(json_equal(json_object_get(a, "hidden"), json_object_get(b, "hidden")));
    TP_CHECK(!json_equal(json_object_get(a, "lr"), json_object_get(b, "lr")));
    json_decref(all);
    tp__searcher_free(s);
    tp__space_free(&sp);
}

TP_TEST(test_grid_with_zero_trials_runs_the_grid_once) {
    tp_space_t sp;
    build_space(&sp);
    tp_search_cfg_t cfg = {.algorithm = "grid", .trials = 0, .seed = 0};
    tp_searcher_t *s = tp__searcher_new(&sp, &cfg, 1, NULL);
    TP_CHECK_INT(s->ops->total(s), 9);
    tp__searcher_free(s);
    tp__space_free(&sp);
}

TP_TEST(test_grid_too_large_fails_to_init) {
    tp_space_t sp;
    tp__space_init(&sp);
    for (int i = 0; i < 5; i++) {
        tp_param_t p = {.name = tp__strdup("i"), .kind = TP_DOM_INT, .lo = 1, .hi = 10000};
        tp__space_add(&sp, &p);
    }
    tp_search_cfg_t cfg = {.algorithm = "grid", .trials = 1};
    tp_error_t err = {0};
    TP_CHECK(tp__searcher_new(&sp, &cfg, 1, &err) == NULL);
    TP_CHECK_CONTAINS(err.msg, "the grid has more than 2^40 points");
    tp__space_free(&sp);
}

TP_TEST(test_unknown_algorithm_suggests_the_closest_name) {
    tp_space_t sp;
    build_space(&sp);
    tp_search_cfg_t cfg = {.algorithm = "rnd", .trials = 1};
    tp_error_t err = {0};
    errno = 0;
    TP_CHECK(tp__searcher_new(&sp, &cfg, 1, &err) == NULL);
    TP_CHECK_INT(errno, EINVAL);
    TP_CHECK_STR(err.msg, "unknown search algorithm \"rnd\"; did you mean \"random\"? (known: "
                          "grid, random, tpe, nsga2, gp, cmaes, bohb, dehb)");
    cfg.algorithm = "bayesian";
    TP_CHECK(tp__searcher_new(&sp, &cfg, 1, &err) == NULL);
    TP_CHECK_STR(err.msg, "unknown search algorithm \"bayesian\"; known: grid, random, tpe, nsga2, "
                          "gp, cmaes, bohb, dehb");
    TP_CHECK_STR(tp__searcher_names[0], "grid");
    TP_CHECK_STR(tp__searcher_names[1], "random");
    TP_CHECK_STR(tp__searcher_names[2], "tpe");
    TP_CHECK_STR(tp__searcher_names[3], "nsga2");
    TP_CHECK_STR(tp__searcher_names[4], "gp");
    TP_CHECK_STR(tp__searcher_names[5], "cmaes");
    TP_CHECK_STR(tp__searcher_names[6], "bohb");
    TP_CHECK_STR(tp__searcher_names[7], "dehb");
    TP_CHECK(tp__searcher_names[8] == NULL);
    cfg.algorithm = "cma-es";
    TP_CHECK(tp__searcher_new(&sp, &cfg, 1, &err) == NULL);
    TP_CHECK_CONTAINS(err.msg, "did you mean \"cmaes\"?");
    tp__space_free(&sp);
}

int main(void) {
    return tp_test_main();
}
