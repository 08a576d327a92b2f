/* Unit tests pinning asha to Li et al. 2020 ("A System for Massively
 * Parallel Hyperparameter Tuning", alg. 2) at concurrency 1: min 1, max 27,
 * eta 3 (rungs 1 3 9 27), N trials run one job at a time. The rung-0 count
 * is N, a promoted trial resumes from its checkpoint (a job at rung k + 1
 * trains r_(k+1) - r_k more epochs), and get_job promotes from the highest
 * rung whose top floor(n_k / eta) holds a trial not yet promoted. */
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "search/asha.h"
#include "search/scheduler.h"
#include "tp_test.h"

static const double RUNGS[4] = {1, 3, 9, 27};

typedef struct {
    int reached[64]; /* rung count: trials that ran a job at rung k */
    double epochs;   /* from the checkpoint: r_k - r_(k-1) a job */
    int order[256];  /* jobs, as trial * 10 + rung */
    int njobs;
} tally_t;

/* Runs asha with `trials` trials at concurrency 1; trial t's value at rung
 * k is value(t, k). tp_failed_: the calling test's. */
static void run(int *tp_failed_, int trials, double (*value)(int t, int k), tally_t *out) {
    tp_space_t sp;
    tp__space_init(&sp);
    tp_param_t x = {.name = tp__strdup("x"), .kind = TP_DOM_UNIFORM, .lo = 0, .hi = 1};
    tp__space_add(&sp, &x);
    tp_scheduler_cfg_t cfg = {
        .scheduler = "asha",
        .sampler = {.algorithm = "random", .trials = (uint64_t)trials, .seed = 1},
        .budget = {.name = "epochs", .min = 1, .max = 27, .eta = 3},
        .maximize = 1};
    tp_error_t err = {0};
    tp_scheduler_t *s = tp__scheduler_new(&sp, &cfg, &err);
    TP_REQUIRE(s != NULL);
    memset(out, 0, sizeof *out);
    TP_CHECK_NEAR(s->ops->work(s), 3.0 * trials, 1e-9); /* N x (1 + 2/3 + 6/9 + 18/27) */
    tp_job_t job;
    int rc;
    while ((rc = s->ops->next(s, 0, &job)) == 1) {
        json_decref(job.config);
        TP_CHECK(job.budget == RUNGS[job.rung]);
        TP_CHECK_INT(job.is_new, job.rung == 0);
        out->reached[job.rung]++;
        out->epochs += job.budget - (job.rung ? RUNGS[job.rung - 1] : 0);
        if (out->njobs < 256) out->order[out->njobs++] = (int)job.trial * 10 + job.rung;
        s->ops->result(s, job.trial, job.rung, 1, value((int)job.trial, job.rung), 0);
        TP_CHECK_INT(s->ops->final(s, job.trial, job.rung), job.rung == 3);
    }
    TP_CHECK_INT(rc, 0); /* concurrency 1: nothing runs, so never -EAGAIN */
    tp__scheduler_free(s);
    tp__space_free(&sp);
}

/* The rung counts n_0..n_3 and the epochs a run spent. */
static void check_counts(int *tp_failed_, const tally_t *a, const int n[4], double epochs) {
    for (int k = 0; k < 4; k++)
        TP_CHECK_INT(a->reached[k], n[k]);
    TP_CHECK_NEAR(a->epochs, epochs, 1e-9);
}

/* Each trial worse than every earlier one, at every rung: no trial ever
 * leaves a rung's top, so asha is synchronous SHA exactly. */
static double worse_each_trial(int t, int k) {
    return k - t / 1000.0;
}

TP_TEST(test_asha_in_order_runs_the_papers_rung_counts_and_epochs) {
    tally_t a;
    run(tp_failed_, 27, worse_each_trial, &a);
    /* n_k = N / eta^k: 27 9 3 1; epochs 27 x 1 + 9 x 2 + 3 x 6 + 1 x 18 = 81 */
    check_counts(tp_failed_, &a, (const int[4]){27, 9, 3, 1}, 81);
    /* promotion order: whenever rung 0 holds 3m results its m-th best goes on,
     * the highest rung first (trial 0 to rung 2 as soon as rung 1 holds 3) */
    static const int want[] = {0,   10,  20,  1,   30,  40,  50,  11,  60,  70,  80, 21, 2,   90,
                               100, 110, 31,  120, 130, 140, 41,  150, 160, 170, 51, 12, 180, 190,
                               200, 61,  210, 220, 230, 71,  240, 250, 260, 81,  22, 3};
    TP_CHECK_INT(a.njobs, (int)(sizeof want / sizeof *want));
    for (int i = 0; i < a.njobs && i < (int)(sizeof want / sizeof *want); i++)
        TP_CHECK_INT(a.order[i], want[i]);
}

TP_TEST(test_asha_rung_zero_count_is_the_trials_and_the_top_is_floored) {
    /* N not a power of eta: 40 at rung 0, floor(40/3) = 13, floor(13/3) = 4,
     * floor(4/3) = 1 (ceil would give 14, 5, 2) */
    tally_t a;
    run(tp_failed_, 40, worse_each_trial, &a);
    check_counts(tp_failed_, &a, (const int[4]){40, 13, 4, 1}, 40 + 13 * 2 + 4 * 6 + 18);
    run(tp_failed_, 2, worse_each_trial, &a); /* fewer than eta: nobody goes on */
    check_counts(tp_failed_, &a, (const int[4]){2, 0, 0, 0}, 2);
}

/* Each trial better than every earlier one at rung 0 (what a sampler that
 * learns tends to give): a later rung-0 result pushes the rung's older
 * members down, the top grows with n_0, and a trial that enters it late is
 * promoted then too. Asha promotes more than floor(n_k / eta): the paper's
 * "mispromotions", and the epochs asha spends beyond synchronous SHA. */
static double better_each_trial(int t, int k) {
    return k + t / 1000.0;
}

TP_TEST(test_asha_promotes_late_entrants_to_a_growing_top_beyond_sha) {
    tally_t a;
    run(tp_failed_, 27, better_each_trial, &a);
    TP_CHECK_INT(a.reached[0], 27);
    /* rung 0: trial t >= 2 is the best on arrival, goes on at once; 0 and 1
     * never rank in the top */
    TP_CHECK_INT(a.reached[1], 25);
    TP_CHECK(a.reached[2] > 9 && a.reached[3] > 3);
    TP_CHECK(a.epochs > 81);
}

/* The promotion check against an oracle: the rule as written (the rung's
 * results sorted best first, the first that can go on among the top
 * floor(n / eta)), over the test's own list of the rung's results sorted
 * by qsort, on random rungs with ties, trials promoted, running and failed,
 * both modes, then after random changes (a new value for a trial, a trial
 * started, ended, failed or promoted). A check that ignores the top's bound
 * is caught, and so is a rung tree whose counts are planted wrong. */
typedef struct model {
    tp_asha_result_t res[64]; /* the rung's results, in no order */
    size_t n;
    int maximize;
} model_t;

static int model_cmp(const void *a, const void *b, int maximize) {
    const tp_asha_result_t *x = a, *y = b;
    if (x->value != y->value) return (x->value < y->value) == maximize ? 1 : -1;
    return (x->trial > y->trial) - (x->trial < y->trial);
}
static int model_max(const void *a, const void *b) {
    return model_cmp(a, b, 1);
}
static int model_min(const void *a, const void *b) {
    return model_cmp(a, b, 0);
}

static void model_put(model_t *m, int64_t t, double v) {
    size_t i = 0;
    while (i < m->n && m->res[i].trial != t)
        i++;
    if (i == m->n) m->n++;
    m->res[i] = (tp_asha_result_t){t, v};
}

static int64_t oracle(const tp_asha_t *st, const model_t *m, double eta, int bounded, size_t *rank,
                      double *value) {
    tp_asha_result_t sorted[64];
    memcpy(sorted, m->res, m->n * sizeof *sorted);
    qsort(sorted, m->n, sizeof *sorted, m->maximize ? model_max : model_min);
    size_t top = bounded ? (size_t)floor((double)m->n / eta + 1e-9) : m->n;
    for (size_t i = 0; i < top && i < m->n; i++) {
        const tp_asha_trial_t *t = &st->trials[sorted[i].trial];
        if (t->rung == 1 && !t->running && !t->failed) {
            *rank = i + 1, *value = sorted[i].value;
            return sorted[i].trial;
        }
    }
    return -1;
}

/* tp__asha_promotable against the oracle, the tree's rules, and its order
 * against the model's. 1 when the unbounded rule answers otherwise. */
static int check_rung(int *tp_failed_, const tp_asha_t *st, const model_t *m, double eta) {
    TP_CHECK(tp__asha_rung_valid(st, 1));
    TP_CHECK_INT((long long)st->rungs[1].n, (long long)m->n);
    size_t r1 = 0, r2 = 0, r3 = 0, n = 0;
    double v1 = 0, v2 = 0, v3 = 0;
    int64_t got = tp__asha_promotable(st, 1, eta, &r1, &v1);
    int64_t want = oracle(st, m, eta, 1, &r2, &v2);
    TP_CHECK_INT(got, want);
    if (got >= 0 && got == want) {
        TP_CHECK_INT(r1, r2);
        TP_CHECK(v1 == v2);
    }
    tp_asha_result_t *sorted = tp__asha_sorted(st, 1, &n), mine[64];
    memcpy(mine, m->res, m->n * sizeof *mine);
    qsort(mine, m->n, sizeof *mine, m->maximize ? model_max : model_min);
    TP_CHECK_INT(n, m->n);
    for (size_t i = 0; i < n && i < m->n; i++)
        TP_CHECK(sorted[i].trial == mine[i].trial && sorted[i].value == mine[i].value);
    free(sorted);
    return oracle(st, m, eta, 0, &r3, &v3) != want;
}

TP_TEST(test_promotable_is_the_first_that_can_go_on_in_the_sorted_top) {
    tp_rng_t rng;
    tp__rng_seed(&rng, 35, 1);
    int planted_caught = 0, corrupt_caught = 0, corrupt_tried = 0;
    for (int c = 0; c < 2000; c++) {
        tp_asha_t st;
        memset(&st, 0, sizeof st);
        st.nrungs = 3;
        model_t m = {.maximize = (int)tp__rng_below(&rng, 2)};
        st.maximize = m.maximize;
        size_t n = 1 + tp__rng_below(&rng, 60), perm[64];
        st.trials = calloc(n, sizeof *st.trials);
        st.ntrials = n;
        for (size_t t = 0; t < n; t++) {
            st.trials[t].rung = 1 + (int)tp__rng_below(&rng, 2); /* 2: promoted */
            st.trials[t].running = tp__rng_below(&rng, 4) == 0;
            st.trials[t].failed = tp__rng_below(&rng, 6) == 0;
            perm[t] = t;
        }
        for (size_t i = n; i > 1; i--) { /* results arrive in no particular order */
            size_t j = tp__rng_below(&rng, i), x = perm[i - 1];
            perm[i - 1] = perm[j], perm[j] = x;
        }
        for (size_t i = 0; i < n; i++) {
            if (tp__rng_below(&rng, 5) == 0) continue;     /* no result at rung 1 */
            double v = (double)tp__rng_below(&rng, 8) / 4; /* ties, and 0 */
            tp__asha_record(&st, (int64_t)perm[i], 1, v);
            model_put(&m, (int64_t)perm[i], v);
        }
        double eta = 2 + (double)tp__rng_below(&rng, 3);
        planted_caught |= check_rung(tp_failed_, &st, &m, eta);
        for (int step = (int)tp__rng_below(&rng, 12); step > 0; step--) {
            int64_t t = (int64_t)tp__rng_below(&rng, n);
            tp_asha_trial_t *tr = &st.trials[t];
            switch (tp__rng_below(&rng, 4)) {
            case 0: { /* a new value (a job at rung 1 again) */
                double v = (double)tp__rng_below(&rng, 8) / 4;
                tp__asha_record(&st, t, 1, v);
                model_put(&m, t, v);
                break;
            }
            case 1:
                tr->running = !tr->running;
                tp__asha_sync(&st, t);
                break;
            case 2:
                tr->failed = !tr->failed;
                tp__asha_sync(&st, t);
                break;
            default:
                tr->rung = 1 + (int)tp__rng_below(&rng, 2);
                tp__asha_sync(&st, t);
            }
            planted_caught |= check_rung(tp_failed_, &st, &m, eta);
        }
        tp_asha_rung_t *r = &st.rungs[1];
        if (r->root && c % 10 == 0) { /* a count planted wrong is caught */
            corrupt_tried++;
            r->node[r->root].waiting ^= 1;
            corrupt_caught += !tp__asha_rung_valid(&st, 1);
            r->node[r->root].waiting ^= 1;
        }
        tp__asha_free(&st);
    }
    TP_CHECK(planted_caught);
    TP_CHECK(corrupt_tried > 0);
    TP_CHECK_INT(corrupt_caught, corrupt_tried);
}

int main(void) {
    return tp_test_main();
}
