/* The keys that more than one of the tool's documents spell: the run report and its family
 * (baseline, gate verdict, policy: report_keys.h, which includes this header), census, diff and
 * compare (triage_keys.h, which includes it too), inspect, devices and bench (docs/schemas/ holds
 * each document's JSON Schema), and the capture metadata that synth, import, extract and the
 * capture hook write and run, diff and compare read. Every writer and reader spells these keys
 * through the constants, so a key shared by two documents cannot drift apart, and
 * tests/build/test_document_keys.py fails when one of these strings is passed by hand to a call
 * anywhere else in src/, or when two constants define one string. Each constant is the key in
 * upper case.
 *
 * A key only one document uses stays beside that document's writer (the report family's and the
 * triage documents' in their own key headers); one that a second document starts to use moves
 * here. */
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
#define KEY_NOTES "notes" /* remarks that are not failures: a gate entry's, diff's pairing */

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
#define KEY_SMEM_PER_SM_BYTES "smem_per_sm_bytes" /* after emulation: what supports() sees */
#define KEY_REPORTED_SMEM_PER_SM_BYTES "reported_smem_per_sm_bytes" /* what the hardware says */
#define KEY_SMEM_PER_BLOCK_OPTIN_BYTES "smem_per_block_optin_bytes"
#define KEY_SMEM_EMULATED "smem_emulated"
#define KEY_L2_BYTES "l2_bytes"
#define KEY_GLOBAL_MEMORY_BYTES "global_memory_bytes"
/* CUDA's versions: "13.0" (null when unknown), and CUDA's number 1000 * major + 10 * minor
 * (document_cuda_versions_add writes the four) */
#define KEY_DRIVER_VERSION "driver_version"
#define KEY_RUNTIME_VERSION "runtime_version"
#define KEY_DRIVER_VERSION_NUMBER "driver_version_number"
#define KEY_RUNTIME_VERSION_NUMBER "runtime_version_number"

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

/* capture metadata that other commands read: a reproducer's provenance (extract writes it,
 * diff pairs by it: file, record, rows, payload_sha256, report, backend, and an earlier
 * provenance under "previous") and the keys that identify a call (compare aligns by them) */
#define KEY_EXTRACTED_FROM "extracted_from"
#define KEY_PREVIOUS "previous"
#define KEY_RANK "rank"
#define KEY_LAYER "layer"
#define KEY_STEP "step"
#define KEY_CALL "call"
#define KEY_REQUEST_ID "request_id"
#define KEY_REQUEST "request"

/* errors: input_errors[] of a report, a census or inspect file's error */
#define KEY_KIND "kind"
#define KEY_MESSAGE "message"

/* ---- the census of a record (census, and records[].census of a report) ---------------------- */

#define KEY_CENSUS "census"
#define KEY_UNDERDETERMINED_ROWS "underdetermined_rows"
#define KEY_TIE_SET "tie_set" /* a row's boundary tie set (census per_row, diff differing_rows) */
#define KEY_MEDIAN "median"
#define KEY_MIN "min"
#define KEY_MAX "max"

/* ---- the engine's own selection judged ------------------------------------------------------ */

/* records[].engine of a report and of a census (one writer, report_engine.c), summary.engine,
 * the engine sides of diff's rows and compare's calls. "engine" is also the capture metadata's
 * name of the engine that recorded the selection, and "contract" {order, tie_break} the
 * metadata's order and tie-break the engine promises. */
#define KEY_ENGINE "engine"
#define KEY_CONTRACT "contract"
#define KEY_ORDER "order"
#define KEY_TIE_BREAK "tie_break"
#define KEY_CONTRACT_FROM "contract_from"
#define KEY_ROWS_BY_KIND "rows_by_kind"
/* wrong_rows: row objects in an engine entry, numbers in a backend's predicted_vs_observed
 * (report_keys.h), a count in a compare call's engine_wrong[] */
#define KEY_WRONG_ROWS "wrong_rows"
#define KEY_WRONG_ROWS_TOTAL "wrong_rows_total"
#define KEY_TIE_VARIANT_ROWS "tie_variant_rows"
#define KEY_KINDS "kinds"
#define KEY_KTH "kth"
#define KEY_NEEDED "needed"
#define KEY_MISSING "missing"
#define KEY_MISSING_TOTAL "missing_total"
#define KEY_EXTRA "extra"
#define KEY_EXTRA_TOTAL "extra_total"
#define KEY_DUPLICATES "duplicates"
#define KEY_DUPLICATES_TOTAL "duplicates_total"
#define KEY_OUT_OF_RANGE_INDICES "out_of_range_indices"
#define KEY_OUT_OF_RANGE_TOTAL "out_of_range_total"
#define KEY_ORDER_SLOT "order_slot"
#define KEY_PADDING_SLOT "padding_slot"
#define KEY_TRANSLATED "translated"
#define KEY_SCORE "score"
#define KEY_ABOVE_KTH "above_kth"
#define KEY_ABOVE_KTH_ULPS "above_kth_ulps"
#define KEY_BELOW_KTH "below_kth"
#define KEY_BELOW_KTH_ULPS "below_kth_ulps"
/* the entry's status: judged, or error (reason says why) */
#define ENGINE_STATUS_JUDGED "judged"
#define ENGINE_STATUS_ERROR KEY_ERROR
/* summary.engine: records, rows, pass and fail (verdict names), and rows per class */

#endif
