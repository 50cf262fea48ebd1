/* The inputs of an audit and its record loop: which capture files, which of their records, and
 * the main process's side of one record (its reference hashes and census, its backends handed
 * to a worker, its entries into the report). */
#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "audit_internal.h"
#include "census.h"
#include "record_wire.h"

/* ---- inputs --------------------------------------------------------------------------------- */

static int inputs_add(struct audit_inputs *list, const char *path)
{
    if (list->count == list->capacity) {
        size_t capacity = list->capacity ? 2 * list->capacity : 16;
        char **grown = realloc(list->paths, capacity * sizeof(char *));
        if (!grown)
            return AUDIT_ENOMEM;
        list->paths = grown;
        list->capacity = capacity;
    }
    list->paths[list->count] = strdup(path);
    if (!list->paths[list->count])
        return AUDIT_ENOMEM;
    list->count++;
    return AUDIT_OK;
}

void audit_inputs_free(struct audit_inputs *inputs)
{
    for (size_t i = 0; i < inputs->count; i++)
        free(inputs->paths[i]);
    free(inputs->paths);
    memset(inputs, 0, sizeof(*inputs));
}

static int compare_strings(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

/* A directory contributes its *.bin files in name order; anything else is taken as a file (a
 * missing one is reported when it is opened). */
static int expand_path(struct audit_inputs *list, const char *path, struct audit_error *err)
{
    struct stat info;
    if (stat(path, &info) != 0 || !S_ISDIR(info.st_mode))
        return inputs_add(list, path) < 0
                   ? audit_fail(err, AUDIT_ENOMEM, "out of memory listing inputs")
                   : AUDIT_OK;
    DIR *directory = opendir(path);
    if (!directory)
        return audit_fail(err, AUDIT_EIO, "%s: cannot list: %s", path, strerror(errno));
    int status = AUDIT_OK;
    size_t first = list->count;
    struct dirent *entry;
    while ((entry = readdir(directory)) != NULL) {
        size_t length = strlen(entry->d_name);
        if (length < 5 || strcmp(entry->d_name + length - 4, ".bin") != 0)
            continue;
        char joined[4096];
        size_t path_length = strlen(path);
        bool slash = path_length > 0 && path[path_length - 1] == '/';
        if (snprintf(joined, sizeof(joined), "%s%s%s", path, slash ? "" : "/", entry->d_name) >=
            (int)sizeof(joined)) {
            status = audit_fail(err, AUDIT_EIO, "%s/%s: path too long", path, entry->d_name);
            break;
        }
        if (inputs_add(list, joined) < 0) {
            status = audit_fail(err, AUDIT_ENOMEM, "out of memory listing %s", path);
            break;
        }
    }
    closedir(directory);
    if (status == AUDIT_OK && list->count == first)
        status = audit_fail(err, AUDIT_EIO, "%s: no .bin capture files in this directory", path);
    if (status == AUDIT_OK)
        qsort(list->paths + first, list->count - first, sizeof(char *), compare_strings);
    return status;
}

void audit_inputs_expand(struct audit_state *state, struct audit_inputs *inputs)
{
    const struct audit_options *options = state->options;
    struct audit_error err = { 0 };
    if (options->input_count == 0 && expand_path(inputs, AUDIT_DEFAULT_CAPTURES, &err) < 0)
        audit_input_error(state, AUDIT_DEFAULT_CAPTURES, -1, -1, "io", err.message);
    for (size_t i = 0; i < options->input_count && !state->stopped &&
                       !audit_check_interrupted(state);
         i++) {
        if (expand_path(inputs, options->inputs[i], &err) < 0) {
            if (err.code == AUDIT_ENOMEM)
                audit_stop(state, err.code, err.message);
            else
                audit_input_error(state, options->inputs[i], -1, -1, "io", err.message);
        }
    }
}

/* "captures/plateau-64x32768.bin" -> "plateau-64x32768" (dump file names). */
static void file_stem(const char *path, char *stem, size_t size)
{
    const char *slash = strrchr(path, '/');
    snprintf(stem, size, "%s", slash ? slash + 1 : path);
    char *dot = strrchr(stem, '.');
    if (dot && dot != stem)
        *dot = '\0';
}

static bool list_contains(const uint32_t *sorted, size_t count, uint32_t value)
{
    size_t low = 0, high = count;
    while (low < high) {
        size_t middle = low + (high - low) / 2;
        if (sorted[middle] == value)
            return true;
        if (sorted[middle] < value)
            low = middle + 1;
        else
            high = middle;
    }
    return false;
}

/* ---- one record ----------------------------------------------------------------------------- */

/* Runs every backend of the record in worker processes; entries and table lines are filled for
 * the backends that got an outcome. */
static void run_backends(struct audit_state *state, struct record_job *job)
{
    const struct audit_options *options = state->options;
    const struct record_result *base = job->base;
    struct audit_error err = { 0 };
    size_t bytes = 0;
    int status, file = -1;
    void *wire = record_wire_encode(base->record, base->k, base->file, job->replay->dump_stem,
                                    &bytes);
    if (wire) {
        status = worker_session_run_job(&state->pass.session, wire, bytes,
                                        options->backend_count, record_on_result, job,
                                        options->timeout_ms, &err);
        free(wire);
    } else if ((file = record_wire_encode_file(base->record, base->k, base->file,
                                               job->replay->dump_stem, &bytes)) >= 0) {
        /* Too big for the socket: the session worker maps it, and keeps its CUDA context. */
        status = worker_session_run_job_file(&state->pass.session, file, bytes,
                                             options->backend_count, record_on_result, job,
                                             options->timeout_ms, &err);
        close(file);
    } else {
        /* No memory even for that: a worker forked for this record sees it where it is. */
        status = worker_run_tasks(options->backend_count, record_worker_main, record_on_result,
                                  job, options->timeout_ms, NULL, &err);
    }
    if (status == WORKER_STOPPED)
        audit_check_interrupted(state);
    else if (status < 0 && !state->stopped && !state->device_failed)
        audit_stop(state, status, err.message);
}

/* The record's place in the report, and its table lines for the front (job->table_lines has a
 * slot past the backends' for the engine's). */
static int add_to_report(struct audit_state *state, const struct record_result *result,
                         const struct record_job *job, uint64_t global_index,
                         struct audit_error *err)
{
    const struct audit_callbacks *callbacks = state->callbacks;
    size_t count = state->options->backend_count;
    for (size_t i = 0; i < count; i++)
        if (job->failed[i])
            state->any_failure = true;
    if (result->engine && result->engine->verdict.verdict == VERDICT_FAIL)
        state->any_failure = true;
    int status;
    if (state->pass_channel) /* a pass process: the main process merges it */
        status = audit_pass_send_record(state, result, job, err);
    else if (state->pass.index == 0)
        status = audit_add_record(state, result, job->entries, global_index, err);
    else
        status = audit_add_device_pass(state, result, job->entries, err);
    if (status < 0)
        return status;
    audit_progress_end(state);
    if (state->pass_channel)
        return AUDIT_OK; /* its table lines went with its entries */
    if (result->engine) {
        size_t bytes = 0;
        FILE *stream = open_memstream(&job->table_lines[count], &bytes);
        if (stream) {
            report_table_engine_lines(stream, result);
            fclose(stream);
        }
        count += job->table_lines[count] != NULL;
    }
    if (callbacks->record_done)
        callbacks->record_done(callbacks->user, state->pass.index,
                               (const char *const *)job->table_lines, count);
    return AUDIT_OK;
}

/* prepare_record: the record is invalid, and reported as an input error. */
#define RECORD_INVALID 1

/* The record's CPU side: its checks (with the reference) and its census. Returns 0,
 * RECORD_INVALID, or a fatal code with err filled. */
static int prepare_record(struct audit_state *state, const char *file,
                          const struct capture_record *record,
                          const struct capture_record *replayed, uint32_t k,
                          struct check_context *checks, bool *checks_ready, cJSON **census,
                          struct census_row **census_rows, struct record_time *time,
                          struct audit_error *err)
{
    double started_ms = report_monotonic_ms();
    int status = checks_prepare(checks, replayed, k, err);
    time->reference_ms += report_monotonic_ms() - started_ms;
    if (status == AUDIT_OK) {
        *checks_ready = true;
        started_ms = report_monotonic_ms();
        status = census_record_json(replayed, &k, 1, census, census_rows, err);
        time->census_ms = report_monotonic_ms() - started_ms;
    }
    if (status != AUDIT_EDATA)
        return status;
    audit_error_prefix(err, "%s record %u", file, record->index);
    audit_input_error(state, file, record->index, (int64_t)record->file_offset, "invalid",
                      err->message);
    return RECORD_INVALID;
}

/* CPU side (reference hashes, census) always; GPU side per backend when a device is usable. */
static void run_record(struct audit_state *state, const char *file, const char *stem,
                       const struct capture_record *record, uint64_t global_index)
{
    const struct audit_options *options = state->options;
    struct audit_error err = { 0 };
    struct capture_record narrowed = { 0 };
    const struct capture_record *replayed = record;
    struct check_context checks;
    bool checks_ready = false;
    cJSON *census = NULL;
    struct census_row *census_rows = NULL;
    struct engine_result engine = { 0 };
    cJSON **entries = NULL;
    char **table_lines = NULL;
    bool *failed = NULL;
    int status;
    const double started_ms = report_monotonic_ms();
    struct record_time time = { 0 };

    memset(&checks, 0, sizeof(checks));
    if (options->rows) {
        status = replay_subrecord(record, options->rows, (uint32_t)options->row_count, &narrowed,
                                  &err);
        if (status == AUDIT_EUSAGE) {
            audit_error_prefix(&err, "%s: --rows", file);
            audit_input_error(state, file, record->index, (int64_t)record->file_offset,
                              "selection", err.message);
            goto done;
        }
        if (status < 0)
            goto fatal;
        replayed = &narrowed;
    }
    const uint32_t k = options->k_override ? options->k_override : replayed->k;
    status = prepare_record(state, file, record, replayed, k, &checks, &checks_ready, &census,
                            &census_rows, &time, &err);
    if (status == RECORD_INVALID)
        goto done;
    if (status < 0)
        goto fatal;

    struct record_result result = {
        .file = file,
        .record = replayed,
        .k = k,
        .source_rows = options->rows,
        .census = census,
        .census_rows = census_rows,
        .backend_count = 0, /* the backends' entries are built by the workers */
    };
    double phase_started_ms = report_monotonic_ms();
    status = record_reference_hashes(&checks, replayed, k, &result, &err);
    if (status < 0)
        goto fatal;
    /* The engine's own selection is the record's, judged once (in the first device pass). */
    if (replayed->engine_indices && state->pass.index == 0) {
        status = engine_result_judge(&engine, replayed, &checks, options->engine_contract,
                                     options->rows, &err);
        if (status < 0)
            goto fatal;
        result.engine = &engine;
    }
    time.reference_ms += report_monotonic_ms() - phase_started_ms;
    entries = calloc(options->backend_count, sizeof(*entries));
    /* One more slot: the engine's lines. */
    table_lines = calloc(options->backend_count + 1, sizeof(*table_lines));
    failed = calloc(options->backend_count, sizeof(*failed));
    if (!entries || !table_lines || !failed) {
        status = audit_fail(&err, AUDIT_ENOMEM, "out of memory for the backend results");
        goto fatal;
    }

    const struct replay_options replay_options = record_replay_options(state, file, stem,
                                                                       record->index);
    state->progress_file = file;
    state->progress_record = record->index;
    struct record_job job = {
        .state = state,
        .base = &result,
        .checks = &checks,
        .replay = &replay_options,
        .entries = entries,
        .table_lines = table_lines,
        .failed = failed,
    };
    /* Without a device nothing is forked; otherwise each backend replays in a worker. */
    phase_started_ms = report_monotonic_ms();
    if (state->device_available && !state->device_failed && !state->stopped)
        run_backends(state, &job);
    time.backends_ms = report_monotonic_ms() - phase_started_ms;
    audit_progress_end(state);
    for (size_t i = 0; i < options->backend_count; i++) {
        if (entries[i])
            continue;
        if (record_missing_entry(&job, i) < 0) {
            status = audit_fail(&err, AUDIT_ENOMEM, "out of memory reporting %s record %u", file,
                                record->index);
            goto fatal;
        }
    }
    time.total_ms = report_monotonic_ms() - started_ms;
    result.time = time;
    status = add_to_report(state, &result, &job, global_index, &err);
    if (status < 0)
        goto fatal;
    goto done;
fatal:
    audit_stop(state, status, err.message);
done:
    for (size_t i = 0; entries && i < options->backend_count; i++)
        cJSON_Delete(entries[i]);
    for (size_t i = 0; table_lines && i <= options->backend_count; i++)
        free(table_lines[i]);
    engine_result_release(&engine);
    free(entries);
    free(table_lines);
    free(failed);
    cJSON_Delete(census);
    free(census_rows);
    if (checks_ready)
        checks_release(&checks);
    if (replayed == &narrowed)
        capture_record_free(&narrowed);
}

/* ---- one capture file ----------------------------------------------------------------------- */

void audit_run_file(struct audit_state *state, const char *path)
{
    const struct audit_options *options = state->options;
    struct capture_reader *reader = NULL;
    struct audit_error err = { 0 };
    uint32_t next_index = 0;
    uint64_t next_offset = 0;
    char stem[256];
    file_stem(path, stem, sizeof(stem));
    if (state->device_count > 1) {
        /* --devices: each pass dumps under its own name (<stem>-dev<entry>-r<record>-...). */
        size_t used = strlen(stem);
        snprintf(stem + used, sizeof(stem) - used, "-dev%zu", state->pass.index);
    }
    int status = capture_open(&reader, path, &err);
    if (status < 0) {
        if (status == AUDIT_ENOMEM)
            audit_stop(state, status, err.message);
        else
            audit_input_error(state, path, -1, -1, "io", err.message);
        return;
    }
    while (!state->stopped && !audit_check_interrupted(state)) {
        struct capture_record record;
        status = capture_read_record(reader, &record, &err);
        if (status == 0)
            break;
        if (status < 0) {
            enum capture_read_state read_state = capture_reader_state(reader);
            const char *kind = status == AUDIT_EDATA && read_state == CAPTURE_READ_TRUNCATED
                                   ? "truncated"
                               : status == AUDIT_EDATA ? "corrupt"
                                                       : "io";
            if (status == AUDIT_ENOMEM)
                audit_stop(state, status, err.message);
            else
                audit_input_error(state, path, next_index, (int64_t)next_offset, kind,
                                  err.message);
            break;
        }
        next_index = record.index + 1;
        next_offset = capture_record_end_offset(&record);
        if (!options->records || list_contains(options->records, options->record_count,
                                               record.index)) {
            /* --shard numbers the records the run selects, across the inputs in order. */
            const uint64_t global_index = state->pass.next_global_index++;
            if (options->shard_count == 0 || global_index % options->shard_count ==
                                                 options->shard_index)
                run_record(state, path, stem, &record, global_index);
            /* What the other --devices passes sent meanwhile (audit_passes.c). */
            audit_passes_read(state);
        }
        capture_record_free(&record);
    }
    capture_close(reader);
}
