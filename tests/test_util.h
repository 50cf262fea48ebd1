/* Small helpers shared by the CPU tests and benchmarks: float bit casts and a seeded splitmix64
 * stream (identical everywhere, enough for test inputs). Each file that includes this gets its
 * own rng_state. */
#ifndef DSATOPK_TEST_UTIL_H
#define DSATOPK_TEST_UTIL_H

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static uint64_t rng_state __attribute__((unused));

static inline uint64_t next_random(void)
{
    uint64_t z = (rng_state += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

static inline uint32_t random_below(uint32_t bound)
{
    return bound ? (uint32_t)(next_random() % bound) : 0;
}

static inline float float_from_bits(uint32_t bits)
{
    float value;
    memcpy(&value, &bits, sizeof(value));
    return value;
}

static inline uint32_t bits_of(float value)
{
    uint32_t bits;
    memcpy(&bits, &value, sizeof(bits));
    return bits;
}

/* Creates $TMPDIR/NAME.XXXXXX (/tmp without TMPDIR) and leaves its path in directory; 0 or -1. */
static inline int make_temporary_directory(char *directory, size_t size, const char *name)
{
    snprintf(directory, size, "%s/%s.XXXXXX", getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp", name);
    return mkdtemp(directory) ? 0 : -1;
}

#endif
