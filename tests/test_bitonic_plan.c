/* bitonic's planner (kernels/include/bitonic_plan.h) is a pure function of a described device
 * and a shape, so the path and the cut it picks are checked here without a GPU: auto on the
 * H200 (with and without its measured cluster packing) and on other devices, every forced
 * choice with its fallbacks, the tree's levels and scratch, the cluster's buffers, the one-CTA
 * stage, and the shapes it refuses. The GPU suite runs the same choices on the device
 * (tests/gpu/test_gpu_backends.c --plan). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "bitonic_plan.h"
#include "test_device.h"

static struct topk_shape shape_of(uint32_t rows, int32_t length, uint32_t k)
{
    struct topk_shape shape = { .rows = rows, .k = k, .row_stride = (uint64_t)length,
                                .max_length = length };
    return shape;
}

/* Plans rows x length at k; fails the test where the planner refuses. */
static struct bitonic_plan plan_of(const struct gpu_device_info *device, uint32_t rows,
                                   int32_t length, uint32_t k, enum bitonic_choice choice)
{
    struct bitonic_plan plan;
    char reason[512] = "";
    struct topk_shape shape = shape_of(rows, length, k);
    if (bitonic_plan_make(device, &shape, choice, &plan, reason, sizeof(reason)) != 1)
        fail_msg("%u x %d, k %u, %s: refused: %s", rows, length, k, bitonic_choice_name(choice),
                 reason);
    return plan;
}

/* What a plan should run: the path, and for the cluster path its CTAs per row and keys per
 * thread; for the tree path its leaf size (0: any). */
struct expected_plan {
    uint32_t rows;
    int32_t length;
    uint32_t k;
    enum bitonic_path path;
    uint32_t parts;
    uint32_t items; /* cluster: keys per thread; tree: elements per leaf */
};

static void check_plans(const struct gpu_device_info *device, enum bitonic_choice choice,
                        const struct expected_plan *expected, size_t count)
{
    for (size_t i = 0; i < count; i++) {
        const struct expected_plan *e = &expected[i];
        const struct bitonic_plan plan = plan_of(device, e->rows, e->length, e->k, choice);
        const char *where = bitonic_choice_name(choice);
        if (plan.path != e->path)
            fail_msg("%u x %d, k %u, %s: path %d, expected %d", e->rows, e->length, e->k, where,
                     (int)plan.path, (int)e->path);
        if (e->path == BITONIC_PATH_CLUSTER &&
            (plan.cluster.parts != e->parts || plan.cluster.items != e->items))
            fail_msg("%u x %d, k %u, %s: %u CTAs of %u keys, expected %u of %u", e->rows,
                     e->length, e->k, where, plan.cluster.parts, plan.cluster.items, e->parts,
                     e->items);
        if (e->path == BITONIC_PATH_TREE && e->items && plan.tree.leaf_elements != e->items)
            fail_msg("%u x %d, k %u, %s: leaves of %u, expected %u", e->rows, e->length, e->k,
                     where, plan.tree.leaf_elements, e->items);
    }
}

#define CLUSTER BITONIC_PATH_CLUSTER
#define TREE BITONIC_PATH_TREE
#define ONE_CTA BITONIC_PATH_ONE_CTA

static void test_auto_on_h200(void **state)
{
    (void)state;
    const struct gpu_device_info device = test_h200();
    static const struct expected_plan plans[] = {
        /* The smallest slices (16, 32, 64 keys per thread: 8192, 16384, 32768 elements) whose
         * grid is one wave: one CTA per SM (132), half the SMs with clusters of more than 4. */
        { 64, 8192, 2048, CLUSTER, 1, 16 },
        { 16, 32768, 2048, CLUSTER, 4, 16 },
        { 64, 32768, 2048, CLUSTER, 2, 32 },
        { 16, 65536, 512, CLUSTER, 4, 32 },
        { 8, 131072, 2048, CLUSTER, 8, 32 },
        { 1, 131072, 2048, CLUSTER, 16, 16 },
        { 4, 131072, 512, CLUSTER, 16, 16 },
        { 16, 131072, 2048, CLUSTER, 4, 64 },
        { 64, 65536, 2048, CLUSTER, 2, 64 },
        { 1, 300000, 2048, CLUSTER, 10, 64 },
        /* Slices of 65536 (half their keys in shared memory), at k up to 4096. */
        { 64, 131072, 2048, CLUSTER, 2, 128 },
        { 64, 131072, 4096, CLUSTER, 2, 128 },
        { 1, 600000, 2048, CLUSTER, 10, 128 },
        /* No cut in one wave: the fewest slices per row (then the smallest), several waves. */
        { 200, 32768, 2048, CLUSTER, 1, 64 },
        { 64, 262144, 2048, CLUSTER, 4, 128 },
        { 128, 131072, 2048, CLUSTER, 2, 128 },
        { 300, 8192, 512, CLUSTER, 1, 16 },
        { 1000, 16384, 2048, CLUSTER, 1, 32 },
        { 4096, 65536, 2048, CLUSTER, 1, 128 },
        /* Longer than 16 slices of 65536: the tree, leaves of 8192. */
        { 1, 1100000, 2048, TREE, 0, 8192 },
        /* k above 4096: one CTA per row. */
        { 4, 32768, 8192, ONE_CTA, 0, 0 },
        { 4, 32768, 4097, ONE_CTA, 0, 0 },
    };
    check_plans(&device, BITONIC_CHOICE_AUTO, plans, sizeof(plans) / sizeof(plans[0]));
}

/* The H200 with its cluster packing as measured there (cudaOccupancyMaxActiveClusters, one CTA
 * per SM): auto takes no cluster size that the device cannot run in one wave. */
static void test_auto_by_packing(void **state)
{
    (void)state;
    struct gpu_device_info device = test_h200();
    static const uint32_t h200_fit[GPU_CLUSTER_MAX + 1] = { 0,  132, 66, 39, 30, 22, 17, 15, 15,
                                                            9,  7,   7,  7,  7,  7,  7,  7 };
    memcpy(device.cluster_fit, h200_fit, sizeof(h200_fit));
    static const struct expected_plan plans[] = {
        /* 30 clusters of 4 fit: 30 rows of 4 slices, 32 rows of 2 (one wave of 64 clusters). */
        { 30, 131072, 2048, CLUSTER, 4, 64 },
        { 32, 131072, 2048, CLUSTER, 2, 128 },
        { 32, 65536, 2048, CLUSTER, 2, 64 },
        { 16, 131072, 2048, CLUSTER, 4, 64 },
        /* 39 clusters of 3 fit: 40 rows of 98304 in 2 slices of 65536. */
        { 39, 98304, 2048, CLUSTER, 3, 64 },
        { 40, 98304, 2048, CLUSTER, 2, 128 },
        /* Clusters of more than 4 stay within half the SMs, below the packing. */
        { 8, 131072, 2048, CLUSTER, 8, 32 },
        { 1, 131072, 2048, CLUSTER, 16, 16 },
        { 64, 131072, 2048, CLUSTER, 2, 128 },
    };
    check_plans(&device, BITONIC_CHOICE_AUTO, plans, sizeof(plans) / sizeof(plans[0]));
    /* A device that takes no cluster of more than 8 (non-portable sizes refused): 8 slices of
     * 16384 at 131072; without 8 either, 4 of 32768. */
    memset(device.cluster_fit + 9, 0, 8 * sizeof(device.cluster_fit[0]));
    static const struct expected_plan portable = { 1, 131072, 2048, CLUSTER, 8, 32 };
    check_plans(&device, BITONIC_CHOICE_AUTO, &portable, 1);
    device.cluster_fit[8] = 0;
    static const struct expected_plan no_eight = { 1, 131072, 2048, CLUSTER, 4, 64 };
    check_plans(&device, BITONIC_CHOICE_AUTO, &no_eight, 1);
    /* Without the measurement (zeros), every SM counts: 32 rows of 4 slices. */
    memset(device.cluster_fit, 0, sizeof(device.cluster_fit));
    static const struct expected_plan unmeasured = { 32, 131072, 2048, CLUSTER, 4, 64 };
    check_plans(&device, BITONIC_CHOICE_AUTO, &unmeasured, 1);
}

static void test_auto_elsewhere(void **state)
{
    (void)state;
    /* A newer device runs the sm_90 PTX: clusters still. An older one has none: the tree. */
    struct gpu_device_info device = test_h200();
    device.cc_major = 10;
    static const struct expected_plan newer = { 4, 32768, 2048, CLUSTER, 4, 16 };
    check_plans(&device, BITONIC_CHOICE_AUTO, &newer, 1);
    /* Fewer SMs, a smaller wave: 16 rows of 32768 take one CTA each; 64 rows are several waves
     * of those. */
    device = test_h200();
    device.sm_count = 24;
    static const struct expected_plan small[] = {
        { 16, 32768, 2048, CLUSTER, 1, 64 },
        { 4, 32768, 2048, CLUSTER, 4, 16 },
        { 64, 32768, 2048, CLUSTER, 1, 64 },
    };
    check_plans(&device, BITONIC_CHOICE_AUTO, small, sizeof(small) / sizeof(small[0]));
    /* Too little shared memory per block for the cluster and tree kernels at k 4096 (about
     * 33 KiB + 64 KiB each): one CTA per row, which needs 41 KiB. At k 2048 clusters fit, with
     * buffers of the output's size (not twice). */
    device = test_h200();
    device.smem_per_block_optin = 90 * 1024;
    static const struct expected_plan tight[] = {
        { 4, 32768, 4096, ONE_CTA, 0, 0 },
        { 4, 32768, 2048, CLUSTER, 4, 16 },
    };
    check_plans(&device, BITONIC_CHOICE_AUTO, tight, 2);
    assert_int_equal(plan_of(&device, 4, 32768, 2048, BITONIC_CHOICE_AUTO).cluster.capacity, 2048);
    /* An emulated GB10 (100 KiB per SM): both fit at k 4096; slices of 65536 (their keys in
     * 128 KiB of shared memory) do not, and slices of 32768 are not bulk-loaded. */
    device = test_h200();
    device.smem_per_sm = device.smem_per_block_optin = 102400;
    static const struct expected_plan gb10[] = {
        { 4, 32768, 4096, CLUSTER, 4, 16 },
        { 128, 131072, 4096, CLUSTER, 4, 64 },
    };
    check_plans(&device, BITONIC_CHOICE_AUTO, gb10, 2);
    assert_int_equal(plan_of(&device, 128, 131072, 4096, BITONIC_CHOICE_AUTO).cluster.staged, 0);
    /* A device whose packing was measured and takes no cluster of more than one CTA: rows of
     * one slice only, longer ones the tree. */
    device = test_h200();
    device.cluster_fit[1] = 132;
    static const struct expected_plan single[] = {
        { 300, 32768, 2048, CLUSTER, 1, 64 },
        { 300, 131072, 2048, TREE, 0, 8192 },
    };
    check_plans(&device, BITONIC_CHOICE_AUTO, single, 2);
    /* An sm_80 device: this build has no kernels for it (refused, see test_refusals). */
}

/* Each forced choice on 64 x 131072, k 2048 (auto: 2 CTAs of 128 keys), and where it does not
 * apply the fallback auto would take. */
static void test_forced_choices(void **state)
{
    (void)state;
    const struct gpu_device_info device = test_h200();
    static const struct {
        enum bitonic_choice choice;
        struct expected_plan plan;
    } forced[] = {
        { BITONIC_CHOICE_AUTO, { 64, 131072, 2048, CLUSTER, 2, 128 } },
        { BITONIC_CHOICE_CLUSTER, { 64, 131072, 2048, CLUSTER, 16, 16 } },
        { BITONIC_CHOICE_CLUSTER16, { 64, 131072, 2048, CLUSTER, 16, 16 } },
        { BITONIC_CHOICE_CLUSTER32, { 64, 131072, 2048, CLUSTER, 8, 32 } },
        { BITONIC_CHOICE_CLUSTER64, { 64, 131072, 2048, CLUSTER, 4, 64 } },
        { BITONIC_CHOICE_CLUSTER128, { 64, 131072, 2048, CLUSTER, 2, 128 } },
        { BITONIC_CHOICE_TREE, { 64, 131072, 2048, TREE, 0, 8192 } },
        { BITONIC_CHOICE_TREE_DEEP, { 64, 131072, 2048, TREE, 0, 2048 } },
        { BITONIC_CHOICE_ONE_CTA, { 64, 131072, 2048, ONE_CTA, 0, 0 } },
        /* cluster takes rows of one slice and grids of several waves too. */
        { BITONIC_CHOICE_CLUSTER, { 1000, 4000, 100, CLUSTER, 1, 16 } },
        /* cluster16 cannot cut 300000 into 16 slices of 8192: the tree. */
        { BITONIC_CHOICE_CLUSTER16, { 1, 300000, 2048, TREE, 0, 8192 } },
        /* k above 4096: one CTA per row whatever the choice. */
        { BITONIC_CHOICE_CLUSTER128, { 4, 32768, 8192, ONE_CTA, 0, 0 } },
        { BITONIC_CHOICE_TREE, { 4, 32768, 8192, ONE_CTA, 0, 0 } },
        { BITONIC_CHOICE_TREE_DEEP, { 4, 32768, 8192, ONE_CTA, 0, 0 } },
    };
    for (size_t i = 0; i < sizeof(forced) / sizeof(forced[0]); i++) {
        check_plans(&device, forced[i].choice, &forced[i].plan, 1);
        const struct bitonic_plan plan = plan_of(&device, forced[i].plan.rows,
                                                 forced[i].plan.length, forced[i].plan.k,
                                                 forced[i].choice);
        assert_int_equal(plan.choice, forced[i].choice);
    }
    /* tree keeps the tree where auto takes a cluster: no cluster in the plan. */
    const struct bitonic_plan plan = plan_of(&device, 64, 131072, 2048, BITONIC_CHOICE_TREE);
    assert_false(plan.has_cluster);
    assert_true(plan.has_tree);
}

/* The tree's levels, fan-in and scratch layout for one deep tree. */
static void test_tree_plan(void **state)
{
    (void)state;
    const struct gpu_device_info device = test_h200();
    /* Leaves of 2048 over 131072: 64 leaves, fan-in 8192 / 2048 = 4: 64, 16, 4, 1. */
    struct bitonic_plan plan = plan_of(&device, 4, 131072, 2048, BITONIC_CHOICE_TREE_DEEP);
    assert_int_equal(plan.path, BITONIC_PATH_TREE);
    assert_int_equal(plan.tree.fan_in, 4);
    assert_int_equal(plan.tree.levels, 4);
    static const uint32_t nodes[] = { 64, 16, 4, 1 }, first[] = { 0, 64, 80, 84 };
    for (int level = 0; level < 4; level++) {
        assert_int_equal(plan.tree.nodes[level], nodes[level]);
        assert_int_equal(plan.tree.first_node[level], first[level]);
    }
    assert_int_equal(plan.tree.nodes_per_row, 85);
    /* 4 rows x 85 nodes: arrivals (1360 B, to 1536), row histograms (4 x 8 KiB, to 34304),
     * counts (1360 B, to 35840), then 340 lists of 2048 composites. */
    assert_int_equal(plan.scratch_bytes, 35840 + 340 * 2048 * 8);
    /* The fan-in is at most 64 (k 100: 8192 / 100 = 81). */
    plan = plan_of(&device, 1, 1100000, 100, BITONIC_CHOICE_TREE);
    assert_int_equal(plan.tree.fan_in, 64);
    assert_int_equal(plan.tree.nodes[0], (1100000 + 8191) / 8192);
    assert_int_equal(plan.tree.levels, 3);
    /* Rows of one leaf: no parents, no scratch; the cluster plan keeps the tree's scratch for
     * its fallback. */
    plan = plan_of(&device, 4, 8192, 2048, BITONIC_CHOICE_TREE);
    assert_int_equal(plan.tree.levels, 1);
    assert_int_equal(plan.scratch_bytes, 0);
    plan = plan_of(&device, 4, 32768, 2048, BITONIC_CHOICE_AUTO);
    assert_int_equal(plan.path, BITONIC_PATH_CLUSTER);
    assert_true(plan.has_tree);
    assert_true(plan.scratch_bytes > 0);
    /* k above 4096: neither tree nor cluster, so no scratch. */
    plan = plan_of(&device, 4, 32768, 8192, BITONIC_CHOICE_TREE);
    assert_false(plan.has_tree);
    assert_int_equal(plan.scratch_bytes, 0);
}

/* The cluster's buffers: twice the output's entries, four times on rows longer than 64 k, the
 * bulk load's staging where slices of 32768 leave room for it. */
static void test_cluster_memory(void **state)
{
    (void)state;
    const struct gpu_device_info device = test_h200();
    /* 16 x 131072, k 2048: 4 slices of 32768; 131072 is not longer than 64 k: twice the
     * output, and the staging of 128 KiB fits beside it. */
    struct bitonic_plan plan = plan_of(&device, 16, 131072, 2048, BITONIC_CHOICE_AUTO);
    assert_int_equal(plan.cluster.items, 64);
    assert_int_equal(plan.cluster.capacity, 4096);
    assert_int_equal(plan.cluster.staged, 1);
    assert_int_equal(plan.cluster.smem, 2 * 4096 * 8 + 64 * 512 * 4);
    /* 16 x 65536, k 512: longer than 64 k, four times the output. */
    plan = plan_of(&device, 16, 65536, 512, BITONIC_CHOICE_AUTO);
    assert_int_equal(plan.cluster.items, 32);
    assert_int_equal(plan.cluster.capacity, 2048);
    assert_int_equal(plan.cluster.staged, 0);
    assert_int_equal(plan.cluster.smem, 2 * 2048 * 8);
    /* Slices of 65536 keep 64 keys per thread in shared memory. */
    plan = plan_of(&device, 64, 131072, 2048, BITONIC_CHOICE_AUTO);
    assert_int_equal(plan.cluster.items, 128);
    assert_int_equal(plan.cluster.smem, 2 * (size_t)plan.cluster.capacity * 8 + 64 * 512 * 4);
}

/* The one-CTA path's stage: the rest of the opt-in shared memory, no more than the longest row. */
static void test_one_cta_plan(void **state)
{
    (void)state;
    const struct gpu_device_info device = test_h200();
    struct bitonic_plan plan = plan_of(&device, 4, 131072, 8192, BITONIC_CHOICE_AUTO);
    assert_int_equal(plan.path, BITONIC_PATH_ONE_CTA);
    assert_int_equal(plan.one_cta.composite_capacity, 8192);
    assert_true(plan.one_cta.smem <= device.smem_per_block_optin);
    assert_true(plan.one_cta.smem + 8 > device.smem_per_block_optin);
    const size_t fixed = plan.one_cta.smem - (size_t)plan.one_cta.stage_capacity * 8;
    assert_int_equal(fixed, 8464 + 8192 * 8); /* the control block and the composites */
    plan = plan_of(&device, 4, 1000, 8192, BITONIC_CHOICE_AUTO);
    assert_int_equal(plan.one_cta.stage_capacity, 1000);
    plan = plan_of(&device, 4, 1000, 100, BITONIC_CHOICE_ONE_CTA);
    assert_int_equal(plan.one_cta.composite_capacity, 128);
}

static void expect_refusal(const struct gpu_device_info *device, struct topk_shape shape,
                           enum bitonic_choice choice, const char *reason_part)
{
    struct bitonic_plan plan;
    char reason[512] = "";
    assert_int_equal(bitonic_plan_make(device, &shape, choice, &plan, reason, sizeof(reason)), 0);
    if (!strstr(reason, reason_part))
        fail_msg("refusal \"%s\" lacks \"%s\"", reason, reason_part);
}

static void test_refusals(void **state)
{
    (void)state;
    struct gpu_device_info device = test_h200();
    expect_refusal(&device, shape_of(4, 32768, 8193), BITONIC_CHOICE_AUTO, "k = 8193 exceeds");
    expect_refusal(&device, shape_of(4, -1, 100), BITONIC_CHOICE_TREE, "negative row length");
    expect_refusal(&device, shape_of(0x80000000u, 10, 100), BITONIC_CHOICE_AUTO, "2^31 - 1");
    struct topk_shape paged = shape_of(4, 4096, 100);
    paged.has_page_table = true;
    paged.page_size = 48;
    expect_refusal(&device, paged, BITONIC_CHOICE_AUTO, "page size 48");
    expect_refusal(&device, shape_of(4, 4096, 100), (enum bitonic_choice)BITONIC_CHOICES,
                   "expected one of");
    device.smem_per_block_optin = 20000;
    device.smem_emulated = true;
    expect_refusal(&device, shape_of(4, 4096, 2048), BITONIC_CHOICE_AUTO, "(emulated)");
    device = test_h200();
    device.cc_major = 8;
    expect_refusal(&device, shape_of(4, 4096, 100), BITONIC_CHOICE_AUTO, "sm_90 and newer");
}

static void test_choice_names(void **state)
{
    (void)state;
    for (int c = 0; c < BITONIC_CHOICES; c++) {
        enum bitonic_choice parsed;
        const char *name = bitonic_choice_name((enum bitonic_choice)c);
        assert_non_null(strstr(BITONIC_CHOICE_NAMES, name));
        assert_int_equal(bitonic_choice_parse(name, &parsed), 0);
        assert_int_equal(parsed, c);
    }
    enum bitonic_choice parsed = BITONIC_CHOICE_AUTO;
    assert_int_equal(bitonic_choice_parse("bogus", &parsed), AUDIT_EUSAGE);
    assert_int_equal(bitonic_choice_parse("", &parsed), AUDIT_EUSAGE);
    assert_int_equal(bitonic_choice_parse(NULL, &parsed), AUDIT_EUSAGE);
    assert_string_equal(bitonic_choice_name((enum bitonic_choice)BITONIC_CHOICES), "unknown");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_auto_on_h200),
        cmocka_unit_test(test_auto_by_packing),
        cmocka_unit_test(test_auto_elsewhere),
        cmocka_unit_test(test_forced_choices),
        cmocka_unit_test(test_tree_plan),
        cmocka_unit_test(test_cluster_memory),
        cmocka_unit_test(test_one_cta_plan),
        cmocka_unit_test(test_refusals),
        cmocka_unit_test(test_choice_names),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
