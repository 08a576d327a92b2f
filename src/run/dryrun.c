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

tp_scheduler_t *tp__run_scheduler_new(const tp_experiment_t *x, tp_error_t *err) {
    tp_scheduler_cfg_t scfg = {.scheduler = x->scheduler, .sampler = x->search,
                               .budget = {.name = x->budget_name, .min = x->budget_min,
                                          .max = x->budget_max, .eta = x->budget_eta},
                               .maximize = x->maximize};
    tp_scheduler_t *s = tp__scheduler_new(&x->space, &scfg, err);
    if (s && x->surrogate.param) s = tp__surrogate_wrap(s, &x->surrogate, err);
    return s;
}

/* 0 if path is a regular file we may execute, else -errno. */
static int executable(const char *path) {
    struct stat st;
    if (stat(path, &st) != 0) return -errno;
    if (!S_ISREG(st.st_mode)) return -EISDIR;
    return access(path, X_OK) == 0 ? 0 : -EACCES;
}

int tp__run_check_program(const tp_experiment_t *x, const char *workdir, tp_error_t *err) {
    const char *prog = x->argv[0];
    if (strchr(prog, '{')) return 0; /* decided per trial */
    char path[8192];
    int rc = -ENOENT;
    if (strchr(prog, '/')) {
        if (prog[0] == '/')
            snprintf(path, sizeof path, "%s", prog);
        else
            snprintf(path, sizeof path, "%s/%s", workdir, prog);
        rc = executable(path);
    } else {
        const char *dirs = getenv("PATH");
        for (const char *p = dirs ? dirs : "/usr/bin:/bin"; rc != 0 && *p;) {
            size_t n = strcspn(p, ":");
            snprintf(path, sizeof path, "%.*s/%s", (int)n, n ? p : ".", prog);
            int here = executable(path);
            if (here == 0 || here == -EACCES) rc = here;
            p += n + (p[n] == ':');
        }
    }
    if (rc == 0) return 0;
    const char *where = strchr(prog, '/') ? "from the working directory" : "on PATH, seen from";
    return tp__errorf(err, rc, "%s:%d:%d: the program \"%s\" %s %s %s; fix the path in "
                               "command (or `workdir`), nothing was run",
                      x->path, x->program_line, x->program_col, prog,
                      rc == -EACCES ? "is not executable" : rc == -EISDIR ? "is a directory, not a program" : "does not exist",
                      where, workdir);
}

/* One argument as a shell would need it to be typed (for reading only: the
 * run never passes it through a shell). */
static void print_arg(const char *a) {
    if (*a && strspn(a, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789"
                        "-_./=:,+@%") == strlen(a)) {
        fputs(a, stdout);
        return;
    }
    putchar('\'');
    for (; *a; a++) {
        if (*a == '\'') fputs("'\\''", stdout);
        else putchar(*a);
    }
    putchar('\'');
}

/* The first n jobs the search would hand out, with their argv. */
static int show_jobs(const tp_experiment_t *x, const char *dir, int n) {
    tp_error_t err = {0};
    tp_scheduler_t *s = tp__run_scheduler_new(x, &err);
    if (!s) {
        fprintf(stderr, "%s: %s\n", x->path, err.msg);
        return TP_EXIT_CONFIG;
    }
    int code = TP_EXIT_OK;
    for (int i = 0; i < n && code == TP_EXIT_OK; i++) {
        tp_job_t job;
        memset(&job, 0, sizeof job);
        if (s->ops->next(s, 0, &job) != 1) break;
        char id[32], home[4200], budget[32] = "", params[600];
        snprintf(id, sizeof id, "%lld", (long long)job.trial);
        tp__trial_path(home, sizeof home, dir, (long long)job.trial, NULL);
        if (x->budget_name) tp__fmt_double(job.budget, budget);
        tp__params_text(job.config, params, sizeof params);
        printf("trial %s: %s%s%s\n  ", id, params, *budget ? "  budget " : "", budget);
        tp_subst_extra_t extra = {.trial_id = id, .trial_dir = home,
                                  .budget_name = x->budget_name, .budget_value = budget};
        /* Fused: shown as a process of this one configuration (the run groups several). */
        json_t *one = x->fuse.max ? json_pack("[{s:i, s:I, s:O}]", "config", 0, "trial",
                                             (json_int_t)job.trial, "params", job.config)
                                  : NULL;
        char *configs = one ? json_dumps(one, JSON_COMPACT) : NULL;
        json_decref(one);
        extra.configs_json = configs;
        for (size_t k = 0; k < x->argc; k++) {
            char *arg = tp__substitute(x->argv[k], job.config, &extra, &err);
            if (!arg) {
                fprintf(stderr, "%s: trial %s: %s\n", x->path, id, err.msg);
                code = TP_EXIT_CONFIG;
                break;
            }
            if (k) putchar(' ');
            print_arg(arg);
            free(arg);
        }
        putchar('\n');
        free(configs);
        json_decref(job.config);
    }
    tp__scheduler_free(s);
    return code;
}

int tp__run_dry(const tp_run_opts_t *o, int show) {
    tp_experiment_t x;
    tp_error_t err = {0};
    if (tp__experiment_load(o->file, &x, &err) != 0) {
        fprintf(stderr, "%s\n", err.msg);
        return TP_EXIT_CONFIG;
    }
    int code = TP_EXIT_OK;
    char *workdir = realpath(x.workdir ? x.workdir : ".", NULL);
    if (!workdir) {
        fprintf(stderr, "%s: workdir \"%s\" is not a directory (%s); create it or fix the path\n",
                x.path, x.workdir ? x.workdir : ".", strerror(errno));
        code = TP_EXIT_CONFIG;
    } else if (x.cluster.kind == TP_CLUSTER_LOCAL && tp__run_check_program(&x, workdir, &err)) {
        fprintf(stderr, "%s\n", err.msg);
        code = TP_EXIT_CONFIG;
    }
    char dir[4096];
    if (o->dir)
        snprintf(dir, sizeof dir, "%s", o->dir);
    else
        snprintf(dir, sizeof dir, "runs/%s", x.name);
    if (code == TP_EXIT_OK) {
        printf("%s: no mistakes; the program %s is found from %s\n", x.path, x.argv[0], workdir);
        printf("the first %d configurations and the exact argv of each (nothing is run):\n", show);
        code = show_jobs(&x, dir, show);
    }
    free(workdir);
    tp__experiment_free(&x);
    return code;
}
