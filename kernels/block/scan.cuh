/* Warp and block prefix sums in thread order (block layer: no knowledge of top-k).
 *
 * block_exclusive_sum_of takes one barrier per call: the warp totals alternate between two
 * buffers that the caller owns (scan[2][WARPS] and a parity bit), so the next call may start
 * writing while slow threads still read this call's totals. Every thread of the block must call
 * it, with the same parity. The results are a function of the values alone (integer sums, exact
 * in any order): deterministic. */
#ifndef DSATOPK_BLOCK_SCAN_CUH
#define DSATOPK_BLOCK_SCAN_CUH

#include <cstdint>

#include "ptx/shuffle.cuh"

/* The inclusive prefix sum of `value` over the lanes of a full warp, in lane order. */
static __device__ __forceinline__ uint32_t warp_inclusive_sum(uint32_t value)
{
#pragma unroll
    for (uint32_t offset = 1; offset < 32; offset <<= 1)
        value = shuffle_up_add(value, offset);
    return value;
}

/* Block-wide exclusive prefix sum of one value per thread, in thread order, with the block total,
 * for a block of WARPS warps. One barrier; the warp totals alternate between two buffers so that
 * the next call may start writing while slow threads still read this call's buffer (they read
 * before they reach the next call's barrier). Every thread must call it. */
template <uint32_t WARPS>
static __device__ __forceinline__ uint32_t block_exclusive_sum_of(uint32_t value,
                                                                  uint32_t (&scan)[2][WARPS],
                                                                  uint32_t &parity,
                                                                  uint32_t &total)
{
    const uint32_t lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    const uint32_t inclusive = warp_inclusive_sum(value);
    if (lane == 31)
        scan[parity][warp] = inclusive;
    __syncthreads();
    const uint32_t warp_total = lane < WARPS ? scan[parity][lane] : 0;
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
    /* Two independent warp reductions (REDUX) where a scan of the totals would be a chain of
     * five dependent shuffles: the block waits on this latency, in every call. */
    const uint32_t warp_exclusive = __reduce_add_sync(0xFFFFFFFFu, lane < warp ? warp_total : 0u);
    total = __reduce_add_sync(0xFFFFFFFFu, warp_total);
#else
    const uint32_t warps_inclusive = warp_inclusive_sum(warp_total);
    const uint32_t warp_exclusive = __shfl_sync(0xFFFFFFFFu, warps_inclusive - warp_total, warp);
    total = __shfl_sync(0xFFFFFFFFu, warps_inclusive, 31);
#endif
    parity ^= 1;
    return warp_exclusive + inclusive - value;
}


#endif
