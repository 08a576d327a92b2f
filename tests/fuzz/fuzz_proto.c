/* libFuzzer harness: the agent protocol decoder. The input is the byte
 * stream, fed in pieces whose sizes come from the stream itself, so that
 * frames split at any byte are tried; every whole message is re-encoded and
 * decoded into its typed struct (tp__proto_decode), whose members are read. */
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "proto/proto.h"

/* Decode m as the orchestrator does and read what the decoder promised:
 * every string of a decoded message is a C string, every array as long as
 * it says. A sum keeps the reads from being optimised away. */
static size_t touch_typed(const tp_msg_t *m) {
    tp_agent_msg_t am;
    tp_error_t err;
    size_t sum = 0;
    if (tp__proto_decode(m, &am, &err) != 0) return strlen(err.msg);
    switch (am.kind) {
    case TP_MSG_HELLO:
        sum += strlen(am.hello.node);
        for (size_t i = 0; i < am.hello.ngpus; i++)
            sum += (size_t)am.hello.gpus[i].index + (am.hello.gpus[i].name ? 1 : 0);
        break;
    case TP_MSG_MPS:
        for (size_t i = 0; i < am.mps.nfailed; i++)
            sum += strlen(am.mps.failed[i].error);
        break;
    case TP_MSG_USAGE:
        for (size_t i = 0; i < am.usage.ngpus; i++)
            sum += (size_t)am.usage.gpus[i].foreign_mib;
        for (size_t i = 0; i < am.usage.ntrials; i++)
            sum += (size_t)am.usage.trials[i].used_mib;
        break;
    case TP_MSG_ERROR:
        sum += strlen(am.error.message);
        break;
    case TP_MSG_REPORT:
        sum += strlen(am.report.channel) + am.raw->payload_len;
        break;
    case TP_MSG_GARBAGE:
        sum += strlen(am.garbage.what);
        break;
    case TP_MSG_LOG:
        sum += strlen(am.log.stream);
        break;
    case TP_MSG_EXITED:
        sum += strlen(am.exited.status) + strlen(am.exited.error);
        break;
    default:
        break;
    }
    tp__proto_agent_msg_free(&am);
    return sum;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    tp_proto_decoder_t d;
    tp__proto_decoder_init(&d);
    size_t at = 0;
    int dead = 0;
    while (at < size && !dead) {
        size_t piece = 1 + data[at] % 64;
        if (piece > size - at) piece = size - at;
        tp__proto_feed(&d, data + at, piece);
        at += piece;
        for (;;) {
            tp_msg_t m;
            tp_error_t err;
            int rc = tp__proto_next(&d, &m, &err);
            if (rc < 0) dead = 1;
            if (rc != 1) break;
            tp_buf_t out;
            tp__buf_init(&out);
            tp__proto_encode(&out, m.head, m.payload, m.payload_len);
            tp__buf_free(&out);
            touch_typed(&m);
            json_decref(m.head);
        }
    }
    tp__proto_decoder_free(&d);
    return 0;
}
