/* The CUDA check macros of the GPU layer and of the host code that calls the CUDA runtime: a
 * failed call becomes AUDIT_EDEVICE with file, line, the call and the CUDA error in the caller's
 * struct audit_error, and the process goes on (never an abort). */
#ifndef DSATOPK_CUDA_CHECK_H
#define DSATOPK_CUDA_CHECK_H

#include <cuda_runtime_api.h>

#include "error.h"

/* Checks a CUDA call: on failure fills err with file, line, call and the CUDA error string and
 * returns AUDIT_EDEVICE from the enclosing function (which must return int). */
#define CUDA_TRY(call, err)                                                                   \
    do {                                                                                      \
        cudaError_t cuda_try_status_ = (call);                                                \
        if (cuda_try_status_ != cudaSuccess)                                                  \
            return audit_fail((err), AUDIT_EDEVICE, "%s:%d: %s: %s (%s)", __FILE__, __LINE__, \
                              #call, cudaGetErrorString(cuda_try_status_),                    \
                              cudaGetErrorName(cuda_try_status_));                            \
    } while (0)

/* The same, jumping to a cleanup label with status set (one cleanup path per function). */
#define CUDA_CHECK_GOTO(call, err, status, label)                                             \
    do {                                                                                      \
        cudaError_t cuda_check_status_ = (call);                                              \
        if (cuda_check_status_ != cudaSuccess) {                                              \
            (status) = audit_fail((err), AUDIT_EDEVICE, "%s:%d: %s: %s (%s)", __FILE__,       \
                                  __LINE__, #call, cudaGetErrorString(cuda_check_status_),    \
                                  cudaGetErrorName(cuda_check_status_));                      \
            goto label;                                                                       \
        }                                                                                     \
    } while (0)

#endif
