/* rank: the one rule for "the best trial so far", shared by the live view
 * and log lines, `status`, `best` and the Python front end (which repeats
 * it in python/tunepack.py). Pure. */
#include <math.h>
#include <string.h>

#include "run/run.h"

int tp__rank_competes(const char *state, int has_value) {
    static const char *const competing[] = {"completed", "stopped", "paused"};
    if (!has_value) return 0;
    for (size_t i = 0; i < TP_ARRAY_LEN(competing); i++)
        if (strcmp(state, competing[i]) == 0) return 1;
    return 0;
}

int tp__rank_feasible_of(const tp_constraint_t *c, size_t n, const char *metrics) {
    return n == 0 || tp__constraint_violation_of(c, n, metrics) == 0;
}

int tp__rank_beats(const tp_rank_key_t *a, const tp_rank_key_t *b, int maximize) {
    if (isnan(a->value)) return 0;
    if (isnan(b->value)) return 1;
    if (a->budget != b->budget) return a->budget > b->budget;
    return maximize ? a->value > b->value : a->value < b->value;
}
