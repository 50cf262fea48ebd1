/* gate: compares reports from other GPUs, machines or drivers with a golden baseline, by the
 * level each backend claims, under an optional policy; prints what fails and why, writes a
 * JSON verdict (docs/GATE.md). The judging lives in src/gate/ (gate.h). */
#include <getopt.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <cjson/cJSON.h>

#include "cli.h"
#include "document_context.h"
#include "error.h"
#include "gate.h"
#include "json_util.h"

static const char gate_usage[] =
    "usage: dsatopk-audit gate --baseline BASELINE.json [options] REPORT.json...\n"
    "\n"
    "Compares each report (from `run`, or `merge` of shard reports) with a golden baseline (a\n"
    "report, or the subset `run --baseline-out` writes), per record x backend, by the level\n"
    "the backend claims: gpu_to_gpu must give the baseline's and the CPU reference's output hash\n"
    "on every rep; run_to_run exactly one distinct output (its hash may differ between GPUs);\n"
    "not_guaranteed no wrong set, duplicate, out-of-range or short row beyond its documented\n"
    "staging overflow. Records are matched by payload SHA-256, file name and index; backends by\n"
    "name. A backend unsupported or unavailable in a report fails only if it ran in the baseline.\n"
    "A policy file (docs/GATE.md) overrides levels per backend or record and lists known\n"
    "failures, which are reported as tolerated.\n"
    "\n"
    "options:\n"
    "  --baseline FILE       the golden baseline (required)\n"
    "  --policy FILE         policy (schema dsatopk-audit/policy, version 1)\n"
    "  --out FILE            verdict JSON (schema dsatopk-audit/gate, version 1), written\n"
    "                        atomically (default dsatopk-gate.json; '-': stdout, table on stderr)\n"
    "  --format table|none   print the failing entries and a summary (default table)\n"
    "  --now TIME            the time policy \"until\" dates are compared with (YYYY-MM-DD or\n"
    "                        YYYY-MM-DDTHH:MM:SSZ, UTC; default: now)\n"
    "  -h, --help            show this help\n"
    "\n"
    "exit codes: 0 every entry passes or is tolerated; 1 an entry fails (or is missing, unless\n"
    "            the policy allows it) or a report is incomplete or has input errors; 2 usage\n"
    "            error; 3 a report, the baseline or the policy is unreadable or invalid (the\n"
    "            message names the file and the JSON path); 4 out of memory\n";

enum gate_option_id {
    OPTION_BASELINE = 256,
    OPTION_POLICY,
    OPTION_OUT,
    OPTION_FORMAT,
    OPTION_NOW,
};

struct gate_command_options {
    const char *baseline_path;
    const char *policy_path;
    const char *out_path;
    bool table;
    char now[32];
};

/* Returns -1 to go on, else the exit code (0 after --help). */
static int parse_options(int argc, char **argv, struct gate_command_options *options,
                         int *first_report)
{
    static const struct option long_options[] = {
        { "baseline", required_argument, NULL, OPTION_BASELINE },
        { "policy", required_argument, NULL, OPTION_POLICY },
        { "out", required_argument, NULL, OPTION_OUT },
        { "format", required_argument, NULL, OPTION_FORMAT },
        { "now", required_argument, NULL, OPTION_NOW },
        { "help", no_argument, NULL, 'h' },
        { NULL, 0, NULL, 0 },
    };
    int option;
    options->out_path = "dsatopk-gate.json";
    options->table = true;
    time_t clock = time(NULL);
    struct tm utc;
    if (gmtime_r(&clock, &utc))
        strftime(options->now, sizeof(options->now), "%Y-%m-%dT%H:%M:%SZ", &utc);
    bool help = false;
    opterr = 0; /* messages come from cli_usage_error */
    while ((option = getopt_long(argc, argv, ":h", long_options, NULL)) != -1) {
        switch (option) {
        case OPTION_BASELINE: options->baseline_path = optarg; break;
        case OPTION_POLICY: options->policy_path = optarg; break;
        case OPTION_OUT:
            if (!*optarg)
                return cli_usage_error(&cmd_gate, "--out: empty path");
            options->out_path = optarg;
            break;
        case OPTION_FORMAT:
            if (strcmp(optarg, "table") == 0)
                options->table = true;
            else if (strcmp(optarg, "none") == 0)
                options->table = false;
            else
                return cli_usage_error(&cmd_gate, "--format: '%s' is not table or none", optarg);
            break;
        case OPTION_NOW:
            if (gate_time_parse(optarg, options->now) < 0)
                return cli_usage_error(&cmd_gate, "--now: '%s' is not a date YYYY-MM-DD or a "
                                                  "time YYYY-MM-DDTHH:MM:SSZ (UTC) that exists",
                                       optarg);
            break;
        case 'h': help = true; break;
        default: return cli_option_error(&cmd_gate, option, argv);
        }
    }
    if (help) {
        cli_print_usage(&cmd_gate, stdout);
        return EXIT_AUDIT_OK;
    }
    if (!options->baseline_path || !*options->baseline_path)
        return cli_usage_error(&cmd_gate, "--baseline FILE is required");
    if (optind >= argc)
        return cli_usage_error(&cmd_gate, "no report to gate");
    *first_report = optind;
    return -1;
}

/* ---- command -------------------------------------------------------------------------------- */

static cJSON *gate_context(void)
{
    struct document_context context;
    document_context_fill(&context, cli_version(), cli_command_line());
    return document_context_json(&context);
}

static int run_gate(int argc, char **argv)
{
    struct gate_command_options options = { 0 };
    struct report_document baseline = { 0 };
    struct report_document *reports = NULL;
    struct gate_policy policy;
    struct gate_options gate_options = { { 0 } };
    struct gate_counts counts;
    struct audit_error err = { 0 };
    cJSON *context = NULL, *verdict = NULL;
    size_t report_count = 0;
    int first_report = 0;
    gate_policy_init(&policy);
    int exit_code = parse_options(argc, argv, &options, &first_report);
    if (exit_code >= 0)
        return exit_code;
    snprintf(gate_options.now, sizeof(gate_options.now), "%s", options.now);

    if (report_document_load(&baseline, options.baseline_path, &err) < 0)
        goto failed;
    if (options.policy_path && gate_policy_load(&policy, options.policy_path, &err) < 0)
        goto failed;
    reports = calloc((size_t)(argc - first_report), sizeof(*reports));
    if (!reports) {
        audit_fail(&err, AUDIT_ENOMEM, "out of memory reading the reports");
        goto failed;
    }
    for (int i = first_report; i < argc; i++) {
        if (report_document_load(&reports[report_count], argv[i], &err) < 0)
            goto failed;
        report_count++;
    }
    context = gate_context();
    if (!context) {
        audit_fail(&err, AUDIT_ENOMEM, "out of memory building the gate verdict");
        goto failed;
    }
    if (gate_verdict(&baseline, reports, report_count, &policy, &gate_options, context, &verdict,
                     &counts, &err) < 0)
        goto failed;
    exit_code = counts.exit_code;
    const bool verdict_on_stdout = strcmp(options.out_path, "-") == 0;
    if (json_write_file(options.out_path, verdict, &err) < 0)
        goto failed;
    if (options.table)
        gate_table_print(verdict_on_stdout ? stderr : stdout, verdict,
                    verdict_on_stdout ? NULL : options.out_path);
    goto done;
failed:
    cli_print_message(&cmd_gate, "%s", err.message);
    exit_code = audit_exit_code(err.code);
done:
    cJSON_Delete(verdict);
    cJSON_Delete(context);
    for (size_t i = 0; i < report_count; i++)
        report_document_release(&reports[i]);
    free(reports);
    report_document_release(&baseline);
    gate_policy_release(&policy);
    return exit_code;
}

const struct cli_command cmd_gate = {
    "gate",
    "compare reports with a golden baseline by claimed level; JSON verdict, exit 1 on failure",
    gate_usage,
    run_gate,
};
