/* src/common/json_strict.c: the one JSON dialect of every reader. Each refusal names the byte
 * and the JSON path of the fault; what passes parses to the tree cJSON gives; duplicate keys
 * are found after unescaping and in large objects without quadratic time; json_read_file holds
 * a file to the same rules and names it. */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "json_strict.h"
#include "json_util.h"
#include "test_util.h"

static void expect_refused(const char *text, unsigned flags, const char *message)
{
    struct audit_error err = { 0 };
    cJSON *json = NULL;
    int status = json_strict_parse(text, strlen(text), "t.json", flags, &json, &err);
    if (status != AUDIT_EDATA || json)
        fail_msg("%s: status %d, wanted a refusal (%s)", text, status, err.message);
    if (!strstr(err.message, message))
        fail_msg("%s: message \"%s\" does not contain \"%s\"", text, err.message, message);
}

static cJSON *expect_accepted(const char *text, unsigned flags)
{
    struct audit_error err = { 0 };
    cJSON *json = NULL;
    if (json_strict_parse(text, strlen(text), "t.json", flags, &json, &err) != AUDIT_OK || !json)
        fail_msg("%s: refused: %s", text, err.message);
    return json;
}

static void test_refusals_name_byte_and_path(void **state)
{
    (void)state;
    static const struct {
        const char *text;
        unsigned flags;
        const char *message;
    } cases[] = {
        { "{\"a\": 1} x", 0, "t.json: byte 9, at $: more after the JSON value" },
        { "{\"a\": 1}\n{\"a\": 2}", 0, "t.json: byte 9, at $: more after the JSON value" },
        { "[1] [2]", 0, "byte 4, at $: more after the JSON value" },
        { "", 0, "t.json: byte 0, at $: no JSON value" },
        { " \n\t", 0, "byte 3, at $: no JSON value" },
        { "\xEF\xBB\xBF{}", 0, "byte 0, at $: a UTF-8 byte-order mark" },
        { "{\"a\": {\"b\": 1, \"c\": 2, \"b\": 3}}", 0,
          "byte 23, at $.a.b: duplicate key (first at byte 7)" },
        { "{\"a\": 1, \"\\u0061\": 2}", 0, "byte 9, at $.a: duplicate key (first at byte 1)" },
        { "{\"\\ud83d\\ude00\": 1, \"\xF0\x9F\x98\x80\": 2}", 0, "duplicate key (first at byte 1)" },
        { "{\"a\\u0000b\": 1}", 0, "byte 3, at $: \\u0000 (NUL) in a key" },
        { "[\"x\\u0000\"]", 0, "byte 3, at $[0]: \\u0000 (NUL) in a string" },
        { "{\"k\": [\"a\tb\"]}", 0, "byte 9, at $.k[0]: control character U+0009 written raw" },
        { "[\"\x1b[31m\"]", 0, "byte 2, at $[0]: control character U+001B" },
        { "[1e999]", 0, "byte 1, at $[0]: the number 1e999 overflows a double" },
        { "{\"x\": -1.5e400}", 0, "at $.x: the number -1.5e400 overflows a double" },
        { "[01]", 0, "a number with a leading zero" },
        { "[1.]", 0, "a decimal point must be followed by a digit" },
        { "[.5]", 0, "'.' where a value was expected" },
        { "[+1]", 0, "'+' where a value was expected" },
        { "[1e]", 0, "an exponent needs digits" },
        { "[-]", 0, "a digit must follow '-'" },
        { "[NaN]", 0, "'N' where a value was expected" },
        { "[1, 2,]", 0, "byte 5, at $[1]: a comma before ']'" },
        { "{\"a\": 1,}", 0, "a comma before '}'" },
        { "{\"a\" 1}", 0, "':' expected after the key" },
        { "{1: 2}", 0, "'1' where a key (a string) was expected" },
        { "{\"a\": 1", 0, "the text ends inside the object opened at byte 0" },
        { "[\"\\ud800\"]", 0, "\\uD800 is a UTF-16 high surrogate without a low one" },
        { "[\"\\udc00\"]", 0, "\\uDC00 is a UTF-16 low surrogate" },
        { "[\"\\x\"]", 0, "unknown escape: a backslash before 'x'" },
        { "[\"\\u12g4\"]", 0, "\\u needs four hex digits" },
        { "[\"\xC0\xAF\"]", 0, "byte 0xc0 is not UTF-8" },
        { "[\"\xED\xA0\x80\"]", 0, "byte 0xed is not UTF-8" },
        { "[\"\xF4\x90\x80\x80\"]", 0, "byte 0xf4 is not UTF-8" },
        { "[\"abc", 0, "byte 1, at $[0]: the string never ends" },
        { "[tru]", 0, "'t' where a value was expected" },
        { "{\"schema_version\": 1.0}", JSON_STRICT_SCHEMA_VERSION,
          "byte 19, at $.schema_version: schema_version 1.0 is not an integer" },
        { "{\"schema_version\": 1e0}", JSON_STRICT_SCHEMA_VERSION, "schema_version 1e0 is not" },
        { "{\"schema_version\": -1}", JSON_STRICT_SCHEMA_VERSION, "schema_version -1 is not" },
        { "{\"schema_version\": -0}", JSON_STRICT_SCHEMA_VERSION, "schema_version -0 is not" },
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++)
        expect_refused(cases[i].text, cases[i].flags, cases[i].message);

    /* A NUL byte inside the text, outside and inside a string. */
    struct audit_error err = { 0 };
    cJSON *json = NULL;
    assert_int_equal(json_strict_parse("{\"a\":1}\0", 8, "t.json", 0, &json, &err), AUDIT_EDATA);
    assert_non_null(strstr(err.message, "byte 7, at $: more after the JSON value"));
    assert_int_equal(json_strict_parse("[\"a\0b\"]", 7, "t.json", 0, &json, &err), AUDIT_EDATA);
    assert_non_null(strstr(err.message, "byte 3, at $[0]: control character U+0000"));
    assert_null(json);
}

static void test_accepted_texts_parse_as_cjson_does(void **state)
{
    (void)state;
    static const char *const texts[] = {
        "{\"schema\": \"x\", \"schema_version\": 1, \"a\": [true, false, null, -0, 0.5, 1e-320, "
        "12E+3, -7, \"\\u00e9\\ud83d\\ude00\\/\\n\\\"\\\\\"], \"b\": {}, \"c\": []}",
        " 42 ",
        "\"just a string\"",
        "null",
        "[\"\xC3\xA9\xE2\x82\xAC\xF0\x9F\x98\x80\", {\"\xC3\xA9\": []}]",
        /* keys that differ only after the first byte, or by case, are different keys */
        "{\"ab\": 1, \"aB\": 2, \"a\": 3, \"a\\u0062c\": 4}",
    };
    for (size_t i = 0; i < sizeof(texts) / sizeof(texts[0]); i++) {
        cJSON *json = expect_accepted(texts[i], JSON_STRICT_SCHEMA_VERSION);
        cJSON *lax = cJSON_Parse(texts[i]);
        assert_non_null(lax);
        assert_true(cJSON_Compare(json, lax, 1));
        cJSON_Delete(lax);
        cJSON_Delete(json);
    }
    /* schema_version is a plain key below the top level and without the flag. */
    cJSON_Delete(expect_accepted("{\"a\": {\"schema_version\": 1.5}}", JSON_STRICT_SCHEMA_VERSION));
    cJSON_Delete(expect_accepted("{\"schema_version\": \"v2\"}", JSON_STRICT_SCHEMA_VERSION));
    cJSON_Delete(expect_accepted("{\"schema_version\": 1.5}", 0));
    /* The same key in two objects is no duplicate. */
    cJSON_Delete(expect_accepted("[{\"a\": 1}, {\"a\": 2, \"b\": {\"a\": 3}}]", 0));
}

/* depth arrays inside each other, as a NUL-terminated text. */
static char *nested_arrays(int depth)
{
    char *text = malloc(2 * (size_t)depth + 1);
    assert_non_null(text);
    memset(text, '[', (size_t)depth);
    memset(text + depth, ']', (size_t)depth);
    text[2 * depth] = '\0';
    return text;
}

static void test_nesting_limit(void **state)
{
    (void)state;
    char *text = nested_arrays(JSON_STRICT_MAX_DEPTH);
    cJSON_Delete(expect_accepted(text, 0));
    free(text);
    text = nested_arrays(JSON_STRICT_MAX_DEPTH + 1);
    expect_refused(text, 0, "byte 256, at $[0][0]");
    expect_refused(text, 0, "nested deeper than 256 objects and arrays");
    free(text);
}

/* 200000 distinct keys, then one repeated: found, and in well under a second. */
static void test_large_object_duplicates(void **state)
{
    (void)state;
    enum { KEYS = 200000 };
    size_t capacity = (size_t)KEYS * 20 + 64, used = 0;
    char *text = malloc(capacity);
    assert_non_null(text);
    text[used++] = '{';
    for (int i = 0; i < KEYS; i++)
        used += (size_t)snprintf(text + used, capacity - used, "%s\"k%d\":%d", i ? "," : "", i, i);
    size_t unique_end = used;
    used += (size_t)snprintf(text + used, capacity - used, "}");
    struct timespec start, end;
    clock_gettime(CLOCK_MONOTONIC, &start);
    cJSON *json = expect_accepted(text, 0);
    assert_int_equal(cJSON_GetArraySize(json), KEYS);
    cJSON_Delete(json);
    used = unique_end + (size_t)snprintf(text + unique_end, capacity - unique_end, ",\"k4711\":0}");
    expect_refused(text, 0, "at $.k4711: duplicate key (first at byte");
    clock_gettime(CLOCK_MONOTONIC, &end);
    double seconds = (double)(end.tv_sec - start.tv_sec) + (double)(end.tv_nsec - start.tv_nsec) / 1e9;
    if (seconds > 5.0)
        fail_msg("two scans of %d keys took %.1f s", KEYS, seconds);
    free(text);
}

static void test_read_file_names_the_file(void **state)
{
    (void)state;
    char directory[256], path[320];
    assert_int_equal(make_temporary_directory(directory, sizeof(directory), "test_json_strict"), 0);
    snprintf(path, sizeof(path), "%s/d.json", directory);
    FILE *file = fopen(path, "wb");
    assert_non_null(file);
    fputs("{\"schema_version\": 1.0}", file);
    fclose(file);
    struct audit_error err = { 0 };
    cJSON *json = NULL;
    assert_int_equal(json_read_file(path, &json, &err), AUDIT_EDATA);
    assert_non_null(strstr(err.message, "d.json: byte 19, at $.schema_version: schema_version 1.0"));
    /* json_read_value_file: any value (import --metadata @FILE), schema_version a plain key. */
    assert_int_equal(json_read_value_file(path, &json, &err), AUDIT_OK);
    cJSON_Delete(json);
    /* A directory is refused by input_file, naming what it is, never by its size. */
    assert_int_equal(json_read_file(directory, &json, &err), AUDIT_EIO);
    assert_non_null(strstr(err.message, "is a directory"));
    assert_null(strstr(err.message, "9223372036854775807"));
    unlink(path);
    rmdir(directory);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_refusals_name_byte_and_path),
        cmocka_unit_test(test_accepted_texts_parse_as_cjson_does),
        cmocka_unit_test(test_nesting_limit),
        cmocka_unit_test(test_large_object_duplicates),
        cmocka_unit_test(test_read_file_names_the_file),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
