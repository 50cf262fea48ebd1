/* Children that stream messages to a busy parent (src/replay/worker_stream.h). */
#include "worker_stream.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "worker_internal.h"

struct worker_stream_message {
    struct worker_stream_message *next;
    size_t bytes;
    char data[];
};

/* The pipe's capacity asked for: a child may run about this far ahead of a parent that is busy
 * elsewhere before its worker_send blocks (Linux's default is 64 KiB; 1 MiB is the default most
 * an unprivileged process may ask for). */
#define STREAM_PIPE_BYTES (1 << 20)
/* Room made in the read buffer before each read. */
#define STREAM_READ_CHUNK (64u << 10)

static void stream_describe(struct worker_stream *stream, const char *format, ...)
    __attribute__((format(printf, 2, 3)));
static void stream_describe(struct worker_stream *stream, const char *format, ...)
{
    va_list args;
    va_start(args, format);
    vsnprintf(stream->description, sizeof(stream->description), format, args);
    va_end(args);
}

/* Closes the pipe and reaps the child (killed first when kill_first); the stream has ended.
 * why, when given, is how it ended (failed); otherwise the child's exit says, after prefix. */
static void stream_end(struct worker_stream *stream, bool kill_first, const char *prefix,
                       const char *why)
{
    int status = 0;
    if (stream->fd >= 0) {
        worker_fd_unhide(stream->fd);
        close(stream->fd);
        stream->fd = -1;
    }
    if (stream->pid > 0)
        status = worker_reap_child(stream->pid, kill_first ? 0 : WORKER_EXIT_GRACE_MS,
                                   kill_first);
    stream->pid = 0;
    stream->ended = true;
    if (why) {
        stream->failed = true;
        stream_describe(stream, "%s", why);
        return;
    }
    struct worker_event event;
    memset(&event, 0, sizeof(event));
    if (worker_describe_exit(status, &event, prefix) || prefix[0])
        stream->failed = true;
    stream_describe(stream, "%s", event.description);
}

int worker_stream_start(struct worker_stream *stream, worker_child_fn child_main, size_t index,
                        void *user, struct audit_error *err)
{
    int fds[2];
    memset(stream, 0, sizeof(*stream));
    stream->fd = -1;
    if (pipe2(fds, O_CLOEXEC) != 0) {
        stream->ended = stream->failed = true;
        stream_describe(stream, "could not be started: no pipe: %s", strerror(errno));
        return audit_fail(err, AUDIT_EDEVICE, "cannot create a stream pipe: %s", strerror(errno));
    }
    fflush(NULL);
    const pid_t parent = getpid();
    const pid_t pid = fork();
    if (pid < 0) {
        const int saved = errno;
        close(fds[0]);
        close(fds[1]);
        stream->ended = stream->failed = true;
        stream_describe(stream, "could not be started: %s", strerror(saved));
        return audit_fail(err, AUDIT_EDEVICE, "cannot start a process: %s", strerror(saved));
    }
    if (pid == 0) {
        close(fds[0]);
        /* The other streams' and sessions' ends are not this child's; its own write end is not
         * for the processes it forks. */
        worker_child_close_hidden();
        worker_fd_hide(fds[1]);
        worker_child_die_with_parent(parent);
        signal(SIGPIPE, SIG_DFL);
        struct worker_channel channel = { fds[1] };
        int status = child_main(&channel, index, user);
        if (status < 0)
            status = -status;
        /* _exit: the parent's buffered stdio, copied by fork, must not be flushed a second time. */
        _exit(status == 0 ? 0 : status < 126 ? status : 125);
    }
    close(fds[1]);
#ifdef F_SETPIPE_SZ
    (void)fcntl(fds[0], F_SETPIPE_SZ, STREAM_PIPE_BYTES);
#endif
    fcntl(fds[0], F_SETFL, fcntl(fds[0], F_GETFL) | O_NONBLOCK);
    worker_fd_hide(fds[0]);
    stream->pid = pid;
    stream->fd = fds[0];
    return AUDIT_OK;
}

/* Moves the whole messages at the front of the pending bytes to the queue. 0, or AUDIT_ENOMEM,
 * or AUDIT_EDATA for a length over the limit (*length says which). */
static int queue_messages(struct worker_stream *stream, uint32_t *length)
{
    size_t offset = 0;
    int status = AUDIT_OK;
    while (stream->pending_bytes - offset >= sizeof(*length)) {
        memcpy(length, stream->pending + offset, sizeof(*length));
        if (*length > WORKER_MAX_MESSAGE_BYTES) {
            status = AUDIT_EDATA;
            break;
        }
        if (stream->pending_bytes - offset - sizeof(*length) < *length)
            break;
        struct worker_stream_message *message = malloc(sizeof(*message) + *length + 1);
        if (!message) {
            status = AUDIT_ENOMEM;
            break;
        }
        message->next = NULL;
        message->bytes = *length;
        memcpy(message->data, stream->pending + offset + sizeof(*length), *length);
        message->data[*length] = '\0';
        if (stream->last)
            stream->last->next = message;
        else
            stream->first = message;
        stream->last = message;
        offset += sizeof(*length) + *length;
    }
    memmove(stream->pending, stream->pending + offset, stream->pending_bytes - offset);
    stream->pending_bytes -= offset;
    return status;
}

/* Makes room for one more read; false when out of memory. */
static bool make_room(struct worker_stream *stream)
{
    if (stream->pending_capacity - stream->pending_bytes >= STREAM_READ_CHUNK)
        return true;
    size_t capacity = stream->pending_capacity ? 2 * stream->pending_capacity
                                               : 4 * (size_t)STREAM_READ_CHUNK;
    unsigned char *grown = realloc(stream->pending, capacity);
    if (!grown)
        return false;
    stream->pending = grown;
    stream->pending_capacity = capacity;
    return true;
}

/* Reads everything the stream's pipe holds now, queueing whole messages; ends the stream at end
 * of file. 0 or AUDIT_ENOMEM. */
static int read_available(struct worker_stream *stream)
{
    for (;;) {
        uint32_t length = 0;
        if (!make_room(stream)) {
            stream_end(stream, true, "", "killed: out of memory for its messages");
            return AUDIT_ENOMEM;
        }
        ssize_t got = read(stream->fd, stream->pending + stream->pending_bytes,
                           stream->pending_capacity - stream->pending_bytes);
        if (got < 0 && errno == EINTR)
            continue;
        if (got < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
            return AUDIT_OK;
        if (got > 0)
            stream->pending_bytes += (size_t)got;
        const int status = queue_messages(stream, &length);
        if (status == AUDIT_ENOMEM) {
            stream_end(stream, true, "", "killed: out of memory for its messages");
            return AUDIT_ENOMEM;
        }
        if (status == AUDIT_EDATA) {
            char why[96];
            snprintf(why, sizeof(why), "sent a malformed message (length %u): killed", length);
            stream_end(stream, true, "", why);
            return AUDIT_OK;
        }
        if (got <= 0) {
            /* End of file (or a broken pipe): the child is gone or going. */
            stream_end(stream, false, stream->pending_bytes ? "died mid-message: " : "", NULL);
            return AUDIT_OK;
        }
    }
}

int worker_streams_read(struct worker_stream *streams, size_t count, int wait_ms)
{
    struct pollfd *pending = calloc(count ? count : 1, sizeof(*pending));
    size_t *which = calloc(count ? count : 1, sizeof(*which));
    size_t live = 0;
    int status = AUDIT_OK;
    if (!pending || !which) {
        status = AUDIT_ENOMEM;
        goto done;
    }
    for (size_t i = 0; i < count; i++) {
        if (streams[i].fd < 0)
            continue;
        pending[live] = (struct pollfd){ .fd = streams[i].fd, .events = POLLIN };
        which[live++] = i;
    }
    if (live == 0 || poll(pending, live, wait_ms) <= 0)
        goto done;
    for (size_t j = 0; j < live; j++) {
        if (!pending[j].revents)
            continue;
        const int read_status = read_available(&streams[which[j]]);
        if (read_status < 0 && status == AUDIT_OK)
            status = read_status;
    }
done:
    free(pending);
    free(which);
    return status;
}

static bool any_running(const struct worker_stream *streams, size_t count)
{
    for (size_t i = 0; i < count; i++)
        if (!streams[i].ended)
            return true;
    return false;
}

int worker_streams_wait(struct worker_stream *streams, size_t count)
{
    int status = AUDIT_OK;
    int64_t kill_at = 0; /* 0: the stop is not passed on yet */
    while (any_running(streams, count)) {
        const int sig = worker_stop_signal();
        if (sig && !kill_at) {
            for (size_t i = 0; i < count; i++)
                if (!streams[i].ended && streams[i].pid > 0)
                    kill(streams[i].pid, sig);
            kill_at = worker_now_ms() + WORKER_STREAM_STOP_GRACE_MS;
        }
        if (kill_at && worker_now_ms() >= kill_at) {
            worker_streams_kill(streams, count);
            break;
        }
        const int read_status = worker_streams_read(streams, count, WORKER_POLL_SLICE_MS);
        if (read_status < 0 && status == AUDIT_OK)
            status = read_status;
    }
    return status;
}

void worker_streams_kill(struct worker_stream *streams, size_t count)
{
    for (size_t i = 0; i < count; i++) {
        struct worker_stream *stream = &streams[i];
        if (stream->ended)
            continue;
        /* What it sent before is still taken. */
        if (stream->fd >= 0)
            (void)read_available(stream);
        if (!stream->ended)
            stream_end(stream, true, "", "killed: the run stopped");
    }
}

char *worker_stream_take(struct worker_stream *stream, size_t *bytes)
{
    struct worker_stream_message *message = stream->first;
    if (!message)
        return NULL;
    stream->first = message->next;
    if (!stream->first)
        stream->last = NULL;
    *bytes = message->bytes;
    /* The message struct's data moved to the front: one allocation for the caller to free. */
    memmove(message, message->data, message->bytes + 1);
    return (char *)message;
}

void worker_stream_release(struct worker_stream *stream)
{
    if (!stream->ended && (stream->pid > 0 || stream->fd >= 0))
        stream_end(stream, true, "", "killed: the run stopped");
    struct worker_stream_message *message = stream->first;
    while (message) {
        struct worker_stream_message *next = message->next;
        free(message);
        message = next;
    }
    free(stream->pending);
    stream->first = stream->last = NULL;
    stream->pending = NULL;
    stream->pending_bytes = stream->pending_capacity = 0;
}
