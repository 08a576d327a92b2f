/* tunepack nodes [DIR] [--json] | nodes drain NODE [DIR] | nodes add HOST [DIR] */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

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

/* Leave a request for the running orchestrator and wait for its answer
 * (it looks every 2 s). */
static int request(const char *op, const char *node, const char *dir_arg) {
    tp_error_t err = {0};
    char *dir = tp__rundir_resolve(dir_arg, &err);
    if (!dir) {
        fprintf(stderr, "tunepack: %s\n", err.msg);
        return TP_EXIT_STORE;
    }
    if (tp__rundir_owner(dir) == 0) {
        fprintf(stderr, "tunepack: %s is not running; nodes change only while it runs\n", dir);
        free(dir);
        return TP_EXIT_ERROR;
    }
    char reqdir[4200], path[4400], tmp[4500], done[4400];
    snprintf(reqdir, sizeof reqdir, "%s/requests", dir);
    mkdir(reqdir, 0755);
    snprintf(path, sizeof path, "%s/%ld-%d.json", reqdir, (long)time(NULL), (int)getpid());
    snprintf(tmp, sizeof tmp, "%s.tmp", path);
    snprintf(done, sizeof done, "%s/%ld-%d.done", reqdir, (long)time(NULL), (int)getpid());
    json_t *req = json_pack("{s:s, s:s}", "op", op, "node", node);
    int rc = json_dump_file(req, tmp, 0) == 0 && rename(tmp, path) == 0 ? 0 : -errno;
    json_decref(req);
    if (rc) {
        fprintf(stderr, "tunepack: cannot write %s: %s\n", path, strerror(-rc));
        free(dir);
        return TP_EXIT_ERROR;
    }
    json_t *ans = NULL;
    struct timespec ts = {0, 100 * 1000 * 1000};
    for (int i = 0; i < 300 && !(ans = json_load_file(done, 0, NULL)); i++) nanosleep(&ts, NULL);
    if (!ans) {
        fprintf(stderr, "tunepack: the orchestrator of %s did not answer within 30 s\n", dir);
        unlink(path);
        free(dir);
        return TP_EXIT_ERROR;
    }
    unlink(done);
    int ok = json_is_true(json_object_get(ans, "ok"));
    const char *msg = json_string_value(json_object_get(ans, "message"));
    fprintf(ok ? stdout : stderr, "%s%s\n", ok ? "" : "tunepack: ", msg ? msg : "");
    json_decref(ans);
    free(dir);
    return ok ? TP_EXIT_OK : TP_EXIT_USAGE;
}

static int nodes_main(int argc, char **argv) {
    if (argc >= 2 && (strcmp(argv[1], "drain") == 0 || strcmp(argv[1], "add") == 0)) {
        if (argc < 3 || argv[2][0] == '-')
            return tp__cli_usage_error(&tp__cmd_nodes, "%s needs a %s", argv[1],
                                       strcmp(argv[1], "drain") == 0 ? "NODE" : "HOST");
        const char *dir_arg = NULL;
        char *rest[64] = {argv[0]};
        int n = 1;
        for (int i = 3; i < argc && n < 63; i++) rest[n++] = argv[i];
        int rc = tp__cli_parse(&tp__cmd_nodes, n, rest, NULL, 0, &dir_arg);
        if (rc != TP_CLI_PARSED) return rc;
        return request(argv[1], argv[2], dir_arg);
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
             "released), CPUs, memory, GPUs, trials running there, agent restarts, Slurm job.\n\n"
             "  drain NODE  no new trials go to NODE; its running trials finish, then its agent\n"
             "              ends (the run goes on with the other nodes)\n"
             "  add HOST    an ssh (or command) cluster takes one more node; its agent starts\n"
             "              with the cluster's settings\n"
             "  --json      the node list as a JSON array\n\n"
             "A change is asked of the running orchestrator, which acts on it within 2 s.\n\n"
             "example:\n  tunepack nodes runs/big\n  tunepack nodes drain gpu3 runs/big\n",
    .main = nodes_main,
};
