/* front: the Pareto front of several objectives, as one scatter (two
 * objectives) or the lower triangle of a scatter matrix (more), every point
 * a link to its trial with its values as a tooltip. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "chart/chart.h"
#include "chart/chart_internal.h"

/* Beyond THIN_ABOVE points of a kind in all the plots, one per square of a plot: the
 * front's FRONT_PX wide, the others' as wide as keeps all the plots together
 * under about DRAWN_MAX of them; every point when fewer (equal ones too). */
enum { THIN_ABOVE = 1000, DRAWN_MAX = 2000, FRONT_PX = 2 };

typedef struct cell {
    double x0, y0, w, h; /* the plot's box */
    size_t cx, cy;       /* objectives on x and y */
} cell_t;

typedef struct ranges {
    double lo[TP_FRONT_MAX], hi[TP_FRONT_MAX];
} ranges_t;

static double px(const cell_t *c, const ranges_t *r, double v) {
    return c->x0 + c->w * (v - r->lo[c->cx]) / (r->hi[c->cx] - r->lo[c->cx]);
}
static double py(const cell_t *c, const ranges_t *r, double v) {
    return c->y0 + c->h - c->h * (v - r->lo[c->cy]) / (r->hi[c->cy] - r->lo[c->cy]);
}

/* "err (min)": an axis's name and which way is better. */
static void axis_name(tp_buf_t *out, const tp_front_chart_t *p, size_t j) {
    tp__chart_xml(out, p->name[j]);
    tp__buf_puts(out, p->maximize[j] ? " (max)" : " (min)");
}

/* The box, the grid, and tick labels on the sides that face out. */
static void frame(tp_buf_t *out, const tp_front_chart_t *p, const cell_t *c, const ranges_t *r,
                  int x_ticks, int y_ticks) {
    double xlo = r->lo[c->cx], xhi = r->hi[c->cx], ylo = r->lo[c->cy], yhi = r->hi[c->cy];
    double xs = tp__chart_tick_step(xhi - xlo), ys = tp__chart_tick_step(yhi - ylo);
    if (c->w < 400) xs *= 2;
    if (c->h < 300) ys *= 2;
    tp__buf_puts(out, "<g stroke=\"#e4e4e4\">\n");
    for (double v = ceil(xlo / xs) * xs; v <= xhi + 1e-9 * xs; v += xs)
        tp__buf_printf(out, "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\"/>\n",
                       px(c, r, v), c->y0, px(c, r, v), c->y0 + c->h);
    for (double v = ceil(ylo / ys) * ys; v <= yhi + 1e-9 * ys; v += ys)
        tp__buf_printf(out, "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\"/>\n", c->x0,
                       py(c, r, v), c->x0 + c->w, py(c, r, v));
    tp__buf_printf(out,
                   "</g>\n<rect x=\"%.1f\" y=\"%.1f\" width=\"%.1f\" height=\"%.1f\" "
                   "fill=\"none\" stroke=\"#222\"/>\n<g fill=\"#222\" text-anchor=\"middle\">\n",
                   c->x0, c->y0, c->w, c->h);
    for (double v = ceil(xlo / xs) * xs; x_ticks && v <= xhi + 1e-9 * xs; v += xs) {
        tp__buf_printf(out, "<text x=\"%.1f\" y=\"%.1f\">", px(c, r, v), c->y0 + c->h + 14);
        tp__chart_tick_text(out, v);
        tp__buf_puts(out, "</text>\n");
    }
    if (x_ticks) {
        tp__buf_printf(out, "<text x=\"%.1f\" y=\"%.1f\" font-weight=\"bold\">", c->x0 + c->w / 2,
                       c->y0 + c->h + 32);
        axis_name(out, p, c->cx);
        tp__buf_puts(out, "</text>\n");
    }
    tp__buf_puts(out, "</g>\n<g fill=\"#222\" text-anchor=\"end\">\n");
    for (double v = ceil(ylo / ys) * ys; y_ticks && v <= yhi + 1e-9 * ys; v += ys) {
        tp__buf_printf(out, "<text x=\"%.1f\" y=\"%.1f\">", c->x0 - 5, py(c, r, v) + 4);
        tp__chart_tick_text(out, v);
        tp__buf_puts(out, "</text>\n");
    }
    tp__buf_puts(out, "</g>\n");
    if (y_ticks) {
        double x = c->x0 - 62, y = c->y0 + c->h / 2;
        tp__buf_printf(out,
                       "<text x=\"%.1f\" y=\"%.1f\" transform=\"rotate(-90 %.1f %.1f)\" "
                       "text-anchor=\"middle\" font-weight=\"bold\" fill=\"#222\">",
                       x, y, x, y);
        axis_name(out, p, c->cy);
        tp__buf_puts(out, "</text>\n");
    }
}

/* Whether the thinning square of (x, y) in c is still free; takes it. */
static int take(unsigned char *grid, size_t gw, size_t gh, const cell_t *c, double x, double y,
                double side) {
    size_t gx = (size_t)fmax(0, (x - c->x0) / side), gy = (size_t)fmax(0, (y - c->y0) / side);
    if (gx >= gw) gx = gw - 1;
    if (gy >= gh) gy = gh - 1;
    if (grid[gy * gw + gx]) return 0;
    grid[gy * gw + gx] = 1;
    return 1;
}

enum { DOMINATED, INFEASIBLE, FRONT };
static const char *const KIND[] = {"dominated", "infeasible", "on the Pareto front"};
static const char *const KIND_CLASS[] = {"dominated", "infeasible", "front"};

static int kind_of(const tp_front_chart_t *p, size_t i) {
    if (p->feasible && !p->feasible[i]) return INFEASIBLE;
    return p->on_front[i] ? FRONT : DOMINATED;
}

/* One point: a link around its mark, with its id and values as a tooltip. */
static void point(tp_buf_t *out, const tp_front_chart_t *p, size_t i, int kind, double x,
                  double y) {
    if (p->href_prefix) {
        tp__buf_puts(out, "<a href=\"");
        tp__chart_xml(out, p->href_prefix);
        tp__buf_printf(out, "%lld\" class=\"%s\" data-trial=\"%lld\">", p->id[i], KIND_CLASS[kind],
                       p->id[i]);
    } else {
        tp__buf_printf(out, "<g class=\"%s\" data-trial=\"%lld\">", KIND_CLASS[kind], p->id[i]);
    }
    if (kind == INFEASIBLE)
        tp__buf_printf(out, "<path d=\"M%.1f %.1fl6 6m0 -6l-6 6\"/>", x - 3, y - 3);
    else
        tp__buf_printf(out, "<circle cx=\"%.1f\" cy=\"%.1f\" r=\"%s\"/>", x, y,
                       kind == FRONT ? "4.5" : "2.8");
    tp__buf_printf(out, "<title>trial %lld:", p->id[i]);
    for (size_t j = 0; j < p->m; j++) {
        tp__buf_puts(out, " ");
        tp__chart_xml(out, p->name[j]);
        tp__buf_printf(out, "=%.6g", p->v[i * p->m + j]);
    }
    tp__buf_printf(out, " (%s)</title>%s\n", KIND[kind], p->href_prefix ? "</a>" : "</g>");
}

/* The front's points sorted by the x objective (then y). */
typedef struct by_xy {
    const double *v;
    size_t m, cx, cy;
} by_xy_t;
static int cmp_xy(const void *a, const void *b, void *ctx) {
    const by_xy_t *k = ctx;
    const double *p = k->v + *(const size_t *)a * k->m, *q = k->v + *(const size_t *)b * k->m;
    if (p[k->cx] != q[k->cx]) return p[k->cx] < q[k->cx] ? -1 : 1;
    return (p[k->cy] > q[k->cy]) - (p[k->cy] < q[k->cy]);
}

/* Two objectives: the line that bounds what the front dominates, through
 * each front point and, between two, the corner worse than both in each
 * objective (the larger value of one minimized, the smaller of one
 * maximized). */
static void front_line(tp_buf_t *out, const tp_front_chart_t *p, const cell_t *c,
                       const ranges_t *r) {
    size_t *f = tp__xmalloc((p->n ? p->n : 1) * sizeof *f), nf = 0;
    for (size_t i = 0; i < p->n; i++)
        if (kind_of(p, i) == FRONT) f[nf++] = i;
    by_xy_t k = {p->v, p->m, c->cx, c->cy};
    qsort_r(f, nf, sizeof *f, cmp_xy, &k);
    tp__buf_printf(out,
                   "<polyline class=\"front-line\" fill=\"none\" stroke=\"%s\" "
                   "stroke-width=\"1.5\" points=\"",
                   tp__chart_colour(2));
    for (size_t a = 0; a < nf; a++) {
        const double *q = p->v + f[a] * p->m;
        if (a > 0) {
            const double *o = p->v + f[a - 1] * p->m;
            double cxv = p->maximize[c->cx] ? fmin(o[c->cx], q[c->cx]) : fmax(o[c->cx], q[c->cx]);
            double cyv = p->maximize[c->cy] ? fmin(o[c->cy], q[c->cy]) : fmax(o[c->cy], q[c->cy]);
            tp__buf_printf(out, "%.1f,%.1f ", px(c, r, cxv), py(c, r, cyv));
        }
        tp__buf_printf(out, "%.1f,%.1f ", px(c, r, q[c->cx]), py(c, r, q[c->cy]));
    }
    tp__buf_puts(out, "\"><title>the Pareto front: what lies beyond it is dominated</title>"
                      "</polyline>\n");
    free(f);
}

/* One plot: its frame, then the dominated, infeasible and front points,
 * each kind thinned to its squares. */
static void plot(tp_buf_t *out, const tp_front_chart_t *p, const cell_t *c, const ranges_t *r,
                 size_t nplots, int x_ticks, int y_ticks) {
    frame(out, p, c, r, x_ticks, y_ticks);
    if (p->m == 2) front_line(out, p, c, r);
    size_t of_kind[FRONT + 1] = {0};
    for (size_t i = 0; i < p->n; i++)
        of_kind[kind_of(p, i)]++;
    for (int kind = DOMINATED; kind <= FRONT; kind++) {
        double side =
            kind == FRONT ? FRONT_PX : fmax(4, sqrt(c->w * c->h * (double)nplots / DRAWN_MAX));
        int thin = of_kind[kind] * nplots > THIN_ABOVE;
        size_t gw = (size_t)(c->w / side) + 1, gh = (size_t)(c->h / side) + 1;
        unsigned char *grid = tp__xcalloc(gw * gh, 1);
        if (kind == INFEASIBLE)
            tp__buf_puts(out, "<g fill=\"none\" stroke=\"#888\" stroke-width=\"1.5\">\n");
        else if (kind == FRONT)
            tp__buf_printf(out, "<g fill=\"%s\" stroke=\"#222\" stroke-width=\"0.8\">\n",
                           tp__chart_colour(2));
        else
            tp__buf_printf(out, "<g fill=\"%s\" fill-opacity=\"0.6\">\n", tp__chart_colour(0));
        for (size_t i = 0; i < p->n; i++) {
            if (kind_of(p, i) != kind) continue;
            double x = px(c, r, p->v[i * p->m + c->cx]), y = py(c, r, p->v[i * p->m + c->cy]);
            if (!thin || take(grid, gw, gh, c, x, y, side)) point(out, p, i, kind, x, y);
        }
        tp__buf_puts(out, "</g>\n");
        free(grid);
    }
}

static void legend(tp_buf_t *out, const tp_front_chart_t *p, double x, double y) {
    int any_infeasible = 0;
    for (size_t i = 0; p->feasible && i < p->n; i++)
        any_infeasible |= !p->feasible[i];
    tp__buf_printf(out,
                   "<g fill=\"#222\"><circle cx=\"%.1f\" cy=\"%.1f\" r=\"4.5\" fill=\"%s\" "
                   "stroke=\"#222\" stroke-width=\"0.8\"/><text x=\"%.1f\" y=\"%.1f\">on the "
                   "Pareto front (no trial is better in every objective)</text>\n",
                   x + 5, y, tp__chart_colour(2), x + 16, y + 4);
    tp__buf_printf(out,
                   "<circle cx=\"%.1f\" cy=\"%.1f\" r=\"2.8\" fill=\"%s\" fill-opacity=\"0.6\"/>"
                   "<text x=\"%.1f\" y=\"%.1f\">dominated (another trial is better in every "
                   "objective)</text>\n",
                   x + 5, y + 18, tp__chart_colour(0), x + 16, y + 22);
    if (any_infeasible)
        tp__buf_printf(out,
                       "<path d=\"M%.1f %.1fl6 6m0 -6l-6 6\" stroke=\"#888\" "
                       "stroke-width=\"1.5\"/><text x=\"%.1f\" y=\"%.1f\">infeasible (breaks a "
                       "constraint: on no front)</text>\n",
                       x + 2, y + 33, x + 16, y + 40);
    tp__buf_puts(out, "</g>\n");
}

void tp__chart_front(tp_buf_t *out, const tp_front_chart_t *p) {
    size_t m = p->m < TP_FRONT_MAX ? p->m : TP_FRONT_MAX;
    ranges_t r;
    for (size_t j = 0; j < m; j++) {
        r.lo[j] = INFINITY, r.hi[j] = -INFINITY;
        for (size_t i = 0; i < p->n; i++)
            r.lo[j] = fmin(r.lo[j], p->v[i * p->m + j]),
            r.hi[j] = fmax(r.hi[j], p->v[i * p->m + j]);
        tp__chart_fit_range(&r.lo[j], &r.hi[j]);
        double pad = (r.hi[j] - r.lo[j]) * 0.03; /* the marks at the ends stay inside */
        r.lo[j] -= pad, r.hi[j] += pad;
    }
    const double left = 90, top = 56, gap = 14;
    size_t k = m > 1 ? m - 1 : 1; /* rows and columns of plots */
    double w = m <= 2 ? 820 : fmax(170, fmin(360, 820.0 / (double)k - gap));
    double h = m <= 2 ? 420 : w;
    double width = left + (double)k * (w + gap) + 20;
    double height = top + (double)k * (h + gap) + 46 + (m <= 2 ? 50 : 0);
    tp__chart_open(out, width, height);
    tp__chart_titles(out, left, p->title, p->subtitle);
    for (size_t row = 1; row < m; row++)
        for (size_t col = 0; col < row; col++) {
            cell_t c = {.x0 = left + (double)col * (w + gap),
                        .y0 = top + (double)(row - 1) * (h + gap),
                        .w = w,
                        .h = h,
                        .cx = col,
                        .cy = row};
            plot(out, p, &c, &r, m * (m - 1) / 2, row == m - 1, col == 0);
        }
    if (m <= 2)
        legend(out, p, left, top + h + 52);
    else /* the empty upper right of the triangle */
        legend(out, p, left + w + gap + 10, top + 10);
    tp__buf_puts(out, "</svg>\n");
}
