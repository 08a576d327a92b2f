/* Unit tests for the fused count K (place/fuse_choice.c): the ladder, exploring while
 * aggregate throughput grows, settling on the best measured K, and the memory limit
 * (measured, extrapolated, and the smallest rung when nothing fits). */
#include <string.h>

#include "place/fuse_choice.h"
#include "tp_test.h"

/* A table measured at the given k with per-configuration rates and memory. */
static tp_fuse_table_t table(const int *k, const double *rate, const double *mem, int n) {
    tp_fuse_table_t t;
    memset(&t, 0, sizeof t);
    for (int i = 0; i < n; i++)
        tp__fuse_table_add(&t, k[i], rate[i], mem[i], 0);
    return t;
}

TP_TEST(test_ladder_doubles_from_min_and_ends_at_max) {
    int ks[16];
    size_t n = tp__fuse_ladder(1, 8, ks);
    TP_CHECK(n == 4 && ks[0] == 1 && ks[1] == 2 && ks[2] == 4 && ks[3] == 8);
    n = tp__fuse_ladder(1, 6, ks);
    TP_CHECK(n == 4 && ks[2] == 4 && ks[3] == 6);
    n = tp__fuse_ladder(3, 3, ks);
    TP_CHECK(n == 1 && ks[0] == 3);
    n = tp__fuse_ladder(1, 1, ks);
    TP_CHECK(n == 1 && ks[0] == 1);
}

TP_TEST(test_nothing_measured_explores_the_smallest_then_looks_past_ones_being_measured) {
    tp_fuse_table_t t;
    memset(&t, 0, sizeof t);
    tp_fuse_pick_t p = tp__fuse_choose(&t, 1, 8, NULL, 0);
    TP_CHECK(p.k == 1 && p.exploring);
    int trying[TP_FUSE_K_MAX + 1] = {0};
    trying[1] = 1;
    p = tp__fuse_choose(&t, 1, 8, trying, 0);
    TP_CHECK(p.k == 2 && p.exploring);
}

TP_TEST(test_explores_up_while_aggregate_throughput_grows) {
    /* K=1: 10 steps/s; K=2: 8 per configuration = 16 in all: better, so K=4 is tried. */
    tp_fuse_table_t t = table((int[]){1, 2}, (double[]){10, 8}, (double[]){100, 150}, 2);
    tp_fuse_pick_t p = tp__fuse_choose(&t, 1, 8, NULL, 0);
    TP_CHECK(p.k == 4 && p.exploring);
    TP_CHECK(strstr(p.why, "K=2") != NULL);
}

TP_TEST(test_settles_on_the_best_aggregate_once_a_larger_k_gains_nothing) {
    /* 10, 16, then K=4 at 3.5 per configuration = 14 in all: worse than K=2. K=8 is never
     * tried; K=2 wins, not K=4 (memory alone would say the largest that fits). */
    tp_fuse_table_t t =
        table((int[]){1, 2, 4}, (double[]){10, 8, 3.5}, (double[]){100, 150, 250}, 3);
    tp_fuse_pick_t p = tp__fuse_choose(&t, 1, 8, NULL, 4096);
    TP_CHECK(p.k == 2 && !p.exploring);
    TP_CHECK(strstr(p.why, "best measured") != NULL);
}

TP_TEST(test_a_k_whose_measured_memory_exceeds_the_limit_is_never_chosen) {
    /* K=4 has the best throughput but used 900 MiB of 800: K=2 it is. */
    tp_fuse_table_t t = table((int[]){1, 2, 4}, (double[]){10, 8, 6}, (double[]){300, 500, 900}, 3);
    tp_fuse_pick_t p = tp__fuse_choose(&t, 1, 8, NULL, 800);
    TP_CHECK(p.k == 2 && !p.exploring);
    p = tp__fuse_choose(&t, 1, 8, NULL, 0); /* no limit: K=4, then K=8 is explored */
    TP_CHECK(p.k == 8 && p.exploring);
}

TP_TEST(test_memory_of_an_unmeasured_k_is_extrapolated_before_exploring_it) {
    /* 200 MiB at K=1 and 300 at K=2: a line gives 500 at K=4, over a 450 limit, so K=4 is
     * not explored even though K=2 gained; K=2 is chosen. */
    tp_fuse_table_t t = table((int[]){1, 2}, (double[]){10, 8}, (double[]){200, 300}, 2);
    tp_fuse_pick_t p = tp__fuse_choose(&t, 1, 8, NULL, 450);
    TP_CHECK(p.k == 2 && !p.exploring);
    /* With one point, memory scales with K: 200 at K=1 is 400 at K=2, over 300. */
    tp_fuse_table_t one = table((int[]){1}, (double[]){10}, (double[]){200}, 1);
    p = tp__fuse_choose(&one, 1, 8, NULL, 300);
    TP_CHECK(p.k == 1 && !p.exploring);
    p = tp__fuse_choose(&one, 1, 8, NULL, 400);
    TP_CHECK(p.k == 2 && p.exploring);
}

TP_TEST(test_when_nothing_fits_the_smallest_rung_runs_and_says_why) {
    tp_fuse_table_t t = table((int[]){2}, (double[]){10}, (double[]){900}, 1);
    tp_fuse_pick_t p = tp__fuse_choose(&t, 2, 8, NULL, 500);
    TP_CHECK(p.k == 2);
    TP_CHECK(strstr(p.why, "MiB of 500") != NULL);
}

TP_TEST(test_measurements_average_over_runs_and_keep_the_peak_memory) {
    tp_fuse_table_t t;
    memset(&t, 0, sizeof t);
    tp__fuse_table_add(&t, 2, 4, 100, 1);
    tp__fuse_table_add(&t, 2, 6, 80, 3);
    tp__fuse_table_add(&t, 2, 0, 500, 0); /* no rate: not a measurement */
    tp__fuse_table_add(&t, 99, 5, 10, 0); /* no such K */
    TP_CHECK(t.at[2].runs == 2);
    TP_CHECK(fabs(t.at[2].rate - 5) < 1e-12);
    TP_CHECK(fabs(t.at[2].cpu_s - 2) < 1e-12);
    TP_CHECK(t.at[2].mem_mib == 100);
}

TP_TEST(test_min_equal_max_pins_k) {
    tp_fuse_table_t t = table((int[]){1, 2}, (double[]){10, 9}, (double[]){1, 1}, 2);
    tp_fuse_pick_t p = tp__fuse_choose(&t, 4, 4, NULL, 0);
    TP_CHECK(p.k == 4);
}

int main(void) {
    return tp_test_main();
}
