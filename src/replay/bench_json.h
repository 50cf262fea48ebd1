/* The bench document (schema dsatopk-audit/bench, docs/PERF.md): the context (the shared block,
 * the device as measured, the method) and one result per backend x shape x family. The readers
 * in scripts/ (perf-table.py, bench-compare.py) read only "results", of either version. */
#ifndef DSATOPK_BENCH_JSON_H
#define DSATOPK_BENCH_JSON_H

#include <cjson/cJSON.h>

#include "bench.h"
#include "document_context.h"

#define BENCH_SCHEMA "dsatopk-audit/bench"
/* 2: the shared context block (tool_version is the bare version; git_revision and
 * version_string added).
 * 3: the device's CUDA versions as the report writes them: driver_version and runtime_version
 * the text "13.0" (were CUDA's numbers), driver_version_number and runtime_version_number the
 * numbers. */
#define BENCH_SCHEMA_VERSION 3

/* A new document: schema, schema_version, context (with device and method) and an empty result
 * list. NULL when out of memory. */
cJSON *bench_json_begin(const struct document_context *context,
                        const struct bench_device *device);
/* Appends one result. 0 or AUDIT_ENOMEM. */
int bench_json_add_result(cJSON *document, const struct bench_result *result);

#endif
