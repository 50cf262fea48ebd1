/* Score census (docs/REFERENCE.md "Census"): how determined a top-k selection is, read from the
 * scores alone.
 *
 * Per row the census needs the k-th and (k+1)-th ranked candidates, the size of the boundary's
 * tie set, how many rank strictly above it, and how many candidates share the boundary's coarse
 * (fp16 top byte) bin. The first two come from the reference selection itself
 * (topk_reference_row for k + 1), so the census and the oracle can never disagree about the
 * boundary; the counts come from one extra branch-free pass over the row. Counts that do not
 * depend on k (zeros, -inf, NaN, subnormals) are taken once per row. */
#include "census.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "document_keys.h"
#include "host_threads.h"
#include "json_util.h"
#include "reference.h"

/* A thread costs tens of microseconds to start; a row of 131072 scores takes about 500. */
#define CENSUS_SCORES_PER_THREAD (256u * 1024u)
#define KEY_OF_NEG_INF 0x007FFFFFu /* topk_order_key(-inf) */
#define KEY_OF_POS_INF 0xFF800000u /* topk_order_key(+inf) */
#define COARSE_BIN_NAN 0xFFu       /* every NaN converts to the fp16 NaN 0x7FFF */

static inline uint32_t score_bits(float value)
{
    uint32_t bits;
    memcpy(&bits, &value, sizeof(bits));
    return bits;
}

static inline uint32_t order_key_of_bits(uint32_t bits)
{
    uint32_t negative_mask = 0u - (bits >> 31);
    return bits ^ (negative_mask | 0x80000000u);
}

static inline float float_of_order_key(uint32_t key)
{
    uint32_t bits = (key & 0x80000000u) ? (key & 0x7FFFFFFFu) : ~key;
    float value;
    memcpy(&value, &bits, sizeof(value));
    return value;
}

/* float -> fp16 bits, round to nearest even, the way CUDA's __float2half_rn (cvt.rn.f16.f32)
 * does it: overflow to signed infinity, subnormal halves, every NaN to the canonical 0x7FFF. */
static uint16_t float_to_half_bits(float value)
{
    uint32_t bits = score_bits(value);
    uint32_t sign = (bits >> 16) & 0x8000u;
    uint32_t magnitude = bits & 0x7FFFFFFFu;
    if (magnitude > 0x7F800000u)
        return 0x7FFFu;
    if (magnitude >= 0x477FF000u) /* >= 65520: rounds past 65504, the largest half */
        return (uint16_t)(sign | 0x7C00u);
    if (magnitude >= 0x38800000u) { /* >= 2^-14: a normal half */
        uint32_t half = (magnitude - 0x38000000u) >> 13;
        uint32_t rest = magnitude & 0x1FFFu;
        /* A carry out of the mantissa correctly bumps the exponent. */
        half += rest > 0x1000u || (rest == 0x1000u && (half & 1u));
        return (uint16_t)(sign | half);
    }
    if (magnitude <= 0x33000000u) /* <= 2^-25: the tie at 2^-25 goes to the even zero */
        return (uint16_t)sign;
    /* A subnormal half counts units of 2^-24: shift the full mantissa into place. */
    uint32_t exponent = magnitude >> 23;
    uint32_t mantissa = (magnitude & 0x7FFFFFu) | 0x800000u;
    uint32_t shift = 126u - exponent; /* 14..24 */
    uint32_t half = mantissa >> shift;
    uint32_t rest = mantissa & ((1u << shift) - 1u);
    uint32_t halfway = 1u << (shift - 1u);
    half += rest > halfway || (rest == halfway && (half & 1u));
    return (uint16_t)(sign | half);
}

uint8_t census_coarse_bin(float value)
{
    uint32_t half = float_to_half_bits(value);
    uint32_t key = (half & 0x8000u) ? (~half & 0xFFFFu) : (half | 0x8000u);
    return (uint8_t)(key >> 8);
}

/* The coarse bin is a non-decreasing function of the order key over the non-NaN keys
 * [KEY_OF_NEG_INF, KEY_OF_POS_INF], so the keys of each bin form an interval; find it by
 * bisection. Returns false when no non-NaN value falls in the bin. */
static bool coarse_bin_key_interval(uint8_t bin, uint32_t *low, uint32_t *high)
{
    /* first key whose bin is >= bin, then first key whose bin is > bin */
    uint32_t bounds[2];
    for (int which = 0; which < 2; which++) {
        uint32_t lo = KEY_OF_NEG_INF, hi = KEY_OF_POS_INF + 1u; /* answer in [lo, hi] */
        while (lo < hi) {
            uint32_t middle = lo + (hi - lo) / 2;
            uint8_t middle_bin = census_coarse_bin(float_of_order_key(middle));
            if (which == 0 ? middle_bin >= bin : middle_bin > bin)
                hi = middle;
            else
                lo = middle + 1;
        }
        bounds[which] = lo;
    }
    if (bounds[0] >= bounds[1])
        return false;
    *low = bounds[0];
    *high = bounds[1] - 1u;
    return true;
}

/* The counts that do not depend on k. */
static void count_special_scores(const float *window, uint32_t length, struct census_row *row)
{
    /* 32-bit counters (length < 2^31) keep four lanes per SSE vector. */
    uint32_t zeros = 0, neg_inf = 0, nan = 0, subnormal = 0;
    for (uint32_t i = 0; i < length; i++) {
        uint32_t bits = score_bits(window[i]);
        uint32_t magnitude = bits & 0x7FFFFFFFu;
        zeros += magnitude == 0;
        neg_inf += bits == TOPK_NEG_INF_BITS;
        nan += magnitude > 0x7F800000u;
        subnormal += magnitude - 1u < 0x007FFFFFu;
    }
    memset(row, 0, sizeof(*row));
    row->length = (int32_t)length;
    row->zeros = (int64_t)zeros;
    row->neg_inf = (int64_t)neg_inf;
    row->nan = (int64_t)nan;
    row->subnormal = (int64_t)subnormal;
    row->candidates = (int64_t)length - (int64_t)neg_inf;
}

/* The k-dependent part of a row's census. ranked holds k + 1 entries; row already has the
 * counts of count_special_scores. */
static int census_row_for_k(const float *window, uint32_t k, struct topk_scratch *scratch,
                            int32_t *ranked, struct census_row *row)
{
    uint32_t length = (uint32_t)row->length;
    row->short_row = row->candidates <= (int64_t)k;
    row->boundary = 0.0f;
    row->next_below = 0.0f;
    row->boundary_gap = 0.0;
    row->tie_set = 0;
    row->above = row->short_row ? row->candidates : 0;
    row->underdetermined = false;
    row->zero_boundary = false;
    row->coarse_bin_count = 0;
    row->radix_overflow = false;
    row->filtered_overflow = false;
    if (row->short_row)
        return AUDIT_OK;

    /* candidates > k, so k + 1 <= length <= INT32_MAX. */
    int64_t selected = topk_reference_row(window, (int32_t)length, k + 1, ranked, scratch);
    if (selected < 0)
        return (int)selected;
    row->boundary = window[ranked[k - 1]];
    row->next_below = window[ranked[k]];
    uint32_t boundary_bits = score_bits(row->boundary);
    uint32_t above = k - 1;
    while (above > 0 && score_bits(window[ranked[above - 1]]) == boundary_bits)
        above--;
    row->above = above;

    uint8_t bin = census_coarse_bin(row->boundary);
    uint32_t bin_low = 1, bin_high = 0;
    bool bin_has_values = bin != COARSE_BIN_NAN && coarse_bin_key_interval(bin, &bin_low, &bin_high);
    uint32_t bin_span = bin_high - bin_low;
    uint32_t ties = 0, in_bin = 0;
    for (uint32_t i = 0; i < length; i++) {
        uint32_t bits = score_bits(window[i]);
        ties += bits == boundary_bits;
        in_bin += order_key_of_bits(bits) - bin_low <= bin_span;
    }
    row->tie_set = (int64_t)ties;
    if (bin == COARSE_BIN_NAN)
        row->coarse_bin_count = row->nan;
    else if (bin_has_values)
        row->coarse_bin_count = (int64_t)in_bin -
            (KEY_OF_NEG_INF - bin_low <= bin_span ? row->neg_inf : 0);
    row->radix_overflow = row->coarse_bin_count > (int64_t)CENSUS_RADIX_STAGING;
    row->filtered_overflow = row->coarse_bin_count > (int64_t)CENSUS_FILTERED_STAGING;
    row->underdetermined = row->tie_set > 1 && row->above + row->tie_set > (int64_t)k;
    row->zero_boundary = (boundary_bits & 0x7FFFFFFFu) == 0;
    if (score_bits(row->next_below) != boundary_bits)
        row->boundary_gap = (double)row->boundary - (double)row->next_below;
    return AUDIT_OK;
}

int census_row_compute(const float *window, int32_t length, uint32_t k, struct census_row *out)
{
    if (length < 0)
        return AUDIT_EDATA;
    if (k == 0)
        return AUDIT_EUSAGE;
    struct topk_scratch scratch = { 0 };
    int32_t *ranked = NULL;
    count_special_scores(window, (uint32_t)length, out);
    int status = AUDIT_OK;
    if (out->candidates > (int64_t)k) {
        ranked = malloc(((size_t)k + 1) * sizeof(*ranked));
        if (!ranked) {
            status = AUDIT_ENOMEM;
            goto done;
        }
    }
    status = census_row_for_k(window, k, &scratch, ranked, out);
done:
    free(ranked);
    topk_scratch_free(&scratch);
    return status;
}

/* ---- record census as JSON ---- */

static int compare_int64(const void *a, const void *b)
{
    int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    return (x > y) - (x < y);
}

/* NaN gaps (boundary and next both NaN, or inf - inf) rank as +infinity. */
static int compare_gap(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    if (isnan(x))
        x = INFINITY;
    if (isnan(y))
        y = INFINITY;
    return (x > y) - (x < y);
}

/* Nearest-rank percentile of a sorted array: element floor(count * percent / 100). */
static size_t percentile_index(size_t count, unsigned percent)
{
    size_t index = count * percent / 100;
    return index < count ? index : count - 1;
}

static void add_row_json(cJSON *array, uint32_t b, const struct census_row *row)
{
    cJSON *item = cJSON_CreateObject();
    if (!item)
        return;
    cJSON_AddItemToArray(array, item);
    cJSON_AddNumberToObject(item, KEY_ROW, b);
    cJSON_AddNumberToObject(item, "length", row->length);
    json_add_u64(item, "candidates", (uint64_t)row->candidates);
    if (row->short_row) {
        cJSON_AddNullToObject(item, "boundary");
        cJSON_AddNullToObject(item, "boundary_bits");
    } else {
        json_add_float_exact(item, "boundary", row->boundary);
    }
    json_add_u64(item, KEY_TIE_SET, (uint64_t)row->tie_set);
    json_add_u64(item, "above", (uint64_t)row->above);
    cJSON_AddBoolToObject(item, "underdetermined", row->underdetermined);
    cJSON_AddBoolToObject(item, "zero_boundary", row->zero_boundary);
    if (row->short_row) {
        cJSON_AddNullToObject(item, "gap");
        cJSON_AddNullToObject(item, "coarse_bin");
    } else {
        json_add_number(item, "gap", row->boundary_gap);
        cJSON_AddNumberToObject(item, "coarse_bin", census_coarse_bin(row->boundary));
    }
    json_add_u64(item, "coarse_bin_count", (uint64_t)row->coarse_bin_count);
    cJSON_AddBoolToObject(item, "radix_overflow", row->radix_overflow);
    cJSON_AddBoolToObject(item, "filtered_overflow", row->filtered_overflow);
}

/* The per-k summary of one record's rows (schema in docs/REFERENCE.md). */
static int census_k_json(const struct capture_record *record, uint32_t k,
                         const struct census_row *rows, int64_t *tie_sets, double *gaps,
                         cJSON **json_out, struct audit_error *err)
{
    cJSON *json = cJSON_CreateObject();
    if (!json)
        return audit_fail(err, AUDIT_ENOMEM, "record %u: out of memory building the census",
                          record->index);
    uint64_t entries = 0, zeros = 0, neg_inf = 0, nan = 0, subnormal = 0, short_rows = 0;
    uint64_t no_boundary = 0, underdetermined = 0, zero_boundary = 0;
    uint64_t radix_overflow = 0, filtered_overflow = 0;
    size_t bounded = 0;
    for (uint32_t b = 0; b < record->rows; b++) {
        const struct census_row *row = &rows[b];
        entries += (uint64_t)row->length;
        zeros += (uint64_t)row->zeros;
        neg_inf += (uint64_t)row->neg_inf;
        nan += (uint64_t)row->nan;
        subnormal += (uint64_t)row->subnormal;
        short_rows += (uint64_t)row->length <= k;
        if (row->short_row) {
            no_boundary++;
            continue;
        }
        underdetermined += row->underdetermined;
        zero_boundary += row->zero_boundary;
        radix_overflow += row->radix_overflow;
        filtered_overflow += row->filtered_overflow;
        tie_sets[bounded] = row->tie_set;
        gaps[bounded] = row->boundary_gap;
        bounded++;
    }
    cJSON_AddNumberToObject(json, KEY_K, k);
    cJSON_AddBoolToObject(json, KEY_RECORD_K, k == record->k);
    cJSON_AddNumberToObject(json, KEY_ROWS, record->rows);
    json_add_u64(json, "rows_with_boundary", bounded);
    json_add_u64(json, "rows_without_boundary", no_boundary);
    json_add_u64(json, "short_rows", short_rows);
    json_add_u64(json, "window_entries", entries);
    json_add_u64(json, "zeros", zeros);
    json_add_number(json, "zero_fraction", entries ? (double)zeros / (double)entries : NAN);
    json_add_u64(json, "neg_inf", neg_inf);
    json_add_u64(json, "nan", nan);
    json_add_u64(json, "subnormal", subnormal);

    cJSON *tie_json = cJSON_AddObjectToObject(json, KEY_TIE_SET);
    cJSON *gap_json = cJSON_AddObjectToObject(json, "gap");
    if (tie_json && gap_json) {
        if (bounded > 0) {
            qsort(tie_sets, bounded, sizeof(*tie_sets), compare_int64);
            qsort(gaps, bounded, sizeof(*gaps), compare_gap);
            json_add_u64(tie_json, KEY_MEDIAN, (uint64_t)tie_sets[percentile_index(bounded, 50)]);
            json_add_u64(tie_json, "p90", (uint64_t)tie_sets[percentile_index(bounded, 90)]);
            json_add_u64(tie_json, KEY_MAX, (uint64_t)tie_sets[bounded - 1]);
            json_add_number(gap_json, KEY_MIN, gaps[0]);
            json_add_number(gap_json, KEY_MEDIAN, gaps[percentile_index(bounded, 50)]);
            json_add_number(gap_json, "p90", gaps[percentile_index(bounded, 90)]);
        } else {
            cJSON_AddNullToObject(tie_json, KEY_MEDIAN);
            cJSON_AddNullToObject(tie_json, "p90");
            cJSON_AddNullToObject(tie_json, KEY_MAX);
            cJSON_AddNullToObject(gap_json, KEY_MIN);
            cJSON_AddNullToObject(gap_json, KEY_MEDIAN);
            cJSON_AddNullToObject(gap_json, "p90");
        }
    }
    json_add_u64(json, KEY_UNDERDETERMINED_ROWS, underdetermined);
    json_add_u64(json, "zero_boundary_rows", zero_boundary);
    json_add_u64(json, "radix_overflow_rows", radix_overflow);
    json_add_u64(json, "filtered_overflow_rows", filtered_overflow);
    cJSON *per_row = cJSON_AddArrayToObject(json, "per_row");
    if (per_row)
        for (uint32_t b = 0; b < record->rows; b++)
            add_row_json(per_row, b, &rows[b]);
    if (!tie_json || !gap_json || !per_row ||
        cJSON_GetArraySize(per_row) != (int)record->rows) {
        cJSON_Delete(json);
        return audit_fail(err, AUDIT_ENOMEM, "record %u: out of memory building the census",
                          record->index);
    }
    *json_out = json;
    return AUDIT_OK;
}

/* The census rows of one record shared out to a few threads (host_threads.h, host_rows): a row
 * fills census[i * row_count + b] for every k. The calling thread (slot 0) uses the caller's
 * scratch and ranked buffer, the others their own. */
struct census_rows {
    const struct capture_record *record;
    const uint32_t *ks;
    size_t k_count;
    struct census_row *census;
    size_t row_count;
    uint64_t ranked_entries;
    int32_t *caller_ranked;
    struct topk_scratch *caller_scratch;
    struct host_rows rows;
};

static void census_rows_thread(void *argument, unsigned slot)
{
    struct census_rows *job = argument;
    const struct capture_record *record = job->record;
    struct topk_scratch own_scratch = { 0 };
    struct topk_scratch *scratch = slot == 0 ? job->caller_scratch : &own_scratch;
    int32_t *ranked = slot == 0 ? job->caller_ranked
                                : malloc(job->ranked_entries * sizeof(*ranked));
    uint32_t b;
    while (host_rows_claim(&job->rows, &b)) {
        const float *window = capture_row_window(record, b);
        struct census_row counts;
        count_special_scores(window, (uint32_t)record->lengths[b], &counts);
        for (size_t i = 0; i < job->k_count; i++) {
            struct census_row *row = &job->census[i * job->row_count + b];
            *row = counts;
            int status = ranked ? census_row_for_k(window, job->ks[i], scratch, ranked, row)
                                : AUDIT_ENOMEM;
            if (status != AUDIT_OK) {
                struct audit_error error = { 0 };
                audit_fail(&error, status,
                           "record %u row %u: out of memory taking the census at k = %u",
                           record->index, b, job->ks[i]);
                host_rows_fail(&job->rows, b, &error);
                break;
            }
        }
    }
    if (slot != 0) {
        free(ranked);
        topk_scratch_free(&own_scratch);
    }
}

int census_record_json(const struct capture_record *record, const uint32_t *ks, size_t k_count,
                       struct cJSON **json_out, struct census_row **rows_out,
                       struct audit_error *err)
{
    int status = AUDIT_OK;
    uint32_t rows = record->rows;
    uint32_t *distinct_ks = NULL;
    struct census_row *census = NULL; /* [k][row] */
    int64_t *tie_sets = NULL;
    double *gaps = NULL;
    int32_t *ranked = NULL;
    struct topk_scratch scratch = { 0 };
    cJSON *json = NULL;
    size_t distinct = 0;
    *json_out = NULL;
    if (rows_out)
        *rows_out = NULL;
    if (k_count == 0)
        return audit_fail(err, AUDIT_EUSAGE, "record %u: census needs at least one k",
                          record->index);

    distinct_ks = malloc(k_count * sizeof(*distinct_ks));
    size_t row_count = rows > 0 ? rows : 1;
    census = malloc(k_count * row_count * sizeof(*census));
    tie_sets = malloc(row_count * sizeof(*tie_sets));
    gaps = malloc(row_count * sizeof(*gaps));
    json = cJSON_CreateObject();
    if (!distinct_ks || !census || !tie_sets || !gaps || !json) {
        status = audit_fail(err, AUDIT_ENOMEM, "record %u: out of memory for the census of %u rows",
                            record->index, rows);
        goto done;
    }
    uint32_t largest_k = 0;
    for (size_t i = 0; i < k_count; i++) {
        uint32_t k = ks[i] ? ks[i] : record->k;
        bool seen = false;
        for (size_t j = 0; j < distinct; j++)
            seen |= distinct_ks[j] == k;
        if (k == 0) {
            status = audit_fail(err, AUDIT_EDATA, "record %u: k is 0, no census to take",
                                record->index);
            goto done;
        }
        if (!seen)
            distinct_ks[distinct++] = k;
        largest_k = k > largest_k ? k : largest_k;
    }

    int64_t longest = 0;
    for (uint32_t b = 0; b < rows; b++) {
        int64_t length = record->lengths[b];
        int64_t start = capture_row_start(record, b);
        if (length < 0 || start < 0 || (uint64_t)(start + length) > record->row_stride) {
            status = audit_fail(err, AUDIT_EDATA,
                                "record %u row %u: window [%lld, %lld) outside the row stride %llu",
                                record->index, b, (long long)start, (long long)(start + length),
                                (unsigned long long)record->row_stride);
            goto done;
        }
        longest = length > longest ? length : longest;
    }
    /* ranked needs k + 1 entries only for rows with more than k candidates. */
    uint64_t ranked_entries = (uint64_t)largest_k + 1 < (uint64_t)longest ? (uint64_t)largest_k + 1
                                                                          : (uint64_t)longest;
    ranked = malloc((ranked_entries > 0 ? ranked_entries : 1) * sizeof(*ranked));
    if (!ranked) {
        status = audit_fail(err, AUDIT_ENOMEM, "record %u: out of memory for %llu indices",
                            record->index, (unsigned long long)ranked_entries);
        goto done;
    }

    /* Row by row, every k while the row is still in cache; rows shared out to a few threads
     * on large records (census_rows_thread). */
    struct census_rows job = {
        .record = record,
        .ks = distinct_ks,
        .k_count = distinct,
        .census = census,
        .row_count = row_count,
        .ranked_entries = ranked_entries > 0 ? ranked_entries : 1,
        .caller_ranked = ranked,
        .caller_scratch = &scratch,
    };
    status = host_rows_init(&job.rows, rows, err);
    if (status < 0)
        goto done;
    uint64_t scores = 0;
    for (uint32_t b = 0; b < rows; b++)
        scores += (uint64_t)record->lengths[b];
    unsigned threads = host_threads_count((size_t)scores, CENSUS_SCORES_PER_THREAD);
    if (threads > rows)
        threads = rows ? rows : 1;
    host_threads_run(threads, census_rows_thread, &job);
    status = host_rows_finish(&job.rows, err);
    if (status < 0)
        goto done;

    cJSON_AddNumberToObject(json, KEY_RECORD, record->index);
    json_add_u64(json, "file_offset", record->file_offset);
    cJSON_AddNumberToObject(json, KEY_ROWS, rows);
    cJSON_AddNumberToObject(json, KEY_K, record->k);
    json_add_u64(json, KEY_ROW_STRIDE, record->row_stride);
    cJSON_AddNumberToObject(json, KEY_PAGE_SIZE, record->page_size);
    if (record->metadata_json) {
        cJSON *metadata = cJSON_Parse(record->metadata_json);
        if (metadata)
            cJSON_AddItemToObject(json, KEY_METADATA, metadata);
        else
            cJSON_AddStringToObject(json, "metadata_text", record->metadata_json);
    }
    cJSON *per_k = cJSON_AddArrayToObject(json, KEY_CENSUS);
    if (!per_k) {
        status = audit_fail(err, AUDIT_ENOMEM, "record %u: out of memory building the census",
                            record->index);
        goto done;
    }
    for (size_t i = 0; i < distinct; i++) {
        cJSON *k_json = NULL;
        status = census_k_json(record, distinct_ks[i], &census[i * row_count], tie_sets, gaps,
                               &k_json, err);
        if (status != AUDIT_OK)
            goto done;
        cJSON_AddItemToArray(per_k, k_json);
    }
    if (rows_out) {
        /* The census of ks[0] is the first block: hand over the allocation, trimmed. */
        struct census_row *first = realloc(census, row_count * sizeof(*census));
        *rows_out = first ? first : census;
        census = NULL;
    }
    *json_out = json;
    json = NULL;
done:
    cJSON_Delete(json);
    topk_scratch_free(&scratch);
    free(ranked);
    free(gaps);
    free(tie_sets);
    free(census);
    free(distinct_ks);
    return status;
}
