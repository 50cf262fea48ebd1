/* The devices document (schema dsatopk-audit/devices, docs/BACKENDS.md "Device helpers"): the
 * CUDA devices, every backend's claims and limits, and per device whether each backend supports
 * each k of a list at one row length, with the reason. */
#ifndef DSATOPK_DEVICES_JSON_H
#define DSATOPK_DEVICES_JSON_H

#include <stdbool.h>

#include <cjson/cJSON.h>

#include "document_context.h"
#include "error.h"
#include "topk_backends.h"

#define DEVICES_SCHEMA "dsatopk-audit/devices"
/* 2: "schema_version" (was "version") and the shared context block (was a top-level
 * tool_version).
 * 3: a device's shared memory in the report's keys (smem_per_sm_bytes,
 * reported_smem_per_sm_bytes, smem_per_block_optin_bytes, were without _bytes), and the CUDA
 * versions as the report writes them: driver_version and runtime_version the text "13.0"
 * (were CUDA's numbers), driver_version_number and runtime_version_number the numbers. */
#define DEVICES_SCHEMA_VERSION 3

/* The shapes the decisions are made for. */
struct devices_query {
    const unsigned long long *k_values;
    int k_count;
    unsigned long long length, rows;
    unsigned long long emulate_smem_per_sm; /* 0: none */
};

/* What the CUDA runtime says, with or without a device. */
struct devices_cuda {
    int device_count;
    const char *no_device_reason; /* when device_count is 0 */
    int driver_version, runtime_version;
};

/* A new document: schema, schema_version, context, query, cuda, every backend of
 * topk_backend_table and an empty device list. NULL when out of memory. */
cJSON *devices_json_begin(const struct document_context *context,
                          const struct devices_query *query, const struct devices_cuda *cuda);
/* Appends a device with every backend's decision for every k (described: a device the listing
 * describes, not one that is present). 0 or AUDIT_ENOMEM. */
int devices_json_add_device(cJSON *document, const struct gpu_device_info *info, bool described,
                            const struct devices_query *query);

/* The device described when there is no GPU and shared memory is emulated: what the lent H200
 * reported, with the emulated shared memory applied as gpu_device_query applies it (the
 * per-block reserve kept). */
void devices_describe_emulated(unsigned long long emulate_smem_per_sm, int runtime_version,
                               struct gpu_device_info *info);

#endif
