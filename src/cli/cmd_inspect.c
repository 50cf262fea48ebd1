/* inspect: lists the records of capture files and checks every header CRC-32 and payload
 * SHA-256 on the way. One data model (a cJSON document, schema "dsatopk-audit/inspect"
 * version 1, docs/FORMAT.md "Inspecting captures") is rendered either as JSON or as a table. */
#include <getopt.h>
#include <inttypes.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cjson/cJSON.h>

#include "capture.h"
#include "capture_tail.h"
#include "cli.h"
#include "error.h"
#include "hash.h"
#include "input_file.h"
#include "json_util.h"

#define INSPECT_SCHEMA "dsatopk-audit/inspect"
#define INSPECT_SCHEMA_VERSION 1
#define RECORD_HEADER_BYTES 72
#define PAYLOAD_FIXED_PART_BYTES 64
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
    "  --format FORMAT     table (default) or json (schema dsatopk-audit/inspect, version 1)\n"
    "  -o, --output FILE   write the listing to FILE (atomically) instead of stdout\n"
    "  -h, --help          show this help\n"
    "\n"
    "exit codes: 0 ok (truncated or corrupt files too, unless --verify); 2 usage error;\n"
    "            3 a file is missing, unreadable or not a regular file, or with --verify\n"
    "            truncated or corrupt; 4 out of memory, or a record over the memory cap\n";

enum output_format { FORMAT_TABLE, FORMAT_JSON };

struct inspect_options {
    bool verify;
    enum output_format format;
    const char *output_path; /* "-": stdout */
};

/* What the reading of all files found, for the summary and the exit status. */
struct inspect_totals {
    uint64_t files, records;
    uint64_t truncated_files, corrupt_files, too_large_files, unreadable_files;
    uint64_t out_of_memory_files;
    bool out_of_memory; /* the listing itself ran out of memory */
};

/* The exact raw payload size of a validated record (docs/FORMAT.md "Raw payload"). */
static uint64_t raw_payload_bytes(const struct capture_record *record)
{
    uint64_t words_per_row = 1 + record->row_stride;
    if (record->row_starts)
        words_per_row += 1;
    if (record->page_size)
        words_per_row += 1 + record->page_table_cols;
    if (record->engine_indices)
        words_per_row += record->k;
    return PAYLOAD_FIXED_PART_BYTES + strlen(record->metadata_json) +
           4 * (uint64_t)record->rows * words_per_row;
}

static cJSON *describe_record(const struct capture_record *record)
{
    cJSON *item = cJSON_CreateObject();
    if (!item)
        return NULL;
    int32_t length_min = record->lengths[0], length_max = record->lengths[0];
    for (uint32_t b = 1; b < record->rows; b++) {
        if (record->lengths[b] < length_min)
            length_min = record->lengths[b];
        if (record->lengths[b] > length_max)
            length_max = record->lengths[b];
    }
    json_add_u64(item, "index", record->index);
    json_add_u64(item, "offset_bytes", record->file_offset);
    json_add_u64(item, "rows", record->rows);
    json_add_u64(item, "k", record->k);
    json_add_u64(item, "row_stride", record->row_stride);
    cJSON_AddNumberToObject(item, "length_min", length_min);
    cJSON_AddNumberToObject(item, "length_max", length_max);
    cJSON_AddBoolToObject(item, "row_starts", record->row_starts != NULL);
    cJSON_AddBoolToObject(item, "page_table", record->page_size != 0);
    json_add_u64(item, "page_size", record->page_size);
    json_add_u64(item, "page_table_cols", record->page_table_cols);
    cJSON_AddBoolToObject(item, "engine_indices", record->engine_indices != NULL);
    cJSON_AddBoolToObject(item, "compressed", record->compressed);
    json_add_u64(item, "stored_bytes", record->stored_payload_bytes);
    json_add_u64(item, "raw_bytes", raw_payload_bytes(record));
    json_add_hex(item, "payload_sha256", record->payload_sha256, sizeof(record->payload_sha256));
    cJSON *metadata = cJSON_Parse(record->metadata_json);
    if (metadata)
        cJSON_AddItemToObject(item, "metadata", metadata);
    else
        cJSON_AddStringToObject(item, "metadata", record->metadata_json);
    cJSON_AddStringToObject(item, "checksum", "ok");
    return item;
}

/* 'PATH' for a shell command line. */
static char *shell_quoted(const char *path)
{
    size_t size = 3;
    for (const char *p = path; *p; p++)
        size += *p == '\'' ? 4 : 1;
    char *quoted = malloc(size);
    if (!quoted)
        return NULL;
    char *out = quoted;
    *out++ = '\'';
    for (const char *p = path; *p; p++) {
        if (*p == '\'') {
            memcpy(out, "'\\''", 4);
            out += 4;
        } else {
            *out++ = *p;
        }
    }
    *out++ = '\'';
    *out = '\0';
    return quoted;
}

/* The repair of a file whose reading stopped at byte damage, after intact records: cut it back
 * there when no complete record lies past the damage, else cut the damaged bytes out (a record
 * appended behind a torn one, records behind a corrupt one). Never cuts a complete record. Adds
 * "repair" and "complete_record_after_bytes" to error and prints the advice. */
static void advise_repair(const char *path, uint32_t intact_records, uint64_t damage,
                          bool truncated, cJSON *error)
{
    struct audit_error err = { 0 };
    uint64_t size = 0, after = 0;
    bool found = false;
    int fd = -1;
    char *quoted = shell_quoted(path);
    char *advice = NULL;
    if (!quoted || input_file_open(path, &fd, &size, &err) < 0 ||
        capture_find_complete_record(fd, path, damage, size, &found, &after, &err) < 0) {
        if (err.message[0])
            fprintf(stderr, "dsatopk-audit inspect: no repair advice: %s\n", err.message);
        goto done;
    }
    if (found) {
        if (asprintf(&advice, "tail -c +%" PRIu64 " %s >%s.rest && truncate -s %" PRIu64
                     " %s && cat %s.rest >>%s && rm %s.rest", after + 1, quoted, quoted, damage,
                     quoted, quoted, quoted, quoted) < 0)
            advice = NULL;
        fprintf(stderr, "dsatopk-audit inspect: %s: a complete record starts at byte %" PRIu64
                " past the damage at byte %" PRIu64 ", so cutting the file back would lose it; "
                "cut bytes %" PRIu64 "..%" PRIu64 " out instead: %s\n", path, after, damage,
                damage, after - 1, advice ? advice : "(out of memory)");
    } else if (intact_records > 0 || truncated) {
        if (asprintf(&advice, "truncate -s %" PRIu64 " %s", damage, quoted) < 0)
            advice = NULL;
        fprintf(stderr, "dsatopk-audit inspect: %s: %" PRIu32 " intact record%s end at byte %"
                PRIu64 " and no complete record follows; `%s` keeps them (so does the next "
                "synth/import --append --repair-tail)\n", path, intact_records,
                intact_records == 1 ? "" : "s", damage, advice ? advice : "(out of memory)");
    }
done:
    if (advice)
        cJSON_AddStringToObject(error, "repair", advice);
    else
        cJSON_AddNullToObject(error, "repair");
    if (found)
        json_add_u64(error, "complete_record_after_bytes", after);
    else
        cJSON_AddNullToObject(error, "complete_record_after_bytes");
    if (fd >= 0)
        close(fd);
    free(advice);
    free(quoted);
}

/* The file status of a reading that stopped with status, and its count in the totals. */
static const char *stop_status(int status, const struct capture_reader *reader,
                               struct inspect_totals *totals)
{
    enum capture_read_state state = reader ? capture_reader_state(reader) : CAPTURE_READ_OK;
    if (status == AUDIT_EDATA && state == CAPTURE_READ_TRUNCATED) {
        totals->truncated_files++;
        return "truncated";
    }
    if (status == AUDIT_EDATA && state == CAPTURE_READ_CORRUPT) {
        totals->corrupt_files++;
        return "corrupt";
    }
    if (status == AUDIT_ENOMEM && state == CAPTURE_READ_TOO_LARGE) {
        totals->too_large_files++;
        return "too_large";
    }
    if (status == AUDIT_ENOMEM) {
        totals->out_of_memory_files++;
        return "out_of_memory";
    }
    totals->unreadable_files++;
    return "unreadable";
}

/* Reads one file into a JSON description; problems also go to stderr as they are found. */
static cJSON *inspect_file(const char *path, struct inspect_totals *totals)
{
    struct capture_reader *reader = NULL;
    struct audit_error err = { 0 };
    struct stat info;
    uint32_t next_index = 0;
    uint64_t next_offset = 0;
    int status;
    cJSON *file = cJSON_CreateObject();
    cJSON *records = cJSON_CreateArray();
    if (!file || !records) {
        cJSON_Delete(file);
        cJSON_Delete(records);
        totals->out_of_memory = true;
        return NULL;
    }
    totals->files++;
    cJSON_AddStringToObject(file, "path", path);
    if (stat(path, &info) == 0 && S_ISREG(info.st_mode))
        json_add_u64(file, "size_bytes", (uint64_t)info.st_size);
    else
        cJSON_AddNullToObject(file, "size_bytes");

    status = capture_open(&reader, path, &err);
    while (status == AUDIT_OK) {
        struct capture_record record;
        int result = capture_read_record(reader, &record, &err);
        if (result <= 0) {
            status = result;
            break;
        }
        cJSON *item = describe_record(&record);
        next_index = record.index + 1;
        next_offset = record.file_offset + RECORD_HEADER_BYTES + record.stored_payload_bytes;
        capture_record_free(&record);
        if (!item) {
            status = AUDIT_ENOMEM;
            snprintf(err.message, sizeof(err.message), "%s: out of memory listing records", path);
            break;
        }
        cJSON_AddItemToArray(records, item);
        totals->records++;
    }

    const char *file_status = status < 0 ? stop_status(status, reader, totals) : "ok";
    if (status < 0)
        fprintf(stderr, "dsatopk-audit inspect: %s\n", err.message);
    cJSON_AddStringToObject(file, "status", file_status);
    json_add_u64(file, "record_count", (uint64_t)cJSON_GetArraySize(records));
    if (status < 0) {
        cJSON *error = cJSON_AddObjectToObject(file, "error");
        if (error) {
            bool reached_records = reader != NULL;
            if (reached_records) {
                json_add_u64(error, "record", next_index);
                json_add_u64(error, "offset_bytes", next_offset);
            }
            cJSON_AddStringToObject(error, "kind", file_status);
            cJSON_AddStringToObject(error, "message", err.message);
            if (status == AUDIT_EDATA && reached_records)
                advise_repair(path, next_index, next_offset,
                              strcmp(file_status, "truncated") == 0, error);
        }
    } else {
        cJSON_AddNullToObject(file, "error");
    }
    cJSON_AddItemToObject(file, "records", records);
    capture_close(reader);
    return file;
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
    if (bool_field(record, "row_starts"))
        used += (size_t)snprintf(text + used, size - used, "row_starts,");
    if (bool_field(record, "page_table"))
        used += (size_t)snprintf(text + used, size - used, "page_table/%.0f,",
                                 number_field(record, "page_size"));
    if (bool_field(record, "engine_indices"))
        used += (size_t)snprintf(text + used, size - used, "engine_indices,");
    if (bool_field(record, "compressed"))
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

    char *metadata = cJSON_PrintUnformatted(cJSON_GetObjectItemCaseSensitive(record, "metadata"));
    const char *shown = metadata ? metadata : "?";
    int shown_chars = (int)strlen(shown);
    const char *ellipsis = "";
    if (shown_chars > TABLE_METADATA_CHARS) {
        shown_chars = TABLE_METADATA_CHARS;
        ellipsis = "...";
    }
    fprintf(out, "%6.0f %12.0f %8.0f %7.0f %10.0f %-17s %-*s %12.0f %12.0f %-9s %s %.*s%s\n",
            number_field(record, "index"), number_field(record, "offset_bytes"),
            number_field(record, "rows"), number_field(record, "k"),
            number_field(record, "row_stride"), length_range, sections_width, sections,
            number_field(record, "stored_bytes"), number_field(record, "raw_bytes"),
            string_field(record, "checksum"), string_field(record, "payload_sha256"), shown_chars,
            shown, ellipsis);
    cJSON_free(metadata);
}

static void print_table(FILE *out, const cJSON *document)
{
    const cJSON *file;
    cJSON_ArrayForEach(file, cJSON_GetObjectItemCaseSensitive(document, "files")) {
        const cJSON *records = cJSON_GetObjectItemCaseSensitive(file, "records");
        const cJSON *error = cJSON_GetObjectItemCaseSensitive(file, "error");
        const cJSON *record;
        const char *status = string_field(file, "status");
        int record_count = cJSON_GetArraySize(records);
        fprintf(out, "# %s: %d record%s", string_field(file, "path"), record_count,
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
        bool error_has_record = cJSON_GetObjectItemCaseSensitive(error, "record") != NULL;
        if (error_has_record || record_count > 0)
            print_table_header(out, sections_width);
        cJSON_ArrayForEach(record, records) print_table_record(out, record, sections_width);
        if (error_has_record)
            fprintf(out, "%6.0f %12.0f %8s %7s %10s %-17s %-*s %12s %12s %-9s %s\n",
                    number_field(error, "record"), number_field(error, "offset_bytes"), "-", "-",
                    "-", "-", sections_width, "-", "-", "-", status,
                    string_field(error, "message"));
        else if (cJSON_IsObject(error))
            fprintf(out, "# %s\n", string_field(error, "message"));
    }
    const cJSON *summary = cJSON_GetObjectItemCaseSensitive(document, "summary");
    fprintf(out, "# files: %.0f, records: %.0f, truncated: %.0f, corrupt: %.0f, too large: %.0f, "
            "unreadable: %.0f, out of memory: %.0f\n",
            number_field(summary, "files"), number_field(summary, "records"),
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
    while ((option = getopt_long(argc, argv, ":ho:", long_options, NULL)) != -1) {
        switch (option) {
        case 'v': options->verify = true; break;
        case 'f':
            if (strcmp(optarg, "table") == 0)
                options->format = FORMAT_TABLE;
            else if (strcmp(optarg, "json") == 0)
                options->format = FORMAT_JSON;
            else
                return cli_usage_error(&cmd_inspect, "--format: '%s' is not table or json", optarg);
            break;
        case 'o': options->output_path = optarg; break;
        case 'h': cli_print_usage(&cmd_inspect, stdout); return -1;
        case ':':
            return cli_usage_error(&cmd_inspect, "option '%s' needs a value", argv[optind - 1]);
        default:
            return cli_usage_error(&cmd_inspect, "unknown option '%s'", argv[optind - 1]);
        }
    }
    if (optind >= argc)
        return cli_usage_error(&cmd_inspect, "no capture file given");
    return EXIT_AUDIT_OK;
}

static int run_inspect(int argc, char **argv)
{
    struct inspect_options options = { .format = FORMAT_TABLE, .output_path = "-" };
    struct inspect_totals totals = { 0 };
    struct audit_error err = { 0 };
    char *text = NULL;
    int exit_code = parse_options(argc, argv, &options);
    if (exit_code == -1)
        return EXIT_AUDIT_OK; /* --help */
    if (exit_code != EXIT_AUDIT_OK)
        return exit_code;

    cJSON *document = cJSON_CreateObject();
    if (!document)
        goto out_of_memory;
    cJSON_AddStringToObject(document, "schema", INSPECT_SCHEMA);
    cJSON_AddNumberToObject(document, "version", INSPECT_SCHEMA_VERSION);
    cJSON_AddStringToObject(document, "tool_version", cli_version());
    cJSON *files = cJSON_AddArrayToObject(document, "files");
    if (!files)
        goto out_of_memory;
    for (int i = optind; i < argc; i++) {
        cJSON *file = inspect_file(argv[i], &totals);
        if (!file)
            goto out_of_memory;
        cJSON_AddItemToArray(files, file);
    }
    cJSON *summary = cJSON_AddObjectToObject(document, "summary");
    if (!summary)
        goto out_of_memory;
    json_add_u64(summary, "files", totals.files);
    json_add_u64(summary, "records", totals.records);
    json_add_u64(summary, "truncated_files", totals.truncated_files);
    json_add_u64(summary, "corrupt_files", totals.corrupt_files);
    json_add_u64(summary, "too_large_files", totals.too_large_files);
    json_add_u64(summary, "unreadable_files", totals.unreadable_files);
    json_add_u64(summary, "out_of_memory_files", totals.out_of_memory_files);

    text = json_render(document, options.format == FORMAT_JSON ? NULL : print_table);
    if (!text)
        goto out_of_memory;
    if (json_write_text_atomic(options.output_path, text, &err) != AUDIT_OK) {
        fprintf(stderr, "dsatopk-audit inspect: %s\n", err.message);
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
    fprintf(stderr, "dsatopk-audit inspect: out of memory\n");
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
