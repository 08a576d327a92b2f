/* sim outputs: the summary as JSON, per-GPU timelines as CSV, and a Gantt
 * chart as SVG 1.1 (one band per GPU, co-located trials in sub-lanes,
 * colour by model). */
#include <errno.h>
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sim/sim.h"

char *tp__sim_json(const tp_sim_result_t *r, const char *cluster, const char *space,
                   const tp_cluster_t *c) {
    size_t ngpus = 0;
    for (size_t n = 0; n < c->nnodes; n++) ngpus += c->nodes[n].ngpus;
    json_t *o = json_pack(
        "{s:f, s:f, s:f, s:f, s:I, s:s, s:s, s:s, s:I, s:f, s:I, s:I, s:I, s:i, s:s, s:f}",
        "makespan_s", r->makespan_s, "lower_bound_s", r->lower_bound_s, "ratio", r->ratio,
        "busy_share", r->busy_share, "trials", (json_int_t)r->trials, "policy", r->policy,
        "cluster", cluster ? cluster : "", "space", space ? space : "", "gpus",
        (json_int_t)ngpus, "sum_speed", r->sum_speed, "events", (json_int_t)r->events, "rounds",
        (json_int_t)r->rounds, "gpu_updates", (json_int_t)r->gpu_updates, "max_colocated",
        r->max_colocated, "rounds_mode",
        r->rounds_mode == TP_SIM_ROUNDS_INCREMENTAL ? "incremental" : "full", "wall_s",
        r->wall_s);
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
    for (size_t n = 0; n < c->nnodes; n++) g += c->nodes[n].ngpus;
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

/* Tableau 10: distinct, print-safe. */
static const char *const palette[] = {"#4e79a7", "#f28e2b", "#e15759", "#76b7b2", "#59a14f",
                                      "#edc948", "#b07aa1", "#ff9da7", "#9c755f", "#bab0ac"};

static void xml_text(FILE *f, const char *s) {
    for (; *s; s++) {
        switch (*s) {
        case '<': fputs("&lt;", f); break;
        case '>': fputs("&gt;", f); break;
        case '&': fputs("&amp;", f); break;
        case '"': fputs("&quot;", f); break;
        default: fputc(*s, f);
        }
    }
}

/* A tick step of 1, 2 or 5 times a power of ten giving at most ~10 ticks. */
static double tick_step(double span) {
    double raw = span / 10, p = pow(10, floor(log10(raw > 0 ? raw : 1)));
    double m = raw / p;
    return (m <= 1 ? 1 : m <= 2 ? 2 : m <= 5 ? 5 : 10) * p;
}

#define SVG_MAX_GPUS 128 /* bands drawn at most; the title says when more exist */

int tp__sim_write_svg(const char *path, const tp_sim_result_t *r, const tp_workload_t *w,
                      const tp_cluster_t *c, const char *title, tp_error_t *err) {
    FILE *f = fopen(path, "w");
    if (!f) return tp__errorf(err, -errno, "%s: cannot write: %s", path, strerror(errno));
    size_t ng = count_gpus(c), shown = ng < SVG_MAX_GPUS ? ng : SVG_MAX_GPUS;
    size_t *node_of = tp__xcalloc(ng ? ng : 1, sizeof *node_of);
    size_t *local_of = tp__xcalloc(ng ? ng : 1, sizeof *local_of);
    gpu_places(c, node_of, local_of);
    int *lanes = tp__xcalloc(ng ? ng : 1, sizeof *lanes);
    int *used_model = tp__xcalloc(w->nmodels ? w->nmodels : 1, sizeof *used_model);
    for (size_t i = 0; i < r->nintervals; i++) {
        const tp_sim_interval_t *x = &r->intervals[i];
        if (x->lane + 1 > lanes[x->gpu]) lanes[x->gpu] = x->lane + 1;
        used_model[x->model] = 1;
    }
    const double lane_h = 9, band_gap = 5, left = 120, right = 30, top = 56, plot_w = 1000;
    double *band_y = tp__xcalloc(shown + 1, sizeof *band_y);
    double y = top;
    for (size_t g = 0; g < shown; g++) {
        band_y[g] = y;
        y += (lanes[g] > 0 ? lanes[g] : 1) * lane_h + band_gap;
    }
    double plot_bottom = y;
    size_t nlegend = 0;
    for (size_t m = 0; m < w->nmodels; m++) nlegend += used_model[m] != 0;
    double width = left + plot_w + right, height = plot_bottom + 40 + 22.0 * (double)((nlegend + 4) / 5) + 10;
    double span = r->makespan_s > 0 ? r->makespan_s : 1;
    int minutes = span >= 600;
    double unit = minutes ? 60 : 1;

    fprintf(f, "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n"
               "<svg xmlns=\"http://www.w3.org/2000/svg\" version=\"1.1\" width=\"%.0f\" "
               "height=\"%.0f\" viewBox=\"0 0 %.0f %.0f\" font-family=\"Helvetica, Arial, "
               "sans-serif\" font-size=\"11\">\n",
            width, height, width, height);
    fprintf(f, "<rect x=\"0\" y=\"0\" width=\"%.0f\" height=\"%.0f\" fill=\"white\"/>\n", width,
            height);
    fprintf(f, "<text x=\"%.0f\" y=\"22\" font-size=\"15\" font-weight=\"bold\">", left);
    xml_text(f, title ? title : "tunepack simulate");
    fprintf(f, "</text>\n<text x=\"%.0f\" y=\"40\" fill=\"#444\">makespan %.1f %s, lower bound "
               "%.1f %s (ratio %.3f), mean GPU busy share %.1f%%, %llu trials%s</text>\n",
            left, r->makespan_s / unit, minutes ? "min" : "s", r->lower_bound_s / unit,
            minutes ? "min" : "s", r->ratio, 100 * r->busy_share, (unsigned long long)r->trials,
            shown < ng ? " (first 128 GPUs shown)" : "");
    /* grid lines and time axis */
    double step = tick_step(span / unit) * unit;
    fprintf(f, "<g stroke=\"#ddd\" stroke-width=\"1\">\n");
    for (double t = 0; t <= span + 1e-9; t += step)
        fprintf(f, "<line x1=\"%.2f\" y1=\"%.1f\" x2=\"%.2f\" y2=\"%.1f\"/>\n",
                left + plot_w * t / span, top - 4, left + plot_w * t / span, plot_bottom);
    fprintf(f, "</g>\n<g text-anchor=\"middle\" fill=\"#222\">\n");
    for (double t = 0; t <= span + 1e-9; t += step)
        fprintf(f, "<text x=\"%.2f\" y=\"%.1f\">%g</text>\n", left + plot_w * t / span,
                plot_bottom + 14, t / unit);
    fprintf(f, "<text x=\"%.1f\" y=\"%.1f\">time (%s)</text>\n</g>\n", left + plot_w / 2,
            plot_bottom + 30, minutes ? "minutes" : "seconds");
    fprintf(f, "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"#222\"/>\n", left,
            plot_bottom, left + plot_w, plot_bottom);
    /* GPU labels and band backgrounds */
    fprintf(f, "<g text-anchor=\"end\" fill=\"#222\">\n");
    for (size_t g = 0; g < shown; g++) {
        const tp_node_t *n = &c->nodes[node_of[g]];
        double h = (lanes[g] > 0 ? lanes[g] : 1) * lane_h;
        fprintf(f, "<rect x=\"%.1f\" y=\"%.1f\" width=\"%.1f\" height=\"%.1f\" fill=\"%s\"/>\n",
                left, band_y[g], plot_w, h, g % 2 ? "#f4f4f4" : "#fafafa");
        fprintf(f, "<text x=\"%.1f\" y=\"%.1f\">", left - 6, band_y[g] + h / 2 + 4);
        xml_text(f, n->name);
        fputc('/', f);
        xml_text(f, n->gpus[local_of[g]].name);
        fputc(' ', f);
        xml_text(f, n->gpus[local_of[g]].type);
        fprintf(f, "</text>\n");
    }
    fprintf(f, "</g>\n<g stroke=\"white\" stroke-width=\"0.4\">\n");
    for (size_t i = 0; i < r->nintervals; i++) {
        const tp_sim_interval_t *x = &r->intervals[i];
        if (x->gpu >= shown) continue;
        double x0 = left + plot_w * x->start_s / span, x1 = left + plot_w * x->end_s / span;
        fprintf(f, "<rect x=\"%.2f\" y=\"%.1f\" width=\"%.2f\" height=\"%.1f\" fill=\"%s\">"
                   "<title>trial %lld: ",
                x0, band_y[x->gpu] + x->lane * lane_h, x1 - x0 > 0.3 ? x1 - x0 : 0.3, lane_h - 1,
                palette[x->model % TP_ARRAY_LEN(palette)], (long long)x->trial);
        xml_text(f, w->models[x->model].name);
        fprintf(f, " batch %d lr %.3g, %.1f-%.1f s</title></rect>\n", x->batch, x->lr, x->start_s,
                x->end_s);
    }
    fprintf(f, "</g>\n<g fill=\"#222\">\n");
    size_t k = 0;
    for (size_t m = 0; m < w->nmodels; m++) {
        if (!used_model[m]) continue;
        double lx = left + 190.0 * (double)(k % 5), ly = plot_bottom + 44 + 22.0 * (double)(k / 5);
        fprintf(f, "<rect x=\"%.1f\" y=\"%.1f\" width=\"14\" height=\"11\" fill=\"%s\"/>"
                   "<text x=\"%.1f\" y=\"%.1f\">",
                lx, ly, palette[m % TP_ARRAY_LEN(palette)], lx + 20, ly + 10);
        xml_text(f, w->models[m].name);
        fprintf(f, "</text>\n");
        k++;
    }
    fprintf(f, "</g>\n</svg>\n");
    free(band_y);
    free(lanes);
    free(used_model);
    free(node_of);
    free(local_of);
    if (fclose(f) != 0) return tp__errorf(err, -EIO, "%s: write failed", path);
    return 0;
}
