/* Unit tests of src/replay/audit_passes.c, `run --devices` with the passes at once, without a GPU:
 * CPU children stand in for the pass processes of entries 1 and 2 and send their records as a
 * pass process does (audit_pass_send_record, audit_pass_send_end), entry 2 faster than entry 1,
 * so that their messages arrive out of list order. Checked: every record's per_device[] comes out
 * in list order (0, 1, 2) with each device's own entry, the table lines and pass_start callbacks
 * come pass by pass in list order, the cross_device list names the devices in order, a failing
 * verdict on a later device fails the run; a pass process that crashes after its first record
 * loses its device (exit 4 material: any_device_lost, a message naming the entry and the
 * signal) while the other pass is merged whole; a pass that reports its device lost is folded
 * in; after a fatal stop of the main process the pass processes are killed and what they sent
 * is still merged; no child is left. */
#include <errno.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
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

#include "audit_internal.h"
#include "document_context.h"
#include "synth.h"

#define ENTRIES 3
#define RECORDS 2
#define MAX_SEEN 32

/* What a stand-in pass process does. */
enum pass_behaviour {
    PASS_WHOLE,            /* both records, then its end */
    PASS_CRASH_AFTER_ONE,  /* the first record, then SIGSEGV */
    PASS_DEVICE_LOST,      /* both records, then an end saying the device was lost */
    PASS_FAILS,            /* both records, the second with verdict fail */
    PASS_HANG_AFTER_ONE,   /* the first record, then nothing */
};

static enum pass_behaviour behaviour[ENTRIES];
/* A hanging stand-in writes a byte here once its first record is sent (-1: nowhere). */
static int sent_fd = -1;
static struct capture_record records[RECORDS];

struct seen {
    size_t done, passes_started, messages;
    size_t done_pass[MAX_SEEN];
    char done_line[MAX_SEEN][64];
    size_t started[MAX_SEEN];
    char message[MAX_SEEN][512];
};

static void on_record_done(void *user, size_t pass, const char *const *lines, size_t count)
{
    struct seen *seen = user;
    assert_int_equal(count, 1);
    assert_true(seen->done < MAX_SEEN);
    seen->done_pass[seen->done] = pass;
    snprintf(seen->done_line[seen->done], sizeof(seen->done_line[0]), "%s",
             lines[0] ? lines[0] : "(null)");
    seen->done++;
}

static void on_pass_start(void *user, size_t pass, int ordinal,
                          const struct gpu_device_info *device)
{
    struct seen *seen = user;
    (void)ordinal;
    (void)device;
    seen->started[seen->passes_started++] = pass;
}

static void on_message(void *user, enum audit_message_kind kind, const char *text)
{
    struct seen *seen = user;
    (void)kind;
    if (seen->messages < MAX_SEEN)
        snprintf(seen->message[seen->messages++], sizeof(seen->message[0]), "%s", text);
}

/* A backend entry of device `pass` for record r: its output hash names both. */
static cJSON *make_entry(size_t pass, int r, bool fail)
{
    char hash[32];
    snprintf(hash, sizeof(hash), "p%zur%d", pass, r);
    cJSON *entry = cJSON_CreateObject();
    assert_non_null(entry);
    cJSON_AddStringToObject(entry, "name", "sort");
    cJSON_AddStringToObject(entry, "status", "ok");
    cJSON_AddStringToObject(entry, "verdict", fail ? "fail" : "pass");
    cJSON *hashes = cJSON_AddArrayToObject(entry, "output_sha256_per_rep");
    cJSON_AddItemToArray(hashes, cJSON_CreateString(hash));
    return entry;
}

static struct record_result result_of(int r)
{
    const struct record_result result = { .file = "x.bin", .record = &records[r], .k = 16 };
    return result;
}

static void sleep_ms(long ms)
{
    struct timespec pause = { ms / 1000, (ms % 1000) * 1000000L };
    nanosleep(&pause, NULL);
}

/* A pass process's stand-in (worker_child_fn): entry 2 is quicker than entry 1. */
static int fake_pass(struct worker_channel *channel, size_t pass, void *user)
{
    struct audit_state *state = user;
    state->passes = NULL;
    state->pass_channel = channel;
    state->pass.index = pass;
    for (int r = 0; r < RECORDS; r++) {
        sleep_ms((long)(ENTRIES - pass) * 40);
        struct record_result result = result_of(r);
        cJSON *entries[1] = { make_entry(pass, r, behaviour[pass] == PASS_FAILS && r == 1) };
        char line[64];
        snprintf(line, sizeof(line), "entry %zu record %d\n", pass, r);
        char *lines[2] = { line, NULL };
        bool failed[1] = { false };
        const struct record_job job = { .state = state, .base = &result, .entries = entries,
                                        .table_lines = lines, .failed = failed };
        struct audit_error err = { 0 };
        if (audit_pass_send_record(state, &result, &job, &err) < 0)
            return 2;
        if (r == 0 && behaviour[pass] == PASS_CRASH_AFTER_ONE) {
            signal(SIGSEGV, SIG_DFL);
            raise(SIGSEGV);
        }
        if (r == 0 && behaviour[pass] == PASS_HANG_AFTER_ONE) {
            if (sent_fd >= 0 && write(sent_fd, "s", 1) != 1)
                return 2;
            for (;;)
                pause();
        }
    }
    if (behaviour[pass] == PASS_DEVICE_LOST) {
        state->device_failed = true;
        snprintf(state->stop_reason, sizeof(state->stop_reason), "device 0 fell off the bus");
    }
    return audit_pass_send_end(state) < 0 ? 2 : 0;
}

struct fixture {
    const struct topk_backend *backends[1];
    int devices[ENTRIES];
    struct audit_options options;
    struct audit_callbacks callbacks;
    struct seen seen;
    struct audit_state state;
    cJSON *devices_json;
};

/* The main process after its own pass: the report holds both records with entry 0's entries. */
static struct fixture *begin(void)
{
    struct fixture *f = calloc(1, sizeof(*f));
    struct audit_error err = { 0 };
    struct run_context context = { 0 };
    assert_non_null(f);
    f->backends[0] = topk_backend_find("sort");
    assert_non_null(f->backends[0]);
    f->options = (struct audit_options){ .backends = f->backends, .backend_count = 1,
                                         .devices = f->devices, .device_count = ENTRIES,
                                         .devices_text = "0,0,0", .timeout_ms = 10000 };
    f->callbacks = (struct audit_callbacks){ .user = &f->seen, .message = on_message,
                                             .pass_start = on_pass_start,
                                             .record_done = on_record_done };
    struct audit_state *state = &f->state;
    state->options = &f->options;
    state->callbacks = &f->callbacks;
    state->device_count = ENTRIES;
    state->device_available = true;
    worker_session_init(&state->pass.session, NULL, NULL, NULL);
    static const char *const names[] = { "sort" };
    document_context_fill(&context.document, "test", "test_audit_passes");
    context.noise = "none";
    context.backends = names;
    context.backend_count = 1;
    assert_int_equal(report_begin(&state->report, &context, &err), 0);
    f->devices_json = audit_devices_begin(state);
    assert_non_null(f->devices_json);
    for (int r = 0; r < RECORDS; r++) {
        struct record_result result = result_of(r);
        cJSON *entries[1] = { make_entry(0, r, false) };
        assert_int_equal(audit_add_record(state, &result, entries, (uint64_t)r, &err), 0);
        cJSON_Delete(entries[0]);
    }
    return f;
}

static void end(struct fixture *f)
{
    audit_passes_free(&f->state);
    report_release(&f->state.report);
    cJSON_Delete(f->state.pass.device_identity);
    cJSON_Delete(f->devices_json);
    audit_records_added_free(&f->state.added);
    free(f);
    errno = 0;
    assert_int_equal(waitpid(-1, NULL, WNOHANG), -1);
    assert_int_equal(errno, ECHILD);
}

/* The device indices of record r's per_device[] and, in hashes, their outputs. */
static size_t per_device(const struct fixture *f, int r, int *indices, char hashes[][32])
{
    const cJSON *record = cJSON_GetArrayItem(f->state.report.records, r);
    const cJSON *backend = cJSON_GetArrayItem(cJSON_GetObjectItem(record, "backends"), 0);
    const cJSON *list = cJSON_GetObjectItem(backend, "per_device");
    size_t count = 0;
    const cJSON *item;
    cJSON_ArrayForEach(item, list) {
        const cJSON *device = cJSON_GetObjectItem(item, "device");
        indices[count] = (int)cJSON_GetNumberValue(cJSON_GetObjectItem(device, "index"));
        snprintf(hashes[count], 32, "%s",
                 cJSON_GetArrayItem(cJSON_GetObjectItem(item, "output_sha256_per_rep"), 0)
                     ->valuestring);
        count++;
    }
    return count;
}

static void run_passes(struct fixture *f)
{
    struct audit_state *state = &f->state;
    assert_int_equal(audit_passes_start_processes(state, fake_pass), 0);
    assert_true(state->devices_concurrent);
    /* The main process reads between its records as it goes. */
    for (int i = 0; i < 5; i++) {
        audit_passes_read(state);
        sleep_ms(20);
    }
    state->any_device_lost = state->device_failed;
    audit_passes_finish(state, f->devices_json);
}

static void test_merged_in_list_order(void **unused)
{
    (void)unused;
    behaviour[1] = behaviour[2] = PASS_WHOLE;
    struct fixture *f = begin();
    run_passes(f);
    for (int r = 0; r < RECORDS; r++) {
        int indices[8];
        char hashes[8][32];
        assert_int_equal(per_device(f, r, indices, hashes), ENTRIES);
        for (int d = 0; d < ENTRIES; d++) {
            char want[32];
            snprintf(want, sizeof(want), "p%dr%d", d, r);
            assert_int_equal(indices[d], d);
            assert_string_equal(hashes[d], want);
        }
    }
    /* The table: entry 1's block, then entry 2's, each headed by its pass_start. */
    assert_int_equal(f->seen.passes_started, 2);
    assert_int_equal(f->seen.started[0], 1);
    assert_int_equal(f->seen.started[1], 2);
    assert_int_equal(f->seen.done, 2 * RECORDS);
    for (size_t i = 0; i < f->seen.done; i++) {
        char want[64];
        snprintf(want, sizeof(want), "entry %zu record %zu\n", 1 + i / RECORDS, i % RECORDS);
        assert_int_equal(f->seen.done_pass[i], 1 + i / RECORDS);
        assert_string_equal(f->seen.done_line[i], want);
    }
    assert_int_equal(cJSON_GetArraySize(f->devices_json), ENTRIES);
    for (int d = 0; d < ENTRIES; d++)
        assert_int_equal(cJSON_GetNumberValue(cJSON_GetObjectItem(
                             cJSON_GetArrayItem(f->devices_json, d), "index")),
                         d);
    assert_false(f->state.any_device_lost);
    assert_false(f->state.any_failure);
    assert_false(f->state.stopped);
    assert_int_equal(f->seen.messages, 0);
    end(f);
}

static void test_a_failing_verdict_on_a_later_device_fails_the_run(void **unused)
{
    (void)unused;
    behaviour[1] = PASS_WHOLE;
    behaviour[2] = PASS_FAILS;
    struct fixture *f = begin();
    run_passes(f);
    assert_true(f->state.any_failure);
    assert_false(f->state.any_device_lost);
    end(f);
}

static void test_a_crashed_pass_loses_its_device_alone(void **unused)
{
    (void)unused;
    behaviour[1] = PASS_CRASH_AFTER_ONE;
    behaviour[2] = PASS_WHOLE;
    struct fixture *f = begin();
    run_passes(f);
    int indices[8];
    char hashes[8][32];
    assert_int_equal(per_device(f, 0, indices, hashes), 3);
    assert_int_equal(per_device(f, 1, indices, hashes), 2);
    assert_int_equal(indices[0], 0);
    assert_int_equal(indices[1], 2);
    assert_string_equal(hashes[1], "p2r1");
    assert_true(f->state.any_device_lost);
    assert_false(f->state.stopped);
    assert_int_equal(f->seen.messages, 1);
    if (!strstr(f->seen.message[0], "--devices entry 1 (ordinal 0): its pass process ended: "
                                    "killed by signal SIGSEGV"))
        fail_msg("message: %s", f->seen.message[0]);
    if (!strstr(f->state.stop_reason, "--devices entry 1"))
        fail_msg("stop_reason: %s", f->state.stop_reason);
    end(f);
}

static void test_a_lost_device_is_folded_in(void **unused)
{
    (void)unused;
    behaviour[1] = PASS_WHOLE;
    behaviour[2] = PASS_DEVICE_LOST;
    struct fixture *f = begin();
    run_passes(f);
    int indices[8];
    char hashes[8][32];
    assert_int_equal(per_device(f, 1, indices, hashes), 3);
    assert_true(f->state.any_device_lost);
    assert_string_equal(f->state.stop_reason, "device 0 fell off the bus");
    /* Its process said it already: nothing is said twice. */
    assert_int_equal(f->seen.messages, 0);
    end(f);
}

static void test_a_fatal_stop_kills_the_passes_and_keeps_what_came(void **unused)
{
    (void)unused;
    behaviour[1] = behaviour[2] = PASS_HANG_AFTER_ONE;
    struct fixture *f = begin();
    struct audit_state *state = &f->state;
    int sent[2];
    assert_int_equal(pipe(sent), 0);
    sent_fd = sent[1];
    assert_int_equal(audit_passes_start_processes(state, fake_pass), 0);
    close(sent[1]); /* the children hold it: a read of 0 means they died */
    sent_fd = -1;
    /* Both have sent their first record (and hang): then the main process stops. */
    char bytes[ENTRIES - 1];
    for (size_t got = 0; got < sizeof(bytes);) {
        const ssize_t n = read(sent[0], bytes + got, sizeof(bytes) - got);
        assert_true(n > 0 || (n < 0 && errno == EINTR));
        got += n > 0 ? (size_t)n : 0;
    }
    close(sent[0]);
    audit_stop(state, AUDIT_ENOMEM, "out of memory");
    audit_passes_finish(state, f->devices_json);
    int indices[8];
    char hashes[8][32];
    assert_int_equal(per_device(f, 0, indices, hashes), 3);
    assert_int_equal(per_device(f, 1, indices, hashes), 1);
    assert_false(state->any_device_lost);
    assert_int_equal(f->seen.messages, 1); /* the stop itself */
    end(f);
}

static int setup(void **unused)
{
    (void)unused;
    for (int r = 0; r < RECORDS; r++) {
        struct synth_params params = { .family = "random", .rows = 2, .length = 64, .k = 16,
                                       .seed = (uint64_t)r };
        struct audit_error err = { 0 };
        assert_int_equal(synth_generate(&params, &records[r], &err), 0);
        records[r].index = (uint32_t)r;
    }
    return 0;
}

static int teardown(void **unused)
{
    (void)unused;
    for (int r = 0; r < RECORDS; r++)
        capture_record_free(&records[r]);
    return 0;
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_merged_in_list_order),
        cmocka_unit_test(test_a_failing_verdict_on_a_later_device_fails_the_run),
        cmocka_unit_test(test_a_crashed_pass_loses_its_device_alone),
        cmocka_unit_test(test_a_lost_device_is_folded_in),
        cmocka_unit_test(test_a_fatal_stop_kills_the_passes_and_keeps_what_came),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
