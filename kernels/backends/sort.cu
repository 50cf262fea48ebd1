/* sort: the baseline a user would write, and a second deterministic backend that equals the CPU
 * reference byte for byte (level gpu_to_gpu).
 *
 * What it models: "sort the row, keep the first k": a full segmented sort instead of a selection.
 *
 * Strategy:
 *  1. k_sort_prepare writes, for every element of every row, the order key (src/reference/reference.h) and
 *     the window index into scratch; row b's segment starts at b * max_length (no compaction:
 *     a segment's end is begin + length, the slack after it is never touched).
 *  2. cub::DeviceSegmentedRadixSort::SortPairsDescending over the 32 key bits. Radix sort is
 *     stable, so equal keys keep their input order, which is ascending index: exactly the
 *     reference's tie rule.
 *  3. k_sort_output keeps the first k entries of each sorted segment, skipping exact -inf. Those
 *     all share the key 0x007FFFFF, so they form one contiguous block below every finite, -0.0
 *     and NaN-above key and above the -NaN keys; two binary searches find the block and the output
 *     reads around it. Then -1 padding and write_output (page table, raw_out).
 *
 * Limits: rows * max_length <= 2^31 - 1 items (CUB's int item count and offsets); scratch of
 * about 16 bytes per item plus CUB's temporary storage, queried up front in scratch_bytes. Launch
 * allocates nothing and does not synchronise (CUB's dispatch with caller-provided temporary
 * storage is capturable in a CUDA graph). */
#include <climits>
#include <cstdint>
#include <cstdio>

#include <cub/device/device_segmented_radix_sort.cuh>

#include "topk_backends.h"
#include "cuda_check.h"
#include "common/topk_common.cuh"

#define SORT_PREPARE_THREADS 256
#define SORT_OUTPUT_THREADS 256
#define SORT_SCRATCH_ALIGN 256

/* The scratch buffer: keys and values twice (CUB double buffer), segment offsets, then CUB's
 * temporary storage. Computed identically by scratch_bytes and launch. */
struct sort_layout {
    size_t items;
    size_t keys_offset[2], values_offset[2], begin_offset, end_offset, temp_offset;
    size_t temp_bytes, total_bytes;
};

static size_t align_up(size_t value)
{
    return (value + SORT_SCRATCH_ALIGN - 1) / SORT_SCRATCH_ALIGN * SORT_SCRATCH_ALIGN;
}

static size_t sort_items(const struct topk_shape *shape)
{
    return shape->max_length > 0 ? (size_t)shape->rows * (size_t)shape->max_length : 0;
}

/* Fills layout; CUB's temporary size comes from its own size query (a host computation: no
 * launch, no synchronisation). */
static cudaError_t sort_plan(const struct topk_shape *shape, struct sort_layout *layout)
{
    size_t offset = 0, temp_bytes = 0;
    layout->items = sort_items(shape);
    for (int i = 0; i < 2; i++) {
        layout->keys_offset[i] = offset;
        offset = align_up(offset + layout->items * sizeof(uint32_t));
        layout->values_offset[i] = offset;
        offset = align_up(offset + layout->items * sizeof(int32_t));
    }
    layout->begin_offset = offset;
    offset = align_up(offset + (size_t)shape->rows * sizeof(int));
    layout->end_offset = offset;
    offset = align_up(offset + (size_t)shape->rows * sizeof(int));
    layout->temp_offset = offset;
    if (layout->items > 0) {
        cub::DoubleBuffer<uint32_t> keys(nullptr, nullptr);
        cub::DoubleBuffer<int32_t> values(nullptr, nullptr);
        cudaError_t status = cub::DeviceSegmentedRadixSort::SortPairsDescending(
            nullptr, temp_bytes, keys, values, (int)layout->items, (int)shape->rows,
            (const int *)nullptr, (const int *)nullptr);
        if (status != cudaSuccess)
            return status;
    }
    layout->temp_bytes = temp_bytes;
    layout->total_bytes = align_up(offset + temp_bytes);
    return cudaSuccess;
}

static __global__ void __launch_bounds__(SORT_PREPARE_THREADS)
k_sort_prepare(const struct topk_problem problem, uint32_t *keys, int32_t *values, int *begins,
               int *ends)
{
    const uint64_t max_length = (uint64_t)problem.shape.max_length;
    const uint64_t items = (uint64_t)problem.shape.rows * max_length;
    const uint64_t stride = (uint64_t)gridDim.x * blockDim.x;
    const uint64_t first = (uint64_t)blockIdx.x * blockDim.x + threadIdx.x;
    for (uint64_t row = first; row < problem.shape.rows; row += stride) {
        int32_t length = problem.lengths[row];
        length = length < 0 ? 0 : (uint64_t)length > max_length ? (int32_t)max_length : length;
        begins[row] = (int)(row * max_length);
        ends[row] = (int)(row * max_length + (uint64_t)length);
    }
    /* Row-major over (row, index): consecutive threads read consecutive scores. */
    for (uint64_t item = first; item < items; item += stride) {
        uint32_t row = (uint32_t)(item / max_length);
        uint32_t index = (uint32_t)(item % max_length);
        if ((int64_t)index >= (int64_t)problem.lengths[row])
            continue;
        keys[item] = order_key(row_window(problem, row)[index]);
        values[item] = (int32_t)index;
    }
}

/* First index in [low, high) whose key is <= bound (keys descending), by binary search. */
static __device__ uint32_t first_not_above(const uint32_t *keys, uint32_t low, uint32_t high,
                                           uint32_t bound)
{
    while (low < high) {
        uint32_t middle = low + (high - low) / 2;
        if (keys[middle] > bound)
            low = middle + 1;
        else
            high = middle;
    }
    return low;
}

static __global__ void __launch_bounds__(SORT_OUTPUT_THREADS)
k_sort_output(const struct topk_problem problem, const uint32_t *keys, const int32_t *values,
              const int *begins, const int *ends)
{
    __shared__ uint32_t above_count, infinity_count;
    const uint32_t row = blockIdx.x;
    const int begin = begins[row];
    const uint32_t length = (uint32_t)(ends[row] - begin);
    const uint32_t *row_keys = keys + begin;
    const int32_t *row_values = values + begin;
    if (threadIdx.x == 0) {
        /* Keys above -inf's come first, then the -inf block, then the -NaN keys. */
        uint32_t above = first_not_above(row_keys, 0, length, TOPK_NEG_INF_KEY);
        uint32_t end = first_not_above(row_keys, above, length, TOPK_NEG_INF_KEY - 1);
        above_count = above;
        infinity_count = end - above;
    }
    __syncthreads();
    const uint32_t candidates = length - infinity_count;
    for (uint32_t j = threadIdx.x; j < problem.shape.k; j += blockDim.x) {
        int32_t index = -1;
        if (j < candidates) {
            uint32_t position = j < above_count ? j : j + infinity_count;
            index = row_values[position];
        }
        write_output(problem, row, j, index);
    }
}

static int sort_supports(const struct gpu_device_info *device, const struct topk_shape *shape,
                         char *reason, size_t reason_bytes)
{
    if (!topk_built_for(device, reason, reason_bytes))
        return 0;
    if (shape->max_length < 0) {
        snprintf(reason, reason_bytes, "negative row length %d", (int)shape->max_length);
        return 0;
    }
    if (shape->rows > (uint32_t)INT_MAX) {
        snprintf(reason, reason_bytes, "%u rows exceed CUB's int segment count", shape->rows);
        return 0;
    }
    if (sort_items(shape) > (size_t)INT_MAX) {
        snprintf(reason, reason_bytes,
                 "%u rows x %d elements = %zu items exceed CUB's int item count (2^31 - 1)",
                 shape->rows, (int)shape->max_length, sort_items(shape));
        return 0;
    }
    if (shape->has_page_table &&
        (shape->page_size == 0 || (shape->page_size & (shape->page_size - 1)) != 0)) {
        snprintf(reason, reason_bytes, "page size %u is not a power of two", shape->page_size);
        return 0;
    }
    snprintf(reason, reason_bytes, "scratch of about %zu B (16 B per item plus CUB's temporary)",
             sort_items(shape) * 16);
    return 1;
}

static size_t sort_scratch_bytes(const struct gpu_device_info *device,
                                 const struct topk_shape *shape)
{
    struct sort_layout layout;
    (void)device;
    if (sort_plan(shape, &layout) != cudaSuccess) {
        /* No CUDA device to ask: an amount no caller can allocate, so the launch never runs
         * with too little. */
        (void)cudaGetLastError();
        return SIZE_MAX;
    }
    return layout.total_bytes;
}

static int sort_launch(const struct topk_problem *problem, const struct gpu_device_info *device,
                       cudaStream_t stream, struct audit_error *err)
{
    const struct topk_shape *shape = &problem->shape;
    struct sort_layout layout;
    char reason[256];
    if (shape->rows == 0 || shape->k == 0)
        return 0;
    if (!sort_supports(device, shape, reason, sizeof(reason)))
        return audit_fail(err, AUDIT_EUNSUPPORTED, "sort: %s", reason);
    if (!topk_problem_pointers_present(problem))
        return audit_fail(err, AUDIT_EUSAGE, "sort: missing device pointer in the problem");
    CUDA_TRY(sort_plan(shape, &layout), err);
    if (!problem->scratch || problem->scratch_bytes < layout.total_bytes)
        return audit_fail(err, AUDIT_EUSAGE, "sort: scratch of %zu B given, %zu B needed",
                          problem->scratch_bytes, layout.total_bytes);
    char *scratch = (char *)problem->scratch;
    uint32_t *keys[2] = { (uint32_t *)(scratch + layout.keys_offset[0]),
                          (uint32_t *)(scratch + layout.keys_offset[1]) };
    int32_t *values[2] = { (int32_t *)(scratch + layout.values_offset[0]),
                           (int32_t *)(scratch + layout.values_offset[1]) };
    int *begins = (int *)(scratch + layout.begin_offset);
    int *ends = (int *)(scratch + layout.end_offset);
    cub::DoubleBuffer<uint32_t> key_buffers(keys[0], keys[1]);
    cub::DoubleBuffer<int32_t> value_buffers(values[0], values[1]);

    size_t work = layout.items > shape->rows ? layout.items : shape->rows;
    size_t blocks = (work + SORT_PREPARE_THREADS - 1) / SORT_PREPARE_THREADS;
    if (blocks > 65536)
        blocks = 65536; /* grid-stride loops cover the rest */
    k_sort_prepare<<<(unsigned)blocks, SORT_PREPARE_THREADS, 0, stream>>>(
        *problem, keys[0], values[0], begins, ends);
    CUDA_TRY(cudaGetLastError(), err);
    if (layout.items > 0) {
        size_t temp_bytes = layout.temp_bytes;
        CUDA_TRY(cub::DeviceSegmentedRadixSort::SortPairsDescending(
                     scratch + layout.temp_offset, temp_bytes, key_buffers, value_buffers,
                     (int)layout.items, (int)shape->rows, begins, ends, 0, 32, stream),
                 err);
        CUDA_TRY(cudaGetLastError(), err);
    }
    /* The double buffer's selector says, on the host, which buffer holds the sorted pairs. */
    k_sort_output<<<shape->rows, SORT_OUTPUT_THREADS, 0, stream>>>(
        *problem, key_buffers.Current(), value_buffers.Current(), begins, ends);
    CUDA_TRY(cudaGetLastError(), err);
    return 0;
}

extern "C" const struct topk_backend topk_backend_sort = {
    "sort",
    "baseline: CUB segmented radix sort of (key, index) pairs (stable), first k kept",
    TOPK_GPU_TO_GPU,
    true,  /* exact_set */
    true,  /* smallest_index_ties */
    true,  /* canonical_order */
    false, /* index_ascending */
    "rows x max_length <= 2^31 - 1 items; scratch of ~16 B per item plus CUB temporary storage",
    sort_supports,
    sort_scratch_bytes,
    sort_launch,
};
