/* tunepack status [DIR] [--json] */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cli.h"
#include "run/run.h"

/* The states `status` counts, in the order it says them. "interrupted": a
 * running trial of a run that no orchestrator owns any more. */
static const char *const counted[] = {"completed", "stopped", "failed",     "running",
                                      "paused",    "pending", "interrupted"};
#define NCOUNTED TP_ARRAY_LEN(counted)

typedef struct status_acc {
    int total;
    int count[NCOUNTED];          /* by counted[] */
    int owned;                    /* an orchestrator runs it now */
    int stopped_pending;          /* pending trials a stop interrupted (meta "interrupted") */
    double first_start, last_end; /* wall times */
    size_t infeasible;            /* under constraints: trials left out of best or the front */
} status_acc_t;

static int count_row(const tp_trial_row_t *row, void *ud) {
    status_acc_t *a = ud;
    a->total++;
    const char *state = tp__cli_state(row, a->owned);
    for (size_t i = 0; i < NCOUNTED; i++)
        if (strcmp(state, counted[i]) == 0) a->count[i]++;
    if (row->started_at > 0 && (a->first_start == 0 || row->started_at < a->first_start))
        a->first_start = row->started_at;
    if (row->ended_at > a->last_end) a->last_end = row->ended_at;
    return 0;
}

static void print_text(const char *name, const char *path, const char *dir, const char *st,
                       const status_acc_t *a, const char *sharing, const char *policy,
                       const char *metric, json_t *best, const json_t *front, size_t nfinished,
                       double elapsed) {
    /* names and paths as the store holds them: shown, never obeyed (docs/output.md) */
    tp__fprintf_escaped(stdout, TP_ESC_LINE, "experiment  %s (%s)", name ? name : "?",
                        path ? path : "?");
    tp__fprintf_escaped(stdout, TP_ESC_LINE, "directory   %s", dir);
    tp__fprintf_escaped(stdout, TP_ESC_LINE, "state       %s", st);
    printf("trials      %d: %d completed, %d stopped early, %d failed, %d running, %d paused, "
           "%d pending, %d interrupted",
           a->total, a->count[0], a->count[1], a->count[2], a->count[3], a->count[4], a->count[5],
           a->count[6]);
    if (a->stopped_pending > 0)
        printf(" (%d of the pending were interrupted by the stop: they run again on resume)",
               a->stopped_pending);
    printf("\n");
    if (sharing && strcmp(sharing, "cpu") != 0)
        tp__fprintf_escaped(stdout, TP_ESC_LINE, "gpus        shared by %s, placed by %s", sharing,
                            policy ? policy : "?");
    if (front && json_array_size(front)) { /* several objectives: no one best */
        printf("front       %zu of %zu finished trials on the Pareto front (`tunepack best` lists "
               "them with their parameters)\n",
               json_array_size(front), nfinished);
        tp__cli_front_print(front, 5, "            ", 0);
    } else if (front) {
        printf("front       none yet\n");
    } else if (best) {
        char v[32], params[512], which[160];
        tp__fmt_sig(json_real_value(json_object_get(best, "value")), v);
        tp__params_text(json_object_get(best, "params"), params, sizeof params);
        tp__cli_ranked_text(best, which, sizeof which);
        tp__fprintf_escaped(stdout, TP_ESC_LINE, "best        %s %s (%s): %s",
                            metric ? metric : "?", v, which, params);
    } else {
        printf("best        none yet\n");
    }
    if (a->infeasible)
        printf("infeasible  %zu trial%s broke a constraint: not ranked\n", a->infeasible,
               a->infeasible == 1 ? "" : "s");
    if (elapsed >= 0) {
        char d[32];
        tp__format_duration(elapsed, d, sizeof d);
        printf("elapsed     %s\n", d);
    }
}

/* What fused processes measured (meta "fusion", docs/fusion.md): per shape, each K's
 * throughput and peak memory, one line per shape. */
static void print_fusion(const json_t *fusion) {
    const char *shape;
    json_t *ks;
    json_object_foreach((json_t *)fusion, shape, ks) {
        tp__fprintf_escaped(stdout, 0, "fused       %s:", shape);
        for (int k = 1; k <= 64; k++) {
            char kk[8];
            snprintf(kk, sizeof kk, "%d", k);
            json_t *m = json_object_get(ks, kk);
            if (!m) continue;
            double rate = json_number_value(json_object_get(m, "rate"));
            printf(" K=%d %.3g steps/s per configuration (%.3g in all), %.0f MiB;", k, rate,
                   rate * k, json_number_value(json_object_get(m, "mem_mib")));
        }
        printf("\n");
    }
}

static int status_main(int argc, char **argv) {
    const char *dir_arg = NULL;
    int as_json = 0;
    const tp_cli_opt_t opts[] = {{"--json", &as_json, NULL}};
    int rc = tp__cli_parse(&tp__cmd_status, argc, argv, opts, TP_ARRAY_LEN(opts), &dir_arg);
    if (rc != TP_CLI_PARSED) return rc;
    char *dir = NULL;
    tp_store_t *s = tp__cli_open(dir_arg, &dir);
    if (!s) return TP_EXIT_STORE;
    char *name = tp__store_meta_get(s, "name"), *state = tp__store_meta_get(s, "state");
    char *metric = tp__store_meta_get(s, "metric"), *mode = tp__store_meta_get(s, "mode");
    char *path = tp__store_meta_get(s, "experiment_path");
    char *sharing = tp__store_meta_get(s, "sharing"), *policy = tp__store_meta_get(s, "policy");
    char *fused_text = tp__store_meta_get(s, "fusion");
    json_t *fusion = fused_text ? json_loads(fused_text, 0, NULL) : NULL;
    free(fused_text);
    int owner = tp__rundir_owner(dir);
    status_acc_t a = {.owned = owner != 0};
    char *nint = owner ? NULL : tp__store_meta_get(s, "interrupted");
    a.stopped_pending = nint ? atoi(nint) : 0;
    free(nint);
    tp__store_trials(s, count_row, &a);
    json_t *ranked =
        tp__cli_ranking_feasible(s, dir, mode && strcmp(mode, "max") == 0, 1, &a.infeasible);
    json_t *best = json_array_get(ranked, 0), *front = NULL;
    char *objs = tp__store_meta_get(s, "objectives");
    json_t *objectives = objs ? json_loads(objs, 0, NULL) : NULL;
    size_t nfinished = 0;
    if (json_array_size(objectives) > 1) /* several objectives: the front, not one best */
        front = tp__cli_pareto_front_feasible(s, objectives, dir, &nfinished, &a.infeasible),
        best = NULL;
    free(objs);
    json_decref(objectives);
    char st[64];
    if (owner != 0)
        snprintf(st, sizeof st, "running (orchestrator pid %d)", owner);
    else if (state && strcmp(state, "running") == 0)
        snprintf(st, sizeof st, "interrupted (run it again to resume)");
    else
        snprintf(st, sizeof st, "%s", state ? state : "new");
    double elapsed = -1;
    char *ended = tp__store_meta_get(s, "ended_at"); /* a stopped run's end: no trial ended then */
    if (ended && atof(ended) > a.last_end) a.last_end = atof(ended);
    free(ended);
    if (a.first_start > 0) {
        double end = owner ? tp__wall_s() : a.last_end;
        elapsed = end > a.first_start ? end - a.first_start : 0;
    }
    if (as_json) {
        json_t *counts = json_object();
        for (size_t i = 0; i < NCOUNTED; i++)
            json_object_set_new(counts, counted[i], json_integer(a.count[i]));
        json_object_set_new(counts, "pending_interrupted", json_integer(a.stopped_pending));
        json_t *o =
            json_pack("{s:s?, s:s?, s:s, s:s, s:i, s:o, s:s?, s:s?, s:O, s:o}", "name", name,
                      "file", path, "directory", dir, "state", st, "trials", a.total, "counts",
                      counts, "metric", metric, "mode", mode, "best", best ? best : json_null(),
                      "elapsed_s", elapsed >= 0 ? json_real(elapsed) : json_null());
        if (front) json_object_set(o, "front", front);
        char *cons = tp__store_meta_get(s, "constraints");
        if (cons) json_object_set_new(o, "infeasible", json_integer((json_int_t)a.infeasible));
        free(cons);
        if (fusion) json_object_set(o, "fusion", fusion);
        char *text = json_dumps(o, JSON_COMPACT | JSON_PRESERVE_ORDER);
        printf("%s\n", text);
        free(text);
        json_decref(o);
    } else {
        print_text(name, path, dir, st, &a, sharing, policy, metric, best, front, nfinished,
                   elapsed);
        if (fusion) print_fusion(fusion);
    }
    json_decref(front);
    json_decref(fusion);
    json_decref(ranked);
    free(name);
    free(state);
    free(metric);
    free(mode);
    free(path);
    free(sharing);
    free(policy);
    free(dir);
    tp__store_close(s);
    return TP_EXIT_OK;
}

const tp_cmd_t tp__cmd_status = {
    .name = "status",
    .summary = "show an experiment's progress and best trial",
    .usage =
        "usage: tunepack status [DIR] [--json]\n\n"
        "Shows the state of the experiment in DIR (default: the latest under ./runs):\n"
        "whether it runs, trial counts by state (completed, stopped early, failed,\n"
        "running, paused at a rung, pending, interrupted: left running by a run that\n"
        "ended, to run again on resume) and the best trial so far, ranked as\n"
        "`tunepack best` ranks it; with several objectives, the Pareto front instead;\n"
        "with fuse:, what fused processes measured per shape and K (throughput, peak\n"
        "memory).\n\n"
        "  --json   one object: {\"name\", \"file\", \"directory\", \"state\", \"trials\",\n"
        "           \"counts\": {\"completed\": 3, ..., \"pending_interrupted\": pending\n"
        "           trials a stop interrupted}, \"metric\", \"mode\", \"best\": {trial}\n"
        "           or null, \"elapsed_s\"}; several objectives: \"best\" null and\n"
        "           \"front\": [{\"trial\", \"values\", \"params\", \"metrics\"}] as best --json;\n"
        "           with fuse: \"fusion\": {shape: {K: {runs, rate, mem_mib, cpu_s}}};\n"
        "           under constraints: \"infeasible\": trials not ranked for a broken\n"
        "           constraint (best and the front hold feasible trials only)\n\n"
        "example:\n  tunepack status runs/mlp-demo\n",
    .main = status_main,
};
