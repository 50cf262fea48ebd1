/* Array readers behind `import`: .npy (versions 1.0, 2.0, 3.0) and .safetensors files built
 * byte by byte here, valid ones of every supported dtype and malformed ones, whose error
 * messages must name the file and the field; exact fp16 / bf16 widening. */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "hash.h"
#include "npy.h"
#include "safetensors.h"
#include "test_util.h"

static char test_directory[256];

#define assert_message_contains(err, text)                                                       \
    do {                                                                                         \
        if (!strstr((err).message, (text)))                                                      \
            fail_msg("error message \"%s\" does not contain \"%s\"", (err).message, (text));     \
    } while (0)

/* ---- building files ---- */

struct bytes {
    uint8_t *data;
    size_t size;
};

static void append(struct bytes *buffer, const void *data, size_t size)
{
    buffer->data = realloc(buffer->data, buffer->size + size + 1);
    assert_non_null(buffer->data);
    if (size)
        memcpy(buffer->data + buffer->size, data, size);
    buffer->size += size;
}

static void append_u16(struct bytes *buffer, uint16_t value)
{
    uint8_t le[2] = { (uint8_t)value, (uint8_t)(value >> 8) };
    append(buffer, le, 2);
}

static void append_u32(struct bytes *buffer, uint32_t value)
{
    uint8_t le[4] = { (uint8_t)value, (uint8_t)(value >> 8), (uint8_t)(value >> 16),
                      (uint8_t)(value >> 24) };
    append(buffer, le, 4);
}

static void append_u64(struct bytes *buffer, uint64_t value)
{
    append_u32(buffer, (uint32_t)value);
    append_u32(buffer, (uint32_t)(value >> 32));
}

static void append_f32(struct bytes *buffer, float value)
{
    uint32_t bits;
    memcpy(&bits, &value, 4);
    append_u32(buffer, bits);
}

/* A .npy image as numpy writes it: the dict padded with spaces and a final newline so the data
 * starts at a multiple of 64. */
static struct bytes npy_image(uint8_t major, const char *dict, const struct bytes *data)
{
    static const uint8_t magic[6] = { 0x93, 'N', 'U', 'M', 'P', 'Y' };
    struct bytes out = { 0 };
    size_t prefix = major == 1 ? 10 : 12;
    size_t header = strlen(dict) + 1;
    size_t padded = (prefix + header + 63) / 64 * 64 - prefix;
    append(&out, magic, 6);
    uint8_t version[2] = { major, 0 };
    append(&out, version, 2);
    if (major == 1)
        append_u16(&out, (uint16_t)padded);
    else
        append_u32(&out, (uint32_t)padded);
    append(&out, dict, strlen(dict));
    for (size_t i = header; i < padded; i++)
        append(&out, " ", 1);
    append(&out, "\n", 1);
    if (data)
        append(&out, data->data, data->size);
    return out;
}

static struct bytes safetensors_image(const char *header, const struct bytes *data)
{
    struct bytes out = { 0 };
    append_u64(&out, strlen(header));
    append(&out, header, strlen(header));
    if (data)
        append(&out, data->data, data->size);
    return out;
}

static void write_file(const char *name, const struct bytes *image, char *path, size_t size)
{
    snprintf(path, size, "%s/%s", test_directory, name);
    FILE *file = fopen(path, "wb");
    assert_non_null(file);
    if (image->size)
        assert_int_equal(fwrite(image->data, 1, image->size, file), image->size);
    assert_int_equal(fclose(file), 0);
}

/* ---- .npy: valid ---- */

static void test_npy_v1_float32(void **state)
{
    (void)state;
    const float values[6] = { 1.5f, -0.0f, INFINITY, 1e-40f, -3.25f, 0.0f };
    struct bytes data = { 0 };
    for (int i = 0; i < 6; i++)
        append_f32(&data, values[i]);
    struct bytes image = npy_image(1, "{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }",
                                   &data);
    struct host_tensor tensor;
    struct audit_error err = { 0 };
    assert_int_equal(npy_parse(image.data, image.size, "mem.npy", &tensor, &err), AUDIT_OK);
    assert_int_equal(tensor.dtype, TENSOR_DTYPE_F32);
    assert_string_equal(tensor.dtype_spelling, "<f4");
    assert_string_equal(tensor.format_version, "1.0");
    assert_int_equal(tensor.ndim, 2);
    assert_int_equal(tensor.shape[0], 2);
    assert_int_equal(tensor.shape[1], 3);
    assert_int_equal(tensor.elements, 6);
    float out[6];
    assert_int_equal(tensor_to_float32(&tensor, out, &err), AUDIT_OK);
    for (int i = 0; i < 6; i++)
        assert_int_equal(bits_of(out[i]), bits_of(values[i]));
    /* Integer conversion of a float tensor is refused, naming it. */
    int32_t ints[6];
    assert_int_equal(tensor_to_int32(&tensor, ints, &err), AUDIT_EDATA);
    assert_message_contains(err, "mem.npy");
    host_tensor_free(&tensor);
    free(image.data);
    free(data.data);
}

static void test_npy_v2_int32_and_v3_int64(void **state)
{
    (void)state;
    struct bytes data = { 0 };
    append_u32(&data, 7);
    append_u32(&data, (uint32_t)-1);
    append_u32(&data, 0x7FFFFFFF);
    struct bytes image = npy_image(2, "{'descr': '<i4', 'fortran_order': False, 'shape': (3,), }",
                                   &data);
    struct host_tensor tensor;
    struct audit_error err = { 0 };
    assert_int_equal(npy_parse(image.data, image.size, "v2.npy", &tensor, &err), AUDIT_OK);
    assert_string_equal(tensor.format_version, "2.0");
    assert_int_equal(tensor.ndim, 1);
    int32_t out[3];
    assert_int_equal(tensor_to_int32(&tensor, out, &err), AUDIT_OK);
    assert_int_equal(out[0], 7);
    assert_int_equal(out[1], -1);
    assert_int_equal(out[2], INT32_MAX);
    /* Scores must be float: an integer tensor is refused as scores. */
    float floats[3];
    assert_int_equal(tensor_to_float32(&tensor, floats, &err), AUDIT_EDATA);
    assert_message_contains(err, "v2.npy");
    assert_message_contains(err, "<i4");
    host_tensor_free(&tensor);
    free(image.data);
    free(data.data);

    struct bytes wide = { 0 };
    append_u64(&wide, (uint64_t)INT32_MIN);
    append_u64(&wide, 5);
    append_u64(&wide, (uint64_t)-1);
    append_u64(&wide, 1234567);
    image = npy_image(3, "{\"descr\": \"<i8\", \"fortran_order\": False, \"shape\": (2, 2)}",
                      &wide);
    assert_int_equal(npy_parse(image.data, image.size, "v3.npy", &tensor, &err), AUDIT_OK);
    assert_string_equal(tensor.format_version, "3.0");
    int32_t narrowed[4];
    assert_int_equal(tensor_to_int32(&tensor, narrowed, &err), AUDIT_OK);
    assert_int_equal(narrowed[0], INT32_MIN);
    assert_int_equal(narrowed[1], 5);
    assert_int_equal(narrowed[2], -1);
    assert_int_equal(narrowed[3], 1234567);
    host_tensor_free(&tensor);
    free(image.data);
    free(wide.data);
}

static void test_npy_int64_out_of_range_names_element(void **state)
{
    (void)state;
    struct bytes data = { 0 };
    append_u64(&data, 1);
    append_u64(&data, 2);
    append_u64(&data, 3000000000ull);
    append_u64(&data, 4);
    struct bytes image = npy_image(1, "{'descr': '<i8', 'fortran_order': False, 'shape': (2, 2), }",
                                   &data);
    struct host_tensor tensor;
    struct audit_error err = { 0 };
    assert_int_equal(npy_parse(image.data, image.size, "table.npy", &tensor, &err), AUDIT_OK);
    int32_t out[4];
    assert_int_equal(tensor_to_int32(&tensor, out, &err), AUDIT_EDATA);
    assert_message_contains(err, "table.npy");
    assert_message_contains(err, "[1, 0]");
    assert_message_contains(err, "3000000000");
    host_tensor_free(&tensor);
    free(image.data);
    free(data.data);
}

static void test_npy_header_variants(void **state)
{
    (void)state;
    struct host_tensor tensor;
    struct audit_error err = { 0 };
    struct bytes data = { 0 };
    append_f32(&data, 2.0f);
    /* Python 2 long suffixes, keys in another order, a 0-d array, a float16 array. */
    struct bytes image = npy_image(1, "{'shape': (1L,), 'fortran_order': False, 'descr': '<f4'}",
                                   &data);
    assert_int_equal(npy_parse(image.data, image.size, "py2.npy", &tensor, &err), AUDIT_OK);
    assert_int_equal(tensor.ndim, 1);
    assert_int_equal(tensor.shape[0], 1);
    host_tensor_free(&tensor);
    free(image.data);

    image = npy_image(1, "{'descr': '<f4', 'fortran_order': False, 'shape': ()}", &data);
    assert_int_equal(npy_parse(image.data, image.size, "scalar.npy", &tensor, &err), AUDIT_OK);
    assert_int_equal(tensor.ndim, 0);
    assert_int_equal(tensor.elements, 1);
    host_tensor_free(&tensor);
    free(image.data);
    free(data.data);

    struct bytes halves = { 0 };
    append_u16(&halves, 0x3C00); /* 1.0 */
    append_u16(&halves, 0x0001); /* smallest subnormal */
    image = npy_image(1, "{'descr': '<f2', 'fortran_order': False, 'shape': (2,), }", &halves);
    assert_int_equal(npy_parse(image.data, image.size, "half.npy", &tensor, &err), AUDIT_OK);
    assert_int_equal(tensor.dtype, TENSOR_DTYPE_F16);
    float out[2];
    assert_int_equal(tensor_to_float32(&tensor, out, &err), AUDIT_OK);
    assert_true(out[0] == 1.0f);
    assert_true(out[1] == ldexpf(1.0f, -24));
    host_tensor_free(&tensor);
    free(image.data);
    free(halves.data);

    /* Trailing bytes after the data are ignored, as numpy.load does. */
    struct bytes two = { 0 };
    append_f32(&two, 1.0f);
    append_f32(&two, 9.0f);
    image = npy_image(1, "{'descr': '<f4', 'fortran_order': False, 'shape': (1,), }", &two);
    assert_int_equal(npy_parse(image.data, image.size, "extra.npy", &tensor, &err), AUDIT_OK);
    assert_int_equal(tensor.elements, 1);
    host_tensor_free(&tensor);
    free(image.data);
    free(two.data);
}

static void test_npy_read_file_hash_and_provenance(void **state)
{
    (void)state;
    struct bytes data = { 0 };
    append_f32(&data, 0.5f);
    append_f32(&data, 0.25f);
    struct bytes image = npy_image(1, "{'descr': '<f4', 'fortran_order': False, 'shape': (1, 2), }",
                                   &data);
    char path[512];
    write_file("scores.npy", &image, path, sizeof(path));
    struct host_tensor tensor;
    struct audit_error err = { 0 };
    assert_int_equal(npy_read_file(path, &tensor, &err), AUDIT_OK);
    uint8_t expected[HASH_BYTES];
    hash_bytes(image.data, image.size, expected);
    assert_memory_equal(tensor.file_sha256, expected, HASH_BYTES);
    assert_string_equal(tensor.path, path);
    assert_string_equal(tensor.label, path);
    assert_null(tensor.tensor_name);
    assert_string_equal(tensor.format, "npy");
    host_tensor_free(&tensor);

    /* The loader recognises .npy by content whatever the name. */
    write_file("scores.bin", &image, path, sizeof(path));
    assert_int_equal(tensor_file_load(path, &tensor, &err), AUDIT_OK);
    assert_string_equal(tensor.format, "npy");
    host_tensor_free(&tensor);
    char spec[600];
    snprintf(spec, sizeof(spec), "%s:scores", path);
    assert_int_equal(tensor_file_load(spec, &tensor, &err), AUDIT_EUSAGE);
    assert_message_contains(err, ".npy file holds one array");
    snprintf(spec, sizeof(spec), "%s/missing.npy", test_directory);
    assert_int_equal(tensor_file_load(spec, &tensor, &err), AUDIT_EIO);
    assert_message_contains(err, "missing.npy");
    free(image.data);
    free(data.data);
}

/* The loader says what a file it cannot read looks like, instead of parsing it with the wrong
 * reader: a .npy with a damaged magic once came back as "safetensors header length ... is too
 * long". */
static void test_loader_names_what_a_file_looks_like(void **state)
{
    (void)state;
    struct bytes data = { 0 };
    append_f32(&data, 0.5f);
    struct bytes npy = npy_image(1, "{'descr': '<f4', 'fortran_order': False, 'shape': (1,), }",
                                 &data);
    static const uint8_t torch_zip[] = "PK\x03\x04\x14\x00\x00\x00\x00\x00archive/data.pklx";
    static const uint8_t npz[] = "PK\x03\x04\x14\x00\x00\x00\x00\x00a.npy\x93NUMPY";
    static const uint8_t pickle[] = "\x80\x02]q\x00(K\x01K\x02e.";
    struct {
        const char *name;
        const uint8_t *bytes;
        size_t size;
        const char *message;
    } cases[] = {
        { "empty.npy", NULL, 0, "empty.npy: is empty (0 bytes): not a .npy or .safetensors file" },
        { "badmagic.npy", NULL, 0, "badmagic.npy: is not a .npy file (no \\x93NUMPY magic) nor "
          "a .safetensors file (no header length up to 100000000 bytes followed by '{'); its "
          "first bytes are 93 58 55 4d 50 59 01 00" },
        { "model.pt", torch_zip, sizeof(torch_zip) - 1,
          "model.pt: is a zip archive holding data.pkl, as torch.save writes" },
        { "arrays.npz", npz, sizeof(npz) - 1, "arrays.npz: is a zip archive (numpy.savez" },
        { "legacy.pt", pickle, sizeof(pickle) - 1,
          "legacy.pt: is a Python pickle (protocol 2, as the legacy torch.save writes)" },
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        struct bytes image = { 0 };
        if (i == 1) {
            append(&image, npy.data, npy.size);
            image.data[1] = 'X';
        } else if (cases[i].size) {
            append(&image, cases[i].bytes, cases[i].size);
        }
        char path[512];
        struct host_tensor tensor;
        struct audit_error err = { 0 };
        write_file(cases[i].name, &image, path, sizeof(path));
        assert_int_equal(tensor_file_load(path, &tensor, &err), AUDIT_EDATA);
        assert_message_contains(err, cases[i].message);
        assert_null(strstr(err.message, "header length 3"));
        free(image.data);
    }
    /* A safetensors file cut inside its header is still read as one: truncated, not unknown. */
    struct bytes whole = safetensors_image("{\"x\":{\"dtype\":\"F32\",\"shape\":[1],"
                                           "\"data_offsets\":[0,4]}}", &data);
    struct bytes cut = { whole.data, 20 };
    char path[512];
    struct host_tensor tensor;
    struct audit_error err = { 0 };
    write_file("cut.safetensors", &cut, path, sizeof(path));
    assert_int_equal(tensor_file_load(path, &tensor, &err), AUDIT_EDATA);
    assert_message_contains(err, "truncated");
    free(whole.data);
    free(npy.data);
    free(data.data);
}

/* ---- .npy: malformed ---- */

static void expect_npy_error(const struct bytes *image, const char *label, const char *field)
{
    struct host_tensor tensor;
    struct audit_error err = { 0 };
    int status = npy_parse(image->data, image->size, label, &tensor, &err);
    if (status != AUDIT_EDATA)
        fail_msg("%s: status %d, wanted AUDIT_EDATA (message: %s)", label, status, err.message);
    assert_message_contains(err, label);
    assert_message_contains(err, field);
    /* A failed parse leaves nothing to free. */
    assert_null(tensor.label);
}

static void test_npy_malformed(void **state)
{
    (void)state;
    struct bytes data = { 0 };
    for (int i = 0; i < 6; i++)
        append_f32(&data, (float)i);
    struct bytes image;

    image = npy_image(1, "{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }", &data);
    image.data[1] = 'X';
    expect_npy_error(&image, "magic.npy", "bad magic");
    image.data[1] = 'N';
    image.data[6] = 4;
    expect_npy_error(&image, "version.npy", "version 4.0");
    image.data[6] = 1;
    struct bytes cut = { image.data, 9 };
    expect_npy_error(&cut, "cut-prefix.npy", "truncated");
    cut.size = 40; /* inside the header */
    expect_npy_error(&cut, "cut-header.npy", "truncated");
    cut.size = image.size - 1; /* inside the data */
    expect_npy_error(&cut, "cut-data.npy", "truncated data");
    free(image.data);

    image = npy_image(2, "{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }", &data);
    image.data[8] = 0;
    image.data[9] = 0;
    image.data[10] = 0x20; /* 2 MiB header */
    expect_npy_error(&image, "long.npy", "too long");
    free(image.data);

    static const struct {
        const char *dict, *label, *field;
    } cases[] = {
        { "{'descr': '<f4', 'fortran_order': True, 'shape': (2, 3), }", "fortran.npy",
          "fortran_order" },
        { "{'descr': '>f4', 'fortran_order': False, 'shape': (2, 3), }", "big.npy", "big-endian" },
        { "{'descr': '=f4', 'fortran_order': False, 'shape': (2, 3), }", "native.npy", "descr" },
        { "{'descr': '<f8', 'fortran_order': False, 'shape': (2, 3), }", "double.npy", "'<f8'" },
        { "{'descr': '|u1', 'fortran_order': False, 'shape': (2, 3), }", "bytes.npy", "descr" },
        { "{'descr': [('a', '<f4')], 'fortran_order': False, 'shape': (2,), }", "struct.npy",
          "structured" },
        { "{'descr': '<f4', 'fortran_order': False, }", "noshape.npy", "'shape'" },
        { "{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), 'x': 1}", "extra.npy",
          "'x'" },
        { "{'descr': '<f4', 'fortran_order': False, 'shape': (2, -3), }", "negative.npy", "shape" },
        { "{'descr': '<f4', 'fortran_order': Maybe, 'shape': (2, 3), }", "maybe.npy",
          "fortran_order" },
        { "{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), ", "open.npy", "header" },
        { "['descr', '<f4']", "list.npy", "dict" },
        { "{'descr': '<f4', 'descr': '<f4', 'fortran_order': False, 'shape': (2, 3)}", "twice.npy",
          "twice" },
        { "{'descr': '<f4', 'fortran_order': False, 'shape': (2, 300), }", "short.npy",
          "truncated data" },
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        image = npy_image(1, cases[i].dict, &data);
        expect_npy_error(&image, cases[i].label, cases[i].field);
        free(image.data);
    }
    free(data.data);
}

/* ---- .safetensors ---- */

static void test_safetensors_every_dtype(void **state)
{
    (void)state;
    struct bytes data = { 0 };
    /* scores F32 (2, 2) at [0, 16) */
    append_f32(&data, 1.0f);
    append_f32(&data, -2.5f);
    append_f32(&data, 0.0f);
    append_f32(&data, 1e30f);
    /* bf16 (2,) at [16, 20): 1.0 and -inf */
    append_u16(&data, 0x3F80);
    append_u16(&data, 0xFF80);
    /* f16 (2,) at [20, 24): 65504 and -0.0 */
    append_u16(&data, 0x7BFF);
    append_u16(&data, 0x8000);
    /* i32 (2,) at [24, 32) */
    append_u32(&data, 4096);
    append_u32(&data, 17);
    /* i64 (1, 2) at [32, 48) */
    append_u64(&data, 9);
    append_u64(&data, (uint64_t)-1);
    const char *header =
        "{\"__metadata__\": {\"format\": \"pt\"},"
        " \"scores\": {\"dtype\": \"F32\", \"shape\": [2, 2], \"data_offsets\": [0, 16]},"
        " \"bf\": {\"dtype\": \"BF16\", \"shape\": [2], \"data_offsets\": [16, 20]},"
        " \"half\": {\"dtype\": \"F16\", \"shape\": [2], \"data_offsets\": [20, 24]},"
        " \"lengths\": {\"dtype\": \"I32\", \"shape\": [2], \"data_offsets\": [24, 32]},"
        " \"table\": {\"dtype\": \"I64\", \"shape\": [1, 2], \"data_offsets\": [32, 48]}}   ";
    struct bytes image = safetensors_image(header, &data);
    struct host_tensor tensor;
    struct audit_error err = { 0 };
    float floats[4];
    int32_t ints[2];

    assert_int_equal(safetensors_parse(image.data, image.size, "t.safetensors", "scores", &tensor,
                                       &err), AUDIT_OK);
    assert_int_equal(tensor.dtype, TENSOR_DTYPE_F32);
    assert_int_equal(tensor.ndim, 2);
    assert_string_equal(tensor.tensor_name, "scores");
    assert_string_equal(tensor.label, "t.safetensors:scores");
    assert_non_null(tensor.safetensors_metadata_json);
    assert_non_null(strstr(tensor.safetensors_metadata_json, "\"pt\""));
    assert_int_equal(tensor_to_float32(&tensor, floats, &err), AUDIT_OK);
    assert_true(floats[0] == 1.0f && floats[1] == -2.5f && floats[3] == 1e30f);
    host_tensor_free(&tensor);

    assert_int_equal(safetensors_parse(image.data, image.size, "t.safetensors", "bf", &tensor,
                                       &err), AUDIT_OK);
    assert_int_equal(tensor.dtype, TENSOR_DTYPE_BF16);
    assert_int_equal(tensor_to_float32(&tensor, floats, &err), AUDIT_OK);
    assert_true(floats[0] == 1.0f);
    assert_true(isinf(floats[1]) && floats[1] < 0);
    host_tensor_free(&tensor);

    assert_int_equal(safetensors_parse(image.data, image.size, "t.safetensors", "half", &tensor,
                                       &err), AUDIT_OK);
    assert_int_equal(tensor.dtype, TENSOR_DTYPE_F16);
    assert_int_equal(tensor_to_float32(&tensor, floats, &err), AUDIT_OK);
    assert_true(floats[0] == 65504.0f);
    assert_int_equal(bits_of(floats[1]), 0x80000000u);
    host_tensor_free(&tensor);

    assert_int_equal(safetensors_parse(image.data, image.size, "t.safetensors", "lengths", &tensor,
                                       &err), AUDIT_OK);
    assert_int_equal(tensor.dtype, TENSOR_DTYPE_I32);
    assert_int_equal(tensor_to_int32(&tensor, ints, &err), AUDIT_OK);
    assert_int_equal(ints[0], 4096);
    assert_int_equal(ints[1], 17);
    host_tensor_free(&tensor);

    assert_int_equal(safetensors_parse(image.data, image.size, "t.safetensors", "table", &tensor,
                                       &err), AUDIT_OK);
    assert_int_equal(tensor.dtype, TENSOR_DTYPE_I64);
    assert_int_equal(tensor_to_int32(&tensor, ints, &err), AUDIT_OK);
    assert_int_equal(ints[0], 9);
    assert_int_equal(ints[1], -1);
    host_tensor_free(&tensor);

    /* Several tensors and no name: refused, listing them. */
    assert_int_equal(safetensors_parse(image.data, image.size, "t.safetensors", NULL, &tensor,
                                       &err), AUDIT_EDATA);
    assert_message_contains(err, "5 tensors");
    assert_message_contains(err, "'scores'");
    assert_int_equal(safetensors_parse(image.data, image.size, "t.safetensors", "nope", &tensor,
                                       &err), AUDIT_EDATA);
    assert_message_contains(err, "no tensor 'nope'");
    assert_message_contains(err, "'lengths'");

    /* Through a file and the FILE:TENSOR loader; the hash covers the whole file. */
    char path[512], spec[600];
    write_file("t.safetensors", &image, path, sizeof(path));
    snprintf(spec, sizeof(spec), "%s:lengths", path);
    assert_int_equal(tensor_file_load(spec, &tensor, &err), AUDIT_OK);
    assert_string_equal(tensor.format, "safetensors");
    assert_string_equal(tensor.path, path);
    assert_string_equal(tensor.tensor_name, "lengths");
    uint8_t expected[HASH_BYTES];
    hash_bytes(image.data, image.size, expected);
    assert_memory_equal(tensor.file_sha256, expected, HASH_BYTES);
    host_tensor_free(&tensor);
    free(image.data);
    free(data.data);
}

static void test_safetensors_only_tensor_and_colon_paths(void **state)
{
    (void)state;
    struct bytes data = { 0 };
    append_f32(&data, 3.0f);
    struct bytes image = safetensors_image(
        "{\"only\":{\"dtype\":\"F32\",\"shape\":[1,1],\"data_offsets\":[0,4]}}", &data);
    char directory[400], path[512];
    snprintf(directory, sizeof(directory), "%s/run:1", test_directory);
    mkdir(directory, 0755);
    write_file("run:1/x.safetensors", &image, path, sizeof(path));
    struct host_tensor tensor;
    struct audit_error err = { 0 };
    /* A path with ':' in it still loads as a whole file ... */
    assert_int_equal(tensor_file_load(path, &tensor, &err), AUDIT_OK);
    assert_string_equal(tensor.tensor_name, "only");
    host_tensor_free(&tensor);
    /* ... and with a tensor name after it. */
    char spec[600];
    snprintf(spec, sizeof(spec), "%s:only", path);
    assert_int_equal(tensor_file_load(spec, &tensor, &err), AUDIT_OK);
    assert_int_equal(tensor.elements, 1);
    host_tensor_free(&tensor);
    snprintf(spec, sizeof(spec), "%s:", path);
    assert_int_equal(tensor_file_load(spec, &tensor, &err), AUDIT_EUSAGE);
    assert_message_contains(err, "empty tensor name");
    free(image.data);
    free(data.data);
}

static void expect_safetensors_error(const struct bytes *image, const char *label,
                                     const char *field)
{
    struct host_tensor tensor;
    struct audit_error err = { 0 };
    int status = safetensors_parse(image->data, image->size, label, "x", &tensor, &err);
    if (status != AUDIT_EDATA)
        fail_msg("%s: status %d, wanted AUDIT_EDATA (message: %s)", label, status, err.message);
    assert_message_contains(err, label);
    assert_message_contains(err, field);
    assert_null(tensor.label);
}

static void test_safetensors_malformed(void **state)
{
    (void)state;
    struct bytes data = { 0 };
    for (int i = 0; i < 4; i++)
        append_f32(&data, (float)i);
    static const struct {
        const char *header, *label, *field;
    } cases[] = {
        { "{\"x\":{\"dtype\":\"F64\",\"shape\":[2],\"data_offsets\":[0,16]}}", "f64.st", "'F64'" },
        { "{\"x\":{\"dtype\":\"F32\",\"shape\":[4],\"data_offsets\":[0,20]}}", "range.st",
          "data_offsets" },
        { "{\"x\":{\"dtype\":\"F32\",\"shape\":[4],\"data_offsets\":[8,4]}}", "reversed.st",
          "data_offsets" },
        { "{\"x\":{\"dtype\":\"F32\",\"shape\":[3],\"data_offsets\":[0,16]}}", "size.st",
          "shape" },
        { "{\"x\":{\"dtype\":\"F32\",\"shape\":[2.5],\"data_offsets\":[0,16]}}", "fraction.st",
          "shape" },
        { "{\"x\":{\"dtype\":\"F32\",\"shape\":[4]}}", "nooffsets.st", "data_offsets" },
        { "{\"x\":{\"shape\":[4],\"data_offsets\":[0,16]}}", "nodtype.st", "dtype" },
        { "{\"x\":{\"dtype\":\"F32\",\"shape\":[4],\"data_offsets\":[0,16]}} zz", "trailing.st",
          "after the JSON" },
        { "{\"x\":{\"dtype\":\"F32\",\"shape\":[4],", "broken.st",
          "safetensors header: byte 32, at $.x: the text ends where a key (a string) was expected" },
        { "[1, 2]", "array.st", "not a JSON object" },
        { "{\"x\":{\"dtype\":\"F32\",\"shape\":[4],\"data_offsets\":[0,16]},"
          "\"x\":{\"dtype\":\"F32\",\"shape\":[4],\"data_offsets\":[0,16]}}", "dup.st",
          "safetensors header: byte 55, at $.x: duplicate key (first at byte 1)" },
        { "{\"__metadata__\": 5, \"x\":{\"dtype\":\"F32\",\"shape\":[4],\"data_offsets\":[0,16]}}",
          "meta.st", "__metadata__" },
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        struct bytes image = safetensors_image(cases[i].header, &data);
        expect_safetensors_error(&image, cases[i].label, cases[i].field);
        free(image.data);
    }

    /* Header length fields that lie. */
    struct bytes image = safetensors_image(
        "{\"x\":{\"dtype\":\"F32\",\"shape\":[4],\"data_offsets\":[0,16]}}", &data);
    struct bytes cut = { image.data, 5 };
    expect_safetensors_error(&cut, "short.st", "truncated");
    cut.size = 30;
    expect_safetensors_error(&cut, "cut.st", "truncated");
    cut.size = image.size - 2; /* the data area now ends before offset 16 */
    expect_safetensors_error(&cut, "cutdata.st", "data_offsets");
    uint8_t saved[8];
    memcpy(saved, image.data, 8);
    uint64_t huge = 100000001ull;
    for (int i = 0; i < 8; i++)
        image.data[i] = (uint8_t)(huge >> (8 * i));
    expect_safetensors_error(&image, "huge.st", "too long");
    memcpy(image.data, saved, 8);
    image.data[0] += 1; /* the header swallows the first data byte: not JSON at its end */
    expect_safetensors_error(&image, "shifted.st", "header");
    free(image.data);
    free(data.data);
}

/* ---- exact widening ---- */

/* fp16 value from its fields, computed independently of the bit manipulation in npy.c. */
static double half_reference(uint16_t bits)
{
    int sign = bits >> 15, exponent = (bits >> 10) & 0x1F, mantissa = bits & 0x3FF;
    double magnitude = exponent == 0 ? ldexp(mantissa, -24)
                                     : ldexp(1024 + mantissa, exponent - 25);
    return sign ? -magnitude : magnitude;
}

static void test_fp16_exact(void **state)
{
    (void)state;
    for (uint32_t bits = 0; bits < 0x10000; bits++) {
        uint16_t half = (uint16_t)bits;
        float widened = fp16_to_fp32(half);
        int exponent = (half >> 10) & 0x1F;
        if (exponent == 0x1F)
            continue; /* inf and NaN below */
        if ((double)widened != half_reference(half))
            fail_msg("fp16 0x%04x: got %a, want %a", half, (double)widened, half_reference(half));
        assert_int_equal(signbit(widened) != 0, (half >> 15) != 0);
#ifdef __FLT16_MAX__
        /* The compiler's own conversion agrees too. */
        _Float16 native;
        memcpy(&native, &half, 2);
        assert_int_equal(bits_of(widened), bits_of((float)native));
#endif
    }
    assert_int_equal(bits_of(fp16_to_fp32(0x0001)), 0x33800000u); /* 2^-24 */
    assert_int_equal(bits_of(fp16_to_fp32(0x03FF)), 0x387FC000u); /* largest subnormal */
    assert_int_equal(bits_of(fp16_to_fp32(0x0400)), 0x38800000u); /* 2^-14 */
    assert_int_equal(bits_of(fp16_to_fp32(0x8000)), 0x80000000u); /* -0.0 */
    assert_int_equal(bits_of(fp16_to_fp32(0x7C00)), 0x7F800000u); /* +inf */
    assert_int_equal(bits_of(fp16_to_fp32(0xFC00)), 0xFF800000u); /* -inf */
    assert_int_equal(bits_of(fp16_to_fp32(0x7E00)), 0x7FC00000u); /* quiet NaN */
    assert_int_equal(bits_of(fp16_to_fp32(0x7C01)), 0x7F802000u); /* signalling payload kept */
    assert_int_equal(bits_of(fp16_to_fp32(0xFE01)), 0xFFC02000u); /* negative NaN payload */
    assert_true(isnan(fp16_to_fp32(0x7D55)));
}

static void test_bf16_exact(void **state)
{
    (void)state;
    assert_true(bf16_to_fp32(0x3F80) == 1.0f);
    assert_true(bf16_to_fp32(0xC000) == -2.0f);
    assert_true(bf16_to_fp32(0x0001) == ldexpf(1.0f, -133)); /* smallest subnormal */
    assert_true(bf16_to_fp32(0x007F) == ldexpf(127.0f, -133)); /* largest subnormal */
    assert_int_equal(bits_of(bf16_to_fp32(0x8000)), 0x80000000u);
    assert_int_equal(bits_of(bf16_to_fp32(0x7F80)), 0x7F800000u);
    assert_int_equal(bits_of(bf16_to_fp32(0xFF80)), 0xFF800000u);
    assert_int_equal(bits_of(bf16_to_fp32(0x7FC1)), 0x7FC10000u);
    assert_int_equal(bits_of(bf16_to_fp32(0x7F81)), 0x7F810000u);
    assert_true(bf16_to_fp32(0x7F7F) == 0x1.FEp127f); /* largest finite */
    /* Every finite bf16 is the fp32 with the same top 16 bits, and round-trips. */
    for (uint32_t bits = 0; bits < 0x10000; bits++) {
        float widened = bf16_to_fp32((uint16_t)bits);
        assert_int_equal(bits_of(widened) >> 16, bits);
        assert_int_equal(bits_of(widened) & 0xFFFFu, 0);
    }
}

static int setup(void **state)
{
    (void)state;
    if (hash_init() != 0)
        return -1;
    snprintf(test_directory, sizeof(test_directory), "%s/dsatopk-import-XXXXXX",
             getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp");
    return mkdtemp(test_directory) ? 0 : -1;
}

static int teardown(void **state)
{
    (void)state;
    char command[512];
    snprintf(command, sizeof(command), "rm -rf '%s'", test_directory);
    return system(command) == 0 ? 0 : -1;
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_npy_v1_float32),
        cmocka_unit_test(test_npy_v2_int32_and_v3_int64),
        cmocka_unit_test(test_npy_int64_out_of_range_names_element),
        cmocka_unit_test(test_npy_header_variants),
        cmocka_unit_test(test_npy_read_file_hash_and_provenance),
        cmocka_unit_test(test_loader_names_what_a_file_looks_like),
        cmocka_unit_test(test_npy_malformed),
        cmocka_unit_test(test_safetensors_every_dtype),
        cmocka_unit_test(test_safetensors_only_tensor_and_colon_paths),
        cmocka_unit_test(test_safetensors_malformed),
        cmocka_unit_test(test_fp16_exact),
        cmocka_unit_test(test_bf16_exact),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
