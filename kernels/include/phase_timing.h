/* Phase timing of the bitonic kernels, in measurement builds only (meson option phase_timing:
 * dsatopk-audit-phases): thread 0 of every CTA adds the cycles from the CTA's start to each
 * mark into a device-wide table (kernels/bitonic/phase_timing.cuh), which `bench` reads with
 * bitonic_phase_take. In normal builds the kernels have no marks and this header declares
 * nothing. Plain C with extern "C" guards. */
#ifndef DSATOPK_PHASE_TIMING_H
#define DSATOPK_PHASE_TIMING_H

#ifdef DSATOPK_PHASE_TIMING

#include "error.h"

#ifdef __cplusplus
extern "C" {
#endif

/* The bitonic kernels' cycles from a CTA's start to each mark, summed over the CTAs that
 * reached it. */
enum { PHASE_KERNELS = 6, PHASE_MARKS = 16 };
enum {
    PHASE_CLUSTER16 = 0,
    PHASE_CLUSTER32 = 1,
    PHASE_TREE = 2,
    PHASE_TREE_HISTOGRAM = 3,
    PHASE_CLUSTER64 = 4,
    PHASE_CLUSTER128 = 5
};
struct phase_table {
    unsigned long long cycles[PHASE_KERNELS][PHASE_MARKS];
    unsigned long long ctas[PHASE_KERNELS][PHASE_MARKS];
};
/* Copies the table out and zeroes it (synchronous). */
int bitonic_phase_take(struct phase_table *table, struct audit_error *err);

#ifdef __cplusplus
}
#endif

#endif
#endif
