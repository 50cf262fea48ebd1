/* What bitonic's paths share (kernels/backends/bitonic.cu says what bitonic is).
 *
 * The composite: a candidate as (uint64)key << 32 | (0xFFFFFFFF - index). Composites are unique
 * (indices are), so any set of them has one descending order, and that order is the canonical
 * one: key descending, index ascending. Zero ranks below every real composite (an index below
 * 2^31 makes the low word at least 2^31), so buffers are padded with zeros.
 *
 * The 512-thread CTA of the tree and cluster paths: its shared block (tree_shared), the pick of
 * the bin that holds a rank, and the slice loads. */
#ifndef DSATOPK_BITONIC_COMMON_CUH
#define DSATOPK_BITONIC_COMMON_CUH

#include <cstddef>
#include <cstdint>

#include "topk_backends.h"
#include "bitonic_plan.h"
#include "common/topk_common.cuh"
#include "block/scan.cuh"
#include "block/bitonic_sort.cuh"
#include "bitonic/phase_timing.cuh"
#include "bitonic/tuning.cuh"

#define BITONIC_MAX_K 8192u /* the one-CTA path's composite buffer in shared memory */
#define BITONIC_BINS 2048u /* 11-bit digits; the last level has 10 bits */
#define BITONIC_MIN_SORT 64u /* the sort works on 64-value chunks, one per warp */
#define BITONIC_NO_BIN 0xFFFFFFFFu

static __device__ __forceinline__ uint64_t make_composite(uint32_t key, uint32_t index)
{
    return ((uint64_t)key << 32) | (uint64_t)(0xFFFFFFFFu - index);
}

/* The 512-thread CTA of the tree and cluster paths. */
#define TREE_THREADS 512u
#define TREE_WARPS (TREE_THREADS / 32u)
#define TREE_ITEMS 16u                            /* composites per thread */
#define TREE_CAPACITY (TREE_THREADS * TREE_ITEMS) /* 8192: leaf elements, merge inputs */
#define TREE_LEAF_QUANTUM (TREE_THREADS * 4u)     /* leaves are whole float4 tiles: 2048 */
#define TREE_MAX_FAN_IN 64u /* children per parent: bounds the counts staged per merge */
#define TREE_BUCKET_LIMIT 64u /* the output by buckets: the largest bucket it ranks by scans */

static_assert(BITONIC_BINS % TREE_THREADS == 0 && BITONIC_BINS / TREE_THREADS <= 4,
              "each thread owns at most four bins of a digit");

/* The CTA's shared block: the level histograms, the output stage's bucket starts and sizes,
 * scan buffers and the values one thread publishes to the CTA. */
struct tree_shared {
    uint32_t histogram[BITONIC_BINS];
    uint32_t bucket_start[BITONIC_BINS];    /* the root's output: first rank of each bucket */
    uint32_t sub_start[BITONIC_BINS];       /* ... and of each sub-bucket of one large bucket */
    uint32_t sub_sizes[BITONIC_BINS];
    uint64_t reduce_high[TREE_WARPS], reduce_low[TREE_WARPS];
    uint32_t child_first[TREE_MAX_FAN_IN];  /* a parent's children: first entry in the packing */
    uint32_t scan[2][TREE_WARPS];
    /* One 16-byte group on its own: ptxas may read the three selected_* fields with one 16-byte
     * load, and that load must not cover the scan's words (a race on the dead word). */
    uint32_t selected_digit, selected_above, selected_count, is_last;
    uint32_t children_total;
    uint32_t overflow_count, overflow_bucket;
    uint32_t kept_end; /* tree_bucket: the end of the bucket that holds position limit - 1 */
};
static_assert(offsetof(tree_shared, selected_digit) % 16 == 0,
              "selected_* fill one 16-byte group (see above)");

/* A thread's `per` bins from `top` down (counts[j] is bin top - j, 0 for j >= per) with `above`
 * candidates in the bins above them (a block scan in thread order): the one holding the
 * remaining-th largest goes to shared.selected_digit / selected_above / selected_count. At most
 * one thread writes; the caller's barrier publishes it. */
static __device__ __forceinline__ void pick_bin(const uint32_t (&counts)[4], uint32_t per,
                                                uint32_t top, uint32_t above, uint32_t remaining,
                                                tree_shared &shared)
{
#pragma unroll
    for (uint32_t j = 0; j < 4; j++) {
        if (j < per && above < remaining && remaining <= above + counts[j]) {
            shared.selected_digit = top - j;
            shared.selected_above = above;
            shared.selected_count = counts[j];
        }
        above += counts[j];
    }
}

/* The raw float bits of the slice of row `row` that starts at element `first` and holds at most
 * `slice` elements: thread t, item 4g + j holds slice element g * 2048 + 4t + j (16-byte loads
 * when the slice starts 16-byte aligned), exact -inf past the row's end. All loads are issued
 * before any is used. Returns how many of the slice's elements are in the row. */
template <uint32_t ITEMS>
static __device__ __forceinline__ uint32_t load_slice_bits(const struct topk_problem &problem,
                                                           uint32_t row, uint64_t first,
                                                           uint32_t slice, uint32_t (&bits)[ITEMS])
{
    const int32_t signed_length = problem.lengths[row];
    const uint64_t length = signed_length > 0 ? (uint64_t)signed_length : 0u;
    uint32_t count = 0;
    if (first < length)
        count = (uint32_t)(length - first < slice ? length - first : slice);
    const float *base = row_window(problem, row) + first;
    const bool aligned = ((uintptr_t)base & 15u) == 0;
    if (aligned && count == slice && slice >= TREE_LEAF_QUANTUM * (ITEMS / 4)) {
        /* The common case, one 16-byte load per group: a branch of its own, so that the
         * per-group fallback below (scalar loads, bounds) is not laid out between these loads
         * and fetched with them (the code runs once per CTA: instruction fetch stalls). */
#pragma unroll
        for (uint32_t g = 0; g < ITEMS / 4; g++) {
            const float4 quad = __ldg(reinterpret_cast<const float4 *>(
                base + g * TREE_LEAF_QUANTUM + threadIdx.x * 4));
            bits[4 * g + 0] = __float_as_uint(quad.x);
            bits[4 * g + 1] = __float_as_uint(quad.y);
            bits[4 * g + 2] = __float_as_uint(quad.z);
            bits[4 * g + 3] = __float_as_uint(quad.w);
        }
        return count;
    }
#pragma unroll
    for (uint32_t g = 0; g < ITEMS / 4; g++) {
        const uint32_t element = g * TREE_LEAF_QUANTUM + threadIdx.x * 4;
        if (aligned && element + 4 <= count) {
            const float4 quad = __ldg(reinterpret_cast<const float4 *>(base + element));
            bits[4 * g + 0] = __float_as_uint(quad.x);
            bits[4 * g + 1] = __float_as_uint(quad.y);
            bits[4 * g + 2] = __float_as_uint(quad.z);
            bits[4 * g + 3] = __float_as_uint(quad.w);
        } else {
#pragma unroll
            for (uint32_t j = 0; j < 4; j++)
                bits[4 * g + j] = element + j < count ? __float_as_uint(__ldg(base + element + j))
                                                      : TOPK_NEG_INF_BITS;
        }
    }
    return count;
}

/* Entries of the sort buffer for `value` selected composites (device side of the planner's
 * composite_entries()): a power of two, at least one warp's sort chunk. */
static __device__ __forceinline__ uint32_t composite_entries_device(uint32_t value)
{
    uint32_t power = BITONIC_MIN_SORT;
    while (power < value)
        power <<= 1;
    return power;
}

#endif
