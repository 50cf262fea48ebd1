/* GPU test of the pre-filter's row hashes (kernels/runtime/output_hash.cu) against their host twin
 * (hash_output_rows64 in src/common/hash.c): `run` counts a rep as a known output when the device's row
 * hashes equal those the host kept, so the two must agree bit for bit, for every shape `run`
 * meets: one row or many, k of 1, not a multiple of the block, larger than the block, with and
 * without a raw output, outputs holding -1 padding and poison slots (0xA5A5A5A5).
 *
 * Each case fills a random output from the printed seed, hashes it on the device (its own
 * stream, as `run` does), copies rows x 8 bytes back and compares; then changes one slot on the
 * device and checks that exactly that row's hash changes.
 *
 * Usage: test_gpu_row_hash [--seed N]
 * Exit: 0 all passed, 1 any failure, 2 usage, 77 no CUDA device (skipped). */
#include <inttypes.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <cuda_runtime_api.h>

#include "cuda_check.h"
#include "gpu_device.h"
#include "hash.h"
#include "output_hash.h"
#include "topk_backends.h"

#define EXIT_SKIPPED 77
#define POISON_SLOT ((int32_t)0xA5A5A5A5)

struct hash_case {
    uint32_t rows, k;
    bool raw;
};

static const struct hash_case cases[] = {
    { 1, 1, false },    { 1, 1, true },     { 3, 5, false },    { 7, 255, true },
    { 2, 256, false },  { 5, 257, true },   { 64, 2048, false }, { 64, 2048, true },
    { 16, 1000, false }, { 4, 4097, true }, { 300, 64, false }, { 1, 65536, true },
};

static uint64_t next_value(uint64_t *state)
{
    uint64_t z = (*state += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

/* Indices, -1 padding and poison slots, as outputs hold them. */
static int32_t random_slot(uint64_t *state)
{
    const uint64_t draw = next_value(state);
    switch (draw % 16) {
    case 0: return -1;
    case 1: return POISON_SLOT;
    default: return (int32_t)((draw >> 8) % 200000);
    }
}

/* Device buffers of one case; NULL pointers are fine to free. */
struct device_case {
    int32_t *out, *raw_out;
    uint64_t *row_hashes;
};

static void device_case_free(struct device_case *device_case)
{
    cudaFree(device_case->out);
    cudaFree(device_case->raw_out);
    cudaFree(device_case->row_hashes);
    memset(device_case, 0, sizeof(*device_case));
}

/* Hashes the device output and copies the row hashes back. */
static int device_row_hashes(const struct device_case *device_case, const struct hash_case *shape,
                             cudaStream_t stream, uint64_t *host_hashes, struct audit_error *err)
{
    int status = output_hash_rows_launch(device_case->out, device_case->raw_out, shape->rows,
                                         shape->k, device_case->row_hashes, stream, err);
    if (status < 0)
        return status;
    CUDA_TRY(cudaMemcpyAsync(host_hashes, device_case->row_hashes,
                             (size_t)shape->rows * sizeof(uint64_t), cudaMemcpyDeviceToHost,
                             stream),
             err);
    CUDA_TRY(cudaStreamSynchronize(stream), err);
    return 0;
}

/* One case: device hashes equal host hashes; one changed slot changes exactly its row. Returns 0
 * passed, 1 failed (printed), or a negative code with err filled (a CUDA failure). */
static int run_case(const struct hash_case *shape, uint64_t *random_state, cudaStream_t stream,
                    struct audit_error *err)
{
    const size_t count = (size_t)shape->rows * shape->k;
    int32_t *out = malloc(count * sizeof(int32_t));
    int32_t *raw = shape->raw ? malloc(count * sizeof(int32_t)) : NULL;
    uint64_t *expected = malloc(shape->rows * sizeof(uint64_t));
    uint64_t *got = malloc(shape->rows * sizeof(uint64_t));
    struct device_case device_case = { 0 };
    int status = 0, failed = 0;
    if (!out || (shape->raw && !raw) || !expected || !got) {
        status = audit_fail(err, AUDIT_ENOMEM, "out of host memory");
        goto done;
    }
    for (size_t i = 0; i < count; i++) {
        out[i] = random_slot(random_state);
        if (raw)
            raw[i] = random_slot(random_state);
    }
    CUDA_CHECK_GOTO(cudaMalloc((void **)&device_case.out, count * sizeof(int32_t)), err, status,
                    done);
    if (raw)
        CUDA_CHECK_GOTO(cudaMalloc((void **)&device_case.raw_out, count * sizeof(int32_t)), err,
                        status, done);
    CUDA_CHECK_GOTO(cudaMalloc((void **)&device_case.row_hashes,
                               shape->rows * sizeof(uint64_t)),
                    err, status, done);
    if ((status = gpu_upload(device_case.out, out, count * sizeof(int32_t), err)) < 0 ||
        (raw && (status = gpu_upload(device_case.raw_out, raw, count * sizeof(int32_t), err)) < 0))
        goto done;

    hash_output_rows64(out, raw, shape->rows, shape->k, expected);
    status = device_row_hashes(&device_case, shape, stream, got, err);
    if (status < 0)
        goto done;
    for (uint32_t b = 0; b < shape->rows && !failed; b++) {
        if (got[b] != expected[b]) {
            printf("FAIL %u x %u%s: row %u: device %016" PRIx64 ", host %016" PRIx64 "\n",
                   shape->rows, shape->k, shape->raw ? " +raw" : "", b, got[b], expected[b]);
            failed = 1;
        }
    }

    /* One slot changed on the device (in raw_out for half the cases that have one). */
    const size_t slot = (size_t)(next_value(random_state) % count);
    const uint32_t changed_row = (uint32_t)(slot / shape->k);
    int32_t *target = raw && slot % 2 ? device_case.raw_out : device_case.out;
    const int32_t old_value = (raw && slot % 2 ? raw : out)[slot];
    const int32_t new_value = old_value == 0 ? 1 : 0;
    if ((status = gpu_upload(target + slot, &new_value, sizeof(new_value), err)) < 0)
        goto done;
    memcpy(expected, got, shape->rows * sizeof(uint64_t));
    status = device_row_hashes(&device_case, shape, stream, got, err);
    if (status < 0)
        goto done;
    for (uint32_t b = 0; b < shape->rows && !failed; b++) {
        if ((got[b] != expected[b]) != (b == changed_row)) {
            printf("FAIL %u x %u%s: after changing slot %zu (row %u), row %u's hash %s\n",
                   shape->rows, shape->k, shape->raw ? " +raw" : "", slot, changed_row, b,
                   b == changed_row ? "stayed the same" : "changed");
            failed = 1;
        }
    }
    if (!failed)
        printf("ok %u x %u%s\n", shape->rows, shape->k, shape->raw ? " +raw" : "");
    status = failed;
done:
    device_case_free(&device_case);
    free(out);
    free(raw);
    free(expected);
    free(got);
    return status;
}

int main(int argc, char **argv)
{
    struct audit_error err = { 0 };
    char why[512] = "";
    int device_count = 0;
    uint64_t seed = (uint64_t)time(NULL);
    cudaStream_t stream = NULL;
    unsigned passed = 0, failed = 0;
    int exit_code = 0;

    setvbuf(stdout, NULL, _IOLBF, 0);
    if (argc == 3 && strcmp(argv[1], "--seed") == 0) {
        char *end = NULL;
        seed = strtoull(argv[2], &end, 10);
        if (!end || *end) {
            fprintf(stderr, "usage: test_gpu_row_hash [--seed N]\n");
            return 2;
        }
    } else if (argc != 1) {
        fprintf(stderr, "usage: test_gpu_row_hash [--seed N]\n");
        return 2;
    }
    if (gpu_device_count(&device_count, why, sizeof(why)) < 0) {
        printf("FAIL: CUDA device discovery: %s\n", why);
        return 1;
    }
    if (device_count == 0) {
        printf("no CUDA device: %s; skipping\n", why[0] ? why : "none found");
        return EXIT_SKIPPED;
    }
    printf("seed %" PRIu64 " (replay with --seed %" PRIu64 ")\n", seed, seed);
    if (cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking) != cudaSuccess) {
        printf("FAIL: cannot create a stream\n");
        return 1;
    }
    uint64_t random_state = seed;
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        int status = run_case(&cases[i], &random_state, stream, &err);
        if (status < 0) {
            printf("FAIL %u x %u: %s\n", cases[i].rows, cases[i].k, err.message);
            failed++;
            break; /* a CUDA failure: later cases would only repeat it */
        }
        if (status)
            failed++;
        else
            passed++;
    }
    cudaStreamDestroy(stream);
    printf("%u passed, %u failed\n", passed, failed);
    exit_code = failed ? 1 : 0;
    return exit_code;
}
