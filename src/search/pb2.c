/* pb2: see pb2.h. PB2 in the form this file gives it:
 *
 *   data        each ok job of a trial that started from a known value (its
 *               own last one, or its donor's after an exploit; a first job
 *               gives none): the time t its job started at (budget /
 *               budget.max), its numeric explored parameters mapped to
 *               [0,1] (linearly; loguniform and log int in log space;
 *               normal mean +- 3 sd) and the gain over the job;
 *   model       an exact GP over (parameters, t) under the paper's
 *               time-varying kernel (gp.h's _timed: Matérn 5/2 in the
 *               parameters times exp(-|t - t'| / ls_t), the paper's
 *               (1 - ε)^{|t-t'|/2}), hyperparameters by maximum marginal
 *               likelihood, on the newest 128 observations with their gains
 *               standardised; fitted once per generation, at its time;
 *   choice      for each bottom trial of the generation in turn, GP-UCB
 *               at the generation's time: mean + κ sd, κ² = β_g = 0.4
 *               log(g² π² / (6 δ)) (Srinivas et al. 2010's β_t for round g,
 *               the model's generation 1, 2, ..., δ = 0.1, scaled by 1/5 as
 *               is usual in practice), maximized over the box by 256
 *               uniform candidates, the donor's point and the window's
 *               points, then a coordinate search from the best (steps 0.1,
 *               0.03, 0.01). The mean is the data's; the sd is that of the
 *               GP conditioned also on the points chosen before in this
 *               generation (the paper's parallel batch, as GP-BUCB), so a
 *               batch spreads out;
 *   too little  fewer than 4 observations (the first generation has none):
 *               no model, and the caller explores as pbt does.
 *
 * Departures from the paper and from Ray Tune's PB2, and why: the spatial
 * kernel is gp.c's Matérn 5/2 with a length scale per parameter (the paper
 * and Ray use a squared exponential); the window is the newest 128
 * observations (Ray picks a window length by likelihood; the time kernel
 * already discounts old data); Ray also feeds the reward before the
 * interval as an input, which the paper does not; choice parameters are
 * resampled as pbt does (the paper's PB2 is for continuous parameters).
 *
 * Determinism: the fit and the posterior are pure functions of the
 * observations, told in the order of the results, which a resumed run
 * replays; the candidates come from the caller's rng. */
#include "search/pb2.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "search/gp.h"

#define PB2_WINDOW 128     /* newest observations the GP is fitted on */
#define PB2_MIN_OBS 4      /* fewer: no model */
#define PB2_CANDIDATES 256 /* uniform candidates per choice */
#define PB2_DELTA 0.1      /* GP-UCB's confidence parameter */
#define PB2_NORMAL_SPAN 3.0

struct tp_pb2 {
    const tp_param_t *params[TP_PB2_MAX_PARAMS];         /* the modelled parameters, borrowed */
    double lo[TP_PB2_MAX_PARAMS], hi[TP_PB2_MAX_PARAMS]; /* internal range mapped to [0,1] */
    int log[TP_PB2_MAX_PARAMS];                          /* internal value is log(value) */
    size_t d;                                            /* parameters; GP inputs d + 1 */
    double *x, *y; /* observations: n rows of (u[0..d), t), and gains, owned */
    size_t n, cap;
    /* the generation being chosen for */
    int fitted;        /* a model stands */
    size_t gen;        /* generations fitted so far (GP-UCB's round) */
    double t;          /* its time */
    double ymean, ysd; /* the window's gains, for standardising */
    double ls[TP_PB2_MAX_PARAMS + 1], amp, noise;
    double *wx, *wy; /* the window then the batch's points: rows (u, t), standardised gains */
    size_t nw, nbatch;
    tp_gp_t mean, var; /* the data; the data and the batch */
};

static int numeric(const tp_param_t *p) {
    return p->kind == TP_DOM_UNIFORM || p->kind == TP_DOM_LOGUNIFORM || p->kind == TP_DOM_INT ||
           p->kind == TP_DOM_NORMAL;
}

tp_pb2_t *tp__pb2_new(const tp_space_t *space, const tp_pbt_explore_t *explore, size_t n,
                      tp_error_t *err) {
    tp_pb2_t *p = tp__xcalloc(1, sizeof *p);
    for (size_t i = 0; i < n; i++) {
        const tp_param_t *q = tp__space_find(space, explore[i].param);
        if (!q || !numeric(q)) continue;
        double lo = q->lo, hi = q->hi;
        int lg = q->kind == TP_DOM_LOGUNIFORM || (q->kind == TP_DOM_INT && q->log);
        if (lg) lo = log(lo), hi = log(hi);
        if (q->kind == TP_DOM_NORMAL)
            lo = q->lo - PB2_NORMAL_SPAN * q->hi, hi = q->lo + PB2_NORMAL_SPAN * q->hi;
        if (!(lo < hi) || !isfinite(lo) || !isfinite(hi)) continue;
        if (p->d == TP_PB2_MAX_PARAMS) {
            tp__errorf(err, -EINVAL,
                       "pbt explore_with pb2 chooses at most %d numeric parameters; explore "
                       "fewer, or use explore_with: perturb",
                       TP_PB2_MAX_PARAMS);
            free(p);
            return NULL;
        }
        p->params[p->d] = q, p->lo[p->d] = lo, p->hi[p->d] = hi, p->log[p->d] = lg;
        p->d++;
    }
    if (!p->d) {
        tp__errorf(err, -EINVAL,
                   "pbt explore_with pb2 chooses numeric parameters, and none is explored; "
                   "explore one with a range, or use explore_with: perturb");
        free(p);
        return NULL;
    }
    return p;
}

void tp__pb2_free(tp_pb2_t *p) {
    if (!p) return;
    tp__gp_free(&p->mean), tp__gp_free(&p->var);
    free(p->x), free(p->y), free(p->wx), free(p->wy);
    free(p);
}

int tp__pb2_index(const tp_pb2_t *p, const char *name) {
    for (size_t i = 0; p && i < p->d; i++)
        if (!strcmp(p->params[i]->name, name)) return (int)i;
    return -1;
}

/* config's parameters in [0,1] into u[0..d) (a missing one at 0.5). */
static void to_unit(const tp_pb2_t *p, const json_t *config, double *u) {
    for (size_t i = 0; i < p->d; i++) {
        const json_t *v = json_object_get(config, p->params[i]->name);
        double x = json_is_number(v) ? json_number_value(v) : NAN;
        if (p->log[i]) x = x > 0 ? log(x) : NAN;
        x = (x - p->lo[i]) / (p->hi[i] - p->lo[i]);
        u[i] = isnan(x) ? 0.5 : x < 0 ? 0 : x > 1 ? 1 : x;
    }
}

void tp__pb2_observe(tp_pb2_t *p, double t, const json_t *config, double gain) {
    if (!isfinite(gain) || !isfinite(t)) return;
    size_t w = p->d + 1;
    if (p->n == p->cap) {
        size_t old = p->cap;
        p->y = tp__xgrow(p->y, &p->cap, p->n + 1, sizeof *p->y, 64);
        p->x = tp__xresize(p->x, old, p->cap, w * sizeof *p->x); /* rows of w */
    }
    to_unit(p, config, &p->x[p->n * w]);
    p->x[p->n * w + p->d] = t;
    p->y[p->n++] = gain;
}

int tp__pb2_fit(tp_pb2_t *p, double t) {
    size_t w = p->d + 1;
    p->fitted = 0;
    p->nbatch = 0;
    p->t = t;
    tp__gp_free(&p->mean), tp__gp_free(&p->var);
    if (p->n < PB2_MIN_OBS) return 0;
    size_t first = p->n > PB2_WINDOW ? p->n - PB2_WINDOW : 0;
    p->nw = p->n - first;
    /* room for the batch: at most one point per window row is more than any generation */
    p->wx = tp__xrealloc(p->wx, 2 * p->nw * w * sizeof *p->wx);
    p->wy = tp__xrealloc(p->wy, 2 * p->nw * sizeof *p->wy);
    memcpy(p->wx, &p->x[first * w], p->nw * w * sizeof *p->wx);
    double m = 0, q = 0;
    for (size_t i = 0; i < p->nw; i++)
        m += p->y[first + i] / (double)p->nw;
    for (size_t i = 0; i < p->nw; i++)
        q += (p->y[first + i] - m) * (p->y[first + i] - m);
    double sd = sqrt(q / (double)p->nw);
    p->ymean = m, p->ysd = sd > 1e-12 ? sd : 1;
    for (size_t i = 0; i < p->nw; i++)
        p->wy[i] = (p->y[first + i] - m) / p->ysd;
    if (tp__gp_fit_hyper_timed(p->wx, p->wy, p->nw, w, p->ls, &p->amp, &p->noise) != 0 ||
        tp__gp_condition_timed(&p->mean, p->wx, p->wy, p->nw, w, p->ls, p->amp, p->noise) != 0 ||
        tp__gp_condition_timed(&p->var, p->wx, p->wy, p->nw, w, p->ls, p->amp, p->noise) != 0) {
        tp__gp_free(&p->mean), tp__gp_free(&p->var);
        return 0;
    }
    p->gen++;
    p->fitted = 1;
    return 1;
}

/* The upper confidence bound at u (d parameters, then the generation's time in u[d]). */
static double ucb(const tp_pb2_t *p, const double *u, double kappa) {
    double mean, var, m1, var1;
    tp__gp_predict(&p->mean, u, &mean, &var);
    tp__gp_predict(&p->var, u, &m1, &var1);
    return mean + kappa * sqrt(var1);
}

int tp__pb2_choose(tp_pb2_t *p, const json_t *donor, tp_rng_t *rng, double *values) {
    if (!p->fitted) return 0;
    size_t w = p->d + 1;
    double g = (double)p->gen;
    double kappa = sqrt(0.4 * log(g * g * M_PI * M_PI / (6 * PB2_DELTA)));
    double best[TP_PB2_MAX_PARAMS + 1], u[TP_PB2_MAX_PARAMS + 1], fb;
    /* the donor's point, the window's points, then uniform candidates */
    to_unit(p, donor, best);
    best[p->d] = u[p->d] = p->t;
    fb = ucb(p, best, kappa);
    for (size_t i = 0; i < p->nw + PB2_CANDIDATES; i++) {
        for (size_t j = 0; j < p->d; j++)
            u[j] = i < p->nw ? p->wx[i * w + j] : tp__rng_uniform(rng);
        double f = ucb(p, u, kappa);
        if (f > fb) fb = f, memcpy(best, u, p->d * sizeof *u);
    }
    /* a coordinate search from the best */
    static const double steps[] = {0.1, 0.03, 0.01};
    for (size_t s = 0; s < sizeof steps / sizeof steps[0]; s++)
        for (int moved = 1, rounds = 0; moved && rounds < 20; rounds++) {
            moved = 0;
            for (size_t j = 0; j < p->d; j++)
                for (int sign = -1; sign <= 1; sign += 2) {
                    memcpy(u, best, w * sizeof *u);
                    u[j] += sign * steps[s];
                    if (u[j] < 0 || u[j] > 1) continue;
                    double f = ucb(p, u, kappa);
                    if (f > fb) fb = f, memcpy(best, u, w * sizeof *u), moved = 1;
                }
        }
    for (size_t j = 0; j < p->d; j++) {
        double x = p->lo[j] + best[j] * (p->hi[j] - p->lo[j]);
        values[j] = p->log[j] ? exp(x) : x;
    }
    /* the choice joins the batch: a point at the data's mean, which only the variance sees */
    if (p->nw + p->nbatch < 2 * p->nw) {
        double mean, var;
        tp__gp_predict(&p->mean, best, &mean, &var);
        size_t at = p->nw + p->nbatch++;
        memcpy(&p->wx[at * w], best, w * sizeof *best);
        p->wy[at] = mean;
        if (tp__gp_condition_timed(&p->var, p->wx, p->wy, at + 1, w, p->ls, p->amp, p->noise)) {
            p->nbatch--; /* without it (the batch before it was conditioned once already) */
            if (tp__gp_condition_timed(&p->var, p->wx, p->wy, at, w, p->ls, p->amp, p->noise))
                p->fitted = 0;
        }
    }
    return 1;
}
