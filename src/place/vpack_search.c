/* vpack's search (vpack.h): the bounded local search and the GPU-by-GPU
 * fill, over the state placer_vector.c builds. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "place/vpack.h"

/* ---- local search ------------------------------------------------------------ */

static int same_demand(const tp_demand_t *a, const tp_demand_t *b) {
    return a->memory_mib == b->memory_mib && a->compute == b->compute && a->cpus == b->cpus;
}

/* Trials put on GPUs by one tentative move, to undo it. */
typedef struct undo {
    size_t trial[64];
    size_t n;
} undo_t;

static void put_logged(vp_t *v, undo_t *log, size_t i, size_t gi) {
    put(v, i, gi);
    if (log->n < TP_ARRAY_LEN(log->trial)) log->trial[log->n++] = i;
}

/* Fill GPU g with unplaced trials of todo[0..k) (densest first, one try per
 * distinct demand), except `skip`; returns the share added. */
static double refill(vp_t *v, size_t g, const size_t *todo, size_t k, size_t skip, undo_t *log) {
    double added = 0;
    size_t failed = NONE;
    for (size_t j = 0; j < k && v->budget > 0 && log->n < TP_ARRAY_LEN(log->trial); j++) {
        size_t t = todo[j];
        if (t == skip || v->where[t] != NONE) continue;
        if (failed != NONE && same_demand(&v->t[t], &v->t[failed])) continue;
        if (!fits(v, t, g)) {
            failed = t;
            continue;
        }
        put_logged(v, log, t, g);
        added += value_on(v, t, g);
    }
    return added;
}

/* Trials out[0..nout) leave GPU g so that unplaced trial i takes their room;
 * they move to other GPUs where they fit, and what room is left is filled
 * from todo[0..k). Kept (1) when occupancy strictly rises, else undone (0). */
static int eject(vp_t *v, size_t i, size_t g, const size_t *out, size_t nout, choice_t how,
                 const size_t *todo, size_t k) {
    double gain = 0;
    for (size_t q = 0; q < nout; q++) {
        gain -= value_on(v, out[q], g);
        take(v, out[q]);
    }
    undo_t log = {.n = 0};
    if (fits(v, i, g)) {
        put_logged(v, &log, i, g);
        gain += value_on(v, i, g);
        for (size_t q = 0; q < nout; q++) {
            size_t to = choose(v, out[q], how, g);
            if (to == NONE) continue;
            put_logged(v, &log, out[q], to);
            gain += value_on(v, out[q], to);
        }
        if (gain <= TP_PLACE_EPS) gain += refill(v, g, todo, k, i, &log);
        if (gain > TP_PLACE_EPS) return 1;
        while (log.n)
            take(v, log.trial[--log.n]);
    }
    for (size_t q = 0; q < nout; q++)
        put(v, out[q], g);
    return 0;
}

/* Place trial i (unplaced) if some move allows it with a strict gain in
 * occupancy; 1 if placed. Tries a GPU where it fits now; then, on each GPU,
 * ejecting one or two of its trials so that i fits, the ejected ones moved to
 * other GPUs where they fit (or left unplaced) and the room left filled with
 * other unplaced trials of todo[0..k) (one out, two in). */
static int insert(vp_t *v, size_t i, choice_t how, const size_t *todo, size_t k) {
    size_t gi = choose(v, i, how, NONE);
    if (gi != NONE) {
        put(v, i, gi);
        return 1;
    }
    const tp_demand_t *d = &v->t[i];
    for (size_t nout = 1; nout <= 2; nout++)
        for (size_t g = 0; g < v->G && v->budget > 0; g++) {
            size_t nd = v->node_of[g];
            if (!v->head[g] || d->memory_mib > v->c->nodes[nd].gpus[v->local_of[g]].memory_mib)
                continue;
            size_t res[32], nr = 0;
            for (size_t j = v->head[g]; j != NONE && nr < TP_ARRAY_LEN(res); j = v->next[j])
                res[nr++] = j;
            /* eject {res[a]} or {res[a], res[b]}: the set of residents is the
             * same after each try, so res stays valid */
            for (size_t a = 0; a < nr && v->budget > 0; a++)
                for (size_t b = nout == 1 ? a : a + 1; b < nr && v->budget > 0; b++) {
                    if (eject(v, i, g, (size_t[]){res[a], res[b]}, nout, how, todo, k)) return 1;
                    if (nout == 1) break;
                }
        }
    return 0;
}

/* insert() looks at the first 32 trials of each GPU's list: rotating the
 * lists between passes gives the others of a crowded GPU their turn. */
static void rotate(vp_t *v) {
    for (size_t g = 0; g < v->G; g++) {
        size_t h = v->head[g];
        if (h == NONE || v->next[h] == NONE) continue;
        size_t last = v->next[h];
        while (v->next[last] != NONE)
            last = v->next[last];
        v->head[g] = v->next[h];
        v->next[last] = h;
        v->next[h] = NONE;
    }
}

static double capped(double x) {
    return x < 1 ? x : 1;
}

/* Mixed GPU speeds: each placed trial of single[0..m) moves to the GPU where
 * occupancy rises most by the move (a slower GPU, where its share is larger,
 * with room for it), if any. Where cores bind, a trial on a fast GPU buys
 * half the occupancy of the same trial, on the same cores, on a GPU half as
 * fast; insert() never moves a placed trial unless an unplaced one takes its
 * room. 1 if a trial moved. O(m G) fit tests. */
static int relocate(vp_t *v, const size_t *single, size_t m) {
    int moved = 0;
    for (size_t j = 0; j < m && v->budget > 0; j++) {
        size_t i = single[j], g = v->where[i];
        if (g == NONE) continue;
        double s = share_on(v, i, g), best_gain = TP_PLACE_EPS;
        size_t best = NONE;
        take(v, i);
        double lose = capped(v->u->compute_used[g] + s) - capped(v->u->compute_used[g]);
        for (size_t h = 0; h < v->G; h++) {
            double sh = share_on(v, i, h);
            if (h == g || sh <= s + TP_PLACE_EPS) continue; /* only to a slower GPU */
            double gain = capped(v->u->compute_used[h] + sh) - capped(v->u->compute_used[h]) - lose;
            if (gain > best_gain && fits(v, i, h)) best = h, best_gain = gain;
        }
        put(v, i, best != NONE ? best : g);
        moved |= best != NONE;
    }
    return moved;
}

/* Passes over the unplaced trials, densest first, until a pass changes
 * nothing, the residents have all had a turn, or the budget is spent. A trial
 * identical to one that just failed is skipped while nothing changed. */
void tp__vp_local_search(vp_t *v, size_t *single, size_t m, choice_t how) {
    size_t *todo = tp__xmalloc((m ? m : 1) * sizeof *todo);
    int max_per = 1;
    for (size_t g = 0; g < v->G; g++) {
        int k = v->u->count[g];
        if (k > max_per) max_per = k;
    }
    double slow = INFINITY, fast = 0;
    for (size_t g = 0; g < v->G; g++) {
        double sp = v->c->nodes[v->node_of[g]].gpus[v->local_of[g]].speed;
        sp = sp > 0 ? sp : 1.0;
        if (sp < slow) slow = sp;
        if (sp > fast) fast = sp;
    }
    for (int pass = 0; pass < max_per + 1 && v->budget > 0; pass++) {
        int changed = fast > slow && relocate(v, single, m);
        size_t k = 0;
        for (size_t j = 0; j < m; j++)
            if (v->where[single[j]] == NONE) todo[k++] = single[j];
        tp__vp_sort(v, todo, k, BY_DENSITY);
        size_t failed = NONE;
        for (size_t j = 0; j < k && v->budget > 0; j++) {
            size_t i = todo[j];
            if (v->where[i] != NONE) continue;
            if (failed != NONE && same_demand(&v->t[i], &v->t[failed])) continue;
            if (insert(v, i, how, todo, k)) {
                changed = 1;
                failed = NONE;
            } else {
                failed = i;
            }
        }
        if (!changed && pass > 0) break;
        rotate(v);
    }
    free(todo);
}

/* ---- fill: GPU by GPU, each with the subset that adds the most ----------- */

typedef struct fill {
    vp_t *v;
    size_t gi, nd; /* the GPU being filled and its node */
    size_t ncls;
    size_t *cls_first;    /* per class: its trials at list[cls_first[k]..] */
    size_t *cls_left;     /* per class: trials not yet placed */
    size_t *take, *best;  /* per class: taken now / in the best subset */
    double best_val, cap; /* best value found; the most the GPU can add */
    double best_dur;      /* summed expected duration of the best subset */
    long long steps;      /* DFS steps left for this GPU */
    int count;            /* trials on the GPU before the fill plus those taken */
} fill_t;

/* Depth-first over classes k >= from: add one more trial of class k while
 * it fits (memory, compute, slots, cores), keeping the subset of most value
 * (ties: the longest summed expected duration); prunes a branch whose value
 * plus the compute left cannot beat the best, and stops at a full GPU. */
static void fill_dfs(fill_t *f, const size_t *list, size_t from, uint64_t mem, double comp,
                     int slots, int cpus, double val, double dur) {
    if (val > f->best_val + TP_PLACE_EPS ||
        (val > f->best_val - TP_PLACE_EPS && dur > f->best_dur)) {
        if (val > f->best_val) f->best_val = val;
        f->best_dur = dur;
        memcpy(f->best, f->take, f->ncls * sizeof *f->best);
    }
    for (size_t k = from; k < f->ncls && f->steps > 0; k++) {
        if (f->take[k] >= f->cls_left[k]) continue;
        double most = comp * (1 + f->v->bonus); /* what the GPU can still add, bonus included */
        if (val + most <= f->best_val - TP_PLACE_EPS ||
            (f->v->bonus <= 0 && f->best_val >= f->cap - TP_PLACE_EPS))
            return;
        f->steps--;
        size_t t = list[f->cls_first[k] + f->take[k]];
        const tp_demand_t *d = &f->v->t[t];
        double s = share_on(f->v, t, f->gi);
        if (d->memory_mib > mem || s > comp + TP_PLACE_EPS || slots <= 0 || d->cpus > cpus)
            continue;
        f->take[k]++;
        f->count++;
        double add = f->v->bonus > 0 ? s + bonus_of(f->v, t) : val + s < f->cap ? s : f->cap - val;
        /* the room for the next: a served GPU's capacity grows with its count */
        double grown = tp__place_capacity(f->v->c, f->nd, f->count + 1) -
                       tp__place_capacity(f->v->c, f->nd, f->count);
        fill_dfs(f, list, k, mem - d->memory_mib, comp - s + grown, slots - 1, cpus - d->cpus,
                 val + add, dur + d->duration_s);
        f->count--;
        f->take[k]--;
    }
}

static int by_demand_then_duration(const void *a, const void *b, void *arg) {
    const tp_demand_t *t = arg, *x = &t[*(const size_t *)a], *y = &t[*(const size_t *)b];
    if (x->compute != y->compute) return x->compute > y->compute ? -1 : 1;
    if (x->memory_mib != y->memory_mib) return x->memory_mib < y->memory_mib ? -1 : 1;
    if (x->cpus != y->cpus) return x->cpus < y->cpus ? -1 : 1;
    if (x->duration_s != y->duration_s) return x->duration_s > y->duration_s ? -1 : 1;
    return *(const size_t *)a < *(const size_t *)b ? -1 : 1;
}

static double gpu_speed(const vp_t *v, size_t gi) {
    double s = v->c->nodes[v->node_of[gi]].gpus[v->local_of[gi]].speed;
    return s > 0 ? s : 1.0;
}

/* Each open GPU in turn (slowest first: a trial adds most occupancy there)
 * takes the subset of the unplaced single-GPU trials that adds the most, over
 * classes of identical demand (longest trials of a class first). fair_cpus:
 * a GPU may take only its share of its node's free cores (free cores x its
 * speed / the summed speed of the node's GPUs not yet filled: a GPU twice as
 * fast holds twice the trials), so the first GPU does not starve the others.
 * tight_first: the nodes with the fewest free cores per unit of GPU speed
 * first (then slowest first): their GPUs, held to their share of few cores,
 * take the trials of most compute per core before the nodes that have cores
 * to spare take the rest (bench/placement's cpuspeed class).
 * O(G x FILL_STEPS + m log m). */
#define FILL_STEPS 4000
void tp__vp_fill(vp_t *v, size_t *single, size_t m, int fair_cpus, int tight_first) {
    size_t *list = tp__xmalloc((m ? m : 1) * sizeof *list), nl = 0;
    for (size_t j = 0; j < m; j++)
        if (v->where[single[j]] == NONE) list[nl++] = single[j];
    qsort_r(list, nl, sizeof *list, by_demand_then_duration, (void *)v->t);
    fill_t f = {.v = v};
    f.cls_first = tp__xmalloc((nl ? nl : 1) * sizeof *f.cls_first);
    f.cls_left = tp__xmalloc((nl ? nl : 1) * sizeof *f.cls_left);
    for (size_t j = 0; j < nl; j++) {
        const tp_demand_t *d = &v->t[list[j]];
        if (j && same_demand(d, &v->t[list[j - 1]])) {
            f.cls_left[f.ncls - 1]++;
            continue;
        }
        f.cls_first[f.ncls] = j;
        f.cls_left[f.ncls++] = 1;
    }
    size_t *placed_of = tp__xcalloc(f.ncls ? f.ncls : 1, sizeof *placed_of);
    f.take = tp__xcalloc(f.ncls ? f.ncls : 1, sizeof *f.take);
    f.best = tp__xcalloc(f.ncls ? f.ncls : 1, sizeof *f.best);
    size_t *gpus = tp__xmalloc((v->G ? v->G : 1) * sizeof *gpus);
    /* per node: the summed speed of its GPUs not yet filled */
    double *left_on_node = tp__xcalloc(v->c->nnodes ? v->c->nnodes : 1, sizeof *left_on_node);
    for (size_t g = 0; g < v->G; g++) {
        gpus[g] = g;
        left_on_node[v->node_of[g]] += gpu_speed(v, g);
    }
    /* slowest first (tight_first: fewest cores per speed first), then cluster
     * order (insertion sort: G is small here) */
    double *cores_per = tp__xcalloc(v->c->nnodes ? v->c->nnodes : 1, sizeof *cores_per);
    for (size_t nd = 0; nd < v->c->nnodes; nd++)
        cores_per[nd] = left_on_node[nd] > 0
                            ? (v->c->nodes[nd].cpus - v->u->cpus_used[nd]) / left_on_node[nd]
                            : 0;
    for (size_t a = 1; a < v->G; a++)
        for (size_t b = a; b > 0; b--) {
            const tp_gpu_t *x = &v->c->nodes[v->node_of[gpus[b]]].gpus[v->local_of[gpus[b]]];
            const tp_gpu_t *y =
                &v->c->nodes[v->node_of[gpus[b - 1]]].gpus[v->local_of[gpus[b - 1]]];
            double cx = cores_per[v->node_of[gpus[b]]], cy = cores_per[v->node_of[gpus[b - 1]]];
            if (tight_first && cx != cy) {
                if (!(cx < cy)) break;
            } else if (!(x->speed < y->speed)) {
                break;
            }
            size_t tmp = gpus[b];
            gpus[b] = gpus[b - 1];
            gpus[b - 1] = tmp;
        }
    for (size_t q = 0; q < v->G; q++) {
        size_t gi = gpus[q], nd = v->node_of[gi], g = v->local_of[gi];
        double speed = gpu_speed(v, gi), speed_left = left_on_node[nd];
        left_on_node[nd] -= speed;
        if (!tp__place_gpu_open(v->c, v->u, nd, g)) continue;
        f.gi = gi;
        f.nd = nd;
        double used = v->u->compute_used[gi];
        f.cap = used < 1.0 ? 1.0 - used : 0.0;
        f.best_val = 0;
        f.best_dur = 0;
        f.steps = FILL_STEPS;
        f.count = v->u->count[gi];
        memset(f.take, 0, f.ncls * sizeof *f.take);
        memset(f.best, 0, f.ncls * sizeof *f.best);
        int lim = v->c->limits.sharing ? v->c->limits.max_per_gpu : 1;
        int slots = lim > 0 ? lim - v->u->count[gi] : INT32_MAX;
        int cpus = v->c->nodes[nd].cpus - v->u->cpus_used[nd];
        if (fair_cpus && speed_left > speed * (1 + 1e-9))
            cpus = (int)((double)cpus * speed / speed_left);
        fill_dfs(&f, list, 0, tp__place_mem_free(v->c, v->u, nd, g),
                 tp__place_comp_free(v->c, v->u, nd, g), slots, cpus, 0.0, 0.0);
        for (size_t k = 0; k < f.ncls; k++)
            for (size_t r = 0; r < f.best[k]; r++) {
                size_t i = list[f.cls_first[k] + placed_of[k]];
                if (!fits(v, i, gi)) break;
                put(v, i, gi);
                placed_of[k]++;
                f.cls_left[k]--;
            }
        /* the class lists advance: cls_first points at the next unplaced */
        for (size_t k = 0; k < f.ncls; k++) {
            f.cls_first[k] += placed_of[k];
            placed_of[k] = 0;
        }
    }
    free(list);
    free(f.cls_first);
    free(f.cls_left);
    free(placed_of);
    free(f.take);
    free(f.best);
    free(gpus);
    free(left_on_node);
    free(cores_per);
}
