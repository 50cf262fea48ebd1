/* The gate verdict on the page (html_page.h): its record x backend entries found whatever the
 * verdict's layout (objects carrying a gate status, named by enclosing report, file, record and
 * backend), the failing ones first, and each record's own gate entries. */
#include "html_page.h"

#include <stdlib.h>
#include <string.h>
#include <strings.h>

/* ---- gate verdict --------------------------------------------------------------------------- */

struct gate_context {
    const char *report, *file, *record_label, *backend;
    double record;
    bool has_record;
};

/* A gate status word in any letter case; -1 for anything else. */
static int gate_status_of(const char *word)
{
    for (int s = 0; word && s < GATE_STATUS_COUNT; s++)
        if (strcasecmp(word, gate_status_name((enum gate_status)s)) == 0)
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
    static const char *const report_keys[] = { KEY_REPORT, "report_path", "report_file", NULL };
    static const char *const file_keys[] = { KEY_FILE, "capture", "capture_file", "record_file",
                                             NULL };
    static const char *const backend_keys[] = { KEY_BACKEND, "backend_name", NULL };
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
    const char *text = html_first_string(item, report_keys);
    bool holds_records = html_member_array(item, KEY_RECORDS) ||
                         html_member_array(item, "results") || html_member_array(item, KEY_ENTRIES);
    bool file_is_report = false;
    if (text) {
        context.report = text;
    } else if (holds_records && (text = html_member_string(item, KEY_PATH))) {
        context.report = text;
    } else if (holds_records && !html_member(item, KEY_INDEX) && !html_member(item, KEY_RECORD) &&
               (text = html_member_string(item, KEY_FILE))) {
        context.report = text;
        file_is_report = true;
    }
    if (!file_is_report && (text = html_first_string(item, file_keys)))
        context.file = text;
    double number;
    if (html_member_number(item, KEY_RECORD, &number) ||
        html_member_number(item, "record_index", &number) ||
        html_member_number(item, KEY_INDEX, &number)) {
        context.record = number;
        context.has_record = true;
    }
    if ((text = html_member_string(item, KEY_RECORD)))
        context.record_label = text;
    const cJSON *record_object = html_member(item, KEY_RECORD);
    if (cJSON_IsObject(record_object)) {
        if ((text = html_first_string(record_object, file_keys)))
            context.file = text;
        if (html_member_number(record_object, KEY_INDEX, &number)) {
            context.record = number;
            context.has_record = true;
        }
    }
    const char *status_word = html_member_string(item, KEY_STATUS);
    int status = gate_status_of(status_word);
    if (status < 0) {
        status_word = html_member_string(item, KEY_VERDICT);
        status = gate_status_of(status_word);
    }
    if ((text = html_first_string(item, backend_keys)))
        context.backend = text;
    else if (status >= 0 && (text = html_member_string(item, KEY_NAME)))
        context.backend = text;
    else if ((text = html_member_string(html_member(item, KEY_BACKEND), KEY_NAME)))
        context.backend = text;

    size_t before = writer->gate_count;
    cJSON_ArrayForEach(child, item) {
        if (child->string && strcmp(child->string, KEY_SUMMARY) == 0)
            continue;
        if (cJSON_IsObject(child) || cJSON_IsArray(child))
            gate_walk(writer, child, context, depth + 1);
    }
    /* A report block that fails for reasons of its own (incomplete, input errors) is an entry
     * too, beside the record x backend entries it holds. */
    bool report_failure = holds_records && status > GATE_PASS &&
                          (cJSON_GetArraySize(html_member_array(item, KEY_REPORT_REASONS)) > 0 ||
                           cJSON_GetArraySize(html_member_array(item, KEY_REASONS)) > 0);
    if (status >= 0 && (context.backend || writer->gate_count == before || report_failure))
        gate_add(writer, &context, (enum gate_status)status, item);
}

void html_collect_gate(struct html_writer *writer, const cJSON *verdict)
{
    struct gate_context context = { 0 };
    const cJSON *child;
    cJSON_ArrayForEach(child, verdict) {
        /* The top level's own status is the overall verdict, not an entry. */
        if (child->string && strcmp(child->string, KEY_SUMMARY) == 0)
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
            entry->backend ? html_backend_summary_for(writer, entry->backend) : NULL;
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
const char *html_gate_overall(const struct html_writer *writer, const cJSON *verdict)
{
    static const char *const keys[] = { KEY_VERDICT, KEY_STATUS, "result", NULL };
    const char *word = html_first_string(verdict, keys);
    if (!word)
        word = html_first_string(html_member(verdict, KEY_SUMMARY), keys);
    if (word)
        return word;
    int passed = html_member_bool(verdict, "pass");
    if (passed >= 0)
        return gate_status_name(passed ? GATE_PASS : GATE_FAIL);
    if (gate_count(writer, GATE_FAIL))
        return gate_status_name(GATE_FAIL);
    if (gate_count(writer, GATE_MISSING))
        return gate_status_name(GATE_MISSING);
    return gate_status_name(GATE_PASS);
}

static bool gate_entry_matches(const struct gate_entry *entry, const char *file, double index)
{
    if (!entry->has_record || entry->record != index || !entry->file || !file)
        return false;
    return strcmp(entry->file, file) == 0 ||
           strcmp(html_file_basename(entry->file), html_file_basename(file)) == 0;
}

/* The worst gate status of a record (GATE_STATUS_COUNT: no entry). */
enum gate_status html_gate_worst_for_record(const struct html_writer *writer, const char *file,
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
    html_putf(writer, "<ul class=\"reasons%s%s\">", css_class ? " " : "",
              css_class ? css_class : "");
    cJSON_ArrayForEach(item, list) {
        if (shown++ == 12)
            break;
        html_put(writer, "<li>");
        html_put_value(writer, item, TEXT_LIMIT);
        html_put(writer, "</li>");
    }
    if (total > 12)
        html_putf(writer, "<li>and %d more</li>", total - 12);
    html_put(writer, "</ul>");
}

/* The entry's reasons (whatever the key), then its notes, muted. */
static void put_gate_reasons(struct html_writer *writer, const cJSON *object)
{
    static const char *const keys[] = { KEY_REASONS, KEY_REPORT_REASONS, KEY_REASON,
                                        "messages",  KEY_MESSAGE,        KEY_WHY,
                                        NULL };
    bool any = false;
    for (const char *const *key = keys; *key && !any; key++) {
        const cJSON *reasons = html_member(object, *key);
        if (!reasons || (cJSON_IsArray(reasons) && cJSON_GetArraySize(reasons) == 0))
            continue;
        if (cJSON_IsArray(reasons))
            put_sentence_list(writer, reasons, NULL);
        else
            html_put_value(writer, reasons, TEXT_LIMIT);
        any = true;
    }
    const cJSON *notes = html_member_array(object, KEY_NOTES);
    if (cJSON_GetArraySize(notes) > 0) {
        put_sentence_list(writer, notes, "muted");
        any = true;
    }
    if (!any)
        html_put(writer, "<span class=\"muted\">none given</span>");
}

/* Gate rows: a list of numbers, or of objects {row, why}: then one run list per reason. */
static void put_gate_rows(struct html_writer *writer, const cJSON *object)
{
    static const char *const keys[] = { KEY_ROWS, "failing_rows", "row_list", NULL };
    for (const char *const *key = keys; *key; key++) {
        const cJSON *rows = html_member(object, *key);
        if (!rows)
            continue;
        if (!cJSON_IsArray(rows)) {
            html_put_value(writer, rows, 80);
            return;
        }
        /* The distinct reasons, in first-seen order (a few; the rest go with the last). */
        enum { MAX_WHYS = 6 };
        const char *whys[MAX_WHYS];
        size_t why_count = 0;
        const cJSON *item;
        cJSON_ArrayForEach(item, rows) {
            const char *why = html_member_string(item, KEY_WHY);
            bool seen = false;
            for (size_t w = 0; w < why_count && !seen; w++)
                seen = strcmp(whys[w], why ? why : "") == 0;
            if (!seen && why_count < MAX_WHYS)
                whys[why_count++] = why ? why : "";
        }
        if (why_count <= 1 && (why_count == 0 || whys[0][0] == '\0')) {
            html_put_row_list(writer, rows, NULL);
            return;
        }
        for (size_t w = 0; w < why_count; w++) {
            html_put(writer, w ? "<br>" : "");
            if (whys[w][0]) {
                html_put(writer, "<span class=\"muted\">");
                html_put_text(writer, whys[w], NAME_LIMIT);
                html_put(writer, ":</span> ");
            }
            html_put_row_list(writer, rows, whys[w]);
        }
        return;
    }
    html_put(writer, "<span class=\"muted\">&mdash;</span>");
}

static void put_gate_record_name(struct html_writer *writer, const struct gate_entry *entry)
{
    if (entry->file) {
        html_put(writer, "<span title=\"");
        html_put_text(writer, entry->file, TEXT_LIMIT);
        html_put(writer, "\">");
        html_put_text(writer, html_file_basename(entry->file), NAME_LIMIT);
        html_put(writer, "</span>");
        if (entry->has_record) {
            html_put(writer, ":");
            html_put_number(writer, entry->record);
        }
    } else if (entry->record_label) {
        html_put_text(writer, entry->record_label, NAME_LIMIT);
    } else if (entry->has_record) {
        html_put(writer, "record ");
        html_put_number(writer, entry->record);
    } else if (entry->report) {
        html_put(writer, "<i>the whole report</i>");
    } else {
        html_put_text(writer, NULL, 0);
    }
}

static void put_gate_table(struct html_writer *writer, const enum gate_status *statuses,
                           unsigned status_count, bool with_report)
{
    size_t shown = 0, total = 0;
    html_put(writer, "<table class=\"gate\"><thead><tr>");
    if (with_report)
        html_put(writer, "<th>report</th>");
    html_put(writer, "<th>record</th><th>backend</th><th>status</th><th>reasons</th><th>rows</th>"
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
            html_put(writer, "<tr>");
            if (with_report) {
                html_put(writer, "<td>");
                html_put_text(writer, entry->report ? html_file_basename(entry->report) : NULL,
                              NAME_LIMIT);
                html_put(writer, "</td>");
            }
            html_put(writer, "<td>");
            put_gate_record_name(writer, entry);
            html_put(writer, "</td><td>");
            html_put_text(writer, entry->backend, NAME_LIMIT);
            html_put(writer, "</td><td>");
            html_put_badge(writer, gate_status_name(entry->status));
            html_put(writer, "</td><td>");
            put_gate_reasons(writer, entry->object);
            html_put(writer, "</td><td>");
            put_gate_rows(writer, entry->object);
            html_put(writer, "</td></tr>");
        }
    }
    html_put(writer, "</tbody></table>");
    if (total > shown)
        html_putf(writer, "<p class=\"note\">First %zu of %zu entries shown.</p>", shown, total);
}

void html_write_gate_section(struct html_writer *writer, const cJSON *verdict)
{
    html_put(writer, "<section id=\"gate\"><h2>Gate verdict</h2>");
    if (!cJSON_IsObject(verdict)) {
        html_put(writer, "<p>The verdict is not a JSON object: n/a.</p></section>");
        return;
    }
    bool with_report = !writer->gate_single_report;
    html_put(writer, "<div class=\"gate-head\">");
    html_put_badge(writer, html_gate_overall(writer, verdict));
    for (int s = 0; s < GATE_STATUS_COUNT; s++) {
        html_putf(writer, " <span class=\"count\">%llu ",
                  (unsigned long long)gate_count(writer, (enum gate_status)s));
        html_put(writer, gate_status_name((enum gate_status)s));
        html_put(writer, "</span>");
    }
    html_put(writer, "</div>");
    /* The verdict's own summary and provenance fields, whatever they are called. */
    const cJSON *summary = html_member(verdict, KEY_SUMMARY);
    static const char *const provenance[] = { KEY_BASELINE, KEY_POLICY, KEY_EXIT_CODE, NULL };
    html_put(writer, "<dl class=\"ctx\">");
    for (const char *const *key = provenance; *key; key++) {
        /* At the top level or in the verdict's context; an object is shown by its path. */
        const cJSON *value = html_member(verdict, *key);
        if (!value)
            value = html_member(html_member(verdict, KEY_CONTEXT), *key);
        if (!value || cJSON_IsNull(value))
            continue;
        html_putf(writer, "<dt>%s</dt><dd>", *key);
        if (cJSON_IsObject(value) && html_member_string(value, KEY_PATH)) {
            html_put_text(writer, html_member_string(value, KEY_PATH), TEXT_LIMIT);
            const char *device = html_member_string(value, KEY_DEVICE);
            if (device) {
                html_put(writer, " <span class=\"muted\">(");
                html_put_text(writer, device, NAME_LIMIT);
                html_put(writer, ")</span>");
            }
        } else {
            html_put_value(writer, value, TEXT_LIMIT);
        }
        html_put(writer, "</dd>");
    }
    const cJSON *field;
    int fields = 0;
    cJSON_ArrayForEach(field, summary) {
        if (!field->string || fields++ == 24)
            break;
        if (gate_status_of(field->string) >= 0 && cJSON_IsNumber(field))
            continue; /* the counts above already say it */
        html_put(writer, "<dt>");
        html_put_text(writer, field->string, NAME_LIMIT);
        html_put(writer, "</dt><dd>");
        html_put_value(writer, field, 200);
        html_put(writer, "</dd>");
    }
    html_put(writer, "</dl>");
    if (writer->gate_truncated)
        html_putf(writer,
                  "<p class=\"note\">The verdict holds more than %d entries; the rest are "
                  "not shown.</p>",
                  GATE_ENTRIES_MAX);

    html_put(writer, "<h3>Failing records and rows</h3>");
    static const enum gate_status failing[] = { GATE_FAIL, GATE_MISSING };
    if (gate_count(writer, GATE_FAIL) + gate_count(writer, GATE_MISSING) == 0)
        html_put(writer, "<p>No record x backend fails the gate or is missing.</p>");
    else
        put_gate_table(writer, failing, 2, with_report);
    uint64_t tolerated = gate_count(writer, GATE_TOLERATED);
    if (tolerated) {
        static const enum gate_status tolerated_only[] = { GATE_TOLERATED };
        html_putf(writer,
                  "<details class=\"fold\"><summary>%llu tolerated (known failures the policy "
                  "accepts)</summary>",
                  (unsigned long long)tolerated);
        put_gate_table(writer, tolerated_only, 1, with_report);
        html_put(writer, "</details>");
    }
    html_put(writer, "</section>");
}

void html_write_record_gate(struct html_writer *writer, const cJSON *record)
{
    const char *file = html_member_string(record, KEY_FILE);
    double index;
    if (!writer->gate_single_report || !html_member_number(record, KEY_INDEX, &index))
        return;
    size_t listed = 0;
    for (size_t i = 0; i < writer->gate_count; i++) {
        const struct gate_entry *entry = &writer->gate[i];
        if (!gate_entry_matches(entry, file, index) || entry->status == GATE_PASS)
            continue;
        if (listed == 0)
            html_put(writer, "<h3>Gate</h3><ul class=\"reasons\">");
        if (listed++ == GATE_ENTRIES_LISTED)
            break;
        html_put(writer, "<li>");
        html_put_badge(writer, gate_status_name(entry->status));
        html_put(writer, " <b>");
        html_put_text(writer, entry->backend, NAME_LIMIT);
        html_put(writer, "</b>: ");
        put_gate_reasons(writer, entry->object);
        html_put(writer, " rows: ");
        put_gate_rows(writer, entry->object);
        html_put(writer, "</li>");
    }
    if (listed)
        html_put(writer, "</ul>");
}
