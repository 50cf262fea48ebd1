/* Unit tests of src/common/index_sort.c: the radix sort must give exactly what qsort with an int32
 * comparison gives (the set hashes of `run` were defined with qsort), whatever the values:
 * negative entries and -1 padding, the extremes, duplicates, bytes shared by every value (the
 * passes the sort skips), and every small count. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "index_sort.h"

/* splitmix64: the same values on every machine. */
static uint64_t next_value(uint64_t *state)
{
    uint64_t z = (*state += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

static int compare_int32(const void *a, const void *b)
{
    int32_t x = *(const int32_t *)a, y = *(const int32_t *)b;
    return (x > y) - (x < y);
}

/* Sorts values both ways and compares. */
static void assert_sorts_like_qsort(const int32_t *values, uint32_t count)
{
    int32_t *radix = malloc((count ? count : 1) * sizeof(int32_t));
    int32_t *expected = malloc((count ? count : 1) * sizeof(int32_t));
    int32_t *scratch = malloc((count ? count : 1) * sizeof(int32_t));
    assert_non_null(radix);
    assert_non_null(expected);
    assert_non_null(scratch);
    memcpy(radix, values, count * sizeof(int32_t));
    memcpy(expected, values, count * sizeof(int32_t));
    qsort(expected, count, sizeof(int32_t), compare_int32);
    index_sort_ascending(radix, count, scratch);
    assert_memory_equal(radix, expected, count * sizeof(int32_t));
    free(scratch);
    free(expected);
    free(radix);
}

static void test_fixed_cases(void **state)
{
    (void)state;
    static const int32_t extremes[] = { INT32_MAX, 0, -1, INT32_MIN, 1, -2, INT32_MAX,
                                        (int32_t)0xA5A5A5A5, 256, 255, 65536, -1 };
    assert_sorts_like_qsort(extremes, sizeof(extremes) / sizeof(extremes[0]));
    static const int32_t padded_row[] = { 17, 3, 99, 4, -1, -1, -1 };
    assert_sorts_like_qsort(padded_row, 7);
    static const int32_t all_equal[] = { 5, 5, 5, 5 };
    assert_sorts_like_qsort(all_equal, 4);
    static const int32_t one[] = { 42 };
    assert_sorts_like_qsort(one, 1);
    assert_sorts_like_qsort(one, 0);
    /* An empty sort touches nothing. */
    index_sort_ascending(NULL, 0, NULL);
}

static void test_random_rows(void **state)
{
    (void)state;
    uint64_t random_state = 7;
    int32_t *values = malloc(5000 * sizeof(int32_t));
    assert_non_null(values);
    /* Value ranges: window indices (high bytes shared), small with many duplicates, a top-k row
     * with -1 padding, any int32. */
    for (int trial = 0; trial < 400; trial++) {
        const uint32_t count = trial < 40 ? (uint32_t)trial
                                          : (uint32_t)(next_value(&random_state) % 5000);
        for (uint32_t i = 0; i < count; i++) {
            const uint64_t random = next_value(&random_state);
            switch (trial % 4) {
            case 0: values[i] = (int32_t)(random % 131072); break;
            case 1: values[i] = (int32_t)(random % 16); break;
            case 2: values[i] = i > count / 2 ? -1 : (int32_t)(random % 200000); break;
            default: values[i] = (int32_t)(uint32_t)random; break;
            }
        }
        assert_sorts_like_qsort(values, count);
    }
    free(values);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_fixed_cases),
        cmocka_unit_test(test_random_rows),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
