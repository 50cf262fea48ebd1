/* The backend table: adding a backend is one .cu file and one line here (docs/BACKENDS.md). */
#include <string.h>

#include "bitonic_plan.h"
#include "topk_backends.h"

extern const struct topk_backend topk_backend_radix, topk_backend_filtered,
    topk_backend_filtered_det, topk_backend_bitonic, topk_backend_sort, topk_backend_fi_auto,
    topk_backend_fi_det, topk_backend_fi_det_sorted, topk_backend_fi_graph_safe;

const struct topk_backend *const topk_backend_table[] = {
    &topk_backend_radix,        /* models sgl-kernel fast_topk_v2 */
    &topk_backend_filtered,     /* models FlashInfer FilteredTopK, tie-break none */
    &topk_backend_filtered_det, /* FilteredTopK deterministic mode, tie-break small */
    &topk_backend_bitonic,      /* ours: deterministic, canonical order */
    &topk_backend_sort,         /* CUB segmented radix sort baseline */
    /* FlashInfer's own kernels (flashinfer.cu; "not built" without its headers): */
    &topk_backend_fi_auto,       /* non-deterministic, its heuristic's path */
    &topk_backend_fi_det,        /* deterministic, tie-break none */
    &topk_backend_fi_det_sorted, /* deterministic, tie-break small, sorted output */
    &topk_backend_fi_graph_safe, /* dsa_graph_safe transforms, tie-break small */
    NULL,
};

/* "bitonic@PLAN": bitonic with a plan forced (bitonic_plan.h), for tests and measurements. */
static const struct topk_backend *find_planned(const char *name)
{
    static const char prefix[] = "bitonic@";
    enum bitonic_choice choice;
    if (strncmp(name, prefix, sizeof(prefix) - 1) != 0 ||
        bitonic_choice_parse(name + sizeof(prefix) - 1, &choice) != 0)
        return NULL;
    return bitonic_backend_with(choice);
}

const struct topk_backend *topk_backend_find(const char *name)
{
    for (int i = 0; topk_backend_table[i]; i++)
        if (strcmp(topk_backend_table[i]->name, name) == 0)
            return topk_backend_table[i];
    return find_planned(name);
}

const char *topk_determinism_name(enum topk_determinism level)
{
    switch (level) {
    case TOPK_NOT_GUARANTEED: return "not_guaranteed";
    case TOPK_RUN_TO_RUN: return "run_to_run";
    case TOPK_GPU_TO_GPU: return "gpu_to_gpu";
    }
    return "unknown";
}

bool topk_problem_pointers_present(const struct topk_problem *problem)
{
    const struct topk_shape *shape = &problem->shape;
    if (!problem->lengths || !problem->out || (shape->row_stride > 0 && !problem->scores))
        return false;
    return !shape->has_page_table ||
           ((problem->page_table_cols == 0 || problem->page_table) && problem->raw_out);
}
