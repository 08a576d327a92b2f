/* scaling: a trial's scaling curve, the seconds one step takes at each GPU
 * count, as MEASURED while the trial runs (never a constant table). Pure: no
 * clock, no I/O. Used by the reallocation policy (realloc.h), the tuning
 * simulator (sim_tune.c) and the run (which feeds it from report arrivals).
 *
 * Measured points are running means: tp__scaling_add(s, g, t) with the
 * k-th sample at g moves the mean by (t - mean) / k. A running mean (not an
 * EWMA) because step times at one count are stationary for a given trial,
 * and the mean of the same samples is the same whatever their order (the
 * run's replay on resume gives the same curve).
 *
 * Between and beyond measured counts the curve is estimated by Amdahl's law
 * t(g) = serial + parallel / g, a least-squares fit in 1/g through the
 * measured means (one weight per count), with serial, parallel >= 0. With one
 * measured count the only estimate is ideal linear scaling
 * t(g) = t(g1) * g1 / g, an optimistic bound that the policy treats as
 * unproven (TP_SCALING_UNPROVEN). */
#ifndef TP_SCALING_H
#define TP_SCALING_H

#include <stdint.h>

#define TP_SCALING_MAX_GPUS 64 /* the largest GPU count a curve records */

typedef struct tp_scaling {
    double step_s[TP_SCALING_MAX_GPUS + 1];    /* by GPU count: mean seconds per step */
    uint32_t samples[TP_SCALING_MAX_GPUS + 1]; /* by GPU count: samples in the mean, 0: none */
} tp_scaling_t;

/* How good tp__scaling_step_s's answer is (ordered: higher is better; a
 * test `if (measured)` reads "measured or fitted through >= 2 counts"). */
enum {
    TP_SCALING_UNPROVEN = 0, /* one measured count (linear extrapolation), or none (NaN) */
    TP_SCALING_FITTED = 1,   /* Amdahl fit through >= 2 measured counts */
    TP_SCALING_MEASURED = 2, /* the running mean measured at that very count */
};

/* An empty curve (nothing measured). */
void tp__scaling_init(tp_scaling_t *s);
/* One measured step time at gpus GPUs: the running mean at gpus moves by
 * (step_s - mean) / samples. Ignored when gpus is outside
 * 1..TP_SCALING_MAX_GPUS or step_s is not finite and > 0. O(1). */
void tp__scaling_add(tp_scaling_t *s, int gpus, double step_s);
/* Seconds per step at gpus GPUs: the measured mean (*measured =
 * TP_SCALING_MEASURED), else the Amdahl fit through >= 2 measured counts
 * (TP_SCALING_FITTED), else ideal linear scaling from the one measured count
 * (TP_SCALING_UNPROVEN), else NaN (TP_SCALING_UNPROVEN). measured may be
 * NULL. NaN for gpus outside 1..TP_SCALING_MAX_GPUS. O(TP_SCALING_MAX_GPUS). */
double tp__scaling_step_s(const tp_scaling_t *s, int gpus, int *measured);
/* The number of distinct GPU counts measured. O(TP_SCALING_MAX_GPUS). */
int tp__scaling_counts(const tp_scaling_t *s);
/* The Amdahl fit t(g) = *serial_s + *parallel_s / g through the measured
 * means; 0 when >= 2 counts are measured, -1 otherwise (outputs untouched).
 * O(TP_SCALING_MAX_GPUS). */
int tp__scaling_fit(const tp_scaling_t *s, double *serial_s, double *parallel_s);

#endif
