/* Unit tests for the schedulers: rungs, fifo, asha, hyperband, median. */
#include <errno.h>
#include <stdlib.h>

#include "search/scheduler.h"
#include "tp_test.h"

static void build_space(tp_space_t *sp) {
    tp__space_init(sp);
    tp_param_t x = {.name = tp__strdup("x"), .kind = TP_DOM_UNIFORM, .lo = 0, .hi = 1};
    tp__space_add(sp, &x);
}

static tp_scheduler_t *make(const tp_space_t *sp, const char *name, const char *sampler,
                            uint64_t trials, double min, double max, int maximize) {
    tp_scheduler_cfg_t cfg = {.scheduler = name,
                              .sampler = {.algorithm = sampler, .trials = trials, .seed = 1},
                              .budget = {.name = max > 0 ? "epochs" : NULL, .min = min, .max = max},
                              .maximize = maximize};
    tp_error_t err = {0};
    tp_scheduler_t *s = tp__scheduler_new(sp, &cfg, &err);
    if (!s) fprintf(stderr, "  scheduler_new: %s\n", err.msg);
    return s;
}

static int next(tp_scheduler_t *s, tp_job_t *job) {
    memset(job, 0, sizeof *job);
    int rc = s->ops->next(s, 0, job);
    json_decref(job->config);
    job->config = NULL;
    return rc;
}

TP_TEST(test_budget_rungs_are_powers_of_eta_and_the_last_equals_max) {
    double r[16];
    tp_budget_t b = {.name = "epochs", .min = 1, .max = 81, .eta = 3};
    TP_CHECK_INT(tp__budget_rungs(&b, r, 16), 5);
    TP_CHECK(r[0] == 1 && r[1] == 3 && r[2] == 9 && r[3] == 27 && r[4] == 81);
    b.max = 100;
    TP_CHECK_INT(tp__budget_rungs(&b, r, 16), 6);
    TP_CHECK(r[4] == 81 && r[5] == 100);
    b.max = 1;
    TP_CHECK_INT(tp__budget_rungs(&b, r, 16), 1);
    TP_CHECK(r[0] == 1);
    b = (tp_budget_t){.min = 2, .max = 16, .eta = 0}; /* eta 0: the default 3 */
    TP_CHECK_INT(tp__budget_rungs(&b, r, 16), 3);
    TP_CHECK(r[0] == 2 && r[1] == 6 && r[2] == 16);
    TP_CHECK_INT(tp__budget_rungs(&b, r, 2), 2); /* a short cap keeps the first rungs */
    b.eta = 1;
    TP_CHECK_INT(tp__budget_rungs(&b, r, 16), 0);
    b = (tp_budget_t){.min = 0, .max = 16, .eta = 3};
    TP_CHECK_INT(tp__budget_rungs(&b, r, 16), 0);
}

TP_TEST(test_unknown_scheduler_or_missing_budget_is_an_error_a_person_can_act_on) {
    tp_space_t sp;
    build_space(&sp);
    tp_scheduler_cfg_t cfg = {.scheduler = "ashaa", .sampler = {.algorithm = "random"}};
    tp_error_t err = {0};
    TP_CHECK(tp__scheduler_new(&sp, &cfg, &err) == NULL);
    TP_CHECK_CONTAINS(err.msg, "did you mean \"asha\"");
    cfg.scheduler = "hyperband";
    TP_CHECK(tp__scheduler_new(&sp, &cfg, &err) == NULL);
    TP_CHECK_CONTAINS(err.msg, "scheduler hyperband needs a budget");
    cfg.budget = (tp_budget_t){.name = "epochs", .min = 1, .max = 9, .eta = 0.5};
    TP_CHECK(tp__scheduler_new(&sp, &cfg, &err) == NULL);
    TP_CHECK_CONTAINS(err.msg, "needs eta > 1");
    cfg.budget.eta = 0; /* default */
    tp_scheduler_t *s = tp__scheduler_new(&sp, &cfg, &err);
    TP_CHECK(s && s->cfg.budget.eta == 3);
    TP_CHECK_STR(s->cfg.scheduler, "hyperband");
    tp__scheduler_free(s);
    cfg.scheduler = NULL;
    s = tp__scheduler_new(&sp, &cfg, &err);
    TP_CHECK(s && strcmp(s->ops->name, "fifo") == 0);
    tp__scheduler_free(s);
    TP_CHECK_STR(tp__scheduler_names[0], "fifo");
    tp__space_free(&sp);
}

TP_TEST(test_fifo_keeps_the_sampler_order_with_the_full_budget) {
    tp_space_t sp;
    build_space(&sp);
    tp_scheduler_t *s = make(&sp, "fifo", "random", 5, 1, 27, 1);
    tp_search_cfg_t rc = {.algorithm = "random", .trials = 5, .seed = 1};
    tp_searcher_t *r = tp__searcher_new(&sp, &rc, 1, NULL);
    TP_CHECK_INT(s->ops->total(s), 5);
    for (int i = 0; i < 5; i++) {
        tp_job_t job = {0};
        TP_CHECK_INT(s->ops->next(s, 0, &job), 1);
        json_t *want = NULL;
        r->ops->ask(r, (uint64_t)i, 0, &want);
        TP_CHECK_INT(job.trial, i);
        TP_CHECK(job.is_new && json_equal(job.config, want));
        TP_CHECK(job.budget == 27);
        json_decref(job.config), json_decref(want);
    }
    tp_job_t job;
    TP_CHECK_INT(next(s, &job), 0); /* exhausted, even with all 5 still running */
    s->ops->result(s, 0, 0, 1, 0.5, 1);
    TP_CHECK(s->ops->final(s, 0, 0));
    tp__searcher_free(r);
    tp__scheduler_free(s);
    tp__space_free(&sp);
}

TP_TEST(test_fifo_with_tpe_never_waits_for_results) {
    tp_space_t sp;
    build_space(&sp);
    tp_scheduler_t *s = make(&sp, "fifo", "tpe", 30, 0, 0, 0);
    tp_job_t job;
    for (int i = 0; i < 30; i++) {
        TP_CHECK_INT(next(s, &job), 1);
        TP_CHECK(job.budget == 0);
        if (i < 12) s->ops->result(s, i, 0, 1, (double)i, 1); /* past startup: tpe models */
    }
    TP_CHECK_INT(next(s, &job), 0);
    tp__scheduler_free(s);
    tp__space_free(&sp);
}

/* rung 0 values of trials 0..8, maximized */
static const double RUNG0[9] = {0.5, 0.9, 0.1, 0.7, 0.3, 0.8, 0.2, 0.6, 0.4};

TP_TEST(test_asha_promotes_exactly_the_top_third_of_a_rung) {
    tp_space_t sp;
    build_space(&sp);
    tp_scheduler_t *s = make(&sp, "asha", "random", 9, 1, 9, 1); /* rungs 1 3 9 */
    tp_job_t job;
    for (int i = 0; i < 9; i++) {
        TP_CHECK_INT(next(s, &job), 1);
        TP_CHECK(job.is_new && job.rung == 0 && job.budget == 1);
        TP_CHECK_INT(job.group, 0); /* a rung's jobs are one trial group */
    }
    TP_CHECK_STR(job.why, "new trial at rung 0 (budget 1)");
    TP_CHECK_INT(next(s, &job), -EAGAIN); /* sampler exhausted, jobs running */
    for (int i = 0; i < 9; i++) {
        s->ops->result(s, i, 0, 1, RUNG0[i], 1);
        TP_CHECK(!s->ops->final(s, i, 0));
    }
    int64_t promoted[3];
    for (int k = 0; k < 3; k++) {
        TP_CHECK_INT(next(s, &job), 1);
        TP_CHECK(!job.is_new && job.rung == 1 && job.budget == 3);
        TP_CHECK_INT(job.group, 1);
        promoted[k] = job.trial;
        if (k == 0)
            TP_CHECK_STR(job.why, "promoted to rung 1 (budget 3): 0.9 ranks 1 of 9 at rung 0, top "
                                  "1/3 goes on");
    }
    TP_CHECK(promoted[0] == 1 && promoted[1] == 5 && promoted[2] == 3); /* 0.9 0.8 0.7 */
    TP_CHECK_INT(next(s, &job), -EAGAIN);                               /* 0.6 is not in the top */
    s->ops->result(s, 1, 1, 1, 0.95, 2);
    s->ops->result(s, 5, 1, 1, 0.85, 2);
    TP_CHECK_INT(next(s, &job), -EAGAIN); /* 2 results: floor(2/3) = 0 go on yet */
    s->ops->result(s, 3, 1, 1, 0.99, 2);
    TP_CHECK_INT(next(s, &job), 1);
    TP_CHECK(job.trial == 3 && job.rung == 2 && job.budget == 9);
    TP_CHECK_INT(next(s, &job), -EAGAIN);
    s->ops->result(s, 3, 2, 1, 0.999, 3);
    TP_CHECK(s->ops->final(s, 3, 2));
    TP_CHECK_INT(next(s, &job), 0);
    TP_CHECK(s->ops->final(s, 0, 0)); /* the search is over: nobody waits */
    tp__scheduler_free(s);
    tp__space_free(&sp);
}

TP_TEST(test_asha_promotes_asynchronously_as_results_arrive) {
    tp_space_t sp;
    build_space(&sp);
    tp_scheduler_t *s = make(&sp, "asha", "random", 0, 1, 9, 0); /* minimize, unbounded */
    tp_job_t job;
    for (int i = 0; i < 3; i++)
        TP_CHECK_INT(next(s, &job), 1);
    s->ops->result(s, 0, 0, 1, 5.0, 1);
    s->ops->result(s, 1, 0, 1, 1.0, 1);
    TP_CHECK_INT(next(s, &job), 1); /* 2 results: nobody yet, a new trial */
    TP_CHECK(job.is_new && job.trial == 3);
    s->ops->result(s, 2, 0, 1, 3.0, 1);
    TP_CHECK_INT(next(s, &job), 1); /* 3 results: the best (1.0) goes on */
    TP_CHECK(!job.is_new && job.trial == 1 && job.rung == 1);
    tp__scheduler_free(s);
    tp__space_free(&sp);
}

TP_TEST(test_asha_never_promotes_a_failed_trial) {
    tp_space_t sp;
    build_space(&sp);
    tp_scheduler_t *s = make(&sp, "asha", "random", 6, 1, 9, 1);
    tp_job_t job;
    for (int i = 0; i < 6; i++)
        TP_CHECK_INT(next(s, &job), 1);
    s->ops->result(s, 0, 0, 0, NAN, 1); /* failed */
    TP_CHECK(s->ops->final(s, 0, 0));
    for (int i = 1; i < 6; i++)
        s->ops->result(s, i, 0, 1, 0.1 * i, 1);
    TP_CHECK_INT(next(s, &job), 1); /* 5 ok results: floor(5/3) = 1 */
    TP_CHECK_INT(job.trial, 5);
    TP_CHECK_INT(next(s, &job), -EAGAIN);
    s->ops->result(s, 5, 1, 0, NAN, 2); /* fails at rung 1 */
    TP_CHECK(s->ops->final(s, 5, 1));
    TP_CHECK_INT(next(s, &job), 0); /* nothing promotable, nothing running */
    tp__scheduler_free(s);
    tp__space_free(&sp);
}

/* run --retry-failed: a failed trial's job is out again, and with a good
 * result the trial is promotable like any (asha and hypersched alike). */
TP_TEST(test_asha_takes_a_retried_trial_back_into_the_search) {
    static const char *const names[] = {"asha", "hypersched"};
    for (size_t n = 0; n < TP_ARRAY_LEN(names); n++) {
        tp_space_t sp;
        build_space(&sp);
        tp_scheduler_t *s = make(&sp, names[n], "random", 3, 1, 9, 1);
        tp_job_t job;
        for (int i = 0; i < 3; i++)
            TP_CHECK_INT(next(s, &job), 1);
        s->ops->result(s, 0, 0, 0, NAN, 1); /* failed */
        s->ops->result(s, 1, 0, 1, 0.1, 1);
        s->ops->result(s, 2, 0, 1, 0.2, 1);
        s->ops->retry(s, 1, 0);         /* not a failed trial: nothing */
        TP_CHECK_INT(next(s, &job), 0); /* floor(2/3) = 0 promoted, nothing runs: over */
        TP_CHECK(s->ops->final(s, 0, 0));
        s->ops->retry(s, 0, 0);
        TP_CHECK(!s->ops->final(s, 0, 0));
        TP_CHECK_INT(next(s, &job), -EAGAIN); /* its job is out again */
        s->ops->result(s, 0, 0, 1, 0.9, 2);
        TP_CHECK_INT(next(s, &job), 1); /* floor(3/3) = 1: the retried trial, best */
        TP_CHECK_INT(job.trial, 0);
        TP_CHECK_INT(job.rung, 1);
        tp__scheduler_free(s);
        tp__space_free(&sp);
    }
}

TP_TEST(test_asha_ends_when_nothing_can_be_promoted_and_no_job_runs) {
    tp_space_t sp;
    build_space(&sp);
    tp_scheduler_t *s = make(&sp, "asha", "random", 2, 1, 9, 1);
    tp_job_t job;
    TP_CHECK_INT(next(s, &job), 1);
    TP_CHECK_INT(next(s, &job), 1);
    TP_CHECK_INT(next(s, &job), -EAGAIN);
    s->ops->result(s, 0, 0, 1, 0.3, 1);
    TP_CHECK_INT(next(s, &job), -EAGAIN);
    TP_CHECK(!s->ops->final(s, 0, 0));
    s->ops->result(s, 1, 0, 1, 0.4, 1);
    TP_CHECK_INT(next(s, &job), 0); /* floor(2/3) = 0 */
    TP_CHECK(s->ops->final(s, 0, 0) && s->ops->final(s, 1, 0));
    tp__scheduler_free(s);
    tp__space_free(&sp);
}

/* Run a scheduler to the end: hand out jobs until -EAGAIN, then end them all
 * (value = a fixed scramble of the trial number). Records each wave's size
 * and budget. Returns the number of waves. */
static int run_waves(tp_scheduler_t *s, int *size, double *budget, int cap, int *new_trials,
                     int *sync_ok) {
    int waves = 0;
    *new_trials = 0;
    *sync_ok = 1;
    for (;;) {
        int64_t out[256];
        int n = 0, rung = -1;
        tp_job_t job;
        int rc;
        while ((rc = next(s, &job)) == 1 && n < 256) {
            out[n++] = job.trial;
            *new_trials += job.is_new;
            rung = job.rung;
            if (waves < cap) budget[waves] = job.budget;
        }
        if (rc == 0 && n == 0) return waves;
        if (waves < cap) size[waves] = n;
        waves++;
        for (int i = 0; i < n; i++) {
            if (i > 0 && next(s, &job) != -EAGAIN) *sync_ok = 0; /* waits for the whole rung */
            s->ops->result(s, out[i], rung, 1, (double)((out[i] * 37) % 101), 1);
        }
    }
}

TP_TEST(test_hyperband_brackets_match_the_papers_table_for_1_81_3) {
    tp_space_t sp;
    build_space(&sp);
    tp_scheduler_t *s = make(&sp, "hyperband", "random", 0, 1, 81, 1);
    TP_CHECK_INT(s->ops->total(s), 143);
    int size[32] = {0}, created = 0, sync_ok = 0;
    double budget[32] = {0};
    static const int want_size[15] = {81, 27, 9, 3, 1, 34, 11, 3, 1, 15, 5, 1, 8, 2, 5};
    static const double want_budget[15] = {1, 3, 9, 27, 81, 3, 9, 27, 81, 9, 27, 81, 27, 81, 81};
    TP_CHECK_INT(run_waves(s, size, budget, 32, &created, &sync_ok), 15);
    for (int i = 0; i < 15; i++) {
        TP_CHECK_INT(size[i], want_size[i]);
        TP_CHECK(budget[i] == want_budget[i]);
    }
    TP_CHECK_INT(created, 143);
    TP_CHECK(sync_ok);
    /* The work the progress view expects is the work the brackets handed
     * out: each rung's trials from the budget of the rung before. */
    double work = 0;
    for (int i = 0; i < 15; i++)
        work += size[i] * (budget[i] - (i && budget[i - 1] < budget[i] ? budget[i - 1] : 0));
    TP_CHECK_NEAR(work, 1581, 1e-9);
    TP_CHECK_NEAR(tp__scheduler_work(s), work, 1e-9);
    tp__scheduler_free(s);
    tp__space_free(&sp);
}

TP_TEST(test_expected_work_counts_rung_steps_under_asha_and_full_budgets_otherwise) {
    tp_space_t sp;
    build_space(&sp);
    /* asha (1, 9, 3), 9 trials: all run 1, a third 3 (2 more), a ninth 9 (6 more) */
    tp_scheduler_t *s = make(&sp, "asha", "random", 9, 1, 9, 1);
    TP_CHECK_NEAR(tp__scheduler_work(s), 9 * 1 + 3 * 2 + 1 * 6, 1e-9);
    tp__scheduler_set_trials(s, 18); /* extended: the plan grows with it */
    TP_CHECK_NEAR(tp__scheduler_work(s), 2 * 21, 1e-9);
    tp__scheduler_free(s);
    s = make(&sp, "hypersched", "random", 9, 1, 9, 1);
    TP_CHECK_NEAR(tp__scheduler_work(s), 21, 1e-9);
    tp__scheduler_free(s);
    s = make(&sp, "fifo", "random", 5, 1, 27, 1); /* every trial to the full budget */
    TP_CHECK_NEAR(tp__scheduler_work(s), 5 * 27, 1e-9);
    tp__scheduler_free(s);
    s = make(&sp, "fifo", "random", 5, 0, 0, 1); /* no budget: no work to count */
    TP_CHECK_NEAR(tp__scheduler_work(s), 0, 0);
    tp__scheduler_free(s);
    tp__space_free(&sp);
}

TP_TEST(test_hyperband_promotes_the_best_third_and_pauses_the_rest) {
    tp_space_t sp;
    build_space(&sp);
    tp_scheduler_t *s = make(&sp, "hyperband", "random", 9, 1, 9, 0); /* s_max 2: 9@1 3@3 1@9 */
    tp_job_t job;
    for (int i = 0; i < 9; i++) {
        TP_CHECK_INT(next(s, &job), 1);
        TP_CHECK(job.budget == 1 && job.rung == 0);
        TP_CHECK_INT(job.group, 0); /* one synchronous rung: one trial group */
    }
    for (int i = 0; i < 9; i++) {
        TP_CHECK_INT(next(s, &job), -EAGAIN);
        s->ops->result(s, i, 0, i != 4, (double)(9 - i), 1); /* minimize: 8, 7, 6 best; 4 fails */
        if (i < 8 && i != 4) TP_CHECK(!s->ops->final(s, i, 0)); /* waits for the rung */
    }
    TP_CHECK(s->ops->final(s, 4, 0)); /* failed */
    TP_CHECK(s->ops->final(s, 0, 0)); /* decided: not promoted */
    TP_CHECK(!s->ops->final(s, 8, 0));
    int64_t got[3];
    for (int k = 0; k < 3; k++) {
        TP_CHECK_INT(next(s, &job), 1);
        got[k] = job.trial;
        TP_CHECK(job.rung == 1 && job.budget == 3);
        TP_CHECK_INT(job.group, 1);
    }
    TP_CHECK(got[0] == 8 && got[1] == 7 && got[2] == 6);
    TP_CHECK_CONTAINS(job.why, "ranks 3 of 9 at rung 0 of bracket s=2, top 3 go on");
    tp__scheduler_free(s);
    tp__space_free(&sp);
}

TP_TEST(test_hyperband_stops_creating_configs_at_the_samplers_trials) {
    tp_space_t sp;
    build_space(&sp);
    tp_scheduler_t *s = make(&sp, "hyperband", "random", 100, 1, 81, 1);
    TP_CHECK_INT(s->ops->total(s), 100);
    int size[32] = {0}, created = 0, sync_ok = 0;
    double budget[32] = {0};
    /* s=4 in full (81), then s=3 cut to 19: 19@3, 6@9, 2@27, 1@81 */
    static const int want[9] = {81, 27, 9, 3, 1, 19, 6, 2, 1};
    TP_CHECK_INT(run_waves(s, size, budget, 32, &created, &sync_ok), 9);
    for (int i = 0; i < 9; i++)
        TP_CHECK_INT(size[i], want[i]);
    TP_CHECK_INT(created, 100);
    tp__scheduler_free(s);
    tp__space_free(&sp);
}

/* Trial t reports steps 1..10 with value base + 0.01 step, then ends. */
static void run_trial(tp_scheduler_t *s, int64_t t, double base) {
    char why[200];
    for (int step = 1; step <= 10; step++)
        s->ops->report(s, t, step, base + 0.01 * step, 0, why, sizeof why);
    s->ops->result(s, t, 0, 1, base + 0.1, 1);
}

TP_TEST(test_median_stops_a_clearly_worse_trial_after_the_startup_trials_only) {
    tp_space_t sp;
    build_space(&sp);
    tp_scheduler_t *s = make(&sp, "median", "random", 0, 1, 12, 1); /* maximize */
    tp_job_t job;
    char why[200];
    for (int i = 0; i < 4; i++) {
        TP_CHECK_INT(next(s, &job), 1);
        TP_CHECK(job.budget == 12);
        run_trial(s, i, 0.7);
    }
    TP_CHECK_INT(next(s, &job), 1); /* trial 4: bad, but only 4 completed so far */
    TP_CHECK_INT(s->ops->report(s, 4, 1, 0.1, 0, why, sizeof why), 1);
    run_trial(s, 4, 0.72);          /* now 5 completed */
    TP_CHECK_INT(next(s, &job), 1); /* trial 5: good */
    TP_CHECK_INT(s->ops->report(s, 5, 1, 0.9, 0, why, sizeof why), 1);
    TP_CHECK_INT(next(s, &job), 1); /* trial 6: clearly worse */
    TP_CHECK_INT(s->ops->report(s, 6, 1, 0.9, 0, why, sizeof why), 1);
    TP_CHECK_INT(s->ops->report(s, 6, 2, 0.3, 0, why, sizeof why), 1);  /* best so far 0.9 */
    TP_CHECK_INT(next(s, &job), 1);                                     /* trial 7 */
    TP_CHECK_INT(s->ops->report(s, 7, 12, 0.2, 0, why, sizeof why), 1); /* nobody at step 12 */
    TP_CHECK_INT(s->ops->report(s, 7, 3, 0.61, 0, why, sizeof why), 0);
    TP_CHECK_STR(why, "stopped at step 3: best 0.61 is below the median 0.73 of 5 completed "
                      "trials at step 3");
    s->ops->result(s, 7, 0, 1, 0.61, 2);
    TP_CHECK(s->ops->final(s, 7, 0));
    tp__scheduler_free(s);
    tp__space_free(&sp);
}

TP_TEST(test_median_minimizing_stops_above_the_median_and_skips_stopped_trials) {
    tp_space_t sp;
    build_space(&sp);
    tp_scheduler_t *s = make(&sp, "median", "random", 0, 0, 0, 0); /* minimize, no budget */
    tp_job_t job;
    char why[200];
    for (int i = 0; i < 5; i++) {
        TP_CHECK_INT(next(s, &job), 1);
        TP_CHECK(job.budget == 0);
        run_trial(s, i, 1.0 + 0.1 * i); /* step 1: 1.01 1.11 1.21 1.31 1.41 */
    }
    TP_CHECK_INT(next(s, &job), 1);
    TP_CHECK_INT(s->ops->report(s, 5, 1, 0.5, 0, why, sizeof why), 1);
    TP_CHECK_INT(next(s, &job), 1);
    TP_CHECK_INT(s->ops->report(s, 6, 1, 5.0, 0, why, sizeof why), 0);
    TP_CHECK_STR(why, "stopped at step 1: best 5 is above the median 1.21 of 5 completed trials "
                      "at step 1");
    s->ops->result(s, 6, 0, 1, 5.0, 1); /* stopped: not a completed trial */
    TP_CHECK_INT(next(s, &job), 1);
    TP_CHECK_INT(s->ops->report(s, 7, 1, 1.3, 0, why, sizeof why), 0);
    TP_CHECK_CONTAINS(why, "the median 1.21 of 5 completed"); /* still 5, not 6 */
    tp__scheduler_free(s);
    tp__space_free(&sp);
}

TP_TEST(test_same_calls_give_the_same_decisions_on_replay) {
    tp_space_t sp;
    build_space(&sp);
    json_t *runs[2];
    for (int r = 0; r < 2; r++) {
        tp_scheduler_t *s = make(&sp, "asha", "tpe", 40, 1, 27, 0);
        runs[r] = json_array();
        int64_t running[64];
        size_t nr = 0;
        tp_job_t job;
        for (int step = 0; step < 200; step++) {
            memset(&job, 0, sizeof job);
            int rc = s->ops->next(s, 0, &job);
            if (rc == 1) {
                json_array_append_new(runs[r], json_pack("{sI si so* ss}", "trial",
                                                         (json_int_t)job.trial, "rung", job.rung,
                                                         "config", job.config, "why", job.why));
                running[nr++] = job.trial * 16 + job.rung;
            }
            if ((rc != 1 || step % 3 == 2) && nr > 0) { /* end the oldest job */
                int64_t t = running[0] / 16;
                int rung = (int)(running[0] % 16);
                memmove(running, running + 1, --nr * sizeof *running);
                s->ops->result(s, t, rung, 1, (double)((t * 53) % 17) / (rung + 1), 1);
            } else if (rc == 0) {
                break;
            }
        }
        tp__scheduler_free(s);
    }
    TP_CHECK(json_array_size(runs[0]) > 40);
    TP_CHECK(json_equal(runs[0], runs[1]));
    json_decref(runs[0]), json_decref(runs[1]);
    tp__space_free(&sp);
}

/* One call a run made to the scheduler: an ask (rc, and the job when 1) or
 * a result told. */
typedef struct call {
    int ask, rc, rung;
    int64_t trial;
    double value;
    json_t *config; /* an ask's new configuration, owned */
} call_t;

/* Make call c on s; an ask's outcome is compared with c when check, else
 * recorded in c. Returns 0 when a checked ask differs. */
static int make_call(tp_scheduler_t *s, call_t *c, int check) {
    if (!c->ask) {
        s->ops->result(s, c->trial, c->rung, 1, c->value, 1);
        return 1;
    }
    tp_job_t job;
    memset(&job, 0, sizeof job);
    int rc = s->ops->next(s, 0, &job), same = 1;
    if (check) {
        same = rc == c->rc && (rc != 1 || (job.trial == c->trial && job.rung == c->rung &&
                                           (!c->config) == (!job.config) &&
                                           (!job.config || json_equal(job.config, c->config))));
        json_decref(job.config);
    } else {
        c->rc = rc, c->trial = job.trial, c->rung = job.rung, c->config = job.config;
    }
    return same;
}

TP_TEST(test_tpe_asha_resumed_at_any_call_at_concurrency_2_goes_on_exactly) {
    /* An unbroken run with two jobs at a time ending out of order; then, cut
     * after every call, a fresh scheduler replays what the journal holds of
     * the calls before (asks that gave a job, every result) and makes the
     * calls after: it must ask and propose exactly what the unbroken run did. */
    tp_space_t sp;
    build_space(&sp);
    tp_scheduler_t *s = make(&sp, "asha", "tpe", 30, 1, 9, 1);
    call_t log[400];
    size_t n = 0;
    int64_t running[8];
    size_t nr = 0;
    int waiting = 0; /* asked in vain: wait for a result, as the orchestrator does */
    for (int step = 0; n < sizeof log / sizeof *log; step++) {
        call_t *c = &log[n++];
        memset(c, 0, sizeof *c);
        if (nr < 2 && !waiting) {
            c->ask = 1;
            make_call(s, c, 0);
            if (c->rc == 1)
                running[nr++] = c->trial * 16 + c->rung;
            else if (nr == 0)
                break; /* over */
            else
                waiting = 1;
            continue;
        }
        waiting = 0;
        size_t i = (size_t)(step * 7 % 5) % nr; /* not always the oldest */
        c->trial = running[i] / 16;
        c->rung = (int)(running[i] % 16);
        c->value = (double)((c->trial * 37) % 23) / 23.0 + 0.1 * c->rung;
        memmove(running + i, running + i + 1, (--nr - i) * sizeof *running);
        make_call(s, c, 0);
    }
    tp__scheduler_free(s);
    TP_CHECK(n > 60);
    for (size_t cut = 0; cut <= n; cut++) {
        tp_scheduler_t *r = make(&sp, "asha", "tpe", 30, 1, 9, 1);
        for (size_t k = 0; k < cut; k++)
            if (!log[k].ask || log[k].rc == 1) make_call(r, &log[k], 1);
        size_t k = cut;
        while (k < n && make_call(r, &log[k], 1))
            k++;
        if (k != n) fprintf(stderr, "  cut after call %zu: call %zu differs\n", cut, k);
        TP_CHECK(k == n);
        tp__scheduler_free(r);
    }
    for (size_t k = 0; k < n; k++)
        json_decref(log[k].config);
    tp__space_free(&sp);
}

int main(void) {
    return tp_test_main();
}
