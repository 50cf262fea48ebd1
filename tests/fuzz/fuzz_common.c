/* Helpers shared by the harnesses: in-memory files, the scratch directory, violations. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "fuzz_common.h"

/* A copy of stderr taken before main(): libFuzzer's -close_fd_mask=2 later points fd 2 at
 * /dev/null (the commands are noisy), and a violation must still say what broke. */
static int report_fd = STDERR_FILENO;

__attribute__((constructor)) static void keep_stderr(void)
{
    int copy = fcntl(STDERR_FILENO, F_DUPFD_CLOEXEC, 3);
    if (copy >= 0)
        report_fd = copy;
}

void fuzz_violation(const char *format, ...)
{
    char message[2048];
    va_list args;
    va_start(args, format);
    int length = vsnprintf(message, sizeof(message) - 1, format, args);
    va_end(args);
    if (length < 0)
        length = 0;
    if ((size_t)length > sizeof(message) - 2)
        length = (int)sizeof(message) - 2;
    message[length++] = '\n';
    dprintf(report_fd, "fuzz violation: ");
    if (write(report_fd, message, (size_t)length) < 0)
        (void)0; /* nothing better to do on the way to abort() */
    abort();
}

void fuzz_file_create(struct fuzz_file *file, const char *name)
{
    file->fd = memfd_create(name, MFD_CLOEXEC);
    if (file->fd < 0)
        fuzz_violation("harness setup: memfd_create(%s): %s", name, strerror(errno));
    snprintf(file->path, sizeof(file->path), "/proc/self/fd/%d", file->fd);
}

void fuzz_file_set(struct fuzz_file *file, const void *bytes, size_t size)
{
    const uint8_t *cursor = bytes;
    size_t done = 0;
    if (ftruncate(file->fd, 0) != 0)
        fuzz_violation("harness: ftruncate(%s): %s", file->path, strerror(errno));
    while (done < size) {
        ssize_t n = pwrite(file->fd, cursor + done, size - done, (off_t)done);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            fuzz_violation("harness: pwrite(%s): %s", file->path, strerror(errno));
        done += (size_t)n;
    }
}

uint8_t *fuzz_file_get(const struct fuzz_file *file, size_t *size)
{
    struct stat info;
    if (fstat(file->fd, &info) != 0)
        fuzz_violation("harness: fstat(%s): %s", file->path, strerror(errno));
    uint8_t *bytes = malloc((size_t)info.st_size + 1);
    if (!bytes)
        fuzz_violation("harness: out of memory");
    size_t done = 0;
    while (done < (size_t)info.st_size) {
        ssize_t n = pread(file->fd, bytes + done, (size_t)info.st_size - done, (off_t)done);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            fuzz_violation("harness: pread(%s): %s", file->path, strerror(errno));
        done += (size_t)n;
    }
    *size = done;
    return bytes;
}

static char scratch_path[256];

static void remove_scratch(void)
{
    static const char *const keep_nothing[] = { NULL };
    if (!scratch_path[0])
        return;
    fuzz_scratch_clean(keep_nothing);
    rmdir(scratch_path);
}

/* Scratch directories are named dsatopk-fuzz-PID-XXXXXX. A harness that crashed (abort, a
 * sanitizer report, libFuzzer's timeout) never runs its atexit cleanup: the next harness removes
 * the directories of processes that no longer exist. */
static void remove_stale_scratch(const char *base)
{
    DIR *dir = opendir(base);
    struct dirent *entry;
    while (dir && (entry = readdir(dir))) {
        long pid;
        char tail[16];
        if (sscanf(entry->d_name, "dsatopk-fuzz-%ld-%15s", &pid, tail) != 2 || pid <= 0 ||
            strlen(tail) != 6 || kill((pid_t)pid, 0) == 0 || errno != ESRCH)
            continue;
        char path[512];
        snprintf(path, sizeof(path), "%s/%s", base, entry->d_name);
        DIR *stale = opendir(path);
        struct dirent *child;
        while (stale && (child = readdir(stale))) {
            char child_path[1024];
            snprintf(child_path, sizeof(child_path), "%s/%s", path, child->d_name);
            unlink(child_path);
        }
        if (stale)
            closedir(stale);
        rmdir(path);
    }
    if (dir)
        closedir(dir);
}

const char *fuzz_scratch_dir(void)
{
    if (scratch_path[0])
        return scratch_path;
    struct stat info;
    const char *base = "/dev/shm";
    if (stat(base, &info) != 0 || !S_ISDIR(info.st_mode) || access(base, W_OK) != 0)
        base = getenv("TMPDIR") && *getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp";
    remove_stale_scratch(base);
    snprintf(scratch_path, sizeof(scratch_path), "%s/dsatopk-fuzz-%ld-XXXXXX", base,
             (long)getpid());
    if (!mkdtemp(scratch_path))
        fuzz_violation("harness setup: mkdtemp(%s): %s", scratch_path, strerror(errno));
    atexit(remove_scratch);
    return scratch_path;
}

void fuzz_scratch_clean(const char *const *keep)
{
    DIR *dir = opendir(fuzz_scratch_dir());
    if (!dir)
        fuzz_violation("harness: opendir(%s): %s", scratch_path, strerror(errno));
    struct dirent *entry;
    while ((entry = readdir(dir))) {
        if (strcmp(entry->d_name, ".") == 0 || strcmp(entry->d_name, "..") == 0)
            continue;
        bool kept = false;
        for (int i = 0; keep[i] && !kept; i++)
            kept = strcmp(keep[i], entry->d_name) == 0;
        if (kept)
            continue;
        char path[512];
        snprintf(path, sizeof(path), "%s/%s", scratch_path, entry->d_name);
        /* A command may have made a directory (run --dump-outputs is not reachable, but a
         * future option might be): remove one level of files, then the directory. */
        if (unlink(path) != 0 && errno == EISDIR) {
            DIR *inner = opendir(path);
            struct dirent *child;
            while (inner && (child = readdir(inner))) {
                char child_path[1024];
                snprintf(child_path, sizeof(child_path), "%s/%s", path, child->d_name);
                unlink(child_path);
            }
            if (inner)
                closedir(inner);
            rmdir(path);
        }
    }
    closedir(dir);
}

void fuzz_scratch_write(const char *name, const void *bytes, size_t size)
{
    char path[512];
    snprintf(path, sizeof(path), "%s/%s", fuzz_scratch_dir(), name);
    FILE *file = fopen(path, "wb");
    if (!file || fwrite(bytes, 1, size, file) != size || fclose(file) != 0)
        fuzz_violation("harness setup: cannot write %s: %s", path, strerror(errno));
}

void fuzz_silence_stdout(void)
{
    fflush(stdout);
    int null_fd = open("/dev/null", O_WRONLY | O_CLOEXEC);
    if (null_fd < 0 || dup2(null_fd, STDOUT_FILENO) < 0)
        fuzz_violation("harness setup: cannot send stdout to /dev/null: %s", strerror(errno));
    close(null_fd);
}

bool fuzz_verbose(void)
{
    static int verbose = -1;
    if (verbose < 0) {
        const char *value = getenv("DSATOPK_FUZZ_VERBOSE");
        verbose = value && *value && strcmp(value, "0") != 0;
    }
    return verbose;
}
