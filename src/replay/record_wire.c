/* A record in one buffer, for the session worker of `run` (src/replay/record_wire.h). */
#include "record_wire.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

/* A record as the session worker receives it: this header, then the parts of enum wire_part in
 * order (absent arrays take no bytes), each string with its NUL. */
struct record_wire {
    uint64_t row_stride, page_table_cols, file_offset, stored_payload_bytes;
    uint64_t metadata_bytes, file_bytes, stem_bytes;
    uint32_t rows, record_k, k, page_size, index;
    uint8_t compressed, has_row_starts, has_page_table, has_page_table_row_starts;
    uint8_t has_engine_indices;
    uint8_t payload_sha256[32];
};

enum wire_part {
    WIRE_SCORES,
    WIRE_LENGTHS,
    WIRE_ROW_STARTS,
    WIRE_PAGE_TABLE,
    WIRE_PAGE_TABLE_ROW_STARTS,
    WIRE_ENGINE_INDICES,
    WIRE_METADATA,
    WIRE_FILE,
    WIRE_STEM,
    WIRE_PARTS
};

/* The bytes of each part and their total with the header; false when they overflow or pass
 * limit. The sender and the receiver both derive the layout from here. */
static bool record_wire_sizes(const struct record_wire *wire, size_t limit,
                              size_t sizes[WIRE_PARTS], size_t *total)
{
    const uint64_t rows = wire->rows, word = sizeof(int32_t);
    uint64_t scores, page_table, engine;
    if (__builtin_mul_overflow(rows, wire->row_stride, &scores) ||
        __builtin_mul_overflow(scores, word, &scores) ||
        __builtin_mul_overflow(rows, wire->page_table_cols, &page_table) ||
        __builtin_mul_overflow(page_table, word, &page_table) ||
        __builtin_mul_overflow(rows, (uint64_t)wire->record_k * word, &engine))
        return false;
    const uint64_t parts[WIRE_PARTS] = {
        [WIRE_SCORES] = scores,
        [WIRE_LENGTHS] = rows * word,
        [WIRE_ROW_STARTS] = wire->has_row_starts ? rows * word : 0,
        [WIRE_PAGE_TABLE] = wire->has_page_table ? page_table : 0,
        [WIRE_PAGE_TABLE_ROW_STARTS] = wire->has_page_table_row_starts ? rows * word : 0,
        [WIRE_ENGINE_INDICES] = wire->has_engine_indices ? engine : 0,
        [WIRE_METADATA] = wire->metadata_bytes,
        [WIRE_FILE] = wire->file_bytes,
        [WIRE_STEM] = wire->stem_bytes,
    };
    uint64_t sum = sizeof(*wire);
    for (int i = 0; i < WIRE_PARTS; i++) {
        if (parts[i] > limit || __builtin_add_overflow(sum, parts[i], &sum))
            return false;
        sizes[i] = (size_t)parts[i];
    }
    if (sum > limit)
        return false;
    *total = (size_t)sum;
    return true;
}

/* The header of the record's buffer and where each part comes from. */
static void wire_layout(const struct capture_record *record, uint32_t k, const char *file,
                        const char *stem, struct record_wire *wire,
                        const void *sources[WIRE_PARTS])
{
    const char *metadata = record->metadata_json ? record->metadata_json : "{}";
    *wire = (struct record_wire){
        .row_stride = record->row_stride,
        .page_table_cols = record->page_table ? record->page_table_cols : 0,
        .file_offset = record->file_offset,
        .stored_payload_bytes = record->stored_payload_bytes,
        .metadata_bytes = strlen(metadata) + 1,
        .file_bytes = strlen(file) + 1,
        .stem_bytes = strlen(stem) + 1,
        .rows = record->rows,
        .record_k = record->k,
        .k = k,
        .page_size = record->page_size,
        .index = record->index,
        .compressed = record->compressed,
        .has_row_starts = record->row_starts != NULL,
        .has_page_table = record->page_table != NULL,
        .has_page_table_row_starts = record->page_table_row_starts != NULL,
        .has_engine_indices = record->engine_indices != NULL,
    };
    memcpy(wire->payload_sha256, record->payload_sha256, sizeof(wire->payload_sha256));
    const void *parts[WIRE_PARTS] = {
        record->scores,     record->lengths,        record->row_starts,
        record->page_table, record->page_table_row_starts, record->engine_indices,
        metadata,           file,                   stem,
    };
    memcpy(sources, parts, sizeof(parts));
}

/* The replayed record with its k, file and dump stem, in one malloc'd buffer; NULL when it is
 * too big for the session's socket or memory is short. */
void *record_wire_encode(const struct capture_record *record, uint32_t k, const char *file,
                         const char *stem, size_t *bytes)
{
    struct record_wire wire;
    const void *sources[WIRE_PARTS];
    size_t sizes[WIRE_PARTS], total = 0;
    wire_layout(record, k, file, stem, &wire, sources);
    if (!record_wire_sizes(&wire, RECORD_WIRE_SOCKET_MAX_BYTES, sizes, &total))
        return NULL;
    unsigned char *buffer = malloc(total);
    if (!buffer)
        return NULL;
    memcpy(buffer, &wire, sizeof(wire));
    size_t offset = sizeof(wire);
    for (int i = 0; i < WIRE_PARTS; i++) {
        if (sizes[i])
            memcpy(buffer + offset, sources[i], sizes[i]);
        offset += sizes[i];
    }
    *bytes = total;
    return buffer;
}

static bool write_all(int fd, const void *data, size_t bytes)
{
    const unsigned char *cursor = data;
    while (bytes > 0) {
        ssize_t written = write(fd, cursor, bytes);
        if (written < 0 && errno == EINTR)
            continue;
        if (written <= 0)
            return false;
        cursor += written;
        bytes -= (size_t)written;
    }
    return true;
}

int record_wire_encode_file(const struct capture_record *record, uint32_t k, const char *file,
                            const char *stem, size_t *bytes)
{
    struct record_wire wire;
    const void *sources[WIRE_PARTS];
    size_t sizes[WIRE_PARTS], total = 0;
    wire_layout(record, k, file, stem, &wire, sources);
    if (!record_wire_sizes(&wire, SIZE_MAX, sizes, &total)) {
        errno = EOVERFLOW;
        return -1;
    }
    const int fd = memfd_create("dsatopk-record", MFD_CLOEXEC);
    if (fd < 0)
        return -1;
    /* Written part by part from where the record is: one copy, none in between. */
    bool written = write_all(fd, &wire, sizeof(wire));
    for (int i = 0; written && i < WIRE_PARTS; i++)
        written = !sizes[i] || write_all(fd, sources[i], sizes[i]);
    if (!written) {
        const int saved = errno;
        close(fd);
        errno = saved ? saved : EIO;
        return -1;
    }
    *bytes = total;
    return fd;
}

/* The record of a received buffer, its arrays pointing into it; false when malformed. */
bool record_wire_decode(void *buffer, size_t bytes, struct capture_record *record, uint32_t *k,
                        const char **file, const char **stem)
{
    struct record_wire wire;
    size_t sizes[WIRE_PARTS], total = 0;
    if (bytes < sizeof(wire))
        return false;
    memcpy(&wire, buffer, sizeof(wire));
    if (!record_wire_sizes(&wire, SIZE_MAX, sizes, &total) || total != bytes ||
        !wire.metadata_bytes || !wire.file_bytes || !wire.stem_bytes)
        return false;
    unsigned char *parts[WIRE_PARTS];
    unsigned char *cursor = (unsigned char *)buffer + sizeof(wire);
    for (int i = 0; i < WIRE_PARTS; i++) {
        parts[i] = sizes[i] ? cursor : NULL;
        cursor += sizes[i];
    }
    if (parts[WIRE_METADATA][sizes[WIRE_METADATA] - 1] || parts[WIRE_FILE][sizes[WIRE_FILE] - 1] ||
        parts[WIRE_STEM][sizes[WIRE_STEM] - 1])
        return false;
    memset(record, 0, sizeof(*record));
    record->rows = wire.rows;
    record->k = wire.record_k;
    record->row_stride = wire.row_stride;
    record->scores = (float *)(void *)parts[WIRE_SCORES];
    record->lengths = (int32_t *)(void *)parts[WIRE_LENGTHS];
    record->row_starts = (int32_t *)(void *)parts[WIRE_ROW_STARTS];
    record->page_size = wire.page_size;
    record->page_table_cols = wire.page_table_cols;
    record->page_table = (int32_t *)(void *)parts[WIRE_PAGE_TABLE];
    record->page_table_row_starts = (int32_t *)(void *)parts[WIRE_PAGE_TABLE_ROW_STARTS];
    record->engine_indices = (int32_t *)(void *)parts[WIRE_ENGINE_INDICES];
    record->metadata_json = (char *)parts[WIRE_METADATA];
    record->index = wire.index;
    record->file_offset = wire.file_offset;
    record->stored_payload_bytes = wire.stored_payload_bytes;
    record->compressed = wire.compressed;
    memcpy(record->payload_sha256, wire.payload_sha256, sizeof(record->payload_sha256));
    *k = wire.k;
    *file = (const char *)parts[WIRE_FILE];
    *stem = (const char *)parts[WIRE_STEM];
    return true;
}

