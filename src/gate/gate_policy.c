/* The gate policy (gate.h "policy", docs/GATE.md "Policy"): read through report_read.h's field
 * readers, so a mistake names policy.PATH; and what it says about one record x backend. */
#include "gate.h"

#include <ctype.h>
#include <stdlib.h>
#include <string.h>

#include "json_util.h"

/* The JSON path of the policy document in messages ("policy.backends.radix.level"). */
#define POLICY_ROOT "policy" /* the document's name in messages, not a key */

static const char *base_name(const char *path)
{
    const char *slash = path ? strrchr(path, '/') : NULL;
    return slash ? slash + 1 : (path ? path : "");
}

/* ---- policy --------------------------------------------------------------------------------- */

const char *gate_allow_name(unsigned item)
{
    if (item < VIOLATION_KINDS)
        return violation_name(item);
    switch (item) {
    case GATE_ALLOW_FLAPPING: return "flapping";
    case GATE_ALLOW_REFERENCE_MISMATCH: return "reference_mismatch";
    case GATE_ALLOW_BASELINE_MISMATCH: return "baseline_mismatch";
    case GATE_ALLOW_DEVICE_MISMATCH: return "device_mismatch";
    case GATE_ALLOW_BATCH_DEPENDENT: return "batch_dependent";
    case GATE_ALLOW_NOT_RUN: return "not_run";
    case GATE_ALLOW_ENGINE_WRONG: return "engine_wrong";
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
static int digits(const char *text, size_t count)
{
    int value = 0;
    for (size_t i = 0; i < count; i++)
        value = value * 10 + (text[i] - '0');
    return value;
}

int gate_time_parse(const char *text, char canonical[21])
{
    static const char date_pattern[] = "dddd-dd-dd";
    static const char time_pattern[] = "dddd-dd-ddTdd:dd:ddZ";
    static const int month_days[12] = { 31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31 };
    size_t length = strlen(text);
    const char *pattern = length == strlen(date_pattern)   ? date_pattern
                          : length == strlen(time_pattern) ? time_pattern
                                                           : NULL;
    if (!pattern)
        return -1;
    for (size_t i = 0; i < length; i++) {
        if (pattern[i] == 'd' ? !isdigit((unsigned char)text[i]) : text[i] != pattern[i])
            return -1;
    }
    int year = digits(text, 4), month = digits(text + 5, 2), day = digits(text + 8, 2);
    int hour = 0, minute = 0, second = 0;
    if (pattern == time_pattern) {
        hour = digits(text + 11, 2);
        minute = digits(text + 14, 2);
        second = digits(text + 17, 2);
    }
    if (month < 1 || month > 12)
        return -1;
    bool leap = (year % 4 == 0 && year % 100 != 0) || year % 400 == 0;
    int days = month_days[month - 1] + (month == 2 && leap);
    if (day < 1 || day > days || hour > 23 || minute > 59 ||
        second > (hour == 23 && minute == 59 ? 60 : 59))
        return -1;
    if (canonical) /* already in the long form's digits: a date alone gains midnight */
        snprintf(canonical, 21, "%.10s%s", text, pattern == time_pattern ? text + 10 : "T00:00:00Z");
    return 0;
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
            return json_field_error(reader, path, item->string, "unknown key (known: %s)", list);
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
        char item_path[JSON_PATH_BYTES];
        json_path_join(item_path, sizeof(item_path), path, KEY_ALLOW, i++);
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
            return json_field_error(reader, item_path, NULL, "not one of: %s", list);
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
        status = json_field_string(reader, json, path, KEY_REASON, FIELD_REQUIRED, &rule->tolerate);
        if (status == AUDIT_OK && !rule->tolerate[0])
            status =
                json_field_error(reader, path, KEY_REASON, "empty: say why the failure is known");
    } else {
        status = json_field_string(reader, json, path, KEY_LEVEL, FIELD_OPTIONAL, &text);
        if (status < 0)
            return status;
        if (text) {
            if (determinism_level_parse(text, &rule->level) < 0)
                return json_field_error(reader, path, KEY_LEVEL,
                                        "'%s' is not not_guaranteed, run_to_run or gpu_to_gpu",
                                        text);
            rule->has_level = true;
        }
        status = json_field_array(reader, json, path, KEY_ALLOW, FIELD_OPTIONAL, &allow);
        if (status == AUDIT_OK && allow)
            status = parse_allow_list(reader, allow, path, &rule->allow);
        if (status == AUDIT_OK)
            status = json_field_string(reader, json, path, KEY_TOLERATE, FIELD_OPTIONAL,
                                       &rule->tolerate);
        if (status == AUDIT_OK && rule->tolerate && !rule->tolerate[0])
            status =
                json_field_error(reader, path, KEY_TOLERATE, "empty: say why the failure is known");
    }
    if (status == AUDIT_OK)
        status = json_field_string(reader, json, path, KEY_MATCH, FIELD_OPTIONAL, &rule->match);
    if (status == AUDIT_OK && rule->match && !rule->tolerate)
        status = json_field_error(reader, path, KEY_MATCH, "only meaningful with tolerate");
    if (status == AUDIT_OK)
        status = json_field_string(reader, json, path, KEY_UNTIL, FIELD_OPTIONAL, &rule->until);
    if (status == AUDIT_OK && rule->until && gate_time_parse(rule->until, NULL) < 0)
        status =
            json_field_error(reader, path, KEY_UNTIL,
                             "'%s' is not a date YYYY-MM-DD or a time "
                             "YYYY-MM-DDTHH:MM:SSZ (UTC) that exists", rule->until);
    return status;
}

static int parse_rule_selector(const struct json_reader *reader, const cJSON *json,
                               const char *path, struct gate_rule *rule)
{
    uint64_t index;
    int status = json_field_string(reader, json, path, KEY_FILE, FIELD_OPTIONAL, &rule->file);
    if (status == AUDIT_OK)
        status = json_field_count(reader, json, path, KEY_INDEX, FIELD_OPTIONAL, UINT32_MAX,
                                  UINT64_MAX, &index);
    if (status == AUDIT_OK)
        status = json_field_hash(reader, json, path, KEY_PAYLOAD_SHA256, FIELD_OPTIONAL,
                                 &rule->payload_sha256);
    if (status == AUDIT_OK)
        status = json_field_string(reader, json, path, KEY_BACKEND, FIELD_OPTIONAL, &rule->backend);
    if (status < 0)
        return status;
    rule->index = index == UINT64_MAX ? -1 : (int64_t)index;
    if (rule->index >= 0 && !rule->file && !rule->payload_sha256)
        return json_field_error(reader, path, KEY_INDEX,
                                "needs file or payload_sha256 (index of which file?)");
    if (rule->source == GATE_RULE_RECORDS && !rule->file && !rule->payload_sha256)
        return json_field_error(reader, path, NULL,
                                "a records[] entry needs file or payload_sha256 "
                                "(use backends{} for a whole backend)");
    if (rule->source == GATE_RULE_KNOWN_FAILURES && !rule->file && !rule->payload_sha256 &&
        !rule->backend)
        return json_field_error(reader, path, NULL,
                                "a known failure needs file, payload_sha256 or backend (it would "
                                "tolerate every failure)");
    return AUDIT_OK;
}

int gate_policy_parse(struct gate_policy *policy, const char *path, cJSON *root,
                      struct audit_error *err)
{
    static const char *const top_keys[] = { KEY_SCHEMA,           KEY_SCHEMA_VERSION,
                                            KEY_DESCRIPTION,      KEY_ALLOW_MISSING,
                                            KEY_ALLOW_INCOMPLETE, KEY_ALLOW_INPUT_ERRORS,
                                            KEY_ALLOW_NOTHING_AUDITED,
                                            KEY_BACKENDS,         KEY_RECORDS,
                                            KEY_KNOWN_FAILURES,   NULL };
    static const char *const backend_keys[] = { KEY_LEVEL, KEY_ALLOW,   KEY_TOLERATE, KEY_MATCH,
                                                KEY_UNTIL, KEY_COMMENT, NULL };
    static const char *const record_keys[] = { KEY_FILE,     KEY_INDEX, KEY_PAYLOAD_SHA256,
                                               KEY_BACKEND,  KEY_LEVEL, KEY_ALLOW,
                                               KEY_TOLERATE, KEY_MATCH, KEY_UNTIL,
                                               KEY_COMMENT,  NULL };
    static const char *const known_keys[] = { KEY_FILE,    KEY_INDEX,   KEY_PAYLOAD_SHA256,
                                              KEY_BACKEND, KEY_REASON,  KEY_MATCH,
                                              KEY_UNTIL,   KEY_COMMENT, NULL };
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
        status = json_field_error(&reader, POLICY_ROOT, NULL, "not a JSON object");
        goto error;
    }
    status = check_known_keys(&reader, root, POLICY_ROOT, top_keys);
    if (status == AUDIT_OK)
        status = json_field_string(&reader, root, POLICY_ROOT, KEY_SCHEMA, FIELD_OPTIONAL, &schema);
    if (status < 0)
        goto error;
    if (schema && strcmp(schema, POLICY_SCHEMA) != 0) {
        status = json_field_error(&reader, POLICY_ROOT, KEY_SCHEMA, "'%s' is not %s", schema,
                                  POLICY_SCHEMA);
        goto error;
    }
    status = json_field_schema_version(&reader, root, POLICY_ROOT, NULL, FIELD_OPTIONAL,
                                       POLICY_SCHEMA_VERSION, &version);
    if (status < 0)
        goto error;
    status = json_field_bool(&reader, root, POLICY_ROOT, KEY_ALLOW_MISSING, FIELD_OPTIONAL, false,
                             &policy->allow_missing);
    if (status == AUDIT_OK)
        status = json_field_bool(&reader, root, POLICY_ROOT, KEY_ALLOW_INCOMPLETE, FIELD_OPTIONAL,
                                 false, &policy->allow_incomplete);
    if (status == AUDIT_OK)
        status = json_field_bool(&reader, root, POLICY_ROOT, KEY_ALLOW_INPUT_ERRORS, FIELD_OPTIONAL,
                                 false, &policy->allow_input_errors);
    if (status == AUDIT_OK)
        status = json_field_bool(&reader, root, POLICY_ROOT, KEY_ALLOW_NOTHING_AUDITED,
                                 FIELD_OPTIONAL, false, &policy->allow_nothing_audited);
    if (status == AUDIT_OK)
        status =
            json_field_object(&reader, root, POLICY_ROOT, KEY_BACKENDS, FIELD_OPTIONAL, &backends);
    if (status == AUDIT_OK)
        status =
            json_field_array(&reader, root, POLICY_ROOT, KEY_RECORDS, FIELD_OPTIONAL, &records);
    if (status == AUDIT_OK)
        status = json_field_array(&reader, root, POLICY_ROOT, KEY_KNOWN_FAILURES, FIELD_OPTIONAL,
                                  &known);
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
        char rule_path[JSON_PATH_BYTES];
        rule->source = GATE_RULE_BACKENDS;
        rule->index = -1;
        rule->backend = item->string;
        json_path_join(rule_path, sizeof(rule_path), POLICY_ROOT "." KEY_BACKENDS, item->string,
                       -1);
        memcpy(rule->origin, rule_path, sizeof(rule->origin));
        if (!cJSON_IsObject(item)) {
            status = json_field_error(&reader, rule_path, NULL, "not an object");
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
            char rule_path[JSON_PATH_BYTES];
            rule->source = sources[list];
            json_path_join(rule_path, sizeof(rule_path), POLICY_ROOT,
                           list == 0 ? KEY_RECORDS : KEY_KNOWN_FAILURES, i++);
            memcpy(rule->origin, rule_path, sizeof(rule->origin));
            if (!cJSON_IsObject(item)) {
                status = json_field_error(&reader, rule_path, NULL, "not an object");
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

/* ---- what the policy says about one record x backend ----------------------------------------- */

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

bool gate_rule_matches(const struct gate_rule *rule, const struct document_record *record,
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

bool gate_rule_expired(const struct gate_rule *rule, const char *now)
{
    if (!rule->until)
        return false;
    if (strlen(rule->until) == 10)
        return strncmp(now, rule->until, 10) > 0;
    return strcmp(now, rule->until) > 0;
}

void gate_policy_rules_for(const struct gate_policy *policy, const struct document_record *record,
                           const char *backend, enum topk_determinism claimed,
                           struct gate_entry_rules *rules)
{
    rules->level = claimed;
    rules->level_origin = NULL;
    rules->allow = 0;
    bool record_level = false;
    for (size_t i = 0; policy && i < policy->rule_count; i++) {
        const struct gate_rule *rule = &policy->rules[i];
        if (rule->source == GATE_RULE_KNOWN_FAILURES || !gate_rule_matches(rule, record, backend))
            continue;
        rules->allow |= rule->allow;
        if (!rule->has_level || record_level)
            continue;
        rules->level = rule->level;
        rules->level_origin = rule->origin;
        record_level = rule->source == GATE_RULE_RECORDS;
    }
}
