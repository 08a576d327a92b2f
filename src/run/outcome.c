/* outcome: what the orchestrator makes of a running attempt's reports and of
 * its end: report rows stored, garbage recorded, early stops queued, and
 * the verdict (completed, paused for a promotion, stopped, failed, retried,
 * interrupted, placed again after running out of GPU memory). */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "run/orchestrator_internal.h"
#include "run/run.h"
#include "run/verdict.h"

#define TAIL_LINES 5 /* of a failed attempt's stderr, kept in the store */
#define TAIL_BYTES 800

void tp__run_garbage(tp_run_t *r, trial_t *t, const char *what) {
    if (t->current.garbage++ == 0)
        snprintf(t->current.first_garbage, sizeof t->current.first_garbage, "%s", what);
    if (t->current.garbage > TP_GARBAGE_EVENTS) return;
    char detail[600];
    snprintf(detail, sizeof detail, "%s%s", what,
             t->current.garbage == TP_GARBAGE_EVENTS
                 ? " (further garbage in this attempt is only counted)"
                 : "");
    tp__journal_ok(&r->journal,
                   tp__store_event(tp__journal_tx(&r->journal), t->id, t->attempts, "garbage",
                                   detail, tp__wall_s()),
                   "recording garbage");
}

static void accept_report(tp_run_t *r, trial_t *t, const tp_report_t *rep, const char *data,
                          size_t len) {
    if (tp__journal_ok(&r->journal,
                       tp__store_metric(tp__journal_tx(&r->journal), t->id, t->attempts,
                                        t->current.seq++, rep->step,
                                        rep->has_value ? rep->value : NAN, data, len),
                       "storing a report") == 0) {
        r->journal.metric_rows++;
        tp__clock_report(&r->clock); /* a test's virtual clock counts stored reports */
    }
    t->pace.last_report = tp__mono_s();
    if (t->current.seq == 1) t->pace.first_report = t->pace.last_report;
    tp__deadline_report(r, t,
                        rep->step != TP_STORE_NO_STEP && t->pace.first_step == TP_STORE_NO_STEP);
    tp__elastic_on_report(r, t, rep->step);
    if (rep->step != TP_STORE_NO_STEP) {
        /* seconds per step, from this attempt's first report with a step */
        if (t->pace.first_step == TP_STORE_NO_STEP) {
            t->pace.first_step = rep->step;
            t->pace.first_step_at = t->pace.last_report;
            tp__groups_on_step(r, t, 1);
        } else if (rep->step > t->pace.first_step) {
            tp__groups_on_step(r, t, 0);
            tp__trial_set_step_s(&r->trials, t,
                                 (t->pace.last_report - t->pace.first_step_at) /
                                     (double)(rep->step - t->pace.first_step));
        }
        t->step = rep->step;
        if (rep->step > t->job.step_done) tp__trial_job_set_checkpoint(t, rep->step);
    }
    if (tp__fuse_of(t) && rep->step != TP_STORE_NO_STEP)
        tp__fuse_seen(tp__fuse_of(t), t, rep->step);
    tp__buf_reset(&t->last);
    tp__buf_append(&t->last, data, len);
    if (rep->has_value) {
        t->has_value = 1;
        t->value = rep->value;
        if (tp__run_better(r, rep->value, t->best)) t->best = rep->value;
        char why[200];
        if (rep->step != TP_STORE_NO_STEP && !t->job.early_stopped && !r->stopping &&
            !r->sched->ops->report(r->sched, t->id, rep->step, rep->value,
                                   tp__clock_wall(&r->clock), why, sizeof why)) {
            tp__trial_job_stop_early(t, why);
            tp__run_decision(r, "stop", t, 1, rep->value, why, NULL);
            /* Journal, then act: the stop goes out after the commit. */
            tp__run_queue_stop(r, t);
        }
    }
}

/* Who a report line of fused process f is about: the configuration its "config" names
 * (a process of one configuration may leave it out). NULL with why filled when none. */
static trial_t *fused_target(tp_run_t *r, tp_fused_t *f, const tp_report_t *rep, char *why,
                             size_t n) {
    trial_t *u = tp__fuse_member(r, f, rep->config);
    if (u) return u;
    if (rep->config < 0)
        snprintf(why, n,
                 "a fused process of %d configurations must say which one each report "
                 "is about: {\"config\": i, ...}",
                 tp__fuse_k(f));
    else if (rep->config >= tp__fuse_k(f))
        snprintf(why, n, "report for configuration %d; this fused process runs 0 to %d",
                 rep->config, tp__fuse_k(f) - 1);
    else
        why[0] = 0; /* a configuration that ended (dropped): its late lines are dropped too */
    return NULL;
}

trial_t *tp__run_garbage_owner(const tp_run_t *r, trial_t *t, const tp_fused_t *f) {
    return f ? tp__fuse_member(r, f, t && tp__fuse_of(t) == f ? tp__fuse_index(t) : -1) : t;
}

void tp__run_on_report(tp_run_t *r, trial_t *t, tp_fused_t *f, int kv, const char *lines,
                       size_t n) {
    const char *p = lines, *end = lines + n;
    char why[300];
    trial_t *blame = tp__run_garbage_owner(r, t, f);
    while (p < end) {
        const char *nl = memchr(p, '\n', (size_t)(end - p));
        size_t len = nl ? (size_t)(nl - p) : (size_t)(end - p);
        tp_report_t rep;
        const char *data = p;
        size_t dlen = len;
        int rc = 0;
        if (len > 0 && p[len - 1] == '\r') dlen = --len;
        if (len == 0) {
            rc = 0;
        } else if (kv) {
            tp__buf_reset(&r->scratch);
            rc = tp__report_parse_kv(p, len, r->x.metric, &rep, &r->scratch, why, sizeof why);
            data = r->scratch.data;
            dlen = r->scratch.len;
        } else {
            rc = tp__report_parse_json(p, len, r->x.metric, &rep, why, sizeof why) == 0 ? 1 : -1;
        }
        trial_t *to = rc > 0 && f ? fused_target(r, f, &rep, why, sizeof why) : t;
        if (rc > 0 && to)
            accept_report(r, to, &rep, data, dlen);
        else if ((rc < 0 || (rc > 0 && why[0])) && blame)
            tp__run_garbage(r, blame, why);
        p = nl ? nl + 1 : end;
    }
}

/* The directory of rank `rank` of trial t, in the experiment directory. */
static void rank_dir(const tp_run_t *r, const trial_t *t, int rank, char *out, size_t n) {
    char tail[32] = "";
    if (rank) snprintf(tail, sizeof tail, "/rank%d", rank);
    tp__trial_path(out, n, r->dir, (long long)t->id, tail);
}

void tp__run_on_log(tp_run_t *r, trial_t *t, int rank, int is_stderr, const char *data, size_t n) {
    int which = is_stderr != 0;
    int nlogs = 2 * (t->ranks.n > 0 ? t->ranks.n : 1);
    if (!t->ranks.logs) {
        t->ranks.logs = tp__xcalloc((size_t)nlogs, sizeof *t->ranks.logs);
        for (int i = 0; i < nlogs; i++)
            t->ranks.logs[i].fd = -1;
    }
    tp_logfile_t *f = &t->ranks.logs[2 * rank + which];
    if (f->fd < 0) {
        char dir[4200];
        tp_error_t err = {0};
        rank_dir(r, t, rank, dir, sizeof dir);
        if (tp__mkdir_p(dir, &err) != 0 ||
            tp__logfile_open_attempt(f, dir, which ? "stderr" : "stdout", t->attempts,
                                     r->x.log_limit, &err) != 0) {
            tp__log(TP_LOG_WARN, "trial %lld: cannot keep its streamed log: %s", (long long)t->id,
                    err.msg);
            f->fd = -2; /* tried: drop the rest */
            return;
        }
    }
    tp__logfile_write(f, data, n);
}

void tp__run_logs_close(trial_t *t) {
    if (!t->ranks.logs) return;
    for (int i = 0; i < 2 * (t->ranks.n > 0 ? t->ranks.n : 1); i++)
        if (t->ranks.logs[i].fd >= 0) tp__logfile_close(&t->ranks.logs[i]);
    free(t->ranks.logs);
    t->ranks.logs = NULL;
}

/* The last TAIL_LINES lines of t's stderr (rank 0, this attempt), at most
 * TAIL_BYTES, into out; "" if there is none. Lines end with '\n' except the
 * last. O(TAIL_BYTES). */
static void stderr_tail(const tp_run_t *r, const trial_t *t, char *out, size_t n) {
    char path[4300];
    tp__trial_path(path, sizeof path, r->dir, (long long)tp__fuse_proc(t), "/stderr.log");
    out[0] = 0;
    FILE *f = fopen(path, "rb");
    if (!f) return;
    long size = fseek(f, 0, SEEK_END) == 0 ? ftell(f) : -1;
    long from = size > (long)(n - 1) ? size - (long)(n - 1) : 0;
    size_t got = size >= 0 && fseek(f, from, SEEK_SET) == 0 ? fread(out, 1, n - 1, f) : 0;
    fclose(f);
    out[got] = 0;
    while (got && (out[got - 1] == '\n' || out[got - 1] == '\r'))
        out[--got] = 0;
    /* Keep whole lines only: the last TAIL_LINES, dropping a cut first one. */
    char *start = out;
    int lines = 0;
    for (char *p = out + got; p > out; p--)
        if (p[-1] == '\n' && ++lines == TAIL_LINES) {
            start = p;
            break;
        }
    if (start == out && from > 0) {
        char *nl = strchr(out, '\n');
        start = nl ? nl + 1 : out + got;
    }
    memmove(out, start, strlen(start) + 1);
}

/* What the features made of an attempt's end, between the verdict and the
 * state change. */
typedef struct ending {
    int interrupted;      /* its job runs again (a verdict's interruption or an OOM
                             placed again), unless the deadline ended it */
    int regrow;           /* out of GPU memory, placed again with more */
    tp_requeue_t requeue; /* elastic: why it comes back (a resize) */
    char resized[200];    /* a resize in words */
    char at_deadline[sizeof((trial_t *)0)->job.why]; /* the deadline ended it: why; "" if not */
} ending_t;

/* The features' hooks, in this order: OOM regrowth (placement), elastic
 * resizes, the deadline, and the demand group the attempt leaves. Each
 * updates its own state and says what it changes of the end. */
static void run_hooks(tp_run_t *r, trial_t *t, const tp_exited_t *e, tp_verdict_t *v, int left,
                      ending_t *end) {
    end->interrupted = v->kind == TP_VERDICT_INTERRUPTED;
    if (v->kind == TP_VERDICT_OOM) {
        end->regrow = end->interrupted = tp__placement_oom(r, t, v->why, sizeof v->why);
        tp__verdict_add_garbage(t, v->why, sizeof v->why);
        if (!end->regrow) v->kind = TP_VERDICT_FAILED; /* it cannot have more */
    }
    end->requeue = tp__elastic_ended(r, t, end->interrupted && !end->regrow, end->resized,
                                     sizeof end->resized);
    /* At the deadline a trial that checkpointed (or was stopped after the
     * grace) ends there, with its last report: no attempt follows. */
    if (end->interrupted && !end->regrow &&
        tp__deadline_ended(r, t, e->status, end->at_deadline, sizeof end->at_deadline))
        end->interrupted = 0;
    if (left && !(end->interrupted && end->requeue == TP_REQUEUE_RESIZE)) /* a resize comes back */
        tp__placement_left_group(r, t);
}

/* The scheduler hears that t's job ended: ok with its value (values, with
 * several objectives; the constrained metrics' values first, under
 * constraints), or out of the search (ok 0). */
static void tell_result(tp_run_t *r, const trial_t *t, int ok, const tp_verdict_t *v) {
    const double *values = v->values;
    double at = tp__clock_wall(&r->clock); /* the scheduler's now */
    if (ok && r->x.nconstraints) tp__scheduler_constrain(r->sched, t->id, v->cvalues);
    if (r->x.nobjectives > 1)
        r->sched->ops->result_values(r->sched, t->id, t->job.rung, ok, values, at);
    else
        r->sched->ops->result(r->sched, t->id, t->job.rung, ok, ok && t->has_value ? t->value : NAN,
                              at);
    r->sched_waiting = 0;
}

/* A job done: the scheduler is told; the trial is finished, or waits
 * (paused, its checkpoint kept) for a promotion. Returns the state. */
static tp_trial_state_t job_done(tp_run_t *r, trial_t *t, const tp_verdict_t *v, char *note,
                                 size_t n, const char **decided) {
    tp__deadline_timing(r, t);
    tell_result(r, t, 1, v);
    if (t->job.early_stopped) {
        *decided = t->job.why;
        return TP_TRIAL_STOPPED;
    }
    if (r->sched->ops->final(r->sched, t->id, t->job.rung)) {
        *decided = "completed";
        return TP_TRIAL_COMPLETED;
    }
    snprintf(note, n, "rung %d (budget %g) done: waits for a promotion", t->job.rung,
             t->job.budget);
    *decided = note;
    return TP_TRIAL_PAUSED;
}

/* The same failure as the attempt before, told by the same words and the same
 * last line of stderr (an exception and its message): another try would
 * only fail again. The attempt before's are its journaled "failed" event. */
static int failed_the_same(tp_run_t *r, const trial_t *t, const char *why,
                           const tp_transition_t *how) {
    int told = how->stderr_tail && *how->stderr_tail; /* why ends with its last line */
    if (!told || t->failures < 2) return 0;
    char *before = NULL;
    tp__store_last_event(tp__journal_store(&r->journal), t->id, "failed", &before);
    int same = before && strcmp(before, why) == 0;
    free(before);
    return same;
}

/* A failure: retried while retries are left and it is not the same error
 * again (an event says why), else the trial fails for good and the
 * scheduler is told. Returns the state. */
static tp_trial_state_t job_failed(tp_run_t *r, trial_t *t, tp_verdict_t *v, tp_transition_t *how,
                                   const char **decided) {
    t->failures++;
    how->error = v->why;
    int again = failed_the_same(r, t, v->why, how);
    if (again) {
        size_t n = strlen(v->why);
        snprintf(v->why + n, sizeof v->why - n,
                 " (the same error as its attempt before: not retried again)");
    }
    if (t->failures <= r->x.retries && !again) {
        how->requeue = TP_REQUEUE_RETRY;
        tp__journal_ok(&r->journal,
                       tp__store_event(tp__journal_tx(&r->journal), t->id, t->attempts, "failed",
                                       v->why, how->at),
                       "recording a failure");
        return TP_TRIAL_PENDING;
    }
    tell_result(r, t, 0, v);
    *decided = v->why;
    return TP_TRIAL_FAILED;
}

/* After the state change: the decision journaled, the best so far, a
 * Pareto front, fail-fast, resources given back, and the view. */
static void attempt_ended(tp_run_t *r, trial_t *t, const tp_verdict_t *v, const ending_t *end,
                          tp_trial_state_t to, const char *decided, tp_requeue_t requeue,
                          double ran_s) {
    int ok = v->kind == TP_VERDICT_DONE;
    if (decided)
        tp__run_result_decision(r, tp__wall_s(), "result", t, ok,
                                ok && t->has_value ? t->value : NAN, decided,
                                ok ? v->objectives : NULL, ok ? v->constraints : NULL);
    /* A trial the deadline stopped mid-job competes with its last job's
     * result when it has one (as `best` ranks it), else with what it reported. */
    if (!*end->at_deadline || !t->results) tp__note_best(r, t);
    if (ok) t->results++;
    if (ok && r->x.nobjectives > 1 && (to == TP_TRIAL_COMPLETED || to == TP_TRIAL_STOPPED))
        tp__view_front_add(r, t->id, v->values);
    if (to != TP_TRIAL_PENDING) {
        tp__run_fail_fast(r, t, to == TP_TRIAL_FAILED ? v->why : NULL);
        json_decref(t->gpu_env);
        t->gpu_env = NULL;
        tp__deadline_gpus_freed(r); /* its GPUs are free for others */
    }
    tp__view_attempt_ended(r, t, requeue,
                           *end->at_deadline ? end->at_deadline
                           : ok              ? decided
                                             : v->why,
                           ran_s);
}

/* A failure says what the trial said last, where everyone looks: the last
 * lines of its stderr kept with the end, the last one added to why. */
static void add_stderr_tail(const tp_run_t *r, const trial_t *t, tp_verdict_t *v, char *tail,
                            size_t n, tp_transition_t *how) {
    stderr_tail(r, t, tail, n);
    how->stderr_tail = tail;
    const char *last = strrchr(tail, '\n');
    last = last ? last + 1 : tail;
    size_t k = strlen(v->why);
    if (*last) snprintf(v->why + k, sizeof v->why - k, ": %s", last);
}

/* The state the attempt's end leads to, with how (journaled with it) and
 * the scheduler's word (*decided, NULL if none). The scheduler is told a
 * job's result here, and a failure's retry is journaled. */
static tp_trial_state_t next_state(tp_run_t *r, trial_t *t, tp_verdict_t *v, const ending_t *end,
                                   tp_transition_t *how, char *note, size_t n,
                                   const char **decided) {
    if (*end->at_deadline) {
        how->detail = end->at_deadline;
        tp__trial_job_set_why(t, end->at_deadline);
        /* Its job did not reach its budget: for the scheduler the trial is
         * out of the search (a replay tells it the same), so that a run
         * extended past the deadline does not wait for that job. */
        tp__run_decision(r, "deadline-stop", t, 1, t->has_value ? t->value : NAN, end->at_deadline,
                         NULL);
        tell_result(r, t, 0, v);
        return TP_TRIAL_STOPPED;
    }
    if (end->interrupted) {
        how->requeue = end->regrow ? TP_REQUEUE_REGROW : end->requeue;
        how->detail = end->regrow                         ? v->why
                      : end->requeue == TP_REQUEUE_RESIZE ? end->resized
                                                          : "interrupted";
        if (end->regrow)
            tp__journal_ok(&r->journal,
                           tp__store_event(tp__journal_tx(&r->journal), t->id, t->attempts, "oom",
                                           v->why, how->at),
                           "recording an out-of-memory end");
        return TP_TRIAL_PENDING;
    }
    if (v->kind != TP_VERDICT_DONE) return job_failed(r, t, v, how, decided);
    tp_trial_state_t to = job_done(r, t, v, note, n, decided);
    how->detail = *decided;
    return to;
}

/* An attempt ended. Decide (the pure verdict), let the features' hooks act
 * on it, change the state (journaled with it), then record the decision
 * and tell the view. See DESIGN.md, "Inside the orchestrator". */
void tp__run_on_exited(tp_run_t *r, trial_t *t, const tp_exited_t *e) {
    tp_verdict_t v;
    tp__verdict_judge(t, e, &(tp_judge_facts_t){&r->x, r->stopping, tp__deadline_hit(r)}, &v);
    int left = tp__placement_ended(r, t);
    tp__run_logs_close(t);
    ending_t end = {0};
    run_hooks(r, t, e, &v, left, &end);
    tp_transition_t how = {.has_exit = e->ended != TP_ENDED_SPAWN_FAILED,
                           .exit_code = e->code,
                           .signal = e->signal,
                           .at = tp__wall_s()};
    char tail[TAIL_BYTES + 1] = "", note[300] = "";
    if (v.kind != TP_VERDICT_DONE && !end.interrupted && !*end.at_deadline)
        add_stderr_tail(r, t, &v, tail, sizeof tail, &how);
    const char *decided = NULL; /* the scheduler's word on it, for the decisions journal */
    tp_trial_state_t to = next_state(r, t, &v, &end, &how, note, sizeof note, &decided);
    tp__trial_set_state(&r->trials, t, to, &how);
    attempt_ended(r, t, &v, &end, to, decided, how.requeue, e->duration_s);
    tp__verdict_free(&v);
}
