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
#include "error.h"
#include "gate.h"
#include "json_util.h"
#include "report.h"
#include "terminal_text.h"
#include "version.h"

/* Reasons and rows shown per entry in the table (the verdict JSON has them all). */
#define GATE_TABLE_REASONS 6
#define GATE_TABLE_ROWS 12

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
        { KEY_BASELINE, required_argument, NULL, OPTION_BASELINE },
        { KEY_POLICY, required_argument, NULL, OPTION_POLICY },
        { "out", required_argument, NULL, OPTION_OUT },
        { "format", required_argument, NULL, OPTION_FORMAT },
        { KEY_NOW, required_argument, NULL, OPTION_NOW },
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

/* ---- table ---------------------------------------------------------------------------------- */

/* A string of the verdict as the table shows it: escaped for the terminal (terminal_text.h;
 * at most TERMINAL_SAFE_SLOTS of them in use at once). */
static const char *string_of(const cJSON *object, const char *key, const char *fallback)
{
    const cJSON *item = cJSON_GetObjectItemCaseSensitive(object, key);
    return cJSON_IsString(item) ? terminal_safe(item->valuestring) : fallback;
}

static double number_of(const cJSON *object, const char *key)
{
    const cJSON *item = cJSON_GetObjectItemCaseSensitive(object, key);
    return cJSON_IsNumber(item) ? item->valuedouble : 0;
}

static void print_rows(FILE *out, const cJSON *rows)
{
    int count = cJSON_GetArraySize(rows), shown = 0;
    if (count == 0)
        return;
    fprintf(out, "  %-64s rows:", "");
    const cJSON *row;
    cJSON_ArrayForEach(row, rows) {
        if (shown++ == GATE_TABLE_ROWS) {
            fprintf(out, " ... (%d listed in the verdict)", count);
            break;
        }
        fprintf(out, " %.0f (%s", number_of(row, KEY_ROW), string_of(row, KEY_WHY, "?"));
        if (cJSON_GetObjectItemCaseSensitive(row, KEY_DEVICE_INDEX))
            fprintf(out, ", device %.0f", number_of(row, KEY_DEVICE_INDEX));
        if (cJSON_GetObjectItemCaseSensitive(row, KEY_REPS_DIFFERING))
            fprintf(out, ", %.0f reps", number_of(row, KEY_REPS_DIFFERING));
        fprintf(out, ")");
    }
    fprintf(out, "\n");
}

static void print_entry(FILE *out, const cJSON *entry)
{
    const char *status = string_of(entry, KEY_STATUS, "?");
    char where[64], label[16];
    const char *file = string_of(entry, KEY_FILE, "?");
    const char *slash = strrchr(file, '/');
    snprintf(where, sizeof(where), "%s:%.0f", slash ? slash + 1 : file,
             number_of(entry, KEY_INDEX));
    size_t i = 0;
    for (; status[i] && i + 1 < sizeof(label); i++)
        label[i] = (char)(status[i] >= 'a' && status[i] <= 'z' ? status[i] - 32 : status[i]);
    label[i] = '\0';
    const cJSON *reasons = cJSON_GetObjectItemCaseSensitive(entry, KEY_REASONS);
    const cJSON *tolerated_by = cJSON_GetObjectItemCaseSensitive(entry, KEY_TOLERATED_BY);
    fprintf(out, "  %-10s %-24s %-13s %-14s", label, where, string_of(entry, KEY_BACKEND, "?"),
            string_of(entry, KEY_LEVEL, "?"));
    if (cJSON_IsObject(tolerated_by))
        fprintf(out, " tolerated by %s: \"%s\"\n  %-64s", string_of(tolerated_by, KEY_RULE, "?"),
                string_of(tolerated_by, KEY_REASON, ""), "");
    int shown = 0;
    const cJSON *reason;
    cJSON_ArrayForEach(reason, reasons) {
        if (shown == GATE_TABLE_REASONS) {
            fprintf(out, "  %-64s ... (%d reasons in the verdict)\n", "",
                    cJSON_GetArraySize(reasons));
            break;
        }
        fprintf(out, shown ? "  %-64s %s\n" : "%s %s\n", "", terminal_safe(reason->valuestring));
        shown++;
    }
    if (shown == 0)
        fprintf(out, "\n");
    shown = 0;
    const cJSON *note;
    cJSON_ArrayForEach(note, cJSON_GetObjectItemCaseSensitive(entry, KEY_NOTES)) {
        if (shown++ == GATE_TABLE_REASONS)
            break;
        fprintf(out, "  %-64s note: %s\n", "", terminal_safe(note->valuestring));
    }
    print_rows(out, cJSON_GetObjectItemCaseSensitive(entry, KEY_ROWS));
}

static void print_table(FILE *out, const cJSON *verdict, const char *verdict_path)
{
    const cJSON *context = cJSON_GetObjectItemCaseSensitive(verdict, KEY_CONTEXT);
    const cJSON *baseline = cJSON_GetObjectItemCaseSensitive(context, KEY_BASELINE);
    const cJSON *policy = cJSON_GetObjectItemCaseSensitive(context, KEY_POLICY);
    fprintf(out, "# baseline %s (%s, %s, %s)", string_of(baseline, KEY_PATH, "?"),
            string_of(baseline, KEY_HOST, "unknown host"),
            string_of(baseline, KEY_DEVICE, "no device"), string_of(baseline, KEY_UTC_TIME, "?"));
    if (cJSON_IsObject(policy))
        fprintf(out, "; policy %s (%.0f rule(s))", string_of(policy, KEY_PATH, "?"),
                number_of(policy, KEY_RULES));
    fprintf(out, "\n");
    const cJSON *report;
    cJSON_ArrayForEach(report, cJSON_GetObjectItemCaseSensitive(verdict, KEY_REPORTS)) {
        const cJSON *summary = cJSON_GetObjectItemCaseSensitive(report, KEY_SUMMARY);
        fprintf(out,
                "# report %s (%s, %s, %s): %.0f entries: %.0f pass, %.0f fail, "
                "%.0f tolerated, %.0f missing\n",
                string_of(report, KEY_PATH, "?"), string_of(report, KEY_HOST, "unknown host"),
                string_of(report, KEY_DEVICE, "no device"), string_of(report, KEY_UTC_TIME, "?"),
                number_of(summary, KEY_ENTRIES), number_of(summary, gate_status_name(GATE_PASS)),
                number_of(summary, gate_status_name(GATE_FAIL)),
                number_of(summary, gate_status_name(GATE_TOLERATED)),
                number_of(summary, gate_status_name(GATE_MISSING)));
        const cJSON *reason;
        cJSON_ArrayForEach(reason, cJSON_GetObjectItemCaseSensitive(report, KEY_REPORT_REASONS))
            fprintf(out, "  %-10s %s\n", "REPORT", terminal_safe(reason->valuestring));
        cJSON_ArrayForEach(reason, cJSON_GetObjectItemCaseSensitive(report, KEY_REPORT_NOTES))
            fprintf(out, "  %-10s %s (allowed by the policy)\n", "NOTE", terminal_safe(reason->valuestring));
        const cJSON *entry;
        cJSON_ArrayForEach(entry, cJSON_GetObjectItemCaseSensitive(report, KEY_ENTRIES))
            if (strcmp(string_of(entry, KEY_STATUS, gate_status_name(GATE_PASS)),
                       gate_status_name(GATE_PASS)) != 0)
                print_entry(out, entry);
    }
    const cJSON *unused;
    cJSON_ArrayForEach(unused, cJSON_GetObjectItemCaseSensitive(verdict, KEY_UNUSED_TOLERANCES))
        fprintf(out,
                "# note: %s tolerated nothing (\"%s\"): the failure is gone, or the entry "
                "does not match\n",
                string_of(unused, KEY_RULE, "?"), string_of(unused, KEY_REASON, ""));
    const cJSON *summary = cJSON_GetObjectItemCaseSensitive(verdict, KEY_SUMMARY);
    fprintf(out,
            "# gate %s: %.0f fail, %.0f tolerated, %.0f missing, %.0f pass of %.0f entries in "
            "%.0f report(s); %.0f report(s) failing as a whole\n",
            strcmp(string_of(summary, KEY_VERDICT, gate_status_name(GATE_FAIL)),
                   gate_status_name(GATE_PASS)) == 0
                ? "PASS"
                : "FAIL",
            number_of(summary, gate_status_name(GATE_FAIL)),
            number_of(summary, gate_status_name(GATE_TOLERATED)),
            number_of(summary, gate_status_name(GATE_MISSING)),
            number_of(summary, gate_status_name(GATE_PASS)), number_of(summary, KEY_ENTRIES),
            number_of(summary, KEY_REPORTS), number_of(summary, KEY_FAILING_REPORTS));
    if (verdict_path)
        fprintf(out, "# verdict: %s\n", terminal_safe(verdict_path));
}

/* ---- command -------------------------------------------------------------------------------- */

static cJSON *gate_context(void)
{
    struct run_context clock = { 0 };
    run_context_fill_time_and_host(&clock);
    cJSON *context = cJSON_CreateObject();
    if (!context)
        return NULL;
    cJSON_AddStringToObject(context, KEY_TOOL_VERSION, DSATOPK_VERSION);
    cJSON_AddStringToObject(context, KEY_GIT_REVISION, DSATOPK_GIT_REVISION);
    cJSON_AddStringToObject(context, KEY_VERSION_STRING, cli_version());
    cJSON_AddStringToObject(context, KEY_COMMAND_LINE, cli_command_line());
    cJSON_AddStringToObject(context, KEY_UTC_TIME, clock.utc_time);
    cJSON_AddStringToObject(context, KEY_HOST, clock.host);
    return context;
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
    const cJSON *code = cJSON_GetObjectItemCaseSensitive(verdict, KEY_EXIT_CODE);
    exit_code = cJSON_IsNumber(code) ? (int)code->valuedouble : EXIT_AUDIT_FAILED;
    const bool verdict_on_stdout = strcmp(options.out_path, "-") == 0;
    if (json_write_file(options.out_path, verdict, &err) < 0)
        goto failed;
    if (options.table)
        print_table(verdict_on_stdout ? stderr : stdout, verdict,
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
