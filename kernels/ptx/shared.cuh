/* Shared-memory addresses and a predicated shared-memory reduction, in PTX (any sm_70+). */
#ifndef DSATOPK_PTX_SHARED_CUH
#define DSATOPK_PTX_SHARED_CUH

#include <cstdint>

/* The shared-memory address of a generic pointer into shared memory, as PTX operands take it. */
static __device__ __forceinline__ uint32_t shared_address(const void *pointer)
{
    return (uint32_t)__cvta_generic_to_shared(pointer);
}

/* Adds one to a shared-memory counter where `take`, as one predicated reduction: for the
 * refinement levels, where few items are members, so that a warp with none skips the atomic.
 * (ptxas still emits a branch per item around it; written as an `if`, each item also gets its
 * reconvergence: twice the instructions.) */
static __device__ __forceinline__ void shared_add_if(uint32_t *counter, bool take)
{
    asm volatile("{\n\t.reg .pred p;\n\tsetp.ne.u32 p, %1, 0;\n\t"
                 "@p red.shared.add.u32 [%0], 1;\n\t}" ::"r"(shared_address(counter)),
                 "r"((uint32_t)take)
                 : "memory");
}

#endif
