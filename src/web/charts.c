/* charts: the dashboard's pictures, drawn on the server as SVG from the
 * store (no charting script is shipped to the browser). Every chart keeps
 * its size bounded whatever the store holds: points are thinned to what the
 * plot can show, and the chart says when it did. */
#include <errno.h>
#include <jansson.h>
#include <math.h>
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "chart/chart.h"
#include "web/web_internal.h"

/* The trials a chart draws, among those its filter keeps (%1$s its joins,
 * %2$s its conditions: tp__web_prepare_filtered). */
#define FINISHED_WITH_VALUE                                                                        \
    "FROM trials t %1$s WHERE t.value IS NOT NULL AND t.state IN ('completed', 'stopped')%2$s "
static const char *const SQL_VALUES =
    "SELECT t.id, t.value, t.budget " FINISHED_WITH_VALUE "ORDER BY t.id";
static const char *const SQL_VALUES_PARAMS =
    "SELECT t.id, t.value, t.params " FINISHED_WITH_VALUE "ORDER BY t.id";
static const char *const SQL_VALUES_COUNT = "SELECT COUNT(*) " FINISHED_WITH_VALUE;
/* ?3: 1 when larger is better. */
static const char *const SQL_CURVE_TRIALS =
    "SELECT id FROM (SELECT t.id AS id FROM trials t %1$s WHERE t.value IS NOT NULL%2$s ORDER BY "
    "CASE WHEN ?3 THEN -t.value ELSE t.value END LIMIT 10) UNION SELECT id FROM (SELECT t.id AS "
    "id FROM trials t %1$s WHERE t.state = 'running'%2$s ORDER BY t.started_at DESC LIMIT 10)";
static const char *const SQL_CURVE = "SELECT step, value FROM metrics WHERE trial = ?1 AND "
                                     "value IS NOT NULL ORDER BY attempt, seq";
static const char *const SQL_RUNGS =
    "SELECT DISTINCT budget FROM decisions WHERE kind = 'job' AND budget > 0 ORDER BY budget";
enum { HISTORY_COLUMNS = 800, CURVE_POINTS = 300, PARCOORDS_MAX = 1000, PARCOORDS_BEST = 300 };

/* A growable array of doubles. */
typedef struct {
    double *v;
    size_t n, cap;
} dvec_t;
static void dpush(dvec_t *d, double x) {
    d->v = tp__xgrow(d->v, &d->cap, d->n + 1, sizeof *d->v, 64);
    d->v[d->n++] = x;
}

/* Points (x ascending) thinned to HISTORY_COLUMNS pixel columns of
 * [lo, lo + span): each column's lowest and highest value, or with
 * last_only its last point; every point when few. Appended to ox, oy. */
static void thin(const dvec_t *x, const dvec_t *y, double lo, double span, int last_only,
                 dvec_t *ox, dvec_t *oy) {
    if (x->n <= 2 * HISTORY_COLUMNS) {
        for (size_t i = 0; i < x->n; i++)
            dpush(ox, x->v[i]), dpush(oy, y->v[i]);
        return;
    }
    size_t i = 0;
    for (size_t c = 0; c < HISTORY_COLUMNS; c++) {
        double end = lo + span * (double)(c + 1) / HISTORY_COLUMNS;
        size_t a = i, kmin = i, kmax = i;
        for (; i < x->n && x->v[i] < end; i++) {
            if (y->v[i] < y->v[kmin]) kmin = i;
            if (y->v[i] > y->v[kmax]) kmax = i;
        }
        if (i == a) continue;
        if (last_only) {
            dpush(ox, x->v[i - 1]), dpush(oy, y->v[i - 1]);
            continue;
        }
        dpush(ox, x->v[kmin]), dpush(oy, y->v[kmin]);
        if (kmax != kmin) dpush(ox, x->v[kmax]), dpush(oy, y->v[kmax]);
    }
}

/* Each trial's value against its number, a series per budget (a value at
 * rung 0 of ASHA is not one at the full budget), and the best so far among
 * the values at the largest budget. More budgets than the palette has
 * colours share one series, and the subtitle says so. O(trials). */
int tp__web_svg_history(tp_store_t *s, const tp_web_trials_q_t *f, tp_buf_t *out, tp_error_t *err) {
    enum { MAX_GROUPS = 8 };
    tp_web_metric_t m;
    tp__web_metric(s, &m);
    sqlite3_stmt *st;
    if (tp__web_prepare_filtered(s, SQL_VALUES, f, &st, err) != 0) return -EINVAL;
    double budget[MAX_GROUPS];
    dvec_t gx[MAX_GROUPS] = {{0}}, gy[MAX_GROUPS] = {{0}};
    size_t ng = 0, n = 0;
    int mixed = 0; /* too many budgets: one series */
    double lo = 0, hi = 0;
    while (st && sqlite3_step(st) == SQLITE_ROW) {
        double id = (double)sqlite3_column_int64(st, 0), v = sqlite3_column_double(st, 1);
        double b = sqlite3_column_type(st, 2) == SQLITE_NULL ? 0 : sqlite3_column_double(st, 2);
        size_t g = 0;
        while (g < ng && budget[g] != b)
            g++;
        if (g == ng && ng == MAX_GROUPS) mixed = 1, g = 0;
        if (g == ng) budget[ng++] = b;
        dpush(&gx[g], id), dpush(&gy[g], v);
        lo = n == 0 ? id : lo, hi = id, n++;
    }
    sqlite3_finalize(st);
    size_t top = 0; /* the group of the largest budget */
    for (size_t g = 1; g < ng; g++)
        if (budget[g] > budget[top]) top = g;
    /* Best so far at the largest budget. */
    dvec_t best = {0};
    for (size_t i = 0; i < (ng ? gx[top].n : 0); i++)
        dpush(&best, i == 0       ? gy[top].v[0]
                     : m.maximize ? fmax(best.v[i - 1], gy[top].v[i])
                                  : fmin(best.v[i - 1], gy[top].v[i]));
    /* Budgets in increasing order, each a colour and a name. */
    size_t order[MAX_GROUPS];
    for (size_t g = 0; g < ng; g++)
        order[g] = g;
    for (size_t a = 1; a < ng; a++)
        for (size_t b = a; b > 0 && budget[order[b]] < budget[order[b - 1]]; b--) {
            size_t t = order[b];
            order[b] = order[b - 1], order[b - 1] = t;
        }
    tp_series_t series[MAX_GROUPS + 1];
    char names[MAX_GROUPS][48];
    dvec_t dx[MAX_GROUPS] = {{0}}, dy[MAX_GROUPS] = {{0}}, bx = {0}, by = {0};
    double span = hi - lo + 1;
    for (size_t k = 0; k < ng; k++) {
        size_t g = order[k];
        thin(&gx[g], &gy[g], lo, span, 0, &dx[g], &dy[g]);
        if (mixed || ng == 1)
            snprintf(names[g], sizeof names[g], "trial value");
        else
            snprintf(names[g], sizeof names[g], "at budget %g", budget[g]);
        series[k] = (tp_series_t){.name = names[g],
                                  .style = TP_SERIES_DOTS,
                                  .colour = k == ng - 1 ? 0 : k + 3, /* the largest: blue */
                                  .n = dx[g].n,
                                  .x = dx[g].v,
                                  .y = dy[g].v};
    }
    if (ng) thin(&gx[top], &best, lo, span, 1, &bx, &by);
    if (bx.n && bx.v[bx.n - 1] < hi)
        dpush(&bx, hi), dpush(&by, by.v[by.n - 1]); /* held to the end */
    char bestname[64];
    snprintf(bestname, sizeof bestname,
             ng > 1 && !mixed ? "best so far at budget %g" : "best so far", ng ? budget[top] : 0);
    series[ng] = (tp_series_t){
        .name = bestname, .style = TP_SERIES_STEPS, .colour = 2, .n = bx.n, .x = bx.v, .y = by.v};
    char sub[240];
    snprintf(sub, sizeof sub, "%zu trial%s with a value%s%s%s; the line is the best so far (%s)", n,
             n == 1 ? "" : "s", tp__web_filtered(f) ? " in the brushed set" : "",
             n > 2 * HISTORY_COLUMNS ? ", thinned to each column's lowest and highest" : "",
             mixed    ? ", budgets mixed (more than 8)"
             : ng > 1 ? ", by the budget they ran to"
                      : "",
             m.maximize ? "max" : "min");
    tp_xy_t p = {.title = "Optimization history",
                 .subtitle = sub,
                 .xlabel = "trial",
                 .ylabel = m.name,
                 .series = series,
                 .nseries = ng + 1,
                 .legend = 1};
    tp__chart_xy(out, &p);
    for (size_t g = 0; g < ng; g++)
        free(gx[g].v), free(gy[g].v), free(dx[g].v), free(dy[g].v);
    free(best.v), free(bx.v), free(by.v);
    return 0;
}

int tp__web_svg_curves(tp_store_t *s, const int64_t *trials, size_t n, const tp_web_trials_q_t *f,
                       tp_buf_t *out, tp_error_t *err) {
    tp_web_metric_t m;
    tp__web_metric(s, &m);
    int64_t *ids = NULL;
    size_t nids = 0;
    if (n > 0) {
        nids = n > 20 ? 20 : n;
        ids = tp__xcalloc(nids, sizeof *ids);
        memcpy(ids, trials, nids * sizeof *ids);
    } else {
        sqlite3_stmt *st;
        if (tp__web_prepare_filtered(s, SQL_CURVE_TRIALS, f, &st, err) != 0) return -EINVAL;
        ids = tp__xcalloc(20, sizeof *ids);
        if (st) sqlite3_bind_int(st, 3, m.maximize);
        while (st && nids < 20 && sqlite3_step(st) == SQLITE_ROW)
            ids[nids++] = sqlite3_column_int64(st, 0);
        sqlite3_finalize(st);
    }
    tp_series_t *series = tp__xcalloc(nids + 1, sizeof *series);
    dvec_t *xs = tp__xcalloc(nids + 1, sizeof *xs), *ys = tp__xcalloc(nids + 1, sizeof *ys);
    char(*names)[32] = tp__xcalloc(nids + 1, sizeof *names);
    sqlite3_stmt *st = tp__web_prepare(s, SQL_CURVE);
    size_t thinned = 0;
    for (size_t k = 0; st && k < nids; k++) {
        sqlite3_reset(st);
        sqlite3_bind_int64(st, 1, ids[k]);
        dvec_t x = {0}, y = {0};
        for (int64_t i = 0; sqlite3_step(st) == SQLITE_ROW; i++) {
            dpush(&x, sqlite3_column_type(st, 0) == SQLITE_NULL
                          ? (double)i
                          : (double)sqlite3_column_int64(st, 0));
            dpush(&y, sqlite3_column_double(st, 1));
        }
        if (x.n > CURVE_POINTS) { /* an even stride, the last point kept */
            size_t w = 0;
            for (size_t i = 0; i < CURVE_POINTS; i++) {
                size_t j = i * (x.n - 1) / (CURVE_POINTS - 1);
                x.v[w] = x.v[j], y.v[w] = y.v[j], w++;
            }
            x.n = y.n = w;
            thinned++;
        }
        xs[k] = x, ys[k] = y;
        snprintf(names[k], sizeof names[k], "trial %lld", (long long)ids[k]);
        series[k] = (tp_series_t){
            .name = names[k], .style = TP_SERIES_LINE, .colour = k, .n = x.n, .x = x.v, .y = y.v};
    }
    sqlite3_finalize(st);
    dvec_t rungs = {0};
    st = tp__web_prepare(s, SQL_RUNGS);
    while (st && sqlite3_step(st) == SQLITE_ROW)
        dpush(&rungs, sqlite3_column_double(st, 0));
    sqlite3_finalize(st);
    char sub[200];
    snprintf(sub, sizeof sub, "%s%s%s%s",
             n ? "the trials asked for" : "the ten best and the latest running trials",
             !n && tp__web_filtered(f) ? " in the brushed set" : "",
             rungs.n ? "; dashed lines: the scheduler's rung budgets" : "",
             thinned ? "; long curves thinned to 300 points" : "");
    tp_xy_t p = {.title = "Learning curves",
                 .subtitle = sub,
                 .xlabel = "step",
                 .ylabel = m.name,
                 .series = series,
                 .nseries = nids,
                 .vlines = rungs.v,
                 .nvlines = rungs.n,
                 .legend = 1};
    tp__chart_xy(out, &p);
    for (size_t k = 0; k < nids; k++)
        free(xs[k].v), free(ys[k].v);
    free(xs), free(ys), free(series), free(names), free(ids), free(rungs.v);
    return 0;
}

/* ---- parameters: parallel coordinates and importance ---------------------- */

/* The completed trials' values and parameters, as columns per parameter:
 * numeric (num[] finite) or categorical (cat[]: a string's text, any other
 * value as JSON text). */
typedef struct {
    char *name;
    int numeric; /* every present value is a number */
    double *num; /* per trial, NaN when absent or not a number */
    char **cat;  /* per trial: the value as above, or NULL when absent */
} pcol_t;
typedef struct {
    size_t n;      /* trials */
    double *value; /* objective per trial */
    long long *id; /* per trial */
    size_t ncols;
    pcol_t *cols;
} ptable_t;

static pcol_t *col_for(ptable_t *t, const char *name, size_t cap_rows) {
    for (size_t c = 0; c < t->ncols; c++)
        if (strcmp(t->cols[c].name, name) == 0) return &t->cols[c];
    t->cols = tp__xrealloc(t->cols, (t->ncols + 1) * sizeof *t->cols);
    pcol_t *c = &t->cols[t->ncols++];
    c->name = tp__strdup(name);
    c->numeric = 1;
    c->num = tp__xmalloc(cap_rows * sizeof *c->num);
    c->cat = tp__xcalloc(cap_rows, sizeof *c->cat);
    for (size_t i = 0; i < cap_rows; i++)
        c->num[i] = NAN;
    return c;
}

/* The finished trials with a value that f keeps (NULL: all; a brush,
 * filtered by SQLite): 0, or -EINVAL with err (nothing to free) when f names
 * a column that is none. One read transaction, so the count and the rows agree. */
static int ptable_load(tp_store_t *s, const tp_web_trials_q_t *f, ptable_t *t, tp_error_t *err) {
    memset(t, 0, sizeof *t);
    sqlite3_stmt *st;
    if (tp__web_prepare_filtered(s, SQL_VALUES_COUNT, f, &st, err) != 0) return -EINVAL;
    sqlite3_exec(tp__store_sqlite(s), "BEGIN", NULL, NULL, NULL);
    size_t cap = st && sqlite3_step(st) == SQLITE_ROW ? (size_t)sqlite3_column_int64(st, 0) : 0;
    sqlite3_finalize(st);
    t->value = tp__xcalloc(cap + 1, sizeof *t->value);
    t->id = tp__xcalloc(cap + 1, sizeof *t->id);
    tp__web_prepare_filtered(s, SQL_VALUES_PARAMS, f, &st, err);
    while (st && t->n < cap && sqlite3_step(st) == SQLITE_ROW) {
        size_t i = t->n++;
        t->value[i] = sqlite3_column_double(st, 1);
        t->id[i] = sqlite3_column_int64(st, 0);
        json_t *params = json_loads((const char *)sqlite3_column_text(st, 2), 0, NULL);
        const char *k;
        json_t *v;
        json_object_foreach(params, k, v) {
            pcol_t *c = col_for(t, k, cap + 1);
            if (json_is_number(v))
                c->num[i] = json_number_value(v);
            else
                c->numeric = 0;
            /* A choice's text as it is (adam, not "adam"), as the table shows it. */
            c->cat[i] = json_is_string(v) ? tp__strdup(json_string_value(v))
                                          : json_dumps(v, JSON_ENCODE_ANY | JSON_COMPACT);
        }
        json_decref(params);
    }
    sqlite3_finalize(st);
    sqlite3_exec(tp__store_sqlite(s), "COMMIT", NULL, NULL, NULL);
    return 0;
}

static void ptable_free(ptable_t *t) {
    for (size_t c = 0; c < t->ncols; c++) {
        for (size_t i = 0; i < t->n; i++)
            free(t->cols[c].cat[i]);
        free(t->cols[c].name), free(t->cols[c].num), free(t->cols[c].cat);
    }
    free(t->cols), free(t->value), free(t->id);
}

/* A categorical column's distinct values, sorted; *k is set per trial to its
 * value's index (SIZE_MAX when absent). Caller frees the list (not the strings). */
static char **categories(const pcol_t *c, size_t n, size_t *k, size_t *ncat) {
    char **list = tp__xcalloc(n + 1, sizeof *list);
    *ncat = 0;
    for (size_t i = 0; i < n; i++) {
        k[i] = SIZE_MAX;
        if (!c->cat[i]) continue;
        size_t j = 0;
        while (j < *ncat && strcmp(list[j], c->cat[i]) != 0)
            j++;
        if (j == *ncat) list[(*ncat)++] = c->cat[i];
        k[i] = j;
    }
    return list;
}

static int by_key(const void *a, const void *b, void *key) {
    const double *k = key;
    double x = k[*(const size_t *)a], y = k[*(const size_t *)b];
    return (x > y) - (x < y);
}
/* order[] = 0..n-1 sorted by key. O(n log n). */
static void sort_by(const double *key, size_t *order, size_t n) {
    for (size_t i = 0; i < n; i++)
        order[i] = i;
    qsort_r(order, n, sizeof *order, by_key, (void *)key);
}

/* How much of the objective's variance one parameter explains alone: the
 * correlation ratio eta^2 = between-group / total sum of squares, groups
 * being a categorical parameter's values or up to ten equal-count bins of a
 * numeric one (by rank, so any scale gives the same answer). 0 when it cannot
 * be told (fewer than 4 trials with the parameter). */
static double eta_squared(const pcol_t *c, const double *value, size_t n) {
    size_t *group = tp__xcalloc(n + 1, sizeof *group), ngroups = 0, present = 0;
    if (c->numeric) {
        size_t *order = tp__xcalloc(n + 1, sizeof *order);
        double *key = tp__xcalloc(n + 1, sizeof *key);
        for (size_t i = 0; i < n; i++)
            key[i] = isfinite(c->num[i]) ? c->num[i] : INFINITY;
        sort_by(key, order, n);
        for (size_t i = 0; i < n; i++)
            present += isfinite(c->num[i]) != 0;
        ngroups = present / 4 < 10 ? (present / 4 ? present / 4 : 1) : 10;
        for (size_t r = 0; r < n; r++) {
            size_t i = order[r];
            group[i] = isfinite(c->num[i]) ? r * ngroups / (present ? present : 1) : SIZE_MAX;
            /* ties stay together: same value, same group as the one before */
            if (r > 0 && isfinite(c->num[i]) && c->num[i] == c->num[order[r - 1]])
                group[i] = group[order[r - 1]];
        }
        free(order), free(key);
    } else {
        char **list = categories(c, n, group, &ngroups);
        free(list);
        for (size_t i = 0; i < n; i++)
            present += group[i] != SIZE_MAX;
    }
    double result = 0;
    if (present >= 4 && ngroups > 1) {
        double *sum = tp__xcalloc(ngroups, sizeof *sum), *cnt = tp__xcalloc(ngroups, sizeof *cnt);
        double mean = 0, ss_total = 0, ss_between = 0;
        for (size_t i = 0; i < n; i++)
            if (group[i] != SIZE_MAX)
                sum[group[i]] += value[i], cnt[group[i]] += 1, mean += value[i];
        mean /= (double)present;
        for (size_t i = 0; i < n; i++)
            if (group[i] != SIZE_MAX) ss_total += (value[i] - mean) * (value[i] - mean);
        for (size_t g = 0; g < ngroups; g++)
            if (cnt[g] > 0)
                ss_between += cnt[g] * (sum[g] / cnt[g] - mean) * (sum[g] / cnt[g] - mean);
        result = ss_total > 0 ? ss_between / ss_total : 0;
        free(sum), free(cnt);
    }
    free(group);
    return result;
}

static const char *const IMPORTANCE_METHOD =
    "random forest (32 regression trees on the parameters, fixed seed): each parameter's share of "
    "how much worse the trees predict the trials they did not see when its values are shuffled "
    "among them; splits nest, so a parameter that matters only with another counts. alone: the "
    "share of the variance it explains by itself (eta squared over its values, or ten equal-count "
    "bins of a number), which misses interactions";

static int by_importance(const void *a, const void *b) {
    double x = json_real_value(json_object_get(*(json_t *const *)a, "importance"));
    double y = json_real_value(json_object_get(*(json_t *const *)b, "importance"));
    if (x != y) return (x < y) - (x > y);
    return strcmp(json_string_value(json_object_get(*(json_t *const *)a, "name")),
                  json_string_value(json_object_get(*(json_t *const *)b, "name")));
}

json_t *tp__web_importance(tp_store_t *s, const tp_web_trials_q_t *f, tp_error_t *err) {
    ptable_t t;
    if (ptable_load(s, f, &t, err) != 0) return NULL;
    int brushed = tp__web_filtered(f);
    if (t.n < TP_WEB_IMPORTANCE_MIN) { /* a forest on so few says nothing: none given */
        char note[200];
        snprintf(note, sizeof note,
                 "only %zu trial%s with a value%s: importance needs at least %d, so none is given",
                 t.n, t.n == 1 ? "" : "s", brushed ? " in the brushed set" : "",
                 TP_WEB_IMPORTANCE_MIN);
        ptable_free(&t);
        return json_pack("{s:s, s:I, s:b, s:i, s:[], s:s}", "method", IMPORTANCE_METHOD, "trials",
                         (json_int_t)t.n, "brushed", brushed, "min_trials", TP_WEB_IMPORTANCE_MIN,
                         "params", "note", note);
    }
    size_t p = t.ncols;
    double *x = tp__xcalloc(t.n * p + 1, sizeof *x), *imp = tp__xcalloc(p + 1, sizeof *imp);
    unsigned char *categorical = tp__xcalloc(p + 1, 1);
    size_t *k = tp__xcalloc(t.n + 1, sizeof *k);
    for (size_t c = 0; c < p; c++) {
        categorical[c] = !t.cols[c].numeric;
        if (categorical[c]) {
            size_t ncat;
            free(categories(&t.cols[c], t.n, k, &ncat));
            for (size_t i = 0; i < t.n; i++) /* absent: a category of its own */
                x[i * p + c] = (double)(k[i] == SIZE_MAX ? ncat : k[i]);
        } else {
            for (size_t i = 0; i < t.n; i++)
                x[i * p + c] = t.cols[c].num[i];
        }
    }
    tp__web_forest_importance(x, categorical, t.n, p, t.value, imp);
    json_t **e = tp__xcalloc(p + 1, sizeof *e);
    for (size_t c = 0; c < p; c++)
        e[c] = json_pack("{s:s, s:f, s:f}", "name", t.cols[c].name, "importance", imp[c], "alone",
                         eta_squared(&t.cols[c], t.value, t.n));
    qsort(e, p, sizeof *e, by_importance);
    json_t *list = json_array();
    for (size_t c = 0; c < p; c++)
        json_array_append_new(list, e[c]);
    json_t *o = json_pack("{s:s, s:I, s:b, s:i, s:o}", "method", IMPORTANCE_METHOD, "trials",
                          (json_int_t)t.n, "brushed", brushed, "min_trials", TP_WEB_IMPORTANCE_MIN,
                          "params", list);
    free(x), free(imp), free(categorical), free(k), free(e);
    ptable_free(&t);
    return o;
}

int tp__web_svg_importance(tp_store_t *s, const tp_web_trials_q_t *f, tp_buf_t *out,
                           tp_error_t *err) {
    json_t *o = tp__web_importance(s, f, err);
    if (!o) return -EINVAL;
    json_t *list = json_object_get(o, "params");
    size_t n = json_array_size(list);
    const char **label = tp__xcalloc(n + 1, sizeof *label);
    double *value = tp__xcalloc(n + 1, sizeof *value);
    for (size_t i = 0; i < n; i++) {
        label[i] = json_string_value(json_object_get(json_array_get(list, i), "name"));
        value[i] = json_real_value(json_object_get(json_array_get(list, i), "importance"));
    }
    char sub[240];
    const char *note = json_string_value(json_object_get(o, "note"));
    if (note)
        snprintf(sub, sizeof sub, "%s", note);
    else
        snprintf(sub, sizeof sub,
                 "random forest over %lld trials with a value%s: the share of the error "
                 "when its values are shuffled (interactions count); most important first",
                 (long long)json_integer_value(json_object_get(o, "trials")),
                 json_is_true(json_object_get(o, "brushed")) ? " in the brushed set" : "");
    tp_hbars_t p = {
        .title = "Parameter importance", .subtitle = sub, .n = n, .label = label, .value = value};
    tp__chart_hbars(out, &p);
    free(label), free(value);
    json_decref(o);
    return 0;
}

void tp__web_svg_parcoords(tp_store_t *s, tp_buf_t *out) {
    tp_web_metric_t m;
    tp__web_metric(s, &m);
    ptable_t t;
    ptable_load(s, NULL, &t, NULL);
    size_t naxes = t.ncols + 1;
    /* Which trials: all when few, else the best ones and an even sample of the rest. */
    size_t *order = tp__xcalloc(t.n + 1, sizeof *order);
    double *key = tp__xcalloc(t.n + 1, sizeof *key);
    for (size_t i = 0; i < t.n; i++)
        key[i] = m.maximize ? -t.value[i] : t.value[i];
    sort_by(key, order, t.n);
    size_t nlines = t.n <= PARCOORDS_MAX ? t.n : PARCOORDS_MAX;
    size_t *pick = tp__xcalloc(nlines + 1, sizeof *pick);
    for (size_t k = 0; k < nlines; k++)
        pick[k] = t.n <= PARCOORDS_MAX || k < PARCOORDS_BEST
                      ? order[k]
                      : order[PARCOORDS_BEST + (k - PARCOORDS_BEST) * (t.n - PARCOORDS_BEST) /
                                                   (PARCOORDS_MAX - PARCOORDS_BEST)];
    double *v = tp__xcalloc(nlines * naxes + 1, sizeof *v);
    double *lo = tp__xcalloc(naxes, sizeof *lo), *hi = tp__xcalloc(naxes, sizeof *hi);
    const char **axis = tp__xcalloc(naxes, sizeof *axis);
    const char *const **ticks = tp__xcalloc(naxes, sizeof *ticks);
    size_t *nticks = tp__xcalloc(naxes, sizeof *nticks), *k_of = tp__xcalloc(t.n + 1, sizeof *k_of);
    char **cat_lists[64] = {0};
    char log_names[64][140];
    /* Brushing: an axis filters the trials table by its column (a number's by a range, a
     * choice's by a set of its labels, listed in cats). */
    char **keys = tp__xcalloc(naxes, sizeof *keys), **cats = tp__xcalloc(naxes, sizeof *cats);
    int *logs = tp__xcalloc(naxes, sizeof *logs);
    long long *line_id = tp__xcalloc(nlines + 1, sizeof *line_id);
    for (size_t l = 0; l < nlines; l++)
        line_id[l] = t.id[pick[l]];
    for (size_t a = 0; a < naxes; a++) {
        const double *col = a < t.ncols ? t.cols[a].num : t.value;
        axis[a] = a < t.ncols ? t.cols[a].name : m.name;
        if (a < t.ncols && !t.cols[a].numeric) {
            size_t ncat;
            char **list = categories(&t.cols[a], t.n, k_of, &ncat);
            if (a < 64) cat_lists[a] = list;
            if (a < 64) { /* its labels, as the ticks name them */
                json_t *names = json_array();
                for (size_t k = 0; k < ncat; k++)
                    json_array_append_new(names, json_string(list[k]));
                cats[a] = json_dumps(names, JSON_COMPACT);
                json_decref(names);
                tp_buf_t k;
                tp__buf_init(&k);
                tp__buf_printf(&k, "p:%s", t.cols[a].name);
                keys[a] = k.data;
            }
            ticks[a] = (const char *const *)list;
            nticks[a] = ncat;
            for (size_t l = 0; l < nlines; l++) {
                size_t i = pick[l];
                v[l * naxes + a] = k_of[i] == SIZE_MAX ? NAN
                                   : ncat > 1          ? (double)k_of[i] / (double)(ncat - 1)
                                                       : 0.5;
            }
            if (a >= 64) free(list), ticks[a] = NULL, nticks[a] = 0;
            continue;
        }
        lo[a] = INFINITY, hi[a] = -INFINITY;
        for (size_t i = 0; i < t.n; i++)
            if (isfinite(col[i])) lo[a] = fmin(lo[a], col[i]), hi[a] = fmax(hi[a], col[i]);
        /* A positive range over two decades (a learning rate) is shown on a log scale. */
        int logscale = a < t.ncols && lo[a] > 0 && hi[a] / lo[a] >= 100;
        if (logscale) {
            snprintf(log_names[a % 64], sizeof log_names[0], "%s (log)", axis[a]);
            axis[a] = log_names[a % 64];
        }
        logs[a] = logscale;
        if (a < t.ncols) {
            tp_buf_t k;
            tp__buf_init(&k);
            tp__buf_printf(&k, "p:%s", t.cols[a].name);
            keys[a] = k.data;
        } else {
            keys[a] = tp__strdup("value");
        }
        double l0 = logscale ? log(lo[a]) : lo[a], l1 = logscale ? log(hi[a]) : hi[a];
        for (size_t l = 0; l < nlines; l++) {
            double x = col[pick[l]];
            if (logscale && isfinite(x)) x = log(x);
            v[l * naxes + a] = !isfinite(x) ? NAN : l1 > l0 ? (x - l0) / (l1 - l0) : 0.5;
        }
    }
    double *shade = tp__xcalloc(nlines + 1, sizeof *shade);
    double vlo = lo[naxes - 1], vhi = hi[naxes - 1];
    for (size_t l = 0; l < nlines; l++) {
        double x = vhi > vlo ? (t.value[pick[l]] - vlo) / (vhi - vlo) : 1;
        shade[l] = m.maximize ? x : 1 - x;
    }
    char sub[200];
    snprintf(sub, sizeof sub, "%zu trials with a value%s; green is best", t.n,
             t.n > PARCOORDS_MAX ? ": the best 300 and an even sample of the rest, 1000 lines"
                                 : "");
    tp_parcoords_t p = {.title = "Parallel coordinates",
                        .subtitle = sub,
                        .naxes = naxes,
                        .axis = axis,
                        .ticks = ticks,
                        .nticks = nticks,
                        .nlines = nlines,
                        .v = v,
                        .shade = shade,
                        .lo = lo,
                        .hi = hi,
                        .key = (const char *const *)keys,
                        .cats = (const char *const *)cats,
                        .logscale = logs,
                        .id = line_id};
    tp__chart_parcoords(out, &p);
    for (size_t a = 0; a < naxes; a++)
        free(keys[a]), free(cats[a]);
    free(keys), free(cats), free(logs), free(line_id);
    for (size_t a = 0; a < 64 && a < naxes; a++)
        free(cat_lists[a]);
    free(order), free(key), free(pick), free(v), free(lo), free(hi), free(axis), free(ticks);
    free(nticks), free(k_of), free(shade);
    ptable_free(&t);
}

/* ---- slice and contour: the objective against one or two parameters ------- */

/* A parameter as an axis: each trial's bin (SIZE_MAX: absent) among nbins,
 * each bin's label, and each trial's position along it (its value, log10 of
 * it over a positive range of two decades or more, or a choice's index). */
typedef struct {
    size_t nbins;
    size_t *bin;
    double *pos;
    char **label; /* nbins */
    char name[200];
} paxis_t;

static const pcol_t *pcol_find(const ptable_t *t, const char *name) {
    for (size_t c = 0; name && c < t->ncols; c++)
        if (strcmp(t->cols[c].name, name) == 0) return &t->cols[c];
    return NULL;
}

/* -EINVAL with err listing t's parameters. */
static int no_param(const ptable_t *t, const char *name, tp_error_t *err) {
    tp_buf_t names;
    tp__buf_init(&names);
    for (size_t c = 0; c < t->ncols; c++)
        tp__buf_printf(&names, "%s%s", c ? ", " : "", t->cols[c].name);
    tp__errorf(err, -EINVAL, "no parameter '%s' among the trials with a value (%s)",
               name ? name : "", names.data ? names.data : "none");
    tp__buf_free(&names);
    return -EINVAL;
}

/* Each name one of the parameters of the trials with a value: 0, or -EINVAL
 * with err listing them. The brushed set t may lack one that trials outside
 * it have: it gets an empty column there (its plot shows no trial, not an
 * error), found by reading every trial once more. */
static int pcols_known(tp_store_t *s, ptable_t *t, const tp_web_trials_q_t *f,
                       const char *const *names, size_t n, tp_error_t *err) {
    ptable_t all;
    int loaded = 0, rc = 0;
    for (size_t k = 0; k < n && rc == 0; k++) {
        if (pcol_find(t, names[k])) continue;
        if (!tp__web_filtered(f) || !names[k]) {
            rc = no_param(t, names[k], err);
            continue;
        }
        if (!loaded) ptable_load(s, NULL, &all, NULL), loaded = 1;
        if (pcol_find(&all, names[k]))
            col_for(t, names[k], t->n + 1);
        else
            rc = no_param(&all, names[k], err);
    }
    if (loaded) ptable_free(&all);
    return rc;
}

static void paxis_make(const pcol_t *c, size_t n, size_t want, paxis_t *a) {
    a->bin = tp__xcalloc(n + 1, sizeof *a->bin);
    a->pos = tp__xcalloc(n + 1, sizeof *a->pos);
    if (!c->numeric) {
        char **list = categories(c, n, a->bin, &a->nbins);
        a->label = tp__xcalloc(a->nbins + 1, sizeof *a->label);
        tp_buf_t name;
        tp__buf_init(&name);
        tp__buf_printf(&name, "%s (", c->name);
        for (size_t k = 0; k < a->nbins; k++) {
            a->label[k] = tp__strdup(list[k]);
            if (k < 8) tp__buf_printf(&name, "%s%zu = %s", k ? ", " : "", k, list[k]);
        }
        tp__buf_printf(&name, "%s)", a->nbins > 8 ? ", ..." : "");
        snprintf(a->name, sizeof a->name, "%s", name.data);
        tp__buf_free(&name);
        for (size_t i = 0; i < n; i++)
            a->pos[i] = a->bin[i] == SIZE_MAX ? NAN : (double)a->bin[i];
        free(list);
        return;
    }
    double lo = INFINITY, hi = -INFINITY;
    for (size_t i = 0; i < n; i++)
        if (isfinite(c->num[i])) lo = fmin(lo, c->num[i]), hi = fmax(hi, c->num[i]);
    int logscale = lo > 0 && hi / lo >= 100;
    snprintf(a->name, sizeof a->name, "%s%s", c->name, logscale ? " (log10)" : "");
    double l0 = logscale ? log10(lo) : lo, l1 = logscale ? log10(hi) : hi;
    a->nbins = isfinite(l0) ? (l1 > l0 ? want : 1) : 0;
    a->label = tp__xcalloc(a->nbins + 1, sizeof *a->label);
    for (size_t b = 0; b < a->nbins; b++) {
        double mid = l0 + (l1 - l0) * ((double)b + 0.5) / (double)a->nbins;
        char text[32];
        snprintf(text, sizeof text, "%.3g", logscale ? pow(10, mid) : mid);
        a->label[b] = tp__strdup(text);
    }
    for (size_t i = 0; i < n; i++) {
        double x = c->num[i];
        a->pos[i] = !isfinite(x) ? NAN : logscale ? log10(x) : x;
        a->bin[i] = SIZE_MAX;
        if (isfinite(a->pos[i]) && a->nbins) {
            double f = l1 > l0 ? (a->pos[i] - l0) / (l1 - l0) : 0;
            size_t b = (size_t)(f * (double)a->nbins);
            a->bin[i] = b >= a->nbins ? a->nbins - 1 : b;
        }
    }
}

static void paxis_free(paxis_t *a) {
    for (size_t b = 0; b < a->nbins; b++)
        free(a->label[b]);
    free(a->label), free(a->bin), free(a->pos);
}

int tp__web_svg_slice(tp_store_t *s, const char *param, const tp_web_trials_q_t *f, tp_buf_t *out,
                      tp_error_t *err) {
    tp_web_metric_t m;
    tp__web_metric(s, &m);
    ptable_t t;
    if (ptable_load(s, f, &t, err) != 0) return -EINVAL;
    if (pcols_known(s, &t, f, &param, 1, err) != 0) return ptable_free(&t), -EINVAL;
    const pcol_t *c = pcol_find(&t, param);
    paxis_t a;
    paxis_make(c, t.n, 10, &a);
    tp_series_t series = {
        .name = NULL, .style = TP_SERIES_DOTS, .colour = 0, .n = t.n, .x = a.pos, .y = t.value};
    char title[200], sub[120];
    snprintf(title, sizeof title, "Slice: %s against %s", m.name, c->name);
    snprintf(sub, sizeof sub, "%zu trials with a value%s, each a dot; the other parameters vary",
             t.n, tp__web_filtered(f) ? " in the brushed set" : "");
    tp_xy_t p = {.title = title,
                 .subtitle = sub,
                 .xlabel = a.name,
                 .ylabel = m.name,
                 .series = &series,
                 .nseries = 1};
    tp__chart_xy(out, &p);
    paxis_free(&a);
    ptable_free(&t);
    return 0;
}

int tp__web_svg_contour(tp_store_t *s, const char *px, const char *py, const tp_web_trials_q_t *f,
                        tp_buf_t *out, tp_error_t *err) {
    enum { BINS = 12 };
    tp_web_metric_t m;
    tp__web_metric(s, &m);
    ptable_t t;
    if (ptable_load(s, f, &t, err) != 0) return -EINVAL;
    const char *pair[] = {px, py};
    if (pcols_known(s, &t, f, pair, 2, err) != 0) return ptable_free(&t), -EINVAL;
    const pcol_t *cx = pcol_find(&t, px), *cy = pcol_find(&t, py);
    paxis_t ax, ay;
    paxis_make(cx, t.n, BINS, &ax);
    paxis_make(cy, t.n, BINS, &ay);
    size_t cells = ax.nbins * ay.nbins;
    double *sum = tp__xcalloc(cells + 1, sizeof *sum),
           *shade = tp__xcalloc(cells + 1, sizeof *shade);
    size_t *cnt = tp__xcalloc(cells + 1, sizeof *cnt);
    for (size_t i = 0; i < t.n; i++)
        if (ax.bin[i] != SIZE_MAX && ay.bin[i] != SIZE_MAX)
            sum[ay.bin[i] * ax.nbins + ax.bin[i]] += t.value[i],
                cnt[ay.bin[i] * ax.nbins + ax.bin[i]]++;
    double lo = INFINITY, hi = -INFINITY;
    for (size_t k = 0; k < cells; k++)
        if (cnt[k]) lo = fmin(lo, sum[k] / (double)cnt[k]), hi = fmax(hi, sum[k] / (double)cnt[k]);
    char **tip = tp__xcalloc(cells + 1, sizeof *tip);
    size_t filled = 0;
    for (size_t k = 0; k < cells; k++) {
        shade[k] = NAN;
        if (!cnt[k]) continue;
        double mean = sum[k] / (double)cnt[k], at = hi > lo ? (mean - lo) / (hi - lo) : 1;
        shade[k] = m.maximize ? at : 1 - at;
        tp_buf_t b;
        tp__buf_init(&b);
        tp__buf_printf(&b, "%s %s, %s %s: mean %s %.6g over %zu trial%s", cx->name,
                       ax.label[k % ax.nbins], cy->name, ay.label[k / ax.nbins], m.name, mean,
                       cnt[k], cnt[k] == 1 ? "" : "s");
        tip[k] = b.data;
        filled++;
    }
    char title[300], sub[200];
    snprintf(title, sizeof title, "Contour: mean %s over %s and %s", m.name, cx->name, cy->name);
    snprintf(sub, sizeof sub,
             "%zu trials with a value%s in %zu of %zu cells (a number in %d equal bins); green is "
             "best, blank: no trial",
             t.n, tp__web_filtered(f) ? " in the brushed set" : "", filled, cells, BINS);
    tp_grid_t g = {.title = title,
                   .subtitle = sub,
                   .xlabel = ax.name,
                   .ylabel = ay.name,
                   .nx = ax.nbins,
                   .ny = ay.nbins,
                   .shade = shade,
                   .tip = (const char *const *)tip,
                   .xtick = (const char *const *)ax.label,
                   .ytick = (const char *const *)ay.label};
    tp__chart_grid(out, &g);
    for (size_t k = 0; k < cells; k++)
        free(tip[k]);
    free(tip), free(sum), free(shade), free(cnt);
    paxis_free(&ax), paxis_free(&ay);
    ptable_free(&t);
    return 0;
}
