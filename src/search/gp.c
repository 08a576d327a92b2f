/* gp: see gp.h. Matrices are column-major, as LAPACK takes them. */
#include "search/gp.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "util/util.h"

/* LAPACK and BLAS (Fortran calling convention: hidden string lengths last). */
void dpotrf_(const char *uplo, const int *n, double *a, const int *lda, int *info, size_t);
void dpotrs_(const char *uplo, const int *n, const int *nrhs, const double *a, const int *lda,
             double *b, const int *ldb, int *info, size_t);
void dpotri_(const char *uplo, const int *n, double *a, const int *lda, int *info, size_t);
void dtrsv_(const char *uplo, const char *trans, const char *diag, const int *n, const double *a,
            const int *lda, double *x, const int *incx, size_t, size_t, size_t);

#define SQRT5 2.23606797749978969641
#define JITTER 1e-6    /* added to the diagonal, more when a factorisation fails */
#define LBFGS_M 6      /* curvature pairs kept */
#define LBFGS_ITERS 30 /* iterations per start */

/* Box of the log hyperparameters and the priors' (mean, variance). */
static const double LOG_LS_LO = -4.6, LOG_LS_HI = 3.4;      /* 0.01 .. 30 */
static const double LOG_AMP_LO = -4.6, LOG_AMP_HI = 3.9;    /* 0.01 .. 50 */
static const double LOG_NOISE_LO = -13.8, LOG_NOISE_HI = 0; /* 1e-6 .. 1 */
static const double LS_PRIOR_VAR = 3.0, AMP_PRIOR_VAR = 2.0;
static const double NOISE_PRIOR_MEAN = -9.2, NOISE_PRIOR_VAR = 9.0;

double tp__gp_matern52(double r) {
    double s = SQRT5 * r;
    return (1 + s + s * s / 3) * exp(-s);
}

static int potrf(double *a, int n) {
    int info = 0;
    dpotrf_("L", &n, a, &n, &info, 1);
    return info;
}

/* ---- hyperparameter fit --------------------------------------------------------- */

typedef struct fit {
    size_t n, d;
    int timed; /* the last input is time (tp__gp_fit_hyper_timed) */
    const double *y;
    double *sq; /* d * n * n squared differences per dimension (lower triangle used) */
    double *k;  /* n * n covariance, then its inverse */
    double *m;  /* n * n Matérn values, amp excluded */
    double *dm; /* n * n (5/3)(1 + √5 r) e^{-√5 r}: d Matérn / d log ls_j over (Δ_j/ls_j)² */
    double *alpha;  /* n */
    double ls_mean; /* prior mean of log ls */
} fit_t;

/* f(theta) = -(log marginal likelihood + log prior), theta = (log ls[0..d),
 * log amp, log noise), and its gradient in g. Returns INFINITY when the
 * matrix is not positive definite. O(n³ + n² d). */
static double neg_lml(fit_t *f, const double *theta, double *g) {
    size_t n = f->n, d = f->d;
    double amp = exp(theta[d]), noise = exp(theta[d + 1]);
    size_t dx = d - (size_t)f->timed; /* the Matérn's inputs */
    double inv2[64], inv_t = f->timed ? exp(-theta[d - 1]) : 0;
    for (size_t j = 0; j < dx; j++)
        inv2[j] = exp(-2 * theta[j]);
    for (size_t b = 0; b < n; b++)
        for (size_t a = b; a < n; a++) {
            double r2 = 0;
            for (size_t j = 0; j < dx; j++)
                r2 += f->sq[(j * n + b) * n + a] * inv2[j];
            double r = sqrt(r2), e = exp(-SQRT5 * r);
            double tf = f->timed ? exp(-sqrt(f->sq[(dx * n + b) * n + a]) * inv_t) : 1;
            f->m[b * n + a] = (1 + SQRT5 * r + 5.0 / 3 * r2) * e * tf;
            f->dm[b * n + a] = 5.0 / 3 * (1 + SQRT5 * r) * e * tf;
            f->k[b * n + a] = amp * f->m[b * n + a] + (a == b ? noise + JITTER : 0);
        }
    int ni = (int)n, one = 1, info = 0;
    if (potrf(f->k, ni)) return INFINITY;
    double logdet = 0;
    for (size_t a = 0; a < n; a++)
        logdet += log(f->k[a * n + a]);
    memcpy(f->alpha, f->y, n * sizeof *f->alpha);
    dpotrs_("L", &ni, &one, f->k, &ni, f->alpha, &ni, &info, 1);
    double fit = 0;
    for (size_t a = 0; a < n; a++)
        fit += f->y[a] * f->alpha[a];
    dpotri_("L", &ni, f->k, &ni, &info, 1);
    if (info) return INFINITY;
    double val = 0.5 * fit + logdet + 0.5 * (double)n * log(2 * M_PI);
    /* gradient of -lml: -0.5 sum_ab W_ab dK_ab, W = alpha alpha' - K^-1 */
    for (size_t j = 0; j < d + 2; j++)
        g[j] = 0;
    for (size_t b = 0; b < n; b++)
        for (size_t a = b; a < n; a++) {
            double w = f->alpha[a] * f->alpha[b] - f->k[b * n + a];
            if (a != b) w *= 2;
            double dl = amp * f->dm[b * n + a] * w;
            for (size_t j = 0; j < dx; j++)
                g[j] -= 0.5 * dl * f->sq[(j * n + b) * n + a] * inv2[j];
            if (f->timed) /* d k / d log ls_t = k |dt| / ls_t */
                g[d - 1] -=
                    0.5 * w * amp * f->m[b * n + a] * sqrt(f->sq[(dx * n + b) * n + a]) * inv_t;
            g[d] -= 0.5 * w * amp * f->m[b * n + a];
            if (a == b) g[d + 1] -= 0.5 * w * noise;
        }
    /* priors (log-normal): add -log p */
    for (size_t j = 0; j < d; j++) {
        double u = theta[j] - f->ls_mean;
        val += u * u / (2 * LS_PRIOR_VAR), g[j] += u / LS_PRIOR_VAR;
    }
    val += theta[d] * theta[d] / (2 * AMP_PRIOR_VAR), g[d] += theta[d] / AMP_PRIOR_VAR;
    double u = theta[d + 1] - NOISE_PRIOR_MEAN;
    val += u * u / (2 * NOISE_PRIOR_VAR), g[d + 1] += u / NOISE_PRIOR_VAR;
    return val;
}

static void clamp_theta(double *t, size_t d) {
    for (size_t j = 0; j < d + 2; j++) {
        double lo = j < d ? LOG_LS_LO : j == d ? LOG_AMP_LO : LOG_NOISE_LO;
        double hi = j < d ? LOG_LS_HI : j == d ? LOG_AMP_HI : LOG_NOISE_HI;
        t[j] = t[j] < lo ? lo : t[j] > hi ? hi : t[j];
    }
}

/* Minimize neg_lml from theta (in place) by L-BFGS, projected onto the
 * box, with a backtracking (Armijo) line search. Returns the value. */
static double lbfgs(fit_t *f, double *theta) {
    size_t p = f->d + 2;
    double *g = tp__xcalloc(p, sizeof *g), *gn = tp__xcalloc(p, sizeof *gn);
    double *dir = tp__xcalloc(p, sizeof *dir), *tn = tp__xcalloc(p, sizeof *tn);
    double *s = tp__xcalloc(LBFGS_M * p, sizeof *s), *yv = tp__xcalloc(LBFGS_M * p, sizeof *yv);
    double rho[LBFGS_M], al[LBFGS_M];
    size_t stored = 0, head = 0;
    clamp_theta(theta, f->d);
    double fx = neg_lml(f, theta, g);
    for (int it = 0; it < LBFGS_ITERS && isfinite(fx); it++) {
        /* two-loop recursion: dir = -H g */
        for (size_t j = 0; j < p; j++)
            dir[j] = -g[j];
        for (size_t k = 0; k < stored; k++) {
            size_t i = (head + LBFGS_M - 1 - k) % LBFGS_M;
            double a = 0;
            for (size_t j = 0; j < p; j++)
                a += s[i * p + j] * dir[j];
            al[i] = a * rho[i];
            for (size_t j = 0; j < p; j++)
                dir[j] -= al[i] * yv[i * p + j];
        }
        if (stored) {
            size_t i = (head + LBFGS_M - 1) % LBFGS_M;
            double sy = 0, yy = 0;
            for (size_t j = 0; j < p; j++)
                sy += s[i * p + j] * yv[i * p + j], yy += yv[i * p + j] * yv[i * p + j];
            for (size_t j = 0; j < p; j++)
                dir[j] *= sy / yy;
        } else {
            double gn2 = 0;
            for (size_t j = 0; j < p; j++)
                gn2 += g[j] * g[j];
            double sc = 1 / fmax(1, sqrt(gn2));
            for (size_t j = 0; j < p; j++)
                dir[j] *= sc;
        }
        for (size_t k = stored; k-- > 0;) {
            size_t i = (head + LBFGS_M - 1 - k) % LBFGS_M;
            double b = 0;
            for (size_t j = 0; j < p; j++)
                b += yv[i * p + j] * dir[j];
            b *= rho[i];
            for (size_t j = 0; j < p; j++)
                dir[j] += s[i * p + j] * (al[i] - b);
        }
        double t = 1, fn = INFINITY, dec = 0;
        for (int ls = 0; ls < 12; ls++, t *= 0.5) {
            for (size_t j = 0; j < p; j++)
                tn[j] = theta[j] + t * dir[j];
            clamp_theta(tn, f->d);
            dec = 0;
            for (size_t j = 0; j < p; j++)
                dec += g[j] * (tn[j] - theta[j]);
            if (dec >= 0) continue;
            fn = neg_lml(f, tn, gn);
            if (fn <= fx + 1e-4 * dec) break;
        }
        if (!(fn <= fx + 1e-4 * dec) || fx - fn < 1e-7 * fmax(1, fabs(fx))) {
            if (fn < fx) memcpy(theta, tn, p * sizeof *theta), fx = fn;
            break;
        }
        double sy = 0;
        for (size_t j = 0; j < p; j++) {
            s[head * p + j] = tn[j] - theta[j];
            yv[head * p + j] = gn[j] - g[j];
            sy += s[head * p + j] * yv[head * p + j];
        }
        if (sy > 1e-12) {
            rho[head] = 1 / sy;
            head = (head + 1) % LBFGS_M;
            if (stored < LBFGS_M) stored++;
        }
        memcpy(theta, tn, p * sizeof *theta), memcpy(g, gn, p * sizeof *g), fx = fn;
    }
    free(g), free(gn), free(dir), free(tn), free(s), free(yv);
    return fx;
}

/* tp__gp_fit_hyper, the last input time when timed (gp.h). */
static int fit_hyper(const double *x, const double *y, size_t n, size_t d, int timed, double *ls,
                     double *amp, double *noise) {
    if (d > 64 || d < (size_t)timed) return -EINVAL;
    fit_t f = {.n = n, .d = d, .timed = timed, .y = y};
    f.sq = tp__xmalloc(d * n * n * sizeof *f.sq);
    f.k = tp__xmalloc(n * n * sizeof *f.k);
    f.m = tp__xmalloc(n * n * sizeof *f.m);
    f.dm = tp__xmalloc(n * n * sizeof *f.dm);
    f.alpha = tp__xmalloc(n * sizeof *f.alpha);
    f.ls_mean = M_SQRT2 + 0.5 * log((double)d);
    for (size_t j = 0; j < d; j++)
        for (size_t b = 0; b < n; b++)
            for (size_t a = b; a < n; a++) {
                double u = x[a * d + j] - x[b * d + j];
                f.sq[(j * n + b) * n + a] = u * u;
            }
    /* starts: the prior's mode, and shorter scales with little noise */
    double starts[2][2] = {{f.ls_mean, NOISE_PRIOR_MEAN}, {log(0.2), -11.5}};
    double *theta = tp__xmalloc((d + 2) * sizeof *theta), best = INFINITY;
    for (size_t k = 0; k < 2; k++) {
        for (size_t j = 0; j < d; j++)
            theta[j] = starts[k][0];
        theta[d] = 0, theta[d + 1] = starts[k][1];
        double v = lbfgs(&f, theta);
        if (v < best) {
            best = v;
            for (size_t j = 0; j < d; j++)
                ls[j] = exp(theta[j]);
            *amp = exp(theta[d]), *noise = exp(theta[d + 1]);
        }
    }
    free(theta), free(f.sq), free(f.k), free(f.m), free(f.dm), free(f.alpha);
    return isfinite(best) ? 0 : -EDOM;
}

int tp__gp_fit_hyper(const double *x, const double *y, size_t n, size_t d, double *ls, double *amp,
                     double *noise) {
    return fit_hyper(x, y, n, d, 0, ls, amp, noise);
}

int tp__gp_fit_hyper_timed(const double *x, const double *y, size_t n, size_t d, double *ls,
                           double *amp, double *noise) {
    return fit_hyper(x, y, n, d, 1, ls, amp, noise);
}

/* ---- posterior ----------------------------------------------------------------------- */

static double kern(const tp_gp_t *g, const double *a, const double *b) {
    size_t dx = g->d - (size_t)g->timed;
    double r2 = 0;
    for (size_t j = 0; j < dx; j++) {
        double u = (a[j] - b[j]) / g->ls[j];
        r2 += u * u;
    }
    double k = g->amp * tp__gp_matern52(sqrt(r2));
    return g->timed ? k * exp(-fabs(a[dx] - b[dx]) / g->ls[dx]) : k;
}

/* tp__gp_condition, the last input time when timed (gp.h). */
static int condition(tp_gp_t *g, const double *x, const double *y, size_t n, size_t d, int timed,
                     const double *ls, double amp, double noise) {
    tp__gp_free(g);
    if (d < (size_t)timed) return -EINVAL;
    g->n = n, g->d = d, g->timed = timed, g->amp = amp, g->noise = noise;
    g->x = tp__xmalloc((n * d + 1) * sizeof *g->x);
    memcpy(g->x, x, n * d * sizeof *g->x);
    g->ls = tp__xmalloc((d + 1) * sizeof *g->ls);
    memcpy(g->ls, ls, d * sizeof *g->ls);
    g->chol = tp__xmalloc((n * n + 1) * sizeof *g->chol);
    g->alpha = tp__xmalloc((n + 1) * sizeof *g->alpha);
    g->work = tp__xmalloc((n + 1) * sizeof *g->work);
    for (double jitter = JITTER; jitter < 1e-1; jitter *= 100) {
        for (size_t b = 0; b < n; b++)
            for (size_t a = b; a < n; a++)
                g->chol[b * n + a] = kern(g, &x[a * d], &x[b * d]) + (a == b ? noise + jitter : 0);
        if (potrf(g->chol, (int)n)) continue;
        int ni = (int)n, one = 1, info = 0;
        memcpy(g->alpha, y, n * sizeof *g->alpha);
        dpotrs_("L", &ni, &one, g->chol, &ni, g->alpha, &ni, &info, 1);
        return info ? -EDOM : 0;
    }
    return -EDOM;
}

int tp__gp_condition(tp_gp_t *g, const double *x, const double *y, size_t n, size_t d,
                     const double *ls, double amp, double noise) {
    return condition(g, x, y, n, d, 0, ls, amp, noise);
}

int tp__gp_condition_timed(tp_gp_t *g, const double *x, const double *y, size_t n, size_t d,
                           const double *ls, double amp, double noise) {
    return condition(g, x, y, n, d, 1, ls, amp, noise);
}

void tp__gp_predict(const tp_gp_t *g, const double *xq, double *mean, double *var) {
    size_t n = g->n;
    double mu = 0;
    for (size_t a = 0; a < n; a++) {
        g->work[a] = kern(g, xq, &g->x[a * g->d]);
        mu += g->work[a] * g->alpha[a];
    }
    int ni = (int)n, one = 1;
    if (n) dtrsv_("L", "N", "N", &ni, g->chol, &ni, g->work, &one, 1, 1, 1);
    double v = g->amp;
    for (size_t a = 0; a < n; a++)
        v -= g->work[a] * g->work[a];
    *mean = mu;
    *var = v > 1e-12 ? v : 1e-12;
}

void tp__gp_free(tp_gp_t *g) {
    free(g->x), free(g->ls), free(g->chol), free(g->alpha), free(g->work);
    memset(g, 0, sizeof *g);
}

double tp__gp_log_ei(double mean, double sigma, double best) {
    double z = (best - mean) / sigma;
    if (z > -6) {
        double h = exp(-0.5 * z * z) / sqrt(2 * M_PI) + z * 0.5 * erfc(-z / M_SQRT2);
        return log(fmax(h, 1e-300)) + log(sigma);
    }
    /* h(z) = φ(z) (1 - t R(t)), t = -z, R Mills' ratio: 1 - t R(t) ~ 1/t² - 3/t⁴ + ... */
    double t2 = z * z, u = 1 / t2;
    double tail = u * (1 - u * (3 - u * (15 - u * (105 - 945 * u))));
    return -0.5 * t2 - 0.5 * log(2 * M_PI) + log(tail) + log(sigma);
}
