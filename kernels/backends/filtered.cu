/* filtered and filtered-det: a model of FlashInfer FilteredTopK.
 *
 * What it models: one 1024-thread CTA per row. A coarse pass builds a 256-bin histogram of the
 * value rounded to fp16 (order-preserving, top byte) and finds the threshold bin; its candidates
 * are staged in 16384-entry index buffers, double buffered (2 x 16384 x 4 = 131072 B of dynamic
 * shared memory, FILTERED_TOPK_SMEM_DYNAMIC), and up to four 8-bit refinement rounds over the
 * fp32 order key (bits 31..24, 23..16, 15..8, 7..0) ping-pong between the two buffers. When the
 * threshold bin holds more than 16384 candidates the staging overflows: the overflow flag puts
 * the row in rescan mode, where every round re-reads the row from global memory and filters it
 * by the coarse bin and the key prefix found so far, so no candidate is ever dropped. A round
 * whose surviving candidates fit in 16384 again stages them and leaves rescan mode.
 *
 * Tie-break modes (FlashInfer's numbering):
 * - FILTERED_TIES_NONE (backend `filtered`): winners and boundary ties are claimed through
 *   shared-memory atomics, in the order the warps arrive: the tie subset and the output order
 *   change from run to run. The selected-score multiset is always exact.
 * - FILTERED_TIES_SMALL (backend `filtered-det`, the deterministic mode): the rounds only find
 *   the threshold (a coarse bin plus a key prefix) and the number of boundary ties needed; a
 *   final pass walks the row in index order (four consecutive positions per thread, a block
 *   scan of packed above/tie counts per 4096-position tile), takes every candidate above the
 *   threshold and the first `needed` ties, and writes them index-ascending. The result is the
 *   reference set sorted by index, byte for byte, whatever the arrival order.
 * - FILTERED_TIES_LARGE: the same with the last `needed` ties (largest indices). Implemented
 *   for completeness; the backend table has no entry for it.
 * Rows with at most k candidates return their candidates in index order, then -1.
 *
 * Limits: 1 <= k <= 2048 (FILTERED_TOPK_MAX_K); row length < 2^31. supports() refuses, before
 * anything is launched, devices reporting less than 131072 B shared memory per SM (GB10:
 * 102400; the field includes --emulate-smem-per-sm) or less per-block opt-in memory than the
 * launch uses (131072 B dynamic + the static control block). No scratch.
 *
 * Dynamic shared memory opt-in: cudaFuncSetAttribute is called once per device and kernel
 * variant, lazily, just before the first launch on that device. It is a host-side attribute
 * call that enqueues nothing, so it is also legal when that first launch happens inside a
 * stream capture.
 *
 * Determinism: `filtered` not_guaranteed (exact set, arrival-order ties and output order);
 * `filtered-det` run_to_run (exact set, smallest-index ties, index-ascending output).
 *
 * Known deviations from FlashInfer: the deterministic mode writes its output from an
 * index-ordered pass over the row instead of block-radix-sorting the collected indices (same
 * bytes); staging overflow is detected from the threshold bin's histogram count before staging
 * rather than by a flag raised during it; the coarse bin of a NaN is pinned to the extreme bin of
 * its sign so that the bin order agrees with the reference's total order. */
#include <atomic>
#include <cstdio>

#include "topk_backends.h"
#include "cuda_check.h"
#include "common/topk_common.cuh"
#include "block/radix_select.cuh"

#define FILTERED_THREADS 1024u
#define FILTERED_WARPS (FILTERED_THREADS / 32u)
static_assert(FILTERED_WARPS == SELECT_WARPS, "radix_select.cuh scans assume 1024-thread blocks");
#define FILTERED_STAGING 16384u
#define FILTERED_TOPK_MAX_K 2048u
#define FILTERED_TOPK_SMEM_DYNAMIC (2u * FILTERED_STAGING * 4u) /* 131072 B */
#define FILTERED_LOAD_UNROLL 8u       /* loads in flight per thread in most passes */
#define FILTERED_HISTOGRAM_UNROLL 16u /* in the coarse histogram pass, which keeps less live */
#define FILTERED_FULL_MASK 0xFFFFFFFFu
#define FILTERED_MAX_DEVICES 64
#define FILTERED_ORDERED_PER_THREAD 8u /* index-ordered writer: a tile is 8192 positions */

enum filtered_ties {
    FILTERED_TIES_NONE = 0,
    FILTERED_TIES_SMALL = 1,
    FILTERED_TIES_LARGE = 2,
};

/* Static shared memory beside the two dynamic staging buffers (16-byte aligned so that its
 * sizeof is what the kernel really takes). */
struct __align__(16) filtered_control {
    uint32_t histogram[256];
    uint32_t warp_totals[2][FILTERED_WARPS]; /* block scans, double buffered */
    uint32_t threshold, above, equal, total;
    uint32_t out_count, stage_count, tie_count;
};

#define FILTERED_BLOCK_SMEM (FILTERED_TOPK_SMEM_DYNAMIC + sizeof(struct filtered_control))
static_assert(FILTERED_BLOCK_SMEM == 132384, "update the limits strings of the backend entries");

/* Where the selection cuts a row, for the index-ordered writer. A candidate ranks above the cut
 * when its coarse bin is above `bin`, or equal with (key >> shift) above `prefix`; it is a
 * boundary tie when its bin equals `bin` and (key >> shift) equals `prefix` (with key_level
 * false the key is not looked at: the whole bin is the tie set). bin -1: every candidate ranks
 * above. */
struct filtered_cut {
    int32_t bin;
    bool key_level;
    uint32_t shift, prefix;
    uint32_t ties_needed; /* boundary ties to take */
    uint32_t tie_total;   /* boundary ties in the row */
    uint32_t expected;    /* entries the row outputs: the walk stops once all are placed */
};






/* Run by warp 0 only: the bin t with fewer than need candidates above it and at least need at
 * or above it; writes t, the count above, t's count and the total, and resets the staging and
 * tie counters for the pass that follows (nobody uses them between the previous pass's barrier
 * and the barrier after this call). */
static __device__ void filtered_find_threshold(struct filtered_control *s, uint32_t need)
{
    const uint32_t lane = threadIdx.x & 31u;
    const uint32_t top = 255u - 8u * lane;
    uint32_t counts[8];
    uint32_t local = 0;
#pragma unroll
    for (uint32_t j = 0; j < 8; j++) {
        counts[j] = s->histogram[top - j];
        local += counts[j];
    }
    const uint32_t inclusive = warp_inclusive_sum(local);
    uint32_t above = inclusive - local;
    if (lane == 31u)
        s->total = inclusive;
    if (lane == 0) {
        s->stage_count = 0;
        s->tie_count = 0;
    }
    if (above < need && need <= inclusive) {
#pragma unroll
        for (uint32_t j = 0; j < 8; j++) {
            if (above + counts[j] >= need) {
                s->threshold = top - j;
                s->above = above;
                s->equal = counts[j];
                break;
            }
            above += counts[j];
        }
    }
}

/* The candidates still in the running at a refinement round: either the staged buffer (count
 * entries), or, in rescan mode, the row filtered by coarse bin and key prefix (prefix_shift 32:
 * no prefix yet). visit(in_source, index, key) is called the same number of times by every
 * thread. */
template <typename Visit>
static __device__ __forceinline__ void filtered_walk_source(const float *row, uint32_t length,
                                                            const uint32_t *buffer, uint32_t count,
                                                            bool rescan, uint32_t bin,
                                                            uint32_t prefix_shift,
                                                            uint32_t prefix, Visit visit)
{
    if (rescan) {
        walk_row<FILTERED_LOAD_UNROLL>(row, length, [&](uint32_t index, float value) {
            const uint32_t bits = __float_as_uint(value);
            const uint32_t key = order_key_bits(bits);
            const bool in_source = is_candidate_bits(bits) && select_coarse_bin(value) == bin &&
                                   (prefix_shift >= 32u || (key >> prefix_shift) == prefix);
            visit(in_source, index, key);
        });
        return;
    }
    for (uint32_t base = 0; base < count; base += FILTERED_THREADS * FILTERED_LOAD_UNROLL) {
        uint32_t indices[FILTERED_LOAD_UNROLL];
        float values[FILTERED_LOAD_UNROLL];
#pragma unroll
        for (uint32_t u = 0; u < FILTERED_LOAD_UNROLL; u++) {
            const uint32_t position = base + u * FILTERED_THREADS + threadIdx.x;
            indices[u] = position < count ? buffer[position] : 0u;
        }
#pragma unroll
        for (uint32_t u = 0; u < FILTERED_LOAD_UNROLL; u++) {
            const uint32_t position = base + u * FILTERED_THREADS + threadIdx.x;
            values[u] = position < count ? row[indices[u]] : 0.0f;
        }
#pragma unroll
        for (uint32_t u = 0; u < FILTERED_LOAD_UNROLL; u++) {
            const uint32_t position = base + u * FILTERED_THREADS + threadIdx.x;
            visit(position < count, indices[u], order_key(values[u]));
        }
    }
}

/* How many of the first `seen` boundary ties (in index order) are taken. */
template <int TIES>
static __device__ __forceinline__ uint32_t filtered_ties_taken(const struct filtered_cut &cut,
                                                               uint32_t seen)
{
    if (TIES == FILTERED_TIES_LARGE) {
        const uint32_t skipped = cut.tie_total - cut.ties_needed;
        return seen > skipped ? seen - skipped : 0u;
    }
    return seen < cut.ties_needed ? seen : cut.ties_needed;
}

/* Writes the selection defined by cut in index order, then -1 padding. Thread t classifies the
 * FILTERED_ORDERED_PER_THREAD consecutive positions of its part of each tile; one block scan of
 * packed (above << 16 | tie) counts (each at most 8192 a tile, so the halves never carry into
 * each other) gives every entry its output slot. Deterministic: nothing depends on arrival
 * order. */
template <int TIES>
static __device__ void filtered_write_in_index_order(const struct topk_problem &p,
                                                     uint32_t row_id, const float *row,
                                                     uint32_t length,
                                                     const struct filtered_cut &cut,
                                                     struct filtered_control *s)
{
    const uint32_t k = p.shape.k;
    uint32_t above_done = 0, ties_done = 0, parity = 0;
    const uint32_t per_thread = FILTERED_ORDERED_PER_THREAD;
    for (uint32_t base = 0; base < length; base += per_thread * FILTERED_THREADS) {
        const uint32_t first = base + per_thread * threadIdx.x;
        float values[FILTERED_ORDERED_PER_THREAD];
#pragma unroll
        for (uint32_t e = 0; e < per_thread; e++)
            values[e] = first + e < length ? row[first + e] : __uint_as_float(TOPK_NEG_INF_BITS);
        uint32_t above_mask = 0, tie_mask = 0;
#pragma unroll
        for (uint32_t e = 0; e < per_thread; e++) {
            const float value = values[e];
            const uint32_t bits = __float_as_uint(value);
            if (!is_candidate_bits(bits))
                continue;
            const int32_t bin = (int32_t)select_coarse_bin(value);
            const uint32_t key_part = cut.key_level ? order_key_bits(bits) >> cut.shift : 0u;
            if (bin > cut.bin || (bin == cut.bin && cut.key_level && key_part > cut.prefix))
                above_mask |= 1u << e;
            else if (bin == cut.bin && (!cut.key_level || key_part == cut.prefix))
                tie_mask |= 1u << e;
        }
        uint32_t tile_total;
        const uint32_t packed = ((uint32_t)__popc(above_mask) << 16) | (uint32_t)__popc(tie_mask);
        const uint32_t before =
            block_exclusive_sum_of<FILTERED_WARPS>(packed, s->warp_totals, parity, tile_total);
        uint32_t above_before = above_done + (before >> 16);
        uint32_t ties_before = ties_done + (before & 0xFFFFu);
#pragma unroll
        for (uint32_t e = 0; e < per_thread; e++) {
            if ((above_mask >> e) & 1u) {
                write_output(p, row_id, above_before + filtered_ties_taken<TIES>(cut, ties_before),
                             (int32_t)(first + e));
                above_before++;
            } else if ((tie_mask >> e) & 1u) {
                const uint32_t taken = filtered_ties_taken<TIES>(cut, ties_before);
                if (filtered_ties_taken<TIES>(cut, ties_before + 1) > taken)
                    write_output(p, row_id, above_before + taken, (int32_t)(first + e));
                ties_before++;
            }
        }
        above_done += tile_total >> 16;
        ties_done += tile_total & 0xFFFFu;
        if (above_done + filtered_ties_taken<TIES>(cut, ties_done) >= cut.expected)
            break; /* block-uniform: computed from block totals */
    }
    uint32_t placed = above_done + filtered_ties_taken<TIES>(cut, ties_done);
    if (placed > k)
        placed = k;
    for (uint32_t j = placed + threadIdx.x; j < k; j += FILTERED_THREADS)
        write_output(p, row_id, j, -1);
}

template <int TIES>
static __global__ void __launch_bounds__(FILTERED_THREADS, 1)
    k_filtered_topk(const struct topk_problem p)
{
    extern __shared__ uint32_t filtered_staging[]; /* [2][FILTERED_STAGING] */
    __shared__ struct filtered_control s;
    constexpr bool deterministic = TIES != FILTERED_TIES_NONE;
    const uint32_t row_id = blockIdx.x, tid = threadIdx.x, k = p.shape.k;
    const float *row = row_window(p, row_id);
    const int32_t signed_length = p.lengths[row_id];
    const uint32_t length = signed_length > 0 ? (uint32_t)signed_length : 0u;

    if (tid < 256u)
        s.histogram[tid] = 0;
    if (tid == 0) {
        s.out_count = 0;
        s.stage_count = 0;
        s.tie_count = 0;
    }
    __syncthreads();

    /* Coarse pass. */
    walk_row<FILTERED_HISTOGRAM_UNROLL>(row, length, [&](uint32_t, float value) {
        warp_histogram_add(s.histogram, select_coarse_bin(value),
                           is_candidate_bits(__float_as_uint(value)));
    });
    __syncthreads();
    if (tid < 32u)
        filtered_find_threshold(&s, k);
    __syncthreads();

    struct filtered_cut cut;
    cut.key_level = false;
    cut.shift = 0;
    cut.prefix = 0;
    if (s.total <= k) { /* block-uniform: every candidate is selected */
        cut.bin = -1;
        cut.ties_needed = 0;
        cut.tie_total = 0;
        cut.expected = s.total;
        filtered_write_in_index_order<FILTERED_TIES_SMALL>(p, row_id, row, length, cut, &s);
        return;
    }
    const uint32_t coarse_threshold = s.threshold;
    uint32_t need = k - s.above;
    uint32_t count = s.equal;
    bool rescan = count > FILTERED_STAGING; /* the staging-overflow flag */
    cut.bin = (int32_t)coarse_threshold;
    cut.expected = k;
    bool refine = true; /* false: the coarse pass already claimed all k */

    if constexpr (deterministic) {
        if (count == need) { /* the whole threshold bin is selected */
            cut.ties_needed = need;
            cut.tie_total = count;
            filtered_write_in_index_order<TIES>(p, row_id, row, length, cut, &s);
            return;
        }
        if (!rescan) {
            walk_row<FILTERED_LOAD_UNROLL>(row, length, [&](uint32_t index, float value) {
                const bool staged = is_candidate_bits(__float_as_uint(value)) &&
                                    select_coarse_bin(value) == coarse_threshold;
                const uint32_t position = warp_claim(staged, &s.stage_count);
                if (staged && position < FILTERED_STAGING)
                    filtered_staging[position] = index;
            });
        }
    } else {
        const bool whole_bin = count == need;
        walk_row<FILTERED_LOAD_UNROLL>(row, length, [&](uint32_t index, float value) {
            const bool candidate = is_candidate_bits(__float_as_uint(value));
            const uint32_t bin = select_coarse_bin(value);
            const bool winner = candidate && (bin > coarse_threshold ||
                                              (bin == coarse_threshold && whole_bin));
            const bool staged = candidate && bin == coarse_threshold && !whole_bin && !rescan;
            const uint32_t slot = warp_claim(winner, &s.out_count);
            if (winner)
                write_output(p, row_id, slot, (int32_t)index);
            const uint32_t position = warp_claim(staged, &s.stage_count);
            if (staged && position < FILTERED_STAGING)
                filtered_staging[position] = index;
        });
        refine = !whole_bin;
    }

    if (refine) {
        __syncthreads(); /* staging complete */
        uint32_t current = 0;            /* buffer holding the candidates in the running */
        uint32_t prefix = 0, prefix_shift = 32u;
        for (uint32_t round = 0; round < 4; round++) {
            const uint32_t shift = 24u - 8u * round;
            const uint32_t *source = filtered_staging + current * FILTERED_STAGING;
            uint32_t *next = filtered_staging + (current ^ 1u) * FILTERED_STAGING;
            /* The histogram's last reader (warp 0) finished before the previous barrier. */
            if (tid < 256u)
                s.histogram[tid] = 0;
            __syncthreads();
            filtered_walk_source(row, length, source, count, rescan, coarse_threshold,
                                 prefix_shift, prefix,
                                 [&](bool in_source, uint32_t, uint32_t key) {
                                     warp_histogram_add(s.histogram, (key >> shift) & 255u,
                                                        in_source);
                                 });
            __syncthreads();
            if (tid < 32u)
                filtered_find_threshold(&s, need);
            __syncthreads();
            const uint32_t threshold = s.threshold;
            const uint32_t above = s.above;
            const uint32_t equal = s.equal;
            const uint32_t need_after = need - above;
            const bool whole_bin = equal == need_after;
            const bool last = whole_bin || round == 3u;
            const bool next_rescan = rescan && equal > FILTERED_STAGING;
            const uint32_t next_prefix =
                prefix_shift >= 32u ? threshold : (prefix << 8) | threshold;

            if constexpr (deterministic) {
                if (last) {
                    cut.key_level = true;
                    cut.shift = shift;
                    cut.prefix = next_prefix;
                    cut.ties_needed = need_after;
                    cut.tie_total = equal;
                    filtered_write_in_index_order<TIES>(p, row_id, row, length, cut, &s);
                    return;
                }
                if (!next_rescan) {
                    filtered_walk_source(row, length, source, count, rescan, coarse_threshold,
                                         prefix_shift, prefix,
                                         [&](bool in_source, uint32_t index, uint32_t key) {
                                             const bool staged =
                                                 in_source && ((key >> shift) & 255u) == threshold;
                                             const uint32_t position =
                                                 warp_claim(staged, &s.stage_count);
                                             if (staged && position < FILTERED_STAGING)
                                                 next[position] = index;
                                         });
                }
            } else if (above != 0 || !next_rescan || last) {
                /* (Rescan rounds that claim nothing and cannot stage skip the pass.) */
                filtered_walk_source(
                    row, length, source, count, rescan, coarse_threshold, prefix_shift, prefix,
                    [&](bool in_source, uint32_t index, uint32_t key) {
                        const uint32_t byte = (key >> shift) & 255u;
                        const bool winner = in_source && (byte > threshold ||
                                                          (byte == threshold && whole_bin));
                        const bool tie = in_source && byte == threshold && last && !whole_bin;
                        const bool staged =
                            in_source && byte == threshold && !last && !next_rescan;
                        const uint32_t ordinal = warp_claim(tie, &s.tie_count);
                        const bool take = winner || (tie && ordinal < need_after);
                        const uint32_t slot = warp_claim(take, &s.out_count);
                        if (take)
                            write_output(p, row_id, slot, (int32_t)index);
                        const uint32_t position = warp_claim(staged, &s.stage_count);
                        if (staged && position < FILTERED_STAGING)
                            next[position] = index;
                    });
            }
            if (last)
                break; /* only reached without the deterministic mode */
            /* The staged buffer is complete before the next round reads it. */
            __syncthreads();
            need = need_after;
            count = equal;
            rescan = next_rescan;
            if (!rescan)
                current ^= 1u;
            prefix = next_prefix;
            prefix_shift = shift;
        }
    }

    /* Not reached by the deterministic modes, which return after their index-ordered pass. */
    __syncthreads();
    const uint32_t filled = s.out_count < k ? s.out_count : k;
    for (uint32_t j = filled + tid; j < k; j += FILTERED_THREADS)
        write_output(p, row_id, j, -1);
}

/* supports() for every tie mode. */
static int filtered_check(const struct gpu_device_info *device, const struct topk_shape *shape,
                          char *reason, size_t reason_bytes)
{
    if (!topk_built_for(device, reason, reason_bytes))
        return 0;
    if (shape->k < 1 || shape->k > FILTERED_TOPK_MAX_K) {
        snprintf(reason, reason_bytes, "k %u %s (FILTERED_TOPK_MAX_K)", shape->k,
                 shape->k < 1 ? "< 1" : "> 2048");
        return 0;
    }
    if (device->smem_per_sm < FILTERED_TOPK_SMEM_DYNAMIC) {
        snprintf(reason, reason_bytes, "needs %u B shared memory per SM for 2 x %u staging, "
                 "device has %zu B%s", FILTERED_TOPK_SMEM_DYNAMIC, FILTERED_STAGING,
                 device->smem_per_sm, device->smem_emulated ? " (emulated)" : "");
        return 0;
    }
    if (device->smem_per_block_optin < FILTERED_BLOCK_SMEM) {
        snprintf(reason, reason_bytes, "needs %zu B shared memory per block (%u B staging + "
                 "%zu B control), device allows %zu B per block (opt-in)%s",
                 (size_t)FILTERED_BLOCK_SMEM, FILTERED_TOPK_SMEM_DYNAMIC,
                 sizeof(struct filtered_control), device->smem_per_block_optin,
                 device->smem_emulated ? " (emulated)" : "");
        return 0;
    }
    if (shape->max_length < 0) {
        snprintf(reason, reason_bytes, "negative row length %d", shape->max_length);
        return 0;
    }
    if (shape->has_page_table &&
        (shape->page_size == 0 || (shape->page_size & (shape->page_size - 1)) != 0)) {
        snprintf(reason, reason_bytes, "page_size %u is not a power of two", shape->page_size);
        return 0;
    }
    snprintf(reason, reason_bytes, "supported: %zu B shared memory per block of %zu B opt-in, "
             "%zu B per SM", (size_t)FILTERED_BLOCK_SMEM, device->smem_per_block_optin,
             device->smem_per_sm);
    return 1;
}

static size_t filtered_scratch_bytes(const struct gpu_device_info *device,
                                     const struct topk_shape *shape)
{
    (void)device;
    (void)shape;
    return 0;
}

/* Opts kernel variant TIES into FILTERED_TOPK_SMEM_DYNAMIC bytes of dynamic shared memory on the
 * current device, once per device: an attribute call, not a stream operation. Two threads racing
 * here both set the same value, which is harmless. */
template <int TIES>
static int filtered_opt_in(int ordinal, struct audit_error *err)
{
    static std::atomic<bool> done[FILTERED_MAX_DEVICES];
    const bool cacheable = ordinal >= 0 && ordinal < FILTERED_MAX_DEVICES;
    if (cacheable && done[ordinal].load(std::memory_order_acquire))
        return 0;
    CUDA_TRY(cudaFuncSetAttribute(k_filtered_topk<TIES>,
                                  cudaFuncAttributeMaxDynamicSharedMemorySize,
                                  (int)FILTERED_TOPK_SMEM_DYNAMIC),
             err);
    if (cacheable)
        done[ordinal].store(true, std::memory_order_release);
    return 0;
}

template <int TIES>
static int filtered_launch_ties(const char *name, const struct topk_problem *problem,
                                const struct gpu_device_info *device, cudaStream_t stream,
                                struct audit_error *err)
{
    char reason[256];
    if (!filtered_check(device, &problem->shape, reason, sizeof(reason)))
        return audit_fail(err, AUDIT_EUNSUPPORTED, "%s: %s", name, reason);
    if (problem->shape.rows == 0)
        return 0;
    const int status = filtered_opt_in<TIES>(device->ordinal, err);
    if (status < 0)
        return audit_error_prefix(err, "%s", name);
    k_filtered_topk<TIES><<<problem->shape.rows, FILTERED_THREADS, FILTERED_TOPK_SMEM_DYNAMIC,
                            stream>>>(*problem);
    const cudaError_t launch_status = cudaGetLastError();
    if (launch_status != cudaSuccess)
        return audit_fail(err, AUDIT_EDEVICE, "%s: launch of %u rows, k %u failed: %s (%s)", name,
                          problem->shape.rows, problem->shape.k,
                          cudaGetErrorString(launch_status), cudaGetErrorName(launch_status));
    return 0;
}

static int filtered_launch(const struct topk_problem *problem,
                           const struct gpu_device_info *device, cudaStream_t stream,
                           struct audit_error *err)
{
    return filtered_launch_ties<FILTERED_TIES_NONE>("filtered", problem, device, stream, err);
}

static int filtered_det_launch(const struct topk_problem *problem,
                               const struct gpu_device_info *device, cudaStream_t stream,
                               struct audit_error *err)
{
    return filtered_launch_ties<FILTERED_TIES_SMALL>("filtered-det", problem, device, stream, err);
}

extern "C" const struct topk_backend topk_backend_filtered = {
    "filtered",
    "model of FlashInfer FilteredTopK, tie-break none: 2 x 16384 staging, exact rescan on "
    "overflow, atomics in arrival order",
    TOPK_NOT_GUARANTEED,
    true,  /* exact_set */
    false, /* smallest_index_ties */
    false, /* canonical_order */
    false, /* index_ascending */
    "k 1..2048 (FILTERED_TOPK_MAX_K); needs 131072 B shared memory per SM and 132384 B per "
    "block (opt-in); rows < 2^31 elements; one 1024-thread CTA per row",
    filtered_check,
    filtered_scratch_bytes,
    filtered_launch,
};

extern "C" const struct topk_backend topk_backend_filtered_det = {
    "filtered-det",
    "model of FlashInfer FilteredTopK deterministic mode, tie-break small: smallest-index "
    "ties, index-ascending output",
    TOPK_RUN_TO_RUN,
    true,  /* exact_set */
    true,  /* smallest_index_ties */
    false, /* canonical_order */
    true,  /* index_ascending */
    "k 1..2048 (FILTERED_TOPK_MAX_K); needs 131072 B shared memory per SM and 132384 B per "
    "block (opt-in); rows < 2^31 elements; one 1024-thread CTA per row",
    filtered_check,
    filtered_scratch_bytes,
    filtered_det_launch,
};
