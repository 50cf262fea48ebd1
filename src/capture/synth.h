/* Synthetic captures of documented families from a seed, with a portable generator: the same
 * bytes on every machine (docs/SYNTH.md). */
#ifndef DSATOPK_SYNTH_H
#define DSATOPK_SYNTH_H

#include <stdint.h>

#include "capture.h"
#include "error.h"

struct synth_params {
    const char *family;  /* plateau, tie, relu, narrow, indexer, neginf, allequal, short,
                            offsets, padded, paged, random, signedzero, nan, subnormal */
    uint32_t rows;
    uint32_t length;     /* row length L */
    uint32_t k;
    uint64_t seed;
    /* family parameters (0 / defaults documented in docs/FORMAT.md) */
    uint32_t plateau_distinct;  /* plateau: m distinct positives */
    uint32_t tie_count;         /* tie: T exact ties straddling the boundary */
    uint32_t heads;             /* indexer: H */
    double rho, mu;             /* indexer: correlation and mean */
    uint32_t page_size;         /* paged: power of two (default 64) */
    uint32_t stride_pad;        /* padded: extra elements per row */
};

/* Fills *record (caller frees with capture_record_free). Unknown family or bad parameters:
 * AUDIT_EUSAGE naming the field. */
int synth_generate(const struct synth_params *params, struct capture_record *record,
                   struct audit_error *err);

/* Names of the families, NULL-terminated, for help text. */
extern const char *const synth_family_names[];

/* The portable generator, exposed for tests and for other commands that need random inputs. */
struct synth_rng { uint64_t state[4]; };
void synth_rng_seed(struct synth_rng *rng, uint64_t seed);
uint64_t synth_rng_next(struct synth_rng *rng);
double synth_rng_uniform(struct synth_rng *rng);   /* [0, 1) with 53 random bits */
double synth_rng_normal(struct synth_rng *rng);    /* N(0,1), bit-identical on every machine */

#endif
