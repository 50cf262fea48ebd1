#include "svg.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- text buffer ---------------------------------------------------------------------------- */

void text_buffer_init(struct text_buffer *buffer)
{
    memset(buffer, 0, sizeof(*buffer));
}

void text_buffer_release(struct text_buffer *buffer)
{
    free(buffer->data);
    memset(buffer, 0, sizeof(*buffer));
}

static bool text_reserve(struct text_buffer *buffer, size_t extra)
{
    if (buffer->failed)
        return false;
    if (extra > SIZE_MAX / 2 - buffer->length) {
        buffer->failed = true;
        return false;
    }
    size_t needed = buffer->length + extra + 1;
    if (needed <= buffer->capacity)
        return true;
    size_t capacity = buffer->capacity ? buffer->capacity : 4096;
    while (capacity < needed)
        capacity *= 2;
    char *data = realloc(buffer->data, capacity);
    if (!data) {
        buffer->failed = true;
        return false;
    }
    buffer->data = data;
    buffer->capacity = capacity;
    return true;
}

static void text_append_bytes(struct text_buffer *buffer, const char *bytes, size_t size)
{
    if (!text_reserve(buffer, size))
        return;
    memcpy(buffer->data + buffer->length, bytes, size);
    buffer->length += size;
    buffer->data[buffer->length] = '\0';
}

void text_append(struct text_buffer *buffer, const char *text)
{
    if (text)
        text_append_bytes(buffer, text, strlen(text));
}

void text_appendf(struct text_buffer *buffer, const char *format, ...)
{
    va_list args;
    if (buffer->failed)
        return;
    size_t room = buffer->capacity > buffer->length ? buffer->capacity - buffer->length : 0;
    va_start(args, format);
    int needed = vsnprintf(room ? buffer->data + buffer->length : NULL, room, format, args);
    va_end(args);
    if (needed < 0) {
        buffer->failed = true;
        return;
    }
    if ((size_t)needed < room) {
        buffer->length += (size_t)needed;
        return;
    }
    if (!text_reserve(buffer, (size_t)needed))
        return;
    va_start(args, format);
    vsnprintf(buffer->data + buffer->length, buffer->capacity - buffer->length, format, args);
    va_end(args);
    buffer->length += (size_t)needed;
}

void text_append_escaped(struct text_buffer *buffer, const char *text, size_t max_bytes)
{
    if (!text)
        return;
    size_t size = max_bytes ? strnlen(text, max_bytes + 1) : strlen(text);
    bool cut = max_bytes && size > max_bytes;
    if (cut) {
        /* Never split a UTF-8 sequence: back up over continuation bytes. */
        size = max_bytes;
        while (size > 0 && ((unsigned char)text[size] & 0xC0u) == 0x80u)
            size--;
    }
    size_t plain_start = 0;
    for (size_t i = 0; i < size; i++) {
        unsigned char c = (unsigned char)text[i];
        const char *entity = NULL;
        switch (c) {
        case '&': entity = "&amp;"; break;
        case '<': entity = "&lt;"; break;
        case '>': entity = "&gt;"; break;
        case '"': entity = "&quot;"; break;
        case '\'': entity = "&#39;"; break;
        default:
            /* Control characters are invalid in HTML text; show that something was there. */
            if ((c < 0x20 && c != '\t' && c != '\n' && c != '\r') || c == 0x7F)
                entity = "\xEF\xBF\xBD";
            break;
        }
        if (!entity)
            continue;
        text_append_bytes(buffer, text + plain_start, i - plain_start);
        text_append(buffer, entity);
        plain_start = i + 1;
    }
    text_append_bytes(buffer, text + plain_start, size - plain_start);
    if (cut)
        text_append(buffer, "\xE2\x80\xA6");
}

/* ---- bins and labels ------------------------------------------------------------------------ */

unsigned svg_log2_bin(uint64_t value)
{
    unsigned bin = 0;
    while (value > 1) {
        value >>= 1;
        bin++;
    }
    return bin;
}

void svg_power_of_two_label(unsigned exponent, char *label, size_t size)
{
    static const char suffixes[] = { '\0', 'k', 'M', 'G', 'T', 'P', 'E' };
    unsigned group = exponent / 10;
    if (group >= sizeof(suffixes)) {
        snprintf(label, size, "2^%u", exponent);
        return;
    }
    unsigned long long mantissa = 1ull << (exponent % 10);
    if (group == 0)
        snprintf(label, size, "%llu", mantissa);
    else
        snprintf(label, size, "%llu%c", mantissa, suffixes[group]);
}

int svg_decade(double value)
{
    int decade = (int)floor(log10(value));
    /* log10 may round across a power of ten; settle it with exact comparisons. */
    if (pow(10.0, decade) > value)
        decade--;
    else if (pow(10.0, decade + 1) <= value)
        decade++;
    return decade;
}

void svg_decade_label(int decade, char *label, size_t size)
{
    static const char *const small[] = { "0.001", "0.01", "0.1", "1", "10", "100", "1000" };
    if (decade >= -3 && decade <= 3)
        snprintf(label, size, "%s", small[decade + 3]);
    else
        snprintf(label, size, "1e%d", decade);
}

void svg_format_value(double value, char *label, size_t size)
{
    double magnitude = fabs(value);
    if (!isfinite(value))
        snprintf(label, size, "n/a");
    else if (magnitude == 0.0)
        snprintf(label, size, "0");
    else if (magnitude >= 1000.0 && magnitude < 1e6)
        snprintf(label, size, "%.0f", value);
    else if (magnitude >= 1e-3 && magnitude < 1000.0)
        snprintf(label, size, "%.4g", value);
    else
        snprintf(label, size, "%.3g", value);
}

/* 1, 2 or 5 times a power of ten, at least value (value > 0). */
static double ceil_125(double value)
{
    double base = pow(10.0, svg_decade(value));
    double mantissa = value / base;
    if (mantissa <= 1.0)
        return base;
    if (mantissa <= 2.0)
        return 2.0 * base;
    if (mantissa <= 5.0)
        return 5.0 * base;
    return 10.0 * base;
}

/* 1, 2 or 5 times a power of ten, at most value (value > 0). */
static double floor_125(double value)
{
    double base = pow(10.0, svg_decade(value));
    double mantissa = value / base;
    if (mantissa >= 5.0)
        return 5.0 * base;
    if (mantissa >= 2.0)
        return 2.0 * base;
    return base;
}

static void append_count(struct text_buffer *out, double value)
{
    char text[32];
    if (value == floor(value) && fabs(value) < 1e15)
        snprintf(text, sizeof(text), "%.0f", value);
    else
        svg_format_value(value, text, sizeof(text));
    text_append(out, text);
}

static void svg_open(struct text_buffer *out, const char *css_class, int width, int height,
                     const char *description)
{
    text_appendf(out, "<svg class=\"%s\" width=\"%d\" height=\"%d\" viewBox=\"0 0 %d %d\" "
                      "role=\"img\"><title>", css_class, width, height, width, height);
    text_append_escaped(out, description, 300);
    text_append(out, "</title>");
}

/* Text of about 6 px per character at the charts' 11 px font: enough to lay out a legend. */
static int approximate_text_width(const char *text)
{
    return text ? (int)strlen(text) * 6 : 0;
}

/* ---- bar chart ------------------------------------------------------------------------------ */

void svg_bar_chart(struct text_buffer *out, const struct svg_bar_chart *chart,
                   const struct svg_bin *bins, size_t bin_count)
{
    const int width = chart->width > 120 ? chart->width : 120;
    const int height = chart->height > 90 ? chart->height : 90;
    const double left = 46, right = width - 10, top = 44, bottom = height - 36;
    unsigned series = chart->series_count;
    if (series < 1)
        series = 1;
    if (series > SVG_SERIES_MAX)
        series = SVG_SERIES_MAX;

    double largest = 0;
    for (size_t i = 0; i < bin_count; i++) {
        double total = 0;
        for (unsigned s = 0; s < series; s++)
            total += bins[i].values[s] > 0 ? bins[i].values[s] : 0;
        if (total > largest)
            largest = total;
    }
    /* Counts: whole-number steps, about four of them. */
    double step = largest > 4 ? ceil_125(largest / 4.0) : 1.0;
    double axis_top = step * ceil(largest / step);
    if (axis_top <= 0)
        axis_top = step;

    svg_open(out, "chart", width, height, chart->title);
    text_append(out, "<text class=\"ttl\" x=\"4\" y=\"14\">");
    text_append_escaped(out, chart->title, 120);
    text_append(out, "</text>");

    /* Legend on the line under the title, left to right. */
    int legend_x = 4;
    for (unsigned s = 0; s < series; s++) {
        if (!chart->series_names[s])
            continue;
        text_appendf(out, "<rect class=\"%s\" x=\"%d\" y=\"21\" width=\"10\" height=\"10\"/>"
                          "<text x=\"%d\" y=\"30\">",
                     chart->series_classes[s] ? chart->series_classes[s] : "bar", legend_x,
                     legend_x + 14);
        text_append_escaped(out, chart->series_names[s], 60);
        text_append(out, "</text>");
        legend_x += approximate_text_width(chart->series_names[s]) + 26;
    }

    for (double tick = 0; tick <= axis_top * (1 + 1e-9); tick += step) {
        double y = bottom - tick / axis_top * (bottom - top);
        text_appendf(out, "<line class=\"grid\" x1=\"%.0f\" y1=\"%.1f\" x2=\"%.0f\" y2=\"%.1f\"/>"
                          "<text class=\"yt\" x=\"%.0f\" y=\"%.1f\">",
                     left, y, right, y, left - 4, y + 3.5);
        append_count(out, tick);
        text_append(out, "</text>");
    }

    if (bin_count == 0) {
        text_appendf(out, "<text class=\"na\" x=\"%.0f\" y=\"%.0f\">n/a</text>",
                     (left + right) / 2, (top + bottom) / 2);
    }
    /* Few bins: keep bars slim and centred rather than one slab across the plot. */
    const double widest_slot = 44;
    double slot = bin_count ? (right - left) / (double)bin_count : 0;
    if (slot > widest_slot)
        slot = widest_slot;
    double first_slot = left + ((right - left) - slot * (double)bin_count) / 2;
    double bar_width = slot * 0.8 > 1 ? slot * 0.8 : 1;
    size_t label_stride = 1;
    if (slot > 0 && slot < 30)
        label_stride = (size_t)ceil(30.0 / slot);
    for (size_t i = 0; i < bin_count; i++) {
        double x = first_slot + slot * (double)i + (slot - bar_width) / 2;
        double total = 0;
        text_append(out, "<g><title>");
        text_append_escaped(out, bins[i].label, SVG_LABEL_BYTES);
        text_append(out, ":");
        for (unsigned s = 0; s < series; s++) {
            double value = bins[i].values[s] > 0 ? bins[i].values[s] : 0;
            text_append(out, " ");
            append_count(out, value);
            if (chart->series_names[s]) {
                text_append(out, " ");
                text_append_escaped(out, chart->series_names[s], 60);
            }
            total += value;
        }
        text_append(out, "</title>");
        double base = bottom;
        for (unsigned s = 0; s < series; s++) {
            double value = bins[i].values[s] > 0 ? bins[i].values[s] : 0;
            if (value <= 0)
                continue;
            double bar_height = value / axis_top * (bottom - top);
            if (bar_height < 1)
                bar_height = 1; /* a non-empty bin never disappears */
            base -= bar_height;
            text_appendf(out, "<rect class=\"%s\" x=\"%.1f\" y=\"%.1f\" width=\"%.1f\" "
                              "height=\"%.1f\"/>",
                         chart->series_classes[s] ? chart->series_classes[s] : "bar", x, base,
                         bar_width, bar_height);
        }
        text_append(out, "</g>");
        if (total > 0 && bin_count <= 24) {
            text_appendf(out, "<text class=\"val\" x=\"%.1f\" y=\"%.1f\">", x + bar_width / 2,
                         base - 3);
            append_count(out, total);
            text_append(out, "</text>");
        }
        if (i % label_stride == 0) {
            text_appendf(out, "<text class=\"xt\" x=\"%.1f\" y=\"%.0f\">", x + bar_width / 2,
                         bottom + 13);
            text_append_escaped(out, bins[i].label, SVG_LABEL_BYTES);
            text_append(out, "</text>");
        }
    }
    text_appendf(out, "<line class=\"axis\" x1=\"%.0f\" y1=\"%.0f\" x2=\"%.0f\" y2=\"%.0f\"/>",
                 left, bottom, right, bottom);
    if (chart->x_label) {
        text_appendf(out, "<text class=\"xl\" x=\"%.0f\" y=\"%d\">", (left + right) / 2,
                     height - 6);
        text_append_escaped(out, chart->x_label, 120);
        text_append(out, "</text>");
    }
    if (chart->y_label) {
        text_appendf(out, "<text class=\"yl\" transform=\"translate(11 %.0f) rotate(-90)\">",
                     (top + bottom) / 2);
        text_append_escaped(out, chart->y_label, 60);
        text_append(out, "</text>");
    }
    text_append(out, "</svg>");
}

/* ---- log axis and range plot ---------------------------------------------------------------- */

void svg_log_axis_init(struct svg_log_axis *axis, double low, double high)
{
    memset(axis, 0, sizeof(*axis));
    if (!(low > 0) || !isfinite(low))
        low = 1;
    if (!(high > 0) || !isfinite(high))
        high = low;
    if (high < low) {
        double swap = low;
        low = high;
        high = swap;
    }
    axis->low = floor_125(low);
    axis->high = ceil_125(high);
    if (axis->high <= axis->low)
        axis->high = ceil_125(axis->low * 1.5);

    static const double factors[] = { 1, 2, 5 };
    int first = svg_decade(axis->low), last = svg_decade(axis->high);
    for (int decade = first; decade <= last && axis->tick_count < SVG_LOG_TICKS_MAX; decade++) {
        for (unsigned f = 0; f < 3 && axis->tick_count < SVG_LOG_TICKS_MAX; f++) {
            double tick = factors[f] * pow(10.0, decade);
            if (tick >= axis->low * (1 - 1e-9) && tick <= axis->high * (1 + 1e-9))
                axis->ticks[axis->tick_count++] = tick;
        }
    }
    if (axis->tick_count <= 10)
        return;
    /* Too many for a readable axis: whole decades only, every few of them. */
    axis->low = pow(10.0, first);
    axis->high = pow(10.0, svg_decade(axis->high) + (axis->high > pow(10.0, last) ? 1 : 0));
    last = svg_decade(axis->high);
    int stride = (last - first) / 10 + 1;
    axis->tick_count = 0;
    for (int decade = first; decade <= last && axis->tick_count < SVG_LOG_TICKS_MAX;
         decade += stride)
        axis->ticks[axis->tick_count++] = pow(10.0, decade);
}

double svg_log_axis_position(const struct svg_log_axis *axis, double value, double x0, double x1)
{
    if (!(value > axis->low))
        return x0;
    if (value >= axis->high)
        return x1;
    double span = log10(axis->high) - log10(axis->low);
    return x0 + (log10(value) - log10(axis->low)) / span * (x1 - x0);
}

void svg_range_plot(struct text_buffer *out, const char *title, const char *unit,
                    const struct svg_range *ranges, size_t count, int width)
{
    const double row_height = 20;
    const double left = 100, right = (width > 260 ? width : 260) - 64, top = 26;
    const double bottom = top + row_height * (double)count;
    const int height = (int)bottom + 34;
    double low = INFINITY, high = 0;
    for (size_t i = 0; i < count; i++) {
        if (!ranges[i].valid)
            continue;
        if (ranges[i].low > 0 && ranges[i].low < low)
            low = ranges[i].low;
        if (ranges[i].high > high)
            high = ranges[i].high;
    }
    bool any = high > 0 && isfinite(low);
    struct svg_log_axis axis;
    svg_log_axis_init(&axis, any ? low : 1, any ? high : 10);

    svg_open(out, "chart", (int)right + 64, height, title);
    text_append(out, "<text class=\"ttl\" x=\"4\" y=\"14\">");
    text_append_escaped(out, title, 120);
    text_append(out, "</text>");
    for (unsigned t = 0; any && t < axis.tick_count; t++) {
        char label[32];
        double x = svg_log_axis_position(&axis, axis.ticks[t], left, right);
        svg_format_value(axis.ticks[t], label, sizeof(label));
        text_appendf(out, "<line class=\"grid\" x1=\"%.1f\" y1=\"%.0f\" x2=\"%.1f\" y2=\"%.0f\"/>"
                          "<text class=\"xt\" x=\"%.1f\" y=\"%.0f\">%s</text>",
                     x, top - 4, x, bottom, x, bottom + 13, label);
    }
    for (size_t i = 0; i < count; i++) {
        double y = top + row_height * (double)i + row_height / 2;
        text_appendf(out, "<text class=\"yt\" x=\"%.0f\" y=\"%.1f\">", left - 8, y + 4);
        text_append_escaped(out, ranges[i].label, 16);
        text_append(out, "</text>");
        if (!ranges[i].valid || !any) {
            text_appendf(out, "<text class=\"na\" x=\"%.0f\" y=\"%.1f\">n/a</text>", left + 14,
                         y + 4);
            continue;
        }
        char label[32];
        double x_low = svg_log_axis_position(&axis, ranges[i].low, left, right);
        double x_high = svg_log_axis_position(&axis, ranges[i].high, left, right);
        double x_mid = svg_log_axis_position(&axis, ranges[i].mid, left, right);
        svg_format_value(ranges[i].mid, label, sizeof(label));
        text_appendf(out, "<g><title>");
        text_append_escaped(out, ranges[i].label, 60);
        text_appendf(out, ": median %s", label);
        svg_format_value(ranges[i].low, label, sizeof(label));
        text_appendf(out, ", min %s", label);
        svg_format_value(ranges[i].high, label, sizeof(label));
        text_appendf(out, ", max %s</title>", label);
        text_appendf(out, "<rect class=\"rng\" x=\"%.1f\" y=\"%.1f\" width=\"%.1f\" height=\"6\"/>"
                          "<circle class=\"mid\" cx=\"%.1f\" cy=\"%.1f\" r=\"4\"/></g>",
                     x_low, y - 3, x_high - x_low > 1 ? x_high - x_low : 1, x_mid, y);
        svg_format_value(ranges[i].mid, label, sizeof(label));
        text_appendf(out, "<text class=\"val-l\" x=\"%.1f\" y=\"%.1f\">%s</text>", x_high + 8,
                     y + 4, label);
    }
    text_appendf(out, "<line class=\"axis\" x1=\"%.0f\" y1=\"%.0f\" x2=\"%.0f\" y2=\"%.0f\"/>",
                 left, bottom, right, bottom);
    text_appendf(out, "<text class=\"xl\" x=\"%.0f\" y=\"%d\">", (left + right) / 2, height - 4);
    text_append_escaped(out, unit, 80);
    text_append(out, "</text></svg>");
}

/* ---- heat map ------------------------------------------------------------------------------- */

static int clamp_int(int value, int low, int high)
{
    return value < low ? low : value > high ? high : value;
}

/* Tick spacing of 1, 2, 5, 10, ... columns so that labels are at least min_pixels apart. */
static uint32_t tick_stride(int cell_pixels, int min_pixels)
{
    uint32_t stride = 1;
    static const uint32_t factors[] = { 1, 2, 5 };
    for (uint32_t base = 1; base < 100000000u; base *= 10) {
        for (unsigned f = 0; f < 3; f++) {
            stride = base * factors[f];
            if ((uint64_t)stride * (uint64_t)cell_pixels >= (uint64_t)min_pixels)
                return stride;
        }
    }
    return stride;
}

void svg_heat_map(struct text_buffer *out, const struct svg_heat_map *map)
{
    const int left = 52, top = 6, right = 8, bottom = 32;
    const uint32_t rows = map->rows, columns = map->columns;
    const int max_width = map->max_width > 0 ? map->max_width : 720;
    const int max_height = map->max_height > 0 ? map->max_height : 480;
    const int cell_width = clamp_int(max_width / (int)(columns ? columns : 1), 2, 16);
    const int cell_height = clamp_int(max_height / (int)(rows ? rows : 1), 2, 12);
    const int grid_width = cell_width * (int)columns, grid_height = cell_height * (int)rows;
    const int width = left + grid_width + right, height = top + grid_height + bottom;
    struct text_buffer path;
    text_buffer_init(&path);

    svg_open(out, "heat", width, height, map->description);
    bool any_hatched = false;
    for (unsigned s = 0; s < map->state_count && s < SVG_HEAT_STATES_MAX; s++)
        any_hatched |= map->state_hatched[s];
    /* Rows a pixel apart read as rows: one pattern of white lines over the grid draws the gaps,
     * so the cells themselves can merge across rows. Below 5 px the gap would eat the cell. */
    bool row_gaps = cell_height >= 5;
    if (any_hatched || row_gaps) {
        text_append(out, "<defs>");
        if (any_hatched)
            text_appendf(out, "<pattern id=\"hatch-%u\" width=\"4\" height=\"4\" "
                              "patternUnits=\"userSpaceOnUse\" patternTransform=\"rotate(45)\">"
                              "<rect class=\"hatch-line\" width=\"1.5\" height=\"4\"/></pattern>",
                         map->id);
        if (row_gaps)
            text_appendf(out, "<pattern id=\"rows-%u\" width=\"%d\" height=\"%d\" y=\"%d\" "
                              "patternUnits=\"userSpaceOnUse\"><rect class=\"row-gap\" y=\"%d\" "
                              "width=\"%d\" height=\"1\"/></pattern>",
                         map->id, grid_width, cell_height, top, cell_height - 1, grid_width);
        text_append(out, "</defs>");
    }

    /* State 0 is the background: one rectangle. Each other state is one path of rectangles:
     * runs of equal cells along a row, as tall as the rows that repeat the same pattern. */
    text_appendf(out, "<rect class=\"%s\" x=\"%d\" y=\"%d\" width=\"%d\" height=\"%d\"/>",
                 map->state_count && map->state_classes[0] ? map->state_classes[0] : "cell", left,
                 top, grid_width, grid_height);
    for (unsigned state = 1; state < map->state_count && state < SVG_HEAT_STATES_MAX; state++) {
        path.length = 0;
        if (path.data)
            path.data[0] = '\0';
        for (uint32_t r = 0; r < rows;) {
            const uint8_t *row = map->cells + (size_t)r * columns;
            uint32_t next = r + 1;
            while (next < rows && memcmp(map->cells + (size_t)next * columns, row, columns) == 0)
                next++;
            int y = top + (int)r * cell_height, band = (int)(next - r) * cell_height;
            for (uint32_t c = 0; c < columns;) {
                if (row[c] != state) {
                    c++;
                    continue;
                }
                uint32_t end = c;
                while (end < columns && row[end] == state)
                    end++;
                int run = (int)(end - c) * cell_width;
                text_appendf(&path, "M%d %dh%dv%dh-%dz", left + (int)c * cell_width, y, run, band,
                             run);
                c = end;
            }
            r = next;
        }
        if (path.failed) {
            out->failed = true;
            break;
        }
        if (path.length == 0)
            continue;
        text_appendf(out, "<path class=\"%s\" d=\"%s\"/>",
                     map->state_classes[state] ? map->state_classes[state] : "cell", path.data);
        if (map->state_hatched[state])
            text_appendf(out, "<path fill=\"url(#hatch-%u)\" d=\"%s\"/>", map->id, path.data);
    }
    text_buffer_release(&path);
    if (row_gaps)
        text_appendf(out, "<rect fill=\"url(#rows-%u)\" x=\"%d\" y=\"%d\" width=\"%d\" "
                          "height=\"%d\"/>",
                     map->id, left, top, grid_width, grid_height);

    text_appendf(out, "<rect class=\"frame\" x=\"%d\" y=\"%d\" width=\"%d\" height=\"%d\"/>", left,
                 top, grid_width, grid_height);
    uint32_t row_stride = tick_stride(cell_height, 11);
    for (uint32_t r = 0; r < rows; r += row_stride) {
        text_appendf(out, "<text class=\"yt\" x=\"%d\" y=\"%.1f\">%llu</text>", left - 4,
                     top + r * (double)cell_height + cell_height / 2.0 + 3.5,
                     (unsigned long long)(map->row_labels ? map->row_labels[r] : r));
    }
    uint32_t column_stride = tick_stride(cell_width, 26);
    for (uint32_t c = 0; c < columns; c += column_stride) {
        text_appendf(out, "<text class=\"xt\" x=\"%.1f\" y=\"%d\">%u</text>",
                     left + c * (double)cell_width + cell_width / 2.0, top + grid_height + 12, c);
    }
    if (map->x_label) {
        text_appendf(out, "<text class=\"xl\" x=\"%d\" y=\"%d\">", left + grid_width / 2,
                     height - 4);
        text_append_escaped(out, map->x_label, 80);
        text_append(out, "</text>");
    }
    if (map->y_label) {
        text_appendf(out, "<text class=\"yl\" transform=\"translate(11 %d) rotate(-90)\">",
                     top + grid_height / 2);
        text_append_escaped(out, map->y_label, 40);
        text_append(out, "</text>");
    }
    text_append(out, "</svg>");
}
