/* census: per record and k, how determined the top-k selection of the captured scores is
 * (tie sets at the boundary, exact-zero plateaus, gaps, predicted staging overflow), before any
 * kernel runs. The document (schema "dsatopk-audit/census", docs/REFERENCE.md) is built by
 * src/reference/census_json.c; this file parses the options, tells what went wrong reading a
 * capture, and renders the document as JSON or as a table. */
#include <getopt.h>
#include <glob.h>
#include <inttypes.h>
#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "capture.h"
#include "census_json.h"
#include "cli.h"
#include "document_context.h"
#include "error.h"
#include "json_util.h"
#include "terminal_text.h"
#include "report_engine.h"
#include "report_keys.h"

#define MAX_KS 64
#define MAX_SELECTED_RECORDS 4096
#define DEFAULT_CAPTURE_PATTERN "captures/*.bin"

static const char census_usage[] =
    "usage: dsatopk-audit census [--k LIST] [--format json|table] [-o FILE] [--records LIST]\n"
    "                            [CAPTURE...]\n"
    "\n"
    "For every record and every k: rows, the fraction of exact 0.0 scores, counts of -inf, NaN\n"
    "and subnormals; per row the k-th (boundary) value, its tie-set size, how many rank strictly\n"
    "above it, whether the selection is underdetermined (the tie set straddles the boundary),\n"
    "whether the boundary is 0.0, the gap to the (k+1)-th value, and the predicted staging\n"
    "overflow of the radix-select kernels (candidates in the boundary's fp16-top-byte bin above\n"
    "4096 or 16384); aggregated as median/p90/max of the tie sets, min/median/p90 of the gaps and\n"
    "counts of rows. A record that carries the engine's own selection (engine_indices) also gets\n"
    "it judged at the record's k (\"engine\": exact, tie variant or wrong rows; docs/REPORT.md).\n"
    "Definitions: docs/REFERENCE.md. Without CAPTURE, every captures/*.bin.\n"
    "\n"
    "options:\n"
    "  -k, --k LIST          comma-separated k values; 0 means each record's own k\n"
    "                        (default 512,1024,2048,0; repeated values are taken once)\n"
    "  -f, --format FORMAT   json (default; schema dsatopk-audit/census, version 2) or table\n"
    "                        (one line per record and k)\n"
    "  -o, --output FILE     write to FILE (atomically) instead of stdout\n"
    "  -r, --records LIST    only these record indices (comma-separated, 0-based) of each file\n"
    "      --engine-contract JSON  the contract the engine's recorded selections are judged\n"
    "                        under (as `run --engine-contract`; default: each record's\n"
    "                        metadata \"contract\", else a valid top-k in any order)\n"
    "  -h, --help            show this help\n"
    "\n"
    "A truncated or corrupt capture: the records before the damage are reported, the file and\n"
    "record are named on stderr, and the exit code is 3.\n"
    "exit codes: 0 ok; 2 usage error; 3 a capture is missing, unreadable, truncated or corrupt;\n"
    "            4 out of memory\n";


struct census_options {
    enum cli_format format;
    const char *output_path; /* "-": stdout */
    uint32_t ks[MAX_KS];
    size_t k_count;
    unsigned long long records[MAX_SELECTED_RECORDS];
    int record_count; /* 0: every record */
    struct engine_contract engine_contract;
    bool engine_contract_given;
};

static double number_at(const cJSON *object, const char *name);

/* census_selection.record_extra: the engine's selection judged, as the record's "engine". */
static int add_engine(void *user, const struct capture_record *record, cJSON *record_json,
                      struct audit_error *err)
{
    const struct census_options *options = user;
    struct engine_result *engine;
    if (!record->engine_indices)
        return AUDIT_OK;
    if (!(engine = calloc(1, sizeof(*engine))))
        return audit_fail(err, AUDIT_ENOMEM, "out of memory judging the engine's selection");
    int status = engine_result_judge(
        engine, record, NULL, options->engine_contract_given ? &options->engine_contract : NULL,
        NULL, err);
    cJSON *json = status == AUDIT_OK ? report_engine_json(engine, NULL) : NULL;
    if (status == AUDIT_OK && !json)
        status = audit_fail(err, AUDIT_ENOMEM, "out of memory writing the engine's selection");
    if (json)
        cJSON_AddItemToObject(record_json, KEY_ENGINE, json);
    engine_result_release(engine);
    free(engine);
    return status;
}

static void print_engine(FILE *out, const cJSON *engine)
{
    const cJSON *by_kind = cJSON_GetObjectItemCaseSensitive(engine, KEY_ROWS_BY_KIND);
    fprintf(out, "%6s engine %s: %.0f exact, %.0f tie_variant, %.0f wrong\n", "",
            terminal_safe(cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(engine, KEY_VERDICT))),
            number_at(by_kind, engine_row_class_name(ENGINE_ROW_EXACT)),
            number_at(by_kind, engine_row_class_name(ENGINE_ROW_TIE_VARIANT)),
            number_at(by_kind, engine_row_class_name(ENGINE_ROW_WRONG)));
    const cJSON *reason;
    cJSON_ArrayForEach(reason, cJSON_GetObjectItemCaseSensitive(engine, KEY_VERDICT_REASONS))
        fprintf(out, "%6s   %s\n", "", terminal_safe(cJSON_GetStringValue(reason)));
}

/* What reading all files met, for the summary and the exit status. */
struct census_totals {
    uint64_t files, records;
    int worst_status; /* 0, or the AUDIT_E* code that maps to the highest exit code */
};

/* Takes the census of one file into the document and says on stderr what went wrong. Returns
 * 0 or AUDIT_ENOMEM. */
static int census_file(cJSON *document, const char *path,
                       const struct census_selection *selection, struct census_totals *totals)
{
    bool seen[MAX_SELECTED_RECORDS] = { false };
    struct census_file_outcome outcome = { .seen = seen };
    if (census_json_add_file(document, path, selection, &outcome) < 0)
        return AUDIT_ENOMEM;
    totals->files++;
    totals->records += outcome.records;
    if (outcome.status < 0) {
        if (audit_exit_code(outcome.status) > audit_exit_code(totals->worst_status))
            totals->worst_status = outcome.status;
        cli_print_message(&cmd_census, "%s", outcome.message);
        if (outcome.opened)
            cli_print_message(&cmd_census,
                              "%s: reported the records before record %" PRIu32 " (byte %" PRIu64
                              ")",
                              path, outcome.next_record, outcome.next_offset);
        return AUDIT_OK;
    }
    for (size_t i = 0; i < selection->record_count; i++)
        if (!seen[i])
            cli_print_message(&cmd_census, "%s: no record %llu (the file has %" PRIu32 ")", path,
                              selection->records[i], outcome.next_record);
    return AUDIT_OK;
}

/* ---- table ---- */

static double number_at(const cJSON *object, const char *name)
{
    const cJSON *item = cJSON_GetObjectItemCaseSensitive(object, name);
    return cJSON_IsNumber(item) ? item->valuedouble : NAN;
}

/* A count as an integer, "-" when absent (null). */
static const char *format_count(char *buffer, size_t size, double value)
{
    if (isnan(value))
        snprintf(buffer, size, "-");
    else
        snprintf(buffer, size, "%.0f", value);
    return buffer;
}

static const char *format_gap(char *buffer, size_t size, double value)
{
    if (isnan(value))
        snprintf(buffer, size, "-");
    else
        snprintf(buffer, size, "%.3g", value);
    return buffer;
}

static void print_table(FILE *out, const cJSON *document)
{
    const cJSON *file;
    cJSON_ArrayForEach(file, cJSON_GetObjectItemCaseSensitive(document, "files")) {
        const cJSON *records = cJSON_GetObjectItemCaseSensitive(file, KEY_RECORDS);
        fprintf(out, "# %s: %d records, %s\n",
                terminal_safe(cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(file, KEY_PATH))),
                cJSON_GetArraySize(records),
                cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(file, KEY_STATUS)));
        if (cJSON_GetArraySize(records) > 0)
            fprintf(out, "%6s %7s %6s %7s %17s %9s %9s %9s %9s %19s\n", "record", "k", "rows",
                    "zero%", "tie med/p90/max", "underdet", "zero-bnd", "ovf>4096", "ovf>16384",
                    "gap min/median");
        const cJSON *record;
        cJSON_ArrayForEach(record, records) {
            const cJSON *entry;
            cJSON_ArrayForEach(entry, cJSON_GetObjectItemCaseSensitive(record, KEY_CENSUS)) {
                const cJSON *ties = cJSON_GetObjectItemCaseSensitive(entry, KEY_TIE_SET);
                const cJSON *gap = cJSON_GetObjectItemCaseSensitive(entry, "gap");
                char tie_text[48], gap_text[48], a[16], b[16], c[16];
                double zero_fraction = number_at(entry, "zero_fraction");
                snprintf(tie_text, sizeof(tie_text), "%s/%s/%s",
                         format_count(a, sizeof(a), number_at(ties, KEY_MEDIAN)),
                         format_count(b, sizeof(b), number_at(ties, "p90")),
                         format_count(c, sizeof(c), number_at(ties, KEY_MAX)));
                snprintf(gap_text, sizeof(gap_text), "%s/%s",
                         format_gap(a, sizeof(a), number_at(gap, KEY_MIN)),
                         format_gap(b, sizeof(b), number_at(gap, KEY_MEDIAN)));
                char k_text[16];
                snprintf(k_text, sizeof(k_text), "%.0f%s", number_at(entry, KEY_K),
                         cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(entry, KEY_RECORD_K)) ? "*"
                                                                                            : "");
                char zero_text[16];
                if (isnan(zero_fraction))
                    snprintf(zero_text, sizeof(zero_text), "-");
                else
                    snprintf(zero_text, sizeof(zero_text), "%.2f", 100.0 * zero_fraction);
                double rows = number_at(entry, KEY_ROWS);
                static const char *const row_counts[4] = {
                    "underdetermined_rows", "zero_boundary_rows", "radix_overflow_rows",
                    "filtered_overflow_rows",
                };
                char counts[4][40];
                for (int i = 0; i < 4; i++)
                    snprintf(counts[i], sizeof(counts[i]), "%.0f/%.0f",
                             number_at(entry, row_counts[i]), rows);
                fprintf(out, "%6.0f %7s %6.0f %7s %17s %9s %9s %9s %9s %19s\n",
                        number_at(record, KEY_RECORD), k_text, rows, zero_text, tie_text, counts[0],
                        counts[1], counts[2], counts[3], gap_text);
            }
            const cJSON *engine = cJSON_GetObjectItemCaseSensitive(record, KEY_ENGINE);
            if (cJSON_IsObject(engine))
                print_engine(out, engine);
        }
        const cJSON *error = cJSON_GetObjectItemCaseSensitive(file, KEY_ERROR);
        if (cJSON_IsObject(error))
            fprintf(out, "# %s\n", terminal_safe(cJSON_GetStringValue(
                                        cJSON_GetObjectItemCaseSensitive(error, KEY_MESSAGE))));
    }
    fprintf(out, "# k* is the record's own k; underdet, zero-bnd, ovf: rows/rows of the record\n");
}

/* ---- options ---- */

static int parse_options(int argc, char **argv, struct census_options *options)
{
    static const struct option long_options[] = {
        { "k", required_argument, NULL, 'k' },
        { "format", required_argument, NULL, 'f' },
        { "output", required_argument, NULL, 'o' },
        { "records", required_argument, NULL, 'r' },
        { "engine-contract", required_argument, NULL, 'e' },
        { "help", no_argument, NULL, 'h' },
        { NULL, 0, NULL, 0 },
    };
    static const uint32_t default_ks[] = { 512, 1024, 2048, 0 };
    unsigned long long values[MAX_KS];
    memcpy(options->ks, default_ks, sizeof(default_ks));
    options->k_count = sizeof(default_ks) / sizeof(default_ks[0]);
    int option;
    opterr = 0; /* messages come from cli_usage_error */
    bool help = false;
    while ((option = getopt_long(argc, argv, ":k:f:o:r:h", long_options, NULL)) != -1) {
        switch (option) {
        case 'k': {
            int count = cli_parse_uint_list(optarg, values, MAX_KS);
            if (count < 0)
                return cli_usage_error(&cmd_census,
                                       "--k: '%s' is not a comma-separated list of at most %d "
                                       "non-negative integers",
                                       optarg, MAX_KS);
            for (int i = 0; i < count; i++) {
                if (values[i] > CAPTURE_MAX_K)
                    return cli_usage_error(&cmd_census, "--k: %llu is above the largest k, %u",
                                           values[i], CAPTURE_MAX_K);
                options->ks[i] = (uint32_t)values[i];
            }
            options->k_count = (size_t)count;
            break;
        }
        case 'f':
            if (cli_parse_format(&cmd_census, optarg, &options->format) != 0)
                return EXIT_USAGE;
            break;
        case 'o': options->output_path = optarg; break;
        case 'r':
            options->record_count =
                cli_parse_uint_list(optarg, options->records, MAX_SELECTED_RECORDS);
            if (options->record_count < 0)
                return cli_usage_error(&cmd_census,
                                       "--records: '%s' is not a comma-separated list of at most "
                                       "%d record indices",
                                       optarg, MAX_SELECTED_RECORDS);
            break;
        case 'e':
            if (cli_parse_engine_contract(&cmd_census, optarg, &options->engine_contract) != 0)
                return EXIT_USAGE;
            options->engine_contract_given = true;
            break;
        case 'h': help = true; break;
        default: return cli_option_error(&cmd_census, option, argv);
        }
    }
    if (help) {
        cli_print_usage(&cmd_census, stdout);
        return -1;
    }
    return EXIT_AUDIT_OK;
}

static int run_census(int argc, char **argv)
{
    struct census_options options = { .format = CLI_FORMAT_JSON, .output_path = "-" };
    struct census_totals totals = { 0 };
    struct audit_error err = { 0 };
    glob_t found = { 0 };
    bool globbed = false;
    char *text = NULL;
    cJSON *document = NULL;
    int exit_code = parse_options(argc, argv, &options);
    if (exit_code == -1)
        return EXIT_AUDIT_OK; /* --help */
    if (exit_code != EXIT_AUDIT_OK)
        return exit_code;

    char **paths = argv + optind;
    size_t path_count = (size_t)(argc - optind);
    if (path_count == 0) {
        int globbing = glob(DEFAULT_CAPTURE_PATTERN, 0, NULL, &found);
        globbed = true;
        if (globbing != 0 || found.gl_pathc == 0) {
            exit_code = cli_usage_error(&cmd_census,
                                        "no CAPTURE given and no %s in the current directory",
                                        DEFAULT_CAPTURE_PATTERN);
            goto done;
        }
        paths = found.gl_pathv;
        path_count = found.gl_pathc;
    }

    struct document_context context;
    document_context_fill(&context, cli_version(), cli_command_line());
    const struct census_selection selection = {
        .ks = options.ks,
        .k_count = options.k_count,
        .records = options.record_count ? options.records : NULL,
        .record_count = (size_t)options.record_count,
        .record_extra = add_engine,
        .record_user = &options,
    };
    document = census_json_begin(&context, &selection);
    if (!document)
        goto out_of_memory;
    for (size_t i = 0; i < path_count; i++)
        if (census_file(document, paths[i], &selection, &totals) < 0)
            goto out_of_memory;
    if (census_json_finish(document, totals.files, totals.records, totals.worst_status) < 0)
        goto out_of_memory;

    text = json_render(document, options.format == CLI_FORMAT_JSON ? NULL : print_table);
    if (!text)
        goto out_of_memory;
    if (json_write_text_atomic(options.output_path, text, &err) != AUDIT_OK) {
        cli_print_message(&cmd_census, "%s", err.message);
        exit_code = audit_exit_code(err.code);
        goto done;
    }
    exit_code = audit_exit_code(totals.worst_status);
    goto done;
out_of_memory:
    cli_print_message(&cmd_census, "out of memory");
    exit_code = EXIT_DEVICE;
done:
    if (globbed)
        globfree(&found);
    free(text);
    cJSON_Delete(document);
    return exit_code;
}

const struct cli_command cmd_census = {
    .name = "census",
    .summary = "tie sets, zero plateaus, gaps and staging overflow of captured scores",
    .usage = census_usage,
    .run = run_census,
};
