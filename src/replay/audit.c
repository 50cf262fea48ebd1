/* The audit's entry (audit.h): the run from the device probe to the finished report, the stops
 * and messages every part of the engine reports through, and the exit code. */
#include "audit.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "audit_internal.h"
#include "document_context.h"
#include "json_util.h"

/* ---- stops, messages, interruption -------------------------------------------------------- */

/* A --devices pass after the first names its entry in what it says (its messages may come
 * between the first pass's, or from a process of its own). */
static void pass_prefix(const struct audit_state *state, char *prefix, size_t size)
{
    prefix[0] = '\0';
    if (state->pass.index > 0)
        snprintf(prefix, size, "--devices entry %zu (ordinal %d): ", state->pass.index,
                 state->pass.ordinal);
}

void audit_message(struct audit_state *state, enum audit_message_kind kind, const char *format,
                   ...)
{
    const struct audit_callbacks *callbacks = state->callbacks;
    char prefix[64];
    char text[AUDIT_ERROR_MESSAGE_BYTES + 128];
    va_list args;
    if (!callbacks->message)
        return;
    pass_prefix(state, prefix, sizeof(prefix));
    const size_t used = strlen(prefix);
    memcpy(text, prefix, used + 1);
    va_start(args, format);
    vsnprintf(text + used, sizeof(text) - used, format, args);
    va_end(args);
    callbacks->message(callbacks->user, kind, text);
}

void audit_progress_end(const struct audit_state *state)
{
    const struct audit_callbacks *callbacks = state->callbacks;
    if (callbacks->progress && callbacks->progress_end)
        callbacks->progress_end(callbacks->user);
}

/* The report's stop_reason: message, naming the --devices entry after the first. */
static void set_stop_reason(struct audit_state *state, const char *message)
{
    char prefix[64];
    pass_prefix(state, prefix, sizeof(prefix));
    snprintf(state->stop_reason, sizeof(state->stop_reason), "%s%s", prefix, message);
}

void audit_stop(struct audit_state *state, int status, const char *message)
{
    if (state->stopped)
        return;
    state->stopped = true;
    state->fatal_status = status;
    set_stop_reason(state, message);
    audit_message(state, AUDIT_MESSAGE_ERROR, "%s", message);
}

void audit_device_lost(struct audit_state *state, const char *message)
{
    if (state->device_failed)
        return;
    state->device_failed = true;
    set_stop_reason(state, message);
    audit_message(state, AUDIT_MESSAGE_ERROR, "%s; the remaining GPU work is skipped", message);
}

void audit_input_error(struct audit_state *state, const char *file, int64_t record,
                       int64_t offset, const char *kind, const char *message)
{
    struct audit_error err = { 0 };
    /* Every --devices pass reads the same inputs: the first pass reported their errors. */
    if (state->pass.index > 0)
        return;
    audit_progress_end(state);
    audit_message(state, AUDIT_MESSAGE_ERROR, "%s", message);
    if (strcmp(kind, "selection") == 0)
        state->bad_selection = true;
    else
        state->bad_input = true;
    if (report_add_input_error(&state->report, file, record, offset, kind, message, &err) < 0)
        audit_stop(state, err.code, err.message);
}

bool audit_check_interrupted(struct audit_state *state)
{
    const int sig = worker_stop_signal();
    if (!sig || state->stop_signal)
        return state->stop_signal != 0;
    char name[32];
    char message[96];
    state->stop_signal = sig;
    snprintf(message, sizeof(message), "interrupted by %s",
             worker_signal_name(sig, name, sizeof(name)));
    audit_progress_end(state);
    audit_stop(state, AUDIT_EFAILED, message);
    return true;
}

/* ---- the run -------------------------------------------------------------------------------- */

/* The report's context: the build and invocation (document_context.h), then the settings. The
 * device fields are filled by audit_open_device. */
static void fill_context(const struct audit_state *state, struct run_context *context)
{
    const struct audit_options *options = state->options;
    document_context_fill(&context->document, options->version_string, options->command_line);
    context->emulate_smem_per_sm = options->emulate_smem_per_sm;
    context->noise = noise_kind_name(options->noise);
    context->reps = options->reps;
    context->seed = options->seed;
    context->graph = options->graph;
    context->batch_invariance = options->batch_invariance;
    context->k_override = options->k_override;
    context->backends = state->backend_names;
    context->backend_count = options->backend_count;
    /* Dumps need every output whole, so they turn the pre-filter off (src/replay/replay.h). */
    context->gpu_prefilter = options->gpu_prefilter && !options->dump_dir;
}

/* The most severe outcome wins: 4 > 3 > 2 > 1 > 0, and an interruption over all (docs/REPORT.md
 * "Exit codes"). */
static int final_exit_code(const struct audit_state *state)
{
    int code = state->any_failure ? EXIT_AUDIT_FAILED : EXIT_AUDIT_OK;
    if (state->bad_selection && code < EXIT_USAGE)
        code = EXIT_USAGE;
    if (state->bad_input && code < EXIT_BAD_INPUT)
        code = EXIT_BAD_INPUT;
    if (state->device_failed)
        code = EXIT_DEVICE;
    if (state->stopped && audit_exit_code(state->fatal_status) > code)
        code = audit_exit_code(state->fatal_status);
    /* Interrupted: the shell's convention, 128 + the signal (130 SIGINT, 143 SIGTERM). */
    if (state->stop_signal)
        code = 128 + state->stop_signal;
    return code;
}

/* Probes the devices and opens the first pass's. 0, or a negative code with err filled and
 * *exit_code set. */
static int find_devices(struct audit_state *state, struct worker_keeper *probe_keeper,
                        struct run_context *context, int *exit_code, struct audit_error *err)
{
    int status = audit_probe_devices(state, probe_keeper, err);
    if (status == WORKER_STOPPED) {
        state->stop_signal = worker_stop_signal();
        *exit_code = 128 + state->stop_signal;
        return audit_fail(err, AUDIT_EFAILED, "interrupted while looking for devices");
    }
    if (status == AUDIT_OK)
        status = audit_resolve_devices(state, err);
    if (status == AUDIT_OK)
        status = audit_open_device(state, context, err);
    if (status < 0)
        *exit_code = audit_exit_code(status);
    return status;
}

/* A device that cannot be described skips the GPU work of its pass (the report says why). Each
 * worker opens the device itself. */
void audit_pass_select(struct audit_state *state, size_t pass)
{
    const int ordinal = state->devices[pass];
    /* The session worker replays on one device: the next record forks one for this pass's. */
    worker_session_stop(&state->pass.session);
    state->pass.index = pass;
    state->pass.ordinal = ordinal;
    state->pass.next_global_index = 0;
    state->pass.next_slot = 0;
    state->device_failed = false;
    if (!audit_probed_info(state, ordinal)) {
        char message[AUDIT_ERROR_MESSAGE_BYTES];
        snprintf(message, sizeof(message), "device %d: %.900s", ordinal,
                 state->probe.query_error[0] ? state->probe.query_error : "cannot be queried");
        audit_device_lost(state, message);
    }
}

void audit_pass_announce(struct audit_state *state, size_t pass, cJSON *devices)
{
    const struct audit_callbacks *callbacks = state->callbacks;
    const int ordinal = state->devices[pass];
    const struct gpu_device_info *info = audit_probed_info(state, ordinal);
    if (!audit_identify_pass(state, pass, ordinal, info, devices)) {
        audit_stop(state, AUDIT_ENOMEM, "out of memory describing a device");
        return;
    }
    if (callbacks->pass_start)
        callbacks->pass_start(callbacks->user, pass, ordinal, info);
}

/* --devices: the whole audit once per listed device; the first pass writes the records, the
 * later ones add their per_device[] entries. With pass processes (audit_passes.c) the later
 * passes run beside the first and are merged once it is done; otherwise one after another. */
static void run_passes(struct audit_state *state, const struct audit_inputs *inputs,
                       cJSON *devices)
{
    const struct audit_callbacks *callbacks = state->callbacks;
    const size_t passes = state->device_available && state->device_count ? state->device_count
                                                                          : 1;
    if (callbacks->pass_start && passes > 1 && state->pass.device_identity)
        callbacks->pass_start(callbacks->user, 0, state->devices[0],
                              audit_probed_info(state, state->devices[0]));
    for (size_t pass = 0; pass < passes && !state->stopped; pass++) {
        if (pass > 0) {
            audit_pass_select(state, pass);
            audit_pass_announce(state, pass, devices);
        }
        for (size_t i = 0; i < inputs->count && !state->stopped; i++)
            audit_run_file(state, inputs->paths[i]);
        state->any_device_lost = state->any_device_lost || state->device_failed;
        if (state->passes) {
            /* The other passes run in their own processes; this pass's CUDA context is not
             * needed while they finish. */
            worker_session_stop(&state->pass.session);
            break;
        }
    }
    if (state->passes)
        audit_passes_finish(state, devices);
    state->device_failed = state->any_device_lost;
    /* What the run says from here on is about the run, not a pass. */
    state->pass.index = 0;
    state->pass.ordinal = state->device;
}

/* The passes run at once unless --devices-sequential asks otherwise, when there are several and
 * a device to run them on. */
static bool passes_at_once(const struct audit_state *state)
{
    const struct audit_options *options = state->options;
    return options->devices_text && !options->devices_sequential && state->device_available &&
           state->device_count > 1 && !state->stopped;
}

int audit_run(const struct audit_options *options, const struct audit_callbacks *callbacks,
              struct audit_result *result, struct audit_error *err)
{
    static const struct audit_callbacks no_callbacks = { 0 };
    struct audit_state state = { 0 };
    struct run_context context = { 0 };
    struct audit_inputs inputs = { 0 };
    struct worker_keeper probe_keeper = { 0 }; /* the probe process, kept (audit_probe.c) */
    cJSON *devices = NULL; /* --devices: the device of each entry, for the cross_device block */
    int status;

    memset(result, 0, sizeof(*result));
    state.options = options;
    state.callbacks = callbacks ? callbacks : &no_callbacks;
    for (size_t i = 0; i < options->backend_count && i < AUDIT_MAX_BACKENDS; i++)
        state.backend_names[i] = options->backends[i]->name;
    worker_session_init(&state.pass.session, session_worker_job, session_worker_start, &state);
    fill_context(&state, &context);

    status = find_devices(&state, &probe_keeper, &context, &result->exit_code, err);
    if (status < 0)
        goto done;
    if (options->devices_text && !(devices = audit_devices_begin(&state))) {
        status = audit_fail(err, AUDIT_ENOMEM, "out of memory");
        result->exit_code = EXIT_DEVICE;
        goto done;
    }
    if ((status = report_begin(&state.report, &context, err)) < 0) {
        result->exit_code = EXIT_DEVICE;
        goto done;
    }
    result->report_ready = true;
    audit_inputs_expand(&state, &inputs);
    state.inputs = &inputs;
    /* The pass processes first: no thread exists yet, and no worker holds a CUDA context. */
    if (passes_at_once(&state) && audit_passes_start(&state) < 0)
        audit_stop(&state, AUDIT_ENOMEM, "out of memory starting the --devices passes");
    audit_add_scale_out_context(&state);
    /* The session worker now (the state it copies is complete): its CUDA start overlaps the
     * reading of the first record. A failed fork is tried again at the first record. */
    if (state.device_available && !state.device_failed) {
        struct audit_error ignored = { 0 };
        (void)worker_session_start(&state.pass.session, &ignored);
    }
    run_passes(&state, &inputs, devices);
    /* --records naming no record the inputs have selects nothing: a usage error, not an empty
     * report that passes. (A --shard that gets no record is fine: the records went to others.) */
    if (options->records && state.pass.next_global_index == 0 && !state.bad_input &&
        !state.stopped && !state.stop_signal) {
        char message[AUDIT_ERROR_MESSAGE_BYTES];
        snprintf(message, sizeof(message), "--records: no input has record %u%s: nothing was "
                 "selected", options->records[0], options->record_count > 1 ? " or the others "
                                                                              "listed" : "");
        audit_input_error(&state, NULL, -1, -1, "selection", message);
    }
    if (options->devices_text && !state.stopped && audit_add_cross_device(&state, devices) < 0)
        audit_stop(&state, AUDIT_ENOMEM, "out of memory comparing devices");

    result->exit_code = final_exit_code(&state);
    result->complete = !state.stopped && !state.device_failed;
    status = report_finish(&state.report, result->complete,
                           result->complete ? NULL : state.stop_reason, result->exit_code, err);
    if (status < 0) {
        result->report_ready = false;
        if (result->exit_code < EXIT_BAD_INPUT)
            result->exit_code = audit_exit_code(err->code);
    }
done:
    audit_passes_free(&state);
    worker_session_stop(&state.pass.session);
    worker_keeper_stop(&probe_keeper);
    if (result->report_ready)
        result->report = state.report;
    else
        report_release(&state.report);
    cJSON_Delete(state.pass.device_identity);
    cJSON_Delete(devices);
    audit_records_added_free(&state.added);
    audit_inputs_free(&inputs);
    return status < 0 ? status : AUDIT_OK;
}

void audit_result_release(struct audit_result *result)
{
    if (result->report_ready)
        report_release(&result->report);
    memset(result, 0, sizeof(*result));
}
