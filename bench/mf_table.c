/* mf_table: reads a tabular multi-fidelity benchmark (see mf_table.h and
 * bench/search/lcbench_gen.py for the format) and looks errors up. */
#include "mf_table.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct row {
    size_t d, c;             /* dataset, config */
    long s;                  /* training seed */
    double x[MF_MAX_PARAMS]; /* the config's values */
    float *e;                /* epochs errors, owned until moved */
    int line;                /* where it was read */
} row_t;

/* Split line (modified in place) at tabs into at most max fields; returns the count. */
static size_t fields(char *line, char **f, size_t max) {
    size_t n = 0;
    for (char *p = line; n < max;) {
        f[n++] = p;
        char *tab = strchr(p, '\t');
        if (!tab) break;
        *tab = '\0', p = tab + 1;
    }
    return n;
}

static int number(const char *s, double *out) {
    char *end;
    errno = 0;
    *out = strtod(s, &end);
    return end != s && *end == '\0' && !errno;
}

/* A "# epochs N" or "# param NAME KIND LO HI" line into t; other comments are skipped. */
static int comment(mf_table_t *t, const char *line, const char *where, tp_error_t *err) {
    char name[32], kind[16];
    double lo, hi;
    int ep;
    if (sscanf(line, "# epochs %d", &ep) == 1) {
        if (ep < 1 || ep > 1000)
            return tp__errorf(err, -EINVAL, "%s: epochs %d is not in 1..1000", where, ep);
        t->epochs = ep;
    } else if (sscanf(line, "# param %31s %15s %lf %lf", name, kind, &lo, &hi) == 4) {
        if (t->nparams == MF_MAX_PARAMS)
            return tp__errorf(err, -EINVAL, "%s: more than %d parameters", where, MF_MAX_PARAMS);
        if (strcmp(kind, "log") && strcmp(kind, "lin") && strcmp(kind, "intlog"))
            return tp__errorf(err, -EINVAL, "%s: parameter %s: kind '%s' is not log, lin or intlog",
                              where, name, kind);
        mf_param_t *p = &t->params[t->nparams++];
        snprintf(p->name, sizeof p->name, "%s", name);
        p->kind = !strcmp(kind, "log") ? MF_LOG : !strcmp(kind, "lin") ? MF_LIN : MF_INTLOG;
        p->lo = lo, p->hi = hi;
        if (!(lo < hi) || (p->kind != MF_LIN && !(lo > 0)))
            return tp__errorf(err, -EINVAL, "%s: parameter %s: range [%g, %g] is empty%s", where,
                              name, lo, hi, p->kind != MF_LIN ? " or not positive" : "");
    }
    return 0;
}

/* The header row: dataset, config, seed, the parameters in order, e1..eE. */
static int header(const mf_table_t *t, char *line, const char *where, tp_error_t *err) {
    char *f[3 + MF_MAX_PARAMS + 1001];
    size_t want = 3 + t->nparams + (size_t)t->epochs;
    size_t n = fields(line, f, sizeof f / sizeof *f);
    if (t->epochs < 1 || t->nparams == 0)
        return tp__errorf(err, -EINVAL,
                          "%s: the header row comes before '# epochs N' and '# param' lines",
                          where);
    if (n != want || strcmp(f[0], "dataset") || strcmp(f[1], "config") || strcmp(f[2], "seed"))
        return tp__errorf(err, -EINVAL,
                          "%s: header row: expected %zu columns dataset, config, seed, the "
                          "%zu parameters, e1..e%d; got %zu",
                          where, want, t->nparams, t->epochs, n);
    for (size_t i = 0; i < t->nparams; i++)
        if (strcmp(f[3 + i], t->params[i].name))
            return tp__errorf(err, -EINVAL, "%s: header column %zu is '%s', expected '%s'", where,
                              4 + i, f[3 + i], t->params[i].name);
    return 0;
}

/* One data row into *r (r->e allocated). */
static int data(mf_table_t *t, char *line, const char *where, row_t *r, tp_error_t *err) {
    char *f[3 + MF_MAX_PARAMS + 1001];
    size_t want = 3 + t->nparams + (size_t)t->epochs;
    size_t n = fields(line, f, sizeof f / sizeof *f);
    if (n != want)
        return tp__errorf(err, -EINVAL, "%s: %zu columns, the header row has %zu", where, n, want);
    size_t d = 0;
    while (d < t->ndatasets && strcmp(t->datasets[d].name, f[0]))
        d++;
    if (d == t->ndatasets) {
        if (d == MF_MAX_DATASETS || strlen(f[0]) >= sizeof t->datasets[d].name)
            return tp__errorf(err, -EINVAL,
                              "%s: dataset '%s': more than %d datasets or a name "
                              "longer than 31",
                              where, f[0], MF_MAX_DATASETS);
        snprintf(t->datasets[d].name, sizeof t->datasets[d].name, "%s", f[0]);
        t->ndatasets++;
    }
    double c, s;
    if (!number(f[1], &c) || !number(f[2], &s) || c < 0 || s < 0 || c > 1e6 || s > 1000 ||
        c != floor(c) || s != floor(s))
        return tp__errorf(err, -EINVAL,
                          "%s: config '%s' and seed '%s' must be integers in "
                          "0..1000000 and 0..1000",
                          where, f[1], f[2]);
    r->d = d, r->c = (size_t)c, r->s = (long)s;
    for (size_t i = 0; i < t->nparams; i++)
        if (!number(f[3 + i], &r->x[i]))
            return tp__errorf(err, -EINVAL, "%s: %s '%s' is not a number", where, t->params[i].name,
                              f[3 + i]);
    r->e = tp__xcalloc((size_t)t->epochs, sizeof *r->e);
    for (int k = 0; k < t->epochs; k++) {
        double v;
        if (!number(f[3 + t->nparams + (size_t)k], &v) || !isfinite(v))
            return tp__errorf(err, -EINVAL, "%s: error after epoch %d, '%s', is not a number",
                              where, k + 1, f[3 + t->nparams + (size_t)k]);
        r->e[k] = (float)v;
    }
    return 0;
}

/* Move the rows into t's per-dataset arrays, checking each (dataset, config, seed) is there
 * once and a config's values agree. */
static int place(mf_table_t *t, row_t *rows, size_t nrows, const char *path, tp_error_t *err) {
    for (size_t i = 0; i < nrows; i++) {
        if (rows[i].s + 1 > t->nseeds) t->nseeds = (int)rows[i].s + 1;
        mf_dataset_t *ds = &t->datasets[rows[i].d];
        if (rows[i].c + 1 > ds->nconfigs) ds->nconfigs = rows[i].c + 1;
    }
    for (size_t d = 0; d < t->ndatasets; d++) {
        mf_dataset_t *ds = &t->datasets[d];
        ds->x = tp__xcalloc(ds->nconfigs * t->nparams, sizeof *ds->x);
        ds->err =
            tp__xcalloc(ds->nconfigs * (size_t)t->nseeds * (size_t)t->epochs, sizeof *ds->err);
    }
    unsigned char *seen[MF_MAX_DATASETS] = {0};
    for (size_t d = 0; d < t->ndatasets; d++)
        seen[d] = tp__xcalloc(t->datasets[d].nconfigs * (size_t)t->nseeds, 1);
    int rc = 0;
    for (size_t i = 0; i < nrows && !rc; i++) {
        row_t *r = &rows[i];
        mf_dataset_t *ds = &t->datasets[r->d];
        size_t slot = r->c * (size_t)t->nseeds + (size_t)r->s;
        int first = 1;
        for (long s = 0; s < t->nseeds; s++)
            first &= !seen[r->d][r->c * (size_t)t->nseeds + (size_t)s];
        if (seen[r->d][slot])
            rc = tp__errorf(err, -EINVAL, "%s:%d: dataset %s, config %zu, seed %ld again", path,
                            r->line, ds->name, r->c, r->s);
        for (size_t k = 0; k < t->nparams && !rc; k++) {
            double *x = &ds->x[r->c * t->nparams + k];
            if (!first && *x != r->x[k])
                rc = tp__errorf(err, -EINVAL,
                                "%s:%d: dataset %s, config %zu: %s is %g here, %g "
                                "in an earlier row",
                                path, r->line, ds->name, r->c, t->params[k].name, r->x[k], *x);
            *x = r->x[k];
        }
        seen[r->d][slot] = 1;
        memcpy(&ds->err[slot * (size_t)t->epochs], r->e, (size_t)t->epochs * sizeof *r->e);
    }
    for (size_t d = 0; d < t->ndatasets && !rc; d++)
        for (size_t j = 0; j < t->datasets[d].nconfigs * (size_t)t->nseeds && !rc; j++)
            if (!seen[d][j])
                rc = tp__errorf(err, -EINVAL, "%s: dataset %s has no row for config %zu, seed %zu",
                                path, t->datasets[d].name, j / (size_t)t->nseeds,
                                j % (size_t)t->nseeds);
    for (size_t d = 0; d < t->ndatasets; d++)
        free(seen[d]);
    return rc;
}

int mf_table_read(const char *path, mf_table_t *t, tp_error_t *err) {
    memset(t, 0, sizeof *t);
    char *buf;
    size_t len;
    int rc = tp__read_file(path, &buf, &len, err);
    if (rc < 0) return rc;
    row_t *rows = NULL;
    size_t nrows = 0, cap = 0;
    int lineno = 0, have_header = 0;
    char where[600];
    for (char *line = buf, *next; line && *line && !rc; line = next) {
        next = strchr(line, '\n');
        if (next) *next++ = '\0';
        lineno++;
        snprintf(where, sizeof where, "%s:%d", path, lineno);
        if (line[0] == '#') {
            rc = have_header ? 0 : comment(t, line, where, err);
        } else if (!*line) {
            continue;
        } else if (!have_header) {
            rc = header(t, line, where, err), have_header = 1;
        } else {
            if (nrows == cap) {
                cap = cap ? 2 * cap : 1024;
                rows = tp__xrealloc(rows, cap * sizeof *rows);
            }
            rows[nrows] = (row_t){.line = lineno};
            rc = data(t, line, where, &rows[nrows], err);
            nrows++;
        }
    }
    if (!rc && !nrows) rc = tp__errorf(err, -EINVAL, "%s: no data rows", path);
    if (!rc) rc = place(t, rows, nrows, path, err);
    for (size_t i = 0; i < nrows; i++)
        free(rows[i].e);
    free(rows), free(buf);
    if (rc) mf_table_free(t);
    return rc;
}

void mf_table_free(mf_table_t *t) {
    for (size_t d = 0; d < t->ndatasets; d++)
        free(t->datasets[d].x), free(t->datasets[d].err);
    memset(t, 0, sizeof *t);
}

/* v on p's range scaled to [0, 1] (log kinds in log). */
static double unit(const mf_param_t *p, double v) {
    if (p->kind == MF_LIN) return (v - p->lo) / (p->hi - p->lo);
    return (log(v) - log(p->lo)) / (log(p->hi) - log(p->lo));
}

size_t mf_table_nearest(const mf_table_t *t, size_t d, const double *v) {
    const mf_dataset_t *ds = &t->datasets[d];
    double u[MF_MAX_PARAMS], best = INFINITY;
    size_t arg = 0;
    for (size_t k = 0; k < t->nparams; k++)
        u[k] = unit(&t->params[k], v[k]);
    for (size_t c = 0; c < ds->nconfigs; c++) {
        double dist = 0;
        for (size_t k = 0; k < t->nparams; k++) {
            double dk = unit(&t->params[k], ds->x[c * t->nparams + k]) - u[k];
            dist += dk * dk;
        }
        if (dist < best) best = dist, arg = c;
    }
    return arg;
}

double mf_table_error(const mf_table_t *t, size_t d, size_t c, int s, int epoch) {
    if (epoch < 1) epoch = 1;
    if (epoch > t->epochs) epoch = t->epochs;
    const mf_dataset_t *ds = &t->datasets[d];
    return ds->err[(c * (size_t)t->nseeds + (size_t)s) * (size_t)t->epochs + (size_t)epoch - 1];
}
