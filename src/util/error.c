/* error: filling a tp_error_t with human-readable text. */
#include <stdio.h>

#include "util/util.h"

/* Fill err (if not NULL) with code and a formatted message (truncated to
 * fit). Returns code, so callers can `return tp__errorf(err, -EINVAL, ...)`. */
int tp__errorf(tp_error_t *err, int code, const char *fmt, ...) {
    if (err) {
        va_list ap;
        va_start(ap, fmt);
        err->code = code;
        vsnprintf(err->msg, sizeof err->msg, fmt, ap);
        va_end(ap);
    }
    return code;
}
