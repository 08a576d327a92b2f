/* tunepack best [DIR] [--json] [--top N] */
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "cli/cli.h"
#include "run/run.h"

/* Trial t's folder in the experiment directory dir, made absolute. */
static void trial_dir(const char *dir, json_t *t, char *out, size_t n) {
    char *abs = realpath(dir, NULL);
    tp__trial_path(out, n, abs ? abs : dir, (long long)json_integer_value(json_object_get(t, "id")),
                   NULL);
    free(abs);
}

/* Whether path holds a checkpoint: a folder with anything in it (every
 * attempt gets an empty one), or a file that is not empty. */
static int holds_checkpoint(const char *path) {
    struct stat st;
    if (stat(path, &st) != 0) return 0;
    if (!S_ISDIR(st.st_mode)) return st.st_size > 0;
    DIR *d = opendir(path);
    int found = 0;
    for (struct dirent *e; d && !found && (e = readdir(d)) != NULL;)
        found = strcmp(e->d_name, ".") != 0 && strcmp(e->d_name, "..") != 0;
    if (d) closedir(d);
    return found;
}

/* Trial t's checkpoint: the one a deadline run named (event `checkpoint`,
 * the last one), else the checkpoint/ of its folder `home` when it holds one
 * on this machine; NULL if none (a checkpoint_root or a node's spool
 * elsewhere). Caller frees. */
static char *checkpoint_of(tp_store_t *s, const char *home, json_t *t) {
    char *path, here[4400];
    tp__store_last_event(s, json_integer_value(json_object_get(t, "id")), "checkpoint", &path);
    if (path) return path;
    snprintf(here, sizeof here, "%s/checkpoint", home);
    return holds_checkpoint(here) ? tp__strdup(here) : NULL;
}

/* {"trial", "value", "state", "rung", "budget", "params", "metrics"} of a
 * trial's JSON, under surrogate: "kind" and a target's "surrogate" (cli.h),
 * "dir" (its folder) and "checkpoint" when it has one (checkpoint_of). */
static json_t *best_object(tp_store_t *s, const char *dir, json_t *t) {
    static const char *const keys[] = {"value", "state", "rung", "budget", "params", "metrics"};
    json_t *o = json_pack("{s:O}", "trial", json_object_get(t, "id"));
    for (size_t i = 0; i < TP_ARRAY_LEN(keys); i++)
        json_object_set(o, keys[i], json_object_get(t, keys[i]));
    /* under surrogate: the kind, and a target's surrogate and its rank */
    static const char *const surrogate_keys[] = {"kind", "surrogate"};
    for (size_t i = 0; i < TP_ARRAY_LEN(surrogate_keys); i++) {
        json_t *v = json_object_get(t, surrogate_keys[i]);
        if (v && !json_is_null(v)) json_object_set(o, surrogate_keys[i], v);
    }
    char home[4300];
    trial_dir(dir, t, home, sizeof home);
    json_object_set_new(o, "dir", json_string(home));
    char *ckpt = checkpoint_of(s, home, t);
    if (ckpt) json_object_set_new(o, "checkpoint", json_string(ckpt));
    free(ckpt);
    return o;
}

static void print_text(tp_store_t *s, const char *dir, json_t *t, const char *metric) {
    char v[32], which[160], home[4300];
    tp__fmt_sig(json_real_value(json_object_get(t, "value")), v);
    tp__cli_ranked_text(t, which, sizeof which);
    /* names, paths and values as stored: shown, never obeyed (docs/output.md) */
    tp__fprintf_escaped(stdout, TP_ESC_LINE, "best %s: %s = %s", which, metric, v);
    trial_dir(dir, t, home, sizeof home);
    tp__fprintf_escaped(stdout, TP_ESC_LINE, "  directory: %s", home);
    char *ckpt = checkpoint_of(s, home, t);
    if (ckpt) tp__fprintf_escaped(stdout, TP_ESC_LINE, "  checkpoint: %s", ckpt);
    free(ckpt);
    const char *key;
    json_t *val;
    json_object_foreach(json_object_get(t, "params"), key, val) {
        char text[256];
        if (tp__value_text_human(val, text, sizeof text) < 0) snprintf(text, sizeof text, "...");
        tp__fprintf_escaped(stdout, TP_ESC_LINE, "  %s: %s", key, text);
    }
}

/* The experiment has `constraints:` (its store says so). */
static int has_constraints(tp_store_t *s) {
    char *c = tp__store_meta_get(s, "constraints");
    free(c);
    return c != NULL;
}

static int best_main(int argc, char **argv) {
    const char *dir_arg = NULL, *top_arg = NULL;
    int as_json = 0;
    const tp_cli_opt_t opts[] = {{"--json", &as_json, NULL}, {"--top", NULL, &top_arg}};
    int rc = tp__cli_parse(&tp__cmd_best, argc, argv, opts, TP_ARRAY_LEN(opts), &dir_arg);
    if (rc != TP_CLI_PARSED) return rc;
    long top = 1;
    if (top_arg && (rc = tp__cli_count(&tp__cmd_best, "--top", top_arg, &top)) != TP_CLI_PARSED)
        return rc;
    char *dir = NULL;
    tp_store_t *s = tp__cli_open(dir_arg, &dir);
    if (!s) return TP_EXIT_STORE;
    char *objs = tp__store_meta_get(s, "objectives");
    json_t *objectives = objs ? json_loads(objs, 0, NULL) : NULL;
    free(objs);
    if (json_array_size(objectives) > 1) { /* several objectives: the Pareto front */
        rc = tp__cli_best_front(s, objectives, as_json, dir);
        json_decref(objectives);
        free(dir);
        tp__store_close(s);
        return rc;
    }
    json_decref(objectives);
    char *mode = tp__store_meta_get(s, "mode"), *metric = tp__store_meta_get(s, "metric");
    size_t infeasible = 0;
    json_t *ranked = tp__cli_ranking_feasible(s, dir, mode && strcmp(mode, "max") == 0, (size_t)top,
                                              &infeasible);
    int code = TP_EXIT_OK;
    size_t i;
    json_t *t;
    if (json_array_size(ranked) == 0 && infeasible) {
        fprintf(stderr,
                "tunepack: no feasible trial in %s yet: all %zu that reported %s broke a "
                "constraint (or never reported a constrained metric)\n",
                dir, infeasible, metric ? metric : "its objective");
        code = TP_EXIT_NO_TRIAL;
    } else if (json_array_size(ranked) == 0) {
        fprintf(stderr, "tunepack: no trial in %s has reported %s at the end of a job yet\n", dir,
                metric ? metric : "its objective");
        code = TP_EXIT_NO_TRIAL;
    } else if (as_json) {
        /* One object; with --top, an array of them, best first. */
        json_t *out = top_arg ? json_array() : best_object(s, dir, json_array_get(ranked, 0));
        if (top_arg)
            json_array_foreach(ranked, i, t) json_array_append_new(out, best_object(s, dir, t));
        else if (has_constraints(s))
            json_object_set_new(out, "infeasible", json_integer((json_int_t)infeasible));
        char *text = json_dumps(out, JSON_COMPACT | JSON_PRESERVE_ORDER);
        printf("%s\n", text);
        free(text);
        json_decref(out);
    } else {
        json_array_foreach(ranked, i, t) print_text(s, dir, t, metric ? metric : "value");
        if (infeasible) tp__cli_infeasible_line(infeasible);
    }
    json_decref(ranked);
    free(mode);
    free(metric);
    free(dir);
    tp__store_close(s);
    return code;
}

const tp_cmd_t tp__cmd_best = {
    .name = "best",
    .summary = "print the best trial so far (several objectives: the Pareto front)",
    .usage =
        "usage: tunepack best [DIR] [--json] [--top N]\n\n"
        "Prints the best trial of the experiment in DIR (default: the latest under ./runs),\n"
        "while it runs or after. It ranks every trial that ended a job with the objective,\n"
        "by the last job it ended so: completed, stopped early by the scheduler, paused at\n"
        "a rung waiting for a promotion, or promoted and running its next rung (trials\n"
        "that never finished a job are not ranked; after a deadline, trials stopped there\n"
        "rank by their last report and show the checkpoint their model is in). A trial that\n"
        "reached a larger budget ranks first (a value after 9 epochs is not weighed against\n"
        "one after 1), then the better objective by the metric's mode. Under `constraints:`\n"
        "only feasible trials rank (every constrained metric of the job's last report\n"
        "inside its bounds; one never reported is a broken constraint) and a line says how\n"
        "many were left out (--json: \"infeasible\": N). `tunepack status`\n"
        "shows the same trial. Under `surrogate:` a target trial (a configuration run\n"
        "again at full size) ranks above every surrogate trial, and is shown with the\n"
        "surrogate trial it came from and how that one ranked among the surrogates.\n\n"
        "  --top N   the N best, best first\n"
        "  --json    one object (with --top, an array of them, best first):\n"
        "            {\"trial\": 7, \"value\": 0.96, \"state\": \"completed\", \"rung\": 2,\n"
        "             \"budget\": 9, \"params\": {...}, \"metrics\": {...}, \"dir\": its\n"
        "            folder}, and \"checkpoint\": \"/path\": the model a deadline run named,\n"
        "            else the folder's checkpoint/ when it holds one on this machine\n\n"
        "With several objectives (metric: [{name, mode}, ...]) it prints the Pareto front:\n"
        "every finished feasible trial that no other beats in every objective (--top does not\n"
        "apply); --json gives it as a list: [{\"trial\": 7, \"values\": {\"err\": 0.1,\n"
        "\"cost\": 3}, \"params\": {...}, \"metrics\": {...}}, ...].\n"
        "Exit code 5 when no trial is ranked yet.\n\n"
        "example:\n  tunepack best runs/mlp-demo --top 3\n",
    .main = best_main,
};
