/* A simple, deterministic top-k kernel for the test plugins, written against src/replay/plugin.h only
 * (no header of the auditor's kernels), as a user's shim would be.
 *
 * One 256-thread block per row:
 *  1. Radix select on the 32-bit order key (the reference's IEEE total order: larger key ranks
 *     first), four 8-bit digits from the most significant. Each digit is a shared-memory
 *     histogram of the candidates still matching the prefix found so far; thread 0 walks it from
 *     the top to the bin holding the remaining rank. After four digits the prefix is the k-th
 *     key T and `ties` how many candidates equal to T are still to take.
 *  2. Ordered compaction: tiles of 256 elements in index order; each thread's slot comes from
 *     block-wide counts (warp ballots), never from atomics, so the output is the same on every
 *     run: the candidates above T and the first `ties` equal to T, by ascending index.
 * Claims: exact set, smallest-index ties, rows sorted by index (not the reference's order),
 * hence level run_to_run. Rows with at most k candidates take them all; -1 pads the rest.
 * Candidates exclude exact -inf (bits 0xFF800000). SELECT_LARGEST false selects the smallest
 * instead: the "wrong results" test plugin. */
#ifndef DSATOPK_TEST_SIMPLE_TOPK_CUH
#define DSATOPK_TEST_SIMPLE_TOPK_CUH

#include <cstdint>
#include <cstdio>

#include <cuda_runtime.h>

#include "plugin.h"

#define SIMPLE_TOPK_THREADS 256
#define SIMPLE_TOPK_WARPS (SIMPLE_TOPK_THREADS / 32)
#define SIMPLE_TOPK_NEG_INF_BITS 0xFF800000u

static __device__ __forceinline__ uint32_t simple_order_key(uint32_t bits)
{
    return (bits & 0x80000000u) ? ~bits : (bits | 0x80000000u);
}

/* Row b's translated output for window index raw (or -1) in slot j. */
static __device__ __forceinline__ void simple_write(const dsatopk_plugin_problem &p, uint32_t b,
                                                    uint32_t j, int32_t raw)
{
    uint64_t slot = (uint64_t)b * p.shape.k + j;
    int32_t translated = raw;
    if (p.page_table && raw >= 0) {
        int64_t first = p.page_table_row_starts ? p.page_table_row_starts[b] : 0;
        int64_t page = p.page_table[(uint64_t)b * p.page_table_cols + first +
                                    (uint32_t)raw / p.shape.page_size];
        translated = (int32_t)(page * p.shape.page_size + (uint32_t)raw % p.shape.page_size);
    }
    p.out[slot] = translated;
    if (p.raw_out)
        p.raw_out[slot] = raw;
}

/* How many threads before this one have flag set; *total gets the block's count. Every thread
 * of the block must call it (it has barriers). */
static __device__ uint32_t simple_count_before(bool flag, uint32_t *total, uint32_t *warp_counts)
{
    const uint32_t lane = threadIdx.x & 31u, warp = threadIdx.x >> 5;
    const uint32_t ballot = __ballot_sync(0xFFFFFFFFu, flag);
    uint32_t before = __popc(ballot & ((1u << lane) - 1u));
    __syncthreads(); /* the previous call's readers are done with warp_counts */
    if (lane == 0)
        warp_counts[warp] = __popc(ballot);
    __syncthreads();
    uint32_t sum = 0;
    for (uint32_t w = 0; w < SIMPLE_TOPK_WARPS; w++) {
        if (w < warp)
            before += warp_counts[w];
        sum += warp_counts[w];
    }
    *total = sum;
    return before;
}

/* The order key the kernels rank by (the smallest are selected when SELECT_LARGEST is false). */
template <bool SELECT_LARGEST>
static __device__ __forceinline__ uint32_t simple_rank_key(uint32_t value)
{
    uint32_t key = simple_order_key(value);
    return SELECT_LARGEST ? key : ~key;
}

/* Step 1, radix select over a row: *threshold receives the k-th key T and *remaining how many
 * candidates equal to T are to be taken. Every thread of the block must call it. */
template <bool SELECT_LARGEST>
static __device__ void simple_threshold(const uint32_t *bits, int32_t length, uint32_t k,
                                        uint32_t *threshold, uint32_t *remaining_out)
{
    __shared__ uint32_t histogram[256];
    __shared__ uint32_t shared_prefix, shared_remaining;
    uint32_t prefix = 0, mask = 0, remaining = k;
    for (int shift = 24; shift >= 0; shift -= 8) {
        for (uint32_t i = threadIdx.x; i < 256; i += blockDim.x)
            histogram[i] = 0;
        __syncthreads();
        for (int64_t i = threadIdx.x; i < length; i += blockDim.x) {
            uint32_t value = bits[i];
            uint32_t key = simple_rank_key<SELECT_LARGEST>(value);
            if (value != SIMPLE_TOPK_NEG_INF_BITS && (key & mask) == prefix)
                atomicAdd(&histogram[(key >> shift) & 0xFFu], 1u); /* a count: order-free */
        }
        __syncthreads();
        if (threadIdx.x == 0) {
            uint32_t rank = remaining;
            int digit = 255;
            for (; digit > 0 && histogram[digit] < rank; digit--)
                rank -= histogram[digit];
            /* Fewer candidates than the rank (a short row) ends in bin 0 with rank left over:
             * every candidate is then above T or equal to it and taken. */
            shared_prefix = prefix | ((uint32_t)digit << shift);
            shared_remaining = rank;
        }
        __syncthreads();
        prefix = shared_prefix;
        remaining = shared_remaining;
        mask |= 0xFFu << shift;
        __syncthreads();
    }
    *threshold = prefix;
    *remaining_out = remaining;
}

static __device__ __forceinline__ const uint32_t *simple_row(const dsatopk_plugin_problem &p,
                                                             uint32_t b, int32_t *length)
{
    *length = p.lengths[b] > 0 ? p.lengths[b] : 0;
    const float *window = p.scores + (uint64_t)b * p.shape.row_stride +
                          (p.row_starts ? p.row_starts[b] : 0);
    return reinterpret_cast<const uint32_t *>(window);
}

template <bool SELECT_LARGEST>
static __global__ void __launch_bounds__(SIMPLE_TOPK_THREADS)
    k_simple_topk(const dsatopk_plugin_problem p)
{
    __shared__ uint32_t warp_counts[SIMPLE_TOPK_WARPS];
    const uint32_t b = blockIdx.x, k = p.shape.k;
    int32_t length;
    const uint32_t *bits = simple_row(p, b, &length);
    uint32_t threshold, remaining;
    simple_threshold<SELECT_LARGEST>(bits, length, k, &threshold, &remaining);

    /* 2. Ordered compaction: above T, then the first `remaining` equal to T, by index. */
    uint32_t written = 0, ties_seen = 0;
    for (int64_t base = 0; base < length && written < k; base += blockDim.x) {
        const int64_t i = base + threadIdx.x;
        bool above = false, equal = false;
        if (i < length) {
            uint32_t value = bits[i];
            uint32_t key = simple_rank_key<SELECT_LARGEST>(value);
            bool candidate = value != SIMPLE_TOPK_NEG_INF_BITS;
            above = candidate && key > threshold;
            equal = candidate && key == threshold;
        }
        uint32_t equal_total, take_total;
        uint32_t equal_before = simple_count_before(equal, &equal_total, warp_counts);
        bool take = above || (equal && ties_seen + equal_before < remaining);
        uint32_t slot = simple_count_before(take, &take_total, warp_counts);
        if (take && written + slot < k)
            simple_write(p, b, written + slot, (int32_t)i);
        written += take_total;
        ties_seen += equal_total;
    }
    for (uint32_t j = (written < k ? written : k) + threadIdx.x; j < k; j += blockDim.x)
        simple_write(p, b, j, -1);
}

/* The architectures this object has code for (nvcc's list: SASS for each, PTX of the highest).
 * Pure host code: what supports() may use. */
static inline bool simple_built_for(const dsatopk_plugin_device *device)
{
    static const int archs[] = { __CUDA_ARCH_LIST__ };
    const int device_arch = device->cc_major * 100 + device->cc_minor * 10;
    int highest = 0;
    for (size_t i = 0; i < sizeof(archs) / sizeof(archs[0]); i++) {
        if (archs[i] / 100 == device->cc_major && archs[i] <= device_arch)
            return true;
        if (archs[i] > highest)
            highest = archs[i];
    }
    return device_arch >= highest;
}

static inline int simple_supports(const dsatopk_plugin_device *device,
                                  const dsatopk_plugin_shape *shape, char *reason,
                                  size_t reason_bytes)
{
    if (!simple_built_for(device)) {
        snprintf(reason, reason_bytes, "built without code for compute capability %d.%d",
                 device->cc_major, device->cc_minor);
        return 0;
    }
    if (shape->rows > 0x7FFFFFFFu) {
        snprintf(reason, reason_bytes, "%u rows: at most 2^31 - 1 (one block per row)",
                 shape->rows);
        return 0;
    }
    if (shape->has_page_table && (shape->page_size == 0 ||
                                  (shape->page_size & (shape->page_size - 1)) != 0)) {
        snprintf(reason, reason_bytes, "page size %u is not a power of two", shape->page_size);
        return 0;
    }
    return 1;
}

/* Launches the kernel and checks the launch with this plugin's own CUDA runtime. */
template <bool SELECT_LARGEST>
static int simple_launch(const dsatopk_plugin_problem *problem, void *stream, char *error,
                         size_t error_bytes)
{
    if (problem->shape.rows == 0)
        return 0;
    k_simple_topk<SELECT_LARGEST><<<problem->shape.rows, SIMPLE_TOPK_THREADS, 0,
                                    static_cast<cudaStream_t>(stream)>>>(*problem);
    cudaError_t status = cudaGetLastError();
    if (status != cudaSuccess) {
        snprintf(error, error_bytes, "k_simple_topk launch: %s (%s)", cudaGetErrorString(status),
                 cudaGetErrorName(status));
        return 1;
    }
    return 0;
}

#endif
