#include "devices_json.h"

#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "json_util.h"

#define DEVICES_REASON_BYTES 512

/* The described device: what the lent H200 reported (docs/BACKENDS.md, "Device helpers"). */
#define DESCRIBED_NAME "H200-like device (described: no GPU present)"
#define DESCRIBED_CC_MAJOR 9
#define DESCRIBED_CC_MINOR 0
#define DESCRIBED_SM_COUNT 132
#define DESCRIBED_SMEM_PER_SM 233472u
#define DESCRIBED_SMEM_PER_BLOCK_OPTIN 232448u
#define DESCRIBED_L2_BYTES 62914560u
#define DESCRIBED_GLOBAL_MEMORY_BYTES 150109880320ull

void devices_describe_emulated(unsigned long long emulate_smem_per_sm, int runtime_version,
                               struct gpu_device_info *info)
{
    const size_t reserve = DESCRIBED_SMEM_PER_SM - DESCRIBED_SMEM_PER_BLOCK_OPTIN;
    memset(info, 0, sizeof(*info));
    info->ordinal = -1;
    snprintf(info->name, sizeof(info->name), "%s", DESCRIBED_NAME);
    info->cc_major = DESCRIBED_CC_MAJOR;
    info->cc_minor = DESCRIBED_CC_MINOR;
    info->sm_count = DESCRIBED_SM_COUNT;
    info->reported_smem_per_sm = DESCRIBED_SMEM_PER_SM;
    info->smem_per_sm = (size_t)emulate_smem_per_sm;
    info->smem_per_block_optin = DESCRIBED_SMEM_PER_BLOCK_OPTIN;
    if (info->smem_per_block_optin + reserve > emulate_smem_per_sm)
        info->smem_per_block_optin = emulate_smem_per_sm > reserve
                                         ? (size_t)emulate_smem_per_sm - reserve
                                         : 0;
    info->smem_emulated = true;
    info->l2_bytes = DESCRIBED_L2_BYTES;
    info->global_memory_bytes = DESCRIBED_GLOBAL_MEMORY_BYTES;
    info->driver_version = 0;
    info->runtime_version = runtime_version;
}

static cJSON *backend_json(const struct topk_backend *backend)
{
    cJSON *item = cJSON_CreateObject();
    if (!item)
        return NULL;
    cJSON_AddStringToObject(item, KEY_NAME, backend->name);
    cJSON_AddStringToObject(item, KEY_SUMMARY, backend->summary);
    cJSON_AddStringToObject(item, KEY_LEVEL, topk_determinism_name(backend->level));
    cJSON_AddBoolToObject(item, KEY_EXACT_SET, backend->exact_set);
    cJSON_AddBoolToObject(item, KEY_SMALLEST_INDEX_TIES, backend->smallest_index_ties);
    cJSON_AddBoolToObject(item, KEY_CANONICAL_ORDER, backend->canonical_order);
    cJSON_AddBoolToObject(item, KEY_INDEX_ASCENDING, backend->index_ascending);
    cJSON_AddStringToObject(item, "limits", backend->limits);
    return item;
}

/* "clusters_at_once": clusters of 1 .. GPU_CLUSTER_MAX CTAs of one SM each that the device
 * runs at once (bitonic's supports() sizes its clusters by them), or null where not measured. */
static bool add_cluster_fit(cJSON *item, const struct gpu_device_info *info)
{
    if (info->cluster_fit[1] == 0)
        return cJSON_AddNullToObject(item, "clusters_at_once") != NULL;
    cJSON *fit = cJSON_AddArrayToObject(item, "clusters_at_once");
    if (!fit)
        return false;
    for (int size = 1; size <= GPU_CLUSTER_MAX; size++) {
        cJSON *number = cJSON_CreateNumber(info->cluster_fit[size]);
        if (!number)
            return false;
        cJSON_AddItemToArray(fit, number);
    }
    return true;
}

/* The device's description and every backend's decision for every k. */
static cJSON *device_json(const struct gpu_device_info *info, bool described,
                          const struct devices_query *query)
{
    cJSON *item = cJSON_CreateObject();
    if (!item)
        return NULL;
    if (described)
        cJSON_AddNullToObject(item, KEY_ORDINAL);
    else
        cJSON_AddNumberToObject(item, KEY_ORDINAL, info->ordinal);
    cJSON_AddBoolToObject(item, "described", described);
    document_device_add(item, info);
    json_add_u64(item, KEY_REPORTED_SMEM_PER_SM_BYTES, info->reported_smem_per_sm);
    json_add_u64(item, KEY_SMEM_PER_BLOCK_OPTIN_BYTES, info->smem_per_block_optin);
    cJSON_AddBoolToObject(item, KEY_SMEM_EMULATED, info->smem_emulated);
    json_add_u64(item, KEY_L2_BYTES, info->l2_bytes);
    json_add_u64(item, KEY_GLOBAL_MEMORY_BYTES, info->global_memory_bytes);
    document_cuda_versions_add(item, info->driver_version, info->runtime_version);
    if (!add_cluster_fit(item, info))
        goto error;
    cJSON *backends = cJSON_AddArrayToObject(item, KEY_BACKENDS);
    if (!backends)
        goto error;
    for (int i = 0; topk_backend_table[i]; i++) {
        const struct topk_backend *backend = topk_backend_table[i];
        cJSON *entry = cJSON_CreateObject();
        if (!entry)
            goto error;
        cJSON_AddItemToArray(backends, entry);
        cJSON_AddStringToObject(entry, KEY_NAME, backend->name);
        cJSON_AddStringToObject(entry, KEY_LEVEL, topk_determinism_name(backend->level));
        cJSON *decisions = cJSON_AddArrayToObject(entry, "decisions");
        if (!decisions)
            goto error;
        for (int j = 0; j < query->k_count; j++) {
            struct topk_shape shape = {
                .rows = (uint32_t)query->rows,
                .k = (uint32_t)query->k_values[j],
                .row_stride = query->length,
                .max_length = (int32_t)query->length,
                .min_length = (int32_t)query->length,
            };
            char reason[DEVICES_REASON_BYTES] = "";
            int supported = backend->supports(info, &shape, reason, sizeof(reason));
            cJSON *decision = cJSON_CreateObject();
            if (!decision)
                goto error;
            cJSON_AddItemToArray(decisions, decision);
            json_add_u64(decision, KEY_K, shape.k);
            cJSON_AddBoolToObject(decision, "supported", supported == 1);
            cJSON_AddStringToObject(decision, KEY_REASON, reason);
        }
    }
    return item;
error:
    cJSON_Delete(item);
    return NULL;
}

cJSON *devices_json_begin(const struct document_context *context,
                          const struct devices_query *query, const struct devices_cuda *cuda)
{
    cJSON *document = document_begin(DEVICES_SCHEMA, DEVICES_SCHEMA_VERSION, context, NULL);
    if (!document)
        return NULL;
    cJSON *query_json = cJSON_AddObjectToObject(document, "query");
    cJSON *k_list = query_json ? cJSON_AddArrayToObject(query_json, KEY_K) : NULL;
    if (!k_list)
        goto error;
    for (int i = 0; i < query->k_count; i++)
        cJSON_AddItemToArray(k_list, cJSON_CreateNumber((double)query->k_values[i]));
    json_add_u64(query_json, "length", query->length);
    json_add_u64(query_json, KEY_ROWS, query->rows);
    json_add_u64(query_json, "emulate_smem_per_sm", query->emulate_smem_per_sm);

    cJSON *cuda_json = cJSON_AddObjectToObject(document, "cuda");
    if (!cuda_json)
        goto error;
    cJSON_AddNumberToObject(cuda_json, "device_count", cuda->device_count);
    if (cuda->device_count == 0)
        cJSON_AddStringToObject(cuda_json, "no_device_reason", cuda->no_device_reason);
    else
        cJSON_AddNullToObject(cuda_json, "no_device_reason");
    document_cuda_versions_add(cuda_json, cuda->driver_version, cuda->runtime_version);

    cJSON *backends = cJSON_AddArrayToObject(document, KEY_BACKENDS);
    if (!backends)
        goto error;
    for (int i = 0; topk_backend_table[i]; i++) {
        cJSON *backend = backend_json(topk_backend_table[i]);
        if (!backend)
            goto error;
        cJSON_AddItemToArray(backends, backend);
    }
    if (!cJSON_AddArrayToObject(document, KEY_DEVICES))
        goto error;
    return document;
error:
    cJSON_Delete(document);
    return NULL;
}

int devices_json_add_device(cJSON *document, const struct gpu_device_info *info, bool described,
                            const struct devices_query *query)
{
    cJSON *device = device_json(info, described, query);
    if (!device || !cJSON_AddItemToArray(cJSON_GetObjectItem(document, KEY_DEVICES), device)) {
        cJSON_Delete(device);
        return AUDIT_ENOMEM;
    }
    return AUDIT_OK;
}
