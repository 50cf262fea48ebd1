/* The page of `compare --html` (docs/TRIAGE.md "compare"): the runs, the summary in the seed
 * experiment's words, and one row per call with its groups of runs, the perturbation against
 * the boundary gap and the attribution; the calls that are not comparable with their reason.
 * Drawn with the report page's writer, head and escaping (html_page.h) from the compare
 * document, read defensively like a report. */
#include "html_page.h"
#include "html_report.h"

#include <stdlib.h>
#include <string.h>

#include "json_util.h"
#include "triage_keys.h"

/* Calls listed in the table at most. */
#define COMPARE_CALLS_SHOWN 2000

/* A group list as one letter per run (a = the first run's group, . absent). */
static void put_groups(struct html_writer *writer, const cJSON *groups)
{
    static const char symbols[] = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ";
    const cJSON *item;
    html_put(writer, "<code>");
    cJSON_ArrayForEach(item, groups) {
        double value = cJSON_IsNumber(item) ? item->valuedouble : -1;
        char symbol[2] = { value >= 0 && value < 52 ? symbols[(int)value] : '.', '\0' };
        html_put(writer, symbol);
    }
    html_put(writer, "</code>");
}

static void write_calls(struct html_writer *writer, const cJSON *calls)
{
    html_put(writer, "<table><thead><tr><th>call</th><th>scores</th><th>exact</th>"
                     "<th>engine</th><th class=\"n\">boundary gap min</th>"
                     "<th class=\"n\">largest |diff|</th><th class=\"n\">crossing</th>"
                     "<th class=\"n\">rows past the gap</th><th>attribution</th></tr></thead>"
                     "<tbody>");
    const cJSON *call;
    int shown = 0;
    cJSON_ArrayForEach(call, calls) {
        if (html_member_bool(call, KEY_COMPARABLE) != 1)
            continue;
        if (shown++ == COMPARE_CALLS_SHOWN)
            break;
        const char *attribution = html_member_string(call, KEY_ATTRIBUTION);
        const bool hot = attribution && strcmp(attribution, "none") != 0;
        html_putf(writer, "<tr%s><td>", hot ? " class=\"hot\"" : "");
        html_put_text(writer, html_member_string(call, KEY_CALL), NAME_LIMIT);
        html_put(writer, "</td><td>");
        put_groups(writer, html_member(call, KEY_SCORE_GROUPS));
        html_put(writer, "</td><td>");
        put_groups(writer, html_member(call, KEY_EXACT_GROUPS));
        html_put(writer, "</td><td>");
        put_groups(writer, html_member(call, KEY_ENGINE_GROUPS));
        html_put(writer, "</td><td class=\"n\">");
        html_put_member_number(writer, call, KEY_BOUNDARY_GAP_MIN);
        html_put(writer, "</td><td class=\"n\">");
        html_put_member_number(writer, call, KEY_LARGEST_ABS_DIFF);
        html_put(writer, "</td><td class=\"n\">");
        html_put_member_number(writer, call, KEY_LARGEST_CROSSING_PERTURBATION);
        html_put(writer, "</td><td class=\"n\">");
        html_put_member_number(writer, call, KEY_ROWS_PERTURBATION_EXCEEDS_GAP);
        html_put(writer, "</td><td><b>");
        html_put_text(writer, attribution, NAME_LIMIT);
        html_put(writer, "</b>");
        const cJSON *wrong;
        cJSON_ArrayForEach(wrong, html_member_array(call, KEY_ENGINE_WRONG)) {
            html_put(writer, "<br>run ");
            html_put_member_number(writer, wrong, KEY_RUN);
            html_put(writer, ": engine wrong on ");
            html_put_member_number(writer, wrong, KEY_WRONG_ROWS);
            html_put(writer, " row(s), row ");
            html_put_member_number(writer, wrong, KEY_FIRST_ROW);
            html_put(writer, " misses ");
            html_put_value(writer, html_member(wrong, KEY_MISSING), NAME_LIMIT);
        }
        html_put(writer, "</td></tr>");
    }
    html_put(writer, "</tbody></table>");
    bool any = false;
    cJSON_ArrayForEach(call, calls) {
        if (html_member_bool(call, KEY_COMPARABLE) != 0)
            continue;
        html_put(writer, any ? "" : "<h3>Not comparable</h3><ul class=\"reasons\">");
        any = true;
        html_put(writer, "<li><b>");
        html_put_text(writer, html_member_string(call, KEY_CALL), NAME_LIMIT);
        html_put(writer, "</b>: ");
        html_put_text(writer, html_member_string(call, KEY_REASON), TEXT_LIMIT);
        html_put(writer, "</li>");
    }
    if (any)
        html_put(writer, "</ul>");
}

int html_compare_write(const char *path, const cJSON *document, struct audit_error *err)
{
    struct html_writer *writer = calloc(1, sizeof(*writer));
    if (!writer)
        return audit_fail(err, AUDIT_ENOMEM, "%s: out of memory rendering the HTML page", path);
    text_buffer_init(&writer->out);
    const cJSON *summary = html_member(document, KEY_SUMMARY);
    const cJSON *alignment = html_member(document, KEY_ALIGNMENT);
    html_write_head(writer, document);
    html_put(writer, "<header class=\"top\"><h1>dsatopk-audit compare</h1><span class=\"sub\">");
    html_put_member_number(writer, summary, KEY_RUNS);
    html_put(writer, " runs &middot; ");
    html_put_text(writer, html_member_string(html_member(document, KEY_CONTEXT), KEY_UTC_TIME),
                  NAME_LIMIT);
    html_put(writer, "</span></header>\n<section id=\"compare\"><h2>Runs aligned call by call"
                     "</h2><p><b>");
    html_put_text(writer, html_member_string(summary, KEY_TEXT), TEXT_LIMIT);
    html_put(writer, "</b>.</p><p class=\"note\">Calls aligned by ");
    html_put_text(writer, html_member_string(alignment, KEY_BY), NAME_LIMIT);
    if (html_member_string(alignment, KEY_REASON)) {
        html_put(writer, " (");
        html_put_text(writer, html_member_string(alignment, KEY_REASON), TEXT_LIMIT);
        html_put(writer, ")");
    }
    html_put(writer, ". Groups: one letter per run, runs with the same letter have bit-identical "
                     "scores, the same exact selection or the same engine selection (a = the "
                     "first run's; . absent). Runs:");
    const cJSON *run;
    cJSON_ArrayForEach(run, html_member_array(document, KEY_RUNS)) {
        html_put(writer, " ");
        html_put_member_number(writer, run, KEY_RUN);
        html_put(writer, "&nbsp;");
        html_put_text(writer, html_file_basename(html_member_string(run, KEY_PATH)), NAME_LIMIT);
    }
    html_put(writer, ".</p>");
    write_calls(writer, html_member_array(document, KEY_CALLS));
    html_put(writer, "</section>\n<footer>Generated by dsatopk-audit from a ");
    html_put_text(writer, html_member_string(document, KEY_SCHEMA), NAME_LIMIT);
    html_put(writer, " document. Self-contained: no script, no external resource. Field "
                     "definitions: docs/TRIAGE.md.</footer>\n</main>\n</body>\n</html>\n");
    int status = writer->out.failed || !writer->out.data
                     ? audit_fail(err, AUDIT_ENOMEM, "%s: out of memory rendering the HTML page",
                                  path)
                     : json_write_text_atomic(path, writer->out.data, err);
    text_buffer_release(&writer->out);
    free(writer);
    return status;
}
