/* import: builds one capture record from .npy / .safetensors arrays (docs/TRIAGE.md "import").
 * The arrays are read by src/capture/npy.c and src/capture/safetensors.c, checked against each other here
 * (shapes, windows inside the rows), converted exactly to the capture's fp32 / int32, and the
 * record is checked once more by capture_record_validate before it is written. */
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
#include "capture_tail.h"
#include "cli.h"
#include "document_keys.h"
#include "engine_check.h"
#include "error.h"
#include "json_strict.h"
#include "json_util.h"
#include "npy.h"
#include "safetensors.h"
#include "terminal_text.h"

static const char import_usage[] =
    "usage: dsatopk-audit import --scores FILE --k K -o OUT.bin [options]\n"
    "\n"
    "Builds one capture record from array files and writes it to OUT.bin (replacing it whole\n"
    "once written, its mode kept) or appends it (--append: under a lock, after checking that\n"
    "OUT.bin ends in a complete record). Each FILE is a .npy file (format 1.0, 2.0 or 3.0,\n"
    "C order, little-endian) or a .safetensors file, written FILE:TENSOR to pick a tensor\n"
    "(FILE alone when it holds exactly one). The format is recognised by the file's content.\n"
    "\n"
    "arrays:\n"
    "  --scores FILE                 (B, L) float32; float16 / bfloat16 widened exactly\n"
    "  --lengths FILE                (B,) int32/int64 window lengths (default: L for every row)\n"
    "  --row-starts FILE             (B,) int32/int64 window starts within each row\n"
    "  --page-table FILE             (B, C) int32/int64 page table (needs --page-size)\n"
    "  --page-size P                 page size, a power of two\n"
    "  --page-table-row-starts FILE  (B,) first page-table column of each row\n"
    "  --engine-indices FILE         (B, K) int32/int64: what the serving kernel selected\n"
    "options:\n"
    "  --k K                         the call's k (required)\n"
    "  --metadata JSON               a JSON object (or @FILE holding one) stored with the record;\n"
    "                                \"imported_from\" (paths, tensors, dtypes, shapes, SHA-256\n"
    "                                of every input file) is added to it; a \"contract\"\n"
    "                                ({\"order\": ..., \"tie_break\": ...}, docs/FORMAT.md) is\n"
    "                                checked\n"
    "  --compress                    zlib-compress the payload\n"
    "  --append                      append to OUT.bin instead of replacing it\n"
    "  --repair-tail                 with --append: first cut a torn or corrupt last record\n"
    "                                off OUT.bin (refused when a complete record lies past it)\n"
    "  -o, --output OUT.bin          the capture file to write\n"
    "  -h, --help                    show this help\n"
    "\n"
    "exit codes: 0 written; 2 usage error; 3 an input file is unreadable, malformed, of an\n"
    "            unsupported dtype / byte order / layout, or the shapes disagree (the message\n"
    "            names the file and the field), or OUT.bin ends in a damaged record (--append);\n"
    "            4 out of memory, or an input file over the memory cap (--max-record-bytes)\n";

struct import_options {
    const char *scores, *lengths, *row_starts, *page_table, *page_table_row_starts;
    const char *engine_indices;
    const char *metadata;
    const char *output;
    unsigned long long k, page_size;
    bool k_given, page_size_given, compress, append, repair_tail;
};

static int fail(int status, const struct audit_error *err)
{
    cli_print_message(&cmd_import, "%s", err->message);
    return audit_exit_code(status);
}

static int parse_options(int argc, char **argv, struct import_options *options)
{
    enum {
        OPT_SCORES = 256, OPT_LENGTHS, OPT_ROW_STARTS, OPT_PAGE_TABLE, OPT_PAGE_SIZE,
        OPT_PAGE_TABLE_ROW_STARTS, OPT_ENGINE_INDICES, OPT_K, OPT_METADATA, OPT_COMPRESS,
        OPT_APPEND, OPT_REPAIR_TAIL,
    };
    static const struct option long_options[] = {
        { "scores", required_argument, NULL, OPT_SCORES },
        { "lengths", required_argument, NULL, OPT_LENGTHS },
        { "row-starts", required_argument, NULL, OPT_ROW_STARTS },
        { "page-table", required_argument, NULL, OPT_PAGE_TABLE },
        { "page-size", required_argument, NULL, OPT_PAGE_SIZE },
        { "page-table-row-starts", required_argument, NULL, OPT_PAGE_TABLE_ROW_STARTS },
        { "engine-indices", required_argument, NULL, OPT_ENGINE_INDICES },
        { "k", required_argument, NULL, OPT_K },
        { "metadata", required_argument, NULL, OPT_METADATA },
        { "compress", no_argument, NULL, OPT_COMPRESS },
        { "append", no_argument, NULL, OPT_APPEND },
        { "repair-tail", no_argument, NULL, OPT_REPAIR_TAIL },
        { "output", required_argument, NULL, 'o' },
        { "help", no_argument, NULL, 'h' },
        { NULL, 0, NULL, 0 },
    };
    int option;
    opterr = 0; /* messages come from cli_usage_error */
    bool help = false;
    while ((option = getopt_long(argc, argv, ":ho:", long_options, NULL)) != -1) {
        switch (option) {
        case OPT_SCORES: options->scores = optarg; break;
        case OPT_LENGTHS: options->lengths = optarg; break;
        case OPT_ROW_STARTS: options->row_starts = optarg; break;
        case OPT_PAGE_TABLE: options->page_table = optarg; break;
        case OPT_PAGE_TABLE_ROW_STARTS: options->page_table_row_starts = optarg; break;
        case OPT_ENGINE_INDICES: options->engine_indices = optarg; break;
        case OPT_METADATA: options->metadata = optarg; break;
        case OPT_COMPRESS: options->compress = true; break;
        case OPT_APPEND: options->append = true; break;
        case OPT_REPAIR_TAIL: options->repair_tail = true; break;
        case 'o': options->output = optarg; break;
        case OPT_K:
            if (cli_parse_uint(optarg, CAPTURE_MAX_K, &options->k) < 0 || options->k == 0)
                return cli_usage_error(&cmd_import, "--k: '%s' is not a k in 1..%u", optarg,
                                       CAPTURE_MAX_K);
            options->k_given = true;
            break;
        case OPT_PAGE_SIZE:
            if (cli_parse_uint(optarg, 1ull << 30, &options->page_size) < 0 ||
                options->page_size == 0 || (options->page_size & (options->page_size - 1)) != 0)
                return cli_usage_error(&cmd_import, "--page-size: '%s' is not a power of two",
                                       optarg);
            options->page_size_given = true;
            break;
        case 'h': help = true; break;
        default: return cli_option_error(&cmd_import, option, argv);
        }
    }
    if (help) {
        cli_print_usage(&cmd_import, stdout);
        return -1;
    }
    if (optind < argc)
        return cli_usage_error(&cmd_import, "unexpected argument '%s'", argv[optind]);
    if (!options->scores)
        return cli_usage_error(&cmd_import, "--scores FILE is required");
    if (!options->k_given)
        return cli_usage_error(&cmd_import, "--k K is required");
    if (!options->output)
        return cli_usage_error(&cmd_import, "-o OUT.bin is required");
    if (options->repair_tail && !options->append)
        return cli_usage_error(&cmd_import, "--repair-tail applies only with --append");
    if (options->page_table && !options->page_size_given)
        return cli_usage_error(&cmd_import, "--page-table needs --page-size");
    if (options->page_size_given && !options->page_table)
        return cli_usage_error(&cmd_import, "--page-size needs --page-table");
    if (options->page_table_row_starts && !options->page_table)
        return cli_usage_error(&cmd_import, "--page-table-row-starts needs --page-table");
    return EXIT_AUDIT_OK;
}

/* The --metadata object (inline JSON or @FILE); usage errors for anything but an object. */
static int parse_metadata(const char *text, cJSON **metadata, struct audit_error *err)
{
    *metadata = NULL;
    if (!text) {
        *metadata = cJSON_CreateObject();
        return *metadata ? AUDIT_OK : audit_fail(err, AUDIT_ENOMEM, "out of memory");
    }
    if (text[0] == '@') {
        int status = json_read_value_file(text + 1, metadata, err);
        if (status < 0)
            return audit_error_prefix(err, "--metadata");
    } else {
        int status = json_strict_parse(text, strlen(text), "--metadata", 0, metadata, err);
        if (status == AUDIT_EDATA) /* an option's value: a usage error */
            err->code = status = AUDIT_EUSAGE;
        if (status < 0)
            return status;
    }
    if (!cJSON_IsObject(*metadata)) {
        cJSON_Delete(*metadata);
        *metadata = NULL;
        return audit_fail(err, AUDIT_EUSAGE, "--metadata: must be a JSON object {...}");
    }
    /* The engine's contract is judged by run, census, diff and compare: a typo is refused here
     * rather than when the capture is audited. */
    const cJSON *contract = cJSON_GetObjectItemCaseSensitive(*metadata, KEY_CONTRACT);
    char *contract_text = contract ? cJSON_PrintUnformatted(contract) : NULL;
    struct engine_contract parsed;
    int status = contract ? engine_contract_parse(contract_text, "--metadata",
                                                  ENGINE_CONTRACT_METADATA, &parsed, err)
                          : AUDIT_OK;
    cJSON_free(contract_text);
    if (status < 0) {
        cJSON_Delete(*metadata);
        *metadata = NULL;
    }
    return status;
}

static void format_shape(const struct host_tensor *tensor, char *out, size_t size)
{
    size_t used = (size_t)snprintf(out, size, "(");
    for (int d = 0; d < tensor->ndim && used < size; d++)
        used += (size_t)snprintf(out + used, size - used, "%s%" PRIu64, d ? ", " : "",
                                 tensor->shape[d]);
    if (used < size)
        snprintf(out + used, size - used, tensor->ndim == 1 ? ",)" : ")");
}

/* The provenance entry of one input file in imported_from.files. */
static cJSON *provenance_json(const struct host_tensor *tensor)
{
    cJSON *entry = cJSON_CreateObject();
    if (!entry)
        return NULL;
    cJSON_AddStringToObject(entry, KEY_PATH, tensor->path ? tensor->path : tensor->label);
    if (tensor->tensor_name)
        cJSON_AddStringToObject(entry, "tensor", tensor->tensor_name);
    else
        cJSON_AddNullToObject(entry, "tensor");
    cJSON_AddStringToObject(entry, "format", tensor->format);
    if (tensor->format_version[0])
        cJSON_AddStringToObject(entry, "format_version", tensor->format_version);
    cJSON_AddStringToObject(entry, "dtype", tensor->dtype_spelling);
    cJSON *shape = cJSON_AddArrayToObject(entry, "shape");
    for (int d = 0; shape && d < tensor->ndim; d++)
        cJSON_AddItemToArray(shape, cJSON_CreateNumber((double)tensor->shape[d]));
    json_add_hex(entry, KEY_SHA256, tensor->file_sha256, sizeof(tensor->file_sha256));
    if (tensor->safetensors_metadata_json) {
        cJSON *metadata = cJSON_Parse(tensor->safetensors_metadata_json);
        if (metadata)
            cJSON_AddItemToObject(entry, "safetensors_metadata", metadata);
    }
    return entry;
}

#define ANY_EXTENT UINT64_MAX

/* Loads option's file, checks its shape against (rows[, columns]) and records its provenance
 * under field. ANY_EXTENT accepts any extent (the scores define the rows; page tables have any
 * column count). Messages name the option and the file. */
static int load_array(const char *option, const char *spec, const char *field, int ndim,
                      uint64_t rows, uint64_t columns, struct host_tensor *tensor, cJSON *files,
                      struct audit_error *err)
{
    int status = tensor_file_load(spec, tensor, err);
    if (status < 0)
        return audit_error_prefix(err, "%s", option);
    char shape[128];
    format_shape(tensor, shape, sizeof(shape));
    bool shape_ok = tensor->ndim == ndim &&
                    (ndim < 1 || rows == ANY_EXTENT || tensor->shape[0] == rows) &&
                    (ndim < 2 || columns == ANY_EXTENT || tensor->shape[1] == columns);
    if (!shape_ok) {
        if (rows == ANY_EXTENT)
            status = audit_fail(err, AUDIT_EDATA, "%s %s: shape %s: expected 2-D (rows, row "
                                "length)", option, tensor->label, shape);
        else if (ndim == 1)
            status = audit_fail(err, AUDIT_EDATA, "%s %s: shape %s: expected (%" PRIu64 ",), one "
                                "entry per row of --scores", option, tensor->label, shape, rows);
        else if (columns != ANY_EXTENT)
            status = audit_fail(err, AUDIT_EDATA, "%s %s: shape %s: expected (%" PRIu64 ", %" PRIu64
                                ")", option, tensor->label, shape, rows, columns);
        else
            status = audit_fail(err, AUDIT_EDATA, "%s %s: shape %s: expected 2-D (%" PRIu64
                                ", columns), one row per row of --scores", option, tensor->label,
                                shape, rows);
        host_tensor_free(tensor);
        return status;
    }
    cJSON *entry = provenance_json(tensor);
    if (!entry || !cJSON_AddItemToObject(files, field, entry)) {
        cJSON_Delete(entry);
        host_tensor_free(tensor);
        return audit_fail(err, AUDIT_ENOMEM, "out of memory");
    }
    return AUDIT_OK;
}

/* Loads an integer array into a new int32 buffer (*out). */
static int load_int_array(const char *option, const char *spec, const char *field, int ndim,
                          uint64_t rows, uint64_t columns, int32_t **out, uint64_t *columns_out,
                          char *label, size_t label_size, cJSON *files, struct audit_error *err)
{
    struct host_tensor tensor;
    *out = NULL;
    int status = load_array(option, spec, field, ndim, rows, columns, &tensor, files, err);
    if (status < 0)
        return status;
    if (columns_out)
        *columns_out = ndim == 2 ? tensor.shape[1] : 1;
    snprintf(label, label_size, "%s", tensor.label);
    *out = malloc(tensor.elements ? tensor.elements * sizeof(int32_t) : 1);
    if (!*out)
        status = audit_fail(err, AUDIT_ENOMEM, "%s %s: out of memory", option, tensor.label);
    else if ((status = tensor_to_int32(&tensor, *out, err)) < 0)
        audit_error_prefix(err, "%s", option);
    if (status < 0) {
        free(*out);
        *out = NULL;
    }
    host_tensor_free(&tensor);
    return status;
}

/* Windows must lie inside the rows of --scores: 0 <= start, 0 <= length, start + length <= L. */
static int check_windows(const struct capture_record *record, const char *lengths_label,
                         const char *row_starts_label, struct audit_error *err)
{
    for (uint32_t b = 0; b < record->rows; b++) {
        int64_t length = record->lengths[b];
        int64_t start = record->row_starts ? record->row_starts[b] : 0;
        if (length < 0)
            return audit_fail(err, AUDIT_EDATA, "--lengths %s: element [%" PRIu32 "] is %" PRId64
                              ": a length cannot be negative", lengths_label, b, length);
        if (start < 0)
            return audit_fail(err, AUDIT_EDATA, "--row-starts %s: element [%" PRIu32 "] is %" PRId64
                              ": a row start cannot be negative", row_starts_label, b, start);
        if ((uint64_t)(start + length) > record->row_stride) {
            if (record->row_starts)
                return audit_fail(err, AUDIT_EDATA,
                                  "row %" PRIu32 ": --row-starts %s [%" PRIu32 "] = %" PRId64
                                  " plus --lengths [%" PRIu32 "] = %" PRId64 " ends past the "
                                  "scores row of %" PRIu64 " elements",
                                  b, row_starts_label, b, start, b, length, record->row_stride);
            return audit_fail(err, AUDIT_EDATA, "--lengths %s: element [%" PRIu32 "] is %" PRId64
                              ", longer than the scores rows (%" PRIu64 " elements)",
                              lengths_label, b, length, record->row_stride);
        }
    }
    return AUDIT_OK;
}

/* Writes the record: appended (after the tail check), or replacing the output. */
static int write_record(const struct import_options *options, const struct capture_record *record,
                        struct audit_error *err)
{
    if (!options->append)
        return capture_write_record(options->output, record, options->compress, err);
    const struct capture_append_options append = { options->compress, options->repair_tail };
    struct capture_tail tail;
    int status = capture_append(options->output, record, &append, &tail, err);
    if (status == AUDIT_OK && tail.state != CAPTURE_READ_END)
        printf("import: %s: cut the damaged tail (%s) back to %" PRIu32 " record%s, %" PRIu64
               " bytes\n",
               terminal_safe(options->output), tail.problem, tail.records,
               tail.records == 1 ? "" : "s", tail.intact_bytes);
    return status;
}

static int import_record(const struct import_options *options, struct audit_error *err)
{
    struct capture_record record = { 0 };
    struct host_tensor scores = { 0 };
    cJSON *metadata = NULL;
    char lengths_label[1024] = "", row_starts_label[1024] = "", unused_label[1024];
    char *metadata_text = NULL;
    int status = parse_metadata(options->metadata, &metadata, err);
    if (status < 0)
        return status;
    cJSON *imported = cJSON_CreateObject();
    if (imported)
        cJSON_AddStringToObject(imported, "tool", cli_version());
    cJSON *files = imported ? cJSON_AddObjectToObject(imported, "files") : NULL;
    if (!files) {
        cJSON_Delete(imported);
        status = audit_fail(err, AUDIT_ENOMEM, "out of memory");
        goto done;
    }
    /* Ours replaces an "imported_from" the caller passed: it must describe these files. */
    cJSON_DeleteItemFromObjectCaseSensitive(metadata, "imported_from");
    cJSON_AddItemToObject(metadata, "imported_from", imported);

    if ((status = load_array("--scores", options->scores, "scores", 2, ANY_EXTENT, ANY_EXTENT,
                             &scores, files, err)) < 0)
        goto done;
    uint64_t rows = scores.shape[0], row_length = scores.shape[1];
    if (rows == 0 || rows > CAPTURE_MAX_ROWS) {
        status = audit_fail(err, AUDIT_EDATA, "--scores %s: %" PRIu64 " rows (1..%u supported)",
                            scores.label, rows, CAPTURE_MAX_ROWS);
        goto done;
    }
    if (row_length > CAPTURE_MAX_ROW_STRIDE) {
        status = audit_fail(err, AUDIT_EDATA, "--scores %s: rows of %" PRIu64 " elements (at most "
                            "%" PRIu64 ")", scores.label, row_length, CAPTURE_MAX_ROW_STRIDE);
        goto done;
    }
    record.rows = (uint32_t)rows;
    record.k = (uint32_t)options->k;
    record.row_stride = row_length;
    record.scores = malloc(scores.elements ? scores.elements * sizeof(float) : 1);
    if (!record.scores) {
        status = audit_fail(err, AUDIT_ENOMEM, "--scores %s: out of memory for %" PRIu64
                            " scores", scores.label, scores.elements);
        goto done;
    }
    if ((status = tensor_to_float32(&scores, record.scores, err)) < 0) {
        audit_error_prefix(err, "--scores");
        goto done;
    }
    host_tensor_free(&scores);

    if (options->lengths) {
        if ((status = load_int_array("--lengths", options->lengths, "lengths", 1, rows, ANY_EXTENT,
                                     &record.lengths, NULL, lengths_label, sizeof(lengths_label),
                                     files, err)) < 0)
            goto done;
    } else {
        record.lengths = malloc(rows * sizeof(int32_t));
        if (!record.lengths) {
            status = audit_fail(err, AUDIT_ENOMEM, "out of memory");
            goto done;
        }
        for (uint64_t b = 0; b < rows; b++)
            record.lengths[b] = (int32_t)row_length;
        snprintf(lengths_label, sizeof(lengths_label), "(default: the row length)");
    }
    if (options->row_starts &&
        (status = load_int_array("--row-starts", options->row_starts, KEY_ROW_STARTS, 1, rows,
                                 ANY_EXTENT,
                                 &record.row_starts, NULL, row_starts_label,
                                 sizeof(row_starts_label), files, err)) < 0)
        goto done;
    if ((status = check_windows(&record, lengths_label, row_starts_label, err)) < 0)
        goto done;

    if (options->page_table) {
        record.page_size = (uint32_t)options->page_size;
        if ((status = load_int_array("--page-table", options->page_table, KEY_PAGE_TABLE, 2, rows,
                                     ANY_EXTENT,
                                     &record.page_table, &record.page_table_cols, unused_label,
                                     sizeof(unused_label), files, err)) < 0)
            goto done;
        if (options->page_table_row_starts &&
            (status = load_int_array("--page-table-row-starts", options->page_table_row_starts,
                                     "page_table_row_starts", 1, rows, ANY_EXTENT,
                                     &record.page_table_row_starts, NULL, unused_label,
                                     sizeof(unused_label), files, err)) < 0)
            goto done;
    }
    if (options->engine_indices &&
        (status = load_int_array("--engine-indices", options->engine_indices, KEY_ENGINE_INDICES, 2,
                                 rows, options->k, &record.engine_indices, NULL, unused_label,
                                 sizeof(unused_label), files, err)) < 0)
        goto done;

    metadata_text = cJSON_PrintUnformatted(metadata);
    if (!metadata_text || !(record.metadata_json = malloc(strlen(metadata_text) + 1))) {
        status = audit_fail(err, AUDIT_ENOMEM, "out of memory formatting metadata");
        goto done;
    }
    strcpy(record.metadata_json, metadata_text);

    if ((status = capture_record_validate(&record, err)) < 0) {
        audit_error_prefix(err, "the arrays do not form a valid record");
        goto done;
    }
    if ((status = write_record(options, &record, err)) < 0)
        goto done;
    printf("import: %s %" PRIu32 " rows x %" PRIu64 ", k %" PRIu32 "%s%s%s%s to %s\n",
           options->append ? "appended a record of" : "wrote a record of", record.rows,
           record.row_stride, record.k, record.row_starts ? ", row starts" : "",
           record.page_table ? ", page table" : "", record.engine_indices ? ", engine indices" : "",
           options->compress ? ", compressed" : "", terminal_safe(options->output));
done:
    cJSON_free(metadata_text);
    cJSON_Delete(metadata);
    host_tensor_free(&scores);
    capture_record_free(&record);
    return status;
}

static int run_import(int argc, char **argv)
{
    struct import_options options = { 0 };
    struct audit_error err = { 0 };
    int exit_code = parse_options(argc, argv, &options);
    if (exit_code == -1)
        return EXIT_AUDIT_OK; /* --help */
    if (exit_code != EXIT_AUDIT_OK)
        return exit_code;
    int status = import_record(&options, &err);
    if (status < 0)
        return fail(status, &err);
    return EXIT_AUDIT_OK;
}

const struct cli_command cmd_import = {
    "import",
    "builds a capture record from .npy / .safetensors arrays (scores, lengths, page table, ...)",
    import_usage,
    run_import,
};
