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

/* ---- a set of names, to find a repeated one in O(1) expected ----------- */

typedef struct name_slot {
    const char *key; /* borrowed; NULL: empty slot */
    size_t index;    /* where the key was found (trials[index], ...) */
} name_slot_t;

typedef struct name_set {
    name_slot_t *slot; /* open addressing, linear probing, at most half full */
    size_t mask;       /* slots - 1 (a power of two) */
} name_set_t;

/* A set for up to n names. O(n). */
static void names_init(name_set_t *s, size_t n) {
    size_t cap = 16;
    while (cap < 2 * n)
        cap <<= 1;
    s->slot = tp__xcalloc(cap, sizeof *s->slot);
    s->mask = cap - 1;
}

static void names_free(name_set_t *s) {
    free(s->slot);
    s->slot = NULL;
}

/* Add key (borrowed: it must outlive s), found at index. Returns the index
 * of an equal key added before, or SIZE_MAX when key is new. O(len(key))
 * expected (FNV-1a hash). */
static size_t names_add(name_set_t *s, const char *key, size_t index) {
    uint64_t h = 14695981039346656037ull;
    for (const unsigned char *p = (const unsigned char *)key; *p; p++)
        h = (h ^ *p) * 1099511628211ull;
    for (size_t i = (size_t)h & s->mask;; i = (i + 1) & s->mask) {
        if (!s->slot[i].key) {
            s->slot[i] = (name_slot_t){key, index};
            return SIZE_MAX;
        }
        if (strcmp(s->slot[i].key, key) == 0) return s->slot[i].index;
    }
}

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

#define FAIL(x, v, path, ...)                                                                      \
    do {                                                                                           \
        char g_[80], m_[600];                                                                      \
        snprintf(m_, sizeof m_, __VA_ARGS__);                                                      \
        return tp__errorf((x)->err, -EINVAL, "%s: %s %s, got %s", (x)->where, path, m_,            \
                          got(v, g_, sizeof g_));                                                  \
    } while (0)

/* Keys other than names[] are errors, with a did-you-mean. */
static int known_keys(jctx_t *x, const json_t *obj, const char *path, const char *const *names,
                      size_t n) {
    const char *key;
    json_t *val;
    json_object_foreach((json_t *)obj, key, val) {
        size_t i = 0;
        while (i < n && strcmp(key, names[i]) != 0)
            i++;
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
    if (isinf(hi))
        snprintf(range, sizeof range, "%s%g, inf)", lo_open ? "(" : "[", lo);
    else
        snprintf(range, sizeof range, "%s%g, %g]", lo_open ? "(" : "[", lo, hi);
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

/* GPU g of node path (jg) into gpu; its name must be new to names. */
static int parse_gpu(jctx_t *x, const json_t *jg, const char *path, size_t g, tp_gpu_t *gpu,
                     name_set_t *names) {
    static const char *const gkeys[] = {"name",       "type",  "uuid",   "index",
                                        "memory_mib", "speed", "healthy"};
    char gp[128], dflt[32];
    int rc;
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
    size_t k = names_add(names, gpu->name, g);
    if (k != SIZE_MAX)
        FAIL(x, json_object_get(jg, "name"), gp,
             "name must be unique within its node (gpus[%zu] has it too)", k);
    return 0;
}

static int parse_node(jctx_t *x, const json_t *jn, size_t ni, tp_node_t *node) {
    static const char *const keys[] = {"name", "cpus", "gpus"};
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
    name_set_t names;
    names_init(&names, node->ngpus);
    rc = 0;
    for (size_t g = 0; g < node->ngpus && rc == 0; g++)
        rc = parse_gpu(x, json_array_get(gs, g), path, g, &node->gpus[g], &names);
    names_free(&names);
    return rc;
}

/* A trial's numeric fields: one table for both readers (jansson's and the
 * fast one), so that they accept exactly the same values. */
typedef struct trial_field {
    const char *key;
    int integer; /* 1: a JSON integer in [ilo, ihi]; 0: a finite number in [lo, hi] */
    long long ilo, ihi;
    double lo, hi;
    int lo_open;  /* reals: lo itself excluded */
    double dflt;  /* when absent */
    int gpu_only; /* required when the trial wants GPUs (gpus > 0) */
} trial_field_t;

enum { F_GPUS, F_MEMORY, F_COMPUTE, F_CPUS, F_DURATION, NFIELDS };
static const trial_field_t trial_fields[NFIELDS] = {
    {"gpus", 1, 0, TP_PLACE_MAX_GPUS, 0, 0, 0, 1, 0},
    {"memory_mib", 1, 0, INT64_MAX, 0, 0, 0, 0, 1},
    {"compute", 0, 0, 0, 0, 1, 1, 1.0, 1},
    {"cpus", 1, 0, 1 << 20, 0, 0, 0, 0, 0},
    {"duration_s", 0, 0, 0, 0, INFINITY, 0, 0, 0},
};
static const char *const trial_keys[] = {"id",   "gpus",      "memory_mib", "compute",
                                         "cpus", "duration_s"}; /* trial_keys[1 + F_...] */

/* Whether a value (integer iv when is_int, else real dv) is right for f. */
static int field_ok(const trial_field_t *f, int is_int, long long iv, double dv) {
    if (f->integer) return is_int && iv >= f->ilo && iv <= f->ihi;
    return isfinite(dv) && dv >= f->lo && !(f->lo_open && dv == f->lo) && dv <= f->hi;
}

/* trials[i]'s demand from its field values (val[F_...]). */
static tp_demand_t make_demand(size_t i, const double *val) {
    int gpus = (int)val[F_GPUS];
    return (tp_demand_t){.id = (int64_t)i,
                         .gpus = gpus,
                         .memory_mib = (uint64_t)val[F_MEMORY],
                         .compute = gpus > 0 ? val[F_COMPUTE] : 0,
                         .cpus = (int)val[F_CPUS],
                         .duration_s = val[F_DURATION]};
}

/* trials[i] (jt) into inst; its id must be new to ids. */
static int parse_trial(jctx_t *x, const json_t *jt, size_t i, tp_place_instance_t *inst,
                       name_set_t *ids) {
    char path[64];
    snprintf(path, sizeof path, "trials[%zu]", i);
    if (!json_is_object(jt))
        FAIL(x, jt, path, "must be an object {\"id\", \"gpus\", \"memory_mib\", \"compute\", ...}");
    int rc = known_keys(x, jt, path, trial_keys, TP_ARRAY_LEN(trial_keys));
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
    size_t k = names_add(ids, inst->trial_ids[i], i);
    if (k != SIZE_MAX) {
        char p[80];
        snprintf(p, sizeof p, "%s.id", path);
        FAIL(x, id, p, "must be unique (trials[%zu] has it too)", k);
    }
    double val[NFIELDS];
    for (size_t f = 0; f < NFIELDS; f++) {
        const trial_field_t *tf = &trial_fields[f];
        int required = tf->gpu_only && val[F_GPUS] > 0;
        long long iv;
        if (tf->integer) {
            rc =
                get_int(x, jt, tf->key, path, tf->ilo, tf->ihi, (long long)tf->dflt, required, &iv);
            val[f] = (double)iv;
        } else {
            rc = get_num(x, jt, tf->key, path, tf->lo, tf->lo_open, tf->hi, tf->dflt, required,
                         &val[f]);
        }
        if (rc) return rc;
    }
    inst->trials[i] = make_demand(i, val);
    return 0;
}

static const char *const root_keys[] = {"nodes",  "trials",       "policy",
                                        "limits", "time_limit_s", "node_limit"};

/* Everything of the instance object root but its trials: nodes, limits,
 * policy, time_limit_s, node_limit. O(nodes + GPUs). */
static int parse_setup(jctx_t *x, const json_t *root, tp_place_instance_t *inst) {
    static const char *const lkeys[] = {"reserve_mib", "oversubscribe", "max_per_gpu", "sharing"};
    int rc = 0;
    json_t *nodes = json_object_get(root, "nodes");
    if (!json_is_array(nodes) || json_array_size(nodes) == 0)
        FAIL(x, nodes, "nodes", "must be a non-empty list of nodes");
    tp_cluster_t *c = &inst->cluster;
    c->limits = (tp_place_limits_t){.reserve_mib = 512, .sharing = 1};
    c->nnodes = json_array_size(nodes);
    c->nodes = tp__xcalloc(c->nnodes, sizeof *c->nodes);
    name_set_t names;
    names_init(&names, c->nnodes);
    for (size_t n = 0; n < c->nnodes && rc == 0; n++) {
        if ((rc = parse_node(x, json_array_get(nodes, n), n, &c->nodes[n]))) break;
        size_t k = names_add(&names, c->nodes[n].name, n);
        if (k != SIZE_MAX) {
            char p[64];
            snprintf(p, sizeof p, "nodes[%zu].name", n);
            rc = tp__errorf(x->err, -EINVAL,
                            "%s: %s must be unique (nodes[%zu] has it too), "
                            "got \"%s\"",
                            x->where, p, k, c->nodes[n].name);
        }
    }
    names_free(&names);
    if (rc) return rc;
    json_t *lim = json_object_get(root, "limits");
    if (lim) {
        if (!json_is_object(lim))
            FAIL(x, lim, "limits", "must be an object {\"reserve_mib\", ...}");
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
        c->limits = (tp_place_limits_t){.reserve_mib = (uint64_t)reserve,
                                        .oversubscribe = over,
                                        .max_per_gpu = (int)maxper,
                                        .sharing = !sh || json_is_true(sh) ||
                                                   (json_is_integer(sh) && json_integer_value(sh))};
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
    return 0;
}

/* The instance from jansson's tree: every value checked, every mistake
 * named. O(size). */
static int parse_root(jctx_t *x, const json_t *root, tp_place_instance_t *inst) {
    if (!json_is_object(root))
        FAIL(x, root, "the instance", "must be an object {\"nodes\", \"trials\", ...}");
    int rc = known_keys(x, root, "", root_keys, TP_ARRAY_LEN(root_keys));
    if (rc) return rc;
    json_t *trials = json_object_get(root, "trials");
    if ((rc = parse_setup(x, root, inst))) return rc;
    if (!json_is_array(trials)) FAIL(x, trials, "trials", "must be a list of trials");
    inst->ntrials = json_array_size(trials);
    size_t k = inst->ntrials ? inst->ntrials : 1;
    inst->trials = tp__xcalloc(k, sizeof *inst->trials);
    inst->trial_ids = tp__xcalloc(k, sizeof *inst->trial_ids);
    inst->id_numeric = tp__xcalloc(k, sizeof *inst->id_numeric);
    name_set_t ids;
    names_init(&ids, inst->ntrials);
    for (size_t i = 0; i < inst->ntrials && rc == 0; i++)
        rc = parse_trial(x, json_array_get(trials, i), i, inst, &ids);
    names_free(&ids);
    return rc;
}

/* ---- the fast reader ---------------------------------------------------------
 * jansson builds a hash table per object: about 6 s of CPU and 1 GB for a
 * million trials. The fast reader scans the text once and reads each trial's
 * flat object straight into inst (nodes, limits and the rest, small, go
 * through jansson and parse_setup). It accepts only what it is sure of:
 * anything else (an escape or non-ASCII byte in a string, a key it does not
 * know, a value of a wrong type or out of range, a repeated id, bad syntax)
 * makes it give up, and the jansson reader reads the file again and words
 * the error. O(len) for the trials. */

typedef struct scan {
    const char *p, *end;
} scan_t;

enum { SCAN_GIVE_UP = 1 }; /* the fast reader's only failure: "let jansson read it" */

static void skip_ws(scan_t *s) {
    while (s->p < s->end && (*s->p == ' ' || *s->p == '\n' || *s->p == '\r' || *s->p == '\t'))
        s->p++;
}

/* Consume ch (after whitespace); 0 or SCAN_GIVE_UP. */
static int expect(scan_t *s, char ch) {
    skip_ws(s);
    if (s->p >= s->end || *s->p != ch) return SCAN_GIVE_UP;
    s->p++;
    return 0;
}

/* A string of printable ASCII without escapes: its bytes at *out, *n long. */
static int plain_string(scan_t *s, const char **out, size_t *n) {
    if (expect(s, '"')) return SCAN_GIVE_UP;
    const char *b = s->p;
    while (s->p < s->end && *s->p != '"') {
        unsigned char ch = (unsigned char)*s->p++;
        if (ch < 0x20 || ch >= 0x7f || ch == '\\') return SCAN_GIVE_UP;
    }
    if (s->p >= s->end) return SCAN_GIVE_UP;
    *out = b;
    *n = (size_t)(s->p++ - b);
    return 0;
}

/* A JSON number: an integer (*is_int, *iv) when it has no fraction or
 * exponent, else a real (*dv); either way *dv holds its value. */
static int number(scan_t *s, int *is_int, long long *iv, double *dv) {
    skip_ws(s);
    const char *b = s->p, *e = s->end, *q = b;
    if (q < e && *q == '-') q++;
    if (q >= e || *q < '0' || *q > '9' || (*q == '0' && q + 1 < e && q[1] >= '0' && q[1] <= '9'))
        return SCAN_GIVE_UP;
    while (q < e && *q >= '0' && *q <= '9')
        q++;
    *is_int = 1;
    if (q < e && *q == '.') {
        *is_int = 0;
        if (++q >= e || *q < '0' || *q > '9') return SCAN_GIVE_UP;
        while (q < e && *q >= '0' && *q <= '9')
            q++;
    }
    if (q < e && (*q == 'e' || *q == 'E')) {
        *is_int = 0;
        if (++q < e && (*q == '+' || *q == '-')) q++;
        if (q >= e || *q < '0' || *q > '9') return SCAN_GIVE_UP;
        while (q < e && *q >= '0' && *q <= '9')
            q++;
    }
    char t[64];
    if ((size_t)(q - b) >= sizeof t) return SCAN_GIVE_UP;
    memcpy(t, b, (size_t)(q - b));
    t[q - b] = '\0';
    errno = 0;
    if (*is_int) {
        *iv = strtoll(t, NULL, 10);
        *dv = (double)*iv;
    } else {
        *dv = strtod(t, NULL);
    }
    if (errno || !isfinite(*dv)) return SCAN_GIVE_UP;
    s->p = q;
    return 0;
}

/* Step over one JSON value of any kind (strings and brackets matched; the
 * value's own syntax is left to jansson, which reads the span next). */
static int skip_value(scan_t *s) {
    skip_ws(s);
    int depth = 0;
    while (s->p < s->end) {
        char ch = *s->p++;
        if (ch == '"') {
            while (s->p < s->end && *s->p != '"')
                s->p += *s->p == '\\' ? 2 : 1;
            if (s->p++ >= s->end) return SCAN_GIVE_UP;
        } else if (ch == '{' || ch == '[') {
            depth++;
        } else if (ch == '}' || ch == ']') {
            if (--depth < 0) return SCAN_GIVE_UP;
        }
        if (depth == 0) { /* a scalar ends before , } ] or whitespace */
            while (s->p < s->end && !strchr(",}] \n\r\t", *s->p))
                s->p++;
            return 0;
        }
    }
    return SCAN_GIVE_UP;
}

/* One trial object into inst->...[i]; gives up on anything unusual. */
static int fast_trial(scan_t *s, size_t i, tp_place_instance_t *inst, name_set_t *ids) {
    double val[NFIELDS], idval;
    int seen = 0, is_int;
    long long iv;
    char idtext[128];
    const char *str;
    size_t n;
    if (expect(s, '{')) return SCAN_GIVE_UP;
    snprintf(idtext, sizeof idtext, "%zu", i);
    inst->id_numeric[i] = 1;
    skip_ws(s);
    for (int first = 1; s->p < s->end && *s->p != '}'; first = 0) {
        if ((!first && expect(s, ',')) || plain_string(s, &str, &n) || expect(s, ':'))
            return SCAN_GIVE_UP;
        size_t k = 0;
        while (k < TP_ARRAY_LEN(trial_keys) &&
               (strncmp(trial_keys[k], str, n) != 0 || trial_keys[k][n] != '\0'))
            k++;
        if (k == TP_ARRAY_LEN(trial_keys) || (seen & (1 << k))) return SCAN_GIVE_UP;
        seen |= 1 << k;
        skip_ws(s);
        if (k == 0 && s->p < s->end && *s->p == '"') { /* a string id */
            if (plain_string(s, &str, &n) || n == 0 || n >= sizeof idtext) return SCAN_GIVE_UP;
            memcpy(idtext, str, n);
            idtext[n] = '\0';
            inst->id_numeric[i] = 0;
        } else if (number(s, &is_int, &iv, k ? &val[k - 1] : &idval)) {
            return SCAN_GIVE_UP;
        } else if (k == 0) { /* an integer id */
            if (!is_int) return SCAN_GIVE_UP;
            snprintf(idtext, sizeof idtext, "%lld", iv);
        } else if (!field_ok(&trial_fields[k - 1], is_int, iv, val[k - 1])) {
            return SCAN_GIVE_UP;
        }
        skip_ws(s);
    }
    if (expect(s, '}')) return SCAN_GIVE_UP;
    for (size_t f = 0; f < NFIELDS; f++) {
        if (seen & (1 << (f + 1))) continue;
        if (trial_fields[f].gpu_only && val[F_GPUS] > 0) return SCAN_GIVE_UP; /* required */
        val[f] = trial_fields[f].dflt;
    }
    inst->trial_ids[i] = tp__strdup(idtext);
    if (names_add(ids, inst->trial_ids[i], i) != SIZE_MAX) return SCAN_GIVE_UP;
    inst->trials[i] = make_demand(i, val);
    return 0;
}

/* The trials list into inst, growing its arrays. */
static int fast_trials(scan_t *s, tp_place_instance_t *inst) {
    if (expect(s, '[')) return SCAN_GIVE_UP;
    size_t cap = 1024;
    inst->trials = tp__xmalloc(cap * sizeof *inst->trials);
    inst->trial_ids = tp__xcalloc(cap, sizeof *inst->trial_ids);
    inst->id_numeric = tp__xmalloc(cap * sizeof *inst->id_numeric);
    name_set_t ids;
    names_init(&ids, 0);
    int rc = 0;
    skip_ws(s);
    for (size_t i = 0; rc == 0 && s->p < s->end && *s->p != ']'; i++) {
        if (i && (rc = expect(s, ','))) break;
        if (i == cap) {
            size_t old = cap;
            inst->trials = tp__xgrow(inst->trials, &cap, i + 1, sizeof *inst->trials, 1024);
            inst->trial_ids = tp__xresize(inst->trial_ids, old, cap, sizeof *inst->trial_ids);
            inst->id_numeric = tp__xresize(inst->id_numeric, old, cap, sizeof *inst->id_numeric);
        }
        if (2 * (i + 1) > ids.mask) { /* keep the set at most half full: twice as big */
            names_free(&ids);
            names_init(&ids, 2 * (i + 1));
            for (size_t k = 0; k < i; k++)
                names_add(&ids, inst->trial_ids[k], k);
        }
        inst->ntrials = i + 1;
        rc = fast_trial(s, i, inst, &ids);
        skip_ws(s);
    }
    names_free(&ids);
    return rc ? rc : expect(s, ']');
}

/* The whole instance by the fast reader: 0, or SCAN_GIVE_UP with inst
 * partly filled (the caller frees it). */
static int parse_fast(const char *text, size_t len, const char *where, tp_place_instance_t *inst) {
    scan_t s = {text, text + len};
    json_t *rest = json_object(); /* every key but "trials", through jansson */
    int rc = expect(&s, '{'), have_trials = 0;
    skip_ws(&s);
    for (int first = 1; rc == 0 && s.p < s.end && *s.p != '}'; first = 0) {
        const char *key;
        size_t n;
        if ((!first && expect(&s, ',')) || plain_string(&s, &key, &n) || expect(&s, ':')) {
            rc = SCAN_GIVE_UP;
        } else if (n == 6 && memcmp(key, "trials", 6) == 0) {
            rc = have_trials++ ? SCAN_GIVE_UP : fast_trials(&s, inst);
        } else {
            char name[32];
            skip_ws(&s);
            const char *b = s.p;
            json_t *v = NULL;
            if (n < sizeof name && skip_value(&s) == 0)
                v = json_loadb(b, (size_t)(s.p - b), JSON_REJECT_DUPLICATES | JSON_DECODE_ANY,
                               NULL);
            if (v) {
                memcpy(name, key, n);
                name[n] = '\0';
            }
            if (v && json_object_get(rest, name)) { /* a duplicate key: jansson words it */
                json_decref(v);
                v = NULL;
            }
            if (!v || json_object_set_new(rest, name, v)) rc = SCAN_GIVE_UP;
        }
        skip_ws(&s);
    }
    if (rc == 0 && (expect(&s, '}') || (skip_ws(&s), s.p != s.end) || !have_trials))
        rc = SCAN_GIVE_UP;
    tp_error_t ignored;
    jctx_t x = {where, &ignored};
    if (rc == 0 && (known_keys(&x, rest, "", root_keys, TP_ARRAY_LEN(root_keys)) ||
                    parse_setup(&x, rest, inst)))
        rc = SCAN_GIVE_UP;
    json_decref(rest);
    return rc;
}

int tp__place_instance_parse(const char *text, size_t len, const char *where,
                             tp_place_instance_t *inst, tp_error_t *err) {
    memset(inst, 0, sizeof *inst);
    if (parse_fast(text, len, where, inst) == 0) return 0;
    tp__place_instance_free(inst); /* and read it again, wording any error */
    json_error_t je;
    json_t *root = json_loadb(text, len, JSON_REJECT_DUPLICATES, &je);
    if (!root)
        return tp__errorf(err, -EINVAL,
                          "%s:%d:%d: %s; a placement instance is a JSON object "
                          "{\"nodes\": [...], \"trials\": [...]}",
                          where, je.line, je.column, je.text);
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
    for (size_t i = 0; inst->trial_ids && i < inst->ntrials; i++)
        free(inst->trial_ids[i]);
    free(inst->trial_ids);
    free(inst->id_numeric);
    free(inst->trials);
    memset(inst, 0, sizeof *inst);
}

/* s as a JSON string, escaped as jansson writes it (", \ and control
 * characters; UTF-8 as is). 0 or -ENOMEM. O(len). */
static int put_string(tp_buf_t *b, const char *s) {
    static const char hex[] = "0123456789abcdef";
    int rc = tp__buf_append(b, "\"", 1);
    const char *run = s;
    for (; *s; s++) {
        unsigned char ch = (unsigned char)*s;
        if (ch >= 0x20 && ch != '"' && ch != '\\') continue;
        rc |= tp__buf_append(b, run, (size_t)(s - run));
        run = s + 1;
        const char *esc = ch == '"'    ? "\\\""
                          : ch == '\\' ? "\\\\"
                          : ch == '\n' ? "\\n"
                          : ch == '\t' ? "\\t"
                          : ch == '\r' ? "\\r"
                          : ch == '\b' ? "\\b"
                          : ch == '\f' ? "\\f"
                                       : NULL;
        char u[7] = {'\\', 'u', '0', '0', hex[ch >> 4], hex[ch & 15], 0};
        rc |= tp__buf_puts(b, esc ? esc : u);
    }
    rc |= tp__buf_append(b, run, (size_t)(s - run));
    return rc | tp__buf_append(b, "\"", 1);
}

/* Trial i's id as written: a number, or a string. 0 or -ENOMEM. O(len). */
static int put_id(tp_buf_t *b, const tp_place_instance_t *inst, size_t i) {
    if (inst->id_numeric[i]) return tp__buf_puts(b, inst->trial_ids[i]);
    return put_string(b, inst->trial_ids[i]);
}

/* A finite real with 6 significant digits, always with a '.' or an
 * exponent (as jansson's JSON_REAL_PRECISION(6)). 0 or -ENOMEM. */
static int put_real(tp_buf_t *b, double v) {
    char t[40];
    snprintf(t, sizeof t, "%.6g", isfinite(v) ? v : 0.0);
    if (!strpbrk(t, ".e")) strcat(t, ".0");
    return tp__buf_puts(b, t);
}

/* See place.h. Written straight into one buffer, in jansson's one-line
 * layout ({"a": 1, "b": [...]}), without building JSON values: a million
 * trials take a fraction of a second. NULL when out of memory. O(trials). */
char *tp__place_decision_json(const tp_place_instance_t *inst, const char *policy,
                              const tp_assign_t *out, double occupancy, double decision_us,
                              const tp_place_mip_info_t *mip, double mip_bound) {
    tp_buf_t b;
    tp__buf_init(&b);
    int rc = tp__buf_reserve(&b, 64 + inst->ntrials * 48);
    rc |= tp__buf_puts(&b, "{\"policy\": ") | put_string(&b, policy);
    rc |= tp__buf_puts(&b, ", \"placed\": [");
    size_t k = 0;
    for (size_t i = 0; i < inst->ntrials && rc == 0; i++) {
        if (!out[i].placed) continue;
        const tp_node_t *node = &inst->cluster.nodes[out[i].node];
        rc |= tp__buf_puts(&b, k++ ? ", {\"trial\": " : "{\"trial\": ") | put_id(&b, inst, i);
        rc |= tp__buf_puts(&b, ", \"node\": ") | put_string(&b, node->name);
        rc |= tp__buf_puts(&b, ", \"gpus\": [");
        for (size_t g = 0; g < out[i].ngpus; g++)
            rc |= tp__buf_puts(&b, g ? ", " : "") | put_string(&b, node->gpus[out[i].gpu[g]].name);
        rc |= tp__buf_puts(&b, "]}");
    }
    rc |= tp__buf_puts(&b, "], \"unplaced\": [");
    k = 0;
    for (size_t i = 0; i < inst->ntrials && rc == 0; i++)
        if (!out[i].placed) rc |= tp__buf_puts(&b, k++ ? ", " : "") | put_id(&b, inst, i);
    rc |= tp__buf_puts(&b, "], \"occupancy\": ") | put_real(&b, occupancy);
    rc |= tp__buf_puts(&b, ", \"decision_us\": ") | put_real(&b, decision_us);
    if (mip) {
        rc |= tp__buf_puts(&b, mip->proved_optimal ? ", \"optimal\": {\"proved\": true"
                                                   : ", \"optimal\": {\"proved\": false");
        rc |= tp__buf_puts(&b, mip->time_limit_hit   ? ", \"stopped\": \"time limit\""
                               : mip->node_limit_hit ? ", \"stopped\": \"node limit\""
                                                     : ", \"stopped\": null");
        if (mip_bound >= 0) {
            double bound = mip_bound > occupancy ? mip_bound : occupancy;
            rc |= tp__buf_puts(&b, ", \"bound\": ") | put_real(&b, bound);
            rc |= tp__buf_puts(&b, ", \"gap_points\": ") | put_real(&b, 100 * (bound - occupancy));
        } else {
            rc |= tp__buf_puts(&b, ", \"bound\": null, \"gap_points\": null");
        }
        rc |= tp__buf_printf(&b, ", \"model\": \"%s\", \"variables\": %zu, \"subproblems\": %llu}",
                             mip->model_patterns ? "patterns" : "assignment", mip->columns,
                             (unsigned long long)mip->nodes);
    }
    rc |= tp__buf_puts(&b, "}");
    if (rc) {
        tp__buf_free(&b);
        return NULL;
    }
    return tp__buf_steal(&b);
}
