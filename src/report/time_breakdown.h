/* Where one record x backend's time went (docs/REPORT.md "time_breakdown_ms"): the parts replay
 * measures, their sums, and the "time_breakdown_ms" object of a backend entry, written by the
 * report and read back from a worker's entry (one object, one file). */
#ifndef DSATOPK_TIME_BREAKDOWN_H
#define DSATOPK_TIME_BREAKDOWN_H

#include <stddef.h>

#include <cjson/cJSON.h>

/* Where one record x backend's time went, in milliseconds (docs/REPORT.md "time_breakdown_ms").
 * Host phases are CLOCK_MONOTONIC intervals that do not overlap (hash_ms and check_ms split the
 * wall time of the threaded work of new outputs between them); kernel_ms is the CUDA-event
 * time of the timed launches, which lies inside their host wait (launch_overhead_ms is that wait
 * minus kernel_ms). hash_ms and check_ms live in the tallies until
 * backend_result_time_breakdown() folds them in; "other" is never stored: it is what total_ms
 * leaves (time_breakdown_other_ms). */
struct time_breakdown {
    double total_ms;            /* the replay of this record x backend in its worker */
    double device_open_ms;      /* the worker's CUDA start, streams, events, noise buffers */
    double setup_ms;            /* record upload, buffers, warm-up launch, graph capture */
    double kernel_ms;           /* CUDA-event time of the timed launches (eager and graph) */
    double launch_overhead_ms;  /* host wait of the timed launches minus kernel_ms */
    double noise_wait_ms;       /* waiting for each rep's noise burst to finish */
    double row_hash_ms;         /* GPU row hashes: kernel and copying rows x 8 bytes back */
    double copy_ms;             /* outputs copied back to the host */
    double hash_ms;             /* SHA-256 of outputs, raw outputs and index sets, row sorts */
    double check_ms;            /* contract checks and baseline comparison of new outputs */
    double dump_ms;             /* --dump-outputs files */
    double batch_invariance_ms; /* the whole --batch-invariance test */
};

/* CLOCK_MONOTONIC in milliseconds: the clock of every host phase the report times. */
double report_monotonic_ms(void);
/* total_ms minus every part, never below 0 (rounding, or a part measured on another clock). */
double time_breakdown_other_ms(const struct time_breakdown *time);
/* Adds every part of addend to sum. */
void time_breakdown_add(struct time_breakdown *sum, const struct time_breakdown *addend);
/* Milliseconds to the microsecond, as the report writes every time: finer digits are clock
 * noise. */
double time_breakdown_round_ms(double ms);

/* The parts of struct time_breakdown but total_ms, in report order: the one list the JSON
 * object, the sums and the table's time line walk, so none of them can miss a part. */
struct time_part {
    const char *key;   /* in time_breakdown_ms (report_keys.h) */
    const char *label; /* in the table's time lines */
    size_t offset;     /* of its double in struct time_breakdown */
};
size_t time_breakdown_part_count(void);
const struct time_part *time_breakdown_part(size_t part);
double time_breakdown_value(const struct time_breakdown *time, size_t part);
/* The object "time_breakdown_ms" of a backend entry: every part, other_ms and total_ms,
 * rounded to the microsecond. */
cJSON *time_breakdown_json(const struct time_breakdown *time);
/* Reads such an object back (missing or non-numeric fields read 0). */
void time_breakdown_from_json(const cJSON *json, struct time_breakdown *time);

#endif
