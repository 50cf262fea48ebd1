/* bitonic: our deterministic top-k. Output equals the CPU reference byte for byte (src/reference.h)
 * on every input: level gpu_to_gpu.
 *
 * What it models: the deterministic CuTe-DSL selector of seed 003 (exact threshold by radix
 * refinement, smallest-index tie subset, canonical bitonic sort of unique composites, no candidate
 * ever dropped), written so that nothing depends on arrival order: placements come from counts and
 * prefix sums over index-ordered tiles, never from atomics racing for slots.
 *
 * Strategy, one 1024-thread CTA per row:
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
 * Split path (rows few and long, or DSATOPK_BITONIC_SPLIT=always; see "Split path" below): the
 * same three digits, but each row is cut into chunks histogrammed by separate CTAs into a global
 * per-row histogram; the last CTA of a row to arrive at a per-row counter picks the bin. Then every
 * chunk writes its winners and ties at offsets from per-chunk counts and prefix sums, and the
 * last CTA of the row sorts them. A memset and four kernels; scratch from scratch_bytes().
 *
 * Determinism: gpu_to_gpu. Nothing depends on scheduling; the only atomics are histogram counts,
 * whose sums do not depend on their order, and arrival counters, which only decide which CTA
 * does the row's final step after every other one has finished its part.
 *
 * Limits: k <= 8192 (the composite buffer, 8 * max(64, next_pow2(k)) bytes, lives in shared
 * memory next to 8.3 KiB of control: k = 8192 needs 74000 B); rows up to 2^31 - 1 elements (64-bit
 * addressing of the scores); page sizes powers of two. Launch: no allocation, no host
 * synchronisation (the one-CTA path needs no scratch; the split path's is caller-owned and zeroed
 * by a cudaMemsetAsync in every call): capturable in a CUDA graph. */
#include <atomic>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "topk_backends.h"
#include "topk_common.cuh"

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

/* Block-wide exclusive prefix sum of one value per thread, in thread order, with the block total.
 * One barrier; the warp totals alternate between two buffers so that the next call may start
 * writing while slow threads still read this call's buffer (they read before they reach the next
 * call's barrier). Every thread must call it. */
static __device__ __forceinline__ uint32_t block_exclusive_sum(uint32_t value,
                                                               bitonic_control &control,
                                                               uint32_t &parity, uint32_t &total)
{
    const uint32_t lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    uint32_t inclusive = value;
#pragma unroll
    for (int offset = 1; offset < 32; offset <<= 1) {
        uint32_t other = __shfl_up_sync(0xFFFFFFFFu, inclusive, offset);
        if (lane >= (uint32_t)offset)
            inclusive += other;
    }
    if (lane == 31)
        control.scan[parity][warp] = inclusive;
    __syncthreads();
    uint32_t warp_total = lane < BITONIC_WARPS ? control.scan[parity][lane] : 0;
    uint32_t warps_inclusive = warp_total;
#pragma unroll
    for (int offset = 1; offset < 32; offset <<= 1) {
        uint32_t other = __shfl_up_sync(0xFFFFFFFFu, warps_inclusive, offset);
        if (lane >= (uint32_t)offset)
            warps_inclusive += other;
    }
    uint32_t warp_exclusive = __shfl_sync(0xFFFFFFFFu, warps_inclusive - warp_total, warp);
    total = __shfl_sync(0xFFFFFFFFu, warps_inclusive, 31);
    parity ^= 1;
    return warp_exclusive + inclusive - value;
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
static __device__ void sort_descending(uint64_t *values, uint32_t count)
{
    const uint32_t lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    for (uint32_t chunk = warp * 64; chunk < count; chunk += BITONIC_WARPS * 64) {
        uint64_t low = values[chunk + lane], high = values[chunk + 32 + lane];
        for (uint32_t size = 2; size <= 64; size <<= 1)
            warp_bitonic_steps(low, high, chunk, size, size >> 1);
        values[chunk + lane] = low;
        values[chunk + 32 + lane] = high;
    }
    __syncthreads();
    for (uint32_t size = 128; size <= count; size <<= 1) {
        for (uint32_t stride = size >> 1; stride >= 64; stride >>= 1) {
            for (uint32_t i = threadIdx.x; i < count / 2; i += BITONIC_THREADS) {
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
        for (uint32_t chunk = warp * 64; chunk < count; chunk += BITONIC_WARPS * 64) {
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
        sort_descending(composites, padded);
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

/* ---- Split path: long rows over several CTAs ------------------------------------------------
 *
 * When rows are few and long, one CTA per row leaves most SMs idle and a call lasts as long as
 * one CTA streaming one row. The split path cuts every row into `chunks` chunks of
 * `chunk_elements` consecutive elements (the same for every row; CTAs past a row's length have
 * nothing to read) and runs a flattened grid of rows * chunks CTAs of 1024 threads:
 *
 *   memset   zero the per-row state and histograms (scratch arrives poisoned, and nothing may
 *            depend on a previous call)
 *   round 0  each CTA histograms digit 0 of its chunk in shared memory and adds the non-zero
 *            bins to the row's global histogram (integer atomics: the sum is order independent);
 *            the last CTA of the row to arrive picks the bin holding rank min(k, candidates)
 *   round 1  the same for digit 1 among the candidates matching the prefix
 *   round 2  the same for digit 2; each CTA also stores its chunk's count of candidates above
 *            the 22-bit prefix and the suffix sums of its digit-2 histogram, so that once the
 *            threshold key T is known every chunk's winner and tie counts are two lookups
 *   collect  each CTA sums the counts of the chunks before its own (index order), re-reads its
 *            chunk and writes its winners (key > T) and its ties (key == T) whose row-wide
 *            ordinal is below `need` to the row's candidate buffer at positions from those sums
 *            and block prefix sums over index-ordered tiles; the last CTA of the row sorts the
 *            candidates (the bitonic sort above) and writes the output.
 *
 * "Last CTA of the row": every thread fences its global writes, the CTA synchronises, one thread
 * adds 1 to the row's arrival counter of that kernel; the CTA that reads chunks - 1 is the last,
 * and every other CTA's writes happened before its increment. Nothing waits for another CTA, so
 * no co-residency is needed (no spin barrier, no cooperative launch), and no value depends on
 * which CTA is last: it only reads complete sums. */

#define SPLIT_MIN_CHUNK 4096u   /* one tile: the smallest chunk auto and always make */
#define SPLIT_MAX_CHUNKS 1024u  /* chunks per row (bounds the chunk-count sums of collect) */
#define SPLIT_LAST_BINS 1024u   /* bins of digit 2 */
#define SPLIT_HISTOGRAM_WORDS (2u * BITONIC_BINS + SPLIT_LAST_BINS) /* digits 0, 1, 2 of a row */
#define SPLIT_KERNELS 4u        /* kernels with an arrival counter: three rounds and collect */

static_assert(SPLIT_LAST_BINS == BITONIC_THREADS, "round 2 gives each thread one digit-2 bin");

/* Per-row state in scratch, zeroed by the memset of every call. prefix[level] and
 * remaining[level] are what round `level` works with (level 0: prefix 0, rank min(k, total));
 * the last CTA of round level writes those of level + 1, the last of round 2 threshold and need. */
struct split_row_state {
    uint32_t arrivals[SPLIT_KERNELS];
    uint32_t prefix[3];
    uint32_t remaining[3];
    uint32_t selected;  /* min(k, candidates of the row) */
    uint32_t threshold; /* T: the key of the selected-th ranked candidate */
    uint32_t need;      /* ties (key == T) to take, the smallest indices first */
    uint32_t unused;
};

/* Device views of the scratch of one call (layout in split_layout_of below). */
struct split_scratch {
    split_row_state *states;  /* rows */
    uint32_t *histograms;     /* rows * SPLIT_HISTOGRAM_WORDS */
    uint32_t *chunk_above;    /* rows * chunks: candidates above the 22-bit prefix */
    uint32_t *chunk_suffix;   /* rows * chunks * 1024: digit-2 counts of bins >= d */
    uint64_t *candidates;     /* rows * k composites */
    uint32_t chunks, chunk_elements;
};

static __device__ __forceinline__ uint32_t histogram_offset(int level)
{
    return level == 0 ? 0u : level == 1 ? BITONIC_BINS : 2u * BITONIC_BINS;
}

/* The tiles of chunk `chunk` of row `row`: window indices [first, first + count). A chunk past
 * the row's length is empty (count 0: only the head tile, with nothing valid). The last chunk
 * takes whatever is left, so that a row longer than shape.max_length promised is still read
 * whole (slowly) rather than cut. */
static __device__ __forceinline__ row_tiles chunk_tiles(const struct topk_problem &problem,
                                                        uint32_t row, uint32_t chunk,
                                                        const split_scratch &scratch,
                                                        uint32_t &first)
{
    const int32_t signed_length = problem.lengths[row];
    const uint64_t length = signed_length > 0 ? (uint64_t)signed_length : 0u;
    const uint64_t start = (uint64_t)chunk * scratch.chunk_elements;
    uint64_t count = 0;
    if (start < length) {
        count = length - start;
        if (chunk + 1 < scratch.chunks && count > scratch.chunk_elements)
            count = scratch.chunk_elements;
    }
    first = count ? (uint32_t)start : 0u;
    return make_row_tiles(row_window(problem, row) + first, (uint32_t)count);
}

/* Histogram of digit LEVEL over the chunk's candidates matching `prefix` (BITONIC_ROW_BATCH
 * tiles of loads in flight per thread; order does not matter). Returns this thread's count of
 * candidates above the prefix. */
template <int LEVEL>
static __device__ uint32_t histogram_chunk(const row_tiles &tiles, uint32_t prefix,
                                           uint32_t *histogram)
{
    const uint32_t shift = digit_shift(LEVEL), bins = digit_bins(LEVEL);
    const uint32_t mask = prefix_mask(LEVEL);
    uint32_t above = 0;
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
                    uint32_t masked = key & mask;
                    if (masked == prefix)
                        histogram_add(histogram, (key >> shift) & (bins - 1));
                    else if (masked > prefix)
                        above++;
                }
            }
        }
    }
    return above;
}

/* The arrival of a CTA at the row's counter `counter` once its global writes are done. Every
 * thread must call it; returns true (in every thread) in the CTA that arrived last, which may
 * then read what every other CTA of the row wrote in this kernel (with __ldcg: L2, not a stale
 * L1 line). */
static __device__ __forceinline__ bool arrive_last(uint32_t *counter, uint32_t chunks,
                                                   uint32_t &is_last)
{
    __threadfence(); /* this thread's global writes and atomics before the arrival */
    __syncthreads();
    if (threadIdx.x == 0) {
        __threadfence();
        is_last = atomicAdd(counter, 1u) == chunks - 1 ? 1u : 0u;
        __threadfence();
    }
    __syncthreads();
    const bool last = is_last != 0;
    if (last)
        __threadfence();
    return last;
}

/* Round LEVEL of the refinement over every (row, chunk): blockIdx.x = row * chunks + chunk. */
template <int LEVEL>
static __global__ void __launch_bounds__(BITONIC_THREADS)
k_split_round(const struct topk_problem problem, const split_scratch scratch)
{
    __shared__ bitonic_control control;
    __shared__ uint32_t is_last;
    const uint32_t row = blockIdx.x / scratch.chunks, chunk = blockIdx.x % scratch.chunks;
    const uint32_t bins = digit_bins(LEVEL);
    split_row_state *state = scratch.states + row;
    const uint32_t prefix = state->prefix[LEVEL]; /* 0 at level 0 (memset) */
    uint32_t parity = 0;

    for (uint32_t i = threadIdx.x; i < bins; i += BITONIC_THREADS)
        control.histogram[i] = 0;
    __syncthreads();
    uint32_t first;
    const row_tiles tiles = chunk_tiles(problem, row, chunk, scratch, first);
    const uint32_t above = histogram_chunk<LEVEL>(tiles, prefix, control.histogram);
    __syncthreads();

    const uint64_t chunk_slot = (uint64_t)row * scratch.chunks + chunk;
    if (LEVEL == 2) {
        /* Thread t owns bin 1023 - t: a thread-order exclusive sum is the count of higher bins. */
        const uint32_t bin = SPLIT_LAST_BINS - 1 - threadIdx.x;
        const uint32_t count = control.histogram[bin];
        uint32_t total;
        const uint32_t higher = block_exclusive_sum(count, control, parity, total);
        scratch.chunk_suffix[chunk_slot * SPLIT_LAST_BINS + bin] = higher + count;
        uint32_t above_total;
        block_exclusive_sum(above, control, parity, above_total);
        if (threadIdx.x == 0)
            scratch.chunk_above[chunk_slot] = above_total;
    }
    uint32_t *row_histogram =
        scratch.histograms + (uint64_t)row * SPLIT_HISTOGRAM_WORDS + histogram_offset(LEVEL);
    for (uint32_t i = threadIdx.x; i < bins; i += BITONIC_THREADS) {
        const uint32_t count = control.histogram[i];
        if (count)
            atomicAdd(&row_histogram[i], count);
    }
    if (!arrive_last(&state->arrivals[LEVEL], scratch.chunks, is_last))
        return; /* uniform */

    /* Last CTA of the row: the row's histogram is complete. */
    for (uint32_t i = threadIdx.x; i < bins; i += BITONIC_THREADS)
        control.histogram[i] = __ldcg(&row_histogram[i]);
    __syncthreads();
    uint32_t rank = LEVEL == 0 ? problem.shape.k : state->remaining[LEVEL];
    const uint32_t total = select_bin(control, bins, rank, parity);
    if (LEVEL == 0 && total < rank) {
        /* At most k candidates: select all of them, T is the smallest key. */
        rank = total;
        if (rank > 0)
            select_bin(control, bins, rank, parity);
    }
    /* Later levels: total = the count of the previous level's bin >= its remaining rank.
     * rank 0 only for a row without candidates: nothing is selected, T and need stay 0. */
    if (threadIdx.x == 0) {
        uint32_t digit = 0, above_bins = 0;
        if (rank > 0) {
            digit = control.selected_digit;
            above_bins = control.selected_above;
        }
        const uint32_t next_prefix = prefix | (digit << digit_shift(LEVEL));
        const uint32_t next_remaining = rank - above_bins;
        if (LEVEL == 0)
            state->selected = rank;
        if (LEVEL < 2) {
            state->prefix[LEVEL + 1] = next_prefix;
            state->remaining[LEVEL + 1] = next_remaining;
        } else {
            state->threshold = next_prefix;
            state->need = next_remaining;
        }
    }
}

/* Winners (key > T) and ties (key == T) of chunk slot `slot`, from round 2's counts. */
static __device__ __forceinline__ void chunk_counts(const split_scratch &scratch, uint64_t slot,
                                                    uint32_t digit, uint32_t &winners,
                                                    uint32_t &ties)
{
    const uint32_t *suffix = scratch.chunk_suffix + slot * SPLIT_LAST_BINS;
    const uint32_t at_or_above = suffix[digit];
    const uint32_t strictly_above = digit + 1 < SPLIT_LAST_BINS ? suffix[digit + 1] : 0u;
    winners = scratch.chunk_above[slot] + strictly_above;
    ties = at_or_above - strictly_above;
}

/* Collection over every (row, chunk), then the sort and output by the last CTA of each row.
 * Dynamic shared memory: the composite buffer (composite_entries(k) entries, a power of two
 * >= k, so that the zero padding of the sort fits). */
static __global__ void __launch_bounds__(BITONIC_THREADS)
k_split_collect(const struct topk_problem problem, const split_scratch scratch)
{
    extern __shared__ uint64_t split_composites[];
    __shared__ bitonic_control control;
    __shared__ uint32_t is_last;
    const uint32_t row = blockIdx.x / scratch.chunks, chunk = blockIdx.x % scratch.chunks;
    const uint32_t k = problem.shape.k;
    split_row_state *state = scratch.states + row;
    const uint32_t threshold = state->threshold, need = state->need;
    const uint32_t selected = state->selected;
    const uint32_t winners_total = selected - need;
    const uint32_t digit = threshold & (SPLIT_LAST_BINS - 1);
    const uint64_t row_slot = (uint64_t)row * scratch.chunks;
    uint64_t *row_candidates = scratch.candidates + (uint64_t)row * k;
    uint32_t parity = 0;

    /* Winners and ties of the chunks before this one (index order), and of this one. */
    uint32_t winners_partial = 0, ties_partial = 0;
    for (uint32_t c = threadIdx.x; c < chunk; c += BITONIC_THREADS) {
        uint32_t winners, ties;
        chunk_counts(scratch, row_slot + c, digit, winners, ties);
        winners_partial += winners;
        ties_partial += ties;
    }
    uint32_t winners_before, ties_before;
    block_exclusive_sum(winners_partial, control, parity, winners_before);
    block_exclusive_sum(ties_partial, control, parity, ties_before);
    uint32_t chunk_winners, chunk_ties;
    chunk_counts(scratch, row_slot + chunk, digit, chunk_winners, chunk_ties);

    const bool has_work = chunk_winners > 0 || (chunk_ties > 0 && ties_before < need);
    if (has_work) { /* uniform: every thread read the same counts */
        uint32_t first;
        const row_tiles tiles = chunk_tiles(problem, row, chunk, scratch, first);
        uint32_t winners_seen = 0, ties_seen = 0;
        tile_walker walker(tiles);
        for (; walker.tile < tiles.count; walker.tile++) {
            walker.advance(tiles);
            const uint32_t *bits = walker.current.bits;
            const uint32_t valid = walker.current.valid;
            const uint32_t index = first + walker.current.first;
            uint32_t keys[BITONIC_ITEMS];
            uint32_t winner_flags = 0, tie_flags = 0;
#pragma unroll
            for (uint32_t j = 0; j < BITONIC_ITEMS; j++) {
                keys[j] = order_key_bits(bits[j]);
                if (j < valid && is_candidate_bits(bits[j])) {
                    if (keys[j] > threshold)
                        winner_flags |= 1u << j;
                    else if (keys[j] == threshold)
                        tie_flags |= 1u << j;
                }
            }
            /* Both counts of a tile are at most 4096: one packed scan. */
            uint32_t tile_total;
            const uint32_t packed =
                ((uint32_t)__popc(winner_flags) << 16) | (uint32_t)__popc(tie_flags);
            const uint32_t before = block_exclusive_sum(packed, control, parity, tile_total);
            uint32_t winner_slot = winners_before + winners_seen + (before >> 16);
            uint32_t tie_ordinal = ties_before + ties_seen + (before & 0xFFFFu);
            /* The slot bounds hold by construction (winners fill [0, winners_total), kept ties
             * [winners_total, selected), selected <= k); the checks only keep a broken
             * invariant from writing outside the row's buffer. */
#pragma unroll
            for (uint32_t j = 0; j < BITONIC_ITEMS; j++) {
                if (winner_flags & (1u << j)) {
                    if (winner_slot < winners_total && winner_slot < k)
                        row_candidates[winner_slot] = make_composite(keys[j], index + j);
                    winner_slot++;
                } else if (tie_flags & (1u << j)) {
                    const uint32_t slot = winners_total + tie_ordinal;
                    if (tie_ordinal < need && slot < k)
                        row_candidates[slot] = make_composite(keys[j], index + j);
                    tie_ordinal++;
                }
            }
            winners_seen += tile_total >> 16;
            ties_seen += tile_total & 0xFFFFu;
            if (winners_seen == chunk_winners &&
                (ties_seen == chunk_ties || ties_before + ties_seen >= need))
                break; /* uniform */
        }
    }
    if (!arrive_last(&state->arrivals[3], scratch.chunks, is_last))
        return; /* uniform */

    /* Last CTA of the row: slots [0, selected) are written; sort them as the one-CTA path does.
     * Zero padding ranks below every real composite (index < 2^31 makes the low word >= 2^31). */
    for (uint32_t i = threadIdx.x; i < selected; i += BITONIC_THREADS)
        split_composites[i] =
            __ldcg(reinterpret_cast<const unsigned long long *>(row_candidates) + i);
    if (selected > 1) {
        uint32_t padded = BITONIC_MIN_SORT;
        while (padded < selected)
            padded <<= 1;
        for (uint32_t i = selected + threadIdx.x; i < padded; i += BITONIC_THREADS)
            split_composites[i] = 0;
        __syncthreads();
        sort_descending(split_composites, padded);
    } else {
        __syncthreads();
    }
    for (uint32_t j = threadIdx.x; j < k; j += BITONIC_THREADS) {
        int32_t index = -1;
        if (j < selected)
            index = (int32_t)(0xFFFFFFFFu - (uint32_t)split_composites[j]);
        write_output(problem, row, j, index);
    }
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

/* DSATOPK_BITONIC_SPLIT (a testing knob, docs/BACKENDS.md): auto (default) splits rows of 65536
 * elements or more when they fill at most an eighth of the SMs (where it was measured to win),
 * always splits every shape (one chunk per 4096 elements, so
 * that the GPU suite runs the split path, chunk boundaries included, on every shape), never keeps
 * one CTA per row. Read once per process: scratch_bytes() and launch() must agree. */
enum split_mode { SPLIT_AUTO, SPLIT_ALWAYS, SPLIT_NEVER, SPLIT_INVALID };

static enum split_mode split_mode_now(void)
{
    static std::atomic<int> cached(-1);
    int mode = cached.load(std::memory_order_relaxed);
    if (mode < 0) {
        const char *text = getenv("DSATOPK_BITONIC_SPLIT");
        if (!text || !*text || strcmp(text, "auto") == 0)
            mode = SPLIT_AUTO;
        else if (strcmp(text, "always") == 0)
            mode = SPLIT_ALWAYS;
        else if (strcmp(text, "never") == 0)
            mode = SPLIT_NEVER;
        else
            mode = SPLIT_INVALID;
        cached.store(mode, std::memory_order_relaxed); /* every racing thread stores the same */
    }
    return (enum split_mode)mode;
}

static const char *split_env_text(void)
{
    const char *text = getenv("DSATOPK_BITONIC_SPLIT");
    return text ? text : "";
}

/* How a shape is cut: chunks == 0 means the one-CTA-per-row path. */
struct split_plan {
    uint32_t chunks;
    uint32_t chunk_elements;
};

static struct split_plan split_plan_of(const struct gpu_device_info *device,
                                       const struct topk_shape *shape, enum split_mode mode)
{
    struct split_plan plan = { 0, 0 };
    if (mode != SPLIT_AUTO && mode != SPLIT_ALWAYS)
        return plan;
    if (shape->rows == 0 || shape->k == 0 || shape->k > BITONIC_MAX_K)
        return plan;
    const uint64_t length = shape->max_length > 0 ? (uint64_t)shape->max_length : 0u;
    const uint64_t tiles = (length + SPLIT_MIN_CHUNK - 1) / SPLIT_MIN_CHUNK;
    uint64_t chunks;
    if (mode == SPLIT_ALWAYS) {
        chunks = tiles;
    } else {
        /* Measured on an H200 (docs/PERF.md, 2026-11-29): the split path wins only where few,
         * long rows leave most SMs idle (16 x 131072: 52 us against 77 us; 16 x 65536: even);
         * at 64 rows, or rows of 32768 and fewer, its five serial graph nodes cost more than
         * they save (64 x 131072: 96 against 78 us; 16 x 8192: 29 against 16 us). So auto
         * splits only rows of at least 65536 elements when the rows fill at most an eighth of
         * the SMs. At most two CTAs per SM in all: the round kernels (32 registers, 8.5 KiB of
         * shared memory) fit two per SM, so the grid is one wave. */
        const uint64_t sms = device->sm_count > 0 ? (uint64_t)device->sm_count : 1u;
        if (length < 65536u || (uint64_t)shape->rows * 8u > sms)
            return plan;
        const uint64_t target = 2u * sms;
        chunks = target / shape->rows;
        if (chunks > tiles)
            chunks = tiles;
        if (chunks < 2)
            return plan;
    }
    if (chunks < 1)
        chunks = 1;
    if (chunks > SPLIT_MAX_CHUNKS)
        chunks = SPLIT_MAX_CHUNKS;
    /* Chunks of whole tiles (a multiple of 4 keeps every chunk's 16-byte alignment the row's). */
    uint64_t elements = (length + chunks - 1) / chunks;
    elements = (elements + SPLIT_MIN_CHUNK - 1) / SPLIT_MIN_CHUNK * SPLIT_MIN_CHUNK;
    if (elements == 0)
        elements = SPLIT_MIN_CHUNK;
    chunks = length ? (length + elements - 1) / elements : 1u;
    if (mode == SPLIT_AUTO && chunks < 2)
        return plan;
    if ((uint64_t)shape->rows * chunks > 0x7FFFFFFFu)
        return plan; /* the flattened grid would exceed 2^31 - 1 blocks */
    plan.chunks = (uint32_t)chunks;
    plan.chunk_elements = (uint32_t)elements;
    return plan;
}

/* Byte offsets in the scratch of the split path. The state and the histograms come first: they
 * are the only part that must start at zero (one cudaMemsetAsync per call); the rest is written
 * before it is read within the call. */
struct split_layout {
    size_t states, histograms, zeroed_bytes, chunk_above, chunk_suffix, candidates, total;
};

static size_t align_up(size_t value, size_t alignment)
{
    return (value + alignment - 1) / alignment * alignment;
}

static struct split_layout split_layout_of(const struct topk_shape *shape,
                                           const struct split_plan *plan)
{
    struct split_layout layout;
    const size_t rows = shape->rows, chunk_slots = rows * plan->chunks;
    layout.states = 0;
    layout.histograms = align_up(rows * sizeof(struct split_row_state), 256);
    layout.zeroed_bytes = layout.histograms + rows * SPLIT_HISTOGRAM_WORDS * sizeof(uint32_t);
    layout.chunk_above = align_up(layout.zeroed_bytes, 256);
    layout.chunk_suffix = align_up(layout.chunk_above + chunk_slots * sizeof(uint32_t), 256);
    layout.candidates =
        align_up(layout.chunk_suffix + chunk_slots * SPLIT_LAST_BINS * sizeof(uint32_t), 256);
    layout.total = layout.candidates + rows * shape->k * sizeof(uint64_t);
    return layout;
}

static int bitonic_supports(const struct gpu_device_info *device, const struct topk_shape *shape,
                            char *reason, size_t reason_bytes)
{
    if (split_mode_now() == SPLIT_INVALID) {
        snprintf(reason, reason_bytes,
                 "DSATOPK_BITONIC_SPLIT=%s: expected auto, always or never", split_env_text());
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
    const struct split_plan plan = split_plan_of(device, shape, split_mode_now());
    if (plan.chunks)
        snprintf(reason, reason_bytes,
                 "needs %zu B of shared memory per block (%zu B available); rows split into %u "
                 "chunks of %u elements, %zu B of scratch",
                 required, device->smem_per_block_optin, plan.chunks, plan.chunk_elements,
                 split_layout_of(shape, &plan).total);
    else
        snprintf(reason, reason_bytes,
                 "needs %zu B of shared memory per block (%zu B available); stages threshold "
                 "bins of up to %zu candidates",
                 required, device->smem_per_block_optin,
                 (device->smem_per_block_optin - required) / sizeof(uint64_t));
    return 1;
}

static size_t bitonic_scratch_bytes(const struct gpu_device_info *device,
                                    const struct topk_shape *shape)
{
    const struct split_plan plan = split_plan_of(device, shape, split_mode_now());
    if (!plan.chunks)
        return 0; /* one CTA per row: everything lives in shared memory */
    return split_layout_of(shape, &plan).total;
}

/* The split path: a memset and four kernels on the stream, nothing else (capturable). */
static int split_launch(const struct topk_problem *problem, const struct split_plan *plan,
                        cudaStream_t stream, struct audit_error *err)
{
    const struct topk_shape *shape = &problem->shape;
    const struct split_layout layout = split_layout_of(shape, plan);
    if (!problem->scratch || problem->scratch_bytes < layout.total)
        return audit_fail(err, AUDIT_EUSAGE,
                          "bitonic: scratch of %zu B given, this shape needs %zu B "
                          "(rows split into %u chunks; ask scratch_bytes())",
                          problem->scratch ? problem->scratch_bytes : (size_t)0, layout.total,
                          plan->chunks);
    char *base = static_cast<char *>(problem->scratch);
    split_scratch scratch;
    scratch.states = reinterpret_cast<split_row_state *>(base + layout.states);
    scratch.histograms = reinterpret_cast<uint32_t *>(base + layout.histograms);
    scratch.chunk_above = reinterpret_cast<uint32_t *>(base + layout.chunk_above);
    scratch.chunk_suffix = reinterpret_cast<uint32_t *>(base + layout.chunk_suffix);
    scratch.candidates = reinterpret_cast<uint64_t *>(base + layout.candidates);
    scratch.chunks = plan->chunks;
    scratch.chunk_elements = plan->chunk_elements;
    const unsigned int blocks = (unsigned int)(shape->rows * plan->chunks); /* < 2^31 (plan) */
    const size_t smem = (size_t)composite_entries(shape->k) * sizeof(uint64_t);

    CUDA_TRY(cudaMemsetAsync(base, 0, layout.zeroed_bytes, stream), err);
    k_split_round<0><<<blocks, BITONIC_THREADS, 0, stream>>>(*problem, scratch);
    CUDA_TRY(cudaGetLastError(), err);
    k_split_round<1><<<blocks, BITONIC_THREADS, 0, stream>>>(*problem, scratch);
    CUDA_TRY(cudaGetLastError(), err);
    k_split_round<2><<<blocks, BITONIC_THREADS, 0, stream>>>(*problem, scratch);
    CUDA_TRY(cudaGetLastError(), err);
    CUDA_TRY(cudaFuncSetAttribute(k_split_collect, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                  (int)smem),
             err);
    k_split_collect<<<blocks, BITONIC_THREADS, smem, stream>>>(*problem, scratch);
    CUDA_TRY(cudaGetLastError(), err);
    return 0;
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
                          "bitonic: DSATOPK_BITONIC_SPLIT=%s: expected auto, always or never",
                          split_env_text());
    if (!bitonic_supports(device, shape, reason, sizeof(reason)))
        return audit_fail(err, AUDIT_EUNSUPPORTED, "bitonic: %s", reason);
    if (!problem->scores || !problem->lengths || !problem->out ||
        (shape->has_page_table && (!problem->page_table || !problem->raw_out)))
        return audit_fail(err, AUDIT_EUSAGE, "bitonic: missing device pointer in the problem");
    const struct split_plan plan = split_plan_of(device, shape, split_mode_now());
    if (plan.chunks)
        return split_launch(problem, &plan, stream, err);
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
    "k <= 8192 (8 * max(64, next_pow2(k)) + 8464 B of shared memory per block); rows up to "
    "2^31 - 1 elements; one 1024-thread block per row, or rows split over several blocks when "
    "rows are few and long (scratch: 20536 B per row + 4 KiB per chunk + 8 B per output slot)",
    bitonic_supports,
    bitonic_scratch_bytes,
    bitonic_launch,
};
