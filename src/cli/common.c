/* common: helpers shared by the read-only verbs. */
#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cli.h"
#include "place/place.h"
#include "run/run.h"
#include "search/search.h"

/* `--list-options`: the verb's option table as one JSON line on stdout. */
static int list_options(const tp_cmd_t *cmd, const tp_cli_opt_t *opts, size_t nopts) {
    json_t *list = json_array();
    for (size_t k = 0; k < nopts; k++) {
        json_t *o = json_pack(
            "{s:s, s:s, s:b, s:b}", "name", opts[k].name, "takes", opts[k].set ? "switch" : "value",
            "open", !!(opts[k].flags & TP_CLI_OPEN), "hidden", !!(opts[k].flags & TP_CLI_HIDDEN));
        json_t *choices = opts[k].choices ? json_array() : json_null();
        for (size_t i = 0; opts[k].choices && opts[k].choices[i]; i++)
            json_array_append_new(choices, json_string(opts[k].choices[i]));
        json_object_set_new(o, "choices", choices);
        json_array_append_new(list, o);
    }
    json_t *verb =
        json_pack("{s:s, s:b, s:o}", "verb", cmd->name, "hidden", cmd->hidden, "options", list);
    char *text = json_dumps(verb, JSON_COMPACT | JSON_PRESERVE_ORDER);
    printf("%s\n", text);
    free(text);
    json_decref(verb);
    return TP_EXIT_OK;
}

/* A value of an option with closed choices must be one of them. */
static int check_choice(const tp_cmd_t *cmd, const tp_cli_opt_t *o, const char *v) {
    if (!o->choices || (o->flags & TP_CLI_OPEN)) return TP_CLI_PARSED;
    size_t n = 0;
    char list[512] = "";
    for (; o->choices[n]; n++) {
        if (strcmp(v, o->choices[n]) == 0) return TP_CLI_PARSED;
        snprintf(list + strlen(list), sizeof list - strlen(list), "%s%s", n ? ", " : "",
                 o->choices[n]);
    }
    const char *guess = tp__did_you_mean(v, o->choices, n);
    if (guess)
        return tp__cli_usage_error(cmd, "unknown %s \"%s\"; did you mean \"%s\"? (%s)", o->name, v,
                                   guess, list);
    return tp__cli_usage_error(cmd, "unknown %s \"%s\"; use one of %s", o->name, v, list);
}

int tp__cli_parse_many(const tp_cmd_t *cmd, int argc, char **argv, const tp_cli_opt_t *opts,
                       size_t nopts, const char **positionals, size_t max, size_t *npos) {
    *npos = 0;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--list-options") == 0) return list_options(cmd, opts, nopts);
        if (strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0) {
            fputs(cmd->usage, stdout);
            return TP_EXIT_OK;
        }
    }
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (a[0] != '-' || a[1] == 0) {
            if (*npos == max)
                return tp__cli_usage_error(cmd, "unexpected argument \"%s\"%s", a,
                                           max == 1 ? " (one is enough)" : "");
            positionals[(*npos)++] = a;
            continue;
        }
        const tp_cli_opt_t *o = NULL;
        const char *inline_value = NULL;
        for (size_t k = 0; k < nopts && !o; k++) {
            size_t n = strlen(opts[k].name);
            if (strncmp(a, opts[k].name, n) != 0) continue;
            if (a[n] == 0)
                o = &opts[k];
            else if (a[n] == '=' && opts[k].value)
                o = &opts[k], inline_value = a + n + 1;
        }
        if (!o) return tp__cli_usage_error(cmd, "unknown option \"%s\"", a);
        if (o->set) {
            *o->set = 1;
            continue;
        }
        if (inline_value)
            *o->value = inline_value;
        else if (i + 1 < argc)
            *o->value = argv[++i];
        else
            return tp__cli_usage_error(cmd, "%s needs a value", o->name);
        int rc = check_choice(cmd, o, *o->value);
        if (rc != TP_CLI_PARSED) return rc;
    }
    return TP_CLI_PARSED;
}

int tp__cli_parse(const tp_cmd_t *cmd, int argc, char **argv, const tp_cli_opt_t *opts,
                  size_t nopts, const char **positional) {
    size_t n;
    return tp__cli_parse_many(cmd, argc, argv, opts, nopts, positional, 1, &n);
}

size_t tp__cli_policy_names(const char **out, size_t n) {
    size_t k = 0;
    for (; tp__placers[k] && k + 1 < n; k++)
        out[k] = tp__placers[k]->name;
    out[k] = NULL;
    return k;
}

int tp__cli_count(const tp_cmd_t *cmd, const char *opt, const char *text, long *out) {
    char *end;
    errno = 0;
    long n = strtol(text, &end, 10);
    if (errno || end == text || *end || n < 1 || n > TP_CLI_COUNT_MAX)
        return tp__cli_usage_error(cmd, "%s needs a whole number from 1 to %d, got \"%s\"", opt,
                                   TP_CLI_COUNT_MAX, text);
    *out = n;
    return TP_CLI_PARSED;
}

int tp__cli_duration(const tp_cmd_t *cmd, const char *opt, const char *text, double *out) {
    tp_error_t err = {0};
    if (tp__parse_duration(text, out, &err) < 0 || *out <= 0)
        return tp__cli_usage_error(cmd, "%s: %s", opt,
                                   err.msg[0] ? err.msg : "must be longer than zero");
    return TP_CLI_PARSED;
}

int tp__cli_scale(const tp_cmd_t *cmd, tp_cli_scale_t *sc) {
    if (sc->failures_a) { /* failures per node-day: a number or a percentage ("1%") */
        const char *v = sc->failures_a;
        char num[64];
        size_t n = strlen(v);
        int pct = n > 0 && n < sizeof num && v[n - 1] == '%';
        snprintf(num, sizeof num, "%.*s", (int)(pct ? n - 1 : n), v);
        char *end = NULL;
        double x = strtod(num, &end);
        if (!*num || end == num || *end || !isfinite(x) || x < 0 || (pct ? x / 100 : x) > 1000)
            return tp__cli_usage_error(cmd,
                                       "--node-failures must be failures per node-day, a number "
                                       "in [0, 1000] or a percentage (\"1%%\"), got \"%s\"",
                                       v);
        sc->node_failures = pct ? x / 100 : x;
    }
    if (sc->queue_a &&
        tp__cli_duration(cmd, "--queue-wait", sc->queue_a, &sc->queue_wait_s) != TP_CLI_PARSED)
        return TP_EXIT_USAGE;
    if (sc->startup_a && tp__cli_duration(cmd, "--trial-startup", sc->startup_a,
                                          &sc->trial_startup_s) != TP_CLI_PARSED)
        return TP_EXIT_USAGE;
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

const char *tp__cli_state(const tp_trial_row_t *row, int owned) {
    return !owned && strcmp(row->state, "running") == 0 ? "interrupted" : row->state;
}

typedef struct ranked {
    int target;        /* a target trial (surrogate:): ranks above every other */
    tp_rank_key_t key; /* budget and value */
    json_t *trial;     /* its JSON, owned */
} ranked_t;

/* A trial's last job that ended with the objective, from the decisions
 * journal ("result" rows): what it competes with, even while its next rung
 * runs. */
typedef struct job_result {
    int have;
    int rung;
    tp_rank_key_t key;
    int feasible; /* under constraints: the values journaled with it satisfy every bound */
} job_result_t;

typedef struct ranking {
    ranked_t *best; /* the best `top` so far, best first */
    size_t n, top;
    int maximize;
    const char *dir;
    job_result_t *last; /* by trial id, owned */
    size_t nlast;
    int only_surrogates;                      /* rank the surrogate trials only */
    size_t rows;                              /* trials seen */
    tp_constraint_t cons[TP_MAX_CONSTRAINTS]; /* the store's constraints */
    size_t ncons;
    size_t infeasible; /* trials that would rank but are infeasible */
} ranking_t;

static int note_result(const tp_decision_row_t *d, void *ud) {
    ranking_t *a = ud;
    if (strcmp(d->kind, "result") != 0 || !d->ok || !d->has_value || d->trial < 0) return 0;
    if ((size_t)d->trial >= a->nlast) {
        size_t n = (size_t)d->trial * 2 + 16;
        a->last = tp__xrealloc(a->last, n * sizeof *a->last);
        memset(a->last + a->nlast, 0, (n - a->nlast) * sizeof *a->last);
        a->nlast = n;
    }
    double v[TP_MAX_CONSTRAINTS];
    tp__search_json_numbers(d->constraints, v, a->ncons);
    a->last[d->trial] =
        (job_result_t){.have = 1,
                       .rung = d->rung,
                       .key = {.budget = d->budget, .value = d->value},
                       .feasible = tp__constraint_violation(a->cons, a->ncons, v) == 0};
    return 0;
}

/* Keep row among the best `top` (insertion into a short sorted array). A
 * trial competes with its last job's result (a promoted trial running its
 * next rung keeps the rung it finished); a trial with no journaled result (a
 * seeded one, a store older than the decisions) with its row. */
static int rank_row(const tp_trial_row_t *row, void *ud) {
    ranking_t *a = ud;
    a->rows++;
    if (a->only_surrogates && (!row->kind || strcmp(row->kind, "surrogate") != 0)) return 0;
    const job_result_t *jr = row->id >= 0 && (size_t)row->id < a->nlast && a->last[row->id].have
                                 ? &a->last[row->id]
                                 : NULL;
    if (!jr && !tp__rank_competes(row->state, row->has_value)) return 0;
    if (jr ? !jr->feasible : !tp__rank_feasible_of(a->cons, a->ncons, row->metrics)) {
        a->infeasible++;
        return 0;
    }
    tp_rank_key_t k = jr ? jr->key : (tp_rank_key_t){.budget = row->budget, .value = row->value};
    int target = row->kind && strcmp(row->kind, "target") == 0;
    size_t at = a->n;
    while (at > 0 && (target > a->best[at - 1].target ||
                      (target == a->best[at - 1].target &&
                       tp__rank_beats(&k, &a->best[at - 1].key, a->maximize))))
        at--;
    if (at >= a->top) return 0;
    if (a->n == a->top) json_decref(a->best[--a->n].trial);
    memmove(a->best + at + 1, a->best + at, (a->n - at) * sizeof *a->best);
    json_t *t = tp__cli_trial_json(row, a->dir);
    if (jr) { /* what was ranked: that job's rung, budget and value */
        json_object_set_new(t, "value", json_real(jr->key.value));
        json_object_set_new(t, "rung", json_integer(jr->rung));
        json_object_set_new(t, "budget",
                            jr->key.budget > 0 ? json_real(jr->key.budget) : json_null());
    }
    a->best[at] = (ranked_t){.target = target, .key = k, .trial = t};
    a->n++;
    return 0;
}

/* The best `top` trials (only_surrogates: of the surrogate trials), best
 * first; *rows: the trials seen. */
static json_t *rank_trials(tp_store_t *s, const char *dir, int maximize, size_t top,
                           int only_surrogates, size_t *rows, size_t *infeasible) {
    ranking_t a = {.best = tp__xcalloc(top ? top : 1, sizeof *a.best),
                   .top = top,
                   .maximize = maximize,
                   .dir = dir,
                   .only_surrogates = only_surrogates};
    json_t *keep;
    char *cons = tp__store_meta_get(s, "constraints");
    a.ncons = tp__constraints_from_json(cons, a.cons, TP_MAX_CONSTRAINTS, &keep);
    free(cons);
    json_t *out = json_array();
    if (top) {
        tp__store_decisions(s, note_result, &a);
        tp__store_trials(s, rank_row, &a);
    }
    for (size_t i = 0; i < a.n; i++)
        json_array_append_new(out, a.best[i].trial);
    free(a.best);
    free(a.last);
    json_decref(keep);
    *rows = a.rows;
    if (infeasible) *infeasible = a.infeasible;
    return out;
}

/* Each target among ranked gets "surrogate": {"trial", "rank", "of", "value"}:
 * how the surrogate trial it promotes ranked among the surrogates. */
static void note_surrogate_ranks(tp_store_t *s, const char *dir, int maximize, json_t *ranked,
                                 size_t rows) {
    size_t i, j;
    json_t *t, *u;
    int any = 0;
    json_array_foreach(ranked, i, t) any |= json_is_integer(json_object_get(t, "source"));
    if (!any) return;
    size_t seen;
    json_t *surr = rank_trials(s, dir, maximize, rows, 1, &seen, NULL);
    json_array_foreach(ranked, i, t) {
        const json_t *src = json_object_get(t, "source");
        if (!json_is_integer(src)) continue;
        json_array_foreach(surr, j, u) if (json_integer_value(json_object_get(u, "id")) ==
                                           json_integer_value(src)) {
            json_object_set_new(
                t, "surrogate",
                json_pack("{s:O, s:I, s:I, s:O}", "trial", src, "rank", (json_int_t)j + 1, "of",
                          (json_int_t)json_array_size(surr), "value", json_object_get(u, "value")));
            break;
        }
    }
    json_decref(surr);
}

/* See cli.h. Under `surrogate:` a target trial ranks above every surrogate
 * (the surrogates' values measure a smaller model). */
json_t *tp__cli_ranking(tp_store_t *s, const char *dir, int maximize, size_t top) {
    return tp__cli_ranking_feasible(s, dir, maximize, top, NULL);
}

json_t *tp__cli_ranking_feasible(tp_store_t *s, const char *dir, int maximize, size_t top,
                                 size_t *infeasible) {
    size_t rows;
    json_t *out = rank_trials(s, dir, maximize, top, 0, &rows, infeasible);
    note_surrogate_ranks(s, dir, maximize, out, rows);
    return out;
}

/* A stored text as JSON: null for none, and text that is not UTF-8 (a
 * trial's stderr may hold any bytes) escaped (docs/output.md) rather than
 * lost: jansson takes UTF-8 only. */
static json_t *text_json(const char *s) {
    if (!s) return json_null();
    json_t *v = json_string(s);
    if (v) return v;
    char *shown = tp__escape(s, TP_ESC_KEEP_NL);
    v = json_string(shown);
    free(shown);
    return v;
}

json_t *tp__cli_trial_json(const tp_trial_row_t *row, const char *dir) {
    json_t *params = json_loads(row->params, 0, NULL);
    json_t *metrics = row->metrics ? json_loads(row->metrics, 0, NULL) : NULL;
    json_t *o = json_pack("{s:I, s:s, s:o, s:o, s:i, s:i}", "id", (json_int_t)row->id, "state",
                          row->state, "params", params ? params : json_object(), "metrics",
                          metrics ? metrics : json_null(), "attempts", row->attempts, "failures",
                          row->failures);
    /* Failed attempts run again (automatically, or by run --retry-failed): every failure
     * but the one a failed trial ended with. Apart from promotions and interruptions. */
    int final_failure = strcmp(row->state, "failed") == 0 && row->failures > 0;
    json_object_set_new(o, "retries", json_integer(row->failures - final_failure));
    json_object_set_new(o, "value", row->has_value ? json_real(row->value) : json_null());
    json_object_set_new(o, "best",
                        row->has_value && isfinite(row->best) ? json_real(row->best) : json_null());
    json_object_set_new(o, "step",
                        row->step != TP_STORE_NO_STEP ? json_integer(row->step) : json_null());
    json_object_set_new(o, "exit_code", row->has_exit ? json_integer(row->exit_code) : json_null());
    json_object_set_new(o, "signal",
                        row->has_exit && row->signal ? json_integer(row->signal) : json_null());
    json_object_set_new(o, "error", text_json(row->error));
    json_object_set_new(o, "rung", row->rung >= 0 ? json_integer(row->rung) : json_null());
    json_object_set_new(o, "budget", row->budget > 0 ? json_real(row->budget) : json_null());
    json_object_set_new(o, "decision", text_json(row->decision));
    json_object_set_new(o, "started_at",
                        row->started_at > 0 ? json_real(row->started_at) : json_null());
    json_object_set_new(o, "ended_at", row->ended_at > 0 ? json_real(row->ended_at) : json_null());
    /* Time spent running, every attempt together (not paused or waiting). */
    json_object_set_new(o, "duration_s", row->run_s > 0 ? json_real(row->run_s) : json_null());
    json_object_set_new(o, "interrupted", json_integer(row->interrupted));
    json_object_set_new(o, "where", text_json(row->where));
    json_object_set_new(o, "stderr_tail", text_json(row->stderr_tail));
    /* Under `surrogate:`: surrogate or target, and a target's surrogate trial. */
    json_object_set_new(o, "kind", text_json(row->kind));
    json_object_set_new(o, "source", row->source >= 0 ? json_integer(row->source) : json_null());
    char logs[4200]; /* a trial seeded by a fork (id < 0) has its logs where it ran */
    tp__trial_path(logs, sizeof logs, dir, (long long)row->id, NULL);
    json_object_set_new(o, "logs", row->id >= 0 ? json_string(logs) : json_null());
    return o;
}

static int count_job(const tp_decision_row_t *d, void *ud) {
    json_t *jobs = ud;
    if (strcmp(d->kind, "job") != 0) return 0;
    char id[32];
    snprintf(id, sizeof id, "%lld", (long long)d->trial);
    json_object_set_new(jobs, id, json_integer(json_integer_value(json_object_get(jobs, id)) + 1));
    return 0;
}

/* See cli.h. */
void tp__cli_add_promotions(tp_store_t *s, json_t *trials) {
    json_t *jobs = json_object();
    tp__store_decisions(s, count_job, jobs);
    size_t i;
    json_t *t;
    json_array_foreach(trials, i, t) {
        char id[32];
        snprintf(id, sizeof id, "%lld", (long long)json_integer_value(json_object_get(t, "id")));
        json_int_t n = json_integer_value(json_object_get(jobs, id));
        json_object_set_new(t, "promotions", json_integer(n > 1 ? n - 1 : 0));
    }
    json_decref(jobs);
}

/* See cli.h. */
int tp__cli_add_feasibility(tp_store_t *s, json_t *trials) {
    tp_constraint_t cons[TP_MAX_CONSTRAINTS];
    json_t *keep;
    char *text = tp__store_meta_get(s, "constraints");
    size_t n = tp__constraints_from_json(text, cons, TP_MAX_CONSTRAINTS, &keep);
    free(text);
    size_t i;
    json_t *t;
    json_array_foreach(trials, i, t) {
        const json_t *metrics = json_object_get(t, "metrics");
        json_t *standing =
            tp__constraint_standing(cons, n, json_string_value(json_object_get(t, "state")),
                                    json_is_object(metrics) ? metrics : NULL);
        if (!standing) break;
        json_object_update(t, standing);
        json_decref(standing);
    }
    json_decref(keep);
    return n > 0;
}

void tp__cli_infeasible_line(size_t infeasible) {
    printf("%zu infeasible trial%s left out (a constraint broken, or a constrained metric never "
           "reported)\n",
           infeasible, infeasible == 1 ? "" : "s");
}

void tp__cli_ranked_text(const json_t *t, char *out, size_t n) {
    const char *state = json_string_value(json_object_get(t, "state"));
    int k = snprintf(out, n, "trial %lld", (long long)json_integer_value(json_object_get(t, "id")));
    if (k > 0 && (size_t)k < n && state && strcmp(state, "completed") != 0)
        k += snprintf(out + k, n - (size_t)k, ", %s",
                      strcmp(state, "stopped") == 0 ? "stopped early" : state);
    const json_t *budget = json_object_get(t, "budget");
    if (k > 0 && (size_t)k < n && json_is_number(budget)) {
        char b[32];
        tp__fmt_sig(json_number_value(budget), b);
        k += snprintf(out + k, n - (size_t)k, ", rung %lld, budget %s",
                      (long long)json_integer_value(json_object_get(t, "rung")), b);
    }
    const char *kind = json_string_value(json_object_get(t, "kind"));
    const json_t *sr = json_object_get(t, "surrogate");
    if (k > 0 && (size_t)k < n && sr)
        snprintf(out + k, n - (size_t)k, ", target of surrogate trial %lld (ranked %lld of %lld)",
                 (long long)json_integer_value(json_object_get(sr, "trial")),
                 (long long)json_integer_value(json_object_get(sr, "rank")),
                 (long long)json_integer_value(json_object_get(sr, "of")));
    else if (k > 0 && (size_t)k < n && kind)
        snprintf(out + k, n - (size_t)k, ", %s", kind);
}
