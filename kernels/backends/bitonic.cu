/* bitonic: our deterministic top-k. Output equals the CPU reference byte for byte
 * (src/reference/reference.h) on every input: level gpu_to_gpu.
 *
 * What it models: a deterministic selector (exact threshold by radix refinement, smallest-index
 * tie subset, canonical order of unique composites, no candidate ever dropped), written so that
 * nothing depends on arrival order: placements come from counts and prefix sums over
 * index-ordered tiles, never from atomics racing for slots.
 *
 * Strategy: three paths, one result, chosen per call by the planner (bitonic/plan.cuh, a pure
 * host function; kernels/include/bitonic_plan.h is its face):
 *   cluster  (k <= 4096 on sm_90+, rows of at most 16 slices) one thread-block cluster per row,
 *            the row read once into registers, histograms summed through distributed shared
 *            memory: bitonic/cluster.cuh;
 *   tree     (the other k <= 4096) rows cut into leaves of 8192 elements, one 512-thread CTA
 *            each, merged up a tree by the CTA that arrives last: bitonic/tree.cuh;
 *   one CTA  (k > 4096) one 1024-thread CTA per row: bitonic/one_cta.cuh.
 * The tree root and the cluster leader write the canonical order with bitonic/output.cuh. The
 * layers below: block/ (scans, the bitonic sort network), ptx/ (mbarrier, bulk copy, cluster
 * wrappers), common/ (order key, windows, output slots). This file only launches a plan.
 *
 * Limits: k <= 8192 (the one-CTA path's composite buffer, 8 * max(64, next_pow2(k)) bytes,
 * lives in shared memory next to 8.3 KiB of control); rows up to 2^31 - 1 elements (64-bit
 * addressing of the scores); page sizes powers of two. Launch: no allocation, no host
 * synchronisation (the cluster and one-CTA paths and one-leaf trees need no scratch; a deeper
 * tree's is caller-owned, its counters zeroed by a cudaMemsetAsync in every call): capturable
 * in a CUDA graph.
 *
 * Determinism: gpu_to_gpu. The only atomics are histogram counts and minima/maxima, whose results
 * do not depend on their order, scatter cursors into buffers that are then ranked by value, and
 * arrival counters, which only decide which CTA does a merge after every child has finished its
 * part (the merge's result is a set that does not depend on who computes it).
 *
 * One translation unit: the layers are headers, so the kernels' code and its placement in the
 * module do not depend on how the source is cut. */
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstring>

#include "topk_backends.h"
#include "bitonic_plan.h"
#include "cuda_check.h"
#include "phase_timing.h"
#include "bitonic/common.cuh"
#include "bitonic/one_cta.cuh"
#include "bitonic/tree.cuh"
#include "bitonic/cluster.cuh"
#include "bitonic/plan.cuh"

/* The tree path: a memset and the pass-1 histogram (when the tree has parents), then the tree
 * kernel, on the stream, nothing else (capturable). */
static int tree_launch(const struct topk_problem *problem, const struct bitonic_tree_plan *plan,
                       cudaStream_t stream, struct audit_error *err)
{
    const struct topk_shape *shape = &problem->shape;
    const struct tree_layout layout = tree_layout_of(shape, plan);
    if (layout.total && (!problem->scratch || problem->scratch_bytes < layout.total))
        return audit_fail(err, AUDIT_EUSAGE,
                          "bitonic: scratch of %zu B given, this shape needs %zu B "
                          "(rows cut into %u leaves; ask scratch_bytes())",
                          problem->scratch ? problem->scratch_bytes : (size_t)0, layout.total,
                          plan->nodes[0]);
    tree_scratch scratch;
    memset(&scratch, 0, sizeof(scratch));
    scratch.plan = *plan;
    if (layout.total) {
        char *base = static_cast<char *>(problem->scratch);
        scratch.arrivals = reinterpret_cast<uint32_t *>(base + layout.arrivals);
        scratch.counts = reinterpret_cast<uint32_t *>(base + layout.counts);
        scratch.lists = reinterpret_cast<uint64_t *>(base + layout.lists);
        scratch.row_histograms = reinterpret_cast<uint32_t *>(base + layout.row_histograms);
    }
    const unsigned int blocks = (unsigned int)(shape->rows * plan->nodes[0]); /* < 2^31 (plan) */
    if (layout.total) {
        CUDA_TRY(cudaMemsetAsync(problem->scratch, 0, layout.zeroed_bytes, stream), err);
        if (scratch.row_histograms) {
            k_tree_histogram<<<blocks, TREE_THREADS, 0, stream>>>(*problem, scratch);
            CUDA_TRY(cudaGetLastError(), err);
        }
    }
    const size_t smem = 2 * (size_t)composite_entries(shape->k) * sizeof(uint64_t);
    CUDA_TRY(cudaFuncSetAttribute(k_tree_topk, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                  (int)smem),
             err);
    k_tree_topk<<<blocks, TREE_THREADS, smem, stream>>>(*problem, scratch);
    CUDA_TRY(cudaGetLastError(), err);
    return 0;
}

/* Launches the cluster kernel, or its one-CTA instance (ONE) as a plain grid of one CTA per row;
 * returns 1 (launching nothing) when no cluster of that size fits on the device (the caller runs
 * the tree path), 0 when launched. */
template <uint32_t ITEMS, uint32_t SHARED_ITEMS, bool ONE>
static int cluster_launch_items(const struct topk_problem *problem,
                                const struct bitonic_cluster_plan *plan, cudaStream_t stream,
                                struct audit_error *err)
{
    CUDA_TRY(cudaFuncSetAttribute(k_cluster_topk<ITEMS, SHARED_ITEMS, ONE>,
                                  cudaFuncAttributeMaxDynamicSharedMemorySize, (int)plan->smem),
             err);
    if (plan->parts > CLUSTER_PORTABLE_PARTS)
        CUDA_TRY(cudaFuncSetAttribute(k_cluster_topk<ITEMS, SHARED_ITEMS, ONE>,
                                      cudaFuncAttributeNonPortableClusterSizeAllowed, 1),
                 err);
    cudaLaunchAttribute attribute;
    cudaLaunchConfig_t config = cluster_launch_config(problem->shape.rows, plan->parts,
                                                      TREE_THREADS, plan->smem, stream, &attribute);
    if (ONE) {
        config.numAttrs = 0; /* one CTA a row fits wherever the plan's shared memory does */
    } else {
        int clusters = 0;
        CUDA_TRY(cudaOccupancyMaxActiveClusters(&clusters, k_cluster_topk<ITEMS, SHARED_ITEMS, ONE>,
                                                 &config),
                 err);
        if (clusters < 1)
            return 1;
    }
    CUDA_TRY(cudaLaunchKernelEx(&config, k_cluster_topk<ITEMS, SHARED_ITEMS, ONE>, *problem,
                                plan->capacity, plan->staged),
             err);
    CUDA_TRY(cudaGetLastError(), err);
    return 0;
}

/* The cut's kernel: the one-CTA instance for rows of one part where it exists. */
template <uint32_t ITEMS, uint32_t SHARED_ITEMS>
static int cluster_launch_cut(const struct topk_problem *problem,
                              const struct bitonic_cluster_plan *plan, cudaStream_t stream,
                              struct audit_error *err)
{
    if constexpr (cluster_one_kernel(ITEMS + SHARED_ITEMS)) {
        if (plan->parts == 1)
            return cluster_launch_items<ITEMS, SHARED_ITEMS, true>(problem, plan, stream, err);
    }
    return cluster_launch_items<ITEMS, SHARED_ITEMS, false>(problem, plan, stream, err);
}

static int cluster_launch(const struct topk_problem *problem,
                          const struct bitonic_cluster_plan *plan, cudaStream_t stream,
                          struct audit_error *err)
{
    if (plan->items == TREE_ITEMS)
        return cluster_launch_cut<TREE_ITEMS, 0>(problem, plan, stream, err);
    if (plan->items == 2 * TREE_ITEMS)
        return cluster_launch_cut<2 * TREE_ITEMS, 0>(problem, plan, stream, err);
    if (plan->items == 4 * TREE_ITEMS)
        return cluster_launch_cut<4 * TREE_ITEMS, 0>(problem, plan, stream, err);
    return cluster_launch_cut<4 * TREE_ITEMS, 4 * TREE_ITEMS>(problem, plan, stream, err);
}

static int one_cta_launch(const struct topk_problem *problem,
                          const struct bitonic_one_cta_plan *plan, cudaStream_t stream,
                          struct audit_error *err)
{
    CUDA_TRY(cudaFuncSetAttribute(k_bitonic_topk, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                  (int)plan->smem),
             err);
    k_bitonic_topk<<<problem->shape.rows, BITONIC_THREADS, plan->smem, stream>>>(
        *problem, plan->composite_capacity, plan->stage_capacity);
    CUDA_TRY(cudaGetLastError(), err);
    return 0;
}

extern "C" int bitonic_plan_launch(const struct topk_problem *problem,
                                   const struct gpu_device_info *device,
                                   const struct bitonic_plan *plan, cudaStream_t stream,
                                   struct audit_error *err)
{
    (void)device; /* the plan was made for it */
    const struct topk_shape *shape = &problem->shape;
    if (shape->rows == 0 || shape->k == 0)
        return 0; /* nothing to write */
    if (!topk_problem_pointers_present(problem))
        return audit_fail(err, AUDIT_EUSAGE, "bitonic: missing device pointer in the problem");
    if (plan->has_cluster) {
        const int status = cluster_launch(problem, &plan->cluster, stream, err);
        if (status <= 0)
            return status; /* launched, or failed */
    }
    if (plan->has_tree)
        return tree_launch(problem, &plan->tree, stream, err);
    return one_cta_launch(problem, &plan->one_cta, stream, err);
}

/* ---- the backend-table entries: auto, and one per forced choice --------------------------- */

static const char *const choice_names[BITONIC_CHOICES] = {
    "auto",       "tree",      "cluster", "cluster16", "cluster32",
    "cluster64",  "cluster128", "tree_deep", "one_cta",
};

extern "C" const char *bitonic_choice_name(enum bitonic_choice choice)
{
    return (unsigned)choice < BITONIC_CHOICES ? choice_names[choice] : "unknown";
}

extern "C" int bitonic_choice_parse(const char *text, enum bitonic_choice *choice)
{
    for (int c = 0; text && c < BITONIC_CHOICES; c++) {
        if (strcmp(text, choice_names[c]) == 0) {
            *choice = (enum bitonic_choice)c;
            return 0;
        }
    }
    return AUDIT_EUSAGE;
}

template <enum bitonic_choice CHOICE>
static int planned_supports(const struct gpu_device_info *device, const struct topk_shape *shape,
                            char *reason, size_t reason_bytes)
{
    struct bitonic_plan plan;
    return bitonic_plan_make(device, shape, CHOICE, &plan, reason, reason_bytes);
}

template <enum bitonic_choice CHOICE>
static size_t planned_scratch_bytes(const struct gpu_device_info *device,
                                    const struct topk_shape *shape)
{
    struct bitonic_plan plan;
    char reason[256];
    if (!bitonic_plan_make(device, shape, CHOICE, &plan, reason, sizeof(reason)))
        return 0; /* refused: launch() refuses too */
    return plan.scratch_bytes;
}

template <enum bitonic_choice CHOICE>
static int planned_launch(const struct topk_problem *problem, const struct gpu_device_info *device,
                          cudaStream_t stream, struct audit_error *err)
{
    struct bitonic_plan plan;
    char reason[256];
    if (problem->shape.rows == 0 || problem->shape.k == 0)
        return 0; /* nothing to write */
    if (!bitonic_plan_make(device, &problem->shape, CHOICE, &plan, reason, sizeof(reason)))
        return audit_fail(err, AUDIT_EUNSUPPORTED, "bitonic: %s", reason);
    return bitonic_plan_launch(problem, device, &plan, stream, err);
}

#define BITONIC_ENTRY(NAME, CHOICE)                                                               \
    {                                                                                             \
        NAME,                                                                                     \
        "deterministic: exact radix threshold, smallest-index ties, canonical bitonic sort",     \
        TOPK_GPU_TO_GPU,                                                                          \
        true,  /* exact_set */                                                                    \
        true,  /* smallest_index_ties */                                                          \
        true,  /* canonical_order */                                                              \
        false, /* index_ascending */                                                              \
        "k <= 8192; rows up to 2^31 - 1 elements; k <= 4096 on sm_90+: a cluster of up to 16 "   \
        "blocks per row (slices of 8192 to 65536 elements; the smallest in one wave, else the "  \
        "fewest per row; no scratch); otherwise k <= 4096: rows cut "                             \
        "into leaves of 8192 elements (one 512-thread block each) merged up a tree (scratch: "   \
        "(8 k + 8) B per leaf and parent node, 8 KiB per row); k > 4096: one 1024-thread block " \
        "per row (8 * next_pow2(k) + 8464 B of shared memory)",                                 \
        planned_supports<CHOICE>,                                                                 \
        planned_scratch_bytes<CHOICE>,                                                            \
        planned_launch<CHOICE>,                                                                   \
    }

extern "C" const struct topk_backend topk_backend_bitonic =
    BITONIC_ENTRY("bitonic", BITONIC_CHOICE_AUTO);

/* The same entry with a choice forced (tests and measurements): "bitonic@NAME". */
static const struct topk_backend bitonic_forced[BITONIC_CHOICES] = {
    BITONIC_ENTRY("bitonic", BITONIC_CHOICE_AUTO),
    BITONIC_ENTRY("bitonic@tree", BITONIC_CHOICE_TREE),
    BITONIC_ENTRY("bitonic@cluster", BITONIC_CHOICE_CLUSTER),
    BITONIC_ENTRY("bitonic@cluster16", BITONIC_CHOICE_CLUSTER16),
    BITONIC_ENTRY("bitonic@cluster32", BITONIC_CHOICE_CLUSTER32),
    BITONIC_ENTRY("bitonic@cluster64", BITONIC_CHOICE_CLUSTER64),
    BITONIC_ENTRY("bitonic@cluster128", BITONIC_CHOICE_CLUSTER128),
    BITONIC_ENTRY("bitonic@tree_deep", BITONIC_CHOICE_TREE_DEEP),
    BITONIC_ENTRY("bitonic@one_cta", BITONIC_CHOICE_ONE_CTA),
};

extern "C" const struct topk_backend *bitonic_backend_with(enum bitonic_choice choice)
{
    if ((unsigned)choice >= BITONIC_CHOICES)
        return NULL;
    return choice == BITONIC_CHOICE_AUTO ? &topk_backend_bitonic : &bitonic_forced[choice];
}

#ifdef DSATOPK_PHASE_TIMING
extern "C" int bitonic_phase_take(struct phase_table *table, struct audit_error *err)
{
    static const struct phase_table zero = {};
    CUDA_TRY(cudaDeviceSynchronize(), err);
    CUDA_TRY(cudaMemcpyFromSymbol(table, dsatopk_phase_table, sizeof(*table)), err);
    CUDA_TRY(cudaMemcpyToSymbol(dsatopk_phase_table, &zero, sizeof(zero)), err);
    return 0;
}
#endif
