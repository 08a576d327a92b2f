/* Unit tests for bench/mf_table.c, the tabular benchmark bench/mf_search
 * replays: the file read as bench/search/lcbench_gen.py writes it, a
 * configuration snapped to the nearest tabulated one with log parameters
 * compared in log, errors looked up by seed and epoch, and malformed files
 * refused saying where. */
#include <stdlib.h>
#include <unistd.h>

#include "mf_table.h"
#include "tp_test.h"

/* Reads text as a table file into *t: mf_table_read's result (-1 when the file could
 * not be written); the file's path into path[64], the file removed. */
static int read_text(const char *text, mf_table_t *t, tp_error_t *err, char *path) {
    strcpy(path, "/tmp/tp-mf-table-XXXXXX");
    int fd = mkstemp(path);
    if (fd < 0) return -1;
    size_t n = strlen(text);
    int ok = write(fd, text, n) == (ssize_t)n;
    close(fd);
    int rc = ok ? mf_table_read(path, t, err) : -1;
    unlink(path);
    return rc;
}

/* Two datasets, three configurations (lr log in [1e-4, 1], width intlog in [8, 256]),
 * two seeds, three epochs. */
static const char *good = "# made by hand\n"
                          "# epochs 3\n"
                          "# param lr log 0.0001 1\n"
                          "# param width intlog 8 256\n"
                          "dataset\tconfig\tseed\tlr\twidth\te1\te2\te3\n"
                          "a\t0\t0\t0.0001\t16\t0.9\t0.8\t0.7\n"
                          "a\t0\t1\t0.0001\t16\t0.91\t0.81\t0.71\n"
                          "a\t1\t0\t0.01\t16\t0.5\t0.4\t0.3\n"
                          "a\t1\t1\t0.01\t16\t0.51\t0.41\t0.31\n"
                          "a\t2\t0\t0.01\t128\t0.6\t0.2\t0.1\n"
                          "a\t2\t1\t0.01\t128\t0.61\t0.21\t0.11\n"
                          "b\t0\t1\t0.1\t8\t0.3\t0.2\t0.1\n"
                          "b\t0\t0\t0.1\t8\t0.35\t0.25\t0.15\n";

TP_TEST(test_a_generated_table_reads_with_its_params_datasets_and_seeds) {
    char path[64];
    mf_table_t t;
    tp_error_t err = {0};
    int rc = read_text(good, &t, &err, path);
    if (rc) fprintf(stderr, "  %s\n", err.msg);
    TP_REQUIRE(rc == 0);
    TP_CHECK_INT(t.epochs, 3);
    TP_CHECK_INT(t.nseeds, 2);
    TP_CHECK_INT(t.nparams, 2);
    TP_CHECK_STR(t.params[0].name, "lr");
    TP_CHECK_INT(t.params[0].kind, MF_LOG);
    TP_CHECK_INT(t.params[1].kind, MF_INTLOG);
    TP_CHECK_INT(t.ndatasets, 2);
    TP_CHECK_STR(t.datasets[1].name, "b");
    TP_CHECK_INT(t.datasets[0].nconfigs, 3);
    TP_CHECK_INT(t.datasets[1].nconfigs, 1);
    TP_CHECK_NEAR(mf_table_error(&t, 0, 2, 1, 2), 0.21, 1e-6);
    TP_CHECK_NEAR(mf_table_error(&t, 1, 0, 0, 3), 0.15, 1e-6); /* rows in any order */
    TP_CHECK_NEAR(mf_table_error(&t, 0, 1, 0, 0), 0.5, 1e-6);  /* clamped to epoch 1 */
    TP_CHECK_NEAR(mf_table_error(&t, 0, 1, 0, 9), 0.3, 1e-6);  /* and to the last */
    mf_table_free(&t);
}

TP_TEST(test_nearest_compares_log_parameters_in_log) {
    char path[64];
    mf_table_t t;
    tp_error_t err = {0};
    TP_REQUIRE(read_text(good, &t, &err, path) == 0);
    /* lr 0.002: in log 0.33 of the way from 1e-4 to 1, nearer 0.01 (0.5) than 1e-4 (0);
     * on a linear scale it would be nearer 1e-4. */
    TP_CHECK_INT(mf_table_nearest(&t, 0, (double[]){0.002, 16}), 1);
    TP_CHECK_INT(mf_table_nearest(&t, 0, (double[]){0.0003, 16}), 0);
    /* width 60: in log 0.58 of the way from 8 to 256 (16 is 0.2, 128 is 0.8): config 2 */
    TP_CHECK_INT(mf_table_nearest(&t, 0, (double[]){0.01, 60}), 2);
    TP_CHECK_INT(mf_table_nearest(&t, 0, (double[]){0.01, 30}), 1);
    TP_CHECK_INT(mf_table_nearest(&t, 1, (double[]){0.0001, 256}), 0); /* its one config */
    mf_table_free(&t);
}

/* Reading text must fail with a message containing want. */
static void refused(int *tp_failed_, const char *text, const char *want) {
    char path[64];
    mf_table_t t;
    tp_error_t err = {0};
    TP_CHECK(read_text(text, &t, &err, path) < 0);
    TP_CHECK_CONTAINS(err.msg, want);
    TP_CHECK_CONTAINS(err.msg, path);
}

#define HEAD "# epochs 2\n# param x lin 0 1\ndataset\tconfig\tseed\tx\te1\te2\n"

TP_TEST(test_malformed_tables_are_refused_saying_where) {
    refused(tp_failed_, HEAD "a\t0\t0\t0.5\t0.3\n", ":4: 5 columns, the header row has 6");
    refused(tp_failed_, HEAD "a\t0\t0\t0.5\t0.3\t0.2\na\t0\t0\t0.5\t0.3\t0.2\n",
            ":5: dataset a, config 0, seed 0 again");
    refused(tp_failed_, HEAD "a\t0\t0\t0.5\t0.3\t0.2\na\t0\t1\t0.6\t0.3\t0.2\n",
            ":5: dataset a, config 0: x is 0.6 here, 0.5 in an earlier row");
    refused(tp_failed_, HEAD "a\t0\t0\t0.5\t0.3\t0.2\na\t1\t1\t0.6\t0.3\t0.2\n",
            "dataset a has no row for config 0, seed 1");
    refused(tp_failed_, HEAD "a\t0\t0\t0.5\t0.3\tnan\n", "error after epoch 2, 'nan'");
    refused(tp_failed_, "# epochs 2\n# param x sqrt 0 1\n", "kind 'sqrt' is not log");
    refused(tp_failed_, "# epochs 2\n# param x log 0 1\n", "range [0, 1] is empty or not positive");
    refused(tp_failed_, "# epochs 2\n# param x lin 0 1\ndataset\tconfig\tseed\ty\te1\te2\n",
            "header column 4 is 'y', expected 'x'");
    refused(tp_failed_, HEAD, "no data rows");
}

int main(void) {
    return tp_test_main();
}
