/* SHA-256 digests of outputs, index sets and bytes, all by libsodium (crypto_hash_sha256_*);
 * the per-row 64-bit hashes of the GPU pre-filter's host twin. */
#include "hash.h"

#include <sodium.h>
#include <stdlib.h>
#include <string.h>

#include "index_sort.h"
#include "output_hash.h"

int hash_init(void)
{
    return sodium_init() < 0 ? -1 : 0;
}

void hash_bytes(const void *data, size_t size, uint8_t digest[HASH_BYTES])
{
    crypto_hash_sha256(digest, data, size);
}

void hash_to_hex(const uint8_t digest[HASH_BYTES], char hex[HASH_HEX_BYTES])
{
    sodium_bin2hex(hex, HASH_HEX_BYTES, digest, HASH_BYTES);
}

static int is_little_endian(void)
{
    const uint16_t probe = 1;
    uint8_t first;
    memcpy(&first, &probe, 1);
    return first == 1;
}

static void update_indices_le(crypto_hash_sha256_state *stream, const int32_t *indices,
                              size_t count)
{
    if (is_little_endian()) {
        crypto_hash_sha256_update(stream, (const unsigned char *)indices,
                                  count * sizeof(int32_t));
        return;
    }
    for (size_t i = 0; i < count; i++) {
        uint32_t v = (uint32_t)indices[i];
        unsigned char le[4] = { (unsigned char)v, (unsigned char)(v >> 8),
                                (unsigned char)(v >> 16), (unsigned char)(v >> 24) };
        crypto_hash_sha256_update(stream, le, 4);
    }
}

void hash_indices(const int32_t *indices, size_t count, uint8_t digest[HASH_BYTES])
{
    crypto_hash_sha256_state stream;
    crypto_hash_sha256_init(&stream);
    update_indices_le(&stream, indices, count);
    crypto_hash_sha256_final(&stream, digest);
}

int hash_index_sets(const int32_t *indices, uint32_t rows, uint32_t k, uint8_t digest[HASH_BYTES])
{
    return hash_index_sets_reusing(indices, rows, k, NULL, NULL, digest);
}

int hash_index_sets_reusing(const int32_t *indices, uint32_t rows, uint32_t k,
                            const int32_t *known, const int32_t *known_sorted,
                            uint8_t digest[HASH_BYTES])
{
    /* One row being sorted and the sort's scratch. */
    int32_t *row = malloc(2 * (size_t)(k ? k : 1) * sizeof(int32_t));
    if (!row)
        return -1;
    int32_t *sort_scratch = row + (k ? k : 1);
    const size_t row_bytes = (size_t)k * sizeof(int32_t);
    crypto_hash_sha256_state stream;
    crypto_hash_sha256_init(&stream);
    for (uint32_t b = 0; b < rows; b++) {
        const size_t offset = (size_t)b * k;
        if (known && !memcmp(indices + offset, known + offset, row_bytes)) {
            update_indices_le(&stream, known_sorted + offset, k);
            continue;
        }
        memcpy(row, indices + offset, row_bytes);
        index_sort_ascending(row, k, sort_scratch);
        update_indices_le(&stream, row, k);
    }
    crypto_hash_sha256_final(&stream, digest);
    free(row);
    return 0;
}

void hash_sorted_index_rows(const int32_t *const *sorted_rows, uint32_t rows, uint32_t k,
                            uint8_t digest[HASH_BYTES])
{
    crypto_hash_sha256_state stream;
    crypto_hash_sha256_init(&stream);
    for (uint32_t b = 0; b < rows; b++)
        update_indices_le(&stream, sorted_rows[b], k);
    crypto_hash_sha256_final(&stream, digest);
}

void hash_output_rows64(const int32_t *out, const int32_t *raw_out, uint32_t rows, uint32_t k,
                        uint64_t *row_hashes)
{
    for (uint32_t b = 0; b < rows; b++) {
        const int32_t *out_row = out + (size_t)b * k;
        uint64_t sum = 0;
        for (uint32_t j = 0; j < k; j++)
            sum += output_hash_slot(j, out_row[j]);
        if (raw_out) {
            const int32_t *raw_row = raw_out + (size_t)b * k;
            for (uint32_t j = 0; j < k; j++)
                sum += output_hash_slot((uint64_t)k + j, raw_row[j]);
        }
        row_hashes[b] = sum;
    }
}
