/* Internals of the config module shared by its files: the parse context,
 * table-driven mapping walks and the typed getters with their messages. */
#ifndef TP_CONFIG_INTERNAL_H
#define TP_CONFIG_INTERNAL_H

#include <jansson.h>
#include <yaml.h>

#include "config/config.h"

typedef struct cfgctx {
    const char *path;               /* for messages */
    yaml_document_t *doc;           /* the parsed file */
    tp_experiment_t *x;             /* being filled */
    tp_error_t *err;                /* the first errors, one per line, in the file's order */
    tp_buf_t *all;                  /* every error in full, one per line; NULL: not wanted */
    int nerrors;                    /* mistakes found */
    yaml_mark_t *marks;             /* where each was, owned (nerrors of them) */
    char **msgs;                    /* each "path:line:col: what", owned (nerrors of them) */
    yaml_node_t *space;             /* `space` mapping: its keys are declared parameters */
    yaml_node_t *algorithm;         /* `search.algorithm` value, for messages */
    yaml_node_t *command;           /* `command` sequence, checked once the space is known */
    yaml_node_t *profile_by;        /* `profile_by` sequence, checked once the space is known */
    yaml_node_t *budget;            /* `budget` mapping, for messages */
    yaml_node_t *scheduler;         /* `search.scheduler` value, for messages */
    yaml_node_t *metric;            /* `metric`, for messages */
    yaml_node_t *enqueue;           /* `enqueue` list, checked once the space is known */
    yaml_node_t *warm_start;        /* `search.warm_start` list, for messages */
    yaml_node_t *res_gpus_per_node; /* `resources.gpus_per_node`, for messages */
    yaml_node_t *groups;            /* `groups` mapping, for messages */
    int res_gpus_set;               /* gpus or gpus_per_node seen */
    yaml_node_t *fuse;              /* `fuse` mapping, checked once the space is known */
    yaml_node_t *fuse_shape;        /* `fuse.shape` list, checked once the space is known */
    yaml_node_t *fuse_min;          /* `fuse.min` value, for messages */
    int trials_given;               /* `search.trials` was written (else a per-sampler default) */
    yaml_node_t *surrogate;         /* `surrogate` mapping, for messages */
    yaml_node_t *constraints;       /* `constraints` list, for messages */
    yaml_node_t *pbt;               /* `pbt` mapping, for messages */
    yaml_node_t *pbt_explore;       /* `pbt.explore` mapping, for messages */
} cfgctx_t;

typedef struct key_table key_table_t;

/* A key of a mapping: its handler gets the value node. */
typedef struct key_spec {
    const char *key;
    int (*fn)(cfgctx_t *c, const char *key, yaml_node_t *v);
    int required;
    const char *example;       /* shown when a required key is missing */
    const key_table_t *sub;    /* the keys its value takes when it is a mapping (or a list of
                                  them), for tp__config_keys; NULL: none */
    const key_table_t *values; /* the names its value may be (names only), for
                                  tp__config_keys; NULL: not a name from a list */
} key_spec_t;

/* The most keys one mapping's table may list (tp__cfg_walk_mapping keeps a
 * flag per key on the stack). */
#define TP_CFG_MAX_KEYS 64

/* The keys of one kind of mapping, as tp__config_keys lists them: read by a
 * handler each (spec), or by hand against a list of names (names). */
struct key_table {
    const key_spec_t *spec;   /* or NULL */
    const char *const *names; /* when spec is NULL */
    size_t n;                 /* how many; 0: names is NULL-terminated */
    const char *each;         /* NULL; or this mapping is one per name the user picks ("NAME":
                                 space.NAME.KEY), or per entry of a list ("[]": gpus[].KEY) */
};
#define KEY_TABLE(spec)                                                                            \
    { (spec), NULL, TP_ARRAY_LEN(spec), NULL }
#define KEY_NAMES(names, each)                                                                     \
    { NULL, (names), TP_ARRAY_LEN(names), (each) }
#define KEY_LIST(names)                                                                            \
    { NULL, (names), 0, NULL } /* NULL-terminated names */

/* The tables below the top level, for tp__config_keys (each in its file). */
extern const key_table_t tp__cfg_metric_table, tp__cfg_budget_table, tp__cfg_checkpoint_table,
    tp__cfg_resources_table, tp__cfg_placement_table, tp__cfg_gpus_table, tp__cfg_groups_table,
    tp__cfg_cluster_table, tp__cfg_reallocation_table, tp__cfg_space_table, tp__cfg_surrogate_table,
    tp__cfg_fuse_table, tp__cfg_constraints_table, tp__cfg_pbt_table;
/* The names a key's value may be, for tp__config_keys. */
extern const key_table_t tp__cfg_sharing_values;

static inline const char *stext(const yaml_node_t *n) {
    return (const char *)n->data.scalar.value;
}

static inline size_t seq_len(const yaml_node_t *v) {
    return (size_t)(v->data.sequence.items.top - v->data.sequence.items.start);
}

static inline int is_plain(const yaml_node_t *n) {
    return n->data.scalar.style == YAML_PLAIN_SCALAR_STYLE ||
           n->data.scalar.style == YAML_ANY_SCALAR_STYLE;
}

/* Keep the mistake "path:line:col: msg" at mark m (said in the file's
 * order into c->err and c->all when the parse ends); returns -EINVAL. */
int tp__cfg_fail_at(cfgctx_t *c, yaml_mark_t m, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
#define fail(c, node, ...) tp__cfg_fail_at((c), (node)->start_mark, __VA_ARGS__)
/* Was a mistake reported inside node n (NULL: no)? The checks across keys
 * skip what a mistake already made wrong, so that each is said once. */
int tp__cfg_failed_within(const cfgctx_t *c, const yaml_node_t *n);
/* Is name a parameter written in `space` whose domain had a mistake (so it
 * is missing from the space, and said already)? O(params). */
int tp__cfg_param_failed(const cfgctx_t *c, const char *name);
/* How a node reads in "got ...": the scalar quoted, else its kind. */
const char *tp__cfg_describe(const yaml_node_t *n, char *out, size_t len);
yaml_node_t *tp__cfg_node_at(cfgctx_t *c, int index);
/* A plain scalar resolved to a JSON value (int, real, bool, null, string). */
json_t *tp__cfg_resolve_scalar(const yaml_node_t *n);
int tp__cfg_node_number(const yaml_node_t *n, double *out);
int tp__cfg_node_integer(const yaml_node_t *n, long long *out);
/* A scalar true/false into *out (1/0); -EINVAL for anything else, *out untouched. */
int tp__cfg_node_bool(const yaml_node_t *n, int *out);
int tp__cfg_get_int(cfgctx_t *c, const char *key, yaml_node_t *v, long long lo, long long hi,
                    long long *out);
/* tp__cfg_get_number's ends: lo and hi are allowed unless one of these excludes them. */
#define TP_CFG_ABOVE_LO 1 /* the number must be > lo */
#define TP_CFG_BELOW_HI 2 /* the number must be < hi */
/* A finite number setting from lo to hi (lo -INFINITY, hi INFINITY: no bound on that side),
 * each end allowed unless `open` (TP_CFG_ABOVE_LO, TP_CFG_BELOW_HI) excludes it, into *out.
 * 0, or -EINVAL with the mistake said at v: "\"key\" must be a number RANGE (what), got
 * X", where RANGE reads "> lo", ">= lo", "<= hi", "from lo to hi" or "in (lo, hi]" and the
 * like ("a finite number" with no bound at all), and what (NULL: none) says what the
 * number means, with an example. */
int tp__cfg_get_number(cfgctx_t *c, const char *key, yaml_node_t *v, double lo, double hi, int open,
                       const char *what, double *out);
int tp__cfg_get_string(cfgctx_t *c, const char *key, yaml_node_t *v, const char **out);
int tp__cfg_get_duration(cfgctx_t *c, const char *key, yaml_node_t *v, double *out);
/* A memory size: a number of MiB, or a size with a unit ("2G", "1500M"), into *out MiB. */
int tp__cfg_get_mib(cfgctx_t *c, const char *key, yaml_node_t *v, uint64_t *out);
int tp__cfg_check_mapping(cfgctx_t *c, const char *key, yaml_node_t *v, const char *example);
/* "unknown key" at k, with a did-you-mean among names[0..n) or the list of
 * them; returns -EINVAL. */
int tp__cfg_unknown_key(cfgctx_t *c, yaml_node_t *k, const char *const *names, size_t n);
int tp__cfg_walk_mapping(cfgctx_t *c, const char *what, yaml_node_t *v, const key_spec_t *spec,
                         size_t nspec, const char *example);

/* config_command.c: `command` (a list of strings; its program's place kept
 * for messages); after the whole file, every {placeholder} of it names a
 * parameter, trial_id, trial_dir, the budget or the surrogate's param. */
int tp__cfg_key_command(cfgctx_t *c, const char *key, yaml_node_t *v);
int tp__cfg_check_placeholders(cfgctx_t *c);
/* config_resources.c: resources, placement, sharing, gpus, profile_by. */
int tp__cfg_key_resources(cfgctx_t *c, const char *key, yaml_node_t *v);
int tp__cfg_key_placement(cfgctx_t *c, const char *key, yaml_node_t *v);
int tp__cfg_key_sharing(cfgctx_t *c, const char *key, yaml_node_t *v);
int tp__cfg_key_gpus(cfgctx_t *c, const char *key, yaml_node_t *v);
int tp__cfg_key_profile_by(cfgctx_t *c, const char *key, yaml_node_t *v);
/* `groups: {shares: static|dynamic, min: 0.25, max: 1}` (Fluid trial groups). */
int tp__cfg_key_groups(cfgctx_t *c, const char *key, yaml_node_t *v);
/* config_cluster.c: cluster, and concurrency (per node, over the cluster). */
int tp__cfg_key_cluster(cfgctx_t *c, const char *key, yaml_node_t *v);
int tp__cfg_key_concurrency(cfgctx_t *c, const char *key, yaml_node_t *v);
/* config_search.c: metric (one objective or a list), budget, checkpoint,
 * search.scheduler. */
int tp__cfg_key_metric(cfgctx_t *c, const char *key, yaml_node_t *v);
int tp__cfg_key_budget(cfgctx_t *c, const char *key, yaml_node_t *v);
int tp__cfg_key_checkpoint(cfgctx_t *c, const char *key, yaml_node_t *v);
int tp__cfg_search_scheduler(cfgctx_t *c, const char *key, yaml_node_t *v);
int tp__cfg_search_warm_start(cfgctx_t *c, const char *key, yaml_node_t *v);
/* config_constraints.c: `constraints` (bounds on reported metrics); after the whole file,
 * refused with surrogate; freed with the experiment. */
int tp__cfg_key_constraints(cfgctx_t *c, const char *key, yaml_node_t *v);
int tp__cfg_check_constraints(cfgctx_t *c);
void tp__cfg_constraints_free(tp_experiment_t *x);
/* After the whole file: a scheduler with rungs has a budget; the budget's
 * name is no parameter; several objectives run under fifo. */
int tp__cfg_check_budget(cfgctx_t *c, yaml_node_t *root);
/* config_deadline.c: deadline (a duration > 0), reallocation ({policy,
 * min_gain, cooldown, temperature, probe}). */
int tp__cfg_key_deadline(cfgctx_t *c, const char *key, yaml_node_t *v);
int tp__cfg_key_reallocation(cfgctx_t *c, const char *key, yaml_node_t *v);
/* config_space.c: `space`, one domain per parameter and its `when`
 * conditions, resolved and checked once the space is read. 0 or -EINVAL. */
int tp__cfg_key_space(cfgctx_t *c, const char *key, yaml_node_t *v);
/* `enqueue`: kept by the key, checked against the space after the file. */
int tp__cfg_key_enqueue(cfgctx_t *c, const char *key, yaml_node_t *v);
int tp__cfg_check_enqueue(cfgctx_t *c);
/* Before any key: no scalar holds a NUL byte, reads as a non-finite number
 * or exceeds TP_VALUE_MAX bytes (config_boundary.c). */
int tp__cfg_check_scalars(cfgctx_t *c);
/* config_privacy.c: permissions, env_passthrough. */
int tp__cfg_key_permissions(cfgctx_t *c, const char *key, yaml_node_t *v);
int tp__cfg_key_env_passthrough(cfgctx_t *c, const char *key, yaml_node_t *v);
/* config_surrogate.c: `surrogate`, and after the whole file its parameter
 * checked against the space, the budget and the objectives. */
int tp__cfg_key_surrogate(cfgctx_t *c, const char *key, yaml_node_t *v);
int tp__cfg_check_surrogate(cfgctx_t *c);
/* config_pbt.c: `pbt`, and after the whole file: pbt and scheduler pbt come
 * together, with search.trials, and every explored parameter is in space. */
int tp__cfg_key_pbt(cfgctx_t *c, const char *key, yaml_node_t *v);
int tp__cfg_check_pbt(cfgctx_t *c);
/* config_fuse.c: `fuse`; after the whole file, its shape names are parameters and the
 * command names no other parameter ({configs_json} carries those). */
int tp__cfg_key_fuse(cfgctx_t *c, const char *key, yaml_node_t *v);
int tp__cfg_check_fuse(cfgctx_t *c);
/* After the whole file: profile_by names must be parameters. */
int tp__cfg_check_resources(cfgctx_t *c);

#endif
