/* server: the dashboard's HTTP side (libmicrohttpd, four internal threads,
 * so that a page's few requests are answered side by side; every handler
 * keeps its state on its stack and its own store connection).
 * Routes are a table; every API request opens the experiment's store
 * read-only, answers from it and closes it (without the quick_check each
 * command runs on open: `tunepack dashboard` checks the stores it is given
 * once, when it starts). Static assets are compiled into
 * the binary (cmake/embed.cmake), so nothing is fetched from anywhere. */
#include <arpa/inet.h>
#include <errno.h>
#include <jansson.h>
#include <microhttpd.h>
#include <netdb.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <time.h>
#include <dirent.h>

#include "web/web.h"
#include "web/web_internal.h"

/* The compiled-in assets (generated: web_assets.c). */
typedef struct tp_web_asset {
    const char *path;            /* "/app.js" */
    const unsigned char *data;
    size_t len;
} tp_web_asset_t;
extern const tp_web_asset_t tp__web_assets[];
extern const size_t tp__web_nassets;

typedef struct web {
    const tp_web_opts_t *o;
    int need_token;
    char token[33];              /* 32 hex digits when needed */
} web_t;

int tp__web_token_equal(const char *given, const char *expected) {
    size_t n = strlen(expected), g = given ? strlen(given) : 0;
    unsigned char diff = (unsigned char)(g != n);
    for (size_t i = 0; i < n; i++) diff |= (unsigned char)((i < g ? given[i] : 0) ^ expected[i]);
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
        for (size_t i = 0; i < w->o->ndirs; i++) list[(*n)++] = tp__strdup(w->o->dirs[i]);
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
        if (*n == cap) list = tp__xrealloc(list, (cap = cap ? 2 * cap : 16) * sizeof *list);
        snprintf(path, sizeof path, "runs/%s", e->d_name);
        list[(*n)++] = tp__strdup(path);
    }
    if (d) closedir(d);
    if (*n) qsort(list, *n, sizeof *list, by_name);
    return list;
}

static void free_list(char **list, size_t n) {
    for (size_t i = 0; i < n; i++) free(list[i]);
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
    char *text = o ? json_dumps(o, JSON_COMPACT | JSON_PRESERVE_ORDER | JSON_REAL_PRECISION(12)) : NULL;
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
    int64_t trial;      /* -1: none in the path */
    tp_web_rank_fn rank;
} req_t;

static enum MHD_Result r_summary(req_t *q) {
    return send_json(q->c, MHD_HTTP_OK, tp__web_summary(q->s, q->dir, q->id, q->rank));
}
static enum MHD_Result r_trials(req_t *q) {
    tp_web_trials_q_t tq = {.sort = arg(q->c, "sort"), .desc = arg_ll(q->c, "desc", 0) != 0,
                            .state = arg(q->c, "state"), .text = arg(q->c, "q"),
                            .offset = arg_ll(q->c, "offset", 0),
                            .limit = arg_ll(q->c, "limit", TP_WEB_PAGE_DEFAULT)};
    return send_json(q->c, MHD_HTTP_OK, tp__web_trials(q->s, &tq));
}
static enum MHD_Result r_trial(req_t *q) {
    return send_json(q->c, MHD_HTTP_OK, q->trial >= 0 ? tp__web_trial(q->s, q->trial) : NULL);
}
static enum MHD_Result r_log(req_t *q) {
    json_t *o = q->trial >= 0 ? tp__web_log(q->dir, q->trial, arg(q->c, "stream") ? arg(q->c, "stream") : "stdout",
                                            arg_ll(q->c, "from", -1))
                              : NULL;
    return o ? send_json(q->c, MHD_HTTP_OK, o)
             : send_error(q->c, MHD_HTTP_BAD_REQUEST, "stream must be stdout or stderr");
}
static enum MHD_Result r_nodes(req_t *q) { return send_json(q->c, MHD_HTTP_OK, tp__web_nodes(q->s)); }
static enum MHD_Result r_importance(req_t *q) {
    return send_json(q->c, MHD_HTTP_OK, tp__web_importance(q->s));
}

/* Curves of ?trials=1,2,3 (at most 20), or the default set. */
static void curves_svg(req_t *q, tp_buf_t *b) {
    int64_t ids[20];
    size_t n = 0;
    for (const char *p = arg(q->c, "trials"); p && *p && n < 20;) {
        char *end;
        long long v = strtoll(p, &end, 10);
        if (end == p) break;
        ids[n++] = v;
        p = *end == ',' ? end + 1 : end;
    }
    tp__web_svg_curves(q->s, ids, n, b);
}
static void history_svg(req_t *q, tp_buf_t *b) { tp__web_svg_history(q->s, b); }
static void parcoords_svg(req_t *q, tp_buf_t *b) { tp__web_svg_parcoords(q->s, b); }
static void importance_svg(req_t *q, tp_buf_t *b) { tp__web_svg_importance(q->s, b); }
static void packing_svg(req_t *q, tp_buf_t *b) { tp__web_svg_packing(q->s, tp__wall_s(), b); }

/* A route answers either itself (fn) or with a chart drawn into a buffer (svg). */
static const struct {
    const char *what;
    int takes_trial;                            /* the path ends in /TRIAL */
    enum MHD_Result (*fn)(req_t *q);
    void (*svg)(req_t *q, tp_buf_t *out);
} api_routes[] = {
    {"summary", 0, r_summary, NULL},
    {"trials", 0, r_trials, NULL},
    {"trial", 1, r_trial, NULL},
    {"log", 1, r_log, NULL},
    {"nodes", 0, r_nodes, NULL},
    {"importance", 0, r_importance, NULL},
    {"history.svg", 0, NULL, history_svg},
    {"curves.svg", 0, NULL, curves_svg},
    {"parcoords.svg", 0, NULL, parcoords_svg},
    {"importance.svg", 0, NULL, importance_svg},
    {"packing.svg", 0, NULL, packing_svg},
};

static enum MHD_Result api_experiments(const web_t *w, struct MHD_Connection *c) {
    size_t n;
    char **dirs = experiments(w, &n);
    json_t *list = json_array();
    for (size_t i = 0; i < n; i++) {
        tp_store_t *s = NULL;
        tp_error_t err = {0};
        if (tp__store_open(dirs[i], TP_STORE_READ_AGAIN, &s, &err) == 0) {
            json_array_append_new(list, tp__web_summary(s, dirs[i], i, w->o->rank));
            tp__store_close(s);
        } else {
            json_array_append_new(list, json_pack("{s:I, s:s, s:s, s:s}", "id", (json_int_t)i,
                                                  "dir", dirs[i], "state", "unreadable", "error",
                                                  err.msg));
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
            req_t q = {.c = c, .s = s, .dir = dirs[id], .id = id, .trial = trial, .rank = w->o->rank};
            if (api_routes[r].fn) {
                rc = api_routes[r].fn(&q);
            } else {
                tp_buf_t b;
                tp__buf_init(&b);
                api_routes[r].svg(&q, &b);
                rc = send_svg(c, &b);
            }
            tp__store_close(s);
        }
        free_list(dirs, n);
        return rc;
    }
    return send_error(c, MHD_HTTP_NOT_FOUND, "no such page");
}

/* The token from ?token=, a cookie or an Authorization: Bearer header. */
static int authorised(const web_t *w, struct MHD_Connection *c, int *from_query) {
    *from_query = 0;
    if (!w->need_token) return 1;
    const char *q = arg(c, "token");
    if (q && tp__web_token_equal(q, w->token)) return *from_query = 1;
    const char *cookie = MHD_lookup_connection_value(c, MHD_COOKIE_KIND, "tp_token");
    if (cookie && tp__web_token_equal(cookie, w->token)) return 1;
    const char *auth = MHD_lookup_connection_value(c, MHD_HEADER_KIND, "Authorization");
    return auth && strncmp(auth, "Bearer ", 7) == 0 && tp__web_token_equal(auth + 7, w->token);
}

static enum MHD_Result handle(void *cls, struct MHD_Connection *c, const char *url,
                              const char *method, const char *version, const char *upload,
                              size_t *upload_size, void **state) {
    (void)version, (void)upload, (void)upload_size, (void)state;
    const web_t *w = cls;
    if (strcmp(method, "GET") != 0 && strcmp(method, "HEAD") != 0)
        return send_error(c, MHD_HTTP_METHOD_NOT_ALLOWED, "the dashboard is read-only");
    int from_query;
    if (!authorised(w, c, &from_query))
        return send_error(c, MHD_HTTP_UNAUTHORIZED,
                          "this dashboard needs the token it printed when it started "
                          "(open the URL it printed, with ?token=...)");
    if (strncmp(url, "/api/", 5) == 0) return api(w, c, url);
    const char *path = strcmp(url, "/") == 0 ? "/index.html" : url;
    for (size_t i = 0; i < tp__web_nassets; i++) {
        if (strcmp(tp__web_assets[i].path, path) != 0) continue;
        char cookie[128];
        snprintf(cookie, sizeof cookie, "tp_token=%s; Path=/; HttpOnly; SameSite=Strict", w->token);
        return send_bytes(c, MHD_HTTP_OK, content_type(path), (void *)tp__web_assets[i].data,
                          tp__web_assets[i].len, MHD_RESPMEM_PERSISTENT,
                          from_query ? cookie : NULL);
    }
    return send_error(c, MHD_HTTP_NOT_FOUND, "no such page");
}

int tp__web_serve(const tp_web_opts_t *o, volatile sig_atomic_t *stop, tp_error_t *err) {
    char host[256];
    unsigned port;
    int rc = tp__web_parse_listen(o->listen ? o->listen : TP_WEB_DEFAULT_LISTEN, host,
                                  sizeof host, &port, err);
    if (rc) return rc;
    struct addrinfo hints = {.ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM,
                             .ai_flags = AI_PASSIVE | AI_NUMERICSERV},
                    *ai = NULL;
    char portstr[8];
    snprintf(portstr, sizeof portstr, "%u", port);
    int gai = getaddrinfo(host, portstr, &hints, &ai);
    if (gai != 0)
        return tp__errorf(err, -EINVAL, "--listen %s: %s", host, gai_strerror(gai));
    web_t w = {.o = o, .need_token = !tp__web_is_loopback(host)};
    if (w.need_token) {
        unsigned char raw[16];
        if (getrandom(raw, sizeof raw, 0) != (ssize_t)sizeof raw) {
            freeaddrinfo(ai);
            return tp__errorf(err, -errno, "no random bytes for the access token: %s", strerror(errno));
        }
        for (size_t i = 0; i < sizeof raw; i++) snprintf(w.token + 2 * i, 3, "%02x", raw[i]);
    }
    unsigned flags = MHD_USE_AUTO_INTERNAL_THREAD | (ai->ai_family == AF_INET6 ? MHD_USE_IPv6 : 0);
    struct MHD_Daemon *d = MHD_start_daemon(flags, (uint16_t)port, NULL, NULL, handle, &w,
                                            MHD_OPTION_SOCK_ADDR, ai->ai_addr,
                                            MHD_OPTION_CONNECTION_TIMEOUT, (unsigned)30,
                                            MHD_OPTION_THREAD_POOL_SIZE, (unsigned)4,
                                            MHD_OPTION_END);
    freeaddrinfo(ai);
    if (!d)
        return tp__errorf(err, -EADDRINUSE, "cannot listen on %s:%u (in use, or not an address "
                                            "of this machine)",
                          host, port);
    const union MHD_DaemonInfo *info = MHD_get_daemon_info(d, MHD_DAEMON_INFO_BIND_PORT);
    unsigned bound = info ? info->port : port;
    char url[400];
    int v6 = strchr(host, ':') != NULL;
    snprintf(url, sizeof url, "http://%s%s%s:%u/%s%s", v6 ? "[" : "", host, v6 ? "]" : "", bound,
             w.need_token ? "?token=" : "", w.need_token ? w.token : "");
    printf("dashboard: %s\n", url);
    if (w.need_token)
        printf("dashboard: %s is not a loopback address, so every request needs this token; "
               "it is printed only once\n",
               host);
    fflush(stdout);
    if (o->ready_file) tp__write_file(o->ready_file, url, strlen(url), NULL);
    while (!*stop) {
        struct timespec ts = {0, 100 * 1000 * 1000};
        nanosleep(&ts, NULL);
    }
    MHD_stop_daemon(d);
    return 0;
}
