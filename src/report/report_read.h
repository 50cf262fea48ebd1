/* Reading the tool's documents back: a report or a baseline, checked field by field and indexed
 * (gate, merge, the baseline `run --baseline-out` writes), with every refusal naming the file and
 * the JSON path of the field at fault ("r.json: $.records[3].backends[1].reps: missing"). The
 * gate policy is read through the same field readers (src/gate/gate_policy.c).
 *
 * Only this module parses the report format: `gate` judges a struct report_document, never the
 * JSON. Keys are report_keys.h's. Readers accept every schema version from
 * SCHEMA_VERSION_OLDEST_READ to the current one. No CUDA: unit-tested through tests/test_gate.c
 * and the fuzz_json_report harness. */
#ifndef DSATOPK_REPORT_READ_H
#define DSATOPK_REPORT_READ_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <cjson/cJSON.h>

#include "error.h"
#include "report_keys.h"
#include "verdict.h"

/* ---- fields with JSON paths ----------------------------------------------------------------- */

/* JSON paths in messages ("$.records[3].backends[1].reps") stop at this length. */
#define JSON_PATH_BYTES 160

/* Where a value being read sits, for messages: the file, and where errors go. */
struct json_reader {
    const char *file;
    struct audit_error *err;
};

enum field_need { FIELD_REQUIRED, FIELD_OPTIONAL, FIELD_NULLABLE /* optional, null allowed */ };

/* AUDIT_EDATA "FILE: PATH.KEY: MESSAGE" (key NULL: "FILE: PATH: MESSAGE"). */
int json_field_error(const struct json_reader *reader, const char *path, const char *key,
                     const char *format, ...) __attribute__((format(printf, 4, 5)));
/* The member key of object, NULL when object is NULL or has none. */
const cJSON *json_member(const cJSON *object, const char *key);
/* Each sets *out to the field, or to NULL (fallback for numbers and booleans) when an optional
 * field is absent or a nullable one null; a field of the wrong type is refused. */
int json_field_item(const struct json_reader *reader, const cJSON *object, const char *path,
                    const char *key, enum field_need need, const cJSON **out);
int json_field_string(const struct json_reader *reader, const cJSON *object, const char *path,
                      const char *key, enum field_need need, const char **out);
/* A non-negative integer <= max. */
int json_field_count(const struct json_reader *reader, const cJSON *object, const char *path,
                     const char *key, enum field_need need, uint64_t max, uint64_t fallback,
                     uint64_t *out);
int json_field_u32(const struct json_reader *reader, const cJSON *object, const char *path,
                   const char *key, uint32_t *out);
int json_field_bool(const struct json_reader *reader, const cJSON *object, const char *path,
                    const char *key, enum field_need need, bool fallback, bool *out);
/* A lower-case hex SHA-256 (64 digits). */
int json_field_hash(const struct json_reader *reader, const cJSON *object, const char *path,
                    const char *key, enum field_need need, const char **out);
int json_field_array(const struct json_reader *reader, const cJSON *object, const char *path,
                     const char *key, enum field_need need, const cJSON **out);
int json_field_object(const struct json_reader *reader, const cJSON *object, const char *path,
                      const char *key, enum field_need need, const cJSON **out);
/* The document's schema_version, refused unless from SCHEMA_VERSION_OLDEST_READ to current
 * ("SCHEMA version N: this tool reads version M"; schema NULL leaves the name out). An absent
 * optional version reads as current. */
int json_field_schema_version(const struct json_reader *reader, const cJSON *root, const char *path,
                              const char *schema, enum field_need need, int current,
                              uint64_t *version);
/* For a command that reads a document whole (report's HTML page, extract --from-report):
 * AUDIT_EDATA naming path and the JSON path unless root is an object whose "schema" is schema
 * and whose schema_version is one this tool reads, SCHEMA_VERSION_OLDEST_READ to current_version
 * (a newer one: "SCHEMA version N is newer than this tool reads"). With schema_missing NULL
 * both fields are required; else an absent schema is accepted and sets *schema_missing (a
 * hand-written file) and an absent schema_version reads as current. */
int document_schema_check(const char *path, const cJSON *root, const char *schema,
                          int current_version, bool *schema_missing, struct audit_error *err);
/* out = path.key, or path.key[index] for index >= 0; a path too long for out ends in "...". */
void json_path_join(char *out, size_t size, const char *path, const char *key, long index);
/* A number that is an integer from 0 to max (and exact in a double). */
bool json_is_count(const cJSON *item, uint64_t max);
bool json_is_hex_hash(const char *text);

/* Copies from's member key into to under the same key (null when from has none): documents
 * built from parts of another (a baseline, a merged report, the cross-device block). */
void json_copy_member(cJSON *to, const cJSON *from, const char *key);
/* The distinct strings of a JSON array of strings, in order of first appearance. */
cJSON *json_distinct_strings(const cJSON *array);

/* An entry of a report's row list (flapping_rows, dependent_rows, the predicted_vs_observed
 * lists): a row number, or an object with a "row" number. False for anything else. */
bool report_row_number(const cJSON *item, uint32_t *row);

/* ---- report and baseline documents ---------------------------------------------------------- */

/* The eager reps or the graph replays of one backend. Hash strings point into the document. */
struct document_tally {
    uint32_t reps;
    const char **rep_hashes;          /* reps entries; NULL in a baseline (only distinct ones) */
    const char **distinct_hashes;     /* distinct output hashes in order of first appearance */
    uint32_t distinct_count;
    uint32_t equals_reference_reps;
    bool has_violations;              /* false in a baseline */
    uint64_t violation_rows[VIOLATION_KINDS]; /* rows showing the kind in some rep */
    uint64_t violation_total_rows[VIOLATION_KINDS];
    uint64_t flapping_rows_total;
    const cJSON *flapping_rows;       /* the report's list, or NULL */
};

/* The device of a per_device entry (run --devices). */
struct document_device {
    int64_t device_index, ordinal;    /* -1 when absent */
    const char *name;                 /* NULL when absent */
    int64_t sm_count;
    const char *compute_capability;
    uint64_t smem_per_sm_bytes;
};

struct document_backend {
    char path[JSON_PATH_BYTES];
    const char *name;
    enum topk_determinism level;      /* claimed */
    bool exact_set;                   /* claims.exact_set (false when absent) */
    enum backend_status status;
    const char *reason;               /* NULL for ok */
    enum verdict verdict;             /* the report's own verdict */
    const cJSON *verdict_reasons;     /* array or NULL */
    struct document_tally eager;
    /* predicted_vs_observed (reports only) */
    bool has_prediction;
    uint64_t predicted_overflow_rows, wrong_rows, wrong_not_predicted_overflow;
    uint64_t set_flapping_unexplained;
    const cJSON *wrong_not_predicted_overflow_list, *set_flapping_unexplained_list;
    /* --graph */
    bool has_graph, graph_ran;
    const char *graph_error;
    struct document_tally graph;
    /* --batch-invariance */
    bool has_batch, batch_ran;
    const char *batch_error;
    uint64_t batch_dependent_rows;
    const cJSON *batch_dependent_list;
    /* run --devices: one entry per device (per_device[]), each judged like the backend. */
    struct document_device device;
    struct document_backend *per_device;
    size_t per_device_count;
};

/* A record's engine entry (the engine's own selection judged, docs/REPORT.md). */
struct document_engine {
    bool present;                     /* the record has an engine entry (not null) */
    char path[JSON_PATH_BYTES];
    bool judged;                      /* status "judged"; else reason says why not */
    const char *reason;
    enum verdict verdict;             /* the report's own */
    const cJSON *verdict_reasons;     /* array or NULL */
    const char *order, *tie_break, *contract_from; /* NULL when absent */
    uint64_t rows;
    uint64_t class_rows[ENGINE_ROW_CLASSES];
    uint64_t kind_rows[CHECK_KIND_COUNT];
    const cJSON *wrong_rows;          /* the list (row objects), or NULL */
    const cJSON *tie_variant_rows;    /* the list, or NULL */
};

/* The engine entry's evidence for verdict_judge_engine; rows (VERDICT_LISTED_ROWS entries) and
 * contract (contract_size bytes) hold what the evidence points to. */
void document_engine_evidence(const struct document_engine *engine, uint32_t *rows,
                              char *contract, size_t contract_size,
                              struct engine_evidence *evidence);

struct document_record {
    char path[JSON_PATH_BYTES];
    const char *file;
    uint32_t index;
    int64_t global_index;             /* -1 when absent */
    const char *payload_sha256;
    uint32_t k, rows;
    const cJSON *source_rows;         /* array or NULL */
    const char *reference_output_sha256;
    struct document_backend *backends;
    size_t backend_count;
    struct document_engine engine;
};

struct report_document {
    char *path;
    cJSON *root;                      /* owned */
    bool is_baseline;                 /* schema dsatopk-audit/baseline (else a full report) */
    bool complete;
    const char *stop_reason;
    const cJSON *context;
    const cJSON *input_errors;        /* array or NULL */
    struct document_record *records;
    size_t record_count;
};

/* Checks and indexes root (a report or a baseline); takes ownership of root even on failure.
 * AUDIT_EDATA names path and the JSON path of the first field at fault. */
int report_document_parse(struct report_document *document, const char *path, cJSON *root,
                          struct audit_error *err);
/* The fingerprint gate writes for each report it judged (reports[].report_sha256): the SHA-256
 * of the document as compact JSON (cJSON's unformatted print of the parsed file), so that a
 * verdict can be checked against the report it was made from whatever the file's whitespace.
 * hex receives 65 bytes; false when out of memory. */
bool report_fingerprint(const cJSON *root, char hex[65]);

/* Reads path and parses it. */
int report_document_load(struct report_document *document, const char *path,
                         struct audit_error *err);
void report_document_release(struct report_document *document);

/* ---- the rows a report names (extract --from-report) ---------------------------------------- */

/* Receives one row a report names, of record (its index in the capture). */
typedef int (*report_row_fn)(void *context, uint32_t record, uint32_t row, struct audit_error *err);

/* Receives the payload_sha256 (64 lower-case hex digits) the report gives a record of the
 * capture. */
typedef int (*report_payload_fn)(void *context, uint32_t record, const char *payload_sha256,
                                 struct audit_error *err);

struct report_row_query {
    const char *report_path;  /* names the report in messages */
    const char *capture_path; /* the capture whose records are wanted */
    const char *backend;      /* only this backend's rows; NULL: every backend's */
    report_row_fn add;
    report_payload_fn payload; /* optional: each matched record's payload_sha256, if it has one */
    void *context;
    /* out */
    bool schema_missing; /* the report has no "schema": read as a run report */
    size_t rows_named;   /* rows handed to add, repeats included */
};

/* Hands query->add every row report names for the capture: per record of that capture, the
 * rows of each backend's flapping_rows, wrong_rows, graph.flapping_rows,
 * batch_invariance.dependent_rows and predicted_vs_observed row lists, and the engine entry's
 * wrong_rows (query->backend "engine": only those). A record is the
 * capture's when its "file" is absent, the same path or the same file once resolved; when none
 * is, when its file has the capture's file name (refused when several such files would give
 * rows). A hand-written report is read: every field but records[].index may be absent.
 * AUDIT_EDATA for another schema, a malformed row list, a report with no record of the capture
 * or no row for it. */
int report_rows_named(const cJSON *report, struct report_row_query *query, struct audit_error *err);

#endif
