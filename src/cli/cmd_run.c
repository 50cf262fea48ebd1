/* run: replays every selected capture record on every selected backend, reps times, under a
 * noisy sibling stream; writes the JSON report and prints one table line per record x backend
 * (docs/REPORT.md). This file parses the options, calls the audit engine (src/replay/audit.h)
 * with its progress, message and table callbacks, and writes and prints what it returns. */
#include <errno.h>
#include <getopt.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "audit.h"
#include "capture.h"
#include "cli.h"
#include "error.h"
#include "gate.h"
#include "html_report.h"
#include "json_util.h"
#include "plugin.h"
#include "report.h"
#include "selection.h"
#include "terminal_text.h"
#include "topk_backends.h"
#include "worker.h"

#define RUN_MAX_BACKENDS AUDIT_MAX_BACKENDS
#define RUN_MAX_REPS 100000ull
#define RUN_MAX_DEVICES AUDIT_MAX_DEVICES
#define RUN_MAX_SHARDS (1u << 20)
/* --timeout: seconds a worker may take for one record x backend (docs/RELIABILITY.md). */
#define RUN_DEFAULT_TIMEOUT_SECONDS 120u
#define RUN_MAX_TIMEOUT_SECONDS (7u * 24u * 3600u)

static const char run_usage[] =
    "usage: dsatopk-audit run [options] [CAPTURE_OR_DIR...]\n"
    "\n"
    "Replays each record of each capture file (a directory means its *.bin files, sorted; no\n"
    "argument means captures/) on each backend --reps times while a sibling stream keeps the GPU\n"
    "busy, then checks and hashes every output against the CPU reference. Writes a JSON report\n"
    "(docs/REPORT.md) and prints one line per record x backend. Without a GPU the census and the\n"
    "reference hashes still run and the backends are reported unavailable.\n"
    "\n"
    "options:\n"
    "  --backends LIST          comma-separated backends (default: all; see `devices`)\n"
    "  --reps N                 replays per record x backend (default 25)\n"
    "  --noise KIND             none, gemm (default), mem, spin or mixed\n"
    "  --out FILE               report path, written atomically (default dsatopk-report.json;\n"
    "                           '-' writes it to stdout and the table to stderr)\n"
    "  --dump-outputs DIR       write each rep's output as DIR/<stem>-r<record>-<backend>-rep<NN>.bin\n"
    "                           (raw little-endian int32 rows x k: sha256sum equals the report)\n"
    "  --no-gpu-prefilter       copy back, SHA-256 and look up every rep's output (default: a rep\n"
    "                           whose per-row 64-bit GPU hashes match an output already seen is\n"
    "                           counted as that output without copying it back)\n"
    "  --seed N                 seed of the --batch-invariance shuffles (default 0)\n"
    "  --records LIST           only these records of each file (e.g. 0,3-5)\n"
    "  --rows LIST              only these rows of each record (row numbers stay those of the file)\n"
    "  --k N                    replace each record's k\n"
    "  --engine-contract JSON   what the engine promises about its recorded selections, e.g.\n"
    "                           '{\"order\": \"sorted\", \"tie_break\": \"small\"}' (overrides\n"
    "                           each record's metadata \"contract\"; default: a valid top-k in\n"
    "                           any order)\n"
    "  --device N               CUDA device ordinal (default 0)\n"
    "  --devices LIST           run the whole audit on each listed device, all at once (e.g. 0,1\n"
    "                           or all; a device listed twice is compared with itself: two\n"
    "                           workers share it) and add a cross_device block: do the output\n"
    "                           hashes agree across devices?\n"
    "  --devices-sequential     with --devices: one device after another instead\n"
    "  --shard I/N              audit every N-th selected record starting at I (records numbered\n"
    "                           across the inputs in order); `merge` joins the shard reports\n"
    "  --baseline-out FILE      also write the baseline subset of the report for `gate`\n"
    "  --html FILE              also draw the report as one self-contained HTML page\n"
    "  --graph                  also replay one launch captured in a CUDA graph, --reps times\n"
    "  --batch-invariance       run each row alone and inside shuffled batches of the other rows\n"
    "  --emulate-smem-per-sm B  pretend the device has B bytes of shared memory per SM\n"
    "  --plugin PATH.so         also audit the backend of this plugin (repeatable; docs/PLUGIN.md);\n"
    "                           it runs after the built-ins unless --backends names it\n"
    "  --timeout SECONDS        watchdog per record x backend: a worker with no result by then is\n"
    "                           killed and the backend reported `hang` (default 120)\n"
    "  --format table|none      terminal table (default table)\n"
    "  --quiet                  no table, summary or progress line\n"
    "  -h, --help               show this help\n"
    "\n"
    "Records that carry the engine's own selection (engine_indices) have it judged against the\n"
    "CPU reference at the record's k, with or without a GPU: exact, tie variant (a valid top-k\n"
    "with other boundary ties) or wrong (each wrong row and index is named).\n"
    "\n"
    "exit codes: 0 every backend run meets its claimed level (unsupported and unavailable do not\n"
    "            fail) and no engine selection is wrong; 1 a backend failed its level or hit an\n"
    "            error, an engine selection is wrong, or devices that must agree (--devices)\n"
    "            disagree; 2 usage error (also --records or --rows that select nothing, and a\n"
    "            --rows row a record does not have);\n"
    "            3 a capture is missing, corrupt or truncated (the records before it are in the\n"
    "            report); 4 the device failed and stopped the GPU work (any --devices entry) or\n"
    "            the host ran out of memory; 130 (SIGINT) or 143 (SIGTERM): interrupted, the\n"
    "            report holds what finished and says complete: false\n"
    "\n"
    "Each record's backends replay in a worker process: a backend that hangs, crashes or\n"
    "poisons its CUDA context is reported (status hang, crash or cuda_error, verdict fail) and\n"
    "the audit goes on with a fresh worker (docs/RELIABILITY.md \"Isolation\").\n";

enum table_format { TABLE_ON, TABLE_OFF };

struct run_options {
    const struct topk_backend *backends[RUN_MAX_BACKENDS];
    size_t backend_count;
    uint32_t reps;
    enum noise_kind noise;
    const char *out_path;
    const char *dump_dir;
    uint64_t seed;
    uint32_t *records; /* sorted, unique; NULL: all */
    size_t record_count;
    uint32_t *rows;    /* sorted, unique; NULL: all */
    size_t row_count;
    uint32_t k_override;
    struct engine_contract engine_contract;
    bool engine_contract_given;
    int device;
    bool device_given;
    int devices[RUN_MAX_DEVICES]; /* --devices, in order; device_count 0: not given */
    size_t device_count;
    bool all_devices;             /* --devices all: the engine lists what the probe finds */
    const char *devices_text;
    bool devices_sequential;
    uint32_t shard_index, shard_count; /* shard_count 0: no --shard */
    const char *baseline_out;
    const char *html_out; /* --html: the report drawn as one HTML page (src/report/html_report.h) */
    bool graph, batch_invariance, quiet;
    bool gpu_prefilter;   /* off: --no-gpu-prefilter (also off with --dump-outputs) */
    enum table_format format;
    unsigned long long emulate_smem_per_sm;
    unsigned timeout_ms;
    const char *backends_text;    /* --backends, resolved once the plugins are loaded */
    const char *plugin_paths[RUN_MAX_BACKENDS];
    size_t plugin_count;
};

enum run_option_id {
    OPTION_BACKENDS = 256,
    OPTION_REPS,
    OPTION_NOISE,
    OPTION_OUT,
    OPTION_DUMP,
    OPTION_SEED,
    OPTION_RECORDS,
    OPTION_ROWS,
    OPTION_K,
    OPTION_DEVICE,
    OPTION_GRAPH,
    OPTION_BATCH,
    OPTION_EMULATE,
    OPTION_FORMAT,
    OPTION_QUIET,
    OPTION_DEVICES,
    OPTION_SHARD,
    OPTION_BASELINE_OUT,
    OPTION_HTML,
    OPTION_PLUGIN,
    OPTION_TIMEOUT,
    OPTION_NO_GPU_PREFILTER,
    OPTION_ENGINE_CONTRACT,
    OPTION_DEVICES_SEQUENTIAL,
};

static int parse_backends(const char *text, struct run_options *options)
{
    char *copy = strdup(text);
    int status = AUDIT_OK;
    if (!copy)
        return cli_usage_error(&cmd_run, "out of memory parsing --backends");
    options->backend_count = 0;
    char *save = NULL;
    for (char *name = strtok_r(copy, ",", &save); name; name = strtok_r(NULL, ",", &save)) {
        const struct topk_backend *backend = topk_backend_find(name);
        if (!backend)
            backend = plugin_backend_find(name);
        if (!backend) {
            char known[1024] = "";
            for (int i = 0; topk_backend_table[i]; i++) {
                strncat(known, i ? ", " : "", sizeof(known) - strlen(known) - 1);
                strncat(known, topk_backend_table[i]->name, sizeof(known) - strlen(known) - 1);
            }
            if (options->plugin_count)
                strncat(known, ", and the backends of the --plugin files",
                        sizeof(known) - strlen(known) - 1);
            status = cli_usage_error(&cmd_run, "--backends: no backend '%s' (known: %s)", name,
                                     known);
            goto done;
        }
        for (size_t i = 0; i < options->backend_count; i++) {
            if (options->backends[i] == backend) {
                status = cli_usage_error(&cmd_run, "--backends: '%s' is listed twice", name);
                goto done;
            }
        }
        if (options->backend_count == RUN_MAX_BACKENDS) {
            status = cli_usage_error(&cmd_run, "--backends: at most %d backends", RUN_MAX_BACKENDS);
            goto done;
        }
        options->backends[options->backend_count++] = backend;
    }
    if (options->backend_count == 0)
        status = cli_usage_error(&cmd_run, "--backends: empty list");
done:
    free(copy);
    return status;
}

/* "0,1,1" or "all"; duplicates are allowed (a device compared with itself). */
static int parse_devices(const char *text, struct run_options *options)
{
    unsigned long long values[RUN_MAX_DEVICES];
    options->devices_text = text;
    if (strcmp(text, "all") == 0) {
        options->all_devices = true;
        options->device_count = 0;
        return AUDIT_OK;
    }
    int count = cli_parse_uint_list(text, values, RUN_MAX_DEVICES);
    if (count <= 0)
        return cli_usage_error(&cmd_run, "--devices: '%s' is not 'all' or a list of at most %d "
                                         "device ordinals (e.g. 0,1)", text, RUN_MAX_DEVICES);
    for (int i = 0; i < count; i++) {
        if (values[i] > 1023)
            return cli_usage_error(&cmd_run, "--devices: %llu is not a device ordinal", values[i]);
        options->devices[i] = (int)values[i];
    }
    options->all_devices = false;
    options->device_count = (size_t)count;
    return AUDIT_OK;
}

/* "I/N" with 0 <= I < N. */
static int parse_shard(const char *text, struct run_options *options)
{
    char index_text[16], count_text[16];
    const char *slash = strchr(text, '/');
    unsigned long long index, count;
    if (!slash || (size_t)(slash - text) >= sizeof(index_text) ||
        strlen(slash + 1) >= sizeof(count_text))
        goto bad;
    memcpy(index_text, text, (size_t)(slash - text));
    index_text[slash - text] = '\0';
    snprintf(count_text, sizeof(count_text), "%s", slash + 1);
    if (cli_parse_uint(index_text, RUN_MAX_SHARDS, &index) < 0 ||
        cli_parse_uint(count_text, RUN_MAX_SHARDS, &count) < 0 || count == 0 || index >= count)
        goto bad;
    options->shard_index = (uint32_t)index;
    options->shard_count = (uint32_t)count;
    return AUDIT_OK;
bad:
    return cli_usage_error(&cmd_run, "--shard: '%s' is not I/N with 0 <= I < N <= %u (e.g. 0/4)",
                           text, RUN_MAX_SHARDS);
}

static int parse_list_option(const char *text, const char *option, uint32_t **values,
                             size_t *count)
{
    struct audit_error err = { 0 };
    free(*values);
    *values = NULL;
    if (selection_parse_list(text, option, values, count, &err) < 0)
        return cli_usage_error(&cmd_run, "%s", err.message);
    return AUDIT_OK;
}

/* Plugins load here, in the main process, before any worker exists: dlopen and the checks of
 * the description make no CUDA call (docs/PLUGIN.md), and every worker forked later inherits the
 * loaded plugin. Without --backends each plugin's backend runs after the built-ins. Returns 0 or
 * an exit code. */
static int load_plugins(struct run_options *options)
{
    for (size_t i = 0; i < options->plugin_count; i++) {
        const struct topk_backend *backend = NULL;
        struct audit_error err = { 0 };
        if (plugin_load(options->plugin_paths[i], &backend, &err) < 0) {
            cli_print_message(&cmd_run, "--plugin %s: %s", options->plugin_paths[i], err.message);
            return audit_exit_code(err.code);
        }
        if (!options->backends_text) {
            if (options->backend_count == RUN_MAX_BACKENDS)
                return cli_usage_error(&cmd_run, "--plugin: at most %d backends in all",
                                       RUN_MAX_BACKENDS);
            options->backends[options->backend_count++] = backend;
        }
    }
    return EXIT_AUDIT_OK;
}

static void set_defaults(struct run_options *options)
{
    options->backend_count = 0;
    for (int i = 0; topk_backend_table[i] && i < RUN_MAX_BACKENDS; i++)
        options->backends[options->backend_count++] = topk_backend_table[i];
    options->reps = 25;
    options->noise = NOISE_GEMM;
    options->out_path = "dsatopk-report.json";
    options->format = TABLE_ON;
    options->emulate_smem_per_sm = cli_globals.emulate_smem_per_sm;
    options->timeout_ms = RUN_DEFAULT_TIMEOUT_SECONDS * 1000u;
    options->gpu_prefilter = true;
}

/* Once every option is read: the options that exclude or need each other, the plugins loaded
 * and --backends resolved against them. -1 to run, or the exit code. */
static int finish_options(struct run_options *options)
{
    if (options->device_given && options->devices_text)
        return cli_usage_error(&cmd_run, "--device and --devices exclude each other");
    if (options->devices_sequential && !options->devices_text)
        return cli_usage_error(&cmd_run, "--devices-sequential needs --devices");
    int status = load_plugins(options);
    if (status != EXIT_AUDIT_OK)
        return status;
    if (options->backends_text && parse_backends(options->backends_text, options) != AUDIT_OK)
        return EXIT_USAGE;
    if (options->baseline_out && strcmp(options->baseline_out, "-") == 0 &&
        strcmp(options->out_path, "-") == 0)
        return cli_usage_error(&cmd_run, "--out - and --baseline-out - would both write to stdout");
    return -1;
}

static const struct option run_long_options[] = {
    { "backends", required_argument, NULL, OPTION_BACKENDS },
    { "reps", required_argument, NULL, OPTION_REPS },
    { "noise", required_argument, NULL, OPTION_NOISE },
    { "out", required_argument, NULL, OPTION_OUT },
    { "dump-outputs", required_argument, NULL, OPTION_DUMP },
    { "seed", required_argument, NULL, OPTION_SEED },
    { "records", required_argument, NULL, OPTION_RECORDS },
    { "rows", required_argument, NULL, OPTION_ROWS },
    { "k", required_argument, NULL, OPTION_K },
    { "device", required_argument, NULL, OPTION_DEVICE },
    { "graph", no_argument, NULL, OPTION_GRAPH },
    { "batch-invariance", no_argument, NULL, OPTION_BATCH },
    { "emulate-smem-per-sm", required_argument, NULL, OPTION_EMULATE },
    { "format", required_argument, NULL, OPTION_FORMAT },
    { "quiet", no_argument, NULL, OPTION_QUIET },
    { "devices", required_argument, NULL, OPTION_DEVICES },
    { "devices-sequential", no_argument, NULL, OPTION_DEVICES_SEQUENTIAL },
    { "shard", required_argument, NULL, OPTION_SHARD },
    { "baseline-out", required_argument, NULL, OPTION_BASELINE_OUT },
    { "html", required_argument, NULL, OPTION_HTML },
    { "plugin", required_argument, NULL, OPTION_PLUGIN },
    { "timeout", required_argument, NULL, OPTION_TIMEOUT },
    { "no-gpu-prefilter", no_argument, NULL, OPTION_NO_GPU_PREFILTER },
    { "engine-contract", required_argument, NULL, OPTION_ENGINE_CONTRACT },
    { "help", no_argument, NULL, 'h' },
    { NULL, 0, NULL, 0 },
};

/* Returns -1 to run, or the exit code: EXIT_AUDIT_OK after --help, EXIT_USAGE, or a plugin's
 * load failure. */
static int parse_options(int argc, char **argv, struct run_options *options, int *first_path)
{
    unsigned long long value;
    int option;
    set_defaults(options);
    bool help = false;
    opterr = 0; /* messages come from cli_usage_error */
    while ((option = getopt_long(argc, argv, ":h", run_long_options, NULL)) != -1) {
        switch (option) {
        case OPTION_BACKENDS:
            /* Resolved after the loop: it may name backends of --plugin files given later. */
            options->backends_text = optarg;
            break;
        case OPTION_PLUGIN:
            if (!*optarg)
                return cli_usage_error(&cmd_run, "--plugin: empty path");
            if (options->plugin_count == RUN_MAX_BACKENDS)
                return cli_usage_error(&cmd_run, "--plugin: at most %d plugins", PLUGIN_MAX_LOADED);
            options->plugin_paths[options->plugin_count++] = optarg;
            break;
        case OPTION_TIMEOUT:
            if (cli_parse_uint(optarg, RUN_MAX_TIMEOUT_SECONDS, &value) < 0 || value == 0)
                return cli_usage_error(&cmd_run, "--timeout: '%s' is not a number of seconds from 1 "
                                                 "to %u", optarg, RUN_MAX_TIMEOUT_SECONDS);
            options->timeout_ms = (unsigned)value * 1000u;
            break;
        case OPTION_REPS:
            if (cli_parse_uint(optarg, RUN_MAX_REPS, &value) < 0 || value == 0)
                return cli_usage_error(&cmd_run, "--reps: '%s' is not a count from 1 to %llu",
                                       optarg, RUN_MAX_REPS);
            options->reps = (uint32_t)value;
            break;
        case OPTION_NOISE:
            if (noise_kind_parse(optarg, &options->noise) < 0)
                return cli_usage_error(&cmd_run, "--noise: '%s' is not none, gemm, mem, spin or "
                                                 "mixed", optarg);
            break;
        case OPTION_OUT:
            if (!*optarg)
                return cli_usage_error(&cmd_run, "--out: empty path");
            options->out_path = optarg;
            break;
        case OPTION_DUMP:
            if (!*optarg)
                return cli_usage_error(&cmd_run, "--dump-outputs: empty directory");
            options->dump_dir = optarg;
            break;
        case OPTION_SEED:
            if (cli_parse_uint(optarg, UINT64_MAX, &value) < 0)
                return cli_usage_error(&cmd_run, "--seed: '%s' is not an unsigned integer", optarg);
            options->seed = value;
            break;
        case OPTION_RECORDS:
            if (parse_list_option(optarg, "--records", &options->records, &options->record_count))
                return EXIT_USAGE;
            break;
        case OPTION_ROWS:
            if (parse_list_option(optarg, "--rows", &options->rows, &options->row_count))
                return EXIT_USAGE;
            break;
        case OPTION_K:
            if (cli_parse_uint(optarg, CAPTURE_MAX_K, &value) < 0 || value == 0)
                return cli_usage_error(&cmd_run, "--k: '%s' is not a k from 1 to %u", optarg,
                                       CAPTURE_MAX_K);
            options->k_override = (uint32_t)value;
            break;
        case OPTION_ENGINE_CONTRACT:
            if (cli_parse_engine_contract(&cmd_run, optarg, &options->engine_contract) != 0)
                return EXIT_USAGE;
            options->engine_contract_given = true;
            break;
        case OPTION_DEVICE:
            if (cli_parse_uint(optarg, 1023, &value) < 0)
                return cli_usage_error(&cmd_run, "--device: '%s' is not a device ordinal", optarg);
            options->device = (int)value;
            options->device_given = true;
            break;
        case OPTION_DEVICES:
            if (parse_devices(optarg, options) != AUDIT_OK)
                return EXIT_USAGE;
            break;
        case OPTION_DEVICES_SEQUENTIAL: options->devices_sequential = true; break;
        case OPTION_SHARD:
            if (parse_shard(optarg, options) != AUDIT_OK)
                return EXIT_USAGE;
            break;
        case OPTION_BASELINE_OUT:
            if (!*optarg)
                return cli_usage_error(&cmd_run, "--baseline-out: empty path");
            options->baseline_out = optarg;
            break;
        case OPTION_HTML:
            if (!*optarg)
                return cli_usage_error(&cmd_run, "--html: empty path");
            options->html_out = optarg;
            break;
        case OPTION_GRAPH: options->graph = true; break;
        case OPTION_NO_GPU_PREFILTER: options->gpu_prefilter = false; break;
        case OPTION_BATCH: options->batch_invariance = true; break;
        case OPTION_EMULATE:
            if (cli_parse_uint(optarg, 1ull << 32, &value) < 0)
                return cli_usage_error(&cmd_run, "--emulate-smem-per-sm: '%s' is not a byte count",
                                       optarg);
            options->emulate_smem_per_sm = value;
            break;
        case OPTION_FORMAT:
            if (strcmp(optarg, "table") == 0)
                options->format = TABLE_ON;
            else if (strcmp(optarg, "none") == 0)
                options->format = TABLE_OFF;
            else
                return cli_usage_error(&cmd_run, "--format: '%s' is not table or none", optarg);
            break;
        case OPTION_QUIET: options->quiet = true; break;
        case 'h': help = true; break;
        default: return cli_option_error(&cmd_run, option, argv);
        }
    }
    if (help) {
        cli_print_usage(&cmd_run, stdout);
        return EXIT_AUDIT_OK;
    }
    *first_path = optind;
    return finish_options(options);
}

/* ---- what the audit shows while it runs ----------------------------------------------------- */

/* The terminal side of one run: the table stream (NULL: no table) and the progress line. */
struct run_front {
    const struct run_options *options;
    FILE *table;
    bool table_header_printed;
};

/* With several --devices entries the line names the one replaying (their lines interleave
 * when they run at once). */
static void show_progress(void *user, const struct audit_progress *progress)
{
    (void)user;
    char device[48] = "";
    const char *slash = strrchr(progress->file, '/');
    if (progress->passes > 1)
        snprintf(device, sizeof(device), "entry %zu (device %d) ", progress->pass,
                 progress->ordinal);
    fprintf(stderr, "\r\033[K%s%s:%u %s %s %u/%u", device,
            terminal_safe(slash ? slash + 1 : progress->file), progress->record,
            progress->backend, progress->phase, progress->done, progress->total);
    fflush(stderr);
}

static void end_progress(void *user)
{
    (void)user;
    fprintf(stderr, "\r\033[K");
    fflush(stderr);
}

static void show_message(void *user, enum audit_message_kind kind, const char *text)
{
    const struct run_front *front = user;
    if (kind == AUDIT_MESSAGE_NOTICE && front->options->quiet)
        return;
    cli_print_message(&cmd_run, "%s", text);
}

static void show_pass(void *user, size_t pass, int ordinal, const struct gpu_device_info *device)
{
    const struct run_front *front = user;
    if (front->table)
        fprintf(front->table, "# --devices entry %zu: ordinal %d (%s)\n", pass, ordinal,
                device ? device->name : "could not be opened");
}

/* The table lines of a record's backends (each made where the backend was judged). */
static void show_record(void *user, size_t pass, const char *const *lines, size_t count)
{
    struct run_front *front = user;
    (void)pass;
    if (!front->table)
        return;
    if (!front->table_header_printed) {
        report_table_header(front->table);
        front->table_header_printed = true;
    }
    for (size_t i = 0; i < count; i++)
        if (lines[i])
            fputs(lines[i], front->table);
    fflush(front->table);
}

/* --devices: each required disagreement, then the comparison's summary. */
static void show_cross_device(void *user, const cJSON *block, bool device_available)
{
    const struct run_front *front = user;
    if (front->table)
        report_table_cross_device(front->table, block,
                                  device_available ? front->options->devices_text : "no device");
}

/* ---- what the audit leaves ------------------------------------------------------------------ */

/* --baseline-out: the baseline subset of the finished report. */
static int write_baseline(const struct run_options *options, const cJSON *report, int exit_code,
                          struct audit_error *err)
{
    cJSON *baseline = NULL;
    int status = gate_baseline_from_report(report, options->out_path, &baseline, err);
    if (status == AUDIT_OK)
        status = json_write_file(options->baseline_out, baseline, err);
    cJSON_Delete(baseline);
    if (status == AUDIT_OK && exit_code != EXIT_AUDIT_OK)
        cli_print_message(&cmd_run,
                          "warning: the baseline %s comes from a run that exited "
                          "%d; a golden baseline should come from a passing run",
                          options->baseline_out, exit_code);
    return status;
}

/* The report, the baseline and the HTML page; a failure raises exit_code to its own code
 * unless the run already ended worse. */
static void write_outputs(const struct run_options *options, const struct audit_result *result,
                          const struct run_front *front, int *exit_code)
{
    struct audit_error err = { 0 };
    const char *failed = NULL;
    const bool report_on_stdout = strcmp(options->out_path, "-") == 0;
    if (json_write_file(options->out_path, result->report.root, &err) < 0)
        failed = "";
    else if (options->baseline_out &&
             write_baseline(options, result->report.root, *exit_code, &err) < 0)
        failed = "--baseline-out: ";
    else if (options->html_out &&
             html_report_write(options->html_out, result->report.root, NULL, &err) < 0)
        failed = "--html: ";
    if (failed) {
        cli_print_message(&cmd_run, "%s%s", failed, err.message);
        if (*exit_code < EXIT_BAD_INPUT)
            *exit_code = audit_exit_code(err.code);
        return;
    }
    if (front->table) {
        report_table_summary(front->table, &result->report,
                             report_on_stdout ? NULL : options->out_path);
        if (options->baseline_out)
            fprintf(front->table, "# baseline: %s\n", terminal_safe(options->baseline_out));
        if (options->html_out)
            fprintf(front->table, "# html: %s\n", terminal_safe(options->html_out));
    }
}

/* --dump-outputs DIR: created when missing. 0 or EXIT_USAGE. */
static int prepare_dump_dir(const char *dir)
{
    struct stat info;
    if (stat(dir, &info) != 0 && mkdir(dir, 0755) != 0)
        return cli_usage_error(&cmd_run, "--dump-outputs %s: cannot create: %s", dir,
                               strerror(errno));
    if (stat(dir, &info) != 0 || !S_ISDIR(info.st_mode))
        return cli_usage_error(&cmd_run, "--dump-outputs %s: not a directory", dir);
    return EXIT_AUDIT_OK;
}

static struct audit_options audit_options_of(const struct run_options *options, char **inputs,
                                             size_t input_count)
{
    const struct audit_options audit = {
        .inputs = (const char *const *)inputs,
        .input_count = input_count,
        .backends = options->backends,
        .backend_count = options->backend_count,
        .records = options->records,
        .record_count = options->record_count,
        .rows = options->rows,
        .row_count = options->row_count,
        .k_override = options->k_override,
        .engine_contract = options->engine_contract_given ? &options->engine_contract : NULL,
        .shard_index = options->shard_index,
        .shard_count = options->shard_count,
        .reps = options->reps,
        .noise = options->noise,
        .seed = options->seed,
        .graph = options->graph,
        .batch_invariance = options->batch_invariance,
        .gpu_prefilter = options->gpu_prefilter,
        .dump_dir = options->dump_dir,
        .emulate_smem_per_sm = options->emulate_smem_per_sm,
        .timeout_ms = options->timeout_ms,
        .device = options->device,
        .devices = options->devices,
        .device_count = options->device_count,
        .all_devices = options->all_devices,
        .devices_text = options->devices_text,
        .devices_sequential = options->devices_sequential,
        .version_string = cli_version(),
        .command_line = cli_command_line(),
    };
    return audit;
}

static int run_run(int argc, char **argv)
{
    struct run_options options = { 0 };
    struct run_front front = { .options = &options };
    struct audit_result result = { 0 };
    struct audit_error err = { 0 };
    bool signals_installed = false;
    int first_path = 0;
    int exit_code = parse_options(argc, argv, &options, &first_path);
    if (exit_code >= 0)
        goto done;
    exit_code = options.dump_dir ? prepare_dump_dir(options.dump_dir) : EXIT_AUDIT_OK;
    if (exit_code != EXIT_AUDIT_OK)
        goto done;

    const bool report_on_stdout = strcmp(options.out_path, "-") == 0;
    if (!options.quiet && options.format == TABLE_ON)
        front.table = report_on_stdout ? stderr : stdout;
    const bool progress = !options.quiet && isatty(STDERR_FILENO);
    const struct audit_callbacks callbacks = {
        .user = &front,
        .progress = progress ? show_progress : NULL,
        .progress_end = end_progress,
        .message = show_message,
        .pass_start = show_pass,
        .record_done = show_record,
        .cross_device = show_cross_device,
    };
    const struct audit_options audit = audit_options_of(&options, argv + first_path,
                                                        (size_t)(argc - first_path));
    /* SIGINT and SIGTERM from here on: the workers are stopped and the report is written. */
    if (worker_signals_install() == 0)
        signals_installed = true;
    int status = audit_run(&audit, &callbacks, &result, &err);
    exit_code = result.exit_code;
    if (status == AUDIT_EUSAGE)
        cli_usage_error(&cmd_run, "%s", err.message);
    else if (status < 0)
        cli_print_message(&cmd_run, "%s", err.message);
    else
        write_outputs(&options, &result, &front, &exit_code);
done:
    audit_result_release(&result);
    if (signals_installed)
        worker_signals_restore();
    plugin_unload_all();
    free(options.records);
    free(options.rows);
    return exit_code;
}

const struct cli_command cmd_run = {
    "run",
    "replay captures on every backend under a noisy sibling stream; JSON report",
    run_usage,
    run_run,
};
