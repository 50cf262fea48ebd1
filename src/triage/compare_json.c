/* The compare document and table (compare_json.h). */
#include "compare_json.h"

#include <inttypes.h>
#include <math.h>
#include <string.h>

#include "json_util.h"
#include "terminal_text.h"

static cJSON *groups_json(const int *groups, size_t run_count)
{
    cJSON *json = cJSON_CreateArray();
    for (size_t r = 0; json && r < run_count; r++)
        cJSON_AddItemToArray(json, groups[r] < 0 ? cJSON_CreateNull()
                                                 : cJSON_CreateNumber(groups[r]));
    return json;
}

static cJSON *runs_json(const struct compare_result *result)
{
    cJSON *json = cJSON_CreateArray();
    for (size_t r = 0; json && r < result->run_count; r++) {
        const struct compare_run *run = &result->runs[r];
        cJSON *item = cJSON_CreateObject();
        if (!item)
            break;
        cJSON_AddItemToArray(json, item);
        json_add_u64(item, KEY_RUN, r);
        cJSON_AddStringToObject(item, KEY_PATH, run->path);
        json_add_u64(item, KEY_RECORDS, run->count);
        if (run->read_error)
            cJSON_AddStringToObject(item, KEY_ERROR, run->error);
        else
            cJSON_AddNullToObject(item, KEY_ERROR);
    }
    return json;
}

/* The runs whose engine selection is wrong on this call, each with its first wrong row. */
static cJSON *engine_wrong_json(const struct compare_result *result,
                                const struct compare_call *call)
{
    cJSON *json = cJSON_CreateArray();
    for (size_t r = 0; json && r < result->run_count; r++) {
        if (!(call->engine_wrong_runs & (1ull << r)))
            continue;
        const struct compare_entry *entry = &result->runs[r].entries[call->entry[r]];
        cJSON *item = cJSON_CreateObject();
        if (!item)
            break;
        cJSON_AddItemToArray(json, item);
        json_add_u64(item, KEY_RUN, r);
        json_add_u64(item, KEY_RECORD, entry->index);
        if (!entry->engine_judged) {
            cJSON_AddStringToObject(item, KEY_ERROR, entry->engine_error);
            continue;
        }
        json_add_u64(item, KEY_WRONG_ROWS, entry->engine_wrong_rows);
        const struct engine_row_detail *detail = &entry->engine_first_wrong;
        json_add_u64(item, KEY_FIRST_ROW, detail->row);
        cJSON *kinds = cJSON_AddArrayToObject(item, KEY_KINDS);
        for (unsigned kind = 0; kinds && kind < CHECK_KIND_COUNT; kind++)
            if (detail->kinds & (1u << kind))
                cJSON_AddItemToArray(kinds,
                                     cJSON_CreateString(check_kind_name((enum check_kind)kind)));
        cJSON *missing = cJSON_AddArrayToObject(item, KEY_MISSING);
        for (uint64_t i = 0; missing && i < detail->missing_count && i < ENGINE_LISTED_INDICES;
             i++)
            cJSON_AddItemToArray(missing, cJSON_CreateNumber((double)detail->missing[i].index));
        json_add_u64(item, KEY_MISSING_TOTAL, detail->missing_count);
    }
    return json;
}

static cJSON *call_json(const struct compare_result *result, const struct compare_call *call)
{
    cJSON *json = cJSON_CreateObject();
    if (!json)
        return NULL;
    cJSON_AddStringToObject(json, KEY_CALL, call->label);
    cJSON *records = cJSON_AddArrayToObject(json, KEY_RECORDS);
    for (size_t r = 0; records && r < result->run_count; r++)
        cJSON_AddItemToArray(records, call->entry[r] < 0
                                          ? cJSON_CreateNull()
                                          : cJSON_CreateNumber(
                                                result->runs[r].entries[call->entry[r]].index));
    cJSON_AddBoolToObject(json, KEY_COMPARABLE, call->comparable);
    if (!call->comparable) {
        cJSON_AddStringToObject(json, KEY_REASON, call->reason);
        return json;
    }
    cJSON_AddNullToObject(json, KEY_REASON);
    cJSON_AddItemToObject(json, KEY_SCORE_GROUPS,
                          groups_json(call->score_group, result->run_count));
    cJSON_AddItemToObject(json, KEY_EXACT_GROUPS,
                          groups_json(call->exact_group, result->run_count));
    cJSON_AddItemToObject(json, KEY_ENGINE_GROUPS,
                          groups_json(call->engine_group, result->run_count));
    cJSON_AddBoolToObject(json, KEY_IDENTICAL_SCORES_DIFFERENT_SELECTION,
                          call->same_scores_other_selection);
    cJSON_AddItemToObject(json, KEY_ENGINE_WRONG, engine_wrong_json(result, call));
    json_add_number(json, KEY_BOUNDARY_GAP_MIN, call->boundary_gap_min);
    json_add_number(json, KEY_LARGEST_ABS_DIFF, call->largest_abs_diff);
    json_add_number(json, KEY_LARGEST_CROSSING_PERTURBATION, call->largest_crossing);
    cJSON_AddBoolToObject(json, KEY_NONFINITE_CHANGED, call->nonfinite_changed);
    json_add_u64(json, KEY_ROWS_PERTURBATION_EXCEEDS_GAP, call->rows_exceeding_gap);
    cJSON_AddStringToObject(json, KEY_ATTRIBUTION, compare_attribution_name(call->attribution));
    return json;
}

void compare_summary_text(const struct compare_result *result, char *text, size_t size)
{
    snprintf(text, size, "%" PRIu64 " comparable call%s: %" PRIu64 " with different scores, %"
             PRIu64 " with identical scores and a different selection; boundary gap min %.3g / "
             "median %.3g", result->comparable, result->comparable == 1 ? "" : "s",
             result->scores_differ, result->same_scores_other_selection, result->gap_min,
             result->gap_median);
}

cJSON *compare_json(const struct document_context *context, const struct compare_result *result)
{
    cJSON *document = document_begin(COMPARE_SCHEMA, COMPARE_SCHEMA_VERSION, context, NULL);
    if (!document)
        return NULL;
    cJSON_AddItemToObject(document, KEY_RUNS, runs_json(result));
    cJSON *alignment = cJSON_AddObjectToObject(document, KEY_ALIGNMENT);
    if (alignment) {
        cJSON_AddStringToObject(alignment, KEY_BY, result->by_call ? KEY_CALL : TRIAGE_BY_POSITION);
        cJSON *keys = cJSON_AddArrayToObject(alignment, KEY_KEYS);
        static const char *const names[] = COMPARE_IDENTITY_KEYS;
        for (size_t i = 0; keys && result->by_call && i < COMPARE_IDENTITY_KEY_COUNT; i++)
            cJSON_AddItemToArray(keys, cJSON_CreateString(names[i]));
        if (result->by_call)
            cJSON_AddNullToObject(alignment, KEY_REASON);
        else
            cJSON_AddStringToObject(alignment, KEY_REASON, result->alignment_reason);
    }
    cJSON *calls = cJSON_AddArrayToObject(document, KEY_CALLS);
    for (size_t c = 0; calls && c < result->call_count; c++)
        cJSON_AddItemToArray(calls, call_json(result, &result->calls[c]));
    cJSON *summary = cJSON_AddObjectToObject(document, KEY_SUMMARY);
    if (!summary) {
        cJSON_Delete(document);
        return NULL;
    }
    json_add_u64(summary, KEY_RUNS, result->run_count);
    json_add_u64(summary, KEY_CALLS, result->call_count);
    json_add_u64(summary, KEY_COMPARABLE_CALLS, result->comparable);
    json_add_u64(summary, KEY_NOT_COMPARABLE_CALLS, result->call_count - result->comparable);
    json_add_u64(summary, KEY_CALLS_SCORES_DIFFER, result->scores_differ);
    json_add_u64(summary, KEY_CALLS_IDENTICAL_SCORES_DIFFERENT_SELECTION,
                 result->same_scores_other_selection);
    cJSON *attribution = cJSON_AddObjectToObject(summary, KEY_ATTRIBUTION);
    for (unsigned a = 0; attribution && a < COMPARE_ATTRIBUTION_COUNT; a++)
        json_add_u64(attribution, compare_attribution_name((enum compare_attribution)a),
                     result->attribution[a]);
    json_add_number(summary, KEY_BOUNDARY_GAP_MIN, result->gap_min);
    json_add_number(summary, KEY_BOUNDARY_GAP_MEDIAN, result->gap_median);
    cJSON_AddBoolToObject(summary, KEY_READ_ERROR, result->read_error);
    char text[512];
    compare_summary_text(result, text, sizeof(text));
    cJSON_AddStringToObject(summary, KEY_TEXT, text);
    return document;
}

static void table_number(FILE *out, double value)
{
    if (isnan(value))
        fprintf(out, " %10s", "-");
    else
        fprintf(out, " %10.3g", value);
}

void compare_table(FILE *out, const struct compare_result *result)
{
    char groups[COMPARE_MAX_RUNS + 1];
    fprintf(out, "# compare: %zu runs, calls aligned %s\n", result->run_count,
            result->by_call ? "by metadata (rank, layer, step, call, request_id, request)"
                            : "by position");
    if (!result->by_call)
        fprintf(out, "#   (not by call: %s)\n", terminal_safe(result->alignment_reason));
    for (size_t r = 0; r < result->run_count; r++)
        fprintf(out, "#   run %zu: %s (%zu records)%s%s\n", r, terminal_safe(result->runs[r].path),
                result->runs[r].count, result->runs[r].read_error ? ": " : "",
                result->runs[r].read_error ? terminal_safe(result->runs[r].error) : "");
    fprintf(out, "# groups per run (a = the first run's; . absent, - no engine selection)\n");
    int width = (int)result->run_count > 6 ? (int)result->run_count : 6;
    fprintf(out, "%-28s %-*s %-*s %-*s %10s %10s %10s  %s\n", "call", width, "scores", width,
            "exact", width, "engine", "gap min", "max |diff|", "crossing", "attribution");
    for (size_t c = 0; c < result->call_count; c++) {
        const struct compare_call *call = &result->calls[c];
        if (!call->comparable)
            continue;
        fprintf(out, "%-28s", terminal_safe(call->label));
        compare_groups_text(call->score_group, result->run_count, groups);
        fprintf(out, " %-*s", width, groups);
        compare_groups_text(call->exact_group, result->run_count, groups);
        fprintf(out, " %-*s", width, groups);
        compare_groups_text(call->engine_group, result->run_count, groups);
        for (size_t r = 0; r < result->run_count; r++)
            if (call->engine_group[r] < 0)
                groups[r] = '-';
        fprintf(out, " %-*s", width, groups);
        table_number(out, call->boundary_gap_min);
        table_number(out, call->largest_abs_diff);
        table_number(out, call->largest_crossing);
        fprintf(out, "  %s", compare_attribution_name(call->attribution));
        if (call->rows_exceeding_gap)
            fprintf(out, " (%" PRIu64 " row(s) perturbed past the gap)", call->rows_exceeding_gap);
        for (size_t r = 0; r < result->run_count; r++) {
            if (!(call->engine_wrong_runs & (1ull << r)))
                continue;
            const struct compare_entry *entry = &result->runs[r].entries[call->entry[r]];
            if (!entry->engine_judged) {
                fprintf(out, "; run %zu: %s", r, terminal_safe(entry->engine_error));
                continue;
            }
            fprintf(out, "; run %zu's engine wrong on %" PRIu64 " row(s), row %u missing", r,
                    entry->engine_wrong_rows, entry->engine_first_wrong.row);
            for (uint64_t i = 0; i < entry->engine_first_wrong.missing_count && i < 4; i++)
                fprintf(out, " %" PRId64, entry->engine_first_wrong.missing[i].index);
        }
        fprintf(out, "\n");
    }
    for (size_t c = 0; c < result->call_count; c++)
        if (!result->calls[c].comparable)
            fprintf(out, "not comparable: %s: %s\n", terminal_safe(result->calls[c].label),
                    terminal_safe(result->calls[c].reason));
    char text[512];
    compare_summary_text(result, text, sizeof(text));
    fprintf(out, "summary: %s\n", text);
    fprintf(out, "attribution:");
    for (unsigned a = 0; a < COMPARE_ATTRIBUTION_COUNT; a++)
        fprintf(out, " %s %" PRIu64 "%s", compare_attribution_name((enum compare_attribution)a),
                result->attribution[a], a + 1 < COMPARE_ATTRIBUTION_COUNT ? "," : "\n");
}
