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
    uv_loop_t *loop;            /* borrowed */
    uv_process_t proc;          /* the agent process (local launch) */
    uv_pipe_t to_agent;         /* its stdin */
    uv_pipe_t from_agent;       /* its stdout */
    tp_proto_decoder_t dec;     /* frames coming back */
    tp_buf_t out;               /* frames not yet handed to libuv */
    size_t in_flight;           /* bytes handed to libuv, not yet written */
    tp_conn_msg_cb on_msg;      /* message callback */
    tp_conn_lost_cb on_lost;    /* loss callback */
    void *data;                 /* the owner's */
    int open_handles;           /* handles not yet closed */
    void (*on_closed)(tp_agent_conn_t *c); /* tp__conn_close's done callback */
    int lost;                   /* on_lost has fired */
    int closing;                /* tp__conn_close called */
    int64_t exit_status;        /* agent's exit status once it exited */
    int term_signal;            /* agent's terminating signal */
    int exited;                 /* agent process has exited */
    char why[256];              /* why it was lost */
};

/* Start `exe agent` as a child in its own session (terminal signals reach
 * only the orchestrator) and connect to it. 0 or -errno with err filled; on
 * failure no callback fires. */
int tp__launch_local(uv_loop_t *loop, const char *exe, tp_agent_conn_t *c, tp_conn_msg_cb on_msg,
                     tp_conn_lost_cb on_lost, void *data, tp_error_t *err);
/* Queue a message; it is written as soon as the stream takes it. */
int tp__conn_send(tp_agent_conn_t *c, const json_t *head, const void *payload, size_t len);
/* Close the handles; done_cb (may be NULL) fires when all are closed. The
 * agent process, if alive, is left to exit on its own input's EOF. */
void tp__conn_close(tp_agent_conn_t *c, void (*done_cb)(tp_agent_conn_t *c));

#endif
