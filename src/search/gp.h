/* gp: an exact Gaussian process over [0,1]^d (Matérn 5/2, ARD length
 * scales) with its hyperparameters fitted by maximizing the log marginal
 * likelihood plus weak priors, and log expected improvement. The linear
 * algebra is LAPACK's and BLAS's (dpotrf, dpotrs, dpotri, dtrsv); no clock,
 * no I/O, no randomness: a fit is a pure function of its data.
 *
 * The _timed variants take PB2's time-varying kernel (Parker-Holder et al.
 * 2020): the last of the d inputs is time t, and
 *   k((x, t), (x', t')) = amp · Matérn52(x, x') · exp(-|t - t'| / ls[d-1]),
 * the paper's (1 - ε)^{|t-t'|/2} with ε = 1 - exp(-2 / ls[d-1]), its decay
 * fitted with the rest (the paper's spatial kernel is squared-exponential;
 * this one keeps gp.c's Matérn 5/2). */
#ifndef TP_GP_H
#define TP_GP_H

#include <stddef.h>

typedef struct tp_gp {
    size_t n, d;   /* observations, input dimensions */
    int timed;     /* the last input is time (the _timed variants) */
    double *x;     /* n * d inputs, row-major, owned */
    double *ls;    /* d length scales, owned */
    double amp;    /* signal variance (of the standardised outputs) */
    double noise;  /* noise variance (of the standardised outputs) */
    double *chol;  /* n * n lower Cholesky factor of K + noise I (column-major), owned */
    double *alpha; /* (K + noise I)^-1 y, owned */
    double *work;  /* n scratch for predictions, owned */
} tp_gp_t;

/* Matérn 5/2 covariance at scaled distance r: (1 + √5 r + 5/3 r²) e^{-√5 r}. */
double tp__gp_matern52(double r);

/* Fit hyperparameters to (x, y) (n rows of d inputs, y standardised: mean 0,
 * variance 1): maximize the log marginal likelihood plus log-normal priors
 * (length scales centred at √2 + log(d)/2 in log space, as Hvarfner et al.
 * 2024) by L-BFGS from two starts in log space. On return ls, *amp and
 * *noise hold the best found. nfit <= n rows are used (the first nfit).
 * O(iterations * n³). Returns 0, or -EDOM when no start gives a positive
 * definite matrix. */
int tp__gp_fit_hyper(const double *x, const double *y, size_t nfit, size_t d, double *ls,
                     double *amp, double *noise);
/* Condition the GP g (ls, amp, noise set by the caller, or by
 * tp__gp_fit_hyper) on (x, y): copies x, factorises K + noise I (dpotrf)
 * and solves for alpha (dpotrs). Returns 0 or -EDOM (not positive
 * definite even with jitter). O(n³). */
int tp__gp_condition(tp_gp_t *g, const double *x, const double *y, size_t n, size_t d,
                     const double *ls, double amp, double noise);
/* The two above under the time-varying kernel (the header's): the last of the d
 * inputs is time; its length scale is ls[d-1]. Same costs. */
int tp__gp_fit_hyper_timed(const double *x, const double *y, size_t nfit, size_t d, double *ls,
                           double *amp, double *noise);
int tp__gp_condition_timed(tp_gp_t *g, const double *x, const double *y, size_t n, size_t d,
                           const double *ls, double amp, double noise);
/* Posterior mean and variance at xq (d inputs). O(n² + n d). */
void tp__gp_predict(const tp_gp_t *g, const double *xq, double *mean, double *var);
void tp__gp_free(tp_gp_t *g);
/* log EI of a minimization at posterior (mean, sigma > 0) against best:
 * log(sigma * h(z)), z = (best - mean) / sigma, h(z) = φ(z) + z Φ(z),
 * accurate for z far below 0 (an asymptotic series, Ament et al. 2023). */
double tp__gp_log_ei(double mean, double sigma, double best);

#endif
