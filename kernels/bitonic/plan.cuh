/* bitonic's planner: which path runs a shape and how it cuts the rows, a pure host function of
 * a described device and the shape (no CUDA call: tests/test_bitonic_plan.c checks it on a
 * described H200 and others). bitonic_plan_make() is its entry (kernels/include/bitonic_plan.h);
 * the launch (kernels/backends/bitonic.cu) only runs what the plan says.
 *
 * auto, for k <= 4096: the cluster path on sm_90 and newer where a row fits 16 slices, with the
 * smallest slices whose grid runs in one wave of the device (cluster_wave), else the fewest
 * slices per row in several waves; else the tree (leaves of 8192); above 4096 one CTA per row.
 * The sizes come from the kernels' own shared blocks (sizeof), so this header belongs to the
 * bitonic translation unit. */
#ifndef DSATOPK_BITONIC_PLAN_CUH
#define DSATOPK_BITONIC_PLAN_CUH

#include <cstdio>
#include <cstring>

#include "bitonic/one_cta.cuh"
#include "bitonic/tree.cuh"
#include "bitonic/cluster_load.cuh"

/* Entries of the composite buffer for k: a power of two, at least one warp's sort chunk. */
static uint32_t composite_entries(uint32_t value)
{
    uint32_t power = BITONIC_MIN_SORT;
    while (power < value)
        power <<= 1;
    return power;
}

/* The one-CTA path's shared memory without its stage: the control block and the composites. */
static size_t bitonic_fixed_smem(uint32_t k)
{
    return sizeof(struct bitonic_control) + (size_t)composite_entries(k) * sizeof(uint64_t);
}

/* How the tree path cuts a shape. Returns false where it does not apply (the one-CTA path
 * runs): choice one_cta, k of 0 or above TREE_MAX_K, no rows, a device whose shared memory per
 * block is below the tree kernel's (its static part and two output buffers: 98976 B at
 * k = 4096), a tree deeper than BITONIC_TREE_MAX_LEVELS, or a grid over 2^31 - 1 blocks.
 * tree_deep cuts leaves of 2048 elements, so that the GPU suite runs deep trees, leaf
 * boundaries and partial parents on every shape. */
static bool tree_plan_of(const struct gpu_device_info *device, const struct topk_shape *shape,
                         enum bitonic_choice choice, struct bitonic_tree_plan *plan)
{
    memset(plan, 0, sizeof(*plan));
    if (choice == BITONIC_CHOICE_ONE_CTA)
        return false;
    if (shape->rows == 0 || shape->k == 0 || shape->k > TREE_MAX_K || shape->max_length < 0)
        return false;
    if (sizeof(tree_shared) + 2 * (size_t)composite_entries(shape->k) * sizeof(uint64_t) >
        device->smem_per_block_optin)
        return false;
    const uint64_t length = (uint64_t)shape->max_length;
    plan->leaf_elements = choice == BITONIC_CHOICE_TREE_DEEP ? TREE_LEAF_QUANTUM : TREE_CAPACITY;
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
        if (plan->levels == BITONIC_TREE_MAX_LEVELS)
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
                                         const struct bitonic_tree_plan *plan)
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
 * device's shared memory per block allows (the leader may then gather a whole bin, into both
 * buffers on slices of 65536: k_cluster_topk), up to
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

/* CTAs of clusters of `parts` that auto lets run in one wave: one per SM (two CTAs of 16 keys
 * per thread sharing an SM take longer than one CTA of 32 keys per thread), and only about half
 * the SMs with clusters of more than 4 (clusters of 8 CTAs of one SM each: at most 15 active
 * on the H200's 132 SMs, GPC packing). Where the device's packing was measured (cluster_fit),
 * never more than it runs at once: 30 clusters of 4 and 39 of 3 on the H200. */
static uint64_t cluster_wave(const struct gpu_device_info *device, uint64_t parts)
{
    uint64_t ctas = parts <= 4 ? (uint64_t)device->sm_count : (uint64_t)device->sm_count / 2u;
    if (device->cluster_fit[1] > 0) { /* measured: a size the device does not take gets none */
        const uint64_t fit = parts <= GPU_CLUSTER_MAX ? device->cluster_fit[parts] * parts : 0u;
        ctas = fit < ctas ? fit : ctas;
    }
    return ctas;
}

/* Where the cluster path runs (choices auto and cluster*): a device and a build with clusters,
 * k up to TREE_MAX_K, rows of at most 16 slices of 8192, 16384, 32768 or 65536 elements (16,
 * 32, 64 or 128 keys per thread, the last half in shared memory: the first that cuts the row
 * into few enough slices); auto takes the smallest slices whose grid fits one wave
 * (cluster_wave), else the fewest slices per row in several waves; cluster takes every such
 * shape, cluster16/32/64/128 only that many keys per thread. False elsewhere (the tree path
 * runs). Fills parts and items. */
static bool cluster_plan_of(const struct gpu_device_info *device, const struct topk_shape *shape,
                            enum bitonic_choice choice, struct bitonic_cluster_plan *plan)
{
    uint32_t forced = 0; /* cluster16 .. cluster128: 16 << (choice - cluster16) keys */
    if (choice >= BITONIC_CHOICE_CLUSTER16 && choice <= BITONIC_CHOICE_CLUSTER128)
        forced = TREE_ITEMS << (choice - BITONIC_CHOICE_CLUSTER16);
    else if (choice != BITONIC_CHOICE_AUTO && choice != BITONIC_CHOICE_CLUSTER)
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
        /* auto: a cluster beats the tree where the whole grid runs in one wave; the smallest
         * slices that do are the shortest barrier chain (fewer keys per thread per pass). Rows
         * of one slice take it too: a few percent slower than the tree's single leaf where the
         * k-th largest is off a plateau, a quarter faster where it is on one (the level-1 key
         * range ends the refinement where the leaf walks its 64-bit composite through every
         * digit). */
        if (choice == BITONIC_CHOICE_AUTO && (uint64_t)shape->rows * parts > cluster_wave(device, parts))
            continue;
        plan->items = items;
        plan->parts = (uint32_t)parts;
        return true;
    }
    if (choice == BITONIC_CHOICE_AUTO) {
        /* No cut fits one wave: the cut with the fewest slices per row (then the fewest keys
         * per thread), in as many waves as it takes. With every SM busy anyway, each CTA more
         * in a row is one more barrier chain and gather; it beats the tree 1.2-3.2x there. */
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

/* The cluster launch's buffers and shared memory for the cut in `plan` (parts and items). The
 * bulk load's staging where the device's shared memory has room: slices of 64 keys per thread in
 * registers alone (a load of 32 keys per thread is too short to gain from it). */
static void cluster_plan_memory(const struct gpu_device_info *device,
                                const struct topk_shape *shape, struct bitonic_cluster_plan *plan)
{
    const uint32_t shared_items = cluster_shared_items(plan->items);
    const uint32_t register_items = plan->items - shared_items;
    plan->capacity = (uint32_t)cluster_buffer_entries(device, shape, plan->items);
    plan->smem = 2 * (size_t)plan->capacity * sizeof(uint64_t) +
                 (size_t)shared_items * TREE_THREADS * sizeof(uint32_t);
    plan->staged = 0;
    const size_t staging = (size_t)register_items * TREE_THREADS * sizeof(uint32_t);
    if (shared_items == 0 && register_items == CLUSTER_BULK_CHUNKS * CLUSTER_BULK_CHUNK_ITEMS &&
        cluster_smem_total(plan->capacity, plan->items) + staging <=
            device->smem_per_block_optin) {
        plan->smem += staging;
        plan->staged = 1;
    }
}

/* The one-CTA path: the rest of the block's shared memory stages threshold bins, no more than
 * the longest row needs, so that short rows leave room for more resident blocks. */
static void one_cta_plan_of(const struct gpu_device_info *device, const struct topk_shape *shape,
                            struct bitonic_one_cta_plan *plan)
{
    const size_t fixed = bitonic_fixed_smem(shape->k);
    size_t stage_capacity = device->smem_per_block_optin > fixed
                                ? (device->smem_per_block_optin - fixed) / sizeof(uint64_t)
                                : 0;
    const size_t longest = shape->max_length > 0 ? (size_t)shape->max_length : 0;
    if (stage_capacity > longest)
        stage_capacity = longest;
    plan->composite_capacity = composite_entries(shape->k);
    plan->stage_capacity = (uint32_t)stage_capacity;
    plan->smem = fixed + stage_capacity * sizeof(uint64_t);
}

/* 1 where bitonic runs the shape at all, else 0 with the reason. */
static int bitonic_accepts(const struct gpu_device_info *device, const struct topk_shape *shape,
                           char *reason, size_t reason_bytes)
{
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
    const size_t required = bitonic_fixed_smem(shape->k);
    if (required > device->smem_per_block_optin) {
        snprintf(reason, reason_bytes,
                 "k = %u needs %zu B of shared memory per block, the device allows %zu B%s",
                 shape->k, required, device->smem_per_block_optin,
                 device->smem_emulated ? " (emulated)" : "");
        return 0;
    }
    return 1;
}

extern "C" int bitonic_plan_make(const struct gpu_device_info *device,
                                 const struct topk_shape *shape, enum bitonic_choice choice,
                                 struct bitonic_plan *plan, char *reason, size_t reason_bytes)
{
    memset(plan, 0, sizeof(*plan));
    if ((unsigned)choice >= BITONIC_CHOICES) {
        snprintf(reason, reason_bytes, "plan choice %d: expected one of " BITONIC_CHOICE_NAMES,
                 (int)choice);
        return 0;
    }
    plan->choice = choice;
    if (!bitonic_accepts(device, shape, reason, reason_bytes))
        return 0;
    plan->has_cluster = cluster_plan_of(device, shape, choice, &plan->cluster);
    if (plan->has_cluster)
        cluster_plan_memory(device, shape, &plan->cluster);
    /* Also where the cluster path will run: the tree is its fallback when no cluster of that
     * size fits the device, which only the launch finds out; its scratch comes with it. */
    plan->has_tree = tree_plan_of(device, shape, choice, &plan->tree);
    if (plan->has_tree)
        plan->scratch_bytes = tree_layout_of(shape, &plan->tree).total;
    one_cta_plan_of(device, shape, &plan->one_cta);
    plan->path = plan->has_cluster ? BITONIC_PATH_CLUSTER
                 : plan->has_tree  ? BITONIC_PATH_TREE
                                   : BITONIC_PATH_ONE_CTA;
    const size_t required = bitonic_fixed_smem(shape->k);
    if (plan->has_cluster)
        snprintf(reason, reason_bytes,
                 "one thread-block cluster per row: %u block%s of %u elements (the tree path "
                 "where no such cluster fits)",
                 plan->cluster.parts, plan->cluster.parts == 1 ? "" : "s",
                 plan->cluster.items * TREE_THREADS);
    else if (plan->has_tree)
        snprintf(reason, reason_bytes,
                 "rows cut into %u leaves of %u elements merged %u at a time (%u levels), "
                 "%zu B of scratch",
                 plan->tree.nodes[0], plan->tree.leaf_elements, plan->tree.fan_in,
                 plan->tree.levels, plan->scratch_bytes);
    else
        snprintf(reason, reason_bytes,
                 "one block per row: needs %zu B of shared memory per block (%zu B available); "
                 "stages threshold bins of up to %zu candidates",
                 required, device->smem_per_block_optin,
                 (device->smem_per_block_optin - required) / sizeof(uint64_t));
    return 1;
}

#endif
