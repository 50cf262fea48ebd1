/* Capture files: an append-only sequence of self-contained records, one per top-k call.
 * The byte layout is specified in docs/FORMAT.md; this is the in-memory form. */
#ifndef DSATOPK_CAPTURE_H
#define DSATOPK_CAPTURE_H

#include <stdbool.h>
#include <stdint.h>

#include "error.h"

/* docs/FORMAT.md: a record is a header of this size followed by its stored payload. */
#define CAPTURE_RECORD_HEADER_BYTES 72u

/* Hard limits checked before any allocation (docs/FORMAT.md "Limits"). */
#define CAPTURE_MAX_ROWS (1u << 24)
#define CAPTURE_MAX_ROW_STRIDE ((uint64_t)INT32_MAX)
#define CAPTURE_MAX_K (1u << 20)
#define CAPTURE_MAX_PAYLOAD_BYTES ((uint64_t)64 << 30)
#define CAPTURE_MAX_METADATA_BYTES ((uint64_t)16 << 20)

/* The memory cap per record a reader starts with: a record whose raw payload is larger is refused
 * (CAPTURE_READ_TOO_LARGE) before any of it is read. A reader holds one record's arrays, about
 * its raw payload bytes, plus a few MiB of buffers (docs/FORMAT.md "Reading"). */
#define CAPTURE_DEFAULT_MAX_RECORD_BYTES ((uint64_t)8 << 30)

/* One top-k call. All arrays are owned by the record (capture_record_free releases them). Row b's
 * window is scores[b * row_stride + start, ... + start + lengths[b]) where start is
 * row_starts[b] when row_starts is present and 0 otherwise; indices are relative to the window
 * start. */
struct capture_record {
    uint32_t rows;       /* B */
    uint32_t k;
    uint64_t row_stride; /* elements between the starts of consecutive rows, >= every window end */
    float *scores;       /* rows * row_stride */
    int32_t *lengths;    /* rows */
    int32_t *row_starts; /* rows, or NULL */

    /* Optional page table: translated = page_table[b * page_table_cols +
     * page_table_row_starts[b] + idx / page_size] * page_size + idx % page_size. */
    uint32_t page_size;               /* 0: no page table; else a power of two */
    uint64_t page_table_cols;         /* entries per row of page_table */
    int32_t *page_table;              /* rows * page_table_cols, or NULL */
    int32_t *page_table_row_starts;   /* rows, or NULL (then all zero) */

    /* Optional: what the serving kernel selected, rows * k, in the output space (translated when
     * a page table is present), -1 padded. */
    int32_t *engine_indices;

    char *metadata_json; /* NUL-terminated JSON object text, never NULL after a read ("{}") */

    /* Where the record came from; filled by capture_read_record, ignored by the writer. */
    uint32_t index;               /* 0-based position in its file */
    uint64_t file_offset;         /* byte offset of the record header in its file */
    uint64_t stored_payload_bytes;
    bool compressed;
    uint8_t payload_sha256[32];   /* of the stored payload bytes */
};

/* Where the record after this one starts in its file (file_offset, the header and the stored
 * payload): for a record that was read, the byte a reader stopping after it leaves off at. */
uint64_t capture_record_end_offset(const struct capture_record *record);

/* The exact size of the record's raw (uncompressed) payload (docs/FORMAT.md "Raw payload"); 0
 * when its sizes do not make a valid payload (never for a record that was read or validated). */
uint64_t capture_record_raw_payload_bytes(const struct capture_record *record);

enum capture_read_state {
    CAPTURE_READ_OK = 0,
    CAPTURE_READ_END,       /* clean end of file after the last complete record */
    CAPTURE_READ_TRUNCATED, /* the file ends inside a record (writer killed mid-append) */
    CAPTURE_READ_CORRUPT,   /* bad magic, header checksum, payload hash, or inconsistent sizes */
    CAPTURE_READ_TOO_LARGE, /* the record's raw payload is over the reader's memory cap */
};

struct capture_reader;

/* The memory cap of readers opened from now on (0: CAPTURE_DEFAULT_MAX_RECORD_BYTES); the
 * command line's global --max-record-bytes sets it. */
void capture_set_max_record_bytes(uint64_t bytes);
uint64_t capture_max_record_bytes(void);

/* Opens a capture for reading: a regular file only (src/common/input_file.h: a FIFO, directory
 * or device is refused with AUDIT_EIO, never waited on). */
int capture_open(struct capture_reader **reader, const char *path, struct audit_error *err);
/* This reader's memory cap (0: the process default). */
void capture_reader_set_max_record_bytes(struct capture_reader *reader, uint64_t bytes);
void capture_close(struct capture_reader *reader);

/* Reads the next record. Returns 1 with *record filled, 0 at a clean end of file, or a negative
 * code (AUDIT_EDATA for truncated/corrupt, AUDIT_EIO, AUDIT_ENOMEM: out of memory or over the
 * memory cap) with err naming the file, record index and byte offset. After an error the reader
 * stops; records already returned stay valid. capture_reader_state() tells truncated, corrupt
 * and too large apart. The stored payload is hashed in bounded pieces before the record's arrays
 * are allocated, so a damaged record costs no memory of its claimed size. */
int capture_read_record(struct capture_reader *reader, struct capture_record *record,
                        struct audit_error *err);
enum capture_read_state capture_reader_state(const struct capture_reader *reader);
/* Positions the reader at a record read before (its file_offset and index, from a record this
 * reader returned), so that the next capture_read_record reads it again, checks included: for
 * a pass over a file that needs a record back. A reader that has stopped stays stopped. */
void capture_reader_seek(struct capture_reader *reader, uint64_t offset, uint32_t index);
const char *capture_reader_path(const struct capture_reader *reader);

/* Checks the record's internal consistency (sizes, windows inside the stride, page-table
 * entries present for every window, k range). Used by the reader and the writer. */
int capture_record_validate(const struct capture_record *record, struct audit_error *err);

/* The bytes of one record as a file stores it (header and stored payload; compress: zlib the
 * payload), validated first: *bytes is malloc'ed, *size bytes long. */
int capture_encode_record(const struct capture_record *record, bool compress, uint8_t **bytes,
                          uint64_t *size, struct audit_error *err);

/* Replaces path with a capture of this one record (src/common/output_file.h: complete or not at
 * all; devices and FIFOs written through). */
int capture_write_record(const char *path, const struct capture_record *record, bool compress,
                         struct audit_error *err);

struct capture_append_options {
    bool compress;    /* zlib the payload */
    bool repair_tail; /* cut a damaged tail first (when no complete record lies past it) */
};

struct capture_tail;

/* Appends one record to path (created if missing). Under a whole-file write lock (fcntl, the
 * one the Python hook takes), the tail is checked (src/capture/capture_tail.h): a file whose
 * last record is torn or corrupt is refused with AUDIT_EDATA and the repair in the message, or,
 * with repair_tail, cut back to its complete records first; a file with complete records past
 * its damage is always refused. The record then goes on with one write loop and an fsync, so a
 * writer killed mid-append leaves at worst one truncated last record, and a failed write is taken
 * back. A character device or FIFO is written through. tail (may be NULL) receives what the
 * check found: state != CAPTURE_READ_END after a success means the tail was cut. */
int capture_append(const char *path, const struct capture_record *record,
                   const struct capture_append_options *options, struct capture_tail *tail,
                   struct audit_error *err);

/* capture_append without repair and without the tail report. */
int capture_append_record(const char *path, const struct capture_record *record, bool compress,
                          struct audit_error *err);


void capture_record_free(struct capture_record *record);

/* Deep copy (used by extract and tests). */
int capture_record_copy(struct capture_record *dst, const struct capture_record *src,
                        struct audit_error *err);

/* Window of row b (pointer to its first score) and its start offset. */
static inline int32_t capture_row_start(const struct capture_record *record, uint32_t b)
{
    return record->row_starts ? record->row_starts[b] : 0;
}
static inline const float *capture_row_window(const struct capture_record *record, uint32_t b)
{
    return record->scores + (uint64_t)b * record->row_stride + capture_row_start(record, b);
}

#endif
