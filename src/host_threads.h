/* A few threads for the host work of one output in `run` (docs/PERF.md "Host cost per distinct
 * output"): its SHA-256, set hash, contract checks and comparison with the first rep are
 * independent and each takes milliseconds, while the kernel that made the output takes well
 * under one.
 *
 * Threads are started for one call and joined before it returns: none outlives the call, and
 * none exists when `run` forks its worker processes. */
#ifndef DSATOPK_HOST_THREADS_H
#define DSATOPK_HOST_THREADS_H

#include <stddef.h>

/* The most threads host_threads_count gives without the environment variable, and with it. */
#define HOST_THREADS_DEFAULT_MAX 8u
#define HOST_THREADS_MAX 64u

/* How many threads a piece of host work of work_items items should use: the environment
 * variable DSATOPK_HOST_THREADS (1 to HOST_THREADS_MAX; larger values count as the maximum)
 * when it is set to a number, whatever the size (1 gives the sequential path); otherwise
 * min(online CPUs, HOST_THREADS_DEFAULT_MAX), fewer when the work has less than
 * items_per_thread items per thread (starting a thread costs tens of microseconds). */
unsigned host_threads_count(size_t work_items, size_t items_per_thread);

/* Runs work(argument, slot) on threads threads at once (slot 0 on the calling thread, slots 1..
 * on new ones) and returns when every one has returned. A thread that cannot be started is left
 * out, so work must be shared out dynamically (by the slots that do run), never by slot number.
 * The new threads block every signal: signals keep going to the calling thread. */
void host_threads_run(unsigned threads, void (*work)(void *argument, unsigned slot),
                      void *argument);

#endif
