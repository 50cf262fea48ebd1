/* What the worker files share (worker.h and worker_stream.h are the public side):
 *   worker.c          tasks, keepers and sessions, their watchdog, the stop flag
 *   worker_stream.c   children that stream messages to a parent busy with work of its own */
#ifndef DSATOPK_WORKER_INTERNAL_H
#define DSATOPK_WORKER_INTERNAL_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "worker.h"

/* A grace period for a child that has sent its last message or closed its pipe to exit (CUDA
 * context teardown takes a moment). */
#define WORKER_EXIT_GRACE_MS 10000

int64_t worker_now_ms(void);

/* Waits up to grace_ms for the child to exit, then kills it (kill_first: at once); always
 * reaps it. Returns its wait status (0 when it was already reaped). */
int worker_reap_child(pid_t pid, int grace_ms, bool kill_first);

/* How a dead child ended, in event->description after prefix (and event->signal or
 * event->exit_status); false when it exited 0. */
bool worker_describe_exit(int status, struct worker_event *event, const char *prefix);

/* The parent's ends of pipes and sockets that belong to one child only (a session's socket and
 * result pipe, a stream's pipe). Every child forked while one is listed closes it first: a later
 * child holding a copy would keep the owner's peer from seeing the end of file when the owner
 * closes its own copy (a session's child its last job, a stream's parent the end of the
 * stream). */
void worker_fd_hide(int fd);
void worker_fd_unhide(int fd);
/* In a freshly forked child: closes every listed descriptor and empties the list. */
void worker_child_close_hidden(void);
/* In a freshly forked child: die with the parent, whatever kills it (PR_SET_PDEATHSIG on
 * Linux); exits at once if the parent is already gone. */
void worker_child_die_with_parent(pid_t parent);

#endif
