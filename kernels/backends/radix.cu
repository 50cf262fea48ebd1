/* radix: a model of sgl-kernel fast_topk_v2, the SGLang default DSA top-k, failure modes included.
 *
 * What it models: one 1024-thread CTA per row. Pass 1 builds a 256-bin histogram of the coarse
 * key (the value rounded to fp16, order-preserving, top byte) to find the threshold bin: every
 * bin ranking above it holds winners. Pass 2 re-reads the row: winners are claimed into the
 * output through a shared-memory atomic counter (arrival order), and the threshold bin's
 * candidates are staged in a FIXED 4096-entry shared buffer (keys and indices, 32 KB) at
 * positions taken from another atomic counter. Entries past 4096 are SILENTLY DROPPED, with no
 * rescan, as in the original (SGLang #36807: wrong sets on 64 x 262144 random rows, k = 2048).
 * Up to four 8-bit refinement rounds over the fp32 order-key bits (31..24, 23..16, 15..8, 7..0)
 * of the staged candidates then find the exact threshold key; winners above it are claimed by
 * atomics and the remaining slots go to boundary ties, claimed by atomics in arrival order.
 *
 * Strategy notes. Each thread owns staged positions tid, tid + 1024, tid + 2048, tid + 3072 and
 * keeps them in registers for the refinement rounds (no compaction between rounds). Atomics are
 * warp-aggregated (one per warp and predicate): the order in which the 32 warps reach a counter
 * depends on when their global loads return, so the staged subset, the tie subset and the output
 * order follow SM scheduling and memory latency and change from run to run, most visibly under
 * a busy GPU. Rows with length <= k return identity positions: the row's candidates in index
 * order, skipping exact -inf, then -1. Rows with more than k positions but at most k candidates
 * (exact -inf sprinkles) return their candidates in index order too.
 *
 * Limits: 1 <= k <= 4096 (the original is fixed at 2048); row length < 2^31; no scratch.
 * After a drop the kernel fills what it can. With k <= 4096 the buffer always keeps at least the
 * `need` candidates still missing (need <= k <= 4096 and the bin holds at least need), so a drop
 * makes a wrong set, never a short one; the -1 fill after the rounds only pads rows that ran out.
 *
 * Determinism: not_guaranteed. No exact-set, tie or order promise. What does hold: no duplicate,
 * no out-of-range index, no exact -inf selected, -1 only where staging dropped candidates or the
 * row ran out; and the selected-score multiset equals the reference's on every row whose
 * threshold coarse bin holds at most 4096 candidates (what the census calls radix_overflow).
 *
 * Known deviation: the coarse bin of a NaN is forced to the extreme bin of its sign (+NaN top,
 * -NaN bottom) so that the bin order agrees with the total order the reference uses; the fp16
 * conversion may otherwise drop a NaN's sign. */
#include <cstdio>

#include "topk_backends.h"
#include "common/topk_common.cuh"
#include "block/radix_select.cuh"

#define RADIX_THREADS 1024u
#define RADIX_WARPS (RADIX_THREADS / 32u)
static_assert(RADIX_WARPS == SELECT_WARPS, "radix_select.cuh scans assume 1024-thread blocks");
#define RADIX_STAGING 4096u
#define RADIX_STAGED_PER_THREAD (RADIX_STAGING / RADIX_THREADS)
#define RADIX_MAX_K 4096u
#define RADIX_LOAD_UNROLL 8u       /* loads in flight per thread in the claiming pass */
#define RADIX_HISTOGRAM_UNROLL 16u /* and in the histogram pass, which keeps less live */
#define RADIX_FULL_MASK 0xFFFFFFFFu

struct radix_shared {
    uint32_t staged_key[RADIX_STAGING];   /* order keys of the staged threshold-bin candidates */
    int32_t staged_index[RADIX_STAGING];  /* their window-relative indices */
    uint32_t histogram[256];
    uint32_t warp_totals[2][RADIX_WARPS]; /* block scans, double buffered (one barrier a scan) */
    uint32_t threshold, above, equal, total;
    uint32_t out_count, stage_count, tie_count;
};






/* Run by the 32 lanes of warp 0 only. Finds the bin t where the candidates ranking above it
 * number fewer than need and those at or above it at least need; writes t, the count above it,
 * its own count and the histogram total. Lane l scans bins 255 - 8l down to 248 - 8l. When the
 * total is below need no lane writes t (callers check total first). */
static __device__ void radix_find_threshold(struct radix_shared *s, uint32_t need)
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

/* The identity path: the row's candidates in index order (exact -inf skipped), then -1. Each
 * thread takes four consecutive positions of a 4096-position tile; a block scan places them. */
static __device__ void radix_write_candidates_in_order(const struct topk_problem &p,
                                                       uint32_t row_id, const float *row,
                                                       uint32_t length, struct radix_shared *s)
{
    const uint32_t k = p.shape.k;
    uint32_t placed = 0, parity = 0;
    for (uint32_t base = 0; base < length && placed < k; base += 4u * RADIX_THREADS) {
        const uint32_t first = base + 4u * threadIdx.x;
        uint32_t candidate_mask = 0;
#pragma unroll
        for (uint32_t e = 0; e < 4; e++) {
            const uint32_t index = first + e;
            if (index < length && is_candidate_bits(__float_as_uint(row[index])))
                candidate_mask |= 1u << e;
        }
        uint32_t tile_total;
        uint32_t position = placed + block_exclusive_sum_of<RADIX_WARPS>(__popc(candidate_mask),
                                                                         s->warp_totals, parity,
                                                                         tile_total);
#pragma unroll
        for (uint32_t e = 0; e < 4; e++) {
            if ((candidate_mask >> e) & 1u) {
                if (position < k)
                    write_output(p, row_id, position, (int32_t)(first + e));
                position++;
            }
        }
        placed += tile_total;
    }
    if (placed > k)
        placed = k;
    for (uint32_t j = placed + threadIdx.x; j < k; j += RADIX_THREADS)
        write_output(p, row_id, j, -1);
}

static __global__ void __launch_bounds__(RADIX_THREADS)
    k_radix_topk(const struct topk_problem p)
{
    __shared__ struct radix_shared s;
    const uint32_t row_id = blockIdx.x, tid = threadIdx.x, k = p.shape.k;
    const float *row = row_window(p, row_id);
    const int32_t signed_length = p.lengths[row_id];
    const uint32_t length = signed_length > 0 ? (uint32_t)signed_length : 0u;

    if (length <= k) {
        radix_write_candidates_in_order(p, row_id, row, length, &s);
        return;
    }

    if (tid < 256u)
        s.histogram[tid] = 0;
    if (tid == 0) {
        s.out_count = 0;
        s.stage_count = 0;
        s.tie_count = 0;
    }
    __syncthreads();

    /* Pass 1: coarse histogram of the candidates. */
    walk_row<RADIX_HISTOGRAM_UNROLL>(row, length, [&](uint32_t, float value) {
        warp_histogram_add(s.histogram, select_coarse_bin(value),
                           is_candidate_bits(__float_as_uint(value)));
    });
    __syncthreads();
    if (tid < 32u)
        radix_find_threshold(&s, k);
    __syncthreads();

    if (s.total <= k) { /* block-uniform: everything is selected */
        radix_write_candidates_in_order(p, row_id, row, length, &s);
        return;
    }
    const uint32_t coarse_threshold = s.threshold;
    uint32_t need = k - s.above;

    /* Pass 2: claim the bins above the threshold, stage the threshold bin, drop past 4096. */
    walk_row<RADIX_LOAD_UNROLL>(row, length, [&](uint32_t index, float value) {
        const uint32_t bits = __float_as_uint(value);
        const bool candidate = is_candidate_bits(bits);
        const uint32_t bin = select_coarse_bin(value);
        const bool winner = candidate && bin > coarse_threshold;
        const bool staged = candidate && bin == coarse_threshold;
        const uint32_t slot = warp_claim(winner, &s.out_count);
        if (winner)
            write_output(p, row_id, slot, (int32_t)index);
        const uint32_t position = warp_claim(staged, &s.stage_count);
        if (staged && position < RADIX_STAGING) {
            s.staged_key[position] = order_key_bits(bits);
            s.staged_index[position] = (int32_t)index;
        }
    });
    __syncthreads();

    const uint32_t staged_count = s.stage_count < RADIX_STAGING ? s.stage_count : RADIX_STAGING;
    uint32_t keys[RADIX_STAGED_PER_THREAD];
    int32_t indices[RADIX_STAGED_PER_THREAD];
    uint32_t active = 0; /* bit j: staged entry j of this thread is still in the running */
#pragma unroll
    for (uint32_t j = 0; j < RADIX_STAGED_PER_THREAD; j++) {
        const uint32_t position = tid + j * RADIX_THREADS;
        keys[j] = 0;
        indices[j] = -1;
        if (position < staged_count) {
            keys[j] = s.staged_key[position];
            indices[j] = s.staged_index[position];
            active |= 1u << j;
        }
    }

    if (staged_count <= need) {
        /* Exactly enough staged: all of them are winners. (Fewer than need cannot happen with
         * k <= 4096, but would be handled the same way: a short fill, -1 padded below.) */
#pragma unroll
        for (uint32_t j = 0; j < RADIX_STAGED_PER_THREAD; j++) {
            const bool take = (active >> j) & 1u;
            const uint32_t slot = warp_claim(take, &s.out_count);
            if (take)
                write_output(p, row_id, slot, indices[j]);
        }
    } else {
        for (uint32_t round = 0; round < 4; round++) {
            const uint32_t shift = 24u - 8u * round;
            /* Nobody reads the histogram here: its last reader, warp 0, finished before the
             * barrier that preceded this point. */
            if (tid < 256u)
                s.histogram[tid] = 0;
            __syncthreads();
#pragma unroll
            for (uint32_t j = 0; j < RADIX_STAGED_PER_THREAD; j++)
                warp_histogram_add(s.histogram, (keys[j] >> shift) & 255u, (active >> j) & 1u);
            __syncthreads();
            if (tid < 32u)
                radix_find_threshold(&s, need);
            __syncthreads();
            const uint32_t threshold = s.threshold;
            const uint32_t need_after = need - s.above;
            const bool all_equal_win = s.equal == need_after;
            const bool last = all_equal_win || round == 3u;
#pragma unroll
            for (uint32_t j = 0; j < RADIX_STAGED_PER_THREAD; j++) {
                const uint32_t byte = (keys[j] >> shift) & 255u;
                const bool in_running = (active >> j) & 1u;
                const bool winner = in_running && (byte > threshold ||
                                                   (byte == threshold && all_equal_win));
                const bool tie = in_running && byte == threshold && last && !all_equal_win;
                const uint32_t ordinal = warp_claim(tie, &s.tie_count);
                const bool take = winner || (tie && ordinal < need_after);
                const uint32_t slot = warp_claim(take, &s.out_count);
                if (take)
                    write_output(p, row_id, slot, indices[j]);
                if (!(in_running && byte == threshold && !last))
                    active &= ~(1u << j);
            }
            if (last)
                break;
            need = need_after;
        }
    }

    __syncthreads();
    const uint32_t filled = s.out_count < k ? s.out_count : k;
    for (uint32_t j = filled + tid; j < k; j += RADIX_THREADS)
        write_output(p, row_id, j, -1);
}

static int radix_supports(const struct gpu_device_info *device, const struct topk_shape *shape,
                          char *reason, size_t reason_bytes)
{
    if (!topk_built_for(device, reason, reason_bytes))
        return 0;
    if (shape->k < 1 || shape->k > RADIX_MAX_K) {
        snprintf(reason, reason_bytes, "k %u outside 1..%u (4096-entry staging; the original is "
                 "fixed at k = 2048)", shape->k, RADIX_MAX_K);
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
    snprintf(reason, reason_bytes, "supported: one 1024-thread CTA per row, %zu B static shared "
             "memory", sizeof(struct radix_shared));
    return 1;
}

static size_t radix_scratch_bytes(const struct gpu_device_info *device,
                                  const struct topk_shape *shape)
{
    (void)device;
    (void)shape;
    return 0;
}

static int radix_launch(const struct topk_problem *problem, const struct gpu_device_info *device,
                        cudaStream_t stream, struct audit_error *err)
{
    char reason[256];
    if (!radix_supports(device, &problem->shape, reason, sizeof(reason)))
        return audit_fail(err, AUDIT_EUNSUPPORTED, "radix: %s", reason);
    if (problem->shape.rows == 0)
        return 0;
    k_radix_topk<<<problem->shape.rows, RADIX_THREADS, 0, stream>>>(*problem);
    const cudaError_t status = cudaGetLastError();
    if (status != cudaSuccess)
        return audit_fail(err, AUDIT_EDEVICE, "radix: launch of %u rows, k %u failed: %s (%s)",
                          problem->shape.rows, problem->shape.k, cudaGetErrorString(status),
                          cudaGetErrorName(status));
    return 0;
}

extern "C" const struct topk_backend topk_backend_radix = {
    "radix",
    "model of sgl-kernel fast_topk_v2: coarse fp16-byte histogram, 4096-entry staging that "
    "silently drops overflow, atomics in arrival order",
    TOPK_NOT_GUARANTEED,
    false, /* exact_set: staging overflow drops candidates */
    false, /* smallest_index_ties */
    false, /* canonical_order */
    false, /* index_ascending */
    "k 1..4096 (the original: 2048 only); rows < 2^31 elements; one 1024-thread CTA per row; "
    "threshold-bin staging 4096 entries, overflow dropped without rescan",
    radix_supports,
    radix_scratch_bytes,
    radix_launch,
};
