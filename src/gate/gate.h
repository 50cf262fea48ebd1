/* Reports compared across machines: `gate` (a report against a golden baseline, by the level
 * each backend claims, with a policy file), the baseline `run --baseline-out` writes, `merge`
 * (shard reports joined into one) and the cross-device block of `run --devices`
 * (docs/GATE.md, docs/REPORT.md).
 *
 * Everything here reads and writes JSON (cJSON); nothing calls CUDA, so every branch is
 * unit-tested on hand-made reports (tests/test_gate.c). The verdict rules are those of `run`
 * (verdict_rule_for, staging_model_for in src/report/report.c), applied to what a report recorded:
 * gate never has the outputs themselves, only their hashes, counts and row lists. */
#ifndef DSATOPK_GATE_H
#define DSATOPK_GATE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <cjson/cJSON.h>

#include "error.h"
#include "report.h"

#define GATE_SCHEMA "dsatopk-audit/gate"
#define GATE_SCHEMA_VERSION 1
#define BASELINE_SCHEMA "dsatopk-audit/baseline"
#define BASELINE_SCHEMA_VERSION 1
#define POLICY_SCHEMA "dsatopk-audit/policy"
#define POLICY_SCHEMA_VERSION 1

/* JSON paths in messages ("$.records[3].backends[1].reps") stop at this length. */
#define GATE_PATH_BYTES 160

/* ---- reports and baselines, read and checked ------------------------------------------------ */

/* The eager reps or the graph replays of one backend. Hash strings point into the document. */
struct gate_tally {
    uint32_t reps;
    const char **rep_hashes;          /* reps entries; NULL in a baseline (only distinct ones) */
    const char **distinct_hashes;     /* distinct output hashes in order of first appearance */
    uint32_t distinct_count;
    uint32_t equals_reference_reps;
    bool has_violations;              /* false in a baseline */
    uint64_t violation_rows[REPORT_VIOLATION_KINDS]; /* rows showing the kind in some rep */
    uint64_t violation_total_rows[REPORT_VIOLATION_KINDS];
    uint64_t flapping_rows_total;
    const cJSON *flapping_rows;       /* the report's list, or NULL */
};

struct gate_device_identity {
    int64_t device_index, ordinal;    /* -1 when absent */
    const char *name;                 /* NULL when absent */
    int64_t sm_count;
    const char *compute_capability;
    uint64_t smem_per_sm_bytes;
};

struct gate_backend {
    char path[GATE_PATH_BYTES];
    const char *name;
    enum topk_determinism level;      /* claimed */
    bool exact_set;                   /* claims.exact_set (false when absent) */
    enum backend_status status;
    const char *reason;               /* NULL for ok */
    enum verdict verdict;             /* the report's own verdict */
    const cJSON *verdict_reasons;     /* array or NULL */
    struct gate_tally eager;
    /* predicted_vs_observed (reports only) */
    bool has_prediction;
    uint64_t predicted_overflow_rows, wrong_rows, wrong_not_predicted_overflow;
    uint64_t set_flapping_unexplained;
    const cJSON *wrong_not_predicted_overflow_list, *set_flapping_unexplained_list;
    /* --graph */
    bool has_graph, graph_ran;
    const char *graph_error;
    struct gate_tally graph;
    /* --batch-invariance */
    bool has_batch, batch_ran;
    const char *batch_error;
    uint64_t batch_dependent_rows;
    const cJSON *batch_dependent_list;
    /* run --devices: one entry per device (per_device[]), each judged like the backend. */
    struct gate_device_identity device;
    struct gate_backend *per_device;
    size_t per_device_count;
};

struct gate_record {
    char path[GATE_PATH_BYTES];
    const char *file;
    uint32_t index;
    int64_t global_index;             /* -1 when absent */
    const char *payload_sha256;
    uint32_t k, rows;
    const cJSON *source_rows;         /* array or NULL */
    const char *reference_output_sha256;
    struct gate_backend *backends;
    size_t backend_count;
};

struct gate_document {
    char *path;
    cJSON *root;                      /* owned */
    bool is_baseline;                 /* schema dsatopk-audit/baseline (else a full report) */
    bool complete;
    const char *stop_reason;
    const cJSON *context;
    const cJSON *input_errors;        /* array or NULL */
    struct gate_record *records;
    size_t record_count;
};

/* Checks and indexes root (a report or a baseline); takes ownership of root even on failure.
 * AUDIT_EDATA names path and the JSON path of the first field at fault. */
int gate_document_parse(struct gate_document *document, const char *path, cJSON *root,
                        struct audit_error *err);
/* Reads path ("-": stdin is not accepted) and parses it. */
int gate_document_load(struct gate_document *document, const char *path, struct audit_error *err);
void gate_document_release(struct gate_document *document);

/* ---- policy --------------------------------------------------------------------------------- */

/* What a policy may allow beyond a level's rule: the violation kinds of the report (bit
 * 1 << kind, REPORT_VIOLATION_KINDS of them), then these. */
enum gate_allow_extra {
    GATE_ALLOW_FLAPPING = REPORT_VIOLATION_KINDS, /* more than one distinct output */
    GATE_ALLOW_REFERENCE_MISMATCH,                /* an output other than the CPU reference */
    GATE_ALLOW_BASELINE_MISMATCH,                 /* an output other than the baseline's */
    GATE_ALLOW_DEVICE_MISMATCH,                   /* devices of one model disagree (--devices) */
    GATE_ALLOW_BATCH_DEPENDENT,                   /* a row changes with its batch */
    GATE_ALLOW_NOT_RUN,                           /* not run here, ok in the baseline */
    GATE_ALLOW_COUNT,
};
#define GATE_ALLOW_BIT(item) (1u << (item))
const char *gate_allow_name(unsigned item);

enum gate_rule_source { GATE_RULE_BACKENDS, GATE_RULE_RECORDS, GATE_RULE_KNOWN_FAILURES };

/* One entry of the policy: which record x backend it concerns, and what it changes. */
struct gate_rule {
    char origin[GATE_PATH_BYTES];     /* "policy.backends.radix", "policy.records[2]", ... */
    enum gate_rule_source source;
    /* selector: NULL / negative fields match anything */
    const char *file;                 /* the record's path, or its base name when it has no '/' */
    int64_t index;
    const char *payload_sha256;
    const char *backend;
    /* effect */
    bool has_level;
    enum topk_determinism level;
    uint32_t allow;                   /* GATE_ALLOW_BIT(...) */
    const char *tolerate;             /* non-NULL: a failure here is known: tolerated */
    const char *match;                /* tolerate only if every failing reason contains it */
    const char *until;                /* NULL or "YYYY-MM-DD[THH:MM:SSZ]": expiry */
    uint64_t times_used;              /* failures it tolerated (for "unused" notes) */
};

struct gate_policy {
    char *path;
    cJSON *root;                      /* owned */
    struct gate_rule *rules;
    size_t rule_count;
    bool allow_missing;               /* missing records/backends do not fail */
    bool allow_incomplete;            /* an incomplete report (complete: false) does not fail */
    bool allow_input_errors;          /* a report's input_errors do not fail */
};

/* An empty policy (what gate uses without --policy). */
void gate_policy_init(struct gate_policy *policy);
/* Checks root against schema dsatopk-audit/policy v1; takes ownership of root. */
int gate_policy_parse(struct gate_policy *policy, const char *path, cJSON *root,
                      struct audit_error *err);
int gate_policy_load(struct gate_policy *policy, const char *path, struct audit_error *err);
void gate_policy_release(struct gate_policy *policy);

/* ---- judging -------------------------------------------------------------------------------- */

enum gate_status { GATE_PASS, GATE_FAIL, GATE_TOLERATED, GATE_MISSING };
const char *gate_status_name(enum gate_status status);

struct gate_counts {
    uint64_t entries, pass, fail, tolerated, missing;
    uint64_t failing_reports;         /* reports with a report-level failure */
};

struct gate_options {
    /* The time "until" is compared with, "YYYY-MM-DDTHH:MM:SSZ" (gate --now, else the clock). */
    char now[32];
};

/* Judges one record x backend of report against the baseline. baseline_record/baseline_backend:
 * NULL when the baseline lacks them; report_backend: NULL when the report lacks it (missing),
 * report_record too when the whole record is missing. Returns the entry object (file, index,
 * backend, level, status, reasons, notes, rows, ...) or NULL when out of memory; *status
 * receives its status (a missing entry under allow_missing is GATE_MISSING, not counted as a
 * failure by gate_entry_fails). */
cJSON *gate_judge_entry(const struct gate_record *baseline_record,
                        const struct gate_backend *baseline_backend,
                        const struct gate_record *report_record,
                        const struct gate_backend *report_backend, struct gate_policy *policy,
                        const struct gate_options *options, enum gate_status *status);

/* Whether an entry of this status fails the gate under policy. */
bool gate_entry_fails(enum gate_status status, const struct gate_policy *policy);

/* Judges every record x backend of report (matched with the baseline's records by payload
 * SHA-256, file base name and record index; backends by name) and the report as a whole
 * (complete, input errors). Returns the per-report verdict object or NULL (out of memory);
 * counts accumulate. */
cJSON *gate_judge_report(const struct gate_document *baseline, const struct gate_document *report,
                         struct gate_policy *policy, const struct gate_options *options,
                         struct gate_counts *counts);

/* The whole verdict document: schema dsatopk-audit/gate v1. context: borrowed, copied in. */
int gate_verdict(const struct gate_document *baseline, const struct gate_document *reports,
                 size_t report_count, struct gate_policy *policy,
                 const struct gate_options *options, const cJSON *context, cJSON **verdict,
                 struct gate_counts *counts, struct audit_error *err);

/* ---- baseline ------------------------------------------------------------------------------- */

/* The baseline subset of a report (schema dsatopk-audit/baseline v1): context, and per record
 * x backend the status, level, reps and distinct output and set hashes (docs/GATE.md). */
int gate_baseline_from_report(const cJSON *report, const char *report_name, cJSON **baseline,
                              struct audit_error *err);

/* ---- summaries, merge, cross-device --------------------------------------------------------- */

/* The `summary` object of a report, recomputed from its records and input errors (what
 * report_finish writes from its counters). */
cJSON *gate_report_summary(const cJSON *records, const cJSON *input_errors);

/* Joins shard reports (run --shard I/N) into one: records in global order, input errors without
 * duplicates, summary recomputed, context of the lowest shard plus a shards[] list, cross_device
 * entries joined. Refuses (AUDIT_EDATA, naming the files) reports of another schema or version,
 * reports that are not shards, shards of different counts or configurations, and overlapping
 * shards. paths name roots in messages; roots stay the caller's. missing_shards receives how many
 * of the N shards were not given (the merged report is then incomplete). */
int gate_merge_reports(const char *const *paths, const cJSON *const *roots, size_t count,
                       cJSON **merged, uint32_t *missing_shards, struct audit_error *err);

/* The cross_device block of `run --devices` from records whose backends carry per_device[]
 * entries (device_index, ordinal, status, output hashes). devices: array of the device objects
 * in --devices order (report context "device" shape), borrowed. Backends claiming gpu_to_gpu
 * must agree; run_to_run ones when every device is the same model (name, compute capability,
 * SM count, shared memory per SM). */
cJSON *gate_cross_device_block(const cJSON *records, const cJSON *devices);
/* The same block when there is no device: available false, reason, the requested list. */
cJSON *gate_cross_device_unavailable(const char *reason, const cJSON *requested);
/* Recomputes block's summary from its entries (merge). */
void gate_cross_device_summarize(cJSON *block);

#endif
