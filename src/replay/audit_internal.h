/* What the files of the audit engine share (src/replay/audit.h is the public side):
 *   audit.c            the entry: probe, report, passes, finish, exit code; stops and messages
 *   audit_probe.c      the device probe worker and the device a pass replays on
 *   audit_report.c     what the engine writes into the report beside report.c's entries
 *   audit_records.c    inputs, the record loop and the main process's side of a record
 *   record_worker.c    a record's backends replayed and judged in a worker process
 *   session_worker.c   the worker that serves every record of a device pass
 *   result_wire.c      the message a worker sends back for each backend
 *   audit_passes.c     --devices passes at once: a process per entry after the first, merged */
#ifndef DSATOPK_AUDIT_INTERNAL_H
#define DSATOPK_AUDIT_INTERNAL_H

#include <stdbool.h>
#include <stdint.h>

#include <cjson/cJSON.h>

#include "audit.h"
#include "checks.h"
#include "replay.h"
#include "report.h"
#include "worker.h"

/* What the device probe worker found (the main process never initialises CUDA itself). */
struct audit_probe {
    int count;
    char why[512];
    bool queried[AUDIT_MAX_DEVICES];
    struct gpu_device_info info[AUDIT_MAX_DEVICES];
    char query_error[AUDIT_ERROR_MESSAGE_BYTES]; /* the first failed query */
};

/* What one device pass carries from record to record. */
struct audit_pass {
    size_t index;                   /* the --devices entry (0 without --devices) */
    int ordinal;                    /* the device it replays on */
    uint64_t next_global_index;     /* --shard numbering of the selected records */
    size_t next_slot;               /* later passes: where the search for the first pass's
                                       record of the record being replayed starts */
    cJSON *device_identity;         /* the device for per_device[] (NULL without --devices) */
    struct worker_session session;  /* the session worker (src/replay/session_worker.c) */
};

/* A record the first pass put into the report, for the later passes to find. */
struct audit_record_slot {
    const char *file;               /* the input path (the same string in every pass) */
    uint32_t index;
    cJSON *json;                    /* its object in the report */
};

struct audit_records_added {
    struct audit_record_slot *slots;
    size_t count, capacity;
};

struct audit_inputs;
struct audit_passes;

/* Everything one audit carries. */
struct audit_state {
    const struct audit_options *options;
    const struct audit_callbacks *callbacks;
    /* --devices resolved against the probe ("all" expanded); device: the first pass's. */
    int devices[AUDIT_MAX_DEVICES];
    size_t device_count;
    int device;
    const char *backend_names[AUDIT_MAX_BACKENDS];
    struct run_report report;
    struct audit_records_added added;
    struct audit_probe probe;
    bool device_available;
    char unavailable_reason[AUDIT_ERROR_MESSAGE_BYTES];
    /* Outcome, folded into the exit code at the end. */
    bool any_failure, bad_input, bad_selection, device_failed, any_device_lost;
    bool stopped;                   /* a fatal error ended the run early */
    int fatal_status;
    char stop_reason[AUDIT_ERROR_MESSAGE_BYTES];
    int stop_signal;                /* SIGINT or SIGTERM ended the run (0: none) */
    /* The record being replayed, for the progress line (set in the worker too). */
    const char *progress_file;
    uint32_t progress_record;
    struct audit_pass pass;
    const struct audit_inputs *inputs; /* the capture files, once expanded */
    /* --devices at once: in the main process, the pass processes of the entries after the first
     * (NULL: none; the passes run in turn); in a pass process, where its records go. */
    struct audit_passes *passes;
    struct worker_channel *pass_channel;
    bool devices_concurrent;        /* two or more passes ran at the same time */
};

/* ---- audit.c: stops, messages, interruption ---- */

/* A failure that ends the run: the report written so far is kept, marked incomplete. */
void audit_stop(struct audit_state *state, int status, const char *message);
/* The device failed: the rest of the GPU work is skipped (reported as such). */
void audit_device_lost(struct audit_state *state, const char *message);
/* A bad input (kind "corrupt", "truncated", "io", "invalid" or "selection") goes into the
 * report; record and offset < 0: the file as a whole. */
void audit_input_error(struct audit_state *state, const char *file, int64_t record,
                       int64_t offset, const char *kind, const char *message);
void audit_message(struct audit_state *state, enum audit_message_kind kind, const char *format,
                   ...) __attribute__((format(printf, 3, 4)));
void audit_progress_end(const struct audit_state *state);
/* SIGINT or SIGTERM (worker_signals_install) stops the run: true once it has. */
bool audit_check_interrupted(struct audit_state *state);

/* ---- audit_probe.c ---- */

/* Runs the probe, whose process then stays until keeper is stopped: with the CUDA driver
 * initialised there, each worker starts CUDA sooner. 0, WORKER_STOPPED, or a negative code. */
int audit_probe_devices(struct audit_state *state, struct worker_keeper *keeper,
                        struct audit_error *err);
/* Resolves --devices ("all", each ordinal checked against the machine) and the first pass's
 * device. 0, or AUDIT_EUSAGE for an ordinal the machine lacks. */
int audit_resolve_devices(struct audit_state *state, struct audit_error *err);
/* Whether the first pass has a usable device, and the report context's device. 0, or
 * AUDIT_EUSAGE for a --device the machine lacks. */
int audit_open_device(struct audit_state *state, struct run_context *context,
                      struct audit_error *err);
/* The probe's description of ordinal, or NULL. */
const struct gpu_device_info *audit_probed_info(const struct audit_state *state, int ordinal);

/* Switches the run to --devices entry pass: its device (one that cannot be described is lost:
 * its GPU work is skipped), its record numbering; the session worker of the previous pass is
 * stopped. */
void audit_pass_select(struct audit_state *state, size_t pass);
/* The report's side of entry pass (after the first): its device for per_device[] and the
 * cross_device list (appended to devices), and the front's pass_start. */
void audit_pass_announce(struct audit_state *state, size_t pass, cJSON *devices);

/* ---- audit_report.c ---- */

/* The list of the --devices entries' devices for the cross_device block, holding the first
 * entry's when there is a device (which becomes the first pass's identity). NULL when out of
 * memory. */
cJSON *audit_devices_begin(struct audit_state *state);
/* The device of --devices entry pass (info NULL: it could not be described) as per_device[] and
 * cross_device show it: the pass's identity, a copy appended to devices. false when out of
 * memory. */
bool audit_identify_pass(struct audit_state *state, size_t pass, int ordinal,
                         const struct gpu_device_info *info, cJSON *devices);
/* First pass: the record goes into the report (global number, a first per_device[] entry).
 * entries: one judged entry per backend, moved into the report. */
int audit_add_record(struct audit_state *state, const struct record_result *result,
                     cJSON **entries, uint64_t global_index, struct audit_error *err);
/* A later pass: the record's entries go into the first pass's record's per_device[] lists, and
 * their times (per backend) into the table's totals. */
int audit_add_device_pass(struct audit_state *state, const struct record_result *result,
                          cJSON **entries, struct audit_error *err);
/* The same for the entries of source's "backends" (a record object, or a pass process's message
 * about file's record index); a failing verdict among them fails the run. */
int audit_add_device_entries(struct audit_state *state, const char *file, uint32_t index,
                             const cJSON *source, struct audit_error *err);
/* --shard and --devices in the report's context. */
void audit_add_scale_out_context(struct audit_state *state);
/* The cross_device block; a required disagreement fails the run. */
int audit_add_cross_device(struct audit_state *state, cJSON *devices);
/* The plugin a backend comes from, in its entry (docs/PLUGIN.md); nothing for a built-in. */
void audit_entry_add_plugin(cJSON *entry, const struct topk_backend *backend);
void audit_records_added_free(struct audit_records_added *added);

/* ---- audit_records.c ---- */

/* The capture files the inputs name, in order; errors go into the report. */
struct audit_inputs {
    char **paths;
    size_t count, capacity;
};
void audit_inputs_expand(struct audit_state *state, struct audit_inputs *inputs);
void audit_inputs_free(struct audit_inputs *inputs);
/* Reads a capture record by record and audits the selected ones; a corrupt or truncated record
 * ends the file (the records before it are in the report). */
void audit_run_file(struct audit_state *state, const char *path);

/* ---- record_worker.c: one record's backends, judged where they replay ---- */

struct record_job {
    struct audit_state *state;
    const struct record_result *base;     /* record-level fields; no backends */
    struct check_context *checks;
    const struct replay_options *replay;
    cJSON **entries;                      /* per backend: its judged entry (NULL: none yet) */
    char **table_lines;                   /* per backend: its lines of the terminal table */
    bool *failed;                         /* per backend: its verdict is fail */
};

/* How the backends of one record replay. */
struct replay_options record_replay_options(struct audit_state *state, const char *file,
                                            const char *stem, uint32_t record_index);
/* The reference output's hash and set hash, into result. */
int record_reference_hashes(const struct check_context *checks,
                            const struct capture_record *replayed, uint32_t k,
                            struct record_result *result, struct audit_error *err);
/* Judges result and returns its entry and table lines (malloc'd) and whether it failed; false
 * when out of memory. */
bool record_judge_backend(const struct record_job *job, struct backend_result *result,
                          cJSON **entry, char **table, bool *failed);
/* Worker side: replays backends first .. on device, one message each (docs in the file). */
int record_replay_backends(struct worker_channel *channel, size_t first,
                           struct replay_device *device, struct replay_input *input,
                           double *device_open_ms, const struct record_job *job);
/* Worker side: {"fatal"|"device_error": {"code", "message"}}; < 0 when the pipe broke. */
int record_send_failure(struct worker_channel *channel, const char *key, int code,
                        const char *message);
/* The worker forked for one record (worker_child_fn; user: the struct record_job). */
int record_worker_main(struct worker_channel *channel, size_t first, void *user);
/* Main process side: the entry of a backend no worker replayed (no device: unavailable; the
 * device lost or the run stopped: skipped). 0 or AUDIT_ENOMEM. */
int record_missing_entry(struct record_job *job, size_t task);
/* Main process side: one backend's outcome (worker_result_fn; user: the struct record_job). */
int record_on_result(void *user, size_t task, const struct worker_event *event);

/* ---- audit_passes.c ---- */

/* Main process, before any record is read and before its own session worker: forks a pass
 * process for every --devices entry after the first (one that cannot be started is that
 * device's loss); sets state->passes and devices_concurrent. 0 or AUDIT_ENOMEM. */
int audit_passes_start(struct audit_state *state);
/* The same with another pass process (tests drive the merge with CPU children): pass_main runs
 * as a worker_stream child with the --devices entry as its index and state as its user, and
 * talks as a pass process does (audit_pass_send_record, audit_pass_send_end). */
int audit_passes_start_processes(struct audit_state *state, worker_child_fn pass_main);
/* Main process, between its records: takes what the pass processes sent, without waiting. */
void audit_passes_read(struct audit_state *state);
/* Main process, once its own pass is done: waits for every pass process (a stop is passed on to
 * them; after a fatal stop they are killed) and merges their records pass by pass in list order. */
void audit_passes_finish(struct audit_state *state, cJSON *devices);
void audit_passes_free(struct audit_state *state);
/* In a pass process: the record's entries (moved out of job) and table lines go to the main
 * process. */
int audit_pass_send_record(struct audit_state *state, const struct record_result *result,
                           const struct record_job *job, struct audit_error *err);
/* In a pass process: its outcome (device lost, stopped, why), its last message. 0 or < 0. */
int audit_pass_send_end(struct audit_state *state);

/* ---- session_worker.c ---- */

/* worker_job_fn and worker_start_fn of the session worker; user: the struct audit_state. */
int session_worker_job(struct worker_channel *channel, size_t first, void *buffer, size_t bytes,
                       void *user);
void session_worker_start(void *user);

#endif
