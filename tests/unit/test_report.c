/* report: parsing both reporting forms, and garbage. */
#include <math.h>
#include <stdint.h>
#include <string.h>

#include "run/run.h"
#include "tp_test.h"

static int parse_json(const char *line, tp_report_t *r, char *why) {
    return tp__report_parse_json(line, strlen(line), "acc", r, why, 256);
}

TP_TEST(test_json_report_gives_step_and_objective) {
    tp_report_t r;
    char why[256];
    TP_CHECK_INT(parse_json("{\"step\": 3, \"acc\": 0.91, \"loss\": 0.2}", &r, why), 0);
    TP_CHECK_INT(r.step, 3);
    TP_CHECK(r.has_value && fabs(r.value - 0.91) < 1e-12);
}

TP_TEST(test_json_report_without_objective_is_kept_without_value) {
    tp_report_t r;
    char why[256];
    TP_CHECK_INT(parse_json("{\"loss\": 0.2}", &r, why), 0);
    TP_CHECK(!r.has_value);
    TP_CHECK(r.step == INT64_MIN);
}

TP_TEST(test_json_garbage_is_rejected_with_a_reason) {
    tp_report_t r;
    char why[256];
    TP_CHECK_INT(parse_json("{\"acc\": NaN}", &r, why), -1);
    TP_CHECK_CONTAINS(why, "not JSON");
    TP_CHECK_INT(parse_json("{\"acc\": Infinity}", &r, why), -1);
    TP_CHECK_INT(parse_json("{\"acc\": 0.5", &r, why), -1);
    TP_CHECK_INT(parse_json("[1, 2]", &r, why), -1);
    TP_CHECK_CONTAINS(why, "not a JSON object");
    TP_CHECK_INT(parse_json("{\"acc\": \"high\"}", &r, why), -1);
    TP_CHECK_CONTAINS(why, "finite number");
    TP_CHECK_INT(parse_json("{\"step\": \"x\", \"acc\": 1}", &r, why), -1);
    TP_CHECK_INT(parse_json("\x01\x02\xff\xfe", &r, why), -1);
    TP_CHECK(strchr(why, '\xff') == NULL); /* the excerpt is printable */
}

TP_TEST(test_kv_line_with_objective_becomes_json) {
    tp_report_t r;
    char why[256];
    tp_buf_t b;
    tp__buf_init(&b);
    const char *line = "step=4 acc=0.75, loss=0.1 note=ok";
    TP_CHECK_INT(tp__report_parse_kv(line, strlen(line), "acc", &r, &b, why, sizeof why), 1);
    TP_CHECK_INT(r.step, 4);
    TP_CHECK(r.has_value && fabs(r.value - 0.75) < 1e-12);
    TP_CHECK_STR(b.data, "{\"step\":4,\"acc\":0.75,\"loss\":0.1,\"note\":\"ok\"}");
    tp__buf_free(&b);
}

TP_TEST(test_kv_line_without_objective_is_not_a_report) {
    tp_report_t r;
    char why[256];
    tp_buf_t b;
    tp__buf_init(&b);
    const char *line = "loss=0.1";
    TP_CHECK_INT(tp__report_parse_kv(line, strlen(line), "acc", &r, &b, why, sizeof why), 0);
    TP_CHECK_INT((long long)b.len, 0);
    const char *prose = "epoch 3 done";
    TP_CHECK_INT(tp__report_parse_kv(prose, strlen(prose), "acc", &r, &b, why, sizeof why), 0);
    tp__buf_free(&b);
}

TP_TEST(test_kv_objective_that_is_not_a_number_is_garbage) {
    tp_report_t r;
    char why[256];
    tp_buf_t b;
    tp__buf_init(&b);
    const char *line = "acc=nan";
    TP_CHECK_INT(tp__report_parse_kv(line, strlen(line), "acc", &r, &b, why, sizeof why), -1);
    TP_CHECK_CONTAINS(why, "finite number");
    const char *inf = "acc=inf";
    TP_CHECK_INT(tp__report_parse_kv(inf, strlen(inf), "acc", &r, &b, why, sizeof why), -1);
    tp__buf_free(&b);
}

TP_TEST(test_huge_or_fractional_step_is_no_step_and_no_undefined_cast) {
    tp_report_t r;
    char why[256];
    TP_CHECK_INT(parse_json("{\"step\": 1e300, \"acc\": 1}", &r, why), -1);
    TP_CHECK_CONTAINS(why, "\"step\" must be an integer");
    TP_CHECK_INT(parse_json("{\"step\": -1e19, \"acc\": 1}", &r, why), -1);
    tp_buf_t b;
    tp__buf_init(&b);
    const char *line = "step=1e300 acc=0.5";
    TP_CHECK_INT(tp__report_parse_kv(line, strlen(line), "acc", &r, &b, why, sizeof why), 1);
    TP_CHECK(r.step == INT64_MIN); /* no step: not cast */
    const char *big = "step=9223372036854775808 acc=0.5";
    TP_CHECK_INT(tp__report_parse_kv(big, strlen(big), "acc", &r, &b, why, sizeof why), 1);
    TP_CHECK(r.step == INT64_MIN);
    const char *fine = "step=12 acc=0.5";
    TP_CHECK_INT(tp__report_parse_kv(fine, strlen(fine), "acc", &r, &b, why, sizeof why), 1);
    TP_CHECK_INT(r.step, 12);
    tp__buf_free(&b);
}

int main(void) {
    return tp_test_main();
}
