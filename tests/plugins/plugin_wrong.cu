/* Faulty plugin for the reliability tests (docs/RELIABILITY.md): claims what the example plugin
 * claims (run_to_run, exact set, smallest-index ties, index order) but selects the k SMALLEST
 * candidates. Deterministic and wrong: every row with more than k candidates is a wrong_set
 * violation, the same on every rep, so the audit must fail it without any flapping. */
#include "plugin.h"
#include "simple_topk.cuh"

static int wrong_launch(const dsatopk_plugin_problem *problem, const dsatopk_plugin_device *,
                        void *stream, char *error, size_t error_bytes)
{
    return simple_launch<false>(problem, stream, error, error_bytes);
}

static const dsatopk_plugin wrong_plugin = {
    DSATOPK_PLUGIN_ABI_VERSION,
    "faulty-wrong",
    "faulty test plugin: selects the smallest k (wrong results, deterministically)",
    "run_to_run",
    1, 1, 0, 1,
    "test plugin only",
    simple_supports,
    nullptr, /* no scratch */
    wrong_launch,
};

extern "C" DSATOPK_PLUGIN_EXPORT const dsatopk_plugin *dsatopk_plugin_entry(void)
{
    return &wrong_plugin;
}
