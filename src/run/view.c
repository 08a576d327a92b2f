/* view: progress while an experiment runs. On a terminal a live block
 * redrawn at most twice a second; otherwise one plain line per finished
 * trial. Reads the orchestrator's counters; writes only to stdout. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "run/orchestrator_internal.h"
#include "run/run.h"

#define VIEW_PERIOD_MS 500

static uint64_t total_trials(const tp_run_t *r) {
    uint64_t total = r->sched->ops->total(r->sched);
    return total ? total : r->trials.n;
}

/* Trials that reached a final state. */
static int done_count(const tp_run_t *r) {
    const int *c = r->trials.count;
    return c[TP_TRIAL_COMPLETED] + c[TP_TRIAL_STOPPED] + c[TP_TRIAL_FAILED];
}

static void best_line(const tp_run_t *r, char *out, size_t n) {
    const trial_t *b = tp__trials_get(&r->trials, r->best_id);
    if (!b) {
        snprintf(out, n, "best %s: none yet", r->x.metric);
        return;
    }
    char params[512], v[32];
    tp__params_text(b->params, params, sizeof params);
    tp__fmt_sig(b->value, v);
    snprintf(out, n, "best %s %s (trial %lld): %s", r->x.metric, v, (long long)b->id, params);
}

static void draw(tp_run_t *r) {
    const int *c = r->trials.count;
    uint64_t total = total_trials(r);
    int done = done_count(r);
    long waiting = (long)total - done - c[TP_TRIAL_RUNNING] - c[TP_TRIAL_PAUSED];
    if (waiting < 0) waiting = 0;
    double elapsed = tp__mono_s() - r->view.t0;
    char el[32], rem[48] = "?", best[700];
    tp__format_duration(elapsed, el, sizeof el);
    int done_here = done - r->view.done_before;
    if (done_here > 0 && (uint64_t)done < total) {
        char d[32];
        tp__format_duration(elapsed / done_here * (double)(total - (uint64_t)done), d, sizeof d);
        snprintf(rem, sizeof rem, "~%s", d);
    } else if ((uint64_t)done >= total) {
        snprintf(rem, sizeof rem, "0s");
    }
    best_line(r, best, sizeof best);
    int width = 30, fill = total ? (int)((double)done / (double)total * width) : 0;
    char bar[64];
    for (int i = 0; i < width; i++) bar[i] = i < fill ? '#' : '-';
    bar[width] = 0;
    if (r->view.lines) printf("\033[%dA\033[J", r->view.lines);
    printf("%s [%s] %d/%llu done, %d running, %d paused, %ld pending, %d failed%s\n", r->x.name,
           bar, done, (unsigned long long)total, c[TP_TRIAL_RUNNING], c[TP_TRIAL_PAUSED], waiting,
           c[TP_TRIAL_FAILED], r->stopping ? " (stopping)" : "");
    printf("elapsed %s, remaining %s\n", el, rem);
    printf("%.*s\n", 160, best);
    r->view.lines = 3;
    fflush(stdout);
}

static void on_view_timer(uv_timer_t *h) {
    tp_run_t *r = h->data;
    if (!r->finished) draw(r);
}

void tp__view_start(tp_run_t *r) {
    r->view.t0 = tp__mono_s();
    if (r->view.quiet) return;
    if (!r->view.live) {
        printf("%s: running in %s\n", r->x.name, r->dir);
        fflush(stdout);
        return;
    }
    uv_timer_init(&r->loop, &r->view.timer);
    r->view.timer.data = r;
    uv_timer_start(&r->view.timer, on_view_timer, 0, VIEW_PERIOD_MS);
}

void tp__view_trial_ended(tp_run_t *r, const trial_t *t, const char *why, double duration_s) {
    if (r->view.quiet || r->view.live) return;
    char v[32] = "", d[32];
    tp__format_duration(duration_s, d, sizeof d);
    int done = done_count(r);
    if (t->state == TP_TRIAL_COMPLETED) {
        tp__fmt_sig(t->value, v);
        printf("[%d/%llu] trial %lld completed in %s: %s=%s\n", done,
               (unsigned long long)total_trials(r), (long long)t->id, d, r->x.metric, v);
    } else {
        printf("[%d/%llu] trial %lld %s after %d attempt(s): %s\n", done,
               (unsigned long long)total_trials(r), (long long)t->id, tp__trial_state_name(t->state),
               t->attempts, why ? why : "");
    }
    fflush(stdout);
}

void tp__view_final(tp_run_t *r) {
    if (r->view.quiet) return;
    if (r->view.live) {
        /* Replace the live block by the summary below. */
        uv_timer_stop(&r->view.timer);
        if (r->view.lines) printf("\033[%dA\033[J", r->view.lines);
        r->view.lines = 0;
    }
    const int *c = r->trials.count;
    char el[32], best[700];
    tp__format_duration(tp__mono_s() - r->view.t0, el, sizeof el);
    best_line(r, best, sizeof best);
    char early[48] = "", inter[48] = "";
    if (c[TP_TRIAL_STOPPED]) snprintf(early, sizeof early, ", %d stopped early", c[TP_TRIAL_STOPPED]);
    if (r->trials.interrupted)
        snprintf(inter, sizeof inter, ", %d interrupted", r->trials.interrupted);
    printf("%s %s after %s: %d completed%s, %d failed, %d retried%s\n%s\nresults: %s\n",
           r->x.name, r->stopping ? "stopped" : "finished", el, c[TP_TRIAL_COMPLETED], early,
           c[TP_TRIAL_FAILED], r->trials.retried, inter, best, r->dir);
    fflush(stdout);
}
