/* trial_state: the trials of a run, their one state machine, the pending
 * queue and the counts.
 *
 *   pending --> running --> completed
 *      ^          |  |----> stopped    (the scheduler stopped it early)
 *      |          |  |----> failed     (retries spent)
 *      |          |  \----> paused     (rung done, checkpointed, waits) --+
 *      +----------+ (retry, interrupted, out of GPU memory, resize)       |
 *      ^                                                                  |
 *      +-------------------- paused (promoted, waiting for room) <-------+
 *                            paused --> running (promoted and placed)
 *                            paused --> stopped (the search ended without it)
 *
 * Every change goes through tp__trial_set_state(), which checks the table,
 * journals the change and keeps the counts; an illegal change is refused as
 * a programmer error (logged, counted in `bugs`, -EINVAL).
 *
 * Owned by trial_state.c; the orchestrator reads trials and counts, and
 * changes a trial's state only through this interface. */
#ifndef TP_RUN_TRIAL_STATE_H
#define TP_RUN_TRIAL_STATE_H

#include <jansson.h>
#include <stdint.h>

#include "place/place.h"
#include "run/deadline.h"
#include "run/elastic.h"
#include "run/fuse.h"
#include "run/groups.h"
#include "run/journal.h"
#include "run/placement.h"
#include "util/util.h"

typedef enum tp_trial_state {
    TP_TRIAL_PENDING,   /* waits for a slot (new, retried, interrupted, promoted) */
    TP_TRIAL_RUNNING,   /* an attempt runs on an agent */
    TP_TRIAL_PAUSED,    /* its job is done and checkpointed; waits for a promotion */
    TP_TRIAL_COMPLETED, /* final: its last job completed */
    TP_TRIAL_STOPPED,   /* final: stopped early by the scheduler, or never promoted */
    TP_TRIAL_FAILED,    /* final: every attempt allowed failed */
    TP_TRIAL_NSTATES
} tp_trial_state_t;

/* Why an attempt left `running` for `pending`. */
typedef enum tp_requeue {
    TP_REQUEUE_NONE,        /* not an attempt's end */
    TP_REQUEUE_RETRY,       /* it failed and has retries left */
    TP_REQUEUE_INTERRUPTED, /* stopped, paused by a stop, lost with its agent or orchestrator */
    TP_REQUEUE_REGROW,      /* out of GPU memory: placed again with more */
    TP_REQUEUE_RESIZE,      /* paused to be placed again with gpus_want GPUs (elastic) */
} tp_requeue_t;

/* The current attempt of a trial: what every attempt has. trial_state.c
 * clears it; the files that start, hear and stop attempts fill it. */
typedef struct tp_trial_attempt {
    double started;          /* monotonic start time of the attempt */
    double launch_sent;      /* monotonic time its (rank 0) launch went out */
    int stop_sent;           /* a stop or pause was sent for this attempt */
    int pid;                 /* process group of the attempt, on its agent */
    int64_t seq;             /* report rows stored in this attempt */
    int garbage;             /* garbage lines in this attempt */
    char first_garbage[200]; /* why the attempt's first garbage line was refused */
} tp_trial_attempt_t;

/* The processes of a trial's current attempt (nodes x procs_per_node
 * ranks): launched by orchestrator.c, gathered into one end by messages.c,
 * their logs kept by outcome.c. */
typedef struct tp_trial_ranks {
    int n;              /* processes of the current attempt: nodes x procs_per_node */
    int live;           /* of them, launched and not yet exited */
    int master_port;    /* rank 0's MASTER_PORT, once it started (0 before) */
    json_t *verdict;    /* a multi-process attempt: the exit that judges it, owned */
    tp_logfile_t *logs; /* logs streamed back from its nodes: 2 per rank, owned; NULL if none */
} tp_trial_ranks_t;

/* A trial's step timing, from its reports (outcome.c); step_s changes only
 * through tp__trial_set_step_s, and a new attempt restarts it through
 * tp__trial_pace_restart (trial_state.c). */
typedef struct tp_trial_pace {
    double first_report, last_report; /* monotonic times of reports, for step time */
    double step_s;        /* measured seconds per step (reports whose step advanced), 0: unknown */
    int step_gpus;        /* the GPU count of the attempt that measured step_s; set with it */
    int64_t first_step;   /* step of this attempt's first report that had one */
    double first_step_at; /* monotonic time of that report */
} tp_trial_pace_t;

/* A trial's current job (what the scheduler handed out) and its last word
 * on it: set by orchestrator.c when a job is handed out or decided; other
 * files write it only through tp__trial_job_* (trial_state.c). */
typedef struct tp_trial_job {
    double from_budget; /* budget its current job starts from (0: a new trial) */
    double budget;      /* budget of that job, 0 = none */
    int rung;           /* rung of its current (or last) job */
    int attempts;       /* attempts at its current job */
    int fresh;          /* its job was just handed out: the next attempt starts its reports */
    int early_stopped;  /* the scheduler stopped it while it ran */
    int64_t step_done;  /* largest step it reported in any job (its checkpoint), -1: none */
    char why[200];      /* the scheduler's last decision about it */
} tp_trial_job_t;

/* A trial: what every trial has, then one part per feature, each owned by
 * its file (the header named; tests/lint/owned_fields.sh checks that no
 * other file touches it, and that the small structs above are written only
 * by the files their comments name). */
typedef struct trial {
    int64_t id;                 /* trial number, as the searcher numbered it */
    json_t *params;             /* its configuration, owned */
    tp_trial_state_t state;     /* changed only by tp__trial_set_state */
    tp_requeue_t requeued;      /* why it last went back to pending (kept until its next attempt) */
    int attempts;               /* attempts started */
    int failures;               /* attempts failed */
    int results;                /* jobs it ended with a result (journaled `result` decisions) */
    int has_value;              /* objective reported in the current/last job */
    double value;               /* last reported objective */
    double best;                /* best objective within the job */
    int64_t step;               /* last reported step */
    tp_buf_t last;              /* last report line */
    tp_trial_job_t job;         /* its current job */
    tp_trial_attempt_t current; /* its current attempt */
    tp_assign_t where;          /* where the current attempt runs (where.placed); a multi-node
                                   trial's first node */
    char where_text[128];   /* where its current (or last) attempt runs: "node:gpu,gpu", "local" */
    int gpus;               /* GPUs of its current (or last) attempt */
    int procs;              /* processes per node of the current attempt */
    json_t *gpu_env;        /* the GPU environment of the current attempt, owned */
    tp_trial_ranks_t ranks; /* the processes of its current attempt */
    tp_trial_pace_t pace;   /* its step timing */
    tp_trial_demand_t demand;     /* its demand and what it measured (placement.h: placement.c,
                                     profiling.c) */
    tp_trial_elastic_t elastic;   /* an elastic trial's sizes, costs and curve (elastic.h:
                                     elastic.c) */
    tp_trial_fluid_t fluid;       /* its Fluid group, share and load (groups.h: groups.c) */
    tp_trial_fusion_t fusion;     /* the fused process it runs in (fuse.h: fuse.c) */
    tp_trial_deadline_t deadline; /* its attempt timed on the run's clock (deadline.h:
                                     deadline.c) */
} trial_t;

/* What a transition records besides the new state. */
typedef struct tp_transition {
    const char *error;       /* what went wrong with the attempt, NULL if nothing */
    int has_exit;            /* the attempt's exit status is known */
    int exit_code;           /* its exit code, -1 if signaled */
    int signal;              /* its terminating signal, 0 if none */
    const char *detail;      /* a note for the event (not an error), or NULL */
    tp_requeue_t requeue;    /* running -> pending: why */
    const char *stderr_tail; /* a failed attempt: the last lines of its stderr, or NULL */
    double at;               /* wall time; 0: now */
} tp_transition_t;

typedef struct tp_trials {
    trial_t **by_id; /* by trial number; NULL for numbers not (yet) used */
    size_t n, cap;   /* numbers < n are in use or holes */
    int64_t *heap;   /* pending trials waiting for a slot (min-heap of ids) */
    size_t nheap, capheap;
    int count[TP_TRIAL_NSTATES]; /* trials in each state */
    int retried;                 /* attempts that failed and were retried, this run */
    int interrupted;             /* attempts interrupted, this run */
    int regrown;                 /* attempts out of GPU memory placed again with more, this run */
    int resized;                 /* elastic attempts paused to run again with another GPU count */
    int bugs;                    /* illegal transitions refused */
    double step_sum;             /* sum of the trials' measured step_s (tp__trial_set_step_s) */
    size_t step_n;               /* trials with one */
    double *group_step_sum;      /* the same per demand group (trial_t.demand.group),
                                    grown as needed */
    size_t *group_step_n;
    size_t ngroups;
    tp_journal_t *journal; /* where changes are journaled; borrowed */
} tp_trials_t;

const char *tp__trial_state_name(tp_trial_state_t state);
/* The state named `name`; -1 if no state has that name. */
int tp__trial_state_from_name(const char *name);
/* Whether from -> to is in the table. O(1). */
int tp__trial_transition_ok(tp_trial_state_t from, tp_trial_state_t to);

/* A new trial (pending, not queued: the caller runs it or queues it),
 * journaled as added. ts owns it. */
trial_t *tp__trials_add(tp_trials_t *ts, int64_t id, json_t *params, double at);
/* A trial read back from the store in `state` (nothing journaled). */
trial_t *tp__trials_load(tp_trials_t *ts, int64_t id, json_t *params, tp_trial_state_t state);
trial_t *tp__trials_get(const tp_trials_t *ts, int64_t id); /* NULL if no such trial */
/* One past the largest trial number in use: every trial's id is below it (holes
 * are NULL to tp__trials_get). O(1). */
size_t tp__trials_n(const tp_trials_t *ts);
/* How many trials are in `state`. O(1). */
int tp__trials_in(const tp_trials_t *ts, tp_trial_state_t state);
/* The same for every state, indexed by tp_trial_state_t (TP_TRIAL_NSTATES). O(1). */
const int *tp__trials_counts(const tp_trials_t *ts);
/* How many pending trials wait in the queue for a slot. O(1). */
size_t tp__trials_queued(const tp_trials_t *ts);
void tp__trials_free(tp_trials_t *ts);

/* The one way a trial changes state. Checks the table (an illegal change
 * logs a bug, counts it and returns -EINVAL, changing nothing), journals
 * the change into the open transaction (an attempt's end with what it
 * reported, or a plain state change), updates the counts, and queues a
 * trial that became pending. 0, -EINVAL, or the store's error (recorded in
 * the journal). O(log pending). */
int tp__trial_set_state(tp_trials_t *ts, trial_t *t, tp_trial_state_t to,
                        const tp_transition_t *how);
/* A trial the search closed (stopped while it waited for a promotion, the
 * search over) is waiting again (closed 0), or closed again (closed 1):
 * the experiment was extended, so its scheduler may promote it. In memory
 * only, for the store says "stopped" in both cases: a promotion journals
 * its change from paused as any other, and a trial closed again that was
 * never promoted has nothing new to record. Counts kept. O(1). */
void tp__trial_set_closed(tp_trials_t *ts, trial_t *t, int closed);

/* Record t's measured seconds per step (> 0), at the GPU count it holds
 * now (t->gpus) and under the (harmonic) mean load noted since its
 * attempt's first report with a step (step_load); the one way step_s changes,
 * so that the means below are kept as it goes (the run's, and its demand
 * group's when it has one). O(1), amortised. */
void tp__trial_set_step_s(tp_trials_t *ts, trial_t *t, double step_s);
/* t's job is written by orchestrator.c (hands it out, decides it) and here; other files
 * go through these. O(1) each. restore: as the store last recorded it (a resumed or
 * seeded trial: its rung, 0 below the first, and budget); set_why: the last word on
 * it; set_checkpoint: its checkpoint is at step (its own report, or a donor's);
 * stop_early: the scheduler stopped it while it ran, saying why. */
void tp__trial_job_restore(trial_t *t, int rung, double budget);
void tp__trial_job_set_why(trial_t *t, const char *why);
void tp__trial_job_set_checkpoint(trial_t *t, int64_t step);
void tp__trial_job_stop_early(trial_t *t, const char *why);
/* A new attempt: its reports time steps afresh (first report, first step). O(1). */
void tp__trial_pace_restart(trial_t *t);
/* Steps t's job has left past its checkpoint (its budget less the largest
 * step it reported); 0 without a budget, below 0 past it. O(1). */
double tp__trial_steps_left(const trial_t *t);
/* Seconds t is expected to run until its job's budget: its measured
 * seconds per step, else the mean over its demand group's trials that have
 * one (the same profile_by values: the same model and batch, as a profiler
 * would measure them), else the mean over the run's, times the steps its
 * job has left past its checkpoint. 0 (unknown) without a budget or any
 * step time. The placer's expected duration (decreasing orders, vpack's
 * makespan runs). O(1). */
double tp__trial_expected_s(const tp_trials_t *ts, const trial_t *t);

/* The pending queue, lowest id first. push: put a pending trial (back) in
 * the queue; pop: the next one, NULL if none. O(log pending). */
void tp__trials_push(tp_trials_t *ts, trial_t *t);
trial_t *tp__trials_pop(tp_trials_t *ts);

#endif
