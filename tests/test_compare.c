/* Unit tests of compare (src/triage/compare_runs.c): three runs written here, aligned by their
 * metadata (records in another order in one run, a call only one run has), each call's groups
 * and attribution (identical, perturbed past the gap, a tie flap, a wrong engine selection),
 * the summary's gaps, alignment by position without metadata, and the letters of a group. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "compare_runs.h"

#define ROWS 2
#define LENGTH 16
#define K 4

static char directory[256];

static int make_directory(void **state)
{
    (void)state;
    snprintf(directory, sizeof(directory), "%s/test_compare.XXXXXX",
             getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp");
    return mkdtemp(directory) ? 0 : -1;
}

static int remove_directory(void **state)
{
    (void)state;
    char path[512];
    static const char *const names[] = { "r0.bin", "r1.bin", "r2.bin", "p0.bin", "p1.bin" };
    for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++) {
        snprintf(path, sizeof(path), "%s/%s", directory, names[i]);
        unlink(path);
    }
    return rmdir(directory);
}

/* Appends one call: row b holds b * 100 + i + 1 (the top k are the last k), the engine the
 * exact top k; edit may change scores and engine first. */
enum edit { PLAIN, PAST_GAP, TIE, TIE_OTHER, WRONG };

static void append_call(const char *name, const char *metadata, enum edit edit)
{
    float scores[ROWS * LENGTH];
    int32_t lengths[ROWS], engine[ROWS * K];
    for (uint32_t b = 0; b < ROWS; b++) {
        lengths[b] = LENGTH;
        for (uint32_t i = 0; i < LENGTH; i++)
            scores[b * LENGTH + i] = (float)(b * 100 + i + 1);
        for (uint32_t j = 0; j < K; j++)
            engine[b * K + j] = (int32_t)(LENGTH - 1 - j);
    }
    if (edit == PAST_GAP) {
        scores[0] = 1000.0f;            /* row 0's smallest rises to the top */
        engine[K - 1] = 0;
    }
    if (edit == TIE || edit == TIE_OTHER) {
        scores[11] = scores[12];        /* row 0: 11 and 12 tie at the k-th */
        engine[K - 1] = edit == TIE ? 11 : 12;
    }
    if (edit == WRONG)
        engine[0] = 0;                  /* row 0 drops its top */
    struct capture_record record = {
        .rows = ROWS, .k = K, .row_stride = LENGTH, .scores = scores, .lengths = lengths,
        .engine_indices = engine, .metadata_json = (char *)metadata,
    };
    char path[512];
    struct audit_error err = { 0 };
    snprintf(path, sizeof(path), "%s/%s", directory, name);
    if (capture_append_record(path, &record, false, &err) != AUDIT_OK)
        fail_msg("%s", err.message);
}

static const struct compare_call *call_named(const struct compare_result *result,
                                             const char *label)
{
    for (size_t c = 0; c < result->call_count; c++)
        if (strcmp(result->calls[c].label, label) == 0)
            return &result->calls[c];
    fail_msg("no call %s", label);
    return NULL;
}

static void test_three_runs(void **state)
{
    (void)state;
    static const char *const steps[] = { "{\"layer\":0,\"step\":0}", "{\"layer\":0,\"step\":1}",
                                         "{\"layer\":0,\"step\":2}", "{\"layer\":0,\"step\":3}" };
    append_call("r0.bin", steps[0], PLAIN);
    append_call("r0.bin", steps[1], PLAIN);
    append_call("r0.bin", steps[2], TIE);
    append_call("r0.bin", steps[3], PLAIN);
    /* Run 1 in another order, with the first call perturbed past its gap. */
    append_call("r1.bin", steps[3], PLAIN);
    append_call("r1.bin", steps[2], TIE_OTHER);
    append_call("r1.bin", steps[1], PLAIN);
    append_call("r1.bin", steps[0], PAST_GAP);
    append_call("r2.bin", steps[0], PLAIN);
    append_call("r2.bin", steps[1], PLAIN);
    append_call("r2.bin", steps[2], TIE);
    append_call("r2.bin", steps[3], WRONG);
    append_call("r2.bin", "{\"layer\":1,\"step\":0}", PLAIN);
    char paths[3][512];
    const char *list[3];
    for (int r = 0; r < 3; r++) {
        snprintf(paths[r], sizeof(paths[r]), "%s/r%d.bin", directory, r);
        list[r] = paths[r];
    }
    struct compare_result result;
    struct audit_error err = { 0 };
    assert_int_equal(compare_runs(list, 3, NULL, &result, &err), AUDIT_OK);
    assert_true(result.by_call);
    assert_int_equal(result.call_count, 5);
    const struct compare_call *call = call_named(&result, "layer=0 step=0");
    assert_true(call->comparable);
    assert_int_equal(call->attribution, COMPARE_UPSTREAM);
    assert_int_equal(call->score_group[0], 0);
    assert_int_equal(call->score_group[1], 1);
    assert_int_equal(call->score_group[2], 0);
    assert_int_equal(call->rows_exceeding_gap, 1);
    assert_true(call->largest_abs_diff == 999.0);
    assert_true(call->boundary_gap_min == 1.0);
    call = call_named(&result, "layer=0 step=1");
    assert_int_equal(call->attribution, COMPARE_NONE);
    assert_int_equal(call->score_groups, 1);
    call = call_named(&result, "layer=0 step=2");
    assert_int_equal(call->attribution, COMPARE_TIE_FLAP);
    assert_true(call->same_scores_other_selection);
    assert_int_equal(call->engine_group[1], 1);
    assert_true(call->boundary_gap_min == 0.0);
    call = call_named(&result, "layer=0 step=3");
    assert_int_equal(call->attribution, COMPARE_ENGINE_WRONG);
    assert_int_equal(call->engine_wrong_runs, 1u << 2);
    call = call_named(&result, "layer=1 step=0");
    assert_false(call->comparable);
    assert_non_null(strstr(call->reason, "missing in run 0"));
    assert_int_equal(result.comparable, 4);
    assert_int_equal(result.scores_differ, 1);
    assert_int_equal(result.same_scores_other_selection, 2);
    assert_true(result.gap_min == 0.0);
    assert_true(result.gap_median == 1.0);
    char groups[4];
    compare_groups_text(call_named(&result, "layer=0 step=0")->score_group, 3, groups);
    assert_string_equal(groups, "aba");
    compare_result_release(&result);
}

static void test_by_position(void **state)
{
    (void)state;
    append_call("p0.bin", "{}", PLAIN);
    append_call("p1.bin", "{\"layer\":0}", PLAIN);
    char p0[512], p1[512];
    snprintf(p0, sizeof(p0), "%s/p0.bin", directory);
    snprintf(p1, sizeof(p1), "%s/p1.bin", directory);
    const char *list[2] = { p0, p1 };
    struct compare_result result;
    struct audit_error err = { 0 };
    assert_int_equal(compare_runs(list, 2, NULL, &result, &err), AUDIT_OK);
    assert_false(result.by_call);
    assert_non_null(strstr(result.alignment_reason, "p0.bin record 0 has none"));
    assert_string_equal(result.calls[0].label, "record 0");
    assert_int_equal(result.attribution[COMPARE_NONE], 1);
    compare_result_release(&result);
    assert_int_equal(compare_runs(list, 1, NULL, &result, &err), AUDIT_EUSAGE);
    compare_result_release(&result);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_three_runs),
        cmocka_unit_test(test_by_position),
    };
    return cmocka_run_group_tests(tests, make_directory, remove_directory);
}
