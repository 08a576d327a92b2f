/* Tests for proto: framing round trips, incremental decoding, and rejection
 * of every malformed frame with a message a person can act on. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "proto/proto.h"
#include "tp_test.h"

/* Raw frame from explicit lengths, to forge malformed input. */
static void raw_frame(tp_buf_t *b, uint32_t body_len, uint32_t json_len, const char *json,
                      size_t n) {
    unsigned char h[8] = {(unsigned char)(body_len >> 24), (unsigned char)(body_len >> 16),
                          (unsigned char)(body_len >> 8),  (unsigned char)body_len,
                          (unsigned char)(json_len >> 24), (unsigned char)(json_len >> 16),
                          (unsigned char)(json_len >> 8),  (unsigned char)json_len};
    tp__buf_append(b, h, 8);
    tp__buf_append(b, json, n);
}

/* Decode exactly one malformed frame and return the error code and text. */
static int decode_bad(const tp_buf_t *b, tp_error_t *err) {
    tp_proto_decoder_t d;
    tp__proto_decoder_init(&d);
    tp__proto_feed(&d, b->data, b->len);
    tp_msg_t m;
    memset(err, 0, sizeof *err);
    int rc = tp__proto_next(&d, &m, err);
    if (rc == 1) json_decref(m.head);
    tp__proto_decoder_free(&d);
    return rc;
}

TP_TEST(test_round_trip_without_payload) {
    tp_buf_t b;
    tp__buf_init(&b);
    json_t *h = json_pack("{s:s, s:i, s:s}", "type", "hello", "protocol", 1, "token", "abc");
    TP_CHECK_INT(tp__proto_encode(&b, h, NULL, 0), 0);
    json_decref(h);
    tp_proto_decoder_t d;
    tp__proto_decoder_init(&d);
    TP_CHECK_INT(tp__proto_feed(&d, b.data, b.len), 0);
    tp_msg_t m;
    tp_error_t err;
    TP_CHECK_INT(tp__proto_next(&d, &m, &err), 1);
    TP_CHECK_STR(m.type, "hello");
    TP_CHECK_INT(json_integer_value(json_object_get(m.head, "protocol")), 1);
    TP_CHECK_STR(json_string_value(json_object_get(m.head, "token")), "abc");
    TP_CHECK_INT(m.payload_len, 0);
    json_decref(m.head);
    TP_CHECK_INT(tp__proto_next(&d, &m, &err), 0);
    tp__proto_decoder_free(&d);
    tp__buf_free(&b);
}

TP_TEST(test_round_trip_with_binary_payload) {
    tp_buf_t b;
    tp__buf_init(&b);
    const char payload[] = "line one\n\0binary\xff\n";
    json_t *h = json_pack("{s:s, s:i}", "type", "report", "trial", 7);
    TP_CHECK_INT(tp__proto_encode(&b, h, payload, sizeof payload - 1), 0);
    json_decref(h);
    tp_proto_decoder_t d;
    tp__proto_decoder_init(&d);
    tp__proto_feed(&d, b.data, b.len);
    tp_msg_t m;
    TP_CHECK_INT(tp__proto_next(&d, &m, NULL), 1);
    TP_CHECK_STR(m.type, "report");
    TP_CHECK_INT(m.payload_len, sizeof payload - 1);
    TP_CHECK(memcmp(m.payload, payload, sizeof payload - 1) == 0);
    json_decref(m.head);
    tp__proto_decoder_free(&d);
    tp__buf_free(&b);
}

TP_TEST(test_byte_at_a_time_feeding_yields_each_frame_once) {
    tp_buf_t b;
    tp__buf_init(&b);
    for (int i = 0; i < 5; i++) {
        json_t *h = json_pack("{s:s, s:i}", "type", "t", "i", i);
        tp__proto_encode(&b, h, "xy", (size_t)i % 3);
        json_decref(h);
    }
    tp_proto_decoder_t d;
    tp__proto_decoder_init(&d);
    int got = 0;
    for (size_t k = 0; k < b.len; k++) {
        tp__proto_feed(&d, b.data + k, 1);
        tp_msg_t m;
        int rc;
        while ((rc = tp__proto_next(&d, &m, NULL)) == 1) {
            TP_CHECK_INT(json_integer_value(json_object_get(m.head, "i")), got);
            TP_CHECK_INT(m.payload_len, got % 3);
            json_decref(m.head);
            got++;
        }
        TP_CHECK_INT(rc, 0);
    }
    TP_CHECK_INT(got, 5);
    tp__proto_decoder_free(&d);
    tp__buf_free(&b);
}

TP_TEST(test_several_frames_in_one_feed) {
    tp_buf_t b;
    tp__buf_init(&b);
    for (int i = 0; i < 100; i++) {
        json_t *h = json_pack("{s:s, s:i}", "type", "x", "i", i);
        tp__proto_encode(&b, h, "p\n", 2);
        json_decref(h);
    }
    tp_proto_decoder_t d;
    tp__proto_decoder_init(&d);
    /* Two feeds split mid-frame, so compaction runs with a partial frame kept. */
    size_t half = b.len / 2 + 3;
    tp__proto_feed(&d, b.data, half);
    tp_msg_t m;
    int got = 0;
    while (tp__proto_next(&d, &m, NULL) == 1) {
        TP_CHECK_INT(json_integer_value(json_object_get(m.head, "i")), got++);
        json_decref(m.head);
    }
    tp__proto_feed(&d, b.data + half, b.len - half);
    while (tp__proto_next(&d, &m, NULL) == 1) {
        TP_CHECK_INT(json_integer_value(json_object_get(m.head, "i")), got++);
        TP_CHECK(m.payload_len == 2 && memcmp(m.payload, "p\n", 2) == 0);
        json_decref(m.head);
    }
    TP_CHECK_INT(got, 100);
    tp__proto_decoder_free(&d);
    tp__buf_free(&b);
}

TP_TEST(test_encode_rejects_non_object) {
    tp_buf_t b;
    tp__buf_init(&b);
    json_t *a = json_array();
    TP_CHECK(tp__proto_encode(&b, a, NULL, 0) < 0);
    json_decref(a);
    tp__buf_free(&b);
}

TP_TEST(test_frame_over_limit_is_rejected) {
    tp_buf_t b;
    tp__buf_init(&b);
    raw_frame(&b, TP_PROTO_MAX_FRAME + 1, 2, "{}", 2);
    tp_error_t err;
    TP_CHECK(decode_bad(&b, &err) < 0);
    TP_CHECK_CONTAINS(err.msg, "exceeds the limit");
    tp__buf_free(&b);
}

TP_TEST(test_json_len_beyond_body_is_rejected) {
    tp_buf_t b;
    tp__buf_init(&b);
    raw_frame(&b, 4 + 14, 50, "{\"type\":\"x\"}..", 14);
    tp_error_t err;
    TP_CHECK(decode_bad(&b, &err) < 0);
    TP_CHECK_CONTAINS(err.msg, "JSON length");
    tp__buf_free(&b);
}

TP_TEST(test_invalid_json_is_rejected) {
    tp_buf_t b;
    tp__buf_init(&b);
    raw_frame(&b, 4 + 9, 9, "{\"type\":", 9);
    tp_error_t err;
    TP_CHECK(decode_bad(&b, &err) < 0);
    TP_CHECK_CONTAINS(err.msg, "not valid JSON");
    tp__buf_free(&b);
}

TP_TEST(test_non_object_is_rejected) {
    tp_buf_t b;
    tp__buf_init(&b);
    raw_frame(&b, 4 + 7, 7, "[1,2,3]", 7);
    tp_error_t err;
    TP_CHECK(decode_bad(&b, &err) < 0);
    TP_CHECK_CONTAINS(err.msg, "not an object");
    tp__buf_free(&b);
}

TP_TEST(test_missing_or_non_string_type_is_rejected) {
    tp_buf_t b;
    tp__buf_init(&b);
    raw_frame(&b, 4 + 7, 7, "{\"a\":1}", 7);
    tp_error_t err;
    TP_CHECK(decode_bad(&b, &err) < 0);
    TP_CHECK_CONTAINS(err.msg, "\"type\"");
    tp__buf_reset(&b);
    raw_frame(&b, 4 + 10, 10, "{\"type\":3}", 10);
    TP_CHECK(decode_bad(&b, &err) < 0);
    TP_CHECK_CONTAINS(err.msg, "\"type\"");
    tp__buf_free(&b);
}

TP_TEST(test_short_body_is_rejected) {
    tp_buf_t b;
    tp__buf_init(&b);
    unsigned char h[6] = {0, 0, 0, 2, 0, 0};
    tp__buf_append(&b, h, sizeof h);
    tp_error_t err;
    TP_CHECK(decode_bad(&b, &err) < 0);
    tp__buf_free(&b);
}

TP_TEST(test_any_byte_string_round_trips_nul_in_json_and_raw_bytes_in_payload) {
    tp_buf_t b;
    tp__buf_init(&b);
    json_t *h = json_object();
    json_object_set_new(h, "type", json_string("log"));
    json_object_set_new(h, "text", json_stringn("a\0b", 3));
    const char payload[] = {'\xff', '\xfe', 0, '\xc3', '(', '\x80', 0};
    TP_CHECK_INT(tp__proto_encode(&b, h, payload, sizeof payload), 0);
    json_decref(h);
    tp_proto_decoder_t d;
    tp__proto_decoder_init(&d);
    tp__proto_feed(&d, b.data, b.len);
    tp_msg_t m;
    tp_error_t err;
    TP_CHECK_INT(tp__proto_next(&d, &m, &err), 1);
    json_t *t = json_object_get(m.head, "text");
    TP_CHECK_INT((long long)json_string_length(t), 3);
    TP_CHECK(memcmp(json_string_value(t), "a\0b", 3) == 0);
    TP_CHECK_INT((long long)m.payload_len, (long long)sizeof payload);
    TP_CHECK(memcmp(m.payload, payload, sizeof payload) == 0);
    json_decref(m.head);
    tp__proto_decoder_free(&d);
    tp__buf_free(&b);
}

TP_TEST(test_invalid_utf8_in_the_json_is_an_error_not_a_crash) {
    tp_buf_t b;
    tp__buf_init(&b);
    const char js[] = "{\"type\":\"x\xff\"}";
    raw_frame(&b, 4 + (uint32_t)strlen(js), (uint32_t)strlen(js), js, strlen(js));
    tp_error_t err;
    TP_CHECK(decode_bad(&b, &err) < 0);
    TP_CHECK_CONTAINS(err.msg, "not valid JSON");
    tp__buf_free(&b);
}

int main(void) {
    return tp_test_main();
}
