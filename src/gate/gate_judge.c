/* Judging one record x backend of a report against the baseline, under the policy (gate.h
 * "judging", docs/GATE.md "What each level must show"): the verdict rule is verdict_judge()'s,
 * fed with what the report document shows; this file adds what only gate knows (the baseline's
 * output, the policy's allowances and tolerances, the devices of a --devices report) and writes
 * the entry of the verdict document. */
#include "gate.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Rows listed per entry of a verdict, per list (the report already caps its lists at 4096). */
#define GATE_MAX_ROWS_PER_LIST 4096u

bool gate_entry_fails(enum gate_status status, const struct gate_policy *policy)
{
    return status == GATE_FAIL || (status == GATE_MISSING && !(policy && policy->allow_missing));
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
        uint32_t row;
        if (!report_row_number(item, &row))
            continue;
        cJSON *entry = cJSON_CreateObject();
        if (!entry)
            return;
        cJSON_AddNumberToObject(entry, KEY_ROW, row);
        cJSON_AddStringToObject(entry, KEY_WHY, why);
        if (builder->device_index >= 0)
            cJSON_AddNumberToObject(entry, KEY_DEVICE_INDEX, (double)builder->device_index);
        static const char *const copied[] = { KEY_REPS_DIFFERING, KEY_REPS_SET_DIFFERING,
                                              KEY_MAX_INDICES_DIFFERING, KEY_CONTEXTS_DIFFERING };
        for (size_t i = 0; cJSON_IsObject(item) && i < sizeof(copied) / sizeof(copied[0]); i++) {
            const cJSON *value = json_member(item, copied[i]);
            if (cJSON_IsNumber(value))
                cJSON_AddNumberToObject(entry, copied[i], value->valuedouble);
        }
        cJSON_AddItemToArray(builder->rows, entry);
    }
}

/* ---- what a document shows the verdict ------------------------------------------------------ */

/* The outputs of a document tally compared with the reference and with the baseline's output:
 * every rep's hash, or each distinct hash when the document keeps only those (a baseline). */
static void document_reps(const struct document_tally *tally, const char *reference,
                          const char *golden, struct verdict_reps *reps)
{
    const bool per_rep = tally->rep_hashes != NULL;
    const char **hashes = per_rep ? tally->rep_hashes : tally->distinct_hashes;
    memset(reps, 0, sizeof(*reps));
    reps->reps = tally->reps;
    reps->compared = per_rep ? tally->reps : tally->distinct_count;
    reps->compared_distinct = !per_rep;
    for (uint32_t i = 0; i < reps->compared; i++) {
        reps->differ_from_reference += strcmp(hashes[i], reference) != 0;
        reps->differ_from_baseline += golden && strcmp(hashes[i], golden) != 0;
    }
    reps->distinct_outputs = tally->distinct_count;
    reps->flapping_rows = tally->flapping_rows_total;
    reps->has_violations = tally->has_violations;
    for (unsigned kind = 0; kind < VIOLATION_KINDS; kind++) {
        reps->violations[kind].rows = tally->violation_rows[kind];
        reps->violations[kind].total_rows = tally->violation_total_rows[kind];
    }
}

/* What one backend entry (or one device's entry) of a report shows, judged at level against
 * the baseline's output golden (NULL: none). A report keeps, of the census, how many rows with
 * wrong_set or short it does not predict (eager reps) and how many rows it predicts to overflow
 * (compared with the graph replays' counts). */
static void document_evidence(const struct document_record *record,
                              const struct document_backend *backend, enum topk_determinism level,
                              const char *golden, const char *golden_origin,
                              struct verdict_evidence *evidence)
{
    *evidence = (struct verdict_evidence){
        .source = VERDICT_FROM_DOCUMENT,
        .backend = backend->name,
        .level = level,
        .exact_set = backend->exact_set,
        .status = backend->status,
        .reason = backend->reason,
        .reference_hash = record->reference_output_sha256,
        .baseline_hash = golden,
        .baseline_origin = golden_origin,
        .graph_requested = backend->has_graph,
        .graph_ran = backend->graph_ran,
        .graph_error = backend->graph_error,
        .batch_requested = backend->has_batch,
        .batch_ran = backend->batch_ran,
        .batch_error = backend->batch_error,
        .batch_dependent_rows = backend->batch_dependent_rows,
    };
    document_reps(&backend->eager, record->reference_output_sha256, golden, &evidence->eager);
    document_reps(&backend->graph, record->reference_output_sha256, golden, &evidence->graph);
    if (backend->has_prediction) {
        evidence->eager.overflow = OVERFLOW_WRONG_ROWS;
        evidence->eager.wrong_rows_not_predicted = backend->wrong_not_predicted_overflow;
        evidence->graph.overflow = OVERFLOW_COUNTS;
        evidence->graph.predicted_overflow_rows = backend->predicted_overflow_rows;
    }
}

/* The policy word that can allow a finding (-1: none can). */
static int allow_item_for(const struct verdict_finding *found)
{
    switch (found->check) {
    case VERDICT_CHECK_VIOLATION:
    case VERDICT_CHECK_GRAPH_MISMATCH: return (int)found->kind;
    case VERDICT_CHECK_FLAPPING: return GATE_ALLOW_FLAPPING;
    case VERDICT_CHECK_REFERENCE: return GATE_ALLOW_REFERENCE_MISMATCH;
    case VERDICT_CHECK_BASELINE: return GATE_ALLOW_BASELINE_MISMATCH;
    case VERDICT_CHECK_BATCH_DEPENDENT: return GATE_ALLOW_BATCH_DEPENDENT;
    case VERDICT_CHECK_ENGINE_WRONG: return GATE_ALLOW_ENGINE_WRONG;
    default: return -1;
    }
}

static const cJSON *rows_list_for(const struct document_record *record,
                                  const struct document_backend *backend, enum verdict_rows rows)
{
    if (rows == VERDICT_ROWS_ENGINE_WRONG)
        return record->engine.wrong_rows;
    if (!backend)
        return NULL;
    switch (rows) {
    case VERDICT_ROWS_NONE:
    case VERDICT_ROWS_ENGINE_WRONG: return NULL;
    case VERDICT_ROWS_FLAPPING: return backend->eager.flapping_rows;
    case VERDICT_ROWS_WRONG_NOT_PREDICTED: return backend->wrong_not_predicted_overflow_list;
    case VERDICT_ROWS_GRAPH_FLAPPING: return backend->graph.flapping_rows;
    case VERDICT_ROWS_BATCH_DEPENDENT: return backend->batch_dependent_list;
    }
    return NULL;
}

struct judged_backend {
    struct entry_builder *builder;
    const struct document_record *record;
    const struct document_backend *backend; /* NULL: the record's engine entry */
};

/* A finding of the verdict into the entry: a failure (with the rows that show it) unless the
 * policy allows it, or a note. */
static void emit_finding(void *context, const struct verdict_finding *found)
{
    const struct judged_backend *judged = context;
    if (!found->fails) {
        entry_note(judged->builder, "%s", found->text);
        return;
    }
    if (entry_fail(judged->builder, allow_item_for(found), "%s", found->text) &&
        found->rows != VERDICT_ROWS_NONE)
        entry_rows(judged->builder, rows_list_for(judged->record, judged->backend, found->rows),
                   found->rows_why);
}

/* One backend entry (or one device's entry) of the report. */
static void judge_backend(struct entry_builder *builder, const struct document_record *record,
                          const struct document_backend *backend,
                          const struct document_backend *baseline_backend,
                          const struct gate_entry_rules *rules, const char *golden,
                          const char *golden_origin)
{
    const char *status = backend_status_name(backend->status);
    const unsigned failures_before = builder->failures;
    if (verdict_of_status(backend->status) != VERDICT_NOT_RUN) {
        struct judged_backend judged = { builder, record, backend };
        struct verdict_evidence evidence;
        document_evidence(record, backend, rules->level, golden, golden_origin, &evidence);
        verdict_judge(&evidence, emit_finding, &judged);
    } else if (baseline_backend && baseline_backend->status == BACKEND_OK) {
        entry_fail(builder, GATE_ALLOW_NOT_RUN, "%s here (%s), ok in the baseline", status,
                   backend->reason ? backend->reason : "no reason given");
    } else {
        entry_note(builder, "%s here (%s); %s", status,
                   backend->reason ? backend->reason : "no reason given",
                   baseline_backend ? "not ok in the baseline either" : "no baseline entry");
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

/* Devices of one GPU model must agree when the level promises one output per model (levels
 * that must equal the reference agree through it, judged per device). */
static void judge_device_agreement(struct entry_builder *builder,
                                   const struct document_backend *backend,
                                   enum topk_determinism level)
{
    const struct document_backend *first = NULL;
    if (!verdict_rule_for(level)->same_output_per_model)
        return;
    for (size_t i = 0; i < backend->per_device_count; i++) {
        const struct document_backend *device = &backend->per_device[i];
        if (device->status != BACKEND_OK || device->eager.distinct_count != 1)
            continue;
        if (!first) {
            first = device;
            continue;
        }
        const struct document_device *a = &first->device, *b = &device->device;
        const bool same_model = a->name && b->name && strcmp(a->name, b->name) == 0 &&
                                a->sm_count == b->sm_count &&
                                a->smem_per_sm_bytes == b->smem_per_sm_bytes &&
                                (!a->compute_capability || !b->compute_capability ||
                                 strcmp(a->compute_capability, b->compute_capability) == 0);
        if (same_model &&
            strcmp(first->eager.distinct_hashes[0], device->eager.distinct_hashes[0]) != 0)
            entry_fail(builder, GATE_ALLOW_DEVICE_MISMATCH,
                       "device %lld (ordinal %lld) output %.12s differs from device %lld "
                       "(ordinal %lld) output %.12s on the same GPU model (claims %s)",
                       (long long)b->device_index, (long long)b->ordinal,
                       device->eager.distinct_hashes[0], (long long)a->device_index,
                       (long long)a->ordinal, first->eager.distinct_hashes[0],
                       topk_determinism_name(level));
    }
}

/* Is the report's record the same capture (payload) and the same audit (k, rows, reference) as
 * the baseline's? Returns false when it is not. */
static bool judge_comparable(struct entry_builder *builder, const struct document_record *record,
                             const struct document_record *baseline_record)
{
    const unsigned failures = builder->failures;
    if (strcmp(record->payload_sha256, baseline_record->payload_sha256) != 0)
        entry_fail(builder, -1,
                   "capture differs: %s record %u has payload_sha256 %.12s here and %.12s in the "
                   "baseline (another capture under the same name: re-capture, or make a new "
                   "baseline)",
                   record->file, record->index, record->payload_sha256,
                   baseline_record->payload_sha256);
    else if (record->k != baseline_record->k || record->rows != baseline_record->rows)
        entry_fail(builder, -1,
                   "not the same audit: k %u and %u row(s) here, k %u and %u row(s) in the "
                   "baseline (--k or --rows differ)",
                   record->k, record->rows, baseline_record->k, baseline_record->rows);
    else if (strcmp(record->reference_output_sha256, baseline_record->reference_output_sha256))
        entry_fail(builder, -1,
                   "not the same audit: the CPU reference hash is %.12s here and %.12s in the "
                   "baseline (other --rows, or a changed reference implementation)",
                   record->reference_output_sha256, baseline_record->reference_output_sha256);
    return builder->failures == failures;
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
                                        const struct document_record *record, const char *backend,
                                        const char *now, enum gate_status status)
{
    for (size_t i = 0; policy && i < policy->rule_count; i++) {
        struct gate_rule *rule = &policy->rules[i];
        if (!rule->tolerate || !gate_rule_matches(rule, record, backend))
            continue;
        if (gate_rule_expired(rule, now)) {
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
        cJSON *by = cJSON_AddObjectToObject(entry, KEY_TOLERATED_BY);
        if (by) {
            cJSON_AddStringToObject(by, KEY_RULE, rule->origin);
            cJSON_AddStringToObject(by, KEY_REASON, rule->tolerate);
            if (rule->until)
                cJSON_AddStringToObject(by, KEY_UNTIL, rule->until);
            else
                cJSON_AddNullToObject(by, KEY_UNTIL);
        }
        return GATE_TOLERATED;
    }
    return status;
}

/* The baseline's expected output hash of a gpu_to_gpu backend: its single output when it ran
 * there, else its CPU reference. */
static const char *golden_hash(struct entry_builder *builder,
                               const struct document_record *baseline_record,
                               const struct document_backend *baseline_backend, char *origin,
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

/* The entry's identification and its empty reasons, notes and rows (into builder). level,
 * claimed and level_from: NULL writes null (the engine entry has no determinism level). NULL when
 * out of memory. */
static cJSON *entry_open(const struct document_record *record, const char *backend,
                         const char *level, const char *claimed, const char *level_from,
                         const char *report_status, const char *baseline_status,
                         struct entry_builder *builder, cJSON **status_item)
{
    cJSON *entry = cJSON_CreateObject();
    if (!entry)
        return NULL;
    const char *const strings[][2] = {
        { KEY_BACKEND, backend },         { KEY_LEVEL, level },
        { KEY_CLAIMED_LEVEL, claimed },   { KEY_LEVEL_FROM, level_from },
        { KEY_REPORT_STATUS, report_status }, { KEY_BASELINE_STATUS, baseline_status },
    };
    cJSON_AddStringToObject(entry, KEY_FILE, record->file);
    cJSON_AddNumberToObject(entry, KEY_INDEX, record->index);
    if (record->global_index >= 0)
        cJSON_AddNumberToObject(entry, KEY_GLOBAL_INDEX, (double)record->global_index);
    cJSON_AddStringToObject(entry, KEY_PAYLOAD_SHA256, record->payload_sha256);
    for (size_t i = 0; i < sizeof(strings) / sizeof(strings[0]); i++) {
        if (strings[i][1])
            cJSON_AddStringToObject(entry, strings[i][0], strings[i][1]);
        else
            cJSON_AddNullToObject(entry, strings[i][0]);
    }
    *status_item = cJSON_AddStringToObject(entry, KEY_STATUS, gate_status_name(GATE_PASS));
    builder->reasons = cJSON_AddArrayToObject(entry, KEY_REASONS);
    builder->notes = cJSON_AddArrayToObject(entry, KEY_NOTES);
    builder->rows = cJSON_AddArrayToObject(entry, KEY_ROWS);
    if (!*status_item || !builder->reasons || !builder->notes || !builder->rows) {
        cJSON_Delete(entry);
        return NULL;
    }
    return entry;
}

/* Tolerances, then the entry's final status. */
static void entry_close(struct entry_builder *builder, cJSON *entry, cJSON *status_item,
                        struct gate_policy *policy, const struct document_record *record,
                        const char *backend, const struct gate_options *options,
                        enum gate_status status, enum gate_status *status_out)
{
    if (status == GATE_FAIL || status == GATE_MISSING)
        status = apply_tolerance(builder, entry, policy, record, backend, options->now, status);
    if (!cJSON_GetObjectItemCaseSensitive(entry, KEY_TOLERATED_BY))
        cJSON_AddNullToObject(entry, KEY_TOLERATED_BY);
    cJSON_SetValuestring(status_item, gate_status_name(status));
    *status_out = status;
}

cJSON *gate_judge_engine_entry(const struct document_record *baseline_record,
                               const struct document_record *report_record,
                               struct gate_policy *policy, const struct gate_options *options,
                               enum gate_status *status_out)
{
    const struct document_engine *engine = &report_record->engine;
    struct gate_entry_rules rules;
    struct entry_builder builder = { .device_index = -1 };
    cJSON *status_item = NULL;
    const char *baseline_status = NULL;
    if (baseline_record && baseline_record->engine.present)
        baseline_status = baseline_record->engine.judged ? ENGINE_STATUS_JUDGED
                                                         : ENGINE_STATUS_ERROR;
    cJSON *entry = entry_open(report_record, GATE_ENGINE_BACKEND, NULL, NULL, NULL,
                              engine->judged ? ENGINE_STATUS_JUDGED : ENGINE_STATUS_ERROR,
                              baseline_status, &builder, &status_item);
    if (!entry)
        return NULL;
    gate_policy_rules_for(policy, report_record, GATE_ENGINE_BACKEND, TOPK_NOT_GUARANTEED, &rules);
    builder.allow = rules.allow;
    if (baseline_record)
        (void)judge_comparable(&builder, report_record, baseline_record);
    uint32_t rows[VERDICT_LISTED_ROWS];
    char contract[160];
    struct engine_evidence evidence;
    document_engine_evidence(engine, rows, contract, sizeof(contract), &evidence);
    struct judged_backend judged = { &builder, report_record, NULL };
    verdict_judge_engine(&evidence, emit_finding, &judged);
    entry_close(&builder, entry, status_item, policy, report_record, GATE_ENGINE_BACKEND, options,
                builder.failures ? GATE_FAIL : GATE_PASS, status_out);
    return entry;
}

cJSON *gate_judge_entry(const struct document_record *baseline_record,
                        const struct document_backend *baseline_backend,
                        const struct document_record *report_record,
                        const struct document_backend *report_backend, struct gate_policy *policy,
                        const struct gate_options *options, enum gate_status *status_out)
{
    const struct document_record *record = report_record ? report_record : baseline_record;
    const struct document_backend *named = report_backend ? report_backend : baseline_backend;
    struct gate_entry_rules rules;
    struct entry_builder builder = { .device_index = -1 };
    enum gate_status status;
    cJSON *status_item = NULL;
    if (!record || !named)
        return NULL;
    gate_policy_rules_for(policy, record, named->name, named->level, &rules);
    builder.allow = rules.allow;
    cJSON *entry = entry_open(
        record, named->name, topk_determinism_name(rules.level),
        topk_determinism_name(named->level),
        rules.level_origin ? rules.level_origin : GATE_LEVEL_FROM_CLAIM,
        report_backend ? backend_status_name(report_backend->status) : NULL,
        baseline_backend ? backend_status_name(baseline_backend->status) : NULL, &builder,
        &status_item);
    if (!entry)
        return NULL;

    if (!report_backend) {
        add_formatted(builder.reasons, "",
                      report_record ? "the backend is not in the report's record"
                                    : "the record is not in the report");
        status = GATE_MISSING;
    } else {
        char origin[JSON_PATH_BYTES + 64] = "";
        const char *golden = NULL;
        if (rules.level_origin)
            entry_note(&builder, "level %s set by %s (the backend claims %s)",
                       topk_determinism_name(rules.level), rules.level_origin,
                       topk_determinism_name(named->level));
        if (!baseline_record) {
            entry_note(&builder, "the record is not in the baseline: judged by its level alone");
        } else {
            const bool comparable = judge_comparable(&builder, report_record, baseline_record);
            if (!baseline_backend)
                entry_note(&builder, "the backend is not in the baseline's record: judged by its "
                                     "level alone");
            if (comparable && verdict_rule_for(rules.level)->equal_reference)
                golden = golden_hash(&builder, baseline_record, baseline_backend, origin,
                                     sizeof(origin));
        }
        if (report_backend->per_device_count == 0) {
            judge_backend(&builder, report_record, report_backend, baseline_backend, &rules,
                          golden, origin);
        } else {
            for (size_t i = 0; i < report_backend->per_device_count; i++) {
                const struct document_backend *device = &report_backend->per_device[i];
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
    entry_close(&builder, entry, status_item, policy, record, named->name, options, status,
                status_out);
    return entry;
}

