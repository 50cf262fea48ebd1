/* The .safetensors reader and the array-file loader (see safetensors.h). */
#include "safetensors.h"

#include <cjson/cJSON.h>
#include <errno.h>
#include <inttypes.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "json_strict.h"
#include "tensor_kind.h"

/* Doubles, which cJSON stores numbers as, hold every integer up to 2^53 exactly. */
#define JSON_EXACT_INTEGER_LIMIT 9007199254740992.0

static uint64_t load_u64_le(const uint8_t *p)
{
    uint64_t value = 0;
    for (int i = 7; i >= 0; i--)
        value = (value << 8) | p[i];
    return value;
}

static bool json_exact_uint(const cJSON *item, uint64_t *value)
{
    if (!cJSON_IsNumber(item))
        return false;
    double number = item->valuedouble;
    if (!(number >= 0.0) || number > JSON_EXACT_INTEGER_LIMIT)
        return false;
    uint64_t integer = (uint64_t)number;
    if ((double)integer != number)
        return false;
    *value = integer;
    return true;
}

static int interpret_dtype(const char *dtype, struct host_tensor *out, const char *label,
                           const char *name, struct audit_error *err)
{
    static const struct {
        const char *spelling;
        enum tensor_dtype dtype;
    } known[] = {
        { "F32", TENSOR_DTYPE_F32 },   { "F16", TENSOR_DTYPE_F16 }, { "BF16", TENSOR_DTYPE_BF16 },
        { "I32", TENSOR_DTYPE_I32 },   { "I64", TENSOR_DTYPE_I64 },
    };
    for (size_t i = 0; i < sizeof(known) / sizeof(known[0]); i++) {
        if (strcmp(dtype, known[i].spelling) == 0) {
            out->dtype = known[i].dtype;
            snprintf(out->dtype_spelling, sizeof(out->dtype_spelling), "%s", dtype);
            return AUDIT_OK;
        }
    }
    return audit_fail(err, AUDIT_EDATA,
                      "%s: tensor '%s': field 'dtype' is '%.32s': unsupported dtype (supported: "
                      "F32, F16, BF16, I32, I64)",
                      label, name, dtype);
}

/* "a, b, c, ... (12 in all)": the names a file holds, for messages. */
static void list_tensor_names(const cJSON *header, char *out, size_t size)
{
    size_t used = 0;
    int listed = 0, total = 0;
    out[0] = '\0';
    for (const cJSON *entry = header->child; entry; entry = entry->next) {
        if (!entry->string || strcmp(entry->string, "__metadata__") == 0)
            continue;
        total++;
        if (listed < 8 && used + strlen(entry->string) + 8 < size) {
            used += (size_t)snprintf(out + used, size - used, "%s'%s'", listed ? ", " : "",
                                     entry->string);
            listed++;
        }
    }
    if (total > listed && used < size)
        snprintf(out + used, size - used, ", ... (%d in all)", total);
}

/* Checks one entry against the data area; *data_begin receives its offset in that area. */
static int check_entry(const cJSON *entry, const char *label, const char *name, size_t data_size,
                       struct host_tensor *out, uint64_t *data_begin, struct audit_error *err)
{
    if (!cJSON_IsObject(entry))
        return audit_fail(err, AUDIT_EDATA, "%s: tensor '%s': entry is not a JSON object", label,
                          name);
    const cJSON *dtype = cJSON_GetObjectItemCaseSensitive(entry, "dtype");
    const cJSON *shape = cJSON_GetObjectItemCaseSensitive(entry, "shape");
    const cJSON *offsets = cJSON_GetObjectItemCaseSensitive(entry, "data_offsets");
    if (!cJSON_IsString(dtype))
        return audit_fail(err, AUDIT_EDATA, "%s: tensor '%s': field 'dtype' is missing or not a "
                          "string", label, name);
    int status = interpret_dtype(dtype->valuestring, out, label, name, err);
    if (status < 0)
        return status;

    if (!cJSON_IsArray(shape))
        return audit_fail(err, AUDIT_EDATA, "%s: tensor '%s': field 'shape' is missing or not an "
                          "array", label, name);
    int ndim = cJSON_GetArraySize(shape);
    if (ndim > TENSOR_MAX_DIMS)
        return audit_fail(err, AUDIT_EDATA, "%s: tensor '%s': field 'shape' has %d dimensions "
                          "(at most %d)", label, name, ndim, TENSOR_MAX_DIMS);
    out->ndim = ndim;
    uint64_t elements = 1;
    int d = 0;
    for (const cJSON *extent = shape->child; extent; extent = extent->next, d++) {
        if (!json_exact_uint(extent, &out->shape[d]))
            return audit_fail(err, AUDIT_EDATA, "%s: tensor '%s': field 'shape': dimension %d is "
                              "not a non-negative integer", label, name, d);
        if (out->shape[d] && elements > UINT64_MAX / out->shape[d])
            return audit_fail(err, AUDIT_EDATA, "%s: tensor '%s': field 'shape': too many "
                              "elements", label, name);
        elements *= out->shape[d];
    }

    uint64_t begin, end;
    if (!cJSON_IsArray(offsets) || cJSON_GetArraySize(offsets) != 2 ||
        !json_exact_uint(cJSON_GetArrayItem(offsets, 0), &begin) ||
        !json_exact_uint(cJSON_GetArrayItem(offsets, 1), &end))
        return audit_fail(err, AUDIT_EDATA, "%s: tensor '%s': field 'data_offsets' must be "
                          "[begin, end] with non-negative integers", label, name);
    if (begin > end || end > data_size)
        return audit_fail(err, AUDIT_EDATA,
                          "%s: tensor '%s': field 'data_offsets' [%" PRIu64 ", %" PRIu64 "] is "
                          "out of range: the data area holds %zu bytes",
                          label, name, begin, end, data_size);
    size_t item = tensor_dtype_size(out->dtype);
    if (elements > (end - begin) / item || elements * item != end - begin)
        return audit_fail(err, AUDIT_EDATA,
                          "%s: tensor '%s': field 'data_offsets' spans %" PRIu64 " bytes but "
                          "field 'shape' x dtype %s needs %" PRIu64 " x %zu",
                          label, name, end - begin, out->dtype_spelling, elements, item);
    out->elements = elements;
    *data_begin = begin;
    return AUDIT_OK;
}

int safetensors_parse(const uint8_t *bytes, size_t size, const char *label,
                      const char *tensor_name, struct host_tensor *out, struct audit_error *err)
{
    int status = AUDIT_OK;
    cJSON *header = NULL;
    memset(out, 0, sizeof(*out));
    out->format = "safetensors";

    if (size < 8)
        return audit_fail(err, AUDIT_EDATA, "%s: truncated: the file ends inside the 8-byte "
                          "safetensors header length", label);
    uint64_t header_length = load_u64_le(bytes);
    if (header_length > SAFETENSORS_MAX_HEADER_BYTES)
        return audit_fail(err, AUDIT_EDATA,
                          "%s: safetensors header length %" PRIu64 " is too long (at most %llu "
                          "bytes)",
                          label, header_length, SAFETENSORS_MAX_HEADER_BYTES);
    if (header_length > size - 8)
        return audit_fail(err, AUDIT_EDATA,
                          "%s: truncated: the safetensors header is %" PRIu64 " bytes but the file "
                          "has %zu after the length",
                          label, header_length, size - 8);
    const char *text = (const char *)bytes + 8;
    size_t text_length = (size_t)header_length;
    size_t first = 0;
    while (first < text_length && (text[first] == ' ' || text[first] == '\n' ||
                                   text[first] == '\t' || text[first] == '\r'))
        first++;
    if (first >= text_length || text[first] != '{')
        return audit_fail(err, AUDIT_EDATA, "%s: safetensors header is not a JSON object (bad "
                          "header length or not a .safetensors file)", label);
    /* The format pads the header with spaces so that the data area is aligned: white space
     * after the object, which the strict dialect allows. Bytes count from the header's first. */
    char what[600];
    snprintf(what, sizeof(what), "%s: safetensors header", label);
    status = json_strict_parse(text, text_length, what, 0, &header, err);
    if (status < 0)
        return status;
    if (!cJSON_IsObject(header)) {
        status = audit_fail(err, AUDIT_EDATA, "%s: safetensors header is not a JSON object", label);
        goto error;
    }

    const cJSON *chosen = NULL;
    int tensors = 0; /* names are unique: json_strict_parse refuses a duplicate key */
    for (const cJSON *entry = header->child; entry; entry = entry->next) {
        if (!entry->string)
            continue;
        if (strcmp(entry->string, "__metadata__") == 0) {
            if (!cJSON_IsObject(entry)) {
                status = audit_fail(err, AUDIT_EDATA, "%s: safetensors field '__metadata__' is "
                                    "not an object", label);
                goto error;
            }
            free(out->safetensors_metadata_json);
            out->safetensors_metadata_json = cJSON_PrintUnformatted(entry);
            if (!out->safetensors_metadata_json) {
                status = audit_fail(err, AUDIT_ENOMEM, "%s: out of memory", label);
                goto error;
            }
            continue;
        }
        tensors++;
        if (tensor_name ? strcmp(entry->string, tensor_name) == 0 : tensors == 1)
            chosen = entry;
    }
    if (!chosen || (!tensor_name && tensors > 1)) {
        char names[512];
        list_tensor_names(header, names, sizeof(names));
        if (tensors == 0)
            status = audit_fail(err, AUDIT_EDATA, "%s: the safetensors file holds no tensor",
                                label);
        else if (tensor_name)
            status = audit_fail(err, AUDIT_EDATA, "%s: no tensor '%s' (the file holds %s)", label,
                                tensor_name, names);
        else
            status = audit_fail(err, AUDIT_EDATA, "%s: the file holds %d tensors (%s): choose one "
                                "with FILE:TENSOR", label, tensors, names);
        goto error;
    }

    size_t data_start = 8 + text_length;
    size_t data_size = size - data_start;
    uint64_t data_begin = 0;
    if ((status = check_entry(chosen, label, chosen->string, data_size, out, &data_begin, err)) < 0)
        goto error;
    out->data = bytes + data_start + (size_t)data_begin;
    /* Provenance: the tensor name is recorded even when it was chosen as the only one. */
    if (!(out->label = malloc(strlen(label) + 1))) {
        status = audit_fail(err, AUDIT_ENOMEM, "%s: out of memory", label);
        goto error;
    }
    strcpy(out->label, label);
    if ((status = host_tensor_set_provenance(out, NULL, chosen->string, err)) < 0)
        goto error;
    cJSON_Delete(header);
    return AUDIT_OK;
error:
    cJSON_Delete(header);
    host_tensor_free(out);
    return status;
}

static bool is_regular_file(const char *path)
{
    struct stat info;
    return stat(path, &info) == 0 && S_ISREG(info.st_mode);
}

/* Reads path and parses it with the reader its first bytes call for (with detect, else as
 * safetensors); a file neither reader takes is refused saying what it looks like. */
static int load_file(const char *path, const char *tensor_name, bool detect,
                     struct host_tensor *out, struct audit_error *err)
{
    uint8_t *bytes = NULL;
    size_t size = 0;
    int status = tensor_read_file_bytes(path, &bytes, &size, err);
    memset(out, 0, sizeof(*out));
    if (status < 0)
        return status;
    enum tensor_kind kind = detect ? tensor_kind_sniff(bytes, size) : TENSOR_KIND_SAFETENSORS;
    if (kind != TENSOR_KIND_NPY && kind != TENSOR_KIND_SAFETENSORS) {
        char looks[400];
        tensor_kind_describe(kind, bytes, size, looks, sizeof(looks));
        status = audit_fail(err, AUDIT_EDATA, "%s: %s", path, looks);
        goto error;
    }
    bool is_npy = kind == TENSOR_KIND_NPY;
    if (is_npy && tensor_name) {
        status = audit_fail(err, AUDIT_EUSAGE, "%s:%s: a .npy file holds one array; ':TENSOR' "
                            "selects a tensor of a .safetensors file", path, tensor_name);
        goto error;
    }
    if (is_npy)
        status = npy_parse(bytes, size, path, out, err);
    else
        status = safetensors_parse(bytes, size, path, tensor_name, out, err);
    if (status < 0)
        goto error;
    out->storage = bytes;
    hash_bytes(bytes, size, out->file_sha256);
    if ((status = host_tensor_set_provenance(out, path, out->tensor_name, err)) < 0) {
        host_tensor_free(out);
        return status;
    }
    return AUDIT_OK;
error:
    free(bytes);
    return status;
}

int safetensors_read_file(const char *path, const char *tensor_name, struct host_tensor *out,
                          struct audit_error *err)
{
    return load_file(path, tensor_name, false, out, err);
}

int tensor_file_load(const char *spec, struct host_tensor *out, struct audit_error *err)
{
    memset(out, 0, sizeof(*out));
    if (is_regular_file(spec))
        return load_file(spec, NULL, true, out, err);
    size_t length = strlen(spec);
    char *path = malloc(length + 1);
    if (!path)
        return audit_fail(err, AUDIT_ENOMEM, "%s: out of memory", spec);
    for (size_t colon = 0; colon < length; colon++) {
        if (spec[colon] != ':')
            continue;
        memcpy(path, spec, colon);
        path[colon] = '\0';
        if (colon == 0 || !is_regular_file(path))
            continue;
        int status;
        if (spec[colon + 1] == '\0')
            status = audit_fail(err, AUDIT_EUSAGE, "%s: empty tensor name after ':'", spec);
        else
            status = load_file(path, spec + colon + 1, true, out, err);
        free(path);
        return status;
    }
    free(path);
    /* No prefix names a regular file: the reader says what spec is (missing, a FIFO, ...). */
    return load_file(spec, NULL, true, out, err);
}
