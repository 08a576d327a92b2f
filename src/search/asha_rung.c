/* asha_rung: ASHA's rungs kept in rank order as results arrive (asha.h).
 *
 * A rung is a treap over its ok results, ordered best first (by the metric's
 * mode, ties to the older trial: a total order, trials being unique in a
 * rung), a max-heap by a hash of the trial. Each node counts the results in
 * its subtree and those of them whose trial can go on from this rung (ended
 * ok here, not running, not failed): the best such result is found by one
 * descent that steps left while the left subtree holds one, and its rank is
 * the sizes stepped over. The trials' fields decide who can go on; their
 * writers tell the tree through tp__asha_sync, which moves one mark.
 *
 * Before this, the promotion check scanned a rung twice per call (O(n_k)),
 * and the result scanned it for the trial's earlier value: a plan of 10^5
 * ASHA trials did not end within minutes. Now a result, a promotion check
 * and a change of a trial's state are O(log n_k) expected. */
#include <stdlib.h>
#include <string.h>

#include "search/asha.h"

/* Best first; equal values: the older trial first. */
static int better_first(const tp_asha_result_t *a, const tp_asha_result_t *b, int maximize) {
    if (a->value != b->value)
        return maximize ? (a->value > b->value ? -1 : 1) : (a->value < b->value ? -1 : 1);
    return (a->trial > b->trial) - (a->trial < b->trial);
}

/* A trial's heap priority: splitmix64's finalizer, pure in the trial. */
static uint32_t prio_of(int64_t t) {
    uint64_t z = (uint64_t)t + 0x9e3779b97f4a7c15ULL;
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return (uint32_t)((z ^ (z >> 31)) >> 32);
}

static void pull(tp_asha_node_t *N, uint32_t x) {
    const tp_asha_node_t *l = &N[N[x].kid[0]], *r = &N[N[x].kid[1]];
    N[x].size = 1 + l->size + r->size;
    N[x].waiting = N[x].waits + l->waiting + r->waiting;
}

/* Tree t split into *a (the results ranking above key) and *b (the rest).
 * Recursion as deep as the tree: O(log n) expected. */
static void split(tp_asha_node_t *N, uint32_t t, const tp_asha_result_t *key, int maximize,
                  uint32_t *a, uint32_t *b) {
    if (!t) {
        *a = *b = 0;
        return;
    }
    if (better_first(&N[t].r, key, maximize) < 0) {
        split(N, N[t].kid[1], key, maximize, &N[t].kid[1], b);
        *a = t;
    } else {
        split(N, N[t].kid[0], key, maximize, a, &N[t].kid[0]);
        *b = t;
    }
    pull(N, t);
}

/* Trees a and b, every result of a ranking above every one of b, as one. */
static uint32_t merge(tp_asha_node_t *N, uint32_t a, uint32_t b) {
    if (!a || !b) return a ? a : b;
    if (N[a].prio > N[b].prio) {
        N[a].kid[1] = merge(N, N[a].kid[1], b);
        pull(N, a);
        return a;
    }
    N[b].kid[0] = merge(N, a, N[b].kid[0]);
    pull(N, b);
    return b;
}

/* Tree t without its best result. */
static uint32_t drop_first(tp_asha_node_t *N, uint32_t t) {
    if (!N[t].kid[0]) return N[t].kid[1];
    N[t].kid[0] = drop_first(N, N[t].kid[0]);
    pull(N, t);
    return t;
}

/* Node x (in the tree) marked as able to go on, or not: the counts on its
 * path follow. */
static void set_waits(tp_asha_rung_t *r, uint32_t x, uint32_t waits, int maximize) {
    tp_asha_node_t *N = r->node;
    if (N[x].waits == waits) return;
    uint32_t d = waits ? 1u : (uint32_t)-1; /* unsigned: -1 wraps as it should */
    for (uint32_t t = r->root; t != x; t = N[t].kid[better_first(&N[x].r, &N[t].r, maximize) > 0])
        N[t].waiting += d;
    N[x].waiting += d;
    N[x].waits = waits;
}

static uint32_t node_of(const tp_asha_rung_t *r, int64_t t) {
    return t >= 0 && (size_t)t < r->nof ? r->of[t] : 0;
}

void tp__asha_sync(tp_asha_t *st, int64_t t) {
    tp_asha_trial_t *tr = &st->trials[t];
    int want = 0;
    if (!tr->running && !tr->failed && tr->rung >= 0 && (size_t)tr->rung < st->nrungs &&
        node_of(&st->rungs[tr->rung], t))
        want = tr->rung + 1;
    if (want == tr->waits_at) return;
    if (tr->waits_at) {
        tp_asha_rung_t *r = &st->rungs[tr->waits_at - 1];
        set_waits(r, node_of(r, t), 0, st->maximize);
    }
    if (want) {
        tp_asha_rung_t *r = &st->rungs[want - 1];
        set_waits(r, node_of(r, t), 1, st->maximize);
    }
    tr->waits_at = want;
}

void tp__asha_out(tp_asha_t *st, int64_t t) {
    st->trials[t].failed = 1;
    tp__asha_sync(st, t);
}

void tp__asha_record(tp_asha_t *st, int64_t t, size_t k, double value) {
    tp_asha_rung_t *r = &st->rungs[k];
    r->of = tp__xgrow(r->of, &r->nof, (size_t)t + 1, sizeof *r->of, 64);
    uint32_t x = r->of[t];
    if (x) { /* its earlier value leaves: unmarked, then out of the tree */
        tp_asha_trial_t *tr = &st->trials[t];
        if (tr->waits_at == (int)k + 1) {
            set_waits(r, x, 0, st->maximize);
            tr->waits_at = 0;
        }
        uint32_t a, b;
        split(r->node, r->root, &r->node[x].r, st->maximize, &a, &b);
        r->root = merge(r->node, a, drop_first(r->node, b));
    } else {
        if (r->n + 2 > r->cap) {
            r->node = tp__xgrow(r->node, &r->cap, r->n + 2, sizeof *r->node, 64);
            memset(&r->node[0], 0, sizeof *r->node); /* the empty tree */
        }
        x = (uint32_t)++r->n;
        r->of[t] = x;
    }
    tp_asha_node_t *N = r->node;
    N[x] = (tp_asha_node_t){.r = {.trial = t, .value = value}, .size = 1, .prio = prio_of(t)};
    uint32_t a, b;
    split(N, r->root, &N[x].r, st->maximize, &a, &b);
    r->root = merge(N, merge(N, a, x), b);
    tp__asha_sync(st, t);
}

const tp_asha_result_t *tp__asha_best_waiting(const tp_asha_t *st, size_t k, size_t *above) {
    const tp_asha_rung_t *r = &st->rungs[k];
    const tp_asha_node_t *N = r->node;
    if (!r->root || !N[r->root].waiting) return NULL;
    size_t acc = 0;
    uint32_t t = r->root;
    for (;;) {
        uint32_t l = N[t].kid[0];
        if (N[l].waiting) {
            t = l;
        } else if (N[t].waits) {
            *above = acc + N[l].size;
            return &N[t].r;
        } else {
            acc += N[l].size + 1;
            t = N[t].kid[1];
        }
    }
}

static void in_order(const tp_asha_node_t *N, uint32_t t, tp_asha_result_t *out, size_t *n) {
    while (t) {
        in_order(N, N[t].kid[0], out, n);
        out[(*n)++] = N[t].r;
        t = N[t].kid[1];
    }
}

tp_asha_result_t *tp__asha_sorted(const tp_asha_t *st, size_t k, size_t *n) {
    const tp_asha_rung_t *r = &st->rungs[k];
    tp_asha_result_t *sorted = tp__xmalloc((r->n ? r->n : 1) * sizeof *sorted);
    *n = 0;
    in_order(r->node, r->root, sorted, n);
    return sorted;
}

/* The subtree t's rules, its results counted into *seen; its in-order
 * predecessor's result in *prev (NULL: none yet). */
static int valid_tree(const tp_asha_t *st, const tp_asha_rung_t *r, size_t k, uint32_t t,
                      const tp_asha_result_t **prev, size_t *seen) {
    if (!t) return 1;
    const tp_asha_node_t *N = r->node, *x = &N[t];
    if (t > r->n || ++*seen > r->n) return 0;
    for (int i = 0; i < 2; i++)
        if (x->kid[i] && N[x->kid[i]].prio > x->prio) return 0;
    if (!valid_tree(st, r, k, x->kid[0], prev, seen)) return 0;
    if (*prev && better_first(*prev, &x->r, st->maximize) >= 0) return 0;
    *prev = &x->r;
    const tp_asha_trial_t *tr = &st->trials[x->r.trial];
    uint32_t can = tr->rung == (int)k && !tr->running && !tr->failed;
    if (node_of(r, x->r.trial) != t || x->waits != can ||
        (uint32_t)(tr->waits_at == (int)k + 1) != can)
        return 0;
    if (!valid_tree(st, r, k, x->kid[1], prev, seen)) return 0;
    const tp_asha_node_t *l = &N[x->kid[0]], *g = &N[x->kid[1]];
    return x->size == 1 + l->size + g->size && x->waiting == x->waits + l->waiting + g->waiting;
}

int tp__asha_rung_valid(const tp_asha_t *st, size_t k) {
    const tp_asha_rung_t *r = &st->rungs[k];
    const tp_asha_result_t *prev = NULL;
    size_t seen = 0;
    return valid_tree(st, r, k, r->root, &prev, &seen) && seen == r->n &&
           (!r->root || r->node[r->root].size == r->n);
}

void tp__asha_rung_free(tp_asha_rung_t *r) {
    free(r->node);
    free(r->of);
    memset(r, 0, sizeof *r);
}
