/* tunepack gpus [DIR] [--json] */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cli.h"
#include "gpu/gpu.h"
#include "run/run.h"

/* This machine's GPUs, read through NVML now: the table of tp__gpu_table,
 * or one JSON object with every GPU and its processes. */
static int local_gpus(int as_json) {
    tp_nvml_t *n = NULL;
    tp_error_t err = {0};
    int rc = tp__nvml_open(NULL, &n, &err);
    char *control = tp__mps_control_path();
    tp_gpu_info_t *g = NULL;
    size_t count = 0;
    if (rc == 0 && tp__nvml_gpus(n, &g, &count, &err) != 0) count = 0;
    size_t *nprocs = tp__xcalloc(count ? count : 1, sizeof *nprocs);
    json_t *list = json_array();
    for (size_t i = 0; i < count; i++) {
        tp_gpu_proc_t *p = NULL;
        size_t np = 0;
        json_t *procs = json_array();
        if (g[i].healthy && tp__nvml_processes(n, g[i].index, &p, &np, &err) == 0)
            for (size_t k = 0; k < np; k++)
                json_array_append_new(procs, json_pack("{s:i, s:I, s:i}", "pid", (int)p[k].pid,
                                                       "used_mib", (json_int_t)p[k].used_mib,
                                                       "sm_util", (int)p[k].sm_util));
        free(p);
        nprocs[i] = np;
        json_array_append_new(
            list, json_pack("{s:i, s:s, s:s, s:I, s:I, s:i, s:b, s:s, s:o}", "index",
                            (int)g[i].index, "name", g[i].name, "uuid", g[i].uuid, "memory_mib",
                            (json_int_t)g[i].memory_total_mib, "memory_used_mib",
                            (json_int_t)g[i].memory_used_mib, "util", (int)g[i].util_gpu, "healthy",
                            g[i].healthy, "error", g[i].error, "processes", procs));
    }
    if (as_json) {
        json_t *o = json_pack("{s:s, s:O, s:s?}", "nvml",
                              rc == 0         ? "ok"
                              : rc == -ENOENT ? "absent"
                                              : err.msg,
                              "gpus", list, "mps_control", control);
        char *text = json_dumps(o, JSON_COMPACT | JSON_PRESERVE_ORDER);
        printf("%s\n", text);
        free(text);
        json_decref(o);
    } else {
        if (rc == -ENOENT)
            printf("no NVML on this machine (libnvidia-ml.so.1 not found): trials run CPU-only\n");
        else if (rc != 0)
            printf("NVML failed: %s\n", err.msg);
        else
            tp__gpu_table(stdout, g, count, nprocs);
        printf("MPS: %s\n", control ? control
                                    : "no nvidia-cuda-mps-control: GPUs are shared by "
                                      "time-slicing");
    }
    json_decref(list);
    free(nprocs);
    free(g);
    if (n) tp__nvml_close(n);
    free(control);
    return TP_EXIT_OK;
}

/* An experiment's GPUs as its orchestrator last saw them. */
static int experiment_gpus(const char *dir_arg, int as_json) {
    char *dir = NULL;
    tp_store_t *s = tp__cli_open(dir_arg, &dir);
    if (!s) return TP_EXIT_STORE;
    char *snap = tp__store_meta_get(s, "gpus"), *sharing = tp__store_meta_get(s, "sharing");
    json_t *gpus = snap ? json_loads(snap, 0, NULL) : NULL;
    if (!gpus) gpus = json_array();
    int running = tp__rundir_owner(dir) != 0;
    if (as_json) {
        json_t *o = json_pack("{s:s, s:s?, s:b, s:O}", "experiment", dir, "sharing", sharing,
                              "running", running, "gpus", gpus);
        char *text = json_dumps(o, JSON_COMPACT | JSON_PRESERVE_ORDER);
        printf("%s\n", text);
        free(text);
        json_decref(o);
    } else {
        printf("experiment %s (%s); sharing: %s\n", dir, running ? "running" : "not running",
               sharing ? sharing : "none recorded");
        if (json_array_size(gpus) == 0) printf("no GPU state recorded (no NVML samples)\n");
        size_t i;
        json_t *e;
        json_array_foreach(gpus, i, e) {
            char *ours = json_dumps(json_object_get(e, "trials"), JSON_COMPACT);
            char *foreign = json_dumps(json_object_get(e, "foreign"), JSON_COMPACT);
            printf("gpu%lld  %-20s  %6lld / %6lld MiB  util %3lld%%  %s  our trials %s  "
                   "foreign %lld MiB %s\n",
                   (long long)json_integer_value(json_object_get(e, "index")),
                   json_string_value(json_object_get(e, "type"))
                       ? json_string_value(json_object_get(e, "type"))
                       : "?",
                   (long long)json_integer_value(json_object_get(e, "memory_used_mib")),
                   (long long)json_integer_value(json_object_get(e, "memory_mib")),
                   (long long)json_integer_value(json_object_get(e, "util")),
                   json_is_true(json_object_get(e, "healthy")) ? "healthy" : "UNHEALTHY",
                   ours ? ours : "[]",
                   (long long)json_integer_value(json_object_get(e, "foreign_mib")),
                   foreign ? foreign : "[]");
            free(ours);
            free(foreign);
        }
    }
    json_decref(gpus);
    free(snap);
    free(sharing);
    free(dir);
    tp__store_close(s);
    return TP_EXIT_OK;
}

static int gpus_main(int argc, char **argv) {
    const char *dir = NULL;
    int as_json = 0;
    const tp_cli_opt_t opts[] = {{"--json", &as_json, NULL}};
    int rc = tp__cli_parse(&tp__cmd_gpus, argc, argv, opts, TP_ARRAY_LEN(opts), &dir);
    if (rc != TP_CLI_PARSED) return rc;
    return dir ? experiment_gpus(dir, as_json) : local_gpus(as_json);
}

const tp_cmd_t tp__cmd_gpus = {
    .name = "gpus",
    .summary = "show GPUs: memory, use, our trials, foreign processes, MPS",
    .usage = "usage: tunepack gpus [DIR] [--json]\n\n"
             "Without DIR: this machine's GPUs as NVML sees them now, their processes, and\n"
             "whether MPS can run. With DIR: the experiment's GPUs as its orchestrator last\n"
             "sampled them: memory and use, which of its trials run on each, processes that are\n"
             "not ours (subtracted from capacity), health, and how GPUs are shared.\n\n"
             "  --json  the same as one JSON object\n\n"
             "example:\n  tunepack gpus runs/mlp-demo\n",
    .main = gpus_main,
};
