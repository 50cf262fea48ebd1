/* libFuzzer harness: the capture reader (src/capture/capture.c) on arbitrary files.
 *
 * Input: one mode byte, then a capture file image. The header CRC-32 and the payload SHA-256
 * stop almost every mutation at the first check, so the mode can repair them (as a writer
 * would) to let mutations reach the payload parser:
 *   bit 0: recompute each record's payload SHA-256 and header CRC where the header is complete
 *   bit 1: treat each record's stored payload as raw and zlib-compress it (flag set, sizes
 *          rewritten), so the inflate path sees valid streams of fuzzed payloads
 *   bit 2: with bit 1, keep the fuzzed raw_payload_bytes instead of the true one
 * Every record the reader returns must pass capture_record_validate, must be written again by
 * capture_append_record and read back identical (uncompressed: the very same payload bytes, by
 * SHA-256), and a failed read must leave the reader stopped in a truncated or corrupt state. */
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <zlib.h>

#include "capture.h"
#include "error.h"
#include "fuzz_common.h"
#include "hash.h"

#define HEADER_BYTES 72
#define MODE_FIX_CHECKSUMS 0x1u
#define MODE_COMPRESS 0x2u
#define MODE_KEEP_RAW_SIZE 0x4u
/* The most records read per input: enough to reach every inter-record path. */
#define MAX_RECORDS 64
/* Records above this raw size are not written back (the input limit keeps them rare). */
#define ROUND_TRIP_MAX_BYTES ((uint64_t)16 << 20)

static struct fuzz_file input_file, round_trip_file;

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc;
    (void)argv;
    if (hash_init() != 0)
        fuzz_violation("harness setup: libsodium failed to initialise");
    fuzz_file_create(&input_file, "fuzz-capture");
    fuzz_file_create(&round_trip_file, "fuzz-capture-round-trip");
    return 0;
}

static uint64_t load_u64(const uint8_t *p)
{
    uint64_t v = 0;
    for (int i = 7; i >= 0; i--)
        v = v << 8 | p[i];
    return v;
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

/* Recomputes SHA-256 and CRC of every complete record header, walking the records as a reader
 * would (stopping where a header's stored size runs past the end). */
static void fix_checksums(uint8_t *image, size_t size)
{
    size_t offset = 0;
    while (size - offset >= HEADER_BYTES) {
        uint8_t *header = image + offset;
        uint64_t stored = load_u64(header + 16);
        size_t available = size - offset - HEADER_BYTES;
        if (stored <= available)
            hash_bytes(header + HEADER_BYTES, (size_t)stored, header + 32);
        store_u32(header + 68, (uint32_t)crc32(0L, header, 68));
        if (stored > available)
            break;
        offset += HEADER_BYTES + (size_t)stored;
    }
}

/* Builds an image whose records carry zlib streams of the input's payloads. */
static uint8_t *compress_records(const uint8_t *body, size_t size, bool keep_raw_size,
                                 size_t *image_size)
{
    /* compressBound grows by well under 1 % plus a constant per record. */
    size_t capacity = size + size / 8 + 4096, used = 0, offset = 0;
    uint8_t *image = malloc(capacity);
    if (!image)
        fuzz_violation("harness: out of memory");
    while (size - offset >= HEADER_BYTES) {
        const uint8_t *header = body + offset;
        uint64_t raw_size = load_u64(header + 16);
        size_t available = size - offset - HEADER_BYTES;
        if (raw_size > available)
            raw_size = available;
        uLongf bound = compressBound((uLong)raw_size);
        if (used + HEADER_BYTES + bound > capacity) {
            capacity = used + HEADER_BYTES + bound + 4096;
            uint8_t *grown = realloc(image, capacity);
            if (!grown)
                fuzz_violation("harness: out of memory");
            image = grown;
        }
        uint8_t *out = image + used;
        memcpy(out, header, HEADER_BYTES);
        uLongf stored = bound;
        if (compress2(out + HEADER_BYTES, &stored, header + HEADER_BYTES, (uLong)raw_size, 6) !=
            Z_OK)
            fuzz_violation("harness: compress2 failed");
        out[12] |= 1; /* the zlib flag; the other flag bits stay as fuzzed */
        store_u64(out + 16, stored);
        if (!keep_raw_size)
            store_u64(out + 24, raw_size);
        used += HEADER_BYTES + stored;
        offset += HEADER_BYTES + (size_t)raw_size;
    }
    /* A tail shorter than a header is kept as it is: the truncated-header path. */
    if (used + (size - offset) > capacity) {
        uint8_t *grown = realloc(image, used + (size - offset));
        if (!grown)
            fuzz_violation("harness: out of memory");
        image = grown;
    }
    memcpy(image + used, body + offset, size - offset);
    *image_size = used + (size - offset);
    return image;
}

static void expect_same_words(const void *a, const void *b, uint64_t count, const char *what,
                              uint32_t index)
{
    if ((a == NULL) != (b == NULL))
        fuzz_violation("record %u: %s present in one copy only after the round trip", index, what);
    if (a && count && memcmp(a, b, (size_t)count * 4) != 0)
        fuzz_violation("record %u: %s changed in the round trip", index, what);
}

/* Writes the record with the library's writer and reads it back: same fields, same bytes. */
static void round_trip(const struct capture_record *record)
{
    struct audit_error err = { 0 };
    struct capture_reader *reader = NULL;
    struct capture_record again;
    fuzz_file_set(&round_trip_file, NULL, 0);
    if (capture_append_record(round_trip_file.path, record, false, &err) < 0)
        fuzz_violation("record %u read fine but cannot be written again: %s", record->index,
                       err.message);
    if (capture_open(&reader, round_trip_file.path, &err) < 0)
        fuzz_violation("round trip: cannot open: %s", err.message);
    if (capture_read_record(reader, &again, &err) != 1)
        fuzz_violation("record %u written again does not read back: %s", record->index,
                       err.message);
    if (!record->compressed && memcmp(again.payload_sha256, record->payload_sha256, 32) != 0)
        fuzz_violation("record %u: writing it again changes its payload bytes", record->index);
    if (again.rows != record->rows || again.k != record->k ||
        again.row_stride != record->row_stride || again.page_size != record->page_size ||
        again.page_table_cols != record->page_table_cols ||
        strcmp(again.metadata_json, record->metadata_json) != 0)
        fuzz_violation("record %u: a field changed in the round trip", record->index);
    uint64_t rows = record->rows;
    expect_same_words(again.scores, record->scores, rows * record->row_stride, "scores",
                      record->index);
    expect_same_words(again.lengths, record->lengths, rows, "lengths", record->index);
    expect_same_words(again.row_starts, record->row_starts, rows, "row_starts", record->index);
    expect_same_words(again.page_table, record->page_table, rows * record->page_table_cols,
                      "page_table", record->index);
    expect_same_words(again.page_table_row_starts, record->page_table_row_starts, rows,
                      "page_table_row_starts", record->index);
    expect_same_words(again.engine_indices, record->engine_indices, rows * record->k,
                      "engine_indices", record->index);
    capture_record_free(&again);
    if (capture_read_record(reader, &again, &err) != 0)
        fuzz_violation("round trip: a second record appeared");
    capture_close(reader);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1)
        return 0;
    unsigned mode = data[0];
    const uint8_t *body = data + 1;
    size_t body_size = size - 1;
    uint8_t *image;
    size_t image_size = body_size;
    if (mode & MODE_COMPRESS) {
        image = compress_records(body, body_size, (mode & MODE_KEEP_RAW_SIZE) != 0, &image_size);
    } else {
        image = malloc(body_size ? body_size : 1);
        if (!image)
            fuzz_violation("harness: out of memory");
        memcpy(image, body, body_size);
    }
    if (mode & MODE_FIX_CHECKSUMS)
        fix_checksums(image, image_size);
    fuzz_file_set(&input_file, image, image_size);
    free(image);

    struct audit_error err = { 0 };
    struct capture_reader *reader = NULL;
    if (capture_open(&reader, input_file.path, &err) < 0)
        fuzz_violation("cannot open the in-memory file: %s", err.message);
    int status = 1;
    uint32_t records = 0;
    while (records < MAX_RECORDS) {
        struct capture_record record;
        status = capture_read_record(reader, &record, &err);
        if (status <= 0)
            break;
        if (record.index != records)
            fuzz_violation("record %u reported as index %u", records, record.index);
        struct audit_error invalid = { 0 };
        if (capture_record_validate(&record, &invalid) < 0)
            fuzz_violation("record %u was returned but does not validate: %s", records,
                           invalid.message);
        if (!record.metadata_json)
            fuzz_violation("record %u has no metadata text", records);
        uint64_t raw = 64 + strlen(record.metadata_json) +
                       4ull * record.rows * (2 + record.page_table_cols + record.k +
                                             record.row_stride);
        if (raw <= ROUND_TRIP_MAX_BYTES)
            round_trip(&record);
        capture_record_free(&record);
        records++;
    }
    if (fuzz_verbose())
        fprintf(stderr, "capture: %u records, status %d: %s\n", records, status, err.message);
    if (status < 0) {
        enum capture_read_state state = capture_reader_state(reader);
        if (status == AUDIT_EDATA && state != CAPTURE_READ_TRUNCATED &&
            state != CAPTURE_READ_CORRUPT)
            fuzz_violation("bad data reported (%s) but the reader state is %d", err.message,
                           (int)state);
        if (status != AUDIT_EDATA && status != AUDIT_ENOMEM && status != AUDIT_EIO)
            fuzz_violation("unexpected status %d: %s", status, err.message);
        if (strstr(err.message, input_file.path) == NULL)
            fuzz_violation("the error does not name the file: %s", err.message);
        /* The reader stays stopped with the same answer. */
        struct capture_record record;
        struct audit_error again = { 0 };
        if (capture_read_record(reader, &record, &again) != status ||
            strcmp(again.message, err.message) != 0)
            fuzz_violation("a stopped reader answered differently the second time");
    } else if (status == 0 && capture_reader_state(reader) != CAPTURE_READ_END) {
        fuzz_violation("clean end of file but the reader state is %d",
                       (int)capture_reader_state(reader));
    }
    capture_close(reader);
    return 0;
}
