/* packing: which trials ran on which GPU over time, from the placements
 * journal, drawn with the simulator's Gantt chart so that a simulated plan
 * and a real run compare side by side. Each attempt is a bar from its
 * placement to the event that ended it (still running: now), coloured by
 * how it ended; under each GPU a strip shows the memory and compute the
 * placed trials were given, against the GPU's capacity. */
#include <jansson.h>
#include <math.h>
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "chart/chart.h"
#include "web/web_internal.h"

static const char *const SQL_PLACED =
    "SELECT p.trial, p.attempt, p.at, p.node, p.gpus, p.memory_mib, p.compute, e.at, e.kind "
    "FROM placements p LEFT JOIN events e ON e.id = (SELECT e2.id FROM events e2 WHERE "
    "e2.trial = p.trial AND e2.attempt = p.attempt AND e2.at >= p.at AND e2.kind IN "
    "('completed', 'failed', 'stopped', 'pending', 'paused') ORDER BY e2.id LIMIT 1) "
    "ORDER BY p.id";

/* How an attempt ended: its colour and legend entry. */
static const struct {
    const char *kind, *legend;
} outcomes[] = {
    {NULL, "running"},          {"pending", "interrupted or retried"},
    {"failed", "failed"},       {"paused", "paused at a rung"},
    {"completed", "completed"}, {"stopped", "stopped early"},
};

/* Beyond MERGE_ABOVE bars, touching bars of a lane with the same colour become
 * one (a busy GPU's back-to-back trials), and a use strip keeps one step per
 * pixel column (its highest use there): the chart stays a few hundred KB. */
enum { MAX_BANDS = 128, TITLES_MAX = 2000, MERGE_ABOVE = 2000, COLUMNS = 1000 };

typedef struct {
    char *label; /* "node/gpuN" */
    char *node;
    long index;     /* device index; -1: the node's CPUs */
    double mem_mib; /* capacity, 0 if unknown */
    unsigned lanes;
    double *lane_end; /* per lane: when it frees */
} band_t;

typedef struct {
    band_t *b;
    size_t n;
} bands_t;

static size_t band_of(bands_t *bs, const char *node, long index) {
    for (size_t i = 0; i < bs->n; i++)
        if (bs->b[i].index == index && strcmp(bs->b[i].node, node) == 0) return i;
    bs->b = tp__xrealloc(bs->b, (bs->n + 1) * sizeof *bs->b);
    band_t *b = &bs->b[bs->n];
    memset(b, 0, sizeof *b);
    b->node = tp__strdup(node);
    b->index = index;
    tp_buf_t l;
    tp__buf_init(&l);
    if (index >= 0)
        tp__buf_printf(&l, "%s/gpu%ld", node, index);
    else
        tp__buf_printf(&l, "%s/cpu", node);
    b->label = tp__buf_steal(&l);
    return bs->n++;
}

/* The first lane free at start (a new one if none). */
static unsigned lane_for(band_t *b, double start, double end) {
    for (unsigned k = 0; k < b->lanes; k++)
        if (b->lane_end[k] <= start + 1e-9) {
            b->lane_end[k] = end;
            return k;
        }
    b->lane_end = tp__xrealloc(b->lane_end, (b->lanes + 1) * sizeof *b->lane_end);
    b->lane_end[b->lanes] = end;
    return b->lanes++;
}

/* Capacities from the last GPU snapshot: memory per (node, index). */
static void capacities(tp_store_t *s, bands_t *bs) {
    char *text = tp__store_meta_get(s, "gpus");
    json_t *gpus = text ? json_loads(text, 0, NULL) : NULL;
    free(text);
    size_t i;
    json_t *g;
    json_array_foreach(gpus, i, g) {
        const char *node = json_string_value(json_object_get(g, "node"));
        long index = (long)json_integer_value(json_object_get(g, "index"));
        for (size_t k = 0; k < bs->n; k++)
            if (bs->b[k].index == index && (!node || strcmp(node, bs->b[k].node) == 0))
                bs->b[k].mem_mib = (double)json_integer_value(json_object_get(g, "memory_mib"));
    }
    json_decref(gpus);
}

/* A change of use on a band: +demand at a start, -demand at an end. */
typedef struct {
    size_t band;
    double at, mem, compute;
} change_t;

static int by_band_time(const void *a, const void *b) {
    const change_t *x = a, *y = b;
    if (x->band != y->band) return x->band < y->band ? -1 : 1;
    if (x->at != y->at) return x->at < y->at ? -1 : 1;
    return (x->mem > y->mem) - (x->mem < y->mem); /* ends before starts at the same time */
}

static int by_band_lane_start(const void *a, const void *b) {
    const tp_gantt_bar_t *x = a, *y = b;
    if (x->band != y->band) return x->band < y->band ? -1 : 1;
    if (x->lane != y->lane) return x->lane < y->lane ? -1 : 1;
    return (x->start > y->start) - (x->start < y->start);
}

/* Touching bars (gap under `gap` seconds) of one lane with one colour become
 * one bar without a tooltip. Returns how many were merged; *drawn: bars left.
 * O(n log n). */
static size_t merge_bars(tp_gantt_bar_t *bars, size_t n, double gap, size_t *drawn) {
    qsort(bars, n, sizeof *bars, by_band_lane_start);
    size_t w = 0, merged = 0;
    for (size_t i = 0; i < n; i++) {
        tp_gantt_bar_t *last = w ? &bars[w - 1] : NULL;
        if (last && last->band == bars[i].band && last->lane == bars[i].lane &&
            last->colour == bars[i].colour && bars[i].start - last->end <= gap) {
            if (bars[i].end > last->end) last->end = bars[i].end;
            last->title = NULL;
            merged++;
            continue;
        }
        bars[w++] = bars[i];
    }
    *drawn = w;
    return merged;
}

/* A use strip resampled to COLUMNS steps, each the highest use in its column,
 * written back over at, mem and compute (which hold n > COLUMNS). O(n). */
static void per_column(tp_gantt_use_t *u, double span, double *at, double *mem, double *compute) {
    double *t = tp__xcalloc(3 * COLUMNS, sizeof *t), *m = t + COLUMNS, *c = t + 2 * COLUMNS;
    size_t i = 0;
    double cur_m = 0, cur_c = 0;
    for (size_t k = 0; k < COLUMNS; k++) {
        double end = span * (double)(k + 1) / COLUMNS;
        double hi_m = cur_m, hi_c = cur_c;
        for (; i < u->n && at[i] < end; i++) {
            cur_m = mem[i], cur_c = compute[i];
            hi_m = fmax(hi_m, cur_m), hi_c = fmax(hi_c, cur_c);
        }
        t[k] = span * (double)k / COLUMNS, m[k] = hi_m, c[k] = hi_c;
    }
    memcpy(at, t, COLUMNS * sizeof *t);
    memcpy(mem, m, COLUMNS * sizeof *m);
    memcpy(compute, c, COLUMNS * sizeof *c);
    free(t);
    u->n = COLUMNS;
}

void tp__web_svg_packing(tp_store_t *s, double now, tp_buf_t *out) {
    bands_t bs = {0};
    tp_gantt_bar_t *bars = NULL;
    char **titles = NULL;
    change_t *ch = NULL;
    size_t nbars = 0, cap = 0, nch = 0;
    double t0 = INFINITY, t1 = -INFINITY;
    sqlite3_exec(tp__store_sqlite(s), "BEGIN", NULL, NULL, NULL);
    sqlite3_stmt *st = tp__web_prepare(s, SQL_PLACED);
    while (st && sqlite3_step(st) == SQLITE_ROW) {
        long long trial = sqlite3_column_int64(st, 0);
        int attempt = sqlite3_column_int(st, 1);
        double start = sqlite3_column_double(st, 2);
        const char *node = (const char *)sqlite3_column_text(st, 3);
        json_t *gpus = json_loads((const char *)sqlite3_column_text(st, 4), 0, NULL);
        double mem = (double)sqlite3_column_int64(st, 5), compute = sqlite3_column_double(st, 6);
        int ended = sqlite3_column_type(st, 7) != SQLITE_NULL;
        double end = ended ? sqlite3_column_double(st, 7) : now;
        const char *kind = ended ? (const char *)sqlite3_column_text(st, 8) : NULL;
        size_t colour = 0;
        for (size_t k = 1; kind && k < TP_ARRAY_LEN(outcomes); k++)
            if (strcmp(kind, outcomes[k].kind) == 0) colour = k;
        if (end < start) end = start;
        t0 = fmin(t0, start), t1 = fmax(t1, end);
        size_t ng = json_array_size(gpus) ? json_array_size(gpus) : 1;
        for (size_t j = 0; j < ng; j++) {
            long index =
                json_array_size(gpus) ? (long)json_integer_value(json_array_get(gpus, j)) : -1;
            size_t b = band_of(&bs, node ? node : "?", index);
            if (nbars == cap) {
                size_t old = cap;
                bars = tp__xgrow(bars, &cap, nbars + 1, sizeof *bars, 256);
                titles = tp__xresize(titles, old, cap, sizeof *titles);
                ch = tp__xresize(ch, old, cap, 2 * sizeof *ch); /* two a bar */
            }
            titles[nbars] = NULL;
            if (nbars < TITLES_MAX) {
                tp_buf_t t;
                tp__buf_init(&t);
                tp__buf_printf(&t, "trial %lld attempt %d: %s, %.0f MiB, compute %.2f, %.1f-%.1f s",
                               trial, attempt, outcomes[colour].legend, mem, compute, start, end);
                titles[nbars] = tp__buf_steal(&t);
            }
            bars[nbars] = (tp_gantt_bar_t){
                .band = b, .start = start, .end = end, .colour = colour, .title = titles[nbars]};
            ch[nch++] = (change_t){b, start, mem, compute};
            ch[nch++] = (change_t){b, end, -mem, -compute};
            nbars++;
        }
        json_decref(gpus);
    }
    sqlite3_finalize(st);
    capacities(s, &bs);
    sqlite3_exec(tp__store_sqlite(s), "COMMIT", NULL, NULL, NULL);
    if (!isfinite(t0)) t0 = t1 = 0;
    /* Lanes in time order per band (bars are in placement order, which is time order). */
    for (size_t i = 0; i < nbars; i++) {
        bars[i].lane = lane_for(&bs.b[bars[i].band], bars[i].start, bars[i].end);
        bars[i].start -= t0;
        bars[i].end -= t0;
    }
    size_t drawn = nbars, merged = 0;
    if (nbars > MERGE_ABOVE) merged = merge_bars(bars, nbars, (t1 - t0) / COLUMNS, &drawn);
    /* The use strips: running sums of the changes, per band. */
    qsort(ch, nch, sizeof *ch, by_band_time);
    tp_gantt_use_t *use = tp__xcalloc(bs.n + 1, sizeof *use);
    double *at = tp__xcalloc(nch + 1, sizeof *at), *um = tp__xcalloc(nch + 1, sizeof *um);
    double *uc = tp__xcalloc(nch + 1, sizeof *uc);
    size_t k = 0;
    for (size_t b = 0; b < bs.n; b++) {
        use[b] = (tp_gantt_use_t){.n = 0, .at = at + k, .mem = um + k, .compute = uc + k};
        double mem = 0, compute = 0;
        size_t first = k;
        for (; k < nch && ch[k].band == b; k++) {
            mem += ch[k].mem, compute += ch[k].compute;
            at[k] = ch[k].at - t0;
            um[k] = bs.b[b].mem_mib > 0 ? mem / bs.b[b].mem_mib : 0;
            uc[k] = compute;
        }
        use[b].n = k - first;
        if (use[b].n > 2 * COLUMNS)
            per_column(&use[b], t1 - t0, at + first, um + first, uc + first);
    }
    const char **labels = tp__xcalloc(bs.n + 1, sizeof *labels);
    for (size_t b = 0; b < bs.n; b++)
        labels[b] = bs.b[b].label;
    const char *legend[TP_ARRAY_LEN(outcomes)];
    for (size_t i = 0; i < TP_ARRAY_LEN(outcomes); i++)
        legend[i] = outcomes[i].legend;
    char sub[200];
    snprintf(sub, sizeof sub, "%zu placement%s on %zu device%s over %.0f s%s", nbars,
             nbars == 1 ? "" : "s", bs.n, bs.n == 1 ? "" : "s", t1 - t0,
             merged ? "; back-to-back attempts of a lane drawn as one bar, tooltips on the first "
                      "2000 only"
                    : "");
    tp_gantt_t g = {.title = "GPU packing",
                    .subtitle = sub,
                    .nbands = bs.n,
                    .band_label = labels,
                    .bars = bars,
                    .nbars = drawn,
                    .span = t1 - t0,
                    .legend = legend,
                    .nlegend = TP_ARRAY_LEN(outcomes),
                    .use = use,
                    .max_bands = MAX_BANDS};
    tp__chart_gantt(out, &g);
    for (size_t i = 0; i < nbars; i++)
        free(titles[i]);
    for (size_t b = 0; b < bs.n; b++)
        free(bs.b[b].label), free(bs.b[b].node), free(bs.b[b].lane_end);
    free(bs.b), free(bars), free(titles), free(ch), free(use), free(at), free(um), free(uc);
    free(labels);
}
