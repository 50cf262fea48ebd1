#include "output_file.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "input_file.h"

/* Linux resolves at most 40 symbolic links in one path (SYMLOOP_MAX). */
#define MAX_SYMLINK_HOPS 40
/* write() moves at most about 2 GiB per call on Linux. */
#define WRITE_CHUNK_BYTES ((size_t)1 << 30)
#define TEMPORARY_ATTEMPTS 100

enum output_kind {
    OUTPUT_STDOUT,   /* "-" */
    OUTPUT_THROUGH,  /* a character device or FIFO, written in place */
    OUTPUT_UNNAMED,  /* an O_TMPFILE file in the target's directory */
    OUTPUT_NAMED,    /* a hidden named temporary beside the target */
};

struct output_file {
    enum output_kind kind;
    int fd;
    char *path;        /* as given: every message names it */
    char *target;      /* the file replaced (symbolic links followed) */
    char *directory;   /* the target's directory */
    char *temporary;   /* OUTPUT_NAMED: the temporary's path */
    bool replacing;    /* the target exists: its mode and owner carry over */
    struct stat old;   /* the target as found */
    uint64_t written;
    bool failed;
};

static bool allow_unnamed = true;

void output_file_allow_unnamed_temporaries(bool allow)
{
    allow_unnamed = allow;
}

/* A copy of path with every symbolic link of its last component followed; NULL with errno. */
static char *resolve_symlinks(const char *path)
{
    char *current = strdup(path);
    for (int hop = 0; current && hop <= MAX_SYMLINK_HOPS; hop++) {
        struct stat info;
        char link[PATH_MAX];
        if (lstat(current, &info) != 0 || !S_ISLNK(info.st_mode))
            return current; /* missing or not a link: this is the file to write */
        ssize_t length = readlink(current, link, sizeof(link) - 1);
        if (length < 0) {
            free(current);
            return NULL;
        }
        link[length] = '\0';
        char *next;
        const char *slash = strrchr(current, '/');
        if (link[0] == '/' || !slash) {
            next = strdup(link);
        } else {
            size_t keep = (size_t)(slash - current) + 1;
            next = malloc(keep + (size_t)length + 1);
            if (next) {
                memcpy(next, current, keep);
                memcpy(next + keep, link, (size_t)length + 1);
            }
        }
        free(current);
        current = next;
    }
    if (current) {
        free(current);
        errno = ELOOP;
    }
    return NULL;
}

static char *directory_of(const char *path)
{
    const char *slash = strrchr(path, '/');
    if (!slash)
        return strdup(".");
    if (slash == path)
        return strdup("/");
    return strndup(path, (size_t)(slash - path));
}

static const char *base_name(const char *path)
{
    const char *slash = strrchr(path, '/');
    return slash ? slash + 1 : path;
}

/* DIRECTORY/.NAME.tmp-XXXXXXXXXXXX with 12 random hex digits. */
static char *temporary_name(const struct output_file *out)
{
    uint8_t random[6];
    if (getrandom(random, sizeof(random), GRND_NONBLOCK) != (ssize_t)sizeof(random)) {
        uint64_t mix = (uint64_t)getpid() * 0x9E3779B97F4A7C15ull ^ (uint64_t)time(NULL) ^
                       (uint64_t)clock();
        for (size_t i = 0; i < sizeof(random); i++)
            random[i] = (uint8_t)(mix >> (8 * i));
    }
    size_t size = strlen(out->directory) + strlen(base_name(out->target)) + 32;
    char *name = malloc(size);
    if (name)
        snprintf(name, size, "%s/.%s.tmp-%02x%02x%02x%02x%02x%02x", out->directory,
                 base_name(out->target), random[0], random[1], random[2], random[3], random[4],
                 random[5]);
    return name;
}

/* A named temporary beside the target, created exclusively. */
static int create_named_temporary(struct output_file *out, struct audit_error *err)
{
    for (int attempt = 0; attempt < TEMPORARY_ATTEMPTS; attempt++) {
        char *name = temporary_name(out);
        if (!name)
            return audit_fail(err, AUDIT_ENOMEM, "%s: out of memory", out->path);
        int fd = open(name, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0666);
        if (fd >= 0) {
            out->fd = fd;
            out->temporary = name;
            out->kind = OUTPUT_NAMED;
            return AUDIT_OK;
        }
        int saved = errno;
        free(name);
        if (saved != EEXIST)
            return audit_fail(err, AUDIT_EIO, "%s: cannot create a temporary file in %s: %s",
                              out->path, out->directory, strerror(saved));
    }
    return audit_fail(err, AUDIT_EIO, "%s: cannot create a temporary file in %s: every name tried "
                      "exists", out->path, out->directory);
}

static int create_temporary(struct output_file *out, struct audit_error *err)
{
    /* linkat() of an unnamed file goes through /proc/self/fd (AT_EMPTY_PATH needs a
     * capability): without /proc, use a named temporary from the start. */
    if (allow_unnamed && access("/proc/self/fd", X_OK) == 0) {
        int fd = open(out->directory, O_TMPFILE | O_WRONLY | O_CLOEXEC, 0666);
        if (fd >= 0) {
            out->fd = fd;
            out->kind = OUTPUT_UNNAMED;
            return AUDIT_OK;
        }
        /* Filesystems (and kernels) without O_TMPFILE say so with one of these. */
        if (errno != EOPNOTSUPP && errno != EISDIR && errno != EINVAL)
            return audit_fail(err, AUDIT_EIO, "%s: cannot create a temporary file in %s: %s",
                              out->path, out->directory, strerror(errno));
    }
    return create_named_temporary(out, err);
}

int output_file_open(struct output_file **out_pointer, const char *path, struct audit_error *err)
{
    int status = AUDIT_OK;
    struct output_file *out = calloc(1, sizeof(*out));
    *out_pointer = NULL;
    if (!out || !(out->path = strdup(path))) {
        free(out);
        return audit_fail(err, AUDIT_ENOMEM, "%s: out of memory", path);
    }
    out->fd = -1;
    if (strcmp(path, "-") == 0) {
        fflush(stdout); /* what stdio holds comes first */
        out->kind = OUTPUT_STDOUT;
        out->fd = STDOUT_FILENO;
        *out_pointer = out;
        return AUDIT_OK;
    }
    if (!(out->target = resolve_symlinks(path))) {
        status = audit_fail(err, errno == ENOMEM ? AUDIT_ENOMEM : AUDIT_EIO,
                            "%s: cannot follow the symbolic link: %s", path, strerror(errno));
        goto error;
    }
    if (lstat(out->target, &out->old) == 0) {
        mode_t mode = out->old.st_mode;
        if (S_ISCHR(mode) || S_ISFIFO(mode)) {
            out->fd = open(out->target, O_WRONLY | O_NOCTTY | O_CLOEXEC);
            if (out->fd < 0) {
                status = audit_fail(err, AUDIT_EIO, "%s: cannot open %s for writing: %s", path,
                                    input_file_kind(mode), strerror(errno));
                goto error;
            }
            out->kind = OUTPUT_THROUGH;
            *out_pointer = out;
            return AUDIT_OK;
        }
        if (!S_ISREG(mode)) {
            status = audit_fail(err, AUDIT_EIO, "%s: is %s; refusing to write over it", path,
                                input_file_kind(mode));
            goto error;
        }
        out->replacing = true;
    } else if (errno != ENOENT) {
        status = audit_fail(err, AUDIT_EIO, "%s: cannot stat: %s", path, strerror(errno));
        goto error;
    }
    if (!(out->directory = directory_of(out->target))) {
        status = audit_fail(err, AUDIT_ENOMEM, "%s: out of memory", path);
        goto error;
    }
    if ((status = create_temporary(out, err)) < 0)
        goto error;
    if (out->replacing) {
        /* Owner first: a change of owner clears the set-user-ID and set-group-ID bits. */
        if (fchown(out->fd, out->old.st_uid, out->old.st_gid) != 0 && errno != EPERM) {
            status = audit_fail(err, AUDIT_EIO, "%s: cannot give the new file the old owner: %s",
                                path, strerror(errno));
            goto error;
        }
        if (fchmod(out->fd, out->old.st_mode & 07777) != 0) {
            status = audit_fail(err, AUDIT_EIO, "%s: cannot give the new file the old mode: %s",
                                path, strerror(errno));
            goto error;
        }
    }
    *out_pointer = out;
    return AUDIT_OK;
error:
    output_file_discard(out);
    return status;
}

static bool replaces(const struct output_file *out)
{
    return out->kind == OUTPUT_UNNAMED || out->kind == OUTPUT_NAMED;
}

int output_file_write(struct output_file *out, const void *bytes, size_t size,
                      struct audit_error *err)
{
    const uint8_t *cursor = bytes;
    if (out->failed)
        return audit_fail(err, AUDIT_EIO, "%s: writing failed earlier", out->path);
    while (size > 0) {
        ssize_t n = write(out->fd, cursor, size < WRITE_CHUNK_BYTES ? size : WRITE_CHUNK_BYTES);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0) {
            int saved = n < 0 ? errno : ENOSPC;
            out->failed = true;
            return audit_fail(err, AUDIT_EIO, "%s: writing failed after %" PRIu64 " bytes: %s%s",
                              out->path, out->written, strerror(saved),
                              replaces(out) ? (out->replacing ? "; the file is unchanged"
                                                              : "; nothing was written")
                                            : "");
        }
        out->written += (uint64_t)n;
        cursor += n;
        size -= (size_t)n;
    }
    return AUDIT_OK;
}

/* Gives the finished unnamed temporary a name: OUT itself when there is no old file, else a
 * hidden name that rename() then moves over OUT. */
static int link_unnamed(struct output_file *out, struct audit_error *err)
{
    char proc_path[64];
    snprintf(proc_path, sizeof(proc_path), "/proc/self/fd/%d", out->fd);
    if (!out->replacing) {
        if (linkat(AT_FDCWD, proc_path, AT_FDCWD, out->target, AT_SYMLINK_FOLLOW) == 0)
            return AUDIT_OK;
        if (errno != EEXIST)
            goto fail;
        /* Someone created OUT meanwhile: replace it like an old file. */
    }
    for (int attempt = 0; attempt < TEMPORARY_ATTEMPTS; attempt++) {
        char *name = temporary_name(out);
        if (!name)
            return audit_fail(err, AUDIT_ENOMEM, "%s: out of memory", out->path);
        if (linkat(AT_FDCWD, proc_path, AT_FDCWD, name, AT_SYMLINK_FOLLOW) == 0 ||
            (errno == ENOENT && linkat(out->fd, "", AT_FDCWD, name, AT_EMPTY_PATH) == 0)) {
            out->temporary = name;
            out->kind = OUTPUT_NAMED;
            return AUDIT_OK;
        }
        int saved = errno;
        free(name);
        if (saved != EEXIST) {
            errno = saved;
            goto fail;
        }
    }
    errno = EEXIST;
fail:
    return audit_fail(err, AUDIT_EIO, "%s: cannot link the new file into %s: %s; %s", out->path,
                      out->directory, strerror(errno),
                      out->replacing ? "the file is unchanged" : "nothing was written");
}

static void sync_directory(const char *directory)
{
    /* Makes the rename durable; a directory that cannot be opened or synced (some filesystems
     * refuse) leaves that to the filesystem, as every rename-based writer must. */
    int fd = open(directory, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd >= 0) {
        (void)fsync(fd);
        close(fd);
    }
}

int output_file_commit(struct output_file *out, struct audit_error *err)
{
    int status = AUDIT_OK;
    if (out->failed) {
        status = audit_fail(err, AUDIT_EIO, "%s: writing failed", out->path);
        goto done;
    }
    if (out->kind == OUTPUT_STDOUT)
        goto done;
    if (out->kind == OUTPUT_THROUGH) {
        int result = close(out->fd);
        out->fd = -1;
        if (result != 0)
            status = audit_fail(err, AUDIT_EIO, "%s: writing failed at close: %s", out->path,
                                strerror(errno));
        goto done;
    }
    const char *unchanged = out->replacing ? "the file is unchanged" : "nothing was written";
    if (fsync(out->fd) != 0) {
        status = audit_fail(err, AUDIT_EIO, "%s: writing failed at fsync: %s; %s", out->path,
                            strerror(errno), unchanged);
        goto done;
    }
    if (out->kind == OUTPUT_UNNAMED && (status = link_unnamed(out, err)) < 0)
        goto done;
    if (out->kind == OUTPUT_NAMED) {
        if (rename(out->temporary, out->target) != 0) {
            status = audit_fail(err, AUDIT_EIO, "%s: cannot move the new file into place: %s; %s",
                                out->path, strerror(errno), unchanged);
            goto done;
        }
        free(out->temporary);
        out->temporary = NULL;
    }
    if (close(out->fd) != 0) {
        out->fd = -1;
        status = audit_fail(err, AUDIT_EIO, "%s: close failed after writing: %s", out->path,
                            strerror(errno));
        goto done;
    }
    out->fd = -1;
    sync_directory(out->directory);
done:
    output_file_discard(out);
    return status;
}

void output_file_discard(struct output_file *out)
{
    if (!out)
        return;
    if (out->fd >= 0 && out->kind != OUTPUT_STDOUT)
        close(out->fd);
    if (out->temporary)
        unlink(out->temporary);
    free(out->temporary);
    free(out->directory);
    free(out->target);
    free(out->path);
    free(out);
}

int output_file_write_all(const char *path, const void *bytes, size_t size,
                          struct audit_error *err)
{
    struct output_file *out = NULL;
    int status = output_file_open(&out, path, err);
    if (status < 0)
        return status;
    if ((status = output_file_write(out, bytes, size, err)) < 0) {
        output_file_discard(out);
        return status;
    }
    return output_file_commit(out, err);
}
