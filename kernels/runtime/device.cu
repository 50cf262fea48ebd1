/* Device discovery: how many CUDA devices there are (zero, with a reason, when there is no
 * device or no driver: CPU features go on) and what one of them reports, possibly with a
 * smaller shared memory emulated (--emulate-smem-per-sm) so that the supports() decisions of a
 * small device such as GB10 (102400 B per SM) can be checked on a large one. */
#include <cstdio>
#include <cstring>

#include "gpu_device.h"
#include "cuda_check.h"
#include "common/topk_common.cuh"

/* Errors that mean "this machine has no usable CUDA device", not "something failed". */
static bool means_no_device(cudaError_t status)
{
    switch (status) {
    case cudaErrorNoDevice:
    case cudaErrorInsufficientDriver:
    case cudaErrorNotSupported:
    case cudaErrorSystemDriverMismatch:
    case cudaErrorCompatNotSupportedOnDevice:
    case cudaErrorDevicesUnavailable:
    case cudaErrorInitializationError:
    case cudaErrorSystemNotReady:
    case cudaErrorStubLibrary:
    case cudaErrorCallRequiresNewerDriver:
        return true;
    default:
        return false;
    }
}

extern "C" int gpu_device_count(int *count, char *why, size_t why_bytes)
{
    int found = 0;
    cudaError_t status = cudaGetDeviceCount(&found);
    *count = 0;
    if (why && why_bytes)
        why[0] = '\0';
    if (status != cudaSuccess) {
        /* The runtime records the failure as the last error; clear it so that the next
         * unrelated check does not report it. */
        (void)cudaGetLastError();
        if (why && why_bytes)
            snprintf(why, why_bytes, "%s (%s)", cudaGetErrorString(status),
                     cudaGetErrorName(status));
        if (means_no_device(status))
            return 0;
        return AUDIT_EDEVICE;
    }
    if (found == 0 && why && why_bytes)
        snprintf(why, why_bytes, "the CUDA driver reports no devices");
    *count = found;
    return 0;
}

static int query_attribute(int ordinal, enum cudaDeviceAttr attribute, const char *what, int *value,
                           struct audit_error *err)
{
    cudaError_t status = cudaDeviceGetAttribute(value, attribute, ordinal);
    if (status != cudaSuccess)
        return audit_fail(err, AUDIT_EDEVICE, "device %d: cudaDeviceGetAttribute(%s): %s (%s)",
                          ordinal, what, cudaGetErrorString(status), cudaGetErrorName(status));
    return 0;
}

extern "C" int gpu_device_query(int ordinal, size_t emulate_smem_per_sm,
                                struct gpu_device_info *info, struct audit_error *err)
{
    int status = 0;
    int cc_major = 0, cc_minor = 0, sm_count = 0, smem_per_sm = 0, smem_optin = 0, l2 = 0;
    cudaDeviceProp properties;
    memset(info, 0, sizeof(*info));
    info->ordinal = ordinal;
    CUDA_TRY(cudaDeviceGetAttribute(&cc_major, cudaDevAttrComputeCapabilityMajor, ordinal), err);
    if ((status = query_attribute(ordinal, cudaDevAttrComputeCapabilityMinor,
                                  "ComputeCapabilityMinor", &cc_minor, err)) ||
        (status = query_attribute(ordinal, cudaDevAttrMultiProcessorCount, "MultiProcessorCount",
                                  &sm_count, err)) ||
        (status = query_attribute(ordinal, cudaDevAttrMaxSharedMemoryPerMultiprocessor,
                                  "MaxSharedMemoryPerMultiprocessor", &smem_per_sm, err)) ||
        (status = query_attribute(ordinal, cudaDevAttrMaxSharedMemoryPerBlockOptin,
                                  "MaxSharedMemoryPerBlockOptin", &smem_optin, err)) ||
        (status = query_attribute(ordinal, cudaDevAttrL2CacheSize, "L2CacheSize", &l2, err)))
        return status;
    /* Name and total memory from the properties (cudaMemGetInfo would create a context on
     * the device just to list it). */
    CUDA_TRY(cudaGetDeviceProperties(&properties, ordinal), err);
    snprintf(info->name, sizeof(info->name), "%s", properties.name);
    CUDA_TRY(cudaDriverGetVersion(&info->driver_version), err);
    CUDA_TRY(cudaRuntimeGetVersion(&info->runtime_version), err);
    info->cc_major = cc_major;
    info->cc_minor = cc_minor;
    info->sm_count = sm_count;
    info->reported_smem_per_sm = (size_t)smem_per_sm;
    info->smem_per_sm = (size_t)smem_per_sm;
    info->smem_per_block_optin = (size_t)smem_optin;
    info->l2_bytes = (size_t)l2;
    info->global_memory_bytes = properties.totalGlobalMem;
    if (emulate_smem_per_sm > 0) {
        /* A block can opt in to the SM's shared memory minus what the SM reserves per block
         * (H200: 233472 per SM, 232448 per block); the emulated device keeps that reserve. */
        size_t reserve = info->reported_smem_per_sm > info->smem_per_block_optin
                             ? info->reported_smem_per_sm - info->smem_per_block_optin
                             : 0;
        size_t optin = emulate_smem_per_sm > reserve ? emulate_smem_per_sm - reserve : 0;
        info->smem_per_sm = emulate_smem_per_sm;
        if (info->smem_per_block_optin > optin)
            info->smem_per_block_optin = optin;
        info->smem_emulated = true;
    }
    return 0;
}

/* The cluster-packing probe of gpu_device_measure_clusters: never launched, only asked about. */
static __global__ void __launch_bounds__(512, 1) k_cluster_probe(void) {}

static int measure_clusters(struct gpu_device_info *info, struct audit_error *err)
{
    /* The real device's whole opt-in shared memory (emulation aside): one CTA per SM, as the
     * bitonic cluster kernels that auto sizes by this. */
    int optin = 0;
    CUDA_TRY(cudaDeviceGetAttribute(&optin, cudaDevAttrMaxSharedMemoryPerBlockOptin,
                                    info->ordinal),
             err);
    CUDA_TRY(cudaSetDevice(info->ordinal), err);
    CUDA_TRY(cudaFuncSetAttribute(k_cluster_probe, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                  optin),
             err);
    /* Where the device refuses non-portable sizes (above 8), those stay 0: none fit. */
    const bool non_portable =
        cudaFuncSetAttribute(k_cluster_probe, cudaFuncAttributeNonPortableClusterSizeAllowed, 1) ==
        cudaSuccess;
    if (!non_portable)
        (void)cudaGetLastError();
    uint32_t fit[GPU_CLUSTER_MAX + 1] = { 0 };
    for (unsigned size = 1; size <= GPU_CLUSTER_MAX && (size <= 8 || non_portable); size++) {
        cudaLaunchAttribute attribute;
        const cudaLaunchConfig_t config =
            cluster_launch_config(1, size, 512, (size_t)optin, 0, &attribute);
        int clusters = 0;
        const cudaError_t status = cudaOccupancyMaxActiveClusters(&clusters, k_cluster_probe,
                                                                  &config);
        if (status != cudaSuccess) {
            (void)cudaGetLastError(); /* a size the device does not take: none fit */
            if (size == 1)
                return audit_fail(err, AUDIT_EDEVICE,
                                  "device %d: cudaOccupancyMaxActiveClusters: %s (%s)",
                                  info->ordinal, cudaGetErrorString(status),
                                  cudaGetErrorName(status));
            continue;
        }
        fit[size] = clusters > 0 ? (uint32_t)clusters : 0u;
    }
    if (fit[1] == 0)
        return audit_fail(err, AUDIT_EDEVICE, "device %d: no cluster of one CTA fits",
                          info->ordinal);
    memcpy(info->cluster_fit, fit, sizeof(fit));
    return 0;
}

extern "C" int gpu_device_measure_clusters(struct gpu_device_info *info, struct audit_error *err)
{
    memset(info->cluster_fit, 0, sizeof(info->cluster_fit));
    if (info->cc_major < 9)
        return 0;
    const int status = measure_clusters(info, err);
    if (status != 0)
        (void)cudaGetLastError(); /* the caller goes on without it: no stale error for the next */
    return status;
}

extern "C" int gpu_upload(void *device, const void *host, size_t bytes, struct audit_error *err)
{
    if (bytes == 0)
        return 0;
    CUDA_TRY(cudaMemcpy(device, host, bytes, cudaMemcpyHostToDevice), err);
    CUDA_TRY(cudaStreamSynchronize(0), err);
    return 0;
}

static __global__ void k_empty(void) {}

extern "C" int gpu_launch_empty(cudaStream_t stream, struct audit_error *err)
{
    k_empty<<<1, 32, 0, stream>>>();
    CUDA_TRY(cudaGetLastError(), err);
    return 0;
}
