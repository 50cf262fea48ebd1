/* Verdicts, the JSON report and the terminal table of `run` (docs/REPORT.md). No CUDA calls:
 * src/replay/replay.c measures, this file accounts and judges. */
#include "report.h"

#include <math.h>
#include <pthread.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "host_threads.h"
#include "index_sort.h"
#include "json_util.h"

const char *report_violation_name(unsigned kind)
{
    if (kind < (unsigned)CHECK_KIND_COUNT)
        return check_kind_name((enum check_kind)kind);
    if (kind == REPORT_GRAPH_MISMATCH)
        return "graph_mismatch";
    return "unknown";
}

/* ---- output tally --------------------------------------------------------------------------- */

static int compare_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static void *allocate_array(size_t count, size_t size)
{
    /* calloc(0) may return NULL; a tally of zero rows is legal. */
    return calloc(count ? count : 1, size);
}

/* Entries of sorted_row (k, ascending) that have no partner in sorted_base (k, ascending): the
 * indices this output selects and the baseline does not (multiset difference). */
static uint32_t multiset_difference(const int32_t *sorted_row, const int32_t *sorted_base,
                                    uint32_t k)
{
    uint32_t i = 0, j = 0, missing = 0;
    while (i < k) {
        if (j >= k || sorted_row[i] < sorted_base[j]) {
            missing++;
            i++;
        } else if (sorted_row[i] > sorted_base[j]) {
            j++;
        } else {
            i++;
            j++;
        }
    }
    return missing;
}

static void tally_drop_baseline(struct output_tally *tally)
{
    free(tally->baseline);
    free(tally->baseline_sorted);
    tally->baseline = tally->baseline_sorted = NULL;
    tally->baseline_set_hash_known = false;
    tally->baseline_row_flags_known = false;
}

static void sort_rows(int32_t *indices, uint32_t rows, uint32_t k, int32_t *sort_scratch)
{
    for (uint32_t b = 0; b < rows; b++)
        index_sort_ascending(indices + (size_t)b * k, k, sort_scratch);
}

/* Keeps a copy of baseline; baseline_sorted is allocated and left for the caller to fill. */
static int tally_set_baseline_unsorted(struct output_tally *tally, const int32_t *baseline,
                                       struct audit_error *err)
{
    size_t count = (size_t)tally->rows * tally->k;
    tally->baseline = allocate_array(count, sizeof(int32_t));
    tally->baseline_sorted = allocate_array(count, sizeof(int32_t));
    if (!tally->baseline || !tally->baseline_sorted) {
        tally_drop_baseline(tally);
        return audit_fail(err, AUDIT_ENOMEM, "out of memory keeping a %u x %u baseline output",
                          tally->rows, tally->k);
    }
    memcpy(tally->baseline, baseline, count * sizeof(int32_t));
    return AUDIT_OK;
}

static int tally_set_baseline(struct output_tally *tally, const int32_t *baseline,
                              struct audit_error *err)
{
    int status = tally_set_baseline_unsorted(tally, baseline, err);
    if (status < 0)
        return status;
    memcpy(tally->baseline_sorted, baseline, (size_t)tally->rows * tally->k * sizeof(int32_t));
    sort_rows(tally->baseline_sorted, tally->rows, tally->k, tally->sort_scratch);
    return AUDIT_OK;
}

int output_tally_init(struct output_tally *tally, uint32_t rows, uint32_t k, uint32_t reps_capacity,
                      const int32_t *baseline, struct audit_error *err)
{
    int status = AUDIT_OK;
    memset(tally, 0, sizeof(*tally));
    tally->rows = rows;
    tally->k = k;
    tally->reps_capacity = reps_capacity;
    tally->rep_hash = allocate_array(reps_capacity, sizeof(*tally->rep_hash));
    tally->rep_set_hash = allocate_array(reps_capacity, sizeof(*tally->rep_set_hash));
    tally->rep_distinct = allocate_array(reps_capacity, sizeof(uint32_t));
    tally->rep_rows_differing = allocate_array(reps_capacity, sizeof(uint32_t));
    tally->rep_time_us = allocate_array(reps_capacity, sizeof(double));
    tally->row_flags = allocate_array(rows, sizeof(uint32_t));
    tally->row_reps_differing = allocate_array(rows, sizeof(uint32_t));
    tally->row_reps_set_differing = allocate_array(rows, sizeof(uint32_t));
    tally->row_max_positions_differing = allocate_array(rows, sizeof(uint32_t));
    tally->row_max_indices_differing = allocate_array(rows, sizeof(uint32_t));
    tally->sort_scratch = allocate_array(k, sizeof(int32_t));
    if (!tally->rep_hash || !tally->rep_set_hash || !tally->rep_distinct ||
        !tally->rep_rows_differing || !tally->rep_time_us || !tally->row_flags ||
        !tally->row_reps_differing || !tally->row_reps_set_differing ||
        !tally->row_max_positions_differing || !tally->row_max_indices_differing ||
        !tally->sort_scratch) {
        status = audit_fail(err, AUDIT_ENOMEM, "out of memory for the tally of %u reps of %u rows",
                            reps_capacity, rows);
        goto error;
    }
    if (baseline) {
        tally->baseline_external = true;
        status = tally_set_baseline(tally, baseline, err);
        if (status < 0)
            goto error;
    }
    return AUDIT_OK;
error:
    output_tally_release(tally);
    return status;
}

/* Frees tally_work_buffers()'s buffers and clears their pointers. */
static void tally_free_work_buffers(struct output_tally *tally)
{
    free(tally->work_sorted);
    free(tally->work_sorted_rows);
    free(tally->work_positions);
    free(tally->work_indices);
    free(tally->work_row_flags);
    free(tally->baseline_row_flags);
    tally->work_sorted = NULL;
    tally->work_sorted_rows = NULL;
    tally->work_positions = tally->work_indices = tally->work_row_flags = NULL;
    tally->baseline_row_flags = NULL;
}

void output_tally_release(struct output_tally *tally)
{
    for (uint32_t i = 0; i < tally->distinct_count; i++) {
        free(tally->distinct[i].differing_rows);
        free(tally->distinct[i].differing_positions);
        free(tally->distinct[i].differing_indices);
        free(tally->distinct[i].row_hashes);
    }
    free(tally->distinct);
    free(tally->rep_hash);
    free(tally->rep_set_hash);
    free(tally->rep_distinct);
    free(tally->rep_rows_differing);
    free(tally->rep_time_us);
    free(tally->row_flags);
    free(tally->baseline);
    free(tally->baseline_sorted);
    free(tally->row_reps_differing);
    free(tally->row_reps_set_differing);
    free(tally->row_max_positions_differing);
    free(tally->row_max_indices_differing);
    free(tally->sort_scratch);
    tally_free_work_buffers(tally);
    memset(tally, 0, sizeof(*tally));
}

static struct distinct_output *tally_find(struct output_tally *tally,
                                          const uint8_t hash[HASH_BYTES],
                                          const uint8_t raw_hash[HASH_BYTES], uint32_t *index)
{
    for (uint32_t i = 0; i < tally->distinct_count; i++) {
        struct distinct_output *entry = &tally->distinct[i];
        if (!memcmp(entry->hash, hash, HASH_BYTES) &&
            !memcmp(entry->raw_hash, raw_hash, HASH_BYTES)) {
            *index = i;
            return entry;
        }
    }
    return NULL;
}

/* ---- the host work of a new distinct output --------------------------------------------------
 *
 * A new output costs milliseconds of host work against a fraction of one in the kernel (docs/
 * PERF.md "Host cost per distinct output"): its SHA-256 (and its raw output's), its set hash
 * (each row sorted, then one SHA-256 stream over the sorted rows), its contract checks and its
 * row-by-row comparison with the baseline. These are independent, so they run on a few threads
 * (host_threads.h) as jobs that each thread claims in this order under one lock:
 *   1. rows: chunks of rows compared with the baseline; a differing row is sorted once, for both
 *      the set hash and the comparison (a row equal to the baseline's takes its sorted row);
 *   2. set hash: the one SHA-256 stream over the sorted rows, once every row chunk is done;
 *   3. output hash, raw hash: when the output is known to be new before its SHA-256;
 *   4. checks: chunks of rows of checks_output_rows.
 * Each job writes only its own rows or digest; counts and times are summed under the lock, in
 * integers or as times, so the result does not depend on the number of threads or on who ran
 * what. One thread (DSATOPK_HOST_THREADS=1) runs the jobs in this order on the calling thread. */

enum output_job {
    OUTPUT_JOB_NONE,
    OUTPUT_JOB_ROWS,
    OUTPUT_JOB_SET_HASH,
    OUTPUT_JOB_OUTPUT_HASH,
    OUTPUT_JOB_RAW_HASH,
    OUTPUT_JOB_CHECKS,
};

/* Row chunks per thread: enough for threads that finish early to take over others' rows. */
#define OUTPUT_WORK_CHUNKS_PER_THREAD 4u

struct output_work {
    /* What to do (read-only while the threads run). */
    struct output_tally *tally;
    const int32_t *out, *raw_out, *reference;
    struct check_context *checks;
    const struct check_claims *claims;
    bool hash_output;     /* the SHA-256 of out and raw_out are jobs too */
    bool fresh_baseline;  /* out is the new baseline: its sorted rows go to baseline_sorted */
    bool reuse_checks;    /* rows with the baseline's multisets take its flags (check_reuse):
                             checks wait for every row chunk, which finds those rows */
    uint32_t chunk_rows, chunks;
    /* Results; the digests are written by their job alone, the rest under the lock. */
    uint8_t hash[HASH_BYTES], raw_hash[HASH_BYTES], set_hash[HASH_BYTES];
    struct check_counts counts;
    bool equals_reference;
    double hash_busy_ms, check_busy_ms; /* threads' time on each side */
    int status;            /* the error of the lowest check chunk that failed */
    uint32_t error_chunk;
    struct audit_error error;
    /* Scheduling, under the lock. */
    pthread_mutex_t lock;
    pthread_cond_t rows_done;
    uint32_t next_row_chunk, row_chunks_done, next_check_chunk;
    bool set_hash_claimed, output_hash_claimed, raw_hash_claimed;
};

/* Compares chunk's rows with the baseline (sorting those that differ into work_sorted) or, for
 * a fresh baseline, sorts them into baseline_sorted. Returns whether the rows equal the
 * reference's; adds the sorting time to *sort_ms. */
static bool output_work_rows(struct output_work *work, uint32_t chunk, int32_t *sort_scratch,
                             double *sort_ms)
{
    struct output_tally *tally = work->tally;
    const uint32_t k = tally->k;
    const size_t row_bytes = (size_t)k * sizeof(int32_t);
    const uint32_t first = chunk * work->chunk_rows;
    const uint32_t end = first + work->chunk_rows < tally->rows ? first + work->chunk_rows
                                                                 : tally->rows;
    bool equals_reference = work->reference != NULL;
    for (uint32_t b = first; b < end; b++) {
        const size_t offset = (size_t)b * k;
        const int32_t *row = work->out + offset;
        int32_t *base_sorted = tally->baseline_sorted + offset;
        if (equals_reference)
            equals_reference = !memcmp(row, work->reference + offset, row_bytes);
        tally->work_positions[b] = 0;
        tally->work_indices[b] = 0;
        tally->work_sorted_rows[b] = base_sorted;
        if (work->fresh_baseline) {
            const double started_ms = report_monotonic_ms();
            memcpy(base_sorted, row, row_bytes);
            index_sort_ascending(base_sorted, k, sort_scratch);
            *sort_ms += report_monotonic_ms() - started_ms;
            continue;
        }
        const int32_t *base = tally->baseline + offset;
        if (!memcmp(row, base, row_bytes))
            continue;
        uint32_t positions = 0;
        for (uint32_t j = 0; j < k; j++)
            positions += row[j] != base[j];
        int32_t *sorted = tally->work_sorted + offset;
        const double started_ms = report_monotonic_ms();
        memcpy(sorted, row, row_bytes);
        index_sort_ascending(sorted, k, sort_scratch);
        *sort_ms += report_monotonic_ms() - started_ms;
        tally->work_positions[b] = positions;
        tally->work_indices[b] = multiset_difference(sorted, base_sorted, k);
        tally->work_sorted_rows[b] = sorted;
    }
    return equals_reference;
}

/* The next job for a thread (under the lock); can_sort, can_check: whether the thread has the
 * scratch for row and check chunks (the calling thread always has). Waits while the set hash is
 * the only job left and other threads are still sorting. */
static enum output_job output_work_claim(struct output_work *work, bool can_sort, bool can_check,
                                         uint32_t *chunk)
{
    for (;;) {
        if (can_sort && work->next_row_chunk < work->chunks) {
            *chunk = work->next_row_chunk++;
            return OUTPUT_JOB_ROWS;
        }
        if (!work->set_hash_claimed && work->row_chunks_done == work->chunks) {
            work->set_hash_claimed = true;
            return OUTPUT_JOB_SET_HASH;
        }
        if (work->hash_output && !work->output_hash_claimed) {
            work->output_hash_claimed = true;
            return OUTPUT_JOB_OUTPUT_HASH;
        }
        if (work->hash_output && work->raw_out && !work->raw_hash_claimed) {
            work->raw_hash_claimed = true;
            return OUTPUT_JOB_RAW_HASH;
        }
        if (can_check && work->checks && work->next_check_chunk < work->chunks &&
            (!work->reuse_checks || work->row_chunks_done == work->chunks)) {
            *chunk = work->next_check_chunk++;
            return OUTPUT_JOB_CHECKS;
        }
        if (work->set_hash_claimed &&
            (!work->checks || !can_check || work->next_check_chunk == work->chunks))
            return OUTPUT_JOB_NONE;
        pthread_cond_wait(&work->rows_done, &work->lock);
    }
}

/* After every row chunk: does each row select the same index set as the baseline's row? Then
 * the sorted rows are the baseline's and so is the set hash (struct output_tally). */
static bool sets_equal_baseline(const struct output_work *work)
{
    const struct output_tally *tally = work->tally;
    if (work->fresh_baseline || !tally->baseline_set_hash_known)
        return false;
    for (uint32_t b = 0; b < tally->rows; b++)
        if (tally->work_indices[b] != 0)
            return false;
    return true;
}

/* One thread of the work (host_threads_run): claims and runs jobs until none is left. */
static void output_work_thread(void *argument, unsigned slot)
{
    struct output_work *work = argument;
    struct output_tally *tally = work->tally;
    /* The calling thread uses the tally's and the checks' scratch; the others their own, and
     * without it they leave those jobs to the threads that have it. */
    int32_t *sort_scratch = slot == 0 ? tally->sort_scratch
                                      : malloc((tally->k ? tally->k : 1) * sizeof(int32_t));
    uint8_t *seen = !work->checks ? NULL
                    : slot == 0  ? work->checks->seen
                                 : calloc(work->checks->seen_bytes, 1);
    pthread_mutex_lock(&work->lock);
    for (;;) {
        uint32_t chunk = 0;
        const enum output_job job = output_work_claim(work, sort_scratch != NULL, seen != NULL,
                                                      &chunk);
        if (job == OUTPUT_JOB_NONE)
            break;
        pthread_mutex_unlock(&work->lock);

        const double started_ms = report_monotonic_ms();
        double sort_ms = 0.0;
        bool equals_reference = false;
        struct check_counts chunk_counts = { 0 };
        struct audit_error chunk_error = { 0 };
        int chunk_status = AUDIT_OK;
        switch (job) {
        case OUTPUT_JOB_ROWS:
            equals_reference = output_work_rows(work, chunk, sort_scratch, &sort_ms);
            break;
        case OUTPUT_JOB_SET_HASH:
            if (sets_equal_baseline(work))
                memcpy(work->set_hash, tally->baseline_set_hash, HASH_BYTES);
            else
                hash_sorted_index_rows(tally->work_sorted_rows, tally->rows, tally->k,
                                       work->set_hash);
            break;
        case OUTPUT_JOB_OUTPUT_HASH:
            hash_indices(work->out, (size_t)tally->rows * tally->k, work->hash);
            break;
        case OUTPUT_JOB_RAW_HASH:
            hash_indices(work->raw_out, (size_t)tally->rows * tally->k, work->raw_hash);
            break;
        case OUTPUT_JOB_CHECKS: {
            const uint32_t first = chunk * work->chunk_rows;
            const uint32_t end = first + work->chunk_rows < tally->rows
                                     ? first + work->chunk_rows : tally->rows;
            const struct check_reuse reuse = { tally->baseline_row_flags, tally->work_indices };
            chunk_status = checks_output_rows_reusing(
                work->checks, work->out, work->raw_out, work->claims, first, end, seen,
                work->reuse_checks ? &reuse : NULL, &chunk_counts, tally->work_row_flags,
                &chunk_error);
            break;
        }
        case OUTPUT_JOB_NONE:
            break;
        }
        const double busy_ms = report_monotonic_ms() - started_ms;

        pthread_mutex_lock(&work->lock);
        switch (job) {
        case OUTPUT_JOB_ROWS:
            work->hash_busy_ms += sort_ms;
            work->check_busy_ms += busy_ms - sort_ms;
            work->equals_reference = work->equals_reference && equals_reference;
            if (++work->row_chunks_done == work->chunks)
                pthread_cond_broadcast(&work->rows_done);
            break;
        case OUTPUT_JOB_CHECKS:
            work->check_busy_ms += busy_ms;
            check_counts_add(&work->counts, &chunk_counts);
            if (chunk_status < 0 && (work->status == AUDIT_OK || chunk < work->error_chunk)) {
                work->status = chunk_status;
                work->error_chunk = chunk;
                work->error = chunk_error;
            }
            break;
        default:
            work->hash_busy_ms += busy_ms;
            break;
        }
    }
    pthread_mutex_unlock(&work->lock);
    if (slot != 0) {
        free(sort_scratch);
        free(seen);
    }
}

/* The buffers of output_work, allocated with the tally's first output. */
static int tally_work_buffers(struct output_tally *tally, struct audit_error *err)
{
    if (tally->work_sorted)
        return AUDIT_OK;
    tally->work_sorted = allocate_array((size_t)tally->rows * tally->k, sizeof(int32_t));
    tally->work_sorted_rows = allocate_array(tally->rows, sizeof(*tally->work_sorted_rows));
    tally->work_positions = allocate_array(tally->rows, sizeof(uint32_t));
    tally->work_indices = allocate_array(tally->rows, sizeof(uint32_t));
    tally->work_row_flags = allocate_array(tally->rows, sizeof(uint32_t));
    tally->baseline_row_flags = allocate_array(tally->rows, sizeof(uint32_t));
    if (tally->work_sorted && tally->work_sorted_rows && tally->work_positions &&
        tally->work_indices && tally->work_row_flags && tally->baseline_row_flags)
        return AUDIT_OK;
    tally_free_work_buffers(tally); /* all or none, so that the next output tries again */
    return audit_fail(err, AUDIT_ENOMEM, "out of memory for the host work of a %u x %u output",
                      tally->rows, tally->k);
}

/* Runs work's jobs on the threads the output is worth. */
static int output_work_run(struct output_work *work)
{
    struct output_tally *tally = work->tally;
    const size_t indices = (size_t)tally->rows * tally->k;
    const unsigned threads = host_threads_count(indices, OUTPUT_TALLY_INDICES_PER_THREAD);
    uint32_t chunks = threads == 1 ? 1u : threads * OUTPUT_WORK_CHUNKS_PER_THREAD;
    if (chunks > tally->rows)
        chunks = tally->rows;
    work->chunk_rows = chunks ? (tally->rows + chunks - 1) / chunks : 0;
    work->chunks = chunks ? (tally->rows + work->chunk_rows - 1) / work->chunk_rows : 0;
    work->counts.equals_reference = true;
    work->equals_reference = work->reference != NULL;
    if (pthread_mutex_init(&work->lock, NULL) != 0)
        return audit_fail(&work->error, AUDIT_ENOMEM, "cannot create a lock for the host work");
    if (pthread_cond_init(&work->rows_done, NULL) != 0) {
        pthread_mutex_destroy(&work->lock);
        return audit_fail(&work->error, AUDIT_ENOMEM, "cannot create a lock for the host work");
    }
    host_threads_run(threads, output_work_thread, work);
    pthread_cond_destroy(&work->rows_done);
    pthread_mutex_destroy(&work->lock);
    return work->status;
}

/* Records work's output as a new distinct entry (on the calling thread, the threads joined). */
static int tally_insert(struct output_tally *tally, const struct output_work *work,
                        uint32_t *index, struct audit_error *err)
{
    if (tally->distinct_count == tally->distinct_capacity) {
        uint32_t capacity = tally->distinct_capacity ? 2 * tally->distinct_capacity : 4;
        struct distinct_output *grown = realloc(tally->distinct, capacity * sizeof(*grown));
        if (!grown)
            return audit_fail(err, AUDIT_ENOMEM, "out of memory recording distinct outputs");
        tally->distinct = grown;
        tally->distinct_capacity = capacity;
    }
    struct distinct_output *entry = &tally->distinct[tally->distinct_count];
    memset(entry, 0, sizeof(*entry));
    memcpy(entry->hash, work->hash, HASH_BYTES);
    memcpy(entry->raw_hash, work->raw_hash, HASH_BYTES);
    memcpy(entry->set_hash, work->set_hash, HASH_BYTES);
    entry->equals_reference = work->equals_reference;
    /* Only the rows that differ: a record may have millions of rows and a tally dozens of
     * distinct outputs. */
    uint32_t count = 0;
    for (uint32_t b = 0; b < tally->rows; b++)
        count += tally->work_positions[b] > 0;
    if (count > 0) {
        entry->differing_rows = malloc(count * sizeof(uint32_t));
        entry->differing_positions = malloc(count * sizeof(uint32_t));
        entry->differing_indices = malloc(count * sizeof(uint32_t));
        if (!entry->differing_rows || !entry->differing_positions || !entry->differing_indices) {
            free(entry->differing_rows);
            free(entry->differing_positions);
            free(entry->differing_indices);
            return audit_fail(err, AUDIT_ENOMEM, "out of memory comparing an output with rep 0");
        }
        uint32_t n = 0;
        for (uint32_t b = 0; b < tally->rows; b++) {
            if (tally->work_positions[b] == 0)
                continue;
            entry->differing_rows[n] = b;
            entry->differing_positions[n] = tally->work_positions[b];
            entry->differing_indices[n] = tally->work_indices[b];
            n++;
        }
    }
    entry->differing_count = count;
    if (work->checks) {
        entry->counts = work->counts;
        for (uint32_t b = 0; b < tally->rows; b++)
            tally->row_flags[b] |= tally->work_row_flags[b];
    }
    tally->outputs_checked++;

    bool new_output = true, new_set = true;
    for (uint32_t i = 0; i < tally->distinct_count; i++) {
        if (!memcmp(tally->distinct[i].hash, work->hash, HASH_BYTES))
            new_output = false;
        if (!memcmp(tally->distinct[i].set_hash, entry->set_hash, HASH_BYTES))
            new_set = false;
    }
    tally->distinct_outputs += new_output;
    tally->distinct_sets += new_set;
    *index = tally->distinct_count++;
    return AUDIT_OK;
}

/* A short digest of a row-hash vector: two vectors with different digests differ, so the full
 * comparison runs only on a likely match. */
static uint64_t row_hash_digest(const uint64_t *row_hashes, uint32_t rows)
{
    uint64_t digest = 0;
    for (uint32_t b = 0; b < rows; b++) {
        digest = (digest ^ row_hashes[b]) * 0x9E3779B97F4A7C15ull;
        digest ^= digest >> 29;
    }
    return digest;
}

/* Keeps the row hashes of entry (within the tally's budget; running out of memory only means
 * the output will not be recognised on the GPU later). */
static void distinct_remember_row_hashes(struct output_tally *tally, struct distinct_output *entry,
                                         const uint64_t *row_hashes)
{
    const size_t bytes = (size_t)tally->rows * sizeof(uint64_t);
    if (entry->row_hashes || tally->row_hash_bytes + bytes > OUTPUT_TALLY_ROW_HASH_BUDGET_BYTES)
        return;
    entry->row_hashes = allocate_array(tally->rows, sizeof(uint64_t));
    if (!entry->row_hashes)
        return;
    memcpy(entry->row_hashes, row_hashes, bytes);
    entry->row_hash_digest = row_hash_digest(row_hashes, tally->rows);
    tally->row_hash_bytes += bytes;
}

/* Whether an output with these row hashes is surely not one of the tally's distinct outputs
 * before its SHA-256 says so: none yet, or every one kept its row hashes and none has these
 * (equal outputs have equal row hashes). Then the SHA-256 can run beside the rest. */
static bool tally_surely_new(const struct output_tally *tally, const uint64_t *row_hashes)
{
    if (tally->distinct_count == 0)
        return true;
    if (!row_hashes)
        return false;
    const uint64_t digest = row_hash_digest(row_hashes, tally->rows);
    for (uint32_t i = 0; i < tally->distinct_count; i++) {
        const struct distinct_output *entry = &tally->distinct[i];
        if (!entry->row_hashes ||
            (entry->row_hash_digest == digest &&
             !memcmp(entry->row_hashes, row_hashes, (size_t)tally->rows * sizeof(uint64_t))))
            return false;
    }
    return true;
}

/* Counts one rep as distinct output index (already checked and compared with the baseline). */
static void tally_count_rep(struct output_tally *tally, uint32_t index, double time_us)
{
    struct distinct_output *entry = &tally->distinct[index];
    const uint32_t rep = tally->reps++;
    memcpy(tally->rep_hash[rep], entry->hash, HASH_BYTES);
    memcpy(tally->rep_set_hash[rep], entry->set_hash, HASH_BYTES);
    tally->rep_distinct[rep] = index;
    tally->rep_rows_differing[rep] = entry->differing_count;
    tally->rep_time_us[rep] = time_us;
    entry->reps_seen++;
    tally->equals_reference_reps += entry->equals_reference;
    for (unsigned kind = 0; kind < (unsigned)CHECK_KIND_COUNT; kind++) {
        uint64_t rows = entry->counts.violations[kind];
        tally->violations[kind].total_rows += rows;
        if (rows > tally->violations[kind].max_rows_per_rep)
            tally->violations[kind].max_rows_per_rep = rows;
    }
    if (tally->baseline_external) {
        struct violation_tally *mismatch = &tally->violations[REPORT_GRAPH_MISMATCH];
        mismatch->total_rows += entry->differing_count;
        if (entry->differing_count > mismatch->max_rows_per_rep)
            mismatch->max_rows_per_rep = entry->differing_count;
    }
    for (uint32_t i = 0; i < entry->differing_count; i++) {
        uint32_t b = entry->differing_rows[i];
        tally->row_reps_differing[b]++;
        if (entry->differing_indices[i] > 0)
            tally->row_reps_set_differing[b]++;
        if (entry->differing_positions[i] > tally->row_max_positions_differing[b])
            tally->row_max_positions_differing[b] = entry->differing_positions[i];
        if (entry->differing_indices[i] > tally->row_max_indices_differing[b])
            tally->row_max_indices_differing[b] = entry->differing_indices[i];
    }
}

int output_tally_add_hashed(struct output_tally *tally, const int32_t *out, const int32_t *raw_out,
                            const uint64_t *row_hashes, double time_us,
                            struct check_context *checks, const struct check_claims *claims,
                            const int32_t *reference, struct audit_error *err)
{
    if (tally->reps >= tally->reps_capacity)
        return audit_fail(err, AUDIT_EUSAGE, "tally sized for %u reps got one more",
                          tally->reps_capacity);
    const size_t count = (size_t)tally->rows * tally->k;
    struct output_work work = {
        .tally = tally, .out = out, .raw_out = raw_out, .reference = reference,
        .checks = checks, .claims = claims,
        .hash_output = tally_surely_new(tally, row_hashes),
    };
    uint32_t index = 0;
    struct distinct_output *entry = NULL;
    int status = AUDIT_OK;
    if (!work.hash_output) {
        /* Maybe an output already seen: its SHA-256 decides before anything else is done. */
        const double started_ms = report_monotonic_ms();
        hash_indices(out, count, work.hash);
        if (raw_out)
            hash_indices(raw_out, count, work.raw_hash);
        tally->hash_ms += report_monotonic_ms() - started_ms;
        entry = tally_find(tally, work.hash, work.raw_hash, &index);
    }
    tally->outputs_hashed++;

    if (!entry) {
        status = tally_work_buffers(tally, err);
        if (status < 0)
            goto error;
        const double started_ms = report_monotonic_ms();
        if (!tally->baseline) {
            /* The first output is the baseline: its rows are sorted once, into baseline_sorted. */
            status = tally_set_baseline_unsorted(tally, out, err);
            if (status < 0)
                goto error;
            work.fresh_baseline = true;
        }
        work.reuse_checks = checks && !work.fresh_baseline && tally->baseline_row_flags_known &&
                            checks->record && checks->record->page_size == 0;
        status = output_work_run(&work);
        if (status < 0) {
            *err = work.error;
            goto error;
        }
        if (work.fresh_baseline) {
            memcpy(tally->baseline_set_hash, work.set_hash, HASH_BYTES);
            tally->baseline_set_hash_known = true;
            if (checks) {
                memcpy(tally->baseline_row_flags, tally->work_row_flags,
                       tally->rows * sizeof(uint32_t));
                tally->baseline_row_flags_known = true;
            }
        }
        /* The row hashes said new; an equal SHA-256 means they were not this output's. */
        if (work.hash_output)
            entry = tally_find(tally, work.hash, work.raw_hash, &index);
        if (!entry) {
            status = tally_insert(tally, &work, &index, err);
            if (status < 0)
                goto error;
            entry = &tally->distinct[index];
        }
        /* The jobs overlapped: the phase's wall time is split between hashing and checking in
         * proportion to the time threads spent on each, so that the parts still add up. */
        const double wall_ms = report_monotonic_ms() - started_ms;
        const double busy_ms = work.hash_busy_ms + work.check_busy_ms;
        const double hash_share = busy_ms > 0.0 ? work.hash_busy_ms / busy_ms : 0.0;
        tally->hash_ms += wall_ms * hash_share;
        tally->check_ms += wall_ms * (1.0 - hash_share);
    }
    if (row_hashes)
        distinct_remember_row_hashes(tally, entry, row_hashes);
    tally_count_rep(tally, index, time_us);
    return AUDIT_OK;
error:
    /* A baseline is the first output added: this one was not. */
    if (work.fresh_baseline)
        tally_drop_baseline(tally);
    return status;
}

int output_tally_add(struct output_tally *tally, const int32_t *out, const int32_t *raw_out,
                     double time_us, struct check_context *checks,
                     const struct check_claims *claims, const int32_t *reference,
                     struct audit_error *err)
{
    return output_tally_add_hashed(tally, out, raw_out, NULL, time_us, checks, claims, reference,
                                   err);
}

bool output_tally_add_if_known(struct output_tally *tally, const uint64_t *row_hashes,
                               double time_us)
{
    if (!row_hashes || tally->reps >= tally->reps_capacity)
        return false;
    const uint64_t digest = row_hash_digest(row_hashes, tally->rows);
    for (uint32_t i = 0; i < tally->distinct_count; i++) {
        const struct distinct_output *entry = &tally->distinct[i];
        if (!entry->row_hashes || entry->row_hash_digest != digest ||
            memcmp(entry->row_hashes, row_hashes, (size_t)tally->rows * sizeof(uint64_t)) != 0)
            continue;
        tally->gpu_hash_matches++;
        tally_count_rep(tally, i, time_us);
        return true;
    }
    return false;
}

bool output_tally_add_repeat(struct output_tally *tally, uint32_t distinct, double time_us)
{
    if (tally->reps >= tally->reps_capacity || distinct >= tally->distinct_count)
        return false;
    tally->gpu_hash_matches++;
    tally_count_rep(tally, distinct, time_us);
    return true;
}

uint32_t output_tally_flapping_rows(const struct output_tally *tally)
{
    uint32_t count = 0;
    for (uint32_t b = 0; b < tally->rows && tally->row_reps_differing; b++)
        count += tally->row_reps_differing[b] > 0;
    return count;
}

uint32_t output_tally_set_flapping_rows(const struct output_tally *tally)
{
    uint32_t count = 0;
    for (uint32_t b = 0; b < tally->rows && tally->row_reps_set_differing; b++)
        count += tally->row_reps_set_differing[b] > 0;
    return count;
}

bool output_tally_times(const struct output_tally *tally, double *median_us, double *min_us,
                        double *max_us)
{
    *median_us = *min_us = *max_us = NAN;
    if (tally->reps == 0)
        return false;
    double *times = malloc(tally->reps * sizeof(double));
    if (!times)
        return false;
    uint32_t n = 0;
    for (uint32_t rep = 0; rep < tally->reps; rep++)
        if (isfinite(tally->rep_time_us[rep]))
            times[n++] = tally->rep_time_us[rep];
    if (n > 0) {
        qsort(times, n, sizeof(double), compare_double);
        *min_us = times[0];
        *max_us = times[n - 1];
        *median_us = n % 2 ? times[n / 2] : 0.5 * (times[n / 2 - 1] + times[n / 2]);
    }
    free(times);
    return n > 0;
}

/* ---- backend results ------------------------------------------------------------------------ */

const char *backend_status_name(enum backend_status status)
{
    switch (status) {
    case BACKEND_OK: return "ok";
    case BACKEND_UNSUPPORTED: return "unsupported";
    case BACKEND_UNAVAILABLE: return "unavailable";
    case BACKEND_ERROR: return "error";
    case BACKEND_SKIPPED: return "skipped";
    case BACKEND_HANG: return "hang";
    case BACKEND_CRASH: return "crash";
    case BACKEND_CUDA_ERROR: return "cuda_error";
    }
    return "unknown";
}

int backend_status_parse(const char *name, enum backend_status *status)
{
    for (int s = BACKEND_OK; name && s < BACKEND_STATUS_COUNT; s++) {
        if (strcmp(name, backend_status_name((enum backend_status)s)) == 0) {
            *status = (enum backend_status)s;
            return 0;
        }
    }
    return -1;
}

void backend_result_init(struct backend_result *result, const struct topk_backend *backend)
{
    memset(result, 0, sizeof(*result));
    result->backend = backend;
    result->status = BACKEND_OK;
}

void backend_result_release(struct backend_result *result)
{
    output_tally_release(&result->eager);
    output_tally_release(&result->graph);
    free(result->batch.dependent);
    result->batch.dependent = NULL;
    result->batch.dependent_count = 0;
}

void backend_result_time_breakdown(const struct backend_result *result,
                                   struct time_breakdown *time)
{
    *time = result->time;
    const struct output_tally *tallies[] = { &result->eager, &result->graph };
    for (size_t i = 0; i < sizeof(tallies) / sizeof(tallies[0]); i++) {
        const struct output_tally *tally = tallies[i];
        if (!tally->beside_reps) {
            time->hash_ms += tally->hash_ms;
            time->check_ms += tally->check_ms;
            continue;
        }
        /* Beside the reps only the wait for the host work is the backend's time; it is shared
         * out like a new output's host work (docs/REPORT.md "time_breakdown_ms"). */
        const double work_ms = tally->hash_ms + tally->check_ms;
        const double hash_share = work_ms > 0 ? tally->hash_ms / work_ms : 0.5;
        time->hash_ms += tally->beside_wait_ms * hash_share;
        time->check_ms += tally->beside_wait_ms * (1.0 - hash_share);
    }
}

void backend_result_set_status(struct backend_result *result, enum backend_status status,
                               const char *format, ...)
{
    va_list args;
    result->status = status;
    va_start(args, format);
    vsnprintf(result->reason, sizeof(result->reason), format, args);
    va_end(args);
}

/* ---- time breakdown ------------------------------------------------------------------------- */

/* Every part of struct time_breakdown but total_ms, in report order: the one list the JSON
 * writer, the reader, the sums and the table line walk, so none of them can miss a part. */
static const struct {
    const char *json_name;  /* in time_breakdown_ms */
    const char *table_name; /* in the table's time lines */
    size_t offset;
} time_parts[] = {
    { "device_open_ms", "device open", offsetof(struct time_breakdown, device_open_ms) },
    { "setup_ms", "setup", offsetof(struct time_breakdown, setup_ms) },
    { "kernel_ms", "kernel", offsetof(struct time_breakdown, kernel_ms) },
    { "launch_overhead_ms", "launch overhead", offsetof(struct time_breakdown, launch_overhead_ms) },
    { "noise_wait_ms", "noise wait", offsetof(struct time_breakdown, noise_wait_ms) },
    { "row_hash_ms", "gpu row hash", offsetof(struct time_breakdown, row_hash_ms) },
    { "copy_ms", "copy", offsetof(struct time_breakdown, copy_ms) },
    { "hash_ms", "sha256", offsetof(struct time_breakdown, hash_ms) },
    { "check_ms", "check", offsetof(struct time_breakdown, check_ms) },
    { "dump_ms", "dump", offsetof(struct time_breakdown, dump_ms) },
    { "batch_invariance_ms", "batch invariance",
      offsetof(struct time_breakdown, batch_invariance_ms) },
};
#define TIME_PART_COUNT (sizeof(time_parts) / sizeof(time_parts[0]))

static double *time_part(struct time_breakdown *time, size_t part)
{
    return (double *)((char *)time + time_parts[part].offset);
}

static double time_part_value(const struct time_breakdown *time, size_t part)
{
    return *(const double *)((const char *)time + time_parts[part].offset);
}

double report_monotonic_ms(void)
{
    struct timespec now;
    clock_gettime(CLOCK_MONOTONIC, &now);
    return (double)now.tv_sec * 1e3 + (double)now.tv_nsec * 1e-6;
}

double time_breakdown_other_ms(const struct time_breakdown *time)
{
    double other = time->total_ms;
    for (size_t part = 0; part < TIME_PART_COUNT; part++)
        other -= time_part_value(time, part);
    return other > 0 ? other : 0;
}

void time_breakdown_add(struct time_breakdown *sum, const struct time_breakdown *addend)
{
    sum->total_ms += addend->total_ms;
    for (size_t part = 0; part < TIME_PART_COUNT; part++)
        *time_part(sum, part) += time_part_value(addend, part);
}

/* Milliseconds to the microsecond: finer digits are clock noise. */
static double round_ms(double ms)
{
    return isfinite(ms) ? round(ms * 1e3) / 1e3 : ms;
}

cJSON *time_breakdown_json(const struct time_breakdown *time)
{
    cJSON *json = cJSON_CreateObject();
    if (!json)
        return NULL;
    for (size_t part = 0; part < TIME_PART_COUNT; part++)
        json_add_number(json, time_parts[part].json_name, round_ms(time_part_value(time, part)));
    json_add_number(json, "other_ms", round_ms(time_breakdown_other_ms(time)));
    json_add_number(json, "total_ms", round_ms(time->total_ms));
    return json;
}

void time_breakdown_from_json(const cJSON *json, struct time_breakdown *time)
{
    memset(time, 0, sizeof(*time));
    const cJSON *total = cJSON_GetObjectItemCaseSensitive(json, "total_ms");
    if (cJSON_IsNumber(total) && isfinite(total->valuedouble))
        time->total_ms = total->valuedouble;
    for (size_t part = 0; part < TIME_PART_COUNT; part++) {
        const cJSON *value = cJSON_GetObjectItemCaseSensitive(json, time_parts[part].json_name);
        if (cJSON_IsNumber(value) && isfinite(value->valuedouble))
            *time_part(time, part) = value->valuedouble;
    }
}

/* ---- verdict rules -------------------------------------------------------------------------- */

#define KIND_BIT(kind) (1u << (kind))
#define ALL_CHECK_KINDS ((1u << CHECK_KIND_COUNT) - 1u)

/* What each claimed level must show (docs/REPORT.md "Verdicts"). Checks of tie rule and order
 * only fire for backends that claim them, so forbidding every kind means "no violation of
 * anything the backend promises". */
static const struct verdict_rule verdict_rules[] = {
    { TOPK_GPU_TO_GPU, true, true, true, true, ALL_CHECK_KINDS, 0 },
    { TOPK_RUN_TO_RUN, false, true, true, false, ALL_CHECK_KINDS, 0 },
    { TOPK_NOT_GUARANTEED, false, false, false, false, ALL_CHECK_KINDS,
      KIND_BIT(CHECK_SHORT) | KIND_BIT(CHECK_WRONG_SET) },
};

const struct verdict_rule *verdict_rule_for(enum topk_determinism level)
{
    for (size_t i = 0; i < sizeof(verdict_rules) / sizeof(verdict_rules[0]); i++)
        if (verdict_rules[i].level == level)
            return &verdict_rules[i];
    /* An unknown level claims nothing we can check beyond the contract: judge it strictly. */
    return &verdict_rules[0];
}

/* Staging buffers of the modelled families (../shared/research/topk-kernels.md): radix clips
 * overflow silently, filtered rescans the row. */
static const struct staging_model staging_models[] = {
    { "radix", "radix_4096", CENSUS_RADIX_STAGING, true },
    { "filtered", "filtered_16384", CENSUS_FILTERED_STAGING, false },
    { "filtered-det", "filtered_16384", CENSUS_FILTERED_STAGING, false },
};

const struct staging_model *staging_model_for(const char *backend_name)
{
    for (size_t i = 0; backend_name && i < sizeof(staging_models) / sizeof(staging_models[0]); i++)
        if (strcmp(staging_models[i].backend, backend_name) == 0)
            return &staging_models[i];
    return NULL;
}

bool staging_predicts_overflow(const struct staging_model *model, const struct census_row *row)
{
    return model && row && !row->short_row && row->coarse_bin_count > (int64_t)model->capacity;
}

const char *verdict_name(enum verdict verdict)
{
    switch (verdict) {
    case VERDICT_PASS: return "pass";
    case VERDICT_FAIL: return "fail";
    case VERDICT_NOT_RUN: return "not_run";
    }
    return "unknown";
}

static void verdict_reason(struct verdict_result *verdict, const char *format, ...)
    __attribute__((format(printf, 2, 3)));
static void verdict_reason(struct verdict_result *verdict, const char *format, ...)
{
    if (verdict->reason_count >= VERDICT_MAX_REASONS)
        return;
    va_list args;
    va_start(args, format);
    vsnprintf(verdict->reasons[verdict->reason_count++], VERDICT_REASON_BYTES, format, args);
    va_end(args);
}

/* Appends up to a few row numbers ("rows 3, 17, 40, ...") to text. */
static void list_rows(char *text, size_t size, const uint32_t *rows, uint32_t count)
{
    size_t used = strlen(text);
    for (uint32_t i = 0; i < count && i < 8 && used + 16 < size; i++)
        used += (size_t)snprintf(text + used, size - used, "%s%u", i ? ", " : "", rows[i]);
    if (count > 8 && used + 8 < size)
        snprintf(text + used, size - used, ", ...");
}

/* Judges the violations of one tally (eager reps or graph replays) against rule. Returns the
 * number of failing reasons it added. */
static unsigned judge_violations(const struct verdict_rule *rule, const struct backend_result *result,
                                 const struct output_tally *tally, const struct census_row *census_rows,
                                 const char *label, struct verdict_result *verdict)
{
    const struct staging_model *staging = staging_model_for(result->backend->name);
    const bool can_forgive = staging && staging->drops_on_overflow && !result->backend->exact_set &&
                             census_rows != NULL;
    unsigned failures = 0;
    uint32_t *unforgiven = NULL;
    for (unsigned kind = 0; kind < (unsigned)CHECK_KIND_COUNT; kind++) {
        const struct violation_tally *v = &tally->violations[kind];
        if (v->total_rows == 0 || !(rule->forbidden & KIND_BIT(kind)))
            continue;
        if (!(can_forgive && (rule->forgiven_on_overflow & KIND_BIT(kind)))) {
            verdict_reason(verdict,
                           "%s%s on %llu row(s) in total over %u rep(s), at most %llu in one rep",
                           label, report_violation_name(kind), (unsigned long long)v->total_rows,
                           tally->reps, (unsigned long long)v->max_rows_per_rep);
            failures++;
            continue;
        }
        /* Forgiven only on rows the census predicts to overflow the staging buffer. */
        if (!unforgiven)
            unforgiven = malloc((tally->rows ? tally->rows : 1) * sizeof(uint32_t));
        uint32_t forgiven_rows = 0, unforgiven_rows = 0;
        for (uint32_t b = 0; b < tally->rows; b++) {
            if (!(tally->row_flags[b] & KIND_BIT(kind)))
                continue;
            if (staging_predicts_overflow(staging, &census_rows[b]))
                forgiven_rows++;
            else if (unforgiven)
                unforgiven[unforgiven_rows++] = b;
            else
                unforgiven_rows++;
        }
        if (unforgiven_rows > 0) {
            char text[VERDICT_REASON_BYTES];
            snprintf(text, sizeof(text),
                     "%s%s on %u row(s) the census does not predict to overflow the %s staging: ",
                     label, report_violation_name(kind), unforgiven_rows, staging->name);
            if (unforgiven)
                list_rows(text, sizeof(text), unforgiven, unforgiven_rows);
            verdict_reason(verdict, "%s", text);
            failures++;
        }
        if (forgiven_rows > 0)
            verdict_reason(verdict,
                           "note: %s%s on %u row(s) forgiven: the census predicts them to overflow "
                           "the %s staging (documented failure mode)",
                           label, report_violation_name(kind), forgiven_rows, staging->name);
    }
    free(unforgiven);
    return failures;
}

void report_verdict(const struct backend_result *result, const struct census_row *census_rows,
                    struct verdict_result *verdict)
{
    memset(verdict, 0, sizeof(*verdict));
    const struct topk_backend *backend = result->backend;
    const char *level = topk_determinism_name(backend->level);
    switch (result->status) {
    case BACKEND_UNSUPPORTED:
    case BACKEND_UNAVAILABLE:
    case BACKEND_SKIPPED:
        verdict->verdict = VERDICT_NOT_RUN;
        verdict_reason(verdict, "%s: %s", backend_status_name(result->status), result->reason);
        return;
    case BACKEND_ERROR:
    case BACKEND_HANG:
    case BACKEND_CRASH:
    case BACKEND_CUDA_ERROR:
        verdict->verdict = VERDICT_FAIL;
        verdict_reason(verdict, "%s: %s", backend_status_name(result->status), result->reason);
        return;
    case BACKEND_OK:
        break;
    }

    const struct verdict_rule *rule = verdict_rule_for(backend->level);
    const struct output_tally *eager = &result->eager;
    unsigned failures = 0;
    if (eager->reps == 0) {
        verdict_reason(verdict, "no rep completed");
        failures++;
    }
    if (rule->equal_reference && eager->equals_reference_reps != eager->reps) {
        verdict_reason(verdict, "output differs from the CPU reference in %u of %u rep(s) (claims %s)",
                       eager->reps - eager->equals_reference_reps, eager->reps, level);
        failures++;
    }
    if (rule->single_output && eager->distinct_outputs > 1) {
        verdict_reason(verdict, "%u distinct outputs over %u reps, %u distinct sets (claims %s: one)",
                       eager->distinct_outputs, eager->reps, eager->distinct_sets, level);
        failures++;
    }
    failures += judge_violations(rule, result, eager, census_rows, "", verdict);

    if (result->graph_requested) {
        const struct output_tally *graph = &result->graph;
        if (result->graph_error[0]) {
            /* Every backend promises a graph-capturable launch (kernels/topk_backends.h). */
            verdict_reason(verdict, "graph: %s", result->graph_error);
            failures++;
        }
        if (result->graph_ran) {
            failures += judge_violations(rule, result, graph, census_rows, "graph: ", verdict);
            if (rule->equal_reference && graph->equals_reference_reps != graph->reps) {
                verdict_reason(verdict, "graph: output differs from the CPU reference in %u of %u "
                                        "replay(s)",
                               graph->reps - graph->equals_reference_reps, graph->reps);
                failures++;
            }
            const struct violation_tally *mismatch = &graph->violations[REPORT_GRAPH_MISMATCH];
            if (rule->graph_equals_eager && mismatch->total_rows > 0) {
                verdict_reason(verdict, "graph_mismatch: graph replays differ from the eager "
                                        "output on %u row(s), at most %llu in one replay (claims %s)",
                               output_tally_flapping_rows(graph),
                               (unsigned long long)mismatch->max_rows_per_rep, level);
                failures++;
            }
        }
    }
    if (result->batch_requested) {
        const struct batch_invariance_result *batch = &result->batch;
        if (batch->error[0]) {
            verdict_reason(verdict, "batch invariance: %s", batch->error);
            failures++;
        }
        if (batch->ran && rule->batch_invariant && batch->dependent_count > 0) {
            verdict_reason(verdict, "batch invariance: %u row(s) change with the batch they are "
                                    "in (claims %s)",
                           batch->dependent_count, level);
            failures++;
        }
    }
    verdict->verdict = failures ? VERDICT_FAIL : VERDICT_PASS;
}

/* ---- JSON ----------------------------------------------------------------------------------- */

static void add_hex_hash(cJSON *object, const char *name, const uint8_t hash[HASH_BYTES])
{
    char hex[HASH_HEX_BYTES];
    hash_to_hex(hash, hex);
    cJSON_AddStringToObject(object, name, hex);
}

static void add_string_or_null(cJSON *object, const char *name, const char *text)
{
    if (text && text[0])
        cJSON_AddStringToObject(object, name, text);
    else
        cJSON_AddNullToObject(object, name);
}

static uint32_t source_row(const struct record_result *record, uint32_t row)
{
    return record->source_rows ? record->source_rows[row] : row;
}

static cJSON *device_json(const struct gpu_device_info *device)
{
    cJSON *json = cJSON_CreateObject();
    char text[32];
    if (!json)
        return NULL;
    cJSON_AddNumberToObject(json, "ordinal", device->ordinal);
    cJSON_AddStringToObject(json, "name", device->name);
    snprintf(text, sizeof(text), "%d.%d", device->cc_major, device->cc_minor);
    cJSON_AddStringToObject(json, "compute_capability", text);
    cJSON_AddNumberToObject(json, "sm_count", device->sm_count);
    json_add_u64(json, "smem_per_sm_bytes", device->smem_per_sm);
    json_add_u64(json, "smem_per_block_optin_bytes", device->smem_per_block_optin);
    json_add_u64(json, "reported_smem_per_sm_bytes", device->reported_smem_per_sm);
    cJSON_AddBoolToObject(json, "smem_emulated", device->smem_emulated);
    json_add_u64(json, "l2_bytes", device->l2_bytes);
    json_add_u64(json, "global_memory_bytes", device->global_memory_bytes);
    /* CUDA encodes versions as 1000 * major + 10 * minor. */
    snprintf(text, sizeof(text), "%d.%d", device->driver_version / 1000,
             (device->driver_version % 1000) / 10);
    cJSON_AddStringToObject(json, "driver_version", text);
    snprintf(text, sizeof(text), "%d.%d", device->runtime_version / 1000,
             (device->runtime_version % 1000) / 10);
    cJSON_AddStringToObject(json, "runtime_version", text);
    cJSON_AddNumberToObject(json, "driver_version_number", device->driver_version);
    cJSON_AddNumberToObject(json, "runtime_version_number", device->runtime_version);
    return json;
}

static cJSON *context_json(const struct run_context *context)
{
    cJSON *json = cJSON_CreateObject();
    if (!json)
        return NULL;
    add_string_or_null(json, "tool_version", context->tool_version);
    add_string_or_null(json, "git_revision", context->git_revision);
    add_string_or_null(json, "version_string", context->version_string);
    add_string_or_null(json, "command_line", context->command_line);
    add_string_or_null(json, "utc_time", context->utc_time);
    add_string_or_null(json, "host", context->host);
    if (context->device_available) {
        cJSON_AddItemToObject(json, "device", device_json(&context->device));
        cJSON_AddNullToObject(json, "device_unavailable_reason");
    } else {
        cJSON_AddNullToObject(json, "device");
        add_string_or_null(json, "device_unavailable_reason", context->device_unavailable_reason);
    }
    cJSON *emulation = cJSON_AddObjectToObject(json, "emulation");
    if (emulation) {
        if (context->emulate_smem_per_sm)
            json_add_u64(emulation, "smem_per_sm_bytes", context->emulate_smem_per_sm);
        else
            cJSON_AddNullToObject(emulation, "smem_per_sm_bytes");
    }
    add_string_or_null(json, "noise", context->noise);
    json_add_u64(json, "reps", context->reps);
    json_add_u64(json, "seed", context->seed);
    cJSON_AddBoolToObject(json, "graph", context->graph);
    cJSON_AddBoolToObject(json, "batch_invariance", context->batch_invariance);
    cJSON_AddBoolToObject(json, "gpu_prefilter", context->gpu_prefilter);
    if (context->k_override)
        json_add_u64(json, "k_override", context->k_override);
    else
        cJSON_AddNullToObject(json, "k_override");
    cJSON *backends = cJSON_AddArrayToObject(json, "backends");
    for (size_t i = 0; backends && i < context->backend_count; i++)
        cJSON_AddItemToArray(backends, cJSON_CreateString(context->backends[i]));
    return json;
}

void run_context_fill_time_and_host(struct run_context *context)
{
    time_t now = time(NULL);
    struct tm utc;
    if (gmtime_r(&now, &utc))
        strftime(context->utc_time, sizeof(context->utc_time), "%Y-%m-%dT%H:%M:%SZ", &utc);
    else
        snprintf(context->utc_time, sizeof(context->utc_time), "unknown");
    if (gethostname(context->host, sizeof(context->host)) != 0)
        snprintf(context->host, sizeof(context->host), "unknown");
    context->host[sizeof(context->host) - 1] = '\0';
}

static cJSON *violations_json(const struct output_tally *tally, bool with_graph_mismatch)
{
    cJSON *json = cJSON_CreateObject();
    unsigned kinds = with_graph_mismatch ? REPORT_VIOLATION_KINDS : (unsigned)CHECK_KIND_COUNT;
    for (unsigned kind = 0; json && kind < kinds; kind++) {
        cJSON *entry = cJSON_AddObjectToObject(json, report_violation_name(kind));
        if (!entry)
            continue;
        json_add_u64(entry, "total_rows", tally->violations[kind].total_rows);
        json_add_u64(entry, "max_rows_per_rep", tally->violations[kind].max_rows_per_rep);
        uint64_t rows = 0;
        if (kind < (unsigned)CHECK_KIND_COUNT) {
            for (uint32_t b = 0; b < tally->rows; b++)
                rows += (tally->row_flags[b] >> kind) & 1u;
        } else {
            rows = output_tally_flapping_rows(tally);
        }
        json_add_u64(entry, "rows", rows);
    }
    return json;
}

static cJSON *hash_list_json(const uint8_t (*hashes)[HASH_BYTES], uint32_t count)
{
    cJSON *json = cJSON_CreateArray();
    for (uint32_t i = 0; json && i < count; i++) {
        char hex[HASH_HEX_BYTES];
        hash_to_hex(hashes[i], hex);
        cJSON_AddItemToArray(json, cJSON_CreateString(hex));
    }
    return json;
}

static cJSON *flapping_json(const struct record_result *record, const struct output_tally *tally)
{
    cJSON *json = cJSON_CreateArray();
    uint32_t listed = 0;
    for (uint32_t b = 0; json && b < tally->rows && listed < REPORT_MAX_LISTED_ROWS; b++) {
        if (!tally->row_reps_differing[b])
            continue;
        cJSON *row = cJSON_CreateObject();
        if (!row)
            break;
        json_add_u64(row, "row", source_row(record, b));
        json_add_u64(row, "reps_differing", tally->row_reps_differing[b]);
        json_add_u64(row, "reps_set_differing", tally->row_reps_set_differing[b]);
        json_add_u64(row, "max_indices_differing", tally->row_max_indices_differing[b]);
        json_add_u64(row, "max_positions_differing", tally->row_max_positions_differing[b]);
        cJSON_AddItemToArray(json, row);
        listed++;
    }
    return json;
}

static void add_time_json(cJSON *object, const char *name, const struct output_tally *tally)
{
    double median, min, max;
    output_tally_times(tally, &median, &min, &max);
    cJSON *json = cJSON_AddObjectToObject(object, name);
    if (!json)
        return;
    json_add_number(json, "median", median);
    json_add_number(json, "min", min);
    json_add_number(json, "max", max);
}

/* The measurement fields shared by the eager reps and the graph replays. */
static void add_tally_json(cJSON *json, const struct record_result *record,
                           const struct output_tally *tally, bool with_graph_mismatch)
{
    json_add_u64(json, "reps", tally->reps);
    cJSON_AddItemToObject(json, "output_sha256_per_rep", hash_list_json(tally->rep_hash, tally->reps));
    cJSON_AddItemToObject(json, "set_sha256_per_rep", hash_list_json(tally->rep_set_hash, tally->reps));
    json_add_u64(json, "distinct_outputs", tally->distinct_outputs);
    json_add_u64(json, "distinct_sets", tally->distinct_sets);
    json_add_u64(json, "equals_reference_reps", tally->equals_reference_reps);
    cJSON_AddItemToObject(json, "violations", violations_json(tally, with_graph_mismatch));
    json_add_u64(json, "flapping_rows_total", output_tally_flapping_rows(tally));
    json_add_u64(json, "set_flapping_rows_total", output_tally_set_flapping_rows(tally));
    cJSON_AddItemToObject(json, "flapping_rows", flapping_json(record, tally));
    add_time_json(json, "kernel_time_us", tally);
}

/* Row sets the census predicts next to what the reps showed (docs/REPORT.md). */
static cJSON *predicted_vs_observed_json(const struct record_result *record,
                                         const struct backend_result *result)
{
    const struct output_tally *eager = &result->eager;
    const struct staging_model *staging = staging_model_for(result->backend->name);
    const uint32_t rows = record->record ? record->record->rows : 0;
    const uint32_t wrong_bits = KIND_BIT(CHECK_WRONG_SET) | KIND_BIT(CHECK_SHORT);
    uint64_t underdetermined = 0, overflow = 0, flapping = 0, set_flapping = 0, wrong = 0;
    uint64_t set_flapping_and_under = 0, set_flapping_not_under = 0, under_not_flapping = 0;
    uint64_t unexplained_flapping = 0, wrong_and_overflow = 0, wrong_not_overflow = 0;
    uint64_t overflow_not_wrong = 0;
    cJSON *json = cJSON_CreateObject();
    if (!json)
        return NULL;
    cJSON *unexplained_list = cJSON_CreateArray();
    cJSON *unpredicted_wrong_list = cJSON_CreateArray();
    for (uint32_t b = 0; b < rows && record->census_rows; b++) {
        const struct census_row *census = &record->census_rows[b];
        bool under = census->underdetermined;
        bool predicted = staging_predicts_overflow(staging, census);
        bool flapped = eager->row_reps_differing && eager->row_reps_differing[b] > 0;
        bool set_flapped = eager->row_reps_set_differing && eager->row_reps_set_differing[b] > 0;
        bool was_wrong = eager->row_flags && (eager->row_flags[b] & wrong_bits);
        underdetermined += under;
        overflow += predicted;
        flapping += flapped;
        set_flapping += set_flapped;
        wrong += was_wrong;
        set_flapping_and_under += set_flapped && under;
        set_flapping_not_under += set_flapped && !under;
        under_not_flapping += under && !set_flapped;
        wrong_and_overflow += was_wrong && predicted;
        wrong_not_overflow += was_wrong && !predicted;
        overflow_not_wrong += predicted && !was_wrong;
        if (set_flapped && !under && !predicted) {
            unexplained_flapping++;
            if (unexplained_list && unexplained_flapping <= REPORT_MAX_LISTED_ROWS)
                cJSON_AddItemToArray(unexplained_list,
                                     cJSON_CreateNumber(source_row(record, b)));
        }
        if (was_wrong && !predicted && unpredicted_wrong_list &&
            wrong_not_overflow <= REPORT_MAX_LISTED_ROWS)
            cJSON_AddItemToArray(unpredicted_wrong_list,
                                 cJSON_CreateNumber(source_row(record, b)));
    }
    add_string_or_null(json, "staging_model", staging ? staging->name : NULL);
    if (staging) {
        json_add_u64(json, "staging_capacity", staging->capacity);
        cJSON_AddBoolToObject(json, "drops_on_overflow", staging->drops_on_overflow);
    } else {
        cJSON_AddNullToObject(json, "staging_capacity");
        cJSON_AddNullToObject(json, "drops_on_overflow");
    }
    json_add_u64(json, "rows", rows);
    json_add_u64(json, "underdetermined_rows", underdetermined);
    json_add_u64(json, "predicted_overflow_rows", overflow);
    json_add_u64(json, "flapping_rows", flapping);
    json_add_u64(json, "set_flapping_rows", set_flapping);
    json_add_u64(json, "wrong_rows", wrong);
    json_add_u64(json, "set_flapping_and_underdetermined", set_flapping_and_under);
    json_add_u64(json, "set_flapping_not_underdetermined", set_flapping_not_under);
    json_add_u64(json, "underdetermined_not_set_flapping", under_not_flapping);
    json_add_u64(json, "set_flapping_unexplained", unexplained_flapping);
    json_add_u64(json, "wrong_and_predicted_overflow", wrong_and_overflow);
    json_add_u64(json, "wrong_not_predicted_overflow", wrong_not_overflow);
    json_add_u64(json, "predicted_overflow_not_wrong", overflow_not_wrong);
    cJSON_AddItemToObject(json, "set_flapping_unexplained_list", unexplained_list);
    cJSON_AddItemToObject(json, "wrong_not_predicted_overflow_list", unpredicted_wrong_list);
    return json;
}

static cJSON *batch_json(const struct record_result *record, const struct batch_invariance_result *batch)
{
    cJSON *json = cJSON_CreateObject();
    if (!json)
        return NULL;
    cJSON_AddBoolToObject(json, "ran", batch->ran);
    add_string_or_null(json, "error", batch->error);
    json_add_u64(json, "trials", batch->trials);
    json_add_u64(json, "contexts_per_row", batch->contexts);
    json_add_u64(json, "rows_tested", batch->rows_tested);
    json_add_u64(json, "launches", batch->launches);
    json_add_u64(json, "dependent_rows_total", batch->dependent_count);
    json_add_u64(json, "set_dependent_rows_total", batch->set_dependent_count);
    cJSON *rows = cJSON_AddArrayToObject(json, "dependent_rows");
    for (uint32_t i = 0; rows && i < batch->dependent_count && i < REPORT_MAX_LISTED_ROWS; i++) {
        cJSON *row = cJSON_CreateObject();
        if (!row)
            break;
        json_add_u64(row, "row", source_row(record, batch->dependent[i].row));
        json_add_u64(row, "contexts_differing", batch->dependent[i].contexts_differing);
        json_add_u64(row, "contexts_set_differing", batch->dependent[i].contexts_set_differing);
        cJSON_AddItemToArray(rows, row);
    }
    return json;
}

/* Reps whose output equals the tally's baseline (for graph replays: the first eager output). */
static uint32_t reps_equal_to_baseline(const struct output_tally *tally)
{
    uint32_t count = 0;
    for (uint32_t rep = 0; rep < tally->reps; rep++)
        count += tally->rep_rows_differing[rep] == 0;
    return count;
}

static cJSON *backend_json(const struct record_result *record, const struct backend_result *result,
                           const struct verdict_result *verdict)
{
    const struct topk_backend *backend = result->backend;
    cJSON *json = cJSON_CreateObject();
    if (!json)
        return NULL;
    cJSON_AddStringToObject(json, "name", backend->name);
    cJSON_AddStringToObject(json, "level", topk_determinism_name(backend->level));
    cJSON *claims = cJSON_AddObjectToObject(json, "claims");
    if (claims) {
        cJSON_AddBoolToObject(claims, "exact_set", backend->exact_set);
        cJSON_AddBoolToObject(claims, "smallest_index_ties", backend->smallest_index_ties);
        cJSON_AddBoolToObject(claims, "canonical_order", backend->canonical_order);
        cJSON_AddBoolToObject(claims, "index_ascending", backend->index_ascending);
    }
    cJSON_AddStringToObject(json, "status", backend_status_name(result->status));
    add_string_or_null(json, "reason", result->reason);
    cJSON_AddStringToObject(json, "verdict", verdict_name(verdict->verdict));
    cJSON *reasons = cJSON_AddArrayToObject(json, "verdict_reasons");
    for (unsigned i = 0; reasons && i < verdict->reason_count; i++)
        cJSON_AddItemToArray(reasons, cJSON_CreateString(verdict->reasons[i]));
    json_add_u64(json, "scratch_bytes", result->scratch_bytes);
    struct time_breakdown time;
    backend_result_time_breakdown(result, &time);
    cJSON_AddItemToObject(json, "time_breakdown_ms", time_breakdown_json(&time));
    cJSON *work = cJSON_AddObjectToObject(json, "host_work");
    if (work) {
        const struct output_tally *eager = &result->eager, *graph = &result->graph;
        cJSON_AddBoolToObject(work, "gpu_prefilter", result->gpu_prefilter);
        json_add_u64(work, "reps_matched_on_gpu",
                     (uint64_t)eager->gpu_hash_matches + graph->gpu_hash_matches);
        json_add_u64(work, "outputs_copied", result->outputs_copied);
        json_add_u64(work, "outputs_hashed",
                     (uint64_t)eager->outputs_hashed + graph->outputs_hashed);
        json_add_u64(work, "outputs_checked",
                     (uint64_t)eager->outputs_checked + graph->outputs_checked);
        cJSON_AddBoolToObject(work, "beside_reps", eager->beside_reps || graph->beside_reps);
        json_add_number(work, "hash_ms", round_ms(eager->hash_ms + graph->hash_ms));
        json_add_number(work, "check_ms", round_ms(eager->check_ms + graph->check_ms));
    }
    add_tally_json(json, record, &result->eager, false);
    cJSON_AddItemToObject(json, "predicted_vs_observed", predicted_vs_observed_json(record, result));
    if (result->graph_requested) {
        cJSON *graph = cJSON_AddObjectToObject(json, "graph");
        if (graph) {
            cJSON_AddBoolToObject(graph, "ran", result->graph_ran);
            add_string_or_null(graph, "error", result->graph_error);
            add_tally_json(graph, record, &result->graph, true);
            json_add_u64(graph, "equals_eager_reps", reps_equal_to_baseline(&result->graph));
        }
    }
    if (result->batch_requested)
        cJSON_AddItemToObject(json, "batch_invariance", batch_json(record, &result->batch));
    return json;
}

static cJSON *record_time_json(const struct record_time *time)
{
    cJSON *json = cJSON_CreateObject();
    if (!json)
        return NULL;
    const double other = time->total_ms - time->reference_ms - time->census_ms - time->backends_ms;
    json_add_number(json, "reference_ms", round_ms(time->reference_ms));
    json_add_number(json, "census_ms", round_ms(time->census_ms));
    json_add_number(json, "backends_ms", round_ms(time->backends_ms));
    json_add_number(json, "other_ms", round_ms(other > 0 ? other : 0));
    json_add_number(json, "total_ms", round_ms(time->total_ms));
    return json;
}

static void record_time_add(struct record_time *sum, const struct record_time *addend)
{
    sum->reference_ms += addend->reference_ms;
    sum->census_ms += addend->census_ms;
    sum->backends_ms += addend->backends_ms;
    sum->total_ms += addend->total_ms;
}

static cJSON *record_flags_json(const struct capture_record *record)
{
    cJSON *json = cJSON_CreateObject();
    if (!json)
        return NULL;
    cJSON_AddBoolToObject(json, "row_starts", record->row_starts != NULL);
    cJSON_AddBoolToObject(json, "page_table", record->page_table != NULL);
    json_add_u64(json, "page_size", record->page_size);
    cJSON_AddBoolToObject(json, "engine_indices", record->engine_indices != NULL);
    cJSON_AddBoolToObject(json, "compressed", record->compressed);
    return json;
}

static int32_t record_max_length(const struct capture_record *record)
{
    int32_t longest = 0;
    for (uint32_t b = 0; b < record->rows; b++)
        if (record->lengths[b] > longest)
            longest = record->lengths[b];
    return longest;
}

cJSON *report_record_json(const struct record_result *record, const struct verdict_result *verdicts)
{
    const struct capture_record *capture = record->record;
    cJSON *json = cJSON_CreateObject();
    if (!json)
        return NULL;
    add_string_or_null(json, "file", record->file);
    json_add_u64(json, "index", capture->index);
    json_add_u64(json, "byte_offset", capture->file_offset);
    json_add_u64(json, "rows", capture->rows);
    if (record->source_rows) {
        cJSON *rows = cJSON_AddArrayToObject(json, "source_rows");
        for (uint32_t b = 0; rows && b < capture->rows; b++)
            cJSON_AddItemToArray(rows, cJSON_CreateNumber(record->source_rows[b]));
    } else {
        cJSON_AddNullToObject(json, "source_rows");
    }
    json_add_u64(json, "k", record->k);
    json_add_u64(json, "record_k", capture->k);
    json_add_u64(json, "row_stride", capture->row_stride);
    json_add_u64(json, "max_length", (uint64_t)record_max_length(capture));
    cJSON_AddItemToObject(json, "flags", record_flags_json(capture));
    cJSON *metadata = capture->metadata_json ? cJSON_Parse(capture->metadata_json) : NULL;
    if (metadata && cJSON_IsObject(metadata)) {
        cJSON_AddItemToObject(json, "metadata", metadata);
    } else {
        /* The reader promises an object; keep the text if it ever is not one. */
        cJSON_Delete(metadata);
        cJSON_AddItemToObject(json, "metadata", cJSON_CreateObject());
        add_string_or_null(json, "metadata_unparsed", capture->metadata_json);
    }
    json_add_hex(json, "payload_sha256", capture->payload_sha256, sizeof(capture->payload_sha256));
    cJSON *reference = cJSON_AddObjectToObject(json, "reference");
    if (reference) {
        add_hex_hash(reference, "output_sha256", record->reference_hash);
        add_hex_hash(reference, "set_sha256", record->reference_set_hash);
    }
    if (record->census)
        cJSON_AddItemToObject(json, "census", cJSON_Duplicate(record->census, 1));
    else
        cJSON_AddNullToObject(json, "census");
    cJSON_AddItemToObject(json, "time_breakdown_ms", record_time_json(&record->time));
    cJSON *backends = cJSON_AddArrayToObject(json, "backends");
    for (size_t i = 0; backends && i < record->backend_count; i++)
        cJSON_AddItemToArray(backends, backend_json(record, &record->backends[i], &verdicts[i]));
    return json;
}

cJSON *report_backend_json(const struct record_result *record, const struct backend_result *result,
                           const struct verdict_result *verdict)
{
    return backend_json(record, result, verdict);
}

cJSON *report_record_json_entries(const struct record_result *record, cJSON **entries,
                                  size_t count)
{
    cJSON *json = report_record_json(record, NULL);
    cJSON *backends = json ? cJSON_GetObjectItemCaseSensitive(json, "backends") : NULL;
    if (!backends) {
        cJSON_Delete(json);
        return NULL;
    }
    for (size_t i = 0; i < count; i++) {
        if (!entries[i] || !cJSON_AddItemToArray(backends, entries[i])) {
            cJSON_Delete(json);
            return NULL;
        }
        entries[i] = NULL;
    }
    return json;
}

int report_begin(struct run_report *report, const struct run_context *context,
                 struct audit_error *err)
{
    memset(report, 0, sizeof(*report));
    report->root = cJSON_CreateObject();
    report->by_backend = cJSON_CreateObject();
    if (!report->root || !report->by_backend)
        goto no_memory;
    cJSON_AddStringToObject(report->root, "schema", REPORT_SCHEMA);
    cJSON_AddNumberToObject(report->root, "schema_version", REPORT_SCHEMA_VERSION);
    /* Stays false unless report_finish says the run completed. */
    cJSON_AddBoolToObject(report->root, "complete", false);
    cJSON_AddNullToObject(report->root, "stop_reason");
    cJSON_AddNullToObject(report->root, "exit_code");
    cJSON *context_object = context_json(context);
    if (!context_object)
        goto no_memory;
    cJSON_AddItemToObject(report->root, "context", context_object);
    report->records = cJSON_AddArrayToObject(report->root, "records");
    report->input_errors = cJSON_AddArrayToObject(report->root, "input_errors");
    if (!report->records || !report->input_errors)
        goto no_memory;
    return AUDIT_OK;
no_memory:
    report_release(report);
    return audit_fail(err, AUDIT_ENOMEM, "out of memory starting the report");
}

static void count_verdict(struct run_report *report, const struct backend_result *result,
                          const struct verdict_result *verdict)
{
    report->runs++;
    report->status_counts[result->status]++;
    const char *key = verdict->verdict == VERDICT_PASS   ? "pass"
                      : verdict->verdict == VERDICT_FAIL ? "fail"
                                                         : "not_run";
    if (verdict->verdict == VERDICT_PASS)
        report->pass++;
    else if (verdict->verdict == VERDICT_FAIL)
        report->fail++;
    else
        report->not_run++;
    cJSON *entry = cJSON_GetObjectItemCaseSensitive(report->by_backend, result->backend->name);
    if (!entry) {
        entry = cJSON_AddObjectToObject(report->by_backend, result->backend->name);
        if (!entry)
            return;
        cJSON_AddNumberToObject(entry, "pass", 0);
        cJSON_AddNumberToObject(entry, "fail", 0);
        cJSON_AddNumberToObject(entry, "not_run", 0);
    }
    cJSON *counter = cJSON_GetObjectItemCaseSensitive(entry, key);
    if (counter)
        cJSON_SetNumberValue(counter, counter->valuedouble + 1);
}

int report_add_record(struct run_report *report, const struct record_result *record,
                      struct verdict_result *verdicts, struct audit_error *err)
{
    int status = AUDIT_OK;
    struct verdict_result *own = NULL;
    if (!verdicts) {
        own = calloc(record->backend_count ? record->backend_count : 1, sizeof(*own));
        if (!own)
            return audit_fail(err, AUDIT_ENOMEM, "out of memory judging %s record %u", record->file,
                              record->record->index);
        verdicts = own;
    }
    for (size_t i = 0; i < record->backend_count; i++) {
        struct time_breakdown time;
        report_verdict(&record->backends[i], record->census_rows, &verdicts[i]);
        count_verdict(report, &record->backends[i], &verdicts[i]);
        backend_result_time_breakdown(&record->backends[i], &time);
        report_count_time(report, record->backends[i].backend->name, &time);
    }
    cJSON *json = report_record_json(record, verdicts);
    if (!json) {
        status = audit_fail(err, AUDIT_ENOMEM, "out of memory reporting %s record %u", record->file,
                            record->record->index);
        goto done;
    }
    cJSON_AddItemToArray(report->records, json);
    report->record_count++;
    record_time_add(&report->record_time_total, &record->time);
done:
    free(own);
    return status;
}

/* count_verdict for an entry built elsewhere. */
static void count_entry(struct run_report *report, const cJSON *entry)
{
    const cJSON *name = cJSON_GetObjectItemCaseSensitive(entry, "name");
    const cJSON *status_json = cJSON_GetObjectItemCaseSensitive(entry, "status");
    const cJSON *verdict_json = cJSON_GetObjectItemCaseSensitive(entry, "verdict");
    struct topk_backend named = { .name = cJSON_IsString(name) ? name->valuestring : "unnamed" };
    struct backend_result result = { .backend = &named, .status = BACKEND_ERROR };
    struct verdict_result verdict = { .verdict = VERDICT_FAIL };
    if (cJSON_IsString(status_json))
        backend_status_parse(status_json->valuestring, &result.status);
    if (cJSON_IsString(verdict_json)) {
        for (int v = VERDICT_PASS; v <= VERDICT_NOT_RUN; v++)
            if (strcmp(verdict_json->valuestring, verdict_name((enum verdict)v)) == 0)
                verdict.verdict = (enum verdict)v;
    }
    count_verdict(report, &result, &verdict);
    struct time_breakdown time;
    time_breakdown_from_json(cJSON_GetObjectItemCaseSensitive(entry, "time_breakdown_ms"), &time);
    report_count_time(report, named.name, &time);
}

void report_count_time(struct run_report *report, const char *backend_name,
                       const struct time_breakdown *time)
{
    time_breakdown_add(&report->time_total, time);
    for (size_t i = 0; i < report->time_backend_count; i++) {
        if (strcmp(report->time_by_backend[i].name, backend_name) == 0) {
            time_breakdown_add(&report->time_by_backend[i].time, time);
            return;
        }
    }
    if (report->time_backend_count == REPORT_TIME_BACKENDS)
        return;
    struct backend_time_total *added = &report->time_by_backend[report->time_backend_count++];
    snprintf(added->name, sizeof(added->name), "%s", backend_name);
    added->time = *time;
}

int report_add_record_entries(struct run_report *report, const struct record_result *record,
                              cJSON **entries, size_t count, struct audit_error *err)
{
    for (size_t i = 0; i < count; i++)
        if (entries[i])
            count_entry(report, entries[i]);
    cJSON *json = report_record_json_entries(record, entries, count);
    if (!json)
        return audit_fail(err, AUDIT_ENOMEM, "out of memory reporting %s record %u", record->file,
                          record->record->index);
    cJSON_AddItemToArray(report->records, json);
    report->record_count++;
    record_time_add(&report->record_time_total, &record->time);
    return AUDIT_OK;
}

int report_add_input_error(struct run_report *report, const char *file, int64_t record,
                           int64_t byte_offset, const char *kind, const char *message,
                           struct audit_error *err)
{
    cJSON *json = cJSON_CreateObject();
    if (!json)
        return audit_fail(err, AUDIT_ENOMEM, "out of memory reporting an input error");
    add_string_or_null(json, "file", file);
    if (record >= 0)
        json_add_u64(json, "record", (uint64_t)record);
    else
        cJSON_AddNullToObject(json, "record");
    if (byte_offset >= 0)
        json_add_u64(json, "byte_offset", (uint64_t)byte_offset);
    else
        cJSON_AddNullToObject(json, "byte_offset");
    add_string_or_null(json, "kind", kind);
    add_string_or_null(json, "message", message);
    cJSON_AddItemToArray(report->input_errors, json);
    return AUDIT_OK;
}

int report_finish(struct run_report *report, bool complete, const char *stop_reason,
                  int exit_code, struct audit_error *err)
{
    cJSON *root = report->root;
    cJSON_ReplaceItemInObjectCaseSensitive(root, "complete", cJSON_CreateBool(complete));
    cJSON_ReplaceItemInObjectCaseSensitive(root, "stop_reason",
                                           stop_reason && stop_reason[0]
                                               ? cJSON_CreateString(stop_reason)
                                               : cJSON_CreateNull());
    cJSON_ReplaceItemInObjectCaseSensitive(root, "exit_code", cJSON_CreateNumber(exit_code));
    cJSON_DeleteItemFromObjectCaseSensitive(root, "summary");
    cJSON *summary = cJSON_AddObjectToObject(root, "summary");
    if (!summary)
        return audit_fail(err, AUDIT_ENOMEM, "out of memory writing the report summary");
    json_add_u64(summary, "records", report->record_count);
    json_add_u64(summary, "backend_runs", report->runs);
    json_add_u64(summary, "backends_pass", report->pass);
    json_add_u64(summary, "backends_fail", report->fail);
    json_add_u64(summary, "backends_not_run", report->not_run);
    cJSON *statuses = cJSON_AddObjectToObject(summary, "status");
    for (int s = BACKEND_OK; statuses && s < BACKEND_STATUS_COUNT; s++)
        json_add_u64(statuses, backend_status_name((enum backend_status)s), report->status_counts[s]);
    json_add_u64(summary, "input_errors", (uint64_t)cJSON_GetArraySize(report->input_errors));
    cJSON_AddItemToObject(summary, "by_backend", cJSON_Duplicate(report->by_backend, 1));
    return AUDIT_OK;
}

void report_release(struct run_report *report)
{
    cJSON_Delete(report->root);
    cJSON_Delete(report->by_backend);
    memset(report, 0, sizeof(*report));
}

/* ---- terminal table (nccl-tests style: one line per record x backend) ---------------------- */

void report_table_header(FILE *out)
{
    fprintf(out, "# %-28s %16s %6s  %-13s %-14s %-11s %7s %6s %7s %6s %8s %10s  %s\n", "record",
            "rows x L", "k", "backend", "level", "status", "outputs", "sets", "#wrong", "#viol",
            "flapping", "median_us", "verdict");
}

static const char *base_name(const char *path)
{
    const char *slash = path ? strrchr(path, '/') : NULL;
    return slash ? slash + 1 : (path ? path : "");
}

/* The line of a backend that replayed: #wrong counts rows with a wrong set in any rep (eager or
 * graph), #viol rows with any other violation; rows, not row-reps. */
static void print_measured_line(FILE *out, const char *where, const char *shape, uint32_t k,
                                const struct backend_result *result, const char *verdict)
{
    const struct output_tally *eager = &result->eager;
    uint32_t wrong = 0, other = 0;
    const uint32_t wrong_bit = KIND_BIT(CHECK_WRONG_SET);
    for (uint32_t b = 0; b < eager->rows; b++) {
        uint32_t flags = eager->row_flags[b];
        if (result->graph_ran)
            flags |= result->graph.row_flags[b];
        wrong += (flags & wrong_bit) != 0;
        other += (flags & ~wrong_bit) != 0;
    }
    double median, min, max;
    char time_text[24];
    if (output_tally_times(eager, &median, &min, &max))
        snprintf(time_text, sizeof(time_text), "%.2f", median);
    else
        snprintf(time_text, sizeof(time_text), "-");
    fprintf(out, "  %-28s %16s %6u  %-13s %-14s %-11s %7u %6u %7u %6u %8u %10s  %s\n", where,
            shape, k, result->backend->name, topk_determinism_name(result->backend->level),
            backend_status_name(result->status), eager->distinct_outputs, eager->distinct_sets,
            wrong, other, output_tally_flapping_rows(eager), time_text, verdict);
}

void report_table_lines(FILE *out, const struct record_result *record,
                        const struct verdict_result *verdicts)
{
    const struct capture_record *capture = record->record;
    char where[64], shape[40];
    snprintf(where, sizeof(where), "%s:%u", base_name(record->file), capture->index);
    snprintf(shape, sizeof(shape), "%u x %d", capture->rows, record_max_length(capture));
    for (size_t i = 0; i < record->backend_count; i++) {
        const struct backend_result *result = &record->backends[i];
        const struct output_tally *eager = &result->eager;
        const char *verdict = verdict_name(verdicts[i].verdict);
        if (result->status != BACKEND_OK || eager->reps == 0) {
            fprintf(out, "  %-28s %16s %6u  %-13s %-14s %-11s %7s %6s %7s %6s %8s %10s  %s\n",
                    where, shape, record->k, result->backend->name,
                    topk_determinism_name(result->backend->level),
                    backend_status_name(result->status), "-", "-", "-", "-", "-", "-", verdict);
        } else {
            print_measured_line(out, where, shape, record->k, result, verdict);
        }
        if (verdicts[i].verdict == VERDICT_FAIL)
            for (unsigned r = 0; r < verdicts[i].reason_count; r++)
                fprintf(out, "  %-28s   %s\n", "", verdicts[i].reasons[r]);
    }
}

void report_table_summary(FILE *out, const struct run_report *report, const char *report_path)
{
    fprintf(out,
            "# %llu record(s), %llu backend run(s): %llu pass, %llu fail, %llu not run "
            "(%llu unsupported, %llu unavailable, %llu skipped); %d input error(s)\n",
            (unsigned long long)report->record_count, (unsigned long long)report->runs,
            (unsigned long long)report->pass, (unsigned long long)report->fail,
            (unsigned long long)report->not_run,
            (unsigned long long)report->status_counts[BACKEND_UNSUPPORTED],
            (unsigned long long)report->status_counts[BACKEND_UNAVAILABLE],
            (unsigned long long)report->status_counts[BACKEND_SKIPPED],
            cJSON_GetArraySize(report->input_errors));
    const uint64_t faults = report->status_counts[BACKEND_HANG] +
                            report->status_counts[BACKEND_CRASH] +
                            report->status_counts[BACKEND_CUDA_ERROR];
    if (faults)
        fprintf(out, "# contained faults: %llu hang, %llu crash, %llu cuda_error (each killed or "
                     "lost its worker process; the audit went on)\n",
                (unsigned long long)report->status_counts[BACKEND_HANG],
                (unsigned long long)report->status_counts[BACKEND_CRASH],
                (unsigned long long)report->status_counts[BACKEND_CUDA_ERROR]);
    const struct record_time *records = &report->record_time_total;
    if (records->total_ms > 0) {
        const double other =
            records->total_ms - records->reference_ms - records->census_ms - records->backends_ms;
        fprintf(out, "# time records: %.1f ms = cpu reference %.1f + census %.1f + backend "
                     "workers %.1f + other %.1f\n",
                records->total_ms, records->reference_ms, records->census_ms,
                records->backends_ms, other > 0 ? other : 0.0);
    }
    if (report->time_total.total_ms > 0) {
        report_time_line(out, "all backends", &report->time_total);
        for (size_t i = 0; i < report->time_backend_count; i++)
            if (report->time_by_backend[i].time.total_ms > 0)
                report_time_line(out, report->time_by_backend[i].name,
                                 &report->time_by_backend[i].time);
    }
    if (report_path)
        fprintf(out, "# report: %s\n", report_path);
}

void report_time_line(FILE *out, const char *label, const struct time_breakdown *time)
{
    const double total = time->total_ms;
    const double other = time_breakdown_other_ms(time);
    fprintf(out, "# time %s: %.1f ms =", label, total);
    for (size_t part = 0; part < TIME_PART_COUNT; part++) {
        const double value = time_part_value(time, part);
        if (value > 0)
            fprintf(out, " %s %.1f (%.1f%%) +", time_parts[part].table_name, value,
                    total > 0 ? 100.0 * value / total : 0.0);
    }
    fprintf(out, " other %.1f (%.1f%%)\n", other, total > 0 ? 100.0 * other / total : 0.0);
}
