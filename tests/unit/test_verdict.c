/* run/verdict: the end of an attempt judged as a pure function of the trial and
 * its typed `exited` message (decoded once by proto), for every way an attempt
 * ends. No store, no clock: a trial_t on the stack is all it needs. */
#include <math.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>

#include "proto/proto.h"
#include "run/verdict.h"
#include "tp_test.h"

static tp_experiment_t one_objective(void) {
    tp_experiment_t x;
    memset(&x, 0, sizeof x);
    x.metric = (char *)"acc";
    x.nobjectives = 1;
    x.timeout_s = 90;
    return x;
}

/* A trial that reported the objective once (acc 0.5), as a running one holds it. */
static void reported(trial_t *t, const char *last) {
    memset(t, 0, sizeof *t);
    t->state = TP_TRIAL_RUNNING;
    t->has_value = 1;
    t->value = t->best = 0.5;
    t->current.seq = 1;
    tp__buf_init(&t->last);
    tp__buf_append(&t->last, last, strlen(last));
}

/* Decode a JSON `exited` head; *head keeps the borrowed strings (json_decref it). */
static tp_exited_t exited(const char *json, json_t **head) {
    *head = json_loads(json, 0, NULL);
    tp_exited_t e;
    if (tp__proto_exited(*head, &e, NULL) != 0) e = (tp_exited_t){.status = "(malformed)"};
    return e;
}

TP_TEST(test_exited_decodes_every_status_and_defaults) {
    json_t *h;
    tp_exited_t e = exited("{\"type\": \"exited\"}", &h);
    TP_CHECK_INT(e.ended, TP_ENDED_EXITED);
    TP_CHECK_INT(e.code, -1);
    TP_CHECK_STR(e.error, "");
    json_decref(h);
    e = exited("{\"type\": \"exited\", \"status\": \"signaled\", \"signal\": 9, \"oom\": true, "
               "\"duration_s\": 1.5, \"maxrss_mib\": 12, \"cpu_s\": 0.25, \"error\": \"x\"}",
               &h);
    TP_CHECK_INT(e.ended, TP_ENDED_SIGNALED);
    TP_CHECK_INT(e.signal, 9);
    TP_CHECK_INT(e.oom, 1);
    TP_CHECK_NEAR(e.duration_s, 1.5, 1e-12);
    TP_CHECK_NEAR(e.maxrss_mib, 12, 1e-12);
    TP_CHECK_NEAR(e.cpu_s, 0.25, 1e-12);
    TP_CHECK_STR(e.error, "x");
    json_decref(h);
    const char *names[] = {"exited", "signaled",     "timeout", "stopped",
                           "paused", "spawn_failed", "melted"};
    for (int i = 0; i < 7; i++) {
        char j[80];
        snprintf(j, sizeof j, "{\"type\": \"exited\", \"status\": \"%s\"}", names[i]);
        e = exited(j, &h);
        TP_CHECK_INT(e.ended, i); /* the last one: TP_ENDED_UNKNOWN */
        TP_CHECK_STR(e.status, names[i]);
        json_decref(h);
    }
    TP_CHECK(tp__exited_ok(&(tp_exited_t){.ended = TP_ENDED_EXITED, .code = 0}));
    TP_CHECK(!tp__exited_ok(&(tp_exited_t){.ended = TP_ENDED_EXITED, .code = 1}));
}

TP_TEST(test_exit_0_with_the_objective_is_done_without_it_a_failure_that_says_why) {
    tp_experiment_t x = one_objective();
    tp_judge_facts_t f = {.x = &x};
    trial_t t;
    tp_verdict_t v;
    reported(&t, "{\"acc\": 0.5}");
    tp__verdict_judge(&t, &(tp_exited_t){.ended = TP_ENDED_EXITED, .status = "exited"}, &f, &v);
    TP_CHECK_INT(v.kind, TP_VERDICT_DONE);
    TP_CHECK_STR(v.why, "");
    TP_CHECK(v.objectives == NULL);
    t.has_value = 0;
    tp__verdict_judge(&t, &(tp_exited_t){.ended = TP_ENDED_EXITED, .status = "exited"}, &f, &v);
    TP_CHECK_INT(v.kind, TP_VERDICT_FAILED);
    TP_CHECK_STR(v.why, "exited 0 without ever reporting the objective \"acc\"");
    t.current.seq = 0;
    t.current.garbage = 3;
    snprintf(t.current.first_garbage, sizeof t.current.first_garbage, "not JSON");
    tp__verdict_judge(&t, &(tp_exited_t){.ended = TP_ENDED_EXITED, .status = "exited"}, &f, &v);
    TP_CHECK(strstr(v.why, "all 3 of its report lines were rejected, the first because: not JSON"));
    t.current.garbage = 0;
    tp__verdict_judge(&t, &(tp_exited_t){.ended = TP_ENDED_EXITED, .status = "exited"}, &f, &v);
    TP_CHECK(strstr(v.why, "(no report at all)"));
    TP_CHECK(!strstr(v.why, "checkpoints.md"));
    x.budget_name = "epochs"; /* under a budget: what a resumed job owes */
    tp__verdict_judge(&t, &(tp_exited_t){.ended = TP_ENDED_EXITED, .status = "exited"}, &f, &v);
    TP_CHECK(strstr(v.why, "(no report at all); a job whose checkpoint is already at or past its "
                           "budget must still report the metrics of that step"));
    tp__buf_free(&t.last);
}

TP_TEST(test_each_failure_is_named) {
    tp_experiment_t x = one_objective();
    tp_judge_facts_t f = {.x = &x};
    trial_t t;
    tp_verdict_t v;
    reported(&t, "{\"acc\": 0.5}");
    struct {
        tp_exited_t e;
        const char *why;
    } cases[] = {
        {{.ended = TP_ENDED_EXITED, .status = "exited", .code = 3}, "exited with code 3"},
        {{.ended = TP_ENDED_SIGNALED, .status = "signaled", .signal = SIGKILL},
         "killed by SIGKILL"},
        {{.ended = TP_ENDED_TIMEOUT, .status = "timeout"}, "timed out after 1m30s"},
        {{.ended = TP_ENDED_STOPPED, .status = "stopped"}, "stopped"},
        {{.ended = TP_ENDED_SPAWN_FAILED, .status = "spawn_failed", .error = "no such file"},
         "could not start: no such file"},
        {{.ended = TP_ENDED_UNKNOWN, .status = "melted", .error = ""}, "could not start: melted"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        tp__verdict_judge(&t, &cases[i].e, &f, &v);
        TP_CHECK_INT(v.kind, TP_VERDICT_FAILED);
        TP_CHECK_STR(v.why, cases[i].why);
    }
    /* past the garbage events journaled, the count is said too */
    t.current.garbage = TP_GARBAGE_EVENTS + 5;
    tp__verdict_judge(&t, &cases[0].e, &f, &v);
    TP_CHECK_STR(v.why, "exited with code 3; 25 garbage report lines in all");
    tp__buf_free(&t.last);
}

TP_TEST(test_a_stop_the_run_asked_for_or_a_pause_interrupts_an_early_stop_is_done) {
    tp_experiment_t x = one_objective();
    trial_t t;
    tp_verdict_t v;
    reported(&t, "{\"acc\": 0.5}");
    tp_exited_t stopped = {.ended = TP_ENDED_STOPPED, .status = "stopped", .code = -1};
    tp__verdict_judge(&t, &stopped, &(tp_judge_facts_t){.x = &x, .stopping = 1}, &v);
    TP_CHECK_INT(v.kind, TP_VERDICT_INTERRUPTED);
    tp__verdict_judge(&t, &stopped, &(tp_judge_facts_t){.x = &x, .deadline_hit = 1}, &v);
    TP_CHECK_INT(v.kind, TP_VERDICT_INTERRUPTED);
    t.elastic.resize_to = 2; /* an elastic resize asked of it */
    tp__verdict_judge(&t, &stopped, &(tp_judge_facts_t){.x = &x}, &v);
    TP_CHECK_INT(v.kind, TP_VERDICT_INTERRUPTED);
    t.elastic.resize_to = 0;
    tp__verdict_judge(&t, &(tp_exited_t){.ended = TP_ENDED_PAUSED, .status = "paused"},
                      &(tp_judge_facts_t){.x = &x}, &v);
    TP_CHECK_INT(v.kind, TP_VERDICT_INTERRUPTED);
    /* stopped by the scheduler: final with what it reported, however it ended */
    t.job.early_stopped = 1;
    tp__verdict_judge(&t, &stopped, &(tp_judge_facts_t){.x = &x, .stopping = 1}, &v);
    TP_CHECK_INT(v.kind, TP_VERDICT_DONE);
    tp__verdict_judge(
        &t, &(tp_exited_t){.ended = TP_ENDED_SIGNALED, .status = "signaled", .signal = SIGTERM},
        &(tp_judge_facts_t){.x = &x}, &v);
    TP_CHECK_INT(v.kind, TP_VERDICT_DONE);
    tp__buf_free(&t.last);
}

TP_TEST(test_out_of_gpu_memory_is_the_demands_fault_unless_it_exited_0) {
    tp_experiment_t x = one_objective();
    tp_judge_facts_t f = {.x = &x};
    trial_t t;
    tp_verdict_t v;
    reported(&t, "{\"acc\": 0.5}");
    tp__verdict_judge(
        &t, &(tp_exited_t){.ended = TP_ENDED_EXITED, .status = "exited", .code = 1, .oom = 1}, &f,
        &v);
    TP_CHECK_INT(v.kind, TP_VERDICT_OOM);
    tp__verdict_judge(&t, &(tp_exited_t){.ended = TP_ENDED_EXITED, .status = "exited", .oom = 1},
                      &f, &v);
    TP_CHECK_INT(v.kind, TP_VERDICT_DONE);
    tp__buf_free(&t.last);
}

TP_TEST(test_several_objectives_each_value_from_the_last_report_or_the_one_missing) {
    tp_experiment_t x = one_objective();
    x.nobjectives = 2;
    x.objectives[0].name = (char *)"acc";
    x.objectives[1].name = (char *)"latency";
    tp_judge_facts_t f = {.x = &x};
    trial_t t;
    tp_verdict_t v;
    reported(&t, "{\"acc\": 0.5, \"latency\": 7}");
    tp_exited_t ok = {.ended = TP_ENDED_EXITED, .status = "exited"};
    tp__verdict_judge(&t, &ok, &f, &v);
    TP_CHECK_INT(v.kind, TP_VERDICT_DONE);
    TP_CHECK_NEAR(v.values[0], 0.5, 1e-12);
    TP_CHECK_NEAR(v.values[1], 7, 1e-12);
    TP_CHECK_STR(v.objectives, "[0.5,7.0]");
    tp__verdict_free(&v);
    TP_CHECK(v.objectives == NULL);
    tp__buf_free(&t.last);
    reported(&t, "{\"acc\": 0.5, \"latency\": \"fast\"}");
    tp__verdict_judge(&t, &ok, &f, &v);
    TP_CHECK_INT(v.kind, TP_VERDICT_FAILED);
    TP_CHECK(strstr(v.why, "lacks the objective \"latency\""));
    TP_CHECK(isnan(v.values[1]));
    TP_CHECK_STR(v.objectives, "[0.5,null]");
    tp__verdict_free(&v);
    tp__buf_free(&t.last);
}

/* The same inputs give the same verdict: nothing but its arguments decides. */
TP_TEST(test_the_verdict_is_a_function_of_its_inputs) {
    tp_experiment_t x = one_objective();
    tp_judge_facts_t f = {.x = &x};
    trial_t t;
    reported(&t, "{\"acc\": 0.5}");
    tp_exited_t e = {.ended = TP_ENDED_SIGNALED, .status = "signaled", .signal = SIGSEGV};
    tp_verdict_t a, b;
    tp__verdict_judge(&t, &e, &f, &a);
    tp__verdict_judge(&t, &e, &f, &b);
    TP_CHECK_INT(a.kind, b.kind);
    TP_CHECK_STR(a.why, b.why);
    TP_CHECK_INT(t.state, TP_TRIAL_RUNNING); /* and the trial is left as it was */
    TP_CHECK_INT(t.failures, 0);
    tp__buf_free(&t.last);
}

int main(void) {
    return tp_test_main();
}
