/* Plugins: a user's own top-k kernel, loaded at run time from a shared object (`--plugin
 * PATH.so`) and audited like a built-in backend (docs/PLUGIN.md).
 *
 * This header has two parts.
 *
 * 1. The plugin ABI, version DSATOPK_PLUGIN_ABI_VERSION: what a plugin includes and exports.
 *    Plain C types only (no CUDA header, no bool, the stream as void *), so that a plugin can be
 *    written in C, C++ or CUDA, built with any compiler, against nothing else of this project.
 *    The structs carry the fields of kernels/include/topk_backends.h that a kernel needs, not the
 *    built-ins' planning hints (topk_shape's min_length, gpu_device_info's reported_smem_per_sm
 *    and cluster_fit). Any change to them bumps the version; abi_version stays the first
 *    member of struct dsatopk_plugin in every version, so the loader can refuse a plugin of
 *    another version before reading anything else.
 *
 * 2. The loader (src/replay/plugin.c), used by the commands: dlopen, checks, and an adapter that
 *    presents the plugin as a struct topk_backend. Plugins do not need this part; it only
 *    declares functions and names two structs by pointer. */
#ifndef DSATOPK_PLUGIN_H
#define DSATOPK_PLUGIN_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* ---- 1. the ABI ------------------------------------------------------------------------------ */

#define DSATOPK_PLUGIN_ABI_VERSION 1u
/* The symbol a plugin exports, with C linkage and default visibility. */
#define DSATOPK_PLUGIN_ENTRY_SYMBOL "dsatopk_plugin_entry"

/* The device the call runs on (struct gpu_device_info). Sizes after --emulate-smem-per-sm. */
struct dsatopk_plugin_device {
    int32_t ordinal;
    const char *name;
    int32_t cc_major, cc_minor;
    int32_t sm_count;
    uint64_t smem_per_sm;
    uint64_t smem_per_block_optin;
    uint64_t l2_bytes;
    uint64_t global_memory_bytes;
    int32_t driver_version, runtime_version;
    int32_t smem_emulated;             /* 0 or 1 */
};

/* What supports() and scratch_bytes() may look at (struct topk_shape). */
struct dsatopk_plugin_shape {
    uint32_t rows;
    uint32_t k;
    uint64_t row_stride;               /* elements between the starts of consecutive rows */
    int32_t max_length;                /* largest lengths[b] */
    int32_t has_row_starts;            /* 0 or 1 */
    int32_t has_page_table;            /* 0 or 1 */
    uint32_t page_size;                /* a power of two when has_page_table */
};

/* One call, device pointers (struct topk_problem). Row b's window is
 * scores + b * row_stride + (row_starts ? row_starts[b] : 0), lengths[b] elements (negative
 * counts as 0); indices are window-relative. out receives rows * k int32, -1 after the last
 * selected entry of a row; with a page table out holds translated indices and raw_out (then
 * never NULL) the window-relative ones, positionally aligned. docs/BACKENDS.md has the full
 * contract: candidates exclude exact -inf, ranking is IEEE total order with ties to the smaller
 * index. */
struct dsatopk_plugin_problem {
    struct dsatopk_plugin_shape shape;
    const float *scores;               /* rows * row_stride; never NULL, even when that is 0 */
    const int32_t *lengths;            /* rows */
    const int32_t *row_starts;         /* rows, or NULL */
    const int32_t *page_table;         /* rows * page_table_cols (never NULL with a page table,
                                          * even of 0 columns), or NULL: none */
    uint64_t page_table_cols;
    const int32_t *page_table_row_starts; /* rows, or NULL (all zero) */
    int32_t *out;
    int32_t *raw_out;
    void *scratch;                     /* scratch_bytes(shape) bytes, owned by the caller */
    uint64_t scratch_bytes;
};

struct dsatopk_plugin {
    uint32_t abi_version;              /* DSATOPK_PLUGIN_ABI_VERSION; always the first member */
    const char *name;                  /* [A-Za-z0-9_.+-], 1..63 bytes, not a built-in's name */
    const char *summary;               /* one line: what the kernel is */
    const char *level;                 /* "not_guaranteed", "run_to_run" or "gpu_to_gpu" */
    /* Promises the checks hold the kernel to, 0 or 1 each (docs/BACKENDS.md "A table entry").
     * gpu_to_gpu means equal to the CPU reference byte for byte, so it needs all of exact_set,
     * smallest_index_ties and canonical_order; canonical_order and index_ascending exclude each
     * other. */
    int32_t exact_set;
    int32_t smallest_index_ties;
    int32_t canonical_order;
    int32_t index_ascending;
    const char *limits;                /* human-readable limits; may be "" */
    /* 1: supported; 0: not, with a reason written into reason (reason_bytes, NUL-terminated).
     * Pure: no CUDA call, so it answers for a described device on a machine without a GPU. */
    int (*supports)(const struct dsatopk_plugin_device *device,
                    const struct dsatopk_plugin_shape *shape, char *reason, size_t reason_bytes);
    /* Device scratch the launch needs for this shape, 0 for none. May be NULL (no scratch). */
    uint64_t (*scratch_bytes)(const struct dsatopk_plugin_device *device,
                              const struct dsatopk_plugin_shape *shape);
    /* Enqueues the call on stream (a cudaStream_t) and returns 0, or non-zero with a message in
     * error (error_bytes, NUL-terminated). No allocation and no host synchronisation, so the
     * launch can be captured in a CUDA graph; faults of the running kernel surface at the
     * caller's next synchronisation. The caller has made the device's primary context current
     * on the calling thread. */
    int (*launch)(const struct dsatopk_plugin_problem *problem,
                  const struct dsatopk_plugin_device *device, void *stream, char *error,
                  size_t error_bytes);
};

/* Exported by the plugin: returns its description, which must stay valid until the plugin is
 * unloaded. Called once, right after loading; it must not call CUDA (the loading process may
 * never touch the GPU). Define it as
 *     DSATOPK_PLUGIN_EXPORT const struct dsatopk_plugin *dsatopk_plugin_entry(void) { ... }
 * (in C++ or CUDA inside extern "C"). */
typedef const struct dsatopk_plugin *(*dsatopk_plugin_entry_fn)(void);
#if defined(__GNUC__) || defined(__clang__)
#define DSATOPK_PLUGIN_EXPORT __attribute__((visibility("default")))
#else
#define DSATOPK_PLUGIN_EXPORT
#endif

/* ---- 2. the loader --------------------------------------------------------------------------- */

struct topk_backend;
struct audit_error;

/* At most this many plugins are loaded at once (the adapter's callbacks are per-slot functions,
 * because struct topk_backend's callbacks carry no user pointer). */
#define PLUGIN_MAX_LOADED 16

/* Loads path (a name without '/' is taken in the working directory, not searched in the library
 * path), checks the ABI version and every field, and returns a backend that forwards to the
 * plugin; it stays valid until plugin_unload_all(). Errors name the file and the field:
 * AUDIT_EIO (cannot be opened or is not a loadable shared object), AUDIT_EDATA (no entry
 * symbol, another ABI version, a NULL or invalid field, a name that is a built-in backend's or
 * an already loaded plugin's), AUDIT_EUSAGE (more than PLUGIN_MAX_LOADED plugins). Not thread
 * safe: load plugins before starting threads. */
int plugin_load(const char *path, const struct topk_backend **backend_out,
                struct audit_error *err);

/* The loaded plugin whose backend is named name, or NULL. */
const struct topk_backend *plugin_backend_find(const char *name);

/* Where a loaded plugin's backend came from (for reports): its path as given and the SHA-256 of
 * the file, as 64 hex digits. NULL when backend is not a loaded plugin's. */
const char *plugin_backend_path(const struct topk_backend *backend);
const char *plugin_backend_sha256(const struct topk_backend *backend);

/* Number of loaded plugins. */
int plugin_count(void);

/* Unloads every plugin (dlclose). Every backend plugin_load returned becomes invalid: call it
 * after the last launch has completed, or not at all in a process that is about to exit. */
void plugin_unload_all(void);

#ifdef __cplusplus
}
#endif

#endif
