/* Arrays read from NumPy `.npy` files, and the host tensor that both array readers (this one and
 * src/capture/safetensors.h) fill: its dtype, shape and raw little-endian elements, where it came from,
 * and the exact conversions to the capture's fp32 scores and int32 index arrays.
 *
 * Supported `.npy`: format versions 1.0, 2.0 and 3.0; C order; descr '<f4', '<f2', '<i4', '<i8'.
 * Everything else is refused with a message naming the file and the header field at fault:
 * big-endian or ambiguous byte order, Fortran order, other dtypes, structured dtypes, a header
 * that is malformed, too long or truncated, data shorter than the shape says. The header dict is
 * parsed by a small literal parser (no evaluation). */
#ifndef DSATOPK_NPY_H
#define DSATOPK_NPY_H

#include <stddef.h>
#include <stdint.h>

#include "error.h"
#include "hash.h"

#define TENSOR_MAX_DIMS 8
/* Longest .npy header accepted (numpy's own reader stops at 10000 bytes by default). */
#define NPY_MAX_HEADER_BYTES (1u << 20)

enum tensor_dtype {
    TENSOR_DTYPE_F32,
    TENSOR_DTYPE_F16,
    TENSOR_DTYPE_BF16,
    TENSOR_DTYPE_I32,
    TENSOR_DTYPE_I64,
};

struct host_tensor {
    enum tensor_dtype dtype;
    char dtype_spelling[16];          /* as the file writes it: "<f4", "BF16", ... */
    int ndim;
    uint64_t shape[TENSOR_MAX_DIMS];
    uint64_t elements;                /* product of shape (1 for a 0-d array) */
    const uint8_t *data;              /* elements, little-endian, possibly unaligned */
    uint8_t *storage;                 /* owned bytes that data points into, or NULL (borrowed) */

    /* Provenance, for messages and the imported_from metadata. */
    char *label;                      /* "FILE" or "FILE:TENSOR" */
    char *path;                       /* file path, or NULL when parsed from memory */
    char *tensor_name;                /* safetensors entry, or NULL */
    const char *format;               /* "npy" or "safetensors" */
    char format_version[8];           /* npy "1.0"/"2.0"/"3.0", safetensors "" */
    uint8_t file_sha256[HASH_BYTES];  /* of the whole file (valid when path != NULL) */
    char *safetensors_metadata_json;  /* "__metadata__" object as JSON text, or NULL */
};

void host_tensor_free(struct host_tensor *tensor);

/* Fills the provenance strings (copies; path and tensor_name may be NULL). */
int host_tensor_set_provenance(struct host_tensor *tensor, const char *path,
                               const char *tensor_name, struct audit_error *err);

size_t tensor_dtype_size(enum tensor_dtype dtype);
/* A stable lowercase name: "float32", "float16", "bfloat16", "int32", "int64". */
const char *tensor_dtype_name(enum tensor_dtype dtype);

/* Exact widening conversions: every half and bfloat16 value, including subnormals, signed zeros,
 * infinities and NaN payloads, maps to the fp32 value with the same meaning. */
float fp16_to_fp32(uint16_t bits);
float bf16_to_fp32(uint16_t bits);

/* Converts every element to fp32 (F32 copied bit for bit, F16/BF16 widened exactly) into out
 * (tensor->elements floats). Integer tensors are refused: AUDIT_EDATA naming the tensor. */
int tensor_to_float32(const struct host_tensor *tensor, float *out, struct audit_error *err);

/* Converts every element to int32 into out. I64 values outside int32 are refused, naming the
 * tensor and the element (its multi-index and flat position). Float tensors are refused. */
int tensor_to_int32(const struct host_tensor *tensor, int32_t *out, struct audit_error *err);

/* Reads a whole regular file into a malloc'ed buffer (*bytes, *size): a FIFO, directory or
 * device is refused (AUDIT_EIO, src/common/input_file.h), a file larger than the memory cap per
 * record (capture_max_record_bytes) with AUDIT_ENOMEM. */
int tensor_read_file_bytes(const char *path, uint8_t **bytes, size_t *size,
                           struct audit_error *err);

/* Parses an in-memory .npy image. out->data points into bytes (borrowed); label names the
 * source in messages. */
int npy_parse(const uint8_t *bytes, size_t size, const char *label, struct host_tensor *out,
              struct audit_error *err);

/* Reads and parses a .npy file; out owns the file contents and carries its SHA-256. */
int npy_read_file(const char *path, struct host_tensor *out, struct audit_error *err);

#endif
