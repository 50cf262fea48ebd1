/* The census on hand-built rows with known answers, the coarse (fp16 top byte) bin against the
 * compiler's own float -> _Float16 conversion, random rows against a brute-force census, and
 * the record JSON.
 *
 * Random rows come from a printed seed; replay with DSATOPK_TEST_SEED=<seed> ./test_census */
#include <inttypes.h>
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <cmocka.h>
#include <cjson/cJSON.h>

#include "capture.h"
#include "census.h"
#include "error.h"
#include "reference.h"
#include "test_util.h"

static uint64_t test_seed;

static struct census_row census_of(const float *row, int32_t length, uint32_t k)
{
    struct census_row census;
    memset(&census, 0xA5, sizeof(census));
    assert_int_equal(census_row_compute(row, length, k, &census), AUDIT_OK);
    return census;
}

/* ---- coarse bins ---- */

static void test_coarse_bin_known_values(void **state)
{
    (void)state;
    assert_int_equal(census_coarse_bin(1.0f), 0xBC);            /* half 0x3C00 */
    assert_int_equal(census_coarse_bin(-1.0f), 0x43);           /* ~0xBC00 = 0x43FF */
    assert_int_equal(census_coarse_bin(0.0f), 0x80);
    assert_int_equal(census_coarse_bin(-0.0f), 0x7F);
    assert_int_equal(census_coarse_bin(65504.0f), 0xFB);        /* largest half, 0x7BFF */
    assert_int_equal(census_coarse_bin(float_from_bits(0x477FEFFFu)), 0xFB); /* just under 65520 */
    assert_int_equal(census_coarse_bin(65520.0f), 0xFC);        /* the tie rounds to +inf */
    assert_int_equal(census_coarse_bin(-65520.0f), 0x03);       /* -inf: ~0xFC00 = 0x03FF */
    assert_int_equal(census_coarse_bin(-65504.0f), 0x04);
    assert_int_equal(census_coarse_bin(INFINITY), 0xFC);
    assert_int_equal(census_coarse_bin(-INFINITY), 0x03);
    assert_int_equal(census_coarse_bin(1e30f), 0xFC);
    /* Halfway between halves 0x3CFF and 0x3D00: ties to the even 0x3D00, the next byte. */
    assert_int_equal(census_coarse_bin(1.24951171875f), 0xBD);
    assert_int_equal(census_coarse_bin(nextafterf(1.24951171875f, 0.0f)), 0xBC);
    assert_int_equal(census_coarse_bin(-1.24951171875f), 0x42); /* ~0xBD00 = 0x42FF */
    /* Subnormal halves: 255.5 and 1023.5 units of 2^-24 tie to the even 256 and 1024. */
    assert_int_equal(census_coarse_bin(255.5f * 0x1p-24f), 0x81);
    assert_int_equal(census_coarse_bin(nextafterf(255.5f * 0x1p-24f, 0.0f)), 0x80);
    assert_int_equal(census_coarse_bin(1023.5f * 0x1p-24f), 0x84); /* into the normal 2^-14 */
    assert_int_equal(census_coarse_bin(nextafterf(1023.5f * 0x1p-24f, 0.0f)), 0x83);
    /* 2^-25 is halfway between 0 and the smallest subnormal half: it goes to the even zero,
     * keeping its sign; anything above it is the smallest subnormal. */
    assert_int_equal(census_coarse_bin(0x1p-25f), 0x80);
    assert_int_equal(census_coarse_bin(-0x1p-25f), 0x7F);
    assert_int_equal(census_coarse_bin(nextafterf(-0x1p-25f, -1.0f)), 0x7F); /* -0x0001 */
    assert_int_equal(census_coarse_bin(float_from_bits(0x00000001u)), 0x80);
    /* Every NaN becomes the half NaN 0x7FFF (cvt.rn.f16.f32), whatever its sign. */
    assert_int_equal(census_coarse_bin(float_from_bits(0x7FC00000u)), 0xFF);
    assert_int_equal(census_coarse_bin(float_from_bits(0x7F800001u)), 0xFF);
    assert_int_equal(census_coarse_bin(float_from_bits(0xFFC00000u)), 0xFF);
    assert_int_equal(census_coarse_bin(float_from_bits(0xFFFFFFFFu)), 0xFF);
}

#ifdef __FLT16_MAX__
static uint8_t coarse_bin_via_float16(float value)
{
    _Float16 half = (_Float16)value; /* the compiler's round-to-nearest-even conversion */
    uint16_t bits;
    memcpy(&bits, &half, sizeof(bits));
    uint16_t key = (bits & 0x8000u) ? (uint16_t)~bits : (uint16_t)(bits | 0x8000u);
    return (uint8_t)(key >> 8);
}
#endif

static void test_coarse_bin_matches_float16(void **state)
{
    (void)state;
#ifdef __FLT16_MAX__
    uint64_t checked = 0;
    /* A stride over every bit pattern, then a denser one over the magnitudes where halves
     * change (2^-26 .. 2^17), both signs. NaNs are checked in the test above. */
    for (uint64_t bits = 0; bits <= 0xFFFFFFFFu; bits += 257) {
        float value = float_from_bits((uint32_t)bits);
        if (isnan(value))
            continue;
        if (census_coarse_bin(value) != coarse_bin_via_float16(value))
            fail_msg("coarse bin of bits 0x%08" PRIx64 ": %u, _Float16 says %u", bits,
                     census_coarse_bin(value), coarse_bin_via_float16(value));
        checked++;
    }
    for (uint32_t bits = 0x32800000u; bits < 0x48000000u; bits += 13) {
        for (uint32_t sign = 0; sign < 2; sign++) {
            float value = float_from_bits(bits | (sign << 31));
            if (census_coarse_bin(value) != coarse_bin_via_float16(value))
                fail_msg("coarse bin of bits 0x%08x: %u, _Float16 says %u", bits | (sign << 31),
                         census_coarse_bin(value), coarse_bin_via_float16(value));
            checked++;
        }
    }
    /* Every halfway point between consecutive finite halves, and its two neighbours: the
     * ties-to-even cases, subnormal halves included. */
    for (uint32_t half_bits = 0; half_bits < 0x7BFFu; half_bits++) {
        _Float16 low, high;
        uint16_t low_bits = (uint16_t)half_bits, high_bits = (uint16_t)(half_bits + 1);
        memcpy(&low, &low_bits, sizeof(low));
        memcpy(&high, &high_bits, sizeof(high));
        float halfway = (float)(((double)low + (double)high) / 2);
        const float probes[3] = { nextafterf(halfway, 0.0f), halfway, nextafterf(halfway, 1e9f) };
        for (int p = 0; p < 6; p++) {
            float value = p < 3 ? probes[p] : -probes[p - 3];
            if (census_coarse_bin(value) != coarse_bin_via_float16(value))
                fail_msg("coarse bin of %a: %u, _Float16 says %u", (double)value,
                         census_coarse_bin(value), coarse_bin_via_float16(value));
            checked++;
        }
    }
    printf("[ INFO     ] %" PRIu64 " floats: coarse bins agree with _Float16\n", checked);
#else
    skip();
#endif
}

/* ---- hand-built rows ---- */

static void test_ties_above_and_gaps(void **state)
{
    (void)state;
    const float row[] = { 3.0f, 5.0f, 3.0f, 1.0f, 3.0f, 4.0f, 2.0f, 3.0f };
    struct census_row c;

    c = census_of(row, 8, 4); /* ranking 5 4 3 3 | 3 3 2 1 */
    assert_false(c.short_row);
    assert_true(c.boundary == 3.0f && c.next_below == 3.0f);
    assert_int_equal(c.tie_set, 4);
    assert_int_equal(c.above, 2);
    assert_true(c.underdetermined);
    assert_true(c.boundary_gap == 0.0);
    assert_int_equal(c.coarse_bin_count, 4); /* 3.0 alone in bin 0xC2 */

    c = census_of(row, 8, 2); /* 5 4 | 3 */
    assert_true(c.boundary == 4.0f);
    assert_int_equal(c.tie_set, 1);
    assert_int_equal(c.above, 1);
    assert_false(c.underdetermined);
    assert_true(c.boundary_gap == 1.0);

    c = census_of(row, 8, 6); /* 5 4 3 3 3 3 | 2: the whole tie set fits, determined */
    assert_true(c.boundary == 3.0f);
    assert_int_equal(c.tie_set, 4);
    assert_int_equal(c.above, 2);
    assert_false(c.underdetermined);
    assert_true(c.boundary_gap == 1.0);

    c = census_of(row, 8, 7); /* ... 2 | 1 */
    assert_true(c.boundary == 2.0f && c.next_below == 1.0f);
    assert_int_equal(c.above, 6);
    assert_int_equal(c.tie_set, 1);

    c = census_of(row, 8, 8); /* every candidate selected: no boundary */
    assert_true(c.short_row);
    assert_int_equal(c.above, 8);
    assert_int_equal(c.candidates, 8);
    assert_int_equal(census_row_compute(row, 8, 0, &c), AUDIT_EUSAGE);
    assert_int_equal(census_row_compute(row, -1, 1, &c), AUDIT_EDATA);
}

static void test_zero_plateau_and_counts(void **state)
{
    (void)state;
    float row[20];
    for (int i = 0; i < 20; i++)
        row[i] = (i % 3 == 0) ? -0.0f : 0.0f; /* 7 x -0.0 (0,3,..,18), 13 x +0.0 */
    row[5] = 2.0f;                            /* replaces a +0.0 */
    row[11] = 1.0f;                           /* replaces a +0.0 */
    row[13] = -INFINITY;                      /* replaces a +0.0 */
    row[14] = float_from_bits(0x00000003u);   /* subnormal, replaces a +0.0 */
    row[16] = float_from_bits(0x80000010u);   /* negative subnormal, replaces a +0.0 */
    row[17] = float_from_bits(0xFFC00000u);   /* -NaN, replaces a +0.0 */
    struct census_row c = census_of(row, 20, 4);
    assert_int_equal(c.length, 20);
    assert_int_equal(c.neg_inf, 1);
    assert_int_equal(c.candidates, 19);
    assert_int_equal(c.nan, 1);
    assert_int_equal(c.subnormal, 2);
    assert_int_equal(c.zeros, 14); /* 7 x -0.0 + 7 x +0.0 */
    /* 2, 1, subnormal, then the +0.0 plateau of 7 entries; -0.0 are a different tie set. */
    assert_true(bits_of(c.boundary) == 0x00000000u);
    assert_true(c.zero_boundary);
    assert_int_equal(c.above, 3);
    assert_int_equal(c.tie_set, 7);
    assert_true(c.underdetermined);
    assert_true(c.boundary_gap == 0.0);
    /* Coarse bin 0x80 holds +0.0 and the positive subnormal (it rounds to the half +0). */
    assert_int_equal(c.coarse_bin_count, 8);

    c = census_of(row, 20, 10); /* past the +0.0 plateau: 2 1 sub 7x+0 | -0.0 */
    assert_true(bits_of(c.boundary) == 0x00000000u);
    assert_true(bits_of(c.next_below) == 0x80000000u);
    assert_false(c.underdetermined);
    /* +0.0 minus -0.0 is numerically 0 although the two do not tie. */
    assert_true(c.boundary_gap == 0.0);

    c = census_of(row, 20, 11); /* the -0.0 plateau (7 entries) straddles */
    assert_true(bits_of(c.boundary) == 0x80000000u);
    assert_true(c.zero_boundary);
    assert_int_equal(c.tie_set, 7);
    assert_int_equal(c.above, 10);
    assert_true(c.underdetermined);
    /* Coarse bin 0x7F: -0.0 and the negative subnormal. */
    assert_int_equal(c.coarse_bin_count, 8);

    c = census_of(row, 20, 18); /* ... 7x-0, neg subnormal | -NaN */
    assert_true(bits_of(c.boundary) == 0x80000010u);
    assert_true(bits_of(c.next_below) == 0xFFC00000u);
    assert_false(c.zero_boundary);
    assert_true(isnan(c.boundary_gap));

    c = census_of(row, 20, 19); /* 19 candidates: -inf is none */
    assert_true(c.short_row);
}

static void test_short_rows(void **state)
{
    (void)state;
    const float row[] = { 1.0f, -INFINITY, -INFINITY, 2.0f, -INFINITY };
    struct census_row c = census_of(row, 5, 2); /* length 5 > k, but 2 candidates */
    assert_true(c.short_row);
    assert_int_equal(c.candidates, 2);
    assert_int_equal(c.above, 2);
    assert_false(c.underdetermined);
    c = census_of(row, 5, 1);
    assert_false(c.short_row);
    assert_true(c.boundary == 2.0f && c.next_below == 1.0f);
    c = census_of(row, 0, 3);
    assert_true(c.short_row);
    assert_int_equal(c.candidates, 0);
    assert_int_equal(c.length, 0);
}

static void test_nan_boundary(void **state)
{
    (void)state;
    const float row[] = {
        float_from_bits(0x7FC00000u), 1.0f, float_from_bits(0x7FC00001u),
        float_from_bits(0xFFC00000u), INFINITY,
    };
    struct census_row c = census_of(row, 5, 1);
    assert_true(bits_of(c.boundary) == 0x7FC00001u); /* the larger payload ranks first */
    assert_int_equal(c.tie_set, 1);
    assert_int_equal(c.nan, 3);
    /* Every NaN, -NaN included, lands in coarse bin 0xFF. */
    assert_int_equal(c.coarse_bin_count, 3);
    assert_true(isnan(c.boundary_gap));
    c = census_of(row, 5, 2); /* +NaN | +inf */
    assert_true(isnan(c.boundary_gap));
    c = census_of(row, 5, 3); /* +inf | 1.0 */
    assert_true(c.boundary == INFINITY);
    assert_true(isinf(c.boundary_gap));
    assert_int_equal(c.coarse_bin_count, 1);
}

static void test_staging_overflow(void **state)
{
    (void)state;
    enum { LENGTH = 40000 };
    float *row = malloc(LENGTH * sizeof(*row));
    assert_non_null(row);
    /* Distinct values in [1, 1 + 5000 * 2^-23): all round to halves 0x3C00..0x3C01, bin 0xBC;
     * the rest in [2, 3), bin 0xC0 or 0xC1. */
    for (int i = 0; i < LENGTH; i++)
        row[i] = i < 5000 ? 1.0f + (float)i * 0x1p-23f : 2.0f + (float)(i - 5000) * 0x1p-17f;
    struct census_row c = census_of(row, LENGTH, LENGTH - 100); /* boundary near 1.0 */
    assert_int_equal(c.coarse_bin_count, 5000);
    assert_true(c.radix_overflow);
    assert_false(c.filtered_overflow);
    assert_int_equal(c.tie_set, 1);
    assert_false(c.underdetermined);
    assert_true(c.boundary_gap == 0x1p-23);
    /* The value at the rounding edge: 1.24951171875 and above belong to bin 0xBD. */
    for (int i = 0; i < LENGTH; i++)
        row[i] = i < 20000 ? 1.24951171875f : i < 20010 ? nextafterf(1.24951171875f, 0.0f) : 0.5f;
    c = census_of(row, LENGTH, 5);
    assert_true(c.boundary == 1.24951171875f);
    assert_int_equal(c.tie_set, 20000);
    assert_int_equal(c.coarse_bin_count, 20000);
    assert_true(c.radix_overflow);
    assert_true(c.filtered_overflow);
    c = census_of(row, LENGTH, 20005);
    assert_int_equal(c.coarse_bin_count, 10);
    assert_false(c.radix_overflow);
    /* Values that round to half -inf share -inf's bin, but -inf itself is no candidate. */
    for (int i = 0; i < LENGTH; i++)
        row[i] = i % 2 ? -INFINITY : -70000.0f - (float)i;
    c = census_of(row, LENGTH, 3);
    assert_int_equal(census_coarse_bin(c.boundary), 0x03);
    assert_int_equal(c.candidates, LENGTH / 2);
    assert_int_equal(c.coarse_bin_count, LENGTH / 2);
    assert_true(c.radix_overflow);
    assert_true(c.filtered_overflow);
    free(row);
}

/* ---- random rows against a brute-force census ---- */

static int rank_compare(const void *pa, const void *pb)
{
    uint32_t a = topk_order_key(*(const float *)pa), b = topk_order_key(*(const float *)pb);
    return (a < b) - (a > b);
}

static void brute_force_census(const float *row, int32_t length, uint32_t k, struct census_row *c)
{
    float *sorted = malloc(((size_t)length + 1) * sizeof(*sorted));
    assert_non_null(sorted);
    memset(c, 0, sizeof(*c));
    c->length = length;
    int64_t candidates = 0;
    for (int32_t i = 0; i < length; i++) {
        uint32_t bits = bits_of(row[i]);
        c->zeros += row[i] == 0.0f;
        c->nan += isnan(row[i]) != 0;
        c->subnormal += fpclassify(row[i]) == FP_SUBNORMAL;
        if (bits == 0xFF800000u) {
            c->neg_inf++;
            continue;
        }
        sorted[candidates++] = row[i];
    }
    c->candidates = candidates;
    qsort(sorted, (size_t)candidates, sizeof(*sorted), rank_compare);
    c->short_row = candidates <= (int64_t)k;
    if (c->short_row) {
        c->above = candidates;
        free(sorted);
        return;
    }
    c->boundary = sorted[k - 1];
    c->next_below = sorted[k];
    uint32_t boundary_key = topk_order_key(c->boundary);
    uint8_t bin = census_coarse_bin(c->boundary);
    for (int64_t i = 0; i < candidates; i++) {
        uint32_t key = topk_order_key(sorted[i]);
        c->tie_set += key == boundary_key;
        c->above += key > boundary_key;
        c->coarse_bin_count += census_coarse_bin(sorted[i]) == bin;
    }
    c->underdetermined = c->tie_set > 1 && c->above + c->tie_set > (int64_t)k;
    c->zero_boundary = c->boundary == 0.0f;
    if (bits_of(c->boundary) != bits_of(c->next_below))
        c->boundary_gap = (double)c->boundary - (double)c->next_below;
    c->radix_overflow = c->coarse_bin_count > 4096;
    c->filtered_overflow = c->coarse_bin_count > 16384;
    free(sorted);
}

static void test_random_rows_match_brute_force(void **state)
{
    (void)state;
    rng_state = test_seed;
    float *row = malloc(30000 * sizeof(*row));
    assert_non_null(row);
    static const uint32_t alphabet[] = {
        0x00000000u, 0x80000000u, 0x3F800000u, 0x3F800001u, 0x7F800000u, 0xFF800000u,
        0x7FC00000u, 0xFFC00000u, 0x00000001u, 0x80000001u, 0x477FF000u, 0xC77FF000u,
    };
    const int row_count = 1500;
    for (int r = 0; r < row_count; r++) {
        int32_t length = random_below(8) == 0 ? (int32_t)(5000 + random_below(25000))
                                               : (int32_t)random_below(2000);
        uint32_t family = random_below(4);
        for (int32_t i = 0; i < length; i++) {
            switch (family) {
            case 0: row[i] = float_from_bits((uint32_t)next_random()); break;
            case 1: row[i] = float_from_bits(alphabet[random_below(12)]); break;
            case 2: row[i] = random_below(3) ? 0.0f : (float)random_below(50) * 0.125f; break;
            default: row[i] = 1.0f + (float)random_below(3000) * 0x1p-20f; break;
            }
        }
        uint32_t k = 1 + random_below((uint32_t)length + 2);
        struct census_row want, got;
        brute_force_census(row, length, k, &want);
        got = census_of(row, length, k);
        bool same = got.length == want.length && got.candidates == want.candidates &&
                    got.zeros == want.zeros && got.neg_inf == want.neg_inf &&
                    got.nan == want.nan && got.subnormal == want.subnormal &&
                    got.short_row == want.short_row && got.above == want.above;
        if (same && !want.short_row)
            same = bits_of(got.boundary) == bits_of(want.boundary) &&
                   bits_of(got.next_below) == bits_of(want.next_below) &&
                   got.tie_set == want.tie_set && got.underdetermined == want.underdetermined &&
                   got.zero_boundary == want.zero_boundary &&
                   got.coarse_bin_count == want.coarse_bin_count &&
                   got.radix_overflow == want.radix_overflow &&
                   got.filtered_overflow == want.filtered_overflow &&
                   (got.boundary_gap == want.boundary_gap ||
                    (isnan(got.boundary_gap) && isnan(want.boundary_gap)));
        if (!same)
            fail_msg("census mismatch: seed %" PRIu64 " row %d family %u length %d k %u: "
                     "boundary 0x%08x/0x%08x tie %" PRId64 "/%" PRId64 " above %" PRId64
                     "/%" PRId64 " coarse %" PRId64 "/%" PRId64 " (got/want)",
                     test_seed, r, family, length, k, bits_of(got.boundary),
                     bits_of(want.boundary), got.tie_set, want.tie_set, got.above, want.above,
                     got.coarse_bin_count, want.coarse_bin_count);
    }
    printf("[ INFO     ] %d random rows matched the brute-force census (seed %" PRIu64 ")\n",
           row_count, test_seed);
    free(row);
}

/* ---- record JSON ---- */

static cJSON *find_k(cJSON *record_json, uint32_t k)
{
    cJSON *entry;
    cJSON_ArrayForEach(entry, cJSON_GetObjectItem(record_json, "census"))
        if (cJSON_GetObjectItem(entry, "k")->valuedouble == k)
            return entry;
    return NULL;
}

static double number_at(cJSON *object, const char *path_a, const char *path_b)
{
    cJSON *item = cJSON_GetObjectItem(object, path_a);
    if (path_b)
        item = cJSON_GetObjectItem(item, path_b);
    assert_non_null(item);
    assert_true(cJSON_IsNumber(item));
    return item->valuedouble;
}

static void test_record_json(void **state)
{
    (void)state;
    /* Three rows of stride 8 with row offsets, own k = 3:
     * row 0: 4 3 3 3 2 1 0 0    -> k=3: boundary 3, tie 3, above 1, underdetermined
     * row 1: window of 2 (short at k=3), 0.0 and NaN
     * row 2: 0 0 0 0 5 (offset 3) -> k=3: boundary 0.0, tie 4, zero boundary */
    float scores[24] = {
        4, 3, 3, 3, 2, 1, 0, 0,
        0, 0, 0, 0, 0, 0, 0, 0,
        9, 9, 9, 0, 0, 0, 0, 5,
    };
    scores[9] = float_from_bits(0x7FC00000u);
    int32_t lengths[3] = { 8, 2, 5 };
    int32_t starts[3] = { 0, 8 - 8, 3 };
    struct capture_record record = {
        .rows = 3, .k = 3, .row_stride = 8, .scores = scores, .lengths = lengths,
        .row_starts = starts, .metadata_json = (char *)"{\"engine\": \"test\"}", .index = 4,
    };
    const uint32_t ks[] = { 0, 1, 3, 0, 1 };
    cJSON *json = NULL;
    struct census_row *rows = NULL;
    struct audit_error err = { 0 };
    assert_int_equal(census_record_json(&record, ks, 5, &json, &rows, &err), AUDIT_OK);
    assert_non_null(json);
    assert_non_null(rows);
    assert_int_equal(cJSON_GetArraySize(cJSON_GetObjectItem(json, "census")), 2); /* 3 and 1 */
    assert_int_equal(number_at(json, "record", NULL), 4);
    assert_string_equal(cJSON_GetObjectItem(cJSON_GetObjectItem(json, "metadata"), "engine")->valuestring,
                        "test");

    /* rows_out: the census of ks[0] (the record's own k, 3). */
    assert_true(rows[0].boundary == 3.0f && rows[0].tie_set == 3 && rows[0].above == 1);
    assert_true(rows[1].short_row);
    assert_true(rows[2].zero_boundary && rows[2].tie_set == 4 && rows[2].underdetermined);

    cJSON *k3 = find_k(json, 3);
    assert_non_null(k3);
    assert_true(cJSON_IsTrue(cJSON_GetObjectItem(k3, "record_k")));
    assert_int_equal(number_at(k3, "rows", NULL), 3);
    assert_int_equal(number_at(k3, "rows_with_boundary", NULL), 2);
    assert_int_equal(number_at(k3, "short_rows", NULL), 1);
    assert_int_equal(number_at(k3, "window_entries", NULL), 15);
    assert_int_equal(number_at(k3, "zeros", NULL), 2 + 1 + 4);
    assert_true(fabs(number_at(k3, "zero_fraction", NULL) - 7.0 / 15.0) < 1e-12);
    assert_int_equal(number_at(k3, "nan", NULL), 1);
    assert_int_equal(number_at(k3, "tie_set", "median"), 4); /* sorted {3, 4} */
    assert_int_equal(number_at(k3, "tie_set", "max"), 4);
    assert_int_equal(number_at(k3, "underdetermined_rows", NULL), 2);
    assert_int_equal(number_at(k3, "zero_boundary_rows", NULL), 1);
    assert_true(number_at(k3, "gap", "min") == 0.0);
    cJSON *per_row = cJSON_GetObjectItem(k3, "per_row");
    assert_int_equal(cJSON_GetArraySize(per_row), 3);
    cJSON *row0 = cJSON_GetArrayItem(per_row, 0);
    assert_string_equal(cJSON_GetObjectItem(row0, "boundary_bits")->valuestring, "0x40400000");
    assert_int_equal(number_at(row0, "coarse_bin", NULL), 0xC2);
    assert_true(cJSON_IsNull(cJSON_GetObjectItem(cJSON_GetArrayItem(per_row, 1), "boundary")));

    cJSON *k1 = find_k(json, 1);
    assert_non_null(k1);
    assert_true(cJSON_IsFalse(cJSON_GetObjectItem(k1, "record_k")));
    /* k=1: row 0 boundary 4 (gap 1), row 1 boundary NaN (gap NaN -> null), row 2 boundary 5
     * (gap 5). Gaps sorted with NaN last: {1, 5, NaN}. */
    assert_int_equal(number_at(k1, "rows_with_boundary", NULL), 3);
    assert_true(number_at(k1, "gap", "min") == 1.0);
    assert_true(number_at(k1, "gap", "median") == 5.0);
    assert_true(cJSON_IsNull(cJSON_GetObjectItem(cJSON_GetObjectItem(k1, "gap"), "p90")));

    /* JSON has no NaN or Infinity tokens. */
    char *text = cJSON_PrintUnformatted(json);
    assert_non_null(text);
    static const char *const forbidden[] = { ":nan", ":-nan", ":inf", ":-inf", "NaN", "Infinity" };
    for (size_t i = 0; i < sizeof(forbidden) / sizeof(forbidden[0]); i++)
        assert_null(strstr(text, forbidden[i]));
    cJSON_free(text);
    cJSON_Delete(json);
    free(rows);

    /* A window outside the stride names the record and row. */
    starts[2] = 4;
    assert_int_equal(census_record_json(&record, ks, 1, &json, NULL, &err), AUDIT_EDATA);
    assert_null(json);
    assert_non_null(strstr(err.message, "record 4 row 2"));
    assert_int_equal(census_record_json(&record, ks, 0, &json, NULL, &err), AUDIT_EUSAGE);
}

/* Rows shared out to several threads (DSATOPK_HOST_THREADS) give the same census JSON and rows
 * as one thread: a record of 37 rows with plateaus, NaNs and short rows, three ks. */
static void test_record_json_threads(void **state)
{
    (void)state;
    enum { ROWS = 37, STRIDE = 500 };
    float *scores = malloc(ROWS * STRIDE * sizeof(float));
    int32_t lengths[ROWS];
    assert_non_null(scores);
    for (uint32_t b = 0; b < ROWS; b++) {
        lengths[b] = (int32_t)((b * 53u) % STRIDE);
        for (uint32_t i = 0; i < STRIDE; i++) {
            const uint32_t mix = (b * 2654435761u) ^ (i * 40503u);
            scores[b * STRIDE + i] = (mix % 7u == 0) ? 0.0f : (float)((int)(mix % 1000u) - 600);
        }
        scores[b * STRIDE + (b % STRIDE)] = float_from_bits(0x7FC00000u);
    }
    struct capture_record record = {
        .rows = ROWS, .k = 20, .row_stride = STRIDE, .scores = scores, .lengths = lengths,
        .index = 2,
    };
    const uint32_t ks[] = { 0, 1, 300 };
    char *texts[4] = { NULL };
    struct census_row *rows[4] = { NULL };
    static const char *const settings[] = { "1", "2", "5", "16" };
    for (int t = 0; t < 4; t++) {
        setenv("DSATOPK_HOST_THREADS", settings[t], 1);
        cJSON *json = NULL;
        struct audit_error err = { 0 };
        assert_int_equal(census_record_json(&record, ks, 3, &json, &rows[t], &err), AUDIT_OK);
        texts[t] = cJSON_PrintUnformatted(json);
        assert_non_null(texts[t]);
        cJSON_Delete(json);
        if (t > 0) {
            assert_string_equal(texts[t], texts[0]);
            for (uint32_t b = 0; b < ROWS; b++) { /* field by field: the struct has padding */
                const struct census_row *x = &rows[t][b], *y = &rows[0][b];
                assert_true(x->candidates == y->candidates && x->tie_set == y->tie_set &&
                            x->above == y->above && x->short_row == y->short_row &&
                            x->coarse_bin_count == y->coarse_bin_count &&
                            memcmp(&x->boundary, &y->boundary, sizeof(float)) == 0);
            }
        }
    }
    unsetenv("DSATOPK_HOST_THREADS");
    for (int t = 0; t < 4; t++) {
        cJSON_free(texts[t]);
        free(rows[t]);
    }
    free(scores);
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
        cmocka_unit_test(test_coarse_bin_known_values),
        cmocka_unit_test(test_coarse_bin_matches_float16),
        cmocka_unit_test(test_ties_above_and_gaps),
        cmocka_unit_test(test_zero_plateau_and_counts),
        cmocka_unit_test(test_short_rows),
        cmocka_unit_test(test_nan_boundary),
        cmocka_unit_test(test_staging_overflow),
        cmocka_unit_test(test_random_rows_match_brute_force),
        cmocka_unit_test(test_record_json),
        cmocka_unit_test(test_record_json_threads),
    };
    return cmocka_run_group_tests_name("census", tests, setup_seed, NULL);
}
