/* cli: `tunepack <verb>`, one thin file per verb. */
#ifndef TP_CLI_H
#define TP_CLI_H

#include <jansson.h>

#include "run/run.h"
#include "space/space.h"
#include "store/store.h"

typedef struct tp_cmd {
    const char *name;                   /* the verb */
    const char *summary;                /* one line for `tunepack --help` */
    const char *usage;                  /* full --help text, with an example */
    int (*main)(int argc, char **argv); /* argv[0] is the verb; returns an exit code */
    int hidden;                         /* not listed (internal verbs) */
} tp_cmd_t;

extern const tp_cmd_t tp__cmd_run, tp__cmd_status, tp__cmd_trials, tp__cmd_best, tp__cmd_export,
    tp__cmd_stop, tp__cmd_agent, tp__cmd_gpus, tp__cmd_place;
extern const tp_cmd_t tp__cmd_simulate, tp__cmd_plan, tp__cmd_nodes, tp__cmd_dashboard,
    tp__cmd_resize;

/* One option of a verb: a switch (`set` non-NULL) or an option taking a
 * value (`value` non-NULL), as `--name VALUE` or `--name=VALUE`. These
 * tables are the one source of a verb's options: `tunepack VERB
 * --list-options` prints them, and the man pages, the completion and
 * --help are checked against them (tests/e2e/test_options.py). */
typedef struct tp_cli_opt {
    const char *name;           /* "--json" */
    int *set;                   /* set to 1 when given */
    const char **value;         /* set to the value when given */
    const char *const *choices; /* NULL-terminated values it takes (others are refused unless
                                   TP_CLI_OPEN), completed by the shell; NULL: any value */
    int flags;                  /* TP_CLI_OPEN, TP_CLI_HIDDEN */
} tp_cli_opt_t;

enum {
    TP_CLI_OPEN = 1,   /* choices are the usual values, others pass too (a parameter's name) */
    TP_CLI_HIDDEN = 2, /* internal (between tunepack's own processes): in no --help, man page
                          or completion */
};

enum { TP_CLI_PARSED = -1 }; /* tp__cli_parse: go on */

/* Parse argv[1..] against opts and at most one positional argument (stored
 * in *positional, may stay NULL). Returns TP_CLI_PARSED, or an exit code to
 * return at once: TP_EXIT_OK after printing --help (or, for the hidden
 * --list-options, the verb and its options as one JSON line: {"verb",
 * "hidden", "options": [{"name", "takes": "switch"|"value", "choices",
 * "open", "hidden"}]}), TP_EXIT_USAGE after printing what is wrong (an
 * unknown option, a missing value, a value not among closed choices). */
int tp__cli_parse(const tp_cmd_t *cmd, int argc, char **argv, const tp_cli_opt_t *opts,
                  size_t nopts, const char **positional);
/* tp__cli_parse with up to max positional arguments, into positionals[0..*n). */
int tp__cli_parse_many(const tp_cmd_t *cmd, int argc, char **argv, const tp_cli_opt_t *opts,
                       size_t nopts, const char **positionals, size_t max, size_t *n);
/* The placement policies' names into out[0..n-1), NULL-terminated: the
 * choices of --policy. Returns how many. */
size_t tp__cli_policy_names(const char **out, size_t n);
#define TP_CLI_MAX_POLICIES 32
/* A count option's value (`--top 3`) into *out: a whole number from 1 to
 * TP_CLI_COUNT_MAX. TP_CLI_PARSED, or TP_EXIT_USAGE after saying what is wrong. */
#define TP_CLI_COUNT_MAX 1000000
int tp__cli_count(const tp_cmd_t *cmd, const char *opt, const char *text, long *out);
/* A duration option's value (`--deadline 30m`) into *out, in seconds: above
 * zero. TP_CLI_PARSED, or TP_EXIT_USAGE after saying what is wrong. */
int tp__cli_duration(const tp_cmd_t *cmd, const char *opt, const char *text, double *out);
/* --node-failures R, --queue-wait TIME, --trial-startup TIME: the cluster a
 * run meets at scale (docs/simulator.md, "Cluster scale"), the same options
 * with the same meaning for simulate and plan, of a workload or an
 * experiment alike. A verb's option table takes the rows of
 * TP_CLI_SCALE_OPTS, its --help the lines of TP_CLI_SCALE_HELP, and
 * tp__cli_scale parses what was given. */
typedef struct tp_cli_scale {
    const char *failures_a, *queue_a, *startup_a; /* the options' text (NULL: not given) */
    double node_failures;                         /* failures per node-day (0: none) */
    double queue_wait_s;                          /* mean queue wait of a node (0: none) */
    double trial_startup_s;                       /* each attempt's start-up on its node */
} tp_cli_scale_t;
#define TP_CLI_SCALE_OPTS(sc)                                                                      \
    {"--node-failures", NULL, &(sc).failures_a}, {"--queue-wait", NULL, &(sc).queue_a}, {          \
        "--trial-startup", NULL, &(sc).startup_a                                                   \
    }
#define TP_CLI_SCALE_HELP                                                                          \
    "  --node-failures R  each node fails R times per node-day (\"0.01\" or \"1%\"):\n"            \
    "                     its trials are lost, placed again once the node is taken\n"              \
    "                     for lost (10 s), from their start (an experiment's: its\n"               \
    "                     job's); the node is replaced\n"                                          \
    "  --queue-wait TIME  nodes join after a queue wait, exponential of this mean (a\n"            \
    "                     self-allocated Slurm cluster): all at the start, and each\n"             \
    "                     replacement\n"                                                           \
    "  --trial-startup T  each attempt's start-up on its node (default 0)\n"
/* The values of those given in sc. TP_CLI_PARSED, or TP_EXIT_USAGE after
 * saying what is wrong. */
int tp__cli_scale(const tp_cmd_t *cmd, tp_cli_scale_t *sc);
/* Open the experiment named by dir (NULL: the latest under ./runs) read-only;
 * prints the error and returns NULL on failure. *dir_out is malloc'd. */
tp_store_t *tp__cli_open(const char *dir, char **dir_out);
/* Leave request req for the orchestrator running the experiment in dir_arg
 * (NULL: the latest under ./runs), wait (30 s at most) for its answer and
 * print it. An exit code; what: the change, for "not running" ("nodes
 * change"). */
int tp__cli_request(const char *dir_arg, const json_t *req, const char *what);
/* Leave request req for the orchestrator running in dir and wait (30 s at
 * most) for its answer, into answer: 0 it did it, 1 it refused, or a
 * negative errno (no answer; answer says why). Prints nothing. */
int tp__cli_ask(const char *dir, const json_t *req, char *answer, size_t n);
/* Print "tunepack VERB: MSG" plus a pointer to --help; returns TP_EXIT_USAGE. */
int tp__cli_usage_error(const tp_cmd_t *cmd, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
/* A trial's state as the read-only verbs show it: a "running" trial of a run
 * no orchestrator owns any more (owned: tp__rundir_owner() != 0) is
 * "interrupted" (it runs again on resume). `status` and `trials` share it. */
const char *tp__cli_state(const tp_trial_row_t *row, int owned);
/* The `top` best trials of the store, best first, as an array of trial JSON
 * (tp__cli_trial_json): the ranking of `best`, `best --top N` and `status`,
 * by tp__rank_beats (run.h: completed, stopped early or paused trials; the
 * larger budget first, then the better value by the metric's mode). A
 * ranking by several objectives extends this one function. O(trials x top). */
json_t *tp__cli_ranking(tp_store_t *s, const char *dir, int maximize, size_t top);
/* As tp__cli_ranking; under `constraints:` only feasible trials rank (tp__rank_feasible_of:
 * the values journaled with the job result it ranks by, else its last report), and
 * *infeasible (may be NULL) gets how many would rank but are infeasible. */
json_t *tp__cli_ranking_feasible(tp_store_t *s, const char *dir, int maximize, size_t top,
                                 size_t *infeasible);
/* Under constraints: "3 infeasible trials left out (...)" on stdout, for best and status. */
void tp__cli_infeasible_line(size_t infeasible);
/* "trial 7", "trial 7, paused, rung 1, budget 3": a ranked trial (its JSON)
 * in words, as `best` and `status` say it. */
void tp__cli_ranked_text(const json_t *t, char *out, size_t n);
/* A trial as JSON: id, state, params, metrics, value, attempts, where it ran,
 * its running time, its stderr's tail, its logs' folder under dir, ... (for
 * export, trials --json, status --json and best). Caller owns. */
json_t *tp__cli_trial_json(const tp_trial_row_t *row, const char *dir);
/* Each trial of `trials` (JSON objects with "id") gets promotions: its jobs
 * after the first, from the journaled decisions (a promotion starts an
 * attempt too, but is no failure, retry or interruption). O(decisions +
 * trials). */
void tp__cli_add_promotions(tp_store_t *s, json_t *trials);
/* Under `constraints:`, each trial of `trials` (JSON objects with "state"
 * and "metrics") gets feasible and constraints (tp__constraint_standing:
 * each constrained metric's value in the last report and its violation).
 * Returns 1 when it added them, 0 when the experiment has no constraint.
 * O(trials). */
int tp__cli_add_feasibility(tp_store_t *s, json_t *trials);
/* lineage.c: under scheduler pbt (the store holds `exploit` decisions),
 * each trial of `trials` (JSON objects with "id") gets segment (0: the
 * configuration it was created with), parent and parent_step (the trial and
 * step its latest segment was copied from; null for segment 0) and lineage
 * (each exploit: segment, parent, parent_step, params). Returns 1 when it
 * added them, 0 when the experiment has no exploit. O(decisions + trials). */
int tp__cli_add_lineage(tp_store_t *s, json_t *trials);
/* best_front.c: `best` for several objectives (objectives: the store's meta
 * [{"name", "mode"}]): prints the Pareto front of the finished trials, one
 * line per trial, or with as_json one JSON list [{"trial", "values",
 * "params", "metrics"}]. Returns TP_EXIT_OK or TP_EXIT_NO_TRIAL. */
int tp__cli_best_front(tp_store_t *s, const json_t *objectives, int as_json, const char *dir);
/* The Pareto front of the finished trials as that JSON list (caller owns);
 * *nfinished (may be NULL) gets how many finished trials have every
 * objective. Shared by `best` and `status`; the front is tp__pareto_front's,
 * the dashboard's too. O(n log n + n f m) for a front of f trials. */
json_t *tp__cli_pareto_front(tp_store_t *s, const json_t *objectives, const char *dir,
                             size_t *nfinished);
/* As tp__cli_pareto_front, of the feasible trials only under `constraints:`; *infeasible
 * (may be NULL) gets how many finished trials with every objective were infeasible. */
json_t *tp__cli_pareto_front_feasible(tp_store_t *s, const json_t *objectives, const char *dir,
                                      size_t *nfinished, size_t *infeasible);
/* That list in words, one point a line: indent "trial 7: err=0.1 cost=3.2"
 * (with_params: then its parameters), the first `limit` points and a
 * "... N more" line. */
void tp__cli_front_print(const json_t *front, size_t limit, const char *indent, int with_params);

/* plan_experiment.c: `tunepack plan FILE` / `simulate FILE --gpus N` of an
 * experiment file (docs/simulator.md, "An experiment of your own"). */
typedef struct tp_xplan_opts {
    double deadline_s;    /* plan: required; simulate: 0 = none */
    int gpus;             /* simulate: this many GPUs; 0: plan the fewest */
    const char *gpu_type; /* a name for the answer, or NULL */
    const char *dir;      /* the run whose times are used; NULL: runs/<name> if it exists */
    int seeds;            /* simulated searches (0: 10) */
    double unit_s;        /* seconds per budget unit when nothing is measured (0: none) */
    size_t max_gpus;      /* the most GPUs tried (0: trials x GPUs per trial) */
    size_t from;          /* --check: plan from the first this many trials (0: a quarter) */
    tp_cli_scale_t scale; /* node failures, queue waits, a trial's start-up on its node */
    int gpus_per_node;    /* the nodes' size with failures or queue waits */
    int json;
} tp_xplan_opts_t;
/* 1 when path is an experiment file (it has `command:`), 0 otherwise. */
int tp__cli_is_experiment(const char *path);
/* An exit code, after the answer (or an error) is printed. */
int tp__cli_plan_experiment(const char *file, const tp_xplan_opts_t *o);
/* plan_kept.c: s seconds as the plan prints them ("12.5 s", "3.2 min", "2.50 h"). */
void tp__cli_plan_time(char *buf, size_t n, double s);
/* Keep the plan text (a JSON object: docs/simulator.md) for the run in dir
 * (tp__plans_put, or the running run asked); what became of it, in words,
 * into kept ("" when it was not kept: a logged warning says why). */
void tp__cli_plan_keep(const char *dir, const char *text, char *kept, size_t n);
/* What a run did, for `plan --check`. */
typedef struct tp_plan_actual {
    double makespan_s; /* first start to last end (0: none) */
    size_t finished;   /* trials that ran and ended */
    double best;       /* NaN: none */
    int slots;         /* GPUs (or CPU slots) the run had: concurrency x GPUs per trial */
} tp_plan_actual_t;
/* `plan --check DIR` against the plan kept in its store (plan, made at
 * `at`), printed as text or one JSON object. */
void tp__cli_plan_check_kept(const char *dir, const char *name, const char *metric,
                             const json_t *plan, double at, const tp_plan_actual_t *a, int as_json);
/* `plan --check DIR`: the plan from the run's first trials against what happened. */
int tp__cli_plan_check(const char *dir, const tp_xplan_opts_t *o);

#endif
