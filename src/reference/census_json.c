#include "census_json.h"

#include <stdio.h>
#include <string.h>

#include "capture.h"
#include "census.h"
#include "json_util.h"

cJSON *census_json_begin(const struct document_context *context,
                         const struct census_selection *selection)
{
    cJSON *document = document_begin(CENSUS_SCHEMA, CENSUS_SCHEMA_VERSION, context, NULL);
    cJSON *ks = document ? cJSON_AddArrayToObject(document, "ks") : NULL;
    if (!ks || !cJSON_AddArrayToObject(document, "files")) {
        cJSON_Delete(document);
        return NULL;
    }
    for (size_t i = 0; i < selection->k_count; i++)
        cJSON_AddItemToArray(ks, cJSON_CreateNumber(selection->ks[i]));
    return document;
}

static bool record_selected(const struct census_selection *selection, uint32_t index,
                            bool *seen)
{
    bool selected = selection->record_count == 0;
    for (size_t i = 0; i < selection->record_count; i++) {
        if (selection->records[i] == index) {
            selected = true;
            if (seen)
                seen[i] = true;
        }
    }
    return selected;
}

static const char *read_state_name(int status, const struct capture_reader *reader)
{
    if (status == AUDIT_ENOMEM)
        return "out_of_memory";
    if (status == AUDIT_EDATA && reader) {
        switch (capture_reader_state(reader)) {
        case CAPTURE_READ_TRUNCATED: return "truncated";
        case CAPTURE_READ_CORRUPT: return "corrupt";
        default: return "bad_record";
        }
    }
    return "unreadable";
}

/* "status" and "error" of a file whose reading ended early (kind: what ended it). */
static void add_file_error(cJSON *file, const struct census_file_outcome *outcome,
                           const char *kind)
{
    cJSON_AddStringToObject(file, KEY_STATUS, kind);
    cJSON *error = cJSON_AddObjectToObject(file, KEY_ERROR);
    if (!error)
        return;
    if (outcome->opened) {
        json_add_u64(error, KEY_RECORD, outcome->next_record);
        json_add_u64(error, "offset_bytes", outcome->next_offset);
    }
    cJSON_AddStringToObject(error, KEY_KIND, kind);
    cJSON_AddStringToObject(error, KEY_MESSAGE, outcome->message);
}

int census_json_add_file(cJSON *document, const char *path,
                         const struct census_selection *selection,
                         struct census_file_outcome *outcome)
{
    struct capture_reader *reader = NULL;
    struct audit_error err = { 0 };
    bool failed_in_census = false;
    bool *seen = outcome->seen;
    cJSON *file = cJSON_CreateObject();
    cJSON *records = cJSON_CreateArray();
    memset(outcome, 0, sizeof(*outcome));
    outcome->seen = seen;
    if (!file || !records || !cJSON_AddItemToArray(cJSON_GetObjectItem(document, "files"), file)) {
        cJSON_Delete(file);
        cJSON_Delete(records);
        return AUDIT_ENOMEM;
    }
    cJSON_AddStringToObject(file, KEY_PATH, path);

    int status = capture_open(&reader, path, &err);
    outcome->opened = reader != NULL;
    while (status == AUDIT_OK) {
        struct capture_record record;
        int result = capture_read_record(reader, &record, &err);
        if (result <= 0) {
            status = result;
            break;
        }
        outcome->next_record = record.index + 1;
        outcome->next_offset = capture_record_end_offset(&record);
        if (record_selected(selection, record.index, seen)) {
            cJSON *item = NULL;
            status = census_record_json(&record, selection->ks, selection->k_count, &item, NULL,
                                        &err);
            if (status == AUDIT_OK && selection->record_extra) {
                status = selection->record_extra(selection->record_user, &record, item, &err);
                if (status < 0)
                    cJSON_Delete(item);
            }
            if (status == AUDIT_OK) {
                cJSON_AddItemToArray(records, item);
                outcome->records++;
            } else {
                audit_error_prefix(&err, "%s", path);
                failed_in_census = true;
                outcome->next_record = record.index; /* the record at fault */
                outcome->next_offset = record.file_offset;
            }
        }
        capture_record_free(&record);
    }
    if (status < 0) {
        outcome->status = status;
        snprintf(outcome->message, sizeof(outcome->message), "%s", err.message);
        add_file_error(file, outcome, failed_in_census ? audit_status_name(status)
                                                       : read_state_name(status, reader));
    } else {
        cJSON_AddStringToObject(file, KEY_STATUS, "ok");
        cJSON_AddNullToObject(file, KEY_ERROR);
    }
    json_add_u64(file, "record_count", (uint64_t)cJSON_GetArraySize(records));
    cJSON_AddItemToObject(file, KEY_RECORDS, records);
    capture_close(reader);
    return AUDIT_OK;
}

int census_json_finish(cJSON *document, uint64_t files, uint64_t records, int worst_status)
{
    cJSON *summary = cJSON_AddObjectToObject(document, KEY_SUMMARY);
    if (!summary)
        return AUDIT_ENOMEM;
    json_add_u64(summary, "files", files);
    json_add_u64(summary, KEY_RECORDS, records);
    cJSON_AddStringToObject(summary, KEY_STATUS, audit_status_name(worst_status));
    return AUDIT_OK;
}
