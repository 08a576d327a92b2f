/* placement: occupancy and decision time of every placement policy on the
 * HyperSack study instances (SP3 on homog_4, SP4 on homog_16, from
 * data/workloads/sp.yaml) and on random instances, with the gap to
 * `optimal`; then a scale sweep (trials x GPUs up to 1M x 10k) for the
 * greedy policies. Prints figures; not a test.
 *
 *   placement [path/to/sp.yaml] [--quick]   (--quick: optimal limited to 2 s, sweep to 100k) */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "place/place.h"
#include "sim/workload.h"

#ifndef TP_DATA_DIR
#define TP_DATA_DIR "data"
#endif

typedef struct instance {
    char name[48];
    tp_cluster_t c;
    tp_demand_t *t;
    size_t n;
} instance_t;

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static void usage_reset(tp_usage_t *u, size_t nnodes) {
    memset(u->mem_used, 0, u->ngpus * sizeof *u->mem_used);
    memset(u->compute_used, 0, u->ngpus * sizeof *u->compute_used);
    memset(u->count, 0, u->ngpus * sizeof *u->count);
    memset(u->cpus_used, 0, nnodes * sizeof *u->cpus_used);
}

/* Median decision time (us) over `reps` runs on fresh usage; *occ the occupancy. */
static double time_policy(const tp_placer_ops_t *p, const instance_t *in, int reps, double *occ,
                          size_t *placed) {
    tp_usage_t u;
    tp__usage_init(&u, &in->c);
    tp_assign_t *out = tp__xcalloc(in->n, sizeof *out);
    double *us = tp__xcalloc((size_t)reps, sizeof *us);
    for (int r = 0; r < reps; r++) {
        usage_reset(&u, in->c.nnodes);
        double t0 = tp__mono_s();
        p->place(&in->c, &u, in->t, in->n, out, NULL, NULL);
        us[r] = (tp__mono_s() - t0) * 1e6;
    }
    *occ = tp__occupancy(&in->c, &u);
    *placed = 0;
    for (size_t i = 0; i < in->n; i++) *placed += out[i].placed;
    qsort(us, (size_t)reps, sizeof *us, cmp_double);
    double med = us[reps / 2];
    free(us);
    free(out);
    tp__usage_free(&u);
    return med;
}

/* nnodes nodes of gpn 80 GB GPUs; n trials with random demands. */
static void random_instance(instance_t *in, const char *name, size_t n, size_t nnodes, size_t gpn,
                            uint64_t seed) {
    tp_rng_t r;
    tp__rng_seed(&r, seed, 0);
    snprintf(in->name, sizeof in->name, "%s", name);
    in->c = (tp_cluster_t){.nnodes = nnodes, .limits = {.reserve_mib = 512, .sharing = 1}};
    in->c.nodes = tp__xcalloc(nnodes, sizeof *in->c.nodes);
    for (size_t k = 0; k < nnodes; k++) {
        tp_node_t *nd = &in->c.nodes[k];
        snprintf(nd->name, sizeof nd->name, "n%zu", k);
        nd->cpus = (int)(32 * gpn);
        nd->ngpus = gpn;
        nd->gpus = tp__xcalloc(gpn, sizeof *nd->gpus);
        for (size_t g = 0; g < gpn; g++) {
            snprintf(nd->gpus[g].name, sizeof nd->gpus[g].name, "gpu%zu", g);
            nd->gpus[g].memory_mib = 81920;
            nd->gpus[g].speed = 1;
            nd->gpus[g].healthy = 1;
        }
    }
    in->n = n;
    in->t = tp__xcalloc(n, sizeof *in->t);
    for (size_t i = 0; i < n; i++)
        in->t[i] = (tp_demand_t){.id = (int64_t)i, .gpus = 1,
                                 .memory_mib = 500 + tp__rng_below(&r, 20000),
                                 .compute = 0.05 + 0.55 * tp__rng_uniform(&r),
                                 .cpus = 1 + (int)tp__rng_below(&r, 4),
                                 .duration_s = 30 + 600 * tp__rng_uniform(&r)};
}

static int study_instance(instance_t *in, const tp_workload_t *w, const char *space,
                          const char *cluster) {
    tp_error_t err = {0};
    snprintf(in->name, sizeof in->name, "%s on %s", space, cluster);
    if (tp__workload_cluster(w, cluster, &in->c, &err) < 0 ||
        tp__workload_jobs(w, space, NULL, &in->t, &in->n, &err) < 0) {
        fprintf(stderr, "placement: %s\n", err.msg);
        return -1;
    }
    return 0;
}

static void free_instance(instance_t *in) {
    tp__cluster_free(&in->c);
    free(in->t);
}

int main(int argc, char **argv) {
    const char *path = TP_DATA_DIR "/workloads/sp.yaml";
    int quick = 0;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--quick") == 0) quick = 1;
        else path = argv[i];
    }
    double limit = quick ? 2 : 10;
    tp_workload_t w;
    tp_error_t err = {0};
    if (tp__workload_load(path, &w, &err) < 0) {
        fprintf(stderr, "placement: %s\n", err.msg);
        return 1;
    }
    instance_t ins[5];
    size_t nins = 0;
    if (study_instance(&ins[nins++], &w, "SP3", "homog_4") < 0) return 1;
    if (study_instance(&ins[nins++], &w, "SP4", "homog_16") < 0) return 1;
    if (study_instance(&ins[nins++], &w, "SP1", "hetero_4h6a") < 0) return 1;
    random_instance(&ins[nins++], "random 60 on 4", 60, 1, 4, 1);
    random_instance(&ins[nins++], "random 200 on 16", 200, 4, 4, 2);

    printf("placement: one scheduling round, occupancy = sum min(1, compute) / GPUs\n");
    printf("(decision time: median of repeated runs on fresh usage; optimal: one run, limit %.0f s)\n\n", limit);
    printf("%-20s %-12s %7s %8s %12s %10s\n", "instance", "policy", "placed", "occ%", "decision", "gap pp");
    for (size_t k = 0; k < nins; k++) {
        instance_t *in = &ins[k];
        tp_usage_t u;
        tp__usage_init(&u, &in->c);
        tp_assign_t *out = tp__xcalloc(in->n, sizeof *out);
        tp_place_mip_info_t info;
        double t0 = tp__mono_s();
        tp__place_optimal(&in->c, &u, in->t, in->n, out, &(tp_place_effort_t){.time_limit_s = limit},
                          &info, NULL);
        double seconds = tp__mono_s() - t0;
        double opt = tp__occupancy(&in->c, &u);
        size_t oplaced = 0;
        for (size_t i = 0; i < in->n; i++) oplaced += out[i].placed;
        free(out);
        tp__usage_free(&u);
        for (size_t p = 0; tp__placers[p]; p++) {
            if (strcmp(tp__placers[p]->name, "optimal") == 0) continue;
            double occ;
            size_t placed;
            double us = time_policy(tp__placers[p], in, 201, &occ, &placed);
            printf("%-20s %-12s %7zu %8.2f %9.1f us %10.2f\n", in->name, tp__placers[p]->name,
                   placed, 100 * occ, us, 100 * (opt - occ));
        }
        printf("%-20s %-12s %7zu %8.2f %10.2f s %10s  (%s%s)\n\n", in->name, "optimal", oplaced,
               100 * opt, seconds, "-",
               info.proved_optimal ? "proved optimal" : info.time_limit_hit ? "time limit hit, best found" : "not proved",
               info.used_wfd ? "; wfd's answer used" : "");
    }
    for (size_t k = 0; k < nins; k++) free_instance(&ins[k]);
    tp__workload_free(&w);

    printf("scale sweep: random demands (compute 0.05-0.6, memory 0.5-20 GiB), 8 GPUs per node\n");
    printf("%-10s %-8s %-8s %12s %12s %16s %8s\n", "policy", "trials", "GPUs", "decision", "ns/trial",
           "ns/(n log2 n)", "occ%");
    static const struct { size_t n, g; } sizes[] = {{10000, 100}, {100000, 1000}, {1000000, 10000}};
    static const char *const pols[] = {"wfd", "ff", "ffd", "wf", "bfd", "bf", "one-per-gpu"};
    for (size_t s = 0; s < TP_ARRAY_LEN(sizes) - (quick ? 1 : 0); s++) {
        instance_t in;
        random_instance(&in, "sweep", sizes[s].n, sizes[s].g / 8 + (sizes[s].g % 8 != 0), 8, 3 + s);
        for (size_t p = 0; p < TP_ARRAY_LEN(pols); p++) {
            double occ;
            size_t placed;
            double us = time_policy(tp__placer_find(pols[p]), &in, sizes[s].n >= 1000000 ? 3 : 5,
                                    &occ, &placed);
            double n = (double)sizes[s].n;
            printf("%-10s %-8zu %-8zu %9.1f ms %12.1f %16.2f %8.2f\n", pols[p], sizes[s].n,
                   in.c.nnodes * 8, us / 1e3, us * 1e3 / n, us * 1e3 / (n * log2(n)), 100 * occ);
        }
        free_instance(&in);
    }
    return 0;
}
