/* Faulty plugin for the reliability tests (docs/RELIABILITY.md): never finishes.
 *
 * By default its kernel spins forever (it waits for a flag nothing sets): the launch returns,
 * the caller's synchronisation never does, and only the watchdog (killing the worker process,
 * which makes the driver tear its context down) ends it. With DSATOPK_PLUGIN_HANG=host in the
 * environment, launch() itself sleeps forever on the host instead, before enqueuing anything. */
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include <cuda_runtime.h>
#include <unistd.h>

#include "plugin.h"

static __device__ int hang_release_flag; /* never set */

static __global__ void k_spin_forever(int32_t *out)
{
    while (*reinterpret_cast<volatile int *>(&hang_release_flag) == 0)
        __nanosleep(100000);
    out[0] = -1; /* unreachable; keeps the loop meaningful */
}

static int hang_supports(const dsatopk_plugin_device *, const dsatopk_plugin_shape *, char *,
                         size_t)
{
    return 1;
}

static int hang_launch(const dsatopk_plugin_problem *problem, const dsatopk_plugin_device *,
                       void *stream, char *error, size_t error_bytes)
{
    const char *where = getenv("DSATOPK_PLUGIN_HANG");
    if (where && strcmp(where, "host") == 0)
        for (;;)
            pause(); /* until a signal ends the process */
    k_spin_forever<<<1, 1, 0, static_cast<cudaStream_t>(stream)>>>(problem->out);
    cudaError_t status = cudaGetLastError();
    if (status != cudaSuccess) {
        snprintf(error, error_bytes, "k_spin_forever launch: %s", cudaGetErrorString(status));
        return 1;
    }
    return 0;
}

static const dsatopk_plugin hang_plugin = {
    DSATOPK_PLUGIN_ABI_VERSION,
    "faulty-hang",
    "faulty test plugin: its kernel never ends (DSATOPK_PLUGIN_HANG=host: launch never returns)",
    "not_guaranteed",
    0, 0, 0, 0,
    "test plugin only",
    hang_supports,
    nullptr,
    hang_launch,
};

extern "C" DSATOPK_PLUGIN_EXPORT const dsatopk_plugin *dsatopk_plugin_entry(void)
{
    return &hang_plugin;
}
