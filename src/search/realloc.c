/* realloc: which running trials grow into free GPUs, and to how many (see
 * realloc.h for the rule). The split of the pool is a weighted largest-
 * remainder with caps (uniform: equal weights; softmax: exp((score -
 * best) / T)) or greedy in rank order (top-job); a trial whose share does
 * not pay (best gain within it <= min_gain) drops out and the split is done
 * again among the rest. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "search/realloc.h"
#include "util/util.h"

const char *const tp__realloc_policy_names[] = {"uniform", "top-job", "softmax", NULL};

const char *tp__realloc_policy_name(tp_realloc_policy_t p) {
    return (unsigned)p < 3 ? tp__realloc_policy_names[p] : "?";
}

int tp__realloc_policy_parse(const char *s) {
    for (int i = 0; tp__realloc_policy_names[i]; i++)
        if (!strcmp(s, tp__realloc_policy_names[i])) return i;
    return -1;
}

void tp__realloc_opts_default(tp_realloc_opts_t *o) {
    *o = (tp_realloc_opts_t){.policy = TP_REALLOC_UNIFORM,
                             .min_gain = 1.1,
                             .cooldown_s = 60,
                             .temperature = 1,
                             .probe = 1};
}

double tp__realloc_gain(const tp_realloc_trial_t *t, int k, int *quality) {
    int q0, q1;
    double t0 = tp__scaling_step_s(t->scaling, t->gpus, &q0);
    double t1 = tp__scaling_step_s(t->scaling, k, &q1);
    if (quality) *quality = q0 < q1 ? q0 : q1;
    double rest = t->remaining_steps > 0 ? t->remaining_steps : 0;
    if (!isfinite(t0) || !isfinite(t1) || !isfinite(t->restart_s)) return NAN;
    double den = t->restart_s + rest * t1;
    return den > 0 ? rest * t0 / den : NAN;
}

typedef struct cand {
    const tp_realloc_trial_t *t;
    int lo, hi;  /* new counts allowed: [lo, hi] */
    int probe;   /* judged on an unproven (linear) estimate */
    double w;    /* weight of its share */
    int share;   /* extra GPUs offered */
    int dropped; /* its share does not pay */
    int k;       /* the chosen new count, 0: none */
    double gain; /* at k */
} cand_t;

static int by_rank(const void *a, const void *b) {
    const cand_t *x = a, *y = b;
    if (x->t->score != y->t->score) return x->t->score > y->t->score ? -1 : 1;
    return (x->t->trial > y->t->trial) - (x->t->trial < y->t->trial);
}

/* The count in [lo, min(hi, gpus + extra)] with the largest gain (the
 * smaller count on a tie); 0 when none is above min_gain. */
static int best_count(cand_t *c, int extra, double min_gain) {
    int top = c->t->gpus + extra < c->hi ? c->t->gpus + extra : c->hi;
    c->k = 0;
    c->gain = 0;
    for (int k = c->lo; k <= top; k++) {
        double g = tp__realloc_gain(c->t, k, NULL);
        if (isfinite(g) && g > min_gain && g > c->gain + 1e-12) {
            c->k = k;
            c->gain = g;
        }
    }
    return c->k;
}

/* Split pool among the cands not dropped, by weight, each capped at
 * hi - gpus; largest remainder, ties in rank order. O(n^2) worst case. */
static void split(cand_t *c, size_t n, int pool) {
    for (size_t i = 0; i < n; i++)
        c[i].share = 0;
    for (;;) {
        double wsum = 0;
        for (size_t i = 0; i < n; i++)
            if (!c[i].dropped && c[i].share < c[i].hi - c[i].t->gpus) wsum += c[i].w;
        if (pool <= 0 || wsum <= 0) return;
        int given = 0;
        double *frac = tp__xcalloc(n, sizeof *frac);
        int *quota = tp__xcalloc(n, sizeof *quota);
        for (size_t i = 0; i < n; i++) {
            if (c[i].dropped || c[i].share >= c[i].hi - c[i].t->gpus) continue;
            double q = pool * c[i].w / wsum;
            quota[i] = (int)floor(q + 1e-9);
            frac[i] = q - quota[i];
            given += quota[i];
        }
        for (int left = pool - given; left > 0; left--) {
            size_t at = n;
            for (size_t i = 0; i < n; i++)
                if (!c[i].dropped && c[i].share < c[i].hi - c[i].t->gpus && frac[i] >= 0 &&
                    (at == n || frac[i] > frac[at] + 1e-12))
                    at = i;
            if (at == n) break;
            quota[at]++;
            frac[at] = -1;
        }
        int placed = 0;
        for (size_t i = 0; i < n; i++) {
            int room = c[i].hi - c[i].t->gpus - c[i].share;
            int q = quota[i] < room ? quota[i] : room;
            if (q > 0) c[i].share += q, placed += q;
        }
        free(frac);
        free(quota);
        if (placed == 0) return;
        pool -= placed;
    }
}

/* Whether t may grow now, and its range of new counts. */
static int eligible(const tp_realloc_trial_t *t, double now, const tp_realloc_opts_t *o,
                    cand_t *c) {
    if (t->gpus < 1 || !t->scaling || !isfinite(t->restart_s) || !(t->remaining_steps > 0))
        return 0;
    if (isfinite(t->last_resize_s) && now - t->last_resize_s < o->cooldown_s) return 0;
    int q;
    tp__scaling_step_s(t->scaling, t->gpus, &q);
    if (q != TP_SCALING_MEASURED) return 0;
    int max =
        t->gpus_max > 0 && t->gpus_max < TP_SCALING_MAX_GPUS ? t->gpus_max : TP_SCALING_MAX_GPUS;
    int probe = tp__scaling_counts(t->scaling) < 2;
    if (probe && !o->probe) return 0;
    if (probe && max > 2 * t->gpus) max = 2 * t->gpus;
    int lo = t->gpus + 1 > t->gpus_min ? t->gpus + 1 : t->gpus_min;
    if (lo > max) return 0;
    *c = (cand_t){.t = t, .lo = lo, .hi = max, .probe = probe};
    return 1;
}

size_t tp__realloc_plan(tp_realloc_policy_t policy, const tp_realloc_trial_t *trials, size_t n,
                        int free_gpus, double now, const tp_realloc_opts_t *o, tp_resize_t *out,
                        size_t cap) {
    tp_realloc_opts_t def;
    if (!o) {
        tp__realloc_opts_default(&def);
        o = &def;
    }
    if (free_gpus <= 0 || n == 0) return 0;
    cand_t *c = tp__xcalloc(n, sizeof *c);
    size_t m = 0;
    for (size_t i = 0; i < n; i++)
        m += eligible(&trials[i], now, o, &c[m]);
    qsort(c, m, sizeof *c, by_rank);
    double temp = o->temperature > 0 ? o->temperature : 1;
    for (size_t i = 0; i < m; i++)
        c[i].w = policy == TP_REALLOC_SOFTMAX ? exp((c[i].t->score - c[0].t->score) / temp) : 1;
    if (policy == TP_REALLOC_TOP_JOB) {
        int pool = free_gpus;
        for (size_t i = 0; i < m && pool > 0; i++)
            if (best_count(&c[i], pool, o->min_gain)) pool -= c[i].k - c[i].t->gpus;
    } else {
        for (int again = 1; again;) { /* each round drops one trial at least, or ends */
            again = 0;
            split(c, m, free_gpus);
            for (size_t i = 0; i < m; i++) {
                if (c[i].dropped) continue;
                if (!best_count(&c[i], c[i].share, o->min_gain) && c[i].share > 0) {
                    c[i].dropped = 1; /* its GPUs go to the others */
                    again = 1;
                }
            }
        }
    }
    size_t count = 0;
    for (size_t i = 0; i < m; i++) {
        if (!c[i].k) continue;
        if (count < cap) {
            const tp_realloc_trial_t *t = c[i].t;
            tp_resize_t *r = &out[count];
            double t0 = tp__scaling_step_s(t->scaling, t->gpus, NULL);
            double t1 = tp__scaling_step_s(t->scaling, c[i].k, NULL);
            r->trial = t->trial;
            r->gpus = c[i].k;
            r->gain = c[i].gain;
            snprintf(r->why, sizeof r->why,
                     "grow %d -> %d GPUs: gain %.2f > %.2f (%.0f s left -> restart %.0f s + %.0f "
                     "s), %s%s",
                     t->gpus, c[i].k, c[i].gain, o->min_gain, t->remaining_steps * t0, t->restart_s,
                     t->remaining_steps * t1, tp__realloc_policy_name(policy),
                     c[i].probe ? "; probe: one count measured, linear scaling assumed" : "");
        }
        count++;
    }
    free(c);
    return count;
}
