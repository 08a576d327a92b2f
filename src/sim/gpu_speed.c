/* gpu_speed: a table of GPU types' relative speeds (gpu_speed.h). */
#include "sim/gpu_speed.h"

#include <stddef.h>
#include <string.h>
#include <strings.h>

typedef struct gpu_speed {
    const char *key;     /* the name `--gpu-type` takes */
    const char *model;   /* what an NVML name holds for it */
    const char *variant; /* and, where one model has several, this too (NULL: any) */
    double speed;        /* relative to an A100 */
    unsigned mem_gib;    /* its memory, nominal (the name's) */
} gpu_speed_t;

/* More specific rows first: the first whose model (and variant) an NVML name holds wins. */
static const gpu_speed_t table[] = {
    {"a100_40g", "A100", "40GB", 1.0, 40}, /* data/workloads/sp.yaml (assumed) */
    {"a100_80g", "A100", NULL, 1.0, 80},   /* data/workloads/sp.yaml (assumed) */
    {"h100_80g", "H100", NULL, 2.0, 80},   /* data/workloads/sp.yaml (assumed) */
    {"h200_141g", "H200", NULL, 2.1, 141}, /* H100 x 1.054, measured: bench/gpu, vit_tiny b128 */
};

/* The row for type: its key, else the first whose model (and variant) it holds. */
static const gpu_speed_t *row_of(const char *type) {
    if (!type || !*type) return NULL;
    for (size_t i = 0; i < sizeof table / sizeof *table; i++)
        if (strcasecmp(type, table[i].key) == 0) return &table[i];
    for (size_t i = 0; i < sizeof table / sizeof *table; i++)
        if (strcasestr(type, table[i].model) &&
            (!table[i].variant || strcasestr(type, table[i].variant)))
            return &table[i];
    return NULL;
}

double tp__gpu_speed(const char *type) {
    const gpu_speed_t *r = row_of(type);
    return r ? r->speed : 0;
}

uint64_t tp__gpu_memory_mib(const char *type) {
    const gpu_speed_t *r = row_of(type);
    return r ? (uint64_t)r->mem_gib * 1024 : 0;
}

const char *tp__gpu_speed_keys(void) {
    return "a100_40g, a100_80g, h100_80g, h200_141g";
}
