/* What a record worker sends back for each backend (src/replay/record_worker.c), one message
 * per task through the worker's channel (src/replay/worker.h): the backend's judged report entry
 * and its table lines, {"entry": {...}, "table": "..."}, or what stopped the worker,
 * {"fatal": {"code", "message"}} (a failure that is not the backend's: host memory, a dump) or
 * {"device_error": {"code", "message"}} (the device could not be set up). Both ends are the same
 * binary; the text is JSON so that an entry crosses as it will stand in the report. */
#ifndef DSATOPK_RESULT_WIRE_H
#define DSATOPK_RESULT_WIRE_H

#include <stdbool.h>
#include <stddef.h>

#include <cjson/cJSON.h>

#include "error.h"
#include "report.h"

/* The message of an entry (moved in and freed) and its table lines; malloc'd, NULL when out of
 * memory. */
char *result_wire_entry(cJSON *entry, const char *table);
/* The message of a failure; key: "fatal" or "device_error". NULL when out of memory. */
char *result_wire_failure(const char *key, int code, const char *message);

enum result_message_kind {
    RESULT_ENTRY,
    RESULT_FATAL,
    RESULT_DEVICE_ERROR,
    RESULT_UNREADABLE,   /* not one of the messages above */
};

struct result_message {
    enum result_message_kind kind;
    cJSON *entry;     /* RESULT_ENTRY: the caller's to free */
    char *table;      /* RESULT_ENTRY: malloc'd, the caller's to free */
    bool failed;      /* RESULT_ENTRY: the entry's verdict is fail (or missing) */
    int code;         /* RESULT_FATAL, RESULT_DEVICE_ERROR: the negative code, AUDIT_EDEVICE
                         when the message lacks one */
    char message[AUDIT_ERROR_MESSAGE_BYTES];
};

/* Reads one message. Returns 0, or AUDIT_ENOMEM (message is then RESULT_UNREADABLE). */
int result_wire_decode(const void *data, size_t bytes, struct result_message *message);

#endif
