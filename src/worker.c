/* Worker processes, their pipes and the watchdog (src/worker.h). */
#include "worker.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#ifdef __linux__
#include <sys/prctl.h>
#endif

/* ---- the stop flag -------------------------------------------------------------------------- */

static volatile sig_atomic_t stop_signal_received;
static struct sigaction previous_int, previous_term;
static bool handlers_installed;

static void on_stop_signal(int sig)
{
    stop_signal_received = sig;
}

int worker_signals_install(void)
{
    struct sigaction action;
    memset(&action, 0, sizeof(action));
    action.sa_handler = on_stop_signal;
    sigemptyset(&action.sa_mask);
    action.sa_flags = 0; /* no SA_RESTART: a blocked poll() or read() returns EINTR at once */
    if (sigaction(SIGINT, &action, &previous_int) != 0)
        return -1;
    if (sigaction(SIGTERM, &action, &previous_term) != 0) {
        sigaction(SIGINT, &previous_int, NULL);
        return -1;
    }
    handlers_installed = true;
    return 0;
}

void worker_signals_restore(void)
{
    if (!handlers_installed)
        return;
    sigaction(SIGINT, &previous_int, NULL);
    sigaction(SIGTERM, &previous_term, NULL);
    handlers_installed = false;
}

int worker_stop_signal(void)
{
    return stop_signal_received;
}

void worker_stop_clear(void)
{
    stop_signal_received = 0;
}

void worker_stop_request(int sig)
{
    stop_signal_received = sig;
}

const char *worker_signal_name(int sig, char *buffer, size_t size)
{
    static const struct {
        int number;
        const char *name;
    } names[] = {
        { SIGSEGV, "SIGSEGV" }, { SIGBUS, "SIGBUS" },   { SIGFPE, "SIGFPE" },
        { SIGILL, "SIGILL" },   { SIGABRT, "SIGABRT" }, { SIGKILL, "SIGKILL" },
        { SIGTERM, "SIGTERM" }, { SIGINT, "SIGINT" },   { SIGPIPE, "SIGPIPE" },
        { SIGTRAP, "SIGTRAP" }, { SIGSYS, "SIGSYS" },   { SIGXCPU, "SIGXCPU" },
        { SIGHUP, "SIGHUP" },   { SIGQUIT, "SIGQUIT" }, { SIGUSR1, "SIGUSR1" },
        { SIGUSR2, "SIGUSR2" }, { SIGALRM, "SIGALRM" },
    };
    for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++) {
        if (names[i].number == sig) {
            snprintf(buffer, size, "%s", names[i].name);
            return buffer;
        }
    }
    snprintf(buffer, size, "signal %d", sig);
    return buffer;
}

/* ---- child side ----------------------------------------------------------------------------- */

static int write_all(int fd, const void *data, size_t bytes)
{
    const unsigned char *cursor = data;
    while (bytes > 0) {
        ssize_t written = write(fd, cursor, bytes);
        if (written < 0) {
            if (errno == EINTR)
                continue;
            return -1;
        }
        cursor += written;
        bytes -= (size_t)written;
    }
    return 0;
}

int worker_send(struct worker_channel *channel, const void *data, size_t bytes)
{
    if (bytes > WORKER_MAX_MESSAGE_BYTES)
        return AUDIT_EIO;
    /* Native byte order: both ends are the same binary on the same machine. */
    const uint32_t length = (uint32_t)bytes;
    if (write_all(channel->fd, &length, sizeof(length)) < 0 || write_all(channel->fd, data, bytes) < 0)
        return AUDIT_EIO;
    return AUDIT_OK;
}

/* kept: a keeper (worker_keeper_start): once child_main has sent its message and returned 0,
 * the child stays, idle, until the parent kills it or dies. */
static void child_run(int read_fd, int write_fd, pid_t parent, worker_child_fn child_main,
                      size_t first_task, void *user, bool kept)
{
    close(read_fd);
#ifdef __linux__
    /* Die with the parent, whatever kills it; the check closes the race with a parent that died
     * before the prctl. */
    prctl(PR_SET_PDEATHSIG, SIGKILL);
#endif
    if (getppid() != parent)
        _exit(127);
    /* Ctrl-C goes to the whole process group: the parent stops the child. SIGTERM sent to the
     * child alone kills it as usual. */
    signal(SIGINT, SIG_IGN);
    signal(SIGTERM, SIG_DFL);
    signal(SIGPIPE, SIG_DFL);
    struct worker_channel channel = { write_fd };
    int status = child_main(&channel, first_task, user);
    if (status < 0)
        status = -status;
    if (kept && status == 0) {
        close(write_fd);
        for (;;)
            pause();
    }
    /* _exit: the parent's buffered stdio, copied by fork, must not be flushed a second time. */
    _exit(status == 0 ? 0 : status < 126 ? status : 125);
}

/* ---- parent side ---------------------------------------------------------------------------- */

static int64_t now_ms(void)
{
    struct timespec now;
    clock_gettime(CLOCK_MONOTONIC, &now);
    return (int64_t)now.tv_sec * 1000 + now.tv_nsec / 1000000;
}

enum read_result {
    READ_COMPLETE,
    READ_EOF,      /* end of file; *got says how many bytes came before it */
    READ_TIMEOUT,
    READ_STOPPED,
    READ_FAILED,
};

/* Reads exactly bytes unless the deadline (0: none) passes, the stop flag is raised or the
 * writer closes the pipe. */
static enum read_result read_full(int fd, void *buffer, size_t bytes, int64_t deadline,
                                  size_t *got)
{
    unsigned char *cursor = buffer;
    *got = 0;
    while (*got < bytes) {
        /* Once a stop is requested, what the child has already written is still taken (a
         * finished result belongs in the report); waiting for more is not. */
        const bool stopping = stop_signal_received != 0;
        int slice = stopping ? 0 : WORKER_POLL_SLICE_MS;
        if (deadline) {
            int64_t left = deadline - now_ms();
            if (left <= 0)
                return READ_TIMEOUT;
            if (left < slice)
                slice = (int)left;
        }
        struct pollfd pending = { .fd = fd, .events = POLLIN };
        int ready = poll(&pending, 1, slice);
        if (ready < 0) {
            if (errno == EINTR)
                continue;
            return READ_FAILED;
        }
        if (ready == 0) {
            if (stopping)
                return READ_STOPPED;
            continue;
        }
        ssize_t count = read(fd, cursor + *got, bytes - *got);
        if (count < 0) {
            if (errno == EINTR || errno == EAGAIN)
                continue;
            return READ_FAILED;
        }
        if (count == 0)
            return READ_EOF;
        *got += (size_t)count;
    }
    return READ_COMPLETE;
}

/* Waits up to grace_ms for the child to exit, then kills it; always reaps it. */
static int reap_child(pid_t pid, int grace_ms, bool kill_first)
{
    int status = 0;
    if (kill_first)
        kill(pid, SIGKILL);
    const int64_t deadline = now_ms() + grace_ms;
    for (;;) {
        pid_t done = waitpid(pid, &status, kill_first ? 0 : WNOHANG);
        if (done == pid)
            return status;
        if (done < 0 && errno != EINTR)
            return 0; /* already reaped: nothing else can be learnt */
        if (done == 0 && now_ms() >= deadline) {
            kill(pid, SIGKILL);
            kill_first = true;
            continue;
        }
        if (done == 0) {
            struct timespec pause = { 0, 5 * 1000 * 1000 };
            nanosleep(&pause, NULL);
        }
    }
}

/* How a dead child ended, in words; false when it exited 0. */
static bool describe_exit(int status, struct worker_event *event, const char *prefix)
{
    char name[32];
    if (WIFSIGNALED(status)) {
        event->signal = WTERMSIG(status);
        snprintf(event->description, sizeof(event->description), "%skilled by signal %s (%s)",
                 prefix, worker_signal_name(event->signal, name, sizeof(name)),
                 strsignal(event->signal));
        return true;
    }
    if (WIFEXITED(status) && WEXITSTATUS(status) != 0) {
        event->exit_status = WEXITSTATUS(status);
        snprintf(event->description, sizeof(event->description), "%sexited with status %d",
                 prefix, event->exit_status);
        return true;
    }
    event->exit_status = 0;
    snprintf(event->description, sizeof(event->description), "%sexited", prefix);
    return false;
}

static void event_reset(struct worker_event *event, enum worker_outcome outcome)
{
    memset(event, 0, sizeof(*event));
    event->outcome = outcome;
    event->exit_status = -1;
}

/* A grace period for a child that has sent its last message or closed its pipe to exit (CUDA
 * context teardown takes a moment). */
#define WORKER_EXIT_GRACE_MS 10000

/* worker_run_tasks, and worker_keeper_start when kept is set: the child that sends the last
 * task's message is left running and *kept is its pid (0 when no child sent it). */
static int run_tasks(size_t task_count, worker_child_fn child_main, worker_result_fn on_result,
                     void *user, unsigned timeout_ms, struct worker_stats *stats, pid_t *kept,
                     struct audit_error *err)
{
    struct worker_stats local = { 0 };
    struct worker_event event;
    unsigned char *message = NULL;
    size_t next = 0;
    int status = AUDIT_OK;
    if (!stats)
        stats = &local;
    while (next < task_count) {
        int fds[2];
        if (stop_signal_received)
            return WORKER_STOPPED;
        if (pipe2(fds, O_CLOEXEC) != 0)
            return audit_fail(err, AUDIT_EDEVICE, "cannot create a worker pipe: %s",
                              strerror(errno));
        fflush(NULL);
        const pid_t parent = getpid();
        const pid_t pid = fork();
        if (pid < 0) {
            int saved = errno;
            close(fds[0]);
            close(fds[1]);
            return audit_fail(err, AUDIT_EDEVICE, "cannot start a worker process: %s",
                              strerror(saved));
        }
        if (pid == 0)
            child_run(fds[0], fds[1], parent, child_main, next, user, kept != NULL);
        close(fds[1]);
        int fd = fds[0];
        stats->processes++;
        size_t received = 0;
        bool charged = false; /* the current task got a HANG or CRASH outcome */
        bool reaped = false;
        for (;;) {
            const int64_t deadline = timeout_ms ? now_ms() + timeout_ms : 0;
            uint32_t length = 0;
            size_t got = 0;
            enum read_result result = read_full(fd, &length, sizeof(length), deadline, &got);
            if (result == READ_COMPLETE && length > WORKER_MAX_MESSAGE_BYTES) {
                event_reset(&event, WORKER_CRASH);
                snprintf(event.description, sizeof(event.description),
                         "sent a malformed message (length %u)", length);
                reap_child(pid, 0, true);
                reaped = charged = true;
                break;
            }
            if (result == READ_COMPLETE) {
                message = malloc((size_t)length + 1);
                if (!message) {
                    reap_child(pid, 0, true);
                    close(fd);
                    return audit_fail(err, AUDIT_ENOMEM, "out of memory for a worker message "
                                                         "of %u bytes", length);
                }
                result = read_full(fd, message, length, deadline, &got);
                if (result == READ_EOF)
                    got += sizeof(length);
            }
            if (result == READ_COMPLETE) {
                message[length] = '\0';
                event_reset(&event, WORKER_MESSAGE);
                event.data = message;
                event.bytes = length;
                int verdict = on_result(user, next, &event);
                free(message);
                message = NULL;
                next++;
                received++;
                if (verdict < 0) {
                    reap_child(pid, 0, true);
                    close(fd);
                    return verdict;
                }
                if (next == task_count) {
                    /* Done: let it exit (closing the pipe first: a child that still writes gets
                     * EPIPE); a child stuck in teardown is killed. A keeper stays. */
                    close(fd);
                    fd = -1;
                    if (kept)
                        *kept = pid;
                    else
                        reap_child(pid, WORKER_EXIT_GRACE_MS, false);
                    reaped = true;
                    break;
                }
                continue;
            }
            free(message);
            message = NULL;
            if (result == READ_STOPPED) {
                reap_child(pid, 0, true);
                close(fd);
                return WORKER_STOPPED;
            }
            if (result == READ_TIMEOUT) {
                event_reset(&event, WORKER_HANG);
                snprintf(event.description, sizeof(event.description),
                         "no result within the %u.%03u s timeout: killed", timeout_ms / 1000,
                         timeout_ms % 1000);
                reap_child(pid, 0, true);
                reaped = charged = true;
                stats->hangs++;
                break;
            }
            /* End of file (or a broken pipe): the child is gone or going. */
            int exit_status = reap_child(pid, WORKER_EXIT_GRACE_MS, false);
            reaped = true;
            event_reset(&event, WORKER_CRASH);
            if (result == READ_EOF && got > 0) {
                describe_exit(exit_status, &event, "died mid-message: ");
                charged = true;
            } else if (describe_exit(exit_status, &event, "")) {
                charged = true;
            } else if (received == 0) {
                snprintf(event.description, sizeof(event.description),
                         "exited without sending a result");
                charged = true;
            }
            /* else: it exited cleanly after some results and asks for a fresh process. */
            break;
        }
        if (fd >= 0)
            close(fd);
        if (!reaped)
            reap_child(pid, 0, true);
        if (charged && next < task_count) {
            if (event.outcome == WORKER_CRASH)
                stats->crashes++;
            status = on_result(user, next, &event);
            next++;
            if (status < 0)
                return status;
        }
    }
    return AUDIT_OK;
}

int worker_run_tasks(size_t task_count, worker_child_fn child_main, worker_result_fn on_result,
                     void *user, unsigned timeout_ms, struct worker_stats *stats,
                     struct audit_error *err)
{
    return run_tasks(task_count, child_main, on_result, user, timeout_ms, stats, NULL, err);
}

/* ---- keepers -------------------------------------------------------------------------------- */

int worker_keeper_start(struct worker_keeper *keeper, worker_child_fn child_main,
                        worker_result_fn on_result, void *user, unsigned timeout_ms,
                        struct audit_error *err)
{
    keeper->pid = 0;
    int status = run_tasks(1, child_main, on_result, user, timeout_ms, NULL, &keeper->pid, err);
    if (status != AUDIT_OK)
        worker_keeper_stop(keeper);
    return status;
}

void worker_keeper_stop(struct worker_keeper *keeper)
{
    if (keeper->pid <= 0)
        return;
    /* SIGKILL at once: a keeper only holds what process exit releases. */
    reap_child(keeper->pid, 0, true);
    keeper->pid = 0;
}
