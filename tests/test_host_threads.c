/* Unit tests of src/common/host_threads.c: the thread count (DSATOPK_HOST_THREADS, the default bound,
 * small work on one thread) and host_threads_run (every slot runs once, slot 0 on the calling
 * thread, all joined before it returns). */
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "host_threads.h"

static void test_count_from_environment_and_size(void **state)
{
    (void)state;
    assert_int_equal(unsetenv("DSATOPK_HOST_THREADS"), 0);
    const unsigned threads = host_threads_count(1u << 30, 1);
    assert_true(threads >= 1 && threads <= HOST_THREADS_DEFAULT_MAX);
    /* Too little work for a second thread. */
    assert_int_equal(host_threads_count(100, 1000), 1);
    assert_int_equal(host_threads_count(0, 1000), 1);

    /* Set: that many, whatever the size; past the maximum, the maximum. */
    assert_int_equal(setenv("DSATOPK_HOST_THREADS", "3", 1), 0);
    assert_int_equal(host_threads_count(1, 1000), 3);
    assert_int_equal(setenv("DSATOPK_HOST_THREADS", "1", 1), 0);
    assert_int_equal(host_threads_count(1u << 30, 1), 1);
    assert_int_equal(setenv("DSATOPK_HOST_THREADS", "1000", 1), 0);
    assert_int_equal(host_threads_count(1, 1), HOST_THREADS_MAX);
    /* Not a count: the default. */
    static const char *const invalid[] = { "0", "", "two", "-2", " 2", "2x" };
    for (size_t i = 0; i < sizeof(invalid) / sizeof(invalid[0]); i++) {
        assert_int_equal(setenv("DSATOPK_HOST_THREADS", invalid[i], 1), 0);
        assert_int_equal(host_threads_count(1u << 30, 1), threads);
    }
    assert_int_equal(unsetenv("DSATOPK_HOST_THREADS"), 0);
}

struct slots_seen {
    pthread_mutex_t lock;
    pthread_t caller;
    unsigned runs[HOST_THREADS_MAX];
    unsigned caller_slot_runs;
};

static void count_slot(void *argument, unsigned slot)
{
    struct slots_seen *seen = argument;
    pthread_mutex_lock(&seen->lock);
    seen->runs[slot]++;
    if (pthread_equal(pthread_self(), seen->caller))
        seen->caller_slot_runs += slot == 0;
    pthread_mutex_unlock(&seen->lock);
}

static void test_run_calls_every_slot_once(void **state)
{
    (void)state;
    static const unsigned counts[] = { 1, 2, 5, HOST_THREADS_MAX };
    for (size_t i = 0; i < sizeof(counts) / sizeof(counts[0]); i++) {
        struct slots_seen seen = { .caller = pthread_self() };
        assert_int_equal(pthread_mutex_init(&seen.lock, NULL), 0);
        host_threads_run(counts[i], count_slot, &seen);
        /* Joined: every slot's count is final here. */
        for (unsigned slot = 0; slot < HOST_THREADS_MAX; slot++)
            assert_int_equal(seen.runs[slot], slot < counts[i] ? 1 : 0);
        assert_int_equal(seen.caller_slot_runs, 1);
        pthread_mutex_destroy(&seen.lock);
    }
}

/* host_rows: every row handed out once; a failure keeps the lowest row's error and stops
 * handing out the rows after it. */
struct rows_test {
    struct host_rows rows;
    uint32_t seen[200]; /* each written by the one thread that claimed the row */
};

static void rows_thread(void *argument, unsigned slot)
{
    (void)slot;
    struct rows_test *test = argument;
    uint32_t b;
    while (host_rows_claim(&test->rows, &b)) {
        test->seen[b]++;
        if (b == 150 || b == 90 || b == 170) {
            struct audit_error error = { 0 };
            audit_fail(&error, AUDIT_EDATA, "row %u failed", b);
            host_rows_fail(&test->rows, b, &error);
        }
    }
}

static void test_rows_claim_and_lowest_failure(void **state)
{
    (void)state;
    for (unsigned threads = 1; threads <= 8; threads *= 2) {
        struct rows_test test = { 0 };
        struct audit_error err = { 0 };
        assert_int_equal(host_rows_init(&test.rows, 80, &err), 0);
        host_threads_run(threads, rows_thread, &test);
        assert_int_equal(host_rows_finish(&test.rows, &err), 0);
        for (uint32_t b = 0; b < 80; b++)
            assert_int_equal(test.seen[b], 1);

        memset(&test, 0, sizeof(test));
        assert_int_equal(host_rows_init(&test.rows, 200, &err), 0);
        host_threads_run(threads, rows_thread, &test);
        assert_int_equal(host_rows_finish(&test.rows, &err), AUDIT_EDATA);
        assert_string_equal(err.message, "row 90 failed");
        for (uint32_t b = 0; b <= 90; b++)
            assert_int_equal(test.seen[b], 1); /* every row up to the failure ran */
        for (uint32_t b = 91; b < 200; b++)
            assert_true(test.seen[b] <= 1);
        if (threads == 1)
            assert_int_equal(test.seen[91], 0); /* one thread stops at the failure */
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_count_from_environment_and_size),
        cmocka_unit_test(test_run_calls_every_slot_once),
        cmocka_unit_test(test_rows_claim_and_lowest_failure),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
