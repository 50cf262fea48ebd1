/* diff, a record at a time: one record of capture A against the record at the same position in
 * capture B, row by row (diff_row_compare, selection.h), with the counts the table and the
 * document of `diff` show (docs/TRIAGE.md), and the totals over every record compared. */
#ifndef DSATOPK_DIFF_RECORD_H
#define DSATOPK_DIFF_RECORD_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "capture.h"
#include "error.h"
#include "selection.h"

/* A mismatch message (rows, k, page-table layout, record counts). */
#define DIFF_MESSAGE_BYTES 512
/* At most this many per record: rows, k, page-table layout. */
#define DIFF_RECORD_MAX_MISMATCHES 3

struct diff_record_result {
    uint32_t index;                  /* A's record index */
    uint32_t rows_a, rows_b;
    uint32_t k;                      /* the compared k: --k, else A's */
    uint32_t record_k_a, record_k_b;
    uint8_t payload_sha256_a[32], payload_sha256_b[32];
    struct diff_record_shape shape;
    bool mismatch;                   /* rows, k or page-table layout differ */
    bool a_has_engine_indices;       /* which side carries them when only one does */
    char mismatches[DIFF_RECORD_MAX_MISMATCHES][DIFF_MESSAGE_BYTES];
    size_t mismatch_count;
    uint64_t cases[DIFF_CASE_COUNT];
    uint64_t attribution[DIFF_ATTRIBUTION_COUNT];
    bool engine_compared;            /* some row compared engine outputs */
    bool scores_identical;           /* every compared row has the same scores */
    bool engine_differs_on_same;     /* some row: same scores, other engine output */
    uint64_t engine_wrong_rows_a, engine_wrong_rows_b; /* rows whose engine selection is wrong */
    uint64_t reference_changed_rows, page_table_rows;
    struct diff_row *rows;           /* the rows that are not identical, in row order */
    size_t row_count, row_capacity;
};

/* Compares a and b (k_override 0: at A's k); when both carry the engine's selection with one k,
 * each side's is judged against its own scores (under the contract of its metadata) before
 * the rows are classified. row_numbers (NULL: the rows' own) and index name the rows and the
 * record in the result: a reproducer paired with its original reports the original's. result
 * is released with diff_record_result_release, also after an error (AUDIT_ENOMEM, AUDIT_EDATA
 * for a malformed metadata contract, or diff_row_compare's). */
int diff_record_compare(const struct capture_record *a, const struct capture_record *b,
                        uint32_t k_override, const uint32_t *row_numbers, uint32_t index,
                        struct diff_scratch *scratch, struct diff_record_result *result,
                        struct audit_error *err);
void diff_record_result_release(struct diff_record_result *result);

/* Over every record compared. */
struct diff_totals {
    uint64_t records, rows, differing_rows;
    uint64_t cases[DIFF_CASE_COUNT];
    uint64_t attribution[DIFF_ATTRIBUTION_COUNT];
    /* Per record (call). */
    uint64_t records_scores_identical, records_scores_differ;
    uint64_t records_scores_same_engine_differs, records_reference_selection_changed;
    uint64_t records_engine_compared, records_tie_flap, records_engine_wrong;
    uint64_t page_table_rows_differ;
    bool mismatch, input_error;
};

void diff_totals_add(struct diff_totals *totals, const struct diff_record_result *result);

/* ---- a reproducer and its original (extract's "extracted_from") ---- */

/* Where a record cut by `extract` came from: its metadata's extracted_from. */
struct diff_provenance {
    bool present;
    uint32_t record;                 /* the source record's index */
    uint32_t *rows;                  /* the source rows, one per row of the reproducer */
    size_t row_count;
    bool has_payload;
    uint8_t payload_sha256[32];      /* of the source record */
};

/* Reads record's extracted_from (absent: present false). A malformed one is AUDIT_EDATA naming
 * the record; rows that do not match the record's row count too. */
int diff_provenance_read(const struct capture_record *record, struct diff_provenance *provenance,
                         struct audit_error *err);
void diff_provenance_release(struct diff_provenance *provenance);

#endif
