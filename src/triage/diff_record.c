#include "diff_record.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The record-level mismatches, in the order the table and the document list them. */
static void describe_mismatches(const struct capture_record *a, const struct capture_record *b,
                                struct diff_record_result *result)
{
    const struct diff_record_shape *shape = &result->shape;
    if (shape->rows_differ)
        snprintf(result->mismatches[result->mismatch_count++], DIFF_MESSAGE_BYTES,
                 "record %" PRIu32 ": rows differ (A %" PRIu32 ", B %" PRIu32
                 "): compared the first %" PRIu32, a->index, a->rows, b->rows,
                 shape->common_rows);
    if (shape->k_differs)
        snprintf(result->mismatches[result->mismatch_count++], DIFF_MESSAGE_BYTES,
                 "record %" PRIu32 ": k differs (A %" PRIu32 ", B %" PRIu32 "): exact "
                 "selections compared at k %" PRIu32 ", engine outputs not compared",
                 a->index, a->k, b->k, result->k);
    if (shape->page_table_layout_differs)
        snprintf(result->mismatches[result->mismatch_count++], DIFF_MESSAGE_BYTES,
                 "record %" PRIu32 ": page-table layout differs (A %s page size %" PRIu32
                 ", B %s page size %" PRIu32 ")", a->index, a->page_table ? "has" : "lacks",
                 a->page_size, b->page_table ? "has" : "lacks", b->page_size);
}

static int keep_row(struct diff_record_result *result, const struct diff_row *row,
                    struct audit_error *err)
{
    if (result->row_count == result->row_capacity) {
        size_t capacity = result->row_capacity ? 2 * result->row_capacity : 64;
        struct diff_row *grown = realloc(result->rows, capacity * sizeof(*grown));
        if (!grown)
            return audit_fail(err, AUDIT_ENOMEM, "out of memory listing differing rows");
        result->rows = grown;
        result->row_capacity = capacity;
    }
    result->rows[result->row_count++] = *row;
    return AUDIT_OK;
}

int diff_record_compare(const struct capture_record *a, const struct capture_record *b,
                        uint32_t k_override, struct diff_scratch *scratch,
                        struct diff_record_result *result, struct audit_error *err)
{
    memset(result, 0, sizeof(*result));
    result->index = a->index;
    result->rows_a = a->rows;
    result->rows_b = b->rows;
    result->k = k_override ? k_override : a->k;
    result->record_k_a = a->k;
    result->record_k_b = b->k;
    memcpy(result->payload_sha256_a, a->payload_sha256, sizeof(result->payload_sha256_a));
    memcpy(result->payload_sha256_b, b->payload_sha256, sizeof(result->payload_sha256_b));
    result->mismatch = diff_record_shape_compare(a, b, &result->shape);
    result->a_has_engine_indices = a->engine_indices != NULL;
    describe_mismatches(a, b, result);
    result->scores_identical = true;
    for (uint32_t row = 0; row < result->shape.common_rows; row++) {
        struct diff_row compared;
        int status = diff_row_compare(a, b, row, result->k, scratch, &compared, err);
        if (status < 0)
            return status;
        result->cases[compared.diff_case]++;
        result->attribution[diff_case_attribution(compared.diff_case)]++;
        result->engine_compared |= compared.engine_compared;
        result->scores_identical &= compared.scores_identical;
        result->engine_differs_on_same |=
            compared.diff_case == DIFF_CASE_SCORES_SAME_ENGINE_DIFFERS;
        result->reference_changed_rows += compared.reference_set_changed;
        result->page_table_rows += compared.page_table_differs;
        if (compared.diff_case != DIFF_CASE_IDENTICAL &&
            (status = keep_row(result, &compared, err)) < 0)
            return status;
    }
    return AUDIT_OK;
}

void diff_record_result_release(struct diff_record_result *result)
{
    free(result->rows);
    memset(result, 0, sizeof(*result));
}

void diff_totals_add(struct diff_totals *totals, const struct diff_record_result *result)
{
    totals->mismatch |= result->mismatch;
    totals->records++;
    totals->rows += result->shape.common_rows;
    totals->differing_rows += result->row_count;
    for (unsigned c = 0; c < DIFF_CASE_COUNT; c++)
        totals->cases[c] += result->cases[c];
    for (unsigned t = 0; t < DIFF_ATTRIBUTION_COUNT; t++)
        totals->attribution[t] += result->attribution[t];
    totals->records_scores_identical += result->scores_identical;
    totals->records_scores_differ += !result->scores_identical;
    /* Per call: every score identical and yet another engine selection. */
    totals->records_scores_same_engine_differs +=
        result->scores_identical && result->engine_differs_on_same;
    totals->records_reference_selection_changed += result->reference_changed_rows > 0;
    totals->records_engine_compared += result->engine_compared;
    totals->page_table_rows_differ += result->page_table_rows;
}
