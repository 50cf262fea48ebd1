/* The census document (schema dsatopk-audit/census, docs/REFERENCE.md "dsatopk-audit census"):
 * per capture file, per selected record, the census at every k of a list, with what went wrong
 * reading a file kept in the document and told to the caller. */
#ifndef DSATOPK_CENSUS_JSON_H
#define DSATOPK_CENSUS_JSON_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <cjson/cJSON.h>

#include "capture.h"
#include "document_context.h"
#include "error.h"

#define CENSUS_SCHEMA "dsatopk-audit/census"
/* 2: "schema_version" (was "version") and the shared context block (utc_time, was time_utc). */
#define CENSUS_SCHEMA_VERSION 2

/* What the census takes of each file. */
struct census_selection {
    const uint32_t *ks;                  /* 0: each record's own k */
    size_t k_count;
    const unsigned long long *records;   /* record indices; NULL: every record */
    size_t record_count;
    /* Called with each reported record and its object (NULL: not called), to add what the
     * caller judges beside the census (`census` adds the engine's selection). 0 or
     * AUDIT_ENOMEM. */
    int (*record_extra)(void *user, const struct capture_record *record, cJSON *record_json,
                        struct audit_error *err);
    void *record_user;
};

/* What reading one file met, for the caller's messages. */
struct census_file_outcome {
    int status;              /* 0, or the AUDIT_E* code that ended the file */
    char message[AUDIT_ERROR_MESSAGE_BYTES];
    bool opened;             /* the file opened: next_record and next_offset say where it ended */
    uint32_t next_record;    /* the record at fault, or the file's record count */
    uint64_t next_offset;
    uint64_t records;        /* records reported */
    bool *seen;              /* the caller's, record_count flags (NULL: not wanted): set for each
                                selected record the file has */
};

/* A new document: schema, schema_version, context, ks and an empty file list. NULL when out of
 * memory. */
cJSON *census_json_begin(const struct document_context *context,
                         const struct census_selection *selection);
/* Reads the capture at path and appends its object (records, status, error) to the document's
 * files. A file that cannot be read, or ends in a truncated or corrupt record, is described in
 * the object and in outcome; the return is AUDIT_ENOMEM only when out of memory, else 0. */
int census_json_add_file(cJSON *document, const char *path,
                         const struct census_selection *selection,
                         struct census_file_outcome *outcome);
/* The summary: files, records and the name of the worst status met. 0 or AUDIT_ENOMEM. */
int census_json_finish(cJSON *document, uint64_t files, uint64_t records, int worst_status);

#endif
