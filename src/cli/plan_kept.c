/* plan_kept: the plan `tunepack plan EXPERIMENT` keeps for the run in its
 * directory (run/plans.c), and `plan --check DIR` against the plan kept
 * there (docs/simulator.md, "The plan is kept for the run"). */
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cli/cli.h"
#include "run/run.h"

void tp__cli_plan_time(char *buf, size_t n, double s) {
    if (s >= 7200)
        snprintf(buf, n, "%.2f h", s / 3600);
    else if (s >= 120)
        snprintf(buf, n, "%.1f min", s / 60);
    else
        snprintf(buf, n, "%.1f s", s);
}

void tp__cli_plan_keep(const char *dir, const char *text, char *kept, size_t n) {
    tp_error_t err = {0};
    int rc = tp__plans_put(dir, text, &err);
    if (rc == TP_PLAN_KEPT)
        snprintf(kept, n,
                 "kept in the store of %s: `tunepack plan --check %s` compares it with "
                 "the run",
                 dir, dir);
    else if (rc == TP_PLAN_WAITS)
        snprintf(kept, n,
                 "kept in %s/plan.json: the run there keeps it in its store when it "
                 "starts",
                 dir);
    else if (rc == TP_PLAN_ASK_THE_RUN) {
        json_t *req = json_pack("{s:s}", "op", "plan");
        char answer[400];
        rc = tp__cli_ask(dir, req, answer, sizeof answer);
        json_decref(req);
        if (rc == 0)
            snprintf(kept, n, "%s (it runs): the dashboard shows it beside the run", answer);
        else
            tp__log(TP_LOG_WARN, "the run in %s did not keep the plan: %s", dir, answer);
    } else {
        tp__log(TP_LOG_WARN, "the plan is not kept: %s", err.msg);
    }
}

static double num(const json_t *o, const char *k1, const char *k2) {
    const json_t *v = json_object_get(o, k1);
    if (k2) v = json_object_get(v, k2);
    return json_is_number(v) ? json_number_value(v) : NAN;
}

/* plan --check against the plan the store kept (plan, made at `at`). */
void tp__cli_plan_check_kept(const char *dir, const char *name, const char *metric,
                             const json_t *plan, double at, const tp_plan_actual_t *a,
                             int as_json) {
    int gpus = (int)json_integer_value(json_object_get(plan, "gpus"));
    const json_t *best = NULL, *b;
    size_t i;
    json_array_foreach(json_object_get(plan, "by_gpus"), i,
                       b) if (json_integer_value(json_object_get(b, "gpus")) == gpus) best =
        json_object_get(b, "best");
    double ms[3] = {num(plan, "makespan_s", "lo"), num(plan, "makespan_s", "median"),
                    num(plan, "makespan_s", "hi")};
    double fin[3] = {num(plan, "trials_finished", "lo"), num(plan, "trials_finished", "median"),
                     num(plan, "trials_finished", "hi")};
    const char *gtype = json_string_value(json_object_get(plan, "gpu_type"));
    if (as_json) {
        json_t *j = json_pack(
            "{s:s, s:s, s:s, s:f, s:I, s:i, s:i, s:{s:O, s:O, s:O}, s:{s:f, s:I, s:o}}", "dir", dir,
            "experiment", name, "plan", "stored", "planned_at", at, "planned_from_trials",
            json_integer_value(json_object_get(json_object_get(plan, "inputs"), "measured_trials")),
            "gpus", gpus, "run_gpus", a->slots, "predicted", "makespan_s",
            json_object_get(plan, "makespan_s"), "trials_finished",
            json_object_get(plan, "trials_finished"), "best", best ? best : json_null(), "actual",
            "makespan_s", a->makespan_s, "trials_finished", (json_int_t)a->finished, "best",
            isnan(a->best) ? json_null() : json_real(a->best));
        if (!j) { /* a kept plan without its figures */
            fprintf(stderr, "tunepack plan: the plan kept in %s lacks its figures\n", dir);
            return;
        }
        json_object_set_new(j, "makespan_error",
                            a->makespan_s > 0 ? json_real(ms[1] / a->makespan_s - 1) : json_null());
        json_object_set(j, "assumed", json_object_get(plan, "assumed"));
        char *t = json_dumps(j, JSON_COMPACT | JSON_PRESERVE_ORDER);
        printf("%s\n", t);
        free(t);
        json_decref(j);
        return;
    }
    char when[64] = "?", m[32], lo[32], hi[32], r[32];
    time_t tt = (time_t)at;
    struct tm tm;
    if (gmtime_r(&tt, &tm)) strftime(when, sizeof when, "%Y-%m-%d %H:%M UTC", &tm);
    tp__cli_plan_time(m, sizeof m, ms[1]);
    tp__cli_plan_time(lo, sizeof lo, ms[0]);
    tp__cli_plan_time(hi, sizeof hi, ms[2]);
    tp__cli_plan_time(r, sizeof r, a->makespan_s);
    printf("check of %s (%s) against its plan of %s, for %d %s GPU%s:\n", dir, name, when, gpus,
           gtype ? gtype : "", gpus == 1 ? "" : "s");
    printf("  makespan         predicted %s (90%% range %s to %s), actual %s: error %+.0f%%\n", m,
           lo, hi, r, a->makespan_s > 0 ? 100 * (ms[1] / a->makespan_s - 1) : 0.0);
    printf("  trials finished  predicted %.0f (90%% range %.0f to %.0f), actual %zu\n", fin[1],
           fin[0], fin[2], a->finished);
    if (json_is_object(best) && !isnan(a->best))
        printf("  best %-11s predicted %.4g (90%% range %.4g to %.4g), actual %.4g: error "
               "%+.4g\n",
               metric, num(best, "median", NULL), num(best, "lo", NULL), num(best, "hi", NULL),
               a->best, num(best, "median", NULL) - a->best);
    else
        printf("  best %-11s cannot be compared (no learning curve measured)\n", metric);
    if (a->slots != gpus)
        printf("  the run had %d GPUs (or CPU slots), the plan %d: the makespans compare unlike "
               "with unlike\n",
               a->slots, gpus);
    printf("  assumed:\n");
    const json_t *w;
    json_array_foreach(json_object_get(plan, "assumed"), i, w)
        printf("    - %s\n", json_string_value(w));
}
