/* Phase timing of the bitonic kernels, for measurement builds only (-DDSATOPK_PHASE_TIMING, see
 * scripts/device-bundle.sh): thread 0 of every CTA adds the SM cycles from the CTA's start to
 * each mark into a device-wide table, so that `bench` can print where a CTA's time goes (mean
 * cycles to each mark over the CTAs that reached it). Marks sit after a barrier, so thread 0's
 * clock there is about when the whole CTA got there. In normal builds every macro is empty and
 * the kernels are unchanged. */
#ifndef DSATOPK_PHASE_TIMING_CUH
#define DSATOPK_PHASE_TIMING_CUH

#include "phase_timing.h"

#ifdef DSATOPK_PHASE_TIMING

__device__ struct phase_table dsatopk_phase_table; /* this header has one includer: bitonic.cu */
/* Thread 0's start clock and kernel, so that marks in shared device functions need no
 * parameters (only thread 0 writes and reads them). */
static __shared__ long long phase_start_cycles;
static __shared__ unsigned int phase_kernel;

#define PHASE_START(kernel)                                                                        \
    do {                                                                                           \
        if (threadIdx.x == 0) {                                                                    \
            phase_start_cycles = clock64();                                                        \
            phase_kernel = (kernel);                                                               \
        }                                                                                          \
    } while (0)
#define PHASE_MARK(mark)                                                                           \
    do {                                                                                           \
        if (threadIdx.x == 0) {                                                                    \
            atomicAdd(&dsatopk_phase_table.cycles[phase_kernel][(mark)],                           \
                      (unsigned long long)(clock64() - phase_start_cycles));                      \
            atomicAdd(&dsatopk_phase_table.ctas[phase_kernel][(mark)], 1ull);                      \
        }                                                                                          \
    } while (0)

#else

#define PHASE_START(kernel) (void)0
#define PHASE_MARK(mark) (void)0

#endif
#endif
