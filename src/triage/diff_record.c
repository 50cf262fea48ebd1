#include "diff_record.h"

#include <cjson/cJSON.h>

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "triage_keys.h"

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

/* The engine judgement of a record pair: checks of each record at its own k and each side's
 * contract. Returns 0 (judge->a set: ready), or an error; nothing to judge leaves judge->a NULL. */
struct pair_judge {
    struct diff_engine_judge judge;
    struct check_context checks_a, checks_b;
    bool ready_a, ready_b;
    struct topk_page_inverse pages_a, pages_b;
};

static void pair_judge_release(struct pair_judge *pair)
{
    if (pair->ready_a)
        checks_release(&pair->checks_a);
    if (pair->ready_b)
        checks_release(&pair->checks_b);
    free(pair->judge.scratch_a.seen);
    free(pair->judge.scratch_b.seen);
    free(pair->judge.scratch_a.positions);
    free(pair->judge.scratch_b.positions);
    topk_page_inverse_free(&pair->pages_a);
    topk_page_inverse_free(&pair->pages_b);
}

static int side_prepare(const struct capture_record *record, const char *side,
                        struct check_context *checks, bool *ready,
                        struct engine_contract *contract, struct engine_row_scratch *scratch,
                        struct topk_page_inverse *pages, struct audit_error *err)
{
    int status = engine_contract_for_record(record, NULL, contract, err);
    if (status == AUDIT_OK && (status = checks_prepare(checks, record, record->k, err)) == 0)
        *ready = true;
    if (status < 0) {
        audit_error_prefix(err, "%s", side);
        return status;
    }
    scratch->seen = calloc(checks->seen_bytes, 1);
    scratch->positions = malloc((size_t)record->k * sizeof(int64_t));
    scratch->pages = pages;
    if (!scratch->seen || !scratch->positions)
        return audit_fail(err, AUDIT_ENOMEM, "%s record %u: out of memory judging the engine's "
                          "selection", side, record->index);
    return AUDIT_OK;
}

static int pair_judge_prepare(const struct capture_record *a, const struct capture_record *b,
                              struct pair_judge *pair, struct audit_error *err)
{
    memset(pair, 0, sizeof(*pair));
    if (!a->engine_indices || !b->engine_indices || a->k != b->k)
        return AUDIT_OK;
    int status = side_prepare(a, DIFF_SIDE_A, &pair->checks_a, &pair->ready_a,
                              &pair->judge.contract_a, &pair->judge.scratch_a, &pair->pages_a, err);
    if (status == AUDIT_OK)
        status = side_prepare(b, DIFF_SIDE_B, &pair->checks_b, &pair->ready_b,
                              &pair->judge.contract_b, &pair->judge.scratch_b, &pair->pages_b, err);
    if (status < 0)
        return status;
    pair->judge.a = &pair->checks_a;
    pair->judge.b = &pair->checks_b;
    return AUDIT_OK;
}

int diff_record_compare(const struct capture_record *a, const struct capture_record *b,
                        uint32_t k_override, const uint32_t *row_numbers, uint32_t index,
                        struct diff_scratch *scratch, struct diff_record_result *result,
                        struct audit_error *err)
{
    struct pair_judge pair;
    memset(result, 0, sizeof(*result));
    result->index = index;
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
    int status = pair_judge_prepare(a, b, &pair, err);
    for (uint32_t row = 0; status == AUDIT_OK && row < result->shape.common_rows; row++) {
        struct diff_row compared;
        status = diff_row_compare(a, b, row, result->k, scratch,
                                  pair.judge.a ? &pair.judge : NULL, &compared, err);
        if (status < 0)
            break;
        if (row_numbers)
            compared.row = row_numbers[row];
        result->cases[compared.diff_case]++;
        result->attribution[diff_case_attribution(compared.diff_case)]++;
        result->engine_compared |= compared.engine_compared;
        result->scores_identical &= compared.scores_identical;
        result->engine_differs_on_same |=
            compared.scores_identical && compared.engine_compared && compared.engine_order_changed;
        result->reference_changed_rows += compared.reference_set_changed;
        result->page_table_rows += compared.page_table_differs;
        if (compared.engine_judged) {
            result->engine_wrong_rows_a += compared.engine_a.row_class == ENGINE_ROW_WRONG;
            result->engine_wrong_rows_b += compared.engine_b.row_class == ENGINE_ROW_WRONG;
        }
        if (compared.diff_case != DIFF_CASE_IDENTICAL)
            status = keep_row(result, &compared, err);
    }
    pair_judge_release(&pair);
    return status;
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
    totals->records_tie_flap += result->cases[DIFF_CASE_TIE_FLAP] > 0;
    totals->records_engine_wrong += result->cases[DIFF_CASE_ENGINE_WRONG] > 0;
    totals->page_table_rows_differ += result->page_table_rows;
}

/* ---- a reproducer and its original ---- */

void diff_provenance_release(struct diff_provenance *provenance)
{
    free(provenance->rows);
    memset(provenance, 0, sizeof(*provenance));
}

static bool hex_to_bytes(const char *hex, uint8_t *bytes, size_t size)
{
    if (!hex || strlen(hex) != 2 * size)
        return false;
    for (size_t i = 0; i < size; i++) {
        unsigned value;
        if (sscanf(hex + 2 * i, "%2x", &value) != 1)
            return false;
        bytes[i] = (uint8_t)value;
    }
    return true;
}

int diff_provenance_read(const struct capture_record *record, struct diff_provenance *provenance,
                         struct audit_error *err)
{
    int status = AUDIT_OK;
    memset(provenance, 0, sizeof(*provenance));
    cJSON *metadata = record->metadata_json ? cJSON_Parse(record->metadata_json) : NULL;
    const cJSON *from = cJSON_GetObjectItemCaseSensitive(metadata, KEY_EXTRACTED_FROM);
    if (!from)
        goto done;
    const cJSON *source = cJSON_GetObjectItemCaseSensitive(from, KEY_RECORD);
    const cJSON *rows = cJSON_GetObjectItemCaseSensitive(from, KEY_ROWS);
    const char *payload =
        cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(from, KEY_PAYLOAD_SHA256));
    if (!cJSON_IsNumber(source) || source->valuedouble < 0 || source->valuedouble > UINT32_MAX ||
        !cJSON_IsArray(rows) || cJSON_GetArraySize(rows) != (int)record->rows) {
        status = audit_fail(err, AUDIT_EDATA, "record %u: extracted_from is malformed (a record "
                            "number and one source row per row are expected)", record->index);
        goto done;
    }
    provenance->record = (uint32_t)source->valuedouble;
    provenance->rows = malloc((record->rows ? record->rows : 1) * sizeof(uint32_t));
    if (!provenance->rows) {
        status = audit_fail(err, AUDIT_ENOMEM, "out of memory reading extracted_from");
        goto done;
    }
    const cJSON *item;
    cJSON_ArrayForEach(item, rows) {
        if (!cJSON_IsNumber(item) || item->valuedouble < 0 || item->valuedouble > UINT32_MAX) {
            status = audit_fail(err, AUDIT_EDATA, "record %u: extracted_from.rows holds a value "
                                "that is not a row number", record->index);
            goto done;
        }
        provenance->rows[provenance->row_count++] = (uint32_t)item->valuedouble;
    }
    provenance->has_payload = hex_to_bytes(payload, provenance->payload_sha256,
                                           sizeof(provenance->payload_sha256));
    provenance->present = true;
done:
    cJSON_Delete(metadata);
    if (status < 0)
        diff_provenance_release(provenance);
    return status;
}
