/* Threads for the host work of one output (see host_threads.h). */
#include "host_threads.h"

#include <ctype.h>
#include <pthread.h>
#include <signal.h>
#include <stdlib.h>
#include <unistd.h>

/* DSATOPK_HOST_THREADS as a thread count, 0 when unset or not a number of at least 1. */
static unsigned threads_setting(void)
{
    const char *setting = getenv("DSATOPK_HOST_THREADS");
    if (!setting || !isdigit((unsigned char)setting[0]))
        return 0;
    char *end = NULL;
    unsigned long value = strtoul(setting, &end, 10);
    if (*end != '\0' || value < 1)
        return 0;
    return value > HOST_THREADS_MAX ? HOST_THREADS_MAX : (unsigned)value;
}

bool host_threads_sequential(void)
{
    return threads_setting() == 1;
}

unsigned host_threads_count(size_t work_items, size_t items_per_thread)
{
    const unsigned setting = threads_setting();
    if (setting)
        return setting;
    long online = sysconf(_SC_NPROCESSORS_ONLN);
    size_t threads = online < 1 ? 1 : (size_t)online;
    if (threads > HOST_THREADS_DEFAULT_MAX)
        threads = HOST_THREADS_DEFAULT_MAX;
    if (items_per_thread && work_items / items_per_thread < threads)
        threads = work_items / items_per_thread;
    return threads ? (unsigned)threads : 1u;
}

struct host_thread {
    void (*work)(void *argument, unsigned slot);
    void *argument;
    unsigned slot;
    pthread_t id;
};

static void *host_thread_main(void *argument)
{
    struct host_thread *thread = argument;
    thread->work(thread->argument, thread->slot);
    return NULL;
}

void host_threads_run(unsigned threads, void (*work)(void *argument, unsigned slot),
                      void *argument)
{
    struct host_thread started[HOST_THREADS_MAX];
    unsigned started_count = 0;
    if (threads > HOST_THREADS_MAX)
        threads = HOST_THREADS_MAX;
    if (threads > 1) {
        /* New threads inherit the mask in force when they are created. */
        sigset_t all, previous;
        sigfillset(&all);
        pthread_sigmask(SIG_SETMASK, &all, &previous);
        for (unsigned slot = 1; slot < threads; slot++) {
            struct host_thread *thread = &started[started_count];
            thread->work = work;
            thread->argument = argument;
            thread->slot = slot;
            if (pthread_create(&thread->id, NULL, host_thread_main, thread) != 0)
                break; /* the slots that started share the work out */
            started_count++;
        }
        pthread_sigmask(SIG_SETMASK, &previous, NULL);
    }
    work(argument, 0);
    for (unsigned i = 0; i < started_count; i++)
        pthread_join(started[i].id, NULL);
}

int host_rows_init(struct host_rows *rows, uint32_t count, struct audit_error *err)
{
    rows->count = count;
    rows->next = 0;
    rows->failed_row = count;
    rows->failure.code = 0;
    rows->failure.message[0] = '\0';
    if (pthread_mutex_init(&rows->lock, NULL) != 0)
        return audit_fail(err, AUDIT_ENOMEM, "cannot create a lock for %u rows", count);
    return 0;
}

bool host_rows_claim(struct host_rows *rows, uint32_t *row)
{
    pthread_mutex_lock(&rows->lock);
    const bool claimed = rows->next < rows->failed_row;
    if (claimed)
        *row = rows->next++;
    pthread_mutex_unlock(&rows->lock);
    return claimed;
}

void host_rows_fail(struct host_rows *rows, uint32_t row, const struct audit_error *error)
{
    pthread_mutex_lock(&rows->lock);
    if (row < rows->failed_row) {
        rows->failed_row = row;
        rows->failure = *error;
    }
    pthread_mutex_unlock(&rows->lock);
}

int host_rows_finish(struct host_rows *rows, struct audit_error *err)
{
    pthread_mutex_destroy(&rows->lock);
    if (rows->failed_row == rows->count)
        return 0;
    if (err)
        *err = rows->failure;
    return rows->failure.code;
}
