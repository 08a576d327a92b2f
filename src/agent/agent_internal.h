/* agent internals: the agent's state, one trial attempt's state, and the
 * helpers the agent's files share. Not for use outside src/agent/. */
#ifndef TP_AGENT_INTERNAL_H
#define TP_AGENT_INTERNAL_H

#include <jansson.h>
#include <stdint.h>
#include <sys/resource.h>
#include <sys/types.h>
#include <uv.h>

#include "proto/proto.h"
#include "util/util.h"

#ifndef TP_VERSION
#define TP_VERSION "0.1.0"
#endif

#define TP_AGENT_READ_BUF (64u << 10)   /* bytes per pipe read */
#define TP_AGENT_MAX_LINE (1u << 20)    /* longer report lines are dropped */
#define TP_AGENT_BATCH_MAX (256u << 10) /* flush a report batch past this */
#define TP_AGENT_OUT_HIGH (8u << 20)    /* pause trial pipes above this many unsent bytes */
#define TP_AGENT_OUT_LOW (2u << 20)     /* resume them below this */
#define TP_AGENT_LINGER_S 1.0           /* wait for pipes/group after the leader's exit */
#define TP_AGENT_SWEEP_S 1.0            /* look at adopted orphans at least this often */

typedef struct tp_agent tp_agent_t;
typedef struct tp_trial tp_trial_t;

/* ---- lines.c: splitting a byte stream into lines ------------------------- */
typedef enum { TP_LINES_FD, TP_LINES_STDOUT } tp_lines_kind_t;

/* Called for a dropped line (what: a sentence for `garbage`). */
typedef void (*tp_lines_garbage_fn)(void *ctx, const char *what);

typedef struct tp_lines {
    tp_lines_kind_t kind; /* fd: forward all lines; stdout: only name=value lines */
    tp_buf_t partial;     /* the unterminated tail of the stream so far */
    int discarding;       /* inside a line already over TP_AGENT_MAX_LINE */
    tp_buf_t batch;       /* complete lines waiting to be sent */
} tp_lines_t;

void tp__lines_init(tp_lines_t *l, tp_lines_kind_t kind);
void tp__lines_free(tp_lines_t *l);
/* Split data into lines, appending forwarded ones to l->batch. */
void tp__lines_feed(tp_lines_t *l, const char *data, size_t n, tp_lines_garbage_fn garbage,
                    void *ctx);
/* End of stream: a final unterminated line is completed with '\n'. */
void tp__lines_eof(tp_lines_t *l, tp_lines_garbage_fn garbage, void *ctx);
/* 1 when line (len bytes, no '\n') looks like `name=value ...`. */
int tp__lines_is_kv(const char *line, size_t len);

/* ---- reaper.c: leftovers and zombies -------------------------------------- */
/* SIGKILL every process (not self, not in a live trial's group) whose
 * environment holds TUNEPACK_RUN_TOKEN=<token>, and TUNEPACK_AGENT=<stamp>
 * unless stamp is NULL: at hello (no stamp), what earlier agents of the run
 * left behind; at its end (its own stamp), only this agent's own trials' (an
 * agent whose orchestrator was killed ends while the run's next orchestrator
 * may already run trials with the same token; reaping by token alone there
 * killed them). Returns how many. */
int tp__reap_token(tp_agent_t *a, const char *token, const char *stamp);
/* Kill every process of attempt (trial, attempt) of this agent's run, found
 * by its environment (TUNEPACK_RUN_TOKEN, _TRIAL_ID, _ATTEMPT): those that
 * left the trial's process group (setsid, double fork), never one in the
 * group of a live trial of this agent (another rank of the same attempt).
 * O(processes). Returns how many were killed. */
int tp__reap_attempt(tp_agent_t *a, int64_t trial, int64_t attempt);
/* Reap every exited child: a trial leader's exit goes to its trial; the
 * rest are orphans of trials (the agent is their subreaper). */
void tp__reap_children(tp_agent_t *a);

/* A process the agent knows the owner of, by pid and start time (a reused
 * pid is another process): a descendant of a live attempt's leader when the
 * agent last looked, or (trial -1) one not of a trial, never ended (a child
 * the agent had when it started, an MPS daemon). */
typedef struct tp_seen {
    pid_t pid;
    unsigned long long start; /* clock ticks after boot, from /proc/PID/stat */
    int64_t trial, attempt;   /* its attempt; trial -1: not a trial's */
    int rank;
} tp_seen_t;

/* The agent is a child subreaper: every process orphaned below it (its
 * trials' double forks and setsid() daemons, whatever environment they
 * cleared and fds they closed) becomes its child. Look at each child, find
 * the live attempt it belongs to (the leader itself; a process seen below
 * that leader before; its session or process group, a live leader's; its
 * environment's run token and attempt), and SIGKILL every one of no live
 * attempt, then their children in turn, until none is left; wait (at most a
 * second) for them to die. Records what is below each live attempt for the
 * next call. Returns how many it killed. O(the agent's descendants) reads
 * of /proc. */
int tp__reap_orphans(tp_agent_t *a);
/* What the agent has as children when it starts (before any trial): never a
 * trial's, never ended. */
void tp__orphans_init(tp_agent_t *a);

/* ---- cgroup.c: a cgroup v2 per attempt, where the machine allows ----------- */
void tp__cgroup_init(tp_agent_t *a);                       /* the agent's cgroup, or none */
void tp__cgroup_trial_enter(tp_agent_t *a, tp_trial_t *t); /* the agent in t's, to spawn */
void tp__cgroup_trial_leave(tp_agent_t *a, tp_trial_t *t); /* and back to its own */
void tp__cgroup_trial_kill(tp_trial_t *t);                 /* SIGKILL all of the attempt's */
void tp__cgroup_trial_free(tp_trial_t *t);                 /* kill, remove its cgroup */
void tp__cgroup_fini(tp_agent_t *a);                       /* kill and remove everything */

/* ---- trial.c: one attempt ---------------------------------------------------- */
typedef enum {
    TP_END_NONE = 0, /* ends on its own */
    TP_END_TIMEOUT,  /* timeout_s expired */
    TP_END_STOPPED,  /* stop or shutdown */
} tp_end_reason_t;

typedef enum {
    TP_PIPE_STDOUT = 0,
    TP_PIPE_STDERR = 1,
    TP_PIPE_REPORT = 2,
    TP_NPIPES = 3,
} tp_pipe_id_t;

typedef struct tp_trial_pipe {
    uv_pipe_t h;   /* the agent's end */
    tp_trial_t *t; /* owner */
    int open;      /* not yet uv_close'd */
    int reading;   /* uv_read_start in effect */
} tp_trial_pipe_t;

typedef enum {
    TP_TIMER_NONE,    /* not armed */
    TP_TIMER_TIMEOUT, /* fires at timeout_s: SIGTERM */
    TP_TIMER_GRACE,   /* fires after grace_s: SIGKILL */
    TP_TIMER_LINGER,  /* after the leader's exit: stop waiting for pipes */
    TP_TIMER_PAUSE,   /* after a pause request: stop it if it has not exited */
} tp_timer_phase_t;

struct tp_trial {
    tp_agent_t *a;                    /* the agent */
    tp_trial_t *prev, *next;          /* agent's list of trials */
    int64_t trial, attempt;           /* the attempt's name */
    int rank;                         /* which process of a multi-process attempt, 0 if one */
    int stream_logs;                  /* also send stdout/stderr to the orchestrator (`log`) */
    pid_t pid;                        /* leader pid == process group id */
    tp_trial_pipe_t pipes[TP_NPIPES]; /* stdout, stderr, report */
    uv_timer_t timer;                 /* timeout, grace, linger (see phase) */
    tp_timer_phase_t phase;           /* what the timer does when it fires */
    tp_logfile_t logs[2];             /* stdout.log, stderr.log */
    tp_lines_t fd_lines;              /* report channel lines */
    tp_lines_t out_lines;             /* stdout name=value lines */
    double timeout_s, grace_s;        /* from launch */
    uint64_t t0;                      /* uv_hrtime at start */
    tp_end_reason_t reason;           /* why it is ending, if we ended it */
    int leader_exited;                /* exit_cb seen */
    int64_t exit_code;                /* from exit_cb */
    int term_signal;                  /* from exit_cb */
    int group_gone;                   /* kill(-pid, 0) says ESRCH */
    int linger_expired;               /* gave up waiting for pipes/group */
    int escapes_reaped;               /* its processes outside the group were looked for */
    char *cgroup;                     /* its own cgroup v2 directory, owned; NULL if none */
    int exited_sent;                  /* `exited` queued */
    int handles_open;                 /* handles not yet closed; free at 0 */
    int oom;                          /* stderr said the GPU ran out of memory */
    int ctl_fd;                       /* write end of the trial's control channel, -1 if none */
    int pause_signal;                 /* signal for pause requests, 0: none */
    int pause_requested;              /* `pause` was asked */
    double maxrss_mib;                /* the leader's peak resident memory (wait4), 0 before */
    double cpu_s;                     /* the leader's user + system CPU seconds (wait4) */
    char err_tail[128];               /* last bytes of stderr, for OOM lines split by reads */
    size_t err_tail_len;
};

/* Start one attempt from a `launch` message; sends started/exited. */
void tp__trial_launch(tp_agent_t *a, json_t *msg);
/* Ask it to checkpoint and exit (control channel, optional signal); stop it
 * after its grace if it does not. Its status is then "paused". */
void tp__trial_pause(tp_trial_t *t);
/* A fused attempt: "drop <config>" on its control channel (that configuration stops, the
 * others go on). Nothing once it is ending. */
void tp__trial_drop(tp_trial_t *t, int config);
/* SIGTERM the group, SIGKILL after grace; status becomes reason's. */
void tp__trial_stop(tp_trial_t *t, tp_end_reason_t reason);
/* Stop or resume reading a trial's pipes (output backpressure). */
void tp__trial_set_reading(tp_trial_t *t, int on);
/* The leader exited with wait status `status`. */
void tp__trial_leader_exited(tp_trial_t *t, int status, const struct rusage *ru);
/* SIGCHLD: reap what belongs to lingering groups and finish them. */
void tp__trial_on_sigchld(tp_trial_t *t);
/* A TCP port free on this node now (bound to port 0, then released, as
 * torchrun does for MASTER_PORT); > 0, or -errno. */
int tp__free_port(void);
/* The live attempt (trial, attempt, rank); rank -1: any of its ranks. */
tp_trial_t *tp__trial_find(tp_agent_t *a, int64_t trial, int64_t attempt, int rank);

/* ---- spawn.c: an attempt's process ------------------------------------------ */
/* Start argv in a new session, so its pid is its process group; stdin from
 * /dev/null, stdout, stderr and fd 3 to new pipes whose read ends are
 * returned in fds[i][0], fd 4 the read end of the control pipe whose write
 * end is returned in *ctl_fd. Signal dispositions and mask are reset, and
 * the process is killed when the agent dies (spawn.c). fork, not
 * posix_spawn, for the prctl; the agent is small, and a bare fork loop
 * starts twice the processes a posix_spawnp loop does on this 2-core machine
 * (bench/spawn_ceiling --fork: 1,500 against 740 a second). Returns 0, or
 * -errno once the child is gone (nothing left open then). Blocks until the
 * exec. */
int tp__spawn_trial(char **args, char **env, const char *cwd, int fds[TP_NPIPES][2], int *ctl_fd,
                    pid_t *pid);

/* ---- agent.c ------------------------------------------------------------------ */
/* ---- agent_gpu.c: GPUs, MPS daemons, usage sampling ------------------------ */
/* Add "gpus", "nvml" and "mps_control" to the hello answer r (opens NVML). */
void tp__agent_gpu_hello(tp_agent_t *a, json_t *r);
/* `mps_start`: (re)start one MPS control daemon per listed GPU, one GPU per
 * turn of the loop so that pings are answered meanwhile; answers `mps` once
 * every GPU is done. */
void tp__agent_mps_start(tp_agent_t *a, json_t *m);
/* Stop the MPS daemons this agent started, stop sampling, close NVML. */
void tp__agent_gpu_close(tp_agent_t *a);

struct tp_agent {
    uv_loop_t loop;                          /* the event loop */
    uv_pipe_t in, out;                       /* protocol streams */
    int in_open, out_open;                   /* handles not yet closed */
    uv_signal_t sig_term, sig_int, sig_chld; /* signal watchers */
    tp_proto_decoder_t dec;                  /* input decoder */
    char inbuf[TP_AGENT_READ_BUF];           /* input read buffer */
    char pipebuf[TP_AGENT_READ_BUF];         /* trial pipe reads (each consumed in its read_cb) */
    char *token;                             /* run token from hello, owned; NULL before */
    char stamp[48];                          /* this agent among the run's agents, past and
                                                present ("<pid>-<start ns>"): its trials carry
                                                it as TUNEPACK_AGENT */
    char *cg_root;                           /* cgroup holding the trials' cgroups, owned;
                                                NULL where none can be made (cgroup.c) */
    char *cg_home;                           /* the agent's own cgroup, owned (with cg_root) */
    tp_trial_t *trials;                      /* live attempts (doubly linked) */
    int ntrials;                             /* length of that list */
    size_t out_pending;                      /* bytes queued on `out` not yet written */
    int out_dead;                            /* writing failed: drop further output */
    int paused;                              /* trial pipes paused for backpressure */
    int stopping;                            /* no new launches; finish when trials are gone */
    int send_bye;                            /* send `bye` once trials are gone */
    int finished;                            /* finish() ran */
    int exit_code;                           /* what tp__agent_main returns */
    struct tp_nvml *nvml;                    /* NULL: no NVML on this node */
    char *mps_control;                       /* MPS control program, NULL if none */
    char **mps_dirs;                         /* pipe dirs of the daemons we started, owned */
    size_t nmps;
    struct mps_job *mps_job; /* an `mps_start` under way, one GPU a loop turn (agent_gpu.c) */
    uv_timer_t gpu_timer;    /* usage sampling, while NVML is open */
    int gpu_timer_open;      /* gpu_timer initialised, not yet closed */
    tp_seen_t *seen;         /* known owners of descendants, owned (reaper.c) */
    size_t nseen;
    uv_timer_t sweep_timer; /* tp__reap_orphans every TP_AGENT_SWEEP_S */
    int sweep_open;         /* sweep_timer initialised, not yet closed */
    uv_timer_t hb_timer;    /* checks that the orchestrator is still there */
    int hb_open;            /* hb_timer initialised, not yet closed */
    double hb_timeout_s;    /* silence that means it is gone; 0: no check */
    double heard_at;        /* monotonic time of its last message */
};

/* Queue one message (head is consumed: json_decref'd). Never blocks. */
void tp__agent_send(tp_agent_t *a, json_t *head, const void *payload, size_t n);
/* A protocol error: stop every trial and exit with code 1 (no `bye`). */
void tp__agent_fail(tp_agent_t *a);
/* A trial left the list (its handles are closed): maybe finish shutdown. */
void tp__agent_trial_gone(tp_agent_t *a);

#endif
