/* SHA-256 digests of outputs, index sets and bytes, from a library chosen at build time (meson
 * option sha256: libsodium's crypto_hash_sha256_* or OpenSSL's EVP; docs/PERF.md "The audit
 * itself" says which is the default and why); the per-row 64-bit hashes of the GPU pre-filter's
 * host twin. */
#include "hash.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "index_sort.h"
#include "input_file.h"
#include "output_hash.h"

/* One SHA-256 stream: sha256_begin, sha256_update..., sha256_end (which releases it). */
#ifdef DSATOPK_SHA256_OPENSSL
#include <openssl/evp.h>

typedef EVP_MD_CTX *sha256_stream;

int hash_init(void)
{
    return EVP_sha256() ? 0 : -1;
}

/* An EVP context that cannot be made or started aborts: the digests of a report must never be
 * silently wrong, and out of memory at this size is not recoverable here. */
static void sha256_begin(sha256_stream *stream)
{
    *stream = EVP_MD_CTX_new();
    if (!*stream || EVP_DigestInit_ex(*stream, EVP_sha256(), NULL) != 1)
        abort();
}

static void sha256_update(sha256_stream *stream, const void *data, size_t size)
{
    if (EVP_DigestUpdate(*stream, data, size) != 1)
        abort();
}

static void sha256_end(sha256_stream *stream, uint8_t digest[HASH_BYTES])
{
    unsigned int length = 0;
    if (EVP_DigestFinal_ex(*stream, digest, &length) != 1 || length != HASH_BYTES)
        abort();
    EVP_MD_CTX_free(*stream);
}
#else
#include <sodium.h>

typedef crypto_hash_sha256_state sha256_stream;

int hash_init(void)
{
    return sodium_init() < 0 ? -1 : 0;
}

static void sha256_begin(sha256_stream *stream)
{
    crypto_hash_sha256_init(stream);
}

static void sha256_update(sha256_stream *stream, const void *data, size_t size)
{
    crypto_hash_sha256_update(stream, data, size);
}

static void sha256_end(sha256_stream *stream, uint8_t digest[HASH_BYTES])
{
    crypto_hash_sha256_final(stream, digest);
}
#endif

void hash_bytes(const void *data, size_t size, uint8_t digest[HASH_BYTES])
{
    sha256_stream stream;
    sha256_begin(&stream);
    sha256_update(&stream, data, size);
    sha256_end(&stream, digest);
}

int hash_file_range(int fd, uint64_t offset, uint64_t size, uint8_t digest[HASH_BYTES],
                    uint64_t *hashed)
{
    sha256_stream stream;
    *hashed = 0;
    uint8_t *buffer = malloc(HASH_FILE_CHUNK_BYTES);
    if (!buffer) {
        errno = ENOMEM;
        return -1;
    }
    sha256_begin(&stream);
    while (*hashed < size) {
        uint64_t want = size - *hashed < HASH_FILE_CHUNK_BYTES ? size - *hashed
                                                                : HASH_FILE_CHUNK_BYTES;
        uint64_t got = 0;
        if (input_file_read_at(fd, buffer, want, offset + *hashed, &got) < 0) {
            int saved = errno;
            sha256_end(&stream, digest);
            free(buffer);
            errno = saved;
            return -1;
        }
        sha256_update(&stream, buffer, (size_t)got);
        *hashed += got;
        if (got < want)
            break;
    }
    sha256_end(&stream, digest);
    free(buffer);
    return 0;
}

void hash_to_hex(const uint8_t digest[HASH_BYTES], char hex[HASH_HEX_BYTES])
{
    static const char digits[] = "0123456789abcdef";
    for (size_t i = 0; i < HASH_BYTES; i++) {
        hex[2 * i] = digits[digest[i] >> 4];
        hex[2 * i + 1] = digits[digest[i] & 15];
    }
    hex[2 * HASH_BYTES] = '\0';
}

static int is_little_endian(void)
{
    const uint16_t probe = 1;
    uint8_t first;
    memcpy(&first, &probe, 1);
    return first == 1;
}

static void update_indices_le(sha256_stream *stream, const int32_t *indices,
                              size_t count)
{
    if (is_little_endian()) {
        sha256_update(stream, indices, count * sizeof(int32_t));
        return;
    }
    for (size_t i = 0; i < count; i++) {
        uint32_t v = (uint32_t)indices[i];
        unsigned char le[4] = { (unsigned char)v, (unsigned char)(v >> 8),
                                (unsigned char)(v >> 16), (unsigned char)(v >> 24) };
        sha256_update(stream, le, 4);
    }
}

void hash_indices(const int32_t *indices, size_t count, uint8_t digest[HASH_BYTES])
{
    sha256_stream stream;
    sha256_begin(&stream);
    update_indices_le(&stream, indices, count);
    sha256_end(&stream, digest);
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
    sha256_stream stream;
    sha256_begin(&stream);
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
    sha256_end(&stream, digest);
    free(row);
    return 0;
}

void hash_sorted_index_rows(const int32_t *const *sorted_rows, uint32_t rows, uint32_t k,
                            uint8_t digest[HASH_BYTES])
{
    sha256_stream stream;
    sha256_begin(&stream);
    for (uint32_t b = 0; b < rows; b++)
        update_indices_le(&stream, sorted_rows[b], k);
    sha256_end(&stream, digest);
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
