/* fake_nvml: a stand-in libnvidia-ml.so.1 for tests on machines with no GPU.
 *
 * Every NVML call tunepack uses, under the same names (versioned ones too,
 * each with its own struct layout), answered from the JSON file named by
 * $TUNEPACK_FAKE_NVML ("%n" in it: the Slurm node's name, from
 * $SLURMD_NODENAME), re-read on every call so a test can change it while
 * tunepack runs:
 *
 *   {"gpus": [{"name": "NVIDIA A100-SXM4-80GB", "uuid": "GPU-fake-0",
 *              "memory_mib": 81920, "util": 12, "error": null}],
 *    "processes": [{"gpu": 0, "pid": 4242, "used_mib": 2048, "sm_util": 30}],
 *    "process_dir": "/tmp/x/procs",
 *    "init_error": null}
 *
 * "error": "lost" (or an NVML code) makes the calls on that device fail with
 * NVML_ERROR_GPU_IS_LOST (15); "init_error": N makes nvmlInit return N.
 * process_dir holds <pid>.json files {"gpu": 0, "used_mib": 1200, "sm_util": 25},
 * each a process, ignored once that pid is dead. A device's used memory is
 * the sum of its processes'; its utilisation is its "util" plus each of its
 * processes' "gpu_busy" (percent, at most 100 in all): how an MPS client,
 * whose own sm_util NVML reads 0, shows on its GPU. Unreadable JSON: NVML_ERROR_UNKNOWN (999); no
 * $TUNEPACK_FAKE_NVML: NVML_ERROR_DRIVER_NOT_LOADED (9) from nvmlInit.
 *
 * For tests, fake_nvml_calls(name) says how often a symbol was called, so a
 * test can tell which versioned name tunepack picked. Test code: it keeps a
 * little global state (the init count and call counters), as NVML does. */
#include <dirent.h>
#include <errno.h>
#include <jansson.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/time.h>

#define EXPORT __attribute__((visibility("default")))

typedef int nvmlReturn_t;
typedef struct fake_device *nvmlDevice_t; /* (index + 1), never dereferenced */

enum {
    NVML_SUCCESS = 0,
    NVML_ERROR_UNINITIALIZED = 1,
    NVML_ERROR_INVALID_ARGUMENT = 2,
    NVML_ERROR_NOT_FOUND = 6,
    NVML_ERROR_INSUFFICIENT_SIZE = 7,
    NVML_ERROR_DRIVER_NOT_LOADED = 9,
    NVML_ERROR_GPU_IS_LOST = 15,
    NVML_ERROR_UNKNOWN = 999,
};

typedef struct {
    unsigned long long total, free, used;
} nvmlMemory_t;
typedef struct {
    unsigned int gpu, memory;
} nvmlUtilization_t;
typedef struct {
    unsigned int pid;
    unsigned long long usedGpuMemory;
} nvmlProcessInfo_v1_t;
typedef struct {
    unsigned int pid;
    unsigned long long usedGpuMemory;
    unsigned int gpuInstanceId, computeInstanceId;
} nvmlProcessInfo_v2_t;
typedef struct {
    unsigned int pid;
    unsigned long long timeStamp;
    unsigned int smUtil, memUtil, encUtil, decUtil;
} nvmlProcessUtilizationSample_t;

#define MIB (1024ULL * 1024ULL)
#define MAX_GPUS 64

typedef struct fake_gpu {
    char name[96];
    char uuid[96];
    unsigned long long memory_mib;
    unsigned util;
    int error; /* NVML code the device's calls return, 0 if fine */
} fake_gpu_t;

typedef struct fake_proc {
    unsigned gpu;
    unsigned pid;
    unsigned long long used_mib;
    unsigned sm_util;
    unsigned gpu_busy; /* percent it adds to its device's utilisation */
} fake_proc_t;

typedef struct fake_state {
    int init_error;
    unsigned ngpus;
    fake_gpu_t gpus[MAX_GPUS];
    size_t nprocs;
    fake_proc_t *procs; /* malloc'd */
} fake_state_t;

/* ---- call counters ---------------------------------------------------------- */
static struct {
    const char *name;
    unsigned calls;
} counters[64];
static int initialised; /* nvmlInit minus nvmlShutdown */

static void count(const char *name) {
    for (size_t i = 0; i < sizeof counters / sizeof counters[0]; i++) {
        if (!counters[i].name) counters[i].name = name;
        if (strcmp(counters[i].name, name) == 0) {
            counters[i].calls++;
            return;
        }
    }
}

EXPORT unsigned fake_nvml_calls(const char *name) {
    for (size_t i = 0; i < sizeof counters / sizeof counters[0] && counters[i].name; i++)
        if (strcmp(counters[i].name, name) == 0) return counters[i].calls;
    return 0;
}

EXPORT void fake_nvml_reset_calls(void) {
    memset(counters, 0, sizeof counters);
}

/* ---- reading the JSON ----------------------------------------------------- */
static void add_proc(fake_state_t *s, unsigned gpu, unsigned pid, json_t *o) {
    s->procs = realloc(s->procs, (s->nprocs + 1) * sizeof *s->procs);
    if (!s->procs) abort();
    fake_proc_t *p = &s->procs[s->nprocs++];
    p->gpu = gpu;
    p->pid = pid;
    p->used_mib = (unsigned long long)json_integer_value(json_object_get(o, "used_mib"));
    p->sm_util = (unsigned)json_integer_value(json_object_get(o, "sm_util"));
    p->gpu_busy = (unsigned)json_integer_value(json_object_get(o, "gpu_busy"));
}

static int pid_alive(unsigned pid) {
    return pid > 0 && (kill((pid_t)pid, 0) == 0 || errno == EPERM);
}

static void read_process_dir(fake_state_t *s, const char *dir) {
    DIR *d = opendir(dir);
    if (!d) return;
    struct dirent *e;
    while ((e = readdir(d))) {
        char *end = NULL;
        unsigned long pid = strtoul(e->d_name, &end, 10);
        if (end == e->d_name || strcmp(end, ".json") != 0 || !pid_alive((unsigned)pid)) continue;
        char path[4096];
        snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
        json_t *o = json_load_file(path, 0, NULL);
        if (json_is_object(o)) /* a file half written right now is skipped this time */
            add_proc(s, (unsigned)json_integer_value(json_object_get(o, "gpu")), (unsigned)pid, o);
        json_decref(o);
    }
    closedir(d);
}

static void copy_str(char *dst, size_t n, json_t *v, const char *dflt) {
    snprintf(dst, n, "%s", json_is_string(v) ? json_string_value(v) : dflt);
}

/* Load $TUNEPACK_FAKE_NVML into s (freed with state_free). Returns an NVML code. */
static nvmlReturn_t state_load(fake_state_t *s) {
    memset(s, 0, sizeof *s);
    const char *path = getenv("TUNEPACK_FAKE_NVML");
    if (!path || !*path) return NVML_ERROR_DRIVER_NOT_LOADED;
    /* "%n" stands for the Slurm node this runs on: a stand-in NVML per node. */
    char node_path[4096];
    const char *mark = strstr(path, "%n"), *node = getenv("SLURMD_NODENAME");
    if (mark) {
        snprintf(node_path, sizeof node_path, "%.*s%s%s", (int)(mark - path), path,
                 node ? node : "local", mark + 2);
        path = node_path;
    }
    json_t *root = json_load_file(path, 0, NULL);
    if (!json_is_object(root)) {
        json_decref(root);
        return NVML_ERROR_UNKNOWN;
    }
    json_t *ie = json_object_get(root, "init_error");
    if (json_is_integer(ie)) s->init_error = (int)json_integer_value(ie);
    json_t *gpus = json_object_get(root, "gpus"), *g;
    size_t i;
    json_array_foreach(gpus, i, g) {
        if (s->ngpus == MAX_GPUS) break;
        fake_gpu_t *f = &s->gpus[s->ngpus++];
        char dflt[32];
        snprintf(dflt, sizeof dflt, "GPU-fake-%zu", i);
        copy_str(f->name, sizeof f->name, json_object_get(g, "name"), "NVIDIA Fake GPU");
        copy_str(f->uuid, sizeof f->uuid, json_object_get(g, "uuid"), dflt);
        f->memory_mib = (unsigned long long)json_integer_value(json_object_get(g, "memory_mib"));
        f->util = (unsigned)json_integer_value(json_object_get(g, "util"));
        json_t *err = json_object_get(g, "error");
        if (json_is_string(err))
            f->error = NVML_ERROR_GPU_IS_LOST; /* "lost", or any other text */
        else if (json_is_integer(err))
            f->error = (int)json_integer_value(err);
    }
    json_t *procs = json_object_get(root, "processes"), *p;
    json_array_foreach(procs, i, p) {
        add_proc(s, (unsigned)json_integer_value(json_object_get(p, "gpu")),
                 (unsigned)json_integer_value(json_object_get(p, "pid")), p);
    }
    json_t *dir = json_object_get(root, "process_dir");
    if (json_is_string(dir)) read_process_dir(s, json_string_value(dir));
    json_decref(root);
    return NVML_SUCCESS;
}

static void state_free(fake_state_t *s) {
    free(s->procs);
    s->procs = NULL;
}

/* Common prologue of a device call: load the state, check init and handle. */
static nvmlReturn_t device_begin(fake_state_t *s, nvmlDevice_t dev, fake_gpu_t **g,
                                 unsigned *index) {
    memset(s, 0, sizeof *s);
    if (!initialised) return NVML_ERROR_UNINITIALIZED;
    nvmlReturn_t r = state_load(s);
    if (r) return r;
    uintptr_t i = (uintptr_t)dev;
    if (i == 0 || i > s->ngpus) return NVML_ERROR_INVALID_ARGUMENT;
    *index = (unsigned)(i - 1);
    *g = &s->gpus[i - 1];
    return (*g)->error ? (nvmlReturn_t)(*g)->error : NVML_SUCCESS;
}

/* ---- the NVML API ------------------------------------------------------------ */
static nvmlReturn_t do_init(void) {
    fake_state_t s;
    nvmlReturn_t r = state_load(&s);
    if (r == NVML_SUCCESS && s.init_error) r = s.init_error;
    state_free(&s);
    if (r == NVML_SUCCESS) initialised++;
    return r;
}
EXPORT nvmlReturn_t nvmlInit_v2(void) {
    count(__func__);
    return do_init();
}
EXPORT nvmlReturn_t nvmlInit(void) {
    count(__func__);
    return do_init();
}

EXPORT nvmlReturn_t nvmlShutdown(void) {
    count(__func__);
    if (!initialised) return NVML_ERROR_UNINITIALIZED;
    initialised--;
    return NVML_SUCCESS;
}

EXPORT const char *nvmlErrorString(nvmlReturn_t r) {
    switch (r) {
    case NVML_SUCCESS:
        return "Success";
    case NVML_ERROR_UNINITIALIZED:
        return "Uninitialized";
    case NVML_ERROR_INVALID_ARGUMENT:
        return "Invalid Argument";
    case NVML_ERROR_NOT_FOUND:
        return "Not Found";
    case NVML_ERROR_INSUFFICIENT_SIZE:
        return "Insufficient Size";
    case NVML_ERROR_DRIVER_NOT_LOADED:
        return "Driver Not Loaded";
    case NVML_ERROR_GPU_IS_LOST:
        return "GPU is lost";
    default:
        return "Unknown Error";
    }
}

static nvmlReturn_t do_count(unsigned int *n) {
    if (!initialised) return NVML_ERROR_UNINITIALIZED;
    if (!n) return NVML_ERROR_INVALID_ARGUMENT;
    fake_state_t s;
    nvmlReturn_t r = state_load(&s);
    if (r == NVML_SUCCESS) *n = s.ngpus;
    state_free(&s);
    return r;
}
EXPORT nvmlReturn_t nvmlDeviceGetCount_v2(unsigned int *n) {
    count(__func__);
    return do_count(n);
}
EXPORT nvmlReturn_t nvmlDeviceGetCount(unsigned int *n) {
    count(__func__);
    return do_count(n);
}

static nvmlReturn_t do_handle(unsigned int index, nvmlDevice_t *dev) {
    unsigned int n = 0;
    nvmlReturn_t r = do_count(&n);
    if (r) return r;
    if (index >= n || !dev) return NVML_ERROR_INVALID_ARGUMENT;
    *dev = (nvmlDevice_t)(uintptr_t)(index + 1);
    return NVML_SUCCESS;
}
EXPORT nvmlReturn_t nvmlDeviceGetHandleByIndex_v2(unsigned int index, nvmlDevice_t *dev) {
    count(__func__);
    return do_handle(index, dev);
}
EXPORT nvmlReturn_t nvmlDeviceGetHandleByIndex(unsigned int index, nvmlDevice_t *dev) {
    count(__func__);
    return do_handle(index, dev);
}

static nvmlReturn_t copy_out(char *dst, unsigned int len, const char *src) {
    if (!dst) return NVML_ERROR_INVALID_ARGUMENT;
    if (strlen(src) + 1 > len) return NVML_ERROR_INSUFFICIENT_SIZE;
    memcpy(dst, src, strlen(src) + 1);
    return NVML_SUCCESS;
}

EXPORT nvmlReturn_t nvmlDeviceGetName(nvmlDevice_t dev, char *name, unsigned int len) {
    count(__func__);
    fake_state_t s;
    fake_gpu_t *g = NULL;
    unsigned index;
    nvmlReturn_t r = device_begin(&s, dev, &g, &index);
    if (r == NVML_SUCCESS) r = copy_out(name, len, g->name);
    state_free(&s);
    return r;
}

EXPORT nvmlReturn_t nvmlDeviceGetUUID(nvmlDevice_t dev, char *uuid, unsigned int len) {
    count(__func__);
    fake_state_t s;
    fake_gpu_t *g = NULL;
    unsigned index;
    nvmlReturn_t r = device_begin(&s, dev, &g, &index);
    if (r == NVML_SUCCESS) r = copy_out(uuid, len, g->uuid);
    state_free(&s);
    return r;
}

EXPORT nvmlReturn_t nvmlDeviceGetMemoryInfo(nvmlDevice_t dev, nvmlMemory_t *mem) {
    count(__func__);
    fake_state_t s;
    fake_gpu_t *g = NULL;
    unsigned index;
    nvmlReturn_t r = device_begin(&s, dev, &g, &index);
    if (r == NVML_SUCCESS && !mem) r = NVML_ERROR_INVALID_ARGUMENT;
    if (r == NVML_SUCCESS) {
        unsigned long long used = 0;
        for (size_t i = 0; i < s.nprocs; i++)
            if (s.procs[i].gpu == index) used += s.procs[i].used_mib * MIB;
        mem->total = g->memory_mib * MIB;
        mem->used = used;
        mem->free = used < mem->total ? mem->total - used : 0;
    }
    state_free(&s);
    return r;
}

EXPORT nvmlReturn_t nvmlDeviceGetUtilizationRates(nvmlDevice_t dev, nvmlUtilization_t *u) {
    count(__func__);
    fake_state_t s;
    fake_gpu_t *g = NULL;
    unsigned index;
    nvmlReturn_t r = device_begin(&s, dev, &g, &index);
    if (r == NVML_SUCCESS && !u) r = NVML_ERROR_INVALID_ARGUMENT;
    if (r == NVML_SUCCESS) {
        unsigned busy = g->util;
        for (size_t i = 0; i < s.nprocs; i++)
            if (s.procs[i].gpu == index) busy += s.procs[i].gpu_busy;
        u->gpu = busy < 100 ? busy : 100;
        u->memory = 0;
    }
    state_free(&s);
    return r;
}

/* The running-processes family: same contract, different element layouts.
 * *count in: room in infos; out: how many there are. Too little room:
 * NVML_ERROR_INSUFFICIENT_SIZE with *count set to the number needed. */
static nvmlReturn_t do_processes(nvmlDevice_t dev, unsigned int *n, void *infos, int layout) {
    fake_state_t s;
    fake_gpu_t *g = NULL;
    unsigned index;
    nvmlReturn_t r = device_begin(&s, dev, &g, &index);
    if (r == NVML_SUCCESS && !n) r = NVML_ERROR_INVALID_ARGUMENT;
    if (r != NVML_SUCCESS) {
        state_free(&s);
        return r;
    }
    unsigned have = 0;
    for (size_t i = 0; i < s.nprocs; i++)
        have += s.procs[i].gpu == index;
    if (have > *n || (have > 0 && !infos)) {
        *n = have;
        state_free(&s);
        return NVML_ERROR_INSUFFICIENT_SIZE;
    }
    unsigned k = 0;
    for (size_t i = 0; i < s.nprocs; i++) {
        const fake_proc_t *p = &s.procs[i];
        if (p->gpu != index) continue;
        if (layout == 1) {
            nvmlProcessInfo_v1_t *o = (nvmlProcessInfo_v1_t *)infos + k++;
            o->pid = p->pid;
            o->usedGpuMemory = p->used_mib * MIB;
        } else {
            nvmlProcessInfo_v2_t *o = (nvmlProcessInfo_v2_t *)infos + k++;
            o->pid = p->pid;
            o->usedGpuMemory = p->used_mib * MIB;
            o->gpuInstanceId = 0xFFFFFFFFu;
            o->computeInstanceId = 0xFFFFFFFFu;
        }
    }
    *n = have;
    state_free(&s);
    return NVML_SUCCESS;
}
EXPORT nvmlReturn_t nvmlDeviceGetComputeRunningProcesses_v3(nvmlDevice_t dev, unsigned int *n,
                                                            nvmlProcessInfo_v2_t *infos) {
    count(__func__);
    return do_processes(dev, n, infos, 2);
}
EXPORT nvmlReturn_t nvmlDeviceGetComputeRunningProcesses_v2(nvmlDevice_t dev, unsigned int *n,
                                                            nvmlProcessInfo_v2_t *infos) {
    count(__func__);
    return do_processes(dev, n, infos, 2);
}
EXPORT nvmlReturn_t nvmlDeviceGetComputeRunningProcesses(nvmlDevice_t dev, unsigned int *n,
                                                         nvmlProcessInfo_v1_t *infos) {
    count(__func__);
    return do_processes(dev, n, infos, 1);
}

/* One sample per process of the device, stamped now; NVML_ERROR_NOT_FOUND
 * when there is none newer than last_seen (as the real one says). */
EXPORT nvmlReturn_t nvmlDeviceGetProcessUtilization(nvmlDevice_t dev,
                                                    nvmlProcessUtilizationSample_t *samples,
                                                    unsigned int *n, unsigned long long last_seen) {
    count(__func__);
    fake_state_t s;
    fake_gpu_t *g = NULL;
    unsigned index;
    nvmlReturn_t r = device_begin(&s, dev, &g, &index);
    if (r == NVML_SUCCESS && !n) r = NVML_ERROR_INVALID_ARGUMENT;
    if (r != NVML_SUCCESS) {
        state_free(&s);
        return r;
    }
    struct timeval tv;
    gettimeofday(&tv, NULL);
    unsigned long long now = (unsigned long long)tv.tv_sec * 1000000ULL + (unsigned)tv.tv_usec;
    unsigned have = 0;
    for (size_t i = 0; i < s.nprocs; i++)
        have += s.procs[i].gpu == index;
    if (have == 0 || now <= last_seen)
        r = NVML_ERROR_NOT_FOUND;
    else if (!samples || have > *n) {
        *n = have;
        r = NVML_ERROR_INSUFFICIENT_SIZE;
    } else {
        unsigned k = 0;
        for (size_t i = 0; i < s.nprocs; i++) {
            if (s.procs[i].gpu != index) continue;
            samples[k++] = (nvmlProcessUtilizationSample_t){
                .pid = s.procs[i].pid, .timeStamp = now, .smUtil = s.procs[i].sm_util};
        }
        *n = have;
    }
    state_free(&s);
    return r;
}
