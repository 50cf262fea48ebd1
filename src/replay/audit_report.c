/* What the engine writes into the run report beside report.c's records and entries
 * (docs/REPORT.md "Scale-out"): each record's global number, per_device[] lists of --devices
 * passes, the shard and device list of the context, the cross_device block, and the plugin a
 * backend comes from. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "audit_internal.h"
#include "gate.h"
#include "json_util.h"
#include "plugin.h"

static cJSON *json_child(const cJSON *object, const char *key)
{
    return cJSON_GetObjectItemCaseSensitive(object, key);
}

void audit_entry_add_plugin(cJSON *entry, const struct topk_backend *backend)
{
    const char *path = plugin_backend_path(backend);
    if (!entry || !path)
        return;
    cJSON *plugin = cJSON_AddObjectToObject(entry, "plugin");
    if (!plugin)
        return;
    cJSON_AddStringToObject(plugin, "path", path);
    const char *sha256 = plugin_backend_sha256(backend);
    if (sha256)
        cJSON_AddStringToObject(plugin, "sha256", sha256);
    else
        cJSON_AddNullToObject(plugin, "sha256");
}

/* The device of --devices entry index as per_device[] and cross_device show it (info NULL when
 * it could not be described). */
static cJSON *device_identity_json(size_t index, int ordinal, const struct gpu_device_info *info)
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
    if (!added || !json_add_u64(added, "global_index", global_index) ||
        remember_record(state, result->file, result->record->index, added) < 0)
        return audit_fail(err, AUDIT_ENOMEM, "out of memory reporting %s record %u", result->file,
                          result->record->index);
    if (state->pass.device_identity)
        return attach_per_device(state, added, added, err);
    return AUDIT_OK;
}

int audit_add_device_pass(struct audit_state *state, const struct record_result *result,
                          cJSON **entries, const struct time_breakdown *times,
                          struct audit_error *err)
{
    const struct audit_options *options = state->options;
    /* The table's time lines cover every device's work. */
    for (size_t i = 0; i < options->backend_count; i++)
        report_count_time(&state->report, options->backends[i]->name, &times[i]);
    cJSON *json = report_record_json_entries(result, entries, options->backend_count);
    if (!json)
        return audit_fail(err, AUDIT_ENOMEM, "out of memory reporting %s record %u", result->file,
                          result->record->index);
    cJSON *target = find_record(state, result->file, result->record->index);
    int status = AUDIT_OK;
    if (target)
        status = attach_per_device(state, target, json, err);
    cJSON_Delete(json);
    return status;
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
    cJSON_ArrayForEach(entry, json_child(block, "entries")) {
        const cJSON *verdict = json_child(entry, "verdict");
        if (cJSON_IsString(verdict) && strcmp(verdict->valuestring, "fail") == 0)
            state->any_failure = true;
    }
    if (callbacks->cross_device)
        callbacks->cross_device(callbacks->user, block, state->device_available);
    return AUDIT_OK;
}
