/* sim_space: what the simulator makes of a workload outside the event loop:
 * a space's search space (model, batch size and learning rate as grids) and
 * a homogeneous cluster of a named GPU type (the scale runs, `tunepack
 * plan`). */
#include <errno.h>
#include <string.h>

#include "sim/sim.h"

int tp__sim_space(const tp_workload_t *w, const char *space, tp_space_t *out, tp_error_t *err) {
    tp__space_init(out);
    const tp_wl_space_t *s = tp__workload_find_space(w, space);
    if (!s) {
        const char *names[64];
        size_t n = 0;
        for (; n < w->nspaces && n < 64; n++)
            names[n] = w->spaces[n].name;
        return tp__workload_no_such(err, "space", space, names, n);
    }
    tp_param_t p = {.name = tp__strdup("model"), .kind = TP_DOM_GRID, .nvalues = s->nmodels};
    p.values = tp__xcalloc(s->nmodels ? s->nmodels : 1, sizeof *p.values);
    for (size_t i = 0; i < s->nmodels; i++)
        p.values[i] = json_string(w->models[s->models[i]].name);
    tp__space_add(out, &p);
    p = (tp_param_t){.name = tp__strdup("batch_size"), .kind = TP_DOM_GRID, .nvalues = s->nbatch};
    p.values = tp__xcalloc(s->nbatch ? s->nbatch : 1, sizeof *p.values);
    for (size_t i = 0; i < s->nbatch; i++)
        p.values[i] = json_integer(s->batch_sizes[i]);
    tp__space_add(out, &p);
    size_t nlr = s->lr_count > 0 ? (size_t)s->lr_count : 1;
    p = (tp_param_t){.name = tp__strdup("lr"), .kind = TP_DOM_GRID, .nvalues = nlr};
    p.values = tp__xcalloc(nlr, sizeof *p.values);
    for (size_t i = 0; i < nlr; i++)
        p.values[i] = json_real(tp__workload_lr(s, i));
    tp__space_add(out, &p);
    return 0;
}

int tp__sim_cluster(const tp_workload_t *w, const char *gpu_type, size_t ngpus, int gpus_per_node,
                    int cpus_per_node, tp_cluster_t *out, tp_error_t *err) {
    memset(out, 0, sizeof *out);
    const tp_wl_gpu_type_t *t = NULL;
    const char *names[64] = {0};
    size_t nn = 0;
    for (size_t i = 0; i < w->ngpu_types; i++) {
        if (strcmp(w->gpu_types[i].name, gpu_type) == 0) t = &w->gpu_types[i];
        if (nn < 64) names[nn++] = w->gpu_types[i].name;
    }
    if (!t) return tp__workload_no_such(err, "GPU type", gpu_type, names, nn);
    if (gpus_per_node <= 0 || ngpus == 0)
        return tp__errorf(err, -EINVAL, "a cluster needs at least one GPU and one GPU per node");
    size_t per = (size_t)gpus_per_node, nnodes = (ngpus + per - 1) / per;
    out->nodes = tp__xcalloc(nnodes, sizeof *out->nodes);
    out->nnodes = nnodes;
    out->limits = (tp_place_limits_t){.reserve_mib = 512, .sharing = 1};
    for (size_t n = 0; n < nnodes; n++) {
        size_t k = n + 1 < nnodes ? per : ngpus - per * (nnodes - 1);
        tp__workload_node(&out->nodes[n], n, k,
                          cpus_per_node > 0 ? cpus_per_node : 32 * gpus_per_node, t);
    }
    return 0;
}
