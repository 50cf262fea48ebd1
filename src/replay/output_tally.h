/* The outputs of the reps of one record x backend, as replay adds them one at a time
 * (src/replay/replay.c, src/replay/tally_queue.c): hashes, distinct outputs and sets, violation
 * totals and per-rep maxima, flapping rows compared with a baseline output, times, and the host
 * work each new distinct output costs (docs/REPORT.md "What a replay does").
 *
 * Host code with no CUDA calls: unit-tested on hand-made outputs (tests/test_report.c). The
 * report writer (src/report/report.c) and run's verdict (src/report/backend_result.c) read a
 * finished tally; nothing here judges or writes JSON. */
#ifndef DSATOPK_OUTPUT_TALLY_H
#define DSATOPK_OUTPUT_TALLY_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "checks.h"
#include "error.h"
#include "hash.h"
#include "verdict.h"

struct violation_tally {
    uint64_t total_rows;       /* sum over reps of the rows showing the kind */
    uint64_t max_rows_per_rep; /* most rows showing it in one rep */
};

/* One distinct output (by the hash of its indices and of its raw indices): checked once. */
struct distinct_output {
    uint8_t hash[HASH_BYTES];
    uint8_t raw_hash[HASH_BYTES];  /* zero when the record has no page table */
    uint8_t set_hash[HASH_BYTES];
    struct check_counts counts;    /* zero when the tally runs without checks */
    bool equals_reference;
    uint32_t reps_seen;
    /* The GPU pre-filter's per-row hashes of this output (kernels/include/output_hash.h), rows of
     * them, and a digest of those for a quick first comparison; NULL when never given or over the
     * tally's budget. */
    uint64_t *row_hashes;
    uint64_t row_hash_digest;
    /* Rows differing from the tally's baseline, with positional and set differences. */
    uint32_t differing_count;
    uint32_t *differing_rows;
    uint32_t *differing_positions; /* slots whose value differs */
    uint32_t *differing_indices;   /* indices selected here and absent from the baseline row */
};

/* The reps of one record x backend (or its graph replays). */
struct output_tally {
    uint32_t rows, k;
    uint32_t reps, reps_capacity;
    uint8_t (*rep_hash)[HASH_BYTES];
    uint8_t (*rep_set_hash)[HASH_BYTES];
    uint32_t *rep_distinct;         /* per rep: index into distinct[] */
    uint32_t *rep_rows_differing;   /* per rep: rows differing from the baseline */
    double *rep_time_us;            /* per rep: kernel time, NaN when not timed */
    struct distinct_output *distinct;
    uint32_t distinct_count, distinct_capacity;
    uint32_t distinct_outputs;      /* distinct output hashes */
    uint32_t distinct_sets;         /* distinct set hashes */
    uint32_t equals_reference_reps;
    struct violation_tally violations[VIOLATION_KINDS];
    uint32_t *row_flags;            /* per row: union over reps of (1 << check_kind) */
    /* Flapping: each row compared with the same row of the baseline (the first output added, or
     * an external one given at init, e.g. the first eager rep for graph replays). */
    int32_t *baseline;              /* rows * k, owned copy */
    int32_t *baseline_sorted;       /* rows * k, each row sorted ascending */
    /* The baseline's set hash, known when the baseline was this tally's first output: an output
     * whose every row selects the baseline row's set (same indices, any order: a kernel whose
     * order flaps) has the same set hash, so its SHA-256 stream over the sorted rows is skipped. */
    uint8_t baseline_set_hash[HASH_BYTES];
    bool baseline_set_hash_known;
    /* Likewise the baseline's check flags per row (rows entries, with the work buffers): a row
     * with the baseline row's index multiset needs only its order judged (check_reuse). */
    uint32_t *baseline_row_flags;
    bool baseline_row_flags_known;
    bool baseline_external;
    uint32_t *row_reps_differing;
    uint32_t *row_reps_set_differing;
    uint32_t *row_max_positions_differing;
    uint32_t *row_max_indices_differing;
    int32_t *sort_scratch;          /* k entries: the calling thread's row-sort scratch */
    /* The host work of the new distinct output being added (output_tally.c "the host work of a
     * new distinct output"), kept from one output to the next; allocated with the first output. */
    int32_t *work_sorted;           /* rows * k: its rows that differ from the baseline, sorted */
    const int32_t **work_sorted_rows; /* per row: its sorted row (work_sorted or baseline_sorted) */
    uint32_t *work_positions;       /* per row: slots differing from the baseline (0: same row) */
    uint32_t *work_indices;         /* per row: indices selected and absent from the baseline */
    uint32_t *work_row_flags;       /* per row: its contract-check flags */
    /* Host work, for time_breakdown_ms and host_work (docs/REPORT.md): milliseconds spent on
     * SHA-256 (outputs, raw outputs, index sets, with the row sorts) and on the checks and
     * baseline comparison of new distinct outputs (run on several threads at once, the phase's
     * wall time is split between the two in proportion to their threads' time); reps whose full
     * output was SHA-256'd; distinct outputs checked in full; reps counted from their GPU row
     * hashes alone. */
    double hash_ms, check_ms;
    uint32_t outputs_hashed, outputs_checked, gpu_hash_matches;
    size_t row_hash_bytes;          /* kept in distinct[].row_hashes, at most the budget */
    /* Set by tally_queue.c when the outputs were added on its thread beside the reps: then
     * hash_ms and check_ms are that thread's time, and beside_wait_ms is what the reps waited
     * for it (the part time_breakdown_ms shows). */
    bool beside_reps;
    double beside_wait_ms;
};

/* Row-hash vectors a tally keeps to recognise repeated outputs; past this, new outputs are still
 * checked in full but no longer recognised on the GPU (the pre-filter then saves nothing). */
#define OUTPUT_TALLY_ROW_HASH_BUDGET_BYTES ((size_t)64 << 20)

/* The host work of a new distinct output runs on host_threads_count(rows * k, this) threads
 * (host_threads.h): an output of fewer indices per thread than this would spend more starting
 * threads (tens of microseconds each) than they save. */
#define OUTPUT_TALLY_INDICES_PER_THREAD ((size_t)16384)

/* reps_capacity: how many reps will be added (arrays are sized once). baseline: NULL to use the
 * first output added, else rows * k indices copied now. */
int output_tally_init(struct output_tally *tally, uint32_t rows, uint32_t k, uint32_t reps_capacity,
                      const int32_t *baseline, struct audit_error *err);
/* Adds one rep's output (rows * k, translated when paged) and its raw indices (NULL without a
 * page table). checks: NULL to skip the contract checks (counts stay zero); reference: rows * k
 * (NULL: equals_reference stays false). time_us: NaN when not timed. The host work of a new
 * distinct output runs on threads started and joined within the call (OUTPUT_TALLY_INDICES_PER_
 * THREAD below); what is recorded does not depend on how many. */
int output_tally_add(struct output_tally *tally, const int32_t *out, const int32_t *raw_out,
                     double time_us, struct check_context *checks,
                     const struct check_claims *claims, const int32_t *reference,
                     struct audit_error *err);
/* The same, remembering row_hashes (tally->rows values from the GPU pre-filter, or NULL) for the
 * output's distinct entry, so that output_tally_add_if_known can recognise it later. */
int output_tally_add_hashed(struct output_tally *tally, const int32_t *out, const int32_t *raw_out,
                            const uint64_t *row_hashes, double time_us,
                            struct check_context *checks, const struct check_claims *claims,
                            const int32_t *reference, struct audit_error *err);
/* The pre-filter: when a distinct output already added with output_tally_add_hashed has exactly
 * these row hashes, counts the rep as that output (its SHA-256, set hash, checks and row
 * comparison are reused: the tally ends as if the output had been added) and returns true.
 * Returns false, changing nothing, for row hashes never seen, or when the tally is full (the
 * caller then adds the output in full and gets the usual error). */
bool output_tally_add_if_known(struct output_tally *tally, const uint64_t *row_hashes,
                               double time_us);
/* Counts one more rep as the distinct output distinct (an index into tally->distinct): what
 * output_tally_add_if_known does once it has found the output (src/replay/tally_queue.c finds it by
 * itself). False, changing nothing, when the tally is full or there is no such output. */
bool output_tally_add_repeat(struct output_tally *tally, uint32_t distinct, double time_us);
void output_tally_release(struct output_tally *tally);
/* Rows that differ from the baseline in at least one rep (bytes), and whose set differs. */
uint32_t output_tally_flapping_rows(const struct output_tally *tally);
uint32_t output_tally_set_flapping_rows(const struct output_tally *tally);

/* Median, min and max of the timed reps; false when none was timed. */
bool output_tally_times(const struct output_tally *tally, double *median_us, double *min_us,
                        double *max_us);

#endif
