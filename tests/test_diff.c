/* Row comparison behind `diff` and row selection behind `extract` (src/triage/selection.c): one
 * constructed pair per diff case, the crossing rule at ties, short rows and non-finite values,
 * page-table placement, a randomised check that the crossing rule never misses a set change,
 * list parsing and row extraction. A record at a time (src/triage/diff_record.c, diff_json.c):
 * the differing rows kept in order, the counts, the mismatch messages, the totals, and the
 * record's and the summary's objects in the document. */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "capture.h"
#include "diff_json.h"
#include "diff_record.h"
#include "selection.h"

#define assert_message_contains(err, text)                                                       \
    do {                                                                                         \
        if (!strstr((err).message, (text)))                                                      \
            fail_msg("error message \"%s\" does not contain \"%s\"", (err).message, (text));     \
    } while (0)

/* A record of `rows` rows of `length` scores, row b holding b * 1000 + i at position i (all
 * distinct, gaps of 1.0), k as given, every array malloc'ed so capture_record_free releases it. */
static struct capture_record make_record(uint32_t rows, uint32_t length, uint32_t k)
{
    struct capture_record record = { 0 };
    record.rows = rows;
    record.k = k;
    record.row_stride = length;
    record.scores = malloc((size_t)rows * length * sizeof(float));
    record.lengths = malloc(rows * sizeof(int32_t));
    record.metadata_json = malloc(3);
    assert_non_null(record.scores);
    assert_non_null(record.lengths);
    assert_non_null(record.metadata_json);
    strcpy(record.metadata_json, "{}");
    for (uint32_t b = 0; b < rows; b++) {
        record.lengths[b] = (int32_t)length;
        for (uint32_t i = 0; i < length; i++)
            record.scores[(size_t)b * length + i] = (float)(b * 1000 + i);
    }
    return record;
}

/* Engine indices equal to the exact top-k of each row (descending values: the last k). */
static void add_engine_indices(struct capture_record *record)
{
    record->engine_indices = malloc((size_t)record->rows * record->k * sizeof(int32_t));
    assert_non_null(record->engine_indices);
    for (uint32_t b = 0; b < record->rows; b++)
        for (uint32_t j = 0; j < record->k; j++)
            record->engine_indices[(size_t)b * record->k + j] =
                (int32_t)(record->lengths[b] - 1 - (int32_t)j);
}

static struct capture_record copy_record(const struct capture_record *source)
{
    struct capture_record copy;
    struct audit_error err = { 0 };
    assert_int_equal(capture_record_copy(&copy, source, &err), AUDIT_OK);
    return copy;
}

/* One row compared; when both records carry engine indices, each side's is judged as
 * diff_record_compare judges it (checks at the record's k, the default contract). */
static struct diff_row compare_row(const struct capture_record *a, const struct capture_record *b,
                                   uint32_t row, uint32_t k)
{
    struct diff_scratch scratch = { 0 };
    struct diff_row result;
    struct audit_error err = { 0 };
    struct check_context checks_a, checks_b;
    struct topk_page_inverse pages_a = { 0 }, pages_b = { 0 };
    struct diff_engine_judge judge = { 0 };
    const bool judged = a->engine_indices && b->engine_indices && a->k == b->k;
    if (judged) {
        assert_int_equal(checks_prepare(&checks_a, a, a->k, &err), AUDIT_OK);
        assert_int_equal(checks_prepare(&checks_b, b, b->k, &err), AUDIT_OK);
        judge.a = &checks_a;
        judge.b = &checks_b;
        judge.scratch_a = (struct engine_row_scratch){ calloc(checks_a.seen_bytes, 1),
                                                       malloc(a->k * sizeof(int64_t)), &pages_a };
        judge.scratch_b = (struct engine_row_scratch){ calloc(checks_b.seen_bytes, 1),
                                                       malloc(b->k * sizeof(int64_t)), &pages_b };
    }
    int status = diff_row_compare(a, b, row, k, &scratch, judged ? &judge : NULL, &result, &err);
    if (status != AUDIT_OK)
        fail_msg("diff_row_compare: %s", err.message);
    if (judged) {
        checks_release(&checks_a);
        checks_release(&checks_b);
        free(judge.scratch_a.seen);
        free(judge.scratch_a.positions);
        free(judge.scratch_b.seen);
        free(judge.scratch_b.positions);
        topk_page_inverse_free(&pages_a);
        topk_page_inverse_free(&pages_b);
    }
    diff_scratch_free(&scratch);
    return result;
}

static void assert_case(const struct diff_row *row, enum diff_case expected)
{
    if (row->diff_case != expected)
        fail_msg("row %u: case %s, wanted %s", row->row, diff_case_name(row->diff_case),
                 diff_case_name(expected));
}

/* ---- one pair per case ---- */

static void test_identical(void **state)
{
    (void)state;
    struct capture_record a = make_record(2, 16, 4);
    add_engine_indices(&a);
    struct capture_record b = copy_record(&a);
    struct diff_row row = compare_row(&a, &b, 1, 4);
    assert_case(&row, DIFF_CASE_IDENTICAL);
    assert_true(row.scores_identical);
    assert_true(row.engine_compared);
    assert_false(row.engine_set_changed);
    assert_int_equal(row.differing_elements, 0);
    assert_int_equal(diff_case_attribution(row.diff_case), DIFF_ATTRIBUTION_NONE);
    capture_record_free(&a);
    capture_record_free(&b);
}

static void test_perturbed_below_gap(void **state)
{
    (void)state;
    struct capture_record a = make_record(1, 16, 4);
    struct capture_record b = copy_record(&a);
    /* Top 4 are 15..12, gap 12 - 11 = 1. Element 3 rises by 0.25: far from crossing. */
    b.scores[3] = 3.25f;
    b.scores[14] = 14.0f + 0.125f;
    struct diff_row row = compare_row(&a, &b, 0, 4);
    assert_case(&row, DIFF_CASE_SCORES_DIFFER_SELECTION_SAME);
    assert_false(row.scores_identical);
    assert_int_equal(row.differing_elements, 2);
    assert_true(row.max_abs_diff == 0.25);
    assert_true(row.boundary_gap == 1.0);
    assert_int_equal(row.tie_set, 1);
    /* 14 is above the boundary and rose: it cannot fall out; only 3's rise counts. */
    assert_true(row.crossing_perturbation == 0.25);
    assert_false(row.perturbation_exceeds_gap);
    assert_false(row.reference_set_changed);
    assert_false(row.reference_order_changed);
    assert_false(row.engine_compared);
    /* ULPs in the total order: 3.0 -> 3.25 is 0x40500000 - 0x40400000 steps. */
    assert_int_equal(row.max_ulp_diff, 0x40500000u - 0x40400000u);
    assert_int_equal(diff_case_attribution(row.diff_case), DIFF_ATTRIBUTION_NONE);
    capture_record_free(&a);
    capture_record_free(&b);
}

static void test_perturbed_above_gap(void **state)
{
    (void)state;
    struct capture_record a = make_record(1, 16, 4);
    add_engine_indices(&a);
    struct capture_record b = copy_record(&a);
    b.scores[0] = 100.0f; /* enters the top 4, pushes 12 out */
    b.engine_indices[0] = 0;
    b.engine_indices[1] = 15;
    b.engine_indices[2] = 14;
    b.engine_indices[3] = 13;
    struct diff_row row = compare_row(&a, &b, 0, 4);
    assert_case(&row, DIFF_CASE_SCORES_DIFFER_SELECTION_CHANGED);
    assert_true(row.perturbation_exceeds_gap);
    assert_true(row.reference_set_changed);
    assert_true(row.engine_set_changed);
    assert_int_equal(diff_case_attribution(row.diff_case), DIFF_ATTRIBUTION_UPSTREAM);

    /* The same pair without engine indices: still upstream, by the exact selection alone. */
    free(a.engine_indices);
    free(b.engine_indices);
    a.engine_indices = b.engine_indices = NULL;
    row = compare_row(&a, &b, 0, 4);
    assert_case(&row, DIFF_CASE_SCORES_DIFFER_SELECTION_CHANGED);

    /* Two elements meeting exactly at the same value count as able to cross (index order). */
    struct capture_record c = copy_record(&a);
    c.scores[12] = 11.5f;
    c.scores[11] = 11.5f;
    row = compare_row(&a, &c, 0, 4);
    assert_true(row.crossing_perturbation == 1.0);
    assert_true(row.perturbation_exceeds_gap);
    assert_true(row.reference_set_changed); /* index 11 now wins the tie with 12 */
    capture_record_free(&a);
    capture_record_free(&b);
    capture_record_free(&c);
}

static void test_engine_differs_on_identical_scores(void **state)
{
    (void)state;
    struct capture_record a = make_record(4, 16, 4);
    /* Row 3 ties its 4th and 5th candidates (indices 12 and 11): two valid top-4 sets. */
    a.scores[3 * 16 + 11] = a.scores[3 * 16 + 12];
    add_engine_indices(&a);
    struct capture_record b = copy_record(&a);
    b.engine_indices[1 * 4 + 3] = 2; /* row 1: another set, not a top-4 */
    b.engine_indices[2 * 4 + 0] = a.engine_indices[2 * 4 + 1]; /* row 2: order only */
    b.engine_indices[2 * 4 + 1] = a.engine_indices[2 * 4 + 0];
    b.engine_indices[3 * 4 + 3] = 11; /* row 3: the other tie */
    struct diff_row row = compare_row(&a, &b, 1, 4);
    assert_case(&row, DIFF_CASE_ENGINE_WRONG);
    assert_true(row.scores_identical);
    assert_true(row.engine_set_changed);
    assert_int_equal(row.engine_a.row_class, ENGINE_ROW_EXACT);
    assert_int_equal(row.engine_b.row_class, ENGINE_ROW_WRONG);
    assert_true(row.engine_b.kinds & (1u << CHECK_WRONG_SET));
    assert_int_equal(row.engine_b.missing_count, 1);
    assert_int_equal(row.engine_b.missing[0], 12);
    assert_int_equal(diff_case_attribution(row.diff_case), DIFF_ATTRIBUTION_ENGINE_WRONG);
    row = compare_row(&a, &b, 2, 4);
    assert_case(&row, DIFF_CASE_ENGINE_REORDERED);
    assert_false(row.engine_set_changed);
    assert_true(row.engine_order_changed);
    assert_int_equal(diff_case_attribution(row.diff_case), DIFF_ATTRIBUTION_SELECTION_KERNEL);
    row = compare_row(&a, &b, 3, 4);
    assert_case(&row, DIFF_CASE_TIE_FLAP);
    /* The reference takes the smaller index: B's choice is the exact one, A's a variant. */
    assert_int_equal(row.engine_a.row_class, ENGINE_ROW_TIE_VARIANT);
    assert_int_equal(row.engine_b.row_class, ENGINE_ROW_EXACT);
    assert_int_equal(diff_case_attribution(row.diff_case), DIFF_ATTRIBUTION_TIE_FLAP);
    row = compare_row(&a, &b, 0, 4);
    assert_case(&row, DIFF_CASE_IDENTICAL);
    capture_record_free(&a);
    capture_record_free(&b);
}

static void test_engine_wrong_on_either_side(void **state)
{
    (void)state;
    struct capture_record a = make_record(1, 16, 4);
    add_engine_indices(&a);
    struct capture_record b = copy_record(&a);
    /* Scores perturbed below the gap, and B's engine took a candidate far below its k-th. */
    b.scores[2] = 2.5f;
    b.engine_indices[3] = 2;
    struct diff_row row = compare_row(&a, &b, 0, 4);
    assert_case(&row, DIFF_CASE_ENGINE_WRONG);
    assert_false(row.reference_set_changed);
    assert_int_equal(row.engine_b.row_class, ENGINE_ROW_WRONG);
    assert_int_equal(diff_case_attribution(row.diff_case), DIFF_ATTRIBUTION_ENGINE_WRONG);
    capture_record_free(&b);

    /* The exact set moved (index 0 rose to the top) but B's engine kept A's set: B misses 0. */
    b = copy_record(&a);
    b.scores[0] = 50.0f;
    row = compare_row(&a, &b, 0, 4);
    assert_case(&row, DIFF_CASE_ENGINE_WRONG);
    assert_true(row.reference_set_changed);
    assert_false(row.engine_set_changed);
    assert_int_equal(row.engine_a.row_class, ENGINE_ROW_EXACT);
    assert_int_equal(row.engine_b.missing_count, 1);
    assert_int_equal(row.engine_b.missing[0], 0);
    capture_record_free(&b);

    /* Both valid, the engine following the scores: upstream. */
    b = copy_record(&a);
    b.scores[0] = 50.0f;
    b.engine_indices[3] = 0;
    row = compare_row(&a, &b, 0, 4);
    assert_case(&row, DIFF_CASE_SCORES_DIFFER_SELECTION_CHANGED);
    assert_int_equal(row.engine_b.row_class, ENGINE_ROW_EXACT);
    capture_record_free(&a);
    capture_record_free(&b);
}

static void test_window_differs(void **state)
{
    (void)state;
    struct capture_record a = make_record(2, 16, 4);
    struct capture_record b = copy_record(&a);
    b.lengths[1] = 12;
    struct diff_row row = compare_row(&a, &b, 1, 4);
    assert_case(&row, DIFF_CASE_WINDOW_DIFFERS);
    assert_true(row.window_differs);
    assert_int_equal(row.differing_elements, 4);
    assert_int_equal(diff_case_attribution(row.diff_case), DIFF_ATTRIBUTION_CAPTURE_MISMATCH);
    /* Row starts count as the window too. */
    capture_record_free(&b);
    b = copy_record(&a);
    b.row_starts = calloc(2, sizeof(int32_t));
    assert_non_null(b.row_starts);
    b.row_starts[0] = 1;
    b.lengths[0] = 15;
    struct capture_record c = copy_record(&a);
    c.lengths[0] = 15;
    row = compare_row(&c, &b, 0, 4);
    assert_case(&row, DIFF_CASE_WINDOW_DIFFERS);
    capture_record_free(&a);
    capture_record_free(&b);
    capture_record_free(&c);
}

/* ---- the crossing rule at the edges ---- */

static void test_boundary_tie(void **state)
{
    (void)state;
    /* Values 0..15 but 12 and 11 tied at 11.0: the boundary (4th) ties with the 5th. */
    struct capture_record a = make_record(1, 16, 4);
    a.scores[12] = 11.0f;
    struct capture_record b = copy_record(&a);
    b.scores[11] = nextafterf(11.0f, 0.0f); /* one ulp down: the tie now goes to index 12 */
    struct diff_row row = compare_row(&a, &b, 0, 4);
    assert_true(row.boundary_gap == 0.0);
    assert_int_equal(row.tie_set, 2);
    assert_true(row.perturbation_exceeds_gap);
    assert_true(row.reference_set_changed);
    assert_int_equal(row.max_ulp_diff, 1);
    capture_record_free(&b);

    /* A perturbation of an element well above the tie does not touch the boundary. */
    b = copy_record(&a);
    b.scores[15] = 15.5f;
    row = compare_row(&a, &b, 0, 4);
    assert_false(row.perturbation_exceeds_gap);
    assert_case(&row, DIFF_CASE_SCORES_DIFFER_SELECTION_SAME);
    capture_record_free(&a);
    capture_record_free(&b);
}

static void test_short_rows_and_nonfinite(void **state)
{
    (void)state;
    /* 3 candidates, k 4: everything is selected; a value change cannot move the set ... */
    struct capture_record a = make_record(1, 3, 4);
    struct capture_record b = copy_record(&a);
    b.scores[1] = 40.0f;
    struct diff_row row = compare_row(&a, &b, 0, 4);
    assert_true(row.short_row);
    assert_false(row.perturbation_exceeds_gap);
    assert_false(row.reference_set_changed);
    assert_true(row.reference_order_changed);
    assert_case(&row, DIFF_CASE_SCORES_DIFFER_SELECTION_SAME);
    capture_record_free(&b);
    /* ... but an element becoming exact -inf leaves the candidates. */
    b = copy_record(&a);
    b.scores[0] = -INFINITY;
    row = compare_row(&a, &b, 0, 4);
    assert_true(row.perturbation_exceeds_gap);
    assert_true(row.reference_set_changed);
    assert_true(row.nonfinite_changed);
    assert_true(isinf(row.max_abs_diff));
    assert_case(&row, DIFF_CASE_SCORES_DIFFER_SELECTION_CHANGED);
    capture_record_free(&a);
    capture_record_free(&b);

    /* NaN appearing below the boundary: NaN ranks above everything, so it can cross. */
    a = make_record(1, 16, 4);
    b = copy_record(&a);
    b.scores[0] = NAN;
    row = compare_row(&a, &b, 0, 4);
    assert_true(row.nonfinite_changed);
    assert_true(row.perturbation_exceeds_gap);
    assert_true(row.reference_set_changed);
    capture_record_free(&a);
    capture_record_free(&b);

    /* k NaNs at the top: the gap below a NaN boundary is not a number; any move counts. */
    a = make_record(1, 6, 2);
    a.scores[0] = NAN;
    a.scores[1] = NAN;
    b = copy_record(&a);
    b.scores[0] = -1.0f;
    row = compare_row(&a, &b, 0, 2);
    assert_true(isnan(row.boundary_gap));
    assert_true(row.perturbation_exceeds_gap);
    assert_true(row.reference_set_changed);
    capture_record_free(&a);
    capture_record_free(&b);
}

/* ---- page tables ---- */

static void add_page_table(struct capture_record *record, uint32_t page_size, int32_t first_page)
{
    uint64_t pages = ((uint64_t)record->row_stride + page_size - 1) / page_size;
    record->page_size = page_size;
    record->page_table_cols = pages;
    record->page_table = malloc((size_t)record->rows * pages * sizeof(int32_t));
    assert_non_null(record->page_table);
    for (uint32_t b = 0; b < record->rows; b++)
        for (uint64_t p = 0; p < pages; p++) /* pages placed in reverse, from first_page */
            record->page_table[b * pages + p] = first_page + (int32_t)(pages - 1 - p);
}

/* Engine indices of the exact top-k translated through the record's page table. */
static void add_translated_engine_indices(struct capture_record *record)
{
    add_engine_indices(record);
    for (uint32_t b = 0; b < record->rows; b++)
        for (uint32_t j = 0; j < record->k; j++) {
            int32_t *index = &record->engine_indices[(size_t)b * record->k + j];
            *index = topk_translate_index(record, b, *index);
        }
}

static void test_page_placement_is_not_a_selection_change(void **state)
{
    (void)state;
    struct capture_record a = make_record(1, 16, 4);
    struct capture_record b = copy_record(&a);
    add_page_table(&a, 4, 10);
    add_page_table(&b, 4, 70); /* the KV cache placed the pages elsewhere in run B */
    add_translated_engine_indices(&a);
    add_translated_engine_indices(&b);
    assert_true(a.engine_indices[0] != b.engine_indices[0]);
    struct audit_error err = { 0 };
    assert_int_equal(capture_record_validate(&a, &err), AUDIT_OK);
    assert_int_equal(capture_record_validate(&b, &err), AUDIT_OK);
    struct diff_row row = compare_row(&a, &b, 0, 4);
    assert_true(row.page_table_differs);
    assert_true(row.engine_compared);
    assert_false(row.engine_set_changed);
    assert_false(row.engine_order_changed);
    assert_case(&row, DIFF_CASE_IDENTICAL);

    /* A real change of the selection is still seen through the different placement, and
     * judged there: window position 0 ranks last, so B's engine misses position 12. */
    b.engine_indices[3] = topk_translate_index(&b, 0, 0);
    row = compare_row(&a, &b, 0, 4);
    assert_true(row.engine_set_changed);
    assert_case(&row, DIFF_CASE_ENGINE_WRONG);
    assert_int_equal(row.engine_b.missing_count, 1);
    assert_int_equal(row.engine_b.missing[0], 12);
    /* An index no page of the window explains differs from everything, and is out of range. */
    b.engine_indices[3] = 5000;
    row = compare_row(&a, &b, 0, 4);
    assert_true(row.engine_set_changed);
    assert_true(row.engine_b.kinds & (1u << CHECK_OUT_OF_RANGE));
    capture_record_free(&a);
    capture_record_free(&b);
}

/* ---- the crossing rule never misses a set change ---- */

static uint64_t rng_state;

static uint32_t next_random(void)
{
    rng_state ^= rng_state << 13;
    rng_state ^= rng_state >> 7;
    rng_state ^= rng_state << 17;
    return (uint32_t)(rng_state >> 16);
}

static void test_crossing_rule_is_sound(void **state)
{
    (void)state;
    uint64_t seed = (uint64_t)time(NULL);
    const char *fixed = getenv("DSATOPK_TEST_SEED");
    if (fixed)
        seed = strtoull(fixed, NULL, 10);
    printf("# crossing rule: seed %" PRIu64 " (replay with DSATOPK_TEST_SEED=%" PRIu64 ")\n", seed,
           seed);
    rng_state = seed * 2654435761u + 1;
    uint32_t changed = 0, flagged = 0;
    for (int trial = 0; trial < 3000; trial++) {
        uint32_t length = 1 + next_random() % 40, k = 1 + next_random() % 12;
        struct capture_record a = make_record(1, length, k);
        /* Coarse values so that ties are frequent. */
        for (uint32_t i = 0; i < length; i++)
            a.scores[i] = (float)(next_random() % 8) * 0.5f;
        struct capture_record b = copy_record(&a);
        uint32_t touched = 1 + next_random() % 4;
        for (uint32_t t = 0; t < touched; t++) {
            uint32_t i = next_random() % length;
            float scale = (next_random() % 2) ? 0.01f : 1.0f;
            b.scores[i] += scale * ((float)(next_random() % 200) - 100.0f) / 100.0f;
        }
        struct diff_row row = compare_row(&a, &b, 0, k);
        changed += row.reference_set_changed;
        flagged += row.perturbation_exceeds_gap;
        if (row.reference_set_changed && !row.perturbation_exceeds_gap)
            fail_msg("trial %d (seed %" PRIu64 "): the set changed but the perturbation %g was "
                     "judged unable to cross the gap %g", trial, seed,
                     row.crossing_perturbation, row.boundary_gap);
        capture_record_free(&a);
        capture_record_free(&b);
    }
    /* The trials exercise both sides of the rule. */
    assert_true(changed > 100);
    assert_true(flagged > changed);
}

/* ---- record shapes ---- */

static void test_record_shape_compare(void **state)
{
    (void)state;
    struct capture_record a = make_record(4, 16, 4);
    struct capture_record b = make_record(3, 16, 4);
    struct diff_record_shape shape;
    assert_true(diff_record_shape_compare(&a, &b, &shape));
    assert_true(shape.rows_differ);
    assert_int_equal(shape.common_rows, 3);
    capture_record_free(&b);
    b = make_record(4, 16, 8);
    assert_true(diff_record_shape_compare(&a, &b, &shape));
    assert_true(shape.k_differs);
    capture_record_free(&b);
    b = make_record(4, 16, 4);
    add_page_table(&b, 4, 0);
    assert_true(diff_record_shape_compare(&a, &b, &shape));
    assert_true(shape.page_table_layout_differs);
    capture_record_free(&b);
    b = make_record(4, 16, 4);
    add_engine_indices(&b);
    assert_false(diff_record_shape_compare(&a, &b, &shape));
    assert_true(shape.engine_presence_differs);
    capture_record_free(&a);
    capture_record_free(&b);
}

static void test_record_compare_and_document(void **state)
{
    (void)state;
    struct capture_record a = make_record(4, 16, 4);
    struct capture_record b = make_record(3, 16, 4);
    b.index = a.index = 2;
    b.scores[1 * 16 + 0] = 5000.0f; /* row 1 enters its top 4: upstream */
    b.scores[2 * 16 + 0] = 0.5f;     /* row 2 below its gap: absorbed */
    struct diff_scratch scratch = { 0 };
    struct diff_record_result result;
    struct audit_error err = { 0 };
    assert_int_equal(diff_record_compare(&a, &b, 0, NULL, a.index, &scratch, &result, &err),
                     AUDIT_OK);
    assert_true(result.mismatch);
    assert_int_equal(result.mismatch_count, 1);
    assert_string_equal(result.mismatches[0],
                        "record 2: rows differ (A 4, B 3): compared the first 3");
    assert_int_equal(result.k, 4);
    assert_int_equal(result.row_count, 2);
    assert_int_equal(result.rows[0].row, 1);
    assert_int_equal(result.rows[0].diff_case, DIFF_CASE_SCORES_DIFFER_SELECTION_CHANGED);
    assert_int_equal(result.rows[1].row, 2);
    assert_int_equal(result.rows[1].diff_case, DIFF_CASE_SCORES_DIFFER_SELECTION_SAME);
    assert_int_equal(result.cases[DIFF_CASE_IDENTICAL], 1);
    assert_int_equal(result.attribution[DIFF_ATTRIBUTION_UPSTREAM], 1);
    assert_int_equal(result.reference_changed_rows, 1);
    assert_false(result.scores_identical);

    struct diff_totals totals = { 0 };
    diff_totals_add(&totals, &result);
    diff_totals_add(&totals, &result);
    assert_true(totals.mismatch);
    assert_int_equal(totals.records, 2);
    assert_int_equal(totals.rows, 6);
    assert_int_equal(totals.differing_rows, 4);
    assert_int_equal(totals.records_scores_differ, 2);
    assert_int_equal(totals.records_reference_selection_changed, 2);

    struct document_context context;
    document_context_fill(&context, "v", "diff a b");
    cJSON *document = diff_json_begin(&context, "a.bin", "b.bin", 0);
    cJSON *records = cJSON_CreateArray();
    assert_non_null(document);
    assert_int_equal(diff_json_add_record(records, &result), AUDIT_OK);
    assert_int_equal(diff_json_finish(document, &totals, records), AUDIT_OK);
    const cJSON *record = cJSON_GetArrayItem(cJSON_GetObjectItem(document, "records"), 0);
    assert_int_equal(cJSON_GetNumberValue(cJSON_GetObjectItem(record, "rows_differing")), 2);
    assert_int_equal(cJSON_GetArraySize(cJSON_GetObjectItem(record, "differing_rows")), 2);
    assert_string_equal(cJSON_GetArrayItem(cJSON_GetObjectItem(record, "mismatches"), 0)
                            ->valuestring, result.mismatches[0]);
    const cJSON *summary = cJSON_GetObjectItem(document, "summary");
    assert_int_equal(cJSON_GetNumberValue(cJSON_GetObjectItem(summary, "rows_differing")), 4);
    assert_true(cJSON_IsTrue(cJSON_GetObjectItem(summary, "mismatch")));
    assert_int_equal(cJSON_GetNumberValue(cJSON_GetObjectItem(document, "schema_version")), 3);
    assert_true(cJSON_IsNull(cJSON_GetObjectItem(document, "k_override")));
    cJSON_Delete(document);
    diff_record_result_release(&result);
    diff_scratch_free(&scratch);
    capture_record_free(&a);
    capture_record_free(&b);
}

/* ---- lists and extraction ---- */

static void test_parse_list(void **state)
{
    (void)state;
    uint32_t *values = NULL;
    size_t count = 0;
    struct audit_error err = { 0 };
    assert_int_equal(selection_parse_list("7,0,3-5,3", "--rows", &values, &count, &err), AUDIT_OK);
    assert_int_equal(count, 5);
    const uint32_t expected[] = { 0, 3, 4, 5, 7 };
    assert_memory_equal(values, expected, sizeof(expected));
    free(values);
    assert_int_equal(selection_parse_list("4294967295", "--rows", &values, &count, &err),
                     AUDIT_OK);
    assert_int_equal(values[0], UINT32_MAX);
    free(values);
    static const char *const bad[] = { "", "a", "3-1", "1,", "1,,2", "4294967296", "-1", "2-",
                                       " 1", "1;2" };
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        int status = selection_parse_list(bad[i], "--records", &values, &count, &err);
        if (status != AUDIT_EUSAGE)
            fail_msg("'%s' parsed (status %d)", bad[i], status);
        assert_message_contains(err, "--records");
        assert_null(values);
    }
    assert_int_equal(selection_parse_list("0-4294967295", "--rows", &values, &count, &err),
                     AUDIT_EUSAGE);
    assert_message_contains(err, "more than");
}

static void test_extract_rows(void **state)
{
    (void)state;
    struct capture_record source = make_record(4, 8, 2);
    source.index = 3;
    source.row_starts = malloc(4 * sizeof(int32_t));
    source.page_table_row_starts = malloc(4 * sizeof(int32_t));
    assert_non_null(source.row_starts);
    assert_non_null(source.page_table_row_starts);
    add_page_table(&source, 2, 100);
    for (uint32_t b = 0; b < 4; b++) {
        source.row_starts[b] = (int32_t)b % 2;
        source.lengths[b] = 6 - (int32_t)b;
        source.page_table_row_starts[b] = 0;
    }
    add_translated_engine_indices(&source);
    free(source.metadata_json);
    source.metadata_json = malloc(32);
    assert_non_null(source.metadata_json);
    strcpy(source.metadata_json, "{\"layer\":7}");
    struct audit_error err = { 0 };
    assert_int_equal(capture_record_validate(&source, &err), AUDIT_OK);

    const uint32_t rows[] = { 2, 0 };
    struct capture_record extracted;
    assert_int_equal(selection_extract_rows(&source, rows, 2, &extracted, &err), AUDIT_OK);
    assert_int_equal(extracted.rows, 2);
    assert_int_equal(extracted.k, 2);
    assert_int_equal(extracted.row_stride, 8);
    assert_int_equal(extracted.page_size, 2);
    assert_int_equal(extracted.page_table_cols, source.page_table_cols);
    for (uint32_t i = 0; i < 2; i++) {
        uint32_t from = rows[i];
        assert_memory_equal(extracted.scores + i * 8, source.scores + from * 8, 8 * sizeof(float));
        assert_int_equal(extracted.lengths[i], source.lengths[from]);
        assert_int_equal(extracted.row_starts[i], source.row_starts[from]);
        assert_memory_equal(extracted.page_table + i * source.page_table_cols,
                            source.page_table + from * source.page_table_cols,
                            source.page_table_cols * sizeof(int32_t));
        assert_int_equal(extracted.page_table_row_starts[i], source.page_table_row_starts[from]);
        assert_memory_equal(extracted.engine_indices + i * 2, source.engine_indices + from * 2,
                            2 * sizeof(int32_t));
    }
    assert_string_equal(extracted.metadata_json, "{\"layer\":7}");
    assert_int_equal(capture_record_validate(&extracted, &err), AUDIT_OK);
    capture_record_free(&extracted);

    const uint32_t outside[] = { 1, 4 };
    assert_int_equal(selection_extract_rows(&source, outside, 2, &extracted, &err), AUDIT_EUSAGE);
    assert_message_contains(err, "row 4");
    assert_message_contains(err, "record 3");
    assert_int_equal(selection_extract_rows(&source, rows, 0, &extracted, &err), AUDIT_EUSAGE);
    capture_record_free(&source);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_identical),
        cmocka_unit_test(test_perturbed_below_gap),
        cmocka_unit_test(test_perturbed_above_gap),
        cmocka_unit_test(test_engine_differs_on_identical_scores),
        cmocka_unit_test(test_engine_wrong_on_either_side),
        cmocka_unit_test(test_window_differs),
        cmocka_unit_test(test_boundary_tie),
        cmocka_unit_test(test_short_rows_and_nonfinite),
        cmocka_unit_test(test_page_placement_is_not_a_selection_change),
        cmocka_unit_test(test_crossing_rule_is_sound),
        cmocka_unit_test(test_record_shape_compare),
        cmocka_unit_test(test_record_compare_and_document),
        cmocka_unit_test(test_parse_list),
        cmocka_unit_test(test_extract_rows),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
