/* Unit tests of the audit engine (src/replay/audit.h) through its callbacks, on captures made
 * here. They hold with and without a GPU: the one backend audited (sort, gpu_to_gpu) passes
 * where it replays and is reported unavailable where there is no device. Checked: one
 * record_done per audited record with one table line per backend, the records and their global
 * numbers in the report, --shard and --records selection, a missing input and a --rows row a
 * record lacks reported as messages and input errors with their exit codes, a stop request
 * before the audit (exit 130, no report), and what the report's context says about the run
 * (devices_concurrent: null without --devices, false for a single entry). */
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "audit.h"
#include "capture.h"
#include "synth.h"
#include "worker.h"

#define MAX_SEEN 16

struct seen {
    size_t records_done;
    size_t lines[MAX_SEEN];      /* non-NULL table lines of each record_done */
    size_t errors, notices;
    char last_error[512];
    size_t cross_device;
};

static void on_message(void *user, enum audit_message_kind kind, const char *text)
{
    struct seen *seen = user;
    if (kind == AUDIT_MESSAGE_ERROR) {
        seen->errors++;
        snprintf(seen->last_error, sizeof(seen->last_error), "%s", text);
    } else {
        seen->notices++;
    }
}

static void on_record_done(void *user, size_t pass, const char *const *lines, size_t count)
{
    struct seen *seen = user;
    assert_int_equal(pass, 0);
    size_t present = 0;
    for (size_t i = 0; i < count; i++)
        present += lines[i] != NULL && strchr(lines[i], '\n') != NULL;
    if (seen->records_done < MAX_SEEN)
        seen->lines[seen->records_done] = present;
    seen->records_done++;
}

static void on_cross_device(void *user, const cJSON *block, bool device_available)
{
    struct seen *seen = user;
    (void)device_available;
    assert_non_null(cJSON_GetObjectItemCaseSensitive(block, "available"));
    seen->cross_device++;
}

struct fixture {
    char dir[64];
    char capture[96];
    char missing[96];
};

static int setup(void **state)
{
    struct fixture *fixture = calloc(1, sizeof(*fixture));
    struct audit_error err = { 0 };
    assert_non_null(fixture);
    snprintf(fixture->dir, sizeof(fixture->dir), "/tmp/test_audit.XXXXXX");
    assert_non_null(mkdtemp(fixture->dir));
    snprintf(fixture->capture, sizeof(fixture->capture), "%s/three.bin", fixture->dir);
    snprintf(fixture->missing, sizeof(fixture->missing), "%s/missing.bin", fixture->dir);
    for (uint64_t seed = 0; seed < 3; seed++) {
        struct synth_params params = { .family = "tie", .rows = 4, .length = 256, .k = 16,
                                       .tie_count = 8, .seed = seed };
        struct capture_record record = { 0 };
        assert_int_equal(synth_generate(&params, &record, &err), 0);
        assert_int_equal(capture_append_record(fixture->capture, &record, false, &err), 0);
        capture_record_free(&record);
    }
    *state = fixture;
    return 0;
}

static int teardown(void **state)
{
    struct fixture *fixture = *state;
    unlink(fixture->capture);
    rmdir(fixture->dir);
    free(fixture);
    return 0;
}

/* The options of a small audit of inputs on sort alone. */
static struct audit_options small_audit(const char *const *inputs, size_t count)
{
    static const struct topk_backend *backends[1];
    backends[0] = topk_backend_find("sort");
    assert_non_null(backends[0]);
    const struct audit_options options = {
        .inputs = inputs,
        .input_count = count,
        .backends = backends,
        .backend_count = 1,
        .reps = 2,
        .noise = NOISE_NONE,
        .gpu_prefilter = true,
        .timeout_ms = 120000,
        .version_string = "test",
        .command_line = "test_audit",
    };
    return options;
}

static struct audit_callbacks callbacks_for(struct seen *seen)
{
    const struct audit_callbacks callbacks = {
        .user = seen,
        .message = on_message,
        .record_done = on_record_done,
        .cross_device = on_cross_device,
    };
    return callbacks;
}

/* Runs the audit of options with the recording callbacks; returns audit_run's status. */
static int run_audit(const struct audit_options *options, struct seen *seen,
                     struct audit_result *result, struct audit_error *err)
{
    const struct audit_callbacks callbacks = callbacks_for(seen);
    memset(seen, 0, sizeof(*seen));
    return audit_run(options, &callbacks, result, err);
}

static const cJSON *child(const cJSON *object, const char *key)
{
    return cJSON_GetObjectItemCaseSensitive(object, key);
}

static void test_every_record(void **state)
{
    struct fixture *fixture = *state;
    const char *inputs[] = { fixture->capture };
    struct audit_options options = small_audit(inputs, 1);
    struct seen seen;
    struct audit_result result;
    struct audit_error err = { 0 };
    assert_int_equal(run_audit(&options, &seen, &result, &err), 0);
    assert_true(result.report_ready);
    assert_int_equal(result.exit_code, 0);
    assert_true(result.complete);
    assert_int_equal(seen.records_done, 3);
    for (size_t i = 0; i < 3; i++)
        assert_int_equal(seen.lines[i], 1);
    assert_int_equal(seen.errors, 0);
    assert_int_equal(seen.cross_device, 0);
    const cJSON *records = child(result.report.root, "records");
    assert_int_equal(cJSON_GetArraySize(records), 3);
    for (int i = 0; i < 3; i++) {
        const cJSON *record = cJSON_GetArrayItem(records, i);
        assert_int_equal(cJSON_GetNumberValue(child(record, "global_index")), i);
        assert_int_equal(cJSON_GetArraySize(child(record, "backends")), 1);
    }
    const cJSON *context = child(result.report.root, "context");
    assert_string_equal(cJSON_GetStringValue(child(context, "command_line")), "test_audit");
    assert_string_equal(cJSON_GetStringValue(child(context, "version_string")), "test");
    assert_true(cJSON_IsNull(child(context, "shard")));
    assert_true(cJSON_IsNull(child(context, "devices")));
    assert_true(cJSON_IsNull(child(context, "devices_concurrent")));
    assert_int_equal(cJSON_GetNumberValue(child(result.report.root, "exit_code")), 0);
    audit_result_release(&result);
}

static void test_shard_and_records(void **state)
{
    struct fixture *fixture = *state;
    const char *inputs[] = { fixture->capture };
    static const uint32_t records[] = { 0, 2 };
    struct audit_options options = small_audit(inputs, 1);
    options.records = records;
    options.record_count = 2;
    options.shard_index = 1;
    options.shard_count = 2;
    struct seen seen;
    struct audit_result result;
    struct audit_error err = { 0 };
    assert_int_equal(run_audit(&options, &seen, &result, &err), 0);
    /* Records 0 and 2 are selected (global numbers 0 and 1); shard 1/2 takes the second. */
    assert_int_equal(seen.records_done, 1);
    const cJSON *records_json = child(result.report.root, "records");
    assert_int_equal(cJSON_GetArraySize(records_json), 1);
    const cJSON *record = cJSON_GetArrayItem(records_json, 0);
    assert_int_equal(cJSON_GetNumberValue(child(record, "index")), 2);
    assert_int_equal(cJSON_GetNumberValue(child(record, "global_index")), 1);
    const cJSON *shard = child(child(result.report.root, "context"), "shard");
    assert_int_equal(cJSON_GetNumberValue(child(shard, "index")), 1);
    assert_int_equal(cJSON_GetNumberValue(child(shard, "count")), 2);
    audit_result_release(&result);
}

static void test_missing_input(void **state)
{
    struct fixture *fixture = *state;
    const char *inputs[] = { fixture->missing, fixture->capture };
    struct audit_options options = small_audit(inputs, 2);
    struct seen seen;
    struct audit_result result;
    struct audit_error err = { 0 };
    assert_int_equal(run_audit(&options, &seen, &result, &err), 0);
    assert_int_equal(result.exit_code, EXIT_BAD_INPUT);
    assert_int_equal(seen.errors, 1);
    assert_non_null(strstr(seen.last_error, "missing.bin"));
    /* The run goes on with the next input. */
    assert_int_equal(seen.records_done, 3);
    const cJSON *errors = child(result.report.root, "input_errors");
    assert_int_equal(cJSON_GetArraySize(errors), 1);
    assert_string_equal(cJSON_GetStringValue(child(cJSON_GetArrayItem(errors, 0), "kind")), "io");
    audit_result_release(&result);
}

static void test_row_outside_record(void **state)
{
    struct fixture *fixture = *state;
    const char *inputs[] = { fixture->capture };
    static const uint32_t rows[] = { 1, 9 };
    struct audit_options options = small_audit(inputs, 1);
    options.rows = rows;
    options.row_count = 2;
    struct seen seen;
    struct audit_result result;
    struct audit_error err = { 0 };
    assert_int_equal(run_audit(&options, &seen, &result, &err), 0);
    assert_int_equal(result.exit_code, EXIT_USAGE);
    assert_int_equal(seen.records_done, 0);
    assert_int_equal(seen.errors, 3);
    assert_non_null(strstr(seen.last_error, "--rows"));
    audit_result_release(&result);
}

static void test_devices_block(void **state)
{
    struct fixture *fixture = *state;
    const char *inputs[] = { fixture->capture };
    static const int devices[] = { 0 };
    struct audit_options options = small_audit(inputs, 1);
    options.devices = devices;
    options.device_count = 1;
    options.devices_text = "0";
    struct seen seen;
    struct audit_result result;
    struct audit_error err = { 0 };
    assert_int_equal(run_audit(&options, &seen, &result, &err), 0);
    assert_int_equal(seen.cross_device, 1);
    assert_non_null(child(result.report.root, "cross_device"));
    const cJSON *listed = child(child(result.report.root, "context"), "devices");
    assert_int_equal(cJSON_GetArraySize(listed), 1);
    /* One entry: nothing ran beside it. */
    assert_true(cJSON_IsFalse(child(child(result.report.root, "context"), "devices_concurrent")));
    audit_result_release(&result);
}

static void test_stopped_before_the_audit(void **state)
{
    struct fixture *fixture = *state;
    const char *inputs[] = { fixture->capture };
    struct audit_options options = small_audit(inputs, 1);
    struct seen seen;
    struct audit_result result;
    struct audit_error err = { 0 };
    worker_stop_request(SIGINT);
    int status = run_audit(&options, &seen, &result, &err);
    worker_stop_clear();
    assert_int_equal(status, AUDIT_EFAILED);
    assert_int_equal(result.exit_code, 128 + SIGINT);
    assert_false(result.report_ready);
    assert_non_null(strstr(err.message, "interrupted"));
    assert_int_equal(seen.records_done, 0);
    audit_result_release(&result);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_every_record),
        cmocka_unit_test(test_shard_and_records),
        cmocka_unit_test(test_missing_input),
        cmocka_unit_test(test_row_outside_record),
        cmocka_unit_test(test_devices_block),
        cmocka_unit_test(test_stopped_before_the_audit),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
