/* Reading reports and baselines back (report_read.h). */
#include "report_read.h"

#include <ctype.h>
#include <limits.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "hash.h"
#include "json_util.h"

/* ---- fields with JSON paths ----------------------------------------------------------------- */

int json_field_error(const struct json_reader *reader, const char *path, const char *key,
                     const char *format, ...)
{
    char message[512];
    va_list args;
    va_start(args, format);
    vsnprintf(message, sizeof(message), format, args);
    va_end(args);
    return audit_fail(reader->err, AUDIT_EDATA, "%s: %s%s%s: %s", reader->file, path,
                      key ? "." : "", key ? key : "", message);
}

const cJSON *json_member(const cJSON *object, const char *key)
{
    return object ? cJSON_GetObjectItemCaseSensitive(object, key) : NULL;
}

/* Sets *out to the item, or NULL when absent (or null, for FIELD_NULLABLE). */
int json_field_item(const struct json_reader *reader, const cJSON *object, const char *path,
                    const char *key, enum field_need need, const cJSON **out)
{
    const cJSON *item = json_member(object, key);
    *out = NULL;
    if (!item)
        return need == FIELD_REQUIRED
                   ? json_field_error(reader, path, key, "missing") /* a message, not a key */
                   : AUDIT_OK;
    if (cJSON_IsNull(item)) {
        if (need == FIELD_NULLABLE)
            return AUDIT_OK;
        return json_field_error(reader, path, key, "is null");
    }
    *out = item;
    return AUDIT_OK;
}

int json_field_string(const struct json_reader *reader, const cJSON *object, const char *path,
                      const char *key, enum field_need need, const char **out)
{
    const cJSON *item;
    int status = json_field_item(reader, object, path, key, need, &item);
    *out = NULL;
    if (status < 0 || !item)
        return status;
    if (!cJSON_IsString(item) || !item->valuestring)
        return json_field_error(reader, path, key, "not a string");
    *out = item->valuestring;
    return AUDIT_OK;
}

bool json_is_count(const cJSON *item, uint64_t max)
{
    if (!cJSON_IsNumber(item) || !isfinite(item->valuedouble) || item->valuedouble < 0 ||
        item->valuedouble > 9007199254740992.0 || item->valuedouble != floor(item->valuedouble))
        return false;
    return (uint64_t)item->valuedouble <= max;
}

int json_field_count(const struct json_reader *reader, const cJSON *object, const char *path,
                     const char *key, enum field_need need, uint64_t max, uint64_t fallback,
                     uint64_t *out)
{
    const cJSON *item;
    int status = json_field_item(reader, object, path, key, need, &item);
    *out = fallback;
    if (status < 0 || !item)
        return status;
    if (!json_is_count(item, max))
        return json_field_error(reader, path, key, "not an integer from 0 to %llu",
                                (unsigned long long)max);
    *out = (uint64_t)item->valuedouble;
    return AUDIT_OK;
}

int json_field_u32(const struct json_reader *reader, const cJSON *object, const char *path,
                   const char *key, uint32_t *out)
{
    uint64_t value;
    int status = json_field_count(reader, object, path, key, FIELD_REQUIRED, UINT32_MAX, 0, &value);
    *out = (uint32_t)value;
    return status;
}

int json_field_bool(const struct json_reader *reader, const cJSON *object, const char *path,
                    const char *key, enum field_need need, bool fallback, bool *out)
{
    const cJSON *item;
    int status = json_field_item(reader, object, path, key, need, &item);
    *out = fallback;
    if (status < 0 || !item)
        return status;
    if (!cJSON_IsBool(item))
        return json_field_error(reader, path, key, "not true or false");
    *out = cJSON_IsTrue(item);
    return AUDIT_OK;
}

bool json_is_hex_hash(const char *text)
{
    if (!text || strlen(text) != 2 * HASH_BYTES)
        return false;
    for (const char *c = text; *c; c++)
        if (!isdigit((unsigned char)*c) && !(*c >= 'a' && *c <= 'f'))
            return false;
    return true;
}

int json_field_hash(const struct json_reader *reader, const cJSON *object, const char *path,
                    const char *key, enum field_need need, const char **out)
{
    int status = json_field_string(reader, object, path, key, need, out);
    if (status < 0 || !*out)
        return status;
    if (!json_is_hex_hash(*out))
        return json_field_error(reader, path, key,
                                "'%.80s' is not a lower-case hex SHA-256 (64 digits)", *out);
    return AUDIT_OK;
}

static int read_typed(const struct json_reader *reader, const cJSON *object, const char *path,
                      const char *key, enum field_need need, bool want_array, const cJSON **out)
{
    int status = json_field_item(reader, object, path, key, need, out);
    if (status < 0 || !*out)
        return status;
    if (want_array ? !cJSON_IsArray(*out) : !cJSON_IsObject(*out))
        return json_field_error(reader, path, key, "not %s", want_array ? "an array" : "an object");
    return AUDIT_OK;
}

int json_field_array(const struct json_reader *reader, const cJSON *object, const char *path,
                     const char *key, enum field_need need, const cJSON **out)
{
    return read_typed(reader, object, path, key, need, true, out);
}

int json_field_object(const struct json_reader *reader, const cJSON *object, const char *path,
                      const char *key, enum field_need need, const cJSON **out)
{
    return read_typed(reader, object, path, key, need, false, out);
}

void json_path_join(char *out, size_t size, const char *path, const char *key, long index)
{
    int length = index >= 0 ? snprintf(out, size, "%s.%s[%ld]", path, key, index)
                            : snprintf(out, size, "%s.%s", path, key);
    if (length < 0 || (size_t)length >= size)
        memcpy(out + size - 4, "...", 4);
}

/* "versions 1 to 3", or "version 1" where one is read. */
static void readable_versions(int current, char *text, size_t size)
{
    if (current == SCHEMA_VERSION_OLDEST_READ)
        snprintf(text, size, "version %d", current);
    else
        snprintf(text, size, "versions %d to %d", SCHEMA_VERSION_OLDEST_READ, current);
}

int json_field_schema_version(const struct json_reader *reader, const cJSON *root, const char *path,
                              const char *schema, enum field_need need, int current,
                              uint64_t *version)
{
    char readable[48];
    readable_versions(current, readable, sizeof(readable));
    /* Any integer above current is newer, however large (the strict parser leaves the value
     * to this check). */
    const cJSON *item = json_member(root, KEY_SCHEMA_VERSION);
    if (cJSON_IsNumber(item) && isfinite(item->valuedouble) && item->valuedouble > current &&
        item->valuedouble == floor(item->valuedouble)) {
        *version = (uint64_t)current;
        return json_field_error(reader, path, KEY_SCHEMA_VERSION,
                                "%s%sversion %.0f is newer than this tool reads (%s): read it "
                                "with the dsatopk-audit that wrote it, or a newer one",
                                schema ? schema : "", schema ? " " : "", item->valuedouble,
                                readable);
    }
    int status = json_field_count(reader, root, path, KEY_SCHEMA_VERSION, need, UINT32_MAX,
                                  (uint64_t)current, version);
    if (status < 0)
        return status;
    if (*version >= SCHEMA_VERSION_OLDEST_READ)
        return AUDIT_OK;
    return json_field_error(reader, path, KEY_SCHEMA_VERSION,
                            "%s%sversion %llu: this tool reads %s", schema ? schema : "",
                            schema ? " " : "", (unsigned long long)*version, readable);
}

int document_schema_check(const char *path, const cJSON *root, const char *schema,
                          int current_version, bool *schema_missing, struct audit_error *err)
{
    struct json_reader reader = { path, err };
    const enum field_need need = schema_missing ? FIELD_OPTIONAL : FIELD_REQUIRED;
    const char *found = NULL;
    uint64_t version;
    if (schema_missing)
        *schema_missing = false;
    if (!cJSON_IsObject(root))
        return audit_fail(err, AUDIT_EDATA, "%s: not a JSON object (expected a %s document)", path,
                          schema);
    int status = json_field_string(&reader, root, "$", KEY_SCHEMA, need, &found);
    if (status < 0)
        return status;
    if (found && strcmp(found, schema) != 0)
        return audit_fail(err, AUDIT_EDATA, "%s: %s \"%.200s\" is not %s", path, KEY_SCHEMA, found,
                          schema);
    if (schema_missing)
        *schema_missing = !found;
    return json_field_schema_version(&reader, root, "$", schema, need, current_version, &version);
}

bool report_row_number(const cJSON *item, uint32_t *row)
{
    const cJSON *value = cJSON_IsObject(item) ? json_member(item, KEY_ROW) : item;
    if (!json_is_count(value, UINT32_MAX))
        return false;
    *row = (uint32_t)value->valuedouble;
    return true;
}

void json_copy_member(cJSON *to, const cJSON *from, const char *key)
{
    const cJSON *item = json_member(from, key);
    cJSON_AddItemToObject(to, key, item ? cJSON_Duplicate(item, 1) : cJSON_CreateNull());
}

cJSON *json_distinct_strings(const cJSON *array)
{
    cJSON *result = cJSON_CreateArray();
    const cJSON *item;
    cJSON_ArrayForEach(item, array) {
        if (!result || !cJSON_IsString(item))
            continue;
        bool seen = false;
        const cJSON *kept;
        cJSON_ArrayForEach(kept, result)
            seen = seen || strcmp(kept->valuestring, item->valuestring) == 0;
        if (!seen)
            cJSON_AddItemToArray(result, cJSON_CreateString(item->valuestring));
    }
    return result;
}

/* ---- documents ------------------------------------------------------------------------------ */

static void tally_release(struct document_tally *tally)
{
    free(tally->rep_hashes);
    free(tally->distinct_hashes);
    memset(tally, 0, sizeof(*tally));
}

static void backend_release(struct document_backend *backend)
{
    tally_release(&backend->eager);
    tally_release(&backend->graph);
    for (size_t i = 0; i < backend->per_device_count; i++)
        backend_release(&backend->per_device[i]);
    free(backend->per_device);
    backend->per_device = NULL;
    backend->per_device_count = 0;
}

/* Reads an array of hashes into a new array of pointers (count entries). */
static int read_hash_list(const struct json_reader *reader, const cJSON *object, const char *path,
                          const char *key, const char ***out, uint32_t *count)
{
    const cJSON *array;
    char item_path[JSON_PATH_BYTES];
    int status = json_field_array(reader, object, path, key, FIELD_REQUIRED, &array);
    *out = NULL;
    *count = 0;
    if (status < 0)
        return status;
    int size = cJSON_GetArraySize(array);
    const char **hashes = calloc(size > 0 ? (size_t)size : 1, sizeof(char *));
    if (!hashes)
        return audit_fail(reader->err, AUDIT_ENOMEM, "%s: out of memory reading %s.%s",
                          reader->file, path, key);
    int i = 0;
    const cJSON *item;
    cJSON_ArrayForEach(item, array) {
        if (!cJSON_IsString(item) || !json_is_hex_hash(item->valuestring)) {
            json_path_join(item_path, sizeof(item_path), path, key, i);
            free(hashes);
            return json_field_error(reader, item_path, NULL,
                                    "not a lower-case hex SHA-256 (64 digits)");
        }
        hashes[i++] = item->valuestring;
    }
    *out = hashes;
    *count = (uint32_t)i;
    return AUDIT_OK;
}

/* The distinct strings of list, in order of first appearance (pointers shared with list). */
static int distinct_of(const char **list, uint32_t count, const char ***distinct,
                       uint32_t *distinct_count)
{
    const char **unique = calloc(count ? count : 1, sizeof(char *));
    uint32_t n = 0;
    if (!unique)
        return AUDIT_ENOMEM;
    for (uint32_t i = 0; i < count; i++) {
        bool seen = false;
        for (uint32_t j = 0; j < n && !seen; j++)
            seen = strcmp(unique[j], list[i]) == 0;
        if (!seen)
            unique[n++] = list[i];
    }
    *distinct = unique;
    *distinct_count = n;
    return AUDIT_OK;
}

/* The measurement fields of the eager reps (json: the backend) or of the graph replays. A
 * baseline keeps only the distinct hashes ("output_sha256"). */
static int parse_tally(const struct json_reader *reader, const cJSON *json, const char *path,
                       bool baseline, struct document_tally *tally)
{
    uint64_t value;
    int status =
        json_field_count(reader, json, path, KEY_REPS, FIELD_REQUIRED, UINT32_MAX, 0, &value);
    if (status < 0)
        return status;
    tally->reps = (uint32_t)value;
    status = json_field_count(reader, json, path, KEY_EQUALS_REFERENCE_REPS, FIELD_REQUIRED,
                              tally->reps, 0, &value);
    if (status < 0)
        return status;
    tally->equals_reference_reps = (uint32_t)value;
    if (baseline) {
        status = read_hash_list(reader, json, path, KEY_OUTPUT_SHA256, &tally->distinct_hashes,
                                &tally->distinct_count);
        if (status < 0)
            return status;
        if (tally->distinct_count > tally->reps)
            return json_field_error(reader, path, KEY_OUTPUT_SHA256,
                                    "%u distinct hashes for %u reps", tally->distinct_count,
                                    tally->reps);
        return AUDIT_OK;
    }
    uint32_t hash_count;
    status = read_hash_list(reader, json, path, KEY_OUTPUT_SHA256_PER_REP, &tally->rep_hashes,
                            &hash_count);
    if (status < 0)
        return status;
    if (hash_count != tally->reps)
        return json_field_error(reader, path, KEY_OUTPUT_SHA256_PER_REP, "%u hashes for %u reps",
                                hash_count, tally->reps);
    if (distinct_of(tally->rep_hashes, hash_count, &tally->distinct_hashes,
                    &tally->distinct_count) < 0)
        return audit_fail(reader->err, AUDIT_ENOMEM, "%s: out of memory", reader->file);
    status = json_field_count(reader, json, path, KEY_DISTINCT_OUTPUTS, FIELD_REQUIRED, UINT32_MAX,
                              0, &value);
    if (status < 0)
        return status;
    if (value != tally->distinct_count)
        return json_field_error(reader, path, KEY_DISTINCT_OUTPUTS,
                                "%llu, but output_sha256_per_rep holds %u distinct hashes",
                                (unsigned long long)value, tally->distinct_count);

    const cJSON *violations;
    char kind_path[JSON_PATH_BYTES];
    status = json_field_object(reader, json, path, KEY_VIOLATIONS, FIELD_REQUIRED, &violations);
    if (status < 0)
        return status;
    tally->has_violations = true;
    json_path_join(kind_path, sizeof(kind_path), path, KEY_VIOLATIONS, -1);
    for (unsigned kind = 0; kind < VIOLATION_KINDS; kind++) {
        const cJSON *entry;
        char entry_path[JSON_PATH_BYTES];
        status = json_field_object(reader, violations, kind_path, violation_name(kind),
                                   FIELD_OPTIONAL, &entry);
        if (status < 0)
            return status;
        if (!entry)
            continue;
        json_path_join(entry_path, sizeof(entry_path), kind_path, violation_name(kind), -1);
        status = json_field_count(reader, entry, entry_path, KEY_ROWS, FIELD_REQUIRED, UINT64_MAX,
                                  0, &tally->violation_rows[kind]);
        if (status == AUDIT_OK)
            status = json_field_count(reader, entry, entry_path, KEY_TOTAL_ROWS, FIELD_REQUIRED,
                                      UINT64_MAX, 0, &tally->violation_total_rows[kind]);
        if (status < 0)
            return status;
    }
    status = json_field_count(reader, json, path, KEY_FLAPPING_ROWS_TOTAL, FIELD_OPTIONAL,
                              UINT64_MAX, 0, &tally->flapping_rows_total);
    if (status == AUDIT_OK)
        status = json_field_array(reader, json, path, KEY_FLAPPING_ROWS, FIELD_OPTIONAL,
                                  &tally->flapping_rows);
    return status;
}

static int parse_prediction(const struct json_reader *reader, const cJSON *json, const char *path,
                            struct document_backend *backend)
{
    const cJSON *prediction;
    char prediction_path[JSON_PATH_BYTES];
    int status = json_field_object(reader, json, path, KEY_PREDICTED_VS_OBSERVED, FIELD_OPTIONAL,
                                   &prediction);
    if (status < 0 || !prediction)
        return status;
    backend->has_prediction = true;
    json_path_join(prediction_path, sizeof(prediction_path), path, KEY_PREDICTED_VS_OBSERVED, -1);
    const char *names[] = { KEY_PREDICTED_OVERFLOW_ROWS, KEY_WRONG_ROWS,
                            KEY_WRONG_NOT_PREDICTED_OVERFLOW, KEY_SET_FLAPPING_UNEXPLAINED };
    uint64_t *values[] = { &backend->predicted_overflow_rows, &backend->wrong_rows,
                           &backend->wrong_not_predicted_overflow,
                           &backend->set_flapping_unexplained };
    for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++) {
        status = json_field_count(reader, prediction, prediction_path, names[i], FIELD_REQUIRED,
                                  UINT64_MAX, 0, values[i]);
        if (status < 0)
            return status;
    }
    status =
        json_field_array(reader, prediction, prediction_path, KEY_WRONG_NOT_PREDICTED_OVERFLOW_LIST,
                         FIELD_OPTIONAL, &backend->wrong_not_predicted_overflow_list);
    if (status == AUDIT_OK)
        status =
            json_field_array(reader, prediction, prediction_path, KEY_SET_FLAPPING_UNEXPLAINED_LIST,
                             FIELD_OPTIONAL, &backend->set_flapping_unexplained_list);
    return status;
}

static int parse_graph_and_batch(const struct json_reader *reader, const cJSON *json,
                                 const char *path, bool baseline, struct document_backend *backend)
{
    const cJSON *graph, *batch;
    char sub_path[JSON_PATH_BYTES];
    int status = json_field_object(reader, json, path, KEY_GRAPH, FIELD_NULLABLE, &graph);
    if (status < 0)
        return status;
    if (graph) {
        backend->has_graph = true;
        json_path_join(sub_path, sizeof(sub_path), path, KEY_GRAPH, -1);
        status = json_field_bool(reader, graph, sub_path, KEY_RAN, FIELD_REQUIRED, false,
                                 &backend->graph_ran);
        if (status == AUDIT_OK)
            status = json_field_string(reader, graph, sub_path, KEY_ERROR, FIELD_NULLABLE,
                                       &backend->graph_error);
        if (status == AUDIT_OK)
            status = parse_tally(reader, graph, sub_path, baseline, &backend->graph);
        if (status < 0)
            return status;
    }
    status = json_field_object(reader, json, path, KEY_BATCH_INVARIANCE, FIELD_NULLABLE, &batch);
    if (status < 0 || !batch)
        return status;
    backend->has_batch = true;
    json_path_join(sub_path, sizeof(sub_path), path, KEY_BATCH_INVARIANCE, -1);
    status = json_field_bool(reader, batch, sub_path, KEY_RAN, FIELD_REQUIRED, false,
                             &backend->batch_ran);
    if (status == AUDIT_OK)
        status = json_field_string(reader, batch, sub_path, KEY_ERROR, FIELD_NULLABLE,
                                   &backend->batch_error);
    if (status == AUDIT_OK)
        status = json_field_count(reader, batch, sub_path, KEY_DEPENDENT_ROWS_TOTAL, FIELD_REQUIRED,
                                  UINT64_MAX, 0, &backend->batch_dependent_rows);
    if (status == AUDIT_OK)
        status = json_field_array(reader, batch, sub_path, KEY_DEPENDENT_ROWS, FIELD_OPTIONAL,
                                  &backend->batch_dependent_list);
    return status;
}

static int parse_device_identity(const struct json_reader *reader, const cJSON *json,
                                 const char *path, struct document_device *device)
{
    const cJSON *object;
    char device_path[JSON_PATH_BYTES];
    uint64_t value;
    device->device_index = device->ordinal = device->sm_count = -1;
    int status = json_field_object(reader, json, path, KEY_DEVICE, FIELD_NULLABLE, &object);
    if (status < 0 || !object)
        return status;
    json_path_join(device_path, sizeof(device_path), path, KEY_DEVICE, -1);
    status =
        json_field_count(reader, object, device_path, KEY_INDEX, FIELD_REQUIRED, 1023, 0, &value);
    if (status < 0)
        return status;
    device->device_index = (int64_t)value;
    status =
        json_field_count(reader, object, device_path, KEY_ORDINAL, FIELD_REQUIRED, 1023, 0, &value);
    if (status < 0)
        return status;
    device->ordinal = (int64_t)value;
    status =
        json_field_string(reader, object, device_path, KEY_NAME, FIELD_NULLABLE, &device->name);
    if (status == AUDIT_OK)
        status = json_field_string(reader, object, device_path, KEY_COMPUTE_CAPABILITY,
                                   FIELD_NULLABLE, &device->compute_capability);
    if (status == AUDIT_OK)
        status = json_field_count(reader, object, device_path, KEY_SM_COUNT, FIELD_NULLABLE,
                                  INT32_MAX, 0, &value);
    if (status < 0)
        return status;
    device->sm_count = (int64_t)value;
    return json_field_count(reader, object, device_path, KEY_SMEM_PER_SM_BYTES, FIELD_NULLABLE,
                            UINT64_MAX, 0, &device->smem_per_sm_bytes);
}

/* parent: the backend a per_device entry belongs to (its name and level are inherited when the
 * entry leaves them out), NULL for a backend of a record. */
static int parse_backend(const struct json_reader *reader, const cJSON *json, const char *path,
                         bool baseline, const struct document_backend *parent,
                         struct document_backend *backend)
{
    const char *text;
    const cJSON *claims;
    snprintf(backend->path, sizeof(backend->path), "%s", path);
    backend->device.device_index = backend->device.ordinal = backend->device.sm_count = -1;
    if (!cJSON_IsObject(json))
        return json_field_error(reader, path, NULL, "not an object");
    enum field_need inherited = parent ? FIELD_OPTIONAL : FIELD_REQUIRED;
    int status = json_field_string(reader, json, path, KEY_NAME, inherited, &backend->name);
    if (status < 0)
        return status;
    if (!backend->name)
        backend->name = parent->name;
    if (parent && strcmp(backend->name, parent->name) != 0)
        return json_field_error(reader, path, KEY_NAME,
                                "'%s' in the per_device list of backend '%s'", backend->name,
                                parent->name);
    status = json_field_string(reader, json, path, KEY_LEVEL, inherited, &text);
    if (status < 0)
        return status;
    if (!text)
        backend->level = parent->level;
    else if (determinism_level_parse(text, &backend->level) < 0)
        return json_field_error(reader, path, KEY_LEVEL,
                                "'%s' is not not_guaranteed, run_to_run or gpu_to_gpu", text);
    status = json_field_object(reader, json, path, KEY_CLAIMS, FIELD_OPTIONAL, &claims);
    if (status < 0)
        return status;
    if (claims) {
        char claims_path[JSON_PATH_BYTES];
        json_path_join(claims_path, sizeof(claims_path), path, KEY_CLAIMS, -1);
        status = json_field_bool(reader, claims, claims_path, KEY_EXACT_SET, FIELD_OPTIONAL, false,
                                 &backend->exact_set);
        if (status < 0)
            return status;
    } else if (parent) {
        backend->exact_set = parent->exact_set;
    }
    status = json_field_string(reader, json, path, KEY_STATUS, FIELD_REQUIRED, &text);
    if (status < 0)
        return status;
    if (backend_status_parse(text, &backend->status) < 0)
        return json_field_error(reader, path, KEY_STATUS,
                                "'%s' is not ok, unsupported, unavailable, error or skipped", text);
    status = json_field_string(reader, json, path, KEY_REASON, FIELD_NULLABLE, &backend->reason);
    if (status < 0)
        return status;
    status = json_field_string(reader, json, path, KEY_VERDICT, FIELD_REQUIRED, &text);
    if (status < 0)
        return status;
    if (verdict_parse(text, &backend->verdict) < 0)
        return json_field_error(reader, path, KEY_VERDICT, "'%s' is not pass, fail or not_run",
                                text);
    status = json_field_array(reader, json, path, KEY_VERDICT_REASONS, FIELD_OPTIONAL,
                              &backend->verdict_reasons);
    if (status == AUDIT_OK)
        status = parse_tally(reader, json, path, baseline, &backend->eager);
    if (status == AUDIT_OK && !baseline)
        status = parse_prediction(reader, json, path, backend);
    if (status == AUDIT_OK)
        status = parse_graph_and_batch(reader, json, path, baseline, backend);
    if (status == AUDIT_OK && parent)
        status = parse_device_identity(reader, json, path, &backend->device);
    if (status < 0 || parent)
        return status;

    const cJSON *per_device;
    status = json_field_array(reader, json, path, KEY_PER_DEVICE, FIELD_OPTIONAL, &per_device);
    if (status < 0 || !per_device)
        return status;
    int count = cJSON_GetArraySize(per_device);
    backend->per_device = calloc(count > 0 ? (size_t)count : 1, sizeof(*backend->per_device));
    if (!backend->per_device)
        return audit_fail(reader->err, AUDIT_ENOMEM, "%s: out of memory", reader->file);
    const cJSON *item;
    cJSON_ArrayForEach(item, per_device) {
        char item_path[JSON_PATH_BYTES];
        json_path_join(item_path, sizeof(item_path), path, KEY_PER_DEVICE,
                       (long)backend->per_device_count);
        struct document_backend *entry = &backend->per_device[backend->per_device_count++];
        status = parse_backend(reader, item, item_path, baseline, backend, entry);
        if (status < 0)
            return status;
        if (entry->device.device_index < 0)
            return json_field_error(reader, item_path, KEY_DEVICE,
                                    "missing"); /* a message, not a key */
    }
    return AUDIT_OK;
}

/* records[].engine: null or absent (no engine selection), or the judged entry. */
static int parse_engine(const struct json_reader *reader, const cJSON *record_json,
                        const char *record_path, struct document_engine *engine)
{
    const cJSON *json, *by_kind;
    const char *status_word, *verdict_word;
    char path[JSON_PATH_BYTES], by_kind_path[JSON_PATH_BYTES];
    int status = json_field_object(reader, record_json, record_path, KEY_ENGINE, FIELD_NULLABLE,
                                   &json);
    if (status < 0 || !json)
        return status;
    json_path_join(path, sizeof(path), record_path, KEY_ENGINE, -1);
    snprintf(engine->path, sizeof(engine->path), "%s", path);
    engine->present = true;
    status = json_field_string(reader, json, path, KEY_STATUS, FIELD_REQUIRED, &status_word);
    if (status == AUDIT_OK)
        status = json_field_string(reader, json, path, KEY_REASON, FIELD_NULLABLE,
                                   &engine->reason);
    if (status == AUDIT_OK)
        status = json_field_string(reader, json, path, KEY_VERDICT, FIELD_REQUIRED,
                                   &verdict_word);
    if (status == AUDIT_OK)
        status = json_field_array(reader, json, path, KEY_VERDICT_REASONS, FIELD_OPTIONAL,
                                  &engine->verdict_reasons);
    if (status == AUDIT_OK)
        status = json_field_string(reader, json, path, KEY_CONTRACT_FROM, FIELD_OPTIONAL,
                                   &engine->contract_from);
    if (status == AUDIT_OK)
        status = json_field_count(reader, json, path, KEY_ROWS, FIELD_REQUIRED, UINT32_MAX, 0,
                                  &engine->rows);
    if (status == AUDIT_OK)
        status = json_field_object(reader, json, path, KEY_ROWS_BY_KIND, FIELD_REQUIRED, &by_kind);
    if (status == AUDIT_OK)
        status = json_field_array(reader, json, path, KEY_WRONG_ROWS, FIELD_OPTIONAL,
                                  &engine->wrong_rows);
    if (status == AUDIT_OK)
        status = json_field_array(reader, json, path, KEY_TIE_VARIANT_ROWS, FIELD_OPTIONAL,
                                  &engine->tie_variant_rows);
    if (status < 0)
        return status;
    if (strcmp(status_word, ENGINE_STATUS_JUDGED) == 0)
        engine->judged = true;
    else if (strcmp(status_word, ENGINE_STATUS_ERROR) != 0)
        return json_field_error(reader, path, KEY_STATUS, "'%s' is neither %s nor %s",
                                status_word, ENGINE_STATUS_JUDGED, ENGINE_STATUS_ERROR);
    if (verdict_parse(verdict_word, &engine->verdict) < 0 || engine->verdict == VERDICT_NOT_RUN)
        return json_field_error(reader, path, KEY_VERDICT, "'%s' is neither pass nor fail",
                                verdict_word);
    const cJSON *contract = json_member(json, KEY_CONTRACT);
    engine->order = cJSON_GetStringValue(json_member(contract, KEY_ORDER));
    engine->tie_break = cJSON_GetStringValue(json_member(contract, KEY_TIE_BREAK));
    json_path_join(by_kind_path, sizeof(by_kind_path), path, KEY_ROWS_BY_KIND, -1);
    for (unsigned c = 0; c < ENGINE_ROW_CLASSES && status == AUDIT_OK; c++)
        status = json_field_count(reader, by_kind, by_kind_path,
                                  engine_row_class_name((enum engine_row_class)c), FIELD_REQUIRED,
                                  UINT32_MAX, 0, &engine->class_rows[c]);
    for (unsigned kind = 0; kind < CHECK_KIND_COUNT && status == AUDIT_OK; kind++)
        status = json_field_count(reader, by_kind, by_kind_path,
                                  check_kind_name((enum check_kind)kind), FIELD_OPTIONAL,
                                  UINT32_MAX, 0, &engine->kind_rows[kind]);
    return status;
}

void document_engine_evidence(const struct document_engine *engine, uint32_t *rows,
                              char *contract, size_t contract_size,
                              struct engine_evidence *evidence)
{
    uint64_t listed = 0;
    const cJSON *item;
    cJSON_ArrayForEach(item, engine->wrong_rows) {
        if (listed >= VERDICT_LISTED_ROWS)
            break;
        if (report_row_number(item, &rows[listed]))
            listed++;
    }
    snprintf(contract, contract_size, "order %s, tie_break %s (%s)",
             engine->order ? engine->order : "n/a", engine->tie_break ? engine->tie_break : "n/a",
             engine->contract_from ? engine->contract_from : "n/a");
    *evidence = (struct engine_evidence){
        .judged = engine->judged,
        .reason = engine->reason,
        .contract = contract,
        .rows = engine->rows,
        .wrong_rows = rows,
        .wrong_rows_listed = listed,
    };
    memcpy(evidence->class_rows, engine->class_rows, sizeof(evidence->class_rows));
    memcpy(evidence->kind_rows, engine->kind_rows, sizeof(evidence->kind_rows));
}

static int parse_record(const struct json_reader *reader, const cJSON *json, const char *path,
                        bool baseline, struct document_record *record)
{
    const cJSON *reference, *backends;
    uint64_t value;
    snprintf(record->path, sizeof(record->path), "%s", path);
    record->global_index = -1;
    if (!cJSON_IsObject(json))
        return json_field_error(reader, path, NULL, "not an object");
    int status = json_field_string(reader, json, path, KEY_FILE, FIELD_REQUIRED, &record->file);
    if (status == AUDIT_OK)
        status = json_field_u32(reader, json, path, KEY_INDEX, &record->index);
    if (status == AUDIT_OK)
        status = json_field_count(reader, json, path, KEY_GLOBAL_INDEX, FIELD_NULLABLE, UINT32_MAX,
                                  UINT64_MAX, &value);
    if (status < 0)
        return status;
    if (value != UINT64_MAX)
        record->global_index = (int64_t)value;
    status = json_field_hash(reader, json, path, KEY_PAYLOAD_SHA256, FIELD_REQUIRED,
                             &record->payload_sha256);
    if (status == AUDIT_OK)
        status = json_field_u32(reader, json, path, KEY_K, &record->k);
    if (status == AUDIT_OK)
        status = json_field_u32(reader, json, path, KEY_ROWS, &record->rows);
    if (status == AUDIT_OK)
        status = json_field_array(reader, json, path, KEY_SOURCE_ROWS, FIELD_NULLABLE,
                                  &record->source_rows);
    if (status == AUDIT_OK)
        status = json_field_object(reader, json, path, KEY_REFERENCE, FIELD_REQUIRED, &reference);
    if (status < 0)
        return status;
    char reference_path[JSON_PATH_BYTES];
    json_path_join(reference_path, sizeof(reference_path), path, KEY_REFERENCE, -1);
    status = json_field_hash(reader, reference, reference_path, KEY_OUTPUT_SHA256, FIELD_REQUIRED,
                             &record->reference_output_sha256);
    if (status == AUDIT_OK)
        status = json_field_array(reader, json, path, KEY_BACKENDS, FIELD_REQUIRED, &backends);
    if (status < 0)
        return status;
    int count = cJSON_GetArraySize(backends);
    record->backends = calloc(count > 0 ? (size_t)count : 1, sizeof(*record->backends));
    if (!record->backends)
        return audit_fail(reader->err, AUDIT_ENOMEM, "%s: out of memory", reader->file);
    const cJSON *item;
    cJSON_ArrayForEach(item, backends) {
        char item_path[JSON_PATH_BYTES];
        json_path_join(item_path, sizeof(item_path), path, KEY_BACKENDS,
                       (long)record->backend_count);
        struct document_backend *backend = &record->backends[record->backend_count++];
        status = parse_backend(reader, item, item_path, baseline, NULL, backend);
        if (status < 0)
            return status;
        for (size_t i = 0; i + 1 < record->backend_count; i++)
            if (strcmp(record->backends[i].name, backend->name) == 0)
                return json_field_error(reader, item_path, KEY_NAME, "backend '%s' is listed twice",
                                        backend->name);
    }
    return parse_engine(reader, json, path, &record->engine);
}

void report_document_release(struct report_document *document)
{
    for (size_t r = 0; r < document->record_count; r++) {
        struct document_record *record = &document->records[r];
        for (size_t b = 0; b < record->backend_count; b++)
            backend_release(&record->backends[b]);
        free(record->backends);
    }
    free(document->records);
    cJSON_Delete(document->root);
    free(document->path);
    memset(document, 0, sizeof(*document));
}

int report_document_parse(struct report_document *document, const char *path, cJSON *root,
                          struct audit_error *err)
{
    struct json_reader reader = { path, err };
    const char *schema;
    const cJSON *records;
    uint64_t version;
    int status;
    memset(document, 0, sizeof(*document));
    document->root = root;
    document->path = strdup(path);
    if (!document->path) {
        status = audit_fail(err, AUDIT_ENOMEM, "out of memory reading %s", path);
        goto error;
    }
    if (!cJSON_IsObject(root)) {
        status = json_field_error(&reader, "$", NULL, "not a JSON object");
        goto error;
    }
    status = json_field_string(&reader, root, "$", KEY_SCHEMA, FIELD_REQUIRED, &schema);
    if (status < 0)
        goto error;
    if (strcmp(schema, BASELINE_SCHEMA) == 0) {
        document->is_baseline = true;
    } else if (strcmp(schema, REPORT_SCHEMA) != 0) {
        status = json_field_error(&reader, "$", KEY_SCHEMA, "'%s' is neither %s nor %s", schema,
                                  REPORT_SCHEMA, BASELINE_SCHEMA);
        goto error;
    }
    status = json_field_schema_version(
        &reader, root, "$", schema, FIELD_REQUIRED,
        document->is_baseline ? BASELINE_SCHEMA_VERSION : REPORT_SCHEMA_VERSION, &version);
    if (status < 0)
        goto error;
    status = json_field_bool(&reader, root, "$", KEY_COMPLETE, FIELD_REQUIRED, false,
                             &document->complete);
    if (status == AUDIT_OK)
        status = json_field_string(&reader, root, "$", KEY_STOP_REASON, FIELD_NULLABLE,
                                   &document->stop_reason);
    if (status == AUDIT_OK)
        status =
            json_field_object(&reader, root, "$", KEY_CONTEXT, FIELD_REQUIRED, &document->context);
    if (status == AUDIT_OK)
        status = json_field_array(&reader, root, "$", KEY_INPUT_ERRORS, FIELD_OPTIONAL,
                                  &document->input_errors);
    if (status == AUDIT_OK)
        status = json_field_array(&reader, root, "$", KEY_RECORDS, FIELD_REQUIRED, &records);
    if (status < 0)
        goto error;
    int count = cJSON_GetArraySize(records);
    document->records = calloc(count > 0 ? (size_t)count : 1, sizeof(*document->records));
    if (!document->records) {
        status = audit_fail(err, AUDIT_ENOMEM, "out of memory reading %s", path);
        goto error;
    }
    const cJSON *item;
    cJSON_ArrayForEach(item, records) {
        char item_path[JSON_PATH_BYTES];
        json_path_join(item_path, sizeof(item_path), "$", KEY_RECORDS,
                       (long)document->record_count);
        status = parse_record(&reader, item, item_path, document->is_baseline,
                              &document->records[document->record_count++]);
        if (status < 0)
            goto error;
    }
    return AUDIT_OK;
error:
    report_document_release(document);
    return status;
}

bool report_fingerprint(const cJSON *root, char hex[65])
{
    char *text = cJSON_PrintUnformatted(root);
    uint8_t digest[HASH_BYTES];
    if (!text)
        return false;
    hash_bytes(text, strlen(text), digest);
    cJSON_free(text);
    hash_to_hex(digest, hex);
    return true;
}

int report_document_load(struct report_document *document, const char *path,
                         struct audit_error *err)
{
    cJSON *root = NULL;
    memset(document, 0, sizeof(*document));
    int status = json_read_file(path, &root, err);
    if (status < 0)
        return status;
    return report_document_parse(document, path, root, err);
}

/* ---- the rows a report names ---------------------------------------------------------------- */

/* Rows of one list: numbers, or objects with a "row" number. Anything else in the list is a
 * malformed report. A field that is not an array (a count) is not a list and is skipped. */
static int named_row_list(struct report_row_query *query, const cJSON *list, uint32_t record,
                          const char *where, struct audit_error *err)
{
    if (!cJSON_IsArray(list))
        return AUDIT_OK;
    int position = 0;
    for (const cJSON *item = list->child; item; item = item->next, position++) {
        uint32_t row;
        if (!report_row_number(item, &row))
            return audit_fail(err, AUDIT_EDATA, "%s[%d]: not a row number", where, position);
        int status = query->add(query->context, record, row, err);
        if (status < 0)
            return status;
        query->rows_named++;
    }
    return AUDIT_OK;
}

static int named_backend_rows(struct report_row_query *query, const cJSON *backend, uint32_t record,
                              const char *where, struct audit_error *err)
{
    static const char *const direct_lists[] = { KEY_FLAPPING_ROWS, KEY_WRONG_ROWS };
    static const char *const observed_lists[] = {
        KEY_WRONG_ROWS,
        KEY_WRONG_NOT_PREDICTED_OVERFLOW_LIST,
        KEY_SET_FLAPPING_UNEXPLAINED_LIST,
    };
    char field[512];
    int status;
    for (size_t i = 0; i < sizeof(direct_lists) / sizeof(direct_lists[0]); i++) {
        snprintf(field, sizeof(field), "%s.%s", where, direct_lists[i]);
        if ((status = named_row_list(query, json_member(backend, direct_lists[i]), record, field,
                                     err)) < 0)
            return status;
    }
    const cJSON *observed = json_member(backend, KEY_PREDICTED_VS_OBSERVED);
    for (size_t i = 0; i < sizeof(observed_lists) / sizeof(observed_lists[0]); i++) {
        snprintf(field, sizeof(field), "%s.%s.%s", where, KEY_PREDICTED_VS_OBSERVED,
                 observed_lists[i]);
        if ((status = named_row_list(query, json_member(observed, observed_lists[i]), record, field,
                                     err)) < 0)
            return status;
    }
    const cJSON *graph = json_member(backend, KEY_GRAPH);
    snprintf(field, sizeof(field), "%s.%s.%s", where, KEY_GRAPH, KEY_FLAPPING_ROWS);
    if ((status =
             named_row_list(query, json_member(graph, KEY_FLAPPING_ROWS), record, field, err)) < 0)
        return status;
    const cJSON *batch = json_member(backend, KEY_BATCH_INVARIANCE);
    snprintf(field, sizeof(field), "%s.%s.%s", where, KEY_BATCH_INVARIANCE, KEY_DEPENDENT_ROWS);
    return named_row_list(query, json_member(batch, KEY_DEPENDENT_ROWS), record, field, err);
}

static const char *path_base_name(const char *path)
{
    const char *slash = strrchr(path, '/');
    return slash ? slash + 1 : path;
}

enum file_match { MATCH_NONE, MATCH_NAME, MATCH_EXACT };

/* How a report record's "file" relates to the capture: absent or the same path (or the same
 * file once resolved) is exact; the same file name in another directory is a weaker match,
 * used only when no record matches exactly (the run may have had another working directory). */
static enum file_match match_file(const cJSON *file, const char *capture, const char *capture_real)
{
    if (!cJSON_IsString(file))
        return MATCH_EXACT;
    const char *path = file->valuestring;
    if (strcmp(path, capture) == 0)
        return MATCH_EXACT;
    char resolved[PATH_MAX];
    if (capture_real && realpath(path, resolved) && strcmp(resolved, capture_real) == 0)
        return MATCH_EXACT;
    return strcmp(path_base_name(path), path_base_name(capture)) == 0 ? MATCH_NAME : MATCH_NONE;
}

/* Hands query->payload the payload_sha256 the report gives record index (at position), where
 * the entry has one: extract holds the capture's record to it. */
static int record_payload(struct report_row_query *query, const cJSON *entry, int position,
                          uint32_t index, struct audit_error *err)
{
    const cJSON *payload = json_member(entry, KEY_PAYLOAD_SHA256);
    if (!query->payload || !payload)
        return AUDIT_OK;
    if (!cJSON_IsString(payload) || !json_is_hex_hash(payload->valuestring))
        return audit_fail(err, AUDIT_EDATA, "%s: records[%d].%s: not a lower-case hex SHA-256",
                          query->report_path, position, KEY_PAYLOAD_SHA256);
    return query->payload(query->context, index, payload->valuestring, err);
}

/* The rows of the records whose file matches capture as wanted; *any_record: some did;
 * *ambiguous: file-name matches name several files. */
static int named_rows_matching(struct report_row_query *query, const cJSON *records,
                               enum file_match wanted, const char *capture_real, bool *any_record,
                               bool *ambiguous, struct audit_error *err)
{
    const char *name_match_file = NULL;
    int position = 0, status;
    *any_record = *ambiguous = false;
    for (const cJSON *entry = records->child; entry; entry = entry->next, position++) {
        const cJSON *file = json_member(entry, KEY_FILE);
        if (match_file(file, query->capture_path, capture_real) != wanted)
            continue;
        if (wanted == MATCH_NAME) {
            if (name_match_file && strcmp(name_match_file, file->valuestring) != 0)
                *ambiguous = true;
            name_match_file = file->valuestring;
        }
        uint32_t index;
        if (!json_is_count(json_member(entry, KEY_INDEX), UINT32_MAX))
            return audit_fail(err, AUDIT_EDATA, "%s: records[%d]: no record \"index\"",
                              query->report_path, position);
        index = (uint32_t)json_member(entry, KEY_INDEX)->valuedouble;
        *any_record = true;
        if ((status = record_payload(query, entry, position, index, err)) < 0)
            return status;
        const cJSON *engine = json_member(entry, KEY_ENGINE);
        if (!query->backend || strcmp(query->backend, KEY_ENGINE) == 0) {
            char where[256];
            snprintf(where, sizeof(where), "%s: records[%d].%s.%s", query->report_path, position,
                     KEY_ENGINE, KEY_WRONG_ROWS);
            if ((status = named_row_list(query, json_member(engine, KEY_WRONG_ROWS), index, where,
                                         err)) < 0)
                return status;
        }
        int backend_position = 0;
        const cJSON *backends = json_member(entry, KEY_BACKENDS);
        for (const cJSON *backend = backends ? backends->child : NULL; backend;
             backend = backend->next, backend_position++) {
            const char *name = cJSON_GetStringValue(json_member(backend, KEY_NAME));
            if (query->backend && (!name || strcmp(name, query->backend) != 0))
                continue;
            char where[256];
            snprintf(where, sizeof(where), "%s: records[%d].backends[%d]", query->report_path,
                     position, backend_position);
            if ((status = named_backend_rows(query, backend, index, where, err)) < 0)
                return status;
        }
    }
    return AUDIT_OK;
}

int report_rows_named(const cJSON *report, struct report_row_query *query, struct audit_error *err)
{
    bool matched_any_record = false;
    query->rows_named = 0;
    int status = document_schema_check(query->report_path, report, REPORT_SCHEMA,
                                       REPORT_SCHEMA_VERSION, &query->schema_missing, err);
    if (status < 0)
        return status;
    const cJSON *records = json_member(report, KEY_RECORDS);
    if (!cJSON_IsArray(records))
        return audit_fail(err, AUDIT_EDATA, "%s: no \"%s\" array", query->report_path, KEY_RECORDS);
    char *capture_real = realpath(query->capture_path, NULL);
    /* Two passes: exact file matches first; file-name matches only if there were none. */
    for (enum file_match wanted = MATCH_EXACT; wanted >= MATCH_NAME && query->rows_named == 0;
         wanted--) {
        bool any_record, ambiguous;
        status =
            named_rows_matching(query, records, wanted, capture_real, &any_record, &ambiguous, err);
        if (status < 0)
            goto done;
        matched_any_record = matched_any_record || any_record;
        if (any_record && query->rows_named == 0)
            break; /* the capture's records are in the report; they just list no row */
        if (ambiguous) {
            status = audit_fail(err, AUDIT_EDATA,
                                "%s: no record names %s exactly and several "
                                "files share its name: run extract from the directory `run` was "
                                "started in",
                                query->report_path, query->capture_path);
            goto done;
        }
    }
    if (!matched_any_record) {
        const cJSON *first_file = records->child ? json_member(records->child, KEY_FILE) : NULL;
        status = audit_fail(err, AUDIT_EDATA,
                            "%s has no record of %s (its first record is of %s): "
                            "nothing to extract",
                            query->report_path, query->capture_path,
                            cJSON_IsString(first_file) ? first_file->valuestring : "no file");
    } else if (query->rows_named == 0) {
        status = audit_fail(err, AUDIT_EDATA,
                            "%s lists no flapping or wrong row%s%s for %s: "
                            "nothing to extract",
                            query->report_path, query->backend ? " of backend " : "",
                            query->backend ? query->backend : "", query->capture_path);
    }
done:
    free(capture_real);
    return status;
}
