/* forest: parameter importance by a small random forest of regression trees
 * and permutation on the rows each tree did not see. A tree splits on one
 * parameter after another, so x*y (neither matters alone) is found by a
 * split on x and then on y below it; eta squared, one parameter at a time,
 * sees nothing there. Pure: no clock, no I/O, the same answer for the same
 * rows (a fixed seed). */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "web/web_internal.h"

enum {
    FOREST_TREES = 32,
    FOREST_SAMPLE = 1000, /* rows drawn per tree (with replacement), at most */
    FOREST_OOB = 1000,    /* rows left out that each tree is scored on, at most */
    FOREST_DEPTH = 12,
    FOREST_MIN_LEAF = 3,
    FOREST_CATS = 64 /* categories told apart; the rest share the last */
};

typedef struct {
    int feature;       /* -1: a leaf */
    double threshold;  /* numeric: left when x <= threshold */
    uint64_t left_set; /* categorical: left when the category's bit is set */
    int32_t left, right;
    double value; /* a leaf's mean */
} fnode_t;

typedef struct {
    fnode_t *node;
    size_t n, cap;
} tree_t;

typedef struct {
    const double *x; /* rows x p, no NaN */
    const double *y;
    const unsigned char *categorical;
    size_t p;
    size_t *rows; /* the tree's sample, partitioned as it grows */
    struct kv {
        double k, y;
        size_t row;
    } * kv;
    tp_rng_t *rng;
} grow_t;

static int by_k(const void *a, const void *b) {
    double x = ((const struct kv *)a)->k, y = ((const struct kv *)b)->k;
    return (x > y) - (x < y);
}

static int32_t push(tree_t *t, fnode_t n) {
    t->node = tp__xgrow(t->node, &t->cap, t->n + 1, sizeof *t->node, 64);
    t->node[t->n] = n;
    return (int32_t)t->n++;
}

static int goes_left(const fnode_t *nd, double x, int categorical) {
    if (categorical) return (nd->left_set >> (size_t)x) & 1;
    return x <= nd->threshold;
}

/* The best split of rows[lo, hi) on feature f: its gain (the drop in the sum
 * of squares; 0 when none), threshold or set of categories. A category is
 * keyed by its mean here, which makes the best split of categories one of
 * the splits of that order. O(m log m). */
static double best_split(grow_t *g, size_t lo, size_t hi, size_t f, double *threshold,
                         uint64_t *set) {
    size_t m = hi - lo;
    double csum[FOREST_CATS] = {0}, ccnt[FOREST_CATS] = {0};
    int cat = g->categorical[f];
    for (size_t i = 0; i < m; i++) {
        size_t r = g->rows[lo + i];
        g->kv[i] = (struct kv){g->x[r * g->p + f], g->y[r], r};
        if (cat) csum[(size_t)g->kv[i].k] += g->y[r], ccnt[(size_t)g->kv[i].k] += 1;
    }
    if (cat)
        for (size_t i = 0; i < m; i++) {
            size_t c = (size_t)g->kv[i].k;
            g->kv[i].k = csum[c] / ccnt[c] + (double)c * 1e-12; /* ties by code */
        }
    qsort(g->kv, m, sizeof *g->kv, by_k);
    double total = 0;
    for (size_t i = 0; i < m; i++)
        total += g->kv[i].y;
    double left = 0, best = 0, base = total * total / (double)m;
    size_t at = 0;
    for (size_t i = 0; i + 1 < m; i++) {
        left += g->kv[i].y;
        size_t nl = i + 1, nr = m - nl;
        if (nl < FOREST_MIN_LEAF || nr < FOREST_MIN_LEAF || g->kv[i].k == g->kv[i + 1].k) continue;
        double right = total - left;
        double gain = left * left / (double)nl + right * right / (double)nr - base;
        if (gain > best + 1e-12 * fabs(base)) best = gain, at = nl;
    }
    if (best <= 0) return 0;
    *threshold = cat ? 0 : (g->kv[at - 1].k + g->kv[at].k) / 2;
    *set = 0;
    if (cat)
        for (size_t i = 0; i < at; i++)
            *set |= (uint64_t)1 << (size_t)g->x[g->kv[i].row * g->p + f];
    return best;
}

static int32_t grow(grow_t *g, tree_t *t, size_t lo, size_t hi, int depth) {
    double sum = 0;
    for (size_t i = lo; i < hi; i++)
        sum += g->y[g->rows[i]];
    fnode_t leaf = {.feature = -1, .left = -1, .right = -1, .value = sum / (double)(hi - lo)};
    if (depth >= FOREST_DEPTH || hi - lo < 2 * FOREST_MIN_LEAF) return push(t, leaf);
    /* Half the features (at least one), drawn at random: trees unlike each other. */
    size_t feats[256], nf = g->p < 256 ? g->p : 256;
    for (size_t f = 0; f < nf; f++)
        feats[f] = f;
    size_t mtry = nf <= 2 ? nf : (nf + 1) / 2;
    for (size_t i = 0; i < mtry; i++) {
        size_t j = i + (size_t)tp__rng_below(g->rng, nf - i), tmp = feats[i];
        feats[i] = feats[j], feats[j] = tmp;
    }
    double best = 0, threshold = 0;
    uint64_t set = 0;
    int feature = -1;
    for (size_t i = 0; i < mtry; i++) {
        double th = 0;
        uint64_t st = 0;
        double gain = best_split(g, lo, hi, feats[i], &th, &st);
        if (gain > best) best = gain, threshold = th, set = st, feature = (int)feats[i];
    }
    if (feature < 0) return push(t, leaf);
    fnode_t nd = {.feature = feature, .threshold = threshold, .left_set = set};
    size_t mid = lo;
    for (size_t i = lo; i < hi; i++) {
        size_t r = g->rows[i];
        if (goes_left(&nd, g->x[r * g->p + (size_t)feature], g->categorical[feature])) {
            g->rows[i] = g->rows[mid], g->rows[mid++] = r;
        }
    }
    if (mid == lo || mid == hi) return push(t, leaf);
    int32_t self = push(t, nd);
    int32_t l = grow(g, t, lo, mid, depth + 1);
    int32_t r = grow(g, t, mid, hi, depth + 1);
    t->node[self].left = l, t->node[self].right = r;
    return self;
}

/* The tree's prediction for row r, with feature f's value taken from row
 * swap instead (f = SIZE_MAX: none). */
static double predict(const tree_t *t, const grow_t *g, size_t r, size_t f, size_t swap) {
    const fnode_t *nd = &t->node[0];
    while (nd->feature >= 0) {
        size_t k = (size_t)nd->feature;
        double x = g->x[(k == f ? swap : r) * g->p + k];
        nd = &t->node[goes_left(nd, x, g->categorical[k]) ? nd->left : nd->right];
    }
    return nd->value;
}

void tp__web_forest_importance(const double *x, const unsigned char *categorical, size_t n,
                               size_t p, const double *y, double *importance) {
    for (size_t f = 0; f < p; f++)
        importance[f] = 0;
    if (n < 2 * FOREST_MIN_LEAF || p == 0) return;
    /* Absent numbers (NaN) below every other value; categories clamped. */
    double *xc = tp__xmalloc(n * p * sizeof *xc);
    for (size_t f = 0; f < p; f++) {
        double lo = INFINITY;
        for (size_t i = 0; i < n; i++)
            if (isfinite(x[i * p + f])) lo = fmin(lo, x[i * p + f]);
        for (size_t i = 0; i < n; i++) {
            double v = x[i * p + f];
            if (categorical[f])
                v = isfinite(v) && v >= 0 && v < FOREST_CATS ? floor(v) : FOREST_CATS - 1;
            else if (!isfinite(v))
                v = isfinite(lo) ? lo - 1 : 0;
            xc[i * p + f] = v;
        }
    }
    double mean = 0, var = 0;
    for (size_t i = 0; i < n; i++)
        mean += y[i];
    mean /= (double)n;
    for (size_t i = 0; i < n; i++)
        var += (y[i] - mean) * (y[i] - mean);
    var /= (double)n;
    size_t m = n < FOREST_SAMPLE ? n : FOREST_SAMPLE;
    tp_rng_t rng;
    tp__rng_seed(&rng, 0x7f4a7c15u, 36);
    grow_t g = {.x = xc,
                .y = y,
                .categorical = categorical,
                .p = p,
                .rows = tp__xmalloc(m * sizeof(size_t)),
                .kv = tp__xmalloc(m * sizeof(struct kv)),
                .rng = &rng};
    unsigned char *in_bag = tp__xmalloc(n);
    size_t *oob = tp__xmalloc(n * sizeof *oob), *perm = tp__xmalloc(n * sizeof *perm);
    double *increase = tp__xcalloc(p, sizeof *increase);
    size_t scored = 0;
    tree_t t = {0};
    for (int k = 0; k < FOREST_TREES && var > 0; k++) {
        memset(in_bag, 0, n);
        for (size_t i = 0; i < m; i++) {
            g.rows[i] = (size_t)tp__rng_below(&rng, n);
            in_bag[g.rows[i]] = 1;
        }
        t.n = 0;
        grow(&g, &t, 0, m, 0);
        /* The rows it did not see, an even sample of them when many. */
        size_t noob = 0;
        for (size_t i = 0; i < n; i++)
            if (!in_bag[i]) oob[noob++] = i;
        if (noob > FOREST_OOB) {
            for (size_t i = 0; i < FOREST_OOB; i++)
                oob[i] = oob[i * noob / FOREST_OOB];
            noob = FOREST_OOB;
        }
        if (noob < 2) continue;
        double base = 0;
        for (size_t i = 0; i < noob; i++) {
            double e = predict(&t, &g, oob[i], SIZE_MAX, 0) - y[oob[i]];
            base += e * e;
        }
        /* Each feature's values shuffled among those rows: how much worse. */
        for (size_t f = 0; f < p; f++) {
            for (size_t i = 0; i < noob; i++)
                perm[i] = oob[i];
            for (size_t i = noob - 1; i > 0; i--) {
                size_t j = (size_t)tp__rng_below(&rng, i + 1), tmp = perm[i];
                perm[i] = perm[j], perm[j] = tmp;
            }
            double err = 0;
            for (size_t i = 0; i < noob; i++) {
                double e = predict(&t, &g, oob[i], f, perm[i]) - y[oob[i]];
                err += e * e;
            }
            increase[f] += (err - base) / (double)noob;
        }
        scored++;
    }
    double total = 0;
    for (size_t f = 0; f < p; f++) {
        importance[f] = scored && increase[f] > 0 ? increase[f] / (double)scored / var : 0;
        total += importance[f];
    }
    for (size_t f = 0; f < p && total > 0; f++)
        importance[f] /= total;
    free(t.node), free(g.rows), free(g.kv), free(in_bag), free(oob), free(perm), free(increase);
    free(xc);
}
