/* Unit tests for hypersched: deadline-aware ASHA whose admission rule is fed
 * with measured timings (search/sched_hypersched.c). */
#include <errno.h>
#include <math.h>
#include <stdlib.h>

#include "search/scheduler.h"
#include "tp_test.h"

static tp_space_t spaces[2]; /* one per scheduler alive at once */
static int nspaces;

static tp_scheduler_t *make(const char *name, uint64_t trials) {
    tp_space_t *space = &spaces[nspaces++];
    tp__space_init(space);
    tp_param_t x = {.name = tp__strdup("x"), .kind = TP_DOM_UNIFORM, .lo = 0, .hi = 1};
    tp__space_add(space, &x);
    tp_scheduler_cfg_t cfg = {.scheduler = name,
                              .sampler = {.algorithm = "random", .trials = trials, .seed = 3},
                              .budget = {.name = "epochs", .min = 1, .max = 9, .eta = 3},
                              .maximize = 1};
    tp_error_t err = {0};
    tp_scheduler_t *s = tp__scheduler_new(space, &cfg, &err);
    if (!s) fprintf(stderr, "  scheduler_new: %s\n", err.msg);
    return s;
}

/* Free s and every space made so far. */
static void done(tp_scheduler_t *s) {
    tp__scheduler_free(s);
    while (nspaces > 0)
        tp__space_free(&spaces[--nspaces]);
}

static int next(tp_scheduler_t *s, double now, tp_job_t *job) {
    memset(job, 0, sizeof *job);
    int rc = s->ops->next(s, now, job);
    json_decref(job->config);
    job->config = NULL;
    return rc;
}

/* A job of `units` budget units that ran 2 s of start-up and 1 s per unit. */
static void timed(tp_scheduler_t *s, int64_t trial, int rung, double units, double now) {
    tp_timing_t t = {
        .trial = trial, .rung = rung, .units = units, .run_s = 2 + units, .unit_s = 1.0};
    s->ops->timing(s, &t, now);
}

/* n new trials at rung 0, each timed and ended with value i (in that order). */
static void rung0(tp_scheduler_t *s, int n) {
    tp_job_t j;
    for (int i = 0; i < n; i++) {
        if (next(s, 0, &j) != 1 || j.trial != i) fprintf(stderr, "  rung0: trial %d not new\n", i);
        timed(s, i, 0, 1, 3);
        s->ops->result(s, i, 0, 1, i, 3);
    }
}

TP_TEST(test_without_a_deadline_hypersched_decides_as_asha) {
    tp_scheduler_t *a = make("asha", 20), *h = make("hypersched", 20);
    TP_REQUIRE(a && h);
    for (int i = 0; i < 60; i++) {
        tp_job_t ja, jh;
        int ra = next(a, 0, &ja), rh = next(h, 0, &jh);
        TP_CHECK_INT(rh, ra);
        if (ra != 1) break;
        TP_CHECK_INT(jh.trial, ja.trial);
        TP_CHECK_INT(jh.rung, ja.rung);
        TP_CHECK_INT(jh.refused, 0);
        double v = (double)((ja.trial * 7) % 11) + ja.rung; /* a fixed pattern of values */
        a->ops->result(a, ja.trial, ja.rung, 1, v, 0);
        h->ops->result(h, jh.trial, jh.rung, 1, v, 0);
    }
    tp__scheduler_free(a);
    done(h); /* and a's space */
}

TP_TEST(test_with_nothing_measured_a_trial_starts_and_says_so) {
    tp_scheduler_t *s = make("hypersched", 5);
    TP_REQUIRE(s);
    s->ops->deadline(s, 100);
    tp_job_t j;
    TP_CHECK_INT(next(s, 0, &j), 1);
    TP_CHECK_INT(j.refused, 0);
    TP_CHECK_CONTAINS(j.why, "no timing measured yet");
    done(s);
}

TP_TEST(test_a_new_trial_that_cannot_reach_the_incumbents_budget_is_refused_once) {
    tp_scheduler_t *s = make("hypersched", 50);
    TP_REQUIRE(s);
    s->ops->deadline(s, 1000);
    tp_job_t j;
    /* rung 0: three trials, the best promoted to rung 1 (budget 3) */
    rung0(s, 3);
    TP_REQUIRE(next(s, 3, &j) == 1);
    TP_CHECK_INT(j.trial, 2);
    TP_CHECK_INT(j.rung, 1);
    timed(s, 2, 1, 2, 7);
    s->ops->result(s, 2, 1, 1, 10, 7);
    /* the incumbent is at budget 3: a new trial needs 2 x 2 s + 3 x 1 s = 7 s, 6 s to its
     * last step (which may be in flight at the deadline) */
    TP_REQUIRE(next(s, 994, &j) == 1);
    TP_CHECK_INT(j.refused, 0);
    TP_CHECK_INT(j.rung, 0);
    int64_t newest = j.trial;
    TP_REQUIRE(next(s, 994.5, &j) == 1); /* 5.5 s left: its last step would not start */
    TP_CHECK_INT(j.refused, 1);
    TP_CHECK_INT(j.trial, -1);
    TP_CHECK_CONTAINS(j.why, "no new trials, the deadline is too near: needs 7 s to reach the "
                             "incumbent's budget 3 (6 s to its last step; start-up 2.0 s, 1.00 s "
                             "per unit from 0), 6 s to the deadline");
    /* closed for good: the leader (at the incumbent's budget) may still go past it */
    TP_REQUIRE(next(s, 994.5, &j) == 1);
    TP_CHECK_INT(j.trial, 2);
    TP_CHECK_INT(j.rung, 2);
    TP_CHECK_CONTAINS(j.why, "continued to rung 2 (budget 9)");
    /* no new trial ever again; waiting trials that still fit go on, then it waits */
    int fresh = 0, again = 0, rc = 0;
    for (int i = 0; i < 20 && (rc = next(s, 994.5, &j)) == 1; i++) {
        fresh += j.is_new;
        again += j.refused && j.trial == -1;
    }
    TP_CHECK_INT(fresh, 0);
    TP_CHECK_INT(again, 0);
    TP_CHECK_INT(rc, -EAGAIN);
    (void)newest;
    done(s);
}

TP_TEST(test_a_paused_trial_that_cannot_finish_in_time_is_refused_and_final) {
    tp_scheduler_t *s = make("hypersched", 3);
    TP_REQUIRE(s);
    s->ops->deadline(s, 100);
    tp_job_t j;
    rung0(s, 3);
    /* trial 2 leads at rung 0; promoting it needs 2 s + 1 s: 2 s left */
    TP_REQUIRE(next(s, 98, &j) == 1);
    TP_CHECK_INT(j.refused, 1);
    TP_CHECK_INT(j.trial, 2);
    TP_CHECK_CONTAINS(j.why, "not promoted, the deadline is too near: needs 3 s to go past the "
                             "incumbent's budget to 2");
    TP_CHECK(s->ops->final(s, 2, 0));
    done(s);
}

TP_TEST(test_with_one_report_per_job_timing_comes_from_the_line_through_the_jobs) {
    tp_scheduler_t *s = make("hypersched", 50);
    TP_REQUIRE(s);
    s->ops->deadline(s, 1000);
    tp_job_t j;
    /* jobs of 1 and 3 units taking 5 s and 11 s: start-up 2 s, 3 s per unit */
    for (int i = 0; i < 3; i++) {
        TP_REQUIRE(next(s, 0, &j) == 1);
        tp_timing_t t = {.trial = j.trial, .units = 1, .run_s = 5, .unit_s = NAN};
        s->ops->timing(s, &t, 5);
        s->ops->result(s, j.trial, 0, 1, i, 5);
    }
    TP_REQUIRE(next(s, 5, &j) == 1 && j.rung == 1);
    tp_timing_t t = {.trial = j.trial, .rung = 1, .units = 2, .run_s = 8, .unit_s = NAN};
    s->ops->timing(s, &t, 13);
    s->ops->result(s, j.trial, 1, 1, 10, 13);
    /* new: 2 x 2 s + 3 x 3 s = 13 s, 10 s to its last step */
    TP_REQUIRE(next(s, 991, &j) == 1);
    TP_CHECK_INT(j.refused, 1);
    TP_CHECK_CONTAINS(j.why, "needs 13 s to reach the incumbent's budget 3 (10 s to its last step; "
                             "start-up 2.0 s, 3.00 s "
                             "per unit");
    done(s);
}

TP_TEST(test_once_closed_the_best_waiting_trial_goes_on_when_it_fits) {
    tp_scheduler_t *s = make("hypersched", 4);
    TP_REQUIRE(s);
    s->ops->deadline(s, 100);
    tp_job_t j;
    for (int i = 0; i < 4; i++)
        TP_REQUIRE(next(s, 0, &j) == 1 && j.trial == i);
    for (int i = 0; i < 4; i++) {
        timed(s, i, 0, 1, 3);
        s->ops->result(s, i, 0, 1, i, 3);
    }
    TP_REQUIRE(next(s, 3, &j) == 1); /* ASHA: the top 1/3 of 4 results is trial 3 */
    TP_CHECK_INT(j.trial, 3);
    TP_REQUIRE(next(s, 3, &j) == 1); /* sampler exhausted: trial 2, the best waiting, goes on */
    TP_CHECK_INT(j.trial, 2);
    TP_CHECK_INT(j.rung, 1);
    TP_CHECK_CONTAINS(j.why, "continued to rung 1 (budget 3): the best waiting at rung 0");
    done(s);
}

int main(void) {
    return tp_test_main();
}
