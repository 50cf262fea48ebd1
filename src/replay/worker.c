/* Worker processes, their pipes and the watchdog (src/replay/worker.h). */
#include "worker.h"

#include "worker_internal.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
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

/* A session child's job, as it travels: this header, then job_bytes bytes; or, for a job in a
 * file (in_file 1), the header alone with the file's descriptor attached to it (SCM_RIGHTS). */
struct job_header {
    uint64_t first_task;
    uint64_t job_bytes;
    uint64_t in_file;
};

/* Room for the one descriptor a job header carries. */
union descriptor_control {
    struct cmsghdr align;
    char bytes[CMSG_SPACE(sizeof(int))];
};

/* Reads exactly bytes from a session child's job socket; false at end of file or on an error. */
static bool read_job_bytes(int fd, void *buffer, size_t bytes)
{
    unsigned char *cursor = buffer;
    while (bytes > 0) {
        ssize_t count = read(fd, cursor, bytes);
        if (count < 0 && errno == EINTR)
            continue;
        if (count <= 0)
            return false;
        cursor += count;
        bytes -= (size_t)count;
    }
    return true;
}

/* Reads the next job's header and the descriptor that came with it (*descriptor, -1: none);
 * false at end of file or on an error. */
static bool read_job_header(int fd, struct job_header *header, int *descriptor)
{
    unsigned char *cursor = (unsigned char *)header;
    size_t left = sizeof(*header);
    *descriptor = -1;
    while (left > 0) {
        union descriptor_control control;
        struct iovec part = { cursor, left };
        struct msghdr message = { .msg_iov = &part, .msg_iovlen = 1,
                                  .msg_control = control.bytes,
                                  .msg_controllen = sizeof(control.bytes) };
        ssize_t count = recvmsg(fd, &message, MSG_CMSG_CLOEXEC);
        if (count < 0 && errno == EINTR)
            continue;
        if (count <= 0)
            break;
        for (struct cmsghdr *item = CMSG_FIRSTHDR(&message); item;
             item = CMSG_NXTHDR(&message, item)) {
            if (item->cmsg_level != SOL_SOCKET || item->cmsg_type != SCM_RIGHTS ||
                item->cmsg_len < CMSG_LEN(sizeof(int)))
                continue;
            int received;
            memcpy(&received, CMSG_DATA(item), sizeof(received));
            if (*descriptor >= 0)
                close(received);
            else
                *descriptor = received;
        }
        cursor += count;
        left -= (size_t)count;
    }
    if (left == 0)
        return true;
    if (*descriptor >= 0)
        close(*descriptor);
    *descriptor = -1;
    return false;
}

/* The bytes of the job whose header was read: a copy read from the socket, or the job file
 * mapped privately (the child's writes stay its own). NULL when out of memory, or when the
 * socket ended or the file cannot be mapped. */
static void *receive_job(int fd, const struct job_header *header, int descriptor)
{
    const size_t bytes = header->job_bytes ? header->job_bytes : 1;
    if (header->in_file) {
        void *job = descriptor >= 0 ? mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE,
                                           descriptor, 0)
                                    : MAP_FAILED;
        return job == MAP_FAILED ? NULL : job;
    }
    void *job = malloc(bytes);
    if (job && !read_job_bytes(fd, job, header->job_bytes)) {
        free(job);
        return NULL;
    }
    return job;
}

/* A session's child: its start-up, then job after job until the parent closes the socket (exit
 * 0), a job asks for a fresh process (WORKER_JOB_LEAVE: exit 0) or fails (its status). A job
 * that cannot be received (no memory, a file that cannot be mapped) exits 3: a crash of its
 * task. */
static int session_child_main(struct worker_channel *channel, struct worker_session *session,
                              int job_fd)
{
    if (session->child_start)
        session->child_start(session->user);
    for (;;) {
        struct job_header header;
        int descriptor;
        if (!read_job_header(job_fd, &header, &descriptor))
            return 0;
        void *job = receive_job(job_fd, &header, descriptor);
        if (descriptor >= 0)
            close(descriptor);
        if (!job)
            return header.in_file ? 3 : 0;
        int status = session->job_main(channel, header.first_task, job, header.job_bytes,
                                       session->user);
        if (header.in_file)
            munmap(job, header.job_bytes ? header.job_bytes : 1);
        else
            free(job);
        if (status == WORKER_JOB_LEAVE)
            return 0;
        if (status != 0)
            return status;
    }
}

void worker_child_die_with_parent(pid_t parent)
{
#ifdef __linux__
    /* Die with the parent, whatever kills it; the check closes the race with a parent that died
     * before the prctl. */
    prctl(PR_SET_PDEATHSIG, SIGKILL);
#endif
    if (getppid() != parent)
        _exit(127);
}

/* The child of run_batch: child_main for one-shot and kept children (kept: once child_main has
 * sent its message and returned 0, the child stays, idle, until the parent kills it or dies),
 * or, with job_fd >= 0, the session user is the struct worker_session whose jobs it serves. */
static void child_run(int read_fd, int write_fd, pid_t parent, worker_child_fn child_main,
                      size_t first_task, void *user, int job_fd, bool kept)
{
    close(read_fd);
    worker_child_die_with_parent(parent);
    /* Ctrl-C goes to the whole process group: the parent stops the child. SIGTERM sent to the
     * child alone kills it as usual. */
    signal(SIGINT, SIG_IGN);
    signal(SIGTERM, SIG_DFL);
    signal(SIGPIPE, SIG_DFL);
    struct worker_channel channel = { write_fd };
    int status = job_fd >= 0 ? session_child_main(&channel, user, job_fd)
                             : child_main(&channel, first_task, user);
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

int64_t worker_now_ms(void)
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
            int64_t left = deadline - worker_now_ms();
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
int worker_reap_child(pid_t pid, int grace_ms, bool kill_first)
{
    int status = 0;
    if (kill_first)
        kill(pid, SIGKILL);
    const int64_t deadline = worker_now_ms() + grace_ms;
    for (;;) {
        pid_t done = waitpid(pid, &status, kill_first ? 0 : WNOHANG);
        if (done == pid)
            return status;
        if (done < 0 && errno != EINTR)
            return 0; /* already reaped: nothing else can be learnt */
        if (done == 0 && worker_now_ms() >= deadline) {
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
bool worker_describe_exit(int status, struct worker_event *event, const char *prefix)
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

/* What one call of the engine below runs: task_count tasks, in one-shot children (child_main),
 * in a kept child (kept: worker_keeper_start), or in a session's child (session, with the job
 * each child is given). */
struct task_batch {
    size_t task_count;
    worker_child_fn child_main;
    pid_t *kept;
    struct worker_session *session;
    const void *job;
    size_t job_bytes;
    bool job_in_file;  /* job_file holds the job (job is NULL) */
    int job_file;
    worker_result_fn on_result;
    void *user;
    unsigned timeout_ms;
    struct worker_stats *stats;
};

/* worker_internal.h: the descriptors no later child may hold. A stream per --devices entry and
 * a session's two: a few dozen at most. */
#define WORKER_MAX_HIDDEN_FDS 256
static int hidden_fds[WORKER_MAX_HIDDEN_FDS];
static size_t hidden_fd_count;

void worker_fd_hide(int fd)
{
    if (fd >= 0 && hidden_fd_count < WORKER_MAX_HIDDEN_FDS)
        hidden_fds[hidden_fd_count++] = fd;
}

void worker_fd_unhide(int fd)
{
    for (size_t i = 0; i < hidden_fd_count; i++)
        if (hidden_fds[i] == fd) {
            hidden_fds[i] = hidden_fds[--hidden_fd_count];
            return;
        }
}

void worker_child_close_hidden(void)
{
    for (size_t i = 0; i < hidden_fd_count; i++)
        close(hidden_fds[i]);
    hidden_fd_count = 0;
}

static void session_forget(struct worker_session *session)
{
    worker_fd_unhide(session->result_fd);
    worker_fd_unhide(session->job_fd);
    if (session->result_fd >= 0)
        close(session->result_fd);
    if (session->job_fd >= 0)
        close(session->job_fd);
    session->result_fd = session->job_fd = -1;
    session->pid = 0;
}

/* Forks the child of a batch: the pipe for its messages, and for a session the socket its jobs
 * come through. Returns the pid (> 0) or a negative code with err filled. */
static pid_t start_child(const struct task_batch *batch, size_t first, int *result_fd,
                         struct audit_error *err)
{
    int fds[2], job_fds[2] = { -1, -1 };
    if (pipe2(fds, O_CLOEXEC) != 0)
        return audit_fail(err, AUDIT_EDEVICE, "cannot create a worker pipe: %s", strerror(errno));
    /* A socket, not a pipe: send(MSG_NOSIGNAL) to a child that is gone fails with EPIPE instead
     * of raising SIGPIPE in the parent. */
    if (batch->session && socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, job_fds) != 0) {
        int saved = errno;
        close(fds[0]);
        close(fds[1]);
        return audit_fail(err, AUDIT_EDEVICE, "cannot create a worker socket: %s",
                          strerror(saved));
    }
    fflush(NULL);
    const pid_t parent = getpid();
    const pid_t pid = fork();
    if (pid < 0) {
        int saved = errno;
        close(fds[0]);
        close(fds[1]);
        if (job_fds[0] >= 0) {
            close(job_fds[0]);
            close(job_fds[1]);
        }
        return audit_fail(err, AUDIT_EDEVICE, "cannot start a worker process: %s",
                          strerror(saved));
    }
    if (pid == 0) {
        worker_child_close_hidden();
        if (batch->session) {
            close(job_fds[0]);
            child_run(fds[0], fds[1], parent, NULL, first, batch->session, job_fds[1], false);
        }
        child_run(fds[0], fds[1], parent, batch->child_main, first, batch->user, -1,
                  batch->kept != NULL);
    }
    close(fds[1]);
    *result_fd = fds[0];
    if (batch->session) {
        close(job_fds[1]);
        fcntl(job_fds[0], F_SETFL, fcntl(job_fds[0], F_GETFL) | O_NONBLOCK);
        batch->session->pid = pid;
        batch->session->result_fd = fds[0];
        batch->session->job_fd = job_fds[0];
        worker_fd_hide(fds[0]);
        worker_fd_hide(job_fds[0]);
    }
    batch->stats->processes++;
    return pid;
}

enum delivery {
    DELIVERED,
    DELIVERY_GONE,    /* the child closed its end: it is gone or going */
    DELIVERY_TIMEOUT, /* it took nothing before the deadline (a child stuck in its start-up) */
    DELIVERY_STOPPED,
};

/* Waits until the session's non-blocking socket takes bytes again, polling like read_full: the
 * watchdog and the stop flag also cover a child that does not read. DELIVERED: try again. */
static enum delivery wait_writable(int fd, int64_t deadline)
{
    if (stop_signal_received)
        return DELIVERY_STOPPED;
    int slice = WORKER_POLL_SLICE_MS;
    if (deadline) {
        const int64_t left = deadline - worker_now_ms();
        if (left <= 0)
            return DELIVERY_TIMEOUT;
        if (left < slice)
            slice = (int)left;
    }
    struct pollfd pending = { .fd = fd, .events = POLLOUT };
    if (poll(&pending, 1, slice) < 0 && errno != EINTR)
        return DELIVERY_GONE;
    return DELIVERED;
}

/* Sends bytes on the session's socket, with descriptor (>= 0) attached to the first of them. */
static enum delivery send_full(int fd, const void *data, size_t bytes, int descriptor,
                               int64_t deadline)
{
    const unsigned char *cursor = data;
    while (bytes > 0) {
        union descriptor_control control;
        struct iovec part = { (void *)cursor, bytes };
        struct msghdr message = { .msg_iov = &part, .msg_iovlen = 1 };
        if (descriptor >= 0) {
            memset(&control, 0, sizeof(control));
            message.msg_control = control.bytes;
            message.msg_controllen = sizeof(control.bytes);
            struct cmsghdr *item = CMSG_FIRSTHDR(&message);
            item->cmsg_level = SOL_SOCKET;
            item->cmsg_type = SCM_RIGHTS;
            item->cmsg_len = CMSG_LEN(sizeof(int));
            memcpy(CMSG_DATA(item), &descriptor, sizeof(descriptor));
        }
        ssize_t sent = sendmsg(fd, &message, MSG_NOSIGNAL);
        if (sent > 0) {
            cursor += sent;
            bytes -= (size_t)sent;
            descriptor = -1; /* it went with the first byte */
            continue;
        }
        if (sent < 0 && errno == EINTR)
            continue;
        if (sent < 0 && errno != EAGAIN && errno != EWOULDBLOCK)
            return DELIVERY_GONE;
        const enum delivery waited = wait_writable(fd, deadline);
        if (waited != DELIVERED)
            return waited;
    }
    return DELIVERED;
}

/* Gives a session's child its job, tasks from first on, within the task timeout: the header and
 * the bytes, or the header and the job file's descriptor. */
static enum delivery deliver_job(const struct task_batch *batch, size_t first)
{
    const struct job_header header = { first, batch->job_bytes, batch->job_in_file };
    const int64_t deadline = batch->timeout_ms ? worker_now_ms() + batch->timeout_ms : 0;
    const int socket_fd = batch->session->job_fd;
    enum delivery delivery = send_full(socket_fd, &header, sizeof(header),
                                       batch->job_in_file ? batch->job_file : -1, deadline);
    if (delivery == DELIVERED && !batch->job_in_file)
        delivery = send_full(socket_fd, batch->job, batch->job_bytes, -1, deadline);
    return delivery;
}

/* A child that did nothing within the timeout (what: "no result", "took no job"): killed and
 * reaped, and the event that says so. */
static void kill_hung_child(pid_t pid, const char *what, unsigned timeout_ms,
                            struct worker_event *event, struct worker_stats *stats)
{
    event_reset(event, WORKER_HANG);
    snprintf(event->description, sizeof(event->description),
             "%s within the %u.%03u s timeout: killed", what, timeout_ms / 1000,
             timeout_ms % 1000);
    worker_reap_child(pid, 0, true);
    stats->hangs++;
}

/* Kills and reaps a child the parent stops reading, and closes its pipe (a session's: forgets
 * it). */
static void abandon_child(pid_t pid, int fd, struct worker_session *session)
{
    worker_reap_child(pid, 0, true);
    if (session)
        session_forget(session);
    else
        close(fd);
}

/* The engine of worker_run_tasks, worker_keeper_start and worker_session_run_job. */
/* After a child's last message or its end: one not kept is reaped (unless it was) and its pipe
 * closed (a session forgets it); a keeper's pipe is closed, for it sends nothing more. */
static void release_child(const struct task_batch *batch, pid_t pid, int fd, bool kept,
                          bool reaped)
{
    if (!kept) {
        if (!reaped)
            worker_reap_child(pid, 0, true);
        if (batch->session)
            session_forget(batch->session);
        else if (fd >= 0)
            close(fd);
    } else if (batch->kept) {
        close(fd);
    }
}

static int run_batch(const struct task_batch *batch, struct audit_error *err)
{
    struct worker_event event;
    struct worker_session *session = batch->session;
    unsigned char *message = NULL;
    const size_t task_count = batch->task_count;
    const unsigned timeout_ms = batch->timeout_ms;
    size_t next = 0;
    int status = AUDIT_OK;
    while (next < task_count) {
        if (stop_signal_received) {
            /* A session's child may be in the middle of a kernel: killed, not waited for. */
            if (session && session->pid > 0)
                abandon_child(session->pid, session->result_fd, session);
            return WORKER_STOPPED;
        }
        int fd = -1;
        pid_t pid;
        /* A session's child from an earlier job, or a fresh one. */
        const bool reused = session && session->pid > 0;
        if (reused) {
            pid = session->pid;
            fd = session->result_fd;
        } else {
            pid = start_child(batch, next, &fd, err);
            if (pid < 0)
                return (int)pid;
        }
        const enum delivery delivery = session ? deliver_job(batch, next) : DELIVERED;
        if (delivery == DELIVERY_GONE && reused) {
            /* It left after its last job (a poisoned context): a fresh one takes this job. A
             * fresh child that cannot take it is read from below, and charged with the task. */
            worker_reap_child(pid, 0, true);
            session_forget(session);
            continue;
        }
        if (delivery == DELIVERY_STOPPED) {
            worker_reap_child(pid, 0, true);
            session_forget(session);
            return WORKER_STOPPED;
        }
        size_t received = 0;
        bool charged = false; /* the current task got a HANG or CRASH outcome */
        bool reaped = false;
        bool kept = false;    /* the child stays: kept, or a session's */
        for (;;) {
            if (delivery == DELIVERY_TIMEOUT) {
                kill_hung_child(pid, "took no job", timeout_ms, &event, batch->stats);
                reaped = charged = true;
                break;
            }
            const int64_t deadline = timeout_ms ? worker_now_ms() + timeout_ms : 0;
            uint32_t length = 0;
            size_t got = 0;
            enum read_result result = read_full(fd, &length, sizeof(length), deadline, &got);
            if (result == READ_COMPLETE && length > WORKER_MAX_MESSAGE_BYTES) {
                event_reset(&event, WORKER_CRASH);
                snprintf(event.description, sizeof(event.description),
                         "sent a malformed message (length %u)", length);
                worker_reap_child(pid, 0, true);
                reaped = charged = true;
                break;
            }
            if (result == READ_COMPLETE) {
                message = malloc((size_t)length + 1);
                if (!message) {
                    abandon_child(pid, fd, session);
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
                int verdict = batch->on_result(batch->user, next, &event);
                free(message);
                message = NULL;
                next++;
                received++;
                if (verdict < 0) {
                    abandon_child(pid, fd, session);
                    return verdict;
                }
                if (next == task_count) {
                    if (batch->kept) {
                        *batch->kept = pid;
                        kept = true;
                    } else if (session) {
                        kept = true; /* waits for the next job */
                    } else {
                        /* Done: let it exit (closing the pipe first: a child that still
                         * writes gets EPIPE); a child stuck in teardown is killed. */
                        close(fd);
                        fd = -1;
                        worker_reap_child(pid, WORKER_EXIT_GRACE_MS, false);
                    }
                    reaped = true;
                    break;
                }
                continue;
            }
            free(message);
            message = NULL;
            if (result == READ_STOPPED) {
                abandon_child(pid, fd, session);
                return WORKER_STOPPED;
            }
            if (result == READ_TIMEOUT) {
                kill_hung_child(pid, "no result", timeout_ms, &event, batch->stats);
                reaped = charged = true;
                break;
            }
            /* End of file (or a broken pipe): the child is gone or going. */
            int exit_status = worker_reap_child(pid, WORKER_EXIT_GRACE_MS, false);
            reaped = true;
            event_reset(&event, WORKER_CRASH);
            if (result == READ_EOF && got > 0) {
                worker_describe_exit(exit_status, &event, "died mid-message: ");
                charged = true;
            } else if (worker_describe_exit(exit_status, &event, "")) {
                charged = true;
            } else if (received == 0 && !reused) {
                snprintf(event.description, sizeof(event.description),
                         "exited without sending a result");
                charged = true;
            }
            /* else: it exited cleanly after some results (or, a session's child, after its last
             * job) and asks for a fresh process for the rest. */
            break;
        }
        release_child(batch, pid, fd, kept, reaped);
        if (charged && next < task_count) {
            if (event.outcome == WORKER_CRASH)
                batch->stats->crashes++;
            status = batch->on_result(batch->user, next, &event);
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
    struct worker_stats local = { 0 };
    const struct task_batch batch = {
        .task_count = task_count, .child_main = child_main, .on_result = on_result,
        .user = user, .timeout_ms = timeout_ms, .stats = stats ? stats : &local,
    };
    return run_batch(&batch, err);
}

/* ---- keepers -------------------------------------------------------------------------------- */

int worker_keeper_start(struct worker_keeper *keeper, worker_child_fn child_main,
                        worker_result_fn on_result, void *user, unsigned timeout_ms,
                        struct audit_error *err)
{
    struct worker_stats local = { 0 };
    keeper->pid = 0;
    const struct task_batch batch = {
        .task_count = 1, .child_main = child_main, .kept = &keeper->pid, .on_result = on_result,
        .user = user, .timeout_ms = timeout_ms, .stats = &local,
    };
    int status = run_batch(&batch, err);
    if (status != AUDIT_OK)
        worker_keeper_stop(keeper);
    return status;
}

void worker_keeper_stop(struct worker_keeper *keeper)
{
    if (keeper->pid <= 0)
        return;
    /* SIGKILL at once: a keeper only holds what process exit releases. */
    worker_reap_child(keeper->pid, 0, true);
    keeper->pid = 0;
}

/* ---- sessions ------------------------------------------------------------------------------- */

void worker_session_init(struct worker_session *session, worker_job_fn job_main,
                         worker_start_fn child_start, void *user)
{
    memset(session, 0, sizeof(*session));
    session->job_main = job_main;
    session->child_start = child_start;
    session->user = user;
    session->result_fd = session->job_fd = -1;
}

int worker_session_start(struct worker_session *session, struct audit_error *err)
{
    if (session->pid > 0)
        return AUDIT_OK;
    int fd = -1;
    const struct task_batch batch = { .session = session, .stats = &session->stats };
    const pid_t pid = start_child(&batch, 0, &fd, err);
    return pid < 0 ? (int)pid : AUDIT_OK;
}

int worker_session_run_job(struct worker_session *session, const void *job, size_t job_bytes,
                           size_t task_count, worker_result_fn on_result, void *user,
                           unsigned timeout_ms, struct audit_error *err)
{
    const struct task_batch batch = {
        .task_count = task_count, .session = session, .job = job, .job_bytes = job_bytes,
        .on_result = on_result, .user = user, .timeout_ms = timeout_ms, .stats = &session->stats,
    };
    return run_batch(&batch, err);
}

int worker_session_run_job_file(struct worker_session *session, int job_file, size_t job_bytes,
                                size_t task_count, worker_result_fn on_result, void *user,
                                unsigned timeout_ms, struct audit_error *err)
{
    const struct task_batch batch = {
        .task_count = task_count, .session = session, .job_bytes = job_bytes,
        .job_in_file = true, .job_file = job_file, .on_result = on_result, .user = user,
        .timeout_ms = timeout_ms, .stats = &session->stats,
    };
    return run_batch(&batch, err);
}

void worker_session_stop(struct worker_session *session)
{
    if (!session || session->pid <= 0)
        return;
    /* End of its jobs: the child leaves its loop and exits as a worker does (CUDA teardown
     * within the grace period, else killed). */
    worker_fd_unhide(session->job_fd);
    close(session->job_fd);
    session->job_fd = -1;
    worker_reap_child(session->pid, WORKER_EXIT_GRACE_MS, false);
    session_forget(session);
}
