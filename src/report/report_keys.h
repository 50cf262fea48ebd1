/* The names of the documents `run`, `gate` and `merge` write and read: the report, the baseline,
 * the gate verdict and the gate policy (docs/REPORT.md "Report JSON", docs/GATE.md, their JSON
 * Schemas in docs/schemas/). The writers (report.c, gate_*.c, src/replay/audit_report.c), the
 * reader (report_read.c), the HTML page and `extract --from-report` spell every key through
 * these constants, so a key is defined here once and a grep for its string finds every place
 * that writes or reads it. Each constant is the key in upper case. The keys these documents
 * share with census, diff, compare, inspect, devices and bench (the engine's judgement among
 * them) are document_keys.h's, included here; tests/build/test_document_keys.py keeps the key
 * headers the only spelling.
 *
 * Values that name something (statuses, verdicts, levels, violation kinds) come from their own
 * name functions (verdict.h); the census object inside a record is the census's own format
 * (src/reference/census.c). */
#ifndef DSATOPK_REPORT_KEYS_H
#define DSATOPK_REPORT_KEYS_H

#include "document_keys.h"

/* ---- schemas -------------------------------------------------------------------------------- */

#define REPORT_SCHEMA "dsatopk-audit/report"
#define REPORT_SCHEMA_VERSION 1
#define BASELINE_SCHEMA "dsatopk-audit/baseline"
#define BASELINE_SCHEMA_VERSION 1
#define GATE_SCHEMA "dsatopk-audit/gate"
#define GATE_SCHEMA_VERSION 1
#define POLICY_SCHEMA "dsatopk-audit/policy"
#define POLICY_SCHEMA_VERSION 1
/* The oldest version of each schema the readers accept: a newer tool reads older documents. */
#define SCHEMA_VERSION_OLDEST_READ 1

/* ---- reports, baselines, verdicts ----------------------------------------------------------- */

#define KEY_COMPLETE "complete"
#define KEY_STOP_REASON "stop_reason"
#define KEY_EXIT_CODE "exit_code"

/* ---- context -------------------------------------------------------------------------------- */

#define KEY_DEVICE_UNAVAILABLE_REASON "device_unavailable_reason"
#define KEY_EMULATION "emulation"
#define KEY_NOISE "noise"
#define KEY_GRAPH "graph"
#define KEY_BATCH_INVARIANCE "batch_invariance"
#define KEY_GPU_PREFILTER "gpu_prefilter"
#define KEY_SHARD "shard"
#define KEY_DEVICES_CONCURRENT "devices_concurrent"

/* ---- records -------------------------------------------------------------------------------- */

#define KEY_GLOBAL_INDEX "global_index"
#define KEY_BYTE_OFFSET "byte_offset"
#define KEY_SOURCE_ROWS "source_rows"
#define KEY_MAX_LENGTH "max_length"
#define KEY_FLAGS "flags"
#define KEY_METADATA_UNPARSED "metadata_unparsed"
#define KEY_REFERENCE "reference"
#define KEY_OUTPUT_SHA256 "output_sha256"
#define KEY_SET_SHA256 "set_sha256"
#define KEY_TIME_BREAKDOWN_MS "time_breakdown_ms"

/* records[].time_breakdown_ms */
#define KEY_REFERENCE_MS "reference_ms"
#define KEY_CENSUS_MS "census_ms"
#define KEY_BACKENDS_MS "backends_ms"
#define KEY_OTHER_MS "other_ms"
#define KEY_TOTAL_MS "total_ms"

/* ---- backend entries (records[].backends[]) ------------------------------------------------- */

#define KEY_CLAIMS "claims"
#define KEY_VERDICT "verdict"
#define KEY_VERDICT_REASONS "verdict_reasons"
#define KEY_SCRATCH_BYTES "scratch_bytes"
#define KEY_PLUGIN "plugin" /* {"path", "sha256"} of a backend loaded from a plugin */
#define KEY_PER_DEVICE "per_device"

/* time_breakdown_ms of a backend entry (total_ms and other_ms above) */
#define KEY_DEVICE_OPEN_MS "device_open_ms"
#define KEY_SETUP_MS "setup_ms"
#define KEY_KERNEL_MS "kernel_ms"
#define KEY_LAUNCH_OVERHEAD_MS "launch_overhead_ms"
#define KEY_NOISE_WAIT_MS "noise_wait_ms"
#define KEY_ROW_HASH_MS "row_hash_ms"
#define KEY_COPY_MS "copy_ms"
#define KEY_HASH_MS "hash_ms"
#define KEY_CHECK_MS "check_ms"
#define KEY_DUMP_MS "dump_ms"
#define KEY_BATCH_INVARIANCE_MS "batch_invariance_ms"

/* host_work (hash_ms and check_ms above) */
#define KEY_HOST_WORK "host_work"
#define KEY_REPS_MATCHED_ON_GPU "reps_matched_on_gpu"
#define KEY_OUTPUTS_COPIED "outputs_copied"
#define KEY_OUTPUTS_HASHED "outputs_hashed"
#define KEY_OUTPUTS_CHECKED "outputs_checked"
#define KEY_BESIDE_REPS "beside_reps"

/* The eager reps (in the entry itself) and the graph replays (in its "graph") */
#define KEY_REPS "reps"
#define KEY_OUTPUT_SHA256_PER_REP "output_sha256_per_rep"
#define KEY_SET_SHA256_PER_REP "set_sha256_per_rep"
#define KEY_DISTINCT_OUTPUTS "distinct_outputs"
#define KEY_DISTINCT_SETS "distinct_sets"
#define KEY_EQUALS_REFERENCE_REPS "equals_reference_reps"
#define KEY_VIOLATIONS "violations"
#define KEY_TOTAL_ROWS "total_rows"
#define KEY_MAX_ROWS_PER_REP "max_rows_per_rep"
#define KEY_FLAPPING_ROWS_TOTAL "flapping_rows_total"
#define KEY_SET_FLAPPING_ROWS_TOTAL "set_flapping_rows_total"
#define KEY_FLAPPING_ROWS "flapping_rows"
#define KEY_REPS_DIFFERING "reps_differing"
#define KEY_REPS_SET_DIFFERING "reps_set_differing"
#define KEY_MAX_INDICES_DIFFERING "max_indices_differing"
#define KEY_MAX_POSITIONS_DIFFERING "max_positions_differing"
#define KEY_KERNEL_TIME_US "kernel_time_us"

/* predicted_vs_observed */
#define KEY_PREDICTED_VS_OBSERVED "predicted_vs_observed"
#define KEY_STAGING_MODEL "staging_model"
#define KEY_STAGING_CAPACITY "staging_capacity"
#define KEY_DROPS_ON_OVERFLOW "drops_on_overflow"
#define KEY_PREDICTED_OVERFLOW_ROWS "predicted_overflow_rows"
/* flapping_rows (above) is a count here, a list in a tally */
#define KEY_SET_FLAPPING_ROWS "set_flapping_rows"
/* wrong_rows (document_keys.h) is a list of row numbers here */
#define KEY_SET_FLAPPING_AND_UNDERDETERMINED "set_flapping_and_underdetermined"
#define KEY_SET_FLAPPING_NOT_UNDERDETERMINED "set_flapping_not_underdetermined"
#define KEY_UNDERDETERMINED_NOT_SET_FLAPPING "underdetermined_not_set_flapping"
#define KEY_SET_FLAPPING_UNEXPLAINED "set_flapping_unexplained"
#define KEY_WRONG_AND_PREDICTED_OVERFLOW "wrong_and_predicted_overflow"
#define KEY_WRONG_NOT_PREDICTED_OVERFLOW "wrong_not_predicted_overflow"
#define KEY_PREDICTED_OVERFLOW_NOT_WRONG "predicted_overflow_not_wrong"
#define KEY_SET_FLAPPING_UNEXPLAINED_LIST "set_flapping_unexplained_list"
#define KEY_WRONG_NOT_PREDICTED_OVERFLOW_LIST "wrong_not_predicted_overflow_list"

/* graph */
#define KEY_RAN "ran"
#define KEY_EQUALS_EAGER_REPS "equals_eager_reps"

/* batch_invariance (ran and error above) */
#define KEY_TRIALS "trials"
#define KEY_CONTEXTS_PER_ROW "contexts_per_row"
#define KEY_ROWS_TESTED "rows_tested"
#define KEY_LAUNCHES "launches"
#define KEY_DEPENDENT_ROWS_TOTAL "dependent_rows_total"
#define KEY_SET_DEPENDENT_ROWS_TOTAL "set_dependent_rows_total"
#define KEY_DEPENDENT_ROWS "dependent_rows"
#define KEY_CONTEXTS_DIFFERING "contexts_differing"
#define KEY_CONTEXTS_SET_DIFFERING "contexts_set_differing"

/* ---- summary -------------------------------------------------------------------------------- */

/* The per-verdict counters (summary.by_backend.NAME) are the verdict names themselves, the
 * per-status counters (summary.status) the status names (verdict.h). */
#define KEY_BACKEND_RUNS "backend_runs"
#define KEY_BACKENDS_PASS "backends_pass"
#define KEY_BACKENDS_FAIL "backends_fail"
#define KEY_BACKENDS_NOT_RUN "backends_not_run"
#define KEY_BY_BACKEND "by_backend"

/* ---- merged reports (merge) ----------------------------------------------------------------- */

#define KEY_SHARDS "shards"
#define KEY_COUNT "count"

/* ---- cross_device (run --devices) ----------------------------------------------------------- */

#define KEY_CROSS_DEVICE "cross_device"
#define KEY_AVAILABLE "available"
#define KEY_SAME_MODEL "same_model"
#define KEY_REQUESTED "requested"
#define KEY_ENTRIES "entries"
#define KEY_REQUIRED "required"
#define KEY_DEVICES_RUN "devices_run"
#define KEY_AGREE "agree"
#define KEY_COMPARED "compared"
#define KEY_DISAGREE "disagree"
#define KEY_REQUIRED_DISAGREEMENTS "required_disagreements"
#define KEY_NOT_COMPARED "not_compared"
/* values of an entry's "verdict" beside pass and fail */
#define CROSS_DEVICE_NOT_COMPARED KEY_NOT_COMPARED
#define CROSS_DEVICE_NOT_REQUIRED "not_required"

/* ---- baseline ------------------------------------------------------------------------------- */

#define KEY_SOURCE "source"

/* ---- gate verdict --------------------------------------------------------------------------- */

#define KEY_NOW "now"
#define KEY_BASELINE "baseline"
#define KEY_POLICY "policy"
#define KEY_RULES "rules"
#define KEY_REPORTS "reports"
#define KEY_REPORT_REASONS "report_reasons"
#define KEY_REPORT_NOTES "report_notes"
#define KEY_CLAIMED_LEVEL "claimed_level"
#define KEY_LEVEL_FROM "level_from"
#define KEY_REPORT_STATUS "report_status"
#define KEY_BASELINE_STATUS "baseline_status"
#define KEY_REASONS "reasons"
#define KEY_WHY "why"
#define KEY_DEVICE_INDEX "device_index"
#define KEY_TOLERATED_BY "tolerated_by"
#define KEY_RULE "rule"
#define KEY_UNUSED_TOLERANCES "unused_tolerances"
#define KEY_FAILING_REPORTS "failing_reports"
#define KEY_REPORT_SHA256 "report_sha256"
/* level_from when the level is the backend's own claim */
#define GATE_LEVEL_FROM_CLAIM "claim"

/* ---- gate policy ---------------------------------------------------------------------------- */

#define KEY_DESCRIPTION "description"
#define KEY_ALLOW_MISSING "allow_missing"
#define KEY_ALLOW_INCOMPLETE "allow_incomplete"
#define KEY_ALLOW_INPUT_ERRORS "allow_input_errors"
#define KEY_ALLOW_NOTHING_AUDITED "allow_nothing_audited"
#define KEY_KNOWN_FAILURES "known_failures"
#define KEY_ALLOW "allow"
#define KEY_TOLERATE "tolerate"
#define KEY_MATCH "match"
#define KEY_UNTIL "until"
#define KEY_COMMENT "comment"

#endif
