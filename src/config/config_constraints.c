/* config_constraints: `constraints: [{metric: mem_gb, max: 8}, {metric:
 * latency_ms, min: 1, max: 20}]`, bounds on metrics the trials report; a
 * trial is feasible when its last report satisfies every bound
 * (search/constraint.h says the rule). */
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "config/config_internal.h"

/* The entry being read: the one after the last counted. */
static tp_constraint_t *current(cfgctx_t *c) {
    return &c->x->constraints[c->x->nconstraints];
}

static int constraint_metric(cfgctx_t *c, const char *key, yaml_node_t *v) {
    const char *s;
    int rc = tp__cfg_get_string(c, key, v, &s);
    if (rc < 0) return rc;
    for (size_t i = 0; i < c->x->nconstraints; i++)
        if (!strcmp(c->x->constraints[i].metric, s))
            return fail(c, v,
                        "metric \"%s\" is constrained twice; write one entry with both bounds, "
                        "e.g. {metric: %s, min: 1, max: 8}",
                        s, s);
    free((char *)current(c)->metric);
    current(c)->metric = tp__strdup(s);
    return 0;
}

static int constraint_min(cfgctx_t *c, const char *key, yaml_node_t *v) {
    return tp__cfg_get_number(c, key, v, -INFINITY, INFINITY, 0,
                              "a constraint's lower bound: a feasible trial reports at least "
                              "this, e.g. {metric: latency_ms, min: 1}",
                              &current(c)->min);
}

static int constraint_max(cfgctx_t *c, const char *key, yaml_node_t *v) {
    return tp__cfg_get_number(c, key, v, -INFINITY, INFINITY, 0,
                              "a constraint's upper bound: a feasible trial reports at most "
                              "this, e.g. {metric: mem_gb, max: 8}",
                              &current(c)->max);
}

static const key_spec_t constraint_keys[] = {
    {"metric", constraint_metric, 1, "metric: mem_gb"},
    {"min", constraint_min, 0, NULL},
    {"max", constraint_max, 0, NULL},
};
const key_table_t tp__cfg_constraints_table = {constraint_keys, NULL, TP_ARRAY_LEN(constraint_keys),
                                               "[]"};

#define EXAMPLE "constraints: [{metric: mem_gb, max: 8}, {metric: latency_ms, max: 20}]"

/* One entry into constraints[nconstraints], checked, then counted. */
static int one_constraint(cfgctx_t *c, yaml_node_t *v) {
    tp_constraint_t *k = current(c);
    *k = (tp_constraint_t){.min = -INFINITY, .max = INFINITY};
    int rc = tp__cfg_walk_mapping(c, "constraint", v, constraint_keys,
                                  TP_ARRAY_LEN(constraint_keys), "{metric: mem_gb, max: 8}");
    if (rc == 0 && isinf(k->min) && isinf(k->max))
        rc = fail(c, v,
                  "constraint on \"%s\" has no bound; give max, min or both, e.g. "
                  "{metric: %s, max: 8}",
                  k->metric, k->metric);
    if (rc == 0 && k->min > k->max)
        rc = fail(c, v, "constraint on \"%s\": min %g is above max %g; write min <= max", k->metric,
                  k->min, k->max);
    if (rc < 0) {
        free((char *)k->metric);
        k->metric = NULL;
        return rc;
    }
    c->x->nconstraints++;
    return 0;
}

int tp__cfg_key_constraints(cfgctx_t *c, const char *key, yaml_node_t *v) {
    if (v->type != YAML_SEQUENCE_NODE)
        return fail(c, v, "\"%s\" must be a list of bounds on reported metrics, e.g. %s", key,
                    EXAMPLE);
    size_t n = seq_len(v);
    if (n > TP_MAX_CONSTRAINTS)
        return fail(c, v, "constraints lists %zu bounds; at most %d", n, TP_MAX_CONSTRAINTS);
    tp_experiment_t *x = c->x;
    x->constraints = tp__xcalloc(TP_MAX_CONSTRAINTS, sizeof *x->constraints);
    int rc = 0;
    for (size_t i = 0; i < n; i++)
        if (one_constraint(c, tp__cfg_node_at(c, v->data.sequence.items.start[i])) < 0)
            rc = -EINVAL;
    x->search.constraints = x->constraints;
    x->search.nconstraints = x->nconstraints;
    c->constraints = v;
    return rc;
}

int tp__cfg_check_constraints(cfgctx_t *c) {
    if (!c->x->nconstraints || !c->x->surrogate.param) return 0;
    return fail(c, c->constraints,
                "constraints with surrogate are not supported: the sampler sees the surrogates' "
                "reports only; remove one of them");
}

void tp__cfg_constraints_free(tp_experiment_t *x) {
    for (size_t i = 0; x->constraints && i < x->nconstraints; i++)
        free((char *)x->constraints[i].metric);
    free(x->constraints);
}
