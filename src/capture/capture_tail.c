/* The tail check of capture files (see capture_tail.h). */
#include "capture_tail.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "capture_format.h"
#include "hash.h"
#include "input_file.h"

/* Bytes read per piece while scanning for a record magic. */
#define SCAN_CHUNK_BYTES ((uint64_t)1 << 20)
/* A header problem is one short sentence. */
#define HEADER_DETAIL_BYTES 512

/* The header at offset: *state OK, TRUNCATED or CORRUPT (with detail). */
static int header_at(int fd, const char *path, uint64_t offset, uint64_t file_bytes,
                     struct capture_header *header, enum capture_read_state *state,
                     char *detail, size_t detail_size, struct audit_error *err)
{
    uint8_t bytes[CAPTURE_HEADER_BYTES] = { 0 };
    uint64_t remaining = file_bytes - offset, got = 0;
    uint64_t available = remaining < CAPTURE_HEADER_BYTES ? remaining : CAPTURE_HEADER_BYTES;
    if (input_file_read_at(fd, bytes, available, offset, &got) < 0)
        return audit_fail(err, AUDIT_EIO, "%s: read failed at byte %" PRIu64 ": %s", path, offset,
                          strerror(errno));
    if (got < available)
        return audit_fail(err, AUDIT_EIO, "%s: the file shrank while being checked", path);
    *state = capture_parse_header(bytes, got, remaining, header, detail, detail_size);
    return AUDIT_OK;
}

static int payload_matches(int fd, const char *path, uint64_t offset,
                           const struct capture_header *header, bool *matches,
                           struct audit_error *err)
{
    uint8_t digest[HASH_BYTES];
    uint64_t hashed = 0;
    if (hash_file_range(fd, offset + CAPTURE_HEADER_BYTES, header->stored_bytes, digest,
                        &hashed) < 0)
        return errno == ENOMEM
                   ? audit_fail(err, AUDIT_ENOMEM, "%s: out of memory hashing a payload", path)
                   : audit_fail(err, AUDIT_EIO, "%s: read failed at byte %" PRIu64 ": %s", path,
                                offset, strerror(errno));
    *matches = hashed == header->stored_bytes &&
               memcmp(digest, header->payload_sha256, HASH_BYTES) == 0;
    return AUDIT_OK;
}

int capture_find_complete_record(int fd, const char *path, uint64_t from, uint64_t file_bytes,
                                 bool *found, uint64_t *offset, struct audit_error *err)
{
    int status = AUDIT_OK;
    *found = false;
    *offset = 0;
    uint8_t *buffer = malloc((size_t)SCAN_CHUNK_BYTES);
    if (!buffer)
        return audit_fail(err, AUDIT_ENOMEM, "%s: out of memory scanning for records", path);
    uint64_t position = from + 1;
    while (!*found && position < file_bytes &&
           file_bytes - position >= CAPTURE_HEADER_BYTES + CAPTURE_FIXED_PART_BYTES) {
        uint64_t want = file_bytes - position < SCAN_CHUNK_BYTES ? file_bytes - position
                                                                 : SCAN_CHUNK_BYTES;
        uint64_t got = 0;
        if (input_file_read_at(fd, buffer, want, position, &got) < 0) {
            status = audit_fail(err, AUDIT_EIO, "%s: read failed at byte %" PRIu64 ": %s", path,
                                position, strerror(errno));
            break;
        }
        if (got < sizeof(capture_magic))
            break;
        const uint8_t *cursor = buffer;
        const uint8_t *end = buffer + got;
        const uint8_t *hit;
        while (!*found && (hit = memmem(cursor, (size_t)(end - cursor), capture_magic,
                                        sizeof(capture_magic)))) {
            uint64_t candidate = position + (uint64_t)(hit - buffer);
            struct capture_header header;
            enum capture_read_state state = CAPTURE_READ_CORRUPT;
            char detail[HEADER_DETAIL_BYTES];
            bool matches = false;
            if ((status = header_at(fd, path, candidate, file_bytes, &header, &state, detail,
                                    sizeof(detail), err)) < 0 ||
                (state == CAPTURE_READ_OK &&
                 (status = payload_matches(fd, path, candidate, &header, &matches, err)) < 0))
                goto done;
            if (state == CAPTURE_READ_OK && matches) {
                *found = true;
                *offset = candidate;
            }
            cursor = hit + 1;
        }
        /* Overlap the pieces so that a magic across their boundary is seen once. */
        position += got - (sizeof(capture_magic) - 1);
    }
done:
    free(buffer);
    return status;
}

int capture_tail_check(int fd, const char *path, struct capture_tail *tail,
                       struct audit_error *err)
{
    struct stat info;
    struct capture_header header, last = { 0 };
    char detail[HEADER_DETAIL_BYTES];
    uint64_t offset = 0, last_offset = 0;
    uint32_t index = 0;
    int status;
    memset(tail, 0, sizeof(*tail));
    if (fstat(fd, &info) != 0)
        return audit_fail(err, AUDIT_EIO, "%s: cannot stat: %s", path, strerror(errno));
    tail->file_bytes = (uint64_t)info.st_size;
    tail->state = CAPTURE_READ_END;
    while (offset < tail->file_bytes) {
        enum capture_read_state state = CAPTURE_READ_CORRUPT;
        if ((status = header_at(fd, path, offset, tail->file_bytes, &header, &state, detail,
                                sizeof(detail), err)) < 0)
            return status;
        if (state != CAPTURE_READ_OK) {
            tail->state = state;
            snprintf(tail->problem, sizeof(tail->problem), "record %" PRIu32 " at byte %" PRIu64
                     ": %s: %s", index, offset,
                     state == CAPTURE_READ_TRUNCATED ? "truncated" : "corrupt", detail);
            break;
        }
        last = header;
        last_offset = offset;
        index++;
        offset += CAPTURE_HEADER_BYTES + header.stored_bytes;
    }
    /* The last record the walk passed may be a torn one whose claimed size reached into the
     * bytes after it (a record appended behind a torn one): only its hash tells. */
    if (index > 0) {
        bool matches = false;
        if ((status = payload_matches(fd, path, last_offset, &last, &matches, err)) < 0)
            return status;
        if (!matches) {
            index--;
            offset = last_offset;
            tail->state = CAPTURE_READ_CORRUPT;
            snprintf(tail->problem, sizeof(tail->problem), "record %" PRIu32 " at byte %" PRIu64
                     ": corrupt: payload SHA-256 mismatch", index, offset);
        }
    }
    tail->records = index;
    tail->intact_bytes = offset;
    if (tail->state == CAPTURE_READ_END)
        return AUDIT_OK;
    return capture_find_complete_record(fd, path, offset, tail->file_bytes,
                                        &tail->complete_record_after,
                                        &tail->complete_record_offset, err);
}
