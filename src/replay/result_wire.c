#include "result_wire.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static char *print_and_free(cJSON *message)
{
    char *text = message ? cJSON_PrintUnformatted(message) : NULL;
    cJSON_Delete(message);
    return text;
}

char *result_wire_entry(cJSON *entry, const char *table)
{
    cJSON *message = cJSON_CreateObject();
    if (!message) {
        cJSON_Delete(entry);
        return NULL;
    }
    cJSON_AddItemToObject(message, "entry", entry);
    if (!cJSON_AddStringToObject(message, "table", table)) {
        cJSON_Delete(message);
        return NULL;
    }
    return print_and_free(message);
}

char *result_wire_failure(const char *key, int code, const char *message)
{
    cJSON *json = cJSON_CreateObject();
    cJSON *body = json ? cJSON_AddObjectToObject(json, key) : NULL;
    if (body) {
        cJSON_AddNumberToObject(body, "code", code);
        cJSON_AddStringToObject(body, KEY_MESSAGE, message);
    }
    return print_and_free(json);
}

int result_wire_decode(const void *data, size_t bytes, struct result_message *message)
{
    memset(message, 0, sizeof(*message));
    message->kind = RESULT_UNREADABLE;
    cJSON *json = cJSON_ParseWithLength(data, bytes);
    cJSON *entry = cJSON_DetachItemFromObjectCaseSensitive(json, "entry");
    const cJSON *table = cJSON_GetObjectItemCaseSensitive(json, "table");
    const cJSON *fatal = cJSON_GetObjectItemCaseSensitive(json, "fatal");
    const cJSON *device_error = cJSON_GetObjectItemCaseSensitive(json, "device_error");
    int status = AUDIT_OK;
    if (entry && cJSON_IsObject(entry) && cJSON_IsString(table)) {
        message->table = strdup(table->valuestring);
        if (message->table) {
            struct report_entry_outcome outcome;
            report_entry_outcome(entry, &outcome);
            message->kind = RESULT_ENTRY;
            message->entry = entry;
            message->failed = outcome.verdict == VERDICT_FAIL;
            entry = NULL;
        } else {
            status = AUDIT_ENOMEM;
        }
    } else if (fatal || device_error) {
        const cJSON *failure = fatal ? fatal : device_error;
        const cJSON *code = cJSON_GetObjectItemCaseSensitive(failure, "code");
        const cJSON *text = cJSON_GetObjectItemCaseSensitive(failure, KEY_MESSAGE);
        message->kind = device_error ? RESULT_DEVICE_ERROR : RESULT_FATAL;
        message->code = cJSON_IsNumber(code) && code->valueint < 0 ? code->valueint : AUDIT_EDEVICE;
        snprintf(message->message, sizeof(message->message), "%s",
                 cJSON_IsString(text) ? text->valuestring : "(no message)");
    }
    cJSON_Delete(entry);
    cJSON_Delete(json);
    return status;
}
