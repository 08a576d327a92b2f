/* lineage: scheduler pbt's exploits read back from the journal (`exploit`
 * decisions, src/run/lineage.c) onto the trials that `trials` and `export`
 * show: each trial's segment, the trial its segment was copied from and at
 * which step, and in JSON the whole lineage. */
#include <stdio.h>
#include <string.h>

#include "cli/cli.h"

static int take_exploit(const tp_decision_row_t *d, void *ud) {
    if (strcmp(d->kind, "exploit") != 0) return 0;
    json_t *by = ud, *o = d->detail ? json_loads(d->detail, 0, NULL) : NULL;
    if (!json_is_object(o)) {
        json_decref(o);
        return 0;
    }
    char id[32];
    snprintf(id, sizeof id, "%lld", (long long)d->trial);
    json_t *list = json_object_get(by, id);
    if (!list) json_object_set_new(by, id, list = json_array());
    json_array_append_new(
        list, json_pack("{s:O?, s:O?, s:O?, s:O?}", "segment", json_object_get(o, "segment"),
                        "parent", json_object_get(o, "donor"), "parent_step",
                        json_object_get(o, "donor_step"), "params", json_object_get(o, "new")));
    json_decref(o);
    return 0;
}

/* A step as JSON: an integer when it is one (4, not 4.0). */
static json_t *step_json(const json_t *v) {
    double x = json_number_value(v);
    if (json_is_real(v) && x == (double)(json_int_t)x) return json_integer((json_int_t)x);
    return json_incref((json_t *)v);
}

/* See cli.h. */
int tp__cli_add_lineage(tp_store_t *s, json_t *trials) {
    json_t *by = json_object();
    tp__store_decisions(s, take_exploit, by);
    int any = json_object_size(by) > 0;
    size_t i;
    json_t *t;
    json_array_foreach(trials, i, t) {
        if (!any) break;
        char id[32];
        snprintf(id, sizeof id, "%lld", (long long)json_integer_value(json_object_get(t, "id")));
        json_t *list = json_object_get(by, id);
        json_t *last = json_array_get(list, json_array_size(list) - 1);
        json_object_set_new(t, "segment",
                            json_integer(json_integer_value(json_object_get(last, "segment"))));
        json_object_set_new(t, "parent",
                            last ? json_incref(json_object_get(last, "parent")) : json_null());
        json_object_set_new(t, "parent_step",
                            last ? step_json(json_object_get(last, "parent_step")) : json_null());
        size_t k;
        json_t *e;
        json_array_foreach(list, k, e)
            json_object_set_new(e, "parent_step", step_json(json_object_get(e, "parent_step")));
        json_object_set_new(t, "lineage", list ? json_incref(list) : json_array());
    }
    json_decref(by);
    return any;
}
