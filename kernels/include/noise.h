/* Noise on a sibling stream: work that competes with a replayed top-k for SMs, shared memory and
 * bandwidth (kernels/runtime/noise.cu, docs/REPORT.md). Plain C with extern "C" guards. */
#ifndef DSATOPK_NOISE_H
#define DSATOPK_NOISE_H

#include <cuda_runtime_api.h>

#include "error.h"

#ifdef __cplusplus
extern "C" {
#endif

enum noise_kind { NOISE_NONE, NOISE_GEMM, NOISE_MEM, NOISE_SPIN, NOISE_MIXED };
const char *noise_kind_name(enum noise_kind kind);
int noise_kind_parse(const char *text, enum noise_kind *kind);

struct noise_state; /* device buffers for the noise work */
int noise_create(struct noise_state **state, enum noise_kind kind, struct audit_error *err);
/* Enqueues one burst of noise (a few hundred microseconds of work) on stream. */
int noise_launch(struct noise_state *state, cudaStream_t stream, struct audit_error *err);
void noise_destroy(struct noise_state *state);

#ifdef __cplusplus
}
#endif

#endif
