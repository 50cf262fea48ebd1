/* The names of the documents `diff` and `compare` write: the comparison of two captures row by
 * row (docs/TRIAGE.md "JSON", docs/schemas/diff-3.schema.json) and N runs aligned call by call
 * (docs/TRIAGE.md "compare", docs/schemas/compare-1.schema.json). diff_json.c and
 * compare_json.c write them, cmd_diff.c and html_compare.c read them, every one through these
 * constants; the keys they share with the other documents (records, row, notes, the engine's
 * missing and kinds, ...) are document_keys.h's, included here. tests/build/
 * test_document_keys.py keeps this header and document_keys.h the only spelling. Each constant
 * is the key in upper case.
 *
 * The case, attribution and class names that are keys of the count objects come from their own
 * name functions (diff_record.h, compare_runs.h, engine_check.h). */
#ifndef DSATOPK_TRIAGE_KEYS_H
#define DSATOPK_TRIAGE_KEYS_H

#include "document_keys.h"

/* ---- schemas -------------------------------------------------------------------------------- */

#define DIFF_SCHEMA "dsatopk-audit/diff"
/* 2: "schema_version" (was "version"); tool_version and command_line moved from the top level
 * into the shared context block.
 * 3: the cases scores_same_engine_differs, scores_differ_engine_changed_alone and
 * scores_differ_engine_kept and the attribution inconclusive gave way to tie_flap,
 * engine_reordered and engine_wrong, each side's engine selection judged (engine_a, engine_b). */
#define DIFF_SCHEMA_VERSION 3
#define COMPARE_SCHEMA "dsatopk-audit/compare"
#define COMPARE_SCHEMA_VERSION 1

/* ---- both ----------------------------------------------------------------------------------- */

#define KEY_ATTRIBUTION "attribution"
#define KEY_BY "by" /* diff's pairing.by, compare's alignment.by */
#define KEY_NONFINITE_CHANGED "nonfinite_changed"
/* pairing.by and alignment.by when records are taken in file order (else KEY_EXTRACTED_FROM for
 * diff, KEY_CALL for compare) */
#define TRIAGE_BY_POSITION "position"

/* ---- diff ----------------------------------------------------------------------------------- */

#define KEY_INPUTS "inputs"
#define KEY_A "a" /* inputs.a: the first capture */
#define KEY_B "b"
#define KEY_PAIRING "pairing"
#define KEY_REPRODUCER "reproducer"
#define KEY_MISMATCHES "mismatches"
/* pairing.reproducer and a row's engine_wrong_side: which capture */
#define DIFF_SIDE_A "A"
#define DIFF_SIDE_B "B"
#define DIFF_SIDE_BOTH "both"

/* records[] */
#define KEY_ROWS_A "rows_a"
#define KEY_ROWS_B "rows_b"
#define KEY_RECORD_K_A "record_k_a"
#define KEY_RECORD_K_B "record_k_b"
#define KEY_PAYLOAD_SHA256_A "payload_sha256_a"
#define KEY_PAYLOAD_SHA256_B "payload_sha256_b"
#define KEY_DIFFERING_ROWS "differing_rows"
#define KEY_ENGINE_COMPARED "engine_compared"
#define KEY_SCORES_IDENTICAL "scores_identical"
#define KEY_ROWS_COMPARED "rows_compared"
#define KEY_ROWS_DIFFERING "rows_differing"
#define KEY_REFERENCE_SET_CHANGED_ROWS "reference_set_changed_rows"
#define KEY_PAGE_TABLE_ROWS_DIFFER "page_table_rows_differ"
#define KEY_ENGINE_WRONG_ROWS_A "engine_wrong_rows_a"
#define KEY_ENGINE_WRONG_ROWS_B "engine_wrong_rows_b"
#define KEY_CASES "cases"

/* records[].differing_rows[] (scores_identical above) */
#define KEY_CASE "case"
#define KEY_WINDOW_DIFFERS "window_differs"
#define KEY_DIFFERING_ELEMENTS "differing_elements"
#define KEY_MAX_ABS_DIFF "max_abs_diff"
#define KEY_MAX_ULP_DIFF "max_ulp_diff"
#define KEY_BOUNDARY_GAP "boundary_gap"
#define KEY_SHORT_ROW "short_row"
#define KEY_CROSSING_PERTURBATION "crossing_perturbation"
#define KEY_PERTURBATION_EXCEEDS_GAP "perturbation_exceeds_gap"
#define KEY_REFERENCE_SET_CHANGED "reference_set_changed"
#define KEY_REFERENCE_ORDER_CHANGED "reference_order_changed"
#define KEY_ENGINE_SET_CHANGED "engine_set_changed"
#define KEY_ENGINE_ORDER_CHANGED "engine_order_changed"
#define KEY_ENGINE_A "engine_a" /* {class, kinds, missing, missing_total} or null */
#define KEY_ENGINE_B "engine_b"
#define KEY_CLASS "class"
#define KEY_ENGINE_WRONG_SIDE "engine_wrong_side"
#define KEY_PAGE_TABLE_DIFFERS "page_table_differs"

/* summary (rows_compared, rows_differing, cases, attribution, page_table_rows_differ above) */
#define KEY_RECORDS_COMPARED "records_compared"
#define KEY_RECORDS_SCORES_IDENTICAL "records_scores_identical"
#define KEY_RECORDS_SCORES_DIFFER "records_scores_differ"
#define KEY_RECORDS_SCORES_SAME_ENGINE_DIFFERS "records_scores_same_engine_differs"
#define KEY_RECORDS_REFERENCE_SELECTION_CHANGED "records_reference_selection_changed"
#define KEY_RECORDS_ENGINE_COMPARED "records_engine_compared"
#define KEY_RECORDS_TIE_FLAP "records_tie_flap"
#define KEY_RECORDS_ENGINE_WRONG "records_engine_wrong"
#define KEY_MISMATCH "mismatch"
#define KEY_INPUT_ERROR "input_error"

/* ---- compare -------------------------------------------------------------------------------- */

#define KEY_RUNS "runs"
#define KEY_RUN "run"
#define KEY_ALIGNMENT "alignment"
#define KEY_KEYS "keys" /* alignment.keys: the metadata keys a call is named by */
#define KEY_CALLS "calls"

/* calls[] (call: document_keys.h; records: the record of each run, null where absent) */
#define KEY_COMPARABLE "comparable"
#define KEY_SCORE_GROUPS "score_groups"
#define KEY_EXACT_GROUPS "exact_groups"
#define KEY_ENGINE_GROUPS "engine_groups"
#define KEY_IDENTICAL_SCORES_DIFFERENT_SELECTION "identical_scores_different_selection"
#define KEY_ENGINE_WRONG "engine_wrong"
#define KEY_FIRST_ROW "first_row"
#define KEY_BOUNDARY_GAP_MIN "boundary_gap_min"
#define KEY_LARGEST_ABS_DIFF "largest_abs_diff"
#define KEY_LARGEST_CROSSING_PERTURBATION "largest_crossing_perturbation"
#define KEY_ROWS_PERTURBATION_EXCEEDS_GAP "rows_perturbation_exceeds_gap"

/* summary (runs, calls, attribution, boundary_gap_min above) */
#define KEY_COMPARABLE_CALLS "comparable_calls"
#define KEY_NOT_COMPARABLE_CALLS "not_comparable_calls"
#define KEY_CALLS_SCORES_DIFFER "calls_scores_differ"
#define KEY_CALLS_IDENTICAL_SCORES_DIFFERENT_SELECTION "calls_identical_scores_different_selection"
#define KEY_BOUNDARY_GAP_MEDIAN "boundary_gap_median"
#define KEY_READ_ERROR "read_error"
#define KEY_TEXT "text" /* the summary in words */

#endif
