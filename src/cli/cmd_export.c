/* tunepack export [DIR] [--format csv|tsv|json] (csv by default) */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cli.h"
#include "run/run.h"

typedef struct export_acc {
    json_t *trials;  /* array of trial objects */
    const char *dir; /* the experiment directory */
} export_acc_t;

static int collect(const tp_trial_row_t *row, void *ud) {
    export_acc_t *a = ud;
    json_array_append_new(a->trials, tp__cli_trial_json(row, a->dir));
    return 0;
}

/* One cell of a table: sep ',' (CSV) or '\t' (TSV). Its text is escaped
 * (docs/output.md: no control character reaches a terminal or a
 * spreadsheet raw; CSV keeps a cell's line breaks inside its quotes, TSV
 * shows them as \n), a cell a spreadsheet would run as a formula gets a
 * leading ' (plain numbers such as -0.5 stay numbers), and a CSV cell with
 * a comma, quote or line break is quoted (RFC 4180). */
static void cell(const char *s, char sep) {
    char *shown = tp__escape(s, sep == ',' ? TP_ESC_KEEP_NL : 0);
    const char *lead = tp__cell_is_formula(shown) ? "'" : "";
    if (sep != ',' || !strpbrk(shown, ",\"\r\n")) {
        printf("%s%s", lead, shown);
        free(shown);
        return;
    }
    printf("\"%s", lead);
    for (const char *p = shown; *p; p++) {
        if (*p == '"') putchar('"');
        putchar(*p);
    }
    putchar('"');
    free(shown);
}

static void cell_value(const json_t *v, char sep) {
    if (!v || json_is_null(v)) return;
    char *t = json_is_string(v) ? NULL : json_dumps(v, JSON_COMPACT | JSON_ENCODE_ANY);
    char num[64];
    if (json_is_number(v) && tp__value_text(v, num, sizeof num) >= 0)
        cell(num, sep);
    else
        cell(t ? t : json_string_value(v), sep); /* any length: nothing is cut */
    free(t);
}

/* Union of the keys of member `field` over all trials, in first-seen order. */
static json_t *column_names(json_t *trials, const char *field) {
    json_t *names = json_object();
    size_t i;
    json_t *t;
    json_array_foreach(trials, i, t) {
        const char *key;
        json_t *v;
        json_object_foreach(json_object_get(t, field), key, v)
            json_object_set(names, key, json_true());
    }
    return names;
}

static void write_table(json_t *trials, char sep) {
    static const char *const fixed[] = {
        "id",    "state",     "attempts", "interrupted", "value", "step", "duration_s",
        "where", "exit_code", "error",    "stderr_tail", "logs",  "kind", "source"};
    static const char *const pbt[] = {"segment", "parent", "parent_step"};
    int lineage = json_object_get(json_array_get(trials, 0), "segment") != NULL;
    json_t *pcols = column_names(trials, "params"), *mcols = column_names(trials, "metrics");
    const char *key;
    json_t *v;
    int first = 1;
    for (size_t k = 0; k < TP_ARRAY_LEN(fixed); k++, first = 0) {
        if (!first) putchar(sep);
        fputs(fixed[k], stdout);
    }
    for (size_t k = 0; lineage && k < TP_ARRAY_LEN(pbt); k++)
        printf("%c%s", sep, pbt[k]);
    json_object_foreach(pcols, key, v) {
        putchar(sep);
        cell(key, sep);
    }
    json_object_foreach(mcols, key, v) { /* the prefix inside the field's quotes */
        tp_buf_t name;
        tp__buf_init(&name);
        tp__buf_printf(&name, "metric.%s", key);
        putchar(sep);
        cell(name.data, sep);
        tp__buf_free(&name);
    }
    putchar('\n');
    size_t i;
    json_t *t;
    json_array_foreach(trials, i, t) {
        for (size_t k = 0; k < TP_ARRAY_LEN(fixed); k++) {
            if (k) putchar(sep);
            cell_value(json_object_get(t, fixed[k]), sep);
        }
        for (size_t k = 0; lineage && k < TP_ARRAY_LEN(pbt); k++) {
            putchar(sep);
            cell_value(json_object_get(t, pbt[k]), sep);
        }
        json_object_foreach(pcols, key, v) {
            putchar(sep);
            cell_value(json_object_get(json_object_get(t, "params"), key), sep);
        }
        json_object_foreach(mcols, key, v) {
            putchar(sep);
            cell_value(json_object_get(json_object_get(t, "metrics"), key), sep);
        }
        putchar('\n');
    }
    json_decref(pcols);
    json_decref(mcols);
}

static int export_main(int argc, char **argv) {
    const char *dir_arg = NULL, *format = NULL;
    static const char *const formats[] = {"csv", "tsv", "json", NULL};
    const tp_cli_opt_t opts[] = {{"--format", NULL, &format, formats, 0}};
    int rc = tp__cli_parse(&tp__cmd_export, argc, argv, opts, TP_ARRAY_LEN(opts), &dir_arg);
    if (rc != TP_CLI_PARSED) return rc;
    if (!format) format = "csv"; /* what a spreadsheet opens, and what peers default to */
    char *dir = NULL;
    tp_store_t *s = tp__cli_open(dir_arg, &dir);
    if (!s) return TP_EXIT_STORE;
    export_acc_t a = {.trials = json_array(), .dir = dir};
    tp__store_trials(s, collect, &a);
    tp__cli_add_lineage(s, a.trials);
    if (strcmp(format, "json") == 0) {
        /* An array, one trial object per line. */
        size_t i;
        json_t *t;
        printf("[");
        json_array_foreach(a.trials, i, t) {
            char *text = json_dumps(t, JSON_COMPACT | JSON_PRESERVE_ORDER);
            printf("%s\n%s", i ? "," : "", text);
            free(text);
        }
        printf("\n]\n");
    } else {
        write_table(a.trials, strcmp(format, "tsv") == 0 ? '\t' : ',');
    }
    json_decref(a.trials);
    free(dir);
    tp__store_close(s);
    return TP_EXIT_OK;
}

const tp_cmd_t tp__cmd_export = {
    .name = "export",
    .summary = "export every trial as CSV, TSV or JSON",
    .usage =
        "usage: tunepack export [DIR] [--format csv|tsv|json]\n\n"
        "Writes every trial of the experiment in DIR (default: the latest under ./runs) to\n"
        "stdout, as CSV unless --format tsv or json. json: an array with one object per trial\n"
        "(id, state, params, metrics = the last report, value, attempts, failures,\n"
        "interrupted attempts (neither failures nor retries), exit_code, error,\n"
        "stderr_tail = the last lines of a failed attempt's stderr, logs = its folder,\n"
        "where = node:GPUs of its last attempt, duration_s = time spent running, times;\n"
        "under surrogate:, kind = surrogate or target and source = a target's surrogate\n"
        "trial; under scheduler pbt, segment = how many times it exploited another,\n"
        "parent and parent_step = the trial and budget its latest segment was copied\n"
        "from, lineage = each exploit with its new params). csv: one row per trial with\n"
        "those columns (lineage apart), a column per parameter and\n"
        "per final metric (metric.<name>); tsv: the same, separated by tabs.\n"
        "In csv and tsv a control character in a cell is shown, not sent (ESC as \\x1b;\n"
        "tsv shows line breaks and tabs as \\n and \\t), and a cell that a spreadsheet\n"
        "would run as a formula (it begins with =, +, -, @) starts with ' instead; numbers\n"
        "such as -0.5 stay numbers. json keeps the exact text.\n\n"
        "  --format F   csv (default), tsv or json\n\n"
        "example:\n  tunepack export runs/mlp-demo --format csv > trials.csv\n",
    .main = export_main,
};
