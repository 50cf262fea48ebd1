/* Block-level building blocks of the radix-select models (radix.cu, filtered.cu): the coarse bin
 * with NaNs pinned to the extreme bin of their sign, the warp-aggregated claim on a shared
 * counter (the arrival-order source of their nondeterminism), the warp-aggregated histogram
 * increment, and the strided row walk (their scans are block/scan.cuh's). For 1024-thread
 * blocks. */
#ifndef DSATOPK_RADIX_SELECT_CUH
#define DSATOPK_RADIX_SELECT_CUH

#include "block/scan.cuh"
#include "common/topk_common.cuh"

#define SELECT_FULL_MASK 0xFFFFFFFFu
#define SELECT_THREADS 1024u
#define SELECT_WARPS (SELECT_THREADS / 32u)

/* Coarse bin with NaNs pinned to the extreme bin of their sign: the fp16 conversion may drop a
 * NaN's sign, and pinning keeps the bin order the reference's total order. */
static __device__ __forceinline__ uint32_t select_coarse_bin(float value)
{
    const uint32_t bits = __float_as_uint(value);
    const uint32_t nan_bin = (bits & 0x80000000u) ? 0u : 255u;
    const uint32_t bin = coarse_bin(value);
    return (bits & 0x7FFFFFFFu) > 0x7F800000u ? nan_bin : bin;
}

/* Warp-aggregated claim on a shared counter: one atomic per warp, positions in lane order within
 * the warp; across warps the order is whatever order the warps arrive in. All 32 lanes call it;
 * the result is meaningful only where take is true. */
static __device__ __forceinline__ uint32_t warp_claim(bool take, uint32_t *counter)
{
    const uint32_t mask = __ballot_sync(SELECT_FULL_MASK, take);
    if (mask == 0)
        return 0;
    const uint32_t lane = threadIdx.x & 31u;
    const uint32_t leader = __ffs(mask) - 1;
    uint32_t base = 0;
    if (lane == leader)
        base = atomicAdd(counter, (uint32_t)__popc(mask));
    base = __shfl_sync(SELECT_FULL_MASK, base, leader);
    return base + __popc(mask & ((1u << lane) - 1u));
}

/* Histogram increment. A warp whose lanes all hit one bin (0.0 plateaus, constant rows) adds 32
 * with one atomic instead of 32 serialised ones. All 32 lanes call it. */
static __device__ __forceinline__ void warp_histogram_add(uint32_t *histogram, uint32_t bin,
                                                           bool counted)
{
    const uint32_t slot = counted ? bin : 256u;
    const uint32_t lane0_slot = __shfl_sync(SELECT_FULL_MASK, slot, 0);
    if (__all_sync(SELECT_FULL_MASK, slot == lane0_slot)) {
        if ((threadIdx.x & 31u) == 0 && slot < 256u)
            atomicAdd(&histogram[slot], 32u);
    } else if (counted) {
        atomicAdd(&histogram[bin], 1u);
    }
}

/* Calls visit(index, value) for every position of the row, UNROLL loads in flight per thread,
 * positions strided by the block so that the warps interleave. Every thread makes the
 * same number of calls (positions past the end read as -inf, which is never a candidate), so
 * visit may use warp-wide votes. */
template <uint32_t UNROLL, typename Visit>
static __device__ __forceinline__ void walk_row(const float *row, uint32_t length, Visit visit)
{
    const uint32_t step = SELECT_THREADS * UNROLL;
    uint32_t base = 0;
    /* Whole tiles: unguarded loads at immediate offsets from one pointer. */
    for (; base + step <= length; base += step) {
        const float *tile = row + base + threadIdx.x;
        float values[UNROLL];
#pragma unroll
        for (uint32_t u = 0; u < UNROLL; u++)
            values[u] = tile[u * SELECT_THREADS];
#pragma unroll
        for (uint32_t u = 0; u < UNROLL; u++)
            visit(base + u * SELECT_THREADS + threadIdx.x, values[u]);
    }
    if (base < length) { /* the last, partial tile */
        float values[UNROLL];
#pragma unroll
        for (uint32_t u = 0; u < UNROLL; u++) {
            const uint32_t index = base + u * SELECT_THREADS + threadIdx.x;
            values[u] = index < length ? row[index] : __uint_as_float(TOPK_NEG_INF_BITS);
        }
#pragma unroll
        for (uint32_t u = 0; u < UNROLL; u++)
            visit(base + u * SELECT_THREADS + threadIdx.x, values[u]);
    }
}

#endif
