/* The example plugin (docs/PLUGIN.md): what a shim around a user's own top-k kernel looks like.
 * Here the kernel is simple_topk.cuh (deterministic radix select, index-ordered output); for a
 * FlashInfer or in-house kernel, launch() converts the problem to that kernel's arguments
 * instead. Everything the auditor needs is the description below and three functions. */
#include <cstdio>

#include "plugin.h"
#include "simple_topk.cuh"

static int example_supports(const dsatopk_plugin_device *device, const dsatopk_plugin_shape *shape,
                            char *reason, size_t reason_bytes)
{
    return simple_supports(device, shape, reason, reason_bytes);
}

/* No scratch: the kernel keeps its state in shared memory. */
static uint64_t example_scratch_bytes(const dsatopk_plugin_device *, const dsatopk_plugin_shape *)
{
    return 0;
}

static int example_launch(const dsatopk_plugin_problem *problem, const dsatopk_plugin_device *,
                          void *stream, char *error, size_t error_bytes)
{
    return simple_launch<true>(problem, stream, error, error_bytes);
}

static const dsatopk_plugin example_plugin = {
    DSATOPK_PLUGIN_ABI_VERSION,
    "example-simple",
    "example plugin: radix select on the order key, rows in index order (tests/plugins)",
    "run_to_run",
    1, /* exact_set */
    1, /* smallest_index_ties */
    0, /* canonical_order: rows come out in index order ... */
    1, /* index_ascending: ... which is what it claims instead */
    "one 256-thread block per row (rows < 2^31); any k and row length; five passes over a row",
    example_supports,
    example_scratch_bytes,
    example_launch,
};

extern "C" DSATOPK_PLUGIN_EXPORT const dsatopk_plugin *dsatopk_plugin_entry(void)
{
    return &example_plugin;
}
