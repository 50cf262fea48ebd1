/* run: replays every selected capture record on every selected backend, reps times, under a
 * noisy sibling stream; writes the JSON report and prints one table line per record x backend
 * (docs/REPORT.md). This file parses options and drives: src/replay/replay.c does the GPU work,
 * src/report/report.c the accounting, verdicts, JSON and table. */
#include <dirent.h>
#include <errno.h>
#include <getopt.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "capture.h"
#include "census.h"
#include "checks.h"
#include "cli.h"
#include "error.h"
#include "gate.h"
#include "hash.h"
#include "html_report.h"
#include "json_util.h"
#include "plugin.h"
#include "record_wire.h"
#include "replay.h"
#include "report.h"
#include "selection.h"
#include "topk_backends.h"
#include "version.h"
#include "worker.h"

/* docs/FORMAT.md: a record is a 72-byte header followed by its stored payload, and the first
 * record starts at byte 0; this locates the record after the last good one. */
#define RUN_RECORD_HEADER_BYTES 72u
#define RUN_MAX_BACKENDS 32
#define RUN_MAX_REPS 100000ull
#define RUN_DEFAULT_CAPTURES "captures"
/* --devices: entries in the list (the same device may appear several times). */
#define RUN_MAX_DEVICES 64
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
    "  --device N               CUDA device ordinal (default 0)\n"
    "  --devices LIST           run the whole audit on each listed device in turn (e.g. 0,1 or\n"
    "                           all; a device listed twice is compared with itself) and add a\n"
    "                           cross_device block: do the output hashes agree across devices?\n"
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
    "exit codes: 0 every backend run meets its claimed level (unsupported and unavailable do not\n"
    "            fail); 1 a backend failed its level or hit an error, or devices that must agree\n"
    "            (--devices) disagree; 2 usage error (also a --rows row a record does not have);\n"
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
    const char *backend_names[RUN_MAX_BACKENDS];
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
    int device;
    bool device_given;
    int devices[RUN_MAX_DEVICES]; /* --devices, in order; device_count 0: not given */
    size_t device_count;
    bool all_devices;             /* --devices all: filled once the device count is known */
    const char *devices_text;
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

/* What the device probe worker found (the parent never initialises CUDA itself). */
struct device_probe {
    int count;
    char why[512];
    bool queried[RUN_MAX_DEVICES];
    struct gpu_device_info info[RUN_MAX_DEVICES];
    char query_error[AUDIT_ERROR_MESSAGE_BYTES]; /* the first failed query */
};

/* Everything one run carries from record to record. */
struct run_state {
    const struct run_options *options;
    struct run_report report;
    struct device_probe probe;
    int ordinal;                    /* the device this pass replays on */
    bool device_available;
    char unavailable_reason[AUDIT_ERROR_MESSAGE_BYTES];
    FILE *table;                    /* NULL: no table */
    bool progress;
    bool table_header_printed;
    /* Outcome, folded into the exit code at the end. */
    bool any_failure, bad_input, bad_selection, device_failed;
    bool stopped;                   /* a fatal error ended the run early */
    int fatal_status;
    char stop_reason[AUDIT_ERROR_MESSAGE_BYTES];
    /* Progress line context. */
    const char *progress_file;
    uint32_t progress_record;
    /* --shard numbering and --devices passes. */
    uint64_t next_global_index;
    size_t pass;                    /* the --devices entry this pass runs on (0 without) */
    cJSON *record_cursor;           /* pass 0: the record added last; later passes: where the
                                       search for the record being replayed starts */
    cJSON *device_identity;         /* this pass's device for per_device[] (NULL without) */
    bool any_device_lost;
    int stop_signal;                /* SIGINT or SIGTERM ended the run (0: none) */
    struct worker_session session;  /* the session worker of this pass (docs/REPORT.md) */
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
        options->backends[options->backend_count] = backend;
        options->backend_names[options->backend_count++] = backend->name;
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

/* Returns 0 to run, EXIT_AUDIT_OK after --help, or EXIT_USAGE. */
static int parse_options(int argc, char **argv, struct run_options *options, int *first_path)
{
    static const struct option long_options[] = {
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
        { "shard", required_argument, NULL, OPTION_SHARD },
        { "baseline-out", required_argument, NULL, OPTION_BASELINE_OUT },
        { "html", required_argument, NULL, OPTION_HTML },
        { "plugin", required_argument, NULL, OPTION_PLUGIN },
        { "timeout", required_argument, NULL, OPTION_TIMEOUT },
        { "no-gpu-prefilter", no_argument, NULL, OPTION_NO_GPU_PREFILTER },
        { "help", no_argument, NULL, 'h' },
        { NULL, 0, NULL, 0 },
    };
    unsigned long long value;
    int option;
    options->backend_count = 0;
    for (int i = 0; topk_backend_table[i] && i < RUN_MAX_BACKENDS; i++) {
        options->backends[options->backend_count] = topk_backend_table[i];
        options->backend_names[options->backend_count++] = topk_backend_table[i]->name;
    }
    options->reps = 25;
    options->noise = NOISE_GEMM;
    options->out_path = "dsatopk-report.json";
    options->format = TABLE_ON;
    options->emulate_smem_per_sm = cli_globals.emulate_smem_per_sm;
    options->timeout_ms = RUN_DEFAULT_TIMEOUT_SECONDS * 1000u;
    options->gpu_prefilter = true;
    while ((option = getopt_long(argc, argv, "h", long_options, NULL)) != -1) {
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
        case 'h': cli_print_usage(&cmd_run, stdout); return EXIT_AUDIT_OK;
        default: return cli_usage_error(&cmd_run, "unknown option (see --help)");
        }
    }
    if (options->device_given && options->devices_text)
        return cli_usage_error(&cmd_run, "--device and --devices exclude each other");
    /* Plugins load here, in the parent, before any worker exists: dlopen and the checks of the
     * description make no CUDA call (docs/PLUGIN.md), and every worker forked later inherits
     * the loaded plugin. */
    for (size_t i = 0; i < options->plugin_count; i++) {
        const struct topk_backend *backend = NULL;
        struct audit_error err = { 0 };
        if (plugin_load(options->plugin_paths[i], &backend, &err) < 0) {
            fprintf(stderr, "dsatopk-audit run: --plugin %s: %s\n", options->plugin_paths[i],
                    err.message);
            return audit_exit_code(err.code);
        }
        if (!options->backends_text) {
            if (options->backend_count == RUN_MAX_BACKENDS)
                return cli_usage_error(&cmd_run, "--plugin: at most %d backends in all",
                                       RUN_MAX_BACKENDS);
            options->backends[options->backend_count] = backend;
            options->backend_names[options->backend_count++] = backend->name;
        }
    }
    if (options->backends_text && parse_backends(options->backends_text, options) != AUDIT_OK)
        return EXIT_USAGE;
    if (options->baseline_out && strcmp(options->baseline_out, "-") == 0 &&
        strcmp(options->out_path, "-") == 0)
        return cli_usage_error(&cmd_run, "--out - and --baseline-out - would both write to stdout");
    *first_path = optind;
    return -1;
}

/* ---- inputs --------------------------------------------------------------------------------- */

struct path_list {
    char **paths;
    size_t count, capacity;
};

static int path_list_add(struct path_list *list, const char *path)
{
    if (list->count == list->capacity) {
        size_t capacity = list->capacity ? 2 * list->capacity : 16;
        char **grown = realloc(list->paths, capacity * sizeof(char *));
        if (!grown)
            return AUDIT_ENOMEM;
        list->paths = grown;
        list->capacity = capacity;
    }
    list->paths[list->count] = strdup(path);
    if (!list->paths[list->count])
        return AUDIT_ENOMEM;
    list->count++;
    return AUDIT_OK;
}

static void path_list_free(struct path_list *list)
{
    for (size_t i = 0; i < list->count; i++)
        free(list->paths[i]);
    free(list->paths);
    memset(list, 0, sizeof(*list));
}

static int compare_strings(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

/* A directory contributes its *.bin files in name order; anything else is taken as a file (a
 * missing one is reported when it is opened). */
static int expand_path(struct path_list *list, const char *path, struct audit_error *err)
{
    struct stat info;
    if (stat(path, &info) != 0 || !S_ISDIR(info.st_mode))
        return path_list_add(list, path) < 0
                   ? audit_fail(err, AUDIT_ENOMEM, "out of memory listing inputs")
                   : AUDIT_OK;
    DIR *directory = opendir(path);
    if (!directory)
        return audit_fail(err, AUDIT_EIO, "%s: cannot list: %s", path, strerror(errno));
    int status = AUDIT_OK;
    size_t first = list->count;
    struct dirent *entry;
    while ((entry = readdir(directory)) != NULL) {
        size_t length = strlen(entry->d_name);
        if (length < 5 || strcmp(entry->d_name + length - 4, ".bin") != 0)
            continue;
        char joined[4096];
        size_t path_length = strlen(path);
        bool slash = path_length > 0 && path[path_length - 1] == '/';
        if (snprintf(joined, sizeof(joined), "%s%s%s", path, slash ? "" : "/", entry->d_name) >=
            (int)sizeof(joined)) {
            status = audit_fail(err, AUDIT_EIO, "%s/%s: path too long", path, entry->d_name);
            break;
        }
        if (path_list_add(list, joined) < 0) {
            status = audit_fail(err, AUDIT_ENOMEM, "out of memory listing %s", path);
            break;
        }
    }
    closedir(directory);
    if (status == AUDIT_OK && list->count == first)
        status = audit_fail(err, AUDIT_EIO, "%s: no .bin capture files in this directory", path);
    if (status == AUDIT_OK)
        qsort(list->paths + first, list->count - first, sizeof(char *), compare_strings);
    return status;
}

/* "captures/plateau-64x32768.bin" -> "plateau-64x32768" (dump file names). */
static void file_stem(const char *path, char *stem, size_t size)
{
    const char *slash = strrchr(path, '/');
    snprintf(stem, size, "%s", slash ? slash + 1 : path);
    char *dot = strrchr(stem, '.');
    if (dot && dot != stem)
        *dot = '\0';
}

static bool list_contains(const uint32_t *sorted, size_t count, uint32_t value)
{
    size_t low = 0, high = count;
    while (low < high) {
        size_t middle = low + (high - low) / 2;
        if (sorted[middle] == value)
            return true;
        if (sorted[middle] < value)
            low = middle + 1;
        else
            high = middle;
    }
    return false;
}

/* ---- progress and fatal stops --------------------------------------------------------------- */

static void show_progress(void *user, const char *backend, const char *phase, uint32_t done,
                          uint32_t total)
{
    struct run_state *state = user;
    const char *slash = strrchr(state->progress_file, '/');
    fprintf(stderr, "\r\033[K%s:%u %s %s %u/%u", slash ? slash + 1 : state->progress_file,
            state->progress_record, backend, phase, done, total);
    fflush(stderr);
}

static void clear_progress(const struct run_state *state)
{
    if (state->progress) {
        fprintf(stderr, "\r\033[K");
        fflush(stderr);
    }
}

/* A failure that ends the run: the report written so far is kept, marked incomplete. */
static void stop_run(struct run_state *state, int status, const char *message)
{
    if (state->stopped)
        return;
    state->stopped = true;
    state->fatal_status = status;
    snprintf(state->stop_reason, sizeof(state->stop_reason), "%s", message);
    fprintf(stderr, "dsatopk-audit run: %s\n", message);
}

static void device_lost(struct run_state *state, const char *message)
{
    if (state->device_failed)
        return;
    state->device_failed = true;
    snprintf(state->stop_reason, sizeof(state->stop_reason), "%s", message);
    fprintf(stderr, "dsatopk-audit run: %s; the remaining GPU work is skipped\n", message);
}

static void input_error(struct run_state *state, const char *file, int64_t record, int64_t offset,
                        const char *kind, const char *message)
{
    struct audit_error err = { 0 };
    /* Every --devices pass reads the same inputs: the first pass reported their errors. */
    if (state->pass > 0)
        return;
    clear_progress(state);
    fprintf(stderr, "dsatopk-audit run: %s\n", message);
    if (strcmp(kind, "selection") == 0)
        state->bad_selection = true;
    else
        state->bad_input = true;
    if (report_add_input_error(&state->report, file, record, offset, kind, message, &err) < 0)
        stop_run(state, err.code, err.message);
}

/* ---- one record ----------------------------------------------------------------------------- */

/* Prints the table lines of a record's backends (each made where the backend was judged). */
static void print_record(struct run_state *state, char *const *table_lines)
{
    clear_progress(state);
    if (!state->table)
        return;
    if (!state->table_header_printed) {
        report_table_header(state->table);
        state->table_header_printed = true;
    }
    for (size_t i = 0; i < state->options->backend_count; i++)
        if (table_lines[i])
            fputs(table_lines[i], state->table);
    fflush(state->table);
}

/* ---- --devices: per-device results ---------------------------------------------------------- */

/* The device of one --devices entry as per_device[] and cross_device show it; info NULL when
 * the device could not be opened. */
static cJSON *device_identity_json(size_t index, int ordinal, const struct gpu_device_info *info)
{
    cJSON *json = cJSON_CreateObject();
    char text[32];
    if (!json)
        return NULL;
    json_add_u64(json, "index", index);
    cJSON_AddNumberToObject(json, "ordinal", ordinal);
    if (!info) {
        cJSON_AddNullToObject(json, "name");
        return json;
    }
    cJSON_AddStringToObject(json, "name", info->name);
    snprintf(text, sizeof(text), "%d.%d", info->cc_major, info->cc_minor);
    cJSON_AddStringToObject(json, "compute_capability", text);
    cJSON_AddNumberToObject(json, "sm_count", info->sm_count);
    json_add_u64(json, "smem_per_sm_bytes", info->smem_per_sm);
    cJSON_AddBoolToObject(json, "smem_emulated", info->smem_emulated);
    cJSON_AddNumberToObject(json, "driver_version_number", info->driver_version);
    cJSON_AddNumberToObject(json, "runtime_version_number", info->runtime_version);
    return json;
}

static cJSON *json_child(const cJSON *object, const char *key)
{
    return cJSON_GetObjectItemCaseSensitive(object, key);
}

/* Appends the backends of source (a record object of this pass) to the per_device[] lists of
 * target's backends (the record in the report), each with this pass's device. */
static int attach_per_device(struct run_state *state, cJSON *target, const cJSON *source,
                             struct audit_error *err)
{
    const cJSON *target_list = json_child(target, "backends");
    const cJSON *source_list = json_child(source, "backends");
    cJSON *target_backend = target_list ? target_list->child : NULL;
    const cJSON *source_backend = source_list ? source_list->child : NULL;
    for (; target_backend && source_backend;
         target_backend = target_backend->next, source_backend = source_backend->next) {
        const cJSON *name = json_child(source_backend, "name");
        const cJSON *target_name = json_child(target_backend, "name");
        if (!cJSON_IsString(name) || !cJSON_IsString(target_name) ||
            strcmp(name->valuestring, target_name->valuestring) != 0)
            return audit_fail(err, AUDIT_EDATA, "--devices: the backends of a record differ "
                                                "between passes (%s)",
                              cJSON_IsString(name) ? name->valuestring : "unnamed");
        /* Copied before per_device is added: in the first pass source is target. */
        cJSON *copy = cJSON_Duplicate(source_backend, 1);
        cJSON *identity = cJSON_Duplicate(state->device_identity, 1);
        cJSON *list = json_child(target_backend, "per_device");
        if (!list)
            list = cJSON_AddArrayToObject(target_backend, "per_device");
        if (!copy || !identity || !list) {
            cJSON_Delete(copy);
            cJSON_Delete(identity);
            return audit_fail(err, AUDIT_ENOMEM, "out of memory recording per-device results");
        }
        cJSON_DeleteItemFromObjectCaseSensitive(copy, "per_device");
        cJSON_AddItemToObject(copy, "device", identity);
        cJSON_AddItemToArray(list, copy);
    }
    return AUDIT_OK;
}

/* The report's record for file and index, searched from the cursor on (passes replay the
 * records in the same order, so this is usually the next one). */
static cJSON *find_record_json(struct run_state *state, const char *file, uint32_t index)
{
    cJSON *records = state->report.records;
    for (int round = 0; round < 2; round++) {
        cJSON *start = round == 0 ? state->record_cursor : records->child;
        for (cJSON *record = start; record; record = record->next) {
            if (round == 1 && record == state->record_cursor)
                break;
            const cJSON *record_file = json_child(record, "file");
            const cJSON *record_index = json_child(record, "index");
            if (cJSON_IsString(record_file) && strcmp(record_file->valuestring, file) == 0 &&
                cJSON_IsNumber(record_index) && (uint32_t)record_index->valuedouble == index) {
                state->record_cursor = record->next;
                return record;
            }
        }
    }
    return NULL;
}

/* First pass: the record goes into the report (with its global number and, with --devices, a
 * first per_device[] entry). entries: one judged entry per backend, moved into the report. */
static int add_record(struct run_state *state, const struct record_result *result, cJSON **entries,
                      uint64_t global_index, struct audit_error *err)
{
    if (report_add_record_entries(&state->report, result, entries, state->options->backend_count,
                                  err) < 0)
        return err->code;
    cJSON *added = state->record_cursor ? state->record_cursor->next : state->report.records->child;
    if (!added || !json_add_u64(added, "global_index", global_index))
        return audit_fail(err, AUDIT_ENOMEM, "out of memory reporting %s record %u", result->file,
                          result->record->index);
    state->record_cursor = added;
    if (state->device_identity)
        return attach_per_device(state, added, added, err);
    return AUDIT_OK;
}

/* A later --devices pass: the record's entries are attached to the first pass's record. */
static int add_device_pass(struct run_state *state, const struct record_result *result,
                           cJSON **entries, struct audit_error *err)
{
    /* The table's time lines cover every device's work. */
    for (size_t i = 0; i < state->options->backend_count; i++) {
        struct time_breakdown time;
        time_breakdown_from_json(json_child(entries[i], "time_breakdown_ms"), &time);
        report_count_time(&state->report, state->options->backends[i]->name, &time);
    }
    cJSON *json = report_record_json_entries(result, entries, state->options->backend_count);
    if (!json)
        return audit_fail(err, AUDIT_ENOMEM, "out of memory reporting %s record %u", result->file,
                          result->record->index);
    cJSON *target = find_record_json(state, result->file, result->record->index);
    int status = AUDIT_OK;
    if (target)
        status = attach_per_device(state, target, json, err);
    cJSON_Delete(json);
    return status;
}

/* ---- the worker of one record --------------------------------------------------------------- */

/* One record's GPU work: task i replays backend i in a worker process (src/replay/worker.h). The
 * worker inherits everything here through fork: the record, its checks and census. */
struct record_job {
    struct run_state *state;
    const struct record_result *base;     /* record-level fields; no backends */
    struct check_context *checks;
    const struct replay_options *replay;
    cJSON **entries;                      /* per backend: its judged entry (NULL: none yet) */
    char **table_lines;                   /* per backend: its lines of the terminal table */
};

/* The plugin a backend comes from, in its entry (docs/PLUGIN.md). */
static void add_plugin_source(cJSON *entry, const struct topk_backend *backend)
{
    const char *path = plugin_backend_path(backend);
    if (!entry || !path)
        return;
    cJSON *plugin = cJSON_AddObjectToObject(entry, "plugin");
    if (!plugin)
        return;
    cJSON_AddStringToObject(plugin, "path", path);
    const char *sha256 = plugin_backend_sha256(backend);
    if (sha256)
        cJSON_AddStringToObject(plugin, "sha256", sha256);
    else
        cJSON_AddNullToObject(plugin, "sha256");
}

/* Judges result and returns its entry and table lines (malloc'd); false when out of memory. */
static bool judge_backend_result(const struct record_job *job, struct backend_result *result,
                                 cJSON **entry, char **table)
{
    struct verdict_result verdict;
    struct record_result single = *job->base;
    size_t table_bytes = 0;
    single.backends = result;
    single.backend_count = 1;
    report_verdict(result, job->base->census_rows, &verdict);
    *entry = report_backend_json(&single, result, &verdict);
    add_plugin_source(*entry, result->backend);
    *table = NULL;
    FILE *stream = open_memstream(table, &table_bytes);
    if (stream) {
        report_table_lines(stream, &single, &verdict);
        fclose(stream);
    }
    if (!*entry || !*table) {
        cJSON_Delete(*entry);
        free(*table);
        *entry = NULL;
        *table = NULL;
        return false;
    }
    return true;
}

/* Child side: sends {"entry": {...}, "table": "..."} or {"fatal": {"code", "message"}} or
 * {"device_error": "..."}. */
static int send_json(struct worker_channel *channel, cJSON *message)
{
    char *text = message ? cJSON_PrintUnformatted(message) : NULL;
    int status = text ? worker_send(channel, text, strlen(text)) : AUDIT_ENOMEM;
    free(text);
    cJSON_Delete(message);
    return status;
}

static int send_failure(struct worker_channel *channel, const char *key, int code,
                        const char *message)
{
    cJSON *json = cJSON_CreateObject();
    cJSON *body = json ? cJSON_AddObjectToObject(json, key) : NULL;
    if (body) {
        cJSON_AddNumberToObject(body, "code", code);
        cJSON_AddStringToObject(body, "message", message);
    }
    return send_json(channel, json);
}

/* The reference output's hash and set hash, into result. */
static int reference_hashes(const struct check_context *checks,
                            const struct capture_record *replayed, uint32_t k,
                            struct record_result *result, struct audit_error *err)
{
    hash_indices(checks->reference, (size_t)replayed->rows * k, result->reference_hash);
    if (hash_index_sets(checks->reference, replayed->rows, k, result->reference_set_hash) < 0)
        return audit_fail(err, AUDIT_ENOMEM, "out of memory hashing the reference sets");
    return AUDIT_OK;
}

/* How the backends of one record replay. */
static struct replay_options record_replay_options(struct run_state *state, const char *file,
                                                   const char *stem, uint32_t record_index)
{
    const struct run_options *options = state->options;
    const struct replay_options replay_options = {
        .reps = options->reps,
        .graph = options->graph,
        .batch_invariance = options->batch_invariance,
        .seed = options->seed,
        .dump_dir = options->dump_dir,
        .dump_stem = stem,
        .gpu_prefilter = options->gpu_prefilter,
        .file = file,
        .record_index = record_index,
        .progress = state->progress ? show_progress : NULL,
        .progress_user = state,
    };
    return replay_options;
}

/* Replays backends first .. of job on device, sending one message each. Returns 0 when every
 * one was sent; WORKER_JOB_LEAVE after a sticky CUDA error (the context is poisoned: the rest
 * needs a fresh process), or after a fatal error was sent; 2 when the pipe broke, 3 when out of
 * memory. *device_open_ms (the process's CUDA start, not yet charged) goes to the first backend
 * replayed (a worker started again after a crash pays it again, for the backend it starts with). */
static int replay_backends_from(struct worker_channel *channel, size_t first,
                                struct replay_device *device, struct replay_input *input,
                                double *device_open_ms, const struct record_job *job)
{
    const struct run_options *options = job->state->options;
    struct audit_error err = { 0 };
    for (size_t task = first; task < options->backend_count; task++) {
        struct backend_result result;
        cJSON *entry = NULL;
        char *table = NULL;
        backend_result_init(&result, options->backends[task]);
        result.graph_requested = options->graph;
        result.batch_requested = options->batch_invariance;
        int status = replay_backend(device, input, options->backends[task], job->checks,
                                    job->replay, &result, &err);
        if (status != AUDIT_EDEVICE && task + 1 == options->backend_count) {
            /* The record's noise ends with its last backend: charged to it when it replayed (an
             * unsupported one shows no time; the wait is then in the record's backends_ms). */
            struct time_breakdown drained = { 0 };
            struct audit_error ignored = { 0 };
            (void)replay_noise_drain(device, &drained, &ignored);
            if (result.status == BACKEND_OK)
                time_breakdown_add(&result.time, &drained);
        }
        result.time.device_open_ms += *device_open_ms;
        result.time.total_ms += *device_open_ms;
        *device_open_ms = 0;
        const bool lost = status == AUDIT_EDEVICE;
        if (status < 0 && !lost) {
            backend_result_release(&result);
            return send_failure(channel, "fatal", status, err.message) < 0 ? 2 : WORKER_JOB_LEAVE;
        }
        if (lost)
            /* A sticky error: the backend's own fault, contained to this process. */
            backend_result_set_status(&result, BACKEND_CUDA_ERROR, "%s", err.message);
        cJSON *message = cJSON_CreateObject();
        if (!message || !judge_backend_result(job, &result, &entry, &table)) {
            cJSON_Delete(message);
            backend_result_release(&result);
            return 3;
        }
        backend_result_release(&result);
        cJSON_AddItemToObject(message, "entry", entry);
        cJSON_AddStringToObject(message, "table", table);
        free(table);
        if (send_json(channel, message) < 0)
            return 2;
        if (lost)
            return WORKER_JOB_LEAVE;
    }
    return 0;
}

/* A worker forked for one record (records too big to send to the session worker): the job is
 * the parent's own, as it was at the fork. */
static int record_worker_main(struct worker_channel *channel, size_t first, void *user)
{
    const struct record_job *job = user;
    const struct run_options *options = job->state->options;
    struct replay_device *device = NULL;
    struct replay_input *input = NULL;
    struct audit_error err = { 0 };
    const double started_ms = report_monotonic_ms();
    int status = replay_device_open(&device, job->state->ordinal,
                                    (size_t)options->emulate_smem_per_sm, options->noise, &err);
    if (status < 0)
        return send_failure(channel, "device_error", status, err.message) < 0 ? 2 : 0;
    double device_open_ms = report_monotonic_ms() - started_ms;
    status = replay_input_create(device, job->base->record, job->base->k, &input, &err);
    if (status < 0)
        status = send_failure(channel, "fatal", status, err.message) < 0 ? 2 : 0;
    else
        status = replay_backends_from(channel, first, device, input, &device_open_ms, job);
    /* A poisoned context may refuse its teardown; the process exit releases it anyway. */
    if (!replay_device_lost(device)) {
        replay_input_free(input);
        replay_device_close(device);
    }
    return status == WORKER_JOB_LEAVE ? 0 : status;
}

/* ---- the session worker: every record of a device pass in one process ------------------------
 *
 * Creating a CUDA context takes ~130 ms on the H200 (docs/PERF.md "The audit itself"), more than
 * all the kernels of a 25-rep audit of a large record; a worker forked per record paid it every
 * time. The session worker is forked once per device pass, starts CUDA while the main process
 * reads the first record, and replays record after record: each is sent to it whole
 * (src/replay/record_wire.h, through the session's socket), and it prepares the checks and the census of
 * each again for its own judging (the main process has its own for the report). A crash, hang or
 * poisoned context ends it like a per-record worker, and a fresh one takes the rest. */

/* The session worker's own state: only ever set in that process. */
static struct {
    struct replay_device *device;
    double device_open_ms; /* its CUDA start, not yet charged to a backend */
    int open_status;
    char open_error[AUDIT_ERROR_MESSAGE_BYTES];
    const struct run_state *state;
    pthread_t opener;      /* the CUDA start, on a thread of its own */
    bool opening;          /* opener not joined yet */
} session_worker;

static void *session_worker_open(void *unused)
{
    (void)unused;
    const struct run_options *options = session_worker.state->options;
    struct audit_error err = { 0 };
    const double started_ms = report_monotonic_ms();
    session_worker.open_status = replay_device_open(&session_worker.device,
                                                    session_worker.state->ordinal,
                                                    (size_t)options->emulate_smem_per_sm,
                                                    options->noise, &err);
    session_worker.device_open_ms = report_monotonic_ms() - started_ms;
    if (session_worker.open_status < 0)
        snprintf(session_worker.open_error, sizeof(session_worker.open_error), "%s",
                 err.message);
    return NULL;
}

/* The session worker's start (worker_start_fn): CUDA starts on a thread, so that the worker
 * reads its first record and prepares its checks and census meanwhile (the context takes
 * ~130 ms on the H200, docs/PERF.md "The audit itself"). */
static void session_worker_start(void *user)
{
    session_worker.state = user;
    /* The thread blocks every signal: they keep going to the worker's main thread. */
    sigset_t all, previous;
    sigfillset(&all);
    pthread_sigmask(SIG_SETMASK, &all, &previous);
    session_worker.opening =
        pthread_create(&session_worker.opener, NULL, session_worker_open, NULL) == 0;
    pthread_sigmask(SIG_SETMASK, &previous, NULL);
    if (!session_worker.opening)
        session_worker_open(NULL);
}

/* Waits for the CUDA start (once) and makes its context this thread's: 0 or its failure. */
static int session_worker_opened(void)
{
    if (session_worker.opening) {
        pthread_join(session_worker.opener, NULL);
        session_worker.opening = false;
        if (session_worker.open_status == AUDIT_OK) {
            struct audit_error err = { 0 };
            session_worker.open_status = replay_device_attach(session_worker.device, &err);
            if (session_worker.open_status < 0)
                snprintf(session_worker.open_error, sizeof(session_worker.open_error), "%s",
                         err.message);
        }
    }
    return session_worker.open_status;
}

/* The session worker's job (worker_job_fn): one record, backends first .. */
static int session_worker_job(struct worker_channel *channel, size_t first, void *buffer,
                              size_t bytes, void *user)
{
    struct run_state *state = user;
    const struct run_options *options = state->options;
    struct capture_record record;
    struct check_context checks;
    struct record_result result = { 0 };
    struct census_row *census_rows = NULL;
    cJSON *census = NULL;
    struct replay_input *input = NULL;
    struct audit_error err = { 0 };
    const char *file = NULL, *stem = NULL;
    uint32_t k = 0;
    int status;
    if (!record_wire_decode(buffer, bytes, &record, &k, &file, &stem))
        return send_failure(channel, "fatal", AUDIT_EIO,
                            "the session worker got a malformed record") < 0 ? 2
                                                                           : WORKER_JOB_LEAVE;
    /* The record's CPU side first: the first record's runs beside the CUDA start. */
    memset(&checks, 0, sizeof(checks));
    status = checks_prepare(&checks, &record, k, &err);
    const bool checks_ready = status == AUDIT_OK;
    if (status == AUDIT_OK)
        status = census_record_json(&record, &k, 1, &census, &census_rows, &err);
    if (status == AUDIT_OK)
        status = reference_hashes(&checks, &record, k, &result, &err);
    if (session_worker_opened() < 0) {
        status = send_failure(channel, "device_error", session_worker.open_status,
                              session_worker.open_error) < 0 ? 2 : WORKER_JOB_LEAVE;
        goto done;
    }
    if (status == AUDIT_OK)
        status = replay_input_create(session_worker.device, &record, k, &input, &err);
    if (status < 0) {
        status = send_failure(channel, "fatal", status, err.message) < 0 ? 2 : WORKER_JOB_LEAVE;
        goto done;
    }
    result.file = file;
    result.record = &record;
    result.k = k;
    result.source_rows = options->rows;
    result.census = census;
    result.census_rows = census_rows;
    const struct replay_options replay_options = record_replay_options(state, file, stem,
                                                                       record.index);
    state->progress_file = file;
    state->progress_record = record.index;
    const struct record_job job = {
        .state = state, .base = &result, .checks = &checks, .replay = &replay_options,
    };
    status = replay_backends_from(channel, first, session_worker.device, input,
                                  &session_worker.device_open_ms, &job);
    if (!replay_device_lost(session_worker.device))
        replay_input_free(input);
done:
    if (checks_ready)
        checks_release(&checks);
    cJSON_Delete(census);
    free(census_rows);
    return status;
}

/* Parent side: an entry made here for a backend whose worker gave no result. */
static int local_entry(struct record_job *job, size_t task, enum backend_status status,
                       const char *format, ...) __attribute__((format(printf, 4, 5)));
static int local_entry(struct record_job *job, size_t task, enum backend_status status,
                       const char *format, ...)
{
    struct backend_result result;
    va_list args;
    backend_result_init(&result, job->state->options->backends[task]);
    result.graph_requested = job->state->options->graph;
    result.batch_requested = job->state->options->batch_invariance;
    result.status = status;
    va_start(args, format);
    vsnprintf(result.reason, sizeof(result.reason), format, args);
    va_end(args);
    cJSON_Delete(job->entries[task]);
    free(job->table_lines[task]);
    bool made = judge_backend_result(job, &result, &job->entries[task], &job->table_lines[task]);
    backend_result_release(&result);
    return made ? AUDIT_OK : AUDIT_ENOMEM;
}

static int on_record_result(void *user, size_t task, const struct worker_event *event)
{
    struct record_job *job = user;
    struct run_state *state = job->state;
    const struct record_result *base = job->base;
    const char *name = state->options->backends[task]->name;
    if (event->outcome == WORKER_HANG)
        return local_entry(job, task, BACKEND_HANG, "%s record %u, backend %s: %s (--timeout %u)",
                           base->file, base->record->index, name, event->description,
                           state->options->timeout_ms / 1000u);
    if (event->outcome == WORKER_CRASH)
        return local_entry(job, task, BACKEND_CRASH, "%s record %u, backend %s: the worker "
                                                      "process %s",
                           base->file, base->record->index, name, event->description);
    cJSON *message = cJSON_ParseWithLength(event->data, event->bytes);
    cJSON *entry = cJSON_DetachItemFromObjectCaseSensitive(message, "entry");
    const cJSON *table = cJSON_GetObjectItemCaseSensitive(message, "table");
    const cJSON *fatal = cJSON_GetObjectItemCaseSensitive(message, "fatal");
    const cJSON *device_error = cJSON_GetObjectItemCaseSensitive(message, "device_error");
    int status = AUDIT_OK;
    if (entry && cJSON_IsObject(entry) && cJSON_IsString(table)) {
        cJSON_Delete(job->entries[task]);
        free(job->table_lines[task]);
        job->entries[task] = entry;
        job->table_lines[task] = strdup(table->valuestring);
        entry = NULL;
        if (!job->table_lines[task])
            status = AUDIT_ENOMEM;
    } else if (fatal || device_error) {
        const cJSON *failure = fatal ? fatal : device_error;
        const cJSON *code = cJSON_GetObjectItemCaseSensitive(failure, "code");
        const cJSON *text = cJSON_GetObjectItemCaseSensitive(failure, "message");
        const char *why = cJSON_IsString(text) ? text->valuestring : "(no message)";
        status = cJSON_IsNumber(code) && code->valueint < 0 ? code->valueint : AUDIT_EDEVICE;
        if (device_error) {
            /* The device itself could not be set up: the rest of the GPU work is skipped. */
            device_lost(state, why);
            status = AUDIT_EDEVICE;
        } else {
            stop_run(state, status, why);
        }
    } else {
        status = local_entry(job, task, BACKEND_CRASH, "%s record %u, backend %s: the worker "
                                                       "sent an unreadable result",
                             base->file, base->record->index, name);
    }
    cJSON_Delete(entry);
    cJSON_Delete(message);
    return status;
}

/* SIGINT or SIGTERM (worker_signals_install) stops the run: true once it has. */
static bool check_interrupted(struct run_state *state)
{
    const int sig = worker_stop_signal();
    if (!sig || state->stop_signal)
        return state->stop_signal != 0;
    char name[32];
    char message[96];
    state->stop_signal = sig;
    snprintf(message, sizeof(message), "interrupted by %s",
             worker_signal_name(sig, name, sizeof(name)));
    clear_progress(state);
    stop_run(state, AUDIT_EFAILED, message);
    return true;
}

/* Runs every backend of the record in worker processes; entries and table lines are filled for
 * the backends that got an outcome. */
static void run_backends(struct run_state *state, struct record_job *job)
{
    const struct run_options *options = state->options;
    struct audit_error err = { 0 };
    size_t bytes = 0;
    int status;
    void *wire = record_wire_encode(job->base->record, job->base->k, job->base->file,
                                    job->replay->dump_stem, &bytes);
    if (wire) {
        status = worker_session_run_job(&state->session, wire, bytes, options->backend_count,
                                        on_record_result, job, options->timeout_ms, &err);
        free(wire);
    } else {
        /* Too big to copy (or no memory for the copy): a worker forked for this record sees it
         * where it is. */
        status = worker_run_tasks(options->backend_count, record_worker_main, on_record_result,
                                  job, options->timeout_ms, NULL, &err);
    }
    if (status == WORKER_STOPPED)
        check_interrupted(state);
    else if (status < 0 && !state->stopped && !state->device_failed)
        stop_run(state, status, err.message);
}

/* CPU side (reference hashes, census) always; GPU side per backend when a device is usable. */
static void run_record(struct run_state *state, const char *file, const char *stem,
                       const struct capture_record *record, uint64_t global_index)
{
    const struct run_options *options = state->options;
    struct audit_error err = { 0 };
    struct capture_record narrowed = { 0 };
    const struct capture_record *replayed = record;
    struct check_context checks;
    bool checks_ready = false;
    cJSON *census = NULL;
    struct census_row *census_rows = NULL;
    cJSON **entries = NULL;
    char **table_lines = NULL;
    int status;
    const double started_ms = report_monotonic_ms();
    struct record_time time = { 0 };

    memset(&checks, 0, sizeof(checks));
    if (options->rows) {
        status = replay_subrecord(record, options->rows, (uint32_t)options->row_count, &narrowed,
                                  &err);
        if (status == AUDIT_EUSAGE) {
            audit_error_prefix(&err, "%s: --rows", file);
            input_error(state, file, record->index, (int64_t)record->file_offset, "selection",
                        err.message);
            goto done;
        }
        if (status < 0)
            goto fatal;
        replayed = &narrowed;
    }
    const uint32_t k = options->k_override ? options->k_override : replayed->k;
    double phase_started_ms = report_monotonic_ms();
    status = checks_prepare(&checks, replayed, k, &err);
    time.reference_ms += report_monotonic_ms() - phase_started_ms;
    if (status == AUDIT_EDATA) {
        audit_error_prefix(&err, "%s record %u", file, record->index);
        input_error(state, file, record->index, (int64_t)record->file_offset, "invalid",
                    err.message);
        goto done;
    }
    if (status < 0)
        goto fatal;
    checks_ready = true;
    phase_started_ms = report_monotonic_ms();
    status = census_record_json(replayed, &k, 1, &census, &census_rows, &err);
    time.census_ms = report_monotonic_ms() - phase_started_ms;
    if (status == AUDIT_EDATA) {
        audit_error_prefix(&err, "%s record %u", file, record->index);
        input_error(state, file, record->index, (int64_t)record->file_offset, "invalid",
                    err.message);
        goto done;
    }
    if (status < 0)
        goto fatal;

    struct record_result result = {
        .file = file,
        .record = replayed,
        .k = k,
        .source_rows = options->rows,
        .census = census,
        .census_rows = census_rows,
        .backend_count = 0, /* the backends' entries are built by the workers */
    };
    phase_started_ms = report_monotonic_ms();
    status = reference_hashes(&checks, replayed, k, &result, &err);
    if (status < 0)
        goto fatal;
    time.reference_ms += report_monotonic_ms() - phase_started_ms;
    entries = calloc(options->backend_count, sizeof(*entries));
    table_lines = calloc(options->backend_count, sizeof(*table_lines));
    if (!entries || !table_lines) {
        status = audit_fail(&err, AUDIT_ENOMEM, "out of memory for the backend results");
        goto fatal;
    }

    const struct replay_options replay_options = record_replay_options(state, file, stem,
                                                                       record->index);
    state->progress_file = file;
    state->progress_record = record->index;
    struct record_job job = {
        .state = state,
        .base = &result,
        .checks = &checks,
        .replay = &replay_options,
        .entries = entries,
        .table_lines = table_lines,
    };
    /* Without a device nothing is forked; otherwise each backend replays in a worker. */
    phase_started_ms = report_monotonic_ms();
    if (state->device_available && !state->device_failed && !state->stopped)
        run_backends(state, &job);
    time.backends_ms = report_monotonic_ms() - phase_started_ms;
    clear_progress(state);
    for (size_t i = 0; i < options->backend_count; i++) {
        if (entries[i])
            continue;
        if (!state->device_available)
            status = local_entry(&job, i, BACKEND_UNAVAILABLE, "%s", state->unavailable_reason);
        else
            status = local_entry(&job, i, BACKEND_SKIPPED, "not run: %s",
                                 state->stop_reason[0] ? state->stop_reason : "the run stopped");
        if (status < 0) {
            audit_fail(&err, status, "out of memory reporting %s record %u", file, record->index);
            goto fatal;
        }
    }
    for (size_t i = 0; i < options->backend_count; i++) {
        const cJSON *verdict = json_child(entries[i], "verdict");
        if (cJSON_IsString(verdict) && strcmp(verdict->valuestring, "fail") == 0)
            state->any_failure = true;
    }
    time.total_ms = report_monotonic_ms() - started_ms;
    result.time = time;
    status = state->pass == 0 ? add_record(state, &result, entries, global_index, &err)
                              : add_device_pass(state, &result, entries, &err);
    if (status < 0)
        goto fatal;
    print_record(state, table_lines);
    goto done;
fatal:
    stop_run(state, status, err.message);
done:
    for (size_t i = 0; entries && i < options->backend_count; i++)
        cJSON_Delete(entries[i]);
    for (size_t i = 0; table_lines && i < options->backend_count; i++)
        free(table_lines[i]);
    free(entries);
    free(table_lines);
    cJSON_Delete(census);
    free(census_rows);
    if (checks_ready)
        checks_release(&checks);
    if (replayed == &narrowed)
        capture_record_free(&narrowed);
}

/* Reads a capture file record by record; a corrupt or truncated record ends the file (the
 * records before it are already in the report) and the run goes on with the next file. */
static void run_file(struct run_state *state, const char *path)
{
    const struct run_options *options = state->options;
    struct capture_reader *reader = NULL;
    struct audit_error err = { 0 };
    uint32_t next_index = 0;
    uint64_t next_offset = 0;
    char stem[256];
    file_stem(path, stem, sizeof(stem));
    if (options->device_count > 1) {
        /* --devices: each pass dumps under its own name (<stem>-dev<entry>-r<record>-...). */
        size_t used = strlen(stem);
        snprintf(stem + used, sizeof(stem) - used, "-dev%zu", state->pass);
    }
    int status = capture_open(&reader, path, &err);
    if (status < 0) {
        if (status == AUDIT_ENOMEM)
            stop_run(state, status, err.message);
        else
            input_error(state, path, -1, -1, "io", err.message);
        return;
    }
    while (!state->stopped && !check_interrupted(state)) {
        struct capture_record record;
        status = capture_read_record(reader, &record, &err);
        if (status == 0)
            break;
        if (status < 0) {
            enum capture_read_state read_state = capture_reader_state(reader);
            const char *kind = status == AUDIT_EDATA && read_state == CAPTURE_READ_TRUNCATED
                                   ? "truncated"
                               : status == AUDIT_EDATA ? "corrupt"
                                                       : "io";
            if (status == AUDIT_ENOMEM)
                stop_run(state, status, err.message);
            else
                input_error(state, path, next_index, (int64_t)next_offset, kind, err.message);
            break;
        }
        next_index = record.index + 1;
        next_offset = record.file_offset + RUN_RECORD_HEADER_BYTES + record.stored_payload_bytes;
        if (!options->records || list_contains(options->records, options->record_count,
                                               record.index)) {
            /* --shard numbers the records the run selects, across the inputs in order. */
            const uint64_t global_index = state->next_global_index++;
            if (options->shard_count == 0 || global_index % options->shard_count ==
                                                 options->shard_index)
                run_record(state, path, stem, &record, global_index);
        }
        capture_record_free(&record);
    }
    capture_close(reader);
}

/* ---- device --------------------------------------------------------------------------------- */

/* The probe worker: device count and every device's description, in one message. The parent
 * must not initialise CUDA (a CUDA context does not survive fork), so even this runs in a
 * child. */
struct probe_job {
    const struct run_options *options; /* the child's: --emulate-smem-per-sm */
    struct device_probe *probe;        /* the parent's: filled from the child's message */
};

static int probe_worker_main(struct worker_channel *channel, size_t first, void *user)
{
    const struct run_options *options = ((const struct probe_job *)user)->options;
    struct device_probe *probe = calloc(1, sizeof(*probe));
    (void)first;
    if (!probe)
        return 3;
    gpu_device_count(&probe->count, probe->why, sizeof(probe->why));
    for (int i = 0; i < probe->count && i < RUN_MAX_DEVICES; i++) {
        struct audit_error err = { 0 };
        probe->queried[i] = gpu_device_query(i, (size_t)options->emulate_smem_per_sm,
                                             &probe->info[i], &err) == 0;
        if (!probe->queried[i] && !probe->query_error[0])
            snprintf(probe->query_error, sizeof(probe->query_error), "%s", err.message);
    }
    int status = worker_send(channel, probe, sizeof(*probe)) < 0 ? 2 : 0;
    free(probe);
    return status;
}

static int on_probe_result(void *user, size_t task, const struct worker_event *event)
{
    struct device_probe *probe = ((struct probe_job *)user)->probe;
    (void)task;
    if (event->outcome == WORKER_MESSAGE && event->bytes == sizeof(*probe)) {
        memcpy(probe, event->data, sizeof(*probe));
        return AUDIT_OK;
    }
    probe->count = 0;
    snprintf(probe->why, sizeof(probe->why), "the device probe %s",
             event->outcome == WORKER_MESSAGE ? "sent a malformed answer" : event->description);
    return AUDIT_OK;
}

/* Runs the probe, whose process then stays until the end of the run (keeper): with the CUDA
 * driver initialised there, each record's worker starts CUDA about 90 ms sooner (cuInit 100 ->
 * 10 ms on the H200; docs/PERF.md "The audit itself"). Returns 0, WORKER_STOPPED, or a negative
 * code with err filled. */
static int probe_devices(const struct run_options *options, struct device_probe *probe,
                         struct worker_keeper *keeper, struct audit_error *err)
{
    struct probe_job job = { .options = options, .probe = probe };
    memset(probe, 0, sizeof(*probe));
    return worker_keeper_start(keeper, probe_worker_main, on_probe_result, &job,
                               options->timeout_ms, err);
}

/* Returns EXIT_USAGE for a --device the machine does not have, else 0 (the state says whether a
 * device is usable and why not). */
static int open_device(struct run_state *state, struct run_context *context)
{
    const struct run_options *options = state->options;
    const struct device_probe *probe = &state->probe;
    if (probe->count == 0) {
        state->device_available = false;
        snprintf(state->unavailable_reason, sizeof(state->unavailable_reason),
                 "no CUDA device: %s", probe->why[0] ? probe->why : "none found");
        snprintf(context->device_unavailable_reason, sizeof(context->device_unavailable_reason),
                 "%s", state->unavailable_reason);
        if (!options->quiet)
            fprintf(stderr, "dsatopk-audit run: %s; the census and the reference hashes still "
                            "run, the GPU backends are reported unavailable\n",
                    state->unavailable_reason);
        return AUDIT_OK;
    }
    if (options->device >= probe->count)
        return cli_usage_error(&cmd_run, "--device %d: this machine has %d CUDA device(s)",
                               options->device, probe->count);
    state->device_available = true;
    state->ordinal = options->device;
    if (options->device >= RUN_MAX_DEVICES || !probe->queried[options->device]) {
        /* A device that is there but cannot be described stops every GPU step. */
        char message[AUDIT_ERROR_MESSAGE_BYTES];
        snprintf(message, sizeof(message), "device %d: %.900s", options->device,
                 probe->query_error[0] ? probe->query_error : "cannot be queried");
        snprintf(context->device_unavailable_reason, sizeof(context->device_unavailable_reason),
                 "%s", message);
        device_lost(state, message);
        return AUDIT_OK;
    }
    context->device_available = true;
    context->device = probe->info[options->device];
    return AUDIT_OK;
}

/* The probe's description of ordinal, or NULL. */
static const struct gpu_device_info *probed_info(const struct run_state *state, int ordinal)
{
    if (ordinal < 0 || ordinal >= RUN_MAX_DEVICES || ordinal >= state->probe.count ||
        !state->probe.queried[ordinal])
        return NULL;
    return &state->probe.info[ordinal];
}

/* --devices: resolves "all" and checks each ordinal against the machine. Returns 0 or
 * EXIT_USAGE. Without any device the list stays as given (the run reports it unavailable). */
static int resolve_devices(struct run_options *options, const struct device_probe *probe)
{
    const int count = probe->count;
    if (!options->devices_text)
        return AUDIT_OK;
    if (options->all_devices) {
        options->device_count = 0;
        for (int i = 0; i < count && i < RUN_MAX_DEVICES; i++)
            options->devices[options->device_count++] = i;
    }
    for (size_t i = 0; count > 0 && i < options->device_count; i++)
        if (options->devices[i] >= count)
            return cli_usage_error(&cmd_run, "--devices: ordinal %d: this machine has %d CUDA "
                                             "device(s)", options->devices[i], count);
    if (options->device_count > 0)
        options->device = options->devices[0];
    return AUDIT_OK;
}

/* Switches to the device of --devices entry pass (after the first); a device that cannot be
 * described skips the GPU work of its pass (the report says why). Each record's worker opens
 * the device itself. */
static void start_device_pass(struct run_state *state, size_t pass, cJSON *devices)
{
    const struct run_options *options = state->options;
    const int ordinal = options->devices[pass];
    const struct gpu_device_info *info = probed_info(state, ordinal);
    /* The session worker replays on one device: the next record forks one for this pass's. */
    worker_session_stop(&state->session);
    state->ordinal = ordinal;
    state->device_failed = false;
    cJSON_Delete(state->device_identity);
    state->device_identity = NULL;
    if (!info) {
        char message[AUDIT_ERROR_MESSAGE_BYTES];
        snprintf(message, sizeof(message), "device %d: %.900s", ordinal,
                 state->probe.query_error[0] ? state->probe.query_error : "cannot be queried");
        device_lost(state, message);
    }
    state->device_identity = device_identity_json(pass, ordinal, info);
    if (!state->device_identity) {
        stop_run(state, AUDIT_ENOMEM, "out of memory describing a device");
        return;
    }
    cJSON_AddItemToArray(devices, cJSON_Duplicate(state->device_identity, 1));
    if (state->table)
        fprintf(state->table, "# --devices entry %zu: ordinal %d (%s)\n", pass, ordinal,
                info ? info->name : "could not be opened");
}

/* Records --shard and --devices in the report's context. */
static void add_scale_out_context(struct run_state *state)
{
    const struct run_options *options = state->options;
    cJSON *context = json_child(state->report.root, "context");
    if (!context)
        return;
    if (options->shard_count) {
        cJSON *shard = cJSON_AddObjectToObject(context, "shard");
        if (shard) {
            json_add_u64(shard, "index", options->shard_index);
            json_add_u64(shard, "count", options->shard_count);
        }
    } else {
        cJSON_AddNullToObject(context, "shard");
    }
    if (options->devices_text) {
        cJSON *devices = cJSON_AddArrayToObject(context, "devices");
        for (size_t i = 0; devices && i < options->device_count; i++)
            cJSON_AddItemToArray(devices, cJSON_CreateNumber(options->devices[i]));
    } else {
        cJSON_AddNullToObject(context, "devices");
    }
}

/* The cross_device block; a required disagreement fails the run. */
static int add_cross_device(struct run_state *state, cJSON *devices)
{
    const struct run_options *options = state->options;
    cJSON *block;
    if (state->device_available) {
        block = gate_cross_device_block(state->report.records, devices);
    } else {
        cJSON *requested = cJSON_CreateString(options->devices_text);
        block = gate_cross_device_unavailable(state->unavailable_reason, requested);
        cJSON_Delete(requested);
    }
    if (!block)
        return AUDIT_ENOMEM;
    cJSON_AddItemToObject(state->report.root, "cross_device", block);
    const cJSON *entry;
    cJSON_ArrayForEach(entry, json_child(block, "entries")) {
        const cJSON *verdict = json_child(entry, "verdict");
        if (!cJSON_IsString(verdict) || strcmp(verdict->valuestring, "fail") != 0)
            continue;
        state->any_failure = true;
        if (!state->table)
            continue;
        const cJSON *file = json_child(entry, "file"), *index = json_child(entry, "index");
        const cJSON *name = json_child(entry, "name"), *level = json_child(entry, "level");
        fprintf(state->table, "  cross-device %s:%.0f %s %s: the devices disagree:",
                cJSON_IsString(file) ? file->valuestring : "?",
                cJSON_IsNumber(index) ? index->valuedouble : 0,
                cJSON_IsString(name) ? name->valuestring : "?",
                cJSON_IsString(level) ? level->valuestring : "?");
        const cJSON *device;
        cJSON_ArrayForEach(device, json_child(entry, "devices")) {
            const cJSON *hash = json_child(device, "output_sha256");
            fprintf(state->table, " [%.0f] %.12s",
                    cJSON_GetNumberValue(json_child(device, "index")),
                    cJSON_IsString(hash) ? hash->valuestring : "-");
        }
        fprintf(state->table, "\n");
    }
    const cJSON *summary = json_child(block, "summary");
    if (state->table)
        fprintf(state->table, "# cross-device (%s): %.0f record x backend(s) compared, %.0f agree, "
                              "%.0f disagree, %.0f required disagreement(s)\n",
                state->device_available ? options->devices_text : "no device",
                cJSON_GetNumberValue(json_child(summary, "compared")),
                cJSON_GetNumberValue(json_child(summary, "agree")),
                cJSON_GetNumberValue(json_child(summary, "disagree")),
                cJSON_GetNumberValue(json_child(summary, "required_disagreements")));
    return AUDIT_OK;
}

/* --baseline-out: the baseline subset of the finished report. */
static int write_baseline(const struct run_state *state, int exit_code, struct audit_error *err)
{
    const struct run_options *options = state->options;
    cJSON *baseline = NULL;
    int status = gate_baseline_from_report(state->report.root, options->out_path, &baseline, err);
    if (status == AUDIT_OK)
        status = json_write_file(options->baseline_out, baseline, err);
    cJSON_Delete(baseline);
    if (status == AUDIT_OK && exit_code != EXIT_AUDIT_OK)
        fprintf(stderr, "dsatopk-audit run: warning: the baseline %s comes from a run that exited "
                        "%d; a golden baseline should come from a passing run\n",
                options->baseline_out, exit_code);
    return status;
}

/* The most severe outcome wins: 4 > 3 > 2 > 1 > 0, and an interruption over all (docs/REPORT.md
 * "Exit codes"). */
static int final_exit_code(const struct run_state *state)
{
    int code = state->any_failure ? EXIT_AUDIT_FAILED : EXIT_AUDIT_OK;
    if (state->bad_selection && code < EXIT_USAGE)
        code = EXIT_USAGE;
    if (state->bad_input && code < EXIT_BAD_INPUT)
        code = EXIT_BAD_INPUT;
    if (state->device_failed)
        code = EXIT_DEVICE;
    if (state->stopped && audit_exit_code(state->fatal_status) > code)
        code = audit_exit_code(state->fatal_status);
    /* Interrupted: the shell's convention, 128 + the signal (130 SIGINT, 143 SIGTERM). */
    if (state->stop_signal)
        code = 128 + state->stop_signal;
    return code;
}

static int run_run(int argc, char **argv)
{
    struct run_options options = { 0 };
    struct run_state state = { 0 };
    struct run_context context = { 0 };
    struct path_list inputs = { 0 };
    struct audit_error err = { 0 };
    bool report_started = false;
    bool signals_installed = false;
    struct worker_keeper probe_keeper = { 0 }; /* the probe process, kept (probe_devices) */
    cJSON *devices = NULL; /* --devices: the device of each entry, for the cross_device block */
    int first_path = 0;
    worker_session_init(&state.session, session_worker_job, session_worker_start, &state);
    int exit_code = parse_options(argc, argv, &options, &first_path);
    if (exit_code >= 0)
        goto done;
    exit_code = EXIT_AUDIT_OK;
    state.options = &options;

    if (options.dump_dir) {
        struct stat info;
        if (stat(options.dump_dir, &info) != 0 && mkdir(options.dump_dir, 0755) != 0) {
            exit_code = cli_usage_error(&cmd_run, "--dump-outputs %s: cannot create: %s",
                                        options.dump_dir, strerror(errno));
            goto done;
        }
        if (stat(options.dump_dir, &info) != 0 || !S_ISDIR(info.st_mode)) {
            exit_code = cli_usage_error(&cmd_run, "--dump-outputs %s: not a directory",
                                        options.dump_dir);
            goto done;
        }
    }

    context.tool_version = DSATOPK_VERSION;
    context.git_revision = DSATOPK_GIT_REVISION;
    context.version_string = cli_version();
    context.command_line = cli_command_line();
    run_context_fill_time_and_host(&context);
    context.emulate_smem_per_sm = options.emulate_smem_per_sm;
    context.noise = noise_kind_name(options.noise);
    context.reps = options.reps;
    context.seed = options.seed;
    context.graph = options.graph;
    context.batch_invariance = options.batch_invariance;
    context.k_override = options.k_override;
    context.backends = options.backend_names;
    context.backend_count = options.backend_count;
    /* Dumps need every output whole, so they turn the pre-filter off (src/replay/replay.h). */
    context.gpu_prefilter = options.gpu_prefilter && !options.dump_dir;

    /* SIGINT and SIGTERM from here on: the workers are stopped and the report is written. */
    if (worker_signals_install() == 0)
        signals_installed = true;
    exit_code = probe_devices(&options, &state.probe, &probe_keeper, &err);
    if (exit_code == WORKER_STOPPED) {
        state.stop_signal = worker_stop_signal();
        exit_code = 128 + state.stop_signal;
        fprintf(stderr, "dsatopk-audit run: interrupted while looking for devices\n");
        goto done;
    }
    if (exit_code < 0) {
        fprintf(stderr, "dsatopk-audit run: %s\n", err.message);
        exit_code = audit_exit_code(exit_code);
        goto done;
    }
    exit_code = resolve_devices(&options, &state.probe);
    if (exit_code != AUDIT_OK)
        goto done;
    exit_code = open_device(&state, &context);
    if (exit_code != AUDIT_OK)
        goto done;
    if (options.devices_text) {
        devices = cJSON_CreateArray();
        if (!devices) {
            fprintf(stderr, "dsatopk-audit run: out of memory\n");
            exit_code = EXIT_DEVICE;
            goto done;
        }
        if (state.device_available && options.device_count > 0) {
            state.device_identity = device_identity_json(0, options.devices[0],
                                                         probed_info(&state, options.devices[0]));
            if (state.device_identity)
                cJSON_AddItemToArray(devices, cJSON_Duplicate(state.device_identity, 1));
        }
    }
    if (report_begin(&state.report, &context, &err) < 0) {
        fprintf(stderr, "dsatopk-audit run: %s\n", err.message);
        exit_code = EXIT_DEVICE;
        goto done;
    }
    report_started = true;
    add_scale_out_context(&state);
    const bool report_on_stdout = strcmp(options.out_path, "-") == 0;
    if (!options.quiet && options.format == TABLE_ON)
        state.table = report_on_stdout ? stderr : stdout;
    state.progress = !options.quiet && isatty(STDERR_FILENO);
    /* The session worker now (the state it copies is complete): its CUDA start overlaps the
     * reading of the first record. A failed fork is tried again at the first record. */
    if (state.device_available && !state.device_failed)
        (void)worker_session_start(&state.session, &err);

    if (first_path >= argc) {
        if (expand_path(&inputs, RUN_DEFAULT_CAPTURES, &err) < 0)
            input_error(&state, RUN_DEFAULT_CAPTURES, -1, -1, "io", err.message);
    }
    for (int i = first_path; i < argc && !state.stopped && !check_interrupted(&state); i++) {
        if (expand_path(&inputs, argv[i], &err) < 0) {
            if (err.code == AUDIT_ENOMEM)
                stop_run(&state, err.code, err.message);
            else
                input_error(&state, argv[i], -1, -1, "io", err.message);
        }
    }
    /* --devices: the whole audit once per listed device; the first pass writes the records,
     * the later ones add their per_device[] entries. */
    const size_t passes = state.device_available && options.device_count ? options.device_count : 1;
    if (state.table && passes > 1 && state.device_identity)
        fprintf(state.table, "# --devices entry 0: ordinal %d (%s)\n", options.devices[0],
                probed_info(&state, options.devices[0])
                    ? probed_info(&state, options.devices[0])->name
                    : "could not be opened");
    for (size_t pass = 0; pass < passes && !state.stopped; pass++) {
        if (pass > 0)
            start_device_pass(&state, pass, devices);
        state.pass = pass;
        state.next_global_index = 0;
        state.record_cursor = pass == 0 ? NULL : state.report.records->child;
        for (size_t i = 0; i < inputs.count && !state.stopped; i++)
            run_file(&state, inputs.paths[i]);
        state.any_device_lost = state.any_device_lost || state.device_failed;
    }
    state.device_failed = state.any_device_lost;
    if (options.devices_text && !state.stopped && add_cross_device(&state, devices) < 0)
        stop_run(&state, AUDIT_ENOMEM, "out of memory comparing devices");

    exit_code = final_exit_code(&state);
    const bool complete = !state.stopped && !state.device_failed;
    if (report_finish(&state.report, complete, complete ? NULL : state.stop_reason, exit_code,
                      &err) < 0 ||
        json_write_file(options.out_path, state.report.root, &err) < 0) {
        fprintf(stderr, "dsatopk-audit run: %s\n", err.message);
        if (exit_code < EXIT_BAD_INPUT)
            exit_code = audit_exit_code(err.code);
        goto done;
    }
    if (options.baseline_out && write_baseline(&state, exit_code, &err) < 0) {
        fprintf(stderr, "dsatopk-audit run: --baseline-out: %s\n", err.message);
        if (exit_code < EXIT_BAD_INPUT)
            exit_code = audit_exit_code(err.code);
        goto done;
    }
    if (options.html_out && html_report_write(options.html_out, state.report.root, NULL, &err) < 0) {
        fprintf(stderr, "dsatopk-audit run: --html: %s\n", err.message);
        if (exit_code < EXIT_BAD_INPUT)
            exit_code = audit_exit_code(err.code);
        goto done;
    }
    if (state.table) {
        report_table_summary(state.table, &state.report,
                             report_on_stdout ? NULL : options.out_path);
        if (options.baseline_out)
            fprintf(state.table, "# baseline: %s\n", options.baseline_out);
        if (options.html_out)
            fprintf(state.table, "# html: %s\n", options.html_out);
    }
done:
    worker_session_stop(&state.session);
    worker_keeper_stop(&probe_keeper);
    if (report_started)
        report_release(&state.report);
    if (signals_installed)
        worker_signals_restore();
    plugin_unload_all();
    cJSON_Delete(state.device_identity);
    cJSON_Delete(devices);
    path_list_free(&inputs);
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
