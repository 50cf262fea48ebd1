#include "diff_json.h"

#include "json_util.h"

cJSON *diff_json_begin(const struct document_context *context, const char *path_a,
                       const char *path_b, uint32_t k_override)
{
    cJSON *document = document_begin(DIFF_SCHEMA, DIFF_SCHEMA_VERSION, context, NULL);
    if (!document)
        return NULL;
    cJSON *inputs = cJSON_AddObjectToObject(document, KEY_INPUTS);
    if (inputs) {
        cJSON_AddStringToObject(inputs, KEY_A, path_a);
        cJSON_AddStringToObject(inputs, KEY_B, path_b);
    }
    if (k_override)
        json_add_u64(document, KEY_K_OVERRIDE, k_override);
    else
        cJSON_AddNullToObject(document, KEY_K_OVERRIDE);
    /* Key order: context, pairing, mismatches, notes, input errors, summary, records. */
    cJSON *pairing = cJSON_AddObjectToObject(document, KEY_PAIRING);
    if (!inputs || !pairing || !cJSON_AddStringToObject(pairing, KEY_BY, TRIAGE_BY_POSITION) ||
        !cJSON_AddNullToObject(pairing, KEY_REPRODUCER) ||
        !cJSON_AddArrayToObject(document, KEY_MISMATCHES) ||
        !cJSON_AddArrayToObject(document, KEY_NOTES) ||
        !cJSON_AddArrayToObject(document, KEY_INPUT_ERRORS)) {
        cJSON_Delete(document);
        return NULL;
    }
    return document;
}

static int add_message(cJSON *list, const char *message)
{
    cJSON *item = cJSON_CreateString(message);
    if (!item || !cJSON_AddItemToArray(list, item)) {
        cJSON_Delete(item);
        return AUDIT_ENOMEM;
    }
    return AUDIT_OK;
}

int diff_json_add_mismatch(cJSON *document, const char *message)
{
    return add_message(cJSON_GetObjectItemCaseSensitive(document, KEY_MISMATCHES), message);
}

int diff_json_add_input_error(cJSON *document, const char *message)
{
    return add_message(cJSON_GetObjectItemCaseSensitive(document, KEY_INPUT_ERRORS), message);
}

int diff_json_add_note(cJSON *document, const char *message)
{
    return add_message(cJSON_GetObjectItemCaseSensitive(document, KEY_NOTES), message);
}

int diff_json_set_pairing(cJSON *document, const char *by, const char *reproducer)
{
    cJSON *pairing = cJSON_GetObjectItemCaseSensitive(document, KEY_PAIRING);
    cJSON *by_item = cJSON_CreateString(by);
    cJSON *side = reproducer ? cJSON_CreateString(reproducer) : cJSON_CreateNull();
    if (!pairing || !by_item || !side) {
        cJSON_Delete(by_item);
        cJSON_Delete(side);
        return AUDIT_ENOMEM;
    }
    cJSON_ReplaceItemInObjectCaseSensitive(pairing, KEY_BY, by_item);
    cJSON_ReplaceItemInObjectCaseSensitive(pairing, KEY_REPRODUCER, side);
    return AUDIT_OK;
}

/* One side's engine selection judged: its class, kinds and the candidates it left out. */
static cJSON *engine_side_json(const struct diff_engine_side *side)
{
    cJSON *json = cJSON_CreateObject();
    if (!json)
        return NULL;
    cJSON_AddStringToObject(json, KEY_CLASS, engine_row_class_name(side->row_class));
    cJSON *kinds = cJSON_AddArrayToObject(json, KEY_KINDS);
    for (unsigned kind = 0; kinds && kind < CHECK_KIND_COUNT; kind++)
        if (side->kinds & (1u << kind))
            cJSON_AddItemToArray(kinds,
                                 cJSON_CreateString(check_kind_name((enum check_kind)kind)));
    json_add_u64(json, KEY_MISSING_TOTAL, side->missing_count);
    cJSON *missing = cJSON_AddArrayToObject(json, KEY_MISSING);
    for (uint64_t i = 0; missing && i < side->missing_count && i < ENGINE_LISTED_INDICES; i++)
        cJSON_AddItemToArray(missing, cJSON_CreateNumber((double)side->missing[i]));
    return json;
}

static cJSON *row_json(const struct diff_row *row)
{
    cJSON *json = cJSON_CreateObject();
    if (!json)
        return NULL;
    json_add_u64(json, KEY_ROW, row->row);
    cJSON_AddStringToObject(json, KEY_CASE, diff_case_name(row->diff_case));
    cJSON_AddStringToObject(json, KEY_ATTRIBUTION,
                            diff_attribution_name(diff_case_attribution(row->diff_case)));
    cJSON_AddBoolToObject(json, KEY_WINDOW_DIFFERS, row->window_differs);
    cJSON_AddBoolToObject(json, KEY_SCORES_IDENTICAL, row->scores_identical);
    json_add_u64(json, KEY_DIFFERING_ELEMENTS, row->differing_elements);
    json_add_number(json, KEY_MAX_ABS_DIFF, row->max_abs_diff); /* null when non-finite */
    cJSON_AddBoolToObject(json, KEY_NONFINITE_CHANGED, row->nonfinite_changed);
    json_add_u64(json, KEY_MAX_ULP_DIFF, row->max_ulp_diff);
    bool have_census = !row->scores_identical && !row->window_differs;
    if (have_census && !row->short_row) {
        json_add_number(json, KEY_BOUNDARY_GAP, row->boundary_gap);
        cJSON_AddNumberToObject(json, KEY_TIE_SET, (double)row->tie_set);
    } else {
        cJSON_AddNullToObject(json, KEY_BOUNDARY_GAP);
        cJSON_AddNullToObject(json, KEY_TIE_SET);
    }
    cJSON_AddBoolToObject(json, KEY_SHORT_ROW, have_census && row->short_row);
    if (have_census)
        json_add_number(json, KEY_CROSSING_PERTURBATION, row->crossing_perturbation);
    else
        cJSON_AddNullToObject(json, KEY_CROSSING_PERTURBATION);
    cJSON_AddBoolToObject(json, KEY_PERTURBATION_EXCEEDS_GAP, row->perturbation_exceeds_gap);
    cJSON_AddBoolToObject(json, KEY_REFERENCE_SET_CHANGED, row->reference_set_changed);
    cJSON_AddBoolToObject(json, KEY_REFERENCE_ORDER_CHANGED, row->reference_order_changed);
    if (row->engine_compared) {
        cJSON_AddBoolToObject(json, KEY_ENGINE_SET_CHANGED, row->engine_set_changed);
        cJSON_AddBoolToObject(json, KEY_ENGINE_ORDER_CHANGED, row->engine_order_changed);
    } else {
        cJSON_AddNullToObject(json, KEY_ENGINE_SET_CHANGED);
        cJSON_AddNullToObject(json, KEY_ENGINE_ORDER_CHANGED);
    }
    if (row->engine_judged) {
        const bool wrong_a = row->engine_a.row_class == ENGINE_ROW_WRONG;
        const bool wrong_b = row->engine_b.row_class == ENGINE_ROW_WRONG;
        cJSON_AddItemToObject(json, KEY_ENGINE_A, engine_side_json(&row->engine_a));
        cJSON_AddItemToObject(json, KEY_ENGINE_B, engine_side_json(&row->engine_b));
        if (wrong_a || wrong_b)
            cJSON_AddStringToObject(json, KEY_ENGINE_WRONG_SIDE,
                                    wrong_a && wrong_b ? DIFF_SIDE_BOTH
                                    : wrong_a          ? DIFF_SIDE_A
                                                       : DIFF_SIDE_B);
        else
            cJSON_AddNullToObject(json, KEY_ENGINE_WRONG_SIDE);
    } else {
        cJSON_AddNullToObject(json, KEY_ENGINE_A);
        cJSON_AddNullToObject(json, KEY_ENGINE_B);
        cJSON_AddNullToObject(json, KEY_ENGINE_WRONG_SIDE);
    }
    cJSON_AddBoolToObject(json, KEY_PAGE_TABLE_DIFFERS, row->page_table_differs);
    return json;
}

static cJSON *case_counts_json(const uint64_t *counts)
{
    cJSON *json = cJSON_CreateObject();
    for (unsigned i = 0; json && i < DIFF_CASE_COUNT; i++)
        json_add_u64(json, diff_case_name((enum diff_case)i), counts[i]);
    return json;
}

static cJSON *attribution_counts_json(const uint64_t *counts)
{
    cJSON *json = cJSON_CreateObject();
    for (unsigned i = 0; json && i < DIFF_ATTRIBUTION_COUNT; i++)
        json_add_u64(json, diff_attribution_name((enum diff_attribution)i), counts[i]);
    return json;
}

int diff_json_add_record(cJSON *records, const struct diff_record_result *result)
{
    cJSON *json = cJSON_CreateObject();
    if (!json || !cJSON_AddItemToArray(records, json)) {
        cJSON_Delete(json);
        return AUDIT_ENOMEM;
    }
    json_add_u64(json, KEY_INDEX, result->index);
    json_add_u64(json, KEY_ROWS_A, result->rows_a);
    json_add_u64(json, KEY_ROWS_B, result->rows_b);
    json_add_u64(json, KEY_K, result->k);
    json_add_u64(json, KEY_RECORD_K_A, result->record_k_a);
    json_add_u64(json, KEY_RECORD_K_B, result->record_k_b);
    json_add_hex(json, KEY_PAYLOAD_SHA256_A, result->payload_sha256_a,
                 sizeof(result->payload_sha256_a));
    json_add_hex(json, KEY_PAYLOAD_SHA256_B, result->payload_sha256_b,
                 sizeof(result->payload_sha256_b));
    cJSON *mismatches = cJSON_AddArrayToObject(json, KEY_MISMATCHES);
    for (size_t i = 0; mismatches && i < result->mismatch_count; i++)
        if (add_message(mismatches, result->mismatches[i]) < 0)
            return AUDIT_ENOMEM;
    cJSON *rows = cJSON_AddArrayToObject(json, KEY_DIFFERING_ROWS);
    if (!mismatches || !rows)
        return AUDIT_ENOMEM;
    for (size_t i = 0; i < result->row_count; i++) {
        cJSON *entry = row_json(&result->rows[i]);
        if (!entry || !cJSON_AddItemToArray(rows, entry)) {
            cJSON_Delete(entry);
            return AUDIT_ENOMEM;
        }
    }
    cJSON_AddBoolToObject(json, KEY_ENGINE_COMPARED, result->engine_compared);
    cJSON_AddBoolToObject(json, KEY_SCORES_IDENTICAL, result->scores_identical);
    json_add_u64(json, KEY_ROWS_COMPARED, result->shape.common_rows);
    json_add_u64(json, KEY_ROWS_DIFFERING, result->row_count);
    json_add_u64(json, KEY_REFERENCE_SET_CHANGED_ROWS, result->reference_changed_rows);
    json_add_u64(json, KEY_PAGE_TABLE_ROWS_DIFFER, result->page_table_rows);
    json_add_u64(json, KEY_ENGINE_WRONG_ROWS_A, result->engine_wrong_rows_a);
    json_add_u64(json, KEY_ENGINE_WRONG_ROWS_B, result->engine_wrong_rows_b);
    cJSON_AddItemToObject(json, KEY_CASES, case_counts_json(result->cases));
    cJSON_AddItemToObject(json, KEY_ATTRIBUTION, attribution_counts_json(result->attribution));
    return AUDIT_OK;
}

int diff_json_finish(cJSON *document, const struct diff_totals *totals, cJSON *records)
{
    cJSON *summary = cJSON_AddObjectToObject(document, KEY_SUMMARY);
    if (summary) {
        json_add_u64(summary, KEY_RECORDS_COMPARED, totals->records);
        json_add_u64(summary, KEY_ROWS_COMPARED, totals->rows);
        json_add_u64(summary, KEY_ROWS_DIFFERING, totals->differing_rows);
        cJSON_AddItemToObject(summary, KEY_CASES, case_counts_json(totals->cases));
        cJSON_AddItemToObject(summary, KEY_ATTRIBUTION,
                              attribution_counts_json(totals->attribution));
        json_add_u64(summary, KEY_RECORDS_SCORES_IDENTICAL, totals->records_scores_identical);
        json_add_u64(summary, KEY_RECORDS_SCORES_DIFFER, totals->records_scores_differ);
        json_add_u64(summary, KEY_RECORDS_SCORES_SAME_ENGINE_DIFFERS,
                     totals->records_scores_same_engine_differs);
        json_add_u64(summary, KEY_RECORDS_REFERENCE_SELECTION_CHANGED,
                     totals->records_reference_selection_changed);
        json_add_u64(summary, KEY_RECORDS_ENGINE_COMPARED, totals->records_engine_compared);
        json_add_u64(summary, KEY_RECORDS_TIE_FLAP, totals->records_tie_flap);
        json_add_u64(summary, KEY_RECORDS_ENGINE_WRONG, totals->records_engine_wrong);
        json_add_u64(summary, KEY_PAGE_TABLE_ROWS_DIFFER, totals->page_table_rows_differ);
        cJSON_AddBoolToObject(summary, KEY_MISMATCH, totals->mismatch);
        cJSON_AddBoolToObject(summary, KEY_INPUT_ERROR, totals->input_error);
    }
    cJSON_AddItemToObject(document, KEY_RECORDS, records);
    return summary ? AUDIT_OK : AUDIT_ENOMEM;
}
