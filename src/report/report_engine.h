/* The engine's own selection in the documents (docs/REPORT.md "`records[].engine`"): a
 * record's engine_indices judged in the main process (engine_check.h, verdict_judge_engine),
 * written as the record's "engine" entry, counted in the summary and printed in the terminal
 * table. `run` and `census` write it; report_read.c reads it back for gate, extract and the
 * HTML page. */
#ifndef DSATOPK_REPORT_ENGINE_H
#define DSATOPK_REPORT_ENGINE_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include <cjson/cJSON.h>

#include "capture.h"
#include "checks.h"
#include "engine_check.h"
#include "error.h"
#include "verdict.h"

/* One record's engine selection, judged. */
struct engine_result {
    bool judged;                      /* false: error says why (a malformed metadata contract) */
    char error[AUDIT_ERROR_MESSAGE_BYTES];
    struct engine_contract contract;
    struct engine_judgement judgement;
    struct verdict_result verdict;
};

/* Judges record's engine_indices (required) at the record's own k. checks: prepared on the same
 * record, reused when at its k (NULL or another k: prepared here). option: the contract given on
 * the command line, or NULL. source_rows: per row its file row number (NULL: the same), for the
 * rows named in the verdict. Returns 0 (result->judged or its error), or AUDIT_ENOMEM.
 * result is released with engine_result_release in every case. */
int engine_result_judge(struct engine_result *result, const struct capture_record *record,
                        const struct check_context *checks, const struct engine_contract *option,
                        const uint32_t *source_rows, struct audit_error *err);
void engine_result_release(struct engine_result *result);

/* "order sorted, tie_break small (metadata)" */
void engine_contract_text(const struct engine_contract *contract, char *text, size_t size);

/* The record's "engine" entry; NULL when out of memory. */
cJSON *report_engine_json(const struct engine_result *result, const uint32_t *source_rows);

/* The table lines of a record's engine entry: its line in the run table (where: "file:index",
 * shape: "rows x L") and, when it fails, its reasons and its first wrong rows with their
 * indices. */
void report_engine_table_lines(FILE *out, const char *where, const char *shape,
                               const struct engine_result *result, const uint32_t *source_rows);

/* summary.engine: the engine entries of a report counted (report.c counts each entry it adds,
 * merge recounts the joined records). */
struct engine_counts {
    uint64_t records, pass, fail, rows;
    uint64_t class_rows[ENGINE_ROW_CLASSES];
};
void engine_counts_add_entry(struct engine_counts *counts, const cJSON *entry);
cJSON *engine_counts_json(const struct engine_counts *counts);

#endif
