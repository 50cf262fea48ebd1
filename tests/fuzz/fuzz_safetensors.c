/* libFuzzer harness: the .safetensors reader and the array-file loader (src/capture/safetensors.c).
 *
 * Input: one mode byte, a tensor name up to the first NUL (may be empty), then the file image.
 *   mode bit 0 clear: safetensors_parse in memory, selecting the name (NULL when empty, which
 *                     asks for the only tensor)
 *   mode bit 0 set:   tensor_file_load on an in-memory file, spec "FILE" or "FILE:NAME", which
 *                     also tries the .npy reader when the content says so (bit 1 selects
 *                     between "FILE" and "FILE:NAME")
 * A tensor that loads must satisfy fuzz_check_tensor; a refusal must be AUDIT_EDATA, AUDIT_EIO,
 * AUDIT_EUSAGE (empty name after ':') or AUDIT_ENOMEM, with a message naming the input. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "error.h"
#include "fuzz_common.h"
#include "fuzz_tensor.h"
#include "hash.h"
#include "npy.h"
#include "safetensors.h"

#define LABEL "fuzz.safetensors"
#define MAX_NAME_BYTES 256

static struct fuzz_file input_file;

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc;
    (void)argv;
    if (hash_init() != 0)
        fuzz_violation("harness setup: libsodium failed to initialise");
    fuzz_file_create(&input_file, "fuzz-safetensors");
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1)
        return 0;
    unsigned mode = data[0];
    const uint8_t *rest = data + 1;
    size_t rest_size = size - 1;
    const uint8_t *nul = memchr(rest, 0, rest_size < MAX_NAME_BYTES ? rest_size : MAX_NAME_BYTES);
    if (!nul)
        return 0; /* no name terminator: not an input of this format */
    char name[MAX_NAME_BYTES];
    size_t name_length = (size_t)(nul - rest);
    memcpy(name, rest, name_length + 1);
    const uint8_t *image = nul + 1;
    size_t image_size = rest_size - name_length - 1;

    struct host_tensor tensor;
    struct audit_error err = { 0 };
    const uint8_t *parsed_from = image;
    int status;
    char spec[MAX_NAME_BYTES + 80];
    const char *named = LABEL;
    if (mode & 1) {
        fuzz_file_set(&input_file, image, image_size);
        if (mode & 2)
            snprintf(spec, sizeof(spec), "%s:%s", input_file.path, name);
        else
            snprintf(spec, sizeof(spec), "%s", input_file.path);
        named = input_file.path;
        status = tensor_file_load(spec, &tensor, &err);
        parsed_from = tensor.storage;
        if (status == 0) {
            uint8_t digest[HASH_BYTES];
            hash_bytes(image, image_size, digest);
            if (memcmp(digest, tensor.file_sha256, HASH_BYTES) != 0)
                fuzz_violation("tensor_file_load: the file SHA-256 is not that of the file");
        }
    } else {
        status = safetensors_parse(image, image_size, LABEL, name_length ? name : NULL, &tensor,
                                   &err);
    }
    if (status == 0) {
        fuzz_check_tensor(&tensor, parsed_from, image_size);
        if (strcmp(tensor.format, "safetensors") == 0 && name_length &&
            (!(mode & 1) || (mode & 2)) &&
            (!tensor.tensor_name || strcmp(tensor.tensor_name, name) != 0))
            fuzz_violation("asked for tensor '%s', got '%s'", name,
                           tensor.tensor_name ? tensor.tensor_name : "(none)");
    } else {
        if (status != AUDIT_EDATA && status != AUDIT_EIO && status != AUDIT_ENOMEM &&
            status != AUDIT_EUSAGE)
            fuzz_violation("unexpected status %d: %s", status, err.message);
        if (!strstr(err.message, named))
            fuzz_violation("the error does not name the input: %s", err.message);
    }
    host_tensor_free(&tensor);
    return 0;
}
