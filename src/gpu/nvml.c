/* nvml: the NVIDIA Management Library, loaded with dlopen at run time.
 *
 * The build needs no NVIDIA headers or libraries: the few types and
 * functions used are declared here, with the layouts of nvml.h, and looked
 * up from a table of {name, slot, required} rows, newest versioned name
 * first (nvtop's approach). A machine without the library is normal (no GPU):
 * tp__nvml_open says -ENOENT and callers carry on without GPUs. */
#include <assert.h>
#include <dlfcn.h>
#include <errno.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "gpu/gpu.h"

/* ---- our own minimal declarations (layouts as in nvml.h) ------------------ */
typedef int nvmlReturn_t;
typedef struct nvml_device_opaque *nvmlDevice_t;

enum {
    NVML_SUCCESS = 0,
    NVML_ERROR_NOT_SUPPORTED = 3,
    NVML_ERROR_NOT_FOUND = 6,
    NVML_ERROR_INSUFFICIENT_SIZE = 7,
    NVML_ERROR_GPU_IS_LOST = 15,
};
#define NVML_VALUE_NOT_AVAILABLE (~0ULL) /* usedGpuMemory without permission */

typedef struct {
    unsigned long long total; /* bytes */
    unsigned long long free;
    unsigned long long used;
} nvmlMemory_t; /* v1: no version field (nvmlDeviceGetMemoryInfo, not _v2) */

typedef struct {
    unsigned int gpu;    /* percent of time a kernel ran, last sample period */
    unsigned int memory; /* percent of time memory was read or written */
} nvmlUtilization_t;

/* nvmlDeviceGetComputeRunningProcesses (unversioned) fills this ... */
typedef struct {
    unsigned int pid;
    unsigned long long usedGpuMemory; /* bytes, or NVML_VALUE_NOT_AVAILABLE */
} nvmlProcessInfo_v1_t;

/* ... while its _v2 and _v3 fill this one (nvmlProcessInfo_t since NVML 11). */
typedef struct {
    unsigned int pid;
    unsigned long long usedGpuMemory;
    unsigned int gpuInstanceId; /* MIG; 0xFFFFFFFF when not MIG */
    unsigned int computeInstanceId;
} nvmlProcessInfo_v2_t;

typedef struct {
    unsigned int pid;
    unsigned long long timeStamp; /* CPU time of the sample, microseconds */
    unsigned int smUtil;          /* percent */
    unsigned int memUtil;
    unsigned int encUtil;
    unsigned int decUtil;
} nvmlProcessUtilizationSample_t;

#define NVML_MAX_ROWS 32

struct tp_nvml {
    void *lib; /* dlopen handle, closed by tp__nvml_close */
    nvmlReturn_t (*init)(void);
    nvmlReturn_t (*shutdown)(void);
    const char *(*error_string)(nvmlReturn_t); /* optional */
    nvmlReturn_t (*get_count)(unsigned int *count);
    nvmlReturn_t (*get_handle)(unsigned int index, nvmlDevice_t *dev);
    nvmlReturn_t (*get_name)(nvmlDevice_t dev, char *name, unsigned int len);
    nvmlReturn_t (*get_uuid)(nvmlDevice_t dev, char *uuid, unsigned int len);
    nvmlReturn_t (*get_memory)(nvmlDevice_t dev, nvmlMemory_t *mem);
    nvmlReturn_t (*get_util)(nvmlDevice_t dev, nvmlUtilization_t *util);
    nvmlReturn_t (*get_procs)(nvmlDevice_t dev, unsigned int *count, void *infos);
    nvmlReturn_t (*get_proc_util)(nvmlDevice_t dev, nvmlProcessUtilizationSample_t *samples,
                                  unsigned int *count, unsigned long long last_seen); /* optional */
    size_t proc_info_size;              /* sizeof the struct get_procs fills */
    unsigned char found[NVML_MAX_ROWS]; /* which table rows were taken */
};

/* One row per exported name; rows for the same slot stand newest first and
 * the first one the library has wins. A slot is required if any of its rows
 * says so. proc_info_size: the struct layout that name fills (0: n/a). */
typedef struct nvml_sym {
    const char *name;      /* exported symbol */
    size_t slot;           /* offsetof the function pointer in struct tp_nvml */
    int required;          /* open fails without it */
    size_t proc_info_size; /* for the process-list rows */
} nvml_sym_t;

#define SLOT(field) offsetof(struct tp_nvml, field)
static const nvml_sym_t NVML_SYMS[] = {
    {"nvmlInit_v2", SLOT(init), 1, 0},
    {"nvmlInit", SLOT(init), 1, 0},
    {"nvmlShutdown", SLOT(shutdown), 1, 0},
    {"nvmlErrorString", SLOT(error_string), 0, 0},
    {"nvmlDeviceGetCount_v2", SLOT(get_count), 1, 0},
    {"nvmlDeviceGetCount", SLOT(get_count), 1, 0},
    {"nvmlDeviceGetHandleByIndex_v2", SLOT(get_handle), 1, 0},
    {"nvmlDeviceGetHandleByIndex", SLOT(get_handle), 1, 0},
    {"nvmlDeviceGetName", SLOT(get_name), 1, 0},
    {"nvmlDeviceGetUUID", SLOT(get_uuid), 1, 0},
    {"nvmlDeviceGetMemoryInfo", SLOT(get_memory), 1, 0},
    {"nvmlDeviceGetUtilizationRates", SLOT(get_util), 1, 0},
    {"nvmlDeviceGetComputeRunningProcesses_v3", SLOT(get_procs), 1, sizeof(nvmlProcessInfo_v2_t)},
    {"nvmlDeviceGetComputeRunningProcesses_v2", SLOT(get_procs), 1, sizeof(nvmlProcessInfo_v2_t)},
    {"nvmlDeviceGetComputeRunningProcesses", SLOT(get_procs), 1, sizeof(nvmlProcessInfo_v1_t)},
    {"nvmlDeviceGetProcessUtilization", SLOT(get_proc_util), 0, 0},
};
#undef SLOT
static_assert(sizeof NVML_SYMS / sizeof NVML_SYMS[0] <= NVML_MAX_ROWS, "raise NVML_MAX_ROWS");

/* Text for an NVML return code when the library has no nvmlErrorString. */
static const struct {
    nvmlReturn_t code;
    const char *text;
} NVML_ERRORS[] = {
    {0, "Success"},
    {1, "Uninitialized"},
    {2, "Invalid Argument"},
    {3, "Not Supported"},
    {4, "Insufficient Permissions"},
    {6, "Not Found"},
    {7, "Insufficient Size"},
    {9, "Driver Not Loaded"},
    {10, "Timeout"},
    {12, "NVML Shared Library Not Found"},
    {13, "Function Not Found"},
    {15, "GPU is lost"},
    {16, "GPU requires restart"},
    {18, "RM has detected an NVML/RM version mismatch"},
    {999, "Unknown Error"},
};

static const char *nvml_text(const tp_nvml_t *n, nvmlReturn_t r) {
    if (n && n->error_string) {
        const char *s = n->error_string(r);
        if (s && *s) return s;
    }
    for (size_t i = 0; i < TP_ARRAY_LEN(NVML_ERRORS); i++)
        if (NVML_ERRORS[i].code == r) return NVML_ERRORS[i].text;
    return "unrecognised NVML error";
}

static void *default_lookup(void *lib, const char *name, void *ctx) {
    (void)ctx;
    return dlsym(lib, name);
}

static void *slot_get(const tp_nvml_t *n, size_t slot) {
    void *p;
    memcpy(&p, (const char *)n + slot, sizeof p);
    return p;
}

static void slot_set(tp_nvml_t *n, size_t slot, void *p) {
    memcpy((char *)n + slot, &p, sizeof p);
}

/* Fill the function pointers from the table. O(rows). */
static int resolve_symbols(tp_nvml_t *n, tp_nvml_lookup_fn lookup, void *ctx, const char *path,
                           tp_error_t *err) {
    for (size_t i = 0; i < TP_ARRAY_LEN(NVML_SYMS); i++) {
        const nvml_sym_t *row = &NVML_SYMS[i];
        if (slot_get(n, row->slot)) continue; /* a newer name already won */
        void *p = lookup(n->lib, row->name, ctx);
        if (!p) continue;
        slot_set(n, row->slot, p);
        n->found[i] = 1;
        if (row->proc_info_size) n->proc_info_size = row->proc_info_size;
    }
    for (size_t i = 0; i < TP_ARRAY_LEN(NVML_SYMS); i++) {
        const nvml_sym_t *row = &NVML_SYMS[i];
        if (row->required && !slot_get(n, row->slot))
            return tp__errorf(err, -EIO,
                              "%s has no %s (nor an older name for it): is it really NVML, "
                              "and is the NVIDIA driver recent enough?",
                              path, row->name);
    }
    return 0;
}

static int library_missing(const char *path, const char *dlmsg) {
    if (strchr(path, '/')) {
        struct stat st;
        return stat(path, &st) != 0 && errno == ENOENT;
    }
    /* "libnvidia-ml.so.1: cannot open shared object file: No such file or
     * directory" -- about the library itself, not one of its dependencies. */
    size_t n = strlen(path);
    return dlmsg && strncmp(dlmsg, path, n) == 0 && dlmsg[n] == ':' &&
           strstr(dlmsg, "No such file or directory") != NULL;
}

int tp__nvml_open_with(const char *path, tp_nvml_lookup_fn lookup, void *ctx, tp_nvml_t **out,
                       tp_error_t *err) {
    assert(out);
    *out = NULL;
    if (!path || !*path) path = getenv("TUNEPACK_NVML_LIB");
    if (!path || !*path) path = "libnvidia-ml.so.1";
    if (!lookup) lookup = default_lookup;

    void *lib = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    if (!lib) {
        const char *msg = dlerror();
        if (library_missing(path, msg))
            return tp__errorf(err, -ENOENT, "no NVML library (%s): no NVIDIA GPU on this machine",
                              path);
        return tp__errorf(err, -EIO, "cannot load NVML from %s: %s", path,
                          msg ? msg : "unknown dlopen error");
    }
    tp_nvml_t *n = tp__xcalloc(1, sizeof *n);
    n->lib = lib;
    int rc = resolve_symbols(n, lookup, ctx, path, err);
    if (rc == 0) {
        nvmlReturn_t r = n->init();
        if (r != NVML_SUCCESS)
            rc = tp__errorf(err, -EIO,
                            "NVML initialisation failed (%s, NVML error %d): is the "
                            "NVIDIA driver loaded? (nvidia-smi would say)",
                            nvml_text(n, r), r);
    }
    if (rc) {
        dlclose(lib);
        free(n);
        return rc;
    }
    *out = n;
    return 0;
}

int tp__nvml_open(const char *path, tp_nvml_t **out, tp_error_t *err) {
    return tp__nvml_open_with(path, NULL, NULL, out, err);
}

void tp__nvml_close(tp_nvml_t *n) {
    if (!n) return;
    n->shutdown();
    dlclose(n->lib);
    free(n);
}

/* O(rows). A base name matches itself and base + "_v<digits>". */
const char *tp__nvml_symbol(const tp_nvml_t *n, const char *base) {
    if (!n || !base) return NULL;
    size_t blen = strlen(base);
    for (size_t i = 0; i < TP_ARRAY_LEN(NVML_SYMS); i++) {
        const char *name = NVML_SYMS[i].name;
        if (!n->found[i] || strncmp(name, base, blen) != 0) continue;
        const char *rest = name + blen;
        if (*rest == '\0') return name;
        if (rest[0] == '_' && rest[1] == 'v' && rest[2] &&
            strspn(rest + 2, "0123456789") == strlen(rest + 2))
            return name;
    }
    return NULL;
}

/* Mark a device unhealthy with the failing call and NVML's words. */
static void device_failed(const tp_nvml_t *n, tp_gpu_info_t *g, const char *call, nvmlReturn_t r) {
    g->healthy = 0;
    snprintf(g->error, sizeof g->error, "%s: %s (NVML error %d)", call, nvml_text(n, r), r);
}

#define MIB (1024ULL * 1024ULL)

/* Query one device into g; the first failing call leaves g unhealthy and
 * returns that call's name, else NULL. */
static const char *query_device(const tp_nvml_t *n, tp_gpu_info_t *g, nvmlReturn_t *r) {
    nvmlDevice_t dev = NULL;
    if ((*r = n->get_handle(g->index, &dev)) != NVML_SUCCESS) return "nvmlDeviceGetHandleByIndex";
    if ((*r = n->get_name(dev, g->name, sizeof g->name)) != NVML_SUCCESS)
        return "nvmlDeviceGetName";
    if ((*r = n->get_uuid(dev, g->uuid, sizeof g->uuid)) != NVML_SUCCESS)
        return "nvmlDeviceGetUUID";
    nvmlMemory_t mem = {0};
    if ((*r = n->get_memory(dev, &mem)) != NVML_SUCCESS) return "nvmlDeviceGetMemoryInfo";
    g->memory_total_mib = mem.total / MIB;
    g->memory_used_mib = (mem.used + MIB - 1) / MIB; /* round up: err on the full side */
    nvmlUtilization_t util = {0};
    *r = n->get_util(dev, &util);
    if (*r == NVML_SUCCESS)
        g->util_gpu = util.gpu;
    else if (*r != NVML_ERROR_NOT_SUPPORTED) /* MIG instances have no rates, and are fine */
        return "nvmlDeviceGetUtilizationRates";
    return NULL;
}

/* O(devices). A device whose calls fail is reported unhealthy, not an error. */
int tp__nvml_gpus(tp_nvml_t *n, tp_gpu_info_t **out, size_t *count, tp_error_t *err) {
    assert(n && out && count);
    *out = NULL;
    *count = 0;
    unsigned int c = 0;
    nvmlReturn_t r = n->get_count(&c);
    if (r != NVML_SUCCESS)
        return tp__errorf(err, -EIO, "cannot count GPUs: nvmlDeviceGetCount: %s (NVML error %d)",
                          nvml_text(n, r), r);
    if (c == 0) return 0;
    tp_gpu_info_t *gpus = tp__xcalloc(c, sizeof *gpus);
    for (unsigned int i = 0; i < c; i++) {
        gpus[i].index = i;
        gpus[i].healthy = 1;
        nvmlReturn_t r_dev = NVML_SUCCESS;
        const char *failed = query_device(n, &gpus[i], &r_dev);
        gpus[i].name[sizeof gpus[i].name - 1] = '\0';
        gpus[i].uuid[sizeof gpus[i].uuid - 1] = '\0';
        if (failed) device_failed(n, &gpus[i], failed, r_dev);
    }
    *out = gpus;
    *count = c;
    return 0;
}

/* Ask a "fill this array, or tell me the size" NVML call until the array is
 * big enough: processes can come and go between two calls. */
#define NVML_GROW_TRIES 8

/* Newest SM sample per pid, folded into procs. Best effort: a device or
 * driver without samples leaves sm_util at 0. O(samples * procs). */
static void add_sm_util(const tp_nvml_t *n, nvmlDevice_t dev, tp_gpu_proc_t *procs, size_t np) {
    if (!n->get_proc_util || np == 0) return;
    unsigned int cap = 0;
    nvmlReturn_t r = n->get_proc_util(dev, NULL, &cap, 0);
    if (r != NVML_SUCCESS && r != NVML_ERROR_INSUFFICIENT_SIZE) return; /* NOT_FOUND: no samples */
    nvmlProcessUtilizationSample_t *s = NULL;
    unsigned int got = 0;
    for (int tries = 0; tries < NVML_GROW_TRIES; tries++) {
        if (cap == 0) break;
        cap += cap / 4 + 4;
        s = tp__xrealloc(s, (size_t)cap * sizeof *s);
        got = cap;
        r = n->get_proc_util(dev, s, &got, 0);
        if (r != NVML_ERROR_INSUFFICIENT_SIZE) break;
        if (got > cap) cap = got;
    }
    if (r == NVML_SUCCESS && got <= cap) {
        for (size_t p = 0; p < np; p++) {
            unsigned long long newest = 0;
            int seen = 0;
            for (unsigned int i = 0; i < got; i++) {
                if ((pid_t)s[i].pid != procs[p].pid) continue;
                if (seen && s[i].timeStamp < newest) continue;
                seen = 1;
                newest = s[i].timeStamp;
                procs[p].sm_util = s[i].smUtil > 100 ? 100 : s[i].smUtil;
            }
        }
    }
    free(s);
}

/* O(processes) NVML work plus O(samples * processes) for SM utilisation. */
int tp__nvml_processes(tp_nvml_t *n, unsigned index, tp_gpu_proc_t **out, size_t *count,
                       tp_error_t *err) {
    assert(n && out && count);
    *out = NULL;
    *count = 0;
    nvmlDevice_t dev = NULL;
    nvmlReturn_t r = n->get_handle(index, &dev);
    if (r != NVML_SUCCESS)
        return tp__errorf(err, -EIO, "GPU %u: nvmlDeviceGetHandleByIndex: %s (NVML error %d)",
                          index, nvml_text(n, r), r);
    const size_t size = n->proc_info_size;
    unsigned int cap = 16, got = 0;
    unsigned char *buf = NULL;
    for (int tries = 0;; tries++) {
        buf = tp__xrealloc(buf, (size_t)cap * size);
        got = cap;
        r = n->get_procs(dev, &got, buf);
        if (r != NVML_ERROR_INSUFFICIENT_SIZE || tries + 1 == NVML_GROW_TRIES) break;
        /* NVML says how many it has now; leave room for a few more. */
        cap = (got > cap ? got : cap * 2) + 8;
    }
    if (r != NVML_SUCCESS || got > cap) {
        free(buf);
        return tp__errorf(err, -EIO, "GPU %u: listing compute processes: %s (NVML error %d)", index,
                          nvml_text(n, r), r);
    }
    tp_gpu_proc_t *procs = tp__xcalloc(got ? got : 1, sizeof *procs);
    for (unsigned int i = 0; i < got; i++) {
        /* Both layouts start {pid, usedGpuMemory}; the stride is what differs. */
        nvmlProcessInfo_v1_t head;
        memcpy(&head, buf + (size_t)i * size, sizeof head);
        procs[i].pid = (pid_t)head.pid;
        procs[i].used_mib = head.usedGpuMemory == NVML_VALUE_NOT_AVAILABLE
                                ? 0
                                : (head.usedGpuMemory + MIB - 1) / MIB;
    }
    free(buf);
    add_sm_util(n, dev, procs, got);
    if (got == 0) {
        free(procs);
        procs = NULL;
    }
    *out = procs;
    *count = got;
    return 0;
}
