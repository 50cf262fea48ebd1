#include "input_file.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* read() moves at most about 2 GiB per call on Linux. */
#define READ_CHUNK_BYTES ((uint64_t)1 << 30)

const char *input_file_kind(mode_t mode)
{
    if (S_ISREG(mode))
        return "a regular file";
    if (S_ISDIR(mode))
        return "a directory";
    if (S_ISFIFO(mode))
        return "a FIFO";
    if (S_ISCHR(mode))
        return "a character device";
    if (S_ISBLK(mode))
        return "a block device";
    if (S_ISSOCK(mode))
        return "a socket";
    if (S_ISLNK(mode))
        return "a symbolic link";
    return "a file of unknown type";
}

static int refuse_kind(const char *path, mode_t mode, struct audit_error *err)
{
    return audit_fail(err, AUDIT_EIO, "%s: is %s, not a regular file", path, input_file_kind(mode));
}

int input_file_open(const char *path, int *fd_out, uint64_t *size, struct audit_error *err)
{
    struct stat info;
    *fd_out = -1;
    *size = 0;
    /* stat() first: a device is never opened (opening one can have effects of its own). */
    if (stat(path, &info) != 0)
        return audit_fail(err, AUDIT_EIO, "%s: cannot open: %s", path, strerror(errno));
    if (!S_ISREG(info.st_mode))
        return refuse_kind(path, info.st_mode, err);
    int fd = open(path, O_RDONLY | O_NONBLOCK | O_NOCTTY | O_CLOEXEC);
    if (fd < 0)
        return audit_fail(err, AUDIT_EIO, "%s: cannot open: %s", path, strerror(errno));
    if (fstat(fd, &info) != 0) {
        int status = audit_fail(err, AUDIT_EIO, "%s: cannot stat: %s", path, strerror(errno));
        close(fd);
        return status;
    }
    if (!S_ISREG(info.st_mode)) {
        close(fd);
        return refuse_kind(path, info.st_mode, err);
    }
    int flags = fcntl(fd, F_GETFL);
    if (flags < 0 || fcntl(fd, F_SETFL, flags & ~O_NONBLOCK) != 0) {
        int status = audit_fail(err, AUDIT_EIO, "%s: cannot clear O_NONBLOCK: %s", path,
                                strerror(errno));
        close(fd);
        return status;
    }
    *fd_out = fd;
    *size = (uint64_t)info.st_size;
    return AUDIT_OK;
}

int input_file_read_at(int fd, void *buffer, uint64_t size, uint64_t offset, uint64_t *got)
{
    uint8_t *bytes = buffer;
    *got = 0;
    while (*got < size) {
        uint64_t chunk = size - *got < READ_CHUNK_BYTES ? size - *got : READ_CHUNK_BYTES;
        ssize_t n = pread(fd, bytes + *got, (size_t)chunk, (off_t)(offset + *got));
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0)
            return -1;
        if (n == 0)
            break;
        *got += (uint64_t)n;
    }
    return 0;
}

int input_file_read_all(const char *path, uint64_t max_bytes, const char *what, uint8_t **bytes,
                        size_t *size_out, struct audit_error *err)
{
    uint8_t *buffer = NULL;
    uint64_t size = 0, got = 0;
    int fd = -1;
    *bytes = NULL;
    *size_out = 0;
    int status = input_file_open(path, &fd, &size, err);
    if (status < 0)
        return status;
    if (size > max_bytes || size > (uint64_t)SIZE_MAX - 1) {
        status = audit_fail(err, AUDIT_EDATA, "%s: %" PRIu64 " bytes, over the limit of %" PRIu64
                            " bytes for %s", path, size, max_bytes, what);
        goto done;
    }
    buffer = malloc((size_t)size + 1);
    if (!buffer) {
        status = audit_fail(err, AUDIT_ENOMEM, "%s: out of memory reading %" PRIu64 " bytes", path,
                            size);
        goto done;
    }
    if (input_file_read_at(fd, buffer, size, 0, &got) < 0) {
        status = audit_fail(err, AUDIT_EIO, "%s: read failed: %s", path, strerror(errno));
        goto done;
    }
    if (got < size) {
        status = audit_fail(err, AUDIT_EIO, "%s: the file shrank from %" PRIu64 " to %" PRIu64
                            " bytes while being read", path, size, got);
        goto done;
    }
    buffer[size] = '\0';
    *bytes = buffer;
    *size_out = (size_t)size;
    buffer = NULL;
done:
    free(buffer);
    close(fd);
    return status;
}
