/* The baseline (gate.h "baseline", docs/GATE.md "The baseline"): the subset of a report that gate
 * needs to judge later reports against it. */
#include "gate.h"

#include <stdlib.h>
#include <string.h>

#include "json_util.h"

static cJSON *string_array(const char **strings, uint32_t count)
{
    cJSON *array = cJSON_CreateArray();
    for (uint32_t i = 0; array && i < count; i++)
        cJSON_AddItemToArray(array, cJSON_CreateString(strings[i]));
    return array;
}

static cJSON *baseline_backend_json(const cJSON *json, const struct document_backend *backend)
{
    cJSON *out = cJSON_CreateObject();
    if (!out)
        return NULL;
    json_copy_member(out, json, KEY_NAME);
    json_copy_member(out, json, KEY_LEVEL);
    if (json_member(json, KEY_CLAIMS))
        json_copy_member(out, json, KEY_CLAIMS);
    json_copy_member(out, json, KEY_STATUS);
    json_copy_member(out, json, KEY_REASON);
    json_copy_member(out, json, KEY_VERDICT);
    if (json_member(json, KEY_VERDICT_REASONS))
        json_copy_member(out, json, KEY_VERDICT_REASONS);
    else
        cJSON_AddItemToObject(out, KEY_VERDICT_REASONS, cJSON_CreateArray());
    json_add_u64(out, KEY_REPS, backend->eager.reps);
    json_add_u64(out, KEY_DISTINCT_OUTPUTS, backend->eager.distinct_count);
    json_copy_member(out, json, KEY_DISTINCT_SETS);
    json_add_u64(out, KEY_EQUALS_REFERENCE_REPS, backend->eager.equals_reference_reps);
    cJSON_AddItemToObject(
        out, KEY_OUTPUT_SHA256,
        string_array(backend->eager.distinct_hashes, backend->eager.distinct_count));
    cJSON_AddItemToObject(out, KEY_SET_SHA256,
                          json_distinct_strings(json_member(json, KEY_SET_SHA256_PER_REP)));
    if (backend->has_graph) {
        cJSON *graph = cJSON_AddObjectToObject(out, KEY_GRAPH);
        const cJSON *graph_json = json_member(json, KEY_GRAPH);
        if (graph) {
            json_copy_member(graph, graph_json, KEY_RAN);
            json_copy_member(graph, graph_json, KEY_ERROR);
            json_add_u64(graph, KEY_REPS, backend->graph.reps);
            json_add_u64(graph, KEY_EQUALS_REFERENCE_REPS, backend->graph.equals_reference_reps);
            cJSON_AddItemToObject(
                graph, KEY_OUTPUT_SHA256,
                string_array(backend->graph.distinct_hashes, backend->graph.distinct_count));
        }
    }
    return out;
}

int gate_baseline_from_report(const cJSON *report, const char *report_name, cJSON **baseline_out,
                              struct audit_error *err)
{
    struct report_document document;
    cJSON *copy = cJSON_Duplicate(report, 1);
    *baseline_out = NULL;
    if (!copy)
        return audit_fail(err, AUDIT_ENOMEM, "out of memory writing a baseline");
    int status = report_document_parse(&document, report_name, copy, err);
    if (status < 0)
        return status;
    if (document.is_baseline) {
        /* Already a baseline: the subset of a subset is itself. */
        *baseline_out = cJSON_Duplicate(report, 1);
        report_document_release(&document);
        return *baseline_out ? AUDIT_OK
                             : audit_fail(err, AUDIT_ENOMEM, "out of memory writing a baseline");
    }
    cJSON *baseline = cJSON_CreateObject();
    cJSON *source = baseline ? cJSON_CreateObject() : NULL;
    if (!source)
        goto no_memory;
    cJSON_AddStringToObject(baseline, KEY_SCHEMA, BASELINE_SCHEMA);
    cJSON_AddNumberToObject(baseline, KEY_SCHEMA_VERSION, BASELINE_SCHEMA_VERSION);
    cJSON_AddStringToObject(source, KEY_REPORT, report_name);
    cJSON_AddStringToObject(source, KEY_SCHEMA, REPORT_SCHEMA);
    cJSON_AddNumberToObject(source, KEY_SCHEMA_VERSION, REPORT_SCHEMA_VERSION);
    cJSON_AddItemToObject(baseline, KEY_SOURCE, source);
    json_copy_member(baseline, document.root, KEY_COMPLETE);
    json_copy_member(baseline, document.root, KEY_STOP_REASON);
    json_copy_member(baseline, document.root, KEY_CONTEXT);
    if (document.input_errors)
        json_copy_member(baseline, document.root, KEY_INPUT_ERRORS);
    else
        cJSON_AddItemToObject(baseline, KEY_INPUT_ERRORS, cJSON_CreateArray());
    cJSON *records = cJSON_AddArrayToObject(baseline, KEY_RECORDS);
    if (!records)
        goto no_memory;
    size_t r = 0;
    const cJSON *record_json;
    cJSON_ArrayForEach(record_json, json_member(document.root, KEY_RECORDS)) {
        const struct document_record *record = &document.records[r++];
        cJSON *out = cJSON_CreateObject();
        if (!out)
            goto no_memory;
        cJSON_AddItemToArray(records, out);
        static const char *const kept[] = { KEY_FILE,     KEY_INDEX,       KEY_PAYLOAD_SHA256,
                                            KEY_ROWS,     KEY_SOURCE_ROWS, KEY_K,
                                            KEY_RECORD_K, KEY_REFERENCE };
        for (size_t i = 0; i < sizeof(kept) / sizeof(kept[0]); i++)
            json_copy_member(out, record_json, kept[i]);
        if (record->global_index >= 0)
            cJSON_AddNumberToObject(out, KEY_GLOBAL_INDEX, (double)record->global_index);
        cJSON *backends = cJSON_AddArrayToObject(out, KEY_BACKENDS);
        if (!backends)
            goto no_memory;
        size_t b = 0;
        const cJSON *backend_json;
        cJSON_ArrayForEach(backend_json, json_member(record_json, KEY_BACKENDS)) {
            cJSON *backend = baseline_backend_json(backend_json, &record->backends[b++]);
            if (!backend)
                goto no_memory;
            cJSON_AddItemToArray(backends, backend);
        }
        /* The engine's judged selection travels whole: gate judges it from the baseline too
         * when two baselines are compared. */
        json_copy_member(out, record_json, KEY_ENGINE);
    }
    report_document_release(&document);
    *baseline_out = baseline;
    return AUDIT_OK;
no_memory:
    cJSON_Delete(baseline);
    report_document_release(&document);
    return audit_fail(err, AUDIT_ENOMEM, "out of memory writing a baseline");
}
