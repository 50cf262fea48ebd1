/* gate's terminal table (gate.h "table", docs/GATE.md "Terminal output"): read back from the
 * verdict gate_verdict() wrote, so that the table and the JSON cannot say different things. */
#include "gate.h"

#include <stdio.h>
#include <string.h>

#include "terminal_text.h"

/* Reasons and rows shown per entry in the table (the verdict JSON has them all). */
#define GATE_TABLE_REASONS 6
#define GATE_TABLE_ROWS 12

/* A string of the verdict as the table shows it: escaped for the terminal (terminal_text.h;
 * at most TERMINAL_SAFE_SLOTS of them in use at once), since paths, hosts, reasons and policy
 * text come from files. */
static const char *string_of(const cJSON *object, const char *key, const char *fallback)
{
    const cJSON *item = cJSON_GetObjectItemCaseSensitive(object, key);
    return cJSON_IsString(item) ? terminal_safe(item->valuestring) : fallback;
}

static double number_of(const cJSON *object, const char *key)
{
    const cJSON *item = cJSON_GetObjectItemCaseSensitive(object, key);
    return cJSON_IsNumber(item) ? item->valuedouble : 0;
}

static void print_rows(FILE *out, const cJSON *rows)
{
    int count = cJSON_GetArraySize(rows), shown = 0;
    if (count == 0)
        return;
    fprintf(out, "  %-64s rows:", "");
    const cJSON *row;
    cJSON_ArrayForEach(row, rows) {
        if (shown++ == GATE_TABLE_ROWS) {
            fprintf(out, " ... (%d listed in the verdict)", count);
            break;
        }
        fprintf(out, " %.0f (%s", number_of(row, KEY_ROW), string_of(row, KEY_WHY, "?"));
        if (cJSON_GetObjectItemCaseSensitive(row, KEY_DEVICE_INDEX))
            fprintf(out, ", device %.0f", number_of(row, KEY_DEVICE_INDEX));
        if (cJSON_GetObjectItemCaseSensitive(row, KEY_REPS_DIFFERING))
            fprintf(out, ", %.0f reps", number_of(row, KEY_REPS_DIFFERING));
        fprintf(out, ")");
    }
    fprintf(out, "\n");
}

static void print_entry(FILE *out, const cJSON *entry)
{
    const char *status = string_of(entry, KEY_STATUS, "?");
    char where[64], label[16];
    const char *file = string_of(entry, KEY_FILE, "?");
    const char *slash = strrchr(file, '/');
    snprintf(where, sizeof(where), "%s:%.0f", slash ? slash + 1 : file,
             number_of(entry, KEY_INDEX));
    size_t i = 0;
    for (; status[i] && i + 1 < sizeof(label); i++)
        label[i] = (char)(status[i] >= 'a' && status[i] <= 'z' ? status[i] - 32 : status[i]);
    label[i] = '\0';
    const cJSON *reasons = cJSON_GetObjectItemCaseSensitive(entry, KEY_REASONS);
    const cJSON *tolerated_by = cJSON_GetObjectItemCaseSensitive(entry, KEY_TOLERATED_BY);
    fprintf(out, "  %-10s %-24s %-13s %-14s", label, where, string_of(entry, KEY_BACKEND, "?"),
            string_of(entry, KEY_LEVEL, "-"));
    if (cJSON_IsObject(tolerated_by))
        fprintf(out, " tolerated by %s: \"%s\"\n  %-64s", string_of(tolerated_by, KEY_RULE, "?"),
                string_of(tolerated_by, KEY_REASON, ""), "");
    int shown = 0;
    const cJSON *reason;
    cJSON_ArrayForEach(reason, reasons) {
        if (shown == GATE_TABLE_REASONS) {
            fprintf(out, "  %-64s ... (%d reasons in the verdict)\n", "",
                    cJSON_GetArraySize(reasons));
            break;
        }
        fprintf(out, shown ? "  %-64s %s\n" : "%s %s\n", "", terminal_safe(reason->valuestring));
        shown++;
    }
    if (shown == 0)
        fprintf(out, "\n");
    shown = 0;
    const cJSON *note;
    cJSON_ArrayForEach(note, cJSON_GetObjectItemCaseSensitive(entry, KEY_NOTES)) {
        if (shown++ == GATE_TABLE_REASONS)
            break;
        fprintf(out, "  %-64s note: %s\n", "", terminal_safe(note->valuestring));
    }
    print_rows(out, cJSON_GetObjectItemCaseSensitive(entry, KEY_ROWS));
}

void gate_table_print(FILE *out, const cJSON *verdict, const char *verdict_path)
{
    const cJSON *context = cJSON_GetObjectItemCaseSensitive(verdict, KEY_CONTEXT);
    const cJSON *baseline = cJSON_GetObjectItemCaseSensitive(context, KEY_BASELINE);
    const cJSON *policy = cJSON_GetObjectItemCaseSensitive(context, KEY_POLICY);
    fprintf(out, "# baseline %s (%s, %s, %s)", string_of(baseline, KEY_PATH, "?"),
            string_of(baseline, KEY_HOST, "unknown host"),
            string_of(baseline, KEY_DEVICE, "no device"), string_of(baseline, KEY_UTC_TIME, "?"));
    if (cJSON_IsObject(policy))
        fprintf(out, "; policy %s (%.0f rule(s))", string_of(policy, KEY_PATH, "?"),
                number_of(policy, KEY_RULES));
    fprintf(out, "\n");
    const cJSON *report;
    cJSON_ArrayForEach(report, cJSON_GetObjectItemCaseSensitive(verdict, KEY_REPORTS)) {
        const cJSON *summary = cJSON_GetObjectItemCaseSensitive(report, KEY_SUMMARY);
        fprintf(out,
                "# report %s (%s, %s, %s): %.0f entries: %.0f pass, %.0f fail, "
                "%.0f tolerated, %.0f missing\n",
                string_of(report, KEY_PATH, "?"), string_of(report, KEY_HOST, "unknown host"),
                string_of(report, KEY_DEVICE, "no device"), string_of(report, KEY_UTC_TIME, "?"),
                number_of(summary, KEY_ENTRIES), number_of(summary, gate_status_name(GATE_PASS)),
                number_of(summary, gate_status_name(GATE_FAIL)),
                number_of(summary, gate_status_name(GATE_TOLERATED)),
                number_of(summary, gate_status_name(GATE_MISSING)));
        const cJSON *reason;
        cJSON_ArrayForEach(reason, cJSON_GetObjectItemCaseSensitive(report, KEY_REPORT_REASONS))
            fprintf(out, "  %-10s %s\n", "REPORT", terminal_safe(reason->valuestring));
        cJSON_ArrayForEach(reason, cJSON_GetObjectItemCaseSensitive(report, KEY_REPORT_NOTES))
            fprintf(out, "  %-10s %s\n", "NOTE", terminal_safe(reason->valuestring));
        const cJSON *entry;
        cJSON_ArrayForEach(entry, cJSON_GetObjectItemCaseSensitive(report, KEY_ENTRIES))
            if (strcmp(string_of(entry, KEY_STATUS, gate_status_name(GATE_PASS)),
                       gate_status_name(GATE_PASS)) != 0)
                print_entry(out, entry);
    }
    const cJSON *unused;
    cJSON_ArrayForEach(unused, cJSON_GetObjectItemCaseSensitive(verdict, KEY_UNUSED_TOLERANCES))
        fprintf(out,
                "# note: %s tolerated nothing (\"%s\"): the failure is gone, or the entry "
                "does not match\n",
                string_of(unused, KEY_RULE, "?"), string_of(unused, KEY_REASON, ""));
    const cJSON *summary = cJSON_GetObjectItemCaseSensitive(verdict, KEY_SUMMARY);
    fprintf(out,
            "# gate %s: %.0f fail, %.0f tolerated, %.0f missing, %.0f pass of %.0f entries in "
            "%.0f report(s); %.0f report(s) failing as a whole\n",
            strcmp(string_of(summary, KEY_VERDICT, gate_status_name(GATE_FAIL)),
                   gate_status_name(GATE_PASS)) == 0
                ? "PASS"
                : "FAIL",
            number_of(summary, gate_status_name(GATE_FAIL)),
            number_of(summary, gate_status_name(GATE_TOLERATED)),
            number_of(summary, gate_status_name(GATE_MISSING)),
            number_of(summary, gate_status_name(GATE_PASS)), number_of(summary, KEY_ENTRIES),
            number_of(summary, KEY_REPORTS), number_of(summary, KEY_FAILING_REPORTS));
    if (verdict_path)
        fprintf(out, "# verdict: %s\n", terminal_safe(verdict_path));
}
