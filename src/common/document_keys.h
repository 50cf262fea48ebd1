/* The keys that more than one of the tool's documents spell: the run report and its family
 * (baseline, gate verdict, policy: report_keys.h, which includes this header), census, diff,
 * inspect, devices and bench (docs/schemas/ holds each document's JSON Schema), and the capture
 * metadata that synth, import and extract write. Every writer and reader spells these keys
 * through the constants, so a key shared by two documents cannot drift apart, and
 * tests/build/test_document_keys.py fails when one of these strings is passed by hand to a call
 * anywhere else in src/. Each constant is the key in upper case.
 *
 * A key only one document uses stays beside that document's writer; one that a second document
 * starts to use moves here. */
#ifndef DSATOPK_DOCUMENT_KEYS_H
#define DSATOPK_DOCUMENT_KEYS_H

/* ---- every document ------------------------------------------------------------------------- */

#define KEY_SCHEMA "schema"                 /* "dsatopk-audit/NAME" */
#define KEY_SCHEMA_VERSION "schema_version" /* an integer; docs/schemas/NAME-VERSION.schema.json */
#define KEY_CONTEXT "context"
#define KEY_SUMMARY "summary"
#define KEY_RECORDS "records"
#define KEY_STATUS "status"
#define KEY_ERROR "error"
#define KEY_INPUT_ERRORS "input_errors"
#define KEY_K_OVERRIDE "k_override"

/* ---- context (document_context.h writes the first six) -------------------------------------- */

#define KEY_TOOL_VERSION "tool_version"
#define KEY_GIT_REVISION "git_revision"
#define KEY_VERSION_STRING "version_string"
#define KEY_COMMAND_LINE "command_line"
#define KEY_UTC_TIME "utc_time"
#define KEY_HOST "host"
#define KEY_DEVICE "device"
#define KEY_SEED "seed"
#define KEY_BACKENDS "backends"
#define KEY_DEVICES "devices"

/* ---- a GPU (report context and per_device entries, devices, bench) -------------------------- */

#define KEY_ORDINAL "ordinal"
#define KEY_NAME "name"
#define KEY_COMPUTE_CAPABILITY "compute_capability"
#define KEY_SM_COUNT "sm_count"
#define KEY_SMEM_PER_SM_BYTES "smem_per_sm_bytes"
#define KEY_SMEM_EMULATED "smem_emulated"
#define KEY_L2_BYTES "l2_bytes"
#define KEY_GLOBAL_MEMORY_BYTES "global_memory_bytes"
#define KEY_DRIVER_VERSION "driver_version"
#define KEY_RUNTIME_VERSION "runtime_version"

/* ---- a backend (report entries, devices, bench) --------------------------------------------- */

#define KEY_BACKEND "backend"
#define KEY_LEVEL "level"
#define KEY_REASON "reason"
/* its promises (the report groups them under "claims") */
#define KEY_EXACT_SET "exact_set"
#define KEY_SMALLEST_INDEX_TIES "smallest_index_ties"
#define KEY_CANONICAL_ORDER "canonical_order"
#define KEY_INDEX_ASCENDING "index_ascending"

/* ---- capture files and records (report, census, inspect, diff, capture metadata) ------------ */

#define KEY_FILE "file"
#define KEY_PATH "path"
#define KEY_INDEX "index"
#define KEY_RECORD "record"
#define KEY_ROWS "rows"
#define KEY_ROW "row"
#define KEY_K "k"
#define KEY_RECORD_K "record_k"
#define KEY_ROW_STRIDE "row_stride"
#define KEY_ROW_STARTS "row_starts"
#define KEY_PAGE_TABLE "page_table"
#define KEY_PAGE_SIZE "page_size"
#define KEY_ENGINE_INDICES "engine_indices"
#define KEY_COMPRESSED "compressed"
#define KEY_METADATA "metadata"
#define KEY_PAYLOAD_SHA256 "payload_sha256"
#define KEY_SHA256 "sha256" /* of a file: an imported tensor, a plugin */
#define KEY_REPORT "report" /* the report a capture was extracted from; a shard's report (merge) */

/* errors: input_errors[] of a report, a census or inspect file's error */
#define KEY_KIND "kind"
#define KEY_MESSAGE "message"

/* ---- the census of a record (census, and records[].census of a report) ---------------------- */

#define KEY_CENSUS "census"
#define KEY_UNDERDETERMINED_ROWS "underdetermined_rows"
#define KEY_MEDIAN "median"
#define KEY_MIN "min"
#define KEY_MAX "max"

#endif
