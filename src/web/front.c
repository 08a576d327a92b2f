/* front: several objectives on the dashboard. The trials `tunepack best`
 * puts on a Pareto front (completed or stopped early, every objective a
 * finite number in the last report kept), the front found by the same
 * function (tp__pareto_front), as JSON and as a chart. */
#include <jansson.h>
#include <math.h>
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "search/constraint.h"
#include "search/pareto.h"
#include "web/web_internal.h"

static const char *const SQL_FINISHED =
    "SELECT id, state, metrics FROM trials WHERE state IN ('completed', 'stopped') "
    "AND metrics IS NOT NULL ORDER BY id";

void tp__web_bounds_load(tp_store_t *s, tp_web_bounds_t *b) {
    char *text = tp__store_meta_get(s, "constraints");
    b->n = tp__constraints_from_json(text, b->c, TP_MAX_CONSTRAINTS, &b->keep);
    free(text);
}

/* Whether the finished trial of st's row (SQL_FINISHED; metrics, its last
 * report) is feasible, by the one rule every reader judges by
 * (tp__constraint_feasible: a constrained metric never reported breaks its
 * constraint); the front leaves an infeasible trial off, and the chart marks
 * it (a grey cross) apart from the dominated ones. */
static int trial_feasible(const tp_web_bounds_t *b, sqlite3_stmt *st, const json_t *metrics) {
    return tp__constraint_feasible(b->c, b->n, (const char *)sqlite3_column_text(st, 1), metrics) ==
           1;
}

/* The store's objectives (meta "objectives": [{"name", "mode"}]) into f;
 * how many there are. */
static size_t objectives(tp_store_t *s, tp_web_front_t *f) {
    char *text = tp__store_meta_get(s, "objectives");
    json_t *a = text ? json_loads(text, 0, NULL) : NULL, *o;
    size_t i, m = 0;
    json_array_foreach(a, i, o) {
        const char *name = json_string_value(json_object_get(o, "name")),
                   *mode = json_string_value(json_object_get(o, "mode"));
        if (!name || m == TP_FRONT_MAX) continue;
        snprintf(f->name[m], sizeof f->name[m], "%s", name);
        f->maximize[m++] = mode && strcmp(mode, "max") == 0;
    }
    json_decref(a);
    free(text);
    return m;
}

int tp__web_front_load(tp_store_t *s, tp_web_front_t *f) {
    memset(f, 0, sizeof *f);
    f->m = objectives(s, f);
    if (f->m < 2) return 0;
    size_t cap = 0, m = f->m;
    tp_web_bounds_t b;
    tp__web_bounds_load(s, &b);
    sqlite3_stmt *st = tp__web_prepare(s, SQL_FINISHED);
    while (st && sqlite3_step(st) == SQLITE_ROW) {
        json_t *metrics = json_loads((const char *)sqlite3_column_text(st, 2), 0, NULL);
        double v[TP_FRONT_MAX];
        size_t j = 0;
        for (; j < m; j++) {
            json_t *x = json_object_get(metrics, f->name[j]);
            v[j] = json_is_number(x) ? json_number_value(x) : NAN;
            if (!isfinite(v[j])) break;
        }
        if (j == m) {
            if (f->n == cap) {
                size_t old = cap;
                f->id = tp__xgrow(f->id, &cap, f->n + 1, sizeof *f->id, 256);
                f->v = tp__xresize(f->v, old, cap, m * sizeof *f->v); /* rows of m */
                f->feasible = tp__xresize(f->feasible, old, cap, sizeof *f->feasible);
            }
            f->id[f->n] = sqlite3_column_int64(st, 0);
            memcpy(f->v + f->n * m, v, m * sizeof *v);
            f->feasible[f->n] = (unsigned char)trial_feasible(&b, st, metrics);
            f->ninfeasible += !f->feasible[f->n];
            f->n++;
        }
        json_decref(metrics);
    }
    sqlite3_finalize(st);
    json_decref(b.keep);
    /* The front of the feasible trials, every objective minimized. */
    size_t nf = 0, *at = tp__xmalloc((f->n ? f->n : 1) * sizeof *at);
    double *loss = tp__xmalloc((f->n ? f->n : 1) * m * sizeof *loss);
    unsigned char *on = tp__xmalloc(f->n ? f->n : 1);
    f->on_front = tp__xcalloc(f->n ? f->n : 1, 1);
    for (size_t i = 0; i < f->n; i++) {
        if (!f->feasible[i]) continue;
        for (size_t j = 0; j < m; j++)
            loss[nf * m + j] = f->maximize[j] ? -f->v[i * m + j] : f->v[i * m + j];
        at[nf++] = i;
    }
    f->nfront = tp__pareto_front(loss, nf, m, on);
    for (size_t k = 0; k < nf; k++)
        f->on_front[at[k]] = on[k];
    free(at), free(loss), free(on);
    return 1;
}

json_t *tp__web_feasibility(tp_store_t *s) {
    tp_web_bounds_t b;
    tp__web_bounds_load(s, &b);
    if (!b.n) {
        json_decref(b.keep);
        return NULL;
    }
    json_int_t finished = 0, infeasible = 0;
    sqlite3_stmt *st = tp__web_prepare(s, SQL_FINISHED);
    while (st && sqlite3_step(st) == SQLITE_ROW) {
        json_t *metrics = json_loads((const char *)sqlite3_column_text(st, 2), 0, NULL);
        finished++;
        infeasible += !trial_feasible(&b, st, metrics);
        json_decref(metrics);
    }
    sqlite3_finalize(st);
    json_t *o = json_pack("{s:o, s:I, s:I}", "constraints", tp__constraints_to_json(b.c, b.n),
                          "finished", finished, "infeasible", infeasible);
    json_decref(b.keep);
    return o;
}

void tp__web_front_free(tp_web_front_t *f) {
    free(f->id), free(f->v), free(f->on_front), free(f->feasible);
    memset(f, 0, sizeof *f);
}

/* Front indices ordered by the first objective, best first, then by id. */
static int by_first(const void *a, const void *b, void *ctx) {
    const tp_web_front_t *f = ctx;
    size_t i = *(const size_t *)a, k = *(const size_t *)b;
    double x = f->v[i * f->m], z = f->v[k * f->m];
    if (x != z) return (x < z) == !f->maximize[0] ? -1 : 1;
    return (f->id[i] > f->id[k]) - (f->id[i] < f->id[k]);
}

json_t *tp__web_front(tp_store_t *s, size_t limit) {
    tp_web_front_t f;
    if (!tp__web_front_load(s, &f)) return NULL;
    json_t *objs = json_array(), *front = json_array();
    for (size_t j = 0; j < f.m; j++)
        json_array_append_new(objs, json_pack("{s:s, s:s}", "name", f.name[j], "mode",
                                              f.maximize[j] ? "max" : "min"));
    size_t *at = tp__xmalloc((f.nfront ? f.nfront : 1) * sizeof *at), k = 0;
    for (size_t i = 0; i < f.n; i++)
        if (f.on_front[i]) at[k++] = i;
    qsort_r(at, k, sizeof *at, by_first, &f);
    for (size_t a = 0; a < k && (!limit || a < limit); a++) {
        json_t *values = json_object();
        for (size_t j = 0; j < f.m; j++)
            json_object_set_new(values, f.name[j], json_real(f.v[at[a] * f.m + j]));
        json_array_append_new(
            front, json_pack("{s:I, s:o}", "trial", (json_int_t)f.id[at[a]], "values", values));
    }
    json_t *o = json_pack("{s:o, s:I, s:I, s:I, s:o}", "objectives", objs, "finished",
                          (json_int_t)f.n, "infeasible", (json_int_t)f.ninfeasible, "on_front",
                          (json_int_t)f.nfront, "front", front);
    free(at);
    tp__web_front_free(&f);
    return o;
}

int tp__web_svg_front(tp_store_t *s, const char *href_prefix, tp_buf_t *out) {
    tp_web_front_t f;
    if (!tp__web_front_load(s, &f)) return 0;
    const char *names[TP_FRONT_MAX];
    for (size_t j = 0; j < f.m; j++)
        names[j] = f.name[j];
    char sub[300];
    snprintf(sub, sizeof sub,
             "%zu finished trial%s with every objective, %zu on the front%s%s; failed and "
             "unfinished trials are not drawn%s",
             f.n, f.n == 1 ? "" : "s", f.nfront, f.ninfeasible ? ", infeasible: " : "",
             f.ninfeasible ? "marked x" : "",
             f.n > 1000 ? "; beyond 1,000 of a kind, points thinned to one per few pixels" : "");
    tp_front_chart_t p = {.title = f.m == 2 ? "Pareto front" : "Pareto front: each pair",
                          .subtitle = sub,
                          .m = f.m,
                          .name = names,
                          .maximize = f.maximize,
                          .n = f.n,
                          .v = f.v,
                          .id = f.id,
                          .on_front = f.on_front,
                          .feasible = f.feasible,
                          .href_prefix = href_prefix};
    tp__chart_front(out, &p);
    tp__web_front_free(&f);
    return 1;
}
