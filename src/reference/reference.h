/* The CPU reference top-k: the oracle every backend is compared with (docs/REFERENCE.md).
 *
 * Canonical definition: candidates are the row's window minus exact -inf entries. They are
 * ranked by the IEEE-754 total order of the float bits, descending: +NaN (any payload) ranks
 * above +inf, -NaN below every other candidate, +0.0 above -0.0. Equal bit patterns rank by
 * smaller index first. The output is the first min(k, candidates) of that ranking as int32
 * window-relative indices, then -1 padding up to k. */
#ifndef DSATOPK_REFERENCE_H
#define DSATOPK_REFERENCE_H

#include <stdbool.h>
#include <stdint.h>

#include "capture.h"
#include "error.h"

/* Order-preserving unsigned key of a float's bits under the total order above: a larger key
 * ranks first. Exact -inf has key 0x007FFFFF. */
static inline uint32_t topk_order_key(float value)
{
    union { float f; uint32_t u; } bits = { .f = value };
    return (bits.u & 0x80000000u) ? ~bits.u : (bits.u | 0x80000000u);
}

#define TOPK_NEG_INF_BITS 0xFF800000u

/* Exact -inf is the one value that is never a candidate (NaNs, even negative ones that rank
 * below it, are candidates). */
static inline bool topk_is_negative_infinity(float value)
{
    union { float f; uint32_t u; } bits = { .f = value };
    return bits.u == TOPK_NEG_INF_BITS;
}

/* Per-thread scratch so that repeated rows allocate nothing; sized on first use. */
struct topk_scratch {
    uint32_t *keys;
    int32_t *indices;
    size_t capacity;
};

void topk_scratch_free(struct topk_scratch *scratch);

/* One row: out receives k indices (canonical order, -1 padded). Returns the number of real
 * (non -1) entries, or a negative code on allocation failure. */
int64_t topk_reference_row(const float *window, int32_t length, uint32_t k, int32_t *out,
                           struct topk_scratch *scratch);

/* A whole record with its k (k_override > 0 replaces record->k). out: rows * k window-relative
 * indices; when the record has a page table, out receives translated indices and raw_out (if
 * not NULL) the window-relative ones, both -1 padded alike. Rows are shared out to a few
 * threads on large records (host_threads.h; DSATOPK_HOST_THREADS=1 keeps one); the output does
 * not depend on it, and an error is the lowest failing row's. */
int topk_reference_record(const struct capture_record *record, uint32_t k_override, int32_t *out,
                          int32_t *raw_out, struct audit_error *err);

/* Page-table translation of one window-relative index (idx >= 0). */
static inline int32_t topk_translate_index(const struct capture_record *record, uint32_t b,
                                           int32_t idx)
{
    int64_t start = record->page_table_row_starts ? record->page_table_row_starts[b] : 0;
    int64_t page = record->page_table[(uint64_t)b * record->page_table_cols + start +
                                      idx / (int32_t)record->page_size];
    return (int32_t)(page * record->page_size + idx % (int32_t)record->page_size);
}

/* The inverse of topk_translate_index for one row: scratch for the row's pages, sorted. */
struct topk_page_inverse {
    uint64_t *page_keys;             /* physical page << 32 | window page slot */
    size_t capacity;
};

void topk_page_inverse_free(struct topk_page_inverse *inverse);

/* Maps count indices of row b in the output space (translated through the page table when the
 * record has one, window-relative otherwise) back to window positions: -1 stays -1, and an index
 * no page of the window explains (without a page table: one outside the window), or a negative
 * index other than -1, becomes a value below -2 unique to it, so that it differs from every
 * window position, from -1 and from every other such index. A physical page the row's table
 * lists twice maps to its first window slot. AUDIT_EDATA when the row's page-table start lies
 * outside the table, AUDIT_ENOMEM. */
int topk_untranslate_row(const struct capture_record *record, uint32_t b, const int32_t *indices,
                         uint32_t count, struct topk_page_inverse *inverse, int64_t *out,
                         struct audit_error *err);

#endif
