/* place: the cluster model (nodes, GPUs, capacities), trial demand, and the
 * placement policies. Every policy is a pure function of (pending trials,
 * cluster state, effort): no I/O, no clock reads, no globals; the
 * orchestrator, the simulator, `tunepack place` and the tests call the very
 * same code, and whoever reports how long a decision took measures it. */
#ifndef TP_PLACE_H
#define TP_PLACE_H

#include <stddef.h>
#include <stdint.h>

#include "util/util.h"

typedef struct tp_gpu {
    char name[64];       /* "gpu0" (unique within its node) */
    char type[64];       /* "a100_80g", "NVIDIA H100 80GB HBM3" */
    char uuid[96];       /* NVML UUID, "" if declared */
    int index;           /* device index on its node (CUDA_VISIBLE_DEVICES), -1 if unknown */
    uint64_t memory_mib; /* total memory */
    double speed;        /* relative speed, 1.0 = reference GPU */
    int healthy;         /* 0: no new trials on it */
} tp_gpu_t;

typedef struct tp_node {
    char name[64];  /* host name */
    int cpus;       /* CPU cores for trials */
    tp_gpu_t *gpus; /* owned */
    size_t ngpus;
    int served; /* 1: its GPUs are shared under MPS with no thread limit, so a GPU
                   holding k trials serves C_k of busy share (tp__place_capacity);
                   0: time-sliced or one trial each, capacity 1 */
} tp_node_t;

/* Limits that apply to every GPU. */
typedef struct tp_place_limits {
    uint64_t reserve_mib; /* memory kept free on each GPU (default 512) */
    double oversubscribe; /* compute capacity per GPU = 1.0 + oversubscribe (default 0) */
    int max_per_gpu;      /* trials per GPU at most, 0 = no limit */
    int sharing;          /* 0: one trial per GPU whatever the policy (sharing: none) */
} tp_place_limits_t;

typedef struct tp_cluster {
    tp_node_t *nodes; /* owned */
    size_t nnodes;
    tp_place_limits_t limits;
} tp_cluster_t;

/* What is in use now; indexes follow the cluster (gpu g of node n is at
 * gpu_base[n] + g). Placement updates it. Foreign use (processes that are
 * not ours) is added to mem_used and compute_used by the caller. */
typedef struct tp_usage {
    size_t *gpu_base;     /* per node: index of its first GPU in the arrays below */
    size_t ngpus;         /* GPUs in all */
    uint64_t *mem_used;   /* per GPU, MiB */
    double *compute_used; /* per GPU, share */
    int *count;           /* per GPU, trials */
    int *cpus_used;       /* per node */
} tp_usage_t;

/* One trial's demand. */
typedef struct tp_demand {
    int64_t id;          /* the caller's trial id */
    int gpus;            /* GPUs wanted, all on one node; 0 = CPU only */
    uint64_t memory_mib; /* per GPU */
    double compute;      /* per GPU: share of a reference GPU (speed 1.0) in (0, 1];
                            on a GPU of speed s it takes compute / s of that GPU */
    int cpus;            /* CPU cores */
    double duration_s;   /* expected duration (decreasing variants sort by it) */
} tp_demand_t;

#define TP_PLACE_MAX_GPUS 16 /* GPUs one trial may take */

/* A decision for one trial. */
typedef struct tp_assign {
    int placed;                    /* 1 if placed */
    size_t node;                   /* node index */
    size_t ngpus;                  /* = demand.gpus */
    size_t gpu[TP_PLACE_MAX_GPUS]; /* GPU indexes within the node */
} tp_assign_t;

/* A trial running now, for vpack's plan (tp_place_effort_t.running). */
typedef struct tp_place_running {
    size_t gpu;    /* global GPU index (usage order) */
    tp_demand_t d; /* what it holds (single-GPU); d.duration_s: its whole job */
    double left;   /* the share of its job still to run, in [0, 1] */
} tp_place_running_t;

/* The plan vpack keeps across a run's rounds (tp_place_effort_t.plan): its
 * last order, a rank per trial id; caller-owned, zeroed before the first
 * round (the placer grows it). */
typedef struct tp_place_plan {
    double *rank; /* by trial id: position in the last plan's order + 1; 0: none */
    size_t cap;
} tp_place_plan_t;

void tp__place_plan_free(tp_place_plan_t *p);

/* How long `optimal` may search, from its caller, and whether the round is
 * one of a run's (vpack); the other greedy policies ignore it. Give either
 * limit or both; with neither, a 10 s time limit. */
typedef struct tp_place_effort {
    double time_limit_s; /* > 0: GLPK's own time limit for its search (GLPK keeps the
                            time: the answer then depends on the machine's speed) */
    uint64_t node_limit; /* > 0: stop branch and bound once it has created this many
                            subproblems: the same answer on every machine */
    int in_run;          /* 1: the round is one of a run's (trials left out wait for a
                            later one), so vpack starts the long trials that would set the
                            makespan; 0: one round alone, the most occupancy */
    /* In a run's rounds, what vpack plans with (place/plan.c); plan NULL: no plan. */
    tp_place_plan_t *plan;             /* its order across rounds, kept by the caller */
    const tp_place_running_t *running; /* the trials running now */
    size_t nrunning;
    double mps_overhead; /* the contention model's MPS cost per co-located trial */
} tp_place_effort_t;

/* The MPS cost per co-located trial a run plans with (the simulator's default). */
#define TP_PLACE_MPS_OVERHEAD 0.03

typedef struct tp_placer_ops {
    const char *name;    /* "wfd" */
    const char *summary; /* one line for --help */
    /* Place trials[0..n) on cluster given usage (updated in place);
     * out[i] is the decision for trials[i]. effort (NULL: the default)
     * bounds `optimal`. Returns 0 or -errno (err filled). Pure. */
    int (*place)(const tp_cluster_t *c, tp_usage_t *u, const tp_demand_t *trials, size_t n,
                 tp_assign_t *out, const tp_place_effort_t *effort, tp_error_t *err);
} tp_placer_ops_t;

/* Policies by name: vpack, one-per-gpu, ff, ffd, bf, bfd, wf, wfd, optimal. */
#define TP_PLACE_DEFAULT_POLICY "vpack" /* the policy when none is named */
/* ... and with Fluid groups (`groups:`): worst fit, longest first. A group's
 * fractions share their GPUs with no thread limit, so what matters is the
 * work each GPU holds, and spreading the longest first evens it out
 * (bench/groups: the mean row 0.75 points further below plain than with
 * vpack; the worst 0.1 point less far). */
#define TP_PLACE_GROUPS_POLICY "wfd"
const tp_placer_ops_t *tp__placer_find(const char *name);
extern const tp_placer_ops_t *const tp__placers[]; /* NULL-terminated */

void tp__cluster_free(tp_cluster_t *c);
/* Usage arrays for c, all zero. Caller frees with tp__usage_free. */
int tp__usage_init(tp_usage_t *u, const tp_cluster_t *c);
void tp__usage_free(tp_usage_t *u);
/* src's figures into dst, both from tp__usage_init for c. O(G + nodes). */
void tp__usage_copy(tp_usage_t *dst, const tp_usage_t *src, const tp_cluster_t *c);
/* Whether trial d fits on GPU g of node n now (memory minus reserve,
 * compute capacity with d counted (tp__place_capacity), count limit, and
 * node CPUs). */
int tp__fits(const tp_cluster_t *c, const tp_usage_t *u, size_t node, size_t gpu,
             const tp_demand_t *d);
/* The compute share GPU g of a node serves k trials at once, k counting
 * one being added: (1 + oversubscribe) x C_k where the node is `served`
 * (fluid.h's curve measured under MPS: C_2 = 1.14, C_3 = 1.36, C_4+ = 1.44),
 * else 1 + oversubscribe. Nondecreasing in k. O(1). */
double tp__place_capacity(const tp_cluster_t *c, size_t node, int k);
/* The share of GPU g of node n that a demand of `compute` (in reference-GPU
 * units) takes: compute / speed, since a faster GPU is busy for less of the
 * time with the same work. */
double tp__place_share(const tp_cluster_t *c, size_t node, size_t gpu, double compute);
/* The GPU (global index) wf gives single-GPU demand d in u: of those it
 * fits, the most free compute in reference units, then the most free
 * memory, then the lowest index (placer_fit.c's key); SIZE_MAX if none. A
 * linear scan, O(G), for callers that place one trial at a time (plan.c,
 * the run's profilers). */
size_t tp__place_wf_gpu(const tp_cluster_t *c, const tp_usage_t *u, const tp_demand_t *d);
/* Record decision a for demand d in u (assumes it fits). */
void tp__place_commit(const tp_cluster_t *c, tp_usage_t *u, const tp_demand_t *d,
                      const tp_assign_t *a);
/* Undo a placement's record in u (tp__place_commit's inverse): what demand
 * d held by decision a is free again (a share under 1e-12 left by rounding
 * is 0). */
void tp__place_release(const tp_cluster_t *c, tp_usage_t *u, const tp_demand_t *d,
                       const tp_assign_t *a);
/* Occupancy: compute share in use summed over GPUs, each capped at 1.0,
 * divided by the number of GPUs. */
double tp__occupancy(const tp_cluster_t *c, const tp_usage_t *u);

/* A trial over k nodes (a multi-node trial): k shards of demand d, each
 * d->gpus GPUs and d->cpus cores on its own node, all or nothing. Each shard
 * goes to the unused node whose d->gpus best fitting GPUs have the most free
 * compute. Returns 1 with out[0..k) filled and usage committed, or 0 with
 * usage as it was. Pure. O(k * GPUs * d->gpus). */
int tp__place_gang(const tp_cluster_t *c, tp_usage_t *u, const tp_demand_t *d, size_t k,
                   tp_assign_t *out);

/* What `optimal` did: for reports and the benchmark (callers time it). */
typedef struct tp_place_mip_info {
    int proved_optimal; /* the solver proved its answer optimal for the whole round */
    int time_limit_hit; /* the time limit stopped the search */
    int node_limit_hit; /* the node limit stopped the search */
    int used_vpack;     /* vpack's answer was used (no solution, or vpack's was better) */
    int model_patterns; /* 1: the pattern model; 0: the assignment model */
    double objective;   /* solver's objective: new compute share placed, capped per GPU */
    double bound;       /* proved upper bound on the objective; -1 if none is known */
    size_t columns;     /* the model's variables */
    uint64_t nodes;     /* branch-and-bound subproblems created */
} tp_place_mip_info_t;

/* The occupancy `optimal` proved it cannot beat: (occupancy before the round
 * + info->bound) / GPUs, given the occupancy before; -1 when no bound is
 * known. Its gap in points is 100 * (this - the occupancy reached). */
double tp__place_mip_bound_occupancy(const tp_usage_t *u, double before,
                                     const tp_place_mip_info_t *info);
/* One line on what `optimal` proved, into buf: "proved optimal (pattern
 * model, 3299 variables, 1 subproblem)", or "stopped at its time limit:
 * occupancy 97.10%, bound 97.90%, gap 0.80 points" (bound and gap only when
 * known). occ: the occupancy reached; before: the occupancy before the round. */
void tp__place_mip_summary(const tp_place_mip_info_t *info, const tp_usage_t *u, double before,
                           double occ, char *buf, size_t size);

/* The `optimal` policy with what it did in *info (may be NULL): an exact MIP
 * through GLPK, its search bounded by effort (NULL or no limit given: 10 s).
 * A round of single-GPU trials takes the pattern model (optimal_patterns.c:
 * no symmetry between interchangeable GPUs); otherwise the assignment model
 * over single-GPU trials, then vpack for the rest. Never worse than vpack.
 * Pure with a node limit alone; a time limit is GLPK's to keep. */
int tp__place_optimal(const tp_cluster_t *c, tp_usage_t *u, const tp_demand_t *trials, size_t n,
                      tp_assign_t *out, const tp_place_effort_t *effort, tp_place_mip_info_t *info,
                      tp_error_t *err);

/* ---- JSON instances (place_json.c): `tunepack place` and tests ----------
 * {"nodes": [{"name", "cpus", "gpus": [{"name", "type", "memory_mib", "speed"}]}],
 *  "trials": [{"id", "gpus", "memory_mib", "compute", "cpus", "duration_s"}],
 *  "policy": "wfd", "limits": {"reserve_mib", "oversubscribe", "max_per_gpu"},
 *  "time_limit_s": 10, "node_limit": 1000} */
typedef struct tp_place_instance {
    tp_cluster_t cluster; /* owned */
    tp_demand_t *trials;  /* owned; trials[i].id = i (ids may be strings) */
    char **trial_ids;     /* owned; per trial, the caller's id as written */
    int *id_numeric;      /* owned; per trial, 1 if the id was a JSON integer */
    size_t ntrials;
    char policy[32];          /* "" when the file names none */
    tp_place_effort_t effort; /* for `optimal`: "time_limit_s", "node_limit"; 0 unless given */
} tp_place_instance_t;

/* Parse an instance from JSON text (len bytes); `where` names it in errors
 * ("inst.json: trials[3].compute must be a number in (0, 1], got 1.5";
 * syntax errors as "inst.json:LINE:COL: ..."). Limits default to reserve 512
 * MiB, no oversubscription, no count limit, sharing on. Returns 0 or -EINVAL;
 * on error *inst is empty. Free with tp__place_instance_free. */
int tp__place_instance_parse(const char *text, size_t len, const char *where,
                             tp_place_instance_t *inst, tp_error_t *err);
/* Read and parse the file at path (errors name the path). */
int tp__place_instance_load(const char *path, tp_place_instance_t *inst, tp_error_t *err);
void tp__place_instance_free(tp_place_instance_t *inst);
/* The decision as one JSON object on one line, malloc'd (caller frees; NULL
 * when out of memory): {"policy", "placed": [{"trial", "node", "gpus":
 * [names]}], "unplaced": [ids], "occupancy", "decision_us"}, and with mip
 * (optimal's info, else NULL) "optimal": {"proved", "stopped" (null, "time
 * limit" or "node limit"), "bound" (mip_bound: the occupancy bound, null when
 * < 0), "gap_points", "model", "variables", "subproblems"}. O(trials). */
char *tp__place_decision_json(const tp_place_instance_t *inst, const char *policy,
                              const tp_assign_t *out, double occupancy, double decision_us,
                              const tp_place_mip_info_t *mip, double mip_bound);
#endif
