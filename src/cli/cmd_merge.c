/* merge: joins the shard reports of `run --shard I/N` into one report (docs/REPORT.md
 * "Scale-out"). The joining lives in src/gate/gate_merge.c (gate_merge_reports). */
#include <getopt.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "cli.h"
#include "error.h"
#include "gate.h"
#include "json_util.h"

static const char merge_usage[] =
    "usage: dsatopk-audit merge -o OUT.json SHARD.json...\n"
    "\n"
    "Joins shard reports written by `run --shard I/N` into one report: records in global order,\n"
    "summary recomputed, the context of the lowest shard plus a shards[] list of every shard's\n"
    "context, input errors once each, cross-device entries joined. Refuses reports of another\n"
    "schema version, reports that are not shards, shards of different N or configuration\n"
    "(backends, reps, noise, seed, k, modes) and overlapping shards. Missing shards are allowed:\n"
    "the merged report is then marked incomplete (and `gate` fails it).\n"
    "\n"
    "options:\n"
    "  -o, --out FILE   the merged report, written atomically ('-': stdout)\n"
    "  --quiet          no summary line\n"
    "  -h, --help       show this help\n"
    "\n"
    "exit codes: 0 merged (a warning names missing shards); 2 usage error; 3 a shard report is\n"
    "            unreadable or invalid, or the shards do not belong together; 4 out of memory\n";

enum merge_option_id { OPTION_QUIET = 256 };

static int run_merge(int argc, char **argv)
{
    static const struct option long_options[] = {
        { "out", required_argument, NULL, 'o' },
        { "quiet", no_argument, NULL, OPTION_QUIET },
        { "help", no_argument, NULL, 'h' },
        { NULL, 0, NULL, 0 },
    };
    const char *out_path = NULL;
    bool quiet = false;
    int option;
    bool help = false;
    opterr = 0; /* messages come from cli_usage_error */
    while ((option = getopt_long(argc, argv, ":o:h", long_options, NULL)) != -1) {
        switch (option) {
        case 'o':
            if (!*optarg)
                return cli_usage_error(&cmd_merge, "--out: empty path");
            out_path = optarg;
            break;
        case OPTION_QUIET: quiet = true; break;
        case 'h': help = true; break;
        default: return cli_option_error(&cmd_merge, option, argv);
        }
    }
    if (help) {
        cli_print_usage(&cmd_merge, stdout);
        return EXIT_AUDIT_OK;
    }
    if (!out_path)
        return cli_usage_error(&cmd_merge, "-o OUT.json is required");
    if (optind >= argc)
        return cli_usage_error(&cmd_merge, "no shard report to merge");

    const size_t count = (size_t)(argc - optind);
    const char **paths = calloc(count, sizeof(char *));
    cJSON **roots = calloc(count, sizeof(cJSON *));
    cJSON *merged = NULL;
    struct audit_error err = { 0 };
    uint32_t missing = 0;
    int exit_code = EXIT_AUDIT_OK;
    if (!paths || !roots) {
        audit_fail(&err, AUDIT_ENOMEM, "out of memory reading the shard reports");
        goto failed;
    }
    for (size_t i = 0; i < count; i++) {
        paths[i] = argv[optind + (int)i];
        if (json_read_file(paths[i], &roots[i], &err) < 0)
            goto failed;
    }
    if (gate_merge_reports(paths, (const cJSON *const *)roots, count, &merged, &missing, &err) < 0)
        goto failed;
    if (json_write_file(out_path, merged, &err) < 0)
        goto failed;
    struct gate_merge_totals totals;
    gate_merge_totals(merged, &totals);
    if (missing)
        cli_print_message(&cmd_merge, "warning: %s; the merged report is incomplete",
                          totals.stop_reason ? totals.stop_reason : "shards missing");
    if (!quiet)
        fprintf(strcmp(out_path, "-") == 0 ? stderr : stdout,
                "# merged %zu shard report(s): %.0f record(s), %.0f failing backend run(s), "
                "%.0f input error(s)%s%s\n",
                count, totals.records, totals.backends_fail, totals.input_errors,
                strcmp(out_path, "-") == 0 ? "" : "; report: ",
                strcmp(out_path, "-") == 0 ? "" : out_path);
    goto done;
failed:
    cli_print_message(&cmd_merge, "%s", err.message);
    exit_code = audit_exit_code(err.code);
done:
    cJSON_Delete(merged);
    for (size_t i = 0; roots && i < count; i++)
        cJSON_Delete(roots[i]);
    free(roots);
    free(paths);
    return exit_code;
}

const struct cli_command cmd_merge = {
    "merge",
    "join the shard reports of `run --shard I/N` into one report",
    merge_usage,
    run_merge,
};
