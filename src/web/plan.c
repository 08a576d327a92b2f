/* plan: the plan kept in an experiment's store (`tunepack plan EXPERIMENT`,
 * table plans) beside what happens: the end it predicted against the end
 * the run's pace so far points to (docs/dashboard.md). */
#include <jansson.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "store/store.h"
#include "web/web_internal.h"

static double num(const json_t *o, const char *key) {
    const json_t *v = json_object_get(o, key);
    return json_is_number(v) ? json_number_value(v) : NAN;
}

/* {median, lo, hi} of `range` moved by `by`. */
static json_t *shifted(const json_t *range, double by) {
    return json_pack("{s:f, s:f, s:f}", "median", num(range, "median") + by, "lo",
                     num(range, "lo") + by, "hi", num(range, "hi") + by);
}

json_t *tp__web_plan(tp_store_t *s, const json_t *summary, double now) {
    double at = 0;
    char *text = tp__store_plan_last(s, &at);
    json_t *plan = text ? json_loads(text, 0, NULL) : NULL;
    free(text);
    const json_t *ms = json_object_get(plan, "makespan_s");
    double start = num(summary, "created_at");
    if (!json_is_object(ms) || isnan(start) || !isfinite(num(ms, "median"))) {
        json_decref(plan);
        return NULL;
    }
    const json_t *inputs = json_object_get(plan, "inputs");
    double trials = num(inputs, "trials");
    json_t *o = json_pack(
        "{s:f, s:O, s:O, s:f, s:o, s:O, s:o, s:f}", "at", at, "gpus", json_object_get(plan, "gpus"),
        "gpu_type", json_object_get(plan, "gpu_type"), "deadline_s", num(plan, "deadline_s"),
        "trials", isnan(trials) ? json_null() : json_integer((json_int_t)trials), "trials_finished",
        json_object_get(plan, "trials_finished"), "end", shifted(ms, start), "start", start);
    /* the estimate: the run's pace so far carried to the trials the search runs */
    const json_t *c = json_object_get(summary, "counts");
    json_int_t ended = json_integer_value(json_object_get(c, "completed")) +
                       json_integer_value(json_object_get(c, "stopped")) +
                       json_integer_value(json_object_get(c, "failed"));
    const char *state = json_string_value(json_object_get(summary, "state"));
    char *ended_at = tp__store_meta_get(s, "ended_at");
    json_t *e;
    if (state && strcmp(state, "running") != 0 && ended_at) { /* it ended: the end itself */
        e = json_pack("{s:f, s:s, s:I}", "end", atof(ended_at), "how", "ended", "ended",
                      (json_int_t)ended);
    } else if (ended > 0 && trials > 0 && now > start) {
        double elapsed = now - start;
        e = json_pack("{s:f, s:s, s:I, s:f, s:f}", "end", start + elapsed * trials / (double)ended,
                      "how", "pace", "ended", (json_int_t)ended, "of", trials, "elapsed_s",
                      elapsed);
    } else {
        e = json_pack("{s:n, s:s, s:I}", "end", "how", "none", "ended", (json_int_t)ended);
    }
    free(ended_at);
    json_object_set_new(o, "estimate", e);
    json_decref(plan);
    return o;
}
