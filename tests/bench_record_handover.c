/* How a record reaches `run`'s session worker (docs/PERF.md "The audit itself"). Run by
 * `meson test --benchmark`, or directly:
 *   bench_record_handover [RUNS]
 * For records of 1 to 512 MiB (synth random, 64 rows, k = 2048), the median over RUNS (default 5)
 * of the main process's time to hand one record to a session worker and get its answer, both
 * ways src/replay/worker.h offers: copied through the session's socket (record_wire_encode's
 * buffer, then the worker's own copy) and written once into a memfd that the worker maps
 * (record_wire_encode_file, worker_session_run_job_file). The worker decodes the record and reads
 * every score, as the session worker's checks and upload do; no GPU is involved. `run` sends
 * records up to RECORD_WIRE_SOCKET_MAX_BYTES through the socket and bigger ones in a memfd. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "bench_util.h"
#include "capture.h"
#include "error.h"
#include "record_wire.h"
#include "synth.h"
#include "worker.h"

#define BENCH_ROWS 64u
#define BENCH_MAX_RUNS 101

static double now_ms(void)
{
    struct timespec now;
    clock_gettime(CLOCK_MONOTONIC, &now);
    return (double)now.tv_sec * 1e3 + (double)now.tv_nsec * 1e-6;
}

/* The session worker's side: decode, read every score, answer with their sum. */
static int handover_job(struct worker_channel *channel, size_t first, void *job, size_t bytes,
                        void *user)
{
    (void)first;
    (void)user;
    struct capture_record record;
    uint32_t k = 0;
    const char *file = NULL, *stem = NULL;
    if (!record_wire_decode(job, bytes, &record, &k, &file, &stem))
        return 4;
    double sum = 0;
    const size_t count = (size_t)record.rows * record.row_stride;
    for (size_t i = 0; i < count; i++)
        sum += record.scores[i];
    char text[64];
    snprintf(text, sizeof(text), "%.6g", sum);
    return worker_send(channel, text, strlen(text)) < 0 ? 2 : 0;
}

static int on_answer(void *user, size_t task, const struct worker_event *event)
{
    (void)user;
    (void)task;
    return event->outcome == WORKER_MESSAGE ? AUDIT_OK : AUDIT_EIO;
}

/* The record's wire bytes at any size (record_wire_encode stops at the socket's limit; the bytes
 * are the same): malloc'd, or NULL. */
static unsigned char *wire_bytes(const struct capture_record *record, size_t *bytes)
{
    const int file = record_wire_encode_file(record, 2048, "bench.bin", "bench", bytes);
    if (file < 0)
        return NULL;
    unsigned char *wire = malloc(*bytes);
    if (wire && pread(file, wire, *bytes, 0) != (ssize_t)*bytes) {
        free(wire);
        wire = NULL;
    }
    close(file);
    return wire;
}

/* One handover each way; false when either failed. */
static bool hand_over(struct worker_session *session, const struct capture_record *record,
                      const unsigned char *wire, size_t bytes, double *socket_ms,
                      double *file_ms)
{
    struct audit_error err = { 0 };
    double started = now_ms();
    /* record_wire_encode's copy, then the socket. */
    unsigned char *copy = malloc(bytes);
    bool ok = copy != NULL;
    if (ok) {
        memcpy(copy, wire, bytes);
        ok = worker_session_run_job(session, copy, bytes, 1, on_answer, NULL, 0, &err) == 0;
    }
    free(copy);
    *socket_ms = now_ms() - started;
    if (!ok)
        return false;

    started = now_ms();
    size_t file_bytes = 0;
    const int file = record_wire_encode_file(record, 2048, "bench.bin", "bench", &file_bytes);
    ok = file >= 0 && worker_session_run_job_file(session, file, file_bytes, 1, on_answer, NULL,
                                                  0, &err) == 0;
    if (file >= 0)
        close(file);
    *file_ms = now_ms() - started;
    return ok;
}

int main(int argc, char **argv)
{
    int runs = argc > 1 ? atoi(argv[1]) : 5;
    if (runs < 1 || runs > BENCH_MAX_RUNS)
        runs = 5;
    static const uint32_t mib[] = { 1, 8, 32, 128, 512 };
    struct worker_session session;
    struct audit_error err = { 0 };
    worker_session_init(&session, handover_job, NULL, NULL);
    if (worker_session_start(&session, &err) < 0) {
        fprintf(stderr, "bench_record_handover: %s\n", err.message);
        return 1;
    }
    printf("# record handover to a session worker, median of %d (socket limit in run: %zu MiB)\n",
           runs, RECORD_WIRE_SOCKET_MAX_BYTES >> 20);
    printf("# %8s %14s %14s\n", "MiB", "socket_ms", "memfd_ms");
    int status = 0;
    for (size_t s = 0; s < sizeof(mib) / sizeof(mib[0]) && status == 0; s++) {
        const uint32_t length = (uint32_t)(((uint64_t)mib[s] << 20) / BENCH_ROWS / sizeof(float));
        struct synth_params params = { .family = "random", .rows = BENCH_ROWS, .length = length,
                                       .k = 2048, .seed = 1 };
        struct capture_record record = { 0 };
        if (synth_generate(&params, &record, &err) < 0) {
            fprintf(stderr, "bench_record_handover: %s\n", err.message);
            status = 1;
            break;
        }
        double socket_ms[BENCH_MAX_RUNS], file_ms[BENCH_MAX_RUNS];
        size_t bytes = 0;
        unsigned char *wire = wire_bytes(&record, &bytes);
        if (!wire)
            status = 1;
        for (int r = 0; r < runs && status == 0; r++)
            if (!hand_over(&session, &record, wire, bytes, &socket_ms[r], &file_ms[r])) {
                fprintf(stderr, "bench_record_handover: the handover of %u MiB failed\n",
                        mib[s]);
                status = 1;
            }
        if (status == 0)
            printf("  %8u %14.2f %14.2f\n", mib[s], bench_median(socket_ms, runs),
                   bench_median(file_ms, runs));
        free(wire);
        capture_record_free(&record);
    }
    worker_session_stop(&session);
    return status;
}
