/* bench: microseconds per call of every backend over a shape grid (docs/PERF.md "Method"). The
 * timing is src/replay/bench.c's and the document src/replay/bench_json.c's; this file parses the
 * options, prints the table as results come and writes the document. */
#include <getopt.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cuda_runtime_api.h>

#include "bench.h"
#include "bench_json.h"
#include "cli.h"
#include "cuda_check.h"
#include "document_context.h"
#include "error.h"
#include "json_util.h"
#include "phase_timing.h"
#include "synth.h"
#include "topk_backends.h"

#define BENCH_MAX_SHAPES 256
#define BENCH_MAX_BACKENDS 16

struct bench_command_options {
    struct bench_shape shapes[BENCH_MAX_SHAPES];
    int shape_count;
    const struct topk_backend *backends[BENCH_MAX_BACKENDS];
    int backend_count;
    const char *families[2];
    int family_count;
    unsigned long long replays, warmup, device, seed;
    const char *out_path;
    bool table;
};

static const char bench_usage[] =
    "usage: dsatopk-audit bench [options]\n"
    "  --backends LIST    comma-separated backend names (default: all)\n"
    "  --shapes LIST      BxL:k items, e.g. 16x131072:2048,64x8192:512 (default: B in\n"
    "                     {1,4,16,64} x L in {8192,32768,65536,131072} x k in {512,2048})\n"
    "  --families LIST    random,relu (default: both)\n"
    "  --replays N        timed graph replays per case, median reported (default 100, min 100)\n"
    "  --warmup N         untimed replays first (default 5)\n"
    "  --device N         CUDA device ordinal (default 0)\n"
    "  --seed N           input seed (default 1)\n"
    "  --emulate-smem-per-sm BYTES  evaluate supports() as on a device with this shared memory\n"
    "  --out FILE         JSON results (default dsatopk-bench.json; - for stdout)\n"
    "  --format table|none  terminal table (default table)\n";

static int parse_shapes(const char *text, struct bench_command_options *options)
{
    const char *p = text;
    options->shape_count = 0;
    while (*p) {
        unsigned rows, length, k;
        int consumed = 0;
        if (options->shape_count >= BENCH_MAX_SHAPES ||
            sscanf(p, "%ux%u:%u%n", &rows, &length, &k, &consumed) != 3 || rows == 0 ||
            length == 0 || k == 0 || length > (1u << 30))
            return -1;
        options->shapes[options->shape_count++] = (struct bench_shape){ rows, length, k };
        p += consumed;
        if (*p == ',')
            p++;
        else if (*p)
            return -1;
    }
    return options->shape_count > 0 ? 0 : -1;
}

static void default_shapes(struct bench_command_options *options)
{
    static const uint32_t rows[] = { 1, 4, 16, 64 };
    static const uint32_t lengths[] = { 8192, 32768, 65536, 131072 };
    static const uint32_t ks[] = { 512, 2048 };
    options->shape_count = 0;
    for (size_t r = 0; r < 4; r++)
        for (size_t l = 0; l < 4; l++)
            for (size_t k = 0; k < 2; k++)
                options->shapes[options->shape_count++] =
                    (struct bench_shape){ rows[r], lengths[l], ks[k] };
}

static int parse_backends(const char *text, struct bench_command_options *options)
{
    char buffer[1024];
    if (strlen(text) >= sizeof(buffer))
        return -1;
    strcpy(buffer, text);
    options->backend_count = 0;
    for (char *save = NULL, *name = strtok_r(buffer, ",", &save); name;
         name = strtok_r(NULL, ",", &save)) {
        const struct topk_backend *backend = topk_backend_find(name);
        if (!backend || options->backend_count >= BENCH_MAX_BACKENDS) {
            cli_print_message(&cmd_bench, "--backends: no backend '%s'", name);
            return -1;
        }
        options->backends[options->backend_count++] = backend;
    }
    return options->backend_count > 0 ? 0 : -1;
}

#ifdef DSATOPK_PHASE_TIMING
/* Measurement builds: where the bitonic kernels' CTAs spent the calls just timed (mean
 * microseconds from a CTA's start to each mark, kernels/bitonic/phase_timing.cuh). */
static void print_phases(void)
{
    static const char *const kernels[PHASE_KERNELS] = { "cluster16", "cluster32", "tree",
                                                        "tree_histogram", "cluster64",
                                                        "cluster128" };
    struct phase_table table;
    struct audit_error err = { 0 };
    int clock_khz = 0;
    if (bitonic_phase_take(&table, &err) != AUDIT_OK) {
        fprintf(stderr, "phases: %s\n", err.message);
        return;
    }
    if (cudaDeviceGetAttribute(&clock_khz, cudaDevAttrClockRate, 0) != cudaSuccess ||
        clock_khz <= 0)
        clock_khz = 1980000;
    for (int kernel = 0; kernel < PHASE_KERNELS; kernel++) {
        bool any = false;
        for (int mark = 0; mark < PHASE_MARKS; mark++) {
            if (!table.ctas[kernel][mark])
                continue;
            if (!any)
                printf("  phases %-14s", kernels[kernel]);
            any = true;
            printf(" m%d %.2f us (%llu)", mark,
                   (double)table.cycles[kernel][mark] / (double)table.ctas[kernel][mark] /
                       (clock_khz * 1e-3),
                   table.ctas[kernel][mark]);
        }
        if (any)
            printf("\n");
    }
}
#endif

static void print_row(const struct bench_result *result)
{
    const struct bench_shape *shape = result->shape;
    const struct bench_timing *timing = &result->timing;
    if (result->outcome != BENCH_TIMED) {
        printf("%-13s %-7s %4u x %-7u %5u  %-12s\n", result->backend->name, result->family,
               shape->rows, shape->length, shape->k, bench_outcome_name(result->outcome));
        return;
    }
    printf("%-13s %-7s %4u x %-7u %5u  %10.2f %10.2f %10.2f %8.2f %7.2f\n", result->backend->name,
           result->family, shape->rows, shape->length, shape->k, timing->median_us,
           timing->min_us, timing->max_us, result->hbm_floor_us,
           timing->median_us / result->hbm_floor_us);
}

/* The results as they come: the table and the document (written once the bench is done). */
struct bench_front {
    const struct bench_command_options *options;
    cJSON *document;  /* NULL until the device is measured, or when out of memory */
    bool out_of_memory;
};

static void on_device_ready(void *user, const struct bench_device *device)
{
    struct bench_front *front = user;
    struct document_context context;
    document_context_fill(&context, cli_version(), cli_command_line());
    front->document = bench_json_begin(&context, device);
    front->out_of_memory = !front->document;
    if (!front->options->table)
        return;
    printf("# %s, %d SMs, L2 %zu MiB, copy bandwidth %.0f GB/s, empty kernel %.2f us\n",
           device->info.name, device->info.sm_count, device->info.l2_bytes >> 20,
           device->copy_bandwidth / 1e9, device->empty_kernel_us);
    printf("%-13s %-7s %-14s %5s  %10s %10s %10s %8s %7s\n", "backend", "family", "rows x L", "k",
           "median_us", "min_us", "max_us", "floor_us", "x_floor");
}

static void on_result(void *user, const struct bench_result *result)
{
    struct bench_front *front = user;
    const bool table = front->options->table;
    if (front->document && bench_json_add_result(front->document, result) < 0)
        front->out_of_memory = true;
    if (table)
        print_row(result);
    /* A lost device ends the bench with this error, which run_bench reports. */
    if (result->outcome == BENCH_FAILED && !result->device_lost)
        cli_print_message(&cmd_bench, "%s: %s", result->backend->name, result->reason);
    if (result->outcome != BENCH_TIMED)
        return;
#ifdef DSATOPK_PHASE_TIMING
    print_phases();
#endif
    fflush(stdout);
}

/* Runs the bench and writes its document. Returns 0 or a negative code (reported). */
static int bench(const struct bench_command_options *options)
{
    struct audit_error err = { 0 };
    struct bench_front front = { .options = options };
    const struct bench_options bench_options = {
        .shapes = options->shapes,
        .shape_count = options->shape_count,
        .backends = options->backends,
        .backend_count = options->backend_count,
        .families = options->families,
        .family_count = options->family_count,
        .replays = options->replays,
        .warmup = options->warmup,
        .device = options->device,
        .seed = options->seed,
        .emulate_smem_per_sm = cli_globals.emulate_smem_per_sm,
    };
    const struct bench_callbacks callbacks = {
        .user = &front,
        .device_ready = on_device_ready,
        .result = on_result,
    };
    int status = bench_run(&bench_options, &callbacks, &err);
    if (status == AUDIT_OK && front.out_of_memory)
        status = audit_fail(&err, AUDIT_ENOMEM, "out of memory building the results");
    if (status == AUDIT_OK)
        status = json_write_file(options->out_path, front.document, &err);
    if (status != AUDIT_OK)
        cli_print_message(&cmd_bench, "%s", err.message);
    cJSON_Delete(front.document);
    return status;
}

static int run_bench(int argc, char **argv)
{
    static const struct option long_options[] = {
        { "backends", required_argument, NULL, 'b' },
        { "shapes", required_argument, NULL, 's' },
        { "families", required_argument, NULL, 'f' },
        { "replays", required_argument, NULL, 'r' },
        { "warmup", required_argument, NULL, 'w' },
        { "device", required_argument, NULL, 'd' },
        { "seed", required_argument, NULL, 'S' },
        { "emulate-smem-per-sm", required_argument, NULL, 'E' },
        { "out", required_argument, NULL, 'o' },
        { "format", required_argument, NULL, 'F' },
        { "help", no_argument, NULL, 'h' },
        { NULL, 0, NULL, 0 },
    };
    struct bench_command_options options = {
        .replays = 100,
        .warmup = 5,
        .seed = 1,
        .out_path = "dsatopk-bench.json",
        .table = true,
        .families = { "random", "relu" },
        .family_count = 2,
    };
    default_shapes(&options);
    for (int i = 0; topk_backend_table[i] && i < BENCH_MAX_BACKENDS; i++)
        options.backends[options.backend_count++] = topk_backend_table[i];
    int option;
    bool help = false;
    opterr = 0; /* messages come from cli_usage_error */
    while ((option = getopt_long(argc, argv, ":o:h", long_options, NULL)) != -1) {
        switch (option) {
        case 'b':
            if (parse_backends(optarg, &options) < 0)
                return cli_usage_error(&cmd_bench, "--backends: bad list '%s'", optarg);
            break;
        case 's':
            if (parse_shapes(optarg, &options) < 0)
                return cli_usage_error(&cmd_bench, "--shapes: '%s' is not a list of BxL:k",
                                       optarg);
            break;
        case 'f':
            if (strcmp(optarg, "random") == 0 || strcmp(optarg, "relu") == 0) {
                options.families[0] = optarg;
                options.family_count = 1;
            } else if (strcmp(optarg, "random,relu") == 0 || strcmp(optarg, "relu,random") == 0) {
                options.family_count = 2;
            } else {
                return cli_usage_error(&cmd_bench, "--families: '%s' (random, relu or both)",
                                       optarg);
            }
            break;
        case 'r':
            if (cli_parse_uint(optarg, 1000000, &options.replays) < 0 || options.replays < 100)
                return cli_usage_error(&cmd_bench, "--replays: '%s' (100 to 1000000)", optarg);
            break;
        case 'w':
            if (cli_parse_uint(optarg, 100000, &options.warmup) < 0)
                return cli_usage_error(&cmd_bench, "--warmup: '%s' is not a count", optarg);
            break;
        case 'd':
            if (cli_parse_uint(optarg, 1024, &options.device) < 0)
                return cli_usage_error(&cmd_bench, "--device: '%s' is not an ordinal", optarg);
            break;
        case 'S':
            if (cli_parse_uint(optarg, UINT64_MAX, &options.seed) < 0)
                return cli_usage_error(&cmd_bench, "--seed: '%s' is not a number", optarg);
            break;
        case 'E':
            if (cli_parse_uint(optarg, 1ull << 32, &cli_globals.emulate_smem_per_sm) < 0)
                return cli_usage_error(&cmd_bench, "--emulate-smem-per-sm: '%s'", optarg);
            break;
        case 'o': options.out_path = optarg; break;
        case 'F':
            if (strcmp(optarg, "table") == 0)
                options.table = true;
            else if (strcmp(optarg, "none") == 0)
                options.table = false;
            else
                return cli_usage_error(&cmd_bench, "--format: '%s' (table or none)", optarg);
            break;
        case 'h': help = true; break;
        default: return cli_option_error(&cmd_bench, option, argv);
        }
    }
    if (help) {
        cli_print_usage(&cmd_bench, stdout);
        return EXIT_AUDIT_OK;
    }
    if (optind < argc)
        return cli_usage_error(&cmd_bench, "unexpected argument '%s'", argv[optind]);
    return audit_exit_code(bench(&options));
}

const struct cli_command cmd_bench = {
    "bench",
    "microseconds per call of every backend over a shape grid (CUDA graph replay)",
    bench_usage,
    run_bench,
};
