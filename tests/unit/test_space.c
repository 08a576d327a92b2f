/* Unit tests for space: domain sampling bounds, grid enumeration, value text, checks. */
#include <errno.h>
#include <float.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "space/space.h"
#include "tp_test.h"

static tp_param_t mk(const char *name, tp_domain_kind kind, double lo, double hi) {
    tp_param_t p = {.name = tp__strdup(name), .kind = kind, .lo = lo, .hi = hi};
    return p;
}

static tp_param_t mk_values(const char *name, tp_domain_kind kind, const char *json_list) {
    tp_param_t p = {.name = tp__strdup(name), .kind = kind};
    json_t *a = json_loads(json_list, JSON_DECODE_ANY, NULL);
    p.nvalues = json_array_size(a);
    p.values = tp__xcalloc(p.nvalues ? p.nvalues : 1, sizeof *p.values);
    for (size_t i = 0; i < p.nvalues; i++)
        p.values[i] = json_incref(json_array_get(a, i));
    json_decref(a);
    return p;
}

static void add(tp_space_t *s, tp_param_t p) {
    tp__space_add(s, &p);
}

TP_TEST(test_every_domain_samples_inside_its_bounds) {
    tp_space_t s;
    tp__space_init(&s);
    add(&s, mk("u", TP_DOM_UNIFORM, -1, 2));
    add(&s, mk("lu", TP_DOM_LOGUNIFORM, 1e-4, 1));
    add(&s, mk("i", TP_DOM_INT, 1, 3));
    tp_param_t li = mk("li", TP_DOM_INT, 1, 1024);
    li.log = 1;
    add(&s, li);
    add(&s, mk("n", TP_DOM_NORMAL, 10, 2));
    add(&s, mk_values("c", TP_DOM_CHOICE, "[16, 32, \"big\"]"));
    add(&s, mk_values("k", TP_DOM_CONST, "[20]"));
    tp_rng_t r;
    tp__rng_seed(&r, 1, 0);
    int hit_lo = 0, hit_hi = 0, li_lo = 0, li_hi = 0, choice_hits[3] = {0};
    double nsum = 0, lu_min = 1, lu_max = 0;
    const int n = 20000;
    for (int t = 0; t < n; t++) {
        json_t *c = tp__space_sample(&s, &r);
        double u = json_real_value(json_object_get(c, "u"));
        TP_CHECK(json_is_real(json_object_get(c, "u")) && u >= -1 && u <= 2);
        double lu = json_real_value(json_object_get(c, "lu"));
        TP_CHECK(lu > 0 && lu >= 1e-4 && lu <= 1);
        lu_min = fmin(lu_min, lu), lu_max = fmax(lu_max, lu);
        json_t *iv = json_object_get(c, "i");
        TP_CHECK(json_is_integer(iv));
        long long i = json_integer_value(iv);
        TP_CHECK(i >= 1 && i <= 3);
        hit_lo += i == 1, hit_hi += i == 3;
        long long l = json_integer_value(json_object_get(c, "li"));
        TP_CHECK(json_is_integer(json_object_get(c, "li")) && l >= 1 && l <= 1024);
        li_lo += l == 1, li_hi += l == 1024;
        nsum += json_real_value(json_object_get(c, "n"));
        json_t *cv = json_object_get(c, "c");
        if (json_is_string(cv))
            choice_hits[2]++;
        else if (json_integer_value(cv) == 16)
            choice_hits[0]++;
        else if (json_integer_value(cv) == 32)
            choice_hits[1]++;
        TP_CHECK_INT(json_integer_value(json_object_get(c, "k")), 20);
        TP_CHECK_INT(json_object_size(c), 7);
        json_decref(c);
    }
    TP_CHECK(hit_lo > 0 && hit_hi > 0);
    TP_CHECK(li_lo > 0 && li_hi > 0);
    TP_CHECK(lu_min < 1e-3 && lu_max > 0.1); /* log scale reaches both decades */
    TP_CHECK_NEAR(nsum / n, 10, 0.1);
    for (int k = 0; k < 3; k++)
        TP_CHECK(choice_hits[k] > n / 4);
    tp__space_free(&s);
}

TP_TEST(test_quantized_domains_give_clean_multiples_inside_bounds) {
    tp_space_t s;
    tp__space_init(&s);
    tp_param_t u = mk("u", TP_DOM_UNIFORM, 0, 1);
    u.q = 0.1;
    add(&s, u);
    tp_param_t i = mk("i", TP_DOM_INT, 3, 50);
    i.q = 8;
    add(&s, i);
    tp_param_t lu = mk("lu", TP_DOM_LOGUNIFORM, 0.001, 10);
    lu.q = 0.5;
    add(&s, lu);
    tp_rng_t r;
    tp__rng_seed(&r, 2, 0);
    for (int t = 0; t < 5000; t++) {
        json_t *c = tp__space_sample(&s, &r);
        json_t *uv = json_object_get(c, "u");
        TP_CHECK(json_is_real(uv));
        double x = json_real_value(uv);
        TP_CHECK(x >= 0 && x <= 1);
        char txt[32];
        tp__value_text(uv, txt, sizeof txt);
        TP_CHECK(strlen(txt) <= 3); /* "0.3", never "0.30000000000000004" */
        long long iv = json_integer_value(json_object_get(c, "i"));
        TP_CHECK(iv % 8 == 0 && iv >= 8 && iv <= 48);
        double l = json_real_value(json_object_get(c, "lu"));
        TP_CHECK(l > 0 && l <= 10 && fmod(l, 0.5) == 0);
        json_decref(c);
    }
    tp__space_free(&s);
}

TP_TEST(test_grid_enumerates_every_point_exactly_once) {
    tp_space_t s;
    tp__space_init(&s);
    add(&s, mk_values("a", TP_DOM_GRID, "[\"x\", \"y\"]"));
    add(&s, mk("lr", TP_DOM_LOGUNIFORM, 1e-3, 1)); /* continuous: sampled */
    add(&s, mk("i", TP_DOM_INT, 1, 3));
    add(&s, mk_values("c", TP_DOM_CHOICE, "[10, 20]"));
    tp_param_t u = mk("u", TP_DOM_UNIFORM, 0, 1);
    u.q = 0.25;
    add(&s, u);
    add(&s, mk_values("k", TP_DOM_CONST, "[\"fixed\"]"));
    uint64_t g = tp__space_grid_size(&s);
    TP_CHECK_INT(g, 2 * 3 * 2 * 5);
    int seen[2][3][2][5] = {{{{0}}}};
    tp_rng_t r;
    tp__rng_seed(&r, 3, 0);
    for (uint64_t k = 0; k < g; k++) {
        json_t *c = tp__space_grid_point(&s, k, &r);
        int a = strcmp(json_string_value(json_object_get(c, "a")), "y") == 0;
        int i = (int)json_integer_value(json_object_get(c, "i")) - 1;
        int cc = json_integer_value(json_object_get(c, "c")) == 20;
        double uv = json_real_value(json_object_get(c, "u"));
        int ui = (int)(uv / 0.25);
        TP_CHECK(uv == ui * 0.25);
        double lr = json_real_value(json_object_get(c, "lr"));
        TP_CHECK(lr >= 1e-3 && lr <= 1);
        TP_CHECK_STR(json_string_value(json_object_get(c, "k")), "fixed");
        if (i >= 0 && i < 3 && ui >= 0 && ui < 5) seen[a][i][cc][ui]++;
        if (k == 0) TP_CHECK(a == 0 && i == 0 && cc == 0 && ui == 0);
        if (k == 1) TP_CHECK(a == 0 && i == 0 && cc == 0 && ui == 1); /* last varies fastest */
        if (k == g - 1) TP_CHECK(a == 1 && i == 2 && cc == 1 && ui == 4);
        json_decref(c);
    }
    for (int a = 0; a < 2; a++)
        for (int i = 0; i < 3; i++)
            for (int c = 0; c < 2; c++)
                for (int u2 = 0; u2 < 5; u2++)
                    TP_CHECK_INT(seen[a][i][c][u2], 1);
    tp__space_free(&s);
}

TP_TEST(test_grid_size_is_one_without_discrete_params_and_zero_past_2_pow_40) {
    tp_space_t s;
    tp__space_init(&s);
    TP_CHECK_INT(tp__space_grid_size(&s), 1);
    add(&s, mk("u", TP_DOM_UNIFORM, 0, 1));
    tp_param_t li = mk("li", TP_DOM_INT, 1, 100);
    li.log = 1;
    add(&s, li);
    add(&s, mk("big", TP_DOM_INT, 0, 1e9)); /* > 10000 values: sampled, not enumerated */
    TP_CHECK_INT(tp__space_grid_size(&s), 1);
    for (int k = 0; k < 5; k++)
        add(&s, mk("i", TP_DOM_INT, 1, 10000)); /* 10^20 points */
    TP_CHECK_INT(tp__space_grid_size(&s), 0);
    tp__space_free(&s);
}

TP_TEST(test_value_text_forms) {
    char b[64];
    json_t *v = json_integer(-42);
    TP_CHECK_INT(tp__value_text(v, b, sizeof b), 3);
    TP_CHECK_STR(b, "-42");
    json_decref(v);
    v = json_real(0.1);
    tp__value_text(v, b, sizeof b);
    TP_CHECK_STR(b, "0.1");
    json_decref(v);
    v = json_real(20.0);
    tp__value_text(v, b, sizeof b);
    TP_CHECK_STR(b, "20");
    json_decref(v);
    v = json_string("x; touch /tmp/owned");
    tp__value_text(v, b, sizeof b);
    TP_CHECK_STR(b, "x; touch /tmp/owned");
    TP_CHECK_INT(tp__value_text(v, b, 5), -ENOSPC);
    json_decref(v);
    tp__value_text(json_true(), b, sizeof b);
    TP_CHECK_STR(b, "true");
    tp__value_text(json_false(), b, sizeof b);
    TP_CHECK_STR(b, "false");
    tp__value_text(json_null(), b, sizeof b);
    TP_CHECK_STR(b, "null");
    v = json_pack("[i, s]", 1, "a");
    tp__value_text(v, b, sizeof b);
    TP_CHECK_STR(b, "[1,\"a\"]");
    json_decref(v);
}

TP_TEST(test_param_check_explains_bad_domains) {
    tp_error_t err = {0};
    tp_param_t p = mk("lr", TP_DOM_UNIFORM, 1, 0.1);
    TP_CHECK_INT(tp__param_check(&p, &err), -EINVAL);
    TP_CHECK_STR(err.msg, "range of \"lr\" is empty or inverted: [1, 0.1]; write [low, high] "
                          "with low < high");
    p.kind = TP_DOM_LOGUNIFORM;
    p.lo = 0;
    p.hi = 1;
    TP_CHECK_INT(tp__param_check(&p, &err), -EINVAL);
    TP_CHECK_STR(err.msg, "loguniform bound of \"lr\" must be > 0, got 0; use e.g. [1.0e-5, 1.0]");
    p.kind = TP_DOM_NORMAL;
    p.lo = 0;
    p.hi = -1;
    TP_CHECK_INT(tp__param_check(&p, &err), -EINVAL);
    TP_CHECK_CONTAINS(err.msg, "normal sigma of \"lr\" must be > 0");
    p.kind = TP_DOM_UNIFORM;
    p.lo = 0;
    p.hi = 1;
    p.q = -0.5;
    TP_CHECK_INT(tp__param_check(&p, &err), -EDOM); /* about q: said at q */
    TP_CHECK_CONTAINS(err.msg, "q of \"lr\" must be > 0");
    p.q = 0;
    TP_CHECK_INT(tp__param_check(&p, &err), 0);
    p.kind = TP_DOM_INT;
    p.lo = p.hi = 4; /* a single integer is a valid int range */
    TP_CHECK_INT(tp__param_check(&p, &err), 0);
    p.kind = TP_DOM_CHOICE;
    TP_CHECK_INT(tp__param_check(&p, &err), -EINVAL);
    TP_CHECK_STR(err.msg, "choice for \"lr\" is empty; list at least one value");
    free(p.name);
}

int main(void) {
    return tp_test_main();
}

/* Domains at the edges of what a double holds: each is refused at load time
 * (with the code that says where: -EINVAL the bounds, -EDOM the q), or every
 * value drawn from it is a finite number inside it: never inf, NaN, or a
 * parameter dropped from the configuration. */
TP_TEST(test_every_accepted_domain_samples_finite_values_and_the_rest_are_refused) {
    static const struct {
        tp_domain_kind kind;
        double lo, hi, q;
        int rc;           /* of tp__param_check */
        const char *says; /* in its message */
    } cases[] = {
        {TP_DOM_UNIFORM, -1.7e308, 1.7e308, 0, -EINVAL, "wider than a sample can span"},
        {TP_DOM_UNIFORM, -DBL_MAX, DBL_MAX, 0, -EINVAL, "overflow"},
        {TP_DOM_UNIFORM, 0, DBL_MAX / 32, 0, 0, NULL},
        {TP_DOM_UNIFORM, -DBL_MAX / 64, DBL_MAX / 64, 0, 0, NULL},
        {TP_DOM_NORMAL, 1.7e308, 1, 0, -EINVAL, "sigmas from the mean"},
        {TP_DOM_NORMAL, 0, 1e307, 0, -EINVAL, "sigmas from the mean"},
        {TP_DOM_NORMAL, 0, 1e305, 0, 0, NULL},
        {TP_DOM_LOGUNIFORM, 1e-320, DBL_MAX / 32, 0, 0, NULL},
        {TP_DOM_LOGUNIFORM, 1e-3, DBL_MAX, 0, -EINVAL, "overflow"},
        {TP_DOM_UNIFORM, 0, 1, 1e-320, -EDOM, "q >= "},
        {TP_DOM_UNIFORM, 0, 1, 1e-17, -EDOM, "finer than"},
        {TP_DOM_UNIFORM, 0, 1e-300, 1e-310, -EDOM, "q >= "},
        {TP_DOM_UNIFORM, 0, 1e-300, 1e-302, 0, NULL},
        {TP_DOM_UNIFORM, 0, 1, 1e-15, 0, NULL},
        {TP_DOM_UNIFORM, 1e300, 1e301, 1e290, 0, NULL},
        {TP_DOM_NORMAL, 0, 1, 1e-320, -EDOM, "q >= "},
        {TP_DOM_NORMAL, 0, 1, 0.5, 0, NULL},
        {TP_DOM_LOGUNIFORM, 1e-5, 1, 1e-20, -EDOM, "finer than"},
        {TP_DOM_LOGUNIFORM, 1e-5, 1, 1e-6, 0, NULL},
        {TP_DOM_UNIFORM, 1.7e308, 1.75e308, 0, -EINVAL, "from zero"},
        {TP_DOM_LOGUNIFORM, 1e-5, 1, 1e-320, -EDOM, "q >= "},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        tp_space_t s;
        tp__space_init(&s);
        tp_param_t p = mk("x", cases[i].kind, cases[i].lo, cases[i].hi);
        p.q = cases[i].q;
        tp_error_t err = {0};
        int rc = tp__param_check(&p, &err);
        if (rc != cases[i].rc) fprintf(stderr, "case %zu: %s\n", i, err.msg);
        TP_CHECK_INT(rc, cases[i].rc);
        if (cases[i].says) TP_CHECK_CONTAINS(err.msg, cases[i].says);
        add(&s, p);
        tp_rng_t r;
        tp__rng_seed(&r, 7, (uint64_t)i);
        int above_lo = 0; /* a quantized domain does not collapse onto one value */
        for (int t = 0; rc == 0 && t < 2000; t++) {
            json_t *c =
                t % 2 ? tp__space_sample(&s, &r) : tp__space_grid_point(&s, (uint64_t)t, &r);
            json_t *v = json_object_get(c, "x");
            TP_CHECK(json_is_number(v));
            double x = json_number_value(v);
            TP_CHECK(isfinite(x));
            if (cases[i].kind != TP_DOM_NORMAL) TP_CHECK(x >= cases[i].lo && x <= cases[i].hi);
            above_lo += x > cases[i].lo;
            json_decref(c);
        }
        if (rc == 0) TP_CHECK(above_lo > 500);
        tp__space_free(&s);
    }
}
