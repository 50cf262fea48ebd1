/* libFuzzer harness: the .npy reader (src/capture/npy.c).
 *
 * Input: one mode byte, then a .npy file image. Bit 0 of the mode reads it as a file
 * (npy_read_file on an in-memory file: the path, hash and provenance code), else it is parsed
 * in memory (npy_parse). A tensor that parses must satisfy fuzz_check_tensor: data inside the
 * input, elements equal to the product of the shape, exact fp32 / int32 conversions. A refusal
 * must be AUDIT_EDATA (or AUDIT_EIO / AUDIT_ENOMEM from the file path) naming the input. */
#include <string.h>

#include "error.h"
#include "fuzz_common.h"
#include "fuzz_tensor.h"
#include "hash.h"
#include "npy.h"

#define LABEL "fuzz.npy"

static struct fuzz_file input_file;

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc;
    (void)argv;
    if (hash_init() != 0)
        fuzz_violation("harness setup: libsodium failed to initialise");
    fuzz_file_create(&input_file, "fuzz-npy");
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1)
        return 0;
    const uint8_t *image = data + 1;
    size_t image_size = size - 1;
    struct host_tensor tensor;
    struct audit_error err = { 0 };
    const char *label = LABEL;
    int status;
    if (data[0] & 1) {
        fuzz_file_set(&input_file, image, image_size);
        label = input_file.path;
        status = npy_read_file(input_file.path, &tensor, &err);
        if (status == 0) {
            uint8_t digest[HASH_BYTES];
            hash_bytes(image, image_size, digest);
            if (memcmp(digest, tensor.file_sha256, HASH_BYTES) != 0)
                fuzz_violation("npy_read_file: the file SHA-256 is not that of the file");
            if (!tensor.path || strcmp(tensor.path, input_file.path) != 0)
                fuzz_violation("npy_read_file: the provenance path is wrong");
            fuzz_check_tensor(&tensor, tensor.storage, image_size);
        }
    } else {
        status = npy_parse(image, image_size, LABEL, &tensor, &err);
        if (status == 0)
            fuzz_check_tensor(&tensor, image, image_size);
    }
    if (status < 0) {
        if (status != AUDIT_EDATA && status != AUDIT_EIO && status != AUDIT_ENOMEM)
            fuzz_violation("unexpected status %d: %s", status, err.message);
        if (!strstr(err.message, label))
            fuzz_violation("the error does not name the input: %s", err.message);
    } else if (strcmp(tensor.format, "npy") != 0) {
        fuzz_violation("format is '%s', not npy", tensor.format);
    }
    host_tensor_free(&tensor);
    return 0;
}
