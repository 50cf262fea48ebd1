/* One record on the page (html_page.h): its summary line, its facts, each backend's status,
 * verdict, outputs, violations and times, and the census predictions next to what was observed. */
#include "html_page.h"


/* ---- one record ----------------------------------------------------------------------------- */

void html_put_record_name(struct html_writer *writer, const cJSON *record)
{
    html_put_text(writer, html_file_basename(html_member_string(record, KEY_FILE)), NAME_LIMIT);
    html_put(writer, ":");
    html_put_member_number(writer, record, KEY_INDEX);
}

/* The record's row count over which the census counts are fractions. */
void html_put_rows_of(struct html_writer *writer, const cJSON *object, const char *name,
                      const cJSON *per_k)
{
    html_put_member_number(writer, object, name);
    html_put(writer, "<span class=\"muted\"> / ");
    html_put_member_number(writer, per_k, KEY_ROWS);
    html_put(writer, "</span>");
}

void html_write_record_summary(struct html_writer *writer, const cJSON *record, size_t position,
                               enum gate_status gate_worst)
{
    const cJSON *per_k = html_record_census(record);
    double zero_fraction;
    html_put(writer, "<summary><span class=\"tw\">&#9656;</span>");
    html_putf(writer, "<span class=\"muted\">%zu</span><span class=\"name\" title=\"", position);
    html_put_text(writer, html_member_string(record, KEY_FILE), TEXT_LIMIT);
    html_put(writer, "\">");
    html_put_record_name(writer, record);
    html_put(writer, "</span><span>");
    html_put_member_number(writer, record, KEY_ROWS);
    html_put(writer, " &times; ");
    html_put_member_number(writer, record, KEY_MAX_LENGTH);
    html_put(writer, "</span><span>");
    html_put_member_number(writer, record, KEY_K);
    html_put(writer, "</span><span>");
    if (html_member_number(per_k, "zero_fraction", &zero_fraction))
        html_putf(writer, "%.1f %%", zero_fraction * 100.0);
    else
        html_put_text(writer, NULL, 0);
    html_put(writer, "</span><span>");
    html_put_member_number(writer, per_k, KEY_UNDERDETERMINED_ROWS);
    html_put(writer, "</span><span>");
    if (gate_worst != GATE_STATUS_COUNT) {
        static const char *const classes[] = { "pass", "fail", "tolerated", "missing" };
        html_putf(writer, "<span class=\"chip %s\">gate <b>%s</b></span>", classes[gate_worst],
                  gate_status_name(gate_worst));
    }
    const cJSON *backend;
    int shown = 0;
    cJSON_ArrayForEach(backend, html_member_array(record, KEY_BACKENDS)) {
        if (shown++ == MAX_BACKENDS)
            break;
        static const char *const classes[] = { "pass", "fail", "tolerated", "notrun", "missing",
                                               "notrun" };
        const char *verdict = html_member_string(backend, KEY_VERDICT);
        enum mark mark = html_mark_of(verdict);
        html_putf(writer, "<span class=\"chip %s\">", classes[mark]);
        html_put_text(writer, html_member_string(backend, KEY_NAME), NAME_LIMIT);
        html_put(writer, " ");
        if (mark == MARK_PASS)
            html_put(writer, "pass");
        else if (mark == MARK_FAIL)
            html_put(writer, "<b>FAIL</b>");
        else if (mark == MARK_NOT_RUN)
            html_put(writer, "not run");
        else
            html_put_text(writer, verdict, NAME_LIMIT);
        double sets = html_number_or(backend, KEY_DISTINCT_SETS, 0),
               wrong = html_backend_wrong_rows(backend);
        if (sets > 1)
            html_putf(writer, " &middot; %.0f sets", sets);
        if (wrong > 0)
            html_putf(writer, " &middot; %.0f wrong", wrong);
        html_put(writer, "</span>");
    }
    if (shown == 0)
        html_put(writer, "<span class=\"muted\">no backend</span>");
    html_put_engine_chip(writer, record);
    html_put(writer, "</span></summary>");
}

void html_write_record_facts(struct html_writer *writer, const cJSON *record)
{
    html_put(writer, "<dl class=\"ctx\"><dt>file</dt><dd class=\"wide\"><code>");
    html_put_text(writer, html_member_string(record, KEY_FILE), TEXT_LIMIT);
    html_put(writer, "</code> record ");
    html_put_member_number(writer, record, KEY_INDEX);
    html_put(writer, " at byte ");
    html_put_member_number(writer, record, KEY_BYTE_OFFSET);
    html_put(writer, "</dd><dt>shape</dt><dd>");
    html_put_member_number(writer, record, KEY_ROWS);
    html_put(writer, " rows, longest window ");
    html_put_member_number(writer, record, KEY_MAX_LENGTH);
    html_put(writer, ", stride ");
    html_put_member_number(writer, record, KEY_ROW_STRIDE);
    html_put(writer, ", k ");
    html_put_member_number(writer, record, KEY_K);
    html_put(writer, " (record's own ");
    html_put_member_number(writer, record, KEY_RECORD_K);
    html_put(writer, ")</dd><dt>flags</dt><dd>");
    const cJSON *flags = html_member(record, KEY_FLAGS), *flag;
    int set = 0;
    cJSON_ArrayForEach(flag, flags) {
        if (!flag->string || !(cJSON_IsTrue(flag) || (cJSON_IsNumber(flag) && flag->valuedouble)))
            continue;
        if (set++)
            html_put(writer, ", ");
        html_put_text(writer, flag->string, NAME_LIMIT);
        if (cJSON_IsNumber(flag)) {
            html_put(writer, " ");
            html_put_number(writer, flag->valuedouble);
        }
    }
    if (!set)
        html_put(writer, cJSON_IsObject(flags) ? "none" : "<span class=\"na\">n/a</span>");
    html_put(writer, "</dd><dt>payload SHA-256</dt><dd><code>");
    html_put_text(writer, html_member_string(record, KEY_PAYLOAD_SHA256), 80);
    html_put(writer, "</code></dd><dt>reference output</dt><dd><code>");
    html_put_text(writer, html_member_string(html_member(record, KEY_REFERENCE), KEY_OUTPUT_SHA256),
                  80);
    html_put(writer, "</code></dd>");
    if (cJSON_IsArray(html_member(record, KEY_SOURCE_ROWS))) {
        html_put(writer, "<dt>rows of the file</dt><dd class=\"wide\">");
        html_put_row_list(writer, html_member(record, KEY_SOURCE_ROWS), NULL);
        html_put(writer, "</dd>");
    }
    const cJSON *metadata = html_member(record, KEY_METADATA), *field;
    int keys = 0, total = cJSON_GetArraySize(metadata);
    if (cJSON_IsObject(metadata) && total > 0) {
        html_put(writer, "<dt>metadata</dt><dd class=\"wide\">");
        cJSON_ArrayForEach(field, metadata) {
            if (keys++ == METADATA_MAX_KEYS)
                break;
            if (keys > 1)
                html_put(writer, " &middot; ");
            html_put(writer, "<span class=\"muted\">");
            html_put_text(writer, field->string, NAME_LIMIT);
            html_put(writer, "</span> ");
            html_put_value(writer, field, 200);
        }
        if (total > METADATA_MAX_KEYS)
            html_putf(writer, " <span class=\"muted\">(first %d of %d keys)</span>",
                      METADATA_MAX_KEYS, total);
        html_put(writer, "</dd>");
    }
    if (html_member_string(record, KEY_METADATA_UNPARSED)) {
        html_put(writer, "<dt>metadata (text)</dt><dd class=\"wide\"><code>");
        html_put_text(writer, html_member_string(record, KEY_METADATA_UNPARSED), TEXT_LIMIT);
        html_put(writer, "</code></dd>");
    }
    html_put(writer, "</dl>");
}

static void put_violations(struct html_writer *writer, const cJSON *violations)
{
    if (!cJSON_IsObject(violations)) {
        html_put_text(writer, NULL, 0);
        return;
    }
    const cJSON *kind;
    int listed = 0;
    cJSON_ArrayForEach(kind, violations) {
        double rows;
        if (!kind->string || !html_member_number(kind, KEY_ROWS, &rows) || rows <= 0)
            continue;
        if (listed++)
            html_put(writer, ", ");
        html_put(writer, "<b>");
        html_put_text(writer, kind->string, NAME_LIMIT);
        html_put(writer, "</b> ");
        html_put_number(writer, rows);
    }
    if (!listed)
        html_put(writer, "none");
}

static void put_time(struct html_writer *writer, const cJSON *times)
{
    double median, low, high;
    if (!html_member_number(times, KEY_MEDIAN, &median)) {
        html_put_text(writer, NULL, 0);
        return;
    }
    html_put_number(writer, median);
    if (html_member_number(times, KEY_MIN, &low) && html_member_number(times, KEY_MAX, &high)) {
        char low_text[32], high_text[32];
        svg_format_value(low, low_text, sizeof(low_text));
        svg_format_value(high, high_text, sizeof(high_text));
        html_putf(writer, " <span class=\"muted\">[%s&ndash;%s]</span>", low_text, high_text);
    }
}

void html_write_backend_details(struct html_writer *writer, const cJSON *record)
{
    const cJSON *backends = html_member_array(record, KEY_BACKENDS);
    const cJSON *backend;
    html_put(writer, "<h3>Backends</h3>");
    if (cJSON_GetArraySize(backends) == 0) {
        html_put(writer, "<p>No backend ran on this record.</p>");
        return;
    }
    html_put(writer,
             "<table><thead><tr><th>backend</th><th>level</th><th>status</th><th>verdict</th>"
             "<th class=\"n\">reps</th><th class=\"n\">distinct outputs</th>"
             "<th class=\"n\">distinct sets</th><th class=\"n\">= reference</th>"
             "<th class=\"n\">flapping rows (bytes / sets)</th><th>violation rows</th>"
             "<th class=\"n\">kernel &micro;s median [min&ndash;max]</th>"
             "<th class=\"n\">scratch</th></tr></thead><tbody>");
    int shown = 0;
    cJSON_ArrayForEach(backend, backends) {
        if (shown++ == MAX_BACKENDS)
            break;
        bool failed = html_mark_of(html_member_string(backend, KEY_VERDICT)) == MARK_FAIL;
        html_putf(writer, "<tr%s><td><b>", failed ? " class=\"hot\"" : "");
        html_put_text(writer, html_member_string(backend, KEY_NAME), NAME_LIMIT);
        html_put(writer, "</b></td><td>");
        html_put_text(writer, html_member_string(backend, KEY_LEVEL), NAME_LIMIT);
        html_put(writer, "</td><td>");
        html_put_text(writer, html_member_string(backend, KEY_STATUS), NAME_LIMIT);
        html_put(writer, "</td><td>");
        html_put_badge(writer, html_member_string(backend, KEY_VERDICT));
        html_put(writer, "</td><td class=\"n\">");
        html_put_member_number(writer, backend, KEY_REPS);
        html_put(writer, "</td><td class=\"n\">");
        html_put_member_number(writer, backend, KEY_DISTINCT_OUTPUTS);
        html_put(writer, "</td><td class=\"n\">");
        html_put_member_number(writer, backend, KEY_DISTINCT_SETS);
        html_put(writer, "</td><td class=\"n\">");
        html_put_member_number(writer, backend, KEY_EQUALS_REFERENCE_REPS);
        html_put(writer, "</td><td class=\"n\">");
        html_put_member_number(writer, backend, KEY_FLAPPING_ROWS_TOTAL);
        html_put(writer, " / ");
        html_put_member_number(writer, backend, KEY_SET_FLAPPING_ROWS_TOTAL);
        html_put(writer, "</td><td>");
        put_violations(writer, html_member(backend, KEY_VIOLATIONS));
        html_put(writer, "</td><td class=\"n\">");
        put_time(writer, html_member(backend, KEY_KERNEL_TIME_US));
        html_put(writer, "</td><td class=\"n\">");
        html_put_bytes(writer, backend, KEY_SCRATCH_BYTES);
        html_put(writer, "</td></tr>");
    }
    html_put(writer, "</tbody></table>");

    /* Why: status reasons, verdict reasons, graph and batch-invariance results. */
    bool any_note = false;
    shown = 0;
    cJSON_ArrayForEach(backend, backends) {
        if (shown++ == MAX_BACKENDS)
            break;
        const char *reason = html_member_string(backend, KEY_REASON);
        const cJSON *reasons = html_member_array(backend, KEY_VERDICT_REASONS);
        const cJSON *graph = html_member(backend, KEY_GRAPH);
        const cJSON *batch = html_member(backend, KEY_BATCH_INVARIANCE);
        bool not_run = html_mark_of(html_member_string(backend, KEY_VERDICT)) == MARK_NOT_RUN;
        /* A not-run backend's verdict reasons only repeat its status reason. */
        bool list_reasons = cJSON_GetArraySize(reasons) > 0 && !not_run;
        if (!reason && !list_reasons && !cJSON_IsObject(graph) && !cJSON_IsObject(batch))
            continue;
        if (!any_note)
            html_put(writer, "<ul class=\"reasons\">");
        any_note = true;
        html_put(writer, "<li><b>");
        html_put_text(writer, html_member_string(backend, KEY_NAME), NAME_LIMIT);
        html_put(writer, "</b>: ");
        if (reason) {
            html_put_text(writer, html_member_string(backend, KEY_STATUS), NAME_LIMIT);
            html_put(writer, ": ");
            html_put_text(writer, reason, TEXT_LIMIT);
            html_put(writer, ". ");
        }
        if (list_reasons) {
            const cJSON *item;
            int listed = 0;
            cJSON_ArrayForEach(item, reasons) {
                if (listed++ == 12)
                    break;
                if (listed > 1)
                    html_put(writer, "; ");
                html_put_value(writer, item, TEXT_LIMIT);
            }
            html_put(writer, ". ");
        }
        if (cJSON_IsObject(graph)) {
            html_put(writer, "Graph: ran ");
            html_put_member_value(writer, graph, KEY_RAN);
            html_put(writer, ", ");
            html_put_member_number(writer, graph, KEY_REPS);
            html_put(writer, " replays, ");
            html_put_member_number(writer, graph, KEY_DISTINCT_OUTPUTS);
            html_put(writer, " distinct outputs, ");
            html_put_member_number(writer, graph, KEY_EQUALS_EAGER_REPS);
            html_put(writer, " equal to eager, median ");
            html_put_member_number(writer, html_member(graph, KEY_KERNEL_TIME_US), KEY_MEDIAN);
            html_put(writer, " &micro;s");
            if (html_member_string(graph, KEY_ERROR)) {
                html_put(writer, ", error: ");
                html_put_text(writer, html_member_string(graph, KEY_ERROR), TEXT_LIMIT);
            }
            html_put(writer, ". ");
        }
        if (cJSON_IsObject(batch)) {
            html_put(writer, "Batch invariance: ");
            html_put_member_number(writer, batch, KEY_ROWS_TESTED);
            html_put(writer, " rows in ");
            html_put_member_number(writer, batch, KEY_CONTEXTS_PER_ROW);
            html_put(writer, " contexts, ");
            html_put_member_number(writer, batch, KEY_DEPENDENT_ROWS_TOTAL);
            html_put(writer, " batch dependent (");
            html_put_member_number(writer, batch, KEY_SET_DEPENDENT_ROWS_TOTAL);
            html_put(writer, " by set)");
            if (html_member_string(batch, KEY_ERROR)) {
                html_put(writer, ", error: ");
                html_put_text(writer, html_member_string(batch, KEY_ERROR), TEXT_LIMIT);
            }
            if (html_number_or(batch, KEY_DEPENDENT_ROWS_TOTAL, 0) > 0) {
                html_put(writer, ", rows ");
                html_put_row_list(writer, html_member(batch, KEY_DEPENDENT_ROWS), NULL);
            }
            html_put(writer, ".");
        }
        html_put(writer, "</li>");
    }
    if (any_note)
        html_put(writer, "</ul>");
}

void html_write_timing(struct html_writer *writer, const cJSON *record)
{
    struct svg_range ranges[MAX_BACKENDS];
    size_t count = 0, timed = 0;
    const cJSON *backend;
    cJSON_ArrayForEach(backend, html_member_array(record, KEY_BACKENDS)) {
        if (count == MAX_BACKENDS)
            break;
        const cJSON *times = html_member(backend, KEY_KERNEL_TIME_US);
        struct svg_range *range = &ranges[count++];
        range->label = html_member_string(backend, KEY_NAME);
        if (!range->label)
            range->label = "n/a";
        range->valid = html_member_number(times, KEY_MEDIAN, &range->mid) &&
                       html_member_number(times, KEY_MIN, &range->low) &&
                       html_member_number(times, KEY_MAX, &range->high) && range->low > 0 &&
                       range->mid >= range->low && range->high >= range->mid;
        timed += range->valid;
    }
    if (timed == 0)
        return;
    html_put(writer, "<div class=\"panel\">");
    svg_range_plot(&writer->out, "Kernel time per call (median, min to max)",
                   "microseconds, log scale", ranges, count, 400);
    html_put(writer, "</div>");
}

static void put_pvo_cell(struct html_writer *writer, const cJSON *predicted, const char *name,
                         bool alarming)
{
    double value;
    bool has = html_member_number(predicted, name, &value);
    html_putf(writer, "<td class=\"n%s\">", has && alarming && value > 0 ? " warn" : "");
    html_put_member_number(writer, predicted, name);
    html_put(writer, "</td>");
}

void html_write_predicted_vs_observed(struct html_writer *writer, const cJSON *record)
{
    const cJSON *backend;
    html_put(writer, "<div class=\"panel\"><b>Predicted by the census vs observed</b> "
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
    cJSON_ArrayForEach(backend, html_member_array(record, KEY_BACKENDS)) {
        if (shown++ == MAX_BACKENDS)
            break;
        const cJSON *predicted = html_member(backend, KEY_PREDICTED_VS_OBSERVED);
        /* The staging model names the buffer whose overflow is predicted: a tooltip, to keep
         * the table narrow enough to sit beside the timing plot. */
        const char *staging = html_member_string(predicted, KEY_STAGING_MODEL);
        html_put(writer, "<tr><td title=\"staging model: ");
        html_put_text(writer, staging ? staging : "none", NAME_LIMIT);
        html_put(writer, "\">");
        html_put_text(writer, html_member_string(backend, KEY_NAME), NAME_LIMIT);
        html_put(writer, "</td>");
        put_pvo_cell(writer, predicted, KEY_UNDERDETERMINED_ROWS, false);
        put_pvo_cell(writer, predicted, KEY_SET_FLAPPING_ROWS, false);
        put_pvo_cell(writer, predicted, KEY_SET_FLAPPING_AND_UNDERDETERMINED, false);
        put_pvo_cell(writer, predicted, KEY_SET_FLAPPING_UNEXPLAINED, true);
        put_pvo_cell(writer, predicted, KEY_PREDICTED_OVERFLOW_ROWS, false);
        put_pvo_cell(writer, predicted, KEY_WRONG_ROWS, false);
        put_pvo_cell(writer, predicted, KEY_WRONG_AND_PREDICTED_OVERFLOW, false);
        put_pvo_cell(writer, predicted, KEY_WRONG_NOT_PREDICTED_OVERFLOW, true);
        html_put(writer, "</tr>");
    }
    html_put(writer, "</tbody></table>");
    /* The rows to start triage from. */
    shown = 0;
    cJSON_ArrayForEach(backend, html_member_array(record, KEY_BACKENDS)) {
        if (shown++ == MAX_BACKENDS)
            break;
        const cJSON *predicted = html_member(backend, KEY_PREDICTED_VS_OBSERVED);
        static const char *const lists[2] = { KEY_SET_FLAPPING_UNEXPLAINED_LIST,
                                              KEY_WRONG_NOT_PREDICTED_OVERFLOW_LIST };
        static const char *const what[2] = { "unexplained set flapping", "unexplained wrong" };
        for (int i = 0; i < 2; i++) {
            const cJSON *rows = html_member_array(predicted, lists[i]);
            if (cJSON_GetArraySize(rows) == 0)
                continue;
            html_put(writer, "<p class=\"note\"><b>");
            html_put_text(writer, html_member_string(backend, KEY_NAME), NAME_LIMIT);
            html_putf(writer, "</b> %s rows: ", what[i]);
            html_put_row_list(writer, rows, NULL);
            html_put(writer, "</p>");
        }
    }
    html_put(writer, "</div>");
}
