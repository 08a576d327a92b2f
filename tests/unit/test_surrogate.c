/* Unit tests for the surrogate wrapper (search/surrogate.h): surrogates run
 * with param = value, the top `promote` are promoted to full size once the
 * eager share has ended and at the end (nothing in between), ranking by
 * rung then value, and the same calls give the same decisions (what resume
 * relies on). */
#include <errno.h>
#include <math.h>
#include <stdlib.h>

#include "search/surrogate.h"
#include "tp_test.h"

static void build_space(tp_space_t *sp) {
    tp__space_init(sp);
    tp_param_t x = {.name = tp__strdup("x"), .kind = TP_DOM_UNIFORM, .lo = 0, .hi = 1};
    tp__space_add(sp, &x);
}

static tp_scheduler_t *make(const tp_space_t *sp, const char *name, uint64_t trials, double max,
                            int promote, double eager) {
    tp_scheduler_cfg_t cfg = {.scheduler = name,
                              .sampler = {.algorithm = "random", .trials = trials, .seed = 1},
                              .budget = {.name = max > 0 ? "epochs" : NULL, .min = 1, .max = max},
                              .maximize = 1};
    tp_error_t err = {0};
    tp_scheduler_t *in = tp__scheduler_new(sp, &cfg, &err);
    if (!in) return NULL;
    tp_surrogate_cfg_t sc = {
        .param = "width_mult", .value = 0.125, .promote = promote, .eager = eager};
    tp_scheduler_t *s = tp__surrogate_wrap(in, &sc, &err);
    if (!s) fprintf(stderr, "  wrap: %s\n", err.msg);
    return s;
}

/* The next job at `now`; its config's width_mult into *width (NaN without a config). */
static int next_at(tp_scheduler_t *s, double now, tp_job_t *job, double *width) {
    memset(job, 0, sizeof *job);
    int rc = s->ops->next(s, now, job);
    json_t *w = json_object_get(job->config, "width_mult");
    *width = json_is_number(w) ? json_number_value(w) : NAN;
    json_decref(job->config);
    job->config = NULL;
    return rc;
}

static int next(tp_scheduler_t *s, tp_job_t *job, double *width) {
    return next_at(s, 0, job, width);
}

static double value_of(int64_t trial) {
    return (double)((trial * 37) % 23) / 23.0;
}

TP_TEST(test_surrogates_run_scaled_and_the_top_are_promoted_once_half_have_ended) {
    tp_space_t sp;
    build_space(&sp);
    tp_scheduler_t *s = make(&sp, "fifo", 10, 0, 3, 0.5);
    TP_REQUIRE(s != NULL);
    tp_job_t job;
    double w;
    for (int i = 0; i < 10; i++) { /* fifo hands out all ten surrogates at once */
        TP_CHECK_INT(next(s, &job, &w), 1);
        TP_CHECK_INT(job.trial, i);
        TP_CHECK(job.is_new && w == 0.125);
        int64_t src;
        TP_CHECK_INT(tp__surrogate_kind(s, i, &src), TP_KIND_SURROGATE);
        TP_CHECK_INT(src, -1);
    }
    TP_CHECK_INT(next(s, &job, &w), -EAGAIN); /* all run: wait, never 0 */
    for (int i = 0; i < 4; i++)
        s->ops->result(s, i, 0, 1, value_of(i), 1);
    TP_CHECK_INT(next(s, &job, &w), -EAGAIN); /* 4 of 10 ended: not yet */
    s->ops->result(s, 4, 0, 1, value_of(4), 1);
    /* 5 of 10 ended: the top 3 of trials 0..4 by value (max), best first */
    int64_t want[3];
    double v[5];
    for (int i = 0; i < 5; i++)
        v[i] = value_of(i);
    for (int k = 0; k < 3; k++) {
        int best = -1;
        for (int i = 0; i < 5; i++) {
            int taken = 0;
            for (int j = 0; j < k; j++)
                taken |= want[j] == i;
            if (!taken && (best < 0 || v[i] > v[best])) best = i;
        }
        want[k] = best;
    }
    for (int k = 0; k < 3; k++) {
        TP_CHECK_INT(next(s, &job, &w), 1);
        TP_CHECK_INT(job.trial, 10 + k);
        TP_CHECK(job.is_new && w == 1.0);
        int64_t src;
        TP_CHECK_INT(tp__surrogate_kind(s, job.trial, &src), TP_KIND_TARGET);
        TP_CHECK_INT(src, want[k]);
        TP_CHECK_CONTAINS(job.why, "target");
        TP_CHECK(s->ops->final(s, job.trial, job.rung));
    }
    TP_CHECK_INT(next(s, &job, &w), -EAGAIN);
    /* a target's value never ranks as a surrogate's: a huge one promotes nothing */
    s->ops->result(s, 10, 0, 1, 1e9, 1);
    TP_CHECK_INT(next(s, &job, &w), -EAGAIN);
    /* the rest end, trial 9 with the best value of all: it is promoted too */
    for (int i = 5; i < 10; i++)
        s->ops->result(s, i, 0, 1, i == 9 ? 2.0 : 0.0, 1);
    TP_CHECK_INT(next(s, &job, &w), 1);
    int64_t src;
    TP_CHECK_INT(tp__surrogate_kind(s, job.trial, &src), TP_KIND_TARGET);
    TP_CHECK_INT(src, 9);
    TP_CHECK_INT(job.trial, 13);
    TP_CHECK_INT(next(s, &job, &w), 0); /* every surrogate ended, the final top 3 all ran */
    TP_CHECK_INT(s->ops->total(s), 13);
    tp__scheduler_free(s);
    tp__space_free(&sp);
}

TP_TEST(test_leaders_found_after_the_eager_point_wait_for_the_end_and_overtaken_ones_never_run) {
    tp_space_t sp;
    build_space(&sp);
    tp_scheduler_t *s = make(&sp, "fifo", 10, 0, 2, 0.5);
    TP_REQUIRE(s != NULL);
    tp_job_t job;
    double w;
    int64_t src;
    for (int i = 0; i < 10; i++)
        TP_CHECK_INT(next(s, &job, &w), 1);
    for (int i = 0; i < 5; i++)
        s->ops->result(s, i, 0, 1, 0.1 * i, 1); /* top 2: 4, 3 */
    TP_CHECK_INT(next(s, &job, &w), 1);
    TP_CHECK(tp__surrogate_kind(s, job.trial, &src) == TP_KIND_TARGET && src == 4);
    TP_CHECK_INT(next(s, &job, &w), 1);
    TP_CHECK(tp__surrogate_kind(s, job.trial, &src) == TP_KIND_TARGET && src == 3);
    /* trial 5 leads, then 6 and 7 overtake it: no target while the search runs */
    s->ops->result(s, 5, 0, 1, 0.6, 1);
    TP_CHECK_INT(next(s, &job, &w), -EAGAIN);
    s->ops->result(s, 6, 0, 1, 0.7, 1);
    s->ops->result(s, 7, 0, 1, 0.8, 1);
    TP_CHECK_INT(next(s, &job, &w), -EAGAIN);
    s->ops->result(s, 8, 0, 1, 0.0, 1);
    s->ops->result(s, 9, 0, 1, 0.0, 1);
    /* the end: the final top 2 (7, 6); trial 5, overtaken, never runs at full size */
    TP_CHECK_INT(next(s, &job, &w), 1);
    TP_CHECK(tp__surrogate_kind(s, job.trial, &src) == TP_KIND_TARGET && src == 7 && w == 1.0);
    TP_CHECK_INT(next(s, &job, &w), 1);
    TP_CHECK(tp__surrogate_kind(s, job.trial, &src) == TP_KIND_TARGET && src == 6);
    TP_CHECK_INT(next(s, &job, &w), 0);
    tp__scheduler_free(s);
    tp__space_free(&sp);
}

TP_TEST(test_eager_one_promotes_only_when_the_search_is_over) {
    tp_space_t sp;
    build_space(&sp);
    tp_scheduler_t *s = make(&sp, "fifo", 4, 0, 2, 1.0);
    TP_REQUIRE(s != NULL);
    tp_job_t job;
    double w;
    for (int i = 0; i < 4; i++)
        TP_CHECK_INT(next(s, &job, &w), 1);
    for (int i = 0; i < 3; i++)
        s->ops->result(s, i, 0, 1, (double)i, 1);
    TP_CHECK_INT(next(s, &job, &w), -EAGAIN); /* trial 3 still runs */
    s->ops->result(s, 3, 0, 0, NAN, 1);       /* it fails: out of the ranking */
    int64_t src;
    TP_CHECK_INT(next(s, &job, &w), 1);
    TP_CHECK(tp__surrogate_kind(s, job.trial, &src) == TP_KIND_TARGET && src == 2 && w == 1.0);
    TP_CHECK_INT(next(s, &job, &w), 1);
    TP_CHECK(tp__surrogate_kind(s, job.trial, &src) == TP_KIND_TARGET && src == 1);
    TP_CHECK_INT(next(s, &job, &w), 0);
    tp__scheduler_free(s);
    tp__space_free(&sp);
}

TP_TEST(test_under_asha_a_trial_of_a_higher_rung_outranks_a_better_value_at_rung_0) {
    tp_space_t sp;
    build_space(&sp);
    tp_scheduler_t *s = make(&sp, "asha", 3, 3, 1, 1.0); /* rungs 1, 3 */
    TP_REQUIRE(s != NULL);
    tp_job_t job;
    double w;
    for (int i = 0; i < 3; i++)
        TP_CHECK_INT(next(s, &job, &w), 1);
    s->ops->result(s, 0, 0, 1, 0.5, 1);
    s->ops->result(s, 1, 0, 1, 0.9, 1);
    s->ops->result(s, 2, 0, 1, 0.1, 1);
    TP_CHECK_INT(next(s, &job, &w), 1); /* asha promotes trial 1 to rung 1 */
    TP_CHECK(!job.is_new && job.trial == 1 && job.rung == 1);
    s->ops->result(s, 1, 1, 1, 0.6, 1); /* worse than 0.9, but after 3 epochs */
    TP_CHECK_INT(next(s, &job, &w), 1);
    int64_t src;
    TP_CHECK(tp__surrogate_kind(s, job.trial, &src) == TP_KIND_TARGET && src == 1);
    TP_CHECK_INT(job.rung, 1); /* the last rung, the full budget */
    TP_CHECK(job.budget == 3);
    TP_CHECK_INT(next(s, &job, &w), 0);
    tp__scheduler_free(s);
    tp__space_free(&sp);
}

TP_TEST(test_a_bad_surrogate_setting_is_refused_with_what_is_wrong) {
    tp_space_t sp;
    build_space(&sp);
    tp_scheduler_cfg_t cfg = {.scheduler = "fifo", .sampler = {.algorithm = "random", .trials = 3}};
    tp_error_t err = {0};
    tp_surrogate_cfg_t sc = {.param = "width_mult", .value = 0.125, .promote = 0, .eager = 0.5};
    TP_CHECK(tp__surrogate_wrap(tp__scheduler_new(&sp, &cfg, &err), &sc, &err) == NULL);
    TP_CHECK_CONTAINS(err.msg, "promote must be >= 1");
    sc.promote = 1, sc.eager = 0;
    TP_CHECK(tp__surrogate_wrap(tp__scheduler_new(&sp, &cfg, &err), &sc, &err) == NULL);
    TP_CHECK_CONTAINS(err.msg, "eager must be in (0, 1]");
    int64_t src;
    tp_scheduler_t *plain = tp__scheduler_new(&sp, &cfg, &err);
    TP_CHECK_INT(tp__surrogate_kind(plain, 0, &src), TP_KIND_PLAIN);
    tp__scheduler_free(plain);
    tp__space_free(&sp);
}

/* A run at concurrency 2 with results out of order, as a list of calls. */
static json_t *drive(tp_scheduler_t *s) {
    json_t *log = json_array();
    int64_t running[64];
    size_t nr = 0;
    for (int step = 0; step < 400; step++) {
        tp_job_t job;
        memset(&job, 0, sizeof job);
        int rc = nr < 2 ? s->ops->next(s, 0, &job) : -EAGAIN;
        if (rc == 1) {
            int64_t src;
            tp_trial_kind_t k = tp__surrogate_kind(s, job.trial, &src);
            json_array_append_new(log,
                                  json_pack("{sI si so* si sI}", "trial", (json_int_t)job.trial,
                                            "rung", job.rung, "config", job.config, "kind", (int)k,
                                            "src", (json_int_t)src));
            running[nr++] = job.trial * 16 + job.rung;
            continue;
        }
        if (rc == 0 && nr == 0) break;
        if (nr == 0) continue;
        size_t i = (size_t)step % nr;
        int64_t t = running[i] / 16;
        int rung = (int)(running[i] % 16);
        memmove(running + i, running + i + 1, (--nr - i) * sizeof *running);
        s->ops->result(s, t, rung, 1, value_of(t) + 0.1 * rung, 1);
    }
    return log;
}

TP_TEST(test_same_calls_give_the_same_surrogates_and_targets_on_replay) {
    tp_space_t sp;
    build_space(&sp);
    tp_scheduler_t *a = make(&sp, "asha", 12, 9, 3, 0.5), *b = make(&sp, "asha", 12, 9, 3, 0.5);
    json_t *la = drive(a), *lb = drive(b);
    TP_CHECK(json_array_size(la) > 15);
    TP_CHECK(json_equal(la, lb));
    size_t i, targets = 0;
    json_t *e;
    json_array_foreach(la, i, e) targets +=
        json_integer_value(json_object_get(e, "kind")) == TP_KIND_TARGET;
    TP_CHECK(targets >= 3);
    json_decref(la), json_decref(lb);
    tp__scheduler_free(a), tp__scheduler_free(b);
    tp__space_free(&sp);
}

/* A job's timing for trial t: `units` budget units, 10 s of start-up, 20 s per unit. */
static void timed_result(tp_scheduler_t *s, int64_t t, int rung, double units, double value,
                         double now) {
    tp_timing_t tm = {
        .trial = t, .rung = rung, .units = units, .run_s = 10 + 20 * units, .unit_s = 20};
    s->ops->timing(s, &tm, now);
    s->ops->result(s, t, rung, 1, value, now);
}

TP_TEST(test_hypersched_inside_gets_the_deadline_and_timings_and_refuses_in_outer_numbers) {
    tp_space_t sp;
    build_space(&sp);
    tp_scheduler_cfg_t cfg = {.scheduler = "hypersched",
                              .sampler = {.algorithm = "random", .trials = 5, .seed = 1},
                              .budget = {.name = "epochs", .min = 1, .max = 3, .eta = 3},
                              .maximize = 1};
    tp_error_t err = {0};
    tp_surrogate_cfg_t sc = {.param = "width_mult", .value = 0.125, .promote = 1, .eager = 0.2};
    tp_scheduler_t *s = tp__surrogate_wrap(tp__scheduler_new(&sp, &cfg, &err), &sc, &err);
    TP_REQUIRE(s != NULL);
    /* only a scheduler that plans against time gets them (asha: the run journals none) */
    TP_REQUIRE(s->ops->deadline && s->ops->timing);
    tp_scheduler_t *plain = make(&sp, "asha", 5, 3, 1, 0.2);
    TP_CHECK(plain && !plain->ops->deadline && !plain->ops->timing);
    tp__scheduler_free(plain);
    s->ops->deadline(s, 1000);
    tp_job_t job;
    double w;
    for (int i = 0; i < 4; i++) { /* nothing measured yet: four start */
        TP_CHECK_INT(next(s, &job, &w), 1);
        TP_CHECK_INT(job.trial, i);
    }
    static const double v0[4] = {0.9, 0.1, 0.2, 0.3};
    for (int i = 0; i < 4; i++)
        timed_result(s, i, 0, 1, v0[i], 30 + i);
    /* trial 0 goes to rung 1 (budget 3), the last: it ends, and the eager 1 of 5 opens */
    TP_CHECK_INT(next(s, &job, &w), 1);
    TP_CHECK(job.trial == 0 && !job.is_new && job.rung == 1);
    timed_result(s, 0, 1, 2, 0.95, 100);
    TP_CHECK_INT(next(s, &job, &w), 1);
    int64_t src;
    TP_CHECK_INT(job.trial, 4); /* trial 0's target takes number 4 */
    TP_CHECK_INT(tp__surrogate_kind(s, 4, &src), TP_KIND_TARGET);
    TP_CHECK(w == 1.0);
    /* the fifth surrogate is trial 5 outside, 4 inside */
    TP_CHECK_INT(next(s, &job, &w), 1);
    TP_CHECK(job.trial == 5 && job.is_new && w == 0.125);
    timed_result(s, 5, 0, 1, 0.99, 150);
    /* 10 s before the deadline its promotion needs 10 s + 2 x 20 s (30 s to its last step):
     * refused, in outer numbers, and it has ended */
    TP_CHECK_INT(next_at(s, 990, &job, &w), 1);
    TP_CHECK(job.refused);
    TP_CHECK_INT(job.trial, 5);
    TP_CHECK_CONTAINS(job.why, "not promoted, the deadline is too near: needs 50 s");
    TP_CHECK_INT(tp__surrogate_kind(s, 5, &src), TP_KIND_SURROGATE);
    TP_CHECK_INT(next_at(s, 990, &job, &w), 1);
    if (job.trial == -1) { /* new trials closed (when the sampler has not said it is done) */
        TP_CHECK_CONTAINS(job.why, "no new trials");
        TP_CHECK_INT(next_at(s, 990, &job, &w), 1);
    }
    TP_CHECK(job.refused && job.trial == 3); /* the best waiting at rung 0: not continued */
    TP_CHECK_CONTAINS(job.why, "not continued, the deadline is too near");
    /* a target's timing is not the surrogate model's: not told to the inner scheduler */
    tp_timing_t tm = {.trial = 4, .rung = 1, .units = 3, .run_s = 1e6, .unit_s = 1e5};
    s->ops->timing(s, &tm, 995);
    tp__scheduler_free(s);
    tp__space_free(&sp);
}

int main(void) {
    return tp_test_main();
}
