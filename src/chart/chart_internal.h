/* chart internals: the pieces every chart of the module draws alike. */
#ifndef TP_CHART_INTERNAL_H
#define TP_CHART_INTERNAL_H

#include "util/util.h"

/* A tick step of 1, 2 or 5 times a power of ten giving at most ~10 ticks. */
double tp__chart_tick_step(double span);
/* <svg ...> with a white background. */
void tp__chart_open(tp_buf_t *out, double width, double height);
/* The bold title and the grey subtitle (NULL: none) at x = left. */
void tp__chart_titles(tp_buf_t *out, double left, const char *title, const char *subtitle);

/* A finite [lo, hi] that covers the data, widened when flat. */
void tp__chart_fit_range(double *lo, double *hi);
/* An axis tick label: %g with few digits. */
void tp__chart_tick_text(tp_buf_t *out, double v);

/* A shade from red (0, worst) through yellow to green (1, best): "#rrggbb". */
void tp__chart_shade(double s, char out[8]);

#endif
