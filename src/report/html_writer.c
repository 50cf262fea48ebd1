/* Reading the untrusted report defensively and writing escaped, bounded text (html_page.h). */
#include "html_page.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

/* ---- defensive JSON access ------------------------------------------------------------------ */

const cJSON *html_member(const cJSON *object, const char *name)
{
    return cJSON_IsObject(object) ? cJSON_GetObjectItemCaseSensitive(object, name) : NULL;
}

bool html_member_number(const cJSON *object, const char *name, double *value)
{
    const cJSON *item = html_member(object, name);
    if (!cJSON_IsNumber(item) || !isfinite(item->valuedouble))
        return false;
    *value = item->valuedouble;
    return true;
}

double html_number_or(const cJSON *object, const char *name, double fallback)
{
    double value;
    return html_member_number(object, name, &value) ? value : fallback;
}

const char *html_member_string(const cJSON *object, const char *name)
{
    const cJSON *item = html_member(object, name);
    return cJSON_IsString(item) && item->valuestring ? item->valuestring : NULL;
}

/* 1 true, 0 false, -1 absent or not a boolean. */
int html_member_bool(const cJSON *object, const char *name)
{
    const cJSON *item = html_member(object, name);
    return cJSON_IsBool(item) ? cJSON_IsTrue(item) : -1;
}

const cJSON *html_member_array(const cJSON *object, const char *name)
{
    const cJSON *item = html_member(object, name);
    return cJSON_IsArray(item) ? item : NULL;
}

const char *html_first_string(const cJSON *object, const char *const *names)
{
    for (; *names; names++) {
        const char *text = html_member_string(object, *names);
        if (text)
            return text;
    }
    return NULL;
}

const char *html_file_basename(const char *path)
{
    const char *slash = path ? strrchr(path, '/') : NULL;
    return slash && slash[1] ? slash + 1 : path;
}

/* ---- output helpers ------------------------------------------------------------------------- */

void html_put(struct html_writer *writer, const char *html)
{
    text_append(&writer->out, html);
}

void html_putf(struct html_writer *writer, const char *format, ...)
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
void html_put_text(struct html_writer *writer, const char *text, size_t limit)
{
    if (text)
        text_append_escaped(&writer->out, text, limit);
    else
        html_put(writer, "<span class=\"na\">n/a</span>");
}

void html_put_number(struct html_writer *writer, double value)
{
    char text[40];
    if (!isfinite(value))
        snprintf(text, sizeof(text), "n/a");
    else if (value == floor(value) && fabs(value) < 1e15)
        snprintf(text, sizeof(text), "%.0f", value);
    else
        svg_format_value(value, text, sizeof(text));
    html_put(writer, text);
}

void html_put_member_number(struct html_writer *writer, const cJSON *object, const char *name)
{
    double value;
    if (html_member_number(object, name, &value))
        html_put_number(writer, value);
    else
        html_put_text(writer, NULL, 0);
}

/* Any JSON value as short text: strings escaped, numbers, yes/no, compact JSON for the rest. */
void html_put_value(struct html_writer *writer, const cJSON *item, size_t limit)
{
    if (cJSON_IsString(item)) {
        html_put_text(writer, item->valuestring, limit);
    } else if (cJSON_IsNumber(item) && isfinite(item->valuedouble)) {
        html_put_number(writer, item->valuedouble);
    } else if (cJSON_IsBool(item)) {
        html_put(writer, cJSON_IsTrue(item) ? "yes" : "no");
    } else if (cJSON_IsArray(item) || cJSON_IsObject(item)) {
        char *json = cJSON_PrintUnformatted(item);
        if (!json) {
            writer->out.failed = true;
            return;
        }
        html_put(writer, "<code>");
        html_put_text(writer, json, limit);
        html_put(writer, "</code>");
        free(json);
    } else {
        html_put_text(writer, NULL, 0);
    }
}

void html_put_member_value(struct html_writer *writer, const cJSON *object, const char *name)
{
    html_put_value(writer, html_member(object, name), TEXT_LIMIT);
}

void html_put_bytes(struct html_writer *writer, const cJSON *object, const char *name)
{
    double bytes;
    if (!html_member_number(object, name, &bytes)) {
        html_put_text(writer, NULL, 0);
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
    html_put(writer, text);
}

/* A verdict word of run or gate, in any letter case (the page shows what it is given). */
enum mark html_mark_of(const char *word)
{
    const struct {
        const char *name;
        enum mark mark;
    } marks[] = {
        { verdict_name(VERDICT_PASS), MARK_PASS },
        { verdict_name(VERDICT_FAIL), MARK_FAIL },
        { gate_status_name(GATE_TOLERATED), MARK_TOLERATED },
        { verdict_name(VERDICT_NOT_RUN), MARK_NOT_RUN },
        { gate_status_name(GATE_MISSING), MARK_MISSING },
    };
    for (size_t i = 0; word && i < sizeof(marks) / sizeof(marks[0]); i++)
        if (strcasecmp(word, marks[i].name) == 0)
            return marks[i].mark;
    return MARK_UNKNOWN;
}

/* A verdict as a text label on a coloured ground: the words carry the meaning without colour. */
void html_put_badge(struct html_writer *writer, const char *word)
{
    static const char *const classes[] = { "pass", "fail", "tolerated", "notrun", "missing",
                                            "notrun" };
    static const char *const labels[] = { "PASS", "FAIL", "TOLERATED", "NOT RUN", "MISSING", NULL };
    enum mark mark = html_mark_of(word);
    html_putf(writer, "<span class=\"badge %s\">", classes[mark]);
    if (labels[mark])
        html_put(writer, labels[mark]);
    else
        html_put_text(writer, word, NAME_LIMIT);
    html_put(writer, "</span>");
}

/* A row number of a list entry (a number, or an object with "row"); false for anything else. */
bool html_row_number(const cJSON *item, double *row)
{
    const cJSON *value = cJSON_IsObject(item) ? html_member(item, KEY_ROW) : item;
    if (!cJSON_IsNumber(value) || !isfinite(value->valuedouble) || value->valuedouble < 0 ||
        value->valuedouble != floor(value->valuedouble) || value->valuedouble > 9e15)
        return false;
    *row = value->valuedouble;
    return true;
}

static void put_row_run(struct html_writer *writer, double first, double last, int runs)
{
    if (runs)
        html_put(writer, ", ");
    html_put_number(writer, first);
    if (last > first) {
        html_put(writer, last == first + 1 ? ", " : "&ndash;");
        html_put_number(writer, last);
    }
}

/* A list of row numbers with consecutive rows joined ("0&ndash;63, 70"), at most LISTED_RUNS runs;
 * entries that are not row numbers print as n/a. why: only the objects whose "why" is this
 * ("" also takes those without one); NULL: every entry. */
void html_put_row_list(struct html_writer *writer, const cJSON *rows, const char *why)
{
    if (!cJSON_IsArray(rows)) {
        html_put_text(writer, NULL, 0);
        return;
    }
    int total = 0, runs = 0;
    bool in_run = false, truncated = false;
    double first = 0, last = 0, row;
    const cJSON *item;
    html_put(writer, "<span class=\"mono\">");
    cJSON_ArrayForEach(item, rows) {
        if (why) {
            const char *item_why = html_member_string(item, KEY_WHY);
            if (strcmp(item_why ? item_why : "", why) != 0)
                continue;
        }
        total++;
        if (truncated)
            continue;
        bool valid = html_row_number(item, &row);
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
            html_put(writer, runs++ ? ", " : "");
            html_put_text(writer, NULL, 0);
        }
    }
    if (in_run)
        put_row_run(writer, first, last, runs++);
    if (total == 0)
        html_put(writer, "none");
    html_put(writer, "</span>");
    if (truncated)
        html_putf(writer, " &hellip; <span class=\"muted\">(%d rows in all)</span>", total);
    else if (total > 2 && runs < total)
        html_putf(writer, " <span class=\"muted\">(%d rows)</span>", total);
}
