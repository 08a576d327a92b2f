/* config_deadline: tuning against a deadline: `deadline` (a duration from
 * the start of the run: the best model when time is up is what counts) and
 * `reallocation` (how GPUs freed by stopped trials go to the leading
 * trials; see search/realloc.h). */
#include <math.h>
#include <string.h>

#include "config/config_internal.h"
#include "search/realloc.h"

/* See config_internal.h. */
int tp__cfg_key_deadline(cfgctx_t *c, const char *key, yaml_node_t *v) {
    return tp__cfg_get_duration(c, key, v, &c->x->deadline_s); /* refuses 0 and below */
}

static int realloc_policy(cfgctx_t *c, const char *key, yaml_node_t *v) {
    const char *s;
    int rc = tp__cfg_get_string(c, key, v, &s);
    if (rc < 0) return rc;
    int p = tp__realloc_policy_parse(s);
    if (p >= 0) {
        c->x->realloc.policy = (tp_realloc_policy_t)p;
        return 0;
    }
    const char *guess = tp__did_you_mean(s, tp__realloc_policy_names, 3);
    if (guess)
        return fail(c, v, "unknown reallocation policy \"%s\"; did you mean \"%s\"?", s, guess);
    return fail(c, v, "unknown reallocation policy \"%s\"; use uniform, top-job or softmax", s);
}

static int realloc_min_gain(cfgctx_t *c, const char *key, yaml_node_t *v) {
    return tp__cfg_get_number(c, key, v, 1, INFINITY, TP_CFG_ABOVE_LO,
                              "the modelled speed-up a resize must beat, e.g. 1.1",
                              &c->x->realloc.min_gain);
}

static int realloc_temperature(cfgctx_t *c, const char *key, yaml_node_t *v) {
    return tp__cfg_get_number(c, key, v, 0, INFINITY, TP_CFG_ABOVE_LO,
                              "softmax over scores, e.g. 1", &c->x->realloc.temperature);
}

static int realloc_cooldown(cfgctx_t *c, const char *key, yaml_node_t *v) {
    return tp__cfg_get_duration(c, key, v, &c->x->realloc.cooldown_s);
}

static int realloc_probe(cfgctx_t *c, const char *key, yaml_node_t *v) {
    if (tp__cfg_node_bool(v, &c->x->realloc.probe) == 0) return 0;
    char got[256];
    return fail(c, v, "\"%s\" must be true or false, got %s", key,
                tp__cfg_describe(v, got, sizeof got));
}

static const key_table_t realloc_policies = KEY_LIST(tp__realloc_policy_names);
static const key_spec_t realloc_keys[] = {
    {"policy", realloc_policy, 0, NULL, .values = &realloc_policies},
    {"min_gain", realloc_min_gain, 0, NULL},
    {"cooldown", realloc_cooldown, 0, NULL},
    {"temperature", realloc_temperature, 0, NULL},
    {"probe", realloc_probe, 0, NULL},
};
const key_table_t tp__cfg_reallocation_table = KEY_TABLE(realloc_keys);

/* See config_internal.h. */
int tp__cfg_key_reallocation(cfgctx_t *c, const char *key, yaml_node_t *v) {
    c->x->realloc_given = 1;
    return tp__cfg_walk_mapping(c, key, v, realloc_keys, TP_ARRAY_LEN(realloc_keys),
                                "reallocation: {policy: uniform, min_gain: 1.1, cooldown: 60s}");
}
