/* placement: every placement policy on a generated family of single-round
 * instances and on the HyperSack study instances, against the best packing
 * known for each, with decision times, in ONE table. Prints figures; not a
 * test.
 *
 *   placement [--limit S] [--quick] [--verbose] [--only NAME] [--seed S] [path/to/sp.yaml]
 *
 * The family (deterministic seeds, built here): seven classes of six instances,
 * 1-16 nodes, 1-8 GPUs per node, 3-8 trials per GPU, the trials drawn from a
 * few demand profiles per instance (the trials of one model and batch size
 * declare the same demand, as in a real search):
 *   compute  compute binds (shares 0.15-0.6, little memory, plenty of cores)
 *   memory   memory binds (10-38 GiB trials on 40/80 GiB GPUs, small shares)
 *   cpu      node cores bind (4-12 cores a trial, 6-16 cores per GPU)
 *   big      multi-GPU trials (2-4 GPUs on one node) among big single ones
 *   hetero   mixed GPU types and speeds (V100 0.6, A100 1.0, H100 2.0)
 *   mixed    all of the above at once, each resource near its limit
 *   cpuspeed node cores bind on some nodes (3-8 cores per GPU there, 10-24
 *            on the others; 1-6 cores a trial) and the GPUs run at two
 *            speeds, half of them 2x the others: within each node (even k)
 *            or node by node (odd k)
 * Best known = the larger of `optimal`'s value (with --limit, default 10 s)
 * and every policy's; "proved" counts the instances where `optimal` proved
 * its answer optimal. Occupancy = sum over GPUs of min(1, compute share) /
 * GPUs. Decision times: median of repeated runs (optimal: one run). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "place/place.h"
#include "sim/workload.h"

#ifndef TP_DATA_DIR
#define TP_DATA_DIR "data"
#endif

enum { C_COMPUTE, C_MEMORY, C_CPU, C_BIG, C_HETERO, C_MIXED, C_CPUSPEED, NCLASS, C_SP = NCLASS };
static const char *const class_name[] = {"compute", "memory", "cpu",     "big",
                                         "hetero",  "mixed",  "cpuspeed"};
#define PER_CLASS 6
#define MAXPOL 16

typedef struct instance {
    char name[48];
    int cls; /* C_* */
    tp_cluster_t c;
    tp_demand_t *t;
    size_t n;
    double best;  /* best known occupancy */
    int proved;   /* optimal proved it */
    double opt_s; /* optimal's wall seconds */
} instance_t;

static const tp_wl_gpu_type_t gpu_types[] = {{"v100_32g", 32768, 0.6},
                                             {"a100_40g", 40960, 1.0},
                                             {"a100_80g", 81920, 1.0},
                                             {"h100_80g", 81920, 2.0}};

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static double pick(tp_rng_t *r, double lo, double hi) {
    return lo + (hi - lo) * tp__rng_uniform(r);
}
static size_t below(tp_rng_t *r, size_t n) {
    return (size_t)tp__rng_below(r, n);
}

/* Instance k of class cls, from seed 1000 * cls + k + seed (--seed, 0 for the
 * table kept in docs/gpus.md; other seeds give held-out families). */
static void generate(instance_t *in, int cls, int k, uint64_t seed) {
    tp_rng_t r;
    tp__rng_seed(&r, 1000 * (uint64_t)cls + (uint64_t)k + seed, 17);
    memset(in, 0, sizeof *in);
    in->cls = cls;
    static const size_t node_counts[] = {1, 2, 3, 4, 8, 16};
    size_t nnodes = node_counts[k % PER_CLASS];
    size_t gpn = 1 + below(&r, 8);
    if (nnodes >= 8 && gpn > 4) gpn = 2 + below(&r, 3); /* <= 64 GPUs in all */
    if (cls == C_BIG && gpn < 4) gpn = 4;
    if (cls == C_CPUSPEED && gpn < 2) gpn = 2; /* two speeds on a node */
    size_t per_gpu = 3 + below(&r, 6);
    snprintf(in->name, sizeof in->name, "%s-%d", class_name[cls], k);
    in->c = (tp_cluster_t){.nnodes = nnodes, .limits = {.reserve_mib = 512, .sharing = 1}};
    in->c.nodes = tp__xcalloc(nnodes, sizeof *in->c.nodes);
    size_t type0 = cls == C_MEMORY ? 1 + below(&r, 2) : 2;
    for (size_t nd = 0; nd < nnodes; nd++) {
        size_t type = type0;
        if (cls == C_HETERO || cls == C_MIXED) type = below(&r, TP_ARRAY_LEN(gpu_types));
        double cores_per_gpu = cls == C_CPU || cls == C_MIXED ? pick(&r, 6, 16) : 32;
        if (cls == C_CPUSPEED)
            cores_per_gpu = tp__rng_below(&r, 2) ? pick(&r, 3, 8) : pick(&r, 10, 24);
        tp__workload_node(&in->c.nodes[nd], nd, gpn, (int)(cores_per_gpu * (double)gpn),
                          &gpu_types[type]);
        if (cls == C_CPUSPEED) /* a100_80g, half of them 2x (an h100_80g's speed) */
            for (size_t g = 0; g < gpn; g++)
                if (k % 2 == 0 ? g % 2 == 1 : nd % 2 == 1) in->c.nodes[nd].gpus[g].speed = 2.0;
    }
    /* demand profiles */
    size_t nprof = 2 + below(&r, 5);
    tp_demand_t prof[8];
    for (size_t p = 0; p < nprof; p++) {
        tp_demand_t *d = &prof[p];
        *d = (tp_demand_t){.gpus = 1, .duration_s = pick(&r, 60, 900)};
        d->compute = pick(&r, 0.15, 0.6);
        d->memory_mib = 1024 + below(&r, 7 * 1024);
        d->cpus = 1 + (int)below(&r, 2);
        switch (cls) {
        case C_MEMORY:
            d->compute = pick(&r, 0.05, 0.25);
            d->memory_mib = 10240 + below(&r, 28 * 1024);
            break;
        case C_CPU:
            d->compute = pick(&r, 0.1, 0.4);
            d->cpus = 4 + (int)below(&r, 9);
            break;
        case C_BIG:
            if (p % 2 == 0) d->gpus = 2 + (int)below(&r, 3);
            d->memory_mib = 8192 + below(&r, 40 * 1024);
            d->compute = pick(&r, 0.2, 0.7);
            d->cpus = 2 + (int)below(&r, 6);
            break;
        case C_HETERO:
            d->compute = pick(&r, 0.1, 0.5);
            d->memory_mib = 2048 + below(&r, 14 * 1024);
            break;
        case C_CPUSPEED:
            d->compute = pick(&r, 0.1, 0.45);
            d->memory_mib = 2048 + below(&r, 10 * 1024);
            d->cpus = 1 + (int)below(&r, 6);
            break;
        case C_MIXED:
            d->compute = pick(&r, 0.1, 0.5);
            d->memory_mib = 4096 + below(&r, 26 * 1024);
            d->cpus = 2 + (int)below(&r, 8);
            if (p == 0 && gpn >= 2) d->gpus = 2;
            break;
        }
    }
    size_t G = nnodes * gpn;
    in->n = per_gpu * G;
    in->t = tp__xcalloc(in->n, sizeof *in->t);
    for (size_t i = 0; i < in->n; i++) {
        in->t[i] = prof[below(&r, nprof)];
        in->t[i].id = (int64_t)i;
    }
}

static int study_instance(instance_t *in, const tp_workload_t *w, const char *space,
                          const char *cluster) {
    tp_error_t err = {0};
    memset(in, 0, sizeof *in);
    in->cls = C_SP;
    snprintf(in->name, sizeof in->name, "%s/%s", space, cluster);
    if (tp__workload_cluster(w, cluster, &in->c, &err) < 0 ||
        tp__workload_jobs(w, space, NULL, &in->t, &in->n, &err) < 0) {
        fprintf(stderr, "placement: %s\n", err.msg);
        return -1;
    }
    return 0;
}

static void usage_reset(tp_usage_t *u, size_t nnodes) {
    memset(u->mem_used, 0, u->ngpus * sizeof *u->mem_used);
    memset(u->compute_used, 0, u->ngpus * sizeof *u->compute_used);
    memset(u->count, 0, u->ngpus * sizeof *u->count);
    memset(u->cpus_used, 0, nnodes * sizeof *u->cpus_used);
}

/* Occupancy of policy p on in, and its median decision time (us) over reps. */
/* The 1-minute load average from /proc/loadavg, -1 if unknown: wall times
 * inflate with it, so the table says it. */
static double load_average(void) {
    FILE *f = fopen("/proc/loadavg", "r");
    double l = -1;
    if (f) {
        if (fscanf(f, "%lf", &l) != 1) l = -1;
        fclose(f);
    }
    return l;
}

/* Decide in->t reps times with p; the median wall time into *us_out and, when
 * cpu_s_out is not NULL, the last run's CPU time. Returns the occupancy. */
static double run_policy(const tp_placer_ops_t *p, const instance_t *in, int reps, double *us_out,
                         double *cpu_s_out) {
    tp_usage_t u;
    tp__usage_init(&u, &in->c);
    tp_assign_t *out = tp__xcalloc(in->n ? in->n : 1, sizeof *out);
    double *us = tp__xcalloc((size_t)reps, sizeof *us);
    /* the caller's output, in memory already: faulting in a fresh 150 MB array
     * (1M decisions) is the allocator's cost, not the decision's */
    memset(out, 0, (in->n ? in->n : 1) * sizeof *out);
    for (int r = 0; r < reps; r++) {
        usage_reset(&u, in->c.nnodes);
        double t0 = tp__mono_s();
        clock_t c0 = clock();
        p->place(&in->c, &u, in->t, in->n, out, NULL, NULL);
        us[r] = (tp__mono_s() - t0) * 1e6;
        if (cpu_s_out) *cpu_s_out = (double)(clock() - c0) / CLOCKS_PER_SEC;
    }
    double occ = tp__occupancy(&in->c, &u);
    qsort(us, (size_t)reps, sizeof *us, cmp_double);
    *us_out = us[reps / 2];
    free(us);
    free(out);
    tp__usage_free(&u);
    return occ;
}

static double run_optimal(instance_t *in, double limit) {
    tp_usage_t u;
    tp__usage_init(&u, &in->c);
    tp_assign_t *out = tp__xcalloc(in->n ? in->n : 1, sizeof *out);
    tp_place_mip_info_t info;
    double t0 = tp__mono_s();
    tp__place_optimal(&in->c, &u, in->t, in->n, out, &(tp_place_effort_t){.time_limit_s = limit},
                      &info, NULL);
    in->opt_s = tp__mono_s() - t0;
    in->proved = info.proved_optimal;
    double occ = tp__occupancy(&in->c, &u);
    free(out);
    tp__usage_free(&u);
    return occ;
}

/* nnodes nodes of 8 A100 80GB; n trials of random demands (the scale column). */
static void scale_instance(instance_t *in, size_t n, size_t gpus) {
    tp_rng_t r;
    tp__rng_seed(&r, 3, 0);
    memset(in, 0, sizeof *in);
    size_t nnodes = (gpus + 7) / 8;
    in->c = (tp_cluster_t){.nnodes = nnodes, .limits = {.reserve_mib = 512, .sharing = 1}};
    in->c.nodes = tp__xcalloc(nnodes, sizeof *in->c.nodes);
    for (size_t k = 0; k < nnodes; k++)
        tp__workload_node(&in->c.nodes[k], k, 8, 256, &gpu_types[2]);
    in->n = n;
    in->t = tp__xcalloc(n, sizeof *in->t);
    for (size_t i = 0; i < n; i++)
        in->t[i] = (tp_demand_t){.id = (int64_t)i,
                                 .gpus = 1,
                                 .memory_mib = 500 + tp__rng_below(&r, 20000),
                                 .compute = 0.05 + 0.55 * tp__rng_uniform(&r),
                                 .cpus = 1 + (int)tp__rng_below(&r, 4),
                                 .duration_s = 30 + 600 * tp__rng_uniform(&r)};
}

static void free_instance(instance_t *in) {
    tp__cluster_free(&in->c);
    free(in->t);
}

typedef struct row {
    double sum, min, worst_pts, cls_sum[NCLASS];
    size_t count;
    double sp[3]; /* % of best on SP3/homog_4, SP4/homog_16, SP1/hetero_4h6a */
    double sp_us[3];
    double *fam_us;     /* per family instance */
    double scale_s;     /* 1M x 10k, -1 if not run */
    double scale_cpu_s; /* its CPU time */
} row_t;

/* A time of us microseconds as "743 us", "1.06 ms" or "2.10 s". */
static void fmt_us(char *buf, size_t len, double us) {
    if (us >= 1e6)
        snprintf(buf, len, "%.2f s", us / 1e6);
    else if (us >= 1e3)
        snprintf(buf, len, "%.2f ms", us / 1e3);
    else
        snprintf(buf, len, "%.0f us", us);
}

int main(int argc, char **argv) {
    const char *path = TP_DATA_DIR "/workloads/sp.yaml";
    double limit = 10;
    int quick = 0, verbose = 0;
    const char *only = NULL;
    uint64_t seed = 0;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--quick") == 0)
            quick = 1;
        else if (strcmp(argv[i], "--verbose") == 0)
            verbose = 1;
        else if (strcmp(argv[i], "--limit") == 0 && i + 1 < argc)
            limit = atof(argv[++i]);
        else if (strcmp(argv[i], "--only") == 0 && i + 1 < argc)
            only = argv[++i];
        else if (strcmp(argv[i], "--seed") == 0 && i + 1 < argc)
            seed = strtoull(argv[++i], NULL, 10);
        else
            path = argv[i];
    }
    tp_workload_t w;
    tp_error_t err = {0};
    if (tp__workload_load(path, &w, &err) < 0) {
        fprintf(stderr, "placement: %s\n", err.msg);
        return 1;
    }
    double load_before = load_average();
    size_t nfam = NCLASS * PER_CLASS, nins = nfam + 3;
    instance_t *ins = tp__xcalloc(nins, sizeof *ins);
    for (int c = 0; c < NCLASS; c++)
        for (int k = 0; k < PER_CLASS; k++)
            generate(&ins[c * PER_CLASS + k], c, k, seed);
    if (study_instance(&ins[nfam], &w, "SP3", "homog_4") < 0 ||
        study_instance(&ins[nfam + 1], &w, "SP4", "homog_16") < 0 ||
        study_instance(&ins[nfam + 2], &w, "SP1", "hetero_4h6a") < 0)
        return 1;

    size_t np = 0;
    const tp_placer_ops_t *pols[MAXPOL];
    for (size_t p = 0; tp__placers[p] && np < MAXPOL; p++)
        pols[np++] = tp__placers[p];
    double *occ = tp__xcalloc(nins * np, sizeof *occ), *us = tp__xcalloc(nins * np, sizeof *us);
    size_t proved = 0;
    for (size_t k = 0; k < nins; k++) {
        instance_t *in = &ins[k];
        in->best = 0;
        if (only && strcmp(only, in->name) != 0) continue;
        for (size_t p = 0; p < np; p++) {
            if (strcmp(pols[p]->name, "optimal") == 0) {
                occ[k * np + p] = run_optimal(in, limit);
                us[k * np + p] = in->opt_s * 1e6;
                proved += in->proved;
            } else {
                occ[k * np + p] = run_policy(pols[p], in, quick ? 5 : 51, &us[k * np + p], NULL);
            }
            if (occ[k * np + p] > in->best) in->best = occ[k * np + p];
        }
        if (verbose) {
            size_t G = 0;
            for (size_t nd = 0; nd < in->c.nnodes; nd++)
                G += in->c.nodes[nd].ngpus;
            printf("%-16s %3zu nodes %3zu GPUs %4zu trials  best %6.2f%% %s (optimal %.2f s):",
                   in->name, in->c.nnodes, G, in->n, 100 * in->best,
                   in->proved ? "proved " : "unproved", in->opt_s);
            for (size_t p = 0; p < np; p++)
                printf(" %s %.1f", pols[p]->name, 100 * occ[k * np + p] / in->best);
            printf("  %s %.2f points below\n", pols[0]->name, 100 * (in->best - occ[k * np]));
        }
    }

    row_t *rows = tp__xcalloc(np, sizeof *rows);
    instance_t big;
    if (!quick) scale_instance(&big, 1000000, 10000);
    for (size_t p = 0; p < np; p++) {
        row_t *r = &rows[p];
        r->min = 1e9;
        r->fam_us = tp__xcalloc(nfam, sizeof *r->fam_us);
        for (size_t k = 0; k < nfam; k++) {
            double pct = ins[k].best > 0 ? 100 * occ[k * np + p] / ins[k].best : 100;
            r->sum += pct;
            r->cls_sum[ins[k].cls] += pct;
            if (pct < r->min) r->min = pct;
            double pts = 100 * (ins[k].best - occ[k * np + p]);
            if (pts > r->worst_pts) r->worst_pts = pts;
            r->fam_us[k] = us[k * np + p];
        }
        qsort(r->fam_us, nfam, sizeof *r->fam_us, cmp_double);
        for (int s = 0; s < 3; s++) {
            size_t k = nfam + (size_t)s;
            r->sp[s] = 100 * occ[k * np + p] / ins[k].best;
            r->sp_us[s] = us[k * np + p];
        }
        r->scale_s = -1;
        if (!quick && strcmp(pols[p]->name, "optimal") != 0) {
            double u;
            run_policy(pols[p], &big, 1, &u, &r->scale_cpu_s);
            r->scale_s = u / 1e6;
        }
    }
    if (!quick) free_instance(&big);

    printf("placement: one scheduling round; occupancy as %% of the best known per instance\n");
    printf("family: %zu generated instances (%d classes x %d, 1-16 nodes, 1-8 GPUs/node, "
           "3-8 trials/GPU); optimal proved %zu of %zu instances (limit %.0f s each)\n",
           nfam, NCLASS, PER_CLASS, proved, nins, limit);
    printf("%-11s %6s %6s %6s |", "policy", "mean%", "min%", "worst");
    for (int c = 0; c < NCLASS; c++)
        printf(" %8s", class_name[c]);
    printf(" | %7s %7s %7s | %10s %10s %10s\n", "SP3/4", "SP4/16", "SP1/h", "SP4/16 t", "family t",
           "1Mx10k t");
    for (size_t p = 0; p < np; p++) {
        row_t *r = &rows[p];
        char t1[32], t2[32], t3[32];
        fmt_us(t1, sizeof t1, r->sp_us[1]);
        fmt_us(t2, sizeof t2, r->fam_us[nfam / 2]);
        if (r->scale_s < 0)
            snprintf(t3, sizeof t3, "-");
        else
            snprintf(t3, sizeof t3, "%.3f s", r->scale_s);
        printf("%-11s %6.2f %6.2f %6.2f |", pols[p]->name, r->sum / (double)nfam, r->min,
               r->worst_pts);
        for (int c = 0; c < NCLASS; c++)
            printf(" %8.2f", r->cls_sum[c] / PER_CLASS);
        printf(" | %7.2f %7.2f %7.2f | %10s %10s %10s\n", r->sp[0], r->sp[1], r->sp[2], t1, t2, t3);
    }
    printf(
        "mean%%, min%%: occupancy as %% of the best known; worst: the most occupancy points below "
        "the best known on one instance; family t: median "
        "decision time over the family; SP1/h: SP1 on hetero_4h6a\n");
    printf("optimal's time to its answer: SP3/homog_4 %.3f s (%s), SP4/homog_16 %.3f s (%s), "
           "SP1/hetero_4h6a %.3f s (%s)\n",
           ins[nfam].opt_s, ins[nfam].proved ? "proved optimal" : "not proved", ins[nfam + 1].opt_s,
           ins[nfam + 1].proved ? "proved optimal" : "not proved", ins[nfam + 2].opt_s,
           ins[nfam + 2].proved ? "proved optimal" : "not proved");
    if (!quick) {
        printf("1M x 10k, CPU time of the decision:");
        for (size_t p = 0; p < np; p++)
            if (rows[p].scale_s >= 0) printf(" %s %.2f s", pols[p]->name, rows[p].scale_cpu_s);
        printf("\n");
    }
    printf("load average (1 min) at the start %.2f, at the end %.2f: wall times inflate with it\n",
           load_before, load_average());
    for (size_t p = 0; p < np; p++)
        free(rows[p].fam_us);
    free(rows);
    free(occ);
    free(us);
    for (size_t k = 0; k < nins; k++)
        free_instance(&ins[k]);
    free(ins);
    tp__workload_free(&w);
    return 0;
}
