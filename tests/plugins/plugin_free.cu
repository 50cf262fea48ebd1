/* Faulty plugin for the reliability tests (docs/RELIABILITY.md): a correct kernel
 * (simple_topk.cuh) whose launch() frees the scratch its caller allocated (its later launches'
 * frees fail, and it clears that error). The caller's own free of the scratch then fails with
 * cudaErrorInvalidValue, a non-sticky error: the auditor must report it as this backend's error,
 * and the backends after it in the same worker must not inherit it. */
#include <cstdio>

#include <cuda_runtime.h>

#include "plugin.h"
#include "simple_topk.cuh"

static uint64_t free_scratch_bytes(const dsatopk_plugin_device *, const dsatopk_plugin_shape *)
{
    return 4096;
}

static int free_launch(const dsatopk_plugin_problem *problem, const dsatopk_plugin_device *,
                       void *stream, char *error, size_t error_bytes)
{
    if (problem->scratch) {
        (void)cudaFree(problem->scratch);
        (void)cudaGetLastError();
    }
    return simple_launch<true>(problem, stream, error, error_bytes);
}

static const dsatopk_plugin free_plugin = {
    DSATOPK_PLUGIN_ABI_VERSION,
    "faulty-free",
    "faulty test plugin: frees the scratch its caller owns (the caller's free then fails)",
    "run_to_run",
    1, /* exact_set */
    1, /* smallest_index_ties */
    0, /* canonical_order */
    1, /* index_ascending */
    "test plugin only",
    simple_supports,
    free_scratch_bytes,
    free_launch,
};

extern "C" DSATOPK_PLUGIN_EXPORT const dsatopk_plugin *dsatopk_plugin_entry(void)
{
    return &free_plugin;
}
