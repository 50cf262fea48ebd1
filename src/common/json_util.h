/* cJSON helpers shared by every command that writes JSON: numbers that never become NaN or
 * Infinity tokens, 64-bit counts, whole-document writes (src/common/output_file.h) and reads
 * (src/common/input_file.h). */
#ifndef DSATOPK_JSON_UTIL_H
#define DSATOPK_JSON_UTIL_H

#include <stdint.h>
#include <stdio.h>

#include <cjson/cJSON.h>

#include "error.h"

/* Adds a number; NaN and +-inf become null (JSON has no token for them). */
cJSON *json_add_number(cJSON *object, const char *name, double value);
/* Adds a float as a number (null when not finite) and its bits as "NAME_bits": "0x........",
 * so -0.0, NaN payloads and infinities survive the trip through JSON. */
void json_add_float_exact(cJSON *object, const char *name, float value);
cJSON *json_add_u64(cJSON *object, const char *name, uint64_t value);
cJSON *json_add_hex(cJSON *object, const char *name, const uint8_t *bytes, size_t size);

/* Writes text to path by the rules of output_file.h: "-" is stdout, devices and FIFOs are
 * written through, anything else is replaced only once the new text is complete. */
int json_write_text_atomic(const char *path, const char *text, struct audit_error *err);
/* Prints json (formatted) and writes it atomically to path. */
int json_write_file(const char *path, const cJSON *json, struct audit_error *err);

/* Renders document as formatted JSON with a final newline (table == NULL) or as the text table()
 * prints. Returns a malloc'ed string, NULL when out of memory. */
char *json_render(const cJSON *document, void (*table)(FILE *out, const cJSON *document));

/* The largest JSON document read. */
#define JSON_MAX_DOCUMENT_BYTES ((uint64_t)1 << 30)

/* Reads (input_file_read_all: regular files only, never blocking on a FIFO) and parses a whole
 * JSON document of this tool (a report, baseline, verdict, policy, census ...) in the strict
 * dialect of json_strict.h, its schema_version written in digits; AUDIT_EDATA names the file, the
 * byte and the JSON path of the fault. */
int json_read_file(const char *path, cJSON **json_out, struct audit_error *err);
/* The same for any JSON value (import --metadata @FILE): schema_version is just a key. */
int json_read_value_file(const char *path, cJSON **json_out, struct audit_error *err);

#endif
