/* dehb: the arithmetic of the dehb sampler (searcher_dehb.c) and a view of
 * its state, for tests that pin it to Awad, Mallik and Hutter 2021. Pure. */
#ifndef TP_DEHB_H
#define TP_DEHB_H

#include <stddef.h>
#include <stdint.h>

#include "search/search.h"

#define TP_DEHB_F 0.5  /* mutation factor (DEHB's default) */
#define TP_DEHB_CR 0.5 /* crossover rate (DEHB's default) */

/* One DE trial vector in the unit hypercube [0,1]^d: the rand/1 mutant
 * v = r1 + f (r2 - r3), crossed binomially with target (each coordinate
 * from v with probability cr, and one, drawn first, from v always), every
 * coordinate outside [0, 1] then redrawn uniformly (DEHB's boundary check).
 * Draws from rng in this order: j_rand, then per coordinate its coin, then
 * per coordinate out of bounds its replacement. Writes out[0..d). O(d). */
void tp__dehb_trial(const double *target, const double *r1, const double *r2, const double *r3,
                    size_t d, double f, double cr, tp_rng_t *rng, double *out);

/* The configuration a unit vector u[0..space->n) stands for (one coordinate
 * per parameter, constants ignored): uniform, normal (mean +- 3 sigma) and
 * loguniform (in log) scaled from [lo, hi], ints rounded, choices by equal
 * bins, q applied; inactive parameters removed. Caller owns. O(params). */
json_t *tp__dehb_config(const tp_space_t *space, const double *u);

/* The trials in the subpopulation of budget (NULL-safe, 0 if none), up to
 * cap written to trials[], in slot order; returns the subpopulation's size.
 * *size gets its capacity N(budget). For tests. */
size_t tp__dehb_subpop(const tp_searcher_t *s, double budget, uint64_t *trials, size_t cap,
                       size_t *size);

/* The budget whose subpopulation trial index was generated for, its target
 * slot there; 0 when it was drawn at random (initial population), else 1. */
int tp__dehb_home(const tp_searcher_t *s, uint64_t index, double *budget, size_t *slot);

#endif
