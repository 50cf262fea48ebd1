/* The output tally (output_tally.h): what replay accumulates per record x backend, and the
 * host work of each new distinct output, spread over a few threads. */
#include "output_tally.h"

#include <math.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "host_threads.h"
#include "index_sort.h"
#include "time_breakdown.h"

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
        struct violation_tally *mismatch = &tally->violations[VIOLATION_GRAPH_MISMATCH];
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
