/* sim outputs: the summary as JSON, per-GPU timelines as CSV, and a Gantt
 * chart as SVG 1.1 (one band per GPU, co-located trials in sub-lanes,
 * colour by model). */
#include <errno.h>
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "chart/chart.h"
#include "sim/sim.h"

char *tp__sim_json(const tp_sim_result_t *r, const char *cluster, const char *space,
                   const tp_cluster_t *c) {
    size_t ngpus = 0;
    for (size_t n = 0; n < c->nnodes; n++)
        ngpus += c->nodes[n].ngpus;
    json_t *o = json_pack(
        "{s:f, s:f, s:f, s:f, s:I, s:s, s:s, s:s, s:I, s:f, s:I, s:I, s:I, s:i, s:s, s:f}",
        "makespan_s", r->makespan_s, "lower_bound_s", r->lower_bound_s, "ratio", r->ratio,
        "busy_share", r->busy_share, "trials", (json_int_t)r->trials, "policy", r->policy,
        "cluster", cluster ? cluster : "", "space", space ? space : "", "gpus", (json_int_t)ngpus,
        "sum_speed", r->sum_speed, "events", (json_int_t)r->events, "rounds", (json_int_t)r->rounds,
        "gpu_updates", (json_int_t)r->gpu_updates, "max_colocated", r->max_colocated, "rounds_mode",
        r->rounds_mode == TP_SIM_ROUNDS_INCREMENTAL ? "incremental" : "full", "wall_s", r->wall_s);
    /* cluster scale (all 0 but gpu_hours without failures or queue waits) */
    json_object_set_new(o, "gpu_hours", json_real(r->gpu_hours));
    json_object_set_new(o, "node_failures", json_integer((json_int_t)r->node_failures));
    json_object_set_new(o, "requeued", json_integer((json_int_t)r->requeued));
    json_object_set_new(o, "lost_s", json_real(r->lost_s));
    char *text = json_dumps(o, JSON_COMPACT | JSON_PRESERVE_ORDER | JSON_REAL_PRECISION(10));
    json_decref(o);
    return text;
}

/* Interval order: by GPU, then start, then trial. */
static int by_gpu_start(const void *a, const void *b) {
    const tp_sim_interval_t *x = a, *y = b;
    if (x->gpu != y->gpu) return x->gpu < y->gpu ? -1 : 1;
    if (x->start_s != y->start_s) return x->start_s < y->start_s ? -1 : 1;
    return (x->trial > y->trial) - (x->trial < y->trial);
}

/* Per global GPU index: its node and its index on the node. O(G). */
static void gpu_places(const tp_cluster_t *c, size_t *node_of, size_t *local_of) {
    size_t gi = 0;
    for (size_t n = 0; n < c->nnodes; n++)
        for (size_t k = 0; k < c->nodes[n].ngpus; k++, gi++) {
            node_of[gi] = n;
            local_of[gi] = k;
        }
}

static size_t count_gpus(const tp_cluster_t *c) {
    size_t g = 0;
    for (size_t n = 0; n < c->nnodes; n++)
        g += c->nodes[n].ngpus;
    return g;
}

int tp__sim_write_csv(const char *path, const tp_sim_result_t *r, const tp_workload_t *w,
                      const tp_cluster_t *c, tp_error_t *err) {
    FILE *f = fopen(path, "w");
    if (!f) return tp__errorf(err, -errno, "%s: cannot write: %s", path, strerror(errno));
    size_t ng = count_gpus(c);
    size_t *node_of = tp__xcalloc(ng ? ng : 1, sizeof *node_of);
    size_t *local_of = tp__xcalloc(ng ? ng : 1, sizeof *local_of);
    gpu_places(c, node_of, local_of);
    tp_sim_interval_t *iv = tp__xcalloc(r->nintervals ? r->nintervals : 1, sizeof *iv);
    memcpy(iv, r->intervals, r->nintervals * sizeof *iv);
    qsort(iv, r->nintervals, sizeof *iv, by_gpu_start);
    fprintf(f, "gpu,node,gpu_type,lane,start_s,end_s,trial,model,batch,lr,busy_share\n");
    for (size_t i = 0; i < r->nintervals; i++) {
        const tp_sim_interval_t *x = &iv[i];
        const tp_node_t *n = &c->nodes[node_of[x->gpu]];
        const tp_gpu_t *g = &n->gpus[local_of[x->gpu]];
        double len = x->end_s - x->start_s;
        fprintf(f, "%u,%s,%s,%u,%.3f,%.3f,%lld,%s,%d,%.6g,%.4f\n", x->gpu, n->name, g->type,
                x->lane, x->start_s, x->end_s, (long long)x->trial, w->models[x->model].name,
                x->batch, x->lr, len > 0 ? x->busy_s / len : 0.0);
    }
    free(iv);
    free(node_of);
    free(local_of);
    if (fclose(f) != 0) return tp__errorf(err, -EIO, "%s: write failed", path);
    return 0;
}

#define SVG_MAX_GPUS 128 /* bands drawn at most; the chart says when more exist */

int tp__sim_write_svg(const char *path, const tp_sim_result_t *r, const tp_workload_t *w,
                      const tp_cluster_t *c, const char *title, tp_error_t *err) {
    size_t ng = count_gpus(c);
    size_t *node_of = tp__xcalloc(ng ? ng : 1, sizeof *node_of);
    size_t *local_of = tp__xcalloc(ng ? ng : 1, sizeof *local_of);
    gpu_places(c, node_of, local_of);
    char **labels = tp__xcalloc(ng ? ng : 1, sizeof *labels);
    for (size_t g = 0; g < ng; g++) {
        const tp_node_t *n = &c->nodes[node_of[g]];
        tp_buf_t b;
        tp__buf_init(&b);
        tp__buf_printf(&b, "%s/%s %s", n->name, n->gpus[local_of[g]].name,
                       n->gpus[local_of[g]].type);
        labels[g] = tp__buf_steal(&b);
    }
    const char **legend = tp__xcalloc(w->nmodels ? w->nmodels : 1, sizeof *legend);
    for (size_t m = 0; m < w->nmodels; m++)
        legend[m] = w->models[m].name;
    tp_gantt_bar_t *bars = tp__xcalloc(r->nintervals ? r->nintervals : 1, sizeof *bars);
    char **titles = tp__xcalloc(r->nintervals ? r->nintervals : 1, sizeof *titles);
    for (size_t i = 0; i < r->nintervals; i++) {
        const tp_sim_interval_t *x = &r->intervals[i];
        tp_buf_t b;
        tp__buf_init(&b);
        tp__buf_printf(&b, "trial %lld: %s batch %d lr %.3g, %.1f-%.1f s", (long long)x->trial,
                       w->models[x->model].name, x->batch, x->lr, x->start_s, x->end_s);
        titles[i] = tp__buf_steal(&b);
        bars[i] = (tp_gantt_bar_t){.band = x->gpu,
                                   .lane = x->lane,
                                   .start = x->start_s,
                                   .end = x->end_s,
                                   .colour = x->model,
                                   .title = titles[i]};
    }
    int minutes = r->makespan_s >= 600;
    double unit = minutes ? 60 : 1;
    char subtitle[256];
    snprintf(subtitle, sizeof subtitle,
             "makespan %.1f %s, lower bound %.1f %s (ratio %.3f), mean GPU busy share %.1f%%, "
             "%llu trials",
             r->makespan_s / unit, minutes ? "min" : "s", r->lower_bound_s / unit,
             minutes ? "min" : "s", r->ratio, 100 * r->busy_share, (unsigned long long)r->trials);
    tp_gantt_t g = {.title = title ? title : "tunepack simulate",
                    .subtitle = subtitle,
                    .nbands = ng,
                    .band_label = (const char *const *)labels,
                    .bars = bars,
                    .nbars = r->nintervals,
                    .span = r->makespan_s,
                    .legend = legend,
                    .nlegend = w->nmodels,
                    .max_bands = SVG_MAX_GPUS};
    tp_buf_t svg;
    tp__buf_init(&svg);
    tp__buf_puts(&svg, "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n");
    tp__chart_gantt(&svg, &g);
    int rc = tp__write_file(path, svg.data, svg.len, err);
    tp__buf_free(&svg);
    for (size_t i = 0; i < r->nintervals; i++)
        free(titles[i]);
    for (size_t k = 0; k < ng; k++)
        free(labels[k]);
    free(titles);
    free(bars);
    free(legend);
    free(labels);
    free(node_of);
    free(local_of);
    return rc;
}
