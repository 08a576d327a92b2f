/* The orchestrator's state, shared by orchestrator.c and view.c. */
#ifndef TP_ORCHESTRATOR_INTERNAL_H
#define TP_ORCHESTRATOR_INTERNAL_H

#include <jansson.h>
#include <stdint.h>
#include <uv.h>

#include "config/config.h"
#include "launch/launch.h"
#include "place/place.h"
#include "search/scheduler.h"
#include "search/search.h"
#include "store/store.h"
#include "util/util.h"

enum { T_PENDING, T_RUNNING, T_COMPLETED, T_FAILED, T_STOPPED, T_PAUSED };

typedef struct trial {
    int64_t id;         /* trial number, as the searcher numbered it */
    json_t *params;     /* its configuration, owned */
    int state;          /* T_* */
    int attempts;       /* attempts started */
    int failures;       /* attempts failed */
    int has_value;      /* objective reported in the current/last attempt */
    double value;       /* last reported objective */
    double best;        /* best objective within the attempt */
    int64_t step;       /* last reported step */
    int64_t seq;        /* report rows stored in this attempt */
    tp_buf_t last;      /* last report line (while running) */
    double started;     /* monotonic start time of the attempt */
    int garbage;        /* garbage lines in this attempt */
    int stop_sent;      /* a stop was sent for this attempt */
    int pid;            /* process group of the attempt, on its agent */
    int group;          /* index of its demand group (placement.c), -1 before */
    tp_assign_t where;  /* where the current attempt runs (where.placed) */
    uint64_t mem_mib;   /* demand it was placed with, per GPU */
    double compute;     /* compute share it was placed with, per GPU */
    int profiling;      /* this attempt measures its group's demand */
    uint64_t peak_mib;  /* largest GPU memory seen in this attempt */
    double sm_sum;      /* sum of SM use samples (percent) in this attempt */
    int samples;        /* NVML samples of this attempt */
    double first_report, last_report; /* monotonic times of reports, for step time */
    json_t *gpu_env;    /* the GPU environment of the current attempt, owned */
    int rung;           /* rung of its current (or last) job */
    double budget;      /* budget of that job, 0 = none */
    int early_stopped;  /* the scheduler stopped it while it ran */
    int job_fresh;      /* its job was just handed out: the next attempt starts its reports */
    char why[200];      /* the scheduler's last decision about it */
} trial_t;

/* Demand shared by trials with the same profile_by values. */
typedef struct demand_group {
    char *key;          /* JSON of the profile_by values, owned */
    uint64_t mem_mib;   /* per GPU */
    double compute;     /* per GPU */
    int measured;       /* 1 once declared or profiled */
    int64_t profiler;   /* trial measuring it, -1 if none */
} demand_group_t;

typedef struct tp_run {
    uv_loop_t loop;             /* the event loop */
    uv_prepare_t prepare;       /* pump: schedule, commit, act */
    uv_signal_t sigint, sigterm;/* stop requests */
    uv_timer_t view_timer;      /* live view refresh */
    tp_experiment_t x;          /* the experiment */
    tp_scheduler_t *sched;      /* decides the next job: sampler + scheduler */
    int sched_waiting;          /* the scheduler said -EAGAIN and nothing ended since */
    tp_store_t *store;          /* the journal */
    tp_agent_conn_t conn;       /* the (local) agent */
    char *dir;                  /* experiment directory, absolute */
    char *workdir;              /* trials' working directory, absolute */
    char exe[4096];             /* this binary, to start the agent */
    char token[40];             /* names this experiment's processes */
    int lock_fd;                /* holds DIR/lock */
    trial_t **trials;           /* by id; NULL holes never happen in practice */
    size_t ntrials, cap;        /* ids < ntrials */
    int64_t *heap;              /* pending trial ids (min-heap) */
    size_t nheap, capheap;
    trial_t **batch;            /* candidates of one schedule() call */
    size_t capbatch;
    int64_t *launch;            /* trials journaled as started, to send after the commit */
    size_t nlaunch, caplaunch;
    uint64_t next_index;        /* one past the highest trial number */
    int exhausted;              /* the scheduler has no more jobs */
    int running, completed, failed, retried, stopped; /* counts */
    int resumed_done;           /* completed + failed when this run started */
    int64_t best_id;            /* best completed trial, -1 if none */
    int64_t metric_rows;        /* stored by this run */
    int in_tx;                  /* a store transaction is open */
    double tx_opened;           /* monotonic time it was opened */
    uv_timer_t commit_timer;    /* commits report rows left waiting */
    int64_t *stops;             /* early stops journaled, to send after the commit */
    size_t nstops, capstops;
    int store_broken;           /* a store write failed */
    int agent_ready;            /* hello answered */
    int agent_restarts;         /* agents lost so far */
    int stopping;               /* stop requested */
    int shutting_down;          /* shutdown sent to the agent */
    int finished;               /* tp__orchestrator_finish ran */
    int exit_code;              /* TP_EXIT_* */
    int live, quiet;            /* view mode */
    int view_lines;             /* lines drawn by the live view */
    double t0;                  /* monotonic start */
    tp_buf_t scratch;           /* reused for name=value reports */
    tp_cluster_t cluster;       /* the agent's node and GPUs (from its hello) */
    uint64_t *foreign_mib;      /* per GPU: memory used by processes that are not ours */
    const tp_placer_ops_t *placer; /* the placement policy */
    demand_group_t *groups;     /* demand groups */
    size_t ngroups;
    json_t *group_index;        /* key -> index into groups */
    int placing;                /* trials demand GPUs or CPU cores: placement applies */
    int placement_blocked;      /* pending trials did not fit; wait until capacity changes */
    int mps;                    /* MPS daemons run for the GPUs */
    int mps_pending;            /* mps_start sent, answer awaited */
    const char *sharing;        /* mps | time-slicing | exclusive | cpu: what trials get */
    double gpus_saved_at;       /* last GPU snapshot written to the store */
    json_t *last_gpus;          /* the last `usage` sample's GPUs, owned */
    tp_error_t err;             /* last error */
} tp_run_t;

const char *tp__trial_state_name(int state);
int tp__trial_state_from_name(const char *name); /* T_PENDING if unknown */

/* orchestrator.c */
/* Run the event loop until the experiment ends or stops; TP_EXIT_* code. */
int tp__orchestrator_loop(tp_run_t *r);
void tp__orchestrator_finish(tp_run_t *r);
trial_t *tp__trial_new(tp_run_t *r, int64_t id, json_t *params); /* r owns it */
void tp__pending_push(tp_run_t *r, int64_t id);  /* O(log pending) */
void tp__note_best(tp_run_t *r, trial_t *t);     /* t completed: best so far? */
void tp__run_tx(tp_run_t *r);                    /* open a transaction if none is */
void tp__run_journal_failed(tp_run_t *r, const char *what);
trial_t *tp__trial_get(tp_run_t *r, int64_t id);   /* NULL if no such trial */
/* a better than b by the metric's mode; NaN is never better. */
int tp__run_better(const tp_run_t *r, double a, double b);

/* outcome.c: a running attempt's `report` and `exited` messages. */
void tp__run_on_report(tp_run_t *r, trial_t *t, const tp_msg_t *m);
void tp__run_on_exited(tp_run_t *r, trial_t *t, const tp_msg_t *m);
/* Something on a report channel that is no report: an event (the first 20). */
void tp__run_garbage(tp_run_t *r, trial_t *t, const char *what);
/* Journal a scheduler call (job, result, stop) in the decisions table. */
void tp__run_decision(tp_run_t *r, const char *kind, const trial_t *t, int ok, double value,
                      const char *detail);

/* placement.c: the cluster, demand groups, placing a batch, GPU messages. */
/* From the agent's hello: build the cluster; decide MPS. 0, or an exit code
 * (printed) when the experiment cannot run there. */
int tp__placement_hello(tp_run_t *r, const json_t *hello);
/* Place a batch of trials (their attempt not yet started); sets where,
 * mem_mib, compute, profiling of the placed ones; returns how many placed.
 * Trials that cannot be placed now are left with where.placed = 0. */
size_t tp__placement_place(tp_run_t *r, trial_t **batch, size_t n);
/* Journal the placement of t's new attempt and add its GPU environment. */
void tp__placement_journal(tp_run_t *r, trial_t *t, json_t *env);
/* `mps` answer, `usage` samples. */
void tp__placement_on_mps(tp_run_t *r, const json_t *m);
void tp__placement_on_usage(tp_run_t *r, const json_t *m);
/* An attempt that ran out of GPU memory: grow its group's demand. Returns 1
 * when it should be placed again (not a failure), 0 when no GPU can hold
 * more (why filled). */
int tp__placement_oom(tp_run_t *r, trial_t *t, char *why, size_t n);
/* An attempt ended (or was interrupted): a profiling one records what it
 * measured; pending trials may fit again. */
void tp__placement_ended(tp_run_t *r, trial_t *t);
/* The run ends: the stored GPU snapshot shows no trial of ours any more. */
void tp__placement_finish(tp_run_t *r);
void tp__placement_free(tp_run_t *r);

/* view.c: what the user sees while it runs. */
void tp__view_start(tp_run_t *r);
void tp__view_trial_ended(tp_run_t *r, const trial_t *t, const char *why, double duration_s);
void tp__view_final(tp_run_t *r);

#endif
