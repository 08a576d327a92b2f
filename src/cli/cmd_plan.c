/* tunepack plan [FILE] --space NAME --gpu-type T --deadline D [--policy P] ...
 * The smallest number of GPUs of one type that finishes a space by a
 * deadline, found by simulation (binary search over counts). */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cli.h"
#include "run/run.h"
#include "sim/sim.h"

typedef struct plan {
    const tp_workload_t *w;
    const char *space, *gpu_type;
    int gpn, cpn;
    tp_sim_opts_t o;
    int sims; /* simulations run */
} plan_t;

/* Makespan of the space on n GPUs, or a negative errno. */
static int simulate_n(plan_t *p, size_t n, double *makespan, tp_error_t *err) {
    tp_cluster_t c;
    int rc = tp__sim_cluster(p->w, p->gpu_type, n, p->gpn, p->cpn, &c, err);
    if (rc < 0) return rc;
    tp_sim_result_t r;
    rc = tp__sim_run(p->w, p->space, &c, &p->o, &r, err);
    tp__cluster_free(&c);
    if (rc < 0) return rc;
    p->sims++;
    *makespan = r.makespan_s;
    tp__sim_result_free(&r);
    return 0;
}

static int plan_main(int argc, char **argv) {
    const char *file = NULL, *space = NULL, *gtype = NULL, *deadline_a = NULL, *policy = NULL,
               *gpn_a = NULL, *cpn_a = NULL, *ov_a = NULL, *max_a = NULL, *profile_a = NULL,
               *dir = NULL, *check = NULL, *seeds_a = NULL, *unit_a = NULL, *from_a = NULL;
    int as_json = 0;
    tp_cli_scale_t sc = {0};
    const char *policies[TP_CLI_MAX_POLICIES];
    tp__cli_policy_names(policies, TP_ARRAY_LEN(policies));
    const tp_cli_opt_t opts[] = {{"--space", NULL, &space},
                                 {"--gpu-type", NULL, &gtype},
                                 {"--deadline", NULL, &deadline_a},
                                 {"--policy", NULL, &policy, policies, 0},
                                 {"--gpus-per-node", NULL, &gpn_a},
                                 {"--cpus-per-node", NULL, &cpn_a},
                                 {"--overhead", NULL, &ov_a},
                                 {"--max-gpus", NULL, &max_a},
                                 {"--profile", NULL, &profile_a},
                                 {"--json", &as_json, NULL},
                                 {"--dir", NULL, &dir},
                                 {"--check", NULL, &check},
                                 {"--seeds", NULL, &seeds_a},
                                 {"--unit-time", NULL, &unit_a},
                                 {"--from", NULL, &from_a},
                                 TP_CLI_SCALE_OPTS(sc)};
    int rc = tp__cli_parse(&tp__cmd_plan, argc, argv, opts, TP_ARRAY_LEN(opts), &file);
    if (rc != TP_CLI_PARSED) return rc;
    if (tp__cli_scale(&tp__cmd_plan, &sc) != TP_CLI_PARSED) return TP_EXIT_USAGE;
    char default_file[4096];
    if (!file && !space && !check) /* no silent guess at what the user meant to plan */
        return tp__cli_usage_error(
            &tp__cmd_plan, "say what to plan: an experiment or workload FILE (tunepack plan FILE "
                           "--deadline 24h), or --space NAME of the installed catalogue "
                           "(tunepack plan --space SP4 --gpu-type a100_80g --deadline 24h)");
    plan_t p = {.gpn = 4,
                .cpn = 0,
                .o = {.policy = policy ? policy : TP_PLACE_DEFAULT_POLICY,
                      .overhead = 0.03,
                      .node_failures = sc.node_failures,
                      .queue_wait_s = sc.queue_wait_s,
                      .trial_startup_s = sc.trial_startup_s}};
    char *end = NULL;
    if (gpn_a) {
        long v = strtol(gpn_a, &end, 10);
        if (*end || v < 1 || v > 64)
            return tp__cli_usage_error(
                &tp__cmd_plan, "--gpus-per-node must be a whole number in [1, 64], got \"%s\"",
                gpn_a);
        p.gpn = (int)v;
    }
    tp_xplan_opts_t xo = {
        .gpu_type = gtype, .dir = dir, .json = as_json, .scale = sc, .gpus_per_node = p.gpn};
    long lv = 0;
    if (seeds_a) {
        if (tp__cli_count(&tp__cmd_plan, "--seeds", seeds_a, &lv) != TP_CLI_PARSED)
            return TP_EXIT_USAGE;
        if (lv > 64) return tp__cli_usage_error(&tp__cmd_plan, "--seeds is at most 64");
        xo.seeds = (int)lv;
    }
    if (from_a) {
        if (tp__cli_count(&tp__cmd_plan, "--from", from_a, &lv) != TP_CLI_PARSED)
            return TP_EXIT_USAGE;
        xo.from = (size_t)lv;
    }
    if (unit_a &&
        tp__cli_duration(&tp__cmd_plan, "--unit-time", unit_a, &xo.unit_s) != TP_CLI_PARSED)
        return TP_EXIT_USAGE;
    if (check) {
        if (file || space || deadline_a)
            return tp__cli_usage_error(&tp__cmd_plan,
                                       "--check DIR compares a finished run with its plan: no "
                                       "FILE, --space or --deadline with it");
        return tp__cli_plan_check(check, &xo);
    }
    int experiment = file && !space && tp__cli_is_experiment(file);
    if (!experiment && (dir || seeds_a || unit_a || from_a))
        return tp__cli_usage_error(&tp__cmd_plan, "--dir, --seeds, --unit-time and --from are "
                                                  "for an experiment FILE");
    if (!file) {
        if (tp__workload_default_path(default_file, sizeof default_file) < 0)
            return tp__cli_usage_error(&tp__cmd_plan,
                                       "the default workload path is too long; give a FILE");
        file = default_file;
    }
    if (!deadline_a)
        return tp__cli_usage_error(&tp__cmd_plan, "--deadline is required (30m, 1h30m, 900s)");
    tp_error_t err = {0};
    double deadline = 0;
    if (tp__cli_duration(&tp__cmd_plan, "--deadline", deadline_a, &deadline) != TP_CLI_PARSED)
        return TP_EXIT_USAGE;
    if (experiment) {
        xo.deadline_s = deadline;
        if (max_a) {
            if (tp__cli_count(&tp__cmd_plan, "--max-gpus", max_a, &lv) != TP_CLI_PARSED)
                return TP_EXIT_USAGE;
            xo.max_gpus = (size_t)lv;
        }
        return tp__cli_plan_experiment(file, &xo);
    }
    if (cpn_a) {
        long v = strtol(cpn_a, &end, 10);
        if (*end || v < 1 || v > 1 << 20)
            return tp__cli_usage_error(
                &tp__cmd_plan, "--cpus-per-node must be a positive whole number, got \"%s\"",
                cpn_a);
        p.cpn = (int)v;
    }
    if (ov_a) {
        double v = strtod(ov_a, &end);
        if (*end || !(v >= 0 && v <= 1))
            return tp__cli_usage_error(&tp__cmd_plan,
                                       "--overhead must be a number in [0, 1], got \"%s\"", ov_a);
        p.o.overhead = v;
    }
    if (profile_a &&
        tp__cli_duration(&tp__cmd_plan, "--profile", profile_a, &p.o.profile_s) != TP_CLI_PARSED)
        return TP_EXIT_USAGE;
    size_t cap = 0;
    if (max_a) {
        long v = strtol(max_a, &end, 10);
        if (*end || v < 1 || v > 1 << 20)
            return tp__cli_usage_error(
                &tp__cmd_plan, "--max-gpus must be a positive whole number, got \"%s\"", max_a);
        cap = (size_t)v;
    }

    tp_workload_t w;
    if (tp__workload_load(file, &w, &err) < 0) {
        fprintf(stderr, "tunepack: %s\n", err.msg);
        return err.code == -EINVAL ? TP_EXIT_CONFIG : TP_EXIT_ERROR;
    }
    p.w = &w;
    p.space = space ? space : w.nspaces ? w.spaces[w.nspaces - 1].name : "";
    p.gpu_type = gtype ? gtype : w.ngpu_types ? w.gpu_types[0].name : "";
    int code = TP_EXIT_OK;
    tp_space_t sp;
    rc = tp__sim_space(&w, p.space, &sp, &err);
    if (rc == 0) {
        /* more GPUs than trials cannot help */
        uint64_t ntrials = tp__space_grid_size(&sp);
        if (!cap) cap = ntrials ? (size_t)ntrials : 1;
        tp__space_free(&sp);
    }
    tp_cluster_t probe;
    if (rc == 0 && (rc = tp__sim_cluster(&w, p.gpu_type, 1, p.gpn, p.cpn, &probe, &err)) == 0)
        tp__cluster_free(&probe);
    if (rc < 0) {
        fprintf(stderr, "tunepack plan: %s\n", err.msg);
        tp__workload_free(&w);
        return TP_EXIT_USAGE;
    }
    double at_cap = 0, best_ms = 0;
    size_t best = 0;
    rc = simulate_n(&p, cap, &at_cap, &err);
    if (rc == 0 && at_cap <= deadline) {
        size_t lo = 1, hi = cap; /* invariant: hi meets the deadline */
        best_ms = at_cap;
        while (lo < hi && rc == 0) {
            size_t mid = lo + (hi - lo) / 2;
            double ms = 0;
            rc = simulate_n(&p, mid, &ms, &err);
            if (rc < 0) break;
            if (ms <= deadline) {
                hi = mid;
                best_ms = ms;
            } else {
                lo = mid + 1;
            }
        }
        best = hi;
        if (rc == 0 && best != cap && best_ms > deadline) rc = simulate_n(&p, best, &best_ms, &err);
    }
    if (rc < 0) {
        fprintf(stderr, "tunepack plan: %s\n", err.msg);
        code = rc == -ENOENT ? TP_EXIT_USAGE : TP_EXIT_CONFIG;
    } else if (as_json) {
        json_t *o =
            json_pack("{s:s, s:s, s:s, s:f, s:i, s:I, s:i}", "space", p.space, "gpu_type",
                      p.gpu_type, "policy", p.o.policy, "deadline_s", deadline, "gpus_per_node",
                      p.gpn, "max_gpus", (json_int_t)cap, "simulations", p.sims);
        if (best) {
            json_object_set_new(o, "gpus", json_integer((json_int_t)best));
            json_object_set_new(o, "makespan_s", json_real(best_ms));
        } else {
            json_object_set_new(o, "gpus", json_null());
            json_object_set_new(o, "makespan_s_at_max", json_real(at_cap));
        }
        char *text = json_dumps(o, JSON_COMPACT | JSON_PRESERVE_ORDER);
        printf("%s\n", text);
        free(text);
        json_decref(o);
        if (!best) code = TP_EXIT_ERROR;
    } else if (best) {
        printf("%zu %s GPUs (%zu nodes of %d) finish %s by %s under %s: simulated makespan "
               "%.1f s (%.1f min), deadline %.0f s; %d simulations\n",
               best, p.gpu_type, (best + (size_t)p.gpn - 1) / (size_t)p.gpn, p.gpn, p.space,
               deadline_a, p.o.policy, best_ms, best_ms / 60, deadline, p.sims);
    } else {
        printf("no number of %s GPUs up to %zu finishes %s by %s under %s: the best is %.1f s "
               "(%.1f min)\n",
               p.gpu_type, cap, p.space, deadline_a, p.o.policy, at_cap, at_cap / 60);
        code = TP_EXIT_ERROR;
    }
    tp__workload_free(&w);
    return code;
}

const tp_cmd_t tp__cmd_plan = {
    .name = "plan",
    .summary = "the fewest GPUs that finish an experiment by a deadline (by simulation)",
    .usage =
        "usage: tunepack plan EXPERIMENT --deadline D [--dir DIR] [--gpu-type T] [--seeds 10]\n"
        "                     [--unit-time TIME] [--max-gpus N] [--json]\n"
        "                     [--node-failures RATE] [--queue-wait TIME]\n"
        "                     [--trial-startup TIME] [--gpus-per-node 4]\n"
        "       tunepack plan --check DIR [--from N] [--seeds 10] [--json]\n"
        "       tunepack plan [FILE] --deadline D [--space NAME] [--gpu-type T] [--policy P]\n"
        "                     [--gpus-per-node 4] [--cpus-per-node N] [--overhead 0.03]\n"
        "                     [--max-gpus N] [--profile TIME] [--json]\n"
        "                     [--node-failures RATE] [--queue-wait TIME]\n"
        "                     [--trial-startup TIME]\n\n"
        "EXPERIMENT is the file `tunepack run` takes. Its own search (sampler, scheduler,\n"
        "budget, trials, concurrency.total, resources.gpus, and its placement: as many\n"
        "trials share a GPU as its placement policy packs of their declared demand)\n"
        "runs on a virtual clock, the sampler and scheduler the run's own, over --seeds\n"
        "seeds; trial times and learning curves are resampled from the trials measured\n"
        "in DIR (default runs/<name> when it exists), else --unit-time per budget unit,\n"
        "else the declared timeout spread over the budget, else an assumed 60 s. Prints\n"
        "the fewest GPUs whose median makespan\n"
        "meets the deadline, that makespan with its 90% range, the best metric expected by\n"
        "the deadline on 1/2, 1 and 2 times that many GPUs (or that it cannot be predicted\n"
        "when no curve is measured), and what it assumed. A plan that meets the deadline\n"
        "is kept for the run in DIR (default runs/<name>): in its store, or in\n"
        "DIR/plan.json until the run starts, or by the running run; the dashboard shows\n"
        "it beside the run. --check DIR prints the latest plan kept there beside what\n"
        "happened; with none (or with --from) it plans the finished run again from its\n"
        "first --from trials (default a quarter) on its own concurrency.\n\n"
        "Either kind of plan can meet the cluster at scale, as tunepack simulate does:\n"
        "nodes of --gpus-per-node GPUs that fail (--node-failures), join after a queue\n"
        "wait (--queue-wait), and a start-up for each trial's attempt on its node\n"
        "(--trial-startup).\n\n"
        "Finds the smallest number of GPUs of type T (in nodes of --gpus-per-node,\n"
        "32 CPU cores per GPU unless --cpus-per-node) on which the space's trials,\n"
        "placed by policy P (default vpack), finish within the deadline, simulating each\n"
        "count tried (binary search, assuming more GPUs never take longer). The search\n"
        "stops at --max-gpus (default: the number of trials). --profile TIME models a\n"
        "run that measures its demand (gpu_memory/gpu_compute auto), as tunepack\n"
        "simulate --profile does.\n\n"
        "Prints the count and its simulated makespan, or says that no count up to the\n"
        "cap meets the deadline (exit code 1). --json: {\"gpus\" (null when none),\n"
        "\"makespan_s\", \"deadline_s\", ...}. Exit code 2 for a bad command line (a bad\n"
        "deadline, an unknown space, GPU type or policy), 3 when FILE is invalid.\n\n"
        "FILE is a workload in the format of the installed sp.yaml. Without FILE, --space\n"
        "is required and names a space of the installed catalogue:\n"
        "$TUNEPACK_DATA_DIR/workloads/sp.yaml if that variable is set, else\n"
        "<dir of the tunepack binary>/../share/tunepack/workloads/sp.yaml (installed),\n"
        "else the source tree's data/workloads/sp.yaml (a build tree's binary).\n\n"
        "  --deadline D       the time the trials must end within (30m, 1h30m, 900s)\n"
        "  --space NAME       a space of FILE (default: the last one)\n"
        "  --gpu-type T       a GPU type of FILE (default: the first one); with EXPERIMENT\n"
        "                     the measured times scaled to T by its relative speed\n"
        "  --policy P         vpack (default), one-per-gpu, ff, ffd, bf, bfd, wf, wfd, optimal\n"
        "  --gpus-per-node N  GPUs per node (default 4), for EXPERIMENT too\n"
        "  --cpus-per-node N  CPU cores per node (default 32 per GPU)\n"
        "  --overhead X       MPS cost per co-located trial (default 0.03)\n"
        "  --max-gpus N       the most GPUs tried (default: the number of trials)\n"
        "  --profile TIME     model a run that measures its demand first\n" TP_CLI_SCALE_HELP
        "  --json             one object: {\"gpus\", \"makespan_s\", \"deadline_s\", ...}\n"
        "  --dir DIR          (EXPERIMENT) the run whose trial times are used\n"
        "  --seeds N          (EXPERIMENT) simulated searches, 1..64 (default 10)\n"
        "  --unit-time TIME   (EXPERIMENT) seconds per budget unit when nothing is measured\n"
        "  --check DIR        compare a finished run with the plan kept for it\n"
        "  --from N           (--check) plan again from the first N trials started\n\n"
        "example:\n"
        "  tunepack plan examples/mlp/experiment.yaml --deadline 1h --dir runs/mlp-demo\n"
        "  tunepack plan --check runs/mlp-demo\n"
        "  tunepack plan --space SP4 --gpu-type a100_80g --deadline 30m\n",
    .main = plan_main,
};
