/* Unit tests for util: durations, sizes, did-you-mean, number text, buffers, array growth, RNG. */
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "tp_test.h"
#include "util/util.h"

TP_TEST(test_parse_duration_accepts_units_and_plain_seconds) {
    double s = 0;
    TP_CHECK_INT(tp__parse_duration("90", &s, NULL), 0);
    TP_CHECK_NEAR(s, 90, 1e-9);
    TP_CHECK_INT(tp__parse_duration("1.5", &s, NULL), 0);
    TP_CHECK_NEAR(s, 1.5, 1e-9);
    TP_CHECK_INT(tp__parse_duration("250ms", &s, NULL), 0);
    TP_CHECK_NEAR(s, 0.25, 1e-9);
    TP_CHECK_INT(tp__parse_duration("5m", &s, NULL), 0);
    TP_CHECK_NEAR(s, 300, 1e-9);
    TP_CHECK_INT(tp__parse_duration("1h30m", &s, NULL), 0);
    TP_CHECK_NEAR(s, 5400, 1e-9);
    TP_CHECK_INT(tp__parse_duration("2d", &s, NULL), 0);
    TP_CHECK_NEAR(s, 172800, 1e-9);
    TP_CHECK_INT(tp__parse_duration("1m30s", &s, NULL), 0);
    TP_CHECK_NEAR(s, 90, 1e-9);
}

TP_TEST(test_parse_duration_rejects_bad_forms_with_a_hint) {
    double s = 0;
    tp_error_t err = {0};
    TP_CHECK_INT(tp__parse_duration("5x", &s, &err), -EINVAL);
    TP_CHECK_STR(err.msg,
                 "\"5x\" is not a duration; write e.g. 30s, 5m, 1h30m or a number of seconds");
    TP_CHECK_INT(err.code, -EINVAL);
    TP_CHECK_INT(tp__parse_duration("", &s, NULL), -EINVAL);
    TP_CHECK_INT(tp__parse_duration("m", &s, NULL), -EINVAL);
    TP_CHECK_INT(tp__parse_duration("-5s", &s, NULL), -EINVAL);
    TP_CHECK_INT(tp__parse_duration("0", &s, NULL), -EINVAL);
    TP_CHECK_INT(tp__parse_duration("0s", &s, NULL), -EINVAL);
    TP_CHECK_INT(tp__parse_duration("inf", &s, NULL), -EINVAL);
    TP_CHECK_INT(tp__parse_duration("5 minutes", &s, NULL), -EINVAL);
}

TP_TEST(test_parse_duration_refuses_a_repeated_or_misordered_unit) {
    double s = 0;
    tp_error_t err = {0};
    TP_CHECK_INT(tp__parse_duration("1m1m", &s, &err), -EINVAL);
    TP_CHECK(strstr(err.msg, "each unit once, the largest first") != NULL);
    TP_CHECK_INT(tp__parse_duration("30s1m", &s, NULL), -EINVAL);
    TP_CHECK_INT(tp__parse_duration("1s500ms", &s, NULL), 0);
    TP_CHECK_NEAR(s, 1.5, 1e-9);
    TP_CHECK_INT(tp__parse_duration("1d2h3m4s5ms", &s, NULL), 0);
    TP_CHECK_NEAR(s, 93784.005, 1e-9);
}

TP_TEST(test_format_duration_picks_unit_by_magnitude) {
    char b[32];
    tp__format_duration(12.34, b, sizeof b);
    TP_CHECK_STR(b, "12.3s");
    tp__format_duration(185, b, sizeof b);
    TP_CHECK_STR(b, "3m05s");
    tp__format_duration(3720, b, sizeof b);
    TP_CHECK_STR(b, "1h02m");
}

TP_TEST(test_parse_size_uses_base_1024_suffixes) {
    uint64_t n = 0;
    TP_CHECK_INT(tp__parse_size("1024", &n, NULL), 0);
    TP_CHECK_INT(n, 1024);
    TP_CHECK_INT(tp__parse_size("64k", &n, NULL), 0);
    TP_CHECK_INT(n, 65536);
    TP_CHECK_INT(tp__parse_size("8M", &n, NULL), 0);
    TP_CHECK_INT(n, 8 << 20);
    TP_CHECK_INT(tp__parse_size("1G", &n, NULL), 0);
    TP_CHECK_INT(n, 1 << 30);
    TP_CHECK_INT(tp__parse_size("8MB", &n, NULL), 0);
    TP_CHECK_INT(n, 8 << 20);
    TP_CHECK_INT(tp__parse_size("2KiB", &n, NULL), 0);
    TP_CHECK_INT(n, 2048);
}

TP_TEST(test_parse_size_rejects_garbage_and_overflow) {
    uint64_t n = 0;
    tp_error_t err = {0};
    TP_CHECK_INT(tp__parse_size("8X", &n, &err), -EINVAL);
    TP_CHECK_CONTAINS(err.msg, "\"8X\" is not a size");
    TP_CHECK_INT(tp__parse_size("", &n, NULL), -EINVAL);
    TP_CHECK_INT(tp__parse_size("-1", &n, NULL), -EINVAL);
    TP_CHECK_INT(tp__parse_size("1.5M", &n, NULL), -EINVAL);
    TP_CHECK(tp__parse_size("99999999999999999999", &n, NULL) < 0);
    TP_CHECK(tp__parse_size("17179869184G", &n, NULL) < 0);
}

TP_TEST(test_edit_distance_counts_insertions_deletions_substitutions_and_swaps) {
    TP_CHECK_INT(tp__edit_distance("", ""), 0);
    TP_CHECK_INT(tp__edit_distance("abc", ""), 3);
    TP_CHECK_INT(tp__edit_distance("kitten", "sitting"), 3);
    TP_CHECK_INT(tp__edit_distance("concurency", "concurrency"), 1);
    TP_CHECK_INT(tp__edit_distance("slrum", "slurm"), 1);
    TP_CHECK_INT(tp__edit_distance("nmae", "name"), 1); /* a swap of neighbours is one edit */
    TP_CHECK_INT(tp__edit_distance("ab", "ba"), 1);
    TP_CHECK_INT(tp__edit_distance("abc", "ca"), 3);
}

TP_TEST(test_fmt_sig_prints_six_significant_digits) {
    static const struct {
        double v;
        const char *want;
    } cases[] = {
        {0.34405013522168104, "0.34405"},
        {1234.56789, "1234.57"},
        {20.0, "20"},
        {1e-7 / 3, "3.33333e-08"},
        {1234567.0, "1.23457e+06"},
        {-0.5, "-0.5"},
        {NAN, "nan"},
        {-NAN, "nan"},
        {INFINITY, "inf"},
        {-INFINITY, "-inf"},
    };
    char out[32];
    for (size_t i = 0; i < TP_ARRAY_LEN(cases); i++) {
        tp__fmt_sig(cases[i].v, out);
        TP_CHECK_STR(out, cases[i].want);
    }
}

TP_TEST(test_did_you_mean_suggests_only_close_candidates) {
    const char *const keys[] = {"name", "command", "metric", "concurrency", "retries"};
    TP_CHECK_STR(tp__did_you_mean("concurency", keys, 5), "concurrency");
    TP_CHECK_STR(tp__did_you_mean("comand", keys, 5), "command");
    TP_CHECK_STR(tp__did_you_mean("NAME", keys, 5), "name");
    TP_CHECK(tp__did_you_mean("zzzzzz", keys, 5) == NULL);
    TP_CHECK(tp__did_you_mean("x", keys, 5) == NULL);
    TP_CHECK(tp__did_you_mean("anything", keys, 0) == NULL);
    const char *const algos[] = {"grid", "random"};
    TP_CHECK_STR(tp__did_you_mean("rnd", algos, 2), "random"); /* abbreviation */
    const char *const params[] = {"lr", "momentum", "hidden", "trial_id", "trial_dir"};
    TP_CHECK_STR(tp__did_you_mean("lrate", params, 5), "lr"); /* lengthened name */
    TP_CHECK(tp__did_you_mean("epochs", params, 5) == NULL);
}

TP_TEST(test_fmt_double_is_shortest_round_trip) {
    char b[32];
    const double vals[] = {0.1, 1.0 / 3.0, 1e-4, 123456789.125, -2.5e300, 5e-324, 0.3};
    for (size_t i = 0; i < TP_ARRAY_LEN(vals); i++) {
        tp__fmt_double(vals[i], b);
        TP_CHECK(strtod(b, NULL) == vals[i]);
    }
    tp__fmt_double(0.1, b);
    TP_CHECK_STR(b, "0.1");
    tp__fmt_double(20.0, b);
    TP_CHECK_STR(b, "20");
    tp__fmt_double(1e-4, b);
    TP_CHECK_STR(b, "0.0001");
    tp__fmt_double(NAN, b);
    TP_CHECK_STR(b, "nan");
    tp__fmt_double(INFINITY, b);
    TP_CHECK_STR(b, "inf");
    tp__fmt_double(-INFINITY, b);
    TP_CHECK_STR(b, "-inf");
}

TP_TEST(test_errorf_fills_message_and_returns_code) {
    tp_error_t err = {0};
    TP_CHECK_INT(tp__errorf(&err, -ENOENT, "no %s", "file"), -ENOENT);
    TP_CHECK_INT(err.code, -ENOENT);
    TP_CHECK_STR(err.msg, "no file");
    TP_CHECK_INT(tp__errorf(NULL, -EINVAL, "ignored"), -EINVAL);
    char big[2000];
    memset(big, 'a', sizeof big - 1);
    big[sizeof big - 1] = '\0';
    tp__errorf(&err, -EINVAL, "%s", big);
    TP_CHECK_INT(strlen(err.msg), sizeof err.msg - 1);
}

TP_TEST(test_buf_append_printf_consume_and_steal) {
    tp_buf_t b;
    tp__buf_init(&b);
    TP_CHECK_INT(tp__buf_puts(&b, "hello"), 0);
    TP_CHECK_INT(tp__buf_printf(&b, ", %s %d", "world", 42), 0);
    TP_CHECK_STR(b.data, "hello, world 42");
    TP_CHECK_INT(b.len, 15);
    for (int i = 0; i < 1000; i++)
        tp__buf_append(&b, "x", 1);
    TP_CHECK_INT(b.len, 1015);
    TP_CHECK(b.cap > b.len);
    TP_CHECK_INT(b.data[b.len], '\0');
    tp__buf_consume(&b, 1007);
    TP_CHECK_STR(b.data, "xxxxxxxx");
    tp__buf_reset(&b);
    TP_CHECK_INT(b.len, 0);
    TP_CHECK_STR(b.data, "");
    tp__buf_puts(&b, "kept");
    char *s = tp__buf_steal(&b);
    TP_CHECK_STR(s, "kept");
    TP_CHECK(b.data == NULL && b.len == 0);
    free(s);
    s = tp__buf_steal(&b);
    TP_CHECK_STR(s, "");
    free(s);
    tp__buf_free(&b);
}

TP_TEST(test_rng_same_seed_and_stream_repeat_exactly) {
    tp_rng_t a, b;
    tp__rng_seed(&a, 42, 7);
    tp__rng_seed(&b, 42, 7);
    for (int i = 0; i < 1000; i++)
        TP_CHECK(tp__rng_next(&a) == tp__rng_next(&b));
}

TP_TEST(test_rng_streams_and_seeds_are_independent) {
    /* Neighbouring streams (and seeds) share no outputs and are uncorrelated. */
    tp_rng_t a, b, c;
    tp__rng_seed(&a, 1, 0);
    tp__rng_seed(&b, 1, 1);
    tp__rng_seed(&c, 2, 0);
    int same_ab = 0, same_ac = 0;
    double sab = 0, sa = 0, sb = 0, saa = 0, sbb = 0;
    const int n = 20000;
    for (int i = 0; i < n; i++) {
        uint64_t x = tp__rng_next(&a), y = tp__rng_next(&b), z = tp__rng_next(&c);
        same_ab += x == y;
        same_ac += x == z;
        double u = (double)(x >> 11) * 0x1.0p-53, v = (double)(y >> 11) * 0x1.0p-53;
        sa += u, sb += v, sab += u * v, saa += u * u, sbb += v * v;
    }
    TP_CHECK_INT(same_ab, 0);
    TP_CHECK_INT(same_ac, 0);
    double cov = sab / n - (sa / n) * (sb / n);
    double corr = cov / sqrt((saa / n - (sa / n) * (sa / n)) * (sbb / n - (sb / n) * (sb / n)));
    TP_CHECK(fabs(corr) < 0.05);
    /* seed s stream t must not equal seed t stream s (no symmetric mixing). */
    tp__rng_seed(&a, 3, 5);
    tp__rng_seed(&b, 5, 3);
    TP_CHECK(tp__rng_next(&a) != tp__rng_next(&b));
}

TP_TEST(test_rng_uniform_in_unit_interval_with_mean_half) {
    tp_rng_t r;
    tp__rng_seed(&r, 9, 0);
    double sum = 0;
    for (int i = 0; i < 100000; i++) {
        double u = tp__rng_uniform(&r);
        TP_CHECK(u >= 0 && u < 1);
        sum += u;
    }
    TP_CHECK_NEAR(sum / 100000, 0.5, 0.01);
}

TP_TEST(test_rng_below_stays_in_range_and_hits_every_value) {
    tp_rng_t r;
    tp__rng_seed(&r, 5, 3);
    int hits[7] = {0};
    for (int i = 0; i < 7000; i++) {
        uint64_t v = tp__rng_below(&r, 7);
        TP_CHECK(v < 7);
        if (v < 7) hits[v]++;
    }
    for (int i = 0; i < 7; i++)
        TP_CHECK(hits[i] > 800 && hits[i] < 1200);
    TP_CHECK_INT(tp__rng_below(&r, 1), 0);
    for (int i = 0; i < 100; i++)
        TP_CHECK(tp__rng_below(&r, UINT64_MAX) < UINT64_MAX);
}

TP_TEST(test_rng_normal_has_zero_mean_unit_variance) {
    tp_rng_t r;
    tp__rng_seed(&r, 11, 0);
    double s = 0, ss = 0;
    const int n = 100000;
    for (int i = 0; i < n; i++) {
        double x = tp__rng_normal(&r);
        TP_CHECK(isfinite(x));
        s += x, ss += x * x;
    }
    TP_CHECK_NEAR(s / n, 0, 0.02);
    TP_CHECK_NEAR(ss / n - (s / n) * (s / n), 1, 0.03);
}

TP_TEST(test_write_file_replaces_atomically_and_read_file_reads_back) {
    char dir[] = "/tmp/tp_test_util_XXXXXX";
    TP_CHECK(mkdtemp(dir) != NULL);
    char sub[256], path[300];
    snprintf(sub, sizeof sub, "%s/a/b/c", dir);
    TP_CHECK_INT(tp__mkdir_p(sub, NULL), 0);
    TP_CHECK_INT(tp__mkdir_p(sub, NULL), 0); /* existing is fine */
    struct stat st;
    TP_CHECK(stat(sub, &st) == 0 && S_ISDIR(st.st_mode));
    snprintf(path, sizeof path, "%s/f.txt", sub);
    TP_CHECK_INT(tp__write_file(path, "one", 3, NULL), 0);
    TP_CHECK_INT(tp__write_file(path, "second", 6, NULL), 0);
    char *text = NULL;
    size_t len = 0;
    TP_CHECK_INT(tp__read_file(path, &text, &len, NULL), 0);
    TP_CHECK_INT(len, 6);
    TP_CHECK_STR(text, "second");
    free(text);
    tp_error_t err = {0};
    snprintf(path, sizeof path, "%s/missing.yaml", dir);
    TP_CHECK_INT(tp__read_file(path, &text, &len, &err), -ENOENT);
    TP_CHECK_CONTAINS(err.msg, "cannot read ");
    TP_CHECK_CONTAINS(err.msg, "missing.yaml: No such file or directory");
    /* a file in the way of mkdir_p is an error */
    snprintf(path, sizeof path, "%s/a/b/c/f.txt", dir);
    TP_CHECK(tp__mkdir_p(path, NULL) < 0);
    unlink(path);
    char cmd[400];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    TP_CHECK_INT(system(cmd), 0);
}

TP_TEST(test_log_respects_level_from_environment) {
    char path[] = "/tmp/tp_test_log_XXXXXX";
    int fd = mkstemp(path);
    TP_CHECK(fd >= 0);
    fflush(stderr);
    int saved = dup(2);
    dup2(fd, 2);
    setenv("TUNEPACK_LOG", "warn", 1);
    tp__log(TP_LOG_INFO, "dropped %d", 1);
    tp__log(TP_LOG_WARN, "kept %d", 2);
    unsetenv("TUNEPACK_LOG");
    tp__log(TP_LOG_DEBUG, "dropped by default");
    tp__log(TP_LOG_INFO, "info by default");
    fflush(stderr);
    dup2(saved, 2);
    close(saved);
    close(fd);
    char *text = NULL;
    TP_CHECK_INT(tp__read_file(path, &text, NULL, NULL), 0);
    TP_CHECK_STR(text, "tunepack: warn: kept 2\ntunepack: info: info by default\n");
    free(text);
    unlink(path);
}

/* 1 when every byte of p[0..n) is zero. */
static int all_zero(const void *p, size_t n) {
    const unsigned char *b = p;
    for (size_t i = 0; i < n; i++)
        if (b[i]) return 0;
    return 1;
}

TP_TEST(test_xgrow_from_nothing_starts_at_min) {
    size_t cap = 0;
    int *v = tp__xgrow(NULL, &cap, 1, sizeof *v, 32);
    TP_REQUIRE(v != NULL);
    TP_CHECK_INT(cap, 32);
    TP_CHECK(all_zero(v, cap * sizeof *v));
    free(v);
}

TP_TEST(test_xgrow_with_min_zero_starts_at_one) {
    size_t cap = 0;
    int *v = tp__xgrow(NULL, &cap, 1, sizeof *v, 0);
    TP_REQUIRE(v != NULL);
    TP_CHECK_INT(cap, 1);
    v = tp__xgrow(v, &cap, 3, sizeof *v, 0);
    TP_CHECK_INT(cap, 4); /* 1 -> 2 -> 4 */
    free(v);
}

TP_TEST(test_xgrow_keeps_the_array_when_it_fits_exactly) {
    size_t cap = 0;
    int *v = tp__xgrow(NULL, &cap, 8, sizeof *v, 8);
    TP_REQUIRE(cap == 8);
    int *same = tp__xgrow(v, &cap, 8, sizeof *v, 8);
    TP_CHECK(same == v);
    TP_CHECK_INT(cap, 8);
    same = tp__xgrow(v, &cap, 0, sizeof *v, 8);
    TP_CHECK(same == v);
    TP_CHECK_INT(cap, 8);
    v = tp__xgrow(v, &cap, 9, sizeof *v, 8);
    TP_CHECK_INT(cap, 16);
    free(v);
}

TP_TEST(test_xgrow_jumps_by_doubling_past_a_large_need) {
    size_t cap = 0;
    long *v = tp__xgrow(NULL, &cap, 4, sizeof *v, 4);
    TP_REQUIRE(cap == 4);
    v = tp__xgrow(v, &cap, 1000, sizeof *v, 4);
    TP_CHECK_INT(cap, 1024); /* 4 doubled until >= 1000, not 1000 itself */
    v[999] = 7;              /* the whole of it is there (ASan would tell) */
    v[1023] = 7;
    free(v);
}

TP_TEST(test_xgrow_keeps_old_elements_and_zeroes_the_new_tail) {
    size_t cap = 0, n = 0;
    double *v = NULL;
    for (int i = 0; i < 100; i++) {
        v = tp__xgrow(v, &cap, n + 1, sizeof *v, 4);
        TP_REQUIRE(all_zero(v + n, (cap - n) * sizeof *v));
        v[n++] = i + 0.5;
    }
    TP_CHECK_INT(cap, 128);
    int kept = 1;
    for (size_t i = 0; i < n; i++)
        kept &= v[i] == (double)i + 0.5;
    TP_CHECK(kept);
    free(v);
}

TP_TEST(test_xresize_zeroes_only_what_it_adds) {
    unsigned char *p = tp__xresize(NULL, 0, 4, 3);
    memset(p, 0xab, 12);
    p = tp__xresize(p, 4, 10, 3);
    TP_CHECK(p[11] == 0xab);
    TP_CHECK(all_zero(p + 12, 18));
    free(p);
}

/* The exit of fn run in a child with its stderr silenced. */
static int status_of(void (*fn)(void)) {
    pid_t pid = fork();
    if (pid == 0) {
        int null = open("/dev/null", O_WRONLY);
        if (null >= 0) dup2(null, 2);
        fn();
        _exit(0);
    }
    int st = 0;
    waitpid(pid, &st, 0);
    return st;
}

static void grow_past_size_max(void) {
    size_t cap = 4;
    void *p = tp__xgrow(NULL, &cap, SIZE_MAX / 8 + 1, 16, 4);
    free(p);
}

TP_TEST(test_xgrow_aborts_when_the_bytes_would_not_fit_a_size_t) {
    int st = status_of(grow_past_size_max);
    TP_CHECK(WIFSIGNALED(st) && WTERMSIG(st) == SIGABRT);
}

int main(void) {
    return tp_test_main();
}
