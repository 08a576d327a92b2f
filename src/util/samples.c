/* samples: a growing list of measurements and their quantiles, for the
 * figures a run can report about itself (TUNEPACK_STATS) and benchmarks. */
#include <stdlib.h>

#include "util/util.h"

void tp__samples_add(tp_samples_t *s, double x) {
    s->v = tp__xgrow(s->v, &s->cap, s->n + 1, sizeof *s->v, 256);
    s->v[s->n++] = x;
}

static int by_value(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

double tp__samples_quantile(tp_samples_t *s, double q) {
    if (s->n == 0) return 0;
    qsort(s->v, s->n, sizeof *s->v, by_value);
    size_t i = (size_t)(q * (double)(s->n - 1) + 0.5);
    return s->v[i < s->n ? i : s->n - 1];
}

void tp__samples_free(tp_samples_t *s) {
    free(s->v);
    s->v = NULL;
    s->n = s->cap = 0;
}
