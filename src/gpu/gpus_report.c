/* gpus_report: the human table of GPUs that `tunepack gpus` prints. */
#include <string.h>

#include "gpu/gpu.h"

/* Percent of total, 0 when the total is unknown. */
static unsigned percent(uint64_t part, uint64_t total) {
    return total ? (unsigned)((part * 100 + total / 2) / total) : 0;
}

static int widest(const tp_gpu_info_t *gpus, size_t count, int uuid, int min) {
    for (size_t i = 0; i < count; i++) {
        const char *s = uuid ? gpus[i].uuid : gpus[i].name;
        int len = (int)strnlen(s, sizeof gpus[i].name);
        if (len > min) min = len;
    }
    return min;
}

void tp__gpu_table(FILE *out, const tp_gpu_info_t *gpus, size_t count,
                   const size_t *procs_per_gpu) {
    if (count == 0) {
        fprintf(out, "no GPUs\n");
        return;
    }
    int name_w = widest(gpus, count, 0, 4), uuid_w = widest(gpus, count, 1, 4);
    fprintf(out, "%-3s  %-*s  %-*s  %22s  %4s  %s%s\n", "IDX", name_w, "NAME", uuid_w, "UUID",
            "MEMORY USED/TOTAL MiB", "UTIL", procs_per_gpu ? "PROCS  " : "", "HEALTH");
    for (size_t i = 0; i < count; i++) {
        const tp_gpu_info_t *g = &gpus[i];
        char mem[64] = "-", util[16] = "-", procs[32] = "";
        if (g->memory_total_mib)
            snprintf(mem, sizeof mem, "%llu/%llu %3u%%", (unsigned long long)g->memory_used_mib,
                     (unsigned long long)g->memory_total_mib,
                     percent(g->memory_used_mib, g->memory_total_mib));
        if (g->healthy) snprintf(util, sizeof util, "%u%%", g->util_gpu);
        if (procs_per_gpu) snprintf(procs, sizeof procs, "%5zu  ", procs_per_gpu[i]);
        fprintf(out, "%-3u  %-*s  %-*s  %22s  %4s  %s%s%s\n", g->index, name_w,
                g->name[0] ? g->name : "?", uuid_w, g->uuid[0] ? g->uuid : "?", mem, util, procs,
                g->healthy ? "ok" : "UNHEALTHY: ", g->healthy ? "" : g->error);
    }
}
