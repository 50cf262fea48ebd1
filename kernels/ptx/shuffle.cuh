/* A warp shuffle step with its lane test in the instruction, in PTX (any sm_70+). */
#ifndef DSATOPK_PTX_SHUFFLE_CUH
#define DSATOPK_PTX_SHUFFLE_CUH

#include <cstdint>

/* `value` plus lane (lane - offset)'s `value` where that lane exists, else `value`: one step of
 * a full warp's inclusive prefix sum. shfl.sync.up's predicate says whether the source lane
 * exists, so the step is a shuffle and a predicated add; __shfl_up_sync and a test of the lane
 * compile to a shuffle, a select and an add. */
static __device__ __forceinline__ uint32_t shuffle_up_add(uint32_t value, uint32_t offset)
{
    asm volatile("{\n\t.reg .u32 r;\n\t.reg .pred p;\n\t"
                 "shfl.sync.up.b32 r|p, %0, %1, 0, 0xffffffff;\n\t"
                 "@p add.u32 %0, r, %0;\n\t}"
                 : "+r"(value)
                 : "r"(offset));
    return value;
}

#endif
