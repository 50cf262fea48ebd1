/* The report of `run` (docs/REPORT.md "Report JSON"): built record by record, so a run that
 * stops early still writes everything it measured, and judged as it goes (each backend entry
 * carries run's verdict, verdict.h). This file writes the report; report_read.h reads it back,
 * report_keys.h names its keys, report_table.h prints the same records as a terminal table.
 *
 * Host code with no CUDA calls: unit-tested on hand-made results (tests/test_report.c). It
 * includes the headers of what a report is built from (tallies, backend results, verdicts,
 * times) and of the table, so that `run` needs this one header. */
#ifndef DSATOPK_REPORT_H
#define DSATOPK_REPORT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <cjson/cJSON.h>

#include "backend_result.h"
#include "capture.h"
#include "census.h"
#include "document_context.h"
#include "error.h"
#include "hash.h"
#include "report_engine.h"
#include "report_keys.h"
#include "report_table.h"
#include "topk_backends.h"

/* Row lists in the JSON (flapping rows, unexpected rows, batch-dependent rows) stop here; the
 * totals are always complete. */
#define REPORT_MAX_LISTED_ROWS 4096u

/* The report's context: the build, invocation, time and host every document opens with
 * (document_context.h), then the device and the audit's settings. */
struct run_context {
    struct document_context document;
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
    const struct engine_result *engine;  /* the engine's selection judged; NULL: none recorded */
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
    cJSON *context;  /* root's "context": the engine adds the shard and the device list */
    cJSON *records;
    cJSON *input_errors;
    /* summary counters */
    uint64_t record_count, runs, pass, fail, not_run;
    uint64_t status_counts[BACKEND_STATUS_COUNT];
    struct engine_counts engine;
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
/* The summary object of a report, counted from its records and input errors as report_finish
 * counts them (merge recomputes it over the joined records). */
cJSON *report_summary_json(const cJSON *records, const cJSON *input_errors);

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
/* run --devices: appends each backend entry of source (a record object of one device's pass)
 * to the per_device[] list of the same backend in record (the record in the report; source may
 * be record itself), with a copy of device as its "device". AUDIT_EDATA when the two records'
 * backends differ, AUDIT_ENOMEM. */
int report_record_add_per_device(cJSON *record, const cJSON *source, const cJSON *device,
                                 struct audit_error *err);
/* What a backend entry built elsewhere says (a worker's, on its way into the report): its
 * backend name ("unnamed" when absent), status (error when missing or unknown), verdict (fail
 * when missing or unknown) and time_breakdown_ms. The strings point into entry. */
struct report_entry_outcome {
    const char *name;
    enum backend_status status;
    enum verdict verdict;
    struct time_breakdown time;
};
void report_entry_outcome(const cJSON *entry, struct report_entry_outcome *outcome);
/* Adds an entry's time_breakdown_ms to the table's time totals (report_add_record and
 * report_add_record_entries do it; `run --devices` calls it for the later devices' entries). */
void report_count_time(struct run_report *report, const char *backend_name,
                       const struct time_breakdown *time);

/* The longest window of the record (its entry's max_length). */
int32_t report_record_max_length(const struct capture_record *record);

#endif
