/* outcome: what the orchestrator makes of a running attempt's reports and of
 * its end: report rows stored, garbage recorded, early stops queued, and
 * the verdict (completed, paused for a promotion, stopped, failed, retried,
 * interrupted, placed again after running out of GPU memory). */
#include <errno.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "run/orchestrator_internal.h"
#include "run/run.h"

#define MAX_GARBAGE_EVENTS 20 /* per attempt; more are only counted */
#define TAIL_LINES 5          /* of a failed attempt's stderr, kept in the store */
#define TAIL_BYTES 800

void tp__run_garbage(tp_run_t *r, trial_t *t, const char *what) {
    if (t->garbage++ == 0) snprintf(t->first_garbage, sizeof t->first_garbage, "%s", what);
    if (t->garbage > MAX_GARBAGE_EVENTS) return;
    char detail[600];
    snprintf(detail, sizeof detail, "%s%s", what,
             t->garbage == MAX_GARBAGE_EVENTS ? " (further garbage in this attempt is only counted)"
                                              : "");
    tp__journal_ok(&r->journal,
                   tp__store_event(tp__journal_tx(&r->journal), t->id, t->attempts, "garbage",
                                   detail, tp__wall_s()),
                   "recording garbage");
}

static void accept_report(tp_run_t *r, trial_t *t, const tp_report_t *rep, const char *data,
                          size_t len) {
    if (tp__journal_ok(&r->journal,
                       tp__store_metric(tp__journal_tx(&r->journal), t->id, t->attempts, t->seq++,
                                        rep->step, rep->has_value ? rep->value : NAN, data, len),
                       "storing a report") == 0)
        r->journal.metric_rows++;
    t->last_report = tp__mono_s();
    if (t->seq == 1) t->first_report = t->last_report;
    tp__elastic_on_report(r, t, rep->step);
    if (rep->step != TP_STORE_NO_STEP) {
        /* seconds per step, from this attempt's first report with a step */
        if (t->first_step == TP_STORE_NO_STEP) {
            t->first_step = rep->step;
            t->first_step_at = t->last_report;
            tp__groups_on_step(r, t, 1);
        } else if (rep->step > t->first_step) {
            tp__groups_on_step(r, t, 0);
            tp__trial_set_step_s(&r->trials, t, (t->last_report - t->first_step_at) /
                                                    (double)(rep->step - t->first_step));
        }
        t->step = rep->step;
        if (rep->step > t->step_done) t->step_done = rep->step;
    }
    if (t->fused && rep->step != TP_STORE_NO_STEP) tp__fuse_seen(t->fused, t, rep->step);
    tp__buf_reset(&t->last);
    tp__buf_append(&t->last, data, len);
    if (rep->has_value) {
        t->has_value = 1;
        t->value = rep->value;
        if (tp__run_better(r, rep->value, t->best)) t->best = rep->value;
        char why[200];
        if (rep->step != TP_STORE_NO_STEP && !t->early_stopped && !r->stopping &&
            !r->sched->ops->report(r->sched, t->id, rep->step, rep->value, tp__wall_s(), why,
                                   sizeof why)) {
            t->early_stopped = 1;
            snprintf(t->why, sizeof t->why, "%s", why);
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
        snprintf(why, n, "a fused process of %d configurations must say which one each report "
                         "is about: {\"config\": i, ...}", f->n);
    else if (rep->config >= f->n)
        snprintf(why, n, "report for configuration %d; this fused process runs 0 to %d",
                 rep->config, f->n - 1);
    else
        why[0] = 0; /* a configuration that ended (dropped): its late lines are dropped too */
    return NULL;
}

void tp__run_on_report(tp_run_t *r, trial_t *t, tp_fused_t *f, const tp_msg_t *m) {
    const char *channel = json_string_value(json_object_get(m->head, "channel"));
    int kv = channel && strcmp(channel, "stdout") == 0;
    const char *p = m->payload, *end = m->payload + m->payload_len;
    char why[300];
    /* A fused process's garbage goes to a configuration still in it. */
    trial_t *blame = f ? tp__fuse_member(r, f, t && t->fused == f ? t->fuse_index : -1) : t;
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

void tp__run_on_log(tp_run_t *r, trial_t *t, int rank, const tp_msg_t *m) {
    const char *stream = json_string_value(json_object_get(m->head, "stream"));
    int which = stream && strcmp(stream, "stderr") == 0;
    int nlogs = 2 * (t->nranks > 0 ? t->nranks : 1);
    if (!t->logs) {
        t->logs = tp__xcalloc((size_t)nlogs, sizeof *t->logs);
        for (int i = 0; i < nlogs; i++) t->logs[i].fd = -1;
    }
    tp_logfile_t *f = &t->logs[2 * rank + which];
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
    tp__logfile_write(f, m->payload, m->payload_len);
}

void tp__run_logs_close(trial_t *t) {
    if (!t->logs) return;
    for (int i = 0; i < 2 * (t->nranks > 0 ? t->nranks : 1); i++)
        if (t->logs[i].fd >= 0) tp__logfile_close(&t->logs[i]);
    free(t->logs);
    t->logs = NULL;
}

static const char *signal_name(int sig) {
    static char buf[32];
    const char *s = sigabbrev_np(sig);
    if (s) {
        snprintf(buf, sizeof buf, "SIG%s", s);
        return buf;
    }
    snprintf(buf, sizeof buf, "signal %d", sig);
    return buf;
}

/* The last TAIL_LINES lines of t's stderr (rank 0, this attempt), at most
 * TAIL_BYTES, into out; "" if there is none. Lines end with '\n' except the
 * last. O(TAIL_BYTES). */
static void stderr_tail(const tp_run_t *r, const trial_t *t, char *out, size_t n) {
    char path[4300];
    tp__trial_path(path, sizeof path, r->dir, (long long)t->proc, "/stderr.log");
    out[0] = 0;
    FILE *f = fopen(path, "rb");
    if (!f) return;
    long size = fseek(f, 0, SEEK_END) == 0 ? ftell(f) : -1;
    long from = size > (long)(n - 1) ? size - (long)(n - 1) : 0;
    size_t got = size >= 0 && fseek(f, from, SEEK_SET) == 0 ? fread(out, 1, n - 1, f) : 0;
    fclose(f);
    out[got] = 0;
    while (got && (out[got - 1] == '\n' || out[got - 1] == '\r')) out[--got] = 0;
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

/* Several objectives: each one's value in t's last report (NaN where it is
 * missing or no finite number) into v, and as a JSON array into *json
 * (caller frees). Returns the name of the first missing one, or NULL. */
static const char *objective_values(const tp_run_t *r, const trial_t *t, double *v, char **json) {
    json_t *last = t->last.len ? json_loadb(t->last.data, t->last.len, 0, NULL) : NULL;
    json_t *arr = json_array();
    const char *missing = NULL;
    for (size_t j = 0; j < r->x.nobjectives; j++) {
        json_t *x = json_object_get(last, r->x.objectives[j].name);
        v[j] = json_is_number(x) && isfinite(json_number_value(x)) ? json_number_value(x) : NAN;
        json_array_append_new(arr, isnan(v[j]) ? json_null() : json_real(v[j]));
        if (isnan(v[j]) && !missing) missing = r->x.objectives[j].name;
    }
    *json = json_dumps(arr, JSON_COMPACT);
    json_decref(arr);
    json_decref(last);
    return missing;
}

/* An attempt ended: decide completed / paused / stopped / failed / retried /
 * interrupted, and make that one transition. */
void tp__run_on_exited(tp_run_t *r, trial_t *t, const tp_msg_t *m) {
    const char *status = "exited", *error = "";
    int code = -1, sig = 0, oom = 0;
    double dur = 0;
    json_unpack(m->head, "{s?s, s?i, s?i, s?s, s?F, s?b}", "status", &status, "code", &code,
                "signal", &sig, "error", &error, "duration_s", &dur, "oom", &oom);
    char why[1200] = "", *objs = NULL;
    double values[TP_MAX_OBJECTIVES];
    int ok = 0, interrupted = 0, regrow = 0, multi = r->x.nobjectives > 1;
    int left = tp__placement_ended(r, t);
    tp__run_logs_close(t);
    if (t->early_stopped && (strcmp(status, "stopped") == 0 || strcmp(status, "exited") == 0 ||
                             strcmp(status, "signaled") == 0)) {
        ok = 1; /* stopped by the scheduler: final, with what it reported */
    } else if ((strcmp(status, "stopped") == 0 && (r->stopping || t->resize_to || r->dl.hit)) ||
               strcmp(status, "paused") == 0) {
        interrupted = 1; /* its job is not done: it runs again, from its checkpoint */
    } else if (oom && !(strcmp(status, "exited") == 0 && code == 0)) {
        /* Out of GPU memory: not the trial's fault but its demand's. */
        regrow = tp__placement_oom(r, t, why, sizeof why);
        interrupted = regrow;
    } else if (strcmp(status, "exited") == 0 && code == 0) {
        const char *missing = multi ? objective_values(r, t, values, &objs) : NULL;
        if (t->has_value && !missing)
            ok = 1;
        else if (t->has_value)
            snprintf(why, sizeof why, "exited 0, but its last report lacks the objective "
                                      "\"%s\" (every report that has \"%s\" must carry all "
                                      "objectives)",
                     missing, r->x.metric);
        else if (t->seq == 0 && t->garbage > 0)
            snprintf(why, sizeof why, "exited 0 without ever reporting the objective \"%s\": all "
                     "%d of its report lines were rejected, the first because: %s",
                     r->x.metric, t->garbage, t->first_garbage);
        else
            snprintf(why, sizeof why, "exited 0 without ever reporting the objective \"%s\"%s",
                     r->x.metric, t->seq ? "" : " (no report at all)");
    } else if (strcmp(status, "exited") == 0) {
        snprintf(why, sizeof why, "exited with code %d", code);
    } else if (strcmp(status, "signaled") == 0) {
        snprintf(why, sizeof why, "killed by %s", signal_name(sig));
    } else if (strcmp(status, "timeout") == 0) {
        char d[32];
        tp__format_duration(r->x.timeout_s, d, sizeof d);
        snprintf(why, sizeof why, "timed out after %s", d);
    } else if (strcmp(status, "stopped") == 0) {
        snprintf(why, sizeof why, "stopped");
    } else {
        snprintf(why, sizeof why, "could not start: %s", *error ? error : status);
    }
    if (t->garbage > MAX_GARBAGE_EVENTS) {
        size_t n = strlen(why);
        snprintf(why + n, sizeof why - n, "%s%d garbage report lines in all", n ? "; " : "",
                 t->garbage);
    }
    char resized[200] = "", at_deadline[sizeof t->why] = "";
    tp_requeue_t requeue = tp__elastic_ended(r, t, interrupted && !regrow, resized, sizeof resized);
    /* At the deadline a trial that checkpointed (or was stopped after the
     * grace) ends there, with its last report: no attempt follows. */
    if (interrupted && !regrow && tp__deadline_ended(r, t, status, at_deadline, sizeof at_deadline))
        interrupted = 0;
    if (left && !(interrupted && requeue == TP_REQUEUE_RESIZE)) /* a resize comes back */
        tp__placement_left_group(r, t);
    tp_transition_t how = {.has_exit = strcmp(status, "spawn_failed") != 0, .exit_code = code,
                           .signal = sig, .at = tp__wall_s()};
    char tail[TAIL_BYTES + 1] = "";
    if (!ok && !interrupted && !*at_deadline) {
        /* A failure says what the trial said last, where everyone looks. */
        stderr_tail(r, t, tail, sizeof tail);
        how.stderr_tail = tail;
        const char *last = strrchr(tail, '\n');
        last = last ? last + 1 : tail;
        size_t n = strlen(why);
        if (*last) snprintf(why + n, sizeof why - n, ": %s", last);
    }
    tp_trial_state_t to;
    const char *decided = NULL; /* the scheduler's word on it, for the decisions journal */
    char note[300] = "";
    if (*at_deadline) {
        to = TP_TRIAL_STOPPED;
        how.detail = at_deadline;
        snprintf(t->why, sizeof t->why, "%s", at_deadline);
        /* Not a job's result (the scheduler never sees it, a replay neither). */
        tp__run_decision(r, "deadline-stop", t, 1, t->has_value ? t->value : NAN, at_deadline,
                         NULL);
    } else if (interrupted) {
        to = TP_TRIAL_PENDING;
        how.requeue = regrow ? TP_REQUEUE_REGROW : requeue;
        how.detail = regrow ? why : requeue == TP_REQUEUE_RESIZE ? resized : "interrupted";
        if (regrow)
            tp__journal_ok(&r->journal,
                           tp__store_event(tp__journal_tx(&r->journal), t->id, t->attempts, "oom",
                                           why, how.at),
                           "recording an out-of-memory end");
    } else if (ok) {
        /* The job is done: tell the scheduler; the trial is finished, or
         * waits (paused, its checkpoint kept) for a promotion. */
        double v = t->has_value ? t->value : NAN;
        tp__deadline_timing(r, t, how.at);
        if (multi)
            r->sched->ops->result_values(r->sched, t->id, t->rung, 1, values, how.at);
        else
            r->sched->ops->result(r->sched, t->id, t->rung, 1, v, how.at);
        r->sched_waiting = 0;
        if (t->early_stopped) {
            to = TP_TRIAL_STOPPED;
            decided = t->why;
        } else if (r->sched->ops->final(r->sched, t->id, t->rung)) {
            to = TP_TRIAL_COMPLETED;
            decided = "completed";
        } else {
            to = TP_TRIAL_PAUSED;
            snprintf(note, sizeof note, "rung %d (budget %g) done: waits for a promotion",
                     t->rung, t->budget);
            decided = note;
        }
        how.detail = decided;
    } else {
        t->failures++;
        how.error = why;
        if (t->failures <= r->x.retries) {
            to = TP_TRIAL_PENDING;
            how.requeue = TP_REQUEUE_RETRY;
            tp__journal_ok(&r->journal,
                           tp__store_event(tp__journal_tx(&r->journal), t->id, t->attempts,
                                           "failed", why, how.at),
                           "recording a failure");
        } else {
            to = TP_TRIAL_FAILED;
            if (multi) r->sched->ops->result_values(r->sched, t->id, t->rung, 0, values, how.at);
            else r->sched->ops->result(r->sched, t->id, t->rung, 0, NAN, how.at);
            r->sched_waiting = 0;
            decided = why;
        }
    }
    tp__trial_set_state(&r->trials, t, to, &how);
    if (decided)
        tp__run_decision(r, "result", t, ok, ok && t->has_value ? t->value : NAN, decided,
                         ok ? objs : NULL);
    free(objs);
    /* A trial the deadline stopped mid-job competes with its last job's
     * result when it has one (as `best` ranks it), else with what it reported. */
    if (!*at_deadline || !t->results) tp__note_best(r, t);
    if (ok) t->results++;
    if (ok && multi && (to == TP_TRIAL_COMPLETED || to == TP_TRIAL_STOPPED))
        tp__view_front_add(r, t->id, values);
    if (to == TP_TRIAL_FAILED) tp__run_fail_fast(r, t, why);
    else if (to != TP_TRIAL_PENDING) tp__run_fail_fast(r, t, NULL);
    if (to != TP_TRIAL_PENDING) {
        json_decref(t->gpu_env);
        t->gpu_env = NULL;
    }
    if (to != TP_TRIAL_PENDING) r->dl.freed = 1; /* its GPUs are free for others */
    tp__view_attempt_ended(r, t, how.requeue, *at_deadline ? at_deadline : ok ? decided : why,
                           dur);
}
