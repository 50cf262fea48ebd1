/* N runs aligned by call (compare_runs.h). */
#include "compare_runs.h"

#include <math.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "census.h"
#include "checks.h"
#include "reference.h"
#include "selection.h"

const char *compare_attribution_name(enum compare_attribution attribution)
{
    switch (attribution) {
    case COMPARE_NONE: return "none";
    case COMPARE_UPSTREAM: return "upstream";
    case COMPARE_SELECTION_KERNEL: return "selection_kernel";
    case COMPARE_TIE_FLAP: return "tie_flap";
    case COMPARE_ENGINE_WRONG: return "engine_wrong";
    case COMPARE_ATTRIBUTION_COUNT: break;
    }
    return "unknown";
}

void compare_groups_text(const int *groups, size_t run_count, char *out)
{
    static const char symbols[] =
        "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789+*";
    for (size_t r = 0; r < run_count; r++)
        out[r] = groups[r] < 0 ? '.' : symbols[groups[r] % (int)(sizeof(symbols) - 1)];
    out[run_count] = '\0';
}

/* ---- the first pass: every record's digests -------------------------------------------------- */

/* "layer=3 step=11" from the metadata's identity keys; false when it has none. */
static bool identity_label(const struct capture_record *record, char *label, size_t size)
{
    static const char *const keys[] = COMPARE_IDENTITY_KEYS;
    cJSON *metadata = record->metadata_json ? cJSON_Parse(record->metadata_json) : NULL;
    size_t used = 0;
    label[0] = '\0';
    for (size_t i = 0; i < COMPARE_IDENTITY_KEY_COUNT; i++) {
        const cJSON *value = cJSON_GetObjectItemCaseSensitive(metadata, keys[i]);
        if (!value)
            continue;
        char *text = cJSON_IsString(value) ? NULL : cJSON_PrintUnformatted(value);
        int written = snprintf(label + used, size - used, "%s%s=%s", used ? " " : "", keys[i],
                               cJSON_IsString(value) ? value->valuestring : text ? text : "?");
        cJSON_free(text);
        if (written > 0)
            used = used + (size_t)written < size ? used + (size_t)written : size - 1;
    }
    cJSON_Delete(metadata);
    return used > 0;
}

/* Hash of per-row hashes (each row's window bytes), so that no buffer holds a whole record. */
static int hash_windows(const struct capture_record *record, uint8_t digest[HASH_BYTES],
                        uint8_t window_digest[HASH_BYTES], struct audit_error *err)
{
    const size_t rows = record->rows ? record->rows : 1;
    uint8_t (*row_hashes)[HASH_BYTES] = malloc(rows * HASH_BYTES);
    int32_t *shape = malloc(rows * 2 * sizeof(int32_t));
    if (!row_hashes || !shape) {
        free(row_hashes);
        free(shape);
        return audit_fail(err, AUDIT_ENOMEM, "record %u: out of memory hashing its scores",
                          record->index);
    }
    for (uint32_t b = 0; b < record->rows; b++) {
        hash_bytes(capture_row_window(record, b), (size_t)record->lengths[b] * sizeof(float),
                   row_hashes[b]);
        shape[2 * b] = record->lengths[b];
        shape[2 * b + 1] = capture_row_start(record, b);
    }
    hash_bytes(row_hashes, (size_t)record->rows * HASH_BYTES, digest);
    hash_bytes(shape, (size_t)record->rows * 2 * sizeof(int32_t), window_digest);
    free(row_hashes);
    free(shape);
    return AUDIT_OK;
}

/* The engine's selection in window positions (an index no position explains becomes -2), its
 * order and set hashes, and its judgement. */
static int digest_engine(const struct capture_record *record, const struct check_context *checks,
                         const struct compare_options *options, struct compare_entry *entry,
                         struct audit_error *err)
{
    const size_t slots = (size_t)record->rows * record->k;
    int32_t *positions = malloc((slots ? slots : 1) * sizeof(int32_t));
    int64_t *row = malloc((size_t)record->k * sizeof(int64_t));
    struct topk_page_inverse pages = { 0 };
    struct engine_judgement judgement;
    struct engine_contract contract;
    int status = AUDIT_OK;
    memset(&judgement, 0, sizeof(judgement));
    if (!positions || !row) {
        status = audit_fail(err, AUDIT_ENOMEM, "record %u: out of memory for the engine's "
                            "selection", record->index);
        goto done;
    }
    for (uint32_t b = 0; b < record->rows && status == AUDIT_OK; b++) {
        status = topk_untranslate_row(record, b, record->engine_indices + (size_t)b * record->k,
                                      record->k, &pages, row, err);
        for (uint32_t j = 0; status == AUDIT_OK && j < record->k; j++)
            positions[(size_t)b * record->k + j] = row[j] >= -1 ? (int32_t)row[j] : -2;
    }
    if (status < 0)
        goto done;
    entry->has_engine = true;
    hash_indices(positions, slots, entry->engine_order_hash);
    if (hash_index_sets(positions, record->rows, record->k, entry->engine_set_hash) < 0) {
        status = audit_fail(err, AUDIT_ENOMEM, "record %u: out of memory hashing the engine's "
                            "selection", record->index);
        goto done;
    }
    struct audit_error detail = { 0 };
    int judged = engine_contract_for_record(record, options->engine_contract, &contract, &detail);
    if (judged == AUDIT_OK)
        judged = engine_judge_record(checks, &contract, &judgement, &detail);
    if (judged == AUDIT_ENOMEM) {
        *err = detail;
        status = judged;
        goto done;
    }
    entry->engine_judged = judged == AUDIT_OK;
    if (!entry->engine_judged) {
        snprintf(entry->engine_error, sizeof(entry->engine_error), "%s", detail.message);
        goto done;
    }
    entry->engine_wrong_rows = judgement.class_rows[ENGINE_ROW_WRONG];
    if (judgement.detail_count)
        entry->engine_first_wrong = judgement.details[0];
done:
    engine_judgement_release(&judgement);
    topk_page_inverse_free(&pages);
    free(positions);
    free(row);
    return status;
}

/* Everything the analysis needs of one record, so that identical calls need no second read. */
static int digest_record(const struct capture_record *record,
                         const struct compare_options *options, struct compare_entry *entry,
                         struct audit_error *err)
{
    struct check_context checks;
    int status = hash_windows(record, entry->scores_hash, entry->window_hash, err);
    if (status < 0)
        return status;
    if ((status = checks_prepare(&checks, record, record->k, err)) < 0)
        return status;
    const int32_t *raw = checks.reference_raw ? checks.reference_raw : checks.reference;
    if (hash_index_sets(raw, record->rows, record->k, entry->exact_hash) < 0)
        status = audit_fail(err, AUDIT_ENOMEM, "record %u: out of memory hashing its selection",
                            record->index);
    if (status == AUDIT_OK && record->engine_indices)
        status = digest_engine(record, &checks, options, entry, err);
    checks_release(&checks);
    if (status < 0)
        return status;
    entry->gaps = malloc((record->rows ? record->rows : 1) * sizeof(double));
    if (!entry->gaps)
        return audit_fail(err, AUDIT_ENOMEM, "record %u: out of memory for its boundary gaps",
                          record->index);
    for (uint32_t b = 0; b < record->rows; b++) {
        struct census_row census;
        if (census_row_compute(capture_row_window(record, b), record->lengths[b], record->k,
                               &census) < 0)
            return audit_fail(err, AUDIT_ENOMEM, "record %u row %u: census failed",
                              record->index, b);
        entry->gaps[b] = census.short_row ? NAN : census.boundary_gap;
    }
    return AUDIT_OK;
}

static int add_entry(struct compare_run *run, struct compare_entry **entry,
                     struct audit_error *err)
{
    if (run->count == run->capacity) {
        size_t capacity = run->capacity ? 2 * run->capacity : 64;
        struct compare_entry *grown = realloc(run->entries, capacity * sizeof(*grown));
        if (!grown)
            return audit_fail(err, AUDIT_ENOMEM, "%s: out of memory listing records", run->path);
        run->entries = grown;
        run->capacity = capacity;
    }
    *entry = &run->entries[run->count++];
    memset(*entry, 0, sizeof(**entry));
    return AUDIT_OK;
}

/* Reads one run; a read error ends it (run->error), only AUDIT_ENOMEM is returned. */
static int read_run(struct compare_run *run, const struct compare_options *options,
                    struct audit_error *err)
{
    struct capture_reader *reader = NULL;
    struct audit_error detail = { 0 };
    int status = capture_open(&reader, run->path, &detail);
    while (status == AUDIT_OK) {
        struct capture_record record;
        struct compare_entry *entry = NULL;
        int read = capture_read_record(reader, &record, &detail);
        if (read <= 0) {
            status = read;
            break;
        }
        status = add_entry(run, &entry, err);
        if (status == AUDIT_OK) {
            entry->index = record.index;
            entry->offset = record.file_offset;
            entry->rows = record.rows;
            entry->k = record.k;
            entry->has_identity = identity_label(&record, entry->label, sizeof(entry->label));
            status = digest_record(&record, options, entry, &detail);
            if (status == AUDIT_EDATA)
                audit_error_prefix(&detail, "%s", run->path);
        }
        capture_record_free(&record);
    }
    capture_close(reader);
    if (status == AUDIT_ENOMEM) {
        if (err->code == AUDIT_OK)
            *err = detail;
        return AUDIT_ENOMEM;
    }
    if (status < 0) {
        run->read_error = true;
        snprintf(run->error, sizeof(run->error), "%s", detail.message);
    }
    return AUDIT_OK;
}

/* ---- alignment ------------------------------------------------------------------------------- */

/* Labels every entry for its alignment: the identity, made unique within its run by the
 * occurrence ("layer=0 step=3 #2"), or the record's position. */
static int label_entries(struct compare_result *result, struct audit_error *err)
{
    result->by_call = true;
    for (size_t r = 0; r < result->run_count && result->by_call; r++)
        for (size_t i = 0; i < result->runs[r].count && result->by_call; i++)
            if (!result->runs[r].entries[i].has_identity) {
                snprintf(result->alignment_reason, sizeof(result->alignment_reason),
                         "%s record %u has none of the metadata keys rank, layer, step, call, "
                         "request_id, request", result->runs[r].path,
                         result->runs[r].entries[i].index);
                result->by_call = false;
            }
    for (size_t r = 0; r < result->run_count; r++) {
        struct compare_run *run = &result->runs[r];
        unsigned *occurrence = calloc(run->count ? run->count : 1, sizeof(unsigned));
        if (!occurrence)
            return audit_fail(err, AUDIT_ENOMEM, "out of memory aligning %s", run->path);
        for (size_t i = 0; i < run->count && result->by_call; i++) {
            occurrence[i] = 1;
            for (size_t j = 0; j < i; j++)
                occurrence[i] += strcmp(run->entries[j].label, run->entries[i].label) == 0;
        }
        for (size_t i = 0; i < run->count; i++) {
            struct compare_entry *entry = &run->entries[i];
            if (!result->by_call) {
                snprintf(entry->label, sizeof(entry->label), "record %u", entry->index);
            } else if (occurrence[i] > 1) {
                size_t used = strlen(entry->label);
                snprintf(entry->label + used, sizeof(entry->label) - used, " #%u",
                         occurrence[i]);
            }
        }
        free(occurrence);
    }
    return AUDIT_OK;
}

static int find_call(const struct compare_result *result, const char *label)
{
    for (size_t c = 0; c < result->call_count; c++)
        if (strcmp(result->calls[c].label, label) == 0)
            return (int)c;
    return -1;
}

/* The calls in order of first appearance (the first run's order, then what later runs add). */
static int align(struct compare_result *result, struct audit_error *err)
{
    size_t total = 0;
    for (size_t r = 0; r < result->run_count; r++)
        total += result->runs[r].count;
    result->calls = calloc(total ? total : 1, sizeof(*result->calls));
    if (!result->calls)
        return audit_fail(err, AUDIT_ENOMEM, "out of memory aligning %zu records", total);
    for (size_t r = 0; r < result->run_count; r++) {
        for (size_t i = 0; i < result->runs[r].count; i++) {
            const struct compare_entry *entry = &result->runs[r].entries[i];
            int c = find_call(result, entry->label);
            if (c < 0) {
                c = (int)result->call_count++;
                struct compare_call *call = &result->calls[c];
                snprintf(call->label, sizeof(call->label), "%s", entry->label);
                for (size_t s = 0; s < COMPARE_MAX_RUNS; s++)
                    call->entry[s] = -1;
            }
            result->calls[c].entry[r] = (int32_t)i;
        }
    }
    return AUDIT_OK;
}

/* ---- one call -------------------------------------------------------------------------------- */

static const struct compare_entry *entry_of(const struct compare_result *result,
                                            const struct compare_call *call, size_t run)
{
    return call->entry[run] < 0 ? NULL : &result->runs[run].entries[call->entry[run]];
}

/* Whether the call is present in every run with one shape; reason says why not. */
static bool check_comparable(const struct compare_result *result, struct compare_call *call)
{
    static const char prefix[] = "missing in run ";
    size_t used = 0;
    for (size_t r = 0; r < result->run_count; r++)
        if (call->entry[r] < 0 && used + 80 < sizeof(call->reason))
            used += (size_t)snprintf(call->reason + used, sizeof(call->reason) - used, "%s%zu (%s)",
                                     used ? ", " : prefix, r, result->runs[r].path);
    if (used)
        return false;
    const struct compare_entry *first = entry_of(result, call, 0);
    for (size_t r = 1; r < result->run_count; r++) {
        const struct compare_entry *entry = entry_of(result, call, r);
        if (entry->k != first->k) {
            snprintf(call->reason, sizeof(call->reason), "k differs: %u in run 0, %u in run %zu",
                     first->k, entry->k, r);
            return false;
        }
        if (entry->rows != first->rows ||
            memcmp(entry->window_hash, first->window_hash, HASH_BYTES) != 0) {
            snprintf(call->reason, sizeof(call->reason), "shape differs: %u row(s) in run 0, %u "
                     "in run %zu%s", first->rows, entry->rows, r,
                     entry->rows == first->rows ? ", with other lengths or row starts" : "");
            return false;
        }
    }
    return true;
}

/* groups[r]: the first run whose hash equals run r's, numbered in order of appearance. */
static int group_runs(const struct compare_result *result, const struct compare_call *call,
                      size_t offset, bool engine, int *groups)
{
    int count = 0;
    int representative[COMPARE_MAX_RUNS];
    for (size_t r = 0; r < result->run_count; r++) {
        const struct compare_entry *entry = entry_of(result, call, r);
        groups[r] = -1;
        if (!entry || (engine && !entry->has_engine))
            continue;
        const uint8_t *hash = (const uint8_t *)entry + offset;
        for (int g = 0; g < count && groups[r] < 0; g++) {
            const uint8_t *other =
                (const uint8_t *)entry_of(result, call, (size_t)representative[g]) + offset;
            if (memcmp(hash, other, HASH_BYTES) == 0)
                groups[r] = g;
        }
        if (groups[r] < 0) {
            representative[count] = (int)r;
            groups[r] = count++;
        }
    }
    return count;
}

/* Reads the record of entry again through reader. */
static int read_again(struct capture_reader *reader, const struct compare_entry *entry,
                      struct capture_record *record, struct audit_error *err)
{
    if (!reader)
        return audit_fail(err, AUDIT_EIO, "record %u: its capture cannot be opened again",
                          entry->index);
    capture_reader_seek(reader, entry->offset, entry->index);
    int status = capture_read_record(reader, record, err);
    if (status == 0)
        status = audit_fail(err, AUDIT_EDATA, "record %u at byte %llu is gone", entry->index,
                            (unsigned long long)entry->offset);
    return status < 0 ? status : AUDIT_OK;
}

/* The perturbation of each other score group against the first run, row by row (diff's rule:
 * crossing perturbation against the first run's boundary gap). */
static int measure_perturbation(const struct compare_result *result, struct compare_call *call,
                                struct capture_reader **readers, struct audit_error *err)
{
    struct capture_record first, other;
    struct diff_scratch scratch = { 0 };
    int status = read_again(readers[0], entry_of(result, call, 0), &first, err);
    if (status < 0)
        return status;
    bool measured[COMPARE_MAX_RUNS] = { false };
    call->largest_abs_diff = call->largest_crossing = 0.0;
    for (size_t r = 1; r < result->run_count && status == AUDIT_OK; r++) {
        const int group = call->score_group[r];
        if (group == call->score_group[0] || measured[group])
            continue;
        measured[group] = true;
        if ((status = read_again(readers[r], entry_of(result, call, r), &other, err)) < 0)
            break;
        for (uint32_t b = 0; b < first.rows && status == AUDIT_OK; b++) {
            struct diff_row row;
            status = diff_row_compare(&first, &other, b, first.k, &scratch, NULL, &row, err);
            if (status < 0 || row.scores_identical)
                continue;
            call->nonfinite_changed |= row.nonfinite_changed;
            if (isfinite(row.max_abs_diff) && row.max_abs_diff > call->largest_abs_diff)
                call->largest_abs_diff = row.max_abs_diff;
            if (row.crossing_perturbation > call->largest_crossing)
                call->largest_crossing = row.crossing_perturbation;
            call->rows_exceeding_gap += row.perturbation_exceeds_gap;
        }
        capture_record_free(&other);
    }
    capture_record_free(&first);
    diff_scratch_free(&scratch);
    return status;
}

static void attribute(const struct compare_result *result, struct compare_call *call)
{
    for (size_t r = 0; r < result->run_count; r++) {
        for (size_t s = r + 1; s < result->run_count; s++) {
            if (call->score_group[r] != call->score_group[s] || call->engine_group[r] < 0 ||
                call->engine_group[s] < 0)
                continue;
            call->same_scores_other_selection |= call->engine_group[r] != call->engine_group[s];
            call->same_scores_other_order |= call->engine_group[r] == call->engine_group[s] &&
                                             call->engine_order_group[r] !=
                                                 call->engine_order_group[s];
        }
    }
    if (call->engine_wrong_runs)
        call->attribution = COMPARE_ENGINE_WRONG;
    else if (call->score_groups > 1 && call->exact_groups > 1)
        call->attribution = COMPARE_UPSTREAM;
    else if (call->engine_groups > 1)
        call->attribution = COMPARE_TIE_FLAP;
    else if (call->same_scores_other_order)
        call->attribution = COMPARE_SELECTION_KERNEL;
    else
        call->attribution = COMPARE_NONE;
}

static int analyse_call(struct compare_result *result, struct compare_call *call,
                        struct capture_reader **readers, struct audit_error *err)
{
    call->boundary_gap_min = call->largest_abs_diff = call->largest_crossing = NAN;
    call->comparable = check_comparable(result, call);
    if (!call->comparable)
        return AUDIT_OK;
    call->score_groups = group_runs(result, call, offsetof(struct compare_entry, scores_hash),
                                    false, call->score_group);
    call->exact_groups = group_runs(result, call, offsetof(struct compare_entry, exact_hash),
                                    false, call->exact_group);
    call->engine_groups = group_runs(result, call,
                                     offsetof(struct compare_entry, engine_set_hash), true,
                                     call->engine_group);
    group_runs(result, call, offsetof(struct compare_entry, engine_order_hash), true,
               call->engine_order_group);
    for (size_t r = 0; r < result->run_count; r++) {
        const struct compare_entry *entry = entry_of(result, call, r);
        if (entry->has_engine && (!entry->engine_judged || entry->engine_wrong_rows > 0))
            call->engine_wrong_runs |= 1ull << r;
    }
    const struct compare_entry *first = entry_of(result, call, 0);
    for (uint32_t b = 0; b < first->rows; b++)
        if (!isnan(first->gaps[b]) &&
            (isnan(call->boundary_gap_min) || first->gaps[b] < call->boundary_gap_min))
            call->boundary_gap_min = first->gaps[b];
    int status = AUDIT_OK;
    if (call->score_groups > 1)
        status = measure_perturbation(result, call, readers, err);
    attribute(result, call);
    return status;
}

/* ---- the summary ----------------------------------------------------------------------------- */

static int compare_doubles(const void *x, const void *y)
{
    double a = *(const double *)x, b = *(const double *)y;
    return (a > b) - (a < b);
}

static int summarize(struct compare_result *result, struct audit_error *err)
{
    size_t gap_count = 0, capacity = 0;
    double *gaps = NULL;
    for (size_t c = 0; c < result->call_count; c++) {
        const struct compare_call *call = &result->calls[c];
        if (!call->comparable)
            continue;
        result->comparable++;
        result->scores_differ += call->score_groups > 1;
        result->same_scores_other_selection += call->same_scores_other_selection;
        result->attribution[call->attribution]++;
        const struct compare_entry *first = entry_of(result, call, 0);
        if (gap_count + first->rows > capacity) {
            capacity = 2 * (gap_count + first->rows);
            double *grown = realloc(gaps, capacity * sizeof(double));
            if (!grown) {
                free(gaps);
                return audit_fail(err, AUDIT_ENOMEM, "out of memory for the boundary gaps");
            }
            gaps = grown;
        }
        for (uint32_t b = 0; b < first->rows; b++)
            if (!isnan(first->gaps[b]))
                gaps[gap_count++] = first->gaps[b];
    }
    result->gap_min = result->gap_median = NAN;
    if (gap_count) {
        qsort(gaps, gap_count, sizeof(double), compare_doubles);
        result->gap_min = gaps[0];
        result->gap_median = gap_count % 2 ? gaps[gap_count / 2]
                                           : (gaps[gap_count / 2 - 1] + gaps[gap_count / 2]) / 2;
    }
    free(gaps);
    return AUDIT_OK;
}

/* ---- the whole comparison -------------------------------------------------------------------- */

void compare_result_release(struct compare_result *result)
{
    for (size_t r = 0; r < result->run_count; r++) {
        for (size_t i = 0; i < result->runs[r].count; i++)
            free(result->runs[r].entries[i].gaps);
        free(result->runs[r].entries);
    }
    free(result->calls);
    memset(result, 0, sizeof(*result));
}

int compare_runs(const char *const *paths, size_t count, const struct compare_options *options,
                 struct compare_result *result, struct audit_error *err)
{
    static const struct compare_options defaults = { 0 };
    struct capture_reader *readers[COMPARE_MAX_RUNS] = { NULL };
    int status = AUDIT_OK;
    memset(result, 0, sizeof(*result));
    if (count < 2 || count > COMPARE_MAX_RUNS)
        return audit_fail(err, AUDIT_EUSAGE, "%zu capture(s): compare takes 2 to %d", count,
                          COMPARE_MAX_RUNS);
    if (!options)
        options = &defaults;
    result->run_count = count;
    for (size_t r = 0; r < count && status == AUDIT_OK; r++) {
        result->runs[r].path = paths[r];
        status = read_run(&result->runs[r], options, err);
        result->read_error |= result->runs[r].read_error;
    }
    if (status == AUDIT_OK)
        status = label_entries(result, err);
    if (status == AUDIT_OK)
        status = align(result, err);
    for (size_t r = 0; r < count && status == AUDIT_OK; r++) {
        struct audit_error ignored = { 0 };
        (void)capture_open(&readers[r], paths[r], &ignored); /* read before: it opens */
    }
    for (size_t c = 0; c < result->call_count && status == AUDIT_OK; c++) {
        struct audit_error detail = { 0 };
        int analysed = analyse_call(result, &result->calls[c], readers, &detail);
        if (analysed == AUDIT_ENOMEM) {
            *err = detail;
            status = analysed;
        } else if (analysed < 0) {
            /* The file changed under us between the passes: the call is not comparable. */
            result->calls[c].comparable = false;
            snprintf(result->calls[c].reason, sizeof(result->calls[c].reason), "%s",
                     detail.message);
            result->read_error = true;
        }
    }
    for (size_t r = 0; r < count; r++)
        capture_close(readers[r]);
    if (status == AUDIT_OK)
        status = summarize(result, err);
    return status;
}
