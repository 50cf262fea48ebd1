/* Per-row 64-bit hashes of a top-k output: the fast pre-filter of `run` (docs/REPORT.md
 * "Distinct outputs are checked once").
 *
 * `run` replays each backend many times, and most reps of most backends give an output it has
 * already seen. Copying every output back, hashing it with SHA-256 and looking it up costs host
 * time for nothing; instead k_output_row_hash (kernels/runtime/output_hash.cu) reduces each row to
 * 64 bits on the device, only rows x 8 bytes come back, and a rep whose row hashes all equal those
 * of a known output is counted as that output (its SHA-256 and checks are reused). A rep with
 * any new row hash is copied, SHA-256'd and checked as before.
 *
 * The hash of a row is the sum (mod 2^64) over its slots of output_hash_slot(slot, value):
 * slot j < k holds out[j], slot k + j holds raw_out[j] when there is a raw output. Each slot's
 * term is a bijection of (slot, value), so a row that differs from another in one slot always
 * hashes differently; rows that differ in several slots collide with probability about 2^-64.
 * A sum is exact in any order, so the device result does not depend on the reduction order and
 * equals hash_output_rows64() in src/common/hash.c bit for bit (tests/gpu/test_gpu_row_hash.c).
 *
 * Plain C with extern "C" guards; output_hash_slot compiles for both host and device. */
#ifndef DSATOPK_OUTPUT_HASH_H
#define DSATOPK_OUTPUT_HASH_H

#include <stdint.h>

#include <cuda_runtime_api.h>

#include "error.h"

#ifdef __cplusplus
extern "C" {
#endif

#ifdef __CUDACC__
#define OUTPUT_HASH_HOST_DEVICE __host__ __device__
#else
#define OUTPUT_HASH_HOST_DEVICE
#endif

/* Any odd-looking constant: it keeps (slot 0, value 0) from mapping to 0. */
#define OUTPUT_HASH_SEED 0x6A09E667F3BCC908ull

/* (slot << 32 | value) through the MurmurHash3 64-bit finaliser: xor-shifts and odd multiplies,
 * each invertible, so the map is a bijection of the 64-bit key. slot < 2^32 (k is at most 2^20,
 * so 2k slots fit). */
static inline OUTPUT_HASH_HOST_DEVICE uint64_t output_hash_slot(uint64_t slot, int32_t value)
{
    uint64_t x = ((slot << 32) | (uint32_t)value) ^ OUTPUT_HASH_SEED;
    x ^= x >> 33;
    x *= 0xFF51AFD7ED558CCDull;
    x ^= x >> 33;
    x *= 0xC4CEB9FE1A85EC53ull;
    x ^= x >> 33;
    return x;
}

/* Enqueues the row hashes of out (rows x k int32, device) and raw_out (the same shape, or NULL)
 * into row_hashes (rows uint64, device) on stream. Allocates nothing and does not synchronise,
 * so it can follow a backend's launch on the same stream; rows == 0 launches nothing. */
int output_hash_rows_launch(const int32_t *out, const int32_t *raw_out, uint32_t rows, uint32_t k,
                            uint64_t *row_hashes, cudaStream_t stream, struct audit_error *err);

#ifdef __cplusplus
}
#endif

#endif
