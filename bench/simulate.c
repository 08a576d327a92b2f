/* bench/simulate: the HyperSack study replayed by the simulator (SP1-SP4 on
 * the homogeneous 4-, 8- and 16-GPU clusters, SP4 on the mixed ones of
 * data/workloads/sp.yaml) for one-per-gpu and every greedy packing
 * policy, with the published figures beside; then the scale figure: a
 * million trials of SP4's mix on 10,000 A100s.
 *
 * First, vpack (the default) against wfd on every space x cluster, then the
 * run with MPS thread caps (the capped model) against the run without them
 * (served, the default) on every space x cluster and on the H200 packing
 * check (bench/gpu/h200-packing.workload.yaml, beside what it measured).
 *
 * With --cluster-scale, only the cluster-scale table (docs/simulator.md):
 * makespan and GPU-hours of SP4's mix on 1,000 and 10,000 A100s (nodes of 8,
 * wfd, incremental rounds) for 100k and 1M trials and node failures of 0, 1%
 * and 5% per node-day, each trial paying the remote start-up measured in
 * issue 11, and the wall time of the whole table.
 *
 *   simulate [sp.yaml] [--quick] [--compare] [--cluster-scale [--queue-wait S]]
 *     --quick: 100k trials for the scale run; --compare: the comparisons only;
 *     --queue-wait: the mean queue wait of a node (s, default 0) */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "sim/sim.h"

#ifndef TP_DATA_DIR
#define TP_DATA_DIR "data"
#endif
#ifndef TP_BENCH_GPU_DIR
#define TP_BENCH_GPU_DIR "bench/gpu"
#endif

typedef struct row {
    const char *space, *cluster;
    const char *published; /* "" when the study gave none */
} row_t;

static const row_t rows[] = {
    {"SP1", "homog_4", ""},
    {"SP1", "homog_8", ""},
    {"SP1", "homog_16", ""},
    {"SP2", "homog_4", ""},
    {"SP2", "homog_8", ""},
    {"SP2", "homog_16", ""},
    {"SP3", "homog_4", ""},
    {"SP3", "homog_8", ""},
    {"SP3", "homog_16", ""},
    {"SP4", "homog_4", "2.1 h -> 48.2 min (2.6x)"},
    {"SP4", "homog_8", "1.1 h -> 24.5 min (2.7x)"},
    {"SP4", "homog_16", "35.1 -> 13.1 min (2.7x)"},
    {"SP4", "hetero_4h", "H100+A100: 3.9-4x"},
    {"SP4", "hetero_4h6a", "H100+A100: 3.9-4x"},
    {"SP4", "hetero_4h12a", "H100+A100: 3.9-4x"},
};

static const char *const policies[] = {"one-per-gpu", "ff", "ffd", "bf",
                                       "bfd",         "wf", "wfd", "vpack"};

/* How a compared run is simulated: the contention model and profiling. */
typedef struct how {
    tp_sim_model_t model; /* TP_SIM_SERVED (the run now) or TP_SIM_CAPPED */
    double profile_s;     /* --profile: start-up + profile_time; 0: demands known */
} how_t;

static int run_how(const tp_workload_t *w, const char *space, const char *cluster,
                   const char *policy, double oversub, how_t how, tp_sim_result_t *r,
                   size_t *ngpus) {
    tp_cluster_t c;
    tp_error_t err = {0};
    if (tp__workload_cluster(w, cluster, &c, &err) < 0) {
        fprintf(stderr, "simulate: %s\n", err.msg);
        return -1;
    }
    c.limits.oversubscribe = oversub;
    if (ngpus) {
        *ngpus = 0;
        for (size_t n = 0; n < c.nnodes; n++)
            *ngpus += c.nodes[n].ngpus;
    }
    tp_sim_opts_t o = {
        .policy = policy, .overhead = 0.03, .model = how.model, .profile_s = how.profile_s};
    int rc = tp__sim_run(w, space, &c, &o, r, &err);
    if (rc < 0) fprintf(stderr, "simulate: %s on %s, %s: %s\n", space, cluster, policy, err.msg);
    tp__cluster_free(&c);
    return rc;
}

static int run(const tp_workload_t *w, const char *space, const char *cluster, const char *policy,
               double oversub, tp_sim_result_t *r, size_t *ngpus) {
    return run_how(w, space, cluster, policy, oversub, (how_t){0}, r, ngpus);
}

/* The default (vpack) against HyperSack's wfd on every space and every
 * cluster of the catalogue: makespan, its ratio to the lower bound, and the
 * mean GPU busy share (occupancy over time). The trials and GPUs of each
 * pair are shown: SP1 on homog_4 (96 trials, 4 GPUs) is SP4 on homog_16
 * (384, 16) scaled down by 4, the same models and batch sizes per GPU, so
 * the two rows agree in every figure. Returns -1 on an error. */
static int compare(const tp_workload_t *w) {
    printf("vpack (the default) against wfd on every space x cluster of the catalogue:\n");
    printf("%-4s %-13s %6s %4s %10s %10s %7s %7s %8s %8s %7s\n", "sp", "cluster", "trials", "GPUs",
           "vpack min", "wfd min", "vp /LB", "wfd /LB", "vp busy", "wfd busy", "vp/wfd");
    int worse = 0;
    for (size_t s = 0; s < w->nspaces; s++)
        for (size_t k = 0; k < w->nclusters; k++) {
            tp_sim_result_t a, b;
            size_t gpus;
            const char *sp = w->spaces[s].name, *cl = w->clusters[k].name;
            if (run(w, sp, cl, "vpack", 0, &a, &gpus) < 0 || run(w, sp, cl, "wfd", 0, &b, NULL) < 0)
                return -1;
            worse += a.makespan_s > b.makespan_s * (1 + 1e-9);
            printf("%-4s %-13s %6llu %4zu %10.1f %10.1f %7.3f %7.3f %7.1f%% %7.1f%% %7.3f\n", sp,
                   cl, (unsigned long long)a.trials, gpus, a.makespan_s / 60, b.makespan_s / 60,
                   a.ratio, b.ratio, 100 * a.busy_share, 100 * b.busy_share,
                   a.makespan_s / b.makespan_s);
            tp__sim_result_free(&a);
            tp__sim_result_free(&b);
        }
    printf("vpack's makespan is longer than wfd's on %d of %zu\n\n", worse,
           w->nspaces * w->nclusters);
    return 0;
}

/* The makespans of one space x cluster under policy with caps (old) and
 * without (new), demands known and profiled for profile_s, into ms[4]
 * (old, new, old profiled, new profiled), the served run's ratio to its
 * bound into *ratio. -1 on an error. */
static int old_new(const tp_workload_t *w, const char *sp, const char *cl, const char *policy,
                   double profile_s, double ms[4], double *ratio) {
    for (int k = 0; k < 4; k++) {
        how_t how = {.model = k % 2 ? TP_SIM_SERVED : TP_SIM_CAPPED,
                     .profile_s = k >= 2 ? profile_s : 0};
        tp_sim_result_t r;
        if (run_how(w, sp, cl, policy, 0, how, &r, NULL) < 0) return -1;
        ms[k] = r.makespan_s;
        if (k == 1) *ratio = r.ratio;
        tp__sim_result_free(&r);
    }
    return 0;
}

/* The run with MPS thread caps (capped: C_k = 1, compute within 1 per GPU,
 * each profiler alone on an empty GPU) against the run without them
 * (served: C_k, compute within C_k, all groups' profilers at once beside
 * placed trials), vpack, on every space x cluster, demands known and with
 * --profile 30s; then the H200 packing check against what it measured. */
static int compare_caps(const tp_workload_t *w) {
    printf("the run with MPS thread caps (old, capped model) against the run without them\n"
           "(new, served model; the default), vpack; makespans in minutes; prof: --profile 30s;\n"
           "new/LB: the new makespan over its bound (the work over C_4 = 1.44 per GPU):\n");
    printf("%-4s %-13s %8s %8s %7s %8s %8s %7s %7s\n", "sp", "cluster", "old min", "new min",
           "new/old", "old prof", "new prof", "new/old", "new/LB");
    double logsum[2] = {0};
    int n = 0;
    for (size_t s = 0; s < w->nspaces; s++)
        for (size_t k = 0; k < w->nclusters; k++) {
            double ms[4], ratio;
            const char *sp = w->spaces[s].name, *cl = w->clusters[k].name;
            if (old_new(w, sp, cl, "vpack", 30, ms, &ratio) < 0) return -1;
            printf("%-4s %-13s %8.1f %8.1f %7.3f %8.1f %8.1f %7.3f %7.3f\n", sp, cl, ms[0] / 60,
                   ms[1] / 60, ms[1] / ms[0], ms[2] / 60, ms[3] / 60, ms[3] / ms[2], ratio);
            logsum[0] += log(ms[1] / ms[0]);
            logsum[1] += log(ms[3] / ms[2]);
            n++;
        }
    printf("geometric mean of new/old: %.3f demands known, %.3f profiled\n\n", exp(logsum[0] / n),
           exp(logsum[1] / n));
    tp_workload_t h;
    tp_error_t err = {0};
    const char *path = TP_BENCH_GPU_DIR "/h200-packing.workload.yaml";
    if (tp__workload_load(path, &h, &err) < 0) {
        fprintf(stderr, "simulate: %s\n", err.msg);
        return -1;
    }
    printf("the H200 packing check (%s; one GPU, 8 trials, --profile 12s:\n"
           "3 s profile_time after a 9 s start-up), makespans in seconds:\n",
           "bench/gpu/h200-packing.workload.yaml");
    printf("%-12s %8s %8s %8s %8s %9s\n", "policy", "old", "new", "old prof", "new prof",
           "measured");
    static const struct {
        const char *policy, *measured;
    } hrows[] = {{"one-per-gpu", "106.1 s"}, {"wfd", "51.0 s (old, profiled)"}, {"vpack", ""}};
    for (size_t i = 0; i < sizeof hrows / sizeof hrows[0]; i++) {
        double ms[4], ratio;
        if (old_new(&h, "packing", "one_h200", hrows[i].policy, 12, ms, &ratio) < 0) {
            tp__workload_free(&h);
            return -1;
        }
        printf("%-12s %8.1f %8.1f %8.1f %8.1f   %s\n", hrows[i].policy, ms[0], ms[1], ms[2], ms[3],
               hrows[i].measured);
    }
    printf("\n");
    tp__workload_free(&h);
    return 0;
}

static int scale(const tp_workload_t *w, uint64_t trials, size_t gpus) {
    tp_cluster_t c;
    tp_error_t err = {0};
    if (tp__sim_cluster(w, "a100_80g", gpus, 8, 0, &c, &err) < 0) {
        fprintf(stderr, "simulate: %s\n", err.msg);
        return -1;
    }
    tp_sim_opts_t o = {.policy = "wfd", .overhead = 0.03, .trials = trials};
    tp_sim_result_t r;
    clock_t c0 = clock();
    int rc = tp__sim_run(w, "SP4", &c, &o, &r, &err);
    double cpu = (double)(clock() - c0) / CLOCKS_PER_SEC;
    tp__cluster_free(&c);
    if (rc < 0) {
        fprintf(stderr, "simulate: scale: %s\n", err.msg);
        return -1;
    }
    printf("%9llu trials on %5zu A100s (wfd, %s rounds): %8llu events, %6llu placer rounds, "
           "%.2f s wall, %.2f s CPU = %.2f us CPU/event; makespan %.1f min, /LB %.3f\n",
           (unsigned long long)r.trials, gpus,
           r.rounds_mode == TP_SIM_ROUNDS_INCREMENTAL ? "incremental" : "full",
           (unsigned long long)r.events, (unsigned long long)r.rounds, r.wall_s, cpu,
           1e6 * cpu / (double)r.events, r.makespan_s / 60, r.ratio);
    tp__sim_result_free(&r);
    return 0;
}

/* The remote start-up of a trial once its node's agent runs: the larger p50
 * that issue 11 measured through srun (4.7-11.7 ms; ssh 7.5-11.0 ms). */
#define REMOTE_STARTUP_S 0.0117

/* The 12 cells of the cluster-scale table; 0 or -1. */
static int cluster_scale(const tp_workload_t *w, double queue_wait_s) {
    static const size_t gpus[] = {1000, 10000};
    static const uint64_t trials[] = {100000, 1000000};
    static const double fails[] = {0, 0.01, 0.05};
    printf("cluster scale: SP4's mix on A100s in nodes of 8, wfd, incremental rounds (window\n"
           "64), trial start-up %.1f ms, a lost node taken for lost after 10 s and replaced\n"
           "after a queue wait of mean %.0f s (+ its agent's start, 0.47 s); seed 0.\n"
           "GPU-h: GPUs held from their node's join to the end or to its loss.\n\n",
           1e3 * REMOTE_STARTUP_S, queue_wait_s);
    printf("%6s %8s %9s %10s %10s %8s %9s %8s %8s\n", "GPUs", "trials", "fail/day", "makespan",
           "GPU-h", "failed", "requeued", "lost h", "wall s");
    double t0 = tp__mono_s();
    for (size_t g = 0; g < 2; g++)
        for (size_t n = 0; n < 2; n++)
            for (size_t f = 0; f < 3; f++) {
                tp_cluster_t c;
                tp_error_t err = {0};
                if (tp__sim_cluster(w, "a100_80g", gpus[g], 8, 0, &c, &err) < 0) {
                    fprintf(stderr, "simulate: %s\n", err.msg);
                    return -1;
                }
                tp_sim_opts_t o = {.policy = "wfd",
                                   .overhead = 0.03,
                                   .trials = trials[n],
                                   .rounds = TP_SIM_ROUNDS_INCREMENTAL,
                                   .node_failures = fails[f],
                                   .queue_wait_s = queue_wait_s,
                                   .trial_startup_s = REMOTE_STARTUP_S};
                tp_sim_result_t r;
                int rc = tp__sim_run(w, "SP4", &c, &o, &r, &err);
                tp__cluster_free(&c);
                if (rc < 0) {
                    fprintf(stderr, "simulate: cluster scale: %s\n", err.msg);
                    return -1;
                }
                printf("%6zu %8llu %8.0f%% %8.2f h %10.0f %8llu %9llu %8.1f %8.2f\n", gpus[g],
                       (unsigned long long)r.trials, 100 * fails[f], r.makespan_s / 3600,
                       r.gpu_hours, (unsigned long long)r.node_failures,
                       (unsigned long long)r.requeued, r.lost_s / 3600, r.wall_s);
                fflush(stdout);
                tp__sim_result_free(&r);
            }
    printf("\nthe table in %.1f s wall\n", tp__mono_s() - t0);
    return 0;
}

int main(int argc, char **argv) {
    const char *path = TP_DATA_DIR "/workloads/sp.yaml";
    int quick = 0;
    int only_compare = 0, only_scale = 0;
    double queue_wait_s = 0;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--cluster-scale") == 0)
            only_scale = 1;
        else if (strcmp(argv[i], "--queue-wait") == 0 && i + 1 < argc)
            queue_wait_s = atof(argv[++i]);
        else if (strcmp(argv[i], "--quick") == 0)
            quick = 1;
        else if (strcmp(argv[i], "--compare") == 0)
            only_compare = 1;
        else
            path = argv[i];
    }
    tp_workload_t w;
    tp_error_t err = {0};
    if (tp__workload_load(path, &w, &err) < 0) {
        fprintf(stderr, "simulate: %s\n", err.msg);
        return 1;
    }
    if (only_scale) {
        int rc = cluster_scale(&w, queue_wait_s);
        tp__workload_free(&w);
        return rc < 0;
    }
    if (compare(&w) < 0 || compare_caps(&w) < 0) return 1;
    if (only_compare) {
        tp__workload_free(&w);
        return 0;
    }
    printf("HyperSack study replayed (contention model of docs/simulator.md, MPS overhead 3%%,\n"
           "profiles ASSUMED in sp.yaml). makespan in minutes; x = speedup over one-per-gpu;\n"
           "/LB = makespan over the lower bound; busy = mean GPU busy share.\n"
           "wfd+os0.2: wfd with placement.oversubscribe 0.2 (compute capacity 1.2 per GPU).\n\n");
    printf("%-4s %-12s %-10s %9s %6s %6s %6s   %s\n", "sp", "cluster", "policy", "makespan", "x",
           "/LB", "busy", "published (one-per-gpu -> HyperSack)");
    for (size_t i = 0; i < sizeof rows / sizeof rows[0]; i++) {
        tp_sim_result_t base;
        if (run(&w, rows[i].space, rows[i].cluster, "one-per-gpu", 0, &base, NULL) < 0) return 1;
        size_t np = sizeof policies / sizeof policies[0];
        for (size_t p = 0; p <= np; p++) {
            tp_sim_result_t r;
            const char *pol = p < np ? policies[p] : "wfd";
            double os = p < np ? 0 : 0.2;
            if (p == 0)
                r = base;
            else if (run(&w, rows[i].space, rows[i].cluster, pol, os, &r, NULL) < 0)
                return 1;
            printf("%-4s %-12s %-10s %9.1f %5.2fx %6.3f %5.1f%%   %s\n", rows[i].space,
                   rows[i].cluster, p < np ? pol : "wfd+os0.2", r.makespan_s / 60,
                   base.makespan_s / r.makespan_s, r.ratio, 100 * r.busy_share,
                   p < np && strcmp(pol, "wfd") == 0 ? rows[i].published : "");
            if (p != 0) tp__sim_result_free(&r);
        }
        printf("%-4s %-12s %-10s %9.1f\n", rows[i].space, rows[i].cluster, "bound",
               base.lower_bound_s / 60);
        tp__sim_result_free(&base);
    }
    printf("\nscale (cost per event should not grow with the trials done; the first run's\n"
           "cost is mostly the initial fill of 10,000 empty GPUs):\n");
    if (scale(&w, quick ? 10000 : 100000, 10000) < 0) return 1;
    if (scale(&w, quick ? 100000 : 1000000, 10000) < 0) return 1;
    tp__workload_free(&w);
    return 0;
}
