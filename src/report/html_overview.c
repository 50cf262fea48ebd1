/* The top of the page: head and style, the header with the run's and the gate's verdicts, the
 * context, and one row per backend summarising every record (html_page.h). */
#include "html_page.h"

#include <stdlib.h>
#include <string.h>

/* ---- per-backend summaries ------------------------------------------------------------------ */

struct backend_summary *html_backend_summary_for(struct html_writer *writer, const char *name)
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
double html_backend_wrong_rows(const cJSON *backend)
{
    double wrong;
    if (html_member_number(html_member(backend, KEY_PREDICTED_VS_OBSERVED), KEY_WRONG_ROWS, &wrong))
        return wrong;
    return html_number_or(
        html_member(html_member(backend, KEY_VIOLATIONS), violation_name(CHECK_WRONG_SET)),
        KEY_ROWS, 0);
}

/* Whether a violation kind named name is one of the wrong kinds (wrong_set, short). */
static bool is_wrong_kind(const char *name)
{
    for (unsigned kind = 0; kind < (unsigned)CHECK_KIND_COUNT; kind++)
        if ((VIOLATION_WRONG_KINDS & (1u << kind)) && strcmp(name, violation_name(kind)) == 0)
            return true;
    return false;
}

static double backend_other_violation_rows(const cJSON *backend)
{
    double total = 0;
    const cJSON *kind;
    cJSON_ArrayForEach(kind, html_member(backend, KEY_VIOLATIONS)) {
        if (!kind->string || is_wrong_kind(kind->string))
            continue;
        total += html_number_or(kind, KEY_ROWS, 0);
    }
    return total;
}

void html_summarize_backends(struct html_writer *writer, const cJSON *report)
{
    const cJSON *item;
    /* The context's order first, then any backend the records add. */
    cJSON_ArrayForEach(item, html_member_array(html_member(report, KEY_CONTEXT), KEY_BACKENDS)) {
        if (cJSON_IsString(item) && item->valuestring)
            html_backend_summary_for(writer, item->valuestring);
    }
    const cJSON *record;
    cJSON_ArrayForEach(record, html_member_array(report, KEY_RECORDS)) {
        const cJSON *backend;
        cJSON_ArrayForEach(backend, html_member_array(record, KEY_BACKENDS)) {
            struct backend_summary *summary =
                html_backend_summary_for(writer, html_member_string(backend, KEY_NAME));
            if (!summary)
                continue;
            if (!summary->level)
                summary->level = html_member_string(backend, KEY_LEVEL);
            summary->runs++;
            switch (html_mark_of(html_member_string(backend, KEY_VERDICT))) {
            case MARK_PASS: summary->pass++; break;
            case MARK_FAIL: summary->fail++; break;
            case MARK_NOT_RUN: summary->not_run++; break;
            default: summary->other++; break;
            }
            double value;
            if (html_number_or(backend, KEY_DISTINCT_SETS, 0) > 1)
                summary->set_flapping_records++;
            if (html_member_number(backend, KEY_DISTINCT_OUTPUTS, &value)) {
                if (!summary->has_distinct || value > summary->max_distinct_outputs)
                    summary->max_distinct_outputs = value;
                summary->has_distinct = true;
            }
            summary->wrong_rows += clamp_count(html_backend_wrong_rows(backend));
            summary->other_violation_rows += clamp_count(backend_other_violation_rows(backend));
            const cJSON *predicted = html_member(backend, KEY_PREDICTED_VS_OBSERVED);
            summary->unexplained_rows +=
                clamp_count(html_number_or(predicted, KEY_SET_FLAPPING_UNEXPLAINED, 0)) +
                clamp_count(html_number_or(predicted, KEY_WRONG_NOT_PREDICTED_OVERFLOW, 0));
            if (html_member_number(html_member(backend, KEY_KERNEL_TIME_US), KEY_MEDIAN, &value) &&
                value > 0)
                backend_summary_add_median(writer, summary, value);
        }
    }
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

void html_write_head(struct html_writer *writer, const cJSON *report)
{
    const cJSON *context = html_member(report, KEY_CONTEXT);
    html_put(writer,
             "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n"
             "<meta http-equiv=\"Content-Security-Policy\" content=\"default-src 'none'; "
             "style-src 'unsafe-inline'\">\n"
             "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n"
             "<meta name=\"generator\" content=\"dsatopk-audit\">\n<title>dsatopk-audit report");
    const char *device = html_member_string(html_member(context, KEY_DEVICE), KEY_NAME);
    const char *time = html_member_string(context, KEY_UTC_TIME);
    if (device) {
        html_put(writer, " \xE2\x80\x94 ");
        html_put_text(writer, device, NAME_LIMIT);
    }
    if (time) {
        html_put(writer, " \xE2\x80\x94 ");
        html_put_text(writer, time, NAME_LIMIT);
    }
    html_put(writer, "</title>\n<style>");
    html_put(writer, page_style);
    html_put(writer, "</style>\n</head>\n<body>\n<main>\n");
}

static const char *run_overall(const struct html_writer *writer)
{
    uint64_t pass = 0, fail = 0;
    for (size_t i = 0; i < writer->backend_count; i++) {
        pass += writer->backends[i].pass;
        fail += writer->backends[i].fail;
    }
    return verdict_name(fail ? VERDICT_FAIL : pass ? VERDICT_PASS : VERDICT_NOT_RUN);
}

void html_write_header(struct html_writer *writer, const cJSON *report, const cJSON *verdict)
{
    const cJSON *context = html_member(report, KEY_CONTEXT);
    const cJSON *device = html_member(context, KEY_DEVICE);
    html_put(writer, "<header class=\"top\"><h1>dsatopk-audit report</h1><span class=\"sub\">");
    if (cJSON_IsObject(device))
        html_put_text(writer, html_member_string(device, KEY_NAME), NAME_LIMIT);
    else
        html_put(writer, "no GPU");
    html_put(writer, " &middot; ");
    html_put_text(writer, html_member_string(context, KEY_HOST), NAME_LIMIT);
    html_put(writer, " &middot; ");
    html_put_text(writer, html_member_string(context, KEY_UTC_TIME), NAME_LIMIT);
    html_put(writer, "</span><span>run ");
    html_put_badge(writer, run_overall(writer));
    html_put(writer, "</span>");
    if (verdict) {
        html_put(writer, "<span>gate ");
        html_put_badge(writer, cJSON_IsObject(verdict) ? html_gate_overall(writer, verdict) : NULL);
        html_put(writer, "</span>");
    }
    html_put(writer, "</header>\n");
    if (html_member_bool(report, KEY_COMPLETE) == 0) {
        html_put(writer, "<div class=\"banner\">INCOMPLETE run: ");
        html_put_text(writer, html_member_string(report, KEY_STOP_REASON), TEXT_LIMIT);
        html_put(writer, "</div>");
    }
}

static void put_context_item(struct html_writer *writer, const char *label, bool wide)
{
    html_putf(writer, "<dt>%s</dt><dd%s>", label, wide ? " class=\"wide\"" : "");
}

void html_write_context(struct html_writer *writer, const cJSON *report)
{
    const cJSON *context = html_member(report, KEY_CONTEXT);
    const cJSON *device = html_member(context, KEY_DEVICE);
    html_put(writer, "<section id=\"context\"><h2>Context</h2><dl class=\"ctx\">");
    put_context_item(writer, "GPU", false);
    if (cJSON_IsObject(device)) {
        html_put_text(writer, html_member_string(device, KEY_NAME), NAME_LIMIT);
        html_put(writer, " (compute capability ");
        html_put_text(writer, html_member_string(device, KEY_COMPUTE_CAPABILITY), 16);
        html_put(writer, ", ");
        html_put_member_number(writer, device, KEY_SM_COUNT);
        html_put(writer, " SMs)");
    } else {
        html_put(writer, "none: ");
        html_put_text(writer, html_member_string(context, KEY_DEVICE_UNAVAILABLE_REASON),
                      TEXT_LIMIT);
    }
    html_put(writer, "</dd>");
    put_context_item(writer, "driver / runtime", false);
    html_put(writer, "CUDA ");
    html_put_text(writer, html_member_string(device, KEY_DRIVER_VERSION), 16);
    html_put(writer, " / ");
    html_put_text(writer, html_member_string(device, KEY_RUNTIME_VERSION), 16);
    html_put(writer, "</dd>");
    put_context_item(writer, "shared memory", false);
    html_put_bytes(writer, device, KEY_SMEM_PER_SM_BYTES);
    html_put(writer, " per SM, ");
    html_put_bytes(writer, device, KEY_SMEM_PER_BLOCK_OPTIN_BYTES);
    html_put(writer, " per block");
    if (html_member_bool(device, KEY_SMEM_EMULATED) == 1) {
        html_put(writer, " <b>(emulated; the hardware reports ");
        html_put_bytes(writer, device, KEY_REPORTED_SMEM_PER_SM_BYTES);
        html_put(writer, ")</b>");
    }
    html_put(writer, "</dd>");
    put_context_item(writer, "memory", false);
    html_put_bytes(writer, device, KEY_GLOBAL_MEMORY_BYTES);
    html_put(writer, ", L2 ");
    html_put_bytes(writer, device, KEY_L2_BYTES);
    html_put(writer, "</dd>");
    put_context_item(writer, "tool", false);
    if (html_member_string(context, KEY_VERSION_STRING))
        html_put_text(writer, html_member_string(context, KEY_VERSION_STRING), NAME_LIMIT);
    else
        html_put_text(writer, html_member_string(context, KEY_TOOL_VERSION), NAME_LIMIT);
    html_put(writer, "</dd>");
    put_context_item(writer, "time (UTC)", false);
    html_put_text(writer, html_member_string(context, KEY_UTC_TIME), NAME_LIMIT);
    html_put(writer, "</dd>");
    put_context_item(writer, "host", false); /* a label, not a key */
    html_put_text(writer, html_member_string(context, KEY_HOST), NAME_LIMIT);
    html_put(writer, "</dd>");
    put_context_item(writer, "replays", false);
    html_put_member_number(writer, context, KEY_REPS);
    html_put(writer, " reps, noise ");
    html_put_text(writer, html_member_string(context, KEY_NOISE), NAME_LIMIT);
    html_put(writer, ", seed ");
    html_put_member_number(writer, context, KEY_SEED);
    html_put(writer, "</dd>");
    put_context_item(writer, "modes", false);
    html_put(writer, "graph ");
    html_put_member_value(writer, context, KEY_GRAPH);
    html_put(writer, ", batch invariance ");
    html_put_member_value(writer, context, KEY_BATCH_INVARIANCE);
    html_put(writer, ", k ");
    if (cJSON_IsNumber(html_member(context, KEY_K_OVERRIDE)))
        html_put_member_number(writer, context, KEY_K_OVERRIDE);
    else
        html_put(writer, "per record");
    double emulated;
    if (html_member_number(html_member(context, KEY_EMULATION), KEY_SMEM_PER_SM_BYTES, &emulated)) {
        html_put(writer, ", emulated smem ");
        html_put_number(writer, emulated);
        html_put(writer, " B/SM");
    }
    html_put(writer, "</dd>");
    put_context_item(writer, "report", false); /* a label, not a key */
    html_put(writer, "complete ");
    html_put_member_value(writer, report, KEY_COMPLETE);
    html_put(writer, ", exit code ");
    html_put_member_number(writer, report, KEY_EXIT_CODE);
    html_put(writer, ", schema ");
    html_put_text(writer, html_member_string(report, KEY_SCHEMA), NAME_LIMIT);
    html_put(writer, " v");
    html_put_member_number(writer, report, KEY_SCHEMA_VERSION);
    html_put(writer, "</dd>");
    put_context_item(writer, "command line", true);
    html_put(writer, "<code>");
    html_put_text(writer, html_member_string(context, KEY_COMMAND_LINE), 2000);
    html_put(writer, "</code></dd></dl>");

    const cJSON *errors = html_member_array(report, KEY_INPUT_ERRORS);
    int error_count = cJSON_GetArraySize(errors);
    if (error_count > 0) {
        html_putf(writer,
                  "<h3>Input errors (%d)</h3><table><thead><tr><th>file</th><th>record</th>"
                  "<th>kind</th><th>message</th></tr></thead><tbody>",
                  error_count);
        const cJSON *error;
        int shown = 0;
        cJSON_ArrayForEach(error, errors) {
            if (shown++ == INPUT_ERRORS_LISTED)
                break;
            html_put(writer, "<tr><td>");
            html_put_text(writer, html_member_string(error, KEY_FILE), TEXT_LIMIT);
            html_put(writer, "</td><td class=\"n\">");
            html_put_member_number(writer, error, KEY_RECORD);
            html_put(writer, "</td><td>");
            html_put_text(writer, html_member_string(error, KEY_KIND), NAME_LIMIT);
            html_put(writer, "</td><td>");
            html_put_text(writer, html_member_string(error, KEY_MESSAGE), TEXT_LIMIT);
            html_put(writer, "</td></tr>");
        }
        html_put(writer, "</tbody></table>");
        if (error_count > INPUT_ERRORS_LISTED)
            html_putf(writer, "<p class=\"note\">First %d of %d input errors shown.</p>",
                      INPUT_ERRORS_LISTED, error_count);
    }
    html_put(writer, "</section>\n");
}

void html_write_backend_table(struct html_writer *writer, bool with_gate)
{
    html_put(writer, "<section id=\"backends\"><h2>Verdict per backend</h2>");
    if (writer->backend_count == 0) {
        html_put(writer, "<p>No backend in this report.</p></section>");
        return;
    }
    html_put(writer, "<table><thead><tr><th>backend</th><th>level</th><th>verdict</th>"
                     "<th class=\"n\">runs</th><th class=\"n\">pass</th><th class=\"n\">fail</th>"
                     "<th class=\"n\">not run</th>");
    if (with_gate)
        html_put(writer, "<th>gate</th>");
    html_put(writer,
             "<th class=\"n\" title=\"records with more than one distinct index set\">"
             "records flapping</th><th class=\"n\">wrong rows</th>"
             "<th class=\"n\" title=\"rows with violations other than wrong_set and short, "
             "summed over kinds\">other violations</th>"
             "<th class=\"n\" title=\"set flapping or wrong rows the census does not "
             "predict\">unexplained rows</th><th class=\"n\">max distinct outputs</th>"
             "<th class=\"n\" title=\"median over records of the median kernel time per "
             "call, under the run's noise\">median time (&micro;s)</th></tr></thead><tbody>");
    for (size_t i = 0; i < writer->backend_count; i++) {
        struct backend_summary *summary = &writer->backends[i];
        const char *verdict = verdict_name(summary->fail   ? VERDICT_FAIL
                                           : summary->pass ? VERDICT_PASS
                                                           : VERDICT_NOT_RUN);
        if (summary->runs == 0)
            verdict = NULL;
        html_putf(writer, "<tr%s><td><b>", summary->fail ? " class=\"hot\"" : "");
        html_put_text(writer, summary->name, NAME_LIMIT);
        html_put(writer, "</b></td><td>");
        html_put_text(writer, summary->level, NAME_LIMIT);
        html_put(writer, "</td><td>");
        if (verdict)
            html_put_badge(writer, verdict);
        else
            html_put(writer, "<span class=\"muted\">not in any record</span>");
        html_putf(writer,
                  "</td><td class=\"n\">%llu</td><td class=\"n\">%llu</td><td class=\"n\">%llu"
                  "</td><td class=\"n\">%llu</td>",
                  (unsigned long long)summary->runs, (unsigned long long)summary->pass,
                  (unsigned long long)summary->fail, (unsigned long long)summary->not_run);
        if (with_gate) {
            html_put(writer, "<td>");
            bool any = false;
            for (int s = 0; s < GATE_STATUS_COUNT; s++) {
                if (!summary->gate[s])
                    continue;
                static const char *const classes[] = { "pass", "fail", "tolerated", "missing" };
                html_putf(writer, "<span class=\"chip %s\">%llu %s</span>", classes[s],
                          (unsigned long long)summary->gate[s],
                          gate_status_name((enum gate_status)s));
                any = true;
            }
            if (!any)
                html_put(writer, "<span class=\"muted\">&mdash;</span>");
            html_put(writer, "</td>");
        }
        html_putf(writer,
                  "<td class=\"n\">%llu</td><td class=\"n\">%llu</td><td class=\"n\">%llu</td>",
                  (unsigned long long)summary->set_flapping_records,
                  (unsigned long long)summary->wrong_rows,
                  (unsigned long long)summary->other_violation_rows);
        html_putf(writer, "<td class=\"n%s\">%llu</td><td class=\"n\">",
                  summary->unexplained_rows ? " warn" : "",
                  (unsigned long long)summary->unexplained_rows);
        if (summary->has_distinct)
            html_put_number(writer, summary->max_distinct_outputs);
        else
            html_put_text(writer, NULL, 0);
        html_put(writer, "</td><td class=\"n\">");
        if (summary->median_count) {
            qsort(summary->medians, summary->median_count, sizeof(double), compare_doubles);
            html_put_number(writer, summary->medians[summary->median_count / 2]);
        } else {
            html_put_text(writer, NULL, 0);
        }
        html_put(writer, "</td></tr>");
    }
    html_put(writer, "</tbody></table>");
    if (writer->backends_truncated)
        html_putf(writer, "<p class=\"note\">Only the first %d backends are summarized.</p>",
                  MAX_BACKENDS);
    html_put(writer, "</section>\n");
}
