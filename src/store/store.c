/* store: SQLite journal of one experiment. See store.h for the contract.
 *
 * Every statement is a named constant with ?N binds, prepared once at open
 * and finalized at close, from the table `statements` below. */
#include "store/store.h"
#include "store/store_internal.h"

#include <errno.h>
#include <math.h>
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- schema and migrations ----------------------------------------------
 * migrations[i] takes the schema from version i to i + 1. The version lives
 * in PRAGMA user_version. Never edit a landed migration: append one. */
static const char *const migrations[] = {
    /* 0 -> 1: the first schema. */
    "CREATE TABLE meta(key TEXT PRIMARY KEY, value TEXT NOT NULL);"
    "CREATE TABLE trials("
    "  id INTEGER PRIMARY KEY,"              /* trial index, 0-based, as the searcher numbered it */
    "  params TEXT NOT NULL,"                /* JSON object of parameter values */
    "  state TEXT NOT NULL,"                 /* pending|running|completed|failed|stopped */
    "  attempts INTEGER NOT NULL DEFAULT 0," /* attempts started */
    "  failures INTEGER NOT NULL DEFAULT 0," /* attempts that failed */
    "  value REAL, best REAL, step INTEGER, metrics TEXT,"
    "  exit_code INTEGER, signal INTEGER, error TEXT,"
    "  created_at REAL NOT NULL, started_at REAL, ended_at REAL);"
    "CREATE TABLE events("
    "  id INTEGER PRIMARY KEY, trial INTEGER NOT NULL, attempt INTEGER NOT NULL,"
    "  at REAL NOT NULL, kind TEXT NOT NULL, detail TEXT);"
    "CREATE INDEX events_by_trial ON events(trial, id);"
    "CREATE TABLE metrics("
    "  trial INTEGER NOT NULL, attempt INTEGER NOT NULL, seq INTEGER NOT NULL,"
    "  step INTEGER, value REAL, data TEXT NOT NULL,"
    "  PRIMARY KEY(trial, attempt, seq)) WITHOUT ROWID;",
    /* 1 -> 2: where each attempt was placed, and measured demand. */
    "CREATE TABLE placements("
    "  id INTEGER PRIMARY KEY, trial INTEGER NOT NULL, attempt INTEGER NOT NULL,"
    "  at REAL NOT NULL, node TEXT NOT NULL,"
    "  gpus TEXT NOT NULL," /* JSON array of device indexes on the node */
    "  memory_mib INTEGER NOT NULL, compute REAL NOT NULL, cpus INTEGER NOT NULL,"
    "  sharing TEXT NOT NULL," /* mps | time-slicing | exclusive | cpu */
    "  env TEXT);"             /* JSON: the GPU environment the trial got */
    "CREATE INDEX placements_by_trial ON placements(trial, attempt);"
    "CREATE TABLE profiles("
    "  key TEXT PRIMARY KEY," /* JSON of the profile_by parameter values */
    "  memory_mib INTEGER NOT NULL, compute REAL NOT NULL, step_s REAL,"
    "  samples INTEGER NOT NULL, at REAL NOT NULL);",
    /* 2 -> 3: budgets and the scheduler's decisions, replayed on resume. */
    "ALTER TABLE trials ADD COLUMN rung INTEGER;"
    "ALTER TABLE trials ADD COLUMN budget REAL;"
    "ALTER TABLE trials ADD COLUMN decision TEXT;" /* the last decision about it, in words */
    "CREATE TABLE decisions("
    "  seq INTEGER PRIMARY KEY, at REAL NOT NULL,"
    "  kind TEXT NOT NULL," /* job | result | stop */
    "  trial INTEGER NOT NULL, attempt INTEGER NOT NULL, rung INTEGER NOT NULL, budget REAL,"
    "  ok INTEGER, value REAL, detail TEXT);",
    /* 3 -> 4: time spent running, interrupted attempts, the last lines of a failure's stderr. */
    "ALTER TABLE trials ADD COLUMN run_s REAL NOT NULL DEFAULT 0;"
    "ALTER TABLE trials ADD COLUMN interrupted INTEGER NOT NULL DEFAULT 0;"
    "ALTER TABLE trials ADD COLUMN stderr_tail TEXT;",
    /* 4 -> 5: several objectives: a result's values, a JSON array in metric order. */
    "ALTER TABLE decisions ADD COLUMN objectives TEXT;",
    /* 5 -> 6: warm start: completed trials of earlier experiments, fed to the sampler as
     * prior observations (never run here). */
    "CREATE TABLE priors("
    "  seq INTEGER PRIMARY KEY,"
    "  source TEXT NOT NULL,"          /* the earlier experiment's directory, as written */
    "  source_trial INTEGER NOT NULL," /* its trial id there */
    "  params TEXT NOT NULL,"          /* JSON: the configuration as this space reads it */
    "  value REAL,"                    /* the first objective */
    "  objectives TEXT,"               /* several objectives: JSON array in metric order */
    "  at REAL NOT NULL);",
    /* 6 -> 7: surrogates: a trial's kind (surrogate | target; NULL: plain), and for a
     * target the id of the surrogate trial it promotes. */
    "ALTER TABLE trials ADD COLUMN kind TEXT; ALTER TABLE trials ADD COLUMN source INTEGER;",
    /* 7 -> 8: constraints: the values of the constrained metrics a result reported, a JSON
     * array in the order of `constraints:` (null for a missing one), told to the sampler. */
    "ALTER TABLE decisions ADD COLUMN constraints TEXT;",
    /* 8 -> 9: plans of the experiment (`tunepack plan EXPERIMENT --dir DIR`), the latest the
     * one `plan --check` and the dashboard compare with what happens. */
    "CREATE TABLE plans("
    "  seq INTEGER PRIMARY KEY,"
    "  at REAL NOT NULL,"    /* when it was planned */
    "  doc TEXT NOT NULL);", /* JSON: its inputs, what it assumed, what it predicts */
};
#define SCHEMA_VERSION ((int)TP_ARRAY_LEN(migrations))

/* ---- statements ---------------------------------------------------------- */
enum {
    ST_META_SET,
    ST_META_GET,
    ST_TRIAL_ADD,
    ST_TRIAL_STATE,
    ST_TRIAL_RUNNING,
    ST_TRIAL_END,
    ST_EVENT,
    ST_METRIC,
    ST_TRIALS,
    ST_TRIAL_ONE,
    ST_METRIC_COUNT,
    ST_EVENTS,
    ST_PLACEMENT_ADD,
    ST_PLACEMENTS,
    ST_PROFILE_SET,
    ST_PROFILE_GET,
    ST_DECISION_ADD,
    ST_DECISIONS,
    ST_TRIAL_PROGRESS,
    ST_METRIC_VALUES,
    ST_PRIOR_ADD,
    ST_PRIORS,
    ST_TRIAL_KIND,
    ST_TRIAL_PARAMS,
    ST_PLAN_ADD,
    ST_PLAN_LAST,
    ST_COUNT
};

/* What a trial row reads (read_trial_row): its columns, and where its last
 * attempt ran ("node:gpu,gpu" per node, from its placements; NULL if none). */
#define TRIAL_COLUMNS_WITH(kinds)                                                                  \
    "SELECT id, params, state, attempts, value, best, step, metrics, exit_code, signal, error, "   \
    "created_at, started_at, ended_at, failures, rung, budget, decision, run_s, interrupted, "     \
    "stderr_tail, (SELECT group_concat(p.node || CASE WHEN p.gpus = '[]' THEN '' ELSE ':' || "     \
    "trim(p.gpus, '[]') END, ' ') FROM placements p WHERE p.trial = trials.id AND "                \
    "p.attempt = trials.attempts), " kinds " "
#define TRIAL_COLUMNS TRIAL_COLUMNS_WITH("kind, source")
/* A reader of a store from before schema 7 reads every trial as plain. */
#define TRIAL_COLUMNS_V6 TRIAL_COLUMNS_WITH("NULL, NULL")
#define DECISION_COLUMNS_WITH(constraints)                                                         \
    "SELECT seq, at, kind, trial, rung, budget, ok, value, detail, attempt, "                      \
    "objectives, " constraints " FROM decisions ORDER BY seq"

static const char *const statements[ST_COUNT] = {
    [ST_META_SET] = "INSERT INTO meta(key, value) VALUES(?1, ?2) "
                    "ON CONFLICT(key) DO UPDATE SET value = excluded.value",
    [ST_META_GET] = "SELECT value FROM meta WHERE key = ?1",
    [ST_TRIAL_ADD] =
        "INSERT INTO trials(id, params, state, created_at) VALUES(?1, ?2, 'pending', ?3)",
    [ST_TRIAL_STATE] = "UPDATE trials SET state = ?2 WHERE id = ?1",
    [ST_TRIAL_RUNNING] = "UPDATE trials SET state = 'running', attempts = ?2, started_at = ?3, "
                         "ended_at = NULL WHERE id = ?1",
    [ST_TRIAL_END] = "UPDATE trials SET state = ?2, value = ?3, best = ?4, step = ?5, metrics = "
                     "COALESCE(?6, metrics), "
                     "exit_code = ?7, signal = ?8, error = ?9, ended_at = ?10, failures = ?11, "
                     "run_s = run_s + ?12, interrupted = interrupted + ?13, stderr_tail = ?14 "
                     "WHERE id = ?1",
    [ST_EVENT] = "INSERT INTO events(trial, attempt, at, kind, detail) VALUES(?1, ?2, ?3, ?4, ?5)",
    [ST_METRIC] = "INSERT OR REPLACE INTO metrics(trial, attempt, seq, step, value, data) "
                  "VALUES(?1, ?2, ?3, ?4, ?5, ?6)",
    [ST_TRIALS] = TRIAL_COLUMNS "FROM trials ORDER BY id",
    [ST_TRIAL_ONE] = TRIAL_COLUMNS "FROM trials WHERE id = ?1",
    [ST_TRIAL_KIND] = "UPDATE trials SET kind = ?2, source = ?3 WHERE id = ?1",
    [ST_TRIAL_PARAMS] = "UPDATE trials SET params = ?2 WHERE id = ?1",
    [ST_METRIC_COUNT] = "SELECT count(*) FROM metrics WHERE trial = ?1",
    [ST_EVENTS] = "SELECT kind, attempt, at, detail FROM events WHERE trial = ?1 ORDER BY id",
    [ST_PLACEMENT_ADD] =
        "INSERT INTO placements(trial, attempt, at, node, gpus, memory_mib, "
        "compute, cpus, sharing, env) VALUES(?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10)",
    [ST_PLACEMENTS] = "SELECT trial, attempt, at, node, gpus, memory_mib, compute, cpus, sharing, "
                      "env FROM placements ORDER BY id",
    [ST_PROFILE_SET] = "INSERT INTO profiles(key, memory_mib, compute, step_s, samples, at) "
                       "VALUES(?1, ?2, ?3, ?4, ?5, ?6) ON CONFLICT(key) DO UPDATE SET "
                       "memory_mib = excluded.memory_mib, compute = excluded.compute, "
                       "step_s = excluded.step_s, samples = excluded.samples, at = excluded.at",
    [ST_PROFILE_GET] = "SELECT memory_mib, compute, step_s, samples FROM profiles WHERE key = ?1",
    [ST_DECISION_ADD] =
        "INSERT INTO decisions(at, kind, trial, rung, budget, ok, value, detail, "
        "attempt, objectives, constraints) VALUES(?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11)",
    [ST_DECISIONS] = DECISION_COLUMNS_WITH("constraints"),
    [ST_METRIC_VALUES] = "SELECT step, value FROM metrics WHERE trial = ?1 AND attempt = ?2 "
                         "AND step IS NOT NULL AND value IS NOT NULL ORDER BY seq",
    [ST_TRIAL_PROGRESS] = "UPDATE trials SET rung = ?2, budget = ?3, decision = ?4 WHERE id = ?1",
    [ST_PRIOR_ADD] = "INSERT INTO priors(source, source_trial, params, value, objectives, at) "
                     "VALUES(?1, ?2, ?3, ?4, ?5, ?6)",
    [ST_PRIORS] = "SELECT seq, source, source_trial, params, value, objectives, at FROM priors "
                  "ORDER BY seq",
    [ST_PLAN_ADD] = "INSERT INTO plans(at, doc) VALUES(?1, ?2)",
    [ST_PLAN_LAST] = "SELECT at, doc FROM plans ORDER BY seq DESC LIMIT 1",
};

struct tp_store {
    sqlite3 *db;                  /* the connection */
    sqlite3_stmt *stmt[ST_COUNT]; /* prepared statements, by ST_* */
    int readonly;                 /* opened TP_STORE_READONLY */
};

/* SQLite's result code as a negative errno: a full disk and a damaged file
 * keep their names (see tp__store_strerror). */
static int sql_errno(int rc) {
    switch (rc & 0xff) {
    case SQLITE_OK:
    case SQLITE_DONE:
    case SQLITE_ROW:
        return 0;
    case SQLITE_FULL:
        return -ENOSPC;
    case SQLITE_CORRUPT:
    case SQLITE_NOTADB:
        return -EBADMSG;
    case SQLITE_READONLY:
    case SQLITE_PERM:
    case SQLITE_CANTOPEN:
        return -EACCES;
    default:
        return -EIO;
    }
}

const char *tp__store_strerror(int rc) {
    switch (rc) {
    case -ENOSPC:
        return "the disk holding the store is full (SQLITE_FULL); free space and run "
               "again to resume";
    case -EBADMSG:
        return "the store file is damaged";
    case -EACCES:
        return "the store file cannot be written (permissions or a read-only disk)";
    default:
        return "an I/O error in the store";
    }
}

static int store_fail(tp_store_t *s, tp_error_t *err, const char *what) {
    int code = s && s->db ? sql_errno(sqlite3_errcode(s->db)) : -EIO;
    return tp__errorf(err, code ? code : -EIO, "store: %s: %s", what,
                      s && s->db ? sqlite3_errmsg(s->db) : "?");
}

/* Stop a quick_check that runs past this many virtual-machine steps (in
 * thousands): a bound on the time each command spends checking, about a
 * second on a store of some hundred MB. A larger store is checked in part. */
#define CHECK_STEPS_K 200000

static int check_progress(void *ud) {
    return ++*(long *)ud > CHECK_STEPS_K;
}

/* PRAGMA quick_check, bounded: 0 when the store looks whole (or the check
 * ran out of its bound before finding damage), -EBADMSG with what it found
 * in err. O(size of the store), bounded by CHECK_STEPS_K. */
static int quick_check(tp_store_t *s, const char *path, tp_error_t *err) {
    sqlite3_stmt *st = NULL;
    long ticks = 0;
    sqlite3_progress_handler(s->db, 1000, check_progress, &ticks);
    int rc = sqlite3_prepare_v2(s->db, "PRAGMA quick_check(5)", -1, &st, NULL);
    tp_buf_t found;
    tp__buf_init(&found);
    int step = SQLITE_ERROR;
    while (rc == SQLITE_OK && (step = sqlite3_step(st)) == SQLITE_ROW) {
        const char *line = (const char *)sqlite3_column_text(st, 0);
        if (line && strcmp(line, "ok") != 0)
            tp__buf_printf(&found, "%s%s", found.len ? "; " : "", line);
    }
    int code = rc == SQLITE_OK ? step : rc;
    int interrupted = code == SQLITE_INTERRUPT;
    int failed = !found.len && !interrupted && code != SQLITE_DONE;
    int damaged = found.len || (failed && sql_errno(code) == -EBADMSG);
    if (failed) tp__buf_puts(&found, sqlite3_errmsg(s->db));
    sqlite3_finalize(st);
    sqlite3_progress_handler(s->db, 0, NULL, NULL);
    if (interrupted && !found.len)
        tp__log(TP_LOG_INFO, "store: %s is large; its quick check stopped at its bound", path);
    rc = 0;
    if (damaged)
        rc = tp__errorf(err, -EBADMSG,
                        "%s is damaged (quick_check: %.300s); nothing was changed. Keep the file; "
                        "recover what it holds with `sqlite3 %s .recover > recovered.sql`, or "
                        "restore it from a backup",
                        path, found.data, path);
    else if (failed) /* not the file's fault: a lock, a permission, an I/O error */
        rc = tp__errorf(err, sql_errno(code) ? sql_errno(code) : -EIO,
                        "store: cannot check %s: %.300s", path, found.data);
    tp__buf_free(&found);
    return rc;
}

static int migrate(tp_store_t *s, tp_error_t *err) {
    sqlite3_stmt *st = NULL;
    int version = 0;
    if (sqlite3_prepare_v2(s->db, "PRAGMA user_version", -1, &st, NULL) != SQLITE_OK)
        return store_fail(s, err, "reading the schema version");
    if (sqlite3_step(st) == SQLITE_ROW) version = sqlite3_column_int(st, 0);
    sqlite3_finalize(st);
    if (version > SCHEMA_VERSION)
        return tp__errorf(err, -EPROTO,
                          "store: schema version %d is newer than this tunepack knows (%d); "
                          "use a newer tunepack",
                          version, SCHEMA_VERSION);
    if (s->readonly || version == SCHEMA_VERSION) return 0;
    if (sqlite3_exec(s->db, "BEGIN IMMEDIATE", NULL, NULL, NULL) != SQLITE_OK)
        return store_fail(s, err, "starting the migration");
    for (int v = version; v < SCHEMA_VERSION; v++) {
        if (sqlite3_exec(s->db, migrations[v], NULL, NULL, NULL) != SQLITE_OK) {
            int rc = store_fail(s, err, "migrating the schema");
            sqlite3_exec(s->db, "ROLLBACK", NULL, NULL, NULL);
            return rc;
        }
    }
    char sql[64];
    snprintf(sql, sizeof sql, "PRAGMA user_version = %d", SCHEMA_VERSION);
    if (sqlite3_exec(s->db, sql, NULL, NULL, NULL) != SQLITE_OK ||
        sqlite3_exec(s->db, "COMMIT", NULL, NULL, NULL) != SQLITE_OK) {
        int rc = store_fail(s, err, "recording the schema version");
        sqlite3_exec(s->db, "ROLLBACK", NULL, NULL, NULL);
        return rc;
    }
    return 0;
}

struct sqlite3 *tp__store_sqlite(tp_store_t *s) {
    return s->db;
}

int tp__store_open(const char *dir, int mode, tp_store_t **out, tp_error_t *err) {
    char path[4096];
    *out = NULL;
    if (snprintf(path, sizeof path, "%s/%s", dir, TP_STORE_FILE) >= (int)sizeof path)
        return tp__errorf(err, -ENAMETOOLONG, "store: path too long: %s", dir);
    tp_store_t *s = tp__xcalloc(1, sizeof *s);
    s->readonly = mode == TP_STORE_READONLY || mode == TP_STORE_READ_AGAIN;
    int rc = s->readonly ? tp__store_open_reader(dir, path, &s->db, err)
             : sqlite3_open_v2(path, &s->db,
                               SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_NOMUTEX,
                               NULL) != SQLITE_OK
                 ? store_fail(s, err, path)
                 : 0;
    if (rc) {
        tp__store_close(s);
        return rc;
    }
    sqlite3_busy_timeout(s->db, 5000);
    int checked = mode == TP_STORE_READ_AGAIN ? 0 : quick_check(s, path, err);
    if (checked) {
        tp__store_close(s);
        return checked;
    }
    if (!s->readonly && sqlite3_exec(s->db, "PRAGMA journal_mode=WAL; PRAGMA synchronous=NORMAL;",
                                     NULL, NULL, NULL) != SQLITE_OK) {
        rc = store_fail(s, err, "enabling WAL");
        tp__store_close(s);
        return rc;
    }
    rc = migrate(s, err);
    if (rc == 0 && s->readonly) {
        /* An empty or foreign database is not an experiment. */
        sqlite3_stmt *st = NULL;
        if (sqlite3_prepare_v2(s->db, "SELECT 1 FROM meta LIMIT 1", -1, &st, NULL) != SQLITE_OK)
            rc = tp__errorf(err, -ENOENT, "no experiment in %s (%s has no tunepack schema)", dir,
                            TP_STORE_FILE);
        sqlite3_finalize(st);
    }
    for (int i = 0; rc == 0 && i < ST_COUNT; i++) {
        if (s->readonly &&
            (i == ST_META_SET || i == ST_TRIAL_ADD || i == ST_TRIAL_STATE ||
             i == ST_TRIAL_RUNNING || i == ST_TRIAL_END || i == ST_EVENT || i == ST_METRIC ||
             i == ST_PLACEMENT_ADD || i == ST_PROFILE_SET || i == ST_DECISION_ADD ||
             i == ST_TRIAL_PROGRESS || i == ST_PRIOR_ADD || i == ST_TRIAL_KIND || i == ST_PLAN_ADD))
            continue;
        if (sqlite3_prepare_v3(s->db, statements[i], -1, SQLITE_PREPARE_PERSISTENT, &s->stmt[i],
                               NULL) == SQLITE_OK)
            continue;
        if (s->readonly && (i == ST_TRIALS || i == ST_TRIAL_ONE) &&
            sqlite3_prepare_v3(s->db,
                               i == ST_TRIALS ? TRIAL_COLUMNS_V6 "FROM trials ORDER BY id"
                                              : TRIAL_COLUMNS_V6 "FROM trials WHERE id = ?1",
                               -1, SQLITE_PREPARE_PERSISTENT, &s->stmt[i], NULL) == SQLITE_OK)
            continue;
        if (s->readonly && i == ST_DECISIONS && /* before schema 8: no constraint values */
            sqlite3_prepare_v3(s->db, DECISION_COLUMNS_WITH("NULL"), -1, SQLITE_PREPARE_PERSISTENT,
                               &s->stmt[i], NULL) == SQLITE_OK)
            continue;
        /* A reader of a store written by an older tunepack (no migration when reading):
         * what later migrations added reads as empty. */
        if (!(s->readonly && (i == ST_DECISIONS || i == ST_PRIORS || i == ST_PLAN_LAST)))
            rc = store_fail(s, err, statements[i]);
    }
    if (rc != 0) {
        tp__store_close(s);
        return rc;
    }
    *out = s;
    return 0;
}

void tp__store_close(tp_store_t *s) {
    if (!s) return;
    for (int i = 0; i < ST_COUNT; i++)
        sqlite3_finalize(s->stmt[i]);
    sqlite3_close(s->db);
    free(s);
}

int tp__store_begin(tp_store_t *s) {
    return sql_errno(sqlite3_exec(s->db, "BEGIN", NULL, NULL, NULL));
}

int tp__store_commit(tp_store_t *s) {
    return sql_errno(sqlite3_exec(s->db, "COMMIT", NULL, NULL, NULL));
}

/* Run a prepared statement that returns no rows; resets it. */
static int exec_stmt(tp_store_t *s, sqlite3_stmt *st) {
    int rc = sqlite3_step(st);
    sqlite3_reset(st);
    sqlite3_clear_bindings(st);
    if (rc != SQLITE_DONE) {
        tp__log(TP_LOG_ERROR, "store: %s", sqlite3_errmsg(s->db));
        return sql_errno(rc) ? sql_errno(rc) : -EIO;
    }
    return 0;
}

static void bind_text_or_null(sqlite3_stmt *st, int i, const char *text) {
    if (text)
        sqlite3_bind_text(st, i, text, -1, SQLITE_STATIC);
    else
        sqlite3_bind_null(st, i);
}

static void bind_real_or_null(sqlite3_stmt *st, int i, int has, double v) {
    if (has && isfinite(v))
        sqlite3_bind_double(st, i, v);
    else
        sqlite3_bind_null(st, i);
}

int tp__store_meta_set(tp_store_t *s, const char *key, const char *value) {
    sqlite3_stmt *st = s->stmt[ST_META_SET];
    sqlite3_bind_text(st, 1, key, -1, SQLITE_STATIC);
    sqlite3_bind_text(st, 2, value, -1, SQLITE_STATIC);
    return exec_stmt(s, st);
}

char *tp__store_meta_get(tp_store_t *s, const char *key) {
    sqlite3_stmt *st = s->stmt[ST_META_GET];
    char *value = NULL;
    sqlite3_bind_text(st, 1, key, -1, SQLITE_STATIC);
    if (sqlite3_step(st) == SQLITE_ROW)
        value = tp__strdup((const char *)sqlite3_column_text(st, 0));
    sqlite3_reset(st);
    sqlite3_clear_bindings(st);
    return value;
}

int tp__store_event(tp_store_t *s, int64_t trial, int attempt, const char *kind, const char *detail,
                    double at) {
    sqlite3_stmt *st = s->stmt[ST_EVENT];
    sqlite3_bind_int64(st, 1, trial);
    sqlite3_bind_int(st, 2, attempt);
    sqlite3_bind_double(st, 3, at);
    sqlite3_bind_text(st, 4, kind, -1, SQLITE_STATIC);
    bind_text_or_null(st, 5, detail);
    return exec_stmt(s, st);
}

int tp__store_trial_add(tp_store_t *s, int64_t id, const char *params_json, double at) {
    sqlite3_stmt *st = s->stmt[ST_TRIAL_ADD];
    sqlite3_bind_int64(st, 1, id);
    sqlite3_bind_text(st, 2, params_json, -1, SQLITE_STATIC);
    sqlite3_bind_double(st, 3, at);
    int rc = exec_stmt(s, st);
    return rc ? rc : tp__store_event(s, id, 0, "pending", NULL, at);
}

int tp__store_trial_state(tp_store_t *s, int64_t id, const char *state, int attempt,
                          const char *detail, double at) {
    sqlite3_stmt *st;
    if (strcmp(state, "running") == 0) {
        st = s->stmt[ST_TRIAL_RUNNING];
        sqlite3_bind_int64(st, 1, id);
        sqlite3_bind_int(st, 2, attempt);
        sqlite3_bind_double(st, 3, at);
    } else {
        st = s->stmt[ST_TRIAL_STATE];
        sqlite3_bind_int64(st, 1, id);
        sqlite3_bind_text(st, 2, state, -1, SQLITE_STATIC);
    }
    int rc = exec_stmt(s, st);
    return rc ? rc : tp__store_event(s, id, attempt, state, detail, at);
}

int tp__store_trial_end(tp_store_t *s, int64_t id, const tp_trial_end_t *e) {
    sqlite3_stmt *st = s->stmt[ST_TRIAL_END];
    sqlite3_bind_int64(st, 1, id);
    sqlite3_bind_text(st, 2, e->state, -1, SQLITE_STATIC);
    bind_real_or_null(st, 3, e->has_value, e->value);
    bind_real_or_null(st, 4, e->has_value, e->best);
    if (e->step != TP_STORE_NO_STEP)
        sqlite3_bind_int64(st, 5, e->step);
    else
        sqlite3_bind_null(st, 5);
    bind_text_or_null(st, 6, e->metrics);
    if (e->has_exit) {
        sqlite3_bind_int(st, 7, e->exit_code);
        sqlite3_bind_int(st, 8, e->signal);
    } else {
        sqlite3_bind_null(st, 7);
        sqlite3_bind_null(st, 8);
    }
    bind_text_or_null(st, 9, e->error && *e->error ? e->error : NULL);
    if (strcmp(e->state, "pending") == 0)
        sqlite3_bind_null(st, 10);
    else
        sqlite3_bind_double(st, 10, e->at);
    sqlite3_bind_int(st, 11, e->failures);
    sqlite3_bind_double(st, 12, e->ran_s > 0 ? e->ran_s : 0);
    sqlite3_bind_int(st, 13, e->interrupted);
    bind_text_or_null(st, 14, e->stderr_tail && *e->stderr_tail ? e->stderr_tail : NULL);
    int rc = exec_stmt(s, st);
    return rc ? rc
              : tp__store_event(s, id, e->attempt, e->state, e->detail ? e->detail : e->error,
                                e->at);
}

int tp__store_metric(tp_store_t *s, int64_t trial, int attempt, int64_t seq, int64_t step,
                     double value, const char *data, size_t len) {
    sqlite3_stmt *st = s->stmt[ST_METRIC];
    sqlite3_bind_int64(st, 1, trial);
    sqlite3_bind_int(st, 2, attempt);
    sqlite3_bind_int64(st, 3, seq);
    if (step != TP_STORE_NO_STEP)
        sqlite3_bind_int64(st, 4, step);
    else
        sqlite3_bind_null(st, 4);
    bind_real_or_null(st, 5, 1, value);
    sqlite3_bind_text(st, 6, data, (int)len, SQLITE_STATIC);
    return exec_stmt(s, st);
}

/* Fill row from the current result of a ST_TRIALS-shaped statement. */
static void read_trial_row(sqlite3_stmt *st, tp_trial_row_t *r) {
    memset(r, 0, sizeof *r);
    r->id = sqlite3_column_int64(st, 0);
    r->params = (const char *)sqlite3_column_text(st, 1);
    r->state = (const char *)sqlite3_column_text(st, 2);
    r->attempts = sqlite3_column_int(st, 3);
    r->has_value = sqlite3_column_type(st, 4) != SQLITE_NULL;
    r->value = r->has_value ? sqlite3_column_double(st, 4) : NAN;
    r->best = sqlite3_column_type(st, 5) != SQLITE_NULL ? sqlite3_column_double(st, 5) : NAN;
    r->step =
        sqlite3_column_type(st, 6) != SQLITE_NULL ? sqlite3_column_int64(st, 6) : TP_STORE_NO_STEP;
    r->metrics = (const char *)sqlite3_column_text(st, 7);
    r->has_exit = sqlite3_column_type(st, 8) != SQLITE_NULL;
    r->exit_code = sqlite3_column_int(st, 8);
    r->signal = sqlite3_column_int(st, 9);
    r->error = (const char *)sqlite3_column_text(st, 10);
    r->created_at = sqlite3_column_double(st, 11);
    r->started_at = sqlite3_column_double(st, 12);
    r->ended_at = sqlite3_column_double(st, 13);
    r->failures = sqlite3_column_int(st, 14);
    r->rung = sqlite3_column_type(st, 15) != SQLITE_NULL ? sqlite3_column_int(st, 15) : -1;
    r->budget = sqlite3_column_double(st, 16);
    r->decision = (const char *)sqlite3_column_text(st, 17);
    r->run_s = sqlite3_column_double(st, 18);
    r->interrupted = sqlite3_column_int(st, 19);
    r->stderr_tail = (const char *)sqlite3_column_text(st, 20);
    r->where = (const char *)sqlite3_column_text(st, 21);
    r->kind = (const char *)sqlite3_column_text(st, 22);
    r->source = sqlite3_column_type(st, 23) != SQLITE_NULL ? sqlite3_column_int64(st, 23) : -1;
}

static int each_trial(sqlite3_stmt *st, int (*cb)(const tp_trial_row_t *, void *), void *ud,
                      int *seen) {
    int rc = 0, step;
    while ((step = sqlite3_step(st)) == SQLITE_ROW) {
        tp_trial_row_t row;
        read_trial_row(st, &row);
        (*seen)++;
        if ((rc = cb(&row, ud)) != 0) break;
    }
    if (rc == 0 && step != SQLITE_DONE && step != SQLITE_ROW) rc = -EIO;
    sqlite3_reset(st);
    sqlite3_clear_bindings(st);
    return rc;
}

int tp__store_trials(tp_store_t *s, int (*cb)(const tp_trial_row_t *, void *), void *ud) {
    int seen = 0;
    return each_trial(s->stmt[ST_TRIALS], cb, ud, &seen);
}

int tp__store_trial(tp_store_t *s, int64_t id, int (*cb)(const tp_trial_row_t *, void *),
                    void *ud) {
    int seen = 0;
    sqlite3_bind_int64(s->stmt[ST_TRIAL_ONE], 1, id);
    int rc = each_trial(s->stmt[ST_TRIAL_ONE], cb, ud, &seen);
    return rc ? rc : seen ? 0 : -ENOENT;
}

int64_t tp__store_metric_count(tp_store_t *s, int64_t trial) {
    sqlite3_stmt *st = s->stmt[ST_METRIC_COUNT];
    int64_t n = 0;
    sqlite3_bind_int64(st, 1, trial);
    if (sqlite3_step(st) == SQLITE_ROW) n = sqlite3_column_int64(st, 0);
    sqlite3_reset(st);
    sqlite3_clear_bindings(st);
    return n;
}

int tp__store_events(tp_store_t *s, int64_t trial,
                     int (*cb)(const char *kind, int attempt, double at, const char *detail,
                               void *ud),
                     void *ud) {
    sqlite3_stmt *st = s->stmt[ST_EVENTS];
    int rc = 0;
    sqlite3_bind_int64(st, 1, trial);
    while (sqlite3_step(st) == SQLITE_ROW) {
        rc = cb((const char *)sqlite3_column_text(st, 0), sqlite3_column_int(st, 1),
                sqlite3_column_double(st, 2), (const char *)sqlite3_column_text(st, 3), ud);
        if (rc) break;
    }
    sqlite3_reset(st);
    sqlite3_clear_bindings(st);
    return rc;
}

typedef struct {
    const char *kind;
    char *detail;
} last_event_t;

static int keep_last(const char *kind, int attempt, double at, const char *detail, void *ud) {
    last_event_t *l = ud;
    (void)attempt;
    (void)at;
    if (detail && strcmp(kind, l->kind) == 0) {
        free(l->detail);
        l->detail = tp__strdup(detail);
    }
    return 0;
}

int tp__store_last_event(tp_store_t *s, int64_t trial, const char *kind, char **detail) {
    last_event_t l = {kind, NULL};
    int rc = tp__store_events(s, trial, keep_last, &l);
    *detail = l.detail;
    return rc;
}

int tp__store_placement(tp_store_t *s, const tp_placement_row_t *p) {
    sqlite3_stmt *st = s->stmt[ST_PLACEMENT_ADD];
    sqlite3_bind_int64(st, 1, p->trial);
    sqlite3_bind_int(st, 2, p->attempt);
    sqlite3_bind_double(st, 3, p->at);
    sqlite3_bind_text(st, 4, p->node, -1, SQLITE_STATIC);
    sqlite3_bind_text(st, 5, p->gpus, -1, SQLITE_STATIC);
    sqlite3_bind_int64(st, 6, (sqlite3_int64)p->memory_mib);
    sqlite3_bind_double(st, 7, p->compute);
    sqlite3_bind_int(st, 8, p->cpus);
    sqlite3_bind_text(st, 9, p->sharing, -1, SQLITE_STATIC);
    bind_text_or_null(st, 10, p->env);
    return exec_stmt(s, st);
}

int tp__store_placements(tp_store_t *s, int (*cb)(const tp_placement_row_t *row, void *ud),
                         void *ud) {
    sqlite3_stmt *st = s->stmt[ST_PLACEMENTS];
    int rc = 0;
    while (sqlite3_step(st) == SQLITE_ROW) {
        tp_placement_row_t p = {
            .trial = sqlite3_column_int64(st, 0),
            .attempt = sqlite3_column_int(st, 1),
            .at = sqlite3_column_double(st, 2),
            .node = (const char *)sqlite3_column_text(st, 3),
            .gpus = (const char *)sqlite3_column_text(st, 4),
            .memory_mib = (uint64_t)sqlite3_column_int64(st, 5),
            .compute = sqlite3_column_double(st, 6),
            .cpus = sqlite3_column_int(st, 7),
            .sharing = (const char *)sqlite3_column_text(st, 8),
            .env = (const char *)sqlite3_column_text(st, 9),
        };
        if ((rc = cb(&p, ud)) != 0) break;
    }
    sqlite3_reset(st);
    return rc;
}

int tp__store_profile_set(tp_store_t *s, const char *key, const tp_profile_t *p) {
    sqlite3_stmt *st = s->stmt[ST_PROFILE_SET];
    sqlite3_bind_text(st, 1, key, -1, SQLITE_STATIC);
    sqlite3_bind_int64(st, 2, (sqlite3_int64)p->memory_mib);
    sqlite3_bind_double(st, 3, p->compute);
    bind_real_or_null(st, 4, p->step_s > 0, p->step_s);
    sqlite3_bind_int(st, 5, p->samples);
    sqlite3_bind_double(st, 6, p->at);
    return exec_stmt(s, st);
}

int tp__store_profile_get(tp_store_t *s, const char *key, tp_profile_t *p) {
    sqlite3_stmt *st = s->stmt[ST_PROFILE_GET];
    int rc = -ENOENT;
    sqlite3_bind_text(st, 1, key, -1, SQLITE_STATIC);
    if (sqlite3_step(st) == SQLITE_ROW) {
        p->memory_mib = (uint64_t)sqlite3_column_int64(st, 0);
        p->compute = sqlite3_column_double(st, 1);
        p->step_s = sqlite3_column_type(st, 2) == SQLITE_NULL ? 0 : sqlite3_column_double(st, 2);
        p->samples = sqlite3_column_int(st, 3);
        rc = 0;
    }
    sqlite3_reset(st);
    sqlite3_clear_bindings(st);
    return rc;
}

int tp__store_decision(tp_store_t *s, const tp_decision_row_t *d) {
    sqlite3_stmt *st = s->stmt[ST_DECISION_ADD];
    sqlite3_bind_double(st, 1, d->at);
    sqlite3_bind_text(st, 2, d->kind, -1, SQLITE_STATIC);
    sqlite3_bind_int64(st, 3, d->trial);
    sqlite3_bind_int(st, 4, d->rung);
    bind_real_or_null(st, 5, d->budget > 0, d->budget);
    sqlite3_bind_int(st, 6, d->ok);
    bind_real_or_null(st, 7, d->has_value, d->value);
    bind_text_or_null(st, 8, d->detail);
    sqlite3_bind_int(st, 9, d->attempt);
    bind_text_or_null(st, 10, d->objectives);
    bind_text_or_null(st, 11, d->constraints);
    return exec_stmt(s, st);
}

int tp__store_decisions(tp_store_t *s, int (*cb)(const tp_decision_row_t *d, void *ud), void *ud) {
    sqlite3_stmt *st = s->stmt[ST_DECISIONS];
    int rc = 0;
    if (!st) return 0; /* read-only, older schema */
    while (sqlite3_step(st) == SQLITE_ROW) {
        tp_decision_row_t d = {
            .seq = sqlite3_column_int64(st, 0),
            .at = sqlite3_column_double(st, 1),
            .kind = (const char *)sqlite3_column_text(st, 2),
            .trial = sqlite3_column_int64(st, 3),
            .rung = sqlite3_column_int(st, 4),
            .budget = sqlite3_column_type(st, 5) != SQLITE_NULL ? sqlite3_column_double(st, 5) : 0,
            .ok = sqlite3_column_int(st, 6),
            .has_value = sqlite3_column_type(st, 7) != SQLITE_NULL,
            .value = sqlite3_column_type(st, 7) != SQLITE_NULL ? sqlite3_column_double(st, 7) : NAN,
            .detail = (const char *)sqlite3_column_text(st, 8),
            .attempt = sqlite3_column_int(st, 9),
            .objectives = (const char *)sqlite3_column_text(st, 10),
            .constraints = (const char *)sqlite3_column_text(st, 11),
        };
        if ((rc = cb(&d, ud)) != 0) break;
    }
    sqlite3_reset(st);
    return rc;
}

int tp__store_trial_progress(tp_store_t *s, int64_t id, int rung, double budget,
                             const char *decision) {
    sqlite3_stmt *st = s->stmt[ST_TRIAL_PROGRESS];
    sqlite3_bind_int64(st, 1, id);
    sqlite3_bind_int(st, 2, rung);
    bind_real_or_null(st, 3, budget > 0, budget);
    bind_text_or_null(st, 4, decision);
    return exec_stmt(s, st);
}

int tp__store_trial_kind(tp_store_t *s, int64_t id, const char *kind, int64_t source) {
    sqlite3_stmt *st = s->stmt[ST_TRIAL_KIND];
    sqlite3_bind_int64(st, 1, id);
    bind_text_or_null(st, 2, kind);
    if (source >= 0)
        sqlite3_bind_int64(st, 3, source);
    else
        sqlite3_bind_null(st, 3);
    return exec_stmt(s, st);
}

int tp__store_trial_params(tp_store_t *s, int64_t id, const char *params_json) {
    sqlite3_stmt *st = s->stmt[ST_TRIAL_PARAMS];
    sqlite3_bind_int64(st, 1, id);
    bind_text_or_null(st, 2, params_json);
    return exec_stmt(s, st);
}

int tp__store_metric_values(tp_store_t *s, int64_t trial, int attempt,
                            int (*cb)(int64_t step, double value, void *ud), void *ud) {
    sqlite3_stmt *st = s->stmt[ST_METRIC_VALUES];
    int rc = 0;
    sqlite3_bind_int64(st, 1, trial);
    sqlite3_bind_int(st, 2, attempt);
    while (sqlite3_step(st) == SQLITE_ROW)
        if ((rc = cb(sqlite3_column_int64(st, 0), sqlite3_column_double(st, 1), ud)) != 0) break;
    sqlite3_reset(st);
    sqlite3_clear_bindings(st);
    return rc;
}

int tp__store_prior_add(tp_store_t *s, const tp_prior_row_t *p) {
    sqlite3_stmt *st = s->stmt[ST_PRIOR_ADD];
    sqlite3_bind_text(st, 1, p->source, -1, SQLITE_STATIC);
    sqlite3_bind_int64(st, 2, p->source_trial);
    sqlite3_bind_text(st, 3, p->params, -1, SQLITE_STATIC);
    bind_real_or_null(st, 4, !isnan(p->value), p->value);
    bind_text_or_null(st, 5, p->objectives);
    sqlite3_bind_double(st, 6, p->at);
    return exec_stmt(s, st);
}

int tp__store_priors(tp_store_t *s, int (*cb)(const tp_prior_row_t *p, void *ud), void *ud) {
    sqlite3_stmt *st = s->stmt[ST_PRIORS];
    int rc = 0;
    if (!st) return 0; /* read-only, older schema */
    while (sqlite3_step(st) == SQLITE_ROW) {
        tp_prior_row_t p = {
            .seq = sqlite3_column_int64(st, 0),
            .source = (const char *)sqlite3_column_text(st, 1),
            .source_trial = sqlite3_column_int64(st, 2),
            .params = (const char *)sqlite3_column_text(st, 3),
            .value = sqlite3_column_type(st, 4) != SQLITE_NULL ? sqlite3_column_double(st, 4) : NAN,
            .objectives = (const char *)sqlite3_column_text(st, 5),
            .at = sqlite3_column_double(st, 6),
        };
        if ((rc = cb(&p, ud)) != 0) break;
    }
    sqlite3_reset(st);
    return rc;
}

int tp__store_plan_add(tp_store_t *s, double at, const char *doc) {
    sqlite3_stmt *st = s->stmt[ST_PLAN_ADD];
    sqlite3_bind_double(st, 1, at);
    sqlite3_bind_text(st, 2, doc, -1, SQLITE_STATIC);
    return exec_stmt(s, st);
}

char *tp__store_plan_last(tp_store_t *s, double *at) {
    sqlite3_stmt *st = s->stmt[ST_PLAN_LAST];
    char *doc = NULL;
    if (!st) return NULL; /* read-only, older schema */
    if (sqlite3_step(st) == SQLITE_ROW) {
        if (at) *at = sqlite3_column_double(st, 0);
        doc = tp__strdup((const char *)sqlite3_column_text(st, 1));
    }
    sqlite3_reset(st);
    return doc;
}
