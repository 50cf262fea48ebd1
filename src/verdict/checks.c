/* Contract checks of one top-k output against the reference (docs/REPORT.md "Violation kinds").
 *
 * Everything a check needs beyond the output itself is computed once per record and k in
 * checks_prepare(): the reference output, and per row the candidate count, the order key of the
 * k-th ranked candidate (the boundary) and how many candidates rank strictly above it. With
 * those, the selected-score multiset of a row can be compared with the reference's in O(k)
 * without sorting scores: a row of distinct, in-range candidates selects the reference's
 * multiset exactly when every selected key is >= the boundary key, the count of keys above it
 * equals the reference's, and the row holds min(k, candidates) entries.
 *
 * The kinds are kept as independent as the definitions allow, so that a report says what went
 * wrong rather than echoing one fault under several names:
 * - order is checked pairwise between consecutive valid entries (canonical: score descending by
 *   total order, then index ascending; or index ascending), not by comparing with the reference,
 *   so a wrong set in the right order is a wrong set only;
 * - the tie rule is judged only on rows whose score multiset is right (a wrong set already
 *   says more than "wrong ties");
 * - page translation is judged only on slots where both outputs hold an index (the others are
 *   raw/translated misalignment).
 * A row with an out-of-range entry (index outside the window or an exact -inf) never has the
 * reference's score multiset, so it is always a wrong set too. */
#include <stdlib.h>
#include <string.h>

#include "checks.h"
#include "host_threads.h"
#include "reference.h"

/* A thread costs tens of microseconds to start; a row of 131072 scores takes about 150. */
#define BOUNDARY_SCORES_PER_THREAD (512u * 1024u)

static const char *const check_kind_names[CHECK_KIND_COUNT] = {
    [CHECK_SHORT] = "short",
    [CHECK_DUPLICATE] = "duplicate",
    [CHECK_OUT_OF_RANGE] = "out_of_range",
    [CHECK_WRONG_SET] = "wrong_set",
    [CHECK_TIE_RULE] = "tie_rule",
    [CHECK_ORDER] = "order",
    [CHECK_PADDING] = "padding",
    [CHECK_PAGE_TRANSLATION] = "page_translation",
    [CHECK_RAW_MISALIGNED] = "raw_misaligned",
};

const char *check_kind_name(enum check_kind kind)
{
    if ((unsigned)kind >= CHECK_KIND_COUNT)
        return "unknown";
    return check_kind_names[kind];
}

static int compare_keys(const void *a, const void *b)
{
    uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;
    return (x > y) - (x < y);
}

void checks_release(struct check_context *context)
{
    if (!context)
        return;
    free(context->reference);
    free(context->reference_raw);
    free(context->candidates);
    free(context->boundary_key);
    free(context->above);
    free(context->seen);
    memset(context, 0, sizeof(*context));
}

/* Per row, once the reference is known: the candidates, the boundary key (the reference's k-th
 * entry) and how many candidates rank above it. Rows are shared out to a few threads
 * (host_threads.h, host_rows); each row writes only its own entries. */
struct boundary_rows {
    struct check_context *context;
    struct host_rows rows;
};

static void boundary_rows_thread(void *argument, unsigned slot)
{
    (void)slot;
    struct boundary_rows *job = argument;
    struct check_context *context = job->context;
    const struct capture_record *record = context->record;
    const uint32_t k = context->k;
    const int32_t *reference_raw = context->reference_raw ? context->reference_raw
                                                          : context->reference;
    uint32_t b;
    while (host_rows_claim(&job->rows, &b)) {
        const float *window = capture_row_window(record, b);
        int32_t length = record->lengths[b];
        int64_t candidates = 0;
        for (int32_t i = 0; i < length; i++)
            candidates += !topk_is_negative_infinity(window[i]);
        context->candidates[b] = candidates;
        if (candidates <= (int64_t)k) {
            /* No boundary: every candidate is selected. */
            context->boundary_key[b] = 0;
            context->above[b] = candidates;
            continue;
        }
        int32_t kth = reference_raw[(size_t)b * k + (k - 1)];
        if (kth < 0 || kth >= length) {
            struct audit_error error = { 0 };
            audit_fail(&error, AUDIT_EDATA,
                       "record %u row %u: reference k-th entry %d outside the window (length %d)",
                       record->index, b, kth, length);
            host_rows_fail(&job->rows, b, &error);
            continue;
        }
        uint32_t boundary = topk_order_key(window[kth]);
        int64_t above = 0;
        for (int32_t i = 0; i < length; i++)
            above += !topk_is_negative_infinity(window[i]) && topk_order_key(window[i]) > boundary;
        context->boundary_key[b] = boundary;
        context->above[b] = above;
    }
}

int checks_prepare(struct check_context *context, const struct capture_record *record, uint32_t k,
                   struct audit_error *err)
{
    int status = 0;

    if (!context || !record)
        return audit_fail(err, AUDIT_EUSAGE, "checks_prepare: context and record are required");
    memset(context, 0, sizeof(*context));
    if (k == 0)
        k = record->k;
    if (k == 0 || k > CAPTURE_MAX_K)
        return audit_fail(err, AUDIT_EUSAGE,
                          "record %u: k = %u outside 1..%u for the contract checks",
                          record->index, k, CAPTURE_MAX_K);
    if (record->rows > CAPTURE_MAX_ROWS)
        return audit_fail(err, AUDIT_EDATA, "record %u: %u rows exceed the limit %u",
                          record->index, record->rows, CAPTURE_MAX_ROWS);

    context->record = record;
    context->rows = record->rows;
    context->k = k;
    size_t slots = (size_t)record->rows * k; /* both factors are bounded: no overflow */
    size_t rows_alloc = record->rows ? record->rows : 1;
    int32_t max_length = 0;
    for (uint32_t b = 0; b < record->rows; b++) {
        if (record->lengths[b] < 0) {
            status = audit_fail(err, AUDIT_EDATA, "record %u row %u: negative length %d",
                                record->index, b, record->lengths[b]);
            goto error;
        }
        if (record->lengths[b] > max_length)
            max_length = record->lengths[b];
    }

    context->reference = malloc((slots ? slots : 1) * sizeof(int32_t));
    if (record->page_size)
        context->reference_raw = malloc((slots ? slots : 1) * sizeof(int32_t));
    context->candidates = calloc(rows_alloc, sizeof(int64_t));
    context->boundary_key = calloc(rows_alloc, sizeof(uint32_t));
    context->above = calloc(rows_alloc, sizeof(int64_t));
    context->seen_bytes = ((size_t)max_length + 7) / 8 + 1;
    context->seen = calloc(context->seen_bytes, 1);
    if (!context->reference || (record->page_size && !context->reference_raw) ||
        !context->candidates || !context->boundary_key || !context->above || !context->seen) {
        status = audit_fail(err, AUDIT_ENOMEM,
                            "record %u: out of memory for the contract checks (%u rows x k %u)",
                            record->index, record->rows, k);
        goto error;
    }

    status = topk_reference_record(record, k, context->reference, context->reference_raw, err);
    if (status < 0)
        goto error;

    /* The boundary of every row, rows shared out like the reference's (boundary_rows_thread). */
    struct boundary_rows job = { .context = context };
    status = host_rows_init(&job.rows, record->rows, err);
    if (status < 0)
        goto error;
    uint64_t scores = 0;
    for (uint32_t b = 0; b < record->rows; b++)
        scores += (uint64_t)record->lengths[b]; /* checked non-negative above */
    unsigned threads = host_threads_count((size_t)scores, BOUNDARY_SCORES_PER_THREAD);
    if (threads > record->rows)
        threads = record->rows ? record->rows : 1;
    host_threads_run(threads, boundary_rows_thread, &job);
    status = host_rows_finish(&job.rows, err);
    if (status < 0)
        goto error;
    return 0;

error:
    checks_release(context);
    return status;
}

/* Scratch for the exact multiset comparison of rows with duplicates (rare: only broken
 * outputs have them), allocated on first need within one checks_output call. */
struct multiset_scratch {
    uint32_t *selected;
    uint32_t *expected;
};

/* Exact comparison of the selected-score multiset with the reference's for a row that
 * selects some index twice (a duplicate can still match when another candidate with the same
 * bits was left out). Returns 1 when equal, 0 when not, AUDIT_ENOMEM. */
static int row_multiset_equal_sorted(const struct check_context *context, uint32_t b,
                                     const int32_t *raw_row, struct multiset_scratch *scratch,
                                     struct audit_error *err)
{
    uint32_t k = context->k;
    const float *window = capture_row_window(context->record, b);
    const int32_t *reference_raw = context->reference_raw ? context->reference_raw
                                                          : context->reference;
    const int32_t *expected_row = reference_raw + (size_t)b * k;

    if (!scratch->selected) {
        scratch->selected = malloc((size_t)k * sizeof(uint32_t));
        scratch->expected = malloc((size_t)k * sizeof(uint32_t));
        if (!scratch->selected || !scratch->expected)
            return audit_fail(err, AUDIT_ENOMEM,
                              "record %u row %u: out of memory comparing score multisets",
                              context->record->index, b);
    }
    uint32_t selected_count = 0, expected_count = 0;
    for (uint32_t j = 0; j < k; j++) {
        if (raw_row[j] >= 0) /* the caller ruled out out-of-range entries */
            scratch->selected[selected_count++] = topk_order_key(window[raw_row[j]]);
        if (expected_row[j] >= 0)
            scratch->expected[expected_count++] = topk_order_key(window[expected_row[j]]);
    }
    if (selected_count != expected_count)
        return 0;
    qsort(scratch->selected, selected_count, sizeof(uint32_t), compare_keys);
    qsort(scratch->expected, expected_count, sizeof(uint32_t), compare_keys);
    return memcmp(scratch->selected, scratch->expected, selected_count * sizeof(uint32_t)) == 0;
}

int checks_output(struct check_context *context, const int32_t *out, const int32_t *raw_out,
                  const struct check_claims *claims, struct check_counts *counts,
                  uint32_t *row_flags, struct audit_error *err)
{
    if (!context || !context->record)
        return audit_fail(err, AUDIT_EUSAGE,
                          "checks_output: a prepared context, an output and counts are required");
    return checks_output_rows(context, out, raw_out, claims, 0, context->rows, context->seen,
                              counts, row_flags, err);
}

void check_counts_add(struct check_counts *sum, const struct check_counts *part)
{
    for (int kind = 0; kind < CHECK_KIND_COUNT; kind++)
        sum->violations[kind] += part->violations[kind];
    sum->rows_with_violation += part->rows_with_violation;
    sum->equals_reference = sum->equals_reference && part->equals_reference;
}

/* The order claims' judgement of a row's valid entries, one after the other. */
struct order_walk {
    bool has_previous;
    uint32_t previous_key;
    int32_t previous_index;
};

static inline uint32_t order_step(struct order_walk *walk, const struct check_claims *claims,
                                  uint32_t key, int32_t raw)
{
    uint32_t flags = 0;
    if (walk->has_previous) {
        if (claims->canonical_order &&
            (key > walk->previous_key || (key == walk->previous_key && raw < walk->previous_index)))
            flags |= 1u << CHECK_ORDER;
        if (claims->index_ascending && raw < walk->previous_index)
            flags |= 1u << CHECK_ORDER;
    }
    walk->has_previous = true;
    walk->previous_key = key;
    walk->previous_index = raw;
    return flags;
}

/* Row b's flags into row_flags (when given) and the counts. */
static void record_row_flags(struct check_counts *counts, uint32_t *row_flags, uint32_t b,
                             uint32_t flags)
{
    if (row_flags)
        row_flags[b] = flags;
    if (flags) {
        counts->rows_with_violation++;
        for (int kind = 0; kind < CHECK_KIND_COUNT; kind++)
            counts->violations[kind] += (flags >> kind) & 1u;
    }
}

/* The kinds that depend on the order of a row's entries; the others depend on its multiset. */
#define CHECK_ORDER_KINDS ((1u << CHECK_ORDER) | (1u << CHECK_PADDING))
#define CHECK_REUSE_BLOCKERS ((1u << CHECK_OUT_OF_RANGE) | (1u << CHECK_DUPLICATE))

/* Order and padding of a row whose entries are all -1 or valid (in range, not -inf, no index
 * twice): the same judgement as the full loop of checks_output_rows makes on such a row. */
static uint32_t row_order_flags(const struct capture_record *record, uint32_t b,
                                const int32_t *raw_row, uint32_t k,
                                const struct check_claims *claims)
{
    const float *window = capture_row_window(record, b);
    const bool order_claimed = claims->canonical_order || claims->index_ascending;
    struct order_walk walk = { 0 };
    uint32_t flags = 0;
    bool padding_started = false;
    for (uint32_t j = 0; j < k; j++) {
        const int32_t raw = raw_row[j];
        if (raw == -1) {
            padding_started = true;
            continue;
        }
        if (padding_started)
            flags |= 1u << CHECK_PADDING;
        if (order_claimed)
            flags |= order_step(&walk, claims, topk_order_key(window[raw]), raw);
    }
    return flags;
}

int checks_output_rows(const struct check_context *context, const int32_t *out,
                       const int32_t *raw_out, const struct check_claims *claims,
                       uint32_t first_row, uint32_t end_row, uint8_t *seen,
                       struct check_counts *counts, uint32_t *row_flags, struct audit_error *err)
{
    return checks_output_rows_reusing(context, out, raw_out, claims, first_row, end_row, seen,
                                      NULL, counts, row_flags, err);
}

int checks_output_rows_reusing(const struct check_context *context, const int32_t *out,
                               const int32_t *raw_out, const struct check_claims *claims,
                               uint32_t first_row, uint32_t end_row, uint8_t *seen,
                               const struct check_reuse *reuse, struct check_counts *counts,
                               uint32_t *row_flags, struct audit_error *err)
{
    static const struct check_claims no_claims;
    struct multiset_scratch scratch = { 0 };
    int status = 0;

    if (!context || !context->record || !out || !counts || !seen)
        return audit_fail(err, AUDIT_EUSAGE,
                          "checks_output: a prepared context, an output and counts are required");
    if (first_row > end_row || end_row > context->rows)
        return audit_fail(err, AUDIT_EUSAGE, "checks_output: rows %u..%u outside the %u rows",
                          first_row, end_row, context->rows);
    const struct capture_record *record = context->record;
    bool paged = record->page_size != 0;
    if (paged && !raw_out)
        return audit_fail(err, AUDIT_EUSAGE,
                          "record %u: has a page table, so the raw (window-relative) output is "
                          "required to check it", record->index);
    if (!claims)
        claims = &no_claims;
    if (!paged)
        raw_out = out; /* without pages the output is the raw output; a given raw_out is unused */

    uint32_t k = context->k;
    const size_t first_slot = (size_t)first_row * k, slots = (size_t)(end_row - first_row) * k;
    const int32_t *reference_raw = context->reference_raw ? context->reference_raw
                                                          : context->reference;
    memset(counts, 0, sizeof(*counts));

    for (uint32_t b = first_row; b < end_row; b++) {
        const float *window = capture_row_window(record, b);
        int32_t length = record->lengths[b];
        const int32_t *out_row = out + (size_t)b * k;
        const int32_t *raw_row = raw_out + (size_t)b * k;
        if (reuse && !paged && reuse->rows_differing[b] == 0 &&
            !(reuse->row_flags[b] & CHECK_REUSE_BLOCKERS)) {
            const uint32_t flags = (reuse->row_flags[b] & ~CHECK_ORDER_KINDS) |
                                   row_order_flags(record, b, raw_row, k, claims);
            record_row_flags(counts, row_flags, b, flags);
            continue;
        }
        int64_t candidates = context->candidates[b];
        bool has_boundary = candidates > (int64_t)k;
        int64_t needed = has_boundary ? (int64_t)k : candidates;
        uint32_t boundary = context->boundary_key[b];
        uint32_t flags = 0;

        int64_t real_entries = 0, valid_entries = 0, above_selected = 0;
        bool below_selected = false, padding_started = false;
        struct order_walk walk = { 0 };

        for (uint32_t j = 0; j < k; j++) {
            int32_t raw = raw_row[j];
            if (paged && ((out_row[j] == -1) != (raw == -1)))
                flags |= 1u << CHECK_RAW_MISALIGNED;
            if (raw == -1) {
                padding_started = true;
                continue;
            }
            real_entries++;
            if (padding_started)
                flags |= 1u << CHECK_PADDING;
            if (raw < -1 || raw >= length || topk_is_negative_infinity(window[raw])) {
                flags |= 1u << CHECK_OUT_OF_RANGE;
                continue;
            }
            if (check_mark_test_and_set(seen, raw)) {
                flags |= 1u << CHECK_DUPLICATE;
                continue;
            }
            if (paged && out_row[j] != -1 && out_row[j] != topk_translate_index(record, b, raw))
                flags |= 1u << CHECK_PAGE_TRANSLATION;

            uint32_t key = topk_order_key(window[raw]);
            valid_entries++;
            if (has_boundary) {
                below_selected |= key < boundary;
                above_selected += key > boundary;
            }
            flags |= order_step(&walk, claims, key, raw);
        }

        if (real_entries < needed)
            flags |= 1u << CHECK_SHORT;

        bool right_multiset;
        if (flags & (1u << CHECK_OUT_OF_RANGE)) {
            right_multiset = false;
        } else if (flags & (1u << CHECK_DUPLICATE)) {
            status = row_multiset_equal_sorted(context, b, raw_row, &scratch, err);
            if (status < 0)
                goto done;
            right_multiset = status == 1;
            status = 0;
        } else if (has_boundary) {
            right_multiset = !below_selected && above_selected == context->above[b] &&
                             valid_entries == (int64_t)k;
        } else {
            right_multiset = valid_entries == candidates;
        }
        if (!right_multiset)
            flags |= 1u << CHECK_WRONG_SET;

        /* Smallest-index ties: with the right multiset, the boundary ties are the smallest
         * indices exactly when the selected index set is the reference's. */
        if (claims->smallest_index_ties && right_multiset) {
            const int32_t *expected_row = reference_raw + (size_t)b * k;
            bool same_set = valid_entries == needed;
            for (uint32_t j = 0; j < k && same_set; j++)
                if (expected_row[j] >= 0 && !check_mark_test(seen, expected_row[j]))
                    same_set = false;
            if (!same_set)
                flags |= 1u << CHECK_TIE_RULE;
        }

        /* Clear only the marks this row set. */
        for (uint32_t j = 0; j < k; j++)
            if (raw_row[j] >= 0 && raw_row[j] < length)
                check_mark_clear(seen, raw_row[j]);

        record_row_flags(counts, row_flags, b, flags);
    }

    counts->equals_reference =
        memcmp(out + first_slot, context->reference + first_slot, slots * sizeof(int32_t)) == 0 &&
        (!paged || memcmp(raw_out + first_slot, context->reference_raw + first_slot,
                          slots * sizeof(int32_t)) == 0);

done:
    free(scratch.selected);
    free(scratch.expected);
    return status;
}
