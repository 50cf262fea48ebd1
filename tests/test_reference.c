/* The CPU reference top-k against a brute-force oracle (sort every candidate by key descending,
 * index ascending) on random and adversarial rows, and the record-level wrapper (row offsets,
 * padded strides, page tables, errors).
 *
 * The random rows come from a seed printed at start; replay a failure with
 * DSATOPK_TEST_SEED=<seed> ./test_reference */
#include <inttypes.h>
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <cmocka.h>

#include "capture.h"
#include "error.h"
#include "reference.h"
#include "test_util.h"

static uint64_t test_seed;

/* ---- the oracle: written independently of src/reference/reference.c ---- */

/* The IEEE-754 totalOrder predicate on the bits, restated: compare sign first, then the
 * magnitude, reversed for negatives. Returns >0 when a ranks above b. */
static int total_order_compare(uint32_t a, uint32_t b)
{
    int a_negative = a >> 31, b_negative = b >> 31;
    if (a_negative != b_negative)
        return a_negative ? -1 : 1;
    uint32_t a_magnitude = a & 0x7FFFFFFFu, b_magnitude = b & 0x7FFFFFFFu;
    if (a_magnitude == b_magnitude)
        return 0;
    int magnitude_order = a_magnitude > b_magnitude ? 1 : -1;
    return a_negative ? -magnitude_order : magnitude_order;
}

struct oracle_entry {
    uint32_t bits;
    int32_t index;
};

static int oracle_compare(const void *pa, const void *pb)
{
    const struct oracle_entry *a = pa, *b = pb;
    int order = total_order_compare(a->bits, b->bits);
    if (order != 0)
        return -order; /* higher rank first */
    return (a->index > b->index) - (a->index < b->index);
}

static int64_t oracle_row(const float *window, int32_t length, uint32_t k, int32_t *out)
{
    struct oracle_entry *entries = malloc(((size_t)length + 1) * sizeof(*entries));
    assert_non_null(entries);
    int64_t candidates = 0;
    for (int32_t i = 0; i < length; i++) {
        uint32_t bits = bits_of(window[i]);
        if (bits == 0xFF800000u)
            continue;
        entries[candidates].bits = bits;
        entries[candidates].index = i;
        candidates++;
    }
    qsort(entries, (size_t)candidates, sizeof(*entries), oracle_compare);
    int64_t real = candidates < (int64_t)k ? candidates : (int64_t)k;
    for (uint32_t j = 0; j < k; j++)
        out[j] = (int64_t)j < real ? entries[j].index : -1;
    free(entries);
    return real;
}

/* Compares the reference with the oracle on one row; prints the row's description on a
 * mismatch so that a failure can be replayed. */
static void check_row(const float *window, int32_t length, uint32_t k, struct topk_scratch *scratch,
                      const char *what)
{
    int32_t *expected = malloc(((size_t)k + 1) * sizeof(*expected));
    int32_t *got = malloc(((size_t)k + 1) * sizeof(*got));
    assert_non_null(expected);
    assert_non_null(got);
    int64_t expected_real = oracle_row(window, length, k, expected);
    int64_t got_real = topk_reference_row(window, length, k, got, scratch);
    if (got_real != expected_real || memcmp(expected, got, (size_t)k * sizeof(*got)) != 0) {
        uint32_t first = 0;
        while (first < k && expected[first] == got[first])
            first++;
        print_error("mismatch (%s): seed %" PRIu64 " length %d k %u: returned %" PRId64
                    " (want %" PRId64 "), first difference at rank %u: got %d want %d\n",
                    what, test_seed, length, k, got_real, expected_real, first,
                    first < k ? got[first] : 0, first < k ? expected[first] : 0);
        fail();
    }
    free(got);
    free(expected);
}

/* ---- score generators ---- */

static const uint32_t special_bits[] = {
    0x00000000u, 0x80000000u,                           /* +0.0, -0.0 */
    0x3F800000u, 0xBF800000u, 0x40000000u,              /* 1, -1, 2 */
    0x7F800000u, 0xFF800000u,                           /* +inf, -inf */
    0x7FC00000u, 0x7F800001u, 0x7FFFFFFFu, 0x7FC00123u, /* +NaN payloads */
    0xFFC00000u, 0xFF800001u, 0xFFFFFFFFu, 0xFFC0ABCDu, /* -NaN payloads */
    0x00000001u, 0x007FFFFFu, 0x80000001u, 0x807FFFFFu, /* subnormals */
    0x00800000u, 0x80800000u, 0x7F7FFFFFu, 0xFF7FFFFFu, /* FLT_MIN, FLT_MAX and negatives */
};
#define SPECIAL_COUNT (sizeof(special_bits) / sizeof(special_bits[0]))

enum family {
    FAMILY_RANDOM_BITS,  /* every bit pattern: NaNs of both signs, infinities, subnormals */
    FAMILY_ALPHABET,     /* a few special values: huge tie sets at every boundary */
    FAMILY_QUANTIZED,    /* a handful of levels: ties straddling k */
    FAMILY_ZERO_PLATEAU, /* ReLU shape with +0.0 and -0.0 mixed */
    FAMILY_NARROW,       /* keys differing in the low bits only: every refinement level */
    FAMILY_LOW_BITS,     /* keys differing in the lowest 10 bits only, with ties */
    FAMILY_NEG_INF,      /* mostly -inf with some -NaN and finite values */
    FAMILY_COUNT,
};

static float generate_score(enum family family, uint32_t base_bits)
{
    switch (family) {
    case FAMILY_RANDOM_BITS: return float_from_bits((uint32_t)next_random());
    case FAMILY_ALPHABET: return float_from_bits(special_bits[random_below(6 + base_bits % 6)]);
    case FAMILY_QUANTIZED: return (float)random_below(8) * 0.25f - 0.5f;
    case FAMILY_ZERO_PLATEAU: {
        uint32_t pick = random_below(100);
        if (pick < 10)
            return (float)(random_below(1000) + 1) * 0.001f;
        return pick < 55 ? 0.0f : -0.0f;
    }
    case FAMILY_NARROW: return float_from_bits(base_bits + random_below(1u << 21));
    case FAMILY_LOW_BITS: return float_from_bits(base_bits + random_below(64) * 16);
    default: {
        uint32_t pick = random_below(10);
        if (pick < 6)
            return float_from_bits(0xFF800000u);
        if (pick < 8)
            return float_from_bits(0xFF800000u + 1 + random_below(0x7FFFFF));
        return float_from_bits(special_bits[random_below(SPECIAL_COUNT)]);
    }
    }
}

static uint32_t pick_k(int32_t length)
{
    switch (random_below(6)) {
    case 0: return 1;
    case 1: return (uint32_t)length + 1 + random_below(5); /* k > length */
    case 2: return length > 2 ? (uint32_t)length / 2 + random_below(3) : 2;
    default: return 1 + random_below((uint32_t)length + 3);
    }
}

/* ---- tests ---- */

static void test_order_key_is_total_order(void **state)
{
    (void)state;
    assert_int_equal(topk_order_key(float_from_bits(0xFF800000u)), 0x007FFFFFu);
    assert_true(topk_order_key(0.0f) > topk_order_key(-0.0f));
    assert_true(topk_order_key(float_from_bits(0x7FC00000u)) > topk_order_key(INFINITY));
    assert_true(topk_order_key(float_from_bits(0xFFC00000u)) < topk_order_key(-INFINITY));
    rng_state = test_seed ^ 0x1111;
    for (int i = 0; i < 200000; i++) {
        uint32_t a = (uint32_t)next_random(), b = (uint32_t)next_random();
        if (i % 4 == 0)
            b = a ^ (1u << random_below(32));
        uint32_t key_a = topk_order_key(float_from_bits(a)), key_b = topk_order_key(float_from_bits(b));
        int key_order = (key_a > key_b) - (key_a < key_b);
        assert_int_equal(key_order, total_order_compare(a, b));
    }
}

static void test_random_rows_match_oracle(void **state)
{
    (void)state;
    rng_state = test_seed;
    struct topk_scratch scratch = { 0 };
    float *row = malloc((size_t)40000 * sizeof(*row));
    assert_non_null(row);
    const int row_count = 4000;
    for (int r = 0; r < row_count; r++) {
        enum family family = (enum family)random_below(FAMILY_COUNT);
        /* Mostly short rows; some past the lane threshold of the histograms. */
        int32_t length = random_below(10) == 0 ? (int32_t)(16000 + random_below(24000))
                                                : (int32_t)random_below(3000);
        uint32_t base_bits = (uint32_t)next_random() & 0xFFE00000u;
        if ((base_bits & 0x7F800000u) == 0x7F800000u)
            base_bits &= 0xBFFFFFFFu; /* keep the narrow families away from NaN/inf */
        for (int32_t i = 0; i < length; i++)
            row[i] = generate_score(family, base_bits);
        uint32_t k = pick_k(length);
        char what[64];
        snprintf(what, sizeof(what), "random row %d family %d", r, (int)family);
        check_row(row, length, k, &scratch, what);
    }
    printf("[ INFO     ] %d random rows matched the oracle (seed %" PRIu64 ")\n", row_count,
           test_seed);
    topk_scratch_free(&scratch);
    free(row);
}

static void test_ties_straddling_k(void **state)
{
    (void)state;
    enum { LENGTH = 5000, TIES = 600, ABOVE = 300 };
    float *row = malloc(LENGTH * sizeof(*row));
    int32_t *got = malloc(LENGTH * sizeof(*got));
    assert_non_null(row);
    assert_non_null(got);
    for (int i = 0; i < LENGTH; i++)
        row[i] = 1.0f;
    /* ABOVE distinct values above the tie value 2.0, TIES copies of 2.0, the rest 1.0. */
    rng_state = test_seed ^ 0x2222;
    int placed = 0;
    while (placed < ABOVE + TIES) {
        int at = (int)random_below(LENGTH);
        if (row[at] != 1.0f)
            continue;
        row[at] = placed < ABOVE ? 3.0f + (float)placed : 2.0f;
        placed++;
    }
    struct topk_scratch scratch = { 0 };
    uint32_t k = ABOVE + 100;
    assert_int_equal(topk_reference_row(row, LENGTH, k, got, &scratch), k);
    /* The first ABOVE are the distinct values, descending; then the 100 smallest indices of 2.0. */
    for (int j = 1; j < ABOVE; j++)
        assert_true(row[got[j - 1]] > row[got[j]]);
    int previous = -1, taken = 0;
    for (int i = 0; i < LENGTH && taken < 100; i++) {
        if (row[i] != 2.0f)
            continue;
        assert_true(got[ABOVE + taken] == i);
        assert_true(i > previous);
        previous = i;
        taken++;
    }
    for (uint32_t kk = ABOVE - 2; kk < ABOVE + TIES + 3; kk += 7)
        check_row(row, LENGTH, kk, &scratch, "ties straddling k");
    topk_scratch_free(&scratch);
    free(got);
    free(row);
}

static void test_signed_zero_plateau(void **state)
{
    (void)state;
    /* +0.0 ranks above -0.0; within each, smaller index first. */
    const float row[] = { -0.0f, 0.0f, -0.0f, 0.5f, 0.0f, -0.0f, 0.0f, -1.0f };
    int32_t got[8];
    const int32_t want[8] = { 3, 1, 4, 6, 0, 2, 5, 7 };
    struct topk_scratch scratch = { 0 };
    assert_int_equal(topk_reference_row(row, 8, 8, got, &scratch), 8);
    assert_memory_equal(got, want, sizeof(want));
    assert_int_equal(topk_reference_row(row, 8, 3, got, &scratch), 3);
    assert_memory_equal(got, want, 3 * sizeof(int32_t));
    topk_scratch_free(&scratch);
}

static void test_nan_and_infinity_placement(void **state)
{
    (void)state;
    const uint32_t bits[] = {
        0x3F800000u, /* 0: 1.0 */
        0xFFC00000u, /* 1: -NaN */
        0x7F800000u, /* 2: +inf */
        0xFF800000u, /* 3: -inf, not a candidate */
        0x7FC00000u, /* 4: +NaN */
        0x7FFFFFFFu, /* 5: +NaN, largest payload: ranks first */
        0xFF800001u, /* 6: -NaN, smallest payload: the highest -NaN */
        0xFF7FFFFFu, /* 7: -FLT_MAX */
        0x7F800001u, /* 8: +NaN, smallest payload */
        0xFFFFFFFFu, /* 9: -NaN, largest payload: ranks last */
    };
    float row[10];
    for (int i = 0; i < 10; i++)
        row[i] = float_from_bits(bits[i]);
    const int32_t want[10] = { 5, 4, 8, 2, 0, 7, 6, 1, 9, -1 };
    int32_t got[10];
    struct topk_scratch scratch = { 0 };
    assert_int_equal(topk_reference_row(row, 10, 10, got, &scratch), 9);
    assert_memory_equal(got, want, sizeof(want));
    for (uint32_t k = 1; k <= 12; k++)
        check_row(row, 10, k, &scratch, "NaN and infinity placement");
    topk_scratch_free(&scratch);
}

static void test_all_neg_inf_and_empty_rows(void **state)
{
    (void)state;
    float row[3000];
    int32_t got[3001];
    for (int i = 0; i < 3000; i++)
        row[i] = -INFINITY;
    struct topk_scratch scratch = { 0 };
    for (uint32_t k = 1; k <= 3001; k += 1000) {
        assert_int_equal(topk_reference_row(row, 3000, k, got, &scratch), 0);
        for (uint32_t j = 0; j < k; j++)
            assert_int_equal(got[j], -1);
    }
    /* Length 0: nothing selected, all padding; k = 0: nothing written. */
    assert_int_equal(topk_reference_row(row, 0, 4, got, &scratch), 0);
    for (int j = 0; j < 4; j++)
        assert_int_equal(got[j], -1);
    got[0] = 1234;
    assert_int_equal(topk_reference_row(row, 10, 0, got, &scratch), 0);
    assert_int_equal(got[0], 1234);
    assert_int_equal(topk_reference_row(row, -1, 4, got, &scratch), AUDIT_EDATA);
    /* One finite value among -inf: it is the only output. */
    row[1234] = -1e30f;
    assert_int_equal(topk_reference_row(row, 3000, 5, got, &scratch), 1);
    assert_int_equal(got[0], 1234);
    assert_int_equal(got[1], -1);
    topk_scratch_free(&scratch);
}

static void test_negative_nan_threshold_with_neg_inf(void **state)
{
    (void)state;
    /* -NaN keys sit in the histogram bins at and below -inf's: the threshold bin is there and
     * the -inf entries must neither be taken as winners nor as boundary ties. */
    enum { LENGTH = 20000 };
    float *row = malloc(LENGTH * sizeof(*row));
    assert_non_null(row);
    rng_state = test_seed ^ 0x3333;
    struct topk_scratch scratch = { 0 };
    for (int variant = 0; variant < 4; variant++) {
        for (int i = 0; i < LENGTH; i++) {
            uint32_t pick = random_below(4);
            uint32_t bits = pick == 0 ? 0xFF800000u
                          : pick == 1 ? 0xFFFFFFFFu - random_below(16) /* bin 0 */
                          : pick == 2 ? 0xFF800001u + random_below(4)  /* bin 3, below -inf */
                                      : 0xFF800000u + 1 + random_below(0x7FFFFE);
            row[i] = float_from_bits(variant == 3 && i % 1000 == 0 ? 0x3F800000u : bits);
        }
        for (uint32_t k = 1; k < LENGTH; k = k * 3 + variant)
            check_row(row, LENGTH, k, &scratch, "-NaN threshold with -inf");
    }
    topk_scratch_free(&scratch);
    free(row);
}

static void test_subnormals(void **state)
{
    (void)state;
    const uint32_t bits[] = {
        0x00000001u, 0x80000001u, 0x00000000u, 0x007FFFFFu, 0x00800000u,
        0x807FFFFFu, 0x80000000u, 0x00000001u, 0x00400000u,
    };
    float row[9];
    for (int i = 0; i < 9; i++)
        row[i] = float_from_bits(bits[i]);
    /* FLT_MIN, largest subnormal, 2^-127, smallest (index 0 before 7), +0, -0, -smallest,
     * -largest. */
    const int32_t want[9] = { 4, 3, 8, 0, 7, 2, 6, 1, 5 };
    int32_t got[9];
    struct topk_scratch scratch = { 0 };
    assert_int_equal(topk_reference_row(row, 9, 9, got, &scratch), 9);
    assert_memory_equal(got, want, sizeof(want));
    topk_scratch_free(&scratch);
}

static void test_k_edges(void **state)
{
    (void)state;
    rng_state = test_seed ^ 0x4444;
    enum { LENGTH = 30000 };
    float *row = malloc(LENGTH * sizeof(*row));
    assert_non_null(row);
    struct topk_scratch scratch = { 0 };
    /* Argmax with ties: the smallest index of the maximum. */
    for (int i = 0; i < LENGTH; i++)
        row[i] = (float)random_below(50);
    int32_t got[2];
    assert_int_equal(topk_reference_row(row, LENGTH, 1, got, &scratch), 1);
    int32_t first_max = 0;
    while (row[first_max] != 49.0f)
        first_max++;
    assert_int_equal(got[0], first_max);
    /* k = length, k = length + 1, k = candidates exactly, and a constant row. */
    check_row(row, LENGTH, LENGTH, &scratch, "k = length");
    check_row(row, LENGTH, LENGTH + 1, &scratch, "k = length + 1");
    for (int i = 0; i < LENGTH; i += 3)
        row[i] = -INFINITY;
    check_row(row, LENGTH, LENGTH - (LENGTH + 2) / 3, &scratch, "k = candidates");
    check_row(row, LENGTH, LENGTH - (LENGTH + 2) / 3 + 1, &scratch, "k = candidates + 1");
    check_row(row, LENGTH, LENGTH - (LENGTH + 2) / 3 - 1, &scratch, "k = candidates - 1");
    for (int i = 0; i < LENGTH; i++)
        row[i] = 7.0f;
    int32_t *all = malloc(LENGTH * sizeof(*all));
    assert_non_null(all);
    assert_int_equal(topk_reference_row(row, LENGTH, 2048, all, &scratch), 2048);
    for (int j = 0; j < 2048; j++)
        assert_int_equal(all[j], j);
    free(all);
    topk_scratch_free(&scratch);
    free(row);
}

/* ---- the record wrapper ---- */

static void build_record(struct capture_record *record, uint32_t rows, uint64_t stride, uint32_t k)
{
    memset(record, 0, sizeof(*record));
    record->rows = rows;
    record->k = k;
    record->row_stride = stride;
    record->scores = malloc(rows * stride * sizeof(float));
    record->lengths = calloc(rows, sizeof(int32_t));
    assert_non_null(record->scores);
    assert_non_null(record->lengths);
    for (uint64_t i = 0; i < rows * stride; i++)
        record->scores[i] = float_from_bits(special_bits[random_below(SPECIAL_COUNT)]) +
                            (float)random_below(4);
}

static void free_record(struct capture_record *record)
{
    free(record->scores);
    free(record->lengths);
    free(record->row_starts);
    free(record->page_table);
    free(record->page_table_row_starts);
}

/* The expected output of a record, built row by row from the oracle and the page-table formula
 * of docs/FORMAT.md. */
static void expected_record(const struct capture_record *record, uint32_t k, int32_t *want,
                            int32_t *want_raw)
{
    for (uint32_t b = 0; b < record->rows; b++) {
        int32_t start = record->row_starts ? record->row_starts[b] : 0;
        const float *window = record->scores + b * record->row_stride + start;
        oracle_row(window, record->lengths[b], k, want_raw + b * k);
        for (uint32_t j = 0; j < k; j++) {
            int32_t idx = want_raw[b * k + j];
            if (idx < 0 || record->page_size == 0) {
                want[b * k + j] = idx;
                continue;
            }
            int32_t table_start = record->page_table_row_starts ? record->page_table_row_starts[b] : 0;
            int32_t page = record->page_table[b * record->page_table_cols + table_start +
                                              (uint32_t)idx / record->page_size];
            want[b * k + j] = page * (int32_t)record->page_size + idx % (int32_t)record->page_size;
        }
    }
}

static void check_record(const struct capture_record *record, uint32_t k_override)
{
    uint32_t k = k_override ? k_override : record->k;
    size_t entries = (size_t)record->rows * k;
    int32_t *want = malloc(entries * sizeof(*want)), *want_raw = malloc(entries * sizeof(*want));
    int32_t *got = malloc(entries * sizeof(*got)), *got_raw = malloc(entries * sizeof(*got));
    assert_non_null(want);
    assert_non_null(want_raw);
    assert_non_null(got);
    assert_non_null(got_raw);
    expected_record(record, k, want, want_raw);
    struct audit_error err = { 0 };
    assert_int_equal(topk_reference_record(record, k_override, got, got_raw, &err), AUDIT_OK);
    assert_memory_equal(got, want, entries * sizeof(*got));
    assert_memory_equal(got_raw, want_raw, entries * sizeof(*got));
    /* Without raw_out the translated output is the same. */
    memset(got, 0x5A, entries * sizeof(*got));
    assert_int_equal(topk_reference_record(record, k_override, got, NULL, &err), AUDIT_OK);
    assert_memory_equal(got, want, entries * sizeof(*got));
    free(got_raw);
    free(got);
    free(want_raw);
    free(want);
}

static void test_record_offsets_and_stride(void **state)
{
    (void)state;
    rng_state = test_seed ^ 0x5555;
    struct capture_record record;
    build_record(&record, 5, 1000, 64);
    record.row_starts = malloc(5 * sizeof(int32_t));
    assert_non_null(record.row_starts);
    const int32_t starts[5] = { 0, 17, 900, 0, 333 };
    const int32_t lengths[5] = { 1000, 983, 100, 0, 40 };
    memcpy(record.row_starts, starts, sizeof(starts));
    memcpy(record.lengths, lengths, sizeof(lengths));
    check_record(&record, 0);
    check_record(&record, 1);
    check_record(&record, 700);
    /* Padded stride, no row_starts: the padding after each window must be ignored. */
    free(record.row_starts);
    record.row_starts = NULL;
    for (int b = 0; b < 5; b++)
        record.lengths[b] = 500 + b;
    for (int b = 0; b < 5; b++)
        for (int i = 500 + b; i < 1000; i++)
            record.scores[b * 1000 + i] = INFINITY; /* would win if read */
    check_record(&record, 0);
    free_record(&record);
}

static void test_record_page_tables(void **state)
{
    (void)state;
    rng_state = test_seed ^ 0x6666;
    static const uint32_t page_sizes[] = { 1, 64 };
    for (int p = 0; p < 2; p++) {
        uint32_t page_size = page_sizes[p];
        struct capture_record record;
        build_record(&record, 4, 2000, 100);
        const int32_t lengths[4] = { 2000, 1500, 0, 37 };
        memcpy(record.lengths, lengths, sizeof(lengths));
        record.page_size = page_size;
        record.page_table_cols = 2000 / page_size + 8;
        record.page_table = malloc(4 * record.page_table_cols * sizeof(int32_t));
        record.page_table_row_starts = malloc(4 * sizeof(int32_t));
        assert_non_null(record.page_table);
        assert_non_null(record.page_table_row_starts);
        for (uint64_t i = 0; i < 4 * record.page_table_cols; i++)
            record.page_table[i] = (int32_t)random_below(100000 / page_size);
        const int32_t table_starts[4] = { 0, 5, 0, 8 };
        memcpy(record.page_table_row_starts, table_starts, sizeof(table_starts));
        check_record(&record, 0);
        check_record(&record, 2100);
        /* Without page_table_row_starts every row starts at column 0. */
        free(record.page_table_row_starts);
        record.page_table_row_starts = NULL;
        check_record(&record, 0);
        free_record(&record);
    }
}

static void test_record_errors_name_the_row(void **state)
{
    (void)state;
    rng_state = test_seed ^ 0x7777;
    struct capture_record record;
    build_record(&record, 3, 100, 10);
    record.index = 7;
    const int32_t lengths[3] = { 100, -5, 10 };
    memcpy(record.lengths, lengths, sizeof(lengths));
    int32_t out[30];
    struct audit_error err = { 0 };
    assert_int_equal(topk_reference_record(&record, 0, out, NULL, &err), AUDIT_EDATA);
    assert_non_null(strstr(err.message, "record 7 row 1"));

    record.lengths[1] = 10;
    record.row_starts = calloc(3, sizeof(int32_t));
    assert_non_null(record.row_starts);
    record.row_starts[2] = 95; /* window [95, 105) passes the stride */
    assert_int_equal(topk_reference_record(&record, 0, out, NULL, &err), AUDIT_EDATA);
    assert_non_null(strstr(err.message, "record 7 row 2"));
    record.row_starts[2] = 0;

    /* A page table too short for the selected indices. */
    record.page_size = 64;
    record.page_table_cols = 1;
    record.page_table = calloc(3, sizeof(int32_t));
    assert_non_null(record.page_table);
    record.scores[99] = float_from_bits(0x7FFFFFFFu); /* ranks first: index 99 is on page 1 */
    assert_int_equal(topk_reference_record(&record, 0, out, NULL, &err), AUDIT_EDATA);
    assert_non_null(strstr(err.message, "record 7 row 0"));
    assert_non_null(strstr(err.message, "page-table column 1"));
    free_record(&record);
}

/* The record's rows shared out to several threads (DSATOPK_HOST_THREADS) give the same output,
 * and the error reported is the lowest failing row's whichever thread met which row first. */
static void test_record_threads(void **state)
{
    static const char *const settings[] = { "1", "2", "3", "8" };
    for (size_t i = 0; i < sizeof(settings) / sizeof(settings[0]); i++) {
        setenv("DSATOPK_HOST_THREADS", settings[i], 1);
        test_record_offsets_and_stride(state);
        test_record_page_tables(state);
        test_record_errors_name_the_row(state);

        rng_state = test_seed ^ 0x8888;
        struct capture_record record;
        build_record(&record, 40, 300, 20);
        record.index = 3;
        record.lengths[17] = -1;
        record.lengths[5] = -2;
        record.lengths[33] = -3;
        int32_t *out = malloc(40 * 20 * sizeof(int32_t));
        assert_non_null(out);
        struct audit_error err = { 0 };
        assert_int_equal(topk_reference_record(&record, 0, out, NULL, &err), AUDIT_EDATA);
        assert_non_null(strstr(err.message, "record 3 row 5: negative length -2"));
        free(out);
        free_record(&record);
    }
    unsetenv("DSATOPK_HOST_THREADS");
}

static int setup_seed(void **state)
{
    (void)state;
    const char *text = getenv("DSATOPK_TEST_SEED");
    test_seed = text ? strtoull(text, NULL, 0) : (uint64_t)time(NULL);
    printf("[ SEED     ] DSATOPK_TEST_SEED=%" PRIu64 "\n", test_seed);
    return 0;
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_order_key_is_total_order),
        cmocka_unit_test(test_random_rows_match_oracle),
        cmocka_unit_test(test_ties_straddling_k),
        cmocka_unit_test(test_signed_zero_plateau),
        cmocka_unit_test(test_nan_and_infinity_placement),
        cmocka_unit_test(test_all_neg_inf_and_empty_rows),
        cmocka_unit_test(test_negative_nan_threshold_with_neg_inf),
        cmocka_unit_test(test_subnormals),
        cmocka_unit_test(test_k_edges),
        cmocka_unit_test(test_record_offsets_and_stride),
        cmocka_unit_test(test_record_page_tables),
        cmocka_unit_test(test_record_errors_name_the_row),
        cmocka_unit_test(test_record_threads),
    };
    return cmocka_run_group_tests_name("reference", tests, setup_seed, NULL);
}
