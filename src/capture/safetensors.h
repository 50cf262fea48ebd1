/* Tensors read from `.safetensors` files, and the loader the commands use for any array file.
 *
 * Layout: an unsigned 64-bit little-endian header length N (at most SAFETENSORS_MAX_HEADER_BYTES),
 * N bytes of UTF-8 JSON mapping tensor names to {"dtype", "shape", "data_offsets": [begin, end]}
 * plus an optional "__metadata__" object of strings, then the data area; offsets count from the
 * start of the data area. Supported dtypes: F32, F16, BF16, I32, I64. The requested entry is
 * checked completely (dtype, shape, offsets inside the data area, end - begin equal to
 * elements x dtype size); an error names the file, the tensor and the field. */
#ifndef DSATOPK_SAFETENSORS_H
#define DSATOPK_SAFETENSORS_H

#include <stddef.h>
#include <stdint.h>

#include "error.h"
#include "npy.h"

#define SAFETENSORS_MAX_HEADER_BYTES 100000000ull

/* Parses an in-memory .safetensors image and selects tensor_name, or the only tensor when
 * tensor_name is NULL (an error lists the names when there are several). out->data points into
 * bytes (borrowed). */
int safetensors_parse(const uint8_t *bytes, size_t size, const char *label,
                      const char *tensor_name, struct host_tensor *out, struct audit_error *err);

/* Reads a file and selects one tensor as above; out owns the file contents and its SHA-256. */
int safetensors_read_file(const char *path, const char *tensor_name, struct host_tensor *out,
                          struct audit_error *err);

/* Loads "FILE" or "FILE:TENSOR". The reader is chosen by the file's first bytes
 * (tensor_kind.h): the .npy magic, or a safetensors header; anything else (empty, a zip archive,
 * a pickle, unknown bytes) is refused with AUDIT_EDATA saying what it looks like. ":TENSOR" applies to safetensors only and is split off at the first ':'
 * whose prefix names an existing file, so paths and tensor names may both contain ':'. */
int tensor_file_load(const char *spec, struct host_tensor *out, struct audit_error *err);

#endif
