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

/* A column's name after its separator: prefix.name, the prefix inside the
 * field's quotes (metric.<name>, constraint.<metric>). */
static void prefixed_header(const char *prefix, const char *name, char sep) {
    tp_buf_t text;
    tp__buf_init(&text);
    tp__buf_printf(&text, "%s.%s", prefix, name);
    putchar(sep);
    cell(text.data, sep);
    tp__buf_free(&text);
}

/* The table: the fixed columns, pbt's under lineage, a column per parameter
 * and per metric, then the columns added since (at the end, so that a script
 * that reads columns by position keeps working): retries and promotions,
 * and under constraints (cons: the store's list, [{"metric", ...}]; NULL or
 * empty: none) one per constraint and feasible. */
static void write_table(json_t *trials, char sep, const json_t *cons) {
    static const char *const fixed[] = {
        "id",    "state",     "attempts", "interrupted", "value", "step", "duration_s",
        "where", "exit_code", "error",    "stderr_tail", "logs",  "kind", "source"};
    static const char *const pbt[] = {"segment", "parent", "parent_step"};
    static const char *const added[] = {"retries", "promotions"};
    int constrained = json_array_size(cons) > 0;
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
    json_object_foreach(mcols, key, v) prefixed_header("metric", key, sep);
    for (size_t k = 0; k < TP_ARRAY_LEN(added); k++)
        printf("%c%s", sep, added[k]);
    size_t i;
    json_t *t;
    json_array_foreach(cons, i, t) { /* each one's value in the last report */
        prefixed_header("constraint", json_string_value(json_object_get(t, "metric")), sep);
    }
    if (constrained) printf("%cfeasible", sep);
    putchar('\n');
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
        for (size_t k = 0; k < TP_ARRAY_LEN(added); k++) {
            putchar(sep);
            cell_value(json_object_get(t, added[k]), sep);
        }
        size_t j;
        json_t *c;
        json_array_foreach(json_object_get(t, "constraints"), j, c) {
            putchar(sep);
            cell_value(json_object_get(c, "value"), sep);
        }
        if (constrained) {
            putchar(sep);
            cell_value(json_object_get(t, "feasible"), sep);
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
    tp__cli_add_promotions(s, a.trials);
    tp__cli_add_feasibility(s, a.trials);
    char *cons_text = tp__store_meta_get(s, "constraints");
    json_t *cons = cons_text ? json_loads(cons_text, 0, NULL) : NULL;
    free(cons_text);
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
        write_table(a.trials, strcmp(format, "tsv") == 0 ? '\t' : ',', cons);
    }
    json_decref(a.trials);
    json_decref(cons);
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
        "retries = failed attempts run again, promotions = attempts started by a\n"
        "promotion, interrupted attempts (none of those), exit_code, error,\n"
        "stderr_tail = the last lines of a failed attempt's stderr, logs = its folder,\n"
        "where = node:GPUs of its last attempt, duration_s = time spent running, times;\n"
        "under surrogate:, kind = surrogate or target and source = a target's surrogate\n"
        "trial; under scheduler pbt, segment = how many times it exploited another,\n"
        "parent and parent_step = the trial and budget its latest segment was copied\n"
        "from, lineage = each exploit with its new params; under constraints:, feasible =\n"
        "true or false once a job ended with its result, null before, and constraints =\n"
        "each constrained metric's value in the last report and its violation). csv: one\n"
        "row per trial with those columns (lineage apart), a column per parameter and per\n"
        "final metric (metric.<name>), then retries and promotions, and under\n"
        "constraints: a column per constraint (constraint.<metric>) and feasible; columns\n"
        "added later go at the end, so a column's position stays; tsv: the same,\n"
        "separated by tabs.\n"
        "In csv and tsv a control character in a cell is shown, not sent (ESC as \\x1b;\n"
        "tsv shows line breaks and tabs as \\n and \\t), and a cell that a spreadsheet\n"
        "would run as a formula (it begins with =, +, -, @) starts with ' instead; numbers\n"
        "such as -0.5 stay numbers. json keeps the exact text.\n\n"
        "  --format F   csv (default), tsv or json\n\n"
        "example:\n  tunepack export runs/mlp-demo --format csv > trials.csv\n",
    .main = export_main,
};
