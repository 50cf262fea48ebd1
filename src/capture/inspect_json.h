/* The inspect document (schema dsatopk-audit/inspect, docs/FORMAT.md "Inspecting captures"):
 * every record of each capture file as its header and payload describe it, checked on the way
 * (header CRC-32, payload SHA-256), and where a file ends early. */
#ifndef DSATOPK_INSPECT_JSON_H
#define DSATOPK_INSPECT_JSON_H

#include <stdbool.h>
#include <stdint.h>

#include <cjson/cJSON.h>

#include "document_context.h"
#include "error.h"

#define INSPECT_SCHEMA "dsatopk-audit/inspect"
/* 2: "schema_version" (was "version") and the shared context block (was a top-level
 * tool_version). */
#define INSPECT_SCHEMA_VERSION 2

/* What reading all files found. */
struct inspect_totals {
    uint64_t files, records;
    uint64_t truncated_files, corrupt_files, too_large_files, unreadable_files;
    uint64_t out_of_memory_files;
    bool out_of_memory; /* the listing itself ran out of memory */
};

/* How one file ended, for the caller's messages. */
struct inspect_file_outcome {
    int status;              /* 0, or the AUDIT_E* code that ended the file */
    const char *file_status; /* "ok", "truncated", "corrupt", "too_large", "unreadable",
                                "out_of_memory" */
    char message[AUDIT_ERROR_MESSAGE_BYTES];
    uint32_t next_record;    /* records before the end or the damage */
    uint64_t next_offset;    /* where they end */
    /* The repair of a truncated or corrupt file (empty when none is given): cut the file back
     * to next_offset when no complete record lies past the damage, else cut the damaged bytes
     * out (complete_record_after: the first complete record past them starts at
     * complete_record_offset). Never cuts a complete record. */
    char repair[6 * 4096 + 256]; /* six quoted paths of up to 4096 bytes and the rest */
    bool complete_record_after;
    uint64_t complete_record_offset;
};

/* A new document: schema, schema_version, context and an empty file list; NULL when out of
 * memory. */
cJSON *inspect_json_begin(const struct document_context *context);
/* Reads the capture at path, appends its object to the document's files and counts it in
 * totals. A file that cannot be read or ends in a truncated or corrupt record is described in
 * the object and in outcome; the return is AUDIT_ENOMEM only when the object itself could not be
 * made, else 0. */
int inspect_json_add_file(cJSON *document, const char *path, struct inspect_totals *totals,
                          struct inspect_file_outcome *outcome);
/* The summary of totals. 0 or AUDIT_ENOMEM. */
int inspect_json_finish(cJSON *document, const struct inspect_totals *totals);

#endif
