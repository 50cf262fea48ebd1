/* The devices an audit replays on: a probe worker counts and describes them (the main process
 * must not initialise CUDA: a CUDA context does not survive fork, so even this runs in a child),
 * and the options choose among them. */
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "audit_internal.h"

/* Why there is no device, in the words a user acts on. The CUDA runtime reports a machine
 * without the driver library as "CUDA driver version is insufficient for CUDA runtime version",
 * the same words as a driver that is too old; whether libcuda can be loaded tells the two apart
 * (loading it initialises nothing). why: the probe's text, "MESSAGE (cudaErrorName)". */
static void no_device_reason(const char *why, char *reason, size_t size)
{
    const bool no_driver_library =
        strstr(why, "(cudaErrorInsufficientDriver)") || strstr(why, "(cudaErrorStubLibrary)");
    if (no_driver_library) {
        void *driver = dlopen("libcuda.so.1", RTLD_LAZY | RTLD_LOCAL);
        if (!driver) {
            snprintf(reason, size, "no NVIDIA driver found (libcuda.so.1 cannot be loaded)");
            return;
        }
        dlclose(driver);
        snprintf(reason, size, "the NVIDIA driver is older than this build's CUDA runtime "
                               "(%.400s): no CUDA device can be used", why);
        return;
    }
    /* kernels/runtime/device.cu says "the CUDA driver reports no devices" when the count is
     * zero. */
    if (!why[0] || strstr(why, "(cudaErrorNoDevice)") || strstr(why, "reports no devices")) {
        snprintf(reason, size, "no CUDA device (the NVIDIA driver reports none)");
        return;
    }
    snprintf(reason, size, "no CUDA device: %.400s", why);
}

/* The probe worker: device count and every device's description, in one message. */
static int probe_worker_main(struct worker_channel *channel, size_t first, void *user)
{
    const struct audit_options *options = ((const struct audit_state *)user)->options;
    struct audit_probe *probe = calloc(1, sizeof(*probe));
    (void)first;
    if (!probe)
        return 3;
    gpu_device_count(&probe->count, probe->why, sizeof(probe->why));
    for (int i = 0; i < probe->count && i < AUDIT_MAX_DEVICES; i++) {
        struct audit_error err = { 0 };
        probe->queried[i] = gpu_device_query(i, (size_t)options->emulate_smem_per_sm,
                                             &probe->info[i], &err) == 0;
        if (!probe->queried[i] && !probe->query_error[0])
            snprintf(probe->query_error, sizeof(probe->query_error), "%s", err.message);
    }
    int status = worker_send(channel, probe, sizeof(*probe)) < 0 ? 2 : 0;
    free(probe);
    return status;
}

static int on_probe_result(void *user, size_t task, const struct worker_event *event)
{
    struct audit_probe *probe = &((struct audit_state *)user)->probe;
    (void)task;
    if (event->outcome == WORKER_MESSAGE && event->bytes == sizeof(*probe)) {
        memcpy(probe, event->data, sizeof(*probe));
        return AUDIT_OK;
    }
    probe->count = 0;
    snprintf(probe->why, sizeof(probe->why), "the device probe %s",
             event->outcome == WORKER_MESSAGE ? "sent a malformed answer" : event->description);
    return AUDIT_OK;
}

/* The probe's process stays until the end of the run (keeper): with the CUDA driver initialised
 * there, each record's worker starts CUDA about 90 ms sooner (cuInit 100 -> 10 ms on the H200;
 * docs/PERF.md "The audit itself"). */
int audit_probe_devices(struct audit_state *state, struct worker_keeper *keeper,
                        struct audit_error *err)
{
    memset(&state->probe, 0, sizeof(state->probe));
    return worker_keeper_start(keeper, probe_worker_main, on_probe_result, state,
                               state->options->timeout_ms, err);
}

const struct gpu_device_info *audit_probed_info(const struct audit_state *state, int ordinal)
{
    if (ordinal < 0 || ordinal >= AUDIT_MAX_DEVICES || ordinal >= state->probe.count ||
        !state->probe.queried[ordinal])
        return NULL;
    return &state->probe.info[ordinal];
}

/* Without any device the list stays as given (the run reports it unavailable). */
int audit_resolve_devices(struct audit_state *state, struct audit_error *err)
{
    const struct audit_options *options = state->options;
    const int count = state->probe.count;
    state->device = options->device;
    if (!options->devices_text)
        return AUDIT_OK;
    state->device_count = 0;
    if (options->all_devices) {
        for (int i = 0; i < count && i < AUDIT_MAX_DEVICES; i++)
            state->devices[state->device_count++] = i;
    } else {
        for (size_t i = 0; i < options->device_count && i < AUDIT_MAX_DEVICES; i++)
            state->devices[state->device_count++] = options->devices[i];
    }
    for (size_t i = 0; count > 0 && i < state->device_count; i++)
        if (state->devices[i] >= count)
            return audit_fail(err, AUDIT_EUSAGE, "--devices: ordinal %d: this machine has %d "
                                                 "CUDA device(s)", state->devices[i], count);
    if (state->device_count > 0)
        state->device = state->devices[0];
    return AUDIT_OK;
}

int audit_open_device(struct audit_state *state, struct run_context *context,
                      struct audit_error *err)
{
    const struct audit_probe *probe = &state->probe;
    const int device = state->device;
    if (probe->count == 0) {
        state->device_available = false;
        no_device_reason(probe->why, state->unavailable_reason,
                         sizeof(state->unavailable_reason));
        snprintf(context->device_unavailable_reason, sizeof(context->device_unavailable_reason),
                 "%s", state->unavailable_reason);
        audit_message(state, AUDIT_MESSAGE_NOTICE, "%s; the census, the reference hashes and "
                                                   "the engine's recorded selections are still "
                                                   "judged on the CPU, the GPU backends are "
                                                   "reported unavailable",
                      state->unavailable_reason);
        return AUDIT_OK;
    }
    if (device >= probe->count)
        return audit_fail(err, AUDIT_EUSAGE, "--device %d: this machine has %d CUDA device(s)",
                          device, probe->count);
    state->device_available = true;
    state->pass.ordinal = device;
    if (device >= AUDIT_MAX_DEVICES || !probe->queried[device]) {
        /* A device that is there but cannot be described stops every GPU step. */
        char message[AUDIT_ERROR_MESSAGE_BYTES];
        snprintf(message, sizeof(message), "device %d: %.900s", device,
                 probe->query_error[0] ? probe->query_error : "cannot be queried");
        snprintf(context->device_unavailable_reason, sizeof(context->device_unavailable_reason),
                 "%s", message);
        audit_device_lost(state, message);
        return AUDIT_OK;
    }
    context->device_available = true;
    context->device = probe->info[device];
    return AUDIT_OK;
}
