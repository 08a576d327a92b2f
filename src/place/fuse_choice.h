/* fuse_choice: how many configurations one fused process runs (`fuse: {max: K}`), chosen
 * by measured throughput under a memory limit. Pure: no clock, no I/O; the caller passes
 * what was measured. */
#ifndef TP_PLACE_FUSE_CHOICE_H
#define TP_PLACE_FUSE_CHOICE_H

#include <stddef.h>
#include <stdint.h>

#define TP_FUSE_K_MAX 64 /* the most configurations per process (config's TP_FUSE_MAX) */

/* What was measured of fused processes that ran k configurations. */
typedef struct tp_fuse_measure {
    int runs;       /* processes measured at this k (0: not measured) */
    double rate;    /* steps per second per configuration, mean over runs */
    double mem_mib; /* largest peak memory of one process at this k, 0: unknown */
    double cpu_s;   /* CPU seconds per configuration-step, mean over runs; 0: unknown */
} tp_fuse_measure_t;

/* One shape's measurements, indexed by k (1..TP_FUSE_K_MAX). */
typedef struct tp_fuse_table {
    tp_fuse_measure_t at[TP_FUSE_K_MAX + 1];
} tp_fuse_table_t;

/* What tp__fuse_choose decided. */
typedef struct tp_fuse_pick {
    int k;         /* configurations for the next process */
    int exploring; /* 1: k is not measured yet and is being tried */
    char why[240]; /* in words: the figures behind the choice */
} tp_fuse_pick_t;

/* The fused counts tried in turn: min, 2 min, 4 min, ... below max, then max. Returns how
 * many (into ks[0..n), at most 8 for 1 <= min <= max <= 64). O(log max). */
size_t tp__fuse_ladder(int min, int max, int *ks);

/* Add one measured process at k: its per-configuration rate (steps/s), its peak memory
 * (MiB, 0: unknown) and CPU seconds per configuration-step (0: unknown). O(1). */
void tp__fuse_table_add(tp_fuse_table_t *t, int k, double rate, double mem_mib, double cpu_s);

/* Memory of one process at k, MiB: measured, else a line through the two largest measured k
 * (in proportion to k through one); 0: nothing to go by. O(TP_FUSE_K_MAX). */
double tp__fuse_memory_at(const tp_fuse_table_t *t, int k);

/* Choose k for the next process of a shape. `trying[k]` counts processes at k running and
 * not yet measured (NULL: none). limit_mib: what one process may use (0: no limit).
 *
 * The rule: walk the ladder min, 2 min, 4 min, ..., max. A rung whose memory does not fit
 * (measured, or extrapolated linearly from the two largest measured rungs, or in proportion from
 * one) ends the walk. While each measured rung's aggregate throughput (k x rate) beats the one
 * below it, the first rung neither measured nor being tried is explored. Otherwise the
 * measured k in min..max with the best aggregate throughput that fits is chosen; with none
 * measured, the smallest rung. O(max). */
tp_fuse_pick_t tp__fuse_choose(const tp_fuse_table_t *t, int min, int max, const int *trying,
                               double limit_mib);

#endif
