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

/* An `exited` message, decoded once (docs/protocol.md). Strings are
 * borrowed from the message's head. */
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

/* Decode an `exited` message's head into *e; absent members take the
 * defaults above (a missing status is "exited"). O(members). */
void tp__proto_exited(const json_t *head, tp_exited_t *e);
/* Whether the attempt ended well by its own hand: exited 0. */
static inline int tp__exited_ok(const tp_exited_t *e) {
    return e->ended == TP_ENDED_EXITED && e->code == 0;
}

#endif
