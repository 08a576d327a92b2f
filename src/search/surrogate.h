/* surrogate: tune on a scaled-down model, then run the winners at full size
 * (Hydro, Hu et al., OSDI 2023). A wrapper around any scheduler: the inner
 * scheduler's trials are surrogate trials, run with param = value (e.g.
 * width_mult = 0.125); the top `promote` configurations among them are run
 * again with param = 1.0 as target trials. Pure, like every scheduler: the
 * same calls give the same decisions, so a resumed run replays it exactly. */
#ifndef TP_SURROGATE_H
#define TP_SURROGATE_H

#include "search/scheduler.h"

/* `surrogate: {param: width_mult, value: 0.125, promote: 3, eager: 0.5}` */
typedef struct tp_surrogate_cfg {
    const char *param; /* the parameter the script reads (no space parameter), borrowed;
                          NULL: no surrogate */
    double value;      /* its value in surrogate trials, > 0 (1.0 is the full size) */
    int promote;       /* configurations run at full size, >= 1 (default 3) */
    double eager;      /* share of the surrogate trials that must have ended before the
                          first promotion, in (0, 1] (default 0.5; 1: only at the end) */
} tp_surrogate_cfg_t;

#define TP_SURROGATE_FULL 1.0 /* param's value in target trials */

typedef enum tp_trial_kind {
    TP_KIND_PLAIN = 0, /* a run without surrogates */
    TP_KIND_SURROGATE, /* run on the scaled model */
    TP_KIND_TARGET,    /* a promoted configuration run at full size */
} tp_trial_kind_t;

/* "surrogate", "target" or NULL (plain). */
const char *tp__trial_kind_name(tp_trial_kind_t k);

/* Wrap inner (taken over: freed with the result, also on failure) so that
 * its trials run as surrogates and the best are promoted. The result shares
 * inner's sampler (warm starts tell it priors) and cfg. NULL with err
 * filled for a cfg out of range or an inner scheduler with several
 * objectives. Free with tp__scheduler_free. */
tp_scheduler_t *tp__surrogate_wrap(tp_scheduler_t *inner, const tp_surrogate_cfg_t *cfg,
                                   tp_error_t *err);

/* Trial's kind under s: TP_KIND_PLAIN when s is no surrogate wrapper or the
 * trial is unknown; for a target, *source is the surrogate trial whose
 * configuration it runs (else -1). O(1). */
tp_trial_kind_t tp__surrogate_kind(const tp_scheduler_t *s, int64_t trial, int64_t *source);

extern const struct tp_scheduler_ops tp__sched_surrogate_ops;

#endif
