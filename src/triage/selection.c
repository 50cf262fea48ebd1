/* Row selection (extract) and row-by-row capture comparison (diff); see selection.h. */
#include "selection.h"

#include <inttypes.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "census.h"

/* ---- lists ---- */

static int compare_u32(const void *x, const void *y)
{
    uint32_t a = *(const uint32_t *)x, b = *(const uint32_t *)y;
    return (a > b) - (a < b);
}

size_t selection_sort_unique(uint32_t *values, size_t count)
{
    if (count < 2)
        return count;
    qsort(values, count, sizeof(values[0]), compare_u32);
    size_t kept = 1;
    for (size_t i = 1; i < count; i++)
        if (values[i] != values[kept - 1])
            values[kept++] = values[i];
    return kept;
}

/* Parses decimal digits at *cursor into a value <= UINT32_MAX; returns false when there are none
 * or the value is too large. */
static bool parse_decimal(const char **cursor, uint32_t *value)
{
    const char *p = *cursor;
    uint64_t parsed = 0;
    if (*p < '0' || *p > '9')
        return false;
    while (*p >= '0' && *p <= '9') {
        parsed = parsed * 10 + (uint64_t)(*p - '0');
        if (parsed > UINT32_MAX)
            return false;
        p++;
    }
    *value = (uint32_t)parsed;
    *cursor = p;
    return true;
}

int selection_parse_list(const char *text, const char *option, uint32_t **values, size_t *count,
                         struct audit_error *err)
{
    uint32_t *list = NULL;
    size_t used = 0, capacity = 0;
    *values = NULL;
    *count = 0;
    if (!text || !*text)
        return audit_fail(err, AUDIT_EUSAGE, "%s: empty list", option);
    const char *p = text;
    while (*p) {
        const char *item = p;
        uint32_t first, last;
        if (!parse_decimal(&p, &first))
            goto malformed;
        last = first;
        if (*p == '-') {
            p++;
            if (!parse_decimal(&p, &last) || last < first)
                goto malformed;
        }
        if (*p != ',' && *p != '\0')
            goto malformed;
        uint64_t span = (uint64_t)last - first + 1;
        if (span > CAPTURE_MAX_ROWS - used) {
            free(list);
            return audit_fail(err, AUDIT_EUSAGE, "%s: the list names more than %u values", option,
                              CAPTURE_MAX_ROWS);
        }
        if (used + span > capacity) {
            size_t grown = capacity ? capacity : 16;
            while (grown < used + span)
                grown *= 2;
            uint32_t *bigger = realloc(list, grown * sizeof(*list));
            if (!bigger) {
                free(list);
                return audit_fail(err, AUDIT_ENOMEM, "%s: out of memory", option);
            }
            list = bigger;
            capacity = grown;
        }
        for (uint64_t v = first; v <= last; v++)
            list[used++] = (uint32_t)v;
        if (*p == ',') {
            p++;
            if (!*p) {
                item = p;
                goto malformed;
            }
        }
        continue;
    malformed:
        free(list);
        return audit_fail(err, AUDIT_EUSAGE,
                          "%s: '%.*s' is not a number or a range FIRST-LAST (e.g. 0,3,5-9)", option,
                          (int)strcspn(item, ","), item);
    }
    *count = selection_sort_unique(list, used);
    *values = list;
    return AUDIT_OK;
}

/* ---- row subsets ---- */

static void *copy_rows(const void *source, size_t row_bytes, const uint32_t *rows, size_t count)
{
    size_t bytes = count * row_bytes;
    uint8_t *copy = malloc(bytes > 0 ? bytes : 1);
    if (!copy)
        return NULL;
    for (size_t i = 0; i < count; i++)
        memcpy(copy + i * row_bytes, (const uint8_t *)source + (size_t)rows[i] * row_bytes,
               row_bytes);
    return copy;
}

int selection_extract_rows(const struct capture_record *src, const uint32_t *rows, size_t count,
                           struct capture_record *dst, struct audit_error *err)
{
    int status = AUDIT_OK;
    memset(dst, 0, sizeof(*dst));
    if (count == 0)
        return audit_fail(err, AUDIT_EUSAGE, "record %u: no rows selected", src->index);
    if (count > CAPTURE_MAX_ROWS)
        return audit_fail(err, AUDIT_EUSAGE, "record %u: %zu rows selected (at most %u)",
                          src->index, count, CAPTURE_MAX_ROWS);
    for (size_t i = 0; i < count; i++)
        if (rows[i] >= src->rows)
            return audit_fail(err, AUDIT_EUSAGE, "record %u: row %u is out of range (the record "
                              "has %u rows)", src->index, rows[i], src->rows);
    if (src->row_stride > SIZE_MAX / sizeof(float) / count)
        return audit_fail(err, AUDIT_ENOMEM, "record %u: row stride too large", src->index);

    dst->rows = (uint32_t)count;
    dst->k = src->k;
    dst->row_stride = src->row_stride;
    dst->page_size = src->page_size;
    dst->page_table_cols = src->page_table_cols;
    const char *metadata = src->metadata_json ? src->metadata_json : "{}";
    size_t metadata_size = strlen(metadata) + 1;

    if (!(dst->scores = copy_rows(src->scores, (size_t)src->row_stride * sizeof(float), rows,
                                  count)))
        goto out_of_memory;
    if (!(dst->lengths = copy_rows(src->lengths, sizeof(int32_t), rows, count)))
        goto out_of_memory;
    if (src->row_starts && !(dst->row_starts = copy_rows(src->row_starts, sizeof(int32_t), rows,
                                                         count)))
        goto out_of_memory;
    if (src->page_table &&
        !(dst->page_table = copy_rows(src->page_table, (size_t)src->page_table_cols *
                                      sizeof(int32_t), rows, count)))
        goto out_of_memory;
    if (src->page_table_row_starts &&
        !(dst->page_table_row_starts = copy_rows(src->page_table_row_starts, sizeof(int32_t), rows,
                                                 count)))
        goto out_of_memory;
    if (src->engine_indices &&
        !(dst->engine_indices = copy_rows(src->engine_indices, (size_t)src->k * sizeof(int32_t),
                                          rows, count)))
        goto out_of_memory;
    if (!(dst->metadata_json = malloc(metadata_size)))
        goto out_of_memory;
    memcpy(dst->metadata_json, metadata, metadata_size);
    return AUDIT_OK;
out_of_memory:
    status = audit_fail(err, AUDIT_ENOMEM, "record %u: out of memory extracting %zu rows",
                        src->index, count);
    capture_record_free(dst);
    memset(dst, 0, sizeof(*dst));
    return status;
}

/* ---- diff ---- */

const char *diff_case_name(enum diff_case diff_case)
{
    switch (diff_case) {
    case DIFF_CASE_IDENTICAL: return "identical";
    case DIFF_CASE_SCORES_DIFFER_SELECTION_SAME: return "scores_differ_selection_same";
    case DIFF_CASE_SCORES_DIFFER_SELECTION_CHANGED: return "scores_differ_selection_changed";
    case DIFF_CASE_TIE_FLAP: return "tie_flap";
    case DIFF_CASE_ENGINE_REORDERED: return "engine_reordered";
    case DIFF_CASE_ENGINE_WRONG: return "engine_wrong";
    case DIFF_CASE_WINDOW_DIFFERS: return "window_differs";
    case DIFF_CASE_COUNT: break;
    }
    return "unknown";
}

const char *diff_attribution_name(enum diff_attribution attribution)
{
    switch (attribution) {
    case DIFF_ATTRIBUTION_NONE: return "none";
    case DIFF_ATTRIBUTION_UPSTREAM: return "upstream";
    case DIFF_ATTRIBUTION_SELECTION_KERNEL: return "selection_kernel";
    case DIFF_ATTRIBUTION_TIE_FLAP: return "tie_flap";
    case DIFF_ATTRIBUTION_ENGINE_WRONG: return "engine_wrong";
    case DIFF_ATTRIBUTION_CAPTURE_MISMATCH: return "capture_mismatch";
    case DIFF_ATTRIBUTION_COUNT: break;
    }
    return "unknown";
}

enum diff_attribution diff_case_attribution(enum diff_case diff_case)
{
    switch (diff_case) {
    case DIFF_CASE_IDENTICAL:
    case DIFF_CASE_SCORES_DIFFER_SELECTION_SAME: return DIFF_ATTRIBUTION_NONE;
    case DIFF_CASE_SCORES_DIFFER_SELECTION_CHANGED: return DIFF_ATTRIBUTION_UPSTREAM;
    case DIFF_CASE_TIE_FLAP: return DIFF_ATTRIBUTION_TIE_FLAP;
    case DIFF_CASE_ENGINE_REORDERED: return DIFF_ATTRIBUTION_SELECTION_KERNEL;
    case DIFF_CASE_ENGINE_WRONG: return DIFF_ATTRIBUTION_ENGINE_WRONG;
    case DIFF_CASE_WINDOW_DIFFERS:
    case DIFF_CASE_COUNT: break;
    }
    return DIFF_ATTRIBUTION_CAPTURE_MISMATCH;
}

void diff_scratch_free(struct diff_scratch *scratch)
{
    topk_scratch_free(&scratch->topk);
    free(scratch->reference_a);
    free(scratch->reference_b);
    free(scratch->sorted_a);
    free(scratch->sorted_b);
    free(scratch->engine_a);
    free(scratch->engine_b);
    topk_page_inverse_free(&scratch->pages);
    memset(scratch, 0, sizeof(*scratch));
}

static int scratch_reserve(struct diff_scratch *scratch, size_t capacity, struct audit_error *err)
{
    if (capacity <= scratch->capacity)
        return AUDIT_OK;
    int32_t *reference_a = realloc(scratch->reference_a, capacity * sizeof(int32_t));
    if (reference_a)
        scratch->reference_a = reference_a;
    int32_t *reference_b = realloc(scratch->reference_b, capacity * sizeof(int32_t));
    if (reference_b)
        scratch->reference_b = reference_b;
    int64_t *sorted_a = realloc(scratch->sorted_a, capacity * sizeof(int64_t));
    if (sorted_a)
        scratch->sorted_a = sorted_a;
    int64_t *sorted_b = realloc(scratch->sorted_b, capacity * sizeof(int64_t));
    if (sorted_b)
        scratch->sorted_b = sorted_b;
    int64_t *engine_a = realloc(scratch->engine_a, capacity * sizeof(int64_t));
    if (engine_a)
        scratch->engine_a = engine_a;
    int64_t *engine_b = realloc(scratch->engine_b, capacity * sizeof(int64_t));
    if (engine_b)
        scratch->engine_b = engine_b;
    if (!reference_a || !reference_b || !sorted_a || !sorted_b || !engine_a || !engine_b)
        return audit_fail(err, AUDIT_ENOMEM, "diff: out of memory for k = %zu", capacity);
    scratch->capacity = capacity;
    return AUDIT_OK;
}

static int compare_i64(const void *x, const void *y)
{
    int64_t a = *(const int64_t *)x, b = *(const int64_t *)y;
    return (a > b) - (a < b);
}

/* Compares two index lists of equal length: *order_changed when any position differs,
 * *set_changed when the sorted lists differ. sorted_a/sorted_b are scratch. */
static void compare_selections(const int64_t *a, const int64_t *b, size_t count,
                               int64_t *sorted_a, int64_t *sorted_b, bool *set_changed,
                               bool *order_changed)
{
    *order_changed = memcmp(a, b, count * sizeof(int64_t)) != 0;
    if (!*order_changed) {
        *set_changed = false;
        return;
    }
    memcpy(sorted_a, a, count * sizeof(int64_t));
    memcpy(sorted_b, b, count * sizeof(int64_t));
    qsort(sorted_a, count, sizeof(int64_t), compare_i64);
    qsort(sorted_b, count, sizeof(int64_t), compare_i64);
    *set_changed = memcmp(sorted_a, sorted_b, count * sizeof(int64_t)) != 0;
}

static uint64_t pages_covering(int32_t length, uint32_t page_size)
{
    return length > 0 ? ((uint64_t)length + page_size - 1) / page_size : 0;
}

/* The page-table entries of row b covering its window, or NULL when they lie outside the
 * table (a record that failed validation). */
static const int32_t *row_pages(const struct capture_record *record, uint32_t b, uint64_t pages)
{
    uint64_t start = record->page_table_row_starts ? (uint64_t)record->page_table_row_starts[b] : 0;
    if (start > record->page_table_cols || pages > record->page_table_cols - start)
        return NULL;
    return record->page_table + (uint64_t)b * record->page_table_cols + start;
}

static bool row_page_tables_differ(const struct capture_record *a, const struct capture_record *b,
                                   uint32_t row)
{
    if (!a->page_table && !b->page_table)
        return false;
    if (!a->page_table || !b->page_table || a->page_size != b->page_size)
        return true;
    int32_t length = a->lengths[row] > b->lengths[row] ? a->lengths[row] : b->lengths[row];
    uint64_t pages = pages_covering(length, a->page_size);
    const int32_t *pages_a = row_pages(a, row, pages), *pages_b = row_pages(b, row, pages);
    if (!pages_a || !pages_b)
        return true;
    return memcmp(pages_a, pages_b, pages * sizeof(int32_t)) != 0;
}

static uint32_t key_distance(float x, float y)
{
    uint32_t kx = topk_order_key(x), ky = topk_order_key(y);
    return kx > ky ? kx - ky : ky - kx;
}

static uint32_t float_bits(float value)
{
    uint32_t bits;
    memcpy(&bits, &value, sizeof(bits));
    return bits;
}

/* Elementwise pass and, when the scores differ, A's census and the crossing perturbation. */
static int compare_scores(const struct capture_record *a, const struct capture_record *b,
                          uint32_t row, uint32_t k, struct diff_row *out, struct audit_error *err)
{
    int32_t length_a = a->lengths[row], length_b = b->lengths[row];
    int32_t common = length_a < length_b ? length_a : length_b;
    const float *window_a = capture_row_window(a, row), *window_b = capture_row_window(b, row);

    for (int32_t i = 0; i < common; i++) {
        float x = window_a[i], y = window_b[i];
        if (float_bits(x) == float_bits(y))
            continue;
        out->differing_elements++;
        uint32_t ulps = key_distance(x, y);
        if (ulps > out->max_ulp_diff)
            out->max_ulp_diff = ulps;
        if (!isfinite(x) || !isfinite(y)) {
            out->nonfinite_changed = true;
            out->max_abs_diff = INFINITY;
        } else {
            double difference = fabs((double)x - (double)y);
            if (difference > out->max_abs_diff)
                out->max_abs_diff = difference;
        }
    }
    out->differing_elements += (uint64_t)(length_a > length_b ? length_a - length_b
                                                               : length_b - length_a);
    out->scores_identical = !out->window_differs && out->differing_elements == 0;
    if (out->scores_identical || out->window_differs)
        return AUDIT_OK;

    struct census_row census;
    int status = census_row_compute(window_a, length_a, k, &census);
    if (status < 0)
        return audit_fail(err, status, "record %u row %u: census failed", a->index, row);
    out->short_row = census.short_row;
    out->tie_set = census.tie_set;
    out->boundary_gap = census.short_row ? 0.0 : census.boundary_gap;

    if (census.short_row) {
        /* Every candidate is selected: only an element entering or leaving the candidates
         * (becoming or ceasing to be exact -inf) can change the set. */
        for (int32_t i = 0; i < common; i++) {
            bool excluded_a = float_bits(window_a[i]) == TOPK_NEG_INF_BITS;
            bool excluded_b = float_bits(window_b[i]) == TOPK_NEG_INF_BITS;
            if (excluded_a != excluded_b) {
                out->perturbation_exceeds_gap = true;
                out->crossing_perturbation = INFINITY;
                break;
            }
        }
        return AUDIT_OK;
    }

    /* A selected element must fall and an unselected one rise until they meet for the set to
     * change, so (largest fall at or above the boundary) + (largest rise at or below the
     * (k+1)-th value) reaching the gap is necessary. Equality counts: equal values are then
     * ordered by index, which can swap them. Boundary ties (gap 0) sit in both groups. */
    uint32_t boundary_key = topk_order_key(census.boundary);
    uint32_t below_key = topk_order_key(census.next_below);
    double largest_fall = 0.0, largest_rise = 0.0;
    for (int32_t i = 0; i < common; i++) {
        float x = window_a[i], y = window_b[i];
        if (float_bits(x) == float_bits(y))
            continue;
        uint32_t key = topk_order_key(x);
        bool unordered = isnan(x) || isnan(y);
        if (key >= boundary_key) {
            double fall = unordered ? INFINITY : (double)x - (double)y;
            if (fall > largest_fall)
                largest_fall = fall;
        }
        if (key <= below_key) {
            double rise = unordered ? INFINITY : (double)y - (double)x;
            if (rise > largest_rise)
                largest_rise = rise;
        }
    }
    out->crossing_perturbation = largest_fall + largest_rise;
    /* A NaN boundary (k NaNs at the top) has no gap to measure: any movement counts. */
    out->perturbation_exceeds_gap =
        out->crossing_perturbation > 0.0 &&
        (isnan(out->boundary_gap) || out->crossing_perturbation >= out->boundary_gap);
    return AUDIT_OK;
}

static enum diff_case classify(const struct diff_row *row)
{
    if (row->window_differs)
        return DIFF_CASE_WINDOW_DIFFERS;
    /* Both runs agree: whether that output is right is `run`'s question, not diff's. */
    if (row->scores_identical && (!row->engine_compared || !row->engine_order_changed))
        return DIFF_CASE_IDENTICAL;
    if (row->engine_judged && (row->engine_a.row_class == ENGINE_ROW_WRONG ||
                               row->engine_b.row_class == ENGINE_ROW_WRONG))
        return DIFF_CASE_ENGINE_WRONG;
    if (row->scores_identical)
        return row->engine_set_changed ? DIFF_CASE_TIE_FLAP : DIFF_CASE_ENGINE_REORDERED;
    if (!row->engine_compared)
        return row->reference_set_changed ? DIFF_CASE_SCORES_DIFFER_SELECTION_CHANGED
                                          : DIFF_CASE_SCORES_DIFFER_SELECTION_SAME;
    /* Both engine selections are valid top-k of their own scores: the engine's set is what the
     * model saw. A set change the exact selection does not show is a choice among ties. */
    if (!row->engine_set_changed)
        return DIFF_CASE_SCORES_DIFFER_SELECTION_SAME;
    return row->reference_set_changed ? DIFF_CASE_SCORES_DIFFER_SELECTION_CHANGED
                                      : DIFF_CASE_TIE_FLAP;
}

/* One side's engine selection of row judged against its own scores. */
static int judge_side(const struct check_context *checks, const struct engine_contract *contract,
                      uint32_t row, struct engine_row_scratch *scratch,
                      struct diff_engine_side *side, struct audit_error *err)
{
    struct engine_row_detail detail;
    int status = engine_judge_row(checks, contract, row, scratch, &side->row_class, &side->kinds,
                                  &detail, err);
    if (status < 0)
        return status;
    side->missing_count = detail.missing_count;
    for (uint64_t i = 0; i < detail.missing_count && i < ENGINE_LISTED_INDICES; i++)
        side->missing[i] = detail.missing[i].index;
    return AUDIT_OK;
}

int diff_row_compare(const struct capture_record *a, const struct capture_record *b, uint32_t row,
                     uint32_t k, struct diff_scratch *scratch, struct diff_engine_judge *judge,
                     struct diff_row *out, struct audit_error *err)
{
    int status;
    memset(out, 0, sizeof(*out));
    out->row = row;
    if (row >= a->rows || row >= b->rows || k == 0)
        return audit_fail(err, AUDIT_EUSAGE, "diff: row %u or k %u out of range", row, k);
    size_t capacity = k;
    if (a->k > capacity)
        capacity = a->k;
    if (b->k > capacity)
        capacity = b->k;
    if ((status = scratch_reserve(scratch, capacity, err)) < 0)
        return status;

    out->window_differs = a->lengths[row] != b->lengths[row] ||
                          capture_row_start(a, row) != capture_row_start(b, row);
    out->page_table_differs = row_page_tables_differ(a, b, row);
    if ((status = compare_scores(a, b, row, k, out, err)) < 0)
        return status;

    if (!out->scores_identical && !out->window_differs) {
        int64_t found_a = topk_reference_row(capture_row_window(a, row), a->lengths[row], k,
                                             scratch->reference_a, &scratch->topk);
        int64_t found_b = topk_reference_row(capture_row_window(b, row), b->lengths[row], k,
                                             scratch->reference_b, &scratch->topk);
        if (found_a < 0 || found_b < 0)
            return audit_fail(err, AUDIT_ENOMEM, "record %u row %u: reference top-k failed",
                              a->index, row);
        for (uint32_t i = 0; i < k; i++) {
            scratch->engine_a[i] = scratch->reference_a[i];
            scratch->engine_b[i] = scratch->reference_b[i];
        }
        compare_selections(scratch->engine_a, scratch->engine_b, k, scratch->sorted_a,
                           scratch->sorted_b, &out->reference_set_changed,
                           &out->reference_order_changed);
    }

    out->engine_compared = a->engine_indices && b->engine_indices && a->k == b->k;
    if (out->engine_compared) {
        uint32_t width = a->k;
        bool remap = out->page_table_differs && a->page_table && b->page_table &&
                     a->page_size == b->page_size && !out->window_differs;
        if (remap) {
            if ((status = topk_untranslate_row(a, row, a->engine_indices + (uint64_t)row * width,
                                               width, &scratch->pages, scratch->engine_a,
                                               err)) < 0 ||
                (status = topk_untranslate_row(b, row, b->engine_indices + (uint64_t)row * width,
                                               width, &scratch->pages, scratch->engine_b,
                                               err)) < 0)
                return status;
        } else {
            const int32_t *engine_a = a->engine_indices + (uint64_t)row * width;
            const int32_t *engine_b = b->engine_indices + (uint64_t)row * width;
            for (uint32_t i = 0; i < width; i++) {
                scratch->engine_a[i] = engine_a[i];
                scratch->engine_b[i] = engine_b[i];
            }
        }
        compare_selections(scratch->engine_a, scratch->engine_b, width, scratch->sorted_a,
                           scratch->sorted_b, &out->engine_set_changed, &out->engine_order_changed);
        if (judge && !out->window_differs) {
            if ((status = judge_side(judge->a, &judge->contract_a, row, &judge->scratch_a,
                                     &out->engine_a, err)) < 0 ||
                (status = judge_side(judge->b, &judge->contract_b, row, &judge->scratch_b,
                                     &out->engine_b, err)) < 0)
                return status;
            out->engine_judged = true;
        }
    }
    out->diff_case = classify(out);
    return AUDIT_OK;
}

bool diff_record_shape_compare(const struct capture_record *a, const struct capture_record *b,
                               struct diff_record_shape *shape)
{
    memset(shape, 0, sizeof(*shape));
    shape->common_rows = a->rows < b->rows ? a->rows : b->rows;
    shape->rows_differ = a->rows != b->rows;
    shape->k_differs = a->k != b->k;
    shape->page_table_layout_differs = (a->page_table != NULL) != (b->page_table != NULL) ||
                                       (a->page_table && a->page_size != b->page_size);
    shape->engine_presence_differs = (a->engine_indices != NULL) != (b->engine_indices != NULL);
    return shape->rows_differ || shape->k_differs || shape->page_table_layout_differs;
}
