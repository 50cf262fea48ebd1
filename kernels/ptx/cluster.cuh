/* Thread-block cluster wrappers (sm_90): mapping a shared address into another CTA of the
 * cluster, an 8-byte store into it counted on its mbarrier, and the split cluster barrier. */
#ifndef DSATOPK_PTX_CLUSTER_CUH
#define DSATOPK_PTX_CLUSTER_CUH

#include <cstdint>

/* The address of the same shared variable in cluster CTA `rank`. */
static __device__ __forceinline__ uint32_t cluster_map(uint32_t address, uint32_t rank)
{
    uint32_t mapped;
    asm volatile("mapa.shared::cluster.u32 %0, %1, %2;" : "=r"(mapped) : "r"(address), "r"(rank));
    return mapped;
}

/* An 8-byte store into another CTA's shared memory that counts its bytes on that CTA's
 * mbarrier (both addresses from cluster_map). */
static __device__ __forceinline__ void store_async(uint32_t address, uint64_t value,
                                                   uint32_t barrier)
{
    asm volatile(
        "st.async.shared::cluster.mbarrier::complete_tx::bytes.b64 [%0], %1, [%2];" ::"r"(address),
        "l"(value), "r"(barrier)
        : "memory");
}

/* The split cluster barrier: arrive without a memory barrier (the CTA's reads of other CTAs'
 * shared memory are done, their values used), and wait for every CTA's arrival. */
static __device__ __forceinline__ void cluster_arrive_relaxed(void)
{
    asm volatile("barrier.cluster.arrive.relaxed.aligned;" ::: "memory");
}

static __device__ __forceinline__ void cluster_wait(void)
{
    asm volatile("barrier.cluster.wait.aligned;" ::: "memory");
}

#endif
