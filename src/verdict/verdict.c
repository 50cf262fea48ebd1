/* The verdict rule and its judge (verdict.h): one table says what each claimed level must show,
 * verdict_judge() applies it to the evidence of `run` and of `gate` alike. */
#include "verdict.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "report_keys.h"

#define KIND_BIT(kind) (1u << (kind))
#define ALL_CHECK_KINDS ((1u << CHECK_KIND_COUNT) - 1u)

/* ---- words ---------------------------------------------------------------------------------- */

const char *violation_name(unsigned kind)
{
    if (kind < (unsigned)CHECK_KIND_COUNT)
        return check_kind_name((enum check_kind)kind);
    if (kind == VIOLATION_GRAPH_MISMATCH)
        return "graph_mismatch";
    return "unknown";
}

/* The names of each enum, indexed by its values. */
static const char *const backend_status_names[BACKEND_STATUS_COUNT] = {
    [BACKEND_OK] = "ok",
    [BACKEND_UNSUPPORTED] = "unsupported",
    [BACKEND_UNAVAILABLE] = "unavailable",
    [BACKEND_ERROR] = "error",
    [BACKEND_SKIPPED] = "skipped",
    [BACKEND_HANG] = "hang",
    [BACKEND_CRASH] = "crash",
    [BACKEND_CUDA_ERROR] = "cuda_error",
};
static const char *const verdict_names[VERDICT_COUNT] = {
    [VERDICT_PASS] = "pass", [VERDICT_FAIL] = "fail", [VERDICT_NOT_RUN] = "not_run",
};
static const char *const gate_status_names[GATE_STATUS_COUNT] = {
    [GATE_PASS] = "pass", [GATE_FAIL] = "fail", [GATE_TOLERATED] = "tolerated",
    [GATE_MISSING] = "missing",
};

static const char *name_of(const char *const *names, int count, int value)
{
    return value >= 0 && value < count ? names[value] : "unknown";
}

/* The value named name, or -1. */
static int value_named(const char *const *names, int count, const char *name)
{
    for (int value = 0; name && value < count; value++)
        if (strcmp(name, names[value]) == 0)
            return value;
    return -1;
}

const char *backend_status_name(enum backend_status status)
{
    return name_of(backend_status_names, BACKEND_STATUS_COUNT, (int)status);
}

int backend_status_parse(const char *name, enum backend_status *status)
{
    int value = value_named(backend_status_names, BACKEND_STATUS_COUNT, name);
    if (value < 0)
        return -1;
    *status = (enum backend_status)value;
    return 0;
}

const char *verdict_name(enum verdict verdict)
{
    return name_of(verdict_names, VERDICT_COUNT, (int)verdict);
}

int verdict_parse(const char *name, enum verdict *verdict)
{
    int value = value_named(verdict_names, VERDICT_COUNT, name);
    if (value < 0)
        return -1;
    *verdict = (enum verdict)value;
    return 0;
}

const char *gate_status_name(enum gate_status status)
{
    return name_of(gate_status_names, GATE_STATUS_COUNT, (int)status);
}

int gate_status_parse(const char *name, enum gate_status *status)
{
    int value = value_named(gate_status_names, GATE_STATUS_COUNT, name);
    if (value < 0)
        return -1;
    *status = (enum gate_status)value;
    return 0;
}

int determinism_level_parse(const char *name, enum topk_determinism *level)
{
    static const enum topk_determinism levels[] = { TOPK_NOT_GUARANTEED, TOPK_RUN_TO_RUN,
                                                     TOPK_GPU_TO_GPU };
    for (size_t i = 0; name && i < sizeof(levels) / sizeof(levels[0]); i++) {
        if (strcmp(name, topk_determinism_name(levels[i])) == 0) {
            *level = levels[i];
            return 0;
        }
    }
    return -1;
}

/* ---- rules ---------------------------------------------------------------------------------- */

/* What each claimed level must show (docs/REPORT.md "Verdicts"). Checks of tie rule and order
 * only fire for backends that claim them, so forbidding every kind means "no violation of
 * anything the backend promises". */
static const struct verdict_rule verdict_rules[] = {
    { .level = TOPK_GPU_TO_GPU, .equal_reference = true, .single_output = true,
      .same_output_per_model = false, .graph_equals_eager = true, .batch_invariant = true,
      .forbidden = ALL_CHECK_KINDS, .forgiven_on_overflow = 0 },
    { .level = TOPK_RUN_TO_RUN, .equal_reference = false, .single_output = true,
      .same_output_per_model = true, .graph_equals_eager = true, .batch_invariant = false,
      .forbidden = ALL_CHECK_KINDS, .forgiven_on_overflow = 0 },
    { .level = TOPK_NOT_GUARANTEED, .equal_reference = false, .single_output = false,
      .same_output_per_model = false, .graph_equals_eager = false, .batch_invariant = false,
      .forbidden = ALL_CHECK_KINDS, .forgiven_on_overflow = VIOLATION_WRONG_KINDS },
};

const struct verdict_rule *verdict_rule_for(enum topk_determinism level)
{
    for (size_t i = 0; i < sizeof(verdict_rules) / sizeof(verdict_rules[0]); i++)
        if (verdict_rules[i].level == level)
            return &verdict_rules[i];
    /* An unknown level claims nothing we can check beyond the contract: judge it strictly. */
    return &verdict_rules[0];
}

bool verdict_devices_must_agree(enum topk_determinism level, bool same_model)
{
    const struct verdict_rule *rule = verdict_rule_for(level);
    return rule->equal_reference || (rule->same_output_per_model && same_model);
}

/* Staging buffers of the modelled families (../shared/research/topk-kernels.md): radix clips
 * overflow silently, filtered rescans the row. */
static const struct staging_model staging_models[] = {
    { "radix", "radix_4096", CENSUS_RADIX_STAGING, true },
    { "filtered", "filtered_16384", CENSUS_FILTERED_STAGING, false },
    { "filtered-det", "filtered_16384", CENSUS_FILTERED_STAGING, false },
};

const struct staging_model *staging_model_for(const char *backend_name)
{
    for (size_t i = 0; backend_name && i < sizeof(staging_models) / sizeof(staging_models[0]); i++)
        if (strcmp(staging_models[i].backend, backend_name) == 0)
            return &staging_models[i];
    return NULL;
}

bool staging_predicts_overflow(const struct staging_model *model, const struct census_row *row)
{
    return model && row && !row->short_row && row->coarse_bin_count > (int64_t)model->capacity;
}

enum verdict verdict_of_status(enum backend_status status)
{
    switch (status) {
    case BACKEND_OK: return VERDICT_PASS;
    case BACKEND_UNSUPPORTED:
    case BACKEND_UNAVAILABLE:
    case BACKEND_SKIPPED: return VERDICT_NOT_RUN;
    case BACKEND_ERROR:
    case BACKEND_HANG:
    case BACKEND_CRASH:
    case BACKEND_CUDA_ERROR: return VERDICT_FAIL;
    }
    return VERDICT_FAIL;
}

/* ---- the judge ------------------------------------------------------------------------------ */

struct judge {
    const struct verdict_evidence *evidence;
    const struct verdict_rule *rule;
    const struct staging_model *staging;
    const char *level;            /* the judged level's name */
    bool tallies;                 /* evidence->source == VERDICT_FROM_TALLIES */
    verdict_emit_fn emit;
    void *context;
    unsigned failures;
};

static void finding(struct judge *judge, struct verdict_finding *found, const char *format, ...)
    __attribute__((format(printf, 3, 4)));
static void finding(struct judge *judge, struct verdict_finding *found, const char *format, ...)
{
    va_list args;
    va_start(args, format);
    vsnprintf(found->text, sizeof(found->text), format, args);
    va_end(args);
    judge->failures += found->fails;
    judge->emit(judge->context, found);
}

static struct verdict_finding failing(enum verdict_check check, bool graph)
{
    return (struct verdict_finding){ .check = check, .fails = true, .graph = graph };
}

static struct verdict_finding noting(enum verdict_check check, bool graph)
{
    return (struct verdict_finding){ .check = check, .note = true, .graph = graph };
}

static const char *reps_word(bool graph)
{
    return graph ? "replay(s)" : "rep(s)";
}

/* Appends up to VERDICT_LISTED_ROWS row numbers ("3, 17, 40, ...") to text (size bytes). */
static void list_rows(char *text, size_t size, const uint32_t *rows, uint64_t count)
{
    size_t used = strlen(text);
    for (uint64_t i = 0; i < count && i < VERDICT_LISTED_ROWS && used + 16 < size; i++)
        used += (size_t)snprintf(text + used, size - used, "%s%u", i ? ", " : "", rows[i]);
    if (count > VERDICT_LISTED_ROWS && used + 8 < size)
        snprintf(text + used, size - used, ", ...");
}

/* A kind the rule forbids, with no forgiveness to weigh. */
static void violation_plain(struct judge *judge, const struct verdict_reps *reps, unsigned kind,
                            bool graph)
{
    const struct verdict_violation *v = &reps->violations[kind];
    const char *label = graph ? "graph: " : "";
    struct verdict_finding found = failing(VERDICT_CHECK_VIOLATION, graph);
    found.kind = kind;
    if (judge->tallies) {
        finding(judge, &found,
                "%s%s on %llu row(s) in total over %u rep(s), at most %llu in one rep", label,
                violation_name(kind), (unsigned long long)v->total_rows, reps->reps,
                (unsigned long long)v->max_rows_per_rep);
        return;
    }
    if ((KIND_BIT(kind) & VIOLATION_WRONG_KINDS) && !graph) {
        found.rows = VERDICT_ROWS_WRONG_NOT_PREDICTED;
        found.rows_why = violation_name(kind);
    }
    finding(judge, &found, "%s%s on %llu row(s), %llu row-rep(s) in total over %u %s", label,
            violation_name(kind), (unsigned long long)v->rows, (unsigned long long)v->total_rows,
            reps->reps, reps_word(graph));
}

/* A forgivable kind: forgiven on the rows the census predicts to overflow the staging, by what
 * the evidence knows of those rows. */
static void violation_forgivable(struct judge *judge, const struct verdict_reps *reps,
                                 unsigned kind, bool graph)
{
    const struct verdict_violation *v = &reps->violations[kind];
    const char *label = graph ? "graph: " : "", *name = violation_name(kind);
    const char *staging = judge->staging->name;
    struct verdict_finding fail = failing(VERDICT_CHECK_VIOLATION, graph);
    struct verdict_finding note = noting(VERDICT_CHECK_VIOLATION, graph);
    fail.kind = note.kind = kind;
    switch (reps->overflow) {
    case OVERFLOW_UNKNOWN:
        if (judge->tallies) {
            violation_plain(judge, reps, kind, graph);
            return;
        }
        finding(judge, &fail,
                "%s%s on %llu row(s) and the report has no predicted_vs_observed block to tell "
                "the rows the %s staging overflows",
                label, name, (unsigned long long)v->rows, staging);
        return;
    case OVERFLOW_PER_ROW: {
        const uint64_t forgiven = v->rows > v->unpredicted_rows ? v->rows - v->unpredicted_rows : 0;
        if (v->unpredicted_rows > 0) {
            /* Sized as run stores a reason, so the listed rows fit the stored text. */
            char text[VERDICT_REASON_BYTES];
            snprintf(text, sizeof(text),
                     "%s%s on %llu row(s) the census does not predict to overflow the %s staging: ",
                     label, name, (unsigned long long)v->unpredicted_rows, staging);
            list_rows(text, sizeof(text), v->unpredicted_first, v->unpredicted_rows);
            finding(judge, &fail, "%s", text);
        }
        if (forgiven > 0)
            finding(judge, &note,
                    "%s%s on %llu row(s) forgiven: the census predicts them to overflow the %s "
                    "staging (documented failure mode)",
                    label, name, (unsigned long long)forgiven, staging);
        return;
    }
    case OVERFLOW_WRONG_ROWS:
        if (reps->wrong_rows_not_predicted > 0) {
            fail.rows = VERDICT_ROWS_WRONG_NOT_PREDICTED;
            fail.rows_why = KEY_WRONG_NOT_PREDICTED_OVERFLOW;
            finding(judge, &fail,
                    "%s on %llu row(s); %llu row(s) with wrong_set or short are not predicted to "
                    "overflow the %s staging",
                    name, (unsigned long long)v->rows,
                    (unsigned long long)reps->wrong_rows_not_predicted, staging);
            return;
        }
        break;
    case OVERFLOW_COUNTS:
        if (v->rows > reps->predicted_overflow_rows) {
            finding(judge, &fail,
                    "%s%s on %llu row(s), more than the %llu row(s) predicted to overflow the %s "
                    "staging",
                    label, name, (unsigned long long)v->rows,
                    (unsigned long long)reps->predicted_overflow_rows, staging);
            return;
        }
        break;
    }
    finding(judge, &note,
            "%s%s on %llu row(s), forgiven: predicted to overflow the %s staging (documented "
            "failure mode)",
            label, name, (unsigned long long)v->rows, staging);
}

/* The contract violations of the eager reps or of the graph replays. */
static void judge_violations(struct judge *judge, const struct verdict_reps *reps, bool graph)
{
    const bool staging_forgives = judge->staging && judge->staging->drops_on_overflow &&
                                  !judge->evidence->exact_set;
    if (!reps->has_violations)
        return; /* a baseline document: the run's own verdict judged them */
    for (unsigned kind = 0; kind < (unsigned)CHECK_KIND_COUNT; kind++) {
        if (reps->violations[kind].rows == 0 || !(judge->rule->forbidden & KIND_BIT(kind)))
            continue;
        if (staging_forgives && (judge->rule->forgiven_on_overflow & KIND_BIT(kind)))
            violation_forgivable(judge, reps, kind, graph);
        else
            violation_plain(judge, reps, kind, graph);
    }
}

/* equal_reference: the outputs must be the CPU reference's (and the baseline's, when known). */
static void judge_reference(struct judge *judge, const struct verdict_reps *reps, bool graph)
{
    const struct verdict_evidence *evidence = judge->evidence;
    const char *label = graph ? "graph: " : "";
    const char *word = reps->compared_distinct ? "distinct output(s)" : reps_word(graph);
    struct verdict_finding found = failing(VERDICT_CHECK_REFERENCE, graph);
    if (reps->differ_from_reference > 0) {
        if (!judge->tallies)
            finding(judge, &found, "%soutput differs from the CPU reference (%.12s) in %u of %u %s",
                    label, evidence->reference_hash ? evidence->reference_hash : "?",
                    reps->differ_from_reference, reps->compared, word);
        else if (graph)
            finding(judge, &found,
                    "graph: output differs from the CPU reference in %u of %u replay(s)",
                    reps->differ_from_reference, reps->compared);
        else
            finding(judge, &found,
                    "output differs from the CPU reference in %u of %u rep(s) (claims %s)",
                    reps->differ_from_reference, reps->compared, judge->level);
    }
    if (evidence->baseline_hash && reps->differ_from_baseline > 0) {
        found = failing(VERDICT_CHECK_BASELINE, graph);
        finding(judge, &found,
                "%s%u of %u %s differ from %s (%.12s); the report has hashes, not outputs: rerun "
                "both with --dump-outputs to see the rows",
                label, reps->differ_from_baseline, reps->compared, word,
                evidence->baseline_origin ? evidence->baseline_origin : "the baseline",
                evidence->baseline_hash);
    }
}

static void judge_eager(struct judge *judge)
{
    const struct verdict_reps *eager = &judge->evidence->eager;
    struct verdict_finding found;
    if (eager->reps == 0) {
        found = failing(VERDICT_CHECK_NO_REPS, false);
        finding(judge, &found, "no rep completed");
    }
    if (!eager->has_violations) {
        found = noting(VERDICT_CHECK_NO_COUNTS, false);
        finding(judge, &found, "a baseline-format document: judged by its distinct output hashes "
                               "and the run's own verdict (no violation counts)");
    }
    if (judge->rule->equal_reference)
        judge_reference(judge, eager, false);
    if (judge->rule->single_output && eager->distinct_outputs > 1) {
        found = failing(VERDICT_CHECK_FLAPPING, false);
        if (judge->tallies) {
            finding(judge, &found,
                    "%u distinct outputs over %u reps, %u distinct sets (claims %s: one)",
                    eager->distinct_outputs, eager->reps, eager->distinct_sets, judge->level);
        } else {
            found.rows = VERDICT_ROWS_FLAPPING;
            found.rows_why = "flapping";
            finding(judge, &found,
                    "%u distinct outputs over %u reps (claims %s: one); %llu flapping row(s)",
                    eager->distinct_outputs, eager->reps, judge->level,
                    (unsigned long long)eager->flapping_rows);
        }
    }
    judge_violations(judge, eager, false);
}

static void judge_graph(struct judge *judge)
{
    const struct verdict_evidence *evidence = judge->evidence;
    const struct verdict_reps *graph = &evidence->graph;
    struct verdict_finding found;
    if (evidence->graph_error) {
        /* Every backend promises a graph-capturable launch (kernels/include/topk_backends.h). */
        found = failing(VERDICT_CHECK_GRAPH_ERROR, true);
        finding(judge, &found, "graph: %s", evidence->graph_error);
    }
    if (!evidence->graph_ran)
        return;
    judge_violations(judge, graph, true);
    if (judge->rule->equal_reference)
        judge_reference(judge, graph, true);
    const struct verdict_violation *mismatch = &graph->violations[VIOLATION_GRAPH_MISMATCH];
    if (!judge->rule->graph_equals_eager || mismatch->rows == 0)
        return;
    found = failing(VERDICT_CHECK_GRAPH_MISMATCH, true);
    found.kind = VIOLATION_GRAPH_MISMATCH;
    if (judge->tallies) {
        finding(judge, &found, "graph_mismatch: graph replays differ from the eager output on %llu "
                               "row(s), at most %llu in one replay (claims %s)",
                (unsigned long long)mismatch->rows,
                (unsigned long long)mismatch->max_rows_per_rep, judge->level);
    } else {
        found.rows = VERDICT_ROWS_GRAPH_FLAPPING;
        found.rows_why = "graph_mismatch";
        finding(judge, &found, "graph_mismatch: graph replays differ from the first eager output "
                               "on %llu row(s) (claims %s)",
                (unsigned long long)mismatch->rows, judge->level);
    }
}

static void judge_batch(struct judge *judge)
{
    const struct verdict_evidence *evidence = judge->evidence;
    struct verdict_finding found;
    if (evidence->batch_error) {
        found = failing(VERDICT_CHECK_BATCH_ERROR, false);
        finding(judge, &found, "batch invariance: %s", evidence->batch_error);
    }
    if (evidence->batch_ran && judge->rule->batch_invariant && evidence->batch_dependent_rows > 0) {
        found = failing(VERDICT_CHECK_BATCH_DEPENDENT, false);
        found.rows = VERDICT_ROWS_BATCH_DEPENDENT;
        found.rows_why = "batch_dependent";
        finding(judge, &found, "batch invariance: %llu row(s) change with the batch they are in "
                               "(claims %s)",
                (unsigned long long)evidence->batch_dependent_rows, judge->level);
    }
}

enum verdict verdict_judge(const struct verdict_evidence *evidence, verdict_emit_fn emit,
                           void *context)
{
    struct judge judge = {
        .evidence = evidence,
        .rule = verdict_rule_for(evidence->level),
        .staging = staging_model_for(evidence->backend),
        .level = topk_determinism_name(evidence->level),
        .tallies = evidence->source == VERDICT_FROM_TALLIES,
        .emit = emit,
        .context = context,
    };
    const enum verdict before = verdict_of_status(evidence->status);
    if (evidence->status != BACKEND_OK) {
        struct verdict_finding found = { .check = VERDICT_CHECK_STATUS,
                                         .fails = before == VERDICT_FAIL };
        finding(&judge, &found, "%s: %s", backend_status_name(evidence->status),
                evidence->reason ? evidence->reason : "(no reason)");
        return before;
    }
    judge_eager(&judge);
    if (evidence->graph_requested)
        judge_graph(&judge);
    if (evidence->batch_requested)
        judge_batch(&judge);
    return judge.failures ? VERDICT_FAIL : VERDICT_PASS;
}

/* ---- the engine's own selection ------------------------------------------------------------ */

enum verdict verdict_judge_engine(const struct engine_evidence *evidence, verdict_emit_fn emit,
                                  void *context)
{
    struct judge judge = { .emit = emit, .context = context };
    struct verdict_finding found;
    if (!evidence->judged) {
        found = failing(VERDICT_CHECK_STATUS, false);
        finding(&judge, &found, "error: %s", evidence->reason ? evidence->reason : "(no reason)");
        return VERDICT_FAIL;
    }
    const uint64_t wrong = evidence->class_rows[ENGINE_ROW_WRONG];
    if (wrong > 0) {
        char kinds[256] = "", rows[VERDICT_TEXT_BYTES / 2] = "";
        size_t used = 0;
        for (unsigned kind = 0; kind < CHECK_KIND_COUNT && used + 40 < sizeof(kinds); kind++)
            if ((KIND_BIT(kind) & ENGINE_WRONG_KINDS) && evidence->kind_rows[kind])
                used += (size_t)snprintf(kinds + used, sizeof(kinds) - used, "%s%s %llu",
                                         used ? ", " : "", check_kind_name((enum check_kind)kind),
                                         (unsigned long long)evidence->kind_rows[kind]);
        if (evidence->wrong_rows && evidence->wrong_rows_listed) {
            snprintf(rows, sizeof(rows), ": row%s ", wrong == 1 ? "" : "s");
            list_rows(rows, sizeof(rows), evidence->wrong_rows, evidence->wrong_rows_listed);
        }
        found = failing(VERDICT_CHECK_ENGINE_WRONG, false);
        found.rows = VERDICT_ROWS_ENGINE_WRONG;
        found.rows_why = "engine_wrong";
        finding(&judge, &found, "the engine's selection is wrong on %llu of %llu row(s) (%s) "
                                "under %s%s",
                (unsigned long long)wrong, (unsigned long long)evidence->rows, kinds,
                evidence->contract ? evidence->contract : "its contract", rows);
    }
    const uint64_t ties = evidence->class_rows[ENGINE_ROW_TIE_VARIANT];
    if (ties > 0) {
        found = noting(VERDICT_CHECK_ENGINE_TIES, false);
        finding(&judge, &found, "%llu of %llu row(s) are tie variants: underdetermined rows the "
                                "engine resolved its own way (a valid top-k with other boundary "
                                "ties than the reference's)",
                (unsigned long long)ties, (unsigned long long)evidence->rows);
    }
    return judge.failures ? VERDICT_FAIL : VERDICT_PASS;
}

/* ---- run's stored verdict ------------------------------------------------------------------- */

static void collect_reason(void *context, const struct verdict_finding *found)
{
    struct verdict_result *result = context;
    if (result->reason_count >= VERDICT_MAX_REASONS)
        return;
    /* Cut to the stored size, as the text would be printed there directly. */
    char *reason = result->reasons[result->reason_count++];
    const char *prefix = found->note ? "note: " : "";
    const size_t used = strlen(prefix);
    size_t length = strlen(found->text);
    if (length > VERDICT_REASON_BYTES - 1 - used)
        length = VERDICT_REASON_BYTES - 1 - used;
    memcpy(reason, prefix, used);
    memcpy(reason + used, found->text, length);
    reason[used + length] = '\0';
}

void verdict_judge_into(const struct verdict_evidence *evidence, struct verdict_result *result)
{
    memset(result, 0, sizeof(*result));
    result->verdict = verdict_judge(evidence, collect_reason, result);
}

void verdict_judge_engine_into(const struct engine_evidence *evidence,
                               struct verdict_result *result)
{
    memset(result, 0, sizeof(*result));
    result->verdict = verdict_judge_engine(evidence, collect_reason, result);
}
