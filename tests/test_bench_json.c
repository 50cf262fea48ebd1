/* The bench document (src/replay/bench_json.c) from hand-made results, no GPU: the context
 * block with the measured device and the method, and one entry per result with the keys its
 * outcome has (a timed one its times, ratio to the floor and plan; an unsupported or failed one
 * its reason), in the order they came. With BENCH_JSON_DOCUMENT=PATH in the environment the
 * document is also written there: tests/cli/test_schemas.sh checks it against
 * docs/schemas/bench-3.schema.json where no GPU can write a real one. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "bench_json.h"
#include "json_util.h"

static const cJSON *child(const cJSON *object, const char *key)
{
    return cJSON_GetObjectItemCaseSensitive(object, key);
}

static void test_document(void **state)
{
    (void)state;
    struct bench_device device = { .copy_bandwidth = 4e12, .empty_kernel_us = 2.5 };
    snprintf(device.info.name, sizeof(device.info.name), "NVIDIA H200");
    device.info.cc_major = 9;
    device.info.sm_count = 132;
    device.info.cluster_fit[1] = 132;
    device.info.cluster_fit[2] = 66;
    device.info.driver_version = 13000;
    device.info.runtime_version = 13000;
    struct document_context context;
    document_context_fill(&context, "0.1.0 (gtest)", "dsatopk-audit bench");
    cJSON *document = bench_json_begin(&context, &device);
    assert_non_null(document);

    const struct topk_backend *sort = topk_backend_find("sort");
    const struct bench_shape shape = { .rows = 4, .length = 8192, .k = 512 };
    struct bench_result timed = {
        .backend = sort, .family = "relu", .shape = &shape, .hbm_floor_us = 2.0,
        .outcome = BENCH_TIMED, .reason = "one CTA",
        .timing = { .median_us = 5.0, .min_us = 4.0, .max_us = 9.0, .launches_per_replay = 20,
                    .replays = 100 },
        .input_copies = 64,
    };
    struct bench_result unsupported = timed;
    unsupported.outcome = BENCH_UNSUPPORTED;
    unsupported.reason = "k above 2048";
    struct bench_result failed = timed;
    failed.outcome = BENCH_FAILED;
    failed.reason = "cudaErrorIllegalAddress";
    assert_int_equal(bench_json_add_result(document, &timed), 0);
    assert_int_equal(bench_json_add_result(document, &unsupported), 0);
    assert_int_equal(bench_json_add_result(document, &failed), 0);

    assert_string_equal(cJSON_GetStringValue(child(document, "schema")), "dsatopk-audit/bench");
    assert_int_equal(cJSON_GetNumberValue(child(document, "schema_version")), 3);
    const cJSON *context_json = child(document, "context");
    assert_string_equal(context_json->child->string, "tool_version");
    assert_string_equal(cJSON_GetStringValue(child(context_json, "version_string")),
                        "0.1.0 (gtest)");
    const cJSON *device_json = child(context_json, "device");
    assert_string_equal(cJSON_GetStringValue(child(device_json, "name")), "NVIDIA H200");
    assert_true(cJSON_GetNumberValue(child(device_json, "empty_kernel_us")) == 2.5);
    /* The CUDA versions as the report writes them: text, then CUDA's number. */
    assert_string_equal(cJSON_GetStringValue(child(device_json, "driver_version")), "13.0");
    assert_int_equal(cJSON_GetNumberValue(child(device_json, "driver_version_number")), 13000);
    assert_int_equal(cJSON_GetArraySize(child(device_json, "clusters_at_once")), GPU_CLUSTER_MAX);
    assert_non_null(child(context_json, "method"));

    const cJSON *results = child(document, "results");
    assert_int_equal(cJSON_GetArraySize(results), 3);
    const cJSON *first = cJSON_GetArrayItem(results, 0);
    assert_string_equal(cJSON_GetStringValue(child(first, "status")), "ok");
    assert_string_equal(cJSON_GetStringValue(child(first, "plan")), "one CTA");
    assert_true(cJSON_GetNumberValue(child(first, "ratio_to_floor")) == 2.5);
    assert_int_equal(cJSON_GetNumberValue(child(first, "input_copies")), 64);
    const cJSON *second = cJSON_GetArrayItem(results, 1);
    assert_string_equal(cJSON_GetStringValue(child(second, "status")), "unsupported");
    assert_string_equal(cJSON_GetStringValue(child(second, "reason")), "k above 2048");
    assert_null(child(second, "median_us"));
    const cJSON *third = cJSON_GetArrayItem(results, 2);
    assert_string_equal(cJSON_GetStringValue(child(third, "status")), "error");
    assert_string_equal(cJSON_GetStringValue(child(third, "backend")), "sort");
    const char *keep = getenv("BENCH_JSON_DOCUMENT");
    if (keep) {
        struct audit_error err = { 0 };
        assert_int_equal(json_write_file(keep, document, &err), AUDIT_OK);
    }
    cJSON_Delete(document);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_document),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
