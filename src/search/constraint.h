/* constraint: black-box constraints on reported metrics (`constraints:
 * [{metric: mem_gb, max: 8}]`), and the one rule for whether a trial is
 * feasible, shared by the samplers, the run, `best`, `status` and the
 * dashboard. Pure: no I/O, no clock. */
#ifndef TP_SEARCH_CONSTRAINT_H
#define TP_SEARCH_CONSTRAINT_H

#include <jansson.h>
#include <stddef.h>

#define TP_MAX_CONSTRAINTS 8 /* constraints an experiment may have */

typedef struct tp_constraint {
    const char *metric; /* the reported metric it bounds (owner: whoever filled it) */
    double min;         /* lowest feasible value, -INFINITY: none */
    double max;         /* highest feasible value, INFINITY: none */
} tp_constraint_t;

/* Each constraint's value in a report line (a JSON object; NULL: none) into
 * out[0..n): NaN where the metric is missing or no finite number. O(n). */
void tp__constraint_values(const tp_constraint_t *c, size_t n, const json_t *report, double *out);
/* The total violation of values[0..n): the sum over the constraints of how
 * far each value lies outside its bounds, in the metric's units; 0 when every
 * bound holds (feasible). A value never reported (NaN) makes it INFINITY:
 * infeasible, ranked after every trial that reported its values (as Optuna
 * treats a trial without constraint values). O(n). */
double tp__constraint_violation(const tp_constraint_t *c, size_t n, const double *values);
/* The violation of a report line given as text (NULL or bad JSON: nothing
 * reported, INFINITY when n > 0). O(line). */
double tp__constraint_violation_of(const tp_constraint_t *c, size_t n, const char *report);

/* Whether a trial is feasible, the one rule the readers judge by: -1 (not
 * judged) until a job of the trial ended with its result (state completed,
 * stopped or paused: the trials `best` ranks; report, its last report line
 * as a JSON object, NULL: none), then 1 when tp__constraint_violation of
 * that report is 0 and 0 when not (a constrained metric never reported
 * breaks its constraint). n == 0: every judged trial is feasible. O(n). */
int tp__constraint_feasible(const tp_constraint_t *c, size_t n, const char *state,
                            const json_t *report);

/* A trial's standing against the constraints, for readers (the trials
 * table, `trials --json`, `export`): NULL when n == 0, else (caller owns)
 * {"feasible": true|false|null, "constraints": [{"metric", "min"?, "max"?,
 * "value": x|null, "violation": x|null}, ...]} in the order of the
 * constraints: each value in the trial's last report (report: a JSON
 * object, NULL: none; null: not reported) and how far it lies outside its
 * bounds (0 inside; null: not reported). feasible is
 * tp__constraint_feasible's word, null while not judged (pending, running:
 * the report so far may lack a metric measured at the end; failed). O(n). */
json_t *tp__constraint_standing(const tp_constraint_t *c, size_t n, const char *state,
                                const json_t *report);

/* The constraints as JSON, [{"metric": m, "min": x, "max": y}, ...] (a bound
 * left out when absent); caller owns. */
json_t *tp__constraints_to_json(const tp_constraint_t *c, size_t n);
/* Read what tp__constraints_to_json wrote into out[0..cap): the number read,
 * 0 for NULL or text that is no such list. Metric names point into *keep,
 * which the caller frees with json_decref. */
size_t tp__constraints_from_json(const char *text, tp_constraint_t *out, size_t cap, json_t **keep);

#endif
