/* fuse_choice: the fused count K by measured throughput under a memory limit (see
 * fuse_choice.h). Pure. */
#include <math.h>
#include <stdio.h>

#include "place/fuse_choice.h"

size_t tp__fuse_ladder(int min, int max, int *ks) {
    size_t n = 0;
    if (max > TP_FUSE_K_MAX) max = TP_FUSE_K_MAX;
    if (min < 1) min = 1;
    if (max < min) max = min;
    for (int k = min; k < max; k *= 2)
        ks[n++] = k;
    ks[n++] = max;
    return n;
}

void tp__fuse_table_add(tp_fuse_table_t *t, int k, double rate, double mem_mib, double cpu_s) {
    if (k < 1 || k > TP_FUSE_K_MAX || !(rate > 0) || !isfinite(rate)) return;
    tp_fuse_measure_t *m = &t->at[k];
    m->runs++;
    m->rate += (rate - m->rate) / m->runs;
    if (cpu_s > 0 && isfinite(cpu_s)) m->cpu_s += (cpu_s - m->cpu_s) / m->runs;
    if (mem_mib > m->mem_mib) m->mem_mib = mem_mib;
}

/* See fuse_choice.h. */
double tp__fuse_memory_at(const tp_fuse_table_t *t, int k) {
    if (t->at[k].runs && t->at[k].mem_mib > 0) return t->at[k].mem_mib;
    int k2 = 0, k1 = 0;
    for (int j = TP_FUSE_K_MAX; j >= 1; j--) {
        if (!t->at[j].runs || !(t->at[j].mem_mib > 0)) continue;
        if (!k2)
            k2 = j;
        else if (!k1) {
            k1 = j;
            break;
        }
    }
    if (!k2) return 0;
    double m2 = t->at[k2].mem_mib;
    if (!k1) return m2 * k / k2;
    double slope = (m2 - t->at[k1].mem_mib) / (k2 - k1);
    if (slope < 0) slope = 0;
    return m2 + slope * (k - k2);
}

static double aggregate(const tp_fuse_table_t *t, int k) {
    return k * t->at[k].rate;
}

tp_fuse_pick_t tp__fuse_choose(const tp_fuse_table_t *t, int min, int max, const int *trying,
                               double limit_mib) {
    int ks[16];
    size_t n = tp__fuse_ladder(min, max, ks);
    tp_fuse_pick_t p = {.k = ks[0]};
    /* The measured k with the best aggregate throughput that fits (any k: a group of 3
     * when only 3 configurations were left counts too). */
    int best = 0;
    for (int k = ks[0]; k <= ks[n - 1]; k++) {
        if (!t->at[k].runs) continue;
        if (limit_mib > 0 && tp__fuse_memory_at(t, k) > limit_mib) continue;
        if (!best || aggregate(t, k) > aggregate(t, best)) best = k;
    }
    /* Explore up the ladder while each measured rung beats the one below. */
    int prev = 0;
    for (size_t i = 0; i < n; i++) {
        int k = ks[i];
        double mem = tp__fuse_memory_at(t, k);
        if (limit_mib > 0 && mem > limit_mib) {
            if (!best) { /* nothing measured fits; the smallest rung is all there is */
                p.k = ks[0];
                snprintf(p.why, sizeof p.why, "K=%d: K=%d would use about %.0f MiB of %.0f", p.k, k,
                         mem, limit_mib);
                return p;
            }
            break;
        }
        if (t->at[k].runs) {
            if (prev && aggregate(t, k) <= aggregate(t, prev)) break; /* no gain: stop */
            prev = k;
            continue;
        }
        if (trying && trying[k]) continue; /* being measured: look past it */
        p.k = k;
        p.exploring = 1;
        if (prev)
            snprintf(p.why, sizeof p.why,
                     "exploring K=%d: K=%d gave %.3g steps/s in all (%.3g per configuration)%s", k,
                     prev, aggregate(t, prev), t->at[prev].rate,
                     mem > 0 ? ", memory expected to fit" : "");
        else
            snprintf(p.why, sizeof p.why, "exploring K=%d: nothing measured yet", k);
        return p;
    }
    if (best) {
        p.k = best;
        int len = snprintf(p.why, sizeof p.why,
                           "K=%d: the best measured, %.3g steps/s in all (%.3g per configuration)",
                           best, aggregate(t, best), t->at[best].rate);
        if (len > 0 && (size_t)len < sizeof p.why && t->at[best].mem_mib > 0) {
            char lim[40] = "";
            if (limit_mib > 0) snprintf(lim, sizeof lim, " of %.0f", limit_mib);
            snprintf(p.why + len, sizeof p.why - (size_t)len, ", %.0f MiB%s", t->at[best].mem_mib,
                     lim);
        }
        return p;
    }
    p.k = ks[0];
    snprintf(p.why, sizeof p.why, "K=%d: every larger K is being measured", p.k);
    return p;
}
