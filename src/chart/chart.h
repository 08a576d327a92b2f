/* chart: SVG 1.1 charts written into a buffer, shared by the simulator's
 * plan (`simulate --svg`) and the dashboard's live pages, so that a simulated
 * plan and a real run look alike and can be compared side by side.
 *
 * Every text that reaches the SVG is XML-escaped here; callers pass plain
 * strings. Nothing is fetched or scripted: tooltips are <title> elements. */
#ifndef TP_CHART_H
#define TP_CHART_H

#include <stddef.h>

#include "util/util.h"

/* Tableau 10: distinct, print-safe. Colour i is tp__chart_colour(i). */
const char *tp__chart_colour(size_t i);
/* Append s to out with &, <, >, " escaped and control bytes dropped. */
void tp__chart_xml(tp_buf_t *out, const char *s);

/* ---- Gantt: one band per GPU, co-located trials in sub-lanes ----------- */
typedef struct tp_gantt_bar {
    size_t band;       /* row: a GPU */
    unsigned lane;     /* sub-lane inside the band */
    double start, end; /* seconds from the chart's origin */
    size_t colour;     /* index into the legend (and the palette) */
    const char *title; /* tooltip, or NULL */
} tp_gantt_bar_t;

/* A band's use over time as steps: from at[i] on, memory and compute are
 * mem[i] and compute[i] (shares of the band's capacity; compute may pass 1). */
typedef struct tp_gantt_use {
    size_t n;
    const double *at, *mem, *compute;
} tp_gantt_use_t;

typedef struct tp_gantt {
    const char *title;    /* first line */
    const char *subtitle; /* second line (figures), or NULL */
    size_t nbands;
    const char *const *band_label; /* nbands labels ("node/gpu0 A100") */
    const tp_gantt_bar_t *bars;
    size_t nbars;
    double span;               /* the time axis: 0 .. span seconds */
    const char *const *legend; /* legend[c] names colour c */
    size_t nlegend;
    const tp_gantt_use_t *use; /* NULL, or nbands strips of memory/compute in use */
    size_t max_bands;          /* bands drawn at most (0: all); the title says when cut */
} tp_gantt_t;

/* The chart as one SVG document. O(bars + bands). */
void tp__chart_gantt(tp_buf_t *out, const tp_gantt_t *g);

/* ---- x/y plots: dots, lines and steps ------------------------------------ */
enum { TP_SERIES_DOTS, TP_SERIES_LINE, TP_SERIES_STEPS };

typedef struct tp_series {
    const char *name; /* legend text and tooltip prefix, or NULL */
    int style;        /* TP_SERIES_* */
    size_t colour;    /* palette index */
    size_t n;
    const double *x, *y; /* n points; non-finite y values are skipped */
} tp_series_t;

typedef struct tp_xy {
    const char *title, *subtitle;
    const char *xlabel, *ylabel;
    const tp_series_t *series;
    size_t nseries;
    const double *vlines; /* vertical marks (rung budgets), or NULL */
    size_t nvlines;
    int legend; /* draw a legend of the named series */
} tp_xy_t;

/* The plot as one SVG document; axes fit the finite data. O(points). */
void tp__chart_xy(tp_buf_t *out, const tp_xy_t *p);

/* ---- parallel coordinates ------------------------------------------------- */
typedef struct tp_parcoords {
    const char *title, *subtitle;
    size_t naxes;
    const char *const *axis;         /* naxes names; the last is the objective */
    const char *const *const *ticks; /* per axis: NULL (numeric) or category labels */
    const size_t *nticks;            /* per axis: number of category labels */
    size_t nlines;
    const double *v;       /* nlines x naxes values, each scaled to [0, 1]; NaN: absent */
    const double *shade;   /* per line, 0 (worst) .. 1 (best): its colour */
    const double *lo, *hi; /* per axis: the numeric range shown at its ends */
    /* Brushing (NULL: none): per axis the key a page filters by (NULL: that axis
     * is not brushed), whether it is on a log scale, and per line its id. A
     * brushed axis gets a rect of class "brush-axis" (data-key, data-lo, data-hi,
     * data-log, and on a choice's axis data-cats) over it, each line its data-id
     * and data-v (its values, "nan" when absent). */
    const char *const *key;
    const char *const *cats; /* NULL, or per axis NULL or its data-cats (its labels, as text) */
    const int *logscale;
    const long long *id;
} tp_parcoords_t;
void tp__chart_parcoords(tp_buf_t *out, const tp_parcoords_t *p);

/* ---- a grid of cells (a contour plot of binned means) -------------------- */
typedef struct tp_grid {
    const char *title, *subtitle, *xlabel, *ylabel;
    size_t nx, ny;            /* columns (x) and rows (y, the first at the bottom) */
    const double *shade;      /* nx * ny, cell (i, j) at j * nx + i: 0 (worst) .. 1; NaN: empty */
    const char *const *tip;   /* nx * ny tooltips, or NULL */
    const char *const *xtick; /* nx labels under the columns (NULL entries: none) */
    const char *const *ytick; /* ny labels beside the rows */
} tp_grid_t;
/* Each non-empty cell a rect of class "cell", coloured red (0) to green (1). O(nx ny). */
void tp__chart_grid(tp_buf_t *out, const tp_grid_t *g);

/* ---- horizontal bars ------------------------------------------------------- */
typedef struct tp_hbars {
    const char *title, *subtitle;
    size_t n;
    const char *const *label;
    const double *value; /* 0 .. 1 */
} tp_hbars_t;
void tp__chart_hbars(tp_buf_t *out, const tp_hbars_t *p);

/* ---- several objectives: the Pareto front ------------------------------------
 * Two objectives: one scatter, the front's points joined by the line that
 * bounds what they dominate. More: a scatter of each pair (the lower
 * triangle of a scatter matrix), the front's points highlighted. Each point
 * is a link (href_prefix and its id) with a tooltip (its id and values),
 * of class "front", "dominated" or "infeasible" and with data-trial=ID.
 * Beyond a thousand points of a kind, they are thinned per plot to one per
 * few pixels (the front's finer), so that the SVG stays bounded whatever n
 * is; the caller's subtitle says so. */
enum { TP_FRONT_MAX = 8 }; /* objectives drawn at most */
typedef struct tp_front_chart {
    const char *title, *subtitle;
    size_t m;                      /* objectives, 2 to TP_FRONT_MAX */
    const char *const *name;       /* m names */
    const int *maximize;           /* m directions */
    size_t n;                      /* points */
    const double *v;               /* n x m values, as reported (finite) */
    const long long *id;           /* n ids */
    const unsigned char *on_front; /* per point: on the front */
    const unsigned char *feasible; /* per point, or NULL: every one feasible */
    const char *href_prefix;       /* a point's link is this and its id; NULL: none */
} tp_front_chart_t;
/* O(n m^2) for the points, O(f log f) for the front's line. */
void tp__chart_front(tp_buf_t *out, const tp_front_chart_t *p);

/* ---- lineage: a lane per member over a budget, arrows between lanes ------- */
typedef struct tp_lane_segment {
    size_t lane;
    size_t n;                /* points: piece i joins x[i-1] to x[i], coloured by shade[i] */
    const double *x, *shade; /* shade 0 (worst) .. 1 (best); NaN: grey */
    const char *title;       /* tooltip, or NULL */
    int segment;             /* its number in its lane (data-segment) */
} tp_lane_segment_t;
typedef struct tp_lane_arrow {
    size_t from, to;   /* lanes */
    double x;          /* where on the axis */
    const char *title; /* tooltip, or NULL */
} tp_lane_arrow_t;
typedef struct tp_lanes {
    const char *title, *subtitle, *xlabel;
    size_t nlanes;
    const char *const *label; /* per lane */
    const long long *id;      /* per lane: its data-trial */
    const tp_lane_segment_t *segs;
    size_t nsegs;
    const tp_lane_arrow_t *arrows;
    size_t narrows;
    double xmax; /* the axis: 0 .. xmax */
} tp_lanes_t;
/* Each lane a <g class="lane" data-trial=ID> holding its segments (<g
 * class="segment">, a <line class="piece"> per piece, pieces in a row of one
 * of 12 shades drawn as one), each arrow a <g
 * class="exploit"> with its tooltip, pointing from lane `from` to lane `to`.
 * O(lanes x segments + points + arrows). */
void tp__chart_lanes(tp_buf_t *out, const tp_lanes_t *p);

#endif
