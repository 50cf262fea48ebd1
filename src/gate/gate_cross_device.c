/* The cross_device block of `run --devices` (gate.h "cross-device", docs/REPORT.md
 * "cross_device"): per record x backend, whether the devices gave one output, and whether the
 * verdict rule required them to. */
#include "gate.h"

#include <string.h>

#include "json_util.h"

static bool same_device_model(const cJSON *a, const cJSON *b)
{
    static const char *const keys[] = { KEY_NAME, KEY_COMPUTE_CAPABILITY, KEY_SM_COUNT,
                                        KEY_SMEM_PER_SM_BYTES };
    for (size_t i = 0; i < sizeof(keys) / sizeof(keys[0]); i++) {
        const cJSON *x = json_member(a, keys[i]), *y = json_member(b, keys[i]);
        if (!x || !y || !cJSON_Compare(x, y, true))
            return false;
    }
    return true;
}

/* An entry whose devices disagreed where the verdict rule required them to agree. */
static bool entry_failed(const cJSON *entry)
{
    enum verdict verdict;
    return verdict_parse(cJSON_GetStringValue(json_member(entry, KEY_VERDICT)), &verdict) == 0 &&
           verdict == VERDICT_FAIL;
}

bool gate_cross_device_failed(const cJSON *block)
{
    const cJSON *entry;
    cJSON_ArrayForEach(entry, json_member(block, KEY_ENTRIES))
        if (entry_failed(entry))
            return true;
    return false;
}

void gate_cross_device_summarize(cJSON *block)
{
    uint64_t entries = 0, compared = 0, agree = 0, disagree = 0, required_disagreements = 0;
    const cJSON *entry;
    cJSON_ArrayForEach(entry, json_member(block, KEY_ENTRIES)) {
        const cJSON *agreed = json_member(entry, KEY_AGREE);
        entries++;
        if (!cJSON_IsBool(agreed))
            continue;
        compared++;
        if (cJSON_IsTrue(agreed))
            agree++;
        else
            disagree++;
        if (entry_failed(entry))
            required_disagreements++;
    }
    cJSON_DeleteItemFromObjectCaseSensitive(block, KEY_SUMMARY);
    cJSON *summary = cJSON_AddObjectToObject(block, KEY_SUMMARY);
    if (!summary)
        return;
    json_add_u64(summary, KEY_ENTRIES, entries);
    json_add_u64(summary, KEY_COMPARED, compared);
    json_add_u64(summary, KEY_AGREE, agree);
    json_add_u64(summary, KEY_DISAGREE, disagree);
    json_add_u64(summary, KEY_REQUIRED_DISAGREEMENTS, required_disagreements);
    json_add_u64(summary, KEY_NOT_COMPARED, entries - compared);
}

/* One record x backend across devices. */
static cJSON *cross_device_entry(const cJSON *record, const cJSON *backend, const cJSON *per_device,
                                 bool same_model)
{
    cJSON *entry = cJSON_CreateObject();
    if (!entry)
        return NULL;
    json_copy_member(entry, record, KEY_FILE);
    json_copy_member(entry, record, KEY_INDEX);
    if (json_member(record, KEY_GLOBAL_INDEX))
        json_copy_member(entry, record, KEY_GLOBAL_INDEX);
    json_copy_member(entry, backend, KEY_NAME);
    json_copy_member(entry, backend, KEY_LEVEL);
    const cJSON *level = json_member(backend, KEY_LEVEL);
    enum topk_determinism claimed = TOPK_NOT_GUARANTEED;
    if (cJSON_IsString(level))
        determinism_level_parse(level->valuestring, &claimed);
    const bool required = verdict_devices_must_agree(claimed, same_model);
    cJSON_AddBoolToObject(entry, KEY_REQUIRED, required);
    cJSON *devices = cJSON_AddArrayToObject(entry, KEY_DEVICES);
    const char *agreed_hash = NULL;
    bool agree = true;
    unsigned ran = 0;
    const cJSON *device;
    cJSON_ArrayForEach(device, per_device) {
        cJSON *item = cJSON_CreateObject();
        if (!devices || !item) {
            cJSON_Delete(item);
            cJSON_Delete(entry);
            return NULL;
        }
        const cJSON *identity = json_member(device, KEY_DEVICE);
        const cJSON *status = json_member(device, KEY_STATUS);
        const cJSON *hashes = json_member(device, KEY_OUTPUT_SHA256_PER_REP);
        cJSON *distinct = json_distinct_strings(hashes);
        const int distinct_count = cJSON_GetArraySize(distinct);
        json_copy_member(item, identity, KEY_INDEX);
        json_copy_member(item, identity, KEY_ORDINAL);
        json_copy_member(item, device, KEY_STATUS);
        cJSON_AddNumberToObject(item, KEY_DISTINCT_OUTPUTS, distinct_count);
        const cJSON *single = distinct_count == 1 ? cJSON_GetArrayItem(distinct, 0) : NULL;
        if (single)
            cJSON_AddStringToObject(item, KEY_OUTPUT_SHA256, single->valuestring);
        else
            cJSON_AddNullToObject(item, KEY_OUTPUT_SHA256);
        if (cJSON_IsString(status) &&
            strcmp(status->valuestring, backend_status_name(BACKEND_OK)) == 0) {
            ran++;
            if (!single)
                agree = false;
            else if (!agreed_hash)
                agreed_hash =
                    cJSON_GetObjectItemCaseSensitive(item, KEY_OUTPUT_SHA256)->valuestring;
            else if (strcmp(agreed_hash, single->valuestring) != 0)
                agree = false;
        }
        cJSON_Delete(distinct);
        cJSON_AddItemToArray(devices, item);
    }
    cJSON_AddNumberToObject(entry, KEY_DEVICES_RUN, ran);
    if (ran < 2) {
        cJSON_AddNullToObject(entry, KEY_AGREE);
        cJSON_AddStringToObject(entry, KEY_VERDICT, CROSS_DEVICE_NOT_COMPARED);
    } else {
        cJSON_AddBoolToObject(entry, KEY_AGREE, agree);
        cJSON_AddStringToObject(entry, KEY_VERDICT,
                                !required ? CROSS_DEVICE_NOT_REQUIRED
                                          : verdict_name(agree ? VERDICT_PASS : VERDICT_FAIL));
    }
    return entry;
}

cJSON *gate_cross_device_block(const cJSON *records, const cJSON *devices)
{
    cJSON *block = cJSON_CreateObject();
    if (!block)
        return NULL;
    bool same_model = true;
    const cJSON *first = cJSON_GetArrayItem(devices, 0), *device;
    cJSON_ArrayForEach(device, devices)
        same_model = same_model && same_device_model(first, device);
    cJSON_AddBoolToObject(block, KEY_AVAILABLE, true);
    cJSON_AddNullToObject(block, KEY_REASON);
    cJSON_AddItemToObject(block, KEY_DEVICES, cJSON_Duplicate(devices, 1));
    cJSON_AddBoolToObject(block, KEY_SAME_MODEL, same_model);
    cJSON *entries = cJSON_AddArrayToObject(block, KEY_ENTRIES);
    if (!entries) {
        cJSON_Delete(block);
        return NULL;
    }
    const cJSON *record;
    cJSON_ArrayForEach(record, records) {
        const cJSON *backend;
        cJSON_ArrayForEach(backend, json_member(record, KEY_BACKENDS)) {
            const cJSON *per_device = json_member(backend, KEY_PER_DEVICE);
            if (!cJSON_IsArray(per_device))
                continue;
            cJSON *entry = cross_device_entry(record, backend, per_device, same_model);
            if (!entry) {
                cJSON_Delete(block);
                return NULL;
            }
            cJSON_AddItemToArray(entries, entry);
        }
    }
    gate_cross_device_summarize(block);
    return block;
}

cJSON *gate_cross_device_unavailable(const char *reason, const cJSON *requested)
{
    cJSON *block = cJSON_CreateObject();
    if (!block)
        return NULL;
    cJSON_AddBoolToObject(block, KEY_AVAILABLE, false);
    cJSON_AddStringToObject(block, KEY_REASON, reason ? reason : "no CUDA device");
    cJSON_AddItemToObject(block, KEY_DEVICES, cJSON_CreateArray());
    cJSON_AddItemToObject(block, KEY_REQUESTED,
                          requested ? cJSON_Duplicate(requested, 1) : cJSON_CreateNull());
    cJSON_AddNullToObject(block, KEY_SAME_MODEL);
    cJSON_AddItemToObject(block, KEY_ENTRIES, cJSON_CreateArray());
    gate_cross_device_summarize(block);
    return block;
}
