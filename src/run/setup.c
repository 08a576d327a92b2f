/* setup: what `tunepack run` does before and after the loop: take the
 * experiment directory's lock, open or create its store, check it holds this
 * experiment, and reconcile the journal with reality (attempts that were
 * running when the last orchestrator died run again). */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include "config/config.h"
#include "run/orchestrator_internal.h"
#include "run/run.h"
#include "search/search.h"
#include "store/store.h"

static void make_token(char out[33]) {
    unsigned char b[16];
    int fd = open("/dev/urandom", O_RDONLY | O_CLOEXEC);
    if (fd < 0 || read(fd, b, sizeof b) != (ssize_t)sizeof b) {
        uint64_t x = (uint64_t)getpid() ^ (uint64_t)(tp__wall_s() * 1e6);
        for (size_t i = 0; i < sizeof b; i++)
            b[i] = (unsigned char)(x >> (8 * (i % 8))) ^ (unsigned char)i;
    }
    if (fd >= 0) close(fd);
    for (size_t i = 0; i < sizeof b; i++)
        snprintf(out + 2 * i, 3, "%02x", b[i]);
}

/* Take the directory's lock and write our pid into it. */
static int lock_dir(tp_run_t *r, tp_error_t *err) {
    char path[4200];
    snprintf(path, sizeof path, "%s/lock", r->dir);
    r->lock_fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0644);
    if (r->lock_fd < 0)
        return tp__errorf(err, -errno, "cannot create %s: %s", path, strerror(errno));
    if (flock(r->lock_fd, LOCK_EX | LOCK_NB) != 0) {
        char buf[32] = {0};
        if (pread(r->lock_fd, buf, sizeof buf - 1, 0) < 0) buf[0] = 0;
        return tp__errorf(err, -EBUSY,
                          "the experiment in %s is already running (pid %d); stop it with "
                          "`tunepack stop %s` or wait for it",
                          r->dir, atoi(buf), r->dir);
    }
    char pid[32];
    int n = snprintf(pid, sizeof pid, "%d\n", (int)getpid());
    if (ftruncate(r->lock_fd, 0) != 0 || pwrite(r->lock_fd, pid, (size_t)n, 0) != n)
        return tp__errorf(err, -errno, "cannot write %s: %s", path, strerror(errno));
    return 0;
}

static int load_trial_row(const tp_trial_row_t *row, void *ud) {
    tp_run_t *r = ud;
    json_error_t jerr;
    json_t *params = json_loads(row->params, 0, &jerr);
    if (!params) params = json_object();
    if (row->id < 0) {
        tp__run_load_seeded(r, row, params);
        return 0;
    }
    int state = tp__trial_state_from_name(row->state);
    if (state < 0) {
        tp__log(TP_LOG_WARN, "trial %lld has an unknown state \"%s\" in the store; it runs again",
                (long long)row->id, row->state);
        state = TP_TRIAL_PENDING;
    }
    trial_t *t = tp__trials_load(&r->trials, row->id, params, (tp_trial_state_t)state);
    t->attempts = row->attempts;
    t->failures = row->failures;
    t->has_value = row->has_value;
    t->value = row->value;
    t->best = row->best;
    t->step = row->step;
    if (row->step != TP_STORE_NO_STEP) tp__trial_job_set_checkpoint(t, row->step);
    tp__trial_job_restore(t, row->rung, row->budget);
    if (row->metrics) tp__buf_append(&t->last, row->metrics, strlen(row->metrics));
    tp__trial_job_set_why(t, row->decision ? row->decision : "");
    return 0;
}

typedef struct last_report {
    double value; /* last objective reported, NaN if none */
    int64_t step; /* its step */
} last_report_t;

static int keep_last(int64_t step, double value, void *ud) {
    last_report_t *lr = ud;
    lr->value = value;
    lr->step = step;
    return 0;
}

/* Reconcile the journal with reality: attempts that were running when the
 * last orchestrator died are interrupted and run again; pending trials are
 * queued; trials with a final value compete for the best. */
static int resume_trials(tp_run_t *r) {
    /* Attempts a stop interrupted (journaled by the run that stopped) and
     * those a crash left running. */
    char *before = tp__store_meta_get(tp__journal_store(&r->journal), "interrupted");
    int interrupted = before ? atoi(before) : 0;
    free(before);
    for (size_t i = 0; i < tp__trials_n(&r->trials); i++) {
        trial_t *t = tp__trials_get(&r->trials, (int64_t)i);
        if (!t) continue;
        if (t->state == TP_TRIAL_RUNNING) {
            /* What its job reported before the crash still counts. */
            last_report_t lr = {.value = NAN, .step = TP_STORE_NO_STEP};
            tp__journal_ok(&r->journal,
                           tp__store_metric_values(tp__journal_store(&r->journal), t->id,
                                                   t->attempts, keep_last, &lr),
                           "reading the reports of an interrupted trial");
            t->has_value = !isnan(lr.value);
            t->value = t->best = lr.value;
            t->step = lr.step;
            tp_transition_t how = {.detail = "interrupted", .requeue = TP_REQUEUE_INTERRUPTED};
            tp__trial_set_state(&r->trials, t, TP_TRIAL_PENDING, &how);
            interrupted++;
        } else if (t->state == TP_TRIAL_PENDING) {
            tp__trials_push(&r->trials, t);
        } else {
            tp__note_best(r, t);
        }
    }
    for (size_t i = 0; i < r->nseeded; i++)
        tp__note_best(r, r->seeded[i]);
    return interrupted;
}

/* What the resumed run starts from, once the search's decisions are replayed
 * (trials the search had closed may be waiting again). */
static void announce_resume(tp_run_t *r, int interrupted) {
    const int *c = tp__trials_counts(&r->trials);
    tp__view_done_before(r, c[TP_TRIAL_COMPLETED] + c[TP_TRIAL_FAILED] + c[TP_TRIAL_STOPPED]);
    r->trials.interrupted = 0; /* this run's own interruptions are counted from here */
    if (tp__trials_n(&r->trials))
        tp__log(TP_LOG_INFO,
                "resuming %s: %d completed, %d stopped early, %d failed, %d paused, %d pending "
                "(%d interrupted)",
                r->dir, c[TP_TRIAL_COMPLETED], c[TP_TRIAL_STOPPED], c[TP_TRIAL_FAILED],
                c[TP_TRIAL_PAUSED], c[TP_TRIAL_PENDING], interrupted);
}

enum { WAITS = 1, STOPPED_EARLY = 2 }; /* replay_t.job bits */

typedef struct replay {
    tp_run_t *r;        /* the run */
    int64_t trial;      /* trial whose reports are replayed */
    int64_t diverged;   /* first decision the scheduler did not repeat, -1 if none */
    int64_t count;      /* decisions replayed */
    unsigned char *job; /* by trial id (below tp__trials_n): how its last journaled job ended */
    int limit_known;    /* a "trials" decision was replayed */
    uint64_t limit;     /* the last one's number of trials (0: no bound) */
    json_t *first;      /* pbt: the configuration each exploited trial was created with, by
                           trial id (its store row holds its latest) */
    int64_t ex_trial;   /* pbt: the trial of the `exploit` decision just read, -1 if none */
    int64_t ex_donor;   /* its donor */
    json_t *ex_new;     /* its new configuration */
} replay_t;

/* Pass one over the decisions: each exploited trial's first configuration. */
static int first_params(const tp_decision_row_t *d, void *ud) {
    replay_t *rp = ud;
    if (strcmp(d->kind, "exploit") != 0) return 0;
    json_t *old = tp__lineage_first_params(d->detail);
    if (old) {
        char key[32];
        snprintf(key, sizeof key, "%lld", (long long)d->trial);
        json_object_set_new(rp->first, key, old);
    }
    return 0;
}

/* The configuration trial t was created with. */
static const json_t *created_with(const replay_t *rp, const trial_t *t) {
    char key[32];
    snprintf(key, sizeof key, "%lld", (long long)t->id);
    const json_t *old = json_object_get(rp->first, key);
    return old ? old : t->params;
}

static int replay_report(int64_t step, double value, void *ud) {
    replay_t *rp = ud;
    char why[200];
    rp->r->sched->ops->report(rp->r->sched, rp->trial, step, value, 0, why, sizeof why);
    return 0;
}

static int replay_one(const tp_decision_row_t *d, void *ud) {
    replay_t *rp = ud;
    tp_scheduler_t *s = rp->r->sched;
    rp->count++;
    unsigned char *ended = d->trial >= 0 && (size_t)d->trial < tp__trials_n(&rp->r->trials)
                               ? &rp->job[d->trial]
                               : NULL;
    if (ended) { /* a job's ok result leaves it waiting; any later word on it does not */
        if (strcmp(d->kind, "stop") == 0)
            *ended |= STOPPED_EARLY;
        else if (strcmp(d->kind, "result") == 0)
            *ended = d->ok && !(*ended & STOPPED_EARLY) ? WAITS : 0;
        else if (strcmp(d->kind, "timing") != 0)
            *ended = 0;
    }
    if (tp__deadline_replay(rp->r, d) || tp__retry_replay(rp->r, d)) return 0;
    if (strcmp(d->kind, "exploit") == 0) { /* its job's decision follows: compared there */
        json_t *o = d->detail ? json_loads(d->detail, 0, NULL) : NULL;
        rp->ex_trial = d->trial;
        rp->ex_donor = json_integer_value(json_object_get(o, "donor"));
        json_decref(rp->ex_new);
        rp->ex_new = json_incref(json_object_get(o, "new"));
        json_decref(o);
        return 0;
    }
    if (strcmp(d->kind, "trials") == 0) { /* the decisions that follow saw this many */
        rp->limit_known = 1;
        rp->limit = d->has_value && d->value > 0 ? (uint64_t)d->value : 0;
        tp__scheduler_set_trials(s, rp->limit);
        return 0;
    }
    if (strcmp(d->kind, "job") == 0 || strcmp(d->kind, "refused") == 0) {
        tp_job_t job;
        memset(&job, 0, sizeof job);
        int rc = s->ops->next(s, d->at, &job);
        /* the same job (or refusal), and a new trial with the configuration it was given */
        int same = rc == 1 && job.trial == d->trial && !job.refused == !strcmp(d->kind, "job") &&
                   (job.refused || job.rung == d->rung);
        if (rc == 1 && job.is_new) {
            const trial_t *t = tp__trials_get(&rp->r->trials, d->trial);
            same = same && t && t->params && json_equal(created_with(rp, t), job.config);
            json_decref(job.config);
        }
        /* an exploit: the one journaled just before, the same donor and configuration */
        int journaled = rp->ex_trial >= 0 && rp->ex_trial == d->trial;
        if (rc == 1 && job.exploit) {
            same = same && journaled && job.donor == rp->ex_donor && rp->ex_new &&
                   json_equal(rp->ex_new, job.config);
            json_decref(job.config);
        } else if (journaled) {
            same = 0;
        }
        rp->ex_trial = -1;
        if (!same && rp->diverged < 0) rp->diverged = d->seq;
        trial_t *jt = same ? tp__trials_get(&rp->r->trials, d->trial) : NULL;
        if (jt) tp__groups_set_group(jt, job.group);
    } else if (strcmp(d->kind, "result") == 0 || strcmp(d->kind, "deadline-stop") == 0) {
        /* The reports of the job, then its result: what the scheduler saw (a
         * job the deadline stopped took the trial out of the search). */
        int ok = d->ok && strcmp(d->kind, "result") == 0;
        rp->trial = d->trial;
        trial_t *t = tp__trials_get(&rp->r->trials, d->trial);
        if (t && ok) t->results++;
        if (ok)
            tp__store_metric_values(tp__journal_store(&rp->r->journal), d->trial, d->attempt,
                                    replay_report, rp);
        if (ok && rp->r->x.nconstraints) { /* the values told with it, as journaled */
            double c[TP_MAX_CONSTRAINTS];
            tp__search_json_numbers(d->constraints, c, TP_MAX_CONSTRAINTS);
            tp__scheduler_constrain(s, d->trial, c);
        }
        if (s->ops->result_values && tp__search_nobj(&s->cfg.sampler) > 1) {
            double v[TP_MAX_OBJECTIVES];
            tp__search_json_numbers(d->objectives, v, TP_MAX_OBJECTIVES);
            s->ops->result_values(s, d->trial, d->rung, ok, v, d->at);
            size_t m = rp->r->x.nobjectives, j = 0;
            while (j < m && isfinite(v[j]))
                j++;
            if (ok && j == m) tp__view_front_add(rp->r, d->trial, v); /* fifo: all final */
        } else {
            s->ops->result(s, d->trial, d->rung, ok, ok && d->has_value ? d->value : NAN, d->at);
        }
    }
    return 0;
}

/* The number of trials the search may create is n from here on (the first
 * run's, or a new one): a journaled call, so that a replay hands the
 * scheduler the number each decision was made under. Replayed under the
 * raised number, a search that had ended for want of trials took other
 * turns than it did (hypersched continues its best instead of starting a
 * new trial) and the replay diverged. */
static void journal_trials(tp_run_t *r, uint64_t n) {
    char detail[80];
    if (n)
        snprintf(detail, sizeof detail, "the search may create %llu trials", (unsigned long long)n);
    else
        snprintf(detail, sizeof detail, "no bound on the number of trials");
    tp_decision_row_t d = {.at = tp__wall_s(),
                           .kind = "trials",
                           .trial = -1,
                           .ok = 1,
                           .has_value = 1,
                           .value = (double)n,
                           .detail = detail};
    tp__journal_ok(&r->journal, tp__store_decision(tp__journal_tx(&r->journal), &d),
                   "recording the number of trials");
    tp__scheduler_set_trials(r->sched, n);
}

/* The search closed these trials when it ended (stopped while they waited
 * for a promotion). Replayed, the scheduler sees them waiting again: its
 * last word on each was an ok result and it calls none final. The
 * experiment was extended (more trials, a later deadline), so they may be
 * promoted now, and the run must agree with its scheduler: they wait too.
 * Left stopped, a promotion of one found a trial that is not waiting, and
 * the scheduler, which counts it as running, waited for it forever. */
static void reopen_closed(tp_run_t *r, const unsigned char *job) {
    for (size_t i = 0; i < tp__trials_n(&r->trials); i++) {
        trial_t *t = tp__trials_get(&r->trials, (int64_t)i);
        if (t && t->state == TP_TRIAL_STOPPED && job[i] == WAITS &&
            !r->sched->ops->final(r->sched, t->id, t->job.rung))
            tp__trial_set_closed(&r->trials, t, 0);
    }
}

/* Rebuild the scheduler: replay every call journaled by the runs before,
 * in order. The scheduler is pure, so it ends in the state it had; jobs
 * that were running when the last run died are in flight again, run by
 * their pending trials. */
static void replay_decisions(tp_run_t *r) {
    uint64_t want = r->sched->cfg.sampler.trials; /* this run's file */
    replay_t rp = {.r = r,
                   .diverged = -1,
                   .job = tp__xcalloc(tp__trials_n(&r->trials) + 1, 1),
                   .first = json_object(),
                   .ex_trial = -1};
    tp__journal_ok(&r->journal,
                   tp__store_decisions(tp__journal_store(&r->journal), first_params, &rp),
                   "reading the search's decisions");
    tp__journal_ok(&r->journal,
                   tp__store_decisions(tp__journal_store(&r->journal), replay_one, &rp),
                   "reading the search's decisions");
    json_decref(rp.first);
    json_decref(rp.ex_new);
    if (rp.diverged >= 0)
        tp__log(TP_LOG_WARN,
                "replaying the search's %lld decisions diverged at decision %lld; it goes on "
                "from the journaled state",
                (long long)rp.count, (long long)rp.diverged);
    if (!rp.limit_known || rp.limit != want) journal_trials(r, want);
    reopen_closed(r, rp.job);
    free(rp.job);
}

static int count_result(const tp_trial_row_t *row, void *ud) {
    static const char *const ended_a_job[] = {"completed", "paused", "stopped"};
    for (size_t i = 0; i < TP_ARRAY_LEN(ended_a_job); i++)
        *(int *)ud += row->id >= 0 && strcmp(row->state, ended_a_job[i]) == 0;
    return 0;
}

int tp__run_count_results(tp_store_t *s, int *n) {
    *n = 0;
    return tp__store_trials(s, count_result, n);
}

/* The file differs from the one the experiment was started from: keys that
 * may change (trials, concurrency, timeout, ...) are taken and the change
 * is journaled; so is a changed command while no trial of this experiment
 * has a result (completed, paused at a rung or stopped early; a fork's
 * seeded trials ran elsewhere), shown as a diff. A change of meaning
 * (space, metric, search, the command once results exist, ...) is refused
 * with what changed and the ways out. The new text is recorded, so a resume
 * with the same file sees no change and every later launch uses it. */
static int accept_changes(tp_run_t *r, const char *old_text, tp_error_t *err) {
    tp_buf_t ok, refused;
    tp__buf_init(&ok);
    tp__buf_init(&refused);
    int results = 0;
    tp__journal_ok(&r->journal, tp__run_count_results(tp__journal_store(&r->journal), &results),
                   "reading the trials");
    int rc = tp__config_changes(old_text, r->x.text, results, &ok, &refused);
    if (rc != 0) {
        char why[200] = "";
        const char *list = refused.len ? refused.data : "";
        if (strncmp(list, "  command:", 10) == 0 || strstr(list, "\n  command:"))
            snprintf(why, sizeof why,
                     " The command may change only while no trial has a result; %d have one.",
                     results);
        rc = tp__errorf(err, -EEXIST,
                        "%s holds an experiment whose recorded trials would mean something else "
                        "under %s as it is now:\n"
                        "%s\n"
                        "Either restore those keys, or run it as a new experiment: with a new "
                        "--dir DIR to start afresh, or with --fork %s --dir DIR to start one "
                        "seeded with the results here that the new space holds (they stay here "
                        "as they are).%s Keys such as trials, concurrency, timeout, retries and "
                        "resources may change between runs.",
                        r->dir, r->x.path, rc < 0 ? "  (the stored file is no YAML)" : refused.data,
                        r->dir, why);
    } else if (ok.len) {
        tp_store_t *s = tp__journal_store(&r->journal);
        tp__log(TP_LOG_INFO, "%s changed since the last run; taking the new values:\n%s", r->x.path,
                ok.data);
        if (tp__store_begin(s) || tp__store_meta_set(s, "experiment_text", r->x.text) ||
            tp__store_event(s, -1, 0, "experiment-changed", ok.data, tp__wall_s()) ||
            tp__store_commit(s))
            rc = tp__errorf(err, -EIO, "cannot record the change of %s in %s", r->x.path, r->dir);
    }
    tp__buf_free(&ok);
    tp__buf_free(&refused);
    return rc;
}

/* Trial folders (DIR/trials/NNNNNN) in the experiment directory. O(entries). */
static size_t count_trial_dirs(const char *dir) {
    char path[4200];
    snprintf(path, sizeof path, "%s/trials", dir);
    DIR *d = opendir(path);
    if (!d) return 0;
    size_t n = 0;
    for (struct dirent *e; (e = readdir(d)) != NULL;)
        n += strspn(e->d_name, "0123456789") == strlen(e->d_name) && *e->d_name;
    closedir(d);
    return n;
}

/* Trials ran here before, so the store must hold an experiment: refuse to
 * start a new one over a store that is missing, empty, truncated or damaged
 * (it would overwrite the old trials' logs). Changes nothing. */
static int refuse_lost_store(tp_run_t *r, tp_error_t *err) {
    size_t n = count_trial_dirs(r->dir);
    if (n == 0) return 0;
    tp_store_t *probe;
    tp_error_t why = {0};
    int rc = tp__store_open(r->dir, TP_STORE_READONLY, &probe, &why);
    if (rc == 0) {
        char *text = tp__store_meta_get(probe, "experiment_text");
        tp__store_close(probe);
        if (text) {
            free(text);
            return 0;
        }
        snprintf(why.msg, sizeof why.msg, "it holds no experiment");
    } else if (rc == -EBADMSG) { /* damaged: the message says what and how to recover */
        *err = why;
        return rc;
    }
    char path[4200];
    struct stat st;
    snprintf(path, sizeof path, "%s/%s", r->dir, TP_STORE_FILE);
    if (stat(path, &st) != 0)
        snprintf(why.msg, sizeof why.msg, "it is missing");
    else if (st.st_size == 0)
        snprintf(why.msg, sizeof why.msg, "it is empty (0 bytes)");
    return tp__errorf(err, -EBADMSG,
                      "%s cannot be used: %s, but %s/trials holds %zu trial folder(s), so trials "
                      "ran here and their record is lost or damaged. Nothing was changed. "
                      "Restore %s from a backup (or recover it: sqlite3 %s .recover), or move "
                      "the directory aside to start afresh (mv %s %s.old)",
                      path, why.msg, r->dir, n, TP_STORE_FILE, path, r->dir, r->dir);
}

/* `permissions`: DIR and its store (with SQLite's -wal and -shm, which
 * take the store's mode when created) readable by whom it says: by default
 * the owner only, for the store keeps the token and the `env` values. The
 * store is created with its mode, never world-readable for a moment. */
static int apply_permissions(tp_run_t *r, tp_error_t *err) {
    if (chmod(r->dir, (mode_t)r->x.dir_mode) != 0)
        return tp__errorf(err, -errno, "cannot set the mode of %s: %s", r->dir, strerror(errno));
    static const char *const files[] = {TP_STORE_FILE, TP_STORE_FILE "-wal", TP_STORE_FILE "-shm"};
    for (size_t i = 0; i < TP_ARRAY_LEN(files); i++) {
        char path[4200];
        snprintf(path, sizeof path, "%s/%s", r->dir, files[i]);
        int fd = i == 0 ? open(path, O_RDONLY | O_CREAT | O_CLOEXEC, r->x.file_mode) : -1;
        if (fd >= 0) close(fd);
        if (chmod(path, (mode_t)r->x.file_mode) != 0 && errno != ENOENT)
            return tp__errorf(err, -errno, "cannot set the mode of %s: %s", path, strerror(errno));
    }
    return 0;
}

/* Open or create the store and check it holds this experiment. */
static int open_experiment(tp_run_t *r, tp_error_t *err) {
    r->trials.journal = &r->journal;
    int rc = refuse_lost_store(r, err);
    if (rc == 0) rc = apply_permissions(r, err);
    if (rc) return rc;
    rc = tp__journal_open(&r->journal, r->dir, err);
    if (rc) return rc;
    tp_store_t *s = tp__journal_store(&r->journal);
    char *text = tp__store_meta_get(s, "experiment_text");
    if (text) {
        char *xid = tp__store_meta_get(s, "experiment_id");
        snprintf(r->experiment_id, sizeof r->experiment_id, "%s", xid ? xid : "");
        free(xid);
        /* before any write: a store behind its trial folders is refused as it is */
        rc = tp__rundir_check_store(r->dir, s, r->experiment_id, r->x.path, err);
        if (rc) {
            free(text);
            return rc;
        }
        int changed = strcmp(text, r->x.text) == 0 ? 0 : accept_changes(r, text, err);
        free(text);
        if (changed) return changed;
        if (!*r->experiment_id) { /* a store from before trial.json: its identity from now */
            make_token(r->experiment_id);
            if (tp__store_meta_set(s, "experiment_id", r->experiment_id) != 0)
                return tp__errorf(err, -EIO, "cannot record the experiment's identity in %s",
                                  r->dir);
        }
        char *tok = tp__store_meta_get(s, "token");
        char *wd = tp__store_meta_get(s, "workdir");
        char *spool = tp__store_meta_get(s, "spool");
        snprintf(r->token, sizeof r->token, "%s", tok ? tok : "");
        if (spool) /* else an experiment from before the spool had its own name */
            snprintf(r->spool, sizeof r->spool, "%s", spool);
        else
            snprintf(r->spool, sizeof r->spool, "/tmp/tunepack-%s", r->token);
        free(spool);
        free(tok);
        if (wd) {
            free(r->workdir);
            r->workdir = wd;
        }
        return tp__store_trials(s, load_trial_row, r);
    }
    r->created = 1;
    make_token(r->token);
    make_token(r->experiment_id);
    char spool_id[33];
    make_token(spool_id);
    snprintf(r->spool, sizeof r->spool, "/tmp/tunepack-%s", spool_id);
    char at[32];
    snprintf(at, sizeof at, "%.3f", tp__wall_s());
    json_t *objs = json_array(); /* [{"name": ..., "mode": ...}] for best and export */
    for (size_t j = 0; j < r->x.nobjectives; j++)
        json_array_append_new(objs, json_pack("{s:s, s:s}", "name", r->x.objectives[j].name, "mode",
                                              r->x.objectives[j].maximize ? "max" : "min"));
    char *objs_text = json_dumps(objs, JSON_COMPACT | JSON_PRESERVE_ORDER);
    json_decref(objs);
    json_t *cons = tp__constraints_to_json(r->x.constraints, r->x.nconstraints);
    char *cons_text = json_dumps(cons, JSON_COMPACT | JSON_PRESERVE_ORDER); /* best, dashboard */
    json_decref(cons);
    rc = tp__store_begin(s) || tp__store_meta_set(s, "name", r->x.name) ||
         tp__store_meta_set(s, "experiment_path", r->x.path) ||
         tp__store_meta_set(s, "experiment_text", r->x.text) ||
         tp__store_meta_set(s, "metric", r->x.metric) ||
         tp__store_meta_set(s, "mode", r->x.maximize ? "max" : "min") ||
         tp__store_meta_set(s, "objectives", objs_text) ||
         tp__store_meta_set(s, "workdir", r->workdir) || tp__store_meta_set(s, "token", r->token) ||
         tp__store_meta_set(s, "spool", r->spool) || tp__store_meta_set(s, "created_at", at) ||
         tp__store_meta_set(s, "experiment_id", r->experiment_id) ||
         (r->x.nconstraints && tp__store_meta_set(s, "constraints", cons_text));
    free(objs_text);
    free(cons_text);
    if (rc || tp__store_commit(s) != 0)
        return tp__errorf(err, -EIO, "cannot record the experiment in %s", r->dir);
    return 0;
}

/* --fork OLD: seed the experiment this run just created; one created
 * before (a resumed fork) keeps what it was seeded with. 0 or an exit code. */
static int fork_from(tp_run_t *r, const char *from) {
    tp_error_t err = {0};
    char *seeded =
        r->created ? NULL : tp__store_meta_get(tp__journal_store(&r->journal), "forked_from");
    if (!r->created && !seeded) {
        fprintf(stderr,
                "tunepack: error: --fork starts a new experiment, and %s already holds one; "
                "give a new --dir\n",
                r->dir);
        return TP_EXIT_STORE;
    }
    free(seeded);
    if (r->created && tp__run_fork(r, from, &err) != 0) {
        fprintf(stderr, "tunepack: error: %s\n", err.msg);
        return TP_EXIT_STORE;
    }
    return 0;
}

static char *absolute(const char *path) {
    char *abs = realpath(path, NULL);
    return abs ? abs : tp__strdup(path);
}

static void run_free(tp_run_t *r) {
    tp__trials_free(&r->trials);
    for (size_t i = 0; i < r->nseeded; i++) {
        json_decref(r->seeded[i]->params);
        free(r->seeded[i]);
    }
    free(r->seeded);
    free(r->launch);
    free(r->batch);
    free(r->stops);
    tp__placement_free(r);
    tp__elastic_free(r);
    tp__view_free(r);
    tp__fuse_free(r);
    tp__agents_free(r);
    tp__buf_free(&r->scratch);
    tp__samples_free(&r->round_ms);
    tp__samples_free(&r->rtt_ms);
    tp__samples_free(&r->start_ms);
    tp__scheduler_free(r->sched);
    json_decref(r->warm);
    if (tp__journal_store(&r->journal)) tp__journal_close(&r->journal);
    tp__experiment_free(&r->x);
    free(r->dir);
    free(r->workdir);
    if (r->lock_fd > 0) close(r->lock_fd);
}

/* The run's clock (clock.h): a test's virtual one starts at the experiment's
 * creation, after the reports its store holds. */
static void start_clock(tp_run_t *r) {
    if (!tp__clock_virtual(&r->clock)) return;
    tp_store_t *s = tp__journal_store(&r->journal);
    char *created = tp__store_meta_get(s, "created_at");
    double base = created ? strtod(created, NULL) : 0;
    free(created);
    int64_t reports = 0;
    for (size_t i = 0; i < tp__trials_n(&r->trials); i++)
        if (tp__trials_get(&r->trials, (int64_t)i))
            reports += tp__store_metric_count(s, (int64_t)i);
    tp__clock_start(&r->clock, base > 0 ? base : tp__wall_s(), reports);
}

int tp__run_experiment(const tp_run_opts_t *o) {
    /* `tunepack run ... | head`: a reader that goes away costs the log lines,
     * not the run (a write to it fails with EPIPE instead of killing us). */
    signal(SIGPIPE, SIG_IGN);
    tp_run_t *r = tp__xcalloc(1, sizeof *r);
    tp_error_t err = {0};
    int code = TP_EXIT_OK;
    tp__view_mode(r, o->live, o->quiet);
    if (tp__experiment_load(o->file, &r->x, &err) != 0) {
        fprintf(stderr, "%s\n", err.msg);
        free(r);
        return TP_EXIT_CONFIG;
    }
    if (o->cluster && tp__cluster_cfg_from_arg(o->cluster, &r->x.cluster, &err) != 0) {
        fprintf(stderr, "tunepack: error: %s\n", err.msg);
        tp__experiment_free(&r->x);
        free(r);
        return TP_EXIT_USAGE;
    }
    r->sched = tp__run_scheduler_new(&r->x, &err);
    if (!r->sched) {
        fprintf(stderr, "%s: %s\n", r->x.path, err.msg);
        code = TP_EXIT_CONFIG;
        goto out;
    }
    struct stat st;
    errno = 0;
    if (r->x.workdir && (stat(r->x.workdir, &st) != 0 || !S_ISDIR(st.st_mode))) {
        fprintf(stderr, "%s: workdir \"%s\" is not a directory (%s); create it or fix the path\n",
                r->x.path, r->x.workdir, strerror(errno ? errno : ENOTDIR));
        code = TP_EXIT_CONFIG;
        goto out;
    }
    char dir[4096];
    snprintf(dir, sizeof dir, "%s", o->dir ? o->dir : "runs/");
    if (!o->dir) snprintf(dir, sizeof dir, "runs/%s", r->x.name);
    if (tp__mkdir_p(dir, &err) != 0) {
        fprintf(stderr, "tunepack: error: %s\n", err.msg);
        code = TP_EXIT_STORE;
        goto out;
    }
    r->dir = absolute(dir);
    r->workdir = r->x.workdir ? absolute(r->x.workdir) : absolute(".");
    if (r->x.cluster.kind == TP_CLUSTER_LOCAL &&
        tp__run_check_program(&r->x, r->workdir, &err) != 0) {
        /* Rejected before any trial runs, not retried for every one. */
        fprintf(stderr, "%s\n", err.msg);
        code = TP_EXIT_CONFIG;
        goto out;
    }
    if (o->fork && tp__run_fork_check(r, o->fork, &err) != 0) {
        fprintf(stderr, "tunepack: error: %s\n", err.msg);
        code = TP_EXIT_STORE;
        goto out;
    }
    if (o->fork) { /* the forked results are the sampler's prior observations too */
        r->x.warm_start =
            tp__xrealloc(r->x.warm_start, (r->x.nwarm_start + 2) * sizeof *r->x.warm_start);
        r->x.warm_start[r->x.nwarm_start++] = tp__strdup(o->fork);
        r->x.warm_start[r->x.nwarm_start] = NULL;
    }
    if (tp__run_warm_start_read(r, &err) != 0) { /* before a store exists for a new run */
        char db[4200];
        snprintf(db, sizeof db, "%s/%s", r->dir, TP_STORE_FILE);
        if (access(db, F_OK) != 0) {
            fprintf(stderr, "%s: %s\n", r->x.path, err.msg);
            code = TP_EXIT_CONFIG;
            goto out;
        }
        /* a resumed run uses the priors it journaled */
        tp__log(TP_LOG_WARN, "%s (a resumed run goes on with the journaled priors)", err.msg);
    }
    if (tp__clock_init(&r->clock, err.msg, sizeof err.msg) != 0) {
        fprintf(stderr, "tunepack: error: %s\n", err.msg);
        code = TP_EXIT_USAGE;
        goto out;
    }
    if (lock_dir(r, &err) != 0 || open_experiment(r, &err) != 0) {
        fprintf(stderr, "tunepack: error: %s\n", err.msg);
        code = TP_EXIT_STORE;
        goto out;
    }
    start_clock(r);
    if (o->fork && (code = fork_from(r, o->fork)) != 0) goto out;
    char said[400];
    if (tp__plans_take(r, said, sizeof said) == 0) tp__log(TP_LOG_INFO, "%s", said);
    tp__run_warm_start(r);
    int interrupted = resume_trials(r);
    replay_decisions(r);
    if (o->retry_failed) tp__run_retry_failed(r);
    announce_resume(r, interrupted);
    tp__elastic_resume(r);
    tp__deadline_start(r);
    tp__fuse_load(r); /* what fused processes measured before */
    if ((code = tp__agents_plan(r)) != 0) goto out;
    tp__journal_ok(&r->journal,
                   tp__store_meta_set(tp__journal_tx(&r->journal), "state", "running") ||
                       tp__store_meta_set(tp__journal_tx(&r->journal), "interrupted", "0"),
                   "recording the start of the run");
    if (tp__journal_commit(&r->journal) != 0) {
        code = TP_EXIT_STORE;
        goto out;
    }

    code = tp__orchestrator_loop(r);
out:
    run_free(r);
    free(r);
    return code;
}
