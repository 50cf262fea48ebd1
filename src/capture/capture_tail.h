/* Where the complete records of a capture file end, found cheaply: the check an appender makes
 * before adding a record, and the ground of every repair advice (docs/FORMAT.md "Writing").
 *
 * A record is complete when its header is sound (magic, CRC-32, version, sizes), its payload
 * lies inside the file and its SHA-256 matches. The tail check walks the headers from byte 0,
 * skipping each payload unread, and hashes only the payload of the last record it passed, in
 * bounded pieces (a torn record followed by other bytes passes the header walk, its claimed size
 * reaching into them; its hash does not). A file whose walk ends exactly at its end with a
 * complete last record is clean; otherwise the damage starts where the walk stopped, or at the
 * last record passed when its hash fails, and the records before it end at intact_bytes. Cutting the file back to intact_bytes is a
 * safe repair only when no complete record lies past the damage (a record appended behind a torn
 * one, or records behind a damaged one in the middle): complete_record_after says whether one
 * does. Payloads of records before the last are not hashed here; the reader checks them. */
#ifndef DSATOPK_CAPTURE_TAIL_H
#define DSATOPK_CAPTURE_TAIL_H

#include <stdbool.h>
#include <stdint.h>

#include "capture.h"
#include "error.h"

struct capture_tail {
    uint64_t file_bytes;
    uint32_t records;              /* complete records before the damage (all when clean) */
    uint64_t intact_bytes;         /* where they end: the size a repair cuts the file back to */
    enum capture_read_state state; /* CAPTURE_READ_END (clean), TRUNCATED or CORRUPT */
    char problem[AUDIT_ERROR_MESSAGE_BYTES]; /* "record N at byte O: KIND: detail" */
    bool complete_record_after;    /* damaged: a complete record starts past the damage */
    uint64_t complete_record_offset;
};

/* Checks the open capture fd (named path in messages) as described above. Returns AUDIT_OK with
 * *tail filled, for a damaged file too; AUDIT_EIO or AUDIT_ENOMEM when it cannot be read. */
int capture_tail_check(int fd, const char *path, struct capture_tail *tail,
                       struct audit_error *err);

/* The first complete record starting after byte from of the open capture fd of file_bytes
 * bytes: *found, and its offset. Reads the file past from once, in bounded pieces. */
int capture_find_complete_record(int fd, const char *path, uint64_t from, uint64_t file_bytes,
                                 bool *found, uint64_t *offset, struct audit_error *err);

#endif
