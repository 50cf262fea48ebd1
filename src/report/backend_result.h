/* One record x backend of a `run`: its status, the tallies of its eager reps and graph replays,
 * its batch-invariance test and its times, as replay fills them (src/replay/replay.c), and the
 * verdict `run` draws from them (the rule is verdict.h's; this file only says what the tallies
 * showed). No CUDA and no JSON. */
#ifndef DSATOPK_BACKEND_RESULT_H
#define DSATOPK_BACKEND_RESULT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "census.h"
#include "error.h"
#include "output_tally.h"
#include "time_breakdown.h"
#include "topk_backends.h"
#include "verdict.h"

/* --batch-invariance: one row tested in several batch contexts (alone, then shuffled batches). */
struct batch_row_result {
    uint32_t row;
    uint32_t contexts_differing; /* contexts whose output row differs from the first eager rep */
    uint32_t contexts_set_differing; /* ... whose index set differs */
};

struct batch_invariance_result {
    bool ran;
    char error[AUDIT_ERROR_MESSAGE_BYTES]; /* non-empty: it stopped on this error */
    uint32_t trials;          /* shuffled batch layouts of the record's rows */
    uint32_t contexts;        /* contexts per row: 1 (alone) + trials */
    uint32_t rows_tested;
    uint64_t launches;
    struct batch_row_result *dependent; /* rows with contexts_differing > 0 */
    uint32_t dependent_count;
    uint32_t set_dependent_count;
};

struct backend_result {
    const struct topk_backend *backend;
    enum backend_status status;
    char reason[AUDIT_ERROR_MESSAGE_BYTES];
    size_t scratch_bytes;
    struct time_breakdown time;  /* filled by src/replay/replay.c, hash_ms and check_ms excepted */
    bool gpu_prefilter;          /* reps were recognised by their GPU row hashes when possible */
    uint32_t outputs_copied;     /* eager and graph reps whose outputs were copied back */
    struct output_tally eager;
    bool graph_requested, graph_ran;
    char graph_error[AUDIT_ERROR_MESSAGE_BYTES]; /* non-empty: capture or replay failed */
    struct output_tally graph;                   /* baseline: the first eager output */
    bool batch_requested;
    struct batch_invariance_result batch;
};

void backend_result_init(struct backend_result *result, const struct topk_backend *backend);
void backend_result_release(struct backend_result *result);
/* result->time with the eager and graph tallies' hash_ms and check_ms folded in. */
void backend_result_time_breakdown(const struct backend_result *result,
                                   struct time_breakdown *time);
/* Sets status and a printf-style reason. */
void backend_result_set_status(struct backend_result *result, enum backend_status status,
                               const char *format, ...) __attribute__((format(printf, 3, 4)));

/* Judges result by its backend's claimed level (verdict_judge over what its tallies showed).
 * census_rows: per row of the record (NULL: no overflow is forgiven). */
void report_verdict(const struct backend_result *result, const struct census_row *census_rows,
                    struct verdict_result *verdict);

#endif
