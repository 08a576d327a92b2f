/* Unit tests for PB2, scheduler pbt's `explore_with: pb2` (search/pb2.c):
 * the time-varying kernel against its formula, a drift in time fitted as a
 * shorter time scale, the paper's behaviour on a population whose reward
 * grows fastest at a known learning rate (PB2's explored rates land nearer
 * it than pbt's perturbation's, over seeds, and follow it when it moves),
 * determinism, and settings. */
#include <errno.h>
#include <math.h>
#include <stdlib.h>

#include "search/gp.h"
#include "search/pb2.h"
#include "search/scheduler.h"
#include "tp_test.h"

TP_TEST(test_the_time_varying_kernel_is_matern_times_an_exponential_decay_in_time) {
    /* two observations (x, t), the prediction at a third, against the 2 x 2 solve by hand */
    double x[] = {0.2, 0.0, 0.7, 0.5}, y[] = {1.0, -0.5}, ls[] = {0.4, 0.3};
    double amp = 1.3, noise = 0.01, q[] = {0.5, 0.6};
    tp_gp_t g = {0};
    TP_REQUIRE(tp__gp_condition_timed(&g, x, y, 2, 2, ls, amp, noise) == 0);
    double mean, var;
    tp__gp_predict(&g, q, &mean, &var);
#define K(a, b)                                                                                    \
    (amp * tp__gp_matern52(fabs((a)[0] - (b)[0]) / ls[0]) * exp(-fabs((a)[1] - (b)[1]) / ls[1]))
    double k11 = K(x, x) + noise + 1e-6, k22 = K(x + 2, x + 2) + noise + 1e-6;
    double k12 = K(x, x + 2), ka = K(q, x), kb = K(q, x + 2);
#undef K
    double det = k11 * k22 - k12 * k12;
    double a1 = (k22 * y[0] - k12 * y[1]) / det, a2 = (k11 * y[1] - k12 * y[0]) / det;
    double v = amp - (ka * (k22 * ka - k12 * kb) + kb * (k11 * kb - k12 * ka)) / det;
    TP_CHECK_NEAR(mean, ka * a1 + kb * a2, 1e-10);
    TP_CHECK_NEAR(var, v, 1e-10);
    tp__gp_free(&g);
}

/* The time scale fitted to sin(6 x + drift t) on a 6 x 6 grid of (x, t). */
static double fitted_time_scale(double drift) {
    double x[72], y[36], ls[2], amp, noise;
    for (int i = 0; i < 36; i++) {
        x[2 * i] = (i % 6) / 5.0, x[2 * i + 1] = (i / 6) / 5.0;
        y[i] = sin(6 * x[2 * i] + drift * x[2 * i + 1]);
    }
    double m = 0, s = 0;
    for (int i = 0; i < 36; i++)
        m += y[i] / 36;
    for (int i = 0; i < 36; i++)
        s += (y[i] - m) * (y[i] - m) / 36;
    for (int i = 0; i < 36; i++)
        y[i] = (y[i] - m) / sqrt(s);
    if (tp__gp_fit_hyper_timed(x, y, 36, 2, ls, &amp, &noise) != 0) return NAN;
    return ls[1];
}

TP_TEST(test_a_reward_that_drifts_in_time_is_fitted_with_a_shorter_time_scale) {
    double still = fitted_time_scale(0), moving = fitted_time_scale(6);
    TP_REQUIRE(isfinite(still) && isfinite(moving));
    TP_CHECK(moving < 0.5 * still);
}

/* ---- a population ---------------------------------------------------------------------- */

/* The learning rate whose epochs gain most at time t (epoch start / max): fixed, or
 * moving from 0.1 to 0.001 halfway. */
static double fixed_best(double t) {
    (void)t;
    return 0.01;
}
static double moving_best(double t) {
    return t < 0.5 ? 0.1 : 0.001;
}

typedef struct outcome {
    double dist;     /* mean |log10 lr - log10 best| of the rates explored from `from` on */
    size_t explored; /* how many */
    double best;     /* best final score */
    char *text;      /* every job's trial, donor and configuration, as JSON */
} outcome_t;

#define POP 8
#define MAX 12

/* A population of POP (lr loguniform in [1e-4, 1]) trains to MAX epochs in jobs of 1;
 * each epoch's score gain is exp(-(log10 lr - log10 best(t))^2 / 0.5) plus noise
 * N(0, 0.05^2) from (seed, trial, epoch), and the score is maximized. An exploit copies
 * the donor's score (its checkpoint). Explored rates are measured for exploits at
 * budget >= from. */
static outcome_t train(uint64_t seed, int pb2, double (*best)(double), double from) {
    tp_space_t sp;
    tp__space_init(&sp);
    tp_param_t lr = {.name = tp__strdup("lr"), .kind = TP_DOM_LOGUNIFORM, .lo = 1e-4, .hi = 1};
    tp__space_add(&sp, &lr);
    tp_scheduler_cfg_t cfg = {.scheduler = "pbt",
                              .sampler = {.algorithm = "random", .trials = POP, .seed = seed},
                              .budget = {.name = "epochs", .min = 1, .max = MAX},
                              .maximize = 1,
                              .pbt = {.interval = 1, .pb2 = pb2}};
    tp_error_t err = {0};
    tp_scheduler_t *s = tp__scheduler_new(&sp, &cfg, &err);
    outcome_t o = {.best = -INFINITY};
    if (!s) {
        fprintf(stderr, "  scheduler_new: %s\n", err.msg);
        tp__space_free(&sp);
        return o;
    }
    json_t *conf[POP] = {0}, *text = json_array();
    double score[POP] = {0}, at[POP] = {0};
    for (;;) {
        tp_job_t jobs[POP];
        size_t n = 0;
        int rc;
        while (n < POP && (rc = s->ops->next(s, 0, &jobs[n])) == 1) {
            tp_job_t *j = &jobs[n++];
            if (j->is_new || j->exploit) {
                json_decref(conf[j->trial]);
                conf[j->trial] = j->config;
            }
            if (j->exploit) { /* the donor is paused at j->from: its checkpoint */
                score[j->trial] = score[j->donor], at[j->trial] = j->from;
                double x = json_number_value(json_object_get(j->config, "lr"));
                if (j->from >= from) {
                    o.dist += fabs(log10(x) - log10(best(j->from / MAX)));
                    o.explored++;
                }
            }
            json_array_append_new(text, json_pack("{s:I, s:I, s:O}", "t", (json_int_t)j->trial, "d",
                                                  (json_int_t)j->donor, "c", conf[j->trial]));
        }
        if (n == 0) break;
        for (size_t i = 0; i < n; i++) {
            const tp_job_t *j = &jobs[i];
            double x = json_number_value(json_object_get(conf[j->trial], "lr"));
            for (double e = at[j->trial]; e < j->budget - 1e-9; e++) {
                tp_rng_t r;
                tp__rng_seed(&r, seed * 1009 + (uint64_t)j->trial, (uint64_t)e);
                double z = log10(x) - log10(best(e / MAX));
                score[j->trial] += exp(-z * z / 0.5) + 0.05 * tp__rng_normal(&r);
            }
            at[j->trial] = j->budget;
            s->ops->result(s, j->trial, j->rung, 1, score[j->trial], 0);
            if (j->budget >= MAX && score[j->trial] > o.best) o.best = score[j->trial];
        }
    }
    if (o.explored) o.dist /= (double)o.explored;
    o.text = json_dumps(text, JSON_COMPACT);
    json_decref(text);
    for (int i = 0; i < POP; i++)
        json_decref(conf[i]);
    tp__scheduler_free(s);
    tp__space_free(&sp);
    return o;
}

static int cmp_dbl(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* Medians over seeds 1..10 of the mean distance and of the best score. */
static void medians(int pb2, double (*best)(double), double from, double *dist, double *score) {
    double d[10], b[10];
    for (int k = 0; k < 10; k++) {
        outcome_t o = train((uint64_t)k + 1, pb2, best, from);
        d[k] = o.explored ? o.dist : INFINITY;
        b[k] = o.best;
        free(o.text);
    }
    qsort(d, 10, sizeof *d, cmp_dbl);
    qsort(b, 10, sizeof *b, cmp_dbl);
    *dist = (d[4] + d[5]) / 2, *score = (b[4] + b[5]) / 2;
}

/* PB2 against perturbation where the best rate is best(t), the explored rates measured
 * from budget `from` on: PB2's land nearer the best rate and it ends with no worse a score. */
static void pb2_beats_perturbation(int *tp_failed_, const char *what, double (*best)(double),
                                   double from) {
    double d2, s2, dp, sp;
    medians(1, best, from, &d2, &s2);
    medians(0, best, from, &dp, &sp);
    printf("  %s: pb2 %.3f decades off, best score %.2f; perturb %.3f, %.2f\n", what, d2, s2, dp,
           sp);
    TP_CHECK(d2 < 0.75 * dp);
    TP_CHECK(d2 < 0.5);
    TP_CHECK(s2 >= sp);
}

TP_TEST(test_pb2_explores_nearer_the_best_learning_rate_than_perturbation) {
    /* from the second generation on (the first has no gains to model) */
    pb2_beats_perturbation(tp_failed_, "fixed best lr", fixed_best, 2);
}

TP_TEST(test_pb2_follows_a_best_learning_rate_that_moves_during_training) {
    /* the best rate drops from 0.1 to 0.001 at epoch 6: the exploits after it */
    pb2_beats_perturbation(tp_failed_, "moving best lr", moving_best, 8);
}

TP_TEST(test_the_same_calls_give_the_same_choices) {
    outcome_t a = train(7, 1, fixed_best, 0), b = train(7, 1, fixed_best, 0);
    outcome_t c = train(8, 1, fixed_best, 0);
    TP_REQUIRE(a.text && b.text && c.text);
    TP_CHECK_STR(a.text, b.text);
    TP_CHECK(strcmp(a.text, c.text) != 0);
    TP_CHECK(a.explored > 0);
    free(a.text), free(b.text), free(c.text);
}

TP_TEST(test_pb2_needs_a_numeric_parameter_to_explore) {
    tp_space_t sp;
    tp__space_init(&sp);
    tp_param_t a = {.name = tp__strdup("act"), .kind = TP_DOM_CHOICE, .nvalues = 2};
    a.values = tp__xcalloc(2, sizeof *a.values);
    a.values[0] = json_string("relu"), a.values[1] = json_string("tanh");
    tp__space_add(&sp, &a);
    tp_scheduler_cfg_t cfg = {.scheduler = "pbt",
                              .sampler = {.algorithm = "random", .trials = 4},
                              .budget = {.name = "epochs", .min = 1, .max = 6},
                              .pbt = {.interval = 2, .pb2 = 1}};
    tp_error_t err = {0};
    TP_CHECK(tp__scheduler_new(&sp, &cfg, &err) == NULL);
    TP_CHECK_CONTAINS(err.msg, "explore_with pb2");
    cfg.pbt.pb2 = 0; /* perturb resamples the choice */
    tp_scheduler_t *s = tp__scheduler_new(&sp, &cfg, &err);
    TP_CHECK(s != NULL);
    tp__scheduler_free(s);
    tp__space_free(&sp);
}

int main(void) {
    return tp_test_main();
}
