/* config_space: the space's parameters: one domain each (`lr: {loguniform:
 * [1.0e-4, 1.0]}`, a constant, choice or grid lists), what they depend on
 * (`when:` conditions, `width: {int: [8, 64], when: {arch: cnn}}`,
 * `{when: {opt: [sgd, rmsprop]}}`), and the configurations `enqueue` runs
 * first. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "config/config_internal.h"

/* ---- when: what a parameter depends on -------------------------------------- */

/* One condition `parent: value` or `parent: [v1, v2]` into w. */
static int parse_cond(cfgctx_t *c, const tp_param_t *p, yaml_node_t *k, yaml_node_t *v,
                      tp_cond_t *w) {
    w->parent = tp__strdup(stext(k));
    w->line = (int)k->start_mark.line + 1;
    w->col = (int)k->start_mark.column + 1;
    if (v->type == YAML_MAPPING_NODE)
        return fail(c, v,
                    "condition of \"%s\" on \"%s\" must be a value or a list of values, "
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
            return fail(c, e,
                        "values in the condition of \"%s\" must be numbers or strings, "
                        "not %s",
                        p->name, e->type == YAML_MAPPING_NODE ? "a mapping" : "a list");
        w->values[w->nvalues++] = tp__cfg_resolve_scalar(e);
    }
    return 0;
}

/* A parameter's `when:` mapping into p->when: each key a parent, its value
 * one or a list of values; several keys are all required (AND). 0, or
 * -EINVAL with the place. */
static int param_when(cfgctx_t *c, yaml_node_t *v, tp_param_t *p) {
    int rc = tp__cfg_check_mapping(c, "when", v, "when: {optimizer: sgd}");
    if (rc < 0) return rc;
    size_t n = (size_t)(v->data.mapping.pairs.top - v->data.mapping.pairs.start);
    if (n == 0)
        return fail(c, v, "when of \"%s\" is empty; write e.g. when: {optimizer: sgd}", p->name);
    p->when = tp__xcalloc(n, sizeof *p->when);
    for (yaml_node_pair_t *pr = v->data.mapping.pairs.start; pr < v->data.mapping.pairs.top; pr++) {
        yaml_node_t *k = tp__cfg_node_at(c, pr->key);
        if (!strcmp(stext(k), p->name))
            return fail(c, k, "\"%s\" cannot depend on itself; name another parameter", p->name);
        rc = parse_cond(c, p, k, tp__cfg_node_at(c, pr->value), &p->when[p->nwhen++]);
        if (rc < 0) return rc;
    }
    return 0;
}

/* After the whole space: the conditions resolved and checked (an unknown
 * parameter or value, a cycle) with the position of the condition at
 * fault. 0 or -EINVAL. */
static int link_space(cfgctx_t *c) {
    const tp_cond_t *at;
    tp_error_t e;
    if (tp__space_link(&c->x->space, &at, &e) == 0) return 0;
    yaml_mark_t m = {0, 0, 0};
    if (at) m.line = (size_t)(at->line - 1), m.column = (size_t)(at->col - 1);
    return tp__cfg_fail_at(c, m, "%s", e.msg);
}

/* ---- space: one domain per parameter ----------------------------------------- */

static const char *const domain_keys[] = {"choice", "grid", "uniform", "loguniform", "int",
                                          "normal", "q",    "log",     "when"};
static const tp_domain_kind domain_kinds[] = {TP_DOM_CHOICE,     TP_DOM_GRID, TP_DOM_UNIFORM,
                                              TP_DOM_LOGUNIFORM, TP_DOM_INT,  TP_DOM_NORMAL};
#define NDOMAINS TP_ARRAY_LEN(domain_kinds)
const key_table_t tp__cfg_space_table = KEY_NAMES(domain_keys, "NAME");

/* choice/grid: a list of scalars into p->values. */
static int parse_values(cfgctx_t *c, const char *dk, yaml_node_t *v, tp_param_t *p) {
    if (v->type != YAML_SEQUENCE_NODE) {
        char got[256];
        return fail(c, v, "%s for \"%s\" must be a list, e.g. {%s: [16, 32, 64]}; got %s", dk,
                    p->name, dk, tp__cfg_describe(v, got, sizeof got));
    }
    size_t n = seq_len(v);
    p->values = tp__xcalloc(n ? n : 1, sizeof *p->values);
    for (size_t i = 0; i < n; i++) {
        yaml_node_t *e = tp__cfg_node_at(c, v->data.sequence.items.start[i]);
        if (e->type != YAML_SCALAR_NODE)
            return fail(c, e, "values of %s for \"%s\" must be numbers or strings, not %s", dk,
                        p->name, e->type == YAML_MAPPING_NODE ? "a mapping" : "a list");
        p->values[p->nvalues++] = tp__cfg_resolve_scalar(e);
    }
    return 0;
}

/* uniform/loguniform/normal/int: a list of two numbers (integers for int). */
static int parse_bounds(cfgctx_t *c, const char *dk, yaml_node_t *v, tp_param_t *p) {
    int is_int = p->kind == TP_DOM_INT;
    const char *form = p->kind == TP_DOM_NORMAL ? "[mean, sigma]" : "[low, high]";
    const char *eg = p->kind == TP_DOM_NORMAL ? "[0.0, 1.0]" : is_int ? "[1, 8]" : "[0.0, 1.0]";
    if (v->type != YAML_SEQUENCE_NODE || seq_len(v) != 2) {
        char got[256];
        if (v->type == YAML_SEQUENCE_NODE)
            snprintf(got, sizeof got, "%zu values", seq_len(v));
        else
            tp__cfg_describe(v, got, sizeof got);
        return fail(c, v, "%s for \"%s\" must be %s, got %s; e.g. {%s: %s}", dk, p->name, form, got,
                    dk, eg);
    }
    double b[2];
    for (size_t i = 0; i < 2; i++) {
        yaml_node_t *e = tp__cfg_node_at(c, v->data.sequence.items.start[i]);
        long long iv;
        char got[256];
        if (is_int) {
            if (tp__cfg_node_integer(e, &iv) < 0)
                return fail(c, e, "int bounds of \"%s\" must be integers, got %s; e.g. {int: %s}",
                            p->name, tp__cfg_describe(e, got, sizeof got), eg);
            b[i] = (double)iv;
        } else if (tp__cfg_node_number(e, &b[i]) < 0) {
            return fail(c, e, "%s bounds of \"%s\" must be numbers, got %s; e.g. {%s: %s}", dk,
                        p->name, tp__cfg_describe(e, got, sizeof got), dk, eg);
        }
    }
    p->lo = b[0];
    p->hi = b[1];
    return 0;
}

/* A mapping with one domain key and optional q / log into p (whose name and
 * position are set). *where is set to the node a domain error points at,
 * *qwhere to the one an error about q does. */
static int parse_domain_mapping(cfgctx_t *c, yaml_node_t *v, tp_param_t *p, yaml_node_t **where,
                                yaml_node_t **qwhere) {
    int rc = tp__cfg_check_mapping(c, p->name, v, "{uniform: [0.0, 1.0]}");
    if (rc < 0) return rc;
    yaml_node_t *dkey = NULL, *dval = NULL, *qnode = NULL, *lognode = NULL, *whennode = NULL;
    for (yaml_node_pair_t *pr = v->data.mapping.pairs.start; pr < v->data.mapping.pairs.top; pr++) {
        yaml_node_t *k = tp__cfg_node_at(c, pr->key), *val = tp__cfg_node_at(c, pr->value);
        size_t i;
        for (i = 0; i < TP_ARRAY_LEN(domain_keys) && strcmp(domain_keys[i], stext(k)); i++)
            continue;
        if (i == TP_ARRAY_LEN(domain_keys))
            return tp__cfg_unknown_key(c, k, domain_keys, TP_ARRAY_LEN(domain_keys));
        if (!strcmp(stext(k), "q")) {
            qnode = val;
        } else if (!strcmp(stext(k), "log")) {
            lognode = val;
        } else if (!strcmp(stext(k), "when")) {
            whennode = val;
        } else if (dkey) {
            return fail(c, k, "\"%s\" has two domains (%s and %s); keep one", p->name, stext(dkey),
                        stext(k));
        } else {
            dkey = k;
            dval = val;
            p->kind = domain_kinds[i];
        }
    }
    if (!dkey)
        return fail(c, v,
                    "\"%s\" has no domain; write one of choice, grid, uniform, loguniform, "
                    "int, normal, e.g. {uniform: [0.0, 1.0]}",
                    p->name);
    *where = dval;
    *qwhere = qnode ? qnode : dval;
    if (p->kind == TP_DOM_CHOICE || p->kind == TP_DOM_GRID)
        rc = parse_values(c, stext(dkey), dval, p);
    else
        rc = parse_bounds(c, stext(dkey), dval, p);
    if (rc < 0) return rc;
    char got[256];
    if (qnode) {
        if (p->kind == TP_DOM_CHOICE || p->kind == TP_DOM_GRID)
            return fail(c, qnode,
                        "q of \"%s\" applies only to uniform, loguniform, normal and int "
                        "domains; remove it",
                        p->name);
        if (tp__cfg_node_number(qnode, &p->q) < 0 || !(p->q > 0))
            return fail(c, qnode, "q of \"%s\" must be > 0, got %s; e.g. q: 0.1", p->name,
                        tp__cfg_describe(qnode, got, sizeof got));
    }
    if (lognode) {
        p->log = 0;
        if (tp__cfg_node_bool(lognode, &p->log) < 0)
            return fail(c, lognode, "log of \"%s\" must be true or false, got %s", p->name,
                        tp__cfg_describe(lognode, got, sizeof got));
        if (p->log && p->kind != TP_DOM_INT)
            return fail(c, lognode,
                        "log: true applies only to int domains; for reals write "
                        "{loguniform: [low, high]}");
    }
    return whennode ? param_when(c, whennode, p) : 0;
}

static int parse_param(cfgctx_t *c, yaml_node_t *k, yaml_node_t *v) {
    const char *name = stext(k);
    if (!tp__is_placeholder_name(name))
        return fail(c, k,
                    "parameter name \"%s\" is not valid; use letters, digits, '_', '.' and "
                    "'-', starting with a letter or '_'",
                    name);
    if (!strcmp(name, "trial_id") || !strcmp(name, "trial_dir"))
        return fail(c, k,
                    "parameter name \"%s\" is reserved for the built-in placeholder; rename "
                    "it",
                    name);
    if (tp__cfg_failed_within(c, v)) return -EINVAL; /* a value said to be wrong already */
    tp_param_t p = {.name = tp__strdup(name),
                    .line = (int)k->start_mark.line + 1,
                    .col = (int)k->start_mark.column + 1};
    yaml_node_t *where = v, *qwhere = v;
    int rc = 0;
    if (v->type == YAML_SEQUENCE_NODE) {
        rc = fail(c, v,
                  "\"%s\" is a bare list; use {choice: [...]} to sample from a list or "
                  "{grid: [...]} to try every value",
                  name);
    } else if (v->type == YAML_SCALAR_NODE) {
        p.kind = TP_DOM_CONST;
        p.values = tp__xcalloc(1, sizeof *p.values);
        p.values[p.nvalues++] = tp__cfg_resolve_scalar(v);
    } else {
        rc = parse_domain_mapping(c, v, &p, &where, &qwhere);
    }
    tp_error_t e;
    if (rc == 0 && (rc = tp__param_check(&p, &e)) < 0)
        rc = fail(c, rc == -EDOM ? qwhere : where, "%s", e.msg);
    if (rc < 0) { /* free p's fields through a throwaway space */
        tp_space_t tmp;
        tp__space_init(&tmp);
        tp__space_add(&tmp, &p);
        tp__space_free(&tmp);
        return rc;
    }
    tp__space_add(&c->x->space, &p);
    return 0;
}

int tp__cfg_key_space(cfgctx_t *c, const char *key, yaml_node_t *v) {
    if (v->type == YAML_SCALAR_NODE && is_plain(v) && !*stext(v)) return 0;
    c->space = v;
    int rc = tp__cfg_check_mapping(c, key, v, "space: {lr: {loguniform: [1.0e-4, 1.0]}}");
    if (rc < 0) return rc;
    for (yaml_node_pair_t *p = v->data.mapping.pairs.start; p < v->data.mapping.pairs.top; p++)
        if (parse_param(c, tp__cfg_node_at(c, p->key), tp__cfg_node_at(c, p->value)) < 0)
            rc = -EINVAL; /* every parameter is checked */
    return rc == 0 ? link_space(c) : rc;
}

/* See config_internal.h. */
int tp__cfg_param_failed(const cfgctx_t *c, const char *name) {
    if (!c->space || tp__space_find(&c->x->space, name)) return 0;
    const yaml_node_t *v = c->space;
    if (v->type != YAML_MAPPING_NODE) return tp__cfg_failed_within(c, v);
    for (yaml_node_pair_t *p = v->data.mapping.pairs.start; p < v->data.mapping.pairs.top; p++)
        if (!strcmp(stext(yaml_document_get_node(c->doc, p->key)), name)) return 1;
    return 0;
}

/* One `enqueue` entry: a mapping {param: value} checked against the space:
 * each key a parameter, each value in its domain, each given parameter
 * active under the values given (its parents given too). Parameters left
 * out are proposed by the sampler. */
static int enqueue_entry(cfgctx_t *c, yaml_node_t *e, json_t *cfg) {
    const tp_space_t *sp = &c->x->space;
    int rc = tp__cfg_check_mapping(c, "enqueue", e, "enqueue: [{lr: 0.01, layers: 2}]");
    if (rc < 0) return rc;
    for (yaml_node_pair_t *pr = e->data.mapping.pairs.start; pr < e->data.mapping.pairs.top; pr++) {
        yaml_node_t *k = tp__cfg_node_at(c, pr->key), *v = tp__cfg_node_at(c, pr->value);
        const tp_param_t *p = tp__space_find(sp, stext(k));
        if (!p && tp__cfg_param_failed(c, stext(k))) return -EINVAL; /* said already */
        if (!p) {
            const char *guess = tp__space_did_you_mean(sp, stext(k));
            if (guess)
                return fail(c, k,
                            "enqueued \"%s\" is no parameter of space; did you mean "
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
        rc = fail(c, k,
                  "enqueued \"%s\" is inactive here: it needs %s = %s%s; give %s that "
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
        return fail(c, v,
                    "enqueue must be a list of configurations, e.g. enqueue: [{lr: 0.01, "
                    "layers: 2}]");
    c->enqueue = v;
    return 0;
}

int tp__cfg_check_enqueue(cfgctx_t *c) {
    if (!c->enqueue) return 0;
    tp_experiment_t *x = c->x;
    if (!strcmp(x->search.algorithm, "grid"))
        return fail(c, c->enqueue,
                    "enqueue does not combine with search: {algorithm: grid}, "
                    "which runs every point anyway; use random, tpe or nsga2");
    x->enqueue = json_array();
    size_t n = seq_len(c->enqueue);
    if (x->search.trials && n > x->search.trials)
        return fail(c, c->enqueue,
                    "enqueue lists %zu configurations but search.trials is %llu; "
                    "enqueued ones are the first trials, so raise trials",
                    n, (unsigned long long)x->search.trials);
    for (size_t i = 0; i < n; i++) {
        json_t *cfg = json_object();
        int rc =
            enqueue_entry(c, tp__cfg_node_at(c, c->enqueue->data.sequence.items.start[i]), cfg);
        if (rc < 0) {
            json_decref(cfg);
            return rc;
        }
        json_array_append_new(x->enqueue, cfg);
    }
    x->search.enqueue = x->enqueue;
    return 0;
}
