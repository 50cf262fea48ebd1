/* src/common/input_file.c: regular files are read whole or in ranges; a FIFO (without a writer),
 * a directory, a device are refused at once with a message naming the file and what it is; a file
 * over the size limit is refused naming its size and the limit. alarm() turns a hang into a
 * failure. */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "input_file.h"
#include "test_util.h"

/* A hang (open() of a FIFO waiting for a writer) kills the test with SIGALRM. */
#define HANG_SECONDS 10

static char directory[256];

static void path_in(char *out, size_t size, const char *name)
{
    snprintf(out, size, "%s/%s", directory, name);
}

static void write_text(const char *path, const char *text)
{
    FILE *file = fopen(path, "wb");
    assert_non_null(file);
    assert_int_equal(fputs(text, file) >= 0, 1);
    assert_int_equal(fclose(file), 0);
}

#define assert_contains(haystack, needle)                                                 \
    do {                                                                                  \
        if (!strstr((haystack), (needle)))                                                \
            fail_msg("\"%s\" does not contain \"%s\"", (haystack), (needle));             \
    } while (0)

static void test_regular_files_are_read(void **state)
{
    (void)state;
    char path[512];
    uint8_t *bytes = NULL;
    size_t size = 0;
    struct audit_error err = { 0 };
    path_in(path, sizeof(path), "doc.json");
    write_text(path, "{\"a\": 1}");
    assert_int_equal(input_file_read_all(path, 1024, "a JSON document", &bytes, &size, &err),
                     AUDIT_OK);
    assert_int_equal(size, 8);
    assert_memory_equal(bytes, "{\"a\": 1}", 9); /* NUL-terminated */
    free(bytes);

    int fd = -1;
    uint64_t file_bytes = 0, got = 0;
    char part[4] = { 0 };
    assert_int_equal(input_file_open(path, &fd, &file_bytes, &err), AUDIT_OK);
    assert_int_equal(file_bytes, 8);
    assert_int_equal(fcntl(fd, F_GETFL) & O_NONBLOCK, 0);
    assert_int_equal(input_file_read_at(fd, part, 2, 6, &got), 0);
    assert_int_equal(got, 2);
    assert_memory_equal(part, "1}", 2);
    assert_int_equal(input_file_read_at(fd, part, 3, 7, &got), 0);
    assert_int_equal(got, 1); /* the file ends first */
    close(fd);

    assert_int_equal(input_file_read_all(path, 7, "a JSON document", &bytes, &size, &err),
                     AUDIT_EDATA);
    assert_contains(err.message, "doc.json: 8 bytes, over the limit of 7 bytes for a JSON document");
    assert_null(bytes);
    unlink(path);
}

static void expect_refused(const char *path, const char *message)
{
    struct audit_error err = { 0 };
    uint8_t *bytes = NULL;
    size_t size = 0;
    int fd = -1;
    uint64_t file_bytes = 0;
    alarm(HANG_SECONDS);
    assert_int_equal(input_file_open(path, &fd, &file_bytes, &err), AUDIT_EIO);
    assert_int_equal(fd, -1);
    assert_contains(err.message, message);
    assert_int_equal(input_file_read_all(path, 1024, "a JSON document", &bytes, &size, &err),
                     AUDIT_EIO);
    assert_contains(err.message, message);
    alarm(0);
}

static void test_other_files_are_refused_without_waiting(void **state)
{
    (void)state;
    char path[512], expected[600];
    path_in(path, sizeof(path), "fifo");
    assert_int_equal(mkfifo(path, 0600), 0);
    snprintf(expected, sizeof(expected), "%s: is a FIFO, not a regular file", path);
    expect_refused(path, expected);
    unlink(path);
    snprintf(expected, sizeof(expected), "%s: is a directory, not a regular file", directory);
    expect_refused(directory, expected);
    expect_refused("/dev/null", "/dev/null: is a character device, not a regular file");
    path_in(path, sizeof(path), "missing.json");
    snprintf(expected, sizeof(expected), "%s: cannot open: No such file or directory", path);
    expect_refused(path, expected);
}

static void test_kinds_are_named(void **state)
{
    (void)state;
    assert_string_equal(input_file_kind(S_IFREG), "a regular file");
    assert_string_equal(input_file_kind(S_IFDIR), "a directory");
    assert_string_equal(input_file_kind(S_IFIFO), "a FIFO");
    assert_string_equal(input_file_kind(S_IFCHR), "a character device");
    assert_string_equal(input_file_kind(S_IFBLK), "a block device");
    assert_string_equal(input_file_kind(S_IFSOCK), "a socket");
    assert_string_equal(input_file_kind(S_IFLNK), "a symbolic link");
}

static int make_directory(void **state)
{
    (void)state;
    return make_temporary_directory(directory, sizeof(directory), "test_input_file");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_regular_files_are_read),
        cmocka_unit_test(test_other_files_are_refused_without_waiting),
        cmocka_unit_test(test_kinds_are_named),
    };
    int status = cmocka_run_group_tests(tests, make_directory, NULL);
    rmdir(directory);
    return status;
}
