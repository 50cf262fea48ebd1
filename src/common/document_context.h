/* The "context" block that opens every document the tool writes (run report, census, diff,
 * inspect, devices, bench, gate verdict): which build wrote it, how it was invoked, when and on
 * which host. One writer, so every document spells these keys alike and in the same order:
 *
 *   "tool_version": "0.1.0", "git_revision": "g1a2b3c4", "version_string": "0.1.0 (g1a2b3c4)",
 *   "command_line": "dsatopk-audit census ...", "utc_time": "2026-01-01T00:00:00Z",
 *   "host": "node-3"
 *
 * A document adds its own fields after these (run: the device and the audit settings; bench:
 * the device and the method). */
#ifndef DSATOPK_DOCUMENT_CONTEXT_H
#define DSATOPK_DOCUMENT_CONTEXT_H

#include <cjson/cJSON.h>

#include "document_keys.h"
#include "topk_backends.h"

struct document_context {
    const char *tool_version;   /* the project version, "0.1.0" */
    const char *git_revision;   /* "g1a2b3c4", or what the build found instead */
    const char *version_string; /* what `dsatopk-audit --version` prints after the name */
    const char *command_line;   /* the whole invocation, as one string */
    char utc_time[32];          /* "YYYY-MM-DDTHH:MM:SSZ", or "unknown" */
    char host[256];             /* gethostname(), or "unknown" */
};

/* Fills context: the build's version and revision, the given version string and command line
 * (borrowed: they must outlive context; NULL writes null), and the current time and host. */
void document_context_fill(struct document_context *context, const char *version_string,
                           const char *command_line);

/* Adds the six keys above to object, in that order (a NULL string becomes null). Returns 0, or
 * AUDIT_ENOMEM when a key could not be added. */
int document_context_add(cJSON *object, const struct document_context *context);

/* A new object holding the six keys, for the caller to add its own fields to and attach as
 * "context"; NULL when out of memory. */
cJSON *document_context_json(const struct document_context *context);

/* The keys every document that describes a GPU opens that description with, in this order:
 * "name", "compute_capability" ("9.0"), "sm_count", "smem_per_sm_bytes" (after emulation); each
 * document adds its own fields after them. Returns 0, or AUDIT_ENOMEM. */
int document_device_add(cJSON *object, const struct gpu_device_info *info);

/* The CUDA driver and runtime versions as every document writes them: "driver_version" and
 * "runtime_version" as text ("13.0"), then "driver_version_number" and "runtime_version_number"
 * as CUDA encodes them (13000); all null for a version of 0 or less (unknown: no driver).
 * Returns 0, or AUDIT_ENOMEM. */
int document_cuda_versions_add(cJSON *object, int driver_version, int runtime_version);

/* A new document opening with "schema", "schema_version" and "context" (the six keys;
 * *context_json, when not NULL, receives that object for the caller's own fields). NULL when out
 * of memory. */
cJSON *document_begin(const char *schema, int schema_version,
                      const struct document_context *context, cJSON **context_json);

#endif
