/* place internals shared by the placers (placer_fit.c, placer_optimal.c). */
#ifndef TP_PLACE_INTERNAL_H
#define TP_PLACE_INTERNAL_H

#include "place/place.h"

/* Slack for compute comparisons: a GPU at 1.0 takes a trial of 0.3 after
 * 0.7 even when the sum rounds to 1.0000000000000002. */
#define TP_PLACE_EPS 1e-9

/* Memory a trial may still take on GPU g of node n (total - reserve - used,
 * 0 when negative). O(1). */
uint64_t tp__place_mem_free(const tp_cluster_t *c, const tp_usage_t *u, size_t n, size_t g);
/* Compute share still free for one more trial on GPU g of node n: its
 * capacity with that trial counted (tp__place_capacity) less what is used.
 * Several more may take more than this in all where the node is served. */
double tp__place_comp_free(const tp_cluster_t *c, const tp_usage_t *u, size_t n, size_t g);
/* Whether GPU g of node n may take one more trial by health, sharing and
 * max_per_gpu (memory, compute and CPUs aside). */
int tp__place_gpu_open(const tp_cluster_t *c, const tp_usage_t *u, size_t n, size_t g);
/* Trial indexes in placement order: 0..n-1, or by expected duration,
 * longest first, stable (decreasing = 1). Caller frees. O(n log n). */
size_t *tp__place_order(const tp_demand_t *trials, size_t n, int decreasing);

/* Trials trials[order[j]] for j in [0, m), in that order, each to the
 * fitting GPU with the least (best_fit) or most free compute, through
 * placer_fit's segment tree; out[order[j]] filled, u updated. O(m log G)
 * for single-GPU trials. */
void tp__place_greedy_order(const tp_cluster_t *c, tp_usage_t *u, const tp_demand_t *trials,
                            const size_t *order, size_t m, int best_fit, tp_assign_t *out);

/* What a GLPK search has done, kept by its callback (optimal_patterns.c). */
typedef struct tp__glpk_watch {
    uint64_t node_limit; /* 0: none */
    uint64_t nodes;      /* subproblems created so far */
    int node_limit_hit;  /* the callback stopped the search */
    int has_bound;       /* bound is set */
    double bound;        /* best bound of the open subproblems */
} tp__glpk_watch_t;
/* Call from a GLPK callback: counts subproblems, keeps the bound, stops at
 * the node limit. The tree is a glp_tree. */
void tp__glpk_watch(void *tree, tp__glpk_watch_t *w);
/* GLPK's tm_lim (ms) for effort: its time limit, none with only a node
 * limit, 10 s with neither. */
int tp__glpk_time_limit_ms(const tp_place_effort_t *e);
/* The pattern model (optimal_patterns.c) on a round of single-GPU trials:
 * 1 with out, u and *info filled; 0 (nothing changed) when the round has
 * other trials or too many patterns. */
int tp__place_patterns(const tp_cluster_t *c, tp_usage_t *u, const tp_demand_t *trials, size_t n,
                       tp_assign_t *out, const tp_place_effort_t *effort,
                       tp_place_mip_info_t *info);

/* vpack's plan in a run's rounds (plan.c): 1 if it decided the round (out
 * written, u updated), 0 if the round is not one it plans (the caller goes
 * on). */
int tp__place_plan_round(const tp_cluster_t *c, tp_usage_t *u, const tp_demand_t *trials, size_t n,
                         tp_assign_t *out, const tp_place_effort_t *e);

extern const tp_placer_ops_t tp__placer_one_per_gpu, tp__placer_ff, tp__placer_ffd, tp__placer_bf,
    tp__placer_bfd, tp__placer_wf, tp__placer_wfd, tp__placer_optimal, tp__placer_vpack;

#endif
