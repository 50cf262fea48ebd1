/* The byte layout of capture records: header checks, payload layout (docs/FORMAT.md). */
#include "capture_format.h"

#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <zlib.h>

const uint8_t capture_magic[8] = { 'D', 'S', 'A', 'T', 'O', 'P', 'K', '\n' };

/* ---- the record header ---- */

struct header_detail {
    char *text;
    size_t size;
};

__attribute__((format(printf, 3, 4)))
static enum capture_read_state problem(const struct header_detail *detail,
                                       enum capture_read_state state, const char *format, ...)
{
    va_list args;
    va_start(args, format);
    vsnprintf(detail->text, detail->size, format, args);
    va_end(args);
    return state;
}

#define CORRUPT(...) problem(&detail, CAPTURE_READ_CORRUPT, __VA_ARGS__)
#define TRUNCATED(...) problem(&detail, CAPTURE_READ_TRUNCATED, __VA_ARGS__)

enum capture_read_state capture_parse_header(const uint8_t *bytes, uint64_t available,
                                             uint64_t remaining, struct capture_header *header,
                                             char *detail_text, size_t detail_size)
{
    const struct header_detail detail = { detail_text, detail_size };
    uint64_t magic_available = available < sizeof(capture_magic) ? available : sizeof(capture_magic);
    memset(header, 0, sizeof(*header));
    if (memcmp(bytes, capture_magic, (size_t)magic_available) != 0)
        return CORRUPT("no record magic \"DSATOPK\\n\" here (not a capture file, or garbage "
                       "after the last record)");
    if (available < CAPTURE_HEADER_BYTES)
        return TRUNCATED("the file ends %" PRIu64 " bytes into the 72-byte record header",
                         available);
    uint32_t header_crc = capture_load_u32(bytes + 68);
    uint32_t computed_crc = (uint32_t)crc32(0L, bytes, CAPTURE_HEADER_CRC_COVERED_BYTES);
    if (header_crc != computed_crc)
        return CORRUPT("header CRC-32 is 0x%08" PRIx32 " but header bytes 0..67 give 0x%08" PRIx32,
                       header_crc, computed_crc);
    uint16_t major = capture_load_u16(bytes + 8), minor = capture_load_u16(bytes + 10);
    uint32_t flags = capture_load_u32(bytes + 12), reserved = capture_load_u32(bytes + 64);
    uint64_t stored = capture_load_u64(bytes + 16), raw = capture_load_u64(bytes + 24);
    if (major != CAPTURE_FORMAT_MAJOR)
        return CORRUPT("format version %u.%u: this reader reads major version %d", major, minor,
                       CAPTURE_FORMAT_MAJOR);
    if (flags & ~CAPTURE_HEADER_FLAG_ZLIB)
        return CORRUPT("header flags 0x%08" PRIx32 " have unknown bits", flags);
    if (reserved != 0)
        return CORRUPT("reserved header field is 0x%08" PRIx32 ", not 0", reserved);
    bool compressed = (flags & CAPTURE_HEADER_FLAG_ZLIB) != 0;
    if (stored > CAPTURE_MAX_PAYLOAD_BYTES)
        return CORRUPT("stored payload bytes %" PRIu64 " exceed the limit %" PRIu64, stored,
                       CAPTURE_MAX_PAYLOAD_BYTES);
    if (raw > CAPTURE_MAX_PAYLOAD_BYTES)
        return CORRUPT("raw payload bytes %" PRIu64 " exceed the limit %" PRIu64, raw,
                       CAPTURE_MAX_PAYLOAD_BYTES);
    if (raw < CAPTURE_FIXED_PART_BYTES)
        return CORRUPT("raw payload bytes %" PRIu64 " are fewer than the %d-byte fixed part", raw,
                       CAPTURE_FIXED_PART_BYTES);
    if (!compressed && stored != raw)
        return CORRUPT("uncompressed record with stored payload bytes %" PRIu64
                       " != raw payload bytes %" PRIu64, stored, raw);
    /* stored <= 64 GiB, so the product cannot overflow. */
    if (compressed && raw > stored * CAPTURE_ZLIB_MAX_RATIO)
        return CORRUPT("raw payload bytes %" PRIu64 " from %" PRIu64
                       " compressed bytes exceed zlib's maximum ratio %u:1",
                       raw, stored, CAPTURE_ZLIB_MAX_RATIO);
    if (stored > remaining - CAPTURE_HEADER_BYTES)
        return TRUNCATED("header promises %" PRIu64 " payload bytes, %" PRIu64 " remain", stored,
                         remaining - CAPTURE_HEADER_BYTES);
    header->compressed = compressed;
    header->stored_bytes = stored;
    header->raw_bytes = raw;
    memcpy(header->payload_sha256, bytes + 32, 32);
    return CAPTURE_READ_OK;
}

void capture_build_header(uint8_t header[CAPTURE_HEADER_BYTES], bool compressed,
                          uint64_t stored_bytes, uint64_t raw_bytes,
                          const uint8_t payload_sha256[32])
{
    memcpy(header, capture_magic, sizeof(capture_magic));
    capture_store_u16(header + 8, CAPTURE_FORMAT_MAJOR);
    capture_store_u16(header + 10, CAPTURE_FORMAT_MINOR);
    capture_store_u32(header + 12, compressed ? CAPTURE_HEADER_FLAG_ZLIB : 0);
    capture_store_u64(header + 16, stored_bytes);
    capture_store_u64(header + 24, raw_bytes);
    memcpy(header + 32, payload_sha256, 32);
    capture_store_u32(header + 64, 0);
    capture_store_u32(header + 68, (uint32_t)crc32(0L, header, CAPTURE_HEADER_CRC_COVERED_BYTES));
}

/* ---- the raw payload ---- */

void *capture_allocate_elements(uint64_t count, size_t element_bytes)
{
    uint64_t bytes;
    if (capture_checked_mul(count, element_bytes, &bytes) < 0 || bytes > SIZE_MAX)
        return NULL;
    return malloc(bytes ? (size_t)bytes : element_bytes);
}

/* Reserves count 4-byte elements at *cursor. */
static int layout_take(uint64_t *cursor, uint64_t count, uint64_t *offset)
{
    uint64_t bytes;
    *offset = *cursor;
    if (capture_checked_mul(count, 4, &bytes) < 0 || capture_checked_add(*cursor, bytes, cursor) < 0)
        return -1;
    return 0;
}

int capture_check_shape(const struct payload_shape *shape, struct audit_error *err)
{
    if (shape->rows < 1 || shape->rows > CAPTURE_MAX_ROWS)
        return audit_fail(err, AUDIT_EDATA, "rows %" PRIu32 " out of range 1..%u", shape->rows,
                          CAPTURE_MAX_ROWS);
    if (shape->k < 1 || shape->k > CAPTURE_MAX_K)
        return audit_fail(err, AUDIT_EDATA, "k %" PRIu32 " out of range 1..%u", shape->k,
                          CAPTURE_MAX_K);
    if (shape->row_stride > CAPTURE_MAX_ROW_STRIDE)
        return audit_fail(err, AUDIT_EDATA, "row_stride %" PRIu64 " exceeds the limit %" PRIu64,
                          shape->row_stride, CAPTURE_MAX_ROW_STRIDE);
    if (shape->sections & CAPTURE_SECTION_PAGE_TABLE) {
        if (shape->page_size == 0 || (shape->page_size & (shape->page_size - 1)) != 0)
            return audit_fail(err, AUDIT_EDATA, "page_size %" PRIu32 " is not a power of two",
                              shape->page_size);
        if (shape->page_table_cols > CAPTURE_MAX_ROW_STRIDE)
            return audit_fail(err, AUDIT_EDATA,
                              "page_table_cols %" PRIu64 " exceeds the limit %" PRIu64,
                              shape->page_table_cols, CAPTURE_MAX_ROW_STRIDE);
    } else if (shape->page_table_cols != 0) {
        return audit_fail(err, AUDIT_EDATA,
                          "page_table_cols %" PRIu64 " without a page table (page_size 0)",
                          shape->page_table_cols);
    }
    if (shape->metadata_bytes > CAPTURE_MAX_METADATA_BYTES)
        return audit_fail(err, AUDIT_EDATA, "metadata of %" PRIu64 " bytes exceeds the limit %" PRIu64,
                          shape->metadata_bytes, CAPTURE_MAX_METADATA_BYTES);
    return AUDIT_OK;
}

int capture_compute_layout(const struct payload_shape *shape, struct payload_layout *layout,
                          struct audit_error *err)
{
    uint64_t rows = shape->rows;
    uint64_t cursor = CAPTURE_FIXED_PART_BYTES;
    memset(layout, 0, sizeof(*layout));
    layout->sections = shape->sections;
    layout->metadata_offset = cursor;
    layout->metadata_bytes = shape->metadata_bytes;
    if (capture_checked_add(cursor, shape->metadata_bytes, &cursor) < 0 ||
        layout_take(&cursor, rows, &layout->lengths_offset) < 0)
        goto overflow;
    if ((shape->sections & CAPTURE_SECTION_ROW_STARTS) &&
        layout_take(&cursor, rows, &layout->row_starts_offset) < 0)
        goto overflow;
    if (shape->sections & CAPTURE_SECTION_PAGE_TABLE) {
        if (capture_checked_mul(rows, shape->page_table_cols, &layout->page_table_count) < 0 ||
            layout_take(&cursor, rows, &layout->page_table_row_starts_offset) < 0 ||
            layout_take(&cursor, layout->page_table_count, &layout->page_table_offset) < 0)
            goto overflow;
    }
    if (shape->sections & CAPTURE_SECTION_ENGINE_INDICES) {
        if (capture_checked_mul(rows, shape->k, &layout->engine_indices_count) < 0 ||
            layout_take(&cursor, layout->engine_indices_count, &layout->engine_indices_offset) < 0)
            goto overflow;
    }
    if (capture_checked_mul(rows, shape->row_stride, &layout->scores_count) < 0 ||
        layout_take(&cursor, layout->scores_count, &layout->scores_offset) < 0)
        goto overflow;
    layout->total_bytes = cursor;
    if (layout->total_bytes > CAPTURE_MAX_PAYLOAD_BYTES)
        return audit_fail(err, AUDIT_EDATA,
                          "rows %" PRIu32 " x row_stride %" PRIu64 " (with k %" PRIu32
                          ", page_table_cols %" PRIu64 ") need a %" PRIu64
                          "-byte payload, over the limit %" PRIu64,
                          shape->rows, shape->row_stride, shape->k, shape->page_table_cols,
                          layout->total_bytes, CAPTURE_MAX_PAYLOAD_BYTES);
    return AUDIT_OK;
overflow:
    return audit_fail(err, AUDIT_EDATA,
                      "rows %" PRIu32 " x row_stride %" PRIu64 " (with k %" PRIu32
                      ", page_table_cols %" PRIu64 ") overflow a 64-bit payload size",
                      shape->rows, shape->row_stride, shape->k, shape->page_table_cols);
}

static uint32_t record_sections(const struct capture_record *record)
{
    return (record->row_starts ? CAPTURE_SECTION_ROW_STARTS : 0) |
           (record->page_size ? CAPTURE_SECTION_PAGE_TABLE : 0) |
           (record->engine_indices ? CAPTURE_SECTION_ENGINE_INDICES : 0);
}

static const char default_metadata[] = "{}";

const char *capture_record_metadata_text(const struct capture_record *record)
{
    return record->metadata_json ? record->metadata_json : default_metadata;
}

int capture_record_layout(const struct capture_record *record, struct payload_layout *layout,
                         struct audit_error *err)
{
    struct payload_shape shape = {
        .rows = record->rows,
        .k = record->k,
        .row_stride = record->row_stride,
        .sections = record_sections(record),
        .page_size = record->page_size,
        .page_table_cols = record->page_table_cols,
        .metadata_bytes = strlen(capture_record_metadata_text(record)),
    };
    int status = capture_check_shape(&shape, err);
    if (status < 0)
        return status;
    return capture_compute_layout(&shape, layout, err);
}

uint64_t capture_record_end_offset(const struct capture_record *record)
{
    return record->file_offset + CAPTURE_HEADER_BYTES + record->stored_payload_bytes;
}

uint64_t capture_record_raw_payload_bytes(const struct capture_record *record)
{
    struct payload_layout layout;
    struct audit_error ignored = { 0 };
    return capture_record_layout(record, &layout, &ignored) == AUDIT_OK ? layout.total_bytes : 0;
}

int capture_parse_fixed_part(const uint8_t fixed[CAPTURE_FIXED_PART_BYTES], uint64_t raw_bytes,
                            struct payload_shape *shape, struct payload_layout *layout,
                            struct audit_error *err)
{
    shape->rows = capture_load_u32(fixed + 0);
    shape->k = capture_load_u32(fixed + 4);
    shape->row_stride = capture_load_u64(fixed + 8);
    shape->sections = capture_load_u32(fixed + 16);
    shape->page_size = capture_load_u32(fixed + 20);
    shape->page_table_cols = capture_load_u64(fixed + 24);
    shape->metadata_bytes = capture_load_u64(fixed + 32);
    if (shape->sections & ~CAPTURE_SECTIONS_KNOWN)
        return audit_fail(err, AUDIT_EDATA, "section flags 0x%08" PRIx32 " have unknown bits",
                          shape->sections);
    if (!(shape->sections & CAPTURE_SECTION_PAGE_TABLE) != (shape->page_size == 0))
        return audit_fail(err, AUDIT_EDATA,
                          "page_size %" PRIu32 " disagrees with the page_table section flag (%s)",
                          shape->page_size, shape->sections & CAPTURE_SECTION_PAGE_TABLE ? "set" : "clear");
    for (int i = 40; i < CAPTURE_FIXED_PART_BYTES; i++)
        if (fixed[i] != 0)
            return audit_fail(err, AUDIT_EDATA, "reserved payload byte %d is not zero", i);
    int status = capture_check_shape(shape, err);
    if (status < 0)
        return status;
    status = capture_compute_layout(shape, layout, err);
    if (status < 0)
        return status;
    if (layout->total_bytes != raw_bytes)
        return audit_fail(err, AUDIT_EDATA,
                          "header says %" PRIu64 " raw payload bytes but the fixed part implies %" PRIu64,
                          raw_bytes, layout->total_bytes);
    return AUDIT_OK;
}

