/* diff: attributes the divergence between two captures of the same calls (two runs of an engine)
 * to the scores (upstream of the selection) or to the selection kernel, record by record and
 * row by row. A record pair is compared by diff_record_compare (src/triage/diff_record.c) and
 * goes into the document (schema "dsatopk-audit/diff", docs/TRIAGE.md) through
 * src/triage/diff_json.c; this file parses the options, pairs the records of the two captures
 * and prints the table or the document. */
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
#include "diff_json.h"
#include "diff_record.h"
#include "document_context.h"
#include "error.h"
#include "json_util.h"
#include "selection.h"
#include "terminal_text.h"
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
    "  --format FORMAT     table (default) or json (schema dsatopk-audit/diff, version 2; rows\n"
    "                      are listed only when they differ)\n"
    "  -o, --output FILE   write the output to FILE (atomically) instead of stdout\n"
    "  -h, --help          show this help\n"
    "\n"
    "exit codes: 0 no row differs; 1 some row differs; 2 usage error; 3 unreadable, corrupt\n"
    "            or mismatched captures (different record counts, rows, k or page-table\n"
    "            layout: what could be paired is still compared and reported); 4 a record\n"
    "            over the memory cap (--max-record-bytes) or out of memory\n";

enum output_format { FORMAT_TABLE, FORMAT_JSON };

struct diff_options {
    uint32_t k_override;
    enum output_format format;
    const char *output;
    const char *path_a, *path_b;
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
    bool help = false;
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
        case 'h': help = true; break;
        default: return cli_option_error(&cmd_diff, option, argv);
        }
    }
    if (help) {
        cli_print_usage(&cmd_diff, stdout);
        return -1;
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

/* A record's lines: its header, mismatches, the first differing rows and its counts. */
static void table_record(FILE *table, const struct diff_record_result *result)
{
    fprintf(table, "record %" PRIu32 ": %" PRIu32 " rows, k %" PRIu32 "\n", result->index,
            result->shape.common_rows, result->k);
    for (size_t i = 0; i < result->mismatch_count; i++)
        fprintf(table, "  mismatch: %s\n", result->mismatches[i]);
    if (result->shape.engine_presence_differs)
        fprintf(table, "  note: only %s carries engine indices: engine outputs not compared\n",
                result->a_has_engine_indices ? "A" : "B");
    for (size_t i = 0; i < result->row_count && i < TABLE_ROWS_PER_RECORD; i++)
        table_row(table, &result->rows[i]);
    if (result->row_count > TABLE_ROWS_PER_RECORD)
        fprintf(table, "    ... %zu more differing rows (see --format json)\n",
                result->row_count - TABLE_ROWS_PER_RECORD);
    fprintf(table, "  %" PRIu64 " identical, %zu differing", result->cases[DIFF_CASE_IDENTICAL],
            result->row_count);
    for (unsigned c = 1; c < DIFF_CASE_COUNT; c++)
        if (result->cases[c])
            fprintf(table, "; %s %" PRIu64, diff_case_name((enum diff_case)c), result->cases[c]);
    if (result->page_table_rows)
        fprintf(table, "; page table differs on %" PRIu64 " rows", result->page_table_rows);
    fprintf(table, "\n");
}

/* Compares one record pair into the document's records and the table. */
static int compare_records(const struct capture_record *a, const struct capture_record *b,
                           const struct diff_options *options, struct diff_scratch *scratch,
                           cJSON *document, cJSON *records, FILE *table,
                           struct diff_totals *totals, struct audit_error *err)
{
    struct diff_record_result result;
    int status = diff_record_compare(a, b, options->k_override, scratch, &result, err);
    if (status == AUDIT_OK) {
        for (size_t i = 0; i < result.mismatch_count && status == AUDIT_OK; i++)
            status = diff_json_add_mismatch(document, result.mismatches[i]);
        if (status == AUDIT_OK)
            status = diff_json_add_record(records, &result);
        if (status < 0)
            audit_fail(err, status, "out of memory");
    }
    if (status == AUDIT_OK) {
        table_record(table, &result);
        diff_totals_add(totals, &result);
    }
    diff_record_result_release(&result);
    return status;
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

static void table_summary(FILE *table, const struct diff_totals *totals)
{
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

/* A read error: the comparison stops there. */
static void input_error(cJSON *document, FILE *table, struct diff_totals *totals,
                        const char *message)
{
    cli_print_message(&cmd_diff, "%s", message);
    fprintf(table, "input error: %s\n", terminal_safe(message));
    (void)diff_json_add_input_error(document, message);
    totals->input_error = true;
}

/* Reads both captures record by record and compares the pairs, up to the end of the shorter or
 * the first read error (its status in *read_status: AUDIT_ENOMEM, a record over the memory cap
 * or out of memory, is exit 4). Returns 0, or a fatal code with err filled. */
static int compare_captures(struct capture_reader *reader_a, struct capture_reader *reader_b,
                            const struct diff_options *options, cJSON *document, cJSON *records,
                            FILE *table, struct diff_totals *totals, int *read_status,
                            struct audit_error *err)
{
    struct diff_scratch scratch = { 0 };
    uint64_t records_a = 0, records_b = 0;
    int status = AUDIT_OK;
    *read_status = AUDIT_OK;
    for (;;) {
        struct capture_record a, b;
        int read_a = capture_read_record(reader_a, &a, err);
        if (read_a < 0) {
            *read_status = read_a;
            input_error(document, table, totals, err->message);
            break;
        }
        int read_b = capture_read_record(reader_b, &b, err);
        if (read_b < 0) {
            *read_status = read_b;
            input_error(document, table, totals, err->message);
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
                char message[DIFF_MESSAGE_BYTES];
                totals->mismatch = true;
                snprintf(message, sizeof(message), "record count differs: A has %" PRIu64 "%s, B "
                         "has %" PRIu64 "%s: compared the first %" PRIu64, records_a,
                         error && read_a > 0 ? " readable" : "", records_b,
                         error && read_b > 0 ? " readable" : "", totals->records);
                (void)diff_json_add_mismatch(document, message);
                fprintf(table, "  mismatch: %s\n", message);
            }
            break;
        }
        status = compare_records(&a, &b, options, &scratch, document, records, table, totals,
                                 err);
        capture_record_free(&a);
        capture_record_free(&b);
        if (status < 0)
            break;
    }
    diff_scratch_free(&scratch);
    return status;
}

static int run_diff(int argc, char **argv)
{
    struct diff_options options = { .format = FORMAT_TABLE, .output = "-" };
    struct diff_totals totals = { 0 };
    struct audit_error err = { 0 };
    struct capture_reader *reader_a = NULL, *reader_b = NULL;
    char *table_text = NULL, *text = NULL;
    size_t table_size = 0;
    FILE *table = NULL;
    cJSON *document = NULL, *records = NULL;
    int status = AUDIT_OK;
    int exit_code = parse_options(argc, argv, &options);
    if (exit_code == -1)
        return EXIT_AUDIT_OK; /* --help */
    if (exit_code != EXIT_AUDIT_OK)
        return exit_code;

    if ((status = capture_open(&reader_a, options.path_a, &err)) < 0 ||
        (status = capture_open(&reader_b, options.path_b, &err)) < 0) {
        cli_print_message(&cmd_diff, "%s", err.message);
        exit_code = audit_exit_code(status);
        goto done;
    }
    struct document_context context;
    document_context_fill(&context, cli_version(), cli_command_line());
    document = diff_json_begin(&context, options.path_a, options.path_b, options.k_override);
    /* Attached at the end, after the summary. */
    records = cJSON_CreateArray();
    table = open_memstream(&table_text, &table_size);
    if (!document || !records || !table) {
        status = audit_fail(&err, AUDIT_ENOMEM, "out of memory");
        goto fatal;
    }
    fprintf(table, "# diff %s (A) vs %s (B), k: %s\n", terminal_safe(options.path_a),
            terminal_safe(options.path_b), options.k_override ? "--k" : "each record's own");
    int read_status;
    status = compare_captures(reader_a, reader_b, &options, document, records, table, &totals,
                              &read_status, &err);
    if (status < 0)
        goto fatal;
    table_summary(table, &totals);
    status = diff_json_finish(document, &totals, records);
    records = NULL;
    if (status < 0) {
        audit_fail(&err, status, "out of memory");
        goto fatal;
    }
    if (fclose(table) != 0) {
        table = NULL;
        status = audit_fail(&err, AUDIT_ENOMEM, "out of memory formatting the table");
        goto fatal;
    }
    table = NULL;
    if (options.format == FORMAT_JSON && !(text = json_render(document, NULL))) {
        status = audit_fail(&err, AUDIT_ENOMEM, "out of memory formatting JSON");
        goto fatal;
    }
    if ((status = json_write_text_atomic(options.output, text ? text : table_text, &err)) < 0)
        goto fatal;
    if (read_status == AUDIT_ENOMEM)
        exit_code = EXIT_DEVICE; /* the document says what was compared before it */
    else if (totals.input_error || totals.mismatch)
        exit_code = EXIT_BAD_INPUT;
    else
        exit_code = totals.differing_rows ? EXIT_AUDIT_FAILED : EXIT_AUDIT_OK;
    goto done;
fatal:
    cli_print_message(&cmd_diff, "%s", err.message);
    exit_code = audit_exit_code(status);
done:
    if (table)
        fclose(table);
    free(table_text);
    free(text);
    cJSON_Delete(records);
    cJSON_Delete(document);
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
