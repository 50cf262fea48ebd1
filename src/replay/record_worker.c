/* One record's backends in a worker process (src/replay/worker.h): task i replays backend i,
 * judges it where it ran and sends its report entry and table lines to the main process
 * (src/replay/result_wire.h), or what stopped it. The main process turns each message, or the
 * hang or crash that came instead, into the backend's entry (record_on_result).
 *
 * This file holds both sides of that exchange and the worker forked for a single record (when
 * the record cannot be handed to the session worker, not even in a memfd, for want of host
 * memory: it inherits the record through fork); src/replay/session_worker.c serves the records
 * with the same replay loop. */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "audit_internal.h"
#include "result_wire.h"

bool record_judge_backend(const struct record_job *job, struct backend_result *result,
                          cJSON **entry, char **table, bool *failed)
{
    struct verdict_result verdict;
    struct record_result single = *job->base;
    size_t table_bytes = 0;
    single.backends = result;
    single.backend_count = 1;
    report_verdict(result, job->base->census_rows, &verdict);
    *failed = verdict.verdict == VERDICT_FAIL;
    *entry = report_backend_json(&single, result, &verdict);
    audit_entry_add_plugin(*entry, result->backend);
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

/* ---- worker side ----------------------------------------------------------------------------- */

/* Sends text (freed) as the task's message: 0, or < 0 when it could not be made or sent. */
static int send_text(struct worker_channel *channel, char *text)
{
    int status = text ? worker_send(channel, text, strlen(text)) : AUDIT_ENOMEM;
    free(text);
    return status;
}

int record_send_failure(struct worker_channel *channel, const char *key, int code,
                        const char *message)
{
    return send_text(channel, result_wire_failure(key, code, message));
}

int record_reference_hashes(const struct check_context *checks,
                            const struct capture_record *replayed, uint32_t k,
                            struct record_result *result, struct audit_error *err)
{
    hash_indices(checks->reference, (size_t)replayed->rows * k, result->reference_hash);
    if (hash_index_sets(checks->reference, replayed->rows, k, result->reference_set_hash) < 0)
        return audit_fail(err, AUDIT_ENOMEM, "out of memory hashing the reference sets");
    return AUDIT_OK;
}

/* replay_options.progress: one rep done, for the front's progress line. */
static void show_progress(void *user, const char *backend, const char *phase, uint32_t done,
                          uint32_t total)
{
    const struct audit_state *state = user;
    const struct audit_progress progress = {
        .file = state->progress_file,
        .record = state->progress_record,
        .backend = backend,
        .phase = phase,
        .done = done,
        .total = total,
        .pass = state->pass.index,
        .passes = state->device_count,
        .ordinal = state->pass.ordinal,
    };
    state->callbacks->progress(state->callbacks->user, &progress);
}

struct replay_options record_replay_options(struct audit_state *state, const char *file,
                                            const char *stem, uint32_t record_index)
{
    const struct audit_options *options = state->options;
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
        .progress = state->callbacks->progress ? show_progress : NULL,
        .progress_user = state,
    };
    return replay_options;
}

/* Replays backends first .. of job on device, sending one message each. Returns 0 when every
 * one was sent; WORKER_JOB_LEAVE after a sticky CUDA error (the context is poisoned: the rest
 * needs a fresh process), or after a fatal error was sent; 2 when the pipe broke, 3 when out of
 * memory. *device_open_ms (the process's CUDA start, not yet charged) goes to the first backend
 * replayed (a worker started again after a crash pays it again, for the backend it starts with). */
int record_replay_backends(struct worker_channel *channel, size_t first,
                           struct replay_device *device, struct replay_input *input,
                           double *device_open_ms, const struct record_job *job)
{
    const struct audit_options *options = job->state->options;
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
             * unsupported one shows no time; the wait is then in the record's backends_ms). A
             * sticky fault there poisons the context under this backend's result, which is then
             * not kept (cuda_error, naming the noise stream) and the next record gets a fresh
             * worker; a non-sticky one leaves the result as it is. */
            struct time_breakdown drained = { 0 };
            struct audit_error noise_err = { 0 };
            if (replay_noise_drain(device, &drained, &noise_err) < 0 && replay_device_lost(device)) {
                status = AUDIT_EDEVICE;
                err = noise_err;
            } else if (result.status == BACKEND_OK) {
                time_breakdown_add(&result.time, &drained);
            }
        }
        result.time.device_open_ms += *device_open_ms;
        result.time.total_ms += *device_open_ms;
        *device_open_ms = 0;
        const bool lost = status == AUDIT_EDEVICE;
        if (status < 0 && !lost) {
            backend_result_release(&result);
            return record_send_failure(channel, "fatal", status, err.message) < 0
                       ? 2
                       : WORKER_JOB_LEAVE;
        }
        if (lost)
            /* A sticky error, contained to this process: the backend's own fault, or the noise
             * stream's after it (the message says which). */
            backend_result_set_status(&result, BACKEND_CUDA_ERROR, "%s", err.message);
        bool failed;
        if (!record_judge_backend(job, &result, &entry, &table, &failed)) {
            backend_result_release(&result);
            return 3;
        }
        backend_result_release(&result);
        char *message = result_wire_entry(entry, table);
        free(table);
        if (!message)
            return 3;
        if (send_text(channel, message) < 0)
            return 2;
        if (lost)
            return WORKER_JOB_LEAVE;
    }
    return 0;
}

/* The job is the main process's own, as it was at the fork. */
int record_worker_main(struct worker_channel *channel, size_t first, void *user)
{
    const struct record_job *job = user;
    const struct audit_options *options = job->state->options;
    struct replay_device *device = NULL;
    struct replay_input *input = NULL;
    struct audit_error err = { 0 };
    const double started_ms = report_monotonic_ms();
    int status = replay_device_open(&device, job->state->pass.ordinal,
                                    (size_t)options->emulate_smem_per_sm, options->noise, &err);
    if (status < 0)
        return record_send_failure(channel, "device_error", status, err.message) < 0 ? 2 : 0;
    double device_open_ms = report_monotonic_ms() - started_ms;
    status = replay_input_create(device, job->base->record, job->base->k, &input, &err);
    if (status < 0)
        status = record_send_failure(channel, "fatal", status, err.message) < 0 ? 2 : 0;
    else
        status = record_replay_backends(channel, first, device, input, &device_open_ms, job);
    /* A poisoned context may refuse its teardown; the process exit releases it anyway. */
    if (!replay_device_lost(device)) {
        (void)replay_input_free(input, &err); /* the process ends with this record */
        replay_device_close(device);
    }
    return status == WORKER_JOB_LEAVE ? 0 : status;
}

/* ---- main process side ----------------------------------------------------------------------- */

/* An entry made here for a backend whose worker gave no result. */
static int local_entry(struct record_job *job, size_t task, enum backend_status status,
                       const char *format, ...) __attribute__((format(printf, 4, 5)));
static int local_entry(struct record_job *job, size_t task, enum backend_status status,
                       const char *format, ...)
{
    const struct audit_options *options = job->state->options;
    struct backend_result result;
    va_list args;
    backend_result_init(&result, options->backends[task]);
    result.graph_requested = options->graph;
    result.batch_requested = options->batch_invariance;
    result.status = status;
    va_start(args, format);
    vsnprintf(result.reason, sizeof(result.reason), format, args);
    va_end(args);
    cJSON_Delete(job->entries[task]);
    free(job->table_lines[task]);
    bool made = record_judge_backend(job, &result, &job->entries[task], &job->table_lines[task],
                                     &job->failed[task]);
    backend_result_release(&result);
    return made ? AUDIT_OK : AUDIT_ENOMEM;
}

int record_missing_entry(struct record_job *job, size_t task)
{
    const struct audit_state *state = job->state;
    if (!state->device_available)
        return local_entry(job, task, BACKEND_UNAVAILABLE, "%s", state->unavailable_reason);
    return local_entry(job, task, BACKEND_SKIPPED, "not run: %s",
                       state->stop_reason[0] ? state->stop_reason : "the run stopped");
}

int record_on_result(void *user, size_t task, const struct worker_event *event)
{
    struct record_job *job = user;
    struct audit_state *state = job->state;
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
    struct result_message message;
    int status = result_wire_decode(event->data, event->bytes, &message);
    switch (message.kind) {
    case RESULT_ENTRY:
        cJSON_Delete(job->entries[task]);
        free(job->table_lines[task]);
        job->entries[task] = message.entry;
        job->table_lines[task] = message.table;
        job->failed[task] = message.failed;
        return AUDIT_OK;
    case RESULT_DEVICE_ERROR:
        /* The device itself could not be set up: the rest of the GPU work is skipped. */
        audit_device_lost(state, message.message);
        return AUDIT_EDEVICE;
    case RESULT_FATAL:
        audit_stop(state, message.code, message.message);
        return message.code;
    case RESULT_UNREADABLE:
        break;
    }
    if (status < 0)
        return status;
    return local_entry(job, task, BACKEND_CRASH, "%s record %u, backend %s: the worker sent an "
                                                 "unreadable result",
                       base->file, base->record->index, name);
}
