/* Device discovery: how many CUDA devices there are, what one of them reports (with a smaller
 * shared memory emulated where asked, so that the decisions of a small device can be checked on
 * a large one), how many thread-block clusters of each size it runs at once, the floor of a
 * kernel launch, and an upload that waits for its copy (kernels/runtime/device.cu). Plain C
 * with extern "C" guards. */
#ifndef DSATOPK_GPU_DEVICE_H
#define DSATOPK_GPU_DEVICE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <cuda_runtime_api.h>

#include "error.h"

#ifdef __cplusplus
extern "C" {
#endif

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
/* Copies bytes from pageable host memory to device memory and waits until they are there.
 * cudaMemcpy alone is not enough: from pageable memory it may return once the bytes are staged
 * for DMA, the DMA still in flight on the default stream (CUDA's "API synchronization behavior"),
 * and kernels on a cudaStreamNonBlocking stream, as every replay and test stream is, are not
 * ordered after it: a launch could read the old contents (a 64000-byte upload did on the H200).
 * Waiting on the default stream orders every later launch.
 * Both pointers may be anything when bytes is 0 (nothing is copied). */
int gpu_upload(void *device, const void *host, size_t bytes, struct audit_error *err);
/* Launches one empty kernel (one block of 32 threads) on stream: what `bench` subtracts nothing
 * with but reports as the floor of a call (launch and drain of a kernel in a graph). */
int gpu_launch_empty(cudaStream_t stream, struct audit_error *err);

#ifdef __cplusplus
}
#endif

#endif
