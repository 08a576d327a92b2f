/* workload: the study workloads of data/workloads/sp.yaml (GPU types,
 * clusters, model profiles, search spaces) and the jobs of a space with
 * each job's modelled profile. Used by the placement benchmark, the tests
 * and the simulator. Profiles follow data/workloads/README.md, on the
 * reference GPU (speed 1.0):
 *   memory_mib(b) = mem_base_mib + mem_per_sample_mib * b   (rounded up)
 *   time_s(b)     = time_ref_s * (b_ref / b) ^ 0.5
 *   util(b)       = min(0.9, util_ref * (b / b_ref) ^ 0.3)
 *   gpu_s = util * time_s, host_s = time_s - gpu_s
 * A GPU of speed s divides gpu_s by s (host_s unchanged); that is the
 * simulator's business: demands here are on the reference GPU. */
#ifndef TP_WORKLOAD_H
#define TP_WORKLOAD_H

#include <stddef.h>
#include <stdint.h>

#include "place/place.h"
#include "util/util.h"

typedef struct tp_wl_gpu_type {
    char name[64];       /* "a100_80g" */
    uint64_t memory_mib; /* total memory */
    double speed;        /* relative to the reference GPU (A100 = 1.0) */
} tp_wl_gpu_type_t;

/* A run of identical nodes. */
typedef struct tp_wl_group {
    int nodes; /* how many */
    int gpus_per_node;
    int cpus_per_node;
    size_t gpu_type; /* index into tp_workload_t.gpu_types */
} tp_wl_group_t;

typedef struct tp_wl_cluster {
    char name[64];         /* "homog_16" */
    tp_wl_group_t *groups; /* owned; a homogeneous cluster has one */
    size_t ngroups;
} tp_wl_cluster_t;

typedef struct tp_wl_model {
    char name[64];       /* "resnet18" */
    int b_ref;           /* reference batch size */
    double mem_base_mib; /* memory at batch 0 */
    double mem_per_sample_mib;
    double time_ref_s; /* whole job alone at b_ref */
    double util_ref;   /* GPU-busy share alone at b_ref */
    int cpus;          /* dataloader cores */
    char source[64];   /* "assumed" or "measured" (required in the file) */
} tp_wl_model_t;

typedef struct tp_wl_space {
    char name[64];  /* "SP4" */
    size_t *models; /* owned; indexes into tp_workload_t.models */
    size_t nmodels;
    int *batch_sizes; /* owned */
    size_t nbatch;
    double lr_lo, lr_hi; /* loguniform range */
    int lr_count;        /* log-spaced points, both ends included */
} tp_wl_space_t;

typedef struct tp_workload {
    tp_wl_gpu_type_t *gpu_types; /* all owned */
    size_t ngpu_types;
    tp_wl_cluster_t *clusters;
    size_t nclusters;
    tp_wl_model_t *models;
    size_t nmodels;
    tp_wl_space_t *spaces;
    size_t nspaces;
} tp_workload_t;

/* One job of a space: a model at one batch size and learning rate. */
typedef struct tp_wl_job {
    const char *model; /* points into the workload: keep it alive */
    int batch;
    double lr;
    uint64_t memory_mib; /* memory_mib(b) */
    double util;         /* util(b): the compute share alone */
    double time_s;       /* time_s(b) alone on the reference GPU */
    double gpu_s;        /* GPU-busy seconds */
    double host_s;       /* host-side seconds */
    int cpus;
} tp_wl_job_t;

/* Load and validate a workload file. Errors read "path:line:col: what;
 * what would be right". Returns 0 or -errno; free with tp__workload_free. */
int tp__workload_load(const char *path, tp_workload_t *w, tp_error_t *err);
void tp__workload_free(tp_workload_t *w);

/* The workload file used when a command names none, in this order:
 * $TUNEPACK_DATA_DIR/workloads/sp.yaml when that variable is set (not empty);
 * else <dir of the running binary>/../share/tunepack/workloads/sp.yaml (the
 * installed layout) when it exists; else TP_SOURCE_DATA_DIR/workloads/sp.yaml
 * (the source tree's data/, for a binary run from its build tree) when it
 * exists; else the installed path, so that the error names it. Writes the
 * path into out; returns 0, or -ENAMETOOLONG when it does not fit. */
int tp__workload_default_path(char *out, size_t size);

const tp_wl_cluster_t *tp__workload_find_cluster(const tp_workload_t *w, const char *name);
const tp_wl_space_t *tp__workload_find_space(const tp_workload_t *w, const char *name);

/* Build the named cluster: nodes "n0", "n1", ... in group order, GPUs "gpu0"..
 * per node (index = position, healthy), limits reserve 512 MiB, no
 * oversubscription, no count limit, sharing on. Free with tp__cluster_free.
 * Returns 0 or -ENOENT (err names the clusters there are, with a did-you-mean). */
int tp__workload_cluster(const tp_workload_t *w, const char *name, tp_cluster_t *out,
                         tp_error_t *err);

/* The jobs of the named space, models x batch sizes x lr values in that
 * nesting order, with profiles (*jobs) and placement demands (*demands:
 * id = job index, gpus 1, memory_mib, compute = util, cpus, duration_s =
 * time_s). Either output may be NULL; the caller frees both. O(jobs). */
int tp__workload_jobs(const tp_workload_t *w, const char *space, tp_wl_job_t **jobs,
                      tp_demand_t **demands, size_t *n, tp_error_t *err);

/* "no cluster "x" in the workload; did you mean "y"? (there are: ...)",
 * as -ENOENT: the message for a name the workload does not have. */
int tp__workload_no_such(tp_error_t *err, const char *what, const char *name,
                         const char *const *names, size_t n);
/* The i-th learning rate of space s: lr_count log-spaced points from lr_lo
 * to lr_hi, both included; one point: the geometric middle. */
double tp__workload_lr(const tp_wl_space_t *s, size_t i);
/* Node number `number` ("n<number>") with ngpus GPUs of type t ("gpu0"..,
 * index = position, healthy) and cpus cores. */
void tp__workload_node(tp_node_t *n, size_t number, size_t ngpus, int cpus,
                       const tp_wl_gpu_type_t *t);

/* A job's profile from its model, batch size and lr (the formulas above). */
tp_wl_job_t tp__workload_profile(const tp_wl_model_t *m, int batch, double lr);

#endif
