#!/usr/bin/env bash
# diff: constructed pairs of captures for every case (identical; scores perturbed below the
# boundary gap; perturbed above it, the engine following; a tie flap on identical scores; a
# wrong engine selection on identical scores, beside perturbed scores, and kept although the
# scores moved), the JSON schema and summary, the table's verdict, page placement, a reproducer
# paired with its original by extracted_from, mismatched captures and the exit codes.
. "$(dirname "$0")/lib.sh"

need_python_with_numpy
D=$TMP

"$PYTHON" - "$D" <<'EOF' || fail "writing captures with the dsatopk_capture package (tools/python/)"
import sys
import numpy as np
from dsatopk_capture import append_record

d = sys.argv[1]
rng = np.random.default_rng(11)
rows, length, k = 6, 256, 16
a = rng.standard_normal((rows, length)).astype(np.float32)
lengths = [length] * rows

def exact(scores):
    # The reference's order for distinct finite values: descending, smaller index first.
    return np.stack([np.argsort(-row, kind="stable")[:k] for row in scores]).astype(np.int32)

def ranked(scores, b, rank):
    return int(np.argsort(-scores[b], kind="stable")[rank])

engine_a = exact(a)
append_record(f"{d}/a.bin", a, lengths, k, engine_indices=engine_a, metadata={"run": "A"})

def small(scores, b):
    # One ulp up on the row's smallest value: far below the boundary gap.
    i = ranked(scores, b, length - 1)
    scores[b, i] = np.nextafter(scores[b, i], np.float32(np.inf))

def big(scores, b):
    # The (k+1)-th value jumps above the maximum: it enters the top k.
    i = ranked(scores, b, k)
    scores[b, i] = scores[b].max() + np.float32(1.0)

def kernel(engine, b):
    # The engine swaps its last pick for the (k+1)-th candidate: a wrong set.
    engine[b, k - 1] = ranked(a, b, k)

def variant(name, edit):
    b_scores, b_engine = a.copy(), engine_a.copy()
    edit(b_scores, b_engine)
    append_record(f"{d}/{name}.bin", b_scores, lengths, k, engine_indices=b_engine,
                  metadata={"run": "B"})

variant("small", lambda s, e: small(s, 1))
def big_following(s, e):
    big(s, 2)
    e[2] = exact(s)[2]
variant("big", big_following)
variant("kernel", lambda s, e: kernel(e, 3))
def every_case(s, e):
    small(s, 1)                      # scores_differ_selection_same
    big(s, 2); e[2] = exact(s)[2]    # scores_differ_selection_changed
    kernel(e, 3)                     # scores_same_engine_differs
    small(s, 4); kernel(e, 4)        # scores_differ_engine_changed_alone
    big(s, 5)                        # scores_differ_engine_kept
variant("every", every_case)

# Two records against three; six rows against five.
append_record(f"{d}/a2.bin", a, lengths, k, engine_indices=engine_a)
append_record(f"{d}/a2.bin", a, lengths, k, engine_indices=engine_a)
for _ in range(3):
    append_record(f"{d}/b3.bin", a, lengths, k, engine_indices=engine_a)
append_record(f"{d}/five.bin", a[:5], lengths[:5], k, engine_indices=engine_a[:5])

# The same selection through two page placements (the KV cache put the pages elsewhere).
page = 64
cols = length // page
def paged(name, first_page):
    table = np.array([[first_page + rows * cols - (b * cols + c) for c in range(cols)]
                      for b in range(rows)], dtype=np.int32)
    translated = table[np.arange(rows)[:, None], engine_a // page] * page + engine_a % page
    append_record(f"{d}/{name}.bin", a, lengths, k, page_table=table, page_size=page,
                  engine_indices=translated.astype(np.int32))
paged("paged_a", 100)
paged("paged_b", 900)

# A tie at row 0's boundary: the k-th and (k+1)-th candidates hold the same value. Run A's
# engine takes the smaller index (the exact choice), run B's the larger: both valid, a tie flap.
tied = a.copy()
tied[0, ranked(a, 0, k)] = tied[0, ranked(a, 0, k - 1)]
engine_tied = exact(tied)
append_record(f"{d}/tie_a.bin", tied, lengths, k, engine_indices=engine_tied)
flapped = engine_tied.copy()
pair = sorted([ranked(a, 0, k - 1), ranked(a, 0, k)])
flapped[0, list(flapped[0]).index(pair[0])] = pair[1]
append_record(f"{d}/tie_b.bin", tied, lengths, k, engine_indices=flapped)
EOF

# ---- identical ----
expect_exit 0 "a capture against itself" -- "$AUDIT" diff "$D/a.bin" "$D/a.bin"
expect_grep "agree bit for bit" "$TMP/out" "the verdict says the captures agree"
expect_exit 0 "identical pair as JSON" -- "$AUDIT" diff --format json -o "$D/same.json" "$D/a.bin" "$D/a.bin"
json_check "$D/same.json" 'j["schema"] == "dsatopk-audit/diff" and j["schema_version"] == 3' "schema id and version"
json_check "$D/same.json" '"diff" in j["context"]["command_line"] and j["context"]["utc_time"].endswith("Z") and "command_line" not in j' \
    "the command line and the time are in the context block"
json_check "$D/same.json" 'j["summary"]["cases"]["identical"] == 6 and j["summary"]["rows_differing"] == 0 and j["records"][0]["differing_rows"] == []' \
    "every row identical, no per-row entry"
json_check "$D/same.json" 'j["summary"]["records_scores_identical"] == 1 and j["records"][0]["engine_compared"]' \
    "the call counts as identical scores, engine compared"

# ---- scores perturbed below the gap ----
expect_exit 1 "scores perturbed below the gap" -- "$AUDIT" diff --format json -o "$D/small.json" "$D/a.bin" "$D/small.bin"
json_check "$D/small.json" '[r["row"] for r in j["records"][0]["differing_rows"]] == [1]' "only row 1 listed"
json_check "$D/small.json" \
    'all(r["case"] == "scores_differ_selection_same" and r["attribution"] == "none" and r["differing_elements"] == 1 and r["max_ulp_diff"] == 1 and not r["perturbation_exceeds_gap"] and r["boundary_gap"] > r["max_abs_diff"] > 0 and not r["reference_set_changed"] and r["engine_set_changed"] is False for r in j["records"][0]["differing_rows"])' \
    "row 1: one element, 1 ulp, below the gap, no selection changed"

# ---- scores perturbed above the gap, the engine following ----
expect_exit 1 "scores perturbed above the gap" -- "$AUDIT" diff --format json -o "$D/big.json" "$D/a.bin" "$D/big.bin"
json_check "$D/big.json" \
    'all(r["row"] == 2 and r["case"] == "scores_differ_selection_changed" and r["attribution"] == "upstream" and r["perturbation_exceeds_gap"] and r["reference_set_changed"] and r["engine_set_changed"] for r in j["records"][0]["differing_rows"])' \
    "row 2: above the gap, exact and engine sets changed: upstream"
json_check "$D/big.json" 'j["summary"]["attribution"]["upstream"] == 1 and j["summary"]["records_reference_selection_changed"] == 1' \
    "summary: one upstream row, one call whose exact selection changed"
expect_exit 1 "the same pair as a table" -- "$AUDIT" diff "$D/a.bin" "$D/big.bin"
expect_grep "row 2 +scores_differ_selection_changed.*can cross: yes; exact set changed; engine set changed -> upstream" \
    "$TMP/out" "the table explains row 2"
expect_grep "verdict: the scores differ upstream of the selection" "$TMP/out" "the verdict blames upstream"

# ---- the engine's selection changed on identical scores: a wrong set, named ----
expect_exit 1 "engine selection changed with identical scores" -- "$AUDIT" diff --format json -o "$D/kernel.json" "$D/a.bin" "$D/kernel.bin"
json_check "$D/kernel.json" \
    'all(r["row"] == 3 and r["case"] == "engine_wrong" and r["attribution"] == "engine_wrong" and r["scores_identical"] and r["engine_set_changed"] and r["boundary_gap"] is None and r["engine_wrong_side"] == "B" and r["engine_a"]["class"] == "exact" and r["engine_b"]["class"] == "wrong" and "wrong_set" in r["engine_b"]["kinds"] and r["engine_b"]["missing_total"] == 1 for r in j["records"][0]["differing_rows"])' \
    "row 3: identical scores, B's engine set is not a top-k: engine_wrong, side B"
"$PYTHON" - "$D" >"$TMP/missing.txt" <<'EOF'
import json, sys
import numpy as np
from dsatopk_capture import read_records
d = sys.argv[1]
a = next(read_records(f"{d}/a.bin"))
row = json.load(open(f"{d}/kernel.json"))["records"][0]["differing_rows"][0]
# B dropped the k-th ranked candidate of row 3: that index is the one missing.
want = int(np.argsort(-a.scores[3], kind="stable")[a.k - 1])
print("ok" if row["engine_b"]["missing"] == [want] else f"missing {row['engine_b']['missing']} != [{want}]")
EOF
expect_grep '^ok$' "$TMP/missing.txt" "the missing index is the k-th ranked candidate B dropped"
json_check "$D/kernel.json" 'j["summary"]["records_scores_same_engine_differs"] == 1 and j["summary"]["records_scores_identical"] == 1 and j["summary"]["records_engine_wrong"] == 1 and j["summary"]["records_tie_flap"] == 0' \
    "summary: one call with identical scores and a different engine selection, which is wrong"
expect_exit 1 "the kernel pair as a table" -- "$AUDIT" diff "$D/a.bin" "$D/kernel.bin"
expect_grep "row 3 +engine_wrong .*B's engine selection wrong \(wrong_set\), missing [0-9]+ -> engine_wrong" "$TMP/out" \
    "the table names the side, the row and the missing index"
expect_grep "verdict: the engine selected a wrong set in 1 row " "$TMP/out" "the verdict says the engine is wrong"

# ---- a tie flap on identical scores ----
expect_exit 1 "engine selections differ among boundary ties" -- "$AUDIT" diff --format json -o "$D/tie.json" "$D/tie_a.bin" "$D/tie_b.bin"
json_check "$D/tie.json" \
    '[(r["row"], r["case"], r["attribution"], r["engine_a"]["class"], r["engine_b"]["class"], r["engine_wrong_side"]) for r in j["records"][0]["differing_rows"]] == [(0, "tie_flap", "tie_flap", "exact", "tie_variant", None)]' \
    "row 0: both valid, other boundary ties: tie_flap"
expect_exit 1 "the tie pair as a table" -- "$AUDIT" diff "$D/tie_a.bin" "$D/tie_b.bin"
expect_grep "verdict: the engine took other boundary ties in 1 row \(tie flap" "$TMP/out" "the verdict says tie flap, not wrong"

# ---- every case in one pair ----
expect_exit 1 "every case in one record" -- "$AUDIT" diff --format json -o "$D/every.json" "$D/a.bin" "$D/every.bin"
json_check "$D/every.json" \
    '{r["row"]: (r["case"], r["engine_wrong_side"]) for r in j["records"][0]["differing_rows"]} == {1: ("scores_differ_selection_same", None), 2: ("scores_differ_selection_changed", None), 3: ("engine_wrong", "B"), 4: ("engine_wrong", "B"), 5: ("engine_wrong", "B")}' \
    "rows 1-5: absorbed, upstream, and three wrong engine selections on side B"
json_check "$D/every.json" \
    'j["summary"]["cases"] == {"identical": 1, "scores_differ_selection_same": 1, "scores_differ_selection_changed": 1, "tie_flap": 0, "engine_reordered": 0, "engine_wrong": 3, "window_differs": 0}' \
    "the summary counts each case"
json_check "$D/every.json" \
    'j["summary"]["attribution"] == {"none": 2, "upstream": 1, "selection_kernel": 0, "tie_flap": 0, "engine_wrong": 3, "capture_mismatch": 0}' \
    "the summary counts each attribution"
json_check "$D/every.json" 'j["records"][0]["engine_wrong_rows_a"] == 0 and j["records"][0]["engine_wrong_rows_b"] == 3' \
    "the record counts the wrong rows per side"
expect_exit 1 "every case as a table" -- "$AUDIT" diff "$D/a.bin" "$D/every.bin"
expect_grep "^  engine_wrong +3  engine_wrong" "$TMP/out" "the table summary counts the engine_wrong case"
expect_grep "^calls \(records\): 0 with identical scores, 1 with different scores" "$TMP/out" \
    "the table counts calls as seed 000 did"

# ---- a reproducer against its original: rows paired by extracted_from ----
expect_exit 0 "extract rows 3 and 5 of a capture" -- "$AUDIT" extract "$D/small.bin" --records 0 --rows 1,3 -o "$D/repro.bin"
expect_exit 0 "diff of the original against its reproducer" -- "$AUDIT" diff --format json -o "$D/repro.json" "$D/small.bin" "$D/repro.bin"
json_check "$D/repro.json" 'j["summary"]["rows_compared"] == 2 and j["summary"]["cases"]["identical"] == 2 and j["records"][0]["index"] == 0 and not j["summary"]["mismatch"]' \
    "the reproducer's two rows meet rows 1 and 3 of the original, identical"
expect_exit 1 "the reproducer against the capture of another run" -- "$AUDIT" diff --format json -o "$D/repro.json" "$D/repro.bin" "$D/a.bin"
json_check "$D/repro.json" 'j["pairing"] == {"by": "extracted_from", "reproducer": "A"} and "not its source" in j["notes"][0] and [(r["row"], r["case"]) for r in j["records"][0]["differing_rows"]] == [(1, "scores_differ_selection_same")] and not j["summary"]["mismatch"]' \
    "another run's record: noted, not a mismatch; the reproducer's row 1 meets row 1 of A, not row 0"
expect_exit 0 "the reproducer against the capture it was cut from, as a table" -- "$AUDIT" diff "$D/repro.bin" "$D/small.bin"
expect_grep "^# records paired by extracted_from: A is a reproducer of B" "$TMP/out" "the table says how records were paired"
expect_grep "agree bit for bit" "$TMP/out" "a reproducer agrees with its source"
"$AUDIT" extract "$D/small.bin" --records 0 --rows 5 -o "$D/row5.bin" >/dev/null 2>&1
expect_exit 3 "a reproducer of rows the other capture lacks" -- "$AUDIT" diff "$D/five.bin" "$D/row5.bin"
expect_grep "not the same calls: B record 0: extracted_from names rows A record 0 lacks" "$TMP/err" "stderr says why"
if grep -q "agree bit for bit" "$TMP/out"; then fail "a mismatch ends with agree bit for bit"; else pass "a mismatch never agrees bit for bit"; fi

# ---- --k, -o ----
expect_exit 1 "--k 8 compares at another k" -- "$AUDIT" diff --k 8 --format json -o "$D/k8.json" "$D/a.bin" "$D/small.bin"
json_check "$D/k8.json" 'j["k_override"] == 8 and j["records"][0]["k"] == 8 and j["records"][0]["record_k_a"] == 16' "k 8 used, record k kept"
expect_exit 1 "-o writes the table to a file" -- "$AUDIT" diff -o "$D/table.txt" "$D/a.bin" "$D/small.bin"
[ ! -s "$TMP/out" ] && pass "-o leaves stdout empty" || fail "-o still printed to stdout"
expect_grep "^summary: 1 record, 6 rows compared, 1 differ" "$D/table.txt" "the table file holds the summary"

# ---- page placement ----
expect_exit 0 "same selection through two page placements" -- "$AUDIT" diff --format json -o "$D/paged.json" "$D/paged_a.bin" "$D/paged_b.bin"
json_check "$D/paged.json" 'j["summary"]["page_table_rows_differ"] == 6 and j["summary"]["cases"]["identical"] == 6' \
    "page tables differ on every row, yet no selection differs"

# ---- mismatched captures: exit 3, the common prefix still compared ----
expect_exit 3 "two records against three" -- "$AUDIT" diff --format json -o "$D/count.json" "$D/a2.bin" "$D/b3.bin"
json_check "$D/count.json" 'j["summary"]["records_compared"] == 2 and j["summary"]["mismatch"] and "A has 2, B has 3" in j["mismatches"][0]' \
    "record count mismatch reported, two records compared"
expect_grep "not the same calls: record count differs: A has 2, B has 3" "$TMP/err" "stderr says why"
expect_exit 3 "the same as a table" -- "$AUDIT" diff "$D/a2.bin" "$D/b3.bin"
expect_grep "^verdict: the captures are not of the same calls" "$TMP/out" "the verdict says they are not the same calls"
if grep -q "agree bit for bit" "$TMP/out"; then fail "identical common records of mismatched captures agree bit for bit"; else pass "mismatched captures never agree bit for bit"; fi
expect_exit 3 "six rows against five" -- "$AUDIT" diff --format json -o "$D/rows.json" "$D/a.bin" "$D/five.bin"
json_check "$D/rows.json" 'j["records"][0]["rows_compared"] == 5 and "rows differ (A 6, B 5)" in j["records"][0]["mismatches"][0]' \
    "rows mismatch reported, five rows compared"
head -c -7 "$D/small.bin" >"$D/cut.bin"
expect_exit 3 "a truncated capture" -- "$AUDIT" diff "$D/a.bin" "$D/cut.bin"
expect_grep "truncat" "$TMP/err" "the truncated record is named"

# ---- usage ----
expect_exit 2 "one capture only" -- "$AUDIT" diff "$D/a.bin"
expect_exit 2 "--format xml" -- "$AUDIT" diff --format xml "$D/a.bin" "$D/a.bin"
expect_exit 2 "--k 0" -- "$AUDIT" diff --k 0 "$D/a.bin" "$D/a.bin"
expect_exit 3 "a missing capture" -- "$AUDIT" diff "$D/a.bin" "$D/missing.bin"
expect_exit 0 "--help" -- "$AUDIT" diff --help
expect_grep "exit codes: 0 no row differs; 1 some row differs" "$TMP/out" "--help documents the exit codes"

finish
