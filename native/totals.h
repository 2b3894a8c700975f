/* The collector's totals: each record's sums over all its shards and the
 * extremes of the interval being collected, kept by totals.c alone. */
#ifndef TFD_TOTALS_H
#define TFD_TOTALS_H
#include "threads.h"

/* Take every thread's dirty list of the closed interval, fold those shards
 * into their records' totals, and append the touched records' rows
 * (R_WIDTH values each) and common values (4 each: record index, kind,
 * value, count). 0, or -1 when out of memory. */
int totals_fold(int64_t closed, growbuf *rows, growbuf *vals, int64_t *n_shards) TFD_HIDDEN;

#endif
