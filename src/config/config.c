/* config: the experiment file (YAML, through libyaml's document API) ->
 * a validated tp_experiment_t. Every error carries "path:line:col: ". */
#include <ctype.h>
#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <yaml.h>

#include "config/config_internal.h"
#include "place/place.h"

/* ---- messages --------------------------------------------------------------- */

/* Every mistake is kept, said in the file's order when the parse ends
 * (say_mistakes); a second mistake at a place already reported is the same
 * one said again and dropped. O(mistakes) per call. */
int tp__cfg_fail_at(cfgctx_t *c, yaml_mark_t m, const char *fmt, ...) {
    char msg[900];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    for (int i = 0; i < c->nerrors; i++)
        if (c->marks[i].line == m.line && c->marks[i].column == m.column) return -EINVAL;
    c->marks = tp__xrealloc(c->marks, (size_t)(c->nerrors + 1) * sizeof *c->marks);
    c->msgs = tp__xrealloc(c->msgs, (size_t)(c->nerrors + 1) * sizeof *c->msgs);
    c->marks[c->nerrors] = m;
    char line[1100];
    snprintf(line, sizeof line, "%s:%zu:%zu: %s", c->path, m.line + 1, m.column + 1, msg);
    c->msgs[c->nerrors++] = tp__strdup(line);
    return -EINVAL;
}

static int by_place(const void *a, const void *b, void *ud) {
    const yaml_mark_t *m = ud;
    const yaml_mark_t *x = &m[*(const int *)a], *y = &m[*(const int *)b];
    if (x->line != y->line) return x->line < y->line ? -1 : 1;
    if (x->column != y->column) return x->column < y->column ? -1 : 1;
    return *(const int *)a - *(const int *)b;
}

/* The mistakes in the file's order: into c->err one per line while they
 * fit (then how many were left out), every one into c->all; frees them.
 * O(n log n). */
static void say_mistakes(cfgctx_t *c) {
    int *order = tp__xcalloc((size_t)c->nerrors + 1, sizeof *order);
    for (int i = 0; i < c->nerrors; i++)
        order[i] = i;
    qsort_r(order, (size_t)c->nerrors, sizeof *order, by_place, c->marks);
    int left_out = 0;
    for (int k = 0; k < c->nerrors; k++) {
        const char *line = c->msgs[order[k]];
        if (c->all) tp__buf_printf(c->all, "%s\n", line);
        if (!c->err) continue;
        size_t used = k ? strlen(c->err->msg) : 0;
        if (k == 0)
            tp__errorf(c->err, -EINVAL, "%s", line);
        else if (!left_out && used + strlen(line) + 100 < sizeof c->err->msg)
            snprintf(c->err->msg + used, sizeof c->err->msg - used, "\n%s", line);
        else
            left_out++;
    }
    if (left_out && c->err) {
        size_t used = strlen(c->err->msg);
        snprintf(c->err->msg + used, sizeof c->err->msg - used,
                 "\n(and %d more mistakes; --dry-run lists them all)", left_out);
    }
    for (int i = 0; i < c->nerrors; i++)
        free(c->msgs[i]);
    free(c->msgs);
    free(c->marks);
    free(order);
}

/* See config_internal.h. O(mistakes). */
int tp__cfg_failed_within(const cfgctx_t *c, const yaml_node_t *n) {
    for (int i = 0; n && i < c->nerrors; i++)
        if (c->marks[i].index >= n->start_mark.index && c->marks[i].index <= n->end_mark.index)
            return 1;
    return 0;
}

#define fail(c, node, ...) tp__cfg_fail_at((c), (node)->start_mark, __VA_ARGS__)

/* How a node reads in "got ...": the scalar quoted, else its kind. */
const char *tp__cfg_describe(const yaml_node_t *n, char *out, size_t len) {
    if (n->type == YAML_MAPPING_NODE)
        snprintf(out, len, "a mapping");
    else if (n->type == YAML_SEQUENCE_NODE)
        snprintf(out, len, "a list");
    else if (is_plain(n) && !*stext(n))
        snprintf(out, len, "nothing");
    else
        snprintf(out, len, "\"%.200s\"", stext(n));
    return out;
}

yaml_node_t *tp__cfg_node_at(cfgctx_t *c, int index) {
    return yaml_document_get_node(c->doc, index);
}

/* ---- scalars ---------------------------------------------------------------- */

static int matches_int(const char *s) {
    if (*s == '+' || *s == '-') s++;
    if (!isdigit((unsigned char)*s)) return 0;
    while (isdigit((unsigned char)*s))
        s++;
    return *s == '\0';
}

static int matches_real(const char *s) {
    if (*s == '+' || *s == '-') s++;
    if (!strcmp(s, ".inf") || !strcmp(s, ".Inf") || !strcmp(s, ".INF")) return 1;
    int digits = 0;
    while (isdigit((unsigned char)*s))
        s++, digits++;
    if (*s == '.') {
        s++;
        while (isdigit((unsigned char)*s))
            s++, digits++;
    }
    if (!digits) return 0;
    if (*s == 'e' || *s == 'E') {
        s++;
        if (*s == '+' || *s == '-') s++;
        if (!isdigit((unsigned char)*s)) return 0;
        while (isdigit((unsigned char)*s))
            s++;
    }
    return *s == '\0';
}

/* The JSON value of a scalar node, resolved as YAML 1.2's core schema does
 * for plain scalars (null, bool, int, real, else string); quoted scalars are
 * always strings. Caller owns. */
json_t *tp__cfg_resolve_scalar(const yaml_node_t *n) {
    const char *s = stext(n);
    if (!is_plain(n)) return json_stringn(s, n->data.scalar.length);
    if (!*s || !strcmp(s, "null") || !strcmp(s, "Null") || !strcmp(s, "NULL") || !strcmp(s, "~"))
        return json_null();
    if (!strcmp(s, "true") || !strcmp(s, "True") || !strcmp(s, "TRUE")) return json_true();
    if (!strcmp(s, "false") || !strcmp(s, "False") || !strcmp(s, "FALSE")) return json_false();
    if (matches_int(s)) {
        errno = 0;
        long long v = strtoll(s, NULL, 10);
        if (errno == 0) return json_integer(v);
        return json_real(strtod(s, NULL));
    }
    if (matches_real(s)) {
        const char *t = s + (*s == '+' || *s == '-');
        if (*t == '.' && (t[1] == 'i' || t[1] == 'I'))
            return json_real(*s == '-' ? -INFINITY : INFINITY);
        return json_real(strtod(s, NULL));
    }
    if (!strcmp(s, ".nan") || !strcmp(s, ".NaN") || !strcmp(s, ".NAN")) return json_real(NAN);
    return json_stringn(s, n->data.scalar.length);
}

/* A number (int or real, plain scalar) from n into *out; 0 or -EINVAL
 * (without a message: callers word it). */
int tp__cfg_node_number(const yaml_node_t *n, double *out) {
    if (n->type != YAML_SCALAR_NODE) return -EINVAL;
    json_t *v = tp__cfg_resolve_scalar(n);
    int ok = json_is_number(v);
    if (ok) *out = json_number_value(v);
    json_decref(v);
    return ok ? 0 : -EINVAL;
}

int tp__cfg_node_bool(const yaml_node_t *n, int *out) {
    if (n->type != YAML_SCALAR_NODE) return -EINVAL;
    json_t *v = tp__cfg_resolve_scalar(n);
    int ok = json_is_boolean(v);
    if (ok) *out = json_is_true(v);
    json_decref(v);
    return ok ? 0 : -EINVAL;
}

int tp__cfg_node_integer(const yaml_node_t *n, long long *out) {
    if (n->type != YAML_SCALAR_NODE) return -EINVAL;
    json_t *v = tp__cfg_resolve_scalar(n);
    int ok = json_is_integer(v);
    if (ok) *out = json_integer_value(v);
    json_decref(v);
    return ok ? 0 : -EINVAL;
}

/* An integer setting in [lo, hi]; hi == LLONG_MAX means unbounded. */
int tp__cfg_get_int(cfgctx_t *c, const char *key, yaml_node_t *v, long long lo, long long hi,
                    long long *out) {
    if (tp__cfg_node_integer(v, out) == 0 && *out >= lo && *out <= hi) return 0;
    char got[256];
    const char *hint = v->type == YAML_SCALAR_NODE && !is_plain(v) && matches_int(stext(v))
                           ? " (quoted, so it is a string; remove the quotes)"
                           : "";
    if (hi == LLONG_MAX)
        return fail(c, v, "\"%s\" must be an integer >= %lld, got %s%s", key, lo,
                    tp__cfg_describe(v, got, sizeof got), hint);
    return fail(c, v, "\"%s\" must be an integer from %lld to %lld, got %s%s", key, lo, hi,
                tp__cfg_describe(v, got, sizeof got), hint);
}

/* See config_internal.h. */
int tp__cfg_get_number(cfgctx_t *c, const char *key, yaml_node_t *v, double lo, double hi, int open,
                       const char *what, double *out) {
    double d;
    int above = open & TP_CFG_ABOVE_LO, below = open & TP_CFG_BELOW_HI;
    if (tp__cfg_node_number(v, &d) == 0 && isfinite(d) && (above ? d > lo : d >= lo) &&
        (below ? d < hi : d <= hi)) {
        *out = d;
        return 0;
    }
    char range[96], got[256];
    if (isinf(lo) && isinf(hi))
        range[0] = 0; /* any finite number */
    else if (isinf(lo))
        snprintf(range, sizeof range, " %s %g", below ? "<" : "<=", hi);
    else if (isinf(hi))
        snprintf(range, sizeof range, " %s %g", above ? ">" : ">=", lo);
    else if (!above && !below)
        snprintf(range, sizeof range, " from %g to %g", lo, hi);
    else
        snprintf(range, sizeof range, " in %c%g, %g%c", above ? '(' : '[', lo, hi,
                 below ? ')' : ']');
    const char *hint = v->type == YAML_SCALAR_NODE && !is_plain(v) &&
                               (matches_int(stext(v)) || matches_real(stext(v)))
                           ? " (quoted, so it is a string; remove the quotes)"
                           : "";
    return fail(c, v, "\"%s\" must be a %snumber%s%s%s%s, got %s%s", key,
                isinf(lo) && isinf(hi) ? "finite " : "", range, what ? " (" : "", what ? what : "",
                what ? ")" : "", tp__cfg_describe(v, got, sizeof got), hint);
}

/* A non-empty string setting (any scalar's text). */
int tp__cfg_get_string(cfgctx_t *c, const char *key, yaml_node_t *v, const char **out) {
    if (v->type != YAML_SCALAR_NODE || (is_plain(v) && !*stext(v))) {
        char got[256];
        return fail(c, v, "\"%s\" must be a string, got %s", key,
                    tp__cfg_describe(v, got, sizeof got));
    }
    *out = stext(v);
    return 0;
}

/* ---- mappings ----------------------------------------------------------------- */

/* v must be a mapping whose keys are scalars, each once. */
int tp__cfg_check_mapping(cfgctx_t *c, const char *key, yaml_node_t *v, const char *example) {
    if (v->type != YAML_MAPPING_NODE) {
        char got[256];
        return fail(c, v, "\"%s\" must be a mapping, e.g. %s; got %s", key, example,
                    tp__cfg_describe(v, got, sizeof got));
    }
    for (yaml_node_pair_t *p = v->data.mapping.pairs.start; p < v->data.mapping.pairs.top; p++) {
        yaml_node_t *k = tp__cfg_node_at(c, p->key);
        if (k->type != YAML_SCALAR_NODE)
            return fail(c, k, "a key in \"%s\" must be a plain name, not %s", key,
                        k->type == YAML_MAPPING_NODE ? "a mapping" : "a list");
        for (yaml_node_pair_t *q = v->data.mapping.pairs.start; q < p; q++)
            if (strcmp(stext(tp__cfg_node_at(c, q->key)), stext(k)) == 0)
                return fail(c, k, "duplicate key \"%s\"; keep one of them", stext(k));
    }
    return 0;
}

int tp__cfg_unknown_key(cfgctx_t *c, yaml_node_t *k, const char *const *names, size_t n) {
    const char *guess = tp__did_you_mean(stext(k), names, n);
    if (guess) return fail(c, k, "unknown key \"%s\"; did you mean \"%s\"?", stext(k), guess);
    tp_buf_t list;
    tp__buf_init(&list);
    for (size_t i = 0; i < n; i++)
        tp__buf_printf(&list, "%s%s", i ? ", " : "", names[i]);
    int rc = fail(c, k, "unknown key \"%s\"; valid keys are: %s", stext(k), list.data);
    tp__buf_free(&list);
    return rc;
}

/* Dispatch each pair of mapping v through spec; then report the first
 * required key that is missing, at the mapping's start. O(keys * spec). */
int tp__cfg_walk_mapping(cfgctx_t *c, const char *what, yaml_node_t *v, const key_spec_t *spec,
                         size_t nspec, const char *example) {
    int rc = tp__cfg_check_mapping(c, what, v, example);
    if (rc < 0) return rc;
    const char *names[TP_CFG_MAX_KEYS];
    if (nspec > TP_CFG_MAX_KEYS) abort(); /* a table too long: the static asserts catch it */
    for (size_t i = 0; i < nspec; i++)
        names[i] = spec[i].key;
    int seen[TP_CFG_MAX_KEYS] = {0}, unknown = 0;
    /* Every key is checked, a mistake in one does not hide those in others. */
    for (yaml_node_pair_t *p = v->data.mapping.pairs.start; p < v->data.mapping.pairs.top; p++) {
        yaml_node_t *k = tp__cfg_node_at(c, p->key);
        size_t i;
        for (i = 0; i < nspec && strcmp(spec[i].key, stext(k)) != 0; i++)
            continue;
        if (i == nspec) {
            rc = tp__cfg_unknown_key(c, k, names, nspec);
            unknown = 1;
            continue;
        }
        seen[i] = 1;
        if (spec[i].fn(c, spec[i].key, tp__cfg_node_at(c, p->value)) < 0) rc = -EINVAL;
    }
    /* A misspelled key is the missing one, most likely: said once. */
    for (size_t i = 0; i < nspec && !unknown; i++)
        if (spec[i].required && !seen[i])
            rc = fail(c, v, "missing required key \"%s\"; add e.g. %s", spec[i].key,
                      spec[i].example);
    return rc;
}

/* ---- top-level keys ------------------------------------------------------------ */

static int key_name(cfgctx_t *c, const char *key, yaml_node_t *v) {
    const char *s;
    int rc = tp__cfg_get_string(c, key, v, &s);
    if (rc < 0) return rc;
    if (strspn(s, ".") == strlen(s))
        return fail(c, v,
                    "\"name\" cannot be \"%s\": the experiment's folder would be this "
                    "folder or its parent; e.g. name: mlp-demo",
                    s);
    for (const char *p = s; *p; p++)
        if (!isalnum((unsigned char)*p) && !strchr("_.-", *p))
            return fail(c, v,
                        "\"name\" may hold only letters, digits, '_', '.' and '-', got \"%s\"; "
                        "e.g. name: mlp-demo",
                        s);
    free(c->x->name);
    c->x->name = tp__strdup(s);
    return 0;
}

static int key_description(cfgctx_t *c, const char *key, yaml_node_t *v) {
    if (v->type == YAML_SCALAR_NODE) return 0;
    char got[256];
    return fail(c, v, "\"%s\" must be a string, got %s", key, tp__cfg_describe(v, got, sizeof got));
}

static int search_algorithm(cfgctx_t *c, const char *key, yaml_node_t *v) {
    (void)key;
    c->algorithm = v;
    if (v->type == YAML_SCALAR_NODE)
        for (size_t i = 0; tp__searcher_names[i]; i++)
            if (!strcmp(stext(v), tp__searcher_names[i])) {
                c->x->search.algorithm = tp__searcher_names[i];
                return 0;
            }
    char got[256], known[256] = "";
    size_t n = 0;
    for (size_t i = 0; tp__searcher_names[i]; i++, n++)
        snprintf(known + strlen(known), sizeof known - strlen(known), "%s%s", i ? ", " : "",
                 tp__searcher_names[i]);
    const char *guess =
        v->type == YAML_SCALAR_NODE ? tp__did_you_mean(stext(v), tp__searcher_names, n) : NULL;
    if (guess)
        return fail(c, v, "unknown search algorithm %s; did you mean \"%s\"? (known: %s)",
                    tp__cfg_describe(v, got, sizeof got), guess, known);
    return fail(c, v, "unknown search algorithm %s; known: %s",
                tp__cfg_describe(v, got, sizeof got), known);
}

/* `search.trials`: at most 2^53, the most the journal (which records the
 * number as a real) keeps exactly for the replay of a resumed run. */
static int search_trials(cfgctx_t *c, const char *key, yaml_node_t *v) {
    long long t;
    int rc = tp__cfg_get_int(c, key, v, 1, 1LL << 53, &t);
    if (rc == 0) c->x->search.trials = (uint64_t)t;
    c->trials_given = 1;
    return rc;
}

static int search_seed(cfgctx_t *c, const char *key, yaml_node_t *v) {
    long long t;
    int rc = tp__cfg_get_int(c, key, v, 0, LLONG_MAX, &t);
    if (rc == 0) c->x->search.seed = (uint64_t)t;
    return rc;
}

static const key_table_t searchers = KEY_LIST(tp__searcher_names),
                         schedulers = KEY_LIST(tp__scheduler_names);
static const key_spec_t search_keys[] = {
    {"algorithm", search_algorithm, 0, NULL, .values = &searchers},
    {"trials", search_trials, 0, NULL},
    {"seed", search_seed, 0, NULL},
    {"scheduler", tp__cfg_search_scheduler, 0, NULL, .values = &schedulers},
    {"warm_start", tp__cfg_search_warm_start, 0, NULL},
};
static const key_table_t search_table = KEY_TABLE(search_keys);

static int key_search(cfgctx_t *c, const char *key, yaml_node_t *v) {
    if (v->type == YAML_SCALAR_NODE && is_plain(v) && !*stext(v)) return 0;
    return tp__cfg_walk_mapping(c, key, v, search_keys, TP_ARRAY_LEN(search_keys),
                                "search: {algorithm: random, trials: 40, seed: 1}");
}

/* `fail_fast`: true (the first 3 trials), false, or the number of trials. */
static int key_fail_fast(cfgctx_t *c, const char *key, yaml_node_t *v) {
    int on;
    if (tp__cfg_node_bool(v, &on) == 0) {
        c->x->fail_fast = on ? TP_FAIL_FAST_DEFAULT : 0;
        return 0;
    }
    long long k;
    int rc = tp__cfg_get_int(c, key, v, 1, 1000, &k);
    if (rc == 0) c->x->fail_fast = (int)k;
    return rc;
}

static int key_retries(cfgctx_t *c, const char *key, yaml_node_t *v) {
    long long t;
    int rc = tp__cfg_get_int(c, key, v, 0, 100, &t);
    if (rc == 0) c->x->retries = (int)t;
    return rc;
}

int tp__cfg_get_duration(cfgctx_t *c, const char *key, yaml_node_t *v, double *out) {
    if (v->type != YAML_SCALAR_NODE) {
        char got[256];
        return fail(c, v, "\"%s\" must be a duration such as 30s, 5m or 1h30m, got %s", key,
                    tp__cfg_describe(v, got, sizeof got));
    }
    tp_error_t e;
    double s;
    if (tp__parse_duration(stext(v), &s, &e) < 0) return fail(c, v, "%s: %s", key, e.msg);
    if (s < TP_DURATION_MIN_S)
        return fail(c, v, "\"%s\" of %s is below the 1ms that timers count; write at least 1ms",
                    key, stext(v));
    if (s > TP_DURATION_MAX_S)
        return fail(c, v,
                    "\"%s\" of %s is past the longest duration a trial can be given "
                    "(1e9 seconds, about 31 years); write a shorter one, or leave it out",
                    key, stext(v));
    *out = s;
    return 0;
}

static int key_timeout(cfgctx_t *c, const char *key, yaml_node_t *v) {
    return tp__cfg_get_duration(c, key, v, &c->x->timeout_s);
}

static int key_stop_grace(cfgctx_t *c, const char *key, yaml_node_t *v) {
    return tp__cfg_get_duration(c, key, v, &c->x->grace_s);
}

static int key_log_limit(cfgctx_t *c, const char *key, yaml_node_t *v) {
    tp_error_t e;
    uint64_t n;
    if (v->type != YAML_SCALAR_NODE || tp__parse_size(stext(v), &n, &e) < 0) {
        char got[256];
        return fail(c, v, "\"%s\" must be a size such as 64k, 8M or 1G, got %s", key,
                    tp__cfg_describe(v, got, sizeof got));
    }
    if (n < 4096)
        return fail(c, v, "\"%s\" must be at least 4k, got \"%s\"; e.g. log_limit: 8M", key,
                    stext(v));
    if (n > TP_LOG_LIMIT_MAX)
        return fail(c, v,
                    "\"%s\" of %s is past the most a trial can be given (8388607T); "
                    "e.g. log_limit: 8M",
                    key, stext(v));
    c->x->log_limit = n;
    return 0;
}

static int key_workdir(cfgctx_t *c, const char *key, yaml_node_t *v) {
    const char *s;
    int rc = tp__cfg_get_string(c, key, v, &s);
    if (rc < 0) return rc;
    free(c->x->workdir);
    c->x->workdir = tp__strdup(s);
    return 0;
}

static int key_checkpoint_root(cfgctx_t *c, const char *key, yaml_node_t *v) {
    const char *s;
    int rc = tp__cfg_get_string(c, key, v, &s);
    if (rc < 0) return rc;
    if (*s != '/')
        return fail(c, v,
                    "checkpoint_root must be an absolute path on storage every node "
                    "shares, e.g. /shared/ckpt; got \"%s\"",
                    s);
    free(c->x->checkpoint_root);
    c->x->checkpoint_root = tp__strdup(s);
    return 0;
}

static int valid_env_name(const char *s) {
    if (!isalpha((unsigned char)*s) && *s != '_') return 0;
    for (s++; *s; s++)
        if (!isalnum((unsigned char)*s) && *s != '_') return 0;
    return 1;
}

static int key_env(cfgctx_t *c, const char *key, yaml_node_t *v) {
    if (v->type == YAML_SCALAR_NODE && is_plain(v) && !*stext(v)) return 0;
    int rc = tp__cfg_check_mapping(c, key, v, "env: {OMP_NUM_THREADS: \"4\"}");
    if (rc < 0) return rc;
    size_t n = (size_t)(v->data.mapping.pairs.top - v->data.mapping.pairs.start);
    c->x->env = tp__xcalloc(n ? n : 1, sizeof *c->x->env);
    for (yaml_node_pair_t *p = v->data.mapping.pairs.start; p < v->data.mapping.pairs.top; p++) {
        yaml_node_t *k = tp__cfg_node_at(c, p->key), *val = tp__cfg_node_at(c, p->value);
        if (!valid_env_name(stext(k)))
            return fail(c, k,
                        "environment variable name \"%s\" is not valid; use letters, digits "
                        "and '_', not starting with a digit",
                        stext(k));
        if (val->type != YAML_SCALAR_NODE)
            return fail(c, val, "env value of \"%s\" must be a string, got %s", stext(k),
                        val->type == YAML_MAPPING_NODE ? "a mapping" : "a list");
        tp_env_pair_t *e = &c->x->env[c->x->nenv++];
        e->name = tp__strdup(stext(k));
        e->value = tp__strdup(stext(val));
    }
    return 0;
}

static const key_spec_t top_keys[] = {
    {"name", key_name, 1, "name: mlp-demo"},
    {"description", key_description, 0, NULL},
    {"command", tp__cfg_key_command, 1, "command: [python3, train.py, --lr, \"{lr}\"]"},
    {"metric", tp__cfg_key_metric, 1, "metric: {name: val_acc, mode: max}", &tp__cfg_metric_table},
    {"space", tp__cfg_key_space, 0, NULL, &tp__cfg_space_table},
    {"search", key_search, 0, NULL, &search_table},
    {"concurrency", tp__cfg_key_concurrency, 0, NULL},
    {"retries", key_retries, 0, NULL},
    {"fail_fast", key_fail_fast, 0, NULL},
    {"timeout", key_timeout, 0, NULL},
    {"stop_grace", key_stop_grace, 0, NULL},
    {"log_limit", key_log_limit, 0, NULL},
    {"workdir", key_workdir, 0, NULL},
    {"checkpoint_root", key_checkpoint_root, 0, NULL},
    {"env", key_env, 0, NULL},
    {"env_passthrough", tp__cfg_key_env_passthrough, 0, NULL},
    {"permissions", tp__cfg_key_permissions, 0, NULL},
    {"resources", tp__cfg_key_resources, 0, NULL, &tp__cfg_resources_table},
    {"placement", tp__cfg_key_placement, 0, NULL, &tp__cfg_placement_table},
    {"sharing", tp__cfg_key_sharing, 0, NULL, .values = &tp__cfg_sharing_values},
    {"groups", tp__cfg_key_groups, 0, NULL, &tp__cfg_groups_table},
    {"gpus", tp__cfg_key_gpus, 0, NULL, &tp__cfg_gpus_table},
    {"profile_by", tp__cfg_key_profile_by, 0, NULL},
    {"budget", tp__cfg_key_budget, 0, NULL, &tp__cfg_budget_table},
    {"checkpoint", tp__cfg_key_checkpoint, 0, NULL, &tp__cfg_checkpoint_table},
    {"cluster", tp__cfg_key_cluster, 0, NULL, &tp__cfg_cluster_table},
    {"enqueue", tp__cfg_key_enqueue, 0, NULL},
    {"deadline", tp__cfg_key_deadline, 0, NULL},
    {"reallocation", tp__cfg_key_reallocation, 0, NULL, &tp__cfg_reallocation_table},
    {"surrogate", tp__cfg_key_surrogate, 0, NULL, &tp__cfg_surrogate_table},
    {"fuse", tp__cfg_key_fuse, 0, NULL, &tp__cfg_fuse_table},
    {"constraints", tp__cfg_key_constraints, 0, NULL, &tp__cfg_constraints_table},
    {"pbt", tp__cfg_key_pbt, 0, NULL, &tp__cfg_pbt_table},
};
_Static_assert(TP_ARRAY_LEN(top_keys) <= TP_CFG_MAX_KEYS, "top_keys: raise TP_CFG_MAX_KEYS");
static const key_table_t top_table = KEY_TABLE(top_keys);

/* t's i-th name (NULL past the end). */
static const char *table_name(const key_table_t *t, size_t i) {
    if (t->spec) return i < t->n ? t->spec[i].key : NULL;
    return t->n == 0 || i < t->n ? t->names[i] : NULL;
}

/* One table's keys under prefix (path[0..len)), depth first. */
static int list_keys(const key_table_t *t, char *path, size_t len, size_t size,
                     int (*fn)(const char *path, const char *const *values, int required, void *ud),
                     void *ud) {
    if (t->each) /* space.NAME, gpus[] */
        len +=
            (size_t)snprintf(path + len, size - len, "%s%s", t->each[0] == '[' ? "" : ".", t->each);
    for (size_t i = 0; table_name(t, i) && len < size; i++) {
        const key_spec_t *k = t->spec ? &t->spec[i] : NULL;
        int n = snprintf(path + len, size - len, "%s%s", len ? "." : "", table_name(t, i));
        if (n < 0 || (size_t)n >= size - len) return -ENAMETOOLONG;
        const char *values[64] = {0};
        for (size_t j = 0; k && k->values && j + 1 < TP_ARRAY_LEN(values); j++)
            if (!(values[j] = table_name(k->values, j))) break;
        int rc = fn(path, values, k && k->required, ud);
        if (rc == 0 && k && k->sub) rc = list_keys(k->sub, path, len + (size_t)n, size, fn, ud);
        if (rc) return rc;
        path[len] = 0;
    }
    return 0;
}

int tp__config_keys(int (*fn)(const char *path, const char *const *values, int required, void *ud),
                    void *ud) {
    char path[256] = "";
    return list_keys(&top_table, path, 0, sizeof path, fn, ud);
}

/* ---- whole file ---------------------------------------------------------------- */

/* Without `search.trials`: grid makes one pass over its product, the
 * other samplers propose 10 trials. O(1). */
static void default_trials(cfgctx_t *c) {
    if (!c->trials_given)
        c->x->search.trials = strcmp(c->x->search.algorithm, "grid") == 0 ? 1 : 10;
}

static void set_defaults(tp_experiment_t *x) {
    memset(x, 0, sizeof *x);
    tp__space_init(&x->space);
    for (size_t i = 0; tp__searcher_names[i]; i++)
        if (!strcmp(tp__searcher_names[i], "random")) x->search.algorithm = tp__searcher_names[i];
    x->search.trials = 10; /* until the sampler is known: see default_trials */
    x->search.seed = 0;
    x->concurrency = 1;
    x->retries = 0;
    x->fail_fast = TP_FAIL_FAST_DEFAULT;
    x->timeout_s = 0;
    x->grace_s = 10;
    x->log_limit = 8u << 20;
    x->res.gpu_compute = 1.0;
    x->res.profile_s = 30;
    x->res.nodes = 1;
    x->cluster.shared = 1;
    x->res.procs_per_node = 1;
    x->reserve_mib = 512;
    x->groups_min = 0.25;
    x->groups_max = 1;
    x->groups_restart = 1;
    x->dir_mode = 0700; /* private by default: `permissions` */
    x->file_mode = 0600;
    x->scheduler = "fifo";
    x->budget_eta = 3;
    tp__realloc_opts_default(&x->realloc);
    x->surrogate.promote = 3;
    x->surrogate.eager = 0.5;
}

/* See config.h. Parses with libyaml's document API, then walks the tree
 * once (table-driven per mapping) and checks the command's placeholders
 * against the space. O(size of file). */
static int parse(const char *path, const char *text, size_t len, tp_experiment_t *out,
                 tp_error_t *err, tp_buf_t *all) {
    set_defaults(out);
    out->path = tp__strdup(path);
    out->text = tp__xmalloc(len + 1);
    memcpy(out->text, text, len);
    out->text[len] = '\0';
    /* A byte-order mark (an editor's, or several) is no part of the first key. */
    size_t skip = 0;
    while (len - skip >= 3 && !memcmp(out->text + skip, "\xef\xbb\xbf", 3))
        skip += 3;

    yaml_parser_t parser;
    yaml_document_t doc;
    cfgctx_t c = {.path = path, .doc = &doc, .x = out, .err = err, .all = all};
    if (!yaml_parser_initialize(&parser)) {
        tp__experiment_free(out);
        return tp__errorf(err, -ENOMEM, "%s: out of memory starting the YAML parser", path);
    }
    yaml_parser_set_input_string(&parser, (const unsigned char *)out->text + skip, len - skip);
    int rc;
    if (!yaml_parser_load(&parser, &doc)) {
        yaml_mark_t m = parser.problem_mark;
        const char *problem = parser.problem ? parser.problem : "malformed document";
        if (parser.context)
            rc = tp__cfg_fail_at(
                &c, m, "YAML syntax error: %s %s; check indentation and quoting near here", problem,
                parser.context);
        else
            rc = tp__cfg_fail_at(
                &c, m, "YAML syntax error: %s; check indentation and quoting near here", problem);
        yaml_parser_delete(&parser);
        tp__experiment_free(out);
        say_mistakes(&c);
        return rc;
    }
    yaml_node_t *root = yaml_document_get_root_node(&doc);
    yaml_mark_t start = {0, 0, 0};
    if (!root || (root->type == YAML_SCALAR_NODE && is_plain(root) && !*stext(root))) {
        rc = tp__cfg_fail_at(&c, start,
                             "the file is empty; write at least name, command and metric, e.g. "
                             "name: demo");
    } else if (root->type != YAML_MAPPING_NODE) {
        char got[256];
        rc = fail(&c, root,
                  "the experiment must be a mapping of keys (name, command, metric, "
                  "space, ...), got %s",
                  tp__cfg_describe(root, got, sizeof got));
    } else {
        /* Every key is read and every check across keys made, whatever the
         * mistakes before: each check skips what a mistake made wrong. */
        int bad = tp__cfg_check_scalars(&c) < 0;
        bad |= tp__cfg_walk_mapping(&c, "the experiment", root, top_keys, TP_ARRAY_LEN(top_keys),
                                    "name: demo") < 0;
        default_trials(&c);
        bad |= tp__cfg_check_placeholders(&c) < 0;
        bad |= tp__cfg_check_resources(&c) < 0;
        bad |= tp__cfg_check_budget(&c, root) < 0;
        bad |= tp__cfg_check_enqueue(&c) < 0;
        bad |= tp__cfg_check_surrogate(&c) < 0;
        bad |= tp__cfg_check_constraints(&c) < 0;
        bad |= tp__cfg_check_fuse(&c) < 0;
        bad |= tp__cfg_check_pbt(&c) < 0;
        rc = bad || c.nerrors ? -EINVAL : 0;
        if (rc == 0 && !out->policy)
            out->policy = tp__strdup(out->groups != TP_FLUID_OFF ? TP_PLACE_GROUPS_POLICY
                                                                 : TP_PLACE_DEFAULT_POLICY);
    }
    yaml_document_delete(&doc);
    yaml_parser_delete(&parser);
    say_mistakes(&c);
    if (rc < 0) tp__experiment_free(out);
    return rc;
}

int tp__experiment_parse(const char *path, const char *text, size_t len, tp_experiment_t *out,
                         tp_error_t *err) {
    return parse(path, text, len, out, err, NULL);
}

int tp__experiment_load_all(const char *path, tp_experiment_t *out, tp_error_t *err,
                            tp_buf_t *all) {
    char *text;
    size_t len;
    set_defaults(out);
    int rc = tp__read_file(path, &text, &len, err);
    if (rc < 0) {
        if (all) tp__buf_printf(all, "%s\n", err->msg);
        return rc;
    }
    rc = parse(path, text, len, out, err, all);
    free(text);
    return rc;
}

int tp__experiment_load(const char *path, tp_experiment_t *out, tp_error_t *err) {
    return tp__experiment_load_all(path, out, err, NULL);
}

void tp__experiment_free(tp_experiment_t *x) {
    if (!x) return;
    free(x->path);
    free(x->text);
    free(x->name);
    for (size_t i = 0; x->argv && x->argv[i]; i++)
        free(x->argv[i]);
    free(x->argv);
    free(x->metric);
    for (size_t i = 0; i < TP_MAX_OBJECTIVES; i++)
        free(x->objectives[i].name);
    tp__space_free(&x->space);
    free(x->workdir);
    free(x->checkpoint_root);
    for (size_t i = 0; i < x->nenv; i++) {
        free(x->env[i].name);
        free(x->env[i].value);
    }
    free(x->env);
    for (size_t i = 0; i < x->nenv_passthrough; i++)
        free(x->env_passthrough[i]);
    free(x->env_passthrough);
    free(x->policy);
    for (size_t i = 0; i < x->ngpus; i++)
        free(x->gpus[i].type);
    free(x->gpus);
    for (size_t i = 0; i < x->fuse.nshape; i++)
        free(x->fuse.shape[i]);
    free(x->fuse.shape);
    for (size_t i = 0; i < x->nprofile_by; i++)
        free(x->profile_by[i]);
    free(x->profile_by);
    free(x->budget_name);
    free((char *)x->surrogate.param);
    for (size_t i = 0; i < x->pbt.nexplore; i++)
        free((char *)x->pbt_explore[i].param);
    free(x->pbt_explore);
    tp__cluster_cfg_free(&x->cluster);
    json_decref(x->enqueue);
    for (size_t i = 0; i < x->nwarm_start; i++)
        free(x->warm_start[i]);
    free(x->warm_start);
    tp__cfg_constraints_free(x);
    memset(x, 0, sizeof *x);
}
