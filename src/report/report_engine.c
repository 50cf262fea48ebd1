/* The engine's own selection in the documents (report_engine.h). */
#include "report_engine.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "json_util.h"
#include "report.h"
#include "terminal_text.h"

/* Wrong rows the terminal table describes index by index; indices per list on such a line. */
#define TABLE_WRONG_ROWS 8u
#define TABLE_INDICES 4u

static uint32_t file_row(const uint32_t *source_rows, uint32_t row)
{
    return source_rows ? source_rows[row] : row;
}

void engine_contract_text(const struct engine_contract *contract, char *text, size_t size)
{
    snprintf(text, size, "order %s, tie_break %s (%s)", engine_order_name(contract->order),
             engine_tie_break_name(contract->tie_break),
             engine_contract_source_name(contract->source));
}

void engine_result_release(struct engine_result *result)
{
    if (!result)
        return;
    engine_judgement_release(&result->judgement);
    memset(result, 0, sizeof(*result));
}

/* The rule's evidence from a judgement made here. */
static void judge_result(struct engine_result *result, const uint32_t *source_rows)
{
    const struct engine_judgement *judgement = &result->judgement;
    uint32_t rows[VERDICT_LISTED_ROWS];
    char contract[160];
    uint64_t listed = 0;
    for (size_t i = 0; i < judgement->detail_count && listed < VERDICT_LISTED_ROWS; i++)
        rows[listed++] = file_row(source_rows, judgement->details[i].row);
    engine_contract_text(&result->contract, contract, sizeof(contract));
    struct engine_evidence evidence = {
        .judged = result->judged,
        .reason = result->error,
        .contract = contract,
        .rows = judgement->rows,
        .wrong_rows = rows,
        .wrong_rows_listed = listed,
    };
    memcpy(evidence.class_rows, judgement->class_rows, sizeof(evidence.class_rows));
    memcpy(evidence.kind_rows, judgement->kind_rows, sizeof(evidence.kind_rows));
    verdict_judge_engine_into(&evidence, &result->verdict);
}

int engine_result_judge(struct engine_result *result, const struct capture_record *record,
                        const struct check_context *checks, const struct engine_contract *option,
                        const uint32_t *source_rows, struct audit_error *err)
{
    struct check_context own;
    bool own_ready = false;
    struct audit_error detail = { 0 };
    int status;
    memset(result, 0, sizeof(*result));
    if (!record->engine_indices)
        return audit_fail(err, AUDIT_EUSAGE, "record %u: no engine indices to judge",
                          record->index);
    status = engine_contract_for_record(record, option, &result->contract, &detail);
    if (status == AUDIT_OK && (!checks || checks->k != record->k)) {
        status = checks_prepare(&own, record, record->k, &detail);
        own_ready = status == AUDIT_OK;
        checks = &own;
    }
    if (status == AUDIT_OK)
        status = engine_judge_record(checks, &result->contract, &result->judgement, &detail);
    if (own_ready)
        checks_release(&own);
    if (status == AUDIT_ENOMEM) {
        *err = detail;
        return status;
    }
    result->judged = status == AUDIT_OK;
    if (!result->judged)
        snprintf(result->error, sizeof(result->error), "%s", detail.message);
    judge_result(result, source_rows);
    return AUDIT_OK;
}

/* ---- JSON ------------------------------------------------------------------------------------ */

static cJSON *note_json(const struct engine_index_note *note, const char *distance_key,
                        const char *ulps_key)
{
    cJSON *json = cJSON_CreateObject();
    if (!json)
        return NULL;
    json_add_number(json, KEY_INDEX, (double)note->index);
    cJSON_AddNumberToObject(json, KEY_TRANSLATED, note->translated);
    json_add_number(json, KEY_SCORE, note->score);
    if (note->has_distance) {
        json_add_number(json, distance_key, note->distance);
        json_add_u64(json, ulps_key, note->distance_ulps);
    } else {
        cJSON_AddNullToObject(json, distance_key);
        cJSON_AddNullToObject(json, ulps_key);
    }
    return json;
}

static void add_notes(cJSON *row, const char *key, const char *total_key,
                      const struct engine_index_note *notes, uint64_t count,
                      const char *distance_key, const char *ulps_key)
{
    cJSON *list = cJSON_AddArrayToObject(row, key);
    for (uint64_t i = 0; list && i < count && i < ENGINE_LISTED_INDICES; i++)
        cJSON_AddItemToArray(list, note_json(&notes[i], distance_key, ulps_key));
    json_add_u64(row, total_key, count);
}

static void add_indices(cJSON *row, const char *key, const char *total_key,
                        const int32_t *indices, uint64_t count)
{
    cJSON *list = cJSON_AddArrayToObject(row, key);
    for (uint64_t i = 0; list && i < count && i < ENGINE_LISTED_INDICES; i++)
        cJSON_AddItemToArray(list, cJSON_CreateNumber(indices[i]));
    json_add_u64(row, total_key, count);
}

static cJSON *kinds_json(uint32_t kinds)
{
    cJSON *list = cJSON_CreateArray();
    for (unsigned kind = 0; list && kind < CHECK_KIND_COUNT; kind++)
        if (kinds & (1u << kind))
            cJSON_AddItemToArray(list, cJSON_CreateString(check_kind_name((enum check_kind)kind)));
    return list;
}

static cJSON *detail_json(const struct engine_row_detail *detail, const uint32_t *source_rows)
{
    cJSON *row = cJSON_CreateObject();
    if (!row)
        return NULL;
    json_add_u64(row, KEY_ROW, file_row(source_rows, detail->row));
    cJSON_AddItemToObject(row, KEY_KINDS, kinds_json(detail->kinds));
    json_add_u64(row, KEY_ENTRIES, detail->entries);
    json_add_u64(row, KEY_NEEDED, detail->needed);
    if (detail->has_boundary)
        json_add_number(row, KEY_KTH, detail->kth);
    else
        cJSON_AddNullToObject(row, KEY_KTH);
    add_notes(row, KEY_MISSING, KEY_MISSING_TOTAL, detail->missing, detail->missing_count,
              KEY_ABOVE_KTH, KEY_ABOVE_KTH_ULPS);
    add_notes(row, KEY_EXTRA, KEY_EXTRA_TOTAL, detail->extra, detail->extra_count, KEY_BELOW_KTH,
              KEY_BELOW_KTH_ULPS);
    add_indices(row, KEY_DUPLICATES, KEY_DUPLICATES_TOTAL, detail->duplicates,
                detail->duplicate_count);
    add_indices(row, KEY_OUT_OF_RANGE_INDICES, KEY_OUT_OF_RANGE_TOTAL, detail->out_of_range,
                detail->out_of_range_count);
    if (detail->order_slot >= 0)
        json_add_u64(row, KEY_ORDER_SLOT, (uint64_t)detail->order_slot);
    else
        cJSON_AddNullToObject(row, KEY_ORDER_SLOT);
    if (detail->padding_slot >= 0)
        json_add_u64(row, KEY_PADDING_SLOT, (uint64_t)detail->padding_slot);
    else
        cJSON_AddNullToObject(row, KEY_PADDING_SLOT);
    return row;
}

/* wrong_rows: the described rows in full, the others by number and kinds, at most
 * REPORT_MAX_LISTED_ROWS; tie_variant_rows: numbers. */
static void add_row_lists(cJSON *json, const struct engine_judgement *judgement,
                          const uint32_t *source_rows)
{
    cJSON *wrong = cJSON_AddArrayToObject(json, KEY_WRONG_ROWS);
    cJSON *ties = cJSON_AddArrayToObject(json, KEY_TIE_VARIANT_ROWS);
    size_t described = 0;
    uint32_t wrong_listed = 0, ties_listed = 0;
    for (uint32_t b = 0; b < judgement->rows; b++) {
        if (judgement->row_class[b] == ENGINE_ROW_TIE_VARIANT && ties &&
            ties_listed++ < REPORT_MAX_LISTED_ROWS)
            cJSON_AddItemToArray(ties, cJSON_CreateNumber(file_row(source_rows, b)));
        if (judgement->row_class[b] != ENGINE_ROW_WRONG || !wrong ||
            wrong_listed++ >= REPORT_MAX_LISTED_ROWS)
            continue;
        if (described < judgement->detail_count && judgement->details[described].row == b) {
            cJSON_AddItemToArray(wrong, detail_json(&judgement->details[described++],
                                                    source_rows));
            continue;
        }
        cJSON *row = cJSON_CreateObject();
        if (!row)
            return;
        json_add_u64(row, KEY_ROW, file_row(source_rows, b));
        cJSON_AddItemToObject(row, KEY_KINDS, kinds_json(judgement->row_kinds[b]));
        cJSON_AddItemToArray(wrong, row);
    }
    json_add_u64(json, KEY_WRONG_ROWS_TOTAL, judgement->class_rows[ENGINE_ROW_WRONG]);
}

cJSON *report_engine_json(const struct engine_result *result, const uint32_t *source_rows)
{
    const struct engine_judgement *judgement = &result->judgement;
    cJSON *json = cJSON_CreateObject();
    if (!json)
        return NULL;
    cJSON_AddStringToObject(json, KEY_STATUS,
                            result->judged ? ENGINE_STATUS_JUDGED : ENGINE_STATUS_ERROR);
    if (result->judged)
        cJSON_AddNullToObject(json, KEY_REASON);
    else
        cJSON_AddStringToObject(json, KEY_REASON, result->error);
    json_add_u64(json, KEY_K, judgement->k);
    cJSON *contract = cJSON_AddObjectToObject(json, KEY_CONTRACT);
    if (contract) {
        cJSON_AddStringToObject(contract, KEY_ORDER, engine_order_name(result->contract.order));
        cJSON_AddStringToObject(contract, KEY_TIE_BREAK,
                                engine_tie_break_name(result->contract.tie_break));
    }
    cJSON_AddStringToObject(json, KEY_CONTRACT_FROM,
                            engine_contract_source_name(result->contract.source));
    cJSON_AddStringToObject(json, KEY_VERDICT, verdict_name(result->verdict.verdict));
    cJSON *reasons = cJSON_AddArrayToObject(json, KEY_VERDICT_REASONS);
    for (unsigned i = 0; reasons && i < result->verdict.reason_count; i++)
        cJSON_AddItemToArray(reasons, cJSON_CreateString(result->verdict.reasons[i]));
    json_add_u64(json, KEY_ROWS, judgement->rows);
    cJSON *by_kind = cJSON_AddObjectToObject(json, KEY_ROWS_BY_KIND);
    for (unsigned c = 0; by_kind && c < ENGINE_ROW_CLASSES; c++)
        json_add_u64(by_kind, engine_row_class_name((enum engine_row_class)c),
                     judgement->class_rows[c]);
    for (unsigned kind = 0; by_kind && kind < CHECK_KIND_COUNT; kind++)
        if ((1u << kind) & ENGINE_WRONG_KINDS)
            json_add_u64(by_kind, check_kind_name((enum check_kind)kind),
                         judgement->kind_rows[kind]);
    add_row_lists(json, judgement, source_rows);
    return json;
}

/* ---- the table ------------------------------------------------------------------------------- */

static void table_notes(FILE *out, const char *label, const struct engine_index_note *notes,
                        uint64_t count, const char *direction)
{
    if (count == 0)
        return;
    fprintf(out, "; %s", label);
    for (uint64_t i = 0; i < count && i < TABLE_INDICES; i++) {
        const struct engine_index_note *note = &notes[i];
        fprintf(out, " %lld", (long long)note->index);
        if (note->translated != note->index)
            fprintf(out, " (-> %d)", note->translated);
        fprintf(out, " [%.9g", note->score);
        if (note->has_distance)
            fprintf(out, ", %.3g %s the k-th, %u ulp", note->distance, direction,
                    note->distance_ulps);
        fprintf(out, "]");
    }
    if (count > TABLE_INDICES)
        fprintf(out, " ... (%llu in all)", (unsigned long long)count);
}

static void table_indices(FILE *out, const char *label, const int32_t *indices, uint64_t count)
{
    if (count == 0)
        return;
    fprintf(out, "; %s", label);
    for (uint64_t i = 0; i < count && i < TABLE_INDICES; i++)
        fprintf(out, " %d", indices[i]);
    if (count > TABLE_INDICES)
        fprintf(out, " ... (%llu in all)", (unsigned long long)count);
}

static void table_wrong_row(FILE *out, const struct engine_row_detail *detail,
                            const uint32_t *source_rows)
{
    fprintf(out, "  %-28s   engine row %u:", "", file_row(source_rows, detail->row));
    const char *separator = " ";
    for (unsigned kind = 0; kind < CHECK_KIND_COUNT; kind++)
        if (detail->kinds & (1u << kind)) {
            fprintf(out, "%s%s", separator, check_kind_name((enum check_kind)kind));
            separator = ",";
        }
    if (detail->entries < detail->needed)
        fprintf(out, "; %llu of %llu entries", (unsigned long long)detail->entries,
                (unsigned long long)detail->needed);
    table_notes(out, "missing", /* a label, not a key */
                detail->missing, detail->missing_count, "above");
    table_notes(out, "extra", detail->extra, detail->extra_count, "below"); /* a label, not a key */
    table_indices(out, "duplicate", detail->duplicates, detail->duplicate_count);
    table_indices(out, "out of range", detail->out_of_range, detail->out_of_range_count);
    if (detail->order_slot >= 0)
        fprintf(out, "; out of order at slot %lld", (long long)detail->order_slot);
    if (detail->padding_slot >= 0)
        fprintf(out, "; real index after -1 at slot %lld", (long long)detail->padding_slot);
    fprintf(out, "\n");
}

void report_engine_table_lines(FILE *out, const char *where, const char *shape,
                               const struct engine_result *result, const uint32_t *source_rows)
{
    const struct engine_judgement *judgement = &result->judgement;
    char contract[160];
    engine_contract_text(&result->contract, contract, sizeof(contract));
    if (result->judged)
        fprintf(out, "  %-28s %16s %6u  %-13s %s: %llu exact, %llu tie_variant, %llu wrong  %s\n",
                where, shape, judgement->k, "engine", contract,
                (unsigned long long)judgement->class_rows[ENGINE_ROW_EXACT],
                (unsigned long long)judgement->class_rows[ENGINE_ROW_TIE_VARIANT],
                (unsigned long long)judgement->class_rows[ENGINE_ROW_WRONG],
                verdict_name(result->verdict.verdict));
    else
        fprintf(out, "  %-28s %16s %6s  %-13s %s  %s\n", where, shape, "-", "engine",
                ENGINE_STATUS_ERROR, verdict_name(result->verdict.verdict));
    if (result->verdict.verdict != VERDICT_FAIL)
        return;
    for (unsigned r = 0; r < result->verdict.reason_count; r++)
        fprintf(out, "  %-28s   %s\n", "", terminal_safe(result->verdict.reasons[r]));
    for (size_t i = 0; i < judgement->detail_count && i < TABLE_WRONG_ROWS; i++)
        table_wrong_row(out, &judgement->details[i], source_rows);
    const uint64_t wrong = judgement->class_rows[ENGINE_ROW_WRONG];
    if (wrong > TABLE_WRONG_ROWS)
        fprintf(out, "  %-28s   ... %llu more wrong engine row(s): see the report\n", "",
                (unsigned long long)(wrong - TABLE_WRONG_ROWS));
}

/* ---- summary --------------------------------------------------------------------------------- */

void engine_counts_add_entry(struct engine_counts *counts, const cJSON *entry)
{
    if (!cJSON_IsObject(entry))
        return;
    counts->records++;
    enum verdict verdict = VERDICT_FAIL;
    verdict_parse(cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(entry, KEY_VERDICT)),
                  &verdict);
    if (verdict == VERDICT_PASS)
        counts->pass++;
    else
        counts->fail++;
    const cJSON *rows = cJSON_GetObjectItemCaseSensitive(entry, KEY_ROWS);
    if (cJSON_IsNumber(rows) && rows->valuedouble > 0)
        counts->rows += (uint64_t)rows->valuedouble;
    const cJSON *by_kind = cJSON_GetObjectItemCaseSensitive(entry, KEY_ROWS_BY_KIND);
    for (unsigned c = 0; c < ENGINE_ROW_CLASSES; c++) {
        const cJSON *count = cJSON_GetObjectItemCaseSensitive(
            by_kind, engine_row_class_name((enum engine_row_class)c));
        if (cJSON_IsNumber(count) && count->valuedouble > 0)
            counts->class_rows[c] += (uint64_t)count->valuedouble;
    }
}

cJSON *engine_counts_json(const struct engine_counts *counts)
{
    cJSON *json = cJSON_CreateObject();
    if (!json)
        return NULL;
    json_add_u64(json, KEY_RECORDS, counts->records);
    json_add_u64(json, verdict_name(VERDICT_PASS), counts->pass);
    json_add_u64(json, verdict_name(VERDICT_FAIL), counts->fail);
    json_add_u64(json, KEY_ROWS, counts->rows);
    for (unsigned c = 0; c < ENGINE_ROW_CLASSES; c++)
        json_add_u64(json, engine_row_class_name((enum engine_row_class)c), counts->class_rows[c]);
    return json;
}
