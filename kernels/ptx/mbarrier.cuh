/* mbarrier and bulk-copy wrappers (sm_90): arrivals with expected transaction bytes, waits on
 * a phase, and the bulk copy engine's global-to-shared copy counted on an mbarrier. */
#ifndef DSATOPK_PTX_MBARRIER_CUH
#define DSATOPK_PTX_MBARRIER_CUH

#include <cstdint>

/* Initialises an mbarrier for `arrivals` arrivals per phase, visible to the cluster after the
 * next cluster barrier. */
static __device__ __forceinline__ void mbarrier_init(uint32_t barrier, uint32_t arrivals)
{
    asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;\n\t"
                 "fence.mbarrier_init.release.cluster;" ::"r"(barrier),
                 "r"(arrivals)
                 : "memory");
}

/* One arrival that also expects `bytes` of asynchronous stores in the current phase. */
static __device__ __forceinline__ void mbarrier_expect_bytes(uint32_t barrier, uint32_t bytes)
{
    asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" ::"r"(barrier), "r"(bytes)
                 : "memory");
}

/* Waits until the phase of the given parity completes. */
static __device__ __forceinline__ void mbarrier_wait(uint32_t barrier, uint32_t parity)
{
    asm volatile("{\n\t.reg .pred done;\n\t"
                 "WAIT_%=:\n\t"
                 "mbarrier.try_wait.parity.shared::cta.b64 done, [%0], %1;\n\t"
                 "@!done bra WAIT_%=;\n\t}" ::"r"(barrier),
                 "r"(parity)
                 : "memory");
}

/* A copy of `bytes` (a multiple of 16, both addresses 16-byte aligned) from global memory to
 * this CTA's shared memory by the bulk copy engine, its bytes counted on `barrier` (shared
 * addresses from shared_address). */
static __device__ __forceinline__ void bulk_copy_to_shared(uint32_t destination,
                                                           const void *source, uint32_t bytes,
                                                           uint32_t barrier)
{
    asm volatile("cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes"
                 " [%0], [%1], %2, [%3];" ::"r"(destination),
                 "l"(source), "r"(bytes), "r"(barrier)
                 : "memory");
}

#endif
