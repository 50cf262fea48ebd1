/* Row selection and row-by-row comparison of captures: the logic behind `extract` and `diff`
 * (docs/TRIAGE.md), kept apart from the command files so the unit tests reach it. */
#ifndef DSATOPK_SELECTION_H
#define DSATOPK_SELECTION_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "capture.h"
#include "engine_check.h"
#include "error.h"
#include "reference.h"

/* ---- lists and row subsets (extract) ---- */

/* Parses "7", "0,4,9" or "2-5,8" into a malloc'ed ascending list without duplicates. A list
 * that expands to more than CAPTURE_MAX_ROWS values is refused. Errors are AUDIT_EUSAGE naming
 * option (e.g. "--rows") and the item at fault. */
int selection_parse_list(const char *text, const char *option, uint32_t **values, size_t *count,
                         struct audit_error *err);

/* Sorts values ascending and drops duplicates; returns the new count. */
size_t selection_sort_unique(uint32_t *values, size_t count);

/* Builds dst from the listed rows of src, in the order given: scores rows (row_stride kept),
 * lengths, row_starts, page-table rows and their row starts, engine indices; k, page_size and
 * the metadata text are copied. A row >= src->rows is AUDIT_EUSAGE naming it. dst is freed with
 * capture_record_free. */
int selection_extract_rows(const struct capture_record *src, const uint32_t *rows, size_t count,
                           struct capture_record *dst, struct audit_error *err);

/* ---- diff: what changed between two captures of the same calls ---- */

/* Every row falls in exactly one case (docs/TRIAGE.md explains each). "Selection" means the set
 * of selected indices; order changes are reported as flags. When both records carry the
 * engine's selection, each side's is judged against its own scores first (engine_check.h): a
 * side that is not a valid top-k makes the row engine_wrong, whatever else changed. */
enum diff_case {
    DIFF_CASE_IDENTICAL,                      /* same scores, same engine output (or none) */
    DIFF_CASE_SCORES_DIFFER_SELECTION_SAME,   /* absorbed: same exact set, or same engine set */
    DIFF_CASE_SCORES_DIFFER_SELECTION_CHANGED,/* the selection moved with the scores */
    DIFF_CASE_TIE_FLAP,                       /* engine sets differ, both valid, where the exact
                                                 set did not move: other boundary ties taken */
    DIFF_CASE_ENGINE_REORDERED,               /* same scores, same engine set, another order */
    DIFF_CASE_ENGINE_WRONG,                   /* a side's engine selection is not a valid top-k
                                                 of its scores (or breaks its contract) */
    DIFF_CASE_WINDOW_DIFFERS,                 /* length or row start differ: not the same call */
    DIFF_CASE_COUNT,
};

/* Who is at fault for a row's divergence. */
enum diff_attribution {
    DIFF_ATTRIBUTION_NONE,             /* nothing diverged, or the selection absorbed it */
    DIFF_ATTRIBUTION_UPSTREAM,         /* the scores changed and carried the selection along */
    DIFF_ATTRIBUTION_SELECTION_KERNEL, /* the kernel reordered its output on the same scores */
    DIFF_ATTRIBUTION_TIE_FLAP,         /* an underdetermined row: the kernel's tie-break moved */
    DIFF_ATTRIBUTION_ENGINE_WRONG,     /* the engine selected a wrong set on one side */
    DIFF_ATTRIBUTION_CAPTURE_MISMATCH, /* the rows are not captures of the same call */
    DIFF_ATTRIBUTION_COUNT,
};

const char *diff_case_name(enum diff_case diff_case);
const char *diff_attribution_name(enum diff_attribution attribution);
enum diff_attribution diff_case_attribution(enum diff_case diff_case);

/* One side's engine selection of a row, judged against that side's own scores. */
struct diff_engine_side {
    enum engine_row_class row_class;
    uint32_t kinds;                          /* 1 << check_kind */
    uint64_t missing_count;                  /* candidates above the k-th value it left out */
    int64_t missing[ENGINE_LISTED_INDICES];  /* their window positions */
};

struct diff_row {
    uint32_t row;
    enum diff_case diff_case;
    bool window_differs;            /* lengths[row] or row_starts[row] differ */
    bool scores_identical;          /* every window element has the same bits */
    uint64_t differing_elements;    /* window positions whose bits differ (plus any length gap) */
    double max_abs_diff;            /* largest |a - b| over differing elements; +inf when a
                                       non-finite value is involved */
    bool nonfinite_changed;         /* some differing element is NaN or +-inf in A or B */
    uint32_t max_ulp_diff;          /* largest topk_order_key distance (total-order ULPs) */

    /* A's census at the compared k (valid when the scores differ). */
    bool short_row;                 /* A has <= k candidates: everything selected, no gap */
    double boundary_gap;            /* k-th minus (k+1)-th of A (0 when tied) */
    int64_t tie_set;
    /* Largest drop of an element at or above A's boundary plus largest rise of an element at or
     * below A's (k+1)-th value: a set change needs this to reach the gap. */
    double crossing_perturbation;
    bool perturbation_exceeds_gap;  /* the perturbation is able to change the selected set */

    bool reference_set_changed;     /* CPU reference (exact top-k) of A vs B */
    bool reference_order_changed;
    bool engine_compared;           /* both records carry engine_indices of the same k */
    bool engine_set_changed;
    bool engine_order_changed;
    bool engine_judged;             /* engine_a and engine_b hold each side's judgement */
    struct diff_engine_side engine_a, engine_b;
    bool page_table_differs;        /* the page-table entries covering the window differ */
};

/* What judging each side's engine selection needs, prepared once per record pair: the checks
 * of each record at its own k and the contract from its metadata (engine_check.h). */
struct diff_engine_judge {
    const struct check_context *a, *b;
    struct engine_contract contract_a, contract_b;
    struct engine_row_scratch scratch_a, scratch_b;
};

struct diff_scratch {
    struct topk_scratch topk;
    size_t capacity;                 /* of each array below, in elements */
    int32_t *reference_a, *reference_b;
    int64_t *sorted_a, *sorted_b;
    int64_t *engine_a, *engine_b;
    struct topk_page_inverse pages;  /* page-table inversion of engine indices */
};

void diff_scratch_free(struct diff_scratch *scratch);

/* Compares row `row` (< both row counts) of a and b with the reference and census at k (> 0).
 * Engine outputs are compared when both records carry them with a->k == b->k; when the two page
 * tables differ for this row, engine indices are mapped back to window positions first, so a
 * different KV-cache page placement alone is not reported as a different selection. judge (NULL:
 * not judged, both sides taken as valid) judges each side's engine selection. */
int diff_row_compare(const struct capture_record *a, const struct capture_record *b, uint32_t row,
                     uint32_t k, struct diff_scratch *scratch, struct diff_engine_judge *judge,
                     struct diff_row *out, struct audit_error *err);

/* Record-level differences that make two records not the same call. */
struct diff_record_shape {
    uint32_t common_rows;           /* rows compared: min of both */
    bool rows_differ;
    bool k_differs;
    bool page_table_layout_differs; /* one has a page table and the other not, or page sizes */
    bool engine_presence_differs;   /* only one carries engine_indices (not a mismatch) */
};

/* Fills shape; returns true when the records mismatch (rows, k or page-table layout). */
bool diff_record_shape_compare(const struct capture_record *a, const struct capture_record *b,
                               struct diff_record_shape *shape);

#endif
