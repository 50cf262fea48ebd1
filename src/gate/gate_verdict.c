/* Judging whole reports and writing the verdict document (gate.h "judging", docs/GATE.md
 * "The verdict"): records matched with the baseline's, every record x backend judged by
 * gate_judge_entry(), the report-level failures (incomplete, input errors), the counts. */
#include "gate.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "hash.h"
#include "json_util.h"

static const char *base_name(const char *path)
{
    const char *slash = path ? strrchr(path, '/') : NULL;
    return slash ? slash + 1 : (path ? path : "");
}

/* The same record of the same capture (payload hash, file base name, index), or with
 * any_payload the same place only (file base name and index: then a payload that differs is
 * "capture differs"). */
static bool same_record(const struct document_record *a, const struct document_record *b,
                        bool any_payload)
{
    return a->index == b->index &&
           (any_payload || strcmp(a->payload_sha256, b->payload_sha256) == 0) &&
           strcmp(base_name(a->file), base_name(b->file)) == 0;
}

/* The document's record matching key: by payload hash, file base name and index, else by file
 * base name and index alone (a capture that changed under its name); *hint is where the last
 * match was, so that documents in the same order match in linear time. matched: records already
 * matched, never matched twice. */
static const struct document_record *find_record(const struct report_document *document,
                                                 const struct document_record *key,
                                                 const bool *matched, size_t *hint,
                                                 size_t *found_at)
{
    for (int any_payload = 0; any_payload < 2; any_payload++) {
        for (size_t step = 0; step < document->record_count; step++) {
            size_t i = (*hint + step) % document->record_count;
            if (!matched[i] && same_record(&document->records[i], key, any_payload)) {
                *hint = i + 1;
                *found_at = i;
                return &document->records[i];
            }
        }
    }
    return NULL;
}

/* Whether the report audited anything: a backend that ran (ok, on some device), or an engine
 * selection judged. */
static void audited(const struct report_document *report, bool *backend_ran, bool *engine_judged)
{
    *backend_ran = *engine_judged = false;
    for (size_t r = 0; r < report->record_count; r++) {
        const struct document_record *record = &report->records[r];
        *engine_judged = *engine_judged || record->engine.present;
        for (size_t b = 0; b < record->backend_count; b++) {
            const struct document_backend *backend = &record->backends[b];
            *backend_ran = *backend_ran || backend->status == BACKEND_OK;
            for (size_t d = 0; d < backend->per_device_count; d++)
                *backend_ran = *backend_ran || backend->per_device[d].status == BACKEND_OK;
        }
    }
}

static const struct document_backend *find_backend(const struct document_record *record,
                                                   const char *name)
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
    counter = cJSON_GetObjectItemCaseSensitive(summary, KEY_ENTRIES);
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

static cJSON *document_origin_json(const struct report_document *document)
{
    cJSON *json = cJSON_CreateObject();
    if (!json)
        return NULL;
    const cJSON *context = document->context;
    const cJSON *device = json_member(context, KEY_DEVICE);
    const cJSON *host = json_member(context, KEY_HOST), *when = json_member(context, KEY_UTC_TIME);
    cJSON_AddStringToObject(json, KEY_PATH, document->path);
    cJSON_AddStringToObject(json, KEY_SCHEMA,
                            document->is_baseline ? BASELINE_SCHEMA : REPORT_SCHEMA);
    cJSON_AddBoolToObject(json, KEY_COMPLETE, document->complete);
    if (cJSON_IsString(host))
        cJSON_AddStringToObject(json, KEY_HOST, host->valuestring);
    else
        cJSON_AddNullToObject(json, KEY_HOST);
    if (cJSON_IsString(when))
        cJSON_AddStringToObject(json, KEY_UTC_TIME, when->valuestring);
    else
        cJSON_AddNullToObject(json, KEY_UTC_TIME);
    const cJSON *name = json_member(device, KEY_NAME);
    if (cJSON_IsString(name))
        cJSON_AddStringToObject(json, KEY_DEVICE, name->valuestring);
    else
        cJSON_AddNullToObject(json, KEY_DEVICE);
    cJSON_AddNumberToObject(json, KEY_RECORDS, (double)document->record_count);
    char fingerprint[HASH_HEX_BYTES];
    if (report_fingerprint(document->root, fingerprint))
        cJSON_AddStringToObject(json, KEY_REPORT_SHA256, fingerprint);
    return json;
}

/* A failure of the report as a whole into its reasons, or, when the policy allows it, into its
 * notes saying so. Returns whether it fails the report. */
static bool report_finding(cJSON *reasons, cJSON *notes, bool allowed, const char *text)
{
    if (!allowed) {
        cJSON_AddItemToArray(reasons, cJSON_CreateString(text));
        return true;
    }
    char note[800];
    snprintf(note, sizeof(note), "%s (allowed by the policy)", text);
    cJSON_AddItemToArray(notes, cJSON_CreateString(note));
    return false;
}

cJSON *gate_judge_report(const struct report_document *baseline,
                         const struct report_document *report, struct gate_policy *policy,
                         const struct gate_options *options, struct gate_counts *counts)
{
    bool out_of_memory = false;
    bool *baseline_matched = calloc(baseline->record_count ? baseline->record_count : 1,
                                    sizeof(bool));
    cJSON *json = document_origin_json(report);
    cJSON *report_reasons = json ? cJSON_AddArrayToObject(json, KEY_REPORT_REASONS) : NULL;
    cJSON *report_notes = json ? cJSON_AddArrayToObject(json, KEY_REPORT_NOTES) : NULL;
    cJSON *status_item =
        json ? cJSON_AddStringToObject(json, KEY_STATUS, gate_status_name(GATE_PASS)) : NULL;
    cJSON *entries = json ? cJSON_AddArrayToObject(json, KEY_ENTRIES) : NULL;
    cJSON *summary = json ? cJSON_AddObjectToObject(json, KEY_SUMMARY) : NULL;
    if (!baseline_matched || !report_reasons || !report_notes || !status_item || !entries ||
        !summary)
        goto no_memory;
    cJSON_AddNumberToObject(summary, KEY_ENTRIES, 0);
    for (int s = GATE_PASS; s < GATE_STATUS_COUNT; s++)
        cJSON_AddNumberToObject(summary, gate_status_name((enum gate_status)s), 0);

    bool report_failed = false;
    char text[700];
    if (!report->complete) {
        snprintf(text, sizeof(text), "the report is incomplete: %s",
                 report->stop_reason ? report->stop_reason : "no reason given");
        report_failed |= report_finding(report_reasons, report_notes, policy->allow_incomplete,
                                        text);
    }
    const int input_errors = cJSON_GetArraySize(report->input_errors);
    if (input_errors > 0) {
        const cJSON *first = json_member(cJSON_GetArrayItem(report->input_errors, 0), KEY_MESSAGE);
        snprintf(text, sizeof(text), "%d input error(s), the first: %s", input_errors,
                 cJSON_IsString(first) ? first->valuestring : "(no message)");
        report_failed |= report_finding(report_reasons, report_notes,
                                        policy->allow_input_errors, text);
    }
    bool backend_ran, engine_judged;
    audited(report, &backend_ran, &engine_judged);
    if (!backend_ran && !engine_judged)
        report_failed |= report_finding(report_reasons, report_notes,
                                        policy->allow_nothing_audited,
                                        "nothing was audited: no backend ran (every entry is "
                                        "unavailable, unsupported or skipped: no GPU?) and no "
                                        "record carries the engine's own selection");
    else if (!backend_ran)
        cJSON_AddItemToArray(report_notes,
                             cJSON_CreateString("no backend ran (no GPU?): only the engine's "
                                                "recorded selections were judged"));

    size_t hint = 0;
    for (size_t r = 0; r < report->record_count && !out_of_memory; r++) {
        const struct document_record *record = &report->records[r];
        size_t found_at = 0;
        const struct document_record *baseline_record =
            find_record(baseline, record, baseline_matched, &hint, &found_at);
        if (baseline_record)
            baseline_matched[found_at] = true;
        for (size_t b = 0; b < record->backend_count; b++) {
            const struct document_backend *backend = &record->backends[b];
            enum gate_status status;
            cJSON *entry = gate_judge_entry(baseline_record,
                                            find_backend(baseline_record, backend->name), record,
                                            backend, policy, options, &status);
            add_judged(entries, summary, counts, entry, status, &out_of_memory);
        }
        for (size_t b = 0; baseline_record && b < baseline_record->backend_count; b++) {
            const struct document_backend *expected = &baseline_record->backends[b];
            if (find_backend(record, expected->name))
                continue;
            enum gate_status status;
            cJSON *entry = gate_judge_entry(baseline_record, expected, record, NULL, policy,
                                            options, &status);
            add_judged(entries, summary, counts, entry, status, &out_of_memory);
        }
        if (record->engine.present) {
            enum gate_status status;
            cJSON *entry = gate_judge_engine_entry(baseline_record, record, policy, options,
                                                   &status);
            add_judged(entries, summary, counts, entry, status, &out_of_memory);
        }
    }
    for (size_t r = 0; r < baseline->record_count && !out_of_memory; r++) {
        if (baseline_matched[r])
            continue;
        const struct document_record *expected = &baseline->records[r];
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
        enum gate_status value = GATE_PASS;
        gate_status_parse(cJSON_GetStringValue(json_member(entry, KEY_STATUS)), &value);
        entries_fail = entries_fail || gate_entry_fails(value, policy);
    }
    if (report_failed)
        counts->failing_reports++;
    cJSON_SetValuestring(status_item,
                         gate_status_name(report_failed || entries_fail ? GATE_FAIL : GATE_PASS));
    free(baseline_matched);
    return json;
no_memory:
    free(baseline_matched);
    cJSON_Delete(json);
    return NULL;
}

int gate_verdict(const struct report_document *baseline, const struct report_document *reports,
                 size_t report_count, struct gate_policy *policy,
                 const struct gate_options *options, const cJSON *context, cJSON **verdict_out,
                 struct gate_counts *counts, struct audit_error *err)
{
    cJSON *verdict = cJSON_CreateObject();
    *verdict_out = NULL;
    memset(counts, 0, sizeof(*counts));
    if (!verdict)
        goto no_memory;
    cJSON_AddStringToObject(verdict, KEY_SCHEMA, GATE_SCHEMA);
    cJSON_AddNumberToObject(verdict, KEY_SCHEMA_VERSION, GATE_SCHEMA_VERSION);
    cJSON *context_copy = context ? cJSON_Duplicate(context, 1) : cJSON_CreateObject();
    if (!context_copy)
        goto no_memory;
    cJSON_AddItemToObject(verdict, KEY_CONTEXT, context_copy);
    cJSON_AddStringToObject(context_copy, KEY_NOW, options->now);
    cJSON_AddItemToObject(context_copy, KEY_BASELINE, document_origin_json(baseline));
    if (policy && policy->path) {
        cJSON *policy_json = cJSON_AddObjectToObject(context_copy, KEY_POLICY);
        if (policy_json) {
            cJSON_AddStringToObject(policy_json, KEY_PATH, policy->path);
            cJSON_AddNumberToObject(policy_json, KEY_RULES, (double)policy->rule_count);
            cJSON_AddBoolToObject(policy_json, KEY_ALLOW_MISSING, policy->allow_missing);
            cJSON_AddBoolToObject(policy_json, KEY_ALLOW_INCOMPLETE, policy->allow_incomplete);
            cJSON_AddBoolToObject(policy_json, KEY_ALLOW_INPUT_ERRORS, policy->allow_input_errors);
            cJSON_AddBoolToObject(policy_json, KEY_ALLOW_NOTHING_AUDITED,
                                  policy->allow_nothing_audited);
        }
    } else {
        cJSON_AddNullToObject(context_copy, KEY_POLICY);
    }
    cJSON *report_list = cJSON_AddArrayToObject(verdict, KEY_REPORTS);
    if (!report_list)
        goto no_memory;
    for (size_t i = 0; i < report_count; i++) {
        cJSON *judged = gate_judge_report(baseline, &reports[i], policy, options, counts);
        if (!judged)
            goto no_memory;
        cJSON_AddItemToArray(report_list, judged);
    }
    /* Tolerances that tolerated nothing: the failure they describe is gone (or mistyped). */
    cJSON *unused = cJSON_AddArrayToObject(verdict, KEY_UNUSED_TOLERANCES);
    for (size_t i = 0; unused && policy && i < policy->rule_count; i++) {
        const struct gate_rule *rule = &policy->rules[i];
        if (!rule->tolerate || rule->times_used > 0)
            continue;
        cJSON *item = cJSON_CreateObject();
        if (!item)
            goto no_memory;
        cJSON_AddStringToObject(item, KEY_RULE, rule->origin);
        cJSON_AddStringToObject(item, KEY_REASON, rule->tolerate);
        cJSON_AddItemToArray(unused, item);
    }
    cJSON *summary = cJSON_AddObjectToObject(verdict, KEY_SUMMARY);
    if (!summary)
        goto no_memory;
    json_add_u64(summary, KEY_REPORTS, report_count);
    json_add_u64(summary, KEY_FAILING_REPORTS, counts->failing_reports);
    json_add_u64(summary, KEY_ENTRIES, counts->entries);
    json_add_u64(summary, gate_status_name(GATE_PASS), counts->pass);
    json_add_u64(summary, gate_status_name(GATE_FAIL), counts->fail);
    json_add_u64(summary, gate_status_name(GATE_TOLERATED), counts->tolerated);
    json_add_u64(summary, gate_status_name(GATE_MISSING), counts->missing);
    const bool failed = counts->fail > 0 || counts->failing_reports > 0 ||
                        (counts->missing > 0 && !(policy && policy->allow_missing));
    counts->exit_code = failed ? EXIT_AUDIT_FAILED : EXIT_AUDIT_OK;
    cJSON_AddStringToObject(summary, KEY_VERDICT, gate_status_name(failed ? GATE_FAIL : GATE_PASS));
    cJSON_AddNumberToObject(verdict, KEY_EXIT_CODE, counts->exit_code);
    *verdict_out = verdict;
    return AUDIT_OK;
no_memory:
    cJSON_Delete(verdict);
    return audit_fail(err, AUDIT_ENOMEM, "out of memory building the gate verdict");
}

int gate_verdict_check_report(const cJSON *verdict, const char *verdict_path, const cJSON *report,
                              const char *report_path, bool *unidentified,
                              struct audit_error *err)
{
    char fingerprint[HASH_HEX_BYTES];
    *unidentified = false;
    if (!report_fingerprint(report, fingerprint))
        return audit_fail(err, AUDIT_ENOMEM, "out of memory fingerprinting %s", report_path);
    const cJSON *context = json_member(report, KEY_CONTEXT);
    const char *host = cJSON_GetStringValue(json_member(context, KEY_HOST));
    const char *when = cJSON_GetStringValue(json_member(context, KEY_UTC_TIME));
    const int records = cJSON_GetArraySize(json_member(report, KEY_RECORDS));
    char seen[512] = "";
    size_t used = 0, identifiable = 0;
    const cJSON *entry;
    cJSON_ArrayForEach(entry, json_member(verdict, KEY_REPORTS)) {
        const char *judged = cJSON_GetStringValue(json_member(entry, KEY_REPORT_SHA256));
        const char *entry_host = cJSON_GetStringValue(json_member(entry, KEY_HOST));
        const char *entry_time = cJSON_GetStringValue(json_member(entry, KEY_UTC_TIME));
        if (judged) {
            if (strcmp(judged, fingerprint) == 0)
                return AUDIT_OK;
        } else if (entry_host && entry_time) {
            /* A verdict written before fingerprints: the report's host, time and size. */
            const cJSON *entry_records = json_member(entry, KEY_RECORDS);
            if (host && when && strcmp(host, entry_host) == 0 && strcmp(when, entry_time) == 0 &&
                cJSON_IsNumber(entry_records) && entry_records->valuedouble == records)
                return AUDIT_OK;
        } else {
            continue;
        }
        identifiable++;
        const char *path = cJSON_GetStringValue(json_member(entry, KEY_PATH));
        if (used + 100 < sizeof(seen))
            used += (size_t)snprintf(seen + used, sizeof(seen) - used, "%s%.60s (%.12s)",
                                     used ? ", " : "", path ? path : "?",
                                     judged ? judged : entry_time);
    }
    if (identifiable == 0) {
        *unidentified = true;
        return AUDIT_OK;
    }
    return audit_fail(err, AUDIT_EDATA, "%s was made from another report: it judged %s, and %s "
                      "is %.12s (run gate on this report, or draw the report the verdict judged)",
                      verdict_path, seen, report_path, fingerprint);
}
