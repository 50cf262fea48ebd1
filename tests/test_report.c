/* Unit tests of the output tally (src/replay/output_tally.c), run's verdict from it
 * (src/report/backend_result.c) and the report writer (src/report/report.c) on hand-made outputs,
 * no GPU: output hashes against SHA-256 of bytes laid out by hand, distinct outputs and sets,
 * violation totals and per-rep maxima, flapping rows, the verdict cache (each distinct output
 * checked once; reps recognised from their row hashes give the same report as reps hashed in
 * full), the time breakdown's arithmetic, the verdict rule of each claimed level (a pass and a
 * fail for each), and the report JSON (schema fields present, no NaN or Infinity tokens). */
#include <ctype.h>
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>
#include <sodium.h>

#include "census.h"
#include "checks.h"
#include "hash.h"
#include "report.h"
#include "synth.h"

/* ---- fixtures ------------------------------------------------------------------------------- */

/* Backends with each claimed level; supports/launch are never called here. */
static const struct topk_backend gpu_to_gpu_backend = {
    .name = "test-exact", .level = TOPK_GPU_TO_GPU, .exact_set = true,
    .smallest_index_ties = true, .canonical_order = true,
};
static const struct topk_backend run_to_run_backend = {
    .name = "test-repeatable", .level = TOPK_RUN_TO_RUN, .exact_set = true,
    .smallest_index_ties = true, .index_ascending = true,
};
/* Named "radix" so that the staging model of the radix family (4096, drops) applies. */
static const struct topk_backend radix_like_backend = {
    .name = "radix", .level = TOPK_NOT_GUARANTEED,
};
static const struct topk_backend unnamed_not_guaranteed_backend = {
    .name = "test-loose", .level = TOPK_NOT_GUARANTEED,
};

/* 2 rows of 8 distinct scores, k = 3. Row 0 ranks 7 > 1 > 4 > ...; row 1 ranks 0 > 5 > 2. */
static const float fixture_scores[16] = {
    0.1f, 0.9f, 0.2f, 0.3f, 0.8f, 0.4f, 0.5f, 1.0f,
    2.0f, 0.1f, 1.5f, 0.2f, 0.3f, 1.8f, 0.4f, 0.5f,
};
static const int32_t fixture_reference[6] = { 7, 1, 4, 0, 5, 2 };

static void record_make(struct capture_record *record)
{
    memset(record, 0, sizeof(*record));
    record->rows = 2;
    record->k = 3;
    record->row_stride = 8;
    record->scores = malloc(sizeof(fixture_scores));
    record->lengths = malloc(2 * sizeof(int32_t));
    record->metadata_json = strdup("{\"engine\":\"test\",\"layer\":3}");
    assert_non_null(record->scores);
    assert_non_null(record->lengths);
    assert_non_null(record->metadata_json);
    memcpy(record->scores, fixture_scores, sizeof(fixture_scores));
    record->lengths[0] = record->lengths[1] = 8;
    record->index = 4;
    record->file_offset = 1234;
}

/* The fixture record and its contract checks at k = 3. */
static void checks_fixture(struct capture_record *record, struct check_context *checks)
{
    struct audit_error err = { 0 };
    record_make(record);
    assert_int_equal(checks_prepare(checks, record, 3, &err), AUDIT_OK);
}

static void record_release(struct capture_record *record)
{
    free(record->scores);
    free(record->lengths);
    free(record->metadata_json);
    memset(record, 0, sizeof(*record));
}

static struct output_tally *tally_new(uint32_t rows, uint32_t k, uint32_t reps,
                                      const int32_t *baseline)
{
    struct output_tally *tally = malloc(sizeof(*tally));
    struct audit_error err = { 0 };
    assert_non_null(tally);
    assert_int_equal(output_tally_init(tally, rows, k, reps, baseline, &err), AUDIT_OK);
    return tally;
}

static void tally_add(struct output_tally *tally, const int32_t *out, double time_us,
                      struct check_context *checks, const struct check_claims *claims,
                      const int32_t *reference)
{
    struct audit_error err = { 0 };
    int status = output_tally_add(tally, out, NULL, time_us, checks, claims, reference, &err);
    if (status != AUDIT_OK)
        fail_msg("output_tally_add: %s", err.message);
}

static bool verdict_mentions(const struct verdict_result *verdict, const char *text)
{
    for (unsigned i = 0; i < verdict->reason_count; i++)
        if (strstr(verdict->reasons[i], text))
            return true;
    return false;
}

/* ---- hashing -------------------------------------------------------------------------------- */

static void test_output_hash_is_sha256_of_little_endian_bytes(void **state)
{
    (void)state;
    const int32_t out[6] = { 5, 0, -1, 2, 258, 1 };
    /* The same output as little-endian bytes, written out by hand. */
    const unsigned char bytes[24] = {
        0x05, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0xff, 0xff, 0xff, 0xff,
        0x02, 0x00, 0x00, 0x00, 0x02, 0x01, 0x00, 0x00, 0x01, 0x00, 0x00, 0x00,
    };
    /* Each row sorted: {-1, 0, 5} and {1, 2, 258}. */
    const unsigned char set_bytes[24] = {
        0xff, 0xff, 0xff, 0xff, 0x00, 0x00, 0x00, 0x00, 0x05, 0x00, 0x00, 0x00,
        0x01, 0x00, 0x00, 0x00, 0x02, 0x00, 0x00, 0x00, 0x02, 0x01, 0x00, 0x00,
    };
    unsigned char expected[crypto_hash_sha256_BYTES], expected_set[crypto_hash_sha256_BYTES];
    crypto_hash_sha256(expected, bytes, sizeof(bytes));
    crypto_hash_sha256(expected_set, set_bytes, sizeof(set_bytes));

    struct output_tally *tally = tally_new(2, 3, 1, NULL);
    tally_add(tally, out, NAN, NULL, NULL, NULL);
    assert_memory_equal(tally->rep_hash[0], expected, HASH_BYTES);
    assert_memory_equal(tally->rep_set_hash[0], expected_set, HASH_BYTES);

    /* The JSON carries the same digest in lower-case hex. */
    char hex[2 * crypto_hash_sha256_BYTES + 1];
    sodium_bin2hex(hex, sizeof(hex), expected, sizeof(expected));
    struct capture_record record;
    record_make(&record);
    struct backend_result result;
    backend_result_init(&result, &unnamed_not_guaranteed_backend);
    result.eager = *tally;
    struct verdict_result verdict;
    report_verdict(&result, NULL, &verdict);
    struct record_result record_result = {
        .file = "hand.bin", .record = &record, .k = 3, .backends = &result, .backend_count = 1,
    };
    cJSON *json = report_record_json(&record_result, &verdict);
    assert_non_null(json);
    cJSON *backend = cJSON_GetArrayItem(cJSON_GetObjectItem(json, "backends"), 0);
    cJSON *first = cJSON_GetArrayItem(cJSON_GetObjectItem(backend, "output_sha256_per_rep"), 0);
    assert_non_null(first);
    assert_string_equal(first->valuestring, hex);
    cJSON_Delete(json);
    backend_result_release(&result); /* releases the tally's arrays */
    free(tally);
    record_release(&record);
}

/* ---- distinct outputs, flapping rows ---------------------------------------------------------- */

static void test_flapping_rows_on_hand_made_reps(void **state)
{
    (void)state;
    /* 3 rows, k = 4. Rep 0 is the baseline; rep 1 reorders row 1 (same set); rep 2 swaps one
     * index of row 2 for another; rep 3 repeats rep 1; rep 4 changes two indices and the order
     * of row 2. Row 0 never changes. */
    const int32_t rep0[12] = { 0, 1, 2, 3, 10, 11, 12, 13, 20, 21, 22, 23 };
    const int32_t rep1[12] = { 0, 1, 2, 3, 13, 12, 11, 10, 20, 21, 22, 23 };
    const int32_t rep2[12] = { 0, 1, 2, 3, 10, 11, 12, 13, 20, 21, 22, 29 };
    const int32_t rep4[12] = { 0, 1, 2, 3, 10, 11, 12, 13, 28, 20, 27, 21 };
    struct output_tally *tally = tally_new(3, 4, 5, NULL);
    tally_add(tally, rep0, 10.0, NULL, NULL, NULL);
    tally_add(tally, rep1, 30.0, NULL, NULL, NULL);
    tally_add(tally, rep2, 20.0, NULL, NULL, NULL);
    tally_add(tally, rep1, 40.0, NULL, NULL, NULL);
    tally_add(tally, rep4, 50.0, NULL, NULL, NULL);

    assert_int_equal(tally->reps, 5);
    assert_int_equal(tally->distinct_outputs, 4);
    assert_int_equal(tally->distinct_sets, 3); /* rep 1 has rep 0's sets */
    assert_int_equal(tally->rep_distinct[3], tally->rep_distinct[1]);
    assert_memory_equal(tally->rep_hash[3], tally->rep_hash[1], HASH_BYTES);
    assert_memory_equal(tally->rep_set_hash[1], tally->rep_set_hash[0], HASH_BYTES);
    /* Every rep's set hash is the one hash_index_sets gives its output, whether the tally took
     * it from the baseline (reps 1 and 3: the same sets) or hashed the sorted rows. */
    const int32_t *const reps[5] = { rep0, rep1, rep2, rep1, rep4 };
    for (int rep = 0; rep < 5; rep++) {
        uint8_t direct[HASH_BYTES];
        assert_int_equal(hash_index_sets(reps[rep], 3, 4, direct), 0);
        assert_memory_equal(tally->rep_set_hash[rep], direct, HASH_BYTES);
    }

    /* Row 0 never flaps. */
    assert_int_equal(tally->row_reps_differing[0], 0);
    /* Row 1: reps 1 and 3 differ in all 4 positions, never in its set. */
    assert_int_equal(tally->row_reps_differing[1], 2);
    assert_int_equal(tally->row_reps_set_differing[1], 0);
    assert_int_equal(tally->row_max_positions_differing[1], 4);
    assert_int_equal(tally->row_max_indices_differing[1], 0);
    /* Row 2: rep 2 (1 index, 1 position) and rep 4 (2 indices, 4 positions). */
    assert_int_equal(tally->row_reps_differing[2], 2);
    assert_int_equal(tally->row_reps_set_differing[2], 2);
    assert_int_equal(tally->row_max_indices_differing[2], 2);
    assert_int_equal(tally->row_max_positions_differing[2], 4);

    assert_int_equal(output_tally_flapping_rows(tally), 2);
    assert_int_equal(output_tally_set_flapping_rows(tally), 1);
    const uint32_t expected_rows_differing[5] = { 0, 1, 1, 1, 1 };
    for (int rep = 0; rep < 5; rep++)
        assert_int_equal(tally->rep_rows_differing[rep], expected_rows_differing[rep]);

    double median, min, max;
    assert_true(output_tally_times(tally, &median, &min, &max));
    assert_true(median == 30.0 && min == 10.0 && max == 50.0);
    output_tally_release(tally);
    free(tally);
}

static void test_external_baseline_counts_graph_mismatch(void **state)
{
    (void)state;
    const int32_t eager[6] = { 7, 1, 4, 0, 5, 2 };
    const int32_t graph_same[6] = { 7, 1, 4, 0, 5, 2 };
    const int32_t graph_other[6] = { 1, 7, 4, 0, 2, 5 };
    struct output_tally *tally = tally_new(2, 3, 3, eager);
    tally_add(tally, graph_same, NAN, NULL, NULL, NULL);
    tally_add(tally, graph_other, NAN, NULL, NULL, NULL);
    tally_add(tally, graph_other, NAN, NULL, NULL, NULL);
    const struct violation_tally *mismatch = &tally->violations[VIOLATION_GRAPH_MISMATCH];
    assert_int_equal(mismatch->total_rows, 4);
    assert_int_equal(mismatch->max_rows_per_rep, 2);
    assert_int_equal(tally->distinct_outputs, 2);
    assert_int_equal(tally->distinct_sets, 1);
    double median, min, max;
    assert_false(output_tally_times(tally, &median, &min, &max)); /* nothing timed */
    output_tally_release(tally);
    free(tally);
}

static void test_violations_checked_once_per_distinct_output(void **state)
{
    (void)state;
    struct capture_record record;
    struct check_context checks;
    checks_fixture(&record, &checks);
    assert_memory_equal(checks.reference, fixture_reference, sizeof(fixture_reference));
    const struct check_claims claims = { 0 };
    /* Row 1 repeats index 0: a duplicate (and a wrong set: 0.3 never makes the top 3). */
    const int32_t duplicate[6] = { 7, 1, 4, 0, 0, 5 };
    /* Row 0 selects 6 (0.5) instead of 4 (0.8): a wrong set only. */
    const int32_t wrong[6] = { 7, 1, 6, 0, 5, 2 };

    struct output_tally *tally = tally_new(2, 3, 6, NULL);
    tally_add(tally, fixture_reference, NAN, &checks, &claims, checks.reference);
    tally_add(tally, duplicate, NAN, &checks, &claims, checks.reference);
    tally_add(tally, duplicate, NAN, &checks, &claims, checks.reference);
    tally_add(tally, wrong, NAN, &checks, &claims, checks.reference);
    tally_add(tally, fixture_reference, NAN, &checks, &claims, checks.reference);
    tally_add(tally, wrong, NAN, &checks, &claims, checks.reference);

    assert_int_equal(tally->distinct_count, 3);
    assert_int_equal(tally->equals_reference_reps, 2);
    assert_int_equal(tally->violations[CHECK_DUPLICATE].total_rows, 2);
    assert_int_equal(tally->violations[CHECK_DUPLICATE].max_rows_per_rep, 1);
    assert_int_equal(tally->violations[CHECK_WRONG_SET].total_rows, 4);
    assert_int_equal(tally->violations[CHECK_WRONG_SET].max_rows_per_rep, 1);
    assert_int_equal(tally->violations[CHECK_OUT_OF_RANGE].total_rows, 0);
    /* Row flags: the union over reps. */
    assert_true(tally->row_flags[0] & (1u << CHECK_WRONG_SET));
    assert_false(tally->row_flags[0] & (1u << CHECK_DUPLICATE));
    assert_true(tally->row_flags[1] & (1u << CHECK_DUPLICATE));
    output_tally_release(tally);
    free(tally);
    checks_release(&checks);
    record_release(&record);
}

/* ---- the verdict cache and the GPU pre-filter ------------------------------------------------ */

/* The outputs of a flapping backend: the reference, a duplicate, a wrong set, in a mixed order. */
static const int32_t duplicate_output[6] = { 7, 1, 4, 0, 0, 5 };
static const int32_t wrong_output[6] = { 7, 1, 6, 0, 5, 2 };
static const int32_t *const flapping_sequence[] = {
    fixture_reference, duplicate_output, duplicate_output, wrong_output,
    fixture_reference, wrong_output,     fixture_reference,
};
#define FLAPPING_REPS (sizeof(flapping_sequence) / sizeof(flapping_sequence[0]))

/* Feeds the sequence to result's eager tally as `run` does: with prefilter, each rep's row hashes
 * first and the full output only when they are new; without, every output in full. */
static void feed_flapping_sequence(struct backend_result *result, struct check_context *checks,
                                   const struct check_claims *claims, bool prefilter)
{
    struct audit_error err = { 0 };
    backend_result_init(result, &radix_like_backend);
    result->gpu_prefilter = prefilter;
    assert_int_equal(output_tally_init(&result->eager, 2, 3, FLAPPING_REPS, NULL, &err), AUDIT_OK);
    for (size_t rep = 0; rep < FLAPPING_REPS; rep++) {
        const double time_us = 10.0 + (double)rep;
        uint64_t row_hashes[2];
        hash_output_rows64(flapping_sequence[rep], NULL, 2, 3, row_hashes);
        if (prefilter && output_tally_add_if_known(&result->eager, row_hashes, time_us))
            continue;
        result->outputs_copied++;
        assert_int_equal(output_tally_add_hashed(&result->eager, flapping_sequence[rep], NULL,
                                                 prefilter ? row_hashes : NULL, time_us, checks,
                                                 claims, checks->reference, &err),
                         AUDIT_OK);
    }
}

/* The entry without what the pre-filter is allowed to change (times and the host work). */
static cJSON *entry_without_timing(const struct backend_result *result,
                                   const struct record_result *record)
{
    struct verdict_result verdict;
    report_verdict(result, record->census_rows, &verdict);
    cJSON *entry = report_backend_json(record, result, &verdict);
    assert_non_null(entry);
    assert_non_null(cJSON_GetObjectItem(entry, "time_breakdown_ms"));
    assert_non_null(cJSON_GetObjectItem(entry, "host_work"));
    cJSON_DeleteItemFromObject(entry, "time_breakdown_ms");
    cJSON_DeleteItemFromObject(entry, "host_work");
    return entry;
}

static void test_prefilter_report_equals_full_hashing(void **state)
{
    (void)state;
    struct capture_record record;
    struct check_context checks;
    checks_fixture(&record, &checks);
    const struct check_claims claims = { 0 };
    struct backend_result full, filtered;
    feed_flapping_sequence(&full, &checks, &claims, false);
    feed_flapping_sequence(&filtered, &checks, &claims, true);

    /* Full path: every rep SHA-256'd, each of the 3 distinct outputs checked once. */
    assert_int_equal(full.eager.reps, FLAPPING_REPS);
    assert_int_equal(full.eager.outputs_hashed, FLAPPING_REPS);
    assert_int_equal(full.eager.outputs_checked, 3);
    assert_int_equal(full.eager.gpu_hash_matches, 0);
    /* Pre-filter: only the 3 new outputs are copied, hashed and checked; 4 reps matched. */
    assert_int_equal(filtered.eager.reps, FLAPPING_REPS);
    assert_int_equal(filtered.eager.outputs_hashed, 3);
    assert_int_equal(filtered.eager.outputs_checked, 3);
    assert_int_equal(filtered.eager.gpu_hash_matches, FLAPPING_REPS - 3);
    assert_int_equal(filtered.outputs_copied, 3);

    /* The report is the same, times and host work aside: hashes per rep, distinct counts,
     * violations, flapping rows, equals_reference_reps, kernel times, verdict. */
    struct record_result record_result = { .file = "a.bin", .record = &record, .k = 3 };
    cJSON *full_entry = entry_without_timing(&full, &record_result);
    cJSON *filtered_entry = entry_without_timing(&filtered, &record_result);
    if (!cJSON_Compare(full_entry, filtered_entry, true)) {
        char *a = cJSON_Print(full_entry), *b = cJSON_Print(filtered_entry);
        fail_msg("the entries differ:\n%s\n%s", a, b);
    }
    assert_int_equal(cJSON_GetObjectItem(filtered_entry, "distinct_outputs")->valueint, 3);
    assert_int_equal(cJSON_GetArraySize(cJSON_GetObjectItem(filtered_entry,
                                                            "output_sha256_per_rep")),
                     FLAPPING_REPS);
    uint8_t digest[HASH_BYTES];
    char hex[HASH_HEX_BYTES];
    hash_indices(duplicate_output, 6, digest);
    hash_to_hex(digest, hex);
    /* Rep 2 was never copied back: its SHA-256 is the one of rep 1's identical output. */
    assert_string_equal(cJSON_GetArrayItem(cJSON_GetObjectItem(filtered_entry,
                                                               "output_sha256_per_rep"), 2)
                            ->valuestring,
                        hex);

    struct verdict_result verdict;
    report_verdict(&filtered, NULL, &verdict);
    cJSON *entry = report_backend_json(&record_result, &filtered, &verdict);
    const cJSON *work = cJSON_GetObjectItem(entry, "host_work");
    assert_true(cJSON_IsTrue(cJSON_GetObjectItem(work, "gpu_prefilter")));
    assert_int_equal(cJSON_GetObjectItem(work, "reps_matched_on_gpu")->valueint, 4);
    assert_int_equal(cJSON_GetObjectItem(work, "outputs_copied")->valueint, 3);
    assert_int_equal(cJSON_GetObjectItem(work, "outputs_hashed")->valueint, 3);
    assert_int_equal(cJSON_GetObjectItem(work, "outputs_checked")->valueint, 3);
    cJSON_Delete(entry);

    cJSON_Delete(full_entry);
    cJSON_Delete(filtered_entry);
    backend_result_release(&full);
    backend_result_release(&filtered);
    checks_release(&checks);
    record_release(&record);
}

static void test_prefilter_unknown_row_hashes_change_nothing(void **state)
{
    (void)state;
    struct audit_error err = { 0 };
    uint64_t row_hashes[2];
    hash_output_rows64(fixture_reference, NULL, 2, 3, row_hashes);
    struct output_tally *tally = tally_new(2, 3, 2, NULL);
    /* Nothing known yet. */
    assert_false(output_tally_add_if_known(tally, row_hashes, 1.0));
    assert_false(output_tally_add_if_known(tally, NULL, 1.0));
    assert_int_equal(tally->reps, 0);
    /* An output added without row hashes is not recognised from them later. */
    tally_add(tally, fixture_reference, 1.0, NULL, NULL, fixture_reference);
    assert_false(output_tally_add_if_known(tally, row_hashes, 1.0));
    assert_int_equal(tally->reps, 1);
    output_tally_release(tally);
    free(tally);

    tally = tally_new(2, 3, 2, NULL);
    assert_int_equal(output_tally_add_hashed(tally, fixture_reference, NULL, row_hashes, 1.0, NULL,
                                             NULL, fixture_reference, &err),
                     AUDIT_OK);
    /* One row's hash differs: not that output. */
    uint64_t other[2] = { row_hashes[0], row_hashes[1] ^ 1u };
    assert_false(output_tally_add_if_known(tally, other, 2.0));
    assert_int_equal(tally->reps, 1);
    assert_true(output_tally_add_if_known(tally, row_hashes, 3.0));
    assert_int_equal(tally->reps, 2);
    assert_int_equal(tally->equals_reference_reps, 2);
    assert_memory_equal(tally->rep_hash[1], tally->rep_hash[0], HASH_BYTES);
    assert_true(tally->rep_time_us[1] == 3.0);
    /* Full: refused, so the caller's full add reports the error as before. */
    assert_false(output_tally_add_if_known(tally, row_hashes, 4.0));
    assert_int_equal(tally->reps, 2);
    assert_int_equal(tally->gpu_hash_matches, 1);
    output_tally_release(tally);
    free(tally);
}

/* ---- the host work of a new output on several threads --------------------------------------- */

#define THREADED_REPS 12u
#define THREADED_GRAPH_REPS 3u

/* The reps of a flapping backend on a paged record (so raw outputs are hashed and checked too):
 * rep r's rows are the reference's, those with (row + r) % 3 != 0 in an order drawn from
 * (r, row) and the others in the first rep's order (rows equal to the baseline); reps 5 and 9
 * repeat reps 2 and 3; in reps 4 and 7 every fourth row selects one index twice. */
static void make_threaded_outputs(const struct check_context *checks, int32_t *outs,
                                  int32_t *raws)
{
    const uint32_t rows = checks->rows, k = checks->k;
    const size_t count = (size_t)rows * k;
    for (uint32_t rep = 0; rep < THREADED_REPS; rep++) {
        int32_t *out = outs + rep * count, *raw = raws + rep * count;
        if (rep == 5 || rep == 9) {
            memcpy(out, outs + (rep == 5 ? 2 : 3) * count, count * sizeof(int32_t));
            memcpy(raw, raws + (rep == 5 ? 2 : 3) * count, count * sizeof(int32_t));
            continue;
        }
        memcpy(out, checks->reference, count * sizeof(int32_t));
        memcpy(raw, checks->reference_raw, count * sizeof(int32_t));
        for (uint32_t b = 0; b < rows; b++) {
            int32_t *out_row = out + (size_t)b * k, *raw_row = raw + (size_t)b * k;
            struct synth_rng rng;
            synth_rng_seed(&rng, rep == 0 || (b + rep) % 3 == 0 ? b : ((uint64_t)rep << 32) | b);
            for (uint32_t i = k; i > 1; i--) {
                uint32_t j = (uint32_t)(synth_rng_next(&rng) % i);
                int32_t swap = out_row[i - 1];
                out_row[i - 1] = out_row[j];
                out_row[j] = swap;
                swap = raw_row[i - 1];
                raw_row[i - 1] = raw_row[j];
                raw_row[j] = swap;
            }
            if ((rep == 4 || rep == 7) && b % 4 == 1) {
                out_row[k - 1] = out_row[0];
                raw_row[k - 1] = raw_row[0];
            }
        }
    }
}

/* The entry of a backend fed those reps (with or without the GPU pre-filter; the last
 * THREADED_GRAPH_REPS also as graph replays against the first) with DSATOPK_HOST_THREADS set to
 * threads, without its times; adds the tally's per-row arrays to *rows_digest. */
static cJSON *threaded_entry(const char *threads, bool prefilter, struct check_context *checks,
                             const struct record_result *record, const int32_t *outs,
                             const int32_t *raws, uint8_t rows_digest[HASH_BYTES])
{
    const uint32_t rows = checks->rows, k = checks->k;
    const size_t count = (size_t)rows * k;
    const struct check_claims claims = { 0 };
    struct audit_error err = { 0 };
    struct backend_result result;
    uint64_t row_hashes[64];
    assert_true(rows <= 64);
    assert_int_equal(setenv("DSATOPK_HOST_THREADS", threads, 1), 0);
    backend_result_init(&result, &radix_like_backend);
    result.gpu_prefilter = prefilter;
    result.graph_requested = result.graph_ran = true;
    assert_int_equal(output_tally_init(&result.eager, rows, k, THREADED_REPS, NULL, &err),
                     AUDIT_OK);
    assert_int_equal(output_tally_init(&result.graph, rows, k, THREADED_GRAPH_REPS, outs, &err),
                     AUDIT_OK);
    const double started_ms = report_monotonic_ms();
    for (uint32_t rep = 0; rep < THREADED_REPS + THREADED_GRAPH_REPS; rep++) {
        const bool graph = rep >= THREADED_REPS;
        struct output_tally *tally = graph ? &result.graph : &result.eager;
        const uint32_t source = graph ? THREADED_REPS - THREADED_GRAPH_REPS + rep - THREADED_REPS
                                      : rep;
        const int32_t *out = outs + source * count, *raw = raws + source * count;
        hash_output_rows64(out, raw, rows, k, row_hashes);
        if (prefilter && output_tally_add_if_known(tally, row_hashes, 1.0 + rep))
            continue;
        if (output_tally_add_hashed(tally, out, raw, prefilter ? row_hashes : NULL, 1.0 + rep,
                                    checks, &claims, checks->reference, &err) != AUDIT_OK)
            fail_msg("threads %s: %s", threads, err.message);
    }
    /* Parts of the wall time, even when threads overlapped them. */
    const double wall_ms = report_monotonic_ms() - started_ms;
    assert_true(result.eager.hash_ms + result.eager.check_ms + result.graph.hash_ms +
                    result.graph.check_ms <= wall_ms);
    assert_int_equal(unsetenv("DSATOPK_HOST_THREADS"), 0);

    crypto_hash_sha256_state digest;
    crypto_hash_sha256_init(&digest);
    const struct output_tally *tallies[2] = { &result.eager, &result.graph };
    for (int t = 0; t < 2; t++) {
        const size_t row_bytes = rows * sizeof(uint32_t);
        crypto_hash_sha256_update(&digest, (const void *)tallies[t]->row_flags, row_bytes);
        crypto_hash_sha256_update(&digest, (const void *)tallies[t]->row_reps_differing,
                                  row_bytes);
        crypto_hash_sha256_update(&digest, (const void *)tallies[t]->row_max_indices_differing,
                                  row_bytes);
        crypto_hash_sha256_update(&digest, (const void *)tallies[t]->rep_rows_differing,
                                  tallies[t]->reps * sizeof(uint32_t));
    }
    crypto_hash_sha256_final(&digest, rows_digest);
    cJSON *entry = entry_without_timing(&result, record);
    backend_result_release(&result);
    return entry;
}

static void test_threads_change_nothing_but_times(void **state)
{
    (void)state;
    struct audit_error err = { 0 };
    struct capture_record record = { 0 };
    struct check_context checks;
    const struct synth_params params = {
        .family = "paged", .rows = 24, .length = 4096, .k = 256, .seed = 5, .page_size = 64,
    };
    assert_int_equal(synth_generate(&params, &record, &err), AUDIT_OK);
    assert_int_equal(checks_prepare(&checks, &record, 0, &err), AUDIT_OK);
    assert_non_null(checks.reference_raw);
    const size_t count = (size_t)checks.rows * checks.k;
    int32_t *outs = malloc(THREADED_REPS * count * sizeof(int32_t));
    int32_t *raws = malloc(THREADED_REPS * count * sizeof(int32_t));
    assert_non_null(outs);
    assert_non_null(raws);
    make_threaded_outputs(&checks, outs, raws);
    struct record_result record_result = { .file = "paged.bin", .record = &record,
                                           .k = checks.k };

    for (int prefilter = 0; prefilter < 2; prefilter++) {
        uint8_t sequential_rows[HASH_BYTES], rows_digest[HASH_BYTES];
        cJSON *sequential = threaded_entry("1", prefilter, &checks, &record_result, outs, raws,
                                           sequential_rows);
        /* Something to compare: several outputs, duplicates, flapping rows, graph mismatches. */
        assert_int_equal(cJSON_GetObjectItem(sequential, "distinct_outputs")->valueint, 10);
        const cJSON *duplicates = cJSON_GetObjectItem(
            cJSON_GetObjectItem(cJSON_GetObjectItem(sequential, "violations"), "duplicate"),
            "total_rows");
        assert_true(duplicates->valueint > 0);
        assert_true(cJSON_GetObjectItem(sequential, "flapping_rows_total")->valueint > 0);
        /* 2 and 64 threads for 24 rows (chunks of one row), 3 for uneven chunks. */
        static const char *const settings[] = { "2", "3", "64" };
        for (size_t i = 0; i < sizeof(settings) / sizeof(settings[0]); i++) {
            cJSON *threaded = threaded_entry(settings[i], prefilter, &checks, &record_result,
                                             outs, raws, rows_digest);
            if (!cJSON_Compare(sequential, threaded, true)) {
                char *a = cJSON_Print(sequential), *b = cJSON_Print(threaded);
                fail_msg("%s threads changed the entry:\n%s\n%s", settings[i], a, b);
            }
            assert_memory_equal(rows_digest, sequential_rows, HASH_BYTES);
            cJSON_Delete(threaded);
        }
        cJSON_Delete(sequential);
    }

    /* A check that fails on every thread fails the add once, and the output is not kept as the
     * baseline (a paged record's output needs its raw indices). */
    assert_int_equal(setenv("DSATOPK_HOST_THREADS", "3", 1), 0);
    struct output_tally *tally = tally_new(checks.rows, checks.k, 1, NULL);
    assert_int_equal(output_tally_add(tally, outs, NULL, 1.0, &checks, NULL, checks.reference,
                                      &err),
                     AUDIT_EUSAGE);
    assert_non_null(strstr(err.message, "raw"));
    assert_null(tally->baseline);
    assert_int_equal(tally->distinct_count, 0);
    assert_int_equal(unsetenv("DSATOPK_HOST_THREADS"), 0);
    output_tally_release(tally);
    free(tally);
    free(outs);
    free(raws);
    checks_release(&checks);
    capture_record_free(&record);
}

/* ---- the time breakdown --------------------------------------------------------------------- */

static void test_time_breakdown_arithmetic(void **state)
{
    (void)state;
    struct time_breakdown time = {
        .total_ms = 100.0, .device_open_ms = 20.0, .setup_ms = 5.0, .kernel_ms = 30.0,
        .launch_overhead_ms = 1.5, .noise_wait_ms = 25.0, .row_hash_ms = 0.25, .copy_ms = 2.0,
        .hash_ms = 3.0, .check_ms = 4.0, .dump_ms = 0.0, .batch_invariance_ms = 8.0,
    };
    assert_true(fabs(time_breakdown_other_ms(&time) - 1.25) < 1e-9);
    /* Parts that exceed the total (rounding, the kernel's event clock) leave 0, never less. */
    struct time_breakdown over = time;
    over.kernel_ms = 90.0;
    assert_true(time_breakdown_other_ms(&over) == 0.0);

    /* JSON: every part in milliseconds, other_ms and total_ms, to the microsecond; the parts
     * and other_ms add up to total_ms. */
    time.copy_ms = 2.0004;
    cJSON *json = time_breakdown_json(&time);
    assert_non_null(json);
    static const char *const keys[] = {
        "device_open_ms", "setup_ms", "kernel_ms", "launch_overhead_ms", "noise_wait_ms",
        "row_hash_ms", "copy_ms", "hash_ms", "check_ms", "dump_ms", "batch_invariance_ms",
        "other_ms", "total_ms",
    };
    double sum = 0;
    for (size_t i = 0; i < sizeof(keys) / sizeof(keys[0]); i++) {
        cJSON *value = cJSON_GetObjectItem(json, keys[i]);
        assert_true(cJSON_IsNumber(value));
        if (strcmp(keys[i], "total_ms") != 0)
            sum += value->valuedouble;
    }
    assert_int_equal(cJSON_GetArraySize(json), sizeof(keys) / sizeof(keys[0]));
    assert_true(cJSON_GetObjectItem(json, "copy_ms")->valuedouble == 2.0);
    assert_true(fabs(sum - cJSON_GetObjectItem(json, "total_ms")->valuedouble) < 0.002);

    /* Read back: the same parts (within the rounding). */
    struct time_breakdown back;
    time_breakdown_from_json(json, &back);
    assert_true(back.total_ms == 100.0 && back.kernel_ms == 30.0 && back.row_hash_ms == 0.25);
    assert_true(fabs(time_breakdown_other_ms(&back) - 1.25) < 0.002);
    cJSON_Delete(json);
    /* A missing or odd object reads as zeros. */
    json = cJSON_Parse("{\"total_ms\": \"slow\", \"kernel_ms\": 2}");
    time_breakdown_from_json(json, &back);
    assert_true(back.total_ms == 0.0 && back.kernel_ms == 2.0 && back.copy_ms == 0.0);
    cJSON_Delete(json);
    time_breakdown_from_json(NULL, &back);
    assert_true(back.kernel_ms == 0.0);

    /* Sums, and the tallies' hash and check times folded into a result's breakdown. */
    struct time_breakdown sum_time = { 0 };
    time_breakdown_add(&sum_time, &time);
    time_breakdown_add(&sum_time, &time);
    assert_true(sum_time.total_ms == 200.0 && sum_time.batch_invariance_ms == 16.0);
    struct backend_result result;
    backend_result_init(&result, &gpu_to_gpu_backend);
    result.time = time;
    result.eager.hash_ms = 0.5;
    result.eager.check_ms = 0.25;
    result.graph.hash_ms = 0.125;
    struct time_breakdown folded;
    backend_result_time_breakdown(&result, &folded);
    assert_true(folded.hash_ms == 3.625 && folded.check_ms == 4.25);
    assert_true(folded.kernel_ms == 30.0 && folded.total_ms == 100.0);
    backend_result_release(&result);

    /* The table's line names each part that took time, with its share. */
    char *line = NULL;
    size_t line_bytes = 0;
    FILE *out = open_memstream(&line, &line_bytes);
    assert_non_null(out);
    report_time_line(out, "radix", &time);
    fclose(out);
    assert_non_null(strstr(line, "# time radix: 100.0 ms = "));
    assert_non_null(strstr(line, "kernel 30.0 (30.0%)"));
    assert_non_null(strstr(line, "noise wait 25.0 (25.0%)"));
    assert_null(strstr(line, "dump")); /* 0: not listed */
    assert_non_null(strstr(line, "other "));
    free(line);

    /* The summary: one line for all backends, then one per backend name that took time. */
    struct run_report report;
    memset(&report, 0, sizeof(report));
    const struct time_breakdown nothing = { 0 };
    report_count_time(&report, "radix", &time);
    report_count_time(&report, "sort", &time);
    report_count_time(&report, "radix", &time);
    report_count_time(&report, "filtered", &nothing);
    assert_int_equal(report.time_backend_count, 3);
    assert_true(report.time_total.total_ms == 300.0);
    assert_true(report.time_by_backend[0].time.kernel_ms == 60.0);
    line = NULL;
    out = open_memstream(&line, &line_bytes);
    assert_non_null(out);
    report_table_summary(out, &report, NULL);
    fclose(out);
    assert_non_null(strstr(line, "\n# time all backends: 300.0 ms = "));
    assert_non_null(strstr(line, "\n# time radix: 200.0 ms = "));
    assert_non_null(strstr(line, "\n# time sort: 100.0 ms = "));
    assert_null(strstr(line, "# time filtered"));
    free(line);
}

/* The hash and check times a tally measures are non-negative and only grow with real work. */
static void test_tally_times_its_host_work(void **state)
{
    (void)state;
    struct capture_record record;
    struct check_context checks;
    checks_fixture(&record, &checks);
    struct output_tally *tally = tally_new(2, 3, 3, NULL);
    assert_true(tally->hash_ms == 0.0 && tally->check_ms == 0.0);
    tally_add(tally, fixture_reference, 1.0, &checks, NULL, checks.reference);
    tally_add(tally, fixture_reference, 1.0, &checks, NULL, checks.reference);
    assert_true(tally->hash_ms >= 0.0 && tally->check_ms >= 0.0);
    assert_int_equal(tally->outputs_hashed, 2);
    assert_int_equal(tally->outputs_checked, 1);
    output_tally_release(tally);
    free(tally);
    checks_release(&checks);
    record_release(&record);
}

/* ---- verdicts ------------------------------------------------------------------------------- */

/* A result whose eager tally saw `reps` reps of the reference (status ok). */
static void result_with_reference_reps(struct backend_result *result,
                                       const struct topk_backend *backend, uint32_t reps)
{
    struct audit_error err = { 0 };
    backend_result_init(result, backend);
    assert_int_equal(output_tally_init(&result->eager, 2, 3, reps + 4, NULL, &err), AUDIT_OK);
    for (uint32_t rep = 0; rep < reps; rep++)
        tally_add(&result->eager, fixture_reference, 5.0, NULL, NULL, fixture_reference);
}

static void test_verdict_gpu_to_gpu(void **state)
{
    (void)state;
    struct backend_result result;
    struct verdict_result verdict;
    result_with_reference_reps(&result, &gpu_to_gpu_backend, 3);
    report_verdict(&result, NULL, &verdict);
    assert_int_equal(verdict.verdict, VERDICT_PASS);
    assert_int_equal(verdict.reason_count, 0);

    /* Same set, another order: valid for most contracts, not for gpu_to_gpu. */
    const int32_t reordered[6] = { 1, 7, 4, 0, 5, 2 };
    tally_add(&result.eager, reordered, 5.0, NULL, NULL, fixture_reference);
    report_verdict(&result, NULL, &verdict);
    assert_int_equal(verdict.verdict, VERDICT_FAIL);
    assert_true(verdict_mentions(&verdict, "differs from the CPU reference in 1 of 4"));
    assert_true(verdict_mentions(&verdict, "2 distinct outputs"));
    backend_result_release(&result);

    /* A batch-dependent row fails gpu_to_gpu. */
    result_with_reference_reps(&result, &gpu_to_gpu_backend, 2);
    result.batch_requested = true;
    result.batch.ran = true;
    result.batch.dependent_count = 1;
    report_verdict(&result, NULL, &verdict);
    assert_int_equal(verdict.verdict, VERDICT_FAIL);
    assert_true(verdict_mentions(&verdict, "batch invariance"));
    result.batch.dependent_count = 0;
    backend_result_release(&result);
}

static void test_verdict_run_to_run(void **state)
{
    (void)state;
    struct audit_error err = { 0 };
    struct backend_result result;
    struct verdict_result verdict;
    /* Index-ascending rows: not the reference bytes, but one distinct output. */
    const int32_t ascending[6] = { 1, 4, 7, 0, 2, 5 };
    backend_result_init(&result, &run_to_run_backend);
    assert_int_equal(output_tally_init(&result.eager, 2, 3, 4, NULL, &err), AUDIT_OK);
    for (int rep = 0; rep < 3; rep++)
        tally_add(&result.eager, ascending, 5.0, NULL, NULL, fixture_reference);
    report_verdict(&result, NULL, &verdict);
    assert_int_equal(verdict.verdict, VERDICT_PASS);

    /* Graph replays that differ from the eager output fail run_to_run. */
    result.graph_requested = result.graph_ran = true;
    assert_int_equal(output_tally_init(&result.graph, 2, 3, 2, result.eager.baseline, &err),
                     AUDIT_OK);
    const int32_t other_order[6] = { 4, 1, 7, 0, 2, 5 };
    tally_add(&result.graph, other_order, 5.0, NULL, NULL, fixture_reference);
    report_verdict(&result, NULL, &verdict);
    assert_int_equal(verdict.verdict, VERDICT_FAIL);
    assert_true(verdict_mentions(&verdict, "graph_mismatch"));

    /* A second distinct eager output fails it too. */
    output_tally_release(&result.graph);
    result.graph_requested = result.graph_ran = false;
    tally_add(&result.eager, other_order, 5.0, NULL, NULL, fixture_reference);
    report_verdict(&result, NULL, &verdict);
    assert_int_equal(verdict.verdict, VERDICT_FAIL);
    assert_true(verdict_mentions(&verdict, "2 distinct outputs over 4 reps"));
    backend_result_release(&result);
}

static void test_verdict_not_guaranteed(void **state)
{
    (void)state;
    struct audit_error err = { 0 };
    struct backend_result result;
    struct verdict_result verdict;
    /* Two tie-free orders of the right sets: flapping is allowed. */
    const int32_t order_a[6] = { 7, 1, 4, 0, 5, 2 };
    const int32_t order_b[6] = { 4, 7, 1, 2, 0, 5 };
    backend_result_init(&result, &unnamed_not_guaranteed_backend);
    assert_int_equal(output_tally_init(&result.eager, 2, 3, 4, NULL, &err), AUDIT_OK);
    tally_add(&result.eager, order_a, 5.0, NULL, NULL, fixture_reference);
    tally_add(&result.eager, order_b, 5.0, NULL, NULL, fixture_reference);
    report_verdict(&result, NULL, &verdict);
    assert_int_equal(verdict.verdict, VERDICT_PASS);
    assert_int_equal(result.eager.distinct_outputs, 2);

    /* Graph replays differing from eager are not a failure at this level. */
    result.graph_requested = result.graph_ran = true;
    assert_int_equal(output_tally_init(&result.graph, 2, 3, 1, result.eager.baseline, &err),
                     AUDIT_OK);
    tally_add(&result.graph, order_b, 5.0, NULL, NULL, fixture_reference);
    report_verdict(&result, NULL, &verdict);
    assert_int_equal(verdict.verdict, VERDICT_PASS);

    /* A duplicate is never allowed. */
    result.eager.violations[CHECK_DUPLICATE].total_rows = 1;
    result.eager.violations[CHECK_DUPLICATE].max_rows_per_rep = 1;
    result.eager.row_flags[1] |= 1u << CHECK_DUPLICATE;
    report_verdict(&result, NULL, &verdict);
    assert_int_equal(verdict.verdict, VERDICT_FAIL);
    assert_true(verdict_mentions(&verdict, "duplicate on 1 row"));
    backend_result_release(&result);
}

static void test_verdict_not_guaranteed_overflow_rule(void **state)
{
    (void)state;
    struct backend_result result;
    struct verdict_result verdict;
    struct census_row census[2];
    memset(census, 0, sizeof(census));
    census[0].coarse_bin_count = CENSUS_RADIX_STAGING + 1; /* predicted to overflow radix */
    census[1].coarse_bin_count = 10;
    census[0].candidates = census[1].candidates = 100000;

    result_with_reference_reps(&result, &radix_like_backend, 2);
    result.eager.violations[CHECK_WRONG_SET].total_rows = 2;
    result.eager.violations[CHECK_WRONG_SET].max_rows_per_rep = 1;
    result.eager.row_flags[0] |= 1u << CHECK_WRONG_SET;
    /* Wrong sets only on the predicted row: radix's documented failure mode. */
    report_verdict(&result, census, &verdict);
    assert_int_equal(verdict.verdict, VERDICT_PASS);
    assert_true(verdict_mentions(&verdict, "forgiven"));

    /* Without the census nothing is forgiven. */
    report_verdict(&result, NULL, &verdict);
    assert_int_equal(verdict.verdict, VERDICT_FAIL);

    /* A wrong set on a row the census does not predict fails, naming the row. */
    result.eager.row_flags[1] |= 1u << CHECK_WRONG_SET;
    report_verdict(&result, census, &verdict);
    assert_int_equal(verdict.verdict, VERDICT_FAIL);
    assert_true(verdict_mentions(&verdict, "does not predict to overflow the radix_4096 staging: 1"));
    backend_result_release(&result);

    /* The same wrong set on a backend without dropping staging is a failure. */
    result_with_reference_reps(&result, &unnamed_not_guaranteed_backend, 2);
    result.eager.violations[CHECK_WRONG_SET].total_rows = 1;
    result.eager.violations[CHECK_WRONG_SET].max_rows_per_rep = 1;
    result.eager.row_flags[0] |= 1u << CHECK_WRONG_SET;
    report_verdict(&result, census, &verdict);
    assert_int_equal(verdict.verdict, VERDICT_FAIL);
    backend_result_release(&result);

    /* The rule table says so in data. */
    assert_non_null(staging_model_for("radix"));
    assert_true(staging_model_for("radix")->drops_on_overflow);
    assert_false(staging_model_for("filtered")->drops_on_overflow);
    assert_null(staging_model_for("bitonic"));
    const struct verdict_rule *rule = verdict_rule_for(TOPK_NOT_GUARANTEED);
    assert_true(rule->forgiven_on_overflow & (1u << CHECK_WRONG_SET));
    assert_false(rule->forgiven_on_overflow & (1u << CHECK_DUPLICATE));
    assert_int_equal(verdict_rule_for(TOPK_GPU_TO_GPU)->forgiven_on_overflow, 0);
}

static void test_verdict_statuses(void **state)
{
    (void)state;
    struct backend_result result;
    struct verdict_result verdict;
    backend_result_init(&result, &gpu_to_gpu_backend);
    backend_result_set_status(&result, BACKEND_UNSUPPORTED, "k = %u > 4096", 8192u);
    report_verdict(&result, NULL, &verdict);
    assert_int_equal(verdict.verdict, VERDICT_NOT_RUN);
    assert_true(verdict_mentions(&verdict, "unsupported: k = 8192 > 4096"));
    backend_result_set_status(&result, BACKEND_UNAVAILABLE, "no CUDA device");
    report_verdict(&result, NULL, &verdict);
    assert_int_equal(verdict.verdict, VERDICT_NOT_RUN);
    backend_result_set_status(&result, BACKEND_SKIPPED, "device lost");
    report_verdict(&result, NULL, &verdict);
    assert_int_equal(verdict.verdict, VERDICT_NOT_RUN);
    backend_result_set_status(&result, BACKEND_ERROR, "illegal address");
    report_verdict(&result, NULL, &verdict);
    assert_int_equal(verdict.verdict, VERDICT_FAIL);
    /* Status ok with no rep completed cannot pass. */
    result.status = BACKEND_OK;
    report_verdict(&result, NULL, &verdict);
    assert_int_equal(verdict.verdict, VERDICT_FAIL);
    backend_result_release(&result);
}

/* ---- JSON ----------------------------------------------------------------------------------- */

/* Every bare word outside strings must be true, false or null: NaN, Infinity and nan are not
 * JSON and must never appear. */
static void assert_only_json_literals(const char *text)
{
    const char *p = text;
    while (*p) {
        if (*p == '"') {
            for (p++; *p && *p != '"'; p++)
                if (*p == '\\' && p[1])
                    p++;
            assert_true(*p == '"');
            p++;
            continue;
        }
        if (isalpha((unsigned char)*p)) {
            const char *start = p;
            while (isalpha((unsigned char)*p))
                p++;
            size_t length = (size_t)(p - start);
            bool literal = (length == 4 && !strncmp(start, "true", 4)) ||
                           (length == 5 && !strncmp(start, "false", 5)) ||
                           (length == 4 && !strncmp(start, "null", 4)) ||
                           (length == 1 && (*start == 'e' || *start == 'E')); /* 1e+20 */
            if (!literal)
                fail_msg("bare word '%.*s' in the JSON", (int)length, start);
            continue;
        }
        p++;
    }
}

static void assert_all_numbers_finite(const cJSON *item)
{
    for (; item; item = item->next) {
        if (cJSON_IsNumber(item))
            assert_true(isfinite(item->valuedouble));
        assert_all_numbers_finite(item->child);
    }
}

static cJSON *path_get(cJSON *json, const char *first, ...)
{
    va_list args;
    va_start(args, first);
    for (const char *key = first; key && json; key = va_arg(args, const char *))
        json = cJSON_IsArray(json) ? cJSON_GetArrayItem(json, atoi(key))
                                   : cJSON_GetObjectItemCaseSensitive(json, key);
    va_end(args);
    return json;
}

static void test_report_json_schema_and_no_nan(void **state)
{
    (void)state;
    struct audit_error err = { 0 };
    struct capture_record record;
    record_make(&record);
    uint32_t k = 3;
    cJSON *census = NULL;
    struct census_row *census_rows = NULL;
    assert_int_equal(census_record_json(&record, &k, 1, &census, &census_rows, &err), AUDIT_OK);

    /* Three backends: ok but never timed (NaN times), unavailable, error. */
    struct backend_result results[3];
    backend_result_init(&results[0], &gpu_to_gpu_backend);
    assert_int_equal(output_tally_init(&results[0].eager, 2, 3, 2, NULL, &err), AUDIT_OK);
    tally_add(&results[0].eager, fixture_reference, NAN, NULL, NULL, fixture_reference);
    tally_add(&results[0].eager, fixture_reference, INFINITY, NULL, NULL, fixture_reference);
    results[0].graph_requested = true;
    results[0].batch_requested = true;
    backend_result_init(&results[1], &radix_like_backend);
    backend_result_set_status(&results[1], BACKEND_UNAVAILABLE, "no CUDA device: test");
    backend_result_init(&results[2], &run_to_run_backend);
    backend_result_set_status(&results[2], BACKEND_ERROR, "out of device memory");

    struct run_context context = { .noise = "gemm", .reps = 2, .seed = 7 };
    static const char *const names[] = { "test-exact", "radix", "test-repeatable" };
    context.backends = names;
    context.backend_count = 3;
    document_context_fill(&context.document, "0.1.0 (gtest)", "dsatopk-audit run hand.bin");
    snprintf(context.device_unavailable_reason, sizeof(context.device_unavailable_reason),
             "no CUDA device: test");

    struct run_report report;
    struct verdict_result verdicts[3];
    assert_int_equal(report_begin(&report, &context, &err), AUDIT_OK);
    struct record_result record_result = {
        .file = "captures/hand.bin", .record = &record, .k = 3, .census = census,
        .census_rows = census_rows, .backends = results, .backend_count = 3,
        .time = { .reference_ms = 1.5, .census_ms = 2.0, .backends_ms = 6.25, .total_ms = 10.0 },
    };
    hash_indices(fixture_reference, 6, record_result.reference_hash);
    assert_int_equal(hash_index_sets(fixture_reference, 2, 3, record_result.reference_set_hash), 0);
    assert_int_equal(report_add_record(&report, &record_result, verdicts, &err), AUDIT_OK);
    assert_int_equal(report_add_input_error(&report, "captures/bad.bin", 2, 4096, "corrupt",
                                            "captures/bad.bin: record 2 at byte 4096: bad magic",
                                            &err),
                     AUDIT_OK);
    assert_int_equal(report_finish(&report, true, NULL, 3, &err), AUDIT_OK);
    assert_int_equal(verdicts[0].verdict, VERDICT_PASS);
    assert_int_equal(verdicts[1].verdict, VERDICT_NOT_RUN);
    assert_int_equal(verdicts[2].verdict, VERDICT_FAIL);

    char *text = cJSON_Print(report.root);
    assert_non_null(text);
    assert_only_json_literals(text);
    cJSON *parsed = cJSON_Parse(text);
    assert_non_null(parsed);
    assert_all_numbers_finite(parsed);

    assert_string_equal(path_get(parsed, "schema", NULL)->valuestring, REPORT_SCHEMA);
    assert_int_equal(path_get(parsed, "schema_version", NULL)->valueint, 1);
    assert_true(cJSON_IsTrue(path_get(parsed, "complete", NULL)));
    assert_int_equal(path_get(parsed, "exit_code", NULL)->valueint, 3);
    static const char *const context_fields[] = {
        "tool_version", "git_revision", "command_line", "utc_time", "host", "device",
        "device_unavailable_reason", "emulation", "noise", "reps", "seed",
    };
    for (size_t i = 0; i < sizeof(context_fields) / sizeof(context_fields[0]); i++)
        assert_non_null(path_get(parsed, "context", context_fields[i], NULL));
    /* The context opens as every document's does (document_context.h), then the run's own. */
    static const char *const context_order[] = {
        "tool_version", "git_revision", "version_string", "command_line", "utc_time", "host",
        "device", "device_unavailable_reason", "emulation", "noise", "reps", "seed", "graph",
        "batch_invariance", "gpu_prefilter", "k_override", "backends",
    };
    const cJSON *context_item = path_get(parsed, "context", NULL)->child;
    for (size_t i = 0; i < sizeof(context_order) / sizeof(context_order[0]); i++) {
        assert_non_null(context_item);
        assert_string_equal(context_item->string, context_order[i]);
        context_item = context_item->next;
    }
    assert_null(context_item);
    assert_string_equal(path_get(parsed, "context", "version_string", NULL)->valuestring,
                        "0.1.0 (gtest)");
    assert_true(cJSON_IsNull(path_get(parsed, "context", "device", NULL)));
    assert_true(cJSON_IsNull(path_get(parsed, "context", "emulation", "smem_per_sm_bytes", NULL)));

    cJSON *rec = path_get(parsed, "records", "0", NULL);
    static const char *const record_fields[] = {
        "file", "index", "byte_offset", "rows", "k", "row_stride", "flags", "metadata",
        "payload_sha256", "reference", "census", "backends", "time_breakdown_ms",
    };
    for (size_t i = 0; i < sizeof(record_fields) / sizeof(record_fields[0]); i++)
        assert_non_null(path_get(rec, record_fields[i], NULL));
    assert_int_equal(path_get(rec, "index", NULL)->valueint, 4);
    assert_int_equal(path_get(rec, "byte_offset", NULL)->valueint, 1234);
    assert_int_equal(path_get(rec, "metadata", "layer", NULL)->valueint, 3);
    /* The record's own time: the CPU side, the workers, and what is left. */
    assert_true(path_get(rec, "time_breakdown_ms", "reference_ms", NULL)->valuedouble == 1.5);
    assert_true(path_get(rec, "time_breakdown_ms", "census_ms", NULL)->valuedouble == 2.0);
    assert_true(path_get(rec, "time_breakdown_ms", "backends_ms", NULL)->valuedouble == 6.25);
    assert_true(path_get(rec, "time_breakdown_ms", "other_ms", NULL)->valuedouble == 0.25);
    assert_true(path_get(rec, "time_breakdown_ms", "total_ms", NULL)->valuedouble == 10.0);
    assert_true(report.record_time_total.total_ms == 10.0);
    char hex[HASH_HEX_BYTES];
    hash_to_hex(record_result.reference_hash, hex);
    assert_string_equal(path_get(rec, "reference", "output_sha256", NULL)->valuestring, hex);

    cJSON *ok = path_get(rec, "backends", "0", NULL);
    static const char *const backend_fields[] = {
        "name", "level", "status", "reason", "verdict", "verdict_reasons", "reps",
        "output_sha256_per_rep", "distinct_outputs", "distinct_sets", "equals_reference_reps",
        "violations", "flapping_rows", "predicted_vs_observed", "kernel_time_us", "graph",
        "batch_invariance", "time_breakdown_ms", "host_work",
    };
    for (size_t i = 0; i < sizeof(backend_fields) / sizeof(backend_fields[0]); i++)
        assert_non_null(path_get(ok, backend_fields[i], NULL));
    assert_string_equal(path_get(ok, "verdict", NULL)->valuestring, "pass");
    assert_int_equal(path_get(ok, "equals_reference_reps", NULL)->valueint, 2);
    /* Neither rep was timed with a finite value: null, not NaN. */
    assert_true(cJSON_IsNull(path_get(ok, "kernel_time_us", "median", NULL)));
    assert_non_null(path_get(ok, "violations", "wrong_set", "max_rows_per_rep", NULL));
    assert_non_null(path_get(ok, "graph", "violations", "graph_mismatch", "total_rows", NULL));
    assert_string_equal(path_get(rec, "backends", "1", "status", NULL)->valuestring, "unavailable");
    assert_string_equal(path_get(rec, "backends", "1", "verdict", NULL)->valuestring, "not_run");
    assert_string_equal(path_get(rec, "backends", "2", "verdict", NULL)->valuestring, "fail");
    /* Every status carries the time breakdown and the host work (zero when nothing ran). */
    for (int i = 0; i < 3; i++) {
        char index[4];
        snprintf(index, sizeof(index), "%d", i);
        assert_true(cJSON_IsNumber(path_get(rec, "backends", index, "time_breakdown_ms", "total_ms",
                                            NULL)));
        assert_true(cJSON_IsNumber(path_get(rec, "backends", index, "time_breakdown_ms",
                                            "other_ms", NULL)));
        assert_true(cJSON_IsNumber(path_get(rec, "backends", index, "host_work", "outputs_hashed",
                                            NULL)));
    }
    assert_int_equal(path_get(ok, "host_work", "outputs_hashed", NULL)->valueint, 2);
    assert_int_equal(path_get(ok, "host_work", "reps_matched_on_gpu", NULL)->valueint, 0);
    assert_true(cJSON_IsFalse(path_get(ok, "host_work", "gpu_prefilter", NULL)));
    assert_true(cJSON_IsFalse(path_get(parsed, "context", "gpu_prefilter", NULL)));

    assert_int_equal(path_get(parsed, "input_errors", "0", "byte_offset", NULL)->valueint, 4096);
    assert_int_equal(path_get(parsed, "summary", "backends_pass", NULL)->valueint, 1);
    assert_int_equal(path_get(parsed, "summary", "backends_fail", NULL)->valueint, 1);
    assert_int_equal(path_get(parsed, "summary", "backends_not_run", NULL)->valueint, 1);
    assert_int_equal(path_get(parsed, "summary", "input_errors", NULL)->valueint, 1);
    assert_int_equal(path_get(parsed, "summary", "by_backend", "radix", "not_run", NULL)->valueint,
                     1);

    cJSON_Delete(parsed);
    cJSON_free(text);
    report_release(&report);
    for (int i = 0; i < 3; i++)
        backend_result_release(&results[i]);
    cJSON_Delete(census);
    free(census_rows);
    record_release(&record);
}

/* An entry read back (a worker's, on its way into the report) says what report.c wrote. */
static void test_entry_outcome(void **state)
{
    (void)state;
    cJSON *entry = cJSON_Parse("{\"name\": \"radix\", \"status\": \"hang\", \"verdict\": "
                               "\"fail\", \"time_breakdown_ms\": {\"total_ms\": 2.5, "
                               "\"kernel_ms\": 1.25}}");
    assert_non_null(entry);
    struct report_entry_outcome outcome;
    report_entry_outcome(entry, &outcome);
    assert_string_equal(outcome.name, "radix");
    assert_int_equal(outcome.status, BACKEND_HANG);
    assert_int_equal(outcome.verdict, VERDICT_FAIL);
    assert_true(outcome.time.total_ms == 2.5 && outcome.time.kernel_ms == 1.25);
    cJSON_Delete(entry);

    entry = cJSON_Parse("{\"name\": \"sort\", \"status\": \"ok\", \"verdict\": \"pass\"}");
    report_entry_outcome(entry, &outcome);
    assert_int_equal(outcome.status, BACKEND_OK);
    assert_int_equal(outcome.verdict, VERDICT_PASS);
    assert_true(outcome.time.total_ms == 0.0);
    cJSON_Delete(entry);

    /* Nothing known: counted as a failed error, never as a pass. */
    entry = cJSON_Parse("{\"verdict\": \"maybe\"}");
    report_entry_outcome(entry, &outcome);
    assert_string_equal(outcome.name, "unnamed");
    assert_int_equal(outcome.status, BACKEND_ERROR);
    assert_int_equal(outcome.verdict, VERDICT_FAIL);
    cJSON_Delete(entry);
}

static void test_incomplete_report_keeps_records(void **state)
{
    (void)state;
    struct audit_error err = { 0 };
    struct capture_record record;
    record_make(&record);
    struct backend_result result;
    backend_result_init(&result, &gpu_to_gpu_backend);
    backend_result_set_status(&result, BACKEND_SKIPPED, "not run: the CUDA context is unusable");
    struct run_context context = { .noise = "none", .reps = 1 };
    struct run_report report;
    assert_int_equal(report_begin(&report, &context, &err), AUDIT_OK);
    struct record_result record_result = {
        .file = "a.bin", .record = &record, .k = 3, .backends = &result, .backend_count = 1,
    };
    assert_int_equal(report_add_record(&report, &record_result, NULL, &err), AUDIT_OK);
    /* Before finish the report says incomplete. */
    assert_true(cJSON_IsFalse(cJSON_GetObjectItem(report.root, "complete")));
    assert_int_equal(report_finish(&report, false, "device lost", 4, &err), AUDIT_OK);
    assert_true(cJSON_IsFalse(cJSON_GetObjectItem(report.root, "complete")));
    assert_string_equal(cJSON_GetObjectItem(report.root, "stop_reason")->valuestring, "device lost");
    assert_int_equal(cJSON_GetArraySize(cJSON_GetObjectItem(report.root, "records")), 1);
    report_release(&report);
    backend_result_release(&result);
    record_release(&record);
}

int main(void)
{
    if (hash_init() != 0)
        return 1;
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_output_hash_is_sha256_of_little_endian_bytes),
        cmocka_unit_test(test_flapping_rows_on_hand_made_reps),
        cmocka_unit_test(test_external_baseline_counts_graph_mismatch),
        cmocka_unit_test(test_violations_checked_once_per_distinct_output),
        cmocka_unit_test(test_prefilter_report_equals_full_hashing),
        cmocka_unit_test(test_prefilter_unknown_row_hashes_change_nothing),
        cmocka_unit_test(test_threads_change_nothing_but_times),
        cmocka_unit_test(test_time_breakdown_arithmetic),
        cmocka_unit_test(test_tally_times_its_host_work),
        cmocka_unit_test(test_verdict_gpu_to_gpu),
        cmocka_unit_test(test_verdict_run_to_run),
        cmocka_unit_test(test_verdict_not_guaranteed),
        cmocka_unit_test(test_verdict_not_guaranteed_overflow_rule),
        cmocka_unit_test(test_verdict_statuses),
        cmocka_unit_test(test_report_json_schema_and_no_nan),
        cmocka_unit_test(test_entry_outcome),
        cmocka_unit_test(test_incomplete_report_keeps_records),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
