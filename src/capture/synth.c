/* Synthetic captures of documented families (docs/SYNTH.md).
 *
 * Every value comes from a generator that needs nothing but IEEE-754 basic operations
 * (+, -, *, /, sqrt, all correctly rounded in round-to-nearest) and integer arithmetic, so the
 * same seed gives the same bytes on every conforming machine: xoshiro256** seeded through
 * splitmix64, uniforms from the top 53 bits, normals by Marsaglia's polar method with a natural
 * logarithm computed here from the exponent bits and a fixed odd series (libm's log may differ
 * in the last bit between machines and versions). tests/test_synth.c pins the bytes with
 * SHA-256 digests. */
#include "synth.h"

#include <float.h>
#include <math.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "document_keys.h"
#include "host_threads.h"

/* A fused multiply-add rounds once where the definition rounds twice and changes the bytes. The
 * build passes -ffp-contract=off; clang also contracts by default (-ffp-contract=on), which this
 * pragma turns off for builds outside Meson. GCC needs the flag (its ISO C modes default to off,
 * its GNU modes to fast); the golden digests in tests/test_synth.c catch a build that fuses. */
#if defined(__clang__)
#pragma clang fp contract(off)
#endif
#if defined(__FAST_MATH__)
#error "synth.c needs exact IEEE arithmetic: build it without -ffast-math"
#endif
#if !defined(FLT_EVAL_METHOD) || FLT_EVAL_METHOD != 0
#error "synth.c needs FLT_EVAL_METHOD == 0 (no excess precision, e.g. SSE2 rather than x87)"
#endif

/* Bumped whenever a family or the generator changes the bytes it produces. */
#define SYNTH_GENERATOR "synth/1 xoshiro256** splitmix64 polar"

/* Seeds travel in the metadata JSON as numbers, exact up to 2^53. */
#define SYNTH_MAX_SEED (UINT64_C(1) << 53)

/* Elements outside every window (stride padding, before row_starts, beyond lengths) hold this
 * positive quiet NaN: a backend that reads one ranks it above +inf and selects it, so an
 * out-of-window read shows up as a wrong set rather than passing unnoticed. */
#define SYNTH_POISON_BITS UINT32_C(0x7FC0DEAD)

/* Families whose rows draw from their own streams alone fill them on a few threads (host_threads.h)
 * once a record has this many scores per thread: a row's bytes do not depend on the thread that
 * drew them. bench generates records of up to 2^30 scores. */
#define SYNTH_SCORES_PER_THREAD (1024u * 1024u)

/* Row streams are seeded with seed + (b + 1) * SYNTH_STREAM_STRIDE (mod 2^64); stream 0 (the seed
 * itself) draws what the whole record shares. An odd constant keeps the streams distinct. */
#define SYNTH_STREAM_STRIDE UINT64_C(0x8CB92BA72F3D8DD7)

const char *const synth_family_names[] = {
    "plateau", "tie",     "relu",  "narrow",     "indexer", "random",
    "neginf",  "allequal", "short", "offsets",   "padded",  "paged",
    "signedzero", "nan",  "subnormal", NULL,
};

/* ---- the portable generator ---------------------------------------------------------------- */

static uint64_t splitmix64_next(uint64_t *state)
{
    uint64_t z = (*state += UINT64_C(0x9E3779B97F4A7C15));
    z = (z ^ (z >> 30)) * UINT64_C(0xBF58476D1CE4E5B9);
    z = (z ^ (z >> 27)) * UINT64_C(0x94D049BB133111EB);
    return z ^ (z >> 31);
}

void synth_rng_seed(struct synth_rng *rng, uint64_t seed)
{
    uint64_t state = seed;
    for (int i = 0; i < 4; i++)
        rng->state[i] = splitmix64_next(&state);
}

static inline uint64_t rotate_left(uint64_t x, int bits)
{
    return (x << bits) | (x >> (64 - bits));
}

uint64_t synth_rng_next(struct synth_rng *rng)
{
    uint64_t *s = rng->state;
    const uint64_t result = rotate_left(s[1] * 5, 7) * 9;
    const uint64_t shifted = s[1] << 17;
    s[2] ^= s[0];
    s[3] ^= s[1];
    s[1] ^= s[2];
    s[0] ^= s[3];
    s[2] ^= shifted;
    s[3] = rotate_left(s[3], 45);
    return result;
}

double synth_rng_uniform(struct synth_rng *rng)
{
    /* The top 53 bits scaled by 2^-53: exact, so every double in the result is a multiple of
     * 2^-53 in [0, 1). */
    return (double)(synth_rng_next(rng) >> 11) * (1.0 / 9007199254740992.0);
}

/* Uniform integer in [0, bound), bound >= 1, without modulo bias: draws below 2^64 mod bound
 * are rejected so that the accepted range is a whole number of copies of [0, bound). */
static uint64_t rng_below(struct synth_rng *rng, uint64_t bound)
{
    const uint64_t rejected = (0 - bound) % bound;
    uint64_t draw;
    do {
        draw = synth_rng_next(rng);
    } while (draw < rejected);
    return draw % bound;
}

/* ln 2 split so that exponent * LN2_HIGH is exact for |exponent| < 2^11: LN2_HIGH keeps the top
 * 32 significant bits of ln 2 and LN2_LOW is the rest, rounded to a double. */
static const double LN2_HIGH = 0x1.62e42fefp-1;
static const double LN2_LOW = 0x1.473de6af278edp-34;

/* Natural logarithm of a positive, normal, finite double, from basic operations only.
 * x = m * 2^e with m in [sqrt(1/2), sqrt(2)); ln m = 2 atanh(f) with f = (m - 1) / (m + 1),
 * |f| <= 0.1716, summed as 2 f (1 + f^2/3 + f^4/5 + ... + f^24/25) by Horner's rule; the first
 * omitted term is below 1e-19 relative. Accurate to about one ulp; what matters here is that the
 * operation sequence is fixed, so the result is the same on every IEEE-754 machine. */
static double portable_log(double x)
{
    uint64_t bits;
    memcpy(&bits, &x, sizeof(bits));
    int exponent = (int)((bits >> 52) & 0x7FF) - 1023;
    bits = (bits & UINT64_C(0x000FFFFFFFFFFFFF)) | UINT64_C(0x3FF0000000000000);
    double mantissa;
    memcpy(&mantissa, &bits, sizeof(mantissa));
    if (mantissa > 1.4142135623730951) { /* sqrt(2) rounded */
        mantissa *= 0.5;                    /* exact */
        exponent += 1;
    }
    const double f = (mantissa - 1.0) / (mantissa + 1.0);
    const double f2 = f * f;
    double series = 1.0 / 25.0;
    series = series * f2 + 1.0 / 23.0;
    series = series * f2 + 1.0 / 21.0;
    series = series * f2 + 1.0 / 19.0;
    series = series * f2 + 1.0 / 17.0;
    series = series * f2 + 1.0 / 15.0;
    series = series * f2 + 1.0 / 13.0;
    series = series * f2 + 1.0 / 11.0;
    series = series * f2 + 1.0 / 9.0;
    series = series * f2 + 1.0 / 7.0;
    series = series * f2 + 1.0 / 5.0;
    series = series * f2 + 1.0 / 3.0;
    const double log_mantissa = 2.0 * f + 2.0 * f * (f2 * series);
    const double e = (double)exponent;
    return e * LN2_HIGH + (e * LN2_LOW + log_mantissa);
}

double synth_rng_normal(struct synth_rng *rng)
{
    /* Marsaglia's polar method; only the first of the pair is returned, so one call always
     * consumes a whole number of accepted (u, v) draws and the stream needs no cached state.
     * u and v are multiples of 2^-52, so s >= 2^-104 is normal and portable_log applies. */
    double u, v, s;
    do {
        u = 2.0 * synth_rng_uniform(rng) - 1.0;
        v = 2.0 * synth_rng_uniform(rng) - 1.0;
        s = u * u + v * v;
    } while (s >= 1.0 || s == 0.0);
    return u * sqrt(-2.0 * portable_log(s) / s);
}

/* ---- shared helpers ------------------------------------------------------------------------ */

struct synth_job {
    const struct synth_params *params;
    struct capture_record *record;
    struct synth_rng record_rng; /* stream 0: what all rows share */
    cJSON *params_json;          /* the family's parameters, for the metadata */
    int32_t *positions;          /* scratch: a permutation of [0, length) */
};

static void seed_row_stream(struct synth_rng *rng, uint64_t seed, uint32_t row)
{
    synth_rng_seed(rng, seed + ((uint64_t)row + 1) * SYNTH_STREAM_STRIDE);
}

static float float_from_bits(uint32_t bits)
{
    float value;
    memcpy(&value, &bits, sizeof(value));
    return value;
}

static float normal_float(struct synth_rng *rng)
{
    return (float)synth_rng_normal(rng);
}

static float *row_data(struct synth_job *job, uint32_t b)
{
    return job->record->scores + (uint64_t)b * job->record->row_stride;
}

/* Puts a uniformly random choice of count distinct positions of [0, n), in random order, into
 * positions[0, count) (a Fisher-Yates shuffle stopped after count steps). */
static void choose_positions(struct synth_rng *rng, int32_t *positions, uint32_t n,
                             uint32_t count)
{
    for (uint32_t i = 0; i < n; i++)
        positions[i] = (int32_t)i;
    for (uint32_t i = 0; i < count && i + 1 < n; i++) {
        uint32_t j = i + (uint32_t)rng_below(rng, n - i);
        int32_t swapped = positions[i];
        positions[i] = positions[j];
        positions[j] = swapped;
    }
}

/* Allocates the record's arrays for stride elements per row, every element poisoned and every
 * length set to the row length; row_starts and the page table are added by the families that
 * use them. */
static int allocate_scores(struct synth_job *job, uint64_t stride, struct audit_error *err)
{
    struct capture_record *record = job->record;
    const uint32_t rows = job->params->rows;
    if (stride > CAPTURE_MAX_ROW_STRIDE)
        return audit_fail(err, AUDIT_EUSAGE,
                          "synth: stride_pad plus length (%llu) exceeds the row stride limit %llu",
                          (unsigned long long)stride, (unsigned long long)CAPTURE_MAX_ROW_STRIDE);
    const uint64_t elements = (uint64_t)rows * stride;
    if (elements * sizeof(float) > CAPTURE_MAX_PAYLOAD_BYTES || elements > SIZE_MAX / sizeof(float))
        return audit_fail(err, AUDIT_EUSAGE,
                          "synth: rows x stride = %llu scores exceeds the capture payload limit",
                          (unsigned long long)elements);
    record->rows = rows;
    record->k = job->params->k;
    record->row_stride = stride;
    /* At least one element each: malloc(0) may return NULL, which would read as a failure. */
    record->scores = malloc((size_t)(elements ? elements : 1) * sizeof(float));
    record->lengths = malloc((size_t)rows * sizeof(int32_t));
    job->positions = malloc((size_t)(job->params->length ? job->params->length : 1) *
                            sizeof(int32_t));
    if (!record->scores || !record->lengths || !job->positions)
        return audit_fail(err, AUDIT_ENOMEM, "synth: out of memory for %u x %llu scores", rows,
                          (unsigned long long)stride);
    const float poison = float_from_bits(SYNTH_POISON_BITS);
    for (uint64_t i = 0; i < elements; i++)
        record->scores[i] = poison;
    for (uint32_t b = 0; b < rows; b++)
        record->lengths[b] = (int32_t)job->params->length;
    return AUDIT_OK;
}

static int add_param_number(struct synth_job *job, const char *name, double value,
                            struct audit_error *err)
{
    if (!cJSON_AddNumberToObject(job->params_json, name, value))
        return audit_fail(err, AUDIT_ENOMEM, "synth: out of memory for metadata");
    return AUDIT_OK;
}

static void fill_normal(struct synth_rng *rng, float *values, uint32_t count)
{
    for (uint32_t i = 0; i < count; i++)
        values[i] = normal_float(rng);
}

/* Every row of the record filled by fill(row stream, row, length), the rows shared out to a few
 * threads (host_rows: each claims the next row). */
typedef void (*synth_row_fill)(struct synth_rng *rng, float *row, uint32_t length);

struct synth_rows {
    struct synth_job *job;
    synth_row_fill fill;
    struct host_rows rows;
};

static void synth_rows_thread(void *argument, unsigned slot)
{
    (void)slot;
    struct synth_rows *work = argument;
    uint32_t b;
    while (host_rows_claim(&work->rows, &b)) {
        struct synth_rng rng;
        seed_row_stream(&rng, work->job->params->seed, b);
        work->fill(&rng, row_data(work->job, b), work->job->params->length);
    }
}

static int fill_rows(struct synth_job *job, synth_row_fill fill, struct audit_error *err)
{
    const struct synth_params *p = job->params;
    struct synth_rows work = { .job = job, .fill = fill };
    int status = host_rows_init(&work.rows, p->rows, err);
    if (status < 0)
        return status;
    unsigned threads =
        host_threads_count((size_t)p->rows * p->length, SYNTH_SCORES_PER_THREAD);
    if (threads > p->rows)
        threads = p->rows ? p->rows : 1;
    host_threads_run(threads, synth_rows_thread, &work);
    return host_rows_finish(&work.rows, err);
}

/* ---- families ------------------------------------------------------------------------------ */

/* m distinct positives 0.5 + i * 1e-3 (fp32) at random positions, the rest exact +0.0: the
 * ReLU indexer's zero plateau. With m < k the boundary lies in the plateau (tie set L - m). */
static int generate_plateau(struct synth_job *job, struct audit_error *err)
{
    const struct synth_params *p = job->params;
    const uint32_t m = p->plateau_distinct;
    if (m > p->length)
        return audit_fail(err, AUDIT_EUSAGE,
                          "synth: plateau_distinct %u exceeds the row length %u", m, p->length);
    /* 0.5 + i * 1e-3 stays distinct in fp32 while the step (1e-3) exceeds the ulp (2^-11 at
     * 4096): well past 2^22 values. */
    if (m > (UINT32_C(1) << 22))
        return audit_fail(err, AUDIT_EUSAGE,
                          "synth: plateau_distinct %u exceeds 4194304 (values would collide)", m);
    int status = allocate_scores(job, p->length, err);
    if (status < 0)
        return status;
    if ((status = add_param_number(job, "distinct", m, err)) < 0)
        return status;
    for (uint32_t b = 0; b < p->rows; b++) {
        struct synth_rng rng;
        seed_row_stream(&rng, p->seed, b);
        float *row = row_data(job, b);
        memset(row, 0, (size_t)p->length * sizeof(float));
        choose_positions(&rng, job->positions, p->length, m);
        for (uint32_t i = 0; i < m; i++)
            row[job->positions[i]] = 0.5f + (float)i * 1e-3f;
    }
    return AUDIT_OK;
}

/* T exact 1.0 ties straddling the boundary: max(0, k - T/2) distinct values 2.0 + i * 1e-4
 * above, the T ties, and distinct values 0.01 + i * 1e-7 below, all at random positions. */
static int generate_tie(struct synth_job *job, struct audit_error *err)
{
    const struct synth_params *p = job->params;
    const uint32_t ties = p->tie_count;
    if (ties < 2)
        return audit_fail(err, AUDIT_EUSAGE,
                          "synth: tie_count %u: at least 2 ties are needed to straddle the "
                          "boundary", ties);
    const uint64_t above = ties / 2 >= p->k ? 0 : p->k - ties / 2;
    if (above + ties > p->length)
        return audit_fail(err, AUDIT_EUSAGE,
                          "synth: tie_count %u needs length >= %llu (%llu values above plus the "
                          "ties); length is %u",
                          ties, (unsigned long long)(above + ties), (unsigned long long)above,
                          p->length);
    const uint64_t below = p->length - above - ties;
    /* 0.01 + i * 1e-7 stays below 1.0 and distinct (the step exceeds the fp32 ulp below 1.0)
     * up to 9e6 values. */
    if (below > 9000000)
        return audit_fail(err, AUDIT_EUSAGE,
                          "synth: tie_count %u leaves %llu values below the ties; at most "
                          "9000000 stay distinct and below 1.0 (use a shorter length)",
                          ties, (unsigned long long)below);
    int status = allocate_scores(job, p->length, err);
    if (status < 0)
        return status;
    if ((status = add_param_number(job, "ties", ties, err)) < 0 ||
        (status = add_param_number(job, "above", (double)above, err)) < 0)
        return status;
    for (uint32_t b = 0; b < p->rows; b++) {
        struct synth_rng rng;
        seed_row_stream(&rng, p->seed, b);
        float *row = row_data(job, b);
        choose_positions(&rng, job->positions, p->length, p->length);
        const int32_t *position = job->positions;
        for (uint32_t i = 0; i < above; i++)
            row[*position++] = 2.0f + (float)i * 1e-4f;
        for (uint32_t i = 0; i < ties; i++)
            row[*position++] = 1.0f;
        for (uint32_t i = 0; i < below; i++)
            row[*position++] = 0.01f + (float)i * 1e-7f;
    }
    return AUDIT_OK;
}

/* relu(N(0,1) - 1.28) * 11.3 in fp32, the public PR fixture: about 10% nonzero, so at
 * L = 16384 and k = 2048 the boundary sits in the zero plateau. */
static void fill_relu(struct synth_rng *rng, float *row, uint32_t length)
{
    for (uint32_t i = 0; i < length; i++) {
        const float shifted = normal_float(rng) - 1.28f;
        row[i] = (shifted > 0.0f ? shifted : 0.0f) * 11.3f;
    }
}

static int generate_relu(struct synth_job *job, struct audit_error *err)
{
    int status = allocate_scores(job, job->params->length, err);
    if (status < 0)
        return status;
    return fill_rows(job, fill_relu, err);
}

/* 1 + N(0,1) * 1e-7 in fp32 (the product and the sum each rounded to fp32, as the seed harness
 * computes it): a dozen distinct values within 1e-6 of 1.0, every row one huge coarse bin (the
 * radix staging-overflow regime of SGLang #17747) and large exact ties. */
static void fill_narrow(struct synth_rng *rng, float *row, uint32_t length)
{
    for (uint32_t i = 0; i < length; i++) {
        const float offset = normal_float(rng) * 1e-7f;
        row[i] = 1.0f + offset;
    }
}

static int generate_narrow(struct synth_job *job, struct audit_error *err)
{
    int status = allocate_scores(job, job->params->length, err);
    if (status < 0)
        return status;
    return fill_rows(job, fill_narrow, err);
}

/* The indexer model of the seed's synthetic_rows: H heads of equicorrelated Gaussian logits
 * x[h][s] = mu + sqrt(rho) c[s] + sqrt(1 - rho) z[h][s], non-negative head weights
 * w[h] = U / H, score[s] = sum_h w[h] relu(x[h][s]) (double, then rounded to fp32), times a
 * per-key scale 2^e, e uniform in {-2..2}, shared by all rows (an e8m0 key scale keeps exact
 * 0.0). */
static int generate_indexer(struct synth_job *job, struct audit_error *err)
{
    static const float key_scales[5] = { 0.25f, 0.5f, 1.0f, 2.0f, 4.0f };
    const struct synth_params *p = job->params;
    const uint32_t heads = p->heads ? p->heads : 64;
    double *weights = NULL, *shared = NULL, *sums = NULL;
    uint8_t *scale_index = NULL;
    if (heads > 1024)
        return audit_fail(err, AUDIT_EUSAGE, "synth: heads %u exceeds 1024", heads);
    if (!(p->rho >= 0.0 && p->rho <= 1.0))
        return audit_fail(err, AUDIT_EUSAGE, "synth: rho %g is outside [0, 1]", p->rho);
    if (!isfinite(p->mu) || fabs(p->mu) > 1e6)
        return audit_fail(err, AUDIT_EUSAGE, "synth: mu %g is not a finite value in [-1e6, 1e6]",
                          p->mu);
    int status = allocate_scores(job, p->length, err);
    if (status < 0)
        return status;
    if ((status = add_param_number(job, "heads", heads, err)) < 0 ||
        (status = add_param_number(job, "rho", p->rho, err)) < 0 ||
        (status = add_param_number(job, "mu", p->mu, err)) < 0)
        return status;
    weights = malloc((size_t)heads * sizeof(double));
    shared = malloc((size_t)p->length * sizeof(double));
    sums = malloc((size_t)p->length * sizeof(double));
    scale_index = malloc(p->length);
    if (!weights || !shared || !sums || !scale_index) {
        status = audit_fail(err, AUDIT_ENOMEM, "synth: out of memory for the indexer model");
        goto done;
    }
    for (uint32_t s = 0; s < p->length; s++)
        scale_index[s] = (uint8_t)rng_below(&job->record_rng, 5);
    const double shared_weight = sqrt(p->rho), own_weight = sqrt(1.0 - p->rho);
    for (uint32_t b = 0; b < p->rows; b++) {
        struct synth_rng rng;
        seed_row_stream(&rng, p->seed, b);
        for (uint32_t h = 0; h < heads; h++)
            weights[h] = synth_rng_uniform(&rng) / (double)heads;
        for (uint32_t s = 0; s < p->length; s++) {
            shared[s] = synth_rng_normal(&rng);
            sums[s] = 0.0;
        }
        for (uint32_t h = 0; h < heads; h++) {
            for (uint32_t s = 0; s < p->length; s++) {
                const double logit =
                    p->mu + shared_weight * shared[s] + own_weight * synth_rng_normal(&rng);
                if (logit > 0.0)
                    sums[s] += weights[h] * logit;
            }
        }
        float *row = row_data(job, b);
        for (uint32_t s = 0; s < p->length; s++)
            row[s] = (float)sums[s] * key_scales[scale_index[s]];
    }
    status = AUDIT_OK;
done:
    free(weights);
    free(shared);
    free(sums);
    free(scale_index);
    return status;
}

/* N(0,1) in fp32: distinct values, the generic case. */
static int generate_random(struct synth_job *job, struct audit_error *err)
{
    int status = allocate_scores(job, job->params->length, err);
    if (status < 0)
        return status;
    return fill_rows(job, fill_normal, err);
}

/* N(0,1) with each score exact -inf with probability 1/20 (never a candidate), and one row,
 * chosen by the record stream, entirely -inf (no candidate at all: all -1 padding). */
static int generate_neginf(struct synth_job *job, struct audit_error *err)
{
    const struct synth_params *p = job->params;
    int status = allocate_scores(job, p->length, err);
    if (status < 0)
        return status;
    const uint32_t empty_row = (uint32_t)rng_below(&job->record_rng, p->rows);
    if ((status = add_param_number(job, "all_neginf_row", empty_row, err)) < 0)
        return status;
    for (uint32_t b = 0; b < p->rows; b++) {
        struct synth_rng rng;
        seed_row_stream(&rng, p->seed, b);
        float *row = row_data(job, b);
        for (uint32_t i = 0; i < p->length; i++) {
            const bool sprinkled = synth_rng_uniform(&rng) < 0.05;
            const float value = normal_float(&rng);
            row[i] = b == empty_row || sprinkled ? -INFINITY : value;
        }
    }
    return AUDIT_OK;
}

/* Even rows exactly 1.0 everywhere, odd rows exactly +0.0: the whole row is one tie set. */
static int generate_allequal(struct synth_job *job, struct audit_error *err)
{
    const struct synth_params *p = job->params;
    int status = allocate_scores(job, p->length, err);
    if (status < 0)
        return status;
    for (uint32_t b = 0; b < p->rows; b++) {
        float *row = row_data(job, b);
        const float value = b % 2 == 0 ? 1.0f : 0.0f;
        for (uint32_t i = 0; i < p->length; i++)
            row[i] = value;
    }
    return AUDIT_OK;
}

/* Rows shorter than k: row b % 8 == 0 has length 0, the others a length uniform in
 * [1, min(k, L + 1)); N(0,1) inside the window, poison beyond it. Every selection is padded
 * with -1. */
static int generate_short(struct synth_job *job, struct audit_error *err)
{
    const struct synth_params *p = job->params;
    int status = allocate_scores(job, p->length, err);
    if (status < 0)
        return status;
    const uint64_t length_bound = p->k < (uint64_t)p->length + 1 ? p->k : (uint64_t)p->length + 1;
    for (uint32_t b = 0; b < p->rows; b++) {
        struct synth_rng rng;
        seed_row_stream(&rng, p->seed, b);
        uint32_t length = 0;
        if (b % 8 != 0 && length_bound > 1)
            length = 1 + (uint32_t)rng_below(&rng, length_bound - 1);
        job->record->lengths[b] = (int32_t)length;
        fill_normal(&rng, row_data(job, b), length);
    }
    return AUDIT_OK;
}

/* Windows at random row_starts: stride L + pad (pad = stride_pad, default 61 so most starts
 * are not 16-byte aligned), row_starts uniform in [0, pad], window length L, N(0,1) inside,
 * poison around it. Indices are relative to the window start. */
static int generate_offsets(struct synth_job *job, struct audit_error *err)
{
    const struct synth_params *p = job->params;
    const uint32_t pad = p->stride_pad ? p->stride_pad : 61;
    int status = allocate_scores(job, (uint64_t)p->length + pad, err);
    if (status < 0)
        return status;
    if ((status = add_param_number(job, "stride_pad", pad, err)) < 0)
        return status;
    job->record->row_starts = malloc((size_t)p->rows * sizeof(int32_t));
    if (!job->record->row_starts)
        return audit_fail(err, AUDIT_ENOMEM, "synth: out of memory for row_starts");
    for (uint32_t b = 0; b < p->rows; b++) {
        struct synth_rng rng;
        seed_row_stream(&rng, p->seed, b);
        const uint32_t start = (uint32_t)rng_below(&rng, (uint64_t)pad + 1);
        job->record->row_starts[b] = (int32_t)start;
        fill_normal(&rng, row_data(job, b) + start, p->length);
    }
    return AUDIT_OK;
}

/* Padded rows: stride L + stride_pad (default 64), the pad poisoned, N(0,1) in the windows. */
static int generate_padded(struct synth_job *job, struct audit_error *err)
{
    const struct synth_params *p = job->params;
    const uint32_t pad = p->stride_pad ? p->stride_pad : 64;
    int status = allocate_scores(job, (uint64_t)p->length + pad, err);
    if (status < 0)
        return status;
    if ((status = add_param_number(job, "stride_pad", pad, err)) < 0)
        return status;
    for (uint32_t b = 0; b < p->rows; b++) {
        struct synth_rng rng;
        seed_row_stream(&rng, p->seed, b);
        fill_normal(&rng, row_data(job, b), p->length);
    }
    return AUDIT_OK;
}

/* Extra page-table entries per row beyond the window's pages; page_table_row_starts are uniform
 * in [0, PAGED_EXTRA_PAGES]. */
#define PAGED_EXTRA_PAGES 3u

/* A page table: page_size P (default 64), ceil(L / P) + 3 entries per row, per-row starts
 * uniform in [0, 3], the entries of the whole table a random permutation of the physical pages
 * [0, rows * cols). Scores are N(0,1) rounded down to multiples of 1/16, so ties are common and
 * the smallest-index rule must be applied to logical (window) indices, not translated ones.
 * Even rows have length L, odd rows a length uniform in [0, L]. */
static int generate_paged(struct synth_job *job, struct audit_error *err)
{
    const struct synth_params *p = job->params;
    struct capture_record *record = job->record;
    const uint32_t page_size = p->page_size ? p->page_size : 64;
    if ((page_size & (page_size - 1)) != 0 || page_size > (UINT32_C(1) << 20))
        return audit_fail(err, AUDIT_EUSAGE,
                          "synth: page_size %u is not a power of two in [1, 1048576]", page_size);
    const uint64_t columns = ((uint64_t)p->length + page_size - 1) / page_size + PAGED_EXTRA_PAGES;
    const uint64_t entries = columns * p->rows;
    /* Translated indices (physical page * page_size + offset) must fit in int32. */
    if (entries * page_size > (uint64_t)INT32_MAX)
        return audit_fail(err, AUDIT_EUSAGE,
                          "synth: page_size %u: %llu physical pages x page_size exceed the int32 "
                          "index range (use fewer rows or a shorter length)",
                          page_size, (unsigned long long)entries);
    int status = allocate_scores(job, p->length, err);
    if (status < 0)
        return status;
    if ((status = add_param_number(job, KEY_PAGE_SIZE, page_size, err)) < 0 ||
        (status = add_param_number(job, "extra_pages", PAGED_EXTRA_PAGES, err)) < 0)
        return status;
    record->page_size = page_size;
    record->page_table_cols = columns;
    record->page_table = malloc((size_t)entries * sizeof(int32_t));
    record->page_table_row_starts = malloc((size_t)p->rows * sizeof(int32_t));
    if (!record->page_table || !record->page_table_row_starts)
        return audit_fail(err, AUDIT_ENOMEM, "synth: out of memory for the page table");
    for (uint64_t i = 0; i < entries; i++)
        record->page_table[i] = (int32_t)i;
    for (uint64_t i = 0; i + 1 < entries; i++) {
        const uint64_t j = i + rng_below(&job->record_rng, entries - i);
        const int32_t swapped = record->page_table[i];
        record->page_table[i] = record->page_table[j];
        record->page_table[j] = swapped;
    }
    for (uint32_t b = 0; b < p->rows; b++) {
        struct synth_rng rng;
        seed_row_stream(&rng, p->seed, b);
        record->page_table_row_starts[b] = (int32_t)rng_below(&rng, PAGED_EXTRA_PAGES + 1);
        uint32_t length = p->length;
        if (b % 2 == 1)
            length = (uint32_t)rng_below(&rng, (uint64_t)p->length + 1);
        record->lengths[b] = (int32_t)length;
        float *row = row_data(job, b);
        for (uint32_t i = 0; i < length; i++)
            row[i] = (float)(floor(synth_rng_normal(&rng) * 16.0) / 16.0);
    }
    return AUDIT_OK;
}

/* Signed zeros straddling the boundary. min(k/2, L) distinct positives 1.0 + i * 1e-3 rank
 * first; then +0.0, which ranks above -0.0 in the total order; the rest of the row is -0.0.
 * Even rows have min(k, room) +0.0 (boundary inside the +0.0 set: no -0.0 may be selected),
 * odd rows min(k/4, room) (boundary inside the -0.0 set: every +0.0 must be selected). A
 * backend that compares zeros as equal floats mixes the two. */
static int generate_signedzero(struct synth_job *job, struct audit_error *err)
{
    const struct synth_params *p = job->params;
    int status = allocate_scores(job, p->length, err);
    if (status < 0)
        return status;
    const uint32_t positives = p->k / 2 < p->length ? p->k / 2 : p->length;
    const uint32_t room = p->length - positives;
    for (uint32_t b = 0; b < p->rows; b++) {
        struct synth_rng rng;
        seed_row_stream(&rng, p->seed, b);
        const uint32_t wanted = b % 2 == 0 ? p->k : p->k / 4;
        const uint32_t positive_zeros = wanted < room ? wanted : room;
        float *row = row_data(job, b);
        choose_positions(&rng, job->positions, p->length, p->length);
        const int32_t *position = job->positions;
        for (uint32_t i = 0; i < positives; i++)
            row[*position++] = 1.0f + (float)i * 1e-3f;
        for (uint32_t i = 0; i < positive_zeros; i++)
            row[*position++] = 0.0f;
        for (uint32_t i = positives + positive_zeros; i < p->length; i++)
            row[*position++] = -0.0f;
    }
    return AUDIT_OK;
}

/* N(0,1) with NaNs: each score is +NaN with probability 1/32, -NaN with probability 1/32 and
 * +inf with probability 1/256. Half the NaNs are the default quiet NaN (so NaNs tie bit for
 * bit), half carry a random non-zero 23-bit payload (quiet or signalling). */
static int generate_nan(struct synth_job *job, struct audit_error *err)
{
    const struct synth_params *p = job->params;
    int status = allocate_scores(job, p->length, err);
    if (status < 0)
        return status;
    for (uint32_t b = 0; b < p->rows; b++) {
        struct synth_rng rng;
        seed_row_stream(&rng, p->seed, b);
        float *row = row_data(job, b);
        for (uint32_t i = 0; i < p->length; i++) {
            const double kind = synth_rng_uniform(&rng);
            if (kind < 2.0 / 32.0) {
                const uint32_t sign = kind < 1.0 / 32.0 ? 0 : UINT32_C(0x80000000);
                uint32_t payload = UINT32_C(0x400000);
                if (synth_rng_next(&rng) >> 63)
                    payload = 1 + (uint32_t)rng_below(&rng, UINT32_C(0x7FFFFF));
                row[i] = float_from_bits(sign | UINT32_C(0x7F800000) | payload);
            } else if (kind < 2.0 / 32.0 + 1.0 / 256.0) {
                row[i] = INFINITY;
            } else {
                row[i] = normal_float(&rng);
            }
        }
    }
    return AUDIT_OK;
}

/* Subnormals only: each score has a magnitude drawn from D = max(2, L / 8) evenly spread
 * subnormal mantissas (so each value repeats about 8 times and the boundary is a tie), negative
 * with probability 1/8. Flush-to-zero turns the whole row into one tie set. */
static int generate_subnormal(struct synth_job *job, struct audit_error *err)
{
    const struct synth_params *p = job->params;
    int status = allocate_scores(job, p->length, err);
    if (status < 0)
        return status;
    const uint64_t distinct = p->length / 8 > 2 ? p->length / 8 : 2;
    if ((status = add_param_number(job, "distinct", (double)distinct, err)) < 0)
        return status;
    for (uint32_t b = 0; b < p->rows; b++) {
        struct synth_rng rng;
        seed_row_stream(&rng, p->seed, b);
        float *row = row_data(job, b);
        for (uint32_t i = 0; i < p->length; i++) {
            const uint64_t level = rng_below(&rng, distinct);
            const uint32_t mantissa =
                1 + (uint32_t)(level * UINT64_C(0x7FFFFE) / (distinct - 1));
            const uint32_t sign = rng_below(&rng, 8) == 0 ? UINT32_C(0x80000000) : 0;
            row[i] = float_from_bits(sign | mantissa);
        }
    }
    return AUDIT_OK;
}

struct synth_family {
    const char *name;
    int (*generate)(struct synth_job *job, struct audit_error *err);
};

static const struct synth_family families[] = {
    { "plateau", generate_plateau },       { "tie", generate_tie },
    { "relu", generate_relu },             { "narrow", generate_narrow },
    { "indexer", generate_indexer },       { "random", generate_random },
    { "neginf", generate_neginf },         { "allequal", generate_allequal },
    { "short", generate_short },           { "offsets", generate_offsets },
    { "padded", generate_padded },         { "paged", generate_paged },
    { "signedzero", generate_signedzero }, { "nan", generate_nan },
    { "subnormal", generate_subnormal },
};

_Static_assert(sizeof(families) / sizeof(families[0]) ==
                   sizeof(synth_family_names) / sizeof(synth_family_names[0]) - 1,
               "every family has a name in synth_family_names and a generator");

static const struct synth_family *find_family(const char *name)
{
    for (size_t i = 0; i < sizeof(families) / sizeof(families[0]); i++)
        if (strcmp(families[i].name, name) == 0)
            return &families[i];
    return NULL;
}

static int check_common(const struct synth_params *params, struct audit_error *err)
{
    if (params->rows == 0 || params->rows > CAPTURE_MAX_ROWS)
        return audit_fail(err, AUDIT_EUSAGE, "synth: rows %u is outside [1, %u]", params->rows,
                          CAPTURE_MAX_ROWS);
    /* Length 0 is allowed: every row empty (all -1 output), the degenerate end of the range. */
    if (params->length > INT32_MAX)
        return audit_fail(err, AUDIT_EUSAGE, "synth: length %u exceeds %d", params->length,
                          INT32_MAX);
    if (params->k == 0 || params->k > CAPTURE_MAX_K)
        return audit_fail(err, AUDIT_EUSAGE, "synth: k %u is outside [1, %u]", params->k,
                          CAPTURE_MAX_K);
    if (params->seed > SYNTH_MAX_SEED)
        return audit_fail(err, AUDIT_EUSAGE,
                          "synth: seed %llu exceeds 2^53 (seeds travel as exact JSON numbers)",
                          (unsigned long long)params->seed);
    return AUDIT_OK;
}

static int build_metadata(const struct synth_params *params, cJSON *params_json,
                          char **text_out, struct audit_error *err)
{
    cJSON *metadata = cJSON_CreateObject();
    if (!metadata)
        return audit_fail(err, AUDIT_ENOMEM, "synth: out of memory for metadata");
    int status = AUDIT_ENOMEM;
    if (!cJSON_AddStringToObject(metadata, KEY_ENGINE, "synth") ||
        !cJSON_AddStringToObject(metadata, "family", params->family) ||
        !cJSON_AddNumberToObject(metadata, KEY_SEED, (double)params->seed) ||
        !cJSON_AddStringToObject(metadata, "generator", SYNTH_GENERATOR))
        goto error;
    cJSON_AddItemToObject(metadata, "params", params_json);
    *text_out = cJSON_PrintUnformatted(metadata);
    cJSON_Delete(metadata);
    if (!*text_out)
        return audit_fail(err, AUDIT_ENOMEM, "synth: out of memory for metadata");
    return AUDIT_OK;
error:
    cJSON_Delete(metadata);
    cJSON_Delete(params_json);
    return audit_fail(err, status, "synth: out of memory for metadata");
}

int synth_generate(const struct synth_params *params, struct capture_record *record,
                   struct audit_error *err)
{
    memset(record, 0, sizeof(*record));
    if (!params->family)
        return audit_fail(err, AUDIT_EUSAGE, "synth: family is missing");
    const struct synth_family *family = find_family(params->family);
    if (!family)
        return audit_fail(err, AUDIT_EUSAGE, "synth: family '%s' is unknown", params->family);
    int status = check_common(params, err);
    if (status < 0)
        return status;
    struct synth_job job = { .params = params, .record = record };
    synth_rng_seed(&job.record_rng, params->seed);
    job.params_json = cJSON_CreateObject();
    if (!job.params_json) {
        status = audit_fail(err, AUDIT_ENOMEM, "synth: out of memory for metadata");
        goto error;
    }
    if ((status = family->generate(&job, err)) < 0)
        goto error;
    status = build_metadata(params, job.params_json, &record->metadata_json, err);
    job.params_json = NULL; /* owned (and freed) by build_metadata */
    if (status < 0)
        goto error;
    free(job.positions);
    return AUDIT_OK;
error:
    cJSON_Delete(job.params_json);
    free(job.positions);
    capture_record_free(record);
    memset(record, 0, sizeof(*record));
    return status;
}
