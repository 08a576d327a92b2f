/* libFuzzer harness: the experiment-file loader (YAML -> validated
 * experiment). Any input must give 0 or an error with a message; never a
 * crash, a leak or undefined behaviour. */
#include <stddef.h>
#include <stdint.h>

#include "config/config.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    tp_experiment_t x;
    tp_error_t err;
    if (tp__experiment_parse("fuzz.yaml", (const char *)data, size, &x, &err) == 0)
        tp__experiment_free(&x);
    return 0;
}
