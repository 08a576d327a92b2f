/* config_change: what changed between the file an experiment was started
 * from and the file it is run with now. Both are compared as parsed YAML
 * (resolved values), so comments, quoting, flow or block style never
 * matter; each top-level key is either one that may change between runs
 * (picked up by the next run), one that gives recorded trials their
 * meaning (a change is refused), or the command, which gives them meaning
 * only once a trial has a result (until then a change fixes a mistake). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <yaml.h>

#include "config/config.h"
#include "config/config_internal.h"

/* Top-level keys (or "key.member" for one member of a mapping key). A key
 * not listed is a meaning key: a key added to the file format is safe until
 * someone decides it may change. One line per key. may_change: 1 always,
 * 0 never, UNTIL_RESULTS while no trial has a result. */
enum { UNTIL_RESULTS = 2 };
static const struct {
    const char *key;
    int may_change;
} key_kinds[] = {
    {"description", 1},
    {"search.trials", 1},
    {"concurrency", 1},
    {"retries", 1},
    {"timeout", 1},
    {"stop_grace", 1},
    {"log_limit", 1},
    {"fail_fast", 1},
    {"deadline", 1},
    {"resources", 1},
    {"placement", 1},
    {"sharing", 1},
    {"groups", 1},
    {"gpus", 1},
    {"profile_by", 1},
    {"cluster", 1},
    {"env", 1},
    {"checkpoint", 1},
    {"workdir", 1},
    {"env_passthrough", 1},
    {"permissions", 1},
    {"reallocation", 1},
    {"fuse", 1},
    /* meaning: what a recorded trial was, and how it was judged */
    {"command", UNTIL_RESULTS},
    {"name", 0},
    {"metric", 0},
    {"space", 0},
    {"search", 0},
    {"enqueue", 0},
    {"budget", 0},
    {"checkpoint_root", 0},
    {"surrogate", 0},
    {"constraints", 0},
    {"pbt", 0},
};

static int may_change(const char *key) {
    for (size_t i = 0; i < TP_ARRAY_LEN(key_kinds); i++)
        if (strcmp(key_kinds[i].key, key) == 0) return key_kinds[i].may_change;
    return 0;
}

static json_t *tree(yaml_document_t *doc, yaml_node_t *n, int depth) {
    if (!n || depth > 64) return json_null();
    if (n->type == YAML_SCALAR_NODE) return tp__cfg_resolve_scalar(n);
    if (n->type == YAML_SEQUENCE_NODE) {
        json_t *a = json_array();
        for (yaml_node_item_t *i = n->data.sequence.items.start; i < n->data.sequence.items.top;
             i++)
            json_array_append_new(a, tree(doc, yaml_document_get_node(doc, *i), depth + 1));
        return a;
    }
    json_t *o = json_object();
    for (yaml_node_pair_t *p = n->data.mapping.pairs.start; p < n->data.mapping.pairs.top; p++) {
        yaml_node_t *k = yaml_document_get_node(doc, p->key);
        if (k && k->type == YAML_SCALAR_NODE)
            json_object_set_new(o, (const char *)k->data.scalar.value,
                                tree(doc, yaml_document_get_node(doc, p->value), depth + 1));
    }
    return o;
}

json_t *tp__config_tree(const char *text) {
    yaml_parser_t parser;
    yaml_document_t doc;
    if (!yaml_parser_initialize(&parser)) return NULL;
    yaml_parser_set_input_string(&parser, (const unsigned char *)text, strlen(text));
    json_t *out = NULL;
    if (yaml_parser_load(&parser, &doc)) {
        yaml_node_t *root = yaml_document_get_root_node(&doc);
        out = root && root->type == YAML_MAPPING_NODE ? tree(&doc, root, 0) : json_object();
        yaml_document_delete(&doc);
    }
    yaml_parser_delete(&parser);
    return out;
}

typedef struct changes {
    tp_buf_t *accepted, *refused; /* the caller's */
    int results;                  /* a trial has a result: UNTIL_RESULTS keys are refused */
} changes_t;

/* "key: OLD -> NEW" (absent: "(none)") appended to the list its kind says;
 * a key that may change only until results comes as a diff, old and new on
 * a line each, as it is the one that is long (a command). */
static void say_change(const changes_t *c, const char *key, const json_t *a, const json_t *b) {
    const size_t flags =
        JSON_COMPACT | JSON_ENCODE_ANY | JSON_PRESERVE_ORDER | JSON_REAL_PRECISION(12);
    char *x = a ? json_dumps(a, flags) : NULL, *y = b ? json_dumps(b, flags) : NULL;
    int kind = may_change(key);
    tp_buf_t *out = kind == 1 || (kind == UNTIL_RESULTS && !c->results) ? c->accepted : c->refused;
    if (kind == UNTIL_RESULTS)
        tp__buf_printf(out, "%s  %s:%s\n    - %.2000s\n    + %.2000s", out->len ? "\n" : "", key,
                       c->results ? " (trials have results under the old one)"
                                  : " (no trial has a result yet)",
                       x ? x : "(none)", y ? y : "(none)");
    else
        tp__buf_printf(out, "%s  %s: %.300s -> %.300s", out->len ? "\n" : "", key, x ? x : "(none)",
                       y ? y : "(none)");
    free(x);
    free(y);
}

/* Compare member `key` of a and b (objects); a change goes to accepted or
 * refused by its kind. Mappings whose members have kinds of their own
 * ("search.trials") are compared member by member. */
static void compare_key(const char *key, const json_t *a, const json_t *b, const changes_t *c) {
    const json_t *va = json_object_get(a, key), *vb = json_object_get(b, key);
    if ((!va && !vb) || (va && vb && json_equal(va, vb))) return;
    int split = 0;
    for (size_t i = 0; i < TP_ARRAY_LEN(key_kinds); i++)
        split |= strncmp(key_kinds[i].key, key, strlen(key)) == 0 &&
                 key_kinds[i].key[strlen(key)] == '.';
    if (split && (!va || json_is_object(va)) && (!vb || json_is_object(vb))) {
        json_t *keys = json_object();
        const char *k;
        json_t *v;
        json_object_foreach((json_t *)va, k, v) json_object_set(keys, k, json_true());
        json_object_foreach((json_t *)vb, k, v) json_object_set(keys, k, json_true());
        json_object_foreach(keys, k, v) {
            const json_t *ma = json_object_get(va, k), *mb = json_object_get(vb, k);
            if ((!ma && !mb) || (ma && mb && json_equal(ma, mb))) continue;
            char full[256];
            snprintf(full, sizeof full, "%s.%s", key, k);
            say_change(c, full, ma, mb);
        }
        json_decref(keys);
        return;
    }
    say_change(c, key, va, vb);
}

int tp__config_changes(const char *old_text, const char *new_text, int results, tp_buf_t *accepted,
                       tp_buf_t *refused) {
    const changes_t c = {.accepted = accepted, .refused = refused, .results = results};
    json_t *a = tp__config_tree(old_text), *b = tp__config_tree(new_text);
    if (!a || !b) {
        json_decref(a);
        json_decref(b);
        return -1;
    }
    json_t *keys = json_object();
    const char *k;
    json_t *v;
    json_object_foreach(a, k, v) json_object_set(keys, k, json_true());
    json_object_foreach(b, k, v) json_object_set(keys, k, json_true());
    json_object_foreach(keys, k, v) compare_key(k, a, b, &c);
    json_decref(keys);
    json_decref(a);
    json_decref(b);
    return refused->len ? 1 : 0;
}
