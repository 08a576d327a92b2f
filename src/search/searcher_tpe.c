/* searcher_tpe: the tree-structured Parzen estimator (Bergstra et al. 2011)
 * with Optuna's defaults (TPESampler, independent, not multivariate):
 *
 *   n_startup_trials 10   until 10 trials have a told finite value, trial i
 *                         is the random searcher's draw from (seed, i);
 *   gamma(n)              min(ceil(0.1 n), 25) best told trials form the
 *                         "below" group l(x), the rest the "above" g(x);
 *   weights               1 for each observation when a group has < 25,
 *                         else a ramp 1/n .. 1 for the oldest n-25 and 1 for
 *                         the newest 25 (by trial number), plus the prior;
 *   prior weight 1.0      numeric prior N(mid, hi - lo + step), categorical
 *                         prior uniform;
 *   consider_endpoints    false; magic clip: sigma in
 *                         [range / min(100, 1 + kernels), range];
 *   n_ei_candidates 24    drawn from l per parameter; the one with the
 *                         largest log l(x) - log g(x) wins.
 *
 * Kernels are normalized truncated normals, as in the paper and in Optuna
 * since its pull request 5110; Debian's Optuna 3.1 leaves each kernel's
 * 1/sigma out of its log density (optuna issue 5109), which makes it
 * propose closer to the best trials (docs/search.md, ASHA against Optuna).
 *
 * Each parameter has its own estimators (independent TPE):
 *   uniform, loguniform   a mixture of Gaussians truncated to [lo, hi] (in
 *                         log space for loguniform);
 *   uniform/int with q,   discrete: kernels over the grid of multiples of the
 *   int                   step (1 for int) inside [lo, hi], truncated to
 *                         [lo - step/2, hi + step/2], a value's likelihood is
 *                         the mass of its bin (Optuna >= 3.3): exact (erfc)
 *                         for kernels narrower than a step, by Simpson's rule
 *                         for wider ones (within ~1% near the kernel; cheap);
 *   int with log          continuous in log space over
 *                         [log(lo - 0.5), log(hi + 0.5)], rounded (Optuna 3.0);
 *   loguniform with q     simplification: continuous in log space, then
 *                         quantized as the space does; scored at the value;
 *   normal                not in Optuna: kernels truncated to mean +- 5 sigma
 *                         with the domain's own N(mean, sigma) as the prior;
 *   choice, grid          weighted categorical with the prior (Optuna 3.x);
 *   const, one-value      left as the random draw gives them.
 *
 * Conditional spaces: an inactive param is absent from the configuration
 * and missing (NaN) in its observation. Each param is modelled over the
 * told trials where it was active, ranked among themselves (split_for);
 * the proposal then drops the params its own picks make inactive.
 *
 * Several objectives (tell_values): Optuna's MOTPE, with two changes. The
 * "below" group is whole non-dominated fronts while they fit in gamma(n),
 * then the rest of the next front by greedy hypervolume subset selection;
 * the below kernels are weighted by their hypervolume contribution (over
 * the largest), the above ones as usual. The changes: gamma(n) = min(ceil(
 * 0.3 n), 25) instead of 0.1 n, so "below" holds more of the front (with
 * two objectives a tenth of the trials is often a fraction of the front
 * alone), and 64 candidates per parameter instead of 24 (a front needs the
 * whole of l(x) covered, not only its mode). Measured in-process, 60
 * trials, hypervolume at (1.1, 11), mean over seeds, Optuna's MOTPE
 * (gamma 0.1 n, 24) -> gamma 0.2 n, 24 -> gamma 0.3 n, 64 (the choice):
 * ZDT1 (20 seeds) 10.56 -> 10.75; then over 80 seeds 10.754 -> 10.831,
 * ZDT2 (40) 9.913 -> 10.183, ZDT3 (+1, 40) 9.749 -> 9.813; at 100 trials
 * (20 seeds) ZDT1 11.123 -> 11.134, ZDT2 10.334 -> 10.510. One objective
 * keeps Optuna's gamma and 24 candidates.
 *
 * Warm start (tell_prior): earlier results are observations like told
 * trials, numbered before trial 0, so the weights' ramp counts them oldest.
 *
 * Constraints (cfg.constraints): Optuna's constrained TPE (constraints_func,
 * after Watanabe & Hutter 2023's c-TPE in spirit, not its per-constraint
 * density ratios): each told trial's total violation is read when it is
 * told (tp__searcher_violation); the ranking puts every feasible trial
 * (violation 0) before every infeasible one, the feasible by value, the
 * infeasible by violation (a trial that never reported a constrained
 * metric has violation infinity: last). So "below" holds feasible trials
 * while there are enough of them, else every feasible one and the least
 * violating. Several objectives: the non-dominated fronts of the feasible
 * trials, topped up with the least violating. Priors count as feasible.
 *
 * Failed trials (told NaN) are excluded, as Optuna excludes FAIL trials; they
 * do not count toward the startup trials either. A later tell for the same
 * index replaces the value (a trial promoted to a higher rung).
 *
 * Budgets (tell_budget: asha, hyperband and pbt tell each rung's result with
 * its budget): ranked as Optuna 3.1's TPESampler ranks pruned trials
 * (_get_observation_pairs: score (-step, value)): complete trials first (told
 * at the scheduler's largest budget, or without one), then the others by the
 * budget they reached, largest first, and by value within one budget. A value
 * after 1 epoch and one after 27 are not on one scale (a learning curve
 * rises): by raw value a slow learner stopped early ranks below a fast one
 * that reached less at the full budget. Counts (startup, gamma) are as
 * before: every told trial. Several objectives rank by values alone (Optuna's
 * MOTPE drops pruned trials; here they only run under fifo).
 *
 * Constant liar: a configuration asked and not yet told counts as an
 * observation with the worst value seen so far. It always ranks after every
 * told trial, so it falls in the "above" group, and gamma counts told trials
 * only; this is Optuna's constant_liar. So parallel asks spread out.
 *
 * Determinism: ask(index) is a pure function of (seed, index, the told
 * observations, the pending asks other than index itself): its rng is seeded
 * by (seed, index), it first draws the random searcher's configuration and
 * then the candidates. Replaying the same calls gives the same configs.
 *
 * Cost: O(n log n + P * 24 * n) per ask for n observations and P params
 * (a candidate value drawn twice is scored once); about 3 ms at n = 1000,
 * P = 5 (fine below 10k trials). Memory O(max
 * index * P) doubles. */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "search/pareto.h"
#include "search/search.h"

#define TPE_STARTUP 10           /* n_startup_trials */
#define TPE_CANDIDATES 24        /* n_ei_candidates */
#define TPE_MO_CANDIDATES 64     /* several objectives: n_ei_candidates (Optuna: 24) */
#define TPE_GAMMA_MAX 25         /* gamma(n) = min(ceil(0.1 n), 25) */
#define TPE_MO_GAMMA 0.3         /* several objectives: min(ceil(0.3 n), 25) (Optuna: 0.1) */
#define TPE_PRIOR_WEIGHT 1.0     /* prior_weight */
#define TPE_FLAT 25              /* newest observations with weight 1 */
#define TPE_MAX_INDEX (1u << 26) /* larger trial numbers are not modelled */
#define TPE_NORMAL_SPAN 5.0      /* normal params: kernels inside mean +- 5 sigma */

enum { DIM_SKIP, DIM_CAT, DIM_NUM };
enum { OBS_NONE, OBS_PENDING, OBS_TOLD };

typedef struct tpe_dim {
    int kind;        /* DIM_SKIP (left as drawn), DIM_CAT, DIM_NUM */
    int log;         /* internal value is log(value) */
    int is_int;      /* the value is written as an integer */
    double lo, hi;   /* internal range of the kernels' centres */
    double step;     /* internal grid step (discrete mass), 0: continuous */
    double tlo, thi; /* truncation bounds of the kernels */
    double prior_mu; /* prior kernel */
    double prior_sigma;
    double range; /* hi - lo + step: magic clip and largest sigma */
} tpe_dim_t;

typedef struct tpe_obs {
    double *x;        /* internal value per param (NaN: missing), owned */
    double value;     /* latest told value, NaN: failed (several objectives: the first) */
    double *loss;     /* several objectives: the told values as losses, owned; else NULL */
    double violation; /* constraints: total violation when told (0: feasible) */
    double step;      /* the budget its latest value was told at; +inf: complete (told
                         without a budget, or at the scheduler's largest) */
    int state;        /* OBS_NONE, OBS_PENDING, OBS_TOLD */
} tpe_obs_t;

typedef struct tpe_state {
    tpe_dim_t *dims; /* one per space param */
    tpe_obs_t *obs;  /* the nprior prior observations, then one per trial index */
    size_t nobs;     /* entries of obs in use (nprior + max index + 1) */
    size_t nprior;   /* prior observations (warm start), told before any ask */
} tpe_state_t;

/* One Parzen estimator (a group's mixture) for one parameter. */
typedef struct parzen {
    size_t m;           /* kernels, the prior last */
    double *mu, *sigma; /* numeric kernels */
    double *logc;       /* log w_k - log Z_k, plus the pdf's constant (see parzen_numeric) */
    double *cum;        /* cumulative weights, for drawing a kernel */
    double *pmf;        /* categorical: probability of each choice */
    double *scratch;    /* 2m terms for log-sum-exp */
} parzen_t;

static const double LOG_SQRT_2PI = 0.91893853320467274178;

/* ---- set-up -------------------------------------------------------------- */

static double grid_lo(double lo, double q) {
    return ceil(lo / q - 1e-9) * q;
}
static double grid_hi(double hi, double q) {
    return floor(hi / q + 1e-9) * q;
}

/* Strip binary noise from a multiple of a decimal step (0.30000000000000004). */
static double clean(double v) {
    char t[40];
    snprintf(t, sizeof t, "%.15g", v);
    return strtod(t, NULL);
}

static void dim_setup(const tp_param_t *p, tpe_dim_t *d) {
    memset(d, 0, sizeof *d);
    d->kind = DIM_NUM;
    switch (p->kind) {
    case TP_DOM_CONST:
        d->kind = DIM_SKIP;
        return;
    case TP_DOM_CHOICE:
    case TP_DOM_GRID:
        d->kind = p->nvalues > 1 ? DIM_CAT : DIM_SKIP;
        return;
    case TP_DOM_UNIFORM:
        if (p->q > 0) {
            d->lo = grid_lo(p->lo, p->q), d->hi = grid_hi(p->hi, p->q), d->step = p->q;
        } else {
            d->lo = p->lo, d->hi = p->hi;
        }
        break;
    case TP_DOM_LOGUNIFORM:
        d->log = 1;
        d->lo = log(p->lo), d->hi = log(p->hi);
        break;
    case TP_DOM_INT:
        d->is_int = 1;
        if (p->log) {
            d->log = 1;
            d->lo = log(p->lo - 0.5), d->hi = log(p->hi + 0.5);
        } else {
            double q = p->q > 0 ? p->q : 1;
            d->lo = grid_lo(p->lo, q), d->hi = grid_hi(p->hi, q), d->step = q;
        }
        break;
    case TP_DOM_NORMAL:
        d->lo = p->lo - TPE_NORMAL_SPAN * p->hi, d->hi = p->lo + TPE_NORMAL_SPAN * p->hi;
        break;
    }
    if (!(d->lo < d->hi) || !isfinite(d->lo) || !isfinite(d->hi)) {
        d->kind = DIM_SKIP; /* one value at most: nothing to learn */
        return;
    }
    d->tlo = d->lo - d->step / 2, d->thi = d->hi + d->step / 2;
    d->range = d->hi - d->lo + d->step;
    d->prior_mu = 0.5 * (d->lo + d->hi);
    d->prior_sigma = d->range;
    if (p->kind == TP_DOM_NORMAL) d->prior_mu = p->lo, d->prior_sigma = p->hi;
}

static int tpe_init(tp_searcher_t *s, tp_error_t *err) {
    (void)err;
    tpe_state_t *st = tp__xcalloc(1, sizeof *st);
    st->dims = tp__xcalloc(s->space->n ? s->space->n : 1, sizeof *st->dims);
    for (size_t i = 0; i < s->space->n; i++)
        dim_setup(&s->space->params[i], &st->dims[i]);
    s->impl = st;
    return 0;
}

/* ---- values <-> internal coordinates --------------------------------------- */

static double clampd(double x, double lo, double hi) {
    return x < lo ? lo : x > hi ? hi : x;
}

/* The internal coordinate of a configuration's value (NaN when it is
 * missing or not in the domain, e.g. the space changed on resume). */
static double decode(const tp_param_t *p, const tpe_dim_t *d, const json_t *v) {
    if (!v) return NAN;
    if (d->kind == DIM_CAT) {
        for (size_t k = 0; k < p->nvalues; k++)
            if (json_equal(p->values[k], (json_t *)v)) return (double)k;
        return NAN;
    }
    if (!json_is_number(v)) return NAN;
    double x = json_number_value(v);
    if (d->log) {
        if (!(x > 0)) return NAN;
        x = log(x);
    }
    return isfinite(x) ? clampd(x, d->lo, d->hi) : NAN;
}

static void decode_config(const tp_space_t *sp, const tpe_dim_t *dims, const json_t *cfg,
                          double *x) {
    for (size_t i = 0; i < sp->n; i++)
        x[i] = dims[i].kind == DIM_SKIP
                   ? NAN
                   : decode(&sp->params[i], &dims[i], json_object_get(cfg, sp->params[i].name));
}

/* Round x to a multiple of q inside [lo, hi] when one exists (as the space
 * quantizes). */
static double quantize_in(double x, double q, double lo, double hi) {
    double a = grid_lo(lo, q), b = grid_hi(hi, q);
    if (a > b) return x;
    return clean(clampd(round(x / q) * q, a, b));
}

/* The value a candidate at internal coordinate x stands for. Caller owns. */
static json_t *encode(const tp_param_t *p, const tpe_dim_t *d, double x) {
    if (d->kind == DIM_CAT) return json_deep_copy(p->values[(size_t)x]);
    if (d->step > 0) {
        double v = clampd(d->lo + round((x - d->lo) / d->step) * d->step, d->lo, d->hi);
        return d->is_int ? json_integer((json_int_t)llround(v)) : json_real(clean(v));
    }
    double v = d->log ? exp(x) : x;
    if (p->kind == TP_DOM_NORMAL) return json_real(p->q > 0 ? clean(round(v / p->q) * p->q) : v);
    v = clampd(v, p->lo, p->hi);
    if (d->is_int) {
        v = clampd(round(v), p->lo, p->hi);
        if (p->q > 0) v = quantize_in(v, p->q, p->lo, p->hi);
        return json_integer((json_int_t)llround(v));
    }
    if (p->q > 0) v = quantize_in(v, p->q, p->lo, p->hi);
    return json_real(v);
}

/* ---- Parzen estimators ------------------------------------------------------ */

/* Optuna's default_weights: n ones below 25, else a ramp for the oldest. */
static void default_weights(size_t n, double *w) {
    if (n < TPE_FLAT) {
        for (size_t i = 0; i < n; i++)
            w[i] = 1.0;
        return;
    }
    size_t ramp = n - TPE_FLAT;
    double a = 1.0 / (double)n;
    for (size_t i = 0; i < ramp; i++)
        w[i] = ramp == 1 ? a : a + (double)i * (1.0 - a) / (double)(ramp - 1);
    for (size_t i = ramp; i < n; i++)
        w[i] = 1.0;
}

/* log(Phi(b) - Phi(a)) for a < b, accurate in either tail. */
static double log_ndtr_diff(double a, double b) {
    double m;
    if (a > 0)
        m = 0.5 * (erfc(a / M_SQRT2) - erfc(b / M_SQRT2));
    else if (b < 0)
        m = 0.5 * (erfc(-b / M_SQRT2) - erfc(-a / M_SQRT2));
    else
        m = 1.0 - 0.5 * (erfc(-a / M_SQRT2) + erfc(b / M_SQRT2));
    if (m > 1e-300) return log(m);
    double near = a > 0 ? a : b < 0 ? -b : 0; /* far tail: pdf at the near end times width */
    return -0.5 * near * near - LOG_SQRT_2PI + log(b - a);
}

static int cmp_double_idx(const void *pa, const void *pb) {
    const double *a = pa, *b = pb;
    return a[0] < b[0] ? -1 : a[0] > b[0] ? 1 : (a[1] > b[1]) - (a[1] < b[1]);
}

/* Ranking rows {violation, -step, key, index}: feasible first; the feasible by the
 * budget reached (largest first), then value; the infeasible by violation; then index. */
static int cmp_rank(const void *pa, const void *pb) {
    const double *a = pa, *b = pb;
    int fa = a[0] == 0, fb = b[0] == 0;
    if (fa != fb) return fb - fa;
    if (a[1] != b[1]) return a[1] < b[1] ? -1 : 1;
    return cmp_double_idx(a + 2, b + 2);
}

static void parzen_free(parzen_t *e) {
    free(e->mu), free(e->sigma), free(e->logc), free(e->cum), free(e->pmf), free(e->scratch);
    memset(e, 0, sizeof *e);
}

/* The observations' weights: given (several objectives' "below" group),
 * or Optuna's default ramp. */
static void obs_weights(const double *given, size_t n, double *w) {
    if (given)
        memcpy(w, given, n * sizeof *w);
    else
        default_weights(n, w);
}

/* Build the numeric estimator from n observations xs (in trial order),
 * weighted by wgiven (NULL: default_weights). */
static void parzen_numeric(parzen_t *e, const tpe_dim_t *d, const double *xs, size_t n,
                           const double *wgiven) {
    size_t m = n + 1;
    e->m = m;
    e->mu = tp__xmalloc(m * sizeof *e->mu);
    e->sigma = tp__xmalloc(m * sizeof *e->sigma);
    e->logc = tp__xmalloc(m * sizeof *e->logc);
    e->cum = tp__xmalloc(m * sizeof *e->cum);
    e->scratch = tp__xmalloc(2 * m * sizeof *e->scratch);
    /* sigma_i: the larger gap to a sorted neighbour (prior included), the
     * endpoints standing in as neighbours, except that consider_endpoints
     * false makes the first and last use their inner gap only. */
    double *srt = tp__xmalloc(2 * m * sizeof *srt); /* (mu, original position) pairs */
    for (size_t i = 0; i < n; i++)
        srt[2 * i] = xs[i], srt[2 * i + 1] = (double)i;
    srt[2 * n] = 0.5 * (d->lo + d->hi), srt[2 * n + 1] = (double)n;
    qsort(srt, m, 2 * sizeof *srt, cmp_double_idx);
    double minsig = d->range / fmin(100.0, 1.0 + (double)m), maxsig = d->range;
    for (size_t r = 0; r < m; r++) {
        double left = r ? srt[2 * (r - 1)] : d->lo - d->step / 2;
        double right = r + 1 < m ? srt[2 * (r + 1)] : d->hi + d->step / 2;
        double c = srt[2 * r];
        double sg = fmax(c - left, right - c);
        if (m >= 2 && r == 0) sg = srt[2] - c;
        if (m >= 2 && r == m - 1) sg = c - srt[2 * (m - 2)];
        size_t at = (size_t)srt[2 * r + 1];
        e->sigma[at] = clampd(sg, minsig, maxsig);
    }
    free(srt);
    for (size_t i = 0; i < n; i++)
        e->mu[i] = xs[i];
    e->mu[n] = d->prior_mu, e->sigma[n] = d->prior_sigma;
    double *w = tp__xmalloc(m * sizeof *w), total = 0;
    obs_weights(wgiven, n, w);
    w[n] = TPE_PRIOR_WEIGHT;
    for (size_t k = 0; k < m; k++)
        total += w[k];
    double acc = 0;
    for (size_t k = 0; k < m; k++) {
        double wk = w[k] / total, s = e->sigma[k];
        acc += wk;
        e->cum[k] = acc;
        double logz = log_ndtr_diff((d->tlo - e->mu[k]) / s, (d->thi - e->mu[k]) / s);
        e->logc[k] = log(wk) - logz;
        if (d->step == 0)
            e->logc[k] -= log(s) + LOG_SQRT_2PI;
        else if (s >= d->step)
            e->logc[k] += log(d->step / (6 * s)) - LOG_SQRT_2PI; /* Simpson */
    }
    free(w);
}

/* Build the categorical estimator over C choices from n observed indices,
 * weighted as parzen_numeric. */
static void parzen_categorical(parzen_t *e, size_t nchoices, const double *xs, size_t n,
                               const double *wgiven) {
    e->pmf = tp__xcalloc(nchoices, sizeof *e->pmf);
    double *w = tp__xmalloc((n + 1) * sizeof *w), total = TPE_PRIOR_WEIGHT;
    obs_weights(wgiven, n, w);
    for (size_t i = 0; i < n; i++)
        total += w[i];
    double nk = (double)(n + 1), base = TPE_PRIOR_WEIGHT / nk;
    double rowsum = (double)nchoices * base + 1.0; /* each observation's row */
    double flat = TPE_PRIOR_WEIGHT / total / (double)nchoices;
    for (size_t c = 0; c < nchoices; c++)
        e->pmf[c] = flat;
    for (size_t i = 0; i < n; i++) {
        double wi = w[i] / total / rowsum;
        e->pmf[(size_t)xs[i]] += wi;
    }
    double allbase = 0; /* every observation row's base mass, once for all */
    for (size_t i = 0; i < n; i++)
        allbase += w[i] / total / rowsum * base;
    for (size_t c = 0; c < nchoices; c++)
        e->pmf[c] += allbase;
    free(w);
}

/* Draw one internal value from e. */
static double parzen_draw(const parzen_t *e, const tpe_dim_t *d, size_t nchoices, tp_rng_t *rng) {
    double u = tp__rng_uniform(rng);
    if (d->kind == DIM_CAT) {
        double acc = 0;
        for (size_t c = 0; c < nchoices; c++) {
            acc += e->pmf[c];
            if (u < acc) return (double)c;
        }
        return (double)(nchoices - 1);
    }
    size_t lo = 0, hi = e->m - 1; /* first k with u < cum[k] */
    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        if (u < e->cum[mid])
            hi = mid;
        else
            lo = mid + 1;
    }
    for (int tries = 0; tries < 100; tries++) { /* rejection: mass inside is >= ~0.3 */
        double x = e->mu[lo] + e->sigma[lo] * tp__rng_normal(rng);
        if (x >= d->tlo && x <= d->thi) return x;
    }
    return clampd(e->mu[lo], d->tlo, d->thi);
}

/* log of e's likelihood at internal value x. Kernels more than e^40 below
 * the largest term are skipped (relative error < m e^-40), which spares the
 * transcendental calls for most kernels once observations pile up. */
static double parzen_logpdf(const parzen_t *e, const tpe_dim_t *d, double x) {
    if (d->kind == DIM_CAT) return log(e->pmf[(size_t)x]);
    double *t = e->scratch, *up = e->scratch + e->m; /* exact or lower bound; upper bound */
    double floor_best = -INFINITY;
    for (size_t k = 0; k < e->m; k++) {
        double s = e->sigma[k], z = (x - e->mu[k]) / s;
        if (d->step > 0 && s >= d->step) {
            /* Simpson's rule over the bin: pdf(z) (4 + 2 e^{-dl^2/2} cosh(z dl)) / 6;
             * logc holds log(w / Z) + log(step / 6 s) - log sqrt(2 pi) */
            double base = e->logc[k] - 0.5 * z * z;
            t[k] = base + log(4.0);
            up[k] = base + fabs(z) * (d->step / 2 / s) + log(6.0);
        } else if (d->step > 0) {
            double h = d->step / 2 / s;
            t[k] = up[k] = e->logc[k] + log_ndtr_diff(z - h, z + h);
        } else {
            t[k] = up[k] = e->logc[k] - 0.5 * z * z;
        }
        if (t[k] > floor_best) floor_best = t[k];
    }
    if (!isfinite(floor_best)) return floor_best;
    double best = -INFINITY;
    for (size_t k = 0; k < e->m; k++) {
        if (up[k] < floor_best - 40) {
            t[k] = -INFINITY;
            continue;
        }
        double s = e->sigma[k];
        if (d->step > 0 && s >= d->step) {
            double z = (x - e->mu[k]) / s, dl = d->step / 2 / s, y = fabs(z * dl);
            double lf = y > 30 ? y - 0.5 * dl * dl : log(4 + 2 * exp(-0.5 * dl * dl) * cosh(y));
            t[k] = e->logc[k] - 0.5 * z * z + lf;
        }
        if (t[k] > best) best = t[k];
    }
    double sum = 0;
    for (size_t k = 0; k < e->m; k++)
        if (t[k] > best - 40) sum += exp(t[k] - best);
    return best + log(sum);
}

/* ---- ask / tell ---------------------------------------------------------------- */

/* The observation of trial index (after the priors), grown as needed. */
static tpe_obs_t *obs_at(tp_searcher_t *s, uint64_t trial) {
    tpe_state_t *st = s->impl;
    if (trial >= TPE_MAX_INDEX) return NULL;
    uint64_t index = trial + st->nprior;
    if (index >= st->nobs) {
        size_t n = (size_t)index + 1;
        st->obs = tp__xrealloc(st->obs, n * sizeof *st->obs);
        memset(st->obs + st->nobs, 0, (n - st->nobs) * sizeof *st->obs);
        st->nobs = n;
    }
    tpe_obs_t *o = &st->obs[index];
    if (!o->x) {
        o->x = tp__xmalloc((s->space->n ? s->space->n : 1) * sizeof *o->x);
        o->value = NAN;
    }
    return o;
}

/* Internal coordinates of param i in the observations listed (trial
 * indices, ascending), missing ones skipped; returns how many. */
static size_t gather(const tpe_state_t *st, const size_t *ids, size_t n, size_t i, double *out) {
    size_t k = 0;
    for (size_t j = 0; j < n; j++) {
        double x = st->obs[ids[j]].x[i];
        if (!isnan(x)) out[k++] = x;
    }
    return k;
}

static int cmp_size(const void *pa, const void *pb) {
    size_t a = *(const size_t *)pa, b = *(const size_t *)pb;
    return (a > b) - (a < b);
}

/* Several objectives: the nb of the n told trials ids[] that form "below",
 * as Optuna's MOTPE: whole non-dominated fronts while they fit, then the
 * rest of the next front by greedy hypervolume subset selection. O(n^2 m)
 * plus the selection. */
static void mo_below(const tp_searcher_t *s, const size_t *ids, size_t n, size_t nb,
                     size_t *below) {
    const tpe_state_t *st = s->impl;
    size_t m = tp__search_nobj(&s->cfg);
    double *y = tp__xmalloc((n ? n : 1) * m * sizeof *y);
    for (size_t k = 0; k < n; k++)
        memcpy(y + k * m, st->obs[ids[k]].loss, m * sizeof *y);
    size_t *rank = tp__xmalloc((n ? n : 1) * sizeof *rank),
           *front = tp__xmalloc((n ? n : 1) * sizeof *front);
    size_t fronts = tp__pareto_rank(y, n, m, rank), b = 0;
    for (size_t f = 0; f < fronts && b < nb; f++) {
        size_t nf = 0;
        for (size_t k = 0; k < n; k++)
            if (rank[k] == f) front[nf++] = k;
        if (b + nf <= nb) {
            for (size_t k = 0; k < nf; k++)
                below[b++] = front[k];
            continue;
        }
        double ref[TP_MAX_OBJECTIVES];
        tp__hv_reference(y, m, front, nf, ref);
        tp__hv_select(y, m, front, nf, nb - b, ref, below + b);
        b = nb;
    }
    for (size_t k = 0; k < b; k++)
        below[k] = ids[below[k]];
    free(y), free(rank), free(front);
}

/* Several objectives: the weights of the "below" trials (ascending), each
 * its hypervolume contribution among them over the largest (Optuna's
 * _calculate_weights_below_for_multi_objective). */
static void mo_weights(const tp_searcher_t *s, const size_t *below, size_t nb, double *w) {
    const tpe_state_t *st = s->impl;
    size_t m = tp__search_nobj(&s->cfg);
    if (nb == 1) {
        w[0] = 1;
        return;
    }
    double *y = tp__xmalloc(nb * m * sizeof *y), ref[TP_MAX_OBJECTIVES], top = 0;
    for (size_t k = 0; k < nb; k++)
        memcpy(y + k * m, st->obs[below[k]].loss, m * sizeof *y);
    tp__hv_reference(y, m, NULL, nb, ref);
    tp__hv_contributions(y, m, NULL, nb, ref, w);
    for (size_t k = 0; k < nb; k++)
        top = fmax(top, w[k] += 1e-12);
    for (size_t k = 0; k < nb; k++)
        w[k] = clampd(w[k] / top, 0, 1);
    free(y);
}

/* Split for param i: the told trials where i has a value (ranked, best
 * first), the best min(ceil(0.1 n), 25) of them "below" (several
 * objectives: chosen by mo_below), the rest and the pending ones where i
 * has a value "above"; both groups ascending by trial index (the weights'
 * order). For an unconditional param every ranked trial has a value, so
 * this is the usual split over all trials; for a conditional one it ranks
 * only the trials where it was active (Optuna 3.1 ranks all trials and then
 * drops those without it, which leaves a child of a branch that is rarely
 * best with no "below" points at all). Returns the count below; *na gets
 * the count above. */
static size_t split_for(const tp_searcher_t *s, size_t i, const size_t *ranked, size_t ntold,
                        const size_t *pend, size_t npend, size_t *below, size_t *above,
                        size_t *na) {
    const tpe_state_t *st = s->impl;
    size_t n = 0;
    for (size_t k = 0; k < ntold; k++)
        if (!isnan(st->obs[ranked[k]].x[i])) above[n++] = ranked[k]; /* active, ranked */
    int multi = tp__search_nobj(&s->cfg) > 1;
    size_t nb = (size_t)ceil((multi ? TPE_MO_GAMMA : 0.1) * (double)n); /* Optuna: 0.1 n */
    if (nb > TPE_GAMMA_MAX) nb = TPE_GAMMA_MAX;
    size_t nfeas = 0; /* the ranked list's feasible head */
    while (nfeas < n && st->obs[above[nfeas]].violation == 0)
        nfeas++;
    if (multi && nb <= nfeas)
        mo_below(s, above, nfeas, nb, below);
    else
        memcpy(below, above, nb * sizeof *below);
    qsort(below, nb, sizeof *below, cmp_size);
    size_t a = 0;
    for (size_t k = 0; k < n; k++) /* the rest: not in below (sorted) */
        if (!bsearch(&above[k], below, nb, sizeof *below, cmp_size)) above[a++] = above[k];
    for (size_t k = 0; k < npend; k++)
        if (!isnan(st->obs[pend[k]].x[i])) above[a++] = pend[k];
    qsort(above, a, sizeof *above, cmp_size);
    *na = a;
    return nb;
}

/* Replace each modelled param of cfg by TPE's pick. ranked: the told
 * trials' indices, best first; pend: the pending ones (liars). */
static void tpe_propose(tp_searcher_t *s, const size_t *ranked, size_t ntold, const size_t *pend,
                        size_t npend, tp_rng_t *rng, json_t *cfg) {
    const tpe_state_t *st = s->impl;
    size_t total = ntold + npend;
    double *xs = tp__xmalloc((total + 1) * sizeof *xs);
    size_t *below = tp__xmalloc((total + 1) * sizeof *below);
    size_t *above = tp__xmalloc((total + 1) * sizeof *above);
    double *wb = tp__xmalloc((total + 1) * sizeof *wb), *wbelow = NULL;
    int ncand = tp__search_nobj(&s->cfg) > 1 ? TPE_MO_CANDIDATES : TPE_CANDIDATES;
    for (size_t i = 0; i < s->space->n; i++) {
        const tp_param_t *p = &s->space->params[i];
        const tpe_dim_t *d = &st->dims[i];
        if (d->kind == DIM_SKIP) continue;
        size_t na, nb = split_for(s, i, ranked, ntold, pend, npend, below, above, &na);
        if (nb == 0) continue; /* never active in a told trial: left as drawn */
        if (tp__search_nobj(&s->cfg) > 1) mo_weights(s, below, nb, wbelow = wb);
        parzen_t l = {0}, g = {0};
        size_t kb = gather(st, below, nb, i, xs); /* == nb: split_for kept active ones */
        if (d->kind == DIM_CAT)
            parzen_categorical(&l, p->nvalues, xs, kb, wbelow);
        else
            parzen_numeric(&l, d, xs, kb, wbelow);
        size_t ka = gather(st, above, na, i, xs);
        if (d->kind == DIM_CAT)
            parzen_categorical(&g, p->nvalues, xs, ka, NULL);
        else
            parzen_numeric(&g, d, xs, ka, NULL);
        json_t *best = NULL;
        double best_score = -INFINITY, seen_x[TPE_MO_CANDIDATES], seen_score[TPE_MO_CANDIDATES];
        for (int c = 0; c < ncand; c++) {
            json_t *v = encode(p, d, parzen_draw(&l, d, p->nvalues, rng));
            double x = decode(p, d, v), score = -INFINITY;
            int j = 0; /* a repeated value (discrete domains) is scored once */
            while (j < c && seen_x[j] != x)
                j++;
            if (j < c)
                score = seen_score[j];
            else if (!isnan(x))
                score = parzen_logpdf(&l, d, x) - parzen_logpdf(&g, d, x);
            seen_x[c] = x, seen_score[c] = score;
            if (!best || score > best_score) {
                json_decref(best);
                best = v, best_score = score;
            } else {
                json_decref(v);
            }
        }
        json_object_set_new(cfg, p->name, best);
        parzen_free(&l);
        parzen_free(&g);
    }
    free(xs), free(below), free(above), free(wb);
}

/* A told trial with a finite value (several objectives: with every value). */
static int told_ok(const tp_searcher_t *s, const tpe_obs_t *o) {
    return o->state == OBS_TOLD && !isnan(o->value) && (tp__search_nobj(&s->cfg) == 1 || o->loss);
}

/* See the file comment. Returns 0 past `trials` (when bounded), else 1. */
static int tpe_ask(tp_searcher_t *s, uint64_t index, double now, json_t **out) {
    (void)now;
    tpe_state_t *st = s->impl;
    if (s->cfg.trials && index >= s->cfg.trials) return 0;
    tp_rng_t rng;
    tp__rng_seed(&rng, s->cfg.seed, index);
    json_t *cfg = tp__space_sample_full(s->space, &rng);
    size_t self = st->nprior + (size_t)index; /* this trial's observation */
    /* rank: told finite by loss (then trial number), then pending (liars) */
    size_t ntold = 0, npend = 0;
    for (size_t j = 0; j < st->nobs; j++) {
        const tpe_obs_t *o = &st->obs[j];
        if (told_ok(s, o))
            ntold++;
        else if (o->state == OBS_PENDING && j != self)
            npend++;
    }
    if (ntold >= (s->cfg.startup ? s->cfg.startup : TPE_STARTUP)) {
        double *rank = tp__xmalloc(4 * ntold * sizeof *rank);
        int multi = tp__search_nobj(&s->cfg) > 1; /* MOTPE: values only (see the top) */
        size_t *ids = tp__xmalloc((ntold + npend) * sizeof *ids), r = 0, q = ntold;
        for (size_t j = 0; j < st->nobs; j++) {
            const tpe_obs_t *o = &st->obs[j];
            if (told_ok(s, o)) {
                rank[4 * r] = o->violation;
                rank[4 * r + 1] = o->violation > 0 || multi ? 0 : -o->step;
                rank[4 * r + 2] = o->violation > 0 ? o->violation
                                  : s->maximize    ? -o->value
                                                   : o->value;
                rank[4 * r + 3] = (double)j;
                r++;
            } else if (o->state == OBS_PENDING && j != self) {
                ids[q++] = j;
            }
        }
        qsort(rank, ntold, 4 * sizeof *rank, cmp_rank);
        for (size_t k = 0; k < ntold; k++)
            ids[k] = (size_t)rank[4 * k + 3];
        free(rank);
        tpe_propose(s, ids, ntold, ids + ntold, npend, &rng, cfg);
        free(ids);
    }
    tp__space_prune(s->space, cfg);
    tpe_obs_t *o = obs_at(s, index);
    if (o && o->state != OBS_TOLD) {
        decode_config(s->space, st->dims, cfg, o->x);
        o->state = OBS_PENDING;
    }
    *out = cfg;
    return 1;
}

/* Record (or replace) trial index's value, told at budget (0: none, a complete
 * result); NaN marks it failed. With config NULL the configuration asked for
 * index is used (ignored if none). */
static void tpe_tell_budget(tp_searcher_t *s, uint64_t index, const json_t *config, double value,
                            double budget, double now) {
    (void)now;
    tpe_state_t *st = s->impl;
    size_t at = st->nprior + (size_t)index;
    if (!config && (at >= st->nobs || st->obs[at].state == OBS_NONE)) return;
    tpe_obs_t *o = obs_at(s, index);
    if (!o) return;
    if (config) decode_config(s->space, st->dims, config, o->x);
    o->value = value;
    o->violation = tp__searcher_violation(s, index);
    o->step =
        budget > 0 && !(s->cfg.budget_max > 0 && budget >= s->cfg.budget_max) ? budget : INFINITY;
    o->state = OBS_TOLD;
}

static void tpe_tell(tp_searcher_t *s, uint64_t index, const json_t *config, double value,
                     double now) {
    tpe_tell_budget(s, index, config, value, 0, now);
}

/* Several objectives: record the values as losses; the first stands for
 * the trial in the told/failed bookkeeping (NaN in any marks it failed). */
static void tpe_tell_values(tp_searcher_t *s, uint64_t index, const json_t *config,
                            const double *values, double now) {
    tpe_state_t *st = s->impl;
    size_t m = tp__search_nobj(&s->cfg);
    double v = values[0];
    for (size_t j = 0; j < m; j++)
        if (isnan(values[j])) v = NAN;
    tpe_tell(s, index, config, v, now);
    size_t at = st->nprior + (size_t)index;
    if (at >= st->nobs || st->obs[at].state != OBS_TOLD) return;
    tpe_obs_t *o = &st->obs[at];
    if (!o->loss) o->loss = tp__xmalloc(m * sizeof *o->loss);
    tp__search_losses(&s->cfg, values, o->loss);
}

/* A prior observation (warm start): told like a trial, ranked with them,
 * and the oldest of all for the weights. Only before the first ask or
 * tell (later ones are ignored: the trial numbering would shift). */
static void tpe_tell_prior(tp_searcher_t *s, const json_t *config, const double *values) {
    tpe_state_t *st = s->impl;
    if (st->nobs > st->nprior) return;
    size_t m = tp__search_nobj(&s->cfg);
    st->obs = tp__xrealloc(st->obs, (st->nobs + 1) * sizeof *st->obs);
    tpe_obs_t *o = &st->obs[st->nobs];
    memset(o, 0, sizeof *o);
    o->x = tp__xmalloc((s->space->n ? s->space->n : 1) * sizeof *o->x);
    decode_config(s->space, st->dims, config, o->x);
    o->value = values[0];
    for (size_t j = 0; j < m; j++)
        if (isnan(values[j])) o->value = NAN;
    o->step = INFINITY; /* an earlier result counts as complete */
    o->state = OBS_TOLD;
    if (m > 1) {
        o->loss = tp__xmalloc(m * sizeof *o->loss);
        tp__search_losses(&s->cfg, values, o->loss);
    }
    st->nobs++, st->nprior++;
}

static uint64_t tpe_total(const tp_searcher_t *s) {
    return s->cfg.trials;
}

static void tpe_destroy(tp_searcher_t *s) {
    tpe_state_t *st = s->impl;
    if (!st) return;
    for (size_t j = 0; j < st->nobs; j++)
        free(st->obs[j].x), free(st->obs[j].loss);
    free(st->obs);
    free(st->dims);
    free(st);
    s->impl = NULL;
}

const struct tp_searcher_ops tp__searcher_tpe_ops = {
    .name = "tpe",
    .init = tpe_init,
    .ask = tpe_ask,
    .tell = tpe_tell,
    .tell_budget = tpe_tell_budget,
    .tell_values = tpe_tell_values,
    .tell_prior = tpe_tell_prior,
    .total = tpe_total,
    .destroy = tpe_destroy,
};
