/* The .npy reader and the host tensor conversions (see npy.h). */
#include "npy.h"

#include <errno.h>
#include <inttypes.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "capture.h"
#include "input_file.h"

static const uint8_t npy_magic[6] = { 0x93, 'N', 'U', 'M', 'P', 'Y' };

void host_tensor_free(struct host_tensor *tensor)
{
    if (!tensor)
        return;
    free(tensor->storage);
    free(tensor->label);
    free(tensor->path);
    free(tensor->tensor_name);
    free(tensor->safetensors_metadata_json);
    memset(tensor, 0, sizeof(*tensor));
}

static char *duplicate_string(const char *text)
{
    size_t size = strlen(text) + 1;
    char *copy = malloc(size);
    if (copy)
        memcpy(copy, text, size);
    return copy;
}

int host_tensor_set_provenance(struct host_tensor *tensor, const char *path,
                               const char *tensor_name, struct audit_error *err)
{
    char *new_path = NULL, *new_name = NULL, *new_label = NULL;
    const char *shown_path = path ? path : (tensor->label ? tensor->label : "(memory)");
    size_t label_size = strlen(shown_path) + (tensor_name ? strlen(tensor_name) + 1 : 0) + 1;
    if (path && !(new_path = duplicate_string(path)))
        goto error;
    if (tensor_name && !(new_name = duplicate_string(tensor_name)))
        goto error;
    if (!(new_label = malloc(label_size)))
        goto error;
    if (tensor_name)
        snprintf(new_label, label_size, "%s:%s", shown_path, tensor_name);
    else
        snprintf(new_label, label_size, "%s", shown_path);
    free(tensor->path);
    free(tensor->tensor_name);
    free(tensor->label);
    tensor->path = new_path;
    tensor->tensor_name = new_name;
    tensor->label = new_label;
    return AUDIT_OK;
error:
    free(new_path);
    free(new_name);
    free(new_label);
    return audit_fail(err, AUDIT_ENOMEM, "%s: out of memory", shown_path);
}

size_t tensor_dtype_size(enum tensor_dtype dtype)
{
    switch (dtype) {
    case TENSOR_DTYPE_F32: return 4;
    case TENSOR_DTYPE_F16: return 2;
    case TENSOR_DTYPE_BF16: return 2;
    case TENSOR_DTYPE_I32: return 4;
    case TENSOR_DTYPE_I64: return 8;
    }
    return 0;
}

const char *tensor_dtype_name(enum tensor_dtype dtype)
{
    switch (dtype) {
    case TENSOR_DTYPE_F32: return "float32";
    case TENSOR_DTYPE_F16: return "float16";
    case TENSOR_DTYPE_BF16: return "bfloat16";
    case TENSOR_DTYPE_I32: return "int32";
    case TENSOR_DTYPE_I64: return "int64";
    }
    return "unknown";
}

static float float_from_bits(uint32_t bits)
{
    float value;
    memcpy(&value, &bits, sizeof(value));
    return value;
}

float fp16_to_fp32(uint16_t half)
{
    uint32_t sign = (uint32_t)(half & 0x8000u) << 16;
    uint32_t exponent = (half >> 10) & 0x1Fu;
    uint32_t mantissa = half & 0x3FFu;
    uint32_t bits;
    if (exponent == 0x1F) {
        /* Infinity, or NaN with its payload (quiet bit included) moved to the top of the fp32
         * mantissa, as a hardware conversion does. */
        bits = sign | 0x7F800000u | (mantissa << 13);
    } else if (exponent != 0) {
        bits = sign | ((exponent + (127 - 15)) << 23) | (mantissa << 13);
    } else if (mantissa == 0) {
        bits = sign;
    } else {
        /* Subnormal half: mantissa x 2^-24. Normalise it; every such value is a normal fp32. */
        int shift = 0;
        while (!(mantissa & 0x400u)) {
            mantissa <<= 1;
            shift++;
        }
        mantissa &= 0x3FFu;
        bits = sign | ((uint32_t)(127 - 14 - shift) << 23) | (mantissa << 13);
    }
    return float_from_bits(bits);
}

float bf16_to_fp32(uint16_t bits)
{
    /* bfloat16 is the top half of an fp32: widening is exact for every value. */
    return float_from_bits((uint32_t)bits << 16);
}

static uint16_t load_u16_le(const uint8_t *p)
{
    return (uint16_t)(p[0] | (p[1] << 8));
}

static uint32_t load_u32_le(const uint8_t *p)
{
    return (uint32_t)p[0] | ((uint32_t)p[1] << 8) | ((uint32_t)p[2] << 16) |
           ((uint32_t)p[3] << 24);
}

static uint64_t load_u64_le(const uint8_t *p)
{
    return (uint64_t)load_u32_le(p) | ((uint64_t)load_u32_le(p + 4) << 32);
}

/* "[2, 17] (element 81)": where a flat position lies in the tensor's shape. */
static void format_element(const struct host_tensor *tensor, uint64_t flat, char *out,
                           size_t size)
{
    uint64_t index[TENSOR_MAX_DIMS];
    uint64_t rest = flat;
    for (int d = tensor->ndim - 1; d >= 0; d--) {
        uint64_t extent = tensor->shape[d] ? tensor->shape[d] : 1;
        index[d] = rest % extent;
        rest /= extent;
    }
    size_t used = 0;
    used += (size_t)snprintf(out + used, size - used, "[");
    for (int d = 0; d < tensor->ndim && used < size; d++)
        used += (size_t)snprintf(out + used, size - used, "%s%" PRIu64, d ? ", " : "", index[d]);
    if (used < size)
        snprintf(out + used, size - used, "] (element %" PRIu64 ")", flat);
}

int tensor_to_float32(const struct host_tensor *tensor, float *out, struct audit_error *err)
{
    const uint8_t *data = tensor->data;
    switch (tensor->dtype) {
    case TENSOR_DTYPE_F32:
        for (uint64_t i = 0; i < tensor->elements; i++)
            out[i] = float_from_bits(load_u32_le(data + 4 * i));
        return AUDIT_OK;
    case TENSOR_DTYPE_F16:
        for (uint64_t i = 0; i < tensor->elements; i++)
            out[i] = fp16_to_fp32(load_u16_le(data + 2 * i));
        return AUDIT_OK;
    case TENSOR_DTYPE_BF16:
        for (uint64_t i = 0; i < tensor->elements; i++)
            out[i] = bf16_to_fp32(load_u16_le(data + 2 * i));
        return AUDIT_OK;
    case TENSOR_DTYPE_I32:
    case TENSOR_DTYPE_I64:
        break;
    }
    return audit_fail(err, AUDIT_EDATA,
                      "%s: dtype %s (%s) is an integer type; scores must be float32, float16 or "
                      "bfloat16",
                      tensor->label, tensor->dtype_spelling, tensor_dtype_name(tensor->dtype));
}

int tensor_to_int32(const struct host_tensor *tensor, int32_t *out, struct audit_error *err)
{
    const uint8_t *data = tensor->data;
    switch (tensor->dtype) {
    case TENSOR_DTYPE_I32:
        for (uint64_t i = 0; i < tensor->elements; i++)
            out[i] = (int32_t)load_u32_le(data + 4 * i);
        return AUDIT_OK;
    case TENSOR_DTYPE_I64:
        for (uint64_t i = 0; i < tensor->elements; i++) {
            int64_t value = (int64_t)load_u64_le(data + 8 * i);
            if (value < INT32_MIN || value > INT32_MAX) {
                char where[256];
                format_element(tensor, i, where, sizeof(where));
                return audit_fail(err, AUDIT_EDATA,
                                  "%s: element %s is %" PRId64 ", outside the int32 range",
                                  tensor->label, where, value);
            }
            out[i] = (int32_t)value;
        }
        return AUDIT_OK;
    case TENSOR_DTYPE_F32:
    case TENSOR_DTYPE_F16:
    case TENSOR_DTYPE_BF16:
        break;
    }
    return audit_fail(err, AUDIT_EDATA,
                      "%s: dtype %s (%s) is a float type; index arrays must be int32 or int64",
                      tensor->label, tensor->dtype_spelling, tensor_dtype_name(tensor->dtype));
}

int tensor_read_file_bytes(const char *path, uint8_t **bytes, size_t *size,
                           struct audit_error *err)
{
    /* The array becomes one record: the record's memory cap bounds the file too. */
    int status = input_file_read_all(path, capture_max_record_bytes(),
                                     "an array file (the memory cap per record, dsatopk-audit "
                                     "--max-record-bytes)", bytes, size, err);
    if (status == AUDIT_EDATA && err)
        err->code = AUDIT_ENOMEM; /* a limit of this run, not a fault of the file */
    return status == AUDIT_EDATA ? AUDIT_ENOMEM : status;
}

/* ---- the header dict: {'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), } ---- */

struct header_cursor {
    const char *text;
    size_t length;
    size_t at;
    const char *label;
};

static void skip_space(struct header_cursor *cursor)
{
    while (cursor->at < cursor->length &&
           (cursor->text[cursor->at] == ' ' || cursor->text[cursor->at] == '\t' ||
            cursor->text[cursor->at] == '\n' || cursor->text[cursor->at] == '\r'))
        cursor->at++;
}

static int peek(const struct header_cursor *cursor)
{
    return cursor->at < cursor->length ? (unsigned char)cursor->text[cursor->at] : -1;
}

static int header_error(const struct header_cursor *cursor, struct audit_error *err,
                        const char *what)
{
    int next = peek(cursor);
    if (next < 0)
        return audit_fail(err, AUDIT_EDATA, "%s: .npy header: %s, found the end of the header",
                          cursor->label, what);
    if (next >= 0x20 && next < 0x7F)
        return audit_fail(err, AUDIT_EDATA, "%s: .npy header: %s at header byte %zu, found '%c'",
                          cursor->label, what, cursor->at, next);
    return audit_fail(err, AUDIT_EDATA, "%s: .npy header: %s at header byte %zu, found byte 0x%02x",
                      cursor->label, what, cursor->at, (unsigned)next);
}

/* A Python string literal in single or double quotes without escapes (numpy never writes
 * escapes in the three fields it uses). */
static int parse_quoted(struct header_cursor *cursor, char *out, size_t capacity,
                        const char *what, struct audit_error *err)
{
    int quote = peek(cursor);
    if (quote != '\'' && quote != '"')
        return header_error(cursor, err, what);
    size_t start = ++cursor->at;
    while (cursor->at < cursor->length && cursor->text[cursor->at] != quote) {
        if (cursor->text[cursor->at] == '\\')
            return header_error(cursor, err, "escape sequences are not supported in strings");
        cursor->at++;
    }
    if (cursor->at >= cursor->length)
        return header_error(cursor, err, "unterminated string");
    size_t length = cursor->at - start;
    cursor->at++;
    if (length + 1 > capacity)
        return audit_fail(err, AUDIT_EDATA, "%s: .npy header: string '%.*s' is too long",
                          cursor->label, (int)(length > 40 ? 40 : length), cursor->text + start);
    memcpy(out, cursor->text + start, length);
    out[length] = '\0';
    return AUDIT_OK;
}

static bool match_word(struct header_cursor *cursor, const char *word)
{
    size_t n = strlen(word);
    if (cursor->length - cursor->at < n || memcmp(cursor->text + cursor->at, word, n) != 0)
        return false;
    int after = cursor->at + n < cursor->length ? (unsigned char)cursor->text[cursor->at + n] : -1;
    if ((after >= 'a' && after <= 'z') || (after >= 'A' && after <= 'Z') ||
        (after >= '0' && after <= '9') || after == '_')
        return false;
    cursor->at += n;
    return true;
}

/* A tuple of non-negative integers: (), (5,), (2, 3), (2, 3,); Python 2 files may write 3L. */
static int parse_shape(struct header_cursor *cursor, struct host_tensor *out,
                       struct audit_error *err)
{
    if (peek(cursor) != '(')
        return header_error(cursor, err, "field 'shape' must be a tuple of integers: expected '('");
    cursor->at++;
    out->ndim = 0;
    for (;;) {
        skip_space(cursor);
        if (peek(cursor) == ')') {
            cursor->at++;
            return AUDIT_OK;
        }
        int c = peek(cursor);
        if (c < '0' || c > '9')
            return header_error(cursor, err,
                                "field 'shape' must hold non-negative integers: expected a digit");
        uint64_t value = 0;
        while ((c = peek(cursor)) >= '0' && c <= '9') {
            if (value > (UINT64_MAX - 9) / 10)
                return audit_fail(err, AUDIT_EDATA,
                                  "%s: .npy header: field 'shape': dimension %d is too large",
                                  cursor->label, out->ndim);
            value = value * 10 + (uint64_t)(c - '0');
            cursor->at++;
        }
        if (peek(cursor) == 'L' || peek(cursor) == 'l')
            cursor->at++;
        if (out->ndim >= TENSOR_MAX_DIMS)
            return audit_fail(err, AUDIT_EDATA,
                              "%s: .npy header: field 'shape' has more than %d dimensions",
                              cursor->label, TENSOR_MAX_DIMS);
        out->shape[out->ndim++] = value;
        skip_space(cursor);
        if (peek(cursor) == ',') {
            cursor->at++;
            continue;
        }
        if (peek(cursor) != ')')
            return header_error(cursor, err, "field 'shape': expected ',' or ')'");
    }
}

static int interpret_descr(const char *descr, struct host_tensor *out, const char *label,
                           struct audit_error *err)
{
    static const char supported[] =
        "supported: '<f4' (float32), '<f2' (float16), '<i4' (int32), '<i8' (int64)";
    snprintf(out->dtype_spelling, sizeof(out->dtype_spelling), "%s", descr);
    if (descr[0] == '>')
        return audit_fail(err, AUDIT_EDATA,
                          "%s: .npy header field 'descr' is '%s': big-endian data is not "
                          "supported (convert with .astype('<%s'))",
                          label, descr, descr + 1);
    if (descr[0] == '=')
        return audit_fail(err, AUDIT_EDATA,
                          "%s: .npy header field 'descr' is '%s': native byte order '=' is "
                          "ambiguous in a file; expected an explicit '<'",
                          label, descr);
    if (strcmp(descr, "<f4") == 0)
        out->dtype = TENSOR_DTYPE_F32;
    else if (strcmp(descr, "<f2") == 0)
        out->dtype = TENSOR_DTYPE_F16;
    else if (strcmp(descr, "<i4") == 0)
        out->dtype = TENSOR_DTYPE_I32;
    else if (strcmp(descr, "<i8") == 0)
        out->dtype = TENSOR_DTYPE_I64;
    else
        return audit_fail(err, AUDIT_EDATA,
                          "%s: .npy header field 'descr' is '%s': unsupported dtype (%s)", label,
                          descr, supported);
    return AUDIT_OK;
}

static int parse_header_dict(struct header_cursor *cursor, struct host_tensor *out,
                             struct audit_error *err)
{
    bool seen_descr = false, seen_fortran = false, seen_shape = false;
    bool fortran_order = false;
    char descr[16] = "";
    int status;

    skip_space(cursor);
    if (peek(cursor) != '{')
        return header_error(cursor, err, "expected a dict starting with '{'");
    cursor->at++;
    for (;;) {
        char key[32];
        skip_space(cursor);
        if (peek(cursor) == '}') {
            cursor->at++;
            break;
        }
        if ((status = parse_quoted(cursor, key, sizeof(key), "expected a quoted key", err)) < 0)
            return status;
        skip_space(cursor);
        if (peek(cursor) != ':')
            return header_error(cursor, err, "expected ':' after a key");
        cursor->at++;
        skip_space(cursor);
        if (strcmp(key, "descr") == 0) {
            if (seen_descr)
                return audit_fail(err, AUDIT_EDATA, "%s: .npy header: field 'descr' appears twice",
                                  cursor->label);
            if (peek(cursor) == '[')
                return audit_fail(err, AUDIT_EDATA,
                                  "%s: .npy header field 'descr' is a structured (record) dtype: "
                                  "not supported",
                                  cursor->label);
            if ((status = parse_quoted(cursor, descr, sizeof(descr),
                                       "field 'descr' must be a quoted dtype string", err)) < 0)
                return status;
            seen_descr = true;
        } else if (strcmp(key, "fortran_order") == 0) {
            if (seen_fortran)
                return audit_fail(err, AUDIT_EDATA,
                                  "%s: .npy header: field 'fortran_order' appears twice",
                                  cursor->label);
            if (match_word(cursor, "True"))
                fortran_order = true;
            else if (match_word(cursor, "False"))
                fortran_order = false;
            else
                return header_error(cursor, err, "field 'fortran_order' must be True or False");
            seen_fortran = true;
        } else if (strcmp(key, "shape") == 0) {
            if (seen_shape)
                return audit_fail(err, AUDIT_EDATA, "%s: .npy header: field 'shape' appears twice",
                                  cursor->label);
            if ((status = parse_shape(cursor, out, err)) < 0)
                return status;
            seen_shape = true;
        } else {
            return audit_fail(err, AUDIT_EDATA,
                              "%s: .npy header: unexpected field '%s' (a .npy header holds only "
                              "descr, fortran_order and shape)",
                              cursor->label, key);
        }
        skip_space(cursor);
        if (peek(cursor) == ',') {
            cursor->at++;
            continue;
        }
        if (peek(cursor) != '}')
            return header_error(cursor, err, "expected ',' or '}' after a field");
    }
    skip_space(cursor);
    /* numpy pads with spaces and ends with '\n'; some writers leave NUL padding. */
    while (cursor->at < cursor->length && cursor->text[cursor->at] == '\0')
        cursor->at++;
    if (cursor->at != cursor->length)
        return header_error(cursor, err, "unexpected text after the header dict");
    const char *missing = !seen_descr ? "descr" : !seen_fortran ? "fortran_order"
                        : !seen_shape ? "shape" : NULL;
    if (missing)
        return audit_fail(err, AUDIT_EDATA, "%s: .npy header has no field '%s'", cursor->label,
                          missing);
    if ((status = interpret_descr(descr, out, cursor->label, err)) < 0)
        return status;
    if (fortran_order) {
        /* A 1-d or 0-d array has the same bytes in either order, but numpy only writes True for
         * arrays that are not C-contiguous, so the flag always means a transposed layout here. */
        return audit_fail(err, AUDIT_EDATA,
                          "%s: .npy header field 'fortran_order' is True: only C order is "
                          "supported (save np.ascontiguousarray(x))",
                          cursor->label);
    }
    return AUDIT_OK;
}

int npy_parse(const uint8_t *bytes, size_t size, const char *label, struct host_tensor *out,
              struct audit_error *err)
{
    int status;
    memset(out, 0, sizeof(*out));
    out->format = "npy";
    if (!(out->label = duplicate_string(label)))
        return audit_fail(err, AUDIT_ENOMEM, "%s: out of memory", label);

    if (size < 8 || memcmp(bytes, npy_magic, sizeof(npy_magic)) != 0) {
        status = audit_fail(err, AUDIT_EDATA, "%s: not a .npy file (bad magic; expected "
                            "\\x93NUMPY)", label);
        goto error;
    }
    uint8_t major = bytes[6], minor = bytes[7];
    if (major < 1 || major > 3 || minor != 0) {
        status = audit_fail(err, AUDIT_EDATA,
                            "%s: .npy format version %u.%u is not supported (1.0, 2.0, 3.0)",
                            label, major, minor);
        goto error;
    }
    size_t prefix = major == 1 ? 10 : 12;
    if (size < prefix) {
        status = audit_fail(err, AUDIT_EDATA,
                            "%s: truncated: the file ends inside the header length field", label);
        goto error;
    }
    uint64_t header_length = major == 1 ? load_u16_le(bytes + 8) : load_u32_le(bytes + 8);
    if (header_length > NPY_MAX_HEADER_BYTES) {
        status = audit_fail(err, AUDIT_EDATA,
                            "%s: .npy header length %" PRIu64 " is too long (at most %u bytes)",
                            label, header_length, NPY_MAX_HEADER_BYTES);
        goto error;
    }
    if (header_length > size - prefix) {
        status = audit_fail(err, AUDIT_EDATA,
                            "%s: truncated: the header is %" PRIu64 " bytes but the file has %zu "
                            "after the header length field",
                            label, header_length, size - prefix);
        goto error;
    }
    struct header_cursor cursor = {
        .text = (const char *)bytes + prefix,
        .length = (size_t)header_length,
        .at = 0,
        .label = label,
    };
    if ((status = parse_header_dict(&cursor, out, err)) < 0)
        goto error;
    snprintf(out->format_version, sizeof(out->format_version), "%u.0", major);

    uint64_t elements = 1;
    for (int d = 0; d < out->ndim; d++) {
        if (out->shape[d] && elements > UINT64_MAX / out->shape[d]) {
            status = audit_fail(err, AUDIT_EDATA, "%s: .npy header field 'shape': too many "
                                "elements", label);
            goto error;
        }
        elements *= out->shape[d];
    }
    size_t item = tensor_dtype_size(out->dtype);
    size_t available = size - prefix - (size_t)header_length;
    if (elements > available / item) {
        status = audit_fail(err, AUDIT_EDATA,
                            "%s: truncated data: shape needs %" PRIu64 " elements of %zu bytes, "
                            "the file has %zu bytes after the header",
                            label, elements, item, available);
        goto error;
    }
    /* Bytes past the data are ignored, as numpy.load does (np.save may append several arrays
     * to one open file). */
    out->elements = elements;
    out->data = bytes + prefix + header_length;
    return AUDIT_OK;
error:
    host_tensor_free(out);
    return status;
}

int npy_read_file(const char *path, struct host_tensor *out, struct audit_error *err)
{
    uint8_t *bytes = NULL;
    size_t size = 0;
    int status = tensor_read_file_bytes(path, &bytes, &size, err);
    memset(out, 0, sizeof(*out));
    if (status < 0)
        return status;
    if ((status = npy_parse(bytes, size, path, out, err)) < 0) {
        free(bytes);
        return status;
    }
    out->storage = bytes;
    hash_bytes(bytes, size, out->file_sha256);
    if ((status = host_tensor_set_provenance(out, path, NULL, err)) < 0) {
        host_tensor_free(out);
        return status;
    }
    return AUDIT_OK;
}
