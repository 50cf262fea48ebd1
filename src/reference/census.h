/* Score census: what the scores say about how determined a top-k selection is, before any
 * kernel runs (docs/REFERENCE.md). */
#ifndef DSATOPK_CENSUS_H
#define DSATOPK_CENSUS_H

#include <stdbool.h>
#include <stdint.h>

#include "capture.h"
#include "error.h"

struct cJSON;

/* Staging capacities of the radix-select families whose overflow the census predicts. */
#define CENSUS_RADIX_STAGING 4096u
#define CENSUS_FILTERED_STAGING 16384u

/* Per row, for one k. Counts are over the row's window (candidates exclude exact -inf). */
struct census_row {
    int32_t length;
    int64_t candidates;       /* length minus exact -inf */
    int64_t zeros;            /* exact +0.0 or -0.0 */
    int64_t neg_inf, nan, subnormal;
    bool short_row;           /* candidates <= k: everything selected, no boundary */
    float boundary;           /* k-th ranked value (valid when !short_row) */
    float next_below;         /* (k+1)-th ranked value (valid when candidates > k) */
    double boundary_gap;      /* boundary - next_below as a double; 0 when they tie */
    int64_t tie_set;          /* candidates whose bits equal the boundary's */
    int64_t above;            /* candidates ranking strictly above the boundary */
    bool underdetermined;     /* tie_set > 1 && above + tie_set > k */
    bool zero_boundary;       /* boundary is exact 0.0 (either sign) */
    int64_t coarse_bin_count; /* candidates in the coarse (fp16 top byte) bin of the boundary */
    bool radix_overflow;      /* coarse_bin_count > CENSUS_RADIX_STAGING */
    bool filtered_overflow;   /* coarse_bin_count > CENSUS_FILTERED_STAGING */
};

/* The coarse 8-bit bin the radix-select families put a value in: the top byte of the value's
 * fp16 conversion mapped to an order-preserving key (larger bin ranks first). */
uint8_t census_coarse_bin(float value);

int census_row_compute(const float *window, int32_t length, uint32_t k, struct census_row *out);

/* Census of a whole record for every k in ks (k == 0 entries mean the record's own k), as a
 * cJSON object (schema in docs/REFERENCE.md "Record census (JSON)"). rows_out, if not NULL, receives a malloc'ed array of
 * record->rows census_row for ks[0] (the caller frees it). */
int census_record_json(const struct capture_record *record, const uint32_t *ks, size_t k_count,
                       struct cJSON **json_out, struct census_row **rows_out,
                       struct audit_error *err);

#endif
