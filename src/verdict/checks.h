/* Contract checks of one top-k output against the reference (docs/REPORT.md "Violation kinds").
 *
 * checks_prepare() computes, once per record and k, what every check needs (the reference
 * output, each row's candidate count, boundary key and how many candidates rank above it);
 * checks_output() then costs O(rows * k) per output with no sorting of scores. */
#ifndef DSATOPK_CHECKS_H
#define DSATOPK_CHECKS_H

#include <stdbool.h>
#include <stdint.h>

#include "capture.h"
#include "error.h"

enum check_kind {
    CHECK_SHORT = 0,       /* fewer non -1 entries than min(k, candidates) */
    CHECK_DUPLICATE,       /* an index appears twice in a row */
    CHECK_OUT_OF_RANGE,    /* index < -1 or >= length, or a selected exact -inf */
    CHECK_WRONG_SET,       /* selected-score multiset differs from the reference's (always so
                              when a row is short or has an out-of-range entry) */
    CHECK_TIE_RULE,        /* right multiset, but not the reference's index set, i.e. boundary
                              ties not the smallest indices (backends that claim it) */
    CHECK_ORDER,           /* two consecutive valid entries out of canonical / index-ascending
                              order (backends that claim it); judged on any set */
    CHECK_PADDING,         /* a real index after a -1, or -1 not at the end */
    CHECK_PAGE_TRANSLATION,/* translated index differs from the page table's translation of raw */
    CHECK_RAW_MISALIGNED,  /* raw and translated outputs disagree on which slots are -1 */
    CHECK_KIND_COUNT
};

const char *check_kind_name(enum check_kind kind); /* "short", "duplicate", ... */

/* Marks of window indices, one bit each: the duplicate checks' scratch (index >= 0). */
static inline bool check_mark_test_and_set(uint8_t *marks, int64_t index)
{
    const uint8_t mask = (uint8_t)(1u << (index & 7));
    const bool was_set = (marks[index >> 3] & mask) != 0;
    marks[index >> 3] |= mask;
    return was_set;
}

static inline bool check_mark_test(const uint8_t *marks, int64_t index)
{
    return (marks[index >> 3] >> (index & 7)) & 1u;
}

static inline void check_mark_clear(uint8_t *marks, int64_t index)
{
    marks[index >> 3] &= (uint8_t)~(1u << (index & 7));
}

/* What the backend promises (from its backend-table entry). */
struct check_claims {
    bool smallest_index_ties;
    bool canonical_order;
    bool index_ascending;
};

struct check_counts {
    uint64_t violations[CHECK_KIND_COUNT]; /* rows showing each kind */
    uint64_t rows_with_violation;
    bool equals_reference;                 /* byte-identical to the reference output */
};

struct check_context {
    const struct capture_record *record;
    uint32_t rows, k;
    int32_t *reference;       /* rows * k: reference output (translated when paged) */
    int32_t *reference_raw;   /* rows * k: window-relative reference, or NULL without pages */
    int64_t *candidates;      /* per row: window minus exact -inf */
    uint32_t *boundary_key;   /* per row: topk_order_key of the k-th ranked (when > k cands) */
    int64_t *above;           /* per row: candidates ranking strictly above the boundary */
    uint8_t *seen;            /* scratch: per-index marks for the duplicate check */
    size_t seen_bytes;
};

/* k == 0 means the record's own k. The record must stay alive while the context is used. */
int checks_prepare(struct check_context *context, const struct capture_record *record, uint32_t k,
                   struct audit_error *err);
void checks_release(struct check_context *context);

/* Checks one output (rows * k, translated when paged) and its raw indices (required when the
 * record has a page table, ignored otherwise). counts is overwritten, not accumulated. claims
 * may be NULL (no tie or order promise). row_flags, if not NULL, receives per row a bitmask of
 * (1 << check_kind). Not thread-safe per context (it uses the context's scratch marks). */
int checks_output(struct check_context *context, const int32_t *out, const int32_t *raw_out,
                  const struct check_claims *claims, struct check_counts *counts,
                  uint32_t *row_flags, struct audit_error *err);
/* The same checks on rows [first_row, end_row) only, for a caller that splits an output's rows
 * over threads: counts is overwritten with those rows' counts (equals_reference: those rows are
 * the reference's), row_flags receives their flags at their own row numbers, and seen replaces
 * the context's scratch marks (context->seen_bytes bytes, zero on entry and left zero). The
 * context is only read, so calls on disjoint rows with their own seen may run at once. */
int checks_output_rows(const struct check_context *context, const int32_t *out,
                       const int32_t *raw_out, const struct check_claims *claims,
                       uint32_t first_row, uint32_t end_row, uint8_t *seen,
                       struct check_counts *counts, uint32_t *row_flags, struct audit_error *err);

/* An output checked before, whose rows another output may select again in another order (a
 * kernel whose order flaps): every kind but order and padding is a function of a row's index
 * multiset, so such a row needs only its order and padding judged. */
struct check_reuse {
    const uint32_t *row_flags;      /* per row: the checked output's flags */
    const uint32_t *rows_differing; /* per row: 0 where this output's row has that row's multiset */
};
/* checks_output_rows, taking the multiset kinds of a row from reuse where rows_differing[b] is
 * 0 and the checked row had neither an out-of-range nor a duplicate entry (those rows, and
 * records with a page table, are checked in full). The same flags and counts as
 * checks_output_rows. reuse may be NULL. */
int checks_output_rows_reusing(const struct check_context *context, const int32_t *out,
                               const int32_t *raw_out, const struct check_claims *claims,
                               uint32_t first_row, uint32_t end_row, uint8_t *seen,
                               const struct check_reuse *reuse, struct check_counts *counts,
                               uint32_t *row_flags, struct audit_error *err);
/* Adds the counts of part (other rows of the same output) to sum; equals_reference when both
 * are. Start sum with zero counts and equals_reference true. */
void check_counts_add(struct check_counts *sum, const struct check_counts *part);

#endif
