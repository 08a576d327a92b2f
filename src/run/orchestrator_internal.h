/* The orchestrator's state, split by concern. Each part is owned by one
 * file; the others use it only through that file's functions below (or, for
 * trials and the journal, through their own headers).
 *
 *   part          owner            what it holds
 *   trials        trial_state.c    the trial table, the state machine, counts
 *   journal       journal.c        the store, transactions, write failures
 *   agents        agents.c         one link per agent: transport, readiness, loss
 *   pl            placement.c      demand groups, placing, GPU state
 *                 profiling.c      profiles of training: each GPU's busy base, trial_t.demand.prof
 *                                  (profile.c decides, purely, on the samples)
 *                 inventory.c      the cluster from the agents' hellos, MPS per node
 *   view          view.c           the live terminal view or log lines
 *   el            elastic.c        elastic trials: resizes, measured scaling
 *   dl            reallocation.c   reallocation of free GPUs, the deadline's end
 *   clock         clock.c          the run's clock, the deadline's time (real, or a test's)
 *   the rest      orchestrator.c   the loop, the scheduler, launches and stops
 *                 setup.c          opening, resuming and freeing a run */
#ifndef TP_ORCHESTRATOR_INTERNAL_H
#define TP_ORCHESTRATOR_INTERNAL_H

#include <jansson.h>
#include <stdint.h>
#include <uv.h>

#include "config/config.h"
#include "launch/launch.h"
#include "place/fuse_choice.h"
#include "place/place.h"
#include "run/clock.h"
#include "run/journal.h"
#include "run/run.h"
#include "run/trial_state.h"
#include "search/scheduler.h"
#include "search/search.h"
#include "store/store.h"
#include "util/util.h"

typedef struct tp_run tp_run_t;

/* ---- agents.c -------------------------------------------------------------- */
/* One agent: the local one, or one per ssh host or Slurm node. Link i runs
 * the cluster's node i. */
typedef struct tp_agent_link {
    tp_agent_conn_t conn; /* the transport */
    tp_run_t *run;        /* back to the run, for callbacks */
    int node;             /* its node's index in the cluster */
    char name[128];       /* host or Slurm node name; "local" */
    char **argv;          /* the command that starts it, owned, NULL-terminated */
    int up;               /* started and not lost */
    int ready;            /* hello answered and its GPUs set up: trials may go there */
    int restarts;         /* losses in a row (a hello resets it) */
    int closed;           /* its connection is closed */
    double heard_at;      /* monotonic time of its last message */
    char job[32];         /* the Slurm job its node belongs to, "" if none */
    int own_job;          /* that job holds this node alone: released with it */
    int draining;         /* no new trials; retired once its trials are gone */
    int retired;          /* shut down on purpose (drained, released): not restarted */
    int said_bye;         /* it answered shutdown with bye: it ended as asked, not lost */
    double idle_since;    /* monotonic time its last trial ended, 0 while busy */
    uv_timer_t retry;     /* starts it again a while after a loss */
} tp_agent_link_t;

typedef struct tp_agents {
    tp_agent_link_t **links; /* owned, each its own allocation (libuv points into it) */
    size_t n;
    char exe[4096];          /* this binary, to start agents */
    char jobid[32];          /* the Slurm job the agents run in, "" if none */
    int own_job;             /* tunepack asked for that job: it gives it back at the end */
    uv_timer_t heartbeat;    /* pings every agent; takes a silent one for lost */
    uint64_t heartbeat_tick; /* ticks so far: agent i is pinged on ticks = i mod the slots */
    char grow_job[32];       /* a one-node job asked of Slurm to grow, not yet running */
    double grow_asked;       /* monotonic time it was asked */
    char grow_state[400];    /* its last queue state, said once */
    int nodes_dirty;         /* a node's state changed: journal them */
    int shutting_down;       /* shutdown sent: losing agents now is the end */
} tp_agents_t;

/* Decide the agents (one local, one per ssh host, one per node of the Slurm
 * allocation, asking Slurm for it first if the experiment says so). 0, or
 * an exit code (printed). Blocks while Slurm queues the allocation. */
int tp__agents_plan(tp_run_t *r);
/* Start every agent (and say hello). 0, or an error (printed) when none
 * could start. */
int tp__agents_start(tp_run_t *r);
/* Send m to the agent running node `node`. 0 or -errno. */
int tp__agents_send(tp_run_t *r, int node, const json_t *m);
/* The link of node `node` (< tp__agents_n): the one way other files reach a
 * link. O(1). */
tp_agent_link_t *tp__agents_link(const tp_run_t *r, size_t node);
/* How many links (nodes) there are, retired ones included. O(1). */
size_t tp__agents_n(const tp_run_t *r);
/* Whether the agents were told to shut down: losing one now is the end. O(1). */
int tp__agents_shutting_down(const tp_run_t *r);
/* How many agents have said hello and are set up. */
int tp__agents_ready(const tp_run_t *r);
/* How many of them take new trials (not draining). */
int tp__agents_open(const tp_run_t *r);
/* The Slurm request for `nodes` nodes of the cluster's shape (GPUs and CPUs
 * per node, partition, account, time limit, extra options), not on the
 * nodes of `exclude` (a comma list, borrowed; NULL: none): the first
 * allocation's and each one that grows it. */
tp_slurm_request_t tp__agents_slurm_request(const tp_cluster_cfg_t *k, int nodes,
                                            const char *exclude);
/* The agent of `node` is set up: trials may go there. */
void tp__agents_mark_ready(tp_run_t *r, int node);
/* Ask every agent to end; the run finishes when they are gone. */
void tp__agents_shutdown(tp_run_t *r);
/* Close every connection; give back a Slurm job tunepack asked for. */
void tp__agents_close(tp_run_t *r);
void tp__agents_free(tp_run_t *r);
/* The command that starts an agent on node `name` (ssh host, Slurm node of
 * job `job`, command node), malloc'd NULL-terminated. */
char **tp__agents_argv(const tp_run_t *r, const char *name, const char *job);
/* A node joins while the experiment runs: a new link (argv owned by it),
 * a new node of the cluster, its agent started. Its index. */
int tp__agents_add(tp_run_t *r, const char *name, char **argv, const char *job, int own_job);
/* Shut node's agent down on purpose (drained, released): no restart. */
void tp__agents_retire(tp_run_t *r, int node);
/* Trials of ours running on each node, into counts[0..tp__agents_n); with
 * `processes`, a fused process counts once, not once per configuration
 * (what concurrency counts). One pass: O(trials + nodes). */
void tp__agents_running(const tp_run_t *r, int *counts, int processes);

/* ---- nodes.c: the set of nodes while the experiment runs ------------------- */
/* Called every heartbeat: act on `tunepack nodes drain|add` requests, retire
 * drained nodes, grow or shrink an allocation tunepack asked Slurm for,
 * and journal the nodes' states when they changed. */
void tp__nodes_tick(tp_run_t *r);
/* ---- plans.c: a plan of the experiment kept in its store ------------------- */
/* Take DIR/plan.json (written by `tunepack plan`) into the store and commit:
 * at the start of the run and on a `plan` request. 0 (msg says so), -ENOENT
 * when none waits, or a negative errno (msg says why). */
int tp__plans_take(tp_run_t *r, char *msg, size_t n);

/* Journal every node's state (meta "nodes", for `tunepack nodes`). */
void tp__nodes_journal(tp_run_t *r);
/* The most attempts (processes) that may run at once now: `concurrency` on
 * each node that takes trials (at least one node's worth), capped by
 * concurrency.total. */
int tp__nodes_concurrency(const tp_run_t *r);

/* ---- placement.c, inventory.c: placement's part (pl) ------------------------ */
/* Demand shared by trials with the same profile_by values. */
typedef struct demand_group {
    char *key;        /* JSON of the profile_by values, owned */
    uint64_t mem_mib; /* per GPU */
    double compute;   /* per GPU */
    int measured;     /* 1 once declared or profiled */
    int64_t profiler; /* trial measuring it, -1 if none */
} demand_group_t;

/* What placement knows of one node besides its capacity. */
typedef struct tp_node_state {
    uint64_t *foreign_mib; /* per GPU: memory used by processes that are not ours */
    int mps;               /* MPS daemons run for its GPUs */
    int mps_pending;       /* mps_start sent, answer awaited */
    const char *sharing;   /* mps | time-slicing | exclusive | cpu: what its trials get */
    char host[256];        /* its host name as its agent says (MASTER_ADDR), "" before */
    int64_t memory_mib;    /* its memory for trials, as its agent says */
    json_t *last_gpus;     /* its last `usage` sample's GPUs, owned */
    double *busy_base;     /* per GPU: its busy percent while no profiler of ours was there
                              (the mean of the last sample and the base before), NAN before
                              one; a profiler's GPU-level reading is measured over it */
} tp_node_state_t;

typedef struct tp_placement {
    tp_cluster_t cluster;          /* node i is agent link i's (capacities from its hello) */
    tp_node_state_t *node;         /* per node, owned */
    const tp_placer_ops_t *placer; /* the placement policy */
    demand_group_t *groups;        /* demand groups */
    size_t ngroups;
    json_t *group_index;  /* key -> index into groups */
    int placing;          /* trials demand GPUs or CPU cores: placement applies */
    int blocked;          /* pending trials did not fit; wait until capacity changes */
    double saved_at;      /* last GPU snapshot written to the store */
    tp_place_plan_t plan; /* vpack's plan across rounds (place/plan.c) */
} tp_placement_t;

/* ---- inventory.c (the cluster of placement's part) -------------------------- */
/* The cluster's nodes, one per agent link, empty until each says hello. */
void tp__placement_init(tp_run_t *r);
/* The cluster (its nodes, GPUs and capacities): the one way other files
 * read it. O(1). */
const tp_cluster_t *tp__placement_cluster(const tp_run_t *r);
/* What placement knows of node n (< the cluster's nodes) besides its
 * capacity. O(1). */
const tp_node_state_t *tp__placement_node(const tp_run_t *r, size_t n);
/* One more node (a link added while running), empty until its hello. */
void tp__placement_add_node(tp_run_t *r, const char *name);
/* From node n's hello: its capacity; decide MPS there. 0, or an exit code
 * (printed) when the experiment cannot run at all. *wait set when the
 * agent must first answer an mps_start. */
int tp__placement_hello(tp_run_t *r, size_t n, const tp_msg_hello_t *hello, int *wait);
/* `mps` answer: MPS on node n, or time-slicing and why. */
void tp__placement_on_mps(tp_run_t *r, size_t n, const tp_msg_mps_t *m);
/* GPU `index` of node n (and its position there), NULL if it has none. */
tp_gpu_t *tp__placement_gpu(tp_run_t *r, size_t node, int index, size_t *pos);
/* Journal (and log) that GPU g of node n is unhealthy, with NVML's error. */
void tp__placement_note_unhealthy(tp_run_t *r, size_t n, const tp_gpu_t *g, const char *err);
/* g's CUDA device id: its UUID, else its index. */
void tp__placement_device_id(const tp_gpu_t *g, char *out, size_t n);
/* The MPS pipe and log directories of GPU index on node n (n bytes each). */
void tp__placement_mps_dirs(const tp_run_t *r, size_t node, int index, char *pipe, char *log,
                            size_t n);

/* ---- placement.c: demand groups, placing, measuring ------------------------- */
/* The demand group of t, NULL before it has one. O(1). */
const demand_group_t *tp__placement_group(const tp_run_t *r, const trial_t *t);
/* Whether a demand is `auto` (measured by a profiling attempt, with NVML). */
int tp__placement_needs_profile(const tp_run_t *r);
/* Node n's agent is gone: nothing is placed there until it says hello. */
void tp__placement_node_down(tp_run_t *r, size_t n);
/* Whether trials waiting for room may fit now (capacity changed since the
 * last try); tp__placement_place clears it when some did not fit. */
int tp__placement_may_fit(const tp_run_t *r);
/* Place a batch of trials (their attempt not yet started); sets where,
 * mem_mib, compute, profiling of the placed ones; returns how many placed.
 * Trials that cannot be placed now are left with where.placed = 0. */
size_t tp__placement_place(tp_run_t *r, trial_t **batch, size_t n);
/* Journal the placement of t's new attempt and set t->gpu_env: its GPU
 * environment (an array of one per node for a multi-node trial), or NULL in
 * CPU-only runs. */
void tp__placement_attempt(tp_run_t *r, trial_t *t);
/* Shard k (node k of a multi-node trial; 0: t->where) of t's attempt, and
 * how many there are. */
const tp_assign_t *tp__trial_shard(const trial_t *t, size_t k);
size_t tp__trial_nshards(const tp_run_t *r, const trial_t *t);
/* Place t on shards[0..k). */
void tp__placement_set_shards(tp_run_t *r, trial_t *t, const tp_assign_t *shards, size_t k);
/* The host name of node n for MASTER_ADDR (its agent's own word). */
const char *tp__placement_host(const tp_run_t *r, size_t node);
/* `usage` samples. */
void tp__placement_on_usage(tp_run_t *r, size_t n, const tp_msg_usage_t *m);
/* The trial a `usage` entry e of node n is about, if its attempt runs
 * there; else NULL. O(1). */
trial_t *tp__placement_sampled(tp_run_t *r, size_t n, const tp_msg_usage_trial_t *e);
/* Whether every trial gets a GPU of its own, as outside tunepack (`sharing:
 * none` or `placement: {policy: one-per-gpu}`): no MPS daemon, no MPS
 * variables, and profilers placed by the policy like any trial. O(1). */
int tp__placement_exclusive(const tp_run_t *r);
/* Record measurement p as g's demand (the parts that are `auto`). */
void tp__placement_apply_profile(tp_run_t *r, demand_group_t *g, const tp_profile_t *p);
/* An attempt that ran out of GPU memory: grow its group's demand. Returns 1
 * when it should be placed again (not a failure), 0 when no GPU can hold
 * more (why filled either way). */
int tp__placement_oom(tp_run_t *r, trial_t *t, char *why, size_t n);
/* An attempt ended (or was interrupted): a profiling one records what it
 * measured; pending trials may fit again. Returns 0 when t leaves a fused
 * process that runs on for others (they hold its placement), else 1. */
int tp__placement_ended(tp_run_t *r, trial_t *t);
/* After tp__placement_ended returned 1, for an attempt that does not come
 * straight back (one paused to be resized does): under dynamic Fluid
 * shares, the rest of its group's shares again (tp__groups_ended).
 * O(trials + GPUs). */
void tp__placement_left_group(tp_run_t *r, trial_t *t);
/* The run ends: the stored GPU snapshot shows no trial of ours any more. */
void tp__placement_finish(tp_run_t *r);
void tp__placement_free(tp_run_t *r);

/* ---- profiling.c: measuring a group's demand (placement's part) ------------- */
/* Node n's `usage` entries (trials), with the busy percent of each of its
 * GPUs by position (busy), at monotonic time now: keeps the busy base of
 * each GPU without a profiler, adds each profiler's sample to its profile
 * (run/profile.h), and records the demand of the profiles that have seen
 * enough. Call after the entries updated the trials' peak memory.
 * O(entries + GPUs). */
void tp__profiling_usage(tp_run_t *r, size_t n, const tp_msg_usage_t *u, const double *busy,
                         double now);
/* t's profile ends (it has seen enough, or t's attempt ended): its group's
 * demand recorded from what it measured (event `profiled`), t's placement
 * shrunk to it; with no sample, the group's next trial profiles. */
void tp__profiling_finish(tp_run_t *r, trial_t *t);

/* ---- groups.c: Fluid trial groups ------------------------------------------ */
/* Whether t's job is in a Fluid group (its placement demand is its share;
 * fluid_group is the scheduler's batch, kept with or without `groups:`).
 * O(1). */
int tp__groups_member(const tp_run_t *r, const trial_t *t);
/* A report of t's with a step (first: the attempt's first, which starts
 * its step time): under groups, the load on its GPU is noted (its mean
 * since the first is kept with the step time measured over the same span:
 * trial_t.fluid.step_load), so that its work on a GPU of its own can be told.
 * Call before tp__trial_set_step_s. O(trials) at the first step of a
 * member holding a fraction, or while a demand on its GPU is not known;
 * else O(1) (tp__groups_gpu_changed keeps the load). */
void tp__groups_on_step(tp_run_t *r, trial_t *t, int first);
/* A trial started or ended on the GPUs of `where` (its placement; an
 * ended one no longer placed): the group members measuring a step on them
 * note their new load. O(trials) for each GPU of `where`. */
void tp__groups_gpu_changed(tp_run_t *r, const tp_assign_t *where);
/* The demands d[0..n) of a batch being placed (u: the usage before it) as
 * their Fluid shares: a fraction as the compute share, k >= 1 whole GPUs as
 * k GPUs of an elastic trial (its gpus_want); profiling trials keep theirs.
 * Journals a `fluid-share` event for each trial whose share it sets, when
 * it differs from the last its job journaled. O(batch x trials). */
void tp__groups_demand(tp_run_t *r, trial_t **batch, tp_demand_t *d, const int *profiling, size_t n,
                       const tp_usage_t *u);
/* t's attempt ended (u: the usage without it): under dynamic shares, the
 * rest of its group's shares again (a `fluid-shares` event); pending ones
 * take them, running elastic ones grow to more whole GPUs by a restart
 * when that pays. O(trials). */
void tp__groups_ended(tp_run_t *r, trial_t *t, const tp_usage_t *u);

/* ---- elastic.c: elastic trials, their measured scaling, resizes ------------ */
typedef struct tp_elastic {
    int resizing;    /* resizes asked whose attempt has not ended: nothing else starts */
    int64_t *pauses; /* resizes journaled, their pauses sent after the commit */
    size_t npauses, cappauses;
} tp_elastic_t;

/* Trials are elastic (`resources: {gpus: {min, max}}`). */
int tp__elastic_on(const tp_run_t *r);
/* Resizes asked whose attempt has not ended: nothing else starts meanwhile. O(1). */
int tp__elastic_resizing(const tp_run_t *r);
/* Resizes journaled whose pauses wait for the commit (tp__elastic_act). O(1). */
size_t tp__elastic_pauses_queued(const tp_run_t *r);
/* The GPUs t's next attempt asks for: its resize target, else the
 * experiment's (an elastic trial's min). */
int tp__elastic_gpus(const tp_run_t *r, const trial_t *t);
/* t's attempt was placed: its GPU count and processes per node (one per GPU when
 * elastic); its step clock restarts. */
void tp__elastic_attempt(tp_run_t *r, trial_t *t);
/* A report of t's running attempt arrived (step: TP_STORE_NO_STEP if none):
 * the seconds per step at its GPU count, and the restart cost of a resize. */
void tp__elastic_on_report(tp_run_t *r, trial_t *t, int64_t step);
/* Resize running elastic trial t to `gpus` GPUs: journals a `resize`
 * decision (why), and asks it to pause once committed. 0, or -errno with
 * msg saying why not (not elastic, not running, out of its range, busy). */
int tp__elastic_resize(tp_run_t *r, trial_t *t, int gpus, const char *why, char *msg, size_t n);
/* After the commit: send the pauses of the resizes journaled. */
void tp__elastic_act(tp_run_t *r);
/* t's attempt ended (interrupted: paused or stopped to run again). Returns
 * how it goes back to pending: TP_REQUEUE_RESIZE (detail filled, gpus_want
 * set) when it paused for a resize, else
 * TP_REQUEUE_INTERRUPTED. Journals
 * its curve. */
tp_requeue_t tp__elastic_ended(tp_run_t *r, trial_t *t, int interrupted, char *detail, size_t n);
/* Elastic trials of batch that did not fit with the GPUs they want try
 * again with one fewer, down to their min. How many placed. */
size_t tp__elastic_place_fewer(tp_run_t *r, trial_t **batch, size_t n);
/* A resumed run: each trial's last journaled curve and restart cost. */
void tp__elastic_resume(tp_run_t *r);
/* A `tunepack resize` request {"trial", "gpus"}: 0 or -errno, msg filled. */
int tp__elastic_request(tp_run_t *r, const json_t *req, char *msg, size_t n);
void tp__elastic_free(tp_run_t *r);

/* ---- reallocation.c: reallocation and the deadline's end in the real run --- */
typedef struct tp_deadline {
    uv_timer_t timer; /* fires at the deadline (r->deadline_at) */
    int armed;        /* the timer is initialized (tp__deadline_arm) */
    int hit;          /* reached: running trials checkpoint; nothing new starts */
    int freed;        /* GPUs were freed since the last plan */
    double planned;   /* monotonic time of the last reallocation plan */
    char final[4600]; /* the run's last line: the best model and its checkpoint */
} tp_deadline_t;

/* The experiment has a `deadline`. */
int tp__deadline_on(const tp_run_t *r);
/* The deadline was reached: running trials checkpoint, nothing new starts. O(1). */
int tp__deadline_hit(const tp_run_t *r);
/* A trial's GPUs were freed: the next reallocation plans for them. O(1). */
void tp__deadline_gpus_freed(tp_run_t *r);
/* The run's last line with a deadline (the best model and its checkpoint,
 * tp__deadline_finish), "" if none. */
const char *tp__deadline_final(const tp_run_t *r);
/* Arm the deadline's timer in the loop: at r->deadline_at on the run's clock (a resumed run
 * keeps it; one past it ends at once, checkpointing what runs). A virtual clock's deadline
 * is reached when the clock moves past it (tp__deadline_clock_moved). */
void tp__deadline_arm(tp_run_t *r);
/* The run's clock moved (a report): a virtual clock at or past r->deadline_at reaches the
 * deadline (the timer fires at once). Nothing with the real clocks: the timer keeps time. */
void tp__deadline_clock_moved(tp_run_t *r);
/* t's attempt ended paused or stopped (status) after the deadline: 1 with
 * detail filled and its checkpoint journaled (it ends as stopped), else 0. */
int tp__deadline_ended(tp_run_t *r, trial_t *t, const char *status, char *detail, size_t n);
/* Offer free GPUs to running elastic trials (reallocation policy, one plan
 * per node) when GPUs were freed, or every few seconds while some are free;
 * carries out its decisions as resizes. Only with `reallocation` or
 * `deadline`, elastic trials, no resize under way, before the deadline. */
void tp__deadline_realloc(tp_run_t *r);
/* The run ends: with a deadline, the best trial and its checkpoint path
 * (meta `best_checkpoint`, and tp__deadline_final for the last line). */
void tp__deadline_finish(tp_run_t *r);
/* Whole GPUs of node free of our trials, healthy, on a ready node. */
int tp__placement_free_gpus(const tp_run_t *r, size_t node);

/* ---- view.c ---------------------------------------------------------------- */
#define TP_VIEW_RECENT 3 /* ends of attempts the live view shows under its table */

typedef struct tp_view {
    uv_timer_t timer;     /* live view refresh */
    uv_signal_t winch;    /* live view: the terminal was resized */
    int live, quiet;      /* mode: live block, log lines, or nothing */
    int lines;            /* lines drawn by the live view */
    double t0;            /* monotonic start of this run */
    int done_before;      /* trials already ended when this run started */
    int64_t *front_ids;   /* several objectives: the Pareto front so far, owned */
    double *front_values; /* m values per point, as reported */
    size_t nfront, capfront;
    char recent[TP_VIEW_RECENT][240]; /* live view: the last ends of attempts, oldest first */
    int nrecent;
} tp_view_t;

/* How the run is shown: the live view (live), log lines, or nothing (quiet). Before
 * tp__view_start. */
void tp__view_mode(tp_run_t *r, int live, int quiet);
/* Trials already ended when this run started (a resumed run): its progress counts from
 * there. */
void tp__view_done_before(tp_run_t *r, int n);
void tp__view_start(tp_run_t *r);
/* Monotonic time this run started (tp__view_start). O(1). */
double tp__view_t0(const tp_run_t *r);
/* An attempt of t ended (t is in its new state; requeue: why it went back to
 * pending, NONE otherwise); why: the decision or what went wrong. One log
 * line, and the best so far when it changed. */
void tp__view_attempt_ended(tp_run_t *r, const trial_t *t, tp_requeue_t requeue, const char *why,
                            double duration_s);
void tp__view_final(tp_run_t *r);
/* Several objectives: trial id finished with values[0..nobjectives) (all
 * finite); the view keeps the Pareto front of such trials (a point no other
 * beats in every objective) and says it instead of one best. Amortized
 * O(front x m). */
void tp__view_front_add(tp_run_t *r, int64_t id, const double *values);
void tp__view_free(tp_run_t *r);

/* ---- fuse.c: several configurations in one process (`fuse:`) ------------------- */
/* A fused process (one per launch, K configurations in it): defined in fuse.c, used
 * elsewhere through the functions below. */
typedef struct tp_fused tp_fused_t;

/* What was measured of one shape's fused processes, and the K last chosen. */
typedef struct tp_fuse_shape {
    char *key;             /* JSON of the shape parameters' values, owned */
    tp_fuse_table_t table; /* throughput and memory per K */
    int last_k;            /* the K chosen last (journaled when it changes) */
} tp_fuse_shape_t;

typedef struct tp_fusion {
    tp_fused_t **live; /* processes with a configuration still running, owned */
    size_t nlive, cap;
    tp_fuse_shape_t *shapes; /* owned */
    size_t nshapes;
    int extra; /* running configurations beyond one per live process */
} tp_fusion_t;

/* Fill up to free_slots processes with fused groups of pending trials (same shape and
 * budget, K chosen by tp__fuse_choose), place each group's first trial and start every
 * configuration's attempt. Returns the processes started. */
size_t tp__fuse_schedule(tp_run_t *r, size_t free_slots);
/* Processes of ours running: trials running less the configurations sharing one. */
int tp__fuse_slots_used(const tp_run_t *r);
/* The live process the agent calls (trial, attempt), NULL if none. O(live). */
tp_fused_t *tp__fuse_find(const tp_run_t *r, int64_t trial, int64_t attempt);
/* What the agent knows f by: the trial id and attempt its launch named. O(1). */
int64_t tp__fuse_process_id(const tp_fused_t *f);
int tp__fuse_attempt(const tp_fused_t *f);
/* The configurations f started with (its K; indexes 0..K-1). O(1). */
int tp__fuse_k(const tp_fused_t *f);
/* Whether a stop or pause went to f's process; mark_stopped: one went now. O(1). */
int tp__fuse_stop_sent(const tp_fused_t *f);
void tp__fuse_mark_stopped(tp_fused_t *f);
/* The trial running configuration `config` of f (config -1: the only one), NULL if none
 * (no such index, or it ended). */
trial_t *tp__fuse_member(const tp_run_t *r, const tp_fused_t *f, int config);
/* A report of member t (in f) at step, now: for f's throughput. */
void tp__fuse_seen(tp_fused_t *f, const trial_t *t, int64_t step);
/* The `{configs_json}` of t's process: [{config, trial, params, checkpoint_dir,
 * trial_dir}], caller frees. */
char *tp__fuse_configs_json(const tp_run_t *r, const trial_t *t);
/* f's process exited: its throughput and memory measured and journaled, then the end
 * mapped to every configuration still running in it (tp__run_on_exited each). */
void tp__fuse_on_exited(tp_run_t *r, tp_fused_t *f, const tp_exited_t *e);
/* t's attempt ends (tp__placement_ended): t leaves its process. Returns 1 when the process
 * runs on for others, which now hold its placement (nothing is freed), 0 otherwise. */
int tp__fuse_left(tp_run_t *r, trial_t *t);
/* The scheduler stopped t early (journaled and committed): its process drops t's index
 * ("drop <i>" on the control channel) and goes on; t ends now, stopped. The last one
 * left stops the process. */
void tp__fuse_drop(tp_run_t *r, trial_t *t);
/* Measurements of an earlier run (meta "fusion"), on resume. */
void tp__fuse_load(tp_run_t *r);
void tp__fuse_free(tp_run_t *r);

/* ---- orchestrator.c -------------------------------------------------------- */
struct tp_run {
    uv_loop_t loop;              /* the event loop */
    uv_prepare_t prepare;        /* pump: schedule, commit, act */
    uv_signal_t sigint, sigterm; /* stop requests */
    tp_experiment_t x;           /* the experiment */
    tp_scheduler_t *sched;       /* decides the next job: sampler + scheduler */
    json_t *warm;                /* warm start read from the sources: [{source, trial, params,
                                    values}], owned; NULL: none */
    int sched_waiting;           /* the scheduler said -EAGAIN and nothing ended since */
    int exhausted;               /* the scheduler has no more jobs */
    double deadline_at;          /* the deadline, wall seconds (created_at + `deadline`); 0: none */
    double deadline_journaled;   /* the deadline the scheduler was last told (journaled), 0: none */
    char *dir;                   /* experiment directory, absolute */
    char *workdir;               /* trials' working directory, absolute */
    char token[40];              /* names this experiment's processes */
    char experiment_id[40];      /* the experiment's identity in each trial.json (meta
                                    "experiment_id"; "" for a store from before it) */
    char spool[80];              /* without shared storage, where nodes keep trials' files
                                    (/tmp/tunepack-<random>: never the token, which /tmp shows) */
    int lock_fd;                 /* holds DIR/lock */
    trial_t **batch;             /* candidates of one schedule() call */
    size_t capbatch;
    int64_t *launch; /* trials journaled as started, to send after the commit */
    size_t nlaunch, caplaunch;
    int64_t *stops; /* early stops journaled, to send after the commit */
    size_t nstops, capstops;
    int has_best;       /* a trial has competed for the best */
    int64_t best_id;    /* the best so far (tp__rank_beats); negative: a seeded one */
    tp_rank_key_t best; /* its budget and value when it became the best */
    int best_rung;      /* its rung then */
    int best_target;    /* it is a target trial (surrogate:): ranks above surrogates */
    int best_changed;   /* a new best since the view last said it */
    trial_t **seeded;   /* trials a fork seeded (negative ids, fork.c): ranked, never
                           run; owned */
    size_t nseeded;
    int created;           /* this run created the store (a new experiment) */
    int ff_failed;         /* fail-fast: trials of this run that failed, all alike so far */
    int ff_off;            /* fail-fast no longer applies (a trial got a value, or
                              failures differed) */
    char ff_why[1200];     /* the first failure, as the others must be to count */
    int stopping;          /* stop requested */
    int finished;          /* tp__orchestrator_finish ran */
    int exit_code;         /* TP_EXIT_* */
    tp_buf_t scratch;      /* reused for name=value reports */
    tp_error_t err;        /* last error */
    tp_samples_t round_ms; /* scheduling rounds that placed something, their wall ms */
    tp_samples_t rtt_ms;   /* ping -> pong round trips to agents, ms */
    tp_samples_t start_ms; /* launch sent -> started received, per attempt, ms */
    double first_start_s;  /* from the run's start to its first trial's start */
    uint64_t messages;     /* messages from agents */
    tp_trials_t trials;    /* trial_state.c */
    tp_journal_t journal;  /* journal.c */
    tp_agents_t agents;    /* agents.c */
    tp_placement_t pl;     /* placement.c */
    tp_view_t view;        /* view.c */
    tp_elastic_t el;       /* elastic.c */
    tp_fusion_t fuse;      /* fuse.c */
    tp_deadline_t dl;      /* reallocation.c */
    tp_run_clock_t clock;  /* clock.c: the deadline's time, real or a test's virtual one */
};

/* Whether the program of x's command (argv[0]) exists and is executable from
 * workdir (a path with '/': relative to workdir; a bare name: on PATH).
 * 0, or -ENOENT/-EACCES with err "file:line:col: ..." at the program. A
 * program with a placeholder in it is not checked. */
int tp__run_check_program(const tp_experiment_t *x, const char *workdir, tp_error_t *err);
/* programs.c: the absolute path prog resolves to as a trial's exec finds it
 * from workdir (a path with '/': relative to workdir; a bare name: each PATH
 * entry in turn, relative ones from workdir) into out. 0, or -ENOENT,
 * -EACCES (out: the one found not executable), -EISDIR. */
int tp__run_resolve_program(const char *prog, const char *workdir, char *out, size_t n);
/* programs.c: "  prog -> /abs/path" for the program of x's command (and the
 * one an `env` runs); for a Python interpreter its version, its script's
 * path and whether each module the script imports at top level imports
 * (the interpreter run with an argv, in workdir, with the file's env; at
 * most 60 s). Lines into out; *unimportable counts modules that do not
 * import. 0, or the -errno of a program not found (nothing said of it). */
int tp__run_describe_programs(const tp_experiment_t *x, const char *workdir, tp_buf_t *out,
                              int *unimportable);

/* Run the event loop until the experiment ends or stops; TP_EXIT_* code. */
int tp__orchestrator_loop(tp_run_t *r);
void tp__orchestrator_finish(tp_run_t *r);
/* A message from the agent of node `node`, decoded (tp__proto_decode). */
void tp__orchestrator_on_msg(tp_run_t *r, int node, const tp_agent_msg_t *m);
/* The agent of node `node` is gone: its attempts are interrupted. */
void tp__orchestrator_on_agent_lost(tp_run_t *r, int node, const char *why);
/* The best trial so far (a trial of the table or a seeded one), NULL if none. */
const trial_t *tp__run_best_trial(const tp_run_t *r);
/* setup.c: how many trials of the experiment in s have a result (completed,
 * paused at a rung or stopped early; a fork's seeded trials not counted) into
 * *n: while none has, a changed command is taken (tp__config_changes).
 * 0 or the store's error. O(trials). */
int tp__run_count_results(tp_store_t *s, int *n);
/* retry.c: `run --retry-failed`: every failed trial goes back to pending, a
 * "retry" decision journaled and told to the scheduler for each; says how
 * many (and which) on the log. Call after the replay, before the counts are
 * announced. Returns how many. O(trials). */
int tp__run_retry_failed(tp_run_t *r);
/* A journaled "retry" decision replayed: 1 if d is one (told to the
 * scheduler), else 0. */
int tp__retry_replay(tp_run_t *r, const tp_decision_row_t *d);
/* lineage.c: scheduler pbt's exploit job for paused trial t: the donor's
 * checkpoint copied over t's, t's params from now on job->config (also in
 * the store), and the `exploit` decision journaled. Journal it before the
 * job's own decision. */
void tp__lineage_exploit(tp_run_t *r, trial_t *t, const tp_job_t *job, double now);
/* The configuration a trial was created with, from its first `exploit`
 * decision's detail ("old" of segment 1); NULL for any other. New ref. */
json_t *tp__lineage_first_params(const char *detail);
/* fork.c: seed the new experiment (its store just created) with the results
 * of the one in `from` that the new space holds. 0, or an error (err). */
int tp__run_fork(tp_run_t *r, const char *from, tp_error_t *err);
/* Whether the experiment in `from` measured the same metric the same way:
 * 0, or an error saying why its results would mean nothing here. */
int tp__run_fork_check(const tp_run_t *r, const char *from, tp_error_t *err);
/* A seeded trial read from the store (row->id < 0) into r->seeded; takes params. */
void tp__run_load_seeded(tp_run_t *r, const tp_trial_row_t *row, json_t *params);
/* t ended a job (completed, stopped early, paused at a rung): the best so far? */
void tp__note_best(tp_run_t *r, const trial_t *t);
/* a better than b by the metric's mode; NaN is never better. */
int tp__run_better(const tp_run_t *r, double a, double b);
/* Journal a scheduler call (job, result, stop) in the decisions table, and
 * the trial's rung, budget and last decision; objectives: a result's values
 * with several objectives (JSON array text), else NULL. */
void tp__run_decision(tp_run_t *r, const char *kind, const trial_t *t, int ok, double value,
                      const char *detail, const char *objectives);
/* As tp__run_decision, at wall time `at` (the `now` the scheduler was given). */
void tp__run_decision_at(tp_run_t *r, double at, const char *kind, const trial_t *t, int ok,
                         double value, const char *detail, const char *objectives);
/* As tp__run_decision_at, with a result's constraint values (JSON array text, or NULL). */
void tp__run_result_decision(tp_run_t *r, double at, const char *kind, const trial_t *t, int ok,
                             double value, const char *detail, const char *objectives,
                             const char *constraints);
/* A paused trial that will never be promoted ends as stopped; why says why. */
void tp__run_stop_paused(tp_run_t *r, trial_t *t, const char *why);

/* ---- deadline.c: schedulers that plan against time (hypersched) ------------ */
/* After the replay: the deadline (created_at + `deadline`) into r->deadline_at (whatever the
 * scheduler), and told to a scheduler with ops->deadline (journaled) when it differs from what
 * the journal told it. */
void tp__deadline_start(tp_run_t *r);
/* t's attempt starts: its timing starts over, on the run's clock. */
void tp__deadline_attempt(tp_run_t *r, trial_t *t);
/* t's report was stored (first_step: the attempt's first with a step): timed on the run's
 * clock, which a report may have moved (a virtual clock: the deadline may be reached). */
void tp__deadline_report(tp_run_t *r, trial_t *t, int first_step);
/* t's job ended ok: its measured timing (units, seconds from the attempt's start to its last
 * report, seconds per unit between its reports, on the run's clock) journaled at the run's
 * `now` and told to the scheduler, before its result. Nothing for a job run in several
 * attempts or without reports. */
void tp__deadline_timing(tp_run_t *r, const trial_t *t);
/* The scheduler refused a job (job->refused): journaled; a paused trial is stopped. */
void tp__deadline_refused(tp_run_t *r, const tp_job_t *job, double now);
/* Replay a journaled "deadline" or "timing" row; 1 when d was one, else 0. */
int tp__deadline_replay(tp_run_t *r, const tp_decision_row_t *d);

/* fail_fast: t's job ended; why: what went wrong when it failed, NULL when it
 * got a value. The first `fail_fast` trials failing alike (same exit, same
 * last stderr line: the same why) stop the experiment with a message. */
void tp__run_fail_fast(tp_run_t *r, const trial_t *t, const char *why);
/* warm_start.c: read the completed trials of each `search.warm_start`
 * directory (read-only) into r->warm, before the store is opened. 0, or
 * -errno with err filled: a directory that holds no experiment, or one
 * that optimized other objectives. O(trials of the sources). */
int tp__run_warm_start_read(tp_run_t *r, tp_error_t *err);
/* Feed the sampler its prior observations before the first ask: those
 * journaled (a resumed run), else, for a search with no decision yet, the
 * ones read (journaled now in `priors`). */
void tp__run_warm_start(tp_run_t *r);

/* Stop t's attempt early once what was journaled is committed. */
void tp__run_queue_stop(tp_run_t *r, const trial_t *t);
/* t's checkpoint directory (TUNEPACK_CHECKPOINT_DIR), as its node sees it. */
void tp__run_checkpoint_dir(const tp_run_t *r, const trial_t *t, char *out, size_t n);
/* t's directory where it runs (TUNEPACK_TRIAL_DIR of rank 0): the experiment's, or a node's
 * spool without shared storage. */
void tp__run_trial_home(const tp_run_t *r, const trial_t *t, char *out, size_t n);
/* The next trial to run: a pending one, else the scheduler's next job; NULL if none now. */
trial_t *tp__run_next_candidate(tp_run_t *r);
/* Journal the start of t's next attempt where the placer put it; launch: queue its launch
 * for after the commit (0: a configuration of a fused process another trial launches). */
void tp__run_start_attempt(tp_run_t *r, trial_t *t, int launch);
/* A candidate that could not start now goes back: pending (queued), a promoted one
 * waiting for room. */
void tp__run_put_back(tp_run_t *r, trial_t *t);
/* Send t's attempt a `pause` (checkpoint and exit) or `stop` now, to every node it runs on
 * (a fused one: its process); once per attempt. */
void tp__run_send_control(tp_run_t *r, trial_t *t, const char *type, const char *reason);
/* Build and queue the launch message of one process (rank) of t's current
 * attempt, to the agent of its node. Rank 0 of several asks its agent for a
 * free MASTER_PORT; the others follow once it has started (messages.c).
 * 0, or -errno with r->err filled. */
int tp__run_send_launch(tp_run_t *r, trial_t *t, int rank);

/* outcome.c: a running attempt's `report` and `exited` messages. f: the fused process the
 * report came from (each line goes to the configuration it names), NULL otherwise; kv: the
 * lines are name=value (channel stdout); the report's payload, lines[0..n). */
void tp__run_on_report(tp_run_t *r, trial_t *t, tp_fused_t *f, int kv, const char *lines, size_t n);
void tp__run_on_exited(tp_run_t *r, trial_t *t, const tp_exited_t *e);
/* A chunk of a trial's stdout or stderr streamed back from a node that does
 * not share the experiment directory: appended to DIR/trials/<id>[/rank<k>]. */
void tp__run_on_log(tp_run_t *r, trial_t *t, int rank, int is_stderr, const char *data, size_t n);
void tp__run_logs_close(trial_t *t);
/* Something on a report channel that is no report: an event (the first 20). */
void tp__run_garbage(tp_run_t *r, trial_t *t, const char *what);
/* Who answers for garbage of t's attempt, or of fused process f (t: the trial
 * whose logs f keeps, may be NULL): t itself, or a configuration still in f;
 * NULL if none. */
trial_t *tp__run_garbage_owner(const tp_run_t *r, trial_t *t, const tp_fused_t *f);

#endif
