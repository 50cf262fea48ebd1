/* bitonic's one-CTA path: one 1024-thread CTA per row (k above 4096, or forced: one_cta).
 *
 * Strategy:
 *  1. Radix refinement on the 32-bit order key in three digits (11 + 11 + 10 bits, MSB first).
 *     Each level histograms the digit of the candidates (window minus exact -inf) that match the
 *     prefix found so far, then picks the bin holding the remaining rank by a suffix count. It
 *     stops early when a bin is taken whole (or the row has at most k candidates).
 *  2. Staging without overflow: the histogram tells exactly how many candidates match the prefix
 *     before anything is staged, so the prefix's composites are copied to shared memory only
 *     when they all fit (in index order); later levels and the final collection then read shared
 *     memory instead of the row. Rows that fit are read once; the rest once per level until
 *     their threshold bin fits (at most four times: three levels and the collection). Nothing is
 *     ever dropped: when a bin does not fit, the next level re-reads the row.
 *  3. Collection: winners (above the threshold prefix) and the first `need` ties in index order
 *     (ranked by block prefix sums over tiles walked in index order) go to the composite buffer,
 *     which a descending bitonic sort (padded with zeros to a power of two >= 64) puts in the
 *     canonical order.
 *  4. Output through write_output (-1 padding, page-table translation, raw_out).
 * Loads are 16 bytes wide once the window is aligned (a scalar head of up to 3 elements first).
 * Every thread reaches every barrier: tile loops have block-uniform trip counts, and their early
 * exits test totals that every thread computed identically.
 *
 * Limits: k <= 8192 (the composite buffer, 8 * max(64, next_pow2(k)) bytes, lives in shared
 * memory next to 8.3 KiB of control); the stage takes the rest of the opt-in shared memory.
 * Determinism: gpu_to_gpu (placements come from counts and prefix sums, never from atomics
 * racing for slots). */
#ifndef DSATOPK_BITONIC_ONE_CTA_CUH
#define DSATOPK_BITONIC_ONE_CTA_CUH

#include "bitonic/common.cuh"

#define BITONIC_THREADS 1024
#define BITONIC_WARPS (BITONIC_THREADS / 32)
#define BITONIC_ITEMS 4 /* consecutive elements per thread per tile: one 16-byte load */
#define BITONIC_TILE (BITONIC_THREADS * BITONIC_ITEMS)
#define BITONIC_ROW_BATCH 4 /* tiles in flight per thread in the histogram-only passes */
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

/* Adds one to histogram[bin] unless bin is BITONIC_NO_BIN. Plain shared atomics: merging equal
 * bins first (__match_any_sync, ballots) is slower on every input family, plateaus included. */
static __device__ __forceinline__ void histogram_add(uint32_t *histogram, uint32_t bin)
{
    if (bin != BITONIC_NO_BIN)
        atomicAdd(&histogram[bin], 1u);
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
 * at its rank among them, (b) copies every candidate matching the prefix to the stage in
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

/* Final collection from the row: winners at their rank, the first `need` ties (in index order)
 * at winners_total + rank. Returns the number of ties seen (>= need unless the row ran
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

#endif
