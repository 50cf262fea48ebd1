/* libFuzzer harness: the JSON readers. Input: one mode byte, then a JSON document, handed over
 * as an in-memory file.
 *   mode % 7 == 0: json_read_file (src/common/json_util.c), the reader behind every JSON input
 *   mode % 7 == 1: the run-report reader of `extract --from-report` (report_rows_named,
 *                  src/report/report_read.c), through the command line on the fixture capture
 *                  a.bin; mode bit 3 adds --backend
 *   mode % 7 == 2: `import --metadata @FILE` (src/cli/cmd_import.c), the metadata object reader
 *   mode % 7 == 3: report_document_load (src/report/report_read.c), a report or a baseline; a
 *                  report that loads is judged against itself and its baseline subset must load
 *                  again; a baseline that loads judges the fixture report
 *   mode % 7 == 4: gate_policy_load; a policy that loads judges the fixture report
 *   mode % 7 == 5: gate_merge_reports of the document alone and twice (overlapping shards)
 *   mode % 7 == 6: the `gate` command: the document as the report against the fixture report
 *                  as the baseline, or (mode bit 3) as both the baseline and the report
 * Promises checked: a reader fails only with AUDIT_EDATA / AUDIT_EIO (AUDIT_ENOMEM) and a
 * message naming the file; a command given a bad document exits with a documented code (extract
 * and import 2 or 3; gate 0 to 3, 4 only for memory) and an extract or import that exits 0 has
 * written a capture that reads back completely; judging documents that loaded never fails; a
 * baseline made from a report that loaded loads. */
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "capture.h"
#include "error.h"
#include "fuzz_cli.h"
#include "fuzz_common.h"
#include "gate.h"
#include "hash.h"
#include "json_util.h"
#include "report.h"

static struct fuzz_file document;
static char metadata_argument[80];

/* The fixture report (report.json of the scratch directory), loaded. */
static struct report_document fixture_report;
static const struct gate_options gate_now = { .now = "2026-11-29T12:00:00Z" };

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc;
    (void)argv;
    if (hash_init() != 0)
        fuzz_violation("harness setup: libsodium failed to initialise");
    fuzz_file_create(&document, "fuzz-json");
    snprintf(metadata_argument, sizeof(metadata_argument), "@%s", document.path);
    fuzz_cli_fixtures();
    fuzz_silence_stdout();
    struct audit_error err = { 0 };
    cJSON *root = cJSON_Parse(fuzz_cli_report_text);
    if (!root || report_document_parse(&fixture_report, "fixture-report.json", root, &err) < 0)
        fuzz_violation("harness setup: the fixture report does not load: %s", err.message);
    return 0;
}

/* out.bin, written by a command that exited 0, must be a complete capture. */
static void expect_readable_output(const char *command)
{
    struct audit_error err = { 0 };
    struct capture_reader *reader = NULL;
    struct capture_record record;
    int status, records = 0;
    char path[512];
    snprintf(path, sizeof(path), "%s/out.bin", fuzz_scratch_dir());
    if (capture_open(&reader, path, &err) < 0)
        fuzz_violation("%s exited 0 but out.bin cannot be opened: %s", command, err.message);
    while ((status = capture_read_record(reader, &record, &err)) == 1) {
        capture_record_free(&record);
        records++;
    }
    if (status < 0 || records == 0)
        fuzz_violation("%s exited 0 but out.bin is not a complete capture (%d records): %s",
                       command, records, err.message);
    capture_close(reader);
}

static void run_command(int argc, char **argv)
{
    int code = fuzz_cli_call(argc, argv);
    bool gate = strcmp(argv[1], "gate") == 0;
    if (gate ? code > 3 : (code != 0 && code != 2 && code != 3))
        fuzz_violation("%s exited %d on a bad JSON document (expected 0, %s2 or 3)", argv[1],
                       code, gate ? "1, " : "");
    if (code == 0 && !gate)
        expect_readable_output(argv[1]);
    fuzz_cli_restore();
}

/* A reader's refusal: the documented codes, naming the file. */
static void expect_clean_refusal(const char *reader, int status, const struct audit_error *err)
{
    if ((status != AUDIT_EDATA && status != AUDIT_EIO && status != AUDIT_ENOMEM) ||
        !strstr(err->message, document.path))
        fuzz_violation("%s failed with status %d, message '%s'", reader, status, err->message);
}

static void read_plain(void)
{
    cJSON *json = NULL;
    struct audit_error err = { 0 };
    int status = json_read_file(document.path, &json, &err);
    if (status == 0 && !json)
        fuzz_violation("json_read_file succeeded without a document");
    if (status < 0 && json)
        fuzz_violation("json_read_file failed but returned a document");
    if (status < 0)
        expect_clean_refusal("json_read_file", status, &err);
    cJSON_Delete(json);
}

static void read_gate_document(void)
{
    struct report_document loaded;
    struct gate_policy policy;
    struct gate_counts counts = { 0 };
    struct audit_error err = { 0 };
    int status = report_document_load(&loaded, document.path, &err);
    if (fuzz_verbose())
        fprintf(stderr, "report_document_load: %d %s\n", status, err.message);
    if (status < 0) {
        expect_clean_refusal("report_document_load", status, &err);
        report_document_release(&loaded);
        return;
    }
    gate_policy_init(&policy);
    /* A baseline is judged against as a baseline; a report both ways. */
    const struct report_document *report = loaded.is_baseline ? &fixture_report : &loaded;
    cJSON *verdict = gate_judge_report(&loaded, report, &policy, &gate_now, &counts);
    if (!verdict)
        fuzz_violation("gate_judge_report with a loaded document failed");
    cJSON_Delete(verdict);
    if (!loaded.is_baseline) {
        cJSON_Delete(report_summary_json(cJSON_GetObjectItemCaseSensitive(loaded.root, "records"),
                                         loaded.input_errors));
        cJSON *baseline = NULL;
        if (gate_baseline_from_report(loaded.root, document.path, &baseline, &err) == 0) {
            struct report_document reloaded;
            if (report_document_parse(&reloaded, "baseline-of-fuzz.json", baseline, &err) < 0)
                fuzz_violation("the baseline of a loaded report does not load: %s", err.message);
            report_document_release(&reloaded);
        }
    }
    gate_policy_release(&policy);
    report_document_release(&loaded);
}

static void read_gate_policy(void)
{
    struct gate_policy policy;
    struct gate_counts counts = { 0 };
    struct audit_error err = { 0 };
    int status = gate_policy_load(&policy, document.path, &err);
    if (fuzz_verbose())
        fprintf(stderr, "gate_policy_load: %d %s\n", status, err.message);
    if (status < 0) {
        expect_clean_refusal("gate_policy_load", status, &err);
    } else {
        cJSON *verdict = gate_judge_report(&fixture_report, &fixture_report, &policy, &gate_now,
                                           &counts);
        if (!verdict)
            fuzz_violation("gate_judge_report under a loaded policy failed");
        cJSON_Delete(verdict);
    }
    gate_policy_release(&policy);
}

static void merge(const uint8_t *text, size_t size)
{
    struct audit_error err = { 0 };
    cJSON *root = cJSON_ParseWithLength((const char *)text, size);
    if (!root)
        return;
    /* Alone, and twice (overlapping shards must be refused). */
    const char *paths[] = { "fuzz.json", "fuzz-again.json" };
    const cJSON *roots[] = { root, root };
    for (size_t count = 1; count <= 2; count++) {
        cJSON *merged = NULL;
        uint32_t missing = 0;
        int status = gate_merge_reports(paths, roots, count, &merged, &missing, &err);
        if (fuzz_verbose())
            fprintf(stderr, "gate_merge_reports (%zu): %d %s\n", count, status, err.message);
        if (status == 0 && !merged)
            fuzz_violation("gate_merge_reports succeeded without a report");
        cJSON_Delete(merged);
    }
    cJSON_Delete(root);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1)
        return 0;
    unsigned mode = data[0];
    fuzz_file_set(&document, data + 1, size - 1);
    switch (mode % 7) {
    case 0: read_plain(); break;
    case 1: {
        char *argv[] = { "dsatopk-audit", "extract", "a.bin", "--from-report", document.path,
                         "-o", "out.bin", "--backend", "radix", NULL };
        run_command((mode & 8) ? 9 : 7, argv);
        break;
    }
    case 2: {
        char *argv[] = { "dsatopk-audit", "import", "--scores", "t.npy", "--k", "3",
                         "--metadata", metadata_argument, "-o", "out.bin", NULL };
        run_command(10, argv);
        break;
    }
    case 3: read_gate_document(); break;
    case 4: read_gate_policy(); break;
    case 5: merge(data + 1, size - 1); break;
    default: {
        char *argv[] = { "dsatopk-audit", "gate", "--baseline",
                         (mode & 8) ? document.path : "report.json", document.path, "--out",
                         "g.json", "--format", "none", "--now", "2026-11-29", NULL };
        run_command(11, argv);
        break;
    }
    }
    return 0;
}
