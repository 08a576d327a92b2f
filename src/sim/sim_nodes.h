/* sim_nodes: the nodes of a simulated cluster as a cluster-scale run sees
 * them (docs/simulator.md, "Cluster scale"): each node fails at a rate per
 * node-day, is taken for lost LOST_AFTER_S later (the run's heartbeat
 * silence, src/run/agents.c), and is replaced by a node that joins after a
 * queue wait (a self-allocated Slurm cluster growing again) and its agent's
 * start-up. With a queue wait every node of the cluster joins so at the start.
 *
 * Only the nodes' states and times live here; what happens to the trials of
 * a lost node (requeued, placed again by the placer) is sim.c's. Every time
 * is drawn from the simulation's own generator (seeded by the run's seed),
 * never from the clock: a run is a pure function of its inputs.
 *
 * Cost: a node event O(nodes) (the next event is found by a scan after each
 * one; node events are rare beside the trials'); the next event's time O(1). */
#ifndef TP_SIM_NODES_H
#define TP_SIM_NODES_H

#include <stddef.h>
#include <stdint.h>

#include "util/util.h"

/* An agent silent this long is taken for lost (src/run/agents.c, SILENCE_S). */
#define TP_SIM_LOST_AFTER_S 10.0
/* A joining node's agent: started through srun, its hello, one launch: the
 * most issue 11 measured (bench/remote_start.py, 263-472 ms). */
#define TP_SIM_NODE_START_S 0.472

typedef enum tp_sim_node_state {
    TP_SIM_NODE_UP = 0, /* takes trials; `at` is its failure */
    TP_SIM_NODE_DEAD,   /* failed, not yet taken for lost; `at` is when it is */
    TP_SIM_NODE_QUEUED, /* its allocation waits in the queue; `at` is when it joins */
} tp_sim_node_state_t;

typedef struct tp_sim_nodes {
    size_t n;            /* nodes */
    uint8_t *state;      /* per node: tp_sim_node_state_t */
    double *at;          /* per node: its next event (INFINITY: none) */
    double *since;       /* per node: held since (joined) */
    double *held_s;      /* per node: seconds held so far (joined to lost) */
    size_t next;         /* the node whose event is next (n: none) */
    double fail_per_s;   /* failures per node-second (0: none) */
    double queue_wait_s; /* mean queue wait (exponential; 0: none) */
    tp_rng_t rng;        /* the simulation's own */
    uint64_t failures;   /* nodes failed so far */
    size_t coming;       /* nodes dead or queued: trials may yet get them */
} tp_sim_nodes_t;

/* n nodes failing fail_per_day times per node-day, replaced (and, with
 * queue_wait_s > 0, first joining) after an exponential queue wait of that
 * mean. Deterministic in seed. O(n). */
void tp__sim_nodes_init(tp_sim_nodes_t *s, size_t n, double fail_per_day, double queue_wait_s,
                        uint64_t seed);
void tp__sim_nodes_free(tp_sim_nodes_t *s);
/* When the next node event falls (INFINITY: none). O(1). */
double tp__sim_nodes_next_at(const tp_sim_nodes_t *s);
/* Node k's event at time now: up -> dead (it failed), dead -> queued (taken
 * for lost: a replacement is asked for), queued -> up (joined). Returns the
 * new state. O(n). */
tp_sim_node_state_t tp__sim_nodes_step(tp_sim_nodes_t *s, size_t k, double now);
/* Node-seconds held by node k up to time end (joined to taken for lost, or
 * to end). O(1). */
double tp__sim_nodes_held(const tp_sim_nodes_t *s, size_t k, double end);

#endif
