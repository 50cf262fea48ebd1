/* The compare document (schema dsatopk-audit/compare, docs/TRIAGE.md "compare"): the runs, how
 * they were aligned, every call with its groups, perturbation and attribution, and the summary;
 * and the terminal table drawn from the same result. */
#ifndef DSATOPK_COMPARE_JSON_H
#define DSATOPK_COMPARE_JSON_H

#include <stdio.h>

#include <cjson/cJSON.h>

#include "compare_runs.h"
#include "document_context.h"
#include "triage_keys.h"

/* The document; NULL when out of memory. */
cJSON *compare_json(const struct document_context *context, const struct compare_result *result);

/* The summary in the seed experiment's words: "13 comparable calls: 13 with different scores,
 * 0 with identical scores and a different selection; boundary gap min 4.58e-05 / median
 * 0.00032". */
void compare_summary_text(const struct compare_result *result, char *text, size_t size);

/* The terminal table: one line per call, the calls that are not comparable, the summary. */
void compare_table(FILE *out, const struct compare_result *result);

#endif
