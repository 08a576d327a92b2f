/* bench/deadline: the best metric at deadlines of 25%, 50% and 100% of what
 * ASHA needs to finish, hypersched (with reallocation) against asha, on the
 * tuning simulator (src/sim/sim_tune.c: synthetic learning curves, measured
 * scaling curves and start-ups, 8 GPUs, 81 configurations, budget 1..27,
 * eta 3), over several seeds: median and mean of the best metric reported by
 * the deadline, and of the noiseless metric of that best trial.
 *
 *   deadline [--seeds N] [--policy uniform|top-job|softmax] [--timeline FILE.csv]
 *            [--svg FILE.svg] [--at 0.25] [--per-seed]
 *     --timeline/--svg: one hypersched run's events and Gantt (seed 1, the --at deadline) */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sim/sim_tune.h"

static const double fracs[] = {0.25, 0.5, 1.0};

static int cmp(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static double median(double *v, int n) {
    qsort(v, (size_t)n, sizeof *v, cmp);
    return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

static double mean(const double *v, int n) {
    double s = 0;
    for (int i = 0; i < n; i++)
        s += v[i];
    return s / n;
}

static void run(tp_simtune_cfg_t *c, tp_simtune_result_t *r) {
    tp_error_t err = {0};
    if (tp__simtune_run(c, r, &err) != 0) {
        fprintf(stderr, "deadline: %s\n", err.msg);
        exit(1);
    }
}

static int write_file(const char *path, const tp_buf_t *b) {
    FILE *f = fopen(path, "w");
    if (!f || fwrite(b->data, 1, b->len, f) != b->len || fclose(f) != 0) {
        fprintf(stderr, "deadline: cannot write %s\n", path);
        return 1;
    }
    return 0;
}

int main(int argc, char **argv) {
    int seeds = 9;
    const char *policy = "uniform", *csv = NULL, *svg = NULL;
    double at = 0.25;
    int per_seed = 0;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--seeds") && i + 1 < argc)
            seeds = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--policy") && i + 1 < argc)
            policy = argv[++i];
        else if (!strcmp(argv[i], "--timeline") && i + 1 < argc)
            csv = argv[++i];
        else if (!strcmp(argv[i], "--svg") && i + 1 < argc)
            svg = argv[++i];
        else if (!strcmp(argv[i], "--at") && i + 1 < argc)
            at = atof(argv[++i]);
        else if (!strcmp(argv[i], "--per-seed"))
            per_seed = 1;
        else {
            fprintf(stderr, "usage: deadline [--seeds N] [--policy P] [--timeline F.csv] "
                            "[--svg F.svg] [--at FRACTION] [--per-seed]\n");
            return 2;
        }
    }
    if (seeds < 1 || seeds > 1000 || tp__realloc_policy_parse(policy) < 0) {
        fprintf(stderr, "deadline: --seeds 1..1000, --policy uniform|top-job|softmax\n");
        return 2;
    }
    enum { NF = 3 };
    double *asha[NF], *hs[NF], *asha_t[NF], *hs_t[NF];
    int wins[NF] = {0}, better[NF] = {0};
    for (int f = 0; f < NF; f++) {
        asha[f] = calloc((size_t)seeds, sizeof(double));
        hs[f] = calloc((size_t)seeds, sizeof(double));
        asha_t[f] = calloc((size_t)seeds, sizeof(double));
        hs_t[f] = calloc((size_t)seeds, sizeof(double));
    }
    double full = 0;
    size_t refused = 0, resizes = 0;
    for (int s = 0; s < seeds; s++) {
        tp_simtune_cfg_t c;
        tp__simtune_defaults(&c);
        c.seed = (uint64_t)s + 1;
        tp_simtune_result_t r;
        run(&c, &r); /* ASHA to its end: the reference time */
        double T = r.end_s;
        full += T;
        for (int f = 0; f < NF; f++) {
            c.scheduler = "asha";
            c.realloc = 0;
            c.deadline_s = fracs[f] * T;
            run(&c, &r);
            asha[f][s] = r.best;
            asha_t[f][s] = r.best_true;
            c.scheduler = "hypersched";
            c.realloc = 1;
            c.ropts.policy = (tp_realloc_policy_t)tp__realloc_policy_parse(policy);
            run(&c, &r);
            hs[f][s] = r.best;
            hs_t[f][s] = r.best_true;
            refused += r.refused;
            resizes += r.resizes;
            if (per_seed)
                printf("seed %d deadline %3.0f%% (%.0f s): asha %.4f, hypersched %.4f (%zu trials, "
                       "%zu refused, %zu resizes)\n",
                       s + 1, fracs[f] * 100, c.deadline_s, asha[f][s], hs[f][s], r.trials,
                       r.refused, r.resizes);
            wins[f] += hs[f][s] >= asha[f][s];
            better[f] += hs[f][s] > asha[f][s];
        }
    }
    printf("tuning simulator: 8 GPUs, 81 configurations (random), budget 1..27 eta 3, %d seeds; "
           "ASHA needs %.0f s on average to finish\n",
           seeds, full / seeds);
    printf("hypersched: admission on measured timings + reallocation (%s, min_gain 1.1, "
           "cooldown 60 s); %zu refusals and %zu resizes in all\n\n",
           policy, refused, resizes);
    printf("best metric reported by the deadline (higher is better)\n");
    printf("| deadline | asha median | asha mean | hypersched median | hypersched mean | seeds "
           "hypersched >= asha | seeds hypersched > asha |\n");
    printf("|---|---|---|---|---|---|---|\n");
    for (int f = 0; f < NF; f++) {
        double am = mean(asha[f], seeds), hm = mean(hs[f], seeds);
        printf("| %3.0f%% | %.4f | %.4f | %.4f | %.4f | %d/%d | %d/%d |\n", fracs[f] * 100,
               median(asha[f], seeds), am, median(hs[f], seeds), hm, wins[f], seeds, better[f],
               seeds);
    }
    printf("\nnoiseless metric of that best trial at its last step\n");
    printf("| deadline | asha median | asha mean | hypersched median | hypersched mean |\n");
    printf("|---|---|---|---|---|\n");
    for (int f = 0; f < NF; f++)
        printf("| %3.0f%% | %.4f | %.4f | %.4f | %.4f |\n", fracs[f] * 100,
               median(asha_t[f], seeds), mean(asha_t[f], seeds), median(hs_t[f], seeds),
               mean(hs_t[f], seeds));
    int rc = 0;
    if (csv || svg) {
        tp_simtune_cfg_t c;
        tp__simtune_defaults(&c);
        c.seed = 1;
        tp_simtune_result_t r;
        run(&c, &r);
        tp_buf_t tl, pic;
        tp__buf_init(&tl);
        tp__buf_init(&pic);
        c.scheduler = "hypersched";
        c.realloc = 1;
        c.ropts.policy = (tp_realloc_policy_t)tp__realloc_policy_parse(policy);
        c.deadline_s = at * r.end_s;
        c.timeline = &tl;
        c.svg = &pic;
        run(&c, &r);
        printf("\ntimeline: hypersched, seed 1, deadline %.0f s (%.0f%%): best %.4f (trial %lld), "
               "%zu trials, %zu refused, %zu resizes, GPUs busy %.0f%%\n",
               c.deadline_s, at * 100, r.best, (long long)r.best_trial, r.trials, r.refused,
               r.resizes, r.gpu_busy * 100);
        if (csv) rc |= write_file(csv, &tl);
        if (svg) rc |= write_file(svg, &pic);
        tp__buf_free(&tl);
        tp__buf_free(&pic);
    }
    for (int f = 0; f < NF; f++)
        free(asha[f]), free(hs[f]), free(asha_t[f]), free(hs_t[f]);
    return rc;
}
