/* config_cluster: `cluster:`, where trials run: on this machine (local), on
 * the nodes of a Slurm allocation (slurm), or on hosts reached over ssh. */
#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "config/config_internal.h"

#define CLUSTER_EXAMPLE                                                                            \
    "cluster: local, cluster: slurm, cluster: {slurm: {nodes: 2, gpus_per_node: 4}} or "           \
    "cluster: {ssh: {hosts: [gpu1, gpu2:2222]}}"

static void free_list(char **v, size_t n) {
    for (size_t i = 0; i < n; i++)
        free(v[i]);
    free(v);
}

void tp__cluster_cfg_free(tp_cluster_cfg_t *k) {
    free_list(k->hosts, k->nhosts);
    free_list(k->extra, k->nextra);
    free_list(k->agent, k->nagent);
    free(k->identity);
    free(k->ssh_config);
    free(k->partition);
    free(k->account);
    free(k->time_limit);
    memset(k, 0, sizeof *k);
}

/* A host as written: [user@]host[:port], no spaces, no leading '-' (ssh
 * would read it as an option). */
static int valid_host(const char *h) {
    if (!*h || *h == '-') return 0;
    for (const char *p = h; *p; p++)
        if (isspace((unsigned char)*p) || !isprint((unsigned char)*p)) return 0;
    return 1;
}

/* A list of non-empty strings (or one string) into *out, its length into *n. */
static int string_list(cfgctx_t *c, const char *key, yaml_node_t *v, char ***out, size_t *n,
                       const char *example) {
    free_list(*out, *n);
    *out = NULL;
    *n = 0;
    if (v->type == YAML_SCALAR_NODE) {
        const char *s;
        int rc = tp__cfg_get_string(c, key, v, &s);
        if (rc < 0) return rc;
        *out = tp__xcalloc(2, sizeof **out);
        (*out)[0] = tp__strdup(s);
        *n = 1;
        return 0;
    }
    if (v->type != YAML_SEQUENCE_NODE)
        return fail(c, v, "\"%s\" must be a list of strings, e.g. %s", key, example);
    size_t len = seq_len(v);
    if (len == 0) return fail(c, v, "\"%s\" is empty; e.g. %s", key, example);
    *out = tp__xcalloc(len + 1, sizeof **out);
    for (size_t i = 0; i < len; i++) {
        yaml_node_t *e = tp__cfg_node_at(c, v->data.sequence.items.start[i]);
        const char *s;
        if (e->type != YAML_SCALAR_NODE || !*stext(e))
            return fail(c, e, "each element of \"%s\" must be a non-empty string, e.g. %s", key,
                        example);
        s = stext(e);
        (*out)[(*n)++] = tp__strdup(s);
    }
    return 0;
}

static int set_string(cfgctx_t *c, const char *key, yaml_node_t *v, char **dst) {
    const char *s;
    int rc = tp__cfg_get_string(c, key, v, &s);
    if (rc < 0) return rc;
    free(*dst);
    *dst = tp__strdup(s);
    return 0;
}

/* ---- ssh ------------------------------------------------------------------------ */
static int check_hosts(cfgctx_t *c, yaml_node_t *v) {
    tp_cluster_cfg_t *k = &c->x->cluster;
    for (size_t i = 0; i < k->nhosts; i++)
        if (!valid_host(k->hosts[i]))
            return fail(c, v,
                        "host \"%s\" is not a host name; write [user@]host[:port], e.g. "
                        "gpu1, alice@gpu2 or gpu3:2222",
                        k->hosts[i]);
    return 0;
}

static int ssh_hosts(cfgctx_t *c, const char *key, yaml_node_t *v) {
    tp_cluster_cfg_t *k = &c->x->cluster;
    int rc = string_list(c, key, v, &k->hosts, &k->nhosts, "hosts: [gpu1, gpu2:2222, alice@gpu3]");
    return rc < 0 ? rc : check_hosts(c, v);
}

/* hosts_file: one host per line; blank lines and # comments are skipped. */
static int ssh_hosts_file(cfgctx_t *c, const char *key, yaml_node_t *v) {
    const char *path;
    int rc = tp__cfg_get_string(c, key, v, &path);
    if (rc < 0) return rc;
    FILE *f = fopen(path, "r");
    if (!f) return fail(c, v, "cannot read hosts_file \"%s\": %s", path, strerror(errno));
    tp_cluster_cfg_t *k = &c->x->cluster;
    char line[512];
    int lineno = 0;
    while (rc == 0 && fgets(line, sizeof line, f)) {
        lineno++;
        char *h = line + strspn(line, " \t");
        h[strcspn(h, "#\r\n")] = 0;
        for (size_t n = strlen(h); n && isspace((unsigned char)h[n - 1]); n--)
            h[n - 1] = 0;
        if (!*h) continue;
        if (!valid_host(h)) {
            rc = fail(c, v, "%s:%d: \"%s\" is not a host name; write [user@]host[:port]", path,
                      lineno, h);
            break;
        }
        k->hosts = tp__xrealloc(k->hosts, (k->nhosts + 2) * sizeof *k->hosts);
        k->hosts[k->nhosts++] = tp__strdup(h);
        k->hosts[k->nhosts] = NULL;
    }
    fclose(f);
    if (rc == 0 && k->nhosts == 0) rc = fail(c, v, "hosts_file \"%s\" lists no host", path);
    return rc;
}

static int ssh_identity(cfgctx_t *c, const char *key, yaml_node_t *v) {
    return set_string(c, key, v, &c->x->cluster.identity);
}

static int ssh_config(cfgctx_t *c, const char *key, yaml_node_t *v) {
    return set_string(c, key, v, &c->x->cluster.ssh_config);
}

static int agent_command(cfgctx_t *c, const char *key, yaml_node_t *v) {
    tp_cluster_cfg_t *k = &c->x->cluster;
    return string_list(c, key, v, &k->agent, &k->nagent,
                       "agent: [/opt/tunepack/bin/tunepack, agent]");
}

static int shared_storage(cfgctx_t *c, const char *key, yaml_node_t *v) {
    const char *s = v->type == YAML_SCALAR_NODE ? stext(v) : "";
    if (strcmp(s, "true") == 0 || strcmp(s, "false") == 0) {
        c->x->cluster.shared = strcmp(s, "true") == 0;
        return 0;
    }
    return fail(c, v,
                "\"%s\" must be true (every node sees the experiment directory) or false "
                "(trials' logs stream back to it)",
                key);
}

static const char *const range_keys[] = {"min", "max"}; /* slurm.nodes: {min, max} */
static const key_table_t range_table = KEY_NAMES(range_keys, NULL);

static const key_spec_t ssh_keys[] = {
    {"shared", shared_storage, 0, NULL},     {"hosts", ssh_hosts, 0, NULL},
    {"hosts_file", ssh_hosts_file, 0, NULL}, {"identity", ssh_identity, 0, NULL},
    {"config", ssh_config, 0, NULL},         {"agent", agent_command, 0, NULL},
};

/* ---- command: an agent per node through any command -------------------------- */
static int command_nodes(cfgctx_t *c, const char *key, yaml_node_t *v) {
    return ssh_hosts(c, key, v);
}

static int command_argv(cfgctx_t *c, const char *key, yaml_node_t *v) {
    tp_cluster_cfg_t *k = &c->x->cluster;
    int rc = string_list(c, key, v, &k->agent, &k->nagent,
                         "argv: [docker, exec, -i, \"{node}\", tunepack, agent]");
    if (rc < 0) return rc;
    for (size_t i = 0; i < k->nagent; i++)
        if (strstr(k->agent[i], "{node}")) return 0;
    return fail(c, v,
                "argv must name the node somewhere with {node}, e.g. [docker, exec, -i, "
                "\"{node}\", tunepack, agent]");
}

static const key_spec_t command_keys[] = {
    {"shared", shared_storage, 0, NULL},
    {"nodes", command_nodes, 1, "nodes: [worker1, worker2]"},
    {"argv", command_argv, 1, "argv: [docker, exec, -i, \"{node}\", tunepack, agent]"},
};

/* ---- slurm ---------------------------------------------------------------------- */
static int slurm_nodes(cfgctx_t *c, const char *key, yaml_node_t *v) {
    tp_cluster_cfg_t *k = &c->x->cluster;
    long long n;
    if (v->type == YAML_MAPPING_NODE) {
        yaml_node_t *lo = NULL, *hi = NULL;
        int rc = tp__cfg_check_mapping(c, key, v, "nodes: {min: 1, max: 8}");
        for (yaml_node_pair_t *p = v->data.mapping.pairs.start;
             rc == 0 && p < v->data.mapping.pairs.top; p++) {
            const char *name = stext(tp__cfg_node_at(c, p->key));
            if (strcmp(name, range_keys[0]) == 0)
                lo = tp__cfg_node_at(c, p->value);
            else if (strcmp(name, range_keys[1]) == 0)
                hi = tp__cfg_node_at(c, p->value);
            else
                rc = fail(
                    c, tp__cfg_node_at(c, p->key),
                    "unknown key \"%s\" in nodes; use min and max, e.g. nodes: {min: 1, max: 8}",
                    name);
        }
        if (rc < 0) return rc;
        if (!lo || !hi) return fail(c, v, "nodes needs both min and max, e.g. {min: 1, max: 8}");
        long long a, b;
        if ((rc = tp__cfg_get_int(c, "nodes.min", lo, 1, 100000, &a)) < 0 ||
            (rc = tp__cfg_get_int(c, "nodes.max", hi, 1, 100000, &b)) < 0)
            return rc;
        if (b < a) return fail(c, hi, "nodes.max (%lld) is below nodes.min (%lld)", b, a);
        k->nodes_min = (int)a;
        k->nodes_max = (int)b;
        return 0;
    }
    int rc = tp__cfg_get_int(c, key, v, 1, 100000, &n);
    if (rc < 0) return rc;
    k->nodes_min = k->nodes_max = (int)n;
    return 0;
}

/* An integer in [lo, hi] into *dst. */
static int int_into(cfgctx_t *c, const char *key, yaml_node_t *v, long long lo, long long hi,
                    int *dst) {
    long long n;
    int rc = tp__cfg_get_int(c, key, v, lo, hi, &n);
    if (rc == 0) *dst = (int)n;
    return rc;
}
static int slurm_gpus(cfgctx_t *c, const char *key, yaml_node_t *v) {
    return int_into(c, key, v, 0, 100000, &c->x->cluster.gpus_per_node);
}
static int slurm_cpus(cfgctx_t *c, const char *key, yaml_node_t *v) {
    return int_into(c, key, v, 0, 100000, &c->x->cluster.cpus_per_node);
}
static int slurm_partition(cfgctx_t *c, const char *key, yaml_node_t *v) {
    return set_string(c, key, v, &c->x->cluster.partition);
}
static int slurm_account(cfgctx_t *c, const char *key, yaml_node_t *v) {
    return set_string(c, key, v, &c->x->cluster.account);
}
static int slurm_time(cfgctx_t *c, const char *key, yaml_node_t *v) {
    return set_string(c, key, v, &c->x->cluster.time_limit);
}
static int slurm_idle(cfgctx_t *c, const char *key, yaml_node_t *v) {
    return tp__cfg_get_duration(c, key, v, &c->x->cluster.idle_s);
}
static int slurm_extra(cfgctx_t *c, const char *key, yaml_node_t *v) {
    tp_cluster_cfg_t *k = &c->x->cluster;
    return string_list(c, key, v, &k->extra, &k->nextra, "extra: [--qos=short, --constraint=a100]");
}

static const key_spec_t slurm_keys[] = {
    {"nodes", slurm_nodes, 0, NULL, &range_table},
    {"gpus_per_node", slurm_gpus, 0, NULL},
    {"cpus_per_node", slurm_cpus, 0, NULL},
    {"partition", slurm_partition, 0, NULL},
    {"account", slurm_account, 0, NULL},
    {"time", slurm_time, 0, NULL},
    {"extra", slurm_extra, 0, NULL},
    {"agent", agent_command, 0, NULL},
    {"idle", slurm_idle, 0, NULL},
    {"shared", shared_storage, 0, NULL},
};

/* ---- cluster -------------------------------------------------------------------- */
static const key_table_t slurm_table = KEY_TABLE(slurm_keys), ssh_table = KEY_TABLE(ssh_keys),
                         command_table = KEY_TABLE(command_keys);

/* The kinds, by tp_cluster_kind_t: `cluster: KIND` or `cluster: {KIND: {...}}`
 * (tp__cfg_key_cluster walks each kind's keys itself). */
static const key_spec_t kinds[] = {
    [TP_CLUSTER_LOCAL] = {"local", NULL, 0, NULL, NULL},
    [TP_CLUSTER_SLURM] = {"slurm", NULL, 0, NULL, &slurm_table},
    [TP_CLUSTER_SSH] = {"ssh", NULL, 0, NULL, &ssh_table},
    [TP_CLUSTER_COMMAND] = {"command", NULL, 0, NULL, &command_table},
};
const key_table_t tp__cfg_cluster_table = KEY_TABLE(kinds);

const char *tp__cluster_kind_name(tp_cluster_kind_t k) {
    return (unsigned)k < TP_ARRAY_LEN(kinds) ? kinds[k].key : "?";
}

static int kind_by_name(cfgctx_t *c, yaml_node_t *at, const char *name) {
    const char *kind_names[TP_ARRAY_LEN(kinds)];
    for (size_t i = 0; i < TP_ARRAY_LEN(kinds); i++) {
        kind_names[i] = kinds[i].key;
        if (strcmp(name, kinds[i].key) == 0) {
            c->x->cluster.kind = (tp_cluster_kind_t)i;
            return 0;
        }
    }
    const char *guess = tp__did_you_mean(name, kind_names, TP_ARRAY_LEN(kinds));
    if (guess)
        return fail(c, at, "unknown cluster \"%s\"; did you mean \"%s\"? (%s)", name, guess,
                    CLUSTER_EXAMPLE);
    return fail(c, at, "unknown cluster \"%s\"; use %s", name, CLUSTER_EXAMPLE);
}

int tp__cfg_key_cluster(cfgctx_t *c, const char *key, yaml_node_t *v) {
    tp_cluster_cfg_t *k = &c->x->cluster;
    tp__cluster_cfg_free(k);
    k->shared = 1;
    if (v->type == YAML_SCALAR_NODE) {
        int rc = kind_by_name(c, v, stext(v));
        if (rc == 0 && k->kind == TP_CLUSTER_SSH)
            return fail(c, v,
                        "cluster: ssh needs its hosts, e.g. cluster: {ssh: {hosts: [gpu1, gpu2]}}");
        if (rc == 0 && k->kind == TP_CLUSTER_COMMAND)
            return fail(c, v,
                        "cluster: command needs its nodes and argv, e.g. cluster: {command: "
                        "{nodes: [w1], argv: [docker, exec, -i, \"{node}\", tunepack, agent]}}");
        return rc;
    }
    int rc = tp__cfg_check_mapping(c, key, v, CLUSTER_EXAMPLE);
    if (rc < 0) return rc;
    if (v->data.mapping.pairs.top - v->data.mapping.pairs.start != 1)
        return fail(c, v, "cluster takes one kind, e.g. %s", CLUSTER_EXAMPLE);
    yaml_node_pair_t *p = v->data.mapping.pairs.start;
    yaml_node_t *name = tp__cfg_node_at(c, p->key), *body = tp__cfg_node_at(c, p->value);
    if ((rc = kind_by_name(c, name, stext(name))) < 0) return rc;
    switch (k->kind) {
    case TP_CLUSTER_LOCAL:
        if (body->type == YAML_SCALAR_NODE && !*stext(body)) return 0;
        return tp__cfg_walk_mapping(c, "cluster.local", body, NULL, 0, "cluster: local");
    case TP_CLUSTER_SLURM:
        k->slurm_request = 1;
        k->idle_s = 30;
        rc = tp__cfg_walk_mapping(c, "cluster.slurm", body, slurm_keys, TP_ARRAY_LEN(slurm_keys),
                                  "{slurm: {nodes: 2, gpus_per_node: 4, time: 2h}}");
        if (rc == 0 && k->nodes_min == 0) k->nodes_min = k->nodes_max = 1;
        return rc;
    case TP_CLUSTER_SSH:
        rc = tp__cfg_walk_mapping(c, "cluster.ssh", body, ssh_keys, TP_ARRAY_LEN(ssh_keys),
                                  "{ssh: {hosts: [gpu1, gpu2:2222]}}");
        if (rc == 0 && k->nhosts == 0)
            return fail(c, body, "cluster.ssh needs hosts: [gpu1, gpu2] or hosts_file: FILE");
        return rc;
    case TP_CLUSTER_COMMAND:
        return tp__cfg_walk_mapping(c, "cluster.command", body, command_keys,
                                    TP_ARRAY_LEN(command_keys),
                                    "{command: {nodes: [w1, w2], argv: [docker, exec, -i, "
                                    "\"{node}\", tunepack, agent]}}");
    }
    return 0;
}

/* ---- concurrency: per node, and over the cluster ------------------------------- */
#define CONCURRENCY_EXAMPLE                                                                        \
    "concurrency: 4 (on each node), concurrency: {per_node: 4, total: 10} or concurrency: "        \
    "{total: 10}"

static int concurrency_per_node(cfgctx_t *c, const char *key, yaml_node_t *v) {
    return int_into(c, key, v, 1, 4096, &c->x->concurrency);
}
static int concurrency_total(cfgctx_t *c, const char *key, yaml_node_t *v) {
    return int_into(c, key, v, 1, 1 << 20, &c->x->concurrency_total);
}

static const key_spec_t concurrency_keys[] = {
    {"per_node", concurrency_per_node, 0, NULL},
    {"total", concurrency_total, 0, NULL},
};

/* `concurrency: N` is N on each node (Slurm's --ntasks-per-node: a second
 * node doubles the trials at once); `{per_node: N, total: M}` caps the
 * cluster too, and `{total: M}` alone caps only the cluster (Ray Tune's
 * max_concurrent_trials). */
int tp__cfg_key_concurrency(cfgctx_t *c, const char *key, yaml_node_t *v) {
    tp_experiment_t *x = c->x;
    x->concurrency_total = 0;
    if (v->type != YAML_MAPPING_NODE) {
        if (v->type == YAML_SCALAR_NODE) return concurrency_per_node(c, key, v);
        return fail(c, v, "\"%s\" must be a number or a mapping, e.g. %s", key,
                    CONCURRENCY_EXAMPLE);
    }
    x->concurrency = 0;
    int rc = tp__cfg_walk_mapping(c, key, v, concurrency_keys, TP_ARRAY_LEN(concurrency_keys),
                                  CONCURRENCY_EXAMPLE);
    if (rc == 0 && !x->concurrency && !x->concurrency_total)
        rc = fail(c, v, "\"%s\" needs per_node or total, e.g. %s", key, CONCURRENCY_EXAMPLE);
    if (rc == 0 && x->concurrency_total && x->concurrency > x->concurrency_total)
        rc = fail(c, v,
                  "concurrency.per_node (%d) is above concurrency.total (%d); lower "
                  "per_node or leave it out",
                  x->concurrency, x->concurrency_total);
    if (!x->concurrency) /* total alone: no node runs more than all of them */
        x->concurrency = x->concurrency_total ? x->concurrency_total : 1;
    return rc;
}

int tp__cluster_cfg_from_arg(const char *arg, tp_cluster_cfg_t *out, tp_error_t *err) {
    tp__cluster_cfg_free(out);
    out->shared = 1;
    if (strcmp(arg, "local") == 0) return 0;
    if (strcmp(arg, "slurm") == 0) {
        out->kind = TP_CLUSTER_SLURM;
        return 0;
    }
    if (strncmp(arg, "ssh:", 4) == 0 && arg[4]) {
        out->kind = TP_CLUSTER_SSH;
        char *copy = tp__strdup(arg + 4), *save = NULL;
        for (char *h = strtok_r(copy, ",", &save); h; h = strtok_r(NULL, ",", &save)) {
            if (!valid_host(h)) {
                int rc =
                    tp__errorf(err, -EINVAL,
                               "--cluster: \"%s\" is not a host name; write ssh:HOST[,HOST...] "
                               "with [user@]host[:port]",
                               h);
                free(copy);
                tp__cluster_cfg_free(out);
                return rc;
            }
            out->hosts = tp__xrealloc(out->hosts, (out->nhosts + 2) * sizeof *out->hosts);
            out->hosts[out->nhosts++] = tp__strdup(h);
            out->hosts[out->nhosts] = NULL;
        }
        free(copy);
        if (out->nhosts) return 0;
    }
    return tp__errorf(err, -EINVAL,
                      "--cluster: unknown \"%s\"; use local, slurm (inside an allocation) or "
                      "ssh:HOST[,HOST...]",
                      arg);
}
