/* Host cost of one distinct output in `run` (docs/PERF.md "The audit itself"). Run by
 * `meson test --benchmark`, or directly:
 *   bench_host_check [RUNS [REPS]]
 * Builds the record of the measurement in docs/PERF.md with the library (synth relu, 64 rows x
 * 131072 scores, k = 2048, seed 1), prepares the checks (the reference), then makes REPS outputs
 * (default 25) the way a non-deterministic kernel does: each row is the reference row in a
 * seeded arrival order (every rep differs, the set stays the reference's), and in every fifth
 * rep a few rows lose their last candidate to the first one left out (a wrong set, as when a
 * staging buffer clips). Each output goes through output_tally_add_hashed exactly as
 * src/replay/replay.c feeds it (the GPU pre-filter's row hashes given, no page table, the claims of
 * radix), so its SHA-256, set hash, checks and baseline comparison are the code path `run` times
 * as hash_ms and check_ms.
 *
 * Prints, per distinct output, the median over RUNS (default 5) of: the tally's hash_ms and
 * check_ms, the whole call, and the parts alone, one after the other on one thread
 * (hash_indices, hash_index_sets, checks_output). The tally runs its parts on the threads
 * host_threads_count gives (DSATOPK_HOST_THREADS=1: one after the other, as before).
 * Then the SHA-256 throughput of hash_indices (one digest of each 512 KiB output) in MB/s.
 * The last line is a SHA-256 of everything the tally recorded (per-rep hashes, set hashes,
 * counts, per-row flags and flapping arrays): it must not change when the code gets faster. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <sodium.h>

#include "bench_util.h"
#include "capture.h"
#include "checks.h"
#include "error.h"
#include "hash.h"
#include "host_threads.h"
#include "reference.h"
#include "report.h"
#include "synth.h"

#define BENCH_ROWS 64u
#define BENCH_LENGTH 131072u
#define BENCH_K 2048u

static double now_ms(void)
{
    struct timespec now;
    clock_gettime(CLOCK_MONOTONIC, &now);
    return (double)now.tv_sec * 1e3 + (double)now.tv_nsec * 1e-6;
}

/* The outputs of REPS reps: row b of rep r is the reference row in an arrival order drawn from
 * (r, b); in reps 4, 9, ... every sixteenth row has its last selected candidate replaced by the
 * best candidate the reference left out. */
static void make_outputs(const struct capture_record *record, const int32_t *reference,
                         uint32_t reps, int32_t *outputs)
{
    const size_t count = (size_t)BENCH_ROWS * BENCH_K;
    struct topk_scratch scratch = { 0 };
    int32_t *next_ranked = malloc((BENCH_K + 1) * sizeof(int32_t));
    for (uint32_t rep = 0; rep < reps; rep++) {
        int32_t *out = outputs + rep * count;
        memcpy(out, reference, count * sizeof(int32_t));
        for (uint32_t b = 0; b < BENCH_ROWS; b++) {
            int32_t *row = out + (size_t)b * BENCH_K;
            struct synth_rng rng;
            synth_rng_seed(&rng, ((uint64_t)rep << 32) | b);
            for (uint32_t i = BENCH_K; i > 1; i--) { /* Fisher-Yates */
                uint32_t j = (uint32_t)(synth_rng_next(&rng) % i);
                int32_t swap = row[i - 1];
                row[i - 1] = row[j];
                row[j] = swap;
            }
            if (rep % 5 == 4 && b % 16 == 0 && next_ranked &&
                topk_reference_row(capture_row_window(record, b), record->lengths[b],
                                   BENCH_K + 1, next_ranked, &scratch) > (int64_t)BENCH_K) {
                for (uint32_t j = 0; j < BENCH_K; j++)
                    if (row[j] == next_ranked[BENCH_K - 1])
                        row[j] = next_ranked[BENCH_K];
            }
        }
    }
    free(next_ranked);
    topk_scratch_free(&scratch);
}

/* A SHA-256 of what the tally recorded, for checking that a faster path changes nothing. */
static void tally_digest(const struct output_tally *tally, uint8_t digest[HASH_BYTES])
{
    crypto_hash_sha256_state state;
    crypto_hash_sha256_init(&state);
    crypto_hash_sha256_update(&state, (const void *)tally->rep_hash, tally->reps * HASH_BYTES);
    crypto_hash_sha256_update(&state, (const void *)tally->rep_set_hash, tally->reps * HASH_BYTES);
    crypto_hash_sha256_update(&state, (const void *)tally->rep_distinct,
                              tally->reps * sizeof(uint32_t));
    crypto_hash_sha256_update(&state, (const void *)tally->rep_rows_differing,
                              tally->reps * sizeof(uint32_t));
    uint32_t counts[4] = { tally->distinct_outputs, tally->distinct_sets,
                           tally->equals_reference_reps, tally->outputs_checked };
    crypto_hash_sha256_update(&state, (const void *)counts, sizeof(counts));
    crypto_hash_sha256_update(&state, (const void *)tally->violations, sizeof(tally->violations));
    const size_t row_bytes = tally->rows * sizeof(uint32_t);
    crypto_hash_sha256_update(&state, (const void *)tally->row_flags, row_bytes);
    crypto_hash_sha256_update(&state, (const void *)tally->row_reps_differing, row_bytes);
    crypto_hash_sha256_update(&state, (const void *)tally->row_reps_set_differing, row_bytes);
    crypto_hash_sha256_update(&state, (const void *)tally->row_max_positions_differing, row_bytes);
    crypto_hash_sha256_update(&state, (const void *)tally->row_max_indices_differing, row_bytes);
    crypto_hash_sha256_final(&state, digest);
}

int main(int argc, char **argv)
{
    int runs = argc > 1 ? atoi(argv[1]) : 5;
    int reps_argument = argc > 2 ? atoi(argv[2]) : 25;
    if (runs < 1 || runs > 1000 || reps_argument < 1 || reps_argument > 1000) {
        fprintf(stderr, "usage: bench_host_check [RUNS (1..1000) [REPS (1..1000)]]\n");
        return 2;
    }
    const uint32_t reps = (uint32_t)reps_argument;
    const size_t count = (size_t)BENCH_ROWS * BENCH_K;
    struct audit_error err = { 0 };
    struct capture_record record = { 0 };
    struct check_context checks = { 0 };
    struct output_tally tally = { 0 };
    const struct check_claims radix_claims = { 0 };
    int status = 0;
    int32_t *outputs = malloc((size_t)reps * count * sizeof(int32_t));
    uint64_t *row_hashes = malloc((size_t)reps * BENCH_ROWS * sizeof(uint64_t));
    uint32_t *row_flags = malloc(BENCH_ROWS * sizeof(uint32_t));
    /* per run: [0] hash_ms, [1] check_ms, [2] the whole call, [3] hash_indices,
     * [4] hash_index_sets, [5] checks_output; each per distinct output */
    enum { HASH, CHECK, CALL, SHA_OUTPUT, SET_HASH, CHECKS_OUTPUT, PARTS };
    static const char *const part_names[PARTS] = {
        "tally hash_ms", "tally check_ms", "whole call", "  hash_indices", "  hash_index_sets",
        "  checks_output",
    };
    double *samples[PARTS] = { 0 };
    for (int part = 0; part < PARTS; part++)
        samples[part] = calloc((size_t)runs, sizeof(double));
    if (!outputs || !row_hashes || !row_flags || hash_init() != 0) {
        fprintf(stderr, "bench_host_check: out of memory\n");
        status = 1;
        goto done;
    }
    for (int part = 0; part < PARTS; part++)
        if (!samples[part]) {
            fprintf(stderr, "bench_host_check: out of memory\n");
            status = 1;
            goto done;
        }

    const struct synth_params params = {
        .family = "relu", .rows = BENCH_ROWS, .length = BENCH_LENGTH, .k = BENCH_K, .seed = 1,
    };
    if (synth_generate(&params, &record, &err) < 0 || checks_prepare(&checks, &record, 0, &err) < 0) {
        fprintf(stderr, "bench_host_check: %s\n", err.message);
        status = 1;
        goto done;
    }
    make_outputs(&record, checks.reference, reps, outputs);
    for (uint32_t rep = 0; rep < reps; rep++)
        hash_output_rows64(outputs + rep * count, NULL, BENCH_ROWS, BENCH_K,
                           row_hashes + (size_t)rep * BENCH_ROWS);

    uint8_t digest[HASH_BYTES], first_digest[HASH_BYTES];
    uint32_t distinct = 0;
    for (int run = 0; run < runs; run++) {
        if (output_tally_init(&tally, BENCH_ROWS, BENCH_K, reps, NULL, &err) < 0) {
            fprintf(stderr, "bench_host_check: %s\n", err.message);
            status = 1;
            goto done;
        }
        double started = now_ms();
        for (uint32_t rep = 0; rep < reps; rep++) {
            if (output_tally_add_hashed(&tally, outputs + rep * count, NULL,
                                        row_hashes + (size_t)rep * BENCH_ROWS, 1.0, &checks,
                                        &radix_claims, checks.reference, &err) < 0) {
                fprintf(stderr, "bench_host_check: %s\n", err.message);
                status = 1;
                goto done;
            }
        }
        double call_ms = now_ms() - started;
        distinct = tally.outputs_checked ? tally.outputs_checked : 1;
        samples[HASH][run] = tally.hash_ms / distinct;
        samples[CHECK][run] = tally.check_ms / distinct;
        samples[CALL][run] = call_ms / distinct;
        tally_digest(&tally, digest);
        if (run == 0)
            memcpy(first_digest, digest, HASH_BYTES);
        else if (memcmp(digest, first_digest, HASH_BYTES)) {
            fprintf(stderr, "bench_host_check: run %d recorded something else than run 0\n", run);
            status = 1;
        }
        output_tally_release(&tally);

        /* The parts alone, over the same outputs. */
        uint8_t scratch_digest[HASH_BYTES];
        struct check_counts check_counts;
        started = now_ms();
        for (uint32_t rep = 0; rep < reps; rep++)
            hash_indices(outputs + rep * count, count, scratch_digest);
        double middle = now_ms();
        for (uint32_t rep = 0; rep < reps; rep++)
            hash_index_sets(outputs + rep * count, BENCH_ROWS, BENCH_K, scratch_digest);
        double late = now_ms();
        for (uint32_t rep = 0; rep < reps; rep++)
            checks_output(&checks, outputs + rep * count, NULL, &radix_claims, &check_counts,
                          row_flags, &err);
        double end = now_ms();
        samples[SHA_OUTPUT][run] = (middle - started) / reps;
        samples[SET_HASH][run] = (late - middle) / reps;
        samples[CHECKS_OUTPUT][run] = (end - late) / reps;
    }

    printf("# relu %u x %u, k %u, %u reps (%u distinct outputs), median of %d runs\n",
           BENCH_ROWS, BENCH_LENGTH, BENCH_K, reps, distinct, runs);
    printf("# milliseconds per distinct output; the tally on %u host threads\n",
           host_threads_count(count, OUTPUT_TALLY_INDICES_PER_THREAD));
    double medians[PARTS];
    for (int part = 0; part < PARTS; part++) {
        medians[part] = bench_median(samples[part], runs);
        printf("%-20s %8.3f\n", part_names[part], medians[part]);
    }
    /* bytes per ms / 1000 = MB/s */
    printf("%-20s %8.0f MB/s\n", "SHA-256",
           (double)(count * sizeof(int32_t)) / medians[SHA_OUTPUT] / 1e3);
    char hex[HASH_HEX_BYTES];
    hash_to_hex(first_digest, hex);
    printf("tally digest %s\n", hex);
done:
    output_tally_release(&tally);
    checks_release(&checks);
    capture_record_free(&record);
    for (int part = 0; part < PARTS; part++)
        free(samples[part]);
    free(row_flags);
    free(row_hashes);
    free(outputs);
    return status;
}
