/* libFuzzer harness: the report-line parsers, the JSON form (the report
 * channel) and the `name=value` form (stdout). The first byte picks the
 * objective's name from a few, the rest is the line. */
#include <stddef.h>
#include <stdint.h>

#include "run/run.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    static const char *const metrics[] = {"acc", "step", "val_loss", "a.b-c/d"};
    if (size == 0) return 0;
    const char *metric = metrics[data[0] % 4];
    const char *line = (const char *)data + 1;
    size_t len = size - 1;
    tp_report_t r;
    char why[256];
    tp__report_parse_json(line, len, metric, &r, why, sizeof why);
    tp_buf_t json;
    tp__buf_init(&json);
    tp__report_parse_kv(line, len, metric, &r, &json, why, sizeof why);
    tp__buf_free(&json);
    return 0;
}
