/* extract: writes a minimal reproducer: the chosen rows of the chosen records of a capture, each
 * record's metadata kept and its provenance added under "extracted_from" (docs/TRIAGE.md).
 * Rows come from --records/--rows or from a run report (--from-report): the rows that flapped
 * or were wrong there. Row copying is selection_extract_rows (src/triage/selection.c). */
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <limits.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cjson/cJSON.h>

#include "capture.h"
#include "cli.h"
#include "error.h"
#include "json_util.h"
#include "output_file.h"
#include "selection.h"

#define REPORT_SCHEMA_NAME "dsatopk-audit/report"

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
    "                        predicted_vs_observed; records are matched by \"index\" and, when\n"
    "                        the report names files, by file (path, then file name)\n"
    "  --backend NAME        with --from-report: only that backend's rows\n"
    "  --compress            zlib-compress the payloads\n"
    "  -o, --output OUT.bin  the capture file to write\n"
    "  -h, --help            show this help\n"
    "\n"
    "exit codes: 0 written; 2 usage error, including a --records or --rows number that IN.bin\n"
    "            does not have; 3 unreadable or corrupt IN.bin or report, a report naming a\n"
    "            record or row IN.bin does not have, or a report with no row to extract;\n"
    "            4 out of memory\n";

struct extract_options {
    const char *input, *output, *report, *backend;
    const char *records_text, *rows_text;
    bool compress;
};

/* (record << 32 | row) pairs, sorted: the rows a report names. */
struct row_pairs {
    uint64_t *pairs;
    size_t count, capacity;
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
    while ((option = getopt_long(argc, argv, ":ho:", long_options, NULL)) != -1) {
        switch (option) {
        case OPT_RECORDS: options->records_text = optarg; break;
        case OPT_ROWS: options->rows_text = optarg; break;
        case OPT_FROM_REPORT: options->report = optarg; break;
        case OPT_BACKEND: options->backend = optarg; break;
        case OPT_COMPRESS: options->compress = true; break;
        case 'o': options->output = optarg; break;
        case 'h': cli_print_usage(&cmd_extract, stdout); return -1;
        case ':':
            return cli_usage_error(&cmd_extract, "option '%s' needs a value", argv[optind - 1]);
        default: return cli_usage_error(&cmd_extract, "unknown option '%s'", argv[optind - 1]);
        }
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

static bool exact_u32(const cJSON *item, uint32_t *value)
{
    if (!cJSON_IsNumber(item) || !(item->valuedouble >= 0) || item->valuedouble > UINT32_MAX ||
        (double)(uint32_t)item->valuedouble != item->valuedouble)
        return false;
    *value = (uint32_t)item->valuedouble;
    return true;
}

/* Rows of one list: numbers, or objects with a "row" number. Anything else in the list is a
 * malformed report. A field that is not an array (a count) is not a list and is skipped. */
static int add_row_list(const cJSON *list, uint32_t record, const char *where,
                        struct row_pairs *pairs, struct audit_error *err)
{
    if (!cJSON_IsArray(list))
        return AUDIT_OK;
    int position = 0;
    for (const cJSON *item = list->child; item; item = item->next, position++) {
        uint32_t row;
        const cJSON *value = cJSON_IsObject(item) ? cJSON_GetObjectItemCaseSensitive(item, "row")
                                                  : item;
        if (!exact_u32(value, &row))
            return audit_fail(err, AUDIT_EDATA, "%s[%d]: not a row number", where, position);
        int status = add_pair(pairs, record, row, err);
        if (status < 0)
            return status;
    }
    return AUDIT_OK;
}

static int add_backend_rows(const cJSON *backend, uint32_t record, const char *where,
                            struct row_pairs *pairs, struct audit_error *err)
{
    static const char *const direct_lists[] = { "flapping_rows", "wrong_rows" };
    static const char *const observed_lists[] = {
        "wrong_rows", "wrong_not_predicted_overflow_list", "set_flapping_unexplained_list",
    };
    char field[512];
    int status;
    for (size_t i = 0; i < sizeof(direct_lists) / sizeof(direct_lists[0]); i++) {
        snprintf(field, sizeof(field), "%s.%s", where, direct_lists[i]);
        if ((status = add_row_list(cJSON_GetObjectItemCaseSensitive(backend, direct_lists[i]),
                                   record, field, pairs, err)) < 0)
            return status;
    }
    const cJSON *observed = cJSON_GetObjectItemCaseSensitive(backend, "predicted_vs_observed");
    for (size_t i = 0; i < sizeof(observed_lists) / sizeof(observed_lists[0]); i++) {
        snprintf(field, sizeof(field), "%s.predicted_vs_observed.%s", where, observed_lists[i]);
        if ((status = add_row_list(cJSON_GetObjectItemCaseSensitive(observed, observed_lists[i]),
                                   record, field, pairs, err)) < 0)
            return status;
    }
    const cJSON *graph = cJSON_GetObjectItemCaseSensitive(backend, "graph");
    snprintf(field, sizeof(field), "%s.graph.flapping_rows", where);
    if ((status = add_row_list(cJSON_GetObjectItemCaseSensitive(graph, "flapping_rows"), record,
                               field, pairs, err)) < 0)
        return status;
    const cJSON *batch = cJSON_GetObjectItemCaseSensitive(backend, "batch_invariance");
    snprintf(field, sizeof(field), "%s.batch_invariance.dependent_rows", where);
    return add_row_list(cJSON_GetObjectItemCaseSensitive(batch, "dependent_rows"), record, field,
                        pairs, err);
}

static int compare_u64(const void *x, const void *y)
{
    uint64_t a = *(const uint64_t *)x, b = *(const uint64_t *)y;
    return (a > b) - (a < b);
}

static const char *base_name(const char *path)
{
    const char *slash = strrchr(path, '/');
    return slash ? slash + 1 : path;
}

enum file_match { MATCH_NONE, MATCH_NAME, MATCH_EXACT };

/* How a report record's "file" relates to the input: absent or the same path (or the same
 * file once resolved) is exact; the same file name in another directory is a weaker match,
 * used only when no record matches exactly (the run may have had another working directory). */
static enum file_match match_file(const cJSON *file, const char *input, const char *input_real)
{
    if (!cJSON_IsString(file))
        return MATCH_EXACT;
    const char *path = file->valuestring;
    if (strcmp(path, input) == 0)
        return MATCH_EXACT;
    char resolved[PATH_MAX];
    if (input_real && realpath(path, resolved) && strcmp(resolved, input_real) == 0)
        return MATCH_EXACT;
    return strcmp(base_name(path), base_name(input)) == 0 ? MATCH_NAME : MATCH_NONE;
}

static int read_report(const struct extract_options *options, struct row_pairs *pairs,
                       struct audit_error *err)
{
    cJSON *report = NULL;
    char *input_real = realpath(options->input, NULL);
    const char *name_match_file = NULL;
    bool name_match_ambiguous = false, matched_any_record = false;
    int status = json_read_file(options->report, &report, err);
    if (status < 0)
        goto done;
    const cJSON *schema = cJSON_GetObjectItemCaseSensitive(report, "schema");
    if (!cJSON_IsObject(report) ||
        (schema && (!cJSON_IsString(schema) || strcmp(schema->valuestring, REPORT_SCHEMA_NAME)))) {
        status = audit_fail(err, AUDIT_EDATA, "%s: not a run report (schema is not \"%s\")",
                            options->report, REPORT_SCHEMA_NAME);
        goto done;
    }
    if (!schema)
        fprintf(stderr, "dsatopk-audit extract: %s: no \"schema\" field; reading it as a run "
                "report\n", options->report);
    const cJSON *records = cJSON_GetObjectItemCaseSensitive(report, "records");
    if (!cJSON_IsArray(records)) {
        status = audit_fail(err, AUDIT_EDATA, "%s: no \"records\" array", options->report);
        goto done;
    }
    /* Two passes: exact file matches first; file-name matches only if there were none. */
    for (enum file_match wanted = MATCH_EXACT; wanted >= MATCH_NAME && pairs->count == 0;
         wanted--) {
        bool any_record = false;
        int position = 0;
        for (const cJSON *entry = records->child; entry; entry = entry->next, position++) {
            const cJSON *file = cJSON_GetObjectItemCaseSensitive(entry, "file");
            if (match_file(file, options->input, input_real) != wanted)
                continue;
            if (wanted == MATCH_NAME) {
                if (name_match_file && strcmp(name_match_file, file->valuestring) != 0)
                    name_match_ambiguous = true;
                name_match_file = file->valuestring;
            }
            uint32_t index;
            if (!exact_u32(cJSON_GetObjectItemCaseSensitive(entry, "index"), &index)) {
                status = audit_fail(err, AUDIT_EDATA, "%s: records[%d]: no record \"index\"",
                                    options->report, position);
                goto done;
            }
            any_record = true;
            matched_any_record = true;
            const cJSON *backends = cJSON_GetObjectItemCaseSensitive(entry, "backends");
            int backend_position = 0;
            for (const cJSON *backend = backends ? backends->child : NULL; backend;
                 backend = backend->next, backend_position++) {
                const char *name = cJSON_GetStringValue(
                    cJSON_GetObjectItemCaseSensitive(backend, "name"));
                if (options->backend && (!name || strcmp(name, options->backend) != 0))
                    continue;
                char where[256];
                snprintf(where, sizeof(where), "%s: records[%d].backends[%d]", options->report,
                         position, backend_position);
                if ((status = add_backend_rows(backend, index, where, pairs, err)) < 0)
                    goto done;
            }
        }
        if (any_record && pairs->count == 0)
            break; /* the input's records are in the report; they just list no row */
        if (wanted == MATCH_NAME && name_match_ambiguous) {
            status = audit_fail(err, AUDIT_EDATA, "%s: no record names %s exactly and several "
                                "files share its name: run extract from the directory `run` was "
                                "started in", options->report, options->input);
            goto done;
        }
    }
    if (!matched_any_record) {
        const cJSON *first_file =
            records->child ? cJSON_GetObjectItemCaseSensitive(records->child, "file") : NULL;
        status = audit_fail(err, AUDIT_EDATA, "%s has no record of %s (its first record is of %s): "
                            "nothing to extract", options->report, options->input,
                            cJSON_IsString(first_file) ? first_file->valuestring : "no file");
        goto done;
    }
    if (pairs->count == 0) {
        status = audit_fail(err, AUDIT_EDATA, "%s lists no flapping or wrong row%s%s for %s: "
                            "nothing to extract", options->report,
                            options->backend ? " of backend " : "",
                            options->backend ? options->backend : "", options->input);
        goto done;
    }
    if (pairs->count > 1) {
        /* Sort and drop duplicates (a row can flap on several backends). */
        uint64_t *p = pairs->pairs;
        qsort(p, pairs->count, sizeof(uint64_t), compare_u64);
        size_t kept = 1;
        for (size_t i = 1; i < pairs->count; i++)
            if (p[i] != p[kept - 1])
                p[kept++] = p[i];
        pairs->count = kept;
    }
done:
    free(input_real);
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
    cJSON *row_list = provenance ? cJSON_AddArrayToObject(provenance, "rows") : NULL;
    if (!row_list)
        goto out_of_memory;
    cJSON_AddStringToObject(provenance, "file", options->input);
    json_add_u64(provenance, "record", source->index);
    for (size_t i = 0; i < count; i++)
        cJSON_AddItemToArray(row_list, cJSON_CreateNumber(rows[i]));
    json_add_hex(provenance, "payload_sha256", source->payload_sha256,
                 sizeof(source->payload_sha256));
    if (options->report)
        cJSON_AddStringToObject(provenance, "report", options->report);
    if (options->backend)
        cJSON_AddStringToObject(provenance, "backend", options->backend);
    cJSON *previous = cJSON_DetachItemFromObjectCaseSensitive(metadata, "extracted_from");
    if (previous)
        cJSON_AddItemToObject(provenance, "previous", previous);
    cJSON_AddItemToObject(metadata, "extracted_from", provenance);
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
        for (size_t i = 0; i < count; i++) {
            if (rows[i] < record.rows)
                continue;
            if (options->report)
                status = audit_fail(err, AUDIT_EDATA, "%s names row %" PRIu32 " of record %"
                                    PRIu32 ", but that record of %s has %" PRIu32 " rows: the "
                                    "report does not describe this capture", options->report,
                                    rows[i], record.index, options->input, record.rows);
            else
                status = audit_fail(err, AUDIT_EUSAGE, "--rows: row %" PRIu32 " is out of range: "
                                    "record %" PRIu32 " of %s has %" PRIu32 " rows", rows[i],
                                    record.index, options->input, record.rows);
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

    /* Every record asked for must exist. */
    if (record_list && record_list[record_count - 1] >= records_seen) {
        status = audit_fail(err, AUDIT_EUSAGE, "--records: record %" PRIu32 " is out of range: %s "
                            "has %" PRIu32 " records", record_list[record_count - 1],
                            options->input, records_seen);
        goto done;
    }
    for (size_t i = 0; i < report_rows.count; i++) {
        uint32_t named = (uint32_t)(report_rows.pairs[i] >> 32);
        if (named < records_seen)
            continue;
        status = audit_fail(err, AUDIT_EDATA, "%s names record %" PRIu32 ", but %s has %" PRIu32
                            " records: the report does not describe this capture",
                            options->report, named, options->input, records_seen);
        goto done;
    }
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
           written_records == 1 ? "" : "s", written_rows, options->input, options->output);
    status = AUDIT_OK;
done:
    output_file_discard(out);
    capture_close(reader);
    free(report_rows.pairs);
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
        fprintf(stderr, "dsatopk-audit extract: %s\n", err.message);
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
