/* The engine's own selection on the HTML page (docs/REPORT.md "`records[].engine`"): a line
 * under the per-backend table with the report's counts, a chip in each record's summary line,
 * and in the record's section the verdict, the contract, the rows per kind and the wrong rows
 * with the indices they miss or add. Read defensively like every part of the page. */
#include "html_page.h"

/* Wrong rows described in a record's section; indices shown per list. */
#define ENGINE_ROWS_SHOWN 32
#define ENGINE_INDICES_SHOWN 8

bool html_engine_fails(const cJSON *record)
{
    const cJSON *engine = html_member(record, KEY_ENGINE);
    return cJSON_IsObject(engine) &&
           html_mark_of(html_member_string(engine, KEY_VERDICT)) == MARK_FAIL;
}

void html_write_engine_overview(struct html_writer *writer, const cJSON *report)
{
    const cJSON *counts = html_member(html_member(report, KEY_SUMMARY), KEY_ENGINE);
    if (!cJSON_IsObject(counts) || html_number_or(counts, KEY_RECORDS, 0) <= 0)
        return;
    html_put(writer, "<section id=\"engine\"><h2>The engine's own selections</h2><p>");
    html_put_member_number(writer, counts, KEY_RECORDS);
    html_put(writer, " record(s) carry the engine's selection, judged against the CPU reference: ");
    html_put_member_number(writer, counts, verdict_name(VERDICT_PASS));
    html_put(writer, " pass, ");
    html_put_member_number(writer, counts, verdict_name(VERDICT_FAIL));
    html_put(writer, " fail. Rows: ");
    html_put_member_number(writer, counts, engine_row_class_name(ENGINE_ROW_EXACT));
    html_put(writer, " exact, ");
    html_put_member_number(writer, counts, engine_row_class_name(ENGINE_ROW_TIE_VARIANT));
    html_put(writer, " tie variants (underdetermined rows the engine resolved its own way), ");
    html_put_member_number(writer, counts, engine_row_class_name(ENGINE_ROW_WRONG));
    html_put(writer, " wrong.</p></section>\n");
}

void html_put_engine_chip(struct html_writer *writer, const cJSON *record)
{
    const cJSON *engine = html_member(record, KEY_ENGINE);
    if (!cJSON_IsObject(engine))
        return;
    const bool failed = html_mark_of(html_member_string(engine, KEY_VERDICT)) == MARK_FAIL;
    const cJSON *by_kind = html_member(engine, KEY_ROWS_BY_KIND);
    html_putf(writer, "<span class=\"chip %s\">engine %s", failed ? "fail" : "pass",
              failed ? "<b>FAIL</b>" : "pass");
    double wrong = html_number_or(by_kind, engine_row_class_name(ENGINE_ROW_WRONG), 0);
    double ties = html_number_or(by_kind, engine_row_class_name(ENGINE_ROW_TIE_VARIANT), 0);
    if (wrong > 0)
        html_putf(writer, " &middot; %.0f wrong", wrong);
    if (ties > 0)
        html_putf(writer, " &middot; %.0f tie variants", ties);
    html_put(writer, "</span>");
}

/* A list of missing or extra candidates: index (-> translated), score, distance to the k-th. */
static void put_notes(struct html_writer *writer, const cJSON *row, const char *key,
                      const char *total_key, const char *distance_key, const char *ulps_key)
{
    const cJSON *notes = html_member_array(row, key);
    const cJSON *note;
    int shown = 0;
    cJSON_ArrayForEach(note, notes) {
        if (shown++ == ENGINE_INDICES_SHOWN)
            break;
        if (shown > 1)
            html_put(writer, ", ");
        html_put_member_number(writer, note, KEY_INDEX);
        if (html_number_or(note, KEY_TRANSLATED, -1) != html_number_or(note, KEY_INDEX, -1)) {
            html_put(writer, "&rarr;");
            html_put_member_number(writer, note, KEY_TRANSLATED);
        }
        html_put(writer, " <span class=\"muted\">(");
        html_put_member_number(writer, note, KEY_SCORE);
        if (cJSON_IsNumber(html_member(note, distance_key))) {
            html_put(writer, "; ");
            html_put_member_number(writer, note, distance_key);
            html_put(writer, ", ");
            html_put_member_number(writer, note, ulps_key);
            html_put(writer, " ulp");
        }
        html_put(writer, ")</span>");
    }
    double total = html_number_or(row, total_key, 0);
    if (total > shown)
        html_putf(writer, " &hellip; %.0f in all", total);
    if (shown == 0)
        html_put(writer, "&ndash;");
}

static void put_indices(struct html_writer *writer, const cJSON *row, const char *key)
{
    const cJSON *item;
    int shown = 0;
    cJSON_ArrayForEach(item, html_member_array(row, key)) {
        if (shown++ == ENGINE_INDICES_SHOWN)
            break;
        if (shown > 1)
            html_put(writer, ", ");
        html_put_value(writer, item, NAME_LIMIT);
    }
    if (shown == 0)
        html_put(writer, "&ndash;");
}

static void write_wrong_rows(struct html_writer *writer, const cJSON *engine)
{
    const cJSON *rows = html_member_array(engine, KEY_WRONG_ROWS);
    if (cJSON_GetArraySize(rows) == 0)
        return;
    html_put(writer, "<table><thead><tr><th class=\"n\">row</th><th>kinds</th>"
                     "<th>missing (index, score; above the k-th value, ulp)</th>"
                     "<th>extra (index, score; below the k-th value, ulp)</th>"
                     "<th>duplicates</th><th>out of range</th></tr></thead><tbody>");
    const cJSON *row;
    int shown = 0;
    cJSON_ArrayForEach(row, rows) {
        if (shown++ == ENGINE_ROWS_SHOWN)
            break;
        html_put(writer, "<tr class=\"hot\"><td class=\"n\">");
        html_put_member_number(writer, row, KEY_ROW);
        html_put(writer, "</td><td>");
        put_indices(writer, row, KEY_KINDS);
        html_put(writer, "</td><td>");
        put_notes(writer, row, KEY_MISSING, KEY_MISSING_TOTAL, KEY_ABOVE_KTH, KEY_ABOVE_KTH_ULPS);
        html_put(writer, "</td><td>");
        put_notes(writer, row, KEY_EXTRA, KEY_EXTRA_TOTAL, KEY_BELOW_KTH, KEY_BELOW_KTH_ULPS);
        html_put(writer, "</td><td>");
        put_indices(writer, row, KEY_DUPLICATES);
        html_put(writer, "</td><td>");
        put_indices(writer, row, KEY_OUT_OF_RANGE_INDICES);
        html_put(writer, "</td></tr>");
    }
    html_put(writer, "</tbody></table>");
    double total = html_number_or(engine, KEY_WRONG_ROWS_TOTAL, 0);
    if (total > shown)
        html_putf(writer, "<p class=\"note\">%d of %.0f wrong rows shown (the report lists "
                          "more).</p>", shown, total);
}

void html_write_engine(struct html_writer *writer, const cJSON *record)
{
    const cJSON *engine = html_member(record, KEY_ENGINE);
    if (!cJSON_IsObject(engine))
        return;
    const cJSON *contract = html_member(engine, KEY_CONTRACT);
    const cJSON *by_kind = html_member(engine, KEY_ROWS_BY_KIND);
    html_put(writer, "<h3>The engine's own selection</h3><p>");
    html_put_badge(writer, html_member_string(engine, KEY_VERDICT));
    html_put(writer, " judged at k ");
    html_put_member_number(writer, engine, KEY_K);
    html_put(writer, " under the contract order ");
    html_put_text(writer, html_member_string(contract, KEY_ORDER), NAME_LIMIT);
    html_put(writer, ", tie_break ");
    html_put_text(writer, html_member_string(contract, KEY_TIE_BREAK), NAME_LIMIT);
    html_put(writer, " (from ");
    html_put_text(writer, html_member_string(engine, KEY_CONTRACT_FROM), NAME_LIMIT);
    html_put(writer, "): ");
    html_put_member_number(writer, by_kind, engine_row_class_name(ENGINE_ROW_EXACT));
    html_put(writer, " exact, ");
    html_put_member_number(writer, by_kind, engine_row_class_name(ENGINE_ROW_TIE_VARIANT));
    html_put(writer, " tie variants, ");
    html_put_member_number(writer, by_kind, engine_row_class_name(ENGINE_ROW_WRONG));
    html_put(writer, " wrong of ");
    html_put_member_number(writer, engine, KEY_ROWS);
    html_put(writer, " rows.");
    if (html_member_string(engine, KEY_REASON)) {
        html_put(writer, " ");
        html_put_text(writer, html_member_string(engine, KEY_STATUS), NAME_LIMIT);
        html_put(writer, ": ");
        html_put_text(writer, html_member_string(engine, KEY_REASON), TEXT_LIMIT);
    }
    html_put(writer, "</p>");
    const cJSON *reasons = html_member_array(engine, KEY_VERDICT_REASONS);
    if (cJSON_GetArraySize(reasons) > 0) {
        html_put(writer, "<ul class=\"reasons\">");
        const cJSON *item;
        int listed = 0;
        cJSON_ArrayForEach(item, reasons) {
            if (listed++ == 12)
                break;
            html_put(writer, "<li>");
            html_put_value(writer, item, TEXT_LIMIT);
            html_put(writer, "</li>");
        }
        html_put(writer, "</ul>");
    }
    write_wrong_rows(writer, engine);
    const cJSON *ties = html_member_array(engine, KEY_TIE_VARIANT_ROWS);
    if (cJSON_GetArraySize(ties) > 0) {
        html_put(writer, "<p class=\"note\">Tie variants (a valid top-k with other boundary ties "
                         "than the reference's): rows ");
        html_put_row_list(writer, ties, NULL);
        html_put(writer, ".</p>");
    }
}
