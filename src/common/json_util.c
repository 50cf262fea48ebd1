#include "json_util.h"

#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

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
    size_t size = strlen(text);
    if (strcmp(path, "-") == 0) {
        if (fwrite(text, 1, size, stdout) != size || fflush(stdout) != 0)
            return audit_fail(err, AUDIT_EIO, "stdout: write failed");
        return AUDIT_OK;
    }
    char temporary[4096];
    if (snprintf(temporary, sizeof(temporary), "%s.tmp.%ld", path, (long)getpid()) >=
        (int)sizeof(temporary))
        return audit_fail(err, AUDIT_EIO, "%s: path too long", path);
    int status = AUDIT_OK;
    int fd = open(temporary, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd < 0)
        return audit_fail(err, AUDIT_EIO, "%s: cannot create: %s", temporary, strerror(errno));
    size_t written = 0;
    while (written < size) {
        ssize_t n = write(fd, text + written, size - written);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0) {
            status = audit_fail(err, AUDIT_EIO, "%s: write failed: %s", temporary, strerror(errno));
            goto error;
        }
        written += (size_t)n;
    }
    if (fsync(fd) != 0) {
        status = audit_fail(err, AUDIT_EIO, "%s: fsync failed: %s", temporary, strerror(errno));
        goto error;
    }
    if (close(fd) != 0) {
        fd = -1;
        status = audit_fail(err, AUDIT_EIO, "%s: close failed: %s", temporary, strerror(errno));
        goto error;
    }
    fd = -1;
    if (rename(temporary, path) != 0) {
        status = audit_fail(err, AUDIT_EIO, "%s: cannot rename into place: %s", path,
                            strerror(errno));
        goto error;
    }
    return AUDIT_OK;
error:
    if (fd >= 0)
        close(fd);
    unlink(temporary);
    return status;
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

int json_read_file(const char *path, cJSON **json_out, struct audit_error *err)
{
    int status = AUDIT_OK;
    char *text = NULL;
    FILE *file = fopen(path, "rb");
    *json_out = NULL;
    if (!file)
        return audit_fail(err, AUDIT_EIO, "%s: cannot open: %s", path, strerror(errno));
    if (fseek(file, 0, SEEK_END) != 0) {
        status = audit_fail(err, AUDIT_EIO, "%s: cannot seek: %s", path, strerror(errno));
        goto done;
    }
    long size = ftell(file);
    if (size < 0 || size > (1L << 30)) {
        status = audit_fail(err, AUDIT_EDATA, "%s: not a readable JSON file (size %ld)", path, size);
        goto done;
    }
    rewind(file);
    text = malloc((size_t)size + 1);
    if (!text) {
        status = audit_fail(err, AUDIT_ENOMEM, "%s: out of memory", path);
        goto done;
    }
    if (fread(text, 1, (size_t)size, file) != (size_t)size) {
        status = audit_fail(err, AUDIT_EIO, "%s: read failed", path);
        goto done;
    }
    text[size] = '\0';
    const char *parse_end = NULL;
    cJSON *json = cJSON_ParseWithLengthOpts(text, (size_t)size, &parse_end, 0);
    if (!json) {
        long at = parse_end ? (long)(parse_end - text) : 0;
        status = audit_fail(err, AUDIT_EDATA, "%s: invalid JSON near byte %ld", path, at);
        goto done;
    }
    *json_out = json;
done:
    free(text);
    fclose(file);
    return status;
}
