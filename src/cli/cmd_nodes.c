/* tunepack nodes [DIR] [--json] | nodes drain NODE [DIR] | nodes add HOST [DIR] */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cli.h"
#include "run/run.h"

/* The nodes as the orchestrator last journaled them. */
static int list_nodes(const char *dir_arg, int as_json) {
    char *dir = NULL;
    tp_store_t *s = tp__cli_open(dir_arg, &dir);
    if (!s) return TP_EXIT_STORE;
    char *text = tp__store_meta_get(s, "nodes");
    json_t *nodes = text ? json_loads(text, 0, NULL) : NULL;
    if (as_json) {
        char *out = json_dumps(nodes ? nodes : json_array(), JSON_COMPACT | JSON_PRESERVE_ORDER);
        printf("%s\n", out);
        free(out);
    } else if (!json_array_size(nodes)) {
        printf("%s has no node list (an experiment on this machine, or one that has not "
               "started)\n",
               dir);
    } else {
        printf("%-24s %-10s %5s %9s %5s %8s %9s  %s\n", "NODE", "STATE", "CPUS", "MEMORY", "GPUS",
               "RUNNING", "RESTARTS", "SLURM JOB");
        size_t i;
        json_t *n;
        json_array_foreach(nodes, i, n) {
            const char *job = json_string_value(json_object_get(n, "slurm_job"));
            char mem[32];
            snprintf(mem, sizeof mem, "%.1fG",
                     (double)json_integer_value(json_object_get(n, "memory_mib")) / 1024.0);
            printf("%-24s %-10s %5lld %9s %5lld %8lld %9lld  %s\n",
                   json_string_value(json_object_get(n, "name")),
                   json_string_value(json_object_get(n, "state")),
                   json_integer_value(json_object_get(n, "cpus")), mem,
                   json_integer_value(json_object_get(n, "gpus")),
                   json_integer_value(json_object_get(n, "running")),
                   json_integer_value(json_object_get(n, "restarts")), job ? job : "-");
        }
    }
    json_decref(nodes);
    free(text);
    free(dir);
    tp__store_close(s);
    return TP_EXIT_OK;
}

static int nodes_main(int argc, char **argv) {
    if (argc >= 2 && (strcmp(argv[1], "drain") == 0 || strcmp(argv[1], "add") == 0)) {
        if (argc < 3 || argv[2][0] == '-')
            return tp__cli_usage_error(&tp__cmd_nodes, "%s needs a %s", argv[1],
                                       strcmp(argv[1], "drain") == 0 ? "NODE" : "HOST");
        const char *dir_arg = NULL;
        char *rest[64] = {argv[0]};
        int n = 1;
        for (int i = 3; i < argc && n < 63; i++)
            rest[n++] = argv[i];
        int rc = tp__cli_parse(&tp__cmd_nodes, n, rest, NULL, 0, &dir_arg);
        if (rc != TP_CLI_PARSED) return rc;
        json_t *req = json_pack("{s:s, s:s}", "op", argv[1], "node", argv[2]);
        rc = tp__cli_request(dir_arg, req, "nodes change");
        json_decref(req);
        return rc;
    }
    const char *dir_arg = NULL;
    int as_json = 0;
    const tp_cli_opt_t opts[] = {{"--json", &as_json, NULL}};
    int rc = tp__cli_parse(&tp__cmd_nodes, argc, argv, opts, TP_ARRAY_LEN(opts), &dir_arg);
    if (rc != TP_CLI_PARSED) return rc;
    return list_nodes(dir_arg, as_json);
}

const tp_cmd_t tp__cmd_nodes = {
    .name = "nodes",
    .summary = "the nodes of an experiment; drain one or add one while it runs",
    .usage = "usage: tunepack nodes [DIR] [--json]\n"
             "       tunepack nodes drain NODE [DIR]\n"
             "       tunepack nodes add HOST [DIR]\n\n"
             "Lists the nodes of the experiment in DIR (default: the latest under ./runs) as\n"
             "its orchestrator last recorded them: state (starting, up, draining, drained, lost,\n"
             "released), CPUs, memory, GPUs, trials running there, agent restarts, Slurm job.\n"
             "released: given back (the run ended or was stopped, or an idle node went back to\n"
             "Slurm); lost: its agent ended on its own (the node died, its link was cut).\n\n"
             "  drain NODE  no new trials go to NODE; its running trials finish, then its agent\n"
             "              ends (the run goes on with the other nodes)\n"
             "  add HOST    an ssh (or command) cluster takes one more node; its agent starts\n"
             "              with the cluster's settings\n"
             "  --json      the node list as a JSON array\n\n"
             "A change is asked of the running orchestrator, which acts on it within 2 s.\n\n"
             "example:\n  tunepack nodes runs/big\n  tunepack nodes drain gpu3 runs/big\n",
    .main = nodes_main,
};
