/* Worker streams: child processes that each do one long piece of work and send messages as
 * they go, to a parent that has work of its own (`run --devices`: one process per device pass
 * after the first, src/replay/audit_passes.c).
 *
 * Protocol. worker_stream_start forks a child that runs child_main(channel, index, user) and
 * exits with what it returns (0: done; anything else: a failure); the child sends any number of
 * messages with worker_send(). The parent collects them with worker_streams_read, which waits
 * no longer than it is told, and queues each stream's whole messages in arrival order;
 * worker_stream_take hands them out in that order, so messages of different streams may arrive
 * interleaved in any way and each stream's still read back as it sent them. A stream ends when
 * its child closes its pipe (exits): the child is reaped, and the stream says how it ended:
 * cleanly (exit 0 on a whole message), or failed (a signal, a non-zero exit, a message cut
 * short, a length over WORKER_MAX_MESSAGE_BYTES: then the child is killed), in words.
 *
 * Unlike a task worker (worker.h), the child keeps the parent's SIGINT and SIGTERM handlers
 * (worker_signals_install): Ctrl-C, which reaches the whole process group, raises its own stop
 * flag, so that it stops its own workers and ends its work as the parent does.
 * worker_streams_wait passes a stop the parent alone received (SIGTERM sent to its pid) on to
 * every child once, and kills the children that have not ended WORKER_STREAM_STOP_GRACE_MS
 * later. Children die with the parent (PR_SET_PDEATHSIG on Linux) and end with _exit(). Neither
 * end of a stream's pipe is inherited by a process forked later, in the parent or in the child
 * (worker_internal.h): the stream's child alone holds the write end, so its exit ends the
 * stream even while a worker it forked is still going. */
#ifndef DSATOPK_WORKER_STREAM_H
#define DSATOPK_WORKER_STREAM_H

#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

#include "error.h"
#include "worker.h"

/* How long the children of worker_streams_wait get to end after the stop was passed on. */
#define WORKER_STREAM_STOP_GRACE_MS 10000

struct worker_stream_message;

struct worker_stream {
    pid_t pid;                /* 0: not started, or reaped */
    int fd;                   /* the read end; -1 once the stream ended */
    unsigned char *pending;   /* bytes read that do not make a whole message yet */
    size_t pending_bytes, pending_capacity;
    struct worker_stream_message *first, *last; /* queued whole messages */
    bool ended;               /* the child is gone (or never started) */
    bool failed;              /* it ended otherwise than cleanly (description says how) */
    char description[256];    /* how it ended: "exited", "killed by signal SIGSEGV (...)", ... */
};

/* Forks the stream's child (the stream is reset first). 0, or AUDIT_EDEVICE when no pipe or
 * process can be made (err filled; the stream is then ended and failed, saying why). */
int worker_stream_start(struct worker_stream *stream, worker_child_fn child_main, size_t index,
                        void *user, struct audit_error *err);

/* Reads what the streams' children have sent, waiting up to wait_ms for the first bytes (0: not
 * at all); ended streams are left alone. 0, or AUDIT_ENOMEM (the stream that could not grow its
 * buffer is killed and failed). */
int worker_streams_read(struct worker_stream *streams, size_t count, int wait_ms);

/* Reads until every stream has ended. A stop flag raised in the parent (worker_stop_signal) is
 * passed on to each child still running, once; WORKER_STREAM_STOP_GRACE_MS later the children
 * still running are killed. 0 or AUDIT_ENOMEM. */
int worker_streams_wait(struct worker_stream *streams, size_t count);

/* Kills the children still running (SIGKILL) and reaps them; what they sent before stays queued.
 * A killed stream is failed, "killed: the run stopped". */
void worker_streams_kill(struct worker_stream *streams, size_t count);

/* The oldest queued message of the stream, malloc'd and NUL-terminated past its *bytes (the
 * caller frees it), or NULL when none is queued. */
char *worker_stream_take(struct worker_stream *stream, size_t *bytes);

/* Kills and reaps the child if it still runs, closes the pipe and frees the queue. */
void worker_stream_release(struct worker_stream *stream);

#endif
