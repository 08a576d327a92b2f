/* Unit tests for logfile.c: an attempt's logs never write over an earlier one's. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "tp_test.h"
#include "util/util.h"

static char *get(const char *dir, const char *name) {
    char path[512], *text = NULL;
    snprintf(path, sizeof path, "%s/%s", dir, name);
    return tp__read_file(path, &text, NULL, NULL) == 0 ? text : NULL;
}

static void write_attempt(const char *dir, int64_t attempt, const char *text) {
    tp_logfile_t f;
    if (tp__logfile_open_attempt(&f, dir, "stderr", attempt, 0, NULL) != 0) return;
    tp__logfile_write(&f, text, strlen(text));
    tp__logfile_close(&f);
}

TP_TEST(test_each_attempt_keeps_the_logs_before_it) {
    char dir[] = "/tmp/tp-logfile-XXXXXX";
    TP_REQUIRE(mkdtemp(dir) != NULL);
    write_attempt(dir, 1, "one");
    write_attempt(dir, 2, "two");
    write_attempt(dir, 3, "three");
    char *a = get(dir, "stderr.1.log"), *b = get(dir, "stderr.2.log"), *c = get(dir, "stderr.log");
    TP_CHECK_STR(a, "one");
    TP_CHECK_STR(b, "two");
    TP_CHECK_STR(c, "three");
    free(a), free(b), free(c);
    /* A store that lost attempts 2 and 3 runs attempt 2 again: nothing is written over. */
    write_attempt(dir, 2, "two again");
    a = get(dir, "stderr.1.log"), b = get(dir, "stderr.2.log"), c = get(dir, "stderr.1.2.log");
    char *d = get(dir, "stderr.log");
    TP_CHECK_STR(a, "one");
    TP_CHECK_STR(b, "two");
    TP_CHECK_STR(c, "three"); /* the log found there, kept under the next free name */
    TP_CHECK_STR(d, "two again");
    free(a), free(b), free(c), free(d);
    /* An attempt 1 over a folder with a log (a store started afresh) keeps it as .0. */
    write_attempt(dir, 1, "first again");
    a = get(dir, "stderr.0.log"), b = get(dir, "stderr.log");
    TP_CHECK_STR(a, "two again");
    TP_CHECK_STR(b, "first again");
    free(a), free(b);
    char cmd[600];
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    TP_CHECK_INT(system(cmd), 0);
}

TP_TEST(test_an_attempt_that_never_opened_its_logs_takes_no_name) {
    char dir[] = "/tmp/tp-logfile-XXXXXX";
    TP_REQUIRE(mkdtemp(dir) != NULL);
    write_attempt(dir, 1, "one");
    write_attempt(dir, 2, "two");
    /* attempt 3 was journaled, then the run was killed before it opened its logs */
    write_attempt(dir, 4, "four");
    char *a = get(dir, "stderr.1.log"), *b = get(dir, "stderr.2.log"), *c = get(dir, "stderr.log");
    TP_CHECK_STR(a, "one");
    TP_CHECK_STR(b, "two");
    TP_CHECK_STR(c, "four");
    char *none = get(dir, "stderr.3.log");
    TP_CHECK(none == NULL);
    free(a), free(b), free(c), free(none);
    char cmd[600];
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    TP_CHECK_INT(system(cmd), 0);
}

int main(void) {
    return tp_test_main();
}
