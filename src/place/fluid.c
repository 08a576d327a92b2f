/* fluid: a trial group's GPU shares (fluid.h). The steps, for the group's
 * trials with work w_i = step_s x remaining_steps and capacity C:
 *
 *   1. ideal_i   = C w_i / sum w                       normalise first
 *   2. bounded_i = clamp(lambda w_i, lo_i, hi_i), sum = C   the bounds after it:
 *      lo_i, hi_i are the ends of the trial's ladder inside [min, max]; lambda
 *      found by bisection, then solved exactly over the trials it leaves free
 *   3. share_i   = the largest ladder value <= bounded_i
 *   4. leftover C - sum share: one ladder step at a time to the trial with the
 *      longest expected time left (w_i / share_i), if the step fits
 *
 * Fluid (fluid_executor.py, _fluid) does min(max(floor(h n / sum h), 1/c), d)
 * and normalises afterwards: its shares break the bounds it just applied, it
 * never looks at memory, and its floor throws away everything below one GPU. */
#include "place/fluid.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util/util.h"

#define EPS 1e-9

const char *tp__fluid_mode_name(tp_fluid_mode_t m) {
    return m == TP_FLUID_STATIC ? "static" : m == TP_FLUID_DYNAMIC ? "dynamic" : "off";
}

size_t tp__fluid_ladder(const tp_fluid_trial_t *t, const tp_fluid_opts_t *o, double *v,
                        size_t cap) {
    size_t n = 0;
    for (int k = o->pack_max; k >= 2 && n < cap; k--)
        if (!t->memory_mib || !o->gpu_memory_mib ||
            (uint64_t)k * t->memory_mib <= o->gpu_memory_mib)
            v[n++] = 1.0 / k;
    int gmax = t->gpus_max < 1 ? 1 : t->gpus_max;
    int room = (int)floor(o->capacity + EPS);
    if (gmax > room) gmax = room < 1 ? 1 : room;
    for (int g = 1; g <= gmax && n < cap; g++)
        v[n++] = g;
    return n;
}

/* The ladder inside [min, max]; when nothing is, the value memory or the
 * trial's limit forces (see fluid.h). Returns the count (>= 1). */
static size_t bounded_ladder(const tp_fluid_trial_t *t, const tp_fluid_opts_t *o, double *v) {
    double full[TP_FLUID_MAX_LADDER];
    size_t nf = tp__fluid_ladder(t, o, full, TP_FLUID_MAX_LADDER), n = 0;
    for (size_t i = 0; i < nf; i++)
        if (full[i] >= o->min - EPS && (o->max <= 0 || full[i] <= o->max + EPS)) v[n++] = full[i];
    if (n) return n;
    if (full[nf - 1] < o->min - EPS) {
        v[0] = full[nf - 1]; /* min above all it can use: its largest */
        return 1;
    }
    for (size_t i = 0; i < nf; i++)
        if (full[i] >= o->min - EPS) {
            v[0] = full[i]; /* max below what its memory allows: memory wins */
            return 1;
        }
    v[0] = full[nf - 1];
    return 1;
}

static double clampd(double x, double lo, double hi) {
    return x < lo ? lo : x > hi ? hi : x;
}

/* Step 2: bounded[i] = clamp(lambda w_i, lo_i, hi_i) summing to C where it can. */
static void water_fill(const double *w, const double *lo, const double *hi, size_t n, double C,
                       double *b) {
    double slo = 0, shi = 0, lmax = 0;
    for (size_t i = 0; i < n; i++) {
        slo += lo[i], shi += hi[i];
        if (w[i] > 0 && hi[i] / w[i] > lmax) lmax = hi[i] / w[i];
    }
    if (slo >= C - EPS || shi <= C + EPS) {
        for (size_t i = 0; i < n; i++)
            b[i] = slo >= C - EPS ? lo[i] : hi[i];
        return;
    }
    double a = 0, z = lmax;
    for (int it = 0; it < 200; it++) {
        double mid = (a + z) / 2, s = 0;
        for (size_t i = 0; i < n; i++)
            s += clampd(mid * w[i], lo[i], hi[i]);
        if (s < C)
            a = mid;
        else
            z = mid;
    }
    /* exact over the trials the bounds leave free at that lambda */
    double lam = (a + z) / 2, fixed = 0, wfree = 0;
    for (size_t i = 0; i < n; i++) {
        double x = lam * w[i];
        if (x <= lo[i] + EPS || x >= hi[i] - EPS)
            fixed += clampd(x, lo[i], hi[i]);
        else
            wfree += w[i];
    }
    if (wfree > 0) lam = (C - fixed) / wfree;
    for (size_t i = 0; i < n; i++) {
        double x = lam * w[i];
        b[i] = clampd(x, lo[i], hi[i]);
    }
}

static void share_text(double s, char *buf, size_t n) {
    if (s >= 1 - EPS)
        snprintf(buf, n, "%d GPU%s", (int)lround(s), lround(s) == 1 ? "" : "s");
    else
        snprintf(buf, n, "1/%d GPU", (int)lround(1 / s));
}

double tp__fluid_shares(const tp_fluid_trial_t *trials, size_t n, const tp_fluid_opts_t *o,
                        tp_fluid_share_t *out) {
    if (n == 0) return 0;
    double known = 0, total = 0;
    size_t nknown = 0;
    for (size_t i = 0; i < n; i++)
        if (trials[i].step_s > 0) known += trials[i].step_s, nknown++;
    double stand_in = nknown ? known / (double)nknown : 1.0;
    double *w = tp__xcalloc(n, sizeof *w), *lo = tp__xcalloc(n, sizeof *lo);
    double *hi = tp__xcalloc(n, sizeof *hi), *b = tp__xcalloc(n, sizeof *b);
    double(*lad)[TP_FLUID_MAX_LADDER] = tp__xcalloc(n, sizeof *lad);
    size_t *nl = tp__xcalloc(n, sizeof *nl), *at = tp__xcalloc(n, sizeof *at);
    for (size_t i = 0; i < n; i++) {
        const tp_fluid_trial_t *t = &trials[i];
        double step = t->step_s > 0 ? t->step_s : stand_in;
        w[i] = t->remaining_steps > 0 ? step * t->remaining_steps : 0;
        total += w[i];
        nl[i] = bounded_ladder(t, o, lad[i]);
        lo[i] = w[i] > 0 ? lad[i][0] : 0;
        hi[i] = w[i] > 0 ? lad[i][nl[i] - 1] : 0;
    }
    water_fill(w, lo, hi, n, o->capacity, b);
    double given = 0;
    for (size_t i = 0; i < n; i++) {
        memset(&out[i], 0, sizeof out[i]);
        out[i].id = trials[i].id;
        out[i].work = w[i];
        out[i].ideal = total > 0 ? o->capacity * w[i] / total : 0;
        out[i].bounded = b[i];
        if (w[i] <= 0) continue;
        at[i] = 0; /* step 3: the largest ladder value <= bounded */
        while (at[i] + 1 < nl[i] && lad[i][at[i] + 1] <= b[i] + EPS)
            at[i]++;
        out[i].share = lad[i][at[i]];
        given += out[i].share;
    }
    for (;;) { /* step 4: the leftover, to whoever would finish last */
        double left = o->capacity - given, worst = -1;
        size_t pick = n;
        for (size_t i = 0; i < n; i++) {
            if (w[i] <= 0 || at[i] + 1 >= nl[i]) continue;
            if (lad[i][at[i] + 1] - out[i].share > left + EPS) continue;
            double finish = w[i] / out[i].share;
            if (finish > worst + EPS) worst = finish, pick = i;
        }
        if (pick == n) break;
        at[pick]++;
        given += lad[pick][at[pick]] - out[pick].share;
        out[pick].share = lad[pick][at[pick]];
    }
    for (size_t i = 0; i < n; i++) {
        tp_fluid_share_t *s = &out[i];
        if (w[i] <= 0) {
            snprintf(s->why, sizeof s->why, "no work left");
            continue;
        }
        s->gpus = s->share >= 1 - EPS ? (int)lround(s->share) : 1;
        s->per_gpu = s->share >= 1 - EPS ? 1 : (int)lround(1 / s->share);
        char got[32], note[64] = "";
        share_text(s->share, got, sizeof got);
        double full[TP_FLUID_MAX_LADDER];
        size_t nf = tp__fluid_ladder(&trials[i], o, full, TP_FLUID_MAX_LADDER);
        if (o->pack_max >= 2 && (nf == 0 || full[0] > 1.0 / o->pack_max + EPS))
            snprintf(note, sizeof note, "; its %llu MiB allow %s at least",
                     (unsigned long long)trials[i].memory_mib,
                     full[0] >= 1 - EPS ? "a whole GPU" : "a larger fraction");
        snprintf(s->why, sizeof s->why,
                 "%.3g of %g GPUs for %d%% of the group's work, %.3g "
                 "within bounds; given %s%s",
                 s->ideal, o->capacity, (int)lround(100 * w[i] / total), s->bounded, got, note);
    }
    free(w), free(lo), free(hi), free(b), free(lad), free(nl), free(at);
    return given;
}

double tp__fluid_served(const double *curve, int k) {
    static const double measured[4] = TP_FLUID_SERVED;
    if (!curve) curve = measured;
    return k < 1 ? 1 : curve[(k < 4 ? k : 4) - 1];
}
