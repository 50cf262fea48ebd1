/* Checks shared by the .npy and .safetensors harnesses: what a parsed tensor must satisfy, and
 * that the conversions to the capture's fp32 scores and int32 indices are exact. */
#ifndef DSATOPK_FUZZ_TENSOR_H
#define DSATOPK_FUZZ_TENSOR_H

#include <stddef.h>
#include <stdint.h>

#include "npy.h"

/* Aborts (fuzz_violation) when tensor, parsed from bytes[0, size), breaks a promise of
 * src/capture/npy.h: data inside the input, elements = product of the shape, conversions exact. */
void fuzz_check_tensor(const struct host_tensor *tensor, const uint8_t *bytes, size_t size);

#endif
