/* Noise on a sibling stream: work that competes with a replayed top-k for SMs, shared memory
 * and bandwidth, so that arrival-order kernels see different schedules from run to run, as
 * they do beside a serving engine's other work.
 *
 * Kinds:
 *   gemm   four launches of our own tiled fp32 product of 2048 x 2048 matrices (~17 GFLOP
 *          each: compute-bound blocks on every SM; 2.5 ms per burst on the H200);
 *   mem    a 256 MiB device-to-device copy by a bandwidth kernel (HBM-bound, 0.14 ms);
 *   spin   blocks that hold every SM for ~200 us (clock64 loop with an iteration bound);
 *   mixed  all three, one after the other on the same stream.
 * Everything is enqueued on the caller's stream only; buffers are allocated and filled with
 * non-zero data once, in noise_create. No result is ever read back. */
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "noise.h"
#include "cuda_check.h"

#define NOISE_GEMM_N 2048
#define NOISE_GEMM_LAUNCHES 4
#define NOISE_GEMM_TILE 128   /* output tile per block */
#define NOISE_GEMM_DEPTH 8    /* k-slice staged in shared memory per step */
#define NOISE_GEMM_THREADS 256 /* 16 x 16 threads, each computing 8 x 8 outputs */
#define NOISE_COPY_BYTES (256u << 20)
#define NOISE_SPIN_MICROSECONDS 200
#define NOISE_SPIN_THREADS 128
#define NOISE_SPIN_BLOCKS_PER_SM 4

struct noise_state {
    enum noise_kind kind;
    float *gemm_a, *gemm_b, *gemm_c;
    float4 *copy_source, *copy_target;
    unsigned long long *spin_sink;
    long long spin_cycles;
    int sm_count;
};

const char *noise_kind_name(enum noise_kind kind)
{
    switch (kind) {
    case NOISE_NONE: return "none";
    case NOISE_GEMM: return "gemm";
    case NOISE_MEM: return "mem";
    case NOISE_SPIN: return "spin";
    case NOISE_MIXED: return "mixed";
    }
    return "unknown";
}

int noise_kind_parse(const char *text, enum noise_kind *kind)
{
    static const enum noise_kind kinds[] = { NOISE_NONE, NOISE_GEMM, NOISE_MEM, NOISE_SPIN,
                                             NOISE_MIXED };
    for (size_t i = 0; i < sizeof(kinds) / sizeof(kinds[0]); i++) {
        if (text && strcmp(text, noise_kind_name(kinds[i])) == 0) {
            *kind = kinds[i];
            return 0;
        }
    }
    return AUDIT_EUSAGE;
}

/* C = A * B for n x n row-major matrices, n a multiple of NOISE_GEMM_TILE. Each block computes a
 * 128 x 128 tile; each thread an 8 x 8 patch held in registers. The result is never used: the
 * point is to keep the SM's FMA pipes, registers and shared memory busy. */
static __global__ void __launch_bounds__(NOISE_GEMM_THREADS)
k_noise_gemm(const float *__restrict__ a, const float *__restrict__ b, float *__restrict__ c, int n)
{
    __shared__ float a_tile[NOISE_GEMM_DEPTH][NOISE_GEMM_TILE];
    __shared__ float b_tile[NOISE_GEMM_DEPTH][NOISE_GEMM_TILE];
    const int tx = threadIdx.x % 16, ty = threadIdx.x / 16;
    const int row0 = blockIdx.y * NOISE_GEMM_TILE, col0 = blockIdx.x * NOISE_GEMM_TILE;
    float acc[8][8] = {};
    for (int depth = 0; depth < n; depth += NOISE_GEMM_DEPTH) {
        /* 128 x 8 elements of each operand, 4 per thread. */
        for (int i = threadIdx.x; i < NOISE_GEMM_TILE * NOISE_GEMM_DEPTH; i += NOISE_GEMM_THREADS) {
            int r = i / NOISE_GEMM_DEPTH, d = i % NOISE_GEMM_DEPTH;
            a_tile[d][r] = a[(size_t)(row0 + r) * n + depth + d];
            int br = i / NOISE_GEMM_TILE, bc = i % NOISE_GEMM_TILE;
            b_tile[br][bc] = b[(size_t)(depth + br) * n + col0 + bc];
        }
        __syncthreads();
#pragma unroll
        for (int d = 0; d < NOISE_GEMM_DEPTH; d++) {
            float a_frag[8], b_frag[8];
#pragma unroll
            for (int i = 0; i < 8; i++) {
                a_frag[i] = a_tile[d][ty * 8 + i];
                b_frag[i] = b_tile[d][tx * 8 + i];
            }
#pragma unroll
            for (int i = 0; i < 8; i++)
#pragma unroll
                for (int j = 0; j < 8; j++)
                    acc[i][j] = fmaf(a_frag[i], b_frag[j], acc[i][j]);
        }
        __syncthreads();
    }
#pragma unroll
    for (int i = 0; i < 8; i++)
#pragma unroll
        for (int j = 0; j < 8; j++)
            c[(size_t)(row0 + ty * 8 + i) * n + col0 + tx * 8 + j] = acc[i][j];
}

static __global__ void k_noise_fill(float *values, size_t count, unsigned salt)
{
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < count;
         i += (size_t)gridDim.x * blockDim.x) {
        /* A cheap integer hash mapped to [0.5, 1.5): non-zero, varied, no overflow in the
         * 2048-term dot products. */
        unsigned h = (unsigned)i * 2654435761u ^ salt;
        h ^= h >> 15;
        h *= 2246822519u;
        h ^= h >> 13;
        values[i] = 0.5f + (float)(h >> 8) * (1.0f / 16777216.0f);
    }
}

static __global__ void k_noise_copy(const float4 *__restrict__ source, float4 *__restrict__ target,
                                    size_t count)
{
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < count;
         i += (size_t)gridDim.x * blockDim.x)
        target[i] = source[i];
}

/* Holds its SM slot for `cycles` clock ticks. The iteration bound keeps a block from spinning
 * forever if clock64 misbehaves (e.g. under a debugger or a sanitizer). */
static __global__ void k_noise_spin(long long cycles, unsigned long long *sink)
{
    long long start = clock64();
    long long now = start;
    unsigned long long iterations = 0;
    const unsigned long long bound = (unsigned long long)cycles; /* >= 1 cycle per iteration */
    while (now - start < cycles && iterations < bound) {
        now = clock64();
        iterations++;
    }
    if (threadIdx.x == 0)
        sink[blockIdx.x] = (unsigned long long)(now - start);
}

static bool wants(enum noise_kind kind, enum noise_kind part)
{
    return kind == part || kind == NOISE_MIXED;
}

extern "C" void noise_destroy(struct noise_state *state)
{
    if (!state)
        return;
    cudaFree(state->gemm_a);
    cudaFree(state->gemm_b);
    cudaFree(state->gemm_c);
    cudaFree(state->copy_source);
    cudaFree(state->copy_target);
    cudaFree(state->spin_sink);
    free(state);
}

extern "C" int noise_create(struct noise_state **state_out, enum noise_kind kind,
                            struct audit_error *err)
{
    int status = 0;
    int device = 0, clock_khz = 0;
    struct noise_state *state = (struct noise_state *)calloc(1, sizeof(*state));
    *state_out = NULL;
    if (!state)
        return audit_fail(err, AUDIT_ENOMEM, "noise: out of host memory");
    state->kind = kind;
    CUDA_CHECK_GOTO(cudaGetDevice(&device), err, status, error);
    CUDA_CHECK_GOTO(cudaDeviceGetAttribute(&state->sm_count, cudaDevAttrMultiProcessorCount, device),
                    err, status, error);
    if (wants(kind, NOISE_GEMM)) {
        const size_t count = (size_t)NOISE_GEMM_N * NOISE_GEMM_N;
        CUDA_CHECK_GOTO(cudaMalloc(&state->gemm_a, count * sizeof(float)), err, status, error);
        CUDA_CHECK_GOTO(cudaMalloc(&state->gemm_b, count * sizeof(float)), err, status, error);
        CUDA_CHECK_GOTO(cudaMalloc(&state->gemm_c, count * sizeof(float)), err, status, error);
        k_noise_fill<<<1024, 256>>>(state->gemm_a, count, 0x9e3779b9u);
        CUDA_CHECK_GOTO(cudaGetLastError(), err, status, error);
        k_noise_fill<<<1024, 256>>>(state->gemm_b, count, 0x85ebca6bu);
        CUDA_CHECK_GOTO(cudaGetLastError(), err, status, error);
    }
    if (wants(kind, NOISE_MEM)) {
        CUDA_CHECK_GOTO(cudaMalloc(&state->copy_source, NOISE_COPY_BYTES), err, status, error);
        CUDA_CHECK_GOTO(cudaMalloc(&state->copy_target, NOISE_COPY_BYTES), err, status, error);
        k_noise_fill<<<1024, 256>>>((float *)state->copy_source, NOISE_COPY_BYTES / sizeof(float),
                                    0xc2b2ae35u);
        CUDA_CHECK_GOTO(cudaGetLastError(), err, status, error);
    }
    if (wants(kind, NOISE_SPIN)) {
        size_t blocks = (size_t)state->sm_count * NOISE_SPIN_BLOCKS_PER_SM;
        CUDA_CHECK_GOTO(cudaDeviceGetAttribute(&clock_khz, cudaDevAttrClockRate, device), err,
                        status, error);
        if (clock_khz <= 0)
            clock_khz = 2000000; /* attribute unavailable: assume 2 GHz */
        state->spin_cycles = (long long)clock_khz * NOISE_SPIN_MICROSECONDS / 1000;
        CUDA_CHECK_GOTO(cudaMalloc(&state->spin_sink, blocks * sizeof(unsigned long long)), err,
                        status, error);
    }
    /* The fills ran on the legacy default stream; finish them before any other stream uses
     * the buffers. */
    CUDA_CHECK_GOTO(cudaDeviceSynchronize(), err, status, error);
    *state_out = state;
    return 0;
error:
    noise_destroy(state);
    audit_error_prefix(err, "noise %s", noise_kind_name(kind));
    return status;
}

extern "C" int noise_launch(struct noise_state *state, cudaStream_t stream, struct audit_error *err)
{
    if (!state || state->kind == NOISE_NONE)
        return 0;
    if (wants(state->kind, NOISE_GEMM)) {
        dim3 grid(NOISE_GEMM_N / NOISE_GEMM_TILE, NOISE_GEMM_N / NOISE_GEMM_TILE);
        for (int i = 0; i < NOISE_GEMM_LAUNCHES; i++) {
            k_noise_gemm<<<grid, NOISE_GEMM_THREADS, 0, stream>>>(state->gemm_a, state->gemm_b,
                                                                 state->gemm_c, NOISE_GEMM_N);
            CUDA_TRY(cudaGetLastError(), err);
        }
    }
    if (wants(state->kind, NOISE_MEM)) {
        size_t count = NOISE_COPY_BYTES / sizeof(float4);
        k_noise_copy<<<(unsigned)state->sm_count * 8, 512, 0, stream>>>(state->copy_source,
                                                                       state->copy_target, count);
        CUDA_TRY(cudaGetLastError(), err);
    }
    if (wants(state->kind, NOISE_SPIN)) {
        unsigned blocks = (unsigned)state->sm_count * NOISE_SPIN_BLOCKS_PER_SM;
        k_noise_spin<<<blocks, NOISE_SPIN_THREADS, 0, stream>>>(state->spin_cycles,
                                                               state->spin_sink);
        CUDA_TRY(cudaGetLastError(), err);
    }
    return 0;
}
