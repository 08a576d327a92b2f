/* config: the checks every scalar of an experiment file passes before any
 * key reads it, so that no value can hang or break a run later on: no NUL
 * byte (argv, the environment and the agent protocol's C strings cannot
 * hold one), no non-finite number (a trial can never be given .inf or
 * .nan), nothing longer than one environment variable can carry. */
#include <math.h>
#include <string.h>

#include "config/config_internal.h"

/* Why a plain scalar that reads as a number is not finite, or NULL. */
static const char *non_finite(const yaml_node_t *n) {
    if (!is_plain(n)) return NULL;
    json_t *v = tp__cfg_resolve_scalar(n);
    const char *why = NULL;
    if (!v) /* jansson refuses to hold a non-finite real */
        why = "is not a finite number";
    else if (json_is_real(v) && !isfinite(json_real_value(v)))
        why = "is not a finite number";
    json_decref(v);
    return why;
}

/* See config_internal.h. Every scalar is checked, each mistake said.
 * O(size of the document). */
int tp__cfg_check_scalars(cfgctx_t *c) {
    int rc = 0;
    for (yaml_node_t *n = c->doc->nodes.start; n < c->doc->nodes.top; n++) {
        if (n->type != YAML_SCALAR_NODE) continue;
        size_t len = n->data.scalar.length;
        if (memchr(n->data.scalar.value, '\0', len))
            rc = fail(c, n,
                      "the value \"%.60s...\" holds a NUL byte (\\0), which no argument, "
                      "environment variable or file name can carry; remove it",
                      stext(n));
        else if (len > TP_VALUE_MAX)
            rc = fail(c, n,
                      "this value is %zu bytes long; a value may be at most %d bytes, "
                      "as it travels to trials in one environment variable "
                      "(TUNEPACK_PARAM_*) or argument",
                      len, TP_VALUE_MAX);
        else if (non_finite(n))
            rc = fail(c, n,
                      "\"%s\" is not a finite number; infinities, NaN and numbers beyond "
                      "+-1.8e308 cannot be given to a trial; write a finite number, or "
                      "quote it to mean the text",
                      stext(n));
    }
    return rc;
}
