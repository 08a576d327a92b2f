/* substitute: {placeholder} templates of argv elements. */
#include <ctype.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "config/config.h"

static int name_start(int ch) {
    return isalpha(ch) || ch == '_';
}

static int name_char(int ch) {
    return isalnum(ch) || ch == '_' || ch == '.' || ch == '-';
}

int tp__is_placeholder_name(const char *s) {
    if (!s || !name_start((unsigned char)*s)) return 0;
    for (s++; *s; s++)
        if (!name_char((unsigned char)*s)) return 0;
    return 1;
}

/* Called for each literal run and each placeholder of a template. */
typedef struct template_visitor {
    int (*text)(void *ctx, const char *p, size_t n); /* literal bytes */
    int (*name)(void *ctx, const char *p, size_t n); /* placeholder name */
    void *ctx;
} template_visitor_t;

/* Length of the placeholder at p ("{name}" with name a parameter name),
 * or 0 when p starts no placeholder. O(len of the name). */
static size_t placeholder_len(const char *p) {
    if (p[0] != '{' || !name_start((unsigned char)p[1])) return 0;
    const char *e = p + 2;
    while (name_char((unsigned char)*e))
        e++;
    return *e == '}' ? (size_t)(e + 1 - p) : 0;
}

/* Walk tmpl once, left to right: "{{" and "}}" are one literal brace each,
 * "{name}" (name as tp__is_placeholder_name) a placeholder, and any other
 * brace literal text, so JSON or a Python dict in an argument passes through
 * as written. Stops at the first callback that returns < 0 and returns its
 * value. O(len). */
static int walk_template(const char *tmpl, const template_visitor_t *v, tp_error_t *err) {
    (void)err; /* every template has a meaning: nothing to report */
    const char *p = tmpl, *lit = tmpl;
    int rc;
    while (*p) {
        size_t n = 0;
        int escape = (p[0] == '{' || p[0] == '}') && p[1] == p[0];
        if (!escape && (n = placeholder_len(p)) == 0) {
            p++;
            continue;
        }
        if (p > lit && (rc = v->text(v->ctx, lit, (size_t)(p - lit))) < 0) return rc;
        if (escape) { /* "{{" or "}}" */
            if ((rc = v->text(v->ctx, p, 1)) < 0) return rc;
            p += 2;
        } else {
            if ((rc = v->name(v->ctx, p + 1, n - 2)) < 0) return rc;
            p += n;
        }
        lit = p;
    }
    if (p > lit && (rc = v->text(v->ctx, lit, (size_t)(p - lit))) < 0) return rc;
    return 0;
}

/* ---- names ---------------------------------------------------------------- */

typedef struct names_ctx {
    char **v; /* NULL-terminated */
    size_t n;
} names_ctx_t;

static int names_text(void *ctx, const char *p, size_t n) {
    (void)ctx, (void)p, (void)n;
    return 0;
}

static int names_add(void *ctx, const char *p, size_t n) {
    names_ctx_t *c = ctx;
    c->v = tp__xrealloc(c->v, (c->n + 2) * sizeof *c->v);
    c->v[c->n] = tp__xmalloc(n + 1);
    memcpy(c->v[c->n], p, n);
    c->v[c->n][n] = '\0';
    c->v[++c->n] = NULL;
    return 0;
}

int tp__template_names(const char *tmpl, char ***names, tp_error_t *err) {
    names_ctx_t c = {tp__xcalloc(1, sizeof(char *)), 0};
    template_visitor_t v = {names_text, names_add, &c};
    int rc = walk_template(tmpl, &v, err);
    if (rc < 0) {
        tp__template_names_free(c.v);
        *names = NULL;
        return rc;
    }
    *names = c.v;
    return (int)c.n;
}

void tp__template_names_free(char **names) {
    if (!names) return;
    for (char **p = names; *p; p++)
        free(*p);
    free(names);
}

/* ---- substitution ---------------------------------------------------------- */

typedef struct subst_ctx {
    tp_buf_t out;
    const json_t *params;
    const tp_subst_extra_t *extra;
    const char *tmpl;
    tp_error_t *err;
} subst_ctx_t;

static int subst_text(void *ctx, const char *p, size_t n) {
    subst_ctx_t *c = ctx;
    return tp__buf_append(&c->out, p, n);
}

/* Append v's text: strings byte for byte, compound values as compact JSON,
 * other scalars through tp__value_text. */
static int append_value(tp_buf_t *b, const json_t *v) {
    if (json_is_string(v)) return tp__buf_append(b, json_string_value(v), json_string_length(v));
    if (json_is_object(v) || json_is_array(v)) {
        char *d = json_dumps(v, JSON_COMPACT | JSON_ENCODE_ANY);
        if (!d) return -ENOMEM;
        int rc = tp__buf_puts(b, d);
        free(d);
        return rc;
    }
    char t[64];
    int n = tp__value_text(v, t, sizeof t);
    return n < 0 ? n : tp__buf_append(b, t, (size_t)n);
}

static int subst_name(void *ctx, const char *p, size_t n) {
    subst_ctx_t *c = ctx;
    char name[256];
    if (n >= sizeof name)
        return tp__errorf(c->err, -EINVAL, "placeholder in \"%s\" is too long", c->tmpl);
    memcpy(name, p, n);
    name[n] = '\0';
    const json_t *v =
        c->params && json_is_object(c->params) ? json_object_get(c->params, name) : NULL;
    if (v) return append_value(&c->out, v);
    if (c->extra && c->extra->trial_id && strcmp(name, "trial_id") == 0)
        return tp__buf_puts(&c->out, c->extra->trial_id);
    if (c->extra && c->extra->trial_dir && strcmp(name, "trial_dir") == 0)
        return tp__buf_puts(&c->out, c->extra->trial_dir);
    if (c->extra && c->extra->budget_name && c->extra->budget_value &&
        strcmp(name, c->extra->budget_name) == 0)
        return tp__buf_puts(&c->out, c->extra->budget_value);
    if (c->extra && c->extra->configs_json && strcmp(name, "configs_json") == 0)
        return tp__buf_puts(&c->out, c->extra->configs_json);
    return tp__errorf(c->err, -EINVAL, "placeholder {%s} in \"%s\" names no parameter", name,
                      c->tmpl);
}

/* See config.h. Each value is inserted as literal bytes: nothing in it is
 * interpreted, so "x; touch f" stays one argument. */
char *tp__substitute(const char *tmpl, const json_t *params, const tp_subst_extra_t *extra,
                     tp_error_t *err) {
    subst_ctx_t c = {.params = params, .extra = extra, .tmpl = tmpl, .err = err};
    tp__buf_init(&c.out);
    template_visitor_t v = {subst_text, subst_name, &c};
    int rc = walk_template(tmpl, &v, err);
    if (rc < 0) {
        if (rc == -ENOMEM) tp__errorf(err, rc, "out of memory substituting \"%s\"", tmpl);
        tp__buf_free(&c.out);
        return NULL;
    }
    return tp__buf_steal(&c.out);
}

/* Does tmpl hold a placeholder naming a parameter of space that is
 * inactive in params (active[] from tp__space_active)? O(len(tmpl) * params). */
static int names_inactive(const char *tmpl, const tp_space_t *space, const unsigned char *active) {
    char **names;
    tp_error_t e;
    if (tp__template_names(tmpl, &names, &e) < 0) return 0;
    int hit = 0;
    for (char **n = names; *n && !hit; n++) {
        const tp_param_t *p = tp__space_find(space, *n);
        hit = p && !active[p - space->params];
    }
    tp__template_names_free(names);
    return hit;
}

/* The first placeholder of tmpl naming an active parameter that params
 * lacks (a value lost on the way: never run without it), or NULL. The name
 * is the space's. */
static const char *names_missing(const char *tmpl, const tp_space_t *space,
                                 const unsigned char *active, const json_t *params) {
    char **names;
    tp_error_t e;
    if (tp__template_names(tmpl, &names, &e) < 0) return NULL;
    const char *missing = NULL;
    for (char **n = names; *n && !missing; n++) {
        const tp_param_t *p = tp__space_find(space, *n);
        if (p && active[p - space->params] && !json_object_get(params, *n)) missing = p->name;
    }
    tp__template_names_free(names);
    return missing;
}

/* Is tmpl exactly one placeholder, "{name}"? */
static int lone_placeholder(const char *tmpl) {
    char **names;
    tp_error_t e;
    if (tp__template_names(tmpl, &names, &e) != 1) {
        tp__template_names_free(names);
        return 0;
    }
    int lone = strlen(tmpl) == strlen(names[0]) + 2;
    tp__template_names_free(names);
    return lone;
}

/* See config.h. */
json_t *tp__substitute_argv(char *const *argv, size_t argc, const tp_space_t *space,
                            const json_t *params, const tp_subst_extra_t *extra, tp_error_t *err) {
    unsigned char *active = tp__xcalloc(space->n ? space->n : 1, 1);
    tp__space_active(space, params, active);
    json_t *out = json_array();
    for (size_t i = 0; out && i < argc; i++) {
        const char *missing = names_missing(argv[i], space, active, params);
        if (missing) {
            tp__errorf(err, -EINVAL,
                       "\"%s\" has no value in this configuration, so {%s} in \"%s\" cannot be "
                       "given; the trial is not run without it",
                       missing, missing, argv[i]);
            json_decref(out);
            out = NULL;
            break;
        }
        if (names_inactive(argv[i], space, active)) {
            /* "--width" "{width}": the flag goes with its value */
            size_t n = json_array_size(out);
            if (n && i > 0 && lone_placeholder(argv[i]) && argv[i - 1][0] == '-' &&
                !strchr(argv[i - 1], '{') && !names_inactive(argv[i - 1], space, active))
                json_array_remove(out, n - 1);
            continue;
        }
        char *arg = tp__substitute(argv[i], params, extra, err);
        if (!arg) {
            json_decref(out);
            out = NULL;
            break;
        }
        json_array_append_new(out, json_string(arg));
        free(arg);
    }
    free(active);
    return out;
}
