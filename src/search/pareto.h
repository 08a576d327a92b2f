/* pareto: several objectives. Points are n rows of m values, row-major,
 * every objective to be MINIMIZED (callers negate maximized ones). Pure. */
#ifndef TP_PARETO_H
#define TP_PARETO_H

#include <stddef.h>

/* a is no worse than b in every objective and better in one. O(m). */
int tp__pareto_dominates(const double *a, const double *b, size_t m);

/* Non-dominated sorting (Deb et al. 2002): rank[i] = 0 for the points no
 * other point dominates, 1 for those only rank-0 points dominate, and so
 * on. Returns the number of fronts. O(m n^2) time, O(n^2) bits of memory:
 * fine to a few thousand points. */
size_t tp__pareto_rank(const double *y, size_t n, size_t m, size_t *rank);

/* The first front alone (rank 0 above): on_front[i] = 1 for each point no
 * other dominates (equal points are all on it), else 0; returns how many.
 * The points are visited in lexicographic order, so that each is compared
 * with the front found so far only (a point's dominators all come before
 * it, and one of them is on the front); with two objectives, a sweep that
 * keeps the lowest second value. O(n log n) time for m = 2, O(n log n +
 * n f m) for a front of f points beyond, O(n) memory: what `best` and the
 * dashboard use, fast at 10,000 trials. */
size_t tp__pareto_front(const double *y, size_t n, size_t m, unsigned char *on_front);

/* Crowding distance (NSGA-II) of the k points idx[] of y: for each
 * objective the normalized gap between a point's neighbours; the two ends
 * of each objective get infinity. O(m k log k). */
void tp__pareto_crowding(const double *y, size_t m, const size_t *idx, size_t k, double *dist);

/* Hypervolume dominated by the k points idx[] of y (NULL: the first k)
 * and bounded by ref (points not below ref in every objective add
 * nothing). Exact: a sweep for m = 2, slicing for m > 2 (O(k^(m-1) log k):
 * fine for the fronts of a few hundred trials at m <= 3). */
double tp__hypervolume(const double *y, size_t m, const size_t *idx, size_t k, const double *ref);

/* Each of the k points' exclusive contribution to the hypervolume of all k
 * (hv of all minus hv without it). O(k * hypervolume). */
void tp__hv_contributions(const double *y, size_t m, const size_t *idx, size_t k, const double *ref,
                          double *contrib);

/* Optuna's reference point for a set: per objective max(1.1 w, 0.9 w) of
 * the worst value w, and a tiny positive value where that is 0. O(m k). */
void tp__hv_reference(const double *y, size_t m, const size_t *idx, size_t k, double *ref);

/* Greedy hypervolume subset selection (Guerreiro et al. 2016, as Optuna's
 * _solve_hssp): choose `want` of the k points idx[], each time the one
 * adding most hypervolume to those chosen; writes them to out. O(want * k *
 * hypervolume). */
void tp__hv_select(const double *y, size_t m, const size_t *idx, size_t k, size_t want,
                   const double *ref, size_t *out);

#endif
