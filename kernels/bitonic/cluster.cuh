/* bitonic's cluster path: one thread-block cluster per row (k <= 4096 on sm_90 and newer, rows
 * of at most 16 slices; the plan picks the slices: bitonic/plan.cuh).
 *
 * Where the hardware has thread-block clusters (sm_90 and newer), a row of up to 16 slices is
 * one cluster of `parts` CTAs (512 threads, a slice of 8192, 16384 or 32768 elements each,
 * 16, 32 or 64 keys per thread, or 65536 with 128, half of them in shared memory; chosen by
 * cluster_plan_of), launched together by the hardware
 * and able to read each other's shared memory. One kernel, no scratch, no memset, and the row is
 * read from memory once (rows of one slice: the kernel's one-CTA instance where it is built,
 * cluster_of_one and CLUSTER_ONE_KERNELS, launched without clusters):
 *
 *   level 0  every CTA histograms the top 11 bits of its slice's 32-bit order keys (registers)
 *            and sums it into 64 super-bins; after the cluster barrier one warp of each CTA
 *            reads every CTA's super-bins through distributed shared memory, finds the super-bin
 *            of the row's k-th largest by a warp scan, then reads its 32 bins from every CTA:
 *            the bin of the row's k-th largest, identically in every CTA; when that bin
 *            and everything above it fit the leader's buffer (both buffers for slices of
 *            65536, whose keys in shared memory then hold the output stage's), all of it is
 *            gathered and the output's ranking cuts it at k (no levels 1 and 2);
 *   level 1  the same over the next 11 bits of the candidates in that bin, with the minimum and
 *            maximum of their keys: when they are equal (a plateau, e.g. the 0.0 of ReLU rows)
 *            the bin is one key and the refinement stops there (a one-CTA row of up to
 *            CLUSTER_PLATEAU_ITEMS keys a thread whose level-0 bin is +0.0 alone skips level 1:
 *            cluster_bin_is_one_key);
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
 * Limits: k <= 4096; rows of at most 16 slices of 65536; no scratch, no memset. Shared memory:
 * the static blocks, the leader's two buffers (cluster_buffer_entries), and 128 KiB of keys for
 * slices of 65536 or of bulk-load staging for slices of 32768 where the device has room.
 * Determinism: gpu_to_gpu. Nothing depends on arrival order: counts, prefix sums and the order
 * of unique composites. The cluster barrier is the hardware's (the cluster's CTAs are
 * co-scheduled by construction, so it is not a spin barrier over CTAs that may not be
 * co-resident), and the launch is an ordinary kernel node in a graph. Where the device or the
 * build has no clusters, or no cluster of that size fits, the tree path runs instead. */
#ifndef DSATOPK_BITONIC_CLUSTER_CUH
#define DSATOPK_BITONIC_CLUSTER_CUH

#include "bitonic/cluster_load.cuh"
#include "bitonic/cluster_pick.cuh"
#include "bitonic/output.cuh"
#include "ptx/cluster.cuh"

/* Zeroes the CTA's histograms and output counters and initialises the exchange: published by
 * the barrier before the level-0 counting. */
static __device__ __forceinline__ void cluster_init(uint32_t parts, tree_shared &shared,
                                                    cluster_exchange &exchange)
{
    /* One 16-byte store a thread and array: as a loop from threadIdx.x, whose trip count ptxas
     * cannot know, it was about 60 instructions a thread, 5% of a row of 8192's. */
    static_assert(BITONIC_BINS == 4 * TREE_THREADS, "four bins a thread");
    const uint4 zero = make_uint4(0u, 0u, 0u, 0u);
    reinterpret_cast<uint4 *>(shared.histogram)[threadIdx.x] = zero;
    reinterpret_cast<uint4 *>(shared.sub_sizes)[threadIdx.x] = zero;
    reinterpret_cast<uint4 *>(shared.bucket_start)[threadIdx.x] = zero;
    reinterpret_cast<uint4 *>(shared.sub_start)[threadIdx.x] = zero;
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
        exchange.gathered_low = 0xFFFFFFFFu;
        shared.overflow_count = 0; /* the output stage's (tree_bucket_place) */
        shared.overflow_bucket = 0;
    }
}

/* Level 0's counting: the slice's keys into `keys` (and shared memory) and the top 11 bits of
 * each into the histogram zeroed by cluster_init (the barrier here publishes it). Slices in
 * registers alone: the barrier first, then each key counted as its load arrives (a barrier
 * after the loads would wait for all of them). Slices with a shared-memory part: the register
 * loads, the barrier, then the shared chunks counted as they load, and the register keys. */
template <uint32_t ITEMS, uint32_t SHARED_ITEMS>
static __device__ __forceinline__ void cluster_level0_count(const struct topk_problem &problem,
                                                            uint32_t row, uint32_t first,
                                                            bool bulk, uint32_t (&keys)[ITEMS],
                                                            uint32_t *shared_keys,
                                                            uint32_t *histogram,
                                                            cluster_exchange &exchange)
{
    if constexpr (SHARED_ITEMS > 0) {
        cluster_load_slice<ITEMS>(problem, row, first, keys);
        __syncthreads();
        cluster_load_shared<ITEMS, SHARED_ITEMS>(problem, row, first, shared_keys, histogram,
                                                 &exchange.trash);
        PHASE_MARK(0);
        cluster_level0_registers<ITEMS>(keys, histogram, &exchange.trash);
    } else {
        __syncthreads(); /* also publishes the bulk load's mbarriers */
        if (bulk) {
            PHASE_MARK(0);
            cluster_bulk_keys<ITEMS>(shared_keys, exchange.bulk, keys, histogram,
                                     &exchange.trash);
        } else {
            cluster_load_slice<ITEMS>(problem, row, first, keys);
            PHASE_MARK(0);
            cluster_level0_registers<ITEMS>(keys, histogram, &exchange.trash);
        }
    }
}

/* After level 0's pick (`total` candidates in the row): the k-th's bin, or the whole row. When
 * the bin and everything above it fit the leader's buffer (`capacity`), they are all gathered:
 * the composites are unique, so ranking them and keeping ranks below k is the exact top k with
 * ties by index, without the cluster barriers of levels 1 and 2 and of the tie scans (on random
 * rows a level-0 bin holds a few hundred to a few thousand). */
static __device__ __forceinline__ void cluster_after_level0(uint32_t total, uint32_t k,
                                                            uint32_t capacity,
                                                            const tree_shared &shared,
                                                            uint32_t &mask, uint32_t &prefix,
                                                            uint32_t &remaining, bool &whole,
                                                            uint32_t &gathered)
{
    if (total > k) {
        remaining = k - shared.selected_above;
        prefix = shared.selected_digit << 21;
        mask = 0xFFE00000u;
        whole = shared.selected_count == remaining;
        const uint32_t kept = shared.selected_above + shared.selected_count;
        if (!whole && kept <= capacity) {
            whole = true;
            gathered = kept;
        }
    }
}

/* Whether the CTA's keys in the level-0 bin `prefix` (under `mask`) are all the key `prefix`
 * itself; a CTA barrier. On a ReLU row whose k-th largest is 0.0, the bin of +0.0 holds only
 * +0.0 (a positive subnormal in the bin makes it false; -0.0 is in the bin below). Every thread
 * must call it. */
template <uint32_t TOTAL, typename Key>
static __device__ __forceinline__ bool cluster_bin_is_one_key(Key key, uint32_t mask,
                                                              uint32_t prefix)
{
    bool other = false;
#pragma unroll
    for (uint32_t i = 0; i < TOTAL; i++) {
        const uint32_t k_i = key(i);
        other |= (k_i & mask) == prefix && k_i != prefix;
    }
    return !__syncthreads_or(other);
}

/* The selection flags of a whole gather: every candidate matching the prefix or above. prefix
 * has no bits outside mask, so (key & mask) >= prefix is key >= prefix; above CLUSTER_NO_KEY
 * (any k-th largest above -inf) that alone excludes the non-candidates: one compare per key
 * instead of two (uniform branch). */
template <uint32_t TOTAL, typename Key>
static __device__ __forceinline__ void cluster_flag_whole(Key key, uint32_t prefix,
                                                          cluster_flags<TOTAL> &flags)
{
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
}

/* The ties of a refined threshold (the key `prefix`, its level's bin `tie_bin` in `histogram`):
 * flags the keys above the tie key, writes the CTA's quota of ties (the first `remaining` of
 * the row in index order) to the output itself, and sets `gathered` to the count of keys above
 * the tie key, which is what the leader receives. A CTA's quota is what the CTAs before it
 * (lower indices) leave, from their histogram counts of the tie key. The state comes by
 * reference as the kernel holds it: the kernel's code is the same as with this step written
 * inline. Every thread must call it. */
template <uint32_t TOTAL, typename Key, typename Cluster>
static __device__ __forceinline__ void cluster_write_ties(
    const struct topk_problem &problem, const Cluster &cluster, uint32_t row,
    uint32_t part, uint32_t first, uint32_t k, Key key, const uint32_t &tie_bin,
    const uint32_t &prefix, const uint32_t &remaining, uint32_t *&histogram, uint64_t *second,
    tree_shared &shared, cluster_exchange &exchange, uint32_t &parity,
    cluster_flags<TOTAL> &flags, uint32_t &gathered)
{
    const uint32_t mine = histogram[tie_bin];
    cluster_sum_before(part, &exchange.ties_before, [&](uint32_t c) {
        return cluster.map_shared_rank(histogram, c)[tie_bin];
    });
    /* Index order is group-major (cluster_item_element): the ties are ranked by block scans of
     * two groups at a time, their counts packed in 16-bit halves (a group holds at most 2048).
     * The first scan's barrier also publishes ties_before, so the CTA's quota is known after
     * it; once the ties ranked reach it, the later groups' rank past it: their keys are only
     * flagged (on a ReLU plateau the quota is reached in the first groups). */
    uint32_t running = 0, quota = 0, before = 0;
    bool ranked = false; /* the CTA's quota of ties is staged */
    gathered = k - remaining; /* the keys above the tie key; the ties are written here */
    /* The CTA's quota of ties by rank, as slice elements: the leader's second buffer, which
     * no gather reaches on this path (it gathers at most k entries; 2 * capacity words >= k >=
     * quota). */
    uint32_t *const tie_stage = reinterpret_cast<uint32_t *>(second);
    const uint32_t stage = shared_address(tie_stage);
#pragma unroll
    for (uint32_t g = 0; g < TOTAL / 4; g += 2) {
        /* Above a tie key above CLUSTER_NO_KEY (any but a -NaN's), `key > prefix` alone
         * excludes the non-candidates; below it, they are cleared after the loop. */
        uint32_t pair = 0; /* the ties among items 4g .. 4g + 7, as bits 0-7 */
#pragma unroll
        for (uint32_t j = 0; j < 8; j++) {
            const uint32_t k_i = key(4 * g + j);
            if (k_i > prefix)
                flags.set(4 * g + j);
            pair |= (k_i == prefix ? 1u : 0u) << j;
        }
        if (ranked)
            continue; /* uniform */
        uint32_t pair_total;
        const uint32_t exclusive = block_exclusive_sum_of<TREE_WARPS>(
            (uint32_t)__popc(pair & 0xFu) | (uint32_t)__popc(pair >> 4) << 16, shared.scan,
            parity, pair_total);
        if (g == 0) {
            before = exchange.ties_before;
            quota = remaining > before ? (remaining - before < mine ? remaining - before : mine)
                                       : 0u;
        }
        uint32_t rank = running + (exclusive & 0xFFFFu);
#pragma unroll
        for (uint32_t j = 0; j < 8; j++) {
            if (j == 4)
                rank = running + (pair_total & 0xFFFFu) + (exclusive >> 16);
            const uint32_t tie = (pair >> j) & 1u;
            /* Predicated, at an address in a register: no branch per item. */
            shared_store_u32_if(stage + 4u * rank, cluster_item_element(4 * g + j),
                                tie && rank < quota);
            rank += tie;
        }
        running += (pair_total & 0xFFFFu) + (pair_total >> 16);
        ranked = running >= quota;
    }
    if (prefix < CLUSTER_NO_KEY) {
#pragma unroll
        for (uint32_t i = 0; i < TOTAL; i++) {
            if (key(i) == CLUSTER_NO_KEY)
                flags.clear(i);
        }
    }
    /* The ties' output positions are known: after the k - remaining keys above the tie key,
     * at their rank among the row's ties in index order. Written here, they are not
     * gathered: a plateau of ties (the 0.0 of ReLU rows) would be one oversized bucket of
     * the leader's ranking. Staged by rank above and written in order: write_output()
     * inside the unrolled loop is a branch and its code per item. */
    __syncthreads();
#pragma unroll 1
    for (uint32_t j = threadIdx.x; j < quota; j += TREE_THREADS)
        write_output(problem, row, k - remaining + before + j,
                     (int32_t)(first + tie_stage[j]));
}

/* The first of the leader's gather slots for this thread's selected items: each warp claims
 * its slots with one atomic on the leader's counter (exchange.own counts the leader's own), so
 * the order of the buffer depends on arrival; its content does not, and the output stage ranks
 * it by value (unique composites), so the output does not either. Slots by a block scan and a
 * count exchange would cost a CTA barrier and a cluster barrier. */
template <uint32_t TOTAL, typename Cluster>
static __device__ __forceinline__ uint32_t cluster_claim_slots(const Cluster &cluster,
                                                               uint32_t part,
                                                               const cluster_flags<TOTAL> &flags,
                                                               cluster_exchange &exchange)
{
    const uint32_t count = flags.count(), inclusive = warp_inclusive_sum(count);
    uint32_t base = 0;
    if ((threadIdx.x & 31u) == 31) {
        base = atomicAdd(cluster.map_shared_rank(&exchange.claimed, 0), inclusive);
        if (part == 0 && cluster.num_blocks() >= CLUSTER_ASYNC_GATHER_PARTS)
            atomicAdd(&exchange.own, inclusive); /* read by the asynchronous gather only */
    }
    return __shfl_sync(0xFFFFFFFFu, base, 31) + inclusive - count;
}

/* Calls emit(element, key) for each selected item: over all items unrolled (the keys are in
 * registers), or where the bulk load's staging still holds the slice, and for the keys kept in
 * shared memory, over the flags' set bits (a rolled loop reading the key from shared memory:
 * the unrolled loop's code, fetched cold once per CTA, is the kernel's largest stall). */
template <uint32_t ITEMS, uint32_t SHARED_ITEMS, typename Key, typename Emit>
static __device__ __forceinline__ void cluster_for_each_selected(
    const cluster_flags<ITEMS + SHARED_ITEMS> &flags, bool bulk, const uint32_t *shared_keys,
    Key key, Emit emit)
{
    constexpr uint32_t TOTAL = ITEMS + SHARED_ITEMS;
#if CLUSTER_STAGED_GATHER
    if (bulk) {
#pragma unroll
        for (uint32_t w = 0; w < sizeof(flags.words) / sizeof(flags.words[0]); w++) {
            auto bits = flags.words[w];
#pragma unroll 1
            while (bits) {
                const uint32_t i = w * flags.BITS + (uint32_t)__ffsll((long long)bits) - 1;
                bits &= bits - 1;
                const uint32_t element = cluster_item_element(i);
                emit(element, order_key_bits(shared_keys[element]));
            }
        }
        return;
    }
#endif
    if constexpr (SHARED_ITEMS > 0 && CLUSTER_STAGED_GATHER) {
        /* Keys in registers unrolled; the shared-memory half (whole flag words: ITEMS is a
         * multiple of 64) by its set bits. */
        static_assert(ITEMS % 64 == 0, "the shared items start a flag word");
#pragma unroll
        for (uint32_t i = 0; i < ITEMS; i++) {
            if (flags.test(i))
                emit(cluster_item_element(i), key(i));
        }
#pragma unroll
        for (uint32_t w = ITEMS / 64; w < sizeof(flags.words) / sizeof(flags.words[0]); w++) {
            auto bits = flags.words[w];
#pragma unroll 1
            while (bits) {
                const uint32_t i = w * flags.BITS + (uint32_t)__ffsll((long long)bits) - 1;
                bits &= bits - 1;
                emit(cluster_item_element(i),
                     shared_keys[(i - ITEMS) * TREE_THREADS + threadIdx.x]);
            }
        }
    } else {
#pragma unroll
        for (uint32_t i = 0; i < TOTAL; i++) {
            if (flags.test(i))
                emit(cluster_item_element(i), key(i));
        }
    }
}

/* ITEMS keys per thread in registers, SHARED_ITEMS more in shared memory (after the two
 * composite buffers; cluster_load_shared). ONE: every row is one CTA (cluster_of_one), launched
 * without clusters for plans of one part (cluster_one_kernel). */
template <uint32_t ITEMS, uint32_t SHARED_ITEMS, bool ONE>
static __global__ void __launch_bounds__(TREE_THREADS, ITEMS == 16 ? 2 : 1)
k_cluster_topk(const struct topk_problem problem, const uint32_t capacity, const uint32_t staged)
{
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
    extern __shared__ uint64_t cluster_buffers[];
    __shared__ __align__(16) tree_shared shared;
    __shared__ cluster_exchange exchange;
    typedef typename std::conditional<ONE, cluster_of_one, cg::cluster_group>::type Cluster;
    const Cluster cluster = this_cluster_as<Cluster>();
    const uint32_t parts = cluster.num_blocks(), part = cluster.block_rank();
    const uint32_t row = blockIdx.x / parts;
    const uint32_t k = problem.shape.k;
    constexpr uint32_t TOTAL = ITEMS + SHARED_ITEMS; /* items per thread */
    const uint32_t first = part * (TREE_THREADS * TOTAL);
    /* The leader's two buffers of `capacity` entries each (cluster_buffer_entries(): twice the
     * output, up to four times on long rows, where shared memory allows) leave room to gather the
     * k-th's whole bin and rank it in the output stage instead of refining further. */
    uint64_t *selection = cluster_buffers;
    uint64_t *const second = cluster_buffers + capacity;
    /* The keys kept in shared memory (SHARED_ITEMS), or the bulk load's staging (`staged`). */
    uint32_t *const shared_keys = reinterpret_cast<uint32_t *>(cluster_buffers + 2 * capacity);
    /* Where keys live in shared memory, they are dead once the leader has gathered (its own
     * gather reads them before the barrier or the wait that ends the gather): the output
     * stage's second buffer is there, and a whole gather may fill both buffers (twice the
     * entries gathered at level 0: on random rows of 262144 at k 2048 the k-th's bin and the
     * keys above it, about 6000, instead of level 1's pass and cluster barrier). */
    constexpr uint32_t SHARED_ENTRIES = SHARED_ITEMS * TREE_THREADS / 2u; /* 8-byte entries */
    uint64_t *const bucketed = SHARED_ITEMS ? reinterpret_cast<uint64_t *>(shared_keys) : second;
    const uint32_t bucketed_entries = SHARED_ITEMS ? SHARED_ENTRIES : capacity;
    const uint32_t gather_capacity =
        SHARED_ITEMS ? (2 * capacity < SHARED_ENTRIES ? 2 * capacity : SHARED_ENTRIES) : capacity;
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

    cluster_init(parts, shared, exchange);
    uint32_t keys[ITEMS];
    cluster_level0_count<ITEMS, SHARED_ITEMS>(problem, row, first, bulk, keys, shared_keys,
                                              even_histogram, exchange);
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
    /* What the leader receives: the top k, or every candidate at or above the k-th's bin,
     * which the output stage ranks and cuts at k. */
    uint32_t gathered = total < k ? total : k;
    cluster_after_level0(total, k, gather_capacity, shared, mask, prefix, remaining, whole,
                         gathered);
    /* Levels 1 and 2 stay in the kernel: as a function of their own, the level picks' calls
     * inside it change the kernel's code (the compiler optimises a callee before inlining it).
     * A one-CTA row whose k-th largest is in the bin of +0.0 first checks whether the bin is
     * +0.0 alone (a ReLU plateau): then the bin's count at level 0 is the ties' (tie_bin in
     * even_histogram), with no level-1 pass, barrier and pick. Only the kernels that run one-CTA
     * rows of at most CLUSTER_PLATEAU_ITEMS keys a thread have the check (the one-CTA kernel where
     * there is one, cluster_one_kernel): its code costs every shape that never takes it
     * (docs/PERF.md "Against the targets"). */
    bool plateau = false;
    if constexpr ((ONE || !cluster_one_kernel(TOTAL)) && TOTAL <= CLUSTER_PLATEAU_ITEMS)
        plateau = !whole && parts == 1 && prefix == CLUSTER_ZERO_KEY &&
                  cluster_bin_is_one_key<TOTAL>(key, mask, prefix);
    if (plateau) {
        mask = 0xFFFFFFFFu;
        tie_bin = prefix >> 21;
    } else if (!whole) {
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
            if (!whole && kept <= gather_capacity) {
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
        cluster_flag_whole<TOTAL>(key, prefix, flags);
    } else {
        uint32_t *histogram = (level & 1u) ? odd_histogram : even_histogram;
        cluster_write_ties<TOTAL>(problem, cluster, row, part, first, k, key, tie_bin, prefix,
                                  remaining, histogram, second, shared, exchange, parity, flags,
                                  gathered);
    }

    /* Gather: the leader's buffer receives the whole selection (cluster_claim_slots). */
    PHASE_MARK(6);
    /* Rows of CLUSTER_ASYNC_GATHER_PARTS CTAs or more end with no cluster barrier after the
     * gather (below), and no CTA may leave while another still accesses its shared memory: the
     * level histograms and tie counts (read before this point) and the leader's claim counter.
     * So each CTA arrives once its warps' claims have returned, relaxed (no membar: the values
     * are used), and waits before it leaves; the leader, waiting too, leaves only after every
     * claim, even of a warp that sends nothing. The asynchronous stores that follow are counted
     * on the leader's mbarrier, which it waits for. */
    uint32_t slot = cluster_claim_slots<TOTAL>(cluster, part, flags, exchange);
    if (parts >= CLUSTER_ASYNC_GATHER_PARTS)
        cluster_arrive_relaxed();
    PHASE_MARK(7);
    if (parts >= CLUSTER_ASYNC_GATHER_PARTS) {
        /* The other CTAs' composites reach the leader as asynchronous remote stores that count
         * their bytes on its mbarrier; the leader expects the bytes of all the selection but
         * its own (`gathered` in all, the same count in every CTA). No cluster barrier: its
         * release (MEMBAR.ALL.GPU) waits for every remote store to be acknowledged, the largest
         * stall of the kernel on rows of 8 CTAs. A CTA then leaves; cluster
         * barriers wait for non-exited threads only, and no CTA reads another's shared memory
         * after the barrier above. */
        const uint32_t barrier = shared_address(&exchange.gather);
        const uint32_t leader_barrier = cluster_map(barrier, 0);
        const uint32_t leader_selection = cluster_map(shared_address(selection), 0);
        cluster_for_each_selected<ITEMS, SHARED_ITEMS>(
            flags, bulk, shared_keys, key, [&](uint32_t element, uint32_t key_i) {
                const uint64_t composite = make_composite(key_i, first + element);
                if (part == 0)
                    selection[slot] = composite;
                else
                    store_async(leader_selection + 8u * slot, composite, leader_barrier);
                slot++;
            });
        /* Every CTA has read what it needed of the others' shared memory (the leader's
         * output stage reuses its level histograms). */
        cluster_wait();
        if (part != 0)
            return; /* uniform: the leader writes the output */
        __syncthreads(); /* exchange.own is complete */
        if (threadIdx.x == 0)
            mbarrier_expect_bytes(barrier, 8u * (gathered - exchange.own));
        mbarrier_wait(barrier, 0);
        __syncthreads(); /* the leader's own entries too */
    } else if (ONE && !bulk && SHARED_ITEMS == 0) {
        /* A row of one CTA, keys in registers: each item's store predicated on its flag, at
         * an address kept in a register, so that the unrolled loop has no branch (a store under
         * a branch cost ten instructions an item: its reconvergence and the shared window's base
         * rebuilt; this is six). */
        const uint32_t base = shared_address(selection);
#pragma unroll
        for (uint32_t i = 0; i < TOTAL; i++) {
            const uint32_t take = flags.test(i) ? 1u : 0u;
            const uint32_t element = cluster_item_element(i);
            shared_store_u64_if(base + 8u * slot, make_composite(key(i), first + element),
                                take);
            slot += take;
        }
        __syncthreads();
    } else {
        /* Plain remote stores and a cluster barrier: faster where each CTA sends many. */
        uint64_t *leader_selection = cluster.map_shared_rank(selection, 0);
        cluster_for_each_selected<ITEMS, SHARED_ITEMS>(
            flags, bulk, shared_keys, key, [&](uint32_t element, uint32_t key_i) {
                leader_selection[slot++] = make_composite(key_i, first + element);
            });
        /* The last access to another CTA's shared memory is before it. */
        cluster_barrier(cluster, parts);
        if (part != 0)
            return; /* uniform: the leader writes the output */
    }
    PHASE_MARK(8);
    /* Output, by the leader: the output stage's bucket map (bucket_of). Every gathered key is
     * at least `prefix` (keys above the tie key, or matching the prefix or above) and a
     * candidate, so within level 0's lowest and highest non-empty bins: taken from level 0, the
     * map needs no pass measuring the selection's range, except above ties of +0.0 (below).
     * (This step stays in the kernel: as a function of its own, the output stage's call inside
     * it changes the kernel's code.) */
    const uint32_t low_bin = exchange.row_low[0] == BITONIC_NO_BIN ? 0u : exchange.row_low[0];
    uint32_t low_key = prefix > (low_bin << 21) ? prefix : low_bin << 21;
    if (!whole && prefix == CLUSTER_ZERO_KEY && gathered > 0) {
        /* The ties are +0.0 (a ReLU plateau), written by the CTAs; the gathered keys are the
         * positives, whose least is many exponents above +0.0: a map from +0.0 would crowd
         * them into a few hundred buckets (each entry's bucket scan is the stage's largest
         * part). Their least key, one pass over them, starts the map instead. */
        uint32_t least = 0xFFFFFFFFu;
#pragma unroll 1
        for (uint32_t e = threadIdx.x; e < gathered; e += TREE_THREADS) {
            const uint32_t key_e = (uint32_t)(selection[e] >> 32);
            least = key_e < least ? key_e : least;
        }
        least = __reduce_min_sync(0xFFFFFFFFu, least);
        if ((threadIdx.x & 31u) == 0)
            atomicMin(&exchange.gathered_low, least);
        __syncthreads();
        low_key = exchange.gathered_low;
    }
    const uint32_t high_key = (exchange.row_high[0] << 21) | 0x1FFFFFu;
    const bucket_map map =
        bucket_map_of((uint64_t)low_key << 32, ((uint64_t)high_key << 32) | 0xFFFFFFFFu);
    /* The leader counts the selection's buckets after the gather: counted as the entries
     * arrive (the senders' remote atomics, or the leader's unrolled gather loop), the gather
     * takes longer. Kernels of at most CLUSTER_TAG_ITEMS keys per thread keep each entry's
     * bucket and slot as its tag where there is room (output_tags). */
    const uint32_t limit = whole ? k : gathered;
    uint32_t *const tags = ITEMS <= CLUSTER_TAG_ITEMS && SHARED_ITEMS == 0
                               ? output_tags(bucketed, bucketed_entries, gathered)
                               : NULL;
    const output_counts counts = { map, tags };
#pragma unroll 1
    for (uint32_t e = threadIdx.x; e < gathered; e += OUTPUT_BATCH * TREE_THREADS) {
        uint32_t bucket[OUTPUT_BATCH];
#pragma unroll
        for (uint32_t b = 0; b < OUTPUT_BATCH; b++)
            bucket[b] = e + b * TREE_THREADS < gathered
                            ? bucket_of(map, selection[e + b * TREE_THREADS])
                            : 0u;
#pragma unroll
        for (uint32_t b = 0; b < OUTPUT_BATCH; b++) { /* adding 0: no branch */
            const bool valid = e + b * TREE_THREADS < gathered;
            const uint32_t slot = atomicAdd(&shared.histogram[bucket[b]], valid ? 1u : 0u);
            if (tags && valid)
                tags[e + b * TREE_THREADS] = output_tag(bucket[b], slot);
        }
    }
    __syncthreads();

    /* Output by the leader alone: every other CTA has left its SM to the next cluster's. Its
     * histogram holds the selection's bucket sizes, sub_sizes is zero. */
    tree_write_output(problem, row, selection, gathered, limit, bucketed, &counts, shared,
                      parity);
#endif
}

#endif
