/* Capture files (byte layout: docs/FORMAT.md).
 *
 * Reading trusts nothing in the file. Every size in a record header is checked against the
 * limits in capture.h and against the bytes actually left in the file before a buffer of that
 * size is allocated; the payload's fixed part must imply exactly the raw size the header claims
 * before the arrays are allocated; all size arithmetic is overflow-checked. Writing validates the
 * record, serialises it whole in memory and appends it with one write loop and an fsync, so a
 * writer killed mid-append leaves at worst a truncated last record, which the reader recognises
 * as such (rather than as corruption). */
#include "capture.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <unistd.h>

#include <cjson/cJSON.h>
#define ZLIB_CONST
#include <zlib.h>

#include "hash.h"

#define HEADER_BYTES CAPTURE_RECORD_HEADER_BYTES
#define HEADER_CRC_COVERED_BYTES 68
#define FIXED_PART_BYTES 64
#define FORMAT_MAJOR 1
#define FORMAT_MINOR 0

#define HEADER_FLAG_ZLIB 0x1u
#define SECTION_ROW_STARTS 0x1u
#define SECTION_PAGE_TABLE 0x2u
#define SECTION_ENGINE_INDICES 0x4u
#define SECTIONS_KNOWN (SECTION_ROW_STARTS | SECTION_PAGE_TABLE | SECTION_ENGINE_INDICES)

/* Deflate's densest code is a 258-byte match in about two bits, so a zlib stream never
 * inflates to more than 1032 times its size; larger claims are refused before allocating. */
#define ZLIB_MAX_RATIO 1032u
#define ZLIB_LEVEL 6
/* zlib counts in uInt: feed it in pieces well below 4 GiB so multi-GB payloads work. */
#define ZLIB_CHUNK_BYTES ((uint64_t)1 << 30)
/* read()/write() move at most about 2 GiB per call on Linux. */
#define IO_CHUNK_BYTES ((uint64_t)1 << 30)

static const uint8_t capture_magic[8] = { 'D', 'S', 'A', 'T', 'O', 'P', 'K', '\n' };

struct capture_reader {
    FILE *file;
    char *path;
    uint32_t next_index;
    uint64_t next_offset; /* byte offset of the next record header */
    enum capture_read_state state;
    int stop_status;      /* 0 while reading; the error code once the reader has stopped */
    struct audit_error stop_error;
};

/* ---- little-endian fields and arrays ---- */

static uint16_t load_u16(const uint8_t *p)
{
    return (uint16_t)(p[0] | (p[1] << 8));
}

static uint32_t load_u32(const uint8_t *p)
{
    return (uint32_t)p[0] | ((uint32_t)p[1] << 8) | ((uint32_t)p[2] << 16) | ((uint32_t)p[3] << 24);
}

static uint64_t load_u64(const uint8_t *p)
{
    return (uint64_t)load_u32(p) | ((uint64_t)load_u32(p + 4) << 32);
}

static void store_u16(uint8_t *p, uint16_t v)
{
    p[0] = (uint8_t)v;
    p[1] = (uint8_t)(v >> 8);
}

static void store_u32(uint8_t *p, uint32_t v)
{
    for (int i = 0; i < 4; i++)
        p[i] = (uint8_t)(v >> (8 * i));
}

static void store_u64(uint8_t *p, uint64_t v)
{
    for (int i = 0; i < 8; i++)
        p[i] = (uint8_t)(v >> (8 * i));
}

#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
#define HOST_IS_LITTLE_ENDIAN 1
#else
#define HOST_IS_LITTLE_ENDIAN 0
#endif

/* 4-byte elements (int32 and float32 alike) between the file's little-endian order and memory. */
static void load_words_le(void *destination, const uint8_t *source, uint64_t count)
{
    if (HOST_IS_LITTLE_ENDIAN) {
        memcpy(destination, source, (size_t)count * 4);
        return;
    }
    uint8_t *out = destination;
    for (uint64_t i = 0; i < count; i++) {
        uint32_t word = load_u32(source + 4 * i);
        memcpy(out + 4 * i, &word, 4);
    }
}

static void store_words_le(uint8_t *destination, const void *source, uint64_t count)
{
    if (HOST_IS_LITTLE_ENDIAN) {
        memcpy(destination, source, (size_t)count * 4);
        return;
    }
    const uint8_t *in = source;
    for (uint64_t i = 0; i < count; i++) {
        uint32_t word;
        memcpy(&word, in + 4 * i, 4);
        store_u32(destination + 4 * i, word);
    }
}

/* ---- overflow-checked sizes ---- */

static int checked_mul(uint64_t a, uint64_t b, uint64_t *result)
{
    return __builtin_mul_overflow(a, b, result) ? -1 : 0;
}

static int checked_add(uint64_t a, uint64_t b, uint64_t *result)
{
    return __builtin_add_overflow(a, b, result) ? -1 : 0;
}

/* malloc for count elements; never returns a zero-size block, so an empty array is still a
 * valid non-NULL pointer. The caller has bounded count * element_bytes by the payload limit. */
static void *allocate_elements(uint64_t count, size_t element_bytes)
{
    uint64_t bytes;
    if (checked_mul(count, element_bytes, &bytes) < 0 || bytes > SIZE_MAX)
        return NULL;
    return malloc(bytes ? (size_t)bytes : element_bytes);
}

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

/* Reserves count 4-byte elements at *cursor. */
static int layout_take(uint64_t *cursor, uint64_t count, uint64_t *offset)
{
    uint64_t bytes;
    *offset = *cursor;
    if (checked_mul(count, 4, &bytes) < 0 || checked_add(*cursor, bytes, cursor) < 0)
        return -1;
    return 0;
}

/* The field ranges both an in-memory record and a file's fixed part must respect. */
struct payload_shape {
    uint32_t rows, k;
    uint64_t row_stride;
    uint32_t sections;
    uint32_t page_size;
    uint64_t page_table_cols;
    uint64_t metadata_bytes;
};

static int check_shape(const struct payload_shape *shape, struct audit_error *err)
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
    if (shape->sections & SECTION_PAGE_TABLE) {
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

/* Offsets of every section and the exact raw payload size; the shape was checked. */
static int compute_layout(const struct payload_shape *shape, struct payload_layout *layout,
                          struct audit_error *err)
{
    uint64_t rows = shape->rows;
    uint64_t cursor = FIXED_PART_BYTES;
    memset(layout, 0, sizeof(*layout));
    layout->sections = shape->sections;
    layout->metadata_offset = cursor;
    layout->metadata_bytes = shape->metadata_bytes;
    if (checked_add(cursor, shape->metadata_bytes, &cursor) < 0 ||
        layout_take(&cursor, rows, &layout->lengths_offset) < 0)
        goto overflow;
    if ((shape->sections & SECTION_ROW_STARTS) &&
        layout_take(&cursor, rows, &layout->row_starts_offset) < 0)
        goto overflow;
    if (shape->sections & SECTION_PAGE_TABLE) {
        if (checked_mul(rows, shape->page_table_cols, &layout->page_table_count) < 0 ||
            layout_take(&cursor, rows, &layout->page_table_row_starts_offset) < 0 ||
            layout_take(&cursor, layout->page_table_count, &layout->page_table_offset) < 0)
            goto overflow;
    }
    if (shape->sections & SECTION_ENGINE_INDICES) {
        if (checked_mul(rows, shape->k, &layout->engine_indices_count) < 0 ||
            layout_take(&cursor, layout->engine_indices_count, &layout->engine_indices_offset) < 0)
            goto overflow;
    }
    if (checked_mul(rows, shape->row_stride, &layout->scores_count) < 0 ||
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

/* ---- metadata ---- */

/* Strict UTF-8: no overlong forms, no surrogates, nothing above U+10FFFF. */
static int utf8_check(const uint8_t *text, size_t size, size_t *bad_at)
{
    size_t i = 0;
    while (i < size) {
        uint8_t lead = text[i];
        size_t extra;
        uint32_t code_point, smallest;
        if (lead < 0x80) {
            i++;
            continue;
        } else if ((lead & 0xE0) == 0xC0) {
            extra = 1;
            code_point = lead & 0x1F;
            smallest = 0x80;
        } else if ((lead & 0xF0) == 0xE0) {
            extra = 2;
            code_point = lead & 0x0F;
            smallest = 0x800;
        } else if ((lead & 0xF8) == 0xF0) {
            extra = 3;
            code_point = lead & 0x07;
            smallest = 0x10000;
        } else {
            goto bad;
        }
        if (size - i <= extra)
            goto bad;
        for (size_t j = 1; j <= extra; j++) {
            if ((text[i + j] & 0xC0) != 0x80)
                goto bad;
            code_point = (code_point << 6) | (text[i + j] & 0x3F);
        }
        if (code_point < smallest || code_point > 0x10FFFF ||
            (code_point >= 0xD800 && code_point <= 0xDFFF))
            goto bad;
        i += extra + 1;
    }
    return 0;
bad:
    *bad_at = i;
    return -1;
}

/* text holds size bytes followed by a NUL. */
static int check_metadata(const char *text, size_t size, struct audit_error *err)
{
    size_t bad_at = 0;
    const char *nul = memchr(text, '\0', size);
    if (nul)
        return audit_fail(err, AUDIT_EDATA, "metadata: NUL byte at metadata byte %zu",
                          (size_t)(nul - text));
    if (utf8_check((const uint8_t *)text, size, &bad_at) < 0)
        return audit_fail(err, AUDIT_EDATA, "metadata: invalid UTF-8 at metadata byte %zu", bad_at);
    const char *parse_end = NULL;
    cJSON *json = cJSON_ParseWithOpts(text, &parse_end, 1);
    if (!json) {
        size_t at = parse_end && parse_end >= text ? (size_t)(parse_end - text) : 0;
        return audit_fail(err, AUDIT_EDATA, "metadata: invalid JSON near metadata byte %zu", at);
    }
    int is_object = cJSON_IsObject(json);
    cJSON_Delete(json);
    if (!is_object)
        return audit_fail(err, AUDIT_EDATA, "metadata: not a JSON object");
    return AUDIT_OK;
}

/* ---- records in memory ---- */

static uint32_t record_sections(const struct capture_record *record)
{
    return (record->row_starts ? SECTION_ROW_STARTS : 0) |
           (record->page_size ? SECTION_PAGE_TABLE : 0) |
           (record->engine_indices ? SECTION_ENGINE_INDICES : 0);
}

static const char default_metadata[] = "{}";

static const char *record_metadata(const struct capture_record *record)
{
    return record->metadata_json ? record->metadata_json : default_metadata;
}

static int record_layout(const struct capture_record *record, struct payload_layout *layout,
                         struct audit_error *err)
{
    struct payload_shape shape = {
        .rows = record->rows,
        .k = record->k,
        .row_stride = record->row_stride,
        .sections = record_sections(record),
        .page_size = record->page_size,
        .page_table_cols = record->page_table_cols,
        .metadata_bytes = strlen(record_metadata(record)),
    };
    int status = check_shape(&shape, err);
    if (status < 0)
        return status;
    return compute_layout(&shape, layout, err);
}

uint64_t capture_record_end_offset(const struct capture_record *record)
{
    return record->file_offset + HEADER_BYTES + record->stored_payload_bytes;
}

uint64_t capture_record_raw_payload_bytes(const struct capture_record *record)
{
    struct payload_layout layout;
    struct audit_error ignored = { 0 };
    return record_layout(record, &layout, &ignored) == AUDIT_OK ? layout.total_bytes : 0;
}

/* Every window inside the row stride, and every page-table entry a window needs present,
 * non-negative and small enough that its translated indices fit in int32. */
static int validate_rows(const struct capture_record *record, struct audit_error *err)
{
    for (uint32_t b = 0; b < record->rows; b++) {
        int32_t length = record->lengths[b];
        int32_t start = capture_row_start(record, b);
        if (length < 0)
            return audit_fail(err, AUDIT_EDATA, "row %" PRIu32 ": lengths[%" PRIu32 "] = %" PRId32
                              " is negative", b, b, length);
        if (start < 0)
            return audit_fail(err, AUDIT_EDATA, "row %" PRIu32 ": row_starts[%" PRIu32 "] = %" PRId32
                              " is negative", b, b, start);
        uint64_t window_end = (uint64_t)start + (uint64_t)length;
        if (window_end > record->row_stride)
            return audit_fail(err, AUDIT_EDATA,
                              "row %" PRIu32 ": window [%" PRId32 ", %" PRIu64
                              ") ends past row_stride %" PRIu64,
                              b, start, window_end, record->row_stride);
        if (record->page_size == 0)
            continue;
        int32_t first_page = record->page_table_row_starts ? record->page_table_row_starts[b] : 0;
        if (first_page < 0)
            return audit_fail(err, AUDIT_EDATA,
                              "row %" PRIu32 ": page_table_row_starts[%" PRIu32 "] = %" PRId32
                              " is negative", b, b, first_page);
        uint64_t pages = ((uint64_t)length + record->page_size - 1) / record->page_size;
        if ((uint64_t)first_page + pages > record->page_table_cols)
            return audit_fail(err, AUDIT_EDATA,
                              "row %" PRIu32 ": a window of length %" PRId32 " with page_size %" PRIu32
                              " needs page-table columns %" PRId32 "..%" PRIu64
                              " but page_table_cols is %" PRIu64,
                              b, length, record->page_size, first_page,
                              (uint64_t)first_page + pages - 1, record->page_table_cols);
        const int32_t *row_pages =
            record->page_table + (uint64_t)b * record->page_table_cols + (uint64_t)first_page;
        for (uint64_t j = 0; j < pages; j++) {
            int32_t page = row_pages[j];
            if (page < 0 ||
                (uint64_t)page * record->page_size + (record->page_size - 1) > (uint64_t)INT32_MAX)
                return audit_fail(err, AUDIT_EDATA,
                                  "row %" PRIu32 ": page_table[%" PRIu32 "][%" PRIu64 "] = %" PRId32
                                  " is negative or translates past int32 with page_size %" PRIu32,
                                  b, b, (uint64_t)first_page + j, page, record->page_size);
        }
    }
    return AUDIT_OK;
}

int capture_record_validate(const struct capture_record *record, struct audit_error *err)
{
    struct payload_layout layout;
    if (!record)
        return audit_fail(err, AUDIT_EUSAGE, "no record");
    int status = record_layout(record, &layout, err);
    if (status < 0)
        return status;
    if (!record->scores || !record->lengths)
        return audit_fail(err, AUDIT_EDATA, "%s is missing", record->scores ? "lengths" : "scores");
    if (record->page_size == 0 && (record->page_table || record->page_table_row_starts))
        return audit_fail(err, AUDIT_EDATA, "page table given but page_size is 0");
    if (record->page_size != 0 && !record->page_table && record->page_table_cols > 0)
        return audit_fail(err, AUDIT_EDATA, "page_size %" PRIu32 " but page_table is missing",
                          record->page_size);
    if (record->metadata_json) {
        status = check_metadata(record->metadata_json, strlen(record->metadata_json), err);
        if (status < 0)
            return status;
    }
    return validate_rows(record, err);
}

void capture_record_free(struct capture_record *record)
{
    if (!record)
        return;
    free(record->scores);
    free(record->lengths);
    free(record->row_starts);
    free(record->page_table);
    free(record->page_table_row_starts);
    free(record->engine_indices);
    free(record->metadata_json);
    memset(record, 0, sizeof(*record));
}

static int duplicate_words(void **destination, const void *source, uint64_t count)
{
    *destination = NULL;
    if (!source)
        return 0;
    *destination = allocate_elements(count, 4);
    if (!*destination)
        return -1;
    memcpy(*destination, source, (size_t)count * 4);
    return 0;
}

int capture_record_copy(struct capture_record *dst, const struct capture_record *src,
                        struct audit_error *err)
{
    uint64_t score_count, page_table_count, engine_count;
    memset(dst, 0, sizeof(*dst));
    if (checked_mul(src->rows, src->row_stride, &score_count) < 0 ||
        checked_mul(src->rows, src->page_table_cols, &page_table_count) < 0 ||
        checked_mul(src->rows, src->k, &engine_count) < 0)
        return audit_fail(err, AUDIT_EDATA, "record copy: rows %" PRIu32 " x row_stride %" PRIu64
                          " overflows", src->rows, src->row_stride);
    /* Scalars and provenance by value; every array is duplicated below. */
    *dst = *src;
    dst->scores = NULL;
    dst->lengths = NULL;
    dst->row_starts = NULL;
    dst->page_table = NULL;
    dst->page_table_row_starts = NULL;
    dst->engine_indices = NULL;
    dst->metadata_json = NULL;
    if (duplicate_words((void **)&dst->scores, src->scores, score_count) < 0 ||
        duplicate_words((void **)&dst->lengths, src->lengths, src->rows) < 0 ||
        duplicate_words((void **)&dst->row_starts, src->row_starts, src->rows) < 0 ||
        duplicate_words((void **)&dst->page_table, src->page_table, page_table_count) < 0 ||
        duplicate_words((void **)&dst->page_table_row_starts, src->page_table_row_starts,
                        src->rows) < 0 ||
        duplicate_words((void **)&dst->engine_indices, src->engine_indices, engine_count) < 0)
        goto out_of_memory;
    if (src->metadata_json && !(dst->metadata_json = strdup(src->metadata_json)))
        goto out_of_memory;
    return AUDIT_OK;
out_of_memory:
    capture_record_free(dst);
    return audit_fail(err, AUDIT_ENOMEM, "record copy: out of memory (%" PRIu32 " rows x %" PRIu64
                      " stride)", src->rows, src->row_stride);
}

/* ---- writing ---- */

static void serialize_payload(const struct capture_record *record,
                              const struct payload_layout *layout, uint8_t *raw)
{
    const char *metadata = record_metadata(record);
    memset(raw, 0, FIXED_PART_BYTES);
    store_u32(raw + 0, record->rows);
    store_u32(raw + 4, record->k);
    store_u64(raw + 8, record->row_stride);
    store_u32(raw + 16, layout->sections);
    store_u32(raw + 20, record->page_size);
    store_u64(raw + 24, record->page_table_cols);
    store_u64(raw + 32, layout->metadata_bytes);
    memcpy(raw + layout->metadata_offset, metadata, layout->metadata_bytes);
    store_words_le(raw + layout->lengths_offset, record->lengths, record->rows);
    if (layout->sections & SECTION_ROW_STARTS)
        store_words_le(raw + layout->row_starts_offset, record->row_starts, record->rows);
    if (layout->sections & SECTION_PAGE_TABLE) {
        if (record->page_table_row_starts)
            store_words_le(raw + layout->page_table_row_starts_offset,
                           record->page_table_row_starts, record->rows);
        else
            memset(raw + layout->page_table_row_starts_offset, 0, (size_t)record->rows * 4);
        if (layout->page_table_count)
            store_words_le(raw + layout->page_table_offset, record->page_table,
                           layout->page_table_count);
    }
    if (layout->sections & SECTION_ENGINE_INDICES)
        store_words_le(raw + layout->engine_indices_offset, record->engine_indices,
                       layout->engine_indices_count);
    if (layout->scores_count)
        store_words_le(raw + layout->scores_offset, record->scores, layout->scores_count);
}

/* Deflates raw into a zlib stream (RFC 1950) written at out, of at most capacity bytes. */
static int deflate_payload(const uint8_t *raw, uint64_t raw_bytes, uint8_t *out, uint64_t capacity,
                           uint64_t *stored_bytes)
{
    z_stream stream;
    memset(&stream, 0, sizeof(stream));
    if (deflateInit(&stream, ZLIB_LEVEL) != Z_OK)
        return -1;
    uint64_t input_left = raw_bytes, produced = 0;
    int result;
    do {
        if (stream.avail_in == 0 && input_left > 0) {
            uint64_t chunk = input_left < ZLIB_CHUNK_BYTES ? input_left : ZLIB_CHUNK_BYTES;
            stream.next_in = raw + (raw_bytes - input_left);
            stream.avail_in = (uInt)chunk;
            input_left -= chunk;
        }
        uint64_t room = capacity - produced;
        uInt out_chunk = (uInt)(room < ZLIB_CHUNK_BYTES ? room : ZLIB_CHUNK_BYTES);
        stream.next_out = out + produced;
        stream.avail_out = out_chunk;
        int flush = (input_left == 0 && stream.avail_in == 0) ? Z_FINISH : Z_NO_FLUSH;
        result = deflate(&stream, flush);
        produced += out_chunk - stream.avail_out;
        if (result == Z_OK && out_chunk == 0)
            break; /* deflateBound was too small: cannot happen, but never loop forever */
    } while (result == Z_OK);
    deflateEnd(&stream);
    if (result != Z_STREAM_END)
        return -1;
    *stored_bytes = produced;
    return 0;
}

static uint64_t deflate_capacity(uint64_t raw_bytes)
{
    /* Above zlib's deflateBound (about raw + raw/4096 + raw/16384 + raw/2^25 + 13), computed
     * in 64 bits because deflateBound takes a uLong. */
    return raw_bytes + raw_bytes / 1024 + 1024;
}

static void build_header(uint8_t header[HEADER_BYTES], bool compressed, uint64_t stored_bytes,
                         uint64_t raw_bytes, const uint8_t *stored)
{
    memcpy(header, capture_magic, sizeof(capture_magic));
    store_u16(header + 8, FORMAT_MAJOR);
    store_u16(header + 10, FORMAT_MINOR);
    store_u32(header + 12, compressed ? HEADER_FLAG_ZLIB : 0);
    store_u64(header + 16, stored_bytes);
    store_u64(header + 24, raw_bytes);
    hash_bytes(stored, (size_t)stored_bytes, header + 32);
    store_u32(header + 64, 0);
    store_u32(header + 68, (uint32_t)crc32(0L, header, HEADER_CRC_COVERED_BYTES));
}

static int append_bytes(const char *path, const uint8_t *bytes, uint64_t size,
                        struct audit_error *err)
{
    int status = AUDIT_OK;
    int fd = open(path, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0644);
    if (fd < 0)
        return audit_fail(err, AUDIT_EIO, "%s: cannot open for appending: %s", path,
                          strerror(errno));
    struct stat before;
    if (fstat(fd, &before) != 0) {
        status = audit_fail(err, AUDIT_EIO, "%s: cannot stat: %s", path, strerror(errno));
        goto done;
    }
    uint64_t written = 0;
    while (written < size) {
        uint64_t chunk = size - written < IO_CHUNK_BYTES ? size - written : IO_CHUNK_BYTES;
        ssize_t n = write(fd, bytes + written, (size_t)chunk);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0) {
            int saved = n < 0 ? errno : ENOSPC;
            /* Our own failure (full disk): take the partial record back so later appends stay
             * readable. A killed writer cannot do this; readers report its tail as truncated. */
            if (written > 0 && ftruncate(fd, before.st_size) != 0)
                status = audit_fail(err, AUDIT_EIO,
                                    "%s: append failed after %" PRIu64 " of %" PRIu64
                                    " bytes (%s); the file now ends in a truncated record",
                                    path, written, size, strerror(saved));
            else
                status = audit_fail(err, AUDIT_EIO, "%s: append failed: %s", path,
                                    strerror(saved));
            goto done;
        }
        written += (uint64_t)n;
    }
    if (fsync(fd) != 0) {
        status = audit_fail(err, AUDIT_EIO, "%s: fsync failed: %s", path, strerror(errno));
        goto done;
    }
done:
    if (close(fd) != 0 && status == AUDIT_OK)
        status = audit_fail(err, AUDIT_EIO, "%s: close failed: %s", path, strerror(errno));
    return status;
}

int capture_append_record(const char *path, const struct capture_record *record, bool compress,
                          struct audit_error *err)
{
    struct payload_layout layout;
    uint8_t *raw = NULL, *buffer = NULL;
    int status = capture_record_validate(record, err);
    if (status < 0) {
        audit_error_prefix(err, "%s: cannot append record", path);
        return status;
    }
    status = record_layout(record, &layout, err);
    if (status < 0)
        return status;
    uint64_t raw_bytes = layout.total_bytes, stored_bytes = raw_bytes;
    if (!compress) {
        /* Serialise straight behind the header: one buffer, one write. */
        buffer = allocate_elements(HEADER_BYTES + raw_bytes, 1);
        if (!buffer)
            goto out_of_memory;
        serialize_payload(record, &layout, buffer + HEADER_BYTES);
    } else {
        uint64_t capacity = deflate_capacity(raw_bytes);
        raw = allocate_elements(raw_bytes, 1);
        buffer = allocate_elements(HEADER_BYTES + capacity, 1);
        if (!raw || !buffer)
            goto out_of_memory;
        serialize_payload(record, &layout, raw);
        if (deflate_payload(raw, raw_bytes, buffer + HEADER_BYTES, capacity, &stored_bytes) < 0) {
            status = audit_fail(err, AUDIT_ENOMEM, "%s: zlib compression failed", path);
            goto done;
        }
        free(raw);
        raw = NULL;
    }
    build_header(buffer, compress, stored_bytes, raw_bytes, buffer + HEADER_BYTES);
    status = append_bytes(path, buffer, HEADER_BYTES + stored_bytes, err);
    goto done;
out_of_memory:
    status = audit_fail(err, AUDIT_ENOMEM, "%s: out of memory serialising a %" PRIu64
                        "-byte record", path, raw_bytes);
done:
    free(raw);
    free(buffer);
    return status;
}

/* ---- reading ---- */

int capture_open(struct capture_reader **reader_out, const char *path, struct audit_error *err)
{
    struct stat info;
    struct capture_reader *reader = calloc(1, sizeof(*reader));
    *reader_out = NULL;
    if (!reader || !(reader->path = strdup(path))) {
        free(reader);
        return audit_fail(err, AUDIT_ENOMEM, "%s: out of memory", path);
    }
    reader->file = fopen(path, "rb");
    if (!reader->file) {
        int status = audit_fail(err, AUDIT_EIO, "%s: cannot open: %s", path, strerror(errno));
        capture_close(reader);
        return status;
    }
    if (fstat(fileno(reader->file), &info) != 0 || !S_ISREG(info.st_mode)) {
        int status = audit_fail(err, AUDIT_EIO, "%s: not a regular file", path);
        capture_close(reader);
        return status;
    }
    reader->state = CAPTURE_READ_OK;
    *reader_out = reader;
    return AUDIT_OK;
}

void capture_reader_seek(struct capture_reader *reader, uint64_t offset, uint32_t index)
{
    if (reader->stop_status)
        return;
    reader->next_offset = offset;
    reader->next_index = index;
}

void capture_close(struct capture_reader *reader)
{
    if (!reader)
        return;
    if (reader->file)
        fclose(reader->file);
    free(reader->path);
    free(reader);
}

enum capture_read_state capture_reader_state(const struct capture_reader *reader)
{
    return reader->state;
}

const char *capture_reader_path(const struct capture_reader *reader)
{
    return reader->path;
}

/* Stops the reader with "PATH: record N at byte O: KIND: detail". state is TRUNCATED or
 * CORRUPT for bad data; I/O and memory failures leave it as it was (the code tells them). */
__attribute__((format(printf, 6, 7)))
static int reader_stop(struct capture_reader *reader, enum capture_read_state state, int code,
                       const char *kind, struct audit_error *err, const char *format, ...)
{
    char detail[AUDIT_ERROR_MESSAGE_BYTES];
    va_list args;
    va_start(args, format);
    vsnprintf(detail, sizeof(detail), format, args);
    va_end(args);
    audit_fail(&reader->stop_error, code, "%s: record %" PRIu32 " at byte %" PRIu64 ": %s: %s",
               reader->path, reader->next_index, reader->next_offset, kind, detail);
    reader->stop_status = code;
    reader->state = state;
    if (err)
        *err = reader->stop_error;
    return code;
}

static int read_exact(FILE *file, uint8_t *buffer, uint64_t size, uint64_t *got)
{
    *got = 0;
    while (*got < size) {
        uint64_t chunk = size - *got < IO_CHUNK_BYTES ? size - *got : IO_CHUNK_BYTES;
        size_t n = fread(buffer + *got, 1, (size_t)chunk, file);
        *got += n;
        if (n < chunk)
            return ferror(file) ? -1 : 0;
    }
    return 0;
}

/* Inflates until out_bytes are produced, the stream ends, or zlib stops with an error. */
static int inflate_some(z_stream *stream, const uint8_t *input, uint64_t input_bytes,
                        uint64_t *input_used, uint8_t *out, uint64_t out_bytes, uint64_t *produced)
{
    int result = Z_OK;
    *produced = 0;
    while (*produced < out_bytes) {
        if (stream->avail_in == 0 && *input_used < input_bytes) {
            uint64_t left = input_bytes - *input_used;
            uint64_t chunk = left < ZLIB_CHUNK_BYTES ? left : ZLIB_CHUNK_BYTES;
            stream->next_in = input + *input_used;
            stream->avail_in = (uInt)chunk;
            *input_used += chunk;
        }
        uint64_t want = out_bytes - *produced;
        uInt out_chunk = (uInt)(want < ZLIB_CHUNK_BYTES ? want : ZLIB_CHUNK_BYTES);
        stream->next_out = out + *produced;
        stream->avail_out = out_chunk;
        result = inflate(stream, Z_NO_FLUSH);
        *produced += out_chunk - stream->avail_out;
        if (result != Z_OK)
            break; /* Z_STREAM_END, or an error (Z_BUF_ERROR: input ran out) */
    }
    return result;
}

static const char *inflate_failure(const z_stream *stream, int result)
{
    if (result == Z_BUF_ERROR)
        return "compressed data ends early";
    if (result == Z_STREAM_END)
        return "the zlib stream ends early";
    if (result == Z_NEED_DICT)
        return "stream needs a preset dictionary";
    return stream->msg ? stream->msg : "inflate failed";
}

/* Reads the payload's fixed part and checks it implies exactly raw_bytes. */
static int parse_fixed_part(const uint8_t fixed[FIXED_PART_BYTES], uint64_t raw_bytes,
                            struct payload_shape *shape, struct payload_layout *layout,
                            struct audit_error *err)
{
    shape->rows = load_u32(fixed + 0);
    shape->k = load_u32(fixed + 4);
    shape->row_stride = load_u64(fixed + 8);
    shape->sections = load_u32(fixed + 16);
    shape->page_size = load_u32(fixed + 20);
    shape->page_table_cols = load_u64(fixed + 24);
    shape->metadata_bytes = load_u64(fixed + 32);
    if (shape->sections & ~SECTIONS_KNOWN)
        return audit_fail(err, AUDIT_EDATA, "section flags 0x%08" PRIx32 " have unknown bits",
                          shape->sections);
    if (!(shape->sections & SECTION_PAGE_TABLE) != (shape->page_size == 0))
        return audit_fail(err, AUDIT_EDATA,
                          "page_size %" PRIu32 " disagrees with the page_table section flag (%s)",
                          shape->page_size, shape->sections & SECTION_PAGE_TABLE ? "set" : "clear");
    for (int i = 40; i < FIXED_PART_BYTES; i++)
        if (fixed[i] != 0)
            return audit_fail(err, AUDIT_EDATA, "reserved payload byte %d is not zero", i);
    int status = check_shape(shape, err);
    if (status < 0)
        return status;
    status = compute_layout(shape, layout, err);
    if (status < 0)
        return status;
    if (layout->total_bytes != raw_bytes)
        return audit_fail(err, AUDIT_EDATA,
                          "header says %" PRIu64 " raw payload bytes but the fixed part implies %" PRIu64,
                          raw_bytes, layout->total_bytes);
    return AUDIT_OK;
}

/* Copies the sections of a checked raw payload into newly allocated record arrays. */
static int unpack_payload(const uint8_t *raw, const struct payload_shape *shape,
                          const struct payload_layout *layout, struct capture_record *record)
{
    record->rows = shape->rows;
    record->k = shape->k;
    record->row_stride = shape->row_stride;
    record->page_size = shape->page_size;
    record->page_table_cols = shape->page_table_cols;
    record->metadata_json = malloc((size_t)layout->metadata_bytes + 1);
    record->lengths = allocate_elements(shape->rows, 4);
    record->scores = allocate_elements(layout->scores_count, 4);
    if (!record->metadata_json || !record->lengths || !record->scores)
        return -1;
    memcpy(record->metadata_json, raw + layout->metadata_offset, (size_t)layout->metadata_bytes);
    record->metadata_json[layout->metadata_bytes] = '\0';
    load_words_le(record->lengths, raw + layout->lengths_offset, shape->rows);
    load_words_le(record->scores, raw + layout->scores_offset, layout->scores_count);
    if (layout->sections & SECTION_ROW_STARTS) {
        if (!(record->row_starts = allocate_elements(shape->rows, 4)))
            return -1;
        load_words_le(record->row_starts, raw + layout->row_starts_offset, shape->rows);
    }
    if (layout->sections & SECTION_PAGE_TABLE) {
        record->page_table_row_starts = allocate_elements(shape->rows, 4);
        record->page_table = allocate_elements(layout->page_table_count, 4);
        if (!record->page_table_row_starts || !record->page_table)
            return -1;
        load_words_le(record->page_table_row_starts, raw + layout->page_table_row_starts_offset,
                      shape->rows);
        load_words_le(record->page_table, raw + layout->page_table_offset,
                      layout->page_table_count);
    }
    if (layout->sections & SECTION_ENGINE_INDICES) {
        if (!(record->engine_indices = allocate_elements(layout->engine_indices_count, 4)))
            return -1;
        load_words_le(record->engine_indices, raw + layout->engine_indices_offset,
                      layout->engine_indices_count);
    }
    return 0;
}

#define STOP_CORRUPT(...) \
    reader_stop(reader, CAPTURE_READ_CORRUPT, AUDIT_EDATA, "corrupt", err, __VA_ARGS__)
#define STOP_TRUNCATED(...) \
    reader_stop(reader, CAPTURE_READ_TRUNCATED, AUDIT_EDATA, "truncated", err, __VA_ARGS__)

/* Reads and checks the 72-byte header. Returns 1 with the sizes, 0 at a clean end of file,
 * or a negative code (the reader stopped). */
static int read_header(struct capture_reader *reader, bool *compressed, uint64_t *stored_bytes,
                       uint64_t *raw_bytes, uint8_t sha256[32], struct audit_error *err)
{
    uint8_t header[HEADER_BYTES] = { 0 };
    struct stat info;
    uint64_t got;
    uint64_t offset = reader->next_offset;
    if (fstat(fileno(reader->file), &info) != 0)
        return reader_stop(reader, reader->state, AUDIT_EIO, "read error", err, "cannot stat: %s",
                           strerror(errno));
    uint64_t file_bytes = (uint64_t)info.st_size;
    if (file_bytes == offset) {
        reader->state = CAPTURE_READ_END;
        return 0;
    }
    if (file_bytes < offset)
        return reader_stop(reader, reader->state, AUDIT_EIO, "read error",
                           err, "the file shrank to %" PRIu64 " bytes while being read", file_bytes);
    uint64_t remaining = file_bytes - offset;
    uint64_t header_available = remaining < HEADER_BYTES ? remaining : HEADER_BYTES;
    clearerr(reader->file);
    if (fseeko(reader->file, (off_t)offset, SEEK_SET) != 0 ||
        read_exact(reader->file, header, header_available, &got) < 0)
        return reader_stop(reader, reader->state, AUDIT_EIO, "read error", err, "%s",
                           strerror(errno));
    if (got < header_available)
        return reader_stop(reader, reader->state, AUDIT_EIO, "read error",
                           err, "the file shrank while being read");
    uint64_t magic_available = got < sizeof(capture_magic) ? got : sizeof(capture_magic);
    if (memcmp(header, capture_magic, (size_t)magic_available) != 0)
        return STOP_CORRUPT("no record magic \"DSATOPK\\n\" here (not a capture file, or garbage "
                            "after the last record)");
    if (got < HEADER_BYTES)
        return STOP_TRUNCATED("the file ends %" PRIu64 " bytes into the 72-byte record header", got);
    uint32_t header_crc = load_u32(header + 68);
    uint32_t computed_crc = (uint32_t)crc32(0L, header, HEADER_CRC_COVERED_BYTES);
    if (header_crc != computed_crc)
        return STOP_CORRUPT("header CRC-32 is 0x%08" PRIx32 " but header bytes 0..67 give 0x%08" PRIx32,
                            header_crc, computed_crc);
    uint16_t major = load_u16(header + 8), minor = load_u16(header + 10);
    uint32_t flags = load_u32(header + 12), reserved = load_u32(header + 64);
    *stored_bytes = load_u64(header + 16);
    *raw_bytes = load_u64(header + 24);
    memcpy(sha256, header + 32, 32);
    if (major != FORMAT_MAJOR)
        return STOP_CORRUPT("format version %u.%u: this reader reads major version %d", major, minor,
                            FORMAT_MAJOR);
    if (flags & ~HEADER_FLAG_ZLIB)
        return STOP_CORRUPT("header flags 0x%08" PRIx32 " have unknown bits", flags);
    if (reserved != 0)
        return STOP_CORRUPT("reserved header field is 0x%08" PRIx32 ", not 0", reserved);
    *compressed = (flags & HEADER_FLAG_ZLIB) != 0;
    if (*stored_bytes > CAPTURE_MAX_PAYLOAD_BYTES)
        return STOP_CORRUPT("stored payload bytes %" PRIu64 " exceed the limit %" PRIu64,
                            *stored_bytes, CAPTURE_MAX_PAYLOAD_BYTES);
    if (*raw_bytes > CAPTURE_MAX_PAYLOAD_BYTES)
        return STOP_CORRUPT("raw payload bytes %" PRIu64 " exceed the limit %" PRIu64, *raw_bytes,
                            CAPTURE_MAX_PAYLOAD_BYTES);
    if (*raw_bytes < FIXED_PART_BYTES)
        return STOP_CORRUPT("raw payload bytes %" PRIu64 " are fewer than the %d-byte fixed part",
                            *raw_bytes, FIXED_PART_BYTES);
    if (!*compressed && *stored_bytes != *raw_bytes)
        return STOP_CORRUPT("uncompressed record with stored payload bytes %" PRIu64
                            " != raw payload bytes %" PRIu64, *stored_bytes, *raw_bytes);
    /* stored_bytes <= 64 GiB, so the product cannot overflow. */
    if (*compressed && *raw_bytes > *stored_bytes * ZLIB_MAX_RATIO)
        return STOP_CORRUPT("raw payload bytes %" PRIu64 " from %" PRIu64
                            " compressed bytes exceed zlib's maximum ratio %u:1",
                            *raw_bytes, *stored_bytes, ZLIB_MAX_RATIO);
    if (*stored_bytes > remaining - HEADER_BYTES)
        return STOP_TRUNCATED("header promises %" PRIu64 " payload bytes, %" PRIu64 " remain",
                              *stored_bytes, remaining - HEADER_BYTES);
    return 1;
}

int capture_read_record(struct capture_reader *reader, struct capture_record *record,
                        struct audit_error *err)
{
    struct payload_shape shape;
    struct payload_layout layout;
    struct audit_error detail;
    uint8_t header_sha256[32], computed_sha256[32];
    uint8_t *stored = NULL, *inflated = NULL;
    const uint8_t *raw;
    bool compressed = false;
    bool inflater_open = false;
    z_stream stream;
    uint64_t stored_bytes = 0, raw_bytes = 0, got = 0;
    int status;

    memset(record, 0, sizeof(*record));
    if (reader->stop_status) {
        if (err)
            *err = reader->stop_error;
        return reader->stop_status;
    }
    status = read_header(reader, &compressed, &stored_bytes, &raw_bytes, header_sha256, err);
    if (status <= 0)
        return status;

    stored = allocate_elements(stored_bytes, 1);
    if (!stored) {
        status = reader_stop(reader, reader->state, AUDIT_ENOMEM, "out of memory", err,
                             "cannot hold a %" PRIu64 "-byte payload", stored_bytes);
        goto error;
    }
    if (read_exact(reader->file, stored, stored_bytes, &got) < 0) {
        status = reader_stop(reader, reader->state, AUDIT_EIO, "read error", err, "%s",
                             strerror(errno));
        goto error;
    }
    if (got < stored_bytes) {
        status = STOP_TRUNCATED("header promises %" PRIu64 " payload bytes, %" PRIu64
                                " could be read", stored_bytes, got);
        goto error;
    }
    hash_bytes(stored, (size_t)stored_bytes, computed_sha256);
    if (memcmp(computed_sha256, header_sha256, 32) != 0) {
        char expected_hex[HASH_HEX_BYTES], computed_hex[HASH_HEX_BYTES];
        hash_to_hex(header_sha256, expected_hex);
        hash_to_hex(computed_sha256, computed_hex);
        status = STOP_CORRUPT("payload SHA-256 mismatch: header has %s, the %" PRIu64
                              " stored bytes give %s", expected_hex, stored_bytes, computed_hex);
        goto error;
    }

    if (!compressed) {
        raw = stored;
        status = parse_fixed_part(raw, raw_bytes, &shape, &layout, &detail);
        if (status < 0) {
            status = STOP_CORRUPT("%s", detail.message);
            goto error;
        }
    } else {
        /* Inflate the fixed part alone first: the raw buffer is allocated only once the fixed
         * part agrees with the raw size in the header. */
        uint8_t fixed[FIXED_PART_BYTES] = { 0 };
        uint64_t input_used = 0, produced = 0, extra = 0;
        uint8_t probe;
        memset(&stream, 0, sizeof(stream));
        if (inflateInit(&stream) != Z_OK) {
            status = reader_stop(reader, reader->state, AUDIT_ENOMEM, "out of memory", err,
                                 "zlib inflateInit failed");
            goto error;
        }
        inflater_open = true;
        int result = inflate_some(&stream, stored, stored_bytes, &input_used, fixed,
                                  FIXED_PART_BYTES, &produced);
        if (produced < FIXED_PART_BYTES) {
            status = STOP_CORRUPT("zlib payload: %s after %" PRIu64 " of %" PRIu64 " raw bytes",
                                  inflate_failure(&stream, result), produced, raw_bytes);
            goto error;
        }
        status = parse_fixed_part(fixed, raw_bytes, &shape, &layout, &detail);
        if (status < 0) {
            status = STOP_CORRUPT("%s", detail.message);
            goto error;
        }
        inflated = allocate_elements(raw_bytes, 1);
        if (!inflated) {
            status = reader_stop(reader, reader->state, AUDIT_ENOMEM, "out of memory", err,
                                 "cannot hold a %" PRIu64 "-byte raw payload", raw_bytes);
            goto error;
        }
        memcpy(inflated, fixed, FIXED_PART_BYTES);
        if (result == Z_OK)
            result = inflate_some(&stream, stored, stored_bytes, &input_used,
                                  inflated + FIXED_PART_BYTES, raw_bytes - FIXED_PART_BYTES,
                                  &produced);
        else
            produced = 0;
        if (produced < raw_bytes - FIXED_PART_BYTES) {
            status = STOP_CORRUPT("zlib payload: %s after %" PRIu64 " of %" PRIu64 " raw bytes",
                                  inflate_failure(&stream, result), FIXED_PART_BYTES + produced,
                                  raw_bytes);
            goto error;
        }
        /* Exactly raw_bytes: the stream must end here and use every stored byte. */
        if (result == Z_OK)
            result = inflate_some(&stream, stored, stored_bytes, &input_used, &probe, 1, &extra);
        if (extra > 0 || result != Z_STREAM_END) {
            status = STOP_CORRUPT("zlib payload: %s",
                                  extra > 0 ? "inflates to more than the raw payload bytes"
                                            : inflate_failure(&stream, result));
            goto error;
        }
        if (stream.avail_in != 0 || input_used != stored_bytes) {
            status = STOP_CORRUPT("zlib payload: %" PRIu64 " stored bytes follow the end of the stream",
                                  (uint64_t)stream.avail_in + (stored_bytes - input_used));
            goto error;
        }
        inflateEnd(&stream);
        inflater_open = false;
        free(stored);
        stored = NULL;
        raw = inflated;
    }

    if (unpack_payload(raw, &shape, &layout, record) < 0) {
        status = reader_stop(reader, reader->state, AUDIT_ENOMEM, "out of memory", err,
                             "cannot hold the record's arrays (%" PRIu64 " raw bytes)", raw_bytes);
        goto error;
    }
    if (check_metadata(record->metadata_json, (size_t)layout.metadata_bytes, &detail) < 0 ||
        capture_record_validate(record, &detail) < 0) {
        status = STOP_CORRUPT("%s", detail.message);
        goto error;
    }
    record->index = reader->next_index;
    record->file_offset = reader->next_offset;
    record->stored_payload_bytes = stored_bytes;
    record->compressed = compressed;
    memcpy(record->payload_sha256, header_sha256, 32);
    reader->next_index++;
    reader->next_offset += HEADER_BYTES + stored_bytes;
    reader->state = CAPTURE_READ_OK;
    free(stored);
    free(inflated);
    return 1;

error:
    if (inflater_open)
        inflateEnd(&stream);
    free(stored);
    free(inflated);
    capture_record_free(record);
    return status;
}
