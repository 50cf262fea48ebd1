/* Unit tests of src/replay/worker_stream.c with plain CPU children (no GPU): each stream's messages
 * come back in the order its child sent them while the streams' arrivals interleave (the last
 * stream started ends first), messages bigger than the pipe and a parent that reads late lose
 * nothing, a child that crashes, exits non-zero, dies mid-message or sends a malformed length
 * ends its stream failed with what it sent before kept, a stop raised in the parent alone is
 * passed on to the children (which end cleanly), killing keeps what was sent, and no child is
 * left behind. */
#include <errno.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "worker.h"
#include "worker_stream.h"

#define STREAMS 4
#define MESSAGES 20

static void sleep_ms(long ms)
{
    struct timespec pause = { ms / 1000, (ms % 1000) * 1000000L };
    nanosleep(&pause, NULL);
}

static void assert_no_children(void)
{
    errno = 0;
    assert_int_equal(waitpid(-1, NULL, WNOHANG), -1);
    assert_int_equal(errno, ECHILD);
}

static int send_text(struct worker_channel *channel, const char *format, ...)
    __attribute__((format(printf, 2, 3)));
static int send_text(struct worker_channel *channel, const char *format, ...)
{
    char text[128];
    va_list args;
    va_start(args, format);
    vsnprintf(text, sizeof(text), format, args);
    va_end(args);
    return worker_send(channel, text, strlen(text)) < 0 ? 2 : 0;
}

/* Stream `index` sends MESSAGES messages, slower the lower its index: the last started ends
 * first. */
static int staggered_child(struct worker_channel *channel, size_t index, void *user)
{
    (void)user;
    for (int m = 0; m < MESSAGES; m++) {
        sleep_ms((long)(STREAMS - index) * 3);
        if (send_text(channel, "stream %zu message %d", index, m))
            return 2;
    }
    return 0;
}

static void test_each_stream_in_its_order(void **unused)
{
    (void)unused;
    struct worker_stream streams[STREAMS];
    struct audit_error err = { 0 };
    worker_stop_clear();
    for (size_t i = 0; i < STREAMS; i++)
        assert_int_equal(worker_stream_start(&streams[i], staggered_child, i, NULL, &err), 0);
    /* Which stream ended when, as the parent sees it. */
    size_t ended_order[STREAMS], ended = 0;
    while (ended < STREAMS) {
        assert_int_equal(worker_streams_read(streams, STREAMS, 50), 0);
        for (size_t i = 0; i < STREAMS; i++) {
            bool seen = false;
            for (size_t e = 0; e < ended; e++)
                seen = seen || ended_order[e] == i;
            if (streams[i].ended && !seen)
                ended_order[ended++] = i;
        }
    }
    assert_int_equal(ended_order[0], STREAMS - 1);
    assert_int_equal(ended_order[STREAMS - 1], 0);
    for (size_t i = 0; i < STREAMS; i++) {
        assert_false(streams[i].failed);
        assert_string_equal(streams[i].description, "exited");
        for (int m = 0; m < MESSAGES; m++) {
            char want[64];
            size_t bytes = 0;
            char *text = worker_stream_take(&streams[i], &bytes);
            assert_non_null(text);
            snprintf(want, sizeof(want), "stream %zu message %d", i, m);
            assert_int_equal(bytes, strlen(want));
            assert_string_equal(text, want);
            free(text);
        }
        size_t bytes = 0;
        assert_null(worker_stream_take(&streams[i], &bytes));
        worker_stream_release(&streams[i]);
    }
    assert_no_children();
}

/* A 3 MiB message between many small ones, to a parent that reads only later. */
static int large_child(struct worker_channel *channel, size_t index, void *user)
{
    (void)index;
    (void)user;
    const size_t large = 3u << 20;
    char *text = malloc(large);
    if (!text)
        return 3;
    for (size_t i = 0; i < large; i++)
        text[i] = (char)('a' + i % 26);
    for (int m = 0; m < 1000; m++)
        if (send_text(channel, "small %d", m))
            return 2;
    int status = worker_send(channel, text, large) < 0 ? 2 : 0;
    free(text);
    return status ? status : send_text(channel, "last");
}

static void test_large_messages_to_a_late_reader(void **unused)
{
    (void)unused;
    struct worker_stream stream;
    struct audit_error err = { 0 };
    worker_stop_clear();
    assert_int_equal(worker_stream_start(&stream, large_child, 0, NULL, &err), 0);
    sleep_ms(200);
    assert_int_equal(worker_streams_wait(&stream, 1), 0);
    assert_false(stream.failed);
    size_t bytes = 0;
    for (int m = 0; m < 1000; m++) {
        char *text = worker_stream_take(&stream, &bytes);
        char want[32];
        snprintf(want, sizeof(want), "small %d", m);
        assert_non_null(text);
        assert_string_equal(text, want);
        free(text);
    }
    char *text = worker_stream_take(&stream, &bytes);
    assert_non_null(text);
    assert_int_equal(bytes, 3u << 20);
    for (size_t i = 0; i < bytes; i++)
        if (text[i] != (char)('a' + i % 26))
            fail_msg("byte %zu of the large message differs", i);
    free(text);
    text = worker_stream_take(&stream, &bytes);
    assert_string_equal(text, "last");
    free(text);
    worker_stream_release(&stream);
    assert_no_children();
}

enum ending { END_SEGFAULT, END_STATUS_3, END_MID_MESSAGE, END_MALFORMED };

/* Two messages, then the ending of stream `index`. */
static int failing_child(struct worker_channel *channel, size_t index, void *user)
{
    (void)user;
    if (send_text(channel, "one") || send_text(channel, "two"))
        return 2;
    switch ((enum ending)index) {
    case END_SEGFAULT:
        signal(SIGSEGV, SIG_DFL);
        raise(SIGSEGV);
        return 9;
    case END_STATUS_3: return 3;
    case END_MID_MESSAGE: {
        const uint32_t length = 100;
        if (write(channel->fd, &length, sizeof(length)) < 0 || write(channel->fd, "half", 4) < 0)
            return 2;
        return 0;
    }
    case END_MALFORMED: {
        const uint32_t length = WORKER_MAX_MESSAGE_BYTES + 1;
        if (write(channel->fd, &length, sizeof(length)) < 0)
            return 2;
        for (;;)
            pause();
    }
    }
    return 0;
}

static void test_failures_keep_what_came_before(void **unused)
{
    (void)unused;
    static const char *const described[] = {
        [END_SEGFAULT] = "killed by signal SIGSEGV",
        [END_STATUS_3] = "exited with status 3",
        [END_MID_MESSAGE] = "died mid-message: exited",
        [END_MALFORMED] = "sent a malformed message",
    };
    struct worker_stream streams[4];
    struct audit_error err = { 0 };
    worker_stop_clear();
    for (size_t i = 0; i < 4; i++)
        assert_int_equal(worker_stream_start(&streams[i], failing_child, i, NULL, &err), 0);
    assert_int_equal(worker_streams_wait(streams, 4), 0);
    for (size_t i = 0; i < 4; i++) {
        size_t bytes = 0;
        assert_true(streams[i].ended);
        assert_true(streams[i].failed);
        if (!strstr(streams[i].description, described[i]))
            fail_msg("stream %zu: '%s' lacks '%s'", i, streams[i].description, described[i]);
        char *one = worker_stream_take(&streams[i], &bytes);
        char *two = worker_stream_take(&streams[i], &bytes);
        assert_string_equal(one, "one");
        assert_string_equal(two, "two");
        free(one);
        free(two);
        assert_null(worker_stream_take(&streams[i], &bytes));
        worker_stream_release(&streams[i]);
    }
    assert_no_children();
}

/* Sends a message every few milliseconds until its stop flag is raised, then says by what. */
static int stoppable_child(struct worker_channel *channel, size_t index, void *user)
{
    (void)index;
    (void)user;
    while (!worker_stop_signal()) {
        if (send_text(channel, "tick"))
            return 2;
        sleep_ms(5);
    }
    return send_text(channel, "stopped by %d", worker_stop_signal());
}

/* Never stops by itself. */
static int endless_child(struct worker_channel *channel, size_t index, void *user)
{
    (void)index;
    (void)user;
    if (send_text(channel, "before"))
        return 2;
    signal(SIGTERM, SIG_IGN);
    for (;;)
        pause();
}

static void test_stop_is_passed_on_and_kill_keeps_messages(void **unused)
{
    (void)unused;
    struct worker_stream streams[2];
    struct audit_error err = { 0 };
    worker_stop_clear();
    assert_int_equal(worker_signals_install(), 0);
    for (size_t i = 0; i < 2; i++)
        assert_int_equal(worker_stream_start(&streams[i], stoppable_child, i, NULL, &err), 0);
    sleep_ms(50);
    /* As if SIGTERM reached this process alone: the children hear it from worker_streams_wait. */
    worker_stop_request(SIGTERM);
    assert_int_equal(worker_streams_wait(streams, 2), 0);
    worker_signals_restore();
    worker_stop_clear();
    for (size_t i = 0; i < 2; i++) {
        char *text, *last = NULL;
        size_t bytes = 0, ticks = 0;
        while ((text = worker_stream_take(&streams[i], &bytes)) != NULL) {
            ticks += strcmp(text, "tick") == 0;
            free(last);
            last = text;
        }
        assert_false(streams[i].failed);
        assert_true(ticks > 0);
        char want[32];
        snprintf(want, sizeof(want), "stopped by %d", SIGTERM);
        assert_string_equal(last, want);
        free(last);
        worker_stream_release(&streams[i]);
    }
    assert_no_children();

    struct worker_stream endless;
    assert_int_equal(worker_stream_start(&endless, endless_child, 0, NULL, &err), 0);
    sleep_ms(100);
    worker_streams_kill(&endless, 1);
    assert_true(endless.ended);
    assert_true(endless.failed);
    assert_string_equal(endless.description, "killed: the run stopped");
    size_t bytes = 0;
    char *text = worker_stream_take(&endless, &bytes);
    assert_string_equal(text, "before");
    free(text);
    worker_stream_release(&endless);
    assert_no_children();
}

/* Released while it still runs: killed and reaped. */
static void test_release_kills_a_running_child(void **unused)
{
    (void)unused;
    struct worker_stream stream;
    struct audit_error err = { 0 };
    worker_stop_clear();
    assert_int_equal(worker_stream_start(&stream, endless_child, 0, NULL, &err), 0);
    worker_stream_release(&stream);
    assert_no_children();
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_each_stream_in_its_order),
        cmocka_unit_test(test_large_messages_to_a_late_reader),
        cmocka_unit_test(test_failures_keep_what_came_before),
        cmocka_unit_test(test_stop_is_passed_on_and_kill_keeps_messages),
        cmocka_unit_test(test_release_kills_a_running_child),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
