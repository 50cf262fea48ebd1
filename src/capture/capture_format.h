/* The byte layout of capture records (docs/FORMAT.md), shared by the reader (capture.c), the
 * writer (capture_write.c) and the tail check (capture_tail.c): header fields, payload layout,
 * little-endian access and overflow-checked sizes. Internal to src/capture. */
#ifndef DSATOPK_CAPTURE_FORMAT_H
#define DSATOPK_CAPTURE_FORMAT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "capture.h"
#include "error.h"

#define CAPTURE_HEADER_BYTES CAPTURE_RECORD_HEADER_BYTES
#define CAPTURE_HEADER_CRC_COVERED_BYTES 68
#define CAPTURE_FIXED_PART_BYTES 64
#define CAPTURE_FORMAT_MAJOR 1
#define CAPTURE_FORMAT_MINOR 0

#define CAPTURE_HEADER_FLAG_ZLIB 0x1u
#define CAPTURE_SECTION_ROW_STARTS 0x1u
#define CAPTURE_SECTION_PAGE_TABLE 0x2u
#define CAPTURE_SECTION_ENGINE_INDICES 0x4u
#define CAPTURE_SECTIONS_KNOWN \
    (CAPTURE_SECTION_ROW_STARTS | CAPTURE_SECTION_PAGE_TABLE | CAPTURE_SECTION_ENGINE_INDICES)

/* Deflate's densest code is a 258-byte match in about two bits, so a zlib stream never
 * inflates to more than 1032 times its size; larger claims are refused before allocating. */
#define CAPTURE_ZLIB_MAX_RATIO 1032u

extern const uint8_t capture_magic[8];

/* ---- little-endian fields and arrays ---- */

static inline uint16_t capture_load_u16(const uint8_t *p)
{
    return (uint16_t)(p[0] | (p[1] << 8));
}

static inline uint32_t capture_load_u32(const uint8_t *p)
{
    return (uint32_t)p[0] | ((uint32_t)p[1] << 8) | ((uint32_t)p[2] << 16) | ((uint32_t)p[3] << 24);
}

static inline uint64_t capture_load_u64(const uint8_t *p)
{
    return (uint64_t)capture_load_u32(p) | ((uint64_t)capture_load_u32(p + 4) << 32);
}

static inline void capture_store_u16(uint8_t *p, uint16_t v)
{
    p[0] = (uint8_t)v;
    p[1] = (uint8_t)(v >> 8);
}

static inline void capture_store_u32(uint8_t *p, uint32_t v)
{
    for (int i = 0; i < 4; i++)
        p[i] = (uint8_t)(v >> (8 * i));
}

static inline void capture_store_u64(uint8_t *p, uint64_t v)
{
    for (int i = 0; i < 8; i++)
        p[i] = (uint8_t)(v >> (8 * i));
}

#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
#define CAPTURE_HOST_IS_LITTLE_ENDIAN 1
#else
#define CAPTURE_HOST_IS_LITTLE_ENDIAN 0
#endif

/* count 4-byte elements (int32 and float32 alike) read from the file's little-endian order into
 * memory order, in place. */
static inline void capture_words_from_le(void *words, uint64_t count)
{
    if (CAPTURE_HOST_IS_LITTLE_ENDIAN)
        return;
    uint8_t *bytes = words;
    for (uint64_t i = 0; i < count; i++) {
        uint32_t word = capture_load_u32(bytes + 4 * i);
        memcpy(bytes + 4 * i, &word, 4);
    }
}

static inline void capture_store_words_le(uint8_t *destination, const void *source,
                                          uint64_t count)
{
    if (CAPTURE_HOST_IS_LITTLE_ENDIAN) {
        memcpy(destination, source, (size_t)count * 4);
        return;
    }
    const uint8_t *in = source;
    for (uint64_t i = 0; i < count; i++) {
        uint32_t word;
        memcpy(&word, in + 4 * i, 4);
        capture_store_u32(destination + 4 * i, word);
    }
}

/* ---- overflow-checked sizes ---- */

static inline int capture_checked_mul(uint64_t a, uint64_t b, uint64_t *result)
{
    return __builtin_mul_overflow(a, b, result) ? -1 : 0;
}

static inline int capture_checked_add(uint64_t a, uint64_t b, uint64_t *result)
{
    return __builtin_add_overflow(a, b, result) ? -1 : 0;
}

/* malloc for count elements; never returns a zero-size block, so an empty array is still a
 * valid non-NULL pointer. The caller has bounded count * element_bytes by the payload limit. */
void *capture_allocate_elements(uint64_t count, size_t element_bytes);

/* ---- the record header (bytes 0..71) ---- */

struct capture_header {
    bool compressed;
    uint64_t stored_bytes, raw_bytes;
    uint8_t payload_sha256[32];
};

/* Checks a record header of which available bytes (at most 72) are present, at a position with
 * remaining bytes to the end of the file. Returns CAPTURE_READ_OK with *header filled,
 * CAPTURE_READ_TRUNCATED (the file ends inside the header or the payload) or
 * CAPTURE_READ_CORRUPT (no magic, CRC-32 mismatch, unknown version, flags or sizes), with a
 * detail for the message. Steps 1-6 of docs/FORMAT.md "Reading". */
enum capture_read_state capture_parse_header(const uint8_t *bytes, uint64_t available,
                                             uint64_t remaining, struct capture_header *header,
                                             char *detail, size_t detail_size);

/* Fills the 72 header bytes for a payload whose SHA-256 is payload_sha256. */
void capture_build_header(uint8_t header[CAPTURE_HEADER_BYTES], bool compressed,
                          uint64_t stored_bytes, uint64_t raw_bytes,
                          const uint8_t payload_sha256[32]);

/* ---- the raw payload ---- */

/* Where each section of a raw payload lies (docs/FORMAT.md "Raw payload"). */
struct payload_layout {
    uint32_t sections;
    uint64_t metadata_offset, metadata_bytes;
    uint64_t lengths_offset;
    uint64_t row_starts_offset;
    uint64_t page_table_row_starts_offset;
    uint64_t page_table_offset, page_table_count;
    uint64_t engine_indices_offset, engine_indices_count;
    uint64_t scores_offset, scores_count;
    uint64_t total_bytes;
};

/* The field ranges both an in-memory record and a file's fixed part must respect. */
struct payload_shape {
    uint32_t rows, k;
    uint64_t row_stride;
    uint32_t sections;
    uint32_t page_size;
    uint64_t page_table_cols;
    uint64_t metadata_bytes;
};

int capture_check_shape(const struct payload_shape *shape, struct audit_error *err);

/* Offsets of every section and the exact raw payload size; the shape was checked. */
int capture_compute_layout(const struct payload_shape *shape, struct payload_layout *layout,
                           struct audit_error *err);

/* Reads the payload's fixed part and checks it implies exactly raw_bytes. */
int capture_parse_fixed_part(const uint8_t fixed[CAPTURE_FIXED_PART_BYTES], uint64_t raw_bytes,
                             struct payload_shape *shape, struct payload_layout *layout,
                             struct audit_error *err);

/* The metadata text a record is written with ("{}" when it has none). */
const char *capture_record_metadata_text(const struct capture_record *record);

/* The layout of an in-memory record's payload (its shape checked first). */
int capture_record_layout(const struct capture_record *record, struct payload_layout *layout,
                          struct audit_error *err);

#endif
