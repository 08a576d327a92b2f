/* searcher_cmaes: CMA-ES with IPOP restarts, after Hansen, "The CMA
 * Evolution Strategy: A Tutorial" (2016), and Optuna's CmaEsSampler.
 *
 * Search space: every unconditional uniform, loguniform, int and normal
 * parameter is one coordinate in [0, 1]: loguniform (and int with log) in
 * log space; int over [lo - 0.5, hi + 0.5] and rounded, as Optuna's
 * default (no margin); uniform with q searched continuous and quantized;
 * normal over mean +- 5 sigma (not in Optuna). Choice and grid parameters,
 * and any parameter with a `when` condition, are what CMA-ES cannot handle:
 * they keep the independent (random) sampler's draw from (seed, index), as
 * Optuna's CmaEsSampler samples them with its independent sampler.
 *
 * Strategy (the tutorial's defaults): lambda = 4 + floor(3 ln n), mu =
 * lambda / 2 positive weights w_i ~ ln((lambda + 1) / 2) - ln i (no
 * negative weights), cumulative step-size adaptation (cs, damps), rank-one
 * (c1, pc with the h_sigma stall) and rank-mu (cmu) covariance updates,
 * c_m = 1. The start is Optuna's: the mean at the centre of the box and
 * sigma0 = 1/6 of it (the tutorial's 0.3 puts a third of each coordinate's
 * draws outside [0, 1]). C = B D^2 B^T is decomposed every generation by
 * the cyclic Jacobi method (n is small; O(n^3) per sweep).
 *
 * Bounds: as the cmaes library Optuna uses, a draw outside [0, 1] is
 * redrawn, up to 100 times, then the last one is clipped.
 *
 * Restarts (IPOP, Auger and Hansen 2005): after an update, the run stops
 * when the best values of the last 10 + ceil(30 n / lambda) generations and
 * the current generation's values each lie within 1e-12 (tolfun), or the
 * median of the last 20 generations' best is no better than the median of
 * the first 20 of the last 120 + 30 n / lambda (stagnation), or sigma times
 * every axis is below 1e-12 sigma0 (tolx), sigma max(D) grew past 1e4
 * sigma0 (tolxup), the condition number of C passes 1e14, or adding 0.1
 * sigma along an axis or 0.2 sigma sqrt(C_ii) to a coordinate leaves the
 * mean unchanged. A restart doubles lambda (up to 2^9 times the default)
 * and starts from a uniformly random mean with sigma0 and C = I.
 *
 * Asynchronous use: a generation is the lambda trial indices from its
 * start. ask(i) inside it draws x from the generation's distribution with an
 * rng seeded by (seed, i) (after the independent draws). The update happens
 * at the first ask past the generation, once each of its trials is told;
 * before that such an ask returns -EAGAIN. Told values of trials outside the
 * current generation are ignored (as Optuna ignores other generations); a
 * failed trial (NaN) counts as the generation's worst. The x used is the
 * told configuration's (rounded ints included), as Optuna tells
 * trial.params.
 *
 * Measured against Hansen's reference implementation (pycma's purecma.py,
 * same start, median over 11 seeds; tests/unit/test_cmaes.c): evaluations to
 * 1e-8 on the sphere 178 (purecma 217) in 2-D, 541 (581) in 5-D; to 1e-6 on
 * Rosenbrock 455 (432) in 2-D, 1856 (1975) in 5-D. purecma's damps is
 * 2 mueff / lambda + 0.3 + cs; this file keeps the tutorial's.
 *
 * Determinism: ask(i) depends on (seed, i) and the calls before it only; a
 * journal replay of the same asks and tells repeats every update.
 * Cost: O(lambda n^2 + n^3 * sweeps) per generation; memory O(n^2 + lambda
 * n) plus one double per generation of the current run. */
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "search/search.h"

#define CMA_SIGMA0 (1.0 / 6.0) /* Optuna: min(range) / 6 on the unit box */
#define CMA_RESAMPLE 100       /* draws outside [0, 1] before clipping */
#define CMA_TOLFUN 1e-12
#define CMA_TOLX 1e-12 /* times sigma0 */
#define CMA_TOLXUP 1e4 /* times sigma0 */
#define CMA_MAX_COND 1e14
#define CMA_MAX_DOUBLINGS 9                  /* lambda at most 2^9 times the default */
#define CMA_NORMAL_SPAN 5.0                  /* normal params: mean +- 5 sigma */
#define CMA_RESTART_STREAM 0x636d61726573ULL /* rng stream of restart means */

typedef struct cma_dim {
    size_t param; /* index into the space */
    int log, is_int;
    double lo, hi; /* internal range: (log) value = lo + u (hi - lo) */
} cma_dim_t;

typedef struct cma_state {
    size_t n; /* coordinates */
    cma_dim_t *dims;
    /* strategy parameters for the current lambda */
    size_t lambda0, lambda, mu;
    double *w, mueff, cc, cs, c1, cmu, damps, chin;
    /* distribution */
    double *m, sigma, *C, *B, *D, *pc, *ps; /* C, B: n x n row-major; D: sqrt eigenvalues */
    uint64_t gen;                           /* generations of this run */
    /* the current generation */
    uint64_t start; /* its first trial index */
    double *x;      /* lambda x n told (or asked) points */
    double *f;      /* lambda losses */
    unsigned char *told;
    /* restarts */
    size_t restarts;
    double *best; /* best loss per generation of this run */
    size_t nbest, capbest;
} cma_state_t;

/* ---- parameters <-> unit coordinates ------------------------------------- */

static double clampd(double x, double lo, double hi) {
    return x < lo ? lo : x > hi ? hi : x;
}

/* Is p a coordinate; if so fill d. */
static int dim_of(const tp_param_t *p, cma_dim_t *d) {
    memset(d, 0, sizeof *d);
    if (p->nwhen) return 0;
    switch (p->kind) {
    case TP_DOM_UNIFORM:
        d->lo = p->lo, d->hi = p->hi;
        break;
    case TP_DOM_LOGUNIFORM:
        d->log = 1, d->lo = log(p->lo), d->hi = log(p->hi);
        break;
    case TP_DOM_INT:
        d->is_int = 1, d->log = p->log;
        d->lo = p->log ? log(p->lo - 0.5) : p->lo - 0.5;
        d->hi = p->log ? log(p->hi + 0.5) : p->hi + 0.5;
        break;
    case TP_DOM_NORMAL:
        d->lo = p->lo - CMA_NORMAL_SPAN * p->hi, d->hi = p->lo + CMA_NORMAL_SPAN * p->hi;
        break;
    default:
        return 0;
    }
    return d->lo < d->hi && isfinite(d->lo) && isfinite(d->hi);
}

/* Round v to a multiple of q inside [lo, hi] when one exists. */
static double quantize(double v, double q, double lo, double hi) {
    double a = ceil(lo / q - 1e-9) * q, b = floor(hi / q + 1e-9) * q;
    return a > b ? v : clampd(round(v / q) * q, a, b);
}

/* The value coordinate u stands for. Caller owns. */
static json_t *encode(const tp_param_t *p, const cma_dim_t *d, double u) {
    double v = d->lo + clampd(u, 0, 1) * (d->hi - d->lo);
    if (d->log) v = exp(v);
    if (p->kind == TP_DOM_NORMAL) return json_real(p->q > 0 ? round(v / p->q) * p->q : v);
    v = clampd(v, p->lo, p->hi);
    if (d->is_int) v = clampd(round(v), p->lo, p->hi);
    if (p->q > 0) v = quantize(v, p->q, p->lo, p->hi);
    return d->is_int ? json_integer((json_int_t)llround(v)) : json_real(v);
}

/* The coordinate of a configuration's value, NaN when missing. */
static double decode(const cma_dim_t *d, const json_t *v) {
    if (!json_is_number(v)) return NAN;
    double x = json_number_value(v);
    if (d->log) x = x > 0 ? log(x) : NAN;
    return isfinite(x) ? clampd((x - d->lo) / (d->hi - d->lo), 0, 1) : NAN;
}

/* ---- linear algebra ---------------------------------------------------------- */

/* Eigen-decomposition of the symmetric n x n matrix a (row-major, destroyed)
 * by the cyclic Jacobi method: each sweep rotates every off-diagonal pair
 * (p, q) to zero; it stops when the off-diagonal mass is negligible. On
 * return eig[i] are the eigenvalues and column i of v (row-major) the unit
 * eigenvector of eig[i]. O(n^3) per sweep, a handful of sweeps. */
static void jacobi_eigen(double *a, size_t n, double *eig, double *v) {
    for (size_t i = 0; i < n * n; i++)
        v[i] = 0;
    for (size_t i = 0; i < n; i++)
        v[i * n + i] = 1;
    for (int sweep = 0; sweep < 100; sweep++) {
        double off = 0, all = 0;
        for (size_t p = 0; p < n; p++)
            for (size_t q = 0; q < n; q++) {
                all += a[p * n + q] * a[p * n + q];
                if (p != q) off += a[p * n + q] * a[p * n + q];
            }
        if (off <= 1e-30 * all) break;
        for (size_t p = 0; p + 1 < n; p++)
            for (size_t q = p + 1; q < n; q++) {
                double apq = a[p * n + q];
                if (apq == 0) continue;
                /* the rotation angle that zeroes a[p][q]: t = tan(angle) */
                double theta = (a[q * n + q] - a[p * n + p]) / (2 * apq);
                double t = (theta >= 0 ? 1.0 : -1.0) / (fabs(theta) + sqrt(theta * theta + 1));
                double c = 1 / sqrt(t * t + 1), s = t * c;
                for (size_t k = 0; k < n; k++) { /* a = a J (columns p, q) */
                    double akp = a[k * n + p], akq = a[k * n + q];
                    a[k * n + p] = c * akp - s * akq;
                    a[k * n + q] = s * akp + c * akq;
                }
                for (size_t k = 0; k < n; k++) { /* a = J^T a (rows p, q) */
                    double apk = a[p * n + k], aqk = a[q * n + k];
                    a[p * n + k] = c * apk - s * aqk;
                    a[q * n + k] = s * apk + c * aqk;
                }
                for (size_t k = 0; k < n; k++) { /* v = v J */
                    double vkp = v[k * n + p], vkq = v[k * n + q];
                    v[k * n + p] = c * vkp - s * vkq;
                    v[k * n + q] = s * vkp + c * vkq;
                }
            }
    }
    for (size_t i = 0; i < n; i++)
        eig[i] = a[i * n + i];
}

/* B and D from C (symmetrized; eigenvalues floored at a tiny positive). */
static void decompose(cma_state_t *st) {
    size_t n = st->n;
    double *a = tp__xmalloc(n * n * sizeof *a);
    for (size_t i = 0; i < n; i++)
        for (size_t j = 0; j < n; j++)
            a[i * n + j] = 0.5 * (st->C[i * n + j] + st->C[j * n + i]);
    jacobi_eigen(a, n, st->D, st->B);
    for (size_t i = 0; i < n; i++)
        st->D[i] = sqrt(st->D[i] > 1e-300 ? st->D[i] : 1e-300);
    free(a);
}

/* ---- strategy ---------------------------------------------------------------- */

/* The tutorial's default strategy parameters for lambda. */
static void set_lambda(cma_state_t *st, size_t lambda) {
    double n = (double)st->n;
    st->lambda = lambda;
    st->mu = lambda / 2;
    free(st->w), free(st->x), free(st->f), free(st->told);
    st->w = tp__xmalloc(st->mu * sizeof *st->w);
    double sum = 0, sq = 0;
    for (size_t i = 0; i < st->mu; i++)
        sum += st->w[i] = log((double)(lambda + 1) / 2) - log((double)(i + 1));
    for (size_t i = 0; i < st->mu; i++)
        st->w[i] /= sum, sq += st->w[i] * st->w[i];
    st->mueff = 1 / sq;
    double me = st->mueff;
    st->cc = (4 + me / n) / (n + 4 + 2 * me / n);
    st->cs = (me + 2) / (n + me + 5);
    st->c1 = 2 / ((n + 1.3) * (n + 1.3) + me);
    st->cmu = fmin(1 - st->c1, 2 * (me - 2 + 1 / me) / ((n + 2) * (n + 2) + me));
    st->damps = 1 + 2 * fmax(0, sqrt((me - 1) / (n + 1)) - 1) + st->cs;
    st->chin = sqrt(n) * (1 - 1 / (4 * n) + 1 / (21 * n * n));
    st->x = tp__xcalloc(lambda * st->n, sizeof *st->x);
    st->f = tp__xcalloc(lambda, sizeof *st->f);
    st->told = tp__xcalloc(lambda, 1);
}

/* A fresh run: mean m0 (n values), sigma0, C = I, paths zero. */
static void start_run(cma_state_t *st, const double *m0) {
    size_t n = st->n;
    memcpy(st->m, m0, n * sizeof *st->m);
    st->sigma = CMA_SIGMA0;
    for (size_t i = 0; i < n * n; i++)
        st->C[i] = st->B[i] = 0;
    for (size_t i = 0; i < n; i++) {
        st->C[i * n + i] = st->B[i * n + i] = st->D[i] = 1;
        st->pc[i] = st->ps[i] = 0;
    }
    st->gen = 0;
    st->nbest = 0;
}

static int cma_init(tp_searcher_t *s, tp_error_t *err) {
    (void)err;
    cma_state_t *st = tp__xcalloc(1, sizeof *st);
    st->dims = tp__xcalloc(s->space->n ? s->space->n : 1, sizeof *st->dims);
    for (size_t i = 0; i < s->space->n; i++)
        if (dim_of(&s->space->params[i], &st->dims[st->n])) st->dims[st->n++].param = i;
    s->impl = st;
    if (st->n == 0) return 0; /* nothing to search: every ask is the random draw */
    size_t n = st->n;
    st->m = tp__xmalloc(n * sizeof *st->m);
    st->C = tp__xmalloc(n * n * sizeof *st->C);
    st->B = tp__xmalloc(n * n * sizeof *st->B);
    st->D = tp__xmalloc(n * sizeof *st->D);
    st->pc = tp__xmalloc(n * sizeof *st->pc);
    st->ps = tp__xmalloc(n * sizeof *st->ps);
    st->lambda0 = 4 + (size_t)floor(3 * log((double)n));
    set_lambda(st, st->lambda0);
    double *centre = tp__xmalloc(n * sizeof *centre);
    for (size_t i = 0; i < n; i++)
        centre[i] = 0.5;
    start_run(st, centre);
    free(centre);
    return 0;
}

typedef struct ranked {
    double f;
    size_t k;
} ranked_t;

static int cmp_ranked(const void *pa, const void *pb) {
    const ranked_t *a = pa, *b = pb;
    if (a->f != b->f) return a->f < b->f ? -1 : 1;
    return (a->k > b->k) - (a->k < b->k);
}

static int cmp_dbl(const void *pa, const void *pb) {
    double a = *(const double *)pa, b = *(const double *)pb;
    return (a > b) - (a < b);
}

static double median_of(const double *v, size_t n) {
    double *t = tp__xmalloc(n * sizeof *t);
    memcpy(t, v, n * sizeof *t);
    qsort(t, n, sizeof *t, cmp_dbl);
    double m = n % 2 ? t[n / 2] : 0.5 * (t[n / 2 - 1] + t[n / 2]);
    free(t);
    return m;
}

/* Should the run restart (see the file comment)? flo, fhi: this
 * generation's losses' range. */
static int should_stop(const cma_state_t *st, double flo, double fhi) {
    size_t n = st->n;
    double dn = (double)n, lam = (double)st->lambda;
    size_t hist = 10 + (size_t)ceil(30 * dn / lam);
    if (st->nbest >= hist) {
        double lo = INFINITY, hi = -INFINITY;
        for (size_t g = st->nbest - hist; g < st->nbest; g++)
            lo = fmin(lo, st->best[g]), hi = fmax(hi, st->best[g]);
        if (hi - lo < CMA_TOLFUN && fhi - flo < CMA_TOLFUN) return 1;
    }
    size_t stag = 120 + (size_t)(30 * dn / lam);
    if (st->nbest >= stag && stag >= 40) {
        const double *win = st->best + st->nbest - stag;
        if (median_of(win + stag - 20, 20) >= median_of(win, 20)) return 1;
    }
    double dmax = 0, dmin = INFINITY;
    for (size_t i = 0; i < n; i++)
        dmax = fmax(dmax, st->D[i]), dmin = fmin(dmin, st->D[i]);
    int tiny = 1;
    for (size_t i = 0; i < n; i++)
        if (st->sigma * fmax(fabs(st->pc[i]), sqrt(st->C[i * n + i])) >= CMA_TOLX * CMA_SIGMA0)
            tiny = 0;
    if (tiny || st->sigma * dmax > CMA_TOLXUP * CMA_SIGMA0) return 1;
    if ((dmax / dmin) * (dmax / dmin) > CMA_MAX_COND) return 1;
    size_t ax = (size_t)(st->gen % n);
    int same = 1;
    for (size_t i = 0; i < n; i++)
        if (st->m[i] != st->m[i] + 0.1 * st->sigma * st->D[ax] * st->B[i * n + ax]) same = 0;
    if (same) return 1;
    for (size_t i = 0; i < n; i++)
        if (st->m[i] == st->m[i] + 0.2 * st->sigma * sqrt(st->C[i * n + i])) return 1;
    return 0;
}

/* One generation's update from its lambda told points (the tutorial's
 * section "Algorithm summary"); then a restart when should_stop says so.
 * O(lambda n^2 + n^3). */
static void update(tp_searcher_t *s) {
    cma_state_t *st = s->impl;
    size_t n = st->n, lambda = st->lambda;
    double worst = -INFINITY;
    for (size_t k = 0; k < lambda; k++)
        if (!isnan(st->f[k])) worst = fmax(worst, st->f[k]);
    ranked_t *r = tp__xmalloc(lambda * sizeof *r);
    for (size_t k = 0; k < lambda; k++)
        r[k] = (ranked_t){isnan(st->f[k]) ? (isfinite(worst) ? worst : 0) : st->f[k], k};
    qsort(r, lambda, sizeof *r, cmp_ranked);
    double *y = tp__xmalloc(st->mu * n * sizeof *y), *yw = tp__xcalloc(n, sizeof *yw);
    double *t = tp__xmalloc(n * sizeof *t);
    for (size_t i = 0; i < st->mu; i++)
        for (size_t j = 0; j < n; j++) {
            y[i * n + j] = (st->x[r[i].k * n + j] - st->m[j]) / st->sigma;
            yw[j] += st->w[i] * y[i * n + j];
        }
    for (size_t j = 0; j < n; j++)
        st->m[j] += st->sigma * yw[j];
    /* ps = (1 - cs) ps + sqrt(cs (2 - cs) mueff) C^-1/2 yw, C^-1/2 = B D^-1 B^T */
    for (size_t a = 0; a < n; a++) {
        t[a] = 0;
        for (size_t j = 0; j < n; j++)
            t[a] += st->B[j * n + a] * yw[j];
        t[a] /= st->D[a];
    }
    double ks = sqrt(st->cs * (2 - st->cs) * st->mueff), psn = 0;
    for (size_t i = 0; i < n; i++) {
        double v = 0;
        for (size_t a = 0; a < n; a++)
            v += st->B[i * n + a] * t[a];
        st->ps[i] = (1 - st->cs) * st->ps[i] + ks * v;
        psn += st->ps[i] * st->ps[i];
    }
    psn = sqrt(psn);
    st->gen++;
    double hnorm = psn / sqrt(1 - pow(1 - st->cs, 2.0 * (double)st->gen));
    int hsig = hnorm < (1.4 + 2 / ((double)n + 1)) * st->chin;
    double kc = sqrt(st->cc * (2 - st->cc) * st->mueff);
    for (size_t i = 0; i < n; i++)
        st->pc[i] = (1 - st->cc) * st->pc[i] + hsig * kc * yw[i];
    double dh = (1 - hsig) * st->cc * (2 - st->cc);
    double keep = 1 + st->c1 * dh - st->c1 - st->cmu; /* the weights sum to 1 */
    for (size_t i = 0; i < n; i++)
        for (size_t j = 0; j < n; j++) {
            double rank_mu = 0;
            for (size_t k = 0; k < st->mu; k++)
                rank_mu += st->w[k] * y[k * n + i] * y[k * n + j];
            st->C[i * n + j] =
                keep * st->C[i * n + j] + st->c1 * st->pc[i] * st->pc[j] + st->cmu * rank_mu;
        }
    st->sigma *= exp((st->cs / st->damps) * (psn / st->chin - 1));
    decompose(st);
    st->best = tp__xgrow(st->best, &st->capbest, st->nbest + 1, sizeof *st->best, 64);
    st->best[st->nbest++] = r[0].f;
    int stop = should_stop(st, r[0].f, r[lambda - 1].f);
    free(r), free(y), free(yw), free(t);
    if (!stop) return;
    st->restarts++;
    size_t doublings = st->restarts < CMA_MAX_DOUBLINGS ? st->restarts : CMA_MAX_DOUBLINGS;
    set_lambda(st, st->lambda0 << doublings);
    tp_rng_t rng;
    tp__rng_seed(&rng, s->cfg.seed ^ CMA_RESTART_STREAM, st->restarts);
    double *m0 = tp__xmalloc(n * sizeof *m0);
    for (size_t i = 0; i < n; i++)
        m0[i] = tp__rng_uniform(&rng);
    start_run(st, m0);
    free(m0);
}

/* x = m + sigma B D z, redrawn while outside [0, 1] (then clipped). */
static void draw(const cma_state_t *st, tp_rng_t *rng, double *x) {
    size_t n = st->n;
    double *dz = tp__xmalloc(n * sizeof *dz);
    for (int attempt = 0;; attempt++) {
        for (size_t a = 0; a < n; a++)
            dz[a] = st->D[a] * tp__rng_normal(rng);
        int inside = 1;
        for (size_t i = 0; i < n; i++) {
            double v = 0;
            for (size_t a = 0; a < n; a++)
                v += st->B[i * n + a] * dz[a];
            x[i] = st->m[i] + st->sigma * v;
            if (x[i] < 0 || x[i] > 1) inside = 0;
        }
        if (inside) break;
        if (attempt + 1 >= CMA_RESAMPLE) {
            for (size_t i = 0; i < n; i++)
                x[i] = clampd(x[i], 0, 1);
            break;
        }
    }
    free(dz);
}

/* See the file comment. Returns 0 past `trials` (when bounded), -EAGAIN
 * while the generation before index's waits for results, else 1. */
static int cma_ask(tp_searcher_t *s, uint64_t index, double now, json_t **out) {
    (void)now;
    cma_state_t *st = s->impl;
    if (s->cfg.trials && index >= s->cfg.trials) return 0;
    while (st->n && index >= st->start + st->lambda) {
        for (size_t k = 0; k < st->lambda; k++)
            if (!st->told[k]) return -EAGAIN;
        uint64_t next = st->start + st->lambda;
        update(s); /* may change lambda (a restart) */
        st->start = next;
        memset(st->told, 0, st->lambda);
    }
    tp_rng_t rng;
    tp__rng_seed(&rng, s->cfg.seed, index);
    json_t *cfg = tp__space_sample_full(s->space, &rng);
    if (st->n) {
        double *x = tp__xmalloc(st->n * sizeof *x);
        draw(st, &rng, x);
        for (size_t i = 0; i < st->n; i++) {
            const tp_param_t *p = &s->space->params[st->dims[i].param];
            json_object_set_new(cfg, p->name, encode(p, &st->dims[i], x[i]));
        }
        if (index >= st->start) memcpy(st->x + (index - st->start) * st->n, x, st->n * sizeof *x);
        free(x);
    }
    tp__space_prune(s->space, cfg);
    *out = cfg;
    return 1;
}

/* Record trial index's loss when it belongs to the current generation; a
 * later tell for the same index replaces it. */
static void cma_tell(tp_searcher_t *s, uint64_t index, const json_t *config, double value,
                     double now) {
    (void)now;
    cma_state_t *st = s->impl;
    if (!st->n || index < st->start || index >= st->start + st->lambda) return;
    size_t k = (size_t)(index - st->start);
    for (size_t i = 0; config && i < st->n; i++) {
        const tp_param_t *p = &s->space->params[st->dims[i].param];
        double u = decode(&st->dims[i], json_object_get(config, p->name));
        if (!isnan(u)) st->x[k * st->n + i] = u;
    }
    st->f[k] = s->maximize ? -value : value;
    st->told[k] = 1;
}

static uint64_t cma_total(const tp_searcher_t *s) {
    return s->cfg.trials;
}

static void cma_destroy(tp_searcher_t *s) {
    cma_state_t *st = s->impl;
    if (!st) return;
    free(st->dims), free(st->w), free(st->m), free(st->C), free(st->B), free(st->D);
    free(st->pc), free(st->ps), free(st->x), free(st->f), free(st->told), free(st->best);
    free(st);
    s->impl = NULL;
}

const struct tp_searcher_ops tp__searcher_cmaes_ops = {
    .name = "cmaes",
    .init = cma_init,
    .ask = cma_ask,
    .tell = cma_tell,
    .total = cma_total,
    .destroy = cma_destroy,
};
