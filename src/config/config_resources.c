/* config_resources: the keys that describe what trials need and where they
 * may go: resources, placement, sharing, gpus, profile_by. */
#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "config/config_internal.h"
#include "place/place.h"

static const char *const sharing_names[] = {[TP_SHARING_AUTO] = "auto",
                                            [TP_SHARING_MPS] = "mps",
                                            [TP_SHARING_TIMESLICE] = "time-slicing",
                                            [TP_SHARING_NONE] = "none"};

const key_table_t tp__cfg_sharing_values = KEY_NAMES(sharing_names, NULL);

const char *tp__sharing_name(tp_sharing_t s) {
    return (size_t)s < TP_ARRAY_LEN(sharing_names) ? sharing_names[s] : "?";
}

static int is_auto(const yaml_node_t *v) {
    return v->type == YAML_SCALAR_NODE && strcmp(stext(v), "auto") == 0;
}

/* See config_internal.h. */
int tp__cfg_get_mib(cfgctx_t *c, const char *key, yaml_node_t *v, uint64_t *out) {
    long long n;
    if (tp__cfg_node_integer(v, &n) == 0 && n > 0) {
        *out = (uint64_t)n;
        return 0;
    }
    uint64_t bytes;
    if (v->type == YAML_SCALAR_NODE && tp__parse_size(stext(v), &bytes, NULL) == 0 &&
        bytes >= (1u << 20)) {
        *out = bytes >> 20;
        return 0;
    }
    char got[256];
    return fail(c, v, "\"%s\" must be a memory size such as 2048 (MiB), 1500M or 2G, got %s", key,
                tp__cfg_describe(v, got, sizeof got));
}

/* An int key from lo to hi into *out. */
static int get_int_into(cfgctx_t *c, const char *key, yaml_node_t *v, long long lo, long long hi,
                        int *out) {
    long long n;
    int rc = tp__cfg_get_int(c, key, v, lo, hi, &n);
    *out = (int)n;
    return rc;
}

static int elastic_min(cfgctx_t *c, const char *key, yaml_node_t *v) {
    return get_int_into(c, key, v, 1, TP_PLACE_MAX_GPUS, &c->x->res.gpus);
}

static int elastic_max(cfgctx_t *c, const char *key, yaml_node_t *v) {
    return get_int_into(c, key, v, 1, TP_PLACE_MAX_GPUS, &c->x->res.gpus_max);
}

static const key_spec_t elastic_keys[] = {
    {"min", elastic_min, 1, "min: 1"},
    {"max", elastic_max, 1, "max: 8"},
};
static const key_table_t elastic_table = KEY_TABLE(elastic_keys);

/* `gpus: N`, or `gpus: {min: 1, max: 8}`: an elastic trial (one node). */
static int res_gpus(cfgctx_t *c, const char *key, yaml_node_t *v) {
    if (c->res_gpus_set)
        return fail(c, v,
                    "give GPUs once: \"gpus\" (one node) or \"gpus_per_node\" (with "
                    "nodes), not both");
    c->res_gpus_set = 1;
    if (v->type == YAML_MAPPING_NODE && strcmp(key, "gpus") == 0) {
        int rc = tp__cfg_walk_mapping(c, key, v, elastic_keys, TP_ARRAY_LEN(elastic_keys),
                                      "gpus: {min: 1, max: 8}");
        if (rc == 0 && c->x->res.gpus_max < c->x->res.gpus)
            return fail(c, v, "an elastic trial's max (%d) must be at least its min (%d)",
                        c->x->res.gpus_max, c->x->res.gpus);
        return rc;
    }
    return get_int_into(c, key, v, 0, TP_PLACE_MAX_GPUS, &c->x->res.gpus);
}

static int res_gpu_memory(cfgctx_t *c, const char *key, yaml_node_t *v) {
    if (is_auto(v)) {
        c->x->res.gpu_memory_auto = 1;
        return 0;
    }
    return tp__cfg_get_mib(c, key, v, &c->x->res.gpu_memory_mib);
}

static int res_gpu_compute(cfgctx_t *c, const char *key, yaml_node_t *v) {
    if (is_auto(v)) {
        c->x->res.gpu_compute_auto = 1;
        return 0;
    }
    return tp__cfg_get_number(c, key, v, 0, 1, TP_CFG_ABOVE_LO, NULL, &c->x->res.gpu_compute);
}

static int res_cpus(cfgctx_t *c, const char *key, yaml_node_t *v) {
    return get_int_into(c, key, v, 0, 4096, &c->x->res.cpus);
}

/* A trial over several nodes, or several processes per node: the
 * torchrun-style environment contract (docs/cluster.md). */
static int res_nodes(cfgctx_t *c, const char *key, yaml_node_t *v) {
    return get_int_into(c, key, v, 1, 1024, &c->x->res.nodes);
}

static int res_gpus_per_node(cfgctx_t *c, const char *key, yaml_node_t *v) {
    c->res_gpus_per_node = v;
    return res_gpus(c, key, v);
}

static int res_procs_per_node(cfgctx_t *c, const char *key, yaml_node_t *v) {
    return get_int_into(c, key, v, 1, TP_PLACE_MAX_GPUS, &c->x->res.procs_per_node);
}

static int res_profile_time(cfgctx_t *c, const char *key, yaml_node_t *v) {
    return tp__cfg_get_duration(c, key, v, &c->x->res.profile_s);
}

/* profile_wait: whether a group's other trials wait for its measurement
 * (true) or start beside its profiler where a guess with margin fits. */
static int res_profile_wait(cfgctx_t *c, const char *key, yaml_node_t *v) {
    if (tp__cfg_node_bool(v, &c->x->res.profile_wait) == 0) return 0;
    char got[256];
    return fail(c, v,
                "\"%s\" must be true (a group's other trials wait for its profile) or false "
                "(they start beside its profiler where a guess fits), got %s",
                key, tp__cfg_describe(v, got, sizeof got));
}

static const key_spec_t resource_keys[] = {
    {"gpus", res_gpus, 0, NULL, &elastic_table},   {"gpu_memory", res_gpu_memory, 0, NULL},
    {"gpu_compute", res_gpu_compute, 0, NULL},     {"cpus", res_cpus, 0, NULL},
    {"profile_time", res_profile_time, 0, NULL},   {"nodes", res_nodes, 0, NULL},
    {"gpus_per_node", res_gpus_per_node, 0, NULL}, {"procs_per_node", res_procs_per_node, 0, NULL},
    {"profile_wait", res_profile_wait, 0, NULL},
};
const key_table_t tp__cfg_resources_table = KEY_TABLE(resource_keys);

int tp__cfg_key_resources(cfgctx_t *c, const char *key, yaml_node_t *v) {
    int rc = tp__cfg_walk_mapping(c, key, v, resource_keys, TP_ARRAY_LEN(resource_keys),
                                  "resources: {gpus: 1, gpu_memory: 2G, gpu_compute: 0.25}");
    tp_resources_t *r = &c->x->res;
    if (rc == 0 && (r->nodes > 1 || r->procs_per_node > 1) &&
        (r->gpu_memory_auto || r->gpu_compute_auto))
        return fail(c, v,
                    "a trial of several processes cannot be profiled; declare "
                    "gpu_memory and gpu_compute instead of auto");
    if (rc == 0 && r->gpus_max && (r->nodes > 1 || r->procs_per_node > 1))
        return fail(c, v,
                    "an elastic trial (gpus: {min, max}) runs on one node, one process per "
                    "GPU it holds; leave out nodes and procs_per_node");
    if (rc == 0 && r->gpus_max && (r->gpu_memory_auto || r->gpu_compute_auto))
        return fail(c, v,
                    "an elastic trial cannot be profiled; declare gpu_memory and "
                    "gpu_compute instead of auto");
    if (rc == 0 && r->procs_per_node > 1 && r->gpus > 0 && r->procs_per_node != r->gpus)
        return fail(c, v,
                    "procs_per_node (%d) must equal the GPUs per node (%d): one process "
                    "per GPU, as torchrun starts them",
                    r->procs_per_node, r->gpus);
    return rc;
}

static int pl_policy(cfgctx_t *c, const char *key, yaml_node_t *v) {
    const char *s;
    int rc = tp__cfg_get_string(c, key, v, &s);
    if (rc < 0) return rc;
    if (!tp__placer_find(s)) {
        const char *names[16];
        size_t n = 0;
        tp_buf_t list;
        tp__buf_init(&list);
        for (; tp__placers[n] && n < TP_ARRAY_LEN(names); n++) {
            names[n] = tp__placers[n]->name;
            tp__buf_printf(&list, "%s%s", n ? ", " : "", names[n]);
        }
        const char *guess = tp__did_you_mean(s, names, n);
        rc = guess ? fail(c, v, "unknown placement policy \"%s\"; did you mean \"%s\"? (%s)", s,
                          guess, list.data)
                   : fail(c, v, "unknown placement policy \"%s\"; use one of: %s", s, list.data);
        tp__buf_free(&list);
        return rc;
    }
    free(c->x->policy);
    c->x->policy = tp__strdup(s);
    return 0;
}

static int pl_reserve(cfgctx_t *c, const char *key, yaml_node_t *v) {
    long long zero;
    if (tp__cfg_node_integer(v, &zero) == 0 && zero == 0) {
        c->x->reserve_mib = 0;
        return 0;
    }
    return tp__cfg_get_mib(c, key, v, &c->x->reserve_mib);
}

static int pl_oversubscribe(cfgctx_t *c, const char *key, yaml_node_t *v) {
    return tp__cfg_get_number(c, key, v, 0, 4, 0, "0.2 lets each GPU take 1.2 of compute",
                              &c->x->oversubscribe);
}

static int pl_max_per_gpu(cfgctx_t *c, const char *key, yaml_node_t *v) {
    return get_int_into(c, key, v, 0, 1024, &c->x->max_per_gpu);
}

static int pl_time_limit(cfgctx_t *c, const char *key, yaml_node_t *v) {
    return tp__cfg_get_duration(c, key, v, &c->x->place_time_limit_s);
}

static const key_spec_t placement_keys[] = {
    {"policy", pl_policy, 0, NULL},           {"time_limit", pl_time_limit, 0, NULL},
    {"reserve", pl_reserve, 0, NULL},         {"oversubscribe", pl_oversubscribe, 0, NULL},
    {"max_per_gpu", pl_max_per_gpu, 0, NULL},
};
const key_table_t tp__cfg_placement_table = KEY_TABLE(placement_keys);

int tp__cfg_key_placement(cfgctx_t *c, const char *key, yaml_node_t *v) {
    return tp__cfg_walk_mapping(c, key, v, placement_keys, TP_ARRAY_LEN(placement_keys),
                                "placement: {policy: wfd, reserve: 512M}");
}

int tp__cfg_key_sharing(cfgctx_t *c, const char *key, yaml_node_t *v) {
    const char *s;
    int rc = tp__cfg_get_string(c, key, v, &s);
    if (rc < 0) return rc;
    for (size_t i = 0; i < TP_ARRAY_LEN(sharing_names); i++)
        if (strcmp(s, sharing_names[i]) == 0) {
            c->x->sharing = (tp_sharing_t)i;
            return 0;
        }
    const char *guess = tp__did_you_mean(s, sharing_names, TP_ARRAY_LEN(sharing_names));
    if (guess) return fail(c, v, "unknown sharing \"%s\"; did you mean \"%s\"?", s, guess);
    return fail(c, v, "unknown sharing \"%s\"; use auto, mps, time-slicing or none", s);
}

static const char *const gpu_keys[] = {"index", "type", "memory", "speed"};
const key_table_t tp__cfg_gpus_table = KEY_NAMES(gpu_keys, "[]");

/* One entry of `gpus:`: an index, or {index, type, memory, speed}. */
static int gpu_entry(cfgctx_t *c, yaml_node_t *v, tp_gpu_decl_t *g) {
    long long n;
    if (tp__cfg_node_integer(v, &n) == 0) {
        if (n < 0 || n > 1023) return fail(c, v, "a GPU index must be from 0 to 1023, got %lld", n);
        g->index = (int)n;
        return 0;
    }
    int rc = tp__cfg_check_mapping(c, "gpus", v, "{index: 0, type: a100_80g, speed: 1.0}");
    int has_index = 0;
    for (yaml_node_pair_t *p = v->data.mapping.pairs.start;
         rc == 0 && p < v->data.mapping.pairs.top; p++) {
        yaml_node_t *k = tp__cfg_node_at(c, p->key), *val = tp__cfg_node_at(c, p->value);
        const char *name = stext(k);
        if (strcmp(name, "index") == 0) {
            rc = tp__cfg_get_int(c, name, val, 0, 1023, &n);
            g->index = (int)n;
            has_index = 1;
        } else if (strcmp(name, "type") == 0) {
            const char *s;
            rc = tp__cfg_get_string(c, name, val, &s);
            if (rc == 0) g->type = tp__strdup(s);
        } else if (strcmp(name, "memory") == 0) {
            rc = tp__cfg_get_mib(c, name, val, &g->memory_mib);
        } else if (strcmp(name, "speed") == 0) {
            rc = tp__cfg_get_number(c, name, val, 0, 1000, TP_CFG_ABOVE_LO, NULL, &g->speed);
        } else {
            rc = tp__cfg_unknown_key(c, k, gpu_keys, TP_ARRAY_LEN(gpu_keys));
        }
    }
    if (rc == 0 && !has_index) rc = fail(c, v, "missing required key \"index\"; add e.g. index: 0");
    return rc;
}

int tp__cfg_key_gpus(cfgctx_t *c, const char *key, yaml_node_t *v) {
    if (v->type != YAML_SEQUENCE_NODE) {
        char got[256];
        return fail(c, v,
                    "\"%s\" must be a list of GPU indexes or {index, type, memory, speed}, "
                    "e.g. gpus: [0, 1]; got %s",
                    key, tp__cfg_describe(v, got, sizeof got));
    }
    size_t n = seq_len(v);
    c->x->gpus = tp__xcalloc(n ? n : 1, sizeof *c->x->gpus);
    for (size_t i = 0; i < n; i++) {
        yaml_node_t *e = tp__cfg_node_at(c, v->data.sequence.items.start[i]);
        int rc = gpu_entry(c, e, &c->x->gpus[i]);
        c->x->ngpus = i + 1;
        if (rc < 0) return rc;
        for (size_t j = 0; j < i; j++)
            if (c->x->gpus[j].index == c->x->gpus[i].index)
                return fail(c, e, "GPU %d is listed twice; keep one", c->x->gpus[i].index);
    }
    return 0;
}

int tp__cfg_key_profile_by(cfgctx_t *c, const char *key, yaml_node_t *v) {
    if (v->type != YAML_SEQUENCE_NODE) {
        char got[256];
        return fail(c, v,
                    "\"%s\" must be a list of parameter names, e.g. [model, batch_size]; "
                    "got %s",
                    key, tp__cfg_describe(v, got, sizeof got));
    }
    c->profile_by = v;
    return 0;
}

/* ---- groups: Fluid trial groups ------------------------------------------------ */

static const char *const shares_names[] = {"static", "dynamic"};
static const key_table_t shares_values = KEY_NAMES(shares_names, NULL);

static int gr_shares(cfgctx_t *c, const char *key, yaml_node_t *v) {
    const char *s;
    int rc = tp__cfg_get_string(c, key, v, &s);
    if (rc < 0) return rc;
    if (!strcmp(s, "static"))
        c->x->groups = TP_FLUID_STATIC;
    else if (!strcmp(s, "dynamic"))
        c->x->groups = TP_FLUID_DYNAMIC;
    else {
        const char *guess = tp__did_you_mean(s, shares_names, TP_ARRAY_LEN(shares_names));
        return guess ? fail(c, v, "unknown shares \"%s\"; did you mean \"%s\"?", s, guess)
                     : fail(c, v,
                            "unknown shares \"%s\"; use static (computed once per group) "
                            "or dynamic (again whenever a trial of the group ends)",
                            s);
    }
    return 0;
}

/* min and max: a share of a GPU (0.25) or a number of GPUs (2). */
static int gr_bound(cfgctx_t *c, const char *key, yaml_node_t *v) {
    return tp__cfg_get_number(c, key, v, 0, TP_PLACE_MAX_GPUS, TP_CFG_ABOVE_LO,
                              "a share of GPUs: 0.25 a quarter of a GPU, 2 two GPUs",
                              strcmp(key, "min") == 0 ? &c->x->groups_min : &c->x->groups_max);
}

/* restart: whether dynamic shares may resize a running elastic trial to
 * more whole GPUs. */
static int gr_restart(cfgctx_t *c, const char *key, yaml_node_t *v) {
    if (tp__cfg_node_bool(v, &c->x->groups_restart) == 0) return 0;
    char got[256];
    return fail(c, v,
                "\"%s\" must be true (a running trial whose share grows to more whole "
                "GPUs is resized from its checkpoint when that pays) or false (it takes "
                "its new share at its next attempt), got %s",
                key, tp__cfg_describe(v, got, sizeof got));
}

static const key_spec_t groups_keys[] = {
    {"shares", gr_shares, 1, "groups: {shares: dynamic}", .values = &shares_values},
    {"min", gr_bound, 0, NULL},
    {"max", gr_bound, 0, NULL},
    {"restart", gr_restart, 0, NULL},
};
const key_table_t tp__cfg_groups_table = KEY_TABLE(groups_keys);

int tp__cfg_key_groups(cfgctx_t *c, const char *key, yaml_node_t *v) {
    c->groups = v;
    return tp__cfg_walk_mapping(c, key, v, groups_keys, TP_ARRAY_LEN(groups_keys),
                                "groups: {shares: dynamic, min: 0.25, max: 1, restart: true}");
}

/* groups need single-GPU, single-node trials and a min no larger than max. */
static int check_groups(cfgctx_t *c) {
    tp_experiment_t *x = c->x;
    if (x->groups == TP_FLUID_OFF) return 0;
    if (x->groups_min > x->groups_max)
        return fail(c, c->groups, "groups: min %g is above max %g", x->groups_min, x->groups_max);
    if (x->res.gpus != 1 || x->res.nodes != 1)
        return fail(c, c->groups,
                    "groups share GPUs among a group's trials, which needs "
                    "resources: {gpus: 1} (or {gpus: {min: 1, max: K}}, elastic, for "
                    "whole GPUs) on one node (got %d GPU(s) on %d node(s))",
                    x->res.gpus, x->res.nodes);
    if (x->sharing == TP_SHARING_NONE)
        return fail(c, c->groups,
                    "groups give trials fractions of a GPU, which sharing: none "
                    "forbids; remove one of them");
    return 0;
}

int tp__cfg_check_resources(cfgctx_t *c) {
    tp_experiment_t *x = c->x;
    int rc = check_groups(c);
    if (c->profile_by) {
        yaml_node_t *v = c->profile_by;
        size_t n = seq_len(v);
        x->profile_by = tp__xcalloc(n ? n : 1, sizeof *x->profile_by);
        for (size_t i = 0; i < n; i++) {
            yaml_node_t *e = tp__cfg_node_at(c, v->data.sequence.items.start[i]);
            if (e->type == YAML_SCALAR_NODE && tp__cfg_param_failed(c, stext(e))) continue;
            if (e->type != YAML_SCALAR_NODE || !tp__space_find(&x->space, stext(e))) {
                char got[256];
                rc = fail(c, e, "profile_by names %s, which is not a parameter of space",
                          tp__cfg_describe(e, got, sizeof got));
                continue;
            }
            x->profile_by[x->nprofile_by++] = tp__strdup(stext(e));
        }
    }
    return rc;
}
