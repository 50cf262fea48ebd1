/* gate, baselines, merge and the cross-device block (docs/GATE.md, docs/REPORT.md). JSON in,
 * JSON out: the verdict rules come from src/report/report.c (verdict_rule_for, staging_model_for). */
#include "gate.h"

#include <ctype.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "checks.h"
#include "hash.h"
#include "json_util.h"

/* Rows listed per entry of a verdict, per list (the report already caps its lists at 4096). */
#define GATE_MAX_ROWS_PER_LIST 4096u

/* ---- reading JSON with paths in the messages ----------------------------------------------- */

/* Where a value being read sits, for messages: the file and the JSON path of its object. */
struct json_reader {
    const char *file;
    struct audit_error *err;
};

static int bad_field(const struct json_reader *reader, const char *path, const char *key,
                     const char *format, ...) __attribute__((format(printf, 4, 5)));
static int bad_field(const struct json_reader *reader, const char *path, const char *key,
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

enum field_need { FIELD_REQUIRED, FIELD_OPTIONAL, FIELD_NULLABLE /* optional, null allowed */ };

static const cJSON *child(const cJSON *object, const char *key)
{
    return object ? cJSON_GetObjectItemCaseSensitive(object, key) : NULL;
}

/* Sets *out to the item, or NULL when absent (or null, for FIELD_NULLABLE). */
static int read_item(const struct json_reader *reader, const cJSON *object, const char *path,
                     const char *key, enum field_need need, const cJSON **out)
{
    const cJSON *item = child(object, key);
    *out = NULL;
    if (!item)
        return need == FIELD_REQUIRED ? bad_field(reader, path, key, "missing") : AUDIT_OK;
    if (cJSON_IsNull(item)) {
        if (need == FIELD_NULLABLE)
            return AUDIT_OK;
        return bad_field(reader, path, key, "is null");
    }
    *out = item;
    return AUDIT_OK;
}

static int read_string(const struct json_reader *reader, const cJSON *object, const char *path,
                       const char *key, enum field_need need, const char **out)
{
    const cJSON *item;
    int status = read_item(reader, object, path, key, need, &item);
    *out = NULL;
    if (status < 0 || !item)
        return status;
    if (!cJSON_IsString(item) || !item->valuestring)
        return bad_field(reader, path, key, "not a string");
    *out = item->valuestring;
    return AUDIT_OK;
}

static bool is_integral_count(const cJSON *item, uint64_t max)
{
    if (!cJSON_IsNumber(item) || !isfinite(item->valuedouble) || item->valuedouble < 0 ||
        item->valuedouble > 9007199254740992.0 || item->valuedouble != floor(item->valuedouble))
        return false;
    return (uint64_t)item->valuedouble <= max;
}

/* A non-negative integer <= max; absent optional counts read as fallback. */
static int read_count(const struct json_reader *reader, const cJSON *object, const char *path,
                      const char *key, enum field_need need, uint64_t max, uint64_t fallback,
                      uint64_t *out)
{
    const cJSON *item;
    int status = read_item(reader, object, path, key, need, &item);
    *out = fallback;
    if (status < 0 || !item)
        return status;
    if (!is_integral_count(item, max))
        return bad_field(reader, path, key, "not an integer from 0 to %llu",
                         (unsigned long long)max);
    *out = (uint64_t)item->valuedouble;
    return AUDIT_OK;
}

static int read_u32(const struct json_reader *reader, const cJSON *object, const char *path,
                    const char *key, uint32_t *out)
{
    uint64_t value;
    int status = read_count(reader, object, path, key, FIELD_REQUIRED, UINT32_MAX, 0, &value);
    *out = (uint32_t)value;
    return status;
}

static int read_bool(const struct json_reader *reader, const cJSON *object, const char *path,
                     const char *key, enum field_need need, bool fallback, bool *out)
{
    const cJSON *item;
    int status = read_item(reader, object, path, key, need, &item);
    *out = fallback;
    if (status < 0 || !item)
        return status;
    if (!cJSON_IsBool(item))
        return bad_field(reader, path, key, "not true or false");
    *out = cJSON_IsTrue(item);
    return AUDIT_OK;
}

static bool is_hex_hash(const char *text)
{
    if (!text || strlen(text) != 2 * HASH_BYTES)
        return false;
    for (const char *c = text; *c; c++)
        if (!isdigit((unsigned char)*c) && !(*c >= 'a' && *c <= 'f'))
            return false;
    return true;
}

static int read_hash(const struct json_reader *reader, const cJSON *object, const char *path,
                     const char *key, enum field_need need, const char **out)
{
    int status = read_string(reader, object, path, key, need, out);
    if (status < 0 || !*out)
        return status;
    if (!is_hex_hash(*out))
        return bad_field(reader, path, key, "'%.80s' is not a lower-case hex SHA-256 (64 digits)",
                         *out);
    return AUDIT_OK;
}

static int read_typed(const struct json_reader *reader, const cJSON *object, const char *path,
                      const char *key, enum field_need need, bool want_array, const cJSON **out)
{
    int status = read_item(reader, object, path, key, need, out);
    if (status < 0 || !*out)
        return status;
    if (want_array ? !cJSON_IsArray(*out) : !cJSON_IsObject(*out))
        return bad_field(reader, path, key, "not %s", want_array ? "an array" : "an object");
    return AUDIT_OK;
}

static int read_array(const struct json_reader *reader, const cJSON *object, const char *path,
                      const char *key, enum field_need need, const cJSON **out)
{
    return read_typed(reader, object, path, key, need, true, out);
}

static int read_object(const struct json_reader *reader, const cJSON *object, const char *path,
                       const char *key, enum field_need need, const cJSON **out)
{
    return read_typed(reader, object, path, key, need, false, out);
}

/* out = path.key or path.key[index]; a path too long for out ends in "...". */
static void join_path(char *out, size_t size, const char *path, const char *key, long index)
{
    int length = index >= 0 ? snprintf(out, size, "%s.%s[%ld]", path, key, index)
                            : snprintf(out, size, "%s.%s", path, key);
    if (length < 0 || (size_t)length >= size)
        memcpy(out + size - 4, "...", 4);
}

static int parse_level(const char *text, enum topk_determinism *level)
{
    static const enum topk_determinism levels[] = { TOPK_NOT_GUARANTEED, TOPK_RUN_TO_RUN,
                                                     TOPK_GPU_TO_GPU };
    for (size_t i = 0; i < sizeof(levels) / sizeof(levels[0]); i++) {
        if (strcmp(text, topk_determinism_name(levels[i])) == 0) {
            *level = levels[i];
            return 0;
        }
    }
    return -1;
}

static int parse_status(const char *text, enum backend_status *status)
{
    for (int s = BACKEND_OK; s < BACKEND_STATUS_COUNT; s++) {
        if (strcmp(text, backend_status_name((enum backend_status)s)) == 0) {
            *status = (enum backend_status)s;
            return 0;
        }
    }
    return -1;
}

static int parse_verdict(const char *text, enum verdict *verdict)
{
    for (int v = VERDICT_PASS; v <= VERDICT_NOT_RUN; v++) {
        if (strcmp(text, verdict_name((enum verdict)v)) == 0) {
            *verdict = (enum verdict)v;
            return 0;
        }
    }
    return -1;
}

static const char *base_name(const char *path)
{
    const char *slash = path ? strrchr(path, '/') : NULL;
    return slash ? slash + 1 : (path ? path : "");
}

/* ---- documents ------------------------------------------------------------------------------ */

static void tally_release(struct gate_tally *tally)
{
    free(tally->rep_hashes);
    free(tally->distinct_hashes);
    memset(tally, 0, sizeof(*tally));
}

static void backend_release(struct gate_backend *backend)
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
    char item_path[GATE_PATH_BYTES];
    int status = read_array(reader, object, path, key, FIELD_REQUIRED, &array);
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
        if (!cJSON_IsString(item) || !is_hex_hash(item->valuestring)) {
            join_path(item_path, sizeof(item_path), path, key, i);
            free(hashes);
            return bad_field(reader, item_path, NULL, "not a lower-case hex SHA-256 (64 digits)");
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
                       bool baseline, struct gate_tally *tally)
{
    uint64_t value;
    int status = read_count(reader, json, path, "reps", FIELD_REQUIRED, UINT32_MAX, 0, &value);
    if (status < 0)
        return status;
    tally->reps = (uint32_t)value;
    status = read_count(reader, json, path, "equals_reference_reps", FIELD_REQUIRED, tally->reps,
                        0, &value);
    if (status < 0)
        return status;
    tally->equals_reference_reps = (uint32_t)value;
    if (baseline) {
        status = read_hash_list(reader, json, path, "output_sha256", &tally->distinct_hashes,
                                &tally->distinct_count);
        if (status < 0)
            return status;
        if (tally->distinct_count > tally->reps)
            return bad_field(reader, path, "output_sha256", "%u distinct hashes for %u reps",
                             tally->distinct_count, tally->reps);
        return AUDIT_OK;
    }
    uint32_t hash_count;
    status = read_hash_list(reader, json, path, "output_sha256_per_rep", &tally->rep_hashes,
                            &hash_count);
    if (status < 0)
        return status;
    if (hash_count != tally->reps)
        return bad_field(reader, path, "output_sha256_per_rep", "%u hashes for %u reps",
                         hash_count, tally->reps);
    if (distinct_of(tally->rep_hashes, hash_count, &tally->distinct_hashes,
                    &tally->distinct_count) < 0)
        return audit_fail(reader->err, AUDIT_ENOMEM, "%s: out of memory", reader->file);
    status = read_count(reader, json, path, "distinct_outputs", FIELD_REQUIRED, UINT32_MAX, 0,
                        &value);
    if (status < 0)
        return status;
    if (value != tally->distinct_count)
        return bad_field(reader, path, "distinct_outputs",
                         "%llu, but output_sha256_per_rep holds %u distinct hashes",
                         (unsigned long long)value, tally->distinct_count);

    const cJSON *violations;
    char kind_path[GATE_PATH_BYTES];
    status = read_object(reader, json, path, "violations", FIELD_REQUIRED, &violations);
    if (status < 0)
        return status;
    tally->has_violations = true;
    join_path(kind_path, sizeof(kind_path), path, "violations", -1);
    for (unsigned kind = 0; kind < REPORT_VIOLATION_KINDS; kind++) {
        const cJSON *entry;
        char entry_path[GATE_PATH_BYTES];
        status = read_object(reader, violations, kind_path, report_violation_name(kind),
                             FIELD_OPTIONAL, &entry);
        if (status < 0)
            return status;
        if (!entry)
            continue;
        join_path(entry_path, sizeof(entry_path), kind_path, report_violation_name(kind), -1);
        status = read_count(reader, entry, entry_path, "rows", FIELD_REQUIRED, UINT64_MAX, 0,
                            &tally->violation_rows[kind]);
        if (status == AUDIT_OK)
            status = read_count(reader, entry, entry_path, "total_rows", FIELD_REQUIRED,
                                UINT64_MAX, 0, &tally->violation_total_rows[kind]);
        if (status < 0)
            return status;
    }
    status = read_count(reader, json, path, "flapping_rows_total", FIELD_OPTIONAL, UINT64_MAX, 0,
                        &tally->flapping_rows_total);
    if (status == AUDIT_OK)
        status = read_array(reader, json, path, "flapping_rows", FIELD_OPTIONAL,
                            &tally->flapping_rows);
    return status;
}

static int parse_prediction(const struct json_reader *reader, const cJSON *json, const char *path,
                            struct gate_backend *backend)
{
    const cJSON *prediction;
    char prediction_path[GATE_PATH_BYTES];
    int status = read_object(reader, json, path, "predicted_vs_observed", FIELD_OPTIONAL,
                             &prediction);
    if (status < 0 || !prediction)
        return status;
    backend->has_prediction = true;
    join_path(prediction_path, sizeof(prediction_path), path, "predicted_vs_observed", -1);
    const char *names[] = { "predicted_overflow_rows", "wrong_rows",
                            "wrong_not_predicted_overflow", "set_flapping_unexplained" };
    uint64_t *values[] = { &backend->predicted_overflow_rows, &backend->wrong_rows,
                           &backend->wrong_not_predicted_overflow,
                           &backend->set_flapping_unexplained };
    for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++) {
        status = read_count(reader, prediction, prediction_path, names[i], FIELD_REQUIRED,
                            UINT64_MAX, 0, values[i]);
        if (status < 0)
            return status;
    }
    status = read_array(reader, prediction, prediction_path, "wrong_not_predicted_overflow_list",
                        FIELD_OPTIONAL, &backend->wrong_not_predicted_overflow_list);
    if (status == AUDIT_OK)
        status = read_array(reader, prediction, prediction_path, "set_flapping_unexplained_list",
                            FIELD_OPTIONAL, &backend->set_flapping_unexplained_list);
    return status;
}

static int parse_graph_and_batch(const struct json_reader *reader, const cJSON *json,
                                 const char *path, bool baseline, struct gate_backend *backend)
{
    const cJSON *graph, *batch;
    char sub_path[GATE_PATH_BYTES];
    int status = read_object(reader, json, path, "graph", FIELD_NULLABLE, &graph);
    if (status < 0)
        return status;
    if (graph) {
        backend->has_graph = true;
        join_path(sub_path, sizeof(sub_path), path, "graph", -1);
        status = read_bool(reader, graph, sub_path, "ran", FIELD_REQUIRED, false,
                           &backend->graph_ran);
        if (status == AUDIT_OK)
            status = read_string(reader, graph, sub_path, "error", FIELD_NULLABLE,
                                 &backend->graph_error);
        if (status == AUDIT_OK)
            status = parse_tally(reader, graph, sub_path, baseline, &backend->graph);
        if (status < 0)
            return status;
    }
    status = read_object(reader, json, path, "batch_invariance", FIELD_NULLABLE, &batch);
    if (status < 0 || !batch)
        return status;
    backend->has_batch = true;
    join_path(sub_path, sizeof(sub_path), path, "batch_invariance", -1);
    status = read_bool(reader, batch, sub_path, "ran", FIELD_REQUIRED, false, &backend->batch_ran);
    if (status == AUDIT_OK)
        status = read_string(reader, batch, sub_path, "error", FIELD_NULLABLE,
                             &backend->batch_error);
    if (status == AUDIT_OK)
        status = read_count(reader, batch, sub_path, "dependent_rows_total", FIELD_REQUIRED,
                            UINT64_MAX, 0, &backend->batch_dependent_rows);
    if (status == AUDIT_OK)
        status = read_array(reader, batch, sub_path, "dependent_rows", FIELD_OPTIONAL,
                            &backend->batch_dependent_list);
    return status;
}

static int parse_device_identity(const struct json_reader *reader, const cJSON *json,
                                 const char *path, struct gate_device_identity *device)
{
    const cJSON *object;
    char device_path[GATE_PATH_BYTES];
    uint64_t value;
    device->device_index = device->ordinal = device->sm_count = -1;
    int status = read_object(reader, json, path, "device", FIELD_NULLABLE, &object);
    if (status < 0 || !object)
        return status;
    join_path(device_path, sizeof(device_path), path, "device", -1);
    status = read_count(reader, object, device_path, "index", FIELD_REQUIRED, 1023, 0, &value);
    if (status < 0)
        return status;
    device->device_index = (int64_t)value;
    status = read_count(reader, object, device_path, "ordinal", FIELD_REQUIRED, 1023, 0, &value);
    if (status < 0)
        return status;
    device->ordinal = (int64_t)value;
    status = read_string(reader, object, device_path, "name", FIELD_NULLABLE, &device->name);
    if (status == AUDIT_OK)
        status = read_string(reader, object, device_path, "compute_capability", FIELD_NULLABLE,
                             &device->compute_capability);
    if (status == AUDIT_OK)
        status = read_count(reader, object, device_path, "sm_count", FIELD_NULLABLE, INT32_MAX, 0,
                            &value);
    if (status < 0)
        return status;
    device->sm_count = (int64_t)value;
    return read_count(reader, object, device_path, "smem_per_sm_bytes", FIELD_NULLABLE,
                      UINT64_MAX, 0, &device->smem_per_sm_bytes);
}

/* parent: the backend a per_device entry belongs to (its name and level are inherited when the
 * entry leaves them out), NULL for a backend of a record. */
static int parse_backend(const struct json_reader *reader, const cJSON *json, const char *path,
                         bool baseline, const struct gate_backend *parent,
                         struct gate_backend *backend)
{
    const char *text;
    const cJSON *claims;
    snprintf(backend->path, sizeof(backend->path), "%s", path);
    backend->device.device_index = backend->device.ordinal = backend->device.sm_count = -1;
    if (!cJSON_IsObject(json))
        return bad_field(reader, path, NULL, "not an object");
    enum field_need inherited = parent ? FIELD_OPTIONAL : FIELD_REQUIRED;
    int status = read_string(reader, json, path, "name", inherited, &backend->name);
    if (status < 0)
        return status;
    if (!backend->name)
        backend->name = parent->name;
    if (parent && strcmp(backend->name, parent->name) != 0)
        return bad_field(reader, path, "name", "'%s' in the per_device list of backend '%s'",
                         backend->name, parent->name);
    status = read_string(reader, json, path, "level", inherited, &text);
    if (status < 0)
        return status;
    if (!text)
        backend->level = parent->level;
    else if (parse_level(text, &backend->level) < 0)
        return bad_field(reader, path, "level",
                         "'%s' is not not_guaranteed, run_to_run or gpu_to_gpu", text);
    status = read_object(reader, json, path, "claims", FIELD_OPTIONAL, &claims);
    if (status < 0)
        return status;
    if (claims) {
        char claims_path[GATE_PATH_BYTES];
        join_path(claims_path, sizeof(claims_path), path, "claims", -1);
        status = read_bool(reader, claims, claims_path, "exact_set", FIELD_OPTIONAL, false,
                           &backend->exact_set);
        if (status < 0)
            return status;
    } else if (parent) {
        backend->exact_set = parent->exact_set;
    }
    status = read_string(reader, json, path, "status", FIELD_REQUIRED, &text);
    if (status < 0)
        return status;
    if (parse_status(text, &backend->status) < 0)
        return bad_field(reader, path, "status",
                         "'%s' is not ok, unsupported, unavailable, error or skipped", text);
    status = read_string(reader, json, path, "reason", FIELD_NULLABLE, &backend->reason);
    if (status < 0)
        return status;
    status = read_string(reader, json, path, "verdict", FIELD_REQUIRED, &text);
    if (status < 0)
        return status;
    if (parse_verdict(text, &backend->verdict) < 0)
        return bad_field(reader, path, "verdict", "'%s' is not pass, fail or not_run", text);
    status = read_array(reader, json, path, "verdict_reasons", FIELD_OPTIONAL,
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
    status = read_array(reader, json, path, "per_device", FIELD_OPTIONAL, &per_device);
    if (status < 0 || !per_device)
        return status;
    int count = cJSON_GetArraySize(per_device);
    backend->per_device = calloc(count > 0 ? (size_t)count : 1, sizeof(*backend->per_device));
    if (!backend->per_device)
        return audit_fail(reader->err, AUDIT_ENOMEM, "%s: out of memory", reader->file);
    const cJSON *item;
    cJSON_ArrayForEach(item, per_device) {
        char item_path[GATE_PATH_BYTES];
        join_path(item_path, sizeof(item_path), path, "per_device",
                  (long)backend->per_device_count);
        struct gate_backend *entry = &backend->per_device[backend->per_device_count++];
        status = parse_backend(reader, item, item_path, baseline, backend, entry);
        if (status < 0)
            return status;
        if (entry->device.device_index < 0)
            return bad_field(reader, item_path, "device", "missing");
    }
    return AUDIT_OK;
}

static int parse_record(const struct json_reader *reader, const cJSON *json, const char *path,
                        bool baseline, struct gate_record *record)
{
    const cJSON *reference, *backends;
    uint64_t value;
    snprintf(record->path, sizeof(record->path), "%s", path);
    record->global_index = -1;
    if (!cJSON_IsObject(json))
        return bad_field(reader, path, NULL, "not an object");
    int status = read_string(reader, json, path, "file", FIELD_REQUIRED, &record->file);
    if (status == AUDIT_OK)
        status = read_u32(reader, json, path, "index", &record->index);
    if (status == AUDIT_OK)
        status = read_count(reader, json, path, "global_index", FIELD_NULLABLE, UINT32_MAX,
                            UINT64_MAX, &value);
    if (status < 0)
        return status;
    if (value != UINT64_MAX)
        record->global_index = (int64_t)value;
    status = read_hash(reader, json, path, "payload_sha256", FIELD_REQUIRED,
                       &record->payload_sha256);
    if (status == AUDIT_OK)
        status = read_u32(reader, json, path, "k", &record->k);
    if (status == AUDIT_OK)
        status = read_u32(reader, json, path, "rows", &record->rows);
    if (status == AUDIT_OK)
        status = read_array(reader, json, path, "source_rows", FIELD_NULLABLE,
                            &record->source_rows);
    if (status == AUDIT_OK)
        status = read_object(reader, json, path, "reference", FIELD_REQUIRED, &reference);
    if (status < 0)
        return status;
    char reference_path[GATE_PATH_BYTES];
    join_path(reference_path, sizeof(reference_path), path, "reference", -1);
    status = read_hash(reader, reference, reference_path, "output_sha256", FIELD_REQUIRED,
                       &record->reference_output_sha256);
    if (status == AUDIT_OK)
        status = read_array(reader, json, path, "backends", FIELD_REQUIRED, &backends);
    if (status < 0)
        return status;
    int count = cJSON_GetArraySize(backends);
    record->backends = calloc(count > 0 ? (size_t)count : 1, sizeof(*record->backends));
    if (!record->backends)
        return audit_fail(reader->err, AUDIT_ENOMEM, "%s: out of memory", reader->file);
    const cJSON *item;
    cJSON_ArrayForEach(item, backends) {
        char item_path[GATE_PATH_BYTES];
        join_path(item_path, sizeof(item_path), path, "backends", (long)record->backend_count);
        struct gate_backend *backend = &record->backends[record->backend_count++];
        status = parse_backend(reader, item, item_path, baseline, NULL, backend);
        if (status < 0)
            return status;
        for (size_t i = 0; i + 1 < record->backend_count; i++)
            if (strcmp(record->backends[i].name, backend->name) == 0)
                return bad_field(reader, item_path, "name", "backend '%s' is listed twice",
                                 backend->name);
    }
    return AUDIT_OK;
}

void gate_document_release(struct gate_document *document)
{
    for (size_t r = 0; r < document->record_count; r++) {
        struct gate_record *record = &document->records[r];
        for (size_t b = 0; b < record->backend_count; b++)
            backend_release(&record->backends[b]);
        free(record->backends);
    }
    free(document->records);
    cJSON_Delete(document->root);
    free(document->path);
    memset(document, 0, sizeof(*document));
}

int gate_document_parse(struct gate_document *document, const char *path, cJSON *root,
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
        status = bad_field(&reader, "$", NULL, "not a JSON object");
        goto error;
    }
    status = read_string(&reader, root, "$", "schema", FIELD_REQUIRED, &schema);
    if (status < 0)
        goto error;
    if (strcmp(schema, BASELINE_SCHEMA) == 0) {
        document->is_baseline = true;
    } else if (strcmp(schema, REPORT_SCHEMA) != 0) {
        status = bad_field(&reader, "$", "schema", "'%s' is neither %s nor %s", schema,
                           REPORT_SCHEMA, BASELINE_SCHEMA);
        goto error;
    }
    status = read_count(&reader, root, "$", "schema_version", FIELD_REQUIRED, UINT32_MAX, 0,
                        &version);
    if (status < 0)
        goto error;
    if (version != (document->is_baseline ? BASELINE_SCHEMA_VERSION : REPORT_SCHEMA_VERSION)) {
        status = bad_field(&reader, "$", "schema_version",
                           "%s version %llu: this tool reads version %d", schema,
                           (unsigned long long)version,
                           document->is_baseline ? BASELINE_SCHEMA_VERSION : REPORT_SCHEMA_VERSION);
        goto error;
    }
    status = read_bool(&reader, root, "$", "complete", FIELD_REQUIRED, false, &document->complete);
    if (status == AUDIT_OK)
        status = read_string(&reader, root, "$", "stop_reason", FIELD_NULLABLE,
                             &document->stop_reason);
    if (status == AUDIT_OK)
        status = read_object(&reader, root, "$", "context", FIELD_REQUIRED, &document->context);
    if (status == AUDIT_OK)
        status = read_array(&reader, root, "$", "input_errors", FIELD_OPTIONAL,
                            &document->input_errors);
    if (status == AUDIT_OK)
        status = read_array(&reader, root, "$", "records", FIELD_REQUIRED, &records);
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
        char item_path[GATE_PATH_BYTES];
        join_path(item_path, sizeof(item_path), "$", "records", (long)document->record_count);
        status = parse_record(&reader, item, item_path, document->is_baseline,
                              &document->records[document->record_count++]);
        if (status < 0)
            goto error;
    }
    return AUDIT_OK;
error:
    gate_document_release(document);
    return status;
}

int gate_document_load(struct gate_document *document, const char *path, struct audit_error *err)
{
    cJSON *root = NULL;
    memset(document, 0, sizeof(*document));
    int status = json_read_file(path, &root, err);
    if (status < 0)
        return status;
    return gate_document_parse(document, path, root, err);
}

/* ---- policy --------------------------------------------------------------------------------- */

const char *gate_allow_name(unsigned item)
{
    if (item < REPORT_VIOLATION_KINDS)
        return report_violation_name(item);
    switch (item) {
    case GATE_ALLOW_FLAPPING: return "flapping";
    case GATE_ALLOW_REFERENCE_MISMATCH: return "reference_mismatch";
    case GATE_ALLOW_BASELINE_MISMATCH: return "baseline_mismatch";
    case GATE_ALLOW_DEVICE_MISMATCH: return "device_mismatch";
    case GATE_ALLOW_BATCH_DEPENDENT: return "batch_dependent";
    case GATE_ALLOW_NOT_RUN: return "not_run";
    }
    return "unknown";
}

void gate_policy_init(struct gate_policy *policy)
{
    memset(policy, 0, sizeof(*policy));
}

void gate_policy_release(struct gate_policy *policy)
{
    free(policy->rules);
    cJSON_Delete(policy->root);
    free(policy->path);
    memset(policy, 0, sizeof(*policy));
}

/* "YYYY-MM-DD" or "YYYY-MM-DDTHH:MM:SSZ". */
static bool is_policy_time(const char *text)
{
    static const char date_pattern[] = "dddd-dd-dd";
    static const char time_pattern[] = "dddd-dd-ddTdd:dd:ddZ";
    size_t length = strlen(text);
    const char *pattern = length == strlen(date_pattern)   ? date_pattern
                          : length == strlen(time_pattern) ? time_pattern
                                                           : NULL;
    if (!pattern)
        return false;
    for (size_t i = 0; i < length; i++) {
        if (pattern[i] == 'd' ? !isdigit((unsigned char)text[i]) : text[i] != pattern[i])
            return false;
    }
    return true;
}

/* Refuses keys a policy entry does not know (a typo would otherwise silently do nothing). */
static int check_known_keys(const struct json_reader *reader, const cJSON *object,
                            const char *path, const char *const *known)
{
    const cJSON *item;
    cJSON_ArrayForEach(item, object) {
        bool found = false;
        for (size_t i = 0; known[i] && !found; i++)
            found = strcmp(known[i], item->string) == 0;
        if (!found) {
            char list[256] = "";
            for (size_t i = 0; known[i]; i++) {
                strncat(list, i ? ", " : "", sizeof(list) - strlen(list) - 1);
                strncat(list, known[i], sizeof(list) - strlen(list) - 1);
            }
            return bad_field(reader, path, item->string, "unknown key (known: %s)", list);
        }
    }
    return AUDIT_OK;
}

static int parse_allow_list(const struct json_reader *reader, const cJSON *array, const char *path,
                            uint32_t *allow)
{
    int i = 0;
    const cJSON *item;
    cJSON_ArrayForEach(item, array) {
        char item_path[GATE_PATH_BYTES];
        join_path(item_path, sizeof(item_path), path, "allow", i++);
        unsigned found = GATE_ALLOW_COUNT;
        for (unsigned a = 0; cJSON_IsString(item) && a < GATE_ALLOW_COUNT; a++) {
            if (strcmp(item->valuestring, gate_allow_name(a)) == 0) {
                found = a;
                break;
            }
        }
        if (found == GATE_ALLOW_COUNT) {
            char list[512] = "";
            for (unsigned a = 0; a < GATE_ALLOW_COUNT; a++) {
                strncat(list, a ? ", " : "", sizeof(list) - strlen(list) - 1);
                strncat(list, gate_allow_name(a), sizeof(list) - strlen(list) - 1);
            }
            return bad_field(reader, item_path, NULL, "not one of: %s", list);
        }
        *allow |= GATE_ALLOW_BIT(found);
    }
    return AUDIT_OK;
}

static int parse_rule_effect(const struct json_reader *reader, const cJSON *json, const char *path,
                             struct gate_rule *rule)
{
    const char *text;
    const cJSON *allow;
    int status;
    if (rule->source == GATE_RULE_KNOWN_FAILURES) {
        status = read_string(reader, json, path, "reason", FIELD_REQUIRED, &rule->tolerate);
        if (status == AUDIT_OK && !rule->tolerate[0])
            status = bad_field(reader, path, "reason", "empty: say why the failure is known");
    } else {
        status = read_string(reader, json, path, "level", FIELD_OPTIONAL, &text);
        if (status < 0)
            return status;
        if (text) {
            if (parse_level(text, &rule->level) < 0)
                return bad_field(reader, path, "level",
                                 "'%s' is not not_guaranteed, run_to_run or gpu_to_gpu", text);
            rule->has_level = true;
        }
        status = read_array(reader, json, path, "allow", FIELD_OPTIONAL, &allow);
        if (status == AUDIT_OK && allow)
            status = parse_allow_list(reader, allow, path, &rule->allow);
        if (status == AUDIT_OK)
            status = read_string(reader, json, path, "tolerate", FIELD_OPTIONAL, &rule->tolerate);
        if (status == AUDIT_OK && rule->tolerate && !rule->tolerate[0])
            status = bad_field(reader, path, "tolerate", "empty: say why the failure is known");
    }
    if (status == AUDIT_OK)
        status = read_string(reader, json, path, "match", FIELD_OPTIONAL, &rule->match);
    if (status == AUDIT_OK && rule->match && !rule->tolerate)
        status = bad_field(reader, path, "match", "only meaningful with tolerate");
    if (status == AUDIT_OK)
        status = read_string(reader, json, path, "until", FIELD_OPTIONAL, &rule->until);
    if (status == AUDIT_OK && rule->until && !is_policy_time(rule->until))
        status = bad_field(reader, path, "until",
                           "'%s' is not YYYY-MM-DD or YYYY-MM-DDTHH:MM:SSZ (UTC)", rule->until);
    return status;
}

static int parse_rule_selector(const struct json_reader *reader, const cJSON *json,
                               const char *path, struct gate_rule *rule)
{
    uint64_t index;
    int status = read_string(reader, json, path, "file", FIELD_OPTIONAL, &rule->file);
    if (status == AUDIT_OK)
        status = read_count(reader, json, path, "index", FIELD_OPTIONAL, UINT32_MAX, UINT64_MAX,
                            &index);
    if (status == AUDIT_OK)
        status = read_hash(reader, json, path, "payload_sha256", FIELD_OPTIONAL,
                           &rule->payload_sha256);
    if (status == AUDIT_OK)
        status = read_string(reader, json, path, "backend", FIELD_OPTIONAL, &rule->backend);
    if (status < 0)
        return status;
    rule->index = index == UINT64_MAX ? -1 : (int64_t)index;
    if (rule->index >= 0 && !rule->file && !rule->payload_sha256)
        return bad_field(reader, path, "index",
                         "needs file or payload_sha256 (index of which file?)");
    if (rule->source == GATE_RULE_RECORDS && !rule->file && !rule->payload_sha256)
        return bad_field(reader, path, NULL, "a records[] entry needs file or payload_sha256 "
                                             "(use backends{} for a whole backend)");
    if (rule->source == GATE_RULE_KNOWN_FAILURES && !rule->file && !rule->payload_sha256 &&
        !rule->backend)
        return bad_field(reader, path, NULL,
                         "a known failure needs file, payload_sha256 or backend (it would "
                         "tolerate every failure)");
    return AUDIT_OK;
}

int gate_policy_parse(struct gate_policy *policy, const char *path, cJSON *root,
                      struct audit_error *err)
{
    static const char *const top_keys[] = { "schema", "schema_version", "description",
                                            "allow_missing", "allow_incomplete",
                                            "allow_input_errors", "backends", "records",
                                            "known_failures", NULL };
    static const char *const backend_keys[] = { "level", "allow", "tolerate", "match", "until",
                                                "comment", NULL };
    static const char *const record_keys[] = { "file", "index", "payload_sha256", "backend",
                                               "level", "allow", "tolerate", "match", "until",
                                               "comment", NULL };
    static const char *const known_keys[] = { "file", "index", "payload_sha256", "backend",
                                              "reason", "match", "until", "comment", NULL };
    struct json_reader reader = { path, err };
    const cJSON *backends, *records, *known;
    const char *schema;
    uint64_t version;
    int status;
    gate_policy_init(policy);
    policy->root = root;
    policy->path = strdup(path);
    if (!policy->path) {
        status = audit_fail(err, AUDIT_ENOMEM, "out of memory reading %s", path);
        goto error;
    }
    if (!cJSON_IsObject(root)) {
        status = bad_field(&reader, "policy", NULL, "not a JSON object");
        goto error;
    }
    status = check_known_keys(&reader, root, "policy", top_keys);
    if (status == AUDIT_OK)
        status = read_string(&reader, root, "policy", "schema", FIELD_OPTIONAL, &schema);
    if (status < 0)
        goto error;
    if (schema && strcmp(schema, POLICY_SCHEMA) != 0) {
        status = bad_field(&reader, "policy", "schema", "'%s' is not %s", schema, POLICY_SCHEMA);
        goto error;
    }
    status = read_count(&reader, root, "policy", "schema_version", FIELD_OPTIONAL, UINT32_MAX,
                        POLICY_SCHEMA_VERSION, &version);
    if (status < 0)
        goto error;
    if (version != POLICY_SCHEMA_VERSION) {
        status = bad_field(&reader, "policy", "schema_version",
                           "version %llu: this tool reads version %d", (unsigned long long)version,
                           POLICY_SCHEMA_VERSION);
        goto error;
    }
    status = read_bool(&reader, root, "policy", "allow_missing", FIELD_OPTIONAL, false,
                       &policy->allow_missing);
    if (status == AUDIT_OK)
        status = read_bool(&reader, root, "policy", "allow_incomplete", FIELD_OPTIONAL, false,
                           &policy->allow_incomplete);
    if (status == AUDIT_OK)
        status = read_bool(&reader, root, "policy", "allow_input_errors", FIELD_OPTIONAL, false,
                           &policy->allow_input_errors);
    if (status == AUDIT_OK)
        status = read_object(&reader, root, "policy", "backends", FIELD_OPTIONAL, &backends);
    if (status == AUDIT_OK)
        status = read_array(&reader, root, "policy", "records", FIELD_OPTIONAL, &records);
    if (status == AUDIT_OK)
        status = read_array(&reader, root, "policy", "known_failures", FIELD_OPTIONAL, &known);
    if (status < 0)
        goto error;
    size_t capacity = (size_t)cJSON_GetArraySize(backends) + (size_t)cJSON_GetArraySize(records) +
                      (size_t)cJSON_GetArraySize(known);
    policy->rules = calloc(capacity ? capacity : 1, sizeof(*policy->rules));
    if (!policy->rules) {
        status = audit_fail(err, AUDIT_ENOMEM, "out of memory reading %s", path);
        goto error;
    }
    const cJSON *item;
    cJSON_ArrayForEach(item, backends) {
        struct gate_rule *rule = &policy->rules[policy->rule_count++];
        char rule_path[GATE_PATH_BYTES];
        rule->source = GATE_RULE_BACKENDS;
        rule->index = -1;
        rule->backend = item->string;
        join_path(rule_path, sizeof(rule_path), "policy.backends", item->string, -1);
        memcpy(rule->origin, rule_path, sizeof(rule->origin));
        if (!cJSON_IsObject(item)) {
            status = bad_field(&reader, rule_path, NULL, "not an object");
            goto error;
        }
        status = check_known_keys(&reader, item, rule_path, backend_keys);
        if (status == AUDIT_OK)
            status = parse_rule_effect(&reader, item, rule_path, rule);
        if (status < 0)
            goto error;
    }
    const cJSON *lists[] = { records, known };
    const enum gate_rule_source sources[] = { GATE_RULE_RECORDS, GATE_RULE_KNOWN_FAILURES };
    const char *const *keys[] = { record_keys, known_keys };
    for (size_t list = 0; list < 2; list++) {
        int i = 0;
        cJSON_ArrayForEach(item, lists[list]) {
            struct gate_rule *rule = &policy->rules[policy->rule_count++];
            char rule_path[GATE_PATH_BYTES];
            rule->source = sources[list];
            join_path(rule_path, sizeof(rule_path), "policy",
                      list == 0 ? "records" : "known_failures", i++);
            memcpy(rule->origin, rule_path, sizeof(rule->origin));
            if (!cJSON_IsObject(item)) {
                status = bad_field(&reader, rule_path, NULL, "not an object");
                goto error;
            }
            status = check_known_keys(&reader, item, rule_path, keys[list]);
            if (status == AUDIT_OK)
                status = parse_rule_selector(&reader, item, rule_path, rule);
            if (status == AUDIT_OK)
                status = parse_rule_effect(&reader, item, rule_path, rule);
            if (status < 0)
                goto error;
        }
    }
    return AUDIT_OK;
error:
    gate_policy_release(policy);
    return status;
}

int gate_policy_load(struct gate_policy *policy, const char *path, struct audit_error *err)
{
    cJSON *root = NULL;
    gate_policy_init(policy);
    int status = json_read_file(path, &root, err);
    if (status < 0)
        return status;
    return gate_policy_parse(policy, path, root, err);
}

/* ---- judging one record x backend ----------------------------------------------------------- */

const char *gate_status_name(enum gate_status status)
{
    switch (status) {
    case GATE_PASS: return "pass";
    case GATE_FAIL: return "fail";
    case GATE_TOLERATED: return "tolerated";
    case GATE_MISSING: return "missing";
    }
    return "unknown";
}

bool gate_entry_fails(enum gate_status status, const struct gate_policy *policy)
{
    return status == GATE_FAIL || (status == GATE_MISSING && !(policy && policy->allow_missing));
}

/* A selector's file names the record's path, a path suffix at a '/' boundary, or (without a
 * '/') its base name: reports written on other machines hold other absolute paths. */
static bool file_matches(const char *selector, const char *file)
{
    if (!strchr(selector, '/'))
        return strcmp(base_name(file), selector) == 0;
    size_t selector_length = strlen(selector), file_length = strlen(file);
    if (file_length == selector_length)
        return strcmp(file, selector) == 0;
    return file_length > selector_length && file[file_length - selector_length - 1] == '/' &&
           strcmp(file + file_length - selector_length, selector) == 0;
}

static bool rule_matches(const struct gate_rule *rule, const struct gate_record *record,
                         const char *backend)
{
    if (rule->backend && strcmp(rule->backend, backend) != 0)
        return false;
    if (rule->file && !file_matches(rule->file, record->file))
        return false;
    if (rule->index >= 0 && (int64_t)record->index != rule->index)
        return false;
    if (rule->payload_sha256 && strcmp(rule->payload_sha256, record->payload_sha256) != 0)
        return false;
    return true;
}

/* A date-only "until" lasts to the end of that day (UTC). */
static bool rule_expired(const struct gate_rule *rule, const char *now)
{
    if (!rule->until)
        return false;
    if (strlen(rule->until) == 10)
        return strncmp(now, rule->until, 10) > 0;
    return strcmp(now, rule->until) > 0;
}

/* The level and allowances in force for one record x backend: backends{} first, then the first
 * records[] entry naming a level (the more specific wins); allow lists add up. */
struct entry_rules {
    enum topk_determinism level;
    const char *level_origin; /* NULL: the backend's claim */
    uint32_t allow;
};

static void resolve_rules(const struct gate_policy *policy, const struct gate_record *record,
                          const char *backend, enum topk_determinism claimed,
                          struct entry_rules *rules)
{
    rules->level = claimed;
    rules->level_origin = NULL;
    rules->allow = 0;
    bool record_level = false;
    for (size_t i = 0; policy && i < policy->rule_count; i++) {
        const struct gate_rule *rule = &policy->rules[i];
        if (rule->source == GATE_RULE_KNOWN_FAILURES || !rule_matches(rule, record, backend))
            continue;
        rules->allow |= rule->allow;
        if (!rule->has_level || record_level)
            continue;
        rules->level = rule->level;
        rules->level_origin = rule->origin;
        record_level = rule->source == GATE_RULE_RECORDS;
    }
}

/* Collects the reasons, notes and rows of one entry. */
struct entry_builder {
    cJSON *reasons, *notes, *rows;
    uint32_t allow;
    unsigned failures;
    char prefix[96];     /* "device 1 (ordinal 0): " when judging one device of several */
    int64_t device_index;
};

static void add_formatted(cJSON *array, const char *prefix, const char *text)
{
    char line[1024];
    int length = snprintf(line, sizeof(line), "%s%s", prefix, text);
    if (length < 0)
        return;
    cJSON_AddItemToArray(array, cJSON_CreateString(line));
}

static void entry_note(struct entry_builder *builder, const char *format, ...)
    __attribute__((format(printf, 2, 3)));
static void entry_note(struct entry_builder *builder, const char *format, ...)
{
    char text[900];
    va_list args;
    va_start(args, format);
    vsnprintf(text, sizeof(text), format, args);
    va_end(args);
    add_formatted(builder->notes, builder->prefix, text);
}

/* A failure, unless the policy allows allow_item (-1: nothing allows it), in which case a note.
 * Returns true when it counted as a failure. */
static bool entry_fail(struct entry_builder *builder, int allow_item, const char *format, ...)
    __attribute__((format(printf, 3, 4)));
static bool entry_fail(struct entry_builder *builder, int allow_item, const char *format, ...)
{
    char text[900];
    va_list args;
    va_start(args, format);
    vsnprintf(text, sizeof(text), format, args);
    va_end(args);
    if (allow_item >= 0 && (builder->allow & GATE_ALLOW_BIT((unsigned)allow_item))) {
        char note[1000];
        if (snprintf(note, sizeof(note), "allowed by the policy (%s): %s",
                     gate_allow_name((unsigned)allow_item), text) < 0)
            return false;
        add_formatted(builder->notes, builder->prefix, note);
        return false;
    }
    add_formatted(builder->reasons, builder->prefix, text);
    builder->failures++;
    return true;
}

/* Adds the rows of a report list (numbers, or objects with "row") as {row, why, ...}. */
static void entry_rows(struct entry_builder *builder, const cJSON *list, const char *why)
{
    unsigned listed = 0;
    const cJSON *item;
    cJSON_ArrayForEach(item, list) {
        if (listed++ >= GATE_MAX_ROWS_PER_LIST)
            break;
        const cJSON *row = cJSON_IsObject(item) ? child(item, "row") : item;
        if (!is_integral_count(row, UINT32_MAX))
            continue;
        cJSON *entry = cJSON_CreateObject();
        if (!entry)
            return;
        cJSON_AddNumberToObject(entry, "row", row->valuedouble);
        cJSON_AddStringToObject(entry, "why", why);
        if (builder->device_index >= 0)
            cJSON_AddNumberToObject(entry, "device_index", (double)builder->device_index);
        static const char *const copied[] = { "reps_differing", "reps_set_differing",
                                              "max_indices_differing", "contexts_differing" };
        for (size_t i = 0; cJSON_IsObject(item) && i < sizeof(copied) / sizeof(copied[0]); i++) {
            const cJSON *value = child(item, copied[i]);
            if (cJSON_IsNumber(value))
                cJSON_AddNumberToObject(entry, copied[i], value->valuedouble);
        }
        cJSON_AddItemToArray(builder->rows, entry);
    }
}

static const char *reps_word(const char *label)
{
    return label[0] ? "replay(s)" : "rep(s)";
}

/* gpu_to_gpu: every rep (or graph replay) must carry the record's reference hash and the
 * baseline's hash. A baseline-format document judged as a report has its distinct hashes only. */
static void judge_hashes(struct entry_builder *builder, const struct gate_tally *tally,
                         const char *label, const char *reference, const char *golden,
                         const char *golden_origin)
{
    const bool per_rep = tally->rep_hashes != NULL;
    const char **hashes = per_rep ? tally->rep_hashes : tally->distinct_hashes;
    const uint32_t count = per_rep ? tally->reps : tally->distinct_count;
    const char *word = per_rep ? reps_word(label) : "distinct output(s)";
    uint32_t not_reference = 0, not_golden = 0;
    for (uint32_t i = 0; i < count; i++) {
        not_reference += strcmp(hashes[i], reference) != 0;
        not_golden += golden && strcmp(hashes[i], golden) != 0;
    }
    if (not_reference)
        entry_fail(builder, GATE_ALLOW_REFERENCE_MISMATCH,
                   "%soutput differs from the CPU reference (%.12s) in %u of %u %s", label,
                   reference, not_reference, count, word);
    if (not_golden)
        entry_fail(builder, GATE_ALLOW_BASELINE_MISMATCH,
                   "%s%u of %u %s differ from %s (%.12s); the report has hashes, not outputs: "
                   "rerun both with --dump-outputs to see the rows",
                   label, not_golden, count, word, golden_origin, golden);
}

/* The contract violations of one tally, by the rule of the level; wrong_set and short are
 * forgiven on rows the census predicts to overflow a staging buffer that drops candidates
 * (the report lists the unforgiven rows for the eager reps; for graph replays it has counts
 * only, so they are forgiven when no more rows show them than the census predicts). */
static void judge_violations(struct entry_builder *builder, const struct verdict_rule *rule,
                             const struct gate_backend *backend, const struct gate_tally *tally,
                             const char *label)
{
    const struct staging_model *staging = staging_model_for(backend->name);
    const bool can_forgive = staging && staging->drops_on_overflow && !backend->exact_set;
    const bool graph = label[0] != '\0';
    if (!tally->has_violations)
        return; /* a baseline-format document: the run's own verdict judged them */
    for (unsigned kind = 0; kind < (unsigned)CHECK_KIND_COUNT; kind++) {
        const uint64_t rows = tally->violation_rows[kind];
        const char *name = report_violation_name(kind);
        if (rows == 0 || !(rule->forbidden & (1u << kind)))
            continue;
        const bool wrong_kind = kind == CHECK_WRONG_SET || kind == CHECK_SHORT;
        if (!(can_forgive && (rule->forgiven_on_overflow & (1u << kind)))) {
            if (entry_fail(builder, (int)kind,
                           "%s%s on %llu row(s), %llu row-rep(s) in total over %u %s", label, name,
                           (unsigned long long)rows,
                           (unsigned long long)tally->violation_total_rows[kind], tally->reps,
                           reps_word(label)) &&
                wrong_kind && !graph)
                entry_rows(builder, backend->wrong_not_predicted_overflow_list, name);
            continue;
        }
        if (!backend->has_prediction) {
            entry_fail(builder, (int)kind,
                       "%s%s on %llu row(s) and the report has no predicted_vs_observed block to "
                       "tell the rows the %s staging overflows",
                       label, name, (unsigned long long)rows, staging->name);
        } else if (!graph && backend->wrong_not_predicted_overflow > 0) {
            if (entry_fail(builder, (int)kind,
                           "%s on %llu row(s); %llu row(s) with wrong_set or short are not "
                           "predicted to overflow the %s staging",
                           name, (unsigned long long)rows,
                           (unsigned long long)backend->wrong_not_predicted_overflow,
                           staging->name))
                entry_rows(builder, backend->wrong_not_predicted_overflow_list,
                           "wrong_not_predicted_overflow");
        } else if (graph && rows > backend->predicted_overflow_rows) {
            entry_fail(builder, (int)kind,
                       "%s%s on %llu row(s), more than the %llu row(s) predicted to overflow the "
                       "%s staging",
                       label, name, (unsigned long long)rows,
                       (unsigned long long)backend->predicted_overflow_rows, staging->name);
        } else {
            entry_note(builder,
                       "%s%s on %llu row(s), forgiven: predicted to overflow the %s staging "
                       "(documented failure mode)",
                       label, name, (unsigned long long)rows, staging->name);
        }
    }
}

/* A backend that replayed (status ok), judged by level. */
static void judge_measured(struct entry_builder *builder, const struct gate_record *record,
                           const struct gate_backend *backend, enum topk_determinism level,
                           const char *golden, const char *golden_origin)
{
    const struct verdict_rule *rule = verdict_rule_for(level);
    const char *level_name = topk_determinism_name(level);
    const struct gate_tally *eager = &backend->eager;
    if (eager->reps == 0)
        entry_fail(builder, -1, "no rep completed");
    if (!eager->has_violations)
        entry_note(builder, "a baseline-format document: judged by its distinct output hashes "
                            "and the run's own verdict (no violation counts)");
    if (rule->equal_reference)
        judge_hashes(builder, eager, "", record->reference_output_sha256, golden, golden_origin);
    if (rule->single_output && eager->distinct_count > 1 &&
        entry_fail(builder, GATE_ALLOW_FLAPPING,
                   "%u distinct outputs over %u reps (claims %s: one); %llu flapping row(s)",
                   eager->distinct_count, eager->reps, level_name,
                   (unsigned long long)eager->flapping_rows_total))
        entry_rows(builder, eager->flapping_rows, "flapping");
    judge_violations(builder, rule, backend, eager, "");
    if (backend->has_graph) {
        const struct gate_tally *graph = &backend->graph;
        if (backend->graph_error)
            entry_fail(builder, -1, "graph: %s", backend->graph_error);
        if (backend->graph_ran) {
            judge_violations(builder, rule, backend, graph, "graph: ");
            if (rule->equal_reference)
                judge_hashes(builder, graph, "graph: ", record->reference_output_sha256, golden,
                             golden_origin);
            const uint64_t mismatch = graph->violation_rows[REPORT_GRAPH_MISMATCH];
            if (rule->graph_equals_eager && mismatch > 0 &&
                entry_fail(builder, (int)REPORT_GRAPH_MISMATCH,
                           "graph_mismatch: graph replays differ from the first eager output on "
                           "%llu row(s) (claims %s)",
                           (unsigned long long)mismatch, level_name))
                entry_rows(builder, graph->flapping_rows, "graph_mismatch");
        }
    }
    if (backend->has_batch) {
        if (backend->batch_error)
            entry_fail(builder, -1, "batch invariance: %s", backend->batch_error);
        if (backend->batch_ran && rule->batch_invariant && backend->batch_dependent_rows > 0 &&
            entry_fail(builder, GATE_ALLOW_BATCH_DEPENDENT,
                       "batch invariance: %llu row(s) change with the batch they are in "
                       "(claims %s)",
                       (unsigned long long)backend->batch_dependent_rows, level_name))
            entry_rows(builder, backend->batch_dependent_list, "batch_dependent");
    }
}

/* One backend entry (or one device's entry) of the report. */
static void judge_backend(struct entry_builder *builder, const struct gate_record *record,
                          const struct gate_backend *backend,
                          const struct gate_backend *baseline_backend,
                          const struct entry_rules *rules, const char *golden,
                          const char *golden_origin)
{
    const char *status = backend_status_name(backend->status);
    const unsigned failures_before = builder->failures;
    switch (backend->status) {
    case BACKEND_OK:
        judge_measured(builder, record, backend, rules->level, golden, golden_origin);
        break;
    case BACKEND_ERROR:
    case BACKEND_HANG:
    case BACKEND_CRASH:
    case BACKEND_CUDA_ERROR:
        entry_fail(builder, -1, "%s: %s", status, backend->reason ? backend->reason : "(no reason)");
        break;
    case BACKEND_UNSUPPORTED:
    case BACKEND_UNAVAILABLE:
    case BACKEND_SKIPPED:
        if (baseline_backend && baseline_backend->status == BACKEND_OK)
            entry_fail(builder, GATE_ALLOW_NOT_RUN, "%s here (%s), ok in the baseline", status,
                       backend->reason ? backend->reason : "no reason given");
        else
            entry_note(builder, "%s here (%s); %s", status,
                       backend->reason ? backend->reason : "no reason given",
                       baseline_backend ? "not ok in the baseline either" : "no baseline entry");
        break;
    }
    /* The report judged itself by the claimed level with the exact per-row data (graph
     * forgiveness in particular): when gate judges the same level with no allowance and found
     * nothing, a failing report verdict still fails. */
    if (backend->status == BACKEND_OK && builder->failures == failures_before &&
        !rules->level_origin && rules->allow == 0 && backend->verdict == VERDICT_FAIL) {
        const cJSON *first = cJSON_GetArrayItem(backend->verdict_reasons, 0);
        entry_fail(builder, -1, "the report's own verdict is fail: %s",
                   cJSON_IsString(first) ? first->valuestring : "(no reason given)");
    }
}

/* run_to_run promises one output per GPU model: devices of one model must agree. */
static void judge_device_agreement(struct entry_builder *builder,
                                   const struct gate_backend *backend,
                                   enum topk_determinism level)
{
    const struct gate_backend *first = NULL;
    if (level != TOPK_RUN_TO_RUN)
        return;
    for (size_t i = 0; i < backend->per_device_count; i++) {
        const struct gate_backend *device = &backend->per_device[i];
        if (device->status != BACKEND_OK || device->eager.distinct_count != 1)
            continue;
        if (!first) {
            first = device;
            continue;
        }
        const struct gate_device_identity *a = &first->device, *b = &device->device;
        const bool same_model = a->name && b->name && strcmp(a->name, b->name) == 0 &&
                                a->sm_count == b->sm_count &&
                                a->smem_per_sm_bytes == b->smem_per_sm_bytes &&
                                (!a->compute_capability || !b->compute_capability ||
                                 strcmp(a->compute_capability, b->compute_capability) == 0);
        if (same_model &&
            strcmp(first->eager.distinct_hashes[0], device->eager.distinct_hashes[0]) != 0)
            entry_fail(builder, GATE_ALLOW_DEVICE_MISMATCH,
                       "device %lld (ordinal %lld) output %.12s differs from device %lld "
                       "(ordinal %lld) output %.12s on the same GPU model (claims run_to_run)",
                       (long long)b->device_index, (long long)b->ordinal,
                       device->eager.distinct_hashes[0], (long long)a->device_index,
                       (long long)a->ordinal, first->eager.distinct_hashes[0]);
    }
}

/* Is the report's record the same audit as the baseline's (k, rows, reference)? */
static void judge_comparable(struct entry_builder *builder, const struct gate_record *record,
                             const struct gate_record *baseline_record)
{
    if (record->k != baseline_record->k || record->rows != baseline_record->rows)
        entry_fail(builder, -1,
                   "not the same audit: k %u and %u row(s) here, k %u and %u row(s) in the "
                   "baseline (--k or --rows differ)",
                   record->k, record->rows, baseline_record->k, baseline_record->rows);
    else if (strcmp(record->reference_output_sha256, baseline_record->reference_output_sha256))
        entry_fail(builder, -1,
                   "not the same audit: the CPU reference hash is %.12s here and %.12s in the "
                   "baseline (other --rows, or a changed reference implementation)",
                   record->reference_output_sha256, baseline_record->reference_output_sha256);
}

static bool reasons_all_contain(const cJSON *reasons, const char *text)
{
    const cJSON *item;
    cJSON_ArrayForEach(item, reasons)
        if (!cJSON_IsString(item) || !strstr(item->valuestring, text))
            return false;
    return true;
}

/* A failing or missing entry the policy knows about becomes tolerated. */
static enum gate_status apply_tolerance(struct entry_builder *builder, cJSON *entry,
                                        struct gate_policy *policy,
                                        const struct gate_record *record, const char *backend,
                                        const char *now, enum gate_status status)
{
    for (size_t i = 0; policy && i < policy->rule_count; i++) {
        struct gate_rule *rule = &policy->rules[i];
        if (!rule->tolerate || !rule_matches(rule, record, backend))
            continue;
        if (rule_expired(rule, now)) {
            entry_note(builder, "%s (\"%s\") expired on %s: no longer tolerated", rule->origin,
                       rule->tolerate, rule->until);
            continue;
        }
        if (rule->match && !reasons_all_contain(builder->reasons, rule->match)) {
            entry_note(builder, "%s (\"%s\") tolerates only failures mentioning \"%s\": not "
                                "every failure here does",
                       rule->origin, rule->tolerate, rule->match);
            continue;
        }
        rule->times_used++;
        cJSON *by = cJSON_AddObjectToObject(entry, "tolerated_by");
        if (by) {
            cJSON_AddStringToObject(by, "rule", rule->origin);
            cJSON_AddStringToObject(by, "reason", rule->tolerate);
            if (rule->until)
                cJSON_AddStringToObject(by, "until", rule->until);
            else
                cJSON_AddNullToObject(by, "until");
        }
        return GATE_TOLERATED;
    }
    return status;
}

/* The baseline's expected output hash of a gpu_to_gpu backend: its single output when it ran
 * there, else its CPU reference. */
static const char *golden_hash(struct entry_builder *builder,
                               const struct gate_record *baseline_record,
                               const struct gate_backend *baseline_backend, char *origin,
                               size_t origin_size)
{
    if (!baseline_record)
        return NULL;
    if (baseline_backend && baseline_backend->status == BACKEND_OK &&
        baseline_backend->eager.distinct_count == 1) {
        const char *hash = baseline_backend->eager.distinct_hashes[0];
        snprintf(origin, origin_size, "the baseline's %s output", baseline_backend->name);
        if (strcmp(hash, baseline_record->reference_output_sha256) != 0)
            entry_note(builder, "the baseline's own %s output (%.12s) is not its CPU reference "
                                "(%.12s): regenerate the baseline from a passing run",
                       baseline_backend->name, hash, baseline_record->reference_output_sha256);
        return hash;
    }
    if (baseline_backend && baseline_backend->status == BACKEND_OK)
        entry_note(builder, "the baseline's own %s reps show %u distinct outputs: compared with "
                            "its CPU reference instead",
                   baseline_backend->name, baseline_backend->eager.distinct_count);
    snprintf(origin, origin_size, "the baseline's CPU reference");
    return baseline_record->reference_output_sha256;
}

cJSON *gate_judge_entry(const struct gate_record *baseline_record,
                        const struct gate_backend *baseline_backend,
                        const struct gate_record *report_record,
                        const struct gate_backend *report_backend, struct gate_policy *policy,
                        const struct gate_options *options, enum gate_status *status_out)
{
    const struct gate_record *record = report_record ? report_record : baseline_record;
    const struct gate_backend *named = report_backend ? report_backend : baseline_backend;
    struct entry_rules rules;
    struct entry_builder builder = { .device_index = -1 };
    enum gate_status status;
    cJSON *entry = cJSON_CreateObject();
    if (!entry || !record || !named) {
        cJSON_Delete(entry);
        return NULL;
    }
    resolve_rules(policy, record, named->name, named->level, &rules);
    builder.allow = rules.allow;
    cJSON_AddStringToObject(entry, "file", record->file);
    cJSON_AddNumberToObject(entry, "index", record->index);
    if (record->global_index >= 0)
        cJSON_AddNumberToObject(entry, "global_index", (double)record->global_index);
    cJSON_AddStringToObject(entry, "payload_sha256", record->payload_sha256);
    cJSON_AddStringToObject(entry, "backend", named->name);
    cJSON_AddStringToObject(entry, "level", topk_determinism_name(rules.level));
    cJSON_AddStringToObject(entry, "claimed_level", topk_determinism_name(named->level));
    cJSON_AddStringToObject(entry, "level_from", rules.level_origin ? rules.level_origin : "claim");
    if (report_backend)
        cJSON_AddStringToObject(entry, "report_status",
                                backend_status_name(report_backend->status));
    else
        cJSON_AddNullToObject(entry, "report_status");
    if (baseline_backend)
        cJSON_AddStringToObject(entry, "baseline_status",
                                backend_status_name(baseline_backend->status));
    else
        cJSON_AddNullToObject(entry, "baseline_status");
    cJSON *status_item = cJSON_AddStringToObject(entry, "status", "pass");
    builder.reasons = cJSON_AddArrayToObject(entry, "reasons");
    builder.notes = cJSON_AddArrayToObject(entry, "notes");
    builder.rows = cJSON_AddArrayToObject(entry, "rows");
    if (!status_item || !builder.reasons || !builder.notes || !builder.rows) {
        cJSON_Delete(entry);
        return NULL;
    }

    if (!report_backend) {
        add_formatted(builder.reasons, "",
                      report_record ? "the backend is not in the report's record"
                                    : "the record is not in the report");
        status = GATE_MISSING;
    } else {
        char origin[GATE_PATH_BYTES + 64] = "";
        const char *golden = NULL;
        if (rules.level_origin)
            entry_note(&builder, "level %s set by %s (the backend claims %s)",
                       topk_determinism_name(rules.level), rules.level_origin,
                       topk_determinism_name(named->level));
        if (!baseline_record) {
            entry_note(&builder, "the record is not in the baseline: judged by its level alone");
        } else {
            judge_comparable(&builder, report_record, baseline_record);
            if (!baseline_backend)
                entry_note(&builder, "the backend is not in the baseline's record: judged by its "
                                     "level alone");
            if (rules.level == TOPK_GPU_TO_GPU)
                golden = golden_hash(&builder, baseline_record, baseline_backend, origin,
                                     sizeof(origin));
        }
        if (report_backend->per_device_count == 0) {
            judge_backend(&builder, report_record, report_backend, baseline_backend, &rules,
                          golden, origin);
        } else {
            for (size_t i = 0; i < report_backend->per_device_count; i++) {
                const struct gate_backend *device = &report_backend->per_device[i];
                snprintf(builder.prefix, sizeof(builder.prefix), "device %lld (ordinal %lld): ",
                         (long long)device->device.device_index, (long long)device->device.ordinal);
                builder.device_index = device->device.device_index;
                judge_backend(&builder, report_record, device, baseline_backend, &rules, golden,
                              origin);
            }
            builder.prefix[0] = '\0';
            builder.device_index = -1;
            judge_device_agreement(&builder, report_backend, rules.level);
        }
        status = builder.failures ? GATE_FAIL : GATE_PASS;
    }
    if (status == GATE_FAIL || status == GATE_MISSING)
        status = apply_tolerance(&builder, entry, policy, record, named->name, options->now,
                                 status);
    if (!cJSON_GetObjectItemCaseSensitive(entry, "tolerated_by"))
        cJSON_AddNullToObject(entry, "tolerated_by");
    cJSON_SetValuestring(status_item, gate_status_name(status));
    *status_out = status;
    return entry;
}

/* ---- judging reports ------------------------------------------------------------------------ */

static bool same_record(const struct gate_record *a, const struct gate_record *b)
{
    return a->index == b->index && strcmp(a->payload_sha256, b->payload_sha256) == 0 &&
           strcmp(base_name(a->file), base_name(b->file)) == 0;
}

/* The document's record matching key (payload hash, file base name, index); *hint is where the
 * last match was, so that documents in the same order match in linear time. */
static const struct gate_record *find_record(const struct gate_document *document,
                                             const struct gate_record *key, size_t *hint,
                                             size_t *found_at)
{
    for (size_t step = 0; step < document->record_count; step++) {
        size_t i = (*hint + step) % document->record_count;
        if (same_record(&document->records[i], key)) {
            *hint = i + 1;
            *found_at = i;
            return &document->records[i];
        }
    }
    return NULL;
}

static const struct gate_backend *find_backend(const struct gate_record *record, const char *name)
{
    for (size_t i = 0; record && i < record->backend_count; i++)
        if (strcmp(record->backends[i].name, name) == 0)
            return &record->backends[i];
    return NULL;
}

static void count_entry(struct gate_counts *counts, cJSON *summary, enum gate_status status)
{
    counts->entries++;
    const char *key = gate_status_name(status);
    switch (status) {
    case GATE_PASS: counts->pass++; break;
    case GATE_FAIL: counts->fail++; break;
    case GATE_TOLERATED: counts->tolerated++; break;
    case GATE_MISSING: counts->missing++; break;
    }
    cJSON *counter = cJSON_GetObjectItemCaseSensitive(summary, key);
    if (counter)
        cJSON_SetNumberValue(counter, counter->valuedouble + 1);
    counter = cJSON_GetObjectItemCaseSensitive(summary, "entries");
    if (counter)
        cJSON_SetNumberValue(counter, counter->valuedouble + 1);
}

static void add_judged(cJSON *entries, cJSON *summary, struct gate_counts *counts, cJSON *entry,
                       enum gate_status status, bool *out_of_memory)
{
    if (!entry) {
        *out_of_memory = true;
        return;
    }
    cJSON_AddItemToArray(entries, entry);
    count_entry(counts, summary, status);
}

static cJSON *document_origin_json(const struct gate_document *document)
{
    cJSON *json = cJSON_CreateObject();
    if (!json)
        return NULL;
    const cJSON *context = document->context;
    const cJSON *device = child(context, "device");
    const cJSON *host = child(context, "host"), *when = child(context, "utc_time");
    cJSON_AddStringToObject(json, "path", document->path);
    cJSON_AddStringToObject(json, "schema",
                            document->is_baseline ? BASELINE_SCHEMA : REPORT_SCHEMA);
    cJSON_AddBoolToObject(json, "complete", document->complete);
    if (cJSON_IsString(host))
        cJSON_AddStringToObject(json, "host", host->valuestring);
    else
        cJSON_AddNullToObject(json, "host");
    if (cJSON_IsString(when))
        cJSON_AddStringToObject(json, "utc_time", when->valuestring);
    else
        cJSON_AddNullToObject(json, "utc_time");
    const cJSON *name = child(device, "name");
    if (cJSON_IsString(name))
        cJSON_AddStringToObject(json, "device", name->valuestring);
    else
        cJSON_AddNullToObject(json, "device");
    cJSON_AddNumberToObject(json, "records", (double)document->record_count);
    return json;
}

cJSON *gate_judge_report(const struct gate_document *baseline, const struct gate_document *report,
                         struct gate_policy *policy, const struct gate_options *options,
                         struct gate_counts *counts)
{
    bool out_of_memory = false;
    bool *baseline_matched = calloc(baseline->record_count ? baseline->record_count : 1,
                                    sizeof(bool));
    cJSON *json = document_origin_json(report);
    cJSON *report_reasons = json ? cJSON_AddArrayToObject(json, "report_reasons") : NULL;
    cJSON *report_notes = json ? cJSON_AddArrayToObject(json, "report_notes") : NULL;
    cJSON *status_item = json ? cJSON_AddStringToObject(json, "status", "pass") : NULL;
    cJSON *entries = json ? cJSON_AddArrayToObject(json, "entries") : NULL;
    cJSON *summary = json ? cJSON_AddObjectToObject(json, "summary") : NULL;
    if (!baseline_matched || !report_reasons || !report_notes || !status_item || !entries ||
        !summary)
        goto no_memory;
    static const char *const counters[] = { "entries", "pass", "fail", "tolerated", "missing" };
    for (size_t i = 0; i < sizeof(counters) / sizeof(counters[0]); i++)
        cJSON_AddNumberToObject(summary, counters[i], 0);

    bool report_failed = false;
    if (!report->complete) {
        char text[700];
        snprintf(text, sizeof(text), "the report is incomplete: %s",
                 report->stop_reason ? report->stop_reason : "no reason given");
        cJSON_AddItemToArray(policy->allow_incomplete ? report_notes : report_reasons,
                             cJSON_CreateString(text));
        report_failed = report_failed || !policy->allow_incomplete;
    }
    const int input_errors = cJSON_GetArraySize(report->input_errors);
    if (input_errors > 0) {
        const cJSON *first = child(cJSON_GetArrayItem(report->input_errors, 0), "message");
        char text[700];
        snprintf(text, sizeof(text), "%d input error(s), the first: %s", input_errors,
                 cJSON_IsString(first) ? first->valuestring : "(no message)");
        cJSON_AddItemToArray(policy->allow_input_errors ? report_notes : report_reasons,
                             cJSON_CreateString(text));
        report_failed = report_failed || !policy->allow_input_errors;
    }

    size_t hint = 0;
    for (size_t r = 0; r < report->record_count && !out_of_memory; r++) {
        const struct gate_record *record = &report->records[r];
        size_t found_at = 0;
        const struct gate_record *baseline_record = find_record(baseline, record, &hint, &found_at);
        if (baseline_record)
            baseline_matched[found_at] = true;
        for (size_t b = 0; b < record->backend_count; b++) {
            const struct gate_backend *backend = &record->backends[b];
            enum gate_status status;
            cJSON *entry = gate_judge_entry(baseline_record,
                                            find_backend(baseline_record, backend->name), record,
                                            backend, policy, options, &status);
            add_judged(entries, summary, counts, entry, status, &out_of_memory);
        }
        for (size_t b = 0; baseline_record && b < baseline_record->backend_count; b++) {
            const struct gate_backend *expected = &baseline_record->backends[b];
            if (find_backend(record, expected->name))
                continue;
            enum gate_status status;
            cJSON *entry = gate_judge_entry(baseline_record, expected, record, NULL, policy,
                                            options, &status);
            add_judged(entries, summary, counts, entry, status, &out_of_memory);
        }
    }
    for (size_t r = 0; r < baseline->record_count && !out_of_memory; r++) {
        if (baseline_matched[r])
            continue;
        const struct gate_record *expected = &baseline->records[r];
        for (size_t b = 0; b < expected->backend_count; b++) {
            enum gate_status status;
            cJSON *entry = gate_judge_entry(expected, &expected->backends[b], NULL, NULL,
                                            policy, options, &status);
            add_judged(entries, summary, counts, entry, status, &out_of_memory);
        }
    }
    if (out_of_memory)
        goto no_memory;
    bool entries_fail = false;
    const cJSON *entry;
    cJSON_ArrayForEach(entry, entries) {
        const cJSON *status = child(entry, "status");
        enum gate_status value = strcmp(status->valuestring, "fail") == 0      ? GATE_FAIL
                                 : strcmp(status->valuestring, "missing") == 0 ? GATE_MISSING
                                                                               : GATE_PASS;
        entries_fail = entries_fail || gate_entry_fails(value, policy);
    }
    if (report_failed)
        counts->failing_reports++;
    cJSON_SetValuestring(status_item, report_failed || entries_fail ? "fail" : "pass");
    free(baseline_matched);
    return json;
no_memory:
    free(baseline_matched);
    cJSON_Delete(json);
    return NULL;
}

int gate_verdict(const struct gate_document *baseline, const struct gate_document *reports,
                 size_t report_count, struct gate_policy *policy,
                 const struct gate_options *options, const cJSON *context, cJSON **verdict_out,
                 struct gate_counts *counts, struct audit_error *err)
{
    cJSON *verdict = cJSON_CreateObject();
    *verdict_out = NULL;
    memset(counts, 0, sizeof(*counts));
    if (!verdict)
        goto no_memory;
    cJSON_AddStringToObject(verdict, "schema", GATE_SCHEMA);
    cJSON_AddNumberToObject(verdict, "schema_version", GATE_SCHEMA_VERSION);
    cJSON *context_copy = context ? cJSON_Duplicate(context, 1) : cJSON_CreateObject();
    if (!context_copy)
        goto no_memory;
    cJSON_AddItemToObject(verdict, "context", context_copy);
    cJSON_AddStringToObject(context_copy, "now", options->now);
    cJSON_AddItemToObject(context_copy, "baseline", document_origin_json(baseline));
    if (policy && policy->path) {
        cJSON *policy_json = cJSON_AddObjectToObject(context_copy, "policy");
        if (policy_json) {
            cJSON_AddStringToObject(policy_json, "path", policy->path);
            cJSON_AddNumberToObject(policy_json, "rules", (double)policy->rule_count);
            cJSON_AddBoolToObject(policy_json, "allow_missing", policy->allow_missing);
            cJSON_AddBoolToObject(policy_json, "allow_incomplete", policy->allow_incomplete);
            cJSON_AddBoolToObject(policy_json, "allow_input_errors", policy->allow_input_errors);
        }
    } else {
        cJSON_AddNullToObject(context_copy, "policy");
    }
    cJSON *report_list = cJSON_AddArrayToObject(verdict, "reports");
    if (!report_list)
        goto no_memory;
    for (size_t i = 0; i < report_count; i++) {
        cJSON *judged = gate_judge_report(baseline, &reports[i], policy, options, counts);
        if (!judged)
            goto no_memory;
        cJSON_AddItemToArray(report_list, judged);
    }
    /* Tolerances that tolerated nothing: the failure they describe is gone (or mistyped). */
    cJSON *unused = cJSON_AddArrayToObject(verdict, "unused_tolerances");
    for (size_t i = 0; unused && policy && i < policy->rule_count; i++) {
        const struct gate_rule *rule = &policy->rules[i];
        if (!rule->tolerate || rule->times_used > 0)
            continue;
        cJSON *item = cJSON_CreateObject();
        if (!item)
            goto no_memory;
        cJSON_AddStringToObject(item, "rule", rule->origin);
        cJSON_AddStringToObject(item, "reason", rule->tolerate);
        cJSON_AddItemToArray(unused, item);
    }
    cJSON *summary = cJSON_AddObjectToObject(verdict, "summary");
    if (!summary)
        goto no_memory;
    json_add_u64(summary, "reports", report_count);
    json_add_u64(summary, "failing_reports", counts->failing_reports);
    json_add_u64(summary, "entries", counts->entries);
    json_add_u64(summary, "pass", counts->pass);
    json_add_u64(summary, "fail", counts->fail);
    json_add_u64(summary, "tolerated", counts->tolerated);
    json_add_u64(summary, "missing", counts->missing);
    const bool failed = counts->fail > 0 || counts->failing_reports > 0 ||
                        (counts->missing > 0 && !(policy && policy->allow_missing));
    cJSON_AddStringToObject(summary, "verdict", failed ? "fail" : "pass");
    cJSON_AddNumberToObject(verdict, "exit_code", failed ? EXIT_AUDIT_FAILED : EXIT_AUDIT_OK);
    *verdict_out = verdict;
    return AUDIT_OK;
no_memory:
    cJSON_Delete(verdict);
    return audit_fail(err, AUDIT_ENOMEM, "out of memory building the gate verdict");
}

/* ---- baseline ------------------------------------------------------------------------------- */

static void copy_item(cJSON *to, const cJSON *from, const char *key)
{
    const cJSON *item = child(from, key);
    cJSON_AddItemToObject(to, key, item ? cJSON_Duplicate(item, 1) : cJSON_CreateNull());
}

static cJSON *string_array(const char **strings, uint32_t count)
{
    cJSON *array = cJSON_CreateArray();
    for (uint32_t i = 0; array && i < count; i++)
        cJSON_AddItemToArray(array, cJSON_CreateString(strings[i]));
    return array;
}

/* The distinct strings of a JSON array of strings, in order of first appearance. */
static cJSON *distinct_strings_json(const cJSON *array)
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

static cJSON *baseline_backend_json(const cJSON *json, const struct gate_backend *backend)
{
    cJSON *out = cJSON_CreateObject();
    if (!out)
        return NULL;
    copy_item(out, json, "name");
    copy_item(out, json, "level");
    if (child(json, "claims"))
        copy_item(out, json, "claims");
    copy_item(out, json, "status");
    copy_item(out, json, "reason");
    copy_item(out, json, "verdict");
    if (child(json, "verdict_reasons"))
        copy_item(out, json, "verdict_reasons");
    else
        cJSON_AddItemToObject(out, "verdict_reasons", cJSON_CreateArray());
    json_add_u64(out, "reps", backend->eager.reps);
    json_add_u64(out, "distinct_outputs", backend->eager.distinct_count);
    copy_item(out, json, "distinct_sets");
    json_add_u64(out, "equals_reference_reps", backend->eager.equals_reference_reps);
    cJSON_AddItemToObject(out, "output_sha256", string_array(backend->eager.distinct_hashes,
                                                             backend->eager.distinct_count));
    cJSON_AddItemToObject(out, "set_sha256",
                          distinct_strings_json(child(json, "set_sha256_per_rep")));
    if (backend->has_graph) {
        cJSON *graph = cJSON_AddObjectToObject(out, "graph");
        const cJSON *graph_json = child(json, "graph");
        if (graph) {
            copy_item(graph, graph_json, "ran");
            copy_item(graph, graph_json, "error");
            json_add_u64(graph, "reps", backend->graph.reps);
            json_add_u64(graph, "equals_reference_reps", backend->graph.equals_reference_reps);
            cJSON_AddItemToObject(graph, "output_sha256",
                                  string_array(backend->graph.distinct_hashes,
                                               backend->graph.distinct_count));
        }
    }
    return out;
}

int gate_baseline_from_report(const cJSON *report, const char *report_name, cJSON **baseline_out,
                              struct audit_error *err)
{
    struct gate_document document;
    cJSON *copy = cJSON_Duplicate(report, 1);
    *baseline_out = NULL;
    if (!copy)
        return audit_fail(err, AUDIT_ENOMEM, "out of memory writing a baseline");
    int status = gate_document_parse(&document, report_name, copy, err);
    if (status < 0)
        return status;
    if (document.is_baseline) {
        /* Already a baseline: the subset of a subset is itself. */
        *baseline_out = cJSON_Duplicate(report, 1);
        gate_document_release(&document);
        return *baseline_out ? AUDIT_OK
                             : audit_fail(err, AUDIT_ENOMEM, "out of memory writing a baseline");
    }
    cJSON *baseline = cJSON_CreateObject();
    cJSON *source = baseline ? cJSON_CreateObject() : NULL;
    if (!source)
        goto no_memory;
    cJSON_AddStringToObject(baseline, "schema", BASELINE_SCHEMA);
    cJSON_AddNumberToObject(baseline, "schema_version", BASELINE_SCHEMA_VERSION);
    cJSON_AddStringToObject(source, "report", report_name);
    cJSON_AddStringToObject(source, "schema", REPORT_SCHEMA);
    cJSON_AddNumberToObject(source, "schema_version", REPORT_SCHEMA_VERSION);
    cJSON_AddItemToObject(baseline, "source", source);
    copy_item(baseline, document.root, "complete");
    copy_item(baseline, document.root, "stop_reason");
    copy_item(baseline, document.root, "context");
    if (document.input_errors)
        copy_item(baseline, document.root, "input_errors");
    else
        cJSON_AddItemToObject(baseline, "input_errors", cJSON_CreateArray());
    cJSON *records = cJSON_AddArrayToObject(baseline, "records");
    if (!records)
        goto no_memory;
    size_t r = 0;
    const cJSON *record_json;
    cJSON_ArrayForEach(record_json, child(document.root, "records")) {
        const struct gate_record *record = &document.records[r++];
        cJSON *out = cJSON_CreateObject();
        if (!out)
            goto no_memory;
        cJSON_AddItemToArray(records, out);
        static const char *const kept[] = { "file", "index", "payload_sha256", "rows",
                                            "source_rows", "k", "record_k", "reference" };
        for (size_t i = 0; i < sizeof(kept) / sizeof(kept[0]); i++)
            copy_item(out, record_json, kept[i]);
        if (record->global_index >= 0)
            cJSON_AddNumberToObject(out, "global_index", (double)record->global_index);
        cJSON *backends = cJSON_AddArrayToObject(out, "backends");
        if (!backends)
            goto no_memory;
        size_t b = 0;
        const cJSON *backend_json;
        cJSON_ArrayForEach(backend_json, child(record_json, "backends")) {
            cJSON *backend = baseline_backend_json(backend_json, &record->backends[b++]);
            if (!backend)
                goto no_memory;
            cJSON_AddItemToArray(backends, backend);
        }
    }
    gate_document_release(&document);
    *baseline_out = baseline;
    return AUDIT_OK;
no_memory:
    cJSON_Delete(baseline);
    gate_document_release(&document);
    return audit_fail(err, AUDIT_ENOMEM, "out of memory writing a baseline");
}

/* ---- summary -------------------------------------------------------------------------------- */

static void increment(cJSON *object, const char *key)
{
    cJSON *counter = cJSON_GetObjectItemCaseSensitive(object, key);
    if (counter)
        cJSON_SetNumberValue(counter, counter->valuedouble + 1);
}

cJSON *gate_report_summary(const cJSON *records, const cJSON *input_errors)
{
    cJSON *summary = cJSON_CreateObject();
    if (!summary)
        return NULL;
    static const char *const totals[] = { "records", "backend_runs", "backends_pass",
                                          "backends_fail", "backends_not_run" };
    for (size_t i = 0; i < sizeof(totals) / sizeof(totals[0]); i++)
        cJSON_AddNumberToObject(summary, totals[i], 0);
    cJSON *statuses = cJSON_AddObjectToObject(summary, "status");
    for (int s = BACKEND_OK; statuses && s < BACKEND_STATUS_COUNT; s++)
        cJSON_AddNumberToObject(statuses, backend_status_name((enum backend_status)s), 0);
    cJSON_AddNumberToObject(summary, "input_errors", cJSON_GetArraySize(input_errors));
    cJSON *by_backend = cJSON_AddObjectToObject(summary, "by_backend");
    if (!statuses || !by_backend) {
        cJSON_Delete(summary);
        return NULL;
    }
    const cJSON *record;
    cJSON_ArrayForEach(record, records) {
        increment(summary, "records");
        const cJSON *backend;
        cJSON_ArrayForEach(backend, child(record, "backends")) {
            const cJSON *name = child(backend, "name"), *status = child(backend, "status");
            const cJSON *verdict = child(backend, "verdict");
            increment(summary, "backend_runs");
            if (cJSON_IsString(status))
                increment(statuses, status->valuestring);
            if (!cJSON_IsString(verdict) || !cJSON_IsString(name))
                continue;
            const char *key = strcmp(verdict->valuestring, "pass") == 0   ? "pass"
                              : strcmp(verdict->valuestring, "fail") == 0 ? "fail"
                                                                          : "not_run";
            increment(summary, key[0] == 'p' ? "backends_pass"
                               : key[0] == 'f' ? "backends_fail"
                                               : "backends_not_run");
            cJSON *entry = cJSON_GetObjectItemCaseSensitive(by_backend, name->valuestring);
            if (!entry) {
                entry = cJSON_AddObjectToObject(by_backend, name->valuestring);
                if (!entry)
                    continue;
                cJSON_AddNumberToObject(entry, "pass", 0);
                cJSON_AddNumberToObject(entry, "fail", 0);
                cJSON_AddNumberToObject(entry, "not_run", 0);
            }
            increment(entry, key);
        }
    }
    return summary;
}

/* ---- merge ---------------------------------------------------------------------------------- */

/* Context keys that must agree between the shards of one audit. */
static const char *const shard_config_keys[] = { "backends", "reps", "noise", "seed", "graph",
                                                 "batch_invariance", "k_override", "emulation",
                                                 NULL };

struct shard_input {
    const char *path;
    const cJSON *root;
    struct gate_document document;
    uint32_t index, count;
};

struct merged_record {
    uint64_t global_index;
    const cJSON *json;
    size_t shard;
};

static int compare_shards(const void *a, const void *b)
{
    const struct shard_input *x = a, *y = b;
    return (x->index > y->index) - (x->index < y->index);
}

static int compare_merged_records(const void *a, const void *b)
{
    const struct merged_record *x = a, *y = b;
    return (x->global_index > y->global_index) - (x->global_index < y->global_index);
}

static int read_shard(struct shard_input *shard, struct audit_error *err)
{
    struct json_reader reader = { shard->path, err };
    cJSON *copy = cJSON_Duplicate(shard->root, 1);
    const cJSON *shard_json;
    uint64_t value;
    if (!copy)
        return audit_fail(err, AUDIT_ENOMEM, "out of memory reading %s", shard->path);
    int status = gate_document_parse(&shard->document, shard->path, copy, err);
    if (status < 0)
        return status;
    if (shard->document.is_baseline)
        return bad_field(&reader, "$", "schema", "a baseline, not a shard report");
    status = read_object(&reader, shard->document.context, "$.context", "shard", FIELD_NULLABLE,
                         &shard_json);
    if (status < 0)
        return status;
    if (!shard_json)
        return bad_field(&reader, "$.context", "shard",
                         "null: not a shard report (run --shard I/N writes them)");
    status = read_count(&reader, shard_json, "$.context.shard", "count", FIELD_REQUIRED,
                        UINT32_MAX, 0, &value);
    if (status < 0)
        return status;
    if (value == 0)
        return bad_field(&reader, "$.context.shard", "count", "0: a run has at least one shard");
    shard->count = (uint32_t)value;
    status = read_count(&reader, shard_json, "$.context.shard", "index", FIELD_REQUIRED,
                        shard->count - 1, 0, &value);
    if (status < 0)
        return status;
    shard->index = (uint32_t)value;
    for (size_t r = 0; r < shard->document.record_count; r++) {
        const struct gate_record *record = &shard->document.records[r];
        if (record->global_index < 0)
            return bad_field(&reader, record->path, "global_index", "missing in a shard report");
        if ((uint64_t)record->global_index % shard->count != shard->index)
            return bad_field(&reader, record->path, "global_index",
                             "%lld does not belong to shard %u/%u",
                             (long long)record->global_index, shard->index, shard->count);
    }
    return AUDIT_OK;
}

static cJSON *merge_cross_device(const struct shard_input *shards, size_t count,
                                 const struct merged_record *records, size_t record_count)
{
    cJSON *block = NULL;
    for (size_t s = 0; s < count; s++) {
        const cJSON *shard_block = child(shards[s].root, "cross_device");
        if (!cJSON_IsObject(shard_block))
            continue;
        if (!block) {
            block = cJSON_CreateObject();
            if (!block)
                return NULL;
            copy_item(block, shard_block, "available");
            copy_item(block, shard_block, "reason");
            copy_item(block, shard_block, "devices");
            copy_item(block, shard_block, "same_model");
            cJSON_AddItemToObject(block, "entries", cJSON_CreateArray());
        }
        if (cJSON_IsTrue(child(shard_block, "available")))
            cJSON_ReplaceItemInObjectCaseSensitive(block, "available", cJSON_CreateTrue());
    }
    if (!block)
        return NULL;
    /* Entries in global record order, following the merged records. */
    cJSON *entries = cJSON_GetObjectItemCaseSensitive(block, "entries");
    for (size_t r = 0; entries && r < record_count; r++) {
        const cJSON *shard_block = child(shards[records[r].shard].root, "cross_device");
        const cJSON *entry;
        cJSON_ArrayForEach(entry, child(shard_block, "entries")) {
            const cJSON *global = child(entry, "global_index");
            if (cJSON_IsNumber(global) && (uint64_t)global->valuedouble == records[r].global_index)
                cJSON_AddItemToArray(entries, cJSON_Duplicate(entry, 1));
        }
    }
    gate_cross_device_summarize(block);
    return block;
}

static cJSON *shard_list_json(const struct shard_input *shards, size_t count)
{
    cJSON *list = cJSON_CreateArray();
    for (size_t s = 0; list && s < count; s++) {
        cJSON *item = cJSON_CreateObject();
        if (!item)
            break;
        cJSON_AddNumberToObject(item, "index", shards[s].index);
        cJSON_AddNumberToObject(item, "count", shards[s].count);
        cJSON_AddStringToObject(item, "report", shards[s].path);
        copy_item(item, shards[s].root, "complete");
        copy_item(item, shards[s].root, "stop_reason");
        copy_item(item, shards[s].root, "exit_code");
        cJSON_AddNumberToObject(item, "records", (double)shards[s].document.record_count);
        copy_item(item, shards[s].root, "context");
        cJSON_AddItemToArray(list, item);
    }
    return list;
}

int gate_merge_reports(const char *const *paths, const cJSON *const *roots, size_t count,
                       cJSON **merged_out, uint32_t *missing_shards, struct audit_error *err)
{
    struct shard_input *shards = calloc(count ? count : 1, sizeof(*shards));
    struct merged_record *records = NULL;
    cJSON *merged = NULL;
    size_t record_count = 0;
    int status = AUDIT_OK;
    *merged_out = NULL;
    *missing_shards = 0;
    if (!shards)
        return audit_fail(err, AUDIT_ENOMEM, "out of memory merging reports");
    if (count == 0) {
        status = audit_fail(err, AUDIT_EUSAGE, "no shard report to merge");
        goto done;
    }
    size_t total_records = 0;
    for (size_t s = 0; s < count; s++) {
        shards[s].path = paths[s];
        shards[s].root = roots[s];
        status = read_shard(&shards[s], err);
        if (status < 0)
            goto done;
        total_records += shards[s].document.record_count;
    }
    for (size_t s = 1; s < count; s++) {
        if (shards[s].count != shards[0].count) {
            status = audit_fail(err, AUDIT_EDATA,
                                "%s is shard %u/%u but %s is shard %u/%u: shards of one audit "
                                "share N",
                                shards[0].path, shards[0].index, shards[0].count, shards[s].path,
                                shards[s].index, shards[s].count);
            goto done;
        }
        for (size_t k = 0; shard_config_keys[k]; k++) {
            const cJSON *a = child(shards[0].document.context, shard_config_keys[k]);
            const cJSON *b = child(shards[s].document.context, shard_config_keys[k]);
            if (!(a == NULL && b == NULL) && !cJSON_Compare(a, b, true)) {
                status = audit_fail(err, AUDIT_EDATA,
                                    "%s and %s differ in context.%s: not shards of one audit",
                                    shards[0].path, shards[s].path, shard_config_keys[k]);
                goto done;
            }
        }
    }
    qsort(shards, count, sizeof(*shards), compare_shards);
    for (size_t s = 1; s < count; s++) {
        if (shards[s].index == shards[s - 1].index) {
            status = audit_fail(err, AUDIT_EDATA,
                                "%s and %s are both shard %u/%u: overlapping shards (each record "
                                "would appear twice)",
                                shards[s - 1].path, shards[s].path, shards[s].index,
                                shards[s].count);
            goto done;
        }
    }
    *missing_shards = shards[0].count - (uint32_t)count;

    records = calloc(total_records ? total_records : 1, sizeof(*records));
    if (!records) {
        status = audit_fail(err, AUDIT_ENOMEM, "out of memory merging reports");
        goto done;
    }
    for (size_t s = 0; s < count; s++) {
        size_t r = 0;
        const cJSON *record;
        cJSON_ArrayForEach(record, child(shards[s].root, "records")) {
            records[record_count].global_index =
                (uint64_t)shards[s].document.records[r++].global_index;
            records[record_count].json = record;
            records[record_count++].shard = s;
        }
    }
    qsort(records, record_count, sizeof(*records), compare_merged_records);
    for (size_t r = 1; r < record_count; r++) {
        if (records[r].global_index == records[r - 1].global_index) {
            status = audit_fail(err, AUDIT_EDATA,
                                "%s and %s both hold global record %llu: overlapping shards",
                                shards[records[r - 1].shard].path, shards[records[r].shard].path,
                                (unsigned long long)records[r].global_index);
            goto done;
        }
    }

    merged = cJSON_CreateObject();
    if (!merged)
        goto no_memory;
    cJSON_AddStringToObject(merged, "schema", REPORT_SCHEMA);
    cJSON_AddNumberToObject(merged, "schema_version", REPORT_SCHEMA_VERSION);
    bool complete = *missing_shards == 0;
    char stop_reason[AUDIT_ERROR_MESSAGE_BYTES] = "";
    double exit_code = 0;
    for (size_t s = 0; s < count; s++) {
        const struct gate_document *document = &shards[s].document;
        const cJSON *code = child(shards[s].root, "exit_code");
        if (cJSON_IsNumber(code) && code->valuedouble > exit_code)
            exit_code = code->valuedouble;
        if (!document->complete && complete) {
            complete = false;
            snprintf(stop_reason, sizeof(stop_reason), "shard %u/%u (%s): %s", shards[s].index,
                     shards[s].count, shards[s].path,
                     document->stop_reason ? document->stop_reason : "incomplete");
        }
    }
    if (*missing_shards) {
        size_t used = (size_t)snprintf(stop_reason, sizeof(stop_reason), "%u of %u shards missing:",
                                       *missing_shards, shards[0].count);
        size_t next = 0;
        for (uint32_t i = 0; i < shards[0].count && used + 16 < sizeof(stop_reason); i++) {
            if (next < count && shards[next].index == i) {
                next++;
                continue;
            }
            used += (size_t)snprintf(stop_reason + used, sizeof(stop_reason) - used, " %u", i);
        }
    }
    cJSON_AddBoolToObject(merged, "complete", complete);
    if (stop_reason[0])
        cJSON_AddStringToObject(merged, "stop_reason", stop_reason);
    else
        cJSON_AddNullToObject(merged, "stop_reason");
    cJSON_AddNumberToObject(merged, "exit_code", exit_code);
    cJSON *context = cJSON_Duplicate(shards[0].document.context, 1);
    if (!context)
        goto no_memory;
    cJSON_ReplaceItemInObjectCaseSensitive(context, "shard", cJSON_CreateNull());
    cJSON_AddItemToObject(merged, "context", context);
    cJSON_AddItemToObject(merged, "shards", shard_list_json(shards, count));
    cJSON *merged_records = cJSON_AddArrayToObject(merged, "records");
    cJSON *input_errors = cJSON_AddArrayToObject(merged, "input_errors");
    if (!merged_records || !input_errors)
        goto no_memory;
    for (size_t r = 0; r < record_count; r++)
        cJSON_AddItemToArray(merged_records, cJSON_Duplicate(records[r].json, 1));
    /* Every shard reads every input, so each reports the same input errors: keep one of each. */
    for (size_t s = 0; s < count; s++) {
        const cJSON *error;
        cJSON_ArrayForEach(error, shards[s].document.input_errors) {
            bool seen = false;
            const cJSON *kept;
            cJSON_ArrayForEach(kept, input_errors)
                seen = seen || cJSON_Compare(kept, error, true);
            if (!seen)
                cJSON_AddItemToArray(input_errors, cJSON_Duplicate(error, 1));
        }
    }
    cJSON *cross_device = merge_cross_device(shards, count, records, record_count);
    if (cross_device)
        cJSON_AddItemToObject(merged, "cross_device", cross_device);
    cJSON *summary = gate_report_summary(merged_records, input_errors);
    if (!summary)
        goto no_memory;
    cJSON_AddItemToObject(merged, "summary", summary);
    *merged_out = merged;
    merged = NULL;
    goto done;
no_memory:
    status = audit_fail(err, AUDIT_ENOMEM, "out of memory merging reports");
done:
    cJSON_Delete(merged);
    for (size_t s = 0; s < count; s++)
        gate_document_release(&shards[s].document);
    free(shards);
    free(records);
    return status;
}

/* ---- cross-device block --------------------------------------------------------------------- */

static bool same_device_model(const cJSON *a, const cJSON *b)
{
    static const char *const keys[] = { "name", "compute_capability", "sm_count",
                                        "smem_per_sm_bytes" };
    for (size_t i = 0; i < sizeof(keys) / sizeof(keys[0]); i++) {
        const cJSON *x = child(a, keys[i]), *y = child(b, keys[i]);
        if (!x || !y || !cJSON_Compare(x, y, true))
            return false;
    }
    return true;
}

void gate_cross_device_summarize(cJSON *block)
{
    uint64_t entries = 0, compared = 0, agree = 0, disagree = 0, required_disagreements = 0;
    const cJSON *entry;
    cJSON_ArrayForEach(entry, child(block, "entries")) {
        const cJSON *verdict = child(entry, "verdict"), *agreed = child(entry, "agree");
        entries++;
        if (!cJSON_IsBool(agreed))
            continue;
        compared++;
        if (cJSON_IsTrue(agreed))
            agree++;
        else
            disagree++;
        if (cJSON_IsString(verdict) && strcmp(verdict->valuestring, "fail") == 0)
            required_disagreements++;
    }
    cJSON_DeleteItemFromObjectCaseSensitive(block, "summary");
    cJSON *summary = cJSON_AddObjectToObject(block, "summary");
    if (!summary)
        return;
    json_add_u64(summary, "entries", entries);
    json_add_u64(summary, "compared", compared);
    json_add_u64(summary, "agree", agree);
    json_add_u64(summary, "disagree", disagree);
    json_add_u64(summary, "required_disagreements", required_disagreements);
    json_add_u64(summary, "not_compared", entries - compared);
}

/* One record x backend across devices. */
static cJSON *cross_device_entry(const cJSON *record, const cJSON *backend, const cJSON *per_device,
                                 bool same_model)
{
    cJSON *entry = cJSON_CreateObject();
    if (!entry)
        return NULL;
    copy_item(entry, record, "file");
    copy_item(entry, record, "index");
    if (child(record, "global_index"))
        copy_item(entry, record, "global_index");
    copy_item(entry, backend, "name");
    copy_item(entry, backend, "level");
    const cJSON *level = child(backend, "level");
    enum topk_determinism claimed = TOPK_NOT_GUARANTEED;
    if (cJSON_IsString(level))
        parse_level(level->valuestring, &claimed);
    const bool required = claimed == TOPK_GPU_TO_GPU || (claimed == TOPK_RUN_TO_RUN && same_model);
    cJSON_AddBoolToObject(entry, "required", required);
    cJSON *devices = cJSON_AddArrayToObject(entry, "devices");
    const char *agreed_hash = NULL;
    bool agree = true;
    unsigned ran = 0;
    const cJSON *device;
    cJSON_ArrayForEach(device, per_device) {
        cJSON *item = cJSON_CreateObject();
        if (!devices || !item) {
            cJSON_Delete(item);
            cJSON_Delete(entry);
            return NULL;
        }
        const cJSON *identity = child(device, "device");
        const cJSON *status = child(device, "status");
        const cJSON *hashes = child(device, "output_sha256_per_rep");
        cJSON *distinct = distinct_strings_json(hashes);
        const int distinct_count = cJSON_GetArraySize(distinct);
        copy_item(item, identity, "index");
        copy_item(item, identity, "ordinal");
        copy_item(item, device, "status");
        cJSON_AddNumberToObject(item, "distinct_outputs", distinct_count);
        const cJSON *single = distinct_count == 1 ? cJSON_GetArrayItem(distinct, 0) : NULL;
        if (single)
            cJSON_AddStringToObject(item, "output_sha256", single->valuestring);
        else
            cJSON_AddNullToObject(item, "output_sha256");
        if (cJSON_IsString(status) && strcmp(status->valuestring, "ok") == 0) {
            ran++;
            if (!single)
                agree = false;
            else if (!agreed_hash)
                agreed_hash = cJSON_GetObjectItemCaseSensitive(item, "output_sha256")->valuestring;
            else if (strcmp(agreed_hash, single->valuestring) != 0)
                agree = false;
        }
        cJSON_Delete(distinct);
        cJSON_AddItemToArray(devices, item);
    }
    cJSON_AddNumberToObject(entry, "devices_run", ran);
    if (ran < 2) {
        cJSON_AddNullToObject(entry, "agree");
        cJSON_AddStringToObject(entry, "verdict", "not_compared");
    } else {
        cJSON_AddBoolToObject(entry, "agree", agree);
        cJSON_AddStringToObject(entry, "verdict", !required ? "not_required"
                                                  : agree   ? "pass"
                                                            : "fail");
    }
    return entry;
}

cJSON *gate_cross_device_block(const cJSON *records, const cJSON *devices)
{
    cJSON *block = cJSON_CreateObject();
    if (!block)
        return NULL;
    bool same_model = true;
    const cJSON *first = cJSON_GetArrayItem(devices, 0), *device;
    cJSON_ArrayForEach(device, devices)
        same_model = same_model && same_device_model(first, device);
    cJSON_AddBoolToObject(block, "available", true);
    cJSON_AddNullToObject(block, "reason");
    cJSON_AddItemToObject(block, "devices", cJSON_Duplicate(devices, 1));
    cJSON_AddBoolToObject(block, "same_model", same_model);
    cJSON *entries = cJSON_AddArrayToObject(block, "entries");
    if (!entries) {
        cJSON_Delete(block);
        return NULL;
    }
    const cJSON *record;
    cJSON_ArrayForEach(record, records) {
        const cJSON *backend;
        cJSON_ArrayForEach(backend, child(record, "backends")) {
            const cJSON *per_device = child(backend, "per_device");
            if (!cJSON_IsArray(per_device))
                continue;
            cJSON *entry = cross_device_entry(record, backend, per_device, same_model);
            if (!entry) {
                cJSON_Delete(block);
                return NULL;
            }
            cJSON_AddItemToArray(entries, entry);
        }
    }
    gate_cross_device_summarize(block);
    return block;
}

cJSON *gate_cross_device_unavailable(const char *reason, const cJSON *requested)
{
    cJSON *block = cJSON_CreateObject();
    if (!block)
        return NULL;
    cJSON_AddBoolToObject(block, "available", false);
    cJSON_AddStringToObject(block, "reason", reason ? reason : "no CUDA device");
    cJSON_AddItemToObject(block, "devices", cJSON_CreateArray());
    cJSON_AddItemToObject(block, "requested",
                          requested ? cJSON_Duplicate(requested, 1) : cJSON_CreateNull());
    cJSON_AddNullToObject(block, "same_model");
    cJSON_AddItemToObject(block, "entries", cJSON_CreateArray());
    gate_cross_device_summarize(block);
    return block;
}
