/* server: the dashboard's HTTP side (libmicrohttpd, four internal threads,
 * so that a page's few requests are answered side by side; every handler
 * keeps its state on its stack and its own store connection).
 * Routes are a table; every API request opens the experiment's store
 * read-only, answers from it and closes it (without the quick_check each
 * command runs on open: `tunepack dashboard` checks the stores it is given
 * once, when it starts). Static assets are compiled into
 * the binary (cmake/embed.cmake), so nothing is fetched from anywhere.
 * Every request is checked against the token first (access_of), the static
 * pages as well as the API. */
#include <arpa/inet.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <math.h>
#include <microhttpd.h>
#include <netdb.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include "web/web.h"
#include "web/web_internal.h"

/* The compiled-in assets (generated: web_assets.c). */
typedef struct tp_web_asset {
    const char *path; /* "/app.js" */
    const unsigned char *data;
    size_t len;
} tp_web_asset_t;
extern const tp_web_asset_t tp__web_assets[];
extern const size_t tp__web_nassets;

typedef struct web {
    const tp_web_opts_t *o;
    int need_token;  /* 0 only with --no-token */
    char token[33];  /* 32 hex digits when needed */
    char cookie[40]; /* the cookie's name: tunepack-token-PORT */
} web_t;

int tp__web_token_equal(const char *given, const char *expected) {
    size_t n = strlen(expected), g = given ? strlen(given) : 0;
    unsigned char diff = (unsigned char)(g != n);
    for (size_t i = 0; i < n; i++)
        diff |= (unsigned char)((i < g ? given[i] : 0) ^ expected[i]);
    return diff == 0;
}

int tp__web_is_loopback(const char *host) {
    if (strcmp(host, "localhost") == 0 || strcmp(host, "::1") == 0) return 1;
    struct in_addr a;
    return inet_pton(AF_INET, host, &a) == 1 && (ntohl(a.s_addr) >> 24) == 127;
}

int tp__web_parse_listen(const char *text, char *host, size_t nhost, unsigned *port,
                         tp_error_t *err) {
    const char *colon = strrchr(text, ':');
    const char *h = text, *h_end = colon;
    if (!colon)
        return tp__errorf(err, -EINVAL, "--listen \"%s\": expected HOST:PORT, e.g. 127.0.0.1:8080",
                          text);
    if (text[0] == '[' && colon > text && colon[-1] == ']') h = text + 1, h_end = colon - 1;
    char *end;
    unsigned long p = strtoul(colon + 1, &end, 10);
    if (colon[1] == 0 || *end || p > 65535)
        return tp__errorf(err, -EINVAL, "--listen \"%s\": the port must be 0-65535", text);
    if ((size_t)(h_end - h) >= nhost || h_end == h)
        return tp__errorf(err, -EINVAL, "--listen \"%s\": no host before the port", text);
    memcpy(host, h, (size_t)(h_end - h));
    host[h_end - h] = 0;
    *port = (unsigned)p;
    return 0;
}

/* ---- the experiments served ------------------------------------------------ */

static int by_name(const void *a, const void *b) {
    return strcmp(*(char *const *)a, *(char *const *)b);
}

/* The experiment directories: the ones given, or every one under ./runs
 * (sorted, looked up anew so that new experiments appear). Caller frees. */
static char **experiments(const web_t *w, size_t *n) {
    char **list = NULL;
    *n = 0;
    if (w->o->ndirs) {
        list = tp__xcalloc(w->o->ndirs, sizeof *list);
        for (size_t i = 0; i < w->o->ndirs; i++)
            list[(*n)++] = tp__strdup(w->o->dirs[i]);
        return list;
    }
    DIR *d = opendir("runs");
    struct dirent *e;
    size_t cap = 0;
    while (d && (e = readdir(d)) != NULL) {
        char path[4200];
        struct stat st;
        if (e->d_name[0] == '.') continue;
        snprintf(path, sizeof path, "runs/%s/%s", e->d_name, TP_STORE_FILE);
        if (stat(path, &st) != 0) continue;
        list = tp__xgrow(list, &cap, *n + 1, sizeof *list, 16);
        snprintf(path, sizeof path, "runs/%s", e->d_name);
        list[(*n)++] = tp__strdup(path);
    }
    if (d) closedir(d);
    if (*n) qsort(list, *n, sizeof *list, by_name);
    return list;
}

static void free_list(char **list, size_t n) {
    for (size_t i = 0; i < n; i++)
        free(list[i]);
    free(list);
}

/* ---- responses ----------------------------------------------------------- */

static enum MHD_Result send_bytes(struct MHD_Connection *c, unsigned status, const char *type,
                                  void *data, size_t len, enum MHD_ResponseMemoryMode mode,
                                  const char *cookie) {
    struct MHD_Response *r = MHD_create_response_from_buffer(len, data, mode);
    if (!r) return MHD_NO;
    MHD_add_response_header(r, "Content-Type", type);
    MHD_add_response_header(r, "Cache-Control", "no-store");
    MHD_add_response_header(r, "X-Content-Type-Options", "nosniff");
    MHD_add_response_header(r, "Content-Security-Policy",
                            "default-src 'self'; img-src 'self' data:; style-src 'self'");
    if (cookie) MHD_add_response_header(r, "Set-Cookie", cookie);
    enum MHD_Result rc = MHD_queue_response(c, status, r);
    MHD_destroy_response(r);
    return rc;
}

/* Every string in o, keys too, with its control characters escaped visibly
 * (docs/output.md; line breaks kept): what trials wrote is shown on the
 * page, never obeyed. A new value for each string that changes; O(size). */
static json_t *shown(json_t *o) {
    if (json_is_string(o)) {
        const char *v = json_string_value(o);
        size_t n = json_string_length(o);
        tp_buf_t b;
        tp__buf_init(&b);
        tp__buf_escape(&b, v, n, TP_ESC_KEEP_NL);
        json_t *e =
            b.len == n && !memcmp(b.data, v, n) ? json_incref(o) : json_stringn(b.data, b.len);
        tp__buf_free(&b);
        return e;
    }
    json_t *out = json_is_object(o) ? json_object() : json_is_array(o) ? json_array() : NULL;
    const char *key;
    json_t *v;
    size_t i;
    if (json_is_object(o)) json_object_foreach(o, key, v) {
            char *k = tp__escape(key, TP_ESC_KEEP_NL);
            json_object_set_new(out, k, shown(v));
            free(k);
        }
    else if (json_is_array(o))
        json_array_foreach(o, i, v) json_array_append_new(out, shown(v));
    return out ? out : json_incref(o);
}

static enum MHD_Result send_json(struct MHD_Connection *c, unsigned status, json_t *o) {
    json_t *safe = o ? shown(o) : NULL;
    json_decref(o);
    o = safe;
    char *text =
        o ? json_dumps(o, JSON_COMPACT | JSON_PRESERVE_ORDER | JSON_REAL_PRECISION(12)) : NULL;
    json_decref(o);
    if (!text) text = tp__strdup("{\"error\": \"not found\"}"), status = MHD_HTTP_NOT_FOUND;
    return send_bytes(c, status, "application/json", text, strlen(text), MHD_RESPMEM_MUST_FREE,
                      NULL);
}

static enum MHD_Result send_error(struct MHD_Connection *c, unsigned status, const char *msg) {
    return send_json(c, status, json_pack("{s:s}", "error", msg));
}

static enum MHD_Result send_svg(struct MHD_Connection *c, tp_buf_t *b) {
    size_t len = b->len;
    char *data = tp__buf_steal(b);
    return send_bytes(c, MHD_HTTP_OK, "image/svg+xml", data ? data : tp__strdup(""), len,
                      MHD_RESPMEM_MUST_FREE, NULL);
}

static const char *content_type(const char *path) {
    const char *dot = strrchr(path, '.');
    if (dot && strcmp(dot, ".js") == 0) return "text/javascript; charset=utf-8";
    if (dot && strcmp(dot, ".css") == 0) return "text/css; charset=utf-8";
    if (dot && strcmp(dot, ".svg") == 0) return "image/svg+xml";
    return "text/html; charset=utf-8";
}

static const char *arg(struct MHD_Connection *c, const char *key) {
    return MHD_lookup_connection_value(c, MHD_GET_ARGUMENT_KIND, key);
}

static long long arg_ll(struct MHD_Connection *c, const char *key, long long dflt) {
    const char *v = arg(c, key);
    char *end;
    long long x = v ? strtoll(v, &end, 10) : dflt;
    return v && (*end || end == v) ? dflt : x;
}

/* ---- API routes: /api/e/ID/WHAT[/TRIAL] ------------------------------------ */

typedef struct req {
    struct MHD_Connection *c;
    tp_store_t *s;
    const char *dir;
    size_t id;
    int64_t trial; /* -1: none in the path */
    tp_web_rank_fn rank;
    int live; /* an orchestrator runs it now (or the caller cannot tell) */
} req_t;

/* v as the dashboard shows it: a dead run's "running" is "interrupted". */
static json_t *as_shown(const req_t *q, json_t *v) {
    if (v && !q->live) tp__web_not_live(v);
    return v;
}
static int live(const web_t *w, const char *dir) {
    return !w->o->live || w->o->live(dir);
}

static enum MHD_Result r_summary(req_t *q) {
    return send_json(q->c, MHD_HTTP_OK, as_shown(q, tp__web_summary(q->s, q->dir, q->id, q->rank)));
}
/* The filter a request names (the trials table's, and the brushed set of
 * every chart of the trials): state=S, q=TEXT, min.COLUMN=X and max.COLUMN=X
 * bounds, in.p:NAME=VALUE choices (repeated: any of them). */
typedef struct filter_acc {
    tp_web_trials_q_t *tq;
    const char *bad; /* the first bound that is not a number, or NULL */
    int too_many;
    json_t *sets[TP_WEB_RANGES_MAX]; /* each range's choices, while they are read */
    char *set_text[TP_WEB_RANGES_MAX];
} filter_acc_t;

static enum MHD_Result add_range(void *cls, enum MHD_ValueKind kind, const char *key,
                                 const char *value) {
    (void)kind;
    filter_acc_t *a = cls;
    int lo = strncmp(key, "min.", 4) == 0, hi = strncmp(key, "max.", 4) == 0;
    int in = strncmp(key, "in.", 3) == 0;
    if ((!lo && !hi && !in) || !value || (!in && !*value)) return MHD_YES;
    const char *column = key + (in ? 3 : 4);
    double x = NAN;
    if (!in) {
        char *end;
        x = strtod(value, &end);
        if (*end || !isfinite(x)) {
            if (!a->bad) a->bad = key;
            return MHD_YES;
        }
    }
    tp_web_trials_q_t *q = a->tq;
    size_t i = 0;
    while (i < q->nranges && strcmp(q->ranges[i].key, column) != 0)
        i++;
    if (i == q->nranges) {
        if (i == TP_WEB_RANGES_MAX) return a->too_many = 1, MHD_YES;
        q->ranges[q->nranges++] = (tp_web_range_t){.key = column, .lo = NAN, .hi = NAN};
    }
    if (in) {
        if (!a->sets[i]) a->sets[i] = json_array();
        json_array_append_new(a->sets[i], json_string(value));
    } else {
        *(lo ? &q->ranges[i].lo : &q->ranges[i].hi) = x;
    }
    return MHD_YES;
}

/* Reads the request's filter into tq: 0, or an HTTP 400 sent (*rc) naming
 * what is wrong. filter_done() frees what it kept, either way. */
static int request_filter(req_t *q, tp_web_trials_q_t *tq, filter_acc_t *a, enum MHD_Result *rc) {
    const char *state = arg(q->c, "state");
    /* a dead run's "interrupted" are its store's "running" */
    tq->state = !q->live && state && strcmp(state, "interrupted") == 0 ? "running" : state;
    tq->text = arg(q->c, "q");
    tq->feasible = arg(q->c, "feasible"); /* yes, no or unjudged */
    *a = (filter_acc_t){.tq = tq};
    MHD_get_connection_values(q->c, MHD_GET_ARGUMENT_KIND, add_range, a);
    for (size_t i = 0; i < tq->nranges; i++)
        if (a->sets[i]) tq->ranges[i].in = a->set_text[i] = json_dumps(a->sets[i], JSON_COMPACT);
    char msg[300];
    if (a->bad)
        snprintf(msg, sizeof msg, "%s=%s: a bound must be a number, e.g. %s=0.5", a->bad,
                 arg(q->c, a->bad), a->bad);
    else if (a->too_many)
        snprintf(msg, sizeof msg, "at most %d columns may have a range at once", TP_WEB_RANGES_MAX);
    else
        return 0;
    *rc = send_error(q->c, MHD_HTTP_BAD_REQUEST, msg);
    return -EINVAL;
}

static void filter_done(filter_acc_t *a) {
    for (size_t i = 0; i < TP_WEB_RANGES_MAX; i++)
        json_decref(a->sets[i]), free(a->set_text[i]);
}

/* A page of the trials table: ?sort=COLUMN&desc=1&offset=N&limit=N and the
 * filter (request_filter: state, q, feasible, min./max./in. ranges; see
 * tp__web_trials). */
static enum MHD_Result r_trials(req_t *q) {
    tp_web_trials_q_t tq = {.sort = arg(q->c, "sort"),
                            .desc = arg_ll(q->c, "desc", 0) != 0,
                            .offset = arg_ll(q->c, "offset", 0),
                            .limit = arg_ll(q->c, "limit", TP_WEB_PAGE_DEFAULT)};
    filter_acc_t a;
    enum MHD_Result rc;
    if (request_filter(q, &tq, &a, &rc) == 0) {
        tp_error_t err = {0};
        json_t *page = tp__web_trials(q->s, &tq, &err);
        rc = page ? send_json(q->c, MHD_HTTP_OK, as_shown(q, page))
                  : send_error(q->c, MHD_HTTP_BAD_REQUEST, err.msg);
    }
    filter_done(&a);
    return rc;
}
static enum MHD_Result r_columns(req_t *q) {
    return send_json(q->c, MHD_HTTP_OK, tp__web_table_columns(q->s));
}
static enum MHD_Result r_trial(req_t *q) {
    return send_json(q->c, MHD_HTTP_OK,
                     q->trial >= 0 ? as_shown(q, tp__web_trial(q->s, q->trial)) : NULL);
}
static enum MHD_Result r_log(req_t *q) {
    json_t *o = q->trial >= 0 ? tp__web_log(q->dir, q->trial,
                                            arg(q->c, "stream") ? arg(q->c, "stream") : "stdout",
                                            arg_ll(q->c, "from", -1))
                              : NULL;
    return o ? send_json(q->c, MHD_HTTP_OK, o)
             : send_error(q->c, MHD_HTTP_BAD_REQUEST, "stream must be stdout or stderr");
}
static enum MHD_Result r_nodes(req_t *q) {
    return send_json(q->c, MHD_HTTP_OK, tp__web_nodes(q->s));
}
/* The importance over the brushed set (the filter: request_filter). */
static enum MHD_Result r_importance(req_t *q) {
    tp_web_trials_q_t f = {0};
    filter_acc_t a;
    enum MHD_Result rc;
    if (request_filter(q, &f, &a, &rc) == 0) {
        tp_error_t err = {0};
        json_t *o = tp__web_importance(q->s, &f, &err);
        rc = o ? send_json(q->c, MHD_HTTP_OK, o) : send_error(q->c, MHD_HTTP_BAD_REQUEST, err.msg);
    }
    filter_done(&a);
    return rc;
}

/* Curves of ?trials=1,2,3 (at most 20), or the default set (of the brushed set). */
static int curves_svg(req_t *q, const tp_web_trials_q_t *f, tp_buf_t *b, tp_error_t *err) {
    int64_t ids[20];
    size_t n = 0;
    for (const char *p = arg(q->c, "trials"); p && *p && n < 20;) {
        char *end;
        long long v = strtoll(p, &end, 10);
        if (end == p) break;
        ids[n++] = v;
        p = *end == ',' ? end + 1 : end;
    }
    return tp__web_svg_curves(q->s, ids, n, f, b, err);
}
static int history_svg(req_t *q, const tp_web_trials_q_t *f, tp_buf_t *b, tp_error_t *err) {
    return tp__web_svg_history(q->s, f, b, err);
}
static int importance_svg(req_t *q, const tp_web_trials_q_t *f, tp_buf_t *b, tp_error_t *err) {
    return tp__web_svg_importance(q->s, f, b, err);
}
/* ?param=NAME (slice), ?x=NAME&y=NAME (contour): 400 naming the parameters when one is none. */
static int slice_svg(req_t *q, const tp_web_trials_q_t *f, tp_buf_t *b, tp_error_t *err) {
    return tp__web_svg_slice(q->s, arg(q->c, "param"), f, b, err);
}
static int contour_svg(req_t *q, const tp_web_trials_q_t *f, tp_buf_t *b, tp_error_t *err) {
    return tp__web_svg_contour(q->s, arg(q->c, "x"), arg(q->c, "y"), f, b, err);
}
/* Charts that take no filter (parallel coordinates are brushed on the page). */
static int parcoords_svg(req_t *q, const tp_web_trials_q_t *f, tp_buf_t *b, tp_error_t *err) {
    (void)f, (void)err;
    tp__web_svg_parcoords(q->s, b);
    return 0;
}
static int packing_svg(req_t *q, const tp_web_trials_q_t *f, tp_buf_t *b, tp_error_t *err) {
    (void)f, (void)err;
    tp__web_svg_packing(q->s, tp__wall_s(), b);
    return 0;
}

/* A chart drawn into a buffer, over the request's filter (request_filter). */
static enum MHD_Result send_chart(req_t *q, int (*draw)(req_t *, const tp_web_trials_q_t *,
                                                        tp_buf_t *, tp_error_t *)) {
    tp_web_trials_q_t f = {0};
    filter_acc_t a;
    enum MHD_Result rc;
    if (request_filter(q, &f, &a, &rc) == 0) {
        tp_buf_t b;
        tp_error_t err = {0};
        tp__buf_init(&b);
        if (draw(q, &f, &b, &err) == 0) {
            rc = send_svg(q->c, &b);
        } else {
            tp__buf_free(&b);
            rc = send_error(q->c, MHD_HTTP_BAD_REQUEST, err.msg);
        }
    }
    filter_done(&a);
    return rc;
}

/* Several objectives: the front as JSON (?limit=N: its first N by the
 * first objective), or its chart with each point a link to its trial's
 * page; 404 on an experiment with one objective. */
static const char ONE_OBJECTIVE[] = "this experiment has one objective: no Pareto front";
static enum MHD_Result r_front(req_t *q) {
    long long limit = arg_ll(q->c, "limit", 0);
    json_t *o = tp__web_front(q->s, limit > 0 ? (size_t)limit : 0);
    return o ? send_json(q->c, MHD_HTTP_OK, o)
             : send_error(q->c, MHD_HTTP_NOT_FOUND, ONE_OBJECTIVE);
}
static enum MHD_Result r_front_svg(req_t *q) {
    char prefix[64];
    snprintf(prefix, sizeof prefix, "#/e/%zu/trial/", q->id);
    tp_buf_t b;
    tp__buf_init(&b);
    if (tp__web_svg_front(q->s, prefix, &b)) return send_svg(q->c, &b);
    tp__buf_free(&b);
    return send_error(q->c, MHD_HTTP_NOT_FOUND, ONE_OBJECTIVE);
}

/* Scheduler pbt's lineage: ?metric=NAME (default: the objective) colours
 * it. 400 on an argument other than metric (and token), or a metric no
 * trial reports. */
typedef struct args_acc {
    const char *bad; /* the first argument not asked for */
} args_acc_t;
static enum MHD_Result check_arg(void *cls, enum MHD_ValueKind kind, const char *key,
                                 const char *value) {
    (void)kind, (void)value;
    args_acc_t *a = cls;
    if (!a->bad && strcmp(key, "metric") != 0 && strcmp(key, "token") != 0) a->bad = key;
    return MHD_YES;
}
static enum MHD_Result r_lineage_any(req_t *q, int svg) {
    args_acc_t a = {0};
    MHD_get_connection_values(q->c, MHD_GET_ARGUMENT_KIND, check_arg, &a);
    tp_error_t err = {0};
    if (a.bad) {
        tp__errorf(&err, -EINVAL, "%s: no such argument; the lineage takes metric=NAME", a.bad);
        return send_error(q->c, MHD_HTTP_BAD_REQUEST, err.msg);
    }
    if (!svg) {
        json_t *o = tp__web_lineage(q->s, arg(q->c, "metric"), &err);
        return o ? send_json(q->c, MHD_HTTP_OK, o)
                 : send_error(q->c, MHD_HTTP_BAD_REQUEST, err.msg);
    }
    tp_buf_t b;
    tp__buf_init(&b);
    if (tp__web_svg_lineage(q->s, arg(q->c, "metric"), &b, &err) == 0) return send_svg(q->c, &b);
    tp__buf_free(&b);
    return send_error(q->c, MHD_HTTP_BAD_REQUEST, err.msg);
}
static enum MHD_Result r_lineage(req_t *q) {
    return r_lineage_any(q, 0);
}
static enum MHD_Result r_lineage_svg(req_t *q) {
    return r_lineage_any(q, 1);
}

/* A route answers either itself (fn) or with a chart drawn into a buffer
 * over the request's filter (svg: send_chart). */
static const struct {
    const char *what;
    int takes_trial; /* the path ends in /TRIAL */
    enum MHD_Result (*fn)(req_t *q);
    int (*svg)(req_t *q, const tp_web_trials_q_t *f, tp_buf_t *out, tp_error_t *err);
} api_routes[] = {
    {"summary", 0, r_summary, NULL},
    {"trials", 0, r_trials, NULL},
    {"columns", 0, r_columns, NULL},
    {"trial", 1, r_trial, NULL},
    {"log", 1, r_log, NULL},
    {"nodes", 0, r_nodes, NULL},
    {"importance", 0, r_importance, NULL},
    {"front", 0, r_front, NULL},
    {"front.svg", 0, r_front_svg, NULL},
    {"history.svg", 0, NULL, history_svg},
    {"curves.svg", 0, NULL, curves_svg},
    {"parcoords.svg", 0, NULL, parcoords_svg},
    {"importance.svg", 0, NULL, importance_svg},
    {"slice.svg", 0, NULL, slice_svg},
    {"contour.svg", 0, NULL, contour_svg},
    {"packing.svg", 0, NULL, packing_svg},
    {"lineage", 0, r_lineage, NULL},
    {"lineage.svg", 0, r_lineage_svg, NULL},
};

static enum MHD_Result api_experiments(const web_t *w, struct MHD_Connection *c) {
    size_t n;
    char **dirs = experiments(w, &n);
    json_t *list = json_array();
    for (size_t i = 0; i < n; i++) {
        tp_store_t *s = NULL;
        tp_error_t err = {0};
        if (tp__store_open(dirs[i], TP_STORE_READ_AGAIN, &s, &err) == 0) {
            json_t *v = tp__web_summary(s, dirs[i], i, w->o->rank);
            if (!live(w, dirs[i])) tp__web_not_live(v);
            json_array_append_new(list, v);
            tp__store_close(s);
        } else {
            json_array_append_new(list,
                                  json_pack("{s:I, s:s, s:s, s:s}", "id", (json_int_t)i, "dir",
                                            dirs[i], "state", "unreadable", "error", err.msg));
        }
    }
    free_list(dirs, n);
    return send_json(c, MHD_HTTP_OK, json_pack("{s:o}", "experiments", list));
}

static enum MHD_Result api(const web_t *w, struct MHD_Connection *c, const char *url) {
    if (strcmp(url, "/api/experiments") == 0) return api_experiments(w, c);
    size_t id;
    char what[32] = "";
    long long trial = -1;
    int used = 0;
    if (sscanf(url, "/api/e/%zu/%31[a-z.]%n", &id, what, &used) < 2)
        return send_error(c, MHD_HTTP_NOT_FOUND, "no such page");
    if (url[used] == '/' && sscanf(url + used, "/%lld", &trial) != 1)
        return send_error(c, MHD_HTTP_NOT_FOUND, "no such trial");
    for (size_t r = 0; r < TP_ARRAY_LEN(api_routes); r++) {
        if (strcmp(api_routes[r].what, what) != 0) continue;
        if (api_routes[r].takes_trial != (trial >= 0))
            return send_error(c, MHD_HTTP_NOT_FOUND, "no such page");
        size_t n;
        char **dirs = experiments(w, &n);
        if (id >= n) {
            free_list(dirs, n);
            return send_error(c, MHD_HTTP_NOT_FOUND, "no such experiment");
        }
        tp_store_t *s = NULL;
        tp_error_t err = {0};
        enum MHD_Result rc;
        if (tp__store_open(dirs[id], TP_STORE_READ_AGAIN, &s, &err) != 0) {
            rc = send_error(c, MHD_HTTP_SERVICE_UNAVAILABLE, err.msg);
        } else {
            req_t q = {.c = c,
                       .s = s,
                       .dir = dirs[id],
                       .id = id,
                       .trial = trial,
                       .rank = w->o->rank,
                       .live = live(w, dirs[id])};
            rc = api_routes[r].fn ? api_routes[r].fn(&q) : send_chart(&q, api_routes[r].svg);
            tp__store_close(s);
        }
        free_list(dirs, n);
        return rc;
    }
    return send_error(c, MHD_HTTP_NOT_FOUND, "no such page");
}

/* How a request was let in. */
typedef enum { DENIED, BY_QUERY, ALLOWED } access_t;

/* The token from ?token=, the cookie or an Authorization: Bearer header,
 * each compared in time that does not depend on how much of it matches. */
static access_t access_of(const web_t *w, struct MHD_Connection *c) {
    if (!w->need_token) return ALLOWED;
    const char *q = arg(c, "token");
    if (q && tp__web_token_equal(q, w->token)) return BY_QUERY;
    const char *cookie = MHD_lookup_connection_value(c, MHD_COOKIE_KIND, w->cookie);
    if (cookie && tp__web_token_equal(cookie, w->token)) return ALLOWED;
    const char *auth = MHD_lookup_connection_value(c, MHD_HEADER_KIND, "Authorization");
    return auth && strncmp(auth, "Bearer ", 7) == 0 && tp__web_token_equal(auth + 7, w->token)
               ? ALLOWED
               : DENIED;
}

static const char DENIED_PAGE[] =
    "<!DOCTYPE html><html lang=\"en\"><head><meta charset=\"utf-8\">"
    "<title>tunepack dashboard: private</title></head><body>"
    "<h1>This dashboard is private</h1>"
    "<p>Open the URL that <code>tunepack dashboard</code> (or <code>tunepack run "
    "--dashboard</code>) printed when it started: it ends in <code>?token=...</code>, and lets "
    "this browser in from then on.</p>"
    "<p>Lost it? Stop the dashboard and start it again: it prints a new one.</p>"
    "</body></html>";

/* 403: a page that says how to get in, or a JSON error for the API. */
static enum MHD_Result send_denied(struct MHD_Connection *c, const char *url) {
    if (strncmp(url, "/api/", 5) == 0)
        return send_error(c, MHD_HTTP_FORBIDDEN,
                          "this dashboard needs the token it printed when it started: open the "
                          "URL it printed (it ends in ?token=...), or send Authorization: Bearer "
                          "TOKEN");
    return send_bytes(c, MHD_HTTP_FORBIDDEN, "text/html; charset=utf-8", (void *)DENIED_PAGE,
                      sizeof DENIED_PAGE - 1, MHD_RESPMEM_PERSISTENT, NULL);
}

/* The first page opened with ?token=: the cookie set, and a redirect to the
 * same page without the token (so that it leaves the address bar and the
 * history; the browser keeps the #fragment). path is an asset's. */
static enum MHD_Result send_welcome(const web_t *w, struct MHD_Connection *c, const char *path) {
    struct MHD_Response *r = MHD_create_response_from_buffer(0, NULL, MHD_RESPMEM_PERSISTENT);
    if (!r) return MHD_NO;
    char cookie[160];
    snprintf(cookie, sizeof cookie, "%s=%s; Path=/; HttpOnly; SameSite=Strict", w->cookie,
             w->token);
    MHD_add_response_header(r, "Set-Cookie", cookie);
    MHD_add_response_header(r, "Location", path);
    MHD_add_response_header(r, "Cache-Control", "no-store");
    MHD_add_response_header(r, "Referrer-Policy", "no-referrer");
    enum MHD_Result rc = MHD_queue_response(c, MHD_HTTP_FOUND, r);
    MHD_destroy_response(r);
    return rc;
}

static const tp_web_asset_t *asset(const char *url) {
    const char *path = strcmp(url, "/") == 0 ? "/index.html" : url;
    for (size_t i = 0; i < tp__web_nassets; i++)
        if (strcmp(tp__web_assets[i].path, path) == 0) return &tp__web_assets[i];
    return NULL;
}

static enum MHD_Result handle(void *cls, struct MHD_Connection *c, const char *url,
                              const char *method, const char *version, const char *upload,
                              size_t *upload_size, void **state) {
    (void)version, (void)upload, (void)upload_size, (void)state;
    const web_t *w = cls;
    if (strcmp(method, "GET") != 0 && strcmp(method, "HEAD") != 0)
        return send_error(c, MHD_HTTP_METHOD_NOT_ALLOWED, "the dashboard is read-only");
    access_t a = access_of(w, c);
    if (a == DENIED) return send_denied(c, url);
    if (strncmp(url, "/api/", 5) == 0) return api(w, c, url);
    const tp_web_asset_t *f = asset(url);
    if (!f) return send_error(c, MHD_HTTP_NOT_FOUND, "no such page");
    if (a == BY_QUERY) return send_welcome(w, c, url);
    return send_bytes(c, MHD_HTTP_OK, content_type(f->path), (void *)f->data, f->len,
                      MHD_RESPMEM_PERSISTENT, NULL);
}

/* A fresh random token: 32 hex digits. */
static int make_token(char out[33], tp_error_t *err) {
    unsigned char raw[16];
    if (getrandom(raw, sizeof raw, 0) != (ssize_t)sizeof raw)
        return tp__errorf(err, -errno, "no random bytes for the access token: %s", strerror(errno));
    for (size_t i = 0; i < sizeof raw; i++)
        snprintf(out + 2 * i, 3, "%02x", raw[i]);
    return 0;
}

/* The served URL, for tests and `run --dashboard`: the owner's alone, since
 * it carries the token. */
/* The URL into path, whole or not at all: written to a temporary name and
 * renamed, so a reader that waits for the file to appear never reads it
 * empty (a test did, under load, and opened "" as the dashboard's URL). */
static void write_ready_file(const char *path, const char *url) {
    char tmp[4200];
    if (snprintf(tmp, sizeof tmp, "%s.tmp", path) >= (int)sizeof tmp) return;
    int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    if (fd < 0) return;
    int ok = fchmod(fd, 0600) == 0 && write(fd, url, strlen(url)) == (ssize_t)strlen(url);
    close(fd);
    if (!ok || rename(tmp, path) != 0) {
        tp__log(TP_LOG_WARN, "dashboard: cannot write %s: %s", path, strerror(errno));
        unlink(tmp);
    }
}

/* A listening TCP socket on host:port (0: any free one); *bound gets the
 * port. The socket or a negative errno with err filled. */
static int listen_tcp(const char *host, unsigned port, unsigned *bound, tp_error_t *err) {
    struct addrinfo hints = {.ai_family = AF_UNSPEC,
                             .ai_socktype = SOCK_STREAM,
                             .ai_flags = AI_PASSIVE | AI_NUMERICSERV},
                    *ai = NULL;
    char portstr[8];
    snprintf(portstr, sizeof portstr, "%u", port);
    int gai = getaddrinfo(host, portstr, &hints, &ai);
    if (gai != 0) return tp__errorf(err, -EINVAL, "--listen %s: %s", host, gai_strerror(gai));
    int one = 1, fd = socket(ai->ai_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0 || setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one) != 0 ||
        bind(fd, ai->ai_addr, ai->ai_addrlen) != 0 || listen(fd, 64) != 0) {
        int e = errno;
        if (fd >= 0) close(fd);
        freeaddrinfo(ai);
        return tp__errorf(err, -e,
                          "cannot listen on %s:%u: %s (in use, or not an address of "
                          "this machine?)",
                          host, port, strerror(e));
    }
    freeaddrinfo(ai);
    struct sockaddr_storage sa;
    socklen_t len = sizeof sa;
    *bound = port;
    if (getsockname(fd, (struct sockaddr *)&sa, &len) == 0)
        *bound = ntohs(sa.ss_family == AF_INET6 ? ((struct sockaddr_in6 *)&sa)->sin6_port
                                                : ((struct sockaddr_in *)&sa)->sin_port);
    return fd;
}

/* A listening Unix socket at path, its owner's alone (0600): one left by an
 * earlier dashboard is replaced, anything else there is refused. The socket
 * or a negative errno with err filled. */
static int listen_unix(const char *path, tp_error_t *err) {
    struct sockaddr_un sa = {.sun_family = AF_UNIX};
    if (strlen(path) >= sizeof sa.sun_path)
        return tp__errorf(err, -ENAMETOOLONG,
                          "--unix %s: the path is longer than the %zu bytes "
                          "a socket's name may have",
                          path, sizeof sa.sun_path - 1);
    struct stat st;
    if (lstat(path, &st) == 0 && !S_ISSOCK(st.st_mode))
        return tp__errorf(err, -EEXIST,
                          "--unix %s: something other than a socket is there; "
                          "name a new path",
                          path);
    unlink(path);
    memcpy(sa.sun_path, path, strlen(path) + 1);
    int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    mode_t old = umask(0177); /* born 0600: never open to others for a moment */
    int rc = fd < 0 ? -1 : bind(fd, (struct sockaddr *)&sa, sizeof sa);
    umask(old);
    if (rc != 0 || chmod(path, 0600) != 0 || listen(fd, 64) != 0) {
        int e = errno;
        if (fd >= 0) close(fd);
        return tp__errorf(err, -e, "--unix %s: cannot listen there: %s", path, strerror(e));
    }
    return fd;
}

/* Where to listen, as the options say: the socket, the port (0 on a Unix
 * socket), the URL (with the token when one is needed) and a line on who
 * may get in. */
static int open_listener(const tp_web_opts_t *o, const web_t *w, unsigned *bound, char *url,
                         size_t nurl, char *who, size_t nwho, tp_error_t *err) {
    *bound = 0;
    if (o->unix_path) {
        int fd = listen_unix(o->unix_path, err);
        snprintf(url, nurl, "unix:%s %s%s", o->unix_path, w->need_token ? "/?token=" : "/",
                 w->need_token ? w->token : "");
        snprintf(who, nwho,
                 "whoever can open the socket %s (0600: you alone)%s; reach it with "
                 "`ssh -L 8080:%s HOST` and a browser on 127.0.0.1:8080, or with "
                 "`curl --unix-socket %s`",
                 o->unix_path, w->need_token ? " with the token" : "", o->unix_path, o->unix_path);
        return fd;
    }
    char host[256];
    unsigned port;
    int rc = tp__web_parse_listen(o->listen ? o->listen : TP_WEB_DEFAULT_LISTEN, host, sizeof host,
                                  &port, err);
    if (rc) return rc;
    int loopback = tp__web_is_loopback(host);
    if (o->no_token && !loopback)
        return tp__errorf(err, -EPERM,
                          "--no-token on %s: every machine that reaches it could "
                          "read every experiment; without a token listen on a "
                          "loopback address (127.0.0.1, ::1) or --unix PATH",
                          host);
    int fd = listen_tcp(host, port, bound, err);
    if (fd < 0) return fd;
    int bracket = strchr(host, ':') != NULL;
    snprintf(url, nurl, "http://%s%s%s:%u/%s%s", bracket ? "[" : "", host, bracket ? "]" : "",
             *bound, w->need_token ? "?token=" : "", w->need_token ? w->token : "");
    snprintf(who, nwho, "%s",
             !w->need_token ? "every user of this machine"
             : loopback     ? "whoever has the token (this machine only)"
                            : "whoever has the token, from any machine that "
                              "reaches this address");
    return fd;
}

int tp__web_serve(const tp_web_opts_t *o, volatile sig_atomic_t *stop, tp_error_t *err) {
    web_t w = {.o = o, .need_token = !o->no_token};
    int rc = w.need_token ? make_token(w.token, err) : 0;
    char url[4400], who[4400];
    unsigned port;
    int fd = rc ? rc : open_listener(o, &w, &port, url, sizeof url, who, sizeof who, err);
    if (fd < 0) return fd;
    /* Cookies are not kept apart by port: one name per port, so that two
     * dashboards on one host do not overwrite each other's. */
    snprintf(w.cookie, sizeof w.cookie, "tunepack-token-%u", port);
    struct MHD_Daemon *d =
        MHD_start_daemon(MHD_USE_AUTO_INTERNAL_THREAD, 0, NULL, NULL, handle, &w,
                         MHD_OPTION_LISTEN_SOCKET, fd, MHD_OPTION_CONNECTION_TIMEOUT, (unsigned)30,
                         MHD_OPTION_THREAD_POOL_SIZE, (unsigned)4, MHD_OPTION_END);
    if (!d) {
        close(fd);
        return tp__errorf(err, -EIO, "cannot start the web server on %s", url);
    }
    printf("dashboard: %s\n", url);
    if (w.need_token)
        printf("dashboard: the URL above is printed only once; a browser that opens it keeps "
               "its token in a cookie. It lets in %s\n",
               who);
    else
        printf("dashboard: no token: every experiment it serves (every trial's logs, parameters "
               "and results), whatever the experiments' permissions, can be read by %s\n",
               who);
    fflush(stdout);
    if (o->ready_file) write_ready_file(o->ready_file, url);
    while (!*stop) {
        struct timespec ts = {0, 100 * 1000 * 1000};
        nanosleep(&ts, NULL);
    }
    MHD_stop_daemon(d);
    if (o->unix_path) unlink(o->unix_path);
    return 0;
}
