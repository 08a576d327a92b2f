/* escape: text from trials (their output, names, errors) made safe to print
 * on a terminal, into a log file or a CI log, and into a spreadsheet cell.
 *
 * One rule everywhere (docs/output.md): a control character is shown, never
 * sent: \n, \r and \t by those names, the other C0 controls and DEL as \xHH
 * (ESC is \x1b), a C1 control (U+0080..U+009F, which some terminals obey as
 * ESC [ and the like) and a bidirectional override (U+202A..U+202E,
 * U+2066..U+2069, which reorder what a reader sees) as \uHHHH, and a byte
 * that is not part of valid UTF-8 as \xHH. Every other UTF-8 character passes
 * unchanged. A backslash stays a backslash: the text is for reading; the
 * exact bytes are in --json and the logs. */
#include <ctype.h>
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util/util.h"

/* The length of the valid UTF-8 sequence at s (at most n bytes), 0 if the
 * bytes there are not one (overlong forms and surrogates are not). */
static size_t utf8_len(const unsigned char *s, size_t n) {
    size_t len = s[0] >= 0xf0 && s[0] <= 0xf4 ? 4 : s[0] >= 0xe0 ? 3 : s[0] >= 0xc2 ? 2 : 0;
    if (s[0] >= 0xf5 || len == 0 || len > n) return 0;
    for (size_t i = 1; i < len; i++)
        if ((s[i] & 0xc0) != 0x80) return 0;
    if (len == 3 && ((s[0] == 0xe0 && s[1] < 0xa0) || (s[0] == 0xed && s[1] >= 0xa0))) return 0;
    if (len == 4 && ((s[0] == 0xf0 && s[1] < 0x90) || (s[0] == 0xf4 && s[1] >= 0x90))) return 0;
    return len;
}

/* The code point of a valid sequence of len bytes. */
static unsigned code_point(const unsigned char *s, size_t len) {
    unsigned c = len == 2 ? s[0] & 0x1fu : len == 3 ? s[0] & 0x0fu : s[0] & 0x07u;
    for (size_t i = 1; i < len; i++)
        c = (c << 6) | (s[i] & 0x3fu);
    return c;
}

/* Whether code point c is shown as \uHHHH: a C1 control or a bidi override. */
static int shown_escaped(unsigned c) {
    return (c >= 0x80 && c <= 0x9f) || (c >= 0x202a && c <= 0x202e) || (c >= 0x2066 && c <= 0x2069);
}

static const char hex[] = "0123456789abcdef";

/* "\xHH" of byte b into out; 4. */
static size_t hex_escape(unsigned char b, char out[8]) {
    out[0] = '\\', out[1] = 'x', out[2] = hex[b >> 4], out[3] = hex[b & 0xf];
    return 4;
}

/* The escape of the character at s (ascii, or a valid sequence of len
 * bytes) into out; its length, 0 when it passes unchanged. */
static size_t escape_one(const unsigned char *s, size_t len, int flags, char out[8]) {
    if (len > 1) {
        unsigned c = code_point(s, len);
        if (!shown_escaped(c)) return 0;
        out[0] = '\\', out[1] = 'u';
        for (int i = 0; i < 4; i++)
            out[2 + i] = hex[(c >> (12 - 4 * i)) & 0xf];
        return 6;
    }
    unsigned char b = s[0];
    if ((b >= 0x20 && b < 0x7f) || (b == '\n' && (flags & TP_ESC_KEEP_NL))) return 0;
    if (b != '\n' && b != '\r' && b != '\t') return hex_escape(b, out);
    out[0] = '\\', out[1] = b == '\n' ? 'n' : b == '\r' ? 'r' : 't';
    return 2;
}

/* Walk s (n bytes) a character at a time: emit(ud, piece, len, whole) with
 * each run of bytes that pass (whole 0) and each escape (whole 1: never to
 * be cut); stops when emit returns non-zero. O(n). */
typedef int (*emit_fn)(void *ud, const char *piece, size_t len, int whole);
static void walk(const char *s, size_t n, int flags, emit_fn emit, void *ud) {
    const unsigned char *p = (const unsigned char *)s, *end = p + n, *run = p;
    char e[8];
    while (p < end) {
        size_t len = *p < 0x80 ? 1 : utf8_len(p, (size_t)(end - p));
        size_t k = len ? escape_one(p, len, flags, e) : hex_escape(*p, e); /* 0: not UTF-8 */
        size_t step = len ? len : 1;
        if (k == 0) {
            p += step;
            continue;
        }
        if (p > run && emit(ud, (const char *)run, (size_t)(p - run), 0)) return;
        if (emit(ud, e, k, 1)) return;
        p += step;
        run = p;
    }
    if (p > run) emit(ud, (const char *)run, (size_t)(p - run), 0);
}

static int to_buf(void *ud, const char *piece, size_t len, int whole) {
    (void)whole;
    return tp__buf_append(ud, piece, len) != 0;
}

int tp__buf_escape(tp_buf_t *b, const char *s, size_t n, int flags) {
    size_t before = b->len;
    if (tp__buf_reserve(b, n + 1) != 0) return -ENOMEM;
    walk(s ? s : "", s ? n : 0, flags, to_buf, b);
    if (b->len == before) tp__buf_append(b, "", 0); /* NUL-terminated even when empty */
    return 0;
}

char *tp__escape(const char *s, int flags) {
    tp_buf_t b;
    tp__buf_init(&b);
    tp__buf_escape(&b, s, s ? strlen(s) : 0, flags);
    return tp__buf_steal(&b);
}

int tp__fprintf_escaped(FILE *f, int flags, const char *fmt, ...) {
    va_list ap, again;
    va_start(ap, fmt);
    va_copy(again, ap);
    char small[512], *text = small;
    int n = vsnprintf(small, sizeof small, fmt, ap);
    if (n >= (int)sizeof small) { /* rare: a long value */
        text = tp__xmalloc((size_t)n + 1);
        vsnprintf(text, (size_t)n + 1, fmt, again);
    }
    va_end(again);
    va_end(ap);
    tp_buf_t shown;
    tp__buf_init(&shown);
    if (n > 0) tp__buf_escape(&shown, text, (size_t)n, flags & TP_ESC_KEEP_NL);
    if (flags & TP_ESC_LINE) tp__buf_append(&shown, "\n", 1);
    int rc = n < 0 ? n : (int)fwrite(shown.data, 1, shown.len, f);
    if (text != small) free(text);
    tp__buf_free(&shown);
    return rc;
}

typedef struct fixed {
    char *out;
    size_t left; /* room before the NUL */
} fixed_t;

/* A piece goes in whole or not at all: no escape and no UTF-8 character is cut. */
static int to_fixed(void *ud, const char *piece, size_t len, int whole) {
    fixed_t *f = ud;
    if (len > f->left && !whole) { /* a run: as much as fits, whole characters only */
        size_t k = f->left;
        while (k > 0 && ((unsigned char)piece[k] & 0xc0) == 0x80)
            k--;
        memcpy(f->out, piece, k);
        f->out[k] = 0;
        return 1;
    }
    if (len > f->left) return 1;
    memcpy(f->out, piece, len);
    f->out += len;
    f->left -= len;
    *f->out = 0;
    return 0;
}

void tp__escape_into(char *out, size_t cap, const char *s, int flags) {
    if (cap == 0) return;
    out[0] = 0;
    fixed_t f = {out, cap - 1};
    if (s) walk(s, strlen(s), flags, to_fixed, &f);
}

/* A plain number, as a spreadsheet reads one: [+-]digits[.digits][e[+-]digits]
 * or [+-].digits..., nothing else. */
static int plain_number(const char *s) {
    const char *p = s + (*s == '-' || *s == '+');
    size_t digits = 0;
    while (isdigit((unsigned char)*p))
        p++, digits++;
    if (*p == '.') {
        p++;
        while (isdigit((unsigned char)*p))
            p++, digits++;
    }
    if (digits == 0) return 0;
    if (*p == 'e' || *p == 'E') {
        p++;
        p += *p == '-' || *p == '+';
        if (!isdigit((unsigned char)*p)) return 0;
        while (isdigit((unsigned char)*p))
            p++;
    }
    return *p == 0;
}

int tp__cell_is_formula(const char *s) {
    return s && strchr("=+-@\t\r", s[0]) && s[0] && !plain_number(s);
}
