/* bitonic: our deterministic top-k. Output equals the CPU reference byte for byte (src/reference/reference.h)
 * on every input: level gpu_to_gpu.
 *
 * What it models: the deterministic CuTe-DSL selector of seed 003 (exact threshold by radix
 * refinement, smallest-index tie subset, canonical bitonic sort of unique composites, no candidate
 * ever dropped), written so that nothing depends on arrival order: placements come from counts and
 * prefix sums over index-ordered tiles, never from atomics racing for slots.
 *
 * One-CTA path (k > 4096, or DSATOPK_BITONIC_SPLIT=never), one 1024-thread CTA per row:
 *  1. Radix refinement on the 32-bit order key in three digits (11 + 11 + 10 bits, MSB first).
 *     Each level histograms the digit of the candidates (window minus exact -inf) that match the
 *     prefix found so far, then picks the bin holding the remaining rank by a suffix count. It
 *     stops early when a bin is taken whole (or the row has at most k candidates).
 *  2. Staging without overflow: the histogram tells exactly how many candidates match the prefix
 *     before anything is staged, so the prefix's (key, index) composites are copied to shared
 *     memory only when they fit (all of them, in index order); later levels and the final
 *     collection then read shared memory instead of the row. Rows that fit are read once; the
 *     rest once per level until their threshold bin fits (at most four times: three levels and
 *     the collection). Nothing is ever dropped: when a bin does not fit, the next level re-reads
 *     the row from global memory.
 *  3. Collection: winners (prefix above the threshold) and the first `need` ties in index order
 *     (threshold prefix, ranked by block prefix sums over tiles that are walked in index order)
 *     go to a composite buffer: (uint64)key << 32 | (0xFFFFFFFF - index). Composites are unique,
 *     so a descending bitonic sort of them (padded to a power of two >= 64 with zeros, which rank
 *     below every real composite) gives the canonical order: key descending, index ascending.
 *     Strides below 64 run in registers through warp shuffles, larger ones in shared memory.
 *  4. Output through write_output (-1 padding, page-table translation, raw_out).
 * Loads are 16 bytes wide once the window is aligned (a scalar head of up to 3 elements first).
 * Every thread reaches every barrier: tile loops have block-uniform trip counts, and their early
 * exits test totals that every thread computed identically.
 *
 * Cluster path (k <= 4096 on sm_90+ with rows of at most 16 slices: the smallest slices whose
 * grid fits one wave, else the fewest per row in several waves; see "Cluster path" below): one
 * thread-block cluster per row, one
 * kernel, the row read once into registers (and shared memory for slices of 65536), histograms
 * summed through distributed shared memory, ties written by their CTAs, the leader CTA writes
 * the rest.
 *
 * Tree path (the other k <= 4096 unless DSATOPK_BITONIC_SPLIT=never; see "Tree path" below): rows
 * cut into leaves of 8192 elements, one 512-thread CTA each; a first pass sums the row's
 * histogram of the key's top 11 bits, so that each leaf keeps only what can be in the row's top
 * k and selects its exact top k of that; the last CTA to finish among a group of siblings merges
 * their lists (the exact top k of the union), up to one root per row, which writes the output in
 * canonical order. A memset and two kernels.
 *
 * Determinism: gpu_to_gpu. Nothing depends on scheduling; the only atomics are histogram counts
 * and minima/maxima, whose results do not depend on their order, scatter cursors into buffers
 * that are then ranked by value, and arrival counters, which only decide which CTA does a merge
 * after every child has finished its part (the merge's result is a set that does not depend on
 * who computes it).
 *
 * Limits: k <= 8192 (the composite buffer, 8 * max(64, next_pow2(k)) bytes, lives in shared
 * memory next to 8.3 KiB of control: k = 8192 needs 74000 B); rows up to 2^31 - 1 elements (64-bit
 * addressing of the scores); page sizes powers of two. Launch: no allocation, no host
 * synchronisation (the one-CTA path and one-leaf trees need no scratch; a deeper tree's is
 * caller-owned, its counters zeroed by a cudaMemsetAsync in every call): capturable in a CUDA
 * graph. */
#include <atomic>
#include <type_traits>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include <cooperative_groups.h>

#include "topk_backends.h"
#include "topk_common.cuh"
#include "phase_timing.cuh"

namespace cg = cooperative_groups;

#define BITONIC_THREADS 1024
#define BITONIC_WARPS (BITONIC_THREADS / 32)
#define BITONIC_ITEMS 4 /* consecutive elements per thread per tile: one 16-byte load */
#define BITONIC_TILE (BITONIC_THREADS * BITONIC_ITEMS)
#define BITONIC_ROW_BATCH 4 /* tiles in flight per thread in the histogram-only passes */
#define BITONIC_MAX_K 8192u
#define BITONIC_BINS 2048u /* 11-bit digits; the last level has 10 bits */
#define BITONIC_MIN_SORT 64u /* the sort works on 64-value chunks, one per warp */
#define BITONIC_NO_BIN 0xFFFFFFFFu
#define BITONIC_TAKE_ALL 0xFFFFFFFFu /* `need` when every candidate of a short row is kept */

/* Shared memory: this block, then the composite buffer (composite_entries(k)), then the stage. */
struct bitonic_control {
    uint32_t histogram[BITONIC_BINS];
    uint32_t scan[2][BITONIC_WARPS]; /* warp totals of the tile scans, double buffered */
    uint32_t selected_digit, selected_above, selected_count, unused;
};

/* Digit `level` (0, 1, 2) of a key, and the mask of the prefix made of the first `level`
 * digits. */
static __device__ __forceinline__ uint32_t digit_shift(int level)
{
    return level == 0 ? 21u : level == 1 ? 10u : 0u;
}
static __device__ __forceinline__ uint32_t digit_bins(int level)
{
    return level == 2 ? 1024u : 2048u;
}
static __device__ __forceinline__ uint32_t prefix_mask(int level)
{
    return level == 0 ? 0u : level == 1 ? 0xFFE00000u : level == 2 ? 0xFFFFFC00u : 0xFFFFFFFFu;
}

static __device__ __forceinline__ uint64_t make_composite(uint32_t key, uint32_t index)
{
    return ((uint64_t)key << 32) | (uint64_t)(0xFFFFFFFFu - index);
}

/* Adds one to histogram[bin] unless bin is BITONIC_NO_BIN. Plain shared atomics: measured on the
 * H200 (64 x 131072, k = 512), merging equal bins first was slower on every family, plateaus
 * included (__match_any_sync: +110% on random rows; two ballot rounds: +60%). */
static __device__ __forceinline__ void histogram_add(uint32_t *histogram, uint32_t bin)
{
    if (bin != BITONIC_NO_BIN)
        atomicAdd(&histogram[bin], 1u);
}

/* The inclusive prefix sum of `value` over the lanes of a full warp, in lane order. */
static __device__ __forceinline__ uint32_t warp_inclusive_sum(uint32_t value)
{
    const uint32_t lane = threadIdx.x & 31;
#pragma unroll
    for (int offset = 1; offset < 32; offset <<= 1) {
        const uint32_t other = __shfl_up_sync(0xFFFFFFFFu, value, offset);
        if (lane >= (uint32_t)offset)
            value += other;
    }
    return value;
}

/* Block-wide exclusive prefix sum of one value per thread, in thread order, with the block total,
 * for a block of WARPS warps. One barrier; the warp totals alternate between two buffers so that
 * the next call may start writing while slow threads still read this call's buffer (they read
 * before they reach the next call's barrier). Every thread must call it. */
template <uint32_t WARPS>
static __device__ __forceinline__ uint32_t block_exclusive_sum_of(uint32_t value,
                                                                  uint32_t (&scan)[2][WARPS],
                                                                  uint32_t &parity,
                                                                  uint32_t &total)
{
    const uint32_t lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    const uint32_t inclusive = warp_inclusive_sum(value);
    if (lane == 31)
        scan[parity][warp] = inclusive;
    __syncthreads();
    uint32_t warp_total = lane < WARPS ? scan[parity][lane] : 0;
    uint32_t warps_inclusive = warp_inclusive_sum(warp_total);
    uint32_t warp_exclusive = __shfl_sync(0xFFFFFFFFu, warps_inclusive - warp_total, warp);
    total = __shfl_sync(0xFFFFFFFFu, warps_inclusive, 31);
    parity ^= 1;
    return warp_exclusive + inclusive - value;
}

/* The same for the one-CTA path's 1024-thread block. */
static __device__ __forceinline__ uint32_t block_exclusive_sum(uint32_t value,
                                                               bitonic_control &control,
                                                               uint32_t &parity, uint32_t &total)
{
    return block_exclusive_sum_of<BITONIC_WARPS>(value, control.scan, parity, total);
}

/* The row as tiles walked in index order. Tile 0 is the scalar head that brings the window to a
 * 16-byte boundary (thread t holds element t < head); tile i > 0 gives thread t the elements
 * head + (i-1) * TILE + 4t .. +3. Every thread walks every tile (barriers inside loops). */
struct row_tiles {
    const float *window;
    uint32_t length, head, count;
};

static __device__ __forceinline__ row_tiles make_row_tiles(const float *window, uint32_t length)
{
    row_tiles tiles;
    uint32_t misaligned = (uint32_t)(((uintptr_t)window >> 2) & 3u);
    uint32_t head = misaligned ? 4u - misaligned : 0u;
    tiles.window = window;
    tiles.length = length;
    tiles.head = head < length ? head : length;
    tiles.count = 1u + (length - tiles.head + BITONIC_TILE - 1) / BITONIC_TILE;
    return tiles;
}

/* One thread's share of a tile: the raw float bits of up to 4 consecutive elements starting at
 * window index `first`, `valid` of them real. */
struct tile_items {
    uint32_t bits[BITONIC_ITEMS];
    uint32_t first, valid;
};

static __device__ __forceinline__ void load_tile(const row_tiles &tiles, uint32_t tile,
                                                 tile_items &items)
{
    if (tile == 0) {
        items.first = threadIdx.x;
        items.valid = threadIdx.x < tiles.head ? 1u : 0u;
        if (items.valid)
            items.bits[0] = __float_as_uint(__ldg(tiles.window + items.first));
        return;
    }
    items.first = tiles.head + (tile - 1) * BITONIC_TILE + threadIdx.x * BITONIC_ITEMS;
    if (items.first + BITONIC_ITEMS <= tiles.length) {
        float4 quad = __ldg(reinterpret_cast<const float4 *>(tiles.window + items.first));
        items.bits[0] = __float_as_uint(quad.x);
        items.bits[1] = __float_as_uint(quad.y);
        items.bits[2] = __float_as_uint(quad.z);
        items.bits[3] = __float_as_uint(quad.w);
        items.valid = BITONIC_ITEMS;
        return;
    }
    items.valid = items.first < tiles.length ? tiles.length - items.first : 0;
#pragma unroll
    for (uint32_t j = 0; j < BITONIC_ITEMS; j++) /* constant indices keep bits in registers */
        if (j < items.valid)
            items.bits[j] = __float_as_uint(__ldg(tiles.window + items.first + j));
}

/* Walks the tiles with the next tile's load in flight while the current one is processed (one
 * 16-byte load per thread is too little to cover the memory latency). */
struct tile_walker {
    tile_items current, next;
    uint32_t tile;

    __device__ __forceinline__ explicit tile_walker(const row_tiles &tiles)
        : current(), next(), tile(0)
    {
        load_tile(tiles, 0, next);
    }
    /* Makes tile `tile` current and starts loading the one after it. */
    __device__ __forceinline__ void advance(const row_tiles &tiles)
    {
        current = next;
        if (tile + 1 < tiles.count)
            load_tile(tiles, tile + 1, next);
    }
};

/* What a pass needs to know about the refinement so far: candidates whose masked key is above
 * `prefix` are winners, equal ones are still in play (ties once the refinement is final). */
struct refinement {
    uint32_t mask, prefix;
    int level;
};

/* Histogram of digit `level` over the candidates of the row that match the prefix. Order does not
 * matter here, so BITONIC_ROW_BATCH tiles are loaded before any is counted: more bytes in flight
 * per thread, which is what a single block streaming a long row is limited by. */
static __device__ void histogram_row(const row_tiles &tiles, const refinement &state,
                                     uint32_t *histogram)
{
    const uint32_t shift = digit_shift(state.level), bins = digit_bins(state.level);
    for (uint32_t tile = 0; tile < tiles.count; tile += BITONIC_ROW_BATCH) {
        tile_items batch[BITONIC_ROW_BATCH];
#pragma unroll
        for (uint32_t q = 0; q < BITONIC_ROW_BATCH; q++) {
            batch[q].valid = 0;
            if (tile + q < tiles.count)
                load_tile(tiles, tile + q, batch[q]);
        }
#pragma unroll
        for (uint32_t q = 0; q < BITONIC_ROW_BATCH; q++) {
#pragma unroll
            for (uint32_t j = 0; j < BITONIC_ITEMS; j++) {
                uint32_t bits = batch[q].bits[j];
                if (j < batch[q].valid && is_candidate_bits(bits)) {
                    uint32_t key = order_key_bits(bits);
                    if ((key & state.mask) == state.prefix)
                        histogram_add(histogram, (key >> shift) & (bins - 1));
                }
            }
        }
    }
}

/* One pass over the row that (a) writes every winner (above the prefix) to the composite buffer
 * at winners_base + its rank, (b) copies every candidate matching the prefix to the stage in
 * index order and (c) histograms their digit. Returns how many were staged. expected_winners and
 * expected_matches (exact counts, or BITONIC_TAKE_ALL when unknown) let the pass stop early. */
static __device__ uint32_t stage_row(const row_tiles &tiles, const refinement &state,
                                     bitonic_control &control, uint64_t *composites,
                                     uint64_t *stage, uint32_t stage_capacity,
                                     uint32_t composite_capacity, uint32_t expected_winners,
                                     uint32_t expected_matches, uint32_t &parity)
{
    const uint32_t shift = digit_shift(state.level), bins = digit_bins(state.level);
    uint32_t winners_seen = 0, staged = 0;
    tile_walker walker(tiles);
    for (; walker.tile < tiles.count; walker.tile++) {
        walker.advance(tiles);
        const uint32_t *bits = walker.current.bits;
        const uint32_t valid = walker.current.valid;
        const uint32_t first = walker.current.first;
        uint32_t keys[BITONIC_ITEMS];
        uint32_t winner_flags = 0, match_flags = 0;
#pragma unroll
        for (uint32_t j = 0; j < BITONIC_ITEMS; j++) {
            keys[j] = order_key_bits(bits[j]);
            uint32_t bin = BITONIC_NO_BIN;
            if (j < valid && is_candidate_bits(bits[j])) {
                uint32_t masked = keys[j] & state.mask;
                if (masked > state.prefix) {
                    winner_flags |= 1u << j;
                } else if (masked == state.prefix) {
                    match_flags |= 1u << j;
                    bin = (keys[j] >> shift) & (bins - 1);
                }
            }
            histogram_add(control.histogram, bin);
        }
        /* Both counts of a tile are at most 4096: pack them into one scan. */
        uint32_t tile_total;
        uint32_t packed = ((uint32_t)__popc(winner_flags) << 16) | (uint32_t)__popc(match_flags);
        uint32_t before = block_exclusive_sum(packed, control, parity, tile_total);
        uint32_t winner_slot = winners_seen + (before >> 16);
        uint32_t stage_slot = staged + (before & 0xFFFFu);
#pragma unroll
        for (uint32_t j = 0; j < BITONIC_ITEMS; j++) {
            if (winner_flags & (1u << j)) {
                if (winner_slot < composite_capacity)
                    composites[winner_slot] = make_composite(keys[j], first + j);
                winner_slot++;
            } else if (match_flags & (1u << j)) {
                if (stage_slot < stage_capacity)
                    stage[stage_slot] = make_composite(keys[j], first + j);
                stage_slot++;
            }
        }
        winners_seen += tile_total >> 16;
        staged += tile_total & 0xFFFFu;
        if (winners_seen == expected_winners && staged == expected_matches)
            break; /* uniform: every thread holds the same totals */
    }
    return staged;
}

/* Histogram of digit `level` over the staged composites that match the prefix. */
static __device__ void histogram_stage(const uint64_t *stage, uint32_t staged,
                                       const refinement &state, uint32_t *histogram)
{
    const uint32_t shift = digit_shift(state.level), bins = digit_bins(state.level);
    for (uint32_t base = 0; base < staged; base += BITONIC_TILE) {
#pragma unroll
        for (uint32_t j = 0; j < BITONIC_ITEMS; j++) {
            uint32_t position = base + threadIdx.x * BITONIC_ITEMS + j;
            uint32_t bin = BITONIC_NO_BIN;
            if (position < staged) {
                uint32_t key = (uint32_t)(stage[position] >> 32);
                if ((key & state.mask) == state.prefix)
                    bin = (key >> shift) & (bins - 1);
            }
            histogram_add(histogram, bin);
        }
    }
}

/* Final collection from the row: winners at winners_base + rank, the first `need` ties (in index
 * order) at winners_total + rank. Returns the number of ties seen (>= need unless the row ran
 * out). */
static __device__ uint32_t collect_row(const row_tiles &tiles, const refinement &state,
                                       bitonic_control &control, uint64_t *composites,
                                       uint32_t composite_capacity, uint32_t winners_total,
                                       uint32_t need, uint32_t &parity)
{
    uint32_t winners_seen = 0, ties_seen = 0;
    tile_walker walker(tiles);
    for (; walker.tile < tiles.count; walker.tile++) {
        walker.advance(tiles);
        const uint32_t *bits = walker.current.bits;
        const uint32_t valid = walker.current.valid;
        const uint32_t first = walker.current.first;
        uint32_t keys[BITONIC_ITEMS];
        uint32_t winner_flags = 0, tie_flags = 0;
#pragma unroll
        for (uint32_t j = 0; j < BITONIC_ITEMS; j++) {
            keys[j] = order_key_bits(bits[j]);
            if (j < valid && is_candidate_bits(bits[j])) {
                uint32_t masked = keys[j] & state.mask;
                if (masked > state.prefix)
                    winner_flags |= 1u << j;
                else if (masked == state.prefix)
                    tie_flags |= 1u << j;
            }
        }
        uint32_t tile_total;
        uint32_t packed = ((uint32_t)__popc(winner_flags) << 16) | (uint32_t)__popc(tie_flags);
        uint32_t before = block_exclusive_sum(packed, control, parity, tile_total);
        uint32_t winner_slot = winners_seen + (before >> 16);
        uint32_t tie_rank = ties_seen + (before & 0xFFFFu);
#pragma unroll
        for (uint32_t j = 0; j < BITONIC_ITEMS; j++) {
            if (winner_flags & (1u << j)) {
                if (winner_slot < composite_capacity)
                    composites[winner_slot] = make_composite(keys[j], first + j);
                winner_slot++;
            } else if (tie_flags & (1u << j)) {
                uint32_t slot = winners_total + tie_rank;
                if (tie_rank < need && slot < composite_capacity)
                    composites[slot] = make_composite(keys[j], first + j);
                tie_rank++;
            }
        }
        winners_seen += tile_total >> 16;
        ties_seen += tile_total & 0xFFFFu;
        if (need != BITONIC_TAKE_ALL && winners_seen == winners_total && ties_seen >= need)
            break; /* uniform */
    }
    return ties_seen;
}

/* Final collection from the stage (index order): winners continue at winners_base. */
static __device__ uint32_t collect_stage(const uint64_t *stage, uint32_t staged,
                                         const refinement &state, bitonic_control &control,
                                         uint64_t *composites, uint32_t composite_capacity,
                                         uint32_t winners_base, uint32_t winners_total,
                                         uint32_t need, uint32_t &parity)
{
    uint32_t winners_seen = winners_base, ties_seen = 0;
    for (uint32_t base = 0; base < staged; base += BITONIC_TILE) {
        uint64_t entries[BITONIC_ITEMS];
        uint32_t winner_flags = 0, tie_flags = 0;
#pragma unroll
        for (uint32_t j = 0; j < BITONIC_ITEMS; j++) {
            uint32_t position = base + threadIdx.x * BITONIC_ITEMS + j;
            entries[j] = position < staged ? stage[position] : 0;
            if (position < staged) {
                uint32_t masked = (uint32_t)(entries[j] >> 32) & state.mask;
                if (masked > state.prefix)
                    winner_flags |= 1u << j;
                else if (masked == state.prefix)
                    tie_flags |= 1u << j;
            }
        }
        uint32_t tile_total;
        uint32_t packed = ((uint32_t)__popc(winner_flags) << 16) | (uint32_t)__popc(tie_flags);
        uint32_t before = block_exclusive_sum(packed, control, parity, tile_total);
        uint32_t winner_slot = winners_seen + (before >> 16);
        uint32_t tie_rank = ties_seen + (before & 0xFFFFu);
#pragma unroll
        for (uint32_t j = 0; j < BITONIC_ITEMS; j++) {
            if (winner_flags & (1u << j)) {
                if (winner_slot < composite_capacity)
                    composites[winner_slot] = entries[j];
                winner_slot++;
            } else if (tie_flags & (1u << j)) {
                uint32_t slot = winners_total + tie_rank;
                if (tie_rank < need && slot < composite_capacity)
                    composites[slot] = entries[j];
                tie_rank++;
            }
        }
        winners_seen += tile_total >> 16;
        ties_seen += tile_total & 0xFFFFu;
        if (winners_seen == winners_total && ties_seen >= need)
            break; /* uniform */
    }
    return ties_seen;
}

/* Picks the bin that holds the rank-th largest (rank >= 1) of the histogram: the bin d with
 * above(d) < rank <= above(d) + count(d), where above(d) sums the bins with larger digits.
 * Thread t owns bins (bins-1-2t, bins-2-2t), so a thread-order prefix sum is a suffix sum over
 * digits. Returns the histogram total; when it is >= rank, control.selected_* hold the bin. */
static __device__ uint32_t select_bin(bitonic_control &control, uint32_t bins, uint32_t rank,
                                      uint32_t &parity)
{
    const uint32_t high = bins - 1 - 2 * threadIdx.x, low = high - 1;
    const bool owns = 2 * threadIdx.x < bins;
    uint32_t count_high = owns ? control.histogram[high] : 0;
    uint32_t count_low = owns ? control.histogram[low] : 0;
    uint32_t total;
    uint32_t above = block_exclusive_sum(count_high + count_low, control, parity, total);
    if (owns && above < rank && rank <= above + count_high) {
        control.selected_digit = high;
        control.selected_above = above;
        control.selected_count = count_high;
    } else if (owns && above + count_high < rank && rank <= above + count_high + count_low) {
        control.selected_digit = low;
        control.selected_above = above + count_high;
        control.selected_count = count_low;
    }
    __syncthreads();
    return total;
}

static __device__ void clear_histogram(bitonic_control &control)
{
    for (uint32_t i = threadIdx.x; i < BITONIC_BINS; i += BITONIC_THREADS)
        control.histogram[i] = 0;
    __syncthreads();
}

/* Where the refinement stands, identical in every thread. */
struct selection {
    refinement state;
    uint32_t remaining;      /* rank still to select among the candidates matching the prefix */
    uint32_t matching;       /* candidates matching the prefix (an upper bound at level 0) */
    uint32_t need;           /* ties to take once final */
    uint32_t winners_total;  /* candidates above the final prefix */
    bool is_final;
};

/* Consumes the histogram of the current level. */
static __device__ void refine(selection &s, bitonic_control &control, uint32_t k,
                              uint32_t &parity)
{
    uint32_t total = select_bin(control, digit_bins(s.state.level), s.remaining, parity);
    if (total <= s.remaining) {
        /* Only at level 0 (later levels have more matches than remaining): at most k
         * candidates, all of them kept. */
        s.need = total;
        s.winners_total = k - s.remaining;
        s.is_final = true;
        return;
    }
    uint32_t digit = control.selected_digit;
    s.remaining -= control.selected_above;
    s.matching = control.selected_count;
    s.state.prefix |= digit << digit_shift(s.state.level);
    s.state.level++;
    s.state.mask = prefix_mask(s.state.level);
    if (s.remaining == s.matching || s.state.level == 3) {
        s.need = s.remaining;
        s.winners_total = k - s.remaining;
        s.is_final = true;
    }
}

/* Bitonic steps of block size `size` for strides first_stride .. 1 (first_stride <= 32) on one
 * warp's chunk of 64 values held in registers: lane l holds elements base + l (low) and
 * base + 32 + l (high). Stride 32 pairs a lane's own two values; smaller strides pair lanes
 * through shuffles. Element i of the pair (i, i ^ stride) with the lower index keeps the larger
 * value when (i & size) == 0 (descending run), the smaller otherwise. */
static __device__ __forceinline__ void warp_bitonic_steps(uint64_t &low, uint64_t &high,
                                                          uint32_t base, uint32_t size,
                                                          uint32_t first_stride)
{
    const uint32_t lane = threadIdx.x & 31;
    const bool low_descending = ((base + lane) & size) == 0;
    const bool high_descending = ((base + 32 + lane) & size) == 0;
    for (uint32_t stride = first_stride; stride > 0; stride >>= 1) {
        if (stride == 32) {
            uint64_t larger = low > high ? low : high, smaller = low > high ? high : low;
            low = low_descending ? larger : smaller;
            high = low_descending ? smaller : larger;
        } else {
            const bool lower_of_pair = (lane & stride) == 0;
            uint64_t other_low = __shfl_xor_sync(0xFFFFFFFFu, low, stride);
            uint64_t other_high = __shfl_xor_sync(0xFFFFFFFFu, high, stride);
            bool keep_larger = lower_of_pair == low_descending;
            low = keep_larger == (low > other_low) ? low : other_low;
            keep_larger = lower_of_pair == high_descending;
            high = keep_larger == (high > other_high) ? high : other_high;
        }
    }
}

/* Descending bitonic sort of count values in shared memory (count a power of two, >= 64). Strides
 * of 64 and more go through shared memory with a barrier each; the smaller ones run on 64-value
 * chunks in registers, one warp per chunk (no barriers): for k = 2048, 20 barriers instead of
 * 66 and a third of the shared-memory traffic. */
template <uint32_t THREADS>
static __device__ void sort_descending(uint64_t *values, uint32_t count)
{
    const uint32_t lane = threadIdx.x & 31, warp = threadIdx.x >> 5, warps = THREADS / 32;
    for (uint32_t chunk = warp * 64; chunk < count; chunk += warps * 64) {
        uint64_t low = values[chunk + lane], high = values[chunk + 32 + lane];
        for (uint32_t size = 2; size <= 64; size <<= 1)
            warp_bitonic_steps(low, high, chunk, size, size >> 1);
        values[chunk + lane] = low;
        values[chunk + 32 + lane] = high;
    }
    __syncthreads();
    for (uint32_t size = 128; size <= count; size <<= 1) {
        for (uint32_t stride = size >> 1; stride >= 64; stride >>= 1) {
            for (uint32_t i = threadIdx.x; i < count / 2; i += THREADS) {
                uint32_t first = 2 * i - (i & (stride - 1)), second = first + stride;
                bool descending = (first & size) == 0;
                uint64_t a = values[first], b = values[second];
                if (descending ? a < b : a > b) {
                    values[first] = b;
                    values[second] = a;
                }
            }
            __syncthreads();
        }
        for (uint32_t chunk = warp * 64; chunk < count; chunk += warps * 64) {
            uint64_t low = values[chunk + lane], high = values[chunk + 32 + lane];
            warp_bitonic_steps(low, high, chunk, size, 32);
            values[chunk + lane] = low;
            values[chunk + 32 + lane] = high;
        }
        __syncthreads();
    }
}

static __global__ void __launch_bounds__(BITONIC_THREADS)
k_bitonic_topk(const struct topk_problem problem, uint32_t composite_capacity,
               uint32_t stage_capacity)
{
    extern __shared__ uint64_t shared_words[];
    bitonic_control &control = *reinterpret_cast<bitonic_control *>(shared_words);
    uint64_t *composites = shared_words + sizeof(bitonic_control) / sizeof(uint64_t);
    uint64_t *stage = composites + composite_capacity;

    const uint32_t row = blockIdx.x, k = problem.shape.k;
    const int32_t signed_length = problem.lengths[row];
    const uint32_t length = signed_length > 0 ? (uint32_t)signed_length : 0u;
    const row_tiles tiles = make_row_tiles(row_window(problem, row), length);
    uint32_t parity = 0;

    selection s;
    s.state.mask = 0;
    s.state.prefix = 0;
    s.state.level = 0;
    s.remaining = k;
    s.matching = length;
    s.need = BITONIC_TAKE_ALL;
    s.winners_total = 0;
    s.is_final = length <= k; /* every candidate is kept: one collection pass */

    bool staged = false;
    uint32_t staged_count = 0, staged_winners = 0;
    while (!s.is_final) {
        clear_histogram(control);
        if (s.matching <= stage_capacity) {
            /* Winners above the current prefix are final now: the row is not read again. */
            uint32_t expected_winners = k - s.remaining;
            uint32_t expected_matches = s.state.level == 0 ? length : s.matching;
            staged_count = stage_row(tiles, s.state, control, composites, stage, stage_capacity,
                                     composite_capacity, expected_winners, expected_matches,
                                     parity);
            staged_winners = expected_winners;
            staged = true;
        } else {
            histogram_row(tiles, s.state, control.histogram);
        }
        __syncthreads();
        refine(s, control, k, parity);
        if (staged)
            break;
    }
    while (staged && !s.is_final) {
        clear_histogram(control);
        histogram_stage(stage, staged_count, s.state, control.histogram);
        __syncthreads();
        refine(s, control, k, parity);
    }

    uint32_t ties_seen;
    if (staged)
        ties_seen = collect_stage(stage, staged_count, s.state, control, composites,
                                  composite_capacity, staged_winners, s.winners_total, s.need,
                                  parity);
    else
        ties_seen = collect_row(tiles, s.state, control, composites, composite_capacity,
                                s.winners_total, s.need, parity);
    const uint32_t selected = s.winners_total + (ties_seen < s.need ? ties_seen : s.need);

    /* Pad to a power of two with zeros: below every real composite (index < 2^31 makes the low
     * word >= 2^31). */
    if (selected > 1) {
        uint32_t padded = BITONIC_MIN_SORT;
        while (padded < selected)
            padded <<= 1;
        for (uint32_t i = selected + threadIdx.x; i < padded; i += BITONIC_THREADS)
            composites[i] = 0;
        __syncthreads();
        sort_descending<BITONIC_THREADS>(composites, padded);
    } else {
        __syncthreads();
    }

    for (uint32_t j = threadIdx.x; j < k; j += BITONIC_THREADS) {
        int32_t index = -1;
        if (j < selected)
            index = (int32_t)(0xFFFFFFFFu - (uint32_t)composites[j]);
        write_output(problem, row, j, index);
    }
}

/* ---- Tree path: rows cut into leaves, merged up a tree -------------------------------------
 *
 * One CTA per row leaves most SMs idle when rows are few and long, and a call then lasts as long
 * as one SM streaming one row. The tree path cuts every row into leaves of at most 8192
 * consecutive elements, one 512-thread CTA each (a flattened grid of rows * leaves CTAs):
 *
 *   pass 1  (rows of more than one leaf) every CTA histograms digit 0 of its leaf (the key's top
 *           11 bits) and adds the non-zero bins to the row's histogram in scratch (integer
 *           atomics: the sums do not depend on their order);
 *   leaf    every CTA loads its leaf into registers (16 composites per thread) and, from the
 *           row's histogram, drops the candidates in bins below the one that holds the row's
 *           k-th largest (they cannot be in the row's top k: on random rows of 131072 a leaf
 *           keeps a few hundred). It selects the exact top min(k, kept) of the leaf and writes
 *           them (unsorted) to its node list in scratch, with their count;
 *   merge   leaves are grouped fan_in = min(64, 8192 / k) at a time under a parent node (then
 *           parents under grandparents, up to one root per row). The CTA that arrives last at a
 *           parent's counter loads the children's lists (at most fan_in * k <= 8192 composites:
 *           the same registers), selects their top k and writes the parent's list;
 *   root    the CTA that completes the root writes its selection in canonical order: by bucket
 *           ranks where the selection spreads out, by the one-CTA path's bitonic sort where it
 *           does not (ties, plateaus).
 *
 * Why it is exact and deterministic: every candidate is a unique composite (key << 32 | ~index),
 * so the top k of a node is one well-defined set whatever the order its members were found in; a
 * parent's top k is the top k of the union of its children's top-k sets (anything outside a
 * child's top k has k larger composites in that child alone); by induction the root holds the
 * row's top k, and the order of unique composites is fixed. Selection is by counts (a radix
 * refinement over the 64 bits of the composite, 11/11/10/11/11/10-bit digits, stopping when the
 * remaining rank takes a whole bin), never by arrival order; where a CTA writes an entry in a
 * list does depend on thread order, but lists are sets: the next step reads them whole.
 *
 * "Arrives last": the CTA synchronises, one thread fences and adds 1 to the parent's counter;
 * the CTA that reads children - 1 continues, the others exit. Nothing waits for another CTA, so
 * no co-residency is needed (no spin barrier, no cooperative launch: the design that hung on
 * SM120/121 in flashinfer #3610), and a graph replays it as a memset node (counters and row
 * histograms) and two kernel nodes; rows of one leaf need only the tree kernel.
 *
 * Leaves never overflow: a leaf holds at most 8192 elements and a merge at most fan_in * k <= 8192
 * composites, both in registers, and a list holds at most k entries by construction. */

#define TREE_THREADS 512u
#define TREE_WARPS (TREE_THREADS / 32u)
#define TREE_ITEMS 16u                            /* composites per thread */
#define TREE_CAPACITY (TREE_THREADS * TREE_ITEMS) /* 8192: leaf elements, merge inputs */
#define TREE_LEAF_QUANTUM (TREE_THREADS * 4u)     /* leaves are whole float4 tiles: 2048 */
#define TREE_MAX_K (TREE_CAPACITY / 2u)           /* a merge takes two children at least */
#define TREE_MAX_FAN_IN 64u /* children per parent: bounds the counts staged per merge */
#define TREE_MAX_LEVELS 16u
/* Entries per thread that the output stage's loops take at a time (tree_bucket_place,
 * tree_output_by_buckets, the cluster leader's count); a -D to measure others. */
#ifndef OUTPUT_BATCH
#define OUTPUT_BATCH 2u
#endif
#define TREE_BUCKET_LIMIT 64u /* the root's output by buckets: largest bucket it ranks by scans */
#define TREE_DIGITS 6

static_assert(BITONIC_BINS % TREE_THREADS == 0 && BITONIC_BINS / TREE_THREADS <= 4,
              "each thread owns at most four bins of a digit");

/* How a shape is cut (host and device): level 0 holds the leaves, the last level the root. */
struct tree_plan {
    uint32_t leaf_elements;                 /* a multiple of TREE_LEAF_QUANTUM, <= capacity */
    uint32_t fan_in;                        /* children per parent: min(64, TREE_CAPACITY / k) */
    uint32_t levels;                        /* 1: the leaf is the root (no scratch) */
    uint32_t nodes_per_row;                 /* every level */
    uint32_t nodes[TREE_MAX_LEVELS];        /* nodes per row at each level */
    uint32_t first_node[TREE_MAX_LEVELS];   /* row-local number of a level's first node */
};

/* Device views of the scratch of one call (layout in tree_layout_of below); per row and node:
 * the arrival counter (zeroed by the call's memset), the list's count and its k slots. */
struct tree_scratch {
    uint32_t *arrivals; /* rows * nodes_per_row */
    uint32_t *counts;   /* rows * nodes_per_row */
    uint64_t *lists;    /* rows * nodes_per_row * k */
    uint32_t *row_histograms; /* rows * 2048: digit 0 over the row (zeroed); NULL: one leaf */
    tree_plan plan;
};

struct tree_shared {
    uint32_t histogram[BITONIC_BINS];
    uint32_t bucket_start[BITONIC_BINS];    /* the root's output: first rank of each bucket */
    uint32_t sub_start[BITONIC_BINS];       /* ... and of each sub-bucket of one large bucket */
    uint32_t sub_sizes[BITONIC_BINS];
    uint64_t reduce_high[TREE_WARPS], reduce_low[TREE_WARPS];
    uint32_t child_first[TREE_MAX_FAN_IN];  /* a parent's children: first entry in the packing */
    uint32_t scan[2][TREE_WARPS];
    /* One 16-byte group on its own: ptxas may read the three selected_* fields with one 16-byte
     * load, and that load must not cover the scan's words (racecheck saw the dead word race). */
    uint32_t selected_digit, selected_above, selected_count, is_last;
    uint32_t children_total;
    uint32_t overflow_count, overflow_bucket;
    uint32_t kept_end; /* tree_bucket: the end of the bucket that holds position limit - 1 */
};
static_assert(offsetof(tree_shared, selected_digit) % 16 == 0,
              "selected_* fill one 16-byte group (see above)");

/* Digit `level` of a composite: bits [shift, shift + bits). */
static __device__ __forceinline__ uint32_t tree_digit_shift(int level)
{
    return level == 0 ? 53u : level == 1 ? 42u : level == 2 ? 32u
         : level == 3 ? 21u : level == 4 ? 10u : 0u;
}
static __device__ __forceinline__ uint32_t tree_digit_bins(int level)
{
    return (level == 2 || level == 5) ? 1024u : 2048u;
}

/* A thread's `per` bins from `top` down (counts[j] is bin top - j, 0 for j >= per) with `above`
 * candidates in the bins above them (a block scan in thread order): the one holding the
 * remaining-th largest goes to shared.selected_digit / selected_above / selected_count. At most
 * one thread writes; the caller's barrier publishes it. */
static __device__ __forceinline__ void pick_bin(const uint32_t (&counts)[4], uint32_t per,
                                                uint32_t top, uint32_t above, uint32_t remaining,
                                                tree_shared &shared)
{
#pragma unroll
    for (uint32_t j = 0; j < 4; j++) {
        if (j < per && above < remaining && remaining <= above + counts[j]) {
            shared.selected_digit = top - j;
            shared.selected_above = above;
            shared.selected_count = counts[j];
        }
        above += counts[j];
    }
}

/* Selects the k largest of the CTA's composites (0 = no candidate). On return a composite c is
 * selected iff c != 0 && (c & mask) >= prefix, and the count of them is returned: min(k, the
 * CTA's candidates). Leaves the histogram zeroed. Every thread must call it. */
static __device__ uint32_t tree_select(const uint64_t (&items)[TREE_ITEMS], uint32_t k,
                                       tree_shared &shared, uint32_t &parity, uint64_t &mask,
                                       uint64_t &prefix)
{
    mask = 0;
    prefix = 0;
    uint32_t remaining = k;
    for (int level = 0; level < TREE_DIGITS; level++) {
        const uint32_t shift = tree_digit_shift(level), bins = tree_digit_bins(level);
#pragma unroll
        for (uint32_t i = 0; i < TREE_ITEMS; i++) {
            const uint64_t c = items[i];
            if (c != 0 && (c & mask) == prefix)
                atomicAdd(&shared.histogram[(uint32_t)(c >> shift) & (bins - 1)], 1u);
        }
        __syncthreads();
        /* Thread t owns `per` consecutive bins from the top: a thread-order prefix sum is the
         * count of the bins above its own. It zeroes them for the next level as it reads. */
        const uint32_t per = bins / TREE_THREADS, top = bins - 1 - threadIdx.x * per;
        uint32_t counts[4], sum = 0;
#pragma unroll
        for (uint32_t j = 0; j < 4; j++) {
            counts[j] = 0;
            if (j < per) {
                counts[j] = shared.histogram[top - j];
                shared.histogram[top - j] = 0;
                sum += counts[j];
            }
        }
        uint32_t total;
        uint32_t above = block_exclusive_sum_of<TREE_WARPS>(sum, shared.scan, parity, total);
        if (level == 0 && total <= k) {
            __syncthreads(); /* the scan's buffer read by all before the next scan writes it */
            return total; /* uniform: every candidate is selected (mask and prefix 0) */
        }
        pick_bin(counts, per, top, above, remaining, shared);
        __syncthreads();
        /* Read by every thread before any thread can write them again (after the next level's
         * histogram barrier). */
        remaining -= shared.selected_above;
        prefix |= (uint64_t)shared.selected_digit << shift;
        mask |= (uint64_t)(bins - 1) << shift;
        if (shared.selected_count == remaining)
            break; /* uniform: the bin is taken whole (always by the last digit: unique) */
        __syncthreads(); /* selected_* read by every thread before the next level writes them */
    }
    __syncthreads(); /* the same before the caller's next writer */
    return k;
}

/* Writes the selected composites to dest (global list or shared sort buffer) at thread-order
 * positions; returns how many (the same in every thread). Every thread must call it. */
static __device__ uint32_t tree_write(const uint64_t (&items)[TREE_ITEMS], uint64_t mask,
                                      uint64_t prefix, uint64_t *dest, tree_shared &shared,
                                      uint32_t &parity)
{
    uint32_t flags = 0;
#pragma unroll
    for (uint32_t i = 0; i < TREE_ITEMS; i++)
        if (items[i] != 0 && (items[i] & mask) >= prefix)
            flags |= 1u << i;
    uint32_t total;
    uint32_t slot =
        block_exclusive_sum_of<TREE_WARPS>((uint32_t)__popc(flags), shared.scan, parity, total);
#pragma unroll
    for (uint32_t i = 0; i < TREE_ITEMS; i++)
        if (flags & (1u << i))
            dest[slot++] = items[i];
    return total;
}

/* The raw float bits of the slice of row `row` that starts at element `first` and holds at most
 * `slice` elements: thread t, item 4g + j holds slice element g * 2048 + 4t + j (16-byte loads
 * when the slice starts 16-byte aligned), exact -inf past the row's end. All loads are issued
 * before any is used. Returns how many of the slice's elements are in the row. */
template <uint32_t ITEMS>
static __device__ __forceinline__ uint32_t load_slice_bits(const struct topk_problem &problem,
                                                           uint32_t row, uint64_t first,
                                                           uint32_t slice, uint32_t (&bits)[ITEMS])
{
    const int32_t signed_length = problem.lengths[row];
    const uint64_t length = signed_length > 0 ? (uint64_t)signed_length : 0u;
    uint32_t count = 0;
    if (first < length)
        count = (uint32_t)(length - first < slice ? length - first : slice);
    const float *base = row_window(problem, row) + first;
    const bool aligned = ((uintptr_t)base & 15u) == 0;
    if (aligned && count == slice && slice >= TREE_LEAF_QUANTUM * (ITEMS / 4)) {
        /* The common case, one 16-byte load per group: a branch of its own, so that the
         * per-group fallback below (scalar loads, bounds) is not laid out between these loads
         * and fetched with them (instruction fetch stalls: docs/PERF.md v0.6.4). */
#pragma unroll
        for (uint32_t g = 0; g < ITEMS / 4; g++) {
            const float4 quad = __ldg(reinterpret_cast<const float4 *>(
                base + g * TREE_LEAF_QUANTUM + threadIdx.x * 4));
            bits[4 * g + 0] = __float_as_uint(quad.x);
            bits[4 * g + 1] = __float_as_uint(quad.y);
            bits[4 * g + 2] = __float_as_uint(quad.z);
            bits[4 * g + 3] = __float_as_uint(quad.w);
        }
        return count;
    }
#pragma unroll
    for (uint32_t g = 0; g < ITEMS / 4; g++) {
        const uint32_t element = g * TREE_LEAF_QUANTUM + threadIdx.x * 4;
        if (aligned && element + 4 <= count) {
            const float4 quad = __ldg(reinterpret_cast<const float4 *>(base + element));
            bits[4 * g + 0] = __float_as_uint(quad.x);
            bits[4 * g + 1] = __float_as_uint(quad.y);
            bits[4 * g + 2] = __float_as_uint(quad.z);
            bits[4 * g + 3] = __float_as_uint(quad.w);
        } else {
#pragma unroll
            for (uint32_t j = 0; j < 4; j++)
                bits[4 * g + j] = element + j < count ? __float_as_uint(__ldg(base + element + j))
                                                      : TOPK_NEG_INF_BITS;
        }
    }
    return count;
}

/* Leaf `leaf` of row `row` as composites: thread t, item 4g + j holds leaf element
 * g * 2048 + 4t + j, 0 where there is no candidate (past the row's end, or exact -inf). */
static __device__ __forceinline__ void tree_load_leaf(const struct topk_problem &problem,
                                                      uint32_t row, uint32_t leaf,
                                                      uint32_t leaf_elements,
                                                      uint64_t (&items)[TREE_ITEMS])
{
    const uint64_t first = (uint64_t)leaf * leaf_elements;
    uint32_t bits[TREE_ITEMS];
    const uint32_t count = load_slice_bits<TREE_ITEMS>(problem, row, first, leaf_elements, bits);
#pragma unroll
    for (uint32_t g = 0; g < TREE_ITEMS / 4; g++) {
#pragma unroll
        for (uint32_t j = 0; j < 4; j++) {
            const uint32_t element = g * TREE_LEAF_QUANTUM + threadIdx.x * 4 + j;
            const uint32_t b = bits[4 * g + j];
            items[4 * g + j] = element < count && is_candidate_bits(b)
                                   ? make_composite(order_key_bits(b), (uint32_t)first + element)
                                   : 0;
        }
    }
}

/* The lists of `children` (<= TREE_MAX_FAN_IN) consecutive nodes from row-level slot
 * `first_slot`, packed: thread t, item i takes entry s = i * 512 + t of the concatenated lists
 * (0 past their total, which is at most TREE_CAPACITY). The counts and their prefix sums go
 * through shared memory first, so that each thread's 16 list loads depend only on a search in
 * shared memory and are in flight together (one L2 round trip, not one per item). Every thread
 * must call it. */
static __device__ __forceinline__ void tree_load_children(const tree_scratch &scratch,
                                                          uint64_t first_slot, uint32_t children,
                                                          uint32_t k, tree_shared &shared,
                                                          uint64_t (&items)[TREE_ITEMS])
{
    static_assert(TREE_MAX_FAN_IN == 64, "one warp scans the counts, two per lane");
    if (threadIdx.x < 32) {
        const uint32_t lane = threadIdx.x, first = 2 * lane, second = first + 1;
        const uint32_t a = first < children ? __ldcg(&scratch.counts[first_slot + first]) : 0;
        const uint32_t b = second < children ? __ldcg(&scratch.counts[first_slot + second]) : 0;
        uint32_t inclusive = a + b;
#pragma unroll
        for (int offset = 1; offset < 32; offset <<= 1) {
            const uint32_t other = __shfl_up_sync(0xFFFFFFFFu, inclusive, offset);
            if (lane >= (uint32_t)offset)
                inclusive += other;
        }
        shared.child_first[first] = inclusive - a - b;
        shared.child_first[second] = inclusive - b;
        if (lane == 31)
            shared.children_total = inclusive;
    }
    __syncthreads();
    const uint32_t total = shared.children_total;
    const unsigned long long *lists = reinterpret_cast<const unsigned long long *>(scratch.lists);
#pragma unroll
    for (uint32_t i = 0; i < TREE_ITEMS; i++) {
        const uint32_t s = i * TREE_THREADS + threadIdx.x;
        uint64_t c = 0;
        if (s < total) {
            /* The last child whose first entry is <= s (children with no entries share their
             * first with the next one, so the last such child is the one holding s). */
            uint32_t low = 0, high = children - 1;
            while (low < high) {
                const uint32_t middle = (low + high + 1) / 2;
                if (shared.child_first[middle] <= s)
                    low = middle;
                else
                    high = middle - 1;
            }
            c = __ldcg(lists + (first_slot + low) * k + (s - shared.child_first[low]));
        }
        items[i] = c;
    }
}

/* The arrival of a CTA at a parent's counter `counter` once its global writes are done. Every
 * thread must call it; returns true (in every thread) in the CTA that arrived last, which may
 * then read what every other child CTA wrote in this kernel (with __ldcg: L2, not a stale L1
 * line). The barrier orders the CTA's writes before thread 0's fence and arrival (the pattern of
 * cooperative groups' grid barrier); one fence per CTA, not one per thread: measured on the
 * H200, 512 fences cost 1-2 us per tree level. */
static __device__ __forceinline__ bool arrive_last(uint32_t *counter, uint32_t children,
                                                   uint32_t &is_last)
{
    __syncthreads();
    if (threadIdx.x == 0) {
        __threadfence();
        is_last = atomicAdd(counter, 1u) == children - 1 ? 1u : 0u;
        __threadfence();
    }
    __syncthreads();
    return is_last != 0;
}

/* Entries of the sort buffer for `value` selected composites (device side of
 * composite_entries()): a power of two, at least one warp's sort chunk. */
static __device__ __forceinline__ uint32_t composite_entries_device(uint32_t value)
{
    uint32_t power = BITONIC_MIN_SORT;
    while (power < value)
        power <<= 1;
    return power;
}

/* Bucket of a composite: 2048 equal slices of the range [low, high]. The range's top 21 bits
 * (after `shift`) are scaled by 2048 / (range + 1) in float: a positive scale makes the map
 * monotonic, and it spreads the entries over all 2048 buckets where a power-of-two slice width
 * left up to half of them empty (phase timing: the ranks' bucket scans were the output
 * stage's largest part). */
struct bucket_map {
    uint64_t low;
    uint32_t shift;
    float scale;
};

static __device__ __forceinline__ uint32_t bucket_of(const bucket_map &map, uint64_t c)
{
    const uint32_t scaled = (uint32_t)((float)(uint32_t)((c - map.low) >> map.shift) * map.scale);
    return scaled < BITONIC_BINS ? scaled : BITONIC_BINS - 1;
}

/* The lowest and highest of the warp's values, in every lane. */
static __device__ __forceinline__ void warp_range(uint64_t &low, uint64_t &high)
{
#pragma unroll
    for (int offset = 16; offset > 0; offset >>= 1) {
        const uint64_t other_high = __shfl_xor_sync(0xFFFFFFFFu, high, offset);
        const uint64_t other_low = __shfl_xor_sync(0xFFFFFFFFu, low, offset);
        high = other_high > high ? other_high : high;
        low = other_low < low ? other_low : low;
    }
}

/* The map of composites in [low, high] onto the 2048 buckets (bucket_of): the range's top 21 bits
 * (high - low >> shift < 2^21 is exact in float, and so is the product's bound below 2048). The
 * same inputs give the same map in every thread and CTA. */
static __device__ __forceinline__ bucket_map bucket_map_of(uint64_t low, uint64_t high)
{
    bucket_map map;
    high = high > low ? high : low;
    const uint32_t range_bits = high > low ? 64u - (uint32_t)__clzll((long long)(high - low)) : 0u;
    map.low = low;
    map.shift = range_bits > 21 ? range_bits - 21 : 0;
    map.scale = (float)BITONIC_BINS / ((float)(uint32_t)((high - low) >> map.shift) + 1.0f);
    return map;
}

/* The second half of the bucketing, once sizes[b] holds how many of the `count` composites of
 * `source` fall in bucket b (by `map`): starts in descending bucket order, then the composites of
 * the buckets that start below `limit` (those whose entries can rank below it) into `dest`,
 * bucket b at dest[starts[b]], sizes[b] entries: `kept` entries, dest[0 .. kept); the rest are
 * counted but not moved. shared.overflow_count and overflow_bucket must be zero on entry (and
 * published by a barrier); afterwards overflow_count holds how many of the filled buckets exceed
 * TREE_BUCKET_LIMIT and overflow_bucket one of them. Returns `kept`, the same in every thread;
 * every thread must call it.
 * The output stage's loops over entries are kept rolled (`#pragma unroll 1`): the stage runs
 * once per CTA, so its code is fetched cold, and ncu's largest stall there was instruction
 * fetch; rolled, it took 0.3-0.36 us less (docs/PERF.md v0.6.4). */
static __device__ uint32_t tree_bucket_place(const uint64_t *source, uint32_t count, uint32_t limit,
                                             uint64_t *dest, uint32_t *starts, uint32_t *sizes,
                                             const bucket_map &map, tree_shared &shared,
                                             uint32_t &parity)
{
    /* Starts in descending bucket order; sizes become the scatter cursors. */
    const uint32_t per = BITONIC_BINS / TREE_THREADS, top = BITONIC_BINS - 1 - threadIdx.x * per;
    uint32_t counts[4], sum = 0;
#pragma unroll
    for (uint32_t j = 0; j < 4; j++) {
        counts[j] = j < per ? sizes[top - j] : 0;
        sum += counts[j];
    }
    uint32_t total;
    uint32_t start = block_exclusive_sum_of<TREE_WARPS>(sum, shared.scan, parity, total);
#pragma unroll
    for (uint32_t j = 0; j < 4; j++) {
        if (j < per) {
            starts[top - j] = start;
            sizes[top - j] = 0;
            /* The bucket that holds position limit - 1 ends the filled ones (the cluster
             * path's whole-bin gather holds up to twice the output: on random rows the
             * densest buckets, just above the k-th largest, are the ones skipped). */
            if (start < limit && start + counts[j] >= limit && counts[j])
                shared.kept_end = start + counts[j];
            if (counts[j] > TREE_BUCKET_LIMIT && start < limit) {
                /* Atomic: with two or more large buckets several threads get here (the caller
                 * then sorts instead and ignores the bucket, but a plain store would race). */
                atomicAdd(&shared.overflow_count, 1u);
                atomicMax(&shared.overflow_bucket, top - j);
            }
        }
        start += counts[j];
    }
    __syncthreads();
    PHASE_MARK(9);
    const uint32_t kept = total < limit ? total : shared.kept_end; /* uniform */
    /* OUTPUT_BATCH entries per thread at a time, each step over all of them: its loads and
     * atomics in flight together (the leader runs 16 warps). */
#pragma unroll 1
    for (uint32_t e = threadIdx.x; e < count; e += OUTPUT_BATCH * TREE_THREADS) {
        uint64_t c[OUTPUT_BATCH];
        uint32_t bucket[OUTPUT_BATCH], first[OUTPUT_BATCH], slot[OUTPUT_BATCH];
        bool take[OUTPUT_BATCH];
#pragma unroll
        for (uint32_t b = 0; b < OUTPUT_BATCH; b++) {
            c[b] = e + b * TREE_THREADS < count ? source[e + b * TREE_THREADS] : 0;
            bucket[b] = bucket_of(map, c[b]);
        }
#pragma unroll
        for (uint32_t b = 0; b < OUTPUT_BATCH; b++)
            first[b] = starts[bucket[b]];
#pragma unroll
        for (uint32_t b = 0; b < OUTPUT_BATCH; b++) {
            take[b] = e + b * TREE_THREADS < count && first[b] < limit;
            slot[b] = atomicAdd(&sizes[bucket[b]], take[b] ? 1u : 0u); /* no branch */
        }
#pragma unroll
        for (uint32_t b = 0; b < OUTPUT_BATCH; b++)
            if (take[b])
                dest[first[b] + slot[b]] = c[b];
    }
    __syncthreads();
    return kept;
}

/* Buckets the `count` composites of `source` into `dest` by bucket_of() over the range
 * [low, high] of their values, in descending bucket order (tree_bucket_place). (The bits below
 * the common prefix of low and high would put a range that crosses a power of two into a
 * handful of buckets.) sizes must be zero on entry. Returns the map and `kept`, the same in
 * every thread; every thread must call it. */
static __device__ void tree_bucket(const uint64_t *source, uint32_t count, uint32_t limit,
                                   uint64_t *dest, uint32_t *starts, uint32_t *sizes,
                                   tree_shared &shared, uint32_t &parity, bucket_map &map,
                                   uint32_t &kept)
{
    uint64_t low = ~0ull, high = 0;
    const uint32_t lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
#pragma unroll 1
    for (uint32_t e = threadIdx.x; e < count; e += TREE_THREADS) {
        const uint64_t c = source[e];
        high = c > high ? c : high;
        low = c < low ? c : low;
    }
    warp_range(low, high);
    if (lane == 0) {
        shared.reduce_high[warp] = high;
        shared.reduce_low[warp] = low;
    }
    __syncthreads();
    PHASE_MARK(14);
    if (threadIdx.x == 0) { /* after the barrier: every thread has read the previous call's */
        shared.overflow_count = 0;
        shared.overflow_bucket = 0;
    }
    for (uint32_t w = 0; w < TREE_WARPS; w++) {
        high = shared.reduce_high[w] > high ? shared.reduce_high[w] : high;
        low = shared.reduce_low[w] < low ? shared.reduce_low[w] : low;
    }
    map = bucket_map_of(low, high);
#pragma unroll 1
    for (uint32_t e = threadIdx.x; e < count; e += TREE_THREADS)
        atomicAdd(&sizes[bucket_of(map, source[e])], 1u);
    __syncthreads();
    PHASE_MARK(15);
    kept = tree_bucket_place(source, count, limit, dest, starts, sizes, map, shared, parity);
}

/* The root's output without a full sort: a composite's rank is the count of selected composites
 * in higher buckets (tree_bucket's starts) plus the count of larger ones in its own bucket (a scan
 * of that bucket). One bucket too large for scans (a run of tied keys at the boundary: ReLU
 * plateaus) is bucketed again over its own range, which then spreads its members by index.
 * Every rank is a function of the values alone, so the scatters' atomic cursors do not matter.
 * On random and ReLU rows this costs a few thousand instructions per warp where the bitonic sort
 * of 2048 composites costs tens of thousands (docs/PERF.md).
 * Writes output positions below `limit` (ranks from `limit` on are dropped, -1 fills the
 * positions from `selected` to `limit`). Returns NULL when it wrote the output, else the buffer
 * (`bucketed`, holding the `kept` entries that can rank below `limit`, a superset of the top
 * `limit`) that the caller must sort instead: two or more large buckets, or a large one that
 * stays large. Every thread must call it; shared.sub_sizes must be zero on entry, and so must
 * the histogram unless `counted` is given: then the histogram holds the selection's bucket sizes
 * by that map (the cluster path's leader counted them) and shared.overflow_* are zero.
 * `selection` is overwritten. */
static __device__ uint64_t *tree_output_by_buckets(const struct topk_problem &problem, uint32_t row,
                                                   uint64_t *selection, uint32_t selected,
                                                   uint32_t limit, uint64_t *bucketed,
                                                   const bucket_map *counted, tree_shared &shared,
                                                   uint32_t &parity, uint32_t &kept)
{
    bucket_map map, sub_map = {};
    if (counted) {
        map = *counted;
        kept = tree_bucket_place(selection, selected, limit, bucketed, shared.bucket_start,
                                 shared.histogram, map, shared, parity);
    } else {
        tree_bucket(selection, selected, limit, bucketed, shared.bucket_start, shared.histogram,
                    shared, parity, map, kept);
    }
    PHASE_MARK(10);
    const uint32_t overflows = shared.overflow_count, large = shared.overflow_bucket;
    if (overflows > 1)
        return bucketed; /* uniform */
    if (overflows == 1) {
        /* The large bucket's members, grouped again by sub-bucket, into `selection`. */
        uint32_t sub_kept; /* all of them: the limit is relative to the whole selection */
        tree_bucket(bucketed + shared.bucket_start[large], shared.histogram[large], 0xFFFFFFFFu,
                    selection, shared.sub_start, shared.sub_sizes, shared, parity, sub_map,
                    sub_kept);
        PHASE_MARK(11);
        if (shared.overflow_count)
            return bucketed; /* uniform */
    }
    /* Without a large bucket, `selection` is free: each entry's index goes to its rank there
     * and the output is then written in order, 128 bytes per warp store, where a rank-order
     * store from each entry touched 32 sectors per warp instruction. */
    uint32_t *const ranked = overflows == 0 ? reinterpret_cast<uint32_t *>(selection) : NULL;
    /* OUTPUT_BATCH entries per thread at a time, their bucket scans interleaved: one entry's
     * scan is a chain of dependent shared-memory loads, and the leader runs 16 warps. */
#pragma unroll 1
    for (uint32_t e = threadIdx.x; e < kept; e += OUTPUT_BATCH * TREE_THREADS) {
        uint64_t c[OUTPUT_BATCH];
        const uint64_t *group[OUTPUT_BATCH];
        uint32_t rank[OUTPUT_BATCH], first[OUTPUT_BATCH], members[OUTPUT_BATCH], most = 0;
#pragma unroll
        for (uint32_t b = 0; b < OUTPUT_BATCH; b++) {
            const bool valid = e + b * TREE_THREADS < kept;
            c[b] = valid ? bucketed[e + b * TREE_THREADS] : 0;
            const uint32_t bucket = bucket_of(map, c[b]);
            rank[b] = shared.bucket_start[bucket];
            group[b] = bucketed;
            first[b] = rank[b];
            members[b] = valid ? shared.histogram[bucket] : 0u;
            if (overflows == 1 && bucket == large) {
                const uint32_t sub = bucket_of(sub_map, c[b]);
                group[b] = selection;
                first[b] = shared.sub_start[sub];
                members[b] = valid ? shared.sub_sizes[sub] : 0u;
                rank[b] += first[b];
            }
            most = members[b] > most ? members[b] : most;
        }
        /* Four loads per entry in flight at a time: a bucket holds a few to TREE_BUCKET_LIMIT
         * entries; 0 stands for none (below every composite). */
        for (uint32_t j = 0; j < most; j += 4) {
#pragma unroll
            for (uint32_t b = 0; b < OUTPUT_BATCH; b++) {
#pragma unroll
                for (uint32_t q = 0; q < 4; q++) {
                    const uint64_t other = j + q < members[b] ? group[b][first[b] + j + q] : 0;
                    rank[b] += other > c[b] ? 1u : 0u;
                }
            }
        }
#pragma unroll
        for (uint32_t b = 0; b < OUTPUT_BATCH; b++) {
            /* the cluster path may gather more than it writes */
            if (e + b * TREE_THREADS < kept && rank[b] < limit) {
                const uint32_t index = 0xFFFFFFFFu - (uint32_t)c[b];
                if (ranked)
                    ranked[rank[b]] = index;
                else
                    write_output(problem, row, rank[b], (int32_t)index);
            }
        }
    }
    if (ranked) {
        /* Every position below min(selected, limit) has its entry: ranks are unique and the
         * kept entries hold every rank below `limit` (kept >= limit where selected >= limit). */
        __syncthreads();
#pragma unroll 1
        for (uint32_t j = threadIdx.x; j < limit; j += TREE_THREADS)
            write_output(problem, row, j, j < selected ? (int32_t)ranked[j] : -1);
    } else {
#pragma unroll 1
        for (uint32_t j = selected + threadIdx.x; j < limit; j += TREE_THREADS)
            write_output(problem, row, j, -1);
    }
    return NULL;
}

/* The output of a row's final selection (`selected` composites in `selection`, any order; more
 * than k from the cluster path, which gathers a whole bin): output positions 0 .. limit - 1
 * (limit is k, or less where the cluster path writes the tie key's positions itself) get its
 * first `limit` in canonical order by bucket ranks, or by the bitonic sort in `bucketed` where
 * buckets do not spread it; -1 after the selection. `bucketed` holds composite_entries(selected)
 * entries. Every thread must call it; the histogram and shared.sub_sizes must be zero on
 * entry, or with `counted` as tree_output_by_buckets() says. */
static __device__ void tree_write_output(const struct topk_problem &problem, uint32_t row,
                                         uint64_t *selection, uint32_t selected, uint32_t limit,
                                         uint64_t *bucketed, const bucket_map *counted,
                                         tree_shared &shared, uint32_t &parity)
{
    uint64_t *sorted = selection;
    uint32_t kept = selected; /* entries that can rank below `limit`, at the front of sorted */
    if (selected > 1) {
        sorted = tree_output_by_buckets(problem, row, selection, selected, limit, bucketed,
                                        counted, shared, parity, kept);
        if (!sorted) {
            PHASE_MARK(12);
            return; /* uniform: written by buckets */
        }
        const uint32_t padded = composite_entries_device(kept);
        for (uint32_t i = kept + threadIdx.x; i < padded; i += TREE_THREADS)
            sorted[i] = 0;
        __syncthreads();
        sort_descending<TREE_THREADS>(sorted, padded);
        PHASE_MARK(13);
    }
#pragma unroll 1
    for (uint32_t j = threadIdx.x; j < limit; j += TREE_THREADS) {
        int32_t index = -1;
        if (j < kept)
            index = (int32_t)(0xFFFFFFFFu - (uint32_t)sorted[j]);
        write_output(problem, row, j, index);
    }
    PHASE_MARK(12);
}

/* Pass 1 of a tree with parents: the row's histogram of digit 0 (the key's top 11 bits) over its
 * candidates, summed over its leaves with integer atomics (sums do not depend on their order).
 * It lets every leaf of pass 2 drop, before selecting anything, the candidates below the bin
 * that holds the row's k-th largest: they cannot be in the row's top k. On random rows of
 * 131072 that leaves a few hundred candidates per leaf instead of the leaf's top k, so the
 * selections up the tree take everything after one histogram (docs/PERF.md). */
static __global__ void __launch_bounds__(TREE_THREADS)
k_tree_histogram(const struct topk_problem problem, const tree_scratch scratch)
{
    __shared__ uint32_t histogram[BITONIC_BINS];
    const uint32_t leaves = scratch.plan.nodes[0];
    const uint32_t row = blockIdx.x / leaves, leaf = blockIdx.x % leaves;
    PHASE_START(PHASE_TREE_HISTOGRAM);
    for (uint32_t i = threadIdx.x; i < BITONIC_BINS; i += TREE_THREADS)
        histogram[i] = 0;
    uint64_t items[TREE_ITEMS];
    tree_load_leaf(problem, row, leaf, scratch.plan.leaf_elements, items);
    __syncthreads();
    PHASE_MARK(0);
#pragma unroll
    for (uint32_t i = 0; i < TREE_ITEMS; i++)
        if (items[i] != 0)
            atomicAdd(&histogram[(uint32_t)(items[i] >> 53)], 1u);
    __syncthreads();
    uint32_t *row_histogram = scratch.row_histograms + (uint64_t)row * BITONIC_BINS;
    for (uint32_t i = threadIdx.x; i < BITONIC_BINS; i += TREE_THREADS)
        if (histogram[i])
            atomicAdd(&row_histogram[i], histogram[i]);
#ifdef DSATOPK_PHASE_TIMING
    __syncthreads();
#endif
    PHASE_MARK(1);
}

/* The digit-0 bin of the row's k-th largest candidate from pass 1's histogram, or 0 when the row
 * has at most k candidates (nothing to drop); `kept` receives the row's candidates in that bin
 * and above. The same in every thread; every thread must call it. */
static __device__ uint32_t tree_row_floor_bin(const uint32_t *row_histogram, uint32_t k,
                                              tree_shared &shared, uint32_t &parity,
                                              uint32_t &kept)
{
    const uint32_t per = BITONIC_BINS / TREE_THREADS, top = BITONIC_BINS - 1 - threadIdx.x * per;
    uint32_t counts[4], sum = 0;
#pragma unroll
    for (uint32_t j = 0; j < 4; j++) {
        counts[j] = j < per ? __ldcg(&row_histogram[top - j]) : 0;
        sum += counts[j];
    }
    uint32_t total;
    uint32_t above = block_exclusive_sum_of<TREE_WARPS>(sum, shared.scan, parity, total);
    kept = total;
    if (total <= k) {
        __syncthreads(); /* the scan's buffer read by all before the next scan writes it */
        return 0; /* uniform */
    }
#pragma unroll
    for (uint32_t j = 0; j < 4; j++) {
        if (j < per && above < k && k <= above + counts[j]) {
            shared.selected_digit = top - j;
            shared.selected_above = above + counts[j]; /* kept: this bin and above */
        }
        above += counts[j];
    }
    __syncthreads();
    const uint32_t floor_bin = shared.selected_digit;
    kept = shared.selected_above;
    __syncthreads(); /* read by all before tree_select may write them again */
    return floor_bin;
}

/* The tree path's one kernel: blockIdx.x = row * leaves + leaf. Dynamic shared memory: the
 * root's sort buffer and its bucket buffer (composite_entries(k) entries each). */
static __global__ void __launch_bounds__(TREE_THREADS, 2)
k_tree_topk(const struct topk_problem problem, const tree_scratch scratch)
{
    extern __shared__ uint64_t tree_sort_buffer[];
    __shared__ tree_shared shared;
    const uint32_t leaves = scratch.plan.nodes[0];
    const uint32_t row = blockIdx.x / leaves, leaf = blockIdx.x % leaves;
    const uint32_t k = problem.shape.k;
    const uint64_t row_nodes = (uint64_t)row * scratch.plan.nodes_per_row;
    uint32_t parity = 0;
    PHASE_START(PHASE_TREE);

    for (uint32_t i = threadIdx.x; i < BITONIC_BINS; i += TREE_THREADS) {
        shared.histogram[i] = 0;
        shared.sub_sizes[i] = 0;
    }
    uint64_t items[TREE_ITEMS];
    tree_load_leaf(problem, row, leaf, scratch.plan.leaf_elements, items);
    __syncthreads();
    PHASE_MARK(0);
    /* flat: the row's kept candidates fit one CTA, so every leaf reports straight to the root
     * (one merge instead of a level per fan-in). The same decision in every leaf of the row: it
     * comes from the row's complete histogram. */
    bool flat = false;
    if (scratch.row_histograms) {
        uint32_t kept;
        const uint32_t floor_bin = tree_row_floor_bin(
            scratch.row_histograms + (uint64_t)row * BITONIC_BINS, k, shared, parity, kept);
#pragma unroll
        for (uint32_t i = 0; i < TREE_ITEMS; i++)
            if ((uint32_t)(items[i] >> 53) < floor_bin)
                items[i] = 0;
        flat = scratch.plan.levels > 2 && kept <= TREE_CAPACITY && leaves <= TREE_MAX_FAN_IN;
        PHASE_MARK(1);
    }

    uint32_t level = 0, node = leaf, selected;
    uint64_t mask, prefix;
    for (;;) {
        selected = tree_select(items, k, shared, parity, mask, prefix);
        PHASE_MARK(level == 0 ? 2 : 5);
        if (level + 1 == scratch.plan.levels)
            break; /* the root: sorted below */
        const uint64_t slot = row_nodes + scratch.plan.first_node[level] + node;
        tree_write(items, mask, prefix, scratch.lists + slot * k, shared, parity);
        if (threadIdx.x == 0)
            scratch.counts[slot] = selected;
        if (level == 0)
            PHASE_MARK(3);
        if (flat) {
            const uint32_t root = scratch.plan.levels - 1;
            if (!arrive_last(&scratch.arrivals[row_nodes + scratch.plan.first_node[root]], leaves,
                             shared.is_last))
                return; /* uniform */
            tree_load_children(scratch, row_nodes, leaves, k, shared, items);
            PHASE_MARK(4);
            level = root;
            continue;
        }
        const uint32_t fan_in = scratch.plan.fan_in, parent = node / fan_in;
        const uint32_t remaining_children = scratch.plan.nodes[level] - parent * fan_in;
        const uint32_t children = remaining_children < fan_in ? remaining_children : fan_in;
        const uint64_t parent_slot = row_nodes + scratch.plan.first_node[level + 1] + parent;
        if (!arrive_last(&scratch.arrivals[parent_slot], children, shared.is_last))
            return; /* uniform */
        tree_load_children(scratch, row_nodes + scratch.plan.first_node[level] + parent * fan_in,
                           children, k, shared, items);
        level++;
        node = parent;
    }

    /* The root: its selection in canonical order, by buckets where they stay small, else by the
     * one-CTA path's bitonic sort. Zero padding ranks below every real composite (index < 2^31
     * makes the low word >= 2^31). */
    tree_write(items, mask, prefix, tree_sort_buffer, shared, parity);
    __syncthreads();
    PHASE_MARK(6);
    tree_write_output(problem, row, tree_sort_buffer, selected, k,
                      tree_sort_buffer + composite_entries_device(k), NULL, shared, parity);
}

/* ---- Cluster path: one thread-block cluster per row ----------------------------------------
 *
 * Where the hardware has thread-block clusters (sm_90 and newer), a row of up to 16 slices is
 * one cluster of `parts` CTAs (512 threads, a slice of 8192, 16384 or 32768 elements each:
 * 16, 32 or 64 keys per thread, chosen by cluster_plan_of), launched together by the hardware
 * and able to read each other's shared memory. One kernel, no scratch, no memset, and the row is
 * read from memory once:
 *
 *   level 0  every CTA histograms the top 11 bits of its slice's 32-bit order keys (registers)
 *            and sums it into 64 super-bins; after the cluster barrier one warp of each CTA
 *            reads every CTA's super-bins through distributed shared memory, finds the super-bin
 *            of the row's k-th largest by a warp scan, then reads its 32 bins from every CTA:
 *            the bin of the row's k-th largest, identically in every CTA; when that bin
 *            and everything above it fit the leader's buffer, all of it is gathered and the
 *            output's ranking cuts it at k (no levels 1 and 2);
 *   level 1  the same over the next 11 bits of the candidates in that bin, with the minimum and
 *            maximum of their keys: when they are equal (a plateau, e.g. the 0.0 of ReLU rows)
 *            the bin is one key and the refinement stops there;
 *   level 2  the last 10 bits, when still needed (after level 1 too: the whole-bin gather when
 *            the bin fits);
 *   ties     candidates equal to the threshold key are taken in index order: a CTA's quota is
 *            what the CTAs before it (lower indices) left, from their histogram counts; inside a
 *            CTA, block prefix sums over the index-ordered slice; their output positions follow
 *            from that rank, so each CTA writes its ties itself;
 *   gather   each CTA writes its selected (key, index) composites into the leader's (rank 0)
 *            buffer at slots its warps claim with one atomic each on the leader's counter (the
 *            buffer's order depends on arrival, its content does not), by plain remote stores
 *            and a cluster barrier, or for 5 CTAs or more by asynchronous stores counted on
 *            the leader's mbarrier; then every CTA but the leader exits;
 *   output   the leader ranks the selection by buckets (the tree root's code, tree_write_output)
 *            and writes the row.
 *
 * Nothing depends on arrival order: counts, prefix sums and the order of unique composites.
 * The cluster barrier is hardware's (the cluster's CTAs are co-scheduled by construction, so it
 * is not the spin barrier over co-resident CTAs that hung on SM120/121 in flashinfer #3610), and
 * the launch is an ordinary kernel node in a graph. Where the device or the build has no
 * clusters, or no cluster of that size fits, the tree path runs instead. */

#define CLUSTER_MAX_PARTS 16u      /* CTAs per cluster: non-portable above 8 on sm_90 */
#define CLUSTER_PORTABLE_PARTS 8u
/* Clusters of up to this many slices of 8192; longer rows take slices of 16384 (32 keys per
 * thread). 16 measured slower on the H200 in the third run (docs/PERF.md, v0.3.0 notes: two
 * waves of them at 16 rows), faster in the sixth where auto allows them (one wave: 1-4 rows of
 * 131072, 1 x 131072 15.5 -> 15.0 us); a -D to try others. */
/* The leader's buffers hold up to CLUSTER_GATHER_FACTOR times the output's entries (instead of
 * twice) where shared memory allows and the row is longer than CLUSTER_GATHER_RATIO * k: there
 * the k-th's level-0 bin and the keys above it can outnumber twice the output (random rows of
 * 65536 at k 512: about 1500; of 200000 at k 2048: about 4600), and level 1's pass and
 * cluster barrier ran instead (16% and 6-8% slower). On shorter rows wider buffers bought
 * nothing and measured about 1% slower (more shared memory per CTA; docs/PERF.md v0.6.12).
 * A factor of 2 keeps twice the output everywhere. */
#ifndef CLUSTER_GATHER_FACTOR
#define CLUSTER_GATHER_FACTOR 4u
#endif
#ifndef CLUSTER_GATHER_RATIO
#define CLUSTER_GATHER_RATIO 64u
#endif

#ifndef CLUSTER_ITEMS16_PARTS
#define CLUSTER_ITEMS16_PARTS 16u
#endif

/* Clusters of at most this many CTAs pick a level's bin from every CTA's whole histogram,
 * larger ones by super-bins (cluster_level_pick). A -D to measure others. */
#ifndef CLUSTER_DIRECT_PARTS
#define CLUSTER_DIRECT_PARTS 2u
#endif

/* Bins per super-bin of a level's pick (cluster_summarize): 64 super-bins of 2048 bins, so that
 * one warp reads them all from each CTA with one 8-byte load per lane. */
#define CLUSTER_SUPER_WIDTH 32u

/* Clusters of at least this many CTAs gather the selection into the leader by asynchronous
 * stores counted on an mbarrier, smaller ones by plain remote stores and a cluster barrier
 * (measured on the H200, docs/PERF.md sixth run: 1 x 65536 (8 CTAs) 13.6 -> 13.5 us,
 * 1 x 131072 (16) 14.8 -> 14.3, but 64 x 131072 (2) 28.1 -> 29.9: one 8-byte asynchronous
 * store per entry costs more than the barrier where a CTA sends thousands). */
#ifndef CLUSTER_ASYNC_GATHER_PARTS
#define CLUSTER_ASYNC_GATHER_PARTS 5u
#endif

/* Slices loaded by bulk copy gather their selection from the copy in shared memory
 * (for_each_selected in k_cluster_topk); 0 to measure the unrolled loop over registers there. */
#ifndef CLUSTER_STAGED_GATHER
#define CLUSTER_STAGED_GATHER 1
#endif

/* Shared-memory addresses and the PTX of an mbarrier-tracked gather (sm_90). */
static __device__ __forceinline__ uint32_t shared_address(const void *pointer)
{
    return (uint32_t)__cvta_generic_to_shared(pointer);
}

/* The address of the same shared variable in cluster CTA `rank`. */
static __device__ __forceinline__ uint32_t cluster_map(uint32_t address, uint32_t rank)
{
    uint32_t mapped;
    asm volatile("mapa.shared::cluster.u32 %0, %1, %2;" : "=r"(mapped) : "r"(address), "r"(rank));
    return mapped;
}

/* Initialises an mbarrier for `arrivals` arrivals per phase, visible to the cluster after the
 * next cluster barrier. */
static __device__ __forceinline__ void mbarrier_init(uint32_t barrier, uint32_t arrivals)
{
    asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;\n\t"
                 "fence.mbarrier_init.release.cluster;" ::"r"(barrier),
                 "r"(arrivals)
                 : "memory");
}

/* One arrival that also expects `bytes` of asynchronous stores in the current phase. */
static __device__ __forceinline__ void mbarrier_expect_bytes(uint32_t barrier, uint32_t bytes)
{
    asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" ::"r"(barrier), "r"(bytes)
                 : "memory");
}

/* Waits until the phase of the given parity completes. */
static __device__ __forceinline__ void mbarrier_wait(uint32_t barrier, uint32_t parity)
{
    asm volatile("{\n\t.reg .pred done;\n\t"
                 "WAIT_%=:\n\t"
                 "mbarrier.try_wait.parity.shared::cta.b64 done, [%0], %1;\n\t"
                 "@!done bra WAIT_%=;\n\t}" ::"r"(barrier),
                 "r"(parity)
                 : "memory");
}

/* An 8-byte store into another CTA's shared memory that counts its bytes on that CTA's
 * mbarrier (both addresses from cluster_map). */
static __device__ __forceinline__ void store_async(uint32_t address, uint64_t value,
                                                   uint32_t barrier)
{
    asm volatile(
        "st.async.shared::cluster.mbarrier::complete_tx::bytes.b64 [%0], %1, [%2];" ::"r"(address),
        "l"(value), "r"(barrier)
        : "memory");
}

/* The bulk load of a slice (cluster_bulk_load): chunks of 8 keys per thread (16 KiB), each
 * counted on its own mbarrier, so the first is counted while the others arrive (chunks of 32
 * KiB measured 0.2-1.3% slower where the bulk load runs: docs/PERF.md v0.6.7). */
#define CLUSTER_BULK_CHUNK_ITEMS 8u
#define CLUSTER_BULK_CHUNKS 8u /* slices of 64 keys per thread (the only ones bulk-loaded) */

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
    uint32_t trash; /* level 0's increments of non-candidates (shared_add_or_trash); never read */
};

/* The order key of exact -inf: the one key that is not a candidate. Elements past the row's end
 * are loaded as -inf (load_slice_bits), so `key != CLUSTER_NO_KEY` is the candidate test. */
#define CLUSTER_NO_KEY 0x007FFFFFu
static_assert(CLUSTER_NO_KEY == (TOPK_NEG_INF_BITS ^ 0xFFFFFFFFu), "order key of -inf");

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

/* Issues the loads of the CTA's slice: thread t, item 4g + j gets the raw bits of slice element
 * g * 2048 + 4t + j (exact -inf past the row's end). Nothing waits for them here: the level-0
 * histogram (cluster_level0_registers) turns each into its order key as it arrives. */
template <uint32_t ITEMS>
static __device__ __forceinline__ void cluster_load_slice(const struct topk_problem &problem,
                                                          uint32_t row, uint32_t first,
                                                          uint32_t (&keys)[ITEMS])
{
    static_assert(ITEMS % 8 == 0 && ITEMS <= 64, "pairs of float4 groups, one flag bit per item");
    load_slice_bits<ITEMS>(problem, row, first, TREE_THREADS * ITEMS, keys);
}

/* Adds one to a shared-memory counter where `take`, as one predicated reduction: for the
 * refinement levels, where few items are members, so that a warp with none skips the atomic.
 * (ptxas still emits a branch per item around it; written as an `if`, each item also got its
 * reconvergence: twice the instructions, docs/PERF.md v0.6.4.) */
static __device__ __forceinline__ void shared_add_if(uint32_t *counter, bool take)
{
    asm volatile("{\n\t.reg .pred p;\n\tsetp.ne.u32 p, %1, 0;\n\t"
                 "@p red.shared.add.u32 [%0], 1;\n\t}" ::"r"(shared_address(counter)),
                 "r"((uint32_t)take)
                 : "memory");
}

/* Adds one to a shared-memory counter where `take`, else to `trash` (a counter nobody reads):
 * for level 0, where almost every item is a candidate. An unconditional increment is one
 * warp-aggregated ATOMS.POPC.INC with no branch, so ptxas interleaves the unrolled items; the
 * predicated reduction above became a branch, BSSY and BSYNC around every item's atomic (sm_90
 * SASS), fetched cold once per CTA (docs/PERF.md v0.6.5). */
static __device__ __forceinline__ void shared_add_or_trash(uint32_t *counter, bool take,
                                                           uint32_t *trash)
{
    atomicAdd(take ? counter : trash, 1u);
}

/* The register items' part of the level-0 histogram (zeroed and published before the loads were
 * issued): each item becomes its order key (CLUSTER_NO_KEY where there is no candidate) and is
 * counted as soon as its load arrives, so the counting runs under the rest of the row's load
 * instead of after it (2.7 us after a 4.2 us load at 16 x 131072 before: docs/PERF.md). */
template <uint32_t ITEMS>
static __device__ __forceinline__ void cluster_level0_registers(uint32_t (&keys)[ITEMS],
                                                                uint32_t *histogram,
                                                                uint32_t *trash)
{
#pragma unroll
    for (uint32_t i = 0; i < ITEMS; i++) {
        keys[i] = order_key_bits(keys[i]);
        shared_add_or_trash(&histogram[keys[i] >> 21], keys[i] != CLUSTER_NO_KEY, trash);
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
 * the level-0 histogram (zeroed and published before the call) while the next one loads: the
 * histogram of 128 keys per thread took 6.7 us after a 9.7 us load (phase timing), work that
 * the load's memory latency can hide. */
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
            shared_add_or_trash(&histogram[key >> 21], key != CLUSTER_NO_KEY, trash);
        }
    }
}

/* Starts the bulk load of the CTA's slice into `staging` (TREE_THREADS * ITEMS words) when the
 * slice is whole and 16-byte aligned: thread 0 initialises one mbarrier per chunk of
 * CLUSTER_BULK_CHUNK_ITEMS keys per thread and issues one `cp.async.bulk` per chunk, all at
 * once. Returns whether it did (the same in every thread); the caller's CTA barrier publishes
 * the mbarriers before any thread waits on them (cluster_bulk_keys). Why: loads into registers
 * kept the SM's memory pipeline at about 30 GB/s per SM (128 KiB in 4 us at 16 x 131072, 64
 * CTAs), half the HBM's share of the 64 SMs; the bulk copy engine keeps a whole slice in
 * flight without registers (docs/PERF.md v0.6.6). */
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
            asm volatile("cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes"
                         " [%0], [%1], %2, [%3];" ::"r"(destination),
                         "l"(base + c * CHUNK_ELEMENTS), "r"(bytes), "r"(barrier)
                         : "memory");
        }
    }
    return true;
}

/* The bulk load's keys (cluster_bulk_load): each chunk, once its mbarrier completes, into this
 * thread's registers (item 4g + j = slice element g * 2048 + 4t + j, one 16-byte shared load per
 * group) as order keys, each counted in the level-0 histogram as shared_add_or_trash does. */
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
            shared_add_or_trash(&histogram[keys[i] >> 21], keys[i] != CLUSTER_NO_KEY, trash);
        }
    }
}

/* A level's pick in two remote round trips of one warp instead of every thread reading every
 * CTA's whole histogram: each CTA sums its histogram into super-bins of CLUSTER_SUPER_WIDTH bins
 * before the level's cluster barrier (cluster_summarize); after it, warp 0 reads the super-bins
 * of every CTA, finds the one holding the row's remaining-th largest by a warp scan, then reads
 * that super-bin's bins from every CTA (cluster_level_pick). Reading the whole histograms moved
 * parts x 8 KiB into each SM at about 14 B per cycle (1.6 us at 16 x 131072), and the
 * reduce-scatter that moved less cost a cluster barrier more (docs/PERF.md v0.6.9). */

/* Before a level's cluster barrier, after the CTA's histogram of `bins` bins is counted: its
 * super-bins into `super_bins`; with `bounds` (level 0) also the CTA's highest and lowest
 * non-empty bins into exchange.high[0] / low[0] (0 and BITONIC_NO_BIN on entry). The caller's
 * cluster barrier publishes them. Every thread must call it. */
static __device__ __forceinline__ void cluster_summarize(const uint32_t *histogram, uint32_t bins,
                                                         uint32_t *super_bins, bool bounds,
                                                         cluster_exchange &exchange)
{
    __syncthreads(); /* the CTA's histogram is complete */
    const uint32_t per = bins / TREE_THREADS, base = per * threadIdx.x; /* 4 or 2 bins */
    uint32_t counts[4] = { 0, 0, 0, 0 };
    if (per == 4) {
        const uint4 v = *reinterpret_cast<const uint4 *>(histogram + base);
        counts[0] = v.x;
        counts[1] = v.y;
        counts[2] = v.z;
        counts[3] = v.w;
    } else {
        const uint2 v = *reinterpret_cast<const uint2 *>(histogram + base);
        counts[0] = v.x;
        counts[1] = v.y;
    }
    uint32_t sum = counts[0] + counts[1] + counts[2] + counts[3];
    const uint32_t lanes = CLUSTER_SUPER_WIDTH / per; /* threads per super-bin: 8 or 16 */
    for (uint32_t offset = 1; offset < lanes; offset <<= 1)
        sum += __shfl_xor_sync(0xFFFFFFFFu, sum, offset);
    if (threadIdx.x % lanes == 0)
        super_bins[threadIdx.x / lanes] = sum;
    if (bounds) {
        uint32_t high = 0, low = BITONIC_NO_BIN;
#pragma unroll
        for (uint32_t j = 0; j < 4; j++) {
            if (counts[3 - j]) /* descending: the first non-empty is the highest */
                high = high ? high : base + 3 - j + 1;
            if (counts[j])
                low = low != BITONIC_NO_BIN ? low : base + j;
        }
        high = __reduce_max_sync(0xFFFFFFFFu, high); /* the highest bin + 1, 0 for none */
        low = __reduce_min_sync(0xFFFFFFFFu, low);
        if ((threadIdx.x & 31) == 0 && high) {
            atomicMax(&exchange.high[0], high - 1);
            atomicMin(&exchange.low[0], low);
        }
    }
}

/* After a level's cluster barrier, for clusters of at most CLUSTER_DIRECT_PARTS CTAs: the row's
 * count of this thread's bins (counts[j] is bin bins - 1 - per * threadIdx.x - j, per =
 * bins / 512), the sum of every CTA's `histogram` read directly (parts x 8 KiB into each SM,
 * in one round trip where the super-bins take two). */
static __device__ __forceinline__ void cluster_row_bins(const cg::cluster_group &cluster,
                                                        const uint32_t *histogram, uint32_t parts,
                                                        uint32_t bins, uint32_t (&counts)[4])
{
    const uint32_t per = bins / TREE_THREADS, low = bins - per * (threadIdx.x + 1);
#pragma unroll
    for (uint32_t j = 0; j < 4; j++)
        counts[j] = 0;
    /* Every CTA's load in flight at once: a remote load costs hundreds of cycles. */
#pragma unroll
    for (uint32_t c = 0; c < CLUSTER_DIRECT_PARTS; c++) {
        if (c >= parts)
            break;
        const uint32_t *remote = cluster.map_shared_rank(histogram, c) + low;
        uint4 v = make_uint4(0, 0, 0, 0);
        if (per == 4) {
            v = *reinterpret_cast<const uint4 *>(remote);
        } else {
            const uint2 pair = *reinterpret_cast<const uint2 *>(remote);
            v.z = pair.x;
            v.w = pair.y;
        }
        counts[0] += v.w;
        counts[1] += v.z;
        counts[2] += v.y;
        counts[3] += v.x;
    }
}

/* After a level's cluster barrier (and, for clusters of more than CLUSTER_DIRECT_PARTS CTAs,
 * cluster_summarize before it): the bin holding the row's remaining-th largest into
 * shared.selected_digit / selected_above / selected_count (unset when the row has fewer
 * candidates); with `bound` 0 or 1 also the row's exchange.row_high / row_low[bound] (level 0's
 * bins from the row's counts where they are read whole, else from every CTA's high / low).
 * Returns the row's total of candidates. Large clusters: warp 0 alone, by the super-bins; small
 * ones: every thread reads its bins from every CTA (cluster_row_bins) and a block scan finds the
 * bin (the super-bins' two round trips and their summary cost more than reading 8 or 16 KiB:
 * docs/PERF.md v0.6.9). Every thread must call it. */
static __device__ uint32_t cluster_level_pick(const cg::cluster_group &cluster,
                                              const uint32_t *histogram,
                                              const uint32_t *super_bins, uint32_t parts,
                                              uint32_t bins, uint32_t remaining, int bound,
                                              tree_shared &shared, cluster_exchange &exchange,
                                              uint32_t &parity)
{
    const uint32_t lane = threadIdx.x & 31;
    uint32_t high = 0, low = 0xFFFFFFFFu;
    const bool direct = parts <= CLUSTER_DIRECT_PARTS;
    if (bound >= 0 && threadIdx.x < parts && !(direct && bound == 0)) {
        /* Warp 0: the CTAs' bounds, used at the end. */
        const cluster_exchange *remote = cluster.map_shared_rank(&exchange, threadIdx.x);
        high = remote->high[bound];
        low = remote->low[bound];
    }
    if (direct) {
        uint32_t counts[4];
        cluster_row_bins(cluster, histogram, parts, bins, counts);
        const uint32_t per = bins / TREE_THREADS, top = bins - 1 - per * threadIdx.x;
        uint32_t sum = 0, total;
#pragma unroll
        for (uint32_t j = 0; j < 4; j++)
            sum += j < per ? counts[j] : 0u;
        if (bound == 0) {
            /* Level 0's bounds from the row's counts (no super-bins were summarized; the
             * scan's barriers publish them). */
            uint32_t high_bin = 0, low_bin = BITONIC_NO_BIN;
#pragma unroll
            for (uint32_t j = 0; j < 4; j++) {
                if (j < per && counts[j]) {
                    high_bin = high_bin > top - j ? high_bin : top - j;
                    low_bin = top - j;
                }
            }
            high_bin = __reduce_max_sync(0xFFFFFFFFu, high_bin);
            low_bin = __reduce_min_sync(0xFFFFFFFFu, low_bin);
            if (lane == 0) {
                atomicMax(&exchange.row_high[0], high_bin);
                atomicMin(&exchange.row_low[0], low_bin);
            }
        }
        const uint32_t above = block_exclusive_sum_of<TREE_WARPS>(sum, shared.scan, parity, total);
        pick_bin(counts, per, top, above, remaining, shared);
        if (threadIdx.x == 0)
            exchange.row_total = total;
    } else if (threadIdx.x < 32) {
        const uint32_t supers = bins / CLUSTER_SUPER_WIDTH; /* 64 or 32 */
        /* Lane l takes super-bins from the top: supers - 1 - l, or with 64 the pair
         * 63 - 2l (upper) and 62 - 2l (lower), one 8-byte load per CTA. */
        const bool pairs = supers == 64;
        const uint32_t upper = pairs ? supers - 1 - 2 * lane : supers - 1 - lane;
        uint32_t upper_count = 0, lower_count = 0;
        /* Loads of several CTAs in flight at a time: a remote load costs hundreds of cycles. */
#pragma unroll 4
        for (uint32_t c = 0; c < parts; c++) {
            const uint32_t *remote = cluster.map_shared_rank(super_bins, c);
            if (pairs) {
                const uint2 v = *reinterpret_cast<const uint2 *>(remote + upper - 1);
                lower_count += v.x;
                upper_count += v.y;
            } else {
                upper_count += remote[upper];
            }
        }
        const uint32_t sum = upper_count + lower_count, inclusive = warp_inclusive_sum(sum);
        const uint32_t above = inclusive - sum;
        if (lane == 31)
            exchange.row_total = inclusive;
        /* The lane whose super-bins hold the remaining-th largest (one at most: a lane with
         * none has above == inclusive). */
        const uint32_t owner =
            __ballot_sync(0xFFFFFFFFu, above < remaining && remaining <= inclusive);
        if (owner) {
            uint32_t super = upper, super_above = above;
            if (remaining > above + upper_count) {
                super = upper - 1;
                super_above = above + upper_count;
            }
            const uint32_t from = __ffs(owner) - 1;
            super = __shfl_sync(0xFFFFFFFFu, super, from);
            super_above = __shfl_sync(0xFFFFFFFFu, super_above, from);
            /* Its bins, lane l the l-th from the top. */
            const uint32_t bin = super * CLUSTER_SUPER_WIDTH + CLUSTER_SUPER_WIDTH - 1 - lane;
            uint32_t count = 0;
#pragma unroll 4
            for (uint32_t c = 0; c < parts; c++)
                count += cluster.map_shared_rank(histogram, c)[bin];
            const uint32_t bin_above = super_above + warp_inclusive_sum(count) - count;
            if (bin_above < remaining && remaining <= bin_above + count) {
                shared.selected_digit = bin;
                shared.selected_above = bin_above;
                shared.selected_count = count;
            }
        }
    }
    if (bound >= 0 && threadIdx.x < 32 && !(direct && bound == 0)) {
        high = __reduce_max_sync(0xFFFFFFFFu, high);
        low = __reduce_min_sync(0xFFFFFFFFu, low);
        if (lane == 0) {
            exchange.row_high[bound] = high;
            exchange.row_low[bound] = low;
        }
    }
    __syncthreads();
    return exchange.row_total;
}

/* The cluster barrier, or the CTA's own where the cluster is one CTA (rows of one slice): a
 * cluster barrier's release is a GPU-scope memory barrier in SASS (MEMBAR.ALL.GPU before the
 * arrive), about 0.5 us each where a CTA barrier costs a few dozen cycles, and with one CTA no
 * other CTA reads what it wrote (docs/PERF.md v0.6.5). Every thread must call it. */
static __device__ __forceinline__ void cluster_barrier(const cg::cluster_group &cluster,
                                                       uint32_t parts)
{
    if (parts == 1)
        __syncthreads();
    else
        cluster.sync();
}

/* Warp 0 sums `value(c)` over the cluster's CTAs c < limit into *result; the caller's next
 * barrier publishes it. */
template <typename Read>
static __device__ __forceinline__ void cluster_sum_before(uint32_t limit, uint32_t *result,
                                                          Read read)
{
    if (threadIdx.x < 32) {
        uint32_t value = threadIdx.x < limit ? read(threadIdx.x) : 0u;
        value = __reduce_add_sync(0xFFFFFFFFu, value);
        if (threadIdx.x == 0)
            *result = value;
    }
}

/* ITEMS keys per thread in registers, SHARED_ITEMS more in shared memory (after the two
 * composite buffers; cluster_load_shared). */
template <uint32_t ITEMS, uint32_t SHARED_ITEMS>
static __global__ void __launch_bounds__(TREE_THREADS, ITEMS == 16 ? 2 : 1)
k_cluster_topk(const struct topk_problem problem, const uint32_t capacity, const uint32_t staged)
{
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
    extern __shared__ uint64_t cluster_buffers[];
    __shared__ __align__(16) tree_shared shared;
    __shared__ cluster_exchange exchange;
    const cg::cluster_group cluster = cg::this_cluster();
    const uint32_t parts = cluster.num_blocks(), part = cluster.block_rank();
    const uint32_t row = blockIdx.x / parts;
    const uint32_t k = problem.shape.k;
    constexpr uint32_t TOTAL = ITEMS + SHARED_ITEMS; /* items per thread */
    const uint32_t first = part * (TREE_THREADS * TOTAL);
    /* The leader's two buffers of `capacity` entries each (cluster_buffer_entries(): twice the
     * output, up to four times on long rows, where shared memory allows) leave room to gather the
     * k-th's whole bin and rank it in the output stage instead of refining further. */
    uint64_t *selection = cluster_buffers;
    uint64_t *bucketed = cluster_buffers + capacity;
    /* The keys kept in shared memory (SHARED_ITEMS), or the bulk load's staging (`staged`). */
    uint32_t *const shared_keys = reinterpret_cast<uint32_t *>(cluster_buffers + 2 * capacity);
    /* The levels' histograms alternate between two buffers that the output stage reuses: a CTA
     * zeroes one for level 2 only after the level-1 barrier, which every CTA reaches after it
     * read the level-0 counts. */
    uint32_t *const even_histogram = shared.bucket_start, *const odd_histogram = shared.sub_start;
    uint32_t parity = 0;
    PHASE_START(SHARED_ITEMS ? PHASE_CLUSTER128
                             : ITEMS == 16 ? PHASE_CLUSTER16
                             : ITEMS == 32 ? PHASE_CLUSTER32
                                           : PHASE_CLUSTER64);
    bool bulk = false;
    if constexpr (SHARED_ITEMS == 0 && ITEMS == CLUSTER_BULK_CHUNKS * CLUSTER_BULK_CHUNK_ITEMS)
        bulk = staged && cluster_bulk_load<ITEMS>(problem, row, first, shared_keys, exchange.bulk);

    for (uint32_t i = threadIdx.x; i < BITONIC_BINS; i += TREE_THREADS) {
        shared.histogram[i] = 0;
        shared.sub_sizes[i] = 0;
        shared.bucket_start[i] = 0;
        shared.sub_start[i] = 0;
    }
    if (threadIdx.x == 0) {
        /* Made visible to the cluster by the fence and the first cluster barrier, long before
         * any remote store signals it. */
        if (parts >= CLUSTER_ASYNC_GATHER_PARTS)
            mbarrier_init(shared_address(&exchange.gather), 1);
        exchange.high[0] = 0; /* the bounds: published by the level-0 cluster barrier */
        exchange.low[0] = BITONIC_NO_BIN;
        exchange.high[1] = 0;
        exchange.low[1] = 0xFFFFFFFFu;
        exchange.row_high[0] = 0; /* set by atomics where the pick reads histograms directly */
        exchange.row_low[0] = BITONIC_NO_BIN;
        exchange.claimed = 0;
        exchange.own = 0;
        shared.overflow_count = 0; /* the output stage's (tree_bucket_place) */
        shared.overflow_bucket = 0;
    }
    uint32_t keys[ITEMS];
    /* Level 0: the top 11 bits over the whole row, in the histograms zeroed above (the barrier
     * publishes them). Slices in registers alone: the barrier first, then each key counted as its
     * load arrives; a barrier after the loads waited for all of them (measured on the H200: the
     * grid 1.9% faster, docs/PERF.md v0.6.2). Slices with a shared-memory part: the register
     * loads, the barrier, then the shared chunks counted as they load, and the register keys
     * (here the other order measured 0.3-0.7% slower at 64 x 131072). */
    if constexpr (SHARED_ITEMS > 0) {
        cluster_load_slice<ITEMS>(problem, row, first, keys);
        __syncthreads();
        cluster_load_shared<ITEMS, SHARED_ITEMS>(problem, row, first, shared_keys,
                                                 even_histogram, &exchange.trash);
        PHASE_MARK(0);
        cluster_level0_registers<ITEMS>(keys, even_histogram, &exchange.trash);
    } else {
        __syncthreads(); /* also publishes the bulk load's mbarriers */
        if (bulk) {
            PHASE_MARK(0);
            cluster_bulk_keys<ITEMS>(shared_keys, exchange.bulk, keys, even_histogram,
                                     &exchange.trash);
        } else {
            cluster_load_slice<ITEMS>(problem, row, first, keys);
            PHASE_MARK(0);
            cluster_level0_registers<ITEMS>(keys, even_histogram, &exchange.trash);
        }
    }
    /* Item i of this thread: a register, or (i >= ITEMS) shared memory. Loops over items are
     * unrolled, so the choice is made at compile time. */
    const auto key = [&](uint32_t i) -> uint32_t {
        return i < ITEMS ? keys[i < ITEMS ? i : 0]
                         : shared_keys[(i - ITEMS) * TREE_THREADS + threadIdx.x];
    };
    if (parts > CLUSTER_DIRECT_PARTS)
        cluster_summarize(even_histogram, 2048u, exchange.super_bins[0], true, exchange);
    cluster_barrier(cluster, parts);
    PHASE_MARK(1);
    const uint32_t total = cluster_level_pick(cluster, even_histogram, exchange.super_bins[0],
                                              parts, 2048u, k, 0, shared, exchange, parity);
    PHASE_MARK(2);
    uint32_t mask = 0, prefix = 0, remaining = k, level = 0, tie_bin = 0;
    bool whole = true; /* every candidate matching the prefix is gathered */
    /* What the leader receives: the top k, or (see below) every candidate at or above the
     * k-th's bin, which the output stage ranks and cuts at k. */
    uint32_t gathered = total < k ? total : k;
    if (total > k) {
        remaining = k - shared.selected_above;
        prefix = shared.selected_digit << 21;
        mask = 0xFFE00000u;
        whole = shared.selected_count == remaining;
        /* When the bin and everything above it fit the leader's buffer, gather them all: the
         * composites are unique, so ranking them and keeping ranks below k is the exact top k
         * with ties by index, without the cluster barriers of levels 1 and 2 and of the tie
         * scans (most random rows: a level-0 bin holds a few hundred to a few thousand). */
        const uint32_t kept = shared.selected_above + shared.selected_count;
        if (!whole && kept <= capacity) {
            whole = true;
            gathered = kept;
        }
    }
    if (!whole) {
        /* Level 1: the next 11 bits of the k-th's bin, and the range of its keys. */
        level = 1;
        uint32_t low = 0xFFFFFFFFu, high = 0;
#pragma unroll
        for (uint32_t i = 0; i < TOTAL; i++) {
            const uint32_t k_i = key(i);
            if (k_i != CLUSTER_NO_KEY && (k_i & mask) == prefix) {
                atomicAdd(&odd_histogram[(k_i >> 10) & 2047u], 1u);
                low = k_i < low ? k_i : low;
                high = k_i > high ? k_i : high;
            }
        }
        low = __reduce_min_sync(0xFFFFFFFFu, low);
        high = __reduce_max_sync(0xFFFFFFFFu, high);
        if ((threadIdx.x & 31) == 0) {
            atomicMin(&exchange.low[1], low);
            atomicMax(&exchange.high[1], high);
        }
        if (parts > CLUSTER_DIRECT_PARTS)
            cluster_summarize(odd_histogram, 2048u, exchange.super_bins[1], false, exchange);
        cluster_barrier(cluster, parts);
        PHASE_MARK(3);
        cluster_level_pick(cluster, odd_histogram, exchange.super_bins[1], parts, 2048u,
                           remaining, 1, shared, exchange, parity);
        PHASE_MARK(4);
        if (exchange.row_low[1] == exchange.row_high[1]) {
            /* One key: all of them tie; the first `remaining` in index order are taken. */
            prefix = exchange.row_low[1];
            mask = 0xFFFFFFFFu;
            tie_bin = (prefix >> 10) & 2047u;
        } else {
            remaining -= shared.selected_above;
            prefix |= shared.selected_digit << 10;
            mask = 0xFFFFFC00u;
            tie_bin = shared.selected_digit;
            whole = shared.selected_count == remaining;
            /* As after level 0: everything above this bin (k - remaining) and the bin. */
            const uint32_t kept = k - remaining + shared.selected_count;
            if (!whole && kept <= capacity) {
                whole = true;
                gathered = kept;
            }
            if (!whole) {
                /* Level 2: the last 10 bits; then the bin is one key. */
                level = 2;
                for (uint32_t i = threadIdx.x; i < BITONIC_BINS; i += TREE_THREADS)
                    even_histogram[i] = 0;
                __syncthreads();
                cluster_histogram<TOTAL>(key, mask, prefix, 0u, 1023u, even_histogram);
                if (parts > CLUSTER_DIRECT_PARTS)
                    cluster_summarize(even_histogram, 1024u, exchange.super_bins[0], false,
                                      exchange);
                cluster_barrier(cluster, parts);
                cluster_level_pick(cluster, even_histogram, exchange.super_bins[0], parts, 1024u,
                                   remaining, -1, shared, exchange, parity);
                PHASE_MARK(5);
                remaining -= shared.selected_above;
                prefix |= shared.selected_digit;
                mask = 0xFFFFFFFFu;
                tie_bin = shared.selected_digit;
                whole = shared.selected_count == remaining;
            }
        }
    }

    /* Selection flags: whole, every candidate matching the prefix or above; else the keys
     * above the tie key, while the first `remaining` ties of the row in index order are written
     * to the output here. */
    cluster_flags<TOTAL> flags;
    flags.clear();
    if (whole) {
        /* prefix has no bits outside mask, so (key & mask) >= prefix is key >= prefix; above
         * CLUSTER_NO_KEY (any k-th largest above -inf) that alone excludes the non-candidates:
         * one compare per key instead of two (uniform branch). */
        if (prefix > CLUSTER_NO_KEY) {
#pragma unroll
            for (uint32_t i = 0; i < TOTAL; i++) {
                if (key(i) >= prefix)
                    flags.set(i);
            }
        } else {
#pragma unroll
            for (uint32_t i = 0; i < TOTAL; i++) {
                const uint32_t k_i = key(i);
                if (k_i >= prefix && k_i != CLUSTER_NO_KEY)
                    flags.set(i);
            }
        }
    } else {
        uint32_t *histogram = (level & 1u) ? odd_histogram : even_histogram;
        const uint32_t mine = histogram[tie_bin];
        cluster_sum_before(part, &exchange.ties_before, [&](uint32_t c) {
            return cluster.map_shared_rank(histogram, c)[tie_bin];
        });
        /* Index order is group-major (element g * 2048 + 4t + j): the ties are ranked by block
         * scans of two groups at a time, packed in 16-bit halves (a group holds at most 2048).
         * The first scan's barrier also publishes ties_before, so the CTA's quota is known
         * after it; each pair is flagged right after its scan (no per-group arrays). */
        uint32_t running = 0, quota = 0, before = 0;
        gathered = k - remaining; /* the keys above the tie key; the ties are written here */
        /* The CTA's quota of ties by rank, as slice elements: the output stage's buffer, not
         * used before it (2 * capacity words >= k >= quota). */
        uint32_t *const tie_stage = reinterpret_cast<uint32_t *>(bucketed);
#pragma unroll
        for (uint32_t g = 0; g < TOTAL / 4; g += 2) {
            uint32_t pair_counts = 0;
#pragma unroll
            for (uint32_t j = 0; j < 8; j++) {
                const uint32_t i = 4 * g + j;
                const uint32_t k_i = key(i);
                if (k_i != CLUSTER_NO_KEY) {
                    if (k_i > prefix)
                        flags.set(i);
                    else if (k_i == prefix)
                        pair_counts += j < 4 ? 1u : 1u << 16;
                }
            }
            uint32_t pair_total;
            const uint32_t exclusive =
                block_exclusive_sum_of<TREE_WARPS>(pair_counts, shared.scan, parity, pair_total);
            if (g == 0) {
                before = exchange.ties_before;
                quota = remaining > before ? (remaining - before < mine ? remaining - before : mine)
                                           : 0u;
            }
            uint32_t rank = running + (exclusive & 0xFFFFu);
#pragma unroll
            for (uint32_t j = 0; j < 8; j++) {
                const uint32_t i = 4 * g + j;
                if (j == 4)
                    rank = running + (pair_total & 0xFFFFu) + (exclusive >> 16);
                /* prefix is a candidate's key, never CLUSTER_NO_KEY */
                const bool tie = key(i) == prefix;
                if (tie && rank < quota)
                    tie_stage[rank] = (i / 4) * TREE_LEAF_QUANTUM + threadIdx.x * 4 + (i % 4);
                rank += tie ? 1u : 0u;
            }
            running += (pair_total & 0xFFFFu) + (pair_total >> 16);
        }
        /* The ties' output positions are known: after the k - remaining keys above the tie key,
         * at their rank among the row's ties in index order. Written here, they are not
         * gathered: a plateau of ties (the 0.0 of ReLU rows) would be one oversized bucket of
         * the leader's ranking. Staged by rank above and written in order: write_output()
         * inside the unrolled loop was a branch and its code per item (docs/PERF.md v0.6.5). */
        __syncthreads();
#pragma unroll 1
        for (uint32_t j = threadIdx.x; j < quota; j += TREE_THREADS)
            write_output(problem, row, k - remaining + before + j,
                         (int32_t)(first + tie_stage[j]));
    }

    /* Gather: the leader's buffer receives the whole selection. Each warp claims its slots
     * with one atomic on the leader's counter, so the order of the buffer depends on arrival;
     * its content does not, and the output stage ranks it by value (unique composites), so the
     * output does not either. (Slots by a block scan and a count exchange cost a CTA barrier
     * and a cluster barrier, 0.5 us with its GPU-scope membar: docs/PERF.md v0.6.5.) */
    PHASE_MARK(6);
    /* Rows of CLUSTER_ASYNC_GATHER_PARTS CTAs or more end with no cluster barrier after the
     * gather (below), and a CTA's shared memory must outlive the others' reads of it (the level
     * histograms, the tie counts, all read before this point): each CTA arrives here, relaxed
     * (no membar: its reads are done, their values used), and waits before it leaves. */
    if (parts >= CLUSTER_ASYNC_GATHER_PARTS)
        asm volatile("barrier.cluster.arrive.relaxed.aligned;" ::: "memory");
    uint32_t slot;
    {
        const uint32_t count = flags.count(), inclusive = warp_inclusive_sum(count);
        uint32_t base = 0;
        if ((threadIdx.x & 31u) == 31) {
            base = atomicAdd(cluster.map_shared_rank(&exchange.claimed, 0), inclusive);
            if (part == 0)
                atomicAdd(&exchange.own, inclusive);
        }
        slot = __shfl_sync(0xFFFFFFFFu, base, 31) + inclusive - count;
    }
    PHASE_MARK(7);
    /* Calls emit(element, key) for each selected item: over all items unrolled (the keys are in
     * registers), or where the bulk load's staging still holds the slice, and for the keys kept
     * in shared memory, over the flags' set bits (a rolled loop reading the key from shared
     * memory: the unrolled loop's code, fetched cold once per CTA, was the kernel's largest
     * stall, docs/PERF.md v0.6.9 and v0.6.10). */
    const auto for_each_selected = [&](auto emit) {
#if CLUSTER_STAGED_GATHER
        if (bulk) {
#pragma unroll
            for (uint32_t w = 0; w < sizeof(flags.words) / sizeof(flags.words[0]); w++) {
                auto bits = flags.words[w];
#pragma unroll 1
                while (bits) {
                    const uint32_t i = w * flags.BITS + (uint32_t)__ffsll((long long)bits) - 1;
                    bits &= bits - 1;
                    const uint32_t element =
                        (i / 4) * TREE_LEAF_QUANTUM + threadIdx.x * 4 + (i % 4);
                    emit(element, order_key_bits(shared_keys[element]));
                }
            }
            return;
        }
#endif
        if constexpr (SHARED_ITEMS > 0 && CLUSTER_STAGED_GATHER) {
            /* Keys in registers unrolled; the shared-memory half (whole flag words: ITEMS is
             * a multiple of 64) by its set bits. */
            static_assert(ITEMS % 64 == 0, "the shared items start a flag word");
#pragma unroll
            for (uint32_t i = 0; i < ITEMS; i++) {
                if (flags.test(i))
                    emit((i / 4) * TREE_LEAF_QUANTUM + threadIdx.x * 4 + (i % 4), key(i));
            }
#pragma unroll
            for (uint32_t w = ITEMS / 64; w < sizeof(flags.words) / sizeof(flags.words[0]); w++) {
                auto bits = flags.words[w];
#pragma unroll 1
                while (bits) {
                    const uint32_t i = w * flags.BITS + (uint32_t)__ffsll((long long)bits) - 1;
                    bits &= bits - 1;
                    emit((i / 4) * TREE_LEAF_QUANTUM + threadIdx.x * 4 + (i % 4),
                         shared_keys[(i - ITEMS) * TREE_THREADS + threadIdx.x]);
                }
            }
        } else {
#pragma unroll
            for (uint32_t i = 0; i < TOTAL; i++) {
                if (flags.test(i))
                    emit((i / 4) * TREE_LEAF_QUANTUM + threadIdx.x * 4 + (i % 4), key(i));
            }
        }
    };
    if (parts >= CLUSTER_ASYNC_GATHER_PARTS) {
        /* The other CTAs' composites reach the leader as asynchronous remote stores that count
         * their bytes on its mbarrier; the leader expects the bytes of all the selection but
         * its own (`gathered` in all, the same count in every CTA). No cluster barrier: its
         * release (MEMBAR.ALL.GPU) waits for every remote store to be acknowledged, the largest
         * stall of the kernel on rows of 8 CTAs (ncu, docs/PERF.md). A CTA then leaves; cluster
         * barriers wait for non-exited threads only, and no CTA reads another's shared memory
         * after the barrier above. */
        const uint32_t barrier = shared_address(&exchange.gather);
        const uint32_t leader_barrier = cluster_map(barrier, 0);
        const uint32_t leader_selection = cluster_map(shared_address(selection), 0);
        for_each_selected([&](uint32_t element, uint32_t key_i) {
            const uint64_t composite = make_composite(key_i, first + element);
            if (part == 0)
                selection[slot] = composite;
            else
                store_async(leader_selection + 8u * slot, composite, leader_barrier);
            slot++;
        });
        /* Every CTA has read what it needed of the others' shared memory (the leader's
         * output stage reuses its level histograms). */
        asm volatile("barrier.cluster.wait.aligned;" ::: "memory");
        if (part != 0)
            return; /* uniform: the leader writes the output */
        __syncthreads(); /* exchange.own is complete */
        if (threadIdx.x == 0)
            mbarrier_expect_bytes(barrier, 8u * (gathered - exchange.own));
        mbarrier_wait(barrier, 0);
        __syncthreads(); /* the leader's own entries too */
    } else {
        /* Plain remote stores and a cluster barrier: faster where each CTA sends many. */
        uint64_t *leader_selection = cluster.map_shared_rank(selection, 0);
        for_each_selected([&](uint32_t element, uint32_t key_i) {
            leader_selection[slot++] = make_composite(key_i, first + element);
        });
        /* The last access to another CTA's shared memory is before it. */
        cluster_barrier(cluster, parts);
        if (part != 0)
            return; /* uniform: the leader writes the output */
    }
    PHASE_MARK(8);
    /* The output stage's bucket map (bucket_of), computed by the leader: every gathered key
     * is at least `prefix` (keys above the tie key, or matching the prefix or above) and a
     * candidate, so within level 0's lowest and highest non-empty bins. Taken from level 0,
     * the map saves the leader its pass measuring the selection's range (0.8 us at 16 x 131072
     * k 2048). */
    const uint32_t low_bin = exchange.row_low[0] == BITONIC_NO_BIN ? 0u : exchange.row_low[0];
    const uint32_t low_key = prefix > (low_bin << 21) ? prefix : low_bin << 21;
    const uint32_t high_key = (exchange.row_high[0] << 21) | 0x1FFFFFu;
    const bucket_map map =
        bucket_map_of((uint64_t)low_key << 32, ((uint64_t)high_key << 32) | 0xFFFFFFFFu);
    /* The leader counts the selection's buckets. Counted as the entries were gathered (the
     * senders' remote atomics, or the leader's own in its unrolled gather loop), the gather
     * took 0.7-4.7 us longer on the H200 (docs/PERF.md v0.6.3). */
#pragma unroll 1
    for (uint32_t e = threadIdx.x; e < gathered; e += OUTPUT_BATCH * TREE_THREADS) {
        uint64_t c[OUTPUT_BATCH];
#pragma unroll
        for (uint32_t b = 0; b < OUTPUT_BATCH; b++)
            c[b] = e + b * TREE_THREADS < gathered ? selection[e + b * TREE_THREADS] : 0;
#pragma unroll
        for (uint32_t b = 0; b < OUTPUT_BATCH; b++) /* adding 0: no branch */
            atomicAdd(&shared.histogram[bucket_of(map, c[b])],
                      e + b * TREE_THREADS < gathered ? 1u : 0u);
    }
    __syncthreads();

    /* Output by the leader alone: every other CTA has left its SM to the next cluster's. Its
     * histogram holds the selection's bucket sizes, sub_sizes is zero. */
    tree_write_output(problem, row, selection, gathered, whole ? k : gathered, bucketed, &map,
                      shared, parity);
#endif
}

/* Entries of the composite buffer for k: a power of two, at least one warp's sort chunk. */
static uint32_t composite_entries(uint32_t value)
{
    uint32_t power = BITONIC_MIN_SORT;
    while (power < value)
        power <<= 1;
    return power;
}

static size_t bitonic_fixed_smem(uint32_t k)
{
    return sizeof(struct bitonic_control) + (size_t)composite_entries(k) * sizeof(uint64_t);
}

/* DSATOPK_BITONIC_SPLIT (a testing knob, docs/BACKENDS.md): auto (default) runs the tree path
 * (leaves of 8192 elements) for every k <= 4096 and one CTA per row above; always runs the tree
 * path with leaves of 2048 elements (deep trees on every shape the GPU suite tries); never keeps
 * one CTA per row everywhere. Read once per process: scratch_bytes() and launch() must agree. */
/* DSATOPK_BITONIC_SPLIT: auto, tree, cluster (the cluster path wherever it applies, else the
 * tree), cluster16/32/64/128 (the same with that many keys per thread), always, never. */
enum split_mode {
    SPLIT_AUTO,
    SPLIT_TREE,
    SPLIT_CLUSTER,
    SPLIT_CLUSTER16,
    SPLIT_CLUSTER32,
    SPLIT_CLUSTER64,
    SPLIT_CLUSTER128,
    SPLIT_ALWAYS,
    SPLIT_NEVER,
    SPLIT_INVALID
};

/* The knob's values, in enum order. */
static const char *const split_mode_names[SPLIT_INVALID] = {
    "auto",      "tree",       "cluster", "cluster16", "cluster32",
    "cluster64", "cluster128", "always",  "never",
};
#define SPLIT_VALUES                                                                             \
    "auto, tree, cluster, cluster16, cluster32, cluster64, cluster128, always or never"

static enum split_mode split_mode_now(void)
{
    static std::atomic<int> cached(-1);
    int mode = cached.load(std::memory_order_relaxed);
    if (mode < 0) {
        const char *text = getenv("DSATOPK_BITONIC_SPLIT");
        mode = (!text || !*text) ? SPLIT_AUTO : SPLIT_INVALID;
        for (int m = 0; text && *text && m < SPLIT_INVALID; m++)
            if (strcmp(text, split_mode_names[m]) == 0)
                mode = m;
        cached.store(mode, std::memory_order_relaxed); /* every racing thread stores the same */
    }
    return (enum split_mode)mode;
}

static const char *split_env_text(void)
{
    const char *text = getenv("DSATOPK_BITONIC_SPLIT");
    return text ? text : "";
}

/* How a shape is cut. Returns false where the tree path does not apply (the one-CTA path runs):
 * mode never, k of 0 or above TREE_MAX_K, no rows, a device whose shared memory per block is
 * below the tree kernel's (its static part and two output buffers: 98976 B at k = 4096), a tree
 * deeper than TREE_MAX_LEVELS, or a grid over 2^31 - 1 blocks. `always` cuts leaves of 2048
 * elements, so that the GPU suite runs deep trees, leaf boundaries and partial parents on every
 * shape. */
static bool tree_plan_of(const struct gpu_device_info *device, const struct topk_shape *shape,
                         enum split_mode mode, struct tree_plan *plan)
{
    memset(plan, 0, sizeof(*plan));
    if (mode == SPLIT_NEVER || mode == SPLIT_INVALID)
        return false;
    if (shape->rows == 0 || shape->k == 0 || shape->k > TREE_MAX_K || shape->max_length < 0)
        return false;
    if (sizeof(tree_shared) + 2 * (size_t)composite_entries(shape->k) * sizeof(uint64_t) >
        device->smem_per_block_optin)
        return false;
    const uint64_t length = (uint64_t)shape->max_length;
    plan->leaf_elements = mode == SPLIT_ALWAYS ? TREE_LEAF_QUANTUM : TREE_CAPACITY;
    uint64_t leaves = (length + plan->leaf_elements - 1) / plan->leaf_elements;
    if (leaves == 0)
        leaves = 1;
    if ((uint64_t)shape->rows * leaves > 0x7FFFFFFFu)
        return false;
    plan->fan_in = TREE_CAPACITY / shape->k;
    if (plan->fan_in > TREE_MAX_FAN_IN)
        plan->fan_in = TREE_MAX_FAN_IN;
    uint64_t nodes = leaves;
    plan->levels = 0;
    plan->nodes_per_row = 0;
    for (;;) {
        if (plan->levels == TREE_MAX_LEVELS)
            return false;
        plan->first_node[plan->levels] = plan->nodes_per_row;
        plan->nodes[plan->levels] = (uint32_t)nodes;
        plan->nodes_per_row += (uint32_t)nodes;
        plan->levels++;
        if (nodes == 1)
            return true;
        nodes = (nodes + plan->fan_in - 1) / plan->fan_in;
    }
}

/* Byte offsets in the tree path's scratch. The arrival counters come first: they are the only
 * part that must start at zero (one cudaMemsetAsync per call); counts and lists are written
 * before they are read within the call. A one-level tree (rows of at most one leaf) needs none. */
struct tree_layout {
    size_t arrivals, row_histograms, counts, lists, zeroed_bytes, total;
};

static size_t align_up(size_t value, size_t alignment)
{
    return (value + alignment - 1) / alignment * alignment;
}

static struct tree_layout tree_layout_of(const struct topk_shape *shape,
                                         const struct tree_plan *plan)
{
    struct tree_layout layout = { 0, 0, 0, 0, 0, 0 };
    if (plan->levels <= 1)
        return layout;
    const size_t slots = (size_t)shape->rows * plan->nodes_per_row;
    layout.arrivals = 0;
    layout.row_histograms = align_up(slots * sizeof(uint32_t), 256);
    layout.zeroed_bytes =
        layout.row_histograms + (size_t)shape->rows * BITONIC_BINS * sizeof(uint32_t);
    layout.counts = align_up(layout.zeroed_bytes, 256);
    layout.lists = align_up(layout.counts + slots * sizeof(uint32_t), 256);
    layout.total = layout.lists + slots * shape->k * sizeof(uint64_t);
    return layout;
}

/* The tree path: a memset and the pass-1 histogram (when the tree has parents), then the tree
 * kernel, on the stream, nothing else (capturable). */
static int tree_launch(const struct topk_problem *problem, const struct tree_plan *plan,
                       cudaStream_t stream, struct audit_error *err)
{
    const struct topk_shape *shape = &problem->shape;
    const struct tree_layout layout = tree_layout_of(shape, plan);
    if (layout.total && (!problem->scratch || problem->scratch_bytes < layout.total))
        return audit_fail(err, AUDIT_EUSAGE,
                          "bitonic: scratch of %zu B given, this shape needs %zu B "
                          "(rows cut into %u leaves; ask scratch_bytes())",
                          problem->scratch ? problem->scratch_bytes : (size_t)0, layout.total,
                          plan->nodes[0]);
    tree_scratch scratch;
    memset(&scratch, 0, sizeof(scratch));
    scratch.plan = *plan;
    if (layout.total) {
        char *base = static_cast<char *>(problem->scratch);
        scratch.arrivals = reinterpret_cast<uint32_t *>(base + layout.arrivals);
        scratch.counts = reinterpret_cast<uint32_t *>(base + layout.counts);
        scratch.lists = reinterpret_cast<uint64_t *>(base + layout.lists);
        scratch.row_histograms = reinterpret_cast<uint32_t *>(base + layout.row_histograms);
    }
    const unsigned int blocks = (unsigned int)(shape->rows * plan->nodes[0]); /* < 2^31 (plan) */
    if (layout.total) {
        CUDA_TRY(cudaMemsetAsync(problem->scratch, 0, layout.zeroed_bytes, stream), err);
        if (scratch.row_histograms) {
            k_tree_histogram<<<blocks, TREE_THREADS, 0, stream>>>(*problem, scratch);
            CUDA_TRY(cudaGetLastError(), err);
        }
    }
    const size_t smem = 2 * (size_t)composite_entries(shape->k) * sizeof(uint64_t);
    CUDA_TRY(cudaFuncSetAttribute(k_tree_topk, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                  (int)smem),
             err);
    k_tree_topk<<<blocks, TREE_THREADS, smem, stream>>>(*problem, scratch);
    CUDA_TRY(cudaGetLastError(), err);
    return 0;
}

/* The cluster path's cut of a shape: `parts` CTAs per row, `items` elements per thread. */
struct cluster_plan {
    uint32_t parts, items;
};

/* Did this build compile the cluster kernel for an architecture with clusters (sm_90+)? */
static bool cluster_kernel_built(void)
{
    static const int archs[] = { __CUDA_ARCH_LIST__ };
    int highest = 0;
    for (size_t i = 0; i < sizeof(archs) / sizeof(archs[0]); i++)
        highest = archs[i] > highest ? archs[i] : highest;
    return highest >= 900;
}

/* Keys per thread of the cluster path that live in shared memory: slices of 65536 hold 64 of
 * their 128 keys per thread there (registers cap out near 64 keys). */
static uint32_t cluster_shared_items(uint32_t items)
{
    return items > 4 * TREE_ITEMS ? items - 4 * TREE_ITEMS : 0u;
}

/* Static shared memory of the cluster kernel plus its two composite buffers of `entries` and
 * the keys it keeps in shared memory with `items` keys per thread. */
static size_t cluster_smem_total(size_t entries, uint32_t items)
{
    return sizeof(tree_shared) + sizeof(cluster_exchange) + 2 * entries * sizeof(uint64_t) +
           (size_t)cluster_shared_items(items) * TREE_THREADS * sizeof(uint32_t);
}

/* Entries of each of the cluster kernel's two composite buffers: twice the output's where the
 * device's shared memory per block allows (the leader may then gather a whole bin), up to
 * CLUSTER_GATHER_FACTOR times on rows longer than CLUSTER_GATHER_RATIO * k (without taking
 * the bulk load's staging from slices of 32768); else the output's (composite_entries(k), the
 * least the kernel needs). */
static size_t cluster_buffer_entries(const struct gpu_device_info *device,
                                     const struct topk_shape *shape, uint32_t items)
{
    const uint32_t k = shape->k;
    const size_t doubled = 2 * (size_t)composite_entries(k);
    const uint64_t length = shape->max_length > 0 ? (uint64_t)shape->max_length : 0u;
    const size_t staging = items == CLUSTER_BULK_CHUNKS * CLUSTER_BULK_CHUNK_ITEMS
                               ? (size_t)items * TREE_THREADS * sizeof(uint32_t)
                               : 0u;
    if (length > (uint64_t)CLUSTER_GATHER_RATIO * k) {
        for (size_t wide = CLUSTER_GATHER_FACTOR * (size_t)composite_entries(k); wide > doubled;
             wide /= 2)
            if (cluster_smem_total(wide, items) + staging <= device->smem_per_block_optin)
                return wide;
    }
    return cluster_smem_total(doubled, items) <= device->smem_per_block_optin
               ? doubled
               : composite_entries(k);
}

/* CTAs of clusters of `parts` that auto lets run in one wave: one per SM (measured on the
 * H200, docs/PERF.md fifth run: two CTAs of 16 keys per thread sharing an SM took longer than
 * one CTA of 32 keys per thread), and only about half the SMs with clusters of more than 4
 * (clusters of 8 CTAs of one SM each: at most 15 active on the H200's 132 SMs, GPC packing).
 * Where the device's packing was measured (cluster_fit), never more than it runs at once: 30
 * clusters of 4 and 39 of 3 on the H200, so that 32 x 131072 in clusters of 4 would have run
 * two of them in a second wave (docs/PERF.md v0.6.12). */
static uint64_t cluster_wave(const struct gpu_device_info *device, uint64_t parts)
{
    uint64_t ctas = parts <= 4 ? (uint64_t)device->sm_count : (uint64_t)device->sm_count / 2u;
    if (device->cluster_fit[1] > 0) { /* measured: a size the device does not take gets none */
        const uint64_t fit = parts <= GPU_CLUSTER_MAX ? device->cluster_fit[parts] * parts : 0u;
        ctas = fit < ctas ? fit : ctas;
    }
    return ctas;
}

/* Where the cluster path runs (modes auto and cluster*): a device and a build with clusters, k up
 * to TREE_MAX_K, rows of at most 16 slices of 8192, 16384, 32768 or 65536 elements (16, 32, 64
 * or 128 keys per thread, the last half in shared memory: the first that cuts the row into few
 * enough slices); auto takes the smallest slices whose grid fits one wave (cluster_wave), else
 * the fewest slices per row in several waves; mode cluster takes every such shape (tests),
 * cluster16/32/64/128 only that many keys per thread. False elsewhere (the tree path runs). */
static bool cluster_plan_of(const struct gpu_device_info *device, const struct topk_shape *shape,
                            enum split_mode mode, struct cluster_plan *plan)
{
    uint32_t forced = 0; /* cluster16 .. cluster128: 16 << (mode - SPLIT_CLUSTER16) keys */
    if (mode >= SPLIT_CLUSTER16 && mode <= SPLIT_CLUSTER128)
        forced = TREE_ITEMS << (mode - SPLIT_CLUSTER16);
    else if (mode != SPLIT_AUTO && mode != SPLIT_CLUSTER)
        return false;
    if (!cluster_kernel_built() || device->cc_major < 9)
        return false;
    if (shape->rows == 0 || shape->k == 0 || shape->k > TREE_MAX_K || shape->max_length < 0)
        return false;
    const uint64_t length = (uint64_t)shape->max_length;
    static const uint32_t items_choices[] = { TREE_ITEMS, 2 * TREE_ITEMS, 4 * TREE_ITEMS,
                                              8 * TREE_ITEMS };
    for (size_t c = 0; c < sizeof(items_choices) / sizeof(items_choices[0]); c++) {
        const uint32_t items = items_choices[c];
        if (forced && items != forced)
            continue;
        if (cluster_smem_total(composite_entries(shape->k), items) > device->smem_per_block_optin)
            continue;
        const uint64_t slice = (uint64_t)TREE_THREADS * items;
        uint64_t parts = (length + slice - 1) / slice;
        if (parts == 0)
            parts = 1;
        /* 16 keys per thread: clusters of up to CLUSTER_ITEMS16_PARTS. */
        const uint64_t most = items == TREE_ITEMS ? CLUSTER_ITEMS16_PARTS : CLUSTER_MAX_PARTS;
        if (parts > most || (uint64_t)shape->rows * parts > 0x7FFFFFFFu)
            continue;
        /* auto: measured on the H200 (docs/PERF.md, fourth and fifth runs), a cluster beats the
         * tree where the whole grid runs in one wave; the smallest slices that do are the
         * shortest barrier chain (fewer keys per thread per pass). Rows of one slice take it
         * too: 2-4% slower than the tree's single leaf where the k-th largest is off a plateau,
         * 25% faster where it is on one (the level-1 key range ends the refinement where the
         * leaf walks its 64-bit composite through every digit). */
        if (mode == SPLIT_AUTO && (uint64_t)shape->rows * parts > cluster_wave(device, parts))
            continue;
        plan->items = items;
        plan->parts = (uint32_t)parts;
        return true;
    }
    if (mode == SPLIT_AUTO) {
        /* No cut fits one wave: the cut with the fewest slices per row (then the fewest keys
         * per thread), in as many waves as it takes. With every SM busy anyway, each CTA more
         * in a row is one more barrier chain and gather; measured on the H200 (docs/PERF.md
         * v0.6.13) it beat the tree 1.2-3.2x (128 x 131072 k 2048: 2 slices of 65536 41.0 us,
         * 4 of 32768 48.4, the tree 122.4; 1024 x 8192: 1 slice of 8192 44.4, of 32768 87.7,
         * the tree 66.3). */
        bool found = false;
        for (size_t c = 0; c < sizeof(items_choices) / sizeof(items_choices[0]); c++) {
            const uint32_t items = items_choices[c];
            if (cluster_smem_total(composite_entries(shape->k), items) >
                device->smem_per_block_optin)
                continue;
            const uint64_t slice = (uint64_t)TREE_THREADS * items;
            const uint64_t parts = length ? (length + slice - 1) / slice : 1u;
            const uint64_t most = items == TREE_ITEMS ? CLUSTER_ITEMS16_PARTS : CLUSTER_MAX_PARTS;
            if (parts > most || (uint64_t)shape->rows * parts > 0x7FFFFFFFu ||
                cluster_wave(device, parts) == 0 || (found && parts >= plan->parts))
                continue;
            plan->items = items;
            plan->parts = (uint32_t)parts;
            found = true;
        }
        return found;
    }
    return false;
}

/* Launches the cluster kernel; returns 1 (launching nothing) when no cluster of that size fits
 * on the device (the caller runs the tree path), 0 when launched. */
template <uint32_t ITEMS, uint32_t SHARED_ITEMS>
static int cluster_launch_items(const struct topk_problem *problem,
                                const struct gpu_device_info *device, uint32_t parts,
                                cudaStream_t stream, struct audit_error *err)
{
    const uint32_t capacity =
        (uint32_t)cluster_buffer_entries(device, &problem->shape, ITEMS + SHARED_ITEMS);
    size_t smem = 2 * (size_t)capacity * sizeof(uint64_t) +
                  (size_t)SHARED_ITEMS * TREE_THREADS * sizeof(uint32_t);
    /* The bulk load's staging (cluster_bulk_load) where the device's shared memory has room:
     * slices of 64 keys per thread in registers alone. (With 32, the same call measured 0.5%
     * faster to 1% slower: a load that short gains less than the extra pass through shared
     * memory costs; docs/PERF.md v0.6.6.) */
    uint32_t staged = 0;
    const size_t staging = (size_t)ITEMS * TREE_THREADS * sizeof(uint32_t);
    if (SHARED_ITEMS == 0 && ITEMS == CLUSTER_BULK_CHUNKS * CLUSTER_BULK_CHUNK_ITEMS &&
        cluster_smem_total(capacity, ITEMS) + staging <= device->smem_per_block_optin) {
        smem += staging;
        staged = 1;
    }
    CUDA_TRY(cudaFuncSetAttribute(k_cluster_topk<ITEMS, SHARED_ITEMS>,
                                  cudaFuncAttributeMaxDynamicSharedMemorySize, (int)smem),
             err);
    if (parts > CLUSTER_PORTABLE_PARTS)
        CUDA_TRY(cudaFuncSetAttribute(k_cluster_topk<ITEMS, SHARED_ITEMS>,
                                      cudaFuncAttributeNonPortableClusterSizeAllowed, 1),
                 err);
    cudaLaunchAttribute attribute;
    const cudaLaunchConfig_t config =
        cluster_launch_config(problem->shape.rows, parts, TREE_THREADS, smem, stream, &attribute);
    int clusters = 0;
    CUDA_TRY(cudaOccupancyMaxActiveClusters(&clusters, k_cluster_topk<ITEMS, SHARED_ITEMS>,
                                             &config),
             err);
    if (clusters < 1)
        return 1;
    CUDA_TRY(cudaLaunchKernelEx(&config, k_cluster_topk<ITEMS, SHARED_ITEMS>, *problem,
                                capacity, staged),
             err);
    CUDA_TRY(cudaGetLastError(), err);
    return 0;
}

static int cluster_launch(const struct topk_problem *problem, const struct gpu_device_info *device,
                          const struct cluster_plan *plan, cudaStream_t stream,
                          struct audit_error *err)
{
    if (plan->items == TREE_ITEMS)
        return cluster_launch_items<TREE_ITEMS, 0>(problem, device, plan->parts, stream, err);
    if (plan->items == 2 * TREE_ITEMS)
        return cluster_launch_items<2 * TREE_ITEMS, 0>(problem, device, plan->parts, stream, err);
    if (plan->items == 4 * TREE_ITEMS)
        return cluster_launch_items<4 * TREE_ITEMS, 0>(problem, device, plan->parts, stream, err);
    return cluster_launch_items<4 * TREE_ITEMS, 4 * TREE_ITEMS>(problem, device, plan->parts,
                                                               stream, err);
}

static int bitonic_supports(const struct gpu_device_info *device, const struct topk_shape *shape,
                            char *reason, size_t reason_bytes)
{
    if (split_mode_now() == SPLIT_INVALID) {
        snprintf(reason, reason_bytes,
                 "DSATOPK_BITONIC_SPLIT=%s: expected " SPLIT_VALUES, split_env_text());
        return 0;
    }
    if (!topk_built_for(device, reason, reason_bytes))
        return 0;
    if (shape->k > BITONIC_MAX_K) {
        snprintf(reason, reason_bytes,
                 "k = %u exceeds %u: the sort buffer of 8 * next_pow2(k) bytes lives in shared "
                 "memory",
                 shape->k, BITONIC_MAX_K);
        return 0;
    }
    if (shape->max_length < 0) {
        snprintf(reason, reason_bytes, "negative row length %d", (int)shape->max_length);
        return 0;
    }
    if (shape->rows > 0x7FFFFFFFu) {
        snprintf(reason, reason_bytes, "%u rows exceed the grid limit of 2^31 - 1 blocks",
                 shape->rows);
        return 0;
    }
    if (shape->has_page_table &&
        (shape->page_size == 0 || (shape->page_size & (shape->page_size - 1)) != 0)) {
        snprintf(reason, reason_bytes, "page size %u is not a power of two", shape->page_size);
        return 0;
    }
    size_t required = bitonic_fixed_smem(shape->k);
    if (required > device->smem_per_block_optin) {
        snprintf(reason, reason_bytes,
                 "k = %u needs %zu B of shared memory per block, the device allows %zu B%s",
                 shape->k, required, device->smem_per_block_optin,
                 device->smem_emulated ? " (emulated)" : "");
        return 0;
    }
    struct cluster_plan cluster;
    struct tree_plan plan;
    if (cluster_plan_of(device, shape, split_mode_now(), &cluster))
        snprintf(reason, reason_bytes,
                 "one thread-block cluster per row: %u block%s of %u elements (the tree path "
                 "where no such cluster fits)",
                 cluster.parts, cluster.parts == 1 ? "" : "s", cluster.items * TREE_THREADS);
    else if (tree_plan_of(device, shape, split_mode_now(), &plan))
        snprintf(reason, reason_bytes,
                 "rows cut into %u leaves of %u elements merged %u at a time (%u levels), "
                 "%zu B of scratch",
                 plan.nodes[0], plan.leaf_elements, plan.fan_in, plan.levels,
                 tree_layout_of(shape, &plan).total);
    else
        snprintf(reason, reason_bytes,
                 "one block per row: needs %zu B of shared memory per block (%zu B available); "
                 "stages threshold bins of up to %zu candidates",
                 required, device->smem_per_block_optin,
                 (device->smem_per_block_optin - required) / sizeof(uint64_t));
    return 1;
}

static size_t bitonic_scratch_bytes(const struct gpu_device_info *device,
                                    const struct topk_shape *shape)
{
    /* Also where the cluster path will run: the tree path is its fallback when no cluster of
     * that size fits the device, which only the launch finds out. */
    struct tree_plan plan;
    if (!tree_plan_of(device, shape, split_mode_now(), &plan))
        return 0; /* one CTA per row: everything lives in shared memory */
    return tree_layout_of(shape, &plan).total;
}

static int bitonic_launch(const struct topk_problem *problem, const struct gpu_device_info *device,
                          cudaStream_t stream, struct audit_error *err)
{
    const struct topk_shape *shape = &problem->shape;
    char reason[256];
    if (shape->rows == 0 || shape->k == 0)
        return 0; /* nothing to write */
    if (split_mode_now() == SPLIT_INVALID)
        return audit_fail(err, AUDIT_EUSAGE,
                          "bitonic: DSATOPK_BITONIC_SPLIT=%s: expected " SPLIT_VALUES,
                          split_env_text());
    if (!bitonic_supports(device, shape, reason, sizeof(reason)))
        return audit_fail(err, AUDIT_EUNSUPPORTED, "bitonic: %s", reason);
    if (!problem->scores || !problem->lengths || !problem->out ||
        (shape->has_page_table && (!problem->page_table || !problem->raw_out)))
        return audit_fail(err, AUDIT_EUSAGE, "bitonic: missing device pointer in the problem");
    struct cluster_plan cluster;
    if (cluster_plan_of(device, shape, split_mode_now(), &cluster)) {
        const int status = cluster_launch(problem, device, &cluster, stream, err);
        if (status <= 0)
            return status; /* launched, or failed */
    }
    struct tree_plan plan;
    if (tree_plan_of(device, shape, split_mode_now(), &plan))
        return tree_launch(problem, &plan, stream, err);
    const size_t fixed = bitonic_fixed_smem(shape->k);
    /* The rest of the block's shared memory stages threshold bins; no more than the longest
     * row needs, so short rows leave room for more resident blocks. */
    size_t stage_capacity = (device->smem_per_block_optin - fixed) / sizeof(uint64_t);
    size_t longest = (size_t)shape->max_length;
    if (stage_capacity > longest)
        stage_capacity = longest;
    const size_t smem = fixed + stage_capacity * sizeof(uint64_t);
    CUDA_TRY(cudaFuncSetAttribute(k_bitonic_topk, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                  (int)smem),
             err);
    k_bitonic_topk<<<shape->rows, BITONIC_THREADS, smem, stream>>>(
        *problem, composite_entries(shape->k), (uint32_t)stage_capacity);
    CUDA_TRY(cudaGetLastError(), err);
    return 0;
}

extern "C" const struct topk_backend topk_backend_bitonic = {
    "bitonic",
    "deterministic: exact radix threshold, smallest-index ties, canonical bitonic sort",
    TOPK_GPU_TO_GPU,
    true,  /* exact_set */
    true,  /* smallest_index_ties */
    true,  /* canonical_order */
    false, /* index_ascending */
    "k <= 8192; rows up to 2^31 - 1 elements; k <= 4096 on sm_90+: a cluster of up to 16 "
    "blocks per row (slices of 8192 to 65536 elements; the smallest in one wave, else the "
    "fewest per row; no scratch); otherwise k <= 4096: rows cut "
    "into leaves of 8192 elements (one 512-thread block each) merged up a tree (scratch: "
    "(8 k + 8) B per leaf and parent node, 8 KiB per row); k > 4096: one 1024-thread block per "
    "row (8 * next_pow2(k) + 8464 B of shared memory)",
    bitonic_supports,
    bitonic_scratch_bytes,
    bitonic_launch,
};

#ifdef DSATOPK_PHASE_TIMING
extern "C" int bitonic_phase_take(struct phase_table *table, struct audit_error *err)
{
    static const struct phase_table zero = {};
    CUDA_TRY(cudaDeviceSynchronize(), err);
    CUDA_TRY(cudaMemcpyFromSymbol(table, dsatopk_phase_table, sizeof(*table)), err);
    CUDA_TRY(cudaMemcpyToSymbol(dsatopk_phase_table, &zero, sizeof(zero)), err);
    return 0;
}
#endif
