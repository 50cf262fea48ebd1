#include "document_context.h"

#include <stdbool.h>
#include <stdio.h>
#include <time.h>
#include <unistd.h>

#include "error.h"
#include "json_util.h"
#include "version.h"

void document_context_fill(struct document_context *context, const char *version_string,
                           const char *command_line)
{
    time_t now = time(NULL);
    struct tm utc;
    context->tool_version = DSATOPK_VERSION;
    context->git_revision = DSATOPK_GIT_REVISION;
    context->version_string = version_string;
    context->command_line = command_line;
    if (!gmtime_r(&now, &utc) ||
        strftime(context->utc_time, sizeof(context->utc_time), "%Y-%m-%dT%H:%M:%SZ", &utc) == 0)
        snprintf(context->utc_time, sizeof(context->utc_time), "unknown");
    if (gethostname(context->host, sizeof(context->host)) != 0)
        snprintf(context->host, sizeof(context->host), "unknown");
    context->host[sizeof(context->host) - 1] = '\0';
}

static bool add_string_or_null(cJSON *object, const char *name, const char *value)
{
    return (value ? cJSON_AddStringToObject(object, name, value)
                  : cJSON_AddNullToObject(object, name)) != NULL;
}

int document_context_add(cJSON *object, const struct document_context *context)
{
    if (!object || !add_string_or_null(object, KEY_TOOL_VERSION, context->tool_version) ||
        !add_string_or_null(object, KEY_GIT_REVISION, context->git_revision) ||
        !add_string_or_null(object, KEY_VERSION_STRING, context->version_string) ||
        !add_string_or_null(object, KEY_COMMAND_LINE, context->command_line) ||
        !add_string_or_null(object, KEY_UTC_TIME, context->utc_time) ||
        !add_string_or_null(object, KEY_HOST, context->host))
        return AUDIT_ENOMEM;
    return AUDIT_OK;
}

int document_device_add(cJSON *object, const struct gpu_device_info *info)
{
    char capability[32];
    snprintf(capability, sizeof(capability), "%d.%d", info->cc_major, info->cc_minor);
    if (!object || !cJSON_AddStringToObject(object, KEY_NAME, info->name) ||
        !cJSON_AddStringToObject(object, KEY_COMPUTE_CAPABILITY, capability) ||
        !cJSON_AddNumberToObject(object, KEY_SM_COUNT, info->sm_count) ||
        !json_add_u64(object, KEY_SMEM_PER_SM_BYTES, info->smem_per_sm))
        return AUDIT_ENOMEM;
    return AUDIT_OK;
}

/* CUDA encodes versions as 1000 * major + 10 * minor; 0 or less: unknown, null. */
static bool add_version_text(cJSON *object, const char *key, int version)
{
    char text[32];
    if (version <= 0)
        return cJSON_AddNullToObject(object, key) != NULL;
    snprintf(text, sizeof(text), "%d.%d", version / 1000, (version % 1000) / 10);
    return cJSON_AddStringToObject(object, key, text) != NULL;
}

static bool add_version_number(cJSON *object, const char *key, int version)
{
    return (version <= 0 ? cJSON_AddNullToObject(object, key)
                         : cJSON_AddNumberToObject(object, key, version)) != NULL;
}

int document_cuda_versions_add(cJSON *object, int driver_version, int runtime_version)
{
    if (!object || !add_version_text(object, KEY_DRIVER_VERSION, driver_version) ||
        !add_version_text(object, KEY_RUNTIME_VERSION, runtime_version) ||
        !add_version_number(object, KEY_DRIVER_VERSION_NUMBER, driver_version) ||
        !add_version_number(object, KEY_RUNTIME_VERSION_NUMBER, runtime_version))
        return AUDIT_ENOMEM;
    return AUDIT_OK;
}

cJSON *document_context_json(const struct document_context *context)
{
    cJSON *object = cJSON_CreateObject();
    if (document_context_add(object, context) < 0) {
        cJSON_Delete(object);
        return NULL;
    }
    return object;
}

cJSON *document_begin(const char *schema, int schema_version,
                      const struct document_context *context, cJSON **context_json)
{
    cJSON *document = cJSON_CreateObject();
    cJSON *context_object = document_context_json(context);
    if (!document || !context_object || !cJSON_AddStringToObject(document, KEY_SCHEMA, schema) ||
        !cJSON_AddNumberToObject(document, KEY_SCHEMA_VERSION, schema_version)) {
        cJSON_Delete(document);
        cJSON_Delete(context_object);
        return NULL;
    }
    cJSON_AddItemToObject(document, KEY_CONTEXT, context_object);
    if (context_json)
        *context_json = context_object;
    return document;
}
