/* The pattern (configuration) model of `optimal`, for rounds of single-GPU
 * trials: exact, and free of the symmetry that makes the plain assignment
 * MIP slow to prove when GPUs are interchangeable.
 *
 * - Classes: trials of identical demand (memory, compute, cores) are one
 *   class k with n_k trials.
 * - GPU states: open GPUs with the same free memory, free compute, free
 *   slots, speed and compute in use are interchangeable; for each state the
 *   patterns are every multiset of classes that fits one GPU in that state
 *   (a depth-first enumeration; a pattern's value is the occupancy it adds,
 *   min(1, used + shares) - min(1, used)).
 * - Groups: the GPUs of one state, merged over all nodes when no node can
 *   run out of cores whatever its GPUs take (the summed largest core demand
 *   of its GPUs' patterns fits), otherwise one group per (node, state) and a
 *   core row for each node that can run out.
 * - MIP: integer y[h][p] = how many GPUs of group h take pattern p;
 *   sum_p y[h][p] <= |h|; per class sum a_pk y <= n_k; per node that can run
 *   out sum cores(p) y <= free cores; maximise sum value(p) y.
 * For SP4 on 16 A100s: 24 classes, one group, about 3,300 patterns. With
 * too many patterns (more than PATTERNS_MAX in all) the model is not built
 * and the caller falls back to the assignment MIP. */
#include <errno.h>
#include <glpk.h>
#include <limits.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "place/place_internal.h"

#define PATTERNS_MAX 200000 /* columns at most; beyond, the assignment MIP */

typedef struct cls {
    uint64_t mem;
    double compute;
    int cpus;
    size_t count;   /* trials in it */
    size_t *trials; /* owned; longest expected duration first */
} cls_t;

typedef struct state {
    uint64_t mem_free;
    double comp_free, used, speed;
    int count;          /* trials on it now */
    size_t nd;          /* its node (for its capacity: tp__place_capacity) */
    int served;         /* the node's served flag: states of served and plain GPUs differ */
    int slots;          /* free slots, INT_MAX if unlimited */
    size_t first, npat; /* its patterns in the pattern arrays */
    int max_cpus;       /* the most cores one of its patterns takes */
} state_t;

typedef struct patterns {
    /* per pattern: its items (class, count) at item[first..first+nitems) */
    size_t *first, *nitems;
    double *value;
    int *cpus;
    size_t n, cap;
    size_t *item_cls, *item_cnt;
    size_t nitem, capitem;
    int overflow; /* more than PATTERNS_MAX */
} patterns_t;

static void pat_push(patterns_t *P, const size_t *cnt, size_t ncls, double value, int cpus) {
    if (P->n >= PATTERNS_MAX) {
        P->overflow = 1;
        return;
    }
    if (P->n == P->cap) {
        size_t old = P->cap;
        P->first = tp__xgrow(P->first, &P->cap, P->n + 1, sizeof *P->first, 256);
        P->nitems = tp__xresize(P->nitems, old, P->cap, sizeof *P->nitems);
        P->value = tp__xresize(P->value, old, P->cap, sizeof *P->value);
        P->cpus = tp__xresize(P->cpus, old, P->cap, sizeof *P->cpus);
    }
    P->first[P->n] = P->nitem;
    P->nitems[P->n] = 0;
    for (size_t k = 0; k < ncls; k++) {
        if (!cnt[k]) continue;
        if (P->nitem == P->capitem) {
            size_t old = P->capitem;
            P->item_cls =
                tp__xgrow(P->item_cls, &P->capitem, P->nitem + 1, sizeof *P->item_cls, 1024);
            P->item_cnt = tp__xresize(P->item_cnt, old, P->capitem, sizeof *P->item_cnt);
        }
        P->item_cls[P->nitem] = k;
        P->item_cnt[P->nitem++] = cnt[k];
        P->nitems[P->n]++;
    }
    P->value[P->n] = value;
    P->cpus[P->n] = cpus;
    P->n++;
}

typedef struct walk {
    const cls_t *cls;
    size_t ncls;
    const state_t *s;
    const tp_cluster_t *c; /* for each GPU state's capacity */
    size_t *cnt;           /* the multiset being built */
    patterns_t *P;
} walk_t;

/* Every multiset of classes k >= from that fits with what is taken so far. */
static void enumerate(walk_t *w, size_t from, uint64_t mem, double share, int slots, int cpus) {
    if (w->P->overflow) return;
    for (size_t k = from; k < w->ncls; k++) {
        const cls_t *c = &w->cls[k];
        double s = c->compute / w->s->speed;
        /* the capacity with this one counted (slots: those already in the pattern) */
        double room = tp__place_capacity(w->c, w->s->nd, w->s->count + slots + 1) - w->s->used;
        if (w->cnt[k] >= c->count || mem + c->mem > w->s->mem_free ||
            share + s > room + TP_PLACE_EPS || slots >= w->s->slots)
            continue;
        w->cnt[k]++;
        uint64_t m2 = mem + c->mem;
        double s2 = share + s;
        int cp = cpus + c->cpus;
        double after = w->s->used + s2 < 1.0 ? w->s->used + s2 : 1.0;
        double before = w->s->used < 1.0 ? w->s->used : 1.0;
        pat_push(w->P, w->cnt, w->ncls, after - before, cp);
        enumerate(w, k, m2, s2, slots + 1, cp);
        w->cnt[k]--;
    }
}

static int by_demand(const void *a, const void *b, void *arg) {
    const tp_demand_t *t = arg;
    const tp_demand_t *x = &t[*(const size_t *)a], *y = &t[*(const size_t *)b];
    if (x->compute != y->compute) return x->compute > y->compute ? -1 : 1;
    if (x->memory_mib != y->memory_mib) return x->memory_mib < y->memory_mib ? -1 : 1;
    if (x->cpus != y->cpus) return x->cpus < y->cpus ? -1 : 1;
    if (x->duration_s != y->duration_s) return x->duration_s > y->duration_s ? -1 : 1;
    return *(const size_t *)a < *(const size_t *)b ? -1 : 1;
}

/* Trials grouped into classes of identical demand, largest compute first;
 * within a class longest expected duration first. Returns the count. */
static size_t classes_of(const tp_demand_t *t, size_t n, cls_t **out) {
    size_t *idx = tp__xmalloc((n ? n : 1) * sizeof *idx);
    for (size_t i = 0; i < n; i++)
        idx[i] = i;
    qsort_r(idx, n, sizeof *idx, by_demand, (void *)t);
    cls_t *c = tp__xcalloc(n ? n : 1, sizeof *c);
    size_t k = 0;
    for (size_t j = 0; j < n; j++) {
        const tp_demand_t *d = &t[idx[j]];
        if (!k || c[k - 1].mem != d->memory_mib || c[k - 1].compute != d->compute ||
            c[k - 1].cpus != d->cpus) {
            c[k] = (cls_t){.mem = d->memory_mib,
                           .compute = d->compute,
                           .cpus = d->cpus,
                           .trials = tp__xmalloc((n - j) * sizeof(size_t))};
            k++;
        }
        c[k - 1].trials[c[k - 1].count++] = idx[j];
    }
    free(idx);
    *out = c;
    return k;
}

static int same_state(const state_t *a, const state_t *b) {
    return a->mem_free == b->mem_free && a->comp_free == b->comp_free && a->used == b->used &&
           a->speed == b->speed && a->slots == b->slots && a->count == b->count &&
           a->served == b->served;
}

void tp__glpk_watch(void *t, tp__glpk_watch_t *w) {
    glp_tree *tree = t;
    if (glp_ios_reason(tree) != GLP_ISELECT) return;
    int active, live, total, best = glp_ios_best_node(tree);
    glp_ios_tree_size(tree, &active, &live, &total);
    w->nodes = (uint64_t)total;
    if (best > 0) {
        w->bound = glp_ios_node_bound(tree, best);
        w->has_bound = 1;
    }
    if (w->node_limit && w->nodes >= w->node_limit) {
        w->node_limit_hit = 1;
        glp_ios_terminate(tree);
    }
}

/* GLPK's callback: the subproblem count, the node limit, and the best bound
 * of the open subproblems (what the answer is proved within). */
static void watch_cb(glp_tree *tree, void *info) {
    tp__glpk_watch(tree, info);
}

int tp__place_patterns(const tp_cluster_t *c, tp_usage_t *u, const tp_demand_t *trials, size_t n,
                       tp_assign_t *out, const tp_place_effort_t *effort,
                       tp_place_mip_info_t *info) {
    for (size_t i = 0; i < n; i++)
        if (trials[i].gpus != 1) return 0;
    size_t G = u->ngpus;
    cls_t *cls;
    size_t ncls = classes_of(trials, n, &cls);
    /* GPU states and each open GPU's state */
    state_t *st = tp__xcalloc(G ? G : 1, sizeof *st);
    size_t nst = 0, *state_of = tp__xmalloc((G ? G : 1) * sizeof *state_of);
    size_t *node_of = tp__xmalloc((G ? G : 1) * sizeof *node_of);
    for (size_t nd = 0; nd < c->nnodes; nd++)
        for (size_t g = 0; g < c->nodes[nd].ngpus; g++) {
            size_t gi = u->gpu_base[nd] + g;
            node_of[gi] = nd;
            state_of[gi] = SIZE_MAX;
            if (!tp__place_gpu_open(c, u, nd, g)) continue;
            int lim = c->limits.sharing ? c->limits.max_per_gpu : 1;
            state_t s = {.mem_free = tp__place_mem_free(c, u, nd, g),
                         .comp_free = tp__place_comp_free(c, u, nd, g),
                         .used = u->compute_used[gi],
                         .count = u->count[gi],
                         .nd = nd,
                         .served = c->nodes[nd].served,
                         .speed = c->nodes[nd].gpus[g].speed > 0 ? c->nodes[nd].gpus[g].speed : 1.0,
                         .slots = lim > 0 ? lim - u->count[gi] : INT_MAX};
            size_t k = 0;
            while (k < nst && !same_state(&st[k], &s))
                k++;
            if (k == nst) st[nst++] = s;
            state_of[gi] = k;
        }
    patterns_t P = {0};
    size_t *cnt = tp__xcalloc(ncls ? ncls : 1, sizeof *cnt);
    for (size_t k = 0; k < nst && !P.overflow; k++) {
        st[k].first = P.n;
        walk_t w = {cls, ncls, &st[k], c, cnt, &P};
        enumerate(&w, 0, 0, 0.0, 0, 0);
        st[k].npat = P.n - st[k].first;
        for (size_t p = st[k].first; p < P.n; p++)
            if (P.cpus[p] > st[k].max_cpus) st[k].max_cpus = P.cpus[p];
    }
    free(cnt);
    int applies = !P.overflow;

    /* nodes that can run out of cores; groups */
    unsigned char *tight = tp__xcalloc(c->nnodes ? c->nnodes : 1, 1);
    int any_tight = 0;
    for (size_t nd = 0; nd < c->nnodes && applies; nd++) {
        long long want = 0;
        for (size_t g = 0; g < c->nodes[nd].ngpus; g++) {
            size_t gi = u->gpu_base[nd] + g;
            if (state_of[gi] != SIZE_MAX) want += st[state_of[gi]].max_cpus;
        }
        tight[nd] = want > c->nodes[nd].cpus - u->cpus_used[nd];
        any_tight |= tight[nd];
    }
    /* group of each GPU: its state, or (node, state) when some node is tight */
    size_t *group_of = tp__xmalloc((G ? G : 1) * sizeof *group_of);
    size_t *gstate = tp__xmalloc((G ? G : 1) * sizeof *gstate);
    size_t *gnode = tp__xmalloc((G ? G : 1) * sizeof *gnode);
    size_t *gsize = tp__xcalloc(G ? G : 1, sizeof *gsize), ngr = 0, ncols = 0;
    for (size_t gi = 0; gi < G && applies; gi++) {
        group_of[gi] = SIZE_MAX;
        if (state_of[gi] == SIZE_MAX) continue;
        size_t nd = any_tight ? node_of[gi] : 0, h = 0;
        while (h < ngr && !(gstate[h] == state_of[gi] && gnode[h] == nd))
            h++;
        if (h == ngr) {
            gstate[ngr] = state_of[gi];
            gnode[ngr++] = nd;
            ncols += st[state_of[gi]].npat;
        }
        gsize[h]++;
        group_of[gi] = h;
    }
    if (ncols > PATTERNS_MAX) applies = 0;

    int done = 0;
    if (applies) {
        glp_prob *M = glp_create_prob();
        glp_set_obj_dir(M, GLP_MAX);
        int crow = ncls ? glp_add_rows(M, (int)ncls) : 0;
        for (size_t k = 0; k < ncls; k++)
            glp_set_row_bnds(M, crow + (int)k, GLP_UP, 0.0, (double)cls[k].count);
        int grow = ngr ? glp_add_rows(M, (int)ngr) : 0;
        for (size_t h = 0; h < ngr; h++)
            glp_set_row_bnds(M, grow + (int)h, GLP_UP, 0.0, (double)gsize[h]);
        int *nrow = tp__xcalloc(c->nnodes ? c->nnodes : 1, sizeof *nrow);
        for (size_t nd = 0; nd < c->nnodes; nd++)
            if (tight[nd] && any_tight) {
                nrow[nd] = glp_add_rows(M, 1);
                glp_set_row_bnds(M, nrow[nd], GLP_UP, 0.0,
                                 (double)(c->nodes[nd].cpus - u->cpus_used[nd]));
            }
        size_t *col_h = tp__xmalloc((ncols + 1) * sizeof *col_h);
        size_t *col_p = tp__xmalloc((ncols + 1) * sizeof *col_p);
        if (ncols) glp_add_cols(M, (int)ncols);
        int *ind = tp__xmalloc((ncls + 3) * sizeof *ind);
        double *val = tp__xmalloc((ncls + 3) * sizeof *val);
        int j = 0;
        for (size_t h = 0; h < ngr; h++) {
            const state_t *s = &st[gstate[h]];
            for (size_t p = s->first; p < s->first + s->npat; p++) {
                j++;
                col_h[j] = h;
                col_p[j] = p;
                glp_set_col_kind(M, j, GLP_IV);
                glp_set_col_bnds(M, j, GLP_DB, 0.0, (double)gsize[h]);
                glp_set_obj_coef(M, j, P.value[p]);
                int len = 0;
                for (size_t q = 0; q < P.nitems[p]; q++) {
                    ind[++len] = crow + (int)P.item_cls[P.first[p] + q];
                    val[len] = (double)P.item_cnt[P.first[p] + q];
                }
                ind[++len] = grow + (int)h;
                val[len] = 1.0;
                if (any_tight && nrow[gnode[h]] && P.cpus[p]) {
                    ind[++len] = nrow[gnode[h]];
                    val[len] = P.cpus[p];
                }
                glp_set_mat_col(M, j, len, ind, val);
            }
        }
        free(ind);
        free(val);
        free(nrow);
        tp__glpk_watch_t w = {.node_limit = effort ? effort->node_limit : 0};
        glp_iocp parm;
        glp_init_iocp(&parm);
        parm.msg_lev = GLP_MSG_OFF;
        /* the LP relaxation first (GLPK's presolve on tens of thousands of
         * columns costs more than it saves), then branch and cut from it */
        glp_smcp lp;
        glp_init_smcp(&lp);
        lp.msg_lev = GLP_MSG_OFF;
        lp.tm_lim = tp__glpk_time_limit_ms(effort);
        int lp_rc = ncols ? glp_simplex(M, &lp) : 0;
        parm.presolve = GLP_OFF;
        parm.cb_func = watch_cb;
        parm.cb_info = &w;
        parm.tm_lim = tp__glpk_time_limit_ms(effort);
        int rc = !ncols                                       ? 0
                 : lp_rc == 0 && glp_get_status(M) == GLP_OPT ? glp_intopt(M, &parm)
                                                              : GLP_EFAIL;
        int status = ncols ? glp_mip_status(M) : GLP_OPT;
        memset(info, 0, sizeof *info);
        info->model_patterns = 1;
        info->columns = ncols;
        info->nodes = w.nodes;
        info->time_limit_hit = rc == GLP_ETMLIM;
        info->node_limit_hit = rc == GLP_ESTOP && w.node_limit_hit;
        info->proved_optimal = rc == 0 && status == GLP_OPT;
        if (status == GLP_OPT || status == GLP_FEAS) {
            done = 1;
            info->objective = ncols ? glp_mip_obj_val(M) : 0;
            info->bound = info->proved_optimal                       ? info->objective
                          : w.has_bound && w.bound > info->objective ? w.bound
                                                                     : info->objective;
            if (!info->proved_optimal && !w.has_bound) info->bound = -1; /* unknown */
            /* the GPUs of each group take its patterns, trials of each class in turn */
            size_t *next_gpu = tp__xcalloc(ngr ? ngr : 1, sizeof *next_gpu);
            size_t *taken = tp__xcalloc(ncls ? ncls : 1, sizeof *taken);
            for (int col = 1; col <= (int)ncols; col++) {
                long copies = lround(glp_mip_col_val(M, col));
                size_t h = col_h[col], p = col_p[col];
                for (long r = 0; r < copies; r++) {
                    size_t gi = next_gpu[h];
                    while (gi < G && group_of[gi] != h)
                        gi++;
                    if (gi >= G) break;
                    next_gpu[h] = gi + 1;
                    size_t nd = node_of[gi];
                    tp_assign_t a = {
                        .placed = 1, .node = nd, .ngpus = 1, .gpu = {gi - u->gpu_base[nd]}};
                    for (size_t q = 0; q < P.nitems[p]; q++) {
                        size_t k = P.item_cls[P.first[p] + q];
                        for (size_t m = 0; m < P.item_cnt[P.first[p] + q]; m++) {
                            if (taken[k] >= cls[k].count) break;
                            size_t t = cls[k].trials[taken[k]];
                            if (!tp__fits(c, u, nd, a.gpu[0], &trials[t])) continue;
                            taken[k]++;
                            out[t] = a;
                            tp__place_commit(c, u, &trials[t], &a);
                        }
                    }
                }
            }
            free(next_gpu);
            free(taken);
        }
        free(col_h);
        free(col_p);
        glp_delete_prob(M);
    }
    for (size_t k = 0; k < ncls; k++)
        free(cls[k].trials);
    free(cls);
    free(st);
    free(state_of);
    free(node_of);
    free(tight);
    free(group_of);
    free(gstate);
    free(gnode);
    free(gsize);
    free(P.first);
    free(P.nitems);
    free(P.value);
    free(P.cpus);
    free(P.item_cls);
    free(P.item_cnt);
    return done;
}
