/* place_json: placement instances as JSON (for `tunepack place` and tests)
 * and decisions back to JSON. Every error names the file and the path of
 * the bad value ("trials[3].compute") with what would be right. */
#include <errno.h>
#include <inttypes.h>
#include <jansson.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "place/place.h"

typedef struct jctx {
    const char *where; /* file name for messages */
    tp_error_t *err;
} jctx_t;

static const char *got(const json_t *v, char *out, size_t n) {
    if (!v) {
        snprintf(out, n, "nothing");
        return out;
    }
    char *s = json_dumps(v, JSON_ENCODE_ANY | JSON_COMPACT);
    snprintf(out, n, "%.60s%s", s ? s : "?", s && strlen(s) > 60 ? "..." : "");
    free(s);
    return out;
}

#define FAIL(x, v, path, ...)                                                         \
    do {                                                                              \
        char g_[80], m_[600];                                                         \
        snprintf(m_, sizeof m_, __VA_ARGS__);                                         \
        return tp__errorf((x)->err, -EINVAL, "%s: %s %s, got %s", (x)->where, path, m_, \
                          got(v, g_, sizeof g_));                                     \
    } while (0)

/* Keys other than names[] are errors, with a did-you-mean. */
static int known_keys(jctx_t *x, const json_t *obj, const char *path, const char *const *names,
                      size_t n) {
    const char *key;
    json_t *val;
    json_object_foreach((json_t *)obj, key, val) {
        size_t i = 0;
        while (i < n && strcmp(key, names[i]) != 0) i++;
        if (i < n) continue;
        const char *guess = tp__did_you_mean(key, names, n);
        return tp__errorf(x->err, -EINVAL, "%s: %s%s\"%s\" is not a known key%s%s%s", x->where,
                          path, *path ? ": " : "", key, guess ? "; did you mean \"" : "",
                          guess ? guess : "", guess ? "\"?" : "");
    }
    return 0;
}

static int get_int(jctx_t *x, const json_t *obj, const char *key, const char *path, long long lo,
                   long long hi, long long dflt, int required, long long *out) {
    json_t *v = json_object_get(obj, key);
    char p[200];
    snprintf(p, sizeof p, "%s.%s", path, key);
    if (!v) {
        if (required) FAIL(x, v, p, "is required: an integer in [%lld, %lld]", lo, hi);
        *out = dflt;
        return 0;
    }
    if (!json_is_integer(v) || json_integer_value(v) < lo || json_integer_value(v) > hi)
        FAIL(x, v, p, "must be an integer in [%lld, %lld]", lo, hi);
    *out = json_integer_value(v);
    return 0;
}

static int get_num(jctx_t *x, const json_t *obj, const char *key, const char *path, double lo,
                   int lo_open, double hi, double dflt, int required, double *out) {
    json_t *v = json_object_get(obj, key);
    char p[200], range[80];
    snprintf(p, sizeof p, "%s.%s", path, key);
    if (isinf(hi)) snprintf(range, sizeof range, "%s%g, inf)", lo_open ? "(" : "[", lo);
    else snprintf(range, sizeof range, "%s%g, %g]", lo_open ? "(" : "[", lo, hi);
    if (!v) {
        if (required) FAIL(x, v, p, "is required: a number in %s", range);
        *out = dflt;
        return 0;
    }
    double d = json_number_value(v);
    if (!json_is_number(v) || !isfinite(d) || d < lo || (lo_open && d == lo) || d > hi)
        FAIL(x, v, p, "must be a number in %s", range);
    *out = d;
    return 0;
}

static int get_str(jctx_t *x, const json_t *obj, const char *key, const char *path,
                   const char *dflt, char *out, size_t n) {
    json_t *v = json_object_get(obj, key);
    char p[200];
    snprintf(p, sizeof p, "%s.%s", path, key);
    if (!v) {
        snprintf(out, n, "%s", dflt);
        return 0;
    }
    if (!json_is_string(v) || json_string_length(v) == 0 || json_string_length(v) >= n)
        FAIL(x, v, p, "must be a non-empty string of at most %zu characters", n - 1);
    snprintf(out, n, "%s", json_string_value(v));
    return 0;
}

static int parse_node(jctx_t *x, const json_t *jn, size_t ni, tp_node_t *node) {
    static const char *const keys[] = {"name", "cpus", "gpus"};
    static const char *const gkeys[] = {"name", "type", "uuid", "index", "memory_mib", "speed",
                                        "healthy"};
    char path[64], dflt[32];
    snprintf(path, sizeof path, "nodes[%zu]", ni);
    if (!json_is_object(jn)) FAIL(x, jn, path, "must be an object {\"name\", \"cpus\", \"gpus\"}");
    int rc = known_keys(x, jn, path, keys, TP_ARRAY_LEN(keys));
    if (rc) return rc;
    snprintf(dflt, sizeof dflt, "n%zu", ni);
    long long cpus;
    if ((rc = get_str(x, jn, "name", path, dflt, node->name, sizeof node->name)) ||
        (rc = get_int(x, jn, "cpus", path, 0, 1 << 20, 0, 1, &cpus)))
        return rc;
    node->cpus = (int)cpus;
    json_t *gs = json_object_get(jn, "gpus");
    char gp[128];
    snprintf(gp, sizeof gp, "%s.gpus", path);
    if (gs && !json_is_array(gs)) FAIL(x, gs, gp, "must be a list of GPU objects");
    node->ngpus = gs ? json_array_size(gs) : 0;
    node->gpus = tp__xcalloc(node->ngpus ? node->ngpus : 1, sizeof *node->gpus);
    for (size_t g = 0; g < node->ngpus; g++) {
        json_t *jg = json_array_get(gs, g);
        tp_gpu_t *gpu = &node->gpus[g];
        snprintf(gp, sizeof gp, "%s.gpus[%zu]", path, g);
        if (!json_is_object(jg)) FAIL(x, jg, gp, "must be an object {\"name\", \"memory_mib\", ...}");
        if ((rc = known_keys(x, jg, gp, gkeys, TP_ARRAY_LEN(gkeys)))) return rc;
        long long mem, index;
        double speed;
        snprintf(dflt, sizeof dflt, "gpu%zu", g);
        if ((rc = get_str(x, jg, "name", gp, dflt, gpu->name, sizeof gpu->name)) ||
            (rc = get_str(x, jg, "type", gp, "gpu", gpu->type, sizeof gpu->type)) ||
            (rc = get_str(x, jg, "uuid", gp, "", gpu->uuid, sizeof gpu->uuid)) ||
            (rc = get_int(x, jg, "index", gp, -1, 1 << 20, (long long)g, 0, &index)) ||
            (rc = get_int(x, jg, "memory_mib", gp, 1, INT64_MAX, 0, 1, &mem)) ||
            (rc = get_num(x, jg, "speed", gp, 0, 1, INFINITY, 1.0, 0, &speed)))
            return rc;
        json_t *h = json_object_get(jg, "healthy");
        if (h && !json_is_boolean(h)) {
            char hp[200];
            snprintf(hp, sizeof hp, "%s.healthy", gp);
            FAIL(x, h, hp, "must be true or false");
        }
        gpu->healthy = h ? json_is_true(h) : 1;
        gpu->memory_mib = (uint64_t)mem;
        gpu->index = (int)index;
        gpu->speed = speed;
        for (size_t k = 0; k < g; k++)
            if (strcmp(node->gpus[k].name, gpu->name) == 0)
                FAIL(x, json_object_get(jg, "name"), gp,
                     "name must be unique within its node (gpus[%zu] has it too)", k);
    }
    return 0;
}

static int parse_trial(jctx_t *x, const json_t *jt, size_t i, tp_place_instance_t *inst) {
    static const char *const keys[] = {"id", "gpus", "memory_mib", "compute", "cpus",
                                       "duration_s"};
    char path[64];
    snprintf(path, sizeof path, "trials[%zu]", i);
    if (!json_is_object(jt))
        FAIL(x, jt, path, "must be an object {\"id\", \"gpus\", \"memory_mib\", \"compute\", ...}");
    int rc = known_keys(x, jt, path, keys, TP_ARRAY_LEN(keys));
    if (rc) return rc;
    json_t *id = json_object_get(jt, "id");
    char idtext[128];
    if (!id) {
        snprintf(idtext, sizeof idtext, "%zu", i);
        inst->id_numeric[i] = 1;
    } else if (json_is_integer(id)) {
        snprintf(idtext, sizeof idtext, "%" JSON_INTEGER_FORMAT, json_integer_value(id));
        inst->id_numeric[i] = 1;
    } else if (json_is_string(id) && json_string_length(id) > 0 &&
               json_string_length(id) < sizeof idtext) {
        snprintf(idtext, sizeof idtext, "%s", json_string_value(id));
    } else {
        char p[80];
        snprintf(p, sizeof p, "%s.id", path);
        FAIL(x, id, p, "must be a string (up to 127 characters) or an integer");
    }
    inst->trial_ids[i] = tp__strdup(idtext);
    for (size_t k = 0; k < i; k++)
        if (strcmp(inst->trial_ids[k], idtext) == 0) {
            char p[80];
            snprintf(p, sizeof p, "%s.id", path);
            FAIL(x, id, p, "must be unique (trials[%zu] has it too)", k);
        }
    tp_demand_t *d = &inst->trials[i];
    long long gpus, mem, cpus;
    double compute, dur;
    if ((rc = get_int(x, jt, "gpus", path, 0, TP_PLACE_MAX_GPUS, 1, 0, &gpus)) ||
        (rc = get_int(x, jt, "memory_mib", path, 0, INT64_MAX, 0, gpus > 0, &mem)) ||
        (rc = get_num(x, jt, "compute", path, 0, 1, 1.0, 0, gpus > 0, &compute)) ||
        (rc = get_int(x, jt, "cpus", path, 0, 1 << 20, 0, 0, &cpus)) ||
        (rc = get_num(x, jt, "duration_s", path, 0, 0, INFINITY, 0, 0, &dur)))
        return rc;
    *d = (tp_demand_t){.id = (int64_t)i, .gpus = (int)gpus, .memory_mib = (uint64_t)mem,
                       .compute = gpus > 0 ? compute : 0, .cpus = (int)cpus, .duration_s = dur};
    return 0;
}

static int parse_root(jctx_t *x, const json_t *root, tp_place_instance_t *inst) {
    static const char *const keys[] = {"nodes", "trials", "policy", "limits", "time_limit_s",
                                       "node_limit"};
    static const char *const lkeys[] = {"reserve_mib", "oversubscribe", "max_per_gpu", "sharing"};
    if (!json_is_object(root)) FAIL(x, root, "the instance", "must be an object {\"nodes\", \"trials\", ...}");
    int rc = known_keys(x, root, "", keys, TP_ARRAY_LEN(keys));
    if (rc) return rc;
    json_t *nodes = json_object_get(root, "nodes"), *trials = json_object_get(root, "trials");
    if (!json_is_array(nodes) || json_array_size(nodes) == 0)
        FAIL(x, nodes, "nodes", "must be a non-empty list of nodes");
    if (!json_is_array(trials)) FAIL(x, trials, "trials", "must be a list of trials");
    tp_cluster_t *c = &inst->cluster;
    c->limits = (tp_place_limits_t){.reserve_mib = 512, .sharing = 1};
    c->nnodes = json_array_size(nodes);
    c->nodes = tp__xcalloc(c->nnodes, sizeof *c->nodes);
    for (size_t n = 0; n < c->nnodes; n++) {
        if ((rc = parse_node(x, json_array_get(nodes, n), n, &c->nodes[n]))) return rc;
        for (size_t k = 0; k < n; k++)
            if (strcmp(c->nodes[k].name, c->nodes[n].name) == 0) {
                char p[64];
                snprintf(p, sizeof p, "nodes[%zu].name", n);
                FAIL(x, json_object_get(json_array_get(nodes, n), "name"), p,
                     "must be unique (nodes[%zu] has it too)", k);
            }
    }
    json_t *lim = json_object_get(root, "limits");
    if (lim) {
        if (!json_is_object(lim)) FAIL(x, lim, "limits", "must be an object {\"reserve_mib\", ...}");
        if ((rc = known_keys(x, lim, "limits", lkeys, TP_ARRAY_LEN(lkeys)))) return rc;
        long long reserve, maxper;
        double over;
        if ((rc = get_int(x, lim, "reserve_mib", "limits", 0, INT64_MAX, 512, 0, &reserve)) ||
            (rc = get_num(x, lim, "oversubscribe", "limits", 0, 0, 16, 0, 0, &over)) ||
            (rc = get_int(x, lim, "max_per_gpu", "limits", 0, 1 << 20, 0, 0, &maxper)))
            return rc;
        json_t *sh = json_object_get(lim, "sharing");
        if (sh && !json_is_boolean(sh) &&
            !(json_is_integer(sh) && (json_integer_value(sh) == 0 || json_integer_value(sh) == 1)))
            FAIL(x, sh, "limits.sharing", "must be true or false (or 1 or 0)");
        c->limits = (tp_place_limits_t){
            .reserve_mib = (uint64_t)reserve, .oversubscribe = over, .max_per_gpu = (int)maxper,
            .sharing = !sh || json_is_true(sh) || (json_is_integer(sh) && json_integer_value(sh))};
    }
    json_t *pol = json_object_get(root, "policy");
    if (pol) {
        if (!json_is_string(pol) || json_string_length(pol) >= sizeof inst->policy)
            FAIL(x, pol, "policy", "must be a policy name such as \"wfd\"");
        snprintf(inst->policy, sizeof inst->policy, "%s", json_string_value(pol));
    }
    long long node_limit;
    if ((rc = get_num(x, root, "time_limit_s", "the instance", 0, 1, 86400, 0, 0,
                      &inst->effort.time_limit_s)) ||
        (rc = get_int(x, root, "node_limit", "the instance", 1, INT64_MAX, 0, 0, &node_limit)))
        return rc;
    inst->effort.node_limit = (uint64_t)node_limit;
    inst->ntrials = json_array_size(trials);
    size_t k = inst->ntrials ? inst->ntrials : 1;
    inst->trials = tp__xcalloc(k, sizeof *inst->trials);
    inst->trial_ids = tp__xcalloc(k, sizeof *inst->trial_ids);
    inst->id_numeric = tp__xcalloc(k, sizeof *inst->id_numeric);
    for (size_t i = 0; i < inst->ntrials; i++)
        if ((rc = parse_trial(x, json_array_get(trials, i), i, inst))) return rc;
    return 0;
}

int tp__place_instance_parse(const char *text, size_t len, const char *where,
                             tp_place_instance_t *inst, tp_error_t *err) {
    memset(inst, 0, sizeof *inst);
    json_error_t je;
    json_t *root = json_loadb(text, len, JSON_REJECT_DUPLICATES, &je);
    if (!root)
        return tp__errorf(err, -EINVAL, "%s:%d:%d: %s; a placement instance is a JSON object "
                          "{\"nodes\": [...], \"trials\": [...]}", where, je.line, je.column,
                          je.text);
    jctx_t x = {where, err};
    int rc = parse_root(&x, root, inst);
    json_decref(root);
    if (rc) tp__place_instance_free(inst);
    return rc;
}

int tp__place_instance_load(const char *path, tp_place_instance_t *inst, tp_error_t *err) {
    char *text = NULL;
    size_t len = 0;
    memset(inst, 0, sizeof *inst);
    int rc = tp__read_file(path, &text, &len, err);
    if (rc) return rc;
    rc = tp__place_instance_parse(text, len, path, inst, err);
    free(text);
    return rc;
}

void tp__place_instance_free(tp_place_instance_t *inst) {
    if (!inst) return;
    tp__cluster_free(&inst->cluster);
    for (size_t i = 0; inst->trial_ids && i < inst->ntrials; i++) free(inst->trial_ids[i]);
    free(inst->trial_ids);
    free(inst->id_numeric);
    free(inst->trials);
    memset(inst, 0, sizeof *inst);
}

static json_t *id_json(const tp_place_instance_t *inst, size_t i) {
    if (inst->id_numeric[i]) return json_integer(strtoll(inst->trial_ids[i], NULL, 10));
    return json_string(inst->trial_ids[i]);
}

char *tp__place_decision_json(const tp_place_instance_t *inst, const char *policy,
                              const tp_assign_t *out, double occupancy, double decision_us) {
    json_t *placed = json_array(), *unplaced = json_array();
    for (size_t i = 0; i < inst->ntrials; i++) {
        if (!out[i].placed) {
            json_array_append_new(unplaced, id_json(inst, i));
            continue;
        }
        const tp_node_t *node = &inst->cluster.nodes[out[i].node];
        json_t *gpus = json_array();
        for (size_t k = 0; k < out[i].ngpus; k++)
            json_array_append_new(gpus, json_string(node->gpus[out[i].gpu[k]].name));
        json_array_append_new(placed, json_pack("{s:o, s:s, s:o}", "trial", id_json(inst, i),
                                                "node", node->name, "gpus", gpus));
    }
    json_t *o = json_pack("{s:s, s:o, s:o, s:f, s:f}", "policy", policy, "placed", placed,
                          "unplaced", unplaced, "occupancy", occupancy, "decision_us",
                          decision_us);
    char *text = json_dumps(o, JSON_PRESERVE_ORDER | JSON_REAL_PRECISION(6)) /* one line */;
    json_decref(o);
    return text;
}
