/* pb2: the explore step of PB2 (Parker-Holder et al. 2020, "Provably
 * efficient online hyperparameter optimization with population-based
 * bandits") for scheduler pbt, `pbt: {explore_with: pb2}` (sched_pbt.c
 * keeps the population, the exploits and the journal; this model only
 * chooses an exploiting trial's new numeric parameters). Pure: no clock, no
 * I/O; the same calls give the same choices. */
#ifndef TP_PB2_H
#define TP_PB2_H

#include <jansson.h>
#include <stddef.h>

#include "search/scheduler.h"

#define TP_PB2_MAX_PARAMS 32 /* numeric parameters one model chooses */

typedef struct tp_pb2 tp_pb2_t;

/* A model over the numeric parameters among explore[0..n) (uniform,
 * loguniform, int, normal; space and the names borrowed); NULL with err
 * filled when there are none or more than TP_PB2_MAX_PARAMS. */
tp_pb2_t *tp__pb2_new(const tp_space_t *space, const tp_pbt_explore_t *explore, size_t n,
                      tp_error_t *err);
void tp__pb2_free(tp_pb2_t *p);
/* The index of parameter `name` among those the model chooses, -1 if none. O(params). */
int tp__pb2_index(const tp_pb2_t *p, const char *name);
/* A trial trained with `config` over a job that started at time t (the
 * budget it started from / budget.max) and the objective improved by `gain`
 * over it (maximized: the rise, minimized: the fall). O(params). */
void tp__pb2_observe(tp_pb2_t *p, double t, const json_t *config, double gain);
/* A generation at time t begins: the GP is fitted to the newest
 * observations, and the points chosen in the last generation are
 * forgotten. Returns 1 with a model, 0 without (too few observations, or
 * no fit): the caller then explores as scheduler pbt does. O(iterations
 * x W³), W <= 128 observations. */
int tp__pb2_fit(tp_pb2_t *p, double t);
/* With a model: the values (in the parameters' own units, not rounded)
 * that maximize the upper confidence bound for a trial that copies
 * `donor`, into values[0..params), and the choice joins the generation's
 * batch (the next choice's variance counts it). rng draws the candidates.
 * Returns 1, or 0 without a model (values untouched). O(candidates x W²
 * + W³). */
int tp__pb2_choose(tp_pb2_t *p, const json_t *donor, tp_rng_t *rng, double *values);

#endif
