/* sim_nodes: nodes failing, taken for lost, queued and joining (see
 * sim_nodes.h). */
#include "sim/sim_nodes.h"

#include <math.h>
#include <stdlib.h>

/* An exponential draw of mean m (0: none, INFINITY: never). */
static double draw_exp(tp_rng_t *r, double m) {
    if (m <= 0) return 0;
    if (isinf(m)) return INFINITY;
    return -m * log(1.0 - tp__rng_uniform(r));
}

static void find_next(tp_sim_nodes_t *s) {
    s->next = s->n;
    for (size_t k = 0; k < s->n; k++)
        if (isfinite(s->at[k]) && (s->next == s->n || s->at[k] < s->at[s->next])) s->next = k;
}

/* Node k joins (or is there) at time t: held from then, failing after a draw. */
static void up(tp_sim_nodes_t *s, size_t k, double t) {
    s->state[k] = TP_SIM_NODE_UP;
    s->since[k] = t;
    s->at[k] = s->fail_per_s > 0 ? t + draw_exp(&s->rng, 1.0 / s->fail_per_s) : INFINITY;
}

void tp__sim_nodes_init(tp_sim_nodes_t *s, size_t n, double fail_per_day, double queue_wait_s,
                        uint64_t seed) {
    *s = (tp_sim_nodes_t){.n = n,
                          .fail_per_s = fail_per_day > 0 ? fail_per_day / 86400.0 : 0,
                          .queue_wait_s = queue_wait_s > 0 ? queue_wait_s : 0};
    s->state = tp__xcalloc(n ? n : 1, 1);
    s->at = tp__xcalloc(n ? n : 1, sizeof *s->at);
    s->since = tp__xcalloc(n ? n : 1, sizeof *s->since);
    s->held_s = tp__xcalloc(n ? n : 1, sizeof *s->held_s);
    tp__rng_seed(&s->rng, seed, 0x6e6f646573ULL); /* "nodes" */
    for (size_t k = 0; k < n; k++) {
        if (s->queue_wait_s > 0) { /* the allocation asked for at the start */
            s->state[k] = TP_SIM_NODE_QUEUED;
            s->at[k] = draw_exp(&s->rng, s->queue_wait_s) + TP_SIM_NODE_START_S;
            s->coming++;
        } else {
            up(s, k, 0);
        }
    }
    find_next(s);
}

void tp__sim_nodes_free(tp_sim_nodes_t *s) {
    free(s->state);
    free(s->at);
    free(s->since);
    free(s->held_s);
    *s = (tp_sim_nodes_t){0};
}

double tp__sim_nodes_next_at(const tp_sim_nodes_t *s) {
    return s->next < s->n ? s->at[s->next] : INFINITY;
}

tp_sim_node_state_t tp__sim_nodes_step(tp_sim_nodes_t *s, size_t k, double now) {
    switch ((tp_sim_node_state_t)s->state[k]) {
    case TP_SIM_NODE_UP: /* it failed; its agent falls silent */
        s->state[k] = TP_SIM_NODE_DEAD;
        s->at[k] = now + TP_SIM_LOST_AFTER_S;
        s->failures++;
        s->coming++;
        break;
    case TP_SIM_NODE_DEAD: /* taken for lost: given back, a replacement asked for */
        s->held_s[k] += now - s->since[k];
        s->state[k] = TP_SIM_NODE_QUEUED;
        s->at[k] = now + draw_exp(&s->rng, s->queue_wait_s) + TP_SIM_NODE_START_S;
        break;
    case TP_SIM_NODE_QUEUED:
        up(s, k, now);
        s->coming--;
        break;
    }
    find_next(s);
    return (tp_sim_node_state_t)s->state[k];
}

double tp__sim_nodes_held(const tp_sim_nodes_t *s, size_t k, double end) {
    double h = s->held_s[k];
    if (s->state[k] != TP_SIM_NODE_QUEUED && end > s->since[k]) h += end - s->since[k];
    return h;
}
