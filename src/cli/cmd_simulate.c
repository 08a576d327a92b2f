/* tunepack simulate [FILE] [--space NAME] [--cluster NAME] [--policy P] ...
 * Replays a workload (sp.yaml format) on a virtual clock: the real searcher
 * and placer, the contention model of docs/simulator.md. */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cli.h"
#include "run/run.h"
#include "sim/sim.h"

/* A whole number in [lo, hi] from option `name`; -1 after a usage message. */
static int opt_u64(const char *name, const char *v, uint64_t lo, uint64_t hi, uint64_t *out) {
    char *end = NULL;
    errno = 0;
    unsigned long long x = v ? strtoull(v, &end, 10) : 0;
    if (!v || !*v || *end || errno || *v == '-' || x < lo || x > hi) {
        tp__cli_usage_error(&tp__cmd_simulate,
                            "%s must be a whole number in [%llu, %llu], got \"%s\"", name,
                            (unsigned long long)lo, (unsigned long long)hi, v ? v : "");
        return -1;
    }
    *out = x;
    return 0;
}

static int opt_real(const char *name, const char *v, double lo, double hi, double *out) {
    char *end = NULL;
    double x = v ? strtod(v, &end) : NAN;
    if (!v || end == v || *end || !isfinite(x) || x < lo || x > hi) {
        tp__cli_usage_error(&tp__cmd_simulate, "%s must be a number in [%g, %g], got \"%s\"", name,
                            lo, hi, v ? v : "");
        return -1;
    }
    *out = x;
    return 0;
}

static void print_summary(const tp_sim_result_t *r, const char *space, const char *cluster,
                          size_t ngpus, const char *searcher) {
    printf("simulated %s on %s (%zu GPUs, summed speed %g), policy %s, %s searcher: %llu trials\n",
           space, cluster, ngpus, r->sum_speed, r->policy, searcher, (unsigned long long)r->trials);
    printf("  makespan      %10.1f s  (%.1f min)\n", r->makespan_s, r->makespan_s / 60);
    printf("  lower bound   %10.1f s  (%.1f min); makespan / bound = %.3f\n", r->lower_bound_s,
           r->lower_bound_s / 60, r->ratio);
    printf("  GPU busy      %9.1f%%  mean over GPUs and the makespan\n", 100 * r->busy_share);
    printf("  %llu events, %llu placer rounds (%s), at most %d trials on one GPU, "
           "simulated in %.3f s\n",
           (unsigned long long)r->events, (unsigned long long)r->rounds,
           r->rounds_mode == TP_SIM_ROUNDS_INCREMENTAL ? "incremental" : "full", r->max_colocated,
           r->wall_s);
}

/* The cluster-scale lines, when the run modelled them. */
static void print_scale(const tp_sim_result_t *r, const tp_sim_opts_t *o) {
    if (o->node_failures <= 0 && o->queue_wait_s <= 0 && o->trial_startup_s <= 0) return;
    printf("  GPU-hours     %10.1f   (GPUs held from their node's join to the end, or to its "
           "loss)\n",
           r->gpu_hours);
    printf("  nodes failed  %10llu   (%g per node-day); %llu attempts lost with them and "
           "placed again, %.1f trial-hours lost\n",
           (unsigned long long)r->node_failures, o->node_failures, (unsigned long long)r->requeued,
           r->lost_s / 3600);
    printf("  queue wait    %10.1f s  mean per node; trial start-up %.3f s\n", o->queue_wait_s,
           o->trial_startup_s);
}

static int simulate_main(int argc, char **argv) {
    const char *file = NULL, *space = NULL, *cluster = NULL, *policy = NULL, *searcher = NULL,
               *trials_a = NULL, *seed_a = NULL, *ov_a = NULL, *csv = NULL, *svg = NULL,
               *window_a = NULL, *rounds_a = NULL, *st_a = NULL, *sg_a = NULL, *gtype = NULL,
               *gpn_a = NULL, *oversub_a = NULL, *profile_a = NULL, *contention_a = NULL,
               *gpus_a = NULL, *dir = NULL, *seeds_a = NULL, *unit_a = NULL, *deadline_a = NULL;
    tp_cli_scale_t sc = {0};
    int as_json = 0;
    static const char *const searchers[] = {"grid", "random", NULL};
    /* in the order of tp_sim_rounds_t */
    static const char *const rounds[] = {"auto", "full", "incremental", NULL};
    /* in the order of tp_sim_model_t */
    static const char *const contention[] = {"served", "capped", NULL};
    const char *policies[TP_CLI_MAX_POLICIES];
    tp__cli_policy_names(policies, TP_ARRAY_LEN(policies));
    const tp_cli_opt_t opts[] = {{"--space", NULL, &space},
                                 {"--cluster", NULL, &cluster},
                                 {"--policy", NULL, &policy, policies, 0},
                                 {"--searcher", NULL, &searcher, searchers, 0},
                                 {"--trials", NULL, &trials_a},
                                 {"--seed", NULL, &seed_a},
                                 {"--overhead", NULL, &ov_a},
                                 {"--json", &as_json, NULL},
                                 {"--csv", NULL, &csv},
                                 {"--svg", NULL, &svg},
                                 {"--window", NULL, &window_a},
                                 {"--rounds", NULL, &rounds_a, rounds, 0},
                                 {"--scale-trials", NULL, &st_a},
                                 {"--scale-gpus", NULL, &sg_a},
                                 {"--gpu-type", NULL, &gtype},
                                 {"--gpus-per-node", NULL, &gpn_a},
                                 {"--oversubscribe", NULL, &oversub_a},
                                 {"--profile", NULL, &profile_a},
                                 {"--contention", NULL, &contention_a, contention, 0},
                                 {"--gpus", NULL, &gpus_a},
                                 {"--dir", NULL, &dir},
                                 {"--seeds", NULL, &seeds_a},
                                 {"--unit-time", NULL, &unit_a},
                                 {"--deadline", NULL, &deadline_a},
                                 TP_CLI_SCALE_OPTS(sc)};
    int rc = tp__cli_parse(&tp__cmd_simulate, argc, argv, opts, TP_ARRAY_LEN(opts), &file);
    if (rc != TP_CLI_PARSED) return rc;
    if (tp__cli_scale(&tp__cmd_simulate, &sc) != TP_CLI_PARSED) return TP_EXIT_USAGE;
    uint64_t gpn = 8;
    if (gpn_a && opt_u64("--gpus-per-node", gpn_a, 1, 64, &gpn) < 0) return TP_EXIT_USAGE;
    if (file && !space && tp__cli_is_experiment(file)) { /* an experiment of the user's own */
        tp_xplan_opts_t xo = {
            .gpu_type = gtype, .dir = dir, .json = as_json, .scale = sc, .gpus_per_node = (int)gpn};
        long lv = 0;
        if (!gpus_a)
            return tp__cli_usage_error(&tp__cmd_simulate,
                                       "an experiment FILE needs --gpus N (how many GPUs)");
        if (tp__cli_count(&tp__cmd_simulate, "--gpus", gpus_a, &lv) != TP_CLI_PARSED)
            return TP_EXIT_USAGE;
        xo.gpus = (int)lv;
        if (seeds_a) {
            if (tp__cli_count(&tp__cmd_simulate, "--seeds", seeds_a, &lv) != TP_CLI_PARSED)
                return TP_EXIT_USAGE;
            if (lv > 64) return tp__cli_usage_error(&tp__cmd_simulate, "--seeds is at most 64");
            xo.seeds = (int)lv;
        }
        if (unit_a &&
            tp__cli_duration(&tp__cmd_simulate, "--unit-time", unit_a, &xo.unit_s) != TP_CLI_PARSED)
            return TP_EXIT_USAGE;
        if (deadline_a && tp__cli_duration(&tp__cmd_simulate, "--deadline", deadline_a,
                                           &xo.deadline_s) != TP_CLI_PARSED)
            return TP_EXIT_USAGE;
        return tp__cli_plan_experiment(file, &xo);
    }
    if (gpus_a || dir || seeds_a || unit_a || deadline_a)
        return tp__cli_usage_error(&tp__cmd_simulate, "--gpus, --dir, --seeds, --unit-time and "
                                                      "--deadline are for an experiment FILE");
    char default_file[4096];
    if (!file) {
        if (tp__workload_default_path(default_file, sizeof default_file) < 0)
            return tp__cli_usage_error(&tp__cmd_simulate,
                                       "the default workload path is too long; give a FILE");
        file = default_file;
    }

    tp_sim_opts_t o = {.policy = policy, .searcher = searcher, .overhead = 0.03};
    uint64_t window = 0, scale_trials = 0, scale_gpus = 0;
    if (trials_a && opt_u64("--trials", trials_a, 1, UINT64_C(1) << 32, &o.trials) < 0)
        return TP_EXIT_USAGE;
    if (seed_a && opt_u64("--seed", seed_a, 0, UINT64_MAX, &o.seed) < 0) return TP_EXIT_USAGE;
    if (ov_a && opt_real("--overhead", ov_a, 0, 1, &o.overhead) < 0) return TP_EXIT_USAGE;
    if (window_a && opt_u64("--window", window_a, 1, 1 << 20, &window) < 0) return TP_EXIT_USAGE;
    if (st_a && opt_u64("--scale-trials", st_a, 1, UINT64_C(1) << 32, &scale_trials) < 0)
        return TP_EXIT_USAGE;
    if (sg_a && opt_u64("--scale-gpus", sg_a, 1, 1 << 22, &scale_gpus) < 0) return TP_EXIT_USAGE;
    double oversub = 0;
    if (oversub_a && opt_real("--oversubscribe", oversub_a, 0, 16, &oversub) < 0)
        return TP_EXIT_USAGE;
    o.window = (size_t)window;
    o.node_failures = sc.node_failures;
    o.queue_wait_s = sc.queue_wait_s;
    o.trial_startup_s = sc.trial_startup_s;
    if (profile_a &&
        tp__cli_duration(&tp__cmd_simulate, "--profile", profile_a, &o.profile_s) != TP_CLI_PARSED)
        return TP_EXIT_USAGE;
    for (size_t i = 0; rounds_a && rounds[i]; i++)
        if (strcmp(rounds_a, rounds[i]) == 0) o.rounds = (tp_sim_rounds_t)i;
    for (size_t i = 0; contention_a && contention[i]; i++)
        if (strcmp(contention_a, contention[i]) == 0) o.model = (tp_sim_model_t)i;
    if (!!scale_trials != !!scale_gpus)
        return tp__cli_usage_error(&tp__cmd_simulate,
                                   "--scale-trials and --scale-gpus go together");
    if (scale_gpus && cluster)
        return tp__cli_usage_error(&tp__cmd_simulate,
                                   "--cluster and --scale-gpus exclude each other");
    if (scale_trials) o.trials = scale_trials;
    o.record = csv || svg;

    tp_workload_t w;
    tp_error_t err = {0};
    if (tp__workload_load(file, &w, &err) < 0) {
        fprintf(stderr, "tunepack: %s\n", err.msg);
        return err.code == -EINVAL ? TP_EXIT_CONFIG : TP_EXIT_ERROR;
    }
    if (!space) space = w.nspaces ? w.spaces[w.nspaces - 1].name : "";
    char cname[96];
    tp_cluster_t c;
    if (scale_gpus) {
        if (!gtype) gtype = "a100_80g";
        snprintf(cname, sizeof cname, "%llu x %s", (unsigned long long)scale_gpus, gtype);
        rc = tp__sim_cluster(&w, gtype, (size_t)scale_gpus, (int)gpn, 0, &c, &err);
    } else {
        snprintf(cname, sizeof cname, "%s",
                 cluster       ? cluster
                 : w.nclusters ? w.clusters[0].name
                               : "");
        rc = tp__workload_cluster(&w, cname, &c, &err);
    }
    if (rc < 0) {
        fprintf(stderr, "tunepack simulate: %s\n", err.msg);
        tp__workload_free(&w);
        return TP_EXIT_USAGE;
    }
    c.limits.oversubscribe = oversub;
    tp_sim_result_t r;
    rc = tp__sim_run(&w, space, &c, &o, &r, &err);
    int code = TP_EXIT_OK;
    if (rc < 0) {
        fprintf(stderr, "tunepack simulate: %s\n", err.msg);
        code = rc == -ENOENT ? TP_EXIT_USAGE : TP_EXIT_CONFIG;
    } else {
        size_t ng = 0;
        for (size_t n = 0; n < c.nnodes; n++)
            ng += c.nodes[n].ngpus;
        if (csv && tp__sim_write_csv(csv, &r, &w, &c, &err) < 0) {
            fprintf(stderr, "tunepack simulate: %s\n", err.msg);
            code = TP_EXIT_ERROR;
        }
        if (svg) {
            char title[256];
            snprintf(title, sizeof title, "%s on %s, policy %s: makespan %.1f min", space, cname,
                     r.policy, r.makespan_s / 60);
            if (tp__sim_write_svg(svg, &r, &w, &c, title, &err) < 0) {
                fprintf(stderr, "tunepack simulate: %s\n", err.msg);
                code = TP_EXIT_ERROR;
            }
        }
        if (as_json) {
            char *text = tp__sim_json(&r, cname, space, &c);
            printf("%s\n", text);
            free(text);
        } else {
            print_summary(&r, space, cname, ng, searcher ? searcher : "grid");
            print_scale(&r, &o);
        }
        tp__sim_result_free(&r);
    }
    tp__cluster_free(&c);
    tp__workload_free(&w);
    return code;
}

const tp_cmd_t tp__cmd_simulate = {
    .name = "simulate",
    .summary = "replay an experiment or a workload on a virtual clock (real search and placer)",
    .usage =
        "usage: tunepack simulate EXPERIMENT --gpus N [--deadline D] [--dir DIR] [--seeds 10]\n"
        "                         [--unit-time TIME] [--gpu-type T] [--json]\n"
        "                         [--node-failures RATE] [--queue-wait TIME]\n"
        "                         [--trial-startup TIME] [--gpus-per-node 8]\n"
        "       tunepack simulate [FILE] [--space NAME] [--cluster NAME] [--policy P]\n"
        "                         [--searcher grid|random] [--trials N] [--seed S]\n"
        "                         [--overhead 0.03] [--json] [--csv FILE] [--svg FILE]\n"
        "                         [--scale-trials N --scale-gpus G [--gpu-type T]\n"
        "                          [--gpus-per-node 8]] [--window N] [--rounds "
        "auto|full|incremental]\n"
        "                         [--profile TIME] [--contention served|capped]\n"
        "                         [--node-failures RATE] [--queue-wait TIME]\n"
        "                         [--trial-startup TIME]\n\n"
        "EXPERIMENT (the file `tunepack run` takes) on N GPUs: its own search, as\n"
        "`tunepack plan EXPERIMENT` simulates it (see tunepack plan --help), prints the\n"
        "makespan, the trials finished and the best metric expected (by --deadline D\n"
        "when given), medians and 90% ranges over --seeds searches; with\n"
        "--node-failures or --queue-wait, in nodes of --gpus-per-node GPUs.\n\n"
        "Runs the real searcher and placement policy against a virtual clock and a\n"
        "GPU contention model (docs/simulator.md) and prints the makespan, the lower\n"
        "bound (work over summed GPU speed, or the longest trial alone), their ratio\n"
        "and the mean GPU busy share. FILE is a workload (GPU types, clusters, model\n"
        "profiles, spaces) in the format of the installed sp.yaml. Without FILE:\n"
        "$TUNEPACK_DATA_DIR/workloads/sp.yaml if that variable is set, else\n"
        "<dir of the tunepack binary>/../share/tunepack/workloads/sp.yaml (installed),\n"
        "else the source tree's data/workloads/sp.yaml (a build tree's binary).\n\n"
        "  --space NAME       a space of FILE (default: the last one)\n"
        "  --cluster NAME     a cluster of FILE (default: the first one)\n"
        "  --policy P         vpack (default), one-per-gpu, ff, ffd, bf, bfd, wf, wfd, optimal\n"
        "  --searcher S       grid (default: each job once; --trials N: N trials, repeating\n"
        "                     the grid) or random (--trials N, default the grid's size)\n"
        "  --trials N         how many trials (default: the grid's size)\n"
        "  --seed S           the random searcher's seed (default 0)\n"
        "  --overhead X       MPS cost per co-located trial (default 0.03)\n"
        "  --oversubscribe X  the placer's compute capacity per GPU is 1 + X (default 0,\n"
        "                     as placement.oversubscribe)\n"
        "  --profile TIME     model a run with gpu_memory/gpu_compute auto: the first trial\n"
        "                     of each model and batch size is measured for TIME (its\n"
        "                     start-up plus profile_time) or to its end, and the others of\n"
        "                     its group start after; all groups at once beside the trials\n"
        "                     placed (capped: each alone on an empty GPU)\n"
        "  --contention C     served (default): the run without MPS thread caps, k trials\n"
        "                     on a GPU served C_k = 1, 1.14, 1.36, 1.44 of it and admitted\n"
        "                     up to C_k of compute; capped: the run with caps, C_k = "
        "1\n" TP_CLI_SCALE_HELP "  --csv FILE         per-GPU timelines, one row per trial\n"
        "  --svg FILE         a Gantt chart: a band per GPU, colour by model\n"
        "  --scale-trials N   with --scale-gpus: N trials of the space's job mix\n"
        "  --scale-gpus G     on G GPUs (a cluster made up, instead of --cluster)\n"
        "  --gpu-type T       the GPUs of --scale-gpus (default a100_80g); with EXPERIMENT\n"
        "                     the measured times scaled to T by its relative speed\n"
        "  --gpus-per-node N  their nodes' size (default 8; with EXPERIMENT, its nodes')\n"
        "  --gpus N           (EXPERIMENT) how many GPUs\n"
        "  --deadline D       (EXPERIMENT) the best metric reported by then\n"
        "  --dir DIR          (EXPERIMENT) the run whose trial times are used\n"
        "                     (default runs/<name> when it exists)\n"
        "  --seeds N          (EXPERIMENT) simulated searches, 1..64 (default 10)\n"
        "  --unit-time TIME   (EXPERIMENT) seconds per budget unit when nothing is measured\n"
        "  --window N         pending trials offered to the placer per round\n"
        "                     (default 4096; 64 with incremental rounds)\n"
        "  --rounds R         full: each round offers the whole cluster; incremental: the\n"
        "                     nodes freed since the last round; auto (default): full up\n"
        "                     to 1024 GPUs\n"
        "  --json             one object: {\"makespan_s\", \"lower_bound_s\", \"ratio\",\n"
        "                     \"busy_share\", \"trials\", \"policy\", \"cluster\", \"space\", "
        "...}\n\n"
        "Exit code 3 when FILE is invalid, 2 for a bad command line or an unknown\n"
        "space, cluster or policy.\n\n"
        "example:\n"
        "  tunepack simulate --space SP4 --cluster homog_16 --policy wfd --json\n"
        "  tunepack simulate examples/mlp/experiment.yaml --gpus 8\n",
    .main = simulate_main,
};
