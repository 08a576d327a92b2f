/* view: progress while an experiment runs. On a terminal a live block
 * redrawn twice a second and when the terminal is resized: progress, the
 * best so far, a row per running trial and the last ends of attempts, cut
 * to the terminal's size; log lines written meanwhile go above it (the log's
 * sink). Otherwise one plain line for every end of an attempt (completed,
 * paused at a rung, stopped early, failed, retried, placed again after
 * running out of GPU memory, interrupted), and a line whenever the best so
 * far changes. Reads the orchestrator's counters; writes to stdout (and
 * the log lines it is handed to stderr). */
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <unistd.h>

#include "run/orchestrator_internal.h"
#include "run/run.h"
#include "search/pareto.h"

#define VIEW_PERIOD_MS 500

static uint64_t total_trials(const tp_run_t *r) {
    uint64_t total = r->sched->ops->total(r->sched);
    return total ? total : tp__trials_n(&r->trials);
}

/* Trials that reached a final state. */
static int done_count(const tp_run_t *r) {
    const int *c = tp__trials_counts(&r->trials);
    return c[TP_TRIAL_COMPLETED] + c[TP_TRIAL_STOPPED] + c[TP_TRIAL_FAILED];
}

/* "rung R, budget B" when the search has budgets, else "" (as `status` and `best` say it). */
static void rung_text(const tp_run_t *r, int rung, double budget, char *out, size_t n) {
    if (!r->x.budget_name || budget <= 0) {
        out[0] = 0;
        return;
    }
    char b[32];
    tp__fmt_sig(budget, b);
    snprintf(out, n, "rung %d, budget %s", rung, b);
}

/* Several objectives: "front of 3 trials: trial 7 err=0.1 cost=3.2; ...". */
static void front_line(const tp_run_t *r, char *out, size_t n) {
    const tp_view_t *v = &r->view;
    size_t m = r->x.nobjectives, len = (size_t)snprintf(out, n, "Pareto front: none yet");
    if (v->nfront)
        len = (size_t)snprintf(out, n, "Pareto front of %zu trial%s:", v->nfront,
                               v->nfront == 1 ? "" : "s");
    for (size_t i = 0; i < v->nfront && len < n; i++) {
        len += (size_t)snprintf(out + len, n - len, "%s trial %lld", i ? ";" : "",
                                (long long)v->front_ids[i]);
        for (size_t j = 0; j < m && len < n; j++) {
            char x[32];
            tp__fmt_sig(v->front_values[i * m + j], x);
            len += (size_t)snprintf(out + len, n - len, " %s=%s", r->x.objectives[j].name, x);
        }
    }
}

void tp__view_front_add(tp_run_t *r, int64_t id, const double *values) {
    tp_view_t *v = &r->view;
    size_t m = r->x.nobjectives, k = 0;
    double loss[TP_MAX_OBJECTIVES] = {0}, other[TP_MAX_OBJECTIVES] = {0};
    for (size_t j = 0; j < m; j++)
        loss[j] = r->x.objectives[j].maximize ? -values[j] : values[j];
    for (size_t i = 0; i < v->nfront; i++) {
        const double *p = v->front_values + i * m;
        for (size_t j = 0; j < m; j++)
            other[j] = r->x.objectives[j].maximize ? -p[j] : p[j];
        if (tp__pareto_dominates(other, loss, m) || !memcmp(other, loss, m * sizeof *loss))
            return; /* beaten (or matched) by a point already on it */
    }
    for (size_t i = 0; i < v->nfront; i++) { /* drop the points the new one beats */
        const double *p = v->front_values + i * m;
        for (size_t j = 0; j < m; j++)
            other[j] = r->x.objectives[j].maximize ? -p[j] : p[j];
        if (tp__pareto_dominates(loss, other, m)) continue;
        v->front_ids[k] = v->front_ids[i];
        memmove(v->front_values + k * m, p, m * sizeof *p);
        k++;
    }
    if (k == v->capfront) {
        size_t old = v->capfront;
        v->front_ids = tp__xgrow(v->front_ids, &v->capfront, k + 1, sizeof *v->front_ids, 16);
        v->front_values =
            tp__xresize(v->front_values, old, v->capfront, m * sizeof *v->front_values);
    }
    v->front_ids[k] = id;
    memcpy(v->front_values + k * m, values, m * sizeof *values);
    v->nfront = k + 1;
    r->best_changed = 1;
}

void tp__view_free(tp_run_t *r) {
    if (r->view.live) tp__log_set_sink(NULL, NULL); /* a run that never reached its end */
    free(r->view.front_ids);
    free(r->view.front_values);
}

static void best_line(const tp_run_t *r, char *out, size_t n) {
    if (r->x.nobjectives > 1) {
        front_line(r, out, n);
        return;
    }
    const trial_t *b = tp__run_best_trial(r);
    if (!b) {
        snprintf(out, n, "best %s: none yet", r->x.metric);
        return;
    }
    char params[512], v[32], rung[96];
    tp__params_text(b->params, params, sizeof params);
    tp__fmt_sig(r->best.value, v);
    rung_text(r, r->best_rung, r->best.budget, rung, sizeof rung);
    snprintf(out, n, "best %s %s (trial %lld%s%s): %s", r->x.metric, v, (long long)b->id,
             *rung ? ", " : "", rung, params);
}

/* "3/9 done (1 completed, 2 stopped early, 0 failed), 3 running, 2 paused, 1 pending" */
static void counts_line(const tp_run_t *r, char *out, size_t n) {
    const int *c = tp__trials_counts(&r->trials);
    uint64_t total = total_trials(r);
    int done = done_count(r);
    long waiting = (long)total - done - c[TP_TRIAL_RUNNING] - c[TP_TRIAL_PAUSED];
    if (waiting < 0) waiting = 0;
    snprintf(out, n,
             "%d/%llu done (%d completed, %d stopped early, %d failed), %d running, %d paused, "
             "%ld pending",
             done, (unsigned long long)total, c[TP_TRIAL_COMPLETED], c[TP_TRIAL_STOPPED],
             c[TP_TRIAL_FAILED], c[TP_TRIAL_RUNNING], c[TP_TRIAL_PAUSED], waiting);
}

/* The terminal's size (stdout's), or 80 x 24 when it says none. */
static void term_size(int *cols, int *rows) {
    struct winsize w;
    *cols = 80, *rows = 24;
    if (ioctl(STDOUT_FILENO, TIOCGWINSZ, &w) == 0 && w.ws_col > 0 && w.ws_row > 0)
        *cols = w.ws_col, *rows = w.ws_row;
}

/* One line of the live block, cut to the terminal's width (a line that
 * wrapped would throw off the count the next redraw goes back by). */
static void put_line(tp_run_t *r, int cols, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static void put_line(tp_run_t *r, int cols, const char *fmt, ...) {
    char text[1024], line[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(text, sizeof text, fmt, ap);
    va_end(ap);
    tp__escape_into(line, sizeof line, text, 0); /* nothing a trial said moves the cursor */
    size_t max = cols > 1 ? (size_t)cols - 1 : 1, n = strlen(line);
    if (n > max) {
        n = max;
        while (n > 0 && ((unsigned char)line[n] & 0xC0) == 0x80)
            n--; /* a whole UTF-8 char */
        line[n] = 0;
    }
    printf("%s\n", line);
    r->view.lines++;
}

/* The running trials, one row each (id, parameters, rung and budget, step,
 * last value, elapsed, where), at most `room` rows. O(trials). */
static void running_table(tp_run_t *r, int cols, int room, double now) {
    int running = tp__trials_in(&r->trials, TP_TRIAL_RUNNING), shown = 0;
    if (running == 0 || room < 2) return;
    put_line(r, cols, "%6s  %-36s %-9s %6s %10s %8s  %s", "trial", "parameters",
             r->x.budget_name ? "rung/bdgt" : "", "step", r->x.metric, "elapsed", "where");
    int rows = running > room - 1 ? room - 2 : running;
    for (size_t i = 0; i < tp__trials_n(&r->trials) && shown < rows; i++) {
        const trial_t *t = tp__trials_get(&r->trials, (int64_t)i);
        if (!t || t->state != TP_TRIAL_RUNNING) continue;
        char params[512], rb[40] = "", step[24] = "", v[32] = "", el[32];
        tp__params_text(t->params, params, sizeof params);
        if (strlen(params) > 36) memcpy(params + 33, "...", 4);
        if (r->x.budget_name && t->job.budget > 0) {
            char b[32];
            tp__fmt_sig(t->job.budget, b);
            snprintf(rb, sizeof rb, "%d/%s", t->job.rung, b);
        }
        if (t->step != TP_STORE_NO_STEP) snprintf(step, sizeof step, "%lld", (long long)t->step);
        if (t->has_value) tp__fmt_sig(t->value, v);
        tp__format_duration(t->current.started > 0 ? now - t->current.started : 0, el, sizeof el);
        put_line(r, cols, "%6lld  %-36s %-9s %6s %10s %8s  %s", (long long)t->id, params, rb, step,
                 v, el, t->where_text);
        shown++;
    }
    if (shown < running) put_line(r, cols, "%6s  ... and %d more running", "", running - shown);
}

/* Where the run stands, for the live block. */
typedef struct progress {
    double share;  /* done, 0..1 */
    char rem[48];  /* time left: "~5m", "0s" at the end, "?" before any estimate */
    char work[96]; /* "work 41/73 epochs" when the search has a budget, else "" */
} progress_t;

/* The share done counts the search's work when it has a budget (budget
 * units run, each trial's largest reported step, against what the
 * scheduler expects to run: ASHA's rung steps, not only its finished
 * trials), else its finished trials. The time left comes from measured step
 * times as soon as any exist (the units left at the run's mean seconds a
 * step, shared by the trials running), else from the trials this run
 * finished. O(trials). */
static void progress(const tp_run_t *r, double elapsed, progress_t *p) {
    uint64_t total = total_trials(r);
    int done = done_count(r), done_here = done - r->view.done_before;
    int over = (uint64_t)done >= total, running = tp__trials_in(&r->trials, TP_TRIAL_RUNNING);
    double planned = tp__scheduler_work(r->sched), left_s = NAN;
    p->share = over ? 1 : total ? (double)done / (double)total : 0;
    p->work[0] = 0;
    if (planned > 0) {
        double units = 0;
        for (size_t i = 0; i < tp__trials_n(&r->trials); i++) {
            const trial_t *t = tp__trials_get(&r->trials, (int64_t)i);
            if (t && t->job.step_done > 0) units += (double)t->job.step_done;
        }
        if (units > planned) planned = units; /* more promotions than expected */
        if (!over) p->share = units / planned < 0.99 ? units / planned : 0.99;
        char u[32], w[32];
        tp__fmt_sig(units, u);
        tp__fmt_sig(planned, w);
        snprintf(p->work, sizeof p->work, ", work %s/%s %s", u, w, r->x.budget_name);
        if (r->trials.step_n)
            left_s = (planned - units) * (r->trials.step_sum / (double)r->trials.step_n) /
                     (running > 1 ? running : 1);
    }
    if (!isfinite(left_s) && done_here > 0)
        left_s = elapsed / done_here * (double)(total - (uint64_t)done);
    snprintf(p->rem, sizeof p->rem, "?");
    if (over) {
        snprintf(p->rem, sizeof p->rem, "0s");
    } else if (isfinite(left_s)) {
        char d[32];
        tp__format_duration(left_s, d, sizeof d);
        snprintf(p->rem, sizeof p->rem, "~%s", d);
    }
}

/* The live block: progress, time, the best so far, the running trials and
 * the last ends of attempts, fitted to the terminal. */
static void draw(tp_run_t *r) {
    int cols, rows;
    term_size(&cols, &rows);
    double now = tp__mono_s(), elapsed = now - r->view.t0;
    char el[32], best[700], counts[256];
    progress_t p;
    tp__format_duration(elapsed, el, sizeof el);
    progress(r, elapsed, &p);
    best_line(r, best, sizeof best);
    counts_line(r, counts, sizeof counts);
    int width = 30, fill = (int)(p.share * width);
    char bar[64];
    for (int i = 0; i < width; i++)
        bar[i] = i < fill ? '#' : '-';
    bar[width] = 0;
    if (r->view.lines) printf("\033[%dA\033[J", r->view.lines);
    r->view.lines = 0;
    put_line(r, cols, "%s [%s] %s%s", r->x.name, bar, counts, r->stopping ? " (stopping)" : "");
    put_line(r, cols, "elapsed %s, remaining %s%s", el, p.rem, p.work);
    put_line(r, cols, "%s", best);
    /* what is left of the screen (one line spare): the table, then the recent ends */
    int recent = r->view.nrecent, room = rows - 1 - r->view.lines - recent;
    running_table(r, cols, room, now);
    for (int i = 0; i < recent && r->view.lines < rows - 1; i++)
        put_line(r, cols, "%s", r->view.recent[i]);
    r->best_changed = 0;
    fflush(stdout);
}

static void on_winch(uv_signal_t *h, int sig) {
    (void)sig;
    tp_run_t *r = h->data;
    if (!r->finished) draw(r);
}

/* A log line while the live view is shown: the view makes way, the line is
 * written where the view was (it stays, above), and the view is drawn again
 * below it. */
static void log_above(void *ud, const char *line, size_t n) {
    tp_run_t *r = ud;
    if (r->view.lines) printf("\033[%dA\033[J", r->view.lines);
    r->view.lines = 0;
    fflush(stdout);
    fwrite(line, 1, n, stderr);
    fflush(stderr);
    if (!r->finished) draw(r);
}

static void on_view_timer(uv_timer_t *h) {
    tp_run_t *r = h->data;
    if (!r->finished) draw(r);
}

void tp__view_mode(tp_run_t *r, int live, int quiet) {
    r->view.live = live;
    r->view.quiet = quiet;
}

void tp__view_done_before(tp_run_t *r, int n) {
    r->view.done_before = n;
}

double tp__view_t0(const tp_run_t *r) {
    return r->view.t0;
}

void tp__view_start(tp_run_t *r) {
    r->view.t0 = tp__mono_s();
    if (r->view.quiet) return;
    if (!r->view.live) {
        printf("%s: running in %s\n", r->x.name, r->dir);
        if (r->best_changed) { /* resumed, or seeded by a fork */
            char best[700];
            best_line(r, best, sizeof best);
            printf("  so far the %s\n", best);
            r->best_changed = 0;
        }
        fflush(stdout);
        return;
    }
    tp__log_set_sink(log_above, r);
    uv_timer_init(&r->loop, &r->view.timer);
    r->view.timer.data = r;
    uv_timer_start(&r->view.timer, on_view_timer, 0, VIEW_PERIOD_MS);
    uv_signal_init(&r->loop, &r->view.winch);
    r->view.winch.data = r;
    uv_signal_start(&r->view.winch, on_winch, SIGWINCH);
}

/* The live view: the end's line (its first) joins the last few shown. */
static void keep_recent(tp_view_t *v, const char *line) {
    if (v->nrecent == TP_VIEW_RECENT) {
        memmove(v->recent[0], v->recent[1], sizeof v->recent[0] * (TP_VIEW_RECENT - 1));
        v->nrecent--;
    }
    snprintf(v->recent[v->nrecent++], sizeof v->recent[0], "%.*s", (int)strcspn(line, "\n"), line);
}

void tp__view_attempt_ended(tp_run_t *r, const trial_t *t, tp_requeue_t requeue, const char *why,
                            double duration_s) {
    if (r->view.quiet) return;
    char *shown = why ? tp__escape(why, 0) : NULL; /* the last line of its stderr, maybe */
    why = shown;
    char v[48] = "", d[32], rung[96], at[100] = "", where[160] = "";
    tp__format_duration(duration_s, d, sizeof d);
    if (t->has_value) {
        char s[32];
        tp__fmt_sig(t->value, s);
        snprintf(v, sizeof v, "%s=%s", r->x.metric, s);
    }
    if (t->where_text[0]) snprintf(where, sizeof where, " on %s", t->where_text);
    rung_text(r, t->job.rung, t->job.budget, rung, sizeof rung);
    if (*rung) snprintf(at, sizeof at, " (%s)", rung);
    tp_buf_t line; /* shown once the transaction that records it is committed */
    tp__buf_init(&line);
    tp__buf_printf(&line, "[%d/%llu] trial %lld ", done_count(r),
                   (unsigned long long)total_trials(r), (long long)t->id);
    if (requeue == TP_REQUEUE_RETRY)
        tp__buf_printf(&line,
                       "attempt %d failed after %s%s: %s; retrying (%d of %d retries used)\n",
                       t->attempts, d, where, why ? why : "", t->failures, r->x.retries);
    else if (requeue == TP_REQUEUE_REGROW || requeue == TP_REQUEUE_RESIZE)
        tp__buf_printf(&line, "attempt %d%s: %s\n", t->attempts, where, why ? why : "");
    else if (requeue == TP_REQUEUE_INTERRUPTED)
        tp__buf_printf(&line,
                       "attempt %d interrupted after %s%s; it runs again from its "
                       "checkpoint%s\n",
                       t->attempts, d, where, r->stopping ? " when resumed" : "");
    else if (t->state == TP_TRIAL_COMPLETED)
        tp__buf_printf(&line, "completed in %s%s: %s%s\n", d, where, v, at);
    else if (t->state == TP_TRIAL_PAUSED)
        tp__buf_printf(&line, "paused at %s after %s%s: %s; waits for a promotion\n",
                       *rung ? rung : "its rung", d, where, v);
    else if (t->state == TP_TRIAL_STOPPED)
        tp__buf_printf(&line, "stopped early%s%s: %s; %s\n", at, where, *v ? v : "no value",
                       why ? why : "");
    else
        tp__buf_printf(&line, "%s after %d attempt(s)%s: %s\n", tp__trial_state_name(t->state),
                       t->attempts, where, why ? why : "");
    if (r->best_changed) {
        char best[700];
        best_line(r, best, sizeof best);
        tp__buf_printf(&line, "  so far the %s\n", best);
        r->best_changed = 0;
    }
    if (r->view.live)
        keep_recent(&r->view, line.data);
    else
        tp__journal_announce(&r->journal, line.data);
    tp__buf_free(&line);
    free(shown);
}

void tp__view_final(tp_run_t *r) {
    if (r->view.quiet) return;
    if (r->view.live) {
        /* Replace the live block by the summary below. */
        uv_timer_stop(&r->view.timer);
        uv_signal_stop(&r->view.winch);
        tp__log_set_sink(NULL, NULL);
        if (r->view.lines) printf("\033[%dA\033[J", r->view.lines);
        r->view.lines = 0;
    }
    const int *c = tp__trials_counts(&r->trials);
    char el[32], best[700];
    tp__format_duration(tp__mono_s() - r->view.t0, el, sizeof el);
    best_line(r, best, sizeof best);
    char early[48] = "", inter[48] = "", paused[48] = "", regrown[64] = "";
    if (c[TP_TRIAL_STOPPED])
        snprintf(early, sizeof early, ", %d stopped early", c[TP_TRIAL_STOPPED]);
    if (c[TP_TRIAL_PAUSED]) snprintf(paused, sizeof paused, ", %d paused", c[TP_TRIAL_PAUSED]);
    if (r->trials.regrown)
        snprintf(regrown, sizeof regrown, ", %d placed again after running out of GPU memory",
                 r->trials.regrown);
    snprintf(inter, sizeof inter, ", %d interrupted", r->trials.interrupted);
    if (tp__journal_broken(&r->journal)) /* the counts below are this run's, not all in the store */
        printf("the store failed while %s (%s): it keeps only what it committed before; "
               "`tunepack trials %s` shows that\n",
               r->journal.failed, tp__store_strerror(r->journal.failed_rc), r->dir);
    printf("%s %s after %s: %d completed%s%s, %d failed, %d retried%s%s\n%s\nresults: %s\n",
           r->x.name, r->stopping ? "stopped" : "finished", el, c[TP_TRIAL_COMPLETED], early,
           paused, c[TP_TRIAL_FAILED], r->trials.retried, regrown, inter, best, r->dir);
    if (*tp__deadline_final(r))
        printf("%s\n", tp__deadline_final(r)); /* a deadline run: its model, last */
    fflush(stdout);
}
