/* buf: a growable, always NUL-terminated byte buffer. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util/util.h"

void tp__buf_init(tp_buf_t *b) {
    b->data = NULL;
    b->len = 0;
    b->cap = 0;
}

void tp__buf_free(tp_buf_t *b) {
    free(b->data);
    tp__buf_init(b);
}

void tp__buf_reset(tp_buf_t *b) {
    b->len = 0;
    if (b->data) b->data[0] = '\0';
}

/* Make room for extra more bytes plus the NUL. Amortized O(1) by doubling.
 * Returns 0 or -ENOMEM (b unchanged). */
int tp__buf_reserve(tp_buf_t *b, size_t extra) {
    if (extra > SIZE_MAX - b->len - 1) return -ENOMEM;
    size_t need = b->len + extra + 1;
    if (need <= b->cap) return 0;
    size_t cap = b->cap ? b->cap : 64;
    while (cap < need) {
        if (cap > SIZE_MAX / 2) {
            cap = need;
            break;
        }
        cap *= 2;
    }
    char *p = realloc(b->data, cap);
    if (!p) return -ENOMEM;
    if (!b->data) p[0] = '\0';
    b->data = p;
    b->cap = cap;
    return 0;
}

int tp__buf_append(tp_buf_t *b, const void *p, size_t n) {
    int rc = tp__buf_reserve(b, n);
    if (rc < 0) return rc;
    if (n) memcpy(b->data + b->len, p, n);
    b->len += n;
    b->data[b->len] = '\0';
    return 0;
}

int tp__buf_puts(tp_buf_t *b, const char *s) {
    return tp__buf_append(b, s, strlen(s));
}

/* Append printf-formatted text. Returns 0, -ENOMEM, or -EINVAL on a
 * formatting error. */
int tp__buf_printf(tp_buf_t *b, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(NULL, 0, fmt, ap);
    va_end(ap);
    if (n < 0) return -EINVAL;
    int rc = tp__buf_reserve(b, (size_t)n);
    if (rc < 0) return rc;
    va_start(ap, fmt);
    vsnprintf(b->data + b->len, (size_t)n + 1, fmt, ap);
    va_end(ap);
    b->len += (size_t)n;
    return 0;
}

/* Drop the first n bytes (all of them if n >= len). O(len). */
void tp__buf_consume(tp_buf_t *b, size_t n) {
    if (n >= b->len) {
        tp__buf_reset(b);
        return;
    }
    memmove(b->data, b->data + n, b->len - n);
    b->len -= n;
    b->data[b->len] = '\0';
}

/* Hand the buffer's memory to the caller (never NULL: an empty buffer yields
 * ""); b is left empty and reusable. */
char *tp__buf_steal(tp_buf_t *b) {
    char *p = b->data;
    if (!p) p = tp__strdup("");
    tp__buf_init(b);
    return p;
}
