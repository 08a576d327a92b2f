/* Unit tests for conditional parameters (`when:`): the space tree, its
 * sampling, the grid's valid combinations (against a brute-force oracle),
 * TPE over a tree, and the config errors with their positions. */
#include <stdlib.h>
#include <string.h>

#include "config/config.h"
#include "search/search.h"
#include "space/space.h"
#include "tp_test.h"

#define HEAD "name: t\ncommand: [prog]\nmetric: {name: m, mode: min}\n"

/* An optimizer tree: momentum and nesterov only for sgd, beta only for
 * adam, damp only for sgd with nesterov. */
static const char *TREE = HEAD "space:\n"
                               "  opt: {choice: [sgd, adam]}\n"
                               "  momentum: {uniform: [0.0, 1.0], when: {opt: sgd}}\n"
                               "  nesterov: {choice: [true, false], when: {opt: sgd}}\n"
                               "  beta: {loguniform: [0.001, 0.1], when: {opt: [adam]}}\n"
                               "  damp: {uniform: [0.0, 0.5], when: {nesterov: true}}\n"
                               "search: {algorithm: random, trials: 5}\n";

static int parse(const char *text, tp_experiment_t *x, tp_error_t *err) {
    return tp__experiment_parse("t.yaml", text, strlen(text), x, err);
}

static int is(const json_t *cfg, const char *k, const char *s) {
    const json_t *v = json_object_get(cfg, k);
    return json_is_string(v) && !strcmp(json_string_value(v), s);
}

/* The presence rules of TREE hold for cfg. */
static int tree_ok(const json_t *c) {
    int sgd = is(c, "opt", "sgd"), adam = is(c, "opt", "adam");
    int nest = json_is_true(json_object_get(c, "nesterov"));
    return (sgd || adam) && !!json_object_get(c, "momentum") == sgd &&
           !!json_object_get(c, "nesterov") == sgd && !!json_object_get(c, "beta") == adam &&
           !!json_object_get(c, "damp") == (sgd && nest);
}

TP_TEST(test_random_sampling_keeps_only_active_params) {
    tp_experiment_t x;
    tp_error_t err;
    TP_REQUIRE(parse(TREE, &x, &err) == 0);
    TP_CHECK(x.space.conditional);
    tp_rng_t r;
    tp__rng_seed(&r, 3, 0);
    int sgd = 0, damp = 0, bad = 0;
    for (int t = 0; t < 4000; t++) {
        json_t *c = tp__space_sample(&x.space, &r);
        bad += !tree_ok(c);
        sgd += is(c, "opt", "sgd");
        damp += json_object_get(c, "damp") != NULL;
        json_decref(c);
    }
    TP_CHECK_INT(bad, 0);
    TP_CHECK(sgd > 1800 && sgd < 2200);  /* each branch about half the time */
    TP_CHECK(damp > 800 && damp < 1200); /* sgd and nesterov: about a quarter */
    tp__experiment_free(&x);
}

TP_TEST(test_sampling_draws_the_same_values_with_or_without_conditions) {
    /* the rng stream does not depend on activity: an unconditional twin draws the same */
    tp_experiment_t a, b;
    tp_error_t err;
    TP_REQUIRE(parse(TREE, &a, &err) == 0);
    TP_REQUIRE(parse(HEAD "space:\n  opt: {choice: [sgd, adam]}\n  momentum: {uniform: [0.0, "
                          "1.0]}\n  nesterov: {choice: [true, false]}\n  beta: {loguniform: "
                          "[0.001, 0.1]}\n  damp: {uniform: [0.0, 0.5]}\n",
                     &b, &err) == 0);
    for (uint64_t i = 0; i < 50; i++) {
        tp_rng_t ra, rb;
        tp__rng_seed(&ra, 9, i), tp__rng_seed(&rb, 9, i);
        json_t *ca = tp__space_sample(&a.space, &ra), *cb = tp__space_sample(&b.space, &rb);
        const char *k;
        json_t *v;
        json_object_foreach(ca, k, v) TP_CHECK(json_equal(v, json_object_get(cb, k)));
        json_decref(ca), json_decref(cb);
    }
    tp__experiment_free(&a), tp__experiment_free(&b);
}

static const char *GRID = HEAD "space:\n"
                               "  arch: {grid: [mlp, cnn]}\n"
                               "  width: {grid: [8, 16, 32], when: {arch: cnn}}\n"
                               "  depth: {int: [1, 3]}\n"
                               "  kernel: {grid: [3, 5], when: {width: [16, 32]}}\n"
                               "search: {algorithm: grid}\n";

/* The oracle: every combination of every value, pruned, deduplicated. */
static json_t *all_configs_oracle(const tp_space_t *sp) {
    json_t *seen = json_object();
    const char *arch[] = {"mlp", "cnn"};
    for (int a = 0; a < 2; a++)
        for (int w = 8; w <= 32; w *= 2)
            for (int d = 1; d <= 3; d++)
                for (int k = 3; k <= 5; k += 2) {
                    json_t *c = json_pack("{s:s, s:i, s:i, s:i}", "arch", arch[a], "width", w,
                                          "depth", d, "kernel", k);
                    tp__space_prune(sp, c);
                    char *t = json_dumps(c, JSON_COMPACT | JSON_SORT_KEYS);
                    json_object_set_new(seen, t, json_true());
                    free(t), json_decref(c);
                }
    return seen;
}

TP_TEST(test_grid_enumerates_each_valid_combination_once) {
    tp_experiment_t x;
    tp_error_t err;
    TP_REQUIRE(parse(GRID, &x, &err) == 0);
    json_t *want = all_configs_oracle(&x.space);
    /* mlp: 3 depths; cnn width 8: 3; cnn width 16/32 x kernel 3/5: 12 */
    TP_CHECK_INT(json_object_size(want), 18);
    TP_CHECK_INT(tp__space_grid_size(&x.space), 18);
    tp_search_cfg_t cfg = {.algorithm = "grid", .trials = 1, .seed = 1};
    tp_searcher_t *s = tp__searcher_new(&x.space, &cfg, 0, &err);
    TP_REQUIRE(s);
    TP_CHECK_INT(s->ops->total(s), 18);
    json_t *got = json_object();
    json_t *c;
    uint64_t i = 0;
    while (s->ops->ask(s, i, 0, &c) == 1) {
        char *t = json_dumps(c, JSON_COMPACT | JSON_SORT_KEYS);
        TP_CHECK(json_object_get(want, t) != NULL); /* a valid configuration */
        TP_CHECK(json_object_get(got, t) == NULL);  /* never twice */
        json_object_set_new(got, t, json_true());
        free(t), json_decref(c);
        i++;
    }
    TP_CHECK_INT(i, 18);
    TP_CHECK(json_equal(got, want));
    /* the oracle catches a planted error: ignoring the conditions gives duplicates */
    x.space.conditional = 0;
    TP_CHECK(tp__space_grid_size(&x.space) != json_object_size(want));
    x.space.conditional = 1;
    json_decref(got), json_decref(want);
    tp__searcher_free(s);
    tp__experiment_free(&x);
}

/* The objective of the TPE test: adam is flat at 1.0; sgd reaches 0 at
 * momentum 0.9. */
static double tree_loss(const json_t *c) {
    if (is(c, "opt", "adam")) return 1.0;
    double m = json_real_value(json_object_get(c, "momentum"));
    return (m - 0.9) * (m - 0.9) * 4;
}

TP_TEST(test_tpe_samples_the_tree_and_learns_the_branch_and_its_child) {
    tp_experiment_t x;
    tp_error_t err;
    TP_REQUIRE(parse(TREE, &x, &err) == 0);
    tp_search_cfg_t cfg = {.algorithm = "tpe", .trials = 80, .seed = 4};
    tp_searcher_t *s = tp__searcher_new(&x.space, &cfg, 0, &err);
    TP_REQUIRE(s);
    int bad = 0, late_sgd = 0, late_close = 0;
    for (uint64_t i = 0; i < 80; i++) {
        json_t *c;
        TP_REQUIRE(s->ops->ask(s, i, 0, &c) == 1);
        bad += !tree_ok(c);
        double loss = tree_loss(c);
        if (i >= 40) {
            late_sgd += is(c, "opt", "sgd");
            late_close += is(c, "opt", "sgd") && loss < 0.04; /* momentum within 0.1 of 0.9 */
        }
        s->ops->tell(s, i, c, loss, 0);
        json_decref(c);
    }
    TP_CHECK_INT(bad, 0);
    TP_CHECK(late_sgd >= 30);   /* of 40: the good branch dominates */
    TP_CHECK(late_close >= 15); /* and its child is modelled over the sgd trials */
    tp__searcher_free(s);
    tp__experiment_free(&x);
}

TP_TEST(test_check_config_validates_against_the_tree) {
    tp_experiment_t x;
    tp_error_t err;
    TP_REQUIRE(parse(TREE, &x, &err) == 0);
    json_t *ok = json_pack("{s:s, s:f}", "opt", "adam", "beta", 0.01);
    TP_CHECK_INT(tp__space_check_config(&x.space, ok, &err), 0);
    json_t *extra = json_pack("{s:s, s:f, s:f}", "opt", "adam", "beta", 0.01, "momentum", 0.5);
    TP_CHECK_INT(tp__space_check_config(&x.space, extra, &err), -EINVAL);
    TP_CHECK(strstr(err.msg, "\"momentum\" is given but inactive") != NULL);
    json_t *missing = json_pack("{s:s}", "opt", "adam");
    TP_CHECK_INT(tp__space_check_config(&x.space, missing, &err), -EINVAL);
    TP_CHECK(strstr(err.msg, "\"beta\" is missing") != NULL);
    json_t *out = json_pack("{s:s, s:f}", "opt", "adam", "beta", 0.5);
    TP_CHECK_INT(tp__space_check_config(&x.space, out, &err), -EINVAL);
    TP_CHECK(strstr(err.msg, "beta = 0.5 is outside its domain") != NULL);
    json_t *unknown = json_pack("{s:s, s:f, s:i}", "opt", "adam", "beta", 0.01, "lr", 1);
    TP_CHECK_INT(tp__space_check_config(&x.space, unknown, &err), -EINVAL);
    TP_CHECK(strstr(err.msg, "\"lr\" is no parameter") != NULL);
    json_decref(ok), json_decref(extra), json_decref(missing), json_decref(out);
    json_decref(unknown);
    tp__experiment_free(&x);
}

/* Parse HEAD + space and expect an error starting with where and holding needle. */
static int parse_fails(const char *space, const char *where, const char *needle) {
    char text[2048];
    snprintf(text, sizeof text, HEAD "space:\n%s", space);
    tp_experiment_t x;
    tp_error_t err;
    if (parse(text, &x, &err) == 0) {
        tp__experiment_free(&x);
        fprintf(stderr, "  parsed, expected %s\n", needle);
        return 0;
    }
    int ok = !strncmp(err.msg, where, strlen(where)) && strstr(err.msg, needle);
    if (!ok) fprintf(stderr, "  got: %s\n", err.msg);
    return ok;
}

TP_TEST(test_condition_errors_say_what_and_where) {
    TP_CHECK(parse_fails("  opt: {choice: [sgd, adam]}\n"
                         "  m: {uniform: [0, 1], when: {optt: sgd}}\n",
                         "t.yaml:6:31: ",
                         "names \"optt\", which is no parameter; did you mean "
                         "\"opt\"?"));
    TP_CHECK(parse_fails("  opt: {choice: [sgd, adam]}\n"
                         "  m: {uniform: [0, 1], when: {opt: [sgd, rmsprop]}}\n",
                         "t.yaml:6:31: ",
                         "opt = rmsprop, a value \"opt\" never takes; its "
                         "values: sgd, adam"));
    TP_CHECK(parse_fails("  a: {choice: [1, 2], when: {b: 1}}\n"
                         "  b: {choice: [1, 2], when: {c: 1}}\n"
                         "  c: {choice: [1, 2], when: {a: 2}}\n",
                         "t.yaml:", "conditions form a cycle (a -> b -> c -> a"));
    TP_CHECK(parse_fails("  a: {choice: [1, 2], when: {a: 1}}\n",
                         "t.yaml:5:30: ", "cannot depend on itself"));
    TP_CHECK(parse_fails("  lr: {uniform: [0, 1]}\n"
                         "  m: {uniform: [0, 1], when: {lr: 0.5}}\n",
                         "t.yaml:6:31: ", "a continuous parameter"));
    TP_CHECK(parse_fails("  n: {int: [1, 4]}\n"
                         "  m: {uniform: [0, 1], when: {n: [2, 9]}}\n",
                         "t.yaml:6:31: ",
                         "n = 9, a value \"n\" never takes; its values: an "
                         "integer from 1 to 4"));
    TP_CHECK(parse_fails("  n: {int: [1, 4]}\n"
                         "  m: {uniform: [0, 1], when: {n: {x: 1}}}\n",
                         "t.yaml:6:34: ", "must be a value or a list of values"));
    TP_CHECK(parse_fails("  n: {int: [1, 4]}\n"
                         "  m: {uniform: [0, 1], when: nope}\n",
                         "t.yaml:6:30: ", "\"when\" must be a mapping"));
}

int main(void) {
    return tp_test_main();
}
