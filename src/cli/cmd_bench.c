/* dsatopk-audit bench: microseconds per call of every backend over a shape grid.
 *
 * Method (docs/PERF.md): inputs are synthetic (random N(0,1) or the relu plateau family),
 * uploaded into enough copies that the copies together exceed twice the L2 cache, so every call
 * reads its scores from HBM as it would in an engine. One CUDA graph holds one launch per copy;
 * (capped at a replay of about 5 ms, at least 20 launches), and the L2 is overwritten before
 * every replay, so no call finds its scores in the cache; each replay of the graph is timed
 * with CUDA events and divided by the launches in it; the
 * reported figure is the median over at least 100 replays after warm-up. The HBM floor is the
 * bytes a call must move (scores read once, outputs written once) over the device-to-device
 * copy bandwidth measured at start. */
#include <getopt.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <cuda_runtime_api.h>

#include "cli.h"
#include "cuda_check.h"
#include "error.h"
#include "json_util.h"
#include "phase_timing.h"
#include "synth.h"
#include "topk_backends.h"

#define BENCH_MAX_SHAPES 256
#define BENCH_MAX_BACKENDS 16
#define BENCH_MAX_COPIES 4096

struct bench_shape {
    uint32_t rows, length, k;
};

struct bench_options {
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

struct bench_timing {
    double median_us, min_us, max_us;
    uint32_t launches_per_replay;
    uint64_t replays;
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

static int parse_shapes(const char *text, struct bench_options *options)
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

static void default_shapes(struct bench_options *options)
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

static int parse_backends(const char *text, struct bench_options *options)
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
            fprintf(stderr, "dsatopk-audit bench: --backends: no backend '%s'\n", name);
            return -1;
        }
        options->backends[options->backend_count++] = backend;
    }
    return options->backend_count > 0 ? 0 : -1;
}

static int compare_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* Device-to-device copy bandwidth in bytes per second (bytes read plus bytes written). */
static int measure_copy_bandwidth(double *bytes_per_second, struct audit_error *err)
{
    const size_t bytes = (size_t)1 << 30;
    void *source = NULL, *destination = NULL;
    cudaEvent_t start = NULL, stop = NULL;
    double samples[10];
    int status = AUDIT_OK;
    CUDA_CHECK_GOTO(cudaMalloc(&source, bytes), err, status, done);
    CUDA_CHECK_GOTO(cudaMalloc(&destination, bytes), err, status, done);
    CUDA_CHECK_GOTO(cudaMemset(source, 0x5a, bytes), err, status, done);
    CUDA_CHECK_GOTO(cudaEventCreate(&start), err, status, done);
    CUDA_CHECK_GOTO(cudaEventCreate(&stop), err, status, done);
    CUDA_CHECK_GOTO(cudaMemcpy(destination, source, bytes, cudaMemcpyDeviceToDevice), err,
                    status, done);
    for (int i = 0; i < 10; i++) {
        float milliseconds = 0;
        CUDA_CHECK_GOTO(cudaEventRecord(start, 0), err, status, done);
        CUDA_CHECK_GOTO(cudaMemcpyAsync(destination, source, bytes, cudaMemcpyDeviceToDevice, 0),
                        err, status, done);
        CUDA_CHECK_GOTO(cudaEventRecord(stop, 0), err, status, done);
        CUDA_CHECK_GOTO(cudaEventSynchronize(stop), err, status, done);
        CUDA_CHECK_GOTO(cudaEventElapsedTime(&milliseconds, start, stop), err, status, done);
        samples[i] = 2.0 * (double)bytes / (milliseconds * 1e-3);
    }
    qsort(samples, 10, sizeof(double), compare_double);
    *bytes_per_second = samples[5];
done:
    if (start)
        cudaEventDestroy(start);
    if (stop)
        cudaEventDestroy(stop);
    cudaFree(source);
    cudaFree(destination);
    return status;
}

/* Times `replays` replays of graph_exec on stream with CUDA events, each divided by the
 * `launches` in the graph, into samples (sorted ascending on return). Before each replay,
 * untimed, `flush_bytes` of `flush` are overwritten (so that no launch finds its inputs in the
 * L2), unless flush is NULL. */
static int time_replays(cudaGraphExec_t graph_exec, cudaStream_t stream, uint32_t launches,
                        unsigned long long replays, void *flush, size_t flush_bytes,
                        double *samples, struct audit_error *err)
{
    cudaEvent_t start = NULL, stop = NULL;
    int status = AUDIT_OK;
    CUDA_CHECK_GOTO(cudaEventCreate(&start), err, status, done);
    CUDA_CHECK_GOTO(cudaEventCreate(&stop), err, status, done);
    for (unsigned long long i = 0; i < replays; i++) {
        float milliseconds = 0;
        if (flush)
            CUDA_CHECK_GOTO(cudaMemsetAsync(flush, (int)(i & 0xff), flush_bytes, stream), err,
                            status, done);
        CUDA_CHECK_GOTO(cudaEventRecord(start, stream), err, status, done);
        CUDA_CHECK_GOTO(cudaGraphLaunch(graph_exec, stream), err, status, done);
        CUDA_CHECK_GOTO(cudaEventRecord(stop, stream), err, status, done);
        CUDA_CHECK_GOTO(cudaEventSynchronize(stop), err, status, done);
        CUDA_CHECK_GOTO(cudaEventElapsedTime(&milliseconds, start, stop), err, status, done);
        samples[i] = milliseconds * 1e3 / launches;
    }
    qsort(samples, replays, sizeof(double), compare_double);
done:
    if (start)
        cudaEventDestroy(start);
    if (stop)
        cudaEventDestroy(stop);
    return status;
}

/* Ends a capture that an error interrupted, and frees what a timing function built. */
static void graph_cleanup(cudaStream_t stream, bool capturing, cudaGraphExec_t graph_exec,
                          cudaGraph_t graph)
{
    if (capturing) {
        cudaGraph_t abandoned = NULL;
        if (cudaStreamEndCapture(stream, &abandoned) == cudaSuccess && abandoned)
            cudaGraphDestroy(abandoned);
    }
    if (graph_exec)
        cudaGraphExecDestroy(graph_exec);
    if (graph)
        cudaGraphDestroy(graph);
    if (stream)
        cudaStreamDestroy(stream);
}

/* The time of one empty kernel in the graph method (median over 100 replays of a graph of 100
 * launches): what every call pays before it does anything. */
static int measure_empty_kernel(double *microseconds, struct audit_error *err)
{
    enum { LAUNCHES = 100, REPLAYS = 100 };
    cudaStream_t stream = NULL;
    cudaGraph_t graph = NULL;
    cudaGraphExec_t graph_exec = NULL;
    double samples[REPLAYS];
    bool capturing = false;
    int status = AUDIT_OK;
    CUDA_CHECK_GOTO(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking), err, status, done);
    CUDA_CHECK_GOTO(cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal), err, status,
                    done);
    capturing = true;
    for (int i = 0; i < LAUNCHES && status == AUDIT_OK; i++)
        status = gpu_launch_empty(stream, err);
    capturing = false;
    CUDA_CHECK_GOTO(cudaStreamEndCapture(stream, &graph), err, status, done);
    if (status != AUDIT_OK)
        goto done;
    CUDA_CHECK_GOTO(cudaGraphInstantiate(&graph_exec, graph, 0), err, status, done);
    CUDA_CHECK_GOTO(cudaGraphLaunch(graph_exec, stream), err, status, done); /* warm-up */
    status = time_replays(graph_exec, stream, LAUNCHES, REPLAYS, NULL, 0, samples, err);
    if (status == AUDIT_OK)
        *microseconds = samples[REPLAYS / 2];
done:
    graph_cleanup(stream, capturing, graph_exec, graph);
    return status;
}

/* The device buffers of one shape: `copies` copies of the scores so that they exceed 2 x L2. */
struct bench_buffers {
    float *scores;       /* copies * rows * length */
    int32_t *lengths;
    int32_t *out;
    void *l2_flush;      /* 2 x L2 bytes written between replays */
    size_t l2_flush_bytes;
    uint32_t copies;
};

static void bench_buffers_free(struct bench_buffers *buffers)
{
    cudaFree(buffers->scores);
    cudaFree(buffers->lengths);
    cudaFree(buffers->out);
    cudaFree(buffers->l2_flush);
    memset(buffers, 0, sizeof(*buffers));
}

static int bench_buffers_upload(struct bench_buffers *buffers, const struct capture_record *record,
                                const struct gpu_device_info *device, struct audit_error *err)
{
    const size_t row_bytes = (size_t)record->row_stride * sizeof(float);
    const size_t input_bytes = row_bytes * record->rows;
    int status = AUDIT_OK;
    size_t wanted = 2 * device->l2_bytes + 1;
    uint64_t copies = (wanted + input_bytes - 1) / input_bytes;
    if (copies < 2)
        copies = 2;
    if (copies > BENCH_MAX_COPIES)
        copies = BENCH_MAX_COPIES;
    memset(buffers, 0, sizeof(*buffers));
    buffers->copies = (uint32_t)copies;
    CUDA_CHECK_GOTO(cudaMalloc((void **)&buffers->scores, input_bytes * copies), err, status,
                    error);
    for (uint64_t c = 0; c < copies; c++)
        CUDA_CHECK_GOTO(cudaMemcpy((char *)buffers->scores + c * input_bytes, record->scores,
                                   input_bytes, cudaMemcpyHostToDevice),
                        err, status, error);
    buffers->l2_flush_bytes = 2 * device->l2_bytes;
    CUDA_CHECK_GOTO(cudaMalloc(&buffers->l2_flush, buffers->l2_flush_bytes), err, status, error);
    CUDA_CHECK_GOTO(cudaMalloc((void **)&buffers->lengths, record->rows * sizeof(int32_t)), err,
                    status, error);
    CUDA_CHECK_GOTO(cudaMemcpy(buffers->lengths, record->lengths, record->rows * sizeof(int32_t),
                               cudaMemcpyHostToDevice),
                    err, status, error);
    CUDA_CHECK_GOTO(cudaMalloc((void **)&buffers->out,
                               (size_t)record->rows * record->k * sizeof(int32_t)),
                    err, status, error);
    return AUDIT_OK;
error:
    bench_buffers_free(buffers);
    return status;
}

#ifdef DSATOPK_PHASE_TIMING
/* Measurement builds: where the bitonic kernels' CTAs spent the calls just timed (mean
 * microseconds from a CTA's start to each mark, kernels/phase_timing.cuh). */
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

/* Times one backend on one uploaded shape with graph replay. */
static int bench_time_backend(const struct topk_backend *backend, const struct topk_shape *shape,
                              struct bench_buffers *buffers, const struct gpu_device_info *device,
                              const struct bench_options *options, struct bench_timing *timing,
                              struct audit_error *err)
{
    int status = AUDIT_OK;
    cudaStream_t stream = NULL;
    cudaGraph_t graph = NULL;
    cudaGraphExec_t graph_exec = NULL;
    cudaEvent_t start = NULL, stop = NULL;
    void *scratch = NULL;
    double *samples = NULL;
    bool capturing = false;
    size_t scratch_bytes = backend->scratch_bytes ? backend->scratch_bytes(device, shape) : 0;
    const size_t input_elements = (size_t)shape->rows * shape->row_stride;
    uint32_t launches;

    if (scratch_bytes)
        CUDA_CHECK_GOTO(cudaMalloc(&scratch, scratch_bytes), err, status, done);
    CUDA_CHECK_GOTO(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking), err, status, done);
    CUDA_CHECK_GOTO(cudaEventCreate(&start), err, status, done);
    CUDA_CHECK_GOTO(cudaEventCreate(&stop), err, status, done);

    struct topk_problem problem = {
        .shape = *shape,
        .lengths = buffers->lengths,
        .out = buffers->out,
        .scratch = scratch,
        .scratch_bytes = scratch_bytes,
    };
    /* Eager launches first: one-time setup (attributes, module load) stays out of capture, and
     * their time sizes the graph. */
    float eager_milliseconds = 0;
    problem.scores = buffers->scores;
    status = backend->launch(&problem, device, stream, err);
    if (status != AUDIT_OK)
        goto done;
    CUDA_CHECK_GOTO(cudaEventRecord(start, stream), err, status, done);
    for (uint32_t i = 0; i < 5; i++) {
        problem.scores = buffers->scores + (size_t)(i % buffers->copies) * input_elements;
        status = backend->launch(&problem, device, stream, err);
        if (status != AUDIT_OK)
            goto done;
    }
    CUDA_CHECK_GOTO(cudaEventRecord(stop, stream), err, status, done);
    CUDA_CHECK_GOTO(cudaEventSynchronize(stop), err, status, done);
    CUDA_CHECK_GOTO(cudaEventElapsedTime(&eager_milliseconds, start, stop), err, status, done);
    /* One launch per input copy, so a replay reads more than twice the L2; at least 20 launches
     * so a replay is well over the graph launch overhead; no more than a replay of about 5 ms
     * (beyond 20 launches) so the whole grid fits a short device session. */
    launches = buffers->copies;
    double eager_us_per_call = eager_milliseconds * 1e3 / 5;
    if (eager_us_per_call > 0 && launches * eager_us_per_call > 5000)
        launches = (uint32_t)(5000 / eager_us_per_call);
    if (launches < 20)
        launches = 20;

    CUDA_CHECK_GOTO(cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal), err, status,
                    done);
    capturing = true;
    for (uint32_t i = 0; i < launches; i++) {
        problem.scores = buffers->scores + (size_t)(i % buffers->copies) * input_elements;
        status = backend->launch(&problem, device, stream, err);
        if (status != AUDIT_OK)
            goto done;
    }
    capturing = false;
    CUDA_CHECK_GOTO(cudaStreamEndCapture(stream, &graph), err, status, done);
    CUDA_CHECK_GOTO(cudaGraphInstantiate(&graph_exec, graph, 0), err, status, done);

    for (unsigned long long i = 0; i < options->warmup; i++)
        CUDA_CHECK_GOTO(cudaGraphLaunch(graph_exec, stream), err, status, done);
    CUDA_CHECK_GOTO(cudaStreamSynchronize(stream), err, status, done);

    samples = calloc(options->replays, sizeof(double));
    if (!samples) {
        status = audit_fail(err, AUDIT_ENOMEM, "out of memory");
        goto done;
    }
    /* Each launch of a replay reads its own copy, and the L2 is overwritten before each replay
     * (untimed), so no launch finds its scores in the cache. */
    status = time_replays(graph_exec, stream, launches, options->replays, buffers->l2_flush,
                          buffers->l2_flush_bytes, samples, err);
    if (status != AUDIT_OK)
        goto done;
    timing->median_us = samples[options->replays / 2];
    timing->min_us = samples[0];
    timing->max_us = samples[options->replays - 1];
    timing->launches_per_replay = launches;
    timing->replays = options->replays;
done:
    graph_cleanup(stream, capturing, graph_exec, graph);
    free(samples);
    if (start)
        cudaEventDestroy(start);
    if (stop)
        cudaEventDestroy(stop);
    cudaFree(scratch);
    return status;
}

static cJSON *device_json(const struct gpu_device_info *device, double copy_bandwidth,
                          double empty_kernel_us)
{
    cJSON *json = cJSON_CreateObject();
    cJSON_AddStringToObject(json, "name", device->name);
    char capability[16];
    snprintf(capability, sizeof(capability), "%d.%d", device->cc_major, device->cc_minor);
    cJSON_AddStringToObject(json, "compute_capability", capability);
    cJSON_AddNumberToObject(json, "sm_count", device->sm_count);
    json_add_u64(json, "smem_per_sm_bytes", device->smem_per_sm);
    json_add_u64(json, "l2_bytes", device->l2_bytes);
    cJSON_AddNumberToObject(json, "driver_version", device->driver_version);
    cJSON_AddNumberToObject(json, "runtime_version", device->runtime_version);
    json_add_number(json, "copy_bandwidth_bytes_per_s", copy_bandwidth);
    json_add_number(json, "empty_kernel_us", empty_kernel_us);
    /* clusters of 1 .. 16 CTAs of one SM each at once: what bitonic's plans were sized by */
    cJSON *fit = device->cluster_fit[1] ? cJSON_AddArrayToObject(json, "clusters_at_once")
                                        : cJSON_AddNullToObject(json, "clusters_at_once");
    for (int size = 1; fit && device->cluster_fit[1] && size <= GPU_CLUSTER_MAX; size++)
        cJSON_AddItemToArray(fit, cJSON_CreateNumber(device->cluster_fit[size]));
    return json;
}

static void print_row(const char *backend, const char *family, const struct bench_shape *shape,
                      const char *status, const struct bench_timing *timing, double floor_us)
{
    if (!timing) {
        printf("%-13s %-7s %4u x %-7u %5u  %-12s\n", backend, family, shape->rows, shape->length,
               shape->k, status);
        return;
    }
    printf("%-13s %-7s %4u x %-7u %5u  %10.2f %10.2f %10.2f %8.2f %7.2f\n", backend, family,
           shape->rows, shape->length, shape->k, timing->median_us, timing->min_us,
           timing->max_us, floor_us, timing->median_us / floor_us);
}

static int bench_run(const struct bench_options *options)
{
    struct audit_error err = { 0 };
    int status = AUDIT_OK, device_count = 0;
    char why[512] = "";
    struct gpu_device_info device;
    double copy_bandwidth = 0, empty_kernel_us = 0;
    cJSON *root = cJSON_CreateObject(), *results = NULL;

    if (gpu_device_count(&device_count, why, sizeof(why)) != 0 || device_count == 0) {
        fprintf(stderr, "dsatopk-audit bench: no CUDA device: %s\n", why);
        status = AUDIT_EDEVICE;
        goto done;
    }
    if ((int)options->device >= device_count) {
        fprintf(stderr, "dsatopk-audit bench: --device %llu: only %d device(s)\n", options->device,
                device_count);
        status = AUDIT_EUSAGE;
        goto done;
    }
    status = gpu_device_query((int)options->device, cli_globals.emulate_smem_per_sm, &device, &err);
    if (status == AUDIT_OK)
        status = cudaSetDevice((int)options->device) == cudaSuccess
                     ? AUDIT_OK
                     : audit_fail(&err, AUDIT_EDEVICE, "cudaSetDevice(%llu) failed",
                                  options->device);
    if (status == AUDIT_OK) {
        /* bitonic's supports() sizes its clusters by the packing; without it (the query
         * failed) it assumes every SM takes a CTA. */
        struct audit_error ignored = { 0 };
        (void)gpu_device_measure_clusters(&device, &ignored);
        status = measure_copy_bandwidth(&copy_bandwidth, &err);
    }
    if (status == AUDIT_OK)
        status = measure_empty_kernel(&empty_kernel_us, &err);
    if (status != AUDIT_OK) {
        fprintf(stderr, "dsatopk-audit bench: %s\n", err.message);
        goto done;
    }

    time_t now = time(NULL);
    char utc[32];
    strftime(utc, sizeof(utc), "%Y-%m-%dT%H:%M:%SZ", gmtime(&now));
    cJSON_AddStringToObject(root, "schema", "dsatopk-audit/bench");
    cJSON_AddNumberToObject(root, "schema_version", 1);
    cJSON *context = cJSON_AddObjectToObject(root, "context");
    cJSON_AddStringToObject(context, "tool_version", cli_version());
    cJSON_AddStringToObject(context, "command_line", cli_command_line());
    cJSON_AddStringToObject(context, "utc_time", utc);
    char host[256] = "";
    gethostname(host, sizeof(host) - 1);
    cJSON_AddStringToObject(context, "host", host);
    cJSON_AddItemToObject(context, "device", device_json(&device, copy_bandwidth, empty_kernel_us));
    cJSON_AddStringToObject(context, "method",
                            "CUDA graph replay; per-call time = replay time / launches in the "
                            "graph; median over replays; inputs rotated over > 2 x L2");
    results = cJSON_AddArrayToObject(root, "results");

    if (options->table) {
        printf("# %s, %d SMs, L2 %zu MiB, copy bandwidth %.0f GB/s, empty kernel %.2f us\n",
               device.name, device.sm_count, device.l2_bytes >> 20, copy_bandwidth / 1e9,
               empty_kernel_us);
        printf("%-13s %-7s %-14s %5s  %10s %10s %10s %8s %7s\n", "backend", "family", "rows x L",
               "k", "median_us", "min_us", "max_us", "floor_us", "x_floor");
    }
    for (int s = 0; s < options->shape_count; s++) {
        const struct bench_shape *shape = &options->shapes[s];
        for (int f = 0; f < options->family_count; f++) {
            struct synth_params params = {
                .family = options->families[f],
                .rows = shape->rows,
                .length = shape->length,
                .k = shape->k,
                .seed = options->seed,
            };
            struct capture_record record = { 0 };
            struct bench_buffers buffers = { 0 };
            status = synth_generate(&params, &record, &err);
            if (status == AUDIT_OK)
                status = bench_buffers_upload(&buffers, &record, &device, &err);
            if (status != AUDIT_OK) {
                fprintf(stderr, "dsatopk-audit bench: %ux%u k %u %s: %s\n", shape->rows,
                        shape->length, shape->k, params.family, err.message);
                capture_record_free(&record);
                goto done;
            }
            struct topk_shape topk_shape = {
                .rows = shape->rows,
                .k = shape->k,
                .row_stride = record.row_stride,
                .max_length = (int32_t)shape->length,
            };
            double bytes = (double)shape->rows * shape->length * sizeof(float) +
                           (double)shape->rows * shape->k * sizeof(int32_t);
            double floor_us = bytes / copy_bandwidth * 1e6;
            for (int b = 0; b < options->backend_count; b++) {
                const struct topk_backend *backend = options->backends[b];
                char reason[512] = "";
                struct bench_timing timing = { 0 };
                cJSON *item = cJSON_CreateObject();
                cJSON_AddItemToArray(results, item);
                cJSON_AddStringToObject(item, "backend", backend->name);
                cJSON_AddStringToObject(item, "family", params.family);
                cJSON_AddNumberToObject(item, "rows", shape->rows);
                cJSON_AddNumberToObject(item, "length", shape->length);
                cJSON_AddNumberToObject(item, "k", shape->k);
                json_add_number(item, "hbm_floor_us", floor_us);
                if (!backend->supports(&device, &topk_shape, reason, sizeof(reason))) {
                    cJSON_AddStringToObject(item, "status", "unsupported");
                    cJSON_AddStringToObject(item, "reason", reason);
                    if (options->table)
                        print_row(backend->name, params.family, shape, "unsupported", NULL, 0);
                    continue;
                }
                struct audit_error backend_err = { 0 };
                int backend_status = bench_time_backend(backend, &topk_shape, &buffers, &device,
                                                        options, &timing, &backend_err);
                if (backend_status != AUDIT_OK) {
                    cJSON_AddStringToObject(item, "status", "error");
                    cJSON_AddStringToObject(item, "reason", backend_err.message);
                    if (options->table)
                        print_row(backend->name, params.family, shape, "error", NULL, 0);
                    fprintf(stderr, "dsatopk-audit bench: %s: %s\n", backend->name,
                            backend_err.message);
                    /* A sticky CUDA error poisons the context: nothing after it can be timed. */
                    if (cudaGetLastError() != cudaSuccess &&
                        cudaDeviceSynchronize() != cudaSuccess) {
                        status = AUDIT_EDEVICE;
                        bench_buffers_free(&buffers);
                        capture_record_free(&record);
                        goto done;
                    }
                    continue;
                }
                cJSON_AddStringToObject(item, "status", "ok");
                /* What supports() said it would run (bitonic: cluster, tree or one CTA). */
                if (reason[0])
                    cJSON_AddStringToObject(item, "plan", reason);
                json_add_number(item, "median_us", timing.median_us);
                json_add_number(item, "min_us", timing.min_us);
                json_add_number(item, "max_us", timing.max_us);
                json_add_number(item, "ratio_to_floor", timing.median_us / floor_us);
                cJSON_AddNumberToObject(item, "replays", (double)timing.replays);
                cJSON_AddNumberToObject(item, "launches_per_replay", timing.launches_per_replay);
                cJSON_AddNumberToObject(item, "input_copies", buffers.copies);
                if (options->table)
                    print_row(backend->name, params.family, shape, "ok", &timing, floor_us);
#ifdef DSATOPK_PHASE_TIMING
                print_phases();
#endif
                fflush(stdout);
            }
            bench_buffers_free(&buffers);
            capture_record_free(&record);
        }
    }
    status = json_write_file(options->out_path, root, &err);
    if (status != AUDIT_OK)
        fprintf(stderr, "dsatopk-audit bench: %s\n", err.message);
done:
    cJSON_Delete(root);
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
    struct bench_options options = {
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
    while ((option = getopt_long(argc, argv, "o:h", long_options, NULL)) != -1) {
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
        case 'h': cli_print_usage(&cmd_bench, stdout); return EXIT_AUDIT_OK;
        default: return cli_usage_error(&cmd_bench, "unknown option");
        }
    }
    if (optind < argc)
        return cli_usage_error(&cmd_bench, "unexpected argument '%s'", argv[optind]);
    return audit_exit_code(bench_run(&options));
}

const struct cli_command cmd_bench = {
    "bench",
    "microseconds per call of every backend over a shape grid (CUDA graph replay)",
    bench_usage,
    run_bench,
};
