/* bench/groups: the makespan of successive-halving rungs on the simulator
 * (src/sim/sim_groups.c), plain placement against Fluid trial groups, for
 * several rung sizes, GPU counts and scaling curves. Prints a Markdown table;
 * each cell is the mean over 5 seeds (the trials' step times, demands,
 * memory and qualities). The target: Fluid's makespan at least 30%
 * lower than plain ASHA placement. The last two columns: a lower bound on
 * the makespan of ANY placement of the same rungs (tp__groups_bound), and
 * how far below plain it lies: where it is less than 30% below, the target
 * cannot be met on that row. Pure simulation: no wall time measured.
 *
 *   build/bench/groups [--restart S] [--min-steps N] [--overhead O] [--served C2,C3,C4]
 *
 * --overhead: the MPS cost per co-located trial (sim_groups.h; default 0.03), to see
 * how much of a row's result that assumed cost decides. --served: the busy share a GPU
 * serves 2, 3 and 4 or more Fluid fractions (default TP_FLUID_SERVED, measured;
 * one number: the same for every k; 1: saturation at D = 1, the model before). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sim/sim_groups.h"

#define SEEDS 5

/* The mean over the seeds of the simulated makespan, or (bound) of
 * tp__groups_bound: what no placement does better than. */
static double mean_over_seeds(tp_groups_opts_t o, int bound) {
    double sum = 0;
    for (uint64_t s = 1; s <= SEEDS; s++) {
        tp_groups_result_t r;
        tp_error_t err = {0};
        o.seed = s;
        int rc = bound ? tp__groups_bound(&o, &r.makespan_s, &err) : tp__groups_sim(&o, &r, &err);
        if (rc != 0) {
            fprintf(stderr, "groups: %s\n", err.msg);
            exit(1);
        }
        sum += r.makespan_s;
    }
    return sum / SEEDS;
}

/* *out = the number `text` gives option `name`, 0 or more; else a message
 * and -1. */
static int number_arg(const char *name, const char *text, double *out) {
    char *end;
    double v = strtod(text, &end);
    if (end == text || *end || !(v >= 0)) {
        fprintf(stderr, "groups: %s %s: give a number of 0 or more\n", name, text);
        return -1;
    }
    *out = v;
    return 0;
}

/* served[1..3] from `text`: C2,C3,C4 or one number for all; each 1 or
 * more. Else a message and -1. */
static int served_arg(const char *text, double served[4]) {
    char buf[128];
    snprintf(buf, sizeof buf, "%s", text);
    int n = 0;
    for (char *save, *tok = strtok_r(buf, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
        char *end;
        double v = n < 3 ? strtod(tok, &end) : 0;
        if (n == 3 || end == tok || *end || !(v >= 1) || !isfinite(v)) {
            fprintf(stderr,
                    "groups: --served %s: give C2,C3,C4 or one number, each 1 or "
                    "more\n",
                    text);
            return -1;
        }
        served[1 + n++] = v;
    }
    if (n != 1 && n != 3) {
        fprintf(stderr, "groups: --served %s: give C2,C3,C4 or one number\n", text);
        return -1;
    }
    if (n == 1) served[2] = served[3] = served[1];
    served[0] = 1;
    return 0;
}

int main(int argc, char **argv) {
    double restart = 10, min_steps = 100, overhead = 0.03, served[4] = TP_FLUID_SERVED;
    for (int i = 1; i < argc; i += 2) {
        double *to = strcmp(argv[i], "--restart") == 0     ? &restart
                     : strcmp(argv[i], "--min-steps") == 0 ? &min_steps
                     : strcmp(argv[i], "--overhead") == 0  ? &overhead
                     : strcmp(argv[i], "--served") == 0    ? served
                                                           : NULL;
        if (!to || i + 1 == argc) {
            fprintf(stderr, "usage: groups [--restart S] [--min-steps N] [--overhead O] "
                            "[--served C2,C3,C4]\n");
            return 2;
        }
        if (to == served ? served_arg(argv[i + 1], served) != 0
                         : number_arg(argv[i], argv[i + 1], to) != 0)
            return 2;
    }
    static const size_t gpus[] = {4, 8, 16};
    static const size_t n0[] = {27, 81};
    static const double serial[] = {0.05, 0.2, 0.5};
    printf("SHA rungs (eta 3, rung 0 = %g steps, up to 1 trial), restart %g s per job start "
           "and per resize; trials: step 0.2-1 s, compute 0.6-1.0, 2-10 GiB on 24 GiB GPUs; "
           "MPS overhead %g per co-located trial; a GPU serves %g, %g, %g of busy share to 2, "
           "3, 4 Fluid fractions; Fluid min 1/4, max = all GPUs, up to 4 per GPU; "
           "mean makespan of %d seeds (s)\n\n",
           min_steps, restart, overhead, served[1], served[2], served[3], SEEDS);
    printf("| GPUs | n0 | serial f | plain 1/GPU | plain packed | Fluid static | Fluid dynamic "
           "| Fluid dynamic, 1 GPU cap | best Fluid vs best plain | lower bound (any placement) "
           "| bound vs best plain |\n");
    printf("|---|---|---|---|---|---|---|---|---|---|---|\n");
    int met = 0, rows = 0;
    for (size_t a = 0; a < sizeof gpus / sizeof *gpus; a++)
        for (size_t b = 0; b < sizeof n0 / sizeof *n0; b++)
            for (size_t c = 0; c < sizeof serial / sizeof *serial; c++) {
                tp_groups_opts_t o = {.n0 = n0[b],
                                      .eta = 3,
                                      .min_steps = min_steps,
                                      .gpus = gpus[a],
                                      .gpu_memory_mib = 24576,
                                      .reserve_mib = 512,
                                      .pack_max = 4,
                                      .serial = serial[c],
                                      .restart_s = restart,
                                      .overhead = overhead,
                                      .min = 0.25,
                                      .max = (double)gpus[a],
                                      .gpus_cap = (int)gpus[a]};
                memcpy(o.served, served, sizeof o.served);
                o.mode = TP_FLUID_OFF, o.plain = TP_GROUPS_ONE_PER_GPU;
                double one = mean_over_seeds(o, 0);
                o.plain = TP_GROUPS_PACKED;
                double packed = mean_over_seeds(o, 0);
                double bound = mean_over_seeds(o, 1);
                o.mode = TP_FLUID_STATIC;
                double st = mean_over_seeds(o, 0);
                o.mode = TP_FLUID_DYNAMIC;
                double dyn = mean_over_seeds(o, 0);
                o.gpus_cap = 1;
                double cap1 = mean_over_seeds(o, 0);
                double plain = one < packed ? one : packed, fl = st < dyn ? st : dyn;
                double cut = 100 * (1 - fl / plain);
                rows++;
                met += cut >= 30;
                printf("| %zu | %zu | %.2f | %.0f | %.0f | %.0f | %.0f | %.0f | %.1f%% lower%s "
                       "| %.0f | %.1f%% lower |\n",
                       gpus[a], n0[b], serial[c], one, packed, st, dyn, cap1, cut,
                       cut >= 30 ? "" : " (short of 30%)", bound, 100 * (1 - bound / plain));
            }
    printf("\n%d of %d rows at least 30%% lower\n", met, rows);
    return 0;
}
