/* A descending bitonic sort of 64-bit values in shared memory (block layer).
 *
 * Strides of 64 and more go through shared memory with a barrier each; the smaller ones run on
 * 64-value chunks held in registers, one warp per chunk, through shuffles (no barriers). Sorting
 * unique values makes the order a function of the values alone: deterministic. */
#ifndef DSATOPK_BLOCK_BITONIC_SORT_CUH
#define DSATOPK_BLOCK_BITONIC_SORT_CUH

#include <cstdint>

/* Bitonic steps of block size `size` for strides first_stride .. 1 (first_stride <= 32) on one
 * warp's chunk of 64 values held in registers: lane l holds elements base + l (low) and
 * base + 32 + l (high). Stride 32 pairs a lane's own two values; smaller strides pair lanes
 * through shuffles. Element i of the pair (i, i ^ stride) with the lower index keeps the larger
 * value when (i & size) == 0 (descending run), the smaller otherwise. */
static __device__ __forceinline__ void warp_bitonic_steps(uint64_t &low, uint64_t &high,
                                                          uint32_t base, uint32_t size,
                                                          uint32_t first_stride)
{
    const uint32_t lane = threadIdx.x & 31;
    const bool low_descending = ((base + lane) & size) == 0;
    const bool high_descending = ((base + 32 + lane) & size) == 0;
    for (uint32_t stride = first_stride; stride > 0; stride >>= 1) {
        if (stride == 32) {
            uint64_t larger = low > high ? low : high, smaller = low > high ? high : low;
            low = low_descending ? larger : smaller;
            high = low_descending ? smaller : larger;
        } else {
            const bool lower_of_pair = (lane & stride) == 0;
            uint64_t other_low = __shfl_xor_sync(0xFFFFFFFFu, low, stride);
            uint64_t other_high = __shfl_xor_sync(0xFFFFFFFFu, high, stride);
            bool keep_larger = lower_of_pair == low_descending;
            low = keep_larger == (low > other_low) ? low : other_low;
            keep_larger = lower_of_pair == high_descending;
            high = keep_larger == (high > other_high) ? high : other_high;
        }
    }
}

/* Descending bitonic sort of count values in shared memory (count a power of two, >= 64). Strides
 * of 64 and more go through shared memory with a barrier each; the smaller ones run on 64-value
 * chunks in registers, one warp per chunk (no barriers): for k = 2048, 20 barriers instead of
 * 66 and a third of the shared-memory traffic. */
template <uint32_t THREADS>
static __device__ void sort_descending(uint64_t *values, uint32_t count)
{
    const uint32_t lane = threadIdx.x & 31, warp = threadIdx.x >> 5, warps = THREADS / 32;
    for (uint32_t chunk = warp * 64; chunk < count; chunk += warps * 64) {
        uint64_t low = values[chunk + lane], high = values[chunk + 32 + lane];
        for (uint32_t size = 2; size <= 64; size <<= 1)
            warp_bitonic_steps(low, high, chunk, size, size >> 1);
        values[chunk + lane] = low;
        values[chunk + 32 + lane] = high;
    }
    __syncthreads();
    for (uint32_t size = 128; size <= count; size <<= 1) {
        for (uint32_t stride = size >> 1; stride >= 64; stride >>= 1) {
            for (uint32_t i = threadIdx.x; i < count / 2; i += THREADS) {
                uint32_t first = 2 * i - (i & (stride - 1)), second = first + stride;
                bool descending = (first & size) == 0;
                uint64_t a = values[first], b = values[second];
                if (descending ? a < b : a > b) {
                    values[first] = b;
                    values[second] = a;
                }
            }
            __syncthreads();
        }
        for (uint32_t chunk = warp * 64; chunk < count; chunk += warps * 64) {
            uint64_t low = values[chunk + lane], high = values[chunk + 32 + lane];
            warp_bitonic_steps(low, high, chunk, size, 32);
            values[chunk + lane] = low;
            values[chunk + 32 + lane] = high;
        }
        __syncthreads();
    }
}

#endif
