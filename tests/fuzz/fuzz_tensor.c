/* The tensor checks (fuzz_tensor.h). The half and bfloat16 widening is checked against an
 * independent computation in double precision, so a wrong exponent bias, a lost subnormal or a
 * NaN payload dropped by fp16_to_fp32 / bf16_to_fp32 is a violation. */
#include <math.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "error.h"
#include "fuzz_common.h"
#include "fuzz_tensor.h"

static uint32_t float_bits(float value)
{
    uint32_t bits;
    memcpy(&bits, &value, sizeof(bits));
    return bits;
}

/* binary16 -> binary32 bits, computed through the value it denotes. */
static uint32_t expected_half(uint16_t half)
{
    uint32_t sign = (uint32_t)(half >> 15) << 31;
    uint32_t exponent = (half >> 10) & 0x1F, mantissa = half & 0x3FF;
    if (exponent == 0x1F) /* infinity, or NaN with its payload in the top mantissa bits */
        return sign | 0x7F800000u | (mantissa << 13);
    double magnitude = exponent ? ldexp(1024.0 + mantissa, (int)exponent - 25)
                                : ldexp((double)mantissa, -24);
    return sign | float_bits((float)magnitude);
}

static void check_conversions(const struct host_tensor *tensor)
{
    struct audit_error err = { 0 };
    uint64_t count = tensor->elements ? tensor->elements : 1;
    if (tensor->dtype == TENSOR_DTYPE_I32 || tensor->dtype == TENSOR_DTYPE_I64) {
        int32_t *out = malloc((size_t)count * sizeof(int32_t));
        if (!out)
            fuzz_violation("harness: out of memory");
        int status = tensor_to_int32(tensor, out, &err);
        for (uint64_t i = 0; status == 0 && i < tensor->elements; i++) {
            int64_t value = 0;
            if (tensor->dtype == TENSOR_DTYPE_I32) {
                int32_t narrow;
                memcpy(&narrow, tensor->data + 4 * i, 4); /* little-endian host assumed */
                value = narrow;
            } else {
                memcpy(&value, tensor->data + 8 * i, 8);
            }
            if (value != out[i])
                fuzz_violation("%s: element %llu converted to %d, not %lld", tensor->label,
                               (unsigned long long)i, out[i], (long long)value);
        }
        if (status < 0 && tensor->dtype == TENSOR_DTYPE_I32)
            fuzz_violation("%s: int32 tensor refused by tensor_to_int32: %s", tensor->label,
                           err.message);
        if (status < 0) {
            /* Refusing an int64 tensor is right only when some element does not fit. */
            bool outside = false;
            for (uint64_t i = 0; i < tensor->elements && !outside; i++) {
                int64_t value;
                memcpy(&value, tensor->data + 8 * i, 8);
                outside = value < INT32_MIN || value > INT32_MAX;
            }
            if (!outside)
                fuzz_violation("%s: int64 tensor refused though every element fits: %s",
                               tensor->label, err.message);
        }
        if (tensor_to_float32(tensor, (float *)out, &err) == 0)
            fuzz_violation("%s: integer tensor accepted as scores", tensor->label);
        free(out);
        return;
    }
    float *out = malloc((size_t)count * sizeof(float));
    if (!out)
        fuzz_violation("harness: out of memory");
    if (tensor_to_float32(tensor, out, &err) < 0)
        fuzz_violation("%s: float tensor refused by tensor_to_float32: %s", tensor->label,
                       err.message);
    for (uint64_t i = 0; i < tensor->elements; i++) {
        uint32_t expected;
        if (tensor->dtype == TENSOR_DTYPE_F32) {
            memcpy(&expected, tensor->data + 4 * i, 4);
        } else {
            uint16_t half;
            memcpy(&half, tensor->data + 2 * i, 2);
            expected = tensor->dtype == TENSOR_DTYPE_BF16 ? (uint32_t)half << 16
                                                          : expected_half(half);
        }
        if (float_bits(out[i]) != expected)
            fuzz_violation("%s: element %llu (%s) widened to 0x%08x, not 0x%08x", tensor->label,
                           (unsigned long long)i, tensor_dtype_name(tensor->dtype),
                           float_bits(out[i]), expected);
    }
    if (tensor_to_int32(tensor, (int32_t *)out, &err) == 0)
        fuzz_violation("%s: float tensor accepted as indices", tensor->label);
    free(out);
}

void fuzz_check_tensor(const struct host_tensor *tensor, const uint8_t *bytes, size_t size)
{
    size_t item = tensor_dtype_size(tensor->dtype);
    if (item == 0)
        fuzz_violation("parsed tensor has an unknown dtype %d", (int)tensor->dtype);
    if (tensor->ndim < 0 || tensor->ndim > TENSOR_MAX_DIMS)
        fuzz_violation("parsed tensor has %d dimensions", tensor->ndim);
    uint64_t product = 1;
    for (int d = 0; d < tensor->ndim; d++) {
        if (tensor->shape[d] && product > UINT64_MAX / tensor->shape[d])
            fuzz_violation("parsed tensor's shape overflows 64 bits");
        product *= tensor->shape[d];
    }
    if (product != tensor->elements)
        fuzz_violation("elements %llu != product of the shape %llu",
                       (unsigned long long)tensor->elements, (unsigned long long)product);
    if (!tensor->label)
        fuzz_violation("parsed tensor has no label");
    if (tensor->elements) {
        if (!tensor->data || tensor->data < bytes || tensor->data > bytes + size)
            fuzz_violation("tensor data points outside the input");
        size_t offset = (size_t)(tensor->data - bytes);
        if (tensor->elements > (size - offset) / item)
            fuzz_violation("tensor data (%llu x %zu bytes at %zu) runs past the input (%zu)",
                           (unsigned long long)tensor->elements, item, offset, size);
    }
    check_conversions(tensor);
}
