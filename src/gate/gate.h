/* Reports compared across machines and devices: `gate` (a report against a golden baseline, by
 * the level each backend claims, with a policy file), the baseline `run --baseline-out` writes,
 * `merge` (shard reports joined into one) and the cross-device block of `run --devices`
 * (docs/GATE.md, docs/REPORT.md). One header for the folder; each section names its file.
 *
 * Everything here works on documents read by src/report/report_read.c and writes JSON; nothing
 * calls CUDA, so every branch is unit-tested on hand-made reports (tests/test_gate.c). The
 * verdict rule is verdict.h's, applied to what a report recorded: gate never has the outputs
 * themselves, only their hashes, counts and row lists. */
#ifndef DSATOPK_GATE_H
#define DSATOPK_GATE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include <cjson/cJSON.h>

#include "error.h"
#include "report_keys.h"
#include "report_read.h"
#include "verdict.h"

/* ---- policy (gate_policy.c) ---------------------------------------------------------------- */

/* What a policy may allow beyond a level's rule: the violation kinds of the report (bit
 * 1 << kind, VIOLATION_KINDS of them), then these. */
enum gate_allow_extra {
    GATE_ALLOW_FLAPPING = VIOLATION_KINDS, /* more than one distinct output */
    GATE_ALLOW_REFERENCE_MISMATCH,         /* an output other than the CPU reference */
    GATE_ALLOW_BASELINE_MISMATCH,          /* an output other than the baseline's */
    GATE_ALLOW_DEVICE_MISMATCH,            /* devices of one model disagree (--devices) */
    GATE_ALLOW_BATCH_DEPENDENT,            /* a row changes with its batch */
    GATE_ALLOW_NOT_RUN,                    /* not run here, ok in the baseline */
    GATE_ALLOW_ENGINE_WRONG,               /* the engine's own selection is wrong on some rows */
    GATE_ALLOW_COUNT,
};
#define GATE_ALLOW_BIT(item) (1u << (item))
const char *gate_allow_name(unsigned item);

enum gate_rule_source { GATE_RULE_BACKENDS, GATE_RULE_RECORDS, GATE_RULE_KNOWN_FAILURES };

/* One entry of the policy: which record x backend it concerns, and what it changes. */
struct gate_rule {
    char origin[JSON_PATH_BYTES]; /* "policy.backends.radix", "policy.records[2]", ... */
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
    bool allow_nothing_audited;       /* a report where no backend ran and no engine selection
                                         was judged does not fail */
};

/* An empty policy (what gate uses without --policy). */
void gate_policy_init(struct gate_policy *policy);
/* Checks root against schema dsatopk-audit/policy v1; takes ownership of root. */
int gate_policy_parse(struct gate_policy *policy, const char *path, cJSON *root,
                      struct audit_error *err);
int gate_policy_load(struct gate_policy *policy, const char *path, struct audit_error *err);
void gate_policy_release(struct gate_policy *policy);

/* Whether rule's selector names this record x backend. A selector's file names the record's
 * path, a path suffix at a '/' boundary, or (without a '/') its base name: reports written on
 * other machines hold other absolute paths. */
bool gate_rule_matches(const struct gate_rule *rule, const struct document_record *record,
                       const char *backend);
/* Whether rule's "until" lies before now ("YYYY-MM-DDTHH:MM:SSZ"); a date-only "until" lasts
 * to the end of that day (UTC). */
bool gate_rule_expired(const struct gate_rule *rule, const char *now);

/* Checks a policy time, "YYYY-MM-DD" or "YYYY-MM-DDTHH:MM:SSZ" (UTC): digits where the pattern
 * has them and a date and time that exist (month 1-12, the month's days with the Gregorian leap
 * years, hours 0-23, minutes and seconds 0-59, a leap second 60 only at 23:59). Returns 0 and,
 * when canonical is not NULL, writes the long form (a date alone is midnight) into its 21
 * bytes; -1 for anything else ("2026-02-30", "2025-02-29", "24:00:00"). */
int gate_time_parse(const char *text, char canonical[21]);

/* The level and allowances in force for one record x backend: backends{} first, then the first
 * records[] entry naming a level (the more specific wins); allow lists add up. */
struct gate_entry_rules {
    enum topk_determinism level;
    const char *level_origin; /* NULL: the backend's claim */
    uint32_t allow;           /* GATE_ALLOW_BIT(...) */
};
void gate_policy_rules_for(const struct gate_policy *policy, const struct document_record *record,
                           const char *backend, enum topk_determinism claimed,
                           struct gate_entry_rules *rules);

/* ---- judging (gate_judge.c: one record x backend; gate_verdict.c: reports, the verdict) ----- */

struct gate_counts {
    uint64_t entries, pass, fail, tolerated, missing;
    uint64_t failing_reports;         /* reports with a report-level failure */
    int exit_code;                    /* the verdict's: EXIT_AUDIT_FAILED when it fails, else
                                         EXIT_AUDIT_OK (gate_verdict sets it) */
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
cJSON *gate_judge_entry(const struct document_record *baseline_record,
                        const struct document_backend *baseline_backend,
                        const struct document_record *report_record,
                        const struct document_backend *report_backend, struct gate_policy *policy,
                        const struct gate_options *options, enum gate_status *status);

/* The record's engine entry (the engine's own selection, judged by verdict_judge_engine) as a
 * gate entry whose backend is "engine": the policy allows (engine_wrong) or tolerates it like a
 * backend's. report_record's engine entry must be present; baseline_record may be NULL. */
#define GATE_ENGINE_BACKEND KEY_ENGINE
cJSON *gate_judge_engine_entry(const struct document_record *baseline_record,
                               const struct document_record *report_record,
                               struct gate_policy *policy, const struct gate_options *options,
                               enum gate_status *status);

/* Whether an entry of this status fails the gate under policy. */
bool gate_entry_fails(enum gate_status status, const struct gate_policy *policy);

/* Judges every record x backend of report (matched with the baseline's records by payload
 * SHA-256, file base name and record index; backends by name) and the report as a whole
 * (complete, input errors). Returns the per-report verdict object or NULL (out of memory);
 * counts accumulate. */
cJSON *gate_judge_report(const struct report_document *baseline,
                         const struct report_document *report, struct gate_policy *policy,
                         const struct gate_options *options, struct gate_counts *counts);

/* The whole verdict document: schema dsatopk-audit/gate v1. context: borrowed, copied in. */
int gate_verdict(const struct report_document *baseline, const struct report_document *reports,
                 size_t report_count, struct gate_policy *policy,
                 const struct gate_options *options, const cJSON *context, cJSON **verdict,
                 struct gate_counts *counts, struct audit_error *err);

/* Whether verdict (a gate verdict document) judged report: one of its reports[] carries the
 * report's fingerprint (report_fingerprint), or, in a verdict without fingerprints, the report's
 * host, utc_time and record count. AUDIT_EDATA naming both files when the verdict identifies
 * its reports and none is this one; *unidentified when it identifies none (a hand-made
 * verdict: the caller warns). */
int gate_verdict_check_report(const cJSON *verdict, const char *verdict_path, const cJSON *report,
                              const char *report_path, bool *unidentified,
                              struct audit_error *err);

/* ---- table (gate_table.c) ------------------------------------------------------------------- */

/* The verdict as a table: the baseline and policy, per report its header, its report-level
 * reasons and every entry that is not pass (reasons, notes, rows), then unused tolerances, the
 * summary line and "# verdict: PATH" when verdict_path is not NULL. */
void gate_table_print(FILE *out, const cJSON *verdict, const char *verdict_path);

/* ---- baseline (gate_baseline.c) ------------------------------------------------------------ */

/* The baseline subset of a report (schema dsatopk-audit/baseline v1): context, and per record
 * x backend the status, level, reps and distinct output and set hashes (docs/GATE.md). */
int gate_baseline_from_report(const cJSON *report, const char *report_name, cJSON **baseline,
                              struct audit_error *err);

/* ---- merge (gate_merge.c) ------------------------------------------------------------------- */

/* Joins shard reports (run --shard I/N) into one: records in global order, input errors without
 * duplicates, summary recomputed, context of the lowest shard plus a shards[] list, cross_device
 * entries joined. Refuses (AUDIT_EDATA, naming the files) reports of another schema or version,
 * reports that are not shards, shards of different counts or configurations, and overlapping
 * shards. paths name roots in messages; roots stay the caller's. missing_shards receives how many
 * of the N shards were not given (the merged report is then incomplete). */
int gate_merge_reports(const char *const *paths, const cJSON *const *roots, size_t count,
                       cJSON **merged, uint32_t *missing_shards, struct audit_error *err);
/* What merge's summary line says of a merged report: its records, failing backend runs and input
 * errors (0 when absent), and why it is incomplete (NULL when it is complete; points into
 * merged). */
struct gate_merge_totals {
    double records, backends_fail, input_errors;
    const char *stop_reason;
};
void gate_merge_totals(const cJSON *merged, struct gate_merge_totals *totals);

/* ---- cross-device (gate_cross_device.c) ----------------------------------------------------- */

/* The cross_device block of `run --devices` from records whose backends carry per_device[]
 * entries (device_index, ordinal, status, output hashes). devices: array of the device objects
 * in --devices order (report context "device" shape), borrowed. Whether a backend's devices
 * must agree is the verdict rule's (verdict_devices_must_agree: gpu_to_gpu always, run_to_run
 * when every device is one model: name, compute capability, SM count, shared memory per SM). */
cJSON *gate_cross_device_block(const cJSON *records, const cJSON *devices);
/* The same block when there is no device: available false, reason, the requested list. */
cJSON *gate_cross_device_unavailable(const char *reason, const cJSON *requested);
/* Recomputes block's summary from its entries (merge). */
void gate_cross_device_summarize(cJSON *block);
/* Whether an entry of block fails: devices that disagreed where they had to agree. */
bool gate_cross_device_failed(const cJSON *block);

#endif
