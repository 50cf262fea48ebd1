/* extract: writes a minimal reproducer: the chosen rows of the chosen records of a capture, each
 * record's metadata kept and its provenance added under "extracted_from" (docs/TRIAGE.md).
 * Rows come from --records/--rows or from a run report (--from-report): the rows that flapped
 * or were wrong there. Row copying is selection_extract_rows (src/triage/selection.c). */
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cjson/cJSON.h>

#include "capture.h"
#include "cli.h"
#include "error.h"
#include "hash.h"
#include "json_util.h"
#include "output_file.h"
#include "report_read.h"
#include "selection.h"
#include "terminal_text.h"

static const char extract_usage[] =
    "usage: dsatopk-audit extract IN.bin [--records LIST] [--rows LIST] -o OUT.bin\n"
    "       dsatopk-audit extract IN.bin --from-report REPORT.json [--backend NAME]\n"
    "                             [--records LIST] -o OUT.bin\n"
    "\n"
    "Writes a minimal reproducer for a bug report: for each chosen record of IN.bin a record\n"
    "holding only the chosen rows (scores rows with the row stride kept, lengths, row starts,\n"
    "page-table rows and their row starts, engine indices), k and page size kept, the metadata\n"
    "kept plus \"extracted_from\": {file, record, rows (original row numbers), payload_sha256}\n"
    "(an earlier \"extracted_from\" moves under \"previous\"). OUT.bin is replaced atomically.\n"
    "\n"
    "LIST: numbers and ranges, e.g. 0,3,5-9 (sorted, duplicates dropped).\n"
    "\n"
    "options:\n"
    "  --records LIST        records to keep (default: every record, or every record the\n"
    "                        report names)\n"
    "  --rows LIST           rows to keep in each chosen record (default: all)\n"
    "  --from-report FILE    a run report (schema dsatopk-audit/report): keep, per record of\n"
    "                        IN.bin, the rows listed in records[].backends[] under\n"
    "                        flapping_rows[].row, wrong_rows[], graph.flapping_rows[].row,\n"
    "                        batch_invariance.dependent_rows[].row and the row lists of\n"
    "                        predicted_vs_observed, and the engine's wrong rows\n"
    "                        (records[].engine.wrong_rows[].row); records are matched by\n"
    "                        \"index\" and, when the report names files, by file (path, then\n"
    "                        file name)\n"
    "  --backend NAME        with --from-report: only that backend's rows (engine: only the\n"
    "                        engine's wrong rows)\n"
    "  --compress            zlib-compress the payloads\n"
    "  -o, --output OUT.bin  the capture file to write\n"
    "  -h, --help            show this help\n"
    "\n"
    "exit codes: 0 written; 2 usage error, including a --records or --rows number that IN.bin\n"
    "            does not have; 3 unreadable or corrupt IN.bin or report (also a report of a\n"
    "            newer schema_version), a report naming a record or row IN.bin does not have\n"
    "            or giving a record another payload_sha256, or a report with no row to\n"
    "            extract; 4 out of memory\n";

struct extract_options {
    const char *input, *output, *report, *backend;
    const char *records_text, *rows_text;
    bool compress;
};

/* (record << 32 | row) pairs, sorted: the rows a report names. */
/* What a report says about the capture: the (record, row) pairs it names, and the
 * payload_sha256 it gives each record, which the capture's record must have. */
struct report_payload {
    uint32_t record;
    char sha256[2 * HASH_BYTES + 1];
};

struct row_pairs {
    uint64_t *pairs;
    size_t count, capacity;
    struct report_payload *payloads;
    size_t payload_count, payload_capacity;
};

static int parse_options(int argc, char **argv, struct extract_options *options)
{
    enum { OPT_RECORDS = 256, OPT_ROWS, OPT_FROM_REPORT, OPT_BACKEND, OPT_COMPRESS };
    static const struct option long_options[] = {
        { "records", required_argument, NULL, OPT_RECORDS },
        { "rows", required_argument, NULL, OPT_ROWS },
        { "from-report", required_argument, NULL, OPT_FROM_REPORT },
        { "backend", required_argument, NULL, OPT_BACKEND },
        { "compress", no_argument, NULL, OPT_COMPRESS },
        { "output", required_argument, NULL, 'o' },
        { "help", no_argument, NULL, 'h' },
        { NULL, 0, NULL, 0 },
    };
    int option;
    opterr = 0; /* messages come from cli_usage_error */
    bool help = false;
    while ((option = getopt_long(argc, argv, ":ho:", long_options, NULL)) != -1) {
        switch (option) {
        case OPT_RECORDS: options->records_text = optarg; break;
        case OPT_ROWS: options->rows_text = optarg; break;
        case OPT_FROM_REPORT: options->report = optarg; break;
        case OPT_BACKEND: options->backend = optarg; break;
        case OPT_COMPRESS: options->compress = true; break;
        case 'o': options->output = optarg; break;
        case 'h': help = true; break;
        default: return cli_option_error(&cmd_extract, option, argv);
        }
    }
    if (help) {
        cli_print_usage(&cmd_extract, stdout);
        return -1;
    }
    if (argc - optind != 1)
        return cli_usage_error(&cmd_extract, "expected one input capture IN.bin, got %d",
                               argc - optind);
    options->input = argv[optind];
    if (!options->output)
        return cli_usage_error(&cmd_extract, "-o OUT.bin is required");
    if (options->report && options->rows_text)
        return cli_usage_error(&cmd_extract, "--rows and --from-report exclude each other");
    if (options->backend && !options->report)
        return cli_usage_error(&cmd_extract, "--backend needs --from-report");
    return EXIT_AUDIT_OK;
}

/* ---- the report ---- */

static int add_pair(struct row_pairs *pairs, uint32_t record, uint32_t row,
                    struct audit_error *err)
{
    if (pairs->count == pairs->capacity) {
        size_t grown = pairs->capacity ? pairs->capacity * 2 : 64;
        uint64_t *bigger = realloc(pairs->pairs, grown * sizeof(uint64_t));
        if (!bigger)
            return audit_fail(err, AUDIT_ENOMEM, "out of memory reading the report");
        pairs->pairs = bigger;
        pairs->capacity = grown;
    }
    pairs->pairs[pairs->count++] = ((uint64_t)record << 32) | row;
    return AUDIT_OK;
}

static int add_named_row(void *context, uint32_t record, uint32_t row, struct audit_error *err)
{
    return add_pair(context, record, row, err);
}

static int add_payload(void *context, uint32_t record, const char *payload_sha256,
                       struct audit_error *err)
{
    struct row_pairs *pairs = context;
    if (pairs->payload_count == pairs->payload_capacity) {
        size_t grown = pairs->payload_capacity ? pairs->payload_capacity * 2 : 16;
        struct report_payload *bigger = realloc(pairs->payloads, grown * sizeof(*bigger));
        if (!bigger)
            return audit_fail(err, AUDIT_ENOMEM, "out of memory reading the report");
        pairs->payloads = bigger;
        pairs->payload_capacity = grown;
    }
    struct report_payload *entry = &pairs->payloads[pairs->payload_count++];
    entry->record = record;
    snprintf(entry->sha256, sizeof(entry->sha256), "%s", payload_sha256);
    return AUDIT_OK;
}

/* The record must be the one the report measured: rows of another payload are other rows. */
static int check_payload(const struct extract_options *options, const struct row_pairs *pairs,
                         const struct capture_record *record, struct audit_error *err)
{
    char hex[2 * HASH_BYTES + 1];
    for (size_t i = 0; i < HASH_BYTES; i++)
        snprintf(hex + 2 * i, 3, "%02x", record->payload_sha256[i]);
    for (size_t i = 0; i < pairs->payload_count; i++) {
        const struct report_payload *entry = &pairs->payloads[i];
        if (entry->record == record->index && strcmp(entry->sha256, hex) != 0)
            return audit_fail(err, AUDIT_EDATA,
                              "%s gives record %" PRIu32 " payload_sha256 %s, but record %" PRIu32
                              " of %s has payload_sha256 %s: the report describes another "
                              "capture, or this one changed since the run",
                              options->report, record->index, entry->sha256, record->index,
                              options->input, hex);
    }
    return AUDIT_OK;
}

static int compare_u64(const void *x, const void *y)
{
    uint64_t a = *(const uint64_t *)x, b = *(const uint64_t *)y;
    return (a > b) - (a < b);
}

/* The rows the report names for the input (report_read.h), sorted, without repeats. */
static int read_report(const struct extract_options *options, struct row_pairs *pairs,
                       struct audit_error *err)
{
    cJSON *report = NULL;
    struct report_row_query query = {
        .report_path = options->report,
        .capture_path = options->input,
        .backend = options->backend,
        .add = add_named_row,
        .payload = add_payload,
        .context = pairs,
    };
    int status = json_read_file(options->report, &report, err);
    if (status < 0)
        return status;
    status = report_rows_named(report, &query, err);
    if (query.schema_missing)
        cli_print_message(&cmd_extract,
                          "%s: no \"%s\" field; reading it as a run "
                          "report",
                          options->report, KEY_SCHEMA);
    if (status == AUDIT_OK && pairs->count > 1) {
        /* Sort and drop duplicates (a row can flap on several backends). */
        uint64_t *p = pairs->pairs;
        qsort(p, pairs->count, sizeof(uint64_t), compare_u64);
        size_t kept = 1;
        for (size_t i = 1; i < pairs->count; i++)
            if (p[i] != p[kept - 1])
                p[kept++] = p[i];
        pairs->count = kept;
    }
    cJSON_Delete(report);
    return status;
}

/* ---- writing ---- */

static bool list_contains(const uint32_t *list, size_t count, uint32_t value)
{
    size_t lo = 0, hi = count;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (list[mid] < value)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo < count && list[lo] == value;
}

/* The record's metadata with "extracted_from" added (an earlier one moved under "previous"). */
static int provenance_metadata(const struct capture_record *source,
                               const struct extract_options *options, const uint32_t *rows,
                               size_t count, char **text, struct audit_error *err)
{
    int status = AUDIT_OK;
    cJSON *metadata = cJSON_Parse(source->metadata_json ? source->metadata_json : "{}");
    if (!cJSON_IsObject(metadata)) {
        cJSON_Delete(metadata);
        return audit_fail(err, AUDIT_EDATA, "%s: record %" PRIu32 ": metadata is not a JSON "
                          "object", options->input, source->index);
    }
    cJSON *provenance = cJSON_CreateObject();
    cJSON *row_list = provenance ? cJSON_AddArrayToObject(provenance, KEY_ROWS) : NULL;
    if (!row_list)
        goto out_of_memory;
    cJSON_AddStringToObject(provenance, KEY_FILE, options->input);
    json_add_u64(provenance, KEY_RECORD, source->index);
    for (size_t i = 0; i < count; i++)
        cJSON_AddItemToArray(row_list, cJSON_CreateNumber(rows[i]));
    json_add_hex(provenance, KEY_PAYLOAD_SHA256, source->payload_sha256,
                 sizeof(source->payload_sha256));
    if (options->report)
        cJSON_AddStringToObject(provenance, KEY_REPORT, options->report);
    if (options->backend)
        cJSON_AddStringToObject(provenance, KEY_BACKEND, options->backend);
    cJSON *previous = cJSON_DetachItemFromObjectCaseSensitive(metadata, KEY_EXTRACTED_FROM);
    if (previous)
        cJSON_AddItemToObject(provenance, KEY_PREVIOUS, previous);
    cJSON_AddItemToObject(metadata, KEY_EXTRACTED_FROM, provenance);
    provenance = NULL;
    char *printed = cJSON_PrintUnformatted(metadata);
    if (!printed || !(*text = malloc(strlen(printed) + 1))) {
        cJSON_free(printed);
        goto out_of_memory;
    }
    strcpy(*text, printed);
    cJSON_free(printed);
    cJSON_Delete(metadata);
    return status;
out_of_memory:
    cJSON_Delete(provenance);
    cJSON_Delete(metadata);
    return audit_fail(err, AUDIT_ENOMEM, "out of memory writing metadata");
}

/* Every row to keep must be in the record. */
static int check_rows_exist(const struct extract_options *options,
                            const struct capture_record *record, const uint32_t *rows, size_t count,
                            struct audit_error *err)
{
    for (size_t i = 0; i < count; i++) {
        if (rows[i] < record->rows)
            continue;
        if (options->report)
            return audit_fail(err, AUDIT_EDATA,
                              "%s names row %" PRIu32 " of record %" PRIu32
                              ", but that record of %s has %" PRIu32 " rows: the report does "
                              "not describe this capture",
                              options->report, rows[i], record->index, options->input,
                              record->rows);
        return audit_fail(err, AUDIT_EUSAGE,
                          "--rows: row %" PRIu32 " is out of range: record %" PRIu32
                          " of %s has %" PRIu32 " rows",
                          rows[i], record->index, options->input, record->rows);
    }
    return AUDIT_OK;
}

/* Every record asked for (--records) or named by the report must exist. */
static int check_records_exist(const struct extract_options *options, const uint32_t *record_list,
                               size_t record_count, const struct row_pairs *report_rows,
                               uint32_t records_seen, struct audit_error *err)
{
    if (record_list && record_list[record_count - 1] >= records_seen)
        return audit_fail(err, AUDIT_EUSAGE,
                          "--records: record %" PRIu32 " is out of range: %s "
                          "has %" PRIu32 " records",
                          record_list[record_count - 1], options->input, records_seen);
    for (size_t i = 0; i < report_rows->count; i++) {
        uint32_t named = (uint32_t)(report_rows->pairs[i] >> 32);
        if (named >= records_seen)
            return audit_fail(err, AUDIT_EDATA,
                              "%s names record %" PRIu32 ", but %s has %" PRIu32
                              " records: the report does not describe this capture",
                              options->report, named, options->input, records_seen);
    }
    return AUDIT_OK;
}

/* Adds one record to the output being written. */
static int write_record(struct output_file *out, const struct capture_record *record,
                        bool compress, struct audit_error *err)
{
    uint8_t *bytes = NULL;
    uint64_t size = 0;
    int status = capture_encode_record(record, compress, &bytes, &size, err);
    if (status == AUDIT_OK)
        status = output_file_write(out, bytes, (size_t)size, err);
    free(bytes);
    return status;
}

static int extract(const struct extract_options *options, struct audit_error *err)
{
    struct capture_reader *reader = NULL;
    struct row_pairs report_rows = { 0 };
    uint32_t *record_list = NULL, *row_list = NULL, *all_rows = NULL;
    size_t record_count = 0, row_count = 0;
    uint64_t written_records = 0, written_rows = 0;
    uint32_t records_seen = 0;
    struct output_file *out = NULL;
    int status;

    if (options->records_text &&
        (status = selection_parse_list(options->records_text, "--records", &record_list,
                                       &record_count, err)) < 0)
        return status;
    if (options->rows_text &&
        (status = selection_parse_list(options->rows_text, "--rows", &row_list, &row_count,
                                       err)) < 0)
        goto done;
    if (options->report && (status = read_report(options, &report_rows, err)) < 0)
        goto done;
    if (strcmp(options->output, "-") == 0) {
        status = audit_fail(err, AUDIT_EUSAGE, "-o: a capture is binary; give a file path, not '-'");
        goto done;
    }
    if ((status = capture_open(&reader, options->input, err)) < 0 ||
        (status = output_file_open(&out, options->output, err)) < 0)
        goto done;

    size_t pair_cursor = 0;
    for (;;) {
        struct capture_record record, extracted;
        int read = capture_read_record(reader, &record, err);
        if (read < 0) {
            status = read;
            goto done;
        }
        if (read == 0)
            break;
        records_seen = record.index + 1;
        if (options->report && (status = check_payload(options, &report_rows, &record, err)) < 0) {
            capture_record_free(&record);
            goto done;
        }
        const uint32_t *rows = NULL;
        size_t count = 0;
        bool chosen = !record_list || list_contains(record_list, record_count, record.index);
        if (options->report) {
            /* The report's pairs are sorted: this record's rows are a contiguous run. */
            while (pair_cursor < report_rows.count &&
                   (report_rows.pairs[pair_cursor] >> 32) < record.index)
                pair_cursor++;
            size_t first = pair_cursor;
            while (pair_cursor < report_rows.count &&
                   (report_rows.pairs[pair_cursor] >> 32) == record.index)
                pair_cursor++;
            count = pair_cursor - first;
            if (count && chosen) {
                free(row_list);
                row_list = malloc(count * sizeof(uint32_t));
                if (!row_list) {
                    capture_record_free(&record);
                    status = audit_fail(err, AUDIT_ENOMEM, "out of memory");
                    goto done;
                }
                for (size_t i = 0; i < count; i++)
                    row_list[i] = (uint32_t)(report_rows.pairs[first + i] & 0xFFFFFFFFu);
                rows = row_list;
            }
            chosen = chosen && count > 0;
        } else if (row_list) {
            rows = row_list;
            count = row_count;
        } else if (chosen) {
            uint32_t *grown = realloc(all_rows, (size_t)record.rows * sizeof(uint32_t));
            if (!grown) {
                capture_record_free(&record);
                status = audit_fail(err, AUDIT_ENOMEM, "out of memory");
                goto done;
            }
            all_rows = grown;
            for (uint32_t b = 0; b < record.rows; b++)
                all_rows[b] = b;
            rows = all_rows;
            count = record.rows;
        }
        if (!chosen) {
            capture_record_free(&record);
            continue;
        }
        if ((status = check_rows_exist(options, &record, rows, count, err)) < 0) {
            capture_record_free(&record);
            goto done;
        }
        status = selection_extract_rows(&record, rows, count, &extracted, err);
        if (status == AUDIT_OK) {
            free(extracted.metadata_json);
            extracted.metadata_json = NULL;
            status = provenance_metadata(&record, options, rows, count, &extracted.metadata_json,
                                         err);
        }
        if (status == AUDIT_OK)
            status = write_record(out, &extracted, options->compress, err);
        capture_record_free(&extracted);
        capture_record_free(&record);
        if (status < 0)
            goto done;
        written_records++;
        written_rows += count;
    }

    status =
        check_records_exist(options, record_list, record_count, &report_rows, records_seen, err);
    if (status < 0)
        goto done;
    if (written_records == 0) {
        status = audit_fail(err, AUDIT_EDATA, "%s: nothing to extract (no chosen record lists a "
                            "row)", options->input);
        goto done;
    }
    status = output_file_commit(out, err);
    out = NULL;
    if (status < 0)
        goto done;
    printf("extract: wrote %" PRIu64 " record%s (%" PRIu64 " rows) of %s to %s\n", written_records,
           written_records == 1 ? "" : "s", written_rows, terminal_safe(options->input),
           terminal_safe(options->output));
    status = AUDIT_OK;
done:
    output_file_discard(out);
    capture_close(reader);
    free(report_rows.pairs);
    free(report_rows.payloads);
    free(record_list);
    free(row_list);
    free(all_rows);
    return status;
}

static int run_extract(int argc, char **argv)
{
    struct extract_options options = { 0 };
    struct audit_error err = { 0 };
    int exit_code = parse_options(argc, argv, &options);
    if (exit_code == -1)
        return EXIT_AUDIT_OK; /* --help */
    if (exit_code != EXIT_AUDIT_OK)
        return exit_code;
    int status = extract(&options, &err);
    if (status < 0) {
        cli_print_message(&cmd_extract, "%s", err.message);
        return audit_exit_code(status);
    }
    return EXIT_AUDIT_OK;
}

const struct cli_command cmd_extract = {
    "extract",
    "writes a minimal reproducer: chosen rows of chosen records, or the rows a report flagged",
    extract_usage,
    run_extract,
};
