/* The parts of the HTML page (html_report.h) share this: the bounds, the writer that accumulates
 * the page, the defensive readers of the untrusted report and the escaping writers, and one
 * entry per part of the page. Internal to src/report/html_*.c. */
#ifndef DSATOPK_HTML_PAGE_H
#define DSATOPK_HTML_PAGE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <cjson/cJSON.h>

#include "report_keys.h"
#include "svg.h"
#include "verdict.h"

/* Bounds that keep the page readable and its size proportional to what matters. */
#define TEXT_LIMIT 400            /* bytes of one input string shown */
#define NAME_LIMIT 80             /* bytes of a backend, kind or metadata key shown */
#define MAX_BACKENDS 64           /* columns of the per-backend table */
#define HEAT_MAX_ROWS 128         /* rows of a flapping heat map */
#define HEAT_MAX_REPS 200         /* reps (columns) of a flapping heat map */
#define LISTED_RUNS 32            /* runs of consecutive row numbers printed in one list */
#define FLAPPING_ENTRIES_READ 4096 /* entries of a flapping_rows list looked at (as report.h) */
#define METADATA_MAX_KEYS 24
#define INPUT_ERRORS_LISTED 100
#define GATE_ENTRIES_MAX 100000   /* entries collected from a verdict */
#define GATE_ENTRIES_LISTED 500   /* entries printed per table */
#define GATE_WALK_MAX_DEPTH 12
#define ATTENTION_LINKS 12        /* links to records needing a look */

enum mark { MARK_PASS, MARK_FAIL, MARK_TOLERATED, MARK_NOT_RUN, MARK_MISSING, MARK_UNKNOWN };

struct gate_entry {
    enum gate_status status;
    const char *report;       /* the report the entry is about, when the verdict says */
    const char *file;
    const char *record_label; /* "file:index" style text when the verdict gives one */
    double record;
    bool has_record;
    const char *backend;
    const cJSON *object;      /* for reasons and rows */
};

struct backend_summary {
    const char *name;         /* borrowed from the report or the verdict */
    const char *level;
    uint64_t runs, pass, fail, not_run, other;
    uint64_t set_flapping_records, wrong_rows, other_violation_rows, unexplained_rows;
    double max_distinct_outputs;
    bool has_distinct;
    double *medians;          /* per record that timed it: median kernel time */
    size_t median_count, median_capacity;
    uint64_t gate[GATE_STATUS_COUNT];
};

struct html_writer {
    struct text_buffer out;
    unsigned next_svg_id;
    struct backend_summary backends[MAX_BACKENDS];
    size_t backend_count;
    bool backends_truncated;
    struct gate_entry *gate;
    size_t gate_count, gate_capacity;
    bool gate_truncated;
    bool gate_single_report;  /* every entry names the same report (or none): match records */
};

/* ---- reading the report defensively, writing escaped text (html_writer.c) ------------------ */

const char *html_file_basename(const char *path);
const char *html_first_string(const cJSON *object, const char *const *names);
/* A verdict word of run or gate, in any letter case (the page shows what it is given). */
enum mark html_mark_of(const char *word);
const cJSON *html_member(const cJSON *object, const char *name);
const cJSON *html_member_array(const cJSON *object, const char *name);
/* 1 true, 0 false, -1 absent or not a boolean. */
int html_member_bool(const cJSON *object, const char *name);
bool html_member_number(const cJSON *object, const char *name, double *value);
const char *html_member_string(const cJSON *object, const char *name);
double html_number_or(const cJSON *object, const char *name, double fallback);
void html_put(struct html_writer *writer, const char *html);
/* A verdict as a text label on a coloured ground: the words carry the meaning without colour. */
void html_put_badge(struct html_writer *writer, const char *word);
void html_put_bytes(struct html_writer *writer, const cJSON *object, const char *name);
void html_put_member_number(struct html_writer *writer, const cJSON *object, const char *name);
void html_put_member_value(struct html_writer *writer, const cJSON *object, const char *name);
void html_put_number(struct html_writer *writer, double value);
/* A list of row numbers with consecutive rows joined ("0&ndash;63, 70"), at most LISTED_RUNS runs;
 * entries that are not row numbers print as n/a. why: only the objects whose "why" is this
 * ("" also takes those without one); NULL: every entry. */
void html_put_row_list(struct html_writer *writer, const cJSON *rows, const char *why);
/* Untrusted text, escaped and bounded; NULL prints n/a. */
void html_put_text(struct html_writer *writer, const char *text, size_t limit);
/* Any JSON value as short text: strings escaped, numbers, yes/no, compact JSON for the rest. */
void html_put_value(struct html_writer *writer, const cJSON *item, size_t limit);
void html_putf(struct html_writer *writer, const char *format, ...)
    __attribute__((format(printf, 2, 3)));
/* A row number of a list entry (a number, or an object with "row"); false for anything else. */
bool html_row_number(const cJSON *item, double *row);

/* ---- the page head, context and per-backend table (html_overview.c) ------------------------ */

struct backend_summary *html_backend_summary_for(struct html_writer *writer, const char *name);
/* Rows that showed wrong_set or short: predicted_vs_observed says it; older reports only have
 * the violation counts. */
double html_backend_wrong_rows(const cJSON *backend);
void html_summarize_backends(struct html_writer *writer, const cJSON *report);
void html_write_backend_table(struct html_writer *writer, bool with_gate);
void html_write_context(struct html_writer *writer, const cJSON *report);
void html_write_head(struct html_writer *writer, const cJSON *report);
void html_write_header(struct html_writer *writer, const cJSON *report, const cJSON *verdict);

/* ---- the gate verdict (html_gate.c) ---------------------------------------------------------- */

void html_collect_gate(struct html_writer *writer, const cJSON *verdict);
/* The verdict's overall word: its own field when it has one, else from the entries. */
const char *html_gate_overall(const struct html_writer *writer, const cJSON *verdict);
/* The worst gate status of a record (GATE_STATUS_COUNT: no entry). */
enum gate_status html_gate_worst_for_record(const struct html_writer *writer, const char *file,
                                            double index);
void html_write_gate_section(struct html_writer *writer, const cJSON *verdict);
void html_write_record_gate(struct html_writer *writer, const cJSON *record);

/* ---- a record's census (html_census.c) ------------------------------------------------------ */

/* The census entry for the record's k: records[].census.census[] holds one per k. */
const cJSON *html_record_census(const cJSON *record);
void html_write_census(struct html_writer *writer, const cJSON *record);

/* ---- one record: facts, backends, timing, predictions (html_record.c) ----------------------- */

void html_put_record_name(struct html_writer *writer, const cJSON *record);
/* The record's row count over which the census counts are fractions. */
void html_put_rows_of(struct html_writer *writer, const cJSON *object, const char *name,
                      const cJSON *per_k);
void html_write_backend_details(struct html_writer *writer, const cJSON *record);
void html_write_predicted_vs_observed(struct html_writer *writer, const cJSON *record);
void html_write_record_facts(struct html_writer *writer, const cJSON *record);
void html_write_record_summary(struct html_writer *writer, const cJSON *record, size_t position,
                               enum gate_status gate_worst);
void html_write_timing(struct html_writer *writer, const cJSON *record);

/* ---- the engine's own selection (html_engine.c) --------------------------------------------- */

/* The record's engine entry fails. */
bool html_engine_fails(const cJSON *record);
/* The report's summary.engine counts, when any record carries the engine's selection. */
void html_write_engine_overview(struct html_writer *writer, const cJSON *report);
/* The chip of a record's summary line (nothing without an engine entry). */
void html_put_engine_chip(struct html_writer *writer, const cJSON *record);
/* The record's section: verdict, contract, rows per kind, wrong rows and their indices. */
void html_write_engine(struct html_writer *writer, const cJSON *record);

/* ---- a record's flapping rows (html_flapping.c) ---------------------------------------------- */

void html_write_flapping(struct html_writer *writer, const cJSON *record);

#endif
