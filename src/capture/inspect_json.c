#include "inspect_json.h"

#include <inttypes.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "capture.h"
#include "capture_tail.h"
#include "input_file.h"
#include "json_util.h"

cJSON *inspect_json_begin(const struct document_context *context)
{
    cJSON *document = document_begin(INSPECT_SCHEMA, INSPECT_SCHEMA_VERSION, context, NULL);
    if (document && !cJSON_AddArrayToObject(document, "files")) {
        cJSON_Delete(document);
        return NULL;
    }
    return document;
}

static cJSON *describe_record(const struct capture_record *record)
{
    cJSON *item = cJSON_CreateObject();
    if (!item)
        return NULL;
    int32_t length_min = record->lengths[0], length_max = record->lengths[0];
    for (uint32_t b = 1; b < record->rows; b++) {
        if (record->lengths[b] < length_min)
            length_min = record->lengths[b];
        if (record->lengths[b] > length_max)
            length_max = record->lengths[b];
    }
    json_add_u64(item, KEY_INDEX, record->index);
    json_add_u64(item, "offset_bytes", record->file_offset);
    json_add_u64(item, KEY_ROWS, record->rows);
    json_add_u64(item, KEY_K, record->k);
    json_add_u64(item, KEY_ROW_STRIDE, record->row_stride);
    cJSON_AddNumberToObject(item, "length_min", length_min);
    cJSON_AddNumberToObject(item, "length_max", length_max);
    cJSON_AddBoolToObject(item, KEY_ROW_STARTS, record->row_starts != NULL);
    cJSON_AddBoolToObject(item, KEY_PAGE_TABLE, record->page_size != 0);
    json_add_u64(item, KEY_PAGE_SIZE, record->page_size);
    json_add_u64(item, "page_table_cols", record->page_table_cols);
    cJSON_AddBoolToObject(item, KEY_ENGINE_INDICES, record->engine_indices != NULL);
    cJSON_AddBoolToObject(item, KEY_COMPRESSED, record->compressed);
    json_add_u64(item, "stored_bytes", record->stored_payload_bytes);
    json_add_u64(item, "raw_bytes", capture_record_raw_payload_bytes(record));
    json_add_hex(item, KEY_PAYLOAD_SHA256, record->payload_sha256, sizeof(record->payload_sha256));
    cJSON *metadata = cJSON_Parse(record->metadata_json);
    if (metadata)
        cJSON_AddItemToObject(item, KEY_METADATA, metadata);
    else
        cJSON_AddStringToObject(item, KEY_METADATA, record->metadata_json);
    cJSON_AddStringToObject(item, "checksum", "ok");
    return item;
}

/* What ended a file early, counted in totals. */
static const char *file_status_of(int status, const struct capture_reader *reader,
                                  struct inspect_totals *totals)
{
    enum capture_read_state state = reader ? capture_reader_state(reader) : CAPTURE_READ_OK;
    if (status == AUDIT_EDATA && state == CAPTURE_READ_TRUNCATED) {
        totals->truncated_files++;
        return "truncated";
    }
    if (status == AUDIT_EDATA && state == CAPTURE_READ_CORRUPT) {
        totals->corrupt_files++;
        return "corrupt";
    }
    if (status == AUDIT_ENOMEM && state == CAPTURE_READ_TOO_LARGE) {
        totals->too_large_files++;
        return "too_large";
    }
    if (status == AUDIT_ENOMEM) {
        totals->out_of_memory_files++;
        return "out_of_memory";
    }
    totals->unreadable_files++;
    return "unreadable";
}

/* 'PATH' for a shell command line, into quoted (false when it does not fit). */
static bool shell_quote(const char *path, char *quoted, size_t size)
{
    size_t used = 0;
    if (size < 3)
        return false;
    quoted[used++] = '\'';
    for (const char *p = path; *p; p++) {
        const char *piece = *p == '\'' ? "'\\''" : NULL;
        size_t length = piece ? 4 : 1;
        if (used + length + 2 > size)
            return false;
        if (piece)
            memcpy(quoted + used, piece, length);
        else
            quoted[used] = *p;
        used += length;
    }
    quoted[used++] = '\'';
    quoted[used] = '\0';
    return true;
}

/* The repair of a file whose reading stopped at outcome->next_offset after intact records: see
 * struct inspect_file_outcome. Adds "repair" and "complete_record_after_bytes" to error. */
static void advise_repair(const char *path, bool truncated, struct inspect_file_outcome *outcome,
                          cJSON *error)
{
    struct audit_error err = { 0 };
    uint64_t size = 0, after = 0, damage = outcome->next_offset;
    bool found = false;
    char quoted[4096];
    int fd = -1;
    if (shell_quote(path, quoted, sizeof(quoted)) &&
        input_file_open(path, &fd, &size, &err) == AUDIT_OK &&
        capture_find_complete_record(fd, path, damage, size, &found, &after, &err) == AUDIT_OK) {
        if (found)
            snprintf(outcome->repair, sizeof(outcome->repair),
                     "tail -c +%" PRIu64 " %s >%s.rest && truncate -s %" PRIu64
                     " %s && cat %s.rest >>%s && rm %s.rest",
                     after + 1, quoted, quoted, damage, quoted, quoted, quoted, quoted);
        else if (outcome->next_record > 0 || truncated)
            snprintf(outcome->repair, sizeof(outcome->repair), "truncate -s %" PRIu64 " %s",
                     damage, quoted);
        outcome->complete_record_after = found;
        outcome->complete_record_offset = after;
    }
    if (fd >= 0)
        close(fd);
    if (outcome->repair[0])
        cJSON_AddStringToObject(error, "repair", outcome->repair);
    else
        cJSON_AddNullToObject(error, "repair");
    if (found)
        json_add_u64(error, "complete_record_after_bytes", after);
    else
        cJSON_AddNullToObject(error, "complete_record_after_bytes");
}

/* Every record of the file into records; returns how the reading ended (0 at a clean end). */
static int read_records(cJSON *records, const char *path, struct capture_reader *reader,
                        struct inspect_totals *totals, struct inspect_file_outcome *outcome,
                        struct audit_error *err)
{
    for (;;) {
        struct capture_record record;
        int result = capture_read_record(reader, &record, err);
        if (result <= 0)
            return result;
        cJSON *item = describe_record(&record);
        outcome->next_record = record.index + 1;
        outcome->next_offset = capture_record_end_offset(&record);
        capture_record_free(&record);
        if (!item)
            return audit_fail(err, AUDIT_ENOMEM, "%s: out of memory listing records", path);
        cJSON_AddItemToArray(records, item);
        totals->records++;
    }
}

int inspect_json_add_file(cJSON *document, const char *path, struct inspect_totals *totals,
                          struct inspect_file_outcome *outcome)
{
    struct capture_reader *reader = NULL;
    struct audit_error err = { 0 };
    struct stat info;
    cJSON *file = cJSON_CreateObject();
    cJSON *records = cJSON_CreateArray();
    memset(outcome, 0, sizeof(*outcome));
    outcome->file_status = "ok";
    if (!file || !records || !cJSON_AddItemToArray(cJSON_GetObjectItem(document, "files"), file)) {
        cJSON_Delete(file);
        cJSON_Delete(records);
        totals->out_of_memory = true;
        return AUDIT_ENOMEM;
    }
    totals->files++;
    cJSON_AddStringToObject(file, KEY_PATH, path);
    if (stat(path, &info) == 0 && S_ISREG(info.st_mode))
        json_add_u64(file, "size_bytes", (uint64_t)info.st_size);
    else
        cJSON_AddNullToObject(file, "size_bytes");

    int status = capture_open(&reader, path, &err);
    if (status == AUDIT_OK)
        status = read_records(records, path, reader, totals, outcome, &err);
    if (status < 0) {
        outcome->status = status;
        outcome->file_status = file_status_of(status, reader, totals);
        snprintf(outcome->message, sizeof(outcome->message), "%s", err.message);
    }
    cJSON_AddStringToObject(file, KEY_STATUS, outcome->file_status);
    json_add_u64(file, "record_count", (uint64_t)cJSON_GetArraySize(records));
    if (status < 0) {
        cJSON *error = cJSON_AddObjectToObject(file, KEY_ERROR);
        if (error) {
            if (reader) {
                json_add_u64(error, KEY_RECORD, outcome->next_record);
                json_add_u64(error, "offset_bytes", outcome->next_offset);
            }
            cJSON_AddStringToObject(error, KEY_KIND, outcome->file_status);
            cJSON_AddStringToObject(error, KEY_MESSAGE, outcome->message);
            if (status == AUDIT_EDATA && reader)
                advise_repair(path, strcmp(outcome->file_status, "truncated") == 0, outcome,
                              error);
        }
    } else {
        cJSON_AddNullToObject(file, KEY_ERROR);
    }
    cJSON_AddItemToObject(file, KEY_RECORDS, records);
    capture_close(reader);
    return AUDIT_OK;
}

int inspect_json_finish(cJSON *document, const struct inspect_totals *totals)
{
    cJSON *summary = cJSON_AddObjectToObject(document, KEY_SUMMARY);
    if (!summary)
        return AUDIT_ENOMEM;
    json_add_u64(summary, "files", totals->files);
    json_add_u64(summary, KEY_RECORDS, totals->records);
    json_add_u64(summary, "truncated_files", totals->truncated_files);
    json_add_u64(summary, "corrupt_files", totals->corrupt_files);
    json_add_u64(summary, "too_large_files", totals->too_large_files);
    json_add_u64(summary, "unreadable_files", totals->unreadable_files);
    json_add_u64(summary, "out_of_memory_files", totals->out_of_memory_files);
    return AUDIT_OK;
}
