/* The dashboard's pure parts and its queries over a real store: the listen
 * address, loopback and token checks, the charts' escaping and bounds, and
 * the importance measure against a store whose answer is known. */
#include <errno.h>
#include <jansson.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "chart/chart.h"
#include "store/store.h"
#include "tp_test.h"
#include "web/web.h"
#include "web/web_internal.h"

TP_TEST(test_listen_address_is_parsed_or_refused_with_a_reason) {
    char host[64];
    unsigned port = 1;
    tp_error_t err = {0};
    TP_CHECK_INT(tp__web_parse_listen("127.0.0.1:8080", host, sizeof host, &port, &err), 0);
    TP_CHECK_STR(host, "127.0.0.1");
    TP_CHECK_INT(port, 8080);
    TP_CHECK_INT(tp__web_parse_listen("[::1]:0", host, sizeof host, &port, &err), 0);
    TP_CHECK_STR(host, "::1");
    TP_CHECK_INT(port, 0);
    TP_CHECK(tp__web_parse_listen("localhost", host, sizeof host, &port, &err) == -EINVAL);
    TP_CHECK(strstr(err.msg, "HOST:PORT") != NULL);
    TP_CHECK(tp__web_parse_listen("0.0.0.0:99999", host, sizeof host, &port, &err) == -EINVAL);
    TP_CHECK(strstr(err.msg, "0-65535") != NULL);
    TP_CHECK(tp__web_parse_listen(":80", host, sizeof host, &port, &err) == -EINVAL);
}

TP_TEST(test_only_loopback_addresses_may_go_without_a_token) {
    TP_CHECK(tp__web_is_loopback("127.0.0.1"));
    TP_CHECK(tp__web_is_loopback("127.3.2.1"));
    TP_CHECK(tp__web_is_loopback("::1"));
    TP_CHECK(tp__web_is_loopback("localhost"));
    TP_CHECK(!tp__web_is_loopback("0.0.0.0"));
    TP_CHECK(!tp__web_is_loopback("10.0.0.1"));
    TP_CHECK(!tp__web_is_loopback("::"));
    TP_CHECK(!tp__web_is_loopback("128.0.0.1"));
}

TP_TEST(test_token_equal_needs_the_whole_token) {
    const char *t = "0123456789abcdef0123456789abcdef";
    TP_CHECK(tp__web_token_equal(t, t));
    TP_CHECK(!tp__web_token_equal("0123456789abcdef0123456789abcde", t));   /* a prefix */
    TP_CHECK(!tp__web_token_equal("0123456789abcdef0123456789abcdef0", t)); /* longer */
    TP_CHECK(!tp__web_token_equal("1123456789abcdef0123456789abcdef", t));
    TP_CHECK(!tp__web_token_equal("", t));
    TP_CHECK(!tp__web_token_equal(NULL, t));
}

static size_t count(const char *hay, const char *needle) {
    size_t n = 0;
    for (const char *p = hay; (p = strstr(p, needle)) != NULL; p += strlen(needle))
        n++;
    return n;
}

TP_TEST(test_gantt_escapes_labels_and_draws_each_bar_in_its_lane) {
    const char *labels[] = {"node<1>/gpu0 \"A100\"", "node&2/gpu1"};
    const char *legend[] = {"done", "failed"};
    tp_gantt_bar_t bars[] = {
        {.band = 0, .lane = 0, .start = 0, .end = 10, .colour = 0, .title = "trial 1 <x>"},
        {.band = 0, .lane = 1, .start = 2, .end = 8, .colour = 1, .title = NULL},
        {.band = 1, .lane = 0, .start = 5, .end = 20, .colour = 0, .title = "t3"},
    };
    double at[] = {0, 2, 8, 10}, mem[] = {0.5, 0.9, 0.5, 0}, cmp[] = {0.3, 0.6, 0.3, 0};
    tp_gantt_use_t use[] = {{4, at, mem, cmp}, {0, NULL, NULL, NULL}};
    tp_gantt_t g = {.title = "packing",
                    .subtitle = "a & b",
                    .nbands = 2,
                    .band_label = labels,
                    .bars = bars,
                    .nbars = 3,
                    .span = 20,
                    .legend = legend,
                    .nlegend = 2,
                    .use = use};
    tp_buf_t b;
    tp__buf_init(&b);
    tp__chart_gantt(&b, &g);
    TP_REQUIRE(b.data != NULL);
    TP_CHECK(strstr(b.data, "node&lt;1&gt;/gpu0 &quot;A100&quot;") != NULL);
    TP_CHECK(strstr(b.data, "node&amp;2/gpu1") != NULL);
    TP_CHECK(strstr(b.data, "trial 1 &lt;x&gt;") != NULL);
    TP_CHECK(strstr(b.data, "<x>") == NULL);
    TP_CHECK_INT(count(b.data, "<title>"), 2);
    TP_CHECK(strstr(b.data, "memory in use") != NULL);
    TP_CHECK(strncmp(b.data, "<svg", 4) == 0);
    TP_CHECK(strstr(b.data, "</svg>") != NULL);
    tp__buf_free(&b);
}

TP_TEST(test_xy_chart_skips_non_finite_points) {
    double x[] = {1, 2, 3, 4}, y[] = {0.5, NAN, INFINITY, 0.7};
    tp_series_t s = {.name = "v", .style = TP_SERIES_DOTS, .n = 4, .x = x, .y = y};
    tp_xy_t p = {.title = "t", .xlabel = "x", .ylabel = "y", .series = &s, .nseries = 1};
    tp_buf_t b;
    tp__buf_init(&b);
    tp__chart_xy(&b, &p);
    TP_REQUIRE(b.data != NULL);
    TP_CHECK_INT(count(b.data, "<circle"), 2);
    TP_CHECK(strstr(b.data, "nan") == NULL && strstr(b.data, "inf") == NULL);
    tp__buf_free(&b);
}

/* 3,000 trials, every third at the full budget 9 and the others stopped at
 * budget 1 with values far apart: the history draws each budget as its own
 * series, thinned, and the best so far among budget 9's values only. */
TP_TEST(test_history_keeps_budgets_apart_and_thins_each) {
    char tmpl[] = "/tmp/tp-web-XXXXXX";
    TP_REQUIRE(mkdtemp(tmpl) != NULL);
    tp_store_t *s = NULL;
    tp_error_t err = {0};
    TP_REQUIRE(tp__store_open(tmpl, TP_STORE_WRITE, &s, &err) == 0);
    tp__store_begin(s);
    tp__store_meta_set(s, "metric", "acc");
    tp__store_meta_set(s, "mode", "max");
    for (int i = 0; i < 3000; i++) {
        int full = i % 3 == 0;
        tp__store_trial_add(s, i, "{}", 1.0);
        tp__store_trial_progress(s, i, full ? 2 : 0, full ? 9 : 1, NULL);
        /* budget 1 reaches 0.99 (never "best" at budget 9), budget 9 at most 0.5 */
        double v = full ? 0.5 * i / 3000.0 : 0.99;
        tp_trial_end_t end = {.state = full ? "completed" : "stopped",
                              .attempt = 1,
                              .has_value = 1,
                              .value = v,
                              .best = v,
                              .step = TP_STORE_NO_STEP,
                              .at = 2.0};
        tp__store_trial_end(s, i, &end);
    }
    tp__store_commit(s);
    tp_buf_t b;
    tp__buf_init(&b);
    TP_CHECK_INT(tp__web_svg_history(s, NULL, &b, &err), 0);
    TP_CHECK(strstr(b.data, ">at budget 1<") != NULL);
    TP_CHECK(strstr(b.data, ">at budget 9<") != NULL);
    TP_CHECK(strstr(b.data, ">best so far at budget 9<") != NULL);
    TP_CHECK(strstr(b.data, "trial value") == NULL);
    TP_CHECK(count(b.data, "<circle") <= 2 * 2 * 800); /* two series, thinned */
    /* The line stays below budget 1's dots (0.99; budget 9 reaches 0.5) and
     * is held to the last trial. */
    double dot_top = 1e9, dot_right = 0, line_top = 1e9, line_right = 0, x, y;
    for (const char *p = b.data; (p = strstr(p, "<circle cx=\"")) != NULL; p++)
        if (sscanf(p, "<circle cx=\"%lf\" cy=\"%lf\"", &x, &y) == 2)
            dot_top = y < dot_top ? y : dot_top, dot_right = x > dot_right ? x : dot_right;
    const char *line = strstr(b.data, "<polyline");
    TP_REQUIRE(line != NULL);
    const char *p = strstr(line, "points=\"") + 8;
    for (int used = 0; sscanf(p, "%lf,%lf %n", &x, &y, &used) == 2; p += used)
        line_top = y < line_top ? y : line_top, line_right = x;
    TP_CHECK(line_top > dot_top + 50);
    TP_CHECK(line_right >= dot_right);
    tp__buf_free(&b);
    tp__store_close(s);
    char cmd[256];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", tmpl);
    TP_CHECK(system(cmd) == 0);
}

/* f(x, y, z) = x y over a full 8 x 8 x 8 grid centred on 0: neither x nor y
 * matters alone (each level's mean is 0, so eta squared is 0), together they
 * decide everything, and z nothing. The forest sees it; it does so again
 * with the same answer. */
TP_TEST(test_forest_importance_finds_an_interaction_eta_squared_misses) {
    enum { L = 8, N = L * L * L, P = 3 };
    static double x[N * P], y[N];
    unsigned char categorical[P] = {0, 0, 0};
    for (size_t i = 0; i < N; i++) {
        for (size_t f = 0; f < P; f++) {
            size_t level = f == 0 ? i % L : f == 1 ? i / L % L : i / (L * L);
            x[i * P + f] = (double)level - (L - 1) / 2.0;
        }
        y[i] = x[i * P] * x[i * P + 1];
    }
    double imp[P], again[P];
    tp__web_forest_importance(x, categorical, N, P, y, imp);
    tp__web_forest_importance(x, categorical, N, P, y, again);
    TP_CHECK(memcmp(imp, again, sizeof imp) == 0);
    TP_CHECK(imp[0] > 0.3 && imp[1] > 0.3);
    TP_CHECK(imp[2] < 0.05);
    TP_CHECK_NEAR(imp[0] + imp[1] + imp[2], 1, 1e-9);
    /* Each level of x alone: the mean of y is 0, the one-way answer is nothing. */
    for (size_t level = 0; level < L; level++) {
        double sum = 0;
        for (size_t i = level; i < N; i += L)
            sum += y[i];
        TP_CHECK_NEAR(sum, 0, 1e-9);
    }
    /* The same with x a choice of eight names: a set of categories per split. */
    unsigned char choice[P] = {1, 0, 0};
    static double xc[N * P];
    memcpy(xc, x, sizeof xc);
    for (size_t i = 0; i < N; i++)
        xc[i * P] = (double)(i % L);
    tp__web_forest_importance(xc, choice, N, P, y, imp);
    TP_CHECK(imp[0] > 0.3 && imp[1] > 0.3 && imp[2] < 0.05);
}

/* A store where val depends on `lr` alone and `noise` is a coin flip. */
static char *store_with_known_importance(tp_store_t **out) {
    char tmpl[] = "/tmp/tp-web-XXXXXX";
    char *dir = mkdtemp(tmpl) ? strdup(tmpl) : NULL;
    tp_error_t err = {0};
    if (!dir || tp__store_open(dir, TP_STORE_WRITE, out, &err) != 0) return NULL;
    tp__store_begin(*out);
    tp__store_meta_set(*out, "metric", "val");
    tp__store_meta_set(*out, "mode", "max");
    for (int i = 0; i < 200; i++) {
        double lr = 0.001 * (1 + i % 40);
        char params[128];
        snprintf(params, sizeof params, "{\"lr\": %g, \"noise\": \"%s\"}", lr,
                 (i * 7919) % 3 == 0 ? "a" : "b");
        tp__store_trial_add(*out, i, params, 1.0);
        tp_trial_end_t end = {.state = "completed",
                              .attempt = 1,
                              .has_value = 1,
                              .value = lr * 10,
                              .best = lr * 10,
                              .step = TP_STORE_NO_STEP,
                              .at = 2.0};
        tp__store_trial_end(*out, i, &end);
    }
    tp__store_commit(*out);
    return dir;
}

TP_TEST(test_importance_finds_the_parameter_that_decides_the_value) {
    tp_store_t *s = NULL;
    char *dir = store_with_known_importance(&s);
    TP_REQUIRE(dir != NULL);
    tp_error_t err0 = {0};
    json_t *o = tp__web_importance(s, NULL, &err0);
    TP_CHECK_INT(json_integer_value(json_object_get(o, "trials")), 200);
    double lr = -1, noise = -1;
    size_t i;
    json_t *e;
    json_array_foreach(json_object_get(o, "params"), i, e) {
        const char *name = json_string_value(json_object_get(e, "name"));
        double v = json_real_value(json_object_get(e, "importance"));
        if (strcmp(name, "lr") == 0) lr = v;
        if (strcmp(name, "noise") == 0) noise = v;
    }
    TP_CHECK(lr > 0.95); /* ten bins of a value that is a function of lr */
    TP_CHECK(noise >= 0 && noise < 0.05);
    /* Sorted: the most important first. */
    TP_CHECK_STR(
        json_string_value(json_object_get(json_array_get(json_object_get(o, "params"), 0), "name")),
        "lr");
    TP_CHECK(json_real_value(
                 json_object_get(json_array_get(json_object_get(o, "params"), 0), "alone")) > 0.95);
    json_decref(o);
    /* Contour over lr and a choice: a cell per (lr bin, choice) that has trials, their
     * count in the tooltip; a parameter that is none is refused with the names. */
    tp_buf_t grid;
    tp__buf_init(&grid);
    TP_CHECK_INT(tp__web_svg_contour(s, "lr", "noise", NULL, &grid, &err0), 0);
    TP_REQUIRE(grid.data != NULL);
    size_t cells = 0;
    for (const char *p = grid.data; (p = strstr(p, "class=\"cell\"")); p++)
        cells++;
    TP_CHECK(cells > 12 && cells <= 24);
    TP_CHECK(strstr(grid.data, "noise (0 = ") != NULL);
    tp__buf_free(&grid);
    /* A brush on lr (its larger half): only those trials, half of them. */
    tp_web_trials_q_t brush = {.nranges = 1};
    brush.ranges[0] = (tp_web_range_t){.key = "p:lr", .lo = 0.0205, .hi = NAN};
    tp__buf_init(&grid);
    TP_CHECK_INT(tp__web_svg_contour(s, "lr", "noise", &brush, &grid, &err0), 0);
    size_t brushed = 0;
    for (const char *p = grid.data; (p = strstr(p, "class=\"cell\"")); p++)
        brushed++;
    TP_CHECK(brushed > 0);
    TP_CHECK(strstr(grid.data, "100 trials with a value in the brushed set") != NULL);
    tp__buf_free(&grid);
    tp__buf_init(&grid);
    TP_CHECK_INT(tp__web_svg_slice(s, "momentum", NULL, &grid, &err0), -EINVAL);
    TP_CHECK(strstr(err0.msg, "lr, noise") != NULL);
    tp__buf_free(&grid);
    /* Parallel coordinates label a choice as it is: a, not "a". */
    tp_buf_t svg;
    tp__buf_init(&svg);
    tp__web_svg_parcoords(s, &svg);
    TP_REQUIRE(svg.data != NULL);
    TP_CHECK(strstr(svg.data, ">a</text>") != NULL);
    TP_CHECK(strstr(svg.data, ">b</text>") != NULL);
    TP_CHECK(strstr(svg.data, ">&quot;a&quot;<") == NULL); /* (data-cats lists it as JSON) */
    tp__buf_free(&svg);
    /* The trials page sorts by value with the best first and counts the rest. */
    tp_web_trials_q_t q = {.sort = "value", .desc = 1, .limit = 5};
    tp_error_t err = {0};
    json_t *page = tp__web_trials(s, &q, &err);
    TP_CHECK_INT(json_integer_value(json_object_get(page, "total")), 200);
    TP_CHECK_INT(json_array_size(json_object_get(page, "rows")), 5);
    TP_CHECK_NEAR(
        json_real_value(json_object_get(json_array_get(json_object_get(page, "rows"), 0), "value")),
        0.4, 1e-9);
    json_decref(page);
    tp_web_trials_q_t filtered = {.text = "\"a\"", .limit = 500};
    page = tp__web_trials(s, &filtered, &err);
    size_t n_a = 0;
    for (int k = 0; k < 200; k++)
        n_a += (k * 7919) % 3 == 0;
    TP_CHECK_INT(json_integer_value(json_object_get(page, "matched")), (long long)n_a);
    json_decref(page);
    /* By a parameter's column, descending, and within a range of it (both ends kept). */
    tp_web_trials_q_t by_lr = {.sort = "p:lr", .desc = 1, .limit = 3};
    page = tp__web_trials(s, &by_lr, &err);
    TP_CHECK_NEAR(
        json_real_value(json_object_get(
            json_object_get(json_array_get(json_object_get(page, "rows"), 0), "params"), "lr")),
        0.04, 1e-12);
    json_decref(page);
    tp_web_trials_q_t ranged = {.nranges = 1, .limit = 500};
    ranged.ranges[0] = (tp_web_range_t){.key = "p:lr", .lo = 0.01, .hi = 0.02};
    page = tp__web_trials(s, &ranged, &err);
    TP_CHECK_INT(json_integer_value(json_object_get(page, "matched")), 11 * 5); /* lr 0.010-0.020 */
    json_decref(page);
    /* A range holds numbers only: a choice's text is in none. */
    ranged.ranges[0] = (tp_web_range_t){.key = "p:noise", .lo = 0, .hi = NAN};
    page = tp__web_trials(s, &ranged, &err);
    TP_CHECK_INT(json_integer_value(json_object_get(page, "matched")), 0);
    json_decref(page);
    /* A column that is none, or a name that would leave its JSON path, is refused. */
    tp_web_trials_q_t bad = {.sort = "p:lr\"]"};
    TP_CHECK(tp__web_trials(s, &bad, &err) == NULL);
    TP_CHECK(strstr(err.msg, "no column") != NULL);
    bad.sort = "lr";
    TP_CHECK(tp__web_trials(s, &bad, &err) == NULL);
    /* Names are whitelisted against the experiment's: a parameter or a metric
     * no trial has is refused, and the error names the ones there are. */
    bad.sort = "p:momentum";
    TP_CHECK(tp__web_trials(s, &bad, &err) == NULL);
    TP_CHECK(strstr(err.msg, "no column \"p:momentum\"") != NULL);
    TP_CHECK(strstr(err.msg, "are lr, noise") != NULL);
    bad.sort = "m:accuracy";
    TP_CHECK(tp__web_trials(s, &bad, &err) == NULL);
    tp_web_trials_q_t bad_range = {.nranges = 1};
    bad_range.ranges[0] = (tp_web_range_t){.key = "p:lr2", .lo = 0, .hi = NAN};
    TP_CHECK(tp__web_trials(s, &bad_range, &err) == NULL);
    TP_CHECK(strstr(err.msg, "p:lr2") != NULL);
    /* The objective is a column even before any trial reports it. */
    tp_web_trials_q_t by_val = {.sort = "m:val", .limit = 1};
    page = tp__web_trials(s, &by_val, &err);
    TP_CHECK(page != NULL);
    json_decref(page);
    json_t *cols = tp__web_table_columns(s);
    TP_CHECK_INT(json_array_size(json_object_get(cols, "params")), 2);
    TP_CHECK_STR(json_string_value(json_array_get(json_object_get(cols, "objectives"), 0)), "val");
    json_decref(cols);
    tp__store_close(s);
    char cmd[256];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    TP_CHECK(system(cmd) == 0);
    free(dir);
}

/* A store of finished trials with the given objectives (meta) and last
 * reports; state NULL: added and never ended (pending). */
typedef struct mo_trial {
    const char *state, *metrics;
} mo_trial_t;
static char *store_with_objectives(const char *objectives, const mo_trial_t *t, size_t n,
                                   tp_store_t **out) {
    char tmpl[] = "/tmp/tp-web-XXXXXX";
    char *dir = mkdtemp(tmpl) ? strdup(tmpl) : NULL;
    tp_error_t err = {0};
    if (!dir || tp__store_open(dir, TP_STORE_WRITE, out, &err) != 0) return NULL;
    tp__store_begin(*out);
    tp__store_meta_set(*out, "metric", "acc");
    tp__store_meta_set(*out, "mode", "max");
    tp__store_meta_set(*out, "objectives", objectives);
    for (size_t i = 0; i < n; i++) {
        tp__store_trial_add(*out, (int64_t)i, "{}", 1.0);
        if (!t[i].state) continue;
        tp_trial_end_t end = {.state = t[i].state,
                              .attempt = 1,
                              .has_value = 1,
                              .value = 0,
                              .best = 0,
                              .step = TP_STORE_NO_STEP,
                              .metrics = t[i].metrics,
                              .at = 2.0};
        tp__store_trial_end(*out, (int64_t)i, &end);
    }
    tp__store_commit(*out);
    return dir;
}

/* Closes and removes the store; 0 when it is gone. */
static int remove_store(tp_store_t *s, char *dir) {
    tp__store_close(s);
    char cmd[256];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    free(dir);
    return system(cmd);
}

/* The points of the first polyline of class c, as pixel pairs. */
static size_t polyline_points(const char *svg, const char *c, double *xy, size_t max) {
    char want[64];
    snprintf(want, sizeof want, "<polyline class=\"%s\"", c);
    const char *p = strstr(svg, want);
    if (!p || !(p = strstr(p, "points=\""))) return 0;
    p += 8;
    size_t n = 0;
    for (int used = 0; n < max && sscanf(p, "%lf,%lf %n", &xy[2 * n], &xy[2 * n + 1], &used) == 2;
         p += used)
        n++;
    return n;
}

/* The brushed set (a range, a set of a choice's values) filters the table
 * and every chart of the trials in SQL: the importance is grown on it alone,
 * and says so when too few trials remain; the history and the curves draw
 * only its trials; a plot of an empty set is empty, not an error. */
TP_TEST(test_a_brush_filters_the_table_and_every_chart_of_the_trials) {
    tp_store_t *s = NULL;
    char *dir = store_with_known_importance(&s);
    TP_REQUIRE(dir != NULL);
    size_t n_a = 0;
    for (int k = 0; k < 200; k++)
        n_a += (k * 7919) % 3 == 0;
    tp_error_t err = {0};
    tp_web_trials_q_t a = {.nranges = 1, .limit = 500};
    a.ranges[0] = (tp_web_range_t){.key = "p:noise", .lo = NAN, .hi = NAN, .in = "[\"a\"]"};
    json_t *page = tp__web_trials(s, &a, &err);
    TP_REQUIRE(page != NULL);
    TP_CHECK_INT(json_integer_value(json_object_get(page, "matched")), (long long)n_a);
    size_t i;
    json_t *row;
    json_array_foreach(json_object_get(page, "rows"), i, row) {
        TP_CHECK_STR(json_string_value(json_object_get(json_object_get(row, "params"), "noise")),
                     "a");
    }
    json_decref(page);
    /* Both choices: every trial; with a range on another column: both hold. */
    tp_web_trials_q_t ab = {.nranges = 2, .limit = 1};
    ab.ranges[0] = (tp_web_range_t){.key = "p:noise", .lo = NAN, .hi = NAN, .in = "[\"b\",\"a\"]"};
    ab.ranges[1] = (tp_web_range_t){.key = "p:lr", .lo = 0.0205, .hi = NAN};
    page = tp__web_trials(s, &ab, &err);
    TP_CHECK_INT(json_integer_value(json_object_get(page, "matched")), 100);
    json_decref(page);
    /* A set is a parameter's; a set on a column that is none is refused. */
    tp_web_trials_q_t bad = {.nranges = 1};
    bad.ranges[0] = (tp_web_range_t){.key = "state", .lo = NAN, .hi = NAN, .in = "[\"a\"]"};
    TP_CHECK(tp__web_trials(s, &bad, &err) == NULL);
    TP_CHECK(strstr(err.msg, "in.p:NAME") != NULL);
    bad.ranges[0].key = "p:momentum";
    TP_CHECK(tp__web_importance(s, &bad, &err) == NULL);
    TP_CHECK(strstr(err.msg, "p:momentum") && strstr(err.msg, "lr, noise"));
    tp_buf_t b;
    tp__buf_init(&b);
    TP_CHECK_INT(tp__web_svg_history(s, &bad, &b, &err), -EINVAL);
    TP_CHECK_INT(tp__web_svg_curves(s, NULL, 0, &bad, &b, &err), -EINVAL);
    TP_CHECK_INT(tp__web_svg_contour(s, "lr", "noise", &bad, &b, &err), -EINVAL);
    tp__buf_free(&b);
    /* The importance of the brushed set alone: its trials, lr still decides. */
    json_t *o = tp__web_importance(s, &a, &err);
    TP_REQUIRE(o != NULL);
    TP_CHECK_INT(json_integer_value(json_object_get(o, "trials")), (long long)n_a);
    TP_CHECK(json_is_true(json_object_get(o, "brushed")));
    json_t *top = json_array_get(json_object_get(o, "params"), 0);
    TP_CHECK_STR(json_string_value(json_object_get(top, "name")), "lr");
    json_decref(o);
    /* Too few left (lr = 0.001: 5 trials): no importance, and a note that says why. */
    tp_web_trials_q_t few = {.nranges = 1};
    few.ranges[0] = (tp_web_range_t){.key = "p:lr", .lo = NAN, .hi = 0.0015};
    o = tp__web_importance(s, &few, &err);
    TP_REQUIRE(o != NULL);
    TP_CHECK_INT(json_integer_value(json_object_get(o, "trials")), 5);
    TP_CHECK_INT(json_array_size(json_object_get(o, "params")), 0);
    TP_CHECK(
        strstr(json_string_value(json_object_get(o, "note")),
               "only 5 trials with a value in the brushed set: importance needs at least 10") !=
        NULL);
    json_decref(o);
    tp__buf_init(&b);
    TP_CHECK_INT(tp__web_svg_importance(s, &few, &b, &err), 0);
    TP_CHECK(strstr(b.data, "importance needs at least 10") != NULL);
    TP_CHECK_INT(count(b.data, "<rect"), 1); /* the background, no bar */
    tp__buf_free(&b);
    /* History and curves: only the brushed set's trials. */
    tp__buf_init(&b);
    TP_CHECK_INT(tp__web_svg_history(s, &a, &b, &err), 0);
    char want[80];
    snprintf(want, sizeof want, "%zu trials with a value in the brushed set", n_a);
    TP_CHECK(strstr(b.data, want) != NULL);
    TP_CHECK(count(b.data, "<circle") == n_a);
    tp__buf_free(&b);
    tp__buf_init(&b);
    TP_CHECK_INT(tp__web_svg_curves(s, NULL, 0, &a, &b, &err), 0);
    TP_CHECK(strstr(b.data, "the ten best and the latest running trials in the brushed set"));
    size_t curves = 0;
    for (const char *p = b.data; (p = strstr(p, "<title>trial ")) != NULL; p++) {
        int id = atoi(p + 13);
        TP_CHECK((id * 7919) % 3 == 0);
        curves++;
    }
    TP_CHECK_INT(curves, 10);
    tp__buf_free(&b);
    /* A brushed set with no trial: the slice and contour say so, no error. */
    tp_web_trials_q_t none = {.nranges = 1};
    none.ranges[0] = (tp_web_range_t){.key = "value", .lo = 100, .hi = NAN};
    tp__buf_init(&b);
    TP_CHECK_INT(tp__web_svg_slice(s, "lr", &none, &b, &err), 0);
    TP_CHECK(strstr(b.data, "0 trials with a value in the brushed set") != NULL);
    tp__buf_free(&b);
    tp__buf_init(&b);
    TP_CHECK_INT(tp__web_svg_contour(s, "noise", "lr", &none, &b, &err), 0);
    TP_CHECK_INT(count(b.data, "class=\"cell\""), 0);
    TP_CHECK_INT(tp__web_svg_slice(s, "momentum", &none, &b, &err), -EINVAL);
    TP_CHECK(strstr(err.msg, "lr, noise") != NULL);
    tp__buf_free(&b);
    /* Parallel coordinates: the choice's axis is brushable, its labels listed. */
    tp__buf_init(&b);
    tp__web_svg_parcoords(s, &b);
    TP_CHECK(strstr(b.data, "data-key=\"p:noise\" data-cats=\"[&quot;") != NULL);
    tp__buf_free(&b);
    tp__store_close(s);
    char cmd[256];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    TP_CHECK(system(cmd) == 0);
    free(dir);
}

/* acc is maximized and cost minimized: the front is the trials no other
 * finished one beats in both, worked out by hand below; a failed trial, an
 * unfinished one and one without cost are no points. */
TP_TEST(test_front_is_the_nondominated_set_with_min_and_max_mixed) {
    const mo_trial_t t[] = {
        {"completed", "{\"acc\": 0.9, \"cost\": 5}"}, /* 0: front */
        {"completed", "{\"acc\": 0.8, \"cost\": 3}"}, /* 1: front */
        {"completed", "{\"acc\": 0.7, \"cost\": 3}"}, /* 2: 1 beats it */
        {"completed", "{\"acc\": 0.6, \"cost\": 1}"}, /* 3: front */
        {"completed", "{\"acc\": 0.9, \"cost\": 6}"}, /* 4: 0 beats it */
        {"completed",
         "{\"acc\": 0.5, \"cost\": 1}"}, /* 5: 3 beats it (on the front were acc min) */
        {"completed", "{\"acc\": 0.95, \"cost\": 9}"}, /* 6: front */
        {"failed", "{\"acc\": 0.99, \"cost\": 0.1}"},  /* 7: failed: no point */
        {"completed", "{\"acc\": 0.99}"},              /* 8: no cost: no point */
        {"stopped", "{\"acc\": 0.8, \"cost\": 3}"},    /* 9: equal to 1: front too */
        {NULL, NULL},                                  /* 10: pending */
    };
    tp_store_t *s = NULL;
    char *dir = store_with_objectives(
        "[{\"name\": \"acc\", \"mode\": \"max\"}, {\"name\": \"cost\", \"mode\": \"min\"}]", t,
        TP_ARRAY_LEN(t), &s);
    TP_REQUIRE(dir != NULL);
    json_t *o = tp__web_front(s, 0);
    TP_REQUIRE(o != NULL);
    TP_CHECK_INT(json_integer_value(json_object_get(o, "finished")), 8);
    TP_CHECK_INT(json_integer_value(json_object_get(o, "infeasible")), 0);
    TP_CHECK_INT(json_integer_value(json_object_get(o, "on_front")), 5);
    const long long want[] = {6, 0, 1, 9, 3}; /* by acc, the larger first, then by id */
    json_t *front = json_object_get(o, "front");
    TP_REQUIRE(json_array_size(front) == TP_ARRAY_LEN(want));
    for (size_t i = 0; i < TP_ARRAY_LEN(want); i++)
        TP_CHECK_INT(json_integer_value(json_object_get(json_array_get(front, i), "trial")),
                     want[i]);
    TP_CHECK_NEAR(json_real_value(
                      json_object_get(json_object_get(json_array_get(front, 0), "values"), "cost")),
                  9, 1e-12);
    json_decref(o);
    o = tp__web_front(s, 2); /* the first two alone, and how many there are */
    TP_CHECK_INT(json_array_size(json_object_get(o, "front")), 2);
    TP_CHECK_INT(json_integer_value(json_object_get(o, "on_front")), 5);
    json_decref(o);
    tp_buf_t b;
    tp__buf_init(&b);
    TP_REQUIRE(tp__web_svg_front(s, "#/e/0/trial/", &b) == 1);
    TP_CHECK_INT(count(b.data, "class=\"front\""), 5);
    TP_CHECK_INT(count(b.data, "class=\"dominated\""), 3);
    TP_CHECK_INT(count(b.data, "class=\"infeasible\""), 0);
    TP_CHECK(strstr(b.data, "<a href=\"#/e/0/trial/6\" class=\"front\" data-trial=\"6\">") != NULL);
    TP_CHECK(strstr(b.data, "<title>trial 6: acc=0.95 cost=9 (on the Pareto front)</title>") !=
             NULL);
    TP_CHECK(strstr(b.data, "data-trial=\"2\"") != NULL);
    TP_CHECK(strstr(b.data, "data-trial=\"7\"") == NULL);
    TP_CHECK(strstr(b.data, "data-trial=\"8\"") == NULL);
    TP_CHECK(strstr(b.data, "data-trial=\"10\"") == NULL);
    TP_CHECK(strstr(b.data, ">acc (max)<") != NULL && strstr(b.data, ">cost (min)<") != NULL);
    /* The line: the five points by acc (3, 1, 9, 0, 6) and between two the
     * corner worse in both: the smaller acc (the left one's x) and the larger
     * cost (the right one's y, higher on the axis). */
    double xy[40];
    size_t n = polyline_points(b.data, "front-line", xy, 20);
    TP_REQUIRE(n == 9);
    for (size_t k = 1; k < n; k += 2) {
        TP_CHECK_NEAR(xy[2 * k], xy[2 * (k - 1)], 1e-9);
        TP_CHECK_NEAR(xy[2 * k + 1], xy[2 * (k + 1) + 1], 1e-9);
    }
    for (size_t k = 2; k < n; k += 2) /* acc rises, cost rises (y falls) */
        TP_CHECK(xy[2 * k] >= xy[2 * (k - 2)] && xy[2 * k + 1] <= xy[2 * (k - 2) + 1]);
    tp__buf_free(&b);
    TP_CHECK_INT(remove_store(s, dir), 0);
}

/* Three objectives: a plot for each pair, the front's points in each; no
 * line (a front of three is no front of two). One objective: no front. */
TP_TEST(test_front_of_three_objectives_is_drawn_per_pair_and_one_objective_has_none) {
    const mo_trial_t t[] = {
        {"completed", "{\"a\": 1, \"b\": 2, \"c\": 3}"}, /* front */
        {"completed", "{\"a\": 2, \"b\": 1, \"c\": 3}"}, /* front */
        {"completed", "{\"a\": 3, \"b\": 3, \"c\": 3}"}, /* 0 beats it */
        {"completed", "{\"a\": 0, \"b\": 5, \"c\": 5}"}, /* front */
    };
    tp_store_t *s = NULL;
    char *dir = store_with_objectives("[{\"name\": \"a\", \"mode\": \"min\"}, {\"name\": \"b\", "
                                      "\"mode\": \"min\"}, {\"name\": \"c\", \"mode\": \"min\"}]",
                                      t, TP_ARRAY_LEN(t), &s);
    TP_REQUIRE(dir != NULL);
    tp_buf_t b;
    tp__buf_init(&b);
    TP_REQUIRE(tp__web_svg_front(s, "#/e/1/trial/", &b) == 1);
    TP_CHECK_INT(count(b.data, "class=\"front\""), 3 * 3);
    TP_CHECK_INT(count(b.data, "class=\"dominated\" data-trial=\"2\""), 3);
    TP_CHECK(strstr(b.data, "front-line") == NULL);
    tp__buf_free(&b);
    TP_CHECK_INT(remove_store(s, dir), 0);
    const mo_trial_t one[] = {{"completed", "{\"acc\": 0.5}"}};
    dir = store_with_objectives("[{\"name\": \"acc\", \"mode\": \"max\"}]", one, 1, &s);
    TP_REQUIRE(dir != NULL);
    TP_CHECK(tp__web_front(s, 0) == NULL);
    tp__buf_init(&b);
    TP_CHECK_INT(tp__web_svg_front(s, "#/e/0/trial/", &b), 0);
    tp__buf_free(&b);
    TP_CHECK_INT(remove_store(s, dir), 0);
}

/* The chart marks a trial its caller calls infeasible (the constraints'
 * hook: none exist yet) apart, and escapes the names it is given. */
TP_TEST(test_front_chart_marks_infeasible_trials_apart) {
    const char *names[] = {"a<1>", "b"};
    const int maximize[] = {0, 1};
    const double v[] = {1, 1, 2, 2, 0, 3};
    const long long id[] = {4, 5, 6};
    const unsigned char on[] = {0, 1, 0}, feasible[] = {1, 1, 0};
    tp_front_chart_t p = {.title = "t",
                          .m = 2,
                          .name = names,
                          .maximize = maximize,
                          .n = 3,
                          .v = v,
                          .id = id,
                          .on_front = on,
                          .feasible = feasible,
                          .href_prefix = NULL};
    tp_buf_t b;
    tp__buf_init(&b);
    tp__chart_front(&b, &p);
    TP_REQUIRE(b.data != NULL);
    TP_CHECK_INT(count(b.data, "class=\"infeasible\" data-trial=\"6\""), 1);
    TP_CHECK_INT(count(b.data, "class=\"front\" data-trial=\"5\""), 1);
    TP_CHECK_INT(count(b.data, "class=\"dominated\" data-trial=\"4\""), 1);
    TP_CHECK(strstr(b.data, "infeasible (breaks a constraint") != NULL);
    TP_CHECK(strstr(b.data, "<a ") == NULL); /* no links without a prefix */
    TP_CHECK(strstr(b.data, "a&lt;1&gt; (min)") != NULL && strstr(b.data, "a<1>") == NULL);
    tp__buf_free(&b);
}

/* Under constraints (meta "constraints") the front holds feasible trials only: one past a
 * bound and one that never reported the constrained metric are counted infeasible, and a
 * trial they dominated is on the front. */
TP_TEST(test_front_leaves_infeasible_trials_off_and_counts_them) {
    const mo_trial_t t[] = {
        {"completed", "{\"acc\": 0.9, \"cost\": 5, \"mem\": 4}"},  /* 0: front */
        {"completed", "{\"acc\": 0.95, \"cost\": 4, \"mem\": 9}"}, /* 1: infeasible */
        {"completed", "{\"acc\": 0.99, \"cost\": 1}"},             /* 2: no mem: infeasible */
        {"completed", "{\"acc\": 0.8, \"cost\": 3, \"mem\": 5}"},  /* 3: front (bound held) */
    };
    tp_store_t *s = NULL;
    char *dir = store_with_objectives(
        "[{\"name\": \"acc\", \"mode\": \"max\"}, {\"name\": \"cost\", \"mode\": \"min\"}]", t,
        TP_ARRAY_LEN(t), &s);
    TP_REQUIRE(dir != NULL);
    TP_CHECK_INT(tp__store_meta_set(s, "constraints", "[{\"metric\": \"mem\", \"max\": 5}]"), 0);
    json_t *o = tp__web_front(s, 0);
    TP_REQUIRE(o != NULL);
    TP_CHECK_INT(json_integer_value(json_object_get(o, "finished")), 4);
    TP_CHECK_INT(json_integer_value(json_object_get(o, "infeasible")), 2);
    TP_CHECK_INT(json_integer_value(json_object_get(o, "on_front")), 2);
    json_t *front = json_object_get(o, "front");
    TP_REQUIRE(json_array_size(front) == 2);
    int64_t ids[2];
    for (size_t i = 0; i < 2; i++)
        ids[i] = json_integer_value(json_object_get(json_array_get(front, i), "trial"));
    TP_CHECK((ids[0] == 0 && ids[1] == 3) || (ids[0] == 3 && ids[1] == 0));
    json_decref(o);
    o = tp__web_summary(s, dir, 0, NULL); /* the front page says how many broke one */
    json_t *f = json_object_get(o, "feasibility");
    TP_CHECK_INT(json_integer_value(json_object_get(f, "finished")), 4);
    TP_CHECK_INT(json_integer_value(json_object_get(f, "infeasible")), 2);
    TP_CHECK_STR(json_string_value(json_object_get(
                     json_array_get(json_object_get(f, "constraints"), 0), "metric")),
                 "mem");
    json_decref(o);
    TP_CHECK_INT(remove_store(s, dir), 0);
}

/* The ids of a page of the trials table, as "0,3,1" (empty: none or refused). */
static void page_ids(tp_store_t *s, const tp_web_trials_q_t *q, char *out, size_t n) {
    tp_error_t err = {0};
    json_t *page = tp__web_trials(s, q, &err), *row;
    size_t i, len = 0;
    out[0] = 0;
    json_array_foreach(json_object_get(page, "rows"), i, row) {
        len += (size_t)snprintf(out + len, n - len, "%s%lld", i ? "," : "",
                                (long long)json_integer_value(json_object_get(row, "id")));
    }
    json_decref(page);
}

/* Under constraints the trials table sorts by feasibility (feasible first, then infeasible,
 * those not judged last, either way) and keeps one kind only, by the rule `best` uses (a
 * metric never reported is a broken constraint); a trial's page carries its standing; without
 * constraints, or with a word that is none, the sort and the filter are refused. */
TP_TEST(test_trials_table_sorts_and_filters_by_feasibility) {
    const mo_trial_t t[] = {
        {"completed", "{\"acc\": 0.9, \"mem\": 4}"},  /* 0: feasible */
        {"completed", "{\"acc\": 0.95, \"mem\": 9}"}, /* 1: infeasible */
        {"stopped", "{\"acc\": 0.99}"},               /* 2: never reported mem: infeasible */
        {NULL, NULL},                                 /* 3: pending: not judged */
        {"completed", "{\"acc\": 0.8, \"mem\": 5}"},  /* 4: feasible (the bound held) */
    };
    tp_store_t *s = NULL;
    char *dir = store_with_objectives("[]", t, TP_ARRAY_LEN(t), &s);
    TP_REQUIRE(dir != NULL);
    char ids[64];
    tp_error_t err = {0};
    tp_web_trials_q_t q = {.sort = "feasible", .limit = 10};
    TP_CHECK(tp__web_trials(s, &q, &err) == NULL); /* no constraints yet */
    TP_CHECK(strstr(err.msg, "no column \"feasible\": the experiment has no constraints") != NULL);
    TP_CHECK_INT(tp__store_meta_set(s, "constraints", "[{\"metric\": \"mem\", \"max\": 5}]"), 0);
    page_ids(s, &q, ids, sizeof ids);
    TP_CHECK_STR(ids, "0,4,1,2,3");
    q.desc = 1;
    page_ids(s, &q, ids, sizeof ids);
    TP_CHECK_STR(ids, "1,2,0,4,3");
    static const char *const want[][2] = {{"yes", "0,4"}, {"no", "1,2"}, {"unjudged", "3"}};
    for (size_t i = 0; i < TP_ARRAY_LEN(want); i++) {
        tp_web_trials_q_t only = {.feasible = want[i][0], .limit = 10};
        page_ids(s, &only, ids, sizeof ids);
        TP_CHECK_STR(ids, want[i][1]);
        json_t *page = tp__web_trials(s, &only, &err);
        TP_CHECK_INT(json_integer_value(json_object_get(page, "matched")),
                     (long long)(strlen(want[i][1]) + 1) / 2);
        TP_CHECK_INT(json_integer_value(json_object_get(page, "total")), 5);
        json_decref(page);
    }
    tp_web_trials_q_t maybe = {.feasible = "maybe"};
    TP_CHECK(tp__web_trials(s, &maybe, &err) == NULL);
    TP_CHECK(strstr(err.msg, "feasible=maybe: name yes") != NULL);
    tp_web_trials_q_t ranged = {.nranges = 1};
    ranged.ranges[0] = (tp_web_range_t){.key = "feasible", .lo = 1, .hi = NAN};
    TP_CHECK(tp__web_trials(s, &ranged, &err) == NULL);
    /* The trial's page: its standing, as its row has it. */
    json_t *o = tp__web_trial(s, 1);
    TP_REQUIRE(o != NULL);
    TP_CHECK(json_is_false(json_object_get(o, "feasible")));
    json_t *c = json_array_get(json_object_get(o, "constraints"), 0);
    TP_CHECK_NEAR(json_number_value(json_object_get(c, "value")), 9, 0);
    TP_CHECK_NEAR(json_number_value(json_object_get(c, "violation")), 4, 0);
    json_decref(o);
    o = tp__web_trial(s, 3);
    TP_CHECK(json_is_null(json_object_get(o, "feasible")));
    json_decref(o);
    TP_CHECK_INT(remove_store(s, dir), 0);
}

/* Scheduler pbt's lineage: trial 1 exploited trial 0 at step 2 and ran
 * steps 3-4 from its checkpoint (a new segment from 2); trial 0 has none. A lane per trial, an
 * arrow per exploit, its tooltip the changed parameter; a metric no trial reports is refused by
 * name. */
TP_TEST(test_lineage_splits_segments_at_exploits_and_draws_lanes_and_arrows) {
    const mo_trial_t t[] = {{"completed", "{\"score\": 4, \"lr\": 0.1}"},
                            {"completed", "{\"score\": 5, \"lr\": 0.2}"}};
    tp_store_t *s = NULL;
    char *dir = store_with_objectives("[]", t, 2, &s);
    TP_REQUIRE(dir != NULL);
    tp__store_begin(s);
    tp__store_meta_set(s, "metric", "score");
    static const int64_t steps[][4] = {{1, 2, 3, 4}, {1, 2, 3, 4}};
    for (int64_t tr = 0; tr < 2; tr++)
        for (int64_t k = 0; k < 4; k++) {
            char data[64];
            int len = snprintf(data, sizeof data, "{\"step\": %lld, \"score\": %lld}",
                               (long long)steps[tr][k], (long long)(steps[tr][k] + tr));
            tp__store_metric(s, tr, 1, k, steps[tr][k], (double)steps[tr][k], data, (size_t)len);
        }
    tp_decision_row_t d = {.at = 3,
                           .kind = "exploit",
                           .trial = 1,
                           .attempt = 1,
                           .rung = 1,
                           .ok = 1,
                           .detail = "{\"segment\": 1, \"donor\": 0, \"donor_step\": 2, "
                                     "\"old\": {\"lr\": 0.2}, \"new\": {\"lr\": 0.05}}"};
    tp__store_decision(s, &d);
    tp__store_commit(s);
    tp_error_t err = {0};
    json_t *o = tp__web_lineage(s, NULL, &err);
    TP_REQUIRE(o != NULL);
    json_t *lanes = json_object_get(o, "trials");
    TP_CHECK_INT(json_array_size(lanes), 2);
    json_t *segs = json_object_get(json_array_get(lanes, 1), "segments");
    TP_REQUIRE(json_array_size(segs) == 2);
    TP_CHECK_INT(json_array_size(json_object_get(json_array_get(segs, 0), "points")), 2);
    TP_CHECK(json_number_value(json_object_get(json_array_get(segs, 1), "from")) == 2);
    TP_CHECK_INT(json_array_size(json_object_get(json_array_get(segs, 1), "points")), 2);
    TP_CHECK_INT(json_array_size(json_object_get(json_array_get(lanes, 0), "segments")), 1);
    TP_CHECK(json_number_value(json_object_get(o, "max_step")) == 4);
    json_decref(o);
    tp_buf_t b;
    tp__buf_init(&b);
    TP_REQUIRE(tp__web_svg_lineage(s, NULL, &b, &err) == 0);
    TP_CHECK_INT(count(b.data, "<g class=\"lane\""), 2);
    TP_CHECK_INT(count(b.data, "<g class=\"exploit\" data-trial=\"1\" data-donor=\"0\">"), 1);
    TP_CHECK_INT(count(b.data, "class=\"piece\""), 4 + 2 + 2); /* from 0, and from 2 */
    TP_CHECK(strstr(b.data, "trial 1 copies trial 0 at step 2 (segment 1): lr 0.2 -&gt; 0.05") !=
             NULL);
    tp__buf_free(&b);
    o = tp__web_lineage(s, "lr", &err);
    TP_CHECK(o != NULL);
    json_decref(o);
    TP_CHECK(tp__web_lineage(s, "nonsense", &err) == NULL);
    TP_CHECK(strstr(err.msg, "nonsense") && strstr(err.msg, "lr, score"));
    TP_CHECK_INT(remove_store(s, dir), 0);
}

int main(void) {
    return tp_test_main();
}
