/* Host-only plugins for tests/test_plugin.c: no CUDA, so the loader's checks and the adapter can
 * be tested on a machine without a GPU. One source, built several times by tests/plugins/
 * meson.build with one HOST_PLUGIN_* macro each:
 *   HOST_PLUGIN_GOOD         valid; launch() records what it was given (host_plugin_last) and
 *                            fails with a message when k is 13; supports() refuses k > 1000
 *   HOST_PLUGIN_NO_ENTRY     exports no dsatopk_plugin_entry
 *   HOST_PLUGIN_NULL_ENTRY   dsatopk_plugin_entry returns NULL
 *   HOST_PLUGIN_ABI          abi_version 2
 *   HOST_PLUGIN_NULL_SUPPORTS / HOST_PLUGIN_NULL_LAUNCH   a required callback is NULL
 *   HOST_PLUGIN_NULL_NAME    name is NULL
 *   HOST_PLUGIN_CLASH        named "radix", a built-in backend
 *   HOST_PLUGIN_BAD_NAME     a name with a comma
 *   HOST_PLUGIN_BAD_LEVEL    level "deterministic"
 *   HOST_PLUGIN_BAD_CLAIM    exact_set 2
 *   HOST_PLUGIN_GPU_TO_GPU   level gpu_to_gpu without canonical_order
 *   HOST_PLUGIN_TWO_ORDERS   canonical_order and index_ascending both 1
 *   HOST_PLUGIN_BAD_SUPPORTS supports() answers 7 and writes no reason
 *   HOST_PLUGIN_ENV_NAME     named by $HOST_PLUGIN_NAME at each dsatopk_plugin_entry() call, so
 *                            that one file can fill every slot of the loader
 *   HOST_PLUGIN_CRASH        "faulty-crash": launch() writes through a NULL pointer (SIGSEGV in
 *                            the host process), the crash fault of docs/RELIABILITY.md
 *   HOST_PLUGIN_OOM          "faulty-oom": scratch_bytes() asks for 1 TiB (HOST_PLUGIN_OOM_BYTES),
 *                            more device memory than any GPU has: the caller's cudaMalloc fails
 *                            with cudaErrorMemoryAllocation before launch() is ever called, the
 *                            out-of-memory fault of docs/RELIABILITY.md */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "plugin.h"

#ifndef HOST_PLUGIN_NAME
#define HOST_PLUGIN_NAME "host-good"
#endif

/* 2^40 bytes: no GPU has a terabyte of device memory (an H200 has 141 GB). */
#define HOST_PLUGIN_OOM_BYTES ((uint64_t)1 << 40)

/* What the last launch received (the test looks it up with dlsym). */
DSATOPK_PLUGIN_EXPORT struct dsatopk_plugin_problem host_plugin_last_problem;
DSATOPK_PLUGIN_EXPORT struct dsatopk_plugin_device host_plugin_last_device;
DSATOPK_PLUGIN_EXPORT void *host_plugin_last_stream;
DSATOPK_PLUGIN_EXPORT int host_plugin_launches;

__attribute__((unused)) static int host_supports(const struct dsatopk_plugin_device *device,
                         const struct dsatopk_plugin_shape *shape, char *reason,
                         size_t reason_bytes)
{
    (void)device;
#ifdef HOST_PLUGIN_BAD_SUPPORTS
    (void)shape;
    (void)reason;
    (void)reason_bytes;
    return 7;
#else
    if (shape->k > 1000) {
        snprintf(reason, reason_bytes, "k %u > 1000", shape->k);
        return 0;
    }
    return 1;
#endif
}

static uint64_t host_scratch_bytes(const struct dsatopk_plugin_device *device,
                                   const struct dsatopk_plugin_shape *shape)
{
    (void)device;
#ifdef HOST_PLUGIN_OOM
    (void)shape;
    return HOST_PLUGIN_OOM_BYTES;
#else
    return (uint64_t)shape->rows * 64;
#endif
}

__attribute__((unused)) static int host_launch(const struct dsatopk_plugin_problem *problem,
                       const struct dsatopk_plugin_device *device, void *stream, char *error,
                       size_t error_bytes)
{
    host_plugin_last_problem = *problem;
    host_plugin_last_device = *device;
    host_plugin_last_stream = stream;
    host_plugin_launches++;
#ifdef HOST_PLUGIN_CRASH
    volatile int *nowhere = NULL;
    *nowhere = 1;
#endif
    if (problem->shape.k == 13) {
        snprintf(error, error_bytes, "k 13 is unlucky");
        return 5;
    }
    return 0;
}

/* "unused": some builds leave out the entry point or a callback on purpose. */
__attribute__((unused)) static const struct dsatopk_plugin host_plugin = {
#ifdef HOST_PLUGIN_ABI
    2u,
#else
    DSATOPK_PLUGIN_ABI_VERSION,
#endif
#if defined(HOST_PLUGIN_NULL_NAME)
    NULL,
#elif defined(HOST_PLUGIN_CLASH)
    "radix",
#elif defined(HOST_PLUGIN_BAD_NAME)
    "my,plugin",
#else
    HOST_PLUGIN_NAME,
#endif
    "host-only test plugin",
#if defined(HOST_PLUGIN_BAD_LEVEL)
    "deterministic",
#elif defined(HOST_PLUGIN_GPU_TO_GPU)
    "gpu_to_gpu",
#else
    "run_to_run",
#endif
#ifdef HOST_PLUGIN_BAD_CLAIM
    2,
#else
    1,
#endif
    1,
#ifdef HOST_PLUGIN_TWO_ORDERS
    1,
#else
    0,
#endif
    1,
    "k <= 1000",
#ifdef HOST_PLUGIN_NULL_SUPPORTS
    NULL,
#else
    host_supports,
#endif
    host_scratch_bytes,
#ifdef HOST_PLUGIN_NULL_LAUNCH
    NULL,
#else
    host_launch,
#endif
};

#ifdef HOST_PLUGIN_NO_ENTRY
DSATOPK_PLUGIN_EXPORT const struct dsatopk_plugin *dsatopk_plugin_entry_misspelled(void);
DSATOPK_PLUGIN_EXPORT const struct dsatopk_plugin *dsatopk_plugin_entry_misspelled(void)
{
    return &host_plugin;
}
#else
DSATOPK_PLUGIN_EXPORT const struct dsatopk_plugin *dsatopk_plugin_entry(void);
DSATOPK_PLUGIN_EXPORT const struct dsatopk_plugin *dsatopk_plugin_entry(void)
{
#ifdef HOST_PLUGIN_NULL_ENTRY
    return NULL;
#elif defined(HOST_PLUGIN_ENV_NAME)
    static char name[64];
    static struct dsatopk_plugin renamed;
    snprintf(name, sizeof(name), "%s", getenv("HOST_PLUGIN_NAME") ? getenv("HOST_PLUGIN_NAME")
                                                                    : "host-env");
    renamed = host_plugin;
    renamed.name = name;
    return &renamed;
#else
    return &host_plugin;
#endif
}
#endif
