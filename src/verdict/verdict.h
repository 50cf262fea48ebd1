/* The verdict: what each claimed determinism level must show, and the one judge that applies it
 * to what a backend's reps showed (docs/REPORT.md "Verdicts", docs/GATE.md "What each level must
 * show").
 *
 * Two callers fill the same evidence: `run` from its own tallies (src/report/backend_result.c:
 * every row of every rep, the census per row) and `gate` from a report read back
 * (src/gate/gate_judge.c: hashes, counts and row lists). verdict_judge() holds the rule: the same
 * evidence gives the same findings, in the same order, whoever asks. What the evidence cannot
 * tell (a document keeps no per-row census, a baseline no violation counts) changes how a
 * finding is worded and how much can be forgiven, never the rule itself.
 *
 * The words a verdict is written in (backend statuses, verdicts, gate statuses, violation kinds)
 * are defined here too, so that the report writer, the document reader, gate and the HTML page
 * spell them once. No JSON and no CUDA: unit-tested in tests/test_verdict.c. */
#ifndef DSATOPK_VERDICT_H
#define DSATOPK_VERDICT_H

#include <stdbool.h>
#include <stdint.h>

#include "census.h"
#include "checks.h"
#include "engine_check.h"
#include "topk_backends.h"

/* ---- words ---------------------------------------------------------------------------------- */

/* Violation kinds of a report: the contract checks (checks.h), then graph_mismatch (a graph
 * replay whose output differs from the first eager rep). */
#define VIOLATION_GRAPH_MISMATCH ((unsigned)CHECK_KIND_COUNT)
#define VIOLATION_KINDS ((unsigned)CHECK_KIND_COUNT + 1u)
const char *violation_name(unsigned kind); /* "short", ..., "graph_mismatch"; "unknown" */

/* The kinds a staging buffer that drops candidates produces when it overflows: the rows a
 * report calls wrong (predicted_vs_observed.wrong_rows, the table's #wrong). */
#define VIOLATION_WRONG_KINDS ((1u << CHECK_WRONG_SET) | (1u << CHECK_SHORT))

enum backend_status {
    BACKEND_OK,          /* replayed */
    BACKEND_UNSUPPORTED, /* supports() said no: reason */
    BACKEND_UNAVAILABLE, /* no CUDA device or driver: reason */
    BACKEND_ERROR,       /* a CUDA or launch error, out of memory: reason */
    BACKEND_SKIPPED,     /* not attempted: the device was lost earlier in the run (reason) */
    /* Faults contained by the worker process (docs/REPORT.md "Worker processes, faults and
     * interruptions"): */
    BACKEND_HANG,        /* no result within --timeout: the worker was killed (reason) */
    BACKEND_CRASH,       /* the worker died: the signal or exit status is in the reason */
    BACKEND_CUDA_ERROR,  /* a sticky CUDA error (illegal address, ...) poisoned the worker's
                            context: the CUDA message is in the reason */
};
#define BACKEND_STATUS_COUNT ((int)BACKEND_CUDA_ERROR + 1)
const char *backend_status_name(enum backend_status status);
/* The status named name ("ok", "hang", ...); -1 when none is. */
int backend_status_parse(const char *name, enum backend_status *status);

/* What `run` says of one record x backend. */
enum verdict { VERDICT_PASS, VERDICT_FAIL, VERDICT_NOT_RUN };
#define VERDICT_COUNT ((int)VERDICT_NOT_RUN + 1)
const char *verdict_name(enum verdict verdict);
/* The verdict named name ("pass", "fail", "not_run"); -1 when none is. */
int verdict_parse(const char *name, enum verdict *verdict);

/* What `gate` says of one record x backend, in the order its tables show them. */
enum gate_status { GATE_PASS, GATE_FAIL, GATE_TOLERATED, GATE_MISSING };
#define GATE_STATUS_COUNT ((int)GATE_MISSING + 1)
const char *gate_status_name(enum gate_status status);
/* The status named name ("pass", "fail", "tolerated", "missing"); -1 when none is. */
int gate_status_parse(const char *name, enum gate_status *status);

/* The level named name ("not_guaranteed", "run_to_run", "gpu_to_gpu"); -1 when none is. */
int determinism_level_parse(const char *name, enum topk_determinism *level);

/* ---- rules ---------------------------------------------------------------------------------- */

struct verdict_rule {
    enum topk_determinism level;
    bool equal_reference;         /* every eager and graph rep byte-equal to the reference (and,
                                     in gate, to the baseline's output: the same bytes on every
                                     GPU) */
    bool single_output;           /* exactly one distinct output over the eager reps */
    bool same_output_per_model;   /* devices of one GPU model agree (run --devices, gate); the
                                     levels with equal_reference agree through the reference */
    bool graph_equals_eager;      /* graph_mismatch is a failure */
    bool batch_invariant;         /* a batch-dependent row is a failure */
    uint32_t forbidden;           /* (1 << check_kind): a row showing one fails the backend */
    uint32_t forgiven_on_overflow; /* of those, forgiven on rows the census predicts to overflow
                                      the backend's staging, when that staging drops candidates */
};
const struct verdict_rule *verdict_rule_for(enum topk_determinism level);

/* Whether backends of this level must give one output on every device of a `run --devices`
 * pass (same_model: every device is one GPU model). */
bool verdict_devices_must_agree(enum topk_determinism level, bool same_model);

/* The staging buffer of a radix-select family, whose overflow the census predicts. */
struct staging_model {
    const char *backend;     /* backend name */
    const char *name;        /* "radix_4096", ... */
    uint32_t capacity;       /* candidates of the threshold bin that fit */
    bool drops_on_overflow;  /* true: clips silently (wrong sets are its documented failure) */
};
const struct staging_model *staging_model_for(const char *backend_name); /* NULL: none */
bool staging_predicts_overflow(const struct staging_model *model, const struct census_row *row);

/* The verdict a status gives before any rep is looked at: not_run for a backend that did not
 * run here (unsupported, unavailable, skipped), fail for a fault (error, hang, crash,
 * cuda_error), pass for ok (its reps are judged next). */
enum verdict verdict_of_status(enum backend_status status);

/* ---- evidence ------------------------------------------------------------------------------- */

/* Where the evidence comes from, which sets the wording of the findings: `run`'s own tallies,
 * or a report document read back. */
enum verdict_source { VERDICT_FROM_TALLIES, VERDICT_FROM_DOCUMENT };

/* What is known about which rows showing a forgivable kind the census predicts to overflow the
 * backend's staging. */
enum overflow_evidence {
    OVERFLOW_UNKNOWN,     /* no prediction: nothing is forgiven */
    OVERFLOW_PER_ROW,     /* exact, per kind: violations[kind].unpredicted_rows and the first
                             rows of them (tallies with the census) */
    OVERFLOW_WRONG_ROWS,  /* wrong_rows_not_predicted: rows showing wrong_set or short that the
                             census does not predict, all kinds together (a report's eager reps) */
    OVERFLOW_COUNTS,      /* predicted_overflow_rows only: rows showing a kind beyond it are not
                             predicted (a report's graph replays) */
};

/* Rows listed in an unforgiven-rows message at most. */
#define VERDICT_LISTED_ROWS 8u

struct verdict_violation {
    uint64_t rows;               /* rows showing the kind in some rep */
    uint64_t total_rows;         /* summed over the reps */
    uint64_t max_rows_per_rep;   /* tallies only */
    /* OVERFLOW_PER_ROW: rows showing the kind that the census does not predict to overflow the
     * staging, and the first VERDICT_LISTED_ROWS of them. */
    uint64_t unpredicted_rows;
    uint32_t unpredicted_first[VERDICT_LISTED_ROWS];
};

/* The eager reps or the graph replays of one backend. */
struct verdict_reps {
    uint32_t reps;
    /* Outputs compared with the CPU reference: every rep's, or each distinct output's when the
     * document keeps only those (a baseline); how many of them differ from the reference and
     * from the baseline's expected output (when the evidence names one). */
    uint32_t compared;
    bool compared_distinct;
    uint32_t differ_from_reference;
    uint32_t differ_from_baseline;
    uint32_t distinct_outputs, distinct_sets;
    uint64_t flapping_rows;
    bool has_violations;         /* false: a baseline document, which keeps no counts */
    struct verdict_violation violations[VIOLATION_KINDS];
    enum overflow_evidence overflow;
    uint64_t wrong_rows_not_predicted; /* OVERFLOW_WRONG_ROWS */
    uint64_t predicted_overflow_rows;  /* OVERFLOW_COUNTS */
};

/* What one backend's reps showed on one record (or on one device of a --devices pass). */
struct verdict_evidence {
    enum verdict_source source;
    const char *backend;          /* name: selects the staging model */
    enum topk_determinism level;  /* the level judged: the claim, or a policy's */
    bool exact_set;               /* claims an exact index set: never forgiven */
    enum backend_status status;
    const char *reason;           /* of the status; NULL: none given */
    const char *reference_hash;   /* documents: the CPU reference's hash, named in findings */
    const char *baseline_hash;    /* NULL: no baseline output to compare with */
    const char *baseline_origin;  /* "the baseline's radix output", ... */
    struct verdict_reps eager;
    bool graph_requested, graph_ran;
    const char *graph_error;      /* NULL: none */
    struct verdict_reps graph;
    bool batch_requested, batch_ran;
    const char *batch_error;      /* NULL: none */
    uint64_t batch_dependent_rows;
};

/* ---- findings ------------------------------------------------------------------------------- */

enum verdict_check {
    VERDICT_CHECK_STATUS,          /* not ok: the status and its reason */
    VERDICT_CHECK_NO_REPS,         /* ok, but no rep completed */
    VERDICT_CHECK_NO_COUNTS,       /* note: a baseline document has no violation counts */
    VERDICT_CHECK_REFERENCE,       /* an output other than the CPU reference */
    VERDICT_CHECK_BASELINE,        /* an output other than the baseline's */
    VERDICT_CHECK_FLAPPING,        /* more than one distinct output */
    VERDICT_CHECK_VIOLATION,       /* rows showing a violation kind (kind) */
    VERDICT_CHECK_GRAPH_ERROR,     /* graph capture or replay failed */
    VERDICT_CHECK_GRAPH_MISMATCH,  /* graph replays differ from the eager output */
    VERDICT_CHECK_BATCH_ERROR,     /* the batch-invariance test stopped on an error */
    VERDICT_CHECK_BATCH_DEPENDENT, /* rows change with the batch they are in */
    VERDICT_CHECK_ENGINE_WRONG,    /* the engine's own selection is wrong on some rows */
    VERDICT_CHECK_ENGINE_TIES,     /* note: rows where the engine chose other boundary ties */
};

/* The rows of a report that show a finding (gate lists them beside its reasons). */
enum verdict_rows {
    VERDICT_ROWS_NONE,
    VERDICT_ROWS_FLAPPING,          /* the eager reps' flapping_rows */
    VERDICT_ROWS_WRONG_NOT_PREDICTED, /* predicted_vs_observed.wrong_not_predicted_overflow_list */
    VERDICT_ROWS_GRAPH_FLAPPING,    /* the graph replays' flapping_rows */
    VERDICT_ROWS_BATCH_DEPENDENT,   /* batch_invariance.dependent_rows */
    VERDICT_ROWS_ENGINE_WRONG,      /* the engine entry's wrong_rows */
};

/* A finding's text fits here (longer texts are cut). */
#define VERDICT_TEXT_BYTES 900

struct verdict_finding {
    enum verdict_check check;
    bool fails;                   /* counts against the backend */
    bool note;                    /* neither fails nor explains a not-run status: a remark */
    bool graph;                   /* about the graph replays */
    unsigned kind;                /* VIOLATION and GRAPH_MISMATCH: the violation kind */
    enum verdict_rows rows;
    const char *rows_why;         /* the name gate gives those rows ("flapping", ...) */
    char text[VERDICT_TEXT_BYTES];
};

/* Receives each finding in order; the finding lives only for the call. */
typedef void (*verdict_emit_fn)(void *context, const struct verdict_finding *finding);

/* Judges evidence by the rule of evidence->level and hands every finding to emit, in the order
 * a reader should see them. Returns not_run or fail for a status that is not ok (one STATUS
 * finding), else fail when a finding fails and pass otherwise. */
enum verdict verdict_judge(const struct verdict_evidence *evidence, verdict_emit_fn emit,
                           void *context);

/* ---- the engine's own selection ------------------------------------------------------------ */

/* What judging a record's engine_indices showed (engine_check.h), from `run`'s judgement or from
 * a report's engine entry. The rule: a row that is wrong (ENGINE_WRONG_KINDS) fails the entry;
 * tie variants pass and are noted (underdetermined rows the engine resolved its own way). */
struct engine_evidence {
    bool judged;                  /* false: no judgement could be made (reason says why): fail */
    const char *reason;
    const char *contract;         /* "order sorted, tie_break small (metadata)", for the text */
    uint64_t rows;
    uint64_t class_rows[ENGINE_ROW_CLASSES];
    uint64_t kind_rows[CHECK_KIND_COUNT];
    const uint32_t *wrong_rows;   /* the first wrong rows, file row numbers (NULL: none known) */
    uint64_t wrong_rows_listed;
};

/* Judges the engine entry of one record; findings as verdict_judge's (a STATUS finding when not
 * judged, ENGINE_WRONG failing, ENGINE_TIES noting). Returns pass or fail. */
enum verdict verdict_judge_engine(const struct engine_evidence *evidence, verdict_emit_fn emit,
                                  void *context);

/* ---- run's stored verdict ------------------------------------------------------------------- */

#define VERDICT_MAX_REASONS 24
#define VERDICT_REASON_BYTES 320

/* A verdict as `run` records it: the verdict and its reasons (notes prefixed "note: "); reasons
 * past VERDICT_MAX_REASONS are dropped, texts cut to VERDICT_REASON_BYTES. */
struct verdict_result {
    enum verdict verdict;
    unsigned reason_count;
    char reasons[VERDICT_MAX_REASONS][VERDICT_REASON_BYTES];
};

/* verdict_judge into a verdict_result. */
void verdict_judge_into(const struct verdict_evidence *evidence, struct verdict_result *result);
/* verdict_judge_engine into a verdict_result. */
void verdict_judge_engine_into(const struct engine_evidence *evidence,
                               struct verdict_result *result);

#endif
