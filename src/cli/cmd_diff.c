/* diff: attributes the divergence between two captures of the same calls (two runs of an engine)
 * to the scores (upstream of the selection) or to the selection kernel, record by record and
 * row by row. The per-row logic is diff_row_compare (src/triage/selection.c); this file pairs records,
 * counts cases and renders the table or the JSON (schema "dsatopk-audit/diff" version 1,
 * docs/TRIAGE.md). */
#include <getopt.h>
#include <inttypes.h>
#include <math.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "capture.h"
#include "cli.h"
#include "error.h"
#include "json_util.h"
#include "selection.h"

#define DIFF_SCHEMA "dsatopk-audit/diff"
#define DIFF_SCHEMA_VERSION 1
/* Differing rows the table lists per record; the JSON lists them all. */
#define TABLE_ROWS_PER_RECORD 20

static const char diff_usage[] =
    "usage: dsatopk-audit diff [--k K] [--format table|json] [-o FILE] A.bin B.bin\n"
    "\n"
    "Compares two captures of the same calls (two runs of an engine), records paired by\n"
    "position. For every row: are the scores bit-identical; if not, how many elements differ,\n"
    "the largest absolute and total-order ULP difference, and whether the perturbation can\n"
    "cross the row's boundary gap (A's census); does the exact (CPU reference) selection\n"
    "differ; when both captures carry the engine's own indices, did the engine's selection\n"
    "differ. Each row gets one case and an attribution:\n"
    "  identical                           -                 nothing differs\n"
    "  scores_differ_selection_same        none              perturbation absorbed\n"
    "  scores_differ_selection_changed     upstream          the selection followed the scores\n"
    "  scores_same_engine_differs          selection_kernel  same scores, other engine output\n"
    "  scores_differ_engine_changed_alone  selection_kernel  exact set kept, engine set moved\n"
    "  scores_differ_engine_kept           inconclusive      exact set moved, engine set kept\n"
    "  window_differs                      capture_mismatch  lengths or row starts differ\n"
    "A summary counts each case and names where the divergence starts.\n"
    "\n"
    "options:\n"
    "  --k K               compare the exact selections and census at K (default: each\n"
    "                      record's k); engine outputs are always compared at the record's k\n"
    "  --format FORMAT     table (default) or json (schema dsatopk-audit/diff, version 1; rows\n"
    "                      are listed only when they differ)\n"
    "  -o, --output FILE   write the output to FILE (atomically) instead of stdout\n"
    "  -h, --help          show this help\n"
    "\n"
    "exit codes: 0 no row differs; 1 some row differs; 2 usage error; 3 unreadable, corrupt\n"
    "            or mismatched captures (different record counts, rows, k or page-table\n"
    "            layout: what could be paired is still compared and reported); 4 out of memory\n";

enum output_format { FORMAT_TABLE, FORMAT_JSON };

struct diff_options {
    uint32_t k_override;
    enum output_format format;
    const char *output;
    const char *path_a, *path_b;
};

struct diff_totals {
    uint64_t records, rows, differing_rows;
    uint64_t cases[DIFF_CASE_COUNT];
    uint64_t attribution[DIFF_ATTRIBUTION_COUNT];
    /* Per record (call), as the hand analysis in seed 000 counted them. */
    uint64_t records_scores_identical, records_scores_differ;
    uint64_t records_scores_same_engine_differs, records_reference_selection_changed;
    uint64_t records_engine_compared;
    uint64_t page_table_rows_differ;
    bool mismatch, input_error;
};

static int parse_options(int argc, char **argv, struct diff_options *options)
{
    static const struct option long_options[] = {
        { "k", required_argument, NULL, 'k' },
        { "format", required_argument, NULL, 'f' },
        { "output", required_argument, NULL, 'o' },
        { "help", no_argument, NULL, 'h' },
        { NULL, 0, NULL, 0 },
    };
    unsigned long long value;
    int option;
    opterr = 0; /* messages come from cli_usage_error */
    while ((option = getopt_long(argc, argv, ":ho:", long_options, NULL)) != -1) {
        switch (option) {
        case 'k':
            if (cli_parse_uint(optarg, CAPTURE_MAX_K, &value) < 0 || value == 0)
                return cli_usage_error(&cmd_diff, "--k: '%s' is not a k in 1..%u", optarg,
                                       CAPTURE_MAX_K);
            options->k_override = (uint32_t)value;
            break;
        case 'f':
            if (strcmp(optarg, "table") == 0)
                options->format = FORMAT_TABLE;
            else if (strcmp(optarg, "json") == 0)
                options->format = FORMAT_JSON;
            else
                return cli_usage_error(&cmd_diff, "--format: '%s' is not table or json", optarg);
            break;
        case 'o': options->output = optarg; break;
        case 'h': cli_print_usage(&cmd_diff, stdout); return -1;
        case ':': return cli_usage_error(&cmd_diff, "option '%s' needs a value", argv[optind - 1]);
        default: return cli_usage_error(&cmd_diff, "unknown option '%s'", argv[optind - 1]);
        }
    }
    if (argc - optind != 2)
        return cli_usage_error(&cmd_diff, "expected two capture files A.bin B.bin, got %d",
                               argc - optind);
    options->path_a = argv[optind];
    options->path_b = argv[optind + 1];
    return EXIT_AUDIT_OK;
}

static const char *yes_no(bool value)
{
    return value ? "yes" : "no";
}

static const char *plural(uint64_t count)
{
    return count == 1 ? "" : "s";
}

static cJSON *row_json(const struct diff_row *row)
{
    cJSON *json = cJSON_CreateObject();
    if (!json)
        return NULL;
    json_add_u64(json, "row", row->row);
    cJSON_AddStringToObject(json, "case", diff_case_name(row->diff_case));
    cJSON_AddStringToObject(json, "attribution",
                            diff_attribution_name(diff_case_attribution(row->diff_case)));
    cJSON_AddBoolToObject(json, "window_differs", row->window_differs);
    cJSON_AddBoolToObject(json, "scores_identical", row->scores_identical);
    json_add_u64(json, "differing_elements", row->differing_elements);
    json_add_number(json, "max_abs_diff", row->max_abs_diff); /* null when non-finite */
    cJSON_AddBoolToObject(json, "nonfinite_changed", row->nonfinite_changed);
    json_add_u64(json, "max_ulp_diff", row->max_ulp_diff);
    bool have_census = !row->scores_identical && !row->window_differs;
    if (have_census && !row->short_row) {
        json_add_number(json, "boundary_gap", row->boundary_gap);
        cJSON_AddNumberToObject(json, "tie_set", (double)row->tie_set);
    } else {
        cJSON_AddNullToObject(json, "boundary_gap");
        cJSON_AddNullToObject(json, "tie_set");
    }
    cJSON_AddBoolToObject(json, "short_row", have_census && row->short_row);
    if (have_census)
        json_add_number(json, "crossing_perturbation", row->crossing_perturbation);
    else
        cJSON_AddNullToObject(json, "crossing_perturbation");
    cJSON_AddBoolToObject(json, "perturbation_exceeds_gap", row->perturbation_exceeds_gap);
    cJSON_AddBoolToObject(json, "reference_set_changed", row->reference_set_changed);
    cJSON_AddBoolToObject(json, "reference_order_changed", row->reference_order_changed);
    if (row->engine_compared) {
        cJSON_AddBoolToObject(json, "engine_set_changed", row->engine_set_changed);
        cJSON_AddBoolToObject(json, "engine_order_changed", row->engine_order_changed);
    } else {
        cJSON_AddNullToObject(json, "engine_set_changed");
        cJSON_AddNullToObject(json, "engine_order_changed");
    }
    cJSON_AddBoolToObject(json, "page_table_differs", row->page_table_differs);
    return json;
}

static void table_row(FILE *table, const struct diff_row *row)
{
    fprintf(table, "    row %-6" PRIu32 " %-34s", row->row, diff_case_name(row->diff_case));
    if (row->window_differs) {
        fprintf(table, " window (length or row start) differs");
    } else if (row->scores_identical) {
        fprintf(table, " scores identical");
    } else {
        fprintf(table, " %" PRIu64 " element%s differ%s, max |diff| ", row->differing_elements,
                plural(row->differing_elements), row->differing_elements == 1 ? "s" : "");
        if (isfinite(row->max_abs_diff))
            fprintf(table, "%.3g", row->max_abs_diff);
        else
            fprintf(table, "non-finite");
        fprintf(table, " (%" PRIu32 " ulp), ", row->max_ulp_diff);
        if (row->short_row)
            fprintf(table, "short row");
        else
            fprintf(table, "gap %.3g", row->boundary_gap);
        fprintf(table, ", can cross: %s; exact set %s", yes_no(row->perturbation_exceeds_gap),
                row->reference_set_changed ? "changed"
                : row->reference_order_changed ? "kept (order changed)" : "kept");
    }
    if (row->engine_compared)
        fprintf(table, "; engine set %s", row->engine_set_changed ? "changed"
                                          : row->engine_order_changed ? "kept (order changed)"
                                                                      : "kept");
    if (row->page_table_differs)
        fprintf(table, "; page table differs");
    fprintf(table, " -> %s\n", diff_attribution_name(diff_case_attribution(row->diff_case)));
}

static cJSON *counts_json(const uint64_t *counts, unsigned count, const char *(*name)(int))
{
    cJSON *json = cJSON_CreateObject();
    for (unsigned i = 0; json && i < count; i++)
        json_add_u64(json, name((int)i), counts[i]);
    return json;
}

static const char *case_name_of(int value)
{
    return diff_case_name((enum diff_case)value);
}

static const char *attribution_name_of(int value)
{
    return diff_attribution_name((enum diff_attribution)value);
}

/* Adds a mismatch message to the record's list and the document's, and to the table. */
static void add_mismatch(cJSON *record_list, cJSON *document_list, FILE *table, const char *format,
                         ...) __attribute__((format(printf, 4, 5)));
static void add_mismatch(cJSON *record_list, cJSON *document_list, FILE *table, const char *format,
                         ...)
{
    char message[512];
    va_list args;
    va_start(args, format);
    vsnprintf(message, sizeof(message), format, args);
    va_end(args);
    if (record_list)
        cJSON_AddItemToArray(record_list, cJSON_CreateString(message));
    if (document_list)
        cJSON_AddItemToArray(document_list, cJSON_CreateString(message));
    fprintf(table, "  mismatch: %s\n", message);
}

static int compare_records(const struct capture_record *a, const struct capture_record *b,
                           const struct diff_options *options, struct diff_scratch *scratch,
                           cJSON *records, cJSON *mismatches, FILE *table,
                           struct diff_totals *totals, struct audit_error *err)
{
    struct diff_record_shape shape;
    uint64_t cases[DIFF_CASE_COUNT] = { 0 }, attribution[DIFF_ATTRIBUTION_COUNT] = { 0 };
    uint64_t reference_changed = 0, page_table_rows = 0, listed = 0;
    uint32_t k = options->k_override ? options->k_override : a->k;
    cJSON *json = cJSON_CreateObject();
    if (!json || !cJSON_AddItemToArray(records, json)) {
        cJSON_Delete(json);
        return audit_fail(err, AUDIT_ENOMEM, "out of memory");
    }
    json_add_u64(json, "index", a->index);
    json_add_u64(json, "rows_a", a->rows);
    json_add_u64(json, "rows_b", b->rows);
    json_add_u64(json, "k", k);
    json_add_u64(json, "record_k_a", a->k);
    json_add_u64(json, "record_k_b", b->k);
    json_add_hex(json, "payload_sha256_a", a->payload_sha256, sizeof(a->payload_sha256));
    json_add_hex(json, "payload_sha256_b", b->payload_sha256, sizeof(b->payload_sha256));
    cJSON *record_mismatches = cJSON_AddArrayToObject(json, "mismatches");

    fprintf(table, "record %" PRIu32 ": %" PRIu32 " rows, k %" PRIu32 "\n", a->index,
            a->rows < b->rows ? a->rows : b->rows, k);
    if (diff_record_shape_compare(a, b, &shape))
        totals->mismatch = true;
    if (shape.rows_differ)
        add_mismatch(record_mismatches, mismatches, table,
                     "record %" PRIu32 ": rows differ (A %" PRIu32 ", B %" PRIu32
                     "): compared the first %" PRIu32, a->index, a->rows, b->rows,
                     shape.common_rows);
    if (shape.k_differs)
        add_mismatch(record_mismatches, mismatches, table,
                     "record %" PRIu32 ": k differs (A %" PRIu32 ", B %" PRIu32 "): exact "
                     "selections compared at k %" PRIu32 ", engine outputs not compared",
                     a->index, a->k, b->k, k);
    if (shape.page_table_layout_differs)
        add_mismatch(record_mismatches, mismatches, table,
                     "record %" PRIu32 ": page-table layout differs (A %s page size %" PRIu32
                     ", B %s page size %" PRIu32 ")", a->index, a->page_table ? "has" : "lacks",
                     a->page_size, b->page_table ? "has" : "lacks", b->page_size);
    if (shape.engine_presence_differs)
        fprintf(table, "  note: only %s carries engine indices: engine outputs not compared\n",
                a->engine_indices ? "A" : "B");

    cJSON *rows_json = cJSON_AddArrayToObject(json, "differing_rows");
    bool engine_compared = false, scores_identical = true, engine_differs_on_same = false;
    for (uint32_t row = 0; row < shape.common_rows; row++) {
        struct diff_row result;
        int status = diff_row_compare(a, b, row, k, scratch, &result, err);
        if (status < 0)
            return status;
        cases[result.diff_case]++;
        attribution[diff_case_attribution(result.diff_case)]++;
        engine_compared |= result.engine_compared;
        scores_identical &= result.scores_identical;
        engine_differs_on_same |= result.diff_case == DIFF_CASE_SCORES_SAME_ENGINE_DIFFERS;
        reference_changed += result.reference_set_changed;
        page_table_rows += result.page_table_differs;
        if (result.diff_case == DIFF_CASE_IDENTICAL)
            continue;
        cJSON *entry = row_json(&result);
        if (!entry || !cJSON_AddItemToArray(rows_json, entry)) {
            cJSON_Delete(entry);
            return audit_fail(err, AUDIT_ENOMEM, "out of memory listing differing rows");
        }
        if (listed++ < TABLE_ROWS_PER_RECORD)
            table_row(table, &result);
    }
    if (listed > TABLE_ROWS_PER_RECORD)
        fprintf(table, "    ... %" PRIu64 " more differing rows (see --format json)\n",
                listed - TABLE_ROWS_PER_RECORD);

    cJSON_AddBoolToObject(json, "engine_compared", engine_compared);
    cJSON_AddBoolToObject(json, "scores_identical", scores_identical);
    json_add_u64(json, "rows_compared", shape.common_rows);
    json_add_u64(json, "rows_differing", listed);
    json_add_u64(json, "reference_set_changed_rows", reference_changed);
    json_add_u64(json, "page_table_rows_differ", page_table_rows);
    cJSON_AddItemToObject(json, "cases", counts_json(cases, DIFF_CASE_COUNT, case_name_of));
    cJSON_AddItemToObject(json, "attribution",
                          counts_json(attribution, DIFF_ATTRIBUTION_COUNT, attribution_name_of));

    fprintf(table, "  %" PRIu64 " identical, %" PRIu64 " differing", cases[DIFF_CASE_IDENTICAL],
            listed);
    for (unsigned c = 1; c < DIFF_CASE_COUNT; c++)
        if (cases[c])
            fprintf(table, "; %s %" PRIu64, diff_case_name((enum diff_case)c), cases[c]);
    if (page_table_rows)
        fprintf(table, "; page table differs on %" PRIu64 " rows", page_table_rows);
    fprintf(table, "\n");

    totals->records++;
    totals->rows += shape.common_rows;
    totals->differing_rows += listed;
    for (unsigned c = 0; c < DIFF_CASE_COUNT; c++)
        totals->cases[c] += cases[c];
    for (unsigned t = 0; t < DIFF_ATTRIBUTION_COUNT; t++)
        totals->attribution[t] += attribution[t];
    totals->records_scores_identical += scores_identical;
    totals->records_scores_differ += !scores_identical;
    /* Per call, as seed 000 counted: all scores identical and yet another engine selection. */
    totals->records_scores_same_engine_differs += scores_identical && engine_differs_on_same;
    totals->records_reference_selection_changed += reference_changed > 0;
    totals->records_engine_compared += engine_compared;
    totals->page_table_rows_differ += page_table_rows;
    return AUDIT_OK;
}

/* Counts the records left in reader (the longer capture) after the common prefix. */
static uint64_t count_remaining(struct capture_reader *reader, bool *error)
{
    uint64_t count = 0;
    struct audit_error ignored = { 0 };
    for (;;) {
        struct capture_record record;
        int result = capture_read_record(reader, &record, &ignored);
        if (result <= 0) {
            *error = result < 0;
            return count;
        }
        capture_record_free(&record);
        count++;
    }
}

static void add_summary(cJSON *document, FILE *table, const struct diff_totals *totals)
{
    cJSON *summary = cJSON_AddObjectToObject(document, "summary");
    if (summary) {
        json_add_u64(summary, "records_compared", totals->records);
        json_add_u64(summary, "rows_compared", totals->rows);
        json_add_u64(summary, "rows_differing", totals->differing_rows);
        cJSON_AddItemToObject(summary, "cases",
                              counts_json(totals->cases, DIFF_CASE_COUNT, case_name_of));
        cJSON_AddItemToObject(summary, "attribution", counts_json(totals->attribution,
                                                                  DIFF_ATTRIBUTION_COUNT,
                                                                  attribution_name_of));
        json_add_u64(summary, "records_scores_identical", totals->records_scores_identical);
        json_add_u64(summary, "records_scores_differ", totals->records_scores_differ);
        json_add_u64(summary, "records_scores_same_engine_differs",
                     totals->records_scores_same_engine_differs);
        json_add_u64(summary, "records_reference_selection_changed",
                     totals->records_reference_selection_changed);
        json_add_u64(summary, "records_engine_compared", totals->records_engine_compared);
        json_add_u64(summary, "page_table_rows_differ", totals->page_table_rows_differ);
        cJSON_AddBoolToObject(summary, "mismatch", totals->mismatch);
        cJSON_AddBoolToObject(summary, "input_error", totals->input_error);
    }

    fprintf(table, "\nsummary: %" PRIu64 " record%s, %" PRIu64 " rows compared, %" PRIu64
            " differ\n", totals->records, plural(totals->records), totals->rows,
            totals->differing_rows);
    for (unsigned c = 0; c < DIFF_CASE_COUNT; c++) {
        fprintf(table, "  %-36s %10" PRIu64, diff_case_name((enum diff_case)c), totals->cases[c]);
        if (c != DIFF_CASE_IDENTICAL)
            fprintf(table, "  %s",
                    diff_attribution_name(diff_case_attribution((enum diff_case)c)));
        fprintf(table, "\n");
    }
    fprintf(table, "calls (records): %" PRIu64 " with identical scores, %" PRIu64 " with "
            "different scores; %" PRIu64 " with identical scores and a different engine "
            "selection; %" PRIu64 " whose exact selection changed (engine indices compared in %"
            PRIu64 ")\n", totals->records_scores_identical, totals->records_scores_differ,
            totals->records_scores_same_engine_differs, totals->records_reference_selection_changed,
            totals->records_engine_compared);

    uint64_t kernel = totals->attribution[DIFF_ATTRIBUTION_SELECTION_KERNEL];
    uint64_t upstream = totals->attribution[DIFF_ATTRIBUTION_UPSTREAM];
    uint64_t absorbed = totals->cases[DIFF_CASE_SCORES_DIFFER_SELECTION_SAME];
    uint64_t inconclusive = totals->attribution[DIFF_ATTRIBUTION_INCONCLUSIVE];
    uint64_t mismatched = totals->attribution[DIFF_ATTRIBUTION_CAPTURE_MISMATCH];
    fprintf(table, "verdict: ");
    if (totals->differing_rows == 0)
        fprintf(table, "the two captures agree bit for bit on every compared row\n");
    else {
        const char *separator = "";
        if (kernel) {
            fprintf(table, "the selection kernel changed its output on its own in %" PRIu64
                    " row%s (kernel nondeterminism)", kernel, plural(kernel));
            separator = "; ";
        }
        if (upstream) {
            fprintf(table, "%sthe scores differ upstream of the selection and moved the exact "
                    "selection in %" PRIu64 " row%s", separator, upstream, plural(upstream));
            separator = "; ";
        }
        if (absorbed) {
            fprintf(table, "%sthe scores differ without changing any selection in %" PRIu64
                    " row%s", separator, absorbed, plural(absorbed));
            separator = "; ";
        }
        if (inconclusive) {
            fprintf(table, "%s%" PRIu64 " row%s where the engine kept its set although the "
                    "exact selection moved (check the kernel with `run`)", separator, inconclusive,
                    plural(inconclusive));
            separator = "; ";
        }
        if (mismatched)
            fprintf(table, "%s%" PRIu64 " row%s not the same call (window differs)", separator,
                    mismatched, mismatched == 1 ? " is" : "s are");
        fprintf(table, "\n");
    }
}

static int run_diff(int argc, char **argv)
{
    struct diff_options options = { .format = FORMAT_TABLE, .output = "-" };
    struct diff_totals totals = { 0 };
    struct diff_scratch scratch = { 0 };
    struct audit_error err = { 0 };
    struct capture_reader *reader_a = NULL, *reader_b = NULL;
    char *table_text = NULL, *text = NULL;
    size_t table_size = 0;
    FILE *table = NULL;
    cJSON *document = NULL, *records_pending = NULL;
    int status = AUDIT_OK;
    int exit_code = parse_options(argc, argv, &options);
    if (exit_code == -1)
        return EXIT_AUDIT_OK; /* --help */
    if (exit_code != EXIT_AUDIT_OK)
        return exit_code;

    if ((status = capture_open(&reader_a, options.path_a, &err)) < 0 ||
        (status = capture_open(&reader_b, options.path_b, &err)) < 0) {
        fprintf(stderr, "dsatopk-audit diff: %s\n", err.message);
        exit_code = audit_exit_code(status);
        goto done;
    }
    document = cJSON_CreateObject();
    table = open_memstream(&table_text, &table_size);
    if (!document || !table) {
        status = audit_fail(&err, AUDIT_ENOMEM, "out of memory");
        goto fatal;
    }
    cJSON_AddStringToObject(document, "schema", DIFF_SCHEMA);
    cJSON_AddNumberToObject(document, "version", DIFF_SCHEMA_VERSION);
    cJSON_AddStringToObject(document, "tool_version", cli_version());
    cJSON_AddStringToObject(document, "command_line", cli_command_line());
    cJSON *inputs = cJSON_AddObjectToObject(document, "inputs");
    if (inputs) {
        cJSON_AddStringToObject(inputs, "a", options.path_a);
        cJSON_AddStringToObject(inputs, "b", options.path_b);
    }
    if (options.k_override)
        json_add_u64(document, "k_override", options.k_override);
    else
        cJSON_AddNullToObject(document, "k_override");
    /* Key order in the document: context, mismatches, input errors, summary, records. */
    cJSON *mismatches = cJSON_AddArrayToObject(document, "mismatches");
    cJSON *input_errors = cJSON_AddArrayToObject(document, "input_errors");
    cJSON *records = cJSON_CreateArray();
    if (!mismatches || !input_errors || !records) {
        cJSON_Delete(records);
        status = audit_fail(&err, AUDIT_ENOMEM, "out of memory");
        goto fatal;
    }
    /* Attached at the end, after the summary; freed here if a fatal error comes first. */
    records_pending = records;
    fprintf(table, "# diff %s (A) vs %s (B), k: %s\n", options.path_a, options.path_b,
            options.k_override ? "--k" : "each record's own");

    uint64_t records_a = 0, records_b = 0;
    for (;;) {
        struct capture_record a, b;
        int read_a = capture_read_record(reader_a, &a, &err);
        if (read_a < 0) {
            fprintf(stderr, "dsatopk-audit diff: %s\n", err.message);
            fprintf(table, "input error: %s\n", err.message);
            cJSON_AddItemToArray(input_errors, cJSON_CreateString(err.message));
            totals.input_error = true;
            break;
        }
        int read_b = capture_read_record(reader_b, &b, &err);
        if (read_b < 0) {
            fprintf(stderr, "dsatopk-audit diff: %s\n", err.message);
            fprintf(table, "input error: %s\n", err.message);
            cJSON_AddItemToArray(input_errors, cJSON_CreateString(err.message));
            totals.input_error = true;
            if (read_a > 0)
                capture_record_free(&a);
            break;
        }
        records_a += read_a > 0;
        records_b += read_b > 0;
        if (read_a == 0 || read_b == 0) {
            bool error = false;
            if (read_a > 0) {
                capture_record_free(&a);
                records_a += count_remaining(reader_a, &error);
            }
            if (read_b > 0) {
                capture_record_free(&b);
                records_b += count_remaining(reader_b, &error);
            }
            if (records_a != records_b) {
                totals.mismatch = true;
                add_mismatch(NULL, mismatches, table,
                             "record count differs: A has %" PRIu64 "%s, B has %" PRIu64
                             "%s: compared the first %" PRIu64, records_a,
                             error && read_a > 0 ? " readable" : "", records_b,
                             error && read_b > 0 ? " readable" : "", totals.records);
            }
            break;
        }
        status = compare_records(&a, &b, &options, &scratch, records, mismatches, table, &totals,
                                 &err);
        capture_record_free(&a);
        capture_record_free(&b);
        if (status < 0)
            goto fatal;
    }
    add_summary(document, table, &totals);
    cJSON_AddItemToObject(document, "records", records);
    records_pending = NULL;
    if (fclose(table) != 0) {
        table = NULL;
        status = audit_fail(&err, AUDIT_ENOMEM, "out of memory formatting the table");
        goto fatal;
    }
    table = NULL;

    if (options.format == FORMAT_JSON) {
        char *printed = cJSON_Print(document);
        if (printed && (text = malloc(strlen(printed) + 2)))
            sprintf(text, "%s\n", printed);
        cJSON_free(printed);
        if (!text) {
            status = audit_fail(&err, AUDIT_ENOMEM, "out of memory formatting JSON");
            goto fatal;
        }
    }
    if ((status = json_write_text_atomic(options.output, text ? text : table_text, &err)) < 0)
        goto fatal;
    if (totals.input_error || totals.mismatch)
        exit_code = EXIT_BAD_INPUT;
    else
        exit_code = totals.differing_rows ? EXIT_AUDIT_FAILED : EXIT_AUDIT_OK;
    goto done;
fatal:
    fprintf(stderr, "dsatopk-audit diff: %s\n", err.message);
    exit_code = audit_exit_code(status);
done:
    if (table)
        fclose(table);
    free(table_text);
    free(text);
    cJSON_Delete(records_pending);
    cJSON_Delete(document);
    diff_scratch_free(&scratch);
    capture_close(reader_a);
    capture_close(reader_b);
    return exit_code;
}

const struct cli_command cmd_diff = {
    "diff",
    "attributes the divergence between two captures of the same calls: scores or selection?",
    diff_usage,
    run_diff,
};
