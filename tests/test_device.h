/* A described NVIDIA H200 for the CPU tests of supports() and scratch_bytes(), which are pure
 * functions of a device description (no CUDA call): the values `dsatopk-audit devices` printed
 * on the lent H200 (docs/BACKENDS.md). */
#ifndef DSATOPK_TEST_DEVICE_H
#define DSATOPK_TEST_DEVICE_H

#include <stdio.h>
#include <string.h>

#include "topk_backends.h"

static inline struct gpu_device_info test_h200(void)
{
    struct gpu_device_info info;
    memset(&info, 0, sizeof(info));
    info.ordinal = 1;
    snprintf(info.name, sizeof(info.name), "NVIDIA H200");
    info.cc_major = 9;
    info.cc_minor = 0;
    info.sm_count = 132;
    info.smem_per_sm = 233472;
    info.smem_per_block_optin = 232448;
    info.reported_smem_per_sm = 233472;
    info.l2_bytes = 60 << 20;
    info.global_memory_bytes = (size_t)141 << 30;
    info.driver_version = 13000;
    info.runtime_version = 13000;
    return info;
}

#endif
