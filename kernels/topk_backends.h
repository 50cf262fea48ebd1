/* The GPU top-k backends, behind one plain-C header (docs/BACKENDS.md).
 *
 * A backend is one .cu file and one entry in topk_backend_table (kernels/backends.c). Each entry
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

#ifdef __cplusplus
extern "C" {
#endif

enum topk_determinism {
    TOPK_NOT_GUARANTEED = 0, /* output may change from run to run */
    TOPK_RUN_TO_RUN = 1,     /* same output every run on the same GPU model and SM count */
    TOPK_GPU_TO_GPU = 2,     /* same output on every GPU: equals the CPU reference */
};

const char *topk_determinism_name(enum topk_determinism level);

/* What the device reports, possibly overridden by emulation flags (--emulate-smem-per-sm). */
#define GPU_CLUSTER_MAX 16 /* CTAs per cluster, non-portable sizes included (sm_90) */

struct gpu_device_info {
    int ordinal;
    char name[256];
    int cc_major, cc_minor;
    int sm_count;
    size_t smem_per_sm;           /* after emulation */
    size_t smem_per_block_optin;  /* after emulation (clamped to smem_per_sm) */
    size_t reported_smem_per_sm;  /* what the hardware reports */
    size_t l2_bytes;
    size_t global_memory_bytes;
    int driver_version, runtime_version;
    bool smem_emulated;
    /* cluster_fit[c]: clusters of c CTAs, each alone on its SM, that the device runs at once
     * (cudaOccupancyMaxActiveClusters; below sm_count / c where clusters must share a GPC:
     * 30 of 4 on the H200's 132 SMs; 0 for a size it does not take). All 0 where not measured
     * (gpu_device_measure_clusters; cluster_fit[1] > 0 once measured). */
    uint32_t cluster_fit[GPU_CLUSTER_MAX + 1];
};

/* The shape of one top-k call: everything supports() and scratch_bytes() may look at. */
struct topk_shape {
    uint32_t rows;
    uint32_t k;
    uint64_t row_stride;
    int32_t max_length;   /* largest lengths[b] */
    bool has_row_starts;
    bool has_page_table;
    uint32_t page_size;
};

/* One call: device pointers. out receives rows * k int32, -1 padded: translated indices when a
 * page table is present, window-relative ones otherwise; raw_out (required with a page table,
 * optional without) receives the window-relative ones positionally aligned with out. */
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

/* NULL-terminated table of every backend (kernels/backends.c). */
extern const struct topk_backend *const topk_backend_table[];
const struct topk_backend *topk_backend_find(const char *name);

/* Device discovery. gpu_device_count sets *count to 0 and returns 0 when there is no device or
 * no driver, with the reason in why (never an error: CPU features go on). */
int gpu_device_count(int *count, char *why, size_t why_bytes);
int gpu_device_query(int ordinal, size_t emulate_smem_per_sm, struct gpu_device_info *info,
                     struct audit_error *err);
/* Fills info->cluster_fit on a device with clusters (compute capability 9.0 or newer); creates
 * the device's context. Leaves zeros, and returns the failure, where the query fails even for
 * clusters of one CTA: callers go on without it (supports() then assumes every SM can take a
 * CTA of a cluster). */
int gpu_device_measure_clusters(struct gpu_device_info *info, struct audit_error *err);
/* Launches one empty kernel (one block of 32 threads) on stream: what `bench` subtracts nothing
 * with but reports as the floor of a call (launch and drain of a kernel in a graph). */
int gpu_launch_empty(cudaStream_t stream, struct audit_error *err);

/* Noise on a sibling stream, to perturb SM scheduling while a backend replays (docs/REPORT.md). */
enum noise_kind { NOISE_NONE, NOISE_GEMM, NOISE_MEM, NOISE_SPIN, NOISE_MIXED };
const char *noise_kind_name(enum noise_kind kind);
int noise_kind_parse(const char *text, enum noise_kind *kind);

struct noise_state; /* device buffers for the noise work */
int noise_create(struct noise_state **state, enum noise_kind kind, struct audit_error *err);
/* Enqueues one burst of noise (a few hundred microseconds of work) on stream. */
int noise_launch(struct noise_state *state, cudaStream_t stream, struct audit_error *err);
void noise_destroy(struct noise_state *state);

#ifdef DSATOPK_PHASE_TIMING
/* Measurement builds only (kernels/phase_timing.cuh): the bitonic kernels' cycles from a CTA's
 * start to each mark, summed over the CTAs that reached it. */
enum { PHASE_KERNELS = 6, PHASE_MARKS = 16 };
enum {
    PHASE_CLUSTER16 = 0,
    PHASE_CLUSTER32 = 1,
    PHASE_TREE = 2,
    PHASE_TREE_HISTOGRAM = 3,
    PHASE_CLUSTER64 = 4,
    PHASE_CLUSTER128 = 5
};
struct phase_table {
    unsigned long long cycles[PHASE_KERNELS][PHASE_MARKS];
    unsigned long long ctas[PHASE_KERNELS][PHASE_MARKS];
};
/* Copies the table out and zeroes it (synchronous). */
int bitonic_phase_take(struct phase_table *table, struct audit_error *err);
#endif

/* Checks a CUDA call: on failure fills err with file, line, call and the CUDA error string and
 * returns AUDIT_EDEVICE from the enclosing function (which must return int). */
#define CUDA_TRY(call, err)                                                                   \
    do {                                                                                      \
        cudaError_t cuda_try_status_ = (call);                                                \
        if (cuda_try_status_ != cudaSuccess)                                                  \
            return audit_fail((err), AUDIT_EDEVICE, "%s:%d: %s: %s (%s)", __FILE__, __LINE__, \
                              #call, cudaGetErrorString(cuda_try_status_),                    \
                              cudaGetErrorName(cuda_try_status_));                            \
    } while (0)

/* The same, jumping to a cleanup label with status set (one cleanup path per function). */
#define CUDA_CHECK_GOTO(call, err, status, label)                                             \
    do {                                                                                      \
        cudaError_t cuda_check_status_ = (call);                                              \
        if (cuda_check_status_ != cudaSuccess) {                                              \
            (status) = audit_fail((err), AUDIT_EDEVICE, "%s:%d: %s: %s (%s)", __FILE__,       \
                                  __LINE__, #call, cudaGetErrorString(cuda_check_status_),    \
                                  cudaGetErrorName(cuda_check_status_));                      \
            goto label;                                                                       \
        }                                                                                     \
    } while (0)

#ifdef __cplusplus
}
#endif

#endif
