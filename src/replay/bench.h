/* The bench engine behind `bench` (docs/PERF.md "Method"): microseconds per call of every
 * backend over a grid of shapes and input families, with the HBM floor of each shape. The
 * front (src/cli/cmd_bench.c) gets the device once measured and every result as it comes,
 * through callbacks, and prints and writes them. Host C calling the CUDA runtime in the calling
 * process (no worker: a backend that poisons the context ends the bench). */
#ifndef DSATOPK_BENCH_H
#define DSATOPK_BENCH_H

#include <stdbool.h>
#include <stdint.h>

#include "error.h"
#include "topk_backends.h"

struct bench_shape {
    uint32_t rows, length, k;
};

struct bench_options {
    const struct bench_shape *shapes;
    int shape_count;
    const struct topk_backend *const *backends;
    int backend_count;
    const char *const *families;        /* synth families: "random", "relu" */
    int family_count;
    unsigned long long replays;         /* timed graph replays per case (median reported) */
    unsigned long long warmup;          /* untimed replays first */
    unsigned long long device;          /* CUDA ordinal */
    unsigned long long seed;            /* input seed */
    unsigned long long emulate_smem_per_sm; /* 0: what the device reports */
};

/* The device, as measured before the first case. */
struct bench_device {
    struct gpu_device_info info;
    double copy_bandwidth;  /* device-to-device bytes per second (read plus written) */
    double empty_kernel_us; /* one empty kernel in the graph method: what every call pays */
};

struct bench_timing {
    double median_us, min_us, max_us;
    uint32_t launches_per_replay;
    uint64_t replays;
};

enum bench_outcome {
    BENCH_TIMED,
    BENCH_UNSUPPORTED,   /* supports() said no */
    BENCH_FAILED,        /* a CUDA or launch error */
};
/* The outcome as the bench JSON's "status" and the table show it: "ok", "unsupported", "error". */
const char *bench_outcome_name(enum bench_outcome outcome);

/* One backend on one shape and family (its strings valid during the callback). */
struct bench_result {
    const struct topk_backend *backend;
    const char *family;
    const struct bench_shape *shape;
    double hbm_floor_us;    /* bytes a call must move over the copy bandwidth */
    enum bench_outcome outcome;
    /* unsupported: supports()'s reason; failed: the error; timed: the plan supports()
     * described ("" when it said nothing) */
    const char *reason;
    /* failed with the CUDA context poisoned: nothing after it can be timed, and bench_run
     * returns this error (the front need not report it twice) */
    bool device_lost;
    struct bench_timing timing;  /* timed only */
    uint32_t input_copies;       /* copies of the scores the launches rotate over */
};

struct bench_callbacks {
    void *user;
    void (*device_ready)(void *user, const struct bench_device *device);
    void (*result)(void *user, const struct bench_result *result);
};

/* Runs every backend on every shape and family, in that order (shapes outermost). Returns 0, or
 * a negative code with err filled: AUDIT_EDEVICE without a device or when the device failed
 * (a result with device_lost came first when a backend poisoned it), AUDIT_EUSAGE for an
 * ordinal the machine lacks, another code when an input could not be made or uploaded. */
int bench_run(const struct bench_options *options, const struct bench_callbacks *callbacks,
              struct audit_error *err);

#endif
