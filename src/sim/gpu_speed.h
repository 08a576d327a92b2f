/* gpu_speed: how fast a GPU type runs a trial, relative to an A100, for
 * `tunepack plan EXPERIMENT --gpu-type T` (the measured times of a run on
 * one type scaled to another). The table and where each figure comes from:
 * docs/simulator.md, "GPU types". Pure. */
#ifndef TP_SIM_GPU_SPEED_H
#define TP_SIM_GPU_SPEED_H

#include <stdint.h>

/* The relative speed of type, a table key ("h100_80g") or the name NVML
 * gives ("NVIDIA H100 80GB HBM3"), case-insensitive; 0 when the table does
 * not know it. O(table). */
double tp__gpu_speed(const char *type);
/* Its memory, nominal (80 GiB for h100_80g), in MiB; 0 when the table does
 * not know it. O(table). */
uint64_t tp__gpu_memory_mib(const char *type);
/* The table's keys, comma-separated, for messages. */
const char *tp__gpu_speed_keys(void);

#endif
