/* common: helpers shared by the read-only verbs. */
#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cli.h"
#include "run/run.h"

int tp__cli_parse(const tp_cmd_t *cmd, int argc, char **argv, const tp_cli_opt_t *opts,
                  size_t nopts, const char **positional) {
    for (int i = 1; i < argc; i++)
        if (strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0) {
            fputs(cmd->usage, stdout);
            return TP_EXIT_OK;
        }
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (a[0] != '-' || a[1] == 0) {
            if (*positional)
                return tp__cli_usage_error(cmd, "unexpected argument \"%s\" (one is enough)", a);
            *positional = a;
            continue;
        }
        const tp_cli_opt_t *o = NULL;
        const char *inline_value = NULL;
        for (size_t k = 0; k < nopts && !o; k++) {
            size_t n = strlen(opts[k].name);
            if (strncmp(a, opts[k].name, n) != 0) continue;
            if (a[n] == 0) o = &opts[k];
            else if (a[n] == '=' && opts[k].value) o = &opts[k], inline_value = a + n + 1;
        }
        if (!o) return tp__cli_usage_error(cmd, "unknown option \"%s\"", a);
        if (o->set) {
            *o->set = 1;
        } else if (inline_value) {
            *o->value = inline_value;
        } else if (i + 1 < argc) {
            *o->value = argv[++i];
        } else {
            return tp__cli_usage_error(cmd, "%s needs a value", o->name);
        }
    }
    return TP_CLI_PARSED;
}

int tp__cli_usage_error(const tp_cmd_t *cmd, const char *fmt, ...) {
    va_list ap;
    fprintf(stderr, "tunepack %s: ", cmd->name);
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fprintf(stderr, "\n(see `tunepack %s --help`)\n", cmd->name);
    return TP_EXIT_USAGE;
}

tp_store_t *tp__cli_open(const char *dir, char **dir_out) {
    tp_error_t err = {0};
    char *d = tp__rundir_resolve(dir, &err);
    if (!d) {
        fprintf(stderr, "tunepack: %s\n", err.msg);
        return NULL;
    }
    tp_store_t *s = NULL;
    if (tp__store_open(d, TP_STORE_READONLY, &s, &err) != 0) {
        fprintf(stderr, "tunepack: %s\n", err.msg);
        free(d);
        return NULL;
    }
    *dir_out = d;
    return s;
}

int tp__cli_beats(const tp_trial_row_t *row, int maximize, int have, double best) {
    if ((strcmp(row->state, "completed") != 0 && strcmp(row->state, "stopped") != 0) ||
        !row->has_value)
        return 0;
    return !have || (maximize ? row->value > best : row->value < best);
}

json_t *tp__cli_trial_json(const tp_trial_row_t *row) {
    json_t *params = json_loads(row->params, 0, NULL);
    json_t *metrics = row->metrics ? json_loads(row->metrics, 0, NULL) : NULL;
    json_t *o = json_pack("{s:I, s:s, s:o, s:o, s:i, s:i}", "id", (json_int_t)row->id, "state",
                          row->state, "params", params ? params : json_object(), "metrics",
                          metrics ? metrics : json_null(), "attempts", row->attempts, "failures",
                          row->failures);
    json_object_set_new(o, "value", row->has_value ? json_real(row->value) : json_null());
    json_object_set_new(o, "best", row->has_value && isfinite(row->best) ? json_real(row->best)
                                                                         : json_null());
    json_object_set_new(o, "step", row->step != TP_STORE_NO_STEP ? json_integer(row->step)
                                                                 : json_null());
    json_object_set_new(o, "exit_code", row->has_exit ? json_integer(row->exit_code) : json_null());
    json_object_set_new(o, "signal", row->has_exit && row->signal ? json_integer(row->signal)
                                                                  : json_null());
    json_object_set_new(o, "error", row->error ? json_string(row->error) : json_null());
    json_object_set_new(o, "rung", row->rung >= 0 ? json_integer(row->rung) : json_null());
    json_object_set_new(o, "budget", row->budget > 0 ? json_real(row->budget) : json_null());
    json_object_set_new(o, "decision", row->decision ? json_string(row->decision) : json_null());
    json_object_set_new(o, "started_at", row->started_at > 0 ? json_real(row->started_at)
                                                             : json_null());
    json_object_set_new(o, "ended_at", row->ended_at > 0 ? json_real(row->ended_at) : json_null());
    json_object_set_new(o, "duration_s", row->ended_at > 0 && row->started_at > 0
                                             ? json_real(row->ended_at - row->started_at)
                                             : json_null());
    return o;
}
