/* store: one SQLite database per experiment (WAL, schema version in
 * user_version, migrations in code). Only the orchestrator writes it;
 * the CLI opens it read-only. */
#ifndef TP_STORE_H
#define TP_STORE_H

#include <stdint.h>

#include "util/util.h"

#define TP_STORE_FILE "tunepack.db"
#define TP_STORE_NO_STEP INT64_MIN

typedef struct tp_store tp_store_t;

enum {
    TP_STORE_READONLY = 0,   /* open an existing store for reading */
    TP_STORE_WRITE = 1,      /* open or create for writing (the orchestrator) */
    TP_STORE_READ_AGAIN = 2, /* READONLY without the quick_check: for a reader that opens
                              * the same store again and again after checking it once
                              * (the dashboard, on every request) */
};

/* Open DIR/tunepack.db. mode TP_STORE_WRITE creates the file and migrates
 * the schema to the current version; READONLY fails with -ENOENT if absent,
 * -EACCES ("permission denied", naming what denies it) when this user may not
 * read it, and -EPROTO if the schema is newer than this binary; it reads a
 * store on read-only media or in a directory it may not write
 * (store_internal.h, tp__store_open_reader). Both modes check
 * the file first (PRAGMA quick_check, bounded to about a second) and fails
 * with -EBADMSG, saying what it found and how to recover, when damaged. */
int tp__store_open(const char *dir, int mode, tp_store_t **out, tp_error_t *err);
/* The words for a store error code (-ENOSPC: the disk is full, -EBADMSG:
 * the file is damaged, ...). Writes return these codes. */
const char *tp__store_strerror(int rc);
void tp__store_close(tp_store_t *s);
/* The connection itself, for read-only views that run their own queries
 * (the dashboard, src/web/query.c); valid until tp__store_close. */
struct sqlite3;
struct sqlite3 *tp__store_sqlite(tp_store_t *s);

/* Transactions: the orchestrator groups a loop turn's writes in one. */
int tp__store_begin(tp_store_t *s);
int tp__store_commit(tp_store_t *s);

/* Experiment-wide key/value facts (experiment text, token, state, ...). */
int tp__store_meta_set(tp_store_t *s, const char *key, const char *value);
char *tp__store_meta_get(tp_store_t *s, const char *key); /* malloc'd, NULL if absent */

/* A new trial, state "pending". */
int tp__store_trial_add(tp_store_t *s, int64_t id, const char *params_json, double at);
/* A state change of a trial attempt, with its time and an optional detail;
 * also recorded in the events table. "running" sets attempts and started_at. */
int tp__store_trial_state(tp_store_t *s, int64_t id, const char *state, int attempt,
                          const char *detail, double at);

/* The end of an attempt. */
typedef struct tp_trial_end {
    const char *state;       /* completed | failed | pending (retry or interrupted) | stopped */
    int attempt;             /* attempt that ended */
    int failures;            /* failed attempts so far, this one included */
    int has_exit;            /* exit status known */
    int exit_code;           /* exit code, -1 if signaled */
    int signal;              /* terminating signal, 0 if none */
    const char *error;       /* what went wrong with the attempt, NULL if nothing */
    const char *detail;      /* the event's text when it is no error, or NULL */
    int has_value;           /* objective reported */
    double value;            /* objective: last reported value */
    double best;             /* best value reported during the attempt */
    int64_t step;            /* last reported step, TP_STORE_NO_STEP if none */
    const char *metrics;     /* last report line (JSON object), NULL: keep the stored one */
    double at;               /* time */
    double ran_s;            /* how long the attempt ran (added to the trial's running time) */
    int interrupted;         /* 1: the attempt was interrupted (a stop, a lost agent, a crash) */
    const char *stderr_tail; /* the last lines of a failed attempt's stderr, or NULL */
} tp_trial_end_t;
int tp__store_trial_end(tp_store_t *s, int64_t id, const tp_trial_end_t *end);

/* An event with no state change (garbage on a report channel, a note). */
int tp__store_event(tp_store_t *s, int64_t trial, int attempt, const char *kind, const char *detail,
                    double at);
/* One reported metric row: the line as received (a JSON object), its step
 * and the objective's value (NaN: absent). O(log n) per row. */
int tp__store_metric(tp_store_t *s, int64_t trial, int attempt, int64_t seq, int64_t step,
                     double value, const char *data, size_t len);

/* A trial as read back; strings valid only during the callback. */
typedef struct tp_trial_row {
    int64_t id;
    const char *params; /* JSON object */
    const char *state;
    int attempts; /* attempts started */
    int failures; /* attempts that failed */
    int has_value;
    double value;
    double best;
    int64_t step;        /* TP_STORE_NO_STEP if none */
    const char *metrics; /* last report line or NULL */
    int has_exit;
    int exit_code;
    int signal;
    const char *error;                       /* NULL if none */
    double created_at, started_at, ended_at; /* 0 if unset */
    int rung;                                /* rung of its last job, -1 if none (schema 3) */
    double budget;                           /* budget of its last job, 0 if none */
    const char *decision;                    /* the scheduler's last decision about it, or NULL */
    double run_s;                            /* time spent running, all attempts (schema 4) */
    int interrupted;         /* attempts interrupted by a stop, a lost agent or a crash */
    const char *stderr_tail; /* last lines of its last failed attempt's stderr, or NULL */
    const char *where;       /* where its last attempt ran: "node:gpu,gpu" per node, or NULL */
    const char *kind;        /* "surrogate", "target", or NULL for a plain trial (schema 7) */
    int64_t source;          /* a target: the surrogate trial it promotes; else -1 */
} tp_trial_row_t;

/* Call cb for every trial in id order; stops early when cb returns non-zero
 * and returns that value. O(trials). */
int tp__store_trials(tp_store_t *s, int (*cb)(const tp_trial_row_t *row, void *ud), void *ud);
/* One trial; 0, -ENOENT if absent. */
int tp__store_trial(tp_store_t *s, int64_t id, int (*cb)(const tp_trial_row_t *row, void *ud),
                    void *ud);

/* Number of metric rows of a trial (all attempts). */
int64_t tp__store_metric_count(tp_store_t *s, int64_t trial);

/* Events of a trial in time order: cb(kind, attempt, at, detail). */
int tp__store_events(tp_store_t *s, int64_t trial,
                     int (*cb)(const char *kind, int attempt, double at, const char *detail,
                               void *ud),
                     void *ud);

/* The detail of a trial's last event of `kind` into *detail (caller frees), NULL
 * when it has none; 0 or the callback walk's error. */
int tp__store_last_event(tp_store_t *s, int64_t trial, const char *kind, char **detail);

/* ---- placement (schema 2) --------------------------------------------- */
typedef struct tp_placement_row {
    int64_t trial;
    int attempt;
    double at;
    const char *node;    /* node name */
    const char *gpus;    /* JSON array of device indexes, "[]" for CPU-only */
    uint64_t memory_mib; /* demand per GPU it was placed with */
    double compute;      /* compute share per GPU */
    int cpus;
    const char *sharing; /* mps | time-slicing | exclusive | cpu */
    const char *env;     /* JSON object: the GPU environment given, or NULL */
} tp_placement_row_t;
int tp__store_placement(tp_store_t *s, const tp_placement_row_t *p);
/* Every placement in the order made. */
int tp__store_placements(tp_store_t *s, int (*cb)(const tp_placement_row_t *row, void *ud),
                         void *ud);

/* A measured demand, shared by the trials with the same profile_by values. */
typedef struct tp_profile {
    uint64_t memory_mib; /* peak GPU memory seen, per GPU */
    double compute;      /* mean SM share in use, per GPU */
    double step_s;       /* mean time between reports, 0 if unknown */
    int samples;         /* NVML samples behind it */
    double at;           /* when measured */
} tp_profile_t;
int tp__store_profile_set(tp_store_t *s, const char *key, const tp_profile_t *p);
int tp__store_profile_get(tp_store_t *s, const char *key, tp_profile_t *p); /* 0, -ENOENT */

/* ---- the scheduler's journal (schema 3) ------------------------------------
 * Every call that changed the scheduler, in order: a job handed out, a job's
 * result, an early stop. Replaying them rebuilds the same scheduler. */
typedef struct tp_decision_row {
    int64_t seq; /* order (set by the store) */
    double at;
    const char *kind; /* job | result | stop | exploit (pbt: detail is a JSON object
                         {segment, donor, donor_step, old, new}, journaled before its job) | ... */
    int64_t trial;
    int attempt; /* the attempt that ran the job / ended it */
    int rung;
    double budget; /* 0: none */
    int ok;        /* result: the job succeeded */
    int has_value;
    double value;            /* result / stop: the objective */
    const char *detail;      /* the decision in words */
    const char *objectives;  /* result with several objectives: their values, a JSON array in
                                metric order (null for a missing one); NULL otherwise */
    const char *constraints; /* ok result under constraints: the constrained metrics' values,
                                a JSON array in their order (null: missing); NULL otherwise
                                (schema 8) */
} tp_decision_row_t;
int tp__store_decision(tp_store_t *s, const tp_decision_row_t *d);
int tp__store_decisions(tp_store_t *s, int (*cb)(const tp_decision_row_t *d, void *ud), void *ud);
/* The (step, objective) rows an attempt reported, in order. */
int tp__store_metric_values(tp_store_t *s, int64_t trial, int attempt,
                            int (*cb)(int64_t step, double value, void *ud), void *ud);
/* A trial's kind under `surrogate:` ("surrogate", "target"; NULL: plain) and,
 * for a target, the surrogate trial it promotes (source; -1: none). */
int tp__store_trial_kind(tp_store_t *s, int64_t id, const char *kind, int64_t source);
/* A trial's configuration from now on (scheduler pbt's explore: a new
 * segment of its lineage; its earlier ones are in its `exploit` decisions). */
int tp__store_trial_params(tp_store_t *s, int64_t id, const char *params_json);
/* A trial's rung, budget and the last decision about it. */
int tp__store_trial_progress(tp_store_t *s, int64_t id, int rung, double budget,
                             const char *decision);

/* A prior observation (warm start): a completed trial of an earlier
 * experiment, fed to the sampler, never run. */
typedef struct tp_prior_row {
    int64_t seq;            /* order (set by the store) */
    const char *source;     /* the earlier experiment's directory */
    int64_t source_trial;   /* its trial id there */
    const char *params;     /* JSON object: the configuration as this space reads it */
    double value;           /* the first objective (NaN: none) */
    const char *objectives; /* several objectives: JSON array; NULL otherwise */
    double at;
} tp_prior_row_t;
int tp__store_prior_add(tp_store_t *s, const tp_prior_row_t *p);
/* Every prior in order; stops at the first callback that returns non-zero. */
int tp__store_priors(tp_store_t *s, int (*cb)(const tp_prior_row_t *p, void *ud), void *ud);

/* ---- plans (schema 9) ------------------------------------------------------
 * A plan of the experiment (`tunepack plan EXPERIMENT --dir DIR`): doc is a
 * JSON object, its inputs, what it assumed and what it predicts (the
 * makespan's median and 90% range, GPUs, trials finished, the best metric;
 * docs/simulator.md). */
int tp__store_plan_add(tp_store_t *s, double at, const char *doc);
/* The latest plan's doc (malloc'd; caller frees) and its time into *at (may
 * be NULL); NULL when none was stored (or the store predates plans). */
char *tp__store_plan_last(tp_store_t *s, double *at);

#endif
