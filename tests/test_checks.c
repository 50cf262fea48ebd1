/* Unit tests of the contract checks (src/verdict/checks.c): hand-made records and outputs showing each
 * kind of violation alone and combined, the reference passing every check, tie subsets and
 * orders judged by the backend's claims, paged records, and a randomized comparison of the O(k)
 * checks with a sort-based oracle written here. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "checks.h"
#include "reference.h"
#include "test_util.h"

#define NEG_INF (-__builtin_inff())

/* ---- hand-made records ------------------------------------------------------------------ */

static void record_release(struct capture_record *record)
{
    free(record->scores);
    free(record->lengths);
    free(record->row_starts);
    free(record->page_table);
    free(record->page_table_row_starts);
    free(record->engine_indices);
    free(record->metadata_json);
    memset(record, 0, sizeof(*record));
}

/* rows x stride scores (windows start at row_starts, or 0), copied so the record owns them. */
static void record_init(struct capture_record *record, uint32_t rows, uint32_t k,
                        uint64_t stride, const float *scores, const int32_t *lengths,
                        const int32_t *row_starts)
{
    memset(record, 0, sizeof(*record));
    record->rows = rows;
    record->k = k;
    record->row_stride = stride;
    record->scores = malloc(rows * stride * sizeof(float) + sizeof(float));
    record->lengths = malloc(rows * sizeof(int32_t) + sizeof(int32_t));
    assert_non_null(record->scores);
    assert_non_null(record->lengths);
    memcpy(record->scores, scores, rows * stride * sizeof(float));
    memcpy(record->lengths, lengths, rows * sizeof(int32_t));
    if (row_starts) {
        record->row_starts = malloc(rows * sizeof(int32_t));
        assert_non_null(record->row_starts);
        memcpy(record->row_starts, row_starts, rows * sizeof(int32_t));
    }
    record->metadata_json = strdup("{}");
    assert_non_null(record->metadata_json);
}

static void record_add_pages(struct capture_record *record, uint32_t page_size, uint64_t cols,
                             const int32_t *page_table, const int32_t *page_table_row_starts)
{
    record->page_size = page_size;
    record->page_table_cols = cols;
    record->page_table = malloc(record->rows * cols * sizeof(int32_t));
    assert_non_null(record->page_table);
    memcpy(record->page_table, page_table, record->rows * cols * sizeof(int32_t));
    if (page_table_row_starts) {
        record->page_table_row_starts = malloc(record->rows * sizeof(int32_t));
        assert_non_null(record->page_table_row_starts);
        memcpy(record->page_table_row_starts, page_table_row_starts,
               record->rows * sizeof(int32_t));
    }
}

/* The basic record, k = 3, stride 8. Hand-ranked:
 * row 0: 5.0@4 > 3.0@1 = 3.0@2 = 3.0@3 > 2.0@7 > 1.0@0 > 0.5@5 (-inf@6 excluded): the boundary
 *        (3.0) tie set {1,2,3} straddles k, reference [4, 1, 2], above 1.
 * row 1: 2 candidates < k: reference [0, 1, -1].
 * row 2: -inf everywhere but 4.0@1 and 1.0@4: reference [1, 4, -1].
 * row 3: +NaN@0 > +0.0@2 = +0.0@5 > -0.0@1 > -NaN@3 (-inf@4): reference [0, 2, 5].
 * row 4: length 0: reference [-1, -1, -1].
 * row 5: 2.0@0 > -NaN(payload 1)@2 = @3 = @4, -inf@1 and @5 rank nowhere although -NaN ranks
 *        below -inf: reference [0, 2, 3], boundary -NaN, above 1 (the -infs are not above). */
#define BASIC_ROWS 6
#define BASIC_K 3
#define BASIC_STRIDE 8
static const int32_t basic_reference[BASIC_ROWS * BASIC_K] = {
    4, 1, 2,  0, 1, -1,  1, 4, -1,  0, 2, 5,  -1, -1, -1,  0, 2, 3,
};

static void basic_record(struct capture_record *record)
{
    const float poison = float_from_bits(0x7FC0DEADu); /* outside every window */
    float positive_nan = float_from_bits(0x7FC00001u);
    float negative_nan = float_from_bits(0xFFC00000u);
    float negative_nan_low = float_from_bits(0xFF800001u); /* ranks just below -inf */
    const float scores[BASIC_ROWS * BASIC_STRIDE] = {
        1.0f, 3.0f, 3.0f, 3.0f, 5.0f, 0.5f, NEG_INF, 2.0f,
        7.0f, -1.0f, poison, poison, poison, poison, poison, poison,
        NEG_INF, 4.0f, NEG_INF, NEG_INF, 1.0f, poison, poison, poison,
        positive_nan, -0.0f, 0.0f, negative_nan, NEG_INF, 0.0f, poison, poison,
        poison, poison, poison, poison, poison, poison, poison, poison,
        2.0f, NEG_INF, negative_nan_low, negative_nan_low, negative_nan_low, NEG_INF, poison,
        poison,
    };
    const int32_t lengths[BASIC_ROWS] = { 8, 2, 5, 6, 0, 6 };
    record_init(record, BASIC_ROWS, BASIC_K, BASIC_STRIDE, scores, lengths, NULL);
}

struct fixture {
    struct capture_record record;
    struct check_context context;
    int32_t out[64];
    int32_t raw[64];
    uint32_t flags[16];
    struct check_counts counts;
};

static const struct check_claims claims_none = { false, false, false };
static const struct check_claims claims_canonical = { true, true, false };     /* bitonic, sort */
static const struct check_claims claims_ascending = { true, false, true };     /* filtered-det */

static int setup_basic(void **state)
{
    struct fixture *fixture = calloc(1, sizeof(*fixture));
    assert_non_null(fixture);
    basic_record(&fixture->record);
    struct audit_error err = { 0 };
    int status = checks_prepare(&fixture->context, &fixture->record, 0, &err);
    if (status < 0)
        fail_msg("checks_prepare: %s", err.message);
    memcpy(fixture->out, basic_reference, sizeof(basic_reference));
    *state = fixture;
    return 0;
}

static int teardown_fixture(void **state)
{
    struct fixture *fixture = *state;
    checks_release(&fixture->context);
    record_release(&fixture->record);
    free(fixture);
    return 0;
}

static uint32_t bit(enum check_kind kind)
{
    return 1u << kind;
}

static void print_flags(const char *label, uint32_t flags)
{
    fprintf(stderr, "%s:", label);
    for (int kind = 0; kind < CHECK_KIND_COUNT; kind++)
        if (flags & (1u << kind))
            fprintf(stderr, " %s", check_kind_name((enum check_kind)kind));
    fprintf(stderr, "%s\n", flags ? "" : " none");
}

/* Runs the checks and asserts every row's flags; the counts must agree with them. */
static void expect_flags(struct fixture *fixture, const int32_t *raw,
                         const struct check_claims *claims, const uint32_t *expected)
{
    struct audit_error err = { 0 };
    uint32_t rows = fixture->context.rows;
    memset(fixture->flags, 0xFF, sizeof(fixture->flags));
    int status = checks_output(&fixture->context, fixture->out, raw, claims, &fixture->counts,
                               fixture->flags, &err);
    if (status < 0)
        fail_msg("checks_output: %s", err.message);
    uint64_t expected_rows = 0, expected_kind[CHECK_KIND_COUNT] = { 0 };
    for (uint32_t b = 0; b < rows; b++) {
        if (fixture->flags[b] != expected[b]) {
            char label[64];
            snprintf(label, sizeof(label), "row %u expected", b);
            print_flags(label, expected[b]);
            snprintf(label, sizeof(label), "row %u got     ", b);
            print_flags(label, fixture->flags[b]);
            fail_msg("row %u: flags 0x%x, expected 0x%x", b, fixture->flags[b], expected[b]);
        }
        expected_rows += expected[b] != 0;
        for (int kind = 0; kind < CHECK_KIND_COUNT; kind++)
            expected_kind[kind] += (expected[b] >> kind) & 1u;
    }
    assert_int_equal(fixture->counts.rows_with_violation, expected_rows);
    for (int kind = 0; kind < CHECK_KIND_COUNT; kind++)
        assert_int_equal(fixture->counts.violations[kind], expected_kind[kind]);
}

/* Sets row b of the basic output. */
static void set_row(struct fixture *fixture, uint32_t b, int32_t a0, int32_t a1, int32_t a2)
{
    int32_t *row = fixture->out + b * BASIC_K;
    row[0] = a0;
    row[1] = a1;
    row[2] = a2;
}

/* ---- tests ------------------------------------------------------------------------------- */

static void test_kind_names(void **state)
{
    (void)state;
    static const char *const expected[CHECK_KIND_COUNT] = {
        "short", "duplicate", "out_of_range", "wrong_set", "tie_rule", "order", "padding",
        "page_translation", "raw_misaligned",
    };
    for (int kind = 0; kind < CHECK_KIND_COUNT; kind++)
        assert_string_equal(check_kind_name((enum check_kind)kind), expected[kind]);
    assert_string_equal(check_kind_name(CHECK_KIND_COUNT), "unknown");
}

static void test_prepare_values(void **state)
{
    struct fixture *fixture = *state;
    struct check_context *context = &fixture->context;
    assert_int_equal(context->rows, BASIC_ROWS);
    assert_int_equal(context->k, BASIC_K);
    assert_null(context->reference_raw);
    assert_memory_equal(context->reference, basic_reference, sizeof(basic_reference));

    static const int64_t candidates[BASIC_ROWS] = { 7, 2, 2, 5, 0, 4 };
    static const int64_t above[BASIC_ROWS] = { 1, 2, 2, 1, 0, 1 };
    for (uint32_t b = 0; b < BASIC_ROWS; b++) {
        assert_int_equal(context->candidates[b], candidates[b]);
        assert_int_equal(context->above[b], above[b]);
    }
    assert_int_equal(context->boundary_key[0], topk_order_key(3.0f));
    assert_int_equal(context->boundary_key[3], topk_order_key(0.0f));
    assert_int_equal(context->boundary_key[5], topk_order_key(float_from_bits(0xFF800001u)));
    assert_true(context->seen_bytes >= 1);
}

static void test_reference_passes_every_claim(void **state)
{
    struct fixture *fixture = *state;
    static const uint32_t clean[BASIC_ROWS] = { 0 };
    expect_flags(fixture, NULL, &claims_canonical, clean);
    assert_true(fixture->counts.equals_reference);
    expect_flags(fixture, NULL, &claims_none, clean);
    assert_true(fixture->counts.equals_reference);
    /* Twice more: the scratch marks of one call must not leak into the next. */
    expect_flags(fixture, NULL, &claims_canonical, clean);
    assert_true(fixture->counts.equals_reference);
}

static void test_short(void **state)
{
    struct fixture *fixture = *state;
    set_row(fixture, 0, 4, 1, -1); /* 7 candidates, only 2 selected */
    set_row(fixture, 1, 0, -1, -1); /* 2 candidates, 1 selected */
    const uint32_t expected[BASIC_ROWS] = {
        bit(CHECK_SHORT) | bit(CHECK_WRONG_SET), bit(CHECK_SHORT) | bit(CHECK_WRONG_SET),
    };
    expect_flags(fixture, NULL, &claims_canonical, expected);
    assert_false(fixture->counts.equals_reference);
}

static void test_padding_of_exhausted_rows_is_not_short(void **state)
{
    struct fixture *fixture = *state;
    /* Rows 1, 2 and 4 end in -1 because they ran out of candidates: nothing is short. */
    static const uint32_t clean[BASIC_ROWS] = { 0 };
    expect_flags(fixture, NULL, &claims_none, clean);
    assert_int_equal(fixture->counts.violations[CHECK_SHORT], 0);
}

static void test_duplicate(void **state)
{
    struct fixture *fixture = *state;
    set_row(fixture, 0, 4, 4, 1); /* 5.0 twice: the multiset differs too */
    /* Row 3: +0.0@2 twice instead of +0.0@2 and +0.0@5: same score multiset, so only the
     * duplicate shows. */
    set_row(fixture, 3, 0, 2, 2);
    const uint32_t expected[BASIC_ROWS] = {
        [0] = bit(CHECK_DUPLICATE) | bit(CHECK_WRONG_SET),
        [3] = bit(CHECK_DUPLICATE),
    };
    expect_flags(fixture, NULL, &claims_none, expected);
}

static void test_out_of_range(void **state)
{
    struct fixture *fixture = *state;
    set_row(fixture, 0, 4, 1, 8);  /* == length */
    set_row(fixture, 1, 0, 1, 2);  /* inside the stride but outside the window */
    set_row(fixture, 2, 1, 4, 0);  /* an exact -inf */
    set_row(fixture, 3, 0, 2, -2); /* below -1 */
    set_row(fixture, 5, 0, 2, 1);  /* -inf although -NaN ranks below it */
    uint32_t oob = bit(CHECK_OUT_OF_RANGE) | bit(CHECK_WRONG_SET);
    const uint32_t expected[BASIC_ROWS] = { oob, oob, oob, oob, 0, oob };
    expect_flags(fixture, NULL, &claims_none, expected);
    assert_int_equal(fixture->counts.violations[CHECK_OUT_OF_RANGE], 5);
}

static void test_wrong_set(void **state)
{
    struct fixture *fixture = *state;
    set_row(fixture, 0, 4, 1, 7);  /* 2.0 below the boundary replaces a 3.0 */
    set_row(fixture, 3, 0, 2, 1);  /* -0.0 replaces +0.0: total order tells them apart */
    set_row(fixture, 5, 2, 3, 4);  /* the one value above the boundary left out */
    const uint32_t expected[BASIC_ROWS] = {
        [0] = bit(CHECK_WRONG_SET), [3] = bit(CHECK_WRONG_SET), [5] = bit(CHECK_WRONG_SET),
    };
    /* Canonical order still holds in every row: the report says "wrong set" only. */
    expect_flags(fixture, NULL, &claims_canonical, expected);
}

static void test_wrong_set_missing_value_above_with_ties(void **state)
{
    struct fixture *fixture = *state;
    /* Three 3.0s instead of 5.0 and two 3.0s: every key >= boundary and the count is k, only
     * the count of keys above the boundary tells. */
    set_row(fixture, 0, 1, 2, 3);
    const uint32_t expected[BASIC_ROWS] = { [0] = bit(CHECK_WRONG_SET) };
    expect_flags(fixture, NULL, &claims_canonical, expected);
}

static void test_alternative_tie_subset(void **state)
{
    struct fixture *fixture = *state;
    /* {5.0@4, 3.0@1, 3.0@3}: the same scores, but not the smallest-index tie subset. */
    set_row(fixture, 0, 4, 1, 3);
    const uint32_t expected_claimed[BASIC_ROWS] = { [0] = bit(CHECK_TIE_RULE) };
    expect_flags(fixture, NULL, &claims_canonical, expected_claimed);
    assert_false(fixture->counts.equals_reference);

    static const uint32_t clean[BASIC_ROWS] = { 0 };
    expect_flags(fixture, NULL, &claims_none, clean); /* radix, filtered: any tie subset is fine */
    assert_int_equal(fixture->counts.violations[CHECK_WRONG_SET], 0);
    assert_false(fixture->counts.equals_reference);
}

static void test_order_index_ascending_permutation(void **state)
{
    struct fixture *fixture = *state;
    set_row(fixture, 0, 1, 2, 4); /* the reference set, index-ascending */
    set_row(fixture, 2, 1, 4, -1);
    static const uint32_t clean[BASIC_ROWS] = { 0 };
    expect_flags(fixture, NULL, &claims_ascending, clean);
    assert_false(fixture->counts.equals_reference);

    const uint32_t expected[BASIC_ROWS] = { [0] = bit(CHECK_ORDER) };
    expect_flags(fixture, NULL, &claims_canonical, expected);
    expect_flags(fixture, NULL, &claims_none, clean);
}

static void test_order_canonical(void **state)
{
    struct fixture *fixture = *state;
    set_row(fixture, 0, 4, 2, 1); /* equal scores must come index-ascending */
    set_row(fixture, 3, 2, 0, 5); /* +0.0 before +NaN */
    set_row(fixture, 5, 2, 0, 3); /* -NaN before 2.0 */
    const uint32_t expected[BASIC_ROWS] = {
        [0] = bit(CHECK_ORDER), [3] = bit(CHECK_ORDER), [5] = bit(CHECK_ORDER),
    };
    expect_flags(fixture, NULL, &claims_canonical, expected);
}

static void test_order_index_ascending(void **state)
{
    struct fixture *fixture = *state;
    /* The reference row 0 [4, 1, 2] is canonical, not index-ascending. */
    const uint32_t expected[BASIC_ROWS] = { [0] = bit(CHECK_ORDER) };
    expect_flags(fixture, NULL, &claims_ascending, expected);
    set_row(fixture, 0, 1, 2, 4);
    set_row(fixture, 2, 4, 1, -1);
    const uint32_t expected_row2[BASIC_ROWS] = { [2] = bit(CHECK_ORDER) };
    expect_flags(fixture, NULL, &claims_ascending, expected_row2);
}

static void test_padding(void **state)
{
    struct fixture *fixture = *state;
    set_row(fixture, 1, 0, -1, 1); /* both candidates selected, but a -1 between them */
    set_row(fixture, 2, -1, 1, 4);
    const uint32_t expected[BASIC_ROWS] = {
        [1] = bit(CHECK_PADDING), [2] = bit(CHECK_PADDING),
    };
    expect_flags(fixture, NULL, &claims_canonical, expected);
}

static void test_combined(void **state)
{
    struct fixture *fixture = *state;
    set_row(fixture, 0, 4, 1, 3);   /* tie rule */
    set_row(fixture, 1, 0, -1, 1);  /* padding */
    set_row(fixture, 2, 1, 4, 0);   /* out of range (-inf), so a wrong set */
    set_row(fixture, 3, 0, 0, 2);   /* duplicate +NaN, multiset differs */
    set_row(fixture, 5, 2, 0, -1);  /* order, short, wrong set */
    const uint32_t expected[BASIC_ROWS] = {
        [0] = bit(CHECK_TIE_RULE),
        [1] = bit(CHECK_PADDING),
        [2] = bit(CHECK_OUT_OF_RANGE) | bit(CHECK_WRONG_SET),
        [3] = bit(CHECK_DUPLICATE) | bit(CHECK_WRONG_SET),
        [5] = bit(CHECK_ORDER) | bit(CHECK_SHORT) | bit(CHECK_WRONG_SET),
    };
    expect_flags(fixture, NULL, &claims_canonical, expected);
    assert_int_equal(fixture->counts.rows_with_violation, 5);
    assert_int_equal(fixture->counts.violations[CHECK_WRONG_SET], 3);
    assert_false(fixture->counts.equals_reference);

    /* The same context checks a clean output cleanly afterwards (marks cleared, counts reset). */
    memcpy(fixture->out, basic_reference, sizeof(basic_reference));
    static const uint32_t clean[BASIC_ROWS] = { 0 };
    expect_flags(fixture, NULL, &claims_canonical, clean);
    assert_true(fixture->counts.equals_reference);
}

/* Rows checked in parts, each with its own marks (as threads do), give what one call gives. */
static void test_rows_in_parts_equal_one_call(void **state)
{
    struct fixture *fixture = *state;
    struct audit_error err = { 0 };
    set_row(fixture, 0, 4, 1, 3);
    set_row(fixture, 1, 0, -1, 1);
    set_row(fixture, 3, 0, 0, 2);
    set_row(fixture, 5, 2, 0, -1);
    struct check_counts whole;
    uint32_t whole_flags[BASIC_ROWS];
    assert_int_equal(checks_output(&fixture->context, fixture->out, NULL, &claims_canonical,
                                   &whole, whole_flags, &err), 0);
    const uint32_t splits[][2] = { { 0, 1 }, { 1, 4 }, { 4, 4 }, { 4, BASIC_ROWS } };
    uint8_t *seen = calloc(fixture->context.seen_bytes, 1);
    assert_non_null(seen);
    struct check_counts sum = { .equals_reference = true };
    uint32_t flags[BASIC_ROWS] = { 0 };
    for (size_t i = 0; i < sizeof(splits) / sizeof(splits[0]); i++) {
        struct check_counts part;
        assert_int_equal(checks_output_rows(&fixture->context, fixture->out, NULL,
                                            &claims_canonical, splits[i][0], splits[i][1], seen,
                                            &part, flags, &err), 0);
        check_counts_add(&sum, &part);
    }
    assert_memory_equal(&sum, &whole, sizeof(sum));
    assert_memory_equal(flags, whole_flags, sizeof(flags));
    for (size_t i = 0; i < fixture->context.seen_bytes; i++)
        assert_int_equal(seen[i], 0); /* left clear for the next call */
    /* Rows of the reference alone equal the reference, whatever the other rows hold. */
    struct check_counts part;
    assert_int_equal(checks_output_rows(&fixture->context, fixture->out, NULL, NULL, 2, 3, seen,
                                        &part, NULL, &err), 0);
    assert_true(part.equals_reference);
    assert_int_equal(checks_output_rows(&fixture->context, fixture->out, NULL, NULL, 3, BASIC_ROWS + 1,
                                        seen, &part, NULL, &err), AUDIT_EUSAGE);
    free(seen);
}

/* A row selecting an already checked row's multiset in another order takes that row's multiset
 * kinds and has only its order and padding judged: the flags and counts equal a full check's,
 * for every claim set, on seeded random outputs over the basic record (NaNs, -inf, ties,
 * padding, duplicates and out-of-range entries included). */
static int32_t random_entry(void)
{
    const uint32_t draw = random_below(24);
    return draw < 16 ? (int32_t)(draw % 8) : draw < 21 ? -1 : draw < 23 ? 9 : -3;
}

static bool same_multiset(const int32_t *a, const int32_t *b)
{
    int32_t x[BASIC_K], y[BASIC_K];
    memcpy(x, a, sizeof(x));
    memcpy(y, b, sizeof(y));
    for (int i = 0; i < BASIC_K; i++)
        for (int j = i + 1; j < BASIC_K; j++) {
            if (x[j] < x[i]) { int32_t t = x[i]; x[i] = x[j]; x[j] = t; }
            if (y[j] < y[i]) { int32_t t = y[i]; y[i] = y[j]; y[j] = t; }
        }
    return memcmp(x, y, sizeof(x)) == 0;
}

static void test_reuse_equals_full_check(void **state)
{
    struct fixture *fixture = *state;
    struct audit_error err = { 0 };
    const struct check_claims *const claim_sets[] = { &claims_none, &claims_canonical,
                                                      &claims_ascending };
    uint8_t *seen = calloc(fixture->context.seen_bytes, 1);
    assert_non_null(seen);
    rng_state = 0x5eed;
    unsigned reused_rows = 0;
    for (int trial = 0; trial < 4000; trial++) {
        int32_t base[BASIC_ROWS * BASIC_K], out[BASIC_ROWS * BASIC_K];
        uint32_t differing[BASIC_ROWS];
        for (int i = 0; i < BASIC_ROWS * BASIC_K; i++)
            base[i] = random_below(3) ? basic_reference[i] : random_entry();
        for (uint32_t b = 0; b < BASIC_ROWS; b++) {
            int32_t *row = out + b * BASIC_K;
            const int32_t *base_row = base + b * BASIC_K;
            if (random_below(4)) { /* the same entries in a random order */
                memcpy(row, base_row, BASIC_K * sizeof(int32_t));
                for (int j = BASIC_K - 1; j > 0; j--) {
                    const uint32_t other = random_below((uint32_t)j + 1);
                    int32_t t = row[j]; row[j] = row[other]; row[other] = t;
                }
            } else {
                for (int j = 0; j < BASIC_K; j++)
                    row[j] = random_below(2) ? base_row[j] : random_entry();
            }
            differing[b] = same_multiset(row, base_row) ? 0u : 1u;
        }
        for (size_t c = 0; c < sizeof(claim_sets) / sizeof(claim_sets[0]); c++) {
            uint32_t base_flags[BASIC_ROWS], full_flags[BASIC_ROWS], reused_flags[BASIC_ROWS];
            struct check_counts base_counts, full, reused;
            assert_int_equal(checks_output_rows(&fixture->context, base, NULL, claim_sets[c], 0,
                                                BASIC_ROWS, seen, &base_counts, base_flags, &err),
                             0);
            assert_int_equal(checks_output_rows(&fixture->context, out, NULL, claim_sets[c], 0,
                                                BASIC_ROWS, seen, &full, full_flags, &err), 0);
            const struct check_reuse reuse = { base_flags, differing };
            assert_int_equal(checks_output_rows_reusing(&fixture->context, out, NULL,
                                                        claim_sets[c], 0, BASIC_ROWS, seen,
                                                        &reuse, &reused, reused_flags, &err), 0);
            assert_memory_equal(reused_flags, full_flags, sizeof(full_flags));
            assert_int_equal(reused.rows_with_violation, full.rows_with_violation);
            for (int kind = 0; kind < CHECK_KIND_COUNT; kind++)
                assert_int_equal(reused.violations[kind], full.violations[kind]);
            assert_int_equal(reused.equals_reference, full.equals_reference);
            for (uint32_t b = 0; b < BASIC_ROWS; b++)
                reused_rows += differing[b] == 0 && !(base_flags[b] & (bit(CHECK_OUT_OF_RANGE) |
                                                                       bit(CHECK_DUPLICATE)));
        }
    }
    assert_true(reused_rows > 10000); /* the reuse path did run */
    for (size_t i = 0; i < fixture->context.seen_bytes; i++)
        assert_int_equal(seen[i], 0);
    free(seen);
}

static void test_null_row_flags_and_claims(void **state)
{
    struct fixture *fixture = *state;
    struct audit_error err = { 0 };
    set_row(fixture, 0, 4, 4, 1);
    assert_int_equal(checks_output(&fixture->context, fixture->out, NULL, NULL, &fixture->counts,
                                   NULL, &err), 0);
    assert_int_equal(fixture->counts.violations[CHECK_DUPLICATE], 1);
    assert_int_equal(fixture->counts.rows_with_violation, 1);
}

static void test_k_override(void **state)
{
    (void)state;
    struct capture_record record;
    struct check_context context;
    struct audit_error err = { 0 };
    basic_record(&record);
    assert_int_equal(checks_prepare(&context, &record, 2, &err), 0);
    assert_int_equal(context.k, 2);
    static const int32_t expected[BASIC_ROWS * 2] = { 4, 1, 0, 1, 1, 4, 0, 2, -1, -1, 0, 2 };
    assert_memory_equal(context.reference, expected, sizeof(expected));
    assert_int_equal(context.above[0], 1);      /* 5.0 above the 3.0 boundary */
    assert_int_equal(context.above[1], 2);      /* exactly k candidates: no boundary */
    struct check_counts counts;
    assert_int_equal(checks_output(&context, expected, NULL, &claims_canonical, &counts, NULL,
                                   &err), 0);
    assert_true(counts.equals_reference);
    assert_int_equal(counts.rows_with_violation, 0);
    checks_release(&context);
    record_release(&record);
}

static void test_rejects_bad_calls(void **state)
{
    (void)state;
    struct capture_record record;
    struct check_context context;
    struct audit_error err = { 0 };
    basic_record(&record);
    record.k = 0;
    assert_int_equal(checks_prepare(&context, &record, 0, &err), AUDIT_EUSAGE);
    assert_non_null(strstr(err.message, "k = 0"));
    assert_int_equal(checks_prepare(&context, NULL, 3, &err), AUDIT_EUSAGE);
    record_release(&record);
}

/* Row starts: windows inside a wider stride; an index past the window but inside the stride is
 * out of range. */
static void test_row_starts(void **state)
{
    (void)state;
    const float poison = float_from_bits(0x7FC0BEEFu);
    const float scores[2 * 10] = {
        poison, poison, poison, 1.0f, 9.0f, 1.0f, 2.0f, poison, poison, poison,
        0.0f, 0.0f, 0.0f, 0.0f, 0.0f, 0.0f, 0.0f, 0.0f, 0.0f, 0.0f,
    };
    const int32_t lengths[2] = { 4, 10 };
    const int32_t row_starts[2] = { 3, 0 };
    struct fixture *fixture = calloc(1, sizeof(*fixture));
    assert_non_null(fixture);
    record_init(&fixture->record, 2, 2, 10, scores, lengths, row_starts);
    struct audit_error err = { 0 };
    assert_int_equal(checks_prepare(&fixture->context, &fixture->record, 0, &err), 0);
    static const int32_t reference[4] = { 1, 3, 0, 1 };
    assert_memory_equal(fixture->context.reference, reference, sizeof(reference));
    memcpy(fixture->out, reference, sizeof(reference));
    static const uint32_t clean[2] = { 0 };
    expect_flags(fixture, NULL, &claims_canonical, clean);

    fixture->out[1] = 4; /* window-relative 4 == length: the poison NaN after the window */
    fixture->out[2] = 7; /* any zero is right on an all-zero row, but not the smallest index */
    fixture->out[3] = 2;
    const uint32_t expected[2] = {
        bit(CHECK_OUT_OF_RANGE) | bit(CHECK_WRONG_SET), bit(CHECK_TIE_RULE) | bit(CHECK_ORDER),
    };
    expect_flags(fixture, NULL, &claims_canonical, expected);
    const uint32_t expected_unclaimed[2] = { bit(CHECK_OUT_OF_RANGE) | bit(CHECK_WRONG_SET), 0 };
    expect_flags(fixture, NULL, &claims_none, expected_unclaimed);
    checks_release(&fixture->context);
    record_release(&fixture->record);
    free(fixture);
}

/* ---- paged records ----------------------------------------------------------------------- */

/* Two rows of the basic record's rows 0 and 3 with page_size 2: row 0 uses pages 10..13 from
 * column 0, row 1 pages 20..22 from column 1 of its page-table row. */
#define PAGED_COLS 5
static const int32_t paged_table[2 * PAGED_COLS] = { 10, 11, 12, 13, 99, 99, 20, 21, 22, 99 };
static const int32_t paged_table_row_starts[2] = { 0, 1 };

static int32_t hand_translate(uint32_t b, int32_t idx)
{
    return paged_table[b * PAGED_COLS + paged_table_row_starts[b] + idx / 2] * 2 + idx % 2;
}

static int setup_paged(void **state)
{
    struct capture_record basic;
    basic_record(&basic);
    float scores[2 * BASIC_STRIDE];
    memcpy(scores, basic.scores, BASIC_STRIDE * sizeof(float));
    memcpy(scores + BASIC_STRIDE, basic.scores + 3 * BASIC_STRIDE, BASIC_STRIDE * sizeof(float));
    const int32_t lengths[2] = { 8, 6 };
    record_release(&basic);

    struct fixture *fixture = calloc(1, sizeof(*fixture));
    assert_non_null(fixture);
    record_init(&fixture->record, 2, BASIC_K, BASIC_STRIDE, scores, lengths, NULL);
    record_add_pages(&fixture->record, 2, PAGED_COLS, paged_table, paged_table_row_starts);
    struct audit_error err = { 0 };
    if (checks_prepare(&fixture->context, &fixture->record, 0, &err) < 0)
        fail_msg("checks_prepare: %s", err.message);
    static const int32_t raw[2 * BASIC_K] = { 4, 1, 2, 0, 2, 5 };
    memcpy(fixture->raw, raw, sizeof(raw));
    for (uint32_t b = 0; b < 2; b++)
        for (uint32_t j = 0; j < BASIC_K; j++)
            fixture->out[b * BASIC_K + j] = hand_translate(b, raw[b * BASIC_K + j]);
    *state = fixture;
    return 0;
}

static void test_paged_reference(void **state)
{
    struct fixture *fixture = *state;
    assert_non_null(fixture->context.reference_raw);
    assert_memory_equal(fixture->context.reference_raw, fixture->raw, 2 * BASIC_K * 4);
    assert_memory_equal(fixture->context.reference, fixture->out, 2 * BASIC_K * 4);
    static const uint32_t clean[2] = { 0 };
    expect_flags(fixture, fixture->raw, &claims_canonical, clean);
    assert_true(fixture->counts.equals_reference);
}

static void test_paged_requires_raw(void **state)
{
    struct fixture *fixture = *state;
    struct audit_error err = { 0 };
    assert_int_equal(checks_output(&fixture->context, fixture->out, NULL, &claims_none,
                                   &fixture->counts, NULL, &err), AUDIT_EUSAGE);
    assert_non_null(strstr(err.message, "raw"));
}

static void test_page_translation(void **state)
{
    struct fixture *fixture = *state;
    fixture->out[1] += 2;          /* the wrong page for raw 1 */
    fixture->out[5] = fixture->raw[5]; /* untranslated */
    const uint32_t expected[2] = { bit(CHECK_PAGE_TRANSLATION), bit(CHECK_PAGE_TRANSLATION) };
    expect_flags(fixture, fixture->raw, &claims_canonical, expected);
    assert_false(fixture->counts.equals_reference);
}

static void test_raw_misaligned(void **state)
{
    struct fixture *fixture = *state;
    fixture->out[2] = -1; /* raw holds an index, the translated slot is empty */
    fixture->raw[5] = -1; /* the translated slot holds an index, the raw one is empty */
    const uint32_t expected[2] = {
        bit(CHECK_RAW_MISALIGNED),
        bit(CHECK_RAW_MISALIGNED) | bit(CHECK_SHORT) | bit(CHECK_WRONG_SET),
    };
    expect_flags(fixture, fixture->raw, &claims_canonical, expected);
}

static void test_paged_raw_judged_for_set_and_order(void **state)
{
    struct fixture *fixture = *state;
    /* Row 0 raw [1, 2, 4] translated alike: the index-ascending form (filtered-det sorts local
     * indices before translating). */
    const int32_t raw_row[3] = { 1, 2, 4 };
    for (int j = 0; j < 3; j++) {
        fixture->raw[j] = raw_row[j];
        fixture->out[j] = hand_translate(0, raw_row[j]);
    }
    static const uint32_t clean[2] = { 0 };
    expect_flags(fixture, fixture->raw, &claims_ascending, clean);
    const uint32_t expected[2] = { bit(CHECK_ORDER) };
    expect_flags(fixture, fixture->raw, &claims_canonical, expected);
    fixture->raw[2] = 7; /* 2.0 below the boundary, translated consistently */
    fixture->out[2] = hand_translate(0, 7);
    const uint32_t wrong[2] = { bit(CHECK_WRONG_SET) };
    expect_flags(fixture, fixture->raw, &claims_ascending, wrong);
}

/* ---- randomized comparison with a sort-based oracle -------------------------------------- */

static uint32_t rng_next(void)
{
    return (uint32_t)(next_random() >> 32);
}

static uint32_t rng_below(uint32_t bound)
{
    return bound ? rng_next() % bound : 0;
}

static int compare_u32(const void *a, const void *b)
{
    uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;
    return (x > y) - (x < y);
}

/* Flags of one row computed the slow, obvious way. */
static uint32_t oracle_row_flags(const float *window, int32_t length, uint32_t k,
                                 const int32_t *row, const int32_t *reference_row,
                                 const struct check_claims *claims)
{
    uint32_t flags = 0;
    int64_t candidates = 0;
    for (int32_t i = 0; i < length; i++)
        candidates += bits_of(window[i]) != TOPK_NEG_INF_BITS;
    int64_t needed = candidates < (int64_t)k ? candidates : (int64_t)k;

    int64_t real = 0;
    bool oob = false, pad = false, dup = false;
    uint32_t selected_keys[64], reference_keys[64];
    int32_t distinct[64];
    uint32_t selected_count = 0, reference_count = 0, distinct_count = 0;
    for (uint32_t j = 0; j < k; j++) {
        int32_t v = row[j];
        if (v == -1) {
            pad = true;
            continue;
        }
        real++;
        if (pad)
            flags |= bit(CHECK_PADDING);
        if (v < 0 || v >= length || bits_of(window[v]) == TOPK_NEG_INF_BITS) {
            oob = true;
            continue;
        }
        selected_keys[selected_count++] = topk_order_key(window[v]);
        bool repeated = false;
        for (uint32_t i = 0; i < distinct_count; i++)
            repeated |= distinct[i] == v;
        if (repeated)
            dup = true;
        else
            distinct[distinct_count++] = v;
    }
    for (uint32_t j = 0; j < k; j++)
        if (reference_row[j] >= 0)
            reference_keys[reference_count++] = topk_order_key(window[reference_row[j]]);
    if (real < needed)
        flags |= bit(CHECK_SHORT);
    if (oob)
        flags |= bit(CHECK_OUT_OF_RANGE);
    if (dup)
        flags |= bit(CHECK_DUPLICATE);
    qsort(selected_keys, selected_count, sizeof(uint32_t), compare_u32);
    qsort(reference_keys, reference_count, sizeof(uint32_t), compare_u32);
    bool right = !oob && selected_count == reference_count &&
                 memcmp(selected_keys, reference_keys, selected_count * sizeof(uint32_t)) == 0;
    if (!right)
        flags |= bit(CHECK_WRONG_SET);
    if (right && claims->smallest_index_ties) {
        bool same = distinct_count == reference_count;
        for (uint32_t j = 0; j < k && same; j++) {
            if (reference_row[j] < 0)
                continue;
            bool found = false;
            for (uint32_t i = 0; i < distinct_count; i++)
                found |= distinct[i] == reference_row[j];
            same = found;
        }
        if (!same)
            flags |= bit(CHECK_TIE_RULE);
    }
    /* Order among the distinct valid entries, in output order. */
    for (uint32_t i = 1; i < distinct_count; i++) {
        uint32_t previous = topk_order_key(window[distinct[i - 1]]);
        uint32_t current = topk_order_key(window[distinct[i]]);
        if (claims->canonical_order &&
            (current > previous || (current == previous && distinct[i] < distinct[i - 1])))
            flags |= bit(CHECK_ORDER);
        if (claims->index_ascending && distinct[i] < distinct[i - 1])
            flags |= bit(CHECK_ORDER);
    }
    return flags;
}

static void shuffle(int32_t *values, uint32_t count)
{
    for (uint32_t i = count; i > 1; i--) {
        uint32_t j = rng_below(i);
        int32_t swap = values[i - 1];
        values[i - 1] = values[j];
        values[j] = swap;
    }
}

static int compare_i32(const void *a, const void *b)
{
    int32_t x = *(const int32_t *)a, y = *(const int32_t *)b;
    return (x > y) - (x < y);
}

static void test_random_against_oracle(void **state)
{
    (void)state;
    enum { ROWS = 24, STRIDE = 40, TRIALS = 300 };
    const struct check_claims *claim_sets[3] = { &claims_none, &claims_canonical,
                                                 &claims_ascending };
    float alphabet[8] = { 0.0f, -0.0f, 1.0f, 2.0f, NEG_INF, float_from_bits(0x7FC00000u),
                          float_from_bits(0xFFC00000u), 1e-40f };
    uint64_t rows_flagged = 0, rows_checked = 0;
    rng_state = 20261129;

    for (int trial = 0; trial < TRIALS; trial++) {
        uint32_t k = 1 + rng_below(12);
        uint32_t variety = 1 + rng_below(8); /* few distinct values: many ties */
        float scores[ROWS * STRIDE];
        int32_t lengths[ROWS];
        for (uint32_t b = 0; b < ROWS; b++) {
            lengths[b] = (int32_t)rng_below(STRIDE + 1);
            for (uint32_t i = 0; i < STRIDE; i++)
                scores[b * STRIDE + i] = alphabet[rng_below(variety)];
        }
        struct capture_record record;
        struct check_context context;
        struct audit_error err = { 0 };
        record_init(&record, ROWS, k, STRIDE, scores, lengths, NULL);
        if (checks_prepare(&context, &record, 0, &err) < 0)
            fail_msg("checks_prepare: %s", err.message);

        int32_t out[ROWS * 12];
        memcpy(out, context.reference, ROWS * k * sizeof(int32_t));
        for (uint32_t b = 0; b < ROWS; b++) {
            int32_t *row = out + b * k;
            int32_t length = lengths[b];
            uint32_t real = 0;
            while (real < k && row[real] >= 0)
                real++;
            switch (rng_below(8)) {
            case 0: /* any candidates, any order */
                for (uint32_t j = 0; j < real; j++)
                    row[j] = length ? (int32_t)rng_below((uint32_t)length) : -1;
                break;
            case 1: /* the reference set shuffled */
                shuffle(row, real);
                break;
            case 2: /* the reference set index-ascending */
                qsort(row, real, sizeof(int32_t), compare_i32);
                break;
            case 3: /* one slot replaced by a random index, maybe out of range or -1 */
                if (real)
                    row[rng_below(real)] = (int32_t)rng_below((uint32_t)length + 3) - 1;
                break;
            case 4: /* a hole in the middle */
                if (real > 1)
                    row[rng_below(real - 1)] = -1;
                break;
            case 5: /* a distinct random subset (an alternative tie subset, often) */
                for (uint32_t j = 0; j < real; j++) {
                    int32_t pick;
                    bool fresh;
                    do {
                        pick = (int32_t)rng_below((uint32_t)length);
                        fresh = true;
                        for (uint32_t i = 0; i < j; i++)
                            fresh &= row[i] != pick;
                    } while (!fresh);
                    row[j] = pick;
                }
                break;
            default: /* unchanged */
                break;
            }
        }
        for (int c = 0; c < 3; c++) {
            uint32_t flags[ROWS];
            struct check_counts counts;
            if (checks_output(&context, out, NULL, claim_sets[c], &counts, flags, &err) < 0)
                fail_msg("checks_output: %s", err.message);
            for (uint32_t b = 0; b < ROWS; b++) {
                uint32_t expected = oracle_row_flags(record.scores + b * STRIDE, lengths[b], k,
                                                     out + b * k, context.reference + b * k,
                                                     claim_sets[c]);
                if (flags[b] != expected) {
                    print_flags("expected", expected);
                    print_flags("got     ", flags[b]);
                    fail_msg("trial %d claims %d row %u (length %d, k %u): flags 0x%x, oracle "
                             "0x%x", trial, c, b, lengths[b], k, flags[b], expected);
                }
                rows_flagged += flags[b] != 0;
                rows_checked++;
            }
        }
        checks_release(&context);
        record_release(&record);
    }
    /* The mutations must have produced both clean and flagged rows, or the test proves little. */
    assert_true(rows_flagged > rows_checked / 10);
    assert_true(rows_flagged < rows_checked);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_kind_names),
        cmocka_unit_test_setup_teardown(test_prepare_values, setup_basic, teardown_fixture),
        cmocka_unit_test_setup_teardown(test_reference_passes_every_claim, setup_basic,
                                        teardown_fixture),
        cmocka_unit_test_setup_teardown(test_short, setup_basic, teardown_fixture),
        cmocka_unit_test_setup_teardown(test_padding_of_exhausted_rows_is_not_short, setup_basic,
                                        teardown_fixture),
        cmocka_unit_test_setup_teardown(test_duplicate, setup_basic, teardown_fixture),
        cmocka_unit_test_setup_teardown(test_out_of_range, setup_basic, teardown_fixture),
        cmocka_unit_test_setup_teardown(test_wrong_set, setup_basic, teardown_fixture),
        cmocka_unit_test_setup_teardown(test_wrong_set_missing_value_above_with_ties,
                                        setup_basic, teardown_fixture),
        cmocka_unit_test_setup_teardown(test_alternative_tie_subset, setup_basic,
                                        teardown_fixture),
        cmocka_unit_test_setup_teardown(test_order_index_ascending_permutation, setup_basic,
                                        teardown_fixture),
        cmocka_unit_test_setup_teardown(test_order_canonical, setup_basic, teardown_fixture),
        cmocka_unit_test_setup_teardown(test_order_index_ascending, setup_basic,
                                        teardown_fixture),
        cmocka_unit_test_setup_teardown(test_padding, setup_basic, teardown_fixture),
        cmocka_unit_test_setup_teardown(test_combined, setup_basic, teardown_fixture),
        cmocka_unit_test_setup_teardown(test_rows_in_parts_equal_one_call, setup_basic,
                                        teardown_fixture),
        cmocka_unit_test_setup_teardown(test_reuse_equals_full_check, setup_basic,
                                        teardown_fixture),
        cmocka_unit_test_setup_teardown(test_null_row_flags_and_claims, setup_basic,
                                        teardown_fixture),
        cmocka_unit_test(test_k_override),
        cmocka_unit_test(test_rejects_bad_calls),
        cmocka_unit_test(test_row_starts),
        cmocka_unit_test_setup_teardown(test_paged_reference, setup_paged, teardown_fixture),
        cmocka_unit_test_setup_teardown(test_paged_requires_raw, setup_paged, teardown_fixture),
        cmocka_unit_test_setup_teardown(test_page_translation, setup_paged, teardown_fixture),
        cmocka_unit_test_setup_teardown(test_raw_misaligned, setup_paged, teardown_fixture),
        cmocka_unit_test_setup_teardown(test_paged_raw_judged_for_set_and_order, setup_paged,
                                        teardown_fixture),
        cmocka_unit_test(test_random_against_oracle),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
