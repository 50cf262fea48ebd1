/* Small SVG plotting helpers for the HTML report (src/report/html_report.c): a growable text buffer
 * with HTML escaping, a bar chart over labelled bins (log-binned histograms), a log-scale axis
 * with 1-2-5 ticks and a range plot on it, and a rows x columns heat map.
 *
 * The output is inline SVG for an HTML5 document: no xmlns, no script, no external reference.
 * Colours come from CSS classes the page defines, so the plots stay small and a palette change
 * is one place. Every piece of text, including our own labels, goes through the escaper. */
#ifndef DSATOPK_SVG_H
#define DSATOPK_SVG_H

#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* ---- text buffer ---------------------------------------------------------------------------- */

/* Grows by doubling; an allocation failure sets failed and makes every later append a no-op, so
 * writers check once at the end. data is always NUL-terminated once anything was appended. */
struct text_buffer {
    char *data;
    size_t length, capacity;
    bool failed;
};

void text_buffer_init(struct text_buffer *buffer);
void text_buffer_release(struct text_buffer *buffer);
void text_append(struct text_buffer *buffer, const char *text);
void text_appendf(struct text_buffer *buffer, const char *format, ...)
    __attribute__((format(printf, 2, 3)));
/* Appends text HTML-escaped (& < > " ' become entities, so it is safe in element content and in
 * quoted attributes); C0 control characters other than tab and newline become U+FFFD. At most
 * max_bytes of text are kept (cut at a UTF-8 character boundary, then an ellipsis); 0: no limit.
 * NULL appends nothing. */
void text_append_escaped(struct text_buffer *buffer, const char *text, size_t max_bytes);

/* ---- bins and labels ------------------------------------------------------------------------ */

/* Power-of-two bin of a count >= 1: 0 for 1, j for [2^j, 2^(j+1)). 0 maps to bin 0. */
unsigned svg_log2_bin(uint64_t value);
/* Compact label of 2^exponent: "1", "512", "1k", "64k", "1M", "4G". */
void svg_power_of_two_label(unsigned exponent, char *label, size_t size);
/* floor(log10(value)) of a positive finite value, exact at powers of ten. */
int svg_decade(double value);
/* Label of 10^decade: "0.01", "1", "1000" for decades -3..3, else "1e-7", "1e+12". */
void svg_decade_label(int decade, char *label, size_t size);
/* A number in at most 4 significant digits without an exponent for 1e-3 <= |v| < 1e6. */
void svg_format_value(double value, char *label, size_t size);

/* ---- bar chart ------------------------------------------------------------------------------ */

#define SVG_SERIES_MAX 2
#define SVG_LABEL_BYTES 24

struct svg_bin {
    char label[SVG_LABEL_BYTES];
    double values[SVG_SERIES_MAX]; /* stacked, series 0 at the bottom */
};

struct svg_bar_chart {
    const char *title;                           /* above the plot */
    const char *x_label, *y_label;
    unsigned series_count;                       /* 1 or 2 */
    const char *series_names[SVG_SERIES_MAX];    /* legend; NULL: no legend entry */
    const char *series_classes[SVG_SERIES_MAX];  /* CSS class of each series' bars */
    int width, height;                           /* pixels */
};

/* Vertical bars, one per bin, stacked by series, a linear count axis from 0 and the bin labels
 * under the bars (thinned out when there are many). Each bar carries a tooltip with its counts. */
void svg_bar_chart(struct text_buffer *out, const struct svg_bar_chart *chart,
                   const struct svg_bin *bins, size_t bin_count);

/* ---- log axis and range plot ---------------------------------------------------------------- */

#define SVG_LOG_TICKS_MAX 48

/* A base-10 log axis over [low, high], both > 0: the range is widened to the enclosing 1-2-5
 * values, ticks at every 1, 2 and 5 x 10^e inside it (only the decades when that is too many). */
struct svg_log_axis {
    double low, high;
    unsigned tick_count;
    double ticks[SVG_LOG_TICKS_MAX];
};

void svg_log_axis_init(struct svg_log_axis *axis, double low, double high);
/* Pixel position of value between x0 (low) and x1 (high); clamped to the range. */
double svg_log_axis_position(const struct svg_log_axis *axis, double value, double x0, double x1);

struct svg_range {
    const char *label;
    bool valid;            /* false: drawn as "n/a" */
    double low, mid, high; /* > 0 */
};

/* One line per item on a shared log axis: a bar from low to high with a dot at mid and mid's
 * value written after it; unit names the axis. */
void svg_range_plot(struct text_buffer *out, const char *title, const char *unit,
                    const struct svg_range *ranges, size_t count, int width);

/* ---- heat map ------------------------------------------------------------------------------- */

#define SVG_HEAT_STATES_MAX 4

struct svg_heat_map {
    uint32_t rows, columns;
    const uint8_t *cells;          /* rows * columns states, row-major, < state_count */
    unsigned state_count;
    const char *state_classes[SVG_HEAT_STATES_MAX]; /* CSS class per state; "hatch" states are
                                                        drawn with a diagonal hatch on top */
    bool state_hatched[SVG_HEAT_STATES_MAX];
    const uint64_t *row_labels;    /* number shown left of each row; NULL: the row index */
    const char *x_label, *y_label;
    const char *description;       /* the SVG's <title> */
    unsigned id;                   /* makes the hatch pattern id unique in the page */
    int max_width, max_height;     /* of the grid, pixels; cells shrink to fit, 2 px at least */
};

/* Cells of equal state that follow each other in a row are drawn as one rectangle, as tall as the
 * consecutive rows with the same pattern, and all the rectangles of a state as one path, so a map
 * of thousands of cells stays a few KB. State 0 is the background. */
void svg_heat_map(struct text_buffer *out, const struct svg_heat_map *map);

#endif
