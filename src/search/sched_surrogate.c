/* sched_surrogate: a scheduler around any scheduler that runs its trials on
 * a scaled-down model and promotes the best configurations to full size
 * (Hydro's "surrogate" and "target" trials).
 *
 * Numbering: the wrapper numbers every trial 0, 1, 2, ... in creation order,
 * surrogates and targets alike; the inner scheduler keeps its own numbers
 * (a map each way). A surrogate's configuration is the inner one with
 * param = value; a target's is its surrogate's with param = 1.0.
 *
 * Ranking: a surrogate with a result ranks by the largest rung it finished
 * (a value after 9 epochs is not weighed against one after 1), then by its
 * value at that rung (the metric's mode), ties to the older trial. Failed
 * trials are out. Hydro ranks by the best value a trial ever reported, at
 * any budget, so under ASHA a trial stopped at rung 0 can beat one that ran
 * to the end; it also promotes only one trial per change of the leader.
 *
 * Promotion, twice: once ceil(eager * N) of the N surrogate trials the
 * search will make have ended (final: completed, stopped or failed), each
 * configuration in the top `promote` then gets a target (the eager ones:
 * full-size results early; targets go before new surrogate jobs, as in
 * Hydro). When the inner search is over and no surrogate job runs, each of
 * the final top `promote` that has none yet gets one. So every
 * configuration of the final top `promote` runs at full size, and at most
 * 2 * promote targets run in all. Leaders found between the two points
 * wait for the end: a target for every configuration that entered the top
 * `promote` on the way (this module's first rule) spent 6-24 full-size
 * runs on a 120-240 trial TPE search that kept improving, most of them on
 * leaders overtaken before the end, and reached no better a promoted
 * configuration (bench/surrogate, docs/search.md). An unbounded search (N
 * unknown) promotes at the end only. Hydro floors eager * N (0.5 * 1 = 0:
 * a promotion before any result) and promotes at the end only when no
 * target ran at all, so a leader found after the eager promotion never ran
 * at full size.
 *
 * A deadline (hypersched: ops->deadline, ops->timing) goes to the inner
 * scheduler, with the surrogates' timings in its numbers; its refusals come
 * back in outer numbers, and a refused surrogate has ended. Targets are not
 * held to it, and their timings (another model's) are not told to it.
 *
 * Targets run once to the full budget (the last rung), are never stopped
 * early and are not told to the sampler (their values measure another
 * model). One objective only. Cost: next() and result() O(n log n) for n
 * surrogates with results (a sort), fine below 10k trials. */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "search/surrogate.h"

typedef struct surr_trial {
    tp_trial_kind_t kind; /* surrogate or target */
    int64_t inner;        /* surrogate: its number in the inner scheduler; target: -1 */
    int64_t source;       /* target: the surrogate it promotes; surrogate: -1 */
    json_t *config;       /* surrogate: the inner configuration (no param), owned */
    int running;          /* a job was handed out and has not ended */
    int ended;            /* surrogate: finished for good */
    int stopping;         /* surrogate: the inner scheduler stopped it early */
    int failed;           /* a job failed */
    int promoted;         /* surrogate: a target runs its configuration */
    int rung;             /* the largest rung with a result, -1: none */
    double value;         /* the value at that rung */
} surr_trial_t;

typedef struct surr_state {
    tp_scheduler_t *inner;  /* owned */
    char *param;            /* owned copy of cfg.param */
    tp_surrogate_cfg_t cfg; /* param points at the copy */
    surr_trial_t *t;        /* by outer number */
    size_t n, cap;
    int64_t *outer; /* by inner number: the outer number */
    size_t ninner, capinner;
    int64_t *queue; /* targets decided, not handed out yet (outer numbers) */
    size_t qhead, qn, qcap;
    size_t ended;         /* surrogates ended */
    int inner_done;       /* the inner scheduler returned 0 */
    int eager_done;       /* the eager promotion was made */
    int over;             /* inner done and no surrogate runs: every surrogate ended */
    int target_rung;      /* rung of a target's job: the last one */
    double target_budget; /* budget of a target's job: max, 0 without a budget */
} surr_state_t;

const char *tp__trial_kind_name(tp_trial_kind_t k) {
    return k == TP_KIND_SURROGATE ? "surrogate" : k == TP_KIND_TARGET ? "target" : NULL;
}

static surr_trial_t *add_trial(surr_state_t *st, tp_trial_kind_t kind) {
    st->t = tp__xgrow(st->t, &st->cap, st->n + 1, sizeof *st->t, 64);
    surr_trial_t *t = &st->t[st->n++];
    *t = (surr_trial_t){.kind = kind, .inner = -1, .source = -1, .rung = -1, .value = NAN};
    return t;
}

static void map_inner(surr_state_t *st, int64_t inner, int64_t outer) {
    st->outer = tp__xgrow(st->outer, &st->capinner, (size_t)inner + 1, sizeof *st->outer, 64);
    while (st->ninner <= (size_t)inner)
        st->outer[st->ninner++] = -1;
    st->outer[inner] = outer;
}

static surr_trial_t *get(surr_state_t *st, int64_t trial) {
    return trial >= 0 && (size_t)trial < st->n ? &st->t[trial] : NULL;
}

/* ---- ranking and promotion ------------------------------------------------------ */

typedef struct rank_ctx {
    const surr_state_t *st;
    int maximize;
} rank_ctx_t;

/* Larger rung first, then the better value, then the older trial. */
static int by_rank(const void *pa, const void *pb, void *ud) {
    const rank_ctx_t *c = ud;
    int64_t ia = *(const int64_t *)pa, ib = *(const int64_t *)pb;
    const surr_trial_t *a = &c->st->t[ia], *b = &c->st->t[ib];
    if (a->rung != b->rung) return a->rung > b->rung ? -1 : 1;
    if (a->value != b->value) return (a->value > b->value) == c->maximize ? -1 : 1;
    return ia < ib ? -1 : ia > ib;
}

/* The ranked surrogates with a result into *out (malloc'd), best first;
 * returns their count. O(n log n). */
static size_t ranking(const surr_state_t *st, int64_t **out) {
    int64_t *v = tp__xcalloc(st->n ? st->n : 1, sizeof *v);
    size_t k = 0;
    for (size_t i = 0; i < st->n; i++) {
        const surr_trial_t *t = &st->t[i];
        if (t->kind == TP_KIND_SURROGATE && !t->failed && t->rung >= 0 && isfinite(t->value))
            v[k++] = (int64_t)i;
    }
    rank_ctx_t c = {.st = st, .maximize = st->inner->cfg.maximize};
    qsort_r(v, k, sizeof *v, by_rank, &c);
    *out = v;
    return k;
}

/* The eager share of the surrogates has ended (never for an unbounded search). */
static int eager_open(const surr_state_t *st) {
    uint64_t total = st->inner->ops->total(st->inner);
    if (total == 0) return 0;
    size_t need = (size_t)ceil(st->cfg.eager * (double)total - 1e-9);
    if (need < 1) need = 1;
    return st->ended >= need;
}

/* At the eager point (the first call once the eager share has ended) and
 * when the search is over: a target for each of the top `promote`
 * surrogates that has none yet, queued best first. Between the two,
 * nothing. */
static void promote_leaders(surr_state_t *st) {
    if (!st->over) {
        if (st->eager_done || !eager_open(st)) return;
        st->eager_done = 1;
    }
    int64_t *rank;
    size_t k = ranking(st, &rank);
    for (size_t i = 0; i < k && i < (size_t)st->cfg.promote; i++) {
        if (st->t[rank[i]].promoted) continue;
        st->t[rank[i]].promoted = 1;
        surr_trial_t *tg = add_trial(st, TP_KIND_TARGET); /* may move st->t */
        tg->source = rank[i];
        st->queue = tp__xgrow(st->queue, &st->qcap, st->qn + 1, sizeof *st->queue, 16);
        st->queue[st->qn++] = (int64_t)st->n - 1;
    }
    free(rank);
}

/* The rank (1-based) of surrogate trial among the ranked ones, 0 if none. */
static size_t rank_of(const surr_state_t *st, int64_t trial, size_t *of) {
    int64_t *rank;
    size_t k = ranking(st, &rank), r = 0;
    for (size_t i = 0; i < k && !r; i++)
        if (rank[i] == trial) r = i + 1;
    free(rank);
    *of = k;
    return r;
}

/* ---- ops ------------------------------------------------------------------------- */

static json_t *with_param(const json_t *config, const char *param, double value) {
    json_t *c = json_copy((json_t *)config);
    json_object_set_new(c, param, json_real(value));
    return c;
}

static int hand_target(surr_state_t *st, tp_job_t *out) {
    int64_t id = st->queue[st->qhead++];
    if (st->qhead == st->qn) st->qhead = st->qn = 0;
    surr_trial_t *tg = &st->t[id];
    const surr_trial_t *src = &st->t[tg->source];
    size_t of, r = rank_of(st, tg->source, &of);
    char v[32];
    tp__fmt_sig(src->value, v);
    memset(out, 0, sizeof *out);
    out->trial = id;
    out->is_new = 1;
    out->config = with_param(src->config, st->param, TP_SURROGATE_FULL);
    out->rung = st->target_rung;
    out->budget = st->target_budget;
    snprintf(out->why, sizeof out->why,
             "target: trial %lld's configuration at full size (%s = 1), its surrogate ranked "
             "%zu of %zu with %s",
             (long long)tg->source, st->param, r, of, v);
    tg->running = 1;
    return 1;
}

/* The inner scheduler refused a job (a deadline's admission: hypersched):
 * the same refusal in outer numbers (trial -1, no trial, stays -1). A
 * refused surrogate is out of the inner search for good: it has ended. */
static int pass_refusal(surr_state_t *st, tp_job_t *j, tp_job_t *out) {
    if (j->trial >= 0) {
        if ((size_t)j->trial >= st->ninner || st->outer[j->trial] < 0)
            return -EAGAIN; /* an inner bug: a trial it never handed out */
        j->trial = st->outer[j->trial];
        surr_trial_t *t = &st->t[j->trial];
        if (!t->ended) {
            t->ended = 1;
            st->ended++;
        }
        promote_leaders(st);
    }
    *out = *j;
    return 1;
}

static int surr_next(tp_scheduler_t *s, double now, tp_job_t *out) {
    surr_state_t *st = s->impl;
    if (st->qn > st->qhead) return hand_target(st, out);
    if (!st->inner_done) {
        tp_job_t j;
        memset(&j, 0, sizeof j);
        int rc = st->inner->ops->next(st->inner, now, &j);
        if (rc < 0) return rc;
        if (rc == 1 && j.refused) return pass_refusal(st, &j, out);
        if (rc == 1) {
            int64_t id;
            if (j.is_new) {
                id = (int64_t)st->n;
                surr_trial_t *t = add_trial(st, TP_KIND_SURROGATE);
                t->inner = j.trial;
                t->config = j.config; /* the reference handed to us */
                map_inner(st, j.trial, id);
            } else if (j.trial < 0 || (size_t)j.trial >= st->ninner || st->outer[j.trial] < 0) {
                return -EAGAIN; /* an inner bug; the orchestrator would refuse it too */
            } else {
                id = st->outer[j.trial];
            }
            surr_trial_t *t = &st->t[id];
            t->running = 1;
            *out = j;
            out->trial = id;
            if (j.is_new) out->config = with_param(t->config, st->param, st->cfg.value);
            size_t k = strlen(out->why);
            char v[32];
            tp__fmt_sig(st->cfg.value, v);
            snprintf(out->why + k, sizeof out->why - k, "%ssurrogate (%s = %s)", k ? ", " : "",
                     st->param, v);
            return 1;
        }
        st->inner_done = 1;
    }
    for (size_t i = 0; i < st->n; i++)
        if (st->t[i].kind == TP_KIND_SURROGATE && st->t[i].running) return -EAGAIN;
    if (!st->over) { /* the search is over: every surrogate has ended */
        st->over = 1;
        for (size_t i = 0; i < st->n; i++)
            if (st->t[i].kind == TP_KIND_SURROGATE && !st->t[i].ended) {
                st->t[i].ended = 1;
                st->ended++;
            }
        promote_leaders(st);
        if (st->qn > st->qhead) return hand_target(st, out);
    }
    return 0;
}

static void surr_result(tp_scheduler_t *s, int64_t trial, int rung, int ok, double value,
                        double now) {
    surr_state_t *st = s->impl;
    surr_trial_t *t = get(st, trial);
    if (!t) return;
    t->running = 0;
    if (!ok || isnan(value)) t->failed = 1;
    if (t->kind == TP_KIND_TARGET) {
        if (!t->failed) t->rung = rung, t->value = value;
        return;
    }
    st->inner->ops->result(st->inner, t->inner, rung, ok, value, now);
    if (!t->failed && rung >= t->rung) t->rung = rung, t->value = value;
    if (!t->ended &&
        (t->failed || t->stopping || st->inner->ops->final(st->inner, t->inner, rung))) {
        t->ended = 1;
        st->ended++;
    }
    promote_leaders(st);
}

static int surr_report(tp_scheduler_t *s, int64_t trial, int64_t step, double value, double now,
                       char *why, size_t whylen) {
    surr_state_t *st = s->impl;
    surr_trial_t *t = get(st, trial);
    if (whylen) why[0] = '\0';
    if (!t || t->kind == TP_KIND_TARGET) return 1;
    int go = st->inner->ops->report(st->inner, t->inner, step, value, now, why, whylen);
    if (!go) t->stopping = 1;
    return go;
}

static int surr_final(const tp_scheduler_t *s, int64_t trial, int rung) {
    const surr_state_t *st = s->impl;
    const surr_trial_t *t = get((surr_state_t *)st, trial);
    if (!t || t->kind == TP_KIND_TARGET) return 1;
    return st->inner->ops->final(st->inner, t->inner, rung);
}

/* Deadline and timings go to the inner scheduler (only set when it plans
 * against time: see surr_timed_ops); a target's timing is not its model's. */
static void surr_deadline(tp_scheduler_t *s, double at) {
    surr_state_t *st = s->impl;
    st->inner->ops->deadline(st->inner, at);
}

static void surr_timing(tp_scheduler_t *s, const tp_timing_t *tm, double now) {
    surr_state_t *st = s->impl;
    const surr_trial_t *t = get(st, tm->trial);
    if (!t || t->kind != TP_KIND_SURROGATE) return;
    tp_timing_t inner = *tm;
    inner.trial = t->inner;
    st->inner->ops->timing(st->inner, &inner, now);
}

static uint64_t surr_total(const tp_scheduler_t *s) {
    const surr_state_t *st = s->impl;
    uint64_t n = st->inner->ops->total(st->inner);
    return n ? n + (uint64_t)st->cfg.promote : 0;
}

static void surr_destroy(tp_scheduler_t *s) {
    surr_state_t *st = s->impl;
    if (!st) return;
    for (size_t i = 0; i < st->n; i++)
        json_decref(st->t[i].config);
    st->inner->sampler = NULL; /* s owns it now */
    tp__scheduler_free(st->inner);
    free(st->t);
    free(st->outer);
    free(st->queue);
    free(st->param);
    free(st);
    s->impl = NULL;
}

/* The sampler is the inner scheduler's (shared): the inner one takes n. */
static void surr_trials(tp_scheduler_t *s) {
    surr_state_t *st = s->impl;
    tp__scheduler_set_trials(st->inner, s->cfg.sampler.trials);
}

static int surr_init(tp_scheduler_t *s, tp_error_t *err) {
    (void)s, (void)err;
    return 0; /* set up by tp__surrogate_wrap */
}

#define SURR_OPS                                                                                   \
    .name = "surrogate", .init = surr_init, .next = surr_next, .result = surr_result,              \
    .result_values = NULL, .report = surr_report, .final = surr_final, .total = surr_total,        \
    .trials = surr_trials, .destroy = surr_destroy

const struct tp_scheduler_ops tp__sched_surrogate_ops = {SURR_OPS};

/* Around an inner scheduler that plans against time (ops->deadline and
 * ops->timing: hypersched): those two forwarded. Only then, so that the run
 * journals deadlines and timings only for a scheduler that uses them. */
static const struct tp_scheduler_ops surr_timed_ops = {SURR_OPS, .deadline = surr_deadline,
                                                       .timing = surr_timing};

/* See surrogate.h. */
tp_scheduler_t *tp__surrogate_wrap(tp_scheduler_t *inner, const tp_surrogate_cfg_t *cfg,
                                   tp_error_t *err) {
    const char *bad = !cfg->param || !*cfg->param                  ? "param must name a parameter"
                      : !(cfg->value > 0) || !isfinite(cfg->value) ? "value must be > 0"
                      : cfg->promote < 1                           ? "promote must be >= 1"
                      : !(cfg->eager > 0 && cfg->eager <= 1)       ? "eager must be in (0, 1]"
                      : tp__search_nobj(&inner->cfg.sampler) > 1
                          ? "surrogates rank by one objective; with several use no surrogate"
                          : NULL;
    if (bad) {
        tp__errorf(err, -EINVAL, "surrogate: %s", bad);
        tp__scheduler_free(inner);
        errno = EINVAL;
        return NULL;
    }
    surr_state_t *st = tp__xcalloc(1, sizeof *st);
    st->inner = inner;
    st->param = tp__strdup(cfg->param);
    st->cfg = *cfg;
    st->cfg.param = st->param;
    const tp_budget_t *b = &inner->cfg.budget;
    if (b->name) {
        double rungs[64];
        size_t nr = tp__budget_rungs(b, rungs, TP_ARRAY_LEN(rungs));
        st->target_rung = nr ? (int)nr - 1 : 0;
        st->target_budget = b->max;
    }
    tp_scheduler_t *s = tp__xcalloc(1, sizeof *s);
    s->ops =
        inner->ops->deadline && inner->ops->timing ? &surr_timed_ops : &tp__sched_surrogate_ops;
    s->sampler = inner->sampler; /* owned by s from here: see surr_destroy */
    s->cfg = inner->cfg;
    s->space = inner->space;
    s->impl = st;
    return s;
}

tp_trial_kind_t tp__surrogate_kind(const tp_scheduler_t *s, int64_t trial, int64_t *source) {
    *source = -1;
    if (!s || (s->ops != &tp__sched_surrogate_ops && s->ops != &surr_timed_ops))
        return TP_KIND_PLAIN;
    const surr_trial_t *t = get(s->impl, trial);
    if (!t) return TP_KIND_PLAIN;
    *source = t->source;
    return t->kind;
}
