/* config_space: what the space's parameters depend on: `when:` conditions
 * (`width: {int: [8, 64], when: {arch: cnn}}`, `{when: {opt: [sgd, rmsprop]}}`),
 * and the configurations `enqueue` runs first. */
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

/* One `enqueue` entry: a mapping {param: value} checked against the space:
 * each key a parameter, each value in its domain, each given parameter
 * active under the values given (its parents given too). Parameters left
 * out are proposed by the sampler. */
static int enqueue_entry(cfgctx_t *c, yaml_node_t *e, json_t *cfg) {
    const tp_space_t *sp = &c->x->space;
    int rc = tp__cfg_check_mapping(c, "enqueue", e, "enqueue: [{lr: 0.01, layers: 2}]");
    if (rc < 0) return rc;
    for (yaml_node_pair_t *pr = e->data.mapping.pairs.start; pr < e->data.mapping.pairs.top;
         pr++) {
        yaml_node_t *k = tp__cfg_node_at(c, pr->key), *v = tp__cfg_node_at(c, pr->value);
        const tp_param_t *p = tp__space_find(sp, stext(k));
        if (!p) {
            const char *guess = tp__space_did_you_mean(sp, stext(k));
            if (guess)
                return fail(c, k, "enqueued \"%s\" is no parameter of space; did you mean "
                                  "\"%s\"?",
                            stext(k), guess);
            return fail(c, k, "enqueued \"%s\" is no parameter of space", stext(k));
        }
        char got[256];
        json_t *val = v->type == YAML_SCALAR_NODE ? tp__cfg_resolve_scalar(v) : NULL;
        if (!val || !tp__param_contains(p, val)) {
            json_decref(val);
            return fail(c, v, "enqueued %s = %s is outside its domain", p->name,
                        tp__cfg_describe(v, got, sizeof got));
        }
        json_object_set_new(cfg, p->name, val);
    }
    unsigned char *active = tp__xcalloc(sp->n ? sp->n : 1, 1);
    tp__space_active(sp, cfg, active);
    for (yaml_node_pair_t *pr = e->data.mapping.pairs.start;
         rc == 0 && pr < e->data.mapping.pairs.top; pr++) {
        yaml_node_t *k = tp__cfg_node_at(c, pr->key);
        const tp_param_t *p = tp__space_find(sp, stext(k));
        if (active[p - sp->params]) continue;
        char want[128] = "...";
        const tp_cond_t *w = &p->when[0];
        for (size_t j = 0; j < p->nwhen; j++) { /* name the condition that fails */
            const json_t *pv = json_object_get(cfg, p->when[j].parent);
            int hit = 0;
            for (size_t q = 0; pv && q < p->when[j].nvalues; q++)
                hit |= json_equal(pv, p->when[j].values[q]);
            if (!hit) {
                w = &p->when[j];
                break;
            }
        }
        tp__value_text(w->values[0], want, sizeof want);
        rc = fail(c, k, "enqueued \"%s\" is inactive here: it needs %s = %s%s; give %s that "
                        "value or leave \"%s\" out",
                  p->name, w->parent, want, w->nvalues > 1 ? " (or another value listed)" : "",
                  w->parent, p->name);
    }
    free(active);
    return rc;
}

/* `enqueue: [{param: value, ...}, ...]`: configurations that run first, in
 * order. Kept here, checked once the whole file (space, search) is read:
 * tp__cfg_check_enqueue. */
int tp__cfg_key_enqueue(cfgctx_t *c, const char *key, yaml_node_t *v) {
    (void)key;
    if (v->type != YAML_SEQUENCE_NODE)
        return fail(c, v, "enqueue must be a list of configurations, e.g. enqueue: [{lr: 0.01, "
                          "layers: 2}]");
    c->enqueue = v;
    return 0;
}

int tp__cfg_check_enqueue(cfgctx_t *c) {
    if (!c->enqueue) return 0;
    tp_experiment_t *x = c->x;
    if (!strcmp(x->search.algorithm, "grid"))
        return fail(c, c->enqueue, "enqueue does not combine with search: {algorithm: grid}, "
                                   "which runs every point anyway; use random, tpe or nsga2");
    x->enqueue = json_array();
    size_t n = seq_len(c->enqueue);
    if (x->search.trials && n > x->search.trials)
        return fail(c, c->enqueue, "enqueue lists %zu configurations but search.trials is %llu; "
                                   "enqueued ones are the first trials, so raise trials",
                    n, (unsigned long long)x->search.trials);
    for (size_t i = 0; i < n; i++) {
        json_t *cfg = json_object();
        int rc = enqueue_entry(c, tp__cfg_node_at(c, c->enqueue->data.sequence.items.start[i]),
                               cfg);
        if (rc < 0) {
            json_decref(cfg);
            return rc;
        }
        json_array_append_new(x->enqueue, cfg);
    }
    x->search.enqueue = x->enqueue;
    return 0;
}
