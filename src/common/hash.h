/* SHA-256 helpers for output, set and score hashes (libsodium or OpenSSL: meson option sha256). */
#ifndef DSATOPK_HASH_H
#define DSATOPK_HASH_H

#include <stddef.h>
#include <stdint.h>

#define HASH_BYTES 32
#define HASH_HEX_BYTES 65

/* Starts the SHA-256 library; call once at start-up. 0 on success, -1 if it cannot. */
int hash_init(void);

void hash_bytes(const void *data, size_t size, uint8_t digest[HASH_BYTES]);
/* SHA-256 of size bytes of the open file fd from offset, read with pread() in pieces of
 * HASH_FILE_CHUNK_BYTES, so memory stays bounded whatever size is (the file offset is not moved).
 * Returns 0 with *hashed == size; 0 with *hashed < size when the file ends first (digest then
 * meaningless); -1 with errno set on a read error or when the buffer cannot be allocated. */
#define HASH_FILE_CHUNK_BYTES ((size_t)1 << 20)
int hash_file_range(int fd, uint64_t offset, uint64_t size, uint8_t digest[HASH_BYTES],
                    uint64_t *hashed);
void hash_to_hex(const uint8_t digest[HASH_BYTES], char hex[HASH_HEX_BYTES]);

/* Hash of rows x k int32 indices as little-endian bytes (what --dump-outputs writes). */
void hash_indices(const int32_t *indices, size_t count, uint8_t digest[HASH_BYTES]);

/* Hash of the same indices with each row's k entries sorted ascending (the "set" hash). */
int hash_index_sets(const int32_t *indices, uint32_t rows, uint32_t k, uint8_t digest[HASH_BYTES]);
/* The same hash, given rows x k indices known_sorted that are the rows of known each sorted
 * ascending: a row of indices equal to the same row of known takes its sorted row from there
 * instead of being sorted again (the outputs of one backend mostly repeat rows of the first).
 * known and known_sorted may be NULL. Returns 0, or -1 when out of memory. */
int hash_index_sets_reusing(const int32_t *indices, uint32_t rows, uint32_t k,
                            const int32_t *known, const int32_t *known_sorted,
                            uint8_t digest[HASH_BYTES]);

/* The same hash of rows whose sorted entries are already at sorted_rows[b] (k each): for a
 * caller that sorted the rows elsewhere (on several threads); the SHA-256 itself is one stream. */
void hash_sorted_index_rows(const int32_t *const *sorted_rows, uint32_t rows, uint32_t k,
                            uint8_t digest[HASH_BYTES]);

/* Per-row 64-bit hashes of rows x k indices and their raw indices (NULL: none): the host twin of
 * the device pre-filter (kernels/include/output_hash.h), equal to it bit for bit. Not a SHA-256:
 * rows differing in one slot always differ, rows differing in more collide with probability
 * ~2^-64. */
void hash_output_rows64(const int32_t *out, const int32_t *raw_out, uint32_t rows, uint32_t k,
                        uint64_t *row_hashes);

#endif
