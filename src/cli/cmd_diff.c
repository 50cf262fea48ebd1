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
#include "hash.h"
#include "json_util.h"
#include "selection.h"
#include "terminal_text.h"
/* Differing rows the table lists per record; the JSON lists them all. */
#define TABLE_ROWS_PER_RECORD 20

static const char diff_usage[] =
    "usage: dsatopk-audit diff [--k K] [--format table|json] [-o FILE] A.bin B.bin\n"
    "\n"
    "Compares two captures of the same calls (two runs of an engine), records paired by\n"
    "position, or, when one capture is a reproducer cut by `extract`, each of its records with\n"
    "the original record and rows its \"extracted_from\" names. For every row: are the scores\n"
    "bit-identical; if not, how many elements differ, the largest absolute and total-order ULP\n"
    "difference, and whether the perturbation can cross the row's boundary gap (A's census);\n"
    "does the exact (CPU reference) selection differ; when both captures carry the engine's own\n"
    "indices, is each side's a valid top-k of its own scores, and did it differ. Each row gets\n"
    "one case and an attribution:\n"
    "  identical                        -                 nothing differs\n"
    "  scores_differ_selection_same     none              perturbation absorbed\n"
    "  scores_differ_selection_changed  upstream          the selection followed the scores\n"
    "  tie_flap                         tie_flap          engine sets differ, both valid top-k:\n"
    "                                                     other boundary ties taken\n"
    "  engine_reordered                 selection_kernel  same scores and set, another order\n"
    "  engine_wrong                     engine_wrong      a side's engine selection is wrong\n"
    "                                                     (the side, row and missing indices)\n"
    "  window_differs                   capture_mismatch  lengths or row starts differ\n"
    "A summary counts each case and names where the divergence starts. Captures that are not of\n"
    "the same calls are said so on stderr, and never reported as agreeing.\n"
    "\n"
    "options:\n"
    "  --k K               compare the exact selections and census at K (default: each\n"
    "                      record's k); engine outputs are always compared at the record's k\n"
    "  --format FORMAT     table (default) or json (schema dsatopk-audit/diff, version 3; rows\n"
    "                      are listed only when they differ)\n"
    "  -o, --output FILE   write the output to FILE (atomically) instead of stdout\n"
    "  -h, --help          show this help\n"
    "\n"
    "exit codes: 0 no row differs; 1 some row differs; 2 usage error; 3 unreadable, corrupt\n"
    "            or mismatched captures (different record counts, rows, k or page-table\n"
    "            layout, or a reproducer of another capture: what could be paired is still\n"
    "            compared and reported); 4 a record over the memory cap (--max-record-bytes)\n"
    "            or out of memory\n";


struct diff_options {
    uint32_t k_override;
    enum cli_format format;
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
            if (cli_parse_format(&cmd_diff, optarg, &options->format) != 0)
                return EXIT_USAGE;
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

/* A side whose engine selection is wrong: its kinds and the candidates it left out. */
static void table_engine_side(FILE *table, const char *side, const struct diff_engine_side *engine)
{
    if (engine->row_class != ENGINE_ROW_WRONG)
        return;
    fprintf(table, "; %s's engine selection wrong (", side);
    const char *separator = "";
    for (unsigned kind = 0; kind < CHECK_KIND_COUNT; kind++)
        if (engine->kinds & (1u << kind)) {
            fprintf(table, "%s%s", separator, check_kind_name((enum check_kind)kind));
            separator = ",";
        }
    fprintf(table, ")");
    if (engine->missing_count) {
        fprintf(table, ", missing");
        for (uint64_t i = 0; i < engine->missing_count && i < 8; i++)
            fprintf(table, " %" PRId64, engine->missing[i]);
        if (engine->missing_count > 8)
            fprintf(table, " ... (%" PRIu64 " in all)", engine->missing_count);
    }
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
    if (row->engine_judged) {
        table_engine_side(table, DIFF_SIDE_A, &row->engine_a);
        table_engine_side(table, DIFF_SIDE_B, &row->engine_b);
    }
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
        fprintf(table, "  mismatch: %s\n", terminal_safe(result->mismatches[i]));
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
                           const uint32_t *row_numbers, uint32_t index,
                           const struct diff_options *options, struct diff_scratch *scratch,
                           cJSON *document, cJSON *records, FILE *table,
                           struct diff_totals *totals, struct audit_error *err)
{
    struct diff_record_result result;
    int status = diff_record_compare(a, b, options->k_override, row_numbers, index, scratch,
                                     &result, err);
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
            "selection; %" PRIu64 " whose exact selection changed; %" PRIu64 " with a tie flap, %"
            PRIu64 " with a wrong engine selection (engine indices compared in %" PRIu64 ")\n",
            totals->records_scores_identical, totals->records_scores_differ,
            totals->records_scores_same_engine_differs, totals->records_reference_selection_changed,
            totals->records_tie_flap, totals->records_engine_wrong,
            totals->records_engine_compared);

    uint64_t wrong = totals->attribution[DIFF_ATTRIBUTION_ENGINE_WRONG];
    uint64_t flaps = totals->attribution[DIFF_ATTRIBUTION_TIE_FLAP];
    uint64_t kernel = totals->attribution[DIFF_ATTRIBUTION_SELECTION_KERNEL];
    uint64_t upstream = totals->attribution[DIFF_ATTRIBUTION_UPSTREAM];
    uint64_t absorbed = totals->cases[DIFF_CASE_SCORES_DIFFER_SELECTION_SAME];
    uint64_t mismatched = totals->attribution[DIFF_ATTRIBUTION_CAPTURE_MISMATCH];
    fprintf(table, "verdict: ");
    if (totals->mismatch || totals->input_error)
        fprintf(table, "the captures are not of the same calls (%s): %" PRIu64 " of %" PRIu64
                " compared row%s differ\n", totals->input_error ? "a capture is unreadable"
                                                                 : "see the mismatches",
                totals->differing_rows, totals->rows, plural(totals->rows));
    else if (totals->differing_rows == 0)
        fprintf(table, "the two captures agree bit for bit on every compared row\n");
    else {
        const char *separator = "";
        if (wrong) {
            fprintf(table, "the engine selected a wrong set in %" PRIu64 " row%s (not a valid "
                    "top-k of its own scores: a kernel bug, see engine_wrong)", wrong,
                    plural(wrong));
            separator = "; ";
        }
        if (flaps) {
            fprintf(table, "%sthe engine took other boundary ties in %" PRIu64 " row%s (tie "
                    "flap: underdetermined rows, the kernel's tie-break is not deterministic)",
                    separator, flaps, plural(flaps));
            separator = "; ";
        }
        if (kernel) {
            fprintf(table, "%sthe selection kernel reordered its output on identical scores in %"
                    PRIu64 " row%s", separator, kernel, plural(kernel));
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
        if (mismatched)
            fprintf(table, "%s%" PRIu64 " row%s not the same call (window differs)", separator,
                    mismatched, mismatched == 1 ? " is" : "s are");
        fprintf(table, "\n");
    }
}

/* What the comparison works with: the readers, the options and the outputs. */
struct diff_pairing {
    struct capture_reader *reader_a, *reader_b;
    const struct diff_options *options;
    struct diff_scratch scratch;
    cJSON *document, *records;
    FILE *table;
    struct diff_totals *totals;
    /* The read error that stopped the comparison, or 0: AUDIT_ENOMEM (a record over the memory
     * cap, or out of memory) is exit 4, any other exit 3. */
    int read_status;
};

/* A read error (status, message): the comparison stops there. */
static void input_error(struct diff_pairing *pairing, int status, const char *message)
{
    cli_print_message(&cmd_diff, "%s", message);
    fprintf(pairing->table, "input error: %s\n", terminal_safe(message));
    (void)diff_json_add_input_error(pairing->document, message);
    pairing->totals->input_error = true;
    pairing->read_status = status;
}

/* A mismatch of the captures as a whole, into the document and the table. */
static void capture_mismatch(cJSON *document, FILE *table, struct diff_totals *totals,
                             const char *format, ...) __attribute__((format(printf, 4, 5)));
static void capture_mismatch(cJSON *document, FILE *table, struct diff_totals *totals,
                             const char *format, ...)
{
    char message[DIFF_MESSAGE_BYTES];
    va_list args;
    va_start(args, format);
    vsnprintf(message, sizeof(message), format, args);
    va_end(args);
    totals->mismatch = true;
    (void)diff_json_add_mismatch(document, message);
    fprintf(table, "  mismatch: %s\n", terminal_safe(message));
}

/* Pairs by position, from the first records a and b (both read, released here), up to the end
 * of the shorter capture or the first read error. */
static int pair_by_position(struct diff_pairing *pairing, struct capture_record *a,
                            struct capture_record *b, struct audit_error *err)
{
    uint64_t records_a = 1, records_b = 1;
    int status = AUDIT_OK;
    for (;;) {
        status = compare_records(a, b, NULL, a->index, pairing->options, &pairing->scratch,
                                 pairing->document, pairing->records, pairing->table,
                                 pairing->totals, err);
        capture_record_free(a);
        capture_record_free(b);
        if (status < 0)
            return status;
        int read_a = capture_read_record(pairing->reader_a, a, err);
        if (read_a < 0) {
            input_error(pairing, read_a, err->message);
            return AUDIT_OK;
        }
        int read_b = capture_read_record(pairing->reader_b, b, err);
        if (read_b < 0) {
            input_error(pairing, read_b, err->message);
            if (read_a > 0)
                capture_record_free(a);
            return AUDIT_OK;
        }
        records_a += read_a > 0;
        records_b += read_b > 0;
        if (read_a > 0 && read_b > 0)
            continue;
        bool error = false;
        if (read_a > 0) {
            capture_record_free(a);
            records_a += count_remaining(pairing->reader_a, &error);
        }
        if (read_b > 0) {
            capture_record_free(b);
            records_b += count_remaining(pairing->reader_b, &error);
        }
        if (records_a != records_b)
            capture_mismatch(pairing->document, pairing->table, pairing->totals,
                             "record count differs: A has %" PRIu64 "%s, B has %" PRIu64
                             "%s: compared the first %" PRIu64, records_a,
                             error && read_a > 0 ? " readable" : "", records_b,
                             error && read_b > 0 ? " readable" : "", pairing->totals->records);
        return AUDIT_OK;
    }
}

/* Pairs each record of a reproducer (cut by extract) with the rows of the original record its
 * extracted_from names. reproducer and first (the first record of the original; both read,
 * released here) start the two captures; the rest is read forward. reproducer_is_a: the
 * reproducer is A. */
static int pair_by_provenance(struct diff_pairing *pairing, struct capture_record *reproducer,
                              struct capture_record *first, bool reproducer_is_a,
                              struct audit_error *err)
{
    struct capture_reader *reproducer_reader =
        reproducer_is_a ? pairing->reader_a : pairing->reader_b;
    struct capture_reader *original_reader =
        reproducer_is_a ? pairing->reader_b : pairing->reader_a;
    const char *r = reproducer_is_a ? "A" : "B", *o = reproducer_is_a ? "B" : "A";
    struct capture_record original = *first;
    bool have_original = true, original_ended = false;
    int status = AUDIT_OK;
    for (;;) {
        struct diff_provenance provenance;
        status = diff_provenance_read(reproducer, &provenance, err);
        if (status == AUDIT_OK && !provenance.present)
            status = audit_fail(err, AUDIT_EDATA, "%s record %u has no extracted_from: a "
                                "reproducer's records all name their source", r,
                                reproducer->index);
        if (status == AUDIT_EDATA) {
            capture_mismatch(pairing->document, pairing->table, pairing->totals, "%s",
                             err->message);
            status = AUDIT_OK;
            capture_record_free(reproducer);
            break;
        }
        while (status == AUDIT_OK && !original_ended &&
               (!have_original || original.index < provenance.record)) {
            if (have_original)
                capture_record_free(&original);
            int read = capture_read_record(original_reader, &original, err);
            have_original = read > 0;
            original_ended = read <= 0;
            if (read < 0)
                input_error(pairing, read, err->message);
        }
        if (status == AUDIT_OK && (!have_original || original.index != provenance.record)) {
            capture_mismatch(pairing->document, pairing->table, pairing->totals,
                             "%s record %u was extracted from record %u, which %s does not have "
                             "(in order)", r, reproducer->index, provenance.record, o);
        } else if (status == AUDIT_OK) {
            if (provenance.has_payload &&
                memcmp(provenance.payload_sha256, original.payload_sha256, 32) != 0) {
                /* Another run of the same call (or another capture: the rows will say). */
                char want[HASH_HEX_BYTES], have[HASH_HEX_BYTES], note[DIFF_MESSAGE_BYTES];
                hash_to_hex(provenance.payload_sha256, want);
                hash_to_hex(original.payload_sha256, have);
                snprintf(note, sizeof(note), "%s record %u was cut from a record with payload "
                         "%.12s; %s record %u has %.12s: not its source, compared as another "
                         "capture of the same call", r, reproducer->index, want, o,
                         original.index, have);
                (void)diff_json_add_note(pairing->document, note);
                fprintf(pairing->table, "  note: %s\n", note);
            }
            struct capture_record narrowed;
            status = selection_extract_rows(&original, provenance.rows, provenance.row_count,
                                            &narrowed, err);
            if (status == AUDIT_EUSAGE) {
                capture_mismatch(pairing->document, pairing->table, pairing->totals,
                                 "%s record %u: extracted_from names rows %s record %u lacks (%s)",
                                 r, reproducer->index, o, original.index, err->message);
                status = AUDIT_OK;
            } else if (status == AUDIT_OK) {
                narrowed.index = original.index;
                memcpy(narrowed.payload_sha256, original.payload_sha256, 32);
                status = compare_records(reproducer_is_a ? reproducer : &narrowed,
                                         reproducer_is_a ? &narrowed : reproducer,
                                         provenance.rows, original.index, pairing->options,
                                         &pairing->scratch, pairing->document, pairing->records,
                                         pairing->table, pairing->totals, err);
                capture_record_free(&narrowed);
            }
        }
        diff_provenance_release(&provenance);
        capture_record_free(reproducer);
        if (status < 0)
            break;
        int read = capture_read_record(reproducer_reader, reproducer, err);
        if (read < 0)
            input_error(pairing, read, err->message);
        if (read <= 0)
            break;
    }
    if (have_original)
        capture_record_free(&original);
    return status;
}

/* Whether record carries extracted_from (a malformed one counts: the pairing says why). */
static bool is_reproducer(const struct capture_record *record)
{
    struct diff_provenance provenance;
    struct audit_error ignored = { 0 };
    int status = diff_provenance_read(record, &provenance, &ignored);
    bool present = status == AUDIT_EDATA || provenance.present;
    diff_provenance_release(&provenance);
    return present;
}

/* Reads both captures and compares them: by extracted_from when exactly one is a reproducer
 * (its first record says so), else by position. Returns 0, or a fatal code with err filled. */
static int compare_captures(struct diff_pairing *pairing, struct audit_error *err)
{
    struct capture_record a, b;
    int status = AUDIT_OK;
    int read_a = capture_read_record(pairing->reader_a, &a, err);
    if (read_a < 0) {
        input_error(pairing, read_a, err->message);
        return AUDIT_OK;
    }
    int read_b = capture_read_record(pairing->reader_b, &b, err);
    if (read_b < 0)
        input_error(pairing, read_b, err->message);
    if (read_a <= 0 || read_b <= 0) {
        if (read_a > 0)
            capture_record_free(&a);
        if (read_b > 0)
            capture_record_free(&b);
        if (read_b >= 0 && read_a != read_b)
            capture_mismatch(pairing->document, pairing->table, pairing->totals,
                             "%s has no record: nothing to compare", read_a ? "B" : "A");
        return AUDIT_OK;
    }
    const bool reproducer_a = is_reproducer(&a), reproducer_b = is_reproducer(&b);
    if (reproducer_a != reproducer_b) {
        fprintf(pairing->table, "# records paired by extracted_from: %s is a reproducer of %s\n",
                reproducer_a ? "A" : "B", reproducer_a ? "B" : "A");
        if (diff_json_set_pairing(pairing->document, KEY_EXTRACTED_FROM,
                                  reproducer_a ? DIFF_SIDE_A : DIFF_SIDE_B) < 0) {
            capture_record_free(&a);
            capture_record_free(&b);
            return audit_fail(err, AUDIT_ENOMEM, "out of memory");
        }
        status = pair_by_provenance(pairing, reproducer_a ? &a : &b, reproducer_a ? &b : &a,
                                    reproducer_a, err);
    } else {
        fprintf(pairing->table, "# records paired by position\n");
        status = pair_by_position(pairing, &a, &b, err);
    }
    return status;
}

static int run_diff(int argc, char **argv)
{
    struct diff_options options = { .format = CLI_FORMAT_TABLE, .output = "-" };
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
    struct diff_pairing pairing = {
        .reader_a = reader_a,
        .reader_b = reader_b,
        .options = &options,
        .document = document,
        .records = records,
        .table = table,
        .totals = &totals,
    };
    status = compare_captures(&pairing, &err);
    diff_scratch_free(&pairing.scratch);
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
    if (options.format == CLI_FORMAT_JSON && !(text = json_render(document, NULL))) {
        status = audit_fail(&err, AUDIT_ENOMEM, "out of memory formatting JSON");
        goto fatal;
    }
    if ((status = json_write_text_atomic(options.output, text ? text : table_text, &err)) < 0)
        goto fatal;
    /* Captures of other calls: said where it cannot be missed, whatever the format. */
    const cJSON *mismatch;
    cJSON_ArrayForEach(mismatch, cJSON_GetObjectItemCaseSensitive(document, KEY_MISMATCHES))
        cli_print_message(&cmd_diff, "not the same calls: %s", cJSON_GetStringValue(mismatch));
    if (pairing.read_status == AUDIT_ENOMEM)
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
