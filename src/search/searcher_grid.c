/* searcher_grid: every point of the discrete grid, repeated `trials` times;
 * continuous params are drawn per trial from (seed, index). With conditions
 * only the valid combinations are visited (an inactive param does not
 * multiply the points). */
#include <errno.h>
#include <stdlib.h>

#include "search/search.h"

typedef struct grid_state {
    uint64_t points; /* grid size G */
    uint64_t *valid; /* conditional spaces: the G valid indices of the product, owned; NULL:
                        every index is valid */
} grid_state_t;

static int grid_init(tp_searcher_t *s, tp_error_t *err) {
    uint64_t *valid = NULL;
    uint64_t g = s->space->conditional ? tp__space_grid_valid(s->space, &valid)
                                       : tp__space_grid_size(s->space);
    if (g == 0)
        return tp__errorf(err, -E2BIG,
                          "the grid has more than %s points; use fewer values, or search: "
                          "{algorithm: random}",
                          s->space->conditional ? "2^24 (before conditions)" : "2^40");
    uint64_t repeats = s->cfg.trials ? s->cfg.trials : 1;
    if (repeats > UINT64_MAX / g) {
        free(valid);
        return tp__errorf(err, -E2BIG, "the grid repeated %llu times has too many points",
                          (unsigned long long)repeats);
    }
    grid_state_t *st = tp__xcalloc(1, sizeof *st);
    st->points = g;
    st->valid = valid;
    s->impl = st;
    return 0;
}

/* Points in all: G times the repeats (`trials`, read at each call: a run
 * that extends the search raises it); saturated. O(1). */
static uint64_t grid_count(const tp_searcher_t *s, const grid_state_t *st) {
    uint64_t repeats = s->cfg.trials ? s->cfg.trials : 1;
    return repeats > UINT64_MAX / st->points ? UINT64_MAX : repeats * st->points;
}

/* Grid point index % G; index / G is the repeat. O(params). */
static int grid_ask(tp_searcher_t *s, uint64_t index, double now, json_t **out) {
    (void)now;
    const grid_state_t *st = s->impl;
    if (index >= grid_count(s, st)) return 0;
    tp_rng_t rng;
    tp__rng_seed(&rng, s->cfg.seed, index);
    uint64_t k = index % st->points;
    *out = tp__space_grid_point(s->space, st->valid ? st->valid[k] : k, &rng);
    return 1;
}

static void grid_tell(tp_searcher_t *s, uint64_t index, const json_t *config, double value,
                      double now) {
    (void)s, (void)index, (void)config, (void)value, (void)now;
}

/* Several objectives: nothing to learn, as with one. */
static void grid_tell_values(tp_searcher_t *s, uint64_t index, const json_t *config,
                             const double *values, double now) {
    (void)s, (void)index, (void)config, (void)values, (void)now;
}

static uint64_t grid_total(const tp_searcher_t *s) {
    return grid_count(s, s->impl);
}

static void grid_destroy(tp_searcher_t *s) {
    grid_state_t *st = s->impl;
    if (st) free(st->valid);
    free(s->impl);
    s->impl = NULL;
}

const struct tp_searcher_ops tp__searcher_grid_ops = {
    .name = "grid",
    .init = grid_init,
    .ask = grid_ask,
    .tell = grid_tell,
    .tell_values = grid_tell_values,
    .total = grid_total,
    .destroy = grid_destroy,
};
