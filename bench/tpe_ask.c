/* tpe_ask: how long one tpe ask takes with 1000 observations over 5
 * parameters (uniform, loguniform, int, uniform, choice of 3). Prints the
 * figure; not a test (tests/unit/test_tpe.c checks that such asks succeed).
 * Was a timed unit test ("< 50 ms"); about 2 ms in a plain build.
 *
 *   tpe_ask [asks]   (default 20) */
#include <stdio.h>
#include <stdlib.h>

#include "search/search.h"

static void add_real(tp_space_t *sp, const char *name, tp_domain_kind kind, double lo, double hi) {
    tp_param_t p = {.name = tp__strdup(name), .kind = kind, .lo = lo, .hi = hi};
    tp__space_add(sp, &p);
}

int main(int argc, char **argv) {
    int asks = argc > 1 ? atoi(argv[1]) : 20;
    if (asks < 1) asks = 1;
    tp_space_t sp;
    tp__space_init(&sp);
    add_real(&sp, "a", TP_DOM_UNIFORM, 0, 1);
    add_real(&sp, "b", TP_DOM_LOGUNIFORM, 1e-5, 1);
    add_real(&sp, "c", TP_DOM_INT, 1, 100);
    add_real(&sp, "d", TP_DOM_UNIFORM, -1, 1);
    tp_param_t e = {.name = tp__strdup("e"), .kind = TP_DOM_CHOICE, .nvalues = 3};
    e.values = tp__xcalloc(3, sizeof *e.values);
    e.values[0] = json_string("x");
    e.values[1] = json_string("y");
    e.values[2] = json_string("z");
    tp__space_add(&sp, &e);
    tp_search_cfg_t cfg = {.algorithm = "tpe", .seed = 1};
    tp_searcher_t *s = tp__searcher_new(&sp, &cfg, 0, NULL);
    if (!s) {
        fprintf(stderr, "tpe_ask: cannot make a tpe searcher\n");
        return 1;
    }
    tp_rng_t rng;
    tp__rng_seed(&rng, 1, 1);
    for (uint64_t i = 0; i < 1000; i++) { /* random observations, told directly */
        json_t *c = tp__space_sample(&sp, &rng);
        s->ops->tell(s, i, c, tp__rng_uniform(&rng), 0);
        json_decref(c);
    }
    double t0 = tp__mono_s();
    for (int i = 0; i < asks; i++) {
        json_t *c = NULL;
        if (s->ops->ask(s, 1000 + (uint64_t)i, 0, &c) != 1) {
            fprintf(stderr, "tpe_ask: ask %d failed\n", i);
            return 1;
        }
        json_decref(c);
    }
    double per_ask_ms = (tp__mono_s() - t0) / asks * 1e3;
    printf("tpe ask with 1000..%d observations, 5 params: %.2f ms per ask (%d asks)\n", 999 + asks,
           per_ask_ms, asks);
    tp__searcher_free(s);
    tp__space_free(&sp);
    return 0;
}
