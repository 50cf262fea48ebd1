/* The built-in backends' table entries: supports() and scratch_bytes() are pure functions of a
 * described device and shape (no CUDA call), so what they answer is checked without a GPU.
 * bitonic's entry answers from its planner (tests/test_bitonic_plan.c checks the plans
 * themselves): its reason names the path the plan runs, its scratch is the plan's, and
 * topk_backend_find("bitonic@PLAN") gives the entry with that plan forced. The fi-* entries
 * (FlashInfer's own kernels) ask the real device past their shape checks, so here only their
 * claims, shape refusals, emulation refusal and scratch are checked when built
 * (DSATOPK_FLASHINFER), and their "not built" answers otherwise. */
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
                                .max_length = length, .min_length = length };
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

/* ---- FlashInfer's own kernels (kernels/backends/flashinfer.cu) ------------------------------ */

#define FI_NOT_BUILT_REASON \
    "not built: flashinfer headers not found (pip install flashinfer-python, or " \
    "-Dflashinfer_include=...)"

static const char *const fi_names[] = { "fi-auto", "fi-det", "fi-det-sorted", "fi-graph-safe" };
#define FI_BACKENDS (sizeof(fi_names) / sizeof(fi_names[0]))

/* The reason fi backend `name` gives for shape on device, which it must refuse. */
static const char *fi_refusal(const char *name, const struct gpu_device_info *device,
                              const struct topk_shape *shape)
{
    static char reason[512];
    const struct topk_backend *backend = topk_backend_find(name);
    reason[0] = '\0';
    assert_non_null(backend);
    assert_int_equal(backend->supports(device, shape, reason, sizeof(reason)), 0);
    assert_true(reason[0] != '\0');
    return reason;
}

/* What each fi backend claims: FlashInfer's documented behaviour of its mode. */
static void test_fi_claims(void **state)
{
    (void)state;
    const struct topk_backend *automatic = topk_backend_find("fi-auto");
    const struct topk_backend *det = topk_backend_find("fi-det");
    const struct topk_backend *sorted = topk_backend_find("fi-det-sorted");
    const struct topk_backend *graph_safe = topk_backend_find("fi-graph-safe");
    assert_non_null(automatic);
    assert_non_null(det);
    assert_non_null(sorted);
    assert_non_null(graph_safe);
    assert_int_equal(automatic->level, TOPK_NOT_GUARANTEED);
    assert_true(automatic->exact_set && !automatic->smallest_index_ties &&
                !automatic->canonical_order && !automatic->index_ascending);
    /* Deterministic without a tie-break: the order is the path's (index-ascending after
     * FilteredTopK's finalize, not on the radix path), the tie subset the path's too. */
    assert_int_equal(det->level, TOPK_RUN_TO_RUN);
    assert_true(det->exact_set && !det->smallest_index_ties && !det->canonical_order &&
                !det->index_ascending);
    assert_int_equal(sorted->level, TOPK_RUN_TO_RUN);
    assert_true(sorted->exact_set && sorted->smallest_index_ties && sorted->canonical_order &&
                !sorted->index_ascending);
    assert_int_equal(graph_safe->level, TOPK_RUN_TO_RUN);
    assert_true(graph_safe->exact_set && graph_safe->smallest_index_ties &&
                !graph_safe->canonical_order && graph_safe->index_ascending);
}

#if DSATOPK_FLASHINFER

static void expect_fi_refusal(const char *name, const struct gpu_device_info *device,
                              const struct topk_shape *shape, const char *part)
{
    const char *reason = fi_refusal(name, device, shape);
    if (!strstr(reason, part))
        fail_msg("%s: \"%s\" lacks \"%s\"", name, reason, part);
}

/* Under --emulate-smem-per-sm the real code cannot be asked about the described device. */
static void test_fi_refuses_emulation(void **state)
{
    (void)state;
    struct gpu_device_info device = test_h200();
    device.smem_emulated = true;
    device.smem_per_sm = device.smem_per_block_optin = 102400;
    const struct topk_shape shape = shape_of(64, 131072, 2048);
    for (size_t i = 0; i < FI_BACKENDS; i++)
        expect_fi_refusal(fi_names[i], &device, &shape, "cannot be emulated: FlashInfer reads "
                                                        "the device itself");
    /* launch refuses the same way, before any CUDA call. */
    struct topk_problem problem = { .shape = shape };
    struct audit_error err = { 0 };
    assert_int_equal(topk_backend_find("fi-auto")->launch(&problem, &device, NULL, &err),
                     AUDIT_EUNSUPPORTED);
    assert_non_null(strstr(err.message, "fi-auto: cannot be emulated"));
}

/* Refusals that follow from the shape alone, in FlashInfer's terms, before the device is asked. */
static void test_fi_shape_refusals(void **state)
{
    (void)state;
    const struct gpu_device_info device = test_h200();
    struct topk_shape shape = shape_of(4, 32768, 4096);
    expect_fi_refusal("fi-graph-safe", &device, &shape, "k 4096 > 2048 (FILTERED_TOPK_MAX_K");
    expect_fi_refusal("fi-det-sorted", &device, &shape, "k 4096 > 2048 (FILTERED_TOPK_MAX_K");
    /* Sorted output is TopKDispatch's: dense rows with k <= row stride only. */
    shape = shape_of(4, 32768, 2048);
    shape.min_length = 100;
    expect_fi_refusal("fi-det-sorted", &device, &shape, "this record has per-row lengths");
    shape = shape_of(4, 32768, 2048);
    shape.has_row_starts = true;
    expect_fi_refusal("fi-det-sorted", &device, &shape, "this record has row starts");
    shape = shape_of(4, 1000, 2048);
    expect_fi_refusal("fi-det-sorted", &device, &shape, "k above its row stride");
    shape = shape_of(4, 32768, 2048);
    shape.has_page_table = true;
    shape.page_size = 64;
    expect_fi_refusal("fi-det-sorted", &device, &shape, "this record has a page table");
    shape.page_size = 48;
    expect_fi_refusal("fi-auto", &device, &shape, "page_size 48 is not a power of two");
    shape = shape_of(1, 1000, 16);
    shape.row_stride = (uint64_t)1 << 32;
    expect_fi_refusal("fi-det", &device, &shape, "outside FlashInfer's max_len range");
    shape = shape_of(1, 1000, 0);
    expect_fi_refusal("fi-auto", &device, &shape, "k 0 < 1");
}

/* Scratch: row states for min(SMs, rows) row groups, plus TopKDispatch's values (dense rows) or
 * a row of zeros per row (the transforms). */
static void test_fi_scratch(void **state)
{
    (void)state;
    const struct gpu_device_info device = test_h200();
    const struct topk_backend *automatic = topk_backend_find("fi-auto");
    const struct topk_shape dense = shape_of(64, 131072, 2048);
    struct topk_shape ragged = dense;
    ragged.min_length = 1000;
    const size_t row_state_bytes = 3 * 256 * 4; /* RadixRowState's histograms alone */
    const size_t dense_bytes = automatic->scratch_bytes(&device, &dense);
    const size_t ragged_bytes = automatic->scratch_bytes(&device, &ragged);
    assert_true(dense_bytes >= 64 * 2048 * sizeof(float) + 64 * row_state_bytes);
    assert_true(ragged_bytes >= 64 * sizeof(int32_t) + 64 * row_state_bytes);
    assert_true(ragged_bytes < dense_bytes);
    assert_int_equal(topk_backend_find("fi-det-sorted")->scratch_bytes(&device, &dense),
                     dense_bytes);
    /* fi-graph-safe always takes the transforms: no values. */
    assert_int_equal(topk_backend_find("fi-graph-safe")->scratch_bytes(&device, &dense),
                     ragged_bytes);
    /* Row groups stop at the SM count: 500 rows need the row states of 132. */
    struct topk_shape many = ragged, sms = ragged;
    many.rows = 500;
    sms.rows = 132;
    const size_t difference = automatic->scratch_bytes(&device, &many) -
                              automatic->scratch_bytes(&device, &sms);
    assert_true(difference <= (500 - 132) * sizeof(int32_t) + 256);
}

#else

/* Without the headers every fi backend is in the table and says why it cannot run. */
static void test_fi_not_built(void **state)
{
    (void)state;
    const struct gpu_device_info device = test_h200();
    const struct topk_shape shape = shape_of(64, 131072, 2048);
    for (size_t i = 0; i < FI_BACKENDS; i++) {
        const struct topk_backend *backend = topk_backend_find(fi_names[i]);
        assert_string_equal(fi_refusal(fi_names[i], &device, &shape), FI_NOT_BUILT_REASON);
        assert_non_null(strstr(backend->limits, FI_NOT_BUILT_REASON));
        assert_int_equal(backend->scratch_bytes(&device, &shape), 0);
        struct topk_problem problem = { .shape = shape };
        struct audit_error err = { 0 };
        assert_int_equal(backend->launch(&problem, &device, NULL, &err), AUDIT_EUNSUPPORTED);
        assert_non_null(strstr(err.message, FI_NOT_BUILT_REASON));
    }
}

#endif

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
    assert_int_equal(count, 9);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_bitonic_reason_names_the_path),
        cmocka_unit_test(test_bitonic_scratch_keeps_the_fallback),
        cmocka_unit_test(test_bitonic_forced_entries),
        cmocka_unit_test(test_table_entries),
        cmocka_unit_test(test_fi_claims),
#if DSATOPK_FLASHINFER
        cmocka_unit_test(test_fi_refuses_emulation),
        cmocka_unit_test(test_fi_shape_refusals),
        cmocka_unit_test(test_fi_scratch),
#else
        cmocka_unit_test(test_fi_not_built),
#endif
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
