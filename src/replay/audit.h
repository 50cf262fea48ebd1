/* The audit engine behind `run` (docs/REPORT.md): replays every selected record of the input
 * captures on every backend, in worker processes, and builds the run report record by record.
 * The front (src/cli/cmd_run.c) parses the options, fills struct audit_options, calls audit_run
 * with its callbacks for progress, messages and table lines, then writes and prints what it got.
 *
 * What happens, in order:
 * - a probe process counts and describes the devices (the main process never initialises CUDA:
 *   a CUDA context does not survive fork) and stays, keeping the driver initialised;
 * - the report begins (its context: the build, the command line, the device, the settings);
 * - inputs are expanded (a directory gives its *.bin files, sorted) and read record by record;
 *   a selected record (--records, --shard) gets its CPU side here (reference hashes, census) and
 *   its backends replayed in a worker (src/replay/worker.h): one session worker per device pass
 *   serves record after record (src/replay/session_worker.c; a record over 1 MiB reaches it in
 *   a memfd, record_wire.h), and only a record no memfd can hold gets a worker forked for it
 *   (src/replay/record_worker.c); a hang, crash or poisoned context is that backend's status
 *   and a fresh worker takes the rest;
 * - with --devices, the whole audit runs once per listed device (a device pass): the first
 *   pass writes the records, each later one adds its per_device[] entries to them, and the
 *   cross_device block compares them (src/replay/audit_report.c); the passes run at once, each
 *   later one in a process of its own (below), or one after another with devices_sequential;
 * - the report is finished with the exit code.
 *
 * Interruption: with worker_signals_install() in effect (the front installs it before audit_run
 * and restores it once the report is written, so that a signal during the writes is not lost),
 * SIGINT and SIGTERM stop the workers and the run, and the report says complete: false.
 *
 * Devices in parallel (src/replay/audit_passes.c): before the first record is read, every
 * --devices entry after the first gets a pass process of its own (forked while no thread and no
 * CUDA context exists), which reads the inputs and replays on its own session worker, so each
 * device has its own CUDA context and noise stream; the main process runs the first pass
 * meanwhile. A pass process sends each record's entries and table lines as it finishes them; the
 * main process merges them once its own pass is done, pass by pass in list order, into the same
 * report and table as passes run in turn: callbacks name the pass they concern and record_done
 * comes in list order. A device whose worker hangs, crashes or loses its context, or whose pass
 * process dies, is that device's outcome; the others go on. The report's
 * context.devices_concurrent says whether passes ran at the same time. */
#ifndef DSATOPK_AUDIT_H
#define DSATOPK_AUDIT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <cjson/cJSON.h>

#include "engine_check.h"
#include "error.h"
#include "gpu_device.h"
#include "noise.h"
#include "report.h"
#include "topk_backends.h"

#define AUDIT_MAX_BACKENDS 32
/* --devices: entries in the list (the same device may appear several times). */
#define AUDIT_MAX_DEVICES 64
/* The inputs when none is given. */
#define AUDIT_DEFAULT_CAPTURES "captures"

/* What to audit and how. Every pointer is borrowed for the duration of audit_run. */
struct audit_options {
    /* Capture files and directories, in order; none: AUDIT_DEFAULT_CAPTURES. */
    const char *const *inputs;
    size_t input_count;
    const struct topk_backend *const *backends; /* in table order, at most AUDIT_MAX_BACKENDS */
    size_t backend_count;
    const uint32_t *records;      /* sorted, unique; NULL: every record */
    size_t record_count;
    const uint32_t *rows;         /* sorted, unique; NULL: every row */
    size_t row_count;
    uint32_t k_override;          /* 0: each record's own k (the engine's selection is judged at
                                     the record's k whatever it is) */
    /* The contract the engine's selections are judged under (run --engine-contract); NULL: each
     * record's metadata "contract", else any valid top-k (engine_check.h). */
    const struct engine_contract *engine_contract;
    uint32_t shard_index, shard_count; /* shard_count 0: every selected record */
    uint32_t reps;
    enum noise_kind noise;
    uint64_t seed;                /* --batch-invariance shuffles */
    bool graph, batch_invariance;
    bool gpu_prefilter;           /* off: every rep copied back and hashed */
    const char *dump_dir;         /* an existing directory, or NULL (turns the pre-filter off) */
    unsigned long long emulate_smem_per_sm; /* 0: what the device reports */
    unsigned timeout_ms;          /* watchdog per record x backend */
    int device;                   /* without --devices */
    /* --devices: the ordinals in order (all_devices: every device the probe finds); devices_text
     * as given, NULL without --devices. */
    const int *devices;
    size_t device_count;
    bool all_devices;
    const char *devices_text;
    bool devices_sequential;      /* the passes one after another, in this process */
    /* For the report's context. */
    const char *version_string;
    const char *command_line;
};

/* One rep done, for a progress line. */
struct audit_progress {
    const char *file;
    uint32_t record;
    const char *backend;
    const char *phase;   /* "eager", "graph" or "batch" */
    uint32_t done, total;
    /* The --devices entry (pass) replaying, and its ordinal; passes: the number of entries (0
     * without --devices). With more than one, their progress may interleave. */
    size_t pass, passes;
    int ordinal;
};

enum audit_message_kind {
    AUDIT_MESSAGE_ERROR,  /* an input error, a stop, a lost device: always worth showing */
    AUDIT_MESSAGE_NOTICE, /* how the run goes on without a device: for a front that is not quiet */
};

/* Every member may be NULL. Callbacks run in the main process, in the order of the events, except
 * progress (see there) and the messages of a --devices pass process, which it says itself as they
 * happen (naming its entry). */
struct audit_callbacks {
    void *user;
    /* One rep of a backend done. Runs in the worker process that replays it (its stderr is the
     * main process's), several at once when --devices passes run at once; NULL: no progress is
     * tracked. */
    void (*progress)(void *user, const struct audit_progress *progress);
    /* What progress drew must go: a message or table lines follow (only when progress is set). */
    void (*progress_end)(void *user);
    /* text names the file, record, backend or device concerned; no prefix, no newline. */
    void (*message)(void *user, enum audit_message_kind kind, const char *text);
    /* A --devices pass starts on ordinal (device NULL: it could not be described, its GPU work is
     * skipped). Called for every pass when there is more than one. */
    void (*pass_start)(void *user, size_t pass, int ordinal, const struct gpu_device_info *device);
    /* A record is in the report: the terminal table lines of its backends (lines[i] for backend
     * i, each NULL or one or more '\n'-terminated lines), then, in the first pass, those of its
     * engine selection when it has one; count = the backend count, plus one for those. */
    void (*record_done)(void *user, size_t pass, const char *const *lines, size_t count);
    /* --devices: the report's cross_device block, once every pass is done (device_available
     * false: no device, the block says why). */
    void (*cross_device)(void *user, const cJSON *block, bool device_available);
};

struct audit_result {
    int exit_code;           /* the documented exit code of the run (also in the report) */
    bool complete;           /* every selected record went through every backend */
    bool report_ready;       /* report holds the finished report */
    struct run_report report;
};

/* Runs the audit. Returns 0 with result->report finished (result->exit_code says how the audit
 * went: 0 pass, 1 a failure, 2 a --rows row a record lacks, 3 a bad capture, 4 the device failed,
 * 128 + the signal when interrupted); or a negative code when there is no report, err saying
 * why and result->exit_code what to exit with: AUDIT_EUSAGE for a --device or --devices ordinal
 * the machine lacks, AUDIT_EFAILED when interrupted while the devices were probed, another code
 * when the probe, the report or its finish failed. result is released with audit_result_release
 * in every case. */
int audit_run(const struct audit_options *options, const struct audit_callbacks *callbacks,
              struct audit_result *result, struct audit_error *err);
void audit_result_release(struct audit_result *result);

#endif
