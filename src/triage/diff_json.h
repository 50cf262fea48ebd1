/* The diff document (schema dsatopk-audit/diff, docs/TRIAGE.md "JSON"): the inputs, the
 * mismatches and input errors met, the summary, and per record its counts and every row that is
 * not identical. */
#ifndef DSATOPK_DIFF_JSON_H
#define DSATOPK_DIFF_JSON_H

#include <stdint.h>

#include <cjson/cJSON.h>

#include "diff_record.h"
#include "document_context.h"
#include "triage_keys.h"

/* A new document: schema, schema_version, context, inputs, k_override (0: null) and empty
 * mismatch and input error lists. NULL when out of memory. */
cJSON *diff_json_begin(const struct document_context *context, const char *path_a,
                       const char *path_b, uint32_t k_override);
/* Appends a message to the document's "mismatches" or "input_errors". 0 or AUDIT_ENOMEM. */
int diff_json_add_mismatch(cJSON *document, const char *message);
int diff_json_add_input_error(cJSON *document, const char *message);
/* A remark on the pairing that is not a mismatch (a reproducer compared with another run). */
int diff_json_add_note(cJSON *document, const char *message);
/* How records were paired: TRIAGE_BY_POSITION, or KEY_EXTRACTED_FROM with the reproducer's side
 * (DIFF_SIDE_A or DIFF_SIDE_B). 0 or AUDIT_ENOMEM. */
int diff_json_set_pairing(cJSON *document, const char *by, const char *reproducer);
/* The object of one compared record, appended to records (an array the caller attaches with
 * diff_json_finish). 0 or AUDIT_ENOMEM. */
int diff_json_add_record(cJSON *records, const struct diff_record_result *result);
/* Adds the summary of totals, then records (moved into the document, also on failure). 0 or
 * AUDIT_ENOMEM. */
int diff_json_finish(cJSON *document, const struct diff_totals *totals, cJSON *records);

#endif
