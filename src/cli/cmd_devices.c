/* devices: lists the CUDA devices and, for every backend of topk_backend_table, its determinism
 * level, its limits and whether it supports each k of a list at one row length on each device,
 * with the reason (docs/BACKENDS.md). One data model (a cJSON document, schema
 * "dsatopk-audit/devices", built by src/replay/devices_json.c) is rendered as JSON or as a
 * table; this file parses the options, asks CUDA and prints.
 *
 * Without a GPU or driver it still lists the backends and exits 0. With --emulate-smem-per-sm and
 * no GPU it evaluates the decisions on a described H200-like device whose shared memory is the
 * emulated amount, so the decisions for a small device (GB10: 102400 B per SM) can be read on any
 * machine; the output says the device is described, not present. */
#include <getopt.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>
#include <cuda_runtime_api.h>

#include "cli.h"
#include "devices_json.h"
#include "document_context.h"
#include "error.h"
#include "json_util.h"
#include "topk_backends.h"

#define DEVICES_MAX_K 64

static const char devices_usage[] =
    "usage: dsatopk-audit devices [--k LIST] [--length L] [--rows B] [--format table|json]\n"
    "                             [--emulate-smem-per-sm BYTES]\n"
    "\n"
    "Lists the CUDA devices (name, compute capability, SMs, shared memory per SM and per block\n"
    "opt-in as reported and as emulated, L2, memory, driver and runtime versions) and, for each\n"
    "backend, its determinism level, its limits and whether it supports each k at row length L\n"
    "on that device, with the reason.\n"
    "\n"
    "Without a GPU or driver it prints \"no CUDA device: REASON\" and the backends' levels and\n"
    "limits. With --emulate-smem-per-sm and no GPU, the decisions are evaluated on a described\n"
    "H200-like device with the emulated shared memory (said so in the output).\n"
    "\n"
    "options:\n"
    "  --k LIST                    comma-separated k values (default 512,1024,2048,4096)\n"
    "  --length L                  row length the decisions assume (default 131072)\n"
    "  --rows B                    rows per call the decisions assume (default 1)\n"
    "  --format FORMAT             table (default) or json (schema dsatopk-audit/devices, v3)\n"
    "  --emulate-smem-per-sm BYTES report BYTES of shared memory per SM (and at most that, less\n"
    "                              the per-block reserve, per block), e.g. 102400 for GB10; the\n"
    "                              global option of the same name does the same\n"
    "  -h, --help                  show this help\n"
    "\n"
    "exit codes: 0 ok (also without a GPU); 2 usage error; 4 a device query failed\n";


struct devices_options {
    unsigned long long k_values[DEVICES_MAX_K];
    int k_count;
    unsigned long long length, rows, emulate_smem_per_sm;
    enum cli_format format;
};

static int parse_options(int argc, char **argv, struct devices_options *options)
{
    static const struct option long_options[] = {
        { "k", required_argument, NULL, 'k' },
        { "length", required_argument, NULL, 'l' },
        { "rows", required_argument, NULL, 'r' },
        { "format", required_argument, NULL, 'f' },
        { "emulate-smem-per-sm", required_argument, NULL, 'E' },
        { "help", no_argument, NULL, 'h' },
        { NULL, 0, NULL, 0 },
    };
    int option;
    opterr = 0; /* messages come from cli_usage_error */
    bool help = false;
    while ((option = getopt_long(argc, argv, ":h", long_options, NULL)) != -1) {
        switch (option) {
        case 'k':
            options->k_count = cli_parse_uint_list(optarg, options->k_values, DEVICES_MAX_K);
            if (options->k_count <= 0)
                return cli_usage_error(&cmd_devices,
                                       "--k: '%s' is not a comma-separated list of at most %d "
                                       "integers",
                                       optarg, DEVICES_MAX_K);
            for (int i = 0; i < options->k_count; i++)
                if (options->k_values[i] == 0)
                    return cli_usage_error(&cmd_devices, "--k: k must be at least 1 (in '%s')",
                                           optarg);
            break;
        case 'l':
            if (cli_parse_uint(optarg, INT32_MAX, &options->length) < 0)
                return cli_usage_error(&cmd_devices,
                                       "--length: '%s' is not a row length (0 to 2^31 - 1)",
                                       optarg);
            break;
        case 'r':
            if (cli_parse_uint(optarg, UINT32_MAX, &options->rows) < 0 || options->rows == 0)
                return cli_usage_error(&cmd_devices,
                                       "--rows: '%s' is not a row count (1 to 2^32 - 1)", optarg);
            break;
        case 'f':
            if (cli_parse_format(&cmd_devices, optarg, &options->format) != 0)
                return EXIT_USAGE;
            break;
        case 'E':
            if (cli_parse_uint(optarg, 1ull << 32, &options->emulate_smem_per_sm) < 0)
                return cli_usage_error(&cmd_devices,
                                       "--emulate-smem-per-sm: '%s' is not a byte count", optarg);
            break;
        case 'h': help = true; break;
        default: return cli_option_error(&cmd_devices, option, argv);
        }
    }
    if (help) {
        cli_print_usage(&cmd_devices, stdout);
        return -1;
    }
    if (optind < argc)
        return cli_usage_error(&cmd_devices, "unexpected argument '%s'", argv[optind]);
    return EXIT_AUDIT_OK;
}

/* "13.0" from CUDA's 13000; "none" for 0. */
static const char *string_of(const cJSON *object, const char *name)
{
    const cJSON *item = cJSON_GetObjectItemCaseSensitive(object, name);
    return cJSON_IsString(item) ? item->valuestring : "";
}

static double number_of(const cJSON *object, const char *name)
{
    const cJSON *item = cJSON_GetObjectItemCaseSensitive(object, name);
    return cJSON_IsNumber(item) ? item->valuedouble : 0;
}

/* A CUDA version's text, "none" when null (no driver). */
static const char *version_of(const cJSON *object, const char *name)
{
    const char *text = string_of(object, name);
    return text[0] ? text : "none";
}

static bool bool_of(const cJSON *object, const char *name)
{
    return cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(object, name));
}

static void print_device_table(FILE *out, const cJSON *device, const cJSON *query)
{
    const cJSON *backend;
    if (bool_of(device, "described"))
        fprintf(out, "\ndescribed device: %s\n", string_of(device, KEY_NAME));
    else
        fprintf(out, "\ndevice %.0f: %s\n", number_of(device, KEY_ORDINAL),
                string_of(device, KEY_NAME));
    fprintf(out, "  compute capability     %s\n", string_of(device, KEY_COMPUTE_CAPABILITY));
    fprintf(out, "  SMs                    %.0f\n", number_of(device, KEY_SM_COUNT));
    if (bool_of(device, KEY_SMEM_EMULATED))
        fprintf(out, "  shared memory per SM   %.0f B emulated (reported %.0f B)\n",
                number_of(device, KEY_SMEM_PER_SM_BYTES),
                number_of(device, KEY_REPORTED_SMEM_PER_SM_BYTES));
    else
        fprintf(out, "  shared memory per SM   %.0f B\n", number_of(device, KEY_SMEM_PER_SM_BYTES));
    fprintf(out, "  per block (opt-in)     %.0f B%s\n",
            number_of(device, KEY_SMEM_PER_BLOCK_OPTIN_BYTES),
            bool_of(device, KEY_SMEM_EMULATED) ? " emulated" : "");
    fprintf(out, "  L2 cache               %.0f B\n", number_of(device, KEY_L2_BYTES));
    fprintf(out, "  global memory          %.0f B (%.1f GiB)\n",
            number_of(device, KEY_GLOBAL_MEMORY_BYTES),
            number_of(device, KEY_GLOBAL_MEMORY_BYTES) / (1024.0 * 1024.0 * 1024.0));
    fprintf(out, "  driver / runtime       %s / %s\n", version_of(device, KEY_DRIVER_VERSION),
            version_of(device, KEY_RUNTIME_VERSION));
    const cJSON *fit = cJSON_GetObjectItemCaseSensitive(device, "clusters_at_once");
    if (cJSON_IsArray(fit)) {
        /* "4:30" = 30 clusters of 4 CTAs, one per SM, at once (GPC packing) */
        fprintf(out, "  clusters at once      ");
        int size = 1;
        const cJSON *count;
        cJSON_ArrayForEach(count, fit)
            fprintf(out, " %d:%.0f", size++, cJSON_GetNumberValue(count));
        fprintf(out, "\n");
    }
    fprintf(out, "  decisions at length %.0f, %.0f row(s) per call:\n",
            number_of(query, "length"), number_of(query, KEY_ROWS));
    cJSON_ArrayForEach(backend, cJSON_GetObjectItemCaseSensitive(device, KEY_BACKENDS)) {
        const cJSON *decision;
        fprintf(out, "    %s (%s)\n", string_of(backend, KEY_NAME), string_of(backend, KEY_LEVEL));
        cJSON_ArrayForEach(decision, cJSON_GetObjectItemCaseSensitive(backend, "decisions")) {
            char k_text[32];
            const char *reason = string_of(decision, KEY_REASON);
            snprintf(k_text, sizeof(k_text), "k=%.0f", number_of(decision, KEY_K));
            fprintf(out, "      %-8s %-13s %s\n", k_text,
                    bool_of(decision, "supported") ? "supported" : "NOT supported", reason);
        }
    }
}

static void print_table(FILE *out, const cJSON *document)
{
    const cJSON *cuda = cJSON_GetObjectItemCaseSensitive(document, "cuda");
    const cJSON *query = cJSON_GetObjectItemCaseSensitive(document, "query");
    const cJSON *item;
    if (number_of(cuda, "device_count") == 0)
        fprintf(out, "no CUDA device: %s\n", string_of(cuda, "no_device_reason"));
    else
        fprintf(out, "CUDA devices: %.0f\n", number_of(cuda, "device_count"));
    fprintf(out, "driver %s, runtime %s\n", version_of(cuda, KEY_DRIVER_VERSION),
            version_of(cuda, KEY_RUNTIME_VERSION));

    fprintf(out, "\nbackends:\n");
    cJSON_ArrayForEach(item, cJSON_GetObjectItemCaseSensitive(document, KEY_BACKENDS)) {
        fprintf(out, "  %-13s %-15s %s\n", string_of(item, KEY_NAME), string_of(item, KEY_LEVEL),
                string_of(item, KEY_SUMMARY));
        fprintf(out, "  %-13s %-15s promises:%s%s%s%s%s\n", "", "",
                bool_of(item, KEY_EXACT_SET) ? " exact_set" : "",
                bool_of(item, KEY_SMALLEST_INDEX_TIES) ? " smallest_index_ties" : "",
                bool_of(item, KEY_CANONICAL_ORDER) ? " canonical_order" : "",
                bool_of(item, KEY_INDEX_ASCENDING) ? " index_ascending" : "",
                !bool_of(item, KEY_EXACT_SET) && !bool_of(item, KEY_SMALLEST_INDEX_TIES) &&
                        !bool_of(item, KEY_CANONICAL_ORDER) && !bool_of(item, KEY_INDEX_ASCENDING)
                    ? " none"
                    : "");
        fprintf(out, "  %-13s %-15s limits: %s\n", "", "", string_of(item, "limits"));
    }
    const cJSON *devices = cJSON_GetObjectItemCaseSensitive(document, KEY_DEVICES);
    if (number_of(cuda, "device_count") == 0) {
        if (cJSON_GetArraySize(devices) > 0)
            fprintf(out, "\nno GPU here: the decisions below are for a described H200-like device "
                         "with the emulated shared memory, not for a device that is present.\n");
        else
            fprintf(out, "\nno device to decide for (give --emulate-smem-per-sm BYTES to see the "
                         "decisions for a described device with that shared memory)\n");
    }
    cJSON_ArrayForEach(item, devices)
        print_device_table(out, item, query);
}

static int run_devices(int argc, char **argv)
{
    struct devices_options options = {
        .k_values = { 512, 1024, 2048, 4096 },
        .k_count = 4,
        .length = 131072,
        .rows = 1,
        .emulate_smem_per_sm = cli_globals.emulate_smem_per_sm,
        .format = CLI_FORMAT_TABLE,
    };
    struct audit_error err = { 0 };
    char why[512] = "";
    char *text = NULL;
    cJSON *document = NULL;
    int device_count = 0, runtime_version = 0, driver_version = 0;
    int exit_code = parse_options(argc, argv, &options);
    if (exit_code == -1)
        return EXIT_AUDIT_OK; /* --help */
    if (exit_code != EXIT_AUDIT_OK)
        return exit_code;

    int status = gpu_device_count(&device_count, why, sizeof(why));
    if (status != 0) {
        cli_print_message(&cmd_devices, "counting CUDA devices failed: %s", why);
        return EXIT_DEVICE;
    }
    /* Both answer without a driver: the runtime is linked in, the driver reports 0 if absent. */
    if (cudaRuntimeGetVersion(&runtime_version) != cudaSuccess)
        runtime_version = 0;
    if (cudaDriverGetVersion(&driver_version) != cudaSuccess)
        driver_version = 0;
    (void)cudaGetLastError();

    struct document_context context;
    document_context_fill(&context, cli_version(), cli_command_line());
    const struct devices_query query = {
        .k_values = options.k_values,
        .k_count = options.k_count,
        .length = options.length,
        .rows = options.rows,
        .emulate_smem_per_sm = options.emulate_smem_per_sm,
    };
    const struct devices_cuda cuda = {
        .device_count = device_count,
        .no_device_reason = why,
        .driver_version = driver_version,
        .runtime_version = runtime_version,
    };
    document = devices_json_begin(&context, &query, &cuda);
    if (!document)
        goto out_of_memory;
    for (int ordinal = 0; ordinal < device_count; ordinal++) {
        struct gpu_device_info info;
        if (gpu_device_query(ordinal, options.emulate_smem_per_sm, &info, &err) != 0) {
            cli_print_message(&cmd_devices, "%s", err.message);
            exit_code = EXIT_DEVICE;
            goto done;
        }
        {
            /* The decisions below as `run` and `bench` make them: bitonic sizes its clusters by
             * the device's packing (this starts the device's context; without it, where the
             * query fails, the decisions assume every SM takes a CTA). */
            struct audit_error ignored = { 0 };
            (void)gpu_device_measure_clusters(&info, &ignored);
        }
        if (devices_json_add_device(document, &info, false, &query) < 0)
            goto out_of_memory;
    }
    if (device_count == 0 && options.emulate_smem_per_sm > 0) {
        struct gpu_device_info info;
        devices_describe_emulated(options.emulate_smem_per_sm, runtime_version, &info);
        if (devices_json_add_device(document, &info, true, &query) < 0)
            goto out_of_memory;
    }

    text = json_render(document, options.format == CLI_FORMAT_JSON ? NULL : print_table);
    if (!text)
        goto out_of_memory;
    if (json_write_text_atomic("-", text, &err) != AUDIT_OK) {
        cli_print_message(&cmd_devices, "%s", err.message);
        exit_code = EXIT_BAD_INPUT;
        goto done;
    }
    exit_code = EXIT_AUDIT_OK;
    goto done;
out_of_memory:
    cli_print_message(&cmd_devices, "out of memory");
    exit_code = EXIT_DEVICE;
done:
    free(text);
    cJSON_Delete(document);
    return exit_code;
}

const struct cli_command cmd_devices = {
    "devices",
    "list CUDA devices and which backend supports which k on each",
    devices_usage,
    run_devices,
};
