/* Throughput of the CPU reference top-k and of the census on one core (docs/PERF.md,
 * docs/REFERENCE.md). Run by `meson test --benchmark`, or directly:
 *   bench_reference [RUNS]
 * For each score family, shape and k it prints the median over RUNS timed runs (default 7) of
 * the scores processed per second by topk_reference_record and by census_record_json with that
 * single k. The timer is CLOCK_MONOTONIC; the "cpu" columns divide by the thread's CPU time
 * instead (CLOCK_THREAD_CPUTIME_ID), which stays meaningful on a machine shared with other
 * work. The rows come from a fixed seed. */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <cjson/cJSON.h>

#include "bench_util.h"
#include "capture.h"
#include "census.h"
#include "error.h"
#include "reference.h"
#include "test_util.h"

/* The floor below which the reference is too slow to audit captures in bulk. */
#define FLOOR_SCORES_PER_SECOND 100e6

enum family { FAMILY_RANDOM, FAMILY_RELU_PLATEAU, FAMILY_ALL_EQUAL, FAMILY_COUNT };
static const char *const family_names[FAMILY_COUNT] = { "random", "relu-plateau", "all-equal" };

static double next_uniform(void)
{
    return ((double)(next_random() >> 11) + 0.5) * 0x1.0p-53;
}

static double next_gaussian(void)
{
    return sqrt(-2.0 * log(next_uniform())) * cos(6.283185307179586 * next_uniform());
}

static void fill_scores(float *scores, size_t count, enum family family)
{
    rng_state = 0x5EEDull + (uint64_t)family;
    for (size_t i = 0; i < count; i++) {
        switch (family) {
        case FAMILY_RANDOM: scores[i] = (float)next_gaussian(); break;
        case FAMILY_RELU_PLATEAU: {
            /* The ReLU indexer shape of seed 003: ~10% positives, the rest exact 0.0. */
            double shifted = next_gaussian() - 1.28;
            scores[i] = shifted > 0 ? (float)(shifted * 11.3) : 0.0f;
            break;
        }
        default: scores[i] = 1.0f; break;
        }
    }
}

static double seconds_now(clockid_t clock)
{
    struct timespec now;
    clock_gettime(clock, &now);
    return (double)now.tv_sec + (double)now.tv_nsec * 1e-9;
}

int main(int argc, char **argv)
{
    int runs = argc > 1 ? atoi(argv[1]) : 7;
    if (runs < 1 || runs > 1000) {
        fprintf(stderr, "usage: bench_reference [RUNS (1..1000)]\n");
        return 2;
    }
    /* One core: topk_reference_record would otherwise share rows out to a few threads. */
    setenv("DSATOPK_HOST_THREADS", "1", 1);
    static const uint32_t row_counts[] = { 16, 64 };
    static const uint32_t ks[] = { 512, 2048 };
    const uint32_t length = 131072;
    int status = 0;
    double slowest_reference = INFINITY, slowest_census = INFINITY;
    /* [0]: wall clock, [1]: thread CPU time */
    double *reference_rates[2] = { calloc((size_t)runs, sizeof(double)),
                                   calloc((size_t)runs, sizeof(double)) };
    double *census_rates[2] = { calloc((size_t)runs, sizeof(double)),
                                calloc((size_t)runs, sizeof(double)) };
    float *scores = malloc((size_t)64 * length * sizeof(float));
    int32_t *lengths = malloc(64 * sizeof(int32_t));
    int32_t *out = malloc((size_t)64 * 2048 * sizeof(int32_t));
    if (!reference_rates[0] || !reference_rates[1] || !census_rates[0] || !census_rates[1] ||
        !scores || !lengths || !out) {
        fprintf(stderr, "bench_reference: out of memory\n");
        status = 1;
        goto done;
    }
    for (int b = 0; b < 64; b++)
        lengths[b] = (int32_t)length;

    printf("# scores/s on one core, median of %d runs (M = 1e6)\n", runs);
    printf("%-13s %5s %7s %5s %12s %12s %12s %12s\n", "family", "rows", "length", "k", "reference",
           "census", "(cpu) ref", "(cpu) census");
    for (int family = 0; family < FAMILY_COUNT; family++) {
        fill_scores(scores, (size_t)64 * length, (enum family)family);
        for (size_t r = 0; r < sizeof(row_counts) / sizeof(row_counts[0]); r++) {
            struct capture_record record = {
                .rows = row_counts[r], .row_stride = length, .scores = scores,
                .lengths = lengths, .metadata_json = NULL,
            };
            double scores_per_run = (double)row_counts[r] * length;
            for (size_t ki = 0; ki < sizeof(ks) / sizeof(ks[0]); ki++) {
                record.k = ks[ki];
                for (int run = 0; run < runs; run++) {
                    struct audit_error err = { 0 };
                    double start = seconds_now(CLOCK_MONOTONIC);
                    double start_cpu = seconds_now(CLOCK_THREAD_CPUTIME_ID);
                    int result = topk_reference_record(&record, 0, out, NULL, &err);
                    double middle = seconds_now(CLOCK_MONOTONIC);
                    double middle_cpu = seconds_now(CLOCK_THREAD_CPUTIME_ID);
                    cJSON *json = NULL;
                    if (result == AUDIT_OK)
                        result = census_record_json(&record, &record.k, 1, &json, NULL, &err);
                    double end = seconds_now(CLOCK_MONOTONIC);
                    double end_cpu = seconds_now(CLOCK_THREAD_CPUTIME_ID);
                    cJSON_Delete(json);
                    if (result != AUDIT_OK) {
                        fprintf(stderr, "bench_reference: %s\n", err.message);
                        status = 1;
                        goto done;
                    }
                    reference_rates[0][run] = scores_per_run / (middle - start);
                    census_rates[0][run] = scores_per_run / (end - middle);
                    reference_rates[1][run] = scores_per_run / (middle_cpu - start_cpu);
                    census_rates[1][run] = scores_per_run / (end_cpu - middle_cpu);
                }
                double reference_rate = bench_median(reference_rates[0], runs);
                double census_rate = bench_median(census_rates[0], runs);
                slowest_reference = fmin(slowest_reference, reference_rate);
                slowest_census = fmin(slowest_census, census_rate);
                printf("%-13s %5u %7u %5u %10.1f M %10.1f M %10.1f M %10.1f M\n",
                       family_names[family], row_counts[r], length, ks[ki], reference_rate / 1e6,
                       census_rate / 1e6, bench_median(reference_rates[1], runs) / 1e6,
                       bench_median(census_rates[1], runs) / 1e6);
            }
        }
    }
    printf("# slowest: reference %.1f M/s, census %.1f M/s (floor %.0f M/s)\n",
           slowest_reference / 1e6, slowest_census / 1e6, FLOOR_SCORES_PER_SECOND / 1e6);
    if (slowest_reference < FLOOR_SCORES_PER_SECOND || slowest_census < FLOOR_SCORES_PER_SECOND)
        printf("# below the floor (a loaded machine also gets here: rerun when idle)\n");
done:
    free(out);
    free(lengths);
    free(scores);
    for (int clock = 0; clock < 2; clock++) {
        free(census_rates[clock]);
        free(reference_rates[clock]);
    }
    return status;
}
