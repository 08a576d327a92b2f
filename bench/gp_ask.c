/* gp_ask: how long one gp ask takes at 50, 100 and 200 observations, over
 * Hartmann-6's six uniform parameters and over a mixed space of 12 columns
 * (8 numbers of each kind and a choice of 4). Prints the figures (median
 * of the asks, CPU and wall clock); not a test (tests/unit/test_gp.c checks what asks do).
 * The target is under 100 ms per ask at 200 observations.
 *
 *   gp_ask [asks]   (default 5 at each size) */
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "search/search.h"

static void add_real(tp_space_t *sp, const char *name, tp_domain_kind kind, double lo, double hi) {
    tp_param_t p = {.name = tp__strdup(name), .kind = kind, .lo = lo, .hi = hi};
    tp__space_add(sp, &p);
}

static double now_ms(clockid_t clock) {
    struct timespec ts;
    clock_gettime(clock, &ts);
    return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

static int cmp_dbl(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* Tell n random observations (a smooth function of the config's numbers),
 * then time asks at n on clock. Returns the median ms, or -1. */
static double time_at(const tp_space_t *sp, size_t n, int asks, clockid_t clock) {
    tp_search_cfg_t cfg = {.algorithm = "gp", .seed = 1};
    tp_searcher_t *s = tp__searcher_new(sp, &cfg, 0, NULL);
    tp_search_cfg_t rc = {.algorithm = "random", .seed = 9};
    tp_searcher_t *r = tp__searcher_new(sp, &rc, 0, NULL);
    if (!s || !r) return -1;
    for (size_t i = 0; i < n; i++) {
        json_t *c = NULL;
        r->ops->ask(r, i, 0, &c);
        double v = 0;
        const char *k;
        json_t *x;
        json_object_foreach(c, k, x) if (json_is_real(x)) v +=
            (json_real_value(x) - 0.3) * (json_real_value(x) - 0.3);
        s->ops->tell(s, i, c, v, 0);
        json_decref(c);
    }
    double ms[64];
    for (int a = 0; a < asks; a++) {
        json_t *c = NULL;
        double t0 = now_ms(clock);
        s->ops->ask(s, n + (size_t)a, 0, &c);
        ms[a] = now_ms(clock) - t0;
        json_decref(c);
    }
    tp__searcher_free(s), tp__searcher_free(r);
    qsort(ms, (size_t)asks, sizeof *ms, cmp_dbl);
    return ms[asks / 2];
}

int main(int argc, char **argv) {
    int asks = argc > 1 ? atoi(argv[1]) : 5;
    if (asks < 1) asks = 1;
    if (asks > 64) asks = 64;
    tp_space_t h6, mixed;
    tp__space_init(&h6), tp__space_init(&mixed);
    static const char *const names[] = {"a", "b", "c", "d", "e", "f", "g", "h"};
    for (int j = 0; j < 6; j++)
        add_real(&h6, names[j], TP_DOM_UNIFORM, 0, 1);
    for (int j = 0; j < 8; j++)
        add_real(&mixed, names[j],
                 j % 3 == 0   ? TP_DOM_UNIFORM
                 : j % 3 == 1 ? TP_DOM_LOGUNIFORM
                              : TP_DOM_INT,
                 1, 100);
    tp_param_t c = {.name = tp__strdup("choice"), .kind = TP_DOM_CHOICE, .nvalues = 4};
    c.values = tp__xcalloc(4, sizeof *c.values);
    for (int k = 0; k < 4; k++)
        c.values[k] = json_integer(k);
    tp__space_add(&mixed, &c);
    /* CPU time is what an ask costs; wall time shows what a loaded machine adds */
    static const struct {
        const char *name;
        clockid_t clock;
    } clocks[] = {{"cpu", CLOCK_PROCESS_CPUTIME_ID}, {"wall", CLOCK_MONOTONIC}};
    const struct {
        const char *name;
        const tp_space_t *sp;
    } rows[] = {{"6 uniform (hartmann-6)", &h6}, {"8 numbers + choice of 4", &mixed}};
    printf("gp ask, median of %d asks, ms\n%-28s %-5s %8s %8s %8s\n", asks, "space", "clock",
           "n=50", "n=100", "n=200");
    for (size_t i = 0; i < TP_ARRAY_LEN(rows); i++)
        for (size_t k = 0; k < TP_ARRAY_LEN(clocks); k++)
            printf("%-28s %-5s %8.1f %8.1f %8.1f\n", rows[i].name, clocks[k].name,
                   time_at(rows[i].sp, 50, asks, clocks[k].clock),
                   time_at(rows[i].sp, 100, asks, clocks[k].clock),
                   time_at(rows[i].sp, 200, asks, clocks[k].clock));
    tp__space_free(&h6), tp__space_free(&mixed);
    return 0;
}
