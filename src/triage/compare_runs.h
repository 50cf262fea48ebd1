/* compare: N captures of the same requests (N runs of an engine), aligned call by call
 * (docs/TRIAGE.md "compare"). For each call present in every run with one shape: which runs have
 * bit-identical scores, the same exact (CPU reference) selection and the same engine selection;
 * whether each run's engine selection is valid; the largest perturbation of the scores against
 * the boundary gap; and who is at fault. The summary counts calls in seed-experiment terms:
 * "13 comparable calls: 13 with different scores, 0 with identical scores and a different
 * selection; boundary gap min / median".
 *
 * Records are aligned by call identity from their metadata (the keys rank, layer, step, call,
 * request_id, request that are present) when every record of every run has one, else by
 * position; the result says which. A call missing from some run, or of another shape or k, is
 * listed as not comparable with the reason.
 *
 * Each capture is read twice at most: once for every record's digests (hashes of the scores and
 * of both selections, the engine's judgement, the boundary gaps), and again, record by record,
 * only for the calls whose scores differ (the perturbation needs two runs' scores side by side).
 * No JSON here (compare_json.h writes the document); unit-tested in tests/test_compare.c. */
#ifndef DSATOPK_COMPARE_RUNS_H
#define DSATOPK_COMPARE_RUNS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "capture.h"
#include "document_keys.h"
#include "engine_check.h"
#include "error.h"
#include "hash.h"

#define COMPARE_MAX_RUNS 64
#define COMPARE_LABEL_BYTES 256
#define COMPARE_REASON_BYTES AUDIT_ERROR_MESSAGE_BYTES

/* The metadata keys that identify a call, in the order a label names them. */
#define COMPARE_IDENTITY_KEYS { KEY_RANK, KEY_LAYER, KEY_STEP, KEY_CALL, KEY_REQUEST_ID, KEY_REQUEST }
#define COMPARE_IDENTITY_KEY_COUNT 6

/* One record of one run, as the first pass leaves it. */
struct compare_entry {
    uint32_t index;                   /* in its file */
    uint64_t offset;                  /* of its header, to read it again */
    char label[COMPARE_LABEL_BYTES];  /* "layer=3 step=11" (by call) or "record 5" (by position) */
    bool has_identity;                /* some identity key is in the metadata */
    uint32_t rows, k;
    uint8_t window_hash[HASH_BYTES];  /* lengths and row starts */
    uint8_t scores_hash[HASH_BYTES];  /* the scores of every window, bit for bit */
    uint8_t exact_hash[HASH_BYTES];   /* the reference's index sets */
    bool has_engine;
    uint8_t engine_set_hash[HASH_BYTES], engine_order_hash[HASH_BYTES];
    bool engine_judged;               /* false: engine_error says why */
    char engine_error[COMPARE_REASON_BYTES];
    uint64_t engine_wrong_rows;
    struct engine_row_detail engine_first_wrong; /* valid when engine_wrong_rows > 0 */
    double *gaps;                     /* per row: boundary gap, NaN with <= k candidates */
};

struct compare_run {
    const char *path;
    struct compare_entry *entries;
    size_t count, capacity;
    bool read_error;                  /* the file stopped early: error says where */
    char error[AUDIT_ERROR_MESSAGE_BYTES];
};

enum compare_attribution {
    COMPARE_NONE,             /* identical, or the selections absorbed the perturbation */
    COMPARE_UPSTREAM,         /* the scores differ and the exact selection moved with them */
    COMPARE_SELECTION_KERNEL, /* identical scores and engine sets, another order */
    COMPARE_TIE_FLAP,         /* engine sets differ among valid top-k: other boundary ties */
    COMPARE_ENGINE_WRONG,     /* a run's engine selection is not a valid top-k of its scores */
    COMPARE_ATTRIBUTION_COUNT,
};
const char *compare_attribution_name(enum compare_attribution attribution);

/* One call across the runs. Group arrays hold, per run, the group the run falls in (0 for the
 * first run's, numbered in order of first appearance), -1 where the run lacks the call (or, for
 * engine_group, its record lacks the engine's selection). */
struct compare_call {
    char label[COMPARE_LABEL_BYTES];
    int32_t entry[COMPARE_MAX_RUNS];  /* per run: its entry, -1: absent */
    bool comparable;
    char reason[COMPARE_REASON_BYTES]; /* why not */
    int score_group[COMPARE_MAX_RUNS], exact_group[COMPARE_MAX_RUNS];
    int engine_group[COMPARE_MAX_RUNS], engine_order_group[COMPARE_MAX_RUNS];
    int score_groups, exact_groups, engine_groups;
    uint64_t engine_wrong_runs;       /* bit per run */
    bool same_scores_other_selection; /* two runs with identical scores, other engine sets */
    bool same_scores_other_order;     /* ... the same engine set in another order */
    /* Against the first run, over the rows: its smallest boundary gap, the largest |difference|
     * of a score, the largest crossing perturbation (diff's rule) and the rows where it reaches
     * the gap. NaN when not measured. */
    double boundary_gap_min, largest_abs_diff, largest_crossing;
    bool nonfinite_changed;
    uint64_t rows_exceeding_gap;
    enum compare_attribution attribution;
};

struct compare_options {
    const struct engine_contract *engine_contract; /* NULL: each record's metadata, else default */
};

struct compare_result {
    struct compare_run runs[COMPARE_MAX_RUNS];
    size_t run_count;
    bool by_call;                     /* aligned by call identity (else by position) */
    char alignment_reason[COMPARE_REASON_BYTES]; /* why by position */
    struct compare_call *calls;
    size_t call_count;
    /* summary */
    uint64_t comparable, scores_differ, same_scores_other_selection;
    uint64_t attribution[COMPARE_ATTRIBUTION_COUNT];
    double gap_min, gap_median;       /* over the first run's rows of comparable calls; NaN */
    bool read_error;
};

/* Reads paths (2 .. COMPARE_MAX_RUNS), aligns their records and analyses every comparable call.
 * A capture that cannot be read, or stops early, keeps the records before the damage and marks
 * the result read_error (its run's error says where). Returns 0, AUDIT_EUSAGE for a run count
 * out of range, AUDIT_ENOMEM. result is released with compare_result_release in every case. */
int compare_runs(const char *const *paths, size_t count, const struct compare_options *options,
                 struct compare_result *result, struct audit_error *err);
void compare_result_release(struct compare_result *result);

/* The group of each run as one letter (a, b, ... in order of first appearance; '.' absent,
 * '-' no engine selection), for tables: out holds run_count + 1 bytes. */
void compare_groups_text(const int *groups, size_t run_count, char *out);

#endif
