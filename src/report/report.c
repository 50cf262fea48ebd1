/* The report writer (report.h, docs/REPORT.md "Report JSON"). No CUDA calls: src/replay/
 * measures, backend_result.c and verdict.c judge, this file writes. */
#include "report.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "json_util.h"

static void add_hex_hash(cJSON *object, const char *name, const uint8_t hash[HASH_BYTES])
{
    char hex[HASH_HEX_BYTES];
    hash_to_hex(hash, hex);
    cJSON_AddStringToObject(object, name, hex);
}

static void add_string_or_null(cJSON *object, const char *name, const char *text)
{
    if (text && text[0])
        cJSON_AddStringToObject(object, name, text);
    else
        cJSON_AddNullToObject(object, name);
}

static uint32_t source_row(const struct record_result *record, uint32_t row)
{
    return record->source_rows ? record->source_rows[row] : row;
}

static cJSON *device_json(const struct gpu_device_info *device)
{
    cJSON *json = cJSON_CreateObject();
    if (!json)
        return NULL;
    cJSON_AddNumberToObject(json, KEY_ORDINAL, device->ordinal);
    document_device_add(json, device);
    json_add_u64(json, KEY_SMEM_PER_BLOCK_OPTIN_BYTES, device->smem_per_block_optin);
    json_add_u64(json, KEY_REPORTED_SMEM_PER_SM_BYTES, device->reported_smem_per_sm);
    cJSON_AddBoolToObject(json, KEY_SMEM_EMULATED, device->smem_emulated);
    json_add_u64(json, KEY_L2_BYTES, device->l2_bytes);
    json_add_u64(json, KEY_GLOBAL_MEMORY_BYTES, device->global_memory_bytes);
    document_cuda_versions_add(json, device->driver_version, device->runtime_version);
    return json;
}

static cJSON *context_json(const struct run_context *context)
{
    cJSON *json = cJSON_CreateObject();
    if (!json)
        return NULL;
    if (document_context_add(json, &context->document) < 0) {
        cJSON_Delete(json);
        return NULL;
    }
    if (context->device_available) {
        cJSON_AddItemToObject(json, KEY_DEVICE, device_json(&context->device));
        cJSON_AddNullToObject(json, KEY_DEVICE_UNAVAILABLE_REASON);
    } else {
        cJSON_AddNullToObject(json, KEY_DEVICE);
        add_string_or_null(json, KEY_DEVICE_UNAVAILABLE_REASON, context->device_unavailable_reason);
    }
    cJSON *emulation = cJSON_AddObjectToObject(json, KEY_EMULATION);
    if (emulation) {
        if (context->emulate_smem_per_sm)
            json_add_u64(emulation, KEY_SMEM_PER_SM_BYTES, context->emulate_smem_per_sm);
        else
            cJSON_AddNullToObject(emulation, KEY_SMEM_PER_SM_BYTES);
    }
    add_string_or_null(json, KEY_NOISE, context->noise);
    json_add_u64(json, KEY_REPS, context->reps);
    json_add_u64(json, KEY_SEED, context->seed);
    cJSON_AddBoolToObject(json, KEY_GRAPH, context->graph);
    cJSON_AddBoolToObject(json, KEY_BATCH_INVARIANCE, context->batch_invariance);
    cJSON_AddBoolToObject(json, KEY_GPU_PREFILTER, context->gpu_prefilter);
    if (context->k_override)
        json_add_u64(json, KEY_K_OVERRIDE, context->k_override);
    else
        cJSON_AddNullToObject(json, KEY_K_OVERRIDE);
    cJSON *backends = cJSON_AddArrayToObject(json, KEY_BACKENDS);
    for (size_t i = 0; backends && i < context->backend_count; i++)
        cJSON_AddItemToArray(backends, cJSON_CreateString(context->backends[i]));
    return json;
}

static cJSON *violations_json(const struct output_tally *tally, bool with_graph_mismatch)
{
    cJSON *json = cJSON_CreateObject();
    unsigned kinds = with_graph_mismatch ? VIOLATION_KINDS : (unsigned)CHECK_KIND_COUNT;
    for (unsigned kind = 0; json && kind < kinds; kind++) {
        cJSON *entry = cJSON_AddObjectToObject(json, violation_name(kind));
        if (!entry)
            continue;
        json_add_u64(entry, KEY_TOTAL_ROWS, tally->violations[kind].total_rows);
        json_add_u64(entry, KEY_MAX_ROWS_PER_REP, tally->violations[kind].max_rows_per_rep);
        uint64_t rows = 0;
        if (kind < (unsigned)CHECK_KIND_COUNT) {
            for (uint32_t b = 0; b < tally->rows; b++)
                rows += (tally->row_flags[b] >> kind) & 1u;
        } else {
            rows = output_tally_flapping_rows(tally);
        }
        json_add_u64(entry, KEY_ROWS, rows);
    }
    return json;
}

static cJSON *hash_list_json(const uint8_t (*hashes)[HASH_BYTES], uint32_t count)
{
    cJSON *json = cJSON_CreateArray();
    for (uint32_t i = 0; json && i < count; i++) {
        char hex[HASH_HEX_BYTES];
        hash_to_hex(hashes[i], hex);
        cJSON_AddItemToArray(json, cJSON_CreateString(hex));
    }
    return json;
}

static cJSON *flapping_json(const struct record_result *record, const struct output_tally *tally)
{
    cJSON *json = cJSON_CreateArray();
    uint32_t listed = 0;
    for (uint32_t b = 0; json && b < tally->rows && listed < REPORT_MAX_LISTED_ROWS; b++) {
        if (!tally->row_reps_differing[b])
            continue;
        cJSON *row = cJSON_CreateObject();
        if (!row)
            break;
        json_add_u64(row, KEY_ROW, source_row(record, b));
        json_add_u64(row, KEY_REPS_DIFFERING, tally->row_reps_differing[b]);
        json_add_u64(row, KEY_REPS_SET_DIFFERING, tally->row_reps_set_differing[b]);
        json_add_u64(row, KEY_MAX_INDICES_DIFFERING, tally->row_max_indices_differing[b]);
        json_add_u64(row, KEY_MAX_POSITIONS_DIFFERING, tally->row_max_positions_differing[b]);
        cJSON_AddItemToArray(json, row);
        listed++;
    }
    return json;
}

static void add_time_json(cJSON *object, const char *name, const struct output_tally *tally)
{
    double median, min, max;
    output_tally_times(tally, &median, &min, &max);
    cJSON *json = cJSON_AddObjectToObject(object, name);
    if (!json)
        return;
    json_add_number(json, KEY_MEDIAN, median);
    json_add_number(json, KEY_MIN, min);
    json_add_number(json, KEY_MAX, max);
}

/* The measurement fields shared by the eager reps and the graph replays. */
static void add_tally_json(cJSON *json, const struct record_result *record,
                           const struct output_tally *tally, bool with_graph_mismatch)
{
    json_add_u64(json, KEY_REPS, tally->reps);
    cJSON_AddItemToObject(json, KEY_OUTPUT_SHA256_PER_REP,
                          hash_list_json(tally->rep_hash, tally->reps));
    cJSON_AddItemToObject(json, KEY_SET_SHA256_PER_REP,
                          hash_list_json(tally->rep_set_hash, tally->reps));
    json_add_u64(json, KEY_DISTINCT_OUTPUTS, tally->distinct_outputs);
    json_add_u64(json, KEY_DISTINCT_SETS, tally->distinct_sets);
    json_add_u64(json, KEY_EQUALS_REFERENCE_REPS, tally->equals_reference_reps);
    cJSON_AddItemToObject(json, KEY_VIOLATIONS, violations_json(tally, with_graph_mismatch));
    json_add_u64(json, KEY_FLAPPING_ROWS_TOTAL, output_tally_flapping_rows(tally));
    json_add_u64(json, KEY_SET_FLAPPING_ROWS_TOTAL, output_tally_set_flapping_rows(tally));
    cJSON_AddItemToObject(json, KEY_FLAPPING_ROWS, flapping_json(record, tally));
    add_time_json(json, KEY_KERNEL_TIME_US, tally);
}

/* Row sets the census predicts next to what the reps showed (docs/REPORT.md). */
static cJSON *predicted_vs_observed_json(const struct record_result *record,
                                         const struct backend_result *result)
{
    const struct output_tally *eager = &result->eager;
    const struct staging_model *staging = staging_model_for(result->backend->name);
    const uint32_t rows = record->record ? record->record->rows : 0;
    const uint32_t wrong_bits = VIOLATION_WRONG_KINDS;
    uint64_t underdetermined = 0, overflow = 0, flapping = 0, set_flapping = 0, wrong = 0;
    uint64_t set_flapping_and_under = 0, set_flapping_not_under = 0, under_not_flapping = 0;
    uint64_t unexplained_flapping = 0, wrong_and_overflow = 0, wrong_not_overflow = 0;
    uint64_t overflow_not_wrong = 0;
    cJSON *json = cJSON_CreateObject();
    if (!json)
        return NULL;
    cJSON *unexplained_list = cJSON_CreateArray();
    cJSON *unpredicted_wrong_list = cJSON_CreateArray();
    for (uint32_t b = 0; b < rows && record->census_rows; b++) {
        const struct census_row *census = &record->census_rows[b];
        bool under = census->underdetermined;
        bool predicted = staging_predicts_overflow(staging, census);
        bool flapped = eager->row_reps_differing && eager->row_reps_differing[b] > 0;
        bool set_flapped = eager->row_reps_set_differing && eager->row_reps_set_differing[b] > 0;
        bool was_wrong = eager->row_flags && (eager->row_flags[b] & wrong_bits);
        underdetermined += under;
        overflow += predicted;
        flapping += flapped;
        set_flapping += set_flapped;
        wrong += was_wrong;
        set_flapping_and_under += set_flapped && under;
        set_flapping_not_under += set_flapped && !under;
        under_not_flapping += under && !set_flapped;
        wrong_and_overflow += was_wrong && predicted;
        wrong_not_overflow += was_wrong && !predicted;
        overflow_not_wrong += predicted && !was_wrong;
        if (set_flapped && !under && !predicted) {
            unexplained_flapping++;
            if (unexplained_list && unexplained_flapping <= REPORT_MAX_LISTED_ROWS)
                cJSON_AddItemToArray(unexplained_list,
                                     cJSON_CreateNumber(source_row(record, b)));
        }
        if (was_wrong && !predicted && unpredicted_wrong_list &&
            wrong_not_overflow <= REPORT_MAX_LISTED_ROWS)
            cJSON_AddItemToArray(unpredicted_wrong_list,
                                 cJSON_CreateNumber(source_row(record, b)));
    }
    add_string_or_null(json, KEY_STAGING_MODEL, staging ? staging->name : NULL);
    if (staging) {
        json_add_u64(json, KEY_STAGING_CAPACITY, staging->capacity);
        cJSON_AddBoolToObject(json, KEY_DROPS_ON_OVERFLOW, staging->drops_on_overflow);
    } else {
        cJSON_AddNullToObject(json, KEY_STAGING_CAPACITY);
        cJSON_AddNullToObject(json, KEY_DROPS_ON_OVERFLOW);
    }
    json_add_u64(json, KEY_ROWS, rows);
    json_add_u64(json, KEY_UNDERDETERMINED_ROWS, underdetermined);
    json_add_u64(json, KEY_PREDICTED_OVERFLOW_ROWS, overflow);
    json_add_u64(json, KEY_FLAPPING_ROWS, flapping);
    json_add_u64(json, KEY_SET_FLAPPING_ROWS, set_flapping);
    json_add_u64(json, KEY_WRONG_ROWS, wrong);
    json_add_u64(json, KEY_SET_FLAPPING_AND_UNDERDETERMINED, set_flapping_and_under);
    json_add_u64(json, KEY_SET_FLAPPING_NOT_UNDERDETERMINED, set_flapping_not_under);
    json_add_u64(json, KEY_UNDERDETERMINED_NOT_SET_FLAPPING, under_not_flapping);
    json_add_u64(json, KEY_SET_FLAPPING_UNEXPLAINED, unexplained_flapping);
    json_add_u64(json, KEY_WRONG_AND_PREDICTED_OVERFLOW, wrong_and_overflow);
    json_add_u64(json, KEY_WRONG_NOT_PREDICTED_OVERFLOW, wrong_not_overflow);
    json_add_u64(json, KEY_PREDICTED_OVERFLOW_NOT_WRONG, overflow_not_wrong);
    cJSON_AddItemToObject(json, KEY_SET_FLAPPING_UNEXPLAINED_LIST, unexplained_list);
    cJSON_AddItemToObject(json, KEY_WRONG_NOT_PREDICTED_OVERFLOW_LIST, unpredicted_wrong_list);
    return json;
}

static cJSON *batch_json(const struct record_result *record,
                         const struct batch_invariance_result *batch)
{
    cJSON *json = cJSON_CreateObject();
    if (!json)
        return NULL;
    cJSON_AddBoolToObject(json, KEY_RAN, batch->ran);
    add_string_or_null(json, KEY_ERROR, batch->error);
    json_add_u64(json, KEY_TRIALS, batch->trials);
    json_add_u64(json, KEY_CONTEXTS_PER_ROW, batch->contexts);
    json_add_u64(json, KEY_ROWS_TESTED, batch->rows_tested);
    json_add_u64(json, KEY_LAUNCHES, batch->launches);
    json_add_u64(json, KEY_DEPENDENT_ROWS_TOTAL, batch->dependent_count);
    json_add_u64(json, KEY_SET_DEPENDENT_ROWS_TOTAL, batch->set_dependent_count);
    cJSON *rows = cJSON_AddArrayToObject(json, KEY_DEPENDENT_ROWS);
    for (uint32_t i = 0; rows && i < batch->dependent_count && i < REPORT_MAX_LISTED_ROWS; i++) {
        cJSON *row = cJSON_CreateObject();
        if (!row)
            break;
        json_add_u64(row, KEY_ROW, source_row(record, batch->dependent[i].row));
        json_add_u64(row, KEY_CONTEXTS_DIFFERING, batch->dependent[i].contexts_differing);
        json_add_u64(row, KEY_CONTEXTS_SET_DIFFERING, batch->dependent[i].contexts_set_differing);
        cJSON_AddItemToArray(rows, row);
    }
    return json;
}

/* Reps whose output equals the tally's baseline (for graph replays: the first eager output). */
static uint32_t reps_equal_to_baseline(const struct output_tally *tally)
{
    uint32_t count = 0;
    for (uint32_t rep = 0; rep < tally->reps; rep++)
        count += tally->rep_rows_differing[rep] == 0;
    return count;
}

static cJSON *backend_json(const struct record_result *record, const struct backend_result *result,
                           const struct verdict_result *verdict)
{
    const struct topk_backend *backend = result->backend;
    cJSON *json = cJSON_CreateObject();
    if (!json)
        return NULL;
    cJSON_AddStringToObject(json, KEY_NAME, backend->name);
    cJSON_AddStringToObject(json, KEY_LEVEL, topk_determinism_name(backend->level));
    cJSON *claims = cJSON_AddObjectToObject(json, KEY_CLAIMS);
    if (claims) {
        cJSON_AddBoolToObject(claims, KEY_EXACT_SET, backend->exact_set);
        cJSON_AddBoolToObject(claims, KEY_SMALLEST_INDEX_TIES, backend->smallest_index_ties);
        cJSON_AddBoolToObject(claims, KEY_CANONICAL_ORDER, backend->canonical_order);
        cJSON_AddBoolToObject(claims, KEY_INDEX_ASCENDING, backend->index_ascending);
    }
    cJSON_AddStringToObject(json, KEY_STATUS, backend_status_name(result->status));
    add_string_or_null(json, KEY_REASON, result->reason);
    cJSON_AddStringToObject(json, KEY_VERDICT, verdict_name(verdict->verdict));
    cJSON *reasons = cJSON_AddArrayToObject(json, KEY_VERDICT_REASONS);
    for (unsigned i = 0; reasons && i < verdict->reason_count; i++)
        cJSON_AddItemToArray(reasons, cJSON_CreateString(verdict->reasons[i]));
    json_add_u64(json, KEY_SCRATCH_BYTES, result->scratch_bytes);
    struct time_breakdown time;
    backend_result_time_breakdown(result, &time);
    cJSON_AddItemToObject(json, KEY_TIME_BREAKDOWN_MS, time_breakdown_json(&time));
    cJSON *work = cJSON_AddObjectToObject(json, KEY_HOST_WORK);
    if (work) {
        const struct output_tally *eager = &result->eager, *graph = &result->graph;
        cJSON_AddBoolToObject(work, KEY_GPU_PREFILTER, result->gpu_prefilter);
        json_add_u64(work, KEY_REPS_MATCHED_ON_GPU,
                     (uint64_t)eager->gpu_hash_matches + graph->gpu_hash_matches);
        json_add_u64(work, KEY_OUTPUTS_COPIED, result->outputs_copied);
        json_add_u64(work, KEY_OUTPUTS_HASHED,
                     (uint64_t)eager->outputs_hashed + graph->outputs_hashed);
        json_add_u64(work, KEY_OUTPUTS_CHECKED,
                     (uint64_t)eager->outputs_checked + graph->outputs_checked);
        cJSON_AddBoolToObject(work, KEY_BESIDE_REPS, eager->beside_reps || graph->beside_reps);
        json_add_number(work, KEY_HASH_MS,
                        time_breakdown_round_ms(eager->hash_ms + graph->hash_ms));
        json_add_number(work, KEY_CHECK_MS,
                        time_breakdown_round_ms(eager->check_ms + graph->check_ms));
    }
    add_tally_json(json, record, &result->eager, false);
    cJSON_AddItemToObject(json, KEY_PREDICTED_VS_OBSERVED,
                          predicted_vs_observed_json(record, result));
    if (result->graph_requested) {
        cJSON *graph = cJSON_AddObjectToObject(json, KEY_GRAPH);
        if (graph) {
            cJSON_AddBoolToObject(graph, KEY_RAN, result->graph_ran);
            add_string_or_null(graph, KEY_ERROR, result->graph_error);
            add_tally_json(graph, record, &result->graph, true);
            json_add_u64(graph, KEY_EQUALS_EAGER_REPS, reps_equal_to_baseline(&result->graph));
        }
    }
    if (result->batch_requested)
        cJSON_AddItemToObject(json, KEY_BATCH_INVARIANCE, batch_json(record, &result->batch));
    return json;
}

static cJSON *record_time_json(const struct record_time *time)
{
    cJSON *json = cJSON_CreateObject();
    if (!json)
        return NULL;
    const double other = time->total_ms - time->reference_ms - time->census_ms - time->backends_ms;
    json_add_number(json, KEY_REFERENCE_MS, time_breakdown_round_ms(time->reference_ms));
    json_add_number(json, KEY_CENSUS_MS, time_breakdown_round_ms(time->census_ms));
    json_add_number(json, KEY_BACKENDS_MS, time_breakdown_round_ms(time->backends_ms));
    json_add_number(json, KEY_OTHER_MS, time_breakdown_round_ms(other > 0 ? other : 0));
    json_add_number(json, KEY_TOTAL_MS, time_breakdown_round_ms(time->total_ms));
    return json;
}

static void record_time_add(struct record_time *sum, const struct record_time *addend)
{
    sum->reference_ms += addend->reference_ms;
    sum->census_ms += addend->census_ms;
    sum->backends_ms += addend->backends_ms;
    sum->total_ms += addend->total_ms;
}

static cJSON *record_flags_json(const struct capture_record *record)
{
    cJSON *json = cJSON_CreateObject();
    if (!json)
        return NULL;
    cJSON_AddBoolToObject(json, KEY_ROW_STARTS, record->row_starts != NULL);
    cJSON_AddBoolToObject(json, KEY_PAGE_TABLE, record->page_table != NULL);
    json_add_u64(json, KEY_PAGE_SIZE, record->page_size);
    cJSON_AddBoolToObject(json, KEY_ENGINE_INDICES, record->engine_indices != NULL);
    cJSON_AddBoolToObject(json, KEY_COMPRESSED, record->compressed);
    return json;
}

int32_t report_record_max_length(const struct capture_record *record)
{
    int32_t longest = 0;
    for (uint32_t b = 0; b < record->rows; b++)
        if (record->lengths[b] > longest)
            longest = record->lengths[b];
    return longest;
}

cJSON *report_record_json(const struct record_result *record, const struct verdict_result *verdicts)
{
    const struct capture_record *capture = record->record;
    cJSON *json = cJSON_CreateObject();
    if (!json)
        return NULL;
    add_string_or_null(json, KEY_FILE, record->file);
    json_add_u64(json, KEY_INDEX, capture->index);
    json_add_u64(json, KEY_BYTE_OFFSET, capture->file_offset);
    json_add_u64(json, KEY_ROWS, capture->rows);
    if (record->source_rows) {
        cJSON *rows = cJSON_AddArrayToObject(json, KEY_SOURCE_ROWS);
        for (uint32_t b = 0; rows && b < capture->rows; b++)
            cJSON_AddItemToArray(rows, cJSON_CreateNumber(record->source_rows[b]));
    } else {
        cJSON_AddNullToObject(json, KEY_SOURCE_ROWS);
    }
    json_add_u64(json, KEY_K, record->k);
    json_add_u64(json, KEY_RECORD_K, capture->k);
    json_add_u64(json, KEY_ROW_STRIDE, capture->row_stride);
    json_add_u64(json, KEY_MAX_LENGTH, (uint64_t)report_record_max_length(capture));
    cJSON_AddItemToObject(json, KEY_FLAGS, record_flags_json(capture));
    cJSON *metadata = capture->metadata_json ? cJSON_Parse(capture->metadata_json) : NULL;
    if (metadata && cJSON_IsObject(metadata)) {
        cJSON_AddItemToObject(json, KEY_METADATA, metadata);
    } else {
        /* The reader promises an object; keep the text if it ever is not one. */
        cJSON_Delete(metadata);
        cJSON_AddItemToObject(json, KEY_METADATA, cJSON_CreateObject());
        add_string_or_null(json, KEY_METADATA_UNPARSED, capture->metadata_json);
    }
    json_add_hex(json, KEY_PAYLOAD_SHA256, capture->payload_sha256,
                 sizeof(capture->payload_sha256));
    cJSON *reference = cJSON_AddObjectToObject(json, KEY_REFERENCE);
    if (reference) {
        add_hex_hash(reference, KEY_OUTPUT_SHA256, record->reference_hash);
        add_hex_hash(reference, KEY_SET_SHA256, record->reference_set_hash);
    }
    if (record->census)
        cJSON_AddItemToObject(json, KEY_CENSUS, cJSON_Duplicate(record->census, 1));
    else
        cJSON_AddNullToObject(json, KEY_CENSUS);
    cJSON_AddItemToObject(json, KEY_TIME_BREAKDOWN_MS, record_time_json(&record->time));
    cJSON *backends = cJSON_AddArrayToObject(json, KEY_BACKENDS);
    for (size_t i = 0; backends && i < record->backend_count; i++)
        cJSON_AddItemToArray(backends, backend_json(record, &record->backends[i], &verdicts[i]));
    if (record->engine)
        cJSON_AddItemToObject(json, KEY_ENGINE,
                              report_engine_json(record->engine, record->source_rows));
    else
        cJSON_AddNullToObject(json, KEY_ENGINE);
    return json;
}

cJSON *report_backend_json(const struct record_result *record, const struct backend_result *result,
                           const struct verdict_result *verdict)
{
    return backend_json(record, result, verdict);
}

cJSON *report_record_json_entries(const struct record_result *record, cJSON **entries,
                                  size_t count)
{
    cJSON *json = report_record_json(record, NULL);
    cJSON *backends = json ? cJSON_GetObjectItemCaseSensitive(json, KEY_BACKENDS) : NULL;
    if (!backends) {
        cJSON_Delete(json);
        return NULL;
    }
    for (size_t i = 0; i < count; i++) {
        if (!entries[i] || !cJSON_AddItemToArray(backends, entries[i])) {
            cJSON_Delete(json);
            return NULL;
        }
        entries[i] = NULL;
    }
    return json;
}

int report_begin(struct run_report *report, const struct run_context *context,
                 struct audit_error *err)
{
    memset(report, 0, sizeof(*report));
    report->root = cJSON_CreateObject();
    report->by_backend = cJSON_CreateObject();
    if (!report->root || !report->by_backend)
        goto no_memory;
    cJSON_AddStringToObject(report->root, KEY_SCHEMA, REPORT_SCHEMA);
    cJSON_AddNumberToObject(report->root, KEY_SCHEMA_VERSION, REPORT_SCHEMA_VERSION);
    /* Stays false unless report_finish says the run completed. */
    cJSON_AddBoolToObject(report->root, KEY_COMPLETE, false);
    cJSON_AddNullToObject(report->root, KEY_STOP_REASON);
    cJSON_AddNullToObject(report->root, KEY_EXIT_CODE);
    cJSON *context_object = context_json(context);
    if (!context_object)
        goto no_memory;
    cJSON_AddItemToObject(report->root, KEY_CONTEXT, context_object);
    report->context = context_object;
    report->records = cJSON_AddArrayToObject(report->root, KEY_RECORDS);
    report->input_errors = cJSON_AddArrayToObject(report->root, KEY_INPUT_ERRORS);
    if (!report->records || !report->input_errors)
        goto no_memory;
    return AUDIT_OK;
no_memory:
    report_release(report);
    return audit_fail(err, AUDIT_ENOMEM, "out of memory starting the report");
}

/* Counts one backend entry in the summary: its status and its verdict, in total and per
 * backend name (summary.by_backend.NAME.{pass,fail,not_run}). */
static void count_verdict(struct run_report *report, const char *backend_name,
                          enum backend_status status, enum verdict verdict)
{
    report->runs++;
    report->status_counts[status]++;
    if (verdict == VERDICT_PASS)
        report->pass++;
    else if (verdict == VERDICT_FAIL)
        report->fail++;
    else
        report->not_run++;
    cJSON *entry = cJSON_GetObjectItemCaseSensitive(report->by_backend, backend_name);
    if (!entry) {
        entry = cJSON_AddObjectToObject(report->by_backend, backend_name);
        if (!entry)
            return;
        for (int v = VERDICT_PASS; v < VERDICT_COUNT; v++)
            cJSON_AddNumberToObject(entry, verdict_name((enum verdict)v), 0);
    }
    cJSON *counter = cJSON_GetObjectItemCaseSensitive(entry, verdict_name(verdict));
    if (counter)
        cJSON_SetNumberValue(counter, counter->valuedouble + 1);
}

int report_add_record(struct run_report *report, const struct record_result *record,
                      struct verdict_result *verdicts, struct audit_error *err)
{
    int status = AUDIT_OK;
    struct verdict_result *own = NULL;
    if (!verdicts) {
        own = calloc(record->backend_count ? record->backend_count : 1, sizeof(*own));
        if (!own)
            return audit_fail(err, AUDIT_ENOMEM, "out of memory judging %s record %u", record->file,
                              record->record->index);
        verdicts = own;
    }
    for (size_t i = 0; i < record->backend_count; i++) {
        struct time_breakdown time;
        report_verdict(&record->backends[i], record->census_rows, &verdicts[i]);
        count_verdict(report, record->backends[i].backend->name, record->backends[i].status,
                      verdicts[i].verdict);
        backend_result_time_breakdown(&record->backends[i], &time);
        report_count_time(report, record->backends[i].backend->name, &time);
    }
    cJSON *json = report_record_json(record, verdicts);
    if (!json) {
        status = audit_fail(err, AUDIT_ENOMEM, "out of memory reporting %s record %u", record->file,
                            record->record->index);
        goto done;
    }
    cJSON_AddItemToArray(report->records, json);
    report->record_count++;
    engine_counts_add_entry(&report->engine, cJSON_GetObjectItemCaseSensitive(json, KEY_ENGINE));
    record_time_add(&report->record_time_total, &record->time);
done:
    free(own);
    return status;
}

void report_entry_outcome(const cJSON *entry, struct report_entry_outcome *outcome)
{
    const cJSON *name = cJSON_GetObjectItemCaseSensitive(entry, KEY_NAME);
    outcome->name = cJSON_IsString(name) ? name->valuestring : "unnamed";
    outcome->status = BACKEND_ERROR;
    outcome->verdict = VERDICT_FAIL;
    backend_status_parse(cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(entry, KEY_STATUS)),
                         &outcome->status);
    verdict_parse(cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(entry, KEY_VERDICT)),
                  &outcome->verdict);
    time_breakdown_from_json(cJSON_GetObjectItemCaseSensitive(entry, KEY_TIME_BREAKDOWN_MS),
                             &outcome->time);
}

/* count_verdict for an entry built elsewhere. */
static void count_entry(struct run_report *report, const cJSON *entry)
{
    struct report_entry_outcome outcome;
    report_entry_outcome(entry, &outcome);
    count_verdict(report, outcome.name, outcome.status, outcome.verdict);
    report_count_time(report, outcome.name, &outcome.time);
}

void report_count_time(struct run_report *report, const char *backend_name,
                       const struct time_breakdown *time)
{
    time_breakdown_add(&report->time_total, time);
    for (size_t i = 0; i < report->time_backend_count; i++) {
        if (strcmp(report->time_by_backend[i].name, backend_name) == 0) {
            time_breakdown_add(&report->time_by_backend[i].time, time);
            return;
        }
    }
    if (report->time_backend_count == REPORT_TIME_BACKENDS)
        return;
    struct backend_time_total *added = &report->time_by_backend[report->time_backend_count++];
    snprintf(added->name, sizeof(added->name), "%s", backend_name);
    added->time = *time;
}

int report_add_record_entries(struct run_report *report, const struct record_result *record,
                              cJSON **entries, size_t count, struct audit_error *err)
{
    for (size_t i = 0; i < count; i++)
        if (entries[i])
            count_entry(report, entries[i]);
    cJSON *json = report_record_json_entries(record, entries, count);
    if (!json)
        return audit_fail(err, AUDIT_ENOMEM, "out of memory reporting %s record %u", record->file,
                          record->record->index);
    cJSON_AddItemToArray(report->records, json);
    report->record_count++;
    engine_counts_add_entry(&report->engine, cJSON_GetObjectItemCaseSensitive(json, KEY_ENGINE));
    record_time_add(&report->record_time_total, &record->time);
    return AUDIT_OK;
}

int report_record_add_per_device(cJSON *record, const cJSON *source, const cJSON *device,
                                 struct audit_error *err)
{
    const cJSON *target_list = cJSON_GetObjectItemCaseSensitive(record, KEY_BACKENDS);
    const cJSON *source_list = cJSON_GetObjectItemCaseSensitive(source, KEY_BACKENDS);
    cJSON *target_backend = target_list ? target_list->child : NULL;
    const cJSON *source_backend = source_list ? source_list->child : NULL;
    for (; target_backend && source_backend;
         target_backend = target_backend->next, source_backend = source_backend->next) {
        const cJSON *name = cJSON_GetObjectItemCaseSensitive(source_backend, KEY_NAME);
        const cJSON *target_name = cJSON_GetObjectItemCaseSensitive(target_backend, KEY_NAME);
        if (!cJSON_IsString(name) || !cJSON_IsString(target_name) ||
            strcmp(name->valuestring, target_name->valuestring) != 0)
            return audit_fail(err, AUDIT_EDATA, "--devices: the backends of a record differ "
                                                "between passes (%s)",
                              cJSON_IsString(name) ? name->valuestring : "unnamed");
        /* Copied before per_device is added: in the first pass source is record. */
        cJSON *copy = cJSON_Duplicate(source_backend, 1);
        cJSON *identity = cJSON_Duplicate(device, 1);
        cJSON *list = cJSON_GetObjectItemCaseSensitive(target_backend, KEY_PER_DEVICE);
        if (!list)
            list = cJSON_AddArrayToObject(target_backend, KEY_PER_DEVICE);
        if (!copy || !identity || !list) {
            cJSON_Delete(copy);
            cJSON_Delete(identity);
            return audit_fail(err, AUDIT_ENOMEM, "out of memory recording per-device results");
        }
        cJSON_DeleteItemFromObjectCaseSensitive(copy, KEY_PER_DEVICE);
        cJSON_AddItemToObject(copy, KEY_DEVICE, identity);
        cJSON_AddItemToArray(list, copy);
    }
    return AUDIT_OK;
}

int report_add_input_error(struct run_report *report, const char *file, int64_t record,
                           int64_t byte_offset, const char *kind, const char *message,
                           struct audit_error *err)
{
    cJSON *json = cJSON_CreateObject();
    if (!json)
        return audit_fail(err, AUDIT_ENOMEM, "out of memory reporting an input error");
    add_string_or_null(json, KEY_FILE, file);
    if (record >= 0)
        json_add_u64(json, KEY_RECORD, (uint64_t)record);
    else
        cJSON_AddNullToObject(json, KEY_RECORD);
    if (byte_offset >= 0)
        json_add_u64(json, KEY_BYTE_OFFSET, (uint64_t)byte_offset);
    else
        cJSON_AddNullToObject(json, KEY_BYTE_OFFSET);
    add_string_or_null(json, KEY_KIND, kind);
    add_string_or_null(json, KEY_MESSAGE, message);
    cJSON_AddItemToArray(report->input_errors, json);
    return AUDIT_OK;
}

/* The summary object from the counts (report_finish, report_summary_json). */
static cJSON *summary_json(const struct run_report *report, int input_errors)
{
    cJSON *summary = cJSON_CreateObject();
    if (!summary)
        return NULL;
    json_add_u64(summary, KEY_RECORDS, report->record_count);
    json_add_u64(summary, KEY_BACKEND_RUNS, report->runs);
    json_add_u64(summary, KEY_BACKENDS_PASS, report->pass);
    json_add_u64(summary, KEY_BACKENDS_FAIL, report->fail);
    json_add_u64(summary, KEY_BACKENDS_NOT_RUN, report->not_run);
    cJSON *statuses = cJSON_AddObjectToObject(summary, KEY_STATUS);
    for (int s = BACKEND_OK; statuses && s < BACKEND_STATUS_COUNT; s++)
        json_add_u64(statuses, backend_status_name((enum backend_status)s),
                     report->status_counts[s]);
    json_add_u64(summary, KEY_INPUT_ERRORS, (uint64_t)(input_errors > 0 ? input_errors : 0));
    cJSON_AddItemToObject(summary, KEY_ENGINE, engine_counts_json(&report->engine));
    cJSON *by_backend = cJSON_Duplicate(report->by_backend, 1);
    if (!statuses || !by_backend || !cJSON_AddItemToObject(summary, KEY_BY_BACKEND, by_backend)) {
        cJSON_Delete(by_backend);
        cJSON_Delete(summary);
        return NULL;
    }
    return summary;
}

int report_finish(struct run_report *report, bool complete, const char *stop_reason,
                  int exit_code, struct audit_error *err)
{
    cJSON *root = report->root;
    cJSON_ReplaceItemInObjectCaseSensitive(root, KEY_COMPLETE, cJSON_CreateBool(complete));
    cJSON_ReplaceItemInObjectCaseSensitive(
        root, KEY_STOP_REASON,
        stop_reason && stop_reason[0] ? cJSON_CreateString(stop_reason) : cJSON_CreateNull());
    cJSON_ReplaceItemInObjectCaseSensitive(root, KEY_EXIT_CODE, cJSON_CreateNumber(exit_code));
    cJSON_DeleteItemFromObjectCaseSensitive(root, KEY_SUMMARY);
    cJSON *summary = summary_json(report, cJSON_GetArraySize(report->input_errors));
    if (!summary)
        return audit_fail(err, AUDIT_ENOMEM, "out of memory writing the report summary");
    cJSON_AddItemToObject(root, KEY_SUMMARY, summary);
    return AUDIT_OK;
}

cJSON *report_summary_json(const cJSON *records, const cJSON *input_errors)
{
    struct run_report counts;
    memset(&counts, 0, sizeof(counts));
    counts.by_backend = cJSON_CreateObject();
    if (!counts.by_backend)
        return NULL;
    const cJSON *record;
    cJSON_ArrayForEach(record, records) {
        counts.record_count++;
        engine_counts_add_entry(&counts.engine, cJSON_GetObjectItemCaseSensitive(record, KEY_ENGINE));
        const cJSON *entry;
        cJSON_ArrayForEach(entry, cJSON_GetObjectItemCaseSensitive(record, KEY_BACKENDS))
            count_entry(&counts, entry);
    }
    cJSON *summary = summary_json(&counts, cJSON_GetArraySize(input_errors));
    cJSON_Delete(counts.by_backend);
    return summary;
}

void report_release(struct run_report *report)
{
    cJSON_Delete(report->root);
    cJSON_Delete(report->by_backend);
    memset(report, 0, sizeof(*report));
}
