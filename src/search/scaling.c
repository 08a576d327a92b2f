/* scaling: measured step time per GPU count, and Amdahl's law between and
 * beyond the measured counts (see scaling.h). */
#include <math.h>
#include <string.h>

#include "search/scaling.h"

void tp__scaling_init(tp_scaling_t *s) {
    memset(s, 0, sizeof *s);
}

void tp__scaling_add(tp_scaling_t *s, int gpus, double step_s) {
    if (gpus < 1 || gpus > TP_SCALING_MAX_GPUS || !isfinite(step_s) || !(step_s > 0)) return;
    uint32_t k = ++s->samples[gpus];
    s->step_s[gpus] += (step_s - s->step_s[gpus]) / k;
}

int tp__scaling_counts(const tp_scaling_t *s) {
    int n = 0;
    for (int g = 1; g <= TP_SCALING_MAX_GPUS; g++)
        n += s->samples[g] > 0;
    return n;
}

/* Least squares of y = a + b x with x = 1/g over the measured counts, then
 * a, b >= 0: a negative serial part means the points scale better than
 * linearly (noise), so a = 0 and b fits through the origin; a negative
 * parallel part means more GPUs are slower, so the curve is flat at the
 * mean (growing never pays). */
int tp__scaling_fit(const tp_scaling_t *s, double *serial_s, double *parallel_s) {
    double n = 0, sx = 0, sy = 0, sxx = 0, sxy = 0;
    for (int g = 1; g <= TP_SCALING_MAX_GPUS; g++) {
        if (!s->samples[g]) continue;
        double x = 1.0 / g, y = s->step_s[g];
        n++, sx += x, sy += y, sxx += x * x, sxy += x * y;
    }
    if (n < 2) return -1;
    double den = n * sxx - sx * sx;
    double b = den > 0 ? (n * sxy - sx * sy) / den : 0;
    double a = (sy - b * sx) / n;
    if (b < 0) {
        a = sy / n;
        b = 0;
    } else if (a < 0) {
        a = 0;
        b = sxy / sxx;
    }
    *serial_s = a;
    *parallel_s = b;
    return 0;
}

double tp__scaling_step_s(const tp_scaling_t *s, int gpus, int *measured) {
    int dummy;
    if (!measured) measured = &dummy;
    *measured = TP_SCALING_UNPROVEN;
    if (gpus < 1 || gpus > TP_SCALING_MAX_GPUS) return NAN;
    if (s->samples[gpus]) {
        *measured = TP_SCALING_MEASURED;
        return s->step_s[gpus];
    }
    double a, b;
    if (tp__scaling_fit(s, &a, &b) == 0) {
        *measured = TP_SCALING_FITTED;
        return a + b / gpus;
    }
    for (int g = 1; g <= TP_SCALING_MAX_GPUS; g++)
        if (s->samples[g]) return s->step_s[g] * g / gpus;
    return NAN;
}
