/* merge (gate.h "merge", docs/REPORT.md "merge"): shard reports of one audit joined into one
 * report, checked to be shards of the same audit that do not overlap. */
#include "gate.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "json_util.h"
#include "report.h"

/* Context keys that must agree between the shards of one audit. */
static const char *const shard_config_keys[] = {
    KEY_BACKENDS,         KEY_REPS,       KEY_NOISE,     KEY_SEED, KEY_GRAPH,
    KEY_BATCH_INVARIANCE, KEY_K_OVERRIDE, KEY_EMULATION, NULL
};

struct shard_input {
    const char *path;
    const cJSON *root;
    struct report_document document;
    uint32_t index, count;
};

struct merged_record {
    uint64_t global_index;
    const cJSON *json;
    size_t shard;
};

static int compare_shards(const void *a, const void *b)
{
    const struct shard_input *x = a, *y = b;
    return (x->index > y->index) - (x->index < y->index);
}

static int compare_merged_records(const void *a, const void *b)
{
    const struct merged_record *x = a, *y = b;
    return (x->global_index > y->global_index) - (x->global_index < y->global_index);
}

static int read_shard(struct shard_input *shard, struct audit_error *err)
{
    struct json_reader reader = { shard->path, err };
    cJSON *copy = cJSON_Duplicate(shard->root, 1);
    const cJSON *shard_json;
    uint64_t value;
    if (!copy)
        return audit_fail(err, AUDIT_ENOMEM, "out of memory reading %s", shard->path);
    int status = report_document_parse(&shard->document, shard->path, copy, err);
    if (status < 0)
        return status;
    if (shard->document.is_baseline)
        return json_field_error(&reader, "$", KEY_SCHEMA, "a baseline, not a shard report");
    status = json_field_object(&reader, shard->document.context, "$.context", KEY_SHARD,
                               FIELD_NULLABLE, &shard_json);
    if (status < 0)
        return status;
    if (!shard_json)
        return json_field_error(&reader, "$.context", KEY_SHARD,
                                "null: not a shard report (run --shard I/N writes them)");
    status = json_field_count(&reader, shard_json, "$.context.shard", KEY_COUNT, FIELD_REQUIRED,
                              UINT32_MAX, 0, &value);
    if (status < 0)
        return status;
    if (value == 0)
        return json_field_error(&reader, "$.context.shard", KEY_COUNT,
                                "0: a run has at least one shard");
    shard->count = (uint32_t)value;
    status = json_field_count(&reader, shard_json, "$.context.shard", KEY_INDEX, FIELD_REQUIRED,
                              shard->count - 1, 0, &value);
    if (status < 0)
        return status;
    shard->index = (uint32_t)value;
    for (size_t r = 0; r < shard->document.record_count; r++) {
        const struct document_record *record = &shard->document.records[r];
        if (record->global_index < 0)
            return json_field_error(&reader, record->path, KEY_GLOBAL_INDEX,
                                    "missing in a shard report");
        if ((uint64_t)record->global_index % shard->count != shard->index)
            return json_field_error(&reader, record->path, KEY_GLOBAL_INDEX,
                                    "%lld does not belong to shard %u/%u",
                                    (long long)record->global_index, shard->index, shard->count);
    }
    return AUDIT_OK;
}

static cJSON *merge_cross_device(const struct shard_input *shards, size_t count,
                                 const struct merged_record *records, size_t record_count)
{
    cJSON *block = NULL;
    for (size_t s = 0; s < count; s++) {
        const cJSON *shard_block = json_member(shards[s].root, KEY_CROSS_DEVICE);
        if (!cJSON_IsObject(shard_block))
            continue;
        if (!block) {
            block = cJSON_CreateObject();
            if (!block)
                return NULL;
            json_copy_member(block, shard_block, KEY_AVAILABLE);
            json_copy_member(block, shard_block, KEY_REASON);
            json_copy_member(block, shard_block, KEY_DEVICES);
            json_copy_member(block, shard_block, KEY_SAME_MODEL);
            cJSON_AddItemToObject(block, KEY_ENTRIES, cJSON_CreateArray());
        }
        if (cJSON_IsTrue(json_member(shard_block, KEY_AVAILABLE)))
            cJSON_ReplaceItemInObjectCaseSensitive(block, KEY_AVAILABLE, cJSON_CreateTrue());
    }
    if (!block)
        return NULL;
    /* Entries in global record order, following the merged records. */
    cJSON *entries = cJSON_GetObjectItemCaseSensitive(block, KEY_ENTRIES);
    for (size_t r = 0; entries && r < record_count; r++) {
        const cJSON *shard_block = json_member(shards[records[r].shard].root, KEY_CROSS_DEVICE);
        const cJSON *entry;
        cJSON_ArrayForEach(entry, json_member(shard_block, KEY_ENTRIES)) {
            const cJSON *global = json_member(entry, KEY_GLOBAL_INDEX);
            if (cJSON_IsNumber(global) && (uint64_t)global->valuedouble == records[r].global_index)
                cJSON_AddItemToArray(entries, cJSON_Duplicate(entry, 1));
        }
    }
    gate_cross_device_summarize(block);
    return block;
}

static cJSON *shard_list_json(const struct shard_input *shards, size_t count)
{
    cJSON *list = cJSON_CreateArray();
    for (size_t s = 0; list && s < count; s++) {
        cJSON *item = cJSON_CreateObject();
        if (!item)
            break;
        cJSON_AddNumberToObject(item, KEY_INDEX, shards[s].index);
        cJSON_AddNumberToObject(item, KEY_COUNT, shards[s].count);
        cJSON_AddStringToObject(item, KEY_REPORT, shards[s].path);
        json_copy_member(item, shards[s].root, KEY_COMPLETE);
        json_copy_member(item, shards[s].root, KEY_STOP_REASON);
        json_copy_member(item, shards[s].root, KEY_EXIT_CODE);
        cJSON_AddNumberToObject(item, KEY_RECORDS, (double)shards[s].document.record_count);
        json_copy_member(item, shards[s].root, KEY_CONTEXT);
        cJSON_AddItemToArray(list, item);
    }
    return list;
}

/* Shards of one audit: the same N and configuration, no index twice. Sorts them by index. */
static int check_shards(struct shard_input *shards, size_t count, struct audit_error *err)
{
    for (size_t s = 1; s < count; s++) {
        if (shards[s].count != shards[0].count)
            return audit_fail(err, AUDIT_EDATA,
                              "%s is shard %u/%u but %s is shard %u/%u: shards of one audit "
                              "share N",
                              shards[0].path, shards[0].index, shards[0].count, shards[s].path,
                              shards[s].index, shards[s].count);
        for (size_t k = 0; shard_config_keys[k]; k++) {
            const cJSON *a = json_member(shards[0].document.context, shard_config_keys[k]);
            const cJSON *b = json_member(shards[s].document.context, shard_config_keys[k]);
            if (!(a == NULL && b == NULL) && !cJSON_Compare(a, b, true))
                return audit_fail(err, AUDIT_EDATA,
                                  "%s and %s differ in context.%s: not shards of one audit",
                                  shards[0].path, shards[s].path, shard_config_keys[k]);
        }
    }
    qsort(shards, count, sizeof(*shards), compare_shards);
    for (size_t s = 1; s < count; s++) {
        if (shards[s].index == shards[s - 1].index)
            return audit_fail(err, AUDIT_EDATA,
                              "%s and %s are both shard %u/%u: overlapping shards (each record "
                              "would appear twice)",
                              shards[s - 1].path, shards[s].path, shards[s].index, shards[s].count);
    }
    return AUDIT_OK;
}

/* Every shard's records in global order (*records, *record_count), refused if one is twice. */
static int collect_records(const struct shard_input *shards, size_t count,
                           struct merged_record **records_out, size_t *record_count,
                           struct audit_error *err)
{
    size_t total = 0, n = 0;
    for (size_t s = 0; s < count; s++)
        total += shards[s].document.record_count;
    struct merged_record *records = calloc(total ? total : 1, sizeof(*records));
    *records_out = records;
    *record_count = 0;
    if (!records)
        return audit_fail(err, AUDIT_ENOMEM, "out of memory merging reports");
    for (size_t s = 0; s < count; s++) {
        size_t r = 0;
        const cJSON *record;
        cJSON_ArrayForEach(record, json_member(shards[s].root, KEY_RECORDS)) {
            records[n].global_index = (uint64_t)shards[s].document.records[r++].global_index;
            records[n].json = record;
            records[n++].shard = s;
        }
    }
    *record_count = n;
    qsort(records, n, sizeof(*records), compare_merged_records);
    for (size_t r = 1; r < n; r++) {
        if (records[r].global_index == records[r - 1].global_index)
            return audit_fail(err, AUDIT_EDATA,
                              "%s and %s both hold global record %llu: overlapping shards",
                              shards[records[r - 1].shard].path, shards[records[r].shard].path,
                              (unsigned long long)records[r].global_index);
    }
    return AUDIT_OK;
}

/* complete, stop_reason and exit_code of the merged report: the first incomplete shard's
 * reason, or the shards missing; the highest exit code. */
static void merged_outcome(cJSON *merged, const struct shard_input *shards, size_t count,
                           uint32_t missing_shards)
{
    bool complete = missing_shards == 0;
    char stop_reason[AUDIT_ERROR_MESSAGE_BYTES] = "";
    double exit_code = 0;
    for (size_t s = 0; s < count; s++) {
        const struct report_document *document = &shards[s].document;
        const cJSON *code = json_member(shards[s].root, KEY_EXIT_CODE);
        if (cJSON_IsNumber(code) && code->valuedouble > exit_code)
            exit_code = code->valuedouble;
        if (!document->complete && complete) {
            complete = false;
            snprintf(stop_reason, sizeof(stop_reason), "shard %u/%u (%s): %s", shards[s].index,
                     shards[s].count, shards[s].path,
                     document->stop_reason ? document->stop_reason : "incomplete");
        }
    }
    if (missing_shards) {
        size_t used = (size_t)snprintf(stop_reason, sizeof(stop_reason),
                                       "%u of %u shards missing:", missing_shards, shards[0].count);
        size_t next = 0;
        for (uint32_t i = 0; i < shards[0].count && used + 16 < sizeof(stop_reason); i++) {
            if (next < count && shards[next].index == i) {
                next++;
                continue;
            }
            used += (size_t)snprintf(stop_reason + used, sizeof(stop_reason) - used, " %u", i);
        }
    }
    cJSON_AddBoolToObject(merged, KEY_COMPLETE, complete);
    if (stop_reason[0])
        cJSON_AddStringToObject(merged, KEY_STOP_REASON, stop_reason);
    else
        cJSON_AddNullToObject(merged, KEY_STOP_REASON);
    cJSON_AddNumberToObject(merged, KEY_EXIT_CODE, exit_code);
}

/* Every shard reads every input, so each reports the same input errors: keep one of each. */
static void merge_input_errors(cJSON *input_errors, const struct shard_input *shards, size_t count)
{
    for (size_t s = 0; s < count; s++) {
        const cJSON *error;
        cJSON_ArrayForEach(error, shards[s].document.input_errors) {
            bool seen = false;
            const cJSON *kept;
            cJSON_ArrayForEach(kept, input_errors)
                seen = seen || cJSON_Compare(kept, error, true);
            if (!seen)
                cJSON_AddItemToArray(input_errors, cJSON_Duplicate(error, 1));
        }
    }
}

/* The merged report from checked shards and their records in global order. */
static cJSON *merged_report(const struct shard_input *shards, size_t count,
                            const struct merged_record *records, size_t record_count,
                            uint32_t missing_shards)
{
    cJSON *merged = cJSON_CreateObject();
    if (!merged)
        return NULL;
    cJSON_AddStringToObject(merged, KEY_SCHEMA, REPORT_SCHEMA);
    cJSON_AddNumberToObject(merged, KEY_SCHEMA_VERSION, REPORT_SCHEMA_VERSION);
    merged_outcome(merged, shards, count, missing_shards);
    cJSON *context = cJSON_Duplicate(shards[0].document.context, 1);
    if (!context)
        goto no_memory;
    cJSON_ReplaceItemInObjectCaseSensitive(context, KEY_SHARD, cJSON_CreateNull());
    cJSON_AddItemToObject(merged, KEY_CONTEXT, context);
    cJSON_AddItemToObject(merged, KEY_SHARDS, shard_list_json(shards, count));
    cJSON *merged_records = cJSON_AddArrayToObject(merged, KEY_RECORDS);
    cJSON *input_errors = cJSON_AddArrayToObject(merged, KEY_INPUT_ERRORS);
    if (!merged_records || !input_errors)
        goto no_memory;
    for (size_t r = 0; r < record_count; r++)
        cJSON_AddItemToArray(merged_records, cJSON_Duplicate(records[r].json, 1));
    merge_input_errors(input_errors, shards, count);
    cJSON *cross_device = merge_cross_device(shards, count, records, record_count);
    if (cross_device)
        cJSON_AddItemToObject(merged, KEY_CROSS_DEVICE, cross_device);
    cJSON *summary = report_summary_json(merged_records, input_errors);
    if (!summary)
        goto no_memory;
    cJSON_AddItemToObject(merged, KEY_SUMMARY, summary);
    return merged;
no_memory:
    cJSON_Delete(merged);
    return NULL;
}

int gate_merge_reports(const char *const *paths, const cJSON *const *roots, size_t count,
                       cJSON **merged_out, uint32_t *missing_shards, struct audit_error *err)
{
    struct shard_input *shards = calloc(count ? count : 1, sizeof(*shards));
    struct merged_record *records = NULL;
    size_t record_count = 0;
    int status = AUDIT_OK;
    *merged_out = NULL;
    *missing_shards = 0;
    if (!shards)
        return audit_fail(err, AUDIT_ENOMEM, "out of memory merging reports");
    if (count == 0) {
        status = audit_fail(err, AUDIT_EUSAGE, "no shard report to merge");
        goto done;
    }
    for (size_t s = 0; s < count; s++) {
        shards[s].path = paths[s];
        shards[s].root = roots[s];
        status = read_shard(&shards[s], err);
        if (status < 0)
            goto done;
    }
    if ((status = check_shards(shards, count, err)) < 0)
        goto done;
    *missing_shards = shards[0].count - (uint32_t)count;
    if ((status = collect_records(shards, count, &records, &record_count, err)) < 0)
        goto done;
    *merged_out = merged_report(shards, count, records, record_count, *missing_shards);
    if (!*merged_out)
        status = audit_fail(err, AUDIT_ENOMEM, "out of memory merging reports");
done:
    for (size_t s = 0; s < count; s++)
        report_document_release(&shards[s].document);
    free(shards);
    free(records);
    return status;
}

static double summary_count(const cJSON *summary, const char *key)
{
    const cJSON *item = json_member(summary, key);
    return cJSON_IsNumber(item) ? item->valuedouble : 0;
}

void gate_merge_totals(const cJSON *merged, struct gate_merge_totals *totals)
{
    const cJSON *summary = json_member(merged, KEY_SUMMARY);
    totals->records = summary_count(summary, KEY_RECORDS);
    totals->backends_fail = summary_count(summary, KEY_BACKENDS_FAIL);
    totals->input_errors = summary_count(summary, KEY_INPUT_ERRORS);
    totals->stop_reason = cJSON_GetStringValue(json_member(merged, KEY_STOP_REASON));
}
