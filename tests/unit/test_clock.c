/* run/clock: the run's clock is the real one unless TUNEPACK_TEST_CLOCK asks
 * for the virtual one, which moves only with stored reports and goes on from
 * the reports a resumed store holds; a bad value is refused. */
#include <errno.h>
#include <stdlib.h>

#include "run/clock.h"
#include "tp_test.h"

TP_TEST(test_unset_is_the_real_clock_and_reports_do_not_move_it) {
    unsetenv("TUNEPACK_TEST_CLOCK");
    tp_run_clock_t c;
    char why[160] = "";
    TP_CHECK_INT(tp__clock_init(&c, why, sizeof why), 0);
    TP_CHECK(!tp__clock_virtual(&c));
    tp__clock_start(&c, 1000.0, 7); /* nothing for the real clock */
    tp__clock_report(&c);
    TP_CHECK(!tp__clock_virtual(&c));
    TP_CHECK(tp__clock_wall(&c) > 1.6e9); /* the calendar's, not a count of reports */
}

TP_TEST(test_the_virtual_clock_moves_a_step_per_report_from_its_start) {
    setenv("TUNEPACK_TEST_CLOCK", "0.25", 1);
    tp_run_clock_t c;
    char why[160] = "";
    TP_CHECK_INT(tp__clock_init(&c, why, sizeof why), 0);
    TP_CHECK(tp__clock_virtual(&c));
    tp__clock_start(&c, 1000.0, 8); /* a resumed store with 8 reports */
    TP_CHECK_NEAR(tp__clock_wall(&c), 1002.0, 1e-9);
    TP_CHECK_NEAR(tp__clock_mono(&c), 2.0, 1e-9);
    TP_CHECK_NEAR(tp__clock_wall(&c), 1002.0, 1e-9); /* still: only reports move it */
    tp__clock_report(&c);
    tp__clock_report(&c);
    TP_CHECK_NEAR(tp__clock_wall(&c), 1002.5, 1e-9);
    TP_CHECK_NEAR(tp__clock_mono(&c), 2.5, 1e-9);
    unsetenv("TUNEPACK_TEST_CLOCK");
}

TP_TEST(test_a_value_that_is_no_positive_number_is_refused) {
    const char *bad[] = {"0", "-1", "fast", "0.1s", "nan", "inf"};
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        setenv("TUNEPACK_TEST_CLOCK", bad[i], 1);
        tp_run_clock_t c;
        char why[160] = "";
        TP_CHECK_INT(tp__clock_init(&c, why, sizeof why), -EINVAL);
        TP_CHECK_CONTAINS(why, "TUNEPACK_TEST_CLOCK");
        TP_CHECK(!tp__clock_virtual(&c));
    }
    unsetenv("TUNEPACK_TEST_CLOCK");
}

int main(void) {
    return tp_test_main();
}
