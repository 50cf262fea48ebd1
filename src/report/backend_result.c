/* A backend's result (backend_result.h), and what its tallies show the verdict. */
#include "backend_result.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void backend_result_init(struct backend_result *result, const struct topk_backend *backend)
{
    memset(result, 0, sizeof(*result));
    result->backend = backend;
    result->status = BACKEND_OK;
}

void backend_result_release(struct backend_result *result)
{
    output_tally_release(&result->eager);
    output_tally_release(&result->graph);
    free(result->batch.dependent);
    result->batch.dependent = NULL;
    result->batch.dependent_count = 0;
}

void backend_result_time_breakdown(const struct backend_result *result,
                                   struct time_breakdown *time)
{
    *time = result->time;
    const struct output_tally *tallies[] = { &result->eager, &result->graph };
    for (size_t i = 0; i < sizeof(tallies) / sizeof(tallies[0]); i++) {
        const struct output_tally *tally = tallies[i];
        if (!tally->beside_reps) {
            time->hash_ms += tally->hash_ms;
            time->check_ms += tally->check_ms;
            continue;
        }
        /* Beside the reps only the wait for the host work is the backend's time; it is shared
         * out like a new output's host work (docs/REPORT.md "time_breakdown_ms"). */
        const double work_ms = tally->hash_ms + tally->check_ms;
        const double hash_share = work_ms > 0 ? tally->hash_ms / work_ms : 0.5;
        time->hash_ms += tally->beside_wait_ms * hash_share;
        time->check_ms += tally->beside_wait_ms * (1.0 - hash_share);
    }
}

void backend_result_set_status(struct backend_result *result, enum backend_status status,
                               const char *format, ...)
{
    va_list args;
    result->status = status;
    va_start(args, format);
    vsnprintf(result->reason, sizeof(result->reason), format, args);
    va_end(args);
}

/* What one tally showed: rows per violation kind (from the per-row flags) and, with the census,
 * the rows of each kind that the census does not predict to overflow the backend's staging. */
static void tally_evidence(const struct output_tally *tally, const struct staging_model *staging,
                           const struct census_row *census_rows, struct verdict_reps *reps)
{
    memset(reps, 0, sizeof(*reps));
    reps->reps = tally->reps;
    reps->compared = tally->reps;
    reps->differ_from_reference = tally->reps - tally->equals_reference_reps;
    reps->distinct_outputs = tally->distinct_outputs;
    reps->distinct_sets = tally->distinct_sets;
    reps->has_violations = true;
    reps->overflow = census_rows ? OVERFLOW_PER_ROW : OVERFLOW_UNKNOWN;
    for (unsigned kind = 0; kind < VIOLATION_KINDS; kind++) {
        reps->violations[kind].total_rows = tally->violations[kind].total_rows;
        reps->violations[kind].max_rows_per_rep = tally->violations[kind].max_rows_per_rep;
    }
    for (uint32_t b = 0; tally->row_flags && b < tally->rows; b++) {
        const uint32_t flags = tally->row_flags[b];
        if (!flags)
            continue;
        const bool unpredicted =
            census_rows && !staging_predicts_overflow(staging, &census_rows[b]);
        for (unsigned kind = 0; kind < (unsigned)CHECK_KIND_COUNT; kind++) {
            struct verdict_violation *v = &reps->violations[kind];
            if (!(flags & (1u << kind)))
                continue;
            v->rows++;
            if (!unpredicted)
                continue;
            if (v->unpredicted_rows < VERDICT_LISTED_ROWS)
                v->unpredicted_first[v->unpredicted_rows] = b;
            v->unpredicted_rows++;
        }
    }
    if (tally->row_reps_differing) {
        reps->flapping_rows = output_tally_flapping_rows(tally);
        /* A graph tally's baseline is the first eager output: its flapping rows are the rows
         * where the graph replays differ from it. */
        if (tally->baseline_external)
            reps->violations[VIOLATION_GRAPH_MISMATCH].rows = reps->flapping_rows;
    }
}

void report_verdict(const struct backend_result *result, const struct census_row *census_rows,
                    struct verdict_result *verdict)
{
    const struct topk_backend *backend = result->backend;
    const struct staging_model *staging = staging_model_for(backend->name);
    struct verdict_evidence evidence = {
        .source = VERDICT_FROM_TALLIES,
        .backend = backend->name,
        .level = backend->level,
        .exact_set = backend->exact_set,
        .status = result->status,
        .reason = result->reason,
        .graph_requested = result->graph_requested,
        .graph_ran = result->graph_ran,
        .graph_error = result->graph_error[0] ? result->graph_error : NULL,
        .batch_requested = result->batch_requested,
        .batch_ran = result->batch.ran,
        .batch_error = result->batch.error[0] ? result->batch.error : NULL,
        .batch_dependent_rows = result->batch.dependent_count,
    };
    if (result->status == BACKEND_OK) {
        tally_evidence(&result->eager, staging, census_rows, &evidence.eager);
        if (result->graph_ran)
            tally_evidence(&result->graph, staging, census_rows, &evidence.graph);
    }
    verdict_judge_into(&evidence, verdict);
}
