/* The built-in backends' table entries: supports() and scratch_bytes() are pure functions of a
 * described device and shape (no CUDA call), so what they answer is checked without a GPU.
 * bitonic's entry answers from its planner (tests/test_bitonic_plan.c checks the plans
 * themselves): its reason names the path the plan runs, its scratch is the plan's, and
 * topk_backend_find("bitonic@PLAN") gives the entry with that plan forced. */
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
#include "topk_backends.h"

static struct topk_shape shape_of(uint32_t rows, int32_t length, uint32_t k)
{
    struct topk_shape shape = { .rows = rows, .k = k, .row_stride = (uint64_t)length,
                                .max_length = length };
    return shape;
}

/* The reason `backend` gives for rows x length at k on device (supported). */
static const char *supported_reason(const struct topk_backend *backend,
                                    const struct gpu_device_info *device, uint32_t rows,
                                    int32_t length, uint32_t k)
{
    static char reason[512];
    struct topk_shape shape = shape_of(rows, length, k);
    reason[0] = '\0';
    assert_non_null(backend);
    assert_int_equal(backend->supports(device, &shape, reason, sizeof(reason)), 1);
    return reason;
}

static void expect_reason(const struct topk_backend *backend, const struct gpu_device_info *device,
                          uint32_t rows, int32_t length, uint32_t k, const char *part)
{
    const char *reason = supported_reason(backend, device, rows, length, k);
    if (!strstr(reason, part))
        fail_msg("%s, %u x %d, k %u: \"%s\" lacks \"%s\"", backend->name, rows, length, k,
                 reason, part);
}

/* The reason names the path of each kind of plan. */
static void test_bitonic_reason_names_the_path(void **state)
{
    (void)state;
    const struct topk_backend *bitonic = topk_backend_find("bitonic");
    const struct gpu_device_info device = test_h200();
    expect_reason(bitonic, &device, 64, 131072, 2048,
                  "one thread-block cluster per row: 2 blocks of 65536 elements");
    expect_reason(bitonic, &device, 64, 8192, 2048,
                  "one thread-block cluster per row: 1 block of 8192 elements");
    expect_reason(bitonic, &device, 1, 1100000, 2048,
                  "rows cut into 135 leaves of 8192 elements merged 4 at a time (5 levels)");
    expect_reason(bitonic, &device, 4, 32768, 8192, "one block per row");
    /* Refusals come from the planner, with its reason. */
    struct topk_shape shape = shape_of(4, 32768, 8193);
    char reason[512] = "";
    assert_int_equal(bitonic->supports(&device, &shape, reason, sizeof(reason)), 0);
    assert_non_null(strstr(reason, "k = 8193 exceeds 8192"));
}

static void test_bitonic_scratch_keeps_the_fallback(void **state)
{
    (void)state;
    const struct topk_backend *bitonic = topk_backend_find("bitonic");
    const struct gpu_device_info device = test_h200();
    /* A cluster shape still gets the tree's scratch: the launch falls back to the tree when no
     * cluster of that size fits, which only the launch can find out. */
    struct topk_shape clustered = shape_of(4, 32768, 2048), single = shape_of(4, 8192, 2048);
    struct bitonic_plan plan;
    char reason[512];
    assert_int_equal(bitonic_plan_make(&device, &clustered, BITONIC_CHOICE_AUTO, &plan, reason,
                                       sizeof(reason)),
                     1);
    assert_true(bitonic->scratch_bytes(&device, &clustered) > 0);
    assert_int_equal(bitonic->scratch_bytes(&device, &clustered), plan.scratch_bytes);
    assert_int_equal(bitonic->scratch_bytes(&device, &single), 0); /* one leaf: none */
    /* A refused shape needs none. */
    struct topk_shape refused = shape_of(4, 32768, 9000);
    assert_int_equal(bitonic->scratch_bytes(&device, &refused), 0);
}

/* "bitonic@PLAN" is bitonic with that plan forced, the table's entry for "bitonic@auto". */
static void test_bitonic_forced_entries(void **state)
{
    (void)state;
    const struct gpu_device_info device = test_h200();
    const struct topk_backend *bitonic = topk_backend_find("bitonic");
    assert_ptr_equal(topk_backend_find("bitonic@auto"), bitonic);
    assert_ptr_equal(bitonic_backend_with(BITONIC_CHOICE_AUTO), bitonic);
    for (int c = 0; c < BITONIC_CHOICES; c++) {
        const struct topk_backend *entry = bitonic_backend_with((enum bitonic_choice)c);
        char name[64];
        snprintf(name, sizeof(name), "bitonic@%s", bitonic_choice_name((enum bitonic_choice)c));
        assert_ptr_equal(topk_backend_find(name), entry);
        assert_int_equal(entry->level, TOPK_GPU_TO_GPU);
        assert_true(entry->canonical_order && entry->exact_set && entry->smallest_index_ties);
    }
    expect_reason(topk_backend_find("bitonic@cluster128"), &device, 64, 131072, 2048,
                  "2 blocks of 65536 elements");
    expect_reason(topk_backend_find("bitonic@cluster16"), &device, 64, 131072, 2048,
                  "16 blocks of 8192 elements");
    expect_reason(topk_backend_find("bitonic@tree"), &device, 64, 131072, 2048,
                  "leaves of 8192");
    expect_reason(topk_backend_find("bitonic@tree_deep"), &device, 64, 131072, 2048,
                  "leaves of 2048");
    expect_reason(topk_backend_find("bitonic@one_cta"), &device, 64, 131072, 2048,
                  "one block per row");
    /* The forced tree's scratch is its own: deeper with leaves of 2048. */
    struct topk_shape shape = shape_of(64, 131072, 2048);
    assert_true(topk_backend_find("bitonic@tree_deep")->scratch_bytes(&device, &shape) >
                topk_backend_find("bitonic@tree")->scratch_bytes(&device, &shape));
    assert_int_equal(topk_backend_find("bitonic@one_cta")->scratch_bytes(&device, &shape), 0);
    /* Anything else is no backend. */
    assert_null(topk_backend_find("bitonic@"));
    assert_null(topk_backend_find("bitonic@bogus"));
    assert_null(topk_backend_find("bitonic@never"));
    assert_null(topk_backend_find("radix@tree"));
    assert_null(bitonic_backend_with((enum bitonic_choice)BITONIC_CHOICES));
}

/* Every entry of the table has what the contract needs, and finds itself by name. */
static void test_table_entries(void **state)
{
    (void)state;
    int count = 0;
    for (int i = 0; topk_backend_table[i]; i++, count++) {
        const struct topk_backend *backend = topk_backend_table[i];
        assert_non_null(backend->name);
        assert_null(strchr(backend->name, '@'));
        assert_non_null(backend->supports);
        assert_non_null(backend->scratch_bytes);
        assert_non_null(backend->launch);
        assert_ptr_equal(topk_backend_find(backend->name), backend);
    }
    assert_int_equal(count, 5);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_bitonic_reason_names_the_path),
        cmocka_unit_test(test_bitonic_scratch_keeps_the_fallback),
        cmocka_unit_test(test_bitonic_forced_entries),
        cmocka_unit_test(test_table_entries),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
