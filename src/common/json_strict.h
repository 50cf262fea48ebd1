/* The one JSON dialect every reader of this tool accepts (docs/FORMAT.md "JSON"): RFC 8259,
 * strictly, with the limits cJSON needs to hold a document without changing it.
 *
 * json_strict_parse() scans the text first and refuses, naming the byte and the JSON path:
 * anything but one value surrounded by white space (trailing garbage, a second document, an
 * empty text, a byte-order mark); a duplicate key in an object (compared after unescaping);
 * a control character (U+0000..U+001F) written raw in a string, \u0000 anywhere (cJSON's strings
 * end at NUL), an unpaired UTF-16 surrogate escape, an unknown escape; bytes that are not UTF-8;
 * a number that overflows a double (1e999 would otherwise become null), leading zeros, a bare
 * or trailing decimal point, a leading '+'; nesting deeper than JSON_STRICT_MAX_DEPTH. Only then
 * does cJSON parse it. With JSON_STRICT_SCHEMA_VERSION, the top-level member "schema_version"
 * (where present) must also be written as an integer in digits alone: no sign, fraction or
 * exponent ("1.0", "1e0" and "-0" are refused). */
#ifndef DSATOPK_JSON_STRICT_H
#define DSATOPK_JSON_STRICT_H

#include <stddef.h>

#include <cjson/cJSON.h>

#include "error.h"

#define JSON_STRICT_MAX_DEPTH 256

enum json_strict_flags {
    JSON_STRICT_SCHEMA_VERSION = 1, /* a document of this tool: its schema_version as above */
};

/* Parses size bytes of text (NULs inside are refused as any control character) into *json.
 * what names the text in messages: a file name, "metadata", "--metadata". Refusals return
 * AUDIT_EDATA with "WHAT: byte N, at $.PATH: reason" (N counted from 0 at the text's first
 * byte); AUDIT_ENOMEM when out of memory. */
int json_strict_parse(const char *text, size_t size, const char *what, unsigned flags,
                      cJSON **json, struct audit_error *err);

#endif
