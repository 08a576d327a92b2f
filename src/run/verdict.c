/* verdict: see verdict.h. */
#include "run/verdict.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util/util.h"

/* "SIGKILL", or "signal 77" for a number with no name; into buf. */
static const char *signal_name(int sig, char *buf, size_t n) {
    const char *s = sigabbrev_np(sig);
    if (s)
        snprintf(buf, n, "SIG%s", s);
    else
        snprintf(buf, n, "signal %d", sig);
    return buf;
}

/* Several objectives: each one's value in t's last report (NaN where it is
 * missing or no finite number) into v->values, and as a JSON array into
 * v->objectives. Returns the name of the first missing one, or NULL. */
static const char *objective_values(const trial_t *t, const tp_experiment_t *x, tp_verdict_t *v) {
    json_t *last = t->last.len ? json_loadb(t->last.data, t->last.len, 0, NULL) : NULL;
    json_t *arr = json_array();
    const char *missing = NULL;
    for (size_t j = 0; j < x->nobjectives; j++) {
        json_t *n = json_object_get(last, x->objectives[j].name);
        double d = json_is_number(n) ? json_number_value(n) : NAN;
        v->values[j] = isfinite(d) ? d : NAN;
        json_array_append_new(arr, isnan(v->values[j]) ? json_null() : json_real(v->values[j]));
        if (isnan(v->values[j]) && !missing) missing = x->objectives[j].name;
    }
    v->objectives = json_dumps(arr, JSON_COMPACT);
    json_decref(arr);
    json_decref(last);
    return missing;
}

/* Constraints: each constrained metric's value in t's last report into
 * v->cvalues, and as a JSON array into v->constraints. */
static void constraint_values(const trial_t *t, const tp_experiment_t *x, tp_verdict_t *v) {
    if (!x->nconstraints) return;
    json_t *last = t->last.len ? json_loadb(t->last.data, t->last.len, 0, NULL) : NULL;
    tp__constraint_values(x->constraints, x->nconstraints, last, v->cvalues);
    json_t *arr = json_array();
    for (size_t k = 0; k < x->nconstraints; k++)
        json_array_append_new(arr, isnan(v->cvalues[k]) ? json_null() : json_real(v->cvalues[k]));
    v->constraints = json_dumps(arr, JSON_COMPACT);
    json_decref(arr);
    json_decref(last);
}

/* Exited 0: done when it reported the objective(s), else failed with why. */
static void judge_exit_0(const trial_t *t, const tp_experiment_t *x, tp_verdict_t *v) {
    const char *missing = x->nobjectives > 1 ? objective_values(t, x, v) : NULL;
    if (t->has_value && !missing) {
        v->kind = TP_VERDICT_DONE;
        return;
    }
    v->kind = TP_VERDICT_FAILED;
    if (t->has_value)
        snprintf(v->why, sizeof v->why,
                 "exited 0, but its last report lacks the objective \"%s\" (every report that "
                 "has \"%s\" must carry all objectives)",
                 missing, x->metric);
    else if (t->current.seq == 0 && t->current.garbage > 0)
        snprintf(v->why, sizeof v->why,
                 "exited 0 without ever reporting the objective \"%s\": all %d of its report "
                 "lines were rejected, the first because: %s",
                 x->metric, t->current.garbage, t->current.first_garbage);
    else
        snprintf(v->why, sizeof v->why, "exited 0 without ever reporting the objective \"%s\"%s%s",
                 x->metric, t->current.seq ? "" : " (no report at all)",
                 /* the likely cause under a budget: the job found its checkpoint at its end
                  * (an earlier attempt, lost before its reports came, got there) */
                 x->budget_name ? "; a job whose checkpoint is already at or past its budget "
                                  "must still report the metrics of that step "
                                  "(docs/checkpoints.md)"
                                : "");
}

void tp__verdict_judge(const trial_t *t, const tp_exited_t *e, const tp_judge_facts_t *f,
                       tp_verdict_t *v) {
    memset(v, 0, sizeof *v);
    for (size_t j = 0; j < TP_MAX_OBJECTIVES; j++)
        v->values[j] = NAN;
    for (size_t k = 0; k < TP_MAX_CONSTRAINTS; k++)
        v->cvalues[k] = NAN;
    const tp_experiment_t *x = f->x;
    int asked_to_stop = e->ended == TP_ENDED_STOPPED &&
                        (f->stopping || tp__elastic_resize_to(t) || f->deadline_hit);
    char sig[32];
    v->kind = TP_VERDICT_FAILED;
    if (t->job.early_stopped && (e->ended == TP_ENDED_STOPPED || e->ended == TP_ENDED_EXITED ||
                                 e->ended == TP_ENDED_SIGNALED)) {
        v->kind = TP_VERDICT_DONE; /* stopped by the scheduler: final, with what it reported */
        if (x->nobjectives > 1) objective_values(t, x, v);
    } else if (asked_to_stop || e->ended == TP_ENDED_PAUSED) {
        v->kind = TP_VERDICT_INTERRUPTED;
    } else if (e->oom && !tp__exited_ok(e)) {
        v->kind = TP_VERDICT_OOM; /* not the trial's fault but its demand's */
    } else if (tp__exited_ok(e)) {
        judge_exit_0(t, x, v);
    } else if (e->ended == TP_ENDED_EXITED) {
        snprintf(v->why, sizeof v->why, "exited with code %d", e->code);
    } else if (e->ended == TP_ENDED_SIGNALED) {
        snprintf(v->why, sizeof v->why, "killed by %s", signal_name(e->signal, sig, sizeof sig));
    } else if (e->ended == TP_ENDED_TIMEOUT) {
        char d[32];
        tp__format_duration(x->timeout_s, d, sizeof d);
        snprintf(v->why, sizeof v->why, "timed out after %s", d);
    } else if (e->ended == TP_ENDED_STOPPED) {
        snprintf(v->why, sizeof v->why, "stopped");
    } else {
        snprintf(v->why, sizeof v->why, "could not start: %s", *e->error ? e->error : e->status);
    }
    if (v->kind == TP_VERDICT_FAILED) tp__verdict_add_garbage(t, v->why, sizeof v->why);
    if (v->kind == TP_VERDICT_DONE) constraint_values(t, x, v);
}

void tp__verdict_add_garbage(const trial_t *t, char *why, size_t size) {
    if (t->current.garbage <= TP_GARBAGE_EVENTS) return;
    size_t n = strlen(why);
    snprintf(why + n, size - n, "%s%d garbage report lines in all", n ? "; " : "",
             t->current.garbage);
}

void tp__verdict_free(tp_verdict_t *v) {
    free(v->objectives);
    v->objectives = NULL;
    free(v->constraints);
    v->constraints = NULL;
}
