/* The engine's own selection judged against the reference (engine_check.h).
 *
 * A row costs O(k) when it is exact or a tie variant without a tie-break promise; a row that is
 * wrong, or whose tie-break is judged, also walks its window once (the missing candidates, the
 * boundary tie set). The per-row data every judgement needs (the reference, the candidates, the
 * boundary key and how many candidates rank above it) comes from the contract checks'
 * checks_prepare(), prepared once per record. */
#include "engine_check.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "document_keys.h"
#include "json_strict.h"

/* ---- the contract ---------------------------------------------------------------------------- */

static const char *const order_names[] = {
    [ENGINE_ORDER_NONE] = "none",
    [ENGINE_ORDER_SORTED] = "sorted",
    [ENGINE_ORDER_INDEX_ASCENDING] = "index_ascending",
};
static const char *const tie_break_names[] = {
    [ENGINE_TIE_BREAK_NONE] = "none",
    [ENGINE_TIE_BREAK_SMALL] = "small",
    [ENGINE_TIE_BREAK_LARGE] = "large",
};
static const char *const source_names[] = {
    [ENGINE_CONTRACT_DEFAULT] = "default",
    [ENGINE_CONTRACT_METADATA] = "metadata",
    [ENGINE_CONTRACT_OPTION] = "option",
};
static const char *const class_names[ENGINE_ROW_CLASSES] = {
    [ENGINE_ROW_EXACT] = "exact",
    [ENGINE_ROW_TIE_VARIANT] = "tie_variant",
    [ENGINE_ROW_WRONG] = "wrong",
};

#define NAME_COUNT(names) (sizeof(names) / sizeof(names[0]))

const char *engine_order_name(enum engine_order order)
{
    return (size_t)order < NAME_COUNT(order_names) ? order_names[order] : "unknown";
}

const char *engine_tie_break_name(enum engine_tie_break tie_break)
{
    return (size_t)tie_break < NAME_COUNT(tie_break_names) ? tie_break_names[tie_break]
                                                           : "unknown";
}

const char *engine_contract_source_name(enum engine_contract_source source)
{
    return (size_t)source < NAME_COUNT(source_names) ? source_names[source] : "unknown";
}

const char *engine_row_class_name(enum engine_row_class row_class)
{
    return (size_t)row_class < ENGINE_ROW_CLASSES ? class_names[row_class] : "unknown";
}

/* The position of text in names, or -1. */
static int name_index(const char *const *names, size_t count, const char *text)
{
    for (size_t i = 0; text && i < count; i++)
        if (strcmp(names[i], text) == 0)
            return (int)i;
    return -1;
}

static int contract_from_object(const cJSON *object, const char *where,
                                enum engine_contract_source source,
                                struct engine_contract *contract, struct audit_error *err)
{
    if (!cJSON_IsObject(object))
        return audit_fail(err, AUDIT_EUSAGE, "%s: the contract is not a JSON object "
                          "({\"order\": ..., \"tie_break\": ...})", where);
    const cJSON *item;
    cJSON_ArrayForEach(item, object)
        if (strcmp(item->string, KEY_ORDER) != 0 && strcmp(item->string, KEY_TIE_BREAK) != 0)
            return audit_fail(err, AUDIT_EUSAGE, "%s: unknown contract key \"%.80s\" (the "
                              "contract has order and tie_break)", where, item->string);
    const char *order = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(object, KEY_ORDER));
    const char *tie_break =
        cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(object, KEY_TIE_BREAK));
    int order_value = name_index(order_names, NAME_COUNT(order_names), order);
    int tie_value = name_index(tie_break_names, NAME_COUNT(tie_break_names), tie_break);
    if (order_value < 0)
        return audit_fail(err, AUDIT_EUSAGE, "%s: contract order %s%.80s%s is not sorted, "
                          "index_ascending or none", where, order ? "\"" : "",
                          order ? order : "missing", order ? "\"" : "");
    if (tie_value < 0)
        return audit_fail(err, AUDIT_EUSAGE, "%s: contract tie_break %s%.80s%s is not small, "
                          "large or none", where, tie_break ? "\"" : "",
                          tie_break ? tie_break : "missing", tie_break ? "\"" : "");
    contract->order = (enum engine_order)order_value;
    contract->tie_break = (enum engine_tie_break)tie_value;
    contract->source = source;
    return AUDIT_OK;
}

int engine_contract_parse(const char *json_text, const char *where,
                          enum engine_contract_source source, struct engine_contract *contract,
                          struct audit_error *err)
{
    if (!json_text)
        return audit_fail(err, AUDIT_EUSAGE, "%s: no contract (expected {\"order\": \"sorted\", "
                          "\"tie_break\": \"small\"} or similar)", where);
    /* The strict dialect of docs/FORMAT.md "JSON", as every reader; an option's or metadata
     * field's text that is not JSON is a usage error here (the caller picks the exit code). */
    cJSON *object = NULL;
    int status = json_strict_parse(json_text, strlen(json_text), where, 0, &object, err);
    if (status == AUDIT_EDATA)
        err->code = status = AUDIT_EUSAGE;
    if (status < 0)
        return status;
    status = contract_from_object(object, where, source, contract, err);
    cJSON_Delete(object);
    return status;
}

int engine_contract_for_record(const struct capture_record *record,
                               const struct engine_contract *option,
                               struct engine_contract *contract, struct audit_error *err)
{
    *contract = (struct engine_contract){ .source = ENGINE_CONTRACT_DEFAULT };
    if (option) {
        *contract = *option;
        contract->source = ENGINE_CONTRACT_OPTION;
        return AUDIT_OK;
    }
    cJSON *metadata = record->metadata_json ? cJSON_Parse(record->metadata_json) : NULL;
    const cJSON *given = cJSON_GetObjectItemCaseSensitive(metadata, KEY_CONTRACT);
    int status = AUDIT_OK;
    if (given) {
        char where[64];
        snprintf(where, sizeof(where), "record %u metadata", record->index);
        status = contract_from_object(given, where, ENGINE_CONTRACT_METADATA, contract, err);
        if (status < 0)
            err->code = status = AUDIT_EDATA;
    }
    cJSON_Delete(metadata);
    return status;
}

/* ---- one row --------------------------------------------------------------------------------- */

/* A candidate noted against the k-th value (kth, key boundary): above it (missing) or below
 * it (extra). */
static struct engine_index_note index_note(const struct capture_record *record, uint32_t b,
                                           int64_t position, bool has_boundary, float kth,
                                           uint32_t boundary)
{
    const float score = capture_row_window(record, b)[position];
    struct engine_index_note note = {
        .index = position,
        .translated = record->page_table ? topk_translate_index(record, b, (int32_t)position)
                                         : (int32_t)position,
        .score = score,
        .has_distance = has_boundary,
    };
    if (has_boundary) {
        const uint32_t key = topk_order_key(score);
        note.distance = fabs((double)score - (double)kth);
        note.distance_ulps = key > boundary ? key - boundary : boundary - key;
    }
    return note;
}

/* The candidates a wrong row left out. Rows with no boundary select every candidate: each one
 * missing is listed. With a boundary, every candidate strictly above it is required, and
 * k - above members of the boundary tie set: when the row holds fewer, the unselected members
 * are listed too if each of them is required (the tie set does not straddle), else only
 * counted (any of them would do). */
static void list_missing(const struct check_context *context, uint32_t b, const uint8_t *seen,
                         uint64_t ties_selected, struct engine_row_detail *detail)
{
    const struct capture_record *record = context->record;
    const float *window = capture_row_window(record, b);
    const uint32_t boundary = context->boundary_key[b];
    const uint64_t ties_needed = (uint64_t)((int64_t)context->k - context->above[b]);
    uint64_t ties_left = 0;
    for (int32_t i = 0; detail->has_boundary && i < record->lengths[b]; i++)
        ties_left += !topk_is_negative_infinity(window[i]) && !check_mark_test(seen, i) &&
                     topk_order_key(window[i]) == boundary;
    const uint64_t ties_short = ties_selected < ties_needed ? ties_needed - ties_selected : 0;
    const bool list_ties = ties_short > 0 && ties_left <= ties_short;
    for (int32_t i = 0; i < record->lengths[b]; i++) {
        if (topk_is_negative_infinity(window[i]) || check_mark_test(seen, i))
            continue;
        if (detail->has_boundary) {
            const uint32_t key = topk_order_key(window[i]);
            if (key < boundary || (key == boundary && !list_ties))
                continue;
        }
        if (detail->missing_count < ENGINE_LISTED_INDICES)
            detail->missing[detail->missing_count] =
                index_note(record, b, i, detail->has_boundary, detail->kth, boundary);
        detail->missing_count++;
    }
    if (ties_short > 0 && !list_ties)
        detail->missing_count += ties_short;
}

/* Under a tie-break promise, the selected members of the boundary tie set must be its smallest
 * (or largest) indices: no unselected member below (above) a selected one. */
static bool tie_break_broken(const struct check_context *context, uint32_t b,
                             enum engine_tie_break tie_break, const uint8_t *seen)
{
    const float *window = capture_row_window(context->record, b);
    const uint32_t boundary = context->boundary_key[b];
    int64_t lowest_selected = -1, highest_selected = -1, lowest_left = -1, highest_left = -1;
    for (int32_t i = 0; i < context->record->lengths[b]; i++) {
        if (topk_is_negative_infinity(window[i]) || topk_order_key(window[i]) != boundary)
            continue;
        if (check_mark_test(seen, i)) {
            if (lowest_selected < 0)
                lowest_selected = i;
            highest_selected = i;
        } else {
            if (lowest_left < 0)
                lowest_left = i;
            highest_left = i;
        }
    }
    if (lowest_selected < 0 || lowest_left < 0)
        return false;
    return tie_break == ENGINE_TIE_BREAK_SMALL ? highest_selected > lowest_left
                                               : lowest_selected < highest_left;
}

/* The walk over a row's slots: what each entry shows. */
struct row_walk {
    uint32_t kinds;
    uint64_t entries, valid, above_selected, below_selected, ties_selected;
    bool padding_started, has_previous;
    uint32_t previous_key;
    int64_t previous_position;
};

static void walk_slot(const struct check_context *context, const struct engine_contract *contract,
                      uint32_t b, uint32_t slot, int64_t position, uint8_t *seen,
                      struct row_walk *walk, struct engine_row_detail *detail)
{
    const struct capture_record *record = context->record;
    const int32_t given = record->engine_indices[(size_t)b * context->k + slot];
    const float *window = capture_row_window(record, b);
    if (position == -1) {
        walk->padding_started = true;
        return;
    }
    walk->entries++;
    if (walk->padding_started) {
        if (detail && !(walk->kinds & (1u << CHECK_PADDING)))
            detail->padding_slot = slot;
        walk->kinds |= 1u << CHECK_PADDING;
    }
    if (position < 0 || position >= record->lengths[b] ||
        topk_is_negative_infinity(window[position])) {
        walk->kinds |= 1u << CHECK_OUT_OF_RANGE;
        if (detail && detail->out_of_range_count++ < ENGINE_LISTED_INDICES)
            detail->out_of_range[detail->out_of_range_count - 1] = given;
        return;
    }
    if (check_mark_test_and_set(seen, position)) {
        walk->kinds |= 1u << CHECK_DUPLICATE;
        if (detail && detail->duplicate_count++ < ENGINE_LISTED_INDICES)
            detail->duplicates[detail->duplicate_count - 1] = given;
        return;
    }
    const uint32_t key = topk_order_key(window[position]);
    const uint32_t boundary = context->boundary_key[b];
    const bool has_boundary = context->candidates[b] > (int64_t)context->k;
    walk->valid++;
    if (has_boundary && key > boundary)
        walk->above_selected++;
    if (has_boundary && key == boundary)
        walk->ties_selected++;
    if (has_boundary && key < boundary) {
        walk->below_selected++;
        if (detail && detail->extra_count++ < ENGINE_LISTED_INDICES)
            detail->extra[detail->extra_count - 1] =
                index_note(record, b, position, true, detail->kth, boundary);
    }
    if (walk->has_previous &&
        ((contract->order == ENGINE_ORDER_SORTED && key > walk->previous_key) ||
         (contract->order == ENGINE_ORDER_INDEX_ASCENDING &&
          position < walk->previous_position))) {
        if (detail && !(walk->kinds & (1u << CHECK_ORDER)))
            detail->order_slot = slot;
        walk->kinds |= 1u << CHECK_ORDER;
    }
    walk->has_previous = true;
    walk->previous_key = key;
    walk->previous_position = position;
}

int engine_judge_row(const struct check_context *context, const struct engine_contract *contract,
                     uint32_t b, struct engine_row_scratch *scratch,
                     enum engine_row_class *row_class, uint32_t *kinds,
                     struct engine_row_detail *detail, struct audit_error *err)
{
    const struct capture_record *record = context->record;
    const uint32_t k = context->k;
    if (!record->engine_indices || k != record->k || b >= context->rows)
        return audit_fail(err, AUDIT_EUSAGE, "record %u row %u: no engine selection to judge at "
                          "k %u", record->index, b, k);
    int status = topk_untranslate_row(record, b, record->engine_indices + (size_t)b * k, k,
                                      scratch->pages, scratch->positions, err);
    if (status < 0)
        return status;
    const int64_t candidates = context->candidates[b];
    const bool has_boundary = candidates > (int64_t)k;
    const int32_t *reference = context->reference_raw ? context->reference_raw
                                                      : context->reference;
    if (detail) {
        memset(detail, 0, sizeof(*detail));
        detail->row = b;
        detail->has_boundary = has_boundary;
        if (has_boundary)
            detail->kth = capture_row_window(record, b)[reference[(size_t)b * k + k - 1]];
        detail->order_slot = detail->padding_slot = -1;
    }

    struct row_walk walk = { 0 };
    for (uint32_t slot = 0; slot < k; slot++)
        walk_slot(context, contract, b, slot, scratch->positions[slot], scratch->seen, &walk,
                  detail);
    const uint64_t needed = has_boundary ? k : (uint64_t)candidates;
    if (walk.entries < needed)
        walk.kinds |= 1u << CHECK_SHORT;
    const bool right_set =
        !(walk.kinds & ((1u << CHECK_OUT_OF_RANGE) | (1u << CHECK_DUPLICATE))) &&
        (has_boundary ? walk.below_selected == 0 &&
                            walk.above_selected == (uint64_t)context->above[b] && walk.valid == k
                      : walk.valid == (uint64_t)candidates);
    if (!right_set)
        walk.kinds |= 1u << CHECK_WRONG_SET;
    if (right_set && has_boundary && contract->tie_break != ENGINE_TIE_BREAK_NONE &&
        tie_break_broken(context, b, contract->tie_break, scratch->seen))
        walk.kinds |= 1u << CHECK_TIE_RULE;
    bool exact = right_set;
    for (uint32_t slot = 0; slot < k && exact; slot++)
        exact = reference[(size_t)b * k + slot] < 0 ||
                check_mark_test(scratch->seen, reference[(size_t)b * k + slot]);
    if (detail) {
        detail->kinds = walk.kinds;
        detail->entries = walk.entries;
        detail->needed = needed;
        if (!right_set)
            list_missing(context, b, scratch->seen, walk.ties_selected, detail);
    }
    /* Clear only the marks this row set. */
    for (uint32_t slot = 0; slot < k; slot++) {
        const int64_t position = scratch->positions[slot];
        if (position >= 0 && position < record->lengths[b])
            check_mark_clear(scratch->seen, position);
    }
    *kinds = walk.kinds;
    *row_class = (walk.kinds & ENGINE_WRONG_KINDS) ? ENGINE_ROW_WRONG
                 : exact                           ? ENGINE_ROW_EXACT
                                                   : ENGINE_ROW_TIE_VARIANT;
    return AUDIT_OK;
}

/* ---- a record -------------------------------------------------------------------------------- */

void engine_judgement_release(struct engine_judgement *judgement)
{
    if (!judgement)
        return;
    free(judgement->row_kinds);
    free(judgement->row_class);
    free(judgement->details);
    memset(judgement, 0, sizeof(*judgement));
}

int engine_judge_record(const struct check_context *context,
                        const struct engine_contract *contract,
                        struct engine_judgement *judgement, struct audit_error *err)
{
    const struct capture_record *record = context ? context->record : NULL;
    struct topk_page_inverse pages = { 0 };
    struct engine_row_scratch scratch = { .pages = &pages };
    int status = AUDIT_OK;
    memset(judgement, 0, sizeof(*judgement));
    if (!record || !record->engine_indices || context->k != record->k)
        return audit_fail(err, AUDIT_EUSAGE, "engine_judge_record: a record with engine indices "
                          "and checks prepared at its own k are required");
    judgement->contract = *contract;
    judgement->rows = context->rows;
    judgement->k = context->k;
    const size_t rows = context->rows ? context->rows : 1;
    judgement->row_kinds = calloc(rows, sizeof(uint32_t));
    judgement->row_class = calloc(rows, sizeof(uint8_t));
    scratch.seen = calloc(context->seen_bytes, 1);
    scratch.positions = malloc((size_t)context->k * sizeof(int64_t));
    if (!judgement->row_kinds || !judgement->row_class || !scratch.seen || !scratch.positions) {
        status = audit_fail(err, AUDIT_ENOMEM, "record %u: out of memory judging the engine's "
                            "selection (%u rows x k %u)", record->index, context->rows,
                            context->k);
        goto done;
    }
    for (uint32_t b = 0; b < context->rows; b++) {
        struct engine_row_detail detail;
        enum engine_row_class row_class;
        uint32_t kinds;
        status = engine_judge_row(context, contract, b, &scratch, &row_class, &kinds, &detail,
                                  err);
        if (status < 0)
            goto done;
        judgement->row_kinds[b] = kinds;
        judgement->row_class[b] = (uint8_t)row_class;
        judgement->class_rows[row_class]++;
        for (unsigned kind = 0; kind < CHECK_KIND_COUNT; kind++)
            judgement->kind_rows[kind] += (kinds >> kind) & 1u;
        if (row_class != ENGINE_ROW_WRONG || judgement->detail_count >= ENGINE_DESCRIBED_ROWS)
            continue;
        if (!judgement->details &&
            !(judgement->details = malloc(ENGINE_DESCRIBED_ROWS * sizeof(*judgement->details)))) {
            status = audit_fail(err, AUDIT_ENOMEM, "record %u: out of memory describing the "
                                "engine's wrong rows", record->index);
            goto done;
        }
        judgement->details[judgement->detail_count++] = detail;
    }
done:
    free(scratch.seen);
    free(scratch.positions);
    topk_page_inverse_free(&pages);
    if (status < 0)
        engine_judgement_release(judgement);
    return status;
}
