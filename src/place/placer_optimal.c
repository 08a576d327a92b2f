/* optimal: an exact placement through GLPK's branch and cut (glp_intopt,
 * presolve on, a time limit and/or a node limit from the caller; no clock
 * read here: GLPK keeps its own time limit, and the node limit makes the
 * answer the same on every machine).
 *
 * Model. Single-GPU trials only: a binary x[t][g] for each trial t and each
 * GPU g it fits on alone (given current usage); a continuous
 * 0 <= y[g] <= 1 - min(1, used[g]) with y[g] <= sum_t compute_t x[t][g], so
 * that the objective max sum_g y[g] is exactly the occupancy numerator of
 * the new placements (each GPU's share capped at 1.0, which matters when
 * oversubscribe > 0). Rows: each trial at most once; per GPU memory
 * (total - reserve - used), compute (capacity - used), trial count (when
 * limited); per node CPUs. Trials wanting several GPUs, or none, are not in
 * the model: they are placed after it by wfd on what remains (rare in a
 * tuning round; keeps the model small).
 *
 * wfd's answer is handed to the solver as its first incumbent (when the
 * presolved problem still has our columns), and whichever of the solver's
 * best and wfd's is better is returned, so `optimal` is never worse than
 * wfd even when the time limit cuts the search short. */
#include <errno.h>
#include <glpk.h>
#include <limits.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "place/place_internal.h"

typedef struct mip {
    const tp_cluster_t *c;
    const tp_usage_t *u;
    const tp_demand_t *trials;
    size_t ncols;           /* x columns, then y columns */
    size_t nx;              /* x columns */
    size_t *col_t;          /* per x column (1-based): trial */
    size_t *col_g;          /* per x column: global GPU */
    int *y_col;             /* per global GPU: its y column, 0 if none */
    double *heur;           /* wfd's solution as column values (1-based), NULL if none */
    int heur_given;         /* handed to the solver already */
    tp__glpk_watch_t watch; /* subproblems, bound, node limit */
} mip_t;

/* GLPK's callback: counts subproblems, stops the search at the node limit
 * (before it selects the next subproblem), and hands over wfd's answer as
 * the first incumbent. O(1) per call. */
static void callback(glp_tree *tree, void *info) {
    mip_t *m = info;
    int reason = glp_ios_reason(tree);
    tp__glpk_watch(tree, &m->watch);
    if (reason != GLP_IHEUR || m->heur_given || !m->heur) return;
    m->heur_given = 1;
    /* with presolve the tree's problem may be a transformed one */
    if ((size_t)glp_get_num_cols(glp_ios_get_prob(tree)) != m->ncols) return;
    glp_ios_heur_sol(tree, m->heur);
}

/* Occupancy numerator of the single-GPU trials placed in a (usage copy). */
static double placed_share(const tp_cluster_t *c, const tp_usage_t *u) {
    return tp__occupancy(c, u) * (double)u->ngpus;
}

/* A new usage for c holding src's figures. Caller frees with tp__usage_free. */
static void usage_copy(tp_usage_t *dst, const tp_usage_t *src, const tp_cluster_t *c) {
    tp__usage_init(dst, c);
    tp__usage_copy(dst, src, c);
}

/* Place trials[i] for i in idx[0..k) with vpack on u; out indexed by trial. */
static void floor_subset(const tp_cluster_t *c, tp_usage_t *u, const tp_demand_t *trials,
                         const size_t *idx, size_t k, tp_assign_t *out) {
    tp_demand_t *sub = tp__xmalloc((k ? k : 1) * sizeof *sub);
    tp_assign_t *sa = tp__xcalloc(k ? k : 1, sizeof *sa);
    for (size_t j = 0; j < k; j++)
        sub[j] = trials[idx[j]];
    tp__placer_vpack.place(c, u, sub, k, sa, NULL, NULL);
    for (size_t j = 0; j < k; j++)
        out[idx[j]] = sa[j];
    free(sub);
    free(sa);
}

int tp__glpk_time_limit_ms(const tp_place_effort_t *e) {
    double s = e && e->time_limit_s > 0 ? e->time_limit_s : e && e->node_limit ? 0 : 10.0;
    if (s <= 0 || s * 1000.0 >= (double)INT_MAX) return INT_MAX;
    return s * 1000.0 < 1 ? 1 : (int)(s * 1000.0);
}

/* The pattern model on a copy of u, checked against vpack's answer; the
 * better one committed to u and out. 0 when the model does not apply. */
static int place_by_patterns(const tp_cluster_t *c, tp_usage_t *u, const tp_demand_t *trials,
                             size_t n, tp_assign_t *out, const tp_place_effort_t *effort,
                             tp_place_mip_info_t *inf) {
    tp_usage_t up, uv;
    usage_copy(&up, u, c);
    tp_assign_t *pout = tp__xcalloc(n ? n : 1, sizeof *pout);
    int done = tp__place_patterns(c, &up, trials, n, pout, effort, inf);
    if (done) {
        usage_copy(&uv, u, c);
        tp_assign_t *vout = tp__xcalloc(n ? n : 1, sizeof *vout);
        tp__placer_vpack.place(c, &uv, trials, n, vout, NULL, NULL);
        const tp_assign_t *chosen = pout;
        if (placed_share(c, &uv) > placed_share(c, &up) + 1e-12) {
            chosen = vout;
            inf->used_vpack = 1;
            inf->proved_optimal = 0;
        }
        for (size_t t = 0; t < n; t++)
            if (chosen[t].placed) {
                out[t] = chosen[t];
                tp__place_commit(c, u, &trials[t], &out[t]);
            }
        free(vout);
        tp__usage_free(&uv);
    }
    free(pout);
    tp__usage_free(&up);
    return done;
}

/* See place.h. Builds the model (O(trials x GPUs) columns), runs wfd for the
 * incumbent and the floor, then GLPK within effort; the answer is checked
 * again with tp__fits before it is used. */
int tp__place_optimal(const tp_cluster_t *c, tp_usage_t *u, const tp_demand_t *trials, size_t n,
                      tp_assign_t *out, const tp_place_effort_t *effort, tp_place_mip_info_t *info,
                      tp_error_t *err) {
    (void)err;
    tp_place_mip_info_t inf = {0};
    for (size_t i = 0; i < n; i++)
        memset(&out[i], 0, sizeof out[i]);
    if (place_by_patterns(c, u, trials, n, out, effort, &inf)) {
        if (info) *info = inf;
        return 0;
    }
    size_t G = u->ngpus;
    tp_usage_t u0; /* the usage before the round, for the comparison with vpack */
    usage_copy(&u0, u, c);
    size_t *gnode = tp__xmalloc((G ? G : 1) * sizeof *gnode);
    for (size_t nd = 0; nd < c->nnodes; nd++)
        for (size_t g = 0; g < c->nodes[nd].ngpus; g++)
            gnode[u->gpu_base[nd] + g] = nd;

    /* columns: x[t][g] for single-GPU trials that fit alone */
    mip_t m = {
        .c = c, .u = u, .trials = trials, .watch = {.node_limit = effort ? effort->node_limit : 0}};
    size_t capx = 64;
    m.col_t = tp__xmalloc((capx + 1) * sizeof *m.col_t);
    m.col_g = tp__xmalloc((capx + 1) * sizeof *m.col_g);
    for (size_t t = 0; t < n; t++) {
        if (trials[t].gpus != 1) continue;
        for (size_t gi = 0; gi < G; gi++) {
            size_t nd = gnode[gi];
            if (!tp__fits(c, u, nd, gi - u->gpu_base[nd], &trials[t])) continue;
            if (m.nx + 1 >= capx) {
                capx *= 2;
                m.col_t = tp__xrealloc(m.col_t, (capx + 1) * sizeof *m.col_t);
                m.col_g = tp__xrealloc(m.col_g, (capx + 1) * sizeof *m.col_g);
            }
            m.nx++;
            m.col_t[m.nx] = t;
            m.col_g[m.nx] = gi;
        }
    }
    m.y_col = tp__xcalloc(G ? G : 1, sizeof *m.y_col);
    size_t ny = 0;
    for (size_t j = 1; j <= m.nx; j++)
        if (!m.y_col[m.col_g[j]]) m.y_col[m.col_g[j]] = (int)(m.nx + ++ny);
    m.ncols = m.nx + ny;

    /* wfd's answer on the single-GPU trials: the first incumbent and the floor */
    size_t *single = tp__xmalloc((n ? n : 1) * sizeof *single), nsingle = 0;
    for (size_t t = 0; t < n; t++)
        if (trials[t].gpus == 1) single[nsingle++] = t;
    tp_assign_t *wfd_out = tp__xcalloc(n ? n : 1, sizeof *wfd_out);
    tp_usage_t uw;
    usage_copy(&uw, u, c);
    floor_subset(c, &uw, trials, single, nsingle, wfd_out);
    double wfd_share = placed_share(c, &uw);
    tp__usage_free(&uw);

    int mip_ok = 0;
    double *xval = NULL;
    if (m.nx > 0) {
        glp_prob *P = glp_create_prob();
        glp_set_obj_dir(P, GLP_MAX);
        glp_add_cols(P, (int)m.ncols);
        for (size_t j = 1; j <= m.nx; j++)
            glp_set_col_kind(P, (int)j, GLP_BV);
        for (size_t gi = 0; gi < G; gi++) {
            if (!m.y_col[gi]) continue;
            double used = u->compute_used[gi] < 1.0 ? u->compute_used[gi] : 1.0;
            double ub = used < 1.0 ? 1.0 - used : 0.0;
            if (ub > 0)
                glp_set_col_bnds(P, m.y_col[gi], GLP_DB, 0.0, ub);
            else
                glp_set_col_bnds(P, m.y_col[gi], GLP_FX, 0.0, 0.0);
            glp_set_obj_coef(P, m.y_col[gi], 1.0);
        }
        /* rows: trials, then per GPU (mem, compute, count, y), then nodes */
        int *ia = NULL, *ja = NULL;
        double *ar = NULL;
        size_t nz = 0, capnz = 0;
#define ADD(row, col, val)                                                                         \
    do {                                                                                           \
        if (nz + 1 >= capnz) {                                                                     \
            capnz = capnz ? 2 * capnz : 1024;                                                      \
            ia = tp__xrealloc(ia, (capnz + 1) * sizeof *ia);                                       \
            ja = tp__xrealloc(ja, (capnz + 1) * sizeof *ja);                                       \
            ar = tp__xrealloc(ar, (capnz + 1) * sizeof *ar);                                       \
        }                                                                                          \
        nz++;                                                                                      \
        ia[nz] = (row);                                                                            \
        ja[nz] = (col);                                                                            \
        ar[nz] = (val);                                                                            \
    } while (0)
        int *trow = tp__xcalloc(n ? n : 1, sizeof *trow);
        int *grow = tp__xcalloc(G ? G : 1, sizeof *grow); /* first of 4 rows per GPU */
        int *nrow = tp__xcalloc(c->nnodes ? c->nnodes : 1, sizeof *nrow);
        for (size_t j = 1; j <= m.nx; j++) {
            size_t t = m.col_t[j], gi = m.col_g[j], nd = gnode[gi];
            if (!trow[t]) {
                trow[t] = glp_add_rows(P, 1);
                glp_set_row_bnds(P, trow[t], GLP_UP, 0.0, 1.0);
            }
            if (!grow[gi]) {
                grow[gi] = glp_add_rows(P, 4);
                size_t g = gi - u->gpu_base[nd];
                glp_set_row_bnds(P, grow[gi], GLP_UP, 0.0, (double)tp__place_mem_free(c, u, nd, g));
                /* the room for one more: on a served GPU more trials may hold
                 * more (C_k), so this bound is safe for any number, if tight */
                glp_set_row_bnds(P, grow[gi] + 1, GLP_UP, 0.0,
                                 tp__place_comp_free(c, u, nd, g) + TP_PLACE_EPS);
                int room = c->limits.sharing ? c->limits.max_per_gpu : 1;
                if (room > 0) {
                    room -= u->count[gi];
                    glp_set_row_bnds(P, grow[gi] + 2, GLP_UP, 0.0, room > 0 ? room : 0);
                } else {
                    glp_set_row_bnds(P, grow[gi] + 2, GLP_FR, 0.0, 0.0);
                }
                glp_set_row_bnds(P, grow[gi] + 3, GLP_UP, 0.0, 0.0); /* y - sum c x <= 0 */
                ADD(grow[gi] + 3, m.y_col[gi], 1.0);
            }
            if (!nrow[nd]) {
                nrow[nd] = glp_add_rows(P, 1);
                glp_set_row_bnds(P, nrow[nd], GLP_UP, 0.0,
                                 (double)(c->nodes[nd].cpus - u->cpus_used[nd]));
            }
            const tp_demand_t *d = &trials[t];
            ADD(trow[t], (int)j, 1.0);
            ADD(grow[gi], (int)j, (double)d->memory_mib);
            double share = tp__place_share(c, nd, gi - u->gpu_base[nd], d->compute);
            ADD(grow[gi] + 1, (int)j, share);
            ADD(grow[gi] + 2, (int)j, 1.0);
            ADD(grow[gi] + 3, (int)j, -share);
            if (d->cpus) ADD(nrow[nd], (int)j, (double)d->cpus);
        }
#undef ADD
        glp_load_matrix(P, (int)nz, ia, ja, ar);
        free(ia);
        free(ja);
        free(ar);
        free(trow);
        free(grow);
        free(nrow);

        /* the wfd incumbent as column values */
        m.heur = tp__xcalloc(m.ncols + 1, sizeof *m.heur);
        double *ysum = tp__xcalloc(G ? G : 1, sizeof *ysum);
        for (size_t j = 1; j <= m.nx; j++) {
            const tp_assign_t *a = &wfd_out[m.col_t[j]];
            if (a->placed && u->gpu_base[a->node] + a->gpu[0] == m.col_g[j]) {
                m.heur[j] = 1.0;
                ysum[m.col_g[j]] +=
                    tp__place_share(c, a->node, a->gpu[0], trials[m.col_t[j]].compute);
            }
        }
        for (size_t gi = 0; gi < G; gi++)
            if (m.y_col[gi]) {
                double ub = glp_get_col_ub(P, m.y_col[gi]);
                m.heur[m.y_col[gi]] = ysum[gi] < ub ? ysum[gi] : ub;
            }
        free(ysum);

        glp_iocp parm;
        glp_init_iocp(&parm);
        parm.msg_lev = GLP_MSG_OFF;
        parm.presolve = GLP_ON;
        parm.cb_func = callback;
        parm.cb_info = &m;
        parm.tm_lim = tp__glpk_time_limit_ms(effort); /* the search only, not building it */
        int rc = glp_intopt(P, &parm);
        int st = glp_mip_status(P);
        /* a proof covers the round only when every trial was in the model */
        int all_in = 1;
        for (size_t t = 0; t < n; t++)
            all_in &= trials[t].gpus == 1 || trials[t].gpus == 0;
        inf.proved_optimal = rc == 0 && st == GLP_OPT && all_in;
        inf.time_limit_hit = rc == GLP_ETMLIM;
        inf.node_limit_hit = rc == GLP_ESTOP && m.watch.node_limit_hit;
        inf.nodes = m.watch.nodes;
        inf.columns = m.ncols;
        if (st == GLP_OPT || st == GLP_FEAS) {
            mip_ok = 1;
            inf.objective = glp_mip_obj_val(P);
            inf.bound = inf.proved_optimal              ? inf.objective
                        : !all_in || !m.watch.has_bound ? -1
                        : m.watch.bound > inf.objective ? m.watch.bound
                                                        : inf.objective;
            xval = tp__xcalloc(m.nx + 1, sizeof *xval);
            for (size_t j = 1; j <= m.nx; j++)
                xval[j] = glp_mip_col_val(P, (int)j);
        }
        glp_delete_prob(P);
    } else {
        inf.proved_optimal = 1; /* nothing fits anywhere: placing none is optimal */
        for (size_t t = 0; t < n; t++)
            inf.proved_optimal &= trials[t].gpus <= 1;
        mip_ok = 1;
    }

    /* the solver's placement, each checked again with tp__fits */
    tp_usage_t um;
    usage_copy(&um, u, c);
    tp_assign_t *mip_out = tp__xcalloc(n ? n : 1, sizeof *mip_out);
    if (mip_ok && xval) {
        for (size_t j = 1; j <= m.nx; j++) {
            if (xval[j] < 0.5) continue;
            size_t t = m.col_t[j], gi = m.col_g[j], nd = gnode[gi];
            if (mip_out[t].placed || !tp__fits(c, &um, nd, gi - u->gpu_base[nd], &trials[t]))
                continue;
            mip_out[t] = (tp_assign_t){.placed = 1, .node = nd, .ngpus = 1};
            mip_out[t].gpu[0] = gi - u->gpu_base[nd];
            tp__place_commit(c, &um, &trials[t], &mip_out[t]);
        }
    }
    double mip_share = placed_share(c, &um);
    tp__usage_free(&um);
    const tp_assign_t *chosen = mip_out;
    if (!mip_ok || mip_share + 1e-12 < wfd_share) {
        chosen = wfd_out;
        inf.used_vpack = 1;
        inf.proved_optimal = 0;
    }
    for (size_t t = 0; t < n; t++)
        if (chosen[t].placed) {
            out[t] = chosen[t];
            tp__place_commit(c, u, &trials[t], &out[t]);
        }
    /* the rest (multi-GPU, CPU-only, single-GPU left out) by vpack */
    size_t nrest = 0;
    for (size_t t = 0; t < n; t++)
        if (!out[t].placed) single[nrest++] = t;
    floor_subset(c, u, trials, single, nrest, out);
    /* never worse than vpack on the whole round (multi-GPU trials included) */
    tp_usage_t uv;
    usage_copy(&uv, &u0, c);
    tp_assign_t *vout = tp__xcalloc(n ? n : 1, sizeof *vout);
    tp__placer_vpack.place(c, &uv, trials, n, vout, NULL, NULL);
    if (placed_share(c, &uv) > placed_share(c, u) + 1e-12) {
        memcpy(out, vout, n * sizeof *out);
        tp__usage_copy(u, &uv, c);
        inf.used_vpack = 1;
        inf.proved_optimal = 0;
    }
    free(vout);
    tp__usage_free(&uv);
    tp__usage_free(&u0);

    free(xval);
    free(mip_out);
    free(wfd_out);
    free(single);
    free(m.heur);
    free(m.col_t);
    free(m.col_g);
    free(m.y_col);
    free(gnode);
    if (info) *info = inf;
    return 0;
}

static int place_optimal(const tp_cluster_t *c, tp_usage_t *u, const tp_demand_t *trials, size_t n,
                         tp_assign_t *out, const tp_place_effort_t *effort, tp_error_t *err) {
    return tp__place_optimal(c, u, trials, n, out, effort, NULL, err);
}

const tp_placer_ops_t tp__placer_optimal = {
    .name = "optimal",
    .summary = "exact MIP (GLPK) maximizing occupancy within --time-limit/--node-limit",
    .place = place_optimal,
};
