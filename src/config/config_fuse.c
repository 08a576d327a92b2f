/* config_fuse: `fuse: {max: 8, shape: [hidden], memory: 4G}`, several configurations of the
 * same shape run in one process (docs/fusion.md). */
#include <errno.h>
#include <string.h>

#include "config/config_internal.h"

static int fuse_max(cfgctx_t *c, const char *key, yaml_node_t *v) {
    long long n;
    int rc = tp__cfg_get_int(c, key, v, 1, TP_FUSE_MAX, &n);
    if (rc == 0) c->x->fuse.max = (int)n;
    return rc;
}

static int fuse_min(cfgctx_t *c, const char *key, yaml_node_t *v) {
    long long n;
    int rc = tp__cfg_get_int(c, key, v, 1, TP_FUSE_MAX, &n);
    if (rc == 0) c->x->fuse.min = (int)n;
    c->fuse_min = v;
    return rc;
}

static int fuse_shape(cfgctx_t *c, const char *key, yaml_node_t *v) {
    if (v->type != YAML_SEQUENCE_NODE) {
        char got[256];
        return fail(c, v,
                    "\"%s\" must be a list of the parameters that change the model's "
                    "shape, e.g. shape: [hidden, layers]; got %s",
                    key, tp__cfg_describe(v, got, sizeof got));
    }
    c->fuse_shape = v;
    return 0;
}

static int fuse_memory(cfgctx_t *c, const char *key, yaml_node_t *v) {
    return tp__cfg_get_mib(c, key, v, &c->x->fuse.memory_mib);
}

static const key_spec_t fuse_keys[] = {
    {"max", fuse_max, 1, "max: 8"},
    {"min", fuse_min, 0, NULL},
    {"shape", fuse_shape, 0, NULL},
    {"memory", fuse_memory, 0, NULL},
};
const key_table_t tp__cfg_fuse_table = KEY_TABLE(fuse_keys);

int tp__cfg_key_fuse(cfgctx_t *c, const char *key, yaml_node_t *v) {
    c->fuse = v;
    c->x->fuse.min = 1;
    int rc = tp__cfg_walk_mapping(c, key, v, fuse_keys, TP_ARRAY_LEN(fuse_keys),
                                  "fuse: {max: 8, shape: [hidden]}");
    if (rc == 0 && c->x->fuse.min > c->x->fuse.max)
        return fail(c, c->fuse_min, "fuse.min %d is above fuse.max %d; write min <= max",
                    c->x->fuse.min, c->x->fuse.max);
    return rc;
}

static int in_shape(const tp_fuse_cfg_t *f, const char *name) {
    for (size_t i = 0; i < f->nshape; i++)
        if (!strcmp(f->shape[i], name)) return 1;
    return 0;
}

static void add_shape(tp_fuse_cfg_t *f, const char *name, size_t cap) {
    if (!in_shape(f, name) && f->nshape < cap) f->shape[f->nshape++] = tp__strdup(name);
}

/* See config_internal.h. With `shape` given, the command may name only those parameters
 * (one process runs every configuration of the group: a placeholder of another parameter
 * would have several values); without it, the shape is profile_by and the parameters the
 * command names. O(command length * params). */
int tp__cfg_check_fuse(cfgctx_t *c) {
    if (!c->fuse) return 0;
    tp_experiment_t *x = c->x;
    tp_fuse_cfg_t *f = &x->fuse;
    size_t cap = x->space.n + 1;
    f->shape = tp__xcalloc(cap, sizeof *f->shape);
    if (x->res.nodes > 1 || x->res.procs_per_node > 1 || x->res.gpus_max)
        return fail(c, c->fuse,
                    "fuse runs several configurations in one process; it cannot be "
                    "combined with resources.nodes or procs_per_node above 1, nor "
                    "with elastic gpus: {min, max}");
    if (x->groups != TP_FLUID_OFF)
        return fail(c, c->fuse,
                    "fuse cannot be combined with groups: a Fluid share is one "
                    "trial's, and a fused process runs several trials under one "
                    "placement; keep one of them");
    if (tp__space_find(&x->space, "configs_json"))
        return fail(c, c->fuse,
                    "with fuse, no parameter may be named configs_json: that "
                    "placeholder carries the fused configurations; rename it");
    if (c->fuse_shape) {
        yaml_node_t *v = c->fuse_shape;
        for (yaml_node_item_t *i = v->data.sequence.items.start; i < v->data.sequence.items.top;
             i++) {
            yaml_node_t *e = tp__cfg_node_at(c, *i);
            if (e->type == YAML_SCALAR_NODE && tp__cfg_param_failed(c, stext(e))) continue;
            if (e->type != YAML_SCALAR_NODE || !tp__space_find(&x->space, stext(e))) {
                char got[256];
                return fail(c, e, "fuse.shape names %s, which is not a parameter of space",
                            tp__cfg_describe(e, got, sizeof got));
            }
            add_shape(f, stext(e), cap);
        }
    } else {
        for (size_t i = 0; i < x->nprofile_by; i++)
            add_shape(f, x->profile_by[i], cap);
    }
    for (size_t i = 0; c->command && i < seq_len(c->command); i++) {
        yaml_node_t *e = tp__cfg_node_at(c, c->command->data.sequence.items.start[i]);
        char **names;
        tp_error_t te;
        if (tp__template_names(stext(e), &names, &te) < 0) continue; /* said already */
        int rc = 0;
        for (char **n = names; rc == 0 && *n; n++) {
            if (!tp__space_find(&x->space, *n) || in_shape(f, *n)) continue;
            if (!c->fuse_shape)
                add_shape(f, *n, cap);
            else
                rc = fail(c, e,
                          "placeholder {%s} names a parameter outside fuse.shape: one "
                          "fused process runs several configurations, whose %s reach it "
                          "in {configs_json}; add %s to fuse.shape or drop the "
                          "placeholder",
                          *n, *n, *n);
        }
        tp__template_names_free(names);
        if (rc < 0) return rc;
    }
    return 0;
}
