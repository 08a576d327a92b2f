/* sched_pbt: population-based training (Jaderberg et al. 2017, "Population
 * Based Training of Neural Networks"), in the form Ray Tune's
 * PopulationBasedTraining gives it.
 *
 * The population is the sampler's `trials` configurations (a finite number
 * is required). Each trial trains in jobs of `perturbation_interval` budget
 * units: budgets I, 2I, ... up to budget.max (the last one is max itself);
 * the job reaching (k + 1) I is rung k. Between jobs a trial waits, paused
 * with its checkpoint.
 *
 * Generations. When every live trial has ended its job at the same budget
 * b < max (none running), the scheduler ranks them by that job's value and
 * decides for all of them at once (Ray's `synch=True`):
 * - quantiles as Ray computes them: n = ceil(N q), at most floor(N / 2)
 *   (N the live trials, q `quantile`, default 0.25; N < 2: n = 0); the bottom
 *   n are the worst n values, the top n the best (ties: the older trial
 *   ranks better);
 * - exploit: each bottom trial, worst first, takes a donor drawn uniformly
 *   from the top n (truncation selection) and goes on from the donor's
 *   checkpoint (the run copies it over the trial's own) as a new segment of
 *   its own lineage;
 * - explore: its new configuration is the donor's, each explored parameter
 *   resampled from the space with probability `resample`, else multiplied
 *   by one of `factors` drawn uniformly, clipped to the space's bounds,
 *   rounded for integers and to a quantization step;
 * - the other trials go on unchanged.
 * next() hands the bottom trials' jobs out first, then the others in id
 * order: a donor is always paused (its checkpoint still) when its copy is
 * taken, since the run copies when the job is handed out.
 *
 * PB2 (`explore_with: pb2`, Parker-Holder et al. 2020): the explore step of
 * the numeric explored parameters is a GP bandit's instead (pb2.c): every
 * ok job that started from a known value (the trial's own, or the donor's
 * after an exploit) is an observation (the budget it started at, its
 * configuration, the objective's gain over the job); each generation fits
 * the model once, and each bottom trial, worst first, takes the values
 * that maximize its upper confidence bound within the space's ranges.
 * Without a model (the first generation, which has no gains yet) and for
 * choice parameters, explore is as above.
 *
 * Trials that fall behind (new trials of an extended search) catch up first,
 * one job at a time without exploiting, until the population is at one
 * budget again. A failed job takes its trial out (as asha does).
 *
 * Departures from Ray Tune, and why: decisions are synchronous (Ray's
 * default is asynchronous, deciding with the latest score of each trial as
 * it reaches its interval): a donor's checkpoint is the directory its
 * process writes, so it must be paused to be copied, and ranking values
 * taken at one budget compares like with like (Jaderberg's own suggestion).
 * Factors clip to the space's bounds (Ray's do not). A choice parameter
 * explores by resampling only (Ray also shifts to a neighbouring value).
 *
 * Pure: the same calls give the same decisions (one rng seeded from the
 * sampler's seed, drawn only while a generation is planned), so a resumed
 * run replays it. Cost: a generation O(N^2 + N P) for N trials and P
 * explored parameters (populations are tens to hundreds);
 * next() otherwise O(N). */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "search/pb2.h"
#include "search/scheduler.h"

#define DEFAULT_QUANTILE 0.25 /* Ray Tune's quantile_fraction */
#define DEFAULT_RESAMPLE 0.25 /* Ray Tune's resample_probability */
#define RNG_STREAM 0x9b7      /* the rng's stream, apart from the sampler's own draws */

typedef struct pbt_trial {
    json_t *config; /* its configuration now (its segment's), owned */
    double at;      /* budget its last ok job reached; 0 before one */
    double value;   /* that job's value */
    double before;  /* the value its running job started from (NaN: none, a first job) */
    int running;    /* a job is out */
    int failed;     /* a job failed: out of the population */
    int segment;    /* exploits so far: 0 for the configuration it was created with */
} pbt_trial_t;

typedef struct pbt_step {
    int64_t trial;  /* whose job */
    int64_t donor;  /* exploit from this trial, -1: go on unchanged */
    json_t *config; /* exploit: the new configuration, owned */
    char why[160];  /* the decision in words (the job's why adds its budget) */
} pbt_step_t;

typedef struct pbt {
    pbt_trial_t *trials; /* by trial number */
    size_t n, cap;
    pbt_step_t *plan; /* the generation's jobs, handed out in order */
    size_t nplan, iplan;
    tp_pbt_explore_t *explore; /* the explored parameters, owned array (names borrowed) */
    size_t nexplore;
    double quantile;
    tp_pb2_t *pb2; /* explore_with pb2: the model, owned; NULL: perturb */
    int pb2_ready; /* the model stands for the generation being planned */
    tp_rng_t rng;
    size_t running;
    int exhausted; /* the sampler has no more configurations */
    int over;      /* next() returned 0 */
} pbt_t;

/* ---- settings ------------------------------------------------------------------- */

static int numeric(const tp_param_t *p) {
    return p->kind == TP_DOM_UNIFORM || p->kind == TP_DOM_LOGUNIFORM || p->kind == TP_DOM_INT ||
           p->kind == TP_DOM_NORMAL;
}

/* The explored parameters: cfg's, each checked against the space, or the
 * defaults. 0 or -EINVAL with err filled. */
static int take_explore(pbt_t *st, const tp_scheduler_t *s, tp_error_t *err) {
    const tp_pbt_cfg_t *c = &s->cfg.pbt;
    if (c->nexplore) {
        st->explore = tp__xcalloc(c->nexplore, sizeof *st->explore);
        for (size_t i = 0; i < c->nexplore; i++) {
            const tp_pbt_explore_t *e = &c->explore[i];
            const tp_param_t *p = tp__space_find(s->space, e->param);
            if (!p)
                return tp__errorf(err, -EINVAL,
                                  "pbt explores \"%s\", which is not a parameter in space",
                                  e->param);
            if (p->kind == TP_DOM_CONST)
                return tp__errorf(err, -EINVAL,
                                  "pbt explores \"%s\", a constant; explore a parameter with a "
                                  "range or choices",
                                  e->param);
            if (e->nfactors && !numeric(p))
                return tp__errorf(err, -EINVAL,
                                  "pbt explores \"%s\" by factors, but it is not numeric; write "
                                  "{resample: 0.25} for a choice",
                                  e->param);
            if (!(e->resample >= 0 && e->resample <= 1) || (!e->nfactors && e->resample == 0))
                return tp__errorf(err, -EINVAL,
                                  "pbt explores \"%s\" with neither factors nor a resample "
                                  "probability in (0, 1]; write e.g. {factors: [0.8, 1.2]}",
                                  e->param);
            st->explore[st->nexplore++] = *e;
        }
        return 0;
    }
    st->explore = tp__xcalloc(s->space->n ? s->space->n : 1, sizeof *st->explore);
    for (size_t i = 0; i < s->space->n; i++) {
        const tp_param_t *p = &s->space->params[i];
        if (p->kind == TP_DOM_CONST) continue;
        tp_pbt_explore_t e = {.param = p->name, .resample = DEFAULT_RESAMPLE};
        if (numeric(p)) {
            e.factors[0] = 0.8;
            e.factors[1] = 1.2;
            e.nfactors = 2;
        }
        st->explore[st->nexplore++] = e;
    }
    return 0;
}

static int pbt_init(tp_scheduler_t *s, tp_error_t *err) {
    const tp_pbt_cfg_t *c = &s->cfg.pbt;
    if (!(c->interval > 0) || !isfinite(c->interval))
        return tp__errorf(err, -EINVAL,
                          "scheduler pbt needs a perturbation_interval > 0 in budget units, e.g. "
                          "pbt: {perturbation_interval: 2}");
    if (c->quantile != 0 && !(c->quantile > 0 && c->quantile <= 0.5))
        return tp__errorf(err, -EINVAL, "pbt quantile must be in (0, 0.5], got %g", c->quantile);
    if (s->cfg.sampler.trials == 0)
        return tp__errorf(err, -EINVAL,
                          "scheduler pbt trains a population of the sampler's `trials`; give a "
                          "number, e.g. search: {trials: 8}");
    pbt_t *st = tp__xcalloc(1, sizeof *st);
    s->impl = st;
    st->quantile = c->quantile ? c->quantile : DEFAULT_QUANTILE;
    tp__rng_seed(&st->rng, s->cfg.sampler.seed, RNG_STREAM);
    int rc = take_explore(st, s, err);
    if (rc == 0 && c->pb2 && !(st->pb2 = tp__pb2_new(s->space, st->explore, st->nexplore, err)))
        rc = -EINVAL;
    if (rc < 0) {
        free(st->explore);
        free(st);
        s->impl = NULL;
    }
    return rc;
}

/* ---- budgets -------------------------------------------------------------------- */

/* The budget rung k's job reaches: (k + 1) I, the last one max. */
static double rung_budget(const tp_scheduler_t *s, int k) {
    double b = (k + 1) * s->cfg.pbt.interval;
    return b >= s->cfg.budget.max * (1 - 1e-9) ? s->cfg.budget.max : b;
}

/* The rung of the job that starts at budget `at`. */
static int rung_from(const tp_scheduler_t *s, double at) {
    return (int)floor(at / s->cfg.pbt.interval + 1e-9);
}

static int done(const tp_scheduler_t *s, const pbt_trial_t *t) {
    return t->at >= s->cfg.budget.max * (1 - 1e-9);
}

/* ---- explore ---------------------------------------------------------------------- */

/* v clipped to p's bounds, integers rounded, rounded to p's step. */
static json_t *fit_value(const tp_param_t *p, double v) {
    if (p->q > 0) v = round(v / p->q) * p->q;
    if (p->kind != TP_DOM_NORMAL) v = v < p->lo ? p->lo : v > p->hi ? p->hi : v;
    if (p->kind == TP_DOM_INT) return json_integer((json_int_t)llround(v));
    return json_real(v);
}

/* The donor's configuration, explored: with pb2's model, the parameters
 * it chooses take its values; each other explored parameter resampled with
 * its probability (one uniform draw each, and a fresh configuration from
 * the space when one hits), else multiplied by a factor drawn uniformly.
 * Returns a new object; *changes gets the changed parameters in words ("lr
 * 0.01 -> 0.012"), *by_model whether pb2's model chose. */
static json_t *explore(const tp_scheduler_t *s, pbt_t *st, const json_t *donor, char *changes,
                       size_t n, int *by_model) {
    json_t *cfg = json_deep_copy(donor);
    size_t used = 0;
    double chosen[TP_PB2_MAX_PARAMS];
    *by_model = st->pb2_ready && tp__pb2_choose(st->pb2, donor, &st->rng, chosen);
    changes[0] = 0;
    for (size_t i = 0; i < st->nexplore; i++) {
        const tp_pbt_explore_t *e = &st->explore[i];
        const tp_param_t *p = tp__space_find(s->space, e->param);
        json_t *old = json_object_get(cfg, e->param);
        if (!p || !old) continue; /* inactive under a condition */
        json_t *nv = NULL;
        int k = *by_model ? tp__pb2_index(st->pb2, e->param) : -1;
        if (k >= 0) {
            nv = fit_value(p, chosen[k]);
        } else if (tp__rng_uniform(&st->rng) < e->resample) {
            json_t *fresh = tp__space_sample_full(s->space, &st->rng);
            nv = json_incref(json_object_get(fresh, e->param));
            json_decref(fresh);
        } else if (e->nfactors && json_is_number(old)) {
            double f = e->factors[tp__rng_below(&st->rng, e->nfactors)];
            nv = fit_value(p, json_number_value(old) * f);
        }
        if (!nv) continue;
        char a[64], b[64];
        tp__value_text_human(old, a, sizeof a);
        tp__value_text_human(nv, b, sizeof b);
        if (used < n)
            used += (size_t)snprintf(changes + used, n - used, "%s%s %s -> %s", used ? ", " : "",
                                     e->param, a, b);
        json_object_set_new(cfg, e->param, nv);
    }
    if (used >= n && n > 4) strcpy(changes + n - 4, "...");
    return cfg;
}

/* ---- a generation ----------------------------------------------------------------- */

typedef struct ranked {
    int64_t trial;
    double value;
} ranked_t;

static void free_plan(pbt_t *st) {
    for (size_t i = 0; i < st->nplan; i++)
        json_decref(st->plan[i].config);
    free(st->plan);
    st->plan = NULL;
    st->nplan = st->iplan = 0;
}

/* The live trials all reached budget b, none running: plan every one's
 * next job (the header's rule). */
static void plan_generation(tp_scheduler_t *s, pbt_t *st, double b) {
    free_plan(st);
    ranked_t *r = tp__xmalloc((st->n ? st->n : 1) * sizeof *r);
    size_t N = 0;
    for (size_t i = 0; i < st->n; i++)
        if (!st->trials[i].failed) r[N++] = (ranked_t){(int64_t)i, st->trials[i].value};
    /* worst first (ties: the newer trial first); an insertion sort, since the
     * order depends on the mode and qsort's comparator takes no argument */
    for (size_t i = 1; i < N; i++)
        for (size_t j = i; j > 0; j--) {
            ranked_t *x = &r[j - 1], *y = &r[j];
            int worse = x->value != y->value
                            ? (s->cfg.maximize ? y->value < x->value : y->value > x->value)
                            : y->trial > x->trial;
            if (!worse) break;
            ranked_t t = *x;
            *x = *y;
            *y = t;
        }
    size_t q = N < 2 ? 0 : (size_t)ceil((double)N * st->quantile - 1e-9);
    if (2 * q > N) q = N / 2;
    st->pb2_ready = q && st->pb2 && tp__pb2_fit(st->pb2, b / s->cfg.budget.max);
    st->plan = tp__xcalloc(N ? N : 1, sizeof *st->plan);
    unsigned char *bottom = tp__xcalloc(st->n ? st->n : 1, 1);
    for (size_t i = 0; i < q; i++) {
        pbt_step_t *p = &st->plan[st->nplan++];
        const ranked_t *me = &r[i], *donor = &r[N - q + tp__rng_below(&st->rng, q)];
        char changes[120];
        int by_model;
        p->trial = me->trial;
        p->donor = donor->trial;
        p->config =
            explore(s, st, st->trials[donor->trial].config, changes, sizeof changes, &by_model);
        bottom[me->trial] = 1;
        if (snprintf(p->why, sizeof p->why,
                     "exploit at %g: %.4g in the bottom %zu of %zu, trial %lld's checkpoint "
                     "(%.4g); explore%s: %s",
                     b, me->value, q, N, (long long)donor->trial, donor->value,
                     by_model ? " by pb2" : "",
                     changes[0] ? changes : "unchanged") >= (int)sizeof p->why)
            memcpy(p->why + sizeof p->why - 4, "...", 4); /* cut: the decision has them all */
    }
    for (size_t i = 0; i < st->n; i++) {
        if (st->trials[i].failed || bottom[i]) continue;
        pbt_step_t *p = &st->plan[st->nplan++];
        p->trial = (int64_t)i;
        p->donor = -1;
        size_t rank = 0;
        while (rank < N && r[rank].trial != (int64_t)i)
            rank++;
        snprintf(p->why, sizeof p->why, "goes on at %g: %.4g ranks %zu of %zu%s", b,
                 st->trials[i].value, N - rank, N, rank >= N - q && q ? " (top)" : "");
    }
    free(bottom);
    free(r);
}

/* Trial t's next job from where it is (at), filled into out. */
static void start(tp_scheduler_t *s, pbt_t *st, int64_t t, tp_job_t *out) {
    pbt_trial_t *tr = &st->trials[t];
    memset(out, 0, sizeof *out);
    out->trial = t;
    out->rung = rung_from(s, tr->at);
    out->budget = rung_budget(s, out->rung);
    out->group = out->rung; /* a generation's jobs run at one budget */
    out->donor = -1;
    tr->before = tr->at > 0 ? tr->value : NAN;
    tr->running = 1;
    st->running++;
}

static int hand_out(tp_scheduler_t *s, pbt_t *st, tp_job_t *out) {
    pbt_step_t *p = &st->plan[st->iplan++];
    pbt_trial_t *tr = &st->trials[p->trial];
    if (p->donor >= 0) tr->at = st->trials[p->donor].at; /* where the copy starts */
    start(s, st, p->trial, out);
    if (p->donor >= 0) {
        tr->before = st->trials[p->donor].value; /* the copy's */
        json_decref(tr->config);
        tr->config = p->config; /* the plan's reference moves to the trial */
        p->config = NULL;
        tr->segment++;
        out->exploit = 1;
        out->donor = p->donor;
        out->from = tr->at;
        out->segment = tr->segment;
        out->config = json_incref(tr->config);
    }
    snprintf(out->why, sizeof out->why, "%s (budget %g)", p->why, out->budget);
    if (st->iplan == st->nplan) free_plan(st);
    return 1;
}

static int new_trial(tp_scheduler_t *s, pbt_t *st, double now, tp_job_t *out) {
    json_t *cfg = NULL;
    int rc = tp__searcher_ask(s->sampler, (uint64_t)st->n, rung_budget(s, 0), now, &cfg);
    if (rc == 0) st->exhausted = 1;
    if (rc <= 0) return rc;
    st->trials = tp__xgrow(st->trials, &st->cap, st->n + 1, sizeof *st->trials, 64);
    st->trials[st->n] = (pbt_trial_t){.config = cfg};
    start(s, st, (int64_t)st->n++, out);
    out->is_new = 1;
    out->config = json_incref(cfg);
    snprintf(out->why, sizeof out->why, "new member of the population (budget %g)", out->budget);
    return 1;
}

static int pbt_next(tp_scheduler_t *s, double now, tp_job_t *out) {
    pbt_t *st = s->impl;
    if (st->nplan) return hand_out(s, st, out);
    if (!st->exhausted && st->n < s->cfg.sampler.trials) {
        int rc = new_trial(s, st, now, out);
        if (rc != 0) return rc;
    }
    /* The population's budget: the least any live trial reached. */
    double low = INFINITY;
    int alike = 1, idle = st->running == 0;
    for (size_t i = 0; i < st->n; i++) {
        const pbt_trial_t *t = &st->trials[i];
        if (t->failed) continue;
        if (low != INFINITY && t->at != low) alike = 0;
        if (t->at < low) low = t->at;
    }
    if (low != INFINITY && low < s->cfg.budget.max * (1 - 1e-9)) {
        if (alike && idle) {
            plan_generation(s, st, low);
            if (st->nplan) return hand_out(s, st, out);
        }
        for (size_t i = 0; i < st->n && !alike; i++) { /* the ones behind catch up */
            pbt_trial_t *t = &st->trials[i];
            if (t->failed || t->running || t->at != low) continue;
            start(s, st, (int64_t)i, out);
            snprintf(out->why, sizeof out->why,
                     "catches up with the population from %g (budget %g)", t->at, out->budget);
            return 1;
        }
    }
    if (st->running) return -EAGAIN;
    st->over = 1;
    return 0;
}

static void pbt_result(tp_scheduler_t *s, int64_t trial, int rung, int ok, double value,
                       double now) {
    pbt_t *st = s->impl;
    if (trial < 0 || (size_t)trial >= st->n) return;
    pbt_trial_t *t = &st->trials[trial];
    if (t->running) {
        t->running = 0;
        st->running--;
    }
    double b = rung_budget(s, rung);
    if (!ok || isnan(value)) {
        t->failed = 1;
        tp__searcher_tell(s->sampler, (uint64_t)trial, t->config, NAN, b, now);
        return;
    }
    if (st->pb2 && !isnan(t->before)) /* the job started at the budget of the rung before */
        tp__pb2_observe(st->pb2, (rung ? rung_budget(s, rung - 1) : 0) / s->cfg.budget.max,
                        t->config, s->cfg.maximize ? value - t->before : t->before - value);
    t->at = b;
    t->value = value;
    tp__searcher_tell(s->sampler, (uint64_t)trial, t->config, value, b, now);
}

static int pbt_final(const tp_scheduler_t *s, int64_t trial, int rung) {
    const pbt_t *st = s->impl;
    if (trial < 0 || (size_t)trial >= st->n) return 1;
    const pbt_trial_t *t = &st->trials[trial];
    (void)rung;
    return t->failed || done(s, t) || st->over;
}

static uint64_t pbt_total(const tp_scheduler_t *s) {
    return s->sampler->ops->total(s->sampler);
}

static void pbt_trials(tp_scheduler_t *s) {
    pbt_t *st = s->impl;
    st->exhausted = st->over = 0;
}

static void pbt_destroy(tp_scheduler_t *s) {
    pbt_t *st = s->impl;
    if (!st) return;
    free_plan(st);
    for (size_t i = 0; i < st->n; i++)
        json_decref(st->trials[i].config);
    free(st->trials);
    free(st->explore);
    tp__pb2_free(st->pb2);
    free(st);
    s->impl = NULL;
}

const struct tp_scheduler_ops tp__sched_pbt_ops = {
    .name = "pbt",
    .init = pbt_init,
    .next = pbt_next,
    .result = pbt_result,
    .report = tp__sched_report_runs_on,
    .final = pbt_final,
    .total = pbt_total,
    .trials = pbt_trials,
    .destroy = pbt_destroy,
};
