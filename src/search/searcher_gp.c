/* searcher_gp: Bayesian optimization with an exact Gaussian process (gp.h):
 *
 *   startup        until max(10, min(2 P, 20)) trials (P modelled params)
 *                  have a told finite value, trial i is the random
 *                  searcher's draw from (seed, i);
 *   inputs         each param mapped to [0,1]: uniform, int and normal
 *                  (mean +- 3 sigma) linearly, loguniform and log int in log
 *                  space; choices one-hot (one column per value); a value
 *                  missing (inactive param) sits at 0.5, or at all zeros
 *                  for a choice. At most 64 columns;
 *   outputs        losses (maximized metrics negated) standardised;
 *   model          Matérn 5/2 with ARD length scales, signal and noise
 *                  variance fitted as gp.h says, on at most 100 told trials
 *                  (past that: the 50 best and 50 spread evenly over the
 *                  rest), then conditioned on every told trial;
 *   acquisition    log expected improvement over the best standardised
 *                  loss, maximized over 600 uniform candidates and 200
 *                  Gaussian steps (sd 0.1) around the best told trial, then
 *                  a coordinate search from the 3 best (steps 0.05, 0.01,
 *                  0.002, and every other value of each choice);
 *   constant liar  a configuration asked and not yet told is an observation
 *                  at the best loss so far (CL-min): the posterior there is
 *                  already at the incumbent, so EI near it vanishes and
 *                  parallel asks spread out. Hyperparameters are fitted on
 *                  told trials only.
 *
 * Constraints (cfg.constraints): constrained EI (Gardner et al. 2014, Gelbart
 * et al. 2014, as Optuna's GPSampler does with constraints_func): one more
 * GP per constraint, fitted the same way on the told trials that reported
 * its metric, and the acquisition is log EI plus, for each constraint, the
 * log of the posterior probability that the metric lies inside its bounds.
 * The objective's GP is fitted on every told trial; EI's incumbent is the
 * best feasible told trial, and while none is feasible the acquisition is
 * the log probability of feasibility alone (local candidates then centre
 * on the least violating trial). Pending asks are liars for the objective
 * only.
 *
 * Integers and quantized values are continuous in the model and rounded on
 * output; a told configuration is read back at its rounded value.
 *
 * Failed trials (told NaN) are left out and do not count toward the
 * startup. A later tell for the same index replaces the value.
 *
 * Determinism: ask(index) is a pure function of (seed, index, the told
 * observations, the pending asks other than index itself): its rng is
 * seeded by (seed, index) and draws the random searcher's configuration
 * first, then the candidates; the fit is deterministic.
 *
 * Cost per ask with n observations, C columns: O(iterations * 100³) for the
 * fit, O(n³) to condition, O(1100 * (n² + n C)) for the acquisition
 * (bench/gp_ask.c measures it). */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "search/gp.h"
#include "search/search.h"

#define GP_MAX_COLS 64    /* input columns the model takes */
#define GP_FIT_MAX 100    /* told trials the hyperparameters are fitted on */
#define GP_CANDIDATES 600 /* uniform candidates per ask */
#define GP_LOCAL 200      /* candidates around the best told trial */
#define GP_LOCAL_SD 0.1
#define GP_STARTS 3             /* coordinate searches */
#define GP_MAX_INDEX (1u << 24) /* larger trial numbers are not modelled */
#define GP_NORMAL_SPAN 3.0

enum { COL_SKIP, COL_NUM, COL_CAT };
enum { OBS_NONE, OBS_PENDING, OBS_TOLD };

typedef struct gp_dim {
    int kind;      /* COL_SKIP, COL_NUM, COL_CAT */
    size_t col;    /* first column */
    int log;       /* internal value is log(value) */
    double lo, hi; /* internal range mapped to [0,1] */
} gp_dim_t;

typedef struct gp_obs {
    double *u;                     /* ncols coordinates, owned */
    double value;                  /* told value (NaN: failed) */
    double cv[TP_MAX_CONSTRAINTS]; /* constraints: the told values (NaN: not reported) */
    double violation;              /* constraints: their total violation (0: feasible) */
    int state;
} gp_obs_t;

/* What the acquisition needs: the objective's GP and EI's incumbent, and a GP per
 * constraint with its bounds in the GP's standardised units. */
typedef struct acq {
    tp_gp_t g;                      /* the objective (standardised losses) */
    double best;                    /* best feasible standardised loss; NaN: none feasible */
    size_t nc;                      /* constraints */
    tp_gp_t cg[TP_MAX_CONSTRAINTS]; /* each constraint's GP; n 0: too few values to fit */
    double lo[TP_MAX_CONSTRAINTS], hi[TP_MAX_CONSTRAINTS]; /* standardised bounds */
} acq_t;

typedef struct gp_state {
    gp_dim_t *dims; /* one per param */
    size_t ncols, nmodelled;
    gp_obs_t *obs; /* per trial index */
    size_t nobs;
} gp_state_t;

static double clampd(double x, double lo, double hi) {
    return x < lo ? lo : x > hi ? hi : x;
}

static int gp_init(tp_searcher_t *s, tp_error_t *err) {
    gp_state_t *st = tp__xcalloc(1, sizeof *st);
    st->dims = tp__xcalloc(s->space->n ? s->space->n : 1, sizeof *st->dims);
    for (size_t i = 0; i < s->space->n; i++) {
        const tp_param_t *p = &s->space->params[i];
        gp_dim_t *d = &st->dims[i];
        d->col = st->ncols;
        d->kind = COL_NUM;
        d->lo = p->lo, d->hi = p->hi;
        if (p->kind == TP_DOM_CONST)
            d->kind = COL_SKIP;
        else if (p->kind == TP_DOM_CHOICE || p->kind == TP_DOM_GRID)
            d->kind = p->nvalues > 1 ? COL_CAT : COL_SKIP;
        else if (p->kind == TP_DOM_LOGUNIFORM || (p->kind == TP_DOM_INT && p->log))
            d->log = 1, d->lo = log(p->lo), d->hi = log(p->hi);
        else if (p->kind == TP_DOM_NORMAL)
            d->lo = p->lo - GP_NORMAL_SPAN * p->hi, d->hi = p->lo + GP_NORMAL_SPAN * p->hi;
        if (d->kind == COL_NUM && !(d->lo < d->hi && isfinite(d->lo) && isfinite(d->hi)))
            d->kind = COL_SKIP;
        if (d->kind != COL_SKIP) st->nmodelled++;
        st->ncols += d->kind == COL_NUM ? 1 : d->kind == COL_CAT ? p->nvalues : 0;
    }
    if (st->ncols > GP_MAX_COLS) {
        tp__errorf(err, -EINVAL,
                   "search algorithm gp models at most %d columns (a number each, a choice one "
                   "per value); this space has %zu: use tpe, or fewer choice values",
                   GP_MAX_COLS, st->ncols);
        free(st->dims), free(st);
        return -EINVAL;
    }
    s->impl = st;
    return 0;
}

/* ---- values <-> [0,1] coordinates ---------------------------------------------- */

static void decode_config(const tp_space_t *sp, const gp_state_t *st, const json_t *cfg,
                          double *u) {
    for (size_t i = 0; i < sp->n; i++) {
        const tp_param_t *p = &sp->params[i];
        const gp_dim_t *d = &st->dims[i];
        const json_t *v = json_object_get(cfg, p->name);
        if (d->kind == COL_CAT) {
            for (size_t k = 0; k < p->nvalues; k++)
                u[d->col + k] = v && json_equal(p->values[k], (json_t *)v) ? 1 : 0;
        } else if (d->kind == COL_NUM) {
            double x = v && json_is_number(v) ? json_number_value(v) : NAN;
            if (d->log) x = x > 0 ? log(x) : NAN;
            u[d->col] = isfinite(x) ? clampd((x - d->lo) / (d->hi - d->lo), 0, 1) : 0.5;
        }
    }
}

/* Round v to a multiple of q inside [lo, hi] when one exists, without binary noise. */
static double quantize(double v, double q, double lo, double hi) {
    double a = ceil(lo / q - 1e-9) * q, b = floor(hi / q + 1e-9) * q;
    if (a > b) return v;
    char t[40];
    snprintf(t, sizeof t, "%.15g", clampd(round(v / q) * q, a, b));
    return strtod(t, NULL);
}

/* Write the values coordinates u stand for into cfg (modelled params only). */
static void encode_config(const tp_space_t *sp, const gp_state_t *st, const double *u,
                          json_t *cfg) {
    for (size_t i = 0; i < sp->n; i++) {
        const tp_param_t *p = &sp->params[i];
        const gp_dim_t *d = &st->dims[i];
        json_t *v = NULL;
        if (d->kind == COL_CAT) {
            size_t best = 0;
            for (size_t k = 1; k < p->nvalues; k++)
                if (u[d->col + k] > u[d->col + best]) best = k;
            v = json_deep_copy(p->values[best]);
        } else if (d->kind == COL_NUM) {
            double x = d->lo + u[d->col] * (d->hi - d->lo);
            if (d->log) x = exp(x);
            if (p->kind != TP_DOM_NORMAL) x = clampd(x, p->lo, p->hi);
            if (p->kind == TP_DOM_INT) {
                x = clampd(round(x), p->lo, p->hi);
                if (p->q > 0) x = quantize(x, p->q, p->lo, p->hi);
                v = json_integer((json_int_t)llround(x));
            } else {
                if (p->q > 0)
                    x = p->kind == TP_DOM_NORMAL ? quantize(x, p->q, -INFINITY, INFINITY)
                                                 : quantize(x, p->q, p->lo, p->hi);
                v = json_real(x);
            }
        }
        if (v) json_object_set_new(cfg, p->name, v);
    }
}

/* Fill u with a uniform point: numbers in [0,1], one value of each choice. */
static void draw_uniform(const tp_space_t *sp, const gp_state_t *st, tp_rng_t *rng, double *u) {
    for (size_t i = 0; i < sp->n; i++) {
        const gp_dim_t *d = &st->dims[i];
        if (d->kind == COL_NUM) {
            u[d->col] = tp__rng_uniform(rng);
        } else if (d->kind == COL_CAT) {
            size_t nv = sp->params[i].nvalues, k = (size_t)tp__rng_below(rng, nv);
            for (size_t c = 0; c < nv; c++)
                u[d->col + c] = c == k;
        }
    }
}

/* ---- acquisition --------------------------------------------------------------------- */

/* log Phi(z), floored far in the lower tail. */
static double log_phi(double z) {
    double p = 0.5 * erfc(-z / M_SQRT2);
    return p > 1e-300 ? log(p) : -690.8;
}

/* log EI (when a trial is feasible) plus each constraint's log probability of feasibility. */
static double acq(const acq_t *a, const double *u) {
    double m, v, f = 0;
    if (!isnan(a->best)) {
        tp__gp_predict(&a->g, u, &m, &v);
        f = tp__gp_log_ei(m, sqrt(v), a->best);
    }
    for (size_t k = 0; k < a->nc; k++) {
        if (!a->cg[k].n) continue;
        tp__gp_predict(&a->cg[k], u, &m, &v);
        double sd = sqrt(v > 1e-12 ? v : 1e-12);
        if (isfinite(a->hi[k])) f += log_phi((a->hi[k] - m) / sd);
        if (isfinite(a->lo[k])) f += log_phi((m - a->lo[k]) / sd);
    }
    return f;
}

/* Constraint k's GP on the told trials that reported it (at most GP_FIT_MAX of them, evenly
 * spread, for the fit); left empty with fewer than 2. */
static void fit_constraint(tp_searcher_t *s, const size_t *told, size_t ntold, size_t k, acq_t *a) {
    gp_state_t *st = s->impl;
    size_t c = st->ncols, n = 0;
    double *x = tp__xmalloc((ntold + 1) * c * sizeof *x), *y = tp__xmalloc((ntold + 1) * sizeof *y);
    double mean = 0, var = 0;
    for (size_t j = 0; j < ntold; j++) {
        const gp_obs_t *o = &st->obs[told[j]];
        if (isnan(o->cv[k])) continue;
        memcpy(&x[n * c], o->u, c * sizeof *x);
        y[n++] = o->cv[k];
        mean += o->cv[k];
    }
    if (n >= 2) {
        mean /= (double)n;
        for (size_t j = 0; j < n; j++)
            var += (y[j] - mean) * (y[j] - mean);
        double sd = sqrt(var / (double)n);
        if (!(sd > 1e-12)) sd = 1;
        for (size_t j = 0; j < n; j++)
            y[j] = (y[j] - mean) / sd;
        const tp_constraint_t *con = &s->cfg.constraints[k];
        a->lo[k] = (con->min - mean) / sd, a->hi[k] = (con->max - mean) / sd;
        size_t nfit = n < GP_FIT_MAX ? n : GP_FIT_MAX;
        double *fx = tp__xmalloc(nfit * c * sizeof *fx), *fy = tp__xmalloc(nfit * sizeof *fy);
        for (size_t j = 0; j < nfit; j++) {
            size_t r = j * n / nfit;
            memcpy(&fx[j * c], &x[r * c], c * sizeof *fx), fy[j] = y[r];
        }
        double *ls = tp__xmalloc(c * sizeof *ls), amp = 1, noise = 1e-4;
        if (tp__gp_fit_hyper(fx, fy, nfit, c, ls, &amp, &noise) != 0 ||
            tp__gp_condition(&a->cg[k], x, y, n, c, ls, amp, noise) != 0) {
            tp__gp_free(&a->cg[k]);
            memset(&a->cg[k], 0, sizeof a->cg[k]);
        }
        free(fx), free(fy), free(ls);
    }
    free(x), free(y);
}

/* Coordinate search from u (in place): each number +- each step while it
 * improves, then each other value of each choice. Returns the value. */
static double refine(const tp_searcher_t *s, const acq_t *a, double *u, double f) {
    const gp_state_t *st = s->impl;
    static const double steps[] = {0.05, 0.01, 0.002};
    for (size_t k = 0; k < TP_ARRAY_LEN(steps); k++)
        for (size_t i = 0; i < s->space->n; i++) {
            const gp_dim_t *d = &st->dims[i];
            if (d->kind != COL_NUM) continue;
            for (int dir = -1; dir <= 1; dir += 2) {
                double old = u[d->col];
                for (int moves = 0; moves < 8; moves++) {
                    double nu = clampd(u[d->col] + dir * steps[k], 0, 1);
                    if (nu == u[d->col]) break;
                    u[d->col] = nu;
                    double fn = acq(a, u);
                    if (!(fn > f)) {
                        u[d->col] = old;
                        break;
                    }
                    f = fn, old = nu;
                }
            }
        }
    for (size_t i = 0; i < s->space->n; i++) {
        const gp_dim_t *d = &st->dims[i];
        if (d->kind != COL_CAT) continue;
        size_t nv = s->space->params[i].nvalues, cur = 0;
        for (size_t c = 0; c < nv; c++)
            if (u[d->col + c] > 0.5) cur = c;
        for (size_t c = 0; c < nv; c++) {
            if (c == cur) continue;
            u[d->col + cur] = 0, u[d->col + c] = 1;
            double fn = acq(a, u);
            if (fn > f)
                f = fn, cur = c;
            else
                u[d->col + c] = 0, u[d->col + cur] = 1;
        }
    }
    return f;
}

static int cmp_pair(const void *pa, const void *pb) {
    const double *a = pa, *b = pb;
    return a[0] < b[0] ? -1 : a[0] > b[0] ? 1 : (a[1] > b[1]) - (a[1] < b[1]);
}

/* Rows of the hyperparameter fit among n told (ranked by loss in rank[2k],
 * position rank[2k+1]): all when n <= GP_FIT_MAX, else the best half and
 * an even spread over the rest. Writes positions into pick; returns count. */
static size_t fit_rows(const double *rank, size_t n, size_t *pick) {
    if (n <= GP_FIT_MAX) {
        for (size_t k = 0; k < n; k++)
            pick[k] = k;
        return n;
    }
    size_t half = GP_FIT_MAX / 2, rest = n - half;
    for (size_t k = 0; k < half; k++)
        pick[k] = (size_t)rank[2 * k + 1];
    for (size_t k = 0; k < GP_FIT_MAX - half; k++)
        pick[half + k] = (size_t)rank[2 * (half + k * rest / (GP_FIT_MAX - half)) + 1];
    return GP_FIT_MAX;
}

/* The model's proposal for the free coordinates, written into u. told:
 * ntold observation indices; pend: npend pending ones. Returns 0 or -EDOM. */
static int propose(tp_searcher_t *s, const size_t *told, size_t ntold, const size_t *pend,
                   size_t npend, tp_rng_t *rng, double *u) {
    gp_state_t *st = s->impl;
    size_t c = st->ncols, n = ntold + npend;
    double *x = tp__xmalloc(n * c * sizeof *x), *y = tp__xmalloc(n * sizeof *y);
    double *rank = tp__xmalloc(2 * ntold * sizeof *rank), mean = 0, var = 0;
    for (size_t k = 0; k < ntold; k++) {
        const gp_obs_t *o = &st->obs[told[k]];
        memcpy(&x[k * c], o->u, c * sizeof *x);
        y[k] = s->maximize ? -o->value : o->value;
        mean += y[k];
    }
    mean /= (double)ntold;
    for (size_t k = 0; k < ntold; k++)
        var += (y[k] - mean) * (y[k] - mean);
    double sd = sqrt(var / (double)ntold);
    if (!(sd > 1e-12)) sd = 1;
    acq_t a = {.best = NAN, .nc = s->cfg.nconstraints};
    double least = INFINITY, lowest = INFINITY; /* the least violation, the lowest loss */
    size_t ibest = 0;
    for (size_t k = 0; k < ntold; k++) {
        const gp_obs_t *o = &st->obs[told[k]];
        y[k] = (y[k] - mean) / sd;
        rank[2 * k] = y[k], rank[2 * k + 1] = (double)k;
        lowest = fmin(lowest, y[k]);
        if (o->violation < least || (o->violation == least && y[k] < y[ibest]))
            least = o->violation, ibest = k;
    }
    if (least == 0) a.best = y[ibest];
    for (size_t k = 0; k < npend; k++) {
        memcpy(&x[(ntold + k) * c], st->obs[pend[k]].u, c * sizeof *x);
        y[ntold + k] = isnan(a.best) ? lowest : a.best;
    }
    qsort(rank, ntold, 2 * sizeof *rank, cmp_pair);
    size_t *pick = tp__xmalloc(ntold * sizeof *pick), nfit = fit_rows(rank, ntold, pick);
    double *fx = tp__xmalloc(nfit * c * sizeof *fx), *fy = tp__xmalloc(nfit * sizeof *fy);
    for (size_t k = 0; k < nfit; k++)
        memcpy(&fx[k * c], &x[pick[k] * c], c * sizeof *fx), fy[k] = y[pick[k]];
    double *ls = tp__xmalloc(c * sizeof *ls), amp = 1, noise = 1e-4;
    int rc = tp__gp_fit_hyper(fx, fy, nfit, c, ls, &amp, &noise);
    if (rc == 0) rc = tp__gp_condition(&a.g, x, y, n, c, ls, amp, noise);
    for (size_t k = 0; rc == 0 && k < a.nc; k++)
        fit_constraint(s, told, ntold, k, &a);
    if (rc == 0) {
        size_t ncand = GP_CANDIDATES + GP_LOCAL;
        double *cand = tp__xmalloc(ncand * c * sizeof *cand);
        double *score = tp__xmalloc(2 * ncand * sizeof *score);
        for (size_t k = 0; k < ncand; k++) {
            double *v = &cand[k * c];
            draw_uniform(s->space, st, rng, v);
            if (k >= GP_CANDIDATES) /* numbers near the incumbent, choices drawn */
                for (size_t i = 0; i < s->space->n; i++) {
                    const gp_dim_t *d = &st->dims[i];
                    if (d->kind == COL_NUM)
                        v[d->col] =
                            clampd(x[ibest * c + d->col] + GP_LOCAL_SD * tp__rng_normal(rng), 0, 1);
                }
            score[2 * k] = -acq(&a, v), score[2 * k + 1] = (double)k;
        }
        qsort(score, ncand, 2 * sizeof *score, cmp_pair);
        double fbest = -INFINITY, *tryu = tp__xmalloc(c * sizeof *tryu);
        for (size_t k = 0; k < GP_STARTS; k++) {
            memcpy(tryu, &cand[(size_t)score[2 * k + 1] * c], c * sizeof *tryu);
            double f = refine(s, &a, tryu, -score[2 * k]);
            if (f > fbest) fbest = f, memcpy(u, tryu, c * sizeof *u);
        }
        free(cand), free(score), free(tryu);
    }
    for (size_t k = 0; k < a.nc; k++)
        tp__gp_free(&a.cg[k]);
    tp__gp_free(&a.g);
    free(x), free(y), free(rank), free(pick), free(fx), free(fy), free(ls);
    return rc;
}

/* ---- ask / tell ---------------------------------------------------------------- */

static gp_obs_t *obs_at(tp_searcher_t *s, uint64_t index) {
    gp_state_t *st = s->impl;
    if (index >= GP_MAX_INDEX) return NULL;
    if (index >= st->nobs) {
        size_t n = (size_t)index + 1;
        st->obs = tp__xrealloc(st->obs, n * sizeof *st->obs);
        memset(st->obs + st->nobs, 0, (n - st->nobs) * sizeof *st->obs);
        st->nobs = n;
    }
    gp_obs_t *o = &st->obs[index];
    if (!o->u) o->u = tp__xcalloc(st->ncols + 1, sizeof *o->u), o->value = NAN;
    return o;
}

static size_t startup(const gp_state_t *st) {
    size_t n = 2 * st->nmodelled;
    return n < 10 ? 10 : n > 20 ? 20 : n;
}

/* See the file comment. Returns 0 past `trials` (when bounded), else 1. */
static int gp_ask(tp_searcher_t *s, uint64_t index, double now, json_t **out) {
    (void)now;
    gp_state_t *st = s->impl;
    if (s->cfg.trials && index >= s->cfg.trials) return 0;
    tp_rng_t rng;
    tp__rng_seed(&rng, s->cfg.seed, index);
    json_t *cfg = tp__space_sample_full(s->space, &rng);
    size_t *told = tp__xmalloc((st->nobs + 1) * sizeof *told), ntold = 0;
    size_t *pend = tp__xmalloc((st->nobs + 1) * sizeof *pend), npend = 0;
    for (size_t j = 0; j < st->nobs; j++) {
        const gp_obs_t *o = &st->obs[j];
        if (o->state == OBS_TOLD && isfinite(o->value))
            told[ntold++] = j;
        else if (o->state == OBS_PENDING && j != index)
            pend[npend++] = j;
    }
    if (ntold >= startup(st) && st->ncols) {
        double *u = tp__xmalloc(st->ncols * sizeof *u);
        if (propose(s, told, ntold, pend, npend, &rng, u) == 0) encode_config(s->space, st, u, cfg);
        free(u);
    }
    free(told), free(pend);
    tp__space_prune(s->space, cfg);
    gp_obs_t *o = obs_at(s, index);
    if (o && o->state != OBS_TOLD) {
        decode_config(s->space, st, cfg, o->u);
        o->state = OBS_PENDING;
    }
    *out = cfg;
    return 1;
}

/* Record (or replace) trial index's value; NaN marks it failed. With config
 * NULL the configuration asked for index is used (ignored if none). */
static void gp_tell(tp_searcher_t *s, uint64_t index, const json_t *config, double value,
                    double now) {
    (void)now;
    gp_state_t *st = s->impl;
    if (!config && (index >= st->nobs || st->obs[index].state == OBS_NONE)) return;
    gp_obs_t *o = obs_at(s, index);
    if (!o) return;
    if (config) decode_config(s->space, st, config, o->u);
    o->value = value;
    const double *cv = tp__searcher_constraint_values(s, index);
    for (size_t k = 0; k < s->cfg.nconstraints; k++)
        o->cv[k] = cv ? cv[k] : NAN;
    o->violation = tp__searcher_violation(s, index);
    o->state = OBS_TOLD;
}

static uint64_t gp_total(const tp_searcher_t *s) {
    return s->cfg.trials;
}

static void gp_destroy(tp_searcher_t *s) {
    gp_state_t *st = s->impl;
    if (!st) return;
    for (size_t j = 0; j < st->nobs; j++)
        free(st->obs[j].u);
    free(st->obs), free(st->dims), free(st);
    s->impl = NULL;
}

const struct tp_searcher_ops tp__searcher_gp_ops = {
    .name = "gp",
    .init = gp_init,
    .ask = gp_ask,
    .tell = gp_tell,
    .total = gp_total,
    .destroy = gp_destroy,
};
