/* config_surrogate: `surrogate: {param: width_mult, value: 0.125, promote: 3,
 * eager: 0.5}`: the search runs its trials with param = value (a scaled-down
 * model the user's script builds from it) and the best `promote`
 * configurations run again with param = 1.0 (search/surrogate.h). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "config/config_internal.h"

static int surrogate_param(cfgctx_t *c, const char *key, yaml_node_t *v) {
    const char *s;
    int rc = tp__cfg_get_string(c, key, v, &s);
    if (rc < 0) return rc;
    if (!tp__is_placeholder_name(s))
        return fail(c, v,
                    "surrogate param \"%s\" must be a placeholder name "
                    "([A-Za-z_][A-Za-z0-9_.-]*), e.g. width_mult",
                    s);
    free((char *)c->x->surrogate.param);
    c->x->surrogate.param = tp__strdup(s);
    return 0;
}

static int surrogate_value(cfgctx_t *c, const char *key, yaml_node_t *v) {
    double d;
    int rc = tp__cfg_get_number(c, key, v, 0, INFINITY, TP_CFG_ABOVE_LO,
                                "the size the surrogate trials run at, scaled down from 1, the "
                                "full size the best configurations are promoted to; e.g. 0.125",
                                &d);
    if (rc < 0) return rc;
    if (d == TP_SURROGATE_FULL)
        return fail(c, v,
                    "\"%s\" must be a number > 0 other than 1 (the full size the best "
                    "configurations are promoted to), e.g. 0.125; got 1",
                    key);
    c->x->surrogate.value = d;
    return 0;
}

static int surrogate_promote(cfgctx_t *c, const char *key, yaml_node_t *v) {
    long long n;
    int rc = tp__cfg_get_int(c, key, v, 1, 1000, &n);
    if (rc == 0) c->x->surrogate.promote = (int)n;
    return rc;
}

static int surrogate_eager(cfgctx_t *c, const char *key, yaml_node_t *v) {
    return tp__cfg_get_number(c, key, v, 0, 1, TP_CFG_ABOVE_LO,
                              "a share: promote once this share of the surrogate trials has "
                              "ended, 1 only at the end, e.g. 0.5",
                              &c->x->surrogate.eager);
}

static const key_spec_t surrogate_keys[] = {
    {"param", surrogate_param, 1, "param: width_mult"},
    {"value", surrogate_value, 1, "value: 0.125"},
    {"promote", surrogate_promote, 0, NULL},
    {"eager", surrogate_eager, 0, NULL},
};
const key_table_t tp__cfg_surrogate_table = KEY_TABLE(surrogate_keys);

/* See config_internal.h. */
int tp__cfg_key_surrogate(cfgctx_t *c, const char *key, yaml_node_t *v) {
    c->surrogate = v;
    return tp__cfg_walk_mapping(c, key, v, surrogate_keys, TP_ARRAY_LEN(surrogate_keys),
                                "surrogate: {param: width_mult, value: 0.125, promote: 3, "
                                "eager: 0.5}");
}

/* See config_internal.h. The parameter is set by tunepack, so it may not be
 * a space parameter, the budget or a built-in placeholder. */
int tp__cfg_check_surrogate(cfgctx_t *c) {
    const tp_experiment_t *x = c->x;
    const char *p = x->surrogate.param;
    if (!p) return 0;
    if (tp__space_find(&x->space, p))
        return fail(c, c->surrogate,
                    "the surrogate param \"%s\" is also a parameter in space; "
                    "tunepack sets it (%g in the search, 1 when promoted): "
                    "remove it from space",
                    p, x->surrogate.value);
    if ((x->budget_name && !strcmp(p, x->budget_name)) || !strcmp(p, "trial_id") ||
        !strcmp(p, "trial_dir"))
        return fail(c, c->surrogate,
                    "the surrogate param \"%s\" is already a placeholder (the "
                    "budget or a built-in); name the width parameter, e.g. "
                    "width_mult",
                    p);
    if (x->nobjectives > 1)
        return fail(c, c->surrogate,
                    "surrogates promote the best by one objective; with several "
                    "objectives remove surrogate (or rank by one: metric: "
                    "{name: ..., mode: ...})");
    return 0;
}
