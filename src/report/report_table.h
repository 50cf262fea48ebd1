/* The terminal table of `run` (docs/REPORT.md "Terminal table"): what report.h writes as JSON,
 * one line per record x backend, printed as the records are judged. */
#ifndef DSATOPK_REPORT_TABLE_H
#define DSATOPK_REPORT_TABLE_H

#include <stdio.h>

#include <cjson/cJSON.h>

#include "time_breakdown.h"

struct record_result;
struct run_report;
struct verdict_result;

void report_table_header(FILE *out);
void report_table_lines(FILE *out, const struct record_result *record,
                        const struct verdict_result *verdicts);
/* The lines of the record's engine entry (nothing when it has none). */
void report_table_engine_lines(FILE *out, const struct record_result *record);
void report_table_summary(FILE *out, const struct run_report *report, const char *report_path);
/* "# time LABEL: total T ms = kernel K (P%) + ..." for one breakdown (report_table_summary prints
 * it for all backends and for each backend name). */
void report_time_line(FILE *out, const char *label, const struct time_breakdown *time);
/* run --devices: one line per cross_device entry that fails (the devices disagreed where they
 * had to agree: file:index, backend, level and each device's output hash), then the block's
 * summary ("# cross-device (DEVICES_LABEL): N record x backend(s) compared, ..."). */
void report_table_cross_device(FILE *out, const cJSON *block, const char *devices_label);

#endif
