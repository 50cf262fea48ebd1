/* The strict JSON dialect (json_strict.h): a scan that checks the text and names the byte and
 * the JSON path of the first fault, then cJSON's parse of a text known to be good. */
#include "json_strict.h"

#include <inttypes.h>
#include <math.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "document_keys.h"
#include "utf8.h"

#define PATH_BYTES 320
#define KEY_SHOWN_BYTES 40
#define NUMBER_SHOWN_BYTES 40

/* One open container on the way to the current value: an object member or an array element. */
struct frame {
    bool in_object, has_key;
    size_t key_offset, key_length; /* the current member's decoded key, in the arena */
    uint64_t index;                /* the current element of an array */
};

/* The keys of one object so far: decoded bytes in the arena, found again by hash. */
struct key_entry {
    size_t offset, length; /* in the arena */
    size_t at;             /* the byte of its opening quote */
};

struct object_keys {
    struct key_entry *entries;
    size_t count, capacity;
    uint32_t *slots; /* entry index + 1, 0 empty; a power of two of them */
    size_t slot_count;
};

struct scanner {
    const unsigned char *text;
    size_t size, at;
    unsigned flags;
    const char *what;
    struct audit_error *err;
    struct frame frames[JSON_STRICT_MAX_DEPTH];
    int depth;
    char *arena; /* decoded keys of the open objects, innermost last */
    size_t arena_used, arena_capacity;
};

/* ---- messages -------------------------------------------------------------------------------- */

static void append(char *out, size_t size, size_t *used, const char *format, ...)
    __attribute__((format(printf, 4, 5)));

static void append(char *out, size_t size, size_t *used, const char *format, ...)
{
    if (*used >= size)
        return;
    va_list args;
    va_start(args, format);
    int n = vsnprintf(out + *used, size - *used, format, args);
    va_end(args);
    *used = n < 0 ? size : *used + (size_t)n;
}

static bool is_identifier(const char *key, size_t length)
{
    if (length == 0 || (key[0] >= '0' && key[0] <= '9'))
        return false;
    for (size_t i = 0; i < length; i++) {
        char c = key[i];
        if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
              c == '_'))
            return false;
    }
    return true;
}

/* "$", then ".key", ["odd key"] or [index] per open container. */
static void render_path(const struct scanner *s, char *out, size_t size)
{
    size_t used = 0;
    append(out, size, &used, "$");
    for (int d = 0; d < s->depth; d++) {
        const struct frame *frame = &s->frames[d];
        if (!frame->in_object) {
            append(out, size, &used, "[%" PRIu64 "]", frame->index);
            continue;
        }
        if (!frame->has_key)
            break;
        const char *key = s->arena + frame->key_offset;
        if (is_identifier(key, frame->key_length)) {
            append(out, size, &used, ".%.*s", (int)frame->key_length, key);
            continue;
        }
        append(out, size, &used, "[\"");
        size_t shown = frame->key_length < KEY_SHOWN_BYTES ? frame->key_length : KEY_SHOWN_BYTES;
        for (size_t i = 0; i < shown; i++) {
            unsigned char c = (unsigned char)key[i];
            if (c < 0x20 || c == 0x7F || c == '"' || c == '\\')
                append(out, size, &used, "\\u%04x", c);
            else
                append(out, size, &used, "%c", c);
        }
        append(out, size, &used, "%s\"]", shown < frame->key_length ? "..." : "");
    }
    if (used >= size && size > 4)
        memcpy(out + size - 4, "...", 4);
}

static int refuse(struct scanner *s, size_t at, const char *format, ...)
    __attribute__((format(printf, 3, 4)));

static int refuse(struct scanner *s, size_t at, const char *format, ...)
{
    char path[PATH_BYTES], reason[384];
    va_list args;
    va_start(args, format);
    vsnprintf(reason, sizeof(reason), format, args);
    va_end(args);
    render_path(s, path, sizeof(path));
    return audit_fail(s->err, AUDIT_EDATA, "%s: byte %zu, at %s: %s", s->what, at, path, reason);
}

/* "'x'" for a printable ASCII byte, else "byte 0xNN"; the end of the text says so. */
static const char *describe(const struct scanner *s, size_t at, char *out, size_t size)
{
    if (at >= s->size)
        snprintf(out, size, "the end of the text");
    else if (s->text[at] > 0x20 && s->text[at] < 0x7F)
        snprintf(out, size, "'%c'", s->text[at]);
    else
        snprintf(out, size, "byte 0x%02x", s->text[at]);
    return out;
}

static int oom(struct scanner *s)
{
    return audit_fail(s->err, AUDIT_ENOMEM, "%s: out of memory reading JSON", s->what);
}

/* ---- keys ------------------------------------------------------------------------------------ */

static int arena_append(struct scanner *s, const void *bytes, size_t length)
{
    if (s->arena_used + length > s->arena_capacity) {
        size_t capacity = s->arena_capacity;
        while (capacity < s->arena_used + length)
            capacity *= 2;
        char *grown = realloc(s->arena, capacity);
        if (!grown)
            return oom(s);
        s->arena = grown;
        s->arena_capacity = capacity;
    }
    memcpy(s->arena + s->arena_used, bytes, length);
    s->arena_used += length;
    return AUDIT_OK;
}

static uint64_t key_hash(const char *key, size_t length)
{
    uint64_t hash = 0xcbf29ce484222325ull; /* FNV-1a */
    for (size_t i = 0; i < length; i++)
        hash = (hash ^ (unsigned char)key[i]) * 0x100000001b3ull;
    return hash;
}

static void slots_insert(const struct scanner *s, struct object_keys *keys, size_t entry)
{
    const struct key_entry *e = &keys->entries[entry];
    size_t slot = (size_t)key_hash(s->arena + e->offset, e->length) & (keys->slot_count - 1);
    while (keys->slots[slot])
        slot = (slot + 1) & (keys->slot_count - 1);
    keys->slots[slot] = (uint32_t)(entry + 1);
}

/* Adds the key just decoded at arena offset..+length. 1 with *first_at when the object already
 * has it, 0 when added, AUDIT_ENOMEM. */
static int keys_add(struct scanner *s, struct object_keys *keys, size_t offset, size_t length,
                    size_t at, size_t *first_at)
{
    const char *key = s->arena + offset;
    if (keys->slot_count) {
        size_t slot = (size_t)key_hash(key, length) & (keys->slot_count - 1);
        for (; keys->slots[slot]; slot = (slot + 1) & (keys->slot_count - 1)) {
            const struct key_entry *e = &keys->entries[keys->slots[slot] - 1];
            if (e->length == length && memcmp(s->arena + e->offset, key, length) == 0) {
                *first_at = e->at;
                return 1;
            }
        }
    }
    if (keys->count == keys->capacity) {
        size_t capacity = keys->capacity ? 2 * keys->capacity : 8;
        struct key_entry *grown = realloc(keys->entries, capacity * sizeof(*grown));
        if (!grown)
            return oom(s);
        keys->entries = grown;
        keys->capacity = capacity;
    }
    keys->entries[keys->count++] = (struct key_entry){ offset, length, at };
    if (2 * keys->count > keys->slot_count) {
        size_t slot_count = keys->slot_count ? 2 * keys->slot_count : 16;
        uint32_t *slots = calloc(slot_count, sizeof(*slots));
        if (!slots)
            return oom(s);
        free(keys->slots);
        keys->slots = slots;
        keys->slot_count = slot_count;
        for (size_t i = 0; i < keys->count; i++)
            slots_insert(s, keys, i);
    } else {
        slots_insert(s, keys, keys->count - 1);
    }
    return 0;
}

/* ---- tokens ---------------------------------------------------------------------------------- */

static void skip_space(struct scanner *s)
{
    while (s->at < s->size && (s->text[s->at] == ' ' || s->text[s->at] == '\t' ||
                               s->text[s->at] == '\n' || s->text[s->at] == '\r'))
        s->at++;
}

static int hex4(const struct scanner *s, size_t at, uint32_t *value)
{
    *value = 0;
    if (at + 4 > s->size)
        return -1;
    for (size_t i = 0; i < 4; i++) {
        unsigned char c = s->text[at + i];
        uint32_t digit = c >= '0' && c <= '9'   ? (uint32_t)(c - '0')
                         : c >= 'a' && c <= 'f' ? (uint32_t)(c - 'a' + 10)
                         : c >= 'A' && c <= 'F' ? (uint32_t)(c - 'A' + 10)
                                                : 16;
        if (digit == 16)
            return -1;
        *value = *value << 4 | digit;
    }
    return 0;
}

static int append_code_point(struct scanner *s, uint32_t code)
{
    unsigned char bytes[4];
    size_t length;
    if (code < 0x80) {
        bytes[0] = (unsigned char)code;
        length = 1;
    } else if (code < 0x800) {
        bytes[0] = (unsigned char)(0xC0 | code >> 6);
        bytes[1] = (unsigned char)(0x80 | (code & 0x3F));
        length = 2;
    } else if (code < 0x10000) {
        bytes[0] = (unsigned char)(0xE0 | code >> 12);
        bytes[1] = (unsigned char)(0x80 | (code >> 6 & 0x3F));
        bytes[2] = (unsigned char)(0x80 | (code & 0x3F));
        length = 3;
    } else {
        bytes[0] = (unsigned char)(0xF0 | code >> 18);
        bytes[1] = (unsigned char)(0x80 | (code >> 12 & 0x3F));
        bytes[2] = (unsigned char)(0x80 | (code >> 6 & 0x3F));
        bytes[3] = (unsigned char)(0x80 | (code & 0x3F));
        length = 4;
    }
    return arena_append(s, bytes, length);
}

/* A \u escape at s->at (the backslash); with decode (a key), its code point goes to the arena. */
static int scan_unicode_escape(struct scanner *s, bool decode)
{
    size_t escape = s->at;
    uint32_t unit, low;
    if (hex4(s, escape + 2, &unit) < 0)
        return refuse(s, escape, "\\u needs four hex digits");
    s->at += 6;
    if (unit == 0)
        return refuse(s, escape, "\\u0000 (NUL) in a %s: refused, as cJSON's strings end there",
                      decode ? "key" : "string");
    if (unit >= 0xDC00 && unit <= 0xDFFF)
        return refuse(s, escape, "\\u%04X is a UTF-16 low surrogate without a high one before it",
                      unit);
    if (unit >= 0xD800 && unit <= 0xDBFF) {
        if (s->at + 1 >= s->size || s->text[s->at] != '\\' || s->text[s->at + 1] != 'u' ||
            hex4(s, s->at + 2, &low) < 0 || low < 0xDC00 || low > 0xDFFF)
            return refuse(s, escape, "\\u%04X is a UTF-16 high surrogate without a low one after it",
                          unit);
        s->at += 6;
        unit = 0x10000 + ((unit - 0xD800) << 10) + (low - 0xDC00);
    }
    return decode ? append_code_point(s, unit) : AUDIT_OK;
}

/* The string at s->at (its opening quote); with decode (a key), its bytes go to the arena. */
static int scan_string(struct scanner *s, bool decode)
{
    static const char simple_escapes[] = "\"\\/bfnrt";
    static const char simple_values[] = "\"\\/\b\f\n\r\t";
    size_t open = s->at++;
    int status = AUDIT_OK;
    while (status == AUDIT_OK) {
        if (s->at >= s->size)
            return refuse(s, open, "the string never ends (no closing quote)");
        unsigned char c = s->text[s->at];
        if (c == '"') {
            s->at++;
            return AUDIT_OK;
        }
        if (c < 0x20)
            return refuse(s, s->at, "control character U+%04X written raw in a %s (JSON needs "
                          "it escaped, as \\u%04X)", c, decode ? "key" : "string", c);
        if (c == '\\') {
            unsigned char next = s->at + 1 < s->size ? s->text[s->at + 1] : 0;
            const char *simple = next ? strchr(simple_escapes, next) : NULL;
            if (next == 'u') {
                status = scan_unicode_escape(s, decode);
            } else if (simple) {
                s->at += 2;
                if (decode)
                    status = arena_append(s, &simple_values[simple - simple_escapes], 1);
            } else {
                char shown[32];
                return refuse(s, s->at, "unknown escape: a backslash before %s",
                              describe(s, s->at + 1, shown, sizeof(shown)));
            }
            continue;
        }
        size_t length = utf8_sequence_length(s->text + s->at, s->size - s->at);
        if (length == 0)
            return refuse(s, s->at, "byte 0x%02x is not UTF-8 here", c);
        if (decode)
            status = arena_append(s, s->text + s->at, length);
        s->at += length;
    }
    return status;
}

static bool is_digit(const struct scanner *s, size_t at)
{
    return at < s->size && s->text[at] >= '0' && s->text[at] <= '9';
}

/* The number at s->at; *integer_digits: it is digits only (no sign, fraction or exponent). */
static int scan_number(struct scanner *s, bool *digits_only)
{
    size_t start = s->at, p = start;
    char shown[32];
    if (s->text[p] == '-')
        p++;
    if (!is_digit(s, p))
        return refuse(s, p, "a digit must follow '-', not %s", describe(s, p, shown, sizeof(shown)));
    if (s->text[p] == '0') {
        p++;
        if (is_digit(s, p))
            return refuse(s, start, "a number with a leading zero");
    } else {
        while (is_digit(s, p))
            p++;
    }
    *digits_only = s->text[start] != '-';
    if (p < s->size && s->text[p] == '.') {
        p++;
        if (!is_digit(s, p))
            return refuse(s, p, "a decimal point must be followed by a digit, not %s",
                          describe(s, p, shown, sizeof(shown)));
        while (is_digit(s, p))
            p++;
        *digits_only = false;
    }
    if (p < s->size && (s->text[p] == 'e' || s->text[p] == 'E')) {
        p++;
        if (p < s->size && (s->text[p] == '+' || s->text[p] == '-'))
            p++;
        if (!is_digit(s, p))
            return refuse(s, p, "an exponent needs digits, not %s",
                          describe(s, p, shown, sizeof(shown)));
        while (is_digit(s, p))
            p++;
        *digits_only = false;
    }
    size_t length = p - start;
    char small[64];
    char *copy = length < sizeof(small) ? small : malloc(length + 1);
    if (!copy)
        return oom(s);
    memcpy(copy, s->text + start, length);
    copy[length] = '\0';
    double value = strtod(copy, NULL);
    if (copy != small)
        free(copy);
    if (isinf(value))
        return refuse(s, start, "the number %.*s%s overflows a double (its magnitude is above "
                      "1.8e308)", (int)(length < NUMBER_SHOWN_BYTES ? length : NUMBER_SHOWN_BYTES),
                      (const char *)s->text + start, length > NUMBER_SHOWN_BYTES ? "..." : "");
    s->at = p;
    return AUDIT_OK;
}

static int scan_literal(struct scanner *s)
{
    static const char *const literals[] = { "true", "false", "null" };
    for (size_t i = 0; i < sizeof(literals) / sizeof(literals[0]); i++) {
        size_t length = strlen(literals[i]);
        if (s->size - s->at >= length && memcmp(s->text + s->at, literals[i], length) == 0) {
            s->at += length;
            return AUDIT_OK;
        }
    }
    char shown[32];
    return refuse(s, s->at, "%s where a value was expected (JSON values are objects, arrays, "
                  "strings, numbers, true, false and null)", describe(s, s->at, shown, sizeof(shown)));
}

/* ---- values ---------------------------------------------------------------------------------- */

static int scan_value(struct scanner *s, bool schema_version);

static int open_container(struct scanner *s, bool in_object)
{
    if (s->depth >= JSON_STRICT_MAX_DEPTH)
        return refuse(s, s->at, "nested deeper than %d objects and arrays", JSON_STRICT_MAX_DEPTH);
    s->frames[s->depth++] = (struct frame){ .in_object = in_object };
    s->at++;
    return AUDIT_OK;
}

/* After a member or element: ',' (not before the closing bracket) or the closing bracket.
 * Returns 1 at the close, 0 for another, or a refusal. */
static int next_or_close(struct scanner *s, char close, size_t open, const char *what)
{
    char shown[32];
    skip_space(s);
    if (s->at >= s->size)
        return refuse(s, s->at, "the text ends inside the %s opened at byte %zu", what, open);
    if (s->text[s->at] == close) {
        s->at++;
        return 1;
    }
    if (s->text[s->at] != ',')
        return refuse(s, s->at, "',' or '%c' expected after the %s, not %s", close,
                      close == '}' ? "member" : "element", describe(s, s->at, shown, sizeof(shown)));
    size_t comma = s->at++;
    skip_space(s);
    if (s->at < s->size && s->text[s->at] == close)
        return refuse(s, comma, "a comma before '%c' (JSON has no trailing comma)", close);
    return 0;
}

static int scan_member(struct scanner *s, struct frame *frame, struct object_keys *keys)
{
    char shown[32];
    size_t first_at = 0;
    if (s->at >= s->size)
        return refuse(s, s->at, "the text ends where a key (a string) was expected");
    if (s->text[s->at] != '"')
        return refuse(s, s->at, "%s where a key (a string) was expected",
                      describe(s, s->at, shown, sizeof(shown)));
    size_t key_at = s->at, key_offset = s->arena_used;
    int status = scan_string(s, true);
    if (status < 0)
        return status;
    frame->has_key = true;
    frame->key_offset = key_offset;
    frame->key_length = s->arena_used - key_offset;
    status = keys_add(s, keys, key_offset, frame->key_length, key_at, &first_at);
    if (status < 0)
        return status;
    if (status == 1)
        return refuse(s, key_at, "duplicate key (first at byte %zu)", first_at);
    skip_space(s);
    if (s->at >= s->size || s->text[s->at] != ':')
        return refuse(s, s->at, "':' expected after the key, not %s",
                      describe(s, s->at, shown, sizeof(shown)));
    s->at++;
    bool schema_version = (s->flags & JSON_STRICT_SCHEMA_VERSION) && s->depth == 1 &&
                          frame->key_length == strlen(KEY_SCHEMA_VERSION) &&
                          memcmp(s->arena + key_offset, KEY_SCHEMA_VERSION, frame->key_length) == 0;
    return scan_value(s, schema_version);
}

static int scan_object(struct scanner *s)
{
    size_t open = s->at, arena_mark = s->arena_used;
    struct object_keys keys = { 0 };
    int status = open_container(s, true);
    if (status < 0)
        return status;
    struct frame *frame = &s->frames[s->depth - 1];
    skip_space(s);
    if (s->at < s->size && s->text[s->at] == '}') {
        s->at++;
    } else {
        do {
            skip_space(s);
            frame->has_key = false; /* until the next key is read, the path is the object's */
            status = scan_member(s, frame, &keys);
            if (status == AUDIT_OK)
                status = next_or_close(s, '}', open, "object");
        } while (status == 0);
    }
    free(keys.entries);
    free(keys.slots);
    s->arena_used = arena_mark;
    s->depth--;
    return status < 0 ? status : AUDIT_OK;
}

static int scan_array(struct scanner *s)
{
    size_t open = s->at;
    int status = open_container(s, false);
    if (status < 0)
        return status;
    struct frame *frame = &s->frames[s->depth - 1];
    skip_space(s);
    if (s->at < s->size && s->text[s->at] == ']') {
        s->at++;
    } else {
        do {
            status = scan_value(s, false);
            if (status == AUDIT_OK)
                status = next_or_close(s, ']', open, "array");
            if (status == 0)
                frame->index++;
        } while (status == 0);
    }
    s->depth--;
    return status < 0 ? status : AUDIT_OK;
}

static int scan_value(struct scanner *s, bool schema_version)
{
    skip_space(s);
    if (s->at >= s->size)
        return refuse(s, s->at, "the text ends where a value was expected");
    unsigned char c = s->text[s->at];
    if (c == '{')
        return scan_object(s);
    if (c == '[')
        return scan_array(s);
    if (c == '"')
        return scan_string(s, false);
    if (c == '-' || (c >= '0' && c <= '9')) {
        size_t start = s->at;
        bool digits_only = false;
        int status = scan_number(s, &digits_only);
        /* Only the spelling: which versions a reader takes is its own check
         * (document_schema_check), so that a large version reads as newer, not malformed. */
        if (status == AUDIT_OK && schema_version && !digits_only)
            return refuse(s, start, "schema_version %.*s is not an integer (digits only: no "
                          "sign, fraction or exponent)",
                          (int)(s->at - start < 24 ? s->at - start : 24),
                          (const char *)s->text + start);
        return status;
    }
    return scan_literal(s);
}

int json_strict_parse(const char *text, size_t size, const char *what, unsigned flags,
                      cJSON **json, struct audit_error *err)
{
    struct scanner *s = calloc(1, sizeof(*s));
    /* The arena is never NULL, so that an empty first key is a valid pointer to no byte. */
    char *arena = malloc(256);
    int status;
    *json = NULL;
    if (!s || !arena) {
        free(arena);
        free(s);
        return audit_fail(err, AUDIT_ENOMEM, "%s: out of memory reading JSON", what);
    }
    s->arena = arena;
    s->arena_capacity = 256;
    s->text = (const unsigned char *)text;
    s->size = size;
    s->flags = flags;
    s->what = what;
    s->err = err;
    if (size >= 3 && memcmp(text, "\xEF\xBB\xBF", 3) == 0) {
        status = refuse(s, 0, "a UTF-8 byte-order mark: JSON text starts without one");
        goto done;
    }
    skip_space(s);
    if (s->at >= size) {
        status = refuse(s, s->at, "no JSON value (the text is empty or only white space)");
        goto done;
    }
    status = scan_value(s, false);
    if (status < 0)
        goto done;
    skip_space(s);
    if (s->at < size) {
        status = refuse(s, s->at, "more after the JSON value (a second document, or garbage): "
                        "one value per text");
        goto done;
    }
    *json = cJSON_ParseWithLength(text, size);
    /* The scan accepted it, and cJSON reads every text the scan accepts: a NULL is memory. */
    if (!*json)
        status = audit_fail(err, AUDIT_ENOMEM, "%s: out of memory parsing JSON", what);
done:
    free(s->arena);
    free(s);
    return status;
}
