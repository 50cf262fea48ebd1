/* The visual report: one self-contained HTML page drawn from a run report and, optionally, a gate
 * verdict (docs/REPORT.md "HTML report").
 *
 * Reading: the report is treated as untrusted input. Every field is looked up defensively (a
 * missing or oddly typed field prints "n/a"), every string is HTML-escaped and cut to a bounded
 * length, and every list drawn is capped, so a hostile or enormous report cannot inject markup or
 * blow up the page. The gate verdict's layout is not fixed here: its record x backend entries are
 * found by walking the document for objects carrying a pass/fail/tolerated/missing status.
 *
 * Layout: summaries first (context, verdict per backend, gate failures), then one folded
 * <details> per record whose <summary> line is that record's row of the overview. The page has no
 * script and no external reference; a Content-Security-Policy forbids both anyway. */
#include "html_report.h"

#include <math.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "json_util.h"
#include "svg.h"

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

/* Gate statuses in the order the tables show them. */
enum gate_status { GATE_PASS, GATE_FAIL, GATE_TOLERATED, GATE_MISSING, GATE_STATUS_COUNT };
static const char *const gate_status_words[GATE_STATUS_COUNT] = { "pass", "fail", "tolerated",
                                                                   "missing" };

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

/* ---- defensive JSON access ------------------------------------------------------------------ */

static const cJSON *member(const cJSON *object, const char *name)
{
    return cJSON_IsObject(object) ? cJSON_GetObjectItemCaseSensitive(object, name) : NULL;
}

static bool member_number(const cJSON *object, const char *name, double *value)
{
    const cJSON *item = member(object, name);
    if (!cJSON_IsNumber(item) || !isfinite(item->valuedouble))
        return false;
    *value = item->valuedouble;
    return true;
}

static double number_or(const cJSON *object, const char *name, double fallback)
{
    double value;
    return member_number(object, name, &value) ? value : fallback;
}

static const char *member_string(const cJSON *object, const char *name)
{
    const cJSON *item = member(object, name);
    return cJSON_IsString(item) && item->valuestring ? item->valuestring : NULL;
}

/* 1 true, 0 false, -1 absent or not a boolean. */
static int member_bool(const cJSON *object, const char *name)
{
    const cJSON *item = member(object, name);
    return cJSON_IsBool(item) ? cJSON_IsTrue(item) : -1;
}

static const cJSON *member_array(const cJSON *object, const char *name)
{
    const cJSON *item = member(object, name);
    return cJSON_IsArray(item) ? item : NULL;
}

static const char *first_string(const cJSON *object, const char *const *names)
{
    for (; *names; names++) {
        const char *text = member_string(object, *names);
        if (text)
            return text;
    }
    return NULL;
}

static const char *file_basename(const char *path)
{
    const char *slash = path ? strrchr(path, '/') : NULL;
    return slash && slash[1] ? slash + 1 : path;
}

/* ---- output helpers ------------------------------------------------------------------------- */

static void put(struct html_writer *writer, const char *html)
{
    text_append(&writer->out, html);
}

static void putf(struct html_writer *writer, const char *format, ...)
    __attribute__((format(printf, 2, 3)));

static void putf(struct html_writer *writer, const char *format, ...)
{
    char line[1024];
    va_list args;
    va_start(args, format);
    int n = vsnprintf(line, sizeof(line), format, args);
    va_end(args);
    if (n < 0 || (size_t)n >= sizeof(line)) {
        writer->out.failed = true; /* our own formats are short: a bug, not input */
        return;
    }
    text_append(&writer->out, line);
}

/* Untrusted text, escaped and bounded; NULL prints n/a. */
static void put_text(struct html_writer *writer, const char *text, size_t limit)
{
    if (text)
        text_append_escaped(&writer->out, text, limit);
    else
        put(writer, "<span class=\"na\">n/a</span>");
}

static void put_number(struct html_writer *writer, double value)
{
    char text[40];
    if (!isfinite(value))
        snprintf(text, sizeof(text), "n/a");
    else if (value == floor(value) && fabs(value) < 1e15)
        snprintf(text, sizeof(text), "%.0f", value);
    else
        svg_format_value(value, text, sizeof(text));
    put(writer, text);
}

static void put_member_number(struct html_writer *writer, const cJSON *object, const char *name)
{
    double value;
    if (member_number(object, name, &value))
        put_number(writer, value);
    else
        put_text(writer, NULL, 0);
}

/* Any JSON value as short text: strings escaped, numbers, yes/no, compact JSON for the rest. */
static void put_value(struct html_writer *writer, const cJSON *item, size_t limit)
{
    if (cJSON_IsString(item)) {
        put_text(writer, item->valuestring, limit);
    } else if (cJSON_IsNumber(item) && isfinite(item->valuedouble)) {
        put_number(writer, item->valuedouble);
    } else if (cJSON_IsBool(item)) {
        put(writer, cJSON_IsTrue(item) ? "yes" : "no");
    } else if (cJSON_IsArray(item) || cJSON_IsObject(item)) {
        char *json = cJSON_PrintUnformatted(item);
        if (!json) {
            writer->out.failed = true;
            return;
        }
        put(writer, "<code>");
        put_text(writer, json, limit);
        put(writer, "</code>");
        free(json);
    } else {
        put_text(writer, NULL, 0);
    }
}

static void put_member_value(struct html_writer *writer, const cJSON *object, const char *name)
{
    put_value(writer, member(object, name), TEXT_LIMIT);
}

static void put_bytes(struct html_writer *writer, const cJSON *object, const char *name)
{
    double bytes;
    if (!member_number(object, name, &bytes)) {
        put_text(writer, NULL, 0);
        return;
    }
    static const char *const units[] = { "B", "KiB", "MiB", "GiB", "TiB" };
    unsigned unit = 0;
    while (bytes >= 1024 && unit + 1 < sizeof(units) / sizeof(units[0])) {
        bytes /= 1024;
        unit++;
    }
    char text[40];
    snprintf(text, sizeof(text), unit == 0 || bytes >= 100 ? "%.0f %s" : "%.1f %s", bytes,
             units[unit]);
    put(writer, text);
}

static enum mark mark_of(const char *word)
{
    if (!word)
        return MARK_UNKNOWN;
    if (strcasecmp(word, "pass") == 0)
        return MARK_PASS;
    if (strcasecmp(word, "fail") == 0)
        return MARK_FAIL;
    if (strcasecmp(word, "tolerated") == 0)
        return MARK_TOLERATED;
    if (strcasecmp(word, "not_run") == 0)
        return MARK_NOT_RUN;
    if (strcasecmp(word, "missing") == 0)
        return MARK_MISSING;
    return MARK_UNKNOWN;
}

/* A verdict as a text label on a coloured ground: the words carry the meaning without colour. */
static void put_badge(struct html_writer *writer, const char *word)
{
    static const char *const classes[] = { "pass", "fail", "tolerated", "notrun", "missing",
                                            "notrun" };
    static const char *const labels[] = { "PASS", "FAIL", "TOLERATED", "NOT RUN", "MISSING", NULL };
    enum mark mark = mark_of(word);
    putf(writer, "<span class=\"badge %s\">", classes[mark]);
    if (labels[mark])
        put(writer, labels[mark]);
    else
        put_text(writer, word, NAME_LIMIT);
    put(writer, "</span>");
}

/* A row number of a list entry (a number, or an object with "row"); false for anything else. */
static bool row_number(const cJSON *item, double *row)
{
    const cJSON *value = cJSON_IsObject(item) ? member(item, "row") : item;
    if (!cJSON_IsNumber(value) || !isfinite(value->valuedouble) || value->valuedouble < 0 ||
        value->valuedouble != floor(value->valuedouble) || value->valuedouble > 9e15)
        return false;
    *row = value->valuedouble;
    return true;
}

static void put_row_run(struct html_writer *writer, double first, double last, int runs)
{
    if (runs)
        put(writer, ", ");
    put_number(writer, first);
    if (last > first) {
        put(writer, last == first + 1 ? ", " : "&ndash;");
        put_number(writer, last);
    }
}

/* A list of row numbers with consecutive rows joined ("0&ndash;63, 70"), at most LISTED_RUNS runs;
 * entries that are not row numbers print as n/a. why: only the objects whose "why" is this
 * ("" also takes those without one); NULL: every entry. */
static void put_row_list(struct html_writer *writer, const cJSON *rows, const char *why)
{
    if (!cJSON_IsArray(rows)) {
        put_text(writer, NULL, 0);
        return;
    }
    int total = 0, runs = 0;
    bool in_run = false, truncated = false;
    double first = 0, last = 0, row;
    const cJSON *item;
    put(writer, "<span class=\"mono\">");
    cJSON_ArrayForEach(item, rows) {
        if (why) {
            const char *item_why = member_string(item, "why");
            if (strcmp(item_why ? item_why : "", why) != 0)
                continue;
        }
        total++;
        if (truncated)
            continue;
        bool valid = row_number(item, &row);
        if (in_run && valid && row == last + 1) {
            last = row;
            continue;
        }
        if (in_run)
            put_row_run(writer, first, last, runs++);
        in_run = false;
        if (runs == LISTED_RUNS) {
            truncated = true;
            continue;
        }
        if (valid) {
            first = last = row;
            in_run = true;
        } else {
            put(writer, runs++ ? ", " : "");
            put_text(writer, NULL, 0);
        }
    }
    if (in_run)
        put_row_run(writer, first, last, runs++);
    if (total == 0)
        put(writer, "none");
    put(writer, "</span>");
    if (truncated)
        putf(writer, " &hellip; <span class=\"muted\">(%d rows in all)</span>", total);
    else if (total > 2 && runs < total)
        putf(writer, " <span class=\"muted\">(%d rows)</span>", total);
}

/* ---- per-backend summaries ------------------------------------------------------------------ */

static struct backend_summary *backend_summary_for(struct html_writer *writer, const char *name)
{
    if (!name)
        name = "(unnamed)";
    for (size_t i = 0; i < writer->backend_count; i++)
        if (strcmp(writer->backends[i].name, name) == 0)
            return &writer->backends[i];
    if (writer->backend_count == MAX_BACKENDS) {
        writer->backends_truncated = true;
        return NULL;
    }
    struct backend_summary *summary = &writer->backends[writer->backend_count++];
    memset(summary, 0, sizeof(*summary));
    summary->name = name;
    return summary;
}

static void backend_summary_add_median(struct html_writer *writer, struct backend_summary *summary,
                                       double median)
{
    if (summary->median_count == summary->median_capacity) {
        size_t capacity = summary->median_capacity ? summary->median_capacity * 2 : 64;
        double *grown = realloc(summary->medians, capacity * sizeof(*grown));
        if (!grown) {
            writer->out.failed = true;
            return;
        }
        summary->medians = grown;
        summary->median_capacity = capacity;
    }
    summary->medians[summary->median_count++] = median;
}

/* A count from the input as an integer: negative or absurd values never reach a conversion that
 * C leaves undefined (counts are exact in doubles up to 2^53). */
static uint64_t clamp_count(double value)
{
    if (!(value > 0))
        return 0;
    return value < 9007199254740992.0 ? (uint64_t)value : UINT64_C(9007199254740992);
}

static int compare_doubles(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* Rows that showed wrong_set or short: predicted_vs_observed says it; older reports only have
 * the violation counts. */
static double backend_wrong_rows(const cJSON *backend)
{
    double wrong;
    if (member_number(member(backend, "predicted_vs_observed"), "wrong_rows", &wrong))
        return wrong;
    return number_or(member(member(backend, "violations"), "wrong_set"), "rows", 0);
}

static double backend_other_violation_rows(const cJSON *backend)
{
    double total = 0;
    const cJSON *kind;
    cJSON_ArrayForEach(kind, member(backend, "violations")) {
        if (!kind->string || strcmp(kind->string, "wrong_set") == 0 ||
            strcmp(kind->string, "short") == 0)
            continue;
        total += number_or(kind, "rows", 0);
    }
    return total;
}

static void summarize_backends(struct html_writer *writer, const cJSON *report)
{
    const cJSON *item;
    /* The context's order first, then any backend the records add. */
    cJSON_ArrayForEach(item, member_array(member(report, "context"), "backends")) {
        if (cJSON_IsString(item) && item->valuestring)
            backend_summary_for(writer, item->valuestring);
    }
    const cJSON *record;
    cJSON_ArrayForEach(record, member_array(report, "records")) {
        const cJSON *backend;
        cJSON_ArrayForEach(backend, member_array(record, "backends")) {
            struct backend_summary *summary =
                backend_summary_for(writer, member_string(backend, "name"));
            if (!summary)
                continue;
            if (!summary->level)
                summary->level = member_string(backend, "level");
            summary->runs++;
            switch (mark_of(member_string(backend, "verdict"))) {
            case MARK_PASS: summary->pass++; break;
            case MARK_FAIL: summary->fail++; break;
            case MARK_NOT_RUN: summary->not_run++; break;
            default: summary->other++; break;
            }
            double value;
            if (number_or(backend, "distinct_sets", 0) > 1)
                summary->set_flapping_records++;
            if (member_number(backend, "distinct_outputs", &value)) {
                if (!summary->has_distinct || value > summary->max_distinct_outputs)
                    summary->max_distinct_outputs = value;
                summary->has_distinct = true;
            }
            summary->wrong_rows += clamp_count(backend_wrong_rows(backend));
            summary->other_violation_rows += clamp_count(backend_other_violation_rows(backend));
            const cJSON *predicted = member(backend, "predicted_vs_observed");
            summary->unexplained_rows +=
                clamp_count(number_or(predicted, "set_flapping_unexplained", 0)) +
                clamp_count(number_or(predicted, "wrong_not_predicted_overflow", 0));
            if (member_number(member(backend, "kernel_time_us"), "median", &value) && value > 0)
                backend_summary_add_median(writer, summary, value);
        }
    }
}

/* ---- gate verdict --------------------------------------------------------------------------- */

struct gate_context {
    const char *report, *file, *record_label, *backend;
    double record;
    bool has_record;
};

static int gate_status_of(const char *word)
{
    for (int s = 0; word && s < GATE_STATUS_COUNT; s++)
        if (strcasecmp(word, gate_status_words[s]) == 0)
            return s;
    return -1;
}

static void gate_add(struct html_writer *writer, const struct gate_context *context,
                     enum gate_status status, const cJSON *object)
{
    if (writer->gate_count == GATE_ENTRIES_MAX) {
        writer->gate_truncated = true;
        return;
    }
    if (writer->gate_count == writer->gate_capacity) {
        size_t capacity = writer->gate_capacity ? writer->gate_capacity * 2 : 64;
        struct gate_entry *grown = realloc(writer->gate, capacity * sizeof(*grown));
        if (!grown) {
            writer->out.failed = true;
            return;
        }
        writer->gate = grown;
        writer->gate_capacity = capacity;
    }
    writer->gate[writer->gate_count++] = (struct gate_entry){
        .status = status, .report = context->report, .file = context->file,
        .record_label = context->record_label, .record = context->record,
        .has_record = context->has_record, .backend = context->backend, .object = object,
    };
}

/* Collects the verdict's record x backend entries whatever their nesting: an object with a gate
 * status is an entry when it (or an enclosing object) names a backend, or when nothing below it
 * is an entry (a record missing as a whole). Enclosing objects lend their report, file, record
 * and backend names. */
static void gate_walk(struct html_writer *writer, const cJSON *item, struct gate_context context,
                      unsigned depth)
{
    static const char *const report_keys[] = { "report", "report_path", "report_file", NULL };
    static const char *const file_keys[] = { "file", "capture", "capture_file", "record_file",
                                             NULL };
    static const char *const backend_keys[] = { "backend", "backend_name", NULL };
    const cJSON *child;
    if (depth > GATE_WALK_MAX_DEPTH || writer->out.failed)
        return;
    if (cJSON_IsArray(item)) {
        cJSON_ArrayForEach(child, item)
            gate_walk(writer, child, context, depth + 1);
        return;
    }
    if (!cJSON_IsObject(item))
        return;

    /* A per-report block ({"path": ..., "records": [...]}) names its report with path or file;
     * anywhere else file names a capture. */
    const char *text = first_string(item, report_keys);
    bool holds_records = member_array(item, "records") || member_array(item, "results") ||
                         member_array(item, "entries");
    bool file_is_report = false;
    if (text) {
        context.report = text;
    } else if (holds_records && (text = member_string(item, "path"))) {
        context.report = text;
    } else if (holds_records && !member(item, "index") && !member(item, "record") &&
               (text = member_string(item, "file"))) {
        context.report = text;
        file_is_report = true;
    }
    if (!file_is_report && (text = first_string(item, file_keys)))
        context.file = text;
    double number;
    if (member_number(item, "record", &number) || member_number(item, "record_index", &number) ||
        member_number(item, "index", &number)) {
        context.record = number;
        context.has_record = true;
    }
    if ((text = member_string(item, "record")))
        context.record_label = text;
    const cJSON *record_object = member(item, "record");
    if (cJSON_IsObject(record_object)) {
        if ((text = first_string(record_object, file_keys)))
            context.file = text;
        if (member_number(record_object, "index", &number)) {
            context.record = number;
            context.has_record = true;
        }
    }
    const char *status_word = member_string(item, "status");
    int status = gate_status_of(status_word);
    if (status < 0) {
        status_word = member_string(item, "verdict");
        status = gate_status_of(status_word);
    }
    if ((text = first_string(item, backend_keys)))
        context.backend = text;
    else if (status >= 0 && (text = member_string(item, "name")))
        context.backend = text;
    else if ((text = member_string(member(item, "backend"), "name")))
        context.backend = text;

    size_t before = writer->gate_count;
    cJSON_ArrayForEach(child, item) {
        if (child->string && strcmp(child->string, "summary") == 0)
            continue;
        if (cJSON_IsObject(child) || cJSON_IsArray(child))
            gate_walk(writer, child, context, depth + 1);
    }
    /* A report block that fails for reasons of its own (incomplete, input errors) is an entry
     * too, beside the record x backend entries it holds. */
    bool report_failure = holds_records && status > GATE_PASS &&
                          (cJSON_GetArraySize(member_array(item, "report_reasons")) > 0 ||
                           cJSON_GetArraySize(member_array(item, "reasons")) > 0);
    if (status >= 0 && (context.backend || writer->gate_count == before || report_failure))
        gate_add(writer, &context, (enum gate_status)status, item);
}

static void collect_gate(struct html_writer *writer, const cJSON *verdict)
{
    struct gate_context context = { 0 };
    const cJSON *child;
    cJSON_ArrayForEach(child, verdict) {
        /* The top level's own status is the overall verdict, not an entry. */
        if (child->string && strcmp(child->string, "summary") == 0)
            continue;
        if (cJSON_IsObject(child) || cJSON_IsArray(child))
            gate_walk(writer, child, context, 1);
    }
    writer->gate_single_report = true;
    const char *report = NULL;
    for (size_t i = 0; i < writer->gate_count; i++) {
        const struct gate_entry *entry = &writer->gate[i];
        if (entry->report && report && strcmp(entry->report, report) != 0)
            writer->gate_single_report = false;
        if (entry->report)
            report = entry->report;
        struct backend_summary *summary =
            entry->backend ? backend_summary_for(writer, entry->backend) : NULL;
        if (summary)
            summary->gate[entry->status]++;
    }
}

static uint64_t gate_count(const struct html_writer *writer, enum gate_status status)
{
    uint64_t count = 0;
    for (size_t i = 0; i < writer->gate_count; i++)
        count += writer->gate[i].status == status;
    return count;
}

/* The verdict's overall word: its own field when it has one, else from the entries. */
static const char *gate_overall(const struct html_writer *writer, const cJSON *verdict)
{
    static const char *const keys[] = { "verdict", "status", "result", NULL };
    const char *word = first_string(verdict, keys);
    if (!word)
        word = first_string(member(verdict, "summary"), keys);
    if (word)
        return word;
    int passed = member_bool(verdict, "pass");
    if (passed >= 0)
        return passed ? "pass" : "fail";
    if (gate_count(writer, GATE_FAIL))
        return "fail";
    if (gate_count(writer, GATE_MISSING))
        return "missing";
    return "pass";
}

static bool gate_entry_matches(const struct gate_entry *entry, const char *file, double index)
{
    if (!entry->has_record || entry->record != index || !entry->file || !file)
        return false;
    return strcmp(entry->file, file) == 0 ||
           strcmp(file_basename(entry->file), file_basename(file)) == 0;
}

/* The worst gate status of a record (GATE_STATUS_COUNT: no entry). */
static enum gate_status gate_worst_for_record(const struct html_writer *writer, const char *file,
                                              double index)
{
    enum gate_status worst = GATE_STATUS_COUNT;
    static const int severity[GATE_STATUS_COUNT] = { 1, 4, 2, 3 };
    if (!writer->gate_single_report)
        return worst;
    for (size_t i = 0; i < writer->gate_count; i++) {
        const struct gate_entry *entry = &writer->gate[i];
        if (!gate_entry_matches(entry, file, index))
            continue;
        if (worst == GATE_STATUS_COUNT || severity[entry->status] > severity[worst])
            worst = entry->status;
    }
    return worst;
}

/* A list of sentences (strings or other values), at most 12. */
static void put_sentence_list(struct html_writer *writer, const cJSON *list, const char *css_class)
{
    const cJSON *item;
    int shown = 0, total = cJSON_GetArraySize(list);
    putf(writer, "<ul class=\"reasons%s%s\">", css_class ? " " : "", css_class ? css_class : "");
    cJSON_ArrayForEach(item, list) {
        if (shown++ == 12)
            break;
        put(writer, "<li>");
        put_value(writer, item, TEXT_LIMIT);
        put(writer, "</li>");
    }
    if (total > 12)
        putf(writer, "<li>and %d more</li>", total - 12);
    put(writer, "</ul>");
}

/* The entry's reasons (whatever the key), then its notes, muted. */
static void put_gate_reasons(struct html_writer *writer, const cJSON *object)
{
    static const char *const keys[] = { "reasons", "report_reasons", "reason", "messages",
                                        "message", "why", NULL };
    bool any = false;
    for (const char *const *key = keys; *key && !any; key++) {
        const cJSON *reasons = member(object, *key);
        if (!reasons || (cJSON_IsArray(reasons) && cJSON_GetArraySize(reasons) == 0))
            continue;
        if (cJSON_IsArray(reasons))
            put_sentence_list(writer, reasons, NULL);
        else
            put_value(writer, reasons, TEXT_LIMIT);
        any = true;
    }
    const cJSON *notes = member_array(object, "notes");
    if (cJSON_GetArraySize(notes) > 0) {
        put_sentence_list(writer, notes, "muted");
        any = true;
    }
    if (!any)
        put(writer, "<span class=\"muted\">none given</span>");
}

/* Gate rows: a list of numbers, or of objects {row, why}: then one run list per reason. */
static void put_gate_rows(struct html_writer *writer, const cJSON *object)
{
    static const char *const keys[] = { "rows", "failing_rows", "row_list", NULL };
    for (const char *const *key = keys; *key; key++) {
        const cJSON *rows = member(object, *key);
        if (!rows)
            continue;
        if (!cJSON_IsArray(rows)) {
            put_value(writer, rows, 80);
            return;
        }
        /* The distinct reasons, in first-seen order (a few; the rest go with the last). */
        enum { MAX_WHYS = 6 };
        const char *whys[MAX_WHYS];
        size_t why_count = 0;
        const cJSON *item;
        cJSON_ArrayForEach(item, rows) {
            const char *why = member_string(item, "why");
            bool seen = false;
            for (size_t w = 0; w < why_count && !seen; w++)
                seen = strcmp(whys[w], why ? why : "") == 0;
            if (!seen && why_count < MAX_WHYS)
                whys[why_count++] = why ? why : "";
        }
        if (why_count <= 1 && (why_count == 0 || whys[0][0] == '\0')) {
            put_row_list(writer, rows, NULL);
            return;
        }
        for (size_t w = 0; w < why_count; w++) {
            put(writer, w ? "<br>" : "");
            if (whys[w][0]) {
                put(writer, "<span class=\"muted\">");
                put_text(writer, whys[w], NAME_LIMIT);
                put(writer, ":</span> ");
            }
            put_row_list(writer, rows, whys[w]);
        }
        return;
    }
    put(writer, "<span class=\"muted\">&mdash;</span>");
}

static void put_gate_record_name(struct html_writer *writer, const struct gate_entry *entry)
{
    if (entry->file) {
        put(writer, "<span title=\"");
        put_text(writer, entry->file, TEXT_LIMIT);
        put(writer, "\">");
        put_text(writer, file_basename(entry->file), NAME_LIMIT);
        put(writer, "</span>");
        if (entry->has_record) {
            put(writer, ":");
            put_number(writer, entry->record);
        }
    } else if (entry->record_label) {
        put_text(writer, entry->record_label, NAME_LIMIT);
    } else if (entry->has_record) {
        put(writer, "record ");
        put_number(writer, entry->record);
    } else if (entry->report) {
        put(writer, "<i>the whole report</i>");
    } else {
        put_text(writer, NULL, 0);
    }
}

static void put_gate_table(struct html_writer *writer, const enum gate_status *statuses,
                           unsigned status_count, bool with_report)
{
    size_t shown = 0, total = 0;
    put(writer, "<table class=\"gate\"><thead><tr>");
    if (with_report)
        put(writer, "<th>report</th>");
    put(writer, "<th>record</th><th>backend</th><th>status</th><th>reasons</th><th>rows</th>"
                "</tr></thead><tbody>");
    for (unsigned s = 0; s < status_count; s++) {
        for (size_t i = 0; i < writer->gate_count; i++) {
            const struct gate_entry *entry = &writer->gate[i];
            if (entry->status != statuses[s])
                continue;
            total++;
            if (shown == GATE_ENTRIES_LISTED)
                continue;
            shown++;
            put(writer, "<tr>");
            if (with_report) {
                put(writer, "<td>");
                put_text(writer, entry->report ? file_basename(entry->report) : NULL, NAME_LIMIT);
                put(writer, "</td>");
            }
            put(writer, "<td>");
            put_gate_record_name(writer, entry);
            put(writer, "</td><td>");
            put_text(writer, entry->backend, NAME_LIMIT);
            put(writer, "</td><td>");
            put_badge(writer, gate_status_words[entry->status]);
            put(writer, "</td><td>");
            put_gate_reasons(writer, entry->object);
            put(writer, "</td><td>");
            put_gate_rows(writer, entry->object);
            put(writer, "</td></tr>");
        }
    }
    put(writer, "</tbody></table>");
    if (total > shown)
        putf(writer, "<p class=\"note\">First %zu of %zu entries shown.</p>", shown, total);
}

static void write_gate_section(struct html_writer *writer, const cJSON *verdict)
{
    put(writer, "<section id=\"gate\"><h2>Gate verdict</h2>");
    if (!cJSON_IsObject(verdict)) {
        put(writer, "<p>The verdict is not a JSON object: n/a.</p></section>");
        return;
    }
    bool with_report = !writer->gate_single_report;
    put(writer, "<div class=\"gate-head\">");
    put_badge(writer, gate_overall(writer, verdict));
    for (int s = 0; s < GATE_STATUS_COUNT; s++) {
        putf(writer, " <span class=\"count\">%llu ",
             (unsigned long long)gate_count(writer, (enum gate_status)s));
        put(writer, gate_status_words[s]);
        put(writer, "</span>");
    }
    put(writer, "</div>");
    /* The verdict's own summary and provenance fields, whatever they are called. */
    const cJSON *summary = member(verdict, "summary");
    static const char *const provenance[] = { "baseline", "policy", "exit_code", NULL };
    put(writer, "<dl class=\"ctx\">");
    for (const char *const *key = provenance; *key; key++) {
        /* At the top level or in the verdict's context; an object is shown by its path. */
        const cJSON *value = member(verdict, *key);
        if (!value)
            value = member(member(verdict, "context"), *key);
        if (!value || cJSON_IsNull(value))
            continue;
        putf(writer, "<dt>%s</dt><dd>", *key);
        if (cJSON_IsObject(value) && member_string(value, "path")) {
            put_text(writer, member_string(value, "path"), TEXT_LIMIT);
            const char *device = member_string(value, "device");
            if (device) {
                put(writer, " <span class=\"muted\">(");
                put_text(writer, device, NAME_LIMIT);
                put(writer, ")</span>");
            }
        } else {
            put_value(writer, value, TEXT_LIMIT);
        }
        put(writer, "</dd>");
    }
    const cJSON *field;
    int fields = 0;
    cJSON_ArrayForEach(field, summary) {
        if (!field->string || fields++ == 24)
            break;
        if (gate_status_of(field->string) >= 0 && cJSON_IsNumber(field))
            continue; /* the counts above already say it */
        put(writer, "<dt>");
        put_text(writer, field->string, NAME_LIMIT);
        put(writer, "</dt><dd>");
        put_value(writer, field, 200);
        put(writer, "</dd>");
    }
    put(writer, "</dl>");
    if (writer->gate_truncated)
        putf(writer, "<p class=\"note\">The verdict holds more than %d entries; the rest are "
                     "not shown.</p>", GATE_ENTRIES_MAX);

    put(writer, "<h3>Failing records and rows</h3>");
    static const enum gate_status failing[] = { GATE_FAIL, GATE_MISSING };
    if (gate_count(writer, GATE_FAIL) + gate_count(writer, GATE_MISSING) == 0)
        put(writer, "<p>No record x backend fails the gate or is missing.</p>");
    else
        put_gate_table(writer, failing, 2, with_report);
    uint64_t tolerated = gate_count(writer, GATE_TOLERATED);
    if (tolerated) {
        static const enum gate_status tolerated_only[] = { GATE_TOLERATED };
        putf(writer, "<details class=\"fold\"><summary>%llu tolerated (known failures the policy "
                     "accepts)</summary>", (unsigned long long)tolerated);
        put_gate_table(writer, tolerated_only, 1, with_report);
        put(writer, "</details>");
    }
    put(writer, "</section>");
}

/* ---- page head, context, per-backend table -------------------------------------------------- */

static const char page_style[] =
    ":root{--fg:#1f2328;--muted:#59636e;--line:#d1d9e0;--panel:#f6f8fa}"
    "*{box-sizing:border-box}"
    "body{margin:0;font:14px/1.45 system-ui,-apple-system,'Segoe UI',Roboto,'Helvetica Neue',"
    "'DejaVu Sans',Arial,sans-serif;color:var(--fg);background:#fff}"
    "main{max-width:1260px;margin:0 auto;padding:18px 24px 48px}"
    "header.top{display:flex;align-items:baseline;gap:14px;flex-wrap:wrap;"
    "border-bottom:2px solid var(--fg);padding-bottom:10px}"
    "h1{font-size:22px;margin:0}h2{font-size:17px;margin:26px 0 8px;padding-bottom:4px;"
    "border-bottom:1px solid var(--line)}h3{font-size:14px;margin:14px 0 6px}"
    ".sub,.muted,.note{color:var(--muted)}.note{font-size:12.5px;margin:4px 0}"
    "code,.mono{font-family:ui-monospace,'SFMono-Regular','DejaVu Sans Mono',Menlo,Consolas,"
    "monospace;font-size:12.5px}code{overflow-wrap:anywhere}"
    "table{border-collapse:collapse;width:100%;margin:6px 0 10px}"
    "th,td{border-bottom:1px solid var(--line);padding:4px 8px;text-align:left;vertical-align:top}"
    "th{background:var(--panel);font-weight:600;font-size:12.5px;vertical-align:bottom}"
    "td.n,th.n{text-align:right;font-variant-numeric:tabular-nums}"
    "td.n,td:first-child{white-space:nowrap}"
    "tr.hot td{background:#fff5f5}"
    ".badge,.chip{display:inline-block;border-radius:3px;border:1px solid transparent;"
    "white-space:nowrap}.badge{padding:0 7px;font-weight:700;font-size:12px;letter-spacing:.03em}"
    ".chip{padding:0 6px;margin:1px 4px 1px 0;font-size:12px}"
    ".pass{background:#d3f2dc;color:#0b4a1f;border-color:#8dcfa0}"
    ".fail{background:#a3152d;color:#fff;border-color:#a3152d}"
    ".tolerated{background:#fff0c2;color:#5c3d00;border:1px dashed #a07800}"
    ".notrun,.missing{background:#eef1f4;color:var(--muted);font-style:italic;border-color:#c7d0d9}"
    ".missing{border-style:dotted}.warn{background:#ffe2c2;font-weight:700}"
    ".count{margin-left:10px;color:var(--muted)}.gate-head{margin:6px 0 10px}"
    "dl.ctx{display:grid;grid-template-columns:max-content minmax(0,1fr) max-content minmax(0,1fr);"
    "gap:3px 16px;margin:6px 0}dl.ctx dt{color:var(--muted)}"
    "dl.ctx dd{margin:0;overflow-wrap:anywhere}"
    "dl.ctx dd.wide{grid-column:2/5}"
    ".banner{padding:8px 12px;border:2px solid #a3152d;background:#fff5f5;margin:12px 0;"
    "font-weight:600}"
    ".rec{border:1px solid var(--line);border-radius:4px;margin:3px 0}"
    ".rec[open]{border-color:#8c959f}"
    ".rec>summary,.rec-head{display:grid;grid-template-columns:14px 2.5em minmax(0,15em) 8em 4em "
    "4.5em 5.5em minmax(0,1fr);gap:10px;align-items:center;padding:4px 8px}"
    ".rec>summary{cursor:pointer;list-style:none}.rec>summary::-webkit-details-marker{display:none}"
    ".rec>summary:hover{background:var(--panel)}"
    ".rec-head{font-weight:600;font-size:12.5px;color:var(--muted);padding-top:0}"
    ".tw{display:inline-block;color:var(--muted);transition:transform .1s}"
    ".rec[open]>summary .tw{transform:rotate(90deg)}"
    ".rec>summary .name{overflow:hidden;text-overflow:ellipsis;white-space:nowrap;font-weight:600}"
    ".body{padding:4px 14px 12px;border-top:1px solid var(--line)}"
    ".panels{display:flex;flex-wrap:wrap;gap:12px;align-items:flex-start;margin:6px 0}"
    ".panel{border:1px solid var(--line);border-radius:4px;padding:8px 10px}"
    ".panel table{width:auto;margin:0;font-size:13px}.panel td,.panel th{padding:2px 8px}"
    "details.fold>summary{cursor:pointer;color:var(--muted);margin:6px 0}"
    "ul.reasons{margin:2px 0;padding-left:18px}"
    ".legend{font-size:12px;color:var(--muted);margin:2px 0 8px}"
    ".sw{display:inline-block;width:11px;height:11px;border:1px solid #8c959f;vertical-align:-1px;"
    "margin:0 4px 0 0}.legend .sw:not(:first-child){margin-left:10px}"
    ".sw.same{background:#eef1f4}.sw.diff{background:#9b1b30}"
    ".sw.unk{background:repeating-linear-gradient(45deg,#f3c08b 0 2px,#7a4a12 2px 3px)}"
    ".heatbox{width:min-content;min-width:300px}.heatbox b{white-space:nowrap}"
    "svg{display:block;overflow:visible}"
    "svg text{font:11px system-ui,-apple-system,'Segoe UI',Roboto,'DejaVu Sans',Arial,sans-serif;"
    "fill:var(--fg)}svg .ttl{font-weight:600;font-size:12px}"
    "svg .yt{text-anchor:end;fill:var(--muted)}svg .xt{text-anchor:middle;fill:var(--muted)}"
    "svg .xl,svg .yl{text-anchor:middle;fill:var(--muted)}"
    "svg .val{text-anchor:middle;font-size:10px}"
    "svg .val-l{font-size:10px}svg .na{text-anchor:middle;fill:var(--muted);font-style:italic}"
    "svg .grid{stroke:#e6eaef}svg .axis{stroke:#59636e}"
    "svg .bar-under{fill:#b3470f}svg .bar-other{fill:#9aa7b4}"
    "svg .rng{fill:#b6c2cf}svg .mid{fill:#1f2328}svg .frame{fill:none;stroke:#8c959f}"
    "svg .h-same{fill:#eef1f4}svg .h-diff{fill:#9b1b30}svg .h-unk{fill:#f3c08b}"
    "svg .hatch-line{fill:#7a4a12}svg .row-gap{fill:#fff}"
    "svg .gauge-bg{fill:#eef1f4;stroke:#c7d0d9}svg .gauge{fill:#b3470f}"
    "footer{margin-top:30px;color:var(--muted);font-size:12px}"
    "@media print{.rec>summary .tw{display:none}}";

static void write_head(struct html_writer *writer, const cJSON *report)
{
    const cJSON *context = member(report, "context");
    put(writer, "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n"
                "<meta http-equiv=\"Content-Security-Policy\" content=\"default-src 'none'; "
                "style-src 'unsafe-inline'\">\n"
                "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n"
                "<meta name=\"generator\" content=\"dsatopk-audit\">\n<title>dsatopk-audit report");
    const char *device = member_string(member(context, "device"), "name");
    const char *time = member_string(context, "utc_time");
    if (device) {
        put(writer, " \xE2\x80\x94 ");
        put_text(writer, device, NAME_LIMIT);
    }
    if (time) {
        put(writer, " \xE2\x80\x94 ");
        put_text(writer, time, NAME_LIMIT);
    }
    put(writer, "</title>\n<style>");
    put(writer, page_style);
    put(writer, "</style>\n</head>\n<body>\n<main>\n");
}

static const char *run_overall(const struct html_writer *writer)
{
    uint64_t pass = 0, fail = 0;
    for (size_t i = 0; i < writer->backend_count; i++) {
        pass += writer->backends[i].pass;
        fail += writer->backends[i].fail;
    }
    return fail ? "fail" : pass ? "pass" : "not_run";
}

static void write_header(struct html_writer *writer, const cJSON *report, const cJSON *verdict)
{
    const cJSON *context = member(report, "context");
    const cJSON *device = member(context, "device");
    put(writer, "<header class=\"top\"><h1>dsatopk-audit report</h1><span class=\"sub\">");
    if (cJSON_IsObject(device))
        put_text(writer, member_string(device, "name"), NAME_LIMIT);
    else
        put(writer, "no GPU");
    put(writer, " &middot; ");
    put_text(writer, member_string(context, "host"), NAME_LIMIT);
    put(writer, " &middot; ");
    put_text(writer, member_string(context, "utc_time"), NAME_LIMIT);
    put(writer, "</span><span>run ");
    put_badge(writer, run_overall(writer));
    put(writer, "</span>");
    if (verdict) {
        put(writer, "<span>gate ");
        put_badge(writer, cJSON_IsObject(verdict) ? gate_overall(writer, verdict) : NULL);
        put(writer, "</span>");
    }
    put(writer, "</header>\n");
    if (member_bool(report, "complete") == 0) {
        put(writer, "<div class=\"banner\">INCOMPLETE run: ");
        put_text(writer, member_string(report, "stop_reason"), TEXT_LIMIT);
        put(writer, "</div>");
    }
}

static void put_context_item(struct html_writer *writer, const char *label, bool wide)
{
    putf(writer, "<dt>%s</dt><dd%s>", label, wide ? " class=\"wide\"" : "");
}

static void write_context(struct html_writer *writer, const cJSON *report)
{
    const cJSON *context = member(report, "context");
    const cJSON *device = member(context, "device");
    put(writer, "<section id=\"context\"><h2>Context</h2><dl class=\"ctx\">");
    put_context_item(writer, "GPU", false);
    if (cJSON_IsObject(device)) {
        put_text(writer, member_string(device, "name"), NAME_LIMIT);
        put(writer, " (compute capability ");
        put_text(writer, member_string(device, "compute_capability"), 16);
        put(writer, ", ");
        put_member_number(writer, device, "sm_count");
        put(writer, " SMs)");
    } else {
        put(writer, "none: ");
        put_text(writer, member_string(context, "device_unavailable_reason"), TEXT_LIMIT);
    }
    put(writer, "</dd>");
    put_context_item(writer, "driver / runtime", false);
    put(writer, "CUDA ");
    put_text(writer, member_string(device, "driver_version"), 16);
    put(writer, " / ");
    put_text(writer, member_string(device, "runtime_version"), 16);
    put(writer, "</dd>");
    put_context_item(writer, "shared memory", false);
    put_bytes(writer, device, "smem_per_sm_bytes");
    put(writer, " per SM, ");
    put_bytes(writer, device, "smem_per_block_optin_bytes");
    put(writer, " per block");
    if (member_bool(device, "smem_emulated") == 1) {
        put(writer, " <b>(emulated; the hardware reports ");
        put_bytes(writer, device, "reported_smem_per_sm_bytes");
        put(writer, ")</b>");
    }
    put(writer, "</dd>");
    put_context_item(writer, "memory", false);
    put_bytes(writer, device, "global_memory_bytes");
    put(writer, ", L2 ");
    put_bytes(writer, device, "l2_bytes");
    put(writer, "</dd>");
    put_context_item(writer, "tool", false);
    if (member_string(context, "version_string"))
        put_text(writer, member_string(context, "version_string"), NAME_LIMIT);
    else
        put_text(writer, member_string(context, "tool_version"), NAME_LIMIT);
    put(writer, "</dd>");
    put_context_item(writer, "time (UTC)", false);
    put_text(writer, member_string(context, "utc_time"), NAME_LIMIT);
    put(writer, "</dd>");
    put_context_item(writer, "host", false);
    put_text(writer, member_string(context, "host"), NAME_LIMIT);
    put(writer, "</dd>");
    put_context_item(writer, "replays", false);
    put_member_number(writer, context, "reps");
    put(writer, " reps, noise ");
    put_text(writer, member_string(context, "noise"), NAME_LIMIT);
    put(writer, ", seed ");
    put_member_number(writer, context, "seed");
    put(writer, "</dd>");
    put_context_item(writer, "modes", false);
    put(writer, "graph ");
    put_member_value(writer, context, "graph");
    put(writer, ", batch invariance ");
    put_member_value(writer, context, "batch_invariance");
    put(writer, ", k ");
    if (cJSON_IsNumber(member(context, "k_override")))
        put_member_number(writer, context, "k_override");
    else
        put(writer, "per record");
    double emulated;
    if (member_number(member(context, "emulation"), "smem_per_sm_bytes", &emulated)) {
        put(writer, ", emulated smem ");
        put_number(writer, emulated);
        put(writer, " B/SM");
    }
    put(writer, "</dd>");
    put_context_item(writer, "report", false);
    put(writer, "complete ");
    put_member_value(writer, report, "complete");
    put(writer, ", exit code ");
    put_member_number(writer, report, "exit_code");
    put(writer, ", schema ");
    put_text(writer, member_string(report, "schema"), NAME_LIMIT);
    put(writer, " v");
    put_member_number(writer, report, "schema_version");
    put(writer, "</dd>");
    put_context_item(writer, "command line", true);
    put(writer, "<code>");
    put_text(writer, member_string(context, "command_line"), 2000);
    put(writer, "</code></dd></dl>");

    const cJSON *errors = member_array(report, "input_errors");
    int error_count = cJSON_GetArraySize(errors);
    if (error_count > 0) {
        putf(writer, "<h3>Input errors (%d)</h3><table><thead><tr><th>file</th><th>record</th>"
                     "<th>kind</th><th>message</th></tr></thead><tbody>", error_count);
        const cJSON *error;
        int shown = 0;
        cJSON_ArrayForEach(error, errors) {
            if (shown++ == INPUT_ERRORS_LISTED)
                break;
            put(writer, "<tr><td>");
            put_text(writer, member_string(error, "file"), TEXT_LIMIT);
            put(writer, "</td><td class=\"n\">");
            put_member_number(writer, error, "record");
            put(writer, "</td><td>");
            put_text(writer, member_string(error, "kind"), NAME_LIMIT);
            put(writer, "</td><td>");
            put_text(writer, member_string(error, "message"), TEXT_LIMIT);
            put(writer, "</td></tr>");
        }
        put(writer, "</tbody></table>");
        if (error_count > INPUT_ERRORS_LISTED)
            putf(writer, "<p class=\"note\">First %d of %d input errors shown.</p>",
                 INPUT_ERRORS_LISTED, error_count);
    }
    put(writer, "</section>\n");
}

static void write_backend_table(struct html_writer *writer, bool with_gate)
{
    put(writer, "<section id=\"backends\"><h2>Verdict per backend</h2>");
    if (writer->backend_count == 0) {
        put(writer, "<p>No backend in this report.</p></section>");
        return;
    }
    put(writer, "<table><thead><tr><th>backend</th><th>level</th><th>verdict</th>"
                "<th class=\"n\">runs</th><th class=\"n\">pass</th><th class=\"n\">fail</th>"
                "<th class=\"n\">not run</th>");
    if (with_gate)
        put(writer, "<th>gate</th>");
    put(writer, "<th class=\"n\" title=\"records with more than one distinct index set\">"
                "records flapping</th><th class=\"n\">wrong rows</th>"
                "<th class=\"n\" title=\"rows with violations other than wrong_set and short, "
                "summed over kinds\">other violations</th>"
                "<th class=\"n\" title=\"set flapping or wrong rows the census does not "
                "predict\">unexplained rows</th><th class=\"n\">max distinct outputs</th>"
                "<th class=\"n\" title=\"median over records of the median kernel time per "
                "call, under the run's noise\">median time (&micro;s)</th></tr></thead><tbody>");
    for (size_t i = 0; i < writer->backend_count; i++) {
        struct backend_summary *summary = &writer->backends[i];
        const char *verdict = summary->fail ? "fail" : summary->pass ? "pass" : "not_run";
        if (summary->runs == 0)
            verdict = NULL;
        putf(writer, "<tr%s><td><b>", summary->fail ? " class=\"hot\"" : "");
        put_text(writer, summary->name, NAME_LIMIT);
        put(writer, "</b></td><td>");
        put_text(writer, summary->level, NAME_LIMIT);
        put(writer, "</td><td>");
        if (verdict)
            put_badge(writer, verdict);
        else
            put(writer, "<span class=\"muted\">not in any record</span>");
        putf(writer, "</td><td class=\"n\">%llu</td><td class=\"n\">%llu</td><td class=\"n\">%llu"
                     "</td><td class=\"n\">%llu</td>",
             (unsigned long long)summary->runs, (unsigned long long)summary->pass,
             (unsigned long long)summary->fail, (unsigned long long)summary->not_run);
        if (with_gate) {
            put(writer, "<td>");
            bool any = false;
            for (int s = 0; s < GATE_STATUS_COUNT; s++) {
                if (!summary->gate[s])
                    continue;
                static const char *const classes[] = { "pass", "fail", "tolerated", "missing" };
                putf(writer, "<span class=\"chip %s\">%llu %s</span>", classes[s],
                     (unsigned long long)summary->gate[s], gate_status_words[s]);
                any = true;
            }
            if (!any)
                put(writer, "<span class=\"muted\">&mdash;</span>");
            put(writer, "</td>");
        }
        putf(writer, "<td class=\"n\">%llu</td><td class=\"n\">%llu</td><td class=\"n\">%llu</td>",
             (unsigned long long)summary->set_flapping_records,
             (unsigned long long)summary->wrong_rows,
             (unsigned long long)summary->other_violation_rows);
        putf(writer, "<td class=\"n%s\">%llu</td><td class=\"n\">",
             summary->unexplained_rows ? " warn" : "",
             (unsigned long long)summary->unexplained_rows);
        if (summary->has_distinct)
            put_number(writer, summary->max_distinct_outputs);
        else
            put_text(writer, NULL, 0);
        put(writer, "</td><td class=\"n\">");
        if (summary->median_count) {
            qsort(summary->medians, summary->median_count, sizeof(double), compare_doubles);
            put_number(writer, summary->medians[summary->median_count / 2]);
        } else {
            put_text(writer, NULL, 0);
        }
        put(writer, "</td></tr>");
    }
    put(writer, "</tbody></table>");
    if (writer->backends_truncated)
        putf(writer, "<p class=\"note\">Only the first %d backends are summarized.</p>",
             MAX_BACKENDS);
    put(writer, "</section>\n");
}

/* ---- one record ----------------------------------------------------------------------------- */

/* The census entry for the record's k: records[].census.census[] holds one per k. */
static const cJSON *record_census(const cJSON *record)
{
    const cJSON *census = member(record, "census");
    const cJSON *list = member_array(census, "census");
    if (list) {
        double k;
        bool has_k = member_number(record, "k", &k);
        const cJSON *entry, *first = NULL;
        cJSON_ArrayForEach(entry, list) {
            if (!cJSON_IsObject(entry))
                continue;
            if (!first)
                first = entry;
            double entry_k;
            if (has_k && member_number(entry, "k", &entry_k) && entry_k == k)
                return entry;
        }
        return first;
    }
    if (member(census, "per_row") || member(census, "tie_set"))
        return census;
    return NULL;
}

static void put_record_name(struct html_writer *writer, const cJSON *record)
{
    put_text(writer, file_basename(member_string(record, "file")), NAME_LIMIT);
    put(writer, ":");
    put_member_number(writer, record, "index");
}

/* The record's row count over which the census counts are fractions. */
static void put_rows_of(struct html_writer *writer, const cJSON *object, const char *name,
                        const cJSON *per_k)
{
    put_member_number(writer, object, name);
    put(writer, "<span class=\"muted\"> / ");
    put_member_number(writer, per_k, "rows");
    put(writer, "</span>");
}

static void write_record_summary(struct html_writer *writer, const cJSON *record, size_t position,
                                 enum gate_status gate_worst)
{
    const cJSON *per_k = record_census(record);
    double zero_fraction;
    put(writer, "<summary><span class=\"tw\">&#9656;</span>");
    putf(writer, "<span class=\"muted\">%zu</span><span class=\"name\" title=\"", position);
    put_text(writer, member_string(record, "file"), TEXT_LIMIT);
    put(writer, "\">");
    put_record_name(writer, record);
    put(writer, "</span><span>");
    put_member_number(writer, record, "rows");
    put(writer, " &times; ");
    put_member_number(writer, record, "max_length");
    put(writer, "</span><span>");
    put_member_number(writer, record, "k");
    put(writer, "</span><span>");
    if (member_number(per_k, "zero_fraction", &zero_fraction))
        putf(writer, "%.1f %%", zero_fraction * 100.0);
    else
        put_text(writer, NULL, 0);
    put(writer, "</span><span>");
    put_member_number(writer, per_k, "underdetermined_rows");
    put(writer, "</span><span>");
    if (gate_worst != GATE_STATUS_COUNT) {
        static const char *const classes[] = { "pass", "fail", "tolerated", "missing" };
        putf(writer, "<span class=\"chip %s\">gate <b>%s</b></span>", classes[gate_worst],
             gate_status_words[gate_worst]);
    }
    const cJSON *backend;
    int shown = 0;
    cJSON_ArrayForEach(backend, member_array(record, "backends")) {
        if (shown++ == MAX_BACKENDS)
            break;
        static const char *const classes[] = { "pass", "fail", "tolerated", "notrun", "missing",
                                               "notrun" };
        const char *verdict = member_string(backend, "verdict");
        enum mark mark = mark_of(verdict);
        putf(writer, "<span class=\"chip %s\">", classes[mark]);
        put_text(writer, member_string(backend, "name"), NAME_LIMIT);
        put(writer, " ");
        if (mark == MARK_PASS)
            put(writer, "pass");
        else if (mark == MARK_FAIL)
            put(writer, "<b>FAIL</b>");
        else if (mark == MARK_NOT_RUN)
            put(writer, "not run");
        else
            put_text(writer, verdict, NAME_LIMIT);
        double sets = number_or(backend, "distinct_sets", 0), wrong = backend_wrong_rows(backend);
        if (sets > 1)
            putf(writer, " &middot; %.0f sets", sets);
        if (wrong > 0)
            putf(writer, " &middot; %.0f wrong", wrong);
        put(writer, "</span>");
    }
    if (shown == 0)
        put(writer, "<span class=\"muted\">no backend</span>");
    put(writer, "</span></summary>");
}

static void write_record_facts(struct html_writer *writer, const cJSON *record)
{
    put(writer, "<dl class=\"ctx\"><dt>file</dt><dd class=\"wide\"><code>");
    put_text(writer, member_string(record, "file"), TEXT_LIMIT);
    put(writer, "</code> record ");
    put_member_number(writer, record, "index");
    put(writer, " at byte ");
    put_member_number(writer, record, "byte_offset");
    put(writer, "</dd><dt>shape</dt><dd>");
    put_member_number(writer, record, "rows");
    put(writer, " rows, longest window ");
    put_member_number(writer, record, "max_length");
    put(writer, ", stride ");
    put_member_number(writer, record, "row_stride");
    put(writer, ", k ");
    put_member_number(writer, record, "k");
    put(writer, " (record's own ");
    put_member_number(writer, record, "record_k");
    put(writer, ")</dd><dt>flags</dt><dd>");
    const cJSON *flags = member(record, "flags"), *flag;
    int set = 0;
    cJSON_ArrayForEach(flag, flags) {
        if (!flag->string || !(cJSON_IsTrue(flag) || (cJSON_IsNumber(flag) && flag->valuedouble)))
            continue;
        if (set++)
            put(writer, ", ");
        put_text(writer, flag->string, NAME_LIMIT);
        if (cJSON_IsNumber(flag)) {
            put(writer, " ");
            put_number(writer, flag->valuedouble);
        }
    }
    if (!set)
        put(writer, cJSON_IsObject(flags) ? "none" : "<span class=\"na\">n/a</span>");
    put(writer, "</dd><dt>payload SHA-256</dt><dd><code>");
    put_text(writer, member_string(record, "payload_sha256"), 80);
    put(writer, "</code></dd><dt>reference output</dt><dd><code>");
    put_text(writer, member_string(member(record, "reference"), "output_sha256"), 80);
    put(writer, "</code></dd>");
    if (cJSON_IsArray(member(record, "source_rows"))) {
        put(writer, "<dt>rows of the file</dt><dd class=\"wide\">");
        put_row_list(writer, member(record, "source_rows"), NULL);
        put(writer, "</dd>");
    }
    const cJSON *metadata = member(record, "metadata"), *field;
    int keys = 0, total = cJSON_GetArraySize(metadata);
    if (cJSON_IsObject(metadata) && total > 0) {
        put(writer, "<dt>metadata</dt><dd class=\"wide\">");
        cJSON_ArrayForEach(field, metadata) {
            if (keys++ == METADATA_MAX_KEYS)
                break;
            if (keys > 1)
                put(writer, " &middot; ");
            put(writer, "<span class=\"muted\">");
            put_text(writer, field->string, NAME_LIMIT);
            put(writer, "</span> ");
            put_value(writer, field, 200);
        }
        if (total > METADATA_MAX_KEYS)
            putf(writer, " <span class=\"muted\">(first %d of %d keys)</span>", METADATA_MAX_KEYS,
                 total);
        put(writer, "</dd>");
    }
    if (member_string(record, "metadata_unparsed")) {
        put(writer, "<dt>metadata (text)</dt><dd class=\"wide\"><code>");
        put_text(writer, member_string(record, "metadata_unparsed"), TEXT_LIMIT);
        put(writer, "</code></dd>");
    }
    put(writer, "</dl>");
}

/* Rows with a boundary (a tie set) and whether each is underdetermined. */
static bool census_row_tie_set(const cJSON *row, double *tie_set, bool *underdetermined)
{
    if (!member_number(row, "tie_set", tie_set) || *tie_set < 1)
        return false;
    *underdetermined = member_bool(row, "underdetermined") == 1;
    return true;
}

static void write_tie_set_histogram(struct html_writer *writer, const cJSON *per_row)
{
    struct svg_bin bins[64];
    unsigned lowest = 64, highest = 0;
    memset(bins, 0, sizeof(bins));
    const cJSON *row;
    cJSON_ArrayForEach(row, per_row) {
        double tie_set;
        bool underdetermined;
        if (!census_row_tie_set(row, &tie_set, &underdetermined))
            continue;
        unsigned bin = svg_log2_bin(tie_set >= 1.8e19 ? UINT64_MAX : (uint64_t)tie_set);
        bins[bin].values[underdetermined ? 0 : 1] += 1;
        if (bin < lowest)
            lowest = bin;
        if (bin > highest)
            highest = bin;
    }
    if (lowest > highest)
        lowest = highest = 0;
    for (unsigned bin = lowest; bin <= highest; bin++)
        svg_power_of_two_label(bin, bins[bin].label, sizeof(bins[bin].label));
    struct svg_bar_chart chart = {
        .title = "Boundary tie-set size",
        .x_label = "entries equal to the k-th value (bins of powers of two)",
        .y_label = "rows",
        .series_count = 2,
        .series_names = { "underdetermined", "determined" },
        .series_classes = { "bar-under", "bar-other" },
        .width = 340,
        .height = 214,
    };
    bool any = false;
    for (unsigned bin = lowest; bin <= highest; bin++)
        any |= bins[bin].values[0] + bins[bin].values[1] > 0;
    svg_bar_chart(&writer->out, &chart, bins + lowest, any ? highest - lowest + 1 : 0);
}

static void write_gap_histogram(struct html_writer *writer, const cJSON *per_row)
{
    /* Bin 0 holds gaps of exactly 0; then decades, widened to keep at most 24 bars. */
    enum { MAX_GAP_BINS = 26 };
    struct svg_bin bins[MAX_GAP_BINS];
    int lowest = 0, highest = 0;
    bool any_positive = false;
    double zero[2] = { 0, 0 }, without_gap = 0;
    const cJSON *row;
    cJSON_ArrayForEach(row, per_row) {
        double tie_set, gap;
        bool underdetermined;
        if (!census_row_tie_set(row, &tie_set, &underdetermined))
            continue;
        if (!member_number(row, "gap", &gap) || gap < 0) {
            without_gap++;
            continue;
        }
        if (gap == 0) {
            zero[underdetermined ? 0 : 1]++;
            continue;
        }
        int decade = svg_decade(gap);
        if (!any_positive || decade < lowest)
            lowest = decade;
        if (!any_positive || decade > highest)
            highest = decade;
        any_positive = true;
    }
    int stride = any_positive ? (highest - lowest) / (MAX_GAP_BINS - 2) + 1 : 1;
    size_t bin_count = 1 + (any_positive ? (size_t)((highest - lowest) / stride + 1) : 0);
    memset(bins, 0, sizeof(bins));
    snprintf(bins[0].label, sizeof(bins[0].label), "0");
    bins[0].values[0] = zero[0];
    bins[0].values[1] = zero[1];
    for (size_t b = 1; b < bin_count; b++)
        svg_decade_label(lowest + (int)(b - 1) * stride, bins[b].label, sizeof(bins[b].label));
    cJSON_ArrayForEach(row, per_row) {
        double tie_set, gap;
        bool underdetermined;
        if (!census_row_tie_set(row, &tie_set, &underdetermined) ||
            !member_number(row, "gap", &gap) || !(gap > 0))
            continue;
        size_t b = 1 + (size_t)((svg_decade(gap) - lowest) / stride);
        bins[b < bin_count ? b : bin_count - 1].values[underdetermined ? 0 : 1]++;
    }
    struct svg_bar_chart chart = {
        .title = "Boundary gap",
        .x_label = stride > 1 ? "k-th minus (k+1)-th value, log scale (bins of several decades)"
                              : "k-th minus (k+1)-th value, log scale (decades)",
        .y_label = "rows",
        .series_count = 2,
        .series_names = { "underdetermined", "determined" },
        .series_classes = { "bar-under", "bar-other" },
        .width = 340,
        .height = 214,
    };
    bool any = any_positive || zero[0] + zero[1] > 0;
    svg_bar_chart(&writer->out, &chart, bins, any ? bin_count : 0);
    if (without_gap > 0)
        putf(writer, "<p class=\"note\">%.0f row(s) with a boundary have no finite gap.</p>",
             without_gap);
}

static void put_census_row(struct html_writer *writer, const char *label, const cJSON *per_k,
                           const char *name, bool of_rows)
{
    putf(writer, "<tr><td>%s</td><td class=\"n\">", label);
    if (of_rows)
        put_rows_of(writer, per_k, name, per_k);
    else
        put_member_number(writer, per_k, name);
    put(writer, "</td></tr>");
}

static void put_statistic(struct html_writer *writer, const char *label, const cJSON *object,
                          const char *const names[3])
{
    putf(writer, "<tr><td>%s</td><td class=\"n\">", label);
    for (int i = 0; i < 3; i++) {
        if (i)
            put(writer, " / ");
        put_member_number(writer, object, names[i]);
    }
    put(writer, "</td></tr>");
}

static void write_census(struct html_writer *writer, const cJSON *record)
{
    const cJSON *per_k = record_census(record);
    put(writer, "<h3>Census</h3>");
    if (!per_k) {
        put(writer, "<p>No census in this record: n/a.</p>");
        return;
    }
    const cJSON *per_row = member_array(per_k, "per_row");
    put(writer, "<div class=\"panels\">");
    if (per_row && cJSON_GetArraySize(per_row) > 0) {
        put(writer, "<div class=\"panel\">");
        write_tie_set_histogram(writer, per_row);
        put(writer, "</div><div class=\"panel\">");
        write_gap_histogram(writer, per_row);
        put(writer, "</div>");
    } else {
        put(writer, "<div class=\"panel\"><p>No per-row census: the histograms are n/a.</p></div>");
    }

    put(writer, "<div class=\"panel\">");
    double zero_fraction;
    bool has_zero = member_number(per_k, "zero_fraction", &zero_fraction);
    if (has_zero) {
        double shown = zero_fraction < 0 ? 0 : zero_fraction > 1 ? 1 : zero_fraction;
        putf(writer, "<svg width=\"220\" height=\"30\" role=\"img\"><title>exact 0.0 entries: "
                     "%.2f %%</title><text class=\"ttl\" x=\"0\" y=\"11\">Entries equal to 0.0: "
                     "%.1f %%</text><rect class=\"gauge-bg\" x=\"0.5\" y=\"17.5\" width=\"219\" "
                     "height=\"10\"/><rect class=\"gauge\" x=\"0.5\" y=\"17.5\" width=\"%.1f\" "
                     "height=\"10\"/></svg>",
             zero_fraction * 100, zero_fraction * 100, shown * 219);
    } else {
        put(writer, "<p>Entries equal to 0.0: <span class=\"na\">n/a</span></p>");
    }
    put(writer, "<table><tbody>");
    put_census_row(writer, "rows with a boundary", per_k, "rows_with_boundary", true);
    put_census_row(writer, "underdetermined", per_k, "underdetermined_rows", true);
    put_census_row(writer, "boundary at 0.0", per_k, "zero_boundary_rows", true);
    put_census_row(writer, "overflow 4096 (radix)", per_k, "radix_overflow_rows", true);
    put_census_row(writer, "overflow 16384 (filtered)", per_k, "filtered_overflow_rows", true);
    put_census_row(writer, "short rows (length &le; k)", per_k, "short_rows", true);
    static const char *const tie_names[3] = { "median", "p90", "max" };
    static const char *const gap_names[3] = { "min", "median", "p90" };
    put_statistic(writer, "tie set median / p90 / max", member(per_k, "tie_set"), tie_names);
    put_statistic(writer, "gap min / median / p90", member(per_k, "gap"), gap_names);
    put(writer, "<tr><td>&minus;inf / NaN / subnormal</td><td class=\"n\">");
    put_member_number(writer, per_k, "neg_inf");
    put(writer, " / ");
    put_member_number(writer, per_k, "nan");
    put(writer, " / ");
    put_member_number(writer, per_k, "subnormal");
    put(writer, "</td></tr></tbody></table></div></div>");
}

static void put_violations(struct html_writer *writer, const cJSON *violations)
{
    if (!cJSON_IsObject(violations)) {
        put_text(writer, NULL, 0);
        return;
    }
    const cJSON *kind;
    int listed = 0;
    cJSON_ArrayForEach(kind, violations) {
        double rows;
        if (!kind->string || !member_number(kind, "rows", &rows) || rows <= 0)
            continue;
        if (listed++)
            put(writer, ", ");
        put(writer, "<b>");
        put_text(writer, kind->string, NAME_LIMIT);
        put(writer, "</b> ");
        put_number(writer, rows);
    }
    if (!listed)
        put(writer, "none");
}

static void put_time(struct html_writer *writer, const cJSON *times)
{
    double median, low, high;
    if (!member_number(times, "median", &median)) {
        put_text(writer, NULL, 0);
        return;
    }
    put_number(writer, median);
    if (member_number(times, "min", &low) && member_number(times, "max", &high)) {
        char low_text[32], high_text[32];
        svg_format_value(low, low_text, sizeof(low_text));
        svg_format_value(high, high_text, sizeof(high_text));
        putf(writer, " <span class=\"muted\">[%s&ndash;%s]</span>", low_text, high_text);
    }
}

static void write_backend_details(struct html_writer *writer, const cJSON *record)
{
    const cJSON *backends = member_array(record, "backends");
    const cJSON *backend;
    put(writer, "<h3>Backends</h3>");
    if (cJSON_GetArraySize(backends) == 0) {
        put(writer, "<p>No backend ran on this record.</p>");
        return;
    }
    put(writer, "<table><thead><tr><th>backend</th><th>level</th><th>status</th><th>verdict</th>"
                "<th class=\"n\">reps</th><th class=\"n\">distinct outputs</th>"
                "<th class=\"n\">distinct sets</th><th class=\"n\">= reference</th>"
                "<th class=\"n\">flapping rows (bytes / sets)</th><th>violation rows</th>"
                "<th class=\"n\">kernel &micro;s median [min&ndash;max]</th>"
                "<th class=\"n\">scratch</th></tr></thead><tbody>");
    int shown = 0;
    cJSON_ArrayForEach(backend, backends) {
        if (shown++ == MAX_BACKENDS)
            break;
        bool failed = mark_of(member_string(backend, "verdict")) == MARK_FAIL;
        putf(writer, "<tr%s><td><b>", failed ? " class=\"hot\"" : "");
        put_text(writer, member_string(backend, "name"), NAME_LIMIT);
        put(writer, "</b></td><td>");
        put_text(writer, member_string(backend, "level"), NAME_LIMIT);
        put(writer, "</td><td>");
        put_text(writer, member_string(backend, "status"), NAME_LIMIT);
        put(writer, "</td><td>");
        put_badge(writer, member_string(backend, "verdict"));
        put(writer, "</td><td class=\"n\">");
        put_member_number(writer, backend, "reps");
        put(writer, "</td><td class=\"n\">");
        put_member_number(writer, backend, "distinct_outputs");
        put(writer, "</td><td class=\"n\">");
        put_member_number(writer, backend, "distinct_sets");
        put(writer, "</td><td class=\"n\">");
        put_member_number(writer, backend, "equals_reference_reps");
        put(writer, "</td><td class=\"n\">");
        put_member_number(writer, backend, "flapping_rows_total");
        put(writer, " / ");
        put_member_number(writer, backend, "set_flapping_rows_total");
        put(writer, "</td><td>");
        put_violations(writer, member(backend, "violations"));
        put(writer, "</td><td class=\"n\">");
        put_time(writer, member(backend, "kernel_time_us"));
        put(writer, "</td><td class=\"n\">");
        put_bytes(writer, backend, "scratch_bytes");
        put(writer, "</td></tr>");
    }
    put(writer, "</tbody></table>");

    /* Why: status reasons, verdict reasons, graph and batch-invariance results. */
    bool any_note = false;
    shown = 0;
    cJSON_ArrayForEach(backend, backends) {
        if (shown++ == MAX_BACKENDS)
            break;
        const char *reason = member_string(backend, "reason");
        const cJSON *reasons = member_array(backend, "verdict_reasons");
        const cJSON *graph = member(backend, "graph");
        const cJSON *batch = member(backend, "batch_invariance");
        bool not_run = mark_of(member_string(backend, "verdict")) == MARK_NOT_RUN;
        /* A not-run backend's verdict reasons only repeat its status reason. */
        bool list_reasons = cJSON_GetArraySize(reasons) > 0 && !not_run;
        if (!reason && !list_reasons && !cJSON_IsObject(graph) && !cJSON_IsObject(batch))
            continue;
        if (!any_note)
            put(writer, "<ul class=\"reasons\">");
        any_note = true;
        put(writer, "<li><b>");
        put_text(writer, member_string(backend, "name"), NAME_LIMIT);
        put(writer, "</b>: ");
        if (reason) {
            put_text(writer, member_string(backend, "status"), NAME_LIMIT);
            put(writer, ": ");
            put_text(writer, reason, TEXT_LIMIT);
            put(writer, ". ");
        }
        if (list_reasons) {
            const cJSON *item;
            int listed = 0;
            cJSON_ArrayForEach(item, reasons) {
                if (listed++ == 12)
                    break;
                if (listed > 1)
                    put(writer, "; ");
                put_value(writer, item, TEXT_LIMIT);
            }
            put(writer, ". ");
        }
        if (cJSON_IsObject(graph)) {
            put(writer, "Graph: ran ");
            put_member_value(writer, graph, "ran");
            put(writer, ", ");
            put_member_number(writer, graph, "reps");
            put(writer, " replays, ");
            put_member_number(writer, graph, "distinct_outputs");
            put(writer, " distinct outputs, ");
            put_member_number(writer, graph, "equals_eager_reps");
            put(writer, " equal to eager, median ");
            put_member_number(writer, member(graph, "kernel_time_us"), "median");
            put(writer, " &micro;s");
            if (member_string(graph, "error")) {
                put(writer, ", error: ");
                put_text(writer, member_string(graph, "error"), TEXT_LIMIT);
            }
            put(writer, ". ");
        }
        if (cJSON_IsObject(batch)) {
            put(writer, "Batch invariance: ");
            put_member_number(writer, batch, "rows_tested");
            put(writer, " rows in ");
            put_member_number(writer, batch, "contexts_per_row");
            put(writer, " contexts, ");
            put_member_number(writer, batch, "dependent_rows_total");
            put(writer, " batch dependent (");
            put_member_number(writer, batch, "set_dependent_rows_total");
            put(writer, " by set)");
            if (member_string(batch, "error")) {
                put(writer, ", error: ");
                put_text(writer, member_string(batch, "error"), TEXT_LIMIT);
            }
            if (number_or(batch, "dependent_rows_total", 0) > 0) {
                put(writer, ", rows ");
                put_row_list(writer, member(batch, "dependent_rows"), NULL);
            }
            put(writer, ".");
        }
        put(writer, "</li>");
    }
    if (any_note)
        put(writer, "</ul>");
}

static void write_timing(struct html_writer *writer, const cJSON *record)
{
    struct svg_range ranges[MAX_BACKENDS];
    size_t count = 0, timed = 0;
    const cJSON *backend;
    cJSON_ArrayForEach(backend, member_array(record, "backends")) {
        if (count == MAX_BACKENDS)
            break;
        const cJSON *times = member(backend, "kernel_time_us");
        struct svg_range *range = &ranges[count++];
        range->label = member_string(backend, "name");
        if (!range->label)
            range->label = "n/a";
        range->valid = member_number(times, "median", &range->mid) &&
                       member_number(times, "min", &range->low) &&
                       member_number(times, "max", &range->high) && range->low > 0 &&
                       range->mid >= range->low && range->high >= range->mid;
        timed += range->valid;
    }
    if (timed == 0)
        return;
    put(writer, "<div class=\"panel\">");
    svg_range_plot(&writer->out, "Kernel time per call (median, min to max)",
                   "microseconds, log scale", ranges, count, 400);
    put(writer, "</div>");
}

static void put_pvo_cell(struct html_writer *writer, const cJSON *predicted, const char *name,
                         bool alarming)
{
    double value;
    bool has = member_number(predicted, name, &value);
    putf(writer, "<td class=\"n%s\">", has && alarming && value > 0 ? " warn" : "");
    put_member_number(writer, predicted, name);
    put(writer, "</td>");
}

static void write_predicted_vs_observed(struct html_writer *writer, const cJSON *record)
{
    const cJSON *backend;
    put(writer, "<div class=\"panel\"><b>Predicted by the census vs observed</b> "
                "<span class=\"muted\">(rows)</span>"
                "<table><thead><tr><th rowspan=\"2\">backend</th>"
                "<th colspan=\"4\" class=\"n\">set flapping vs underdetermined</th>"
                "<th colspan=\"4\" class=\"n\">wrong vs predicted overflow</th></tr><tr>"
                "<th class=\"n\" title=\"the boundary tie set straddles the boundary\">"
                "underdet.</th><th class=\"n\">flapping</th><th class=\"n\">both</th>"
                "<th class=\"n\" title=\"set flapping on a row neither underdetermined nor "
                "predicted to overflow\">unexplained</th>"
                "<th class=\"n\" title=\"the threshold bin holds more candidates than the "
                "backend's staging\">overflow</th><th class=\"n\">wrong</th>"
                "<th class=\"n\">both</th><th class=\"n\" title=\"wrong on a row the census "
                "does not predict to overflow\">unexplained</th></tr></thead><tbody>");
    int shown = 0;
    cJSON_ArrayForEach(backend, member_array(record, "backends")) {
        if (shown++ == MAX_BACKENDS)
            break;
        const cJSON *predicted = member(backend, "predicted_vs_observed");
        /* The staging model names the buffer whose overflow is predicted: a tooltip, to keep
         * the table narrow enough to sit beside the timing plot. */
        const char *staging = member_string(predicted, "staging_model");
        put(writer, "<tr><td title=\"staging model: ");
        put_text(writer, staging ? staging : "none", NAME_LIMIT);
        put(writer, "\">");
        put_text(writer, member_string(backend, "name"), NAME_LIMIT);
        put(writer, "</td>");
        put_pvo_cell(writer, predicted, "underdetermined_rows", false);
        put_pvo_cell(writer, predicted, "set_flapping_rows", false);
        put_pvo_cell(writer, predicted, "set_flapping_and_underdetermined", false);
        put_pvo_cell(writer, predicted, "set_flapping_unexplained", true);
        put_pvo_cell(writer, predicted, "predicted_overflow_rows", false);
        put_pvo_cell(writer, predicted, "wrong_rows", false);
        put_pvo_cell(writer, predicted, "wrong_and_predicted_overflow", false);
        put_pvo_cell(writer, predicted, "wrong_not_predicted_overflow", true);
        put(writer, "</tr>");
    }
    put(writer, "</tbody></table>");
    /* The rows to start triage from. */
    shown = 0;
    cJSON_ArrayForEach(backend, member_array(record, "backends")) {
        if (shown++ == MAX_BACKENDS)
            break;
        const cJSON *predicted = member(backend, "predicted_vs_observed");
        static const char *const lists[2] = { "set_flapping_unexplained_list",
                                              "wrong_not_predicted_overflow_list" };
        static const char *const what[2] = { "unexplained set flapping", "unexplained wrong" };
        for (int i = 0; i < 2; i++) {
            const cJSON *rows = member_array(predicted, lists[i]);
            if (cJSON_GetArraySize(rows) == 0)
                continue;
            put(writer, "<p class=\"note\"><b>");
            put_text(writer, member_string(backend, "name"), NAME_LIMIT);
            putf(writer, "</b> %s rows: ", what[i]);
            put_row_list(writer, rows, NULL);
            put(writer, "</p>");
        }
    }
    put(writer, "</div>");
}

enum heat_state { HEAT_SAME, HEAT_DIFFERS, HEAT_UNKNOWN, HEAT_STATES };

/* Whether a row's entry lists the exact reps it differed in (an optional field). */
static const cJSON *flapping_exact_reps(const cJSON *entry)
{
    const cJSON *reps = member_array(entry, "differing_reps");
    return reps ? reps : member_array(entry, "reps_list");
}

/* The rows x reps picture of one backend. The report gives, per row, how many reps differed from
 * rep 0, and per rep its output hash: a rep with rep 0's hash differs nowhere, and a row that
 * differed in as many reps as there are reps with another hash differed in all of them. What
 * those two facts leave open is drawn as "unknown" rather than guessed. */
static void write_heat_map(struct html_writer *writer, const cJSON *record, const cJSON *backend,
                           bool *heading_written)
{
    const cJSON *flapping = member_array(backend, "flapping_rows");
    double total_flapping = number_or(backend, "flapping_rows_total", 0);
    double reps_value = number_or(backend, "reps", 0);
    if ((total_flapping <= 0 && cJSON_GetArraySize(flapping) == 0) || reps_value < 2)
        return;
    /* Reps as the report says, capped where no real run goes (only counted, never allocated). */
    uint32_t reps = reps_value > 1e9 ? 1000000000u : (uint32_t)reps_value;
    uint32_t columns = reps < HEAT_MAX_REPS ? reps : HEAT_MAX_REPS;

    /* Rows drawn: every row of a small record, else the listed flapping rows. */
    double record_rows = number_or(record, "rows", 0);
    const cJSON *source_rows = member_array(record, "source_rows");
    bool all_rows = record_rows > 0 && record_rows <= HEAT_MAX_ROWS;
    uint32_t rows = 0;
    uint64_t row_labels[HEAT_MAX_ROWS];
    const cJSON *entries[HEAT_MAX_ROWS];
    if (all_rows) {
        rows = (uint32_t)record_rows;
        for (uint32_t r = 0; r < rows; r++) {
            const cJSON *source = source_rows ? cJSON_GetArrayItem(source_rows, (int)r) : NULL;
            double source_row;
            row_labels[r] = source && row_number(source, &source_row) ? (uint64_t)source_row : r;
            entries[r] = NULL;
        }
        const cJSON *entry;
        int read = 0;
        cJSON_ArrayForEach(entry, flapping) {
            double row;
            if (read++ == FLAPPING_ENTRIES_READ)
                break;
            if (!member_number(entry, "row", &row))
                continue;
            for (uint32_t r = 0; r < rows; r++)
                if ((double)row_labels[r] == row)
                    entries[r] = entry;
        }
    } else {
        const cJSON *entry;
        cJSON_ArrayForEach(entry, flapping) {
            double row;
            if (rows == HEAT_MAX_ROWS)
                break;
            if (!row_number(entry, &row))
                continue;
            row_labels[rows] = (uint64_t)row;
            entries[rows++] = entry;
        }
    }
    if (rows == 0)
        return;

    /* Which reps may differ from rep 0: those whose output hash is not rep 0's (or unknown). */
    const cJSON *hashes = member_array(backend, "output_sha256_per_rep");
    bool hashes_known = hashes && (double)cJSON_GetArraySize(hashes) == reps_value;
    const char *first_hash =
        hashes_known ? cJSON_GetStringValue(cJSON_GetArrayItem(hashes, 0)) : NULL;
    uint8_t *may_differ = calloc(columns, 1); /* per drawn rep */
    uint8_t *cells = calloc((size_t)rows * columns, 1);
    if (!may_differ || !cells) {
        writer->out.failed = true;
        goto done;
    }
    /* candidates counts every rep that may differ, drawn or not. */
    uint32_t candidates = 0;
    if (hashes_known && first_hash) {
        const cJSON *hash;
        uint32_t rep = 0;
        cJSON_ArrayForEach(hash, hashes) {
            const char *text = cJSON_GetStringValue(hash);
            bool differs = rep > 0 && (!text || strcmp(text, first_hash) != 0);
            if (rep < columns)
                may_differ[rep] = differs;
            candidates += differs;
            rep++;
        }
    } else {
        for (uint32_t rep = 1; rep < columns; rep++)
            may_differ[rep] = 1;
        candidates = reps - 1;
    }
    uint32_t unknown_rows = 0;
    for (uint32_t r = 0; r < rows; r++) {
        uint8_t *row = cells + (size_t)r * columns;
        const cJSON *entry = entries[r];
        const cJSON *exact = flapping_exact_reps(entry);
        double differing = number_or(entry, "reps_differing", 0);
        if (exact) {
            const cJSON *rep;
            cJSON_ArrayForEach(rep, exact) {
                if (cJSON_IsNumber(rep) && rep->valuedouble >= 0 && rep->valuedouble < columns)
                    row[(uint32_t)rep->valuedouble] = HEAT_DIFFERS;
            }
            continue;
        }
        if (!entry || differing <= 0)
            continue;
        uint8_t state = differing >= candidates ? HEAT_DIFFERS : HEAT_UNKNOWN;
        for (uint32_t c = 0; c < columns; c++) {
            if (may_differ[c])
                row[c] = state;
        }
        unknown_rows += state == HEAT_UNKNOWN;
    }

    if (!*heading_written)
        put(writer, "<h3>Flapping rows</h3><div class=\"panels\">");
    *heading_written = true;
    put(writer, "<div class=\"panel heatbox\"><b>");
    put_text(writer, member_string(backend, "name"), NAME_LIMIT);
    put(writer, "</b>: rows that differ from rep 0, per rep"
                "<div class=\"legend\"><span class=\"sw same\"></span>same as rep 0"
                "<span class=\"sw diff\"></span>differs");
    if (unknown_rows)
        put(writer, "<span class=\"sw unk\"></span>unknown: this rep's output differs "
                    "somewhere, the report does not say whether in this row");
    put(writer, "</div>");
    char description[160];
    snprintf(description, sizeof(description), "rows x reps: %u rows, %u reps, dark cells differ "
                                               "from rep 0", rows, columns);
    struct svg_heat_map map = {
        .rows = rows,
        .columns = columns,
        .cells = cells,
        .state_count = HEAT_STATES,
        .state_classes = { "h-same", "h-diff", "h-unk" },
        .state_hatched = { false, false, true },
        .row_labels = row_labels,
        .x_label = "rep",
        .y_label = "row",
        .description = description,
        .id = writer->next_svg_id++,
        .max_width = 900,
        .max_height = 320,
    };
    svg_heat_map(&writer->out, &map);
    if (!all_rows) {
        putf(writer, "<p class=\"note\">Only flapping rows are drawn: the first %u of ", rows);
        put_number(writer, total_flapping);
        put(writer, " flapping rows of ");
        put_number(writer, record_rows);
        put(writer, ".</p>");
    }
    if (columns < reps)
        putf(writer, "<p class=\"note\">The first %u of %u reps are drawn.</p>", columns, reps);
    put(writer, "</div>");
done:
    free(may_differ);
    free(cells);
}

static void write_flapping(struct html_writer *writer, const cJSON *record)
{
    const cJSON *backend;
    bool heading_written = false;
    int shown = 0;
    cJSON_ArrayForEach(backend, member_array(record, "backends")) {
        if (shown++ == MAX_BACKENDS)
            break;
        write_heat_map(writer, record, backend, &heading_written);
    }
    if (heading_written)
        put(writer, "</div>");
    else
        put(writer, "<p class=\"note\">No row flapped on any backend of this record.</p>");
}

static void write_record_gate(struct html_writer *writer, const cJSON *record)
{
    const char *file = member_string(record, "file");
    double index;
    if (!writer->gate_single_report || !member_number(record, "index", &index))
        return;
    size_t listed = 0;
    for (size_t i = 0; i < writer->gate_count; i++) {
        const struct gate_entry *entry = &writer->gate[i];
        if (!gate_entry_matches(entry, file, index) || entry->status == GATE_PASS)
            continue;
        if (listed == 0)
            put(writer, "<h3>Gate</h3><ul class=\"reasons\">");
        if (listed++ == GATE_ENTRIES_LISTED)
            break;
        put(writer, "<li>");
        put_badge(writer, gate_status_words[entry->status]);
        put(writer, " <b>");
        put_text(writer, entry->backend, NAME_LIMIT);
        put(writer, "</b>: ");
        put_gate_reasons(writer, entry->object);
        put(writer, " rows: ");
        put_gate_rows(writer, entry->object);
        put(writer, "</li>");
    }
    if (listed)
        put(writer, "</ul>");
}

static bool record_fails(const cJSON *record)
{
    const cJSON *backend;
    cJSON_ArrayForEach(backend, member_array(record, "backends"))
        if (mark_of(member_string(backend, "verdict")) == MARK_FAIL)
            return true;
    return false;
}

static bool record_is_interesting(const cJSON *record)
{
    const cJSON *backend;
    cJSON_ArrayForEach(backend, member_array(record, "backends"))
        if (number_or(backend, "distinct_sets", 0) > 1 || backend_wrong_rows(backend) > 0)
            return true;
    return false;
}

static void write_records(struct html_writer *writer, const cJSON *report)
{
    const cJSON *records = member_array(report, "records");
    int count = cJSON_GetArraySize(records);
    put(writer, "<section id=\"records\">");
    putf(writer, "<h2>Records (%d)</h2>", count);
    if (!records) {
        put(writer, "<p>The report has no record list: n/a.</p></section>");
        return;
    }
    if (count == 0) {
        put(writer, "<p>No record was replayed.</p></section>");
        return;
    }

    /* One record is unfolded: the first that fails (run or gate), else the first that flapped
     * or was wrong; the others are listed as links. */
    const cJSON *record;
    size_t position = 0, failing = 0, interesting = 0;
    long open_position = -1;
    cJSON_ArrayForEach(record, records) {
        double index = number_or(record, "index", -1);
        enum gate_status gate = gate_worst_for_record(writer, member_string(record, "file"), index);
        bool fails = record_fails(record) || gate == GATE_FAIL || gate == GATE_MISSING;
        failing += fails;
        interesting += record_is_interesting(record);
        if (fails && open_position < 0)
            open_position = (long)position;
        position++;
    }
    if (open_position < 0) {
        position = 0;
        cJSON_ArrayForEach(record, records) {
            if (record_is_interesting(record)) {
                open_position = (long)position;
                break;
            }
            position++;
        }
    }
    putf(writer, "<p>%zu record(s) with a failing backend, %zu with set flapping or wrong rows.",
         failing, interesting);
    if (failing + interesting > 0) {
        put(writer, " Start with: ");
        size_t links = 0;
        position = 0;
        cJSON_ArrayForEach(record, records) {
            double index = number_or(record, "index", -1);
            enum gate_status gate =
                gate_worst_for_record(writer, member_string(record, "file"), index);
            bool fails = record_fails(record) || gate == GATE_FAIL || gate == GATE_MISSING;
            if ((failing ? fails : record_is_interesting(record)) && links < ATTENTION_LINKS) {
                putf(writer, "%s<a href=\"#rec-%zu\">", links ? ", " : "", position);
                put_record_name(writer, record);
                put(writer, "</a>");
                links++;
            }
            position++;
        }
        size_t pool = failing ? failing : interesting;
        if (pool > links)
            putf(writer, " and %zu more", pool - links);
        put(writer, ".");
    }
    put(writer, " Click a record for its census, backends and flapping rows.</p>");

    put(writer, "<div class=\"rec-head\"><span></span><span>#</span><span>record</span>"
                "<span>rows &times; L</span><span>k</span><span>zeros</span>"
                "<span>underdet.</span><span>verdict per backend</span></div>");
    position = 0;
    cJSON_ArrayForEach(record, records) {
        double index = number_or(record, "index", -1);
        enum gate_status gate = gate_worst_for_record(writer, member_string(record, "file"), index);
        putf(writer, "<details class=\"rec\" id=\"rec-%zu\"%s>", position,
             (long)position == open_position ? " open" : "");
        write_record_summary(writer, record, position, gate);
        put(writer, "<div class=\"body\">");
        if (!cJSON_IsObject(record)) {
            put(writer, "<p>This record entry is not an object: n/a.</p></div></details>\n");
            position++;
            continue;
        }
        write_record_facts(writer, record);
        write_census(writer, record);
        write_backend_details(writer, record);
        put(writer, "<div class=\"panels\">");
        write_predicted_vs_observed(writer, record);
        write_timing(writer, record);
        put(writer, "</div>");
        write_record_gate(writer, record);
        write_flapping(writer, record);
        put(writer, "</div></details>\n");
        position++;
        if (writer->out.failed)
            break;
    }
    put(writer, "</section>\n");
}

static void write_footer(struct html_writer *writer, const cJSON *report)
{
    put(writer, "<footer>Generated by dsatopk-audit from a ");
    put_text(writer, member_string(report, "schema"), NAME_LIMIT);
    put(writer, " document (schema version ");
    put_member_number(writer, report, "schema_version");
    put(writer, "). Self-contained: no script, no external resource. Field definitions: "
                "docs/REPORT.md.</footer>\n</main>\n</body>\n</html>\n");
}

int html_report_write(const char *path, const cJSON *report, const cJSON *verdict,
                      struct audit_error *err)
{
    int status = AUDIT_OK;
    struct html_writer *writer = NULL;
    if (!path || !report)
        return audit_fail(err, AUDIT_EUSAGE, "html report: no %s given",
                          path ? "report" : "output path");
    writer = calloc(1, sizeof(*writer));
    if (!writer)
        return audit_fail(err, AUDIT_ENOMEM, "%s: out of memory rendering the HTML report", path);
    text_buffer_init(&writer->out);

    summarize_backends(writer, report);
    if (verdict)
        collect_gate(writer, verdict);
    write_head(writer, report);
    write_header(writer, report, verdict);
    write_context(writer, report);
    write_backend_table(writer, verdict != NULL);
    if (verdict)
        write_gate_section(writer, verdict);
    write_records(writer, report);
    write_footer(writer, report);
    if (writer->out.failed || !writer->out.data) {
        status = audit_fail(err, AUDIT_ENOMEM, "%s: out of memory rendering the HTML report", path);
        goto done;
    }
    status = json_write_text_atomic(path, writer->out.data, err);
done:
    for (size_t i = 0; i < writer->backend_count; i++)
        free(writer->backends[i].medians);
    free(writer->gate);
    text_buffer_release(&writer->out);
    free(writer);
    return status;
}
