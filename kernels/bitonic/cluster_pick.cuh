/* The cluster path's pick of a level's bin across the cluster (bitonic/cluster.cuh says what the
 * path does), and the cluster-wide barrier and sums it uses.
 *
 * Large clusters pick in two remote round trips of one warp instead of every thread reading
 * every CTA's whole histogram: each CTA sums its histogram into super-bins of
 * CLUSTER_SUPER_WIDTH bins before the level's cluster barrier (cluster_summarize); after it,
 * warp 0 reads the super-bins of every CTA, finds the one holding the row's remaining-th largest
 * by a warp scan, then reads that super-bin's bins from every CTA (cluster_level_pick). Reading
 * every CTA's whole histogram moves parts x 8 KiB into each SM (distributed shared memory runs
 * at about 14 B per cycle), and a reduce-scatter that moves less costs one more cluster barrier.
 * Small clusters (CLUSTER_DIRECT_PARTS) read the whole histograms: one round trip of 8 or 16 KiB.
 * Determinism: counts and scans in CTA-rank and thread order only. */
#ifndef DSATOPK_BITONIC_CLUSTER_PICK_CUH
#define DSATOPK_BITONIC_CLUSTER_PICK_CUH

#include "bitonic/cluster_load.cuh"

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
template <typename Cluster>
static __device__ __forceinline__ void cluster_row_bins(const Cluster &cluster,
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
 * bin (the super-bins' two round trips and their summary cost more than reading 8 or 16 KiB).
 * Every thread must call it. */
template <typename Cluster>
static __device__ uint32_t cluster_level_pick(const Cluster &cluster,
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
 * other CTA reads what it wrote. Every thread must call it. */
template <typename Cluster>
static __device__ __forceinline__ void cluster_barrier(const Cluster &cluster,
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

#endif
