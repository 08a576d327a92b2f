/* tunepack place FILE [--json] [--policy P] [--time-limit S] [--node-limit N] [--timings] */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cli/cli.h"
#include "place/place.h"
#include "run/run.h"

static void print_table(const tp_place_instance_t *in, const char *policy, const tp_assign_t *out,
                        double occ, double us) {
    size_t placed = 0;
    printf("%-24s %-16s %s\n", "TRIAL", "NODE", "GPUS");
    for (size_t i = 0; i < in->ntrials; i++) {
        if (!out[i].placed) continue;
        placed++;
        const tp_node_t *node = &in->cluster.nodes[out[i].node];
        printf("%-24s %-16s ", in->trial_ids[i], node->name);
        if (!out[i].ngpus) printf("(cpu only)");
        for (size_t k = 0; k < out[i].ngpus; k++)
            printf("%s%s", k ? "," : "", node->gpus[out[i].gpu[k]].name);
        printf("\n");
    }
    if (placed < in->ntrials) {
        printf("unplaced:");
        for (size_t i = 0; i < in->ntrials; i++)
            if (!out[i].placed) printf(" %s", in->trial_ids[i]);
        printf("\n");
    }
    printf("policy %s: %zu of %zu trials placed, occupancy %.1f%%, decided in %.1f us\n", policy,
           placed, in->ntrials, 100.0 * occ, us);
}

static int place_main(int argc, char **argv) {
    const char *file = NULL, *policy_arg = NULL, *limit_arg = NULL, *nodes_arg = NULL;
    int as_json = 0, timings = 0;
    const char *policies[TP_CLI_MAX_POLICIES];
    tp__cli_policy_names(policies, TP_ARRAY_LEN(policies));
    const tp_cli_opt_t opts[] = {{"--json", &as_json, NULL},
                                 {"--policy", NULL, &policy_arg, policies, 0},
                                 {"--time-limit", NULL, &limit_arg},
                                 {"--node-limit", NULL, &nodes_arg},
                                 {"--timings", &timings, NULL}};
    int rc = tp__cli_parse(&tp__cmd_place, argc, argv, opts, TP_ARRAY_LEN(opts), &file);
    if (rc != TP_CLI_PARSED) return rc;
    if (!file) return tp__cli_usage_error(&tp__cmd_place, "which instance? give a JSON FILE");
    double limit = 0;
    tp_error_t err = {0};
    if (limit_arg && tp__parse_duration(limit_arg, &limit, &err) < 0)
        return tp__cli_usage_error(&tp__cmd_place, "--time-limit: %s", err.msg);
    unsigned long long nodes = 0;
    if (nodes_arg) {
        char *end;
        errno = 0;
        nodes = strtoull(nodes_arg, &end, 10);
        if (errno || end == nodes_arg || *end || nodes == 0 || *nodes_arg == '-')
            return tp__cli_usage_error(&tp__cmd_place,
                                       "--node-limit must be a whole number > 0, got \"%s\"; "
                                       "e.g. --node-limit 1000",
                                       nodes_arg);
    }

    tp_place_instance_t in;
    double t_read = tp__mono_s(), c_read = (double)clock() / CLOCKS_PER_SEC;
    if (tp__place_instance_load(file, &in, &err) < 0) {
        fprintf(stderr, "tunepack: %s\n", err.msg);
        return err.code == -EINVAL ? TP_EXIT_CONFIG : TP_EXIT_ERROR;
    }
    const char *policy = policy_arg     ? policy_arg
                         : in.policy[0] ? in.policy
                                        : TP_PLACE_DEFAULT_POLICY;
    const tp_placer_ops_t *p = tp__placer_find(policy);
    if (!p) {
        const char *names[16];
        size_t n = 0;
        for (; tp__placers[n] && n < 16; n++)
            names[n] = tp__placers[n]->name;
        const char *guess = tp__did_you_mean(policy, names, n);
        char list[256] = "";
        for (size_t i = 0; i < n; i++)
            snprintf(list + strlen(list), sizeof list - strlen(list), "%s%s", i ? ", " : "",
                     names[i]);
        int code;
        if (guess)
            code = tp__cli_usage_error(&tp__cmd_place,
                                       "unknown policy \"%s\"; did you mean \"%s\"? (%s)", policy,
                                       guess, list);
        else
            code = tp__cli_usage_error(&tp__cmd_place, "unknown policy \"%s\"; choose one of %s",
                                       policy, list);
        tp__place_instance_free(&in);
        return code;
    }
    if (limit > 0) in.effort.time_limit_s = limit;
    if (nodes > 0) in.effort.node_limit = nodes;

    tp_usage_t u;
    tp__usage_init(&u, &in.cluster);
    tp_assign_t *out = tp__xcalloc(in.ntrials ? in.ntrials : 1, sizeof *out);
    double t0 = tp__mono_s(), c0 = (double)clock() / CLOCKS_PER_SEC;
    /* optimal says what it proved: its gap when a limit stopped it */
    tp_place_mip_info_t mip, *mipp = p == tp__placer_find("optimal") ? &mip : NULL;
    if (mipp)
        rc = tp__place_optimal(&in.cluster, &u, in.trials, in.ntrials, out, &in.effort, mipp, &err);
    else
        rc = p->place(&in.cluster, &u, in.trials, in.ntrials, out, &in.effort, &err);
    double t1 = tp__mono_s(), c1 = (double)clock() / CLOCKS_PER_SEC, us = (t1 - t0) * 1e6;
    int code = TP_EXIT_OK;
    if (rc < 0) {
        fprintf(stderr, "tunepack: placement failed: %s\n", err.msg);
        code = TP_EXIT_ERROR;
    } else if (as_json) {
        double occ = tp__occupancy(&in.cluster, &u);
        char *text =
            tp__place_decision_json(&in, p->name, out, occ, us, mipp,
                                    mipp ? tp__place_mip_bound_occupancy(&u, 0, mipp) : -1);
        if (!text || fputs(text, stdout) < 0 || putchar('\n') < 0 || fflush(stdout) != 0) {
            fprintf(stderr, "tunepack: cannot write the decision: %s\n",
                    text ? strerror(errno) : "out of memory");
            code = TP_EXIT_ERROR;
        }
        free(text);
    } else {
        print_table(&in, p->name, out, tp__occupancy(&in.cluster, &u), us);
        if (mipp) {
            char line[256];
            tp__place_mip_summary(mipp, &u, 0, tp__occupancy(&in.cluster, &u), line, sizeof line);
            printf("optimal: %s\n", line);
        }
        fflush(stdout);
    }
    if (timings && rc == 0) /* wall seconds, then CPU seconds of this process */
        fprintf(stderr,
                "tunepack place: read %.3f s, decide %.3f s, write %.3f s "
                "(cpu: %.3f s, %.3f s, %.3f s)\n",
                t0 - t_read, t1 - t0, tp__mono_s() - t1, c0 - c_read, c1 - c0,
                (double)clock() / CLOCKS_PER_SEC - c1);
    free(out);
    tp__usage_free(&u);
    tp__place_instance_free(&in);
    return code;
}

const tp_cmd_t tp__cmd_place = {
    .name = "place",
    .summary = "decide where trials go on a cluster (packing several per GPU)",
    .usage =
        "usage: tunepack place FILE [--json] [--policy P] [--time-limit S] [--node-limit N]\n"
        "                      [--timings]\n\n"
        "Reads a placement instance (JSON: nodes with their GPUs, trials with their\n"
        "demand, optional \"policy\", \"limits\", \"time_limit_s\" and \"node_limit\")\n"
        "and prints where each trial goes, the GPU occupancy, and how long the decision\n"
        "took.\n\n"
        "  --policy P       vpack (default), one-per-gpu, ff, ffd, bf, bfd, wf, wfd or optimal;\n"
        "                   overrides the file's \"policy\"\n"
        "  --time-limit S   how long `optimal` may search (default 10s unless a node\n"
        "                   limit alone is given)\n"
        "  --node-limit N   stop `optimal`'s branch and bound after N subproblems: the\n"
        "                   same answer on every machine (file: \"node_limit\")\n"
        "  --json           one object: {\"policy\", \"placed\": [{\"trial\", \"node\",\n"
        "                   \"gpus\"}], \"unplaced\", \"occupancy\", \"decision_us\"}\n"
        "  --timings        print to stderr the seconds spent reading the file,\n"
        "                   deciding and writing the answer (wall, then CPU)\n\n"
        "Exit code 3 when the file is invalid, 2 for a bad command line.\n\n"
        "example:\n  tunepack place inst.json --policy wfd --json\n",
    .main = place_main,
};
