/* Device passes (--devices) and the report entries the engine adds itself: each record's
 * global number, per_device[] lists, the shard and device list of the context, and the
 * cross_device block (docs/REPORT.md "Several devices"). */
#include <stdio.h>
#include <string.h>

#include "audit_internal.h"
#include "gate.h"
#include "json_util.h"

static cJSON *json_child(const cJSON *object, const char *key)
{
    return cJSON_GetObjectItemCaseSensitive(object, key);
}

bool audit_entry_failed(const cJSON *entry)
{
    const cJSON *verdict = json_child(entry, "verdict");
    return cJSON_IsString(verdict) && strcmp(verdict->valuestring, "fail") == 0;
}

cJSON *audit_device_identity_json(size_t index, int ordinal, const struct gpu_device_info *info)
{
    cJSON *json = cJSON_CreateObject();
    char text[32];
    if (!json)
        return NULL;
    json_add_u64(json, "index", index);
    cJSON_AddNumberToObject(json, "ordinal", ordinal);
    if (!info) {
        cJSON_AddNullToObject(json, "name");
        return json;
    }
    cJSON_AddStringToObject(json, "name", info->name);
    snprintf(text, sizeof(text), "%d.%d", info->cc_major, info->cc_minor);
    cJSON_AddStringToObject(json, "compute_capability", text);
    cJSON_AddNumberToObject(json, "sm_count", info->sm_count);
    json_add_u64(json, "smem_per_sm_bytes", info->smem_per_sm);
    cJSON_AddBoolToObject(json, "smem_emulated", info->smem_emulated);
    cJSON_AddNumberToObject(json, "driver_version_number", info->driver_version);
    cJSON_AddNumberToObject(json, "runtime_version_number", info->runtime_version);
    return json;
}

/* Appends the backends of source (a record object of this pass) to the per_device[] lists of
 * target's backends (the record in the report), each with this pass's device. */
static int attach_per_device(const struct audit_state *state, cJSON *target, const cJSON *source,
                             struct audit_error *err)
{
    const cJSON *target_list = json_child(target, "backends");
    const cJSON *source_list = json_child(source, "backends");
    cJSON *target_backend = target_list ? target_list->child : NULL;
    const cJSON *source_backend = source_list ? source_list->child : NULL;
    for (; target_backend && source_backend;
         target_backend = target_backend->next, source_backend = source_backend->next) {
        const cJSON *name = json_child(source_backend, "name");
        const cJSON *target_name = json_child(target_backend, "name");
        if (!cJSON_IsString(name) || !cJSON_IsString(target_name) ||
            strcmp(name->valuestring, target_name->valuestring) != 0)
            return audit_fail(err, AUDIT_EDATA, "--devices: the backends of a record differ "
                                                "between passes (%s)",
                              cJSON_IsString(name) ? name->valuestring : "unnamed");
        /* Copied before per_device is added: in the first pass source is target. */
        cJSON *copy = cJSON_Duplicate(source_backend, 1);
        cJSON *identity = cJSON_Duplicate(state->pass.device_identity, 1);
        cJSON *list = json_child(target_backend, "per_device");
        if (!list)
            list = cJSON_AddArrayToObject(target_backend, "per_device");
        if (!copy || !identity || !list) {
            cJSON_Delete(copy);
            cJSON_Delete(identity);
            return audit_fail(err, AUDIT_ENOMEM, "out of memory recording per-device results");
        }
        cJSON_DeleteItemFromObjectCaseSensitive(copy, "per_device");
        cJSON_AddItemToObject(copy, "device", identity);
        cJSON_AddItemToArray(list, copy);
    }
    return AUDIT_OK;
}

/* The report's record for file and index, searched from the cursor on (passes replay the
 * records in the same order, so this is usually the next one). */
static cJSON *find_record_json(struct audit_state *state, const char *file, uint32_t index)
{
    cJSON *records = state->report.records;
    for (int round = 0; round < 2; round++) {
        cJSON *start = round == 0 ? state->pass.record_cursor : records->child;
        for (cJSON *record = start; record; record = record->next) {
            if (round == 1 && record == state->pass.record_cursor)
                break;
            const cJSON *record_file = json_child(record, "file");
            const cJSON *record_index = json_child(record, "index");
            if (cJSON_IsString(record_file) && strcmp(record_file->valuestring, file) == 0 &&
                cJSON_IsNumber(record_index) && (uint32_t)record_index->valuedouble == index) {
                state->pass.record_cursor = record->next;
                return record;
            }
        }
    }
    return NULL;
}

int audit_add_record(struct audit_state *state, const struct record_result *result,
                     cJSON **entries, uint64_t global_index, struct audit_error *err)
{
    if (report_add_record_entries(&state->report, result, entries, state->options->backend_count,
                                  err) < 0)
        return err->code;
    cJSON *added = state->pass.record_cursor ? state->pass.record_cursor->next
                                             : state->report.records->child;
    if (!added || !json_add_u64(added, "global_index", global_index))
        return audit_fail(err, AUDIT_ENOMEM, "out of memory reporting %s record %u", result->file,
                          result->record->index);
    state->pass.record_cursor = added;
    if (state->pass.device_identity)
        return attach_per_device(state, added, added, err);
    return AUDIT_OK;
}

int audit_add_device_pass(struct audit_state *state, const struct record_result *result,
                          cJSON **entries, struct audit_error *err)
{
    const struct audit_options *options = state->options;
    /* The table's time lines cover every device's work. */
    for (size_t i = 0; i < options->backend_count; i++) {
        struct time_breakdown time;
        time_breakdown_from_json(json_child(entries[i], "time_breakdown_ms"), &time);
        report_count_time(&state->report, options->backends[i]->name, &time);
    }
    cJSON *json = report_record_json_entries(result, entries, options->backend_count);
    if (!json)
        return audit_fail(err, AUDIT_ENOMEM, "out of memory reporting %s record %u", result->file,
                          result->record->index);
    cJSON *target = find_record_json(state, result->file, result->record->index);
    int status = AUDIT_OK;
    if (target)
        status = attach_per_device(state, target, json, err);
    cJSON_Delete(json);
    return status;
}

/* A device that cannot be described skips the GPU work of its pass (the report says why). Each
 * worker opens the device itself. */
void audit_pass_start(struct audit_state *state, size_t pass, cJSON *devices)
{
    const struct audit_callbacks *callbacks = state->callbacks;
    const int ordinal = state->devices[pass];
    const struct gpu_device_info *info = audit_probed_info(state, ordinal);
    /* The session worker replays on one device: the next record forks one for this pass's. */
    worker_session_stop(&state->pass.session);
    state->pass.ordinal = ordinal;
    state->device_failed = false;
    cJSON_Delete(state->pass.device_identity);
    state->pass.device_identity = NULL;
    if (!info) {
        char message[AUDIT_ERROR_MESSAGE_BYTES];
        snprintf(message, sizeof(message), "device %d: %.900s", ordinal,
                 state->probe.query_error[0] ? state->probe.query_error : "cannot be queried");
        audit_device_lost(state, message);
    }
    state->pass.device_identity = audit_device_identity_json(pass, ordinal, info);
    if (!state->pass.device_identity) {
        audit_stop(state, AUDIT_ENOMEM, "out of memory describing a device");
        return;
    }
    cJSON_AddItemToArray(devices, cJSON_Duplicate(state->pass.device_identity, 1));
    if (callbacks->pass_start)
        callbacks->pass_start(callbacks->user, pass, ordinal, info);
}

void audit_add_scale_out_context(struct audit_state *state)
{
    const struct audit_options *options = state->options;
    cJSON *context = json_child(state->report.root, "context");
    if (!context)
        return;
    if (options->shard_count) {
        cJSON *shard = cJSON_AddObjectToObject(context, "shard");
        if (shard) {
            json_add_u64(shard, "index", options->shard_index);
            json_add_u64(shard, "count", options->shard_count);
        }
    } else {
        cJSON_AddNullToObject(context, "shard");
    }
    if (options->devices_text) {
        cJSON *devices = cJSON_AddArrayToObject(context, "devices");
        for (size_t i = 0; devices && i < state->device_count; i++)
            cJSON_AddItemToArray(devices, cJSON_CreateNumber(state->devices[i]));
    } else {
        cJSON_AddNullToObject(context, "devices");
    }
}

int audit_add_cross_device(struct audit_state *state, cJSON *devices)
{
    const struct audit_callbacks *callbacks = state->callbacks;
    cJSON *block;
    if (state->device_available) {
        block = gate_cross_device_block(state->report.records, devices);
    } else {
        cJSON *requested = cJSON_CreateString(state->options->devices_text);
        block = gate_cross_device_unavailable(state->unavailable_reason, requested);
        cJSON_Delete(requested);
    }
    if (!block)
        return AUDIT_ENOMEM;
    cJSON_AddItemToObject(state->report.root, "cross_device", block);
    const cJSON *entry;
    cJSON_ArrayForEach(entry, json_child(block, "entries"))
        if (audit_entry_failed(entry))
            state->any_failure = true;
    if (callbacks->cross_device)
        callbacks->cross_device(callbacks->user, block, state->device_available);
    return AUDIT_OK;
}
