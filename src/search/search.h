/* search: searchers behind one ops struct. Each is a pure function of the
 * state handed to it: no I/O, no clock reads (time is an argument). */
#ifndef TP_SEARCH_H
#define TP_SEARCH_H

#include <jansson.h>
#include <stdint.h>

#include "search/constraint.h"
#include "space/space.h"
#include "util/util.h"

typedef struct tp_search_cfg {
    const char *algorithm;  /* "grid" | "random" | "tpe" | "nsga2" | "gp" | "cmaes" | "bohb" |
                               "dehb" */
    uint64_t trials;        /* random, tpe: trials (0: unbounded); grid: repeats of the full grid
                               (0 or 1: one pass) */
    uint64_t seed;          /* base seed */
    size_t nobj;            /* objectives: 0 or 1 for one, more for a multi-objective search */
    unsigned maximize_mask; /* several objectives: bit j set when objective j is maximized */
    const json_t *enqueue;  /* configurations for the first trials (objects, maybe partial),
                               borrowed; NULL: none (see tp__searcher_ask) */
    size_t startup;         /* tpe: told trials before the model (0: Optuna's 10); bohb sets it
                               for the TPE it fits per budget */
    double budget_min;      /* the scheduler's budget (0: none), set by tp__scheduler_new: */
    double budget_max;      /* dehb sizes its subpopulation of each budget b as max / b, */
    double budget_eta;      /* and weighs each budget as a Hyperband iteration does */
    const tp_constraint_t *constraints; /* `constraints:` bounds on reported metrics, borrowed
                                           (outlives the searcher); NULL: none */
    size_t nconstraints;                /* how many (<= TP_MAX_CONSTRAINTS) */
} tp_search_cfg_t;

#define TP_MAX_OBJECTIVES 8 /* objectives a search may have */

typedef struct tp_searcher tp_searcher_t;

struct tp_searcher_ops {
    const char *name;
    /* Set up from the space and cfg; 0 or -errno with err filled. */
    int (*init)(tp_searcher_t *s, tp_error_t *err);
    /* Propose the configuration of trial number index (0-based, increasing).
     * Returns 1 and sets *out (caller owns) when there is one, 0 when the
     * search is exhausted, -EAGAIN when it must wait for results. */
    int (*ask)(tp_searcher_t *s, uint64_t index, double now, json_t **out);
    /* As ask, for a trial whose first job runs at budget (the scheduler's rung budget it
     * starts at: asha's lowest, a hyperband bracket's first; 0: none): samplers that model
     * each budget apart (dehb) make it for that budget. NULL: ask() (see tp__searcher_ask). */
    int (*ask_budget)(tp_searcher_t *s, uint64_t index, double budget, double now, json_t **out);
    /* A trial's outcome: value is the objective (NaN when it failed). */
    void (*tell)(tp_searcher_t *s, uint64_t index, const json_t *config, double value, double now);
    /* Several objectives: values[0..cfg.nobj) as reported (NaN in any: failed). NULL for a
     * searcher that optimizes one objective only; tp__searcher_new refuses it then. */
    void (*tell_values)(tp_searcher_t *s, uint64_t index, const json_t *config,
                        const double *values, double now);
    /* A result at a budget (the scheduler's rung budget): samplers that model each budget
     * apart (bohb, dehb) keep it with that budget. NULL: tell() is used (see tp__searcher_tell). */
    void (*tell_budget)(tp_searcher_t *s, uint64_t index, const json_t *config, double value,
                        double budget, double now);
    /* A prior observation (warm start: a completed trial of an earlier experiment), values[0..
     * nobj) as reported; told before the first ask, never asked for. NULL for a searcher that
     * does not learn (grid, random). */
    void (*tell_prior)(tp_searcher_t *s, const json_t *config, const double *values);
    /* Upper bound on the number of trials, 0 when unbounded. */
    uint64_t (*total)(const tp_searcher_t *s);
    void (*destroy)(tp_searcher_t *s);
};

struct tp_searcher {
    const struct tp_searcher_ops *ops; /* chosen by name */
    const tp_space_t *space;           /* borrowed */
    tp_search_cfg_t cfg;               /* copy; algorithm points at a static name */
    int maximize;                      /* 1 if the metric is maximized */
    void *impl;                        /* searcher's own state */
    double *cvals;                     /* constraints: each told index's values (cfg.nconstraints
                                          per index, NaN: not reported), owned; see
                                          tp__searcher_constrain */
    size_t ncvals;                     /* indices cvals holds */
};

/* Names of the known searchers, NULL-terminated (for did-you-mean). */
extern const char *const tp__searcher_names[];
/* Create a searcher by cfg->algorithm; NULL with err filled if unknown.
 * The space must outlive the searcher. */
tp_searcher_t *tp__searcher_new(const tp_space_t *space, const tp_search_cfg_t *cfg, int maximize,
                                tp_error_t *err);
void tp__searcher_free(tp_searcher_t *s);
/* Trial index's configuration, for a trial whose first job runs at budget (0: none; the
 * schedulers with rungs pass the rung budget the new trial starts at): the sampler's
 * ask_budget when it has one, else its ask, except that for the first trials (index < size
 * of cfg.enqueue) the enqueued values replace the proposed ones (parameters left out keep
 * the sampler's values) and the parameters that become inactive are removed. Every caller
 * that asks a sampler goes through here; the budget is a pure function of the scheduler's
 * journaled decisions, so a replay asks with the same one. Returns as ops->ask. */
int tp__searcher_ask(tp_searcher_t *s, uint64_t index, double budget, double now, json_t **out);
/* A job's result at a budget (0: none) for a sampler: ops->tell_budget when it has
 * one, else ops->tell. Every scheduler with rungs tells through here. */
void tp__searcher_tell(tp_searcher_t *s, uint64_t index, const json_t *config, double value,
                       double budget, double now);
/* Constraints: the values of cfg.constraints' metrics that trial index's result reported
 * (values[0..cfg.nconstraints), NaN where one is missing), given before that result is told
 * (the run calls it through tp__scheduler_constrain, live and on replay). The sampler keeps
 * the last values of each index; a sampler that heeds constraints reads them when told, with
 * tp__searcher_violation. O(nconstraints), amortized. */
void tp__searcher_constrain(tp_searcher_t *s, uint64_t index, const double *values);
/* Index's total violation (tp__constraint_violation): 0 when feasible or when the search has
 * no constraints, INFINITY when values were never given for it. O(nconstraints). */
double tp__searcher_violation(const tp_searcher_t *s, uint64_t index);
/* Index's constraint values (cfg.nconstraints of them), or NULL when never given. */
const double *tp__searcher_constraint_values(const tp_searcher_t *s, uint64_t index);
/* The numbers of a journaled JSON array (a result's objectives or constraint values) into
 * out[0..n): NaN for null, a non-number or past its end (text NULL: all NaN). O(text). */
void tp__search_json_numbers(const char *text, double *out, size_t n);
/* The number of objectives of cfg (nobj, at least 1). */
size_t tp__search_nobj(const tp_search_cfg_t *cfg);
/* values as losses: maximized objectives negated, so smaller is better in
 * each. O(nobj). */
void tp__search_losses(const tp_search_cfg_t *cfg, const double *values, double *loss);

/* The searchers' ops, one per searcher_<name>.c, listed in search.c. */
extern const struct tp_searcher_ops tp__searcher_grid_ops;
extern const struct tp_searcher_ops tp__searcher_random_ops;
extern const struct tp_searcher_ops tp__searcher_tpe_ops;
extern const struct tp_searcher_ops tp__searcher_nsga2_ops;
extern const struct tp_searcher_ops tp__searcher_gp_ops;
extern const struct tp_searcher_ops tp__searcher_cmaes_ops;
extern const struct tp_searcher_ops tp__searcher_bohb_ops;
extern const struct tp_searcher_ops tp__searcher_dehb_ops;

#endif
