#include "hash.h"

#include <errno.h>
#include <sodium.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "index_sort.h"
#include "input_file.h"
#include "output_hash.h"

/* ---- SHA-256 with the x86 SHA extensions ----------------------------------------------------
 *
 * libsodium's SHA-256 is portable C: 194 MB/s on the H200 machine's host, where OpenSSL's
 * SHA-NI code does 960 MB/s (docs/PERF.md "The audit itself"). `run` hashes every new distinct
 * output twice (output and set hash), so on CPUs with the SHA extensions the compression
 * function below does the blocks; padding and the stream are ours too (FIPS 180-4, 5.1.1 and
 * 6.2). Every CPU without the extensions stays on libsodium; tests compare the two on every
 * path (tests/test_hash.c). */

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#define HASH_HAVE_SHA_NI 1
#include <cpuid.h>
#include <immintrin.h>

static const uint32_t sha256_round_constants[64] = {
    0x428a2f98, 0x71374491, 0xb5c0fbcf, 0xe9b5dba5, 0x3956c25b, 0x59f111f1, 0x923f82a4, 0xab1c5ed5,
    0xd807aa98, 0x12835b01, 0x243185be, 0x550c7dc3, 0x72be5d74, 0x80deb1fe, 0x9bdc06a7, 0xc19bf174,
    0xe49b69c1, 0xefbe4786, 0x0fc19dc6, 0x240ca1cc, 0x2de92c6f, 0x4a7484aa, 0x5cb0a9dc, 0x76f988da,
    0x983e5152, 0xa831c66d, 0xb00327c8, 0xbf597fc7, 0xc6e00bf3, 0xd5a79147, 0x06ca6351, 0x14292967,
    0x27b70a85, 0x2e1b2138, 0x4d2c6dfc, 0x53380d13, 0x650a7354, 0x766a0abb, 0x81c2c92e, 0x92722c85,
    0xa2bfe8a1, 0xa81a664b, 0xc24b8b70, 0xc76c51a3, 0xd192e819, 0xd6990624, 0xf40e3585, 0x106aa070,
    0x19a4c116, 0x1e376c08, 0x2748774c, 0x34b0bcb5, 0x391c0cb3, 0x4ed8aa4a, 0x5b9cca4f, 0x682e6ff3,
    0x748f82ee, 0x78a5636f, 0x84c87814, 0x8cc70208, 0x90befffa, 0xa4506ceb, 0xbef9a3f7, 0xc67178f2,
};

/* Runs blocks 64-byte blocks through the compression function. sha256rnds2 keeps the working
 * variables as (A, B, E, F) and (C, D, G, H) and does two rounds per instruction; each group of
 * four message words comes from the four groups before it (sha256msg1, sha256msg2). */
__attribute__((target("sha,sse4.1,ssse3"))) static void
sha256_blocks_sha_ni(uint32_t state[8], const uint8_t *data, size_t blocks)
{
    const __m128i byte_swap = _mm_set_epi64x(0x0c0d0e0f08090a0bll, 0x0405060700010203ll);
    const __m128i dcba = _mm_loadu_si128((const __m128i *)&state[0]);
    const __m128i hgfe = _mm_loadu_si128((const __m128i *)&state[4]);
    const __m128i cdab = _mm_shuffle_epi32(dcba, 0xB1);
    const __m128i efgh = _mm_shuffle_epi32(hgfe, 0x1B);
    __m128i abef = _mm_alignr_epi8(cdab, efgh, 8);
    __m128i cdgh = _mm_blend_epi16(efgh, cdab, 0xF0);
    for (; blocks > 0; blocks--, data += 64) {
        const __m128i abef_start = abef, cdgh_start = cdgh;
        __m128i schedule[4]; /* the last four groups of message words, group g at g % 4 */
#pragma GCC unroll 16
        for (int group = 0; group < 16; group++) {
            __m128i words;
            if (group < 4) {
                words = _mm_loadu_si128((const __m128i *)(data + 16 * group));
                words = _mm_shuffle_epi8(words, byte_swap);
            } else {
                const __m128i back4 = schedule[group % 4], back3 = schedule[(group - 3) % 4];
                const __m128i back2 = schedule[(group - 2) % 4];
                const __m128i back1 = schedule[(group - 1) % 4];
                words = _mm_sha256msg1_epu32(back4, back3);
                words = _mm_add_epi32(words, _mm_alignr_epi8(back1, back2, 4));
                words = _mm_sha256msg2_epu32(words, back1);
            }
            schedule[group % 4] = words;
            const __m128i plus_constants = _mm_add_epi32(
                words, _mm_loadu_si128((const __m128i *)&sha256_round_constants[4 * group]));
            /* Two rounds, twice: after two rounds the old (A, B, E, F) is the new (C, D, G, H),
             * so the registers trade roles and are back in place after four. */
            cdgh = _mm_sha256rnds2_epu32(cdgh, abef, plus_constants);
            abef = _mm_sha256rnds2_epu32(abef, cdgh, _mm_shuffle_epi32(plus_constants, 0x0E));
        }
        abef = _mm_add_epi32(abef, abef_start);
        cdgh = _mm_add_epi32(cdgh, cdgh_start);
    }
    const __m128i feba = _mm_shuffle_epi32(abef, 0x1B);
    const __m128i dchg = _mm_shuffle_epi32(cdgh, 0xB1);
    _mm_storeu_si128((__m128i *)&state[0], _mm_blend_epi16(feba, dchg, 0xF0));
    _mm_storeu_si128((__m128i *)&state[4], _mm_alignr_epi8(dchg, feba, 8));
}

static bool cpu_has_sha_ni(void)
{
    unsigned eax, ebx, ecx, edx;
    if (!__get_cpuid(1, &eax, &ebx, &ecx, &edx) || !(ecx & bit_SSSE3) || !(ecx & bit_SSE4_1))
        return false;
    if (!__get_cpuid_count(7, 0, &eax, &ebx, &ecx, &edx))
        return false;
    return (ebx & bit_SHA) != 0;
}
#else
#define HASH_HAVE_SHA_NI 0
static void sha256_blocks_sha_ni(uint32_t state[8], const uint8_t *data, size_t blocks)
{
    (void)state;
    (void)data;
    (void)blocks;
}

static bool cpu_has_sha_ni(void)
{
    return false;
}
#endif

/* Chosen by hash_init (and by hash_sha256_use in tests and benchmarks). */
static bool use_sha_ni;

int hash_init(void)
{
    if (sodium_init() < 0)
        return -1;
    /* DSATOPK_SHA256=libsodium keeps libsodium everywhere (to compare, or to rule ours out). */
    const char *choice = getenv("DSATOPK_SHA256");
    use_sha_ni = cpu_has_sha_ni() && !(choice && !strcmp(choice, "libsodium"));
    return 0;
}

int hash_sha256_use(enum hash_sha256_code code)
{
    if (code == HASH_SHA256_SHA_NI && !cpu_has_sha_ni())
        return -1;
    use_sha_ni = code == HASH_SHA256_SHA_NI;
    return 0;
}

const char *hash_sha256_code_name(void)
{
    return use_sha_ni ? "sha-ni" : "libsodium";
}

/* One SHA-256 computation, streamed: libsodium's, or ours on the SHA extensions. */
struct sha256_stream {
    bool sha_ni;
    crypto_hash_sha256_state sodium;
    uint32_t state[8];
    uint64_t bytes;     /* taken so far, the buffered ones included */
    uint8_t buffer[64]; /* a partial block */
    size_t buffered;
};

static void stream_init(struct sha256_stream *stream)
{
    static const uint32_t initial[8] = { 0x6a09e667, 0xbb67ae85, 0x3c6ef372, 0xa54ff53a,
                                         0x510e527f, 0x9b05688c, 0x1f83d9ab, 0x5be0cd19 };
    stream->sha_ni = use_sha_ni;
    if (!stream->sha_ni) {
        crypto_hash_sha256_init(&stream->sodium);
        return;
    }
    memcpy(stream->state, initial, sizeof(initial));
    stream->bytes = 0;
    stream->buffered = 0;
}

static void stream_update(struct sha256_stream *stream, const void *data, size_t size)
{
    if (!stream->sha_ni) {
        crypto_hash_sha256_update(&stream->sodium, data, size);
        return;
    }
    const uint8_t *cursor = data;
    stream->bytes += size;
    if (stream->buffered > 0) {
        const size_t take = 64 - stream->buffered < size ? 64 - stream->buffered : size;
        memcpy(stream->buffer + stream->buffered, cursor, take);
        stream->buffered += take;
        cursor += take;
        size -= take;
        if (stream->buffered < 64)
            return;
        sha256_blocks_sha_ni(stream->state, stream->buffer, 1);
        stream->buffered = 0;
    }
    sha256_blocks_sha_ni(stream->state, cursor, size / 64);
    cursor += size / 64 * 64;
    stream->buffered = size % 64;
    memcpy(stream->buffer, cursor, stream->buffered);
}

static void stream_final(struct sha256_stream *stream, uint8_t digest[HASH_BYTES])
{
    if (!stream->sha_ni) {
        crypto_hash_sha256_final(&stream->sodium, digest);
        return;
    }
    /* 0x80, zeros up to 56 bytes into a block, then the length in bits, big-endian. */
    const uint64_t bits = stream->bytes * 8;
    uint8_t tail[72] = { 0x80 };
    const size_t pad = stream->buffered < 56 ? 56 - stream->buffered : 120 - stream->buffered;
    for (int i = 0; i < 8; i++)
        tail[pad + (size_t)i] = (uint8_t)(bits >> (56 - 8 * i));
    stream_update(stream, tail, pad + 8);
    for (int i = 0; i < 8; i++) {
        digest[4 * i] = (uint8_t)(stream->state[i] >> 24);
        digest[4 * i + 1] = (uint8_t)(stream->state[i] >> 16);
        digest[4 * i + 2] = (uint8_t)(stream->state[i] >> 8);
        digest[4 * i + 3] = (uint8_t)stream->state[i];
    }
}

void hash_bytes(const void *data, size_t size, uint8_t digest[HASH_BYTES])
{
    struct sha256_stream stream;
    stream_init(&stream);
    stream_update(&stream, data, size);
    stream_final(&stream, digest);
}

int hash_file_range(int fd, uint64_t offset, uint64_t size, uint8_t digest[HASH_BYTES],
                    uint64_t *hashed)
{
    struct sha256_stream stream;
    *hashed = 0;
    uint8_t *buffer = malloc(HASH_FILE_CHUNK_BYTES);
    if (!buffer) {
        errno = ENOMEM;
        return -1;
    }
    stream_init(&stream);
    while (*hashed < size) {
        uint64_t want = size - *hashed < HASH_FILE_CHUNK_BYTES ? size - *hashed
                                                                : HASH_FILE_CHUNK_BYTES;
        uint64_t got = 0;
        if (input_file_read_at(fd, buffer, want, offset + *hashed, &got) < 0) {
            int saved = errno;
            free(buffer);
            errno = saved;
            return -1;
        }
        stream_update(&stream, buffer, (size_t)got);
        *hashed += got;
        if (got < want)
            break;
    }
    stream_final(&stream, digest);
    free(buffer);
    return 0;
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

static void update_indices_le(struct sha256_stream *stream, const int32_t *indices, size_t count)
{
    if (is_little_endian()) {
        stream_update(stream, indices, count * sizeof(int32_t));
        return;
    }
    for (size_t i = 0; i < count; i++) {
        uint32_t v = (uint32_t)indices[i];
        unsigned char le[4] = { (unsigned char)v, (unsigned char)(v >> 8),
                                (unsigned char)(v >> 16), (unsigned char)(v >> 24) };
        stream_update(stream, le, 4);
    }
}

void hash_indices(const int32_t *indices, size_t count, uint8_t digest[HASH_BYTES])
{
    struct sha256_stream stream;
    stream_init(&stream);
    update_indices_le(&stream, indices, count);
    stream_final(&stream, digest);
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
    struct sha256_stream stream;
    stream_init(&stream);
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
    stream_final(&stream, digest);
    free(row);
    return 0;
}

void hash_sorted_index_rows(const int32_t *const *sorted_rows, uint32_t rows, uint32_t k,
                            uint8_t digest[HASH_BYTES])
{
    struct sha256_stream stream;
    stream_init(&stream);
    for (uint32_t b = 0; b < rows; b++)
        update_indices_le(&stream, sorted_rows[b], k);
    stream_final(&stream, digest);
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
