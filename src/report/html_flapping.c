/* A record's flapping rows on the page (html_page.h): per backend, the rows x reps picture of
 * what the report proves about each row and rep. */
#include "html_page.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum heat_state { HEAT_SAME, HEAT_DIFFERS, HEAT_UNKNOWN, HEAT_STATES };

/* Whether a row's entry lists the exact reps it differed in (an optional field). */
static const cJSON *flapping_exact_reps(const cJSON *entry)
{
    const cJSON *reps = html_member_array(entry, "differing_reps");
    return reps ? reps : html_member_array(entry, "reps_list");
}

/* The rows drawn: every row of a small record (labelled with its row of the file), else the
 * listed flapping rows; entries receives each row's flapping entry (NULL: none). */
static uint32_t heat_rows(const cJSON *record, const cJSON *flapping, uint64_t *row_labels,
                          const cJSON **entries, bool *all_rows)
{
    double record_rows = html_number_or(record, KEY_ROWS, 0);
    const cJSON *source_rows = html_member_array(record, KEY_SOURCE_ROWS);
    const cJSON *entry;
    uint32_t rows = 0;
    *all_rows = record_rows > 0 && record_rows <= HEAT_MAX_ROWS;
    if (!*all_rows) {
        cJSON_ArrayForEach(entry, flapping) {
            double row;
            if (rows == HEAT_MAX_ROWS)
                break;
            if (!html_row_number(entry, &row))
                continue;
            row_labels[rows] = (uint64_t)row;
            entries[rows++] = entry;
        }
        return rows;
    }
    rows = (uint32_t)record_rows;
    for (uint32_t r = 0; r < rows; r++) {
        const cJSON *source = source_rows ? cJSON_GetArrayItem(source_rows, (int)r) : NULL;
        double source_row;
        row_labels[r] = source && html_row_number(source, &source_row) ? (uint64_t)source_row : r;
        entries[r] = NULL;
    }
    int read = 0;
    cJSON_ArrayForEach(entry, flapping) {
        double row;
        if (read++ == FLAPPING_ENTRIES_READ)
            break;
        if (!html_member_number(entry, KEY_ROW, &row))
            continue;
        for (uint32_t r = 0; r < rows; r++)
            if ((double)row_labels[r] == row)
                entries[r] = entry;
    }
    return rows;
}

/* Fills cells (rows x columns) with what the report proves: which reps may differ from rep 0
 * (those whose output hash is not rep 0's, or every rep when the hashes are not all there), and
 * per row whether it differed in all of them, in the reps it lists, or in some unknown ones.
 * Returns the rows with unknown cells. */
static uint32_t heat_cells(const cJSON *backend, double reps_value, uint32_t reps, uint32_t columns,
                           const cJSON *const *entries, uint32_t rows, uint8_t *may_differ,
                           uint8_t *cells)
{
    const cJSON *hashes = html_member_array(backend, KEY_OUTPUT_SHA256_PER_REP);
    bool hashes_known = hashes && (double)cJSON_GetArraySize(hashes) == reps_value;
    const char *first_hash =
        hashes_known ? cJSON_GetStringValue(cJSON_GetArrayItem(hashes, 0)) : NULL;
    /* candidates counts every rep that may differ, drawn or not. */
    uint32_t candidates = 0;
    if (hashes_known && first_hash) {
        const cJSON *hash;
        uint32_t rep = 0;
        cJSON_ArrayForEach(hash, hashes) {
            const char *text = cJSON_GetStringValue(hash);
            bool differs = rep > 0 && (!text || strcmp(text, first_hash) != 0);
            if (rep < columns)
                may_differ[rep] = differs;
            candidates += differs;
            rep++;
        }
    } else {
        for (uint32_t rep = 1; rep < columns; rep++)
            may_differ[rep] = 1;
        candidates = reps - 1;
    }
    uint32_t unknown_rows = 0;
    for (uint32_t r = 0; r < rows; r++) {
        uint8_t *row = cells + (size_t)r * columns;
        const cJSON *entry = entries[r];
        const cJSON *exact = flapping_exact_reps(entry);
        double differing = html_number_or(entry, KEY_REPS_DIFFERING, 0);
        if (exact) {
            const cJSON *rep;
            cJSON_ArrayForEach(rep, exact) {
                if (cJSON_IsNumber(rep) && rep->valuedouble >= 0 && rep->valuedouble < columns)
                    row[(uint32_t)rep->valuedouble] = HEAT_DIFFERS;
            }
            continue;
        }
        if (!entry || differing <= 0)
            continue;
        uint8_t state = differing >= candidates ? HEAT_DIFFERS : HEAT_UNKNOWN;
        for (uint32_t c = 0; c < columns; c++) {
            if (may_differ[c])
                row[c] = state;
        }
        unknown_rows += state == HEAT_UNKNOWN;
    }
    return unknown_rows;
}

/* The rows x reps picture of one backend. The report gives, per row, how many reps differed from
 * rep 0, and per rep its output hash: a rep with rep 0's hash differs nowhere, and a row that
 * differed in as many reps as there are reps with another hash differed in all of them. What
 * those two facts leave open is drawn as "unknown" rather than guessed. */
static void write_heat_map(struct html_writer *writer, const cJSON *record, const cJSON *backend,
                           bool *heading_written)
{
    const cJSON *flapping = html_member_array(backend, KEY_FLAPPING_ROWS);
    double total_flapping = html_number_or(backend, KEY_FLAPPING_ROWS_TOTAL, 0);
    double reps_value = html_number_or(backend, KEY_REPS, 0);
    if ((total_flapping <= 0 && cJSON_GetArraySize(flapping) == 0) || reps_value < 2)
        return;
    /* Reps as the report says, capped where no real run goes (only counted, never allocated). */
    uint32_t reps = reps_value > 1e9 ? 1000000000u : (uint32_t)reps_value;
    uint32_t columns = reps < HEAT_MAX_REPS ? reps : HEAT_MAX_REPS;
    uint64_t row_labels[HEAT_MAX_ROWS];
    const cJSON *entries[HEAT_MAX_ROWS];
    bool all_rows;
    uint32_t rows = heat_rows(record, flapping, row_labels, entries, &all_rows);
    if (rows == 0)
        return;
    uint8_t *may_differ = calloc(columns, 1); /* per drawn rep */
    uint8_t *cells = calloc((size_t)rows * columns, 1);
    if (!may_differ || !cells) {
        writer->out.failed = true;
        goto done;
    }
    uint32_t unknown_rows =
        heat_cells(backend, reps_value, reps, columns, entries, rows, may_differ, cells);

    if (!*heading_written)
        html_put(writer, "<h3>Flapping rows</h3><div class=\"panels\">");
    *heading_written = true;
    html_put(writer, "<div class=\"panel heatbox\"><b>");
    html_put_text(writer, html_member_string(backend, KEY_NAME), NAME_LIMIT);
    html_put(writer, "</b>: rows that differ from rep 0, per rep"
                     "<div class=\"legend\"><span class=\"sw same\"></span>same as rep 0"
                     "<span class=\"sw diff\"></span>differs");
    if (unknown_rows)
        html_put(writer, "<span class=\"sw unk\"></span>unknown: this rep's output differs "
                         "somewhere, the report does not say whether in this row");
    html_put(writer, "</div>");
    char description[160];
    snprintf(description, sizeof(description), "rows x reps: %u rows, %u reps, dark cells differ "
                                               "from rep 0", rows, columns);
    struct svg_heat_map map = {
        .rows = rows,
        .columns = columns,
        .cells = cells,
        .state_count = HEAT_STATES,
        .state_classes = { "h-same", "h-diff", "h-unk" },
        .state_hatched = { false, false, true },
        .row_labels = row_labels,
        .x_label = "rep",
        .y_label = "row",
        .description = description,
        .id = writer->next_svg_id++,
        .max_width = 900,
        .max_height = 320,
    };
    svg_heat_map(&writer->out, &map);
    if (!all_rows) {
        html_putf(writer, "<p class=\"note\">Only flapping rows are drawn: the first %u of ", rows);
        html_put_number(writer, total_flapping);
        html_put(writer, " flapping rows of ");
        html_put_number(writer, html_number_or(record, KEY_ROWS, 0));
        html_put(writer, ".</p>");
    }
    if (columns < reps)
        html_putf(writer, "<p class=\"note\">The first %u of %u reps are drawn.</p>", columns,
                  reps);
    html_put(writer, "</div>");
done:
    free(may_differ);
    free(cells);
}

void html_write_flapping(struct html_writer *writer, const cJSON *record)
{
    const cJSON *backend;
    bool heading_written = false;
    int shown = 0;
    cJSON_ArrayForEach(backend, html_member_array(record, KEY_BACKENDS)) {
        if (shown++ == MAX_BACKENDS)
            break;
        write_heat_map(writer, record, backend, &heading_written);
    }
    if (heading_written)
        html_put(writer, "</div>");
    else
        html_put(writer, "<p class=\"note\">No row flapped on any backend of this record.</p>");
}
