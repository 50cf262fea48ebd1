/* Capture files: records in memory and the reader (byte layout: docs/FORMAT.md).
 *
 * Reading trusts nothing in the file. Every size in a record header is checked against the
 * limits in capture.h and against the bytes actually left in the file, and all size arithmetic
 * is overflow-checked. Memory follows what has been verified, not what the header claims: the
 * stored payload is hashed in bounded pieces straight from the file before anything of its size
 * is allocated, a record whose raw payload is over the reader's memory cap is refused before it
 * is read, and the arrays are allocated only once the payload's fixed part implies exactly the
 * raw size the header claims; the payload is then read (or inflated) straight into them. The
 * writer is capture_write.c. */
#include "capture.h"

#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cjson/cJSON.h>
#define ZLIB_CONST
#include <zlib.h>

#include "capture_format.h"
#include "document_keys.h"
#include "hash.h"
#include "input_file.h"
#include "json_strict.h"

/* Compressed bytes read per refill of the inflater. */
#define SOURCE_CHUNK_BYTES ((uint64_t)1 << 20)
/* zlib counts in uInt: feed it in pieces well below 4 GiB so multi-GB payloads work. */
#define ZLIB_CHUNK_BYTES ((uint64_t)1 << 30)

struct capture_reader {
    int fd;
    char *path;
    uint32_t next_index;
    uint64_t next_offset; /* byte offset of the next record header */
    uint64_t max_record_bytes;
    enum capture_read_state state;
    int stop_status;      /* 0 while reading; the error code once the reader has stopped */
    struct audit_error stop_error;
};

static uint64_t default_max_record_bytes = CAPTURE_DEFAULT_MAX_RECORD_BYTES;

void capture_set_max_record_bytes(uint64_t bytes)
{
    default_max_record_bytes = bytes ? bytes : CAPTURE_DEFAULT_MAX_RECORD_BYTES;
}

uint64_t capture_max_record_bytes(void)
{
    return default_max_record_bytes;
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
    cJSON *json = NULL;
    int status = json_strict_parse(text, size, KEY_METADATA, 0, &json, err);
    if (status < 0)
        return status;
    int is_object = cJSON_IsObject(json);
    cJSON_Delete(json);
    if (!is_object)
        return audit_fail(err, AUDIT_EDATA, "metadata: not a JSON object");
    return AUDIT_OK;
}


/* ---- records in memory ---- */

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
    int status = capture_record_layout(record, &layout, err);
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
    *destination = capture_allocate_elements(count, 4);
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
    if (capture_checked_mul(src->rows, src->row_stride, &score_count) < 0 ||
        capture_checked_mul(src->rows, src->page_table_cols, &page_table_count) < 0 ||
        capture_checked_mul(src->rows, src->k, &engine_count) < 0)
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

/* ---- reading ---- */

int capture_open(struct capture_reader **reader_out, const char *path, struct audit_error *err)
{
    uint64_t size = 0;
    struct capture_reader *reader = calloc(1, sizeof(*reader));
    *reader_out = NULL;
    if (!reader || !(reader->path = strdup(path))) {
        free(reader);
        return audit_fail(err, AUDIT_ENOMEM, "%s: out of memory", path);
    }
    reader->fd = -1;
    int status = input_file_open(path, &reader->fd, &size, err);
    if (status < 0) {
        capture_close(reader);
        return status;
    }
    reader->max_record_bytes = default_max_record_bytes;
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

void capture_reader_set_max_record_bytes(struct capture_reader *reader, uint64_t bytes)
{
    reader->max_record_bytes = bytes ? bytes : default_max_record_bytes;
}

void capture_close(struct capture_reader *reader)
{
    if (!reader)
        return;
    if (reader->fd >= 0)
        close(reader->fd);
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

/* Stops the reader with "PATH: record N at byte O: KIND: detail". state is TRUNCATED, CORRUPT
 * or TOO_LARGE for what the file holds; I/O and memory failures leave it as it was (the code
 * tells them). */
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

#define STOP_CORRUPT(...) \
    reader_stop(reader, CAPTURE_READ_CORRUPT, AUDIT_EDATA, "corrupt", err, __VA_ARGS__)
#define STOP_TRUNCATED(...) \
    reader_stop(reader, CAPTURE_READ_TRUNCATED, AUDIT_EDATA, "truncated", err, __VA_ARGS__)
#define STOP_READ_ERROR(...) \
    reader_stop(reader, reader->state, AUDIT_EIO, "read error", err, __VA_ARGS__)
#define STOP_OUT_OF_MEMORY(...) \
    reader_stop(reader, reader->state, AUDIT_ENOMEM, "out of memory", err, __VA_ARGS__)

/* Reads and checks the 72-byte header. Returns 1 with the header, 0 at a clean end of file, or
 * a negative code (the reader stopped). */
static int read_header(struct capture_reader *reader, struct capture_header *header,
                       struct audit_error *err)
{
    uint8_t bytes[CAPTURE_HEADER_BYTES] = { 0 };
    char detail[AUDIT_ERROR_MESSAGE_BYTES];
    struct stat info;
    uint64_t got = 0;
    uint64_t offset = reader->next_offset;
    if (fstat(reader->fd, &info) != 0)
        return STOP_READ_ERROR("cannot stat: %s", strerror(errno));
    uint64_t file_bytes = (uint64_t)info.st_size;
    if (file_bytes == offset) {
        reader->state = CAPTURE_READ_END;
        return 0;
    }
    if (file_bytes < offset)
        return STOP_READ_ERROR("the file shrank to %" PRIu64 " bytes while being read", file_bytes);
    uint64_t remaining = file_bytes - offset;
    uint64_t available = remaining < CAPTURE_HEADER_BYTES ? remaining : CAPTURE_HEADER_BYTES;
    if (input_file_read_at(reader->fd, bytes, available, offset, &got) < 0)
        return STOP_READ_ERROR("%s", strerror(errno));
    if (got < available)
        return STOP_READ_ERROR("the file shrank while being read");
    switch (capture_parse_header(bytes, got, remaining, header, detail, sizeof(detail))) {
    case CAPTURE_READ_CORRUPT: return STOP_CORRUPT("%s", detail);
    case CAPTURE_READ_TRUNCATED: return STOP_TRUNCATED("%s", detail);
    default: return 1;
    }
}

/* Hashes the stored payload straight from the file, in bounded pieces. */
static int check_payload_hash(struct capture_reader *reader, const struct capture_header *header,
                              struct audit_error *err)
{
    uint8_t computed[HASH_BYTES];
    uint64_t hashed = 0;
    if (hash_file_range(reader->fd, reader->next_offset + CAPTURE_HEADER_BYTES,
                        header->stored_bytes, computed, &hashed) < 0)
        return errno == ENOMEM ? STOP_OUT_OF_MEMORY("cannot allocate a hashing buffer")
                               : STOP_READ_ERROR("%s", strerror(errno));
    if (hashed < header->stored_bytes)
        return STOP_TRUNCATED("header promises %" PRIu64 " payload bytes, %" PRIu64
                              " could be read", header->stored_bytes, hashed);
    if (memcmp(computed, header->payload_sha256, HASH_BYTES) != 0) {
        char expected_hex[HASH_HEX_BYTES], computed_hex[HASH_HEX_BYTES];
        hash_to_hex(header->payload_sha256, expected_hex);
        hash_to_hex(computed, computed_hex);
        return STOP_CORRUPT("payload SHA-256 mismatch: header has %s, the %" PRIu64
                            " stored bytes give %s", expected_hex, header->stored_bytes,
                            computed_hex);
    }
    return AUDIT_OK;
}

/* ---- the payload, read or inflated straight into the record's arrays ---- */

enum source_failure {
    SOURCE_CORRUPT = -1,    /* the zlib stream is bad: detail says how */
    SOURCE_SHRANK = -2,     /* the file ended before the stored bytes did */
    SOURCE_READ_ERROR = -3, /* errno kept in saved_errno */
    SOURCE_NO_MEMORY = -4,
};

/* Produces the raw payload in order: stored bytes read with pread() (uncompressed) or inflated
 * from pieces of SOURCE_CHUNK_BYTES (compressed). */
struct payload_source {
    int fd;
    uint64_t next;          /* file offset of the next stored byte to read */
    uint64_t stored_left;   /* stored bytes not read yet */
    uint64_t raw_bytes, produced;
    bool compressed, stream_open, stream_ended;
    z_stream stream;
    uint8_t *input;
    int saved_errno;
    char detail[AUDIT_ERROR_MESSAGE_BYTES];
};

static int source_open(struct payload_source *source, int fd, uint64_t payload_offset,
                       const struct capture_header *header)
{
    memset(source, 0, sizeof(*source));
    source->fd = fd;
    source->next = payload_offset;
    source->stored_left = header->stored_bytes;
    source->raw_bytes = header->raw_bytes;
    source->compressed = header->compressed;
    if (!source->compressed)
        return 0;
    if (!(source->input = malloc((size_t)SOURCE_CHUNK_BYTES)) ||
        inflateInit(&source->stream) != Z_OK)
        return SOURCE_NO_MEMORY;
    source->stream_open = true;
    return 0;
}

static void source_close(struct payload_source *source)
{
    if (source->stream_open)
        inflateEnd(&source->stream);
    free(source->input);
}

static int source_read(struct payload_source *source, uint8_t *out, uint64_t size)
{
    uint64_t got = 0;
    if (input_file_read_at(source->fd, out, size, source->next, &got) < 0) {
        source->saved_errno = errno;
        return SOURCE_READ_ERROR;
    }
    if (got < size)
        return SOURCE_SHRANK;
    source->next += size;
    source->stored_left -= size;
    return 0;
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

/* One inflate() step into out (at most ZLIB_CHUNK_BYTES of it), refilling the input first.
 * Returns 0 with zlib's result in *result, or a negative source failure. */
static int source_inflate(struct payload_source *source, uint8_t *out, uint64_t size,
                          uint64_t *made, int *result)
{
    z_stream *stream = &source->stream;
    *made = 0;
    if (stream->avail_in == 0 && source->stored_left > 0) {
        uint64_t chunk = source->stored_left < SOURCE_CHUNK_BYTES ? source->stored_left
                                                                  : SOURCE_CHUNK_BYTES;
        int status = source_read(source, source->input, chunk);
        if (status < 0)
            return status;
        stream->next_in = source->input;
        stream->avail_in = (uInt)chunk;
    }
    uInt want = (uInt)(size < ZLIB_CHUNK_BYTES ? size : ZLIB_CHUNK_BYTES);
    stream->next_out = out;
    stream->avail_out = want;
    *result = inflate(stream, Z_NO_FLUSH);
    *made = want - stream->avail_out;
    if (*result == Z_STREAM_END)
        source->stream_ended = true;
    /* Out of input with more stored bytes to come is no error: the next step refills. */
    if (*result == Z_BUF_ERROR && stream->avail_in == 0 && source->stored_left > 0)
        *result = Z_OK;
    if (*result == Z_MEM_ERROR)
        return SOURCE_NO_MEMORY;
    return 0;
}

/* The next size raw bytes of the payload into out. */
static int source_take(struct payload_source *source, uint8_t *out, uint64_t size)
{
    if (!source->compressed) {
        int status = source_read(source, out, size);
        if (status == 0)
            source->produced += size;
        return status;
    }
    while (size > 0) {
        uint64_t made = 0;
        int result = Z_STREAM_END;
        if (!source->stream_ended) {
            int status = source_inflate(source, out, size, &made, &result);
            if (status < 0)
                return status;
        }
        out += made;
        size -= made;
        source->produced += made;
        if (result == Z_OK || (result == Z_STREAM_END && size == 0))
            continue;
        snprintf(source->detail, sizeof(source->detail),
                 "zlib payload: %s after %" PRIu64 " of %" PRIu64 " raw bytes",
                 inflate_failure(&source->stream, result), source->produced, source->raw_bytes);
        return SOURCE_CORRUPT;
    }
    return 0;
}

/* After the last raw byte: the stream must end there and use every stored byte. */
static int source_finish(struct payload_source *source)
{
    if (!source->compressed)
        return 0;
    while (!source->stream_ended) {
        uint8_t probe;
        uint64_t made = 0;
        int result = Z_OK;
        int status = source_inflate(source, &probe, 1, &made, &result);
        if (status < 0)
            return status;
        if (made > 0) {
            snprintf(source->detail, sizeof(source->detail),
                     "zlib payload: inflates to more than the raw payload bytes");
            return SOURCE_CORRUPT;
        }
        if (result == Z_OK || result == Z_STREAM_END)
            continue;
        snprintf(source->detail, sizeof(source->detail), "zlib payload: %s",
                 inflate_failure(&source->stream, result));
        return SOURCE_CORRUPT;
    }
    uint64_t unused = source->stream.avail_in + source->stored_left;
    if (unused > 0) {
        snprintf(source->detail, sizeof(source->detail),
                 "zlib payload: %" PRIu64 " stored bytes follow the end of the stream", unused);
        return SOURCE_CORRUPT;
    }
    return 0;
}

/* Allocates the arrays of a record whose fixed part was checked. */
static int allocate_record(struct capture_record *record, const struct payload_shape *shape,
                           const struct payload_layout *layout)
{
    record->rows = shape->rows;
    record->k = shape->k;
    record->row_stride = shape->row_stride;
    record->page_size = shape->page_size;
    record->page_table_cols = shape->page_table_cols;
    record->metadata_json = malloc((size_t)layout->metadata_bytes + 1);
    record->lengths = capture_allocate_elements(shape->rows, 4);
    record->scores = capture_allocate_elements(layout->scores_count, 4);
    if (!record->metadata_json || !record->lengths || !record->scores)
        return -1;
    if ((layout->sections & CAPTURE_SECTION_ROW_STARTS) &&
        !(record->row_starts = capture_allocate_elements(shape->rows, 4)))
        return -1;
    if (layout->sections & CAPTURE_SECTION_PAGE_TABLE) {
        record->page_table_row_starts = capture_allocate_elements(shape->rows, 4);
        record->page_table = capture_allocate_elements(layout->page_table_count, 4);
        if (!record->page_table_row_starts || !record->page_table)
            return -1;
    }
    if ((layout->sections & CAPTURE_SECTION_ENGINE_INDICES) &&
        !(record->engine_indices = capture_allocate_elements(layout->engine_indices_count, 4)))
        return -1;
    return 0;
}

/* Reads every section after the fixed part into the record, in payload order. */
static int take_sections(struct payload_source *source, struct capture_record *record,
                         const struct payload_layout *layout)
{
    const struct {
        void *to;
        uint64_t words;
    } sections[] = {
        { record->lengths, record->rows },
        { record->row_starts, record->row_starts ? record->rows : 0 },
        { record->page_table_row_starts, record->page_table_row_starts ? record->rows : 0 },
        { record->page_table, record->page_table ? layout->page_table_count : 0 },
        { record->engine_indices, record->engine_indices ? layout->engine_indices_count : 0 },
        { record->scores, layout->scores_count },
    };
    int status = source_take(source, (uint8_t *)record->metadata_json, layout->metadata_bytes);
    if (status < 0)
        return status;
    record->metadata_json[layout->metadata_bytes] = '\0';
    for (size_t i = 0; i < sizeof(sections) / sizeof(sections[0]); i++) {
        if (sections[i].words == 0)
            continue;
        if ((status = source_take(source, sections[i].to, sections[i].words * 4)) < 0)
            return status;
        capture_words_from_le(sections[i].to, sections[i].words);
    }
    return source_finish(source);
}

static int decode_payload(struct capture_reader *reader, const struct capture_header *header,
                          struct capture_record *record, struct audit_error *err)
{
    struct payload_source source;
    struct payload_shape shape;
    struct payload_layout layout;
    struct audit_error detail;
    uint8_t fixed[CAPTURE_FIXED_PART_BYTES];
    int status = source_open(&source, reader->fd, reader->next_offset + CAPTURE_HEADER_BYTES,
                             header);
    if (status < 0 || (status = source_take(&source, fixed, sizeof(fixed))) < 0)
        goto source_failed;
    if (capture_parse_fixed_part(fixed, header->raw_bytes, &shape, &layout, &detail) < 0) {
        status = STOP_CORRUPT("%s", detail.message);
        goto done;
    }
    if (allocate_record(record, &shape, &layout) < 0) {
        status = STOP_OUT_OF_MEMORY("cannot hold the record's arrays (%" PRIu64 " raw bytes)",
                                    header->raw_bytes);
        goto done;
    }
    if ((status = take_sections(&source, record, &layout)) < 0)
        goto source_failed;
    if (check_metadata(record->metadata_json, (size_t)layout.metadata_bytes, &detail) < 0 ||
        capture_record_validate(record, &detail) < 0) {
        status = STOP_CORRUPT("%s", detail.message);
        goto done;
    }
    status = AUDIT_OK;
    goto done;
source_failed:
    switch (status) {
    case SOURCE_CORRUPT: status = STOP_CORRUPT("%s", source.detail); break;
    case SOURCE_SHRANK: status = STOP_READ_ERROR("the file shrank while being read"); break;
    case SOURCE_READ_ERROR: status = STOP_READ_ERROR("%s", strerror(source.saved_errno)); break;
    default:
        status = STOP_OUT_OF_MEMORY("cannot allocate the inflater for a %" PRIu64
                                    "-byte payload", header->stored_bytes);
        break;
    }
done:
    source_close(&source);
    return status;
}

int capture_read_record(struct capture_reader *reader, struct capture_record *record,
                        struct audit_error *err)
{
    struct capture_header header;
    memset(record, 0, sizeof(*record));
    if (reader->stop_status) {
        if (err)
            *err = reader->stop_error;
        return reader->stop_status;
    }
    int status = read_header(reader, &header, err);
    if (status <= 0)
        return status;
    /* Before a byte of the payload is read: a record beyond the cap is never held. */
    if (header.raw_bytes > reader->max_record_bytes)
        return reader_stop(reader, CAPTURE_READ_TOO_LARGE, AUDIT_ENOMEM, "too large", err,
                           "the raw payload of %" PRIu64 " bytes is over the memory cap of %" PRIu64
                           " bytes per record (dsatopk-audit --max-record-bytes raises it)",
                           header.raw_bytes, reader->max_record_bytes);
    if ((status = check_payload_hash(reader, &header, err)) < 0)
        return status;
    if ((status = decode_payload(reader, &header, record, err)) < 0) {
        capture_record_free(record);
        return status;
    }
    record->index = reader->next_index;
    record->file_offset = reader->next_offset;
    record->stored_payload_bytes = header.stored_bytes;
    record->compressed = header.compressed;
    memcpy(record->payload_sha256, header.payload_sha256, 32);
    reader->next_index++;
    reader->next_offset += CAPTURE_HEADER_BYTES + header.stored_bytes;
    reader->state = CAPTURE_READ_OK;
    return 1;
}
