/* Worker processes: run a sequence of tasks in a forked child, one result message per task
 * through a pipe, under a watchdog (docs/REPORT.md "Worker processes, faults and interruptions").
 *
 * `run` replays kernels that may hang, crash the process or poison the CUDA context. Each
 * batch of such work runs in a child process; the parent only reads messages. The machinery here
 * knows nothing about CUDA or reports: the child's work is a function pointer, so the unit tests
 * drive it with plain CPU children.
 *
 * Protocol. worker_run_tasks(count, ...) forks a child that runs child_main(channel, first, user)
 * with first = 0; the child sends exactly one message per task, in task order, starting at
 * first, with worker_send(). For each task the parent calls on_result once, with either the
 * child's message or what happened instead:
 *   - no message within timeout_ms of the previous one (or of the start): WORKER_HANG; the child
 *     is killed (SIGKILL) and reaped;
 *   - the child died by a signal: WORKER_CRASH with the signal; exited non-zero: WORKER_CRASH with
 *     the status; died in the middle of a message: WORKER_CRASH, "mid-message";
 * and then forks a fresh child for the remaining tasks (first = the next task). A child that
 * returns 0 after sending some messages asks for a fresh process for the rest (used after a
 * sticky CUDA error: the context is poisoned, the next task needs a new one); a child that
 * returns 0 having sent nothing is charged with the current task (WORKER_CRASH), so that a child
 * can never make the parent loop.
 *
 * Children die with the parent (PR_SET_PDEATHSIG on Linux, and a getppid() check), ignore
 * SIGINT (Ctrl-C reaches the whole process group: the parent decides), end with _exit() (the
 * parent's stdio buffers are never flushed twice) and are always reaped: no zombie, no orphan.
 *
 * Stopping. worker_signals_install() makes SIGINT and SIGTERM set a flag instead of killing the
 * process; worker_run_tasks polls it at least every WORKER_POLL_SLICE_MS, kills the child and
 * returns WORKER_STOPPED. The caller then writes what it has and exits 128 + the signal. */
#ifndef DSATOPK_WORKER_H
#define DSATOPK_WORKER_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "error.h"

/* Largest message a child may send (a bigger length prefix is a protocol error: crash). */
#define WORKER_MAX_MESSAGE_BYTES (256u << 20)
/* How often a waiting parent looks at the stop flag. */
#define WORKER_POLL_SLICE_MS 100
/* worker_run_tasks returns this (a positive value, not an AUDIT_E* code) when SIGINT or SIGTERM
 * arrived (worker_stop_signal() says which). */
#define WORKER_STOPPED 1

/* The child's end of the pipe. */
struct worker_channel {
    int fd;
};

/* Sends one message (a 4-byte length prefix, then the bytes). Child side. Returns 0 or
 * AUDIT_EIO (the parent is gone or the message is too big). */
int worker_send(struct worker_channel *channel, const void *data, size_t bytes);

/* The child's work: tasks first, first + 1, ... one message each. Its return value becomes the
 * exit status (0: done or "give me a fresh process"; anything else: a crash of the current
 * task). */
typedef int (*worker_child_fn)(struct worker_channel *channel, size_t first_task, void *user);

enum worker_outcome {
    WORKER_MESSAGE, /* data, bytes: the child's message for the task */
    WORKER_HANG,    /* no message within the timeout: killed */
    WORKER_CRASH,   /* died (signal, exit status, mid-message, no message): description */
};

struct worker_event {
    enum worker_outcome outcome;
    const void *data;   /* WORKER_MESSAGE: valid during the callback; NUL-terminated too */
    size_t bytes;
    int signal;         /* WORKER_CRASH by a signal: its number, else 0 */
    int exit_status;    /* WORKER_CRASH by exit: the status, else -1 */
    char description[256]; /* HANG and CRASH: "killed after 120 s without a result",
                              "killed by signal SIGSEGV (Segmentation fault)", ... */
};

/* The parent's view of each task's outcome, in task order. Returns 0 to go on, or a negative
 * AUDIT_E* code to stop (the child is killed and reaped and worker_run_tasks returns it). */
typedef int (*worker_result_fn)(void *user, size_t task, const struct worker_event *event);

struct worker_stats {
    unsigned processes;  /* children forked */
    unsigned hangs, crashes;
};

/* Runs tasks 0 .. task_count - 1 as described above. timeout_ms: per task (0: no watchdog).
 * stats may be NULL. Returns 0 when every task has an outcome, WORKER_STOPPED on SIGINT/SIGTERM
 * (after worker_signals_install), on_result's negative code, or AUDIT_EDEVICE when a process or
 * pipe cannot be created (err filled). Every child is reaped before it returns. */
int worker_run_tasks(size_t task_count, worker_child_fn child_main, worker_result_fn on_result,
                     void *user, unsigned timeout_ms, struct worker_stats *stats,
                     struct audit_error *err);

/* A keeper: a child that answers once and then stays, idle, for as long as the parent wants
 * (`run`'s device probe keeps the CUDA driver initialised this way: a process that starts CUDA
 * while another one has it initialised skips most of cuInit, docs/PERF.md "The audit itself").
 * worker_keeper_start runs child_main as the single task of worker_run_tasks (same watchdog and
 * outcomes, through on_result); when the child sent its message and returned 0 it is not reaped
 * but kept (keeper->pid), until worker_keeper_stop kills and reaps it or the parent dies (the
 * child dies with it). Returns as worker_run_tasks; keeper->pid is 0 when no child is kept. */
struct worker_keeper {
    pid_t pid;
};
int worker_keeper_start(struct worker_keeper *keeper, worker_child_fn child_main,
                        worker_result_fn on_result, void *user, unsigned timeout_ms,
                        struct audit_error *err);
/* Kills and reaps a kept child; nothing when none is kept. */
void worker_keeper_stop(struct worker_keeper *keeper);

/* A session: one child that serves job after job, so that what it sets up once (`run`: the CUDA
 * context) serves every record. worker_session_run_job(session, job, ..., task_count, ...) runs
 * tasks 0 .. task_count - 1 of one job exactly as worker_run_tasks does (one message per task in
 * order, the same watchdog, outcomes, fresh processes after a hang or crash), except that the
 * child is the session's: forked when there is none (child_start, if any, runs first in it),
 * given the job bytes through a socket and kept, waiting for the next job, once the last task's
 * message came. The child's job_main(channel, first, job, bytes, user) sends the messages of tasks
 * first .. task_count - 1 and returns 0 to wait for the next job, WORKER_JOB_LEAVE to exit (the
 * next job, or the rest of this one, goes to a fresh child: a poisoned CUDA context), or anything
 * else to exit as a crash. worker_session_stop closes the socket: the child leaves its loop and
 * exits (killed after a grace period). */
#define WORKER_JOB_LEAVE 1
typedef int (*worker_job_fn)(struct worker_channel *channel, size_t first_task, void *job,
                             size_t job_bytes, void *user); /* job: the child's own copy */
typedef void (*worker_start_fn)(void *user);
struct worker_session {
    worker_job_fn job_main;
    worker_start_fn child_start; /* NULL: nothing to do before the first job */
    void *user;                  /* the child's (its copy, as at the fork) */
    pid_t pid;                   /* 0: no child now */
    int result_fd, job_fd;
    struct worker_stats stats;
};
void worker_session_init(struct worker_session *session, worker_job_fn job_main,
                         worker_start_fn child_start, void *user);
/* Forks the child now (its child_start runs while the parent goes on); 0 or AUDIT_EDEVICE. */
int worker_session_start(struct worker_session *session, struct audit_error *err);
int worker_session_run_job(struct worker_session *session, const void *job, size_t job_bytes,
                           size_t task_count, worker_result_fn on_result, void *user,
                           unsigned timeout_ms, struct audit_error *err);
/* The same with the job in a file (`run`: a memfd holding a record too big to copy through the
 * socket): only the descriptor travels (SCM_RIGHTS, beside the job's header), and the child maps
 * the file's first job_bytes bytes privately (its writes stay its own) instead of reading a copy.
 * The caller keeps job_file open until this returns: a fresh child after a crash or hang is
 * given the same descriptor. A child that cannot map it exits 3 (a crash of the task). */
int worker_session_run_job_file(struct worker_session *session, int job_file, size_t job_bytes,
                                size_t task_count, worker_result_fn on_result, void *user,
                                unsigned timeout_ms, struct audit_error *err);
void worker_session_stop(struct worker_session *session);

/* SIGINT and SIGTERM set the stop flag (no SA_RESTART: blocking calls return EINTR). Returns 0
 * or -1. worker_signals_restore puts back the previous handlers. */
int worker_signals_install(void);
void worker_signals_restore(void);
/* 0, or the signal that asked the process to stop. */
int worker_stop_signal(void);
/* Clears the stop flag (tests). */
void worker_stop_clear(void);
/* Sets the stop flag as if sig had arrived (tests, and callers that stop for another reason). */
void worker_stop_request(int sig);

/* "SIGSEGV" for SIGSEGV, "signal 42" for one without a name (buffer of at least 16 bytes). */
const char *worker_signal_name(int sig, char *buffer, size_t size);

#endif
