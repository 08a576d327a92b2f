/* constraint: see constraint.h. */
#include "search/constraint.h"

#include <math.h>
#include <string.h>

/* How far value lies outside c's bounds: 0 inside (bounds included). */
static double outside(const tp_constraint_t *c, double value) {
    return value > c->max ? value - c->max : value < c->min ? c->min - value : 0;
}

void tp__constraint_values(const tp_constraint_t *c, size_t n, const json_t *report, double *out) {
    for (size_t i = 0; i < n; i++) {
        const json_t *v = json_object_get(report, c[i].metric);
        double d = json_is_number(v) ? json_number_value(v) : NAN;
        out[i] = isfinite(d) ? d : NAN;
    }
}

double tp__constraint_violation(const tp_constraint_t *c, size_t n, const double *values) {
    double total = 0;
    for (size_t i = 0; i < n; i++) {
        if (isnan(values[i])) return INFINITY;
        total += outside(&c[i], values[i]);
    }
    return total;
}

double tp__constraint_violation_of(const tp_constraint_t *c, size_t n, const char *report) {
    if (n == 0) return 0;
    json_t *o = report ? json_loads(report, 0, NULL) : NULL;
    double v[TP_MAX_CONSTRAINTS];
    size_t m = n < TP_MAX_CONSTRAINTS ? n : TP_MAX_CONSTRAINTS;
    tp__constraint_values(c, m, o, v);
    json_decref(o);
    return tp__constraint_violation(c, m, v);
}

int tp__constraint_feasible(const tp_constraint_t *c, size_t n, const char *state,
                            const json_t *report) {
    static const char *const judged[] = {"completed", "stopped", "paused"};
    int ended = 0;
    for (size_t i = 0; state && report && i < sizeof judged / sizeof *judged; i++)
        ended |= strcmp(state, judged[i]) == 0;
    if (!ended) return -1;
    double v[TP_MAX_CONSTRAINTS];
    size_t m = n < TP_MAX_CONSTRAINTS ? n : TP_MAX_CONSTRAINTS;
    tp__constraint_values(c, m, report, v);
    return tp__constraint_violation(c, m, v) == 0;
}

json_t *tp__constraint_standing(const tp_constraint_t *c, size_t n, const char *state,
                                const json_t *report) {
    if (n == 0) return NULL;
    double v[TP_MAX_CONSTRAINTS];
    size_t m = n < TP_MAX_CONSTRAINTS ? n : TP_MAX_CONSTRAINTS;
    tp__constraint_values(c, m, report, v);
    json_t *list = tp__constraints_to_json(c, m), *o;
    size_t i;
    json_array_foreach(list, i, o) {
        json_object_set_new(o, "value", isnan(v[i]) ? json_null() : json_real(v[i]));
        json_object_set_new(o, "violation",
                            isnan(v[i]) ? json_null() : json_real(outside(&c[i], v[i])));
    }
    int ok = tp__constraint_feasible(c, n, state, report);
    json_t *feasible = ok < 0 ? json_null() : json_boolean(ok);
    return json_pack("{s:o, s:o}", "feasible", feasible, "constraints", list);
}

json_t *tp__constraints_to_json(const tp_constraint_t *c, size_t n) {
    json_t *a = json_array();
    for (size_t i = 0; i < n; i++) {
        json_t *o = json_pack("{s:s}", "metric", c[i].metric);
        if (isfinite(c[i].min)) json_object_set_new(o, "min", json_real(c[i].min));
        if (isfinite(c[i].max)) json_object_set_new(o, "max", json_real(c[i].max));
        json_array_append_new(a, o);
    }
    return a;
}

size_t tp__constraints_from_json(const char *text, tp_constraint_t *out, size_t cap,
                                 json_t **keep) {
    *keep = text ? json_loads(text, 0, NULL) : NULL;
    size_t n = 0;
    for (size_t i = 0; i < json_array_size(*keep) && n < cap; i++) {
        const json_t *o = json_array_get(*keep, i);
        const char *m = json_string_value(json_object_get(o, "metric"));
        if (!m) continue;
        const json_t *lo = json_object_get(o, "min"), *hi = json_object_get(o, "max");
        out[n++] = (tp_constraint_t){.metric = m,
                                     .min = json_is_number(lo) ? json_number_value(lo) : -INFINITY,
                                     .max = json_is_number(hi) ? json_number_value(hi) : INFINITY};
    }
    return n;
}
