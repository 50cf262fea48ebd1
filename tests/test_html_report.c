/* Unit tests of the HTML report (src/report/html_*.c) and its SVG helpers (src/report/svg.c) on
 * hand-made report and verdict objects: the summary table has one row per backend, each record is
 * one <details>, the plots are there (histograms, timing, rows x reps maps), hostile strings come
 * out escaped and nothing can run or fetch, odd and missing fields print n/a, the rows x reps map
 * marks only what the report proves, gate verdicts of different shapes are found, and a report of
 * 300 records stays within its size budget. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>
#include <cjson/cJSON.h>

#include "error.h"
#include "html_report.h"
#include "svg.h"

/* The page of a typical record (64 rows, 5 backends, one flapping on every row over 25 reps)
 * must stay under this, so that 300 such records make a page a browser opens at once. */
#define BYTES_PER_RECORD_BUDGET (16 * 1024)
#define FIXED_BYTES_BUDGET (64 * 1024)

#define HOSTILE "<script>alert(1)</script>"
#define HOSTILE_ESCAPED "&lt;script&gt;alert(1)&lt;/script&gt;"

static char test_directory[] = "/tmp/dsatopk-html-test.XXXXXX";

static int make_directory(void **state)
{
    (void)state;
    return mkdtemp(test_directory) ? 0 : -1;
}

static int remove_directory(void **state)
{
    (void)state;
    char path[sizeof(test_directory) + 32];
    snprintf(path, sizeof(path), "%s/page.html", test_directory);
    unlink(path);
    return rmdir(test_directory);
}

/* ---- helpers -------------------------------------------------------------------------------- */

static char *read_whole_file(const char *path)
{
    FILE *file = fopen(path, "rb");
    assert_non_null(file);
    assert_int_equal(fseek(file, 0, SEEK_END), 0);
    long size = ftell(file);
    assert_true(size >= 0);
    rewind(file);
    char *text = malloc((size_t)size + 1);
    assert_non_null(text);
    assert_int_equal(fread(text, 1, (size_t)size, file), (size_t)size);
    text[size] = '\0';
    fclose(file);
    return text;
}

/* Renders report (and verdict) to a file and returns the page. */
static char *render(const cJSON *report, const cJSON *verdict)
{
    char path[sizeof(test_directory) + 32];
    struct audit_error err = { 0 };
    snprintf(path, sizeof(path), "%s/page.html", test_directory);
    int status = html_report_write(path, report, verdict, &err);
    if (status != AUDIT_OK)
        fail_msg("html_report_write: %s", err.message);
    return read_whole_file(path);
}

static size_t count(const char *haystack, const char *needle)
{
    size_t found = 0, length = strlen(needle);
    for (const char *at = strstr(haystack, needle); at; at = strstr(at + length, needle))
        found++;
    return found;
}

/* The text of <section id="ID">...</section> (a copy). */
static char *section(const char *page, const char *id)
{
    char opening[64];
    snprintf(opening, sizeof(opening), "<section id=\"%s\">", id);
    const char *start = strstr(page, opening);
    assert_non_null(start);
    const char *end = strstr(start, "</section>");
    assert_non_null(end);
    char *copy = strndup(start, (size_t)(end - start));
    assert_non_null(copy);
    return copy;
}

/* Whether an SVG <text class="CLASS" ...>LABEL</text> is in the page. */
static bool has_axis_label(const char *page, const char *css_class, const char *label)
{
    char opening[32], closing[48];
    snprintf(opening, sizeof(opening), "<text class=\"%s\"", css_class);
    snprintf(closing, sizeof(closing), ">%s</text>", label);
    for (const char *at = strstr(page, opening); at; at = strstr(at + 1, opening)) {
        const char *end = strchr(at, '>');
        if (end && strncmp(end, closing, strlen(closing)) == 0)
            return true;
    }
    return false;
}

/* A hash-like string per rep: rep r gets pattern[r]'s hash (pattern NULL: all the same). */
static cJSON *hash_list(unsigned reps, const unsigned *pattern)
{
    cJSON *list = cJSON_CreateArray();
    for (unsigned r = 0; r < reps; r++) {
        char hash[65];
        snprintf(hash, sizeof(hash), "%064x", pattern ? pattern[r] + 1 : 1);
        cJSON_AddItemToArray(list, cJSON_CreateString(hash));
    }
    return list;
}

static cJSON *make_census(unsigned rows, bool plateau)
{
    cJSON *census = cJSON_CreateObject();
    cJSON *list = cJSON_AddArrayToObject(census, "census");
    cJSON *per_k = cJSON_CreateObject();
    cJSON_AddItemToArray(list, per_k);
    cJSON_AddNumberToObject(per_k, "k", 16);
    cJSON_AddNumberToObject(per_k, "rows", rows);
    cJSON_AddNumberToObject(per_k, "rows_with_boundary", rows);
    cJSON_AddNumberToObject(per_k, "zero_fraction", plateau ? 0.75 : 0.0);
    cJSON_AddNumberToObject(per_k, "underdetermined_rows", plateau ? rows : 0);
    cJSON_AddNumberToObject(per_k, "radix_overflow_rows", 0);
    cJSON *tie = cJSON_AddObjectToObject(per_k, "tie_set");
    cJSON_AddNumberToObject(tie, "median", plateau ? 300 : 1);
    cJSON_AddNullToObject(cJSON_AddObjectToObject(per_k, "gap"), "min");
    cJSON *per_row = cJSON_AddArrayToObject(per_k, "per_row");
    for (unsigned b = 0; b < rows; b++) {
        cJSON *row = cJSON_CreateObject();
        cJSON_AddNumberToObject(row, "row", b);
        cJSON_AddNumberToObject(row, "tie_set", plateau ? 300 + b : 1);
        cJSON_AddBoolToObject(row, "underdetermined", plateau);
        cJSON_AddNumberToObject(row, "gap", plateau ? 0.0 : pow(10.0, -1.0 - (double)(b % 5)));
        cJSON_AddItemToArray(per_row, row);
    }
    return census;
}

/* A backend that ran reps times; flapping_rows of its rows differ from rep 0 in
 * reps_differing reps each; pattern gives each rep's distinct output. */
static cJSON *make_backend(const char *name, const char *verdict, unsigned reps,
                           const unsigned *pattern, unsigned flapping_rows, unsigned reps_differing)
{
    cJSON *backend = cJSON_CreateObject();
    cJSON_AddStringToObject(backend, "name", name);
    cJSON_AddStringToObject(backend, "level", "not_guaranteed");
    cJSON_AddStringToObject(backend, "status", "ok");
    cJSON_AddNullToObject(backend, "reason");
    cJSON_AddStringToObject(backend, "verdict", verdict);
    cJSON_AddItemToObject(backend, "verdict_reasons", cJSON_CreateArray());
    cJSON_AddNumberToObject(backend, "reps", reps);
    cJSON_AddItemToObject(backend, "output_sha256_per_rep", hash_list(reps, pattern));
    cJSON_AddNumberToObject(backend, "distinct_outputs", flapping_rows ? reps : 1);
    cJSON_AddNumberToObject(backend, "distinct_sets", flapping_rows ? reps : 1);
    cJSON *violations = cJSON_AddObjectToObject(backend, "violations");
    cJSON_AddNumberToObject(cJSON_AddObjectToObject(violations, "wrong_set"), "rows", 0);
    cJSON_AddNumberToObject(backend, "flapping_rows_total", flapping_rows);
    cJSON_AddNumberToObject(backend, "set_flapping_rows_total", flapping_rows);
    cJSON *list = cJSON_AddArrayToObject(backend, "flapping_rows");
    for (unsigned b = 0; b < flapping_rows; b++) {
        cJSON *row = cJSON_CreateObject();
        cJSON_AddNumberToObject(row, "row", b);
        cJSON_AddNumberToObject(row, "reps_differing", reps_differing);
        cJSON_AddNumberToObject(row, "reps_set_differing", reps_differing);
        cJSON_AddItemToArray(list, row);
    }
    cJSON *times = cJSON_AddObjectToObject(backend, "kernel_time_us");
    cJSON_AddNumberToObject(times, "median", 600);
    cJSON_AddNumberToObject(times, "min", 550);
    cJSON_AddNumberToObject(times, "max", 800);
    cJSON *predicted = cJSON_AddObjectToObject(backend, "predicted_vs_observed");
    cJSON_AddNumberToObject(predicted, "set_flapping_rows", flapping_rows);
    cJSON_AddNumberToObject(predicted, "wrong_rows", 0);
    cJSON_AddNumberToObject(predicted, "set_flapping_unexplained", 0);
    return backend;
}

static cJSON *make_record(const char *file, unsigned index, unsigned rows, bool plateau)
{
    cJSON *record = cJSON_CreateObject();
    cJSON_AddStringToObject(record, "file", file);
    cJSON_AddNumberToObject(record, "index", index);
    cJSON_AddNumberToObject(record, "rows", rows);
    cJSON_AddNumberToObject(record, "k", 16);
    cJSON_AddNumberToObject(record, "max_length", 4096);
    cJSON *metadata = cJSON_AddObjectToObject(record, "metadata");
    cJSON_AddStringToObject(metadata, "engine", "sglang");
    cJSON_AddItemToObject(record, "census", make_census(rows, plateau));
    cJSON_AddArrayToObject(record, "backends");
    return record;
}

static void add_backend(cJSON *record, cJSON *backend)
{
    cJSON_AddItemToArray(cJSON_GetObjectItem(record, "backends"), backend);
}

static cJSON *make_report(void)
{
    cJSON *report = cJSON_CreateObject();
    cJSON_AddStringToObject(report, "schema", "dsatopk-audit/report");
    cJSON_AddNumberToObject(report, "schema_version", 1);
    cJSON_AddBoolToObject(report, "complete", true);
    cJSON *context = cJSON_AddObjectToObject(report, "context");
    cJSON_AddStringToObject(context, "command_line", "dsatopk-audit run --reps 25");
    cJSON_AddStringToObject(context, "utc_time", "2026-11-29T10:09:20Z");
    cJSON_AddStringToObject(context, "host", "node");
    cJSON *device = cJSON_AddObjectToObject(context, "device");
    cJSON_AddStringToObject(device, "name", "NVIDIA H200");
    cJSON_AddStringToObject(device, "compute_capability", "9.0");
    cJSON *backends = cJSON_AddArrayToObject(context, "backends");
    cJSON_AddItemToArray(backends, cJSON_CreateString("radix"));
    cJSON_AddItemToArray(backends, cJSON_CreateString("bitonic"));
    cJSON_AddItemToArray(backends, cJSON_CreateString("sort"));
    cJSON_AddArrayToObject(report, "records");
    return report;
}

static void add_record(cJSON *report, cJSON *record)
{
    cJSON_AddItemToArray(cJSON_GetObjectItem(report, "records"), record);
}

/* Two records of 8 rows, backends radix, bitonic, sort; radix flaps on every row of the first
 * (a 0.0 plateau) in every rep. */
static cJSON *make_two_record_report(void)
{
    cJSON *report = make_report();
    for (unsigned i = 0; i < 2; i++) {
        cJSON *record = make_record("captures/plateau.bin", i, 8, i == 0);
        unsigned pattern[25];
        for (unsigned r = 0; r < 25; r++)
            pattern[r] = r;
        add_backend(record, make_backend("radix", "pass", 25, i == 0 ? pattern : NULL,
                                         i == 0 ? 8 : 0, 24));
        add_backend(record, make_backend("bitonic", "pass", 25, NULL, 0, 0));
        add_backend(record, make_backend("sort", "pass", 25, NULL, 0, 0));
        add_record(report, record);
    }
    return report;
}

/* ---- the page ------------------------------------------------------------------------------- */

static void test_backend_summary_has_one_row_per_backend(void **state)
{
    (void)state;
    cJSON *report = make_two_record_report();
    cJSON *second = cJSON_GetArrayItem(cJSON_GetObjectItem(report, "records"), 1);
    cJSON *sort = cJSON_GetArrayItem(cJSON_GetObjectItem(second, "backends"), 2);
    cJSON_ReplaceItemInObject(sort, "verdict", cJSON_CreateString("fail"));
    char *page = render(report, NULL);
    char *backends = section(page, "backends");
    assert_int_equal(count(backends, "<tr"), 1 + 3); /* header + one per backend */
    assert_non_null(strstr(backends, "<td><b>radix</b></td>"));
    assert_non_null(strstr(backends, "<td><b>bitonic</b></td>"));
    assert_non_null(strstr(backends, "<tr class=\"hot\"><td><b>sort</b></td>"));
    assert_int_equal(count(backends, "<span class=\"badge fail\">FAIL</span>"), 1);
    assert_int_equal(count(backends, "<span class=\"badge pass\">PASS</span>"), 2);
    /* The run's overall verdict heads the page, as a word. */
    assert_non_null(strstr(page, "run <span class=\"badge fail\">FAIL</span>"));
    free(backends);
    free(page);
    cJSON_Delete(report);
}

static void test_one_details_per_record_and_plots(void **state)
{
    (void)state;
    cJSON *report = make_two_record_report();
    char *page = render(report, NULL);
    assert_int_equal(count(page, "<details class=\"rec\""), 2);
    /* The failing-or-flapping record is unfolded, the other not. */
    assert_int_equal(count(page, "<details class=\"rec\" id=\"rec-0\" open>"), 1);
    assert_int_equal(count(page, "<details class=\"rec\" id=\"rec-1\">"), 1);
    /* Per record: tie-set and gap histograms and the timing plot; one rows x reps map (radix on
     * the first record); one 0.0 gauge per record. */
    assert_int_equal(count(page, "<svg class=\"chart\""), 2 * 3);
    assert_int_equal(count(page, "<svg class=\"heat\""), 1);
    assert_int_equal(count(page, "<svg"), 2 * 3 + 1 + 2);
    assert_int_equal(count(page, "<svg"), count(page, "</svg>"));
    assert_non_null(strstr(page, "Entries equal to 0.0: 75.0 %"));
    /* The plateau's tie sets (300..307) fall in the 256 bin, all underdetermined. */
    assert_non_null(strstr(page, "<title>256: 8 underdetermined 0 determined</title>"));
    /* The other record's gaps spread over five decades, from 1e-5 to 0.1. */
    assert_non_null(strstr(page, ">1e-5</text>"));
    assert_non_null(strstr(page, ">0.1</text>"));
    assert_non_null(strstr(page, "NVIDIA H200"));
    free(page);
    cJSON_Delete(report);
}

static void test_hostile_strings_are_escaped(void **state)
{
    (void)state;
    cJSON *report = make_two_record_report();
    cJSON *context = cJSON_GetObjectItem(report, "context");
    cJSON_ReplaceItemInObject(context, "host", cJSON_CreateString(HOSTILE));
    cJSON_ReplaceItemInObject(context, "command_line",
                              cJSON_CreateString("run \"'><img src=x onerror=alert(2)>"));
    cJSON_ReplaceItemInObject(cJSON_GetObjectItem(context, "device"), "name",
                              cJSON_CreateString(HOSTILE));
    cJSON *record = cJSON_GetArrayItem(cJSON_GetObjectItem(report, "records"), 0);
    cJSON_ReplaceItemInObject(record, "file", cJSON_CreateString("captures/" HOSTILE ".bin"));
    cJSON *metadata = cJSON_GetObjectItem(record, "metadata");
    cJSON_AddStringToObject(metadata, HOSTILE, HOSTILE);
    cJSON *radix = cJSON_GetArrayItem(cJSON_GetObjectItem(record, "backends"), 0);
    cJSON_ReplaceItemInObject(radix, "name", cJSON_CreateString("radix" HOSTILE));
    cJSON_ReplaceItemInObject(radix, "verdict", cJSON_CreateString(HOSTILE));
    cJSON_AddItemToArray(cJSON_GetObjectItem(radix, "verdict_reasons"),
                         cJSON_CreateString(HOSTILE));
    cJSON_AddNumberToObject(cJSON_AddObjectToObject(cJSON_GetObjectItem(radix, "violations"),
                                                    HOSTILE),
                            "rows", 2);
    cJSON *verdict = cJSON_Parse("{\"results\": [{\"report\": \"" "<i>r</i>" "\", \"file\": \""
                                 "<b>f</b>" "\", \"record\": 0, \"backend\": \"" "<u>b</u>"
                                 "\", \"status\": \"fail\", \"reasons\": [\"<em>why</em>\"]}]}");
    assert_non_null(verdict);

    char *page = render(report, verdict);
    assert_null(strcasestr(page, "<script"));
    assert_null(strstr(page, "<img"));
    assert_null(strstr(page, "<i>"));
    assert_null(strstr(page, "<u>"));
    assert_null(strstr(page, "<em>"));
    assert_null(strstr(page, "<b>f</b>"));
    /* Host, device (header, title and context), file (name, tooltip, facts), metadata key and
     * value, backend name, verdict word, reason, violation kind: all there, escaped. */
    assert_true(count(page, HOSTILE_ESCAPED) >= 10);
    assert_non_null(strstr(page, "captures/" HOSTILE_ESCAPED ".bin"));
    assert_non_null(strstr(page, "run &quot;&#39;&gt;&lt;img src=x onerror=alert(2)&gt;"));
    assert_non_null(strstr(page, "&lt;em&gt;why&lt;/em&gt;"));
    free(page);
    cJSON_Delete(verdict);
    cJSON_Delete(report);
}

static void test_no_network_reference(void **state)
{
    (void)state;
    cJSON *report = make_two_record_report();
    char *page = render(report, NULL);
    assert_null(strstr(page, "http://"));
    assert_null(strstr(page, "https://"));
    assert_null(strstr(page, " src="));
    assert_null(strcasestr(page, "<script"));
    assert_null(strstr(page, "<link"));
    assert_null(strstr(page, "@import"));
    assert_null(strstr(page, "url(http"));
    /* Links stay inside the page. */
    assert_int_equal(count(page, "href=\""), count(page, "href=\"#rec-"));
    assert_non_null(strstr(page, "Content-Security-Policy\" content=\"default-src 'none';"));
    free(page);
    cJSON_Delete(report);
}

static void test_empty_and_odd_reports(void **state)
{
    (void)state;
    cJSON *empty = cJSON_CreateObject();
    char *page = render(empty, NULL);
    assert_non_null(strstr(page, "</html>"));
    assert_non_null(strstr(page, "The report has no record list: n/a."));
    assert_non_null(strstr(page, "No backend in this report."));
    assert_non_null(strstr(page, "<dt>GPU</dt><dd>none: <span class=\"na\">n/a</span>"));
    assert_int_equal(count(page, "<details"), 0);
    free(page);

    cJSON_AddArrayToObject(empty, "records");
    page = render(empty, NULL);
    assert_non_null(strstr(page, "No record was replayed."));
    free(page);
    cJSON_Delete(empty);

    /* Wrong types everywhere: printed as n/a, never followed. */
    cJSON *odd = cJSON_Parse(
        "{\"context\": 5, \"complete\": false, \"stop_reason\": 7, \"records\": ["
        "  5,"
        "  {\"file\": 3, \"census\": [], \"backends\": \"x\", \"metadata\": [1]},"
        "  {\"rows\": 1e300, \"census\": {\"census\": [{\"per_row\": [{\"tie_set\": 1e300,"
        "     \"gap\": -1}, {\"tie_set\": \"many\"}, 4]}]},"
        "   \"backends\": [{\"name\": 3, \"reps\": -4, \"flapping_rows\": 7,"
        "     \"flapping_rows_total\": 2, \"kernel_time_us\": {\"median\": \"fast\"},"
        "     \"violations\": [1], \"predicted_vs_observed\": null},"
        "    {\"name\": \"x\", \"reps\": 3, \"flapping_rows_total\": 1,"
        "     \"output_sha256_per_rep\": 4, \"flapping_rows\": [{\"row\": -1}, {\"row\": \"a\"},"
        "     {\"row\": 0, \"reps_differing\": 2}]}]}]}");
    assert_non_null(odd);
    page = render(odd, NULL);
    assert_int_equal(count(page, "<details class=\"rec\""), 3);
    assert_non_null(strstr(page, "This record entry is not an object: n/a."));
    assert_non_null(strstr(page, "No census in this record: n/a."));
    assert_non_null(strstr(page, "INCOMPLETE run: <span class=\"na\">n/a</span>"));
    assert_true(count(page, "<span class=\"na\">n/a</span>") > 10);
    free(page);
    cJSON_Delete(odd);

    /* Not even an object. */
    cJSON *array = cJSON_CreateArray();
    page = render(array, NULL);
    assert_non_null(strstr(page, "</html>"));
    free(page);
    cJSON_Delete(array);
}

static void test_300_records_within_budget(void **state)
{
    (void)state;
    cJSON *report = make_report();
    cJSON *context = cJSON_GetObjectItem(report, "context");
    cJSON_ReplaceItemInObject(context, "backends", cJSON_CreateArray());
    cJSON *record = make_record("captures/plateau_64x32768.bin", 0, 64, true);
    static const char *const names[] = { "radix", "filtered", "filtered-det", "bitonic", "sort" };
    unsigned pattern[25];
    for (unsigned r = 0; r < 25; r++)
        pattern[r] = r;
    for (unsigned i = 0; i < 5; i++)
        add_backend(record, make_backend(names[i], "pass", 25, i == 0 ? pattern : NULL,
                                         i == 0 ? 64 : 0, 24));
    for (unsigned i = 0; i < 300; i++) {
        cJSON *copy = cJSON_Duplicate(record, true);
        cJSON_ReplaceItemInObject(copy, "index", cJSON_CreateNumber(i));
        add_record(report, copy);
    }
    cJSON_Delete(record);
    char *page = render(report, NULL);
    size_t size = strlen(page), budget = FIXED_BYTES_BUDGET + 300 * BYTES_PER_RECORD_BUDGET;
    print_message("300 records: %zu bytes (%zu per record; budget %zu)\n", size, size / 300,
                  budget);
    assert_true(size < budget);
    assert_int_equal(count(page, "<details class=\"rec\""), 300);
    assert_int_equal(count(page, "<svg class=\"heat\""), 300);
    /* Summaries first: the per-backend table comes before the first record. */
    assert_true(strstr(page, "<section id=\"backends\">") < strstr(page, "<details"));
    /* Hundreds of interesting records: only one unfolded, a dozen linked, the rest counted. */
    assert_int_equal(count(page, " open>"), 1);
    assert_int_equal(count(page, "<a href=\"#rec-"), 12);
    assert_non_null(strstr(page, "and 288 more"));
    free(page);
    cJSON_Delete(report);
}

/* ---- the rows x reps map -------------------------------------------------------------------- */

static void test_heat_map_marks_only_what_the_report_proves(void **state)
{
    (void)state;
    /* 10 reps: reps 3 and 7 have another output than rep 0, the rest rep 0's. */
    unsigned pattern[10] = { 0, 0, 0, 1, 0, 0, 0, 2, 0, 0 };
    cJSON *report = make_report();
    cJSON *record = make_record("a.bin", 0, 4, false);
    /* Every flapping row differs in 2 reps = both reps with another output: all known. */
    add_backend(record, make_backend("radix", "pass", 10, pattern, 3, 2));
    add_record(report, record);
    char *page = render(report, NULL);
    assert_int_equal(count(page, "<svg class=\"heat\""), 1);
    assert_non_null(strstr(page, "class=\"h-diff\""));
    assert_null(strstr(page, "class=\"h-unk\""));
    /* Rows 0-2 share their pattern: one band per differing rep, as tall as the three rows. */
    const char *path = strstr(page, "<path class=\"h-diff\" d=\"");
    assert_non_null(path);
    char *end = strchr(path + strlen("<path class=\"h-diff\" d=\""), '"');
    assert_non_null(end);
    *end = '\0';
    assert_int_equal(count(path, "M"), 2);
    free(page);
    cJSON_Delete(report);

    /* A row that differs in 1 of those 2 reps: which one is not in the report. */
    report = make_report();
    record = make_record("a.bin", 0, 4, false);
    add_backend(record, make_backend("radix", "pass", 10, pattern, 3, 1));
    add_record(report, record);
    page = render(report, NULL);
    assert_non_null(strstr(page, "class=\"h-unk\""));
    assert_non_null(strstr(page, "fill=\"url(#hatch-"));
    assert_non_null(strstr(page, "unknown: this rep's output differs somewhere"));
    assert_null(strstr(page, "class=\"h-diff\""));
    free(page);

    /* Unless the row lists its reps (an optional field): then it is exact. */
    cJSON *radix = cJSON_GetArrayItem(cJSON_GetObjectItem(record, "backends"), 0);
    cJSON *row;
    cJSON_ArrayForEach(row, cJSON_GetObjectItem(radix, "flapping_rows"))
        cJSON_AddItemToObject(row, "differing_reps", cJSON_CreateIntArray((const int[]){ 7 }, 1));
    page = render(report, NULL);
    assert_null(strstr(page, "class=\"h-unk\""));
    assert_non_null(strstr(page, "class=\"h-diff\""));
    free(page);
    cJSON_Delete(report);
}

static void test_heat_map_caps_rows_and_reps(void **state)
{
    (void)state;
    cJSON *report = make_report();
    cJSON *record = make_record("big.bin", 0, 1000, false);
    add_backend(record, make_backend("radix", "pass", 300, NULL, 500, 299));
    add_record(report, record);
    char *page = render(report, NULL);
    assert_non_null(strstr(page, "Only flapping rows are drawn: the first 128 of 500 flapping "
                                 "rows of 1000."));
    assert_non_null(strstr(page, "The first 200 of 300 reps are drawn."));
    /* Row labels of the map are the listed rows' numbers, up to the 128th. */
    assert_true(has_axis_label(page, "yt", "120"));
    assert_false(has_axis_label(page, "yt", "130"));
    assert_true(has_axis_label(page, "xt", "190")); /* reps 0..199 */
    assert_false(has_axis_label(page, "xt", "200"));
    free(page);
    cJSON_Delete(report);
}

/* ---- gate verdicts -------------------------------------------------------------------------- */

static void test_gate_verdict_nested_layout(void **state)
{
    (void)state;
    cJSON *report = make_two_record_report();
    cJSON *verdict = cJSON_Parse(
        "{\"schema\": \"dsatopk-audit/gate\", \"baseline\": \"base.json\","
        " \"reports\": [{\"path\": \"h200.json\", \"records\": ["
        "   {\"file\": \"captures/plateau.bin\", \"index\": 0, \"backends\": ["
        "     {\"name\": \"radix\", \"status\": \"fail\", \"reasons\": [\"set hash differs\"],"
        "      \"rows\": [3, 4, 5, 9]},"
        "     {\"name\": \"sort\", \"status\": \"pass\", \"reasons\": [], \"rows\": []}]},"
        "   {\"file\": \"captures/plateau.bin\", \"index\": 1, \"backends\": ["
        "     {\"name\": \"radix\", \"status\": \"tolerated\", \"reasons\": [\"known\"]}]}]}],"
        " \"summary\": {\"pass\": 1, \"fail\": 1, \"tolerated\": 1, \"missing\": 0}}");
    assert_non_null(verdict);
    char *page = render(report, verdict);
    char *gate = section(page, "gate");
    /* No overall word in the verdict: a failing entry makes it FAIL. */
    assert_non_null(strstr(gate, "<span class=\"badge fail\">FAIL</span> <span class=\"count\">"
                                 "1 pass</span> <span class=\"count\">1 fail</span> <span "
                                 "class=\"count\">1 tolerated</span>"));
    assert_non_null(strstr(gate, "<td>radix</td><td><span class=\"badge fail\">FAIL</span></td>"));
    assert_non_null(strstr(gate, "set hash differs"));
    assert_non_null(strstr(gate, "3&ndash;5, 9"));
    assert_non_null(strstr(gate, "1 tolerated (known failures the policy accepts)"));
    assert_non_null(strstr(gate, "<dt>baseline</dt><dd>base.json</dd>"));
    /* One report: no report column, and the records carry their gate status. */
    assert_null(strstr(gate, "<th>report</th>"));
    assert_non_null(strstr(page, "<span class=\"chip fail\">gate <b>fail</b></span>"));
    assert_non_null(strstr(page, "<span class=\"chip tolerated\">gate <b>tolerated</b></span>"));
    char *backends = section(page, "backends");
    assert_non_null(strstr(backends, "<span class=\"chip fail\">1 fail</span>"));
    assert_non_null(strstr(backends, "<span class=\"chip tolerated\">1 tolerated</span>"));
    assert_non_null(strstr(backends, "<span class=\"chip pass\">1 pass</span>"));
    free(backends);
    free(gate);
    free(page);
    cJSON_Delete(verdict);
    cJSON_Delete(report);
}

static void test_gate_verdict_flat_layout(void **state)
{
    (void)state;
    cJSON *report = make_two_record_report();
    cJSON *verdict = cJSON_Parse(
        "{\"status\": \"pass\", \"results\": ["
        " {\"report\": \"a.json\", \"file\": \"x.bin\", \"record\": 0, \"backend\": \"sort\","
        "  \"status\": \"missing\", \"reason\": \"not in report a\"},"
        " {\"report\": \"b.json\", \"file\": \"x.bin\", \"record\": 0, \"backend\": \"sort\","
        "  \"status\": \"PASS\"},"
        " {\"report\": \"b.json\", \"file\": \"x.bin\", \"record\": 1, \"backend\": \"sort\","
        "  \"status\": \"weird\"}]}");
    assert_non_null(verdict);
    char *page = render(report, verdict);
    char *gate = section(page, "gate");
    /* The verdict's own word wins; entries of an unknown status are not counted. */
    assert_non_null(strstr(gate, "<span class=\"badge pass\">PASS</span> <span class=\"count\">"
                                 "1 pass</span> <span class=\"count\">0 fail</span> <span "
                                 "class=\"count\">0 tolerated</span> <span class=\"count\">1 "
                                 "missing</span>"));
    /* Two reports: entries name theirs; records are not matched to this report's. */
    assert_non_null(strstr(gate, "<th>report</th>"));
    assert_non_null(strstr(gate, "<td>a.json</td><td><span title=\"x.bin\">x.bin</span>:0</td>"));
    assert_non_null(strstr(gate, "not in report a"));
    assert_null(strstr(page, "gate <b>"));
    free(gate);
    free(page);
    cJSON_Delete(verdict);

    /* A verdict with no entry at all. */
    verdict = cJSON_CreateObject();
    page = render(report, verdict);
    assert_non_null(strstr(page, "No record x backend fails the gate or is missing."));
    free(page);
    cJSON_Delete(verdict);
    cJSON_Delete(report);
}

/* The layout `gate` writes (src/gate/gate_verdict.c): reports[] each with its own status, report_reasons and
 * entries[] of {file, index, backend, status, reasons, notes, rows: [{row, why}]}; baseline and
 * policy in the verdict's context; the overall word in summary.verdict. */
static void test_gate_verdict_gate_command_layout(void **state)
{
    (void)state;
    cJSON *report = make_two_record_report();
    cJSON *verdict = cJSON_Parse(
        "{\"schema\": \"dsatopk-audit/gate\", \"schema_version\": 1,"
        " \"context\": {\"baseline\": {\"path\": \"h100.json\", \"device\": \"NVIDIA H100\","
        "   \"records\": 2}, \"policy\": null},"
        " \"reports\": [{\"path\": \"h200.json\", \"records\": 2, \"status\": \"fail\","
        "   \"report_reasons\": [\"the report is incomplete: device lost\"],"
        "   \"entries\": ["
        "    {\"file\": \"captures/plateau.bin\", \"index\": 0, \"backend\": \"radix\","
        "     \"status\": \"fail\", \"reasons\": [\"wrong sets\"], \"notes\": [\"a note\"],"
        "     \"rows\": [{\"row\": 1, \"why\": \"wrong_set\"},"
        "              {\"row\": 2, \"why\": \"wrong_set\"},"
        "              {\"row\": 7, \"why\": \"flapping\"}]},"
        "    {\"file\": \"captures/plateau.bin\", \"index\": 1, \"backend\": \"sort\","
        "     \"status\": \"pass\", \"reasons\": [], \"notes\": [], \"rows\": []}],"
        "   \"summary\": {\"entries\": 2, \"pass\": 1, \"fail\": 1}}],"
        " \"unused_tolerances\": [],"
        " \"summary\": {\"reports\": 1, \"failing_reports\": 1, \"entries\": 2, \"pass\": 1,"
        "   \"fail\": 1, \"tolerated\": 0, \"missing\": 0, \"verdict\": \"fail\"},"
        " \"exit_code\": 1}");
    assert_non_null(verdict);
    char *page = render(report, verdict);
    char *gate = section(page, "gate");
    assert_non_null(strstr(gate, "<dt>baseline</dt><dd>h100.json <span class=\"muted\">(NVIDIA "
                                 "H100)</span></dd>"));
    assert_null(strstr(gate, "<dt>policy</dt>"));
    assert_non_null(strstr(gate, "<dt>failing_reports</dt><dd>1</dd>"));
    /* The record x backend entry, its reasons, notes and rows by reason. */
    assert_non_null(strstr(gate, "<td>radix</td><td><span class=\"badge fail\">FAIL</span></td>"));
    assert_non_null(strstr(gate, "<li>wrong sets</li>"));
    assert_non_null(strstr(gate, "<ul class=\"reasons muted\"><li>a note</li>"));
    assert_non_null(strstr(gate, "wrong_set:</span> <span class=\"mono\">1, 2</span>"));
    assert_non_null(strstr(gate, "flapping:</span> <span class=\"mono\">7</span>"));
    /* The report failing as a whole is listed too. */
    assert_non_null(strstr(gate, "<i>the whole report</i>"));
    assert_non_null(strstr(gate, "the report is incomplete: device lost"));
    /* Per backend: radix 1 fail, sort 1 pass; the record carries its fail. */
    char *backends = section(page, "backends");
    assert_non_null(strstr(backends, "<span class=\"chip fail\">1 fail</span>"));
    assert_non_null(strstr(backends, "<span class=\"chip pass\">1 pass</span>"));
    assert_non_null(strstr(page, "<span class=\"chip fail\">gate <b>fail</b></span>"));
    free(backends);
    free(gate);
    free(page);
    cJSON_Delete(verdict);
    cJSON_Delete(report);
}

static void test_write_errors(void **state)
{
    (void)state;
    struct audit_error err = { 0 };
    cJSON *report = make_report();
    char path[sizeof(test_directory) + 64];
    snprintf(path, sizeof(path), "%s/no/such/dir/page.html", test_directory);
    assert_int_equal(html_report_write(path, report, NULL, &err), AUDIT_EIO);
    assert_non_null(strstr(err.message, "no/such/dir/page.html"));
    assert_int_equal(html_report_write(path, NULL, NULL, &err), AUDIT_EUSAGE);
    cJSON_Delete(report);
}

/* ---- SVG helpers ---------------------------------------------------------------------------- */

static void test_bins_and_labels(void **state)
{
    (void)state;
    char label[SVG_LABEL_BYTES];
    assert_int_equal(svg_log2_bin(0), 0);
    assert_int_equal(svg_log2_bin(1), 0);
    assert_int_equal(svg_log2_bin(2), 1);
    assert_int_equal(svg_log2_bin(3), 1);
    assert_int_equal(svg_log2_bin(4096), 12);
    assert_int_equal(svg_log2_bin(4097), 12);
    assert_int_equal(svg_log2_bin(UINT64_MAX), 63);
    svg_power_of_two_label(0, label, sizeof(label));
    assert_string_equal(label, "1");
    svg_power_of_two_label(9, label, sizeof(label));
    assert_string_equal(label, "512");
    svg_power_of_two_label(14, label, sizeof(label));
    assert_string_equal(label, "16k");
    svg_power_of_two_label(21, label, sizeof(label));
    assert_string_equal(label, "2M");
    assert_int_equal(svg_decade(1.0), 0);
    assert_int_equal(svg_decade(1000.0), 3);
    assert_int_equal(svg_decade(999.999), 2);
    assert_int_equal(svg_decade(1e-3), -3);
    assert_int_equal(svg_decade(0.00099), -4);
    assert_int_equal(svg_decade(1.4e-45), -45);
    svg_decade_label(-2, label, sizeof(label));
    assert_string_equal(label, "0.01");
    svg_decade_label(-7, label, sizeof(label));
    assert_string_equal(label, "1e-7");
    svg_format_value(603.71, label, sizeof(label));
    assert_string_equal(label, "603.7");
    svg_format_value(4214.3, label, sizeof(label));
    assert_string_equal(label, "4214");
    svg_format_value(1.19e-5, label, sizeof(label));
    assert_string_equal(label, "1.19e-05");
    svg_format_value(NAN, label, sizeof(label));
    assert_string_equal(label, "n/a");
}

static void test_log_axis(void **state)
{
    (void)state;
    struct svg_log_axis axis;
    /* 550..4200 us: widened to 500..5000, ticks 500, 1000, 2000, 5000. */
    svg_log_axis_init(&axis, 550, 4200);
    assert_true(fabs(axis.low - 500) < 1e-9 && fabs(axis.high - 5000) < 1e-9);
    assert_int_equal(axis.tick_count, 4);
    assert_true(fabs(axis.ticks[1] - 1000) < 1e-9 && fabs(axis.ticks[2] - 2000) < 1e-9);
    assert_true(fabs(svg_log_axis_position(&axis, 500, 0, 100) - 0) < 1e-9);
    assert_true(fabs(svg_log_axis_position(&axis, 5000, 0, 100) - 100) < 1e-9);
    assert_true(fabs(svg_log_axis_position(&axis, sqrt(500.0 * 5000.0), 0, 100) - 50) < 1e-6);
    assert_true(svg_log_axis_position(&axis, 1e9, 0, 100) == 100); /* clamped */
    /* Twelve decades: decade ticks only. */
    svg_log_axis_init(&axis, 1e-9, 900);
    assert_true(axis.tick_count <= 13);
    for (unsigned t = 0; t < axis.tick_count; t++) {
        double exponent = log10(axis.ticks[t]);
        assert_true(fabs(exponent - round(exponent)) < 1e-9);
    }
    /* A single value still gets a range. */
    svg_log_axis_init(&axis, 600, 600);
    assert_true(axis.low <= 600 && axis.high > 600);
}

static void test_escaping(void **state)
{
    (void)state;
    struct text_buffer buffer;
    text_buffer_init(&buffer);
    text_append_escaped(&buffer, "a<b>&\"c'\x01\x7f\n", 0);
    assert_string_equal(buffer.data, "a&lt;b&gt;&amp;&quot;c&#39;\xEF\xBF\xBD\xEF\xBF\xBD\n");
    buffer.length = 0;
    /* "é" is two bytes: a cut after one of them backs up to before it. */
    text_append_escaped(&buffer, "ab\xC3\xA9z", 3);
    assert_string_equal(buffer.data, "ab\xE2\x80\xA6");
    buffer.length = 0;
    text_append_escaped(&buffer, "abc", 3);
    assert_string_equal(buffer.data, "abc");
    buffer.length = 0;
    text_appendf(&buffer, "%0*d", 10000, 7); /* grows past the first block */
    assert_int_equal(buffer.length, 10000);
    assert_false(buffer.failed);
    text_buffer_release(&buffer);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_backend_summary_has_one_row_per_backend),
        cmocka_unit_test(test_one_details_per_record_and_plots),
        cmocka_unit_test(test_hostile_strings_are_escaped),
        cmocka_unit_test(test_no_network_reference),
        cmocka_unit_test(test_empty_and_odd_reports),
        cmocka_unit_test(test_300_records_within_budget),
        cmocka_unit_test(test_heat_map_marks_only_what_the_report_proves),
        cmocka_unit_test(test_heat_map_caps_rows_and_reps),
        cmocka_unit_test(test_gate_verdict_nested_layout),
        cmocka_unit_test(test_gate_verdict_flat_layout),
        cmocka_unit_test(test_gate_verdict_gate_command_layout),
        cmocka_unit_test(test_write_errors),
        cmocka_unit_test(test_bins_and_labels),
        cmocka_unit_test(test_log_axis),
        cmocka_unit_test(test_escaping),
    };
    return cmocka_run_group_tests(tests, make_directory, remove_directory);
}
