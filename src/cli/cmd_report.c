/* report: renders a run report (and optionally a gate verdict) as one self-contained HTML page.
 * The drawing lives in src/report/html_*.c; this file reads and checks the inputs and maps errors
 * to exit codes. */
#include <getopt.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "cli.h"
#include "error.h"
#include "gate.h"
#include "html_report.h"
#include "json_util.h"
#include "report_keys.h"
#include "report_read.h"

static const char report_usage[] =
    "usage: dsatopk-audit report [--gate VERDICT.json] [-o FILE] REPORT.json\n"
    "\n"
    "Draws the JSON report of `run` as one self-contained HTML page (inline SVG and CSS, no\n"
    "script, nothing fetched from the network): the context and the verdict per backend first,\n"
    "then one folded section per record with its census (tie-set sizes, boundary gaps on a log\n"
    "scale, the fraction of 0.0), the census predictions next to the flapping and wrong rows\n"
    "observed, each backend's distinct outputs, violations and kernel times, and a rows x reps\n"
    "picture of the rows that flapped. With --gate, the verdict of `gate` is shown too: its\n"
    "failing records, backends and rows first. Layout and fields: docs/REPORT.md \"HTML report\".\n"
    "\n"
    "options:\n"
    "  -g, --gate FILE     a gate verdict (schema dsatopk-audit/gate) to show with the report\n"
    "  -o, --output FILE   the page to write, atomically (default: REPORT with .json replaced\n"
    "                      by .html; - writes to stdout)\n"
    "  -h, --help          show this help\n"
    "\n"
    "exit codes: 0 written; 2 usage error; 3 REPORT or VERDICT unreadable, not JSON (the strict\n"
    "            dialect of docs/FORMAT.md), without a schema and schema_version, of another\n"
    "            schema or of a newer schema_version, a VERDICT made from another report, or\n"
    "            the page could not be written; 4 out of memory\n";

struct report_options {
    const char *report_path;
    const char *gate_path;
    const char *output_path;
    char default_output[4096];
};

/* EXIT_AUDIT_OK to go on, -1 after --help, else the exit code. */
static int parse_options(int argc, char **argv, struct report_options *options)
{
    static const struct option long_options[] = {
        { "gate", required_argument, NULL, 'g' },
        { "output", required_argument, NULL, 'o' },
        { "help", no_argument, NULL, 'h' },
        { NULL, 0, NULL, 0 },
    };
    int option;
    opterr = 0; /* messages come from cli_usage_error */
    bool help = false;
    while ((option = getopt_long(argc, argv, ":g:o:h", long_options, NULL)) != -1) {
        switch (option) {
        case 'g': options->gate_path = optarg; break;
        case 'o': options->output_path = optarg; break;
        case 'h': help = true; break;
        default: return cli_option_error(&cmd_report, option, argv);
        }
    }
    if (help) {
        cli_print_usage(&cmd_report, stdout);
        return -1;
    }
    if (argc - optind != 1)
        return cli_usage_error(&cmd_report, "expected one REPORT.json, got %d arguments",
                               argc - optind);
    options->report_path = argv[optind];
    if (!options->output_path) {
        /* report.json -> report.html; anything else gets .html appended. */
        const char *path = options->report_path;
        size_t length = strlen(path);
        if (length > 5 && strcmp(path + length - 5, ".json") == 0)
            length -= 5;
        if (length + sizeof(".html") > sizeof(options->default_output))
            return cli_usage_error(&cmd_report, "REPORT path too long to derive the output "
                                                "name; give -o FILE");
        memcpy(options->default_output, path, length);
        memcpy(options->default_output + length, ".html", sizeof(".html"));
        options->output_path = options->default_output;
    }
    if (strcmp(options->output_path, options->report_path) == 0 ||
        (options->gate_path && strcmp(options->output_path, options->gate_path) == 0))
        return cli_usage_error(&cmd_report, "-o %s would overwrite an input", options->output_path);
    return EXIT_AUDIT_OK;
}

/* Reads path and checks that it is a document of the expected schema and a version this tool
 * reads (document_schema_check, both fields required): a JSON object without them ({} included)
 * is not a report, so it is refused rather than drawn as an empty page; one of another schema is
 * most likely the wrong file. Past that the page is drawn from whatever fields are there. */
static int read_document(const char *path, const char *schema, int current_version,
                         cJSON **json_out, struct audit_error *err)
{
    struct json_reader reader = { path, err };
    const cJSON *records = NULL;
    cJSON *json = NULL;
    *json_out = NULL;
    int status = json_read_file(path, &json, err);
    if (status != AUDIT_OK)
        return status;
    status = document_schema_check(path, json, schema, current_version, NULL, err);
    if (status == AUDIT_OK && strcmp(schema, REPORT_SCHEMA) == 0)
        status = json_field_array(&reader, json, "$", KEY_RECORDS, FIELD_REQUIRED, &records);
    if (status != AUDIT_OK) {
        cJSON_Delete(json);
        return status;
    }
    *json_out = json;
    return AUDIT_OK;
}

static int run_report(int argc, char **argv)
{
    struct report_options options = { 0 };
    struct audit_error err = { 0 };
    cJSON *report = NULL, *verdict = NULL;
    int parsed = parse_options(argc, argv, &options);
    if (parsed != EXIT_AUDIT_OK)
        return parsed < 0 ? EXIT_AUDIT_OK : parsed;

    int status =
        read_document(options.report_path, REPORT_SCHEMA, REPORT_SCHEMA_VERSION, &report, &err);
    if (status == AUDIT_OK && options.gate_path)
        status = read_document(options.gate_path, GATE_SCHEMA, GATE_SCHEMA_VERSION, &verdict, &err);
    bool unidentified = false;
    if (status == AUDIT_OK && verdict)
        status = gate_verdict_check_report(verdict, options.gate_path, report,
                                           options.report_path, &unidentified, &err);
    if (unidentified)
        cli_print_message(&cmd_report, "warning: %s names no report it judged (no report_sha256, "
                          "host or utc_time): drawn with %s as given",
                          options.gate_path, options.report_path);
    if (status == AUDIT_OK)
        status = html_report_write(options.output_path, report, verdict, &err);
    if (status != AUDIT_OK)
        cli_print_message(&cmd_report, "%s", err.message);
    else if (strcmp(options.output_path, "-") != 0)
        cli_print_message(&cmd_report, "wrote %s", options.output_path);
    cJSON_Delete(report);
    cJSON_Delete(verdict);
    return status == AUDIT_OK ? EXIT_AUDIT_OK : audit_exit_code(status);
}

const struct cli_command cmd_report = {
    "report",
    "draws a run report (and a gate verdict) as one self-contained HTML page",
    report_usage,
    run_report,
};
