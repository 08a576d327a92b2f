/* config: the experiment file (YAML) -> a validated experiment description.
 * Every mistake is reported as "file:line:col: what is wrong; what would be right". */
#ifndef TP_CONFIG_H
#define TP_CONFIG_H

#include <jansson.h>
#include <stddef.h>
#include <stdint.h>

#include "place/fluid.h"
#include "search/realloc.h"
#include "search/scheduler.h"
#include "search/search.h"
#include "search/surrogate.h"
#include "space/space.h"
#include "util/util.h"

/* The longest value (any scalar of the experiment file) a trial can be
 * given, in bytes: each parameter travels in one environment variable
 * (TUNEPACK_PARAM_*) and Linux caps one at 128 KiB. Longer is refused with
 * file:line:col. */
#define TP_VALUE_MAX 65536

/* The durations of an experiment file (timeout, stop_grace, ...) that the
 * runtime carries: the agent's timers count milliseconds, and a launch
 * message's timeout_s and grace_s may be at most 1e9 seconds (agent/trial.c,
 * docs/protocol.md). Others are refused with file:line:col. */
#define TP_DURATION_MIN_S 0.001
#define TP_DURATION_MAX_S 1e9
/* The largest log_limit a launch message carries (a JSON integer). */
#define TP_LOG_LIMIT_MAX ((uint64_t)INT64_MAX)

/* What trials on a remote node inherit from the agent's environment when
 * `env_passthrough` is not given (on this machine: everything). Secrets
 * such as AWS_SECRET_ACCESS_KEY are not in it. docs/security.md. */
#define TP_PASSTHROUGH_REMOTE                                                                      \
    "PATH", "HOME", "USER", "LOGNAME", "SHELL", "LANG", "LANGUAGE", "LC_*", "TZ", "TMPDIR",        \
        "TERM", "HOSTNAME", "PYTHONPATH", "PYTHONUNBUFFERED", "VIRTUAL_ENV", "CONDA_*",            \
        "LD_LIBRARY_PATH", "CUDA_*", "NCCL_*", "OMP_*", "MKL_*", "SLURM*", "PMI_*", "PMIX_*",      \
        "OMPI_*", "TUNEPACK_*"

typedef struct tp_env_pair {
    char *name;  /* owned */
    char *value; /* owned */
} tp_env_pair_t;

typedef enum tp_sharing {
    TP_SHARING_AUTO,      /* MPS where a control daemon can run, else time-slicing */
    TP_SHARING_MPS,       /* MPS required: no MPS is an error at start */
    TP_SHARING_TIMESLICE, /* share GPUs without MPS */
    TP_SHARING_NONE,      /* one trial per GPU */
} tp_sharing_t;

/* A GPU named in `gpus:`: restricts the run to it and may describe it. */
typedef struct tp_gpu_decl {
    int index;           /* device index on the node */
    char *type;          /* owned; NULL: as discovered */
    uint64_t memory_mib; /* 0: as discovered */
    double speed;        /* 0: as discovered (1.0 if unknown) */
} tp_gpu_decl_t;

/* Where trials run (`cluster:`). */
typedef enum tp_cluster_kind {
    TP_CLUSTER_LOCAL,   /* this machine: one local agent (the default) */
    TP_CLUSTER_SLURM,   /* the nodes of a Slurm allocation, an agent per node through srun */
    TP_CLUSTER_SSH,     /* hosts reached over ssh, an agent per host */
    TP_CLUSTER_COMMAND, /* any command that runs an agent on a named node (docker exec, ...) */
} tp_cluster_kind_t;

typedef struct tp_cluster_cfg {
    tp_cluster_kind_t kind;
    char **hosts; /* ssh: [user@]host[:port]; command: node names; owned */
    size_t nhosts;
    char *identity;                         /* ssh: -i FILE, owned; NULL: ssh's own choice */
    char *ssh_config;                       /* ssh: -F FILE, owned; NULL: ~/.ssh/config */
    int slurm_request;                      /* slurm: tunepack asks for the allocation itself */
    int nodes_min, nodes_max;               /* slurm: nodes asked for */
    int gpus_per_node;                      /* slurm: GPUs asked for per node, 0: none */
    int cpus_per_node;                      /* slurm: CPUs asked for per node, 0: Slurm's default */
    char *partition, *account, *time_limit; /* slurm: owned; NULL: Slurm's default */
    double idle_s; /* slurm with nodes {min, max}: a grown node idle this long is given
                      back (`idle`, default 30s) */
    char **extra;  /* slurm: more sbatch arguments, owned */
    size_t nextra;
    int shared;   /* the experiment directory is on storage every node shares
                     (`shared`, default true); false: logs stream back */
    char **agent; /* the command that runs an agent on a node, owned; NULL: this binary;
                     for `command`, the whole argv with {node} in it */
    size_t nagent;
} tp_cluster_cfg_t;

const char *tp__cluster_kind_name(tp_cluster_kind_t k);
/* --cluster local | slurm | ssh:HOST[,HOST...] into *out (freed first). */
int tp__cluster_cfg_from_arg(const char *arg, tp_cluster_cfg_t *out, tp_error_t *err);
void tp__cluster_cfg_free(tp_cluster_cfg_t *k);

/* Each trial's demand (`resources:`). */
typedef struct tp_resources {
    int gpus;                /* GPUs per trial and node (`gpus` or `gpus_per_node`); default 0;
                                an elastic trial's minimum */
    int gpus_max;            /* `gpus: {min, max}`: an elastic trial grows up to this many by
                                checkpoint and restart (docs/elastic.md); 0: not elastic */
    int nodes;               /* nodes per trial, default 1; more: a multi-node trial */
    int procs_per_node;      /* processes per node, default 1 (each with RANK, LOCAL_RANK, ...) */
    uint64_t gpu_memory_mib; /* per GPU; 0 = none declared */
    int gpu_memory_auto;     /* `gpu_memory: auto`: measured by the profiler */
    double gpu_compute;      /* share of each GPU in (0, 1]; default 1.0 */
    int gpu_compute_auto;    /* `gpu_compute: auto` */
    int cpus;                /* CPU cores per trial; default 0 = not counted */
    double profile_s;        /* `profile_time`: the profiler's bounded run, default 30s */
    int profile_wait;        /* `profile_wait: true`: a group's other trials wait for its
                                measurement instead of starting beside its profiler */
} tp_resources_t;

/* `fuse:` several configurations of the same shape in one process (docs/fusion.md). */
typedef struct tp_fuse_cfg {
    int max;      /* `fuse.max`: most configurations per process (1..64); 0: no fusion */
    int min;      /* `fuse.min`: fewest a process is started for while more wait
                     (1..max, default 1); the measured K is chosen in min..max */
    char **shape; /* `fuse.shape`: the parameters that change the model's shape, owned;
                     default: profile_by and the parameters the command names */
    size_t nshape;
    uint64_t memory_mib; /* `fuse.memory`: what one fused process may use; 0: the GPU's memory
                            less the reserve, on CPU the node's memory / concurrency */
} tp_fuse_cfg_t;

#define TP_FUSE_MAX 64 /* most configurations one process may run */

#define TP_FAIL_FAST_DEFAULT 3 /* trials, for `fail_fast: true` (the default) */

/* One objective of `metric:` (a mapping, or a list of them for several). */
typedef struct tp_objective {
    char *name;   /* the reported metric, owned */
    int maximize; /* mode: max -> 1, min -> 0 */
} tp_objective_t;

typedef struct tp_experiment {
    char *path;                    /* the file as named by the user (for messages), owned */
    char *text;                    /* the file's text as given, owned */
    char *name;                    /* `name`, required: [A-Za-z0-9_.-]+ */
    char **argv;                   /* `command`: templates with {placeholders}, NULL-terminated */
    size_t argc;                   /* number of argv elements (>= 1) */
    int program_line, program_col; /* where argv[0] is written in the file (1-based) */
    char *metric;                  /* `metric.name`, required (several: the first one's) */
    int maximize; /* `metric.mode`: max -> 1, min -> 0 (required; several: the first) */
    tp_objective_t objectives[TP_MAX_OBJECTIVES]; /* every objective in order, names owned */
    size_t nobjectives;     /* 1, or more for `metric: [{name, mode}, ...]` (also search.nobj) */
    tp_space_t space;       /* `space` */
    tp_search_cfg_t search; /* `search`: algorithm (static string), trials (default 10;
                               grid: 1, one pass over the product), seed (default 0) */
    int concurrency;        /* `concurrency` (or its per_node): attempts at once on each
                               node, default 1, 1..4096 (`{total: M}` alone: M) */
    int concurrency_total;  /* `concurrency.total`: at once over the cluster, 0 = per node
                               times the nodes that take trials */
    int retries;            /* `retries`, default 0, 0..100: extra attempts after a failure */
    int fail_fast;          /* `fail_fast`: stop when the first this many trials all fail the
                               same way; 0: never; default TP_FAIL_FAST_DEFAULT (`true`) */
    double timeout_s;       /* `timeout`, per attempt, 0 = none */
    double grace_s;         /* `stop_grace`, SIGTERM -> SIGKILL delay, default 10s */
    uint64_t log_limit;     /* `log_limit`, bytes of stdout/stderr kept per attempt, default 8M */
    char *workdir;          /* `workdir`, trials' cwd; default: NULL = where `run` started */
    char *checkpoint_root;  /* `checkpoint_root`: trials' checkpoints under ROOT/<name>/<id>,
                               owned; NULL: DIR/trials/<id>/checkpoint */
    tp_env_pair_t *env;     /* `env`: extra environment for trials, owned */
    size_t nenv;            /* number of env pairs */
    char **env_passthrough; /* `env_passthrough`: names or glob patterns of the
                               orchestrator's environment trials inherit, owned;
                               NULL: TP_PASSTHROUGH_DEFAULT (all here, a safe set remotely) */
    size_t nenv_passthrough;
    int dir_mode;              /* `permissions`: mode of DIR (default 0700, private) */
    int file_mode;             /* and of its store (default 0600) */
    tp_resources_t res;        /* `resources` */
    char *policy;              /* `placement.policy`, default TP_PLACE_DEFAULT_POLICY
                                  (TP_PLACE_GROUPS_POLICY with `groups:`), owned */
    uint64_t reserve_mib;      /* `placement.reserve`: memory kept free per GPU, default 512 MiB */
    double oversubscribe;      /* `placement.oversubscribe`: compute capacity 1 + this, default 0 */
    int max_per_gpu;           /* `placement.max_per_gpu`, 0 = no limit */
    double place_time_limit_s; /* `placement.time_limit`: how long `optimal` may search a
                                  round, 0 = its default (10 s) */
    tp_sharing_t sharing;      /* `sharing`, default auto */
    tp_fluid_mode_t groups;    /* `groups.shares`: Fluid trial groups (static or dynamic); off
                                  unless `groups:` is given */
    double groups_min;         /* `groups.min`: smallest share of a GPU, default 0.25 */
    double groups_max;         /* `groups.max`: largest share in GPUs, default 1 (whole GPUs
                                  above 1 only for elastic trials, up to their max) */
    int groups_restart;        /* `groups.restart`: dynamic shares resize a running elastic
                                  trial to more whole GPUs when that pays (default 1) */
    tp_gpu_decl_t *gpus;       /* `gpus`, owned; NULL = every GPU found */
    size_t ngpus;
    char **profile_by; /* `profile_by`: parameters that shape demand, owned */
    size_t nprofile_by;
    const char *scheduler; /* `search.scheduler`: fifo (default), asha, hyperband, median,
                              hypersched, pbt */
    char *budget_name; /* `budget.name`: the growing resource's placeholder, owned; NULL: none */
    double budget_min; /* `budget.min` (> 0) */
    double budget_max; /* `budget.max` (>= min) */
    double budget_eta; /* `budget.eta` (> 1, default 3) */
    int pause_signal;  /* `checkpoint.signal`: SIGUSR1 or 0 (control channel only) */
    tp_cluster_cfg_t cluster; /* `cluster`: where trials run */
    json_t *enqueue;          /* `enqueue`: configurations run first (partial: the rest proposed by
                                 the sampler), a JSON array of objects, owned; NULL: none */
    char **warm_start;        /* `search.warm_start`: experiment directories whose completed trials
                                 are prior observations, owned; NULL-terminated or NULL */
    size_t nwarm_start;
    double deadline_s;         /* `deadline`: seconds from the experiment's creation (its first run,
                                  the store's created_at: a resumed run keeps the deadline) to the
                                  deadline; 0: none */
    tp_realloc_opts_t realloc; /* `reallocation`: how free GPUs go to leading trials (defaults:
                                  uniform, min_gain 1.1, cooldown 60s, temperature 1, probe) */
    int realloc_given;         /* `reallocation` was written */
    tp_surrogate_cfg_t surrogate;  /* `surrogate`: param (owned; NULL: none), value, promote
                                      (default 3), eager (default 0.5) */
    tp_fuse_cfg_t fuse;            /* `fuse`: fused trials; fuse.max 0 when off */
    tp_constraint_t *constraints;  /* `constraints`: bounds on reported metrics (metric names
                                      owned), TP_MAX_CONSTRAINTS entries, owned; NULL: none.
                                      search.constraints points here */
    size_t nconstraints;           /* how many (also search.nconstraints) */
    tp_pbt_cfg_t pbt;              /* `pbt`: scheduler pbt's settings (explore points into
                                      pbt_explore); interval 0 when not given */
    tp_pbt_explore_t *pbt_explore; /* `pbt.explore`, owned (each param name owned too) */
} tp_experiment_t;

/* Name of a sharing mode as written in the file. */
const char *tp__sharing_name(tp_sharing_t s);

/* Parse and validate an experiment from text; path is used in messages.
 * On error returns -EINVAL with err->msg "path:line:col: ...", and *out is
 * left freed. On success the caller frees with tp__experiment_free. */
int tp__experiment_parse(const char *path, const char *text, size_t len, tp_experiment_t *out,
                         tp_error_t *err);
/* Read path and parse it. */
int tp__experiment_load(const char *path, tp_experiment_t *out, tp_error_t *err);
/* Every key the loader takes, from its tables, depth first: fn(path, values,
 * required, ud) per key, path dotted ("search.scheduler",
 * "cluster.slurm.nodes.min"), NAME for a key the user names
 * (space.NAME.uniform), [] for each entry of a list (gpus[].index); values:
 * the names its value may be, NULL-terminated (empty when it is not a name
 * from a list). Stops at fn's first nonzero return, which it returns. */
int tp__config_keys(int (*fn)(const char *path, const char *const *values, int required, void *ud),
                    void *ud);
/* As tp__experiment_load; besides, every mistake in full ("path:line:col:
 * what, and what would be right"), one per line, is appended to all, where
 * err keeps only the first ones that fit (`run --dry-run` lists them all). */
int tp__experiment_load_all(const char *path, tp_experiment_t *out, tp_error_t *err, tp_buf_t *all);
void tp__experiment_free(tp_experiment_t *x);

/* An experiment file's text as parsed YAML: a JSON object of its keys with
 * resolved values (comments and formatting gone); NULL if it is no YAML. */
json_t *tp__config_tree(const char *text);
/* What changed from old_text to new_text (both experiment files), by key:
 * "  key: OLD -> NEW" lines into accepted (keys that may change between runs:
 * trials, concurrency, timeout, retries, resources, ...) or refused (keys
 * that give recorded trials their meaning: command, space, metric, search,
 * budget, ...; see key_kinds in config_change.c). Returns 0 (nothing
 * refused), 1 (something refused) or -1 (a text is no YAML). results:
 * how many trials have a result (completed, paused at a rung or stopped
 * early); while none has (results 0), a changed command is accepted, shown as "  command: (...)"
 * with its old and new value on a line each ("    - OLD", "    + NEW"), so a mistake in it is fixed
 * without starting over. O(size of the files). */
int tp__config_changes(const char *old_text, const char *new_text, int results, tp_buf_t *accepted,
                       tp_buf_t *refused);

/* Built-in placeholders available besides parameters: {trial_id}, {trial_dir}, and with
 * `fuse:` {configs_json}. */
typedef struct tp_subst_extra {
    const char *trial_id;     /* e.g. "17" */
    const char *trial_dir;    /* absolute path of the trial's directory */
    const char *budget_name;  /* the budget's placeholder, NULL if none */
    const char *budget_value; /* its value for this job */
    const char *configs_json; /* a fused process's configurations ({configs_json}), NULL: none */
} tp_subst_extra_t;

/* Substitute {name} in tmpl from params (a JSON object) and extra, where
 * name is a parameter name (tp__is_placeholder_name); "{{" and "}}" stand
 * for one literal brace each ("{{lr}}" gives "{lr}") and every other brace
 * is literal text ("{'step': 1}" stays as written). Returns a malloc'd
 * string, or NULL with err filled when a placeholder names nothing known.
 * The result never passes through a shell. O(len(tmpl)). */
char *tp__substitute(const char *tmpl, const json_t *params, const tp_subst_extra_t *extra,
                     tp_error_t *err);

/* A trial's argv (a JSON array of strings, caller owns): each template of
 * argv[0..argc) substituted from params as tp__substitute does, except that
 * an element naming a parameter of space that params lacks (an inactive
 * one) is left out, so "--width={width}" disappears; when that element is
 * just the placeholder ("{width}") and the element before it a flag
 * ("--width", starting with '-', no placeholder), the flag goes too. NULL
 * with err filled when a placeholder names nothing known, or names an
 * active parameter that params lacks (a trial never runs without a value
 * its command names). O(total length * params). */
json_t *tp__substitute_argv(char *const *argv, size_t argc, const tp_space_t *space,
                            const json_t *params, const tp_subst_extra_t *extra, tp_error_t *err);

/* The {name} placeholders of tmpl (as tp__substitute reads them) in order
 * of appearance, repeats kept: sets *names to a malloc'd NULL-terminated
 * array of malloc'd names (free with tp__template_names_free) and returns
 * their count (>= 0; err is kept for callers and never filled). O(len). */
int tp__template_names(const char *tmpl, char ***names, tp_error_t *err);
void tp__template_names_free(char **names);
/* Is s a valid placeholder/parameter name: [A-Za-z_][A-Za-z0-9_.-]* ? */
int tp__is_placeholder_name(const char *s);

#endif
