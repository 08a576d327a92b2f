/* workload: sp.yaml (libyaml document API) -> tp_workload_t, and the jobs
 * of a space with their modelled profiles (see workload.h). */
#include "sim/workload.h"

#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <yaml.h>

typedef struct wctx {
    const char *path; /* for messages */
    yaml_document_t *doc;
    tp_error_t *err;
    const yaml_node_t *root; /* the file's mapping: where a missing section is said to be */
} wctx_t;

static int fail(wctx_t *x, const yaml_node_t *n, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static int fail(wctx_t *x, const yaml_node_t *n, const char *fmt, ...) {
    char msg[900];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    return tp__errorf(x->err, -EINVAL, "%s:%zu:%zu: %s", x->path, n->start_mark.line + 1,
                      n->start_mark.column + 1, msg);
}

static yaml_node_t *node(wctx_t *x, int i) {
    return yaml_document_get_node(x->doc, i);
}
static const char *text(const yaml_node_t *n) {
    return n && n->type == YAML_SCALAR_NODE ? (const char *)n->data.scalar.value : NULL;
}

static yaml_node_t *get(wctx_t *x, const yaml_node_t *map, const char *key) {
    if (!map || map->type != YAML_MAPPING_NODE) return NULL;
    for (yaml_node_pair_t *p = map->data.mapping.pairs.start; p < map->data.mapping.pairs.top;
         p++) {
        const char *k = text(node(x, p->key));
        if (k && strcmp(k, key) == 0) return node(x, p->value);
    }
    return NULL;
}

/* A required number in [lo, hi] at map[key]; `what` names it in messages. */
static int num(wctx_t *x, const yaml_node_t *map, const char *key, const char *what, double lo,
               double hi, double *out) {
    yaml_node_t *v = get(x, map, key);
    if (!v) return fail(x, map, "%s.%s is missing; give a number in [%g, %g]", what, key, lo, hi);
    const char *s = text(v);
    char *end = NULL;
    double d = s ? strtod(s, &end) : NAN;
    if (!s || end == s || *end || !isfinite(d) || d < lo || d > hi)
        return fail(x, v, "%s.%s must be a number in [%g, %g], got \"%s\"", what, key, lo, hi,
                    s ? s : "a collection");
    *out = d;
    return 0;
}

static int integer(wctx_t *x, const yaml_node_t *map, const char *key, const char *what, long lo,
                   long hi, int *out) {
    double d;
    int rc = num(x, map, key, what, (double)lo, (double)hi, &d);
    if (rc) return rc;
    if (d != floor(d))
        return fail(x, get(x, map, key), "%s.%s must be a whole number, got %g", what, key, d);
    *out = (int)d;
    return 0;
}

/* n must be a mapping; a missing one (NULL) is said at `in`, the mapping
 * that should hold it. */
static int mapping(wctx_t *x, const yaml_node_t *n, const yaml_node_t *in, const char *what,
                   const char *example) {
    if (!n) return fail(x, in, "`%s` is missing here; e.g. %s", what, example);
    if (n->type != YAML_MAPPING_NODE)
        return fail(x, n, "%s must be a mapping, e.g. %s", what, example);
    return 0;
}

static int parse_gpu_types(wctx_t *x, const yaml_node_t *sec, tp_workload_t *w) {
    int rc = mapping(x, sec, x->root, "gpu_types", "{a100_80g: {memory_mib: 81920, speed: 1.0}}");
    if (rc) return rc;
    size_t n = (size_t)(sec->data.mapping.pairs.top - sec->data.mapping.pairs.start);
    w->gpu_types = tp__xcalloc(n ? n : 1, sizeof *w->gpu_types);
    for (yaml_node_pair_t *p = sec->data.mapping.pairs.start; p < sec->data.mapping.pairs.top;
         p++) {
        yaml_node_t *k = node(x, p->key), *v = node(x, p->value);
        tp_wl_gpu_type_t *t = &w->gpu_types[w->ngpu_types++];
        snprintf(t->name, sizeof t->name, "%s", text(k) ? text(k) : "?");
        char what[96];
        snprintf(what, sizeof what, "gpu_types.%s", t->name);
        double mem;
        if ((rc = mapping(x, v, v, what, "{memory_mib: 81920, speed: 1.0}")) ||
            (rc = num(x, v, "memory_mib", what, 1, 1e9, &mem)) ||
            (rc = num(x, v, "speed", what, 1e-6, 1e6, &t->speed)))
            return rc;
        t->memory_mib = (uint64_t)mem;
    }
    return 0;
}

static int gpu_type_index(wctx_t *x, const yaml_node_t *g, const char *what, const tp_workload_t *w,
                          size_t *out) {
    yaml_node_t *v = get(x, g, "gpu_type");
    if (!v) return fail(x, g, "%s.gpu_type is missing; name one of gpu_types", what);
    for (size_t i = 0; i < w->ngpu_types; i++)
        if (text(v) && strcmp(text(v), w->gpu_types[i].name) == 0) {
            *out = i;
            return 0;
        }
    const char *names[32];
    size_t k = 0;
    for (; k < w->ngpu_types && k < 32; k++)
        names[k] = w->gpu_types[k].name;
    const char *guess = text(v) ? tp__did_you_mean(text(v), names, k) : NULL;
    return fail(x, v, "%s.gpu_type \"%s\" is not in gpu_types%s%s%s", what, text(v) ? text(v) : "?",
                guess ? "; did you mean \"" : "", guess ? guess : "", guess ? "\"?" : "");
}

static int parse_group(wctx_t *x, const yaml_node_t *g, const char *what, const tp_workload_t *w,
                       tp_wl_group_t *out) {
    int rc;
    if ((rc = mapping(x, g, g, what,
                      "{nodes: 2, gpus_per_node: 4, gpu_type: a100_80g, cpus_per_node: 128}")) ||
        (rc = integer(x, g, "nodes", what, 1, 1000000, &out->nodes)) ||
        (rc = integer(x, g, "gpus_per_node", what, 0, TP_PLACE_MAX_GPUS * 64,
                      &out->gpus_per_node)) ||
        (rc = integer(x, g, "cpus_per_node", what, 0, 1 << 20, &out->cpus_per_node)))
        return rc;
    return gpu_type_index(x, g, what, w, &out->gpu_type);
}

static int parse_clusters(wctx_t *x, const yaml_node_t *sec, tp_workload_t *w) {
    int rc = mapping(x, sec, x->root, "clusters", "{homog_4: {nodes: 1, gpus_per_node: 4, ...}}");
    if (rc) return rc;
    size_t n = (size_t)(sec->data.mapping.pairs.top - sec->data.mapping.pairs.start);
    w->clusters = tp__xcalloc(n ? n : 1, sizeof *w->clusters);
    for (yaml_node_pair_t *p = sec->data.mapping.pairs.start; p < sec->data.mapping.pairs.top;
         p++) {
        yaml_node_t *k = node(x, p->key), *v = node(x, p->value);
        tp_wl_cluster_t *c = &w->clusters[w->nclusters++];
        snprintf(c->name, sizeof c->name, "%s", text(k) ? text(k) : "?");
        char what[160];
        snprintf(what, sizeof what, "clusters.%s", c->name);
        if ((rc = mapping(x, v, v, what,
                          "{nodes: 1, gpus_per_node: 4, gpu_type: a100_80g, cpus_per_node: 128}")))
            return rc;
        yaml_node_t *groups = get(x, v, "groups");
        if (!groups) {
            c->groups = tp__xcalloc(1, sizeof *c->groups);
            c->ngroups = 1;
            if ((rc = parse_group(x, v, what, w, &c->groups[0]))) return rc;
            continue;
        }
        if (groups->type != YAML_SEQUENCE_NODE ||
            groups->data.sequence.items.top == groups->data.sequence.items.start)
            return fail(x, groups,
                        "%s.groups must be a non-empty list of {nodes, gpus_per_node, gpu_type, "
                        "cpus_per_node}",
                        what);
        size_t m = (size_t)(groups->data.sequence.items.top - groups->data.sequence.items.start);
        c->groups = tp__xcalloc(m, sizeof *c->groups);
        for (size_t i = 0; i < m; i++) {
            char gw[200];
            snprintf(gw, sizeof gw, "%s.groups[%zu]", what, i);
            c->ngroups++;
            if ((rc = parse_group(x, node(x, groups->data.sequence.items.start[i]), gw, w,
                                  &c->groups[i])))
                return rc;
        }
    }
    return 0;
}

/* A model's required `source`: one of the words below (whether its profile
 * is a modelled guess or was measured on a GPU). */
static int model_source(wctx_t *x, const yaml_node_t *v, const char *what, tp_wl_model_t *m) {
    static const char *const sources[] = {"assumed", "measured"};
    yaml_node_t *src = get(x, v, "source");
    if (!src) return fail(x, v, "%s.source is missing; give assumed or measured", what);
    for (size_t i = 0; i < TP_ARRAY_LEN(sources); i++)
        if (text(src) && strcmp(text(src), sources[i]) == 0) {
            snprintf(m->source, sizeof m->source, "%s", sources[i]);
            return 0;
        }
    return fail(x, src, "%s.source must be assumed or measured, got \"%s\"", what,
                text(src) ? text(src) : "a collection");
}

static int parse_models(wctx_t *x, const yaml_node_t *sec, tp_workload_t *w) {
    int rc = mapping(x, sec, x->root, "models", "{resnet18: {b_ref: 64, mem_base_mib: 1000, ...}}");
    if (rc) return rc;
    size_t n = (size_t)(sec->data.mapping.pairs.top - sec->data.mapping.pairs.start);
    w->models = tp__xcalloc(n ? n : 1, sizeof *w->models);
    for (yaml_node_pair_t *p = sec->data.mapping.pairs.start; p < sec->data.mapping.pairs.top;
         p++) {
        yaml_node_t *k = node(x, p->key), *v = node(x, p->value);
        tp_wl_model_t *m = &w->models[w->nmodels++];
        snprintf(m->name, sizeof m->name, "%s", text(k) ? text(k) : "?");
        char what[96];
        snprintf(what, sizeof what, "models.%s", m->name);
        if ((rc = mapping(x, v, v, what,
                          "{b_ref: 64, mem_base_mib: 1000, mem_per_sample_mib: 5, time_ref_s: 108, "
                          "util_ref: 0.26, cpus: 4}")) ||
            (rc = integer(x, v, "b_ref", what, 1, 1 << 20, &m->b_ref)) ||
            (rc = num(x, v, "mem_base_mib", what, 0, 1e9, &m->mem_base_mib)) ||
            (rc = num(x, v, "mem_per_sample_mib", what, 0, 1e9, &m->mem_per_sample_mib)) ||
            (rc = num(x, v, "time_ref_s", what, 1e-9, 1e12, &m->time_ref_s)) ||
            (rc = num(x, v, "util_ref", what, 1e-9, 1, &m->util_ref)) ||
            (rc = integer(x, v, "cpus", what, 0, 1 << 20, &m->cpus)))
            return rc;
        if ((rc = model_source(x, v, what, m))) return rc;
    }
    return 0;
}

static yaml_node_t *item(wctx_t *x, const yaml_node_t *seq, size_t i) {
    return node(x, seq->data.sequence.items.start[i]);
}
static size_t seq_len(const yaml_node_t *seq) {
    return (size_t)(seq->data.sequence.items.top - seq->data.sequence.items.start);
}

static int parse_space(wctx_t *x, const yaml_node_t *v, const char *what, tp_workload_t *w,
                       tp_wl_space_t *s) {
    int rc = mapping(
        x, v, v, what,
        "{models: [resnet18], batch_sizes: [64, 128], lr: {loguniform: [1e-5, 1e-1], count: 4}}");
    if (rc) return rc;
    yaml_node_t *ms = get(x, v, "models"), *bs = get(x, v, "batch_sizes"), *lr = get(x, v, "lr");
    if (!ms || ms->type != YAML_SEQUENCE_NODE || !seq_len(ms))
        return fail(x, ms ? ms : v, "%s.models must be a non-empty list of model names", what);
    if (!bs || bs->type != YAML_SEQUENCE_NODE || !seq_len(bs))
        return fail(x, bs ? bs : v, "%s.batch_sizes must be a non-empty list of whole numbers",
                    what);
    s->models = tp__xcalloc(seq_len(ms), sizeof *s->models);
    for (size_t i = 0; i < seq_len(ms); i++) {
        yaml_node_t *e = item(x, ms, i);
        size_t k = 0;
        while (k < w->nmodels && !(text(e) && strcmp(text(e), w->models[k].name) == 0))
            k++;
        if (k == w->nmodels) {
            const char *names[64];
            size_t nn = 0;
            for (; nn < w->nmodels && nn < 64; nn++)
                names[nn] = w->models[nn].name;
            const char *guess = text(e) ? tp__did_you_mean(text(e), names, nn) : NULL;
            return fail(x, e, "%s.models[%zu] \"%s\" is not in models%s%s%s", what, i,
                        text(e) ? text(e) : "?", guess ? "; did you mean \"" : "",
                        guess ? guess : "", guess ? "\"?" : "");
        }
        s->models[s->nmodels++] = k;
    }
    s->batch_sizes = tp__xcalloc(seq_len(bs), sizeof *s->batch_sizes);
    for (size_t i = 0; i < seq_len(bs); i++) {
        yaml_node_t *e = item(x, bs, i);
        char *end = NULL;
        long b = text(e) ? strtol(text(e), &end, 10) : 0;
        if (!text(e) || *end || b < 1 || b > (1 << 24))
            return fail(x, e, "%s.batch_sizes[%zu] must be a whole number >= 1, got \"%s\"", what,
                        i, text(e) ? text(e) : "a collection");
        s->batch_sizes[s->nbatch++] = (int)b;
    }
    if ((rc = mapping(x, lr, v, "lr", "{loguniform: [1e-5, 1e-1], count: 4}"))) return rc;
    yaml_node_t *lu = get(x, lr, "loguniform");
    if (!lu || lu->type != YAML_SEQUENCE_NODE || seq_len(lu) != 2)
        return fail(x, lu ? lu : lr,
                    "%s.lr.loguniform must be a list [low, high] with 0 < low <= high", what);
    double b[2];
    for (int i = 0; i < 2; i++) {
        yaml_node_t *e = item(x, lu, (size_t)i);
        char *end = NULL;
        b[i] = text(e) ? strtod(text(e), &end) : NAN;
        if (!text(e) || *end || !(b[i] > 0) || !isfinite(b[i]))
            return fail(x, e, "%s.lr.loguniform[%d] must be a number > 0, got \"%s\"", what, i,
                        text(e) ? text(e) : "a collection");
    }
    if (b[0] > b[1])
        return fail(x, lu, "%s.lr.loguniform must be [low, high] with low <= high, got [%g, %g]",
                    what, b[0], b[1]);
    s->lr_lo = b[0];
    s->lr_hi = b[1];
    char lw[160];
    snprintf(lw, sizeof lw, "%s.lr", what);
    return integer(x, lr, "count", lw, 1, 1 << 20, &s->lr_count);
}

static int parse_spaces(wctx_t *x, const yaml_node_t *sec, tp_workload_t *w) {
    int rc =
        mapping(x, sec, x->root, "spaces", "{SP1: {models: [...], batch_sizes: [...], lr: {...}}}");
    if (rc) return rc;
    size_t n = (size_t)(sec->data.mapping.pairs.top - sec->data.mapping.pairs.start);
    w->spaces = tp__xcalloc(n ? n : 1, sizeof *w->spaces);
    for (yaml_node_pair_t *p = sec->data.mapping.pairs.start; p < sec->data.mapping.pairs.top;
         p++) {
        tp_wl_space_t *s = &w->spaces[w->nspaces++];
        const char *name = text(node(x, p->key));
        snprintf(s->name, sizeof s->name, "%s", name ? name : "?");
        char what[96];
        snprintf(what, sizeof what, "spaces.%s", s->name);
        if ((rc = parse_space(x, node(x, p->value), what, w, s))) return rc;
    }
    return 0;
}

int tp__workload_load(const char *path, tp_workload_t *w, tp_error_t *err) {
    memset(w, 0, sizeof *w);
    FILE *f = fopen(path, "rb");
    if (!f) return tp__errorf(err, -errno, "%s: %s", path, strerror(errno));
    yaml_parser_t parser;
    yaml_document_t doc;
    yaml_parser_initialize(&parser);
    yaml_parser_set_input_file(&parser, f);
    int rc = 0;
    if (!yaml_parser_load(&parser, &doc)) {
        rc = tp__errorf(err, -EINVAL, "%s:%zu:%zu: %s; the file must be YAML", path,
                        parser.problem_mark.line + 1, parser.problem_mark.column + 1,
                        parser.problem ? parser.problem : "cannot parse");
        yaml_parser_delete(&parser);
        fclose(f);
        return rc;
    }
    yaml_parser_delete(&parser);
    fclose(f);
    yaml_node_t *root = yaml_document_get_root_node(&doc);
    wctx_t x = {path, &doc, err, root};
    if (!root || root->type != YAML_MAPPING_NODE)
        rc = tp__errorf(err, -EINVAL,
                        "%s:1:1: the workload file must be a mapping with gpu_types, clusters, "
                        "models and spaces",
                        path);
    if (!rc) rc = parse_gpu_types(&x, get(&x, root, "gpu_types"), w);
    if (!rc) rc = parse_clusters(&x, get(&x, root, "clusters"), w);
    if (!rc) rc = parse_models(&x, get(&x, root, "models"), w);
    if (!rc) rc = parse_spaces(&x, get(&x, root, "spaces"), w);
    yaml_document_delete(&doc);
    if (rc) tp__workload_free(w);
    return rc;
}

#ifndef TP_SOURCE_DATA_DIR
#define TP_SOURCE_DATA_DIR "data"
#endif

int tp__workload_default_path(char *out, size_t size) {
    const char *rel = "/workloads/sp.yaml";
    const char *env = getenv("TUNEPACK_DATA_DIR");
    if (env && *env) {
        if ((size_t)snprintf(out, size, "%s%s", env, rel) >= size) return -ENAMETOOLONG;
        return 0;
    }
    /* installed: <prefix>/bin/tunepack beside <prefix>/share/tunepack
     * (<exe dir>/.. written as the prefix itself) */
    char exe[4096], installed[4096 + 64] = "";
    ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
    if (n > 0) {
        exe[n] = 0;
        char *slash = strrchr(exe, '/');
        if (slash) *slash = 0; /* the binary's directory */
        slash = slash ? strrchr(exe, '/') : NULL;
        if (slash) {
            *slash = 0; /* its parent, the prefix ("" for /bin) */
            snprintf(installed, sizeof installed, "%s/share/tunepack%s", exe, rel);
        }
    }
    char source[4096];
    snprintf(source, sizeof source, "%s%s", TP_SOURCE_DATA_DIR, rel);
    /* the first that exists; if none does, the installed one (the error names it) */
    const char *pick = installed[0] && access(installed, F_OK) == 0 ? installed
                       : access(source, F_OK) == 0 || !installed[0] ? source
                                                                    : installed;
    if ((size_t)snprintf(out, size, "%s", pick) >= size) return -ENAMETOOLONG;
    return 0;
}

void tp__workload_free(tp_workload_t *w) {
    if (!w) return;
    for (size_t i = 0; i < w->nclusters; i++)
        free(w->clusters[i].groups);
    for (size_t i = 0; i < w->nspaces; i++) {
        free(w->spaces[i].models);
        free(w->spaces[i].batch_sizes);
    }
    free(w->gpu_types);
    free(w->clusters);
    free(w->models);
    free(w->spaces);
    memset(w, 0, sizeof *w);
}

const tp_wl_cluster_t *tp__workload_find_cluster(const tp_workload_t *w, const char *name) {
    for (size_t i = 0; i < w->nclusters; i++)
        if (strcmp(w->clusters[i].name, name) == 0) return &w->clusters[i];
    return NULL;
}

const tp_wl_space_t *tp__workload_find_space(const tp_workload_t *w, const char *name) {
    for (size_t i = 0; i < w->nspaces; i++)
        if (strcmp(w->spaces[i].name, name) == 0) return &w->spaces[i];
    return NULL;
}

int tp__workload_no_such(tp_error_t *err, const char *what, const char *name,
                         const char *const *names, size_t n) {
    const char *guess = tp__did_you_mean(name, names, n);
    char list[512] = "";
    for (size_t i = 0; i < n; i++)
        snprintf(list + strlen(list), sizeof list - strlen(list), "%s%s", i ? ", " : "", names[i]);
    if (guess)
        return tp__errorf(err, -ENOENT,
                          "no %s \"%s\" in the workload; did you mean \"%s\"? "
                          "(there are: %s)",
                          what, name, guess, list);
    return tp__errorf(err, -ENOENT, "no %s \"%s\" in the workload; there are: %s", what, name,
                      list);
}

double tp__workload_lr(const tp_wl_space_t *s, size_t i) {
    /* log-spaced, both ends included; one point: the geometric middle */
    double f = s->lr_count > 1 ? (double)i / (double)(s->lr_count - 1) : 0.5;
    return s->lr_lo * pow(s->lr_hi / s->lr_lo, f);
}

void tp__workload_node(tp_node_t *n, size_t number, size_t ngpus, int cpus,
                       const tp_wl_gpu_type_t *t) {
    snprintf(n->name, sizeof n->name, "n%zu", number);
    n->cpus = cpus;
    n->ngpus = ngpus;
    n->gpus = tp__xcalloc(ngpus ? ngpus : 1, sizeof *n->gpus);
    for (size_t i = 0; i < ngpus; i++) {
        tp_gpu_t *g = &n->gpus[i];
        snprintf(g->name, sizeof g->name, "gpu%zu", i);
        snprintf(g->type, sizeof g->type, "%s", t->name);
        g->index = (int)i;
        g->memory_mib = t->memory_mib;
        g->speed = t->speed;
        g->healthy = 1;
    }
}

int tp__workload_cluster(const tp_workload_t *w, const char *name, tp_cluster_t *out,
                         tp_error_t *err) {
    memset(out, 0, sizeof *out);
    const tp_wl_cluster_t *wc = tp__workload_find_cluster(w, name);
    if (!wc) {
        const char *names[64];
        size_t n = 0;
        for (; n < w->nclusters && n < 64; n++)
            names[n] = w->clusters[n].name;
        return tp__workload_no_such(err, "cluster", name, names, n);
    }
    size_t nnodes = 0;
    for (size_t g = 0; g < wc->ngroups; g++)
        nnodes += (size_t)wc->groups[g].nodes;
    out->nodes = tp__xcalloc(nnodes ? nnodes : 1, sizeof *out->nodes);
    out->limits = (tp_place_limits_t){.reserve_mib = 512, .sharing = 1};
    for (size_t g = 0; g < wc->ngroups; g++) {
        const tp_wl_group_t *gr = &wc->groups[g];
        const tp_wl_gpu_type_t *t = &w->gpu_types[gr->gpu_type];
        for (int k = 0; k < gr->nodes; k++) {
            tp__workload_node(&out->nodes[out->nnodes], out->nnodes, (size_t)gr->gpus_per_node,
                              gr->cpus_per_node, t);
            out->nnodes++;
        }
    }
    return 0;
}

tp_wl_job_t tp__workload_profile(const tp_wl_model_t *m, int batch, double lr) {
    double b = batch, bref = m->b_ref;
    tp_wl_job_t j = {.model = m->name, .batch = batch, .lr = lr, .cpus = m->cpus};
    j.memory_mib = (uint64_t)ceil(m->mem_base_mib + m->mem_per_sample_mib * b);
    j.time_s = m->time_ref_s * sqrt(bref / b);
    j.util = fmin(0.9, m->util_ref * pow(b / bref, 0.3));
    j.gpu_s = j.util * j.time_s;
    j.host_s = j.time_s - j.gpu_s;
    return j;
}

int tp__workload_jobs(const tp_workload_t *w, const char *space, tp_wl_job_t **jobs,
                      tp_demand_t **demands, size_t *n, tp_error_t *err) {
    const tp_wl_space_t *s = tp__workload_find_space(w, space);
    if (!s) {
        const char *names[64];
        size_t k = 0;
        for (; k < w->nspaces && k < 64; k++)
            names[k] = w->spaces[k].name;
        return tp__workload_no_such(err, "space", space, names, k);
    }
    size_t total = s->nmodels * s->nbatch * (size_t)s->lr_count, k = 0;
    tp_wl_job_t *js = tp__xcalloc(total ? total : 1, sizeof *js);
    for (size_t mi = 0; mi < s->nmodels; mi++)
        for (size_t bi = 0; bi < s->nbatch; bi++)
            for (int li = 0; li < s->lr_count; li++) {
                js[k++] = tp__workload_profile(&w->models[s->models[mi]], s->batch_sizes[bi],
                                               tp__workload_lr(s, (size_t)li));
            }
    if (demands) {
        tp_demand_t *d = tp__xcalloc(total ? total : 1, sizeof *d);
        for (size_t i = 0; i < total; i++)
            d[i] = (tp_demand_t){.id = (int64_t)i,
                                 .gpus = 1,
                                 .memory_mib = js[i].memory_mib,
                                 .compute = js[i].util,
                                 .cpus = js[i].cpus,
                                 .duration_s = js[i].time_s};
        *demands = d;
    }
    if (jobs)
        *jobs = js;
    else
        free(js);
    *n = total;
    return 0;
}
