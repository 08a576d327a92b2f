/* proto: versioned, length-prefixed messages between orchestrator and agents.
 * Wire format (docs/protocol.md):
 *   frame   := u32be body_len, body            (body_len <= TP_PROTO_MAX_FRAME)
 *   body    := u32be json_len, json, payload   (json: a UTF-8 JSON object with "type")
 *   payload := body_len - 4 - json_len raw bytes (may be empty)
 * The same bytes flow over a local pipe, an ssh channel or an srun step. */
#ifndef TP_PROTO_H
#define TP_PROTO_H

#include <jansson.h>
#include <stddef.h>
#include <stdint.h>

#include "util/util.h"

#define TP_PROTO_VERSION 1
#define TP_PROTO_MAX_FRAME (64u << 20) /* 64 MiB: larger frames are a protocol error */

typedef struct tp_msg {
    json_t *head;        /* the JSON object, owned (json_decref) */
    const char *type;    /* head["type"], borrowed from head */
    const char *payload; /* raw bytes after the JSON, borrowed from the decoder */
    size_t payload_len;  /* bytes of payload */
} tp_msg_t;

/* Append one encoded frame to out. head must be an object with "type".
 * Returns 0 or -ENOMEM / -EMSGSIZE. */
int tp__proto_encode(tp_buf_t *out, const json_t *head, const void *payload, size_t payload_len);

/* Incremental decoder: feed it bytes as they arrive, then pull messages. */
typedef struct tp_proto_decoder {
    tp_buf_t in; /* bytes received, not yet consumed */
    size_t used; /* bytes of `in` consumed by messages already returned */
} tp_proto_decoder_t;

void tp__proto_decoder_init(tp_proto_decoder_t *d);
void tp__proto_decoder_free(tp_proto_decoder_t *d);
int tp__proto_feed(tp_proto_decoder_t *d, const void *data, size_t len);
/* Returns 1 and fills msg when a whole frame is available (msg->payload is
 * valid until the next feed/next call), 0 when more bytes are needed, or a
 * negative code with err filled on a malformed frame (too long, bad JSON,
 * no "type"); the stream is then unusable. Caller json_decref(msg->head). */
int tp__proto_next(tp_proto_decoder_t *d, tp_msg_t *msg, tp_error_t *err);

/* How an attempt ended: the `status` of an `exited` message. */
typedef enum tp_ended {
    TP_ENDED_EXITED,       /* its leader exited by itself (code) */
    TP_ENDED_SIGNALED,     /* killed by a signal it did not ask for (signal) */
    TP_ENDED_TIMEOUT,      /* ran past `timeout` and was stopped */
    TP_ENDED_STOPPED,      /* stopped on request (stop, early stop, resize, deadline) */
    TP_ENDED_PAUSED,       /* exited 0 after a pause request: checkpointed */
    TP_ENDED_SPAWN_FAILED, /* never started (error) */
    TP_ENDED_UNKNOWN,      /* a status this orchestrator does not know */
} tp_ended_t;

/* ---- typed messages: each kind an agent sends, decoded once ------------------
 * tp__proto_decode checks every member a kind has (docs/protocol.md): a
 * required one missing, or any of the wrong JSON type or out of range, is an
 * error that names the kind and the member, and nothing is filled. Strings
 * are borrowed from the message's head (valid while it is); arrays are owned
 * by the decoded message (tp__proto_agent_msg_free). */

typedef enum tp_msg_kind {
    TP_MSG_UNKNOWN, /* a type this orchestrator does not know: ignored */
    TP_MSG_HELLO,
    TP_MSG_MPS,
    TP_MSG_USAGE,
    TP_MSG_ERROR,
    TP_MSG_BYE,
    TP_MSG_PONG,
    TP_MSG_REPORT,
    TP_MSG_GARBAGE,
    TP_MSG_LOG,
    TP_MSG_STARTED,
    TP_MSG_EXITED,
} tp_msg_kind_t;

/* The attempt a report, garbage, log, started or exited is about. */
typedef struct tp_msg_about {
    int64_t trial;   /* trial id */
    int64_t attempt; /* its attempt */
    int rank;        /* process of a multi-process attempt; 0 when absent */
} tp_msg_about_t;

/* One GPU of a `hello` (NVML's view at start-up). */
typedef struct tp_msg_hello_gpu {
    int index;                /* NVML index */
    const char *name;         /* NULL when absent */
    const char *uuid;         /* NULL when absent */
    uint64_t memory_mib;      /* total, 0 when absent */
    uint64_t memory_used_mib; /* in use by anyone at hello */
    int util;                 /* busy percent, -1 when absent */
    int healthy;              /* NVML answered for it */
    const char *error;        /* why not healthy; NULL when absent */
} tp_msg_hello_gpu_t;

typedef struct tp_msg_hello {
    int protocol;             /* TP_PROTO_VERSION of the agent */
    const char *node;         /* host name */
    int cpus;                 /* CPUs for trials */
    uint64_t memory_mib;      /* the node's memory, 0 when absent */
    int64_t pid;              /* the agent's pid, 0 when absent */
    const char *version;      /* NULL when absent */
    int64_t reaped;           /* processes of an earlier run killed, 0 when absent */
    const char *nvml;         /* "ok", "absent", "error: ..."; NULL when absent */
    int mps_control;          /* nvidia-cuda-mps-control found */
    tp_msg_hello_gpu_t *gpus; /* owned; NULL when none */
    size_t ngpus;             /* entries of gpus */
} tp_msg_hello_t;

/* A GPU on which `mps_start` failed. */
typedef struct tp_msg_mps_failure {
    int index;         /* GPU index */
    const char *error; /* why */
} tp_msg_mps_failure_t;

typedef struct tp_msg_mps {
    tp_msg_mps_failure_t *failed; /* owned; NULL when none */
    size_t nfailed;               /* entries of failed */
} tp_msg_mps_t;

/* One GPU of a `usage` sample. */
typedef struct tp_msg_usage_gpu {
    int index;            /* NVML index */
    uint64_t foreign_mib; /* memory held by processes not ours */
    int util;             /* busy percent */
    int healthy;          /* NVML answered for it */
    const char *error;    /* why not healthy; NULL when absent */
} tp_msg_usage_gpu_t;

/* One attempt's process on a GPU, in a `usage` sample. */
typedef struct tp_msg_usage_trial {
    int64_t trial;     /* trial id */
    int64_t attempt;   /* its attempt */
    int gpu;           /* NVML index of the GPU */
    uint64_t used_mib; /* its GPU memory */
    int sm_util;       /* its SM busy percent */
} tp_msg_usage_trial_t;

typedef struct tp_msg_usage {
    tp_msg_usage_gpu_t *gpus;     /* owned; NULL when none */
    size_t ngpus;                 /* entries of gpus */
    tp_msg_usage_trial_t *trials; /* owned; NULL when none */
    size_t ntrials;               /* entries of trials */
    const json_t *gpus_json;      /* "gpus" as sent, borrowed: kept for `tunepack gpus` */
} tp_msg_usage_t;

typedef struct tp_msg_error {
    const char *message; /* why the agent cannot go on */
} tp_msg_error_t;

typedef struct tp_msg_pong {
    int has_t; /* the ping had a time */
    double t;  /* the ping's time, echoed */
} tp_msg_pong_t;

typedef struct tp_msg_report {
    const char *channel; /* "fd" or "stdout" */
    int kv;              /* channel is stdout: name=value lines */
} tp_msg_report_t;

typedef struct tp_msg_garbage {
    const char *channel; /* "fd" or "stdout" */
    const char *what;    /* what could not be a report */
} tp_msg_garbage_t;

typedef struct tp_msg_log {
    const char *stream; /* "stdout" or "stderr" */
    int is_stderr;      /* stream is stderr */
} tp_msg_log_t;

typedef struct tp_msg_started {
    int64_t pid;     /* process group of the attempt */
    int master_port; /* rank 0 with pick_master_port: its MASTER_PORT; 0 when absent */
} tp_msg_started_t;

/* An `exited` message (docs/protocol.md). */
typedef struct tp_exited {
    tp_ended_t ended;   /* the status */
    const char *status; /* as sent ("exited" when absent) */
    int code;           /* exit code; -1 when signaled or unknown */
    int signal;         /* the signal that ended it, 0 if none */
    int oom;            /* its stderr said the GPU ran out of memory */
    const char *error;  /* spawn_failed: why; "" otherwise */
    double duration_s;  /* how long it ran, 0 if unknown */
    double maxrss_mib;  /* the leader's peak resident memory, 0 if unknown */
    double cpu_s;       /* the leader's user + system CPU seconds, 0 if unknown */
} tp_exited_t;

/* One message from an agent, decoded: its kind, the attempt it is about
 * (attempt kinds), and the members of its kind. */
typedef struct tp_agent_msg {
    tp_msg_kind_t kind;   /* which member of the union holds */
    const tp_msg_t *raw;  /* the frame: its head and payload (report, log), borrowed */
    tp_msg_about_t about; /* report, garbage, log, started, exited */
    union {
        tp_msg_hello_t hello;
        tp_msg_mps_t mps;
        tp_msg_usage_t usage;
        tp_msg_error_t error;
        tp_msg_pong_t pong;
        tp_msg_report_t report;
        tp_msg_garbage_t garbage;
        tp_msg_log_t log;
        tp_msg_started_t started;
        tp_exited_t exited;
    };
} tp_agent_msg_t;

/* Decode m into *out (see above). Returns 0, with out->kind TP_MSG_UNKNOWN
 * for a type not listed; or -EPROTO with err naming the kind and member
 * ("protocol: exited: member \"code\" must be an integer, not a string"),
 * out then holding nothing to free. O(members); the caller frees out with
 * tp__proto_agent_msg_free while m is alive. */
int tp__proto_decode(const tp_msg_t *m, tp_agent_msg_t *out, tp_error_t *err);
void tp__proto_agent_msg_free(tp_agent_msg_t *am);
/* The members of an `exited` head alone (a rank's verdict kept for later):
 * absent ones take the defaults above (a missing status is "exited").
 * Returns 0 or -EPROTO as tp__proto_decode. */
int tp__proto_exited(const json_t *head, tp_exited_t *e, tp_error_t *err);
/* Whether the attempt ended well by its own hand: exited 0. */
static inline int tp__exited_ok(const tp_exited_t *e) {
    return e->ended == TP_ENDED_EXITED && e->code == 0;
}

#endif
