/* The GPU top-k backends' contract, one plain-C header (docs/BACKENDS.md).
 *
 * A backend is one .cu file in kernels/backends/ and one entry in topk_backend_table
 * (kernels/backends/backends.c). Each entry
 * names the determinism level it claims (CCCL's words), what it promises about ties and order,
 * a supports() that answers before anything is launched, a scratch-size query, and a launch on
 * the caller's stream with device pointers and caller-owned outputs: no allocation and no host
 * synchronisation inside launch, so launches can be captured in a CUDA graph. */
#ifndef DSATOPK_TOPK_BACKENDS_H
#define DSATOPK_TOPK_BACKENDS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <cuda_runtime_api.h>

#include "error.h"
#include "gpu_device.h"

#ifdef __cplusplus
extern "C" {
#endif

enum topk_determinism {
    TOPK_NOT_GUARANTEED = 0, /* output may change from run to run */
    TOPK_RUN_TO_RUN = 1,     /* same output every run on the same GPU model and SM count */
    TOPK_GPU_TO_GPU = 2,     /* same output on every GPU: equals the CPU reference */
};

const char *topk_determinism_name(enum topk_determinism level);

/* The shape of one top-k call: everything supports() and scratch_bytes() may look at. */
struct topk_shape {
    uint32_t rows;
    uint32_t k;
    uint64_t row_stride;
    int32_t max_length;   /* largest lengths[b] */
    int32_t min_length;   /* smallest lengths[b]: 0 when unknown (rows of row_stride elements
                             each are dense only when it equals max_length and row_stride) */
    bool has_row_starts;
    bool has_page_table;
    uint32_t page_size;
};

/* One call: device pointers. out receives rows * k int32, -1 padded: translated indices when a
 * page table is present, window-relative ones otherwise; raw_out (required with a page table,
 * optional without) receives the window-relative ones positionally aligned with out.
 * An array of no elements may be NULL (cudaMalloc of 0 bytes gives NULL): scores when
 * row_stride is 0 (every row empty), page_table when page_table_cols is 0. Such a problem is
 * legal, and its output is all -1. */
struct topk_problem {
    struct topk_shape shape;
    const float *scores;                /* rows * row_stride */
    const int32_t *lengths;             /* rows */
    const int32_t *row_starts;          /* rows or NULL */
    const int32_t *page_table;          /* rows * page_table_cols or NULL */
    uint64_t page_table_cols;
    const int32_t *page_table_row_starts; /* rows or NULL */
    int32_t *out;
    int32_t *raw_out;
    void *scratch;                      /* scratch_bytes(shape) bytes, caller-owned */
    size_t scratch_bytes;
};

struct topk_backend {
    const char *name;
    const char *summary;
    enum topk_determinism level;
    /* Promises the checks hold the backend to (docs/BACKENDS.md): */
    bool exact_set;               /* selected-score multiset always equals the reference's */
    bool smallest_index_ties;     /* the boundary tie subset is the smallest indices */
    bool canonical_order;         /* output order equals the reference (score desc, index asc) */
    bool index_ascending;         /* output rows are sorted by window-relative index */
    const char *limits;           /* human-readable limits */
    /* 1: supported; 0: not, with the reason written to reason. Launches nothing. */
    int (*supports)(const struct gpu_device_info *device, const struct topk_shape *shape,
                    char *reason, size_t reason_bytes);
    size_t (*scratch_bytes)(const struct gpu_device_info *device, const struct topk_shape *shape);
    /* Enqueues the call on stream. Returns 0 or a negative code with err filled (launch
     * configuration or CUDA errors seen at enqueue time; asynchronous faults surface at the
     * caller's next synchronisation). */
    int (*launch)(const struct topk_problem *problem, const struct gpu_device_info *device,
                  cudaStream_t stream, struct audit_error *err);
};

/* Whether every array problem needs is there: lengths and out always, scores unless row_stride
 * is 0, with a page table the table (unless it has no column) and raw_out. */
bool topk_problem_pointers_present(const struct topk_problem *problem);

/* NULL-terminated table of every backend (kernels/backends/backends.c). */
extern const struct topk_backend *const topk_backend_table[];
/* The table's entry called name, or for "NAME@PLAN" the entry NAME with that plan forced where
 * the backend takes plans as arguments (bitonic: bitonic_plan.h); NULL for anything else. */
const struct topk_backend *topk_backend_find(const char *name);

#ifdef __cplusplus
}
#endif

#endif
