/* store: schema, journal writes, read-back, read-only access. */
#include <errno.h>
#include <math.h>
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "store/store.h"
#include "tp_test.h"

static char *fresh_dir(void) {
    char tmpl[] = "/tmp/tp_store_XXXXXX";
    char *d = mkdtemp(tmpl);
    return d ? strdup(d) : NULL;
}

/* The text of a one-value PRAGMA, read by a connection of our own. */
static void pragma(const char *dir, const char *name, char *out, size_t n) {
    char path[512], sql[64];
    snprintf(path, sizeof path, "%s/%s", dir, TP_STORE_FILE);
    snprintf(sql, sizeof sql, "PRAGMA %s", name);
    sqlite3 *db;
    sqlite3_stmt *st;
    snprintf(out, n, "?");
    if (sqlite3_open(path, &db) != SQLITE_OK) return;
    if (sqlite3_prepare_v2(db, sql, -1, &st, NULL) == SQLITE_OK && sqlite3_step(st) == SQLITE_ROW)
        snprintf(out, n, "%s", (const char *)sqlite3_column_text(st, 0));
    sqlite3_finalize(st);
    sqlite3_close(db);
}

typedef struct rows {
    int n;
    char state[4][16];
    int attempts[4];
    double value[4];
    int has_value[4];
    char error[4][64];
} rows_t;

static int collect(const tp_trial_row_t *r, void *ud) {
    rows_t *a = ud;
    if (a->n >= 4) return 1;
    snprintf(a->state[a->n], 16, "%s", r->state);
    a->attempts[a->n] = r->attempts;
    a->value[a->n] = r->value;
    a->has_value[a->n] = r->has_value;
    snprintf(a->error[a->n], 64, "%s", r->error ? r->error : "");
    a->n++;
    return 0;
}

TP_TEST(test_new_store_has_current_schema_version_and_wal) {
    char *dir = fresh_dir();
    tp_store_t *s = NULL;
    tp_error_t err = {0};
    TP_CHECK_INT(tp__store_open(dir, TP_STORE_WRITE, &s, &err), 0);
    TP_CHECK_INT(tp__store_meta_set(s, "name", "demo"), 0);
    tp__store_close(s);
    char v[32];
    pragma(dir, "user_version", v, sizeof v);
    TP_CHECK_STR(v, "9");
    pragma(dir, "journal_mode", v, sizeof v);
    TP_CHECK_STR(v, "wal");
    free(dir);
}

TP_TEST(test_trial_lifecycle_is_read_back_in_order) {
    char *dir = fresh_dir();
    tp_store_t *s = NULL;
    tp_error_t err = {0};
    TP_CHECK_INT(tp__store_open(dir, TP_STORE_WRITE, &s, &err), 0);
    TP_CHECK_INT(tp__store_begin(s), 0);
    TP_CHECK_INT(tp__store_trial_add(s, 0, "{\"lr\":0.1}", 1.0), 0);
    TP_CHECK_INT(tp__store_trial_add(s, 1, "{\"lr\":0.2}", 1.0), 0);
    TP_CHECK_INT(tp__store_trial_state(s, 0, "running", 1, NULL, 2.0), 0);
    TP_CHECK_INT(tp__store_metric(s, 0, 1, 0, 1, 0.5, "{\"step\":1,\"acc\":0.5}", 20), 0);
    TP_CHECK_INT(tp__store_metric(s, 0, 1, 1, 2, 0.7, "{\"step\":2,\"acc\":0.7}", 20), 0);
    tp_trial_end_t e = {.state = "completed",
                        .attempt = 1,
                        .has_exit = 1,
                        .has_value = 1,
                        .value = 0.7,
                        .best = 0.7,
                        .step = 2,
                        .metrics = "{\"step\":2,\"acc\":0.7}",
                        .at = 3.0};
    TP_CHECK_INT(tp__store_trial_end(s, 0, &e), 0);
    TP_CHECK_INT(tp__store_trial_state(s, 1, "running", 1, NULL, 2.0), 0);
    tp_trial_end_t f = {.state = "failed",
                        .attempt = 1,
                        .failures = 1,
                        .has_exit = 1,
                        .exit_code = 3,
                        .error = "exited with code 3",
                        .step = TP_STORE_NO_STEP,
                        .at = 3.0};
    TP_CHECK_INT(tp__store_trial_end(s, 1, &f), 0);
    TP_CHECK_INT(tp__store_commit(s), 0);
    tp__store_close(s);

    TP_CHECK_INT(tp__store_open(dir, TP_STORE_READONLY, &s, &err), 0);
    rows_t a = {0};
    TP_CHECK_INT(tp__store_trials(s, collect, &a), 0);
    TP_CHECK_INT(a.n, 2);
    TP_CHECK_STR(a.state[0], "completed");
    TP_CHECK_INT(a.attempts[0], 1);
    TP_CHECK(a.has_value[0] && fabs(a.value[0] - 0.7) < 1e-12);
    TP_CHECK_STR(a.state[1], "failed");
    TP_CHECK_STR(a.error[1], "exited with code 3");
    TP_CHECK(!a.has_value[1]);
    TP_CHECK_INT(tp__store_metric_count(s, 0), 2);
    TP_CHECK_INT(tp__store_metric_count(s, 1), 0);
    tp__store_close(s);
    free(dir);
}

TP_TEST(test_uncommitted_transaction_leaves_no_trace) {
    char *dir = fresh_dir();
    tp_store_t *s = NULL;
    tp_error_t err = {0};
    TP_CHECK_INT(tp__store_open(dir, TP_STORE_WRITE, &s, &err), 0);
    TP_CHECK_INT(tp__store_meta_set(s, "name", "demo"), 0);
    TP_CHECK_INT(tp__store_begin(s), 0);
    TP_CHECK_INT(tp__store_trial_add(s, 0, "{}", 1.0), 0);
    tp__store_close(s); /* closing without commit: as if killed */
    TP_CHECK_INT(tp__store_open(dir, TP_STORE_READONLY, &s, &err), 0);
    rows_t a = {0};
    tp__store_trials(s, collect, &a);
    TP_CHECK_INT(a.n, 0);
    tp__store_close(s);
    free(dir);
}

TP_TEST(test_readonly_open_of_missing_store_says_no_experiment) {
    tp_store_t *s = NULL;
    tp_error_t err = {0};
    TP_CHECK_INT(tp__store_open("/nonexistent/dir", TP_STORE_READONLY, &s, &err), -ENOENT);
    TP_CHECK_CONTAINS(err.msg, "no experiment in /nonexistent/dir");
}

TP_TEST(test_newer_schema_is_refused) {
    char *dir = fresh_dir();
    char path[512];
    snprintf(path, sizeof path, "%s/%s", dir, TP_STORE_FILE);
    sqlite3 *db;
    sqlite3_open(path, &db);
    sqlite3_exec(db, "PRAGMA user_version = 99", NULL, NULL, NULL);
    sqlite3_close(db);
    tp_store_t *s = NULL;
    tp_error_t err = {0};
    TP_CHECK_INT(tp__store_open(dir, TP_STORE_WRITE, &s, &err), -EPROTO);
    TP_CHECK_CONTAINS(err.msg, "newer");
    free(dir);
}

/* *ud = the row's kind ("target<-3" for a target of trial 3), static text. */
static int trial_kind(const tp_trial_row_t *row, void *ud) {
    static char text[64];
    if (row->kind) snprintf(text, sizeof text, "%s<-%lld", row->kind, (long long)row->source);
    *(const char **)ud = row->kind ? text : NULL;
    return 0;
}

static int count_priors(const tp_prior_row_t *p, void *ud) {
    size_t *n = ud;
    if (*n == 0) {
        if (strcmp(p->source, "runs/a") != 0 || p->source_trial != 4 || p->value != 0.25) return 1;
    }
    (*n)++;
    return 0;
}

/* Run sql on DIR's store directly (taking it back to an older schema); SQLite's code. */
static int exec_sql(const char *dir, const char *sql) {
    char path[512];
    snprintf(path, sizeof path, "%s/%s", dir, TP_STORE_FILE);
    sqlite3 *db;
    sqlite3_open(path, &db);
    int rc = sqlite3_exec(db, sql, NULL, NULL, NULL);
    sqlite3_close(db);
    return rc;
}

static int count_decisions(const tp_decision_row_t *d, void *ud) {
    (void)d;
    (*(size_t *)ud)++;
    return 0;
}

TP_TEST(test_store_of_schema_4_reads_and_migrates_to_objectives_priors_and_kinds) {
    char *dir = fresh_dir();
    tp_store_t *s = NULL;
    tp_error_t err = {0};
    TP_REQUIRE(tp__store_open(dir, TP_STORE_WRITE, &s, &err) == 0);
    tp_decision_row_t d = {.at = 1,
                           .kind = "result",
                           .trial = 0,
                           .ok = 1,
                           .has_value = 1,
                           .value = 0.5,
                           .objectives = "[0.5,2]"};
    TP_CHECK_INT(tp__store_decision(s, &d), 0);
    TP_CHECK_INT(tp__store_trial_add(s, 0, "{\"x\":1}", 1), 0);
    tp__store_close(s);
    /* back to what tunepack wrote before several objectives, warm starts, surrogates, plans */
    TP_CHECK_INT(exec_sql(dir, "ALTER TABLE decisions DROP COLUMN constraints; "
                               "ALTER TABLE decisions DROP COLUMN objectives; DROP TABLE priors; "
                               "ALTER TABLE trials DROP COLUMN kind; "
                               "ALTER TABLE trials DROP COLUMN source; DROP TABLE plans; "
                               "PRAGMA user_version = 4"),
                 SQLITE_OK);
    /* a reader (best, export, a warm start) opens it as it is */
    TP_REQUIRE(tp__store_open(dir, TP_STORE_READONLY, &s, &err) == 0);
    size_t n = 0;
    TP_CHECK_INT(tp__store_priors(s, count_priors, &n), 0);
    TP_CHECK_INT(n, 0);
    const char *kind = "unread";
    TP_CHECK_INT(tp__store_trial(s, 0, trial_kind, &kind), 0); /* every trial plain */
    TP_CHECK(kind == NULL);
    tp__store_close(s);
    /* a writer migrates it, keeping what it held */
    TP_REQUIRE(tp__store_open(dir, TP_STORE_WRITE, &s, &err) == 0);
    n = 0;
    tp__store_decisions(s, count_decisions, &n);
    TP_CHECK_INT(n, 1);
    tp_prior_row_t p = {
        .source = "runs/a", .source_trial = 4, .params = "{\"x\":1}", .value = 0.25, .at = 2};
    TP_CHECK_INT(tp__store_prior_add(s, &p), 0);
    n = 0;
    TP_CHECK_INT(tp__store_priors(s, count_priors, &n), 0);
    TP_CHECK_INT(n, 1);
    tp__store_close(s);
    char v[32];
    pragma(dir, "user_version", v, sizeof v);
    TP_CHECK_STR(v, "9");
    TP_REQUIRE(tp__store_open(dir, TP_STORE_WRITE, &s, &err) == 0);
    TP_CHECK_INT(tp__store_trial_kind(s, 0, "target", 3), 0); /* and keeps kinds from now on */
    tp__store_close(s);
    TP_REQUIRE(tp__store_open(dir, TP_STORE_READONLY, &s, &err) == 0);
    TP_CHECK_INT(tp__store_trial(s, 0, trial_kind, &kind), 0);
    TP_CHECK_STR(kind, "target<-3");
    tp__store_close(s);
    free(dir);
}

static int decision_constraints(const tp_decision_row_t *d, void *ud) {
    *(const char **)ud = d->constraints ? "kept" : "none";
    return 0;
}

/* Schema 8 keeps a result's constraint values; a reader of a schema 7 store (written before)
 * reads its decisions all the same, with none. */
TP_TEST(test_decisions_keep_constraint_values_and_a_schema_7_reader_reads_them_without) {
    char *dir = fresh_dir();
    tp_store_t *s = NULL;
    tp_error_t err = {0};
    TP_REQUIRE(tp__store_open(dir, TP_STORE_WRITE, &s, &err) == 0);
    tp_decision_row_t d = {.at = 1, .kind = "result", .ok = 1, .constraints = "[7.5,null]"};
    TP_CHECK_INT(tp__store_decision(s, &d), 0);
    const char *seen = NULL;
    TP_CHECK_INT(tp__store_decisions(s, decision_constraints, &seen), 0);
    TP_CHECK_STR(seen, "kept");
    tp__store_close(s);
    TP_CHECK_INT(
        exec_sql(dir, "ALTER TABLE decisions DROP COLUMN constraints; PRAGMA user_version = 7"),
        SQLITE_OK);
    TP_REQUIRE(tp__store_open(dir, TP_STORE_READONLY, &s, &err) == 0);
    seen = NULL;
    TP_CHECK_INT(tp__store_decisions(s, decision_constraints, &seen), 0);
    TP_CHECK_STR(seen, "none");
    tp__store_close(s);
    free(dir);
}

/* Schema 9 keeps plans, the latest read back; a reader of a schema 8 store reads none. */
TP_TEST(test_the_latest_plan_is_read_back_and_a_schema_8_reader_reads_none) {
    char *dir = fresh_dir();
    tp_store_t *s = NULL;
    tp_error_t err = {0};
    TP_REQUIRE(tp__store_open(dir, TP_STORE_WRITE, &s, &err) == 0);
    TP_CHECK(tp__store_plan_last(s, NULL) == NULL);
    TP_CHECK_INT(tp__store_plan_add(s, 10, "{\"gpus\":4}"), 0);
    TP_CHECK_INT(tp__store_plan_add(s, 20, "{\"gpus\":8}"), 0);
    tp__store_close(s);
    TP_REQUIRE(tp__store_open(dir, TP_STORE_READONLY, &s, &err) == 0);
    double at = 0;
    char *doc = tp__store_plan_last(s, &at);
    TP_CHECK_STR(doc, "{\"gpus\":8}");
    TP_CHECK(at == 20);
    free(doc);
    tp__store_close(s);
    TP_CHECK_INT(exec_sql(dir, "DROP TABLE plans; PRAGMA user_version = 8"), SQLITE_OK);
    TP_REQUIRE(tp__store_open(dir, TP_STORE_READONLY, &s, &err) == 0);
    TP_CHECK(tp__store_plan_last(s, NULL) == NULL);
    tp__store_close(s);
    free(dir);
}

TP_TEST(test_meta_values_round_trip_and_update) {
    char *dir = fresh_dir();
    tp_store_t *s = NULL;
    tp_error_t err = {0};
    TP_CHECK_INT(tp__store_open(dir, TP_STORE_WRITE, &s, &err), 0);
    TP_CHECK_INT(tp__store_meta_set(s, "state", "running"), 0);
    TP_CHECK_INT(tp__store_meta_set(s, "state", "finished"), 0);
    char *v = tp__store_meta_get(s, "state");
    TP_CHECK_STR(v, "finished");
    free(v);
    TP_CHECK(tp__store_meta_get(s, "absent") == NULL);
    tp__store_close(s);
    free(dir);
}

int main(void) {
    return tp_test_main();
}
