/* What the engine writes into the run report beside report.c's records and entries
 * (docs/REPORT.md "Scale-out"): each record's global number, per_device[] lists of --devices
 * passes, the shard, device list and concurrency of the context, the cross_device block, and the
 * plugin a backend comes from. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "audit_internal.h"
#include "gate.h"
#include "json_util.h"
#include "plugin.h"

void audit_entry_add_plugin(cJSON *entry, const struct topk_backend *backend)
{
    const char *path = plugin_backend_path(backend);
    if (!entry || !path)
        return;
    cJSON *plugin = cJSON_AddObjectToObject(entry, KEY_PLUGIN);
    if (!plugin)
        return;
    cJSON_AddStringToObject(plugin, KEY_PATH, path);
    const char *sha256 = plugin_backend_sha256(backend);
    if (sha256)
        cJSON_AddStringToObject(plugin, KEY_SHA256, sha256);
    else
        cJSON_AddNullToObject(plugin, KEY_SHA256);
}

/* The device of --devices entry index as per_device[] and cross_device show it (info NULL when
 * it could not be described). */
static cJSON *device_identity_json(size_t index, int ordinal, const struct gpu_device_info *info)
{
    cJSON *json = cJSON_CreateObject();
    if (!json)
        return NULL;
    json_add_u64(json, KEY_INDEX, index);
    cJSON_AddNumberToObject(json, KEY_ORDINAL, ordinal);
    if (!info) {
        cJSON_AddNullToObject(json, KEY_NAME);
        return json;
    }
    document_device_add(json, info);
    cJSON_AddBoolToObject(json, KEY_SMEM_EMULATED, info->smem_emulated);
    cJSON_AddNumberToObject(json, KEY_DRIVER_VERSION_NUMBER, info->driver_version);
    cJSON_AddNumberToObject(json, KEY_RUNTIME_VERSION_NUMBER, info->runtime_version);
    return json;
}

bool audit_identify_pass(struct audit_state *state, size_t pass, int ordinal,
                         const struct gpu_device_info *info, cJSON *devices)
{
    cJSON_Delete(state->pass.device_identity);
    state->pass.device_identity = device_identity_json(pass, ordinal, info);
    if (!state->pass.device_identity)
        return false;
    cJSON_AddItemToArray(devices, cJSON_Duplicate(state->pass.device_identity, 1));
    return true;
}

cJSON *audit_devices_begin(struct audit_state *state)
{
    cJSON *devices = cJSON_CreateArray();
    if (devices && state->device_available && state->device_count > 0)
        (void)audit_identify_pass(state, 0, state->devices[0],
                                  audit_probed_info(state, state->devices[0]), devices);
    return devices;
}

/* The first pass's record of file and index, searched from the cursor on (passes replay the
 * records in the same order, so this is usually the next one). */
static cJSON *find_record(struct audit_state *state, const char *file, uint32_t index)
{
    const struct audit_records_added *added = &state->added;
    for (size_t round = 0; round < 2; round++) {
        const size_t start = round == 0 ? state->pass.next_slot : 0;
        const size_t end = round == 0 ? added->count : state->pass.next_slot;
        for (size_t i = start; i < end; i++) {
            if (added->slots[i].index == index && strcmp(added->slots[i].file, file) == 0) {
                state->pass.next_slot = i + 1;
                return added->slots[i].json;
            }
        }
    }
    return NULL;
}

/* Remembers a record of the first pass for the later ones. */
static int remember_record(struct audit_state *state, const char *file, uint32_t index,
                           cJSON *json)
{
    struct audit_records_added *added = &state->added;
    if (added->count == added->capacity) {
        size_t capacity = added->capacity ? 2 * added->capacity : 64;
        struct audit_record_slot *grown = realloc(added->slots, capacity * sizeof(*grown));
        if (!grown)
            return AUDIT_ENOMEM;
        added->slots = grown;
        added->capacity = capacity;
    }
    added->slots[added->count++] = (struct audit_record_slot){ file, index, json };
    return AUDIT_OK;
}

void audit_records_added_free(struct audit_records_added *added)
{
    free(added->slots);
    memset(added, 0, sizeof(*added));
}

int audit_add_record(struct audit_state *state, const struct record_result *result,
                     cJSON **entries, uint64_t global_index, struct audit_error *err)
{
    if (report_add_record_entries(&state->report, result, entries, state->options->backend_count,
                                  err) < 0)
        return err->code;
    cJSON *last = state->added.count ? state->added.slots[state->added.count - 1].json : NULL;
    cJSON *added = last ? last->next : state->report.records->child;
    if (!added || !json_add_u64(added, KEY_GLOBAL_INDEX, global_index) ||
        remember_record(state, result->file, result->record->index, added) < 0)
        return audit_fail(err, AUDIT_ENOMEM, "out of memory reporting %s record %u", result->file,
                          result->record->index);
    if (state->pass.device_identity)
        return report_record_add_per_device(added, added, state->pass.device_identity, err);
    return AUDIT_OK;
}

int audit_add_device_entries(struct audit_state *state, const char *file, uint32_t index,
                             const cJSON *source, struct audit_error *err)
{
    const cJSON *entry;
    /* The table's time lines cover every device's work. */
    cJSON_ArrayForEach(entry, cJSON_GetObjectItemCaseSensitive(source, KEY_BACKENDS)) {
        struct report_entry_outcome outcome;
        report_entry_outcome(entry, &outcome);
        report_count_time(&state->report, outcome.name, &outcome.time);
        if (outcome.verdict == VERDICT_FAIL)
            state->any_failure = true;
    }
    cJSON *target = find_record(state, file, index);
    if (!target)
        return AUDIT_OK;
    return report_record_add_per_device(target, source, state->pass.device_identity, err);
}

int audit_add_device_pass(struct audit_state *state, const struct record_result *result,
                          cJSON **entries, struct audit_error *err)
{
    cJSON *json = report_record_json_entries(result, entries, state->options->backend_count);
    if (!json)
        return audit_fail(err, AUDIT_ENOMEM, "out of memory reporting %s record %u", result->file,
                          result->record->index);
    int status = audit_add_device_entries(state, result->file, result->record->index, json, err);
    cJSON_Delete(json);
    return status;
}

void audit_add_scale_out_context(struct audit_state *state)
{
    const struct audit_options *options = state->options;
    cJSON *context = state->report.context;
    if (!context)
        return;
    if (options->shard_count) {
        cJSON *shard = cJSON_AddObjectToObject(context, KEY_SHARD);
        if (shard) {
            json_add_u64(shard, KEY_INDEX, options->shard_index);
            json_add_u64(shard, KEY_COUNT, options->shard_count);
        }
    } else {
        cJSON_AddNullToObject(context, KEY_SHARD);
    }
    if (options->devices_text) {
        cJSON *devices = cJSON_AddArrayToObject(context, KEY_DEVICES);
        for (size_t i = 0; devices && i < state->device_count; i++)
            cJSON_AddItemToArray(devices, cJSON_CreateNumber(state->devices[i]));
        cJSON_AddBoolToObject(context, KEY_DEVICES_CONCURRENT, state->devices_concurrent);
    } else {
        cJSON_AddNullToObject(context, KEY_DEVICES);
        cJSON_AddNullToObject(context, KEY_DEVICES_CONCURRENT);
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
    cJSON_AddItemToObject(state->report.root, KEY_CROSS_DEVICE, block);
    if (gate_cross_device_failed(block))
        state->any_failure = true;
    if (callbacks->cross_device)
        callbacks->cross_device(callbacks->user, block, state->device_available);
    return AUDIT_OK;
}
