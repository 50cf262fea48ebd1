/* src/common/terminal_text.c: control characters and bytes that are not UTF-8 come out escaped,
 * everything else (other UTF-8 included) as it is; clean text is handed back untouched. */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "terminal_text.h"

static void test_escapes(void **state)
{
    (void)state;
    static const char *const cases[][2] = {
        { "a\nb", "a\\nb" },
        { "x\ry\tz", "x\\ry\\tz" },
        { "\x1b[31mred\x1b[0m", "\\x1b[31mred\\x1b[0m" },
        { "bell\a", "bell\\x07" },
        { "del\x7f", "del\\x7f" },
        { "c1 \xc2\x9b" "2J", "c1 \\xc2\\x9b2J" },   /* U+009B, CSI */
        { "bad \xff\xfe", "bad \\xff\\xfe" },
        { "cut \xe2\x82", "cut \\xe2\\x82" },
        { "overlong \xc0\xaf", "overlong \\xc0\\xaf" },
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++)
        assert_string_equal(terminal_safe(cases[i][0]), cases[i][1]);
}

static void test_clean_text_is_returned_as_is(void **state)
{
    (void)state;
    static const char *const clean[] = { "", "captures/edge.bin", "caf\xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80",
                                         "back\\slash \"quoted\"", "\xc2\xa0nbsp" };
    for (size_t i = 0; i < sizeof(clean) / sizeof(clean[0]); i++)
        assert_ptr_equal(terminal_safe(clean[i]), clean[i]);
    assert_string_equal(terminal_safe(NULL), "(null)");
}

/* Results stay valid for TERMINAL_SAFE_SLOTS calls; a long text is cut with "...". */
static void test_slots_and_length(void **state)
{
    (void)state;
    const char *results[TERMINAL_SAFE_SLOTS];
    char inputs[TERMINAL_SAFE_SLOTS][8];
    for (int i = 0; i < TERMINAL_SAFE_SLOTS; i++) {
        snprintf(inputs[i], sizeof(inputs[i]), "%d\n", i);
        results[i] = terminal_safe(inputs[i]);
    }
    for (int i = 0; i < TERMINAL_SAFE_SLOTS; i++) {
        char expected[16];
        snprintf(expected, sizeof(expected), "%d\\n", i);
        assert_string_equal(results[i], expected);
    }
    char *long_text = malloc(3 * TERMINAL_SAFE_BYTES);
    assert_non_null(long_text);
    memset(long_text, '\n', 3 * TERMINAL_SAFE_BYTES - 1);
    long_text[3 * TERMINAL_SAFE_BYTES - 1] = '\0';
    const char *cut = terminal_safe(long_text);
    assert_true(strlen(cut) < TERMINAL_SAFE_BYTES);
    assert_string_equal(cut + strlen(cut) - 3, "...");
    /* terminal_fputs has no limit. */
    char *written = NULL;
    size_t size = 0;
    FILE *out = open_memstream(&written, &size);
    assert_non_null(out);
    terminal_fputs(long_text, out);
    fclose(out);
    assert_int_equal(size, 2 * (3 * TERMINAL_SAFE_BYTES - 1));
    free(written);
    free(long_text);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_escapes),
        cmocka_unit_test(test_clean_text_is_returned_as_is),
        cmocka_unit_test(test_slots_and_length),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
