/* src/common/output_file.c: a new file and a replaced one (mode and owner kept), with the unnamed
 * temporary and with the named one; a symbolic link chain followed and kept; a character device,
 * a FIFO and stdout written through; a directory refused; a discarded write and a write over a
 * file-size limit leave the old file as it was and nothing beside it, naming OUT and "writing";
 * a writer killed in the middle leaves the old file intact, and nothing with O_TMPFILE. */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/sysmacros.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "output_file.h"
#include "test_util.h"

static char directory[256];

static void path_in(char *out, size_t size, const char *name)
{
    snprintf(out, size, "%s/%s", directory, name);
}

#define assert_contains(haystack, needle)                                                 \
    do {                                                                                  \
        if (!strstr((haystack), (needle)))                                                \
            fail_msg("\"%s\" does not contain \"%s\"", (haystack), (needle));             \
    } while (0)

static void write_text(const char *path, const char *text)
{
    FILE *file = fopen(path, "wb");
    assert_non_null(file);
    assert_true(fputs(text, file) >= 0);
    assert_int_equal(fclose(file), 0);
}

static void assert_file_holds(const char *path, const char *text)
{
    char buffer[256] = { 0 };
    FILE *file = fopen(path, "rb");
    assert_non_null(file);
    size_t got = fread(buffer, 1, sizeof(buffer) - 1, file);
    fclose(file);
    assert_int_equal(got, strlen(text));
    assert_string_equal(buffer, text);
}

/* The names in the test directory, sorted, joined by spaces. */
static void list_directory(char *out, size_t size)
{
    struct dirent **entries = NULL;
    int count = scandir(directory, &entries, NULL, alphasort);
    assert_true(count >= 0);
    out[0] = '\0';
    for (int i = 0; i < count; i++) {
        if (strcmp(entries[i]->d_name, ".") != 0 && strcmp(entries[i]->d_name, "..") != 0) {
            size_t used = strlen(out);
            snprintf(out + used, size - used, "%s%s", used ? " " : "", entries[i]->d_name);
        }
        free(entries[i]);
    }
    free(entries);
}

static void expect_directory(const char *names)
{
    char listing[1024];
    list_directory(listing, sizeof(listing));
    assert_string_equal(listing, names);
}

static void write_or_fail(const char *path, const char *text)
{
    struct audit_error err = { 0 };
    if (output_file_write_all(path, text, strlen(text), &err) != AUDIT_OK)
        fail_msg("writing %s failed: %s", path, err.message);
}

static void test_new_and_replaced_files(void **state)
{
    (void)state;
    char path[512];
    struct stat info;
    mode_t mask = umask(022);
    path_in(path, sizeof(path), "out.json");
    for (int unnamed = 1; unnamed >= 0; unnamed--) {
        output_file_allow_unnamed_temporaries(unnamed);
        unlink(path);
        write_or_fail(path, "first");
        assert_file_holds(path, "first");
        assert_int_equal(stat(path, &info), 0);
        assert_int_equal(info.st_mode & 07777, 0644); /* 0666 less the umask */
        for (mode_t mode = 0400; mode <= 0600; mode += 0200) {
            assert_int_equal(chmod(path, mode == 0400 ? 0444 : mode), 0);
            write_or_fail(path, "second");
            assert_file_holds(path, "second");
            assert_int_equal(stat(path, &info), 0);
            assert_int_equal(info.st_mode & 07777, mode == 0400 ? 0444 : mode);
        }
        if (geteuid() == 0) {
            assert_int_equal(chown(path, 1, 2), 0);
            write_or_fail(path, "third");
            assert_int_equal(stat(path, &info), 0);
            assert_int_equal(info.st_uid, 1);
            assert_int_equal(info.st_gid, 2);
        }
        expect_directory("out.json");
    }
    output_file_allow_unnamed_temporaries(true);
    umask(mask);
    unlink(path);
}

static void test_symbolic_links_are_followed_and_kept(void **state)
{
    (void)state;
    char first[512], second[512], target[512], loop[512], link[256];
    struct audit_error err = { 0 };
    path_in(first, sizeof(first), "first-link");
    path_in(second, sizeof(second), "second-link");
    path_in(target, sizeof(target), "target");
    assert_int_equal(symlink("second-link", first), 0);
    assert_int_equal(symlink(target, second), 0); /* absolute, dangling */
    write_or_fail(first, "through two links");
    assert_file_holds(target, "through two links");
    ssize_t length = readlink(first, link, sizeof(link) - 1);
    assert_true(length > 0);
    link[length] = '\0';
    assert_string_equal(link, "second-link");
    write_or_fail(first, "again");
    assert_file_holds(target, "again");
    expect_directory("first-link second-link target");

    path_in(loop, sizeof(loop), "loop");
    assert_int_equal(symlink("loop", loop), 0);
    assert_int_equal(output_file_write_all(loop, "x", 1, &err), AUDIT_EIO);
    assert_contains(err.message, "loop: cannot follow the symbolic link");
    unlink(first);
    unlink(second);
    unlink(target);
    unlink(loop);
}

static void test_devices_fifos_and_stdout_are_written_through(void **state)
{
    (void)state;
    char path[512];
    struct stat info;
    struct audit_error err = { 0 };
    /* As root, a private node: a bug would replace it, not the system's /dev/null. */
    path_in(path, sizeof(path), "null");
    const char *device = geteuid() == 0 && mknod(path, S_IFCHR | 0666, makedev(1, 3)) == 0
                             ? path
                             : "/dev/null";
    write_or_fail(device, "into the device");
    assert_int_equal(stat(device, &info), 0);
    assert_true(S_ISCHR(info.st_mode));
    if (device == path)
        unlink(path);

    path_in(path, sizeof(path), "fifo");
    assert_int_equal(mkfifo(path, 0600), 0);
    int pipe_fds[2];
    assert_int_equal(pipe(pipe_fds), 0);
    pid_t reader = fork();
    assert_true(reader >= 0);
    if (reader == 0) {
        char buffer[64] = { 0 };
        int fd = open(path, O_RDONLY);
        ssize_t got = fd >= 0 ? read(fd, buffer, sizeof(buffer) - 1) : -1;
        _exit(got == 9 && strcmp(buffer, "to a FIFO") == 0 ? 0 : 1);
    }
    alarm(10);
    write_or_fail(path, "to a FIFO");
    int status = 0;
    assert_int_equal(waitpid(reader, &status, 0), reader);
    alarm(0);
    assert_true(WIFEXITED(status) && WEXITSTATUS(status) == 0);
    assert_int_equal(lstat(path, &info), 0);
    assert_true(S_ISFIFO(info.st_mode));
    unlink(path);
    close(pipe_fds[0]);
    close(pipe_fds[1]);

    /* "-": stdout, in a child whose stdout is a pipe. */
    assert_int_equal(pipe(pipe_fds), 0);
    pid_t child = fork();
    assert_true(child >= 0);
    if (child == 0) {
        dup2(pipe_fds[1], STDOUT_FILENO);
        close(pipe_fds[0]);
        printf("stdio first, ");
        struct audit_error child_err = { 0 };
        _exit(output_file_write_all("-", "then the output", 15, &child_err) == AUDIT_OK ? 0 : 1);
    }
    close(pipe_fds[1]);
    char buffer[64] = { 0 };
    size_t used = 0;
    ssize_t n;
    while ((n = read(pipe_fds[0], buffer + used, sizeof(buffer) - 1 - used)) > 0)
        used += (size_t)n;
    close(pipe_fds[0]);
    assert_int_equal(waitpid(child, &status, 0), child);
    assert_true(WIFEXITED(status) && WEXITSTATUS(status) == 0);
    assert_string_equal(buffer, "stdio first, then the output");

    assert_int_equal(output_file_write_all(directory, "x", 1, &err), AUDIT_EIO);
    assert_contains(err.message, "is a directory; refusing to write over it");
    expect_directory("");
}

static void test_failures_leave_the_old_file(void **state)
{
    (void)state;
    char path[512];
    struct output_file *out = NULL;
    struct audit_error err = { 0 };
    path_in(path, sizeof(path), "kept.json");
    for (int unnamed = 1; unnamed >= 0; unnamed--) {
        output_file_allow_unnamed_temporaries(unnamed);
        write_text(path, "old");
        assert_int_equal(output_file_open(&out, path, &err), AUDIT_OK);
        assert_int_equal(output_file_write(out, "new", 3, &err), AUDIT_OK);
        output_file_discard(out);
        assert_file_holds(path, "old");
        expect_directory("kept.json");

        /* A file-size limit: EFBIG (SIGXFSZ ignored), in a child that owns the limit. */
        pid_t child = fork();
        assert_true(child >= 0);
        if (child == 0) {
            struct rlimit limit = { 4096, 4096 };
            static char big[8192];
            struct audit_error child_err = { 0 };
            signal(SIGXFSZ, SIG_IGN);
            if (setrlimit(RLIMIT_FSIZE, &limit) != 0)
                _exit(2);
            memset(big, 'x', sizeof(big));
            int result = output_file_write_all(path, big, sizeof(big), &child_err);
            _exit(result == AUDIT_EIO &&
                          strstr(child_err.message, "kept.json: writing failed after 4096 bytes: "
                                                    "File too large; the file is unchanged") &&
                          !strstr(child_err.message, ".tmp")
                      ? 0
                      : 1);
        }
        int status = 0;
        assert_int_equal(waitpid(child, &status, 0), child);
        assert_true(WIFEXITED(status));
        assert_int_equal(WEXITSTATUS(status), 0);
        assert_file_holds(path, "old");
        expect_directory("kept.json");
    }
    output_file_allow_unnamed_temporaries(true);
    unlink(path);
}

/* A writer killed with SIGKILL after half its bytes: the old file stays; with the unnamed
 * temporary nothing else remains, with the named one its hidden temporary does. */
static void test_killed_writer(void **state)
{
    (void)state;
    char path[512], listing[1024];
    path_in(path, sizeof(path), "report.json");
    for (int unnamed = 1; unnamed >= 0; unnamed--) {
        write_text(path, "old");
        int ready[2];
        assert_int_equal(pipe(ready), 0);
        pid_t child = fork();
        assert_true(child >= 0);
        if (child == 0) {
            struct output_file *out = NULL;
            struct audit_error err = { 0 };
            output_file_allow_unnamed_temporaries(unnamed);
            if (output_file_open(&out, path, &err) != AUDIT_OK ||
                output_file_write(out, "half of the new", 15, &err) != AUDIT_OK)
                _exit(1);
            if (write(ready[1], "w", 1) != 1)
                _exit(1);
            for (;;)
                pause();
        }
        char signal_byte;
        close(ready[1]);
        assert_int_equal(read(ready[0], &signal_byte, 1), 1);
        close(ready[0]);
        assert_int_equal(kill(child, SIGKILL), 0);
        int status = 0;
        assert_int_equal(waitpid(child, &status, 0), child);
        assert_true(WIFSIGNALED(status));
        assert_file_holds(path, "old");
        list_directory(listing, sizeof(listing));
        if (unnamed) {
            assert_string_equal(listing, "report.json");
        } else {
            assert_true(strncmp(listing, ".report.json.tmp-", 17) == 0);
            assert_non_null(strstr(listing, " report.json"));
            char leftover[512];
            snprintf(leftover, sizeof(leftover), "%s/%.*s", directory,
                     (int)(strchr(listing, ' ') - listing), listing);
            unlink(leftover);
        }
    }
    unlink(path);
}

static int make_directory(void **state)
{
    (void)state;
    return make_temporary_directory(directory, sizeof(directory), "test_output_file");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_new_and_replaced_files),
        cmocka_unit_test(test_symbolic_links_are_followed_and_kept),
        cmocka_unit_test(test_devices_fifos_and_stdout_are_written_through),
        cmocka_unit_test(test_failures_leave_the_old_file),
        cmocka_unit_test(test_killed_writer),
    };
    int status = cmocka_run_group_tests(tests, make_directory, NULL);
    rmdir(directory);
    return status;
}
