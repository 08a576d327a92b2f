/* plot: x/y charts (dots, lines, steps), parallel coordinates and
 * horizontal bars, in the Gantt chart's style. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "chart/chart.h"
#include "chart/chart_internal.h"

/* See chart_internal.h. */
void tp__chart_fit_range(double *lo, double *hi) {
    if (!isfinite(*lo) || !isfinite(*hi)) *lo = 0, *hi = 1;
    if (*hi - *lo < 1e-12) {
        double pad = fabs(*lo) > 1e-12 ? fabs(*lo) * 0.05 : 0.5;
        *lo -= pad;
        *hi += pad;
    }
}

/* See chart_internal.h. */
void tp__chart_tick_text(tp_buf_t *out, double v) {
    char t[32];
    snprintf(t, sizeof t, "%.4g", fabs(v) < 1e-12 ? 0.0 : v);
    tp__buf_puts(out, t);
}

void tp__chart_xy(tp_buf_t *out, const tp_xy_t *p) {
    const double left = 70, right = 30, top = 56, plot_w = 820, plot_h = 300;
    double xlo = INFINITY, xhi = -INFINITY, ylo = INFINITY, yhi = -INFINITY;
    size_t named = 0;
    for (size_t s = 0; s < p->nseries; s++) {
        const tp_series_t *se = &p->series[s];
        named += se->name != NULL;
        for (size_t i = 0; i < se->n; i++) {
            if (!isfinite(se->x[i]) || !isfinite(se->y[i])) continue;
            xlo = fmin(xlo, se->x[i]), xhi = fmax(xhi, se->x[i]);
            ylo = fmin(ylo, se->y[i]), yhi = fmax(yhi, se->y[i]);
        }
    }
    for (size_t i = 0; i < p->nvlines; i++)
        if (isfinite(p->vlines[i])) xlo = fmin(xlo, p->vlines[i]), xhi = fmax(xhi, p->vlines[i]);
    tp__chart_fit_range(&xlo, &xhi);
    tp__chart_fit_range(&ylo, &yhi);
    double legend_h = p->legend && named ? 22.0 * (double)((named + 3) / 4) : 0;
    double width = left + plot_w + right, height = top + plot_h + 44 + legend_h + 6;
    tp__chart_open(out, width, height);
    tp__chart_titles(out, left, p->title, p->subtitle);
#define PX(v) (left + plot_w * ((v)-xlo) / (xhi - xlo))
#define PY(v) (top + plot_h - plot_h * ((v)-ylo) / (yhi - ylo))
    double xs = tp__chart_tick_step(xhi - xlo), ys = tp__chart_tick_step(yhi - ylo);
    tp__buf_puts(out, "<g stroke=\"#ddd\" stroke-width=\"1\">\n");
    for (double v = ceil(xlo / xs) * xs; v <= xhi + 1e-9 * xs; v += xs)
        tp__buf_printf(out, "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\"/>\n", PX(v), top,
                       PX(v), top + plot_h);
    for (double v = ceil(ylo / ys) * ys; v <= yhi + 1e-9 * ys; v += ys)
        tp__buf_printf(out, "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\"/>\n", left,
                       PY(v), left + plot_w, PY(v));
    tp__buf_puts(out, "</g>\n<g fill=\"#222\" text-anchor=\"middle\">\n");
    for (double v = ceil(xlo / xs) * xs; v <= xhi + 1e-9 * xs; v += xs) {
        tp__buf_printf(out, "<text x=\"%.1f\" y=\"%.1f\">", PX(v), top + plot_h + 14);
        tp__chart_tick_text(out, v);
        tp__buf_puts(out, "</text>\n");
    }
    tp__buf_printf(out, "<text x=\"%.1f\" y=\"%.1f\">", left + plot_w / 2, top + plot_h + 32);
    tp__chart_xml(out, p->xlabel);
    tp__buf_puts(out, "</text>\n</g>\n<g fill=\"#222\" text-anchor=\"end\">\n");
    for (double v = ceil(ylo / ys) * ys; v <= yhi + 1e-9 * ys; v += ys) {
        tp__buf_printf(out, "<text x=\"%.1f\" y=\"%.1f\">", left - 6, PY(v) + 4);
        tp__chart_tick_text(out, v);
        tp__buf_puts(out, "</text>\n");
    }
    tp__buf_printf(out,
                   "</g>\n<text x=\"14\" y=\"%.1f\" transform=\"rotate(-90 14 %.1f)\" "
                   "text-anchor=\"middle\" fill=\"#222\">",
                   top + plot_h / 2, top + plot_h / 2);
    tp__chart_xml(out, p->ylabel);
    tp__buf_puts(out, "</text>\n");
    for (size_t i = 0; i < p->nvlines; i++)
        tp__buf_printf(out,
                       "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"#999\" "
                       "stroke-dasharray=\"4 3\"/>\n",
                       PX(p->vlines[i]), top, PX(p->vlines[i]), top + plot_h);
    for (size_t s = 0; s < p->nseries; s++) {
        const tp_series_t *se = &p->series[s];
        const char *c = tp__chart_colour(se->colour);
        if (se->style == TP_SERIES_DOTS) {
            tp__buf_printf(out, "<g fill=\"%s\" fill-opacity=\"0.75\">\n", c);
            for (size_t i = 0; i < se->n; i++)
                if (isfinite(se->x[i]) && isfinite(se->y[i]))
                    tp__buf_printf(out, "<circle cx=\"%.1f\" cy=\"%.1f\" r=\"2.5\"/>\n",
                                   PX(se->x[i]), PY(se->y[i]));
            tp__buf_puts(out, "</g>\n");
            continue;
        }
        tp__buf_printf(out, "<polyline fill=\"none\" stroke=\"%s\" stroke-width=\"1.5\" points=\"",
                       c);
        double last_y = NAN;
        for (size_t i = 0; i < se->n; i++) {
            if (!isfinite(se->x[i]) || !isfinite(se->y[i])) continue;
            if (se->style == TP_SERIES_STEPS && isfinite(last_y))
                tp__buf_printf(out, "%.1f,%.1f ", PX(se->x[i]), PY(last_y));
            tp__buf_printf(out, "%.1f,%.1f ", PX(se->x[i]), PY(se->y[i]));
            last_y = se->y[i];
        }
        tp__buf_puts(out, "\">");
        if (se->name) {
            tp__buf_puts(out, "<title>");
            tp__chart_xml(out, se->name);
            tp__buf_puts(out, "</title>");
        }
        tp__buf_puts(out, "</polyline>\n");
    }
    tp__buf_printf(out,
                   "<rect x=\"%.1f\" y=\"%.1f\" width=\"%.1f\" height=\"%.1f\" fill=\"none\" "
                   "stroke=\"#222\"/>\n",
                   left, top, plot_w, plot_h);
    if (p->legend) {
        size_t k = 0;
        for (size_t s = 0; s < p->nseries; s++) {
            if (!p->series[s].name) continue;
            double lx = left + 205.0 * (double)(k % 4),
                   ly = top + plot_h + 44 + 22.0 * (double)(k / 4);
            tp__buf_printf(out,
                           "<rect x=\"%.1f\" y=\"%.1f\" width=\"14\" height=\"11\" fill=\"%s\"/>"
                           "<text x=\"%.1f\" y=\"%.1f\" fill=\"#222\">",
                           lx, ly, tp__chart_colour(p->series[s].colour), lx + 20, ly + 10);
            tp__chart_xml(out, p->series[s].name);
            tp__buf_puts(out, "</text>\n");
            k++;
        }
    }
#undef PX
#undef PY
    tp__buf_puts(out, "</svg>\n");
}

void tp__chart_shade(double s, char out[8]) {
    s = s < 0 ? 0 : s > 1 ? 1 : s;
    int r = s < 0.5 ? 220 : (int)(220 - (s - 0.5) * 2 * 170);
    int g = s < 0.5 ? (int)(60 + s * 2 * 140) : 200;
    snprintf(out, 8, "#%02x%02x%02x", r, g, 60);
}

void tp__chart_parcoords(tp_buf_t *out, const tp_parcoords_t *p) {
    const double left = 60, right = 60, top = 80, plot_h = 300;
    double gap = p->naxes > 1 ? 820.0 / (double)(p->naxes - 1) : 0;
    double width = left + gap * (double)(p->naxes > 1 ? p->naxes - 1 : 0) + right;
    if (width < 500) width = 500;
    double height = top + plot_h + 40;
    tp__chart_open(out, width, height);
    tp__chart_titles(out, left, p->title, p->subtitle);
    for (size_t l = 0; l < p->nlines; l++) {
        char c[8];
        tp__chart_shade(p->shade[l], c);
        tp__buf_printf(out, "<polyline fill=\"none\" stroke=\"%s\" stroke-opacity=\"0.55\" ", c);
        if (p->key) {
            tp__buf_printf(out, "data-id=\"%lld\" data-v=\"", p->id ? p->id[l] : (long long)l);
            for (size_t a = 0; a < p->naxes; a++) {
                double v = p->v[l * p->naxes + a];
                tp__buf_printf(out, isfinite(v) ? "%s%.4f" : "%snan", a ? " " : "", v);
            }
            tp__buf_puts(out, "\" ");
        }
        tp__buf_puts(out, "points=\"");
        for (size_t a = 0; a < p->naxes; a++) {
            double v = p->v[l * p->naxes + a];
            if (isfinite(v))
                tp__buf_printf(out, "%.1f,%.1f ", left + gap * (double)a,
                               top + plot_h - v * plot_h);
        }
        tp__buf_puts(out, "\"/>\n");
    }
    tp__buf_puts(out, "<g fill=\"#222\" text-anchor=\"middle\">\n");
    for (size_t a = 0; a < p->naxes; a++) {
        double x = left + gap * (double)a;
        tp__buf_printf(out,
                       "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"#222\"/>\n",
                       x, top, x, top + plot_h);
        tp__buf_printf(out, "<text x=\"%.1f\" y=\"%.1f\" font-weight=\"bold\">", x, top - 20);
        tp__chart_xml(out, p->axis[a]);
        tp__buf_puts(out, "</text>\n");
        if (p->ticks && p->ticks[a]) {
            size_t n = p->nticks[a];
            for (size_t k = 0; k < n; k++) {
                double y = top + plot_h - (n > 1 ? (double)k / (double)(n - 1) : 0.5) * plot_h;
                tp__buf_printf(out, "<text x=\"%.1f\" y=\"%.1f\" text-anchor=\"start\">", x + 4,
                               y + 4);
                tp__chart_xml(out, p->ticks[a][k]);
                tp__buf_puts(out, "</text>\n");
            }
        } else {
            tp__buf_printf(out, "<text x=\"%.1f\" y=\"%.1f\">", x, top + plot_h + 14);
            tp__chart_tick_text(out, p->lo[a]);
            tp__buf_printf(out, "</text>\n<text x=\"%.1f\" y=\"%.1f\">", x, top - 6);
            tp__chart_tick_text(out, p->hi[a]);
            tp__buf_puts(out, "</text>\n");
        }
    }
    tp__buf_puts(out, "</g>\n");
    for (size_t a = 0; p->key && a < p->naxes; a++) {
        if (!p->key[a]) continue;
        tp__buf_printf(out,
                       "<rect class=\"brush-axis\" x=\"%.1f\" y=\"%.1f\" width=\"16\" "
                       "height=\"%.1f\" fill=\"#000\" fill-opacity=\"0\" cursor=\"ns-resize\" "
                       "data-axis=\"%zu\" data-lo=\"%.17g\" data-hi=\"%.17g\" data-log=\"%d\" "
                       "data-key=\"",
                       left + gap * (double)a - 8, top, plot_h, a, p->lo[a], p->hi[a],
                       p->logscale ? p->logscale[a] : 0);
        tp__chart_xml(out, p->key[a]);
        if (p->cats && p->cats[a]) {
            tp__buf_puts(out, "\" data-cats=\"");
            tp__chart_xml(out, p->cats[a]);
        }
        tp__buf_puts(out, "\"/>\n");
    }
    tp__buf_puts(out, "</svg>\n");
}

void tp__chart_grid(tp_buf_t *out, const tp_grid_t *g) {
    const double left = 140, top = 64, cell_w = 560.0 / (double)(g->nx ? g->nx : 1),
                 cell_h = 360.0 / (double)(g->ny ? g->ny : 1);
    tp__chart_open(out, left + 560 + 40, top + 360 + 70);
    tp__chart_titles(out, 20, g->title, g->subtitle);
    for (size_t j = 0; j < g->ny; j++)
        for (size_t i = 0; i < g->nx; i++) {
            double s = g->shade[j * g->nx + i];
            if (!isfinite(s)) continue;
            char c[8];
            tp__chart_shade(s, c);
            tp__buf_printf(out,
                           "<rect class=\"cell\" x=\"%.1f\" y=\"%.1f\" width=\"%.1f\" "
                           "height=\"%.1f\" fill=\"%s\">",
                           left + cell_w * (double)i, top + cell_h * (double)(g->ny - 1 - j),
                           cell_w, cell_h, c);
            if (g->tip && g->tip[j * g->nx + i]) {
                tp__buf_puts(out, "<title>");
                tp__chart_xml(out, g->tip[j * g->nx + i]);
                tp__buf_puts(out, "</title>");
            }
            tp__buf_puts(out, "</rect>\n");
        }
    tp__buf_printf(out,
                   "<rect x=\"%.1f\" y=\"%.1f\" width=\"560\" height=\"360\" fill=\"none\" "
                   "stroke=\"#888\"/>\n",
                   left, top);
    for (size_t i = 0; i < g->nx; i++)
        if (g->xtick && g->xtick[i]) {
            tp__buf_printf(out,
                           "<text x=\"%.1f\" y=\"%.1f\" text-anchor=\"middle\" "
                           "font-size=\"10\" fill=\"#444\">",
                           left + cell_w * ((double)i + 0.5), top + 360 + 14);
            tp__chart_xml(out, g->xtick[i]);
            tp__buf_puts(out, "</text>\n");
        }
    for (size_t j = 0; j < g->ny; j++)
        if (g->ytick && g->ytick[j]) {
            tp__buf_printf(out,
                           "<text x=\"%.1f\" y=\"%.1f\" text-anchor=\"end\" font-size=\"10\" "
                           "fill=\"#444\">",
                           left - 6, top + cell_h * ((double)(g->ny - 1 - j) + 0.5) + 4);
            tp__chart_xml(out, g->ytick[j]);
            tp__buf_puts(out, "</text>\n");
        }
    tp__buf_printf(out, "<text x=\"%.1f\" y=\"%.1f\" text-anchor=\"middle\" fill=\"#222\">",
                   left + 280, top + 360 + 40);
    tp__chart_xml(out, g->xlabel);
    tp__buf_printf(out,
                   "</text>\n<text x=\"20\" y=\"%.1f\" fill=\"#222\" "
                   "transform=\"rotate(-90 20 %.1f)\" text-anchor=\"middle\">",
                   top + 180, top + 180);
    tp__chart_xml(out, g->ylabel);
    tp__buf_puts(out, "</text>\n</svg>\n");
}

void tp__chart_hbars(tp_buf_t *out, const tp_hbars_t *p) {
    const double left = 180, top = 56, bar_h = 18, plot_w = 600;
    double height = top + bar_h * (double)p->n + 40;
    tp__chart_open(out, left + plot_w + 80, height);
    tp__chart_titles(out, 20, p->title, p->subtitle);
    for (size_t i = 0; i < p->n; i++) {
        double v = p->value[i] < 0 ? 0 : p->value[i] > 1 ? 1 : p->value[i];
        double y = top + bar_h * (double)i;
        tp__buf_printf(out, "<text x=\"%.1f\" y=\"%.1f\" text-anchor=\"end\" fill=\"#222\">",
                       left - 8, y + 13);
        tp__chart_xml(out, p->label[i]);
        tp__buf_printf(out,
                       "</text>\n<rect x=\"%.1f\" y=\"%.1f\" width=\"%.1f\" height=\"%.1f\" "
                       "fill=\"%s\"/>\n<text x=\"%.1f\" y=\"%.1f\" fill=\"#222\">%.3f</text>\n",
                       left, y + 2, plot_w * v, bar_h - 4, tp__chart_colour(0),
                       left + plot_w * v + 6, y + 13, p->value[i]);
    }
    tp__buf_puts(out, "</svg>\n");
}
