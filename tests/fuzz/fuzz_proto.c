/* libFuzzer harness: the agent protocol decoder. The input is the byte
 * stream, fed in pieces whose sizes come from the stream itself, so that
 * frames split at any byte are tried; every whole message is re-encoded. */
#include <stddef.h>
#include <stdint.h>

#include "proto/proto.h"

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
            json_decref(m.head);
        }
    }
    tp__proto_decoder_free(&d);
    return 0;
}
