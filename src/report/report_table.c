/* The terminal table of `run` (report_table.h), nccl-tests style: one line per record x
 * backend, the failing reasons under it, a summary with the time breakdown at the end. */
#include "report_table.h"

#include <string.h>

#include "report.h"
#include "report_read.h"
#include "terminal_text.h"

void report_table_header(FILE *out)
{
    fprintf(out, "# %-28s %16s %6s  %-13s %-14s %-11s %7s %6s %7s %6s %8s %10s  %s\n", "record",
            "rows x L", "k", "backend", "level", "status", "outputs", "sets", "#wrong", "#viol",
            "flapping", "median_us", "verdict");
}

static const char *base_name(const char *path)
{
    const char *slash = path ? strrchr(path, '/') : NULL;
    return slash ? slash + 1 : (path ? path : "");
}

/* The line of a backend that replayed: #wrong counts rows with a wrong set in any rep (eager or
 * graph), #viol rows with any other violation; rows, not row-reps. */
static void print_measured_line(FILE *out, const char *where, const char *shape, uint32_t k,
                                const struct backend_result *result, const char *verdict)
{
    const struct output_tally *eager = &result->eager;
    uint32_t wrong = 0, other = 0;
    const uint32_t wrong_bit = 1u << CHECK_WRONG_SET;
    for (uint32_t b = 0; b < eager->rows; b++) {
        uint32_t flags = eager->row_flags[b];
        if (result->graph_ran)
            flags |= result->graph.row_flags[b];
        wrong += (flags & wrong_bit) != 0;
        other += (flags & ~wrong_bit) != 0;
    }
    double median, min, max;
    char time_text[24];
    if (output_tally_times(eager, &median, &min, &max))
        snprintf(time_text, sizeof(time_text), "%.2f", median);
    else
        snprintf(time_text, sizeof(time_text), "-");
    fprintf(out, "  %-28s %16s %6u  %-13s %-14s %-11s %7u %6u %7u %6u %8u %10s  %s\n", where,
            shape, k, result->backend->name, topk_determinism_name(result->backend->level),
            backend_status_name(result->status), eager->distinct_outputs, eager->distinct_sets,
            wrong, other, output_tally_flapping_rows(eager), time_text, verdict);
}

void report_table_lines(FILE *out, const struct record_result *record,
                        const struct verdict_result *verdicts)
{
    const struct capture_record *capture = record->record;
    char where[64], shape[40];
    snprintf(where, sizeof(where), "%s:%u", terminal_safe(base_name(record->file)), capture->index);
    snprintf(shape, sizeof(shape), "%u x %d", capture->rows, report_record_max_length(capture));
    for (size_t i = 0; i < record->backend_count; i++) {
        const struct backend_result *result = &record->backends[i];
        const struct output_tally *eager = &result->eager;
        const char *verdict = verdict_name(verdicts[i].verdict);
        if (result->status != BACKEND_OK || eager->reps == 0) {
            fprintf(out, "  %-28s %16s %6u  %-13s %-14s %-11s %7s %6s %7s %6s %8s %10s  %s\n",
                    where, shape, record->k, result->backend->name,
                    topk_determinism_name(result->backend->level),
                    backend_status_name(result->status), "-", "-", "-", "-", "-", "-", verdict);
        } else {
            print_measured_line(out, where, shape, record->k, result, verdict);
        }
        if (verdicts[i].verdict == VERDICT_FAIL)
            for (unsigned r = 0; r < verdicts[i].reason_count; r++)
                fprintf(out, "  %-28s   %s\n", "", terminal_safe(verdicts[i].reasons[r]));
    }
}

void report_table_engine_lines(FILE *out, const struct record_result *record)
{
    char where[64], shape[40];
    if (!record->engine)
        return;
    snprintf(where, sizeof(where), "%s:%u", terminal_safe(base_name(record->file)),
             record->record->index);
    snprintf(shape, sizeof(shape), "%u x %d", record->record->rows,
             report_record_max_length(record->record));
    report_engine_table_lines(out, where, shape, record->engine, record->source_rows);
}

void report_table_summary(FILE *out, const struct run_report *report, const char *report_path)
{
    fprintf(out,
            "# %llu record(s), %llu backend run(s): %llu pass, %llu fail, %llu not run "
            "(%llu unsupported, %llu unavailable, %llu skipped); %d input error(s)\n",
            (unsigned long long)report->record_count, (unsigned long long)report->runs,
            (unsigned long long)report->pass, (unsigned long long)report->fail,
            (unsigned long long)report->not_run,
            (unsigned long long)report->status_counts[BACKEND_UNSUPPORTED],
            (unsigned long long)report->status_counts[BACKEND_UNAVAILABLE],
            (unsigned long long)report->status_counts[BACKEND_SKIPPED],
            cJSON_GetArraySize(report->input_errors));
    const struct engine_counts *engine = &report->engine;
    if (engine->records)
        fprintf(out, "# engine selections: %llu record(s) judged: %llu pass, %llu fail; rows: %llu "
                     "exact, %llu tie_variant (underdetermined, resolved the engine's way), %llu "
                     "wrong\n",
                (unsigned long long)engine->records, (unsigned long long)engine->pass,
                (unsigned long long)engine->fail,
                (unsigned long long)engine->class_rows[ENGINE_ROW_EXACT],
                (unsigned long long)engine->class_rows[ENGINE_ROW_TIE_VARIANT],
                (unsigned long long)engine->class_rows[ENGINE_ROW_WRONG]);
    const uint64_t faults = report->status_counts[BACKEND_HANG] +
                            report->status_counts[BACKEND_CRASH] +
                            report->status_counts[BACKEND_CUDA_ERROR];
    if (faults)
        fprintf(out, "# contained faults: %llu hang, %llu crash, %llu cuda_error (each killed or "
                     "lost its worker process; the audit went on)\n",
                (unsigned long long)report->status_counts[BACKEND_HANG],
                (unsigned long long)report->status_counts[BACKEND_CRASH],
                (unsigned long long)report->status_counts[BACKEND_CUDA_ERROR]);
    const struct record_time *records = &report->record_time_total;
    if (records->total_ms > 0) {
        const double other =
            records->total_ms - records->reference_ms - records->census_ms - records->backends_ms;
        fprintf(out, "# time records: %.1f ms = cpu reference %.1f + census %.1f + backend "
                     "workers %.1f + other %.1f\n",
                records->total_ms, records->reference_ms, records->census_ms,
                records->backends_ms, other > 0 ? other : 0.0);
    }
    if (report->time_total.total_ms > 0) {
        report_time_line(out, "all backends", &report->time_total);
        for (size_t i = 0; i < report->time_backend_count; i++)
            if (report->time_by_backend[i].time.total_ms > 0)
                report_time_line(out, report->time_by_backend[i].name,
                                 &report->time_by_backend[i].time);
    }
    if (report_path)
        fprintf(out, "# report: %s\n", terminal_safe(report_path));
}

void report_time_line(FILE *out, const char *label, const struct time_breakdown *time)
{
    const double total = time->total_ms;
    const double other = time_breakdown_other_ms(time);
    fprintf(out, "# time %s: %.1f ms =", label, total);
    for (size_t part = 0; part < time_breakdown_part_count(); part++) {
        const double value = time_breakdown_value(time, part);
        if (value > 0)
            fprintf(out, " %s %.1f (%.1f%%) +", time_breakdown_part(part)->label, value,
                    total > 0 ? 100.0 * value / total : 0.0);
    }
    fprintf(out, " other %.1f (%.1f%%)\n", other, total > 0 ? 100.0 * other / total : 0.0);
}

void report_table_cross_device(FILE *out, const cJSON *block, const char *devices_label)
{
    const cJSON *entry;
    cJSON_ArrayForEach(entry, json_member(block, KEY_ENTRIES)) {
        enum verdict verdict;
        if (verdict_parse(cJSON_GetStringValue(json_member(entry, KEY_VERDICT)), &verdict) < 0 ||
            verdict != VERDICT_FAIL)
            continue;
        const cJSON *file = json_member(entry, KEY_FILE), *index = json_member(entry, KEY_INDEX);
        const cJSON *name = json_member(entry, KEY_NAME), *level = json_member(entry, KEY_LEVEL);
        fprintf(out, "  cross-device %s:%.0f %s %s: the devices disagree:",
                cJSON_IsString(file) ? terminal_safe(file->valuestring) : "?",
                cJSON_IsNumber(index) ? index->valuedouble : 0,
                cJSON_IsString(name) ? name->valuestring : "?",
                cJSON_IsString(level) ? level->valuestring : "?");
        const cJSON *device;
        cJSON_ArrayForEach(device, json_member(entry, KEY_DEVICES)) {
            const cJSON *hash = json_member(device, KEY_OUTPUT_SHA256);
            fprintf(out, " [%.0f] %.12s", cJSON_GetNumberValue(json_member(device, KEY_INDEX)),
                    cJSON_IsString(hash) ? hash->valuestring : "-");
        }
        fprintf(out, "\n");
    }
    const cJSON *summary = json_member(block, KEY_SUMMARY);
    fprintf(out, "# cross-device (%s): %.0f record x backend(s) compared, %.0f agree, "
                 "%.0f disagree, %.0f required disagreement(s)\n",
            terminal_safe(devices_label), cJSON_GetNumberValue(json_member(summary, KEY_COMPARED)),
            cJSON_GetNumberValue(json_member(summary, KEY_AGREE)),
            cJSON_GetNumberValue(json_member(summary, KEY_DISAGREE)),
            cJSON_GetNumberValue(json_member(summary, KEY_REQUIRED_DISAGREEMENTS)));
}
