/* inspect: lists the records of capture files and checks every header CRC-32 and payload
 * SHA-256 on the way. One data model (a cJSON document, schema "dsatopk-audit/inspect",
 * docs/FORMAT.md "Inspecting captures", built by src/capture/inspect_json.c) is rendered either
 * as JSON or as a table; this file parses the options, says where a file ends early and
 * prints. */
#include <getopt.h>
#include <inttypes.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "cli.h"
#include "document_context.h"
#include "error.h"
#include "inspect_json.h"
#include "json_util.h"
#include "terminal_text.h"

/* The table shortens metadata past this many characters; the JSON keeps it whole. */
#define TABLE_METADATA_CHARS 160

static const char inspect_usage[] =
    "usage: dsatopk-audit inspect [--verify] [--format table|json] [-o FILE] FILE...\n"
    "\n"
    "Lists every record of each capture file: index, byte offset, rows, k, row stride, window\n"
    "lengths (min..max), optional sections (row_starts, page_table/PAGE_SIZE, engine_indices,\n"
    "zlib), stored and raw payload bytes, the payload SHA-256, metadata and checksum status.\n"
    "Each record's header CRC-32 and payload SHA-256 are checked while it is read.\n"
    "\n"
    "A file that ends in a truncated record (a writer killed mid-append) or a corrupt one is\n"
    "reported on stderr with the record index and byte offset; the records before it are listed,\n"
    "with the repair: cutting the file back to them when no complete record lies past the\n"
    "damage, else cutting the damaged bytes out (the advice never drops a complete record).\n"
    "A record whose raw payload is over the memory cap (dsatopk-audit --max-record-bytes,\n"
    "default 8G) is reported too_large without being read.\n"
    "\n"
    "options:\n"
    "  --verify            exit 3 when any file ends in a truncated or corrupt record\n"
    "  --format FORMAT     table (default) or json (schema dsatopk-audit/inspect, version 2)\n"
    "  -o, --output FILE   write the listing to FILE (atomically) instead of stdout\n"
    "  -h, --help          show this help\n"
    "\n"
    "exit codes: 0 ok (truncated or corrupt files too, unless --verify); 2 usage error;\n"
    "            3 a file is missing, unreadable or not a regular file, or with --verify\n"
    "            truncated or corrupt; 4 out of memory, or a record over the memory cap\n";


struct inspect_options {
    bool verify;
    enum cli_format format;
    const char *output_path; /* "-": stdout */
};

/* Reads one file into the document and says on stderr where it ended early. Returns 0 or
 * AUDIT_ENOMEM. */
static int inspect_file(cJSON *document, const char *path, struct inspect_totals *totals)
{
    struct inspect_file_outcome outcome;
    if (inspect_json_add_file(document, path, totals, &outcome) < 0)
        return AUDIT_ENOMEM;
    if (outcome.status == AUDIT_OK)
        return AUDIT_OK;
    cli_print_message(&cmd_inspect, "%s", outcome.message);
    if (outcome.complete_record_after)
        cli_print_message(&cmd_inspect,
                          "%s: a complete record starts at byte %" PRIu64
                          " past the damage at byte %" PRIu64
                          ", so cutting the file back would lose it; "
                          "cut bytes %" PRIu64 "..%" PRIu64 " out instead: %s",
                          path, outcome.complete_record_offset, outcome.next_offset,
                          outcome.next_offset, outcome.complete_record_offset - 1, outcome.repair);
    else if (outcome.repair[0])
        cli_print_message(&cmd_inspect,
                          "%s: %" PRIu32 " intact record%s end at byte %" PRIu64
                          " and no complete record follows; `%s` keeps them (so does the next "
                          "synth/import --append --repair-tail)",
                          path, outcome.next_record, outcome.next_record == 1 ? "" : "s",
                          outcome.next_offset, outcome.repair);
    return AUDIT_OK;
}

static double number_field(const cJSON *object, const char *name)
{
    const cJSON *item = cJSON_GetObjectItemCaseSensitive(object, name);
    return cJSON_IsNumber(item) ? item->valuedouble : 0.0;
}

static bool bool_field(const cJSON *object, const char *name)
{
    return cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(object, name));
}

static const char *string_field(const cJSON *object, const char *name)
{
    const char *text = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(object, name));
    return text ? text : "";
}

/* "row_starts,page_table/64,engine_indices,zlib", or "-" for a record with none. */
static void format_sections(const cJSON *record, char *text, size_t size)
{
    size_t used = 0;
    text[0] = '\0';
    if (bool_field(record, KEY_ROW_STARTS))
        used += (size_t)snprintf(text + used, size - used, "row_starts,");
    if (bool_field(record, KEY_PAGE_TABLE))
        used += (size_t)snprintf(text + used, size - used, "page_table/%.0f,",
                                 number_field(record, KEY_PAGE_SIZE));
    if (bool_field(record, KEY_ENGINE_INDICES))
        used += (size_t)snprintf(text + used, size - used, "engine_indices,");
    if (bool_field(record, KEY_COMPRESSED))
        used += (size_t)snprintf(text + used, size - used, "zlib,");
    if (used > 0)
        text[used - 1] = '\0';
    else
        snprintf(text, size, "-");
}

#define SECTIONS_TEXT_BYTES 96

static void print_table_header(FILE *out, int sections_width)
{
    fprintf(out, "%6s %12s %8s %7s %10s %-17s %-*s %12s %12s %-9s %-64s %s\n", "record", "offset",
            "rows", "k", "stride", "length", sections_width, "sections", "stored", "raw",
            "checksum", "payload_sha256", "metadata");
}

static void print_table_record(FILE *out, const cJSON *record, int sections_width)
{
    char sections[SECTIONS_TEXT_BYTES];
    char length_range[48];
    format_sections(record, sections, sizeof(sections));
    snprintf(length_range, sizeof(length_range), "%.0f..%.0f", number_field(record, "length_min"),
             number_field(record, "length_max"));

    char *metadata = cJSON_PrintUnformatted(cJSON_GetObjectItemCaseSensitive(record, KEY_METADATA));
    const char *ellipsis = "";
    if (metadata && strlen(metadata) > TABLE_METADATA_CHARS) {
        metadata[TABLE_METADATA_CHARS] = '\0';
        ellipsis = "...";
    }
    fprintf(out, "%6.0f %12.0f %8.0f %7.0f %10.0f %-17s %-*s %12.0f %12.0f %-9s %s %s%s\n",
            number_field(record, KEY_INDEX), number_field(record, "offset_bytes"),
            number_field(record, KEY_ROWS), number_field(record, KEY_K),
            number_field(record, KEY_ROW_STRIDE), length_range, sections_width, sections,
            number_field(record, "stored_bytes"), number_field(record, "raw_bytes"),
            string_field(record, "checksum"), string_field(record, KEY_PAYLOAD_SHA256),
            metadata ? terminal_safe(metadata) : "?", ellipsis);
    cJSON_free(metadata);
}

static void print_table(FILE *out, const cJSON *document)
{
    const cJSON *file;
    cJSON_ArrayForEach(file, cJSON_GetObjectItemCaseSensitive(document, "files")) {
        const cJSON *records = cJSON_GetObjectItemCaseSensitive(file, KEY_RECORDS);
        const cJSON *error = cJSON_GetObjectItemCaseSensitive(file, KEY_ERROR);
        const cJSON *record;
        const char *status = string_field(file, KEY_STATUS);
        int record_count = cJSON_GetArraySize(records);
        fprintf(out, "# %s: %d record%s", terminal_safe(string_field(file, KEY_PATH)), record_count,
                record_count == 1 ? "" : "s");
        if (cJSON_IsNumber(cJSON_GetObjectItemCaseSensitive(file, "size_bytes")))
            fprintf(out, ", %.0f bytes", number_field(file, "size_bytes"));
        fprintf(out, ", %s\n", status);

        /* The sections column is as wide as this file's widest entry. */
        int sections_width = (int)strlen("sections");
        cJSON_ArrayForEach(record, records) {
            char sections[SECTIONS_TEXT_BYTES];
            format_sections(record, sections, sizeof(sections));
            if ((int)strlen(sections) > sections_width)
                sections_width = (int)strlen(sections);
        }
        bool error_has_record = cJSON_GetObjectItemCaseSensitive(error, KEY_RECORD) != NULL;
        if (error_has_record || record_count > 0)
            print_table_header(out, sections_width);
        cJSON_ArrayForEach(record, records) print_table_record(out, record, sections_width);
        if (error_has_record)
            fprintf(out, "%6.0f %12.0f %8s %7s %10s %-17s %-*s %12s %12s %-9s %s\n",
                    number_field(error, KEY_RECORD), number_field(error, "offset_bytes"), "-", "-",
                    "-", "-", sections_width, "-", "-", "-", status,
                    terminal_safe(string_field(error, KEY_MESSAGE)));
        else if (cJSON_IsObject(error))
            fprintf(out, "# %s\n", terminal_safe(string_field(error, KEY_MESSAGE)));
    }
    const cJSON *summary = cJSON_GetObjectItemCaseSensitive(document, KEY_SUMMARY);
    fprintf(out, "# files: %.0f, records: %.0f, truncated: %.0f, corrupt: %.0f, too large: %.0f, "
            "unreadable: %.0f, out of memory: %.0f\n",
            number_field(summary, "files"), number_field(summary, KEY_RECORDS),
            number_field(summary, "truncated_files"), number_field(summary, "corrupt_files"),
            number_field(summary, "too_large_files"), number_field(summary, "unreadable_files"),
            number_field(summary, "out_of_memory_files"));
}

static int parse_options(int argc, char **argv, struct inspect_options *options)
{
    static const struct option long_options[] = {
        { "verify", no_argument, NULL, 'v' },
        { "format", required_argument, NULL, 'f' },
        { "output", required_argument, NULL, 'o' },
        { "help", no_argument, NULL, 'h' },
        { NULL, 0, NULL, 0 },
    };
    int option;
    opterr = 0; /* messages come from cli_usage_error */
    bool help = false;
    while ((option = getopt_long(argc, argv, ":ho:", long_options, NULL)) != -1) {
        switch (option) {
        case 'v': options->verify = true; break;
        case 'f':
            if (cli_parse_format(&cmd_inspect, optarg, &options->format) != 0)
                return EXIT_USAGE;
            break;
        case 'o': options->output_path = optarg; break;
        case 'h': help = true; break;
        default: return cli_option_error(&cmd_inspect, option, argv);
        }
    }
    if (help) {
        cli_print_usage(&cmd_inspect, stdout);
        return -1;
    }
    if (optind >= argc)
        return cli_usage_error(&cmd_inspect, "no capture file given");
    return EXIT_AUDIT_OK;
}

static int run_inspect(int argc, char **argv)
{
    struct inspect_options options = { .format = CLI_FORMAT_TABLE, .output_path = "-" };
    struct inspect_totals totals = { 0 };
    struct audit_error err = { 0 };
    char *text = NULL;
    cJSON *document = NULL;
    int exit_code = parse_options(argc, argv, &options);
    if (exit_code == -1)
        return EXIT_AUDIT_OK; /* --help */
    if (exit_code != EXIT_AUDIT_OK)
        return exit_code;

    struct document_context context;
    document_context_fill(&context, cli_version(), cli_command_line());
    document = inspect_json_begin(&context);
    if (!document)
        goto out_of_memory;
    for (int i = optind; i < argc; i++)
        if (inspect_file(document, argv[i], &totals) < 0)
            goto out_of_memory;
    if (inspect_json_finish(document, &totals) < 0)
        goto out_of_memory;

    text = json_render(document, options.format == CLI_FORMAT_JSON ? NULL : print_table);
    if (!text)
        goto out_of_memory;
    if (json_write_text_atomic(options.output_path, text, &err) != AUDIT_OK) {
        cli_print_message(&cmd_inspect, "%s", err.message);
        exit_code = audit_exit_code(err.code);
        goto done;
    }
    if (totals.out_of_memory || totals.out_of_memory_files + totals.too_large_files > 0)
        exit_code = EXIT_DEVICE;
    else if (totals.unreadable_files > 0 ||
             (options.verify && totals.truncated_files + totals.corrupt_files > 0))
        exit_code = EXIT_BAD_INPUT;
    else
        exit_code = EXIT_AUDIT_OK;
    goto done;
out_of_memory:
    cli_print_message(&cmd_inspect, "out of memory");
    exit_code = EXIT_DEVICE;
done:
    free(text);
    cJSON_Delete(document);
    return exit_code;
}

const struct cli_command cmd_inspect = {
    .name = "inspect",
    .summary = "list the records of capture files and verify their checksums",
    .usage = inspect_usage,
    .run = run_inspect,
};
