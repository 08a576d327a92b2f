/* tunepack status [DIR] */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cli.h"
#include "run/run.h"

typedef struct status_acc {
    int total, completed, failed, running, pending, stopped, paused; /* counts by state */
    int64_t best_id;                                         /* -1 if none */
    double best;                                             /* its value */
    char best_params[512];                                   /* its params, as text */
    int maximize;                                            /* metric mode */
    double first_start, last_end;                            /* wall times */
} status_acc_t;

static int count_row(const tp_trial_row_t *row, void *ud) {
    status_acc_t *a = ud;
    a->total++;
    if (tp__cli_beats(row, a->maximize, a->best_id >= 0, a->best)) {
        a->best_id = row->id;
        a->best = row->value;
        json_t *p = json_loads(row->params, 0, NULL);
        tp__params_text(p, a->best_params, sizeof a->best_params);
        json_decref(p);
    }
    if (strcmp(row->state, "completed") == 0) {
        a->completed++;
    } else if (strcmp(row->state, "failed") == 0) {
        a->failed++;
    } else if (strcmp(row->state, "running") == 0) {
        a->running++;
    } else if (strcmp(row->state, "stopped") == 0) {
        a->stopped++;
    } else if (strcmp(row->state, "paused") == 0) {
        a->paused++;
    } else {
        a->pending++;
    }
    if (row->started_at > 0 && (a->first_start == 0 || row->started_at < a->first_start))
        a->first_start = row->started_at;
    if (row->ended_at > a->last_end) a->last_end = row->ended_at;
    return 0;
}

static int status_main(int argc, char **argv) {
    const char *dir_arg = NULL;
    int rc = tp__cli_parse(&tp__cmd_status, argc, argv, NULL, 0, &dir_arg);
    if (rc != TP_CLI_PARSED) return rc;
    char *dir = NULL;
    tp_store_t *s = tp__cli_open(dir_arg, &dir);
    if (!s) return TP_EXIT_STORE;
    char *name = tp__store_meta_get(s, "name"), *state = tp__store_meta_get(s, "state");
    char *metric = tp__store_meta_get(s, "metric"), *mode = tp__store_meta_get(s, "mode");
    char *path = tp__store_meta_get(s, "experiment_path");
    char *sharing = tp__store_meta_get(s, "sharing"), *policy = tp__store_meta_get(s, "policy");
    status_acc_t a = {.best_id = -1, .maximize = mode && strcmp(mode, "max") == 0};
    tp__store_trials(s, count_row, &a);
    int owner = tp__rundir_owner(dir);
    char st[64];
    if (owner != 0)
        snprintf(st, sizeof st, "running (orchestrator pid %d)", owner);
    else if (state && strcmp(state, "running") == 0)
        snprintf(st, sizeof st, "interrupted (run it again to resume)");
    else
        snprintf(st, sizeof st, "%s", state ? state : "new");
    printf("experiment  %s (%s)\n", name ? name : "?", path ? path : "?");
    printf("directory   %s\n", dir);
    printf("state       %s\n", st);
    printf("trials      %d: %d completed, %d stopped early, %d failed, %d running, %d paused, "
           "%d pending\n",
           a.total, a.completed, a.stopped, a.failed, owner ? a.running : 0, a.paused,
           a.pending + (owner ? 0 : a.running));
    if (sharing && strcmp(sharing, "cpu") != 0)
        printf("gpus        shared by %s, placed by %s\n", sharing, policy ? policy : "?");
    if (a.best_id >= 0) {
        char v[32];
        tp__fmt_sig(a.best, v);
        printf("best        %s %s (trial %lld): %s\n", metric ? metric : "?", v,
               (long long)a.best_id, a.best_params);
    } else {
        printf("best        none yet\n");
    }
    if (a.first_start > 0) {
        char d[32];
        double end = owner ? tp__wall_s() : a.last_end;
        tp__format_duration(end > a.first_start ? end - a.first_start : 0, d, sizeof d);
        printf("elapsed     %s\n", d);
    }
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
    .usage = "usage: tunepack status [DIR]\n\n"
             "Shows the state of the experiment in DIR (default: the latest under ./runs):\n"
             "whether it runs, trial counts by state, and the best trial so far.\n\n"
             "example:\n  tunepack status runs/mlp-demo\n",
    .main = status_main,
};
