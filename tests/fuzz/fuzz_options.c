/* libFuzzer harness: option parsing, through the real dispatcher (src/cli/main.c) and commands.
 *
 * Input: text lines. The first line picks the mode, the others are the arguments.
 *
 *   parse   argv = dsatopk-audit LINES... --help --help. Every command, run, devices and bench
 *           included: each command's getopt loop parses every option the fuzzer wrote (values
 *           through cli_parse_uint, cli_parse_uint_list, the backend, shape and list parsers)
 *           and then meets --help, which returns before any file, device or GPU work. Two of
 *           them, so that an option expecting a value that swallows the first still leaves one.
 *   full    argv = dsatopk-audit LINES..., run to completion, for the commands that only read
 *           captures and write small files (inspect, census, diff, extract, import) on the
 *           fixtures in the scratch directory. An input naming run, devices, bench or synth
 *           anywhere is skipped: they drive the GPU or write captures of any size.
 *   values  each line through cli_parse_uint, cli_parse_uint_list and selection_parse_list,
 *           with what each promises checked: an accepted number is all digits and within the
 *           maximum; a list is within capacity; a row list is ascending without duplicates.
 *
 * In every mode an input with a row range wider than 100000 is skipped (has_wide_range), and
 * an argument containing '/' is dropped (paths stay inside the scratch directory,
 * so nothing outside it is read or written) and so is "--" (it would end option parsing before
 * --help). The exit code must be one of the documented ones. */
#include <ctype.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "error.h"
#include "fuzz_cli.h"
#include "fuzz_common.h"
#include "hash.h"
#include "selection.h"

#define MAX_ARGUMENTS 48
#define MAX_ARGUMENT_BYTES 512

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc;
    (void)argv;
    if (hash_init() != 0)
        fuzz_violation("harness setup: libsodium failed to initialise");
    fuzz_cli_fixtures();
    fuzz_silence_stdout();
    return 0;
}

/* Splits data into lines (copies, NUL-terminated). Returns the count. */
static int split_lines(const uint8_t *data, size_t size, char lines[][MAX_ARGUMENT_BYTES],
                       int capacity)
{
    int count = 0;
    size_t start = 0;
    while (start <= size && count < capacity) {
        const uint8_t *newline = memchr(data + start, '\n', size - start);
        size_t end = newline ? (size_t)(newline - data) : size;
        size_t length = end - start;
        if (length >= MAX_ARGUMENT_BYTES)
            length = MAX_ARGUMENT_BYTES - 1;
        memcpy(lines[count], data + start, length);
        lines[count][length] = '\0';
        count++;
        if (!newline)
            break;
        start = end + 1;
    }
    return count;
}

static bool all_digits(const char *text)
{
    if (!*text)
        return false;
    for (; *text; text++)
        if (!isdigit((unsigned char)*text))
            return false;
    return true;
}

static void check_values(char lines[][MAX_ARGUMENT_BYTES], int count)
{
    static const unsigned long long maxima[] = { 0, 1, 1023, 1ull << 20, 0xFFFFFFFFull,
                                                 1ull << 32, ~0ull };
    for (int i = 0; i < count; i++) {
        const char *text = lines[i];
        for (size_t m = 0; m < sizeof(maxima) / sizeof(maxima[0]); m++) {
            unsigned long long value = 12345;
            if (cli_parse_uint(text, maxima[m], &value) == 0) {
                if (!all_digits(text))
                    fuzz_violation("cli_parse_uint accepted '%s', which is not a number", text);
                if (value > maxima[m] || value != strtoull(text, NULL, 10))
                    fuzz_violation("cli_parse_uint('%s', max %llu) gave %llu", text, maxima[m],
                                   value);
            } else if (value != 12345) {
                fuzz_violation("cli_parse_uint('%s') refused but wrote the value", text);
            }
        }
        unsigned long long values[8];
        for (int capacity = 1; capacity <= 8; capacity *= 2) {
            int parsed = cli_parse_uint_list(text, values, capacity);
            if (parsed < -1 || parsed > capacity || parsed == 0)
                fuzz_violation("cli_parse_uint_list('%s', %d) returned %d", text, capacity,
                               parsed);
            for (int j = 0; j < parsed; j++)
                if (values[j] > 0xFFFFFFFFull)
                    fuzz_violation("cli_parse_uint_list('%s') gave %llu", text, values[j]);
        }
        uint32_t *rows = NULL;
        size_t row_count = 0;
        struct audit_error err = { 0 };
        int status = selection_parse_list(text, "--rows", &rows, &row_count, &err);
        if (status == 0) {
            for (size_t j = 1; j < row_count; j++)
                if (rows[j] <= rows[j - 1])
                    fuzz_violation("selection_parse_list('%s'): not ascending at %zu", text, j);
        } else if (status != AUDIT_EUSAGE && status != AUDIT_ENOMEM) {
            fuzz_violation("selection_parse_list('%s') failed with %d", text, status);
        } else if (!strstr(err.message, "--rows")) {
            fuzz_violation("selection_parse_list error does not name the option: %s",
                           err.message);
        }
        free(rows);
    }
}

/* Whether text holds a range FIRST-LAST wider than WIDE_RANGE. Such inputs are skipped: a list
 * may name up to 2^24 rows, and expanding and sorting that many takes seconds under the
 * sanitizers, so a corpus full of them would run at a few executions per second. The limit
 * itself is unit-tested (tests/test_diff.c, "more than"). */
#define WIDE_RANGE 100000ull
static bool has_wide_range(const char *text)
{
    for (const char *p = text; *p; p++) {
        if (*p != '-' || p == text || !isdigit((unsigned char)p[-1]) ||
            !isdigit((unsigned char)p[1]))
            continue;
        const char *start = p;
        while (start > text && isdigit((unsigned char)start[-1]))
            start--;
        unsigned long long first = strtoull(start, NULL, 10), last = strtoull(p + 1, NULL, 10);
        if (last > first && last - first > WIDE_RANGE)
            return true;
    }
    return false;
}

static bool forbidden_in_full_mode(const char *argument)
{
    static const char *const commands[] = { "run", "devices", "bench", "synth" };
    for (size_t i = 0; i < sizeof(commands) / sizeof(commands[0]); i++)
        if (strcmp(argument, commands[i]) == 0)
            return true;
    return false;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static char lines[MAX_ARGUMENTS + 1][MAX_ARGUMENT_BYTES];
    static char program[] = "dsatopk-audit", help[] = "--help";
    char *argv[MAX_ARGUMENTS + 4];
    int count = split_lines(data, size, lines, MAX_ARGUMENTS + 1);
    if (count < 1)
        return 0;
    const char *mode = lines[0];
    for (int i = 1; i < count; i++)
        if (has_wide_range(lines[i]))
            return 0;
    if (strcmp(mode, "values") == 0) {
        check_values(lines + 1, count - 1);
        return 0;
    }
    bool parse = strcmp(mode, "parse") == 0, full = strcmp(mode, "full") == 0;
    if (!parse && !full)
        return 0;
    int argc = 0;
    argv[argc++] = program;
    for (int i = 1; i < count; i++) {
        if (strchr(lines[i], '/') || strcmp(lines[i], "--") == 0)
            continue;
        if (full && forbidden_in_full_mode(lines[i]))
            return 0;
        argv[argc++] = lines[i];
    }
    if (parse) {
        argv[argc++] = help;
        argv[argc++] = help;
    }
    argv[argc] = NULL;
    int code = fuzz_cli_call(argc, argv);
    if (code < EXIT_AUDIT_OK || code > EXIT_DEVICE)
        fuzz_violation("exit code %d is not a documented one", code);
    if (full)
        fuzz_cli_restore();
    return 0;
}
