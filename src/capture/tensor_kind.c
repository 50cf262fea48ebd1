/* Telling array files apart by their first bytes (tensor_kind.h). */
#include "tensor_kind.h"

#include <stdbool.h>
#include <stdio.h>
#include <string.h>

#include "safetensors.h"

#define SHOWN_BYTES 8

static bool is_json_space(uint8_t c)
{
    return c == ' ' || c == '\t' || c == '\n' || c == '\r';
}

/* The safetensors layout: a little-endian u64 length within the limit, then a header whose
 * first byte other than white space is '{' (the length may still promise more than the file
 * holds: the reader then says it is truncated). */
static bool looks_like_safetensors(const uint8_t *bytes, size_t size)
{
    if (size < 9)
        return false;
    uint64_t length = 0;
    for (int i = 7; i >= 0; i--)
        length = length << 8 | bytes[i];
    if (length == 0 || length > SAFETENSORS_MAX_HEADER_BYTES)
        return false;
    size_t end = 8 + (length < size - 8 ? (size_t)length : size - 8);
    for (size_t at = 8; at < end; at++)
        if (!is_json_space(bytes[at]))
            return bytes[at] == '{';
    return false;
}

enum tensor_kind tensor_kind_sniff(const uint8_t *bytes, size_t size)
{
    static const uint8_t npy_magic[6] = { 0x93, 'N', 'U', 'M', 'P', 'Y' };
    if (size == 0)
        return TENSOR_KIND_EMPTY;
    if (size >= sizeof(npy_magic) && memcmp(bytes, npy_magic, sizeof(npy_magic)) == 0)
        return TENSOR_KIND_NPY;
    /* A local file header, or the end record of an empty archive. */
    if (size >= 4 && memcmp(bytes, "PK", 2) == 0 &&
        ((bytes[2] == 3 && bytes[3] == 4) || (bytes[2] == 5 && bytes[3] == 6)))
        return memmem(bytes, size, "data.pkl", 8) ? TENSOR_KIND_TORCH_ZIP : TENSOR_KIND_ZIP;
    if (size >= 2 && bytes[0] == 0x80 && bytes[1] >= 2 && bytes[1] <= 5)
        return TENSOR_KIND_PICKLE;
    if (looks_like_safetensors(bytes, size))
        return TENSOR_KIND_SAFETENSORS;
    return TENSOR_KIND_UNKNOWN;
}

void tensor_kind_describe(enum tensor_kind kind, const uint8_t *bytes, size_t size,
                          char *out, size_t out_size)
{
    static const char save_hint[] = "save the array with numpy.save (.npy) or safetensors";
    switch (kind) {
    case TENSOR_KIND_EMPTY:
        snprintf(out, out_size, "is empty (0 bytes): not a .npy or .safetensors file");
        return;
    case TENSOR_KIND_TORCH_ZIP:
        snprintf(out, out_size, "is a zip archive holding data.pkl, as torch.save writes: "
                 "not read here (unpickling runs code); load it with torch.load and %s", save_hint);
        return;
    case TENSOR_KIND_ZIP:
        snprintf(out, out_size, "is a zip archive (numpy.savez writes .npz files so): extract "
                 "the array (numpy.load(FILE)[NAME]) and %s", save_hint);
        return;
    case TENSOR_KIND_PICKLE:
        snprintf(out, out_size, "is a Python pickle (protocol %u, as the legacy torch.save "
                 "writes): not read here (unpickling runs code); load it with torch.load and %s",
                 bytes[1], save_hint);
        return;
    case TENSOR_KIND_NPY:
    case TENSOR_KIND_SAFETENSORS:
    case TENSOR_KIND_UNKNOWN:
        break;
    }
    size_t used = (size_t)snprintf(out, out_size, "is not a .npy file (no \\x93NUMPY magic) nor a "
                                   ".safetensors file (no header length up to %llu bytes followed "
                                   "by '{'); its first bytes are",
                                   SAFETENSORS_MAX_HEADER_BYTES);
    for (size_t i = 0; i < size && i < SHOWN_BYTES && used < out_size; i++)
        used += (size_t)snprintf(out + used, out_size - used, " %02x", bytes[i]);
}
