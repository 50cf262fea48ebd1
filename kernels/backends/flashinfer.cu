/* fi-auto, fi-det, fi-det-sorted, fi-graph-safe: FlashInfer's own top-k kernels, not models.
 *
 * What they are: the native top-k of flashinfer-python (Apache-2.0), compiled from the headers
 * its wheel ships (<package>/data/include, found at configure time: meson options flashinfer
 * and flashinfer_include) and called through the C++ entries its Python wrappers call:
 * TopKDispatch (flashinfer.top_k), TopKRaggedTransformDispatch (top_k_ragged_transform) and
 * TopKPageTableTransformDispatch (top_k_page_table_transform, with the configurable page-table
 * policy that also writes the raw indices). FlashInfer's heuristic ShouldUseFilteredTopK (rows,
 * row width, k, the mode, the device's shared memory and the FLASHINFER_TOPK_ALGO environment
 * variable) picks FilteredTopK (one 1024-thread CTA per row) or the multi-CTA radix select.
 * Nothing here re-implements a kernel; no FlashInfer source is in this tree.
 *
 * The entry per record (fi_entry_of): dense rows (no row starts, no page table, every length
 * equal to row_stride and at least k) go to TopKDispatch; other records without a page table
 * to the ragged transform with zero offsets (window-relative indices); paged records to the
 * page-table transform. fi-graph-safe always takes the transforms, the way vLLM's deterministic
 * indexer calls them; fi-det-sorted only TopKDispatch, the one entry with sorted output, and
 * refuses other records. The row width handed over (max_len) is row_stride, the width of the
 * score tensor an engine passes.
 *
 * Scratch (fi_layout): the multi-CTA radix path's RadixRowState per row group and its
 * deterministic collect counts (FlashInfer's Python layer hands over 1 MiB); TopKDispatch's
 * values (rows x k floats: its deterministic finalize and its sort read them); rows int32 of
 * zeros (the ragged transform's offsets, or page-table row starts where a record has row starts
 * but none for its page table: FlashInfer would use the row starts in their place). launch
 * zeroes what the call reads with cudaMemsetAsync: the radix kernels leave their row states
 * zeroed for the next call, but scratch arrives poisoned.
 *
 * Determinism: fi-auto not_guaranteed (atomics in arrival order); fi-det run_to_run (FlashInfer's
 * deterministic collect; its output order depends on the path: index-ascending after
 * FilteredTopK's finalize, CTA then thread-strided order on the radix path); fi-det-sorted and
 * fi-graph-safe run_to_run with tie-break small (always FilteredTopK). A FLASHINFER_TOPK_ALGO
 * change between runs changes fi-auto's and fi-det's path and so their outputs.
 *
 * Limits and departures from the capture contract: docs/BACKENDS.md "FlashInfer's own kernels". */
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "topk_backends.h"
#include "cuda_check.h"
#include "common/topk_common.cuh"

#if DSATOPK_FLASHINFER
#include <flashinfer/math.cuh>
#include <flashinfer/topk.cuh>
#endif

#define FI_NOT_BUILT \
    "not built: flashinfer headers not found (pip install flashinfer-python, or " \
    "-Dflashinfer_include=...)"

enum fi_mode { FI_AUTO, FI_DET, FI_DET_SORTED, FI_GRAPH_SAFE, FI_MODES };

/* FlashInfer's arguments for each backend. tie_break is FlashInfer's TopKTieBreak value
 * (0 none, 1 small). */
struct fi_mode_args {
    const char *name;
    bool deterministic;
    unsigned tie_break;
    bool sorted;
    bool graph_safe;
};

/* In enum fi_mode's order. */
static const struct fi_mode_args fi_modes[FI_MODES] = {
    { "fi-auto", false, 0, false, false },
    { "fi-det", true, 0, false, false },
    { "fi-det-sorted", true, 1, true, false },
    { "fi-graph-safe", true, 1, false, true },
};

#if DSATOPK_FLASHINFER

namespace fi = flashinfer::sampling;

#define FI_SCRATCH_ALIGN 256u
#define FI_MAX_PAGE_SIZE (1u << 30)

enum fi_entry { FI_DENSE, FI_RAGGED, FI_PAGED };

/* In enum fi_entry's order. */
static const char *const fi_entry_names[] = {
    "TopKDispatch",
    "TopKRaggedTransformDispatch",
    "TopKPageTableTransformDispatch",
};

static bool fi_dense(const struct topk_shape *shape)
{
    return !shape->has_row_starts && !shape->has_page_table &&
           (uint64_t)shape->min_length == shape->row_stride &&
           shape->min_length == shape->max_length && shape->k <= shape->row_stride;
}

/* Floats FlashInfer loads at a time from rows of this stride without row starts:
 * gcd(row_stride, 4), its vec_size. */
static uint32_t fi_vector_floats(const struct topk_shape *shape)
{
    return (shape->row_stride & 3u) == 0 ? 4u : (shape->row_stride & 1u) == 0 ? 2u : 1u;
}

static enum fi_entry fi_entry_of(enum fi_mode mode, const struct topk_shape *shape)
{
    if (shape->has_page_table)
        return FI_PAGED;
    if (mode != FI_GRAPH_SAFE && fi_dense(shape))
        return FI_DENSE;
    return FI_RAGGED;
}

/* What can be said from the shape alone (no CUDA call), in FlashInfer's own terms. */
static int fi_shape_supported(enum fi_mode mode, const struct topk_shape *shape, char *reason,
                              size_t reason_bytes)
{
    const struct fi_mode_args *args = &fi_modes[mode];
    if (shape->k < 1) {
        snprintf(reason, reason_bytes, "k %u < 1", shape->k);
        return 0;
    }
    /* Rows of no element (row_stride 0) come with no score tensor at all: FlashInfer takes a
     * max_len of at least 1, so these records are refused here rather than -1 written for it. */
    if (shape->row_stride < 1 || shape->row_stride > UINT32_MAX) {
        snprintf(reason, reason_bytes, "row stride %llu outside FlashInfer's max_len range "
                 "1..2^32-1%s", (unsigned long long)shape->row_stride,
                 shape->row_stride == 0 ? " (every row is empty: no score tensor)" : "");
        return 0;
    }
    /* The radix path reads a length as unsigned. */
    if (shape->min_length < 0 || shape->max_length < 0) {
        snprintf(reason, reason_bytes, "negative row length %d",
                 shape->min_length < 0 ? shape->min_length : shape->max_length);
        return 0;
    }
    if (shape->has_page_table &&
        (shape->page_size == 0 || shape->page_size > FI_MAX_PAGE_SIZE ||
         (shape->page_size & (shape->page_size - 1)) != 0)) {
        snprintf(reason, reason_bytes, "page_size %u is not a power of two up to 2^30",
                 shape->page_size);
        return 0;
    }
    if (args->sorted && fi_entry_of(mode, shape) != FI_DENSE) {
        snprintf(reason, reason_bytes, "sorted output is TopKDispatch's alone, which takes dense "
                 "rows of row_stride elements and k <= row_stride; this record has %s",
                 shape->has_page_table ? "a page table"
                 : shape->has_row_starts ? "row starts"
                 : shape->k > shape->row_stride ? "k above its row stride"
                                                : "per-row lengths");
        return 0;
    }
    /* FilteredTopK's bound, which FlashInfer checks before any launch when a tie-break or
     * dsa_graph_safe is asked (cudaErrorNotSupported); sorted output sorts at most 2048. */
    if ((args->tie_break != 0 || args->graph_safe || args->sorted) && shape->k > 2048) {
        snprintf(reason, reason_bytes, "k %u > 2048 (FILTERED_TOPK_MAX_K: FlashInfer returns "
                 "cudaErrorNotSupported)", shape->k);
        return 0;
    }
    return 1;
}

/* Scratch: row states (and deterministic collect counts) for min(SMs, rows) row groups, the
 * values of TopKDispatch, rows int32 of zeros for the transforms. Computed from the shape and
 * the SM count alone, identically by scratch_bytes and launch. */
struct fi_layout {
    size_t row_states_offset, row_states_bytes, row_states_zeroed;
    size_t values_offset, zeros_offset;
    size_t total_bytes;
};

static size_t fi_align(size_t bytes)
{
    return (bytes + FI_SCRATCH_ALIGN - 1) / FI_SCRATCH_ALIGN * FI_SCRATCH_ALIGN;
}

static void fi_layout_of(enum fi_mode mode, const struct gpu_device_info *device,
                         const struct topk_shape *shape, struct fi_layout *layout)
{
    const enum fi_entry entry = fi_entry_of(mode, shape);
    size_t groups = device->sm_count > 0 ? (size_t)device->sm_count : 1;
    if (shape->rows < groups)
        groups = shape->rows ? shape->rows : 1;
    memset(layout, 0, sizeof(*layout));
    layout->row_states_bytes =
        groups * (sizeof(fi::RadixRowState) + sizeof(fi::RadixDeterministicCollectScratch));
    layout->row_states_zeroed = groups * sizeof(fi::RadixRowState);
    size_t offset = fi_align(layout->row_states_bytes);
    if (entry == FI_DENSE) {
        layout->values_offset = offset;
        offset = fi_align(offset + (size_t)shape->rows * shape->k * sizeof(float));
    } else {
        layout->zeros_offset = offset;
        offset = fi_align(offset + (size_t)shape->rows * sizeof(int32_t));
    }
    layout->total_bytes = offset;
}

/* FlashInfer reads the current device (CanImplementFilteredTopK, and its radix path's sizing):
 * runs query with device->ordinal current, then restores the caller's. Returns 0 with the reason
 * written when the device cannot be made current. */
template <typename Query>
static int fi_on_device(const struct gpu_device_info *device, char *reason, size_t reason_bytes,
                        Query query)
{
    int previous = -1;
    cudaError_t status = cudaGetDevice(&previous);
    if (status == cudaSuccess && previous != device->ordinal)
        status = cudaSetDevice(device->ordinal);
    if (status != cudaSuccess) {
        (void)cudaGetLastError();
        snprintf(reason, reason_bytes, "FlashInfer asks the device itself, and device %d "
                 "cannot be asked: %s (%s)", device->ordinal, cudaGetErrorString(status),
                 cudaGetErrorName(status));
        return 0;
    }
    query();
    /* FlashInfer's queries answer false on a failed CUDA call and leave its error set: consumed
     * here, or the next launch's check would report it as the launch's own. */
    (void)cudaGetLastError();
    if (previous >= 0 && previous != device->ordinal &&
        (status = cudaSetDevice(previous)) != cudaSuccess) {
        (void)cudaGetLastError();
        snprintf(reason, reason_bytes, "FlashInfer asks the device itself, and device %d cannot "
                 "be made current again after it: %s (%s)", previous, cudaGetErrorString(status),
                 cudaGetErrorName(status));
        return 0;
    }
    return 1;
}

/* The multi-CTA radix path's cut of a row, as RadixTopK*MultiCTA computes it (topk.cuh): 0 with
 * the reason where FlashInfer would fail or where its CTAs of one row could not all be resident
 * at once (its software barrier spins until every CTA of the row arrives). */
static int fi_radix_cut(const struct gpu_device_info *device, const struct topk_shape *shape,
                        bool deterministic, uint32_t vec_size, uint32_t *ctas_per_row,
                        uint32_t *rows_at_once, char *reason, size_t reason_bytes)
{
    constexpr uint32_t threads = 1024;
    const size_t fixed = (sizeof(uint32_t) * (256 + 256 + 5) + 15) / 16 * 16;
    const size_t available = fi::GetRadixTopKAvailableOrderedSmemBytes<threads>(
        device->smem_per_block_optin, fixed, deterministic);
    if (available == 0) {
        snprintf(reason, reason_bytes, "the multi-CTA radix path has no shared memory left for "
                 "its chunk (%zu B per block opt-in)", device->smem_per_block_optin);
        return 0;
    }
    uint64_t chunk = available / sizeof(uint32_t) / vec_size * vec_size;
    if (chunk < (uint64_t)vec_size * threads)
        chunk = (uint64_t)vec_size * threads;
    const uint64_t ctas = (shape->row_stride + chunk - 1) / chunk;
    if (deterministic && ctas > fi::RADIX_TOPK_MAX_DETERMINISTIC_CTAS_PER_GROUP) {
        snprintf(reason, reason_bytes, "the deterministic radix path would cut rows of %llu "
                 "into %llu CTAs, above FlashInfer's %u (cudaErrorInvalidConfiguration)",
                 (unsigned long long)shape->row_stride, (unsigned long long)ctas,
                 fi::RADIX_TOPK_MAX_DETERMINISTIC_CTAS_PER_GROUP);
        return 0;
    }
    if (ctas > (uint64_t)device->sm_count) {
        snprintf(reason, reason_bytes, "the multi-CTA radix path would cut rows of %llu into "
                 "%llu CTAs that spin on each other, more than the device's %d SMs hold at once",
                 (unsigned long long)shape->row_stride, (unsigned long long)ctas,
                 device->sm_count);
        return 0;
    }
    uint32_t groups = (uint32_t)(device->sm_count / ctas);
    if (groups > shape->rows)
        groups = shape->rows;
    *ctas_per_row = (uint32_t)ctas;
    *rows_at_once = groups ? groups : 1;
    return 1;
}

/* FlashInfer's choice for this call on this device: FilteredTopK or the multi-CTA radix
 * select. Calls CanImplementFilteredTopK and ShouldUseFilteredTopK, which read the current
 * device and FLASHINFER_TOPK_ALGO. */
static bool fi_filtered_path(enum fi_mode mode, const struct topk_shape *shape)
{
    const struct fi_mode_args *args = &fi_modes[mode];
    return fi::ShouldUseFilteredTopK<float>(
        shape->rows, shape->k, (uint32_t)shape->row_stride, args->deterministic,
        static_cast<fi::TopKTieBreak>(args->tie_break), args->graph_safe);
}

template <int MODE>
static int fi_supports(const struct gpu_device_info *device, const struct topk_shape *shape,
                       char *reason, size_t reason_bytes)
{
    const enum fi_mode mode = (enum fi_mode)MODE;
    const struct fi_mode_args *args = &fi_modes[mode];
    if (!fi_shape_supported(mode, shape, reason, reason_bytes))
        return 0;
    if (device->smem_emulated) {
        snprintf(reason, reason_bytes, "cannot be emulated: FlashInfer reads the device itself "
                 "(cudaDevAttrMaxSharedMemoryPerMultiprocessor, SM count, per-block opt-in)");
        return 0;
    }
    if (!topk_built_for(device, reason, reason_bytes))
        return 0;
    const bool needs_filtered = args->tie_break != 0 || args->graph_safe;
    bool can_filter = false, filtered = false;
    if (!fi_on_device(device, reason, reason_bytes, [&] {
            can_filter = fi::CanImplementFilteredTopK();
            filtered = fi_filtered_path(mode, shape);
        }))
        return 0;
    if (needs_filtered && !can_filter) {
        snprintf(reason, reason_bytes, "FlashInfer's CanImplementFilteredTopK() is false: "
                 "FilteredTopK needs %zu B shared memory per SM, the device has %zu B "
                 "(FlashInfer returns cudaErrorNotSupported for a tie-break or dsa_graph_safe)",
                 (size_t)fi::FILTERED_TOPK_SMEM_DYNAMIC, device->reported_smem_per_sm);
        return 0;
    }
    const enum fi_entry entry = fi_entry_of(mode, shape);
    const char *algo = getenv("FLASHINFER_TOPK_ALGO");
    char path[160];
    if (filtered) {
        snprintf(path, sizeof(path), "FilteredTopK, one 1024-thread CTA per row");
    } else {
        const uint32_t vec_size = shape->has_row_starts ? 1u : fi_vector_floats(shape);
        uint32_t ctas = 0, groups = 0;
        if (!fi_radix_cut(device, shape, args->deterministic, vec_size, &ctas, &groups, reason,
                          reason_bytes))
            return 0;
        snprintf(path, sizeof(path), "multi-CTA radix select, %u CTA(s) per row, %u row(s) at "
                 "a time", ctas, groups);
    }
    snprintf(reason, reason_bytes, "FlashInfer %s %s: %s%s%s", DSATOPK_FLASHINFER_VERSION,
             fi_entry_names[entry], path, algo ? ", FLASHINFER_TOPK_ALGO=" : "",
             algo ? algo : "");
    return 1;
}

template <int MODE>
static size_t fi_scratch_bytes(const struct gpu_device_info *device,
                               const struct topk_shape *shape)
{
    struct fi_layout layout;
    fi_layout_of((enum fi_mode)MODE, device, shape, &layout);
    return layout.total_bytes;
}

/* Calls FlashInfer's entry for the record: returns its status (cudaErrorNotSupported before
 * any launch when it refuses). */
static cudaError_t fi_dispatch(enum fi_mode mode, const struct topk_problem *problem,
                               const struct fi_layout *layout, cudaStream_t stream)
{
    const struct fi_mode_args *args = &fi_modes[mode];
    const struct topk_shape *shape = &problem->shape;
    const fi::TopKTieBreak tie_break = static_cast<fi::TopKTieBreak>(args->tie_break);
    char *scratch = (char *)problem->scratch;
    fi::RadixRowState *row_states = (fi::RadixRowState *)(scratch + layout->row_states_offset);
    int32_t *zeros = (int32_t *)(scratch + layout->zeros_offset);
    /* FlashInfer's signatures take mutable pointers to what it only reads. */
    float *scores = const_cast<float *>(problem->scores);
    int32_t *lengths = const_cast<int32_t *>(problem->lengths);
    const uint32_t max_len = (uint32_t)shape->row_stride;
    switch (fi_entry_of(mode, shape)) {
    case FI_DENSE:
        return fi::TopKDispatch<float, int32_t>(
            scores, problem->out, (float *)(scratch + layout->values_offset), shape->rows,
            shape->k, max_len, row_states, args->sorted, args->deterministic, tie_break, stream,
            args->graph_safe);
    case FI_RAGGED:
        return fi::TopKRaggedTransformDispatch<float, int32_t>(
            scores, problem->out, zeros, lengths, problem->row_starts, shape->rows, shape->k,
            max_len, row_states, args->deterministic, tie_break, stream, args->graph_safe);
    case FI_PAGED: {
        uint32_t page_bits = 0;
        while ((1u << page_bits) < shape->page_size)
            page_bits++;
        const fi::ConfigurablePageTableKernelPolicy<int32_t> policy(
            problem->raw_out, (int64_t)shape->row_stride, page_bits);
        const int32_t *page_table_row_starts =
            problem->page_table_row_starts || !problem->row_starts ? problem->page_table_row_starts
                                                                   : zeros;
        return fi::TopKPageTableTransformDispatch<float, int32_t,
                                                  fi::ConfigurablePageTableKernelPolicy<int32_t>>(
            scores, problem->out, problem->page_table, (int64_t)problem->page_table_cols,
            lengths, problem->row_starts, nullptr, shape->rows, shape->k, max_len, row_states,
            args->deterministic, tie_break, stream, args->graph_safe, page_table_row_starts,
            policy);
    }
    }
    return cudaErrorInvalidValue;
}

template <int MODE>
static int fi_launch(const struct topk_problem *problem, const struct gpu_device_info *device,
                     cudaStream_t stream, struct audit_error *err)
{
    const enum fi_mode mode = (enum fi_mode)MODE;
    const struct fi_mode_args *args = &fi_modes[mode];
    const struct topk_shape *shape = &problem->shape;
    char reason[512];
    if (!fi_supports<MODE>(device, shape, reason, sizeof(reason)))
        return audit_fail(err, AUDIT_EUNSUPPORTED, "%s: %s", args->name, reason);
    if (shape->rows == 0)
        return 0;
    struct fi_layout layout;
    fi_layout_of(mode, device, shape, &layout);
    if (!problem->scratch || problem->scratch_bytes < layout.total_bytes)
        return audit_fail(err, AUDIT_EUSAGE, "%s: scratch of %zu B, the call needs %zu B",
                          args->name, problem->scratch_bytes, layout.total_bytes);
    if (!topk_problem_pointers_present(problem))
        return audit_fail(err, AUDIT_EUSAGE, "%s: missing device pointer in the problem "
                          "(lengths, out, scores; with a page table the table and raw_out)",
                          args->name);
    const enum fi_entry entry = fi_entry_of(mode, shape);
    /* Without dsa_graph_safe or row starts FlashInfer loads TopKDispatch's and the ragged
     * transform's rows several floats at a time (torch tensors are aligned so). */
    const uint64_t vector_bytes = fi_vector_floats(shape) * sizeof(float);
    if (entry != FI_PAGED && !args->graph_safe && !problem->row_starts &&
        (uintptr_t)problem->scores % vector_bytes != 0)
        return audit_fail(err, AUDIT_EUNSUPPORTED, "%s: %s loads rows %llu bytes at a time and "
                          "the scores are not aligned so", args->name, fi_entry_names[entry],
                          (unsigned long long)vector_bytes);
    char *scratch = (char *)problem->scratch;
    if (!fi_filtered_path(mode, shape))
        CUDA_TRY(cudaMemsetAsync(scratch + layout.row_states_offset, 0, layout.row_states_zeroed,
                                 stream),
                 err);
    if (entry != FI_DENSE)
        CUDA_TRY(cudaMemsetAsync(scratch + layout.zeros_offset, 0,
                                 (size_t)shape->rows * sizeof(int32_t), stream),
                 err);
    const cudaError_t status = fi_dispatch(mode, problem, &layout, stream);
    if (status != cudaSuccess) {
        (void)cudaGetLastError();
        return audit_fail(err, status == cudaErrorNotSupported ? AUDIT_EUNSUPPORTED : AUDIT_EDEVICE,
                          "%s: FlashInfer %s (%u rows, k %u, max_len %llu) returned %s (%s)",
                          args->name, fi_entry_names[entry], shape->rows, shape->k,
                          (unsigned long long)shape->row_stride, cudaGetErrorString(status),
                          cudaGetErrorName(status));
    }
    CUDA_TRY(cudaGetLastError(), err);
    /* Without a page table raw_out, when given, equals out (the contract). */
    if (!shape->has_page_table && problem->raw_out && problem->raw_out != problem->out)
        CUDA_TRY(cudaMemcpyAsync(problem->raw_out, problem->out,
                                 (size_t)shape->rows * shape->k * sizeof(int32_t),
                                 cudaMemcpyDeviceToDevice, stream),
                 err);
    return 0;
}

#else /* !DSATOPK_FLASHINFER: the entries exist, and say why they cannot run. */

template <int MODE>
static int fi_supports(const struct gpu_device_info *device, const struct topk_shape *shape,
                       char *reason, size_t reason_bytes)
{
    (void)device;
    (void)shape;
    snprintf(reason, reason_bytes, "%s", FI_NOT_BUILT);
    return 0;
}

template <int MODE>
static size_t fi_scratch_bytes(const struct gpu_device_info *device,
                               const struct topk_shape *shape)
{
    (void)device;
    (void)shape;
    return 0;
}

template <int MODE>
static int fi_launch(const struct topk_problem *problem, const struct gpu_device_info *device,
                     cudaStream_t stream, struct audit_error *err)
{
    (void)problem;
    (void)device;
    (void)stream;
    return audit_fail(err, AUDIT_EUNSUPPORTED, "%s: %s", fi_modes[MODE].name, FI_NOT_BUILT);
}

#endif

#if DSATOPK_FLASHINFER
#define FI_BUILT_FROM "built from FlashInfer " DSATOPK_FLASHINFER_VERSION "'s headers"
#else
#define FI_BUILT_FROM FI_NOT_BUILT
#endif
#define FI_LIMITS_FILTERED \
    "FilteredTopK: k <= 2048 (FILTERED_TOPK_MAX_K) and 131072 B shared memory per SM " \
    "(CanImplementFilteredTopK)"
#define FI_LIMITS_HEURISTIC \
    FI_LIMITS_FILTERED " where FlashInfer's heuristic picks it, else the multi-CTA radix " \
    "select (any k, a row's CTAs all resident at once)"
#define FI_LIMITS_COMMON \
    "row stride < 2^32; page_size a power of two up to 2^30; exact -inf ranked as a value; " \
    "refused under --emulate-smem-per-sm (FlashInfer reads the device itself); " FI_BUILT_FROM

extern "C" const struct topk_backend topk_backend_fi_auto = {
    "fi-auto",
    "FlashInfer's native top-k, non-deterministic: its heuristic picks FilteredTopK or the "
    "multi-CTA radix select (TopKDispatch and the ragged/page-table transforms)",
    TOPK_NOT_GUARANTEED,
    true,  /* exact_set */
    false, /* smallest_index_ties */
    false, /* canonical_order */
    false, /* index_ascending */
    FI_LIMITS_HEURISTIC "; " FI_LIMITS_COMMON,
    fi_supports<FI_AUTO>,
    fi_scratch_bytes<FI_AUTO>,
    fi_launch<FI_AUTO>,
};

extern "C" const struct topk_backend topk_backend_fi_det = {
    "fi-det",
    "FlashInfer's native top-k, deterministic=true, tie-break none: repeatable output, ties "
    "and order as FlashInfer's path writes them",
    TOPK_RUN_TO_RUN,
    true,  /* exact_set */
    false, /* smallest_index_ties */
    false, /* canonical_order */
    false, /* index_ascending */
    FI_LIMITS_HEURISTIC "; " FI_LIMITS_COMMON,
    fi_supports<FI_DET>,
    fi_scratch_bytes<FI_DET>,
    fi_launch<FI_DET>,
};

extern "C" const struct topk_backend topk_backend_fi_det_sorted = {
    "fi-det-sorted",
    "FlashInfer's TopKDispatch, deterministic, tie-break small, sorted output: smallest-index "
    "ties, value-descending order, index-ascending among equal values",
    TOPK_RUN_TO_RUN,
    true, /* exact_set */
    true, /* smallest_index_ties */
    true, /* canonical_order */
    false, /* index_ascending */
    FI_LIMITS_FILTERED "; dense rows only (no row starts, page table or per-row lengths), "
    "k <= row stride; " FI_LIMITS_COMMON,
    fi_supports<FI_DET_SORTED>,
    fi_scratch_bytes<FI_DET_SORTED>,
    fi_launch<FI_DET_SORTED>,
};

extern "C" const struct topk_backend topk_backend_fi_graph_safe = {
    "fi-graph-safe",
    "FlashInfer's ragged/page-table transforms with dsa_graph_safe, deterministic, tie-break "
    "small, as vLLM's deterministic indexer calls them: smallest-index ties, index-ascending",
    TOPK_RUN_TO_RUN,
    true,  /* exact_set */
    true,  /* smallest_index_ties */
    false, /* canonical_order */
    true,  /* index_ascending */
    FI_LIMITS_FILTERED "; " FI_LIMITS_COMMON,
    fi_supports<FI_GRAPH_SAFE>,
    fi_scratch_bytes<FI_GRAPH_SAFE>,
    fi_launch<FI_GRAPH_SAFE>,
};
