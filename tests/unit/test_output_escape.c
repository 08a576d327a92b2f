/* Unit tests for escape.c: text from trials made safe for terminals, logs and spreadsheets. */
#include <stdlib.h>
#include <string.h>

#include "tp_test.h"
#include "util/util.h"

static void check_escape(int *tp_failed_, const char *in, int flags, const char *want) {
    char *got = tp__escape(in, flags);
    TP_CHECK_STR(got, want);
    free(got);
}
#define CHECK_ESCAPE(in, flags, want) check_escape(tp_failed_, in, flags, want)

TP_TEST(test_escape_shows_every_control_character_by_its_name_or_code) {
    CHECK_ESCAPE("\x1b[2J", 0, "\\x1b[2J");                                /* screen clear */
    CHECK_ESCAPE("\x1b]52;c;cHduZWQ=\x07", 0, "\\x1b]52;c;cHduZWQ=\\x07"); /* OSC 52 */
    CHECK_ESCAPE("a\tb\r\nc\x7f", 0, "a\\tb\\r\\nc\\x7f");
    CHECK_ESCAPE("a\nb", TP_ESC_KEEP_NL, "a\nb");
    CHECK_ESCAPE("a\rb", TP_ESC_KEEP_NL, "a\\rb");
    CHECK_ESCAPE("\x01\x1f", 0, "\\x01\\x1f");
    CHECK_ESCAPE(NULL, 0, "");
    CHECK_ESCAPE("", 0, "");
}

TP_TEST(test_escape_keeps_utf8_text_and_shows_c1_bidi_and_stray_bytes) {
    CHECK_ESCAPE("naïve 日本 🙂 \\ path", 0, "naïve 日本 🙂 \\ path");
    CHECK_ESCAPE("\xc2\x9b"
                 "31m",
                 0, "\\u009b31m"); /* C1 CSI as UTF-8 */
    CHECK_ESCAPE("\x9b"
                 "31m",
                 0, "\\x9b31m"); /* a bare 8-bit CSI: not UTF-8 */
    CHECK_ESCAPE("a\xe2\x80\xae"
                 "b",
                 0, "a\\u202eb"); /* right-to-left override */
    CHECK_ESCAPE("\xc0\xaf\xed\xa0\x80", 0, "\\xc0\\xaf\\xed\\xa0\\x80"); /* overlong, surrogate */
    CHECK_ESCAPE("\xe6\x97", 0, "\\xe6\\x97");                            /* cut short */
}

TP_TEST(test_escape_into_never_cuts_an_escape_or_a_character) {
    char out[16];
    tp__escape_into(out, 9, "abc\x1b[2J", 0);
    TP_CHECK_STR(out, "abc\\x1b["); /* 8 bytes fit: the escape whole, then '[' */
    tp__escape_into(out, 6, "abc\x1b[2J", 0);
    TP_CHECK_STR(out, "abc"); /* \x1b does not fit in the 2 left: left out whole */
    tp__escape_into(out, 6, "ab日本", 0);
    TP_CHECK_STR(out, "ab日");
    tp__escape_into(out, 5, "ab日本", 0);
    TP_CHECK_STR(out, "ab");
}

TP_TEST(test_buf_escape_appends_to_what_is_there) {
    tp_buf_t b;
    tp__buf_init(&b);
    tp__buf_puts(&b, "tail: ");
    TP_CHECK_INT(tp__buf_escape(&b,
                                "x\x1b"
                                "y\0z",
                                5, 0),
                 0);
    TP_CHECK_INT(b.len, strlen("tail: x\\x1by\\x00z"));
    TP_CHECK(memcmp(b.data, "tail: x\\x1by\\x00z", b.len) == 0);
    tp__buf_free(&b);
}

TP_TEST(test_cell_is_formula_but_a_plain_number_is_not) {
    static const char *const formulas[] = {"=1+1",  "+cmd|' /C calc'!A0",
                                           "-2+3",  "@SUM(A1)",
                                           "\tx",   "\rx",
                                           "-",     "+",
                                           "-e5",   "-1e",
                                           "--1",   "-1.2.3",
                                           "-0x10", "-inf",
                                           "-nan"};
    for (size_t i = 0; i < TP_ARRAY_LEN(formulas); i++)
        TP_CHECK(tp__cell_is_formula(formulas[i]));
    static const char *const plain[] = {"-0.5",  "+1e-3", "-12", "-.5", "-5.",
                                        "1e300", "abc",   "",    "0",   "a=b"};
    for (size_t i = 0; i < TP_ARRAY_LEN(plain); i++)
        TP_CHECK(!tp__cell_is_formula(plain[i]));
    TP_CHECK(!tp__cell_is_formula(NULL));
}

int main(void) {
    return tp_test_main();
}
