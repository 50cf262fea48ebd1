#include "bench_json.h"

#include <stdio.h>

#include "json_util.h"

static cJSON *device_json(const struct bench_device *measured)
{
    const struct gpu_device_info *device = &measured->info;
    cJSON *json = cJSON_CreateObject();
    if (!json)
        return NULL;
    document_device_add(json, device);
    json_add_u64(json, KEY_L2_BYTES, device->l2_bytes);
    document_cuda_versions_add(json, device->driver_version, device->runtime_version);
    json_add_number(json, "copy_bandwidth_bytes_per_s", measured->copy_bandwidth);
    json_add_number(json, "empty_kernel_us", measured->empty_kernel_us);
    /* clusters of 1 .. 16 CTAs of one SM each at once: what bitonic's plans were sized by */
    cJSON *fit = device->cluster_fit[1] ? cJSON_AddArrayToObject(json, "clusters_at_once")
                                        : cJSON_AddNullToObject(json, "clusters_at_once");
    for (int size = 1; fit && device->cluster_fit[1] && size <= GPU_CLUSTER_MAX; size++)
        cJSON_AddItemToArray(fit, cJSON_CreateNumber(device->cluster_fit[size]));
    return json;
}

cJSON *bench_json_begin(const struct document_context *context,
                        const struct bench_device *device)
{
    cJSON *context_json = NULL;
    cJSON *document = document_begin(BENCH_SCHEMA, BENCH_SCHEMA_VERSION, context, &context_json);
    cJSON *device_object = document ? device_json(device) : NULL;
    if (!device_object) {
        cJSON_Delete(document);
        return NULL;
    }
    cJSON_AddItemToObject(context_json, KEY_DEVICE, device_object);
    cJSON_AddStringToObject(context_json, "method",
                            "CUDA graph replay; per-call time = replay time / launches in the "
                            "graph; median over replays; inputs rotated over > 2 x L2");
    if (!cJSON_AddArrayToObject(document, "results")) {
        cJSON_Delete(document);
        return NULL;
    }
    return document;
}

int bench_json_add_result(cJSON *document, const struct bench_result *result)
{
    const struct bench_shape *shape = result->shape;
    cJSON *item = cJSON_CreateObject();
    if (!item || !cJSON_AddItemToArray(cJSON_GetObjectItem(document, "results"), item)) {
        cJSON_Delete(item);
        return AUDIT_ENOMEM;
    }
    cJSON_AddStringToObject(item, KEY_BACKEND, result->backend->name);
    cJSON_AddStringToObject(item, "family", result->family);
    cJSON_AddNumberToObject(item, KEY_ROWS, shape->rows);
    cJSON_AddNumberToObject(item, "length", shape->length);
    cJSON_AddNumberToObject(item, KEY_K, shape->k);
    json_add_number(item, "hbm_floor_us", result->hbm_floor_us);
    if (result->outcome != BENCH_TIMED) {
        cJSON_AddStringToObject(item, KEY_STATUS, bench_outcome_name(result->outcome));
        cJSON_AddStringToObject(item, KEY_REASON, result->reason);
        return AUDIT_OK;
    }
    const struct bench_timing *timing = &result->timing;
    cJSON_AddStringToObject(item, KEY_STATUS, bench_outcome_name(result->outcome));
    /* What supports() said it would run (bitonic: cluster, tree or one CTA). */
    if (result->reason[0])
        cJSON_AddStringToObject(item, "plan", result->reason);
    json_add_number(item, "median_us", timing->median_us);
    json_add_number(item, "min_us", timing->min_us);
    json_add_number(item, "max_us", timing->max_us);
    json_add_number(item, "ratio_to_floor", timing->median_us / result->hbm_floor_us);
    cJSON_AddNumberToObject(item, "replays", (double)timing->replays);
    cJSON_AddNumberToObject(item, "launches_per_replay", timing->launches_per_replay);
    cJSON_AddNumberToObject(item, "input_copies", result->input_copies);
    return AUDIT_OK;
}
