/* agent_gpu: the agent's view of its node's GPUs. At hello it reports the
 * GPUs NVML finds and whether an MPS control program exists; on `mps_start`
 * it runs one MPS control daemon per GPU (stopping a leftover of a crashed
 * run first) and stops them when it ends; while NVML is there it samples
 * per-process GPU memory and SM use each second and sends `usage`, naming
 * which trial (by process group) each process belongs to and how much is
 * foreign (not the MPS servers of the daemons it started). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "agent/agent_internal.h"
#include "gpu/gpu.h"

#define SAMPLE_MS 1000

static tp_trial_t *trial_of_pid(tp_agent_t *a, pid_t pid) {
    pid_t pg = getpgid(pid);
    if (pg < 0) return NULL;
    for (tp_trial_t *t = a->trials; t; t = t->next)
        if (t->pid == pg && !t->exited_sent) return t;
    return NULL;
}

/* An MPS server while this agent runs MPS daemons: the server of one of them
 * (NVML lists it beside its clients; on an H200 it held 66 MiB), not a
 * foreign process. Told by its command name, which the kernel keeps to 15
 * characters: "nvidia-cuda-mps" for nvidia-cuda-mps-server. */
static int our_mps_server(const tp_agent_t *a, pid_t pid) {
    if (a->nmps == 0) return 0;
    char path[64], comm[32] = "";
    snprintf(path, sizeof path, "/proc/%d/comm", (int)pid);
    FILE *f = fopen(path, "r");
    if (!f) return 0;
    int ok = fgets(comm, sizeof comm, f) != NULL;
    fclose(f);
    return ok && strncmp(comm, "nvidia-cuda-mps", 15) == 0;
}

/* One NVML sample of every GPU and its processes, as a `usage` message. */
static void on_sample(uv_timer_t *h) {
    tp_agent_t *a = h->data;
    if (!a->nvml || a->out_dead) return;
    tp_gpu_info_t *gpus = NULL;
    size_t n = 0;
    tp_error_t err = {0};
    if (tp__nvml_gpus(a->nvml, &gpus, &n, &err) != 0) return;
    json_t *jg = json_array(), *jt = json_array();
    for (size_t i = 0; i < n; i++) {
        tp_gpu_proc_t *procs = NULL;
        size_t np = 0;
        uint64_t foreign_mib = 0;
        json_t *foreign = json_array();
        if (gpus[i].healthy && tp__nvml_processes(a->nvml, gpus[i].index, &procs, &np, &err) == 0) {
            for (size_t k = 0; k < np; k++) {
                tp_trial_t *t = trial_of_pid(a, procs[k].pid);
                if (t) {
                    json_array_append_new(
                        jt,
                        json_pack("{s:I, s:I, s:i, s:i, s:I, s:i}", "trial", (json_int_t)t->trial,
                                  "attempt", (json_int_t)t->attempt, "gpu", (int)gpus[i].index,
                                  "pid", (int)procs[k].pid, "used_mib",
                                  (json_int_t)procs[k].used_mib, "sm_util", (int)procs[k].sm_util));
                } else if (!our_mps_server(a, procs[k].pid)) {
                    foreign_mib += procs[k].used_mib;
                    json_array_append_new(foreign, json_integer(procs[k].pid));
                }
            }
        }
        free(procs);
        json_array_append_new(
            jg, json_pack("{s:i, s:I, s:I, s:i, s:b, s:s, s:I, s:o}", "index", (int)gpus[i].index,
                          "memory_mib", (json_int_t)gpus[i].memory_total_mib, "memory_used_mib",
                          (json_int_t)gpus[i].memory_used_mib, "util", (int)gpus[i].util_gpu,
                          "healthy", gpus[i].healthy, "error", gpus[i].error, "foreign_mib",
                          (json_int_t)foreign_mib, "foreign", foreign));
    }
    free(gpus);
    tp__agent_send(a, json_pack("{s:s, s:o, s:o}", "type", "usage", "gpus", jg, "trials", jt), NULL,
                   0);
}

void tp__agent_gpu_hello(tp_agent_t *a, json_t *r) {
    tp_error_t err = {0};
    const char *nvml_state = "absent";
    char nvml_error[sizeof err.msg + 16];
    if (!a->nvml) {
        int rc = tp__nvml_open(NULL, &a->nvml, &err);
        if (rc == -ENOENT) {
            nvml_state = "absent";
        } else if (rc != 0) {
            snprintf(nvml_error, sizeof nvml_error, "error: %s", err.msg);
            nvml_state = nvml_error;
        }
    }
    json_t *list = json_array();
    if (a->nvml) {
        nvml_state = "ok";
        tp_gpu_info_t *gpus = NULL;
        size_t n = 0;
        if (tp__nvml_gpus(a->nvml, &gpus, &n, &err) == 0) {
            for (size_t i = 0; i < n; i++)
                json_array_append_new(
                    list,
                    json_pack("{s:i, s:s, s:s, s:I, s:I, s:i, s:b, s:s}", "index",
                              (int)gpus[i].index, "name", gpus[i].name, "uuid", gpus[i].uuid,
                              "memory_mib", (json_int_t)gpus[i].memory_total_mib, "memory_used_mib",
                              (json_int_t)gpus[i].memory_used_mib, "util", (int)gpus[i].util_gpu,
                              "healthy", gpus[i].healthy, "error", gpus[i].error));
        } else {
            snprintf(nvml_error, sizeof nvml_error, "error: %s", err.msg);
            nvml_state = nvml_error;
        }
        free(gpus);
        if (!a->gpu_timer_open) {
            uv_timer_init(&a->loop, &a->gpu_timer);
            a->gpu_timer.data = a;
            a->gpu_timer_open = 1;
            uv_timer_start(&a->gpu_timer, on_sample, SAMPLE_MS, SAMPLE_MS);
        }
    }
    free(a->mps_control);
    a->mps_control = tp__mps_control_path();
    json_object_set_new(r, "gpus", list);
    json_object_set_new(r, "nvml", json_string(nvml_state));
    json_object_set_new(r, "mps_control", json_boolean(a->mps_control != NULL));
}

/* An `mps_start` under way: its list, the next entry, what is known so far.
 * Each GPU may take up to two MPS waits (a leftover's stop, the start), so
 * doing them all in one callback left the agent silent for seconds per GPU:
 * on a loaded machine, long enough for the orchestrator to take it for lost,
 * start it again, and lose it again. */
typedef struct mps_job {
    uv_idle_t idle;
    tp_agent_t *a;
    json_t *list, *started, *failed;
    size_t next;
} mps_job_t;

static void on_mps_job_closed(uv_handle_t *h) {
    mps_job_t *job = h->data;
    json_decref(job->list);
    json_decref(job->started);
    json_decref(job->failed);
    free(job);
}

/* Start the daemon of list entry e, adding to started or failed. */
static void mps_start_one(tp_agent_t *a, json_t *e, json_t *started, json_t *failed) {
    int index = -1;
    const char *device = NULL, *pipe_dir = NULL, *log_dir = NULL;
    tp_error_t err = {0};
    if (json_unpack(e, "{s:i, s:s, s:s, s:s}", "index", &index, "device", &device, "pipe_dir",
                    &pipe_dir, "log_dir", &log_dir) != 0) {
        json_array_append_new(failed, json_pack("{s:i, s:s}", "index", index, "error",
                                                "mps_start entry needs index, device, "
                                                "pipe_dir and log_dir"));
        return;
    }
    if (!a->mps_control) {
        json_array_append_new(failed, json_pack("{s:i, s:s}", "index", index, "error",
                                                "no nvidia-cuda-mps-control on this node"));
        return;
    }
    tp__mps_stop(a->mps_control, pipe_dir, NULL); /* a leftover of a crashed run */
    if (tp__mps_start(a->mps_control, device, pipe_dir, log_dir, &err) != 0) {
        json_array_append_new(failed, json_pack("{s:i, s:s}", "index", index, "error", err.msg));
        return;
    }
    /* recorded at once: the orphan sweep leaves the daemon alone from here */
    a->mps_dirs = tp__xrealloc(a->mps_dirs, (a->nmps + 1) * sizeof *a->mps_dirs);
    a->mps_dirs[a->nmps++] = tp__strdup(pipe_dir);
    json_array_append_new(started, json_integer(index));
}

/* One GPU a turn; after the last, the answer. */
static void on_mps_idle(uv_idle_t *h) {
    mps_job_t *job = h->data;
    tp_agent_t *a = job->a;
    if (job->next < json_array_size(job->list)) {
        mps_start_one(a, json_array_get(job->list, job->next++), job->started, job->failed);
        return;
    }
    tp__agent_send(
        a,
        json_pack("{s:s, s:O, s:O}", "type", "mps", "started", job->started, "failed", job->failed),
        NULL, 0);
    a->mps_job = NULL;
    uv_idle_stop(h);
    uv_close((uv_handle_t *)h, on_mps_job_closed);
}

void tp__agent_mps_start(tp_agent_t *a, json_t *m) {
    json_t *list = json_object_get(m, "gpus");
    if (a->mps_job || !json_is_array(list)) {
        const char *why = a->mps_job ? "an MPS start is already under way on this node"
                                     : "mps_start needs a list of gpus";
        tp__agent_send(a,
                       json_pack("{s:s, s:[], s:[{s:i, s:s}]}", "type", "mps", "started", "failed",
                                 "index", -1, "error", why),
                       NULL, 0);
        return;
    }
    mps_job_t *job = tp__xcalloc(1, sizeof *job);
    *job = (mps_job_t){
        .a = a, .list = json_incref(list), .started = json_array(), .failed = json_array()};
    uv_idle_init(&a->loop, &job->idle);
    job->idle.data = job;
    uv_idle_start(&job->idle, on_mps_idle);
    a->mps_job = job;
}

static void on_timer_closed(uv_handle_t *h) {
    (void)h;
}

void tp__agent_gpu_close(tp_agent_t *a) {
    if (a->mps_job) { /* the agent ends first: no answer; what started is stopped below */
        uv_idle_stop(&a->mps_job->idle);
        uv_close((uv_handle_t *)&a->mps_job->idle, on_mps_job_closed);
        a->mps_job = NULL;
    }
    for (size_t i = 0; i < a->nmps; i++) {
        tp_error_t err = {0};
        if (tp__mps_stop(a->mps_control, a->mps_dirs[i], &err) != 0)
            tp__log(TP_LOG_WARN, "agent: %s", err.msg);
        free(a->mps_dirs[i]);
    }
    free(a->mps_dirs);
    a->mps_dirs = NULL;
    a->nmps = 0;
    free(a->mps_control);
    a->mps_control = NULL;
    if (a->gpu_timer_open) {
        a->gpu_timer_open = 0;
        uv_close((uv_handle_t *)&a->gpu_timer, on_timer_closed);
    }
    if (a->nvml) tp__nvml_close(a->nvml);
    a->nvml = NULL;
}
