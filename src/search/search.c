/* search: the table of searchers, chosen by name. */
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "search/search.h"

static const struct tp_searcher_ops *const searcher_table[] = {
    &tp__searcher_grid_ops,  &tp__searcher_random_ops, &tp__searcher_tpe_ops,
    &tp__searcher_nsga2_ops, &tp__searcher_gp_ops,     &tp__searcher_cmaes_ops,
    &tp__searcher_bohb_ops,  &tp__searcher_dehb_ops,
};

const char *const tp__searcher_names[] = {"grid",  "random", "tpe",  "nsga2", "gp",
                                          "cmaes", "bohb",   "dehb", NULL};

void tp__search_json_numbers(const char *text, double *out, size_t n) {
    json_t *a = text ? json_loads(text, 0, NULL) : NULL;
    for (size_t k = 0; k < n; k++) {
        json_t *x = json_array_get(a, k);
        out[k] = json_is_number(x) ? json_number_value(x) : NAN;
    }
    json_decref(a);
}

size_t tp__search_nobj(const tp_search_cfg_t *cfg) {
    return cfg->nobj > 1 ? cfg->nobj : 1;
}

void tp__search_losses(const tp_search_cfg_t *cfg, const double *values, double *loss) {
    for (size_t j = 0; j < tp__search_nobj(cfg); j++)
        loss[j] = (cfg->maximize_mask >> j) & 1 ? -values[j] : values[j];
}

/* Create the searcher named by cfg->algorithm (NULL means "random") over
 * space. Returns NULL with errno and err set when the name is unknown or
 * the searcher's init fails. Free with tp__searcher_free. */
tp_searcher_t *tp__searcher_new(const tp_space_t *space, const tp_search_cfg_t *cfg, int maximize,
                                tp_error_t *err) {
    const char *name = cfg->algorithm ? cfg->algorithm : "random";
    const struct tp_searcher_ops *ops = NULL;
    for (size_t i = 0; i < TP_ARRAY_LEN(searcher_table); i++)
        if (strcmp(searcher_table[i]->name, name) == 0) ops = searcher_table[i];
    if (!ops) {
        tp_buf_t known;
        tp__buf_init(&known);
        for (size_t i = 0; tp__searcher_names[i]; i++)
            tp__buf_printf(&known, "%s%s", i ? ", " : "", tp__searcher_names[i]);
        const char *guess =
            tp__did_you_mean(name, tp__searcher_names, TP_ARRAY_LEN(tp__searcher_names) - 1);
        if (guess)
            tp__errorf(err, -EINVAL,
                       "unknown search algorithm \"%s\"; did you mean \"%s\"? (known: %s)", name,
                       guess, known.data);
        else
            tp__errorf(err, -EINVAL, "unknown search algorithm \"%s\"; known: %s", name,
                       known.data);
        tp__buf_free(&known);
        errno = EINVAL;
        return NULL;
    }
    if (tp__search_nobj(cfg) > 1 && !ops->tell_values) {
        errno = EINVAL;
        tp__errorf(err, -EINVAL,
                   "search algorithm %s optimizes one objective; with several use random, "
                   "grid, tpe or nsga2",
                   ops->name);
        return NULL;
    }
    if (tp__search_nobj(cfg) > TP_MAX_OBJECTIVES) {
        errno = EINVAL;
        tp__errorf(err, -EINVAL, "at most %d objectives", TP_MAX_OBJECTIVES);
        return NULL;
    }
    tp_searcher_t *s = tp__xcalloc(1, sizeof *s);
    s->ops = ops;
    s->space = space;
    s->cfg = *cfg;
    s->cfg.algorithm = ops->name;
    s->maximize = maximize;
    if (tp__search_nobj(cfg) == 1) s->cfg.maximize_mask = maximize ? 1u : 0u;
    int rc = ops->init(s, err);
    if (rc < 0) {
        free(s);
        errno = -rc;
        return NULL;
    }
    return s;
}

void tp__searcher_free(tp_searcher_t *s) {
    if (!s) return;
    if (s->ops && s->ops->destroy) s->ops->destroy(s);
    free(s->cvals);
    free(s);
}

#define CONSTRAINED_MAX_INDEX (1u << 26) /* larger trial numbers keep no constraint values */

void tp__searcher_constrain(tp_searcher_t *s, uint64_t index, const double *values) {
    size_t k = s->cfg.nconstraints;
    if (k == 0 || index >= CONSTRAINED_MAX_INDEX) return;
    if (index >= s->ncvals) {
        size_t old = s->ncvals;
        s->cvals = tp__xgrow(s->cvals, &s->ncvals, index + 1, k * sizeof *s->cvals, 64);
        for (size_t i = old * k; i < s->ncvals * k; i++)
            s->cvals[i] = NAN;
    }
    memcpy(s->cvals + index * k, values, k * sizeof *values);
}

const double *tp__searcher_constraint_values(const tp_searcher_t *s, uint64_t index) {
    size_t k = s->cfg.nconstraints;
    if (k == 0 || index >= s->ncvals) return NULL;
    return s->cvals + index * k; /* every NaN when never given: missing, as none reported */
}

double tp__searcher_violation(const tp_searcher_t *s, uint64_t index) {
    size_t k = s->cfg.nconstraints;
    if (k == 0) return 0;
    const double *v = tp__searcher_constraint_values(s, index);
    return v ? tp__constraint_violation(s->cfg.constraints, k, v) : INFINITY;
}

void tp__searcher_tell(tp_searcher_t *s, uint64_t index, const json_t *config, double value,
                       double budget, double now) {
    if (s->ops->tell_budget)
        s->ops->tell_budget(s, index, config, value, budget, now);
    else
        s->ops->tell(s, index, config, value, now);
}

int tp__searcher_ask(tp_searcher_t *s, uint64_t index, double budget, double now, json_t **out) {
    int rc = s->ops->ask_budget ? s->ops->ask_budget(s, index, budget, now, out)
                                : s->ops->ask(s, index, now, out);
    const json_t *given = json_array_get(s->cfg.enqueue, (size_t)index);
    if (rc != 1 || !given) return rc;
    json_object_update(*out, (json_t *)given);
    /* a parent changed by the given values may make a proposed child
     * inactive; a child it activates keeps the sampler's draw when
     * proposed, else it is drawn here */
    if (s->space->conditional) {
        tp_rng_t rng;
        tp__rng_seed(&rng, s->cfg.seed ^ 0x656e7175657565ULL, index);
        json_t *full = tp__space_sample_full(s->space, &rng);
        json_object_update(full, *out);
        json_decref(*out);
        tp__space_prune(s->space, full);
        *out = full;
    }
    return 1;
}
