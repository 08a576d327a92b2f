/* lines: split a trial's output stream into lines and batch the ones worth
 * forwarding. The report channel forwards every line (the orchestrator
 * judges them); stdout forwards only `name=value` lines. Lines over
 * TP_AGENT_MAX_LINE and lines with NUL bytes are dropped, and reported as
 * garbage when they were meant as reports. */
#include <string.h>

#include "agent/agent_internal.h"

void tp__lines_init(tp_lines_t *l, tp_lines_kind_t kind) {
    l->kind = kind;
    tp__buf_init(&l->partial);
    tp__buf_init(&l->batch);
    l->discarding = 0;
}

void tp__lines_free(tp_lines_t *l) {
    tp__buf_free(&l->partial);
    tp__buf_free(&l->batch);
}

static int is_name_start(unsigned char c) {
    return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || c == '_';
}

static int is_name_char(unsigned char c) {
    return is_name_start(c) || (c >= '0' && c <= '9') || c == '.' || c == '-' || c == '/';
}

/* Whether the line's first token is `name=value`: optional leading blanks, a
 * name [A-Za-z_][A-Za-z0-9_.\-/]*, optional blanks, '=', optional blanks, and
 * a non-empty value. Later `a=1, b=2` tokens are not checked. O(line). */
int tp__lines_is_kv(const char *line, size_t len) {
    const unsigned char *p = (const unsigned char *)line, *end = p + len;
    while (p < end && (*p == ' ' || *p == '\t'))
        p++;
    if (p == end || !is_name_start(*p)) return 0;
    while (p < end && is_name_char(*p))
        p++;
    while (p < end && (*p == ' ' || *p == '\t'))
        p++;
    if (p == end || *p != '=') return 0;
    p++;
    while (p < end && (*p == ' ' || *p == '\t'))
        p++;
    return p < end && *p != '\r' && *p != ',';
}

/* Whether a dropped line deserves a `garbage` message: always on the report
 * channel; on stdout only when it looks like a name=value report (judged on
 * its first 4 KiB), since stdout is mostly the trial's own logging. */
static int worth_garbage(const tp_lines_t *l, const char *line, size_t len) {
    return l->kind == TP_LINES_FD || tp__lines_is_kv(line, len < 4096 ? len : 4096);
}

/* One complete line (len includes the '\n'): forward it or drop it. */
static void one_line(tp_lines_t *l, const char *line, size_t len, tp_lines_garbage_fn garbage,
                     void *ctx) {
    size_t body = len - 1;
    if (body > TP_AGENT_MAX_LINE) {
        if (worth_garbage(l, line, body)) garbage(ctx, "line longer than 1 MiB dropped");
        return;
    }
    if (memchr(line, '\0', body)) {
        if (worth_garbage(l, line, body)) garbage(ctx, "line with NUL byte dropped");
        return;
    }
    if (l->kind == TP_LINES_STDOUT && !tp__lines_is_kv(line, body)) return;
    tp__buf_append(&l->batch, line, len);
}

/* Feed n bytes. Complete lines of the report channel without NUL bytes are
 * copied to the batch in one block (the fast path: one memchr pass and one
 * memcpy per read); only the carried-over partial line and lines with NUL
 * bytes, or stdout lines, are handled one at a time. */
void tp__lines_feed(tp_lines_t *l, const char *data, size_t n, tp_lines_garbage_fn garbage,
                    void *ctx) {
    const char *p = data, *end = data + n;
    if (l->discarding) {
        const char *nl = memchr(p, '\n', (size_t)(end - p));
        if (!nl) return;
        l->discarding = 0;
        p = nl + 1;
    }
    if (l->partial.len > 0 && p < end) {
        const char *nl = memchr(p, '\n', (size_t)(end - p));
        if (!nl) {
            tp__buf_append(&l->partial, p, (size_t)(end - p));
            if (l->partial.len > TP_AGENT_MAX_LINE) {
                if (worth_garbage(l, l->partial.data, l->partial.len))
                    garbage(ctx, "line longer than 1 MiB dropped");
                tp__buf_free(&l->partial);
                l->discarding = 1;
            }
            return;
        }
        tp__buf_append(&l->partial, p, (size_t)(nl + 1 - p));
        one_line(l, l->partial.data, l->partial.len, garbage, ctx);
        if (l->partial.cap > 2 * TP_AGENT_READ_BUF)
            tp__buf_free(&l->partial);
        else
            tp__buf_reset(&l->partial);
        p = nl + 1;
    }
    if (p >= end) return;
    const char *last = memrchr(p, '\n', (size_t)(end - p));
    const char *tail = last ? last + 1 : p;
    if (last) {
        size_t block = (size_t)(tail - p);
        if (l->kind == TP_LINES_FD && block <= TP_AGENT_MAX_LINE && !memchr(p, '\0', block)) {
            tp__buf_append(&l->batch, p, block);
        } else {
            while (p < tail) {
                const char *nl = memchr(p, '\n', (size_t)(tail - p));
                one_line(l, p, (size_t)(nl + 1 - p), garbage, ctx);
                p = nl + 1;
            }
        }
    }
    if (tail < end) {
        size_t rest = (size_t)(end - tail);
        if (rest > TP_AGENT_MAX_LINE) {
            if (worth_garbage(l, tail, rest)) garbage(ctx, "line longer than 1 MiB dropped");
            l->discarding = 1;
        } else {
            tp__buf_append(&l->partial, tail, rest);
        }
    }
}

void tp__lines_eof(tp_lines_t *l, tp_lines_garbage_fn garbage, void *ctx) {
    if (l->partial.len > 0 && !l->discarding) {
        tp__buf_append(&l->partial, "\n", 1);
        one_line(l, l->partial.data, l->partial.len, garbage, ctx);
    }
    tp__buf_free(&l->partial);
    l->discarding = 0;
}
