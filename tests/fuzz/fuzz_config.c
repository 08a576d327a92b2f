/* libFuzzer harness: the experiment-file loader (YAML -> validated
 * experiment). Any input must give 0 or an error with a message; never a
 * crash, a leak or undefined behaviour. And a property: an accepted file
 * never fails a trial at launch for a config reason. Every duration fits
 * what the launch message and the agent's timers carry, and so does
 * log_limit. The first jobs its search hands out each have every
 * parameter, a finite number wherever a number, whose text fits in one
 * environment variable. Each argv is built as the run builds it. A broken
 * property aborts, naming it. */
#include <math.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "config/config.h"
#include "run/orchestrator_internal.h"

#define JOBS 4 /* drawn per accepted file */

static void broken(const char *what, const char *detail) {
    fprintf(stderr, "fuzz_config: an accepted file breaks a launch: %s (%s)\n", what, detail);
    abort();
}

static void check_duration(const char *key, double s, int may_be_zero) {
    char t[64];
    snprintf(t, sizeof t, "%s = %.17g s", key, s);
    if (may_be_zero && s == 0) return;
    if (!(s >= TP_DURATION_MIN_S && s <= TP_DURATION_MAX_S)) broken("a duration out of range", t);
}

/* One configuration as a launch takes it: every parameter there and
 * finite (an inactive one of a conditional space aside), its text fits
 * one variable, and the argv builds. */
static void check_job(const tp_experiment_t *x, const tp_job_t *job, char *text) {
    unsigned char active[256] = {0};
    if (x->space.n > sizeof active) return;
    tp__space_active(&x->space, job->config, active);
    for (size_t i = 0; i < x->space.n; i++) {
        const char *name = x->space.params[i].name;
        json_t *v = json_object_get(job->config, name);
        if (!v && active[i]) broken("an active parameter has no value", name);
        if (!v) continue;
        if (json_is_real(v) && !isfinite(json_real_value(v))) broken("a value is not finite", name);
        if (tp__value_text(v, text, TP_VALUE_MAX + 1) < 0) broken("a value is too long", name);
    }
    char id[32], budget[32] = "";
    snprintf(id, sizeof id, "%lld", (long long)job->trial);
    if (x->budget_name) tp__fmt_double(job->budget, budget);
    tp_subst_extra_t extra = {.trial_id = id,
                              .trial_dir = "/runs/x/trials/000000",
                              .budget_name = x->budget_name,
                              .budget_value = budget,
                              .configs_json = x->fuse.max ? "[]" : NULL};
    tp_error_t err = {0};
    json_t *argv = tp__substitute_argv(x->argv, x->argc, &x->space, job->config, &extra, &err);
    if (!argv) broken("the argv cannot be built", err.msg);
    json_decref(argv);
}

static void check_accepted(const tp_experiment_t *x) {
    check_duration("timeout", x->timeout_s, 1);
    check_duration("stop_grace", x->grace_s, 0);
    if (x->log_limit > TP_LOG_LIMIT_MAX) broken("log_limit past an int64", "log_limit");
    tp_error_t err = {0};
    tp_scheduler_t *s = tp__run_scheduler_new(x, &err);
    if (!s) return; /* said at the run's start, before any trial */
    char *text = malloc(TP_VALUE_MAX + 1);
    for (int i = 0; i < JOBS; i++) {
        tp_job_t job;
        memset(&job, 0, sizeof job);
        if (s->ops->next(s, 0, &job) != 1) break;
        if (job.is_new && job.config) check_job(x, &job, text);
        json_decref(job.config);
    }
    free(text);
    tp__scheduler_free(s);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    tp_experiment_t x;
    tp_error_t err;
    if (tp__experiment_parse("fuzz.yaml", (const char *)data, size, &x, &err) == 0) {
        check_accepted(&x);
        tp__experiment_free(&x);
    }
    return 0;
}
