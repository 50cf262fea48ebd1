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

#include <stdlib.h>

#include "html_page.h"
#include "json_util.h"

static bool record_fails(const cJSON *record)
{
    if (html_engine_fails(record))
        return true;
    const cJSON *backend;
    cJSON_ArrayForEach(backend, html_member_array(record, KEY_BACKENDS))
        if (html_mark_of(html_member_string(backend, KEY_VERDICT)) == MARK_FAIL)
            return true;
    return false;
}

static bool record_is_interesting(const cJSON *record)
{
    const cJSON *backend;
    cJSON_ArrayForEach(backend, html_member_array(record, KEY_BACKENDS))
        if (html_number_or(backend, KEY_DISTINCT_SETS, 0) > 1 ||
            html_backend_wrong_rows(backend) > 0)
            return true;
    return false;
}

static void write_records(struct html_writer *writer, const cJSON *report)
{
    const cJSON *records = html_member_array(report, KEY_RECORDS);
    int count = cJSON_GetArraySize(records);
    html_put(writer, "<section id=\"records\">");
    html_putf(writer, "<h2>Records (%d)</h2>", count);
    if (!records) {
        html_put(writer, "<p>The report has no record list: n/a.</p></section>");
        return;
    }
    if (count == 0) {
        html_put(writer, "<p>No record was replayed.</p></section>");
        return;
    }

    /* One record is unfolded: the first that fails (run or gate), else the first that flapped
     * or was wrong; the others are listed as links. */
    const cJSON *record;
    size_t position = 0, failing = 0, interesting = 0;
    long open_position = -1;
    cJSON_ArrayForEach(record, records) {
        double index = html_number_or(record, KEY_INDEX, -1);
        enum gate_status gate =
            html_gate_worst_for_record(writer, html_member_string(record, KEY_FILE), index);
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
    html_putf(writer,
              "<p>%zu record(s) with a failing backend, %zu with set flapping or wrong rows.",
              failing, interesting);
    if (failing + interesting > 0) {
        html_put(writer, " Start with: ");
        size_t links = 0;
        position = 0;
        cJSON_ArrayForEach(record, records) {
            double index = html_number_or(record, KEY_INDEX, -1);
            enum gate_status gate =
                html_gate_worst_for_record(writer, html_member_string(record, KEY_FILE), index);
            bool fails = record_fails(record) || gate == GATE_FAIL || gate == GATE_MISSING;
            if ((failing ? fails : record_is_interesting(record)) && links < ATTENTION_LINKS) {
                html_putf(writer, "%s<a href=\"#rec-%zu\">", links ? ", " : "", position);
                html_put_record_name(writer, record);
                html_put(writer, "</a>");
                links++;
            }
            position++;
        }
        size_t pool = failing ? failing : interesting;
        if (pool > links)
            html_putf(writer, " and %zu more", pool - links);
        html_put(writer, ".");
    }
    html_put(writer, " Click a record for its census, backends and flapping rows.</p>");

    html_put(writer, "<div class=\"rec-head\"><span></span><span>#</span><span>record</span>"
                     "<span>rows &times; L</span><span>k</span><span>zeros</span>"
                     "<span>underdet.</span><span>verdict per backend</span></div>");
    position = 0;
    cJSON_ArrayForEach(record, records) {
        double index = html_number_or(record, KEY_INDEX, -1);
        enum gate_status gate =
            html_gate_worst_for_record(writer, html_member_string(record, KEY_FILE), index);
        html_putf(writer, "<details class=\"rec\" id=\"rec-%zu\"%s>", position,
                  (long)position == open_position ? " open" : "");
        html_write_record_summary(writer, record, position, gate);
        html_put(writer, "<div class=\"body\">");
        if (!cJSON_IsObject(record)) {
            html_put(writer, "<p>This record entry is not an object: n/a.</p></div></details>\n");
            position++;
            continue;
        }
        html_write_record_facts(writer, record);
        html_write_census(writer, record);
        html_write_backend_details(writer, record);
        html_write_engine(writer, record);
        html_put(writer, "<div class=\"panels\">");
        html_write_predicted_vs_observed(writer, record);
        html_write_timing(writer, record);
        html_put(writer, "</div>");
        html_write_record_gate(writer, record);
        html_write_flapping(writer, record);
        html_put(writer, "</div></details>\n");
        position++;
        if (writer->out.failed)
            break;
    }
    html_put(writer, "</section>\n");
}

static void write_footer(struct html_writer *writer, const cJSON *report)
{
    html_put(writer, "<footer>Generated by dsatopk-audit from a ");
    html_put_text(writer, html_member_string(report, KEY_SCHEMA), NAME_LIMIT);
    html_put(writer, " document (schema version ");
    html_put_member_number(writer, report, KEY_SCHEMA_VERSION);
    html_put(writer, "). Self-contained: no script, no external resource. Field definitions: "
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

    html_summarize_backends(writer, report);
    if (verdict)
        html_collect_gate(writer, verdict);
    html_write_head(writer, report);
    html_write_header(writer, report, verdict);
    html_write_context(writer, report);
    html_write_backend_table(writer, verdict != NULL);
    html_write_engine_overview(writer, report);
    if (verdict)
        html_write_gate_section(writer, verdict);
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
