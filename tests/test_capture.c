/* Capture format: round trips of every section combination (with the layout helpers: where the
 * next record starts, the raw payload's size), concatenation, truncation at every byte, flipped
 * bytes, hostile headers whose checksums are consistent, and validation. */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <fcntl.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <zlib.h>

#include "capture.h"
#include "hash.h"
#include "test_util.h"

#define HEADER_BYTES 72
#define FIXED_PART_BYTES 64

static char test_directory[256];

static void path_in_test_directory(char *out, size_t size, const char *name)
{
    snprintf(out, size, "%s/%s", test_directory, name);
}

#define assert_message_contains(err, text)                                                       \
    do {                                                                                         \
        if (!strstr((err).message, (text)))                                                      \
            fail_msg("error message \"%s\" does not contain \"%s\"", (err).message, (text));     \
    } while (0)

/* ---- files ---- */

static uint8_t *read_whole_file(const char *path, size_t *size)
{
    FILE *file = fopen(path, "rb");
    assert_non_null(file);
    assert_int_equal(fseek(file, 0, SEEK_END), 0);
    long length = ftell(file);
    assert_true(length >= 0);
    rewind(file);
    uint8_t *bytes = malloc((size_t)length + 1);
    assert_non_null(bytes);
    assert_int_equal(fread(bytes, 1, (size_t)length, file), (size_t)length);
    fclose(file);
    *size = (size_t)length;
    return bytes;
}

static void write_whole_file(const char *path, const uint8_t *bytes, size_t size)
{
    FILE *file = fopen(path, "wb");
    assert_non_null(file);
    if (size)
        assert_int_equal(fwrite(bytes, 1, size, file), size);
    assert_int_equal(fclose(file), 0);
}

/* ---- records ---- */

struct record_spec {
    uint32_t rows, k, row_stride, page_size;
    bool row_starts, page_table, engine_indices;
    const char *metadata; /* NULL: none given ("{}" on read) */
};

/* Scores with the values that must survive bit for bit: -0.0, a NaN payload, -inf, subnormals. */
static float score_at(uint32_t row, uint32_t column)
{
    if (column % 7 == 3)
        return float_from_bits(0x80000000u);
    if (column % 11 == 5)
        return float_from_bits(0x7fc01234u);
    if (column % 13 == 6)
        return -INFINITY;
    if (column % 17 == 8)
        return float_from_bits(0x00000123u + row);
    return (float)(row * 1000 + column) * 0.25f - 3.0f;
}

static void build_record(struct capture_record *record, const struct record_spec *spec)
{
    memset(record, 0, sizeof(*record));
    record->rows = spec->rows;
    record->k = spec->k;
    record->row_stride = spec->row_stride;
    record->scores = calloc((size_t)spec->rows * spec->row_stride + 1, sizeof(float));
    record->lengths = calloc(spec->rows, sizeof(int32_t));
    assert_non_null(record->scores);
    assert_non_null(record->lengths);
    if (spec->row_starts) {
        record->row_starts = calloc(spec->rows, sizeof(int32_t));
        assert_non_null(record->row_starts);
    }
    for (uint32_t b = 0; b < spec->rows; b++) {
        for (uint32_t i = 0; i < spec->row_stride; i++)
            record->scores[(size_t)b * spec->row_stride + i] = score_at(b, i);
        int32_t start = spec->row_starts ? (int32_t)(b % 3 < spec->row_stride ? b % 3 : 0) : 0;
        int32_t room = (int32_t)spec->row_stride - start;
        /* Row 0 empty, row 1 as long as the stride allows, the rest in between. */
        int32_t length = b == 0 ? 0 : b == 1 ? room : (int32_t)((b * 7u) % (uint32_t)(room + 1));
        if (record->row_starts)
            record->row_starts[b] = start;
        record->lengths[b] = length;
    }
    if (spec->page_table) {
        record->page_size = spec->page_size;
        record->page_table_cols = 1 + (spec->row_stride + spec->page_size - 1) / spec->page_size;
        record->page_table = calloc((size_t)spec->rows * record->page_table_cols, sizeof(int32_t));
        record->page_table_row_starts = calloc(spec->rows, sizeof(int32_t));
        assert_non_null(record->page_table);
        assert_non_null(record->page_table_row_starts);
        for (uint32_t b = 0; b < spec->rows; b++) {
            record->page_table_row_starts[b] = (int32_t)(b % 2);
            for (uint64_t j = 0; j < record->page_table_cols; j++)
                record->page_table[b * record->page_table_cols + j] = (int32_t)(b * 100 + j);
        }
    }
    if (spec->engine_indices) {
        record->engine_indices = calloc((size_t)spec->rows * spec->k, sizeof(int32_t));
        assert_non_null(record->engine_indices);
        for (uint32_t i = 0; i < spec->rows * spec->k; i++)
            record->engine_indices[i] = i % 5 == 4 ? -1 : (int32_t)(i * 3);
    }
    if (spec->metadata) {
        record->metadata_json = strdup(spec->metadata);
        assert_non_null(record->metadata_json);
    }
    struct audit_error err = { 0 };
    if (capture_record_validate(record, &err) != AUDIT_OK)
        fail_msg("test record invalid: %s", err.message);
}

static void assert_words_equal(const void *written, const void *read, uint64_t count)
{
    if (!written) {
        assert_null(read);
        return;
    }
    assert_non_null(read);
    assert_memory_equal(written, read, (size_t)count * 4);
}

static void assert_records_equal(const struct capture_record *written,
                                 const struct capture_record *read)
{
    assert_int_equal(read->rows, written->rows);
    assert_int_equal(read->k, written->k);
    assert_int_equal(read->row_stride, written->row_stride);
    assert_int_equal(read->page_size, written->page_size);
    assert_int_equal(read->page_table_cols, written->page_table_cols);
    assert_words_equal(written->scores, read->scores, (uint64_t)written->rows * written->row_stride);
    assert_words_equal(written->lengths, read->lengths, written->rows);
    assert_words_equal(written->row_starts, read->row_starts, written->rows);
    assert_words_equal(written->page_table, read->page_table,
                       (uint64_t)written->rows * written->page_table_cols);
    assert_words_equal(written->engine_indices, read->engine_indices,
                       (uint64_t)written->rows * written->k);
    if (written->page_size) {
        assert_non_null(read->page_table_row_starts);
        for (uint32_t b = 0; b < written->rows; b++)
            assert_int_equal(read->page_table_row_starts[b],
                             written->page_table_row_starts ? written->page_table_row_starts[b] : 0);
    } else {
        assert_null(read->page_table_row_starts);
    }
    assert_non_null(read->metadata_json);
    assert_string_equal(read->metadata_json, written->metadata_json ? written->metadata_json : "{}");
}

static void append_or_fail(const char *path, const struct capture_record *record, bool compress)
{
    struct audit_error err = { 0 };
    if (capture_append_record(path, record, compress, &err) != AUDIT_OK)
        fail_msg("append to %s failed: %s", path, err.message);
}

/* Reads path to its end; returns the number of good records and the final status. */
static int read_all(const char *path, struct capture_record *records, int capacity, int *status,
                    enum capture_read_state *state, struct audit_error *err)
{
    struct capture_reader *reader = NULL;
    int count = 0;
    *state = CAPTURE_READ_OK;
    *status = capture_open(&reader, path, err);
    if (*status != AUDIT_OK)
        return 0;
    for (;;) {
        struct capture_record record;
        *status = capture_read_record(reader, &record, err);
        if (*status != 1)
            break;
        if (count < capacity)
            records[count] = record;
        else
            capture_record_free(&record);
        count++;
    }
    if (*status < 0) {
        /* A stopped reader keeps answering with the same error. */
        struct capture_record again;
        struct audit_error second = { 0 };
        assert_int_equal(capture_read_record(reader, &again, &second), *status);
        assert_string_equal(second.message, err->message);
    }
    *state = capture_reader_state(reader);
    capture_close(reader);
    return count;
}

static void free_records(struct capture_record *records, int count)
{
    for (int i = 0; i < count; i++)
        capture_record_free(&records[i]);
}

static const struct record_spec small_spec = {
    .rows = 5, .k = 4, .row_stride = 37, .page_size = 8, .metadata = "{\"engine\":\"test\",\"layer\":3}",
};

/* ---- round trips ---- */

static void test_round_trip_every_section_combination(void **state)
{
    (void)state;
    char path[512];
    path_in_test_directory(path, sizeof(path), "round_trip.bin");
    unlink(path);
    struct capture_record written[16];
    uint64_t expected_offset = 0;
    uint64_t offsets[16];
    int count = 0;
    for (int compress = 0; compress < 2; compress++) {
        for (unsigned sections = 0; sections < 8; sections++) {
            struct record_spec spec = small_spec;
            spec.row_starts = sections & 1;
            spec.page_table = sections & 2;
            spec.engine_indices = sections & 4;
            spec.metadata = sections == 3 ? NULL : spec.metadata;
            build_record(&written[count], &spec);
            struct stat before;
            offsets[count] = stat(path, &before) == 0 ? (uint64_t)before.st_size : 0;
            assert_int_equal(offsets[count], expected_offset);
            append_or_fail(path, &written[count], compress);
            struct stat after;
            assert_int_equal(stat(path, &after), 0);
            expected_offset = (uint64_t)after.st_size;
            count++;
        }
    }
    struct capture_record read[16];
    struct audit_error err = { 0 };
    int status;
    enum capture_read_state read_state;
    int got = read_all(path, read, 16, &status, &read_state, &err);
    if (status != 0)
        fail_msg("read failed: %s", err.message);
    assert_int_equal(got, 16);
    assert_int_equal(read_state, CAPTURE_READ_END);
    for (int i = 0; i < 16; i++) {
        assert_records_equal(&written[i], &read[i]);
        assert_int_equal(read[i].index, i);
        assert_int_equal(read[i].file_offset, offsets[i]);
        assert_int_equal(read[i].compressed, i >= 8);
        uint64_t next = i + 1 < 16 ? offsets[i + 1] : expected_offset;
        assert_int_equal(read[i].stored_payload_bytes, next - offsets[i] - HEADER_BYTES);
        /* The layout helpers: where the next record starts, and the raw payload's size (the
         * stored size when not compressed; a compressed record's is its uncompressed twin's). */
        assert_int_equal(capture_record_end_offset(&read[i]), next);
        assert_int_equal(capture_record_raw_payload_bytes(&read[i]),
                         i < 8 ? read[i].stored_payload_bytes : read[i - 8].stored_payload_bytes);
    }
    assert_int_equal(CAPTURE_RECORD_HEADER_BYTES, HEADER_BYTES);
    /* The stored SHA-256 is the hash of the stored payload bytes as they lie in the file. */
    size_t file_size;
    uint8_t *bytes = read_whole_file(path, &file_size);
    for (int i = 0; i < 16; i++) {
        uint8_t digest[HASH_BYTES];
        hash_bytes(bytes + offsets[i] + HEADER_BYTES, (size_t)read[i].stored_payload_bytes, digest);
        assert_memory_equal(digest, read[i].payload_sha256, HASH_BYTES);
    }
    /* Compression helps on these rows (repeated patterns): the flag is honest. */
    assert_true(read[8].stored_payload_bytes < read[0].stored_payload_bytes);
    free(bytes);
    free_records(written, 16);
    free_records(read, 16);
}

static void test_round_trip_shapes(void **state)
{
    (void)state;
    /* One row; a stride with every window empty; a wide padded stride; page_size 1. */
    static const struct record_spec specs[] = {
        { .rows = 1, .k = 1, .row_stride = 1 },
        { .rows = 3, .k = 7, .row_stride = 0 },
        { .rows = 2, .k = 2048, .row_stride = 4099, .engine_indices = true },
        { .rows = 4, .k = 3, .row_stride = 9, .page_size = 1, .page_table = true, .row_starts = true },
        { .rows = 2, .k = 3, .row_stride = 0, .page_size = 64, .page_table = true },
    };
    for (size_t i = 0; i < sizeof(specs) / sizeof(specs[0]); i++) {
        for (int compress = 0; compress < 2; compress++) {
            char path[512];
            path_in_test_directory(path, sizeof(path), "shape.bin");
            unlink(path);
            struct capture_record written, read[1];
            build_record(&written, &specs[i]);
            append_or_fail(path, &written, compress);
            struct audit_error err = { 0 };
            int status;
            enum capture_read_state read_state;
            int got = read_all(path, read, 1, &status, &read_state, &err);
            if (status != 0 || got != 1)
                fail_msg("shape %zu compress %d: %d records, status %d: %s", i, compress, got,
                         status, err.message);
            assert_records_equal(&written, &read[0]);
            capture_record_free(&written);
            capture_record_free(&read[0]);
        }
    }
}

static void test_metadata_text_is_kept_exactly(void **state)
{
    (void)state;
    char path[512];
    path_in_test_directory(path, sizeof(path), "metadata.bin");
    unlink(path);
    struct record_spec spec = small_spec;
    spec.metadata = "{ \"model\": \"DeepSeek-V3.2\", \"note\": \"caf\xc3\xa9 \xe2\x9c\x93\", "
                    "\"nested\": {\"step\": 12, \"ranks\": [0, 1]} }";
    struct capture_record written, read[1];
    build_record(&written, &spec);
    append_or_fail(path, &written, true);
    struct audit_error err = { 0 };
    int status;
    enum capture_read_state read_state;
    assert_int_equal(read_all(path, read, 1, &status, &read_state, &err), 1);
    assert_string_equal(read[0].metadata_json, spec.metadata);
    capture_record_free(&written);
    capture_record_free(&read[0]);
}

static void test_concatenated_files_are_one_capture(void **state)
{
    (void)state;
    char first[512], second[512], joined[512];
    path_in_test_directory(first, sizeof(first), "first.bin");
    path_in_test_directory(second, sizeof(second), "second.bin");
    path_in_test_directory(joined, sizeof(joined), "joined.bin");
    unlink(first);
    unlink(second);
    struct capture_record written[3];
    for (int i = 0; i < 3; i++) {
        struct record_spec spec = small_spec;
        spec.rows = 2 + (uint32_t)i;
        spec.row_starts = i == 1;
        spec.page_table = i == 2;
        build_record(&written[i], &spec);
        append_or_fail(i < 2 ? first : second, &written[i], i == 1);
    }
    size_t first_size, second_size;
    uint8_t *a = read_whole_file(first, &first_size);
    uint8_t *b = read_whole_file(second, &second_size);
    uint8_t *both = malloc(first_size + second_size);
    assert_non_null(both);
    memcpy(both, a, first_size);
    memcpy(both + first_size, b, second_size);
    write_whole_file(joined, both, first_size + second_size);

    struct capture_record read[3];
    struct audit_error err = { 0 };
    int status;
    enum capture_read_state read_state;
    assert_int_equal(read_all(joined, read, 3, &status, &read_state, &err), 3);
    assert_int_equal(status, 0);
    for (int i = 0; i < 3; i++) {
        assert_records_equal(&written[i], &read[i]);
        assert_int_equal(read[i].index, i);
    }
    assert_int_equal(read[2].file_offset, first_size);
    free(a);
    free(b);
    free(both);
    free_records(written, 3);
    free_records(read, 3);
}

static void test_reader_sees_records_appended_after_end(void **state)
{
    (void)state;
    char path[512];
    path_in_test_directory(path, sizeof(path), "growing.bin");
    unlink(path);
    struct capture_record written, read;
    build_record(&written, &small_spec);
    append_or_fail(path, &written, false);
    struct capture_reader *reader = NULL;
    struct audit_error err = { 0 };
    assert_int_equal(capture_open(&reader, path, &err), AUDIT_OK);
    assert_int_equal(capture_read_record(reader, &read, &err), 1);
    capture_record_free(&read);
    assert_int_equal(capture_read_record(reader, &read, &err), 0);
    assert_int_equal(capture_reader_state(reader), CAPTURE_READ_END);
    append_or_fail(path, &written, true);
    assert_int_equal(capture_read_record(reader, &read, &err), 1);
    assert_int_equal(read.index, 1);
    assert_int_equal(capture_reader_state(reader), CAPTURE_READ_OK);
    assert_records_equal(&written, &read);
    capture_record_free(&read);
    capture_close(reader);
    capture_record_free(&written);
}

/* ---- truncated and corrupt files ---- */

/* Writes a two-record file (the second compressed); returns its bytes and the first's size. */
static uint8_t *two_record_file(const char *path, size_t *size, size_t *first_size,
                                struct capture_record *first)
{
    struct record_spec spec = { .rows = 2, .k = 2, .row_stride = 6, .page_size = 4,
                                .row_starts = true, .metadata = "{\"n\":1}" };
    struct capture_record second;
    unlink(path);
    build_record(first, &spec);
    spec.page_table = true;
    spec.engine_indices = true;
    build_record(&second, &spec);
    append_or_fail(path, first, false);
    struct stat info;
    assert_int_equal(stat(path, &info), 0);
    *first_size = (size_t)info.st_size;
    append_or_fail(path, &second, true);
    capture_record_free(&second);
    return read_whole_file(path, size);
}

static void test_truncation_at_every_byte(void **state)
{
    (void)state;
    char path[512], cut_path[512];
    path_in_test_directory(path, sizeof(path), "two.bin");
    path_in_test_directory(cut_path, sizeof(cut_path), "cut.bin");
    size_t size, first_size;
    struct capture_record first;
    uint8_t *bytes = two_record_file(path, &size, &first_size, &first);
    for (size_t cut = 0; cut < size; cut++) {
        write_whole_file(cut_path, bytes, cut);
        struct capture_record read[2];
        struct audit_error err = { 0 };
        int status;
        enum capture_read_state read_state;
        int got = read_all(cut_path, read, 2, &status, &read_state, &err);
        if (cut == 0 || cut == first_size) {
            assert_int_equal(status, 0);
            assert_int_equal(read_state, CAPTURE_READ_END);
            assert_int_equal(got, cut == 0 ? 0 : 1);
        } else {
            if (status != AUDIT_EDATA || read_state != CAPTURE_READ_TRUNCATED)
                fail_msg("cut at %zu: status %d state %d: %s", cut, status, read_state, err.message);
            char where[64];
            snprintf(where, sizeof(where), "record %d at byte %zu: truncated",
                     cut < first_size ? 0 : 1, cut < first_size ? (size_t)0 : first_size);
            assert_message_contains(err, where);
            assert_message_contains(err, "cut.bin");
            assert_int_equal(got, cut < first_size ? 0 : 1);
        }
        if (got >= 1)
            assert_records_equal(&first, &read[0]);
        free_records(read, got < 2 ? got : 2);
    }
    free(bytes);
    capture_record_free(&first);
}

static void test_flipped_header_bytes_are_corrupt(void **state)
{
    (void)state;
    char path[512], bad_path[512];
    path_in_test_directory(path, sizeof(path), "two.bin");
    path_in_test_directory(bad_path, sizeof(bad_path), "bad_header.bin");
    size_t size, first_size;
    struct capture_record first;
    uint8_t *bytes = two_record_file(path, &size, &first_size, &first);
    for (int record = 0; record < 2; record++) {
        size_t base = record == 0 ? 0 : first_size;
        for (size_t i = 0; i < HEADER_BYTES; i++) {
            for (int bit = 0; bit < 8; bit += 7) {
                bytes[base + i] ^= (uint8_t)(1u << bit);
                write_whole_file(bad_path, bytes, size);
                bytes[base + i] ^= (uint8_t)(1u << bit);
                struct capture_record read[2];
                struct audit_error err = { 0 };
                int status;
                enum capture_read_state read_state;
                int got = read_all(bad_path, read, 2, &status, &read_state, &err);
                if (status != AUDIT_EDATA || read_state != CAPTURE_READ_CORRUPT || got != record)
                    fail_msg("flip record %d byte %zu bit %d: got %d, status %d, state %d: %s",
                             record, i, bit, got, status, read_state, err.message);
                assert_message_contains(err, i < 8 ? "magic" : "CRC-32");
                free_records(read, got);
            }
        }
    }
    free(bytes);
    capture_record_free(&first);
}

static void test_flipped_payload_bytes_are_corrupt(void **state)
{
    (void)state;
    char path[512], bad_path[512];
    path_in_test_directory(path, sizeof(path), "two.bin");
    path_in_test_directory(bad_path, sizeof(bad_path), "bad_payload.bin");
    size_t size, first_size;
    struct capture_record first;
    uint8_t *bytes = two_record_file(path, &size, &first_size, &first);
    for (size_t i = 0; i < size; i++) {
        bool in_first_payload = i >= HEADER_BYTES && i < first_size;
        bool in_second_payload = i >= first_size + HEADER_BYTES;
        if (!in_first_payload && !in_second_payload)
            continue;
        bytes[i] ^= 0x20;
        write_whole_file(bad_path, bytes, size);
        bytes[i] ^= 0x20;
        struct capture_record read[2];
        struct audit_error err = { 0 };
        int status;
        enum capture_read_state read_state;
        int got = read_all(bad_path, read, 2, &status, &read_state, &err);
        if (status != AUDIT_EDATA || read_state != CAPTURE_READ_CORRUPT ||
            got != (in_first_payload ? 0 : 1))
            fail_msg("flip at %zu: got %d, status %d, state %d: %s", i, got, status, read_state,
                     err.message);
        assert_message_contains(err, "payload SHA-256 mismatch");
        free_records(read, got);
    }
    free(bytes);
    capture_record_free(&first);
}

static void test_garbage_and_foreign_files(void **state)
{
    (void)state;
    char path[512];
    path_in_test_directory(path, sizeof(path), "garbage.bin");
    struct capture_record record, read[2];
    struct audit_error err = { 0 };
    int status;
    enum capture_read_state read_state;

    write_whole_file(path, (const uint8_t *)"hello, world\n", 13);
    assert_int_equal(read_all(path, read, 2, &status, &read_state, &err), 0);
    assert_int_equal(status, AUDIT_EDATA);
    assert_int_equal(read_state, CAPTURE_READ_CORRUPT);
    assert_message_contains(err, "record 0 at byte 0: corrupt");
    assert_message_contains(err, "magic");

    /* A good record, then bytes that are not a record start: corrupt at the second record. */
    unlink(path);
    build_record(&record, &small_spec);
    append_or_fail(path, &record, false);
    size_t size;
    uint8_t *bytes = read_whole_file(path, &size);
    uint8_t *longer = malloc(size + 4);
    assert_non_null(longer);
    memcpy(longer, bytes, size);
    memcpy(longer + size, "DSAX", 4);
    write_whole_file(path, longer, size + 4);
    assert_int_equal(read_all(path, read, 2, &status, &read_state, &err), 1);
    assert_int_equal(read_state, CAPTURE_READ_CORRUPT);
    char where[64];
    snprintf(where, sizeof(where), "record 1 at byte %zu: corrupt", size);
    assert_message_contains(err, where);
    free_records(read, 1);
    /* ... while the start of a real magic there is a truncated header. */
    memcpy(longer + size, "DSAT", 4);
    write_whole_file(path, longer, size + 4);
    assert_int_equal(read_all(path, read, 2, &status, &read_state, &err), 1);
    assert_int_equal(read_state, CAPTURE_READ_TRUNCATED);
    assert_message_contains(err, "4 bytes into the 72-byte record header");
    free_records(read, 1);
    free(bytes);
    free(longer);
    capture_record_free(&record);

    struct capture_reader *reader = NULL;
    path_in_test_directory(path, sizeof(path), "does-not-exist.bin");
    assert_int_equal(capture_open(&reader, path, &err), AUDIT_EIO);
    assert_null(reader);
    assert_message_contains(err, "does-not-exist.bin: cannot open");
    assert_int_equal(capture_open(&reader, test_directory, &err), AUDIT_EIO);
    assert_message_contains(err, "not a regular file");
}

/* ---- hand-made records whose header CRC and payload SHA-256 are consistent ---- */

static void put_u16(uint8_t *p, uint16_t v)
{
    p[0] = (uint8_t)v;
    p[1] = (uint8_t)(v >> 8);
}

static void put_u32(uint8_t *p, uint32_t v)
{
    for (int i = 0; i < 4; i++)
        p[i] = (uint8_t)(v >> (8 * i));
}

static void put_u64(uint8_t *p, uint64_t v)
{
    for (int i = 0; i < 8; i++)
        p[i] = (uint8_t)(v >> (8 * i));
}

struct crafted_header {
    uint16_t major, minor;
    uint32_t flags;
    uint64_t stored_bytes, raw_bytes; /* what the header claims */
    uint32_t reserved;
};

/* Writes a header with a correct CRC and the SHA-256 of the payload, then the payload. */
static void write_crafted(const char *path, const struct crafted_header *fields,
                          const uint8_t *payload, size_t payload_bytes)
{
    uint8_t *file = malloc(HEADER_BYTES + payload_bytes);
    assert_non_null(file);
    memcpy(file, "DSATOPK\n", 8);
    put_u16(file + 8, fields->major);
    put_u16(file + 10, fields->minor);
    put_u32(file + 12, fields->flags);
    put_u64(file + 16, fields->stored_bytes);
    put_u64(file + 24, fields->raw_bytes);
    hash_bytes(payload, payload_bytes, file + 32);
    put_u32(file + 64, fields->reserved);
    put_u32(file + 68, (uint32_t)crc32(0L, file, 68));
    memcpy(file + HEADER_BYTES, payload, payload_bytes);
    write_whole_file(path, file, HEADER_BYTES + payload_bytes);
    free(file);
}

/* Uncompressed header fields that describe payload_bytes honestly. */
static struct crafted_header honest_header(size_t payload_bytes)
{
    struct crafted_header header = { .major = 1, .stored_bytes = payload_bytes,
                                     .raw_bytes = payload_bytes };
    return header;
}

/* The raw payload of a valid record (from a file the library wrote). */
static uint8_t *raw_payload_of(const struct record_spec *spec, size_t *payload_bytes)
{
    char path[512];
    path_in_test_directory(path, sizeof(path), "source.bin");
    unlink(path);
    struct capture_record record;
    build_record(&record, spec);
    append_or_fail(path, &record, false);
    capture_record_free(&record);
    size_t size;
    uint8_t *bytes = read_whole_file(path, &size);
    *payload_bytes = size - HEADER_BYTES;
    memmove(bytes, bytes + HEADER_BYTES, *payload_bytes);
    return bytes;
}

static uint8_t *zlib_compress(const uint8_t *data, size_t size, size_t *compressed_bytes)
{
    uLongf capacity = compressBound(size);
    uint8_t *out = malloc(capacity);
    assert_non_null(out);
    assert_int_equal(compress2(out, &capacity, data, size, 6), Z_OK);
    *compressed_bytes = capacity;
    return out;
}

/* Reads a one-record crafted file and expects state with a message containing text. */
static void expect_refused(const char *path, enum capture_read_state expected_state, const char *text)
{
    struct capture_record read[1];
    struct audit_error err = { 0 };
    int status;
    enum capture_read_state read_state;
    int got = read_all(path, read, 1, &status, &read_state, &err);
    if (got != 0 || status != AUDIT_EDATA || read_state != expected_state)
        fail_msg("expected refusal (%s): got %d records, status %d, state %d: %s", text, got, status,
                 read_state, err.message);
    assert_message_contains(err, "record 0 at byte 0");
    assert_message_contains(err, text);
}

static void expect_readable(const char *path)
{
    struct capture_record read[1];
    struct audit_error err = { 0 };
    int status;
    enum capture_read_state read_state;
    int got = read_all(path, read, 1, &status, &read_state, &err);
    if (got != 1 || status != 0)
        fail_msg("expected one readable record: got %d, status %d: %s", got, status, err.message);
    free_records(read, 1);
}

static void test_hostile_headers_are_refused_before_allocating(void **state)
{
    (void)state;
    char path[512];
    path_in_test_directory(path, sizeof(path), "hostile.bin");
    size_t payload_bytes;
    struct record_spec spec = { .rows = 2, .k = 2, .row_stride = 8, .metadata = "{\"a\":\"x\"}" };
    uint8_t *payload = raw_payload_of(&spec, &payload_bytes);
    uint8_t *edited = malloc(payload_bytes);
    assert_non_null(edited);
    struct crafted_header header = honest_header(payload_bytes);

    /* The untouched payload reads, and so does a newer minor version. */
    write_crafted(path, &header, payload, payload_bytes);
    expect_readable(path);
    header.minor = 7;
    write_crafted(path, &header, payload, payload_bytes);
    expect_readable(path);
    header = honest_header(payload_bytes);

    /* Header fields. */
    header.major = 2;
    write_crafted(path, &header, payload, payload_bytes);
    expect_refused(path, CAPTURE_READ_CORRUPT, "format version 2.0");
    header = honest_header(payload_bytes);
    header.flags = 0x2;
    write_crafted(path, &header, payload, payload_bytes);
    expect_refused(path, CAPTURE_READ_CORRUPT, "header flags 0x00000002 have unknown bits");
    header = honest_header(payload_bytes);
    header.reserved = 1;
    write_crafted(path, &header, payload, payload_bytes);
    expect_refused(path, CAPTURE_READ_CORRUPT, "reserved header field");

    /* Absurd sizes: refused by the header checks (a malloc of these would fail with
     * AUDIT_ENOMEM, or, for the 100 MB claim, succeed: the messages show the refusal came
     * first). */
    header = honest_header(payload_bytes);
    header.stored_bytes = header.raw_bytes = (uint64_t)1 << 63;
    write_crafted(path, &header, payload, payload_bytes);
    expect_refused(path, CAPTURE_READ_CORRUPT, "stored payload bytes 9223372036854775808 exceed");
    header.flags = 1;
    header.stored_bytes = payload_bytes;
    write_crafted(path, &header, payload, payload_bytes);
    expect_refused(path, CAPTURE_READ_CORRUPT, "raw payload bytes 9223372036854775808 exceed");
    header.raw_bytes = (uint64_t)payload_bytes * 1000000;
    write_crafted(path, &header, payload, payload_bytes);
    expect_refused(path, CAPTURE_READ_CORRUPT, "maximum ratio 1032:1");
    header = honest_header(payload_bytes);
    header.stored_bytes = header.raw_bytes = (uint64_t)1 << 30;
    write_crafted(path, &header, payload, payload_bytes);
    char promise[128];
    snprintf(promise, sizeof(promise), "header promises 1073741824 payload bytes, %zu remain",
             payload_bytes);
    expect_refused(path, CAPTURE_READ_TRUNCATED, promise);
    header = honest_header(payload_bytes);
    header.stored_bytes = header.raw_bytes = 10;
    write_crafted(path, &header, payload, 10);
    expect_refused(path, CAPTURE_READ_CORRUPT, "fewer than the 64-byte fixed part");

    /* Fixed-part fields, each with a consistent SHA-256. */
    struct {
        size_t offset, width;
        uint64_t value;
        const char *message;
    } const fixed_edits[] = {
        { 0, 4, 0xFFFFFFFFu, "rows 4294967295 out of range 1..16777216" },
        { 0, 4, 0, "rows 0 out of range" },
        { 4, 4, 0, "k 0 out of range" },
        { 4, 4, CAPTURE_MAX_K + 1, "k 1048577 out of range" },
        { 8, 8, (uint64_t)1 << 40, "row_stride 1099511627776 exceeds the limit" },
        { 8, 8, UINT64_MAX, "row_stride 18446744073709551615 exceeds the limit" },
        { 16, 4, 0x8, "section flags 0x00000008 have unknown bits" },
        { 20, 4, 64, "page_size 64 disagrees with the page_table section flag" },
        { 24, 8, 5, "page_table_cols 5 without a page table" },
        { 32, 8, (uint64_t)1 << 62, "metadata of 4611686018427387904 bytes exceeds the limit" },
        { 32, 8, 3, "the fixed part implies" },
        { 8, 8, 9, "the fixed part implies" },
        { 47, 1, 1, "reserved payload byte 47 is not zero" },
    };
    for (size_t i = 0; i < sizeof(fixed_edits) / sizeof(fixed_edits[0]); i++) {
        memcpy(edited, payload, payload_bytes);
        if (fixed_edits[i].width == 1)
            edited[fixed_edits[i].offset] = (uint8_t)fixed_edits[i].value;
        else if (fixed_edits[i].width == 4)
            put_u32(edited + fixed_edits[i].offset, (uint32_t)fixed_edits[i].value);
        else
            put_u64(edited + fixed_edits[i].offset, fixed_edits[i].value);
        header = honest_header(payload_bytes);
        write_crafted(path, &header, edited, payload_bytes);
        expect_refused(path, CAPTURE_READ_CORRUPT, fixed_edits[i].message);
    }

    /* rows and row_stride each within their limits, their product over the payload limit. */
    memcpy(edited, payload, payload_bytes);
    put_u32(edited + 0, CAPTURE_MAX_ROWS);
    put_u64(edited + 8, CAPTURE_MAX_ROW_STRIDE);
    write_crafted(path, &header, edited, payload_bytes);
    expect_refused(path, CAPTURE_READ_CORRUPT, "over the limit 68719476736");

    /* The same checks behind zlib: a compressed fixed part claiming a huge payload is refused
     * before the raw buffer is allocated. */
    put_u32(edited + 0, 1 << 20);
    put_u64(edited + 8, 1 << 10);
    size_t compressed_bytes;
    uint8_t *compressed = zlib_compress(edited, payload_bytes, &compressed_bytes);
    header = honest_header(compressed_bytes);
    header.flags = 1;
    header.raw_bytes = (uint64_t)compressed_bytes * 1000; /* within the ratio */
    write_crafted(path, &header, compressed, compressed_bytes);
    expect_refused(path, CAPTURE_READ_CORRUPT, "raw payload bytes but the fixed part implies");
    free(compressed);

    free(edited);
    free(payload);
}

static void test_compressed_payload_must_inflate_exactly(void **state)
{
    (void)state;
    char path[512];
    path_in_test_directory(path, sizeof(path), "inflate.bin");
    size_t payload_bytes, compressed_bytes;
    struct record_spec spec = { .rows = 3, .k = 2, .row_stride = 16 };
    uint8_t *payload = raw_payload_of(&spec, &payload_bytes);
    struct crafted_header header = honest_header(0);
    header.flags = 1;
    header.raw_bytes = payload_bytes;

    /* Honest: reads. */
    uint8_t *compressed = zlib_compress(payload, payload_bytes, &compressed_bytes);
    header.stored_bytes = compressed_bytes;
    write_crafted(path, &header, compressed, compressed_bytes);
    expect_readable(path);

    /* Trailing bytes after the zlib stream. */
    uint8_t *padded = malloc(compressed_bytes + 3);
    assert_non_null(padded);
    memcpy(padded, compressed, compressed_bytes);
    memcpy(padded + compressed_bytes, "xyz", 3);
    header.stored_bytes = compressed_bytes + 3;
    write_crafted(path, &header, padded, compressed_bytes + 3);
    expect_refused(path, CAPTURE_READ_CORRUPT, "3 stored bytes follow the end of the stream");
    free(padded);
    free(compressed);

    /* A stream holding 8 bytes fewer than the fixed part implies. */
    compressed = zlib_compress(payload, payload_bytes - 8, &compressed_bytes);
    header.stored_bytes = compressed_bytes;
    write_crafted(path, &header, compressed, compressed_bytes);
    expect_refused(path, CAPTURE_READ_CORRUPT, "the zlib stream ends early");
    free(compressed);

    /* ... and one holding a single byte more (the stream may end in the same inflate call
     * that produced it). */
    uint8_t *longer = calloc(payload_bytes + 1, 1);
    assert_non_null(longer);
    memcpy(longer, payload, payload_bytes);
    compressed = zlib_compress(longer, payload_bytes + 1, &compressed_bytes);
    header.stored_bytes = compressed_bytes;
    write_crafted(path, &header, compressed, compressed_bytes);
    expect_refused(path, CAPTURE_READ_CORRUPT, "inflates to more than the raw payload bytes");
    free(compressed);
    free(longer);

    /* Not zlib at all (the raw bytes, flagged compressed). */
    header.stored_bytes = payload_bytes;
    write_crafted(path, &header, payload, payload_bytes);
    expect_refused(path, CAPTURE_READ_CORRUPT, "zlib payload:");
    free(payload);
}

static void test_payload_contents_are_validated_on_read(void **state)
{
    (void)state;
    char path[512];
    path_in_test_directory(path, sizeof(path), "contents.bin");
    size_t payload_bytes;
    struct record_spec spec = { .rows = 2, .k = 2, .row_stride = 8, .page_size = 4,
                                .page_table = true, .metadata = "{\"a\":\"x\"}" };
    uint8_t *payload = raw_payload_of(&spec, &payload_bytes);
    uint8_t *edited = malloc(payload_bytes);
    assert_non_null(edited);
    struct crafted_header header = honest_header(payload_bytes);
    size_t metadata_x = FIXED_PART_BYTES + 6; /* the x in {"a":"x"} */
    size_t lengths = FIXED_PART_BYTES + 9;
    size_t page_table_row_starts = lengths + 2 * 4;
    size_t page_table = page_table_row_starts + 2 * 4;
    assert_int_equal(payload[metadata_x], 'x');

    struct {
        size_t offset;
        int width; /* 1: byte, 4: int32 */
        int64_t value;
        const char *message;
    } const edits[] = {
        { metadata_x, 1, 0xFF, "metadata: invalid UTF-8 at metadata byte 6" },
        { metadata_x, 1, 0, "metadata: NUL byte at metadata byte 6" },
        { metadata_x, 1, '"', "metadata: byte 7, at $.a: ',' or '}' expected after the member" },
        { FIXED_PART_BYTES, 1, '[', "metadata: byte 4, at $[0]: ',' or ']' expected" },
        { 20, 4, 3, "page_size 3 is not a power of two" },
        { lengths + 4, 4, 9, "row 1: window [0, 9) ends past row_stride 8" },
        { lengths, 4, -1, "row 0: lengths[0] = -1 is negative" },
        { page_table_row_starts + 4, 4, 3, "row 1: a window of length" },
        { page_table_row_starts + 4, 4, -2, "page_table_row_starts[1] = -2 is negative" },
        /* Row 1 uses columns 1 and 2 (its page_table_row_starts is 1). */
        { page_table + 4 * (3 + 1), 4, -1, "row 1: page_table[1][1] = -1" },
        { page_table + 4 * (3 + 2), 4, INT32_MAX / 2, "translates past int32" },
    };
    for (size_t i = 0; i < sizeof(edits) / sizeof(edits[0]); i++) {
        memcpy(edited, payload, payload_bytes);
        if (edits[i].width == 1)
            edited[edits[i].offset] = (uint8_t)edits[i].value;
        else
            put_u32(edited + edits[i].offset, (uint32_t)(int32_t)edits[i].value);
        write_crafted(path, &header, edited, payload_bytes);
        expect_refused(path, CAPTURE_READ_CORRUPT, edits[i].message);
    }
    /* Metadata that is JSON but not an object. */
    memcpy(edited, payload, payload_bytes);
    memcpy(edited + FIXED_PART_BYTES, "[\"a\", 12]", 9);
    write_crafted(path, &header, edited, payload_bytes);
    expect_refused(path, CAPTURE_READ_CORRUPT, "metadata: not a JSON object");
    /* Entries no window needs are not checked: engines pad their block tables with -1. */
    memcpy(edited, payload, payload_bytes);
    put_u32(edited + page_table, (uint32_t)-1);
    write_crafted(path, &header, edited, payload_bytes);
    expect_readable(path);
    free(edited);
    free(payload);
}

/* ---- validate, copy, free ---- */

static void expect_invalid(const struct capture_record *record, const char *text)
{
    struct audit_error err = { 0 };
    int status = capture_record_validate(record, &err);
    if (status != AUDIT_EDATA)
        fail_msg("expected AUDIT_EDATA (%s), got %d", text, status);
    assert_message_contains(err, text);
    /* The writer refuses it too, before creating anything. */
    char path[512];
    path_in_test_directory(path, sizeof(path), "never-written.bin");
    unlink(path);
    assert_int_equal(capture_append_record(path, record, false, &err), AUDIT_EDATA);
    assert_message_contains(err, "never-written.bin: cannot append record");
    assert_message_contains(err, text);
    assert_int_equal(access(path, F_OK), -1);
}

static void test_validate_rejections(void **state)
{
    (void)state;
    struct record_spec spec = small_spec;
    spec.row_starts = spec.page_table = spec.engine_indices = true;
    struct capture_record record;
    build_record(&record, &spec);
    struct audit_error err = { 0 };
    assert_int_equal(capture_record_validate(&record, &err), AUDIT_OK);

    record.row_starts[2] = 30; /* row 2: start 30, length 14 */
    expect_invalid(&record, "row 2: window [30, 44) ends past row_stride 37");
    record.row_starts[2] = -1;
    expect_invalid(&record, "row_starts[2] = -1 is negative");
    record.row_starts[2] = 2;

    record.lengths[3] = -5;
    expect_invalid(&record, "lengths[3] = -5 is negative");
    record.lengths[3] = 21;

    uint64_t cols = record.page_table_cols;
    record.page_table_cols = 2; /* row 1 needs ceil(36 / 8) = 5 columns from column 1 */
    expect_invalid(&record, "row 1: a window of length 36 with page_size 8 needs page-table columns 1..5");
    record.page_table_cols = cols;
    record.page_table_row_starts[1] = (int32_t)cols - 2;
    expect_invalid(&record, "page_table_cols is 6");
    record.page_table_row_starts[1] = 1;
    record.page_table[1 * cols + 3] = -7;
    expect_invalid(&record, "page_table[1][3] = -7");
    record.page_table[1 * cols + 3] = 103;

    record.page_size = 3;
    expect_invalid(&record, "page_size 3 is not a power of two");
    record.page_size = 8;

    record.k = 0;
    expect_invalid(&record, "k 0 out of range");
    record.k = CAPTURE_MAX_K + 1;
    expect_invalid(&record, "k 1048577 out of range");
    record.k = 4;

    record.rows = 0;
    expect_invalid(&record, "rows 0 out of range");
    record.rows = 5;

    record.row_stride = CAPTURE_MAX_ROW_STRIDE + 1;
    expect_invalid(&record, "row_stride 2147483648 exceeds the limit");
    record.row_stride = 37;

    char *metadata = record.metadata_json;
    /* The strict dialect (json_strict.h): the writer refuses what no reader would take. */
    static const char *const bad_metadata[][2] = {
        { "[1, 2]", "metadata: not a JSON object" },
        { "{\"a\": }", "metadata: byte 6, at $.a: '}' where a value was expected" },
        { "{\"a\": 1, \"\\u0061\": 2}", "metadata: byte 9, at $.a: duplicate key (first at byte 1)" },
        { "{\"a\\u0000b\": 1}", "metadata: byte 3, at $: \\u0000 (NUL) in a key" },
        { "{\"a\": 1} {}", "metadata: byte 9, at $: more after the JSON value" },
        { "{\"a\": [1e999]}", "metadata: byte 7, at $.a[0]: the number 1e999 overflows a double" },
        { "{\"a\": \"\xc0\xaf\"}", "metadata: invalid UTF-8" }, /* overlong '/' */
    };
    for (size_t i = 0; i < sizeof(bad_metadata) / sizeof(bad_metadata[0]); i++) {
        record.metadata_json = (char *)bad_metadata[i][0];
        expect_invalid(&record, bad_metadata[i][1]);
    }
    record.metadata_json = metadata;

    int32_t *page_table = record.page_table;
    record.page_size = 0;
    expect_invalid(&record, "page_table_cols 6 without a page table (page_size 0)");
    record.page_table_cols = 0;
    expect_invalid(&record, "page table given but page_size is 0");
    record.page_table_cols = cols;
    record.page_size = 8;
    record.page_table = NULL;
    expect_invalid(&record, "page_table is missing");
    record.page_table = page_table;

    float *scores = record.scores;
    record.scores = NULL;
    expect_invalid(&record, "scores is missing");
    record.scores = scores;

    assert_int_equal(capture_record_validate(&record, &err), AUDIT_OK);
    capture_record_free(&record);
}

static bool all_zero(const void *bytes, size_t size)
{
    const uint8_t *p = bytes;
    for (size_t i = 0; i < size; i++)
        if (p[i])
            return false;
    return true;
}

static void test_copy_is_deep_and_free_zeroes(void **state)
{
    (void)state;
    struct record_spec spec = small_spec;
    spec.row_starts = spec.page_table = spec.engine_indices = true;
    struct capture_record original, copy;
    build_record(&original, &spec);
    original.index = 9;
    original.file_offset = 1234;
    original.compressed = true;
    struct audit_error err = { 0 };
    assert_int_equal(capture_record_copy(&copy, &original, &err), AUDIT_OK);
    assert_records_equal(&original, &copy);
    assert_int_equal(copy.index, 9);
    assert_int_equal(copy.file_offset, 1234);
    assert_true(copy.compressed);
    assert_ptr_not_equal(copy.scores, original.scores);
    assert_ptr_not_equal(copy.page_table, original.page_table);
    assert_ptr_not_equal(copy.metadata_json, original.metadata_json);
    copy.scores[0] = 42.0f;
    copy.page_table[0] = 77;
    assert_float_not_equal(original.scores[0], 42.0f, 0.0f);
    assert_int_not_equal(original.page_table[0], 77);

    capture_record_free(&copy);
    assert_true(all_zero(&copy, sizeof(copy)));
    capture_record_free(&copy); /* freeing twice is harmless once zeroed */

    /* Without optional sections the copy has none either. */
    capture_record_free(&original);
    build_record(&original, &small_spec);
    free(original.metadata_json);
    original.metadata_json = NULL;
    assert_int_equal(capture_record_copy(&copy, &original, &err), AUDIT_OK);
    assert_null(copy.row_starts);
    assert_null(copy.page_table);
    assert_null(copy.engine_indices);
    assert_null(copy.metadata_json);
    capture_record_free(&copy);
    capture_record_free(&original);
}

/* ---- fixture ---- */

static int make_test_directory(void **state)
{
    (void)state;
    snprintf(test_directory, sizeof(test_directory), "%s/test_capture.XXXXXX",
             getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp");
    return mkdtemp(test_directory) ? 0 : -1;
}

/* ---- memory follows what was verified, not what the header claims ---- */

/* A sparse file: a header claiming payload_bytes uncompressed payload bytes (CRC right, a SHA-256
 * that no payload of zeros has), then a hole of that size. false when the filesystem refuses. */
static bool write_sparse_claim(const char *path, uint64_t payload_bytes)
{
    uint8_t header[HEADER_BYTES] = { 0 };
    memcpy(header, "DSATOPK\n", 8);
    put_u16(header + 8, 1);
    put_u64(header + 16, payload_bytes);
    put_u64(header + 24, payload_bytes);
    memset(header + 32, 0xab, 32);
    put_u32(header + 68, (uint32_t)crc32(0L, header, 68));
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    assert_true(fd >= 0);
    assert_int_equal(write(fd, header, sizeof(header)), (ssize_t)sizeof(header));
    bool made = ftruncate(fd, (off_t)(HEADER_BYTES + payload_bytes)) == 0;
    assert_int_equal(close(fd), 0);
    return made;
}

struct child_read {
    int status;
    enum capture_read_state state;
    char message[AUDIT_ERROR_MESSAGE_BYTES];
    long peak_kib; /* the child's peak resident set */
};

/* Reads the first record of path in a child process (its peak resident set is then this read's
 * alone, plus what the fork shares); cap 0 keeps the reader's default. */
static void read_in_child(const char *path, uint64_t cap, struct child_read *result)
{
    int fds[2];
    assert_int_equal(pipe(fds), 0);
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        struct child_read out = { 0 };
        struct capture_reader *reader = NULL;
        struct audit_error err = { 0 };
        close(fds[0]);
        out.status = capture_open(&reader, path, &err);
        if (out.status == AUDIT_OK) {
            struct capture_record record;
            if (cap)
                capture_reader_set_max_record_bytes(reader, cap);
            out.status = capture_read_record(reader, &record, &err);
            if (out.status == 1)
                capture_record_free(&record);
            out.state = capture_reader_state(reader);
            capture_close(reader);
        }
        snprintf(out.message, sizeof(out.message), "%s", err.message);
        _exit(write(fds[1], &out, sizeof(out)) == (ssize_t)sizeof(out) ? 0 : 1);
    }
    close(fds[1]);
    memset(result, 0, sizeof(*result));
    assert_int_equal(read(fds[0], result, sizeof(*result)), (ssize_t)sizeof(*result));
    close(fds[0]);
    int wait_status = 0;
    struct rusage usage;
    assert_int_equal(wait4(pid, &wait_status, 0, &usage), pid);
    assert_true(WIFEXITED(wait_status) && WEXITSTATUS(wait_status) == 0);
    result->peak_kib = usage.ru_maxrss;
}

/* The peak of a child that reads a tiny capture: what every child starts with. */
static long baseline_peak_kib(void)
{
    char path[512];
    struct capture_record record;
    struct child_read result;
    path_in_test_directory(path, sizeof(path), "tiny.bin");
    unlink(path);
    build_record(&record, &small_spec);
    append_or_fail(path, &record, false);
    capture_record_free(&record);
    read_in_child(path, 0, &result);
    assert_int_equal(result.status, 1);
    return result.peak_kib;
}

#define MIB_IN_KIB 1024L

static void test_sparse_claim_is_hashed_in_bounded_memory(void **state)
{
    (void)state;
    char path[512];
    struct child_read result;
    long baseline = baseline_peak_kib();
    path_in_test_directory(path, sizeof(path), "sparse.bin");
    if (!write_sparse_claim(path, (uint64_t)1 << 30))
        skip();
    read_in_child(path, 0, &result);
    assert_int_equal(result.status, AUDIT_EDATA);
    assert_int_equal(result.state, CAPTURE_READ_CORRUPT);
    if (!strstr(result.message, path) ||
        !strstr(result.message, "record 0 at byte 0: corrupt: payload SHA-256 mismatch"))
        fail_msg("unexpected message: %s", result.message);
    /* 1 GiB claimed, a few MiB of buffers held. */
    if (result.peak_kib - baseline > 32 * MIB_IN_KIB)
        fail_msg("reading a 1 GiB sparse claim took %ld KiB more than a tiny file",
                 result.peak_kib - baseline);
    unlink(path);
}

static void test_record_over_the_memory_cap_is_refused_unread(void **state)
{
    (void)state;
    char path[512], expected[256];
    struct child_read result;
    long baseline = baseline_peak_kib();
    path_in_test_directory(path, sizeof(path), "sparse.bin");
    if (!write_sparse_claim(path, CAPTURE_MAX_PAYLOAD_BYTES))
        skip();
    read_in_child(path, 0, &result);
    assert_int_equal(result.status, AUDIT_ENOMEM);
    assert_int_equal(result.state, CAPTURE_READ_TOO_LARGE);
    snprintf(expected, sizeof(expected), "record 0 at byte 0: too large: the raw payload of "
             "68719476736 bytes is over the memory cap of %llu bytes per record",
             (unsigned long long)CAPTURE_DEFAULT_MAX_RECORD_BYTES);
    if (!strstr(result.message, path) || !strstr(result.message, expected))
        fail_msg("unexpected message: %s", result.message);
    assert_true(result.peak_kib - baseline < 32 * MIB_IN_KIB);
    unlink(path);

    /* The cap, per reader and for the process: a record just over it is refused, one at it read. */
    struct capture_record record;
    build_record(&record, &small_spec);
    path_in_test_directory(path, sizeof(path), "tiny.bin");
    unlink(path);
    append_or_fail(path, &record, false);
    capture_record_free(&record);
    struct stat info;
    assert_int_equal(stat(path, &info), 0);
    uint64_t raw_bytes = (uint64_t)info.st_size - HEADER_BYTES;
    read_in_child(path, raw_bytes - 1, &result);
    assert_int_equal(result.state, CAPTURE_READ_TOO_LARGE);
    read_in_child(path, raw_bytes, &result);
    assert_int_equal(result.status, 1);
    capture_set_max_record_bytes(raw_bytes - 1);
    assert_int_equal(capture_max_record_bytes(), raw_bytes - 1);
    read_in_child(path, 0, &result);
    assert_int_equal(result.state, CAPTURE_READ_TOO_LARGE);
    capture_set_max_record_bytes(0);
    assert_int_equal(capture_max_record_bytes(), CAPTURE_DEFAULT_MAX_RECORD_BYTES);
}

/* A valid 64 MiB record is read straight into its arrays: one copy, not the stored bytes, the
 * raw payload and the arrays. */
static void test_valid_record_is_read_into_one_copy(void **state)
{
    (void)state;
    const uint32_t rows = 4, stride = 4u << 20; /* 64 MiB of scores */
    for (int compress = 0; compress <= 1; compress++) {
        char path[512];
        struct child_read result;
        struct capture_record record = { .rows = rows, .k = 8, .row_stride = stride };
        record.scores = calloc((size_t)rows * stride, sizeof(float));
        record.lengths = calloc(rows, sizeof(int32_t));
        assert_non_null(record.scores);
        assert_non_null(record.lengths);
        for (uint32_t b = 0; b < rows; b++)
            record.lengths[b] = (int32_t)stride;
        path_in_test_directory(path, sizeof(path), "large.bin");
        unlink(path);
        append_or_fail(path, &record, compress);
        capture_record_free(&record);
        /* Measured now: what this process still holds (an allocator may keep freed blocks
         * resident) is in both children. */
        long baseline = baseline_peak_kib();
        read_in_child(path, 0, &result);
        if (result.status != 1)
            fail_msg("reading the 64 MiB record failed: %s", result.message);
        if (result.peak_kib - baseline > (64 + 16) * MIB_IN_KIB)
            fail_msg("reading a 64 MiB %s record took %ld KiB more than a tiny file",
                     compress ? "compressed" : "plain", result.peak_kib - baseline);
        unlink(path);
    }
}

static int remove_test_directory(void **state)
{
    (void)state;
    static const char *const names[] = {
        "round_trip.bin", "shape.bin", "metadata.bin", "first.bin", "second.bin", "joined.bin",
        "growing.bin", "two.bin", "cut.bin", "bad_header.bin", "bad_payload.bin", "garbage.bin",
        "source.bin", "hostile.bin", "inflate.bin", "contents.bin", "never-written.bin",
        "tiny.bin", "sparse.bin", "large.bin",
    };
    for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++) {
        char path[512];
        path_in_test_directory(path, sizeof(path), names[i]);
        unlink(path);
    }
    return rmdir(test_directory);
}

int main(void)
{
    if (hash_init() != 0)
        return 1;
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_round_trip_every_section_combination),
        cmocka_unit_test(test_round_trip_shapes),
        cmocka_unit_test(test_metadata_text_is_kept_exactly),
        cmocka_unit_test(test_concatenated_files_are_one_capture),
        cmocka_unit_test(test_reader_sees_records_appended_after_end),
        cmocka_unit_test(test_truncation_at_every_byte),
        cmocka_unit_test(test_flipped_header_bytes_are_corrupt),
        cmocka_unit_test(test_flipped_payload_bytes_are_corrupt),
        cmocka_unit_test(test_garbage_and_foreign_files),
        cmocka_unit_test(test_hostile_headers_are_refused_before_allocating),
        cmocka_unit_test(test_compressed_payload_must_inflate_exactly),
        cmocka_unit_test(test_payload_contents_are_validated_on_read),
        cmocka_unit_test(test_validate_rejections),
        cmocka_unit_test(test_copy_is_deep_and_free_zeroes),
        cmocka_unit_test(test_sparse_claim_is_hashed_in_bounded_memory),
        cmocka_unit_test(test_record_over_the_memory_cap_is_refused_unread),
        cmocka_unit_test(test_valid_record_is_read_into_one_copy),
    };
    return cmocka_run_group_tests(tests, make_test_directory, remove_test_directory);
}
