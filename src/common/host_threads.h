/* A few threads for host work that splits into independent pieces: the host work of one output
 * in `run` (docs/PERF.md "Host cost per distinct output": its SHA-256, set hash, contract checks
 * and comparison with the first rep), and the rows of a record in the CPU reference and the
 * census (host_rows below).
 *
 * Threads are started for one call and joined before it returns: none outlives the call, and
 * none exists when `run` forks its worker processes. */
#ifndef DSATOPK_HOST_THREADS_H
#define DSATOPK_HOST_THREADS_H

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "error.h"

/* The most threads host_threads_count gives without the environment variable, and with it. */
#define HOST_THREADS_DEFAULT_MAX 8u
#define HOST_THREADS_MAX 64u

/* How many threads a piece of host work of work_items items should use: the environment
 * variable DSATOPK_HOST_THREADS (1 to HOST_THREADS_MAX; larger values count as the maximum)
 * when it is set to a number, whatever the size (1 gives the sequential path); otherwise
 * min(online CPUs, HOST_THREADS_DEFAULT_MAX), fewer when the work has less than
 * items_per_thread items per thread (starting a thread costs tens of microseconds). */
unsigned host_threads_count(size_t work_items, size_t items_per_thread);

/* Whether DSATOPK_HOST_THREADS asks for the sequential path (1): host work that would otherwise
 * run on a thread of its own (src/replay/tally_queue.h) then runs on the calling thread. */
bool host_threads_sequential(void);

/* Runs work(argument, slot) on threads threads at once (slot 0 on the calling thread, slots 1..
 * on new ones) and returns when every one has returned. A thread that cannot be started is left
 * out, so work must be shared out dynamically (by the slots that do run), never by slot number.
 * The new threads block every signal: signals keep going to the calling thread. */
void host_threads_run(unsigned threads, void (*work)(void *argument, unsigned slot),
                      void *argument);

/* The rows of a record shared out to host_threads_run's threads: each thread claims the next row
 * under the lock, so what a row produces does not depend on which thread took it. A failure
 * keeps the lowest failing row's error and no row after it is handed out any more: the error is
 * the one a single thread walking the rows in order would have stopped at. */
struct host_rows {
    pthread_mutex_t lock;
    uint32_t count, next;
    uint32_t failed_row; /* count while no row failed */
    struct audit_error failure;
};

/* 0, or AUDIT_ENOMEM (in err) when the lock cannot be made. */
int host_rows_init(struct host_rows *rows, uint32_t count, struct audit_error *err);
/* Gives the next row to work on in *row; false when none is left. */
bool host_rows_claim(struct host_rows *rows, uint32_t *row);
/* Records that row failed with error (kept when it is the lowest failing row so far). */
void host_rows_fail(struct host_rows *rows, uint32_t row, const struct audit_error *error);
/* After host_threads_run: the lowest failing row's code with its message copied to err, or 0.
 * Releases the lock. */
int host_rows_finish(struct host_rows *rows, struct audit_error *err);

#endif
