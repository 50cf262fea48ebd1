/* compare: N captures of the same requests aligned call by call (src/triage/compare_runs.h,
 * docs/TRIAGE.md "compare"). This file parses the options, calls compare_runs and prints the
 * table, the document (src/triage/compare_json.c) or the HTML page. */
#include <getopt.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "cli.h"
#include "compare_json.h"
#include "compare_runs.h"
#include "document_context.h"
#include "error.h"
#include "html_report.h"
#include "json_util.h"

static const char compare_usage[] =
    "usage: dsatopk-audit compare [--format table|json] [-o FILE] [--html FILE]\n"
    "                             [--engine-contract JSON] RUN1.bin RUN2.bin [RUN3.bin ...]\n"
    "\n"
    "Compares N >= 2 captures of the same requests (N runs of an engine), call by call. Records\n"
    "are aligned by the call identity of their metadata (rank, layer, step, call, request_id,\n"
    "request: the keys present) when every record has one, else by position (the output says\n"
    "which). A call missing from a run, or of another shape or k, is listed as not comparable\n"
    "with the reason. For every comparable call: which runs have bit-identical scores, the\n"
    "same exact (CPU reference) selection and the same engine selection (one letter per run,\n"
    "a = the first run's group); whether each engine selection is a valid top-k of its own\n"
    "scores; the first run's smallest boundary gap against the largest perturbation of the\n"
    "scores (diff's crossing rule); and the attribution:\n"
    "  none              identical, or the selections absorbed the perturbation\n"
    "  upstream          the scores differ and the exact selection moved with them\n"
    "  tie_flap          the engine's sets differ among valid top-k (other boundary ties)\n"
    "  selection_kernel  identical scores and engine sets, another order\n"
    "  engine_wrong      a run's engine selection is not a valid top-k (run, row, missing)\n"
    "The summary: \"N comparable calls: D with different scores, S with identical scores and a\n"
    "different selection; boundary gap min / median\" (the gaps of the first run's rows).\n"
    "\n"
    "options:\n"
    "  --format FORMAT        table (default) or json (schema dsatopk-audit/compare, version 1)\n"
    "  -o, --output FILE      write the table or the JSON to FILE (atomically)\n"
    "  --html FILE            also draw the comparison as one self-contained HTML page\n"
    "  --engine-contract JSON the contract the engine's selections are judged under (as `run\n"
    "                         --engine-contract`; default: each record's metadata \"contract\")\n"
    "  -h, --help             show this help\n"
    "\n"
    "exit codes: 0 every comparable call is attributed none; 1 some call is not (upstream,\n"
    "            tie_flap, selection_kernel, engine_wrong); 2 usage error; 3 a capture is\n"
    "            missing, unreadable, corrupt or truncated, or no call is comparable;\n"
    "            4 out of memory\n";


struct compare_cli_options {
    enum cli_format format;
    const char *output, *html;
    struct engine_contract contract;
    bool contract_given;
};

enum { OPTION_HTML = 256, OPTION_ENGINE_CONTRACT };

static int parse_options(int argc, char **argv, struct compare_cli_options *options)
{
    static const struct option long_options[] = {
        { "format", required_argument, NULL, 'f' },
        { "output", required_argument, NULL, 'o' },
        { "html", required_argument, NULL, OPTION_HTML },
        { "engine-contract", required_argument, NULL, OPTION_ENGINE_CONTRACT },
        { "help", no_argument, NULL, 'h' },
        { NULL, 0, NULL, 0 },
    };
    int option;
    opterr = 0; /* messages come from cli_usage_error */
    bool help = false;
    while ((option = getopt_long(argc, argv, ":ho:", long_options, NULL)) != -1) {
        switch (option) {
        case 'f':
            if (cli_parse_format(&cmd_compare, optarg, &options->format) != 0)
                return EXIT_USAGE;
            break;
        case 'o': options->output = optarg; break;
        case OPTION_HTML: options->html = optarg; break;
        case OPTION_ENGINE_CONTRACT:
            if (cli_parse_engine_contract(&cmd_compare, optarg, &options->contract) != 0)
                return EXIT_USAGE;
            options->contract_given = true;
            break;
        case 'h': help = true; break;
        default: return cli_option_error(&cmd_compare, option, argv);
        }
    }
    if (help) {
        cli_print_usage(&cmd_compare, stdout);
        return -1;
    }
    if (argc - optind < 2 || argc - optind > COMPARE_MAX_RUNS)
        return cli_usage_error(&cmd_compare, "expected 2 to %d captures, got %d",
                               COMPARE_MAX_RUNS, argc - optind);
    return EXIT_AUDIT_OK;
}

static int run_compare(int argc, char **argv)
{
    struct compare_cli_options options = { .format = CLI_FORMAT_TABLE, .output = "-" };
    struct compare_result result;
    struct audit_error err = { 0 };
    cJSON *document = NULL;
    char *text = NULL, *table_text = NULL;
    size_t table_size = 0;
    int exit_code = parse_options(argc, argv, &options);
    if (exit_code != EXIT_AUDIT_OK)
        return exit_code < 0 ? EXIT_AUDIT_OK : exit_code;

    const struct compare_options compare_options = {
        .engine_contract = options.contract_given ? &options.contract : NULL,
    };
    int status = compare_runs((const char *const *)argv + optind, (size_t)(argc - optind),
                              &compare_options, &result, &err);
    if (status < 0)
        goto fail;
    for (size_t r = 0; r < result.run_count; r++)
        if (result.runs[r].read_error)
            cli_print_message(&cmd_compare, "%s", result.runs[r].error);
    struct document_context context;
    document_context_fill(&context, cli_version(), cli_command_line());
    if (!(document = compare_json(&context, &result))) {
        status = audit_fail(&err, AUDIT_ENOMEM, "out of memory writing the comparison");
        goto fail;
    }
    if (options.format == CLI_FORMAT_JSON) {
        text = json_render(document, NULL);
    } else {
        FILE *table = open_memstream(&table_text, &table_size);
        if (table) {
            compare_table(table, &result);
            fclose(table);
        }
        text = table_text;
        table_text = NULL;
    }
    if (!text) {
        status = audit_fail(&err, AUDIT_ENOMEM, "out of memory formatting the comparison");
        goto fail;
    }
    if ((status = json_write_text_atomic(options.output, text, &err)) < 0)
        goto fail;
    if (options.html && (status = html_compare_write(options.html, document, &err)) < 0) {
        audit_error_prefix(&err, "--html");
        goto fail;
    }
    if (result.read_error || result.comparable == 0) {
        if (result.comparable == 0)
            cli_print_message(&cmd_compare, "no call is comparable across the %zu captures",
                              result.run_count);
        exit_code = EXIT_BAD_INPUT;
    } else {
        exit_code = result.attribution[COMPARE_NONE] == result.comparable ? EXIT_AUDIT_OK
                                                                          : EXIT_AUDIT_FAILED;
    }
    goto done;
fail:
    cli_print_message(&cmd_compare, "%s", err.message);
    exit_code = audit_exit_code(status);
done:
    free(text);
    free(table_text);
    cJSON_Delete(document);
    compare_result_release(&result);
    return exit_code;
}

const struct cli_command cmd_compare = {
    "compare",
    "N runs of the same requests aligned call by call: scores, selections, who is at fault",
    compare_usage,
    run_compare,
};
