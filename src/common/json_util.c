#include "json_util.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "input_file.h"
#include "json_strict.h"
#include "output_file.h"

cJSON *json_add_number(cJSON *object, const char *name, double value)
{
    if (!isfinite(value))
        return cJSON_AddNullToObject(object, name);
    return cJSON_AddNumberToObject(object, name, value);
}

void json_add_float_exact(cJSON *object, const char *name, float value)
{
    union { float f; uint32_t u; } bits = { .f = value };
    char key[256], hex[16];
    json_add_number(object, name, (double)value);
    snprintf(key, sizeof(key), "%s_bits", name);
    snprintf(hex, sizeof(hex), "0x%08x", bits.u);
    cJSON_AddStringToObject(object, key, hex);
}

cJSON *json_add_u64(cJSON *object, const char *name, uint64_t value)
{
    /* Doubles hold integers exactly up to 2^53: every count this tool produces. */
    return cJSON_AddNumberToObject(object, name, (double)value);
}

cJSON *json_add_hex(cJSON *object, const char *name, const uint8_t *bytes, size_t size)
{
    char *hex = malloc(size * 2 + 1);
    if (!hex)
        return NULL;
    for (size_t i = 0; i < size; i++)
        snprintf(hex + 2 * i, 3, "%02x", bytes[i]);
    cJSON *item = cJSON_AddStringToObject(object, name, hex);
    free(hex);
    return item;
}

int json_write_text_atomic(const char *path, const char *text, struct audit_error *err)
{
    return output_file_write_all(path, text, strlen(text), err);
}

char *json_render(const cJSON *document, void (*table)(FILE *out, const cJSON *document))
{
    if (!table) {
        char *printed = cJSON_Print(document);
        if (!printed)
            return NULL;
        size_t size = strlen(printed);
        char *text = malloc(size + 2);
        if (text) {
            memcpy(text, printed, size);
            memcpy(text + size, "\n", 2);
        }
        cJSON_free(printed);
        return text;
    }
    char *text = NULL;
    size_t size = 0;
    FILE *out = open_memstream(&text, &size);
    if (!out)
        return NULL;
    table(out, document);
    if (fclose(out) != 0) {
        free(text);
        return NULL;
    }
    return text;
}

int json_write_file(const char *path, const cJSON *json, struct audit_error *err)
{
    char *text = json_render(json, NULL);
    if (!text)
        return audit_fail(err, AUDIT_ENOMEM, "%s: out of memory formatting JSON", path);
    int status = json_write_text_atomic(path, text, err);
    free(text);
    return status;
}

static int read_strict(const char *path, unsigned flags, cJSON **json_out,
                       struct audit_error *err)
{
    uint8_t *text = NULL;
    size_t size = 0;
    *json_out = NULL;
    int status = input_file_read_all(path, JSON_MAX_DOCUMENT_BYTES, "a JSON document", &text,
                                     &size, err);
    if (status < 0)
        return status;
    status = json_strict_parse((const char *)text, size, path, flags, json_out, err);
    free(text);
    return status;
}

int json_read_file(const char *path, cJSON **json_out, struct audit_error *err)
{
    return read_strict(path, JSON_STRICT_SCHEMA_VERSION, json_out, err);
}

int json_read_value_file(const char *path, cJSON **json_out, struct audit_error *err)
{
    return read_strict(path, 0, json_out, err);
}
