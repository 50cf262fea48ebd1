/* output_hash: per-row 64-bit hashes of a top-k output on the device, the pre-filter `run` uses
 * to skip copying back and SHA-256-hashing an output it has already seen
 * (kernels/include/output_hash.h says what the hash is and why it cannot depend on the reduction
 * order).
 *
 * Strategy: one block per row; each thread sums the slot terms of a strided part of the row
 * (out, then raw_out), warps reduce with shuffles, one thread adds the warp sums and writes the
 * row's hash. Reads rows x k x 4 bytes (twice that with raw_out) once: a few microseconds for a
 * 64 x 2048 output, against the copy and SHA-256 of the whole output on the host.
 *
 * Limits: rows <= 2^31 - 1 (grid x), k <= 2^31 (slots fit the key's upper 32 bits).
 * Determinism: exact (a sum modulo 2^64), so gpu_to_gpu: equal to hash_output_rows64 in
 * src/common/hash.c on every device. */
#include <cstdint>

#include "output_hash.h"
#include "cuda_check.h"

#define OUTPUT_HASH_THREADS 256
#define OUTPUT_HASH_WARPS (OUTPUT_HASH_THREADS / 32)

static __global__ void __launch_bounds__(OUTPUT_HASH_THREADS)
k_output_row_hash(const int32_t *__restrict__ out, const int32_t *__restrict__ raw_out, uint32_t k,
                  uint64_t *__restrict__ row_hashes)
{
    __shared__ unsigned long long warp_sums[OUTPUT_HASH_WARPS];
    const uint64_t row = blockIdx.x;
    const int32_t *out_row = out + row * k;
    const int32_t *raw_row = raw_out ? raw_out + row * k : nullptr;
    unsigned long long sum = 0;
    for (uint32_t j = threadIdx.x; j < k; j += OUTPUT_HASH_THREADS) {
        sum += output_hash_slot(j, out_row[j]);
        if (raw_row)
            sum += output_hash_slot((uint64_t)k + j, raw_row[j]);
    }
    for (int offset = 16; offset > 0; offset >>= 1)
        sum += __shfl_down_sync(0xFFFFFFFFu, sum, offset);
    if (threadIdx.x % 32 == 0)
        warp_sums[threadIdx.x / 32] = sum;
    __syncthreads();
    if (threadIdx.x == 0) {
        unsigned long long total = 0;
        for (int warp = 0; warp < OUTPUT_HASH_WARPS; warp++)
            total += warp_sums[warp];
        row_hashes[row] = total;
    }
}

extern "C" int output_hash_rows_launch(const int32_t *out, const int32_t *raw_out, uint32_t rows,
                                       uint32_t k, uint64_t *row_hashes, cudaStream_t stream,
                                       struct audit_error *err)
{
    if (rows == 0)
        return 0;
    if (!out || !row_hashes)
        return audit_fail(err, AUDIT_EUSAGE, "output_hash_rows_launch: out and row_hashes are "
                                             "required");
    if (rows > 0x7FFFFFFFu || k > 0x80000000u)
        return audit_fail(err, AUDIT_EUNSUPPORTED, "output row hashes: %u rows x k %u exceed "
                                                   "the kernel's limits", rows, k);
    k_output_row_hash<<<rows, OUTPUT_HASH_THREADS, 0, stream>>>(out, raw_out, k, row_hashes);
    CUDA_TRY(cudaGetLastError(), err);
    return 0;
}
