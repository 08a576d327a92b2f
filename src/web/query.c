/* query: what the dashboard reads from a store, as JSON. Read-only SQL,
 * each statement a named constant; every query is one short read
 * transaction, so the writer's WAL checkpoints are never held back long. */
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "web/web_internal.h"

static const char *const SQL_EXPLOITS = "SELECT count(*) FROM decisions WHERE kind = 'exploit'";
static const char *const SQL_COUNTS = "SELECT state, COUNT(*) FROM trials GROUP BY state";
/* The best trial by the mode: ?1 = 1 for max. Completed or early-stopped, as `best`. */
static const char *const SQL_BEST =
    "SELECT id, value, rung FROM trials WHERE value IS NOT NULL AND state IN "
    "('completed', 'stopped') ORDER BY CASE WHEN ?1 THEN -value ELSE value END, id LIMIT 1";
/* A trial with its latest placement; the page's ORDER BY is chosen from a
 * fixed table (never taken from the request). */
#define TRIAL_COLUMNS                                                                              \
    "SELECT t.id, t.state, t.attempts, t.failures, t.rung, t.budget, t.value, t.params, "          \
    "t.decision, t.error, t.started_at, t.ended_at, t.step, t.run_s, t.interrupted, "              \
    "t.stderr_tail, "                                                                              \
    "(SELECT p.node FROM placements p WHERE p.trial = t.id ORDER BY p.id DESC LIMIT 1), "          \
    "(SELECT p.gpus FROM placements p WHERE p.trial = t.id ORDER BY p.id DESC LIMIT 1) "           \
    "FROM trials t "
static const char *const SQL_TRIAL_ONE = TRIAL_COLUMNS "WHERE t.id = ?1";

/* ---- the trials table: one page, sorted and filtered by SQLite ----------------
 * A page is chosen by ids (SQL_TABLE_PAGE), then each row read by id, so that
 * the placements and the last report are looked up for the rows shown only.
 * Every piece of SQL below is fixed; what a request names (a parameter, a
 * metric, a bound) is bound (?N), never written into the statement. */
/* Each trial's promotions: its jobs after the first (as `tunepack trials`),
 * joined only when the page sorts or filters by them (decisions has no index
 * by trial: a scan of it); otherwise counted for the rows shown alone. */
static const char *const SQL_JOIN_PROMOTIONS =
    "LEFT JOIN (SELECT trial, COUNT(*) - 1 AS n FROM decisions WHERE kind = 'job' "
    "GROUP BY trial) j ON j.trial = t.id ";
/* ?1: a JSON array of the trial ids shown. */
static const char *const SQL_TABLE_PROMOTIONS =
    "SELECT trial, COUNT(*) - 1 FROM decisions WHERE kind = 'job' AND trial IN "
    "(SELECT value FROM json_each(?1)) GROUP BY trial";
/* A filter's first conditions: ?1 state, ?2 text in the parameters,
 * decision or error (NULL: any); its ranges follow (tp__web_prepare_filtered). */
static const char *const SQL_FILTER =
    " AND (?1 IS NULL OR t.state = ?1) AND (?2 IS NULL OR instr(t.params, ?2) OR "
    "instr(IFNULL(t.decision, ''), ?2) OR instr(IFNULL(t.error, ''), ?2))";
/* The trial's last report line: the one kept at the end of its last attempt,
 * or, while it runs (or when none was kept), its latest attempt's latest. */
#define LAST_REPORT                                                                                \
    "CASE WHEN t.attempts > 0 AND (t.state = 'running' OR t.metrics IS NULL) THEN "                \
    "COALESCE((SELECT m.data FROM metrics m WHERE m.trial = t.id ORDER BY m.attempt DESC, "        \
    "m.seq DESC LIMIT 1), t.metrics) ELSE t.metrics END"
/* Under constraints, whether the trial is feasible by its last report: 1,
 * 0, or NULL while not judged (tp_feasible, registered by feasible_sql). */
#define FEASIBLE "tp_feasible(t.state, " LAST_REPORT ")"
/* ?feasible=WORD: the condition it adds, fixed (see tp_web_trials_q_t). */
static const struct {
    const char *word, *sql;
} feasible_filters[] = {
    {"yes", " AND " FEASIBLE " = 1"},
    {"no", " AND " FEASIBLE " = 0"},
    {"unjudged", " AND " FEASIBLE " IS NULL"},
};
/* %1$s: the promotions joined or not, %2$s the filter's conditions, %3$s
 * the ORDER BY. ?3 limit, ?4 offset. */
static const char *const SQL_TABLE_PAGE =
    "SELECT t.id FROM trials t %1$s WHERE 1%2$s ORDER BY %3$s LIMIT ?3 OFFSET ?4";
static const char *const SQL_TABLE_MATCHED = "SELECT COUNT(*) FROM trials t %1$s WHERE 1%2$s";
static const char *const SQL_TABLE_TOTAL = "SELECT COUNT(*) FROM trials";
static const char *const SQL_TABLE_REPORT = "SELECT " LAST_REPORT " FROM trials t WHERE t.id = ?1";
/* The columns: every parameter any trial has, and every number in the
 * trials' last report lines but the step. */
static const char *const SQL_TABLE_PARAMS =
    "SELECT DISTINCT j.key FROM trials t, json_each(t.params) j";
static const char *const SQL_TABLE_METRICS =
    "SELECT DISTINCT j.key FROM (SELECT " LAST_REPORT " AS r FROM trials t) x, json_each(x.r) j "
    "WHERE json_valid(x.r) AND j.type IN ('integer', 'real') AND j.key <> 'step' ORDER BY j.key";
/* A parameter's or a metric's value: ?N is its JSON path. */
static const char *const SQL_PARAM_AT = "json_extract(t.params, ?%d)";
static const char *const SQL_METRIC_AT =
    "(SELECT json_extract(r, ?%d) FROM (SELECT " LAST_REPORT " AS r) WHERE json_valid(r))";
/* Whether a parameter or a metric a request names is one of the
 * experiment's (?1 its JSON path): a trial has it (a metric: a number in a
 * last report). The first trial that has it ends the look (one row when the
 * name is right); a name that is none reads every trial once. */
static const char *const SQL_HAS_PARAM =
    "SELECT 1 FROM trials t WHERE json_type(t.params, ?1) IS NOT NULL LIMIT 1";
static const char *const SQL_HAS_METRIC =
    "SELECT 1 FROM (SELECT " LAST_REPORT " AS r FROM trials t) WHERE json_valid(r) AND "
    "json_type(r, ?1) IN ('integer', 'real') LIMIT 1";
/* One range condition: %s the column (twice), ?N its bound. A range holds
 * numbers only (SQLite orders any text above every number). */
static const char *const SQL_AT_LEAST = " AND typeof(%s) IN ('integer', 'real') AND %s >= ?%d";
static const char *const SQL_AT_MOST = " AND typeof(%s) IN ('integer', 'real') AND %s <= ?%d";
/* One set condition: %s a parameter's choice (SQL_PARAM_CHOICE), ?N a JSON
 * array of the choices kept. */
static const char *const SQL_IN_SET = " AND %s IN (SELECT value FROM json_each(?%d))";
/* A parameter's value as a choice is named: a string's text as it is (adam,
 * as the axis labels it), anything else as its JSON (64, true); ?N its path. */
static const char *const SQL_PARAM_CHOICE =
    "(CASE json_type(t.params, ?%1$d) WHEN 'text' THEN json_extract(t.params, ?%1$d) ELSE "
    "t.params -> ?%1$d END)";

/* The table's own columns a request may sort or filter by, and their SQL. */
static const struct {
    const char *key, *expr;
} table_columns[] = {
    {"id", "t.id"},
    {"state", "t.state"},
    {"attempts", "t.attempts"},
    {"failures", "t.failures"},
    {"retries", "(t.failures - (t.state = 'failed' AND t.failures > 0))"},
    {"promotions", "IFNULL(j.n, 0)"},
    {"rung", "t.rung"},
    {"value", "t.value"},
    {"step", "t.step"},
    {"started", "t.started_at"},
    {"duration", "t.run_s"},
    /* feasible first (ascending), then infeasible, those not judged last */
    {"feasible", "(NOT " FEASIBLE ")"},
};
static const char *const SQL_EVENTS =
    "SELECT kind, attempt, at, detail FROM events WHERE trial = ?1 ORDER BY id DESC LIMIT 200";
/* The scheduler's journaled decisions about one trial, the latest 200, oldest first. */
static const char *const SQL_DECISIONS =
    "SELECT at, kind, attempt, rung, budget, ok, value, detail FROM (SELECT * FROM decisions "
    "WHERE trial = ?1 ORDER BY seq DESC LIMIT 200) ORDER BY seq";
static const char *const SQL_PLACEMENTS =
    "SELECT attempt, at, node, gpus, memory_mib, compute, cpus, sharing FROM placements "
    "WHERE trial = ?1 ORDER BY id";
static const char *const SQL_CURVE =
    "SELECT step, value FROM metrics WHERE trial = ?1 AND value IS NOT NULL ORDER BY attempt, seq";
static const char *const SQL_CURVE_COUNT =
    "SELECT COUNT(*) FROM metrics WHERE trial = ?1 AND value IS NOT NULL";

sqlite3_stmt *tp__web_prepare(tp_store_t *s, const char *sql) {
    sqlite3_stmt *st = NULL;
    if (sqlite3_prepare_v2(tp__store_sqlite(s), sql, -1, &st, NULL) != SQLITE_OK) {
        tp__log(TP_LOG_WARN, "dashboard: %s", sqlite3_errmsg(tp__store_sqlite(s)));
        sqlite3_finalize(st);
        return NULL;
    }
    return st;
}

static json_t *col_real(sqlite3_stmt *st, int i) {
    return sqlite3_column_type(st, i) == SQLITE_NULL ? json_null()
                                                     : json_real(sqlite3_column_double(st, i));
}
static json_t *col_int(sqlite3_stmt *st, int i) {
    return sqlite3_column_type(st, i) == SQLITE_NULL ? json_null()
                                                     : json_integer(sqlite3_column_int64(st, i));
}
static json_t *col_text(sqlite3_stmt *st, int i) {
    const char *t = (const char *)sqlite3_column_text(st, i);
    return t ? json_string(t) : json_null();
}
/* A JSON column parsed, or the raw text when it is not JSON. */
static json_t *col_json(sqlite3_stmt *st, int i) {
    const char *t = (const char *)sqlite3_column_text(st, i);
    if (!t) return json_null();
    json_t *v = json_loads(t, JSON_DECODE_ANY, NULL);
    return v ? v : json_string(t);
}

void tp__web_metric(tp_store_t *s, tp_web_metric_t *m) {
    char *name = tp__store_meta_get(s, "metric"), *mode = tp__store_meta_get(s, "mode");
    snprintf(m->name, sizeof m->name, "%s", name ? name : "value");
    m->maximize = mode && strcmp(mode, "max") == 0;
    free(name);
    free(mode);
}

json_t *tp__web_summary(tp_store_t *s, const char *dir, size_t id, tp_web_rank_fn rank) {
    tp_web_metric_t m;
    tp__web_metric(s, &m);
    char *name = tp__store_meta_get(s, "name"), *state = tp__store_meta_get(s, "state"),
         *created = tp__store_meta_get(s, "created_at");
    json_t *counts = json_object();
    json_int_t total = 0;
    sqlite3_stmt *st = tp__web_prepare(s, SQL_COUNTS);
    while (st && sqlite3_step(st) == SQLITE_ROW) {
        json_int_t n = sqlite3_column_int64(st, 1);
        json_object_set_new(counts, (const char *)sqlite3_column_text(st, 0), json_integer(n));
        total += n;
    }
    sqlite3_finalize(st);
    json_t *best = json_null();
    if (rank) {
        json_t *top = rank(s, dir, m.maximize, 1), *t = json_array_get(top, 0);
        if (t)
            best =
                json_pack("{s:O, s:O, s:O, s:O, s:O}", "trial", json_object_get(t, "id"), "value",
                          json_object_get(t, "value"), "state", json_object_get(t, "state"), "rung",
                          json_object_get(t, "rung"), "budget", json_object_get(t, "budget"));
        json_decref(top);
    } else if ((st = tp__web_prepare(s, SQL_BEST)) != NULL) {
        sqlite3_bind_int(st, 1, m.maximize);
        if (sqlite3_step(st) == SQLITE_ROW)
            best = json_pack("{s:I, s:f, s:o}", "trial", (json_int_t)sqlite3_column_int64(st, 0),
                             "value", sqlite3_column_double(st, 1), "rung", col_int(st, 2));
        sqlite3_finalize(st);
    }
    json_t *o = json_pack("{s:I, s:s, s:s, s:s, s:s, s:s, s:o, s:I, s:o}", "id", (json_int_t)id,
                          "dir", dir, "name", name ? name : dir, "state", state ? state : "unknown",
                          "metric", m.name, "mode", m.maximize ? "max" : "min", "counts", counts,
                          "total", total, "best", best);
    if (created) json_object_set_new(o, "created_at", json_real(atof(created)));
    json_t *feasibility = tp__web_feasibility(s); /* under constraints: how many broke one */
    if (feasibility) json_object_set_new(o, "feasibility", feasibility);
    /* Several objectives: their names and modes (the page offers the front). */
    char *objs = tp__store_meta_get(s, "objectives");
    json_t *list = objs ? json_loads(objs, 0, NULL) : NULL;
    json_object_set_new(o, "objectives", json_is_array(list) ? list : json_array());
    if (list && !json_is_array(list)) json_decref(list);
    free(objs);
    /* Scheduler pbt: how many exploits (the page offers the lineage when any). */
    json_int_t exploits = 0;
    if ((st = tp__web_prepare(s, SQL_EXPLOITS)) != NULL && sqlite3_step(st) == SQLITE_ROW)
        exploits = sqlite3_column_int64(st, 0);
    sqlite3_finalize(st);
    json_object_set_new(o, "exploits", json_integer(exploits));
    json_t *plan = tp__web_plan(s, o, tp__wall_s()); /* `tunepack plan`'s, when one was kept */
    if (plan) json_object_set_new(o, "plan", plan);
    free(name);
    free(state);
    free(created);
    return o;
}

/* One row of SQL_TRIALS_PAGE as JSON. */
static json_t *trial_row(sqlite3_stmt *st) {
    json_t *o = json_pack("{s:I, s:s, s:i, s:i}", "id", (json_int_t)sqlite3_column_int64(st, 0),
                          "state", (const char *)sqlite3_column_text(st, 1), "attempts",
                          sqlite3_column_int(st, 2), "failures", sqlite3_column_int(st, 3));
    json_object_set_new(o, "rung", col_int(st, 4));
    json_object_set_new(o, "budget", col_real(st, 5));
    json_object_set_new(o, "value", col_real(st, 6));
    json_object_set_new(o, "params", col_json(st, 7));
    json_object_set_new(o, "decision", col_text(st, 8));
    json_object_set_new(o, "error", col_text(st, 9));
    json_object_set_new(o, "started_at", col_real(st, 10));
    json_object_set_new(o, "ended_at", col_real(st, 11));
    json_object_set_new(o, "step", col_int(st, 12));
    json_object_set_new(o, "run_s", col_real(st, 13));
    json_object_set_new(o, "interrupted", col_int(st, 14));
    json_object_set_new(o, "stderr_tail", col_text(st, 15));
    json_object_set_new(o, "node", col_text(st, 16));
    json_object_set_new(o, "gpus", col_json(st, 17));
    return o;
}

/* The SQL for a column key into out: a table_columns key, "p:NAME" (a
 * parameter) or "m:NAME" (a number of the last report), whose JSON path goes
 * into path, to be bound as ?bind ("" for the table's own columns). 0, or
 * -EINVAL with err saying what the key may be. */
static int column_sql(const char *key, int bind, char *out, size_t n, char *path, size_t npath,
                      tp_error_t *err) {
    path[0] = 0;
    for (size_t i = 0; i < TP_ARRAY_LEN(table_columns); i++)
        if (strcmp(key, table_columns[i].key) == 0) {
            snprintf(out, n, "%s", table_columns[i].expr);
            return 0;
        }
    const char *name = key + 2;
    if ((strncmp(key, "p:", 2) != 0 && strncmp(key, "m:", 2) != 0) || !*name ||
        strpbrk(name, "\"\\") || strlen(name) + 5 > npath)
        return tp__errorf(err, -EINVAL,
                          "no column \"%s\": name id, state, attempts, failures, retries, "
                          "promotions, rung, value, step, started, duration, feasible, "
                          "p:PARAMETER or m:METRIC",
                          key);
    snprintf(path, npath, "$.\"%s\"", name);
    snprintf(out, n, key[0] == 'p' ? SQL_PARAM_AT : SQL_METRIC_AT, bind);
    return 0;
}

/* The bound parts of a filter's statements (see SQL_FILTER). */
typedef struct table_binds {
    char sort_path[300];                /* ?5 (the table's sort) */
    char paths[TP_WEB_RANGES_MAX][300]; /* ?6, ?10, ...: each range's column path */
} table_binds_t;
/* Each range's binds: its column's path, lo, hi, its set. */
enum { RANGE_BIND0 = 6, RANGE_BINDS = 4 };

static void bind_table(sqlite3_stmt *st, const tp_web_trials_q_t *q, const table_binds_t *b) {
    if (q->state && *q->state) sqlite3_bind_text(st, 1, q->state, -1, SQLITE_TRANSIENT);
    if (q->text && *q->text) sqlite3_bind_text(st, 2, q->text, -1, SQLITE_TRANSIENT);
    if (b->sort_path[0]) sqlite3_bind_text(st, 5, b->sort_path, -1, SQLITE_TRANSIENT);
    for (size_t i = 0; i < q->nranges; i++) {
        int at = RANGE_BIND0 + RANGE_BINDS * (int)i;
        if (b->paths[i][0]) sqlite3_bind_text(st, at, b->paths[i], -1, SQLITE_TRANSIENT);
        if (!isnan(q->ranges[i].lo)) sqlite3_bind_double(st, at + 1, q->ranges[i].lo);
        if (!isnan(q->ranges[i].hi)) sqlite3_bind_double(st, at + 2, q->ranges[i].hi);
        if (q->ranges[i].in) sqlite3_bind_text(st, at + 3, q->ranges[i].in, -1, SQLITE_TRANSIENT);
    }
}

/* The first column of each row of a statement, as an array of strings. */
static json_t *names(tp_store_t *s, const char *sql) {
    json_t *a = json_array();
    sqlite3_stmt *st = tp__web_prepare(s, sql);
    while (st && sqlite3_step(st) == SQLITE_ROW)
        json_array_append_new(a, col_text(st, 0));
    sqlite3_finalize(st);
    return a;
}

static int has_string(const json_t *a, const char *v) {
    size_t i;
    json_t *e;
    json_array_foreach(a, i, e) {
        if (strcmp(json_string_value(e), v) == 0) return 1;
    }
    return 0;
}

/* The objectives' names (the meta's, or the one metric), as an array. */
static json_t *objectives_of(tp_store_t *s) {
    json_t *objectives = json_array();
    char *text = tp__store_meta_get(s, "objectives");
    json_t *objs = text ? json_loads(text, 0, NULL) : NULL, *e;
    size_t i;
    json_array_foreach(objs, i, e) {
        const char *name = json_string_value(json_object_get(e, "name"));
        if (name) json_array_append_new(objectives, json_string(name));
    }
    if (!json_array_size(objectives)) {
        tp_web_metric_t m;
        tp__web_metric(s, &m);
        json_array_append_new(objectives, json_string(m.name));
    }
    free(text);
    json_decref(objs);
    return objectives;
}

json_t *tp__web_table_columns(tp_store_t *s) {
    json_t *found = names(s, SQL_TABLE_METRICS), *objectives = objectives_of(s), *e;
    size_t i;
    json_t *metrics = json_array();
    json_array_foreach(objectives, i, e) {
        if (has_string(found, json_string_value(e))) json_array_append(metrics, e);
    }
    json_array_foreach(found, i, e) {
        if (!has_string(objectives, json_string_value(e))) json_array_append(metrics, e);
    }
    json_decref(found);
    json_t *cols = json_pack("{s:o, s:o, s:o}", "params", names(s, SQL_TABLE_PARAMS), "metrics",
                             metrics, "objectives", objectives);
    tp_web_bounds_t b; /* the table's feasible column */
    tp__web_bounds_load(s, &b);
    if (b.n) json_object_set_new(cols, "constraints", tp__constraints_to_json(b.c, b.n));
    json_decref(b.keep);
    return cols;
}

/* The names in a JSON array of strings, joined by ", " into out ("none"). */
static void joined(const json_t *a, char *out, size_t n) {
    size_t i, len = 0;
    json_t *e;
    out[0] = 0;
    json_array_foreach(a, i, e) {
        if (len < n)
            len +=
                (size_t)snprintf(out + len, n - len, "%s%s", i ? ", " : "", json_string_value(e));
    }
    if (!json_array_size(a)) snprintf(out, n, "none");
}

/* Whether key ("p:NAME" or "m:NAME", path its JSON path) names one of the
 * experiment's parameters or metrics (an objective always does): 0, or
 * -EINVAL with err naming the ones there are. Only a name that is none
 * costs a read of every trial (and of the columns, for the message). */
static int column_known(tp_store_t *s, const char *key, const char *path, tp_error_t *err) {
    int param = key[0] == 'p', found = 0;
    if (!param) {
        json_t *objectives = objectives_of(s);
        found = has_string(objectives, key + 2);
        json_decref(objectives);
    }
    sqlite3_stmt *st = found ? NULL : tp__web_prepare(s, param ? SQL_HAS_PARAM : SQL_HAS_METRIC);
    if (st) {
        sqlite3_bind_text(st, 1, path, -1, SQLITE_STATIC);
        found = sqlite3_step(st) == SQLITE_ROW;
        sqlite3_finalize(st);
    }
    if (found) return 0;
    json_t *cols = tp__web_table_columns(s);
    char params[600], metrics[600];
    joined(json_object_get(cols, "params"), params, sizeof params);
    joined(json_object_get(cols, "metrics"), metrics, sizeof metrics);
    json_decref(cols);
    return tp__errorf(err, -EINVAL,
                      "no column \"%s\": the experiment's parameters (p:NAME) are %s; its "
                      "metrics (m:NAME) %s",
                      key, params, metrics);
}

/* Into trial o (id): its last report (metrics, SQL_TABLE_REPORT's) and
 * under constraints its feasibility and each constraint's value and
 * violation (tp__constraint_standing, as `trials --json`). */
static void add_standing(json_t *o, sqlite3_stmt *report, const tp_web_bounds_t *b, int64_t id) {
    sqlite3_reset(report);
    sqlite3_bind_int64(report, 1, id);
    json_t *m = sqlite3_step(report) == SQLITE_ROW ? col_json(report, 0) : NULL;
    json_t *standing = tp__constraint_standing(
        b->c, b->n, json_string_value(json_object_get(o, "state")), json_is_object(m) ? m : NULL);
    if (standing) json_object_update(o, standing);
    json_decref(standing);
    json_object_set_new(o, "metrics", json_is_object(m) ? m : json_object());
    if (m && !json_is_object(m)) json_decref(m);
}

/* tp_feasible(state, report) in SQL: tp__constraint_feasible of the
 * bounds (the function's data) on the report's text, NULL while not judged.
 * O(report) for the JSON parse. */
static void sql_feasible(sqlite3_context *cx, int argc, sqlite3_value **argv) {
    (void)argc;
    const tp_web_bounds_t *b = sqlite3_user_data(cx);
    const char *text = (const char *)sqlite3_value_text(argv[1]);
    json_t *report = text ? json_loads(text, 0, NULL) : NULL;
    int ok = tp__constraint_feasible(b->c, b->n, (const char *)sqlite3_value_text(argv[0]),
                                     json_is_object(report) ? report : NULL);
    json_decref(report);
    if (ok < 0)
        sqlite3_result_null(cx);
    else
        sqlite3_result_int(cx, ok);
}

static void bounds_free(void *p) {
    tp_web_bounds_t *b = p;
    json_decref(b->keep);
    free(b);
}

/* The store's constraints, registered on its connection as tp_feasible (the
 * one rule of search/constraint.h, so that SQLite sorts and filters by it);
 * owned by the connection, valid until the next call or its close. */
static const tp_web_bounds_t *feasible_sql(tp_store_t *s) {
    tp_web_bounds_t *b = tp__xcalloc(1, sizeof *b);
    tp__web_bounds_load(s, b);
    if (sqlite3_create_function_v2(tp__store_sqlite(s), "tp_feasible", 2,
                                   SQLITE_UTF8 | SQLITE_DETERMINISTIC, b, sql_feasible, NULL, NULL,
                                   bounds_free) != SQLITE_OK) {
        tp__log(TP_LOG_WARN, "dashboard: %s", sqlite3_errmsg(tp__store_sqlite(s)));
        return NULL; /* the destructor has run */
    }
    return b;
}

/* One row of the table: the trial (trial_row), its retries as `tunepack
 * trials` counts them (every failure but the one a failed trial ended with),
 * its last report and standing (add_standing). NULL if the trial is gone. */
static json_t *table_row(sqlite3_stmt *one, sqlite3_stmt *report, const tp_web_bounds_t *b,
                         int64_t id) {
    json_t *o = NULL;
    sqlite3_reset(one);
    sqlite3_bind_int64(one, 1, id);
    if (sqlite3_step(one) == SQLITE_ROW) o = trial_row(one);
    if (!o) return NULL;
    json_int_t failures = json_integer_value(json_object_get(o, "failures"));
    int final_failure =
        strcmp(json_string_value(json_object_get(o, "state")), "failed") == 0 && failures > 0;
    json_object_set_new(o, "retries", json_integer(failures - final_failure));
    json_object_set_new(o, "promotions", json_integer(0)); /* see add_promotions */
    add_standing(o, report, b, id);
    return o;
}

/* Each shown row's promotions, in one scan of the decisions. */
static void add_promotions(tp_store_t *s, json_t *rows) {
    json_t *ids = json_array(), *row;
    size_t i;
    json_array_foreach(rows, i, row) json_array_append(ids, json_object_get(row, "id"));
    char *text = json_dumps(ids, JSON_COMPACT);
    sqlite3_stmt *st = tp__web_prepare(s, SQL_TABLE_PROMOTIONS);
    if (st && text) sqlite3_bind_text(st, 1, text, -1, SQLITE_STATIC);
    while (st && text && sqlite3_step(st) == SQLITE_ROW) {
        json_array_foreach(rows, i, row) {
            if (json_integer_value(json_object_get(row, "id")) == sqlite3_column_int64(st, 0))
                json_object_set_new(row, "promotions", json_integer(sqlite3_column_int64(st, 1)));
        }
    }
    sqlite3_finalize(st);
    free(text);
    json_decref(ids);
}

/* The first column of a statement's first row as an integer (0 if none). */
static json_int_t count_of(tp_store_t *s, const char *sql, const tp_web_trials_q_t *q,
                           const table_binds_t *b) {
    json_int_t n = 0;
    sqlite3_stmt *st = tp__web_prepare(s, sql);
    if (st && q) bind_table(st, q, b);
    if (st && sqlite3_step(st) == SQLITE_ROW) n = sqlite3_column_int64(st, 0);
    sqlite3_finalize(st);
    return n;
}

/* A filter's conditions as SQL (SQL_FILTER, then each range's), into
 * where; *join set when one is on the promotions (SQL_JOIN_PROMOTIONS).
 * bounds: feasible_sql's, when the caller has registered it; NULL: it is
 * registered here if ?feasible= needs it. 0, or -EINVAL with err when a
 * column is none or a set is not a parameter's. */
static int filter_sql(tp_store_t *s, const tp_web_trials_q_t *q, const tp_web_bounds_t *bounds,
                      table_binds_t *b, char *where, size_t n, int *join, tp_error_t *err) {
    char expr[600], choice[300];
    if (q->nranges > TP_WEB_RANGES_MAX)
        return tp__errorf(err, -EINVAL, "at most %d ranges", TP_WEB_RANGES_MAX);
    size_t len = (size_t)snprintf(where, n, "%s", SQL_FILTER);
    for (size_t i = 0; i < q->nranges; i++) {
        const tp_web_range_t *r = &q->ranges[i];
        int at = RANGE_BIND0 + RANGE_BINDS * (int)i;
        if (r->in && strncmp(r->key, "p:", 2) != 0)
            return tp__errorf(err, -EINVAL,
                              "in.%s: a set of choices is a parameter's (in.p:NAME=VALUE)", r->key);
        if (column_sql(r->key, at, expr, sizeof expr, b->paths[i], sizeof b->paths[i], err) != 0 ||
            (b->paths[i][0] && column_known(s, r->key, b->paths[i], err) != 0))
            return -EINVAL;
        *join |= strcmp(r->key, "promotions") == 0;
        if (strcmp(r->key, "feasible") == 0)
            return tp__errorf(err, -EINVAL,
                              "feasible takes no range: filter by feasible=yes, no or unjudged");
        if (!isnan(r->lo) && len < n)
            len += (size_t)snprintf(where + len, n - len, SQL_AT_LEAST, expr, expr, at + 1);
        if (!isnan(r->hi) && len < n)
            len += (size_t)snprintf(where + len, n - len, SQL_AT_MOST, expr, expr, at + 2);
        if (r->in && len < n) {
            snprintf(choice, sizeof choice, SQL_PARAM_CHOICE, at);
            len += (size_t)snprintf(where + len, n - len, SQL_IN_SET, choice, at + 3);
        }
    }
    const char *only = NULL; /* ?feasible= */
    for (size_t i = 0; q->feasible && *q->feasible && i < TP_ARRAY_LEN(feasible_filters); i++)
        if (strcmp(q->feasible, feasible_filters[i].word) == 0) only = feasible_filters[i].sql;
    if (q->feasible && *q->feasible && !only)
        return tp__errorf(err, -EINVAL,
                          "feasible=%s: name yes (feasible), no (infeasible) or unjudged (no "
                          "job ended yet)",
                          q->feasible);
    if (only) {
        if (!bounds) bounds = feasible_sql(s); /* registers tp_feasible */
        if (!bounds) return tp__errorf(err, -EIO, "the store cannot be read");
        if (!bounds->n)
            return tp__errorf(err, -EINVAL,
                              "no column \"feasible\": the experiment has no constraints "
                              "(`constraints:`) to judge its trials by");
        if (len < n) len += (size_t)snprintf(where + len, n - len, "%s", only);
    }
    return len < n ? 0 : tp__errorf(err, -EINVAL, "too many ranges at once");
}

/* See web_internal.h. */
int tp__web_filtered(const tp_web_trials_q_t *f) {
    return f && ((f->state && *f->state) || (f->text && *f->text) || f->nranges ||
                 (f->feasible && *f->feasible));
}

/* See web_internal.h. */
int tp__web_prepare_filtered(tp_store_t *s, const char *sql, const tp_web_trials_q_t *f,
                             sqlite3_stmt **st, tp_error_t *err) {
    static const tp_web_trials_q_t every;
    table_binds_t b = {.sort_path = ""};
    char where[8192], text[12288];
    int join = 0;
    *st = NULL;
    if (!f) f = &every;
    if (filter_sql(s, f, NULL, &b, where, sizeof where, &join, err) != 0) return -EINVAL;
    snprintf(text, sizeof text, sql, join ? SQL_JOIN_PROMOTIONS : "", where);
    *st = tp__web_prepare(s, text);
    if (*st) bind_table(*st, f, &b);
    return 0;
}

json_t *tp__web_trials(tp_store_t *s, const tp_web_trials_q_t *q, tp_error_t *err) {
    table_binds_t b;
    char expr[600], order[1400], ranges[8192] = "", sql[12288];
    const char *sort = q->sort && *q->sort ? q->sort : "id";
    if (column_sql(sort, 5, expr, sizeof expr, b.sort_path, sizeof b.sort_path, err) != 0 ||
        (b.sort_path[0] && column_known(s, sort, b.sort_path, err) != 0))
        return NULL;
    int join = strcmp(sort, "promotions") == 0;
    /* Trials without the value last either way, then by id. */
    snprintf(order, sizeof order, "%s IS NULL, %s%s, t.id", expr, expr, q->desc ? " DESC" : "");
    const tp_web_bounds_t *bounds = feasible_sql(s);
    if (!bounds) return tp__errorf(err, -EIO, "the store cannot be read"), NULL;
    if (filter_sql(s, q, bounds, &b, ranges, sizeof ranges, &join, err) != 0) return NULL;
    if (!bounds->n && strcmp(sort, "feasible") == 0)
        return tp__errorf(err, -EINVAL,
                          "no column \"feasible\": the experiment has no constraints "
                          "(`constraints:`) to judge its trials by"),
               NULL;
    const char *from = join ? SQL_JOIN_PROMOTIONS : "";
    long long limit = q->limit <= 0                ? TP_WEB_PAGE_DEFAULT
                      : q->limit > TP_WEB_PAGE_MAX ? TP_WEB_PAGE_MAX
                                                   : q->limit;
    long long offset = q->offset < 0 ? 0 : q->offset;
    json_t *rows = json_array();
    sqlite3_exec(tp__store_sqlite(s), "BEGIN", NULL, NULL, NULL);
    snprintf(sql, sizeof sql, SQL_TABLE_PAGE, from, ranges, order);
    sqlite3_stmt *st = tp__web_prepare(s, sql), *one = tp__web_prepare(s, SQL_TRIAL_ONE),
                 *report = tp__web_prepare(s, SQL_TABLE_REPORT);
    if (st && one && report) {
        bind_table(st, q, &b);
        sqlite3_bind_int64(st, 3, limit);
        sqlite3_bind_int64(st, 4, offset);
        while (sqlite3_step(st) == SQLITE_ROW) {
            json_t *row = table_row(one, report, bounds, sqlite3_column_int64(st, 0));
            if (row) json_array_append_new(rows, row);
        }
    }
    sqlite3_finalize(st);
    sqlite3_finalize(one);
    sqlite3_finalize(report);
    add_promotions(s, rows);
    snprintf(sql, sizeof sql, SQL_TABLE_MATCHED, from, ranges);
    json_int_t matched = count_of(s, sql, q, &b), total = count_of(s, SQL_TABLE_TOTAL, NULL, &b);
    sqlite3_exec(tp__store_sqlite(s), "COMMIT", NULL, NULL, NULL);
    return json_pack("{s:I, s:I, s:I, s:I, s:s, s:b, s:o}", "total", total, "matched", matched,
                     "offset", (json_int_t)offset, "limit", (json_int_t)limit, "sort", sort, "desc",
                     q->desc, "rows", rows);
}

/* A trial's curve: every point when few, else an even stride over them
 * (the last point always kept). At most max points. */
static json_t *curve(tp_store_t *s, int64_t id, size_t max) {
    json_t *pts = json_array();
    sqlite3_stmt *st = tp__web_prepare(s, SQL_CURVE_COUNT);
    int64_t n = 0;
    if (st) {
        sqlite3_bind_int64(st, 1, id);
        if (sqlite3_step(st) == SQLITE_ROW) n = sqlite3_column_int64(st, 0);
        sqlite3_finalize(st);
    }
    st = tp__web_prepare(s, SQL_CURVE);
    if (!st) return pts;
    sqlite3_bind_int64(st, 1, id);
    double stride = n > (int64_t)max ? (double)n / (double)max : 1;
    double next = 0;
    for (int64_t i = 0; sqlite3_step(st) == SQLITE_ROW; i++) {
        if ((double)i + 1e-9 < next && i != n - 1) continue;
        next += stride;
        json_array_append_new(pts,
                              json_pack("[o, f]", col_int(st, 0), sqlite3_column_double(st, 1)));
    }
    sqlite3_finalize(st);
    return pts;
}

json_t *tp__web_trial(tp_store_t *s, int64_t id) {
    sqlite3_exec(tp__store_sqlite(s), "BEGIN", NULL, NULL, NULL);
    json_t *o = NULL;
    sqlite3_stmt *st = tp__web_prepare(s, SQL_TRIAL_ONE);
    if (st) {
        sqlite3_bind_int64(st, 1, id);
        if (sqlite3_step(st) == SQLITE_ROW) o = trial_row(st);
        sqlite3_finalize(st);
    }
    if (o) {
        json_t *events = json_array();
        st = tp__web_prepare(s, SQL_EVENTS);
        if (st) {
            sqlite3_bind_int64(st, 1, id);
            while (sqlite3_step(st) == SQLITE_ROW)
                json_array_insert_new(events, 0,
                                      json_pack("{s:o, s:i, s:f, s:o}", "kind", col_text(st, 0),
                                                "attempt", sqlite3_column_int(st, 1), "at",
                                                sqlite3_column_double(st, 2), "detail",
                                                col_text(st, 3)));
            sqlite3_finalize(st);
        }
        json_t *places = json_array();
        st = tp__web_prepare(s, SQL_PLACEMENTS);
        if (st) {
            sqlite3_bind_int64(st, 1, id);
            while (sqlite3_step(st) == SQLITE_ROW)
                json_array_append_new(
                    places, json_pack("{s:i, s:f, s:o, s:o, s:I, s:f, s:i, s:o}", "attempt",
                                      sqlite3_column_int(st, 0), "at", sqlite3_column_double(st, 1),
                                      "node", col_text(st, 2), "gpus", col_json(st, 3),
                                      "memory_mib", (json_int_t)sqlite3_column_int64(st, 4),
                                      "compute", sqlite3_column_double(st, 5), "cpus",
                                      sqlite3_column_int(st, 6), "sharing", col_text(st, 7)));
            sqlite3_finalize(st);
        }
        json_t *decisions = json_array();
        st = tp__web_prepare(s, SQL_DECISIONS);
        if (st) {
            sqlite3_bind_int64(st, 1, id);
            while (sqlite3_step(st) == SQLITE_ROW)
                json_array_append_new(
                    decisions,
                    json_pack("{s:f, s:o, s:i, s:i, s:o, s:o, s:o, s:o}", "at",
                              sqlite3_column_double(st, 0), "kind", col_text(st, 1), "attempt",
                              sqlite3_column_int(st, 2), "rung", sqlite3_column_int(st, 3),
                              "budget", col_real(st, 4), "ok", col_int(st, 5), "value",
                              col_real(st, 6), "detail", col_text(st, 7)));
            sqlite3_finalize(st);
        }
        json_object_set_new(o, "events", events);
        json_object_set_new(o, "decisions", decisions);
        json_object_set_new(o, "placements", places);
        json_object_set_new(o, "curve", curve(s, id, 300));
        tp_web_bounds_t b; /* under constraints: whether it is feasible, and why */
        tp__web_bounds_load(s, &b);
        if ((st = tp__web_prepare(s, SQL_TABLE_REPORT)) != NULL) add_standing(o, st, &b, id);
        sqlite3_finalize(st);
        json_decref(b.keep);
    }
    sqlite3_exec(tp__store_sqlite(s), "COMMIT", NULL, NULL, NULL);
    return o;
}

json_t *tp__web_log(const char *dir, int64_t id, const char *stream, long long from) {
    if (!stream || (strcmp(stream, "stdout") != 0 && strcmp(stream, "stderr") != 0)) return NULL;
    enum { TAIL = 16384, MAX_READ = 65536 };
    char path[4300];
    char tail[32];
    snprintf(tail, sizeof tail, "/%s.log", stream);
    tp__trial_path(path, sizeof path, dir, (long long)id, tail);
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) { /* a multi-process trial: rank 0's log */
        snprintf(tail, sizeof tail, "/rank0/%s.log", stream);
        tp__trial_path(path, sizeof path, dir, (long long)id, tail);
        fd = open(path, O_RDONLY | O_CLOEXEC);
    }
    struct stat sb;
    long long size = fd >= 0 && fstat(fd, &sb) == 0 ? (long long)sb.st_size : 0;
    /* The log was trimmed or replaced (a new attempt): start over from its tail. */
    if (from < 0 || from > size) from = size > TAIL ? size - TAIL : 0;
    size_t want = (size_t)(size - from > MAX_READ ? MAX_READ : size - from);
    char *text = tp__xmalloc(want + 1);
    ssize_t got = fd >= 0 && want ? pread(fd, text, want, (off_t)from) : 0;
    if (got < 0) got = 0;
    if (fd >= 0) close(fd);
    json_t *o =
        json_pack("{s:s%, s:I, s:I, s:I, s:s}", "text", text, (size_t)got, "from", (json_int_t)from,
                  "next", (json_int_t)(from + got), "size", (json_int_t)size, "path", path);
    if (!o) { /* not UTF-8: those bytes shown as \xHH (docs/output.md) */
        tp_buf_t shown;
        tp__buf_init(&shown);
        tp__buf_escape(&shown, text, (size_t)got, TP_ESC_KEEP_NL);
        o = json_pack("{s:s, s:I, s:I, s:I, s:s}", "text", shown.data ? shown.data : "", "from",
                      (json_int_t)from, "next", (json_int_t)(from + got), "size", (json_int_t)size,
                      "path", path);
        tp__buf_free(&shown);
    }
    free(text);
    return o;
}

json_t *tp__web_nodes(tp_store_t *s) {
    const char *keys[] = {"nodes", "gpus", "sharing", "policy"};
    json_t *o = json_object();
    for (size_t i = 0; i < TP_ARRAY_LEN(keys); i++) {
        char *v = tp__store_meta_get(s, keys[i]);
        json_t *j = v ? json_loads(v, JSON_DECODE_ANY, NULL) : NULL;
        json_object_set_new(o, keys[i], j ? j : v ? json_string(v) : json_null());
        free(v);
    }
    return o;
}

static void interrupted(json_t *o) {
    const char *st = json_string_value(json_object_get(o, "state"));
    if (st && strcmp(st, "running") == 0)
        json_object_set_new(o, "state", json_string("interrupted"));
}

/* See web_internal.h. */
void tp__web_not_live(json_t *v) {
    interrupted(v);
    interrupted(json_object_get(v, "best"));
    json_t *counts = json_object_get(v, "counts"), *running = json_object_get(counts, "running");
    if (running) {
        json_object_set(counts, "interrupted", running);
        json_object_del(counts, "running");
    }
    size_t i;
    json_t *t;
    json_array_foreach(json_object_get(v, "rows"), i, t) interrupted(t);
}
