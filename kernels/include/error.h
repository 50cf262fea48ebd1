/* Status codes and error messages shared by the whole library.
 *
 * Library functions return 0 on success or one of the negative AUDIT_E* codes below and, on
 * failure, fill a caller-owned struct audit_error with a message that names the file, record,
 * row, field or option at fault. Library code never calls exit(); the CLI maps codes to the
 * documented exit statuses with audit_exit_code(). */
#ifndef DSATOPK_ERROR_H
#define DSATOPK_ERROR_H

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

enum audit_status {
    AUDIT_OK = 0,
    AUDIT_EUSAGE = -2,       /* bad option or argument (exit 2) */
    AUDIT_EDATA = -3,        /* corrupt, truncated or inconsistent input data (exit 3) */
    AUDIT_EIO = -5,          /* a file could not be opened, read or written (exit 3) */
    AUDIT_ENOMEM = -6,       /* host or device allocation failed (exit 4) */
    AUDIT_EDEVICE = -4,      /* CUDA or device failure (exit 4) */
    AUDIT_EUNSUPPORTED = -7, /* a backend or device cannot do this shape (exit 4 if fatal) */
    AUDIT_EFAILED = -1,      /* the audit or gate found a failure (exit 1) */
};

/* Documented process exit codes (README.md, docs/REPORT.md). */
enum audit_exit {
    EXIT_AUDIT_OK = 0,
    EXIT_AUDIT_FAILED = 1,
    EXIT_USAGE = 2,
    EXIT_BAD_INPUT = 3,
    EXIT_DEVICE = 4,
};

#define AUDIT_ERROR_MESSAGE_BYTES 1024

struct audit_error {
    int code;
    char message[AUDIT_ERROR_MESSAGE_BYTES];
};

/* Records code and a printf-style message in err (which may be NULL) and returns code, so that
 * callers can write `return audit_fail(err, AUDIT_EDATA, "...", ...);`. */
int audit_fail(struct audit_error *err, int code, const char *format, ...)
    __attribute__((format(printf, 3, 4)));

/* Prepends "context: " to the message already in err (used to add the file name or record
 * index as an error travels up). Returns err->code. */
int audit_error_prefix(struct audit_error *err, const char *format, ...)
    __attribute__((format(printf, 2, 3)));

void audit_error_clear(struct audit_error *err);

/* Maps a negative status code to the documented process exit code. */
int audit_exit_code(int status);

/* A short, stable name for a status code ("bad_input", "device", ...). */
const char *audit_status_name(int status);

#ifdef __cplusplus
}
#endif

#endif
