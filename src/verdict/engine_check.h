/* The engine's own selection judged: a capture record's engine_indices (what the serving kernel
 * selected) against the CPU reference at the record's k, under the contract the engine promises
 * (docs/REPORT.md "`records[].engine`").
 *
 * Each row is one of
 * - exact: the reference's index set (the canonical top-k, ties to the smaller index);
 * - tie_variant: a valid top-k that is not the reference's set: every candidate strictly above
 *   the k-th value selected, none strictly below it, the rest from the boundary tie set (an
 *   underdetermined row the engine resolved its own way);
 * - wrong: the row shows a failing kind: wrong_set (the index set is not a valid top-k), short
 *   (fewer entries than min(k, candidates)), duplicate, out_of_range (outside the window, an
 *   exact -inf, or through a page table: an index no page of the window explains), padding (a
 *   real index after a -1), and under a contract order (its order) and tie_rule (its tie-break).
 * Kinds are check_kind bits (checks.h). Unlike the backend checks, which compare score
 * multisets, the engine is judged on its index set: a duplicate index always leaves the set one
 * candidate short, so it is a wrong set too.
 *
 * Paged records hold translated indices: they are mapped back to window positions through the
 * row's page table (topk_untranslate_row) and judged there; listed indices carry both.
 *
 * No JSON and no CUDA: the report writes the judgement (src/report/report_engine.c), the verdict
 * rule is verdict_judge_engine() (verdict.h). Unit-tested in tests/test_engine_check.c. */
#ifndef DSATOPK_ENGINE_CHECK_H
#define DSATOPK_ENGINE_CHECK_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "capture.h"
#include "checks.h"
#include "error.h"
#include "reference.h"

/* ---- the contract ---------------------------------------------------------------------------- */

enum engine_order {
    ENGINE_ORDER_NONE,            /* no order promised */
    ENGINE_ORDER_SORTED,          /* score descending (ties in any order) */
    ENGINE_ORDER_INDEX_ASCENDING, /* window index ascending */
};
enum engine_tie_break {
    ENGINE_TIE_BREAK_NONE,        /* which boundary ties are selected is unspecified */
    ENGINE_TIE_BREAK_SMALL,       /* the smallest indices of the boundary tie set */
    ENGINE_TIE_BREAK_LARGE,       /* the largest */
};
/* Where the contract judged came from. */
enum engine_contract_source {
    ENGINE_CONTRACT_DEFAULT,      /* none given: a valid top-k in any order */
    ENGINE_CONTRACT_METADATA,     /* the record's metadata "contract" */
    ENGINE_CONTRACT_OPTION,       /* run --engine-contract (and census's): overrides metadata */
};

struct engine_contract {
    enum engine_order order;
    enum engine_tie_break tie_break;
    enum engine_contract_source source;
};

const char *engine_order_name(enum engine_order order);             /* "sorted", ... */
const char *engine_tie_break_name(enum engine_tie_break tie_break); /* "small", ... */
const char *engine_contract_source_name(enum engine_contract_source source);

/* Parses the contract object's text, {"order": O, "tie_break": T} with both keys and nothing
 * else, the spelling of docs/FORMAT.md (the Python hook writes it). where names the object in
 * messages ("--engine-contract", "metadata"); AUDIT_EUSAGE for text that is not such an object
 * (the caller picks the exit code). source is set to the given one. */
int engine_contract_parse(const char *json_text, const char *where,
                          enum engine_contract_source source, struct engine_contract *contract,
                          struct audit_error *err);

/* The contract a record is judged under: option when given (not NULL), else its metadata's
 * "contract", else the default. A metadata contract that is malformed is AUDIT_EDATA naming the
 * record. */
int engine_contract_for_record(const struct capture_record *record,
                               const struct engine_contract *option,
                               struct engine_contract *contract, struct audit_error *err);

/* ---- the judgement --------------------------------------------------------------------------- */

enum engine_row_class { ENGINE_ROW_EXACT, ENGINE_ROW_TIE_VARIANT, ENGINE_ROW_WRONG };
#define ENGINE_ROW_CLASSES 3
const char *engine_row_class_name(enum engine_row_class row_class); /* "exact", ... */

/* The kinds that make a row wrong (bits 1 << check_kind). */
#define ENGINE_WRONG_KINDS                                                                     \
    ((1u << CHECK_SHORT) | (1u << CHECK_DUPLICATE) | (1u << CHECK_OUT_OF_RANGE) |              \
     (1u << CHECK_WRONG_SET) | (1u << CHECK_TIE_RULE) | (1u << CHECK_ORDER) |                  \
     (1u << CHECK_PADDING))

/* Indices listed per kind of a wrong row (the counts are complete). */
#define ENGINE_LISTED_INDICES 16u
/* Wrong rows described index by index (the others are counted and listed by number). */
#define ENGINE_DESCRIBED_ROWS 256u

/* A candidate the engine left out although the row needs it (missing: it ranks strictly above
 * the k-th value, or it belongs to a boundary tie set whose members are all needed), or one it
 * selected although it ranks strictly below the k-th value (extra). */
struct engine_index_note {
    int64_t index;            /* window position */
    int32_t translated;       /* through the page table (the index itself without one) */
    float score;
    /* |score - k-th value| as doubles (NaN when either is NaN) and the topk_order_key distance;
     * has_distance false for a row with at most k candidates (no k-th value to compare with). */
    bool has_distance;
    double distance;
    uint32_t distance_ulps;
};

struct engine_row_detail {
    uint32_t row;             /* in the judged record */
    uint32_t kinds;           /* 1 << check_kind */
    bool has_boundary;        /* more than k candidates */
    float kth;                /* the k-th value (has_boundary) */
    uint64_t entries, needed; /* real (non -1) entries, min(k, candidates) */
    /* missing_count also counts boundary ties the row lacks when any of several would do
     * (those are not listed) */
    uint64_t missing_count, extra_count, duplicate_count, out_of_range_count;
    struct engine_index_note missing[ENGINE_LISTED_INDICES];
    struct engine_index_note extra[ENGINE_LISTED_INDICES];
    int32_t duplicates[ENGINE_LISTED_INDICES];   /* as the engine wrote them */
    int32_t out_of_range[ENGINE_LISTED_INDICES]; /* as the engine wrote them */
    int64_t order_slot;       /* first slot out of the promised order, -1: none */
    int64_t padding_slot;     /* first real entry after a -1, -1: none */
};

struct engine_judgement {
    struct engine_contract contract;
    uint32_t rows, k;
    uint32_t *row_kinds;              /* per row: 1 << check_kind */
    uint8_t *row_class;               /* per row: enum engine_row_class */
    uint64_t class_rows[ENGINE_ROW_CLASSES];
    uint64_t kind_rows[CHECK_KIND_COUNT];
    struct engine_row_detail *details; /* the first ENGINE_DESCRIBED_ROWS wrong rows, in order */
    size_t detail_count;
};

/* Judges record->engine_indices (required) with context prepared on the same record at its own
 * k (checks_prepare(context, record, record->k)). judgement is released with
 * engine_judgement_release, also after an error (AUDIT_ENOMEM, AUDIT_EDATA for a page-table row
 * outside its table). */
int engine_judge_record(const struct check_context *context,
                        const struct engine_contract *contract,
                        struct engine_judgement *judgement, struct audit_error *err);
void engine_judgement_release(struct engine_judgement *judgement);

/* The judgement of one row alone (row_class, kinds, and detail when not NULL). scratch marks
 * hold context->seen_bytes zero bytes and are left zero; positions holds k entries. Used by
 * engine_judge_record and by diff, which judges single rows. */
struct engine_row_scratch {
    uint8_t *seen;
    int64_t *positions;
    struct topk_page_inverse *pages;
};
int engine_judge_row(const struct check_context *context, const struct engine_contract *contract,
                     uint32_t row, struct engine_row_scratch *scratch,
                     enum engine_row_class *row_class, uint32_t *kinds,
                     struct engine_row_detail *detail, struct audit_error *err);

#endif
