/* Faulty plugin for the reliability tests (docs/RELIABILITY.md): its kernel reads 2^40 floats
 * (4 TiB) past the scores, which no allocation covers: "an illegal memory access was
 * encountered" at the caller's next synchronisation, a sticky error that poisons the CUDA
 * context of the process. The auditor must report it as this backend's cuda_error and go on
 * with the other backends (in a fresh worker process). */
#include <cstdint>
#include <cstdio>

#include <cuda_runtime.h>

#include "plugin.h"

static __global__ void k_read_far(const dsatopk_plugin_problem p)
{
    const float *far = p.scores + ((uint64_t)1 << 40) + blockIdx.x;
    float value = *reinterpret_cast<const volatile float *>(far);
    /* Use the value, so the load cannot be dropped. */
    for (uint32_t j = threadIdx.x; j < p.shape.k; j += blockDim.x)
        p.out[(uint64_t)blockIdx.x * p.shape.k + j] = value > 0.0f ? 0 : -1;
}

static int oob_supports(const dsatopk_plugin_device *, const dsatopk_plugin_shape *shape,
                        char *reason, size_t reason_bytes)
{
    if (shape->rows > 0x7FFFFFFFu) {
        snprintf(reason, reason_bytes, "at most 2^31 - 1 rows");
        return 0;
    }
    return 1;
}

static int oob_launch(const dsatopk_plugin_problem *problem, const dsatopk_plugin_device *,
                      void *stream, char *error, size_t error_bytes)
{
    if (problem->shape.rows == 0)
        return 0;
    k_read_far<<<problem->shape.rows, 128, 0, static_cast<cudaStream_t>(stream)>>>(*problem);
    cudaError_t status = cudaGetLastError();
    if (status != cudaSuccess) {
        snprintf(error, error_bytes, "k_read_far launch: %s", cudaGetErrorString(status));
        return 1;
    }
    return 0;
}

static const dsatopk_plugin oob_plugin = {
    DSATOPK_PLUGIN_ABI_VERSION,
    "faulty-oob",
    "faulty test plugin: reads 4 TiB past the scores (illegal address)",
    "not_guaranteed",
    0, 0, 0, 0,
    "test plugin only",
    oob_supports,
    nullptr,
    oob_launch,
};

extern "C" DSATOPK_PLUGIN_EXPORT const dsatopk_plugin *dsatopk_plugin_entry(void)
{
    return &oob_plugin;
}
