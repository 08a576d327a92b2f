/* run: the orchestrator. An event loop that asks the searcher for trials,
 * journals each transition in the store before acting on it, and drives
 * agents over the protocol. It never spawns a trial itself. */
#ifndef TP_RUN_H
#define TP_RUN_H

#include <jansson.h>
#include <stddef.h>
#include <stdint.h>

#include "search/constraint.h"
#include "util/util.h"

/* Exit codes of `tunepack` (docs/exit-codes.md). */
enum {
    TP_EXIT_OK = 0,       /* done; at least one trial completed */
    TP_EXIT_ERROR = 1,    /* an unexpected failure */
    TP_EXIT_USAGE = 2,    /* bad command line */
    TP_EXIT_CONFIG = 3,   /* the experiment file is invalid */
    TP_EXIT_STORE = 4,    /* the experiment directory cannot be used */
    TP_EXIT_NO_TRIAL = 5, /* the experiment ended and no trial completed */
    TP_EXIT_STOPPED = 6,  /* stopped by `tunepack stop` or a signal; run again to resume */
    TP_EXIT_AGENT = 7,    /* the agent was lost too often */
};

typedef struct tp_run_opts {
    const char *file;    /* the experiment file */
    const char *dir;     /* experiment directory; NULL = runs/<name> */
    int live;            /* 1: live terminal view; 0: log lines */
    int quiet;           /* no progress output at all */
    const char *cluster; /* --cluster: local | slurm | ssh:HOST,...; NULL: the file's */
    const char *fork;    /* --fork OLD: a new experiment seeded with OLD's results; NULL */
    int retry_failed;    /* --retry-failed: the failed trials run again, an attempt each */
} tp_run_opts_t;

/* Run (or resume) an experiment to its end. Returns a TP_EXIT_* code; the
 * reason for a failure is printed on stderr. */
int tp__run_experiment(const tp_run_opts_t *opts);
/* `run FILE --dry-run`: report every mistake in the file (file:line:col),
 * check the program from the working directory, and print the first `show`
 * configurations with the exact argv of each. Creates and runs nothing.
 * TP_EXIT_OK or TP_EXIT_CONFIG. */
int tp__run_dry(const tp_run_opts_t *opts, int show);

/* ---- report lines (report.c): pure parsing, no I/O ---------------------- */
typedef struct tp_report {
    int64_t step;  /* "step" member, TP_STORE_NO_STEP-like INT64_MIN if absent */
    int has_value; /* the objective metric is present */
    double value;  /* its value (finite) */
    int config;    /* "config": which configuration of a fused process, -1 if absent */
} tp_report_t;

#define TP_REPORT_CONFIG_MAX 4096 /* "config" indexes are below this */

/* A JSON report line (from TUNEPACK_REPORT_FD). Returns 0 with *out filled,
 * or -1 with why filled (not JSON, not an object, objective not a finite
 * number, step not an integer, config not an index). O(len). */
int tp__report_parse_json(const char *line, size_t len, const char *metric, tp_report_t *out,
                          char *why, size_t whylen);
/* A `name=value` line from stdout (Katib's form). Returns 1 when it carries
 * the objective (*out filled, its JSON form appended to json), 0 when it is
 * not a report of the objective, -1 (why filled) when the objective's value
 * is not a finite number. */
int tp__report_parse_kv(const char *line, size_t len, const char *metric, tp_report_t *out,
                        tp_buf_t *json, char *why, size_t whylen);

/* ---- the best trial (rank.c): pure ------------------------------------------
 * A trial competes for "best" once a job of it ended with the objective
 * (completed, stopped early, paused at a rung waiting for a promotion, or
 * promoted and running its next rung), with the last job it finished so;
 * trials that never finished a job (running their first, pending, failed
 * at their first) do not. Between two competitors the
 * one that reached the larger budget wins (a value after 9 epochs is not
 * weighed against one after 1), then the better value by the metric's mode.
 * Without budgets every trial has budget 0 and only the value counts. */
typedef struct tp_rank_key {
    double budget; /* budget of the job the value belongs to, 0 if none */
    double value;  /* the objective; NaN never wins */
} tp_rank_key_t;
/* Whether a trial in `state` (a store state name) competes. */
int tp__rank_competes(const char *state, int has_value);
/* Whether a ranks before b. O(1). */
int tp__rank_beats(const tp_rank_key_t *a, const tp_rank_key_t *b, int maximize);
/* Under constraints only a feasible trial competes: one whose last report (metrics, JSON
 * text; NULL: none) has every constrained metric inside its bounds (a metric it never
 * reported makes it infeasible). Always 1 without constraints. O(the report). */
int tp__rank_feasible_of(const tp_constraint_t *c, size_t n, const char *metrics);

/* Experiment directory helpers shared by the CLI verbs (rundir.c). */
/* The directory a command should look at: dir if given, else the most
 * recently modified runs/<name> holding a store. NULL with err if none. */
char *tp__rundir_resolve(const char *dir, tp_error_t *err);
/* A plan of the experiment in dir (plans.c): doc (a JSON object) written to
 * DIR/plan.json (DIR made when missing) and, when DIR holds a store and no run,
 * kept in the store under the directory's lock. TP_PLAN_KEPT, TP_PLAN_WAITS
 * (no store yet: the run takes it when it starts), TP_PLAN_ASK_THE_RUN (a run
 * holds DIR: a `plan` request makes it take it), or a negative errno with err. */
enum { TP_PLAN_KEPT = 0, TP_PLAN_WAITS = 1, TP_PLAN_ASK_THE_RUN = 2 };
int tp__plans_put(const char *dir, const char *doc, tp_error_t *err);
/* pid of the orchestrator running in dir, 0 if none (the lock is free). */
int tp__rundir_owner(const char *dir);
/* What the store knows of a trial, written into its folder when an attempt
 * starts: DIR/trials/NNNNNN/trial.json = {"trial", "attempt", "experiment"
 * (the experiment's identity, meta "experiment_id")}, the folder created
 * with dir_mode when missing. 0 or -errno with err. */
int tp__rundir_mark(const char *dir, int64_t trial, int attempt, const char *experiment,
                    int dir_mode, tp_error_t *err);
struct tp_store;
/* Whether the store of DIR knows every trial folder and attempt there: a
 * folder of a trial the store has no record of, more attempts than it
 * recorded (by trial.json and the attempts' logs), or a trial.json of
 * another experiment mean the store lost changes (its -wal deleted after a
 * checkpoint, an older copy put back). 0, or -EBADMSG with what is missing
 * and how to recover (exp_path names the experiment file, for --fork).
 * Changes nothing. O(trial folders). */
int tp__rundir_check_store(const char *dir, struct tp_store *s, const char *experiment,
                           const char *exp_path, tp_error_t *err);

/* dryrun.c: the experiment's scheduler (sampler + scheduler), as the run
 * builds it; NULL with err. The caller frees it (tp__scheduler_free). */
struct tp_experiment;
struct tp_scheduler;
struct tp_scheduler *tp__run_scheduler_new(const struct tp_experiment *x, tp_error_t *err);

#endif
