/* Faulty plugin for the reliability tests (docs/RELIABILITY.md): the exact threshold of
 * simple_topk.cuh, then an arrival-order compaction, the way fast production kernels gather:
 * every thread that holds a winner takes the next output slot with atomicAdd, and the ties at
 * the k-th value are taken first come, first served, from 1024 threads that walk the row without
 * barriers. The selected scores are always the right multiset, but which tied indices make it
 * and the order of the row depend on scheduling.
 *
 * It claims run_to_run and smallest-index ties (the lie under test): on rows with ties at the
 * boundary the audit must see the tie rule broken and, across reps, the output flap. */
#include <cstdint>
#include <cstdio>

#include <cuda_runtime.h>

#include "plugin.h"
#include "simple_topk.cuh"

#define ARRIVAL_THREADS 1024

static __global__ void __launch_bounds__(ARRIVAL_THREADS)
    k_arrival_topk(const dsatopk_plugin_problem p)
{
    __shared__ uint32_t next_slot, ties_taken;
    const uint32_t b = blockIdx.x, k = p.shape.k;
    int32_t length;
    const uint32_t *bits = simple_row(p, b, &length);
    uint32_t threshold, remaining;
    simple_threshold<true>(bits, length, k, &threshold, &remaining);
    if (threadIdx.x == 0) {
        next_slot = 0;
        ties_taken = 0;
    }
    __syncthreads();
    for (int64_t i = threadIdx.x; i < length; i += blockDim.x) {
        uint32_t value = bits[i];
        if (value == SIMPLE_TOPK_NEG_INF_BITS)
            continue;
        uint32_t key = simple_order_key(value);
        bool take = key > threshold;
        if (!take && key == threshold)
            take = atomicAdd(&ties_taken, 1u) < remaining;
        if (take) {
            uint32_t slot = atomicAdd(&next_slot, 1u);
            if (slot < k)
                simple_write(p, b, slot, (int32_t)i);
        }
    }
    __syncthreads();
    for (uint32_t j = (next_slot < k ? next_slot : k) + threadIdx.x; j < k; j += blockDim.x)
        simple_write(p, b, j, -1);
}

static int arrival_launch(const dsatopk_plugin_problem *problem, const dsatopk_plugin_device *,
                          void *stream, char *error, size_t error_bytes)
{
    if (problem->shape.rows == 0)
        return 0;
    k_arrival_topk<<<problem->shape.rows, ARRIVAL_THREADS, 0,
                     static_cast<cudaStream_t>(stream)>>>(*problem);
    cudaError_t status = cudaGetLastError();
    if (status != cudaSuccess) {
        snprintf(error, error_bytes, "k_arrival_topk launch: %s", cudaGetErrorString(status));
        return 1;
    }
    return 0;
}

static const dsatopk_plugin arrival_plugin = {
    DSATOPK_PLUGIN_ABI_VERSION,
    "faulty-arrival",
    "faulty test plugin: exact threshold, ties and order by atomic arrival (claims run_to_run)",
    "run_to_run",
    1, /* exact_set: true */
    1, /* smallest_index_ties: false, claimed anyway */
    0,
    0,
    "test plugin only",
    simple_supports,
    nullptr,
    arrival_launch,
};

extern "C" DSATOPK_PLUGIN_EXPORT const dsatopk_plugin *dsatopk_plugin_entry(void)
{
    return &arrival_plugin;
}
