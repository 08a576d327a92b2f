/* space_when: conditional parameters. A param with `when` conditions is
 * active only while each parent is active and holds one of the listed
 * values; an inactive param is absent from the configuration. The
 * conditions form a forest (cycles are refused by tp__space_link), so
 * activity is decided parents first, in s->order. */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "space/space.h"

/* Do two JSON scalars stand for the same value? Numbers compare by value
 * (2 and 2.0 are equal), everything else as json_equal. */
static int same_value(const json_t *a, const json_t *b) {
    if (json_is_number(a) && json_is_number(b)) return json_number_value(a) == json_number_value(b);
    return json_equal((json_t *)a, (json_t *)b);
}

/* Can parent p take value v? */
static int parent_takes(const tp_param_t *p, const json_t *v) {
    switch (p->kind) {
    case TP_DOM_CONST:
    case TP_DOM_CHOICE:
    case TP_DOM_GRID:
        for (size_t k = 0; k < p->nvalues; k++)
            if (same_value(p->values[k], v)) return 1;
        return 0;
    case TP_DOM_INT: {
        if (!json_is_number(v)) return 0;
        double x = json_number_value(v);
        return x == floor(x) && x >= p->lo && x <= p->hi;
    }
    default:
        return 0;
    }
}

static void values_text(const tp_param_t *p, char *out, size_t n) {
    size_t k = 0;
    out[0] = 0;
    for (size_t i = 0; i < p->nvalues && k + 1 < n; i++) {
        char t[64];
        if (tp__value_text(p->values[i], t, sizeof t) < 0) snprintf(t, sizeof t, "...");
        int w = snprintf(out + k, n - k, "%s%s", i ? ", " : "", t);
        if (w < 0) break;
        k += (size_t)w;
    }
}

/* Visit i and its parents depth-first, appending to order after its
 * parents (state: 0 new, 1 on the path, 2 done). Returns the index where a
 * cycle closes, or -1. */
static long visit(tp_space_t *s, size_t i, unsigned char *state, size_t *norder,
                  const tp_cond_t **at) {
    if (state[i] == 2) return -1;
    if (state[i] == 1) return (long)i;
    state[i] = 1;
    tp_param_t *p = &s->params[i];
    for (size_t c = 0; c < p->nwhen; c++) {
        long r = visit(s, p->when[c].pidx, state, norder, at);
        if (r >= 0) {
            if (!*at) *at = &p->when[c];
            return r;
        }
    }
    state[i] = 2;
    s->order[(*norder)++] = i;
    return -1;
}

const char *tp__space_did_you_mean(const tp_space_t *s, const char *name) {
    const char **names = tp__xcalloc(s->n ? s->n : 1, sizeof *names);
    for (size_t j = 0; j < s->n; j++)
        names[j] = s->params[j].name;
    const char *guess = tp__did_you_mean(name, names, s->n);
    free(names);
    return guess;
}

/* See space.h. */
int tp__space_link(tp_space_t *s, const tp_cond_t **at, tp_error_t *err) {
    *at = NULL;
    free(s->order);
    s->order = NULL;
    s->conditional = 0;
    for (size_t i = 0; i < s->n; i++) {
        tp_param_t *p = &s->params[i];
        for (size_t c = 0; c < p->nwhen; c++) {
            tp_cond_t *w = &p->when[c];
            *at = w;
            s->conditional = 1;
            const tp_param_t *par = tp__space_find(s, w->parent);
            if (!par) {
                const char *guess = tp__space_did_you_mean(s, w->parent);
                if (guess)
                    return tp__errorf(err, -EINVAL,
                                      "condition of \"%s\" names \"%s\", which is no parameter; "
                                      "did you mean \"%s\"?",
                                      p->name, w->parent, guess);
                return tp__errorf(err, -EINVAL,
                                  "condition of \"%s\" names \"%s\", which is no parameter; "
                                  "a condition names another parameter of space",
                                  p->name, w->parent);
            }
            w->pidx = (size_t)(par - s->params);
            if (par->kind != TP_DOM_CONST && par->kind != TP_DOM_CHOICE &&
                par->kind != TP_DOM_GRID && !(par->kind == TP_DOM_INT))
                return tp__errorf(err, -EINVAL,
                                  "condition of \"%s\" is on \"%s\", a continuous parameter; "
                                  "a condition's parameter must be a choice, grid, constant "
                                  "or int",
                                  p->name, w->parent);
            for (size_t k = 0; k < w->nvalues; k++) {
                if (parent_takes(par, w->values[k])) continue;
                char v[128], known[512];
                if (tp__value_text(w->values[k], v, sizeof v) < 0) snprintf(v, sizeof v, "...");
                if (par->kind == TP_DOM_INT)
                    snprintf(known, sizeof known, "an integer from %.0f to %.0f", par->lo, par->hi);
                else
                    values_text(par, known, sizeof known);
                return tp__errorf(err, -EINVAL,
                                  "condition of \"%s\" asks for %s = %s, a value \"%s\" never "
                                  "takes; its values: %s",
                                  p->name, w->parent, v, w->parent, known);
            }
        }
    }
    *at = NULL;
    if (!s->conditional) return 0;
    s->order = tp__xcalloc(s->n, sizeof *s->order);
    unsigned char *state = tp__xcalloc(s->n, 1);
    size_t norder = 0;
    for (size_t i = 0; i < s->n; i++) {
        long r = visit(s, i, state, &norder, at);
        if (r >= 0) {
            /* the path from the closing param back to itself, for the message */
            char path[600];
            size_t k = (size_t)snprintf(path, sizeof path, "%s", s->params[r].name);
            size_t j = (size_t)r;
            for (size_t hop = 0; hop < s->n && k < sizeof path; hop++) {
                const tp_param_t *p = &s->params[j];
                size_t next = p->when[0].pidx;
                for (size_t c = 0; c < p->nwhen; c++)
                    if (state[p->when[c].pidx] == 1) next = p->when[c].pidx;
                k += (size_t)snprintf(path + k, sizeof path - k, " -> %s", s->params[next].name);
                j = next;
                if (j == (size_t)r) break;
            }
            free(state);
            free(s->order);
            s->order = NULL;
            return tp__errorf(err, -EINVAL,
                              "conditions form a cycle (%s: each is active only when the next "
                              "is); one of them must hold unconditionally",
                              path);
        }
    }
    free(state);
    return 0;
}

void tp__space_active(const tp_space_t *s, const json_t *cfg, unsigned char *active) {
    for (size_t i = 0; i < s->n; i++)
        active[i] = 1;
    if (!s->conditional || !s->order) return;
    for (size_t k = 0; k < s->n; k++) {
        size_t i = s->order[k];
        const tp_param_t *p = &s->params[i];
        for (size_t c = 0; c < p->nwhen && active[i]; c++) {
            const tp_cond_t *w = &p->when[c];
            const json_t *v = json_object_get(cfg, s->params[w->pidx].name);
            int hit = 0;
            for (size_t j = 0; v && active[w->pidx] && j < w->nvalues && !hit; j++)
                hit = same_value(w->values[j], v);
            active[i] = (unsigned char)hit;
        }
    }
}

void tp__space_prune(const tp_space_t *s, json_t *cfg) {
    if (!s->conditional) return;
    unsigned char *active = tp__xcalloc(s->n ? s->n : 1, 1);
    tp__space_active(s, cfg, active);
    for (size_t i = 0; i < s->n; i++)
        if (!active[i]) json_object_del(cfg, s->params[i].name);
    free(active);
}

/* See space.h. Quantization is not checked. */
int tp__param_contains(const tp_param_t *p, const json_t *v) {
    switch (p->kind) {
    case TP_DOM_CONST:
    case TP_DOM_CHOICE:
    case TP_DOM_GRID:
        return parent_takes(p, v);
    case TP_DOM_INT:
        return parent_takes(p, v);
    case TP_DOM_UNIFORM:
    case TP_DOM_LOGUNIFORM:
        return json_is_number(v) && json_number_value(v) >= p->lo && json_number_value(v) <= p->hi;
    case TP_DOM_NORMAL:
        return json_is_number(v) && isfinite(json_number_value(v));
    }
    return 0;
}

int tp__space_check_config(const tp_space_t *s, const json_t *cfg, tp_error_t *err) {
    if (!json_is_object(cfg))
        return tp__errorf(err, -EINVAL, "a configuration must be a mapping {param: value}");
    const char *key;
    json_t *v;
    json_object_foreach((json_t *)cfg, key, v) {
        if (tp__space_find(s, key)) continue;
        return tp__errorf(err, -EINVAL, "\"%s\" is no parameter of space", key);
    }
    unsigned char *active = tp__xcalloc(s->n ? s->n : 1, 1);
    tp__space_active(s, cfg, active);
    int rc = 0;
    for (size_t i = 0; i < s->n && rc == 0; i++) {
        const tp_param_t *p = &s->params[i];
        v = json_object_get(cfg, p->name);
        char t[128] = "";
        if (v && tp__value_text(v, t, sizeof t) < 0) snprintf(t, sizeof t, "...");
        if (!active[i] && v)
            rc = tp__errorf(err, -EINVAL,
                            "\"%s\" is given but inactive here (its condition on \"%s\" does "
                            "not hold); leave it out",
                            p->name, p->when[0].parent);
        else if (active[i] && !v)
            rc = tp__errorf(err, -EINVAL, "\"%s\" is missing; give it a value", p->name);
        else if (active[i] && !tp__param_contains(p, v))
            rc = tp__errorf(err, -EINVAL, "%s = %s is outside its domain", p->name, t);
    }
    free(active);
    return rc;
}
