/* The bench engine behind `bench` (bench.h): microseconds per call of every backend over a shape
 * grid.
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
#include "bench.h"
#include "cuda_check.h"
#include "gpu_device.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cuda_runtime_api.h>

#include "synth.h"

#define BENCH_MAX_COPIES 4096

static int compare_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* A bench buffer's free. A failed one's error is consumed, so that no later check of the last
 * error reads it as its own; a fault that broke the context fails the next CUDA call, which
 * reports it, and the results measured before it stand. */
static void bench_free(void *pointer)
{
    if (pointer && cudaFree(pointer) != cudaSuccess)
        (void)cudaGetLastError();
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
    bench_free(source);
    bench_free(destination);
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

/* The device buffers of one family and B x L: `copies` copies of the scores so that they exceed
 * 2 x L2. The next shape reuses them when only its k differs: random and relu rows (the families
 * bench draws) do not depend on k, and drawing and uploading a big shape costs seconds. */
struct bench_buffers {
    float *scores;       /* copies * rows * row_stride */
    int32_t *lengths;
    int32_t *out;        /* rows * out_k */
    void *l2_flush;      /* 2 x L2 bytes written between replays */
    size_t l2_flush_bytes;
    uint32_t copies;
    uint32_t rows, length; /* the shape drawn (length: set by the caller) */
    uint64_t row_stride;
    uint32_t out_k;        /* 0 until an output buffer is allocated */
};

static void bench_buffers_free(struct bench_buffers *buffers)
{
    bench_free(buffers->scores);
    bench_free(buffers->lengths);
    bench_free(buffers->out);
    bench_free(buffers->l2_flush);
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
        if ((status = gpu_upload((char *)buffers->scores + c * input_bytes, record->scores,
                                 input_bytes, err)) < 0)
            goto error;
    buffers->l2_flush_bytes = 2 * device->l2_bytes;
    CUDA_CHECK_GOTO(cudaMalloc(&buffers->l2_flush, buffers->l2_flush_bytes), err, status, error);
    CUDA_CHECK_GOTO(cudaMalloc((void **)&buffers->lengths, record->rows * sizeof(int32_t)), err,
                    status, error);
    if ((status = gpu_upload(buffers->lengths, record->lengths, record->rows * sizeof(int32_t),
                             err)) < 0)
        goto error;
    buffers->rows = record->rows;
    buffers->row_stride = record->row_stride;
    return AUDIT_OK;
error:
    bench_buffers_free(buffers);
    return status;
}

/* An output buffer of at least rows x k. */
static int bench_buffers_fit_k(struct bench_buffers *buffers, uint32_t k, struct audit_error *err)
{
    int status = AUDIT_OK;
    if (k <= buffers->out_k)
        return AUDIT_OK;
    CUDA_CHECK_GOTO(cudaFree(buffers->out), err, status, done);
    buffers->out = NULL;
    buffers->out_k = 0;
    CUDA_CHECK_GOTO(cudaMalloc((void **)&buffers->out,
                               (size_t)buffers->rows * k * sizeof(int32_t)),
                    err, status, done);
    buffers->out_k = k;
done:
    return status;
}

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
    bench_free(scratch);
    return status;
}

/* The device: queried, made current, and measured (copy bandwidth, empty kernel). */
static int prepare_device(const struct bench_options *options, struct bench_device *device,
                          struct audit_error *err)
{
    int device_count = 0;
    char why[512] = "";
    memset(device, 0, sizeof(*device));
    if (gpu_device_count(&device_count, why, sizeof(why)) != 0 || device_count == 0)
        return audit_fail(err, AUDIT_EDEVICE, "no CUDA device: %s", why);
    if ((int)options->device >= device_count)
        return audit_fail(err, AUDIT_EUSAGE, "--device %llu: only %d device(s)", options->device,
                          device_count);
    int status = gpu_device_query((int)options->device, options->emulate_smem_per_sm,
                                  &device->info, err);
    if (status == AUDIT_OK)
        status = cudaSetDevice((int)options->device) == cudaSuccess
                     ? AUDIT_OK
                     : audit_fail(err, AUDIT_EDEVICE, "cudaSetDevice(%llu) failed",
                                  options->device);
    if (status == AUDIT_OK) {
        /* bitonic's supports() sizes its clusters by the packing; without it (the query
         * failed) it assumes every SM takes a CTA. */
        struct audit_error ignored = { 0 };
        (void)gpu_device_measure_clusters(&device->info, &ignored);
        status = measure_copy_bandwidth(&device->copy_bandwidth, err);
    }
    if (status == AUDIT_OK)
        status = measure_empty_kernel(&device->empty_kernel_us, err);
    return status;
}

/* Every backend on one uploaded shape and family. */
static int bench_backends(const struct bench_options *options,
                          const struct bench_callbacks *callbacks,
                          const struct bench_device *device, struct bench_result *result,
                          struct bench_buffers *buffers,
                          const struct topk_shape *topk_shape, struct audit_error *err)
{
    for (int b = 0; b < options->backend_count; b++) {
        const struct topk_backend *backend = options->backends[b];
        char reason[512] = "";
        struct audit_error backend_err = { 0 };
        result->backend = backend;
        result->device_lost = false;
        memset(&result->timing, 0, sizeof(result->timing));
        if (!backend->supports(&device->info, topk_shape, reason, sizeof(reason))) {
            result->outcome = BENCH_UNSUPPORTED;
            result->reason = reason;
        } else if (bench_time_backend(backend, topk_shape, buffers, &device->info, options,
                                      &result->timing, &backend_err) != AUDIT_OK) {
            result->outcome = BENCH_FAILED;
            result->reason = backend_err.message;
            /* A sticky CUDA error poisons the context: nothing after it can be timed. */
            result->device_lost = cudaGetLastError() != cudaSuccess &&
                                  cudaDeviceSynchronize() != cudaSuccess;
        } else {
            /* What supports() said it would run (bitonic: cluster, tree or one CTA). */
            result->outcome = BENCH_TIMED;
            result->reason = reason;
        }
        if (callbacks->result)
            callbacks->result(callbacks->user, result);
        if (result->device_lost)
            return audit_fail(err, AUDIT_EDEVICE, "%s: %s", backend->name, backend_err.message);
    }
    return AUDIT_OK;
}

const char *bench_outcome_name(enum bench_outcome outcome)
{
    switch (outcome) {
    case BENCH_TIMED: return "ok";
    case BENCH_UNSUPPORTED: return "unsupported";
    case BENCH_FAILED: return "error";
    }
    return "unknown";
}

int bench_run(const struct bench_options *options, const struct bench_callbacks *callbacks,
              struct audit_error *err)
{
    struct bench_device device;
    int status = prepare_device(options, &device, err);
    if (status != AUDIT_OK)
        return status;
    if (callbacks->device_ready)
        callbacks->device_ready(callbacks->user, &device);
    for (int f = 0; f < options->family_count && status == AUDIT_OK; f++) {
        struct bench_buffers buffers = { 0 };
        for (int s = 0; s < options->shape_count && status == AUDIT_OK; s++) {
            const struct bench_shape *shape = &options->shapes[s];
            const char *family = options->families[f];
            if (!buffers.scores || buffers.rows != shape->rows ||
                buffers.length != shape->length) {
                struct synth_params params = {
                    .family = family,
                    .rows = shape->rows,
                    .length = shape->length,
                    .k = shape->k,
                    .seed = options->seed,
                };
                struct capture_record record = { 0 };
                bench_buffers_free(&buffers);
                status = synth_generate(&params, &record, err);
                if (status == AUDIT_OK)
                    status = bench_buffers_upload(&buffers, &record, &device.info, err);
                buffers.length = shape->length;
                capture_record_free(&record);
            }
            if (status == AUDIT_OK)
                status = bench_buffers_fit_k(&buffers, shape->k, err);
            if (status != AUDIT_OK) {
                audit_error_prefix(err, "%ux%u k %u %s", shape->rows, shape->length, shape->k,
                                   family);
                break;
            }
            const struct topk_shape topk_shape = {
                .rows = shape->rows,
                .k = shape->k,
                .row_stride = buffers.row_stride,
                .max_length = (int32_t)shape->length,
                .min_length = (int32_t)shape->length,
            };
            const double bytes = (double)shape->rows * shape->length * sizeof(float) +
                                 (double)shape->rows * shape->k * sizeof(int32_t);
            struct bench_result result = {
                .family = family,
                .shape = shape,
                .hbm_floor_us = bytes / device.copy_bandwidth * 1e6,
                .input_copies = buffers.copies,
            };
            status = bench_backends(options, callbacks, &device, &result, &buffers, &topk_shape,
                                    err);
        }
        bench_buffers_free(&buffers);
    }
    return status;
}
