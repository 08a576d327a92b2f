/* config: what a run shares with others. `permissions` sets who may read
 * the experiment directory and its store; `env_passthrough` which names of
 * the orchestrator's environment trials inherit (docs/security.md). */
#include <string.h>

#include "config/config_internal.h"

static const struct {
    const char *name;
    int dir_mode, file_mode;
} modes[] = {
    {"private", 0700, 0600}, /* the default: the owner only */
    {"group", 0750, 0640},
    {"public", 0755, 0644},
};

int tp__cfg_key_permissions(cfgctx_t *c, const char *key, yaml_node_t *v) {
    for (size_t i = 0; v->type == YAML_SCALAR_NODE && i < TP_ARRAY_LEN(modes); i++)
        if (!strcmp(stext(v), modes[i].name)) {
            c->x->dir_mode = modes[i].dir_mode;
            c->x->file_mode = modes[i].file_mode;
            return 0;
        }
    char got[256];
    return fail(c, v,
                "\"%s\" must be private (owner only, the default), group (owner and group "
                "may read) or public (anyone may read), got %s",
                key, tp__cfg_describe(v, got, sizeof got));
}

/* A name or a glob pattern of names: letters, digits, '_' and * ? [ ]. */
static int valid_pattern(const char *s) {
    if (!*s) return 0;
    for (const char *p = s; *p; p++)
        if (!(*p == '_' || (*p >= 'A' && *p <= 'Z') || (*p >= 'a' && *p <= 'z') ||
              (*p >= '0' && *p <= '9') || strchr("*?[]!-", *p)))
            return 0;
    return 1;
}

int tp__cfg_key_env_passthrough(cfgctx_t *c, const char *key, yaml_node_t *v) {
    if (v->type != YAML_SEQUENCE_NODE) {
        char got[256];
        return fail(c, v,
                    "\"%s\" must be a list of variable names or patterns, e.g. [PATH, "
                    "HOME, \"LC_*\", WANDB_API_KEY]; [] passes nothing; got %s",
                    key, tp__cfg_describe(v, got, sizeof got));
    }
    size_t n = seq_len(v);
    c->x->env_passthrough = tp__xcalloc(n + 1, sizeof *c->x->env_passthrough);
    for (size_t i = 0; i < n; i++) {
        yaml_node_t *e = tp__cfg_node_at(c, v->data.sequence.items.start[i]);
        if (e->type != YAML_SCALAR_NODE || !valid_pattern(stext(e))) {
            char got[256];
            return fail(c, e,
                        "each entry of \"%s\" must be a variable name or a glob pattern "
                        "(letters, digits, '_', '*', '?', [...]), got %s",
                        key, tp__cfg_describe(e, got, sizeof got));
        }
        c->x->env_passthrough[c->x->nenv_passthrough++] = tp__strdup(stext(e));
    }
    return 0;
}
