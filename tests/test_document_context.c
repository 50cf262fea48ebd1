/* The context block every document opens with (src/common/document_context.h): the six keys in
 * their order, the build's version and revision, the time as YYYY-MM-DDTHH:MM:SSZ within a second
 * or two of now, the host, and null for a string the caller does not have; a document opens with
 * schema, schema_version and that block; the CUDA versions are written as text and as CUDA's
 * number, both null when unknown. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include <cmocka.h>

#include "document_context.h"
#include "version.h"

static void test_keys_in_order(void **state)
{
    (void)state;
    static const char *const keys[] = { "tool_version", "git_revision", "version_string",
                                        "command_line", "utc_time", "host" };
    struct document_context context;
    document_context_fill(&context, "1.2.3 (gabc)", "dsatopk-audit census x.bin");
    cJSON *json = document_context_json(&context);
    assert_non_null(json);
    const cJSON *item = json->child;
    for (size_t i = 0; i < sizeof(keys) / sizeof(keys[0]); i++, item = item->next) {
        assert_non_null(item);
        assert_string_equal(item->string, keys[i]);
        assert_true(cJSON_IsString(item));
    }
    assert_null(item);
    assert_string_equal(cJSON_GetObjectItem(json, "tool_version")->valuestring, DSATOPK_VERSION);
    assert_string_equal(cJSON_GetObjectItem(json, "git_revision")->valuestring,
                        DSATOPK_GIT_REVISION);
    assert_string_equal(cJSON_GetObjectItem(json, "version_string")->valuestring, "1.2.3 (gabc)");
    assert_string_equal(cJSON_GetObjectItem(json, "command_line")->valuestring,
                        "dsatopk-audit census x.bin");
    assert_true(strlen(cJSON_GetObjectItem(json, "host")->valuestring) > 0);
    cJSON_Delete(json);
}

static void test_utc_time_is_now(void **state)
{
    (void)state;
    struct document_context context;
    struct tm parsed = { 0 };
    time_t before = time(NULL);
    document_context_fill(&context, NULL, NULL);
    time_t after = time(NULL);
    assert_int_equal(strlen(context.utc_time), 20);
    const char *end = strptime(context.utc_time, "%Y-%m-%dT%H:%M:%SZ", &parsed);
    assert_non_null(end);
    assert_int_equal(*end, '\0');
    time_t written = timegm(&parsed);
    assert_true(written >= before && written <= after);
}

static void test_missing_strings_are_null(void **state)
{
    (void)state;
    struct document_context context;
    document_context_fill(&context, NULL, NULL);
    cJSON *object = cJSON_CreateObject();
    cJSON_AddStringToObject(object, "schema", "x");
    assert_int_equal(document_context_add(object, &context), 0);
    /* Added after what the object held. */
    assert_string_equal(object->child->string, "schema");
    assert_true(cJSON_IsNull(cJSON_GetObjectItem(object, "version_string")));
    assert_true(cJSON_IsNull(cJSON_GetObjectItem(object, "command_line")));
    assert_true(cJSON_IsString(cJSON_GetObjectItem(object, "utc_time")));
    cJSON_Delete(object);
    assert_int_not_equal(document_context_add(NULL, &context), 0);
}

static void test_document_begin(void **state)
{
    (void)state;
    struct document_context context;
    cJSON *context_json = NULL;
    document_context_fill(&context, "v", "c");
    cJSON *document = document_begin("dsatopk-audit/test", 3, &context, &context_json);
    assert_non_null(document);
    assert_string_equal(document->child->string, "schema");
    assert_string_equal(document->child->valuestring, "dsatopk-audit/test");
    assert_string_equal(document->child->next->string, "schema_version");
    assert_int_equal(document->child->next->valueint, 3);
    assert_string_equal(document->child->next->next->string, "context");
    assert_ptr_equal(document->child->next->next, context_json);
    assert_string_equal(context_json->child->string, "tool_version");
    cJSON_Delete(document);
}

static void test_cuda_versions(void **state)
{
    (void)state;
    static const char *const keys[] = { "driver_version", "runtime_version",
                                        "driver_version_number", "runtime_version_number" };
    cJSON *object = cJSON_CreateObject();
    assert_int_equal(document_cuda_versions_add(object, 13000, 12080), 0);
    const cJSON *item = object->child;
    for (size_t i = 0; i < sizeof(keys) / sizeof(keys[0]); i++, item = item->next)
        assert_string_equal(item->string, keys[i]);
    assert_string_equal(cJSON_GetObjectItem(object, "driver_version")->valuestring, "13.0");
    assert_string_equal(cJSON_GetObjectItem(object, "runtime_version")->valuestring, "12.8");
    assert_int_equal(cJSON_GetObjectItem(object, "driver_version_number")->valueint, 13000);
    assert_int_equal(cJSON_GetObjectItem(object, "runtime_version_number")->valueint, 12080);
    cJSON_Delete(object);
    /* No driver: null, not "0.0" or 0. */
    object = cJSON_CreateObject();
    assert_int_equal(document_cuda_versions_add(object, 0, 13000), 0);
    assert_true(cJSON_IsNull(cJSON_GetObjectItem(object, "driver_version")));
    assert_true(cJSON_IsNull(cJSON_GetObjectItem(object, "driver_version_number")));
    assert_string_equal(cJSON_GetObjectItem(object, "runtime_version")->valuestring, "13.0");
    cJSON_Delete(object);
    assert_int_not_equal(document_cuda_versions_add(NULL, 1, 1), 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_cuda_versions),
        cmocka_unit_test(test_keys_in_order),
        cmocka_unit_test(test_utc_time_is_now),
        cmocka_unit_test(test_missing_strings_are_null),
        cmocka_unit_test(test_document_begin),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
