/* The CPU reference top-k (docs/REFERENCE.md): the oracle every backend is compared with.
 *
 * Selection is linear in the row length. Every score is mapped to its order key
 * (topk_order_key: larger key ranks first, IEEE total order), then:
 *   1. one pass builds a histogram of the top 11 key bits and counts exact -inf entries;
 *      the histogram gives the threshold bin T holding the k-th candidate;
 *   2. one pass appends the entries of bins above T to the winners (in index order) and copies
 *      the entries of bin T to a candidate list (in index order);
 *   3. the candidate list is refined on key bits 20..10 and then 9..0, which yields the exact
 *      boundary key and how many of its ties are needed; the ties taken are the first ones of
 *      the list, which is in index order, so they are the smallest indices;
 *   4. only the k winners are sorted: a stable LSD radix sort by key, descending. Entries with
 *      equal keys were appended in index order within one step above, so stability yields the
 *      canonical index-ascending order among equal scores.
 * Cost: two passes over the row plus work proportional to the threshold bin and to k. */
#include "reference.h"

#include <inttypes.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "host_threads.h"

#define TOP_SHIFT 21u
#define TOP_BINS 2048u   /* key bits 31..21 */
#define MIDDLE_SHIFT 10u
#define MIDDLE_BINS 2048u /* key bits 20..10 */
#define LOW_BINS 1024u    /* key bits 9..0 */
/* A thread costs tens of microseconds to start; a row of 131072 scores takes about 300. */
#define REFERENCE_SCORES_PER_THREAD (256u * 1024u)

/* Several interleaved histograms: a row of equal scores would otherwise make every increment
 * wait on the previous one to the same counter. */
#define HISTOGRAM_LANES 4u
/* Below this length the cost of clearing and merging the lanes outweighs what they save. */
#define LANES_MIN_LENGTH 16384u

static inline uint32_t score_bits(float value)
{
    uint32_t bits;
    memcpy(&bits, &value, sizeof(bits));
    return bits;
}

/* topk_order_key without a branch: flip every bit of negatives, only the sign of the rest. */
static inline uint32_t order_key_of_bits(uint32_t bits)
{
    uint32_t negative_mask = 0u - (bits >> 31);
    return bits ^ (negative_mask | 0x80000000u);
}

void topk_scratch_free(struct topk_scratch *scratch)
{
    if (!scratch)
        return;
    free(scratch->keys);
    free(scratch->indices);
    scratch->keys = NULL;
    scratch->indices = NULL;
    scratch->capacity = 0;
}

static int scratch_reserve(struct topk_scratch *scratch, size_t entries)
{
    if (scratch->capacity >= entries)
        return AUDIT_OK;
    uint32_t *keys = malloc(entries * sizeof(*keys));
    int32_t *indices = malloc(entries * sizeof(*indices));
    if (!keys || !indices) {
        free(keys);
        free(indices);
        return AUDIT_ENOMEM;
    }
    free(scratch->keys);
    free(scratch->indices);
    scratch->keys = keys;
    scratch->indices = indices;
    scratch->capacity = entries;
    return AUDIT_OK;
}

/* Largest bin T with (entries in bins above T) < needed <= (entries in bins T and above).
 * Requires 1 <= needed <= total entries. *above receives the entries in bins above T. */
static uint32_t threshold_bin(const uint32_t *histogram, uint32_t bins, uint64_t needed,
                              uint64_t *above)
{
    uint64_t cumulative = 0;
    uint32_t bin = bins;
    while (bin > 0) {
        bin--;
        if (cumulative + histogram[bin] >= needed)
            break;
        cumulative += histogram[bin];
    }
    *above = cumulative;
    return bin;
}

/* Step 1: top-bits histogram of the whole row; returns the number of exact -inf entries. */
static uint64_t histogram_top_bits(const float *window, uint32_t length, uint32_t *histogram)
{
    uint64_t neg_inf = 0;
    uint32_t i = 0;
    if (length >= LANES_MIN_LENGTH) {
        _Static_assert(HISTOGRAM_LANES == 4, "the unrolled loop below feeds four lanes");
        uint32_t lanes[HISTOGRAM_LANES][TOP_BINS];
        memset(lanes, 0, sizeof(lanes));
        uint32_t neg_inf_lanes = 0;
        for (; i + 4 <= length; i += 4) {
            uint32_t b0 = score_bits(window[i]), b1 = score_bits(window[i + 1]);
            uint32_t b2 = score_bits(window[i + 2]), b3 = score_bits(window[i + 3]);
            lanes[0][order_key_of_bits(b0) >> TOP_SHIFT]++;
            lanes[1][order_key_of_bits(b1) >> TOP_SHIFT]++;
            lanes[2][order_key_of_bits(b2) >> TOP_SHIFT]++;
            lanes[3][order_key_of_bits(b3) >> TOP_SHIFT]++;
            neg_inf_lanes += (uint32_t)(b0 == TOPK_NEG_INF_BITS) + (b1 == TOPK_NEG_INF_BITS) +
                             (b2 == TOPK_NEG_INF_BITS) + (b3 == TOPK_NEG_INF_BITS);
        }
        for (uint32_t bin = 0; bin < TOP_BINS; bin++)
            histogram[bin] = lanes[0][bin] + lanes[1][bin] + lanes[2][bin] + lanes[3][bin];
        neg_inf = neg_inf_lanes;
    } else {
        memset(histogram, 0, TOP_BINS * sizeof(*histogram));
    }
    for (; i < length; i++) {
        uint32_t bits = score_bits(window[i]);
        histogram[order_key_of_bits(bits) >> TOP_SHIFT]++;
        neg_inf += bits == TOPK_NEG_INF_BITS;
    }
    return neg_inf;
}

/* Histogram of (key >> shift) & (bins - 1) over a list of keys, in lanes when the list is long
 * (the same reason as in histogram_top_bits: plateaus of equal keys). */
static void histogram_keys(const uint32_t *keys, uint32_t count, uint32_t shift, uint32_t bins,
                           uint32_t *histogram)
{
    uint32_t mask = bins - 1;
    uint32_t j = 0;
    memset(histogram, 0, bins * sizeof(*histogram));
    if (count >= LANES_MIN_LENGTH) {
        uint32_t lanes[HISTOGRAM_LANES - 1][MIDDLE_BINS];
        memset(lanes, 0, sizeof(lanes));
        for (; j + 4 <= count; j += 4) {
            histogram[(keys[j] >> shift) & mask]++;
            lanes[0][(keys[j + 1] >> shift) & mask]++;
            lanes[1][(keys[j + 2] >> shift) & mask]++;
            lanes[2][(keys[j + 3] >> shift) & mask]++;
        }
        for (uint32_t bin = 0; bin < bins; bin++)
            histogram[bin] += lanes[0][bin] + lanes[1][bin] + lanes[2][bin];
    }
    for (; j < count; j++)
        histogram[(keys[j] >> shift) & mask]++;
}

/* A separate scan measured faster than tracking the keys inside the partition loop. */
static bool all_keys_equal(const uint32_t *keys, uint32_t count)
{
    for (uint32_t j = 1; j < count; j++)
        if (keys[j] != keys[0])
            return false;
    return true;
}

/* Stable LSD radix sort of (key, index) pairs by key, descending, 8 bits per pass; passes whose
 * digit is the same for every entry are skipped. On return *keys and *indices point at the
 * buffers holding the result (the input pair or the temporary pair). */
static void sort_winners(uint32_t **keys, int32_t **indices, uint32_t *temporary_keys,
                         int32_t *temporary_indices, uint32_t count)
{
    uint32_t histogram[4][256];
    memset(histogram, 0, sizeof(histogram));
    uint32_t *source_keys = *keys, *target_keys = temporary_keys;
    int32_t *source_indices = *indices, *target_indices = temporary_indices;
    for (uint32_t i = 0; i < count; i++) {
        uint32_t descending = ~source_keys[i];
        histogram[0][descending & 0xFF]++;
        histogram[1][(descending >> 8) & 0xFF]++;
        histogram[2][(descending >> 16) & 0xFF]++;
        histogram[3][descending >> 24]++;
    }
    for (uint32_t pass = 0; pass < 4 && count > 1; pass++) {
        uint32_t shift = pass * 8;
        uint32_t *digit_counts = histogram[pass];
        if (digit_counts[(~source_keys[0] >> shift) & 0xFF] == count)
            continue;
        uint32_t offsets[256];
        uint32_t running = 0;
        for (uint32_t digit = 0; digit < 256; digit++) {
            offsets[digit] = running;
            running += digit_counts[digit];
        }
        for (uint32_t i = 0; i < count; i++) {
            uint32_t digit = (~source_keys[i] >> shift) & 0xFF;
            uint32_t slot = offsets[digit]++;
            target_keys[slot] = source_keys[i];
            target_indices[slot] = source_indices[i];
        }
        uint32_t *swap_keys = source_keys;
        int32_t *swap_indices = source_indices;
        source_keys = target_keys;
        source_indices = target_indices;
        target_keys = swap_keys;
        target_indices = swap_indices;
    }
    *keys = source_keys;
    *indices = source_indices;
}

int64_t topk_reference_row(const float *window, int32_t length, uint32_t k, int32_t *out,
                           struct topk_scratch *scratch)
{
    if (length < 0)
        return AUDIT_EDATA;
    if (k == 0)
        return 0;
    uint32_t n = (uint32_t)length;
    uint32_t winner_capacity = (k < n ? k : n) + 1;
    if (scratch_reserve(scratch, (size_t)n + 2 * (size_t)winner_capacity) != AUDIT_OK)
        return AUDIT_ENOMEM;
    uint32_t *list_keys = scratch->keys;
    int32_t *list_indices = scratch->indices;
    uint32_t *winner_keys = scratch->keys + n;
    int32_t *winner_indices = scratch->indices + n;
    uint32_t *temporary_keys = winner_keys + winner_capacity;
    int32_t *temporary_indices = winner_indices + winner_capacity;
    uint32_t winners = 0;

    uint64_t candidates = n;
    uint32_t histogram[TOP_BINS];
    if (n > k)
        candidates = n - histogram_top_bits(window, n, histogram);

    if (candidates <= k) {
        /* Everything except -inf is selected (winner_capacity > candidates, so the unconditional
         * store below stays inside the winners). */
        for (uint32_t i = 0; i < n; i++) {
            uint32_t bits = score_bits(window[i]);
            winner_keys[winners] = order_key_of_bits(bits);
            winner_indices[winners] = (int32_t)i;
            winners += bits != TOPK_NEG_INF_BITS;
        }
    } else {
        /* -inf entries all sit in one bin; they are no candidates. */
        histogram[order_key_of_bits(TOPK_NEG_INF_BITS) >> TOP_SHIFT] -= (uint32_t)(n - candidates);
        uint64_t above = 0;
        uint32_t top_bin = threshold_bin(histogram, TOP_BINS, k, &above);

        /* Step 2. Bins at or below -inf's bin also hold -NaN; the -inf test keeps -inf out. */
        uint32_t listed = 0;
        for (uint32_t i = 0; i < n; i++) {
            uint32_t bits = score_bits(window[i]);
            uint32_t key = order_key_of_bits(bits);
            uint32_t bin = key >> TOP_SHIFT;
            if (bin < top_bin || bits == TOPK_NEG_INF_BITS)
                continue;
            if (bin > top_bin) {
                winner_keys[winners] = key;
                winner_indices[winners++] = (int32_t)i;
            } else {
                list_keys[listed] = key;
                list_indices[listed++] = (int32_t)i;
            }
        }
        uint64_t needed = k - above;

        if (all_keys_equal(list_keys, listed)) {
            /* A plateau fills the threshold bin: its first entries are the ties taken. */
            memcpy(winner_keys + winners, list_keys, needed * sizeof(*winner_keys));
            memcpy(winner_indices + winners, list_indices, needed * sizeof(*winner_indices));
            winners += (uint32_t)needed;
        } else {
            /* Step 3a: key bits 20..10 within the threshold bin. */
            uint32_t middle_histogram[MIDDLE_BINS];
            histogram_keys(list_keys, listed, MIDDLE_SHIFT, MIDDLE_BINS, middle_histogram);
            uint32_t middle_bin = threshold_bin(middle_histogram, MIDDLE_BINS, needed, &above);
            if (middle_histogram[middle_bin] != listed) {
                uint32_t kept = 0;
                for (uint32_t j = 0; j < listed; j++) {
                    uint32_t key = list_keys[j];
                    uint32_t digit = (key >> MIDDLE_SHIFT) & (MIDDLE_BINS - 1);
                    if (digit > middle_bin) {
                        winner_keys[winners] = key;
                        winner_indices[winners++] = list_indices[j];
                    } else if (digit == middle_bin) {
                        list_keys[kept] = key;
                        list_indices[kept++] = list_indices[j];
                    }
                }
                listed = kept;
            }
            needed -= above;

            /* Step 3b: key bits 9..0 give the exact boundary key. */
            uint32_t low_histogram[LOW_BINS];
            histogram_keys(list_keys, listed, 0, LOW_BINS, low_histogram);
            uint32_t low_bin = threshold_bin(low_histogram, LOW_BINS, needed, &above);
            uint32_t boundary_key =
                (top_bin << TOP_SHIFT) | (middle_bin << MIDDLE_SHIFT) | low_bin;
            uint64_t ties_needed = needed - above;
            for (uint32_t j = 0; j < listed; j++) {
                uint32_t key = list_keys[j];
                if (key > boundary_key || (key == boundary_key && ties_needed > 0)) {
                    ties_needed -= key == boundary_key;
                    winner_keys[winners] = key;
                    winner_indices[winners++] = list_indices[j];
                }
            }
        }
    }

    /* Step 4. */
    sort_winners(&winner_keys, &winner_indices, temporary_keys, temporary_indices, winners);
    memcpy(out, winner_indices, (size_t)winners * sizeof(*out));
    for (uint32_t j = winners; j < k; j++)
        out[j] = -1;
    return winners;
}

/* Checks that row b's window lies inside its row of the score matrix. */
static int check_window(const struct capture_record *record, uint32_t b, struct audit_error *err)
{
    int64_t length = record->lengths[b];
    int64_t start = capture_row_start(record, b);
    if (length < 0)
        return audit_fail(err, AUDIT_EDATA, "record %u row %u: negative length %lld",
                          record->index, b, (long long)length);
    if (start < 0 || (uint64_t)(start + length) > record->row_stride)
        return audit_fail(err, AUDIT_EDATA,
                          "record %u row %u: window [%lld, %lld) outside the row stride %llu",
                          record->index, b, (long long)start, (long long)(start + length),
                          (unsigned long long)record->row_stride);
    return AUDIT_OK;
}

/* Translates one row of raw indices through the page table, checking every lookup. */
static int translate_row(const struct capture_record *record, uint32_t b, uint32_t k,
                         const int32_t *raw, int32_t *out, struct audit_error *err)
{
    int64_t table_start = record->page_table_row_starts ? record->page_table_row_starts[b] : 0;
    for (uint32_t j = 0; j < k; j++) {
        int32_t idx = raw[j];
        if (idx < 0) {
            out[j] = -1;
            continue;
        }
        int64_t column = table_start + idx / (int64_t)record->page_size;
        if (column < 0 || (uint64_t)column >= record->page_table_cols)
            return audit_fail(err, AUDIT_EDATA,
                              "record %u row %u: index %d needs page-table column %lld, the "
                              "table has %llu",
                              record->index, b, idx, (long long)column,
                              (unsigned long long)record->page_table_cols);
        int64_t page = record->page_table[(uint64_t)b * record->page_table_cols + (uint64_t)column];
        int64_t translated = page * (int64_t)record->page_size + idx % (int64_t)record->page_size;
        if (page < 0 || translated > INT32_MAX)
            return audit_fail(err, AUDIT_EDATA,
                              "record %u row %u: page-table entry %lld (column %lld) does not "
                              "give an int32 index",
                              record->index, b, (long long)page, (long long)column);
        out[j] = (int32_t)translated;
    }
    return AUDIT_OK;
}

/* The rows of one record, shared out to a few threads (host_threads.h, host_rows). */
struct reference_rows {
    const struct capture_record *record;
    uint32_t k;
    bool paged;
    int32_t *out, *raw_out;
    struct host_rows rows;
};

static int reference_one_row(const struct reference_rows *job, uint32_t b,
                             struct topk_scratch *scratch, int32_t *raw_row_buffer,
                             struct audit_error *err)
{
    const struct capture_record *record = job->record;
    const uint32_t k = job->k;
    int status = check_window(record, b, err);
    if (status != AUDIT_OK)
        return status;
    int32_t *row_out = job->out + (uint64_t)b * k;
    int32_t *raw_row = job->raw_out ? job->raw_out + (uint64_t)b * k
                       : job->paged ? raw_row_buffer
                                    : row_out;
    int64_t selected = topk_reference_row(capture_row_window(record, b), record->lengths[b], k,
                                          raw_row, scratch);
    if (selected < 0)
        return audit_fail(err, (int)selected,
                          "record %u row %u: out of memory selecting the top %u of %d scores",
                          record->index, b, k, record->lengths[b]);
    if (job->paged)
        return translate_row(record, b, k, raw_row, row_out, err);
    if (raw_row != row_out)
        memcpy(row_out, raw_row, (size_t)k * sizeof(*row_out));
    return AUDIT_OK;
}

/* One thread (host_threads_run): its own scratch, rows until none is left. */
static void reference_rows_thread(void *argument, unsigned slot)
{
    (void)slot;
    struct reference_rows *job = argument;
    struct topk_scratch scratch = { 0 };
    int32_t *raw_row_buffer = NULL;
    bool buffer_ready = !(job->paged && !job->raw_out);
    uint32_t b;
    while (host_rows_claim(&job->rows, &b)) {
        struct audit_error error = { 0 };
        int status = AUDIT_OK;
        if (!buffer_ready) {
            raw_row_buffer = malloc((size_t)job->k * sizeof(*raw_row_buffer));
            buffer_ready = raw_row_buffer != NULL;
            if (!buffer_ready)
                status = audit_fail(&error, AUDIT_ENOMEM,
                                    "record %u: out of memory for %u indices",
                                    job->record->index, job->k);
        }
        if (status == AUDIT_OK)
            status = reference_one_row(job, b, &scratch, raw_row_buffer, &error);
        if (status != AUDIT_OK)
            host_rows_fail(&job->rows, b, &error);
    }
    free(raw_row_buffer);
    topk_scratch_free(&scratch);
}

int topk_reference_record(const struct capture_record *record, uint32_t k_override, int32_t *out,
                          int32_t *raw_out, struct audit_error *err)
{
    uint32_t k = k_override > 0 ? k_override : record->k;
    if (k == 0)
        return AUDIT_OK;
    struct reference_rows job = {
        .record = record,
        .k = k,
        .paged = record->page_size > 0 && record->page_table,
        .out = out,
        .raw_out = raw_out,
    };
    int status = host_rows_init(&job.rows, record->rows, err);
    if (status < 0)
        return status;
    uint64_t scores = 0;
    for (uint32_t b = 0; b < record->rows; b++)
        scores += record->lengths[b] > 0 ? (uint64_t)record->lengths[b] : 0u;
    unsigned threads = host_threads_count((size_t)scores, REFERENCE_SCORES_PER_THREAD);
    if (threads > record->rows)
        threads = record->rows ? record->rows : 1;
    host_threads_run(threads, reference_rows_thread, &job);
    return host_rows_finish(&job.rows, err);
}

void topk_page_inverse_free(struct topk_page_inverse *inverse)
{
    free(inverse->page_keys);
    memset(inverse, 0, sizeof(*inverse));
}

/* An index that is no window position, as topk_untranslate_row reports it: below -2 and unique
 * to the index (negative indices other than -1 land below every non-negative one's). */
static int64_t unexplained_index(int32_t index)
{
    return index >= 0 ? -3 - (int64_t)index : -((int64_t)1 << 40) + index;
}

static int compare_page_keys(const void *x, const void *y)
{
    uint64_t a = *(const uint64_t *)x, b = *(const uint64_t *)y;
    return (a > b) - (a < b);
}

int topk_untranslate_row(const struct capture_record *record, uint32_t b, const int32_t *indices,
                         uint32_t count, struct topk_page_inverse *inverse, int64_t *out,
                         struct audit_error *err)
{
    const int32_t length = record->lengths[b];
    if (!record->page_table || record->page_size == 0) {
        for (uint32_t i = 0; i < count; i++)
            out[i] = indices[i] == -1 || (indices[i] >= 0 && indices[i] < length)
                         ? indices[i]
                         : unexplained_index(indices[i]);
        return AUDIT_OK;
    }
    const uint64_t page_size = record->page_size;
    const uint64_t pages = length > 0 ? ((uint64_t)length + page_size - 1) / page_size : 0;
    const uint64_t start =
        record->page_table_row_starts ? (uint64_t)record->page_table_row_starts[b] : 0;
    if (start > record->page_table_cols || pages > record->page_table_cols - start)
        return audit_fail(err, AUDIT_EDATA, "record %u row %u: page-table row start %" PRIu64
                          " and %" PRIu64 " page(s) lie outside the %" PRIu64 "-column table",
                          record->index, b, start, pages, record->page_table_cols);
    const int32_t *table = record->page_table + (uint64_t)b * record->page_table_cols + start;
    if (pages > inverse->capacity) {
        uint64_t *keys = realloc(inverse->page_keys, pages * sizeof(uint64_t));
        if (!keys)
            return audit_fail(err, AUDIT_ENOMEM, "record %u row %u: out of memory for %" PRIu64
                              " pages", record->index, b, pages);
        inverse->page_keys = keys;
        inverse->capacity = pages;
    }
    for (uint64_t slot = 0; slot < pages; slot++)
        inverse->page_keys[slot] = ((uint64_t)(uint32_t)table[slot] << 32) | slot;
    qsort(inverse->page_keys, pages, sizeof(uint64_t), compare_page_keys);
    for (uint32_t i = 0; i < count; i++) {
        const int32_t index = indices[i];
        if (index < 0) {
            out[i] = index == -1 ? -1 : unexplained_index(index);
            continue;
        }
        const uint32_t page = (uint32_t)index / record->page_size;
        const uint64_t offset = (uint32_t)index % record->page_size;
        /* Lower bound of (page, slot 0): the first window slot holding this page. */
        const uint64_t wanted = (uint64_t)page << 32;
        uint64_t low = 0, high = pages;
        while (low < high) {
            uint64_t middle = low + (high - low) / 2;
            if (inverse->page_keys[middle] < wanted)
                low = middle + 1;
            else
                high = middle;
        }
        out[i] = unexplained_index(index);
        if (low < pages && (inverse->page_keys[low] >> 32) == page) {
            uint64_t position = (inverse->page_keys[low] & 0xFFFFFFFFu) * page_size + offset;
            if (position < (uint64_t)length)
                out[i] = (int64_t)position;
        }
    }
    return AUDIT_OK;
}
