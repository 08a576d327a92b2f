/* mf_table: a tabular multi-fidelity benchmark read from a file (as
 * bench/search/lcbench_gen.py writes it): for each dataset, a fixed set of
 * configurations and, per configuration and training seed, the validation
 * error after each epoch. A configuration proposed by a sampler is snapped
 * to the nearest tabulated one of its dataset (mf_table_nearest). */
#ifndef MF_TABLE_H
#define MF_TABLE_H

#include <stddef.h>

#include "util/util.h"

#define MF_MAX_PARAMS 16
#define MF_MAX_DATASETS 16

typedef enum { MF_LOG, MF_LIN, MF_INTLOG } mf_kind;

typedef struct mf_param {
    char name[32]; /* the column's name, also the space parameter's */
    mf_kind kind;  /* log: float on a log scale; lin: float; intlog: integer on a log scale */
    double lo, hi; /* its range, lo < hi (lo > 0 for the log kinds) */
} mf_param_t;

typedef struct mf_dataset {
    char name[32];   /* as in the file's first column */
    size_t nconfigs; /* configurations 0..nconfigs-1, each with nseeds rows */
    double *x;       /* nconfigs * nparams values, owned */
    float *err;      /* error[(config * nseeds + seed) * epochs + epoch - 1], owned */
} mf_dataset_t;

typedef struct mf_table {
    int epochs; /* errors per row: epochs 1..epochs */
    int nseeds; /* training seeds per configuration: 0..nseeds-1 */
    mf_param_t params[MF_MAX_PARAMS];
    size_t nparams;
    mf_dataset_t datasets[MF_MAX_DATASETS];
    size_t ndatasets;
} mf_table_t;

/* Read the table at path into *t. 0, or a negative errno with err saying
 * what was wrong and where (path:line). Every (dataset, config, seed) must
 * appear exactly once, a config's values the same in each of its rows.
 * O(size of the file). */
int mf_table_read(const char *path, mf_table_t *t, tp_error_t *err);
void mf_table_free(mf_table_t *t);

/* The tabulated configuration of dataset d nearest to values v[0..nparams)
 * (in the order of t->params): the smallest Euclidean distance with every
 * parameter scaled to [0, 1] over its range (log kinds in log), the lowest
 * number on ties. O(nconfigs * nparams). */
size_t mf_table_nearest(const mf_table_t *t, size_t d, const double *v);

/* Dataset d's error for config c, training seed s, after `epoch` epochs
 * (clamped to 1..epochs). */
double mf_table_error(const mf_table_t *t, size_t d, size_t c, int s, int epoch);

#endif
