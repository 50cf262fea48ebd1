/* GPU replay of one record on one backend (docs/REPORT.md "What a replay does").
 *
 * Host C that calls the CUDA runtime directly. The device is opened once per run (streams,
 * events, noise buffers); a record is uploaded once and shared by every backend; each backend's
 * reps fill a struct backend_result (src/report/report.h) through an output_tally. Nothing here
 * builds JSON or decides a verdict.
 *
 * Errors: a CUDA or launch error, or device memory running out, becomes the backend's status
 * "error" with a message naming the record and backend, and the run goes on. A sticky error
 * (one that poisons the CUDA context, such as an illegal address) marks the device lost:
 * replay_backend returns AUDIT_EDEVICE and every later call refuses at once with the reason, so
 * the caller can report the rest of the GPU work as skipped. */
#ifndef DSATOPK_REPLAY_H
#define DSATOPK_REPLAY_H

#include <stdbool.h>
#include <stdint.h>

#include "topk_backends.h"
#include "capture.h"
#include "checks.h"
#include "error.h"
#include "noise.h"
#include "report.h"

/* Output bytes are set to this before every launch: each int32 slot then reads 0xA5A5A5A5,
 * neither -1 nor in range, so a slot the backend forgot to write is an out_of_range violation. */
#define REPLAY_POISON_BYTE 0xA5

/* --batch-invariance: shuffled batch layouts per record, and the most rows tested per record. */
#define REPLAY_BATCH_TRIALS 4u
#define REPLAY_BATCH_MAX_ROWS 1024u

struct replay_options {
    uint32_t reps;
    bool graph;             /* also capture one launch in a CUDA graph and replay it reps times */
    bool batch_invariance;
    uint64_t seed;          /* batch-invariance shuffles */
    const char *dump_dir;   /* NULL: no dumps; else DIR/<stem>-r<record>-<backend>-rep<NN>.bin */
    const char *dump_stem;  /* the capture file's name without directory and extension */
    /* GPU row hashes first (kernels/include/output_hash.h): a rep whose row hashes are a known
     * output's is counted as that output without copying, SHA-256 or checks. Ignored with dump_dir
     * (every output is then needed whole). */
    bool gpu_prefilter;
    /* Where the record came from, for messages and dump names. */
    const char *file;
    uint32_t record_index;
    /* Called once per rep (may be NULL): phase is "eager", "graph" or "batch". */
    void (*progress)(void *user, const char *backend, const char *phase, uint32_t done,
                     uint32_t total);
    void *progress_user;
};

struct replay_device;

/* Selects the device, queries it (with the shared-memory emulation, 0 for none), creates the
 * main and noise streams (both cudaStreamNonBlocking), the timing events and the noise state. */
int replay_device_open(struct replay_device **device, int ordinal, size_t emulate_smem_per_sm,
                       enum noise_kind noise, struct audit_error *err);
/* Makes a device opened on another thread current on the calling one (its streams and events
 * then serve this thread's calls). */
int replay_device_attach(struct replay_device *device, struct audit_error *err);
void replay_device_close(struct replay_device *device);
const struct gpu_device_info *replay_device_info(const struct replay_device *device);
/* NULL while the device is usable; else why it was lost. */
const char *replay_device_lost(const struct replay_device *device);

/* A record on the device: uploaded on first use by replay_backend, freed by replay_input_free. */
struct replay_input;
int replay_input_create(struct replay_device *device, const struct capture_record *record,
                        uint32_t k, struct replay_input **input, struct audit_error *err);
/* Frees the record's device copy and the input. A failed free returns AUDIT_EDEVICE, with the
 * device marked lost where its context no longer works (replay_device_lost): a worker that
 * goes on must not blame the failure on its next record. */
int replay_input_free(struct replay_input *input, struct audit_error *err);
/* The shape every backend's supports() sees for this record and k. */
void replay_shape(const struct capture_record *record, uint32_t k, struct topk_shape *shape);

/* Replays backend on the record. result must have been initialised with backend_result_init.
 * checks: prepared for this record and k (its reference is what outputs are compared with).
 * result->time receives where the time went (struct time_breakdown), on every outcome.
 * Returns 0 when result describes the outcome (ok, unsupported or error), AUDIT_EDEVICE when the
 * device was lost (result says so too), or another negative code for a failure that is not the
 * backend's (host memory, writing a dump) with err filled. */
int replay_backend(struct replay_device *device, struct replay_input *input,
                   const struct topk_backend *backend, struct check_context *checks,
                   const struct replay_options *options, struct backend_result *result,
                   struct audit_error *err);

/* Waits for the noise still queued on the sibling stream (replay_backend leaves it running, so
 * that the next backend of the record replays under it without a wait in between): after the
 * record's last backend. The wait goes to time's noise_wait_ms and total_ms. 0, or the CUDA
 * error with err filled (after a sticky one replay_device_lost says so). */
int replay_noise_drain(struct replay_device *device, struct time_breakdown *time,
                       struct audit_error *err);

/* A record made of some rows of another, in the order given (each row with its scores, length,
 * row start, page-table row and engine indices); provenance (index, file offset, payload hash)
 * is kept. Used by --rows and by the batch-invariance contexts. */
int replay_subrecord(const struct capture_record *record, const uint32_t *rows, uint32_t count,
                     struct capture_record *sub, struct audit_error *err);

#endif
