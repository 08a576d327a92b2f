/* virtual_jobs: what the search benches (mf_search, pbt_search) share: the
 * jobs out on a virtual clock, the earliest-ending one ending first, and
 * the medians, means and standard deviations over seeds they print. */
#ifndef TP_BENCH_VIRTUAL_JOBS_H
#define TP_BENCH_VIRTUAL_JOBS_H

#include <math.h>
#include <stdlib.h>

#include "search/scheduler.h"

#define VJ_CONC 4 /* jobs out at once */

typedef struct vjobs {
    tp_job_t job[VJ_CONC];
    double end[VJ_CONC]; /* when each ends */
    size_t n;
} vjobs_t;

/* Job j starts now and ends at end (n < VJ_CONC). */
static inline void vjobs_start(vjobs_t *v, const tp_job_t *j, double end) {
    v->job[v->n] = *j, v->end[v->n++] = end;
}

/* The job that ends first, taken out (n > 0); *now is its end. */
static inline tp_job_t vjobs_first(vjobs_t *v, double *now) {
    size_t first = 0;
    for (size_t i = 1; i < v->n; i++)
        if (v->end[i] < v->end[first]) first = i;
    tp_job_t done = v->job[first];
    *now = v->end[first];
    v->job[first] = v->job[--v->n], v->end[first] = v->end[v->n];
    return done;
}

static inline int vj_cmp(const void *pa, const void *pb) {
    double a = *(const double *)pa, b = *(const double *)pb;
    if (isnan(a) || isnan(b)) return isnan(a) - isnan(b); /* never reached: last */
    return (a > b) - (a < b);
}

/* The median of v[0..n) (sorted in place; NaN last, a median on one is NaN). */
static inline double vj_median(double *v, size_t n) {
    qsort(v, n, sizeof *v, vj_cmp);
    return n % 2 ? v[n / 2] : (isnan(v[n / 2]) ? NAN : (v[n / 2 - 1] + v[n / 2]) / 2);
}

/* Mean and sample standard deviation of v[0..n) into *mean, *sd (sd 0 for one). */
static inline void vj_mean_sd(const double *v, size_t n, double *mean, double *sd) {
    double m = 0, q = 0;
    for (size_t i = 0; i < n; i++)
        m += v[i] / (double)n;
    for (size_t i = 0; i < n; i++)
        q += (v[i] - m) * (v[i] - m);
    *mean = m, *sd = n > 1 ? sqrt(q / (double)(n - 1)) : 0;
}

#endif
