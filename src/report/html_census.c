/* A record's census on the page (html_page.h): tie-set sizes and boundary gaps as histograms,
 * the census counts, and the census entry for the record's k. The census object is
 * src/reference/census.c's format. */
#include "html_page.h"

#include <stdio.h>
#include <string.h>

/* The census entry for the record's k: records[].census.census[] holds one per k. */
const cJSON *html_record_census(const cJSON *record)
{
    const cJSON *census = html_member(record, KEY_CENSUS);
    const cJSON *list = html_member_array(census, KEY_CENSUS);
    if (list) {
        double k;
        bool has_k = html_member_number(record, KEY_K, &k);
        const cJSON *entry, *first = NULL;
        cJSON_ArrayForEach(entry, list) {
            if (!cJSON_IsObject(entry))
                continue;
            if (!first)
                first = entry;
            double entry_k;
            if (has_k && html_member_number(entry, KEY_K, &entry_k) && entry_k == k)
                return entry;
        }
        return first;
    }
    if (html_member(census, "per_row") || html_member(census, KEY_TIE_SET))
        return census;
    return NULL;
}

/* Rows with a boundary (a tie set) and whether each is underdetermined. */
static bool census_row_tie_set(const cJSON *row, double *tie_set, bool *underdetermined)
{
    if (!html_member_number(row, KEY_TIE_SET, tie_set) || *tie_set < 1)
        return false;
    *underdetermined = html_member_bool(row, "underdetermined") == 1;
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
        if (!html_member_number(row, "gap", &gap) || gap < 0) {
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
            !html_member_number(row, "gap", &gap) || !(gap > 0))
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
        html_putf(writer, "<p class=\"note\">%.0f row(s) with a boundary have no finite gap.</p>",
                  without_gap);
}

static void put_census_row(struct html_writer *writer, const char *label, const cJSON *per_k,
                           const char *name, bool of_rows)
{
    html_putf(writer, "<tr><td>%s</td><td class=\"n\">", label);
    if (of_rows)
        html_put_rows_of(writer, per_k, name, per_k);
    else
        html_put_member_number(writer, per_k, name);
    html_put(writer, "</td></tr>");
}

static void put_statistic(struct html_writer *writer, const char *label, const cJSON *object,
                          const char *const names[3])
{
    html_putf(writer, "<tr><td>%s</td><td class=\"n\">", label);
    for (int i = 0; i < 3; i++) {
        if (i)
            html_put(writer, " / ");
        html_put_member_number(writer, object, names[i]);
    }
    html_put(writer, "</td></tr>");
}

void html_write_census(struct html_writer *writer, const cJSON *record)
{
    const cJSON *per_k = html_record_census(record);
    html_put(writer, "<h3>Census</h3>");
    if (!per_k) {
        html_put(writer, "<p>No census in this record: n/a.</p>");
        return;
    }
    const cJSON *per_row = html_member_array(per_k, "per_row");
    html_put(writer, "<div class=\"panels\">");
    if (per_row && cJSON_GetArraySize(per_row) > 0) {
        html_put(writer, "<div class=\"panel\">");
        write_tie_set_histogram(writer, per_row);
        html_put(writer, "</div><div class=\"panel\">");
        write_gap_histogram(writer, per_row);
        html_put(writer, "</div>");
    } else {
        html_put(writer,
                 "<div class=\"panel\"><p>No per-row census: the histograms are n/a.</p></div>");
    }

    html_put(writer, "<div class=\"panel\">");
    double zero_fraction;
    bool has_zero = html_member_number(per_k, "zero_fraction", &zero_fraction);
    if (has_zero) {
        double shown = zero_fraction < 0 ? 0 : zero_fraction > 1 ? 1 : zero_fraction;
        html_putf(writer,
                  "<svg width=\"220\" height=\"30\" role=\"img\"><title>exact 0.0 entries: "
                  "%.2f %%</title><text class=\"ttl\" x=\"0\" y=\"11\">Entries equal to 0.0: "
                  "%.1f %%</text><rect class=\"gauge-bg\" x=\"0.5\" y=\"17.5\" width=\"219\" "
                  "height=\"10\"/><rect class=\"gauge\" x=\"0.5\" y=\"17.5\" width=\"%.1f\" "
                  "height=\"10\"/></svg>",
                  zero_fraction * 100, zero_fraction * 100, shown * 219);
    } else {
        html_put(writer, "<p>Entries equal to 0.0: <span class=\"na\">n/a</span></p>");
    }
    html_put(writer, "<table><tbody>");
    put_census_row(writer, "rows with a boundary", per_k, "rows_with_boundary", true);
    put_census_row(writer, "underdetermined", per_k, KEY_UNDERDETERMINED_ROWS, true);
    put_census_row(writer, "boundary at 0.0", per_k, "zero_boundary_rows", true);
    put_census_row(writer, "overflow 4096 (radix)", per_k, "radix_overflow_rows", true);
    put_census_row(writer, "overflow 16384 (filtered)", per_k, "filtered_overflow_rows", true);
    put_census_row(writer, "short rows (length &le; k)", per_k, "short_rows", true);
    static const char *const tie_names[3] = { KEY_MEDIAN, "p90", KEY_MAX };
    static const char *const gap_names[3] = { KEY_MIN, KEY_MEDIAN, "p90" };
    put_statistic(writer, "tie set median / p90 / max", html_member(per_k, KEY_TIE_SET), tie_names);
    put_statistic(writer, "gap min / median / p90", html_member(per_k, "gap"), gap_names);
    html_put(writer, "<tr><td>&minus;inf / NaN / subnormal</td><td class=\"n\">");
    html_put_member_number(writer, per_k, "neg_inf");
    html_put(writer, " / ");
    html_put_member_number(writer, per_k, "nan");
    html_put(writer, " / ");
    html_put_member_number(writer, per_k, "subnormal");
    html_put(writer, "</td></tr></tbody></table></div></div>");
}
