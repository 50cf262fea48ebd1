/* Unit tests of src/replay/record_wire.c, how `run` hands a record to its session worker: a record
 * with every optional part (row starts, padding, page tables, engine indices, metadata) comes
 * back field for field and byte for byte, with its k, file and stem; a buffer one byte short or
 * long, or with a string missing its NUL, is refused; a record past RECORD_WIRE_SOCKET_MAX_BYTES
 * is not encoded for the socket; the file in memory (record_wire_encode_file) holds the same
 * bytes, for a record of any size: one over the socket's limit decodes from its mapping. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cmocka.h>

#include "record_wire.h"
#include "replay.h"
#include "synth.h"

static void make_record(const char *family, struct capture_record *record, bool engine)
{
    struct synth_params params = { .family = family, .rows = 5, .length = 300, .k = 17, .seed = 3 };
    struct audit_error err = { 0 };
    assert_int_equal(synth_generate(&params, record, &err), 0);
    record->index = 7;
    record->file_offset = 12345;
    record->stored_payload_bytes = 999;
    record->compressed = true;
    for (int i = 0; i < 32; i++)
        record->payload_sha256[i] = (uint8_t)(i * 5);
    if (engine) {
        record->engine_indices = malloc((size_t)record->rows * record->k * sizeof(int32_t));
        assert_non_null(record->engine_indices);
        for (size_t i = 0; i < (size_t)record->rows * record->k; i++)
            record->engine_indices[i] = (int32_t)i - 3;
    }
}

static void assert_same_array(const void *a, const void *b, size_t bytes)
{
    if (!a || !b) {
        assert_true(a == b);
        return;
    }
    assert_memory_equal(a, b, bytes);
}

static void test_round_trip_of_every_part(void **state)
{
    (void)state;
    static const char *const families[] = { "random", "offsets", "padded", "paged" };
    for (size_t f = 0; f < sizeof(families) / sizeof(families[0]); f++) {
        struct capture_record record, back;
        make_record(families[f], &record, f % 2 == 0);
        size_t bytes = 0;
        void *buffer = record_wire_encode(&record, 11, "captures/x.bin", "x", &bytes);
        assert_non_null(buffer);
        uint32_t k = 0;
        const char *file = NULL, *stem = NULL;
        assert_true(record_wire_decode(buffer, bytes, &back, &k, &file, &stem));
        assert_int_equal(k, 11);
        assert_string_equal(file, "captures/x.bin");
        assert_string_equal(stem, "x");
        assert_int_equal(back.rows, record.rows);
        assert_int_equal(back.k, record.k);
        assert_int_equal(back.row_stride, record.row_stride);
        assert_int_equal(back.page_size, record.page_size);
        assert_int_equal(back.page_table_cols, record.page_table ? record.page_table_cols : 0);
        assert_int_equal(back.index, 7);
        assert_int_equal(back.file_offset, 12345);
        assert_int_equal(back.stored_payload_bytes, 999);
        assert_true(back.compressed);
        assert_memory_equal(back.payload_sha256, record.payload_sha256, 32);
        const size_t rows = record.rows;
        assert_same_array(back.scores, record.scores, rows * record.row_stride * sizeof(float));
        assert_same_array(back.lengths, record.lengths, rows * sizeof(int32_t));
        assert_same_array(back.row_starts, record.row_starts, rows * sizeof(int32_t));
        assert_same_array(back.page_table, record.page_table,
                          rows * record.page_table_cols * sizeof(int32_t));
        assert_same_array(back.page_table_row_starts, record.page_table_row_starts,
                          rows * sizeof(int32_t));
        assert_same_array(back.engine_indices, record.engine_indices,
                          rows * record.k * sizeof(int32_t));
        assert_string_equal(back.metadata_json, record.metadata_json ? record.metadata_json : "{}");
        if (!strcmp(families[f], "offsets"))
            assert_non_null(back.row_starts);
        if (!strcmp(families[f], "paged"))
            assert_non_null(back.page_table);

        /* Malformed: one byte short or long, the last NUL gone. */
        assert_false(record_wire_decode(buffer, bytes - 1, &back, &k, &file, &stem));
        unsigned char *longer = malloc(bytes + 1);
        assert_non_null(longer);
        memcpy(longer, buffer, bytes);
        longer[bytes] = 0;
        assert_false(record_wire_decode(longer, bytes + 1, &back, &k, &file, &stem));
        free(longer);
        ((unsigned char *)buffer)[bytes - 1] = 'x';
        assert_false(record_wire_decode(buffer, bytes, &back, &k, &file, &stem));
        assert_false(record_wire_decode(buffer, 3, &back, &k, &file, &stem));
        free(buffer);
        capture_record_free(&record);
    }
}

/* A page table of no column comes back as a NULL array; the record is still paged, and the
 * shape the backends get says so (they then write the raw output the checks require). */
static void test_empty_page_table_stays_paged(void **state)
{
    (void)state;
    struct capture_record record, back;
    make_record("paged", &record, false);
    record.page_table_cols = 0;
    for (uint32_t b = 0; b < record.rows; b++)
        record.lengths[b] = 0;
    size_t bytes = 0;
    void *buffer = record_wire_encode(&record, 4, "captures/x.bin", "x", &bytes);
    assert_non_null(buffer);
    uint32_t k = 0;
    const char *file = NULL, *stem = NULL;
    assert_true(record_wire_decode(buffer, bytes, &back, &k, &file, &stem));
    assert_null(back.page_table);
    assert_int_equal(back.page_size, record.page_size);
    struct topk_shape shape;
    replay_shape(&back, k, &shape);
    assert_true(shape.has_page_table);
    assert_int_equal(shape.page_size, record.page_size);
    free(buffer);
    capture_record_free(&record);
}

/* The file's bytes, mapped privately as the session worker maps them. */
static void *map_file(int file, size_t bytes)
{
    void *mapped = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE, file, 0);
    assert_true(mapped != MAP_FAILED);
    return mapped;
}

static void test_file_holds_the_same_bytes(void **state)
{
    (void)state;
    struct capture_record record, back;
    make_record("paged", &record, true);
    size_t bytes = 0, file_bytes = 0;
    void *buffer = record_wire_encode(&record, 11, "captures/x.bin", "x", &bytes);
    assert_non_null(buffer);
    const int file = record_wire_encode_file(&record, 11, "captures/x.bin", "x", &file_bytes);
    assert_true(file >= 0);
    assert_int_equal(file_bytes, bytes);
    assert_int_equal(lseek(file, 0, SEEK_END), (off_t)bytes);
    void *mapped = map_file(file, file_bytes);
    assert_memory_equal(mapped, buffer, bytes);
    munmap(mapped, file_bytes);
    close(file);
    free(buffer);
    capture_record_free(&record);

    /* Over the socket's limit: no buffer, but a file that decodes to the record. */
    struct synth_params params = { .family = "random", .rows = 4,
                                   .length = (uint32_t)(RECORD_WIRE_SOCKET_MAX_BYTES / 16 + 7),
                                   .k = 5, .seed = 9 };
    struct audit_error err = { 0 };
    assert_int_equal(synth_generate(&params, &record, &err), 0);
    assert_null(record_wire_encode(&record, 5, "big.bin", "big", &bytes));
    const int big = record_wire_encode_file(&record, 5, "big.bin", "big", &file_bytes);
    assert_true(big >= 0);
    assert_true(file_bytes > RECORD_WIRE_SOCKET_MAX_BYTES);
    mapped = map_file(big, file_bytes);
    uint32_t k = 0;
    const char *name = NULL, *stem = NULL;
    assert_true(record_wire_decode(mapped, file_bytes, &back, &k, &name, &stem));
    assert_int_equal(k, 5);
    assert_string_equal(name, "big.bin");
    assert_int_equal(back.rows, record.rows);
    assert_memory_equal(back.scores, record.scores,
                        (size_t)record.rows * record.row_stride * sizeof(float));
    assert_memory_equal(back.lengths, record.lengths, record.rows * sizeof(int32_t));
    munmap(mapped, file_bytes);
    close(big);
    capture_record_free(&record);
}

static void test_too_big_is_not_encoded(void **state)
{
    (void)state;
    /* The sizes alone decide: nothing is read from the arrays. */
    int32_t lengths[1] = { 0 };
    float scores[1] = { 0 };
    struct capture_record record = { .rows = 1u << 24, .k = 1, .row_stride = 1u << 20,
                                     .scores = scores, .lengths = lengths };
    size_t bytes = 0;
    assert_null(record_wire_encode(&record, 1, "f", "s", &bytes));
    record.rows = 1;
    record.row_stride = (uint64_t)INT32_MAX;
    assert_null(record_wire_encode(&record, 1, "f", "s", &bytes));
    /* Sizes that overflow are refused by the file too, before anything is written. */
    record.rows = 4;
    record.row_stride = UINT64_MAX / 2;
    errno = 0;
    assert_int_equal(record_wire_encode_file(&record, 1, "f", "s", &bytes), -1);
    assert_int_equal(errno, EOVERFLOW);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_round_trip_of_every_part),
        cmocka_unit_test(test_empty_page_table_stays_paged),
        cmocka_unit_test(test_file_holds_the_same_bytes),
        cmocka_unit_test(test_too_big_is_not_encoded),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
