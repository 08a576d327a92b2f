/* config_command: `command`, the trial's argv (a list, never run through a
 * shell), and once the whole file is read its {placeholders}, each a
 * parameter, a built-in or the budget; a name a mistake already made
 * unknown is not said twice. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "config/config_internal.h"

/* See config_internal.h. */
int tp__cfg_key_command(cfgctx_t *c, const char *key, yaml_node_t *v) {
    (void)key;
    if (v->type != YAML_SEQUENCE_NODE)
        return fail(c, v,
                    "command must be a list of arguments, e.g. [python3, train.py, --lr, "
                    "\"{lr}\"]; it is never run through a shell");
    size_t n = seq_len(v);
    if (n == 0)
        return fail(c, v,
                    "command is empty; list the program and its arguments, e.g. "
                    "[python3, train.py, --lr, \"{lr}\"]");
    for (size_t i = 0; i < n; i++) {
        yaml_node_t *e = tp__cfg_node_at(c, v->data.sequence.items.start[i]);
        if (e->type != YAML_SCALAR_NODE)
            return fail(c, e,
                        "each element of command must be a string, got %s; quote it, e.g. "
                        "\"{lr}\"",
                        e->type == YAML_MAPPING_NODE ? "a mapping (did you forget quotes "
                                                       "around {...}?)"
                                                     : "a list");
    }
    if (!*stext(tp__cfg_node_at(c, v->data.sequence.items.start[0])))
        return fail(c, v, "the program (first element of command) is empty");
    c->x->argv = tp__xcalloc(n + 1, sizeof *c->x->argv);
    for (size_t i = 0; i < n; i++)
        c->x->argv[i] = tp__strdup(stext(tp__cfg_node_at(c, v->data.sequence.items.start[i])));
    c->x->argc = n;
    c->x->program_line =
        (int)tp__cfg_node_at(c, v->data.sequence.items.start[0])->start_mark.line + 1;
    c->x->program_col =
        (int)tp__cfg_node_at(c, v->data.sequence.items.start[0])->start_mark.column + 1;
    c->command = v;
    return 0;
}

/* Is name known to be a placeholder, or one that a mistake said already
 * (a parameter whose domain is wrong, the name of a budget that is)? */
static int placeholder_known(cfgctx_t *c, const char *n) {
    tp_experiment_t *x = c->x;
    if (tp__space_find(&x->space, n) || !strcmp(n, "trial_id") || !strcmp(n, "trial_dir") ||
        (x->budget_name && !strcmp(n, x->budget_name)) ||
        (x->surrogate.param && !strcmp(n, x->surrogate.param)) ||
        (c->fuse && !strcmp(n, "configs_json")))
        return 1;
    if (tp__cfg_param_failed(c, n)) return 1;
    /* A budget, a surrogate with a mistake: its name may be this one. */
    return (c->budget && !x->budget_name && tp__cfg_failed_within(c, c->budget)) ||
           (c->surrogate && !x->surrogate.param && tp__cfg_failed_within(c, c->surrogate));
}

/* Placeholder {n} of command element e names nothing: say so, with the
 * closest name. */
static int unknown_placeholder(cfgctx_t *c, yaml_node_t *e, const char *n) {
    const tp_space_t *sp = &c->x->space;
    if (!strcmp(n, "configs_json"))
        return fail(c, e,
                    "placeholder {configs_json} is given only to fused processes; add "
                    "fuse: {max: 8} or write {{configs_json}} for the literal text");
    const char **cand = tp__xcalloc(sp->n + 3, sizeof *cand);
    tp_buf_t list;
    tp__buf_init(&list);
    for (size_t j = 0; j < sp->n; j++) {
        cand[j] = sp->params[j].name;
        tp__buf_printf(&list, "%s%s", j ? ", " : "", sp->params[j].name);
    }
    cand[sp->n] = "trial_id";
    cand[sp->n + 1] = "trial_dir";
    cand[sp->n + 2] = c->x->budget_name; /* NULL (skipped) without a budget */
    const char *guess = tp__did_you_mean(n, cand, sp->n + 3);
    const char *plist = sp->n ? list.data : "none";
    int rc;
    if (guess)
        rc = fail(c, e, "placeholder {%s} names no parameter; did you mean {%s}? (parameters: %s)",
                  n, guess, plist);
    else
        rc = fail(c, e,
                  "placeholder {%s} names no parameter; use one of the parameters (%s) or "
                  "{trial_id}, {trial_dir}; write {{%s}} for the literal text {%s}",
                  n, plist, n, n);
    tp__buf_free(&list);
    free(cand);
    return rc;
}

/* Every {name} in command must be a parameter, trial_id, trial_dir or the
 * budget's name; other braces are literal text. Each element is checked.
 * O(command length * params). */
int tp__cfg_check_placeholders(cfgctx_t *c) {
    if (!c->command) return 0;
    int rc = 0;
    for (size_t i = 0; i < seq_len(c->command); i++) {
        yaml_node_t *e = tp__cfg_node_at(c, c->command->data.sequence.items.start[i]);
        char **names;
        tp_error_t te;
        int count = tp__template_names(stext(e), &names, &te);
        if (count < 0) {
            rc = fail(c, e, "%s", te.msg);
            continue;
        }
        char **bad = tp__xcalloc((size_t)count + 1, sizeof *bad);
        size_t nbad = 0;
        for (char **n = names; *n; n++)
            if (!placeholder_known(c, *n)) bad[nbad++] = *n;
        if (nbad == 1) rc = unknown_placeholder(c, e, bad[0]);
        if (nbad > 1) { /* one place, one message */
            tp_buf_t list;
            tp__buf_init(&list);
            for (size_t j = 0; j < nbad; j++)
                tp__buf_printf(&list, "%s{%s}", j ? ", " : "", bad[j]);
            rc = fail(c, e,
                      "placeholders %s name no parameter; use the parameters of space, "
                      "{trial_id} or {trial_dir}, or double the braces for the literal text",
                      list.data);
            tp__buf_free(&list);
        }
        free(bad);
        tp__template_names_free(names);
    }
    return rc;
}
