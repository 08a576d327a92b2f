/* dryrun: `tunepack run FILE --dry-run`: every mistake in the file at once,
 * the program checked from the working directory, and the first
 * configurations with the exact argv each would run with; nothing is
 * created or run. Also the program check every run makes before its first
 * trial. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "config/config.h"
#include "run/orchestrator_internal.h"
#include "run/run.h"
#include "search/scheduler.h"
#include "search/surrogate.h"
#include "store/store.h"

tp_scheduler_t *tp__run_scheduler_new(const tp_experiment_t *x, tp_error_t *err) {
    tp_scheduler_cfg_t scfg = {.scheduler = x->scheduler,
                               .sampler = x->search,
                               .budget = {.name = x->budget_name,
                                          .min = x->budget_min,
                                          .max = x->budget_max,
                                          .eta = x->budget_eta},
                               .maximize = x->maximize,
                               .pbt = x->pbt};
    tp_scheduler_t *s = tp__scheduler_new(&x->space, &scfg, err);
    if (s && x->surrogate.param) s = tp__surrogate_wrap(s, &x->surrogate, err);
    return s;
}

int tp__run_check_program(const tp_experiment_t *x, const char *workdir, tp_error_t *err) {
    const char *prog = x->argv[0];
    if (strchr(prog, '{')) return 0; /* decided per trial */
    char path[8192];
    int rc = tp__run_resolve_program(prog, workdir, path, sizeof path);
    if (rc == 0) return 0;
    const char *where = strchr(prog, '/') ? "from the working directory" : "on PATH, seen from";
    return tp__errorf(err, rc,
                      "%s:%d:%d: the program \"%s\" %s %s %s; fix the path in "
                      "command (or `workdir`), nothing was run",
                      x->path, x->program_line, x->program_col, prog,
                      rc == -EACCES   ? "is not executable"
                      : rc == -EISDIR ? "is a directory, not a program"
                                      : "does not exist",
                      where, workdir);
}

/* One argument as a shell would need it to be typed (for reading only: the
 * run never passes it through a shell), appended to out. */
static void put_arg(tp_buf_t *out, const char *a) {
    if (*a && strspn(a, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789"
                        "-_./=:,+@%") == strlen(a)) {
        tp__buf_puts(out, a);
        return;
    }
    tp__buf_puts(out, "'");
    for (; *a; a++)
        tp__buf_puts(out, *a == '\'' ? "'\\''" : (char[2]){*a, 0});
    tp__buf_puts(out, "'");
}

/* The first n jobs the search would hand out, with the argv of each (as the
 * run builds it: inactive parameters left out) into out; a job whose argv
 * cannot be built is a mistake, into bad. */
static void show_jobs(const tp_experiment_t *x, const char *dir, int n, tp_buf_t *out,
                      tp_buf_t *bad) {
    tp_error_t err = {0};
    tp_scheduler_t *s = tp__run_scheduler_new(x, &err);
    if (!s) {
        tp__buf_printf(bad, "%s: %s\n", x->path, err.msg);
        return;
    }
    tp__buf_printf(out,
                   "the first %d configurations and the exact argv of each (nothing is run):\n", n);
    for (int i = 0; i < n; i++) {
        tp_job_t job;
        memset(&job, 0, sizeof job);
        if (s->ops->next(s, 0, &job) != 1) break;
        char id[32], home[4200], budget[32] = "", params[600];
        snprintf(id, sizeof id, "%lld", (long long)job.trial);
        tp__trial_path(home, sizeof home, dir, (long long)job.trial, NULL);
        if (x->budget_name) tp__fmt_double(job.budget, budget);
        tp__params_text(job.config, params, sizeof params);
        tp__buf_printf(out, "trial %s: %s%s%s\n  ", id, params, *budget ? "  budget " : "", budget);
        tp_subst_extra_t extra = {.trial_id = id,
                                  .trial_dir = home,
                                  .budget_name = x->budget_name,
                                  .budget_value = budget};
        /* Fused: shown as a process of this one configuration (the run groups several). */
        json_t *one = x->fuse.max ? json_pack("[{s:i, s:I, s:O}]", "config", 0, "trial",
                                              (json_int_t)job.trial, "params", job.config)
                                  : NULL;
        char *configs = one ? json_dumps(one, JSON_COMPACT) : NULL;
        json_decref(one);
        extra.configs_json = configs;
        json_t *argv = tp__substitute_argv(x->argv, x->argc, &x->space, job.config, &extra, &err);
        if (!argv) tp__buf_printf(bad, "%s: trial %s: %s\n", x->path, id, err.msg);
        size_t k;
        json_t *a;
        json_array_foreach(argv, k, a) {
            if (k) tp__buf_puts(out, " ");
            put_arg(out, json_string_value(a));
        }
        tp__buf_puts(out, "\n");
        json_decref(argv);
        free(configs);
        json_decref(job.config);
    }
    tp__scheduler_free(s);
}

/* What an existing experiment's trials say of the next run. */
typedef struct next_ctx {
    tp_buf_t *out;
    int64_t trials;      /* rows with an id >= 0 (forked seeds are < 0) */
    int64_t by_state[8]; /* pending, running, paused, completed, stopped, failed, other */
} next_ctx_t;

static const char *const states[] = {"pending",   "running", "paused",
                                     "completed", "stopped", "failed"};

/* One stored trial: counted, and said when the next run takes it up. */
static int next_row(const tp_trial_row_t *row, void *ud) {
    next_ctx_t *n = ud;
    if (row->id < 0) return 0;
    n->trials++;
    size_t st = 0;
    while (st < TP_ARRAY_LEN(states) && strcmp(states[st], row->state))
        st++;
    n->by_state[st]++;
    const char *why = st == 0 && row->attempts ? "runs again: its last attempt was cut short or "
                                                 "failed with retries left"
                      : st == 0                ? "waits to start"
                      : st == 1                ? "runs again: it was running when the last run "
                                                 "ended"
                      : st == 2                ? "waits at its rung; runs on if the scheduler "
                                                 "promotes it"
                                               : NULL;
    if (!why) return 0;
    char params[400];
    json_t *p = json_loads(row->params, 0, NULL);
    tp__params_text(p, params, sizeof params);
    json_decref(p);
    tp__buf_printf(n->out, "    trial %lld (%s, %d attempt(s)): %s\n      %s\n", (long long)row->id,
                   row->state, row->attempts, why, params);
    return 0;
}

/* `run --dry-run` on a directory that holds an experiment already: which
 * changes of the file the run would take and which it would refuse (the
 * check the run makes, tp__config_changes), then which trials it would
 * run next. Reads the store read-only, writes nothing. Returns 1 if it
 * holds one (said into out; a refusal into bad), 0 if none, or -errno. */
static int describe_existing(const tp_experiment_t *x, const char *dir, tp_buf_t *out,
                             tp_buf_t *bad) {
    char path[4200];
    struct stat st;
    snprintf(path, sizeof path, "%s/%s", dir, TP_STORE_FILE);
    if (stat(path, &st) != 0) return 0;
    tp_store_t *s;
    tp_error_t err = {0};
    int rc = tp__store_open(dir, TP_STORE_READONLY, &s, &err);
    if (rc != 0) {
        tp__buf_printf(bad, "%s: %s\n", dir, err.msg);
        return rc;
    }
    char *old = tp__store_meta_get(s, "experiment_text");
    if (!old) {
        tp__store_close(s);
        return 0;
    }
    tp__buf_printf(out, "%s holds this experiment already:\n", dir);
    tp_buf_t taken, refused;
    tp__buf_init(&taken);
    tp__buf_init(&refused);
    int results = 0; /* while no trial has one, a changed command is taken */
    tp__run_count_results(s, &results);
    int changed =
        strcmp(old, x->text) ? tp__config_changes(old, x->text, results, &taken, &refused) : 0;
    if (changed < 0)
        tp__buf_printf(bad, "%s: the file the experiment was started from is no YAML\n", dir);
    if (taken.len) {
        tp__buf_printf(out, "  changes of %s since its last run, which the run takes:\n", x->path);
        for (char *line = strtok(taken.data, "\n"); line; line = strtok(NULL, "\n"))
            tp__buf_printf(out, "  %s\n", line);
    } else if (!changed)
        tp__buf_printf(out, "  %s is as the last run had it\n", x->path);
    if (changed > 0)
        tp__buf_printf(bad,
                       "%s: the run would refuse these changes of %s, which give the recorded "
                       "trials another meaning:\n%s\nrestore them, or start anew with a new "
                       "--dir (or --fork %s --dir DIR)\n",
                       dir, x->path, refused.data, dir);
    tp__buf_free(&taken);
    tp__buf_free(&refused);
    free(old);
    next_ctx_t n = {.out = out};
    tp_buf_t next;
    tp__buf_init(&next);
    n.out = &next;
    rc = tp__store_trials(s, next_row, &n);
    tp__store_close(s);
    tp__buf_printf(out, "  %lld trial(s) recorded:", (long long)n.trials);
    for (size_t i = 0; i < TP_ARRAY_LEN(states); i++)
        if (n.by_state[i]) tp__buf_printf(out, " %lld %s", (long long)n.by_state[i], states[i]);
    tp__buf_puts(out, "\n  next:\n");
    if (next.len) tp__buf_puts(out, next.data);
    uint64_t want = x->search.trials;
    if (strcmp(x->search.algorithm, "grid") != 0 && want > (uint64_t)n.trials)
        tp__buf_printf(out, "    then up to %llu new trial(s) (search.trials is %llu)\n",
                       (unsigned long long)(want - (uint64_t)n.trials), (unsigned long long)want);
    else if (!next.len)
        tp__buf_printf(out, "    nothing new: raise search.trials to run more\n");
    tp__buf_free(&next);
    return rc < 0 ? rc : 1;
}

/* See run.h. Every check is made before anything is said: a mistake is
 * never printed beside "no mistakes". */
int tp__run_dry(const tp_run_opts_t *o, int show) {
    tp_experiment_t x;
    tp_error_t err = {0};
    tp_buf_t bad, out;
    tp__buf_init(&bad);
    tp__buf_init(&out);
    if (tp__experiment_load_all(o->file, &x, &err, &bad) != 0) {
        fputs(bad.data ? bad.data : err.msg, stderr);
        tp__buf_free(&bad);
        return TP_EXIT_CONFIG;
    }
    int code = TP_EXIT_OK, unimportable = 0;
    char *workdir = realpath(x.workdir ? x.workdir : ".", NULL);
    if (!workdir) {
        tp__buf_printf(&bad,
                       "%s: workdir \"%s\" is not a directory (%s); create it or fix the path\n",
                       x.path, x.workdir ? x.workdir : ".", strerror(errno));
    } else if (x.cluster.kind != TP_CLUSTER_LOCAL) {
        tp__buf_printf(&out, "the program %s is looked up on the cluster's nodes, not here\n",
                       x.argv[0]);
    } else {
        tp__buf_printf(&out, "the programs, as each trial finds them from %s:\n", workdir);
        if (tp__run_describe_programs(&x, workdir, &out, &unimportable) != 0 &&
            tp__run_check_program(&x, workdir, &err) != 0)
            tp__buf_printf(&bad, "%s\n", err.msg);
    }
    code = bad.len ? TP_EXIT_CONFIG : TP_EXIT_OK;
    char dir[4096];
    if (o->dir)
        snprintf(dir, sizeof dir, "%s", o->dir);
    else
        snprintf(dir, sizeof dir, "runs/%s", x.name);
    size_t before = bad.len;
    int existing = describe_existing(&x, dir, &out, &bad);
    if (bad.len > before && code == TP_EXIT_OK) code = TP_EXIT_STORE;
    before = bad.len;
    if (existing != 1) show_jobs(&x, dir, show, &out, &bad);
    if (bad.len > before && code == TP_EXIT_OK) code = TP_EXIT_CONFIG;
    if (code == TP_EXIT_OK) printf("%s: no mistakes\n", x.path);
    fputs(out.data ? out.data : "", stdout);
    if (unimportable)
        printf("warning: %d module(s) that the script imports do not import here; its trials "
               "would fail at that import unless the nodes they run on have them\n",
               unimportable);
    fflush(stdout);
    fputs(bad.data ? bad.data : "", stderr);
    free(workdir);
    tp__buf_free(&bad);
    tp__buf_free(&out);
    tp__experiment_free(&x);
    return code;
}
