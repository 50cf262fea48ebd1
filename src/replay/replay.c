/* GPU replay of one record x backend: poison, noise, launch between events, GPU row hashes,
 * copy back only what is new, tally (docs/REPORT.md "What a replay does"); every phase's time
 * goes to result->time (docs/REPORT.md "time_breakdown_ms"). Host C over the CUDA runtime. */
#include "replay.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cuda_runtime_api.h>

#include "cuda_check.h"
#include "gpu_device.h"
#include "output_file.h"
#include "output_hash.h"
#include "selection.h"
#include "tally_queue.h"

/* Noise bursts kept queued on the sibling stream (keep_noise_queued): two, so that a launch
 * always has a whole burst ahead of it, whatever is left of the one running. */
#define REPLAY_NOISE_BURSTS_QUEUED 2

struct replay_device {
    int ordinal;
    struct gpu_device_info info;
    cudaStream_t stream;       /* the backend's launches */
    cudaStream_t noise_stream; /* the noise bursts, never synchronised with stream */
    cudaEvent_t start, stop;
    enum noise_kind noise_kind;
    struct noise_state *noise; /* NULL with --noise none */
    /* The end of each burst still queued on noise_stream, oldest first (keep_noise_queued). */
    cudaEvent_t burst_done[REPLAY_NOISE_BURSTS_QUEUED];
    unsigned bursts_queued;
    /* The device has memory pools: each backend's buffers are stream-ordered (cudaMallocAsync,
     * cudaFreeAsync on stream), so that freeing them does not wait for the noise as cudaFree,
     * which synchronises the whole device, would. */
    bool memory_pools;
    char lost[AUDIT_ERROR_MESSAGE_BYTES];
};

struct replay_input {
    struct replay_device *device;
    const struct capture_record *record;
    uint32_t k;
    struct topk_shape shape;
    bool uploaded;
    float *scores;
    int32_t *lengths, *row_starts, *page_table, *page_table_row_starts;
};

/* Caller-owned outputs and scratch of one backend on one input. */
struct launch_buffers {
    cudaStream_t stream;    /* where they are allocated and freed (NULL: cudaMalloc, cudaFree) */
    int32_t *out, *raw_out; /* raw_out only with a page table */
    void *scratch;
    size_t out_bytes, scratch_bytes;
    uint64_t *row_hashes;   /* rows: the GPU pre-filter's row hashes (NULL without it) */
};

/* ---- device --------------------------------------------------------------------------------- */

/* After a failed CUDA call: clears a non-sticky error, then asks the context whether it still
 * works. A sticky error (illegal address, launch failure, ...) comes back from every later call,
 * so the device is marked lost with the failure that caused it. */
static int settle_device_failure(struct replay_device *device, const char *what,
                                 const struct audit_error *cause)
{
    (void)cudaGetLastError();
    cudaError_t health = cudaDeviceSynchronize();
    if (health == cudaSuccess)
        health = cudaGetLastError();
    if (health == cudaSuccess)
        return AUDIT_OK;
    snprintf(device->lost, sizeof(device->lost),
             "the CUDA context is unusable after %s: %.640s (now: %s, %s)", what,
             cause && cause->message[0] ? cause->message : "a CUDA error",
             cudaGetErrorName(health), cudaGetErrorString(health));
    return AUDIT_EDEVICE;
}

/* A failed CUDA call outside a backend's work (`what`: draining the noise stream, freeing the
 * record's copy), settled: AUDIT_EDEVICE, the message naming what failed, the call and the
 * error; the device is marked lost where its context broke. */
static int fail_device_call(struct replay_device *device, const char *what, const char *call,
                            cudaError_t error, struct audit_error *err)
{
    struct audit_error cause = { 0 };
    audit_fail(&cause, AUDIT_EDEVICE, "%s: %s (%s)", call, cudaGetErrorString(error),
               cudaGetErrorName(error));
    if (settle_device_failure(device, what, &cause) < 0)
        return audit_fail(err, AUDIT_EDEVICE, "%s", device->lost);
    return audit_fail(err, AUDIT_EDEVICE, "%s: %s", what, cause.message);
}

int replay_device_open(struct replay_device **device_out, int ordinal, size_t emulate_smem_per_sm,
                       enum noise_kind noise, struct audit_error *err)
{
    int status = AUDIT_OK;
    struct replay_device *device = calloc(1, sizeof(*device));
    *device_out = NULL;
    if (!device)
        return audit_fail(err, AUDIT_ENOMEM, "out of memory opening device %d", ordinal);
    device->ordinal = ordinal;
    device->noise_kind = noise;
    status = gpu_device_query(ordinal, emulate_smem_per_sm, &device->info, err);
    if (status < 0)
        goto error;
    CUDA_CHECK_GOTO(cudaSetDevice(ordinal), err, status, error);
    {
        /* The cluster packing that bitonic's supports() sizes its clusters by; without it
         * (the query failed) it assumes every SM takes a CTA. */
        struct audit_error ignored = { 0 };
        (void)gpu_device_measure_clusters(&device->info, &ignored);
    }
    int memory_pools = 0;
    CUDA_CHECK_GOTO(cudaDeviceGetAttribute(&memory_pools, cudaDevAttrMemoryPoolsSupported, ordinal),
                    err, status, error);
    device->memory_pools = memory_pools != 0;
    CUDA_CHECK_GOTO(cudaStreamCreateWithFlags(&device->stream, cudaStreamNonBlocking), err, status,
                    error);
    CUDA_CHECK_GOTO(cudaStreamCreateWithFlags(&device->noise_stream, cudaStreamNonBlocking), err,
                    status, error);
    CUDA_CHECK_GOTO(cudaEventCreate(&device->start), err, status, error);
    CUDA_CHECK_GOTO(cudaEventCreate(&device->stop), err, status, error);
    if (noise != NOISE_NONE) {
        status = noise_create(&device->noise, noise, err);
        if (status < 0)
            goto error;
        for (unsigned i = 0; i < REPLAY_NOISE_BURSTS_QUEUED; i++)
            CUDA_CHECK_GOTO(
                cudaEventCreateWithFlags(&device->burst_done[i], cudaEventDisableTiming), err,
                status, error);
    }
    *device_out = device;
    return AUDIT_OK;
error:
    audit_error_prefix(err, "device %d", ordinal);
    replay_device_close(device);
    return status;
}

int replay_device_attach(struct replay_device *device, struct audit_error *err)
{
    CUDA_TRY(cudaSetDevice(device->ordinal), err);
    return AUDIT_OK;
}

void replay_device_close(struct replay_device *device)
{
    if (!device)
        return;
    /* Teardown errors are ignored: after a sticky error every call fails, and there is nothing
     * left to save. The noise still queued ends before its buffers are freed. */
    if (device->noise_stream)
        cudaStreamSynchronize(device->noise_stream);
    if (device->noise)
        noise_destroy(device->noise);
    for (unsigned i = 0; i < REPLAY_NOISE_BURSTS_QUEUED; i++)
        if (device->burst_done[i])
            cudaEventDestroy(device->burst_done[i]);
    if (device->start)
        cudaEventDestroy(device->start);
    if (device->stop)
        cudaEventDestroy(device->stop);
    if (device->stream)
        cudaStreamDestroy(device->stream);
    if (device->noise_stream)
        cudaStreamDestroy(device->noise_stream);
    free(device);
}

const struct gpu_device_info *replay_device_info(const struct replay_device *device)
{
    return &device->info;
}

const char *replay_device_lost(const struct replay_device *device)
{
    return device->lost[0] ? device->lost : NULL;
}

/* cudaMalloc (with a stream: cudaMallocAsync on it) that tells "out of device memory"
 * (AUDIT_ENOMEM, not sticky) from other failures. */
static int device_alloc(void **pointer, size_t bytes, const char *what, cudaStream_t stream,
                        struct audit_error *err)
{
    *pointer = NULL;
    if (bytes == 0)
        return AUDIT_OK;
    cudaError_t status = stream ? cudaMallocAsync(pointer, bytes, stream)
                                : cudaMalloc(pointer, bytes);
    if (status == cudaErrorMemoryAllocation) {
        (void)cudaGetLastError();
        *pointer = NULL;
        return audit_fail(err, AUDIT_ENOMEM, "out of device memory allocating %zu bytes for %s "
                          "(cudaErrorMemoryAllocation)", bytes, what);
    }
    CUDA_TRY(status, err);
    return AUDIT_OK;
}

/* ---- inputs --------------------------------------------------------------------------------- */

void replay_shape(const struct capture_record *record, uint32_t k, struct topk_shape *shape)
{
    memset(shape, 0, sizeof(*shape));
    shape->rows = record->rows;
    shape->k = k;
    shape->row_stride = record->row_stride;
    for (uint32_t b = 0; b < record->rows; b++) {
        if (record->lengths[b] > shape->max_length)
            shape->max_length = record->lengths[b];
        if (b == 0 || record->lengths[b] < shape->min_length)
            shape->min_length = record->lengths[b];
    }
    shape->has_row_starts = record->row_starts != NULL;
    /* Paged is page_size != 0, as the checks read it: a page table of no column may come as a
     * NULL array (over the worker socket), and it is still a paged record with a raw output. */
    shape->has_page_table = record->page_size != 0;
    shape->page_size = record->page_size;
}

int replay_input_create(struct replay_device *device, const struct capture_record *record,
                        uint32_t k, struct replay_input **input_out, struct audit_error *err)
{
    struct replay_input *input = calloc(1, sizeof(*input));
    *input_out = NULL;
    if (!input)
        return audit_fail(err, AUDIT_ENOMEM, "out of memory preparing record %u", record->index);
    input->device = device;
    input->record = record;
    input->k = k;
    replay_shape(record, k, &input->shape);
    *input_out = input;
    return AUDIT_OK;
}

/* Frees a device buffer (on `stream` where there is one) and returns the first error of
 * `first` and this free. A failed free's error is consumed (the caller reports it), so that no
 * later check of the last error reads it as its own. */
static cudaError_t device_free(void *pointer, cudaStream_t stream, cudaError_t first)
{
    if (!pointer)
        return first;
    const cudaError_t freed = stream ? cudaFreeAsync(pointer, stream) : cudaFree(pointer);
    if (freed != cudaSuccess)
        (void)cudaGetLastError();
    return first != cudaSuccess ? first : freed;
}

static cudaError_t input_release_device(struct replay_input *input)
{
    cudaError_t freed = device_free(input->scores, NULL, cudaSuccess);
    freed = device_free(input->lengths, NULL, freed);
    freed = device_free(input->row_starts, NULL, freed);
    freed = device_free(input->page_table, NULL, freed);
    freed = device_free(input->page_table_row_starts, NULL, freed);
    input->scores = NULL;
    input->lengths = input->row_starts = input->page_table = input->page_table_row_starts = NULL;
    input->uploaded = false;
    return freed;
}

static cudaError_t input_destroy(struct replay_input *input)
{
    if (!input)
        return cudaSuccess;
    const cudaError_t freed = input_release_device(input);
    free(input);
    return freed;
}

int replay_input_free(struct replay_input *input, struct audit_error *err)
{
    struct replay_device *device = input ? input->device : NULL;
    const cudaError_t freed = input_destroy(input);
    return freed == cudaSuccess ? AUDIT_OK
                                : fail_device_call(device, "freeing the record's device copy",
                                                   "cudaFree", freed, err);
}

/* A present array gets a device pointer even when it holds no element (row_stride 0, a page
 * table of no column): a plugin sees NULL only for an absent array (plugin.h). */
static int upload_array(void **device_pointer, const void *host, size_t bytes, const char *what,
                        struct audit_error *err)
{
    int status = device_alloc(device_pointer, bytes ? bytes : sizeof(int32_t), what, NULL, err);
    if (status < 0 || bytes == 0)
        return status;
    return gpu_upload(*device_pointer, host, bytes, err);
}

/* Uploads the record once; every backend of the record shares it. */
static int input_upload(struct replay_input *input, struct audit_error *err)
{
    const struct capture_record *record = input->record;
    int status = AUDIT_OK;
    if (input->uploaded)
        return AUDIT_OK;
    const size_t rows = record->rows;
    status = upload_array((void **)&input->scores, record->scores,
                          rows * record->row_stride * sizeof(float), "the scores", err);
    if (status < 0)
        goto error;
    status = upload_array((void **)&input->lengths, record->lengths, rows * sizeof(int32_t),
                          "the lengths", err);
    if (status < 0)
        goto error;
    if (record->row_starts) {
        status = upload_array((void **)&input->row_starts, record->row_starts,
                              rows * sizeof(int32_t), "the row starts", err);
        if (status < 0)
            goto error;
    }
    if (record->page_size != 0) {
        status = upload_array((void **)&input->page_table, record->page_table,
                              rows * record->page_table_cols * sizeof(int32_t), "the page table",
                              err);
        if (status < 0)
            goto error;
        if (record->page_table_row_starts) {
            status = upload_array((void **)&input->page_table_row_starts,
                                  record->page_table_row_starts, rows * sizeof(int32_t),
                                  "the page-table row starts", err);
            if (status < 0)
                goto error;
        }
    }
    input->uploaded = true;
    return AUDIT_OK;
error:
    /* What failed is reported; a failed free after it changes nothing the caller can do. */
    (void)input_release_device(input);
    return status;
}

static cudaError_t buffers_free(struct launch_buffers *buffers)
{
    cudaError_t freed = device_free(buffers->out, buffers->stream, cudaSuccess);
    freed = device_free(buffers->raw_out, buffers->stream, freed);
    freed = device_free(buffers->scratch, buffers->stream, freed);
    freed = device_free(buffers->row_hashes, buffers->stream, freed);
    memset(buffers, 0, sizeof(*buffers));
    return freed;
}

static int buffers_alloc(struct launch_buffers *buffers, const struct replay_input *input,
                         size_t scratch_bytes, struct audit_error *err)
{
    int status = AUDIT_OK;
    memset(buffers, 0, sizeof(*buffers));
    buffers->stream = input->device->memory_pools ? input->device->stream : NULL;
    buffers->out_bytes = (size_t)input->shape.rows * input->shape.k * sizeof(int32_t);
    buffers->scratch_bytes = scratch_bytes;
    status = device_alloc((void **)&buffers->out, buffers->out_bytes, "the output",
                          buffers->stream, err);
    if (status < 0)
        goto error;
    if (input->shape.has_page_table) {
        status = device_alloc((void **)&buffers->raw_out, buffers->out_bytes, "the raw output",
                              buffers->stream, err);
        if (status < 0)
            goto error;
    }
    status = device_alloc(&buffers->scratch, scratch_bytes, "the scratch", buffers->stream, err);
    if (status < 0)
        goto error;
    return AUDIT_OK;
error:
    (void)buffers_free(buffers); /* the failed allocation is what is reported */
    return status;
}

static void problem_fill(struct topk_problem *problem, const struct replay_input *input,
                         const struct launch_buffers *buffers)
{
    memset(problem, 0, sizeof(*problem));
    problem->shape = input->shape;
    problem->scores = input->scores;
    problem->lengths = input->lengths;
    problem->row_starts = input->row_starts;
    problem->page_table = input->page_table;
    problem->page_table_cols = input->record->page_table_cols;
    problem->page_table_row_starts = input->page_table_row_starts;
    problem->out = buffers->out;
    problem->raw_out = buffers->raw_out;
    problem->scratch = buffers->scratch;
    problem->scratch_bytes = buffers->scratch_bytes;
}

/* ---- one launch ----------------------------------------------------------------------------- */

static int enqueue_poison(struct replay_device *device, const struct launch_buffers *buffers,
                          struct audit_error *err)
{
    CUDA_TRY(cudaMemsetAsync(buffers->out, REPLAY_POISON_BYTE, buffers->out_bytes, device->stream),
             err);
    if (buffers->raw_out)
        CUDA_TRY(cudaMemsetAsync(buffers->raw_out, REPLAY_POISON_BYTE, buffers->out_bytes,
                                 device->stream),
                 err);
    return AUDIT_OK;
}

/* Keeps REPLAY_NOISE_BURSTS_QUEUED bursts on the sibling stream: forgets those that are over
 * and tops the queue up. A launch made after this starts with at least one whole burst ahead of
 * it on the sibling stream (a burst lasts longer than a replayed kernel under noise), and no rep
 * ever waits for noise: the bursts run back to back while the reps, and the backends of a
 * record, come and go; only the end of a record waits for what is left (replay_noise_drain). */
static int keep_noise_queued(struct replay_device *device, struct audit_error *err)
{
    if (!device->noise)
        return AUDIT_OK;
    while (device->bursts_queued > 0) {
        const cudaError_t state = cudaEventQuery(device->burst_done[0]);
        if (state == cudaErrorNotReady)
            break;
        CUDA_TRY(state, err);
        cudaEvent_t done = device->burst_done[0];
        for (unsigned i = 1; i < device->bursts_queued; i++)
            device->burst_done[i - 1] = device->burst_done[i];
        device->burst_done[--device->bursts_queued] = done;
    }
    while (device->bursts_queued < REPLAY_NOISE_BURSTS_QUEUED) {
        int status = noise_launch(device->noise, device->noise_stream, err);
        if (status < 0)
            return status;
        CUDA_TRY(cudaEventRecord(device->burst_done[device->bursts_queued], device->noise_stream),
                 err);
        device->bursts_queued++;
    }
    return AUDIT_OK;
}

int replay_noise_drain(struct replay_device *device, struct time_breakdown *time,
                       struct audit_error *err)
{
    const double started_ms = report_monotonic_ms();
    const cudaError_t drained = cudaStreamSynchronize(device->noise_stream);
    if (drained != cudaSuccess)
        return fail_device_call(device, "draining the noise stream", "cudaStreamSynchronize",
                                drained, err);
    device->bursts_queued = 0;
    const double waited_ms = report_monotonic_ms() - started_ms;
    time->noise_wait_ms += waited_ms;
    time->total_ms += waited_ms;
    return AUDIT_OK;
}

/* Poisons the outputs, keeps the noise queued on the sibling stream (unless quiet), then runs
 * the backend (or the instantiated graph, which poisons by itself) between two events and waits
 * for it. time_us: NULL for an untimed launch. */
static int launch_once(struct replay_device *device, const struct topk_backend *backend,
                       const struct topk_problem *problem, const struct launch_buffers *buffers,
                       cudaGraphExec_t graph, bool quiet, double *time_us, struct audit_error *err)
{
    int status = AUDIT_OK;
    if (!graph) {
        status = enqueue_poison(device, buffers, err);
        if (status < 0)
            return status;
    }
    if (!quiet) {
        status = keep_noise_queued(device, err);
        if (status < 0)
            return status;
    }
    if (time_us)
        CUDA_TRY(cudaEventRecord(device->start, device->stream), err);
    if (graph) {
        CUDA_TRY(cudaGraphLaunch(graph, device->stream), err);
    } else {
        status = backend->launch(problem, &device->info, device->stream, err);
        if (status < 0)
            return status;
    }
    if (time_us)
        CUDA_TRY(cudaEventRecord(device->stop, device->stream), err);
    CUDA_TRY(cudaStreamSynchronize(device->stream), err);
    if (time_us) {
        float milliseconds = 0.0f;
        CUDA_TRY(cudaEventElapsedTime(&milliseconds, device->start, device->stop), err);
        *time_us = (double)milliseconds * 1000.0;
    }
    return AUDIT_OK;
}

static int copy_back(struct replay_device *device, const struct launch_buffers *buffers,
                     int32_t *host_out, int32_t *host_raw, struct audit_error *err)
{
    CUDA_TRY(cudaMemcpyAsync(host_out, buffers->out, buffers->out_bytes, cudaMemcpyDeviceToHost,
                             device->stream),
             err);
    if (buffers->raw_out && host_raw)
        CUDA_TRY(cudaMemcpyAsync(host_raw, buffers->raw_out, buffers->out_bytes,
                                 cudaMemcpyDeviceToHost, device->stream),
                 err);
    CUDA_TRY(cudaStreamSynchronize(device->stream), err);
    return AUDIT_OK;
}

/* The output's row hashes, computed on the device and copied back (rows x 8 bytes). */
static int fetch_row_hashes(struct replay_device *device, const struct launch_buffers *buffers,
                            uint32_t rows, uint32_t k, uint64_t *host_row_hashes,
                            struct audit_error *err)
{
    if (rows == 0)
        return AUDIT_OK;
    int status = output_hash_rows_launch(buffers->out, buffers->raw_out, rows, k,
                                         buffers->row_hashes, device->stream, err);
    if (status < 0)
        return status;
    CUDA_TRY(cudaMemcpyAsync(host_row_hashes, buffers->row_hashes, (size_t)rows * sizeof(uint64_t),
                             cudaMemcpyDeviceToHost, device->stream),
             err);
    CUDA_TRY(cudaStreamSynchronize(device->stream), err);
    return AUDIT_OK;
}

/* ---- dumps ---------------------------------------------------------------------------------- */

/* DIR/<stem>-r<record>-<backend>-rep<NN>.bin (graph: -graph-rep<NN>): the raw little-endian
 * int32 output, so that sha256sum of the file equals the reported output_sha256. Written as every
 * output is (output_file.h): complete or not at all, a device or FIFO written through. */
static int dump_output(const struct replay_options *options, const char *backend, const char *phase,
                       uint32_t rep, const int32_t *out, size_t count, struct audit_error *err)
{
    char path[4096];
    if (snprintf(path, sizeof(path), "%s/%s-r%u-%s-%srep%02u.bin", options->dump_dir,
                 options->dump_stem, options->record_index, backend, phase, rep) >=
        (int)sizeof(path))
        return audit_fail(err, AUDIT_EIO, "%s: dump path too long", options->dump_dir);
    unsigned char *bytes = malloc(count * 4 + 1);
    if (!bytes)
        return audit_fail(err, AUDIT_ENOMEM, "%s: out of memory", path);
    for (size_t i = 0; i < count; i++) {
        uint32_t v = (uint32_t)out[i];
        bytes[4 * i] = (unsigned char)v;
        bytes[4 * i + 1] = (unsigned char)(v >> 8);
        bytes[4 * i + 2] = (unsigned char)(v >> 16);
        bytes[4 * i + 3] = (unsigned char)(v >> 24);
    }
    int status = output_file_write_all(path, bytes, count * 4, err);
    free(bytes);
    return status;
}

/* ---- one rep -------------------------------------------------------------------------------- */

/* Everything a timed rep needs besides its number: the launch, where its output goes, how it is
 * judged, and the result whose time and counters it adds to. */
struct rep_context {
    struct replay_device *device;
    const struct topk_backend *backend;
    const struct topk_problem *problem;
    const struct launch_buffers *buffers;
    cudaGraphExec_t graph;            /* NULL: an eager launch */
    const char *phase;                /* "eager" or "graph" (progress) */
    const char *dump_phase;           /* "" or "graph-" (dump names) */
    struct output_tally *tally;       /* fed through queue only: never read during the reps */
    struct tally_queue *queue;
    struct check_context *checks;     /* what the queue hands to the tally (a graph's queue too) */
    const struct check_claims *claims;
    const struct replay_options *options;
    bool prefilter;                   /* buffers->row_hashes and host_row_hashes are set */
    uint64_t *host_row_hashes;
    struct backend_result *result;
};

/* One timed rep: the poisoned launch under noise; with the pre-filter the output's row hashes
 * come back and, when they are an earlier output's, the rep is counted as that output; otherwise
 * the output is copied back into a slot of the tally queue (src/replay/tally_queue.h), dumped, and
 * handed over: its SHA-256, checks and tallying run beside the next reps. The noise goes on
 * meanwhile (keep_noise_queued): no rep waits for it (measured on the H200: docs/PERF.md "The
 * audit itself"). A device failure fills cause and sets *device_failed; a host failure (memory,
 * a dump, an earlier output's host work) fills err. */
static int replay_rep(const struct rep_context *context, uint32_t rep, bool *device_failed,
                      struct audit_error *cause, struct audit_error *err)
{
    struct replay_device *device = context->device;
    struct time_breakdown *time = &context->result->time;
    /* rows and k are set at init and never change: safe to read beside the queue's thread. */
    const uint32_t rows = context->tally->rows, k = context->tally->k;
    const size_t count = (size_t)rows * k;
    struct tally_slot *slot = NULL;
    double time_us = NAN;
    int status = AUDIT_OK;

    *device_failed = true;
    double started_ms = report_monotonic_ms();
    status = launch_once(device, context->backend, context->problem, context->buffers,
                         context->graph, false, &time_us, cause);
    if (status < 0)
        return status;
    double now_ms = report_monotonic_ms();
    const double kernel_ms = isfinite(time_us) ? time_us / 1e3 : 0.0;
    time->kernel_ms += kernel_ms;
    if (now_ms - started_ms > kernel_ms)
        time->launch_overhead_ms += now_ms - started_ms - kernel_ms;

    bool known = false;
    if (context->prefilter) {
        started_ms = now_ms;
        status = fetch_row_hashes(device, context->buffers, rows, k, context->host_row_hashes,
                                  cause);
        if (status < 0)
            return status;
        now_ms = report_monotonic_ms();
        time->row_hash_ms += now_ms - started_ms;
        known = tally_queue_add_if_known(context->queue, context->host_row_hashes, time_us);
    }
    if (!known) {
        /* Waiting for a slot is the host work's time (the queue counts it), not the copy's. */
        *device_failed = false;
        status = tally_queue_slot(context->queue, &slot, err);
        if (status < 0)
            return status;
        *device_failed = true;
        started_ms = report_monotonic_ms();
        status = copy_back(device, context->buffers, slot->out, slot->raw, cause);
        if (status < 0)
            return status;
        if (slot->row_hashes)
            memcpy(slot->row_hashes, context->host_row_hashes, (size_t)rows * sizeof(uint64_t));
        now_ms = report_monotonic_ms();
        time->copy_ms += now_ms - started_ms;
        context->result->outputs_copied++;
    }
    *device_failed = false;
    if (!known && context->options->dump_dir) {
        started_ms = now_ms;
        status = dump_output(context->options, context->backend->name, context->dump_phase, rep,
                             slot->out, count, err);
        if (status < 0)
            return status;
        time->dump_ms += report_monotonic_ms() - started_ms;
    }
    /* The tally times its own SHA-256 and checks (tally->hash_ms, check_ms). */
    if (!known) {
        status = tally_queue_add(context->queue, slot, time_us, err);
        if (status < 0)
            return status;
    }
    if (context->options->progress)
        context->options->progress(context->options->progress_user, context->backend->name,
                                   context->phase, rep + 1, context->options->reps);
    return AUDIT_OK;
}

/* ---- sub-records ---------------------------------------------------------------------------- */

int replay_subrecord(const struct capture_record *record, const uint32_t *rows, uint32_t count,
                     struct capture_record *sub, struct audit_error *err)
{
    int status = selection_extract_rows(record, rows, count, sub, err);
    if (status < 0)
        return status;
    /* Rows of a record are still that record: keep where it came from. */
    sub->index = record->index;
    sub->file_offset = record->file_offset;
    sub->stored_payload_bytes = record->stored_payload_bytes;
    sub->compressed = record->compressed;
    memcpy(sub->payload_sha256, record->payload_sha256, sizeof(sub->payload_sha256));
    return AUDIT_OK;
}

/* ---- graph replays -------------------------------------------------------------------------- */

/* Captures one poisoned launch in a CUDA graph and replays it reps times under noise; each
 * replay is tallied against the first eager output. Returns 0 (a capture or replay failure that
 * left the device usable is in result->graph_error), AUDIT_EDEVICE when the device was lost, or
 * a host failure. */
static int replay_graph(const struct rep_context *eager_context, struct audit_error *err)
{
    int status = AUDIT_OK;
    struct audit_error cause = { 0 };
    cudaGraph_t graph = NULL;
    cudaGraphExec_t exec = NULL;
    bool capturing = false, device_failed = false;
    struct replay_device *device = eager_context->device;
    const struct replay_options *options = eager_context->options;
    struct backend_result *result = eager_context->result;
    const struct output_tally *eager = &result->eager;
    struct rep_context context = *eager_context;
    const double started_ms = report_monotonic_ms();

    status = output_tally_init(&result->graph, eager->rows, eager->k, options->reps,
                               eager->baseline, err);
    if (status == AUDIT_OK)
        status = tally_queue_create(&context.queue, &result->graph, context.checks,
                                    context.claims,
                                    context.checks ? context.checks->reference : NULL,
                                    context.buffers->raw_out != NULL, context.prefilter, err);
    if (status < 0)
        return status;
    CUDA_CHECK_GOTO(cudaStreamBeginCapture(device->stream, cudaStreamCaptureModeThreadLocal),
                    &cause, status, device_error);
    capturing = true;
    status = enqueue_poison(device, context.buffers, &cause);
    if (status < 0)
        goto device_error;
    status = context.backend->launch(context.problem, &device->info, device->stream, &cause);
    if (status < 0)
        goto device_error;
    capturing = false;
    CUDA_CHECK_GOTO(cudaStreamEndCapture(device->stream, &graph), &cause, status, device_error);
    CUDA_CHECK_GOTO(cudaGraphInstantiate(&exec, graph, 0), &cause, status, device_error);
    result->graph_ran = true;
    result->time.setup_ms += report_monotonic_ms() - started_ms;
    context.graph = exec;
    context.tally = &result->graph;
    context.phase = "graph";
    context.dump_phase = "graph-";
    for (uint32_t rep = 0; rep < options->reps; rep++) {
        status = replay_rep(&context, rep, &device_failed, &cause, err);
        if (status < 0 && device_failed)
            goto device_error;
        if (status < 0)
            goto done;
    }
    status = tally_queue_finish(context.queue, err);
    context.queue = NULL;
    goto done;
device_error:
    if (capturing) {
        cudaGraph_t partial = NULL;
        (void)cudaStreamEndCapture(device->stream, &partial);
        if (partial)
            cudaGraphDestroy(partial);
    }
    snprintf(result->graph_error, sizeof(result->graph_error), "%s", cause.message);
    status = settle_device_failure(device, "a graph replay", &cause);
    if (status < 0)
        audit_fail(err, status, "%s", device->lost);
done:
    (void)tally_queue_finish(context.queue, NULL);
    if (exec)
        cudaGraphExecDestroy(exec);
    if (graph)
        cudaGraphDestroy(graph);
    return status;
}

/* ---- batch invariance ----------------------------------------------------------------------- */

/* splitmix64: portable, so a seed gives the same batch layouts on every machine. */
static uint64_t next_random(uint64_t *state)
{
    uint64_t z = (*state += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

static uint32_t random_below(uint64_t *state, uint32_t bound)
{
    return bound ? (uint32_t)(next_random(state) % bound) : 0;
}

/* Runs backend once on a host sub-record (upload, buffers, poisoned launch under noise, copy
 * back, free): out receives sub->rows * k indices. */
static int run_subrecord(struct replay_device *device, const struct topk_backend *backend,
                         const struct capture_record *sub, uint32_t k, int32_t *out,
                         struct audit_error *err)
{
    int status = AUDIT_OK;
    struct replay_input *input = NULL;
    struct launch_buffers buffers = { 0 };
    struct topk_problem problem;
    char reason[512] = "";
    status = replay_input_create(device, sub, k, &input, err);
    if (status < 0)
        return status;
    if (!backend->supports(&device->info, &input->shape, reason, sizeof(reason))) {
        status = audit_fail(err, AUDIT_EUNSUPPORTED, "a batch of %u rows is not supported: %s",
                            sub->rows, reason);
        goto done;
    }
    status = input_upload(input, err);
    if (status < 0)
        goto done;
    status = buffers_alloc(&buffers, input, backend->scratch_bytes(&device->info, &input->shape),
                           err);
    if (status < 0)
        goto done;
    problem_fill(&problem, input, &buffers);
    status = launch_once(device, backend, &problem, &buffers, NULL, false, NULL, err);
    if (status < 0)
        goto done;
    status = copy_back(device, &buffers, out, NULL, err);
done:;
    /* A failed free is the batch's failure where nothing failed before it (the caller settles
     * it as a device failure). */
    cudaError_t freed = buffers_free(&buffers);
    const cudaError_t released = input_destroy(input);
    freed = freed != cudaSuccess ? freed : released;
    if (freed != cudaSuccess && status >= 0)
        status = audit_fail(err, AUDIT_EDEVICE, "freeing a batch's device buffers: %s (%s)",
                            cudaGetErrorString(freed), cudaGetErrorName(freed));
    return status;
}

static int compare_int32(const void *a, const void *b)
{
    int32_t x = *(const int32_t *)a, y = *(const int32_t *)b;
    return (x > y) - (x < y);
}

/* Compares row `row` of a context's output with the same row of the first eager output. */
static void batch_compare_row(const int32_t *context_row, const int32_t *baseline_row, uint32_t k,
                              int32_t *sort_a, int32_t *sort_b, uint32_t *differing,
                              uint32_t *set_differing)
{
    if (!memcmp(context_row, baseline_row, k * sizeof(int32_t)))
        return;
    (*differing)++;
    memcpy(sort_a, context_row, k * sizeof(int32_t));
    memcpy(sort_b, baseline_row, k * sizeof(int32_t));
    qsort(sort_a, k, sizeof(int32_t), compare_int32);
    qsort(sort_b, k, sizeof(int32_t), compare_int32);
    if (memcmp(sort_a, sort_b, k * sizeof(int32_t)))
        (*set_differing)++;
}

/* Each tested row alone (a 1-row record), then REPLAY_BATCH_TRIALS seeded shuffles of the tested
 * rows cut into batches of random sizes (between half and all of them): the vLLM needle test.
 * A row is batch dependent when any context's output row differs from the first eager rep. */
static int replay_batch_invariance(struct replay_device *device, const struct topk_backend *backend,
                                   const struct capture_record *record, uint32_t k,
                                   const struct replay_options *options,
                                   struct backend_result *result, struct audit_error *err)
{
    int status = AUDIT_OK;
    struct audit_error cause = { 0 };
    struct batch_invariance_result *batch = &result->batch;
    const int32_t *baseline = result->eager.baseline;
    const uint32_t tested = record->rows < REPLAY_BATCH_MAX_ROWS ? record->rows
                                                                 : REPLAY_BATCH_MAX_ROWS;
    uint32_t *differing = calloc(tested ? tested : 1, sizeof(uint32_t));
    uint32_t *set_differing = calloc(tested ? tested : 1, sizeof(uint32_t));
    uint32_t *order = malloc((tested ? tested : 1) * sizeof(uint32_t));
    int32_t *out = malloc(((size_t)(tested ? tested : 1)) * k * sizeof(int32_t));
    int32_t *sort_a = malloc(k * sizeof(int32_t)), *sort_b = malloc(k * sizeof(int32_t));
    struct capture_record sub = { 0 };
    uint64_t random_state = options->seed + 0x9E3779B97F4A7C15ull * (options->record_index + 1u);

    batch->trials = REPLAY_BATCH_TRIALS;
    batch->contexts = 1 + REPLAY_BATCH_TRIALS;
    batch->rows_tested = tested;
    if (!differing || !set_differing || !order || !out || !sort_a || !sort_b) {
        status = audit_fail(err, AUDIT_ENOMEM, "out of memory for the batch-invariance test");
        goto done;
    }
    if (!baseline)
        goto done; /* no eager rep to compare with */
    const uint32_t total_steps = tested + REPLAY_BATCH_TRIALS;
    uint32_t steps = 0;
    for (uint32_t row = 0; row < tested; row++) {
        status = replay_subrecord(record, &row, 1, &sub, err);
        if (status < 0)
            goto done;
        status = run_subrecord(device, backend, &sub, k, out, &cause);
        capture_record_free(&sub);
        if (status < 0)
            goto device_error;
        batch->launches++;
        batch_compare_row(out, baseline + (size_t)row * k, k, sort_a, sort_b, &differing[row],
                          &set_differing[row]);
        if (options->progress)
            options->progress(options->progress_user, backend->name, "batch", ++steps, total_steps);
    }
    for (uint32_t trial = 0; trial < REPLAY_BATCH_TRIALS; trial++) {
        for (uint32_t i = 0; i < tested; i++)
            order[i] = i;
        for (uint32_t i = tested; i > 1; i--) { /* Fisher-Yates */
            uint32_t j = random_below(&random_state, i);
            uint32_t swap = order[i - 1];
            order[i - 1] = order[j];
            order[j] = swap;
        }
        for (uint32_t first = 0; first < tested;) {
            uint32_t half = (tested + 1) / 2;
            uint32_t size = half + random_below(&random_state, tested - half + 1);
            if (size > tested - first)
                size = tested - first;
            status = replay_subrecord(record, order + first, size, &sub, err);
            if (status < 0)
                goto done;
            status = run_subrecord(device, backend, &sub, k, out, &cause);
            capture_record_free(&sub);
            if (status < 0)
                goto device_error;
            batch->launches++;
            for (uint32_t j = 0; j < size; j++) {
                uint32_t row = order[first + j];
                batch_compare_row(out + (size_t)j * k, baseline + (size_t)row * k, k, sort_a,
                                  sort_b, &differing[row], &set_differing[row]);
            }
            first += size;
        }
        if (options->progress)
            options->progress(options->progress_user, backend->name, "batch", ++steps, total_steps);
    }
    batch->ran = true;
    for (uint32_t row = 0; row < tested; row++)
        batch->dependent_count += differing[row] > 0;
    if (batch->dependent_count) {
        batch->dependent = calloc(batch->dependent_count, sizeof(*batch->dependent));
        if (!batch->dependent) {
            batch->dependent_count = 0;
            status = audit_fail(err, AUDIT_ENOMEM, "out of memory listing batch-dependent rows");
            goto done;
        }
        uint32_t n = 0;
        for (uint32_t row = 0; row < tested; row++) {
            if (!differing[row])
                continue;
            batch->dependent[n].row = row;
            batch->dependent[n].contexts_differing = differing[row];
            batch->dependent[n].contexts_set_differing = set_differing[row];
            batch->set_dependent_count += set_differing[row] > 0;
            n++;
        }
    }
    goto done;
device_error:
    snprintf(batch->error, sizeof(batch->error), "%s", cause.message);
    status = settle_device_failure(device, "a batch-invariance launch", &cause);
    if (status < 0)
        audit_fail(err, status, "%s", device->lost);
done:
    free(differing);
    free(set_differing);
    free(order);
    free(out);
    free(sort_a);
    free(sort_b);
    return status;
}

/* ---- one backend ---------------------------------------------------------------------------- */

int replay_backend(struct replay_device *device, struct replay_input *input,
                   const struct topk_backend *backend, struct check_context *checks,
                   const struct replay_options *options, struct backend_result *result,
                   struct audit_error *err)
{
    int status = AUDIT_OK;
    struct audit_error cause = { 0 }; /* device-side failures: they become the backend's status */
    struct launch_buffers buffers = { 0 };
    struct topk_problem problem;
    struct tally_queue *queue = NULL;
    uint64_t *host_row_hashes = NULL;
    const struct capture_record *record = input->record;
    const char *file = options->file ? options->file : "";
    const struct check_claims claims = {
        .smallest_index_ties = backend->smallest_index_ties,
        .canonical_order = backend->canonical_order,
        .index_ascending = backend->index_ascending,
    };
    char reason[512] = "";
    /* Dumps need every output whole; a record whose row hashes a tally cannot keep would pay
     * for the row hashes and never be recognised. */
    const bool prefilter = options->gpu_prefilter && !options->dump_dir &&
                           (size_t)record->rows * sizeof(uint64_t) <=
                               OUTPUT_TALLY_ROW_HASH_BUDGET_BYTES;
    const double started_ms = report_monotonic_ms();
    double phase_started_ms;
    bool device_failed = false;
    cudaError_t freed = cudaSuccess;

    result->graph_requested = options->graph;
    result->batch_requested = options->batch_invariance;
    if (device->lost[0]) {
        backend_result_set_status(result, BACKEND_SKIPPED, "not run: %s", device->lost);
        return audit_fail(err, AUDIT_EDEVICE, "%s", device->lost);
    }
    if (!backend->supports(&device->info, &input->shape, reason, sizeof(reason))) {
        backend_result_set_status(result, BACKEND_UNSUPPORTED, "%s", reason);
        return AUDIT_OK;
    }
    if (!backend->launch || !backend->scratch_bytes) {
        backend_result_set_status(result, BACKEND_UNSUPPORTED, "the backend has no launch");
        return AUDIT_OK;
    }
    result->gpu_prefilter = prefilter;
    if (prefilter)
        host_row_hashes = malloc((record->rows ? record->rows : 1) * sizeof(uint64_t));
    if (prefilter && !host_row_hashes) {
        status = audit_fail(err, AUDIT_ENOMEM, "%s record %u, backend %s: out of host memory",
                            file, record->index, backend->name);
        goto done;
    }
    status = input_upload(input, &cause);
    if (status < 0)
        goto device_error;
    result->scratch_bytes = backend->scratch_bytes(&device->info, &input->shape);
    status = buffers_alloc(&buffers, input, result->scratch_bytes, &cause);
    if (status < 0)
        goto device_error;
    if (prefilter) {
        status = device_alloc((void **)&buffers.row_hashes,
                              (size_t)record->rows * sizeof(uint64_t), "the output row hashes",
                              buffers.stream, &cause);
        if (status < 0)
            goto device_error;
    }
    problem_fill(&problem, input, &buffers);
    status = output_tally_init(&result->eager, record->rows, input->k, options->reps, NULL, err);
    if (status == AUDIT_OK)
        status = tally_queue_create(&queue, &result->eager, checks, &claims,
                                    checks ? checks->reference : NULL, buffers.raw_out != NULL,
                                    prefilter, err);
    if (status < 0)
        goto done;

    /* One untimed warm-up launch (first-call attribute setup, module loading) before the reps;
     * without noise, which would only make it wait. */
    status = launch_once(device, backend, &problem, &buffers, NULL, true, NULL, &cause);
    if (status < 0)
        goto device_error;
    result->time.setup_ms += report_monotonic_ms() - started_ms;
    const struct rep_context context = {
        .device = device,
        .backend = backend,
        .problem = &problem,
        .buffers = &buffers,
        .graph = NULL,
        .phase = "eager",
        .dump_phase = "",
        .tally = &result->eager,
        .queue = queue,
        .checks = checks,
        .claims = &claims,
        .options = options,
        .prefilter = prefilter,
        .host_row_hashes = host_row_hashes,
        .result = result,
    };
    for (uint32_t rep = 0; rep < options->reps; rep++) {
        status = replay_rep(&context, rep, &device_failed, &cause, err);
        if (status < 0 && device_failed)
            goto device_error;
        if (status < 0)
            goto done;
    }
    /* The graph replays compare with the first eager output: every eager one is in first. */
    status = tally_queue_finish(queue, err);
    queue = NULL;
    if (status < 0)
        goto done;
    if (options->graph && result->eager.reps > 0) {
        status = replay_graph(&context, err);
        if (status == AUDIT_EDEVICE) {
            snprintf(cause.message, sizeof(cause.message), "%s", result->graph_error);
            goto lost;
        }
        if (status < 0)
            goto done;
    }
    if (options->batch_invariance && result->eager.reps > 0) {
        /* The sub-records have their own buffers: free these first. */
        freed = buffers_free(&buffers);
        if (freed != cudaSuccess)
            goto free_error;
        phase_started_ms = report_monotonic_ms();
        status = replay_batch_invariance(device, backend, record, input->k, options, result, err);
        result->time.batch_invariance_ms += report_monotonic_ms() - phase_started_ms;
        if (status == AUDIT_EDEVICE) {
            snprintf(cause.message, sizeof(cause.message), "%s", result->batch.error);
            goto lost;
        }
        if (status < 0)
            goto done;
    }
    /* The release is checked like a launch: a failed free is this backend's failure. */
    freed = buffers_free(&buffers);
    if (freed != cudaSuccess)
        goto free_error;
    goto done;
free_error:
    status = audit_fail(&cause, AUDIT_EDEVICE, "freeing its device buffers: %s (%s)",
                        cudaGetErrorString(freed), cudaGetErrorName(freed));
device_error:
    status = settle_device_failure(device, "a replay", &cause);
    if (status == AUDIT_OK) {
        backend_result_set_status(result, BACKEND_ERROR, "%s record %u, backend %s: %s", file,
                                  record->index, backend->name, cause.message);
        goto done;
    }
lost:
    backend_result_set_status(result, BACKEND_ERROR, "%s record %u, backend %s: %s", file,
                              record->index, backend->name, cause.message);
    status = audit_fail(err, AUDIT_EDEVICE, "%s record %u, backend %s: %s", file, record->index,
                        backend->name, device->lost);
done:
    /* After a failure the outputs handed over are still added: what ran is reported (and a
     * failed free after it changes nothing). */
    (void)tally_queue_finish(queue, NULL);
    (void)buffers_free(&buffers);
    free(host_row_hashes);
    result->time.total_ms = report_monotonic_ms() - started_ms;
    return status;
}
