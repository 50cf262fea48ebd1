/* Shared-memory addresses, a predicated shared-memory store and reduction, in PTX (any sm_70+). */
#ifndef DSATOPK_PTX_SHARED_CUH
#define DSATOPK_PTX_SHARED_CUH

#include <cstdint>

/* The shared-memory address of a generic pointer into shared memory, as PTX operands take it. */
static __device__ __forceinline__ uint32_t shared_address(const void *pointer)
{
    return (uint32_t)__cvta_generic_to_shared(pointer);
}

/* An 8-byte store to a shared-memory address (shared_address) where `take`, as one predicated
 * store: the address stays the register it is given, where a store through a pointer into
 * dynamic shared memory under an `if` has ptxas rebuild the shared window's base (S2UR of the
 * CTA's rank in the cluster and three uniform instructions) and branch around it, item by item
 * of an unrolled loop. */
static __device__ __forceinline__ void shared_store_u64_if(uint32_t address, uint64_t value,
                                                           bool take)
{
    asm volatile("{\n\t.reg .pred p;\n\tsetp.ne.u32 p, %2, 0;\n\t"
                 "@p st.shared.u64 [%0], %1;\n\t}" ::"r"(address),
                 "l"(value), "r"((uint32_t)take)
                 : "memory");
}

/* A 4-byte store to a shared-memory address where `take`, as shared_store_u64_if. */
static __device__ __forceinline__ void shared_store_u32_if(uint32_t address, uint32_t value,
                                                           bool take)
{
    asm volatile("{\n\t.reg .pred p;\n\tsetp.ne.u32 p, %2, 0;\n\t"
                 "@p st.shared.u32 [%0], %1;\n\t}" ::"r"(address),
                 "r"(value), "r"((uint32_t)take)
                 : "memory");
}

/* Adds one to counter `index` of the 4-byte counters at shared address `base` unless `value` is
 * `excluded`, then to counter `trash` (nobody reads it; an index relative to `base`, as unsigned
 * arithmetic wraps): a select and an unconditional increment, which ptxas makes one
 * warp-aggregated ATOMS.POPC.INC with no branch, so that unrolled items interleave (a
 * predicated increment, shared_add_if, gets a branch around each). In PTX so that the select
 * is of the index, not of two addresses (one instruction fewer), and so that the test is not
 * shared with a later test of the same value: written in C, ptxas kept each test's result as a
 * bit of a register for it (two instructions an increment). */
static __device__ __forceinline__ void shared_add_unless(uint32_t base, uint32_t index,
                                                         uint32_t value, uint32_t excluded,
                                                         uint32_t trash)
{
    asm volatile("{\n\t.reg .pred p;\n\t.reg .u32 i;\n\tsetp.ne.u32 p, %2, %3;\n\t"
                 "selp.u32 i, %1, %4, p;\n\tmad.lo.u32 i, i, 4, %0;\n\t"
                 "red.shared.add.u32 [i], 1;\n\t}" ::"r"(base),
                 "r"(index), "r"(value), "r"(excluded), "r"(trash)
                 : "memory");
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
