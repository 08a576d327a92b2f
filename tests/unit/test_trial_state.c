/* run/trial_state: the transition table, the one setter (journal, counts,
 * pending queue), and an illegal change refused as a bug. */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "run/trial_state.h"
#include "store/store.h"
#include "tp_test.h"

typedef struct fixture {
    char dir[64];
    tp_journal_t journal;
    tp_trials_t trials;
} fixture_t;

static void setup(fixture_t *f) {
    memset(f, 0, sizeof *f);
    snprintf(f->dir, sizeof f->dir, "/tmp/tp_trial_state_XXXXXX");
    if (!mkdtemp(f->dir)) abort();
    tp_error_t err = {0};
    if (tp__store_open(f->dir, TP_STORE_WRITE, &f->journal.store, &err) != 0) abort();
    f->trials.journal = &f->journal;
}

static void teardown(fixture_t *f) {
    tp__trials_free(&f->trials);
    tp__journal_close(&f->journal);
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf %s", f->dir);
    if (system(cmd) != 0) fprintf(stderr, "  could not remove %s\n", f->dir);
}

typedef struct seen {
    char state[16];
    char error[128];
    char metrics[128];
    int attempts;
    int interrupted;
} seen_t;

static int keep_row(const tp_trial_row_t *row, void *ud) {
    seen_t *s = ud;
    snprintf(s->state, sizeof s->state, "%s", row->state);
    snprintf(s->error, sizeof s->error, "%s", row->error ? row->error : "");
    snprintf(s->metrics, sizeof s->metrics, "%s", row->metrics ? row->metrics : "");
    s->attempts = row->attempts;
    s->interrupted = row->interrupted;
    return 0;
}

static seen_t stored(fixture_t *f, int64_t id) {
    seen_t s = {0};
    tp__journal_commit(&f->journal);
    tp__store_trial(f->journal.store, id, keep_row, &s);
    return s;
}

/* The table is exactly DESIGN.md's trial life. */
TP_TEST(test_transition_table_is_the_trial_life) {
    static const char *const legal[] = {
        "pending>running", "running>pending", "running>paused", "running>completed",
        "running>stopped", "running>failed",  "paused>pending", "paused>running",
        "paused>stopped",  "failed>pending",
    };
    int nlegal = 0;
    for (int a = 0; a < TP_TRIAL_NSTATES; a++)
        for (int b = 0; b < TP_TRIAL_NSTATES; b++) {
            char pair[40];
            snprintf(pair, sizeof pair, "%s>%s", tp__trial_state_name(a), tp__trial_state_name(b));
            int expect = 0;
            for (size_t i = 0; i < sizeof legal / sizeof *legal; i++)
                if (strcmp(pair, legal[i]) == 0) expect = 1;
            if (tp__trial_transition_ok(a, b) != expect) {
                fprintf(stderr, "  %s: table says %d\n", pair, tp__trial_transition_ok(a, b));
                *tp_failed_ = 1;
            }
            nlegal += expect;
        }
    TP_CHECK_INT(nlegal, 10);
    for (int s = 0; s < TP_TRIAL_NSTATES; s++)
        TP_CHECK_INT(tp__trial_state_from_name(tp__trial_state_name(s)), s);
    TP_CHECK_INT(tp__trial_state_from_name("bogus"), -1);
}

/* A trial's whole life goes through the setter: each change is journaled
 * and the counts follow. */
TP_TEST(test_every_change_is_journaled_and_counted) {
    fixture_t f;
    setup(&f);
    trial_t *t = tp__trials_add(&f.trials, 0, json_pack("{s:f}", "lr", 0.1), 1.0);
    TP_CHECK_INT(f.trials.count[TP_TRIAL_PENDING], 1);
    TP_CHECK_STR(stored(&f, 0).state, "pending");

    t->attempts = 1;
    TP_CHECK_INT(tp__trial_set_state(&f.trials, t, TP_TRIAL_RUNNING, NULL), 0);
    TP_CHECK_STR(stored(&f, 0).state, "running");
    TP_CHECK_INT(stored(&f, 0).attempts, 1);
    TP_CHECK_INT(f.trials.count[TP_TRIAL_RUNNING], 1);
    TP_CHECK_INT(f.trials.count[TP_TRIAL_PENDING], 0);

    /* A failed attempt with retries left: pending again, queued, error kept. */
    t->failures = 1;
    tp_transition_t fail = {
        .error = "exited with code 1", .has_exit = 1, .exit_code = 1, .requeue = TP_REQUEUE_RETRY};
    TP_CHECK_INT(tp__trial_set_state(&f.trials, t, TP_TRIAL_PENDING, &fail), 0);
    TP_CHECK_STR(stored(&f, 0).error, "exited with code 1");
    TP_CHECK_INT(f.trials.retried, 1);
    TP_CHECK(tp__trials_pop(&f.trials) == t);
    TP_CHECK(tp__trials_pop(&f.trials) == NULL);

    /* It reports and pauses at a rung: the decision is no error, and the
     * last report is kept. */
    t->attempts = 2;
    tp__trial_set_state(&f.trials, t, TP_TRIAL_RUNNING, NULL);
    t->has_value = 1;
    t->value = t->best = 0.5;
    tp__buf_append(&t->last, "{\"acc\": 0.5}", 12);
    tp_transition_t paused = {.detail = "rung 0 done: waits for a promotion"};
    TP_CHECK_INT(tp__trial_set_state(&f.trials, t, TP_TRIAL_PAUSED, &paused), 0);
    seen_t s = stored(&f, 0);
    TP_CHECK_STR(s.state, "paused");
    TP_CHECK_STR(s.error, "");
    TP_CHECK_STR(s.metrics, "{\"acc\": 0.5}");

    /* Never promoted: stopped, and its last report is still there. */
    TP_CHECK_INT(tp__trial_set_state(&f.trials, t, TP_TRIAL_STOPPED,
                                     &(tp_transition_t){.detail = "not promoted past rung 0"}),
                 0);
    s = stored(&f, 0);
    TP_CHECK_STR(s.state, "stopped");
    TP_CHECK_STR(s.metrics, "{\"acc\": 0.5}");
    TP_CHECK_INT(f.trials.count[TP_TRIAL_STOPPED], 1);
    int total = 0;
    for (int i = 0; i < TP_TRIAL_NSTATES; i++)
        total += f.trials.count[i];
    TP_CHECK_INT(total, 1);
    TP_CHECK_INT(f.trials.bugs, 0);
    teardown(&f);
}

/* An illegal change is a programmer error: refused, counted, nothing
 * journaled, counts unchanged. */
TP_TEST(test_illegal_change_is_refused_as_a_bug) {
    fixture_t f;
    setup(&f);
    trial_t *t = tp__trials_add(&f.trials, 3, json_object(), 1.0);
    t->attempts = 1;
    tp__trial_set_state(&f.trials, t, TP_TRIAL_RUNNING, NULL);
    tp__trial_set_state(&f.trials, t, TP_TRIAL_COMPLETED, NULL);
    TP_CHECK_INT(tp__trial_set_state(&f.trials, t, TP_TRIAL_RUNNING, NULL), -EINVAL);
    TP_CHECK_INT(tp__trial_set_state(&f.trials, t, TP_TRIAL_PENDING, NULL), -EINVAL);
    TP_CHECK_INT(f.trials.bugs, 2);
    TP_CHECK(t->state == TP_TRIAL_COMPLETED);
    TP_CHECK_STR(stored(&f, 3).state, "completed");
    TP_CHECK_INT(f.trials.count[TP_TRIAL_COMPLETED], 1);
    TP_CHECK_INT(f.trials.count[TP_TRIAL_RUNNING], 0);
    /* pending -> completed skips running: refused too. */
    trial_t *u = tp__trials_add(&f.trials, 4, json_object(), 1.0);
    TP_CHECK_INT(tp__trial_set_state(&f.trials, u, TP_TRIAL_COMPLETED, NULL), -EINVAL);
    TP_CHECK_INT(f.trials.bugs, 3);
    teardown(&f);
}

/* The pending queue gives the lowest id first, and skips trials that left
 * pending while queued. */
TP_TEST(test_pending_queue_lowest_id_first) {
    fixture_t f;
    setup(&f);
    int64_t ids[] = {7, 2, 9, 4};
    for (size_t i = 0; i < 4; i++) {
        trial_t *t = tp__trials_add(&f.trials, ids[i], json_object(), 1.0);
        tp__trials_push(&f.trials, t);
    }
    trial_t *two = tp__trials_get(&f.trials, 2);
    two->attempts = 1;
    tp__trial_set_state(&f.trials, two, TP_TRIAL_RUNNING, NULL); /* left pending */
    TP_CHECK_INT(tp__trials_pop(&f.trials)->id, 4);
    TP_CHECK_INT(tp__trials_pop(&f.trials)->id, 7);
    TP_CHECK_INT(tp__trials_pop(&f.trials)->id, 9);
    TP_CHECK(tp__trials_pop(&f.trials) == NULL);
    teardown(&f);
}

TP_TEST(test_expected_duration_is_measured_step_time_times_steps_left) {
    fixture_t f;
    setup(&f);
    trial_t *a = tp__trials_add(&f.trials, 0, json_object(), 1.0);
    trial_t *b = tp__trials_add(&f.trials, 1, json_object(), 1.0);
    trial_t *c = tp__trials_add(&f.trials, 2, json_object(), 1.0);
    trial_t *d = tp__trials_add(&f.trials, 3, json_object(), 1.0);
    a->demand.group = 0, b->demand.group = 9, c->demand.group = 9,
    d->demand.group = 4;                       /* demand groups */
    a->job.step_done = 20, a->job.budget = 60; /* promoted from 20 to 60 steps */
    b->job.step_done = -1, b->job.budget = 10; /* no checkpoint */
    c->job.step_done = -1, c->job.budget = 30; /* never ran */
    d->job.step_done = -1, d->job.budget = 30; /* never ran, nor has any of its group */
    TP_CHECK_NEAR(tp__trial_expected_s(&f.trials, c), 0, 1e-12); /* nothing measured: unknown */
    a->demand.compute = 1, a->gpus = 2;
    tp__trial_set_step_s(&f.trials, a, 0.9);
    a->demand.compute = 0.25, a->gpus = 1;   /* its next attempt, at a quarter of a GPU */
    tp__trial_set_step_s(&f.trials, a, 0.5); /* measured again: replaces, with its count */
    TP_CHECK_INT(a->pace.step_gpus, 1);
    a->demand.compute = 1, a->gpus = 4; /* placed again: the step it has is still the one GPU's */
    TP_CHECK_INT(a->pace.step_gpus, 1);
    tp__trial_set_step_s(&f.trials, b, 2.5);
    tp__trial_set_step_s(&f.trials, c, 0); /* nothing measured: ignored */
    TP_CHECK_NEAR(tp__trial_expected_s(&f.trials, a), 20.0, 1e-12);
    TP_CHECK_NEAR(tp__trial_expected_s(&f.trials, b), 25.0, 1e-12);
    TP_CHECK_NEAR(tp__trial_expected_s(&f.trials, c), 75.0, 1e-12); /* its group's mean, 2.5 */
    TP_CHECK_NEAR(tp__trial_expected_s(&f.trials, d), 45.0, 1e-12); /* the run's mean, 1.5 */
    c->job.budget = 0;                                              /* no budget: unknown */
    TP_CHECK_NEAR(tp__trial_expected_s(&f.trials, c), 0, 1e-12);
    a->job.step_done = 60; /* at its budget */
    TP_CHECK_NEAR(tp__trial_expected_s(&f.trials, a), 0, 1e-12);
    teardown(&f);
}

/* The load a step was measured under is the harmonic time mean: at load L a
 * trial steps L times slower, so a step of s seconds is worth the integral of
 * 1 / L over them alone, and s / step_load must give that. */
TP_TEST(test_step_load_is_the_mean_load_over_the_span_that_measured_the_step) {
    fixture_t f;
    setup(&f);
    trial_t *a = tp__trials_add(&f.trials, 0, json_object(), 1.0);
    a->gpus = 1;
    tp__groups_load_reset(a, 10, 4); /* its first step: four on its GPU */
    tp__groups_load_note(a, 11, 1);  /* a second later the others end */
    tp__groups_load_note(a, 12, 1);  /* its next report */
    tp__trial_set_step_s(&f.trials, a, 2);
    /* 4 for 1 s, then 1 for 1 s: 0.25 + 1 s of work alone, not 2 / 2.5 */
    TP_CHECK_NEAR(tp__groups_step_load(a), 2 / 1.25, 1e-12);
    TP_CHECK_NEAR(a->pace.step_s / tp__groups_step_load(a), 1.25, 1e-12);
    tp__groups_load_note(a, 14, 2);          /* one joins at 14 */
    tp__trial_set_step_s(&f.trials, a, 0.4); /* measured from 10 to 14 */
    TP_CHECK_NEAR(tp__groups_step_load(a), 4 / (0.25 + 1 + 2), 1e-12);

    tp__groups_load_reset(a, 20, NAN); /* its next attempt: a neighbour's demand unknown */
    TP_CHECK_NEAR(tp__groups_step_load(a), 4 / 3.25,
                  1e-12);           /* the last step keeps its load until replaced */
    tp__groups_load_note(a, 21, 3); /* known from 21 */
    tp__groups_load_note(a, 23, 3);
    tp__trial_set_step_s(&f.trials, a, 0.6);
    TP_CHECK_NEAR(tp__groups_step_load(a), 3, 1e-12); /* only the time the load was known counts */

    tp__groups_load_reset(a, 30, NAN);
    tp__groups_load_note(a, 31, NAN);
    tp__trial_set_step_s(&f.trials, a, 0.7);
    TP_CHECK_NEAR(tp__groups_step_load(a), 0, 1e-12); /* never known: none (the step as measured) */
    teardown(&f);
}

/* A failed write is noticed by the journal, once, and marks it broken. */
TP_TEST(test_failed_journal_write_breaks_the_journal) {
    fixture_t f;
    setup(&f);
    TP_CHECK_INT(tp__journal_ok(&f.journal, 0, "nothing"), 0);
    TP_CHECK_INT(f.journal.broken, 0);
    TP_CHECK_INT(tp__journal_ok(&f.journal, -EIO, "writing a row"), -EIO);
    TP_CHECK_INT(tp__journal_ok(&f.journal, -EIO, "writing another"), -EIO);
    TP_CHECK_INT(f.journal.broken, 1);
    TP_CHECK_STR(f.journal.failed, "writing a row");
    teardown(&f);
}

/* An elastic trial's resize is a running -> pending change of its own kind:
 * queued to run again, its detail journaled, counted as a resize and not as
 * an interruption. */
TP_TEST(test_resize_goes_back_to_pending_as_a_resize) {
    fixture_t f;
    setup(&f);
    trial_t *t = tp__trials_add(&f.trials, 2, json_object(), 1.0);
    t->attempts = 1;
    tp__trial_set_state(&f.trials, t, TP_TRIAL_RUNNING, NULL);
    TP_CHECK(tp__trials_pop(&f.trials) == NULL);
    tp_transition_t how = {.detail = "resize: checkpointed on 1 GPU(s), runs again on 2",
                           .requeue = TP_REQUEUE_RESIZE};
    TP_CHECK_INT(tp__trial_set_state(&f.trials, t, TP_TRIAL_PENDING, &how), 0);
    TP_CHECK_INT(f.trials.resized, 1);
    TP_CHECK_INT(f.trials.interrupted, 0);
    TP_CHECK_INT(t->requeued, TP_REQUEUE_RESIZE);
    TP_CHECK(tp__trials_pop(&f.trials) == t);
    seen_t s = stored(&f, 2);
    TP_CHECK_STR(s.state, "pending");
    TP_CHECK_STR(s.error, "");
    TP_CHECK_INT(s.interrupted, 0);
    TP_CHECK_INT(f.trials.bugs, 0);
    teardown(&f);
}

int main(void) {
    return tp_test_main();
}
