/* Unit tests of the synthetic families and their portable generator (src/capture/synth.c,
 * docs/SYNTH.md).
 *
 * The golden digests below were computed once, on x86-64 Linux, from the generator as it is
 * specified in docs/SYNTH.md. They are a portability regression test: the generator uses only
 * correctly rounded IEEE-754 operations, so every conforming machine must reproduce them. A
 * mismatch means the bytes of a family changed (then bump SYNTH_GENERATOR in src/capture/synth.c,
 * regenerate captures/ and update these digests in the same change) or the platform does not
 * do IEEE arithmetic as the build expects (-ffp-contract=off, no x87 excess precision). */
/* The reference polar method below must round like src/capture/synth.c (no fused multiply-add). */
#if defined(__clang__)
#pragma clang fp contract(off)
#endif

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "capture.h"
#include "hash.h"
#include "synth.h"

static uint32_t float_bits(float value)
{
    uint32_t bits;
    memcpy(&bits, &value, sizeof(bits));
    return bits;
}

static struct synth_params small_params(const char *family)
{
    struct synth_params params = {
        .family = family,
        .rows = 4,
        .length = 1000,
        .k = 64,
        .seed = 42,
    };
    if (strcmp(family, "plateau") == 0)
        params.plateau_distinct = 40;
    if (strcmp(family, "tie") == 0)
        params.tie_count = 20;
    if (strcmp(family, "indexer") == 0) {
        params.heads = 8;
        params.rho = 0.9;
        params.mu = -1.0;
    }
    if (strcmp(family, "paged") == 0)
        params.page_size = 16;
    if (strcmp(family, "padded") == 0)
        params.stride_pad = 5;
    return params;
}

static void generate_ok(const struct synth_params *params, struct capture_record *record)
{
    struct audit_error err = { 0 };
    int status = synth_generate(params, record, &err);
    if (status != 0)
        fail_msg("synth_generate(%s): %s", params->family, err.message);
    status = capture_record_validate(record, &err);
    if (status != 0)
        fail_msg("capture_record_validate(%s): %s", params->family, err.message);
}

/* Appends count 32-bit words as little-endian bytes. */
static void put_words(uint8_t **cursor, const void *words, uint64_t count)
{
    const uint32_t *source = words;
    for (uint64_t i = 0; i < count; i++) {
        uint32_t v = source[i];
        (*cursor)[0] = (uint8_t)v;
        (*cursor)[1] = (uint8_t)(v >> 8);
        (*cursor)[2] = (uint8_t)(v >> 16);
        (*cursor)[3] = (uint8_t)(v >> 24);
        *cursor += 4;
    }
}

/* SHA-256 of everything a family generates, in a fixed little-endian layout: rows, k,
 * row_stride, page_size, page_table_cols, then scores, lengths, row_starts, page_table,
 * page_table_row_starts (present arrays only) and the metadata text. */
static void record_digest(const struct capture_record *record, char hex[HASH_HEX_BYTES])
{
    const uint64_t scores = (uint64_t)record->rows * record->row_stride;
    const uint64_t table = record->page_table ? (uint64_t)record->rows * record->page_table_cols : 0;
    const size_t metadata = strlen(record->metadata_json);
    const size_t size = 4 * (5 + scores + 3 * (uint64_t)record->rows + table) + metadata;
    uint8_t *buffer = malloc(size), *cursor = buffer;
    assert_non_null(buffer);
    const uint32_t header[5] = { record->rows, record->k, (uint32_t)record->row_stride,
                                 record->page_size, (uint32_t)record->page_table_cols };
    put_words(&cursor, header, 5);
    put_words(&cursor, record->scores, scores);
    put_words(&cursor, record->lengths, record->rows);
    if (record->row_starts)
        put_words(&cursor, record->row_starts, record->rows);
    if (record->page_table)
        put_words(&cursor, record->page_table, table);
    if (record->page_table_row_starts)
        put_words(&cursor, record->page_table_row_starts, record->rows);
    memcpy(cursor, record->metadata_json, metadata);
    cursor += metadata;
    uint8_t digest[HASH_BYTES];
    hash_bytes(buffer, (size_t)(cursor - buffer), digest);
    hash_to_hex(digest, hex);
    free(buffer);
}

/* ---- the generator ---- */

static void test_rng_matches_reference_streams(void **state)
{
    (void)state;
    /* splitmix64 from 0 starts 0xe220a8397b1dcdaf (its published first output); the rest was
     * computed with an independent Python transcription of splitmix64 and xoshiro256**. */
    struct synth_rng rng;
    synth_rng_seed(&rng, 0);
    assert_int_equal(rng.state[0], UINT64_C(0xe220a8397b1dcdaf));
    assert_int_equal(rng.state[1], UINT64_C(0x6e789e6aa1b965f4));
    assert_int_equal(rng.state[2], UINT64_C(0x06c45d188009454f));
    assert_int_equal(rng.state[3], UINT64_C(0xf88bb8a8724c81ec));
    const uint64_t from_zero[4] = { UINT64_C(0x99ec5f36cb75f2b4), UINT64_C(0xbf6e1f784956452a),
                                    UINT64_C(0x1a5f849d4933e6e0), UINT64_C(0x6aa594f1262d2d2c) };
    for (int i = 0; i < 4; i++)
        assert_int_equal(synth_rng_next(&rng), from_zero[i]);
    synth_rng_seed(&rng, 12345);
    const uint64_t from_12345[4] = { UINT64_C(0xbe6a36374160d49b), UINT64_C(0x214aaa0637a688c6),
                                     UINT64_C(0xf69d16de9954d388), UINT64_C(0x0c60048c4e96e033) };
    for (int i = 0; i < 4; i++)
        assert_int_equal(synth_rng_next(&rng), from_12345[i]);
}

static void test_uniform_is_53_bit_grid(void **state)
{
    (void)state;
    struct synth_rng rng, raw;
    synth_rng_seed(&rng, 7);
    synth_rng_seed(&raw, 7);
    for (int i = 0; i < 100000; i++) {
        double u = synth_rng_uniform(&rng);
        uint64_t top = synth_rng_next(&raw) >> 11;
        assert_true(u >= 0.0 && u < 1.0);
        assert_true(u * 9007199254740992.0 == (double)top);
    }
}

/* The polar method written with libm's log: the portable logarithm must agree with it to a
 * few ulps, draw for draw (same uniforms, same rejections). */
static double libm_polar_normal(struct synth_rng *rng)
{
    double u, v, s;
    do {
        u = 2.0 * synth_rng_uniform(rng) - 1.0;
        v = 2.0 * synth_rng_uniform(rng) - 1.0;
        s = u * u + v * v;
    } while (s >= 1.0 || s == 0.0);
    return u * sqrt(-2.0 * log(s) / s);
}

static void test_normal_agrees_with_libm_polar(void **state)
{
    (void)state;
    struct synth_rng portable, reference;
    synth_rng_seed(&portable, 99);
    synth_rng_seed(&reference, 99);
    double worst = 0.0;
    for (int i = 0; i < 200000; i++) {
        double a = synth_rng_normal(&portable), b = libm_polar_normal(&reference);
        double relative = fabs(a - b) / (fabs(b) > 1e-300 ? fabs(b) : 1.0);
        if (relative > worst)
            worst = relative;
    }
    /* Both streams must still be in step (same number of draws consumed). */
    assert_int_equal(synth_rng_next(&portable), synth_rng_next(&reference));
    if (worst > 1e-14)
        fail_msg("portable normal differs from the libm one by %g relative", worst);
}

static void test_normal_moments(void **state)
{
    (void)state;
    struct synth_rng rng;
    synth_rng_seed(&rng, 2024);
    const int draws = 1000000;
    double sum = 0.0, sum_squares = 0.0;
    int below_minus_196 = 0, below_one = 0;
    for (int i = 0; i < draws; i++) {
        double x = synth_rng_normal(&rng);
        sum += x;
        sum_squares += x * x;
        below_minus_196 += x < -1.96;
        below_one += x < 1.0;
    }
    double mean = sum / draws, variance = sum_squares / draws - mean * mean;
    /* Five standard errors: mean 1/sqrt(n) = 0.001, variance sqrt(2/n) = 0.0014. */
    if (fabs(mean) > 0.005 || fabs(variance - 1.0) > 0.007)
        fail_msg("normal mean %g variance %g", mean, variance);
    double tail = (double)below_minus_196 / draws, body = (double)below_one / draws;
    if (fabs(tail - 0.0249979) > 0.001 || fabs(body - 0.8413447) > 0.002)
        fail_msg("P(x < -1.96) = %g, P(x < 1) = %g", tail, body);
}

/* ---- determinism and golden bytes ---- */

static void test_same_seed_same_bytes(void **state)
{
    (void)state;
    for (int f = 0; synth_family_names[f]; f++) {
        struct synth_params params = small_params(synth_family_names[f]);
        struct capture_record a, b;
        generate_ok(&params, &a);
        generate_ok(&params, &b);
        char hex_a[HASH_HEX_BYTES], hex_b[HASH_HEX_BYTES];
        record_digest(&a, hex_a);
        record_digest(&b, hex_b);
        assert_string_equal(hex_a, hex_b);
        capture_record_free(&a);
        capture_record_free(&b);
    }
}

static void test_different_seed_different_scores(void **state)
{
    (void)state;
    for (int f = 0; synth_family_names[f]; f++) {
        if (strcmp(synth_family_names[f], "allequal") == 0)
            continue; /* no randomness by design */
        struct synth_params params = small_params(synth_family_names[f]);
        struct capture_record a, b;
        generate_ok(&params, &a);
        params.seed = 43;
        generate_ok(&params, &b);
        size_t bytes = (size_t)a.rows * a.row_stride * sizeof(float);
        assert_int_equal(a.row_stride, b.row_stride);
        if (memcmp(a.scores, b.scores, bytes) == 0 &&
            memcmp(a.lengths, b.lengths, a.rows * sizeof(int32_t)) == 0)
            fail_msg("family %s: seeds 42 and 43 gave the same record", synth_family_names[f]);
        capture_record_free(&a);
        capture_record_free(&b);
    }
}

/* Row b depends only on (family, parameters, seed, b): a record with fewer rows is a prefix
 * (families whose shared draws do not depend on the row count). */
static void test_rows_are_independent_streams(void **state)
{
    (void)state;
    struct synth_params params = small_params("relu");
    struct capture_record few, many;
    params.rows = 2;
    generate_ok(&params, &few);
    params.rows = 5;
    generate_ok(&params, &many);
    assert_memory_equal(few.scores, many.scores, 2 * few.row_stride * sizeof(float));
    capture_record_free(&few);
    capture_record_free(&many);
}

struct golden {
    const char *family;
    const char *sha256;
};

static const struct golden goldens[] = {
    { "plateau", "36af8d50dea670feeb9b8cb6b3fab06efdf8c3f52016e397b4c3571c726c54be" },
    { "tie", "342104a860834332f368e9690c101646e21646aebab868e9d4113dce921ee3a8" },
    { "relu", "6fb40d506d367ec52e9215da07e18d22490f6fc00d50ddf15dc018779bb64632" },
    { "narrow", "4503e6377dc94055117b37e15379693acbe2f684486af92f54d1508d183e3d4a" },
    { "indexer", "98b883eb74e40d7094024c92d6474423eccc71f2b65fc0031641bfa6dfe745c8" },
    { "random", "7d891336f97aac5d0e949d01a31be639820cccacf62ae2f78d721c5d57580e00" },
    { "neginf", "6e8a8b62f1de8442f0ce84373a437260d125759e43f895937ce7e4effc8eed7d" },
    { "allequal", "ebc35118f6fab16460ecdcb18ab5691967bc7fe5e04baaa04ec94fba1f61c972" },
    { "short", "a9496bc2f526b6232d929cbdee8c40414c2e520fafbbb077c958737c1a857743" },
    { "offsets", "da689fe0df3fd1c17e15508c609fa25636e0e4f20591ed1d4d76b571dfd69e23" },
    { "padded", "b816790bfc6d578fd77086b8731337d15ec6c597a1875db9d6420c97af366c58" },
    { "paged", "bb0ada57fa962a02c686286693eb6e2cb3006cb020881423e06d32501851cd7f" },
    { "signedzero", "4d5eede426bfc1a2ff29d7504753a620d0d5b5682969946fc86f0f69708b62c0" },
    { "nan", "7a470eee9a81b723a9ce30c55c5d1be4dc2a6df9579c0d2df450ae87ab5a2893" },
    { "subnormal", "46138b008bd9fb2a7544cef69890c0422e9114e630e381bad46976d260e5f6fe" },
};

static void test_golden_digests(void **state)
{
    (void)state;
    int families = 0, mismatches = 0;
    for (int f = 0; synth_family_names[f]; f++)
        families++;
    assert_int_equal(families, (int)(sizeof(goldens) / sizeof(goldens[0])));
    for (size_t g = 0; g < sizeof(goldens) / sizeof(goldens[0]); g++) {
        struct synth_params params = small_params(goldens[g].family);
        struct capture_record record;
        generate_ok(&params, &record);
        char hex[HASH_HEX_BYTES];
        record_digest(&record, hex);
        if (strcmp(hex, goldens[g].sha256) != 0) {
            print_message("family %s: digest %s, golden %s\n", goldens[g].family, hex,
                          goldens[g].sha256);
            mismatches++;
        }
        capture_record_free(&record);
    }
    assert_int_equal(mismatches, 0);
}

/* The families filled row by row on a few threads (random, relu) give the same bytes whatever the
 * thread count: the golden records on one thread per row, and a record of several million scores
 * (several threads by default) against one thread. */
static void test_threads_give_the_same_bytes(void **state)
{
    (void)state;
    static const char *const families[] = { "random", "relu" };
    for (size_t f = 0; f < sizeof(families) / sizeof(families[0]); f++) {
        assert_int_equal(setenv("DSATOPK_HOST_THREADS", "4", 1), 0);
        struct synth_params params = small_params(families[f]);
        struct capture_record record;
        generate_ok(&params, &record);
        char hex[HASH_HEX_BYTES];
        record_digest(&record, hex);
        for (size_t g = 0; g < sizeof(goldens) / sizeof(goldens[0]); g++)
            if (strcmp(goldens[g].family, families[f]) == 0)
                assert_string_equal(hex, goldens[g].sha256);
        capture_record_free(&record);

        params.rows = 12;
        params.length = 200003; /* 2.4 M scores: two threads or more where the CPUs allow */
        char threaded[HASH_HEX_BYTES], sequential[HASH_HEX_BYTES];
        assert_int_equal(unsetenv("DSATOPK_HOST_THREADS"), 0);
        generate_ok(&params, &record);
        record_digest(&record, threaded);
        capture_record_free(&record);
        assert_int_equal(setenv("DSATOPK_HOST_THREADS", "1", 1), 0);
        generate_ok(&params, &record);
        record_digest(&record, sequential);
        capture_record_free(&record);
        assert_string_equal(threaded, sequential);
        /* and with more threads than rows' worth of work each */
        assert_int_equal(setenv("DSATOPK_HOST_THREADS", "7", 1), 0);
        generate_ok(&params, &record);
        record_digest(&record, threaded);
        capture_record_free(&record);
        assert_string_equal(threaded, sequential);
    }
    assert_int_equal(unsetenv("DSATOPK_HOST_THREADS"), 0);
}

/* ---- family properties ---- */

static cJSON *metadata_params(const struct capture_record *record, const char *family)
{
    cJSON *metadata = cJSON_Parse(record->metadata_json);
    assert_non_null(metadata);
    assert_string_equal(cJSON_GetObjectItem(metadata, "engine")->valuestring, "synth");
    assert_string_equal(cJSON_GetObjectItem(metadata, "family")->valuestring, family);
    assert_non_null(cJSON_GetObjectItem(metadata, "generator"));
    assert_non_null(cJSON_GetObjectItem(metadata, "params"));
    return metadata;
}

static void test_plateau_has_m_distinct_positives(void **state)
{
    (void)state;
    const uint32_t ms[] = { 0, 1, 63, 64, 65, 500, 1000 };
    for (size_t t = 0; t < sizeof(ms) / sizeof(ms[0]); t++) {
        struct synth_params params = small_params("plateau");
        params.plateau_distinct = ms[t];
        struct capture_record record;
        generate_ok(&params, &record);
        for (uint32_t b = 0; b < record.rows; b++) {
            const float *row = capture_row_window(&record, b);
            uint32_t positives = 0;
            float *seen = calloc(params.length, sizeof(float));
            assert_non_null(seen);
            for (uint32_t i = 0; i < params.length; i++) {
                if (float_bits(row[i]) == 0)
                    continue;
                assert_true(row[i] >= 0.5f && row[i] < 1.5f);
                for (uint32_t j = 0; j < positives; j++)
                    assert_true(seen[j] != row[i]);
                seen[positives++] = row[i];
            }
            free(seen);
            assert_int_equal(positives, ms[t]);
        }
        cJSON *metadata = metadata_params(&record, "plateau");
        cJSON *distinct = cJSON_GetObjectItem(cJSON_GetObjectItem(metadata, "params"), "distinct");
        assert_non_null(distinct);
        assert_int_equal((uint32_t)distinct->valuedouble, ms[t]);
        cJSON_Delete(metadata);
        capture_record_free(&record);
    }
}

static void test_tie_straddles_the_boundary(void **state)
{
    (void)state;
    const uint32_t tie_counts[] = { 2, 3, 20, 127, 128, 129, 500 };
    for (size_t t = 0; t < sizeof(tie_counts) / sizeof(tie_counts[0]); t++) {
        struct synth_params params = small_params("tie");
        params.tie_count = tie_counts[t];
        struct capture_record record;
        generate_ok(&params, &record);
        const uint32_t k = params.k, ties = tie_counts[t];
        const uint32_t expected_above = ties / 2 >= k ? 0 : k - ties / 2;
        for (uint32_t b = 0; b < record.rows; b++) {
            const float *row = capture_row_window(&record, b);
            uint32_t equal = 0, above = 0;
            for (uint32_t i = 0; i < params.length; i++) {
                equal += row[i] == 1.0f;
                above += row[i] > 1.0f;
                assert_true(row[i] > 0.0f && !isnan(row[i]));
            }
            assert_int_equal(equal, ties);
            assert_int_equal(above, expected_above);
            /* The k-th ranked value is 1.0 and the tie set crosses it. */
            assert_true(above < k && above + equal > k);
        }
        capture_record_free(&record);
    }
}

static void test_relu_and_narrow_shapes(void **state)
{
    (void)state;
    struct synth_params params = small_params("relu");
    params.rows = 8;
    params.length = 20000;
    struct capture_record record;
    generate_ok(&params, &record);
    uint64_t zeros = 0, total = (uint64_t)params.rows * params.length;
    for (uint64_t i = 0; i < total; i++) {
        assert_true(record.scores[i] >= 0.0f);
        zeros += record.scores[i] == 0.0f;
    }
    /* P(N(0,1) <= 1.28) = 0.89973 */
    double fraction = (double)zeros / (double)total;
    if (fabs(fraction - 0.89973) > 0.01)
        fail_msg("relu zero fraction %g", fraction);
    capture_record_free(&record);

    params = small_params("narrow");
    params.length = 20000;
    generate_ok(&params, &record);
    int distinct = 0;
    float seen[64];
    for (uint64_t i = 0; i < (uint64_t)params.rows * params.length; i++) {
        float v = record.scores[i];
        assert_true(fabsf(v - 1.0f) < 1e-5f);
        int found = 0;
        for (int j = 0; j < distinct; j++)
            found |= seen[j] == v;
        if (!found) {
            assert_true(distinct < 64);
            seen[distinct++] = v;
        }
    }
    /* fp32 spacing near 1.0 (6e-8 below, 1.2e-7 above) leaves only a handful of values. */
    assert_true(distinct >= 4 && distinct <= 40);
    capture_record_free(&record);
}

static void test_indexer_is_nonnegative_with_a_zero_plateau(void **state)
{
    (void)state;
    struct synth_params params = small_params("indexer");
    params.length = 4000;
    struct capture_record record;
    generate_ok(&params, &record);
    uint64_t zeros = 0, total = (uint64_t)params.rows * params.length;
    for (uint64_t i = 0; i < total; i++) {
        assert_true(record.scores[i] >= 0.0f && isfinite(record.scores[i]));
        assert_int_not_equal(float_bits(record.scores[i]), 0x80000000u);
        zeros += record.scores[i] == 0.0f;
    }
    assert_true(zeros > 0 && zeros < total);
    cJSON *metadata = metadata_params(&record, "indexer");
    cJSON *model = cJSON_GetObjectItem(metadata, "params");
    assert_int_equal((int)cJSON_GetObjectItem(model, "heads")->valuedouble, 8);
    assert_true(cJSON_GetObjectItem(model, "rho")->valuedouble == 0.9);
    assert_true(cJSON_GetObjectItem(model, "mu")->valuedouble == -1.0);
    cJSON_Delete(metadata);
    capture_record_free(&record);

    /* A very negative mean puts every logit below zero: the whole row is the plateau. */
    params.mu = -50.0;
    generate_ok(&params, &record);
    for (uint64_t i = 0; i < total; i++)
        assert_int_equal(float_bits(record.scores[i]), 0);
    capture_record_free(&record);

    /* Defaults: heads 0 means 64. */
    params.mu = -1.0;
    params.heads = 0;
    params.length = 64;
    generate_ok(&params, &record);
    metadata = metadata_params(&record, "indexer");
    model = cJSON_GetObjectItem(metadata, "params");
    assert_int_equal((int)cJSON_GetObjectItem(model, "heads")->valuedouble, 64);
    cJSON_Delete(metadata);
    capture_record_free(&record);
}

static void test_neginf_and_allequal(void **state)
{
    (void)state;
    struct synth_params params = small_params("neginf");
    params.rows = 6;
    params.length = 10000;
    struct capture_record record;
    generate_ok(&params, &record);
    int empty_rows = 0;
    for (uint32_t b = 0; b < record.rows; b++) {
        const float *row = capture_row_window(&record, b);
        uint32_t neg_inf = 0;
        for (uint32_t i = 0; i < params.length; i++) {
            neg_inf += isinf(row[i]) && row[i] < 0;
            assert_false(isnan(row[i]));
        }
        if (neg_inf == params.length) {
            empty_rows++;
            continue;
        }
        double fraction = (double)neg_inf / params.length;
        if (fabs(fraction - 0.05) > 0.015)
            fail_msg("row %u: -inf fraction %g", b, fraction);
    }
    assert_int_equal(empty_rows, 1);
    capture_record_free(&record);

    params = small_params("allequal");
    generate_ok(&params, &record);
    for (uint32_t b = 0; b < record.rows; b++) {
        const float *row = capture_row_window(&record, b);
        uint32_t want = b % 2 == 0 ? float_bits(1.0f) : 0;
        for (uint32_t i = 0; i < params.length; i++)
            assert_int_equal(float_bits(row[i]), want);
    }
    capture_record_free(&record);
}

static void assert_poisoned(const float *from, uint64_t count)
{
    for (uint64_t i = 0; i < count; i++)
        assert_int_equal(float_bits(from[i]), 0x7FC0DEADu);
}

static void test_layout_families(void **state)
{
    (void)state;
    /* short: every length below k, some zero, the rest of the stride poisoned. */
    struct synth_params params = small_params("short");
    params.rows = 17;
    struct capture_record record;
    generate_ok(&params, &record);
    int zero_rows = 0;
    for (uint32_t b = 0; b < record.rows; b++) {
        int32_t length = record.lengths[b];
        assert_true(length >= 0 && (uint32_t)length < params.k);
        zero_rows += length == 0;
        const float *row = record.scores + (uint64_t)b * record.row_stride;
        for (int32_t i = 0; i < length; i++)
            assert_false(isnan(row[i]));
        assert_poisoned(row + length, record.row_stride - (uint64_t)length);
    }
    assert_int_equal(zero_rows, 3);
    capture_record_free(&record);

    /* short with k beyond the row length: lengths stay within the row. */
    params.k = 5000;
    generate_ok(&params, &record);
    for (uint32_t b = 0; b < record.rows; b++)
        assert_true(record.lengths[b] <= (int32_t)params.length);
    capture_record_free(&record);

    /* offsets: windows at random starts inside a wider stride, poison around them. */
    params = small_params("offsets");
    params.rows = 16;
    generate_ok(&params, &record);
    assert_non_null(record.row_starts);
    assert_int_equal(record.row_stride, params.length + 61);
    int distinct_starts = 0, unaligned = 0;
    for (uint32_t b = 0; b < record.rows; b++) {
        int32_t start = record.row_starts[b];
        assert_true(start >= 0 && start <= 61);
        assert_int_equal(record.lengths[b], (int32_t)params.length);
        distinct_starts += b == 0 || start != record.row_starts[b - 1];
        unaligned += start % 4 != 0;
        const float *row = record.scores + (uint64_t)b * record.row_stride;
        assert_poisoned(row, (uint64_t)start);
        assert_poisoned(row + start + params.length, record.row_stride - start - params.length);
    }
    assert_true(distinct_starts > 4 && unaligned > 0);
    capture_record_free(&record);

    /* padded: stride L + pad, pad poisoned. */
    params = small_params("padded");
    generate_ok(&params, &record);
    assert_int_equal(record.row_stride, params.length + 5);
    assert_null(record.row_starts);
    for (uint32_t b = 0; b < record.rows; b++)
        assert_poisoned(record.scores + (uint64_t)b * record.row_stride + params.length, 5);
    capture_record_free(&record);
}

static void test_paged_tables(void **state)
{
    (void)state;
    const uint32_t page_sizes[] = { 1, 16, 64, 1024 };
    for (size_t t = 0; t < sizeof(page_sizes) / sizeof(page_sizes[0]); t++) {
        struct synth_params params = small_params("paged");
        params.rows = 6;
        params.page_size = page_sizes[t];
        struct capture_record record;
        generate_ok(&params, &record); /* includes capture_record_validate */
        assert_int_equal(record.page_size, page_sizes[t]);
        const uint64_t columns = (params.length + page_sizes[t] - 1) / page_sizes[t] + 3;
        assert_int_equal(record.page_table_cols, columns);
        assert_non_null(record.page_table_row_starts);
        /* The whole table is a permutation of the physical pages. */
        const uint64_t entries = columns * record.rows;
        uint8_t *seen = calloc(entries, 1);
        assert_non_null(seen);
        for (uint64_t i = 0; i < entries; i++) {
            /* A negative entry becomes huge here and fails the range check. */
            const uint64_t page = (uint32_t)record.page_table[i];
            assert_true(page < entries);
            assert_int_equal(seen[page], 0);
            seen[page] = 1;
        }
        free(seen);
        uint64_t identity = 0;
        for (uint64_t i = 0; i < entries; i++)
            identity += record.page_table[i] == (int32_t)i;
        assert_true(identity < entries / 2);
        int shorter = 0;
        for (uint32_t b = 0; b < record.rows; b++) {
            assert_true(record.page_table_row_starts[b] >= 0 &&
                        record.page_table_row_starts[b] <= 3);
            shorter += record.lengths[b] < (int32_t)params.length;
            if (b % 2 == 0)
                assert_int_equal(record.lengths[b], (int32_t)params.length);
            /* Scores are multiples of 1/16: ties are common. */
            const float *row = capture_row_window(&record, b);
            for (int32_t i = 0; i < record.lengths[b]; i++)
                assert_true(row[i] * 16.0f == floorf(row[i] * 16.0f));
        }
        assert_true(shorter > 0);
        capture_record_free(&record);
    }
}

static void test_signedzero_straddles_both_zero_sets(void **state)
{
    (void)state;
    struct synth_params params = small_params("signedzero");
    params.rows = 4;
    struct capture_record record;
    generate_ok(&params, &record);
    for (uint32_t b = 0; b < record.rows; b++) {
        const float *row = capture_row_window(&record, b);
        uint32_t positive = 0, plus_zero = 0, minus_zero = 0;
        for (uint32_t i = 0; i < params.length; i++) {
            uint32_t bits = float_bits(row[i]);
            positive += row[i] > 0.0f;
            plus_zero += bits == 0;
            minus_zero += bits == 0x80000000u;
        }
        assert_int_equal(positive + plus_zero + minus_zero, params.length);
        assert_int_equal(positive, params.k / 2);
        assert_true(plus_zero > 1 && minus_zero > 1);
        if (b % 2 == 0) /* boundary inside +0.0 */
            assert_true(positive < params.k && positive + plus_zero > params.k);
        else /* boundary inside -0.0 */
            assert_true(positive + plus_zero < params.k);
    }
    capture_record_free(&record);
}

static void test_nan_payloads_and_subnormal_ties(void **state)
{
    (void)state;
    struct synth_params params = small_params("nan");
    params.length = 5000;
    struct capture_record record;
    generate_ok(&params, &record);
    uint64_t positive_nan = 0, negative_nan = 0, canonical = 0, other_payload = 0, plus_inf = 0;
    for (uint64_t i = 0; i < (uint64_t)params.rows * params.length; i++) {
        uint32_t bits = float_bits(record.scores[i]);
        if (isnan(record.scores[i])) {
            if (bits >> 31)
                negative_nan++;
            else
                positive_nan++;
            if ((bits & 0x7FFFFFFFu) == 0x7FC00000u)
                canonical++;
            else
                other_payload++;
        }
        plus_inf += bits == 0x7F800000u;
    }
    assert_true(positive_nan > 200 && negative_nan > 200);
    assert_true(canonical > 100 && other_payload > 100);
    assert_true(plus_inf > 20);
    capture_record_free(&record);

    params = small_params("subnormal");
    generate_ok(&params, &record);
    for (uint32_t b = 0; b < record.rows; b++) {
        const float *row = capture_row_window(&record, b);
        uint32_t tied = 0, negative = 0;
        for (uint32_t i = 0; i < params.length; i++) {
            uint32_t bits = float_bits(row[i]);
            assert_int_equal(bits & 0x7F800000u, 0);     /* exponent field zero */
            assert_int_not_equal(bits & 0x007FFFFFu, 0); /* not a zero */
            negative += bits >> 31;
            for (uint32_t j = 0; j < i && !tied; j++)
                tied += float_bits(row[j]) == bits;
        }
        assert_true(tied > 0 && negative > 0 && negative < params.length / 2);
    }
    capture_record_free(&record);
}

static void test_every_family_validates_at_edge_shapes(void **state)
{
    (void)state;
    /* Rows of length 0 and 1, k 1 and k far beyond the length (tie needs room for its ties). */
    const uint32_t ks[] = { 1, 3000 };
    for (uint32_t length = 0; length <= 1; length++) {
        for (size_t t = 0; t < 2; t++) {
            for (int f = 0; synth_family_names[f]; f++) {
                const bool tie = strcmp(synth_family_names[f], "tie") == 0;
                struct synth_params params = small_params(synth_family_names[f]);
                params.rows = 2;
                params.length = tie ? 5000 : length;
                params.k = ks[t];
                params.plateau_distinct = length;
                params.tie_count = 2;
                struct capture_record record;
                generate_ok(&params, &record);
                assert_int_equal(record.rows, 2);
                assert_int_equal(record.k, ks[t]);
                for (uint32_t b = 0; b < record.rows; b++)
                    assert_true(record.lengths[b] >= 0 &&
                                (uint32_t)record.lengths[b] <= params.length);
                capture_record_free(&record);
            }
        }
    }
}

/* ---- parameters ---- */

static void expect_usage(struct synth_params params, const char *field)
{
    struct capture_record record;
    struct audit_error err = { 0 };
    int status = synth_generate(&params, &record, &err);
    assert_int_equal(status, AUDIT_EUSAGE);
    if (!strstr(err.message, field))
        fail_msg("error for %s does not name it: %s", field, err.message);
    assert_null(record.scores);
    assert_null(record.metadata_json);
}

static void test_bad_parameters_name_the_field(void **state)
{
    (void)state;
    struct synth_params p = small_params("nosuchfamily");
    expect_usage(p, "family");
    p.family = NULL;
    expect_usage(p, "family");
    p = small_params("random");
    p.rows = 0;
    expect_usage(p, "rows");
    p = small_params("random");
    p.length = (uint32_t)INT32_MAX + 1;
    expect_usage(p, "length");
    p = small_params("tie"); /* no room for the ties in an empty row */
    p.length = 0;
    expect_usage(p, "tie_count");
    p = small_params("random");
    p.k = 0;
    expect_usage(p, "k");
    p.k = CAPTURE_MAX_K + 1;
    expect_usage(p, "k");
    p = small_params("random");
    p.seed = (UINT64_C(1) << 53) + 1;
    expect_usage(p, "seed");
    p = small_params("plateau");
    p.plateau_distinct = p.length + 1;
    expect_usage(p, "plateau_distinct");
    p = small_params("tie");
    p.tie_count = 1;
    expect_usage(p, "tie_count");
    p.tie_count = 2000; /* more ties than the row holds */
    expect_usage(p, "tie_count");
    p = small_params("indexer");
    p.rho = 1.5;
    expect_usage(p, "rho");
    p.rho = NAN;
    expect_usage(p, "rho");
    p.rho = 0.5;
    p.mu = INFINITY;
    expect_usage(p, "mu");
    p.mu = 0.0;
    p.heads = 5000;
    expect_usage(p, "heads");
    p = small_params("paged");
    p.page_size = 48;
    expect_usage(p, "page_size");
    p.page_size = 1;
    p.rows = 1u << 20; /* translated indices past int32 */
    p.length = 4096;
    expect_usage(p, "page_size");
    p = small_params("padded");
    p.length = INT32_MAX;
    p.stride_pad = 10;
    expect_usage(p, "stride_pad");
}

int main(void)
{
    if (hash_init() != 0)
        return 1;
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_rng_matches_reference_streams),
        cmocka_unit_test(test_uniform_is_53_bit_grid),
        cmocka_unit_test(test_normal_agrees_with_libm_polar),
        cmocka_unit_test(test_normal_moments),
        cmocka_unit_test(test_same_seed_same_bytes),
        cmocka_unit_test(test_different_seed_different_scores),
        cmocka_unit_test(test_rows_are_independent_streams),
        cmocka_unit_test(test_golden_digests),
        cmocka_unit_test(test_threads_give_the_same_bytes),
        cmocka_unit_test(test_plateau_has_m_distinct_positives),
        cmocka_unit_test(test_tie_straddles_the_boundary),
        cmocka_unit_test(test_relu_and_narrow_shapes),
        cmocka_unit_test(test_indexer_is_nonnegative_with_a_zero_plateau),
        cmocka_unit_test(test_neginf_and_allequal),
        cmocka_unit_test(test_layout_families),
        cmocka_unit_test(test_paged_tables),
        cmocka_unit_test(test_signedzero_straddles_both_zero_sets),
        cmocka_unit_test(test_nan_payloads_and_subnormal_ties),
        cmocka_unit_test(test_every_family_validates_at_edge_shapes),
        cmocka_unit_test(test_bad_parameters_name_the_field),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
