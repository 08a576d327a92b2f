/* gpu: NVML loaded with dlopen (our own minimal declarations: no NVIDIA
 * headers or libraries at build time), MPS control daemons, GPU health.
 * Leaf module: depends on util only. */
#ifndef TP_GPU_H
#define TP_GPU_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/types.h>

#include "util/util.h"

typedef struct tp_nvml tp_nvml_t;

typedef struct tp_gpu_info {
    unsigned index; /* NVML device index */
    char name[96];  /* "NVIDIA H100 80GB HBM3" */
    char uuid[96];  /* "GPU-..." */
    uint64_t memory_total_mib;
    uint64_t memory_used_mib;
    unsigned util_gpu; /* percent, last sample period */
    int healthy;       /* 0 after an NVML error on this device (vanished, Xid, ...) */
    char error[160];   /* why it is unhealthy */
} tp_gpu_info_t;

typedef struct tp_gpu_proc {
    pid_t pid;
    uint64_t used_mib; /* GPU memory of the process on that device */
    unsigned sm_util;  /* percent of SMs, from process utilisation samples; 0 if unknown */
} tp_gpu_proc_t;

/* Load NVML: dlopen(path or "libnvidia-ml.so.1"), look up the symbols from
 * a table of {name, &pointer, required}, newest versioned name first, and
 * nvmlInit_v2. Returns 0, or -ENOENT (no library: a machine with no GPU,
 * not an error), or -EIO with err filled. */
int tp__nvml_open(const char *path, tp_nvml_t **out, tp_error_t *err);
void tp__nvml_close(tp_nvml_t *n);
/* Like tp__nvml_open, but every symbol is looked up through lookup(lib,
 * name, ctx) instead of dlsym (NULL lookup means dlsym). Lets a test play an
 * older library that lacks the newest versioned names. */
typedef void *(*tp_nvml_lookup_fn)(void *lib, const char *name, void *ctx);
int tp__nvml_open_with(const char *path, tp_nvml_lookup_fn lookup, void *ctx, tp_nvml_t **out,
                       tp_error_t *err);
/* Which exported name the symbol table settled on for a function given by
 * its unversioned name ("nvmlInit" -> "nvmlInit_v2"); NULL if none was found.
 * The string is static. */
const char *tp__nvml_symbol(const tp_nvml_t *n, const char *base);
/* All devices, in index order. *out is malloc'd (caller frees). */
int tp__nvml_gpus(tp_nvml_t *n, tp_gpu_info_t **out, size_t *count, tp_error_t *err);
/* Compute processes on device index, with per-process SM utilisation when
 * NVML has samples. *out malloc'd. */
int tp__nvml_processes(tp_nvml_t *n, unsigned index, tp_gpu_proc_t **out, size_t *count,
                       tp_error_t *err);

/* A table of GPUs for people (`tunepack gpus`): index, name, memory used /
 * total, utilisation, and health (with the error of an unhealthy one).
 * procs_per_gpu may be NULL; else procs_per_gpu[i] is the number of compute
 * processes on gpus[i], shown in a PROCS column. O(count). (gpus_report.c) */
void tp__gpu_table(FILE *out, const tp_gpu_info_t *gpus, size_t count, const size_t *procs_per_gpu);

/* ---- MPS (mps.c) ---------------------------------------------------------- */
/* The control program: $TUNEPACK_MPS_CONTROL if set, else
 * nvidia-cuda-mps-control found on PATH; NULL if none (then sharing falls
 * back to time-slicing). Returned string is malloc'd. */
char *tp__mps_control_path(void);
/* Start an MPS control daemon (`control -d`) for one GPU with its pipe and
 * log directories (created), CUDA_VISIBLE_DEVICES=device. Waits until the
 * daemon is up (its pipe directory holds the control pipe, at most ~5 s).
 * Returns 0 or -errno with err filled. */
int tp__mps_start(const char *control, const char *device, const char *pipe_dir,
                  const char *log_dir, tp_error_t *err);
/* Stop the daemon of pipe_dir: `echo quit | control` with
 * CUDA_MPS_PIPE_DIRECTORY=pipe_dir; waits for it to exit (at most ~5 s).
 * A pipe dir with no live daemon is fine (returns 0): used on resume after a
 * crash to clean up. */
int tp__mps_stop(const char *control, const char *pipe_dir, tp_error_t *err);
/* Environment for a trial sharing a GPU under MPS: fills out with up to 3
 * "NAME=value" strings (CUDA_MPS_PIPE_DIRECTORY, CUDA_MPS_ACTIVE_THREAD_PERCENTAGE
 * = ceil(100 * compute) clamped to [1, 100], CUDA_MPS_PINNED_DEVICE_MEM_LIMIT
 * = "<device>=<memory_mib * (1 + headroom)>M"). Returns how many. */
int tp__mps_env(const char *pipe_dir, const char *device, double compute, uint64_t memory_mib,
                double headroom, char out[3][512]);

/* ---- out-of-memory (oom.c) -------------------------------------------------- */
/* 1 if a line of a trial's stderr says the GPU ran out of memory (PyTorch,
 * TensorFlow, JAX, CUDA runtime and cuBLAS forms), else 0. O(len). */
int tp__gpu_oom_line(const char *line, size_t len);

#endif
