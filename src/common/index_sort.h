/* Ascending sort of int32 index rows, the step behind every set hash and set comparison of
 * `run` (a row's index set is its k entries sorted). */
#ifndef DSATOPK_INDEX_SORT_H
#define DSATOPK_INDEX_SORT_H

#include <stdint.h>

/* Sorts values[0..count) ascending in place; scratch holds count entries (its contents are
 * overwritten). The result is the one qsort with an int32 comparison gives (integers have one
 * ascending order), in O(count) instead of O(count log count). */
void index_sort_ascending(int32_t *values, uint32_t count, int32_t *scratch);

#endif
