#include "diff_json.h"

#include "json_util.h"

cJSON *diff_json_begin(const struct document_context *context, const char *path_a,
                       const char *path_b, uint32_t k_override)
{
    cJSON *document = document_begin(DIFF_SCHEMA, DIFF_SCHEMA_VERSION, context, NULL);
    if (!document)
        return NULL;
    cJSON *inputs = cJSON_AddObjectToObject(document, "inputs");
    if (inputs) {
        cJSON_AddStringToObject(inputs, "a", path_a);
        cJSON_AddStringToObject(inputs, "b", path_b);
    }
    if (k_override)
        json_add_u64(document, KEY_K_OVERRIDE, k_override);
    else
        cJSON_AddNullToObject(document, KEY_K_OVERRIDE);
    /* Key order: context, pairing, mismatches, notes, input errors, summary, records. */
    cJSON *pairing = cJSON_AddObjectToObject(document, "pairing");
    if (!inputs || !pairing || !cJSON_AddStringToObject(pairing, "by", "position") ||
        !cJSON_AddNullToObject(pairing, "reproducer") ||
        !cJSON_AddArrayToObject(document, "mismatches") ||
        !cJSON_AddArrayToObject(document, "notes") ||
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
    return add_message(cJSON_GetObjectItemCaseSensitive(document, "mismatches"), message);
}

int diff_json_add_input_error(cJSON *document, const char *message)
{
    return add_message(cJSON_GetObjectItemCaseSensitive(document, KEY_INPUT_ERRORS), message);
}

int diff_json_add_note(cJSON *document, const char *message)
{
    return add_message(cJSON_GetObjectItemCaseSensitive(document, "notes"), message);
}

int diff_json_set_pairing(cJSON *document, const char *by, const char *reproducer)
{
    cJSON *pairing = cJSON_GetObjectItemCaseSensitive(document, "pairing");
    cJSON *by_item = cJSON_CreateString(by);
    cJSON *side = reproducer ? cJSON_CreateString(reproducer) : cJSON_CreateNull();
    if (!pairing || !by_item || !side) {
        cJSON_Delete(by_item);
        cJSON_Delete(side);
        return AUDIT_ENOMEM;
    }
    cJSON_ReplaceItemInObjectCaseSensitive(pairing, "by", by_item);
    cJSON_ReplaceItemInObjectCaseSensitive(pairing, "reproducer", side);
    return AUDIT_OK;
}

/* One side's engine selection judged: its class, kinds and the candidates it left out. */
static cJSON *engine_side_json(const struct diff_engine_side *side)
{
    cJSON *json = cJSON_CreateObject();
    if (!json)
        return NULL;
    cJSON_AddStringToObject(json, "class", engine_row_class_name(side->row_class));
    cJSON *kinds = cJSON_AddArrayToObject(json, "kinds");
    for (unsigned kind = 0; kinds && kind < CHECK_KIND_COUNT; kind++)
        if (side->kinds & (1u << kind))
            cJSON_AddItemToArray(kinds,
                                 cJSON_CreateString(check_kind_name((enum check_kind)kind)));
    json_add_u64(json, "missing_total", side->missing_count);
    cJSON *missing = cJSON_AddArrayToObject(json, "missing");
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
    cJSON_AddStringToObject(json, "case", diff_case_name(row->diff_case));
    cJSON_AddStringToObject(json, "attribution",
                            diff_attribution_name(diff_case_attribution(row->diff_case)));
    cJSON_AddBoolToObject(json, "window_differs", row->window_differs);
    cJSON_AddBoolToObject(json, "scores_identical", row->scores_identical);
    json_add_u64(json, "differing_elements", row->differing_elements);
    json_add_number(json, "max_abs_diff", row->max_abs_diff); /* null when non-finite */
    cJSON_AddBoolToObject(json, "nonfinite_changed", row->nonfinite_changed);
    json_add_u64(json, "max_ulp_diff", row->max_ulp_diff);
    bool have_census = !row->scores_identical && !row->window_differs;
    if (have_census && !row->short_row) {
        json_add_number(json, "boundary_gap", row->boundary_gap);
        cJSON_AddNumberToObject(json, "tie_set", (double)row->tie_set);
    } else {
        cJSON_AddNullToObject(json, "boundary_gap");
        cJSON_AddNullToObject(json, "tie_set");
    }
    cJSON_AddBoolToObject(json, "short_row", have_census && row->short_row);
    if (have_census)
        json_add_number(json, "crossing_perturbation", row->crossing_perturbation);
    else
        cJSON_AddNullToObject(json, "crossing_perturbation");
    cJSON_AddBoolToObject(json, "perturbation_exceeds_gap", row->perturbation_exceeds_gap);
    cJSON_AddBoolToObject(json, "reference_set_changed", row->reference_set_changed);
    cJSON_AddBoolToObject(json, "reference_order_changed", row->reference_order_changed);
    if (row->engine_compared) {
        cJSON_AddBoolToObject(json, "engine_set_changed", row->engine_set_changed);
        cJSON_AddBoolToObject(json, "engine_order_changed", row->engine_order_changed);
    } else {
        cJSON_AddNullToObject(json, "engine_set_changed");
        cJSON_AddNullToObject(json, "engine_order_changed");
    }
    if (row->engine_judged) {
        const bool wrong_a = row->engine_a.row_class == ENGINE_ROW_WRONG;
        const bool wrong_b = row->engine_b.row_class == ENGINE_ROW_WRONG;
        cJSON_AddItemToObject(json, "engine_a", engine_side_json(&row->engine_a));
        cJSON_AddItemToObject(json, "engine_b", engine_side_json(&row->engine_b));
        if (wrong_a || wrong_b)
            cJSON_AddStringToObject(json, "engine_wrong_side",
                                    wrong_a && wrong_b ? "both" : wrong_a ? "A" : "B");
        else
            cJSON_AddNullToObject(json, "engine_wrong_side");
    } else {
        cJSON_AddNullToObject(json, "engine_a");
        cJSON_AddNullToObject(json, "engine_b");
        cJSON_AddNullToObject(json, "engine_wrong_side");
    }
    cJSON_AddBoolToObject(json, "page_table_differs", row->page_table_differs);
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
    json_add_u64(json, "rows_a", result->rows_a);
    json_add_u64(json, "rows_b", result->rows_b);
    json_add_u64(json, KEY_K, result->k);
    json_add_u64(json, "record_k_a", result->record_k_a);
    json_add_u64(json, "record_k_b", result->record_k_b);
    json_add_hex(json, "payload_sha256_a", result->payload_sha256_a,
                 sizeof(result->payload_sha256_a));
    json_add_hex(json, "payload_sha256_b", result->payload_sha256_b,
                 sizeof(result->payload_sha256_b));
    cJSON *mismatches = cJSON_AddArrayToObject(json, "mismatches");
    for (size_t i = 0; mismatches && i < result->mismatch_count; i++)
        if (add_message(mismatches, result->mismatches[i]) < 0)
            return AUDIT_ENOMEM;
    cJSON *rows = cJSON_AddArrayToObject(json, "differing_rows");
    if (!mismatches || !rows)
        return AUDIT_ENOMEM;
    for (size_t i = 0; i < result->row_count; i++) {
        cJSON *entry = row_json(&result->rows[i]);
        if (!entry || !cJSON_AddItemToArray(rows, entry)) {
            cJSON_Delete(entry);
            return AUDIT_ENOMEM;
        }
    }
    cJSON_AddBoolToObject(json, "engine_compared", result->engine_compared);
    cJSON_AddBoolToObject(json, "scores_identical", result->scores_identical);
    json_add_u64(json, "rows_compared", result->shape.common_rows);
    json_add_u64(json, "rows_differing", result->row_count);
    json_add_u64(json, "reference_set_changed_rows", result->reference_changed_rows);
    json_add_u64(json, "page_table_rows_differ", result->page_table_rows);
    json_add_u64(json, "engine_wrong_rows_a", result->engine_wrong_rows_a);
    json_add_u64(json, "engine_wrong_rows_b", result->engine_wrong_rows_b);
    cJSON_AddItemToObject(json, "cases", case_counts_json(result->cases));
    cJSON_AddItemToObject(json, "attribution", attribution_counts_json(result->attribution));
    return AUDIT_OK;
}

int diff_json_finish(cJSON *document, const struct diff_totals *totals, cJSON *records)
{
    cJSON *summary = cJSON_AddObjectToObject(document, KEY_SUMMARY);
    if (summary) {
        json_add_u64(summary, "records_compared", totals->records);
        json_add_u64(summary, "rows_compared", totals->rows);
        json_add_u64(summary, "rows_differing", totals->differing_rows);
        cJSON_AddItemToObject(summary, "cases", case_counts_json(totals->cases));
        cJSON_AddItemToObject(summary, "attribution",
                              attribution_counts_json(totals->attribution));
        json_add_u64(summary, "records_scores_identical", totals->records_scores_identical);
        json_add_u64(summary, "records_scores_differ", totals->records_scores_differ);
        json_add_u64(summary, "records_scores_same_engine_differs",
                     totals->records_scores_same_engine_differs);
        json_add_u64(summary, "records_reference_selection_changed",
                     totals->records_reference_selection_changed);
        json_add_u64(summary, "records_engine_compared", totals->records_engine_compared);
        json_add_u64(summary, "records_tie_flap", totals->records_tie_flap);
        json_add_u64(summary, "records_engine_wrong", totals->records_engine_wrong);
        json_add_u64(summary, "page_table_rows_differ", totals->page_table_rows_differ);
        cJSON_AddBoolToObject(summary, "mismatch", totals->mismatch);
        cJSON_AddBoolToObject(summary, "input_error", totals->input_error);
    }
    cJSON_AddItemToObject(document, KEY_RECORDS, records);
    return summary ? AUDIT_OK : AUDIT_ENOMEM;
}
