/* searcher_bohb: the sampler of BOHB (Falkner, Klein and Hutter 2018, "BOHB:
 * Robust and Efficient Hyperparameter Optimization at Scale", alg. 2), to run
 * inside ASHA's rungs (scheduler asha, the default) or Hyperband brackets.
 *
 * The scheduler tells each job's result with its budget (tp__searcher_tell);
 * the sampler keeps the observations D_b of each budget b apart, in a TPE of
 * its own (searcher_tpe, told only that budget's results, with their constraint
 * values under `constraints:`, so each TPE ranks infeasible results last). ask(index):
 *
 *   with probability rho = 1/3 (hpbandster's random_fraction), or when no
 *   budget has |D_b| >= N_min + 2 finite results (N_min = d + 1 for d
 *   modelled parameters; the "+ 2" the paper's arg max asks for, so that both
 *   the good and the bad group hold a point), the random searcher's draw from
 *   (seed, index), identical to `algorithm: random`;
 *   else the TPE of the largest such budget proposes, its model fitted on
 *   that budget's results alone.
 *
 * Where this departs from the paper and hpbandster: the model is tunepack's
 * TPE (Optuna's independent Parzen estimators per parameter, gamma(n) =
 * min(ceil(0.1 n), 25) good, 24 candidates scored by l/g) rather than a
 * multivariate KDE over the top 15% with bandwidth factor 3 (the paper's
 * model, built and measured against this one, did worse under asha, the
 * default, on two of the table's three datasets and on the synthetic
 * curves: docs/search.md, BOHB); its startup is
 * N_min + 2 told results instead of Optuna's 10.
 *
 * Pending configurations: a configuration asked from budget b's model stays
 * pending in b's TPE, in its "above" (bad) group as the TPE's constant liar,
 * until b's next result (any trial's): the asks made from one unchanged
 * model are spread apart, and none lies in D_b once the model has moved on
 * (a trial stopped before b never reports there). Without it the model,
 * which learns nothing new while a bracket's first rung is handed out (its
 * budget's results come at the bracket's end), proposed one configuration
 * over and over: Hyperband's n configurations of a bracket became copies of
 * one (bench/mf_search --table, docs/search.md). The paper's model is
 * sampled (64 draws from the good KDE widened 3 times), so successive draws
 * from one model differ; a TPE's argmax does not without the liar.
 * A result told without a budget (fifo, median) counts at budget +inf, the
 * full run.
 *
 * Determinism: ask(index) is a pure function of (seed, index, the results
 * told per budget, the earlier asks): the random/model coin comes from its
 * own stream seeded by (seed, index); the TPE's draws from (seed, index).
 * Replaying the journaled asks and results in order gives the same configs.
 *
 * Cost: per ask, one TPE ask over one budget's results: O(n log n + P 24 n).
 * Memory: per budget, a TPE's O(max index * P) doubles. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "search/search.h"

#define BOHB_RANDOM_FRACTION (1.0 / 3.0) /* rho: hpbandster's random_fraction */
#define BOHB_MAX_BUDGETS 64              /* distinct budgets modelled (rungs: a few) */
#define BOHB_MAX_INDEX (1u << 26)        /* larger trial numbers are not modelled (as tpe) */
#define BOHB_COIN_STREAM 0x626f6862ULL   /* "bohb": the coin's seed, apart from the draws' */

typedef struct bohb_budget {
    double budget;      /* the rung budget, +inf: told without one */
    tp_searcher_t *tpe; /* its model, told this budget's results only */
    unsigned char *ok;  /* per trial index: 1 when its latest result here is finite */
    size_t cap;         /* entries of ok */
    size_t n;           /* |D_b|: indices with ok set */
    uint64_t *pending;  /* indices its model proposed since its last result, owned */
    size_t npending, pcap;
} bohb_budget_t;

typedef struct bohb_state {
    size_t nmin;      /* N_min = d + 1 */
    bohb_budget_t *b; /* nb budgets, in order of first result */
    size_t nb;
    json_t **asked; /* per trial index: the configuration asked, owned */
    size_t nasked;
} bohb_state_t;

/* Parameters a model learns: not constants, not one-value lists. */
static size_t modelled_params(const tp_space_t *sp) {
    size_t d = 0;
    for (size_t i = 0; i < sp->n; i++) {
        const tp_param_t *p = &sp->params[i];
        if (p->kind == TP_DOM_CONST) continue;
        if ((p->kind == TP_DOM_CHOICE || p->kind == TP_DOM_GRID) && p->nvalues < 2) continue;
        d++;
    }
    return d;
}

static int bohb_init(tp_searcher_t *s, tp_error_t *err) {
    (void)err;
    bohb_state_t *st = tp__xcalloc(1, sizeof *st);
    st->nmin = modelled_params(s->space) + 1;
    s->impl = st;
    return 0;
}

/* The entry of budget b, created on its first result (NULL past
 * BOHB_MAX_BUDGETS). Budgets equal within 1e-9 relative are one. */
static bohb_budget_t *budget_at(tp_searcher_t *s, double b) {
    bohb_state_t *st = s->impl;
    for (size_t k = 0; k < st->nb; k++) {
        double c = st->b[k].budget;
        if (c == b || fabs(c - b) <= 1e-9 * fmax(fabs(c), fabs(b))) return &st->b[k];
    }
    if (st->nb == BOHB_MAX_BUDGETS) return NULL;
    tp_search_cfg_t cfg = s->cfg;
    cfg.algorithm = "tpe";
    cfg.trials = 0;
    cfg.enqueue = NULL;
    cfg.startup = st->nmin + 2;
    tp_searcher_t *tpe = tp__searcher_new(s->space, &cfg, s->maximize, NULL);
    if (!tpe) return NULL;
    st->b = tp__xrealloc(st->b, (st->nb + 1) * sizeof *st->b);
    bohb_budget_t *e = &st->b[st->nb++];
    memset(e, 0, sizeof *e);
    e->budget = b, e->tpe = tpe;
    return e;
}

/* Set whether trial index has a finite result at e. */
static void mark(bohb_budget_t *e, uint64_t index, int ok) {
    if (index >= e->cap) {
        size_t n = e->cap ? e->cap : 64;
        while (n <= index)
            n *= 2;
        e->ok = tp__xrealloc(e->ok, n);
        memset(e->ok + e->cap, 0, n - e->cap);
        e->cap = n;
    }
    e->n += (size_t)(ok && !e->ok[index]);
    e->n -= (size_t)(!ok && e->ok[index]);
    e->ok[index] = (unsigned char)ok;
}

/* The largest budget with |D_b| >= N_min + 2, NULL when none. */
static bohb_budget_t *model_budget(const bohb_state_t *st) {
    bohb_budget_t *best = NULL;
    for (size_t k = 0; k < st->nb; k++)
        if (st->b[k].n >= st->nmin + 2 && (!best || st->b[k].budget > best->budget))
            best = &st->b[k];
    return best;
}

/* See the file comment. Returns 0 past `trials` (when bounded), else 1. */
static int bohb_ask(tp_searcher_t *s, uint64_t index, double now, json_t **out) {
    bohb_state_t *st = s->impl;
    if (s->cfg.trials && index >= s->cfg.trials) return 0;
    tp_rng_t coin;
    tp__rng_seed(&coin, s->cfg.seed ^ BOHB_COIN_STREAM, index);
    bohb_budget_t *e = tp__rng_uniform(&coin) < BOHB_RANDOM_FRACTION ? NULL : model_budget(st);
    if (e) {
        /* the TPE's ask leaves index pending at e, in its "above" group, until
         * e's next result (see the file comment) */
        int rc = e->tpe->ops->ask(e->tpe, index, now, out);
        if (rc != 1) return rc;
        if (e->npending == e->pcap) {
            e->pcap = e->pcap ? 2 * e->pcap : 32;
            e->pending = tp__xrealloc(e->pending, e->pcap * sizeof *e->pending);
        }
        e->pending[e->npending++] = index;
    } else {
        tp_rng_t rng;
        tp__rng_seed(&rng, s->cfg.seed, index);
        *out = tp__space_sample(s->space, &rng);
    }
    if (index < BOHB_MAX_INDEX) {
        if (index >= st->nasked) {
            size_t n = (size_t)index + 1;
            st->asked = tp__xrealloc(st->asked, n * sizeof *st->asked);
            memset(st->asked + st->nasked, 0, (n - st->nasked) * sizeof *st->asked);
            st->nasked = n;
        }
        json_decref(st->asked[index]);
        st->asked[index] = json_incref(*out);
    }
    return 1;
}

/* Trial index's result at budget (NaN: failed there). With config NULL
 * the configuration asked for index is used (ignored if none). */
static void bohb_tell_budget(tp_searcher_t *s, uint64_t index, const json_t *config, double value,
                             double budget, double now) {
    bohb_state_t *st = s->impl;
    if (!config) config = index < st->nasked ? st->asked[index] : NULL;
    if (!config || index >= BOHB_MAX_INDEX) return;
    bohb_budget_t *e = budget_at(s, budget > 0 ? budget : INFINITY);
    if (!e) return;
    const double *cv = tp__searcher_constraint_values(s, index); /* constraints: its TPE's */
    if (cv) tp__searcher_constrain(e->tpe, index, cv);
    e->tpe->ops->tell(e->tpe, index, config, value, now);
    mark(e, index, !isnan(value));
    /* the model has learned something: what it proposed before is pending no more */
    for (size_t k = 0; k < e->npending; k++) {
        uint64_t p = e->pending[k];
        if (p != index && (p >= e->cap || !e->ok[p])) e->tpe->ops->tell(e->tpe, p, NULL, NAN, now);
    }
    e->npending = 0;
}

static void bohb_tell(tp_searcher_t *s, uint64_t index, const json_t *config, double value,
                      double now) {
    bohb_tell_budget(s, index, config, value, INFINITY, now);
}

static uint64_t bohb_total(const tp_searcher_t *s) {
    return s->cfg.trials;
}

static void bohb_destroy(tp_searcher_t *s) {
    bohb_state_t *st = s->impl;
    if (!st) return;
    for (size_t k = 0; k < st->nb; k++) {
        tp__searcher_free(st->b[k].tpe);
        free(st->b[k].ok), free(st->b[k].pending);
    }
    for (size_t i = 0; i < st->nasked; i++)
        json_decref(st->asked[i]);
    free(st->b), free(st->asked), free(st);
    s->impl = NULL;
}

const struct tp_searcher_ops tp__searcher_bohb_ops = {
    .name = "bohb",
    .init = bohb_init,
    .ask = bohb_ask,
    .tell = bohb_tell,
    .tell_budget = bohb_tell_budget,
    .total = bohb_total,
    .destroy = bohb_destroy,
};
