/* Unit tests of src/replay/worker.c with plain CPU children (no GPU): results come back in task order
 * (also messages bigger than a pipe buffer), a hanging child is killed after the timeout and
 * the remaining tasks run in a fresh process, a child killed by SIGSEGV is a crash naming the
 * signal, a child that dies mid-message or exits without a result is a crash, a child may ask
 * for a fresh process, SIGINT stops everything, children die with their parent, and no zombie is
 * ever left behind. A keeper answers once and stays alive until stopped; a keeper that fails
 * before its answer is reported like a task and nothing is kept. A session serves job after job
 * in one child (its start-up run once), gets each job's bytes intact, and after a crash, a hang
 * or a child that leaves goes on in a fresh child, charging only the task that failed; a job
 * given as a file (a memfd) reaches the child intact whatever its size, the child's writes to it
 * stay its own, and a fresh child after a crash maps the same file. */
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
#include <sys/mman.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#ifdef __linux__
#include <sys/prctl.h>
#endif

#include <cmocka.h>

#include "worker.h"

#define MAX_TASKS 2048

/* What a child does at each task. */
enum behaviour {
    SEND,            /* one message "task N" (padded to `bytes`) */
    HANG,            /* sleep forever */
    SEGFAULT,        /* killed by SIGSEGV */
    TRUNCATE,        /* half a message, then exit 0 */
    EXIT_QUIETLY,    /* return 0 without a message */
    EXIT_STATUS_3,   /* return 3 */
    SEND_THEN_LEAVE, /* the message, then return 0: "a fresh process for the rest" */
    INTERRUPT_PARENT, /* SIGINT to the parent, then sleep forever */
    SEND_PID_HANG,   /* a message holding getpid(), then sleep forever */
};

struct script {
    enum behaviour at[MAX_TASKS];
    size_t bytes[MAX_TASKS];
};

/* What the parent saw. */
struct seen {
    size_t count;
    enum worker_outcome outcome[MAX_TASKS];
    size_t task[MAX_TASKS];
    int signal[MAX_TASKS];
    char description[MAX_TASKS][300];
    int stop_after; /* return an error after this many outcomes (0: never) */
    int pid_pipe;   /* SEND_PID_HANG: where the parent writes the child's pid (-1: none) */
    size_t task_count; /* what the child runs (its `user`) */
};

static struct script script;

static void sleep_forever(void)
{
    for (;;)
        pause();
}

static int child_main(struct worker_channel *channel, size_t first, void *user)
{
    const size_t task_count = ((const struct seen *)user)->task_count;
    for (size_t task = first; task < task_count; task++) {
        char *text = NULL;
        size_t bytes = script.bytes[task] ? script.bytes[task] : 32;
        switch (script.at[task]) {
        case SEND:
        case SEND_THEN_LEAVE:
            text = malloc(bytes);
            if (!text)
                return 2;
            memset(text, 'x', bytes);
            snprintf(text, bytes, "task %zu", task);
            if (worker_send(channel, text, bytes) != 0)
                return 2;
            free(text);
            if (script.at[task] == SEND_THEN_LEAVE)
                return 0;
            break;
        case HANG:
            sleep_forever();
            break;
        case SEGFAULT:
            signal(SIGSEGV, SIG_DFL);
            raise(SIGSEGV);
            return 9;
        case TRUNCATE: {
            const uint32_t promised = 100;
            if (write(channel->fd, &promised, sizeof(promised)) != sizeof(promised) ||
                write(channel->fd, "0123456789", 10) != 10)
                return 2;
            _exit(0);
        }
        case EXIT_QUIETLY: return 0;
        case EXIT_STATUS_3: return 3;
        case INTERRUPT_PARENT:
            kill(getppid(), SIGINT);
            sleep_forever();
            break;
        case SEND_PID_HANG: {
            int pid = (int)getpid();
            if (worker_send(channel, &pid, sizeof(pid)) != 0)
                return 2;
            sleep_forever();
            break;
        }
        }
    }
    return 0;
}

static int on_result(void *user, size_t task, const struct worker_event *event)
{
    struct seen *seen = user;
    size_t n = seen->count++;
    seen->task[n] = task;
    seen->outcome[n] = event->outcome;
    seen->signal[n] = event->signal;
    if (event->outcome == WORKER_MESSAGE) {
        if (script.at[task] == SEND_PID_HANG && seen->pid_pipe >= 0) {
            if (write(seen->pid_pipe, event->data, sizeof(int)) != sizeof(int))
                return -5;
            return AUDIT_OK;
        }
        snprintf(seen->description[n], sizeof(seen->description[n]), "%s",
                 (const char *)event->data);
        /* The message is complete: the padding is all there. */
        if (event->bytes != (script.bytes[task] ? script.bytes[task] : 32))
            return -5;
    } else {
        snprintf(seen->description[n], sizeof(seen->description[n]), "%s", event->description);
    }
    if (seen->stop_after && (int)seen->count == seen->stop_after)
        return AUDIT_EDATA;
    return AUDIT_OK;
}

static void reset(struct seen *seen)
{
    memset(&script, 0, sizeof(script));
    memset(seen, 0, sizeof(*seen));
    seen->pid_pipe = -1;
    worker_stop_clear();
}

static int run_tasks(struct seen *seen, size_t count, unsigned timeout_ms,
                     struct worker_stats *stats, struct audit_error *err)
{
    seen->task_count = count;
    return worker_run_tasks(count, child_main, on_result, seen, timeout_ms, stats, err);
}

/* No child of this process is left, running or zombie. */
static void assert_no_children(void)
{
    int status;
    errno = 0;
    assert_int_equal(waitpid(-1, &status, WNOHANG), -1);
    assert_int_equal(errno, ECHILD);
}

static void test_results_in_order(void **unused)
{
    (void)unused;
    struct seen seen;
    struct worker_stats stats = { 0 };
    struct audit_error err = { 0 };
    reset(&seen);
    assert_int_equal(run_tasks(&seen, 5, 5000, &stats, &err), 0);
    assert_int_equal(seen.count, 5);
    for (size_t i = 0; i < 5; i++) {
        char want[32];
        snprintf(want, sizeof(want), "task %zu", i);
        assert_int_equal(seen.task[i], i);
        assert_int_equal(seen.outcome[i], WORKER_MESSAGE);
        assert_string_equal(seen.description[i], want);
    }
    assert_int_equal(stats.processes, 1);
    assert_no_children();
}

static void test_many_and_large_messages(void **unused)
{
    (void)unused;
    struct seen seen;
    struct worker_stats stats = { 0 };
    struct audit_error err = { 0 };
    reset(&seen);
    const size_t tasks = 1500;
    for (size_t i = 0; i < tasks; i++)
        script.bytes[i] = i % 100 == 7 ? 200000 + i : 16 + i % 50; /* some exceed a pipe buffer */
    assert_int_equal(run_tasks(&seen, tasks, 10000, &stats, &err), 0);
    assert_int_equal(seen.count, tasks);
    for (size_t i = 0; i < tasks; i++) {
        char want[32];
        snprintf(want, sizeof(want), "task %zu", i);
        assert_int_equal(seen.outcome[i], WORKER_MESSAGE);
        assert_int_equal(seen.task[i], i);
        assert_memory_equal(seen.description[i], want, strlen(want));
    }
    assert_int_equal(stats.processes, 1);
    assert_no_children();
}

static void test_hang_is_killed_and_the_rest_runs(void **unused)
{
    (void)unused;
    struct seen seen;
    struct worker_stats stats = { 0 };
    struct audit_error err = { 0 };
    reset(&seen);
    script.at[1] = HANG;
    struct timespec start, end;
    clock_gettime(CLOCK_MONOTONIC, &start);
    assert_int_equal(run_tasks(&seen, 4, 300, &stats, &err), 0);
    clock_gettime(CLOCK_MONOTONIC, &end);
    const double seconds = (double)(end.tv_sec - start.tv_sec) +
                           (double)(end.tv_nsec - start.tv_nsec) / 1e9;
    assert_true(seconds >= 0.29);
    assert_true(seconds < 5.0);
    assert_int_equal(seen.count, 4);
    assert_int_equal(seen.outcome[0], WORKER_MESSAGE);
    assert_int_equal(seen.outcome[1], WORKER_HANG);
    assert_non_null(strstr(seen.description[1], "timeout"));
    assert_int_equal(seen.outcome[2], WORKER_MESSAGE);
    assert_string_equal(seen.description[2], "task 2");
    assert_int_equal(seen.outcome[3], WORKER_MESSAGE);
    assert_int_equal(stats.processes, 2);
    assert_int_equal(stats.hangs, 1);
    assert_no_children();
}

static void test_segfault_is_a_crash_naming_the_signal(void **unused)
{
    (void)unused;
    struct seen seen;
    struct worker_stats stats = { 0 };
    struct audit_error err = { 0 };
    reset(&seen);
    script.at[0] = SEGFAULT;
    script.at[2] = SEGFAULT;
    assert_int_equal(run_tasks(&seen, 4, 5000, &stats, &err), 0);
    assert_int_equal(seen.count, 4);
    assert_int_equal(seen.outcome[0], WORKER_CRASH);
    assert_int_equal(seen.signal[0], SIGSEGV);
    assert_non_null(strstr(seen.description[0], "SIGSEGV"));
    assert_int_equal(seen.outcome[1], WORKER_MESSAGE);
    assert_int_equal(seen.outcome[2], WORKER_CRASH);
    assert_int_equal(seen.outcome[3], WORKER_MESSAGE);
    assert_string_equal(seen.description[3], "task 3");
    assert_int_equal(stats.processes, 3);
    assert_int_equal(stats.crashes, 2);
    assert_no_children();
}

static void test_death_mid_message_and_silent_exits(void **unused)
{
    (void)unused;
    struct seen seen;
    struct worker_stats stats = { 0 };
    struct audit_error err = { 0 };
    reset(&seen);
    script.at[0] = TRUNCATE;
    script.at[1] = EXIT_QUIETLY;
    script.at[2] = EXIT_STATUS_3;
    assert_int_equal(run_tasks(&seen, 4, 5000, &stats, &err), 0);
    assert_int_equal(seen.count, 4);
    assert_int_equal(seen.outcome[0], WORKER_CRASH);
    assert_non_null(strstr(seen.description[0], "mid-message"));
    assert_int_equal(seen.outcome[1], WORKER_CRASH);
    assert_non_null(strstr(seen.description[1], "without"));
    assert_int_equal(seen.outcome[2], WORKER_CRASH);
    assert_non_null(strstr(seen.description[2], "status 3"));
    assert_int_equal(seen.outcome[3], WORKER_MESSAGE);
    assert_int_equal(stats.processes, 4);
    assert_no_children();
}

static void test_fresh_process_on_request(void **unused)
{
    (void)unused;
    struct seen seen;
    struct worker_stats stats = { 0 };
    struct audit_error err = { 0 };
    reset(&seen);
    script.at[1] = SEND_THEN_LEAVE;
    script.at[2] = SEND_THEN_LEAVE;
    assert_int_equal(run_tasks(&seen, 5, 5000, &stats, &err), 0);
    assert_int_equal(seen.count, 5);
    for (size_t i = 0; i < 5; i++)
        assert_int_equal(seen.outcome[i], WORKER_MESSAGE);
    assert_int_equal(stats.processes, 3);
    assert_int_equal(stats.crashes, 0);
    assert_no_children();
}

static void test_callback_error_stops(void **unused)
{
    (void)unused;
    struct seen seen;
    struct audit_error err = { 0 };
    reset(&seen);
    seen.stop_after = 2;
    script.at[3] = HANG;
    assert_int_equal(run_tasks(&seen, 6, 60000, NULL, &err),
                     AUDIT_EDATA);
    assert_int_equal(seen.count, 2);
    assert_no_children();
}

static void test_sigint_stops_and_reaps(void **unused)
{
    (void)unused;
    struct seen seen;
    struct audit_error err = { 0 };
    reset(&seen);
    assert_int_equal(worker_signals_install(), 0);
    script.at[1] = INTERRUPT_PARENT;
    struct timespec start, end;
    clock_gettime(CLOCK_MONOTONIC, &start);
    /* No watchdog: only the signal can end the wait. */
    int status = run_tasks(&seen, 3, 0, NULL, &err);
    clock_gettime(CLOCK_MONOTONIC, &end);
    worker_signals_restore();
    assert_int_equal(status, WORKER_STOPPED);
    assert_int_equal(worker_stop_signal(), SIGINT);
    assert_true(end.tv_sec - start.tv_sec < 5);
    assert_int_equal(seen.count, 1);
    assert_no_children();
    /* A raised flag stops before anything is forked. */
    worker_stop_request(SIGTERM);
    assert_int_equal(run_tasks(&seen, 3, 0, NULL, &err),
                     WORKER_STOPPED);
    assert_int_equal(seen.count, 1);
    worker_stop_clear();
    assert_no_children();
}

static void test_signal_names(void **unused)
{
    (void)unused;
    char name[32];
    assert_string_equal(worker_signal_name(SIGSEGV, name, sizeof(name)), "SIGSEGV");
    assert_string_equal(worker_signal_name(SIGBUS, name, sizeof(name)), "SIGBUS");
    assert_string_equal(worker_signal_name(1000, name, sizeof(name)), "signal 1000");
}

static int start_keeper(struct seen *seen, struct worker_keeper *keeper, unsigned timeout_ms,
                        struct audit_error *err)
{
    seen->task_count = 1;
    return worker_keeper_start(keeper, child_main, on_result, seen, timeout_ms, err);
}

static void test_keeper_stays_until_stopped(void **unused)
{
    (void)unused;
    struct seen seen;
    struct worker_keeper keeper = { 0 };
    struct audit_error err = { 0 };
    reset(&seen);
    assert_int_equal(start_keeper(&seen, &keeper, 5000, &err), 0);
    assert_int_equal(seen.count, 1);
    assert_int_equal(seen.outcome[0], WORKER_MESSAGE);
    assert_string_equal(seen.description[0], "task 0");
    assert_true(keeper.pid > 0);
    /* Still there a while later, not a zombie: */
    struct timespec pause = { 0, 50 * 1000 * 1000 };
    nanosleep(&pause, NULL);
    int status = 0;
    assert_int_equal(waitpid(keeper.pid, &status, WNOHANG), 0);
    /* Other workers run beside it. */
    struct seen others;
    reset(&others);
    assert_int_equal(run_tasks(&others, 3, 5000, NULL, &err), 0);
    assert_int_equal(others.count, 3);
    assert_int_equal(waitpid(keeper.pid, &status, WNOHANG), 0);
    worker_keeper_stop(&keeper);
    assert_int_equal(keeper.pid, 0);
    worker_keeper_stop(&keeper); /* nothing kept: nothing done */
    assert_no_children();
}

static void test_keeper_failures_keep_nothing(void **unused)
{
    (void)unused;
    static const enum behaviour failures[] = { SEGFAULT, EXIT_QUIETLY, EXIT_STATUS_3, HANG };
    for (size_t i = 0; i < sizeof(failures) / sizeof(failures[0]); i++) {
        struct seen seen;
        struct worker_keeper keeper = { 0 };
        struct audit_error err = { 0 };
        reset(&seen);
        script.at[0] = failures[i];
        assert_int_equal(start_keeper(&seen, &keeper, 300, &err), 0);
        assert_int_equal(seen.count, 1);
        assert_int_equal(seen.outcome[0], failures[i] == HANG ? WORKER_HANG : WORKER_CRASH);
        assert_int_equal(keeper.pid, 0);
        assert_no_children();
    }
    /* A callback error after the answer: the child is not kept either. */
    struct seen seen;
    struct worker_keeper keeper = { 0 };
    struct audit_error err = { 0 };
    reset(&seen);
    seen.stop_after = 1;
    assert_int_equal(start_keeper(&seen, &keeper, 5000, &err), AUDIT_EDATA);
    assert_int_equal(keeper.pid, 0);
    assert_no_children();
}

/* ---- sessions ---- */

#define SESSION_JOB_TASKS 4

/* A session job: what each task does, then a payload the child checks. */
struct session_job {
    int id;
    enum behaviour at[SESSION_JOB_TASKS];
    uint32_t payload_bytes;
    uint32_t payload_sum;
    /* payload_bytes bytes follow */
};

static const enum behaviour all_send[SESSION_JOB_TASKS] = { SEND, SEND, SEND, SEND };
static int session_started; /* in the child: how often child_start ran */
static bool session_start_hangs; /* set by the parent before the fork */

static void session_child_start(void *user)
{
    (void)user;
    if (session_start_hangs)
        sleep_forever();
    session_started++;
}

/* Sends "job J task T pid P starts S ok|bad" per task, or fails as the job says. */
static int session_job_main(struct worker_channel *channel, size_t first, void *job,
                            size_t job_bytes, void *user)
{
    (void)user;
    const struct session_job *header = job;
    if (job_bytes < sizeof(*header) || job_bytes != sizeof(*header) + header->payload_bytes)
        return 7;
    const unsigned char *payload = (const unsigned char *)(header + 1);
    uint32_t sum = 0;
    for (uint32_t i = 0; i < header->payload_bytes; i++)
        sum = sum * 31 + payload[i];
    /* The child's writes to its job stay its own (a job file is mapped privately): a fresh
     * child given the same job after a crash finds it intact. */
    if (header->payload_bytes)
        ((unsigned char *)job)[sizeof(*header)] ^= 0xff;
    for (size_t task = first; task < SESSION_JOB_TASKS; task++) {
        char text[128];
        switch (header->at[task]) {
        case HANG: sleep_forever(); break;
        case SEGFAULT:
            signal(SIGSEGV, SIG_DFL);
            raise(SIGSEGV);
            return 9;
        case EXIT_STATUS_3: return 3;
        case INTERRUPT_PARENT:
            kill(getppid(), SIGINT);
            sleep_forever();
            break;
        default: break;
        }
        snprintf(text, sizeof(text), "job %d task %zu pid %d starts %d %s", header->id, task,
                 (int)getpid(), session_started, sum == header->payload_sum ? "ok" : "bad");
        if (worker_send(channel, text, strlen(text) + 1) != 0)
            return 2;
        if (header->at[task] == SEND_THEN_LEAVE)
            return WORKER_JOB_LEAVE;
    }
    return 0;
}

/* What the parent saw of one session job. */
struct session_seen {
    size_t count;
    enum worker_outcome outcome[SESSION_JOB_TASKS];
    int pid[SESSION_JOB_TASKS];
    char text[SESSION_JOB_TASKS][300];
};

static int on_session_result(void *user, size_t task, const struct worker_event *event)
{
    struct session_seen *seen = user;
    size_t n = seen->count++;
    assert_int_equal(n, task);
    seen->outcome[n] = event->outcome;
    seen->pid[n] = 0;
    if (event->outcome == WORKER_MESSAGE) {
        snprintf(seen->text[n], sizeof(seen->text[n]), "%s", (const char *)event->data);
        const char *pid = strstr(seen->text[n], "pid ");
        seen->pid[n] = pid ? atoi(pid + 4) : 0;
    } else {
        snprintf(seen->text[n], sizeof(seen->text[n]), "%s", event->description);
    }
    return AUDIT_OK;
}

/* Job id with the given behaviours and a payload of payload_bytes (malloc'd). */
static struct session_job *make_session_job(int id, const enum behaviour at[SESSION_JOB_TASKS],
                                            uint32_t payload_bytes)
{
    struct session_job *job = malloc(sizeof(*job) + payload_bytes);
    assert_non_null(job);
    memset(job, 0, sizeof(*job));
    job->id = id;
    memcpy(job->at, at, sizeof(job->at));
    job->payload_bytes = payload_bytes;
    unsigned char *payload = (unsigned char *)(job + 1);
    for (uint32_t i = 0; i < payload_bytes; i++) {
        payload[i] = (unsigned char)(i * 7 + (uint32_t)id);
        job->payload_sum = job->payload_sum * 31 + payload[i];
    }
    return job;
}

/* Runs job id with the given behaviours and a payload of payload_bytes. */
static int run_session_job_within(struct worker_session *session, int id,
                                  const enum behaviour at[SESSION_JOB_TASKS],
                                  uint32_t payload_bytes, unsigned timeout_ms,
                                  struct session_seen *seen)
{
    struct session_job *job = make_session_job(id, at, payload_bytes);
    struct audit_error err = { 0 };
    memset(seen, 0, sizeof(*seen));
    int status = worker_session_run_job(session, job, sizeof(*job) + payload_bytes,
                                        SESSION_JOB_TASKS, on_session_result, seen, timeout_ms,
                                        &err);
    free(job);
    return status;
}

/* The same job given as a file in memory (worker_session_run_job_file). */
static int run_session_job_file(struct worker_session *session, int id,
                                const enum behaviour at[SESSION_JOB_TASKS],
                                uint32_t payload_bytes, struct session_seen *seen)
{
    struct session_job *job = make_session_job(id, at, payload_bytes);
    const size_t bytes = sizeof(*job) + payload_bytes;
    const int file = memfd_create("test_worker_job", MFD_CLOEXEC);
    assert_true(file >= 0);
    assert_int_equal(write(file, job, bytes), (ssize_t)bytes);
    free(job);
    struct audit_error err = { 0 };
    memset(seen, 0, sizeof(*seen));
    int status = worker_session_run_job_file(session, file, bytes, SESSION_JOB_TASKS,
                                             on_session_result, seen, 2000, &err);
    close(file);
    return status;
}

static int run_session_job(struct worker_session *session, int id,
                           const enum behaviour at[SESSION_JOB_TASKS], uint32_t payload_bytes,
                           struct session_seen *seen)
{
    return run_session_job_within(session, id, at, payload_bytes, 2000, seen);
}

/* Every task of job came back intact from child, whose start-up ran once. */
static void assert_served_whole(const struct session_seen *seen, int job, int child)
{
    assert_int_equal(seen->count, SESSION_JOB_TASKS);
    for (size_t t = 0; t < SESSION_JOB_TASKS; t++) {
        char want[128];
        snprintf(want, sizeof(want), "job %d task %zu pid %d starts 1 ok", job, t, child);
        assert_int_equal(seen->outcome[t], WORKER_MESSAGE);
        assert_string_equal(seen->text[t], want);
    }
}

/* A session started before its first job; returns its child's pid. */
static int start_session(struct worker_session *session)
{
    struct audit_error err = { 0 };
    worker_stop_clear();
    worker_session_init(session, session_job_main, session_child_start, NULL);
    assert_int_equal(worker_session_start(session, &err), 0);
    assert_true(session->pid > 0);
    return (int)session->pid;
}

static void test_session_serves_jobs_in_one_child(void **unused)
{
    (void)unused;
    struct worker_session session;
    struct session_seen seen;
    const int child = start_session(&session);
    /* Jobs of 0 bytes of payload to 3 MiB (more than a socket buffer): each arrives intact. */
    static const uint32_t payloads[] = { 0, 1, 4096, 3u << 20 };
    for (int job = 0; job < 4; job++) {
        assert_int_equal(run_session_job(&session, job, all_send, payloads[job], &seen), 0);
        assert_served_whole(&seen, job, child);
    }
    assert_int_equal(session.pid, child);
    assert_int_equal(session.stats.processes, 1);
    worker_session_stop(&session);
    assert_int_equal(session.pid, 0);
    assert_no_children();
}

/* Jobs in a file, one session child for all of them (bigger than the socket would hold, too,
 * and between jobs sent through the socket); after a crash the fresh child maps the same file,
 * untouched by the writes of the child before it. */
static void test_session_jobs_in_files(void **unused)
{
    (void)unused;
    struct worker_session session;
    struct session_seen seen;
    const int child = start_session(&session);
    static const uint32_t payloads[] = { 0, 1, 4096, 40u << 20 };
    for (int job = 0; job < 4; job++) {
        assert_int_equal(run_session_job_file(&session, job, all_send, payloads[job], &seen), 0);
        assert_served_whole(&seen, job, child);
        assert_int_equal(run_session_job(&session, 10 + job, all_send, 100, &seen), 0);
        assert_int_equal(seen.pid[3], child);
    }
    assert_int_equal(session.stats.processes, 1);
    static const enum behaviour crash[SESSION_JOB_TASKS] = { SEND, SEGFAULT, SEND, SEND };
    assert_int_equal(run_session_job_file(&session, 5, crash, 3u << 20, &seen), 0);
    assert_int_equal(seen.outcome[0], WORKER_MESSAGE);
    assert_int_equal(seen.outcome[1], WORKER_CRASH);
    for (size_t t = 2; t < SESSION_JOB_TASKS; t++) {
        assert_int_equal(seen.outcome[t], WORKER_MESSAGE);
        assert_non_null(strstr(seen.text[t], "starts 1 ok"));
        assert_true(seen.pid[t] != seen.pid[0]);
    }
    assert_int_equal(session.stats.processes, 2);
    worker_session_stop(&session);
    assert_no_children();
}

/* Children forked while a session lives (here a keeper; in `run`, a worker for a record no memfd
 * could hold, or a probe started after the session) do not keep the session's socket open:
 * stopping the session ends its child at once, not after the grace period. */
static void test_session_stops_at_once_beside_later_children(void **unused)
{
    (void)unused;
    struct worker_session session;
    struct worker_keeper keeper = { 0 };
    struct audit_error err = { 0 };
    struct session_seen seen;
    struct seen kept;
    worker_stop_clear();
    worker_session_init(&session, session_job_main, session_child_start, NULL);
    assert_int_equal(worker_session_start(&session, &err), 0);
    reset(&kept);
    assert_int_equal(start_keeper(&kept, &keeper, 5000, &err), 0);
    assert_true(keeper.pid > 0);
    assert_int_equal(run_session_job(&session, 1, all_send, 64, &seen), 0);
    assert_int_equal(seen.count, SESSION_JOB_TASKS);
    struct timespec started, ended;
    clock_gettime(CLOCK_MONOTONIC, &started);
    worker_session_stop(&session);
    clock_gettime(CLOCK_MONOTONIC, &ended);
    const double stop_s = (double)(ended.tv_sec - started.tv_sec) +
                          (double)(ended.tv_nsec - started.tv_nsec) * 1e-9;
    if (stop_s > 2.0)
        fail_msg("stopping the session took %.1f s beside a keeper", stop_s);
    worker_keeper_stop(&keeper);
    assert_no_children();
}

static void test_session_goes_on_after_failures(void **unused)
{
    (void)unused;
    struct worker_session session;
    struct session_seen seen;
    static const struct {
        enum behaviour at[SESSION_JOB_TASKS];
        enum worker_outcome failed_outcome; /* of task 1 */
        bool charged;                       /* task 1 gets the failure */
    } cases[] = {
        { { SEND, SEGFAULT, SEND, SEND }, WORKER_CRASH, true },
        { { SEND, EXIT_STATUS_3, SEND, SEND }, WORKER_CRASH, true },
        { { SEND, HANG, SEND, SEND }, WORKER_HANG, true },
        { { SEND, SEND_THEN_LEAVE, SEND, SEND }, WORKER_MESSAGE, false },
        { { SEND, SEND, SEND, SEND_THEN_LEAVE }, WORKER_MESSAGE, false },
    };
    for (size_t c = 0; c < sizeof(cases) / sizeof(cases[0]); c++) {
        worker_stop_clear();
        worker_session_init(&session, session_job_main, session_child_start, NULL);
        /* No start: the first job forks the child. */
        assert_int_equal(run_session_job(&session, 1, cases[c].at, 100, &seen), 0);
        assert_int_equal(seen.count, SESSION_JOB_TASKS);
        assert_int_equal(seen.outcome[0], WORKER_MESSAGE);
        assert_int_equal(seen.outcome[1], cases[c].failed_outcome);
        for (size_t t = 2; t < SESSION_JOB_TASKS; t++) {
            assert_int_equal(seen.outcome[t], WORKER_MESSAGE);
            assert_non_null(strstr(seen.text[t], "starts 1 ok"));
        }
        /* Tasks after the failure (or after the child left) ran in a fresh child. */
        if (cases[c].at[3] != SEND_THEN_LEAVE)
            assert_true(seen.pid[2] != seen.pid[0]);
        /* The next job: served whole, by a child that ran its start-up once. */
        const int before = seen.pid[3];
        assert_int_equal(run_session_job(&session, 2, all_send, 10, &seen), 0);
        for (size_t t = 0; t < SESSION_JOB_TASKS; t++) {
            assert_int_equal(seen.outcome[t], WORKER_MESSAGE);
            assert_non_null(strstr(seen.text[t], "starts 1 ok"));
        }
        if (cases[c].at[3] == SEND_THEN_LEAVE)
            assert_true(seen.pid[0] != before); /* it left after its last task */
        else
            assert_int_equal(seen.pid[0], before);
        assert_int_equal(session.stats.processes, 2);
        assert_int_equal(session.stats.hangs, cases[c].failed_outcome == WORKER_HANG);
        assert_int_equal(session.stats.crashes, cases[c].failed_outcome == WORKER_CRASH);
        worker_session_stop(&session);
        assert_no_children();
    }
}

/* SIGINT while a session's child is busy: it is killed at once (no grace period), the run
 * stops, and a raised flag stops the next job before it is delivered. */
static void test_session_sigint_stops_and_reaps(void **unused)
{
    (void)unused;
    struct worker_session session;
    struct session_seen seen;
    static const enum behaviour interrupted[SESSION_JOB_TASKS] = { SEND, INTERRUPT_PARENT, SEND,
                                                                   SEND };
    worker_stop_clear();
    assert_int_equal(worker_signals_install(), 0);
    worker_session_init(&session, session_job_main, session_child_start, NULL);
    struct timespec start, end;
    clock_gettime(CLOCK_MONOTONIC, &start);
    /* No watchdog: only the signal can end the wait. */
    int status = run_session_job_within(&session, 1, interrupted, 10, 0, &seen);
    clock_gettime(CLOCK_MONOTONIC, &end);
    worker_signals_restore();
    assert_int_equal(status, WORKER_STOPPED);
    assert_int_equal(worker_stop_signal(), SIGINT);
    assert_true(end.tv_sec - start.tv_sec < 5);
    assert_int_equal(seen.count, 1);
    assert_int_equal(session.pid, 0);
    assert_no_children();
    assert_int_equal(run_session_job(&session, 2, interrupted, 10, &seen), WORKER_STOPPED);
    assert_int_equal(seen.count, 0);
    worker_stop_clear();
    worker_session_stop(&session);
    assert_no_children();
}

/* A child stuck before it reads its job (its start-up hangs) and a job bigger than the socket
 * holds: the watchdog still ends every task. */
static void test_session_start_hang_is_a_hang(void **unused)
{
    (void)unused;
    struct worker_session session;
    struct session_seen seen;
    worker_stop_clear();
    session_start_hangs = true;
    worker_session_init(&session, session_job_main, session_child_start, NULL);
    assert_int_equal(run_session_job_within(&session, 1, all_send, 8u << 20, 200, &seen), 0);
    session_start_hangs = false;
    assert_int_equal(seen.count, SESSION_JOB_TASKS);
    for (size_t t = 0; t < SESSION_JOB_TASKS; t++) {
        assert_int_equal(seen.outcome[t], WORKER_HANG);
        assert_non_null(strstr(seen.text[t], "took no job within the 0.200 s timeout"));
    }
    assert_int_equal(session.stats.hangs, SESSION_JOB_TASKS);
    assert_int_equal(session.pid, 0);
    /* And it recovers: the next job forks a child whose start-up works. */
    assert_int_equal(run_session_job(&session, 2, all_send, 10, &seen), 0);
    assert_int_equal(seen.outcome[3], WORKER_MESSAGE);
    worker_session_stop(&session);
    assert_no_children();
}

#ifdef __linux__
/* A worker whose parent is killed (SIGKILL: no handler runs) dies too. This process becomes a
 * subreaper so that the orphan is re-parented here and can be waited for. */
static void test_children_die_with_the_parent(void **unused)
{
    (void)unused;
    int pids[2];
    assert_int_equal(prctl(PR_SET_CHILD_SUBREAPER, 1), 0);
    assert_int_equal(pipe(pids), 0);
    pid_t middle = fork();
    assert_true(middle >= 0);
    if (middle == 0) {
        struct seen seen;
        struct audit_error err = { 0 };
        close(pids[0]);
        reset(&seen);
        seen.pid_pipe = pids[1];
        script.at[0] = SEND_PID_HANG;
        run_tasks(&seen, 2, 0, NULL, &err);
        _exit(0);
    }
    close(pids[1]);
    int worker_pid = 0;
    assert_int_equal(read(pids[0], &worker_pid, sizeof(worker_pid)), (ssize_t)sizeof(worker_pid));
    close(pids[0]);
    assert_true(worker_pid > 0);
    assert_int_equal(kill(middle, SIGKILL), 0);
    int status = 0;
    assert_int_equal(waitpid(middle, &status, 0), middle);
    /* The orphan is ours now; it must already be dying of SIGKILL. */
    pid_t reaped = 0;
    for (int i = 0; i < 500 && reaped == 0; i++) {
        reaped = waitpid(worker_pid, &status, WNOHANG);
        if (reaped == 0) {
            struct timespec pause = { 0, 10 * 1000 * 1000 };
            nanosleep(&pause, NULL);
        }
    }
    if (reaped == 0) {
        kill(worker_pid, SIGKILL);
        waitpid(worker_pid, &status, 0);
        fail_msg("the worker outlived its parent by 5 s");
    }
    assert_int_equal(reaped, worker_pid);
    assert_true(WIFSIGNALED(status));
    assert_int_equal(WTERMSIG(status), SIGKILL);
    prctl(PR_SET_CHILD_SUBREAPER, 0);
    assert_no_children();
}
#endif

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_results_in_order),
        cmocka_unit_test(test_many_and_large_messages),
        cmocka_unit_test(test_hang_is_killed_and_the_rest_runs),
        cmocka_unit_test(test_segfault_is_a_crash_naming_the_signal),
        cmocka_unit_test(test_death_mid_message_and_silent_exits),
        cmocka_unit_test(test_fresh_process_on_request),
        cmocka_unit_test(test_callback_error_stops),
        cmocka_unit_test(test_sigint_stops_and_reaps),
        cmocka_unit_test(test_signal_names),
        cmocka_unit_test(test_keeper_stays_until_stopped),
        cmocka_unit_test(test_keeper_failures_keep_nothing),
        cmocka_unit_test(test_session_serves_jobs_in_one_child),
        cmocka_unit_test(test_session_jobs_in_files),
        cmocka_unit_test(test_session_stops_at_once_beside_later_children),
        cmocka_unit_test(test_session_goes_on_after_failures),
        cmocka_unit_test(test_session_start_hang_is_a_hang),
        cmocka_unit_test(test_session_sigint_stops_and_reaps),
#ifdef __linux__
        cmocka_unit_test(test_children_die_with_the_parent),
#endif
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
