/* lineage: population-based training's exploit and explore tree over time,
 * read back from scheduler pbt's `exploit` decisions (src/run/lineage.c:
 * {segment, donor, donor_step, old, new}) and the trials' reports. Each
 * trial is a lane over the budget; its segments are its runs between
 * exploits; each exploit is an arrow from the donor's lane at donor_step to
 * the recipient's, where its new segment starts. The JSON and the chart are
 * drawn from the same document, so they agree. */
#include <errno.h>
#include <jansson.h>
#include <math.h>
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "chart/chart.h"
#include "web/web_internal.h"

/* A report's JSON, or {} when it is none (json_each stops on malformed JSON). */
#define REPORT(col) "json_each(CASE WHEN json_valid(" col ") THEN " col " ELSE '{}' END)"
static const char *const SQL_METRIC_NAMES = "SELECT DISTINCT j.key FROM trials, " REPORT(
    "trials.metrics") " j WHERE j.type IN ('integer', 'real') ORDER BY j.key LIMIT 30";
static const char *const SQL_HAS_METRIC =
    "SELECT 1 FROM trials, " REPORT("trials.metrics") " j WHERE j.key = ?1 LIMIT 1";
static const char *const SQL_LANES = "SELECT id, state FROM trials ORDER BY id";
static const char *const SQL_EXPLOITS =
    "SELECT trial, detail FROM decisions WHERE kind = 'exploit' ORDER BY seq";
static const char *const SQL_POINTS = "SELECT m.step, j.value FROM metrics m, " REPORT(
    "m.data") " j WHERE m.trial = ?1 AND j.key = ?2 AND j.type IN ('integer', 'real') AND "
              "m.step IS NOT NULL ORDER BY m.attempt, m.seq";
enum { SEGMENT_POINTS = 300 };

/* A metric the trials report (the objective when name is NULL); -EINVAL
 * with err listing them when it is none. */
static int check_metric(tp_store_t *s, const char *name, tp_error_t *err) {
    sqlite3_stmt *st = tp__web_prepare(s, SQL_HAS_METRIC);
    if (!st) return tp__errorf(err, -EIO, "the store cannot be read");
    sqlite3_bind_text(st, 1, name, -1, SQLITE_TRANSIENT);
    int found = sqlite3_step(st) == SQLITE_ROW;
    sqlite3_finalize(st);
    if (found) return 0;
    tp_buf_t names;
    tp__buf_init(&names);
    st = tp__web_prepare(s, SQL_METRIC_NAMES);
    while (st && sqlite3_step(st) == SQLITE_ROW)
        tp__buf_printf(&names, "%s%s", names.len ? ", " : "", sqlite3_column_text(st, 0));
    sqlite3_finalize(st);
    int rc = tp__errorf(err, -EINVAL, "metric=%s: no trial reports it; the metrics are: %s", name,
                        names.len ? names.data : "(none yet)");
    tp__buf_free(&names);
    return rc;
}

/* The points [[step, value], ...] of one segment, thinned to an even stride
 * (the last kept) when long. */
static json_t *thin(json_t *points) {
    size_t n = json_array_size(points);
    if (n <= SEGMENT_POINTS) return points;
    json_t *out = json_array();
    for (size_t i = 0; i < SEGMENT_POINTS; i++)
        json_array_append(out, json_array_get(points, i * (n - 1) / (SEGMENT_POINTS - 1)));
    json_decref(points);
    return out;
}

static json_t *segment(int number, double from) {
    return json_pack("{s:i, s:f, s:[]}", "segment", number, "from", from, "points");
}

/* Trial id's reports split into segments at its exploits (ex: its exploit
 * objects, in order). A segment after an exploit starts at the donor's step;
 * its first report is the first past that step. (Scheduler pbt decides in
 * synchronous generations: a recipient stands at its donor's step when it
 * exploits, so its steps only grow.) */
static json_t *segments_of(sqlite3_stmt *st, long long id, const char *metric, json_t *ex,
                           double *xmax, double *lo, double *hi) {
    json_t *segs = json_array(), *cur = NULL;
    size_t next = 0;
    sqlite3_reset(st);
    sqlite3_bind_int64(st, 1, id);
    sqlite3_bind_text(st, 2, metric, -1, SQLITE_TRANSIENT);
    while (sqlite3_step(st) == SQLITE_ROW) {
        double x = sqlite3_column_double(st, 0), y = sqlite3_column_double(st, 1);
        json_t *e = json_array_get(ex, next);
        double at = json_number_value(json_object_get(e, "donor_step"));
        if (e && x > at) {
            cur = NULL;
            json_array_append_new(
                segs, segment((int)json_integer_value(json_object_get(e, "segment")), at));
            cur = json_array_get(segs, json_array_size(segs) - 1);
            next++;
        } else if (!cur) {
            json_array_append_new(segs, segment(0, x > 0 ? 0 : x));
            cur = json_array_get(segs, 0);
        }
        json_array_append_new(json_object_get(cur, "points"), json_pack("[f, f]", x, y));
        if (x > *xmax) *xmax = x;
        if (isfinite(y) && !(y >= *lo)) *lo = y;
        if (isfinite(y) && !(y <= *hi)) *hi = y;
    }
    size_t i;
    json_t *sg;
    json_array_foreach(segs, i, sg)
        json_object_set_new(sg, "points", thin(json_incref(json_object_get(sg, "points"))));
    return segs;
}

/* {name: [old, new]} for each parameter the exploit changed. */
static json_t *changed(json_t *old, json_t *new) {
    json_t *out = json_object();
    const char *key;
    json_t *v;
    json_object_foreach(new, key, v) {
        json_t *was = json_object_get(old, key);
        if (!json_equal(was, v)) json_object_set_new(out, key, json_pack("[O?, O]", was, v));
    }
    return out;
}

json_t *tp__web_lineage(tp_store_t *s, const char *metric, tp_error_t *err) {
    tp_web_metric_t m;
    tp__web_metric(s, &m);
    int objective = !metric || strcmp(metric, m.name) == 0;
    if (!objective && check_metric(s, metric, err) != 0) return NULL;
    if (objective) metric = m.name;
    json_t *by = json_object(), *exploits = json_array();
    sqlite3_stmt *st = tp__web_prepare(s, SQL_EXPLOITS);
    while (st && sqlite3_step(st) == SQLITE_ROW) {
        const char *text = (const char *)sqlite3_column_text(st, 1);
        json_t *d = text ? json_loads(text, 0, NULL) : NULL;
        if (!json_is_object(d)) {
            json_decref(d);
            continue;
        }
        char id[32];
        snprintf(id, sizeof id, "%lld", (long long)sqlite3_column_int64(st, 0));
        json_t *e = json_pack("{s:I, s:O?, s:O?, s:O?, s:o, s:O?, s:O?}", "trial",
                              (json_int_t)sqlite3_column_int64(st, 0), "segment",
                              json_object_get(d, "segment"), "donor", json_object_get(d, "donor"),
                              "donor_step", json_object_get(d, "donor_step"), "changed",
                              changed(json_object_get(d, "old"), json_object_get(d, "new")), "old",
                              json_object_get(d, "old"), "new", json_object_get(d, "new"));
        json_decref(d);
        json_t *list = json_object_get(by, id);
        if (!list) json_object_set_new(by, id, list = json_array());
        json_array_append(list, e);
        json_array_append_new(exploits, e);
    }
    sqlite3_finalize(st);
    json_t *lanes = json_array();
    double xmax = 0, lo = NAN, hi = NAN;
    sqlite3_stmt *pts = tp__web_prepare(s, SQL_POINTS);
    st = pts ? tp__web_prepare(s, SQL_LANES) : NULL;
    while (st && sqlite3_step(st) == SQLITE_ROW) {
        long long id = sqlite3_column_int64(st, 0);
        char key[32];
        snprintf(key, sizeof key, "%lld", id);
        json_array_append_new(
            lanes,
            json_pack("{s:I, s:s, s:o}", "id", (json_int_t)id, "state",
                      (const char *)sqlite3_column_text(st, 1), "segments",
                      segments_of(pts, id, metric, json_object_get(by, key), &xmax, &lo, &hi)));
    }
    sqlite3_finalize(st);
    sqlite3_finalize(pts);
    json_decref(by);
    json_t *o = json_pack("{s:s, s:s, s:f, s:o, s:o}", "metric", metric, "mode",
                          objective ? (m.maximize ? "max" : "min") : "larger", "max_step", xmax,
                          "trials", lanes, "exploits", exploits);
    json_object_set_new(o, "lo", isfinite(lo) ? json_real(lo) : json_null());
    json_object_set_new(o, "hi", isfinite(hi) ? json_real(hi) : json_null());
    return o;
}

/* A parameter's value as tooltip text: a number with 6 digits. */
static void value_text(tp_buf_t *b, const json_t *v) {
    if (json_is_number(v)) {
        tp__buf_printf(b, "%g", json_number_value(v));
        return;
    }
    char *t = json_dumps(v, JSON_COMPACT | JSON_ENCODE_ANY);
    tp__buf_puts(b, t ? t : "null");
    free(t);
}

int tp__web_svg_lineage(tp_store_t *s, const char *metric, tp_buf_t *out, tp_error_t *err) {
    json_t *o = tp__web_lineage(s, metric, err);
    if (!o) return -EINVAL;
    json_t *lanes = json_object_get(o, "trials"), *exploits = json_object_get(o, "exploits");
    size_t nl = json_array_size(lanes), ns = 0, na = json_array_size(exploits);
    const char *mode = json_string_value(json_object_get(o, "mode"));
    double lo = json_number_value(json_object_get(o, "lo")),
           hi = json_number_value(json_object_get(o, "hi"));
    int flip = strcmp(mode, "min") == 0;
    size_t i, k;
    json_t *t, *sg;
    json_array_foreach(lanes, i, t) ns += json_array_size(json_object_get(t, "segments"));
    char **label = tp__xcalloc(nl + 1, sizeof *label),
         **tips = tp__xcalloc(ns + na + 1, sizeof *tips);
    long long *id = tp__xcalloc(nl + 1, sizeof *id);
    tp_lane_segment_t *segs = tp__xcalloc(ns + 1, sizeof *segs);
    tp_lane_arrow_t *arrows = tp__xcalloc(na + 1, sizeof *arrows);
    size_t n = 0;
    json_array_foreach(lanes, i, t) {
        id[i] = (long long)json_integer_value(json_object_get(t, "id"));
        tp_buf_t b;
        tp__buf_init(&b);
        tp__buf_printf(&b, "trial %lld", id[i]);
        label[i] = tp__buf_steal(&b);
        json_array_foreach(json_object_get(t, "segments"), k, sg) {
            json_t *pts = json_object_get(sg, "points");
            size_t np = json_array_size(pts) + 1;
            double *x = tp__xcalloc(2 * np, sizeof *x), *shade = x + np;
            x[0] = json_number_value(json_object_get(sg, "from")), shade[0] = NAN;
            for (size_t j = 1; j < np; j++) {
                json_t *p = json_array_get(pts, j - 1);
                double y = json_number_value(json_array_get(p, 1));
                x[j] = json_number_value(json_array_get(p, 0));
                shade[j] = hi > lo ? (y - lo) / (hi - lo) : 1;
                if (flip) shade[j] = 1 - shade[j];
            }
            json_t *last = json_array_get(pts, np - 2);
            tp__buf_init(&b);
            tp__buf_printf(&b, "trial %lld, segment %d: steps %g to %g, %s %g at the end", id[i],
                           (int)json_integer_value(json_object_get(sg, "segment")), x[0], x[np - 1],
                           json_string_value(json_object_get(o, "metric")),
                           json_number_value(json_array_get(last, 1)));
            tips[n] = tp__buf_steal(&b);
            segs[n] = (tp_lane_segment_t){
                .lane = i,
                .n = np,
                .x = x,
                .shade = shade,
                .title = tips[n],
                .segment = (int)json_integer_value(json_object_get(sg, "segment"))};
            n++;
        }
    }
    size_t nar = 0;
    json_t *e;
    json_array_foreach(exploits, i, e) {
        long long to = json_integer_value(json_object_get(e, "trial")),
                  from = json_integer_value(json_object_get(e, "donor"));
        size_t lt = nl, lf = nl;
        for (size_t l = 0; l < nl; l++) {
            if (id[l] == to) lt = l;
            if (id[l] == from) lf = l;
        }
        if (lt == nl || lf == nl) continue;
        double at = json_number_value(json_object_get(e, "donor_step"));
        tp_buf_t b;
        tp__buf_init(&b);
        tp__buf_printf(&b, "trial %lld copies trial %lld at step %g (segment %d):", to, from, at,
                       (int)json_integer_value(json_object_get(e, "segment")));
        const char *key;
        json_t *v;
        json_object_foreach(json_object_get(e, "changed"), key, v) {
            tp__buf_printf(&b, " %s ", key);
            value_text(&b, json_array_get(v, 0));
            tp__buf_puts(&b, " -> ");
            value_text(&b, json_array_get(v, 1));
        }
        if (!json_object_size(json_object_get(e, "changed"))) tp__buf_puts(&b, " no change");
        tips[ns + nar] = tp__buf_steal(&b);
        arrows[nar] = (tp_lane_arrow_t){.from = lf, .to = lt, .x = at, .title = tips[ns + nar]};
        nar++;
    }
    char sub[300];
    snprintf(sub, sizeof sub,
             "%zu trials, %zu exploits; colour: %s from red (worst) to green (best)%s", nl, na,
             json_string_value(json_object_get(o, "metric")), flip ? ", smaller is better" : "");
    tp_lanes_t p = {.title = "Lineage: exploit and explore over the budget",
                    .subtitle = sub,
                    .xlabel = "step",
                    .nlanes = nl,
                    .label = (const char *const *)label,
                    .id = id,
                    .segs = segs,
                    .nsegs = n,
                    .arrows = arrows,
                    .narrows = nar,
                    .xmax = json_number_value(json_object_get(o, "max_step"))};
    tp__chart_lanes(out, &p);
    for (i = 0; i < n; i++)
        free((double *)segs[i].x);
    for (i = 0; i < nl; i++)
        free(label[i]);
    for (i = 0; i < ns + na; i++)
        free(tips[i]);
    free(label), free(tips), free(id), free(segs), free(arrows);
    json_decref(o);
    return 0;
}
