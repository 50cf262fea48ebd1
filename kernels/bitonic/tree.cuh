/* bitonic's tree path: rows cut into leaves, merged up a tree (k <= 4096 where the cluster path
 * does not run, or forced: tree, tree_deep).
 *
 * What for: one CTA per row leaves most SMs idle when rows are few and long, and a call then
 * lasts as long as one SM streaming one row. The tree path cuts every row into leaves of at most 8192
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
 * no co-residency is needed (no spin barrier, no cooperative launch), and a graph replays it as
 * a memset node (counters and row histograms) and two kernel nodes; rows of one leaf need only
 * the tree kernel.
 *
 * Limits: k <= 4096 (a merge takes two children at least); leaves never overflow: a leaf holds
 * at most 8192 elements and a merge at most fan_in * k <= 8192 composites, both in registers,
 * and a list holds at most k entries by construction. Scratch: (8 k + 8) B per leaf and parent
 * node and 8 KiB per row, its counters zeroed by a cudaMemsetAsync in every call.
 * Determinism: gpu_to_gpu. */
#ifndef DSATOPK_BITONIC_TREE_CUH
#define DSATOPK_BITONIC_TREE_CUH

#include "bitonic/common.cuh"
#include "bitonic/output.cuh"

#define TREE_MAX_K (TREE_CAPACITY / 2u) /* a merge takes two children at least */
#define TREE_DIGITS 6

/* Device views of the scratch of one call (layout: tree_layout_of, bitonic/plan.cuh); per row
 * and node:
 * the arrival counter (zeroed by the call's memset), the list's count and its k slots. */
struct tree_scratch {
    uint32_t *arrivals; /* rows * nodes_per_row */
    uint32_t *counts;   /* rows * nodes_per_row */
    uint64_t *lists;    /* rows * nodes_per_row * k */
    uint32_t *row_histograms; /* rows * 2048: digit 0 over the row (zeroed); NULL: one leaf */
    struct bitonic_tree_plan plan;
};

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
        const uint32_t inclusive = warp_inclusive_sum(a + b);
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
 * cooperative groups' grid barrier); one fence per CTA, not one per thread (a fence per thread
 * costs microseconds per tree level). */
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

/* Pass 1 of a tree with parents: the row's histogram of digit 0 (the key's top 11 bits) over its
 * candidates, summed over its leaves with integer atomics (sums do not depend on their order).
 * It lets every leaf of pass 2 drop, before selecting anything, the candidates below the bin
 * that holds the row's k-th largest: they cannot be in the row's top k. On random rows of
 * 131072 that leaves a few hundred candidates per leaf instead of the leaf's top k, so the
 * selections up the tree take everything after one histogram. */
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


#endif
