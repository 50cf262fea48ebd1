/* The tally queue (src/replay/tally_queue.h): outputs added on its thread beside the reps give the
 * entry that adding them in the rep gives, times aside; its failures come back; its slots are
 * reused when every one is taken. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "checks.h"
#include "hash.h"
#include "report.h"
#include "synth.h"
#include "tally_queue.h"

/* More reps than TALLY_QUEUE_MAX_SLOTS, so that the reps wait for slots. */
#define QUEUE_REPS 48u
#define QUEUE_GRAPH_REPS 12u

static const struct topk_backend flapping_backend = {
    .name = "flapping", .level = TOPK_NOT_GUARANTEED,
};

/* Rep r's rows: the reference's, rows with (row + r) % 4 == 0 in the first rep's order and the
 * others shuffled by (r / 2, row), so reps come in pairs of equal outputs when r is even (r and
 * r + 1 share r / 2) but for a few; every fifth rep selects one index twice in row 1. */
static void make_outputs(const struct check_context *checks, int32_t *outs, int32_t *raws)
{
    const uint32_t rows = checks->rows, k = checks->k;
    const size_t count = (size_t)rows * k;
    for (uint32_t rep = 0; rep < QUEUE_REPS; rep++) {
        int32_t *out = outs + rep * count, *raw = raws + rep * count;
        memcpy(out, checks->reference, count * sizeof(int32_t));
        memcpy(raw, checks->reference_raw, count * sizeof(int32_t));
        const uint32_t draw = rep % 7 == 3 ? rep + 1000 : rep / 2;
        for (uint32_t b = 0; b < rows; b++) {
            int32_t *out_row = out + (size_t)b * k, *raw_row = raw + (size_t)b * k;
            struct synth_rng rng;
            synth_rng_seed(&rng, draw == 0 || (b + draw) % 4 == 0 ? b
                                                                  : ((uint64_t)draw << 32) | b);
            for (uint32_t i = k; i > 1; i--) {
                const uint32_t j = (uint32_t)(synth_rng_next(&rng) % i);
                int32_t swap = out_row[i - 1];
                out_row[i - 1] = out_row[j];
                out_row[j] = swap;
                swap = raw_row[i - 1];
                raw_row[i - 1] = raw_row[j];
                raw_row[j] = swap;
            }
            if (draw % 5 == 4 && b == 1) {
                out_row[k - 1] = out_row[0];
                raw_row[k - 1] = raw_row[0];
            }
        }
    }
}

/* The source of rep (eager reps, then graph replays of the last eager outputs). */
static uint32_t source_of(uint32_t rep)
{
    return rep < QUEUE_REPS ? rep : QUEUE_REPS - QUEUE_GRAPH_REPS + (rep - QUEUE_REPS);
}

/* The entry without its times and host work (what the queue may change). */
static cJSON *entry_without_timing(const struct backend_result *result,
                                   const struct record_result *record)
{
    struct verdict_result verdict;
    report_verdict(result, record->census_rows, &verdict);
    cJSON *entry = report_backend_json(record, result, &verdict);
    assert_non_null(entry);
    cJSON_DeleteItemFromObject(entry, "time_breakdown_ms");
    cJSON *work = cJSON_DetachItemFromObject(entry, "host_work");
    assert_non_null(work);
    /* The counts of the host work stay: only its times may change. */
    cJSON_DeleteItemFromObject(work, "beside_reps");
    cJSON_DeleteItemFromObject(work, "hash_ms");
    cJSON_DeleteItemFromObject(work, "check_ms");
    cJSON_AddItemToObject(entry, "host_work_counts", work);
    return entry;
}

/* In the rep, as src/replay/replay.c did before the queue. */
static void feed_in_rep(struct backend_result *result, struct check_context *checks,
                        const int32_t *outs, const int32_t *raws, bool prefilter)
{
    const uint32_t rows = checks->rows, k = checks->k;
    const size_t count = (size_t)rows * k;
    const struct check_claims claims = { 0 };
    struct audit_error err = { 0 };
    uint64_t row_hashes[64];
    for (uint32_t rep = 0; rep < QUEUE_REPS + QUEUE_GRAPH_REPS; rep++) {
        struct output_tally *tally = rep < QUEUE_REPS ? &result->eager : &result->graph;
        const int32_t *out = outs + source_of(rep) * count, *raw = raws + source_of(rep) * count;
        hash_output_rows64(out, raw, rows, k, row_hashes);
        if (prefilter && output_tally_add_if_known(tally, row_hashes, 1.0 + rep))
            continue;
        result->outputs_copied++;
        if (output_tally_add_hashed(tally, out, raw, prefilter ? row_hashes : NULL, 1.0 + rep,
                                    checks, &claims, checks->reference, &err) != AUDIT_OK)
            fail_msg("in the rep: %s", err.message);
    }
}

/* Through one queue per tally, as src/replay/replay.c does now. */
static void feed_queued(struct backend_result *result, struct check_context *checks,
                        const int32_t *outs, const int32_t *raws, bool prefilter)
{
    const uint32_t rows = checks->rows, k = checks->k;
    const size_t count = (size_t)rows * k;
    const struct check_claims claims = { 0 };
    struct audit_error err = { 0 };
    uint64_t row_hashes[64];
    struct tally_queue *queue = NULL;
    for (uint32_t rep = 0; rep < QUEUE_REPS + QUEUE_GRAPH_REPS; rep++) {
        struct output_tally *tally = rep < QUEUE_REPS ? &result->eager : &result->graph;
        if (rep == 0 || rep == QUEUE_REPS) {
            /* The graph tally's baseline is the first eager output: the eager queue ends first. */
            assert_int_equal(tally_queue_finish(queue, &err), AUDIT_OK);
            assert_int_equal(tally_queue_create(&queue, tally, checks, &claims, checks->reference,
                                                true, prefilter, &err),
                             AUDIT_OK);
        }
        const int32_t *out = outs + source_of(rep) * count, *raw = raws + source_of(rep) * count;
        hash_output_rows64(out, raw, rows, k, row_hashes);
        if (prefilter && tally_queue_add_if_known(queue, row_hashes, 1.0 + rep))
            continue;
        struct tally_slot *slot = NULL;
        if (tally_queue_slot(queue, &slot, &err) != AUDIT_OK)
            fail_msg("slot: %s", err.message);
        assert_non_null(slot->raw);
        assert_true(prefilter ? slot->row_hashes != NULL : slot->row_hashes == NULL);
        memcpy(slot->out, out, count * sizeof(int32_t));
        memcpy(slot->raw, raw, count * sizeof(int32_t));
        if (prefilter)
            memcpy(slot->row_hashes, row_hashes, rows * sizeof(uint64_t));
        result->outputs_copied++;
        if (tally_queue_add(queue, slot, 1.0 + rep, &err) != AUDIT_OK)
            fail_msg("add: %s", err.message);
    }
    assert_int_equal(tally_queue_finish(queue, &err), AUDIT_OK);
}

static cJSON *fed_entry(bool queued, const char *threads, bool prefilter,
                        struct check_context *checks, const struct record_result *record,
                        const int32_t *outs, const int32_t *raws)
{
    struct audit_error err = { 0 };
    struct backend_result result;
    if (threads)
        assert_int_equal(setenv("DSATOPK_HOST_THREADS", threads, 1), 0);
    backend_result_init(&result, &flapping_backend);
    result.gpu_prefilter = prefilter;
    result.graph_requested = result.graph_ran = true;
    assert_int_equal(output_tally_init(&result.eager, checks->rows, checks->k, QUEUE_REPS, NULL,
                                       &err),
                     AUDIT_OK);
    assert_int_equal(output_tally_init(&result.graph, checks->rows, checks->k, QUEUE_GRAPH_REPS,
                                       outs, &err),
                     AUDIT_OK);
    const double started_ms = report_monotonic_ms();
    if (queued)
        feed_queued(&result, checks, outs, raws, prefilter);
    else
        feed_in_rep(&result, checks, outs, raws, prefilter);
    const double wall_ms = report_monotonic_ms() - started_ms;
    if (threads)
        assert_int_equal(unsetenv("DSATOPK_HOST_THREADS"), 0);
    /* On the thread, only the wait is the backend's time, and it is part of the wall time. */
    const bool beside = queued && !(threads && strcmp(threads, "1") == 0);
    assert_true(result.eager.beside_reps == beside && result.graph.beside_reps == beside);
    struct time_breakdown time;
    backend_result_time_breakdown(&result, &time);
    assert_true(time.hash_ms + time.check_ms <= wall_ms);
    if (beside)
        assert_true(result.eager.beside_wait_ms + result.graph.beside_wait_ms <= wall_ms);
    cJSON *entry = entry_without_timing(&result, record);
    backend_result_release(&result);
    return entry;
}

static void test_queue_changes_nothing_but_times(void **state)
{
    (void)state;
    struct audit_error err = { 0 };
    struct capture_record record = { 0 };
    struct check_context checks;
    const struct synth_params params = {
        .family = "paged", .rows = 16, .length = 2048, .k = 128, .seed = 9, .page_size = 64,
    };
    assert_int_equal(synth_generate(&params, &record, &err), AUDIT_OK);
    assert_int_equal(checks_prepare(&checks, &record, 0, &err), AUDIT_OK);
    const size_t count = (size_t)checks.rows * checks.k;
    int32_t *outs = malloc(QUEUE_REPS * count * sizeof(int32_t));
    int32_t *raws = malloc(QUEUE_REPS * count * sizeof(int32_t));
    assert_non_null(outs);
    assert_non_null(raws);
    make_outputs(&checks, outs, raws);
    const struct record_result record_result = { .file = "paged.bin", .record = &record,
                                                 .k = checks.k };
    for (int prefilter = 0; prefilter < 2; prefilter++) {
        cJSON *in_rep = fed_entry(false, NULL, prefilter, &checks, &record_result, outs, raws);
        /* Something to compare: repeats, violations, flapping rows, graph mismatches. */
        const int distinct = cJSON_GetObjectItem(in_rep, "distinct_outputs")->valueint;
        assert_true(distinct > (int)TALLY_QUEUE_MAX_SLOTS / 2 && distinct < (int)QUEUE_REPS);
        assert_true(cJSON_GetObjectItem(in_rep, "flapping_rows_total")->valueint > 0);
        const cJSON *duplicates = cJSON_GetObjectItem(
            cJSON_GetObjectItem(cJSON_GetObjectItem(in_rep, "violations"), "duplicate"),
            "total_rows");
        assert_true(duplicates->valueint > 0);
        static const char *const settings[] = { NULL, "1", "2", "8" };
        for (size_t i = 0; i < sizeof(settings) / sizeof(settings[0]); i++) {
            cJSON *queued = fed_entry(true, settings[i], prefilter, &checks, &record_result,
                                      outs, raws);
            if (!cJSON_Compare(in_rep, queued, true)) {
                char *a = cJSON_Print(in_rep), *b = cJSON_Print(queued);
                fail_msg("DSATOPK_HOST_THREADS=%s, pre-filter %d changed the entry:\n%s\n%s",
                         settings[i] ? settings[i] : "(unset)", prefilter, a, b);
            }
            cJSON_Delete(queued);
        }
        cJSON_Delete(in_rep);
    }
    free(outs);
    free(raws);
    checks_release(&checks);
    capture_record_free(&record);
}

/* An output whose host work fails (a paged record's output without its raw indices) fails the
 * next slot or the finish with the tally's error, on the thread and inline alike. */
static void test_queue_failure_comes_back(void **state)
{
    (void)state;
    struct audit_error err = { 0 };
    struct capture_record record = { 0 };
    struct check_context checks;
    const struct check_claims claims = { 0 };
    const struct synth_params params = {
        .family = "paged", .rows = 4, .length = 1024, .k = 64, .seed = 3, .page_size = 64,
    };
    assert_int_equal(synth_generate(&params, &record, &err), AUDIT_OK);
    assert_int_equal(checks_prepare(&checks, &record, 0, &err), AUDIT_OK);
    const size_t count = (size_t)checks.rows * checks.k;
    static const char *const settings[] = { NULL, "1" };
    for (size_t i = 0; i < 2; i++) {
        if (settings[i])
            assert_int_equal(setenv("DSATOPK_HOST_THREADS", settings[i], 1), 0);
        struct output_tally tally;
        struct tally_queue *queue = NULL;
        assert_int_equal(output_tally_init(&tally, checks.rows, checks.k, 4, NULL, &err),
                         AUDIT_OK);
        assert_int_equal(tally_queue_create(&queue, &tally, &checks, &claims, checks.reference,
                                            false, false, &err),
                         AUDIT_OK);
        int status = AUDIT_OK;
        for (uint32_t rep = 0; rep < 4 && status == AUDIT_OK; rep++) {
            struct tally_slot *slot = NULL;
            status = tally_queue_slot(queue, &slot, &err);
            if (status != AUDIT_OK)
                break;
            assert_null(slot->raw);
            memcpy(slot->out, checks.reference, count * sizeof(int32_t));
            status = tally_queue_add(queue, slot, 1.0, &err);
        }
        const int finished = tally_queue_finish(queue, &err);
        assert_int_equal(status == AUDIT_OK ? finished : status, AUDIT_EUSAGE);
        assert_non_null(strstr(err.message, "raw"));
        assert_int_equal(tally.distinct_count, 0);
        output_tally_release(&tally);
        if (settings[i])
            assert_int_equal(unsetenv("DSATOPK_HOST_THREADS"), 0);
    }
    checks_release(&checks);
    capture_record_free(&record);
}

/* Without the thread a slot taken and never handed over (a rep that failed after taking it)
 * leaves none for the next: an error, not a wait that nothing would end. */
static void test_queue_inline_slot_not_handed_over(void **state)
{
    (void)state;
    struct audit_error err = { 0 };
    struct output_tally tally;
    struct tally_queue *queue = NULL;
    struct tally_slot *slot = NULL;
    assert_int_equal(setenv("DSATOPK_HOST_THREADS", "1", 1), 0);
    assert_int_equal(output_tally_init(&tally, 2, 4, 1, NULL, &err), AUDIT_OK);
    assert_int_equal(tally_queue_create(&queue, &tally, NULL, NULL, NULL, false, false, &err),
                     AUDIT_OK);
    assert_int_equal(tally_queue_slot(queue, &slot, &err), AUDIT_OK);
    assert_non_null(slot);
    assert_int_equal(tally_queue_slot(queue, &slot, &err), AUDIT_EUSAGE);
    assert_null(slot);
    assert_non_null(strstr(err.message, "slot"));
    assert_int_equal(tally_queue_finish(queue, &err), AUDIT_OK);
    assert_int_equal(tally.reps, 0);
    output_tally_release(&tally);
    assert_int_equal(unsetenv("DSATOPK_HOST_THREADS"), 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_queue_changes_nothing_but_times),
        cmocka_unit_test(test_queue_failure_comes_back),
        cmocka_unit_test(test_queue_inline_slot_not_handed_over),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
