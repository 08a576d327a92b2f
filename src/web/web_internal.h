/* web internals: the read-only queries (query.c) and the charts drawn from
 * them (charts.c), called by the HTTP routes (server.c). */
#ifndef TP_WEB_INTERNAL_H
#define TP_WEB_INTERNAL_H

#include <jansson.h>
#include <stdint.h>

#include "chart/chart.h"
#include "search/constraint.h"
#include "store/store.h"
#include "util/util.h"
#include "web/web.h"

/* Largest trials page a request may ask for, and the default. */
enum { TP_WEB_PAGE_MAX = 500, TP_WEB_PAGE_DEFAULT = 100 };

/* A read-only statement on the store's connection, or NULL (logged). */
struct sqlite3_stmt;
struct sqlite3_stmt *tp__web_prepare(tp_store_t *s, const char *sql);

/* One experiment's summary: name, state, metric, counts per state, the
 * best trial by rank (NULL: the best completed or stopped value) and the
 * objectives ([{name, mode}]; several: the page offers the Pareto front). */
json_t *tp__web_summary(tp_store_t *s, const char *dir, size_t id, tp_web_rank_fn rank);

/* The latest plan kept in the store (plan.c) beside the run, NULL when none:
 * {at, gpus, gpu_type, deadline_s, trials, trials_finished, start, end:
 * {median, lo, hi} (the run's start + the plan's makespan), estimate: {end,
 * how: "pace" (start + elapsed x trials / trials ended, at now), "ended" (the
 * run's end) or "none" (no trial ended yet), ended, of, elapsed_s}}.
 * summary: tp__web_summary's (its created_at, counts and state). */
json_t *tp__web_plan(tp_store_t *s, const json_t *summary, double now);

/* A filter on one column of the trials table: lo <= value <= hi (a
 * number's range), and/or the value one of a set (a brush on a choice's
 * axis: in.p:NAME=adam&in.p:NAME=sgd). */
typedef struct tp_web_range {
    const char *key; /* a column: id, attempts, ..., p:PARAMETER or m:METRIC */
    double lo, hi;   /* NAN: no bound on that side */
    const char *in;  /* NULL, or a JSON array of the choices kept (p:PARAMETER only): a
                        string matches a choice's text, anything else its JSON */
} tp_web_range_t;
enum { TP_WEB_RANGES_MAX = 8 };

/* The trials table's view; its state, text and ranges are also the filter
 * every chart of the trials takes (the brushed set: importance, history,
 * curves, slice and contour), which ignores the sort and the page. */
typedef struct tp_web_trials_q {
    const char *sort;  /* a column (see tp_web_range_t); NULL: id */
    int desc;          /* descending */
    const char *state; /* only this state, or NULL */
    const char *text;  /* only rows whose params, decision or error contain it, or NULL */
    /* under constraints, only trials "yes" feasible, "no" infeasible or "unjudged" (no job
     * ended with its result yet), or NULL */
    const char *feasible;
    tp_web_range_t ranges[TP_WEB_RANGES_MAX]; /* only rows within each (all of them) */
    size_t nranges;
    long long offset, limit;
} tp_web_trials_q_t;
/* Whether f keeps fewer than every trial (a state, a text or a range). */
int tp__web_filtered(const tp_web_trials_q_t *f);
/* A statement over the trials f keeps (NULL: every trial), its binds bound:
 * sql is a format whose %1$s takes the joins after "FROM trials t" and %2$s
 * the conditions after a "WHERE" (each begins with " AND"; ?1, ?2 and ?6 on
 * are f's, ?3 to ?5 the statement's own). 0 with *st set (NULL when SQLite
 * refused it, logged), or -EINVAL with err naming the columns there are
 * when f names one that is none. O(ranges) look-ups of a name. */
int tp__web_prepare_filtered(tp_store_t *s, const char *sql, const tp_web_trials_q_t *f,
                             struct sqlite3_stmt **st, tp_error_t *err);
/* A page of the trials table, sorted and filtered by SQLite: {total,
 * matched, offset, limit, sort, desc, rows: [...]}, each row the trial with
 * its retries, promotions, last report (metrics) and latest placement (node,
 * gpus), under constraints its standing (tp__constraint_standing). NULL with
 * err filled when a column named is none (a p:NAME or m:NAME must be one of
 * the experiment's: a trial has it, or an objective; the error lists them;
 * "feasible", the sort and the filter, only under constraints: the rule of
 * tp__constraint_feasible, run by SQLite on each trial's last report, a JSON
 * parse per trial matched). O(n log n) in the trials matched when sorted by
 * other than id, O(page) reads after that (10k trials, 1M metric rows: tens
 * of ms, see bench/dashboard.py --table). */
json_t *tp__web_trials(tp_store_t *s, const tp_web_trials_q_t *q, tp_error_t *err);
/* The trials table's columns: {params, metrics, objectives}: every
 * parameter a trial has, every number in the trials' last report lines (the
 * objectives first). O(n) JSON reads (10k trials: ~40 ms), so the page asks
 * for them apart from its rows, and seldom. */
json_t *tp__web_table_columns(tp_store_t *s);
/* A run no orchestrator runs any more, as `status` and `trials` show it:
 * "running" becomes "interrupted" in v's "state", in its "best" and
 * "counts" (a summary) and in each of its "rows" (a page of the table). */
void tp__web_not_live(json_t *v);
/* One trial: the row, its events, the scheduler's journaled decisions about
 * it (the latest 200: job, result, stop with rung, budget, value), placements, its curve
 * (downsampled to at most 300 points), its last report (metrics) and under constraints its
 * standing, as a row of the table has it; NULL if absent. */
json_t *tp__web_trial(tp_store_t *s, int64_t id);
/* The tail of a trial's stdout or stderr log from byte `from` (negative:
 * the last 16 KiB): {text, from, next, size}; NULL if stream is not one. */
json_t *tp__web_log(const char *dir, int64_t id, const char *stream, long long from);
/* Nodes, GPUs and sharing as the orchestrator last journaled them. */
json_t *tp__web_nodes(tp_store_t *s);
/* Parameter importance over the trials f keeps (NULL: all; a brush) that
 * have a value: {method, trials, brushed, min_trials, params: [{name,
 * importance, alone}]}, the most important first: importance by the forest
 * below (the shares sum to 1, or all 0), alone the one-way eta squared.
 * Fewer than TP_WEB_IMPORTANCE_MIN trials: no params, and a "note" that says
 * so (a forest on so few says nothing). NULL with err when f names a column
 * that is none. */
enum { TP_WEB_IMPORTANCE_MIN = 10 };
json_t *tp__web_importance(tp_store_t *s, const tp_web_trials_q_t *f, tp_error_t *err);
/* Each of p features' share in the importance for y over n rows (x: n x p,
 * row major; a numeric NaN is absent; a categorical feature's value is its
 * category's index): a forest of 32 regression trees, each grown (12 deep) on up to
 * 1000 rows drawn with replacement and a random half of the features at
 * each split, scored by how much worse it predicts the rows it did not see
 * (up to 1000) when one feature's values are shuffled among them. Splits
 * nest, so interactions count (x*y ranks x and y, which eta squared does
 * not). Fixed seed: the same rows, the same answer. Shares sum to 1 (all 0
 * when nothing is told). O(trees (s log s depth p + oob depth p)), s the
 * sample (10k trials: see docs/dashboard.md). */
void tp__web_forest_importance(const double *x, const unsigned char *categorical, size_t n,
                               size_t p, const double *y, double *importance);

/* The experiment's objective: its metric name and whether larger is better. */
typedef struct tp_web_metric {
    char name[128];
    int maximize;
} tp_web_metric_t;
void tp__web_metric(tp_store_t *s, tp_web_metric_t *m);

/* Several objectives (front.c): the finished trials `tunepack best` ranks
 * (completed or stopped early, every objective a finite number in the last
 * report), each objective's value, whether it is feasible (under
 * `constraints:`, as `best` rules) and on the Pareto front of the
 * feasible ones (tp__pareto_front, as `best`). */
typedef struct tp_web_front {
    size_t m; /* objectives */
    char name[TP_FRONT_MAX][128];
    int maximize[TP_FRONT_MAX];
    size_t n;                           /* trials */
    long long *id;                      /* n */
    double *v;                          /* n x m, as reported */
    unsigned char *on_front, *feasible; /* n */
    size_t nfront, ninfeasible;
} tp_web_front_t;
/* 1 with f filled (free it), or 0 when the experiment has one objective.
 * O(n log n + n f m) after reading the n trials' last reports (10k trials:
 * see docs/dashboard.md). */
int tp__web_front_load(tp_store_t *s, tp_web_front_t *f);
void tp__web_front_free(tp_web_front_t *f);
/* {objectives: [{name, mode}], finished, infeasible, on_front, front:
 * [{trial, values: {NAME: v}}]} (the points as `best --json` lists them),
 * by the first objective, best first, the first `limit` (0: all); NULL with
 * one objective. */
json_t *tp__web_front(tp_store_t *s, size_t limit);
/* The store's `constraints:` (meta "constraints", search/constraint.h): the
 * bounds a trial's last report must meet. */
typedef struct tp_web_bounds {
    tp_constraint_t c[TP_MAX_CONSTRAINTS];
    size_t n;     /* 0: no constraints */
    json_t *keep; /* owns the metric names: json_decref it when done */
} tp_web_bounds_t;
void tp__web_bounds_load(tp_store_t *s, tp_web_bounds_t *b); /* front.c */
/* Under `constraints:` (front.c): {"constraints": [{metric, min, max}], "finished": N,
 * "infeasible": N} over the finished trials (completed or stopped early, by their last
 * report, as `best` rules); NULL without constraints. O(trials). */
json_t *tp__web_feasibility(tp_store_t *s);
/* The front's chart (chart.h: tp__chart_front), each point a link to
 * href_prefix and its id; 0 (nothing drawn) with one objective. */
int tp__web_svg_front(tp_store_t *s, const char *href_prefix, tp_buf_t *out);

/* Charts (SVG documents appended to out). Those of the trials take a
 * filter f (NULL: every trial; else the brushed set, tp_web_trials_q_t) and
 * return 0, or -EINVAL with err when f names a column that is none. */
int tp__web_svg_history(tp_store_t *s, const tp_web_trials_q_t *f, tp_buf_t *out, tp_error_t *err);
/* Learning curves of the given trials (n > 0; f not applied), or of the
 * best ten and the latest running ones that f keeps (n == 0), with the
 * scheduler's rung budgets marked. */
int tp__web_svg_curves(tp_store_t *s, const int64_t *trials, size_t n, const tp_web_trials_q_t *f,
                       tp_buf_t *out, tp_error_t *err);
/* Every trial with a value (a brush is drawn by the page, over them all). */
void tp__web_svg_parcoords(tp_store_t *s, tp_buf_t *out);
int tp__web_svg_importance(tp_store_t *s, const tp_web_trials_q_t *f, tp_buf_t *out,
                           tp_error_t *err);
/* The slice plot: the objective of every trial with a value against one
 * parameter (a dot each; log10 over a positive range of two decades, a
 * choice by its index, named on the axis). The contour plot: the mean
 * objective over a grid of two parameters (12 equal bins of a number, a cell
 * per choice), empty cells blank, each cell's mean and count its tooltip.
 * Both over the trials f keeps. -EINVAL with err listing the parameters
 * when one named is none. O(n). */
int tp__web_svg_slice(tp_store_t *s, const char *param, const tp_web_trials_q_t *f, tp_buf_t *out,
                      tp_error_t *err);
int tp__web_svg_contour(tp_store_t *s, const char *px, const char *py, const tp_web_trials_q_t *f,
                        tp_buf_t *out, tp_error_t *err);
/* The Gantt chart of GPUs over time from the placements journal, with the
 * memory and compute in use against each GPU's capacity. */
void tp__web_svg_packing(tp_store_t *s, double now, tp_buf_t *out);

/* Scheduler pbt's lineage (lineage.c): {metric, mode, max_step, lo, hi,
 * trials: [{id, state, segments: [{segment, from, points: [[step, value]]}]}],
 * exploits: [{trial, segment, donor, donor_step, changed: {NAME: [old, new]},
 * old, new}]}, each trial's reports of `metric` (NULL: the objective; a
 * segment's points thinned to 300) split at its exploits. NULL with err
 * listing the metrics when no trial reports it. O(trials + reports read). */
json_t *tp__web_lineage(tp_store_t *s, const char *metric, tp_error_t *err);
/* Its chart (chart.h: tp__chart_lanes); -EINVAL with err as above. */
int tp__web_svg_lineage(tp_store_t *s, const char *metric, tp_buf_t *out, tp_error_t *err);

#endif
