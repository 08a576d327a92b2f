/* libFuzzer harness: the placement-instance reader (`tunepack place`'s
 * JSON). A file it accepts is then placed by one fast policy, so that what
 * the reader lets through is also what the placers can take. */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>

#include "place/place.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    tp_place_instance_t inst;
    tp_error_t err;
    if (tp__place_instance_parse((const char *)data, size, "fuzz.json", &inst, &err) < 0) return 0;
    const tp_placer_ops_t *p = tp__placer_find("bfd");
    tp_usage_t u;
    tp__usage_init(&u, &inst.cluster);
    tp_assign_t *out = tp__xcalloc(inst.ntrials ? inst.ntrials : 1, sizeof *out);
    if (p->place(&inst.cluster, &u, inst.trials, inst.ntrials, out, &inst.effort, &err) == 0)
        free(tp__place_decision_json(&inst, p->name, out, tp__occupancy(&inst.cluster, &u), 0, NULL,
                                     -1));
    free(out);
    tp__usage_free(&u);
    tp__place_instance_free(&inst);
    return 0;
}
