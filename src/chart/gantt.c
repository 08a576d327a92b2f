/* gantt: one band per GPU with co-located trials in sub-lanes, and under
 * each band an optional strip of the memory and compute in use. The style
 * the simulator's plans have always had; the dashboard draws real runs
 * with it. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "chart/chart.h"
#include "chart/chart_internal.h"

static const char *const palette[] = {"#4e79a7", "#f28e2b", "#e15759", "#76b7b2", "#59a14f",
                                      "#edc948", "#b07aa1", "#ff9da7", "#9c755f", "#bab0ac"};

const char *tp__chart_colour(size_t i) {
    return palette[i % TP_ARRAY_LEN(palette)];
}

void tp__chart_xml(tp_buf_t *out, const char *text) {
    /* a control character is shown, never sent (docs/output.md) */
    char *e = tp__escape(text, 0);
    for (const char *s = e; *s; s++) {
        switch (*s) {
        case '<':
            tp__buf_puts(out, "&lt;");
            break;
        case '>':
            tp__buf_puts(out, "&gt;");
            break;
        case '&':
            tp__buf_puts(out, "&amp;");
            break;
        case '"':
            tp__buf_puts(out, "&quot;");
            break;
        default:
            tp__buf_append(out, s, 1);
        }
    }
    free(e);
}

double tp__chart_tick_step(double span) {
    double raw = span / 10, p = pow(10, floor(log10(raw > 0 ? raw : 1)));
    double m = raw / p;
    return (m <= 1 ? 1 : m <= 2 ? 2 : m <= 5 ? 5 : 10) * p;
}

void tp__chart_open(tp_buf_t *out, double width, double height) {
    tp__buf_printf(out,
                   "<svg xmlns=\"http://www.w3.org/2000/svg\" version=\"1.1\" width=\"%.0f\" "
                   "height=\"%.0f\" viewBox=\"0 0 %.0f %.0f\" font-family=\"Helvetica, Arial, "
                   "sans-serif\" font-size=\"11\">\n"
                   "<rect x=\"0\" y=\"0\" width=\"%.0f\" height=\"%.0f\" fill=\"white\"/>\n",
                   width, height, width, height, width, height);
}

void tp__chart_titles(tp_buf_t *out, double left, const char *title, const char *subtitle) {
    tp__buf_printf(out, "<text x=\"%.0f\" y=\"22\" font-size=\"15\" font-weight=\"bold\">", left);
    tp__chart_xml(out, title ? title : "");
    tp__buf_puts(out, "</text>\n");
    if (subtitle) {
        tp__buf_printf(out, "<text x=\"%.0f\" y=\"40\" fill=\"#444\">", left);
        tp__chart_xml(out, subtitle);
        tp__buf_puts(out, "</text>\n");
    }
}

enum { LANE_H = 9, BAND_GAP = 5, USE_H = 12 };

/* The memory (filled) and compute (line) strip under a band. */
static void use_strip(tp_buf_t *out, const tp_gantt_use_t *u, double left, double plot_w,
                      double span, double y) {
    tp__buf_printf(out,
                   "<rect x=\"%.1f\" y=\"%.1f\" width=\"%.1f\" height=\"%d\" fill=\"#eef1f6\"/>\n",
                   left, y, plot_w, USE_H);
    if (u->n == 0) return;
    tp__buf_puts(out, "<path fill=\"#9fb3d1\" d=\"");
    for (size_t i = 0; i < u->n; i++) {
        double x0 = left + plot_w * u->at[i] / span;
        double x1 = left + plot_w * (i + 1 < u->n ? u->at[i + 1] : span) / span;
        double m = u->mem[i] < 0 ? 0 : u->mem[i] > 1 ? 1 : u->mem[i];
        if (m > 0)
            tp__buf_printf(out, "M%.1f %.1fH%.1fV%.1fH%.1fZ", x0, y + USE_H, x1,
                           y + USE_H - m * USE_H, x0);
    }
    tp__buf_puts(out,
                 "\"/>\n<polyline fill=\"none\" stroke=\"#f28e2b\" stroke-width=\"1\" points=\"");
    for (size_t i = 0; i < u->n; i++) {
        double x0 = left + plot_w * u->at[i] / span;
        double x1 = left + plot_w * (i + 1 < u->n ? u->at[i + 1] : span) / span;
        double c = u->compute[i] < 0 ? 0 : u->compute[i] > 1 ? 1 : u->compute[i];
        tp__buf_printf(out, "%.1f,%.1f %.1f,%.1f ", x0, y + USE_H - c * USE_H, x1,
                       y + USE_H - c * USE_H);
    }
    tp__buf_puts(out, "\"/>\n");
}

void tp__chart_gantt(tp_buf_t *out, const tp_gantt_t *g) {
    size_t shown = g->max_bands && g->nbands > g->max_bands ? g->max_bands : g->nbands;
    unsigned *lanes = tp__xcalloc(shown + 1, sizeof *lanes);
    unsigned char *used = tp__xcalloc(g->nlegend + 1, 1);
    for (size_t i = 0; i < g->nbars; i++) {
        const tp_gantt_bar_t *b = &g->bars[i];
        if (b->band < shown && b->lane + 1 > lanes[b->band]) lanes[b->band] = b->lane + 1;
        if (b->colour < g->nlegend) used[b->colour] = 1;
    }
    const double left = 150, right = 30, top = 56, plot_w = 1000;
    const double strip = g->use ? USE_H + 2 : 0;
    double *band_y = tp__xcalloc(shown + 1, sizeof *band_y);
    double y = top;
    for (size_t b = 0; b < shown; b++) {
        band_y[b] = y;
        y += (lanes[b] ? lanes[b] : 1) * LANE_H + strip + BAND_GAP;
    }
    double plot_bottom = y;
    size_t nlegend = 0;
    for (size_t c = 0; c < g->nlegend; c++)
        nlegend += used[c];
    double width = left + plot_w + right;
    double height = plot_bottom + 40 + 22.0 * (double)((nlegend + 4) / 5) + (g->use ? 22 : 0) + 10;
    double span = g->span > 0 ? g->span : 1;
    int minutes = span >= 600;
    double unit = minutes ? 60 : 1;

    tp__chart_open(out, width, height);
    tp__chart_titles(out, left, g->title, g->subtitle);
    if (shown < g->nbands)
        tp__buf_printf(out,
                       "<text x=\"%.0f\" y=\"22\" text-anchor=\"end\" fill=\"#444\">first %zu "
                       "of %zu GPUs shown</text>\n",
                       left + plot_w, shown, g->nbands);
    double step = tp__chart_tick_step(span / unit) * unit;
    tp__buf_puts(out, "<g stroke=\"#ddd\" stroke-width=\"1\">\n");
    for (double t = 0; t <= span + 1e-9; t += step)
        tp__buf_printf(out, "<line x1=\"%.2f\" y1=\"%.1f\" x2=\"%.2f\" y2=\"%.1f\"/>\n",
                       left + plot_w * t / span, top - 4, left + plot_w * t / span, plot_bottom);
    tp__buf_puts(out, "</g>\n<g text-anchor=\"middle\" fill=\"#222\">\n");
    for (double t = 0; t <= span + 1e-9; t += step)
        tp__buf_printf(out, "<text x=\"%.2f\" y=\"%.1f\">%g</text>\n", left + plot_w * t / span,
                       plot_bottom + 14, t / unit);
    tp__buf_printf(out, "<text x=\"%.1f\" y=\"%.1f\">time (%s)</text>\n</g>\n", left + plot_w / 2,
                   plot_bottom + 30, minutes ? "minutes" : "seconds");
    tp__buf_printf(out, "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"#222\"/>\n",
                   left, plot_bottom, left + plot_w, plot_bottom);
    tp__buf_puts(out, "<g text-anchor=\"end\" fill=\"#222\">\n");
    for (size_t b = 0; b < shown; b++) {
        double h = (lanes[b] ? lanes[b] : 1) * LANE_H;
        tp__buf_printf(out,
                       "<rect x=\"%.1f\" y=\"%.1f\" width=\"%.1f\" height=\"%.1f\" fill=\"%s\"/>\n",
                       left, band_y[b], plot_w, h, b % 2 ? "#f4f4f4" : "#fafafa");
        tp__buf_printf(out, "<text x=\"%.1f\" y=\"%.1f\">", left - 6, band_y[b] + h / 2 + 4);
        tp__chart_xml(out, g->band_label[b]);
        tp__buf_puts(out, "</text>\n");
        if (g->use) use_strip(out, &g->use[b], left, plot_w, span, band_y[b] + h + 1);
    }
    tp__buf_puts(out, "</g>\n<g stroke=\"white\" stroke-width=\"0.4\">\n");
    for (size_t i = 0; i < g->nbars; i++) {
        const tp_gantt_bar_t *b = &g->bars[i];
        if (b->band >= shown) continue;
        double x0 = left + plot_w * b->start / span, x1 = left + plot_w * b->end / span;
        tp__buf_printf(out, "<rect x=\"%.2f\" y=\"%.1f\" width=\"%.2f\" height=\"%d\" fill=\"%s\">",
                       x0, band_y[b->band] + b->lane * LANE_H, x1 - x0 > 0.3 ? x1 - x0 : 0.3,
                       LANE_H - 1, tp__chart_colour(b->colour));
        if (b->title) {
            tp__buf_puts(out, "<title>");
            tp__chart_xml(out, b->title);
            tp__buf_puts(out, "</title>");
        }
        tp__buf_puts(out, "</rect>\n");
    }
    tp__buf_puts(out, "</g>\n<g fill=\"#222\">\n");
    size_t k = 0;
    for (size_t c = 0; c < g->nlegend; c++) {
        if (!used[c]) continue;
        double lx = left + 190.0 * (double)(k % 5), ly = plot_bottom + 44 + 22.0 * (double)(k / 5);
        tp__buf_printf(out,
                       "<rect x=\"%.1f\" y=\"%.1f\" width=\"14\" height=\"11\" fill=\"%s\"/>"
                       "<text x=\"%.1f\" y=\"%.1f\">",
                       lx, ly, tp__chart_colour(c), lx + 20, ly + 10);
        tp__chart_xml(out, g->legend[c]);
        tp__buf_puts(out, "</text>\n");
        k++;
    }
    if (g->use) {
        double ly = plot_bottom + 44 + 22.0 * (double)((k + 4) / 5);
        tp__buf_printf(
            out,
            "<rect x=\"%.1f\" y=\"%.1f\" width=\"14\" height=\"11\" fill=\"#9fb3d1\"/>"
            "<text x=\"%.1f\" y=\"%.1f\">memory in use (the strip under each GPU)</text>"
            "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"#f28e2b\" "
            "stroke-width=\"2\"/><text x=\"%.1f\" y=\"%.1f\">compute share in use</text>\n",
            left, ly, left + 20, ly + 10, left + 280, ly + 6, left + 294, ly + 6, left + 300,
            ly + 10);
    }
    tp__buf_puts(out, "</g>\n</svg>\n");
    free(band_y);
    free(lanes);
    free(used);
}
