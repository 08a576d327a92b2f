/* lanes: population-based training's lineage over its budget. Each member
 * is a horizontal lane, its segments (its runs between exploits) drawn as
 * pieces coloured by its metric, and each exploit an arrow from the donor's
 * lane to the recipient's at the step the donor's checkpoint was copied. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "chart/chart.h"
#include "chart/chart_internal.h"

enum { LANE_GAP = 26, PIECE_W = 8, SHADES = 12 };

void tp__chart_lanes(tp_buf_t *out, const tp_lanes_t *p) {
    const double left = 90, top = 70, plot_w = 720, right = 30;
    double xmax = p->xmax > 0 ? p->xmax : 1, height = top + LANE_GAP * (double)p->nlanes + 50;
    tp__chart_open(out, left + plot_w + right, height);
    tp__chart_titles(out, 20, p->title, p->subtitle);
#define PX(v) (left + (v) / xmax * plot_w)
#define LY(l) (top + LANE_GAP * ((double)(l) + 0.5))
    tp__buf_puts(out, "<defs><marker id=\"lineage-arrow\" viewBox=\"0 0 10 10\" refX=\"9\" "
                      "refY=\"5\" markerWidth=\"7\" markerHeight=\"7\" orient=\"auto\">"
                      "<path d=\"M0,0 L10,5 L0,10 z\" fill=\"#222\"/></marker></defs>\n");
    double step = tp__chart_tick_step(xmax), bottom = top + LANE_GAP * (double)p->nlanes;
    for (double t = 0; t <= xmax + step * 1e-9; t += step) {
        tp__buf_printf(out,
                       "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"#eee\"/>\n"
                       "<text x=\"%.1f\" y=\"%.1f\" text-anchor=\"middle\" fill=\"#444\">",
                       PX(t), top, PX(t), bottom, PX(t), bottom + 14);
        tp__chart_tick_text(out, t);
        tp__buf_puts(out, "</text>\n");
    }
    tp__buf_printf(out, "<text x=\"%.1f\" y=\"%.1f\" text-anchor=\"middle\" fill=\"#222\">",
                   left + plot_w / 2, bottom + 34);
    tp__chart_xml(out, p->xlabel ? p->xlabel : "step");
    tp__buf_puts(out, "</text>\n");
    for (size_t l = 0; l < p->nlanes; l++) {
        double y = LY(l);
        tp__buf_printf(out,
                       "<g class=\"lane\" data-trial=\"%lld\">\n<text x=\"%.1f\" y=\"%.1f\" "
                       "text-anchor=\"end\" fill=\"#222\">",
                       p->id[l], left - 8, y + 4);
        tp__chart_xml(out, p->label[l]);
        tp__buf_printf(out,
                       "</text>\n<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" "
                       "stroke=\"#ddd\"/>\n",
                       left, y, left + plot_w, y);
        for (size_t k = 0; k < p->nsegs; k++) {
            const tp_lane_segment_t *s = &p->segs[k];
            if (s->lane != l) continue;
            tp__buf_printf(out, "<g class=\"segment\" data-segment=\"%d\">", s->segment);
            if (s->title) {
                tp__buf_puts(out, "<title>");
                tp__chart_xml(out, s->title);
                tp__buf_puts(out, "</title>");
            }
            /* SHADES levels of colour: pieces of one level in a row are drawn as one */
            for (size_t i = 1, j; i < s->n; i = j) {
                char c[8] = "#999999", next[8];
                if (isfinite(s->shade[i])) tp__chart_shade(round(s->shade[i] * SHADES) / SHADES, c);
                for (j = i + 1; j < s->n; j++) {
                    snprintf(next, sizeof next, "#999999");
                    if (isfinite(s->shade[j]))
                        tp__chart_shade(round(s->shade[j] * SHADES) / SHADES, next);
                    if (strcmp(next, c) != 0) break;
                }
                tp__buf_printf(out,
                               "<line class=\"piece\" x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" "
                               "y2=\"%.1f\" stroke=\"%s\" stroke-width=\"%d\"/>",
                               PX(s->x[i - 1]), y, PX(s->x[j - 1]), y, c, PIECE_W);
            }
            /* a segment's start, so that one piece after another shows where it began */
            if (s->n)
                tp__buf_printf(out,
                               "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" "
                               "stroke=\"#222\"/>",
                               PX(s->x[0]), y - PIECE_W / 2 - 2, PX(s->x[0]), y + PIECE_W / 2 + 2);
            tp__buf_puts(out, "</g>\n");
        }
        tp__buf_puts(out, "</g>\n");
    }
    for (size_t a = 0; a < p->narrows; a++) {
        const tp_lane_arrow_t *w = &p->arrows[a];
        double y0 = LY(w->from), y1 = LY(w->to), dir = y1 > y0 ? 1 : -1;
        tp__buf_printf(out, "<g class=\"exploit\" data-trial=\"%lld\" data-donor=\"%lld\">",
                       p->id[w->to], p->id[w->from]);
        if (w->title) {
            tp__buf_puts(out, "<title>");
            tp__chart_xml(out, w->title);
            tp__buf_puts(out, "</title>");
        }
        tp__buf_printf(out,
                       "<circle cx=\"%.1f\" cy=\"%.1f\" r=\"3\" fill=\"#222\"/>"
                       "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"#222\" "
                       "stroke-width=\"1.5\" marker-end=\"url(#lineage-arrow)\"/>"
                       /* a wide clear line: the arrow's tooltip is easy to point at */
                       "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"#000\" "
                       "stroke-opacity=\"0\" stroke-width=\"8\"/></g>\n",
                       PX(w->x), y0, PX(w->x), y0, PX(w->x), y1 - dir * (PIECE_W / 2 + 1), PX(w->x),
                       y0, PX(w->x), y1);
    }
#undef PX
#undef LY
    tp__buf_puts(out, "</svg>\n");
}
