/* --devices with the passes at once (audit.h "Devices in parallel").
 *
 * Every --devices entry after the first runs its whole pass in a process of its own, forked
 * before the first record is read (no thread exists yet, no process of the run holds a CUDA
 * context): it reads the inputs itself, prepares each record's CPU side itself and replays on its
 * own session worker, so each device has its own CUDA context and noise stream. The main process
 * runs the first entry's pass meanwhile, exactly as without --devices. A pass process sends each
 * record's judged entries and table lines as soon as it has them, and its outcome last, through
 * a stream (src/replay/worker_stream.h); the main process takes what arrived between its own
 * records (so that no pass waits long on a full pipe) and, once its pass is done, waits for the
 * others and merges their records pass by pass in list order, as sequential passes add theirs
 * (audit_add_device_entries): per_device[] lists in list order, the table's blocks device by
 * device, whatever order the messages arrived in.
 *
 * Faults stay where they happen: a hang, crash or poisoned context in a pass process's workers
 * is that backend's status on that device, a device that cannot be used is that pass's loss
 * (exit 4), and a pass process that dies itself loses its device's remaining records; the other
 * passes go on. SIGINT reaches every process of the run (its process group); a SIGTERM sent to
 * the main process alone is passed on to the pass processes (worker_streams_wait). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "audit_internal.h"
#include "json_util.h"
#include "worker_stream.h"

/* The keys of a pass process's messages (not document keys: they never reach a report):
 * a record  {"file": F, "index": I, "backends": [entries], "table": [lines or null]},
 * its end   {"pass_end": {"device_failed", "stopped", "code", "stop_reason", "signal"}}. */
#define PASS_WIRE_TABLE "table"
#define PASS_WIRE_END "pass_end"
#define PASS_WIRE_DEVICE_FAILED "device_failed"
#define PASS_WIRE_STOPPED "stopped"
#define PASS_WIRE_CODE "code"
#define PASS_WIRE_SIGNAL "signal"

struct audit_passes {
    size_t count;  /* --devices entries; streams[0] stays unused (the main process's pass) */
    struct worker_stream streams[AUDIT_MAX_DEVICES];
};

/* ---- in a pass process ---------------------------------------------------------------------- */

static int send_json(struct worker_channel *channel, cJSON *message)
{
    char *text = message ? cJSON_PrintUnformatted(message) : NULL;
    cJSON_Delete(message);
    int status = text ? worker_send(channel, text, strlen(text)) : AUDIT_ENOMEM;
    free(text);
    return status;
}

int audit_pass_send_record(struct audit_state *state, const struct record_result *result,
                           const struct record_job *job, struct audit_error *err)
{
    const size_t count = state->options->backend_count;
    cJSON *message = cJSON_CreateObject();
    cJSON *entries = message ? cJSON_AddArrayToObject(message, KEY_BACKENDS) : NULL;
    cJSON *table = message ? cJSON_AddArrayToObject(message, PASS_WIRE_TABLE) : NULL;
    if (!entries || !table || !cJSON_AddStringToObject(message, KEY_FILE, result->file) ||
        !json_add_u64(message, KEY_INDEX, result->record->index))
        goto no_memory;
    for (size_t i = 0; i < count; i++) {
        cJSON *line = job->table_lines[i] ? cJSON_CreateString(job->table_lines[i])
                                          : cJSON_CreateNull();
        if (!job->entries[i] || !line || !cJSON_AddItemToArray(table, line)) {
            cJSON_Delete(line);
            goto no_memory;
        }
        cJSON_AddItemToArray(entries, job->entries[i]);
        job->entries[i] = NULL;
    }
    const int status = send_json(state->pass_channel, message);
    if (status == AUDIT_ENOMEM)
        return audit_fail(err, AUDIT_ENOMEM, "out of memory sending %s record %u", result->file,
                          result->record->index);
    if (status < 0)
        return audit_fail(err, AUDIT_EIO, "the main process is gone");
    return AUDIT_OK;
no_memory:
    cJSON_Delete(message);
    return audit_fail(err, AUDIT_ENOMEM, "out of memory sending %s record %u", result->file,
                      result->record->index);
}

int audit_pass_send_end(struct audit_state *state)
{
    cJSON *message = cJSON_CreateObject();
    cJSON *end = message ? cJSON_AddObjectToObject(message, PASS_WIRE_END) : NULL;
    if (!end) {
        cJSON_Delete(message);
        return AUDIT_ENOMEM;
    }
    cJSON_AddBoolToObject(end, PASS_WIRE_DEVICE_FAILED, state->device_failed);
    cJSON_AddBoolToObject(end, PASS_WIRE_STOPPED, state->stopped);
    cJSON_AddNumberToObject(end, PASS_WIRE_CODE, state->fatal_status);
    cJSON_AddStringToObject(end, KEY_STOP_REASON, state->stop_reason);
    cJSON_AddNumberToObject(end, PASS_WIRE_SIGNAL, state->stop_signal);
    return send_json(state->pass_channel, message);
}

/* A pass process (worker_child_fn; first: its --devices entry; user: the run's state as it was
 * at the fork). Its session worker is its own: the main process had not started one. */
static int pass_process_main(struct worker_channel *channel, size_t pass, void *user)
{
    struct audit_state *state = user;
    const struct audit_inputs *inputs = state->inputs;
    state->passes = NULL; /* the main process's streams, not this process's to read */
    state->pass_channel = channel;
    state->stop_reason[0] = '\0';
    audit_pass_select(state, pass);
    if (!state->device_failed) {
        struct audit_error ignored = { 0 };
        (void)worker_session_start(&state->pass.session, &ignored);
    }
    for (size_t i = 0; i < inputs->count && !state->stopped; i++)
        audit_run_file(state, inputs->paths[i]);
    worker_session_stop(&state->pass.session);
    return audit_pass_send_end(state) < 0 ? 2 : 0;
}

/* ---- in the main process -------------------------------------------------------------------- */

int audit_passes_start(struct audit_state *state)
{
    return audit_passes_start_processes(state, pass_process_main);
}

int audit_passes_start_processes(struct audit_state *state, worker_child_fn pass_main)
{
    struct audit_passes *passes = calloc(1, sizeof(*passes));
    if (!passes)
        return AUDIT_ENOMEM;
    passes->count = state->device_count;
    for (size_t pass = 1; pass < passes->count; pass++) {
        struct audit_error err = { 0 };
        /* One that cannot start is merged as a pass process that died: its device is lost. */
        if (worker_stream_start(&passes->streams[pass], pass_main, pass, state, &err) ==
            AUDIT_OK)
            state->devices_concurrent = true;
    }
    state->passes = passes;
    return AUDIT_OK;
}

void audit_passes_read(struct audit_state *state)
{
    struct audit_passes *passes = state->passes;
    if (passes && passes->count > 1)
        (void)worker_streams_read(passes->streams + 1, passes->count - 1, 0);
}

/* A pass's outcome, as its process sent it: its messages were said there already. */
static void fold_end(struct audit_state *state, const cJSON *end)
{
    const cJSON *reason = cJSON_GetObjectItemCaseSensitive(end, KEY_STOP_REASON);
    const cJSON *code = cJSON_GetObjectItemCaseSensitive(end, PASS_WIRE_CODE);
    const cJSON *sig = cJSON_GetObjectItemCaseSensitive(end, PASS_WIRE_SIGNAL);
    const bool device_failed =
        cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(end, PASS_WIRE_DEVICE_FAILED));
    const bool stopped = cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(end, PASS_WIRE_STOPPED));
    if (!device_failed && !stopped)
        return;
    if (cJSON_IsString(reason) && (!state->stopped || !state->stop_reason[0]))
        snprintf(state->stop_reason, sizeof(state->stop_reason), "%s", reason->valuestring);
    if (device_failed)
        state->device_failed = true;
    if (stopped && !state->stopped) {
        state->stopped = true;
        state->fatal_status = cJSON_IsNumber(code) && code->valueint < 0 ? code->valueint
                                                                         : AUDIT_EFAILED;
        /* Interrupted there: a signal sent to that process alone. */
        if (cJSON_IsNumber(sig) && sig->valueint > 0 && !state->stop_signal)
            state->stop_signal = sig->valueint;
    }
}

/* One record of a pass process into the report and the table. AUDIT_EDATA for a message that
 * is not a record. */
static int merge_record(struct audit_state *state, const cJSON *message, struct audit_error *err)
{
    const struct audit_callbacks *callbacks = state->callbacks;
    const cJSON *file = cJSON_GetObjectItemCaseSensitive(message, KEY_FILE);
    const cJSON *index = cJSON_GetObjectItemCaseSensitive(message, KEY_INDEX);
    const cJSON *table = cJSON_GetObjectItemCaseSensitive(message, PASS_WIRE_TABLE);
    if (!cJSON_IsString(file) || !cJSON_IsNumber(index) || index->valuedouble < 0 ||
        !cJSON_IsArray(cJSON_GetObjectItemCaseSensitive(message, KEY_BACKENDS)) ||
        !cJSON_IsArray(table))
        return audit_fail(err, AUDIT_EDATA, "an unreadable message");
    int status = audit_add_device_entries(state, file->valuestring, (uint32_t)index->valuedouble,
                                          message, err);
    if (status < 0 || !callbacks->record_done)
        return status;
    const char *lines[AUDIT_MAX_BACKENDS];
    size_t count = 0;
    const cJSON *line;
    cJSON_ArrayForEach(line, table) {
        if (count < AUDIT_MAX_BACKENDS)
            lines[count++] = cJSON_IsString(line) ? line->valuestring : NULL;
    }
    callbacks->record_done(callbacks->user, state->pass.index, lines, count);
    return AUDIT_OK;
}

/* Pass pass into the report: its device, its records in the order it sent them, its outcome. A
 * pass process that ended without saying its outcome lost the rest of its device's work (unless
 * the run was stopped anyway). */
static void merge_pass(struct audit_state *state, size_t pass, cJSON *devices)
{
    struct worker_stream *stream = &state->passes->streams[pass];
    bool ended = false;
    char *text;
    size_t bytes;
    state->device_failed = false;
    state->pass.index = pass;
    state->pass.ordinal = state->devices[pass];
    state->pass.next_slot = 0;
    audit_pass_announce(state, pass, devices);
    while ((text = worker_stream_take(stream, &bytes)) != NULL) {
        struct audit_error err = { 0 };
        cJSON *message = cJSON_ParseWithLength(text, bytes);
        free(text);
        const cJSON *end = cJSON_GetObjectItemCaseSensitive(message, PASS_WIRE_END);
        int status = !message ? audit_fail(&err, AUDIT_EDATA, "an unreadable message")
                     : end    ? (fold_end(state, end), AUDIT_OK)
                              : merge_record(state, message, &err);
        ended = ended || end != NULL;
        cJSON_Delete(message);
        if (status == AUDIT_ENOMEM)
            audit_stop(state, status, err.message);
        if (status == AUDIT_EDATA) {
            audit_device_lost(state, "its pass process sent an unreadable message");
            break;
        }
    }
    if (!ended && !state->device_failed && !state->stopped && !state->stop_signal) {
        char message[AUDIT_ERROR_MESSAGE_BYTES];
        snprintf(message, sizeof(message), "its pass process ended: %s", stream->description);
        audit_device_lost(state, message);
    }
    state->any_device_lost = state->any_device_lost || state->device_failed;
}

void audit_passes_finish(struct audit_state *state, cJSON *devices)
{
    struct audit_passes *passes = state->passes;
    if (!passes || passes->count < 2)
        return;
    /* After a fatal error here the run is over: what they sent so far is kept. */
    if (state->stopped && !state->stop_signal)
        worker_streams_kill(passes->streams + 1, passes->count - 1);
    else if (worker_streams_wait(passes->streams + 1, passes->count - 1) < 0)
        audit_stop(state, AUDIT_ENOMEM, "out of memory reading the --devices passes");
    for (size_t pass = 1; pass < passes->count; pass++)
        merge_pass(state, pass, devices);
}

void audit_passes_free(struct audit_state *state)
{
    struct audit_passes *passes = state->passes;
    if (!passes)
        return;
    for (size_t pass = 1; pass < passes->count; pass++)
        worker_stream_release(&passes->streams[pass]);
    free(passes);
    state->passes = NULL;
}
