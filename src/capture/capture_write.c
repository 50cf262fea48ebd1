/* Capture writing. A record is validated, then serialised whole in memory (header and stored
 * payload), and either appended to a capture with one write loop and an fsync, under a lock and
 * after the tail check of capture_tail.h, or written as the whole content of a file by the rules
 * of output_file.h. So a writer killed mid-append leaves at worst a truncated last record, which
 * readers recognise as such, and no record is ever appended behind a damaged one. */
#include "capture.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define ZLIB_CONST
#include <zlib.h>

#include "capture_format.h"
#include "capture_tail.h"
#include "hash.h"
#include "input_file.h"
#include "output_file.h"

#define ZLIB_LEVEL 6
/* zlib counts in uInt: feed it in pieces well below 4 GiB so multi-GB payloads work. */
#define ZLIB_CHUNK_BYTES ((uint64_t)1 << 30)
/* write() moves at most about 2 GiB per call on Linux. */
#define IO_CHUNK_BYTES ((uint64_t)1 << 30)

static void serialize_payload(const struct capture_record *record,
                              const struct payload_layout *layout, uint8_t *raw)
{
    const char *metadata = capture_record_metadata_text(record);
    memset(raw, 0, CAPTURE_FIXED_PART_BYTES);
    capture_store_u32(raw + 0, record->rows);
    capture_store_u32(raw + 4, record->k);
    capture_store_u64(raw + 8, record->row_stride);
    capture_store_u32(raw + 16, layout->sections);
    capture_store_u32(raw + 20, record->page_size);
    capture_store_u64(raw + 24, record->page_table_cols);
    capture_store_u64(raw + 32, layout->metadata_bytes);
    memcpy(raw + layout->metadata_offset, metadata, layout->metadata_bytes);
    capture_store_words_le(raw + layout->lengths_offset, record->lengths, record->rows);
    if (layout->sections & CAPTURE_SECTION_ROW_STARTS)
        capture_store_words_le(raw + layout->row_starts_offset, record->row_starts, record->rows);
    if (layout->sections & CAPTURE_SECTION_PAGE_TABLE) {
        if (record->page_table_row_starts)
            capture_store_words_le(raw + layout->page_table_row_starts_offset,
                           record->page_table_row_starts, record->rows);
        else
            memset(raw + layout->page_table_row_starts_offset, 0, (size_t)record->rows * 4);
        if (layout->page_table_count)
            capture_store_words_le(raw + layout->page_table_offset, record->page_table,
                           layout->page_table_count);
    }
    if (layout->sections & CAPTURE_SECTION_ENGINE_INDICES)
        capture_store_words_le(raw + layout->engine_indices_offset, record->engine_indices,
                       layout->engine_indices_count);
    if (layout->scores_count)
        capture_store_words_le(raw + layout->scores_offset, record->scores, layout->scores_count);
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

int capture_encode_record(const struct capture_record *record, bool compress, uint8_t **bytes,
                          uint64_t *size, struct audit_error *err)
{
    struct payload_layout layout;
    uint8_t *raw = NULL, *buffer = NULL;
    uint8_t sha256[HASH_BYTES];
    *bytes = NULL;
    *size = 0;
    int status = capture_record_validate(record, err);
    if (status < 0)
        return status;
    if ((status = capture_record_layout(record, &layout, err)) < 0)
        return status;
    uint64_t raw_bytes = layout.total_bytes, stored_bytes = raw_bytes;
    if (!compress) {
        /* Serialise straight behind the header: one buffer, one write. */
        buffer = capture_allocate_elements(CAPTURE_HEADER_BYTES + raw_bytes, 1);
        if (!buffer)
            goto out_of_memory;
        serialize_payload(record, &layout, buffer + CAPTURE_HEADER_BYTES);
    } else {
        uint64_t capacity = deflate_capacity(raw_bytes);
        raw = capture_allocate_elements(raw_bytes, 1);
        buffer = capture_allocate_elements(CAPTURE_HEADER_BYTES + capacity, 1);
        if (!raw || !buffer)
            goto out_of_memory;
        serialize_payload(record, &layout, raw);
        if (deflate_payload(raw, raw_bytes, buffer + CAPTURE_HEADER_BYTES, capacity,
                            &stored_bytes) < 0) {
            status = audit_fail(err, AUDIT_ENOMEM, "zlib compression failed");
            goto error;
        }
        free(raw);
        raw = NULL;
    }
    hash_bytes(buffer + CAPTURE_HEADER_BYTES, (size_t)stored_bytes, sha256);
    capture_build_header(buffer, compress, stored_bytes, raw_bytes, sha256);
    *bytes = buffer;
    *size = CAPTURE_HEADER_BYTES + stored_bytes;
    return AUDIT_OK;
out_of_memory:
    status = audit_fail(err, AUDIT_ENOMEM, "out of memory serialising a %" PRIu64 "-byte record",
                        raw_bytes);
error:
    free(raw);
    free(buffer);
    return status;
}

int capture_write_record(const char *path, const struct capture_record *record, bool compress,
                         struct audit_error *err)
{
    uint8_t *bytes = NULL;
    uint64_t size = 0;
    int status = capture_encode_record(record, compress, &bytes, &size, err);
    if (status < 0)
        return audit_error_prefix(err, "%s: cannot write the record", path);
    status = output_file_write_all(path, bytes, (size_t)size, err);
    free(bytes);
    return status;
}

/* ---- appending ---- */

/* Waits for the whole-file write lock. An open-file-description lock where the kernel has them
 * (its own, whatever else the process opens), else a POSIX record lock: both conflict with the
 * fcntl()/lockf() lock the Python hook takes, so C and Python appenders exclude each other. */
static int lock_for_append(int fd)
{
    struct flock lock = { .l_type = F_WRLCK, .l_whence = SEEK_SET, .l_start = 0, .l_len = 0 };
    int command = F_OFD_SETLKW;
    for (;;) {
        if (fcntl(fd, command, &lock) == 0)
            return 0;
        if (errno == EINTR)
            continue;
        if (errno == EINVAL && command == F_OFD_SETLKW) {
            command = F_SETLKW;
            continue;
        }
        return -1;
    }
}

static int write_all(int fd, const uint8_t *bytes, uint64_t size, uint64_t *written)
{
    *written = 0;
    while (*written < size) {
        uint64_t chunk = size - *written < IO_CHUNK_BYTES ? size - *written : IO_CHUNK_BYTES;
        ssize_t n = write(fd, bytes + *written, (size_t)chunk);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0) {
            if (n == 0)
                errno = ENOSPC;
            return -1;
        }
        *written += (uint64_t)n;
    }
    return 0;
}

/* A character device or FIFO named as the capture: the record is written through. */
static int append_through(const char *path, const uint8_t *bytes, uint64_t size,
                          struct audit_error *err)
{
    uint64_t written = 0;
    int fd = open(path, O_WRONLY | O_NOCTTY | O_CLOEXEC);
    if (fd < 0)
        return audit_fail(err, AUDIT_EIO, "%s: cannot open for appending: %s", path,
                          strerror(errno));
    int status = AUDIT_OK;
    if (write_all(fd, bytes, size, &written) < 0)
        status = audit_fail(err, AUDIT_EIO, "%s: appending failed after %" PRIu64 " of %" PRIu64
                            " bytes: %s", path, written, size, strerror(errno));
    if (close(fd) != 0 && status == AUDIT_OK)
        status = audit_fail(err, AUDIT_EIO, "%s: close failed: %s", path, strerror(errno));
    return status;
}

/* The tail check under the lock: refuses a damaged tail, or cuts it with repair_tail when no
 * complete record lies past it. *keep is the size the file has before the new record. */
static int prepare_tail(int fd, const char *path, bool repair_tail, struct capture_tail *tail,
                        uint64_t *keep, struct audit_error *err)
{
    int status = capture_tail_check(fd, path, tail, err);
    if (status < 0)
        return status;
    *keep = tail->file_bytes;
    if (tail->state == CAPTURE_READ_END)
        return AUDIT_OK;
    if (tail->complete_record_after)
        return audit_fail(err, AUDIT_EDATA,
                          "%s: %s; a complete record starts at byte %" PRIu64 " past it, so "
                          "cutting the file back would lose it: not appending (dsatopk-audit "
                          "inspect %s shows how to keep both)", path, tail->problem,
                          tail->complete_record_offset, path);
    if (!repair_tail)
        return audit_fail(err, AUDIT_EDATA,
                          "%s: %s; a record appended behind it could never be read: not "
                          "appending. Cut the file back to its %" PRIu32 " complete record%s "
                          "first: --repair-tail, or truncate -s %" PRIu64 " %s", path,
                          tail->problem, tail->records, tail->records == 1 ? "" : "s",
                          tail->intact_bytes, path);
    if (ftruncate(fd, (off_t)tail->intact_bytes) != 0)
        return audit_fail(err, AUDIT_EIO, "%s: cannot cut the damaged tail at byte %" PRIu64
                          ": %s", path, tail->intact_bytes, strerror(errno));
    *keep = tail->intact_bytes;
    return AUDIT_OK;
}

int capture_append(const char *path, const struct capture_record *record,
                   const struct capture_append_options *options, struct capture_tail *tail_out,
                   struct audit_error *err)
{
    struct capture_tail tail = { .state = CAPTURE_READ_END };
    struct stat info;
    uint8_t *bytes = NULL;
    uint64_t size = 0, keep = 0, written = 0;
    int fd = -1;
    int status = capture_encode_record(record, options->compress, &bytes, &size, err);
    if (status < 0) {
        audit_error_prefix(err, "%s: cannot append record", path);
        goto done;
    }
    if (stat(path, &info) == 0 && (S_ISCHR(info.st_mode) || S_ISFIFO(info.st_mode))) {
        status = append_through(path, bytes, size, err);
        goto done;
    }
    fd = open(path, O_RDWR | O_APPEND | O_CREAT | O_NOCTTY | O_CLOEXEC, 0666);
    if (fd < 0) {
        status = audit_fail(err, AUDIT_EIO, "%s: cannot open for appending: %s", path,
                            strerror(errno));
        goto done;
    }
    if (fstat(fd, &info) != 0) {
        status = audit_fail(err, AUDIT_EIO, "%s: cannot stat: %s", path, strerror(errno));
        goto done;
    }
    if (!S_ISREG(info.st_mode)) {
        status = audit_fail(err, AUDIT_EIO, "%s: is %s; cannot append a record to it", path,
                            input_file_kind(info.st_mode));
        goto done;
    }
    if (lock_for_append(fd) != 0) {
        status = audit_fail(err, AUDIT_EIO, "%s: cannot lock for appending: %s", path,
                            strerror(errno));
        goto done;
    }
    if ((status = prepare_tail(fd, path, options->repair_tail, &tail, &keep, err)) < 0)
        goto done;
    if (write_all(fd, bytes, size, &written) < 0) {
        int saved = errno;
        /* Our own failure (full disk, file-size limit): take the partial record back so later
         * appends stay readable. A killed writer cannot; its tail reads as truncated. */
        if (written > 0 && ftruncate(fd, (off_t)keep) != 0)
            status = audit_fail(err, AUDIT_EIO, "%s: appending failed after %" PRIu64 " of %" PRIu64
                                " bytes (%s), and cutting the partial record failed: the file "
                                "now ends in a truncated record", path, written, size,
                                strerror(saved));
        else
            status = audit_fail(err, AUDIT_EIO, "%s: appending failed after %" PRIu64 " of %" PRIu64
                                " bytes: %s; the file is back to its %" PRIu64 " bytes", path,
                                written, size, strerror(saved), keep);
        goto done;
    }
    if (fsync(fd) != 0) {
        status = audit_fail(err, AUDIT_EIO, "%s: fsync after appending failed: %s", path,
                            strerror(errno));
        goto done;
    }
    status = AUDIT_OK;
done:
    /* Closing the descriptor releases the lock. */
    if (fd >= 0 && close(fd) != 0 && status == AUDIT_OK)
        status = audit_fail(err, AUDIT_EIO, "%s: close after appending failed: %s", path,
                            strerror(errno));
    if (tail_out)
        *tail_out = tail;
    free(bytes);
    return status;
}

int capture_append_record(const char *path, const struct capture_record *record, bool compress,
                          struct audit_error *err)
{
    const struct capture_append_options options = { .compress = compress };
    return capture_append(path, record, &options, NULL, err);
}
