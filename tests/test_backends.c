/* The built-in backends' supports() and scratch_bytes() are pure functions of a described
 * device and shape (no CUDA call), so the path `bitonic` picks can be checked without a GPU:
 * the cluster path where the grid fits one wave of an sm_90 device (two for the largest
 * slices), the tree path elsewhere,
 * one CTA per row above k = 4096 (docs/BACKENDS.md). Run with DSATOPK_BITONIC_SPLIT unset
 * (auto); the knob is read once per process. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "test_device.h"
#include "topk_backends.h"

static struct topk_shape shape_of(uint32_t rows, int32_t length, uint32_t k)
{
    struct topk_shape shape = { .rows = rows, .k = k, .row_stride = (uint64_t)length,
                                .max_length = length };
    return shape;
}

/* The reason bitonic gives for rows x length at k on device. */
static const char *bitonic_reason(const struct gpu_device_info *device, uint32_t rows,
                                  int32_t length, uint32_t k)
{
    static char reason[512];
    const struct topk_backend *bitonic = topk_backend_find("bitonic");
    assert_non_null(bitonic);
    struct topk_shape shape = shape_of(rows, length, k);
    reason[0] = '\0';
    assert_int_equal(bitonic->supports(device, &shape, reason, sizeof(reason)), 1);
    return reason;
}

/* What bitonic runs for one shape, as its supports() reason says it. */
struct expected_path {
    uint32_t rows;
    int32_t length;
    uint32_t k;
    const char *reason_part;
};

static void check_paths(const struct gpu_device_info *device, const struct expected_path *paths,
                        size_t count)
{
    for (size_t i = 0; i < count; i++) {
        const char *reason =
            bitonic_reason(device, paths[i].rows, paths[i].length, paths[i].k);
        if (!strstr(reason, paths[i].reason_part))
            fail_msg("%u x %d, k %u: \"%s\" lacks \"%s\"", paths[i].rows, paths[i].length,
                     paths[i].k, reason, paths[i].reason_part);
    }
}

static void test_bitonic_paths_on_h200(void **state)
{
    (void)state;
    if (getenv("DSATOPK_BITONIC_SPLIT"))
        skip();
    const struct gpu_device_info device = test_h200();
    static const struct expected_path paths[] = {
        /* The smallest slices (8192, 16384, 32768) whose grid is one wave: one CTA per SM (132
         * here), half the SMs with clusters of more than 4. */
        {64, 8192, 2048, "cluster per row: 1 block of 8192 elements"},
        {16, 32768, 2048, "cluster per row: 4 blocks of 8192 elements"},
        {64, 32768, 2048, "cluster per row: 2 blocks of 16384 elements"},
        {16, 65536, 512, "cluster per row: 4 blocks of 16384 elements"},
        {8, 131072, 2048, "cluster per row: 8 blocks of 16384 elements"},
        {1, 131072, 2048, "cluster per row: 16 blocks of 8192 elements"},
        {4, 131072, 512, "cluster per row: 16 blocks of 8192 elements"},
        {16, 131072, 2048, "cluster per row: 4 blocks of 32768 elements"},
        {64, 65536, 2048, "cluster per row: 2 blocks of 32768 elements"},
        {1, 300000, 2048, "cluster per row: 10 blocks of 32768 elements"},
        /* Slices of 65536 (half their keys in shared memory), at k up to 4096. */
        {64, 131072, 2048, "cluster per row: 2 blocks of 65536 elements"},
        {64, 131072, 4096, "cluster per row: 2 blocks of 65536 elements"},
        {1, 600000, 2048, "cluster per row: 10 blocks of 65536 elements"},
        /* No cut in one wave: the fewest slices per row (then the smallest), in several
         * waves. */
        {200, 32768, 2048, "cluster per row: 1 block of 32768 elements"},
        {64, 262144, 2048, "cluster per row: 4 blocks of 65536 elements"},
        {128, 131072, 2048, "cluster per row: 2 blocks of 65536 elements"},
        {300, 8192, 512, "cluster per row: 1 block of 8192 elements"},
        {1000, 16384, 2048, "cluster per row: 1 block of 16384 elements"},
        {4096, 65536, 2048, "cluster per row: 1 block of 65536 elements"},
        /* Longer than 16 slices of 65536: the tree. */
        {1, 1100000, 2048, "leaves of 8192"},
        /* k above 4096: one CTA per row. */
        {4, 32768, 8192, "one block per row"},
    };
    check_paths(&device, paths, sizeof(paths) / sizeof(paths[0]));
}

/* The same H200 with its cluster packing as measured there (cudaOccupancyMaxActiveClusters, one
 * CTA per SM): auto takes no cluster size that the device cannot run in one wave. */
static void test_bitonic_paths_by_packing(void **state)
{
    (void)state;
    if (getenv("DSATOPK_BITONIC_SPLIT"))
        skip();
    struct gpu_device_info device = test_h200();
    static const uint32_t h200_fit[GPU_CLUSTER_MAX + 1] = { 0,  132, 66, 39, 30, 22, 17, 15, 15,
                                                            9,  7,   7,  7,  7,  7,  7,  7 };
    memcpy(device.cluster_fit, h200_fit, sizeof(h200_fit));
    static const struct expected_path paths[] = {
        /* 30 clusters of 4 fit: 30 rows of 4 slices, 32 rows of 2 (one wave of 64 clusters). */
        {30, 131072, 2048, "cluster per row: 4 blocks of 32768 elements"},
        {32, 131072, 2048, "cluster per row: 2 blocks of 65536 elements"},
        {32, 65536, 2048, "cluster per row: 2 blocks of 32768 elements"},
        {16, 131072, 2048, "cluster per row: 4 blocks of 32768 elements"},
        /* 39 clusters of 3 fit: 40 rows of 98304 in 2 slices of 65536. */
        {39, 98304, 2048, "cluster per row: 3 blocks of 32768 elements"},
        {40, 98304, 2048, "cluster per row: 2 blocks of 65536 elements"},
        /* Clusters of more than 4 stay within half the SMs, below the packing. */
        {8, 131072, 2048, "cluster per row: 8 blocks of 16384 elements"},
        {1, 131072, 2048, "cluster per row: 16 blocks of 8192 elements"},
        {64, 131072, 2048, "cluster per row: 2 blocks of 65536 elements"},
    };
    check_paths(&device, paths, sizeof(paths) / sizeof(paths[0]));
    /* A device that takes no cluster of more than 8 (non-portable sizes refused): no slices of
     * 8192 at 131072, 8 of 16384 instead; and without 8 either, 4 of 32768. */
    memset(device.cluster_fit + 9, 0, 8 * sizeof(device.cluster_fit[0]));
    static const struct expected_path portable[] = {
        {1, 131072, 2048, "cluster per row: 8 blocks of 16384 elements"},
    };
    check_paths(&device, portable, 1);
    device.cluster_fit[8] = 0;
    static const struct expected_path no_eight[] = {
        {1, 131072, 2048, "cluster per row: 4 blocks of 32768 elements"},
    };
    check_paths(&device, no_eight, 1);
    /* Without the measurement (zeros), every SM counts: 32 rows of 4 slices. */
    memset(device.cluster_fit, 0, sizeof(device.cluster_fit));
    static const struct expected_path unmeasured[] = {
        {32, 131072, 2048, "cluster per row: 4 blocks of 32768 elements"},
    };
    check_paths(&device, unmeasured, 1);
}

static void test_bitonic_paths_elsewhere(void **state)
{
    (void)state;
    if (getenv("DSATOPK_BITONIC_SPLIT"))
        skip();
    /* A newer device runs the sm_90 PTX: clusters still. */
    struct gpu_device_info device = test_h200();
    device.cc_major = 10;
    assert_non_null(strstr(bitonic_reason(&device, 4, 32768, 2048), "cluster per row"));
    /* Fewer SMs, a smaller wave: 16 rows of 32768 take one CTA each; 64 rows are several waves
     * of those. */
    device = test_h200();
    device.sm_count = 24;
    assert_non_null(strstr(bitonic_reason(&device, 16, 32768, 2048),
                           "cluster per row: 1 block of 32768 elements"));
    assert_non_null(strstr(bitonic_reason(&device, 4, 32768, 2048),
                           "cluster per row: 4 blocks of 8192 elements"));
    assert_non_null(strstr(bitonic_reason(&device, 48, 32768, 2048), "cluster per row"));
    assert_non_null(strstr(bitonic_reason(&device, 64, 32768, 2048),
                           "cluster per row: 1 block of 32768 elements"));
    /* Too little shared memory per block for the cluster and tree kernels at k 4096 (about
     * 33 KiB + 64 KiB each): one CTA per row, which needs 41 KiB. At k 2048 clusters fit (with
     * buffers of the output's size, not twice). */
    device = test_h200();
    device.smem_per_block_optin = 90 * 1024;
    assert_non_null(strstr(bitonic_reason(&device, 4, 32768, 4096), "one block per row"));
    assert_non_null(strstr(bitonic_reason(&device, 4, 32768, 2048), "cluster per row"));
    /* An emulated GB10 (100 KiB per SM): both fit at k 4096, slices of 65536 (their keys in
     * 128 KiB of shared memory) do not. */
    device = test_h200();
    device.smem_per_sm = device.smem_per_block_optin = 102400;
    assert_non_null(strstr(bitonic_reason(&device, 4, 32768, 4096), "cluster per row"));
    assert_non_null(strstr(bitonic_reason(&device, 128, 131072, 4096),
                           "cluster per row: 4 blocks of 32768 elements"));
    /* A device whose packing was measured and takes no cluster of more than one CTA: rows of
     * one slice only, longer ones the tree. */
    device = test_h200();
    device.cluster_fit[1] = 132;
    assert_non_null(strstr(bitonic_reason(&device, 300, 32768, 2048),
                           "cluster per row: 1 block of 32768 elements"));
    assert_non_null(strstr(bitonic_reason(&device, 300, 131072, 2048), "leaves of 8192"));
}

static void test_bitonic_scratch_keeps_the_fallback(void **state)
{
    (void)state;
    if (getenv("DSATOPK_BITONIC_SPLIT"))
        skip();
    const struct topk_backend *bitonic = topk_backend_find("bitonic");
    const struct gpu_device_info device = test_h200();
    /* A cluster shape still gets the tree's scratch: the launch falls back to the tree when no
     * cluster of that size fits, which only the launch can find out. */
    struct topk_shape clustered = shape_of(4, 32768, 2048), single = shape_of(4, 8192, 2048);
    assert_true(bitonic->scratch_bytes(&device, &clustered) > 0);
    assert_int_equal(bitonic->scratch_bytes(&device, &single), 0); /* one leaf: none */
}

/* The testing knob (tests/meson.build runs this program once per value): each value picks its
 * path, an unknown one is refused with the value named. */
static void test_bitonic_split_knob(void **state)
{
    (void)state;
    const char *mode = getenv("DSATOPK_BITONIC_SPLIT");
    if (!mode)
        skip();
    const struct topk_backend *bitonic = topk_backend_find("bitonic");
    const struct gpu_device_info device = test_h200();
    struct topk_shape shape = shape_of(64, 131072, 2048);
    char reason[512] = "";
    const int supported = bitonic->supports(&device, &shape, reason, sizeof(reason));
    if (strcmp(mode, "cluster128") == 0) {
        assert_int_equal(supported, 1);
        assert_non_null(strstr(reason, "2 blocks of 65536 elements"));
    } else if (strcmp(mode, "cluster16") == 0) {
        assert_int_equal(supported, 1); /* forced: 16 slices of 8192, two waves or not */
        assert_non_null(strstr(reason, "16 blocks of 8192 elements"));
    } else if (strcmp(mode, "tree") == 0) {
        assert_int_equal(supported, 1);
        assert_non_null(strstr(reason, "leaves of 8192"));
    } else if (strcmp(mode, "never") == 0) {
        assert_int_equal(supported, 1);
        assert_non_null(strstr(reason, "one block per row"));
    } else {
        assert_int_equal(supported, 0);
        assert_non_null(strstr(reason, "DSATOPK_BITONIC_SPLIT="));
        assert_non_null(strstr(reason, mode));
        assert_non_null(strstr(reason, "cluster128"));
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_bitonic_paths_on_h200),
        cmocka_unit_test(test_bitonic_paths_by_packing),
        cmocka_unit_test(test_bitonic_paths_elsewhere),
        cmocka_unit_test(test_bitonic_scratch_keeps_the_fallback),
        cmocka_unit_test(test_bitonic_split_knob),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
