/* config_pbt: `pbt: {perturbation_interval: 2, quantile: 0.25, explore:
 * {lr: {factors: [0.8, 1.2]}, wd: {resample: 0.25}}, explore_with: pb2}`, the settings of
 * scheduler pbt (search/sched_pbt.c); after the whole file, pbt and the
 * scheduler agree and every explored parameter is in the space. */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "config/config_internal.h"

#define EXPLORE_EG "explore: {lr: {factors: [0.8, 1.2]}, dropout: {resample: 0.25}}"

static int pbt_interval(cfgctx_t *c, const char *key, yaml_node_t *v) {
    return tp__cfg_get_number(c, key, v, 0, INFINITY, TP_CFG_ABOVE_LO,
                              "budget units between exploit/explore steps, e.g. 2",
                              &c->x->pbt.interval);
}

static int pbt_quantile(cfgctx_t *c, const char *key, yaml_node_t *v) {
    return tp__cfg_get_number(c, key, v, 0, 0.5, TP_CFG_ABOVE_LO,
                              "a share: the bottom share copies the top share, e.g. 0.25",
                              &c->x->pbt.quantile);
}

static const char *const explorers[] = {"perturb", "pb2"}; /* by pbt.pb2 */
static const key_table_t explorer_values = KEY_NAMES(explorers, NULL);

static int pbt_explore_with(cfgctx_t *c, const char *key, yaml_node_t *v) {
    const char *s;
    int rc = tp__cfg_get_string(c, key, v, &s);
    if (rc < 0) return rc;
    for (size_t i = 0; i < TP_ARRAY_LEN(explorers); i++)
        if (!strcmp(s, explorers[i])) {
            c->x->pbt.pb2 = (int)i;
            return 0;
        }
    const char *guess = tp__did_you_mean(s, explorers, TP_ARRAY_LEN(explorers));
    if (guess) return fail(c, v, "unknown explore_with \"%s\"; did you mean \"%s\"?", s, guess);
    return fail(c, v,
                "unknown explore_with \"%s\"; use perturb (explore's factors and resampling) "
                "or pb2 (a GP bandit, Parker-Holder et al. 2020)",
                s);
}

static const char *const explore_keys[] = {"resample", "factors"};
static const key_table_t explore_table = KEY_NAMES(explore_keys, "NAME");

/* One parameter's `{resample: P, factors: [...]}` into e. */
static int explore_one(cfgctx_t *c, yaml_node_t *k, yaml_node_t *v, tp_pbt_explore_t *e) {
    if (v->type != YAML_MAPPING_NODE)
        return fail(c, v, "pbt explore of \"%s\" must be a mapping, e.g. {factors: [0.8, 1.2]}",
                    stext(k));
    for (yaml_node_pair_t *p = v->data.mapping.pairs.start; p < v->data.mapping.pairs.top; p++) {
        yaml_node_t *pk = tp__cfg_node_at(c, p->key), *pv = tp__cfg_node_at(c, p->value);
        const char *name = pk->type == YAML_SCALAR_NODE ? stext(pk) : "";
        if (!strcmp(name, "resample")) {
            if (tp__cfg_get_number(c, name, pv, 0, 1, 0, "a probability, e.g. 0.25", &e->resample))
                return -EINVAL;
        } else if (!strcmp(name, "factors")) {
            size_t n = pv->type == YAML_SEQUENCE_NODE ? seq_len(pv) : 0;
            if (n == 0 || n > TP_ARRAY_LEN(e->factors))
                return fail(c, pv,
                            "factors must be a list of 1 to %zu numbers > 0, e.g. [0.8, 1.2]",
                            TP_ARRAY_LEN(e->factors));
            char what[300];
            snprintf(
                what, sizeof what,
                "each factor multiplies the donor's \"%s\" at an explore step, e.g. [0.8, 1.2]",
                stext(k));
            for (size_t i = 0; i < n; i++)
                if (tp__cfg_get_number(c, name,
                                       tp__cfg_node_at(c, pv->data.sequence.items.start[i]), 0,
                                       INFINITY, TP_CFG_ABOVE_LO, what, &e->factors[i]))
                    return -EINVAL;
            e->nfactors = n;
        } else {
            return tp__cfg_unknown_key(c, pk, explore_keys, TP_ARRAY_LEN(explore_keys));
        }
    }
    if (!e->nfactors && !(e->resample > 0))
        return fail(c, v,
                    "pbt explore of \"%s\" changes nothing; give factors, a resample probability "
                    "> 0, or both, e.g. {resample: 0.25, factors: [0.8, 1.2]}",
                    stext(k));
    return 0;
}

static int pbt_explore(cfgctx_t *c, const char *key, yaml_node_t *v) {
    (void)key;
    if (v->type != YAML_MAPPING_NODE)
        return fail(c, v, "pbt explore must be a mapping of parameters, e.g. " EXPLORE_EG);
    size_t n = (size_t)(v->data.mapping.pairs.top - v->data.mapping.pairs.start);
    tp_experiment_t *x = c->x;
    x->pbt_explore = tp__xcalloc(n ? n : 1, sizeof *x->pbt_explore);
    x->pbt.explore = x->pbt_explore;
    x->pbt.nexplore = 0;
    int rc = 0;
    for (yaml_node_pair_t *p = v->data.mapping.pairs.start; p < v->data.mapping.pairs.top; p++) {
        yaml_node_t *k = tp__cfg_node_at(c, p->key), *pv = tp__cfg_node_at(c, p->value);
        if (k->type != YAML_SCALAR_NODE) {
            rc = fail(c, k, "pbt explore's keys must be parameter names");
            continue;
        }
        tp_pbt_explore_t *e = &x->pbt_explore[x->pbt.nexplore];
        memset(e, 0, sizeof *e);
        e->param = tp__strdup(stext(k));
        x->pbt.nexplore++;
        if (explore_one(c, k, pv, e) < 0) rc = -1;
    }
    c->pbt_explore = v;
    return rc < 0 ? -EINVAL : 0;
}

static const key_spec_t pbt_keys[] = {
    {"perturbation_interval", pbt_interval, 1, "perturbation_interval: 2"},
    {"quantile", pbt_quantile, 0, NULL},
    {"explore", pbt_explore, 0, NULL, &explore_table},
    {"explore_with", pbt_explore_with, 0, NULL, .values = &explorer_values},
};
const key_table_t tp__cfg_pbt_table = KEY_TABLE(pbt_keys);

/* See config_internal.h. */
int tp__cfg_key_pbt(cfgctx_t *c, const char *key, yaml_node_t *v) {
    c->pbt = v;
    return tp__cfg_walk_mapping(c, key, v, pbt_keys, TP_ARRAY_LEN(pbt_keys),
                                "pbt: {perturbation_interval: 2, quantile: 0.25, " EXPLORE_EG "}");
}

static int is_range(const tp_param_t *p) {
    return p->kind == TP_DOM_UNIFORM || p->kind == TP_DOM_LOGUNIFORM || p->kind == TP_DOM_INT ||
           p->kind == TP_DOM_NORMAL;
}

/* Whether pbt explores a numeric range (pb2's model chooses those). */
static int pb2_has_numeric(const tp_experiment_t *x) {
    for (size_t i = 0; i < (x->pbt.nexplore ? x->pbt.nexplore : x->space.n); i++) {
        const tp_param_t *p = x->pbt.nexplore ? tp__space_find(&x->space, x->pbt_explore[i].param)
                                              : &x->space.params[i];
        if (p && is_range(p)) return 1;
    }
    return 0;
}

/* See config_internal.h. */
int tp__cfg_check_pbt(cfgctx_t *c) {
    const tp_experiment_t *x = c->x;
    int is_pbt = x->scheduler && !strcmp(x->scheduler, "pbt");
    if (c->pbt && !is_pbt)
        return fail(c, c->pbt,
                    "pbt settings are read by scheduler pbt only; add search: {scheduler: pbt} "
                    "or remove pbt");
    if (!is_pbt) return 0;
    if (!c->pbt)
        return fail(c, c->scheduler,
                    "scheduler pbt needs its settings; add e.g. pbt: {perturbation_interval: 2}");
    if (!c->trials_given)
        return fail(c, c->scheduler,
                    "scheduler pbt trains a population of search.trials configurations; give "
                    "it, e.g. search: {scheduler: pbt, trials: 8}");
    if (x->surrogate.param)
        return fail(c, c->surrogate,
                    "scheduler pbt trains one population; it does not run under surrogate: "
                    "remove surrogate");
    if (x->fuse.max)
        return fail(c, c->fuse,
                    "scheduler pbt copies one trial's checkpoint into another's, which fused "
                    "processes do not keep apart; remove fuse");
    if (x->cluster.kind != TP_CLUSTER_LOCAL && !x->cluster.shared && !x->checkpoint_root)
        return fail(c, c->scheduler,
                    "scheduler pbt copies checkpoints between trials, which needs them where "
                    "the orchestrator reads them: set checkpoint_root to shared storage, or "
                    "cluster.shared: true");
    for (size_t i = 0; i < x->pbt.nexplore; i++) {
        const char *name = x->pbt_explore[i].param;
        const tp_param_t *p = tp__space_find(&x->space, name);
        if (!p && !tp__cfg_param_failed(c, name)) {
            const char *guess = tp__space_did_you_mean(&x->space, name);
            return fail(c, c->pbt_explore,
                        "pbt explores \"%s\", which is no parameter in space%s%s%s", name,
                        guess ? "; did you mean \"" : "", guess ? guess : "", guess ? "\"?" : "");
        }
        if (p && x->pbt_explore[i].nfactors && !is_range(p))
            return fail(c, c->pbt_explore,
                        "pbt explores \"%s\" by factors, but it is not a numeric range; write "
                        "{resample: 0.25} for it",
                        name);
    }
    if (x->pbt.pb2 && !pb2_has_numeric(x) && !tp__cfg_failed_within(c, c->pbt))
        return fail(c, c->pbt,
                    "explore_with pb2 chooses numeric parameters, and none is explored; explore "
                    "one with a range, or use explore_with: perturb");
    return 0;
}
