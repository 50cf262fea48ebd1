/* checkasm-style test of every GPU top-k backend against the CPU reference (issue 3 "Tests").
 *
 * In the spirit of dav1d's tests/checkasm: every backend in topk_backend_table runs on inputs
 * built here from one printed seed, and its output is held to exactly what its table entry
 * claims, judged by the same contract checks the `run` command uses (src/verdict/checks.h):
 * - gpu_to_gpu backends (bitonic, sort): bytes equal to the CPU reference;
 * - exact_set backends: the reference's score multiset on every row, plus their tie and order
 *   claims (filtered-det: smallest-index ties, index ascending);
 * - run_to_run or better: two launches give the same bytes, and a launch captured in a CUDA
 *   graph and replayed gives the eager bytes;
 * - everything else (radix): no duplicate, out-of-range, padding or page violation anywhere;
 *   -1 entries and wrong sets only on rows the census predicts to overflow the radix staging.
 * FlashInfer's own kernels (fi-*) are held to their claims on every family but neginf and nan,
 * which are outside their domain (outside_domain()).
 * Outputs, raw outputs and scratch are poisoned (0xA5 bytes) before every launch, and every
 * score outside a window is a +NaN that outranks everything, so a kernel that skips a slot or
 * reads past its window is caught. A negative control checks that the audit can see anything
 * at all: radix on a 0.0 plateau under a busy sibling stream must give several distinct sets.
 *
 * Usage: test_gpu_backends [--seed N] [--backend NAME] [--family NAME] [--k N] [--quick]
 *                          [--longest N] [--plan PLAN]
 *                          [--verbose] [--inject-fault]
 * --plan forces bitonic's plan (kernels/include/bitonic_plan.h: auto, tree, cluster,
 * cluster16/32/64/128, tree_deep, one_cta) where it applies, as its launch API takes it: the
 * suite then holds that path to the same claims. --backend bitonic@PLAN is the same as
 * --backend bitonic --plan PLAN.
 * --inject-fault checks the harness itself: it corrupts one entry of every first output (an
 * index just past its row's window) before judging, so every case with a selected entry must
 * FAIL; a run in that mode that passes such a case means the harness cannot see faults.
 * Exit: 0 all passed, 1 any failure, 2 usage, 77 no CUDA device (skipped). */
#include <getopt.h>
#include <inttypes.h>
#include <math.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <cuda_runtime_api.h>

#include "capture.h"
#include "census.h"
#include "checks.h"
#include "bitonic_plan.h"
#include "cuda_check.h"
#include "gpu_device.h"
#include "hash.h"
#include "noise.h"
#include "reference.h"
#include "topk_backends.h"

#define EXIT_SKIPPED 77
#define POISON_SCORE_BITS 0x7FC0DEADu /* +NaN with a payload: outranks every real score */
#define POISON_OUTPUT_BYTE 0xA5       /* 0xA5A5A5A5 is a negative int32 other than -1 */
#define MAX_REPORTED_ROWS 4
#define MAX_BACKENDS 16
#define MAX_ROWS_PER_CASE 300

static const uint32_t full_ks[] = { 1, 100, 512, 1000, 2048, 4096 };
static const uint32_t quick_ks[] = { 1, 100, 2048 };

/* ---- a small seeded generator (xoshiro256**, seeded through splitmix64) ------------------ */

struct rng {
    uint64_t state[4];
};

static uint64_t splitmix64(uint64_t *x)
{
    uint64_t z = (*x += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

static void rng_seed(struct rng *rng, uint64_t seed)
{
    for (int i = 0; i < 4; i++)
        rng->state[i] = splitmix64(&seed);
}

static uint64_t rotl64(uint64_t x, int k)
{
    return (x << k) | (x >> (64 - k));
}

static uint64_t rng_next(struct rng *rng)
{
    uint64_t *s = rng->state;
    uint64_t result = rotl64(s[1] * 5, 7) * 9;
    uint64_t t = s[1] << 17;
    s[2] ^= s[0];
    s[3] ^= s[1];
    s[1] ^= s[2];
    s[0] ^= s[3];
    s[2] ^= t;
    s[3] = rotl64(s[3], 45);
    return result;
}

static double rng_uniform(struct rng *rng)
{
    return (double)(rng_next(rng) >> 11) * 0x1.0p-53;
}

static uint32_t rng_below(struct rng *rng, uint32_t bound)
{
    return bound ? (uint32_t)((rng_next(rng) >> 32) % bound) : 0;
}

static double rng_normal(struct rng *rng)
{
    double u = rng_uniform(rng), v = rng_uniform(rng);
    return sqrt(-2.0 * log(1.0 - u)) * cos(6.283185307179586 * v);
}

static float float_from_bits(uint32_t bits)
{
    float value;
    memcpy(&value, &bits, sizeof(value));
    return value;
}

/* ---- input families ---------------------------------------------------------------------- */

enum family_id {
    FAMILY_RANDOM,
    FAMILY_PLATEAU,
    FAMILY_TIE,
    FAMILY_RELU,
    FAMILY_NARROW,
    FAMILY_NEG_INF,
    FAMILY_SIGNED_ZERO,
    FAMILY_NAN,
    FAMILY_SUBNORMAL,
    FAMILY_ALL_EQUAL,
    FAMILY_SHORT,
    FAMILY_ROW_STARTS,
    FAMILY_PADDED,
    FAMILY_PAGED_1,
    FAMILY_PAGED_64,
    FAMILY_STRIDED,
    FAMILY_DENSE,
    FAMILY_DENSE_LONG,
    FAMILY_DENSE_MANY,
    FAMILY_DENSE_TIE,
    FAMILY_DENSE_ZERO,
    FAMILY_EMPTY,
    FAMILY_EMPTY_PAGED,
    FAMILY_EMPTY_STRIDED,
    FAMILY_COUNT
};

static const char *const family_names[FAMILY_COUNT] = {
    [FAMILY_RANDOM] = "random",         /* N(0,1) */
    [FAMILY_PLATEAU] = "plateau",       /* k/2 distinct positives, the rest +0.0 */
    [FAMILY_TIE] = "tie",               /* T exact ties straddling the k-th boundary */
    [FAMILY_RELU] = "relu",             /* relu(N(0,1) - 1.28) * 11.3 */
    [FAMILY_NARROW] = "narrow",         /* 1 + N(0,1) * 1e-7 in fp32: few distinct values */
    [FAMILY_NEG_INF] = "neginf",        /* -inf, ties of two -NaN, an all -inf row */
    [FAMILY_SIGNED_ZERO] = "signedzero",/* +0.0 / -0.0 mixed plateaus */
    [FAMILY_NAN] = "nan",               /* NaN of both signs with payloads */
    [FAMILY_SUBNORMAL] = "subnormal",   /* subnormals of both signs and zeros */
    [FAMILY_ALL_EQUAL] = "allequal",    /* constant rows */
    [FAMILY_SHORT] = "short",           /* every row shorter than k, length 0 included */
    [FAMILY_ROW_STARTS] = "rowstarts",  /* windows at offsets inside a wider stride */
    [FAMILY_PADDED] = "padded",         /* stride wider than every window, pad = poison */
    [FAMILY_PAGED_1] = "paged1",        /* page table, page_size 1 */
    [FAMILY_PAGED_64] = "paged64",      /* page table, page_size 64 */
    /* Positional structure (a sink or a local window makes one in real rows): every 4th element
     * 8 above (even rows) or below (odd rows) the rest, so that the top k sit in one lane of
     * every 16-byte load, or in none of it. */
    [FAMILY_STRIDED] = "strided",       /* N(0,1), +-8 at every 4th element */
    /* Every row of one length, the stride: the layout of FlashInfer's TopKDispatch. */
    [FAMILY_DENSE] = "dense",           /* 16 x 8192 N(0,1) */
    [FAMILY_DENSE_LONG] = "denselong",  /* 4 x 131072 N(0,1) (--quick: 4 x 65536) */
    /* More rows than one wave of the device: bitonic's auto then cuts rows for several waves. */
    [FAMILY_DENSE_MANY] = "densemany",  /* 300 x 32768 N(0,1) (--quick: 300 x 8192) */
    [FAMILY_DENSE_TIE] = "densetie",    /* 16 x 8192, ties straddling the boundary */
    [FAMILY_DENSE_ZERO] = "densezero",  /* 16 x 8192, +0.0 / -0.0 plateaus */
    [FAMILY_EMPTY] = "empty",           /* row_stride 0, every row of length 0: all -1 */
    [FAMILY_EMPTY_PAGED] = "emptypaged",/* the same with a page table of no column */
    /* Every row empty in a row_stride of 8 poison scores, a page table of no column (NULL):
     * the empty rows of backends that refuse row_stride 0 (fi-*). */
    [FAMILY_EMPTY_STRIDED] = "emptystrided",
};

/* Every row of no element: the output is all -1. */
static bool family_empty(enum family_id family)
{
    return family == FAMILY_EMPTY || family == FAMILY_EMPTY_PAGED ||
           family == FAMILY_EMPTY_STRIDED;
}

/* A page table: of one or more columns, or of none (emptypaged, emptystrided). */
static bool family_paged(enum family_id family)
{
    return family == FAMILY_PAGED_1 || family == FAMILY_PAGED_64 ||
           family == FAMILY_EMPTY_PAGED || family == FAMILY_EMPTY_STRIDED;
}

static int family_parse(const char *name)
{
    for (int f = 0; f < FAMILY_COUNT; f++)
        if (strcmp(family_names[f], name) == 0)
            return f;
    return -1;
}

static int compare_int32(const void *a, const void *b)
{
    int32_t x = *(const int32_t *)a, y = *(const int32_t *)b;
    return (x > y) - (x < y);
}

/* The row lengths of one case: a spread from 0 to 262144 around k (--quick stops at 32768;
 * --longest N stops below N and adds N: the longest row sets how a backend cuts the shape, e.g.
 * how many CTAs bitonic's cluster takes per row). */
static uint32_t family_row_lengths(enum family_id family, uint32_t k, bool quick,
                                   uint32_t longest, int32_t lengths[MAX_ROWS_PER_CASE])
{
    int64_t wanted[MAX_ROWS_PER_CASE];
    uint32_t count = 0;
    if (family_empty(family)) {
        for (uint32_t b = 0; b < 5; b++)
            lengths[b] = 0;
        return 5;
    }
    if (family >= FAMILY_DENSE && family <= FAMILY_DENSE_ZERO) {
        const bool long_rows = family == FAMILY_DENSE_LONG, many = family == FAMILY_DENSE_MANY;
        const uint32_t rows = long_rows ? 4 : many ? MAX_ROWS_PER_CASE : 16;
        for (uint32_t b = 0; b < rows; b++)
            lengths[b] = long_rows ? (quick ? 65536 : 131072) : many && !quick ? 32768 : 8192;
        return rows;
    }
    if (family == FAMILY_SHORT) {
        const int64_t shorts[] = { 0, 1, 7, k / 2, (int64_t)k - 1 };
        for (size_t i = 0; i < sizeof(shorts) / sizeof(shorts[0]); i++)
            if (shorts[i] < (int64_t)k)
                wanted[count++] = shorts[i];
    } else {
        const int64_t spread[] = { 0, 1, 7, (int64_t)k - 1, k, (int64_t)k + 1, 4095, 8192,
                                   32768, 131072, 262144 };
        for (size_t i = 0; i < sizeof(spread) / sizeof(spread[0]); i++)
            if ((!quick || spread[i] <= 32768) && (!longest || spread[i] < (int64_t)longest))
                wanted[count++] = spread[i];
        if (longest)
            wanted[count++] = longest;
    }
    uint32_t unique = 0;
    for (uint32_t i = 0; i < count; i++) {
        if (wanted[i] < 0)
            continue;
        bool repeated = false;
        for (uint32_t j = 0; j < unique; j++)
            repeated |= lengths[j] == (int32_t)wanted[i];
        if (!repeated)
            lengths[unique++] = (int32_t)wanted[i];
    }
    qsort(lengths, unique, sizeof(int32_t), compare_int32);
    if (family == FAMILY_NEG_INF)
        lengths[unique++] = 8192; /* the all -inf row (last) */
    return unique;
}

/* Fills one window of the given family. last_row lets the -inf family make its all -inf row. */
static void family_fill_row(enum family_id family, struct rng *rng, float *window, int32_t length,
                            uint32_t k, uint32_t plateau_distinct, uint32_t row, bool last_row)
{
    const float neg_inf = -INFINITY;
    switch (family) {
    case FAMILY_PLATEAU: {
        for (int32_t i = 0; i < length; i++)
            window[i] = 0.0f;
        uint32_t m = plateau_distinct != UINT32_MAX ? plateau_distinct : k / 2;
        if (m > (uint32_t)length)
            m = (uint32_t)length;
        for (uint32_t placed = 0; placed < m;) {
            uint32_t position = rng_below(rng, (uint32_t)length);
            if (window[position] != 0.0f)
                continue;
            window[position] = 1.0f + (float)placed * 0.015625f; /* distinct positives */
            placed++;
        }
        break;
    }
    case FAMILY_TIE:
    case FAMILY_DENSE_TIE: {
        /* `above` distinct values above the tie value 1.0, T ties, the rest below: the k-th
         * boundary sits inside the tie set, which straddles it. */
        int64_t ties = k < 512 ? (int64_t)k + 1 : 512;
        if (ties < 2)
            ties = 2;
        int64_t above = (int64_t)k - ties / 2;
        if (above > length)
            above = length;
        if (ties > length - above)
            ties = length - above;
        for (int32_t i = 0; i < length; i++) {
            if (i < above)
                window[i] = 2.0f + (float)i * 0.0009765625f;
            else if (i < above + ties)
                window[i] = 1.0f;
            else
                window[i] = (float)(rng_uniform(rng) * 1.9 - 1.0);
        }
        for (int32_t i = length - 1; i > 0; i--) { /* scatter them over the row */
            uint32_t j = rng_below(rng, (uint32_t)i + 1);
            float swap = window[i];
            window[i] = window[j];
            window[j] = swap;
        }
        break;
    }
    case FAMILY_RELU:
    case FAMILY_ROW_STARTS:
    case FAMILY_PAGED_1:
    case FAMILY_PAGED_64:
        for (int32_t i = 0; i < length; i++) {
            double x = rng_normal(rng) - 1.28;
            window[i] = (float)((x > 0.0 ? x : 0.0) * 11.3);
        }
        break;
    case FAMILY_NARROW:
        for (int32_t i = 0; i < length; i++)
            window[i] = 1.0f + (float)rng_normal(rng) * 1e-7f;
        break;
    case FAMILY_NEG_INF:
        /* -NaN ranks below -inf, which is never selected: where k falls among the -NaN
         * (k 2048 at 4095, k 4096 at 8192), the tie key is one of them, below the -inf. */
        for (int32_t i = 0; i < length; i++) {
            double u = last_row ? 0.0 : rng_uniform(rng);
            window[i] = u < 0.4    ? neg_inf
                        : u < 0.55 ? float_from_bits(0xFF800001u)
                        : u < 0.7  ? float_from_bits(0xFF800002u)
                                   : (float)rng_normal(rng);
        }
        break;
    case FAMILY_SIGNED_ZERO:
    case FAMILY_DENSE_ZERO:
        for (int32_t i = 0; i < length; i++) {
            double u = rng_uniform(rng);
            window[i] = u < 0.35 ? 0.0f
                        : u < 0.7 ? -0.0f
                        : u < 0.85 ? (float)rng_uniform(rng) + 1e-3f
                                   : -(float)rng_uniform(rng) - 1e-3f;
        }
        break;
    case FAMILY_NAN:
        for (int32_t i = 0; i < length; i++) {
            double u = rng_uniform(rng);
            uint32_t payload = 1 + rng_below(rng, 0x7FFFFFu); /* quiet and signalling */
            window[i] = u < 0.03 ? float_from_bits(0x7F800000u | payload)
                        : u < 0.06 ? float_from_bits(0xFF800000u | payload)
                                   : (float)rng_normal(rng);
        }
        break;
    case FAMILY_SUBNORMAL:
        for (int32_t i = 0; i < length; i++) {
            uint32_t sign = rng_below(rng, 2) ? 0x80000000u : 0u;
            uint32_t mantissa = rng_uniform(rng) < 0.1 ? 0u : 1 + rng_below(rng, 0x7FFFFFu);
            window[i] = float_from_bits(sign | mantissa);
        }
        break;
    case FAMILY_STRIDED:
        for (int32_t i = 0; i < length; i++)
            window[i] = (float)rng_normal(rng) + (i % 4 ? 0.0f : row % 2 ? -8.0f : 8.0f);
        break;
    case FAMILY_ALL_EQUAL:
        for (int32_t i = 0; i < length; i++)
            window[i] = last_row ? 0.0f : 1.5f;
        break;
    case FAMILY_RANDOM:
    case FAMILY_DENSE:
    case FAMILY_DENSE_LONG:
    case FAMILY_DENSE_MANY:
    case FAMILY_SHORT:
    case FAMILY_PADDED:
    case FAMILY_EMPTY:
    case FAMILY_EMPTY_PAGED:
    case FAMILY_EMPTY_STRIDED:
    case FAMILY_COUNT:
        for (int32_t i = 0; i < length; i++)
            window[i] = (float)rng_normal(rng);
        break;
    }
}

static void record_release(struct capture_record *record)
{
    free(record->scores);
    free(record->lengths);
    free(record->row_starts);
    free(record->page_table);
    free(record->page_table_row_starts);
    free(record->metadata_json);
    memset(record, 0, sizeof(*record));
}

/* Builds one record of a family in host memory; every score outside a window is poison. empty
 * and emptypaged keep row_stride 0: no score at all, so the device gets NULL scores (and a NULL
 * page table of no column), as cudaMalloc of 0 bytes gives; emptystrided has scores (poison)
 * and the NULL page table. */
static int build_record(enum family_id family, uint32_t k, const int32_t *lengths, uint32_t rows,
                        uint32_t plateau_distinct, uint64_t seed, struct capture_record *record,
                        struct audit_error *err)
{
    struct rng rng;
    int32_t max_length = 0;
    int status = 0;

    rng_seed(&rng, seed);
    memset(record, 0, sizeof(*record));
    for (uint32_t b = 0; b < rows; b++)
        if (lengths[b] > max_length)
            max_length = lengths[b];
    uint32_t max_offset = family == FAMILY_ROW_STARTS ? 1000 : 0;
    const bool empty = family_empty(family);
    uint64_t stride = (uint64_t)max_length + max_offset + (family == FAMILY_PADDED ? 61 : 0) +
                      (family == FAMILY_EMPTY_STRIDED ? 8 : 0);
    if (stride == 0 && !empty)
        stride = 1;

    record->rows = rows;
    record->k = k;
    record->row_stride = stride;
    record->scores = malloc(rows * stride * sizeof(float) + sizeof(float));
    record->lengths = malloc(rows * sizeof(int32_t));
    record->metadata_json = strdup("{\"source\":\"test_gpu_backends\"}");
    if (family == FAMILY_ROW_STARTS)
        record->row_starts = malloc(rows * sizeof(int32_t));
    if (!record->scores || !record->lengths || !record->metadata_json ||
        (family == FAMILY_ROW_STARTS && !record->row_starts)) {
        status = audit_fail(err, AUDIT_ENOMEM, "%s: out of memory for %u x %" PRIu64 " scores",
                            family_names[family], rows, stride);
        goto error;
    }
    float poison = float_from_bits(POISON_SCORE_BITS);
    for (uint64_t i = 0; i < rows * stride; i++)
        record->scores[i] = poison;
    memcpy(record->lengths, lengths, rows * sizeof(int32_t));
    for (uint32_t b = 0; b < rows; b++) {
        if (record->row_starts)
            record->row_starts[b] = (int32_t)rng_below(&rng, max_offset + 1);
        float *window = record->scores + b * stride + capture_row_start(record, b);
        family_fill_row(family, &rng, window, lengths[b], k, plateau_distinct, b, b + 1 == rows);
    }

    if (family_paged(family)) {
        uint32_t page_size = family == FAMILY_PAGED_1 ? 1 : 64;
        uint64_t cols = empty ? 0 : 1;
        record->page_table_row_starts = malloc(rows * sizeof(int32_t));
        if (!record->page_table_row_starts) {
            status = audit_fail(err, AUDIT_ENOMEM, "%s: out of memory", family_names[family]);
            goto error;
        }
        for (uint32_t b = 0; b < rows; b++) {
            record->page_table_row_starts[b] = empty ? 0 : (int32_t)rng_below(&rng, 4);
            uint64_t needed = (uint64_t)record->page_table_row_starts[b] +
                              ((uint64_t)lengths[b] + page_size - 1) / page_size;
            if (needed > cols)
                cols = needed;
        }
        record->page_size = page_size;
        record->page_table_cols = cols;
        record->page_table = malloc(rows * cols * sizeof(int32_t) + sizeof(int32_t));
        if (!record->page_table) {
            status = audit_fail(err, AUDIT_ENOMEM, "%s: out of memory for the page table",
                                family_names[family]);
            goto error;
        }
        /* Pages scattered over a 2^24-slot cache: translated indices fit int32. */
        for (uint64_t i = 0; i < rows * cols; i++)
            record->page_table[i] = (int32_t)rng_below(&rng, (1u << 24) / page_size);
    }
    return 0;

error:
    record_release(record);
    return status;
}

/* ---- device side ------------------------------------------------------------------------- */

#define HARNESS_CUDA(call, err, status, label) CUDA_CHECK_GOTO(call, err, status, label)

/* One record uploaded to the device, with caller-owned outputs and scratch. */
struct device_case {
    float *scores;
    int32_t *lengths, *row_starts, *page_table, *page_table_row_starts;
    int32_t *out, *raw_out;
    void *scratch;
    size_t scratch_capacity;
    size_t output_bytes;
};

static void device_case_free(struct device_case *device_case)
{
    cudaFree(device_case->scores);
    cudaFree(device_case->lengths);
    cudaFree(device_case->row_starts);
    cudaFree(device_case->page_table);
    cudaFree(device_case->page_table_row_starts);
    cudaFree(device_case->out);
    cudaFree(device_case->raw_out);
    cudaFree(device_case->scratch);
    memset(device_case, 0, sizeof(*device_case));
}

/* An array of no element stays NULL, as cudaMalloc of 0 bytes leaves it: backends must take
 * that (topk_backends.h). */
static int device_upload(void **device, const void *host, size_t bytes, struct audit_error *err)
{
    int status = 0;
    *device = NULL;
    if (bytes)
        HARNESS_CUDA(cudaMalloc(device, bytes), err, status, done);
    if (bytes)
        status = gpu_upload(*device, host, bytes, err);
done:
    return status;
}

static int device_case_upload(struct device_case *device_case, const struct capture_record *record,
                              uint32_t k, struct audit_error *err)
{
    int status;
    size_t rows = record->rows;
    memset(device_case, 0, sizeof(*device_case));
    device_case->output_bytes = rows * k * sizeof(int32_t);
    status = device_upload((void **)&device_case->scores, record->scores,
                           rows * record->row_stride * sizeof(float), err);
    if (status == 0)
        status = device_upload((void **)&device_case->lengths, record->lengths,
                               rows * sizeof(int32_t), err);
    if (status == 0 && record->row_starts)
        status = device_upload((void **)&device_case->row_starts, record->row_starts,
                               rows * sizeof(int32_t), err);
    if (status == 0 && record->page_table)
        status = device_upload((void **)&device_case->page_table, record->page_table,
                               rows * record->page_table_cols * sizeof(int32_t), err);
    if (status == 0 && record->page_table_row_starts)
        status = device_upload((void **)&device_case->page_table_row_starts,
                               record->page_table_row_starts, rows * sizeof(int32_t), err);
    if (status == 0) {
        HARNESS_CUDA(cudaMalloc((void **)&device_case->out, device_case->output_bytes + 4), err,
                     status, done);
        HARNESS_CUDA(cudaMalloc((void **)&device_case->raw_out, device_case->output_bytes + 4),
                     err, status, done);
    }
done:
    if (status < 0)
        device_case_free(device_case);
    return status;
}

static struct topk_shape record_shape(const struct capture_record *record, uint32_t k)
{
    struct topk_shape shape = {
        .rows = record->rows,
        .k = k,
        .row_stride = record->row_stride,
        .has_row_starts = record->row_starts != NULL,
        .has_page_table = record->page_size != 0,
        .page_size = record->page_size,
    };
    for (uint32_t b = 0; b < record->rows; b++) {
        if (record->lengths[b] > shape.max_length)
            shape.max_length = record->lengths[b];
        if (b == 0 || record->lengths[b] < shape.min_length)
            shape.min_length = record->lengths[b];
    }
    return shape;
}

static int prepare_problem(const struct topk_backend *backend, const struct gpu_device_info *device,
                           const struct capture_record *record, uint32_t k,
                           struct device_case *device_case, struct topk_problem *problem,
                           struct audit_error *err)
{
    int status = 0;
    memset(problem, 0, sizeof(*problem));
    problem->shape = record_shape(record, k);
    size_t scratch_bytes = backend->scratch_bytes(device, &problem->shape);
    if (scratch_bytes > device_case->scratch_capacity) {
        cudaFree(device_case->scratch);
        device_case->scratch = NULL;
        device_case->scratch_capacity = 0;
        HARNESS_CUDA(cudaMalloc(&device_case->scratch, scratch_bytes), err, status, done);
        device_case->scratch_capacity = scratch_bytes;
    }
    problem->scores = device_case->scores;
    problem->lengths = device_case->lengths;
    problem->row_starts = device_case->row_starts;
    problem->page_table = device_case->page_table;
    problem->page_table_cols = record->page_table_cols;
    problem->page_table_row_starts = device_case->page_table_row_starts;
    problem->out = device_case->out;
    /* raw_out is optional without a page table; passing it checks that it matches out. */
    problem->raw_out = device_case->raw_out;
    problem->scratch = scratch_bytes ? device_case->scratch : NULL;
    problem->scratch_bytes = scratch_bytes;
done:
    return status;
}

/* Poisons the outputs and the scratch (a backend must not rely on zeroed scratch). */
static int poison_outputs(const struct topk_problem *problem, size_t output_bytes,
                          cudaStream_t stream, struct audit_error *err)
{
    int status = 0;
    HARNESS_CUDA(cudaMemsetAsync(problem->out, POISON_OUTPUT_BYTE, output_bytes, stream), err,
                 status, done);
    HARNESS_CUDA(cudaMemsetAsync(problem->raw_out, POISON_OUTPUT_BYTE, output_bytes, stream), err,
                 status, done);
    if (problem->scratch_bytes)
        HARNESS_CUDA(cudaMemsetAsync(problem->scratch, POISON_OUTPUT_BYTE, problem->scratch_bytes,
                                     stream), err, status, done);
done:
    return status;
}

static int fetch_outputs(const struct topk_problem *problem, size_t output_bytes,
                         cudaStream_t stream, int32_t *host_out, int32_t *host_raw,
                         struct audit_error *err)
{
    int status = 0;
    HARNESS_CUDA(cudaStreamSynchronize(stream), err, status, done);
    HARNESS_CUDA(cudaGetLastError(), err, status, done);
    HARNESS_CUDA(cudaMemcpy(host_out, problem->out, output_bytes, cudaMemcpyDeviceToHost), err,
                 status, done);
    HARNESS_CUDA(cudaMemcpy(host_raw, problem->raw_out, output_bytes, cudaMemcpyDeviceToHost),
                 err, status, done);
done:
    return status;
}

/* Poison, launch on stream, synchronise, check, copy back. */
static int launch_eager(const struct topk_backend *backend, const struct gpu_device_info *device,
                        const struct topk_problem *problem, size_t output_bytes,
                        cudaStream_t stream, int32_t *host_out, int32_t *host_raw,
                        struct audit_error *err)
{
    int status = poison_outputs(problem, output_bytes, stream, err);
    if (status == 0)
        status = backend->launch(problem, device, stream, err);
    if (status == 0)
        status = fetch_outputs(problem, output_bytes, stream, host_out, host_raw, err);
    return status;
}

/* Captures one launch in a CUDA graph (global capture mode, as serving engines use), then
 * poisons and replays it `replays` times; host_out/host_raw receive the last replay. */
static int launch_graph(const struct topk_backend *backend, const struct gpu_device_info *device,
                        const struct topk_problem *problem, size_t output_bytes,
                        cudaStream_t stream, int replays, int32_t *host_out, int32_t *host_raw,
                        const int32_t *expected_out, bool *all_replays_equal,
                        struct audit_error *err)
{
    cudaGraph_t graph = NULL;
    cudaGraphExec_t graph_exec = NULL;
    int status = 0;

    *all_replays_equal = true;
    HARNESS_CUDA(cudaStreamBeginCapture(stream, cudaStreamCaptureModeGlobal), err, status, done);
    status = backend->launch(problem, device, stream, err);
    cudaError_t end_status = cudaStreamEndCapture(stream, &graph);
    if (status < 0) {
        audit_error_prefix(err, "launch while capturing a CUDA graph");
        goto done;
    }
    HARNESS_CUDA(end_status, err, status, done);
    HARNESS_CUDA(cudaGraphInstantiate(&graph_exec, graph, 0), err, status, done);
    for (int replay = 0; replay < replays; replay++) {
        status = poison_outputs(problem, output_bytes, stream, err);
        if (status < 0)
            goto done;
        HARNESS_CUDA(cudaGraphLaunch(graph_exec, stream), err, status, done);
        status = fetch_outputs(problem, output_bytes, stream, host_out, host_raw, err);
        if (status < 0)
            goto done;
        if (memcmp(host_out, expected_out, output_bytes) != 0)
            *all_replays_equal = false;
    }
done:
    if (graph_exec)
        cudaGraphExecDestroy(graph_exec);
    if (graph)
        cudaGraphDestroy(graph);
    cudaGetLastError(); /* a failed capture leaves a non-sticky error behind */
    return status;
}

/* ---- the harness ------------------------------------------------------------------------- */

struct options {
    uint64_t seed;
    const char *backend;
    int family; /* -1: all */
    uint32_t k; /* 0: all */
    uint32_t longest; /* 0: the default spread of row lengths */
    enum bitonic_choice plan; /* bitonic's plan (BITONIC_CHOICE_AUTO: the table's entry) */
    bool quick, verbose;
    bool inject_fault; /* self-check of the harness: corrupt outputs, expect failures */
};

struct tally {
    unsigned passed, failed, skipped;
};

struct harness {
    struct options options;
    struct gpu_device_info device;
    cudaStream_t stream, sibling;
    struct noise_state *noise;
    struct tally table[MAX_BACKENDS][FAMILY_COUNT];
    unsigned passed, failed, skipped;
    char printed_skips[64][320];
    unsigned printed_skip_count;
    bool device_lost;
    unsigned injected, nothing_to_corrupt, injected_but_passed;
};

/* One record with its reference, contract-check context and (lazily) census. */
struct test_case {
    const char *family_name;
    uint32_t k;
    uint64_t seed;
    struct capture_record record;
    struct check_context context;
    struct census_row *census; /* NULL until a backend without exact_set needs it */
    struct device_case device;
    int32_t *out, *raw, *first_out, *first_raw;
    uint32_t *row_flags;
};

static void test_case_release(struct test_case *test_case)
{
    checks_release(&test_case->context);
    record_release(&test_case->record);
    device_case_free(&test_case->device);
    free(test_case->census);
    free(test_case->out);
    free(test_case->raw);
    free(test_case->first_out);
    free(test_case->first_raw);
    free(test_case->row_flags);
    memset(test_case, 0, sizeof(*test_case));
}

static int test_case_prepare(struct test_case *test_case, struct audit_error *err)
{
    int status = checks_prepare(&test_case->context, &test_case->record, test_case->k, err);
    if (status < 0)
        return status;
    size_t slots = (size_t)test_case->record.rows * test_case->k + 1;
    test_case->out = malloc(slots * sizeof(int32_t));
    test_case->raw = malloc(slots * sizeof(int32_t));
    test_case->first_out = malloc(slots * sizeof(int32_t));
    test_case->first_raw = malloc(slots * sizeof(int32_t));
    test_case->row_flags = calloc(test_case->record.rows + 1, sizeof(uint32_t));
    if (!test_case->out || !test_case->raw || !test_case->first_out || !test_case->first_raw ||
        !test_case->row_flags)
        return audit_fail(err, AUDIT_ENOMEM, "%s k %u: out of memory", test_case->family_name,
                          test_case->k);
    return device_case_upload(&test_case->device, &test_case->record, test_case->k, err);
}

static int test_case_census(struct test_case *test_case, struct audit_error *err)
{
    const struct capture_record *record = &test_case->record;
    if (test_case->census)
        return 0;
    test_case->census = calloc(record->rows + 1, sizeof(struct census_row));
    if (!test_case->census)
        return audit_fail(err, AUDIT_ENOMEM, "%s k %u: out of memory for the census",
                          test_case->family_name, test_case->k);
    for (uint32_t b = 0; b < record->rows; b++) {
        int status = census_row_compute(capture_row_window(record, b), record->lengths[b],
                                        test_case->k, &test_case->census[b]);
        if (status < 0)
            return audit_fail(err, status, "%s k %u row %u: census failed",
                              test_case->family_name, test_case->k, b);
    }
    return 0;
}

static void print_kinds(uint32_t flags)
{
    const char *separator = "";
    for (int kind = 0; kind < CHECK_KIND_COUNT; kind++) {
        if (flags & (1u << kind)) {
            printf("%s%s", separator, check_kind_name((enum check_kind)kind));
            separator = ",";
        }
    }
}

static void print_first_difference(const int32_t *got, const int32_t *expected, uint32_t k,
                                   uint32_t b, const char *what)
{
    for (uint32_t j = 0; j < k; j++) {
        size_t slot = (size_t)b * k + j;
        if (got[slot] != expected[slot]) {
            printf("; %s slot %u: got %d, expected %d", what, j, got[slot], expected[slot]);
            return;
        }
    }
}

/* Holds one output to what the backend claims. Returns the number of failing rows (or a
 * negative code), printing the first few. */
static int judge_output(struct harness *harness, struct test_case *test_case,
                        const struct topk_backend *backend, const char *label,
                        struct audit_error *err)
{
    const struct capture_record *record = &test_case->record;
    const struct check_claims claims = {
        .smallest_index_ties = backend->smallest_index_ties,
        .canonical_order = backend->canonical_order,
        .index_ascending = backend->index_ascending,
    };
    struct check_counts counts;
    bool paged = record->page_size != 0;
    uint32_t k = test_case->k;
    int failing_rows = 0;
    unsigned exempt_rows = 0;

    int status = checks_output(&test_case->context, test_case->out,
                               paged ? test_case->raw : NULL, &claims, &counts,
                               test_case->row_flags, err);
    if (status < 0)
        return status;
    if (!backend->exact_set) {
        status = test_case_census(test_case, err);
        if (status < 0)
            return status;
    }
    /* Tie and order kinds are only ever flagged when claimed, so they are forbidden here. */
    const uint32_t set_kinds = (1u << CHECK_SHORT) | (1u << CHECK_WRONG_SET);
    for (uint32_t b = 0; b < record->rows; b++) {
        uint32_t flags = test_case->row_flags[b];
        uint32_t forbidden = flags & ~set_kinds;
        if (flags & set_kinds) {
            if (backend->exact_set || !test_case->census[b].radix_overflow)
                forbidden |= flags & set_kinds;
            else
                exempt_rows++;
        }
        /* Without a page table the raw output, when given, must equal the output. */
        bool raw_differs = !paged && memcmp(test_case->raw + (size_t)b * k,
                                            test_case->out + (size_t)b * k,
                                            (size_t)k * sizeof(int32_t)) != 0;
        if (!forbidden && !raw_differs)
            continue;
        if (failing_rows++ < MAX_REPORTED_ROWS) {
            printf("    %s row %u (length %d, %" PRId64 " candidates): ", label, b,
                   record->lengths[b], test_case->context.candidates[b]);
            print_kinds(forbidden);
            if (raw_differs) {
                printf("%sraw_out differs from out without a page table", forbidden ? "; " : "");
                print_first_difference(test_case->raw, test_case->out, k, b, "raw_out");
            }
            print_first_difference(paged ? test_case->raw : test_case->out,
                                   test_case->context.reference_raw
                                       ? test_case->context.reference_raw
                                       : test_case->context.reference,
                                   k, b, "reference");
            printf("\n");
        }
    }
    if (failing_rows > MAX_REPORTED_ROWS)
        printf("    %s: %d more failing rows\n", label, failing_rows - MAX_REPORTED_ROWS);
    if (backend->level == TOPK_GPU_TO_GPU && !counts.equals_reference) {
        /* The checks above catch every way of differing; this is the byte-level claim itself. */
        if (failing_rows == 0) {
            printf("    %s: output bytes differ from the reference\n", label);
            for (uint32_t b = 0; b < record->rows; b++) {
                if (memcmp(test_case->out + (size_t)b * k, test_case->context.reference +
                           (size_t)b * k, (size_t)k * sizeof(int32_t)) != 0) {
                    printf("    %s row %u", label, b);
                    print_first_difference(test_case->out, test_case->context.reference, k, b,
                                           "out");
                    printf("\n");
                    break;
                }
            }
        }
        failing_rows += failing_rows == 0;
    }
    if (harness->options.verbose && exempt_rows)
        printf("    %s: %u rows short or wrong where the census predicts radix staging "
               "overflow (allowed)\n", label, exempt_rows);
    return failing_rows;
}

static void note_skip(struct harness *harness, const struct topk_backend *backend,
                      const char *reason)
{
    char line[sizeof(harness->printed_skips[0])];
    snprintf(line, sizeof(line), "%s: %s", backend->name, reason);
    for (unsigned i = 0; i < harness->printed_skip_count; i++)
        if (strcmp(harness->printed_skips[i], line) == 0)
            return;
    printf("skip %s\n", line);
    if (harness->printed_skip_count < sizeof(harness->printed_skips) /
                                          sizeof(harness->printed_skips[0]))
        strcpy(harness->printed_skips[harness->printed_skip_count++], line);
}

/* After a CUDA failure: a sticky error (illegal address, ...) means the context is gone and
 * nothing after it can run. */
static void check_device_alive(struct harness *harness)
{
    cudaError_t status = cudaDeviceSynchronize();
    if (status != cudaSuccess) {
        printf("device context lost (%s: %s): stopping\n", cudaGetErrorName(status),
               cudaGetErrorString(status));
        harness->device_lost = true;
    }
}

/* --inject-fault: the first selected entry of the output becomes the index just past its row's
 * window (the poison score there outranks everything), in out and raw alike. Returns false when
 * the output selects nothing, so there is nothing to corrupt. */
static bool inject_fault(struct test_case *test_case)
{
    uint32_t k = test_case->k;
    for (uint32_t b = 0; b < test_case->record.rows; b++) {
        for (uint32_t j = 0; j < k; j++) {
            size_t slot = (size_t)b * k + j;
            if (test_case->raw[slot] >= 0 || test_case->out[slot] >= 0) {
                test_case->out[slot] = test_case->record.lengths[b];
                test_case->raw[slot] = test_case->record.lengths[b];
                return true;
            }
        }
    }
    return false;
}

/* Runs one backend on one case and holds it to its claims. Returns true when it passed. */
static bool run_backend_case(struct harness *harness, struct test_case *test_case,
                             const struct topk_backend *backend)
{
    struct audit_error err = { 0 };
    struct topk_problem problem;
    char label[160];
    size_t output_bytes = test_case->device.output_bytes;
    bool passed = true;
    int status;

    snprintf(label, sizeof(label), "%s/%s/k=%u", backend->name, test_case->family_name,
             test_case->k);
    if (!backend->launch || !backend->scratch_bytes) {
        printf("FAIL %s: supported, but the table entry has no launch or scratch_bytes\n", label);
        return false;
    }
    status = prepare_problem(backend, &harness->device, &test_case->record, test_case->k,
                             &test_case->device, &problem, &err);
    if (status == 0)
        status = launch_eager(backend, &harness->device, &problem, output_bytes, harness->stream,
                              test_case->out, test_case->raw, &err);
    if (status < 0) {
        printf("FAIL %s: %s\n", label, err.message);
        check_device_alive(harness);
        return false;
    }
    /* Kept before any fault injection: the repeat and graph launches are compared with it. */
    memcpy(test_case->first_out, test_case->out, output_bytes);
    memcpy(test_case->first_raw, test_case->raw, output_bytes);
    bool injected = false;
    if (harness->options.inject_fault) {
        injected = inject_fault(test_case);
        if (injected)
            harness->injected++;
        else
            harness->nothing_to_corrupt++;
    }
    int failing = judge_output(harness, test_case, backend, label, &err);
    if (failing != 0) {
        if (failing < 0)
            printf("    %s: %s\n", label, err.message);
        passed = false;
    }

    if (backend->level >= TOPK_RUN_TO_RUN) {
        status = launch_eager(backend, &harness->device, &problem, output_bytes,
                              harness->stream, test_case->out, test_case->raw, &err);
        if (status < 0) {
            printf("    %s second launch: %s\n", label, err.message);
            check_device_alive(harness);
            return false;
        }
        if (memcmp(test_case->out, test_case->first_out, output_bytes) != 0 ||
            memcmp(test_case->raw, test_case->first_raw, output_bytes) != 0) {
            printf("    %s: two launches gave different outputs (claims %s)\n", label,
                   topk_determinism_name(backend->level));
            passed = false;
        }

        bool replays_equal = false;
        status = launch_graph(backend, &harness->device, &problem, output_bytes, harness->stream,
                              2, test_case->out, test_case->raw, test_case->first_out,
                              &replays_equal, &err);
        if (status < 0) {
            printf("    %s CUDA graph: %s\n", label, err.message);
            check_device_alive(harness);
            passed = false;
        } else if (!replays_equal ||
                   memcmp(test_case->raw, test_case->first_raw, output_bytes) != 0) {
            printf("    %s: CUDA-graph replay differs from the eager launch\n", label);
            passed = false;
        }
    }
    if (injected && passed) {
        printf("BLIND %s: a corrupted output passed: the harness cannot see this fault\n", label);
        harness->injected_but_passed++;
    }
    if (!passed)
        printf("FAIL %s (replay: --seed %" PRIu64 " --backend %s --family %s --k %u)\n", label,
               harness->options.seed, backend->name, test_case->family_name, test_case->k);
    else if (harness->options.verbose)
        printf("ok   %s (%u rows, max length %d)\n", label, test_case->record.rows,
               record_shape(&test_case->record, test_case->k).max_length);
    return passed;
}

static uint64_t case_seed(uint64_t seed, int family, uint32_t k)
{
    uint64_t mix = seed ^ ((uint64_t)(family + 1) << 40) ^ ((uint64_t)k << 8);
    return splitmix64(&mix);
}

static bool backend_selected(const struct harness *harness, const struct topk_backend *backend)
{
    return !harness->options.backend || strcmp(harness->options.backend, backend->name) == 0;
}

/* The entry that runs for table entry `backend`: bitonic with the plan of --plan. */
static const struct topk_backend *backend_to_run(const struct harness *harness,
                                                 const struct topk_backend *backend)
{
    if (strcmp(backend->name, "bitonic") == 0)
        return bitonic_backend_with(harness->options.plan);
    return backend;
}

/* FlashInfer's own kernels (the fi-* backends) rank exact -inf as a value, and their coarse
 * fp16 bin puts -NaN at the top (the conversion drops a NaN's sign): the neginf and nan families
 * are outside their domain and are not held to the contract here; `run` on the shipped
 * edge.bin shows those departures (docs/BACKENDS.md, tests/gpu/test_gpu_run.sh). Returns the
 * reason, or NULL when the family is in the backend's domain. */
static const char *outside_domain(const struct topk_backend *backend, int family)
{
    if (strncmp(backend->name, "fi-", 3) != 0)
        return NULL;
    if (family == FAMILY_NEG_INF)
        return "neginf outside FlashInfer's domain: it ranks exact -inf as a value";
    if (family == FAMILY_NAN)
        return "nan outside FlashInfer's domain: its coarse fp16 bin ranks -NaN first";
    return NULL;
}

/* Every selected backend on one family at one k. */
static void run_family_case(struct harness *harness, int family, uint32_t k)
{
    struct test_case test_case = { 0 };
    struct audit_error err = { 0 };
    int32_t lengths[MAX_ROWS_PER_CASE];
    bool any_supported = false;

    test_case.family_name = family_names[family];
    test_case.k = k;
    test_case.seed = case_seed(harness->options.seed, family, k);
    uint32_t rows = family_row_lengths((enum family_id)family, k, harness->options.quick,
                                       harness->options.longest, lengths);
    int status = build_record((enum family_id)family, k, lengths, rows, UINT32_MAX,
                              test_case.seed, &test_case.record, &err);
    if (status < 0) {
        printf("FAIL %s/k=%u: building the input: %s\n", family_names[family], k, err.message);
        harness->failed++;
        return;
    }

    /* Ask every backend first: a case nobody runs costs no reference computation. */
    struct topk_shape shape = record_shape(&test_case.record, k);
    int supported[MAX_BACKENDS] = { 0 };
    for (int i = 0; topk_backend_table[i] && i < MAX_BACKENDS; i++) {
        const struct topk_backend *backend = topk_backend_table[i];
        char reason[256] = "";
        const char *outside = outside_domain(backend, family);
        if (!backend_selected(harness, backend))
            continue;
        if (outside) {
            note_skip(harness, backend, outside);
            harness->table[i][family].skipped++;
            harness->skipped++;
        } else if (backend_to_run(harness, backend)
                       ->supports(&harness->device, &shape, reason, sizeof(reason))) {
            supported[i] = 1;
            any_supported = true;
        } else {
            note_skip(harness, backend, reason);
            harness->table[i][family].skipped++;
            harness->skipped++;
        }
    }
    if (any_supported) {
        status = test_case_prepare(&test_case, &err);
        if (status < 0) {
            printf("FAIL %s/k=%u: setup: %s\n", family_names[family], k, err.message);
            if (status == AUDIT_EDEVICE)
                check_device_alive(harness);
        }
    }
    for (int i = 0; any_supported && topk_backend_table[i] && i < MAX_BACKENDS; i++) {
        if (!supported[i])
            continue;
        if (status == 0 && !harness->device_lost &&
            run_backend_case(harness, &test_case,
                             backend_to_run(harness, topk_backend_table[i]))) {
            harness->table[i][family].passed++;
            harness->passed++;
        } else {
            harness->table[i][family].failed++;
            harness->failed++;
        }
    }
    test_case_release(&test_case);
}

/* The negative control: radix on a 0.0 plateau (64 x 32768, 1024 distinct positives, k 2048)
 * under a busy sibling stream must give at least 2 distinct index sets over 25 replays. If it
 * does not, the audit's replays cannot show anything and every "deterministic" verdict is
 * vacuous. Returns true when it passed. */
static bool run_negative_control(struct harness *harness)
{
    enum { ROWS = 64, LENGTH = 32768, DISTINCT = 1024, K = 2048, REPLAYS = 25 };
    const struct topk_backend *radix = topk_backend_find("radix");
    struct test_case test_case = { 0 };
    struct audit_error err = { 0 };
    struct topk_problem problem;
    uint8_t digests[REPLAYS][HASH_BYTES];
    int32_t lengths[ROWS];
    unsigned distinct = 0, invalid_replays = 0;
    bool passed = false;

    printf("negative control: radix, plateau %d x %d (m = %d), k = %d, %d replays under %s "
           "noise\n", ROWS, LENGTH, DISTINCT, K, REPLAYS, noise_kind_name(NOISE_GEMM));
    if (!radix) {
        printf("FAIL negative control: no backend named radix in the table: the audit cannot "
               "show that it detects anything\n");
        return false;
    }
    char reason[256] = "";
    for (int b = 0; b < ROWS; b++)
        lengths[b] = LENGTH;
    test_case.family_name = "plateau-control";
    test_case.k = K;
    test_case.seed = case_seed(harness->options.seed, FAMILY_COUNT, K);
    int status = build_record(FAMILY_PLATEAU, K, lengths, ROWS, DISTINCT, test_case.seed,
                              &test_case.record, &err);
    if (status == 0) {
        struct topk_shape shape = record_shape(&test_case.record, K);
        if (!radix->supports(&harness->device, &shape, reason, sizeof(reason)) ||
            !radix->launch || !radix->scratch_bytes) {
            printf("FAIL negative control: radix cannot run (%s): the audit cannot show that it "
                   "detects anything\n", reason[0] ? reason : "no launch in its table entry");
            goto done;
        }
        status = test_case_prepare(&test_case, &err);
    }
    if (status == 0)
        status = prepare_problem(radix, &harness->device, &test_case.record, K,
                                 &test_case.device, &problem, &err);
    for (int replay = 0; status == 0 && replay < REPLAYS; replay++) {
        status = noise_launch(harness->noise, harness->sibling, &err);
        if (status == 0)
            status = launch_eager(radix, &harness->device, &problem, test_case.device.output_bytes,
                                  harness->stream, test_case.out, test_case.raw, &err);
        if (status < 0)
            break;
        char label[64];
        snprintf(label, sizeof(label), "radix/plateau-control/replay %d", replay);
        int failing = judge_output(harness, &test_case, radix, label, &err);
        if (failing < 0) {
            status = failing;
            break;
        }
        invalid_replays += failing > 0;
        if (hash_index_sets(test_case.out, ROWS, K, digests[replay]) < 0) {
            status = audit_fail(&err, AUDIT_ENOMEM, "hashing the index sets of replay %d",
                                replay);
            break;
        }
        bool seen_before = false;
        for (int earlier = 0; earlier < replay && !seen_before; earlier++)
            seen_before = memcmp(digests[earlier], digests[replay], HASH_BYTES) == 0;
        distinct += !seen_before;
    }
    if (status == 0) {
        cudaError_t sibling_status = cudaStreamSynchronize(harness->sibling);
        if (sibling_status != cudaSuccess)
            status = audit_fail(&err, AUDIT_EDEVICE, "noise stream: %s",
                                cudaGetErrorString(sibling_status));
    }
    if (status < 0) {
        printf("FAIL negative control: %s\n", err.message);
        if (status == AUDIT_EDEVICE)
            check_device_alive(harness);
        goto done;
    }
    printf("negative control: %u distinct index sets over %d replays, %u replays with "
           "violations outside the documented radix behaviour\n", distinct, REPLAYS,
           invalid_replays);
    if (distinct < 2) {
        printf("FAIL negative control: radix gave the same index set on every replay of a 0.0 "
               "plateau under a busy sibling stream: the audit cannot detect anything (seed %"
               PRIu64 ")\n", harness->options.seed);
    } else if (invalid_replays) {
        printf("FAIL negative control: radix broke its contract on %u replays\n",
               invalid_replays);
    } else {
        passed = true;
    }
done:
    test_case_release(&test_case);
    return passed;
}

static void print_table(const struct harness *harness)
{
    int backends = 0;
    while (topk_backend_table[backends] && backends < MAX_BACKENDS)
        backends++;
    printf("\n%-12s", "family");
    for (int i = 0; i < backends; i++)
        if (backend_selected(harness, topk_backend_table[i]))
            printf(" %14s", topk_backend_table[i]->name);
    printf("\n%-12s", "");
    for (int i = 0; i < backends; i++)
        if (backend_selected(harness, topk_backend_table[i]))
            printf(" %14s", "pass/fail/skip");
    printf("\n");
    for (int f = 0; f < FAMILY_COUNT; f++) {
        if (harness->options.family >= 0 && harness->options.family != f)
            continue;
        printf("%-12s", family_names[f]);
        for (int i = 0; i < backends; i++) {
            if (!backend_selected(harness, topk_backend_table[i]))
                continue;
            const struct tally *cell = &harness->table[i][f];
            char text[32];
            snprintf(text, sizeof(text), "%u/%u/%u", cell->passed, cell->failed, cell->skipped);
            printf(" %14s", text);
        }
        printf("\n");
    }
}

static void usage(FILE *out)
{
    fprintf(out,
            "usage: test_gpu_backends [--seed N] [--backend NAME] [--family NAME] [--k N]\n"
            "                         [--quick] [--longest N] [--plan PLAN] [--verbose]\n"
            "                         [--inject-fault]\n"
            "Compares every GPU top-k backend with the CPU reference on seeded inputs and holds\n"
            "it to its claims. Exit 0 all passed, 1 a failure, 2 usage, 77 no CUDA device.\n"
            "--inject-fault corrupts one entry of every output: every case must then fail;\n"
            "exit 0 when each corrupted case failed (a self-check of the harness).\n"
            "--longest N: rows up to N elements, one of exactly N (sets how backends cut rows).\n"
            "--plan PLAN: bitonic's plan forced where it applies: " BITONIC_CHOICE_NAMES ".\n"
            "families:");
    for (int f = 0; f < FAMILY_COUNT; f++)
        fprintf(out, " %s", family_names[f]);
    fprintf(out, "\nbackends:");
    for (int i = 0; topk_backend_table[i]; i++)
        fprintf(out, " %s", topk_backend_table[i]->name);
    fprintf(out, "\n");
}

static int parse_options(int argc, char **argv, struct options *options)
{
    static const struct option long_options[] = {
        { "seed", required_argument, NULL, 's' },
        { "backend", required_argument, NULL, 'b' },
        { "family", required_argument, NULL, 'f' },
        { "k", required_argument, NULL, 'k' },
        { "quick", no_argument, NULL, 'q' },
        { "longest", required_argument, NULL, 'l' },
        { "plan", required_argument, NULL, 'p' },
        { "verbose", no_argument, NULL, 'v' },
        { "inject-fault", no_argument, NULL, 'i' },
        { "help", no_argument, NULL, 'h' },
        { NULL, 0, NULL, 0 },
    };
    bool seed_given = false;
    char *end;
    int option;

    memset(options, 0, sizeof(*options));
    options->family = -1;
    while ((option = getopt_long(argc, argv, "s:b:f:k:ql:p:vh", long_options, NULL)) != -1) {
        switch (option) {
        case 's':
            options->seed = strtoull(optarg, &end, 0);
            if (!*optarg || *end) {
                fprintf(stderr, "test_gpu_backends: --seed: not a number: %s\n", optarg);
                return -1;
            }
            seed_given = true;
            break;
        case 'b': {
            const char *at = strchr(optarg, '@');
            options->backend = optarg;
            if (!topk_backend_find(optarg)) {
                fprintf(stderr, "test_gpu_backends: --backend: no backend named %s\n", optarg);
                return -1;
            }
            if (at) { /* bitonic@PLAN: --backend bitonic --plan PLAN */
                *(char *)at = '\0';
                (void)bitonic_choice_parse(at + 1, &options->plan);
            }
            break;
        }
        case 'p':
            if (bitonic_choice_parse(optarg, &options->plan) != 0) {
                fprintf(stderr, "test_gpu_backends: --plan: expected %s: %s\n",
                        BITONIC_CHOICE_NAMES, optarg);
                return -1;
            }
            break;
        case 'f':
            options->family = family_parse(optarg);
            if (options->family < 0) {
                fprintf(stderr, "test_gpu_backends: --family: no family named %s\n", optarg);
                return -1;
            }
            break;
        case 'k': {
            unsigned long value = strtoul(optarg, &end, 10);
            if (!*optarg || *end || value == 0 || value > CAPTURE_MAX_K) {
                fprintf(stderr, "test_gpu_backends: --k: expected 1..%u: %s\n", CAPTURE_MAX_K,
                        optarg);
                return -1;
            }
            options->k = (uint32_t)value;
            break;
        }
        case 'q':
            options->quick = true;
            break;
        case 'l': {
            unsigned long value = strtoul(optarg, &end, 10);
            if (!*optarg || *end || value == 0 || value > (1ul << 20)) {
                fprintf(stderr, "test_gpu_backends: --longest: expected 1..%lu: %s\n", 1ul << 20,
                        optarg);
                return -1;
            }
            options->longest = (uint32_t)value;
            break;
        }
        case 'v':
            options->verbose = true;
            break;
        case 'i':
            options->inject_fault = true;
            break;
        case 'h':
            usage(stdout);
            exit(0);
        default:
            usage(stderr);
            return -1;
        }
    }
    if (optind < argc) {
        fprintf(stderr, "test_gpu_backends: unexpected argument: %s\n", argv[optind]);
        return -1;
    }
    if (!seed_given) {
        /* A new seed each run widens coverage over time; it is printed for replay. */
        struct timespec now;
        clock_gettime(CLOCK_REALTIME, &now);
        uint64_t mix = (uint64_t)now.tv_sec * 1000000007ull ^ (uint64_t)now.tv_nsec ^
                       ((uint64_t)getpid() << 32);
        options->seed = splitmix64(&mix) & 0xFFFFFFFFull;
    }
    return 0;
}

int main(int argc, char **argv)
{
    struct harness harness;
    struct audit_error err = { 0 };
    char why[512] = "";
    int device_count = 0;
    struct timespec started, finished;

    setvbuf(stdout, NULL, _IOLBF, 0);
    memset(&harness, 0, sizeof(harness));
    if (parse_options(argc, argv, &harness.options) < 0)
        return 2;
    if (gpu_device_count(&device_count, why, sizeof(why)) < 0) {
        /* Not "no device": a driver that is there but failing must not pass as a skip. */
        printf("FAIL: CUDA device discovery: %s\n", why);
        printf("0 passed, 1 failed\n");
        return 1;
    }
    if (device_count == 0) {
        printf("no CUDA device: %s; skipping\n", why[0] ? why : "none found");
        return EXIT_SKIPPED;
    }
    if (hash_init() < 0) {
        printf("FAIL: libsodium initialisation\n");
        return 1;
    }
    if (gpu_device_query(0, 0, &harness.device, &err) < 0) {
        printf("FAIL: device 0: %s\n", err.message);
        return 1;
    }
    printf("device 0: %s, compute capability %d.%d, %d SMs, %zu B shared memory per SM\n",
           harness.device.name, harness.device.cc_major, harness.device.cc_minor,
           harness.device.sm_count, harness.device.smem_per_sm);
    printf("seed: %" PRIu64 " (replay with --seed %" PRIu64 ")%s\n", harness.options.seed,
           harness.options.seed, harness.options.quick ? ", quick" : "");
    printf("bitonic plan: %s\n", bitonic_choice_name(harness.options.plan));
    clock_gettime(CLOCK_MONOTONIC, &started);

    if (cudaStreamCreateWithFlags(&harness.stream, cudaStreamNonBlocking) != cudaSuccess ||
        cudaStreamCreateWithFlags(&harness.sibling, cudaStreamNonBlocking) != cudaSuccess) {
        printf("FAIL: cudaStreamCreateWithFlags: %s\n", cudaGetErrorString(cudaGetLastError()));
        return 1;
    }
    if (noise_create(&harness.noise, NOISE_GEMM, &err) < 0) {
        printf("FAIL: noise_create: %s\n", err.message);
        return 1;
    }

    /* The negative control runs with the full suite or with --backend radix alone. */
    bool control_selected = harness.options.family < 0 && harness.options.k == 0 &&
                            (!harness.options.backend ||
                             strcmp(harness.options.backend, "radix") == 0);
    if (control_selected) {
        if (run_negative_control(&harness))
            harness.passed++;
        else
            harness.failed++;
    }

    const uint32_t *ks = harness.options.quick ? quick_ks : full_ks;
    size_t k_count = harness.options.quick ? sizeof(quick_ks) / sizeof(quick_ks[0])
                                           : sizeof(full_ks) / sizeof(full_ks[0]);
    for (int family = 0; family < FAMILY_COUNT && !harness.device_lost; family++) {
        if (harness.options.family >= 0 && harness.options.family != family)
            continue;
        for (size_t i = 0; i < k_count && !harness.device_lost; i++) {
            uint32_t k = harness.options.k ? harness.options.k : ks[i];
            run_family_case(&harness, family, k);
            if (harness.options.k)
                break;
        }
    }

    print_table(&harness);
    noise_destroy(harness.noise);
    cudaStreamDestroy(harness.stream);
    cudaStreamDestroy(harness.sibling);
    clock_gettime(CLOCK_MONOTONIC, &finished);
    double seconds = (double)(finished.tv_sec - started.tv_sec) +
                     (double)(finished.tv_nsec - started.tv_nsec) * 1e-9;
    printf("%u skipped (unsupported), seed %" PRIu64 ", %.1f s\n", harness.skipped,
           harness.options.seed, seconds);
    if (harness.device_lost)
        printf("stopped early: the device context was lost\n");
    if (harness.options.inject_fault) {
        /* Self-check mode: failures are expected; a corrupted case that passed is the fault. */
        printf("inject-fault self-check: %u outputs corrupted, %u detected, %u missed, %u "
               "selected nothing to corrupt\n", harness.injected,
               harness.injected - harness.injected_but_passed, harness.injected_but_passed,
               harness.nothing_to_corrupt);
        printf("%u passed, %u failed\n", harness.passed, harness.failed);
        return harness.injected_but_passed || harness.injected == 0 || harness.device_lost;
    }
    printf("%u passed, %u failed\n", harness.passed, harness.failed);
    return harness.failed || harness.device_lost ? 1 : 0;
}
