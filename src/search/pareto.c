/* pareto: dominance, non-dominated sorting, crowding distance and
 * hypervolume for searches with several objectives (all minimized). */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "search/pareto.h"
#include "util/util.h"

#define HV_EPS 1e-12 /* Optuna's EPS for a zero reference coordinate */

int tp__pareto_dominates(const double *a, const double *b, size_t m) {
    int better = 0;
    for (size_t j = 0; j < m; j++) {
        if (a[j] > b[j]) return 0;
        if (a[j] < b[j]) better = 1;
    }
    return better;
}

size_t tp__pareto_rank(const double *y, size_t n, size_t m, size_t *rank) {
    if (n == 0) return 0;
    size_t *count = tp__xcalloc(n, sizeof *count); /* how many dominate i */
    unsigned char *dom = tp__xcalloc(n * n, 1);    /* dom[i n + j]: i dominates j */
    for (size_t i = 0; i < n; i++)
        for (size_t j = 0; j < n; j++)
            if (i != j && tp__pareto_dominates(y + i * m, y + j * m, m)) {
                dom[i * n + j] = 1;
                count[j]++;
            }
    size_t *front = tp__xmalloc(n * sizeof *front), *next = tp__xmalloc(n * sizeof *next);
    size_t nf = 0, fronts = 0;
    for (size_t i = 0; i < n; i++)
        if (count[i] == 0) front[nf++] = i;
    while (nf) {
        size_t nn = 0;
        for (size_t a = 0; a < nf; a++) {
            size_t i = front[a];
            rank[i] = fronts;
            for (size_t j = 0; j < n; j++)
                if (dom[i * n + j] && --count[j] == 0) next[nn++] = j;
        }
        memcpy(front, next, nn * sizeof *front);
        nf = nn;
        fronts++;
    }
    free(count), free(dom), free(front), free(next);
    return fronts;
}

typedef struct lex {
    const double *y;
    size_t m;
} lex_t;

static int cmp_lex(const void *pa, const void *pb, void *ctx) {
    const lex_t *l = ctx;
    size_t a = *(const size_t *)pa, b = *(const size_t *)pb;
    for (size_t j = 0; j < l->m; j++) {
        double x = l->y[a * l->m + j], z = l->y[b * l->m + j];
        if (x != z) return x < z ? -1 : 1;
    }
    return (a > b) - (a < b);
}

size_t tp__pareto_front(const double *y, size_t n, size_t m, unsigned char *on_front) {
    size_t *order = tp__xmalloc((n ? n : 1) * sizeof *order);
    size_t *front = tp__xmalloc((n ? n : 1) * sizeof *front), nf = 0;
    for (size_t i = 0; i < n; i++)
        order[i] = i, on_front[i] = 0;
    lex_t l = {y, m};
    qsort_r(order, n, sizeof *order, cmp_lex, &l);
    if (m == 2) { /* a sweep: dominated when an earlier point, not equal, is as low in y */
        double low = INFINITY; /* the lowest y before the run of equal points that k is in */
        for (size_t k = 0, run = 0; k < n; k++) {
            const double *p = y + order[k] * 2, *q = k ? y + order[k - 1] * 2 : NULL;
            if (q && (p[0] != q[0] || p[1] != q[1])) /* a new run: the last one is earlier */
                for (; run < k; run++)
                    low = fmin(low, y[order[run] * 2 + 1]);
            on_front[order[k]] = !(low <= p[1]);
            nf += on_front[order[k]];
        }
        free(order), free(front);
        return nf;
    }
    for (size_t k = 0; k < n; k++) {
        size_t i = order[k], a = 0;
        while (a < nf && !tp__pareto_dominates(y + front[a] * m, y + i * m, m))
            a++;
        if (a < nf) continue;
        front[nf++] = i;
        on_front[i] = 1;
    }
    free(order), free(front);
    return nf;
}

typedef struct key_idx {
    double key;
    size_t i;
} key_idx_t;

static int cmp_key(const void *pa, const void *pb) {
    const key_idx_t *a = pa, *b = pb;
    if (a->key != b->key) return a->key < b->key ? -1 : 1;
    return (a->i > b->i) - (a->i < b->i);
}

void tp__pareto_crowding(const double *y, size_t m, const size_t *idx, size_t k, double *dist) {
    for (size_t a = 0; a < k; a++)
        dist[a] = 0;
    if (k <= 2) {
        for (size_t a = 0; a < k; a++)
            dist[a] = INFINITY;
        return;
    }
    key_idx_t *s = tp__xmalloc(k * sizeof *s);
    for (size_t j = 0; j < m; j++) {
        for (size_t a = 0; a < k; a++)
            s[a] = (key_idx_t){y[idx[a] * m + j], a};
        qsort(s, k, sizeof *s, cmp_key);
        double span = s[k - 1].key - s[0].key;
        dist[s[0].i] = dist[s[k - 1].i] = INFINITY;
        if (!(span > 0)) continue;
        for (size_t a = 1; a + 1 < k; a++)
            dist[s[a].i] += (s[a + 1].key - s[a - 1].key) / span;
    }
    free(s);
}

/* Hypervolume of k rows (pointers into y, each with at least m values)
 * below ref in the first m objectives. rows is reordered. */
static double hv_rows(const double **rows, size_t k, size_t m, const double *ref) {
    size_t n = 0;
    for (size_t a = 0; a < k; a++) { /* keep the rows strictly inside the box */
        int in = 1;
        for (size_t j = 0; j < m && in; j++)
            in = rows[a][j] < ref[j];
        if (in) rows[n++] = rows[a];
    }
    if (n == 0) return 0;
    if (m == 1) {
        double lo = rows[0][0];
        for (size_t a = 1; a < n; a++)
            lo = fmin(lo, rows[a][0]);
        return ref[0] - lo;
    }
    key_idx_t *s = tp__xmalloc(n * sizeof *s);
    const double **sorted = tp__xmalloc(n * sizeof *sorted);
    for (size_t a = 0; a < n; a++)
        s[a] = (key_idx_t){rows[a][m - 1], a};
    qsort(s, n, sizeof *s, cmp_key);
    for (size_t a = 0; a < n; a++)
        sorted[a] = rows[s[a].i];
    double vol = 0;
    if (m == 2) { /* sweep: by the second objective, the first one's best so far */
        double best = ref[0];
        for (size_t a = 0; a < n; a++) {
            double next = a + 1 < n ? sorted[a + 1][1] : ref[1];
            best = fmin(best, sorted[a][0]);
            vol += (ref[0] - best) * (next - sorted[a][1]);
        }
    } else { /* slices along the last objective */
        const double **tmp = tp__xmalloc(n * sizeof *tmp);
        for (size_t a = 0; a < n; a++) {
            double next = a + 1 < n ? sorted[a + 1][m - 1] : ref[m - 1];
            if (!(next > sorted[a][m - 1])) continue;
            memcpy(tmp, sorted, (a + 1) * sizeof *tmp);
            vol += (next - sorted[a][m - 1]) * hv_rows(tmp, a + 1, m - 1, ref);
        }
        free(tmp);
    }
    free(s), free(sorted);
    return vol;
}

double tp__hypervolume(const double *y, size_t m, const size_t *idx, size_t k, const double *ref) {
    if (k == 0) return 0;
    const double **rows = tp__xmalloc(k * sizeof *rows);
    for (size_t a = 0; a < k; a++)
        rows[a] = y + (idx ? idx[a] : a) * m;
    double v = hv_rows(rows, k, m, ref);
    free(rows);
    return v;
}

void tp__hv_contributions(const double *y, size_t m, const size_t *idx, size_t k, const double *ref,
                          double *contrib) {
    double all = tp__hypervolume(y, m, idx, k, ref);
    size_t *rest = tp__xmalloc((k ? k : 1) * sizeof *rest);
    for (size_t a = 0; a < k; a++) {
        size_t r = 0;
        for (size_t b = 0; b < k; b++)
            if (b != a) rest[r++] = idx ? idx[b] : b;
        contrib[a] = all - tp__hypervolume(y, m, rest, r, ref);
    }
    free(rest);
}

void tp__hv_reference(const double *y, size_t m, const size_t *idx, size_t k, double *ref) {
    for (size_t j = 0; j < m; j++) {
        double w = -INFINITY;
        for (size_t a = 0; a < k; a++)
            w = fmax(w, y[(idx ? idx[a] : a) * m + j]);
        ref[j] = fmax(1.1 * w, 0.9 * w);
        if (ref[j] == 0) ref[j] = HV_EPS;
    }
}

void tp__hv_select(const double *y, size_t m, const size_t *idx, size_t k, size_t want,
                   const double *ref, size_t *out) {
    unsigned char *taken = tp__xcalloc(k ? k : 1, 1);
    size_t *chosen = tp__xmalloc((want + 1) * sizeof *chosen);
    double have = 0;
    for (size_t c = 0; c < want && c < k; c++) {
        double best = -1;
        size_t at = 0;
        for (size_t a = 0; a < k; a++) {
            if (taken[a]) continue;
            chosen[c] = idx[a];
            double gain = tp__hypervolume(y, m, chosen, c + 1, ref) - have;
            if (gain > best) best = gain, at = a;
        }
        taken[at] = 1;
        chosen[c] = idx[at];
        have += best;
        out[c] = idx[at];
    }
    free(taken), free(chosen);
}
