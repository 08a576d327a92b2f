/* config_space: what the space's parameters depend on: `when:` conditions
 * (`width: {int: [8, 64], when: {arch: cnn}}`, `{when: {opt: [sgd, rmsprop]}}`). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "config/config_internal.h"

static size_t seq_len(const yaml_node_t *v) {
    return (size_t)(v->data.sequence.items.top - v->data.sequence.items.start);
}

/* One condition `parent: value` or `parent: [v1, v2]` into w. */
static int parse_cond(cfgctx_t *c, const tp_param_t *p, yaml_node_t *k, yaml_node_t *v,
                      tp_cond_t *w) {
    w->parent = tp__strdup(stext(k));
    w->line = (int)k->start_mark.line + 1;
    w->col = (int)k->start_mark.column + 1;
    if (v->type == YAML_MAPPING_NODE)
        return fail(c, v, "condition of \"%s\" on \"%s\" must be a value or a list of values, "
                          "e.g. when: {%s: [a, b]}",
                    p->name, w->parent, w->parent);
    size_t n = v->type == YAML_SEQUENCE_NODE ? seq_len(v) : 1;
    if (n == 0)
        return fail(c, v, "condition of \"%s\" on \"%s\" lists no value; list at least one",
                    p->name, w->parent);
    w->values = tp__xcalloc(n, sizeof *w->values);
    for (size_t i = 0; i < n; i++) {
        yaml_node_t *e =
            v->type == YAML_SEQUENCE_NODE ? tp__cfg_node_at(c, v->data.sequence.items.start[i]) : v;
        if (e->type != YAML_SCALAR_NODE)
            return fail(c, e, "values in the condition of \"%s\" must be numbers or strings, "
                              "not %s",
                        p->name, e->type == YAML_MAPPING_NODE ? "a mapping" : "a list");
        w->values[w->nvalues++] = tp__cfg_resolve_scalar(e);
    }
    return 0;
}

/* See config_internal.h. Several keys are all required (AND). */
int tp__cfg_param_when(cfgctx_t *c, yaml_node_t *v, tp_param_t *p) {
    int rc = tp__cfg_check_mapping(c, "when", v, "when: {optimizer: sgd}");
    if (rc < 0) return rc;
    size_t n = (size_t)(v->data.mapping.pairs.top - v->data.mapping.pairs.start);
    if (n == 0)
        return fail(c, v, "when of \"%s\" is empty; write e.g. when: {optimizer: sgd}", p->name);
    p->when = tp__xcalloc(n, sizeof *p->when);
    for (yaml_node_pair_t *pr = v->data.mapping.pairs.start; pr < v->data.mapping.pairs.top;
         pr++) {
        yaml_node_t *k = tp__cfg_node_at(c, pr->key);
        if (!strcmp(stext(k), p->name))
            return fail(c, k, "\"%s\" cannot depend on itself; name another parameter", p->name);
        rc = parse_cond(c, p, k, tp__cfg_node_at(c, pr->value), &p->when[p->nwhen++]);
        if (rc < 0) return rc;
    }
    return 0;
}

int tp__cfg_link_space(cfgctx_t *c) {
    const tp_cond_t *at;
    tp_error_t e;
    if (tp__space_link(&c->x->space, &at, &e) == 0) return 0;
    yaml_mark_t m = {0, 0, 0};
    if (at) m.line = (size_t)(at->line - 1), m.column = (size_t)(at->col - 1);
    return tp__cfg_fail_at(c, m, "%s", e.msg);
}
