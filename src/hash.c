#include "hash.h"

#include <sodium.h>
#include <stdlib.h>
#include <string.h>

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

static void update_indices_le(crypto_hash_sha256_state *state, const int32_t *indices, size_t count)
{
    if (is_little_endian()) {
        crypto_hash_sha256_update(state, (const unsigned char *)indices, count * sizeof(int32_t));
        return;
    }
    for (size_t i = 0; i < count; i++) {
        uint32_t v = (uint32_t)indices[i];
        unsigned char le[4] = { (unsigned char)v, (unsigned char)(v >> 8),
                                (unsigned char)(v >> 16), (unsigned char)(v >> 24) };
        crypto_hash_sha256_update(state, le, 4);
    }
}

void hash_indices(const int32_t *indices, size_t count, uint8_t digest[HASH_BYTES])
{
    crypto_hash_sha256_state state;
    crypto_hash_sha256_init(&state);
    update_indices_le(&state, indices, count);
    crypto_hash_sha256_final(&state, digest);
}

static int compare_int32(const void *a, const void *b)
{
    int32_t x = *(const int32_t *)a, y = *(const int32_t *)b;
    return (x > y) - (x < y);
}

int hash_index_sets(const int32_t *indices, uint32_t rows, uint32_t k, uint8_t digest[HASH_BYTES])
{
    int32_t *row = malloc((size_t)(k ? k : 1) * sizeof(int32_t));
    if (!row)
        return -1;
    crypto_hash_sha256_state state;
    crypto_hash_sha256_init(&state);
    for (uint32_t b = 0; b < rows; b++) {
        memcpy(row, indices + (size_t)b * k, (size_t)k * sizeof(int32_t));
        qsort(row, k, sizeof(int32_t), compare_int32);
        update_indices_le(&state, row, k);
    }
    crypto_hash_sha256_final(&state, digest);
    free(row);
    return 0;
}
