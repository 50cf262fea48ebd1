/* The visual report: one self-contained HTML page (inline SVG and CSS, no script or font from the
 * network) drawn from a run report and, optionally, a gate verdict (docs/REPORT.md "HTML"). */
#ifndef DSATOPK_HTML_REPORT_H
#define DSATOPK_HTML_REPORT_H

#include <cjson/cJSON.h>

#include "error.h"

/* report: a parsed "dsatopk-audit/report" document; verdict: a parsed "dsatopk-audit/gate"
 * document or NULL. Writes path atomically. */
int html_report_write(const char *path, const cJSON *report, const cJSON *verdict,
                      struct audit_error *err);

/* document: a parsed "dsatopk-audit/compare" document (docs/TRIAGE.md "compare"), drawn as its
 * own page with the same writer. Writes path atomically. */
int html_compare_write(const char *path, const cJSON *document, struct audit_error *err);

#endif
