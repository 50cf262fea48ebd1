/* bitonic's output stage: a row's final selection written in canonical order (key descending,
 * index ascending), by the tree path's root and by the cluster path's leader.
 *
 * Strategy: a composite's rank is the count of selected composites in higher buckets plus the
 * count of larger ones in its own bucket, a scan of that bucket. Buckets are 2048 equal slices
 * of the selection's range, so on random and ReLU rows they stay small and this costs a few
 * thousand instructions per warp where a bitonic sort of 2048 composites costs tens of
 * thousands. One bucket too large for scans (a run of tied keys: ReLU plateaus) is bucketed
 * again over its own range, which spreads its members by index; two of them, or one that stays
 * large, fall back to the bitonic sort (block/bitonic_sort.cuh).
 *
 * The cluster leader counts its selection's buckets itself (cluster.cuh) and, where the
 * placement's buffer has room above the placed entries, keeps each entry's bucket and its slot
 * among the bucket's entries (the count's atomic returns it) as a tag, which the placement
 * reads instead of computing bucket_of() again and taking a slot by a second atomic. (The
 * ranking stays in the placed order: walked in the gathered order, a warp's scans spread over
 * 32 buckets and ran 1.08x slower.)
 *
 * Limits: a selection of at most the caller's buffer (composite_entries of it). The loops over
 * entries stay rolled (`#pragma unroll 1`): the stage runs once per CTA, so its code is fetched
 * cold, and instruction fetch is its largest stall.
 * Determinism: every rank is a function of the values alone, so the scatters' atomic cursors
 * do not matter: gpu_to_gpu. */
#ifndef DSATOPK_BITONIC_OUTPUT_CUH
#define DSATOPK_BITONIC_OUTPUT_CUH

#include "bitonic/common.cuh"

/* Bucket of a composite: 2048 equal slices of the range [low, high]. The range's top 21 bits
 * (after `shift`) are scaled by 2048 / (range + 1) in float: a positive scale makes the map
 * monotonic, and it spreads the entries over all 2048 buckets where a power-of-two slice width
 * would leave up to half of them empty (the ranks' bucket scans are the stage's largest part). */
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

/* A selection entry's tag: its bucket and its slot among that bucket's entries. */
#define OUTPUT_TAG_BUCKET_BITS 11u
static_assert(BITONIC_BINS == 1u << OUTPUT_TAG_BUCKET_BITS, "a tag's bucket field holds a bin");

static __device__ __forceinline__ uint32_t output_tag(uint32_t bucket, uint32_t slot)
{
    return slot << OUTPUT_TAG_BUCKET_BITS | bucket;
}

/* The selection's bucket sizes, counted by the caller into the histogram by `map`, and the
 * entries' tags (output_tag, one per selection entry in its order) or NULL. */
struct output_counts {
    bucket_map map;
    const uint32_t *tags;
};

/* Where a caller that counts the `selected` entries may keep their tags: the top of the
 * placement's buffer `bucketed` of `entries` 8-byte entries, above the room of the placed
 * entries (at most `selected`: 3 * selected <= 2 * entries); else NULL. */
static __device__ __forceinline__ uint32_t *output_tags(uint64_t *bucketed, uint32_t entries,
                                                        uint32_t selected)
{
    return 3ull * selected <= 2ull * entries
               ? reinterpret_cast<uint32_t *>(bucketed + entries) - selected
               : NULL;
}

/* The second half of the bucketing, once sizes[b] holds how many of the `count` composites of
 * `source` fall in bucket b (by `map`): starts in descending bucket order, then the composites of
 * the buckets that start below `limit` (those whose entries can rank below it) into `dest`,
 * bucket b at dest[starts[b]], sizes[b] entries: `kept` entries, dest[0 .. kept); the rest are
 * counted but not moved. With `tags` (output_counts) each entry goes to its tag's slot and sizes
 * keep their counts; without, the slots are taken by atomics on sizes, reset to zero first, so
 * that sizes[b] ends as the count of bucket b's entries moved. shared.overflow_count and
 * overflow_bucket must be zero on entry (and published by a barrier); afterwards overflow_count
 * holds how many of the filled buckets exceed TREE_BUCKET_LIMIT and overflow_bucket one of them.
 * Returns `kept`, the same in every thread; every thread must call it. */
static __device__ uint32_t tree_bucket_place(const uint64_t *source, uint32_t count, uint32_t limit,
                                             const uint32_t *tags, uint64_t *dest,
                                             uint32_t *starts, uint32_t *sizes,
                                             const bucket_map &map, tree_shared &shared,
                                             uint32_t &parity)
{
    /* Starts in descending bucket order; without tags sizes become the scatter cursors. */
    const uint32_t per = BITONIC_BINS / TREE_THREADS, top = BITONIC_BINS - 1 - threadIdx.x * per;
    uint32_t counts[4], sum = 0;
#pragma unroll
    for (uint32_t j = 0; j < 4; j++) {
        counts[j] = j < per ? sizes[top - j] : 0;
        sum += counts[j];
    }
    uint32_t total;
    uint32_t start = block_exclusive_sum_of<TREE_WARPS>(sum, shared.scan, parity, total);
    /* The bucket that holds position limit - 1 ends the filled ones (the cluster path's
     * whole-bin gather holds up to twice the output: on random rows the densest buckets, just
     * above the k-th largest, are the ones skipped): one thread's, where the selection reaches
     * limit. The large buckets among the filled ones are counted, the highest kept. Selects,
     * then one store or atomic a thread at most: branches per bucket cost each its
     * reconvergence and the shared window's base rebuilt. */
    uint32_t end = 0, large = 0, large_bucket = 0;
#pragma unroll
    for (uint32_t j = 0; j < 4; j++) {
        if (j < per) {
            starts[top - j] = start;
            if (!tags)
                sizes[top - j] = 0;
            const bool filled = start < limit;
            end = filled && start + counts[j] >= limit && counts[j] ? start + counts[j] : end;
            const bool oversized = filled && counts[j] > TREE_BUCKET_LIMIT;
            large_bucket = oversized && large == 0 ? top - j : large_bucket; /* the highest */
            large += oversized ? 1u : 0u;
        }
        start += counts[j];
    }
    if (end)
        shared.kept_end = end;
    if (large) {
        /* Atomic: with two or more large buckets several threads get here (the caller then
         * sorts instead and ignores the bucket, but a plain store would race). */
        atomicAdd(&shared.overflow_count, large);
        atomicMax(&shared.overflow_bucket, large_bucket);
    }
    __syncthreads();
    PHASE_MARK(9);
    const uint32_t kept = total < limit ? total : shared.kept_end; /* uniform */
    /* OUTPUT_BATCH entries per thread at a time, each step over all of them: its loads and
     * atomics in flight together (the leader runs 16 warps). */
    if (tags) {
#pragma unroll 1
        for (uint32_t e = threadIdx.x; e < count; e += OUTPUT_BATCH * TREE_THREADS) {
            uint64_t c[OUTPUT_BATCH];
            uint32_t tag[OUTPUT_BATCH], first[OUTPUT_BATCH];
#pragma unroll
            for (uint32_t b = 0; b < OUTPUT_BATCH; b++) {
                const bool valid = e + b * TREE_THREADS < count;
                c[b] = valid ? source[e + b * TREE_THREADS] : 0;
                tag[b] = valid ? tags[e + b * TREE_THREADS] : 0u;
            }
#pragma unroll
            for (uint32_t b = 0; b < OUTPUT_BATCH; b++)
                first[b] = starts[tag[b] & (BITONIC_BINS - 1)];
#pragma unroll
            for (uint32_t b = 0; b < OUTPUT_BATCH; b++)
                if (e + b * TREE_THREADS < count && first[b] < limit)
                    dest[first[b] + (tag[b] >> OUTPUT_TAG_BUCKET_BITS)] = c[b];
        }
        __syncthreads();
        return kept;
    }
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
    kept = tree_bucket_place(source, count, limit, NULL, dest, starts, sizes, map, shared, parity);
}

/* Output positions 0 .. limit - 1 of `row` from the indices by rank in `ranked` (-1 from
 * `selected` on). Without a translation (no page table, no raw output) and with both the row's
 * output and `ranked` 16-byte aligned (k a multiple of 4), four positions a thread at a time:
 * one 16-byte load and store where write_output() is a 64-bit address and two tests a
 * position. */
static __device__ __forceinline__ void tree_write_ranked(const struct topk_problem &problem,
                                                         uint32_t row, const uint32_t *ranked,
                                                         uint32_t selected, uint32_t limit)
{
    int32_t *const out = problem.out + (uint64_t)row * problem.shape.k;
    uint32_t j = threadIdx.x;
    if (!problem.page_table && !problem.raw_out &&
        (((uintptr_t)out | (uintptr_t)ranked) & 15u) == 0) {
        const uint32_t quads = limit / 4;
#pragma unroll 1
        for (uint32_t q = threadIdx.x; q < quads; q += TREE_THREADS) {
            uint4 v = reinterpret_cast<const uint4 *>(ranked)[q];
            if (4 * q + 4 > selected) {
                v.x = 4 * q < selected ? v.x : 0xFFFFFFFFu;
                v.y = 4 * q + 1 < selected ? v.y : 0xFFFFFFFFu;
                v.z = 4 * q + 2 < selected ? v.z : 0xFFFFFFFFu;
                v.w = 4 * q + 3 < selected ? v.w : 0xFFFFFFFFu;
            }
            reinterpret_cast<uint4 *>(out)[q] = v;
        }
        j += 4 * quads;
    }
#pragma unroll 1
    for (; j < limit; j += TREE_THREADS)
        write_output(problem, row, j, j < selected ? (int32_t)ranked[j] : -1);
}

/* The root's output without a full sort: a composite's rank is the count of selected composites
 * in higher buckets (tree_bucket's starts) plus the count of larger ones in its own bucket (a scan
 * of that bucket). One bucket too large for scans (a run of tied keys at the boundary: ReLU
 * plateaus) is bucketed again over its own range, which then spreads its members by index.
 * Every rank is a function of the values alone, so the scatters' atomic cursors do not matter.
 * Writes output positions below `limit` (ranks from `limit` on are dropped, -1 fills the
 * positions from `selected` to `limit`). Returns NULL when it wrote the output, else the buffer
 * (`bucketed`, holding the `kept` entries that can rank below `limit`, a superset of the top
 * `limit`) that the caller must sort instead: two or more large buckets, or a large one that
 * stays large. Every thread must call it; shared.sub_sizes must be zero on entry, and so must
 * the histogram unless `counted` is given: then the histogram holds the selection's bucket sizes
 * by its map (the cluster path's leader counted them), with its tags where they are not NULL,
 * and shared.overflow_* are zero.
 * `selection` is overwritten. */
static __device__ uint64_t *tree_output_by_buckets(const struct topk_problem &problem, uint32_t row,
                                                   uint64_t *selection, uint32_t selected,
                                                   uint32_t limit, uint64_t *bucketed,
                                                   const output_counts *counted,
                                                   tree_shared &shared, uint32_t &parity,
                                                   uint32_t &kept)
{
    bucket_map map, sub_map = {};
    if (counted) {
        map = counted->map;
        kept = tree_bucket_place(selection, selected, limit, counted->tags, bucketed,
                                 shared.bucket_start, shared.histogram, map, shared, parity);
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
        tree_write_ranked(problem, row, ranked, selected, limit);
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
                                         uint64_t *bucketed, const output_counts *counted,
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

#endif
