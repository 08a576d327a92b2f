/* Unit tests for the dehb sampler, pinned to Awad, Mallik and Hutter 2021:
 * the DE trial vector (rand/1, F = 0.5, binomial crossover CR = 0.5, the
 * boundary redrawn), the map from the unit cube to the space, a
 * subpopulation per budget (sizes max / b, DE's selection), a higher
 * budget's mutants drawn from the lower budget's best, a multi-fidelity toy
 * where it beats random, and replay. */
#include <errno.h>
#include <stdlib.h>

#include "search/dehb.h"
#include "search/scheduler.h"
#include "tp_test.h"

static void add_real(tp_space_t *sp, const char *name, double lo, double hi) {
    tp_param_t p = {.name = tp__strdup(name), .kind = TP_DOM_UNIFORM, .lo = lo, .hi = hi};
    tp__space_add(sp, &p);
}

/* x, y in [0, 1]. */
static void xy_space(tp_space_t *sp) {
    tp__space_init(sp);
    add_real(sp, "x", 0, 1);
    add_real(sp, "y", 0, 1);
}

static double num(const json_t *cfg, const char *name) {
    return json_number_value(json_object_get(cfg, name));
}

static int near(double a, double b) {
    return fabs(a - b) < 1e-12;
}

TP_TEST(test_dehb_trial_is_rand1_mutation_with_binomial_crossover) {
    const double t[4] = {0.1, 0.2, 0.3, 0.4}, r1[4] = {0.5, 0.5, 0.5, 0.5},
                 r2[4] = {0.9, 0.1, 0.6, 0.7}, r3[4] = {0.1, 0.3, 0.2, 0.5};
    const double v[4] = {0.9, 0.4, 0.7, 0.6}; /* r1 + 0.5 (r2 - r3) */
    double out[4];
    tp_rng_t rng;
    tp__rng_seed(&rng, 1, 2);
    /* CR = 1: the mutant whole */
    tp__dehb_trial(t, r1, r2, r3, 4, TP_DEHB_F, 1.0, &rng, out);
    for (int j = 0; j < 4; j++)
        TP_CHECK(near(out[j], v[j]));
    /* CR = 0: the target but for one coordinate, j_rand, from the mutant */
    for (int k = 0; k < 50; k++) {
        tp__dehb_trial(t, r1, r2, r3, 4, TP_DEHB_F, 0.0, &rng, out);
        int from_v = 0, from_t = 0;
        for (int j = 0; j < 4; j++)
            from_v += near(out[j], v[j]), from_t += near(out[j], t[j]);
        TP_CHECK_INT(from_v, 1);
        TP_CHECK_INT(from_t, 3);
    }
    /* CR = 0.5: each coordinate is the mutant's or the target's; the mutant's
     * share is (1 + 0.5 (d - 1)) / d = 0.625 with j_rand */
    size_t mutant = 0, n = 20000;
    for (size_t k = 0; k < n; k++) {
        tp__dehb_trial(t, r1, r2, r3, 4, TP_DEHB_F, TP_DEHB_CR, &rng, out);
        for (int j = 0; j < 4; j++) {
            TP_CHECK(near(out[j], v[j]) || near(out[j], t[j]));
            mutant += near(out[j], v[j]);
        }
    }
    double share = (double)mutant / (double)(4 * n);
    printf("  coordinates from the mutant: %.4f (0.625 expected)\n", share);
    TP_CHECK(share > 0.61 && share < 0.64);
    /* out of [0, 1]: redrawn uniformly (1.3 = 0.9 + 0.5 (0.9 - 0.1)) */
    const double a[1] = {0.9}, b[1] = {0.9}, c[1] = {0.1}, z[1] = {0.5};
    double in = 0;
    for (int k = 0; k < 200; k++) {
        tp__dehb_trial(z, a, b, c, 1, TP_DEHB_F, 1.0, &rng, out);
        TP_CHECK(out[0] >= 0 && out[0] <= 1);
        in += out[0];
    }
    TP_CHECK(in / 200 > 0.4 && in / 200 < 0.6); /* uniform, not clipped to 1 */
}

TP_TEST(test_dehb_maps_the_unit_cube_to_the_space) {
    tp_space_t sp;
    tp__space_init(&sp);
    add_real(&sp, "x", 2, 4);
    tp_param_t lr = {.name = tp__strdup("lr"), .kind = TP_DOM_LOGUNIFORM, .lo = 1e-4, .hi = 1};
    tp__space_add(&sp, &lr);
    tp_param_t n = {.name = tp__strdup("n"), .kind = TP_DOM_INT, .lo = 1, .hi = 5};
    tp__space_add(&sp, &n);
    tp_param_t c = {.name = tp__strdup("c"), .kind = TP_DOM_CHOICE, .nvalues = 4};
    c.values = tp__xcalloc(4, sizeof *c.values);
    for (int k = 0; k < 4; k++)
        c.values[k] = json_integer(10 * (k + 1));
    tp__space_add(&sp, &c);
    const double u[4] = {0.25, 0.5, 0.6, 0.3};
    json_t *cfg = tp__dehb_config(&sp, u);
    TP_CHECK(near(num(cfg, "x"), 2.5));
    TP_CHECK(fabs(num(cfg, "lr") - 1e-2) < 1e-12); /* the middle, in log */
    TP_CHECK(json_is_integer(json_object_get(cfg, "n")));
    TP_CHECK_INT(json_integer_value(json_object_get(cfg, "n")), 3);  /* round(1 + 4 x 0.6) */
    TP_CHECK_INT(json_integer_value(json_object_get(cfg, "c")), 20); /* bin [0.25, 0.5) */
    json_decref(cfg);
    const double hi[4] = {1, 1, 1, 1};
    cfg = tp__dehb_config(&sp, hi);
    TP_CHECK(near(num(cfg, "x"), 4));
    TP_CHECK_INT(json_integer_value(json_object_get(cfg, "n")), 5);
    TP_CHECK_INT(json_integer_value(json_object_get(cfg, "c")), 40); /* 1.0 is the last bin */
    json_decref(cfg);
    tp__space_free(&sp);
}

static tp_searcher_t *make(const tp_space_t *sp, uint64_t seed, double bmin, double bmax) {
    tp_search_cfg_t cfg = {
        .algorithm = "dehb", .seed = seed, .budget_min = bmin, .budget_max = bmax, .budget_eta = 3};
    return tp__searcher_new(sp, &cfg, 0, NULL);
}

/* Tell trial t at (x, 0.5) with value v at budget b. */
static void told(tp_searcher_t *s, uint64_t t, double x, double v, double b) {
    json_t *c = json_pack("{s:f, s:f}", "x", x, "y", 0.5);
    tp__searcher_tell(s, t, c, v, b, 0);
    json_decref(c);
}

static int member(const tp_searcher_t *s, double b, uint64_t t) {
    uint64_t ids[64];
    size_t cap, n = tp__dehb_subpop(s, b, ids, 64, &cap);
    for (size_t i = 0; i < n; i++)
        if (ids[i] == t) return 1;
    return 0;
}

TP_TEST(test_dehb_keeps_a_subpopulation_per_budget_sized_as_the_largest_bracket) {
    tp_space_t sp;
    xy_space(&sp);
    tp_searcher_t *s = make(&sp, 4, 1, 9); /* budgets 1, 3, 9: N = 9, 3, 1 */
    for (uint64_t t = 0; t < 9; t++)
        told(s, t, 0.1 * (double)t, 1.0 + (double)t, 1);
    uint64_t ids[16];
    size_t cap, n = tp__dehb_subpop(s, 1, ids, 16, &cap);
    TP_CHECK_INT(n, 9);
    TP_CHECK_INT(cap, 9);
    told(s, 9, 0.5, 0.5, 1); /* the lowest budget, full: changes by DE's selection only */
    TP_CHECK(!member(s, 1, 9));
    told(s, 8, 0.8, 0.25, 1); /* a member's later result: its fitness updated in place */
    TP_CHECK(member(s, 1, 8));
    told(s, 11, 0.5, NAN, 3); /* failed: never joins, even with room */
    TP_CHECK(!member(s, 3, 11));
    for (uint64_t t = 0; t < 4; t++)
        told(s, t, 0.1 * (double)t, 1.0 + (double)t, 3); /* promoted: 3 join, the 4th is worse */
    n = tp__dehb_subpop(s, 3, ids, 16, &cap);
    TP_CHECK_INT(n, 3);
    TP_CHECK_INT(cap, 3);
    TP_CHECK(!member(s, 3, 3));
    told(s, 0, 0.0, 0.1, 9);
    told(s, 1, 0.1, 0.05, 9); /* promoted into a higher budget, better: in place of the worst */
    n = tp__dehb_subpop(s, 9, ids, 16, &cap);
    TP_CHECK_INT(n, 1);
    TP_CHECK_INT(cap, 1);
    TP_CHECK(ids[0] == 1);
    /* DE's selection: a trial generated for budget 3 meets its target there */
    size_t seen = 0;
    for (uint64_t t = 20; t < 200 && seen < 2; t++) {
        json_t *c = NULL;
        TP_CHECK_INT(s->ops->ask(s, t, 0, &c), 1);
        double home;
        size_t slot;
        if (tp__dehb_home(s, t, &home, &slot) && home == 3) {
            n = tp__dehb_subpop(s, 3, ids, 16, &cap);
            uint64_t target = ids[slot];
            if (seen++ == 0) {
                tp__searcher_tell(s, t, c, 50, 3, 0); /* worse than its target: out */
                TP_CHECK(!member(s, 3, t) && member(s, 3, target));
            } else {
                tp__searcher_tell(s, t, c, 0.01, 3, 0); /* better: in its target's slot */
                n = tp__dehb_subpop(s, 3, ids, 16, &cap);
                TP_CHECK(ids[slot] == t && !member(s, 3, target));
            }
        }
        json_decref(c);
    }
    TP_CHECK_INT(seen, 2);
    tp__searcher_free(s);
    tp__space_free(&sp);
}

/* A dehb sampler over sp (budgets 1, 3, 9) told: at budget 1, the best three near x = 0.85
 * and six poor ones at x <= 0.3 (y = 0.5 in all); those three promoted to 3, one of them
 * to 9. */
static tp_searcher_t *three_good_promoted(const tp_space_t *sp) {
    tp_searcher_t *s = make(sp, 9, 1, 9);
    const double xs[9] = {0.05, 0.8, 0.1, 0.15, 0.85, 0.2, 0.25, 0.9, 0.3};
    for (uint64_t t = 0; t < 9; t++)
        told(s, t, xs[t], xs[t] > 0.5 ? 0.1 : 1.0, 1);
    told(s, 1, 0.8, 0.1, 3), told(s, 4, 0.85, 0.1, 3), told(s, 7, 0.9, 0.1, 3);
    told(s, 4, 0.85, 0.05, 9);
    return s;
}

TP_TEST(test_dehb_mutates_a_higher_budget_from_the_lower_budgets_best) {
    tp_space_t sp;
    xy_space(&sp);
    tp_searcher_t *s = three_good_promoted(&sp);
    size_t homes[3] = {0}, low1 = 0, n = 1320;
    for (uint64_t t = 100; t < 100 + n; t++) {
        json_t *c = NULL;
        TP_CHECK_INT(s->ops->ask(s, t, 0, &c), 1);
        double home, x = num(c, "x");
        size_t slot;
        TP_CHECK(tp__dehb_home(s, t, &home, &slot));
        homes[home == 1 ? 0 : home == 3 ? 1 : 2]++;
        if (home == 3) TP_CHECK(x >= 0.75 - 1e-9 && x <= 0.95 + 1e-9); /* parents: the top 3 */
        if (home == 1) low1 += x < 0.5;
        TP_CHECK(near(num(c, "y"), 0.5)); /* every parent and target has y = 0.5 */
        json_decref(c);
    }
    /* one Hyperband iteration over 1..9 (eta 3) evaluates 9, 3 + 5 and 1 + 1 + 3
     * configurations at budgets 1, 3 and 9: DEHB evolves them 9 : 8 : 5 */
    printf("  generated for budget 1, 3, 9: %zu, %zu, %zu of %zu (9 : 8 : 5 expected); "
           "budget 1's below x = 0.5: %zu\n",
           homes[0], homes[1], homes[2], n, low1);
    TP_CHECK(homes[0] > 470 && homes[0] < 610); /* 540 expected */
    TP_CHECK(homes[1] > 410 && homes[1] < 550); /* 480 */
    TP_CHECK(homes[2] > 240 && homes[2] < 360); /* 300 */
    TP_CHECK(low1 > homes[0] / 4);              /* budget 1's parents are all nine */
    tp__searcher_free(s);
    tp__space_free(&sp);
}

TP_TEST(test_dehb_evolves_the_budget_a_new_trial_starts_at) {
    tp_space_t sp;
    xy_space(&sp);
    tp_searcher_t *s = three_good_promoted(&sp); /* as above */
    size_t low1 = 0;
    for (uint64_t t = 100; t < 400; t++) {
        static const double starts[3] = {1, 3, 9};
        double start = starts[t % 3], home;
        size_t slot;
        json_t *c = NULL;
        TP_CHECK_INT(tp__searcher_ask(s, t, start, 0, &c), 1);
        TP_CHECK(tp__dehb_home(s, t, &home, &slot));
        TP_CHECK(home == start); /* the trial's own first budget, never another */
        double x = num(c, "x");
        if (start == 3) { /* target: budget 3's next member in turn; parents: budget 1's top 3 */
            TP_CHECK_INT(slot, (size_t)(t - 100) / 3 % 3);
            TP_CHECK(x >= 0.75 - 1e-9 && x <= 0.95 + 1e-9);
        }
        if (start == 9) TP_CHECK_INT(slot, 0); /* budget 9 holds one member */
        if (start == 1) low1 += x < 0.5;       /* budget 1's parents: all nine */
        json_decref(c);
    }
    TP_CHECK(low1 > 100 / 4);
    /* a budget no result has reached yet: the random searcher's draw, generated for none */
    tp_search_cfg_t rc = {.algorithm = "random", .seed = 9};
    tp_searcher_t *r = tp__searcher_new(&sp, &rc, 0, NULL);
    json_t *a = NULL, *b = NULL;
    TP_CHECK_INT(tp__searcher_ask(s, 500, 27, 0, &a), 1);
    TP_CHECK_INT(r->ops->ask(r, 500, 0, &b), 1);
    double home;
    size_t slot;
    TP_CHECK(json_equal(a, b) && !tp__dehb_home(s, 500, &home, &slot));
    json_decref(a), json_decref(b);
    tp__searcher_free(r);
    tp__searcher_free(s);
    tp__space_free(&sp);
}

/* The new trials scheduler `name` starts (budgets 1..9, eta 3, one job at a time, loss
 * (x - 0.3)^2 + 1 / budget) that dehb generated by DE: returns how many, with *budgets the
 * set of the budgets they were generated for as bits (1: budget 1, 2: 3, 4: 9) and
 * *elsewhere how many of them were generated for another budget than their first job's. */
static size_t homes_match_start(const char *name, unsigned *budgets, size_t *elsewhere) {
    tp_space_t sp;
    xy_space(&sp);
    tp_scheduler_cfg_t cfg = {.scheduler = name,
                              .sampler = {.algorithm = "dehb", .seed = 2, .trials = 120},
                              .budget = {.name = "epochs", .min = 1, .max = 9, .eta = 3}};
    tp_scheduler_t *s = tp__scheduler_new(&sp, &cfg, NULL);
    size_t homed = 0;
    *budgets = 0, *elsewhere = 0;
    json_t *configs = json_array();
    tp_job_t j;
    while (s && s->ops->next(s, 0, &j) == 1) {
        if (j.is_new) {
            json_array_append_new(configs, j.config);
            double home;
            size_t slot;
            if (tp__dehb_home(s->sampler, (uint64_t)j.trial, &home, &slot)) {
                *elsewhere += home != j.budget;
                homed++;
                *budgets |= home == 1 ? 1u : home == 3 ? 2u : 4u;
            }
        }
        double x = num(json_array_get(configs, (size_t)j.trial), "x");
        s->ops->result(s, j.trial, j.rung, 1, (x - 0.3) * (x - 0.3) + 1 / j.budget, 0);
    }
    json_decref(configs);
    tp__scheduler_free(s);
    tp__space_free(&sp);
    return homed;
}

TP_TEST(test_asha_and_hyperband_tell_dehb_the_budget_each_new_trial_starts_at) {
    unsigned budgets;
    size_t elsewhere, n = homes_match_start("asha", &budgets, &elsewhere);
    printf("  asha: %zu trials generated by DE, budgets %#x\n", n, budgets);
    TP_CHECK(n > 50);
    TP_CHECK_INT(elsewhere, 0);
    TP_CHECK_INT(budgets, 1); /* asha starts every trial at its lowest rung */
    n = homes_match_start("hyperband", &budgets, &elsewhere);
    printf("  hyperband: %zu trials generated by DE, budgets %#x\n", n, budgets);
    TP_CHECK(n > 50);
    TP_CHECK_INT(elsewhere, 0);
    TP_CHECK_INT(budgets, 7); /* brackets s = 2, 1, 0 start at 1, 3 and 9 */
}

TP_TEST(test_dehb_first_configurations_are_the_random_searchers_draws) {
    tp_space_t sp;
    xy_space(&sp);
    tp_searcher_t *s = make(&sp, 7, 1, 27); /* N = 27 at the lowest budget */
    tp_search_cfg_t rc = {.algorithm = "random", .seed = 7};
    tp_searcher_t *r = tp__searcher_new(&sp, &rc, 0, NULL);
    for (uint64_t i = 0; i < 27; i++) {
        json_t *a = NULL, *b = NULL;
        TP_CHECK_INT(s->ops->ask(s, i, 0, &a), 1);
        TP_CHECK_INT(r->ops->ask(r, i, 0, &b), 1);
        TP_CHECK(json_equal(a, b));
        tp__searcher_tell(s, i, a, num(a, "x"), 1, 0);
        json_decref(a), json_decref(b);
    }
    double home;
    size_t slot;
    json_t *c = NULL;
    TP_CHECK_INT(s->ops->ask(s, 27, 0, &c), 1);
    TP_CHECK(tp__dehb_home(s, 27, &home, &slot) && home == 1); /* then DE */
    json_decref(c);
    tp__searcher_free(r);
    tp__searcher_free(s);
    tp__space_free(&sp);
}

/* ---- a multi-fidelity toy inside ASHA ------------------------------------------------ */

#define TOY_D 4

/* A quadratic with its minimum 0 at c, measured with noise that shrinks as
 * 0.4 / sqrt(budget); the noise is a function of (seed, trial, rung). */
static double toy_true(const json_t *cfg) {
    static const double c[TOY_D] = {0.2, 0.7, 0.4, 0.6};
    static const char *names[TOY_D] = {"a", "b", "c", "d"};
    double v = 0;
    for (int j = 0; j < TOY_D; j++)
        v += (num(cfg, names[j]) - c[j]) * (num(cfg, names[j]) - c[j]);
    return v;
}

typedef struct toy_run {
    double best_true; /* true value of the best reported at the largest budget */
    size_t jobs;      /* evaluations */
    json_t *decided;  /* every job's (trial, rung), in order */
} toy_run_t;

/* The toy under ASHA (budgets 1..27, eta 3), 4 jobs at a time, the oldest
 * ending first, until `jobs` evaluations have run. */
static toy_run_t run_toy(const char *algo, uint64_t seed, size_t jobs) {
    tp_space_t sp;
    tp__space_init(&sp);
    static const char *names[TOY_D] = {"a", "b", "c", "d"};
    for (int j = 0; j < TOY_D; j++)
        add_real(&sp, names[j], 0, 1);
    tp_scheduler_cfg_t cfg = {.scheduler = "asha",
                              .sampler = {.algorithm = algo, .seed = seed},
                              .budget = {.name = "epochs", .min = 1, .max = 27, .eta = 3}};
    tp_scheduler_t *s = tp__scheduler_new(&sp, &cfg, NULL);
    toy_run_t out = {.best_true = INFINITY, .decided = json_array()};
    json_t *configs = json_array();
    tp_job_t run[4];
    size_t nrun = 0, started = 0;
    double best_top = INFINITY;
    while (s) {
        tp_job_t j;
        int rc = nrun < 4 && started < jobs ? s->ops->next(s, 0, &j) : -EAGAIN;
        if (rc == 1) {
            started++;
            if (j.is_new) json_array_append_new(configs, j.config);
            json_array_append_new(out.decided, json_pack("[I,i]", (json_int_t)j.trial, j.rung));
            run[nrun++] = j;
            continue;
        }
        if (nrun == 0) break;
        tp_job_t done = run[0];
        memmove(run, run + 1, --nrun * sizeof *run);
        const json_t *c = json_array_get(configs, (size_t)done.trial);
        tp_rng_t noise;
        tp__rng_seed(&noise, seed * 1000003 + (uint64_t)done.trial, (uint64_t)done.rung);
        double truth = toy_true(c), v = truth + 0.4 / sqrt(done.budget) * tp__rng_normal(&noise);
        s->ops->result(s, done.trial, done.rung, 1, v, 0);
        out.jobs++;
        if (done.budget >= 27 && v < best_top) best_top = v, out.best_true = truth;
    }
    json_decref(configs);
    tp__scheduler_free(s);
    tp__space_free(&sp);
    return out;
}

static int cmp_double(const void *pa, const void *pb) {
    double a = *(const double *)pa, b = *(const double *)pb;
    return (a > b) - (a < b);
}

/* Under asha every trial starts at budget 1, where the noise (0.4) drowns most of the signal,
 * and DE evolves that budget's population only: dehb 0.0432 against random 0.0434 (it was
 * 0.032 when trials were generated for higher budgets they might never reach, a rule that
 * lost to random in bench/mf_search). A thin margin: see docs/search.md, DEHB. */
TP_TEST(test_dehb_beats_random_on_a_noisy_multi_fidelity_quadratic) {
    enum { SEEDS = 10 };
    double dehb[SEEDS], rnd[SEEDS];
    size_t jd = 0, jr = 0;
    for (uint64_t seed = 0; seed < SEEDS; seed++) {
        toy_run_t a = run_toy("dehb", seed + 1, 1500), b = run_toy("random", seed + 1, 1500);
        dehb[seed] = a.best_true, rnd[seed] = b.best_true;
        jd += a.jobs, jr += b.jobs;
        json_decref(a.decided), json_decref(b.decided);
    }
    qsort(dehb, SEEDS, sizeof *dehb, cmp_double);
    qsort(rnd, SEEDS, sizeof *rnd, cmp_double);
    double md = (dehb[4] + dehb[5]) / 2, mr = (rnd[4] + rnd[5]) / 2;
    printf("  asha, 1500 evaluations, 10 seeds: median best true value dehb %.4f, random "
           "%.4f\n",
           md, mr);
    TP_CHECK(jd == 15000 && jr == 15000);
    TP_CHECK(md < mr);
}

TP_TEST(test_dehb_replays_the_same_decisions_from_its_seed) {
    toy_run_t a = run_toy("dehb", 3, 400), b = run_toy("dehb", 3, 400), c = run_toy("dehb", 4, 400);
    TP_CHECK(json_equal(a.decided, b.decided));
    TP_CHECK(a.best_true == b.best_true);
    TP_CHECK(a.best_true != c.best_true); /* another seed, another search */
    json_decref(a.decided), json_decref(b.decided), json_decref(c.decided);
}

int main(void) {
    return tp_test_main();
}
