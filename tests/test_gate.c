/* Unit tests of src/gate/ and of the report reader (src/report/report_read.c) on hand-made report
 * JSON, no GPU: each level passing and failing (gpu_to_gpu against the baseline and the reference,
 * run_to_run one output, not_guaranteed violations with the radix staging forgiveness), every
 * policy branch (level per backend and per record, allow lists, tolerated known failures with
 * match and until, allow_missing, allow_incomplete, allow_input_errors, invalid policies), missing
 * records and backends, not-run statuses against the baseline, per-device entries, the baseline
 * subset, the summary, merge and the cross-device block. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "gate.h"
#include "hash.h"
#include "report.h"

/* ---- fixtures ------------------------------------------------------------------------------- */

/* A fake SHA-256: 64 times the same hex digit. */
static const char *hash_of(char digit)
{
    static char hashes[16][65];
    int slot = digit >= 'a' ? digit - 'a' + 10 : digit - '0';
    memset(hashes[slot], digit, 64);
    hashes[slot][64] = '\0';
    return hashes[slot];
}

static const char *const violation_kinds[] = { "short", "duplicate", "out_of_range", "wrong_set",
                                               "tie_rule", "order", "padding", "page_translation",
                                               "raw_misaligned" };

/* A backend entry as `run` writes it: one rep per digit of reps ("aab": three reps, two
 * distinct outputs), no violations, nothing flapping listed. */
static cJSON *backend_json(const char *name, const char *level, const char *status,
                           const char *reps, char reference)
{
    cJSON *backend = cJSON_CreateObject();
    cJSON_AddStringToObject(backend, "name", name);
    cJSON_AddStringToObject(backend, "level", level);
    cJSON *claims = cJSON_AddObjectToObject(backend, "claims");
    cJSON_AddBoolToObject(claims, "exact_set", strcmp(level, "not_guaranteed") != 0);
    cJSON_AddStringToObject(backend, "status", status);
    if (strcmp(status, "ok") == 0)
        cJSON_AddNullToObject(backend, "reason");
    else
        cJSON_AddStringToObject(backend, "reason", "no CUDA device: test");
    cJSON_AddStringToObject(backend, "verdict", strcmp(status, "ok") == 0      ? "pass"
                                                : strcmp(status, "error") == 0 ? "fail"
                                                                               : "not_run");
    cJSON_AddItemToObject(backend, "verdict_reasons", cJSON_CreateArray());
    cJSON_AddNumberToObject(backend, "reps", (double)strlen(reps));
    cJSON *hashes = cJSON_AddArrayToObject(backend, "output_sha256_per_rep");
    cJSON *sets = cJSON_AddArrayToObject(backend, "set_sha256_per_rep");
    char distinct[32] = "";
    unsigned equal = 0;
    for (const char *rep = reps; *rep; rep++) {
        cJSON_AddItemToArray(hashes, cJSON_CreateString(hash_of(*rep)));
        cJSON_AddItemToArray(sets, cJSON_CreateString(hash_of('f')));
        if (!strchr(distinct, *rep))
            strncat(distinct, rep, 1);
        equal += *rep == reference;
    }
    cJSON_AddNumberToObject(backend, "distinct_outputs", (double)strlen(distinct));
    cJSON_AddNumberToObject(backend, "distinct_sets", *reps ? 1 : 0);
    cJSON_AddNumberToObject(backend, "equals_reference_reps", equal);
    cJSON *violations = cJSON_AddObjectToObject(backend, "violations");
    for (size_t i = 0; i < sizeof(violation_kinds) / sizeof(violation_kinds[0]); i++) {
        cJSON *kind = cJSON_AddObjectToObject(violations, violation_kinds[i]);
        cJSON_AddNumberToObject(kind, "total_rows", 0);
        cJSON_AddNumberToObject(kind, "max_rows_per_rep", 0);
        cJSON_AddNumberToObject(kind, "rows", 0);
    }
    cJSON_AddNumberToObject(backend, "flapping_rows_total", strlen(distinct) > 1 ? 2 : 0);
    cJSON *flapping = cJSON_AddArrayToObject(backend, "flapping_rows");
    for (int row = 1; strlen(distinct) > 1 && row <= 3; row += 2) {
        cJSON *item = cJSON_CreateObject();
        cJSON_AddNumberToObject(item, "row", row);
        cJSON_AddNumberToObject(item, "reps_differing", 1);
        cJSON_AddItemToArray(flapping, item);
    }
    cJSON *prediction = cJSON_AddObjectToObject(backend, "predicted_vs_observed");
    cJSON_AddNumberToObject(prediction, "predicted_overflow_rows", 0);
    cJSON_AddNumberToObject(prediction, "wrong_rows", 0);
    cJSON_AddNumberToObject(prediction, "wrong_not_predicted_overflow", 0);
    cJSON_AddNumberToObject(prediction, "set_flapping_unexplained", 0);
    cJSON_AddItemToObject(prediction, "wrong_not_predicted_overflow_list", cJSON_CreateArray());
    cJSON_AddItemToObject(prediction, "set_flapping_unexplained_list", cJSON_CreateArray());
    return backend;
}

static void set_number(cJSON *object, const char *key, double value)
{
    cJSON_DeleteItemFromObjectCaseSensitive(object, key);
    cJSON_AddNumberToObject(object, key, value);
}

static void set_violation(cJSON *backend, const char *kind, double rows, double total)
{
    cJSON *entry = cJSON_GetObjectItemCaseSensitive(
        cJSON_GetObjectItemCaseSensitive(backend, "violations"), kind);
    set_number(entry, "rows", rows);
    set_number(entry, "total_rows", total);
}

static void set_prediction(cJSON *backend, double overflow, double wrong_not_predicted,
                           const int *listed, int listed_count)
{
    cJSON *prediction = cJSON_GetObjectItemCaseSensitive(backend, "predicted_vs_observed");
    set_number(prediction, "predicted_overflow_rows", overflow);
    set_number(prediction, "wrong_not_predicted_overflow", wrong_not_predicted);
    cJSON_DeleteItemFromObjectCaseSensitive(prediction, "wrong_not_predicted_overflow_list");
    cJSON_AddItemToObject(prediction, "wrong_not_predicted_overflow_list",
                          cJSON_CreateIntArray(listed, listed_count));
}

static cJSON *record_json(const char *file, unsigned index, char payload, char reference,
                          unsigned k)
{
    cJSON *record = cJSON_CreateObject();
    cJSON_AddStringToObject(record, "file", file);
    cJSON_AddNumberToObject(record, "index", index);
    cJSON_AddNumberToObject(record, "global_index", index);
    cJSON_AddNumberToObject(record, "rows", 4);
    cJSON_AddNullToObject(record, "source_rows");
    cJSON_AddNumberToObject(record, "k", k);
    cJSON_AddStringToObject(record, "payload_sha256", hash_of(payload));
    cJSON *reference_json = cJSON_AddObjectToObject(record, "reference");
    cJSON_AddStringToObject(reference_json, "output_sha256", hash_of(reference));
    cJSON_AddStringToObject(reference_json, "set_sha256", hash_of('f'));
    cJSON_AddItemToObject(record, "backends", cJSON_CreateArray());
    return record;
}

static cJSON *add_backend(cJSON *record, cJSON *backend)
{
    cJSON_AddItemToArray(cJSON_GetObjectItemCaseSensitive(record, "backends"), backend);
    return backend;
}

static cJSON *report_json(const char *device_name)
{
    cJSON *report = cJSON_CreateObject();
    cJSON_AddStringToObject(report, "schema", "dsatopk-audit/report");
    cJSON_AddNumberToObject(report, "schema_version", 1);
    cJSON_AddBoolToObject(report, "complete", true);
    cJSON_AddNullToObject(report, "stop_reason");
    cJSON_AddNumberToObject(report, "exit_code", 0);
    cJSON *context = cJSON_AddObjectToObject(report, "context");
    cJSON_AddStringToObject(context, "host", "test-host");
    cJSON_AddStringToObject(context, "utc_time", "2026-11-29T10:00:00Z");
    cJSON *device = cJSON_AddObjectToObject(context, "device");
    cJSON_AddStringToObject(device, "name", device_name);
    cJSON_AddItemToObject(report, "records", cJSON_CreateArray());
    cJSON_AddItemToObject(report, "input_errors", cJSON_CreateArray());
    return report;
}

static cJSON *add_record(cJSON *report, cJSON *record)
{
    cJSON_AddItemToArray(cJSON_GetObjectItemCaseSensitive(report, "records"), record);
    return record;
}

/* A report with one record (captures/a.bin:0, reference 'a') and one backend. */
static cJSON *single(const char *name, const char *level, const char *status, const char *reps,
                     cJSON **backend_out)
{
    cJSON *report = report_json("NVIDIA H200");
    cJSON *record = add_record(report, record_json("captures/a.bin", 0, '1', 'a', 16));
    cJSON *backend = add_backend(record, backend_json(name, level, status, reps, 'a'));
    if (backend_out)
        *backend_out = backend;
    return report;
}

/* Parses baseline, report and policy (text or NULL), judges, keeps everything for checks. */
struct judged {
    struct report_document baseline, report;
    struct gate_policy policy;
    struct gate_counts counts;
    cJSON *result;
};

static void judge_at(struct judged *judged, cJSON *baseline, cJSON *report, const char *policy,
                     const char *now)
{
    struct audit_error err = { 0 };
    struct gate_options options;
    memset(judged, 0, sizeof(*judged));
    snprintf(options.now, sizeof(options.now), "%s", now);
    assert_int_equal(report_document_parse(&judged->baseline, "baseline.json", baseline, &err), 0);
    assert_int_equal(report_document_parse(&judged->report, "report.json", report, &err), 0);
    gate_policy_init(&judged->policy);
    if (policy) {
        cJSON *root = cJSON_Parse(policy);
        assert_non_null(root);
        int status = gate_policy_parse(&judged->policy, "policy.json", root, &err);
        if (status != 0)
            fprintf(stderr, "policy: %s\n", err.message);
        assert_int_equal(status, 0);
    }
    judged->result = gate_judge_report(&judged->baseline, &judged->report, &judged->policy,
                                       &options, &judged->counts);
    assert_non_null(judged->result);
}

static void judge(struct judged *judged, cJSON *baseline, cJSON *report, const char *policy)
{
    judge_at(judged, baseline, report, policy, "2026-11-29T12:00:00Z");
}

static void judged_release(struct judged *judged)
{
    cJSON_Delete(judged->result);
    report_document_release(&judged->baseline);
    report_document_release(&judged->report);
    gate_policy_release(&judged->policy);
}

static const cJSON *entry_for(const struct judged *judged, const char *backend, unsigned index)
{
    const cJSON *entry;
    cJSON_ArrayForEach(entry, cJSON_GetObjectItemCaseSensitive(judged->result, "entries")) {
        if (strcmp(cJSON_GetObjectItemCaseSensitive(entry, "backend")->valuestring, backend) == 0 &&
            cJSON_GetObjectItemCaseSensitive(entry, "index")->valuedouble == index)
            return entry;
    }
    fail_msg("no entry for %s record %u", backend, index);
    return NULL;
}

static const char *status_of(const cJSON *entry)
{
    return cJSON_GetObjectItemCaseSensitive(entry, "status")->valuestring;
}

static bool list_mentions(const cJSON *entry, const char *list, const char *text)
{
    const cJSON *item;
    cJSON_ArrayForEach(item, cJSON_GetObjectItemCaseSensitive(entry, list))
        if (strstr(item->valuestring, text))
            return true;
    return false;
}

static void print_entry_on_failure(const cJSON *entry)
{
    char *text = cJSON_Print(entry);
    fprintf(stderr, "%s\n", text);
    free(text);
}

#define assert_entry(entry, status, list, text)                                              \
    do {                                                                                      \
        if (strcmp(status_of(entry), (status)) != 0 ||                                        \
            ((text) && !list_mentions((entry), (list), (text))))                              \
            print_entry_on_failure(entry);                                                    \
        assert_string_equal(status_of(entry), (status));                                      \
        if (text)                                                                             \
            assert_true(list_mentions((entry), (list), (text)));                              \
    } while (0)

/* ---- levels --------------------------------------------------------------------------------- */

static void test_gpu_to_gpu_pass_and_fail(void **state)
{
    (void)state;
    struct judged judged;
    judge(&judged, single("bitonic", "gpu_to_gpu", "ok", "aaa", NULL),
          single("bitonic", "gpu_to_gpu", "ok", "aaa", NULL), NULL);
    assert_entry(entry_for(&judged, "bitonic", 0), "pass", "reasons", NULL);
    assert_int_equal(judged.counts.pass, 1);
    judged_release(&judged);

    /* One rep of three is another output: differs from the reference and the baseline. */
    judge(&judged, single("bitonic", "gpu_to_gpu", "ok", "aaa", NULL),
          single("bitonic", "gpu_to_gpu", "ok", "aba", NULL), NULL);
    const cJSON *entry = entry_for(&judged, "bitonic", 0);
    assert_entry(entry, "fail", "reasons", "differs from the CPU reference");
    assert_true(list_mentions(entry, "reasons", "1 of 3 rep(s) differ from the baseline's bitonic"));
    assert_true(list_mentions(entry, "reasons", "2 distinct outputs"));
    assert_int_equal(cJSON_GetArraySize(cJSON_GetObjectItemCaseSensitive(entry, "rows")), 2);
    assert_int_equal(judged.counts.fail, 1);
    judged_release(&judged);
}

static void test_gpu_to_gpu_needs_the_baseline_hash(void **state)
{
    (void)state;
    struct judged judged;
    /* The report equals its own reference, but the baseline's bitonic gave 'b': one of them is
     * wrong, and gpu_to_gpu promises the same bytes on every GPU. */
    judge(&judged, single("bitonic", "gpu_to_gpu", "ok", "bbb", NULL),
          single("bitonic", "gpu_to_gpu", "ok", "aaa", NULL), NULL);
    const cJSON *entry = entry_for(&judged, "bitonic", 0);
    assert_entry(entry, "fail", "reasons", "differ from the baseline's bitonic output");
    assert_true(list_mentions(entry, "notes", "is not its CPU reference"));
    judged_release(&judged);

    /* A baseline that did not run the backend: compared with the baseline's reference. */
    judge(&judged, single("bitonic", "gpu_to_gpu", "unavailable", "", NULL),
          single("bitonic", "gpu_to_gpu", "ok", "aaa", NULL), NULL);
    assert_entry(entry_for(&judged, "bitonic", 0), "pass", "reasons", NULL);
    judged_release(&judged);
}

static void test_run_to_run(void **state)
{
    (void)state;
    struct judged judged;
    /* One output, not the reference and not the baseline's: fine for run_to_run. */
    judge(&judged, single("filtered-det", "run_to_run", "ok", "ccc", NULL),
          single("filtered-det", "run_to_run", "ok", "ddd", NULL), NULL);
    assert_entry(entry_for(&judged, "filtered-det", 0), "pass", "reasons", NULL);
    judged_release(&judged);

    judge(&judged, single("filtered-det", "run_to_run", "ok", "ccc", NULL),
          single("filtered-det", "run_to_run", "ok", "cdc", NULL), NULL);
    const cJSON *entry = entry_for(&judged, "filtered-det", 0);
    assert_entry(entry, "fail", "reasons", "2 distinct outputs over 3 reps (claims run_to_run: one)");
    const cJSON *row = cJSON_GetArrayItem(cJSON_GetObjectItemCaseSensitive(entry, "rows"), 0);
    assert_int_equal(cJSON_GetObjectItemCaseSensitive(row, "row")->valuedouble, 1);
    assert_string_equal(cJSON_GetObjectItemCaseSensitive(row, "why")->valuestring, "flapping");
    judged_release(&judged);
}

static void test_not_guaranteed(void **state)
{
    (void)state;
    struct judged judged;
    cJSON *backend;
    /* Flapping is allowed. */
    judge(&judged, single("filtered", "not_guaranteed", "ok", "ccc", NULL),
          single("filtered", "not_guaranteed", "ok", "cde", NULL), NULL);
    assert_entry(entry_for(&judged, "filtered", 0), "pass", "reasons", NULL);
    judged_release(&judged);

    /* A duplicate never is. */
    cJSON *report = single("filtered", "not_guaranteed", "ok", "cde", &backend);
    set_violation(backend, "duplicate", 2, 5);
    judge(&judged, single("filtered", "not_guaranteed", "ok", "ccc", NULL), report, NULL);
    assert_entry(entry_for(&judged, "filtered", 0), "fail", "reasons",
                 "duplicate on 2 row(s), 5 row-rep(s) in total over 3 rep(s)");
    judged_release(&judged);

    /* filtered rescans on overflow: a wrong set is never forgiven. */
    const int rows[] = { 2 };
    report = single("filtered", "not_guaranteed", "ok", "cde", &backend);
    set_violation(backend, "wrong_set", 1, 3);
    set_prediction(backend, 4, 1, rows, 1);
    judge(&judged, single("filtered", "not_guaranteed", "ok", "ccc", NULL), report, NULL);
    const cJSON *entry = entry_for(&judged, "filtered", 0);
    assert_entry(entry, "fail", "reasons", "wrong_set on 1 row(s)");
    assert_int_equal(cJSON_GetArraySize(cJSON_GetObjectItemCaseSensitive(entry, "rows")), 1);
    judged_release(&judged);
}

static void test_radix_overflow_forgiveness(void **state)
{
    (void)state;
    struct judged judged;
    cJSON *backend;
    /* Wrong sets only on rows the census predicts to overflow the 4096 staging: its documented
     * failure mode, forgiven. */
    cJSON *report = single("radix", "not_guaranteed", "ok", "cde", &backend);
    set_violation(backend, "wrong_set", 3, 9);
    set_violation(backend, "short", 1, 1);
    set_prediction(backend, 4, 0, NULL, 0);
    judge(&judged, single("radix", "not_guaranteed", "ok", "ccc", NULL), report, NULL);
    assert_entry(entry_for(&judged, "radix", 0), "pass", "notes", "forgiven");
    judged_release(&judged);

    /* Two wrong rows the census does not predict: fail, rows listed. */
    const int rows[] = { 0, 3 };
    report = single("radix", "not_guaranteed", "ok", "cde", &backend);
    set_violation(backend, "wrong_set", 3, 9);
    set_prediction(backend, 1, 2, rows, 2);
    judge(&judged, single("radix", "not_guaranteed", "ok", "ccc", NULL), report, NULL);
    const cJSON *entry = entry_for(&judged, "radix", 0);
    assert_entry(entry, "fail", "reasons", "2 row(s) with wrong_set or short are not predicted");
    const cJSON *listed = cJSON_GetObjectItemCaseSensitive(entry, "rows");
    assert_int_equal(cJSON_GetArraySize(listed), 2);
    assert_int_equal(cJSON_GetObjectItemCaseSensitive(cJSON_GetArrayItem(listed, 1), "row")
                         ->valuedouble, 3);
    judged_release(&judged);
}

static void test_graph_and_batch(void **state)
{
    (void)state;
    struct judged judged;
    cJSON *backend;
    /* run_to_run: graph replays must equal the eager output. */
    cJSON *report = single("filtered-det", "run_to_run", "ok", "ccc", &backend);
    cJSON *graph = cJSON_Duplicate(backend, 1);
    cJSON_AddItemToObject(backend, "graph", graph);
    cJSON_AddBoolToObject(graph, "ran", true);
    cJSON_AddNullToObject(graph, "error");
    cJSON *mismatch = cJSON_AddObjectToObject(cJSON_GetObjectItemCaseSensitive(graph, "violations"),
                                              "graph_mismatch");
    cJSON_AddNumberToObject(mismatch, "rows", 2);
    cJSON_AddNumberToObject(mismatch, "total_rows", 4);
    judge(&judged, single("filtered-det", "run_to_run", "ok", "ccc", NULL), report, NULL);
    assert_entry(entry_for(&judged, "filtered-det", 0), "fail", "reasons", "graph_mismatch");
    judged_release(&judged);

    /* A graph capture error fails whatever the level. */
    report = single("radix", "not_guaranteed", "ok", "cde", &backend);
    graph = cJSON_AddObjectToObject(backend, "graph");
    cJSON_AddBoolToObject(graph, "ran", false);
    cJSON_AddStringToObject(graph, "error", "cudaStreamBeginCapture failed");
    cJSON_AddNumberToObject(graph, "reps", 0);
    cJSON_AddNumberToObject(graph, "equals_reference_reps", 0);
    cJSON_AddItemToObject(graph, "output_sha256_per_rep", cJSON_CreateArray());
    cJSON_AddNumberToObject(graph, "distinct_outputs", 0);
    cJSON_AddItemToObject(graph, "violations", cJSON_CreateObject());
    judge(&judged, single("radix", "not_guaranteed", "ok", "ccc", NULL), report, NULL);
    assert_entry(entry_for(&judged, "radix", 0), "fail", "reasons",
                 "graph: cudaStreamBeginCapture failed");
    judged_release(&judged);

    /* Batch dependence fails gpu_to_gpu, is only reported for run_to_run. */
    const char *levels[] = { "gpu_to_gpu", "run_to_run" };
    const char *expected[] = { "fail", "pass" };
    for (int i = 0; i < 2; i++) {
        report = single("sort", levels[i], "ok", "aaa", &backend);
        cJSON *batch = cJSON_AddObjectToObject(backend, "batch_invariance");
        cJSON_AddBoolToObject(batch, "ran", true);
        cJSON_AddNullToObject(batch, "error");
        cJSON_AddNumberToObject(batch, "dependent_rows_total", 1);
        cJSON *rows = cJSON_AddArrayToObject(batch, "dependent_rows");
        cJSON *row = cJSON_CreateObject();
        cJSON_AddNumberToObject(row, "row", 2);
        cJSON_AddNumberToObject(row, "contexts_differing", 3);
        cJSON_AddItemToArray(rows, row);
        judge(&judged, single("sort", levels[i], "ok", "aaa", NULL), report, NULL);
        assert_entry(entry_for(&judged, "sort", 0), expected[i], "reasons",
                     i == 0 ? "batch invariance: 1 row(s)" : NULL);
        judged_release(&judged);
    }
}

static void test_report_own_verdict(void **state)
{
    (void)state;
    struct judged judged;
    cJSON *backend;
    /* The report failed itself (per-row data gate does not have): still a failure. */
    cJSON *report = single("sort", "gpu_to_gpu", "ok", "aaa", &backend);
    cJSON_ReplaceItemInObjectCaseSensitive(backend, "verdict", cJSON_CreateString("fail"));
    cJSON_AddItemToArray(cJSON_GetObjectItemCaseSensitive(backend, "verdict_reasons"),
                         cJSON_CreateString("graph: wrong_set on 1 row"));
    judge(&judged, single("sort", "gpu_to_gpu", "ok", "aaa", NULL), report, NULL);
    assert_entry(entry_for(&judged, "sort", 0), "fail", "reasons",
                 "the report's own verdict is fail: graph: wrong_set on 1 row");
    judged_release(&judged);
}

/* ---- statuses and missing entries ----------------------------------------------------------- */

static void test_not_run_against_baseline(void **state)
{
    (void)state;
    struct judged judged;
    /* Unavailable here, ok in the baseline: fail. */
    judge(&judged, single("sort", "gpu_to_gpu", "ok", "aaa", NULL),
          single("sort", "gpu_to_gpu", "unavailable", "", NULL), NULL);
    assert_entry(entry_for(&judged, "sort", 0), "fail", "reasons", "unavailable here");
    judged_release(&judged);

    /* Unsupported in both: nothing to compare, a note. */
    judge(&judged, single("filtered", "not_guaranteed", "unsupported", "", NULL),
          single("filtered", "not_guaranteed", "unsupported", "", NULL), NULL);
    assert_entry(entry_for(&judged, "filtered", 0), "pass", "notes", "not ok in the baseline either");
    judged_release(&judged);

    /* The policy tolerates not running (a GPU too small for the backend). */
    judge(&judged, single("filtered", "not_guaranteed", "ok", "ccc", NULL),
          single("filtered", "not_guaranteed", "unsupported", "", NULL),
          "{\"backends\": {\"filtered\": {\"allow\": [\"not_run\"]}}}");
    assert_entry(entry_for(&judged, "filtered", 0), "pass", "notes", "allowed by the policy (not_run)");
    judged_release(&judged);

    /* An error always fails. */
    judge(&judged, single("sort", "gpu_to_gpu", "ok", "aaa", NULL),
          single("sort", "gpu_to_gpu", "error", "", NULL), NULL);
    assert_entry(entry_for(&judged, "sort", 0), "fail", "reasons", "error: no CUDA device: test");
    judged_release(&judged);
}

static void test_missing_records_and_backends(void **state)
{
    (void)state;
    struct judged judged;
    cJSON *baseline = single("sort", "gpu_to_gpu", "ok", "aaa", NULL);
    cJSON *second = add_record(baseline, record_json("captures/b.bin", 1, '2', 'a', 16));
    add_backend(second, backend_json("sort", "gpu_to_gpu", "ok", "aaa", 'a'));
    add_backend(cJSON_GetArrayItem(cJSON_GetObjectItemCaseSensitive(baseline, "records"), 0),
                backend_json("bitonic", "gpu_to_gpu", "ok", "aaa", 'a'));
    /* The report has record 0 with sort only, and an extra record the baseline lacks. */
    cJSON *report = single("sort", "gpu_to_gpu", "ok", "aaa", NULL);
    cJSON *extra = add_record(report, record_json("captures/c.bin", 5, '3', 'a', 16));
    add_backend(extra, backend_json("sort", "gpu_to_gpu", "ok", "aaa", 'a'));
    judge(&judged, baseline, report, NULL);
    assert_entry(entry_for(&judged, "bitonic", 0), "missing", "reasons",
                 "the backend is not in the report's record");
    assert_entry(entry_for(&judged, "sort", 1), "missing", "reasons", "the record is not in the report");
    assert_entry(entry_for(&judged, "sort", 5), "pass", "notes", "not in the baseline");
    assert_int_equal(judged.counts.missing, 2);
    assert_true(gate_entry_fails(GATE_MISSING, &judged.policy));
    assert_string_equal(cJSON_GetObjectItemCaseSensitive(judged.result, "status")->valuestring,
                        "fail");
    judged_release(&judged);

    baseline = single("sort", "gpu_to_gpu", "ok", "aaa", NULL);
    second = add_record(baseline, record_json("captures/b.bin", 1, '2', 'a', 16));
    add_backend(second, backend_json("sort", "gpu_to_gpu", "ok", "aaa", 'a'));
    judge(&judged, baseline, single("sort", "gpu_to_gpu", "ok", "aaa", NULL),
          "{\"allow_missing\": true}");
    assert_entry(entry_for(&judged, "sort", 1), "missing", "reasons", NULL);
    assert_false(gate_entry_fails(GATE_MISSING, &judged.policy));
    assert_string_equal(cJSON_GetObjectItemCaseSensitive(judged.result, "status")->valuestring,
                        "pass");
    judged_release(&judged);
}

static void test_records_match_by_base_name_and_payload(void **state)
{
    (void)state;
    struct judged judged;
    /* Another machine, another directory: same file name, payload and index match. */
    cJSON *report = report_json("NVIDIA GB10");
    cJSON *record = add_record(report, record_json("/scratch/ci/captures/a.bin", 0, '1', 'a', 16));
    add_backend(record, backend_json("sort", "gpu_to_gpu", "ok", "aaa", 'a'));
    /* Same name, other payload: another record (missing + extra). */
    record = add_record(report, record_json("captures/a.bin", 0, '9', 'a', 16));
    add_backend(record, backend_json("bitonic", "gpu_to_gpu", "ok", "aaa", 'a'));
    judge(&judged, single("sort", "gpu_to_gpu", "ok", "aaa", NULL), report, NULL);
    assert_int_equal(judged.counts.entries, 2);
    assert_entry(entry_for(&judged, "sort", 0), "pass", "reasons", NULL);
    assert_entry(entry_for(&judged, "bitonic", 0), "pass", "notes", "not in the baseline");
    judged_release(&judged);
}

static void test_not_comparable(void **state)
{
    (void)state;
    struct judged judged;
    cJSON *report = report_json("NVIDIA H200");
    cJSON *record = add_record(report, record_json("captures/a.bin", 0, '1', 'b', 32));
    add_backend(record, backend_json("filtered", "not_guaranteed", "ok", "cde", 'b'));
    judge(&judged, single("filtered", "not_guaranteed", "ok", "ccc", NULL), report, NULL);
    assert_entry(entry_for(&judged, "filtered", 0), "fail", "reasons",
                 "not the same audit: k 32 and 4 row(s) here, k 16");
    judged_release(&judged);
}

static void test_report_level_failures(void **state)
{
    (void)state;
    struct judged judged;
    cJSON *report = single("sort", "gpu_to_gpu", "ok", "aaa", NULL);
    cJSON_ReplaceItemInObjectCaseSensitive(report, "complete", cJSON_CreateFalse());
    cJSON_ReplaceItemInObjectCaseSensitive(report, "stop_reason",
                                           cJSON_CreateString("device lost: illegal address"));
    cJSON *error = cJSON_CreateObject();
    cJSON_AddStringToObject(error, "message", "b.bin: record 2 at byte 99: truncated");
    cJSON_AddItemToArray(cJSON_GetObjectItemCaseSensitive(report, "input_errors"), error);
    judge(&judged, single("sort", "gpu_to_gpu", "ok", "aaa", NULL), cJSON_Duplicate(report, 1),
          NULL);
    assert_string_equal(cJSON_GetObjectItemCaseSensitive(judged.result, "status")->valuestring,
                        "fail");
    assert_true(list_mentions(judged.result, "report_reasons", "incomplete: device lost"));
    assert_true(list_mentions(judged.result, "report_reasons", "1 input error(s)"));
    assert_int_equal(judged.counts.failing_reports, 1);
    judged_release(&judged);

    judge(&judged, single("sort", "gpu_to_gpu", "ok", "aaa", NULL), report,
          "{\"allow_incomplete\": true, \"allow_input_errors\": true}");
    assert_string_equal(cJSON_GetObjectItemCaseSensitive(judged.result, "status")->valuestring,
                        "pass");
    assert_true(list_mentions(judged.result, "report_notes", "incomplete: device lost"));
    assert_true(list_mentions(judged.result, "report_notes", "1 input error(s)"));
    assert_int_equal(judged.counts.failing_reports, 0);
    judged_release(&judged);
}

/* ---- policy --------------------------------------------------------------------------------- */

static void test_policy_levels(void **state)
{
    (void)state;
    struct judged judged;
    /* backends{}: radix held to run_to_run, so its flapping fails. */
    judge(&judged, single("radix", "not_guaranteed", "ok", "ccc", NULL),
          single("radix", "not_guaranteed", "ok", "cdc", NULL),
          "{\"schema\": \"dsatopk-audit/policy\", \"schema_version\": 1,"
          " \"backends\": {\"radix\": {\"level\": \"run_to_run\"}}}");
    const cJSON *entry = entry_for(&judged, "radix", 0);
    assert_entry(entry, "fail", "reasons", "claims run_to_run: one");
    assert_string_equal(cJSON_GetObjectItemCaseSensitive(entry, "level_from")->valuestring,
                        "policy.backends.radix");
    judged_release(&judged);

    /* records[] is more specific than backends{}: this record is back to not_guaranteed. */
    judge(&judged, single("radix", "not_guaranteed", "ok", "ccc", NULL),
          single("radix", "not_guaranteed", "ok", "cdc", NULL),
          "{\"backends\": {\"radix\": {\"level\": \"run_to_run\"}},"
          " \"records\": [{\"file\": \"a.bin\", \"index\": 0, \"backend\": \"radix\","
          "                \"level\": \"not_guaranteed\"}]}");
    entry = entry_for(&judged, "radix", 0);
    assert_entry(entry, "pass", "notes", "set by policy.records[0]");
    judged_release(&judged);

    /* A record selector that does not match leaves the backend rule in force. */
    judge(&judged, single("radix", "not_guaranteed", "ok", "ccc", NULL),
          single("radix", "not_guaranteed", "ok", "cdc", NULL),
          "{\"backends\": {\"radix\": {\"level\": \"run_to_run\"}},"
          " \"records\": [{\"file\": \"other/a.bin\", \"level\": \"not_guaranteed\"}]}");
    assert_entry(entry_for(&judged, "radix", 0), "fail", "reasons", NULL);
    judged_release(&judged);

    /* Lowering gpu_to_gpu to run_to_run: another hash is fine then. */
    judge(&judged, single("sort", "gpu_to_gpu", "ok", "aaa", NULL),
          single("sort", "gpu_to_gpu", "ok", "ccc", NULL),
          "{\"records\": [{\"payload_sha256\": \"" "1111111111111111111111111111111111111111111111111111111111111111"
          "\", \"level\": \"run_to_run\"}]}");
    assert_entry(entry_for(&judged, "sort", 0), "pass", "reasons", NULL);
    judged_release(&judged);
}

static void test_policy_allow(void **state)
{
    (void)state;
    struct judged judged;
    cJSON *backend;
    cJSON *report = single("filtered", "not_guaranteed", "ok", "cde", &backend);
    set_violation(backend, "wrong_set", 1, 1);
    judge(&judged, single("filtered", "not_guaranteed", "ok", "ccc", NULL), report,
          "{\"backends\": {\"filtered\": {\"allow\": [\"wrong_set\"]}}}");
    assert_entry(entry_for(&judged, "filtered", 0), "pass", "notes",
                 "allowed by the policy (wrong_set)");
    judged_release(&judged);

    /* An allowance for another kind does not cover it. */
    report = single("filtered", "not_guaranteed", "ok", "cde", &backend);
    set_violation(backend, "wrong_set", 1, 1);
    judge(&judged, single("filtered", "not_guaranteed", "ok", "ccc", NULL), report,
          "{\"backends\": {\"filtered\": {\"allow\": [\"duplicate\", \"flapping\"]}}}");
    assert_entry(entry_for(&judged, "filtered", 0), "fail", "reasons", "wrong_set");
    judged_release(&judged);

    /* gpu_to_gpu with baseline_mismatch allowed still needs the reference. */
    judge(&judged, single("sort", "gpu_to_gpu", "ok", "bbb", NULL),
          single("sort", "gpu_to_gpu", "ok", "aaa", NULL),
          "{\"backends\": {\"sort\": {\"allow\": [\"baseline_mismatch\"]}}}");
    assert_entry(entry_for(&judged, "sort", 0), "pass", "notes", "allowed by the policy (baseline_mismatch)");
    judged_release(&judged);
}

static const char known_failure_policy[] =
    "{\"known_failures\": [{\"file\": \"captures/a.bin\", \"backend\": \"filtered-det\","
    " \"reason\": \"flaky on GB10, issue 12\", \"until\": \"2026-12-31\"},"
    " {\"backend\": \"bitonic\", \"reason\": \"never happens\"}]}";

static void test_known_failures(void **state)
{
    (void)state;
    struct judged judged;
    judge(&judged, single("filtered-det", "run_to_run", "ok", "ccc", NULL),
          single("filtered-det", "run_to_run", "ok", "cdc", NULL), known_failure_policy);
    const cJSON *entry = entry_for(&judged, "filtered-det", 0);
    assert_entry(entry, "tolerated", "reasons", "distinct outputs");
    const cJSON *by = cJSON_GetObjectItemCaseSensitive(entry, "tolerated_by");
    assert_string_equal(cJSON_GetObjectItemCaseSensitive(by, "rule")->valuestring,
                        "policy.known_failures[0]");
    assert_int_equal(judged.counts.tolerated, 1);
    assert_int_equal(judged.counts.fail, 0);
    assert_int_equal(judged.policy.rules[0].times_used, 1);
    assert_int_equal(judged.policy.rules[1].times_used, 0);
    assert_string_equal(cJSON_GetObjectItemCaseSensitive(judged.result, "status")->valuestring,
                        "pass");
    judged_release(&judged);

    /* The last day of "until" still tolerates; the day after does not. */
    judge_at(&judged, single("filtered-det", "run_to_run", "ok", "ccc", NULL),
             single("filtered-det", "run_to_run", "ok", "cdc", NULL), known_failure_policy,
             "2026-12-31T23:59:59Z");
    assert_entry(entry_for(&judged, "filtered-det", 0), "tolerated", "reasons", NULL);
    judged_release(&judged);
    judge_at(&judged, single("filtered-det", "run_to_run", "ok", "ccc", NULL),
             single("filtered-det", "run_to_run", "ok", "cdc", NULL), known_failure_policy,
             "2027-01-01T00:00:00Z");
    assert_entry(entry_for(&judged, "filtered-det", 0), "fail", "notes", "expired on 2026-12-31");
    judged_release(&judged);

    /* match: tolerated only if every failure mentions it. */
    cJSON *backend;
    cJSON *report = single("filtered-det", "run_to_run", "ok", "cdc", &backend);
    judge(&judged, single("filtered-det", "run_to_run", "ok", "ccc", NULL), cJSON_Duplicate(report, 1),
          "{\"records\": [{\"file\": \"a.bin\", \"backend\": \"filtered-det\","
          " \"tolerate\": \"known flaky\", \"match\": \"distinct outputs\"}]}");
    assert_entry(entry_for(&judged, "filtered-det", 0), "tolerated", "reasons", NULL);
    judged_release(&judged);
    set_violation(backend, "order", 1, 1);
    judge(&judged, single("filtered-det", "run_to_run", "ok", "ccc", NULL), report,
          "{\"records\": [{\"file\": \"a.bin\", \"backend\": \"filtered-det\","
          " \"tolerate\": \"known flaky\", \"match\": \"distinct outputs\"}]}");
    assert_entry(entry_for(&judged, "filtered-det", 0), "fail", "notes", "tolerates only failures");
    judged_release(&judged);

    /* A missing entry can be a known failure too. */
    judge(&judged, single("sort", "gpu_to_gpu", "ok", "aaa", NULL),
          single("bitonic", "gpu_to_gpu", "ok", "aaa", NULL),
          "{\"known_failures\": [{\"backend\": \"sort\", \"reason\": \"not built on this CI\"}]}");
    assert_entry(entry_for(&judged, "sort", 0), "tolerated", "reasons", "not in the report");
    judged_release(&judged);
}

static void expect_policy_error(const char *text, const char *message)
{
    struct gate_policy policy;
    struct audit_error err = { 0 };
    cJSON *root = cJSON_Parse(text);
    assert_non_null(root);
    assert_int_equal(gate_policy_parse(&policy, "p.json", root, &err), AUDIT_EDATA);
    if (!strstr(err.message, message))
        fprintf(stderr, "got: %s\nwanted: %s\n", err.message, message);
    assert_non_null(strstr(err.message, message));
}

static void test_invalid_policies(void **state)
{
    (void)state;
    expect_policy_error("[]", "p.json: policy: not a JSON object");
    expect_policy_error("{\"schema\": \"dsatopk-audit/report\"}", "policy.schema: 'dsatopk-audit/report' is not");
    expect_policy_error("{\"schema_version\": 2}", "policy.schema_version: version 2");
    expect_policy_error("{\"alow_missing\": true}", "policy.alow_missing: unknown key");
    expect_policy_error("{\"backends\": {\"radix\": {\"level\": \"exact\"}}}",
                        "policy.backends.radix.level: 'exact' is not");
    expect_policy_error("{\"backends\": {\"radix\": {\"allow\": [\"wrong_set\", \"wrongset\"]}}}",
                        "policy.backends.radix.allow[1]: not one of");
    expect_policy_error("{\"records\": [{\"backend\": \"radix\", \"level\": \"run_to_run\"}]}",
                        "policy.records[0]: a records[] entry needs file or payload_sha256");
    expect_policy_error("{\"records\": [{\"file\": \"a.bin\", \"tolerate\": \"x\", \"until\": \"31/12/2026\"}]}",
                        "policy.records[0].until: '31/12/2026' is not");
    expect_policy_error("{\"records\": [{\"file\": \"a.bin\", \"tolerate\": \"x\", \"until\": \"2026-02-30\"}]}",
                        "policy.records[0].until: '2026-02-30' is not a date");
    expect_policy_error("{\"known_failures\": [{\"reason\": \"everything\"}]}",
                        "policy.known_failures[0]: a known failure needs");
    expect_policy_error("{\"known_failures\": [{\"backend\": \"radix\"}]}",
                        "policy.known_failures[0].reason: missing");
    expect_policy_error("{\"known_failures\": [{\"index\": 3, \"reason\": \"x\"}]}",
                        "policy.known_failures[0].index: needs file or payload_sha256");
    expect_policy_error("{\"records\": [{\"file\": \"a.bin\", \"match\": \"x\"}]}",
                        "policy.records[0].match: only meaningful with tolerate");
    expect_policy_error("{\"records\": [{\"payload_sha256\": \"abc\", \"level\": \"gpu_to_gpu\"}]}",
                        "policy.records[0].payload_sha256: 'abc' is not a lower-case hex");
}

/* ---- documents ------------------------------------------------------------------------------ */

static void expect_document_error(cJSON *root, const char *message)
{
    struct report_document document;
    struct audit_error err = { 0 };
    assert_int_equal(report_document_parse(&document, "r.json", root, &err), AUDIT_EDATA);
    if (!strstr(err.message, message))
        fprintf(stderr, "got: %s\nwanted: %s\n", err.message, message);
    assert_non_null(strstr(err.message, message));
}

static void test_invalid_documents(void **state)
{
    (void)state;
    cJSON *backend;
    cJSON *report = single("sort", "gpu_to_gpu", "ok", "aaa", NULL);
    set_number(report, "schema_version", 2);
    expect_document_error(report, "r.json: $.schema_version: dsatopk-audit/report version 2");
    /* Versions before the first are not documents of this tool. */
    report = single("sort", "gpu_to_gpu", "ok", "aaa", NULL);
    set_number(report, "schema_version", 0);
    expect_document_error(report, "$.schema_version: dsatopk-audit/report version 0: this tool "
                                  "reads version 1");

    report = single("sort", "gpu_to_gpu", "ok", "aaa", NULL);
    cJSON_ReplaceItemInObjectCaseSensitive(report, "schema", cJSON_CreateString("other"));
    expect_document_error(report, "$.schema: 'other' is neither");

    report = single("sort", "gpu_to_gpu", "ok", "aaa", &backend);
    cJSON_ReplaceItemInArray(cJSON_GetObjectItemCaseSensitive(backend, "output_sha256_per_rep"), 1,
                             cJSON_CreateString("XYZ"));
    expect_document_error(report, "$.records[0].backends[0].output_sha256_per_rep[1]: not a lower-case hex");

    report = single("sort", "gpu_to_gpu", "ok", "aaa", &backend);
    set_number(backend, "reps", 4);
    expect_document_error(report, "$.records[0].backends[0].output_sha256_per_rep: 3 hashes for 4 reps");

    report = single("sort", "gpu_to_gpu", "ok", "abc", &backend);
    set_number(backend, "distinct_outputs", 1);
    expect_document_error(report, "$.records[0].backends[0].distinct_outputs: 1, but");

    report = single("sort", "gpu_to_gpu", "ok", "aaa", &backend);
    cJSON_ReplaceItemInObjectCaseSensitive(backend, "status", cJSON_CreateString("fine"));
    expect_document_error(report, "$.records[0].backends[0].status: 'fine' is not ok");

    report = single("sort", "gpu_to_gpu", "ok", "aaa", NULL);
    cJSON_DeleteItemFromObjectCaseSensitive(
        cJSON_GetArrayItem(cJSON_GetObjectItemCaseSensitive(report, "records"), 0), "payload_sha256");
    expect_document_error(report, "$.records[0].payload_sha256: missing");

    report = single("sort", "gpu_to_gpu", "ok", "aaa", &backend);
    set_violation(backend, "duplicate", -1, 0);
    expect_document_error(report, "$.records[0].backends[0].violations.duplicate.rows: not an integer");

    report = single("sort", "gpu_to_gpu", "ok", "aaa", NULL);
    add_backend(cJSON_GetArrayItem(cJSON_GetObjectItemCaseSensitive(report, "records"), 0),
                backend_json("sort", "gpu_to_gpu", "ok", "aaa", 'a'));
    expect_document_error(report, "$.records[0].backends[1].name: backend 'sort' is listed twice");
}

static void test_baseline_subset_round_trip(void **state)
{
    (void)state;
    struct audit_error err = { 0 };
    cJSON *report = single("sort", "gpu_to_gpu", "ok", "aaa", NULL);
    cJSON *record = cJSON_GetArrayItem(cJSON_GetObjectItemCaseSensitive(report, "records"), 0);
    add_backend(record, backend_json("radix", "not_guaranteed", "ok", "cdcd", 'a'));
    add_backend(record, backend_json("filtered", "not_guaranteed", "unsupported", "", 'a'));
    cJSON *baseline = NULL;
    assert_int_equal(gate_baseline_from_report(report, "golden.json", &baseline, &err), 0);
    assert_string_equal(cJSON_GetObjectItemCaseSensitive(baseline, "schema")->valuestring,
                        BASELINE_SCHEMA);
    const cJSON *radix = cJSON_GetArrayItem(cJSON_GetObjectItemCaseSensitive(
        cJSON_GetArrayItem(cJSON_GetObjectItemCaseSensitive(baseline, "records"), 0), "backends"), 1);
    const cJSON *distinct = cJSON_GetObjectItemCaseSensitive(radix, "output_sha256");
    assert_int_equal(cJSON_GetArraySize(distinct), 2);
    assert_string_equal(cJSON_GetArrayItem(distinct, 1)->valuestring, hash_of('d'));
    assert_null(cJSON_GetObjectItemCaseSensitive(radix, "output_sha256_per_rep"));
    assert_int_equal(cJSON_GetObjectItemCaseSensitive(radix, "reps")->valuedouble, 4);

    /* The baseline gates like the report it came from; a baseline of a baseline is itself. */
    struct judged judged;
    judge(&judged, cJSON_Duplicate(baseline, 1), cJSON_Duplicate(report, 1), NULL);
    assert_int_equal(judged.counts.pass, 3);
    judged_release(&judged);
    judge(&judged, cJSON_Duplicate(baseline, 1), single("sort", "gpu_to_gpu", "ok", "aba", NULL),
          NULL);
    assert_entry(entry_for(&judged, "sort", 0), "fail", "reasons", "differ from the baseline's sort");
    judged_release(&judged);
    /* A report without verdict_reasons (optional) still gives a baseline that loads (found by
     * the fuzzer). */
    cJSON *bare = single("sort", "gpu_to_gpu", "ok", "aaa", NULL);
    cJSON_DeleteItemFromObjectCaseSensitive(
        cJSON_GetArrayItem(cJSON_GetObjectItemCaseSensitive(
            cJSON_GetArrayItem(cJSON_GetObjectItemCaseSensitive(bare, "records"), 0), "backends"), 0),
        "verdict_reasons");
    cJSON *bare_baseline = NULL;
    assert_int_equal(gate_baseline_from_report(bare, "bare.json", &bare_baseline, &err), 0);
    struct report_document bare_document;
    assert_int_equal(report_document_parse(&bare_document, "bare-baseline.json", bare_baseline, &err), 0);
    report_document_release(&bare_document);
    cJSON_Delete(bare);
    /* Baselines of two GPUs gated against each other: judged by their distinct hashes. */
    cJSON *other = NULL, *bad_report = single("sort", "gpu_to_gpu", "ok", "aab", NULL);
    assert_int_equal(gate_baseline_from_report(bad_report, "other.json", &other, &err), 0);
    judge(&judged, cJSON_Duplicate(baseline, 1), cJSON_Duplicate(baseline, 1), NULL);
    assert_entry(entry_for(&judged, "sort", 0), "pass", "notes", "a baseline-format document");
    judged_release(&judged);
    judge(&judged, cJSON_Duplicate(baseline, 1), other, NULL);
    assert_entry(entry_for(&judged, "sort", 0), "fail", "reasons",
                 "output differs from the CPU reference (aaaaaaaaaaaa) in 1 of 2 distinct output(s)");
    judged_release(&judged);
    cJSON_Delete(bad_report);
    cJSON *again = NULL;
    assert_int_equal(gate_baseline_from_report(baseline, "b.json", &again, &err), 0);
    assert_true(cJSON_Compare(again, baseline, true));
    cJSON_Delete(again);
    cJSON_Delete(baseline);
    cJSON_Delete(report);
}

/* ---- per device ----------------------------------------------------------------------------- */

static cJSON *device_entry(const char *name, const char *level, const char *reps, int index,
                           int ordinal, const char *device_name, int sm_count)
{
    cJSON *entry = backend_json(name, level, "ok", reps, 'a');
    cJSON *device = cJSON_AddObjectToObject(entry, "device");
    cJSON_AddNumberToObject(device, "index", index);
    cJSON_AddNumberToObject(device, "ordinal", ordinal);
    cJSON_AddStringToObject(device, "name", device_name);
    cJSON_AddStringToObject(device, "compute_capability", "9.0");
    cJSON_AddNumberToObject(device, "sm_count", sm_count);
    cJSON_AddNumberToObject(device, "smem_per_sm_bytes", 233472);
    return entry;
}

static cJSON *two_device_report(const char *name, const char *level, const char *reps0,
                                const char *reps1, int sm_count1)
{
    cJSON *backend;
    cJSON *report = single(name, level, "ok", reps0, &backend);
    cJSON *list = cJSON_AddArrayToObject(backend, "per_device");
    cJSON_AddItemToArray(list, device_entry(name, level, reps0, 0, 0, "NVIDIA H200", 132));
    cJSON_AddItemToArray(list, device_entry(name, level, reps1, 1, 1, "NVIDIA H200", sm_count1));
    return report;
}

static void test_per_device_entries(void **state)
{
    (void)state;
    struct judged judged;
    judge(&judged, single("sort", "gpu_to_gpu", "ok", "aaa", NULL),
          two_device_report("sort", "gpu_to_gpu", "aaa", "aaa", 132), NULL);
    assert_entry(entry_for(&judged, "sort", 0), "pass", "reasons", NULL);
    judged_release(&judged);

    judge(&judged, single("sort", "gpu_to_gpu", "ok", "aaa", NULL),
          two_device_report("sort", "gpu_to_gpu", "aaa", "bbb", 132), NULL);
    const cJSON *entry = entry_for(&judged, "sort", 0);
    assert_entry(entry, "fail", "reasons", "device 1 (ordinal 1): output differs from the CPU reference");
    assert_false(list_mentions(entry, "reasons", "device 0"));
    judged_release(&judged);

    /* run_to_run: the same model must agree, another model may not. */
    judge(&judged, single("filtered-det", "run_to_run", "ok", "ccc", NULL),
          two_device_report("filtered-det", "run_to_run", "ccc", "ddd", 132), NULL);
    assert_entry(entry_for(&judged, "filtered-det", 0), "fail", "reasons",
                 "on the same GPU model (claims run_to_run)");
    judged_release(&judged);
    judge(&judged, single("filtered-det", "run_to_run", "ok", "ccc", NULL),
          two_device_report("filtered-det", "run_to_run", "ccc", "ddd", 48), NULL);
    assert_entry(entry_for(&judged, "filtered-det", 0), "pass", "reasons", NULL);
    judged_release(&judged);
}

static void test_cross_device_block(void **state)
{
    (void)state;
    cJSON *reports[] = {
        two_device_report("sort", "gpu_to_gpu", "aaa", "bbb", 132),
        two_device_report("filtered-det", "run_to_run", "ccc", "ccc", 132),
        two_device_report("radix", "not_guaranteed", "cde", "ccc", 132),
    };
    cJSON *records = cJSON_CreateArray();
    for (int i = 0; i < 3; i++)
        cJSON_AddItemToArray(records, cJSON_Duplicate(cJSON_GetArrayItem(
                                          cJSON_GetObjectItemCaseSensitive(reports[i], "records"), 0), 1));
    cJSON *devices = cJSON_CreateArray();
    for (int i = 0; i < 2; i++) {
        cJSON *device = cJSON_CreateObject();
        cJSON_AddNumberToObject(device, "index", i);
        cJSON_AddNumberToObject(device, "ordinal", 0);
        cJSON_AddStringToObject(device, "name", "NVIDIA H200");
        cJSON_AddStringToObject(device, "compute_capability", "9.0");
        cJSON_AddNumberToObject(device, "sm_count", 132);
        cJSON_AddNumberToObject(device, "smem_per_sm_bytes", 233472);
        cJSON_AddItemToArray(devices, device);
    }
    cJSON *block = gate_cross_device_block(records, devices);
    assert_non_null(block);
    assert_true(cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(block, "same_model")));
    const cJSON *entries = cJSON_GetObjectItemCaseSensitive(block, "entries");
    assert_int_equal(cJSON_GetArraySize(entries), 3);
    const char *verdicts[] = { "fail", "pass", "not_required" };
    for (int i = 0; i < 3; i++)
        assert_string_equal(cJSON_GetObjectItemCaseSensitive(cJSON_GetArrayItem(entries, i),
                                                             "verdict")->valuestring, verdicts[i]);
    const cJSON *summary = cJSON_GetObjectItemCaseSensitive(block, "summary");
    assert_int_equal(cJSON_GetObjectItemCaseSensitive(summary, "compared")->valuedouble, 3);
    assert_int_equal(cJSON_GetObjectItemCaseSensitive(summary, "agree")->valuedouble, 1);
    assert_int_equal(cJSON_GetObjectItemCaseSensitive(summary, "required_disagreements")->valuedouble, 1);
    assert_true(gate_cross_device_failed(block));
    /* run's table: the failing entry with each device's hash, then the summary. */
    char *table = NULL;
    size_t table_bytes = 0;
    FILE *out = open_memstream(&table, &table_bytes);
    assert_non_null(out);
    report_table_cross_device(out, block, "0,1");
    fclose(out);
    assert_non_null(strstr(table, "cross-device "));
    assert_non_null(strstr(table, " sort gpu_to_gpu: the devices disagree: [0] "));
    assert_null(strstr(table, "filtered-det"));
    assert_non_null(strstr(table, "# cross-device (0,1): 3 record x backend(s) compared, 1 agree, "
                                  "2 disagree, 1 required disagreement(s)\n"));
    free(table);
    cJSON_Delete(block);

    /* Another model: run_to_run agreement is no longer required. */
    cJSON_ReplaceItemInObjectCaseSensitive(cJSON_GetArrayItem(devices, 1), "sm_count",
                                           cJSON_CreateNumber(48));
    cJSON_ReplaceItemInObject(cJSON_GetArrayItem(cJSON_GetObjectItemCaseSensitive(
                                  cJSON_GetArrayItem(cJSON_GetObjectItemCaseSensitive(
                                      cJSON_GetArrayItem(records, 1), "backends"), 0), "per_device"), 1),
                              "output_sha256_per_rep",
                              cJSON_CreateStringArray((const char *[]){ hash_of('d'), hash_of('d'), hash_of('d') }, 3));
    block = gate_cross_device_block(records, devices);
    entries = cJSON_GetObjectItemCaseSensitive(block, "entries");
    assert_string_equal(cJSON_GetObjectItemCaseSensitive(cJSON_GetArrayItem(entries, 1), "verdict")
                            ->valuestring, "not_required");
    cJSON_Delete(block);

    block = gate_cross_device_unavailable("no CUDA device: test", NULL);
    assert_true(cJSON_IsFalse(cJSON_GetObjectItemCaseSensitive(block, "available")));
    assert_false(gate_cross_device_failed(block));
    assert_int_equal(cJSON_GetObjectItemCaseSensitive(
                         cJSON_GetObjectItemCaseSensitive(block, "summary"), "entries")->valuedouble, 0);
    cJSON_Delete(block);
    cJSON_Delete(devices);
    cJSON_Delete(records);
    for (int i = 0; i < 3; i++)
        cJSON_Delete(reports[i]);
}

/* ---- summary and merge ---------------------------------------------------------------------- */

static cJSON *shard(unsigned index, unsigned count, const unsigned *globals, int global_count)
{
    cJSON *report = report_json("NVIDIA H200");
    cJSON *context = cJSON_GetObjectItemCaseSensitive(report, "context");
    cJSON *shard_json = cJSON_AddObjectToObject(context, "shard");
    cJSON_AddNumberToObject(shard_json, "index", index);
    cJSON_AddNumberToObject(shard_json, "count", count);
    cJSON_AddNumberToObject(context, "reps", 3);
    for (int i = 0; i < global_count; i++) {
        cJSON *record = add_record(report, record_json("captures/a.bin", globals[i], '1', 'a', 16));
        set_number(record, "global_index", globals[i]);
        add_backend(record, backend_json("sort", "gpu_to_gpu", "ok", "aaa", 'a'));
        add_backend(record, backend_json("radix", "not_guaranteed", i % 2 ? "unsupported" : "ok",
                                         i % 2 ? "" : "cd", 'a'));
    }
    return report;
}

static void test_summary_recomputed(void **state)
{
    (void)state;
    const unsigned globals[] = { 0, 1, 2 };
    cJSON *report = shard(0, 1, globals, 3);
    cJSON *record = cJSON_GetArrayItem(cJSON_GetObjectItemCaseSensitive(report, "records"), 2);
    cJSON_ReplaceItemInObjectCaseSensitive(
        cJSON_GetArrayItem(cJSON_GetObjectItemCaseSensitive(record, "backends"), 0), "verdict",
        cJSON_CreateString("fail"));
    cJSON *summary = report_summary_json(cJSON_GetObjectItemCaseSensitive(report, "records"),
                                         cJSON_GetObjectItemCaseSensitive(report, "input_errors"));
    assert_int_equal(cJSON_GetObjectItemCaseSensitive(summary, "records")->valuedouble, 3);
    assert_int_equal(cJSON_GetObjectItemCaseSensitive(summary, "backend_runs")->valuedouble, 6);
    assert_int_equal(cJSON_GetObjectItemCaseSensitive(summary, "backends_pass")->valuedouble, 4);
    assert_int_equal(cJSON_GetObjectItemCaseSensitive(summary, "backends_fail")->valuedouble, 1);
    assert_int_equal(cJSON_GetObjectItemCaseSensitive(summary, "backends_not_run")->valuedouble, 1);
    const cJSON *statuses = cJSON_GetObjectItemCaseSensitive(summary, "status");
    assert_int_equal(cJSON_GetObjectItemCaseSensitive(statuses, "unsupported")->valuedouble, 1);
    const cJSON *sort = cJSON_GetObjectItemCaseSensitive(
        cJSON_GetObjectItemCaseSensitive(summary, "by_backend"), "sort");
    assert_int_equal(cJSON_GetObjectItemCaseSensitive(sort, "fail")->valuedouble, 1);
    cJSON_Delete(summary);
    cJSON_Delete(report);
}

static int merge(cJSON **shards, size_t count, cJSON **merged, uint32_t *missing,
                 struct audit_error *err)
{
    const char *paths[] = { "s0.json", "s1.json", "s2.json", "s3.json" };
    return gate_merge_reports(paths, (const cJSON *const *)shards, count, merged, missing, err);
}

static void test_merge(void **state)
{
    (void)state;
    struct audit_error err = { 0 };
    uint32_t missing = 0;
    cJSON *merged = NULL;
    const unsigned first[] = { 0, 2, 4 }, second[] = { 1, 3 };
    cJSON *shards[] = { shard(1, 2, second, 2), shard(0, 2, first, 3) };
    assert_int_equal(merge(shards, 2, &merged, &missing, &err), 0);
    assert_int_equal(missing, 0);
    const cJSON *records = cJSON_GetObjectItemCaseSensitive(merged, "records");
    assert_int_equal(cJSON_GetArraySize(records), 5);
    for (int i = 0; i < 5; i++)
        assert_int_equal(cJSON_GetObjectItemCaseSensitive(cJSON_GetArrayItem(records, i),
                                                          "global_index")->valuedouble, i);
    assert_true(cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(merged, "complete")));
    assert_true(cJSON_IsNull(cJSON_GetObjectItemCaseSensitive(
        cJSON_GetObjectItemCaseSensitive(merged, "context"), "shard")));
    const cJSON *shard_list = cJSON_GetObjectItemCaseSensitive(merged, "shards");
    assert_int_equal(cJSON_GetArraySize(shard_list), 2);
    assert_int_equal(cJSON_GetObjectItemCaseSensitive(cJSON_GetArrayItem(shard_list, 0), "index")
                         ->valuedouble, 0);
    assert_string_equal(cJSON_GetObjectItemCaseSensitive(cJSON_GetArrayItem(shard_list, 0), "report")
                            ->valuestring, "s1.json");
    assert_int_equal(cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(merged, "summary"),
                                                      "records")->valuedouble, 5);
    /* The merged report is a report: gate reads it. */
    struct report_document document;
    assert_int_equal(report_document_parse(&document, "merged.json", merged, &err), 0);
    report_document_release(&document);

    /* A missing shard: merged, incomplete, named. */
    cJSON *three[] = { shard(0, 3, (const unsigned[]){ 0, 3 }, 2), shard(2, 3, (const unsigned[]){ 2 }, 1) };
    assert_int_equal(merge(three, 2, &merged, &missing, &err), 0);
    assert_int_equal(missing, 1);
    assert_true(cJSON_IsFalse(cJSON_GetObjectItemCaseSensitive(merged, "complete")));
    assert_non_null(strstr(cJSON_GetObjectItemCaseSensitive(merged, "stop_reason")->valuestring,
                           "1 of 3 shards missing: 1"));
    cJSON_Delete(merged);

    /* Overlapping: the same shard twice. */
    cJSON *twice[] = { shards[1], shards[1] };
    assert_int_equal(merge(twice, 2, &merged, &missing, &err), AUDIT_EDATA);
    assert_non_null(strstr(err.message, "are both shard 0/2: overlapping"));
    /* Different N. */
    cJSON *mixed[] = { shards[0], three[0] };
    assert_int_equal(merge(mixed, 2, &merged, &missing, &err), AUDIT_EDATA);
    assert_non_null(strstr(err.message, "shards of one audit share N"));
    /* Another configuration. */
    cJSON *other = cJSON_Duplicate(shards[0], 1);
    set_number(cJSON_GetObjectItemCaseSensitive(other, "context"), "reps", 25);
    cJSON *configs[] = { shards[1], other };
    assert_int_equal(merge(configs, 2, &merged, &missing, &err), AUDIT_EDATA);
    assert_non_null(strstr(err.message, "differ in context.reps"));
    /* Another schema version. */
    set_number(other, "schema_version", 2);
    assert_int_equal(merge(configs, 2, &merged, &missing, &err), AUDIT_EDATA);
    assert_non_null(strstr(err.message, "s1.json: $.schema_version: dsatopk-audit/report version 2"));
    /* Not a shard. */
    cJSON *plain = single("sort", "gpu_to_gpu", "ok", "aaa", NULL);
    cJSON *unsharded[] = { plain };
    assert_int_equal(merge(unsharded, 1, &merged, &missing, &err), AUDIT_EDATA);
    assert_non_null(strstr(err.message, "not a shard report"));
    /* A shard count of 0 (found by the fuzzer: a division by zero). */
    cJSON *zero = shard(0, 1, (const unsigned[]){ 0 }, 1);
    set_number(cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(zero, "context"),
                                                "shard"), "count", 0);
    cJSON *zeros[] = { zero };
    assert_int_equal(merge(zeros, 1, &merged, &missing, &err), AUDIT_EDATA);
    assert_non_null(strstr(err.message, "$.context.shard.count: 0: a run has at least one shard"));
    cJSON_Delete(zero);
    /* A record in the wrong shard. */
    cJSON *wrong = shard(1, 2, (const unsigned[]){ 2 }, 1);
    cJSON *misplaced[] = { wrong };
    assert_int_equal(merge(misplaced, 1, &merged, &missing, &err), AUDIT_EDATA);
    assert_non_null(strstr(err.message, "global_index: 2 does not belong to shard 1/2"));

    cJSON_Delete(wrong);
    cJSON_Delete(plain);
    cJSON_Delete(other);
    cJSON_Delete(three[0]);
    cJSON_Delete(three[1]);
    cJSON_Delete(shards[0]);
    cJSON_Delete(shards[1]);
}

static void test_verdict_document(void **state)
{
    (void)state;
    struct report_document baseline, reports[2];
    struct gate_policy policy;
    struct gate_options options = { "2026-11-29T12:00:00Z" };
    struct gate_counts counts;
    struct audit_error err = { 0 };
    cJSON *verdict = NULL;
    assert_int_equal(report_document_parse(&baseline, "b.json",
                                         single("sort", "gpu_to_gpu", "ok", "aaa", NULL), &err), 0);
    assert_int_equal(report_document_parse(&reports[0], "r0.json",
                                         single("sort", "gpu_to_gpu", "ok", "aaa", NULL), &err), 0);
    assert_int_equal(report_document_parse(&reports[1], "r1.json",
                                         single("sort", "gpu_to_gpu", "ok", "aab", NULL), &err), 0);
    assert_int_equal(gate_policy_parse(&policy, "p.json",
                                       cJSON_Parse(known_failure_policy), &err), 0);
    cJSON *context = cJSON_CreateObject();
    cJSON_AddStringToObject(context, "host", "ci");
    assert_int_equal(gate_verdict(&baseline, reports, 2, &policy, &options, context, &verdict,
                                  &counts, &err), 0);
    assert_string_equal(cJSON_GetObjectItemCaseSensitive(verdict, "schema")->valuestring, GATE_SCHEMA);
    assert_int_equal(cJSON_GetObjectItemCaseSensitive(verdict, "exit_code")->valuedouble, 1);
    assert_int_equal(counts.exit_code, EXIT_AUDIT_FAILED); /* what gate exits with */
    const cJSON *summary = cJSON_GetObjectItemCaseSensitive(verdict, "summary");
    assert_int_equal(cJSON_GetObjectItemCaseSensitive(summary, "fail")->valuedouble, 1);
    assert_int_equal(cJSON_GetObjectItemCaseSensitive(summary, "pass")->valuedouble, 1);
    assert_int_equal(cJSON_GetArraySize(cJSON_GetObjectItemCaseSensitive(verdict, "unused_tolerances")), 2);
    const cJSON *report_list = cJSON_GetObjectItemCaseSensitive(verdict, "reports");
    assert_string_equal(cJSON_GetObjectItemCaseSensitive(cJSON_GetArrayItem(report_list, 1), "status")
                            ->valuestring, "fail");
    assert_string_equal(cJSON_GetObjectItemCaseSensitive(
                            cJSON_GetObjectItemCaseSensitive(verdict, "context"), "now")->valuestring,
                        "2026-11-29T12:00:00Z");
    char *text = cJSON_PrintUnformatted(verdict);
    assert_null(strstr(text, "NaN"));
    free(text);
    cJSON_Delete(verdict);
    cJSON_Delete(context);
    gate_policy_release(&policy);
    report_document_release(&reports[0]);
    report_document_release(&reports[1]);
    report_document_release(&baseline);
}

/* Policy times are dates and times that exist: "until" and gate --now share the parser. */
static void test_time_parse(void **state)
{
    (void)state;
    static const char *const valid[][2] = {
        { "2026-02-28", "2026-02-28T00:00:00Z" },  { "2024-02-29", "2024-02-29T00:00:00Z" },
        { "2000-02-29", "2000-02-29T00:00:00Z" },  { "2026-12-31T23:59:59Z", "2026-12-31T23:59:59Z" },
        { "2016-12-31T23:59:60Z", "2016-12-31T23:59:60Z" }, { "0001-01-01", "0001-01-01T00:00:00Z" },
    };
    static const char *const invalid[] = {
        "2026-02-30", "2025-02-29", "1900-02-29", "2026-04-31", "2026-13-01", "2026-00-10",
        "2026-01-00", "2026-01-32", "2026-01-01T24:00:00Z", "2026-01-01T12:60:00Z",
        "2026-01-01T12:00:60Z", "2026-01-01T12:00:00", "2026-1-01", "2026-01-01T", "",
        "2026-01-01 12:00:00Z", "+026-01-01", "2026-01-01Z",
    };
    char canonical[21];
    for (size_t i = 0; i < sizeof(valid) / sizeof(valid[0]); i++) {
        assert_int_equal(gate_time_parse(valid[i][0], canonical), 0);
        assert_string_equal(canonical, valid[i][1]);
    }
    for (size_t i = 0; i < sizeof(invalid) / sizeof(invalid[0]); i++)
        if (gate_time_parse(invalid[i], canonical) == 0)
            fail_msg("'%s' was taken as a time", invalid[i]);
}

int main(void)
{
    if (hash_init() != 0)
        return 1;
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_gpu_to_gpu_pass_and_fail),
        cmocka_unit_test(test_gpu_to_gpu_needs_the_baseline_hash),
        cmocka_unit_test(test_run_to_run),
        cmocka_unit_test(test_not_guaranteed),
        cmocka_unit_test(test_radix_overflow_forgiveness),
        cmocka_unit_test(test_graph_and_batch),
        cmocka_unit_test(test_report_own_verdict),
        cmocka_unit_test(test_not_run_against_baseline),
        cmocka_unit_test(test_missing_records_and_backends),
        cmocka_unit_test(test_records_match_by_base_name_and_payload),
        cmocka_unit_test(test_not_comparable),
        cmocka_unit_test(test_report_level_failures),
        cmocka_unit_test(test_policy_levels),
        cmocka_unit_test(test_policy_allow),
        cmocka_unit_test(test_known_failures),
        cmocka_unit_test(test_invalid_policies),
        cmocka_unit_test(test_time_parse),
        cmocka_unit_test(test_invalid_documents),
        cmocka_unit_test(test_baseline_subset_round_trip),
        cmocka_unit_test(test_per_device_entries),
        cmocka_unit_test(test_cross_device_block),
        cmocka_unit_test(test_summary_recomputed),
        cmocka_unit_test(test_merge),
        cmocka_unit_test(test_verdict_document),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
