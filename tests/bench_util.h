/* Shared by the CPU benchmarks (tests/bench_*.c): the median of timed runs. */
#ifndef DSATOPK_BENCH_UTIL_H
#define DSATOPK_BENCH_UTIL_H

#include <stdlib.h>

static inline int bench_compare_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* Sorts values in place and returns the middle one (the upper median for an even count). */
static inline double bench_median(double *values, int count)
{
    qsort(values, (size_t)count, sizeof(*values), bench_compare_double);
    return values[count / 2];
}

#endif
