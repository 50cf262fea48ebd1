#include "error.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

int audit_fail(struct audit_error *err, int code, const char *format, ...)
{
    if (err) {
        va_list args;
        va_start(args, format);
        vsnprintf(err->message, sizeof(err->message), format, args);
        va_end(args);
        err->code = code;
    }
    return code;
}

int audit_error_prefix(struct audit_error *err, const char *format, ...)
{
    if (!err)
        return AUDIT_EFAILED;
    char prefix[AUDIT_ERROR_MESSAGE_BYTES];
    va_list args;
    va_start(args, format);
    int written = vsnprintf(prefix, sizeof(prefix) - 2, format, args);
    va_end(args);
    if (written < 0)
        return err->code;
    size_t prefix_length = strlen(prefix);
    prefix[prefix_length++] = ':';
    prefix[prefix_length++] = ' ';
    size_t capacity = sizeof(err->message) - 1;
    size_t message_length = strlen(err->message);
    if (prefix_length > capacity)
        prefix_length = capacity;
    if (message_length > capacity - prefix_length)
        message_length = capacity - prefix_length;
    memmove(err->message + prefix_length, err->message, message_length);
    memcpy(err->message, prefix, prefix_length);
    err->message[prefix_length + message_length] = '\0';
    return err->code;
}

void audit_error_clear(struct audit_error *err)
{
    if (err) {
        err->code = AUDIT_OK;
        err->message[0] = '\0';
    }
}

int audit_exit_code(int status)
{
    switch (status) {
    case AUDIT_OK: return EXIT_AUDIT_OK;
    case AUDIT_EFAILED: return EXIT_AUDIT_FAILED;
    case AUDIT_EUSAGE: return EXIT_USAGE;
    case AUDIT_EDATA:
    case AUDIT_EIO: return EXIT_BAD_INPUT;
    default: return EXIT_DEVICE;
    }
}

const char *audit_status_name(int status)
{
    switch (status) {
    case AUDIT_OK: return "ok";
    case AUDIT_EFAILED: return "failed";
    case AUDIT_EUSAGE: return "usage";
    case AUDIT_EDATA: return "bad_input";
    case AUDIT_EIO: return "io";
    case AUDIT_ENOMEM: return "out_of_memory";
    case AUDIT_EDEVICE: return "device";
    case AUDIT_EUNSUPPORTED: return "unsupported";
    default: return "unknown";
    }
}
