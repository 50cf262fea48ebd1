/* The cluster path's loads and level-0 histogram (bitonic/cluster.cuh says what the path does):
 * the CTA's slice into registers, into shared memory for slices of 65536 elements, or by the
 * bulk copy engine for slices of 32768; each key counted in the level-0 histogram as its load
 * arrives, so that the counting runs under the rest of the slice's load. */
#ifndef DSATOPK_BITONIC_CLUSTER_LOAD_CUH
#define DSATOPK_BITONIC_CLUSTER_LOAD_CUH

#include <type_traits>

#include <cooperative_groups.h>

#include "bitonic/common.cuh"
#include "ptx/mbarrier.cuh"
#include "ptx/shared.cuh"

namespace cg = cooperative_groups;

/* A row of one slice as a cluster of one CTA, with cg::cluster_group's face: its distributed
 * shared memory is its own (map_shared_rank is the pointer itself: shared-memory loads, stores
 * and atomics instead of generic ones through mapa) and its barrier the CTA's. The cluster
 * kernel instantiated with it (k_cluster_topk, ONE) has the cluster's size as a constant, so the
 * code of larger clusters (super-bins, remote picks, the asynchronous gather) is not in it, and
 * the code only one-CTA rows take (the plateau check) is not in the kernels of larger ones. */
struct cluster_of_one {
    static __device__ __forceinline__ uint32_t num_blocks() { return 1u; }
    static __device__ __forceinline__ uint32_t block_rank() { return 0u; }
    static __device__ __forceinline__ void sync() { __syncthreads(); }
    template <typename T>
    static __device__ __forceinline__ T *map_shared_rank(T *address, uint32_t)
    {
        return address;
    }
};

/* Whether rows of one CTA of `items` keys per thread (registers and shared memory) run the
 * kernel of their own (CLUSTER_ONE_KERNELS). */
static constexpr bool cluster_one_kernel(uint32_t items)
{
    return (CLUSTER_ONE_KERNELS & (items / 16u)) != 0;
}

/* The calling CTA's cluster as `Cluster`: cg::cluster_group or cluster_of_one. */
template <typename Cluster>
static __device__ __forceinline__ Cluster this_cluster_as()
{
    if constexpr (std::is_same<Cluster, cluster_of_one>::value)
        return cluster_of_one();
    else
        return cg::this_cluster();
}

#define CLUSTER_MAX_PARTS 16u /* CTAs per cluster: non-portable above 8 on sm_90 */
#define CLUSTER_PORTABLE_PARTS 8u
/* Bins per super-bin of a level's pick (cluster_summarize): 64 super-bins of 2048 bins, so that
 * one warp reads them all from each CTA with one 8-byte load per lane. */
#define CLUSTER_SUPER_WIDTH 32u
#define CLUSTER_BULK_CHUNKS 8u /* slices of 64 keys per thread (the only ones bulk-loaded) */

/* The CTA's part of the cluster's exchange: what other CTAs read through distributed shared
 * memory, and the mbarriers. */
struct cluster_exchange {
    uint64_t gather; /* the leader's mbarrier for the gather (one arrival and the bytes) */
    uint64_t bulk[CLUSTER_BULK_CHUNKS]; /* the slice's bulk load, one mbarrier per chunk */
    /* A level's super-bins (cluster_summarize): sums of 32 consecutive bins of the CTA's
     * histogram, by level parity (a slow CTA may still read level 0's while level 1 writes). */
    uint32_t super_bins[2][BITONIC_BINS / CLUSTER_SUPER_WIDTH];
    /* The CTA's bounds, read by the cluster (cluster_level_pick): level 0's highest and lowest
     * non-empty bins ([0]), level 1's highest and lowest candidate keys ([1]); and the row's. */
    uint32_t high[2], low[2];
    uint32_t row_high[2], row_low[2];
    uint32_t row_total; /* cluster_level_pick's result, for the whole CTA */
    uint32_t ties_before;
    uint32_t claimed; /* the leader's: gather slots claimed so far, by every CTA's warps */
    uint32_t own;     /* the leader's: how many of them its own warps claimed */
    uint32_t gathered_low; /* the leader's: the least key gathered above a tie key of +0.0 */
    uint32_t trash; /* level 0's increments of non-candidates (cluster_count_level0); never read */
};

/* The order key of exact -inf: the one key that is not a candidate. Elements past the row's end
 * are loaded as -inf (load_slice_bits), so `key != CLUSTER_NO_KEY` is the candidate test. */
#define CLUSTER_NO_KEY 0x007FFFFFu
static_assert(CLUSTER_NO_KEY == (TOPK_NEG_INF_BITS ^ 0xFFFFFFFFu), "order key of -inf");
/* The order key of +0.0 (what ReLU gives every non-positive score): the head of level-0 bin
 * 1024, which also holds the positive subnormals and the least normals. */
#define CLUSTER_ZERO_KEY 0x80000000u

/* One bit per item of a thread (flags of the selection); items are compile-time indices, so the
 * words live in registers. */
template <uint32_t ITEMS>
struct cluster_flags {
    typedef typename std::conditional<(ITEMS > 32), uint64_t, uint32_t>::type word;
    static constexpr uint32_t BITS = 8 * sizeof(word);
    word words[(ITEMS + BITS - 1) / BITS];
    __device__ __forceinline__ void clear()
    {
#pragma unroll
        for (uint32_t w = 0; w < sizeof(words) / sizeof(words[0]); w++)
            words[w] = 0;
    }
    __device__ __forceinline__ void set(uint32_t i) { words[i / BITS] |= (word)1 << (i % BITS); }
    __device__ __forceinline__ void clear(uint32_t i)
    {
        words[i / BITS] &= ~((word)1 << (i % BITS));
    }
    __device__ __forceinline__ bool test(uint32_t i) const
    {
        return (words[i / BITS] >> (i % BITS)) & 1u;
    }
    __device__ __forceinline__ uint32_t count() const
    {
        uint32_t total = 0;
#pragma unroll
        for (uint32_t w = 0; w < sizeof(words) / sizeof(words[0]); w++)
            total += BITS == 64 ? (uint32_t)__popcll((uint64_t)words[w])
                                : (uint32_t)__popc((uint32_t)words[w]);
        return total;
    }
};

/* The slice element of this thread's item i: thread t's item 4g + j is element g * 2048 + 4t + j
 * (whole float4 tiles of the slice; cluster_load_slice, load_slice_bits). */
static __device__ __forceinline__ uint32_t cluster_item_element(uint32_t i)
{
    return (i / 4) * TREE_LEAF_QUANTUM + threadIdx.x * 4 + (i % 4);
}

/* Issues the loads of the CTA's slice, items as cluster_item_element lays them out (the raw
 * bits, exact -inf past the row's end). Nothing waits for them here: the level-0 histogram
 * (cluster_level0_registers) turns each into its order key as it arrives. */
template <uint32_t ITEMS>
static __device__ __forceinline__ void cluster_load_slice(const struct topk_problem &problem,
                                                          uint32_t row, uint32_t first,
                                                          uint32_t (&keys)[ITEMS])
{
    static_assert(ITEMS % 8 == 0 && ITEMS <= 64, "pairs of float4 groups, one flag bit per item");
    load_slice_bits<ITEMS>(problem, row, first, TREE_THREADS * ITEMS, keys);
}

/* Counts an order key in the level-0 histogram (its top 11 bits), unless it is CLUSTER_NO_KEY:
 * then `trash`, a counter nobody reads (almost every key is a candidate; shared_add_unless). */
static __device__ __forceinline__ void cluster_count_level0(uint32_t *histogram, uint32_t key,
                                                            uint32_t *trash)
{
    const uint32_t base = shared_address(histogram);
    shared_add_unless(base, key >> 21, key, CLUSTER_NO_KEY, (shared_address(trash) - base) / 4);
}

/* The register items' part of the level-0 histogram (zeroed and published before the loads were
 * issued): each item becomes its order key (CLUSTER_NO_KEY where there is no candidate) and is
 * counted as soon as its load arrives, so the counting runs under the rest of the row's load
 * instead of after it. */
template <uint32_t ITEMS>
static __device__ __forceinline__ void cluster_level0_registers(uint32_t (&keys)[ITEMS],
                                                                uint32_t *histogram,
                                                                uint32_t *trash)
{
#pragma unroll
    for (uint32_t i = 0; i < ITEMS; i++) {
        keys[i] = order_key_bits(keys[i]);
        cluster_count_level0(histogram, keys[i], trash);
    }
}

/* Adds the candidates matching the prefix to the CTA's histogram of the digit at `shift`;
 * key(i) gives item i of the thread (registers, then shared memory). */
template <uint32_t ITEMS, typename Key>
static __device__ __forceinline__ void cluster_histogram(Key key, uint32_t mask, uint32_t prefix,
                                                         uint32_t shift, uint32_t digit_mask,
                                                         uint32_t *histogram)
{
#pragma unroll
    for (uint32_t i = 0; i < ITEMS; i++) {
        const uint32_t k = key(i);
        shared_add_if(&histogram[(k >> shift) & digit_mask],
                      k != CLUSTER_NO_KEY && (k & mask) == prefix);
    }
}

/* The part of the CTA's slice after its first TREE_THREADS * REGISTER_ITEMS elements, as order
 * keys in shared memory: item j of thread t (element REGISTER_ITEMS * 512 + (j / 4) * 2048 +
 * 4t + j % 4, the same group-major order as the registers) at shared_keys[j * 512 + t]. Loaded
 * 16 items at a time (16 registers in flight besides the register items), each chunk added to
 * the level-0 histogram (zeroed and published before the call) while the next one loads, so
 * that the load's memory latency hides the counting. */
template <uint32_t REGISTER_ITEMS, uint32_t SHARED_ITEMS>
static __device__ __forceinline__ void cluster_load_shared(const struct topk_problem &problem,
                                                           uint32_t row, uint32_t first,
                                                           uint32_t *shared_keys,
                                                           uint32_t *histogram, uint32_t *trash)
{
#pragma unroll 1
    for (uint32_t chunk = 0; chunk < SHARED_ITEMS / 16; chunk++) {
        uint32_t bits[16];
        load_slice_bits<16>(problem, row,
                            (uint64_t)first + TREE_THREADS * (REGISTER_ITEMS + 16 * chunk),
                            TREE_THREADS * 16, bits);
#pragma unroll
        for (uint32_t j = 0; j < 16; j++) {
            const uint32_t key = order_key_bits(bits[j]);
            shared_keys[(16 * chunk + j) * TREE_THREADS + threadIdx.x] = key;
            cluster_count_level0(histogram, key, trash);
        }
    }
}

/* Starts the bulk load of the CTA's slice into `staging` (TREE_THREADS * ITEMS words) when the
 * slice is whole and 16-byte aligned: thread 0 initialises one mbarrier per chunk of
 * CLUSTER_BULK_CHUNK_ITEMS keys per thread and issues one `cp.async.bulk` per chunk, all at
 * once. Returns whether it did (the same in every thread); the caller's CTA barrier publishes
 * the mbarriers before any thread waits on them (cluster_bulk_keys). Why: loads into registers
 * keep the SM's memory pipeline at about half the HBM's share of an SM; the bulk copy engine
 * keeps a whole slice in flight without registers. */
template <uint32_t ITEMS>
static __device__ __forceinline__ bool cluster_bulk_load(const struct topk_problem &problem,
                                                         uint32_t row, uint32_t first,
                                                         uint32_t *staging, uint64_t *barriers)
{
    constexpr uint32_t CHUNKS = ITEMS / CLUSTER_BULK_CHUNK_ITEMS;
    constexpr uint32_t CHUNK_ELEMENTS = CLUSTER_BULK_CHUNK_ITEMS * TREE_THREADS;
    static_assert(ITEMS % CLUSTER_BULK_CHUNK_ITEMS == 0 && CHUNKS <= CLUSTER_BULK_CHUNKS,
                  "whole chunks, one mbarrier each");
    const int32_t signed_length = problem.lengths[row];
    const uint64_t length = signed_length > 0 ? (uint64_t)signed_length : 0u;
    const float *const base = row_window(problem, row) + first;
    if (((uintptr_t)base & 15u) != 0 || (uint64_t)first + TREE_THREADS * ITEMS > length)
        return false;
    if (threadIdx.x == 0) {
#pragma unroll
        for (uint32_t c = 0; c < CHUNKS; c++)
            mbarrier_init(shared_address(&barriers[c]), 1);
#pragma unroll
        for (uint32_t c = 0; c < CHUNKS; c++) {
            const uint32_t barrier = shared_address(&barriers[c]);
            mbarrier_expect_bytes(barrier, CHUNK_ELEMENTS * sizeof(float));
            const uint32_t destination = shared_address(staging + c * CHUNK_ELEMENTS);
            const uint32_t bytes = CHUNK_ELEMENTS * (uint32_t)sizeof(float);
            bulk_copy_to_shared(destination, base + c * CHUNK_ELEMENTS, bytes, barrier);
        }
    }
    return true;
}

/* The bulk load's keys (cluster_bulk_load): each chunk, once its mbarrier completes, into this
 * thread's registers (item 4g + j = slice element g * 2048 + 4t + j, one 16-byte shared load per
 * group) as order keys, each counted in the level-0 histogram (cluster_count_level0). */
template <uint32_t ITEMS>
static __device__ __forceinline__ void cluster_bulk_keys(const uint32_t *staging,
                                                         uint64_t *barriers,
                                                         uint32_t (&keys)[ITEMS],
                                                         uint32_t *histogram, uint32_t *trash)
{
    const uint4 *const groups = reinterpret_cast<const uint4 *>(staging);
#pragma unroll
    for (uint32_t c = 0; c < ITEMS / CLUSTER_BULK_CHUNK_ITEMS; c++) {
        mbarrier_wait(shared_address(&barriers[c]), 0);
#pragma unroll
        for (uint32_t g = c * (CLUSTER_BULK_CHUNK_ITEMS / 4);
             g < (c + 1) * (CLUSTER_BULK_CHUNK_ITEMS / 4); g++) {
            const uint4 v = groups[g * TREE_THREADS + threadIdx.x];
            keys[4 * g + 0] = v.x;
            keys[4 * g + 1] = v.y;
            keys[4 * g + 2] = v.z;
            keys[4 * g + 3] = v.w;
        }
#pragma unroll
        for (uint32_t i = c * CLUSTER_BULK_CHUNK_ITEMS; i < (c + 1) * CLUSTER_BULK_CHUNK_ITEMS;
             i++) {
            keys[i] = order_key_bits(keys[i]);
            cluster_count_level0(histogram, keys[i], trash);
        }
    }
}

#endif
