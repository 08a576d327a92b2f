/* gpus_report: the human table of GPUs that `tunepack gpus` prints. */
#include <stdlib.h>
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

/* One column per header label, each label over its values: IDX, NAME and
 * UUID left-aligned, the numbers right-aligned under theirs; memory in use
 * and in total are one column (USED/TOTAL), its percentage the next. */
void tp__gpu_table(FILE *out, const tp_gpu_info_t *gpus, size_t count,
                   const size_t *procs_per_gpu) {
    if (count == 0) {
        fprintf(out, "no GPUs\n");
        return;
    }
    int name_w = widest(gpus, count, 0, 4), uuid_w = widest(gpus, count, 1, 4);
    const char *mem_label = "MiB USED/TOTAL";
    int mem_w = (int)strlen(mem_label);
    char(*mem)[48] = calloc(count, sizeof *mem);
    for (size_t i = 0; mem && i < count; i++) {
        snprintf(mem[i], sizeof mem[i], "-");
        if (gpus[i].memory_total_mib)
            snprintf(mem[i], sizeof mem[i], "%llu/%llu",
                     (unsigned long long)gpus[i].memory_used_mib,
                     (unsigned long long)gpus[i].memory_total_mib);
        if ((int)strlen(mem[i]) > mem_w) mem_w = (int)strlen(mem[i]);
    }
    fprintf(out, "%-3s  %-*s  %-*s  %*s  %4s  %4s  %s%s\n", "IDX", name_w, "NAME", uuid_w, "UUID",
            mem_w, mem_label, "MEM%", "UTIL", procs_per_gpu ? "PROCS  " : "", "HEALTH");
    for (size_t i = 0; i < count; i++) {
        const tp_gpu_info_t *g = &gpus[i];
        char pct[16] = "-", util[16] = "-", procs[32] = "";
        if (g->memory_total_mib)
            snprintf(pct, sizeof pct, "%u%%", percent(g->memory_used_mib, g->memory_total_mib));
        if (g->healthy) snprintf(util, sizeof util, "%u%%", g->util_gpu);
        if (procs_per_gpu) snprintf(procs, sizeof procs, "%5zu  ", procs_per_gpu[i]);
        fprintf(out, "%-3u  %-*s  %-*s  %*s  %4s  %4s  %s%s%s\n", g->index, name_w,
                g->name[0] ? g->name : "?", uuid_w, g->uuid[0] ? g->uuid : "?", mem_w,
                mem ? mem[i] : "-", pct, util, procs,
                g->healthy ? "ok" : "UNHEALTHY: ", g->healthy ? "" : g->error);
    }
    free(mem);
}
