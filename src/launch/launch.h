/* launch: how agents start, and the framed connection the orchestrator
 * keeps to each. Today: the local agent, a child process speaking the
 * protocol on its stdin/stdout. ssh and srun start the same agent elsewhere. */
#ifndef TP_LAUNCH_H
#define TP_LAUNCH_H

#include <uv.h>

#include "proto/proto.h"
#include "util/util.h"

typedef struct tp_agent_conn tp_agent_conn_t;

/* Called for each message from the agent; msg->head is released after. */
typedef void (*tp_conn_msg_cb)(tp_agent_conn_t *c, const tp_msg_t *msg);
/* Called once when the agent is gone (process exit, stream closed or a
 * protocol error); why says which. No message callback follows. */
typedef void (*tp_conn_lost_cb)(tp_agent_conn_t *c, const char *why);

struct tp_agent_conn {
    uv_loop_t *loop;         /* borrowed */
    uv_process_t proc;       /* the agent process (local launch) */
    uv_pipe_t to_agent;      /* its stdin */
    uv_pipe_t from_agent;    /* its stdout */
    uv_pipe_t agent_err;     /* its stderr (local agent): relayed to the log line by line */
    tp_buf_t err_line;       /* a line of it not yet ended */
    int relay_err;           /* agent_err is in use */
    int spawned;             /* proc was started (and must be closed) */
    tp_proto_decoder_t dec;  /* frames coming back */
    tp_buf_t out;            /* frames not yet handed to libuv */
    size_t in_flight;        /* bytes handed to libuv, not yet written */
    tp_conn_msg_cb on_msg;   /* message callback */
    tp_conn_lost_cb on_lost; /* loss callback */
    void *data;              /* the owner's */
    int open_handles;        /* handles not yet closed */
    void (*on_closed)(tp_agent_conn_t *c); /* tp__conn_close's done callback */
    int lost;                              /* on_lost has fired */
    int closing;                           /* tp__conn_close called */
    int64_t exit_status;                   /* agent's exit status once it exited */
    int term_signal;                       /* agent's terminating signal */
    int exited;                            /* agent process has exited */
    char why[256];                         /* why it was lost */
};

/* Start argv[0] (searched in PATH) with argv as a child in its own session
 * (terminal signals reach only the orchestrator) and connect to its
 * stdin/stdout: `tunepack agent` itself, or a command that runs it
 * somewhere, such as `ssh -o BatchMode=yes HOST tunepack agent` or `srun
 * --overlap -N1 -n1 -w NODE tunepack agent`. relay_err: its stderr is read
 * and each line goes to the log (tp__log_line), where the live view keeps
 * it above itself; else it writes to ours. For the local agent only: a
 * remote command that writes to its stderr after the pipe is closed at the
 * end would get a SIGPIPE. 0 or -errno with err filled; on failure no
 * callback fires. */
int tp__launch_argv(uv_loop_t *loop, char *const *argv, int relay_err, tp_agent_conn_t *c,
                    tp_conn_msg_cb on_msg, tp_conn_lost_cb on_lost, void *data, tp_error_t *err);
/* Queue a message; it is written as soon as the stream takes it. */
int tp__conn_send(tp_agent_conn_t *c, const json_t *head, const void *payload, size_t len);
/* The agent is taken for lost (it went silent): kill the command that
 * carries it (the agent, ssh or srun) and report the loss with why. */
void tp__conn_kill(tp_agent_conn_t *c, const char *why);
/* Close the handles; done_cb (may be NULL) fires when all are closed. The
 * agent process, if alive, is left to exit on its own input's EOF. */
void tp__conn_close(tp_agent_conn_t *c, void (*done_cb)(tp_agent_conn_t *c));

/* ---- Slurm (launch_slurm.c): short commands, run without a shell -------- */
/* Run argv (PATH searched, stdin /dev/null), its stdout and stderr into out
 * (NUL-terminated, truncated to n). 0 when it exited 0; else -errno with
 * err naming the command and what it said. Blocks until it exits. */
int tp__run_capture(char *const *argv, char *out, size_t n, tp_error_t *err);
/* The node names of a Slurm node list ("n[1-3]"), through scontrol; a
 * malloc'd NULL-terminated array of malloc'd names. */
int tp__slurm_nodes(const char *nodelist, char ***nodes, size_t *count, tp_error_t *err);

/* An allocation tunepack asks for itself. */
typedef struct tp_slurm_request {
    int nodes;                                    /* nodes */
    int gpus_per_node;                            /* --gres=gpu:N, 0: none */
    int cpus_per_node;                            /* --cpus-per-task, 0: Slurm's default */
    const char *partition, *account, *time_limit; /* NULL: Slurm's defaults */
    char *const *extra;                           /* more sbatch arguments */
    size_t nextra;
    const char *exclude; /* nodes not to use ("n1,n2"), NULL: none */
} tp_slurm_request_t;
/* Submit a placeholder job that holds the nodes; its id into jobid. */
int tp__slurm_request(const tp_slurm_request_t *q, char *jobid, size_t n, tp_error_t *err);
/* The job's state ("PENDING", "RUNNING"), reason ("Priority") and node list. */
int tp__slurm_job_state(const char *jobid, char *state, size_t sn, char *reason, size_t rn,
                        char *nodelist, size_t nn, tp_error_t *err);
/* Give the allocation back (scancel). */
int tp__slurm_release(const char *jobid, tp_error_t *err);

#endif
