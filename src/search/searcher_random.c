/* searcher_random: independent draws; config i depends only on (seed, i). */
#include "search/search.h"

static int random_init(tp_searcher_t *s, tp_error_t *err) {
    (void)s;
    (void)err;
    return 0;
}

/* Trial index's configuration, drawn from an rng seeded with (seed, index),
 * so a resumed run proposes exactly the configurations it would have.
 * trials == 0 means unbounded. O(params). */
static int random_ask(tp_searcher_t *s, uint64_t index, double now, json_t **out) {
    (void)now;
    if (s->cfg.trials && index >= s->cfg.trials) return 0;
    tp_rng_t rng;
    tp__rng_seed(&rng, s->cfg.seed, index);
    *out = tp__space_sample(s->space, &rng);
    return 1;
}

static void random_tell(tp_searcher_t *s, uint64_t index, const json_t *config, double value,
                        double now) {
    (void)s, (void)index, (void)config, (void)value, (void)now;
}

/* Several objectives: nothing to learn, as with one. */
static void random_tell_values(tp_searcher_t *s, uint64_t index, const json_t *config,
                               const double *values, double now) {
    (void)s, (void)index, (void)config, (void)values, (void)now;
}

static uint64_t random_total(const tp_searcher_t *s) {
    return s->cfg.trials;
}

static void random_destroy(tp_searcher_t *s) {
    (void)s;
}

const struct tp_searcher_ops tp__searcher_random_ops = {
    .name = "random",
    .init = random_init,
    .ask = random_ask,
    .tell = random_tell,
    .tell_values = random_tell_values,
    .total = random_total,
    .destroy = random_destroy,
};
