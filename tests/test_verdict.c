/* Unit tests of the verdict module (src/verdict/verdict.c): the words round-trip, the rule table
 * says what docs/REPORT.md "Verdicts" says, and the judge gives the same findings whoever fills
 * the evidence: run from its tallies and gate from a report document differ only in wording and
 * in how much the census lets them forgive, never in what a level forbids. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "verdict.h"

/* ---- findings collected ---------------------------------------------------------------------- */

#define MAX_COLLECTED 64

struct collected {
    unsigned count, failures, notes;
    struct verdict_finding findings[MAX_COLLECTED];
};

static void collect(void *context, const struct verdict_finding *found)
{
    struct collected *collected = context;
    assert_true(collected->count < MAX_COLLECTED);
    collected->findings[collected->count++] = *found;
    collected->failures += found->fails;
    collected->notes += found->note;
}

static enum verdict judge(const struct verdict_evidence *evidence, struct collected *collected)
{
    memset(collected, 0, sizeof(*collected));
    return verdict_judge(evidence, collect, collected);
}

/* The first finding of check (and kind, for violations), or NULL. */
static const struct verdict_finding *find(const struct collected *collected,
                                          enum verdict_check check, unsigned kind, bool graph)
{
    for (unsigned i = 0; i < collected->count; i++) {
        const struct verdict_finding *found = &collected->findings[i];
        if (found->check == check && found->graph == graph &&
            (check != VERDICT_CHECK_VIOLATION || found->kind == kind))
            return found;
    }
    return NULL;
}

/* An ok backend whose reps showed nothing wrong, from tallies or from a document. */
static void clean_evidence(struct verdict_evidence *evidence, enum verdict_source source,
                           const char *backend, enum topk_determinism level)
{
    memset(evidence, 0, sizeof(*evidence));
    evidence->source = source;
    evidence->backend = backend;
    evidence->level = level;
    evidence->status = BACKEND_OK;
    evidence->reference_hash = "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef";
    evidence->eager.reps = evidence->eager.compared = 5;
    evidence->eager.distinct_outputs = evidence->eager.distinct_sets = 1;
    evidence->eager.has_violations = true;
}

/* ---- words ---------------------------------------------------------------------------------- */

static void test_words_round_trip(void **state)
{
    (void)state;
    for (int s = BACKEND_OK; s < BACKEND_STATUS_COUNT; s++) {
        enum backend_status status;
        assert_int_equal(backend_status_parse(backend_status_name((enum backend_status)s), &status),
                         0);
        assert_int_equal(status, s);
    }
    for (int v = VERDICT_PASS; v < VERDICT_COUNT; v++) {
        enum verdict verdict;
        assert_int_equal(verdict_parse(verdict_name((enum verdict)v), &verdict), 0);
        assert_int_equal(verdict, v);
    }
    for (int s = GATE_PASS; s < GATE_STATUS_COUNT; s++) {
        enum gate_status status;
        assert_int_equal(gate_status_parse(gate_status_name((enum gate_status)s), &status), 0);
        assert_int_equal(status, s);
    }
    for (int l = TOPK_NOT_GUARANTEED; l <= TOPK_GPU_TO_GPU; l++) {
        enum topk_determinism level;
        assert_int_equal(determinism_level_parse(topk_determinism_name((enum topk_determinism)l),
                                                 &level), 0);
        assert_int_equal(level, l);
    }
    enum verdict verdict = VERDICT_PASS;
    enum gate_status status = GATE_PASS;
    assert_int_equal(verdict_parse("PASS", &verdict), -1);
    assert_int_equal(verdict_parse(NULL, &verdict), -1);
    assert_int_equal(gate_status_parse("tolerate", &status), -1);
    assert_int_equal(verdict, VERDICT_PASS);
    assert_string_equal(violation_name(CHECK_WRONG_SET), "wrong_set");
    assert_string_equal(violation_name(VIOLATION_GRAPH_MISMATCH), "graph_mismatch");
    assert_string_equal(violation_name(VIOLATION_KINDS), "unknown");
}

/* ---- rules ---------------------------------------------------------------------------------- */

static void test_rule_table(void **state)
{
    (void)state;
    const struct verdict_rule *gpu = verdict_rule_for(TOPK_GPU_TO_GPU);
    const struct verdict_rule *run = verdict_rule_for(TOPK_RUN_TO_RUN);
    const struct verdict_rule *none = verdict_rule_for(TOPK_NOT_GUARANTEED);
    assert_true(gpu->equal_reference && gpu->single_output && gpu->graph_equals_eager &&
                gpu->batch_invariant && gpu->forgiven_on_overflow == 0);
    assert_true(!run->equal_reference && run->single_output && run->graph_equals_eager &&
                !run->batch_invariant && run->same_output_per_model);
    assert_true(!none->single_output && !none->graph_equals_eager);
    assert_int_equal(none->forgiven_on_overflow, VIOLATION_WRONG_KINDS);
    /* An unknown level is judged strictly. */
    assert_ptr_equal(verdict_rule_for((enum topk_determinism)42), gpu);
    /* Devices must agree: gpu_to_gpu always, run_to_run on one model, not_guaranteed never. */
    assert_true(verdict_devices_must_agree(TOPK_GPU_TO_GPU, false));
    assert_true(verdict_devices_must_agree(TOPK_RUN_TO_RUN, true));
    assert_false(verdict_devices_must_agree(TOPK_RUN_TO_RUN, false));
    assert_false(verdict_devices_must_agree(TOPK_NOT_GUARANTEED, true));
    /* Only radix's staging drops candidates. */
    assert_true(staging_model_for("radix")->drops_on_overflow);
    assert_false(staging_model_for("filtered")->drops_on_overflow);
    assert_null(staging_model_for("bitonic"));
    assert_null(staging_model_for(NULL));
}

static void test_statuses(void **state)
{
    (void)state;
    struct verdict_evidence evidence;
    struct collected collected;
    clean_evidence(&evidence, VERDICT_FROM_DOCUMENT, "sort", TOPK_GPU_TO_GPU);
    evidence.status = BACKEND_UNSUPPORTED;
    evidence.reason = "k = 8192 > 4096";
    assert_int_equal(judge(&evidence, &collected), VERDICT_NOT_RUN);
    assert_int_equal(collected.count, 1);
    assert_int_equal(collected.failures, 0);
    assert_string_equal(collected.findings[0].text, "unsupported: k = 8192 > 4096");
    evidence.status = BACKEND_HANG;
    evidence.reason = NULL;
    assert_int_equal(judge(&evidence, &collected), VERDICT_FAIL);
    assert_int_equal(collected.failures, 1);
    assert_string_equal(collected.findings[0].text, "hang: (no reason)");
    for (int s = BACKEND_OK; s < BACKEND_STATUS_COUNT; s++) {
        enum verdict verdict = verdict_of_status((enum backend_status)s);
        assert_true(s == BACKEND_OK ? verdict == VERDICT_PASS : verdict != VERDICT_PASS);
    }
}

/* ---- one rule whoever asks ------------------------------------------------------------------ */

/* The same facts from tallies and from a document fail the same checks, in the same order. */
static void test_same_findings_from_tallies_and_documents(void **state)
{
    (void)state;
    const enum topk_determinism levels[] = { TOPK_NOT_GUARANTEED, TOPK_RUN_TO_RUN,
                                             TOPK_GPU_TO_GPU };
    for (size_t l = 0; l < sizeof(levels) / sizeof(levels[0]); l++) {
        struct verdict_evidence evidence[2];
        struct collected collected[2];
        enum verdict verdicts[2];
        for (int source = 0; source < 2; source++) {
            struct verdict_evidence *e = &evidence[source];
            clean_evidence(e, (enum verdict_source)source, "bitonic", levels[l]);
            e->eager.differ_from_reference = 2;
            e->eager.distinct_outputs = 2;
            e->eager.violations[CHECK_DUPLICATE].rows = 1;
            e->eager.violations[CHECK_DUPLICATE].total_rows = 3;
            e->graph_requested = e->graph_ran = true;
            e->graph.reps = e->graph.compared = 5;
            e->graph.has_violations = true;
            e->graph.violations[VIOLATION_GRAPH_MISMATCH].rows = 4;
            e->batch_requested = e->batch_ran = true;
            e->batch_dependent_rows = 3;
            verdicts[source] = judge(e, &collected[source]);
        }
        assert_int_equal(verdicts[0], VERDICT_FAIL);
        assert_int_equal(verdicts[0], verdicts[1]);
        assert_int_equal(collected[0].count, collected[1].count);
        for (unsigned i = 0; i < collected[0].count; i++) {
            assert_int_equal(collected[0].findings[i].check, collected[1].findings[i].check);
            assert_int_equal(collected[0].findings[i].fails, collected[1].findings[i].fails);
        }
        /* What each level forbids. */
        const struct verdict_rule *rule = verdict_rule_for(levels[l]);
        assert_true(find(&collected[0], VERDICT_CHECK_VIOLATION, CHECK_DUPLICATE, false) != NULL);
        assert_int_equal(find(&collected[0], VERDICT_CHECK_REFERENCE, 0, false) != NULL,
                         rule->equal_reference);
        assert_int_equal(find(&collected[0], VERDICT_CHECK_FLAPPING, 0, false) != NULL,
                         rule->single_output);
        assert_int_equal(find(&collected[0], VERDICT_CHECK_GRAPH_MISMATCH, 0, true) != NULL,
                         rule->graph_equals_eager);
        assert_int_equal(find(&collected[0], VERDICT_CHECK_BATCH_DEPENDENT, 0, false) != NULL,
                         rule->batch_invariant);
    }
}

/* The wording follows the evidence: run counts row-reps and per-rep maxima, gate names the
 * reference hash and the rows that show a finding. */
static void test_wording_by_source(void **state)
{
    (void)state;
    struct verdict_evidence evidence;
    struct collected collected;
    clean_evidence(&evidence, VERDICT_FROM_TALLIES, "sort", TOPK_GPU_TO_GPU);
    evidence.eager.differ_from_reference = 1;
    evidence.eager.distinct_outputs = 2;
    evidence.eager.distinct_sets = 1;
    judge(&evidence, &collected);
    assert_string_equal(find(&collected, VERDICT_CHECK_REFERENCE, 0, false)->text,
                        "output differs from the CPU reference in 1 of 5 rep(s) (claims "
                        "gpu_to_gpu)");
    assert_string_equal(find(&collected, VERDICT_CHECK_FLAPPING, 0, false)->text,
                        "2 distinct outputs over 5 reps, 1 distinct sets (claims gpu_to_gpu: one)");

    clean_evidence(&evidence, VERDICT_FROM_DOCUMENT, "sort", TOPK_GPU_TO_GPU);
    evidence.eager.differ_from_reference = 1;
    evidence.eager.distinct_outputs = 2;
    evidence.eager.flapping_rows = 7;
    evidence.baseline_hash = "fedcba9876543210fedcba9876543210fedcba9876543210fedcba9876543210";
    evidence.baseline_origin = "the baseline's sort output";
    evidence.eager.differ_from_baseline = 5;
    judge(&evidence, &collected);
    assert_string_equal(find(&collected, VERDICT_CHECK_REFERENCE, 0, false)->text,
                        "output differs from the CPU reference (0123456789ab) in 1 of 5 rep(s)");
    const struct verdict_finding *baseline = find(&collected, VERDICT_CHECK_BASELINE, 0, false);
    assert_non_null(baseline);
    assert_non_null(strstr(baseline->text, "5 of 5 rep(s) differ from the baseline's sort output "
                                           "(fedcba987654)"));
    const struct verdict_finding *flapping = find(&collected, VERDICT_CHECK_FLAPPING, 0, false);
    assert_int_equal(flapping->rows, VERDICT_ROWS_FLAPPING);
    assert_string_equal(flapping->rows_why, "flapping");
    assert_non_null(strstr(flapping->text, "7 flapping row(s)"));
    /* A baseline keeps distinct hashes only: the outputs compared are distinct ones. */
    evidence.eager.compared_distinct = true;
    evidence.eager.compared = 2;
    evidence.eager.has_violations = false;
    judge(&evidence, &collected);
    assert_non_null(strstr(find(&collected, VERDICT_CHECK_REFERENCE, 0, false)->text,
                           "in 1 of 2 distinct output(s)"));
    assert_non_null(find(&collected, VERDICT_CHECK_NO_COUNTS, 0, false));
}

/* ---- forgiveness on predicted staging overflow ---------------------------------------------- */

static void wrong_rows(struct verdict_evidence *evidence, uint64_t wrong_set, uint64_t shorts)
{
    evidence->eager.violations[CHECK_WRONG_SET].rows = wrong_set;
    evidence->eager.violations[CHECK_WRONG_SET].total_rows = wrong_set;
    evidence->eager.violations[CHECK_SHORT].rows = shorts;
    evidence->eager.violations[CHECK_SHORT].total_rows = shorts;
}

static void test_forgiveness_per_row(void **state)
{
    (void)state;
    struct verdict_evidence evidence;
    struct collected collected;
    clean_evidence(&evidence, VERDICT_FROM_TALLIES, "radix", TOPK_NOT_GUARANTEED);
    wrong_rows(&evidence, 3, 2);
    evidence.eager.overflow = OVERFLOW_PER_ROW;
    /* Every wrong_set row predicted; one short row not: only short fails, both are noted. */
    evidence.eager.violations[CHECK_SHORT].unpredicted_rows = 1;
    evidence.eager.violations[CHECK_SHORT].unpredicted_first[0] = 17;
    assert_int_equal(judge(&evidence, &collected), VERDICT_FAIL);
    assert_int_equal(collected.failures, 1);
    assert_string_equal(find(&collected, VERDICT_CHECK_VIOLATION, CHECK_SHORT, false)->text,
                        "short on 1 row(s) the census does not predict to overflow the radix_4096 "
                        "staging: 17");
    assert_int_equal(collected.notes, 2);
    /* Without the census nothing is forgiven. */
    evidence.eager.overflow = OVERFLOW_UNKNOWN;
    judge(&evidence, &collected);
    assert_int_equal(collected.failures, 2);
    assert_int_equal(collected.notes, 0);
    /* A backend claiming an exact set is never forgiven, nor is one whose staging rescans. */
    evidence.eager.overflow = OVERFLOW_PER_ROW;
    evidence.eager.violations[CHECK_SHORT].unpredicted_rows = 0;
    assert_int_equal(judge(&evidence, &collected), VERDICT_PASS);
    evidence.exact_set = true;
    assert_int_equal(judge(&evidence, &collected), VERDICT_FAIL);
    evidence.exact_set = false;
    evidence.backend = "filtered";
    assert_int_equal(judge(&evidence, &collected), VERDICT_FAIL);
    /* A level that forbids flapping forgives nothing either. */
    evidence.backend = "radix";
    evidence.level = TOPK_RUN_TO_RUN;
    assert_int_equal(judge(&evidence, &collected), VERDICT_FAIL);
}

static void test_forgiveness_from_documents(void **state)
{
    (void)state;
    struct verdict_evidence evidence;
    struct collected collected;
    clean_evidence(&evidence, VERDICT_FROM_DOCUMENT, "radix", TOPK_NOT_GUARANTEED);
    wrong_rows(&evidence, 3, 0);
    /* No predicted_vs_observed: failed, saying why. */
    assert_int_equal(judge(&evidence, &collected), VERDICT_FAIL);
    assert_non_null(strstr(collected.findings[0].text, "no predicted_vs_observed block"));
    /* Every wrong row predicted: forgiven, with a note. */
    evidence.eager.overflow = OVERFLOW_WRONG_ROWS;
    assert_int_equal(judge(&evidence, &collected), VERDICT_PASS);
    assert_int_equal(collected.notes, 1);
    /* Two not predicted: failed, the report's list of them attached. */
    evidence.eager.wrong_rows_not_predicted = 2;
    assert_int_equal(judge(&evidence, &collected), VERDICT_FAIL);
    const struct verdict_finding *found = find(&collected, VERDICT_CHECK_VIOLATION,
                                               CHECK_WRONG_SET, false);
    assert_int_equal(found->rows, VERDICT_ROWS_WRONG_NOT_PREDICTED);
    assert_string_equal(found->rows_why, "wrong_not_predicted_overflow");
    assert_string_equal(found->text, "wrong_set on 3 row(s); 2 row(s) with wrong_set or short are "
                                     "not predicted to overflow the radix_4096 staging");
    /* Graph replays: counts only, forgiven up to the rows the census predicts. */
    clean_evidence(&evidence, VERDICT_FROM_DOCUMENT, "radix", TOPK_NOT_GUARANTEED);
    evidence.graph_requested = evidence.graph_ran = true;
    evidence.graph.reps = evidence.graph.compared = 5;
    evidence.graph.has_violations = true;
    evidence.graph.overflow = OVERFLOW_COUNTS;
    evidence.graph.predicted_overflow_rows = 2;
    evidence.graph.violations[CHECK_WRONG_SET].rows = 2;
    assert_int_equal(judge(&evidence, &collected), VERDICT_PASS);
    evidence.graph.violations[CHECK_WRONG_SET].rows = 3;
    assert_int_equal(judge(&evidence, &collected), VERDICT_FAIL);
    assert_true(find(&collected, VERDICT_CHECK_VIOLATION, CHECK_WRONG_SET, true)->graph);
}

/* ---- run's stored verdict ------------------------------------------------------------------- */

static void test_judge_into(void **state)
{
    (void)state;
    struct verdict_evidence evidence;
    struct verdict_result result;
    clean_evidence(&evidence, VERDICT_FROM_TALLIES, "radix", TOPK_NOT_GUARANTEED);
    wrong_rows(&evidence, 2, 0);
    evidence.eager.overflow = OVERFLOW_PER_ROW;
    verdict_judge_into(&evidence, &result);
    assert_int_equal(result.verdict, VERDICT_PASS);
    assert_int_equal(result.reason_count, 1);
    assert_true(strncmp(result.reasons[0], "note: wrong_set on 2 row(s) forgiven", 36) == 0);
    /* Long reasons are cut to the stored size, a text past the last slot dropped. */
    char long_error[600];
    memset(long_error, 'x', sizeof(long_error) - 1);
    long_error[sizeof(long_error) - 1] = '\0';
    evidence.status = BACKEND_ERROR;
    evidence.reason = long_error;
    verdict_judge_into(&evidence, &result);
    assert_int_equal(result.verdict, VERDICT_FAIL);
    assert_int_equal(strlen(result.reasons[0]), VERDICT_REASON_BYTES - 1);
    assert_true(strncmp(result.reasons[0], "error: xxx", 10) == 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_words_round_trip),
        cmocka_unit_test(test_rule_table),
        cmocka_unit_test(test_statuses),
        cmocka_unit_test(test_same_findings_from_tallies_and_documents),
        cmocka_unit_test(test_wording_by_source),
        cmocka_unit_test(test_forgiveness_per_row),
        cmocka_unit_test(test_forgiveness_from_documents),
        cmocka_unit_test(test_judge_into),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
