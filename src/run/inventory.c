/* inventory: the cluster placement sees (placement's part pl, with
 * placement.c). Each node as its agent's hello describes it: its CPUs, the
 * GPUs the experiment may use (`gpus:` restricts and overrides what NVML
 * found, or stands for it where there is none), their health and the memory
 * others use on them; whether its trials share GPUs through MPS (the
 * daemons the agent starts, one per GPU), by time-slicing or not at all. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "run/orchestrator_internal.h"
#include "run/run.h"

#define NO_MEMORY_LIMIT (UINT64_C(1) << 40) /* a declared GPU without memory: unbounded */

static const tp_gpu_decl_t *declared(const tp_run_t *r, int index) {
    for (size_t i = 0; i < r->x.ngpus; i++)
        if (r->x.gpus[i].index == index) return &r->x.gpus[i];
    return NULL;
}

static void add_gpu(tp_node_t *node, int index, const char *name, const char *uuid,
                    uint64_t memory_mib, int healthy, const tp_gpu_decl_t *d) {
    tp_gpu_t *g = &node->gpus[node->ngpus++];
    memset(g, 0, sizeof *g);
    snprintf(g->name, sizeof g->name, "gpu%d", index);
    snprintf(g->type, sizeof g->type, "%s", d && d->type ? d->type : name);
    snprintf(g->uuid, sizeof g->uuid, "%s", uuid ? uuid : "");
    g->index = index;
    g->memory_mib = d && d->memory_mib ? d->memory_mib : memory_mib ? memory_mib : NO_MEMORY_LIMIT;
    g->speed = d && d->speed > 0 ? d->speed : 1.0;
    g->healthy = healthy;
}

void tp__placement_init(tp_run_t *r) {
    tp_placement_t *pl = &r->pl;
    pl->placer = tp__placer_find(r->x.policy);
    pl->placing = r->x.res.gpus > 0 || r->x.res.cpus > 0;
    pl->cluster.nnodes = tp__agents_n(r);
    pl->cluster.nodes = tp__xcalloc(tp__agents_n(r) + 1, sizeof *pl->cluster.nodes);
    pl->node = tp__xcalloc(tp__agents_n(r) + 1, sizeof *pl->node);
    for (size_t i = 0; i < tp__agents_n(r); i++) {
        snprintf(pl->cluster.nodes[i].name, sizeof pl->cluster.nodes[i].name, "%.63s",
                 tp__agents_link(r, i)->name);
        pl->node[i].sharing = "none yet";
    }
    pl->cluster.limits = (tp_place_limits_t){.reserve_mib = r->x.reserve_mib,
                                             .oversubscribe = r->x.oversubscribe,
                                             .max_per_gpu = r->x.max_per_gpu,
                                             .sharing = r->x.sharing != TP_SHARING_NONE};
}

const tp_cluster_t *tp__placement_cluster(const tp_run_t *r) {
    return &r->pl.cluster;
}

const tp_node_state_t *tp__placement_node(const tp_run_t *r, size_t n) {
    return &r->pl.node[n];
}

void tp__placement_add_node(tp_run_t *r, const char *name) {
    tp_placement_t *pl = &r->pl;
    size_t n = pl->cluster.nnodes++;
    pl->cluster.nodes = tp__xrealloc(pl->cluster.nodes, (n + 2) * sizeof *pl->cluster.nodes);
    pl->node = tp__xrealloc(pl->node, (n + 2) * sizeof *pl->node);
    memset(&pl->cluster.nodes[n], 0, sizeof pl->cluster.nodes[n]);
    memset(&pl->node[n], 0, sizeof pl->node[n]);
    snprintf(pl->cluster.nodes[n].name, sizeof pl->cluster.nodes[n].name, "%.63s", name);
    pl->node[n].sharing = "none yet";
}

/* Node n as its agent described it, with the GPUs the experiment may use;
 * what they use at hello is foreign (the agent has just reaped leftovers). */
static void build_node(tp_run_t *r, size_t n, const tp_msg_hello_t *hello) {
    tp_node_t *node = &r->pl.cluster.nodes[n];
    tp_node_state_t *ns = &r->pl.node[n];
    free(node->gpus);
    node->gpus = NULL;
    node->ngpus = 0;
    if (r->x.cluster.kind == TP_CLUSTER_LOCAL) /* remote nodes keep the name they were given */
        snprintf(node->name, sizeof node->name, "%s", hello->node);
    node->cpus = hello->cpus;
    size_t found = hello->ngpus;
    node->gpus = tp__xcalloc(found + r->x.ngpus + 1, sizeof *node->gpus);
    for (size_t i = 0; i < found; i++) {
        const tp_msg_hello_gpu_t *e = &hello->gpus[i];
        const tp_gpu_decl_t *d = declared(r, e->index);
        if (r->x.ngpus && !d) continue; /* `gpus:` restricts the run to the ones it names */
        add_gpu(node, e->index, e->name, e->uuid, e->memory_mib, e->healthy, d);
    }
    if (found == 0) /* no NVML here: the declared GPUs describe what there is */
        for (size_t i = 0; i < r->x.ngpus; i++)
            add_gpu(node, r->x.gpus[i].index, "declared", NULL, 0, 1, &r->x.gpus[i]);
    free(ns->foreign_mib);
    ns->foreign_mib = tp__xcalloc(node->ngpus + 1, sizeof *ns->foreign_mib);
    free(ns->busy_base);
    ns->busy_base = tp__xcalloc(node->ngpus + 1, sizeof *ns->busy_base);
    for (size_t k = 0; k < node->ngpus; k++)
        ns->busy_base[k] = NAN;
    for (size_t i = 0; i < found; i++) {
        const tp_msg_hello_gpu_t *e = &hello->gpus[i];
        for (size_t k = 0; k < node->ngpus; k++)
            if (node->gpus[k].index == e->index) {
                ns->foreign_mib[k] = e->memory_used_mib;
                /* its busy share before any trial of ours: the first base of a profile */
                if (e->util >= 0) ns->busy_base[k] = (double)e->util;
            }
    }
}

/* A GPU that is unhealthy when the run starts is recorded like one that
 * breaks during it. */
void tp__placement_note_unhealthy(tp_run_t *r, size_t n, const tp_gpu_t *g, const char *err) {
    char detail[400];
    snprintf(detail, sizeof detail, "GPU %d of %s is unhealthy (%s); it gets no new trials",
             g->index, r->pl.cluster.nodes[n].name, err && *err ? err : "NVML error");
    tp__log(TP_LOG_WARN, "%s", detail);
    tp__journal_ok(
        &r->journal,
        tp__store_event(tp__journal_tx(&r->journal), -1, 0, "gpu-unhealthy", detail, tp__wall_s()),
        "recording an unhealthy GPU");
}

tp_gpu_t *tp__placement_gpu(tp_run_t *r, size_t node, int index, size_t *pos) {
    if (node >= r->pl.cluster.nnodes) return NULL;
    tp_node_t *n = &r->pl.cluster.nodes[node];
    for (size_t i = 0; i < n->ngpus; i++)
        if (n->gpus[i].index == index) {
            if (pos) *pos = i;
            return &n->gpus[i];
        }
    return NULL;
}

void tp__placement_device_id(const tp_gpu_t *g, char *out, size_t n) {
    if (g->uuid[0])
        snprintf(out, n, "%s", g->uuid);
    else
        snprintf(out, n, "%d", g->index);
}

/* DIR/mps/gpu<i> on this machine; DIR/mps/<node>/gpu<i> on a cluster, where
 * nodes may share the experiment directory. */
void tp__placement_mps_dirs(const tp_run_t *r, size_t node, int index, char *pipe, char *log,
                            size_t n) {
    char sub[160] = "";
    if (r->x.cluster.kind != TP_CLUSTER_LOCAL)
        snprintf(sub, sizeof sub, "%s/", r->pl.cluster.nodes[node].name);
    snprintf(pipe, n, "%s/mps/%sgpu%d/pipe", r->dir, sub, index);
    snprintf(log, n, "%s/mps/%sgpu%d/log", r->dir, sub, index);
}

/* A node that cannot take this experiment's trials: on a single machine
 * that is the end (a config error, printed); on a cluster the node gets no
 * trials (0 capacity) and a warning, and the others carry on. */
static int unusable(tp_run_t *r, size_t n, const char *what) {
    tp_node_t *node = &r->pl.cluster.nodes[n];
    if (r->pl.cluster.nnodes == 1) {
        fprintf(stderr, "%s: %s\n", r->x.path, what);
        return TP_EXIT_CONFIG;
    }
    tp__log(TP_LOG_WARN, "%s; node %s gets no trials", what, node->name);
    node->cpus = 0;
    for (size_t i = 0; i < node->ngpus; i++)
        node->gpus[i].healthy = 0;
    return 0;
}

int tp__placement_hello(tp_run_t *r, size_t n, const tp_msg_hello_t *hello, int *wait) {
    build_node(r, n, hello);
    r->pl.blocked = 0;
    tp_node_t *node = &r->pl.cluster.nodes[n];
    tp_node_state_t *ns = &r->pl.node[n];
    for (size_t k = 0; k < hello->ngpus; k++) {
        const tp_gpu_t *g = tp__placement_gpu(r, n, hello->gpus[k].index, NULL);
        if (g && !g->healthy) tp__placement_note_unhealthy(r, n, g, hello->gpus[k].error);
    }
    const char *nvml = hello->nvml;
    char what[600];
    if (r->x.res.gpus > 0 && (size_t)r->x.res.gpus > node->ngpus) {
        snprintf(what, sizeof what,
                 "each trial asks for %d GPU(s) but node %s has %zu usable (NVML: %s); "
                 "declare them under gpus: or run where there are GPUs",
                 r->x.res.gpus, node->name, node->ngpus, nvml ? nvml : "?");
        return unusable(r, n, what);
    }
    if (r->x.res.gpus > 0 && tp__placement_needs_profile(r) && (!nvml || strcmp(nvml, "ok") != 0)) {
        snprintf(what, sizeof what,
                 "gpu_memory or gpu_compute is auto, which needs NVML on node %s (NVML: %s); "
                 "declare the demand instead",
                 node->name, nvml ? nvml : "?");
        return unusable(r, n, what);
    }
    int control = hello->mps_control;
    const char *why = "";
    ns->mps = 0;
    node->served = 0; /* until its MPS daemons run */
    if (r->x.res.gpus == 0) {
        ns->sharing = "cpu";
    } else if (tp__placement_exclusive(r)) {
        /* A GPU each: the trial runs as it would outside tunepack (no MPS daemon,
         * no MPS variables, CUDA_VISIBLE_DEVICES alone). */
        ns->sharing = "exclusive";
    } else if (control && r->x.sharing != TP_SHARING_TIMESLICE) {
        ns->sharing = "mps";
        json_t *list = json_array();
        for (size_t i = 0; i < node->ngpus; i++) {
            char pipe[4200], log[4200], dev[128];
            tp__placement_mps_dirs(r, n, node->gpus[i].index, pipe, log, sizeof pipe);
            tp__placement_device_id(&node->gpus[i], dev, sizeof dev);
            json_array_append_new(list,
                                  json_pack("{s:i, s:s, s:s, s:s}", "index", node->gpus[i].index,
                                            "device", dev, "pipe_dir", pipe, "log_dir", log));
        }
        json_t *m = json_pack("{s:s, s:o}", "type", "mps_start", "gpus", list);
        tp__agents_send(r, (int)n, m);
        json_decref(m);
        ns->mps_pending = 1;
        *wait = 1;
    } else if (r->x.sharing == TP_SHARING_MPS) {
        snprintf(what, sizeof what,
                 "sharing: mps, but node %s has no nvidia-cuda-mps-control; install it or use "
                 "sharing: time-slicing",
                 node->name);
        return unusable(r, n, what);
    } else {
        ns->sharing = "time-slicing";
        why = r->x.sharing == TP_SHARING_TIMESLICE ? " (as asked)"
                                                   : " (no nvidia-cuda-mps-control found)";
    }
    char text[200];
    snprintf(text, sizeof text, "%s%s", ns->sharing, why);
    tp_store_t *s = tp__journal_tx(&r->journal);
    tp__journal_ok(&r->journal,
                   tp__store_meta_set(s, "sharing", text) ||
                       tp__store_meta_set(s, "policy", r->x.policy),
                   "recording how GPUs are shared");
    return 0;
}

void tp__placement_on_mps(tp_run_t *r, size_t n, const tp_msg_mps_t *m) {
    tp_node_state_t *ns = &r->pl.node[n];
    ns->mps_pending = 0;
    if (m->nfailed == 0) {
        ns->mps = 1;
        r->pl.cluster.nodes[n].served = 1; /* uncapped under MPS: the served curve */
        return;
    }
    /* Without a daemon on every GPU, MPS settings would point trials at a
     * missing pipe: share by time-slicing instead, and say why. */
    const tp_msg_mps_failure_t *e = &m->failed[0];
    char text[600];
    snprintf(text, sizeof text, "time-slicing (MPS failed on GPU %d of %s: %s)", e->index,
             r->pl.cluster.nodes[n].name, e->error);
    tp__log(TP_LOG_WARN, "%s", text);
    ns->sharing = "time-slicing";
    ns->mps = 0;
    r->pl.cluster.nodes[n].served = 0;
    tp__journal_ok(&r->journal, tp__store_meta_set(tp__journal_tx(&r->journal), "sharing", text),
                   "recording how GPUs are shared");
}
