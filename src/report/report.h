/* What `run` measured, turned into verdicts, a JSON report and a terminal table
 * (docs/REPORT.md).
 *
 * Everything here is host code with no CUDA calls, so it is unit-tested on hand-made outputs:
 * - struct output_tally accumulates the outputs of the reps of one record x backend (hashes,
 *   distinct outputs and sets, violation totals and per-rep maxima, flapping rows, times);
 *   src/replay/replay.c feeds it one rep at a time;
 * - report_verdict() judges a backend_result by the level its backend claims, through the one
 *   rule table (verdict_rule_for, staging_model_for) that `gate` reuses;
 * - report_* build the report object record by record, so a run that stops early still writes
 *   everything it measured. */
#ifndef DSATOPK_REPORT_H
#define DSATOPK_REPORT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include <cjson/cJSON.h>

#include "topk_backends.h"
#include "capture.h"
#include "census.h"
#include "checks.h"
#include "error.h"
#include "hash.h"

#define REPORT_SCHEMA "dsatopk-audit/report"
#define REPORT_SCHEMA_VERSION 1

/* Violation kinds of the report: the contract checks, then graph_mismatch (a graph replay whose
 * output differs from the first eager rep). */
#define REPORT_GRAPH_MISMATCH ((unsigned)CHECK_KIND_COUNT)
#define REPORT_VIOLATION_KINDS ((unsigned)CHECK_KIND_COUNT + 1u)
const char *report_violation_name(unsigned kind);

/* Row lists in the JSON (flapping rows, unexpected rows, batch-dependent rows) stop here; the
 * totals are always complete. */
#define REPORT_MAX_LISTED_ROWS 4096u

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
    /* The GPU pre-filter's per-row hashes of this output (kernels/output_hash.h), rows of them,
     * and a digest of those for a quick first comparison; NULL when never given or over the
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
    struct violation_tally violations[REPORT_VIOLATION_KINDS];
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
    /* The host work of the new distinct output being added (src/report/report.c "output_work"), kept
     * from one output to the next; allocated with the first output. */
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
    /* Set by src/replay/tally_queue.c when the outputs were added on its thread beside the reps: then
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

enum backend_status {
    BACKEND_OK,          /* replayed */
    BACKEND_UNSUPPORTED, /* supports() said no: reason */
    BACKEND_UNAVAILABLE, /* no CUDA device or driver: reason */
    BACKEND_ERROR,       /* a CUDA or launch error, out of memory: reason */
    BACKEND_SKIPPED,     /* not attempted: the device was lost earlier in the run (reason) */
    /* Faults contained by the worker process (docs/RELIABILITY.md "Isolation"): */
    BACKEND_HANG,        /* no result within --timeout: the worker was killed (reason) */
    BACKEND_CRASH,       /* the worker died: the signal or exit status is in the reason */
    BACKEND_CUDA_ERROR,  /* a sticky CUDA error (illegal address, ...) poisoned the worker's
                            context: the CUDA message is in the reason */
};
#define BACKEND_STATUS_COUNT ((int)BACKEND_CUDA_ERROR + 1)
const char *backend_status_name(enum backend_status status);
/* The status named name ("ok", "hang", ...); -1 when none is. */
int backend_status_parse(const char *name, enum backend_status *status);

/* --batch-invariance: one row tested in several batch contexts (alone, then shuffled batches). */
struct batch_row_result {
    uint32_t row;
    uint32_t contexts_differing;     /* contexts whose output row differs from the first eager rep */
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

/* Where one record x backend's time went, in milliseconds (docs/REPORT.md "time_breakdown_ms").
 * Host phases are CLOCK_MONOTONIC intervals that do not overlap (hash_ms and check_ms split the
 * wall time of the threaded work of new outputs between them); kernel_ms is the CUDA-event
 * time of the timed launches, which lies inside their host wait (launch_overhead_ms is that wait
 * minus kernel_ms). hash_ms and check_ms live in the tallies until
 * backend_result_time_breakdown() folds them in; "other" is never stored: it is what total_ms
 * leaves (time_breakdown_other_ms). */
struct time_breakdown {
    double total_ms;            /* the replay of this record x backend in its worker */
    double device_open_ms;      /* the worker's CUDA start, streams, events, noise buffers */
    double setup_ms;            /* record upload, buffers, warm-up launch, graph capture */
    double kernel_ms;           /* CUDA-event time of the timed launches (eager and graph) */
    double launch_overhead_ms;  /* host wait of the timed launches minus kernel_ms */
    double noise_wait_ms;       /* waiting for each rep's noise burst to finish */
    double row_hash_ms;         /* GPU row hashes: kernel and copying rows x 8 bytes back */
    double copy_ms;             /* outputs copied back to the host */
    double hash_ms;             /* SHA-256 of outputs, raw outputs and index sets, row sorts */
    double check_ms;            /* contract checks and baseline comparison of new outputs */
    double dump_ms;             /* --dump-outputs files */
    double batch_invariance_ms; /* the whole --batch-invariance test */
};

/* CLOCK_MONOTONIC in milliseconds (the clock of every host phase). */
double report_monotonic_ms(void);
/* total_ms minus every part, never below 0 (rounding, or a part measured on another clock). */
double time_breakdown_other_ms(const struct time_breakdown *time);
/* Adds every part of addend to sum. */
void time_breakdown_add(struct time_breakdown *sum, const struct time_breakdown *addend);
/* The object "time_breakdown_ms" of a backend entry: every part, other_ms and total_ms,
 * rounded to the microsecond. */
cJSON *time_breakdown_json(const struct time_breakdown *time);
/* Reads such an object back (missing or non-numeric fields read 0). */
void time_breakdown_from_json(const cJSON *json, struct time_breakdown *time);

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

/* ---- verdict rules: the one place that says what each claimed level must show ------------- */

struct verdict_rule {
    enum topk_determinism level;
    bool equal_reference;         /* every eager and graph rep byte-equal to the reference */
    bool single_output;           /* exactly one distinct output over the eager reps */
    bool graph_equals_eager;      /* graph_mismatch is a failure */
    bool batch_invariant;         /* a batch-dependent row is a failure */
    uint32_t forbidden;           /* (1 << check_kind): a row showing one fails the backend */
    uint32_t forgiven_on_overflow; /* of those, forgiven on rows the census predicts to overflow
                                      the backend's staging, when that staging drops candidates */
};
const struct verdict_rule *verdict_rule_for(enum topk_determinism level);

/* The staging buffer of a radix-select family, whose overflow the census predicts. */
struct staging_model {
    const char *backend;     /* backend name */
    const char *name;        /* "radix_4096", ... */
    uint32_t capacity;       /* candidates of the threshold bin that fit */
    bool drops_on_overflow;  /* true: clips silently (wrong sets are its documented failure) */
};
const struct staging_model *staging_model_for(const char *backend_name); /* NULL: none */
bool staging_predicts_overflow(const struct staging_model *model, const struct census_row *row);

enum verdict { VERDICT_PASS, VERDICT_FAIL, VERDICT_NOT_RUN };
const char *verdict_name(enum verdict verdict);

#define VERDICT_MAX_REASONS 24
#define VERDICT_REASON_BYTES 320

struct verdict_result {
    enum verdict verdict;
    unsigned reason_count;
    char reasons[VERDICT_MAX_REASONS][VERDICT_REASON_BYTES];
};

/* Judges result by its backend's claimed level. census_rows: per row of the record (NULL: no
 * overflow is forgiven). */
void report_verdict(const struct backend_result *result, const struct census_row *census_rows,
                    struct verdict_result *verdict);

/* ---- what goes into the report -------------------------------------------------------------- */

struct run_context {
    const char *tool_version;   /* "0.1.0" */
    const char *git_revision;
    const char *version_string; /* cli_version() */
    const char *command_line;
    char utc_time[32];
    char host[256];
    bool device_available;
    struct gpu_device_info device;
    char device_unavailable_reason[AUDIT_ERROR_MESSAGE_BYTES];
    unsigned long long emulate_smem_per_sm; /* 0: none */
    const char *noise;
    uint32_t reps;
    uint64_t seed;
    bool graph, batch_invariance;
    uint32_t k_override; /* 0: each record's own k */
    const char *const *backends;
    size_t backend_count;
    bool gpu_prefilter;  /* GPU row hashes recognise repeated outputs (off: --no-gpu-prefilter,
                            --dump-outputs) */
};

/* Fills utc_time and host from the running system. */
void run_context_fill_time_and_host(struct run_context *context);

/* Where the main process's time for one record went, in milliseconds (records[].time_breakdown_ms):
 * the CPU side that runs once per record, and the wall time of its backends' workers. */
struct record_time {
    double reference_ms; /* CPU reference, check preparation and the reference hashes */
    double census_ms;
    double backends_ms;  /* waiting for the workers (their entries' total_ms, plus fork and IPC) */
    double total_ms;     /* the record from its selection to its entry in the report */
};

/* One record of a capture file and its backends, as the report shows it. */
struct record_result {
    const char *file;
    /* The (possibly narrowed) record that was replayed; its index, file_offset, payload_sha256
     * and compressed flag are those of the record in the file. */
    const struct capture_record *record;
    uint32_t k;                          /* effective k */
    const uint32_t *source_rows;         /* per replayed row: its row in the file (NULL: same) */
    uint8_t reference_hash[HASH_BYTES];
    uint8_t reference_set_hash[HASH_BYTES];
    cJSON *census;                       /* borrowed; report_add_record copies it */
    const struct census_row *census_rows;
    struct backend_result *backends;
    size_t backend_count;
    struct record_time time;             /* all zero: not measured */
};

/* Backend names whose times the table's summary lists one by one; more are in the total only. */
#define REPORT_TIME_BACKENDS 64

struct backend_time_total {
    char name[64];
    struct time_breakdown time;
};

/* The report being built. */
struct run_report {
    cJSON *root;
    cJSON *records;
    cJSON *input_errors;
    /* summary counters */
    uint64_t record_count, runs, pass, fail, not_run;
    uint64_t status_counts[BACKEND_STATUS_COUNT];
    cJSON *by_backend;
    /* The time_breakdown_ms of every entry counted, in total and per backend name (the table's
     * summary; not in the JSON, whose entries carry their own). */
    struct time_breakdown time_total;
    struct backend_time_total time_by_backend[REPORT_TIME_BACKENDS];
    size_t time_backend_count;
    struct record_time record_time_total; /* the records' own times, summed */
};

int report_begin(struct run_report *report, const struct run_context *context,
                 struct audit_error *err);
/* Judges every backend of the record and appends the record to the report; verdicts (one per
 * backend, may be NULL) receive the judgements for the caller's table. */
int report_add_record(struct run_report *report, const struct record_result *record,
                      struct verdict_result *verdicts, struct audit_error *err);
/* kind: "corrupt", "truncated", "io", "selection". record and byte_offset < 0: unknown (the
 * file as a whole). */
int report_add_input_error(struct run_report *report, const char *file, int64_t record,
                           int64_t byte_offset, const char *kind, const char *message,
                           struct audit_error *err);
/* Adds complete, stop_reason (NULL when complete), exit_code and the summary. */
int report_finish(struct run_report *report, bool complete, const char *stop_reason,
                  int exit_code, struct audit_error *err);
void report_release(struct run_report *report);

/* The record's JSON object alone (report_add_record appends it). */
cJSON *report_record_json(const struct record_result *record,
                          const struct verdict_result *verdicts);

/* Records whose backends ran elsewhere (`run` replays each backend in a worker process, which
 * judges it and sends its entry back as JSON text):
 * - report_backend_json: one backend's entry of record's "backends" list, judged by verdict
 *   (record's own backends and backend_count are not used);
 * - report_record_json_entries: the record's object with the given entries as its "backends"
 *   (each entry is moved in and its slot set to NULL; record->backend_count must be 0);
 * - report_add_record_entries: appends that object and counts each entry's status and verdict
 *   in the summary, as report_add_record does. */
cJSON *report_backend_json(const struct record_result *record, const struct backend_result *result,
                           const struct verdict_result *verdict);
cJSON *report_record_json_entries(const struct record_result *record, cJSON **entries,
                                  size_t count);
int report_add_record_entries(struct run_report *report, const struct record_result *record,
                              cJSON **entries, size_t count, struct audit_error *err);
/* Adds an entry's time_breakdown_ms to the table's time totals (report_add_record and
 * report_add_record_entries do it; `run --devices` calls it for the later devices' entries). */
void report_count_time(struct run_report *report, const char *backend_name,
                       const struct time_breakdown *time);

/* ---- terminal table ------------------------------------------------------------------------- */

void report_table_header(FILE *out);
void report_table_lines(FILE *out, const struct record_result *record,
                        const struct verdict_result *verdicts);
void report_table_summary(FILE *out, const struct run_report *report, const char *report_path);
/* "# time LABEL: total T ms = kernel K (P%) + ..." for one breakdown (report_table_summary prints
 * it for all backends and for each backend name). */
void report_time_line(FILE *out, const char *label, const struct time_breakdown *time);

#endif
