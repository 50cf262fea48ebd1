/* libFuzzer harness: the strict JSON dialect every reader goes through (src/common/json_strict.c).
 *
 * Input: one mode byte, then the text. Bit 0 of the mode asks for JSON_STRICT_SCHEMA_VERSION.
 * Promises checked beyond no crash, leak or undefined behaviour:
 * - a refusal is AUDIT_EDATA (or AUDIT_ENOMEM) and its message is "fuzz.json: byte N, at $..."
 *   with N inside the text or just past its end;
 * - the dialect is a subset of JSON as cJSON reads it: whatever cJSON refuses is refused;
 * - an accepted text is UTF-8 without a NUL byte, its tree holds no object with two equal keys
 *   and no number that is not finite, and cJSON's printing of it is accepted again and parses to
 *   an equal tree. */
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "error.h"
#include "fuzz_common.h"
#include "json_strict.h"

#define WHAT "fuzz.json"

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc;
    (void)argv;
    return 0;
}

/* Independent of the scanner: bytes well-formed as UTF-8 by Unicode table 3-7, none NUL. */
static bool is_utf8_without_nul(const uint8_t *text, size_t size)
{
    for (size_t i = 0; i < size;) {
        uint8_t c = text[i];
        size_t extra = c < 0x80 ? 0 : c >= 0xC2 && c <= 0xDF ? 1 : c >= 0xE0 && c <= 0xEF ? 2
                                   : c >= 0xF0 && c <= 0xF4 ? 3 : 4;
        if (c == 0 || extra == 4 || size - i <= extra)
            return false;
        uint8_t low = c == 0xE0 ? 0xA0 : c == 0xF0 ? 0x90 : 0x80;
        uint8_t high = c == 0xED ? 0x9F : c == 0xF4 ? 0x8F : 0xBF;
        if (extra && (text[i + 1] < low || text[i + 1] > high))
            return false;
        for (size_t j = 2; j <= extra; j++)
            if (text[i + j] < 0x80 || text[i + j] > 0xBF)
                return false;
        i += extra + 1;
    }
    return true;
}

static void check_tree(const cJSON *item, int depth)
{
    if (depth > JSON_STRICT_MAX_DEPTH + 1)
        fuzz_violation("accepted a tree deeper than %d", JSON_STRICT_MAX_DEPTH);
    if (cJSON_IsNumber(item) && !isfinite(item->valuedouble))
        fuzz_violation("accepted a number that is not finite");
    if (cJSON_IsObject(item))
        for (const cJSON *a = item->child; a; a = a->next)
            for (const cJSON *b = a->next; b; b = b->next)
                if (strcmp(a->string, b->string) == 0)
                    fuzz_violation("accepted an object with the key \"%.40s\" twice", a->string);
    for (const cJSON *child = item->child; child; child = child->next)
        check_tree(child, depth + 1);
}

static void check_refusal(int status, const struct audit_error *err, size_t size)
{
    if (status == AUDIT_ENOMEM)
        return;
    if (status != AUDIT_EDATA)
        fuzz_violation("refusal with status %d: %s", status, err->message);
    const char *prefix = WHAT ": byte ";
    if (strncmp(err->message, prefix, strlen(prefix)) != 0)
        fuzz_violation("the message does not start with '%s': %s", prefix, err->message);
    char *end = NULL;
    unsigned long long at = strtoull(err->message + strlen(prefix), &end, 10);
    if (at > size || strncmp(end, ", at $", 6) != 0)
        fuzz_violation("byte %llu of %zu, or no JSON path: %s", at, size, err->message);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1)
        return 0;
    const char *text = (const char *)data + 1;
    size_t text_size = size - 1;
    unsigned flags = data[0] & 1 ? JSON_STRICT_SCHEMA_VERSION : 0;
    struct audit_error err = { 0 };
    cJSON *json = NULL;
    int status = json_strict_parse(text, text_size, WHAT, flags, &json, &err);
    cJSON *lax = cJSON_ParseWithLength(text, text_size);
    if (status < 0) {
        if (json)
            fuzz_violation("a refusal left a tree behind");
        check_refusal(status, &err, text_size);
        if (fuzz_verbose())
            fprintf(stderr, "refused: %s\n", err.message);
        cJSON_Delete(lax);
        return 0;
    }
    if (!lax)
        fuzz_violation("accepted a text cJSON refuses");
    cJSON_Delete(lax);
    if (!is_utf8_without_nul(data + 1, text_size))
        fuzz_violation("accepted a text that is not UTF-8 or holds a NUL");
    check_tree(json, 0);
    char *printed = cJSON_PrintUnformatted(json);
    if (printed) {
        cJSON *again = NULL;
        struct audit_error again_err = { 0 };
        int again_status = json_strict_parse(printed, strlen(printed), WHAT, 0, &again, &again_err);
        if (again_status == AUDIT_EDATA)
            fuzz_violation("cJSON's printing of an accepted text is refused: %s", again_err.message);
        if (again_status == AUDIT_OK && !cJSON_Compare(json, again, 1))
            fuzz_violation("the printed text parses to another tree");
        cJSON_Delete(again);
        cJSON_free(printed);
    }
    if (fuzz_verbose())
        fprintf(stderr, "accepted\n");
    cJSON_Delete(json);
    return 0;
}
