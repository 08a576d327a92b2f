/* Fused reporting, both sides: the C header's tp_report_config line is what the engine's
 * parser reads back with its configuration index; "drop <i>" lines on the control channel
 * reach tp_dropped() (and pause still reaches tp_should_pause()); bad indexes are refused. */
#define _POSIX_C_SOURCE 200809L
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <tunepack/report.h>

#include "run/run.h"
#include "tp_test.h"

TP_TEST(test_report_config_line_parses_back_with_its_index) {
    int p[2];
    TP_REQUIRE(pipe(p) == 0);
    char fd[16];
    snprintf(fd, sizeof fd, "%d", p[1]);
    setenv("TUNEPACK_REPORT_FD", fd, 1);
    TP_CHECK(tp_report_config(2, 3, "loss", 0.5, "acc", 0.75, NULL) == 0);
    TP_CHECK(tp_report(4, "loss", 0.25, NULL) == 0);
    unsetenv("TUNEPACK_REPORT_FD");
    close(p[1]);
    char buf[512];
    ssize_t n = read(p[0], buf, sizeof buf - 1);
    close(p[0]);
    TP_REQUIRE(n > 0);
    buf[n] = 0;
    char *nl = strchr(buf, '\n');
    TP_REQUIRE(nl != NULL);
    tp_report_t rep;
    char why[200];
    TP_CHECK(tp__report_parse_json(buf, (size_t)(nl - buf), "loss", &rep, why, sizeof why) == 0);
    TP_CHECK(rep.config == 2 && rep.step == 3 && rep.has_value && rep.value == 0.5);
    char *second = nl + 1;
    TP_CHECK(tp__report_parse_json(second, strlen(second) - 1, "loss", &rep, why, sizeof why) == 0);
    TP_CHECK(rep.config == -1 && rep.step == 4); /* tp_report: no index */
}

TP_TEST(test_bad_config_indexes_are_refused) {
    const char *bad[] = {"{\"config\": -1, \"loss\": 1}", "{\"config\": 1.5, \"loss\": 1}",
                         "{\"config\": \"2\", \"loss\": 1}", "{\"config\": 4096, \"loss\": 1}"};
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        tp_report_t rep;
        char why[200] = "";
        TP_CHECK(tp__report_parse_json(bad[i], strlen(bad[i]), "loss", &rep, why, sizeof why) ==
                 -1);
        TP_CHECK_CONTAINS(why, "config");
    }
}

TP_TEST(test_drop_lines_reach_tp_dropped_and_pause_still_works) {
    int p[2];
    TP_REQUIRE(pipe(p) == 0);
    char fd[16];
    snprintf(fd, sizeof fd, "%d", p[0]);
    setenv("TUNEPACK_CONTROL_FD", fd, 1);
    TP_CHECK(tp_dropped(5) == 0);
    const char *lines = "drop 5\ndrop x\ndrop 99999\nnoise\r\ndrop 0\r\n";
    TP_REQUIRE(write(p[1], lines, strlen(lines)) == (ssize_t)strlen(lines));
    TP_CHECK(tp_dropped(5) == 1);
    TP_CHECK(tp_dropped(0) == 1);
    TP_CHECK(tp_dropped(4) == 0);
    TP_CHECK(tp_dropped(-1) == 0 && tp_dropped(TP_CONFIG_MAX) == 0);
    TP_CHECK(tp_should_pause() == 0);
    TP_REQUIRE(write(p[1], "pause\n", 6) == 6);
    TP_CHECK(tp_should_pause() == 1);
    TP_CHECK(tp_dropped(5) == 1); /* sticky */
    unsetenv("TUNEPACK_CONTROL_FD");
    close(p[0]);
    close(p[1]);
}

int main(void) {
    return tp_test_main();
}
