/* SHA-256 (libsodium) helpers for output, set and score hashes. */
#ifndef DSATOPK_HASH_H
#define DSATOPK_HASH_H

#include <stddef.h>
#include <stdint.h>

#define HASH_BYTES 32
#define HASH_HEX_BYTES 65

int hash_init(void); /* sodium_init once; 0 on success */
void hash_bytes(const void *data, size_t size, uint8_t digest[HASH_BYTES]);
void hash_to_hex(const uint8_t digest[HASH_BYTES], char hex[HASH_HEX_BYTES]);

/* Hash of rows x k int32 indices as little-endian bytes (what --dump-outputs writes). */
void hash_indices(const int32_t *indices, size_t count, uint8_t digest[HASH_BYTES]);

/* Hash of the same indices with each row's k entries sorted ascending (the "set" hash). */
int hash_index_sets(const int32_t *indices, uint32_t rows, uint32_t k, uint8_t digest[HASH_BYTES]);

#endif
