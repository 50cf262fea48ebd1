/* Unit tests of src/common/hash.c's per-row 64-bit hashes (hash_output_rows64), the host twin of
 * the GPU pre-filter of `run` (kernels/include/output_hash.h; tests/gpu/test_gpu_row_hash.c checks
 * that the device computes the same values). What the pre-filter relies on:
 * - a row that differs in exactly one slot (output or raw output) always hashes differently;
 * - the hash depends on where each value sits (swapped entries differ), not on other rows;
 * - the raw output counts, and an output with a raw output differs from the one without;
 * - fixed values, so a change of the function (which the device must follow) is noticed.
 * And of its SHA-256 digests (libsodium's): the FIPS 180-4 example; hash_indices is the digest
 * of the indices' little-endian bytes; rows streamed one update each (every size that leaves a
 * partial block) give the one-shot digest of the same bytes; and the set hash equals sorting
 * each row with qsort and hashing the rows one after the other, with or without known sorted
 * rows to reuse. */
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>
#include <sodium.h>

#include "hash.h"
#include "output_hash.h"

#define ROWS 3
#define K 5

static const int32_t sample_out[ROWS * K] = {
    7, 1, 4, -1, -1, /* a short row padded with -1 */
    0, 5, 2, 9, 3,
    (int32_t)0xA5A5A5A5, 2, 8, 6, 4, /* a poison slot */
};

/* splitmix64: values for the randomised cases, the same on every machine. */
static uint64_t next_value(uint64_t *state)
{
    uint64_t z = (*state += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

static void test_row_hash_is_the_sum_of_slot_terms(void **state)
{
    (void)state;
    uint64_t hashes[ROWS];
    hash_output_rows64(sample_out, NULL, ROWS, K, hashes);
    for (uint32_t b = 0; b < ROWS; b++) {
        uint64_t expected = 0;
        for (uint32_t j = 0; j < K; j++)
            expected += output_hash_slot(j, sample_out[b * K + j]);
        assert_true(hashes[b] == expected);
    }
    /* Pinned values (computed independently in Python): the device kernel computes the same
     * function, so changing it must be a deliberate change of both. */
    assert_true(output_hash_slot(0, 0) == 0xBD0ED0D08A42A70Cull);
    assert_true(hashes[0] == 0xD9F819E5750DE7E2ull);
    assert_true(hashes[1] == 0x46A33D950D7F6E00ull);
    assert_true(hashes[2] == 0x3C56AF7F8945008Bull);
    assert_true(output_hash_slot(0, 0) != output_hash_slot(1, 0));
    assert_true(output_hash_slot(0, 0) != output_hash_slot(0, 1));
    assert_true(output_hash_slot(0, -1) != output_hash_slot(0, 0));
}

static void test_one_changed_slot_always_changes_the_row(void **state)
{
    (void)state;
    uint64_t random_state = 42;
    int32_t out[ROWS * K], raw[ROWS * K];
    uint64_t before[ROWS], after[ROWS];
    for (int trial = 0; trial < 20000; trial++) {
        for (size_t i = 0; i < ROWS * K; i++) {
            out[i] = (int32_t)(next_value(&random_state) % 64) - 1;
            raw[i] = (int32_t)(next_value(&random_state) % 64) - 1;
        }
        const bool with_raw = trial % 2;
        hash_output_rows64(out, with_raw ? raw : NULL, ROWS, K, before);
        const uint32_t slot = (uint32_t)(next_value(&random_state) % (ROWS * K));
        int32_t *target = with_raw && trial % 4 == 1 ? raw : out;
        const int32_t old_value = target[slot];
        int32_t new_value = (int32_t)(next_value(&random_state) % 64) - 1;
        if (new_value == old_value)
            new_value = old_value + 1;
        target[slot] = new_value;
        hash_output_rows64(out, with_raw ? raw : NULL, ROWS, K, after);
        for (uint32_t b = 0; b < ROWS; b++) {
            if (b == slot / K)
                assert_true(after[b] != before[b]);
            else
                assert_true(after[b] == before[b]); /* other rows are untouched */
        }
    }
}

static void test_position_and_raw_output_count(void **state)
{
    (void)state;
    int32_t swapped[ROWS * K];
    uint64_t hashes[ROWS], swapped_hashes[ROWS], raw_hashes[ROWS], other_raw_hashes[ROWS];
    memcpy(swapped, sample_out, sizeof(swapped));
    /* Row 1 with two entries swapped: the same set, another output. */
    swapped[K + 0] = sample_out[K + 1];
    swapped[K + 1] = sample_out[K + 0];
    hash_output_rows64(sample_out, NULL, ROWS, K, hashes);
    hash_output_rows64(swapped, NULL, ROWS, K, swapped_hashes);
    assert_true(hashes[0] == swapped_hashes[0]);
    assert_true(hashes[1] != swapped_hashes[1]);

    /* The raw output takes part: with and without it, and with another raw output. */
    int32_t raw[ROWS * K];
    memcpy(raw, sample_out, sizeof(raw));
    hash_output_rows64(sample_out, raw, ROWS, K, raw_hashes);
    for (uint32_t b = 0; b < ROWS; b++)
        assert_true(raw_hashes[b] != hashes[b]);
    raw[2 * K + 4] = 11;
    hash_output_rows64(sample_out, raw, ROWS, K, other_raw_hashes);
    assert_true(other_raw_hashes[2] != raw_hashes[2]);
    assert_true(other_raw_hashes[0] == raw_hashes[0]);

    /* The same row in two places of an output hashes the same: rows are compared one by one. */
    int32_t repeated[2 * K];
    memcpy(repeated, sample_out + K, K * sizeof(int32_t));
    memcpy(repeated + K, sample_out + K, K * sizeof(int32_t));
    uint64_t repeated_hashes[2];
    hash_output_rows64(repeated, NULL, 2, K, repeated_hashes);
    assert_true(repeated_hashes[0] == repeated_hashes[1] && repeated_hashes[0] == hashes[1]);
}


static int compare_int32(const void *a, const void *b)
{
    int32_t x = *(const int32_t *)a, y = *(const int32_t *)b;
    return (x > y) - (x < y);
}

static void test_sha256_digests(void **state)
{
    (void)state;
    uint8_t digest[HASH_BYTES], expected[HASH_BYTES];
    /* FIPS 180-4 example "abc". */
    static const uint8_t abc_digest[HASH_BYTES] = {
        0xba, 0x78, 0x16, 0xbf, 0x8f, 0x01, 0xcf, 0xea, 0x41, 0x41, 0x40, 0xde, 0x5d, 0xae, 0x22,
        0x23, 0xb0, 0x03, 0x61, 0xa3, 0x96, 0x17, 0x7a, 0x9c, 0xb4, 0x10, 0xff, 0x61, 0xf2, 0x00,
        0x15, 0xad,
    };
    hash_bytes("abc", 3, digest);
    assert_memory_equal(digest, abc_digest, HASH_BYTES);

    /* hash_indices hashes the little-endian bytes (this test runs on little-endian hosts). */
    const size_t count = 65536 + 7;
    int32_t *indices = malloc(count * sizeof(int32_t));
    assert_non_null(indices);
    uint64_t random_state = 3;
    for (size_t i = 0; i < count; i++)
        indices[i] = (int32_t)next_value(&random_state);
    hash_indices(indices, count, digest);
    crypto_hash_sha256(expected, (const unsigned char *)indices, count * sizeof(int32_t));
    assert_memory_equal(digest, expected, HASH_BYTES);
    free(indices);
}

/* The set hash as it was defined: each row sorted with qsort, the rows hashed in order. */
static void expected_set_hash(const int32_t *indices, uint32_t rows, uint32_t k,
                              uint8_t digest[HASH_BYTES])
{
    int32_t *row = malloc((k ? k : 1) * sizeof(int32_t));
    assert_non_null(row);
    crypto_hash_sha256_state sha;
    crypto_hash_sha256_init(&sha);
    for (uint32_t b = 0; b < rows; b++) {
        memcpy(row, indices + (size_t)b * k, k * sizeof(int32_t));
        qsort(row, k, sizeof(int32_t), compare_int32);
        crypto_hash_sha256_update(&sha, (const unsigned char *)row, k * sizeof(int32_t));
    }
    crypto_hash_sha256_final(&sha, digest);
    free(row);
}

/* Rows of k int32 each are one update each: sizes 4 to 68 bytes leave every partial block. */
static void test_sha256_streamed_updates(void **state)
{
    (void)state;
    uint64_t random_state = 5;
    int32_t data[17 * 23];
    for (size_t i = 0; i < sizeof(data) / sizeof(data[0]); i++)
        data[i] = (int32_t)next_value(&random_state);
    for (uint32_t k = 1; k <= 17; k++) {
        for (uint32_t rows = 0; rows <= 23; rows++) {
            const int32_t *row_pointers[23];
            for (uint32_t b = 0; b < rows; b++)
                row_pointers[b] = data + (size_t)b * k;
            uint8_t digest[HASH_BYTES], expected[HASH_BYTES];
            hash_sorted_index_rows(row_pointers, rows, k, digest);
            crypto_hash_sha256(expected, (const unsigned char *)data, (size_t)rows * k * 4);
            assert_memory_equal(digest, expected, HASH_BYTES);
        }
    }
}

static void test_set_hash_sorts_rows_and_reuses_known_ones(void **state)
{
    (void)state;
    /* k = 5 and 37: rows of 20 and 148 bytes, so the row updates straddle SHA-256 blocks. */
    static const uint32_t ks[] = { 5, 37, 2048 };
    uint64_t random_state = 11;
    for (size_t ki = 0; ki < sizeof(ks) / sizeof(ks[0]); ki++) {
        const uint32_t k = ks[ki], rows = 40;
        const size_t count = (size_t)rows * k;
        int32_t *out = malloc(count * sizeof(int32_t));
        int32_t *known = malloc(count * sizeof(int32_t));
        int32_t *known_sorted = malloc(count * sizeof(int32_t));
        assert_non_null(out);
        assert_non_null(known);
        assert_non_null(known_sorted);
        for (size_t i = 0; i < count; i++)
            out[i] = (int32_t)(next_value(&random_state) % 4096) - 1;
        /* known: every third row equals out's, the others differ in one slot. */
        memcpy(known, out, count * sizeof(int32_t));
        for (uint32_t b = 0; b < rows; b++)
            if (b % 3)
                known[(size_t)b * k] += 1;
        memcpy(known_sorted, known, count * sizeof(int32_t));
        for (uint32_t b = 0; b < rows; b++)
            qsort(known_sorted + (size_t)b * k, k, sizeof(int32_t), compare_int32);

        uint8_t expected[HASH_BYTES], digest[HASH_BYTES];
        expected_set_hash(out, rows, k, expected);
        assert_int_equal(hash_index_sets(out, rows, k, digest), 0);
        assert_memory_equal(digest, expected, HASH_BYTES);
        assert_int_equal(hash_index_sets_reusing(out, rows, k, known, known_sorted, digest), 0);
        assert_memory_equal(digest, expected, HASH_BYTES);

        /* Rows sorted elsewhere: the same digest from pointers to them. */
        const int32_t **sorted_rows = malloc(rows * sizeof(*sorted_rows));
        assert_non_null(sorted_rows);
        memcpy(known, out, count * sizeof(int32_t));
        for (uint32_t b = 0; b < rows; b++) {
            qsort(known + (size_t)b * k, k, sizeof(int32_t), compare_int32);
            sorted_rows[b] = known + (size_t)b * k;
        }
        hash_sorted_index_rows(sorted_rows, rows, k, digest);
        assert_memory_equal(digest, expected, HASH_BYTES);
        free(sorted_rows);
        memcpy(known, out, count * sizeof(int32_t));
        for (uint32_t b = 0; b < rows; b++)
            if (b % 3)
                known[(size_t)b * k] += 1;

        /* A row equal to known's takes known_sorted's row as it is (not sorted again). */
        int32_t swap = known_sorted[0];
        known_sorted[0] = known_sorted[1];
        known_sorted[1] = swap;
        assert_int_equal(hash_index_sets_reusing(out, rows, k, known, known_sorted, digest), 0);
        assert_memory_not_equal(digest, expected, HASH_BYTES);
        free(known_sorted);
        free(known);
        free(out);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_row_hash_is_the_sum_of_slot_terms),
        cmocka_unit_test(test_one_changed_slot_always_changes_the_row),
        cmocka_unit_test(test_position_and_raw_output_count),
        cmocka_unit_test(test_sha256_digests),
        cmocka_unit_test(test_sha256_streamed_updates),
        cmocka_unit_test(test_set_hash_sorts_rows_and_reuses_known_ones),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
