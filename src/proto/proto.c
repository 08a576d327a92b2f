/* proto: framing of agent-protocol messages (docs/protocol.md).
 * Encoder appends frames to a tp_buf_t; the decoder accumulates bytes and
 * hands out whole messages, compacting its buffer lazily. */
#include "proto/proto.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

static void put_u32be(unsigned char *p, uint32_t v) {
    p[0] = (unsigned char)(v >> 24);
    p[1] = (unsigned char)(v >> 16);
    p[2] = (unsigned char)(v >> 8);
    p[3] = (unsigned char)v;
}

static uint32_t get_u32be(const unsigned char *p) {
    return ((uint32_t)p[0] << 24) | ((uint32_t)p[1] << 16) | ((uint32_t)p[2] << 8) | (uint32_t)p[3];
}

/* Append one frame: u32be body_len, u32be json_len, compact JSON, payload.
 * Returns 0, -EINVAL (head not an object), -ENOMEM or -EMSGSIZE (frame
 * larger than TP_PROTO_MAX_FRAME). O(size of the message). */
int tp__proto_encode(tp_buf_t *out, const json_t *head, const void *payload, size_t payload_len) {
    if (!json_is_object(head)) return -EINVAL;
    char *js = json_dumps(head, JSON_COMPACT);
    if (!js) return -ENOMEM;
    size_t jlen = strlen(js);
    if (jlen > TP_PROTO_MAX_FRAME || payload_len > TP_PROTO_MAX_FRAME ||
        4 + jlen + payload_len > TP_PROTO_MAX_FRAME) {
        free(js);
        return -EMSGSIZE;
    }
    uint32_t body_len = (uint32_t)(4 + jlen + payload_len);
    int rc = tp__buf_reserve(out, 8 + (size_t)body_len);
    if (rc == 0) {
        unsigned char hdr[8];
        put_u32be(hdr, body_len);
        put_u32be(hdr + 4, (uint32_t)jlen);
        rc = tp__buf_append(out, hdr, sizeof hdr);
        if (rc == 0) rc = tp__buf_append(out, js, jlen);
        if (rc == 0 && payload_len > 0) rc = tp__buf_append(out, payload, payload_len);
    }
    free(js);
    return rc < 0 ? rc : 0;
}

void tp__proto_decoder_init(tp_proto_decoder_t *d) {
    tp__buf_init(&d->in);
    d->used = 0;
}

void tp__proto_decoder_free(tp_proto_decoder_t *d) {
    tp__buf_free(&d->in);
    d->used = 0;
}

/* Append received bytes. Consumed bytes are dropped first once they make up
 * more than half of the buffer, so compaction costs O(1) amortized per byte.
 * Returns 0 or -ENOMEM. */
int tp__proto_feed(tp_proto_decoder_t *d, const void *data, size_t len) {
    if (d->used > 0 && (d->used == d->in.len || d->used > d->in.len / 2)) {
        tp__buf_consume(&d->in, d->used);
        d->used = 0;
    }
    if (len == 0) return 0;
    return tp__buf_append(&d->in, data, len) < 0 ? -ENOMEM : 0;
}

/* See proto.h. A frame is parsed in place; strings may hold U+0000 (the
 * receiver decides whether a C string can carry one); the payload points into the
 * decoder's buffer and stays valid until the next feed or next call. */
int tp__proto_next(tp_proto_decoder_t *d, tp_msg_t *msg, tp_error_t *err) {
    memset(msg, 0, sizeof *msg);
    size_t avail = d->in.len - d->used;
    if (avail < 4) return 0;
    const unsigned char *p = (const unsigned char *)d->in.data + d->used;
    uint32_t body_len = get_u32be(p);
    if (body_len > TP_PROTO_MAX_FRAME)
        return tp__errorf(err, -EMSGSIZE,
                          "protocol: frame of %lu bytes exceeds the limit of %lu bytes",
                          (unsigned long)body_len, (unsigned long)TP_PROTO_MAX_FRAME);
    if (body_len < 4)
        return tp__errorf(
            err, -EPROTO,
            "protocol: frame body of %lu bytes is shorter than its 4-byte JSON length",
            (unsigned long)body_len);
    if (avail < 4 + (size_t)body_len) return 0;
    uint32_t json_len = get_u32be(p + 4);
    if (json_len > body_len - 4)
        return tp__errorf(
            err, -EPROTO,
            "protocol: JSON length %lu exceeds the frame body (%lu bytes after the length)",
            (unsigned long)json_len, (unsigned long)(body_len - 4));
    json_error_t jerr;
    json_t *head =
        json_loadb((const char *)p + 8, json_len, JSON_REJECT_DUPLICATES | JSON_ALLOW_NUL, &jerr);
    if (!head)
        return tp__errorf(err, -EPROTO, "protocol: message is not valid JSON: %s (at byte %d)",
                          jerr.text, jerr.position);
    if (!json_is_object(head)) {
        json_decref(head);
        return tp__errorf(err, -EPROTO, "protocol: message is JSON but not an object");
    }
    json_t *type = json_object_get(head, "type");
    if (!json_is_string(type)) {
        json_decref(head);
        return tp__errorf(err, -EPROTO, "protocol: message has no string member \"type\"");
    }
    msg->head = head;
    msg->type = json_string_value(type);
    msg->payload = (const char *)p + 8 + json_len;
    msg->payload_len = body_len - 4 - json_len;
    d->used += 4 + (size_t)body_len;
    return 1;
}
