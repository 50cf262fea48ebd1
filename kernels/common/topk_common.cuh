/* Device helpers shared by every backend: the order key, the coarse fp16 bin, windows and
 * page-table translation. They mirror src/reference/reference.h and src/reference/census.h bit for
 * bit. */
#ifndef DSATOPK_TOPK_COMMON_CUH
#define DSATOPK_TOPK_COMMON_CUH

#include <cstdint>
#include <cstdio>
#include <cuda_fp16.h>

#include "topk_backends.h"

/* The launch of `clusters` clusters of `parts` CTAs of `threads` threads along x, with `smem`
 * bytes of dynamic shared memory: bitonic's cluster kernels, and the probe that measures how
 * many of them fit at once (kernels/runtime/device.cu), which must describe the same launch. The
 * config points at `attribute` (the cluster shape), which must outlive it. */
static inline cudaLaunchConfig_t cluster_launch_config(unsigned clusters, unsigned parts,
                                                       unsigned threads, size_t smem,
                                                       cudaStream_t stream,
                                                       cudaLaunchAttribute *attribute)
{
    *attribute = cudaLaunchAttribute{};
    attribute->id = cudaLaunchAttributeClusterDimension;
    attribute->val.clusterDim.x = parts;
    attribute->val.clusterDim.y = 1;
    attribute->val.clusterDim.z = 1;
    cudaLaunchConfig_t config = {};
    config.gridDim = dim3(clusters * parts, 1, 1);
    config.blockDim = dim3(threads, 1, 1);
    config.dynamicSmemBytes = smem;
    config.stream = stream;
    config.attrs = attribute;
    config.numAttrs = 1;
    return config;
}

#define TOPK_NEG_INF_BITS 0xFF800000u
/* topk_order_key(-inf): keys of real candidates never equal it except -inf itself. */
#define TOPK_NEG_INF_KEY 0x007FFFFFu

/* IEEE total order as an unsigned key: larger key ranks first (+NaN > +inf > ... > +0 > -0 >
 * ... > -inf > -NaN). Same as topk_order_key() in src/reference/reference.h. */
static __device__ __forceinline__ uint32_t order_key_bits(uint32_t bits)
{
    return (bits & 0x80000000u) ? ~bits : (bits | 0x80000000u);
}
static __device__ __forceinline__ uint32_t order_key(float value)
{
    return order_key_bits(__float_as_uint(value));
}
static __device__ __forceinline__ bool is_candidate_bits(uint32_t bits)
{
    return bits != TOPK_NEG_INF_BITS;
}

/* The coarse bin of the radix-select families (sgl-kernel, FlashInfer): the value rounded to
 * fp16 (round to nearest even), mapped to an order-preserving 16-bit key, top byte. Same as
 * census_coarse_bin() in src/reference/census.h. */
static __device__ __forceinline__ uint32_t coarse_bin(float value)
{
    uint16_t half_bits = __half_as_ushort(__float2half_rn(value));
    uint16_t key = (half_bits & 0x8000u) ? (uint16_t)~half_bits : (uint16_t)(half_bits | 0x8000u);
    return key >> 8;
}

/* Row b's window start (in elements, from the start of the scores buffer). */
static __device__ __forceinline__ const float *row_window(const struct topk_problem &p, uint32_t b)
{
    int64_t start = p.row_starts ? p.row_starts[b] : 0;
    return p.scores + (uint64_t)b * p.shape.row_stride + start;
}

/* Writes slot j of row b: raw window-relative index (or -1) and its translation. */
static __device__ __forceinline__ void write_output(const struct topk_problem &p, uint32_t b,
                                                    uint32_t j, int32_t raw_index)
{
    uint64_t slot = (uint64_t)b * p.shape.k + j;
    int32_t translated = raw_index;
    if (p.page_table && raw_index >= 0) {
        int64_t page_start = p.page_table_row_starts ? p.page_table_row_starts[b] : 0;
        uint32_t shift = __ffs(p.shape.page_size) - 1; /* page_size is a power of two */
        int64_t page = p.page_table[(uint64_t)b * p.page_table_cols + page_start +
                                    ((uint32_t)raw_index >> shift)];
        translated = (int32_t)(page * p.shape.page_size + (raw_index & (p.shape.page_size - 1)));
    }
    p.out[slot] = translated;
    if (p.raw_out)
        p.raw_out[slot] = raw_index;
}

/* Host side: can this build run on the device? SASS of the same major and a lower or equal
 * minor, or the embedded PTX of the highest listed architecture (JIT-compiled for newer
 * devices). On a no, writes the reason and returns false. */
static inline bool topk_built_for(const struct gpu_device_info *device, char *reason,
                                  size_t reason_bytes)
{
    static const int archs[] = { __CUDA_ARCH_LIST__ };
    const int device_arch = device->cc_major * 100 + device->cc_minor * 10;
    int highest = 0, lowest = archs[0];
    for (size_t i = 0; i < sizeof(archs) / sizeof(archs[0]); i++) {
        if (archs[i] / 100 == device->cc_major && archs[i] <= device_arch)
            return true;
        if (archs[i] > highest)
            highest = archs[i];
        if (archs[i] < lowest)
            lowest = archs[i];
    }
    if (device_arch >= highest)
        return true;
    snprintf(reason, reason_bytes,
             "compute capability %d.%d: this build has kernels for sm_%d and newer only",
             device->cc_major, device->cc_minor, lowest / 10);
    return false;
}

#endif
