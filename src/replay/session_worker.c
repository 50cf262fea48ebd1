/* The session worker: every record of a device pass in one process.
 *
 * Creating a CUDA context takes ~130 ms on the H200 (docs/PERF.md "The audit itself"), more than
 * all the kernels of a 25-rep audit of a large record; a worker forked per record would pay it
 * every time. The session worker is forked once per device pass, starts CUDA while the main
 * process reads the first record, and replays record after record: each is sent to it whole
 * (src/replay/record_wire.h: through the session's socket, or over 1 MiB in a memfd it maps),
 * and it prepares the checks and the census of each again for its own judging (the main process
 * has its own for the report). A crash, hang or poisoned context ends it like a per-record
 * worker, and a fresh one takes the rest. With --devices at once, each pass process has its
 * own (src/replay/audit_passes.c). */
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "audit_internal.h"
#include "census.h"
#include "record_wire.h"

/* The session worker's own state: only ever set in that process. */
static struct {
    struct replay_device *device;
    double device_open_ms; /* its CUDA start, not yet charged to a backend */
    int open_status;
    char open_error[AUDIT_ERROR_MESSAGE_BYTES];
    const struct audit_state *state;
    pthread_t opener;      /* the CUDA start, on a thread of its own */
    bool opening;          /* opener not joined yet */
} session_worker;

static void *session_worker_open(void *unused)
{
    (void)unused;
    const struct audit_options *options = session_worker.state->options;
    struct audit_error err = { 0 };
    const double started_ms = report_monotonic_ms();
    session_worker.open_status = replay_device_open(&session_worker.device,
                                                    session_worker.state->pass.ordinal,
                                                    (size_t)options->emulate_smem_per_sm,
                                                    options->noise, &err);
    session_worker.device_open_ms = report_monotonic_ms() - started_ms;
    if (session_worker.open_status < 0)
        snprintf(session_worker.open_error, sizeof(session_worker.open_error), "%s",
                 err.message);
    return NULL;
}

/* CUDA starts on a thread, so that the worker reads its first record and prepares its checks
 * and census meanwhile. */
void session_worker_start(void *user)
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

/* One record, backends first .. */
int session_worker_job(struct worker_channel *channel, size_t first, void *buffer, size_t bytes,
                       void *user)
{
    struct audit_state *state = user;
    const struct audit_options *options = state->options;
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
        return record_send_failure(channel, "fatal", AUDIT_EIO,
                                   "the session worker got a malformed record") < 0
                   ? 2
                   : WORKER_JOB_LEAVE;
    /* The record's CPU side first: the first record's runs beside the CUDA start. */
    memset(&checks, 0, sizeof(checks));
    status = checks_prepare(&checks, &record, k, &err);
    const bool checks_ready = status == AUDIT_OK;
    if (status == AUDIT_OK)
        status = census_record_json(&record, &k, 1, &census, &census_rows, &err);
    if (status == AUDIT_OK)
        status = record_reference_hashes(&checks, &record, k, &result, &err);
    if (session_worker_opened() < 0) {
        status = record_send_failure(channel, "device_error", session_worker.open_status,
                                     session_worker.open_error) < 0 ? 2 : WORKER_JOB_LEAVE;
        goto done;
    }
    if (status == AUDIT_OK)
        status = replay_input_create(session_worker.device, &record, k, &input, &err);
    if (status < 0) {
        status = record_send_failure(channel, "fatal", status, err.message) < 0
                     ? 2
                     : WORKER_JOB_LEAVE;
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
    status = record_replay_backends(channel, first, session_worker.device, input,
                                    &session_worker.device_open_ms, &job);
    /* After a failed free (settled: the device may be marked lost) the next record gets a
     * fresh worker rather than a context in doubt; this record's results are already sent. */
    if (!replay_device_lost(session_worker.device) && replay_input_free(input, &err) < 0 &&
        status == 0)
        status = WORKER_JOB_LEAVE;
done:
    if (checks_ready)
        checks_release(&checks);
    cJSON_Delete(census);
    free(census_rows);
    return status;
}
