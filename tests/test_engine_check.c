/* Unit tests of the engine's selection judged (src/verdict/engine_check.c) and its rule
 * (verdict_judge_engine, src/verdict/verdict.c): hand-made records whose engine rows are exact,
 * tie variants, or wrong in each kind (a dropped candidate, an index below the threshold, a
 * duplicate, -1 where candidates remain, a real index after -1, out of range, order and
 * tie-break under a contract), rows with no boundary, a paged record judged through its page
 * table, the contract read from metadata and from an option, and the verdict's findings. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "engine_check.h"
#include "verdict.h"

#define ROWS 3
#define LENGTH 16
#define K 4

/* ROWS rows of LENGTH distinct scores (row b holds b * 100 + i at i: the top k are the last k
 * indices), engine rows equal to the reference (descending), metadata as given. */
static struct capture_record make_record(const char *metadata)
{
    struct capture_record record = { 0 };
    record.rows = ROWS;
    record.k = K;
    record.row_stride = LENGTH;
    record.scores = malloc(ROWS * LENGTH * sizeof(float));
    record.lengths = malloc(ROWS * sizeof(int32_t));
    record.engine_indices = malloc(ROWS * K * sizeof(int32_t));
    record.metadata_json = strdup(metadata);
    assert_non_null(record.scores);
    assert_non_null(record.lengths);
    assert_non_null(record.engine_indices);
    assert_non_null(record.metadata_json);
    for (uint32_t b = 0; b < ROWS; b++) {
        record.lengths[b] = LENGTH;
        for (uint32_t i = 0; i < LENGTH; i++)
            record.scores[b * LENGTH + i] = (float)(b * 100 + i);
        for (uint32_t j = 0; j < K; j++)
            record.engine_indices[b * K + j] = (int32_t)(LENGTH - 1 - j);
    }
    return record;
}

/* Row b of the record judged under contract (order, tie_break). */
struct judged_row {
    enum engine_row_class row_class;
    uint32_t kinds;
    struct engine_row_detail detail;
};

static struct judged_row judge(const struct capture_record *record, uint32_t b,
                               enum engine_order order, enum engine_tie_break tie_break)
{
    struct check_context checks;
    struct audit_error err = { 0 };
    struct topk_page_inverse pages = { 0 };
    struct judged_row judged;
    const struct engine_contract contract = { order, tie_break, ENGINE_CONTRACT_OPTION };
    assert_int_equal(checks_prepare(&checks, record, record->k, &err), AUDIT_OK);
    struct engine_row_scratch scratch = { calloc(checks.seen_bytes, 1),
                                          malloc(record->k * sizeof(int64_t)), &pages };
    assert_int_equal(engine_judge_row(&checks, &contract, b, &scratch, &judged.row_class,
                                      &judged.kinds, &judged.detail, &err),
                     AUDIT_OK);
    for (size_t i = 0; i < checks.seen_bytes; i++)
        assert_int_equal(scratch.seen[i], 0); /* left zero for the next row */
    free(scratch.seen);
    free(scratch.positions);
    topk_page_inverse_free(&pages);
    checks_release(&checks);
    return judged;
}

#define KIND(kind) (1u << (kind))

static void test_exact_and_any_order(void **state)
{
    (void)state;
    struct capture_record record = make_record("{}");
    struct judged_row row = judge(&record, 0, ENGINE_ORDER_NONE, ENGINE_TIE_BREAK_NONE);
    assert_int_equal(row.row_class, ENGINE_ROW_EXACT);
    assert_int_equal(row.kinds, 0);
    /* Ascending scores: fine without an order promise, an order violation under sorted, fine
     * under index_ascending (indices 12..15 ascend). */
    for (uint32_t j = 0; j < K; j++)
        record.engine_indices[1 * K + j] = (int32_t)(LENGTH - K + j);
    row = judge(&record, 1, ENGINE_ORDER_NONE, ENGINE_TIE_BREAK_NONE);
    assert_int_equal(row.row_class, ENGINE_ROW_EXACT);
    row = judge(&record, 1, ENGINE_ORDER_SORTED, ENGINE_TIE_BREAK_NONE);
    assert_int_equal(row.row_class, ENGINE_ROW_WRONG);
    assert_int_equal(row.kinds, KIND(CHECK_ORDER));
    assert_int_equal(row.detail.order_slot, 1);
    row = judge(&record, 1, ENGINE_ORDER_INDEX_ASCENDING, ENGINE_TIE_BREAK_NONE);
    assert_int_equal(row.row_class, ENGINE_ROW_EXACT);
    row = judge(&record, 0, ENGINE_ORDER_INDEX_ASCENDING, ENGINE_TIE_BREAK_NONE);
    assert_int_equal(row.kinds, KIND(CHECK_ORDER));
    capture_record_free(&record);
}

static void test_tie_variant_and_tie_break(void **state)
{
    (void)state;
    struct capture_record record = make_record("{}");
    /* Row 0: indices 10, 11 and 12 tie at the k-th value; the reference takes 10. */
    record.scores[10] = record.scores[11] = record.scores[12];
    int32_t *row0 = record.engine_indices;
    row0[3] = 10;
    struct judged_row row = judge(&record, 0, ENGINE_ORDER_NONE, ENGINE_TIE_BREAK_NONE);
    assert_int_equal(row.row_class, ENGINE_ROW_EXACT);
    row = judge(&record, 0, ENGINE_ORDER_NONE, ENGINE_TIE_BREAK_SMALL);
    assert_int_equal(row.row_class, ENGINE_ROW_EXACT);
    row = judge(&record, 0, ENGINE_ORDER_NONE, ENGINE_TIE_BREAK_LARGE);
    assert_int_equal(row.kinds, KIND(CHECK_TIE_RULE));
    row0[3] = 12; /* the largest index of the tie set */
    row = judge(&record, 0, ENGINE_ORDER_NONE, ENGINE_TIE_BREAK_NONE);
    assert_int_equal(row.row_class, ENGINE_ROW_TIE_VARIANT);
    row = judge(&record, 0, ENGINE_ORDER_NONE, ENGINE_TIE_BREAK_LARGE);
    assert_int_equal(row.row_class, ENGINE_ROW_TIE_VARIANT);
    row = judge(&record, 0, ENGINE_ORDER_NONE, ENGINE_TIE_BREAK_SMALL);
    assert_int_equal(row.row_class, ENGINE_ROW_WRONG);
    assert_int_equal(row.kinds, KIND(CHECK_TIE_RULE));
    /* Equal scores may come in any order under sorted. */
    row0[3] = 11;
    row = judge(&record, 0, ENGINE_ORDER_SORTED, ENGINE_TIE_BREAK_NONE);
    assert_int_equal(row.row_class, ENGINE_ROW_TIE_VARIANT);
    capture_record_free(&record);
}

static void test_wrong_rows_name_their_indices(void **state)
{
    (void)state;
    struct capture_record record = make_record("{}");
    /* Row 0 drops its top (15) for 11, which ranks below the k-th (12). */
    record.engine_indices[0] = 11;
    struct judged_row row = judge(&record, 0, ENGINE_ORDER_NONE, ENGINE_TIE_BREAK_NONE);
    assert_int_equal(row.row_class, ENGINE_ROW_WRONG);
    assert_int_equal(row.kinds, KIND(CHECK_WRONG_SET));
    assert_int_equal(row.detail.missing_count, 1);
    assert_int_equal(row.detail.missing[0].index, 15);
    assert_true(row.detail.missing[0].has_distance);
    assert_true(row.detail.missing[0].distance == 3.0);
    assert_int_equal(row.detail.extra_count, 1);
    assert_int_equal(row.detail.extra[0].index, 11);
    assert_true(row.detail.extra[0].distance == 1.0);
    assert_true(row.detail.extra[0].distance_ulps > 0);
    /* Row 1: a duplicate leaves the k-th missing (a required candidate, at distance 0). */
    record.engine_indices[1 * K + 3] = 13;
    row = judge(&record, 1, ENGINE_ORDER_NONE, ENGINE_TIE_BREAK_NONE);
    assert_int_equal(row.kinds, KIND(CHECK_DUPLICATE) | KIND(CHECK_WRONG_SET));
    assert_int_equal(row.detail.duplicate_count, 1);
    assert_int_equal(row.detail.duplicates[0], 13);
    assert_int_equal(row.detail.missing_count, 1);
    assert_int_equal(row.detail.missing[0].index, 112 - 100);
    assert_true(row.detail.missing[0].distance == 0.0);
    /* Row 2: -1 where candidates remain, then a real index after it, then out of range. */
    record.engine_indices[2 * K + 2] = -1;
    row = judge(&record, 2, ENGINE_ORDER_NONE, ENGINE_TIE_BREAK_NONE);
    assert_int_equal(row.kinds, KIND(CHECK_SHORT) | KIND(CHECK_PADDING) | KIND(CHECK_WRONG_SET));
    assert_int_equal(row.detail.entries, 3);
    assert_int_equal(row.detail.needed, 4);
    assert_int_equal(row.detail.padding_slot, 3);
    record.engine_indices[2 * K + 2] = 99;
    record.engine_indices[2 * K + 3] = -5;
    row = judge(&record, 2, ENGINE_ORDER_NONE, ENGINE_TIE_BREAK_NONE);
    assert_int_equal(row.kinds, KIND(CHECK_OUT_OF_RANGE) | KIND(CHECK_WRONG_SET));
    assert_int_equal(row.detail.out_of_range_count, 2);
    assert_int_equal(row.detail.out_of_range[0], 99);
    assert_int_equal(row.detail.out_of_range[1], -5);
    capture_record_free(&record);
}

static void test_rows_without_boundary(void **state)
{
    (void)state;
    struct capture_record record = make_record("{}");
    /* Row 0 has 3 candidates for k = 4: every one is needed, then -1. */
    record.lengths[0] = 3;
    int32_t *row0 = record.engine_indices;
    row0[0] = 2, row0[1] = 1, row0[2] = 0, row0[3] = -1;
    struct judged_row row = judge(&record, 0, ENGINE_ORDER_SORTED, ENGINE_TIE_BREAK_SMALL);
    assert_int_equal(row.row_class, ENGINE_ROW_EXACT);
    row0[2] = -1;
    row = judge(&record, 0, ENGINE_ORDER_NONE, ENGINE_TIE_BREAK_NONE);
    assert_int_equal(row.kinds, KIND(CHECK_SHORT) | KIND(CHECK_WRONG_SET));
    assert_int_equal(row.detail.missing_count, 1);
    assert_int_equal(row.detail.missing[0].index, 0);
    assert_false(row.detail.missing[0].has_distance);
    capture_record_free(&record);
}

static void test_paged_record(void **state)
{
    (void)state;
    struct capture_record record = make_record("{}");
    /* Pages of 4: the window's pages 0..3 sit at physical pages 7, 2, 9, 5. */
    record.page_size = 4;
    record.page_table_cols = 4;
    record.page_table = malloc(ROWS * 4 * sizeof(int32_t));
    assert_non_null(record.page_table);
    static const int32_t physical[4] = { 7, 2, 9, 5 };
    for (uint32_t b = 0; b < ROWS; b++)
        for (uint32_t c = 0; c < 4; c++)
            record.page_table[b * 4 + c] = physical[c];
    for (uint32_t b = 0; b < ROWS; b++)
        for (uint32_t j = 0; j < K; j++)
            record.engine_indices[b * K + j] =
                topk_translate_index(&record, b, record.engine_indices[b * K + j]);
    struct judged_row row = judge(&record, 0, ENGINE_ORDER_SORTED, ENGINE_TIE_BREAK_NONE);
    assert_int_equal(row.row_class, ENGINE_ROW_EXACT);
    /* Window position 0 (physical 28) in place of the top: 15 (physical 23) is missing. */
    record.engine_indices[1 * K + 0] = topk_translate_index(&record, 1, 0);
    row = judge(&record, 1, ENGINE_ORDER_NONE, ENGINE_TIE_BREAK_NONE);
    assert_int_equal(row.kinds, KIND(CHECK_WRONG_SET));
    assert_int_equal(row.detail.missing[0].index, 15);
    assert_int_equal(row.detail.missing[0].translated, 5 * 4 + 3);
    assert_int_equal(row.detail.extra[0].index, 0);
    assert_int_equal(row.detail.extra[0].translated, 7 * 4);
    /* An index no page of the window explains is out of range. */
    record.engine_indices[2 * K + 0] = 1000;
    row = judge(&record, 2, ENGINE_ORDER_NONE, ENGINE_TIE_BREAK_NONE);
    assert_true(row.kinds & KIND(CHECK_OUT_OF_RANGE));
    assert_int_equal(row.detail.out_of_range[0], 1000);
    capture_record_free(&record);
}

static void test_record_and_contracts(void **state)
{
    (void)state;
    struct audit_error err = { 0 };
    struct engine_contract contract, option;
    struct capture_record record =
        make_record("{\"contract\": {\"order\": \"sorted\", \"tie_break\": \"small\"}}");
    assert_int_equal(engine_contract_for_record(&record, NULL, &contract, &err), AUDIT_OK);
    assert_int_equal(contract.order, ENGINE_ORDER_SORTED);
    assert_int_equal(contract.tie_break, ENGINE_TIE_BREAK_SMALL);
    assert_int_equal(contract.source, ENGINE_CONTRACT_METADATA);
    assert_int_equal(engine_contract_parse("{\"order\": \"index_ascending\", \"tie_break\": "
                                           "\"large\"}", "--engine-contract",
                                           ENGINE_CONTRACT_OPTION, &option, &err),
                     AUDIT_OK);
    assert_int_equal(engine_contract_for_record(&record, &option, &contract, &err), AUDIT_OK);
    assert_int_equal(contract.order, ENGINE_ORDER_INDEX_ASCENDING);
    assert_int_equal(contract.source, ENGINE_CONTRACT_OPTION);
    static const char *const bad[] = { "[]", "{\"order\": \"up\", \"tie_break\": \"none\"}",
                                       "{\"order\": \"none\"}", "not json",
                                       "{\"order\": \"none\", \"tie_break\": \"none\", \"x\": 1}" };
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        assert_int_equal(engine_contract_parse(bad[i], "--engine-contract",
                                               ENGINE_CONTRACT_OPTION, &option, &err),
                         AUDIT_EUSAGE);
        assert_non_null(strstr(err.message, "--engine-contract"));
    }
    free(record.metadata_json);
    record.metadata_json = strdup("{\"contract\": {\"order\": \"up\", \"tie_break\": \"none\"}}");
    assert_int_equal(engine_contract_for_record(&record, NULL, &contract, &err), AUDIT_EDATA);
    assert_non_null(strstr(err.message, "record 0 metadata"));

    /* The whole record: counts per class and kind, the first wrong rows described. */
    record.engine_indices[1 * K + 0] = 3;   /* row 1 wrong */
    record.engine_indices[2 * K + 0] = 14;  /* row 2: 14, 15 swapped: out of sorted order */
    record.engine_indices[2 * K + 1] = 15;
    struct check_context checks;
    struct engine_judgement judgement;
    const struct engine_contract sorted = { ENGINE_ORDER_SORTED, ENGINE_TIE_BREAK_NONE,
                                            ENGINE_CONTRACT_OPTION };
    assert_int_equal(checks_prepare(&checks, &record, K, &err), AUDIT_OK);
    assert_int_equal(engine_judge_record(&checks, &sorted, &judgement, &err), AUDIT_OK);
    assert_int_equal(judgement.class_rows[ENGINE_ROW_EXACT], 1);
    assert_int_equal(judgement.class_rows[ENGINE_ROW_WRONG], 2);
    assert_int_equal(judgement.kind_rows[CHECK_ORDER], 2);
    assert_int_equal(judgement.kind_rows[CHECK_WRONG_SET], 1);
    assert_int_equal(judgement.detail_count, 2);
    assert_int_equal(judgement.details[0].row, 1);
    assert_int_equal(judgement.row_class[2], ENGINE_ROW_WRONG);
    engine_judgement_release(&judgement);
    checks_release(&checks);
    /* A context at another k is refused. */
    assert_int_equal(checks_prepare(&checks, &record, 2, &err), AUDIT_OK);
    assert_int_equal(engine_judge_record(&checks, &sorted, &judgement, &err), AUDIT_EUSAGE);
    checks_release(&checks);
    capture_record_free(&record);
}

static void test_verdict_rule(void **state)
{
    (void)state;
    const uint32_t rows[] = { 3, 9 };
    struct engine_evidence evidence = {
        .judged = true,
        .contract = "order none, tie_break none (default)",
        .rows = 10,
        .wrong_rows = rows,
        .wrong_rows_listed = 2,
    };
    struct verdict_result result;
    evidence.class_rows[ENGINE_ROW_EXACT] = 7;
    evidence.class_rows[ENGINE_ROW_TIE_VARIANT] = 1;
    evidence.class_rows[ENGINE_ROW_WRONG] = 2;
    evidence.kind_rows[CHECK_WRONG_SET] = 2;
    evidence.kind_rows[CHECK_SHORT] = 1;
    verdict_judge_engine_into(&evidence, &result);
    assert_int_equal(result.verdict, VERDICT_FAIL);
    assert_int_equal(result.reason_count, 2);
    assert_string_equal(result.reasons[0],
                        "the engine's selection is wrong on 2 of 10 row(s) (short 1, wrong_set 2) "
                        "under order none, tie_break none (default): rows 3, 9");
    assert_non_null(strstr(result.reasons[1], "note: 1 of 10 row(s) are tie variants"));
    evidence.class_rows[ENGINE_ROW_WRONG] = 0;
    verdict_judge_engine_into(&evidence, &result);
    assert_int_equal(result.verdict, VERDICT_PASS);
    assert_int_equal(result.reason_count, 1);
    evidence.judged = false;
    evidence.reason = "record 0 metadata: contract order \"up\" is not ...";
    verdict_judge_engine_into(&evidence, &result);
    assert_int_equal(result.verdict, VERDICT_FAIL);
    assert_non_null(strstr(result.reasons[0], "error: record 0 metadata"));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_exact_and_any_order),
        cmocka_unit_test(test_tie_variant_and_tie_break),
        cmocka_unit_test(test_wrong_rows_name_their_indices),
        cmocka_unit_test(test_rows_without_boundary),
        cmocka_unit_test(test_paged_record),
        cmocka_unit_test(test_record_and_contracts),
        cmocka_unit_test(test_verdict_rule),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
